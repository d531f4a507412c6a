/* e2e_helper: the C program behind the end-to-end tests (tests/e2e/run) that
 * need raw syscalls, threads, fork/exec, mmap, dup, stdio or io_uring on
 * tagged files. One mode per sub-test; each verifies its own bytes. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "e2e_helper"
/* exit status of a sub-test that cannot run here (not a failure) */
#define EXIT_NOTE 77

static const char *mode = "?";
static char *self_exe;

static _Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, PROG " %s: FAIL: ", mode);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static _Noreturn void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void note(const char *fmt, ...)
{
	va_list ap;
	printf("NOTE ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(EXIT_NOTE);
}

/* ---- data: a byte stream that depends only on (seed, offset) ------------- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Bytes [off, off+n) of stream seed: any slice can be checked on its own,
 * so interleaved or partial writes are verifiable. */
static void pattern(unsigned char *b, uint64_t off, size_t n, uint64_t seed)
{
	uint64_t salt = mix64(seed ^ 0xC0FFEEull);
	size_t i = 0;
	while (i < n) {
		uint64_t k = off + i, w = mix64(salt ^ (k >> 3));
		for (unsigned j = (unsigned)(k & 7); j < 8 && i < n; j++, i++)
			b[i] = (unsigned char)(w >> (8 * j));
	}
}

/* Offset of the first byte of b that differs from the stream, or n. */
static size_t pattern_diff(const unsigned char *b, uint64_t off, size_t n, uint64_t seed)
{
	unsigned char tmp[4096];
	for (size_t done = 0; done < n;) {
		size_t m = n - done < sizeof(tmp) ? n - done : sizeof(tmp);
		pattern(tmp, off + done, m, seed);
		if (memcmp(tmp, b + done, m) != 0)
			for (size_t j = 0; j < m; j++)
				if (tmp[j] != b[done + j])
					return done + j;
		done += m;
	}
	return n;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		fail("out of memory (%zu bytes)", n);
	return p;
}

static unsigned char *pattern_buf(size_t n, uint64_t seed)
{
	unsigned char *b = xmalloc(n);
	pattern(b, 0, n, seed);
	return b;
}

/* ---- argument parsing ------------------------------------------------------ */

static uint64_t num(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	uint64_t mul = 1;
	if (end == s || errno || v < 0)
		fail("'%s' is not a number", s);
	switch (*end) {
	case 'K': mul = 1u << 10; end++; break;
	case 'M': mul = 1u << 20; end++; break;
	case 'G': mul = 1u << 30; end++; break;
	default: break;
	}
	if (*end)
		fail("'%s' is not a number", s);
	return (uint64_t)(v * (double)mul);
}

static void need_args(int argc, int n, const char *usage)
{
	if (argc < n) {
		fprintf(stderr, "usage: " PROG " %s %s\n", mode, usage);
		exit(2);
	}
}

/* The operands most modes take, named as in their usage line. */
struct args {
	const char *path;  /* PATH or DIR */
	const char *path2; /* PATH2 */
	long n;		   /* N */
	size_t size;	   /* SIZE */
	uint64_t seed;	   /* SEED */
};

/* The word of usage after the one at w. */
static const char *next_word(const char *w)
{
	w += strcspn(w, " ");
	return w + strspn(w, " ");
}

/* need_args for the operands before the first "[...]" of usage, then reads
 * each of them whose name struct args knows; the others (READ, HINTS,
 * append|truncate, ...) are left in argv for the mode. */
static struct args parse_args(int argc, char **argv, const char *usage)
{
	struct args a = { 0 };
	int nargs = 1;
	for (const char *w = usage; *w && *w != '['; w = next_word(w))
		nargs++;
	need_args(argc, nargs, usage);
	const char *w = usage;
	for (int i = 1; i < nargs; i++, w = next_word(w)) {
		size_t len = strcspn(w, " ");
#define IS(name) (len == sizeof(name) - 1 && strncmp(w, name, len) == 0)
		if (IS("PATH") || IS("DIR"))
			a.path = argv[i];
		else if (IS("PATH2"))
			a.path2 = argv[i];
		else if (IS("N"))
			a.n = (long)num(argv[i]);
		else if (IS("SIZE"))
			a.size = num(argv[i]);
		else if (IS("SEED"))
			a.seed = num(argv[i]);
#undef IS
	}
	return a;
}

/* the optional CHUNK after PATH SIZE SEED: 0 for one write or read */
static size_t chunk_arg(int argc, char **argv)
{
	return argc > 4 ? num(argv[4]) : 0;
}

/* Whether the optional operand at argv[i] asks for the "verify" pass only. */
static bool verify_only(int argc, char **argv, int i)
{
	return argc > i && strcmp(argv[i], "verify") == 0;
}

/* ---- I/O through the library ----------------------------------------------- */

/* open(2) that fails the test; a file it creates gets mode 0644 */
static int xopen(const char *path, int flags)
{
	int fd = open(path, flags, 0644);
	if (fd < 0)
		fail("open %s: %s", path, strerror(errno));
	return fd;
}

/* close(2) that fails the test: a tagged writer reports a failed flush here */
static void xclose(int fd, const char *path)
{
	if (close(fd) != 0)
		fail("close %s: %s", path, strerror(errno));
}

/* fopen(3) that fails the test */
static FILE *xfopen(const char *path, const char *how)
{
	FILE *f = fopen(path, how);
	if (!f)
		fail("fopen %s %s: %s", path, how, strerror(errno));
	return f;
}

static void xfclose(FILE *f)
{
	if (fclose(f) != 0)
		fail("fclose: %s", strerror(errno));
}

static void write_all(int fd, const unsigned char *b, size_t n, const char *what)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail("write %s: %s", what, w < 0 ? strerror(errno) : "wrote 0 bytes");
		b += w;
		n -= (size_t)w;
	}
}

static size_t read_all(int fd, unsigned char *b, size_t n, const char *what)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail("read %s: %s", what, strerror(errno));
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Writes size bytes of stream seed to path with open/write/close. */
static void gen_file(const char *path, size_t size, uint64_t seed, size_t chunk)
{
	unsigned char *b = pattern_buf(size, seed);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open %s for writing: %s", path, strerror(errno));
	if (!chunk)
		chunk = size ? size : 1;
	for (size_t k = 0; k < size; k += chunk)
		write_all(fd, b + k, size - k < chunk ? size - k : chunk, path);
	xclose(fd, path);
	free(b);
}

/* Reads path back with open/fstat/read and compares it with the stream. */
static void check_file(const char *path, size_t size, uint64_t seed, size_t chunk)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0)
		fail("open %s for reading: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0)
		fail("fstat %s: %s", path, strerror(errno));
	if ((uint64_t)st.st_size != size)
		fail("fstat %s: size %lld, expected %zu", path, (long long)st.st_size, size);
	unsigned char *b = xmalloc(size + 1);
	if (!chunk)
		chunk = size + 1;
	size_t got = 0;
	for (;;) {
		size_t want = size + 1 - got < chunk ? size + 1 - got : chunk;
		if (want == 0)
			break;
		size_t r = read_all(fd, b + got, want, path);
		got += r;
		if (r < want)
			break;
	}
	if (got != size)
		fail("%s: read %zu bytes, expected %zu", path, got, size);
	size_t d = pattern_diff(b, 0, size, seed);
	if (d != size)
		fail("%s: byte %zu differs from what was written", path, d);
	xclose(fd, path);
	free(b);
}

/* Writes path (stream seed) and opens it for reading. */
static int gen_open(const char *path, size_t size, uint64_t seed)
{
	gen_file(path, size, seed, 0);
	return xopen(path, O_RDONLY);
}

/* Whether the next n bytes read from fd are expect's. */
static bool reads_back(int fd, unsigned char *b, const unsigned char *expect, size_t n,
		       const char *path)
{
	return read_all(fd, b, n, path) == n && memcmp(b, expect, n) == 0;
}

/* ---- I/O around the library: raw system calls ------------------------------ */

static int raw_open(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0);
}

static ssize_t raw_read(int fd, void *b, size_t n)
{
	return (ssize_t)syscall(SYS_read, fd, b, n);
}

/* Whether path exists at its real location (the library cannot see this). */
static bool raw_exists(const char *path)
{
	struct stat st;
	return syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0;
}

/* The real file at path holds exactly `size` bytes equal to expect. */
static void raw_check(const char *path, const unsigned char *expect, size_t size, const char *when)
{
	int fd = raw_open(path, O_RDONLY);
	if (fd < 0)
		fail("%s: the real file %s cannot be opened: %s", when, path, strerror(errno));
	unsigned char *b = xmalloc(size + 1);
	size_t got = 0;
	for (;;) {
		ssize_t r = raw_read(fd, b + got, size + 1 - got);
		if (r < 0)
			fail("%s: raw read of %s: %s", when, path, strerror(errno));
		if (r == 0 || (got += (size_t)r) == size + 1)
			break;
	}
	struct stat st;
	if (syscall(SYS_fstat, fd, &st) == 0 && (size_t)st.st_size != size)
		got = (size_t)st.st_size;
	syscall(SYS_close, fd);
	if (got != size)
		fail("%s: the real file %s holds %zu bytes, expected %zu", when, path, got, size);
	if (memcmp(b, expect, size) != 0) {
		size_t d = 0;
		while (b[d] == expect[d])
			d++;
		fail("%s: the real file %s differs at byte %zu", when, path, d);
	}
	free(b);
}

/* A pause that lets the library's background work (flushes, hint reloads) run. */
static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- modes: files ------------------------------------------------------------ */

static int m_gen(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED [CHUNK]");
	gen_file(arg.path, arg.size, arg.seed, chunk_arg(argc, argv));
	return 0;
}

static int m_check(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED [CHUNK]");
	check_file(arg.path, arg.size, arg.seed, chunk_arg(argc, argv));
	return 0;
}

/* This process's resident memory (VmRSS), in KiB. */
static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	if (kb < 0)
		fail("no VmRSS in /proc/self/status");
	return kb;
}

/* rss PATH SIZE SEED N: the resident memory of this process (KiB) before N
 * checkpoints PATH.0.. of SIZE bytes, after writing and reading them back
 * and a second of quiet, and once they were removed and the cache idle for
 * two seconds and a half. */
static int m_rss(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED N");
	char p[PATH_MAX];
	/* this program's own buffers go back to the system when freed (glibc
	 * would otherwise raise its mapping threshold and keep them) */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	long before = rss_kib();
	for (long i = 0; i < arg.n; i++) {
		snprintf(p, sizeof(p), "%s.%ld", arg.path, i);
		gen_file(p, arg.size, arg.seed + (uint64_t)i, 0);
		check_file(p, arg.size, arg.seed + (uint64_t)i, 0);
	}
	sleep_ms(1000);
	long cached = rss_kib();
	for (long i = 0; i < arg.n; i++) {
		snprintf(p, sizeof(p), "%s.%ld", arg.path, i);
		if (unlink(p) != 0)
			fail("unlink %s: %s", p, strerror(errno));
	}
	sleep_ms(2500);
	printf("rss_kib before=%ld cached=%ld after=%ld\n", before, cached, rss_kib());
	return 0;
}

/* Write then read back in the same process: the read must come from the
 * cache (the driver checks the statistics). */
static int m_wr(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED [CHUNK]");
	size_t chunk = chunk_arg(argc, argv);
	gen_file(arg.path, arg.size, arg.seed, chunk);
	check_file(arg.path, arg.size, arg.seed, chunk);
	return 0;
}

static int m_rawcheck(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed);
	raw_check(arg.path, e, arg.size, "rawcheck");
	free(e);
	return 0;
}

/* Checkpoint i of a numbered series in dir: dir/PREFIX_NNN.bin. */
static void nth_path(char path[PATH_MAX], const char *dir, const char *prefix, long i)
{
	snprintf(path, PATH_MAX, "%s/%s_%03ld.bin", dir, prefix, i);
}

/* The names checkpoint i of a series in dir is written under and renamed
 * to: tmp = dir/PREFIX_NNN.bin.tmp, path = dir/PREFIX_NNN.bin. */
static void tmp_and_path(char tmp[PATH_MAX], char path[PATH_MAX], const char *dir, const char *prefix,
			 long i)
{
	nth_path(path, dir, prefix, i);
	snprintf(tmp, PATH_MAX, "%s/%s_%03ld.bin.tmp", dir, prefix, i);
}

/* Reads back checkpoint i of a history (stream seed+i). */
static void hist_check(const char *dir, long i, size_t size, uint64_t seed)
{
	char path[PATH_MAX];
	nth_path(path, dir, "h", i);
	check_file(path, size, seed + (uint64_t)i, 0);
}

/* history DIR N SIZE SEED READ: writes DIR/h_NNN.bin for i < N (stream
 * SEED+i), then reads back whole the ones listed in READ (comma-separated
 * indices, "all" for every one from the last, or "none"). */
static int m_history(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED READ");
	char path[PATH_MAX];
	for (long i = 0; i < arg.n; i++) {
		nth_path(path, arg.path, "h", i);
		gen_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	if (strcmp(argv[5], "all") == 0) {
		for (long i = arg.n - 1; i >= 0; i--)
			hist_check(arg.path, i, arg.size, arg.seed);
	} else if (strcmp(argv[5], "none") != 0) {
		char *list = strdup(argv[5]), *save = NULL;
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
			hist_check(arg.path, (long)num(t), arg.size, arg.seed);
		free(list);
	}
	return 0;
}

/* histcheck DIR N SIZE SEED: every file of a history holds its bytes.
 * (SIZE and SEED are read only when N > 0, hence no parse_args.) */
static int m_histcheck(int argc, char **argv)
{
	need_args(argc, 5, "DIR N SIZE SEED");
	for (long i = 0; i < (long)num(argv[2]); i++)
		hist_check(argv[1], i, num(argv[3]), num(argv[4]));
	return 0;
}

/* rewrite PATH N SIZE SEED: N versions of one checkpoint, of different
 * sizes, some read back; the last one must be what remains. */
static int m_rewrite(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH N SIZE SEED");
	for (long i = 0; i < arg.n; i++) {
		size_t sz = arg.size - (size_t)(i % 7) * 40961;
		gen_file(arg.path, sz, arg.seed + (uint64_t)i, i % 2 ? 65536 : 0);
		if (i % 3 == 0 || i == arg.n - 1)
			check_file(arg.path, sz, arg.seed + (uint64_t)i, 0);
	}
	printf("rewrite: %ld versions\n", arg.n);
	return 0;
}

/* growhints DIR HINTS N SIZE: writes N checkpoints, then appends their
 * restore order to the hint file one line at a time (as a program that
 * decides its order as it goes), waits, and reads them in that order. */
static int m_growhints(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR HINTS N SIZE");
	char path[PATH_MAX], line[PATH_MAX + 2];
	for (long i = 0; i < arg.n; i++) {
		nth_path(path, arg.path, "g", i);
		gen_file(path, arg.size, 300 + (uint64_t)i, 0);
	}
	int h = xopen(argv[2], O_WRONLY | O_APPEND);
	for (long k = 0; k < arg.n; k++) {
		long i = (k * 3 + 1) % arg.n;
		nth_path(path, arg.path, "g", i);
		int m = snprintf(line, sizeof(line), "%s\n", path);
		if (write(h, line, (size_t)m) != m)
			fail("appending to %s: %s", argv[2], strerror(errno));
		sleep_ms(10);
	}
	close(h);
	/* the library picks appended lines up within 50 ms */
	sleep_ms(300);
	for (long k = 0; k < arg.n; k++) {
		long i = (k * 3 + 1) % arg.n;
		nth_path(path, arg.path, "g", i);
		check_file(path, arg.size, 300 + (uint64_t)i, 0);
	}
	printf("growhints: %ld checkpoints read in the appended order\n", arg.n);
	return 0;
}

/* ---- modes: threads ---------------------------------------------------------- */

#define NWRITERS 4
#define NSHARERS 2
/* odd sizes so that no write lines up with the cache's 4 KiB extents */
#define THR_CHUNK 65537u
#define SHARED_CHUNK 40961u

struct thr {
	pthread_t tid;
	int idx;
	char path[PATH_MAX];
	size_t size;
	uint64_t seed;
	int fd; /* shared descriptor for the pwrite threads */
	const char *err;
	int err_no;
};

static pthread_barrier_t thr_barrier;

static void *writer_thread(void *arg)
{
	struct thr *t = arg;
	unsigned char *b = pattern_buf(t->size, t->seed);
	pthread_barrier_wait(&thr_barrier);
	int fd = open(t->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		t->err = "open";
		t->err_no = errno;
		free(b);
		return NULL;
	}
	for (size_t k = 0; k < t->size && !t->err;) {
		size_t m = t->size - k < THR_CHUNK ? t->size - k : THR_CHUNK;
		ssize_t w = write(fd, b + k, m);
		if (w <= 0) {
			t->err = "write";
			t->err_no = w < 0 ? errno : EIO;
		} else {
			k += (size_t)w;
		}
	}
	if (close(fd) != 0 && !t->err) {
		t->err = "close";
		t->err_no = errno;
	}
	free(b);
	return NULL;
}

/* The two sharers write alternate chunks of one file through one fd. */
static void *sharer_thread(void *arg)
{
	struct thr *t = arg;
	unsigned char *b = xmalloc(SHARED_CHUNK);
	pthread_barrier_wait(&thr_barrier);
	size_t nchunks = (t->size + SHARED_CHUNK - 1) / SHARED_CHUNK;
	for (size_t c = (size_t)t->idx; c < nchunks && !t->err; c += NSHARERS) {
		uint64_t off = (uint64_t)c * SHARED_CHUNK;
		size_t m = t->size - off < SHARED_CHUNK ? t->size - off : SHARED_CHUNK;
		pattern(b, off, m, t->seed);
		ssize_t w = pwrite(t->fd, b, m, (off_t)off);
		if (w != (ssize_t)m) {
			t->err = "pwrite";
			t->err_no = w < 0 ? errno : EIO;
		}
	}
	free(b);
	return NULL;
}

static void *reader_thread(void *arg)
{
	struct thr *t = arg;
	pthread_barrier_wait(&thr_barrier);
	check_file(t->path, t->size, t->seed, THR_CHUNK);
	return NULL;
}

/* Four threads read() one descriptor: every 4 KiB block of the file must
 * come out exactly once (the position is shared and moves atomically).
 * Each 8-byte word of the file holds its own offset. */
#define OFF_SIZE (4u << 20)
#define OFF_BLOCK 4096u

struct offreader {
	pthread_t tid;
	int fd;
	size_t nblocks;
	uint64_t *first; /* first word of each block read */
	const char *err;
};

static void *offset_reader(void *arg)
{
	struct offreader *r = arg;
	uint64_t b[OFF_BLOCK / 8];
	pthread_barrier_wait(&thr_barrier);
	for (;;) {
		ssize_t got = read(r->fd, b, sizeof(b));
		if (got == 0)
			break;
		if (got != (ssize_t)sizeof(b)) {
			r->err = got < 0 ? strerror(errno) : "a short read";
			break;
		}
		for (unsigned k = 1; k < OFF_BLOCK / 8; k++)
			if (b[k] != b[0] + 8 * k) {
				r->err = "a block mixing two positions";
				return NULL;
			}
		r->first[r->nblocks++] = b[0];
	}
	return NULL;
}

static void shared_readers(const char *dir)
{
	char path[PATH_MAX];
	uint64_t *w = xmalloc(OFF_SIZE);
	for (size_t k = 0; k < OFF_SIZE / 8; k++)
		w[k] = 8 * k;
	snprintf(path, sizeof(path), "%s/offsets.bin", dir);
	int fd = xopen(path, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(fd, (unsigned char *)w, OFF_SIZE, path);
	close(fd);
	fd = xopen(path, O_RDONLY);
	struct offreader r[4];
	pthread_barrier_init(&thr_barrier, NULL, 4);
	for (int i = 0; i < 4; i++) {
		r[i] = (struct offreader){ .fd = fd, .first = xmalloc(OFF_SIZE / OFF_BLOCK * 8) };
		pthread_create(&r[i].tid, NULL, offset_reader, &r[i]);
	}
	unsigned char *seen = calloc(OFF_SIZE / OFF_BLOCK, 1);
	for (int i = 0; i < 4; i++) {
		pthread_join(r[i].tid, NULL);
		if (r[i].err)
			fail("shared reader %d: %s", i, r[i].err);
		for (size_t k = 0; k < r[i].nblocks; k++) {
			uint64_t off = r[i].first[k];
			if (off % OFF_BLOCK || off >= OFF_SIZE || seen[off / OFF_BLOCK]++)
				fail("shared readers: block at %llu read twice or misplaced",
				     (unsigned long long)off);
		}
		free(r[i].first);
	}
	for (size_t k = 0; k < OFF_SIZE / OFF_BLOCK; k++)
		if (!seen[k])
			fail("shared readers: block %zu never read", k);
	pthread_barrier_destroy(&thr_barrier);
	close(fd);
	free(seen);
	free(w);
}

static int m_threads(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE");
	struct thr w[NWRITERS], s[NSHARERS];
	char shared[PATH_MAX];

	pthread_barrier_init(&thr_barrier, NULL, NWRITERS + NSHARERS);
	snprintf(shared, sizeof(shared), "%s/shared.bin", arg.path);
	int sfd = xopen(shared, O_WRONLY | O_CREAT | O_TRUNC);
	for (int i = 0; i < NWRITERS; i++) {
		w[i] = (struct thr){ .idx = i, .size = arg.size, .seed = 100 + (uint64_t)i, .fd = -1 };
		snprintf(w[i].path, sizeof(w[i].path), "%s/thr_%d.bin", arg.path, i);
		pthread_create(&w[i].tid, NULL, writer_thread, &w[i]);
	}
	for (int i = 0; i < NSHARERS; i++) {
		s[i] = (struct thr){ .idx = i, .size = 2 * arg.size, .seed = 200, .fd = sfd };
		pthread_create(&s[i].tid, NULL, sharer_thread, &s[i]);
	}
	for (int i = 0; i < NWRITERS; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].err)
			fail("writer %d: %s %s: %s", i, w[i].err, w[i].path, strerror(w[i].err_no));
	}
	for (int i = 0; i < NSHARERS; i++) {
		pthread_join(s[i].tid, NULL);
		if (s[i].err)
			fail("sharer %d: %s: %s", i, s[i].err, strerror(s[i].err_no));
	}
	struct stat st;
	if (fstat(sfd, &st) != 0 || (size_t)st.st_size != 2 * arg.size)
		fail("fstat %s: size %lld, expected %zu", shared, (long long)st.st_size, 2 * arg.size);
	xclose(sfd, shared);
	pthread_barrier_destroy(&thr_barrier);

	/* read back: four threads at once, then the shared file with pread
	 * from the end towards the start */
	pthread_barrier_init(&thr_barrier, NULL, NWRITERS);
	for (int i = 0; i < NWRITERS; i++)
		pthread_create(&w[i].tid, NULL, reader_thread, &w[i]);
	for (int i = 0; i < NWRITERS; i++)
		pthread_join(w[i].tid, NULL);
	pthread_barrier_destroy(&thr_barrier);

	int fd = xopen(shared, O_RDONLY);
	unsigned char *b = xmalloc(2 * arg.size);
	size_t step = 100003;
	for (size_t end = 2 * arg.size; end > 0;) {
		size_t off = end > step ? end - step : 0;
		ssize_t r = pread(fd, b + off, end - off, (off_t)off);
		if (r != (ssize_t)(end - off))
			fail("pread %s at %zu: %zd", shared, off, r);
		end = off;
	}
	size_t d = pattern_diff(b, 0, 2 * arg.size, 200);
	if (d != 2 * arg.size)
		fail("%s: byte %zu differs from what the two threads wrote", shared, d);
	close(fd);
	free(b);
	check_file(shared, 2 * arg.size, 200, 0);
	shared_readers(arg.path);
	printf("threads: 4 files and 1 shared file verified; 4 readers shared one position\n");
	return 0;
}

/* churn DIR THREADS FILES SEED [verify]: every thread writes FILES
 * checkpoints of varied sizes and, after each, reads back a random
 * completed checkpoint of any thread, so writes, flushes, evictions and
 * reads overlap; then everything is read back. With "verify", only the
 * final pass runs (to check the real files without the library). */
#define CHURN_MAXT 8
#define CHURN_MAXF 64

struct churn {
	pthread_t tid;
	int t, nfiles;
	const char *dir;
	uint64_t seed;
	const char *err;
	char errpath[PATH_MAX];
};

static atomic_int churn_done[CHURN_MAXT];

static size_t churn_size(uint64_t seed, int t, int i)
{
	return 50000 + (size_t)(mix64(seed * 131 + (uint64_t)t * 1000 + (uint64_t)i) % 2000000);
}

static void churn_path(char *p, size_t cap, const char *dir, int t, int i)
{
	snprintf(p, cap, "%s/c_%d_%02d.bin", dir, t, i);
}

/* Reads one checkpoint back; returns an error text or NULL. */
static const char *churn_check(const char *path, size_t size, uint64_t seed)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return "cannot be opened";
	unsigned char *b = malloc(size + 1);
	size_t got = 0;
	ssize_t r;
	while (b && got <= size && (r = read(fd, b + got, size + 1 - got)) > 0)
		got += (size_t)r;
	close(fd);
	const char *err = !b ? "out of memory" : got != size ? "has the wrong size" :
			  pattern_diff(b, 0, size, seed) != size ? "holds wrong bytes" : NULL;
	free(b);
	return err;
}

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	char path[PATH_MAX];
	uint64_t rnd = mix64(c->seed + (uint64_t)c->t);
	for (int i = 0; i < c->nfiles && !c->err; i++) {
		size_t size = churn_size(c->seed, c->t, i);
		churn_path(path, sizeof(path), c->dir, c->t, i);
		unsigned char *b = pattern_buf(size, c->seed * 1000 + (uint64_t)c->t * 100 + (uint64_t)i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		size_t done = 0;
		while (fd >= 0 && done < size) {
			size_t m = size - done < 100003 ? size - done : 100003;
			ssize_t w = write(fd, b + done, m);
			if (w <= 0)
				break;
			done += (size_t)w;
		}
		free(b);
		if (fd < 0 || done < size || close(fd) != 0) {
			c->err = "could not be written";
			snprintf(c->errpath, sizeof(c->errpath), "%s", path);
			break;
		}
		atomic_store(&churn_done[c->t], i + 1);
		/* a random completed checkpoint of a random thread */
		rnd = mix64(rnd);
		int t2 = (int)(rnd % CHURN_MAXT);
		int n2 = t2 < CHURN_MAXT ? atomic_load(&churn_done[t2]) : 0;
		if (n2 > 0) {
			int i2 = (int)((rnd >> 20) % (uint64_t)n2);
			churn_path(path, sizeof(path), c->dir, t2, i2);
			const char *e = churn_check(path, churn_size(c->seed, t2, i2),
						    c->seed * 1000 + (uint64_t)t2 * 100 + (uint64_t)i2);
			if (e) {
				c->err = e;
				snprintf(c->errpath, sizeof(c->errpath), "%s", path);
			}
		}
	}
	return NULL;
}

static int m_churn(int argc, char **argv)
{
	need_args(argc, 5, "DIR THREADS FILES SEED [verify]");
	int nt = (int)num(argv[2]), nf = (int)num(argv[3]);
	uint64_t seed = num(argv[4]);
	bool verify = verify_only(argc, argv, 5);
	struct churn c[CHURN_MAXT];
	char path[PATH_MAX];

	if (nt < 1 || nt > CHURN_MAXT || nf < 1 || nf > CHURN_MAXF)
		fail("THREADS must be 1..%d and FILES 1..%d", CHURN_MAXT, CHURN_MAXF);
	if (!verify) {
		for (int t = 0; t < nt; t++) {
			c[t] = (struct churn){ .t = t, .nfiles = nf, .dir = argv[1], .seed = seed };
			pthread_create(&c[t].tid, NULL, churn_thread, &c[t]);
		}
		for (int t = 0; t < nt; t++) {
			pthread_join(c[t].tid, NULL);
			if (c[t].err)
				fail("thread %d: %s %s", t, c[t].errpath, c[t].err);
		}
	}
	for (int t = 0; t < nt; t++)
		for (int i = nf - 1; i >= 0; i--) {
			churn_path(path, sizeof(path), argv[1], t, i);
			const char *e = churn_check(path, churn_size(seed, t, i), seed * 1000 + (uint64_t)t * 100 + (uint64_t)i);
			if (e)
				fail("%s %s", path, e);
		}
	printf("churn: %d x %d checkpoints verified\n", nt, nf);
	return 0;
}

/* ---- modes: fork and exec -------------------------------------------------- */

/* readfd FD SEED: reads 4096 bytes from descriptor FD (inherited through
 * exec) at its offset and compares them with stream SEED there. Exit 0
 * when they match, 3 when they differ, 4 on a short read, 5 on an error. */
static int m_readfd(int argc, char **argv)
{
	need_args(argc, 3, "FD SEED");
	int fd = (int)num(argv[1]);
	uint64_t seed = num(argv[2]);
	unsigned char b[4096];
	off_t at = lseek(fd, 0, SEEK_CUR);
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t r = read(fd, b + got, sizeof(b) - got);
		if (r < 0) {
			printf("readfd: read fd %d: %s\n", fd, strerror(errno));
			return 5;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got < sizeof(b) || at < 0) {
		printf("readfd: %zu bytes from inherited fd %d at %lld\n", got, fd, (long long)at);
		return 4;
	}
	if (pattern_diff(b, (uint64_t)at, sizeof(b), seed) != sizeof(b)) {
		printf("readfd: wrong bytes from inherited fd %d at %lld\n", fd, (long long)at);
		return 3;
	}
	return 0;
}

static int wait_child(pid_t pid, const char *what)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		fail("waitpid %s: %s", what, strerror(errno));
	if (WIFSIGNALED(st))
		fail("%s: killed by signal %d", what, WTERMSIG(st));
	return WEXITSTATUS(st);
}

/* Runs argv in a child with stdin = in (if >= 0) and stdout captured;
 * returns the exit status and the number of bytes it printed. */
static int run_captured(int in, char *const *av, size_t *printed, char *out, size_t outlen)
{
	int p[2];
	if (pipe(p) != 0)
		fail("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		if (in >= 0 && dup2(in, 0) < 0)
			_exit(120);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(av[0], av);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t r;
	char tmp[4096];
	while ((r = read(p[0], tmp, sizeof(tmp))) > 0) {
		if (n < outlen - 1) {
			size_t m = (size_t)r < outlen - 1 - n ? (size_t)r : outlen - 1 - n;
			memcpy(out + n, tmp, m);
		}
		n += (size_t)r;
	}
	out[n < outlen - 1 ? n : outlen - 1] = '\0';
	close(p[0]);
	*printed = n;
	return wait_child(pid, av[0]);
}

static int m_fork(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	unsigned char *b = xmalloc(arg.size), *e = pattern_buf(arg.size, arg.seed);
	char fdnum[16], seed[32], out[256];
	size_t printed;

	if (arg.size < 16384)
		fail("SIZE must be at least 16K");
	int fd = gen_open(arg.path, arg.size, arg.seed);
	if (!reads_back(fd, b, e, 100, arg.path))
		fail("parent: the first 100 bytes of %s are wrong", arg.path);

	/* 1. a forked child (no exec) reads the inherited descriptor, at the
	 * offset it shares with the parent */
	pid_t pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		unsigned char c[4096];
		if (read_all(fd, c, sizeof(c), arg.path) != sizeof(c) || memcmp(c, e + 100, sizeof(c)))
			_exit(3);
		if (pread(fd, c, sizeof(c), 0) != (ssize_t)sizeof(c) || memcmp(c, e, sizeof(c)))
			_exit(4);
		close(fd);
		_exit(0);
	}
	int rc = wait_child(pid, "forked reader");
	if (rc != 0)
		fail("a forked child read wrong bytes from an inherited tagged descriptor (status %d)", rc);
	if (lseek(fd, 0, SEEK_CUR) != 100 + 4096)
		fail("parent: the offset shared with the forked child is %lld, expected %d",
		     (long long)lseek(fd, 0, SEEK_CUR), 100 + 4096);

	/* 2. a child that execs this program in "readfd N SEED" mode */
	snprintf(fdnum, sizeof(fdnum), "%d", fd);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)arg.seed);
	char *av1[] = { self_exe, "readfd", fdnum, seed, NULL };
	rc = run_captured(-1, av1, &printed, out, sizeof(out));
	if (rc != 0)
		fail("an exec'ed child reading inherited fd %d: %s(status %d)", fd, out, rc);

	/* 3. cat with the descriptor as its standard input (cat <&N): the rest */
	size_t at = 100 + 2 * 4096;
	char *av2[] = { "/bin/cat", NULL };
	char *all = xmalloc(arg.size + 1);
	rc = run_captured(fd, av2, &printed, all, arg.size + 1);
	if (rc != 0 || printed != arg.size - at || memcmp(all, e + at, printed) != 0)
		fail("cat <&%d printed %zu bytes (expected the last %zu), status %d", fd, printed,
		     arg.size - at, rc);

	/* 4. cat /proc/self/fd/N: a reopen through /proc in an exec'ed child */
	char procp[64];
	snprintf(procp, sizeof(procp), "/proc/self/fd/%d", fd);
	char *av3[] = { "/bin/cat", procp, NULL };
	rc = run_captured(-1, av3, &printed, all, arg.size + 1);
	if (rc != 0 || printed != arg.size || memcmp(all, e, arg.size) != 0)
		fail("cat %s printed %zu bytes (expected %zu), status %d", procp, printed, arg.size, rc);
	free(all);
	xclose(fd, arg.path);

	/* 5. a forked child writes the second half through an inherited writer */
	int wfd = xopen(arg.path2, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(wfd, e, arg.size / 2, arg.path2);
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		ssize_t w = write(wfd, e + arg.size / 2, arg.size - arg.size / 2);
		_exit(w == (ssize_t)(arg.size - arg.size / 2) ? 0 : 3);
	}
	rc = wait_child(pid, "forked writer");
	if (rc != 0)
		fail("a forked child could not write an inherited tagged descriptor");
	xclose(wfd, arg.path2);

	check_file(arg.path, arg.size, arg.seed, 0);
	check_file(arg.path2, arg.size, arg.seed, 0);
	printf("fork: children read and wrote the inherited descriptors\n");
	free(b);
	free(e);
	return 0;
}

/* ---- modes: several descriptors and several writers of one file ----------- */

static void xpwrite_all(int fd, const unsigned char *b, size_t n, off_t off, const char *what)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, b, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail("pwrite %s: %s", what, w < 0 ? strerror(errno) : "wrote 0 bytes");
		b += w;
		off += w;
		n -= (size_t)w;
	}
}

static off_t fd_size(int fd, const char *what)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		fail("fstat %s: %s", what, strerror(errno));
	return st.st_size;
}

/* One process, several descriptors of one file, as the kernel shares them:
 * a second open of a file open for writing sees what was written and its
 * writes land in the same file; a second O_TRUNC empties it for every
 * descriptor; a map of a descriptor that has a dup changes the file that
 * the dup writes to. The real file must end as the kernel would leave it. */
static int m_sharedfd(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SEED");
	const size_t M = 1 << 20;
	unsigned char *x = pattern_buf(3 * M, arg.seed), *b = xmalloc(3 * M);
	char p1[PATH_MAX], p2[PATH_MAX], p3[PATH_MAX];
	snprintf(p1, sizeof(p1), "%s/two-opens.bin", arg.path);
	snprintf(p2, sizeof(p2), "%s/second-trunc.bin", arg.path);
	snprintf(p3, sizeof(p3), "%s/map-dup.bin", arg.path);

	/* 1. a second open (O_RDWR) of a file open for writing */
	int fd1 = xopen(p1, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(fd1, x, M, p1);
	int fd2 = xopen(p1, O_RDWR);
	if (!reads_back(fd2, b, x, M, p1))
		fail("a second open of a file open for writing does not read what was written");
	xpwrite_all(fd2, x + 2 * M, M, (off_t)(2 * M), p1);
	write_all(fd1, x + M, M, p1); /* at fd1's offset, 1 MiB */
	if (fd_size(fd1, p1) != (off_t)(3 * M) || fd_size(fd2, p1) != (off_t)(3 * M))
		fail("the two descriptors of %s see sizes %lld and %lld, expected %zu", p1,
		     (long long)fd_size(fd1, p1), (long long)fd_size(fd2, p1), 3 * M);
	xclose(fd2, p1);
	xclose(fd1, p1);
	check_file(p1, 3 * M, arg.seed, 0);

	/* 2. a second open with O_TRUNC empties the file for the first one too */
	fd1 = xopen(p2, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(fd1, x + M, M, p2);
	fd2 = xopen(p2, O_WRONLY | O_CREAT | O_TRUNC);
	if (fd_size(fd1, p2) != 0)
		fail("after a second open with O_TRUNC the first descriptor sees %lld bytes",
		     (long long)fd_size(fd1, p2));
	write_all(fd2, x, M, p2);
	write_all(fd1, x + M, M, p2); /* fd1 is still at 1 MiB */
	xclose(fd1, p2);
	xclose(fd2, p2);
	check_file(p2, 2 * M, arg.seed, 0);

	/* 3. mmap of a descriptor that has a dup, then writes through the dup */
	int fd = xopen(p3, O_RDWR | O_CREAT | O_TRUNC);
	write_all(fd, x, M, p3);
	int d = dup(fd);
	if (d < 0)
		fail("dup: %s", strerror(errno));
	unsigned char *m = mmap(NULL, M, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap of %s: %s", p3, strerror(errno));
	if (memcmp(m, x, M) != 0)
		fail("the map of %s shows wrong bytes", p3);
	memset(m, 'M', 4096);
	if (msync(m, M, MS_SYNC) != 0)
		fail("msync: %s", strerror(errno));
	munmap(m, M);
	write_all(d, x + M, 4096, p3); /* the dup shares the offset: 1 MiB */
	xclose(d, p3);
	xclose(fd, p3);
	memset(x, 'M', 4096);
	fd = xopen(p3, O_RDONLY);
	if (read_all(fd, b, M + 4097, p3) != M + 4096 || memcmp(b, x, M + 4096) != 0)
		fail("%s does not hold the map's bytes and the dup's write", p3);
	xclose(fd, p3);
	raw_check(p3, x, M + 4096, "after the dup's write");
	printf("sharedfd: descriptors of one file share its state\n");
	free(x);
	free(b);
	return 0;
}

/* Waits until path exists (a barrier between processes), at most 30 s. */
static void wait_for(const char *path)
{
	for (int i = 0; i < 3000; i++) {
		if (access(path, F_OK) == 0)
			return;
		sleep_ms(10);
	}
	fail("%s did not appear in 30 s", path);
}

/* One writer of a file shared by several processes (MPI-IO, HDF5): opens
 * PATH with FLAGS (w: O_WRONLY|O_CREAT, t: ... |O_TRUNC, r: O_RDWR), says
 * so by creating MARKS/opened.N, waits for MARKS/go, writes its region
 * [N*SIZE, (N+1)*SIZE) of stream SEED with pwrite, fsyncs, closes. */
static int m_n1part(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH N SIZE SEED w|t|r MARKS");
	int flags = !strcmp(argv[5], "t") ? O_WRONLY | O_CREAT | O_TRUNC :
		    !strcmp(argv[5], "r") ? O_RDWR : O_WRONLY | O_CREAT;
	char mark[PATH_MAX + 32];
	unsigned char *b = xmalloc(arg.size);
	pattern(b, (uint64_t)arg.n * arg.size, arg.size, arg.seed);
	int fd = xopen(arg.path, flags);
	snprintf(mark, sizeof(mark), "%s/opened.%ld", argv[6], arg.n);
	xclose(xopen(mark, O_WRONLY | O_CREAT), mark);
	snprintf(mark, sizeof(mark), "%s/go", argv[6]);
	wait_for(mark);
	xpwrite_all(fd, b, arg.size, (off_t)((uint64_t)arg.n * arg.size), arg.path);
	if (fsync(fd) != 0)
		fail("fsync %s: %s", arg.path, strerror(errno));
	xclose(fd, arg.path);
	free(b);
	return 0;
}

/* ---- modes: unsupported call paths ----------------------------------------- */

/* What a buffer holds before a call that must fail on a tagged reader:
 * the call may not have written into it. */
#define FILLER 0x5A

/* After calls on the tagged reader fd that had to fail: b still holds
 * FILLER (else "WROTE wrote into the buffer"), and the library's own read()
 * still gives PATH's bytes e from offset 0 (else "read() after AFTER ..."). */
static void reader_intact(int fd, unsigned char *b, const unsigned char *e, const struct args *arg,
			  const char *wrote, const char *after)
{
	for (size_t k = 0; k < arg->size; k++)
		if (b[k] != FILLER)
			fail("%s wrote into the buffer (byte %zu)", wrote, k);
	if (!reads_back(fd, b, e, arg->size, arg->path))
		fail("read() after %s returned wrong bytes", after);
	close(fd);
}

/* After calls on the tagged writer wfd that had to fail: the library's own
 * write() still works, and PATH2 ends up holding e. */
static void writer_intact(int wfd, const unsigned char *e, const struct args *arg)
{
	write_all(wfd, e, arg->size, arg->path2);
	close(wfd);
	check_file(arg->path2, arg->size, arg->seed, 0);
}

static int m_rawsys(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size);

	int fd = gen_open(arg.path, arg.size, arg.seed);
	memset(b, FILLER, arg.size);
	errno = 0;
	long r = syscall(SYS_read, fd, b, arg.size);
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_read) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	errno = 0;
	r = syscall(SYS_pread64, fd, b, arg.size, 0);
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_pread64) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	struct iovec iov = { b, arg.size };
	errno = 0;
	r = syscall(SYS_readv, fd, &iov, 1);
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_readv) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	reader_intact(fd, b, e, &arg, "a raw syscall", "the raw syscalls");

	int wfd = xopen(arg.path2, O_WRONLY | O_CREAT | O_TRUNC);
	static const char junk[4096] = { 'J' };
	errno = 0;
	r = syscall(SYS_write, wfd, junk, sizeof(junk));
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_write) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	errno = 0;
	r = syscall(SYS_pwrite64, wfd, junk, sizeof(junk), 0);
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_pwrite64) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	write_all(wfd, e, arg.size, arg.path2);
	xclose(wfd, arg.path2);
	check_file(arg.path2, arg.size, arg.seed, 0);
	printf("rawsys: SYS_read, SYS_pread64, SYS_readv, SYS_write, SYS_pwrite64 failed with EBADF\n");
	free(b);
	free(e);
	return 0;
}

/* Maps the reader fd of PATH as prot and flags (named flags_name in
 * messages) and checks that the map shows PATH's bytes e. */
static void expect_map(int fd, int prot, int flags, const char *flags_name, const unsigned char *e,
		       const struct args *arg)
{
	unsigned char *m = mmap(NULL, arg->size, prot, flags, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap(%s) of a tagged fd: %s", flags_name, strerror(errno));
	if (memcmp(m, e, arg->size) != 0)
		fail("mmap(%s) of %s shows wrong bytes", flags_name, arg->path);
	munmap(m, arg->size);
}

static int m_mmap(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size);

	/* a cached checkpoint mapped read-only, shared and private */
	int fd = gen_open(arg.path, arg.size, arg.seed);
	if (read_all(fd, b, 1000, arg.path) != 1000)
		fail("short read of %s", arg.path);
	expect_map(fd, PROT_READ, MAP_SHARED, "MAP_SHARED", e, &arg);
	expect_map(fd, PROT_READ | PROT_WRITE, MAP_PRIVATE, "MAP_PRIVATE", e, &arg);
	/* the descriptor keeps its position and now reads the real file */
	if (read_all(fd, b + 1000, arg.size - 1000, arg.path) != arg.size - 1000)
		fail("short read of %s after mmap", arg.path);
	if (memcmp(b, e, arg.size) != 0)
		fail("read of %s after mmap returned wrong bytes", arg.path);
	struct stat st;
	if (fstat(fd, &st) != 0 || (size_t)st.st_size != arg.size)
		fail("fstat %s after mmap: wrong size", arg.path);
	close(fd);
	check_file(arg.path, arg.size, arg.seed, 0);

	/* a writer that maps its checkpoint and changes it through the map */
	fd = xopen(arg.path2, O_RDWR | O_CREAT | O_TRUNC);
	write_all(fd, e, arg.size, arg.path2);
	unsigned char *m = mmap(NULL, arg.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap(MAP_SHARED, PROT_WRITE) of a tagged writer: %s", strerror(errno));
	if (memcmp(m, e, arg.size) != 0)
		fail("mmap of the writer %s shows wrong bytes", arg.path2);
	memset(m, 'M', 4096);
	memcpy(e, m, 4096);
	if (msync(m, arg.size, MS_SYNC) != 0)
		fail("msync: %s", strerror(errno));
	munmap(m, arg.size);
	xclose(fd, arg.path2);
	fd = xopen(arg.path2, O_RDONLY);
	if (read_all(fd, b, arg.size, arg.path2) != arg.size || read(fd, b, 0) != 0)
		fail("short read of %s", arg.path2);
	if (memcmp(b, e, arg.size) != 0)
		fail("%s does not hold what was written through write() and the map", arg.path2);
	close(fd);
	printf("mmap: tagged descriptors map the right bytes\n");
	free(b);
	free(e);
	return 0;
}

static int m_procfd(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed), b[4096];
	char proc[64];

	gen_file(arg.path, arg.size, arg.seed, 0);
	for (int acc = 0; acc < 2; acc++) {
		int fd = xopen(arg.path, acc ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY);
		if (acc)
			write_all(fd, e, arg.size, arg.path);
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		int fd2 = open(proc, O_RDONLY);
		if (fd2 >= 0) {
			ssize_t r = read(fd2, b, sizeof(b));
			if (r > 0)
				fail("reopening %s returned %zd bytes%s", proc, r,
				     memcmp(b, e, (size_t)r < arg.size ? (size_t)r : arg.size) == 0 ?
					     " of the checkpoint" : "");
			close(fd2);
			printf("procfd: %s opened, read: %s\n", proc, r < 0 ? strerror(errno) : "0 bytes");
		} else {
			printf("procfd: %s: %s\n", proc, strerror(errno));
		}
		/* writing through the reopened path must fail too */
		fd2 = open(proc, O_WRONLY);
		if (fd2 >= 0) {
			ssize_t w = write(fd2, "x", 1);
			if (w > 0)
				fail("a write through %s succeeded", proc);
			close(fd2);
		}
		close(fd);
	}
	check_file(arg.path, arg.size, arg.seed, 0);
	free(e);
	return 0;
}

/* io_uring through its raw system calls (liburing is not needed). */
struct uring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int uring_init(struct uring *u)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	u->fd = (int)syscall(__NR_io_uring_setup, 4, &p);
	if (u->fd < 0)
		return -errno;
	size_t sqsz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cqsz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	bool single = p.features & IORING_FEAT_SINGLE_MMAP;
	if (single && cqsz > sqsz)
		sqsz = cqsz;
	char *sq = mmap(NULL, sqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd,
			IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		fail("mmap of the io_uring SQ ring: %s", strerror(errno));
	char *cq = single ? sq :
		   mmap(NULL, cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd,
			IORING_OFF_CQ_RING);
	if (cq == MAP_FAILED)
		fail("mmap of the io_uring CQ ring: %s", strerror(errno));
	u->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_SQES);
	if (u->sqes == MAP_FAILED)
		fail("mmap of the io_uring SQEs: %s", strerror(errno));
	u->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	u->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	u->sq_array = (unsigned *)(sq + p.sq_off.array);
	u->cq_head = (unsigned *)(cq + p.cq_off.head);
	u->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	u->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	u->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* Submits one read or write and returns its completion's result. */
static int uring_rw(struct uring *u, int op, int fd, void *buf, unsigned len, uint64_t off)
{
	unsigned tail = *u->sq_tail, idx = tail & *u->sq_mask;
	struct io_uring_sqe *sqe = &u->sqes[idx];
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = (uint8_t)op;
	sqe->fd = fd;
	sqe->addr = (uint64_t)(uintptr_t)buf;
	sqe->len = len;
	sqe->off = off;
	sqe->user_data = 42;
	u->sq_array[idx] = idx;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
	long r = syscall(__NR_io_uring_enter, u->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
	if (r < 0)
		fail("io_uring_enter: %s", strerror(errno));
	unsigned head = __atomic_load_n(u->cq_head, __ATOMIC_ACQUIRE);
	if (head == __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE))
		fail("io_uring: no completion after io_uring_enter");
	struct io_uring_cqe *cqe = &u->cqes[head & *u->cq_mask];
	int res = cqe->res;
	__atomic_store_n(u->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static int m_uring(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	struct uring u;
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size);

	int rc = uring_init(&u);
	if (rc < 0)
		note("io_uring not tested: io_uring_setup failed here (%s)", strerror(-rc));
	int fd = gen_open(arg.path, arg.size, arg.seed);
	memset(b, FILLER, arg.size);
	struct iovec iov = { b, arg.size };
	int r = uring_rw(&u, IORING_OP_READ, fd, b, (unsigned)arg.size, 0);
	int rv = uring_rw(&u, IORING_OP_READV, fd, &iov, 1, 0);
	if (r >= 0 || rv >= 0)
		fail("io_uring read of a tagged fd returned %d / readv %d (expected errors)", r, rv);
	reader_intact(fd, b, e, &arg, "io_uring", "io_uring");

	int wfd = xopen(arg.path2, O_WRONLY | O_CREAT | O_TRUNC);
	int w = uring_rw(&u, IORING_OP_WRITE, wfd, b, (unsigned)arg.size, 0);
	if (w >= 0)
		fail("io_uring write to a tagged fd returned %d (expected an error)", w);
	writer_intact(wfd, e, &arg);
	printf("uring: read %s, readv %s, write %s\n", strerror(-r), strerror(-rv), strerror(-w));
	free(b);
	free(e);
	return 0;
}

/* One POSIX aio_read or aio_write of n bytes at offset 0, which must fail;
 * returns its error. */
static int aio_run(int fd, unsigned char *b, size_t n, bool wr)
{
	struct aiocb cb;
	memset(&cb, 0, sizeof(cb));
	cb.aio_fildes = fd;
	cb.aio_buf = b;
	cb.aio_nbytes = n;
	if ((wr ? aio_write(&cb) : aio_read(&cb)) != 0)
		return errno;
	const struct aiocb *list[1] = { &cb };
	while (aio_error(&cb) == EINPROGRESS)
		aio_suspend(list, 1, NULL);
	int err = aio_error(&cb);
	ssize_t r = aio_return(&cb);
	if (err == 0)
		fail("POSIX aio_%s on a tagged fd succeeded (%zd bytes)", wr ? "write" : "read", r);
	return err;
}

static int m_aio(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size);

	int fd = gen_open(arg.path, arg.size, arg.seed);
	memset(b, FILLER, arg.size);
	int er = aio_run(fd, b, arg.size, false);
	reader_intact(fd, b, e, &arg, "aio_read", "aio_read");

	int wfd = xopen(arg.path2, O_WRONLY | O_CREAT | O_TRUNC);
	int ew = aio_run(wfd, b, arg.size, true);
	writer_intact(wfd, e, &arg);
	printf("aio: aio_read %s, aio_write %s\n", strerror(er), strerror(ew));
	free(b);
	free(e);
	return 0;
}

static int m_locks(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");

	gen_file(arg.path, arg.size, arg.seed, 0);
	for (int acc = 0; acc < 2; acc++) {
		int fd = xopen(arg.path, acc ? O_WRONLY | O_TRUNC : O_RDONLY);
		if (flock(fd, acc ? LOCK_EX : LOCK_SH) != 0)
			fail("flock on a tagged %s fd: %s", acc ? "writer" : "reader", strerror(errno));
		if (flock(fd, LOCK_UN) != 0)
			fail("flock(LOCK_UN) on a tagged %s fd: %s", acc ? "writer" : "reader", strerror(errno));
		struct flock fl = { .l_type = (short)(acc ? F_WRLCK : F_RDLCK), .l_whence = SEEK_SET };
		if (fcntl(fd, F_SETLK, &fl) != 0)
			fail("fcntl(F_SETLK) on a tagged %s fd: %s", acc ? "writer" : "reader", strerror(errno));
		struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		if (fcntl(fd, F_GETLK, &q) != 0 || q.l_type != F_UNLCK)
			fail("fcntl(F_GETLK) on a tagged %s fd sees a lock of another process", acc ? "writer" : "reader");
		/* the kernel's rule: no write lock through a reader, nor read
		 * lock through a writer */
		struct flock wrong = { .l_type = (short)(acc ? F_RDLCK : F_WRLCK), .l_whence = SEEK_SET };
		errno = 0;
		if (fcntl(fd, F_SETLK, &wrong) == 0 || errno != EBADF)
			fail("a %s lock through a tagged %s fd: %s", acc ? "read" : "write", acc ? "writer" : "reader",
			     errno ? strerror(errno) : "it succeeded");
		printf("locks: %s fd: flock, F_SETLK and F_GETLK work\n", acc ? "writer" : "reader");
		if (acc) {
			unsigned char *e = pattern_buf(arg.size, arg.seed);
			write_all(fd, e, arg.size, arg.path);
			free(e);
		}
		close(fd);
	}
	check_file(arg.path, arg.size, arg.seed, 0);
	return 0;
}

/* stdout moved onto a tagged descriptor with dup2: glibc's stdio writes
 * there with internal calls the library cannot see, so the file must be
 * used directly, and it holds what write() and stdio wrote, in order. */
static int m_stdout(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	const char *path = argv[1];
	static const char via_write[] = "via write()\n", via_stdio[] = "via stdio\n";
	char b[256];

	fflush(stdout);
	int saved = dup(1);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (saved < 0 || fd < 0)
		fail("open %s: %s", path, strerror(errno));
	if (dup2(fd, 1) != 1)
		fail("dup2: %s", strerror(errno));
	close(fd);
	ssize_t w = write(1, via_write, sizeof(via_write) - 1);
	int we = errno;
	fputs(via_stdio, stdout);
	int fr = fflush(stdout);
	int fe = errno;
	__fpurge(stdout);
	clearerr(stdout);
	if (dup2(saved, 1) != 1)
		fail("dup2 back: %s", strerror(errno));
	close(saved);
	if (w != (ssize_t)sizeof(via_write) - 1)
		fail("write() to stdout on a tagged descriptor: %s", w < 0 ? strerror(we) : "short");

	fd = xopen(path, O_RDONLY);
	size_t got = read_all(fd, (unsigned char *)b, sizeof(b) - 1, path);
	close(fd);
	b[got] = '\0';
	if (fr != 0)
		fail("stdio on a tagged stdout failed (%s); the checkpoint holds '%s'", strerror(fe), b);
	if (strcmp(b, "via write()\nvia stdio\n") != 0)
		fail("stdio on a tagged stdout succeeded but the checkpoint holds '%s'", b);
	printf("stdout: write() and stdio on a tagged stdout worked\n");
	return 0;
}

/* ---- modes: descriptor operations ------------------------------------------ */

static off_t xlseek(int fd, off_t off, int whence, off_t expect, const char *what)
{
	off_t r = lseek(fd, off, whence);
	if (r != expect)
		fail("lseek %s returned %lld (%s), expected %lld", what, (long long)r,
		     r < 0 ? strerror(errno) : "ok", (long long)expect);
	return r;
}

static void expect_fstat(int fd, off_t size, const char *what)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		fail("fstat %s: %s", what, strerror(errno));
	if (!S_ISREG(st.st_mode))
		fail("fstat %s: not a regular file (mode %o)", what, (unsigned)st.st_mode);
	if (st.st_size != size)
		fail("fstat %s: size %lld, expected %lld", what, (long long)st.st_size, (long long)size);
}

static int m_fdops(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SEED");
	const size_t n = 300000;
	unsigned char *exp = xmalloc(2 * n), *b = xmalloc(2 * n);
	size_t len;

	int fd = open(arg.path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		fail("open %s: %s", arg.path, strerror(errno));
	pattern(exp, 0, n, arg.seed);
	write_all(fd, exp, n, arg.path);
	len = n;
	expect_fstat(fd, (off_t)len, "after write");
	xlseek(fd, 0, SEEK_CUR, (off_t)n, "SEEK_CUR");
	xlseek(fd, -100, SEEK_END, (off_t)n - 100, "SEEK_END-100");
	xlseek(fd, 0, SEEK_HOLE, (off_t)n, "SEEK_HOLE");
	xlseek(fd, 12345, SEEK_SET, 12345, "SEEK_SET");
	if (lseek(fd, -1, SEEK_SET) != -1 || errno != EINVAL)
		fail("lseek to -1 did not fail with EINVAL");

	/* an O_RDWR writer reads what it wrote so far */
	if (read_all(fd, b, 1000, arg.path) != 1000 || memcmp(b, exp + 12345, 1000) != 0)
		fail("read on the writer returned wrong bytes");
	if (pread(fd, b, 777, 200000) != 777 || memcmp(b, exp + 200000, 777) != 0)
		fail("pread on the writer returned wrong bytes");

	/* dup shares the position; dup2 onto a chosen number, F_DUPFD too */
	int d1 = dup(fd);
	if (d1 < 0)
		fail("dup: %s", strerror(errno));
	xlseek(d1, 0, SEEK_CUR, 13345, "SEEK_CUR on the dup");
	if (read_all(d1, b, 655, arg.path) != 655 || memcmp(b, exp + 13345, 655) != 0)
		fail("read on the dup returned wrong bytes");
	xlseek(fd, 0, SEEK_CUR, 14000, "SEEK_CUR after reading the dup");
	int d2 = dup2(fd, 77);
	if (d2 != 77)
		fail("dup2 to 77: %s", strerror(errno));
	int d3 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	if (d3 < 100)
		fail("fcntl(F_DUPFD_CLOEXEC): %s", strerror(errno));
	if (!(fcntl(d3, F_GETFD) & FD_CLOEXEC))
		fail("F_DUPFD_CLOEXEC copy has no FD_CLOEXEC");
	int fl = fcntl(d2, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) != O_RDWR || (fl & O_APPEND))
		fail("F_GETFL returned %#x, expected O_RDWR without O_APPEND", (unsigned)fl);

	/* dup2 of an untagged fd onto a tagged number: that number is no
	 * longer the checkpoint, the others still are */
	int nul = open("/dev/null", O_RDONLY);
	if (dup2(nul, d1) != d1)
		fail("dup2(/dev/null, tagged): %s", strerror(errno));
	if (read(d1, b, 10) != 0)
		fail("a number dup2'ed over by /dev/null still reads checkpoint bytes");
	close(nul);
	close(d1);

	/* O_APPEND through F_SETFL: a write goes to the end */
	if (fcntl(d2, F_SETFL, fl | O_APPEND) != 0)
		fail("F_SETFL O_APPEND: %s", strerror(errno));
	if (!(fcntl(fd, F_GETFL) & O_APPEND))
		fail("F_SETFL on a dup is not seen by the original");
	pattern(exp + len, len, 5000, arg.seed);
	write_all(fd, exp + len, 5000, arg.path);
	len += 5000;
	xlseek(fd, 0, SEEK_CUR, (off_t)len, "SEEK_CUR after an append");
	if (fcntl(fd, F_SETFL, fl) != 0)
		fail("F_SETFL: %s", strerror(errno));

	/* writev / readv / pwritev / preadv */
	struct iovec iov[3] = { { exp + len, 1 }, { exp + len + 1, 4095 }, { exp + len + 4096, 10000 } };
	pattern(exp + len, len, 14096, arg.seed);
	if (writev(fd, iov, 3) != 14096)
		fail("writev: %s", strerror(errno));
	len += 14096;
	struct iovec riov[2] = { { b, 3 }, { b + 3, 14093 } };
	if (preadv(fd, riov, 2, (off_t)(len - 14096)) != 14096 || memcmp(b, exp + len - 14096, 14096) != 0)
		fail("preadv returned wrong bytes");

	/* ftruncate: shorter drops the tail, longer adds zeros */
	if (ftruncate(fd, 250000) != 0)
		fail("ftruncate 250000: %s", strerror(errno));
	len = 250000;
	expect_fstat(fd, (off_t)len, "after shrinking");
	if (ftruncate(fd, 260000) != 0)
		fail("ftruncate 260000: %s", strerror(errno));
	memset(exp + len, 0, 10000);
	len = 260000;
	expect_fstat(d3, (off_t)len, "after growing (on a dup)");
	if (pread(fd, b, len + 10, 0) != (ssize_t)len || memcmp(b, exp, len) != 0)
		fail("after ftruncate the checkpoint reads wrong bytes");

	/* fsync returns only when the real file holds these bytes */
	if (fsync(fd) != 0)
		fail("fsync: %s", strerror(errno));
	raw_check(arg.path, exp, len, "right after fsync");
	pattern(exp + len, len, 40000, arg.seed);
	if (pwrite(fd, exp + len, 40000, (off_t)len) != 40000)
		fail("pwrite: %s", strerror(errno));
	len += 40000;
	if (fdatasync(d2) != 0)
		fail("fdatasync: %s", strerror(errno));
	raw_check(arg.path, exp, len, "right after fdatasync");
	/* pwritev2 with RWF_DSYNC syncs like fdatasync; preadv2 at offset -1
	 * reads at the position */
	pattern(exp + len, len, 3000, arg.seed);
	struct iovec v2 = { exp + len, 3000 };
	if (pwritev2(fd, &v2, 1, (off_t)len, RWF_DSYNC) != 3000)
		fail("pwritev2(RWF_DSYNC): %s", strerror(errno));
	len += 3000;
	raw_check(arg.path, exp, len, "right after pwritev2(RWF_DSYNC)");
	if (lseek(fd, 100, SEEK_SET) != 100)
		fail("lseek");
	struct iovec r2 = { b, 500 };
	if (preadv2(fd, &r2, 1, -1, 0) != 500 || memcmp(b, exp + 100, 500) != 0 ||
	    lseek(fd, 0, SEEK_CUR) != 600)
		fail("preadv2 at the position returned wrong bytes or left the position wrong");

	close(d2);
	close(d3);
	if (close(fd) != 0)
		fail("close: %s", strerror(errno));
	if (close(fd) != -1 || errno != EBADF)
		fail("a second close did not fail with EBADF");

	/* read-only: writes fail, ftruncate fails, positions are its own */
	fd = xopen(arg.path, O_RDONLY);
	expect_fstat(fd, (off_t)len, "reopened");
	if (write(fd, "x", 1) != -1 || errno != EBADF)
		fail("write to a read-only tagged fd did not fail with EBADF");
	if (ftruncate(fd, 0) != -1)
		fail("ftruncate of a read-only tagged fd succeeded");
	if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
		fail("F_GETFL of a read-only fd is not O_RDONLY");
	if (read_all(fd, b, 2 * n, arg.path) != len || memcmp(b, exp, len) != 0)
		fail("the reopened checkpoint reads wrong bytes");
	if (lseek(fd, (off_t)len, SEEK_DATA) != -1 || errno != ENXIO)
		fail("SEEK_DATA at the end did not fail with ENXIO");
	/* errno is the program's own across a successful call */
	errno = 4242;
	if (lseek(fd, 0, SEEK_SET) != 0 || errno != 4242)
		fail("a successful lseek changed errno");
	if (read(fd, b, 10) != 10 || errno != 4242)
		fail("a successful read changed errno");
	close(fd);

	/* fsync of a reader: the finished checkpoint is at its real path */
	char path2[PATH_MAX];
	snprintf(path2, sizeof(path2), "%s.2", arg.path);
	gen_file(path2, 3u << 20, arg.seed + 1, 0);
	fd = open(path2, O_RDONLY);
	if (fd < 0 || fsync(fd) != 0)
		fail("fsync of a reader of %s: %s", path2, strerror(errno));
	unsigned char *e2 = pattern_buf(3u << 20, arg.seed + 1);
	raw_check(path2, e2, 3u << 20, "right after fsync on a reader");
	close(fd);
	free(e2);
	printf("fdops: fstat, lseek, dup, dup2, F_DUPFD, F_GETFL/F_SETFL, readv/writev, ftruncate, fsync ok\n");
	free(b);
	free(exp);
	return 0;
}

/* fsync under CKPTCACHE_PERSIST=never: returns at once, nothing at home */
static int m_fsync_never(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed);
	int fd = xopen(arg.path, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(fd, e, arg.size, arg.path);
	if (fsync(fd) != 0)
		fail("fsync: %s", strerror(errno));
	if (raw_exists(arg.path))
		fail("with CKPTCACHE_PERSIST=never, fsync put %s at its real path", arg.path);
	close(fd);
	check_file(arg.path, arg.size, arg.seed, 0);
	free(e);
	return 0;
}

/* ---- modes: stdio --------------------------------------------------------- */

static int m_stdio(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = xmalloc(arg.size + 64), *b = xmalloc(arg.size + 64);
	pattern(e, 0, arg.size, arg.seed);

	FILE *f = xfopen(arg.path, "wb");
	for (size_t k = 0, c = 1; k < arg.size; k += c, c = c * 3 + 1) {
		size_t m = arg.size - k < c ? arg.size - k : c;
		if (fwrite(e + k, 1, m, f) != m)
			fail("fwrite: %s", strerror(errno));
	}
	if (fputc('Z', f) != 'Z' || fprintf(f, "%s", "tail") != 4)
		fail("fputc/fprintf: %s", strerror(errno));
	memcpy(e + arg.size, "Ztail", 5);
	size_t len = arg.size + 5;
	if (ftell(f) != (long)len)
		fail("ftell after writing: %ld, expected %zu", ftell(f), len);
	if (fflush(f) != 0)
		fail("fflush: %s", strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size != len)
		fail("fstat(fileno) of the stream: wrong size");
	xfclose(f);

	f = xfopen(arg.path, "rb");
	if (fseek(f, 0, SEEK_END) != 0 || ftell(f) != (long)len)
		fail("fseek/ftell to the end: %ld, expected %zu", ftell(f), len);
	rewind(f);
	size_t got = 0;
	for (size_t c = 7; got < len + 10; c = c * 2 + 3) {
		size_t r = fread(b + got, 1, c, f);
		got += r;
		if (r < c)
			break;
	}
	if (got != len || !feof(f) || ferror(f))
		fail("fread: %zu bytes, expected %zu", got, len);
	if (memcmp(b, e, len) != 0)
		fail("fread returned wrong bytes");
	if (fseek(f, (long)(arg.size / 2), SEEK_SET) != 0)
		fail("fseek: %s", strerror(errno));
	int c = fgetc(f);
	if (c != e[arg.size / 2] || ungetc(c, f) != c || fgetc(f) != c)
		fail("fgetc/ungetc returned a wrong byte");
	if (fseek(f, -5, SEEK_END) != 0 || fgetc(f) != 'Z')
		fail("fseek from the end: wrong byte");
	xfclose(f);

	/* w+: read back through the same stream */
	f = xfopen(arg.path, "w+");
	if (fwrite(e, 1, arg.size, f) != arg.size)
		fail("fwrite w+: %s", strerror(errno));
	rewind(f);
	if (fread(b, 1, arg.size, f) != arg.size || memcmp(b, e, arg.size) != 0)
		fail("a w+ stream reads back wrong bytes");
	fclose(f);

	/* append: the stream continues the checkpoint at its real path (after
	 * the w+ version's flush: an append racing it is the subject of the
	 * handover mode) */
	sleep_ms(100);
	f = xfopen(arg.path, "ab");
	if (fwrite("APPENDED", 1, 8, f) != 8 || fclose(f) != 0)
		fail("append: %s", strerror(errno));
	memcpy(e + arg.size, "APPENDED", 8);
	len = arg.size + 8;
	f = xfopen(arg.path, "r");
	got = fread(b, 1, len + 10, f);
	if (got != len || memcmp(b, e, len) != 0)
		fail("after appending the file reads %zu bytes, expected %zu, or wrong bytes", got, len);
	fclose(f);
	/* freopen of another stream onto a tagged path writes the real file */
	char p2[PATH_MAX];
	snprintf(p2, sizeof(p2), "%s.freopen", arg.path);
	FILE *g = fopen("/dev/null", "w");
	if (!g || !(g = freopen(p2, "w", g)))
		fail("freopen onto %s: %s", p2, strerror(errno));
	if (fwrite(e, 1, arg.size, g) != arg.size || fclose(g) != 0)
		fail("writing through freopen: %s", strerror(errno));
	check_file(p2, arg.size, arg.seed, 0);
	printf("stdio: fwrite/fread/fseek/ftell/fgetc/ungetc/w+/a/freopen ok\n");
	free(b);
	free(e);
	return 0;
}

/* Compares n bytes read at offset off of the file with the stream. */
static void expect_bytes(const unsigned char *b, const unsigned char *e, size_t off, size_t n,
			 const char *what)
{
	if (memcmp(b, e + off, n) != 0)
		fail("%s: wrong bytes at offset %zu", what, off);
}

/* stdio-large PATH SIZE SEED: large freads of a tagged file, mixed with
 * what moves a stream's position or its buffer: a small read first, ftell
 * and fseek, ungetc, a stream of a dup'ed descriptor whose position is
 * handed back to the descriptor (as numpy's fromfile does), a w+ stream
 * reading back, fread_unlocked, an unbuffered stream. */
static int m_stdio_large(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	size_t n = arg.size, big = n / 4 * 3;
	unsigned char *e = pattern_buf(n, arg.seed), *b = xmalloc(n + 64);

	FILE *f = xfopen(arg.path, "wb");
	if (fwrite(e, 1, n, f) != n)
		fail("fwrite: %s", strerror(errno));
	xfclose(f);

	f = xfopen(arg.path, "rb");
	if (fread(b, 1, 10, f) != 10 || fread(b + 10, 1, big, f) != big)
		fail("fread of 10 then %zu bytes: %s", big, strerror(errno));
	expect_bytes(b, e, 0, 10 + big, "a small then a large fread");
	if (ftell(f) != (long)(10 + big))
		fail("ftell after the large fread: %ld, expected %zu", ftell(f), 10 + big);
	size_t rest = n - 10 - big, got = fread(b, 1, rest + 4096, f);
	if (got != rest || !feof(f) || ferror(f))
		fail("fread past the end: %zu bytes (expected %zu), eof %d", got, rest, feof(f));
	expect_bytes(b, e, 10 + big, rest, "fread to the end");
	if (fread(b, 1, big, f) != 0)
		fail("fread at the end returned bytes");
	if (fseek(f, 100, SEEK_SET) != 0)
		fail("fseek: %s", strerror(errno));
	int c = fgetc(f);
	if (c != e[100] || ungetc(c, f) != c)
		fail("fgetc/ungetc after fseek");
	if (fread(b, 1, big, f) != big)
		fail("fread after ungetc: %s", strerror(errno));
	expect_bytes(b, e, 100, big, "fread after ungetc");
	if (ftell(f) != (long)(100 + big))
		fail("ftell after ungetc + fread: %ld, expected %zu", ftell(f), 100 + big);
	if (fseek(f, -(long)big, SEEK_CUR) != 0 || fread_unlocked(b, 1, big, f) != big)
		fail("fseek(SEEK_CUR) + fread_unlocked: %s", strerror(errno));
	expect_bytes(b, e, 100, big, "fread_unlocked");
	xfclose(f);

	/* a stream of a dup'ed descriptor, its position handed back */
	int fd = open(arg.path, O_RDONLY);
	if (fd < 0 || lseek(fd, 77, SEEK_SET) != 77)
		fail("open/lseek: %s", strerror(errno));
	FILE *g = fdopen(dup(fd), "rb");
	if (!g || fseek(g, 77, SEEK_SET) != 0 || fread(b, 1, big, g) != big)
		fail("fdopen(dup) + fseek + fread: %s", strerror(errno));
	expect_bytes(b, e, 77, big, "fread of a dup'ed descriptor's stream");
	long pos = ftell(g);
	xfclose(g);
	if (pos != (long)(77 + big) || lseek(fd, pos, SEEK_SET) != pos || read(fd, b, 10) != 10)
		fail("handing the position (%ld) back to the descriptor", pos);
	expect_bytes(b, e, 77 + big, 10, "read after the stream's position");
	close(fd);

	/* w+: bytes still in the buffer, then read back past them */
	f = xfopen(arg.path, "w+");
	if (fwrite(e, 1, 1000, f) != 1000 || fwrite(e + 1000, 1, n - 1000, f) != n - 1000)
		fail("fwrite w+: %s", strerror(errno));
	if (fseek(f, 5, SEEK_SET) != 0 || fread(b, 1, n - 5, f) != n - 5)
		fail("fseek + fread on a w+ stream: %s", strerror(errno));
	expect_bytes(b, e, 5, n - 5, "a w+ stream");
	xfclose(f);

	/* unbuffered: a large read is still one read */
	f = xfopen(arg.path, "rb");
	setvbuf(f, NULL, _IONBF, 0);
	if (fread(b, 1, n, f) != n)
		fail("fread of an unbuffered stream: %s", strerror(errno));
	expect_bytes(b, e, 0, n, "an unbuffered stream");
	xfclose(f);
	printf("stdio-large: large freads ok\n");
	free(b);
	free(e);
	return 0;
}

/* stdio-large-writes PATH SIZE SEED: large fwrites of a tagged stream,
 * mixed with small ones, ftell, fseek back over written bytes, append
 * mode, fwrite_unlocked; the file must hold what was written, in order,
 * and the large writes reach the cache whole. */
static int m_stdio_large_writes(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	size_t n = arg.size, big = n / 2;
	unsigned char *e = pattern_buf(n, arg.seed), *b = xmalloc(n + 64);

	FILE *f = xfopen(arg.path, "wb");
	if (fwrite(e, 1, 7, f) != 7 || fwrite(e + 7, 1, big, f) != big)
		fail("fwrite of 7 then %zu bytes: %s", big, strerror(errno));
	if (ftell(f) != (long)(7 + big))
		fail("ftell after the large fwrite: %ld, expected %zu", ftell(f), 7 + big);
	if (fwrite_unlocked(e + 7 + big, 1, 100, f) != 100)
		fail("fwrite_unlocked: %s", strerror(errno));
	size_t rest = n - 107 - big;
	if (fwrite(e + 107 + big, 1, rest, f) != rest)
		fail("fwrite of the rest: %s", strerror(errno));
	if (ftell(f) != (long)n)
		fail("ftell at the end: %ld, expected %zu", ftell(f), n);
	xfclose(f);
	f = xfopen(arg.path, "rb");
	if (fread(b, 1, n + 1, f) != n)
		fail("reading back: %s", strerror(errno));
	expect_bytes(b, e, 0, n, "small and large fwrites");
	xfclose(f);

	/* w+: a large fwrite over bytes written before, then read back */
	f = xfopen(arg.path, "w+");
	memset(b, 0x5a, n);
	if (fwrite(b, 1, n, f) != n || fseek(f, 3, SEEK_SET) != 0 || fwrite(e + 3, 1, n - 3, f) != n - 3 ||
	    fseek(f, 0, SEEK_SET) != 0 || fwrite(e, 1, 3, f) != 3 || fseek(f, 0, SEEK_SET) != 0)
		fail("fwrite over written bytes: %s", strerror(errno));
	if (fread(b, 1, n, f) != n)
		fail("fread of a w+ stream: %s", strerror(errno));
	expect_bytes(b, e, 0, n, "a large fwrite over written bytes");
	xfclose(f);

	/* append: large writes go to the end */
	f = xfopen(arg.path, "wb");
	if (fwrite(e, 1, big, f) != big)
		fail("fwrite before the append: %s", strerror(errno));
	xfclose(f);
	f = xfopen(arg.path, "ab");
	if (fwrite(e + big, 1, n - big, f) != n - big)
		fail("fwrite of an append stream: %s", strerror(errno));
	xfclose(f);
	printf("stdio-large-writes: large fwrites ok\n");
	free(b);
	free(e);
	return 0;
}

/* freopen of a stream that fopen returned for a tagged path: the stream
 * moves to the new file, and the checkpoint holds what was written before. */
static int m_freopen(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed);
	char other[PATH_MAX];

	snprintf(other, sizeof(other), "%s.other", arg.path);
	FILE *f = fopen(arg.path, "w");
	if (!f || fwrite(e, 1, arg.size, f) != arg.size)
		fail("fopen/fwrite %s: %s", arg.path, strerror(errno));
	f = freopen(other, "w", f);
	if (!f)
		fail("freopen of a tagged stream onto %s: %s", other, strerror(errno));
	if (fputs("other\n", f) == EOF || fclose(f) != 0)
		fail("writing the reopened stream: %s", strerror(errno));
	check_file(arg.path, arg.size, arg.seed, 0);
	f = fopen(other, "r");
	char line[16] = "";
	if (!f || !fgets(line, sizeof(line), f) || strcmp(line, "other\n") != 0)
		fail("the reopened stream did not write %s", other);
	fclose(f);
	printf("freopen: a tagged stream reopened elsewhere\n");
	free(e);
	return 0;
}

/* noclose PATH SIZE SEED fd|stream: writes a checkpoint and exits without
 * closing it (a stream's last bytes still in its buffer): the bytes written
 * so far are the checkpoint, at its real path after exit. */
static int m_noclose(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED fd|stream");
	unsigned char *e = pattern_buf(arg.size, arg.seed);
	if (strcmp(argv[4], "stream") == 0) {
		FILE *f = fopen(arg.path, "w");
		if (!f || fwrite(e, 1, arg.size, f) != arg.size)
			fail("fopen/fwrite %s: %s", arg.path, strerror(errno));
		/* no fclose, no fflush: exit(3) flushes */
	} else {
		int fd = xopen(arg.path, O_WRONLY | O_CREAT | O_TRUNC);
		write_all(fd, e, arg.size, arg.path);
		/* no close */
	}
	exit(0);
}

/* renames DIR N SIZE [verify]: N checkpoints written under a temporary
 * name and renamed at once (while their flush may be running), half of
 * them renamed a second time; then each is read under its final name. */
static void renames_final(char p[PATH_MAX], const char *dir, long i)
{
	if (i % 2)
		snprintf(p, PATH_MAX, "%s/r_%03ld.final", dir, i);
	else
		nth_path(p, dir, "r", i);
}

static int m_renames(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE [verify]");
	char tmp[PATH_MAX], fin[PATH_MAX], mid[PATH_MAX];
	if (!verify_only(argc, argv, 4))
		for (long i = 0; i < arg.n; i++) {
			tmp_and_path(tmp, mid, arg.path, "r", i);
			gen_file(tmp, arg.size, 500 + (uint64_t)i, 0);
			if (rename(tmp, mid) != 0)
				fail("rename %s: %s", tmp, strerror(errno));
			renames_final(fin, arg.path, i);
			if (i % 2 && rename(mid, fin) != 0)
				fail("rename %s: %s", mid, strerror(errno));
		}
	for (long i = 0; i < arg.n; i++) {
		renames_final(fin, arg.path, i);
		check_file(fin, arg.size, 500 + (uint64_t)i, 0);
		tmp_and_path(tmp, mid, arg.path, "r", i);
		if (access(tmp, F_OK) == 0)
			fail("%s still exists after its rename", tmp);
		if (i % 2 && access(mid, F_OK) == 0)
			fail("%s still exists after its second rename", mid);
	}
	printf("renames: %ld checkpoints renamed and verified\n", arg.n);
	return 0;
}

/* pingpong DIR SIZE N [verify]: one checkpoint renamed back and forth
 * between two names N times right after it was written, while its flush
 * runs; it must end under the last name only. */
static int m_pingpong(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE N [verify]");
	char a[PATH_MAX], b[PATH_MAX];
	snprintf(a, sizeof(a), "%s/ping.bin", arg.path);
	snprintf(b, sizeof(b), "%s/pong.bin", arg.path);
	const char *last = arg.n % 2 ? b : a, *other = arg.n % 2 ? a : b;
	if (!verify_only(argc, argv, 4)) {
		gen_file(a, arg.size, 77, 0);
		for (long i = 0; i < arg.n; i++)
			if (rename(i % 2 ? b : a, i % 2 ? a : b) != 0)
				fail("rename %ld: %s", i, strerror(errno));
	}
	check_file(last, arg.size, 77, 0);
	if (access(other, F_OK) == 0)
		fail("%s exists after the checkpoint was renamed to %s", other, last);
	printf("pingpong: %ld renames\n", arg.n);
	return 0;
}

/* handover PATH SIZE N append|truncate: N times, writes a checkpoint and
 * at once updates it in place (O_APPEND, or truncate(2)), which makes the
 * real file the checkpoint while its background flush may still be
 * running; 30 ms later the real file must hold the update. */
static int m_handover(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE N append|truncate");
	bool app = strcmp(argv[4], "append") == 0;
	unsigned char *e = xmalloc(arg.size + 32);
	for (long i = 0; i < arg.n; i++) {
		gen_file(arg.path, arg.size, 900 + (uint64_t)i, 0);
		pattern(e, 0, arg.size, 900 + (uint64_t)i);
		size_t len = arg.size / 2;
		if (app) {
			int fd = open(arg.path, O_WRONLY | O_APPEND);
			if (fd < 0 || write(fd, "APPENDED", 8) != 8 || close(fd) != 0)
				fail("append to %s: %s", arg.path, strerror(errno));
			memcpy(e + arg.size, "APPENDED", 8);
			len = arg.size + 8;
		} else if (truncate(arg.path, (off_t)len) != 0) {
			fail("truncate %s: %s", arg.path, strerror(errno));
		}
		sleep_ms(30);
		char when[64];
		snprintf(when, sizeof(when), "round %ld, 30 ms after the %s", i, argv[4]);
		raw_check(arg.path, e, len, when);
	}
	printf("handover: %ld rounds of %s\n", arg.n, argv[4]);
	free(e);
	return 0;
}

/* unlinkrace DIR N: N times, writes DIR/u_NNN.bin.tmp, renames it to
 * DIR/u_NNN.bin and unlinks that at once, while its flush may be running;
 * afterwards none of them may exist at its real path. */
static int m_unlinkrace(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N");
	char tmp[PATH_MAX], fin[PATH_MAX];
	for (long i = 0; i < arg.n; i++) {
		tmp_and_path(tmp, fin, arg.path, "u", i);
		gen_file(tmp, 16384, 700 + (uint64_t)i, 0);
		if (rename(tmp, fin) != 0)
			fail("rename %s: %s", tmp, strerror(errno));
		if (unlink(fin) != 0)
			fail("unlink %s: %s", fin, strerror(errno));
	}
	sleep_ms(200);
	for (long i = 0; i < arg.n; i++) {
		tmp_and_path(tmp, fin, arg.path, "u", i);
		if (raw_exists(fin))
			fail("%s is at its real path after it was unlinked", fin);
		if (raw_exists(tmp))
			fail("%s is at its real path after it was renamed and unlinked", tmp);
	}
	printf("unlinkrace: %ld checkpoints renamed and unlinked\n", arg.n);
	return 0;
}

/* ---- modes: names -------------------------------------------------------- */

/* stat of a cached file before it reaches disk (CKPTCACHE_PERSIST=never) */
static int m_statcached(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	struct stat st;

	gen_file(arg.path, arg.size, arg.seed, 0);
	if (raw_exists(arg.path))
		fail("%s is at its real path although CKPTCACHE_PERSIST=never", arg.path);
	if (stat(arg.path, &st) != 0)
		fail("stat %s: %s", arg.path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size != arg.size)
		fail("stat %s: mode %o size %lld, expected a regular file of %zu bytes", arg.path,
		     (unsigned)st.st_mode, (long long)st.st_size, arg.size);
	mode_t um = umask(0);
	umask(um);
	if ((st.st_mode & 07777) != (0644 & ~um))
		fail("stat %s: permissions %o, expected %o", arg.path, (unsigned)(st.st_mode & 07777),
		     (unsigned)(0644 & ~um));
	if (lstat(arg.path, &st) != 0 || (size_t)st.st_size != arg.size)
		fail("lstat %s: wrong size", arg.path);
	if (fstatat(AT_FDCWD, arg.path, &st, 0) != 0 || (size_t)st.st_size != arg.size)
		fail("fstatat %s: wrong size", arg.path);
	struct statx sx;
	if (statx(AT_FDCWD, arg.path, 0, STATX_SIZE, &sx) != 0 || sx.stx_size != arg.size)
		fail("statx %s: wrong size", arg.path);
	if (access(arg.path, R_OK | W_OK) != 0)
		fail("access %s: %s", arg.path, strerror(errno));
	int fd = open(arg.path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size != arg.size)
		fail("fstat of an open %s: wrong size", arg.path);
	close(fd);
	check_file(arg.path, arg.size, arg.seed, 0);
	if (raw_exists(arg.path))
		fail("%s reached its real path although CKPTCACHE_PERSIST=never", arg.path);
	printf("statcached: stat/lstat/fstatat/statx/fstat report %zu bytes\n", arg.size);
	return 0;
}

static void expect_enoent(const char *path, const char *when)
{
	struct stat st;
	if (stat(path, &st) == 0 || errno != ENOENT)
		fail("%s: stat %s does not fail with ENOENT", when, path);
	int fd = open(path, O_RDONLY);
	if (fd >= 0 || errno != ENOENT)
		fail("%s: open %s does not fail with ENOENT", when, path);
	if (access(path, F_OK) == 0)
		fail("%s: access %s succeeds", when, path);
}

static int m_rename(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE SEED");
	char tmp[PATH_MAX], fin[PATH_MAX], a[PATH_MAX], bb[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s/final.bin.tmp", arg.path);
	snprintf(fin, sizeof(fin), "%s/final.bin", arg.path);
	gen_file(tmp, arg.size, arg.seed, 0);
	if (rename(tmp, fin) != 0)
		fail("rename %s -> %s: %s", tmp, fin, strerror(errno));
	expect_enoent(tmp, "after rename");
	check_file(fin, arg.size, arg.seed, 0);

	/* a rename over an existing checkpoint replaces it */
	snprintf(a, sizeof(a), "%s/a.bin", arg.path);
	snprintf(bb, sizeof(bb), "%s/b.bin", arg.path);
	gen_file(a, arg.size, arg.seed + 1, 0);
	gen_file(bb, arg.size / 2, arg.seed + 2, 0);
	if (rename(a, bb) != 0)
		fail("rename %s -> %s: %s", a, bb, strerror(errno));
	expect_enoent(a, "after rename over another checkpoint");
	check_file(bb, arg.size, arg.seed + 1, 0);
	printf("rename: ok\n");
	return 0;
}

static int m_unlink(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE SEED");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/u.bin", arg.path);
	gen_file(path, arg.size, arg.seed, 0);
	if (unlink(path) != 0)
		fail("unlink %s: %s", path, strerror(errno));
	expect_enoent(path, "after unlink");
	if (unlink(path) != -1 || errno != ENOENT)
		fail("a second unlink of %s did not fail with ENOENT", path);
	if (raw_exists(path))
		fail("%s is at its real path after unlink", path);
	sleep_ms(200);
	if (raw_exists(path))
		fail("%s appeared at its real path after unlink", path);
	/* a new version after the unlink is a normal checkpoint */
	gen_file(path, arg.size, arg.seed + 1, 0);
	check_file(path, arg.size, arg.seed + 1, 0);
	if (remove(path) != 0)
		fail("remove %s: %s", path, strerror(errno));
	expect_enoent(path, "after remove");
	printf("unlink: ok\n");
	return 0;
}

/* ---- modes: the descriptor table ------------------------------------------ */

/* A tagged descriptor closed behind the library's back (close_range,
 * closefrom, a raw close): the number is free again in the kernel, and the
 * untagged file that gets it next must read its own bytes. */
static int m_closeby(int argc, char **argv)
{
	need_args(argc, 4, "close_range|closefrom|syscall TAGGED UNTAGGED");
	const char *how = argv[1], *tagged = argv[2], *untagged = argv[3];
	static const char mine[] = "the untagged file's own bytes";
	char b[128];

	int u = open(untagged, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (u < 0 || write(u, mine, sizeof(mine) - 1) != (ssize_t)sizeof(mine) - 1 || close(u) != 0)
		fail("writing %s: %s", untagged, strerror(errno));
	int fd = gen_open(tagged, 4096, 3);
	int rc;
	if (strcmp(how, "close_range") == 0)
		rc = close_range((unsigned)fd, (unsigned)fd, 0);
	else if (strcmp(how, "closefrom") == 0)
		closefrom(fd), rc = 0;
	else
		rc = (int)syscall(SYS_close, fd), how = "syscall(SYS_close)";
	if (rc != 0)
		fail("%s of fd %d: %s", how, fd, strerror(errno));
	u = xopen(untagged, O_RDONLY);
	memset(b, 0, sizeof(b));
	ssize_t r = read(u, b, sizeof(b) - 1);
	unsigned char e[16];
	pattern(e, 0, sizeof(e), 3);
	if (r < 0)
		fail("after %s closed tagged fd %d, read of untagged %s (fd %d) failed: %s", how, fd,
		     untagged, u, strerror(errno));
	if (r >= 16 && memcmp(b, e, 16) == 0)
		fail("after %s closed tagged fd %d, the untagged file %s opened as fd %d reads the "
		     "checkpoint's bytes", how, fd, untagged, u);
	if (r != (ssize_t)sizeof(mine) - 1 || memcmp(b, mine, sizeof(mine) - 1) != 0)
		fail("after %s closed tagged fd %d, the untagged file %s (fd %d) reads %zd wrong bytes", how,
		     fd, untagged, u, r);
	struct stat st;
	if (fstat(u, &st) != 0 || st.st_size != (off_t)sizeof(mine) - 1)
		fail("after %s closed tagged fd %d, fstat of the untagged fd %d reports the checkpoint", how,
		     fd, u);
	close(u);
	check_file(tagged, 4096, 3, 0);
	printf("closeby %s: the reused descriptor reads the untagged file\n", how);
	return 0;
}

/* ---- modes: metadata of cached checkpoints -------------------------------- */

/* chmod/chown/utimensat by path and fchmod/fchown/futimens on the
 * descriptor of a checkpoint that is still only in the cache. Every
 * failure is collected, so one run names them all. */
static int m_meta(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	char p[PATH_MAX], q[PATH_MAX], errs[2048] = "";
	const struct timespec ts[2] = { { 1500000000, 0 }, { 1500000000, 0 } };
	struct stat st;
	size_t n = 0;
#define META_ERR(...) (n += (size_t)snprintf(errs + n, n < sizeof(errs) ? sizeof(errs) - n : 0, __VA_ARGS__))

	snprintf(p, sizeof(p), "%s/meta.bin", argv[1]);
	snprintf(q, sizeof(q), "%s/meta2.bin", argv[1]);
	gen_file(p, 100000, 4, 0);
	if (chmod(p, 0600) != 0)
		META_ERR("chmod: %s; ", strerror(errno));
	if (utimensat(AT_FDCWD, p, ts, 0) != 0)
		META_ERR("utimensat: %s; ", strerror(errno));
	if (chown(p, geteuid(), getegid()) != 0)
		META_ERR("chown: %s; ", strerror(errno));
	if (stat(p, &st) != 0)
		META_ERR("stat: %s; ", strerror(errno));
	else if ((st.st_mode & 07777) != 0600 || st.st_mtim.tv_sec != ts[1].tv_sec)
		META_ERR("stat after chmod/utimensat: mode %o mtime %lld; ", (unsigned)(st.st_mode & 07777),
			 (long long)st.st_mtim.tv_sec);

	int fd = xopen(q, O_WRONLY | O_CREAT | O_TRUNC);
	unsigned char *e = pattern_buf(100000, 5);
	write_all(fd, e, 100000, q);
	free(e);
	if (fchmod(fd, 0640) != 0)
		META_ERR("fchmod: %s; ", strerror(errno));
	if (fchown(fd, geteuid(), getegid()) != 0)
		META_ERR("fchown: %s; ", strerror(errno));
	if (futimens(fd, ts) != 0)
		META_ERR("futimens: %s; ", strerror(errno));
	xclose(fd, q);
	if (stat(q, &st) != 0)
		META_ERR("stat: %s; ", strerror(errno));
	else if ((st.st_mode & 07777) != 0640 || st.st_mtim.tv_sec != ts[1].tv_sec)
		META_ERR("stat after fchmod/futimens: mode %o mtime %lld; ", (unsigned)(st.st_mode & 07777),
			 (long long)st.st_mtim.tv_sec);
	check_file(p, 100000, 4, 0);
	check_file(q, 100000, 5, 0);
	if (n)
		fail("on a checkpoint still in the cache: %s", errs);
	printf("meta: chmod, chown, utimensat, fchmod, fchown, futimens ok\n");
	return 0;
#undef META_ERR
}

/* ---- modes: the copy calls ------------------------------------------------- */

static int m_copycalls(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR UNTAGGED_DIR SIZE SEED");
	const char *dir = argv[1], *udir = argv[2];
	char a[PATH_MAX], bpath[PATH_MAX], c[PATH_MAX], d[PATH_MAX], u[PATH_MAX], v[PATH_MAX];
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size + 1);
	ssize_t r;

	snprintf(a, sizeof(a), "%s/src.bin", dir);
	snprintf(bpath, sizeof(bpath), "%s/sendfile.bin", dir);
	snprintf(c, sizeof(c), "%s/cfr.bin", dir);
	snprintf(d, sizeof(d), "%s/cfr_in.bin", dir);
	snprintf(u, sizeof(u), "%s/plain_src.bin", udir);
	snprintf(v, sizeof(v), "%s/plain_out.bin", udir);
	gen_file(a, arg.size, arg.seed, 0);
	gen_file(u, arg.size, arg.seed + 1, 0);

	/* sendfile: tagged -> tagged, with the input's position */
	int in = open(a, O_RDONLY), out = open(bpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (in < 0 || out < 0)
		fail("open: %s", strerror(errno));
	for (size_t done = 0; done < arg.size; done += (size_t)r)
		if ((r = sendfile(out, in, NULL, arg.size - done)) <= 0)
			fail("sendfile tagged -> tagged: %s", r < 0 ? strerror(errno) : "0 bytes");
	close(out);
	/* sendfile with an offset: the input's position does not move */
	if (lseek(in, 0, SEEK_SET) != 0)
		fail("lseek: %s", strerror(errno));
	out = open(v, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	off_t off = 1000;
	for (size_t done = 0; done < arg.size - 1000; done += (size_t)r)
		if ((r = sendfile(out, in, &off, arg.size - 1000 - done)) <= 0)
			fail("sendfile tagged -> untagged: %s", r < 0 ? strerror(errno) : "0 bytes");
	if (off != (off_t)arg.size || lseek(in, 0, SEEK_CUR) != 0)
		fail("sendfile with an offset: offset %lld, position %lld", (long long)off,
		     (long long)lseek(in, 0, SEEK_CUR));
	close(out);
	check_file(bpath, arg.size, arg.seed, 0);
	int fv = open(v, O_RDONLY);
	if (fv < 0 || read_all(fv, b, arg.size, v) != arg.size - 1000 ||
	    memcmp(b, e + 1000, arg.size - 1000) != 0)
		fail("sendfile to an untagged file: wrong bytes");
	close(fv);

	/* copy_file_range: tagged -> tagged with offsets, untagged -> tagged */
	out = open(c, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	off_t ioff = 5, ooff = 0;
	for (size_t done = 0; done < arg.size - 5; done += (size_t)r)
		if ((r = copy_file_range(in, &ioff, out, &ooff, arg.size - 5 - done, 0)) <= 0)
			fail("copy_file_range tagged -> tagged: %s", r < 0 ? strerror(errno) : "0 bytes");
	close(out);
	close(in);
	int fc = open(c, O_RDONLY);
	if (fc < 0 || read_all(fc, b, arg.size, c) != arg.size - 5 || memcmp(b, e + 5, arg.size - 5) != 0)
		fail("copy_file_range between tagged files: wrong bytes");
	close(fc);
	in = open(u, O_RDONLY);
	out = open(d, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (size_t done = 0; done < arg.size; done += (size_t)r)
		if ((r = copy_file_range(in, NULL, out, NULL, arg.size - done, 0)) <= 0)
			fail("copy_file_range untagged -> tagged: %s", r < 0 ? strerror(errno) : "0 bytes");
	close(in);
	close(out);
	check_file(d, arg.size, arg.seed + 1, 0);

	/* splice: tagged -> pipe, in pieces the pipe can hold */
	int p[2];
	if (pipe(p) != 0)
		fail("pipe: %s", strerror(errno));
	in = open(a, O_RDONLY);
	size_t got = 0;
	while (got < arg.size) {
		size_t want = arg.size - got < 16384 ? arg.size - got : 16384;
		r = splice(in, NULL, p[1], NULL, want, 0);
		if (r <= 0)
			fail("splice tagged -> pipe: %s", r < 0 ? strerror(errno) : "0 bytes");
		if (read_all(p[0], b + got, (size_t)r, "pipe") != (size_t)r)
			fail("short read from the pipe");
		got += (size_t)r;
	}
	if (memcmp(b, e, arg.size) != 0)
		fail("splice from a tagged file: wrong bytes");
	close(in);
	close(p[0]);
	close(p[1]);
	printf("copycalls: sendfile, copy_file_range, splice ok\n");
	free(b);
	free(e);
	return 0;
}

/* ---- modes: assorted open flags and sizes --------------------------------- */

static int m_misc(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	const char *dir = argv[1];
	char p[PATH_MAX];
	unsigned char *e = xmalloc(1u << 21), *b = xmalloc(1u << 21);
	struct stat st;
	int fd;

#define MPATH(name) snprintf(p, sizeof(p), "%s/%s", dir, name)
	/* a write past the end leaves a hole that reads as zeros */
	MPATH("hole.bin");
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	pattern(e, 0, 1000, 1);
	write_all(fd, e, 1000, p);
	memset(e + 1000, 0, 4000);
	pattern(e + 5000, 5000, 1000, 1);
	if (pwrite(fd, e + 5000, 1000, 5000) != 1000)
		fail("pwrite past the end: %s", strerror(errno));
	if (lseek(fd, 9000, SEEK_SET) != 9000)
		fail("lseek past the end");
	memset(e + 6000, 0, 3000);
	pattern(e + 9000, 9000, 100, 1);
	write_all(fd, e + 9000, 100, p);
	if (pread(fd, b, 20000, 0) != 9100 || memcmp(b, e, 9100) != 0)
		fail("a checkpoint with holes reads wrong bytes");
	if (pread(fd, b, 10, 9100) != 0 || pread(fd, b, 10, 1 << 20) != 0)
		fail("pread at or past the end does not return 0");
	close(fd);

	/* O_EXCL on an existing checkpoint */
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd >= 0 || errno != EEXIST)
		fail("O_CREAT|O_EXCL of a cached checkpoint: %s", fd >= 0 ? "opened" : strerror(errno));

	/* O_APPEND on an existing checkpoint continues it */
	fd = open(p, O_WRONLY | O_APPEND);
	if (fd < 0)
		fail("open O_APPEND: %s", strerror(errno));
	pattern(e + 9100, 9100, 900, 1);
	write_all(fd, e + 9100, 900, p);
	close(fd);
	fd = open(p, O_RDONLY);
	if (fd < 0 || read_all(fd, b, 20000, p) != 10000 || memcmp(b, e, 10000) != 0)
		fail("after an O_APPEND open the checkpoint reads wrong bytes");
	close(fd);

	/* O_RDWR without O_TRUNC updates in place */
	fd = open(p, O_RDWR);
	if (fd < 0 || pwrite(fd, "UPDATE", 6, 100) != 6)
		fail("in-place update: %s", strerror(errno));
	memcpy(e + 100, "UPDATE", 6);
	if (pread(fd, b, 20000, 0) != 10000 || memcmp(b, e, 10000) != 0)
		fail("an O_RDWR descriptor reads wrong bytes after its update");
	close(fd);

	/* truncate(2) by name of a cached checkpoint */
	MPATH("trunc.bin");
	gen_file(p, 100000, 2, 0);
	if (truncate(p, 3000) != 0)
		fail("truncate: %s", strerror(errno));
	if (stat(p, &st) != 0 || st.st_size != 3000)
		fail("stat after truncate: size %lld", (long long)st.st_size);
	check_file(p, 3000, 2, 0);

	/* an empty checkpoint */
	MPATH("empty.bin");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || close(fd) != 0)
		fail("empty checkpoint: %s", strerror(errno));
	if (stat(p, &st) != 0 || st.st_size != 0)
		fail("stat of an empty checkpoint");
	fd = open(p, O_RDONLY);
	if (fd < 0 || read(fd, b, 10) != 0)
		fail("reading an empty checkpoint");
	close(fd);

	/* O_WRONLY|O_CREAT without O_TRUNC of a new file starts a checkpoint */
	MPATH("creat.bin");
	fd = creat(p, 0644);
	if (fd < 0)
		fail("creat: %s", strerror(errno));
	pattern(e, 0, 100000, 6);
	write_all(fd, e, 100000, p);
	close(fd);
	check_file(p, 100000, 6, 0);

	/* space reservation and advice */
	MPATH("falloc.bin");
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open: %s", strerror(errno));
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL) != 0)
		fail("posix_fadvise on a tagged writer");
	int pe = posix_fallocate(fd, 0, 1 << 20);
	if (pe != 0)
		fail("posix_fallocate: %s", strerror(pe));
	if (fstat(fd, &st) != 0 || st.st_size != 1 << 20)
		fail("after posix_fallocate(1M): size %lld", (long long)st.st_size);
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 2 << 20) != 0)
		fail("fallocate(KEEP_SIZE): %s", strerror(errno));
	if (fstat(fd, &st) != 0 || st.st_size != 1 << 20)
		fail("fallocate(KEEP_SIZE) changed the size to %lld", (long long)st.st_size);
	pattern(e, 0, 1000, 8);
	write_all(fd, e, 1000, p);
	memset(e + 1000, 0, (1u << 20) - 1000);
	close(fd);
	fd = open(p, O_RDONLY);
	if (fd < 0 || read_all(fd, b, 1u << 21, p) != 1u << 20 || memcmp(b, e, 1u << 20) != 0)
		fail("a preallocated checkpoint reads wrong bytes");
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0 || readahead(fd, 0, 4096) != 0)
		fail("posix_fadvise/readahead on a tagged reader");
	close(fd);
	/* O_DIRECT with aligned buffers, as HPC codes write checkpoints */
	MPATH("direct.bin");
	unsigned char *al;
	if (posix_memalign((void **)&al, 4096, 1u << 20) != 0)
		fail("posix_memalign");
	pattern(al, 0, 1u << 20, 9);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0)
		fail("open O_DIRECT for writing: %s", strerror(errno));
	for (size_t k = 0; k < (1u << 20); k += 256 * 1024)
		if (write(fd, al + k, 256 * 1024) != 256 * 1024)
			fail("O_DIRECT write: %s", strerror(errno));
	close(fd);
	memset(al, 0, 1u << 20);
	fd = open(p, O_RDONLY | O_DIRECT);
	if (fd < 0 || read(fd, al, 1u << 20) != 1u << 20 || pattern_diff(al, 0, 1u << 20, 9) != 1u << 20)
		fail("O_DIRECT read back wrong bytes");
	close(fd);
	free(al);

	/* errors the real open would give */
	MPATH("nodir/x.bin");
	if (open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644) != -1 || errno != ENOENT)
		fail("creating a checkpoint in a missing folder did not fail with ENOENT");
	MPATH("missing.bin");
	if (open(p, O_RDONLY) != -1 || errno != ENOENT)
		fail("opening a missing checkpoint did not fail with ENOENT");
	MPATH("adir");
	mkdir(p, 0755);
	if (open(p, O_WRONLY | O_TRUNC) != -1 || errno != EISDIR)
		fail("opening a folder for writing did not fail with EISDIR");
	rmdir(p);
	printf("misc: holes, O_EXCL, O_APPEND, O_RDWR update, truncate, empty, creat, fallocate, O_DIRECT ok\n");
	free(b);
	free(e);
	return 0;
#undef MPATH
}

/* ---- untagged files: a transcript to compare with and without the library -- */

static uint64_t fnv(const unsigned char *b, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static int m_plainops(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	const char *dir = argv[1];
	char p1[PATH_MAX], p2[PATH_MAX];
	const size_t n = 1u << 20;
	unsigned char *e = pattern_buf(n, 7), *b = xmalloc(n);
	struct stat st;
	long r;

	/* each result is taken before it is printed: printf's arguments are
	 * evaluated in no fixed order */
	snprintf(p1, sizeof(p1), "%s/plain1.dat", dir);
	snprintf(p2, sizeof(p2), "%s/plain2.dat", dir);
	int fd = open(p1, O_RDWR | O_CREAT | O_TRUNC, 0644);
	printf("open rw: %s\n", fd >= 0 ? "ok" : strerror(errno));
	r = write(fd, e, n);
	printf("write: %ld\n", r);
	printf("lseek cur: %lld\n", (long long)lseek(fd, 0, SEEK_CUR));
	fstat(fd, &st);
	printf("fstat: size %lld reg %d\n", (long long)st.st_size, S_ISREG(st.st_mode));
	memset(b, 0, n);
	r = pread(fd, b, 4096, 1000);
	printf("pread: %ld fnv %016" PRIx64 "\n", r, fnv(b, 4096));
	r = syscall(SYS_pread64, fd, b, 4096, 5000);
	printf("raw SYS_pread64: %ld fnv %016" PRIx64 "\n", r, fnv(b, 4096));
	lseek(fd, 0, SEEK_SET);
	r = syscall(SYS_read, fd, b, 4096);
	printf("raw SYS_read: %ld fnv %016" PRIx64 "\n", r, fnv(b, 4096));
	int d = dup(fd);
	printf("dup lseek: %lld\n", (long long)lseek(d, 0, SEEK_CUR));
	printf("F_GETFL accmode: %d\n", fcntl(d, F_GETFL) & O_ACCMODE);
	printf("ftruncate: %d\n", ftruncate(fd, 500000));
	printf("fsync: %d\n", fsync(fd));
	printf("flock: %d\n", flock(fd, LOCK_EX));
	unsigned char *m = mmap(NULL, 500000, PROT_READ, MAP_SHARED, fd, 0);
	printf("mmap: %s fnv %016" PRIx64 "\n", m == MAP_FAILED ? "failed" : "ok",
	       m == MAP_FAILED ? 0 : fnv(m, 500000));
	if (m != MAP_FAILED)
		munmap(m, 500000);
	close(d);
	close(fd);

	FILE *f = fopen(p2, "w+");
	printf("fopen: %s\n", f ? "ok" : strerror(errno));
	r = (long)fwrite(e, 1, 77777, f);
	printf("fwrite: %ld\n", r);
	rewind(f);
	memset(b, 0, n);
	r = (long)fread(b, 1, n, f);
	printf("fread: %ld fnv %016" PRIx64 "\n", r, fnv(b, 77777));
	fclose(f);
	printf("rename: %d\n", rename(p2, p1));
	r = stat(p1, &st);
	printf("stat: %ld size %lld\n", r, (long long)st.st_size);
	r = stat(p2, &st);
	printf("stat old name: %ld %s\n", r, strerror(errno));
	printf("unlink: %d\n", unlink(p1));
	r = open(p1, O_RDONLY);
	printf("open after unlink: %ld %s\n", r, strerror(errno));
	free(b);
	free(e);
	return 0;
}

/* ---- the end of a program with a thread still writing ---------------------- */

static const char *race_dir;
static size_t race_size;
static uint64_t race_seed;
static const char *race_action;
static atomic_bool race_exiting;

/* What a program does when a write fails: gives up (exit(1)), or aborts. */
static _Noreturn void race_give_up(const char *call, const char *path)
{
	char msg[PATH_MAX + 128];
	int n = snprintf(msg, sizeof(msg), PROG " exitrace: writer: %s %s: %s\n", call, path,
			 strerror(errno));
	/* not through stdio, whose locks the exiting thread may hold */
	if (write(STDERR_FILENO, msg, (size_t)n) < 0)
		n = 0;
	if (strcmp(race_action, "abort") == 0)
		abort();
	exit(1);
}

/* Writes checkpoint after checkpoint (live_NNN.bin, stream seed + 1000 + n)
 * in 64 KiB pieces a millisecond apart until the process ends, so that its
 * writes meet the exit's work; with the action "abort-late" it aborts a while
 * after the exit began, as a thread that gives up on a timeout would. */
static void *race_writer(void *arg)
{
	(void)arg;
	unsigned char *b = pattern_buf(race_size, 0);
	char path[PATH_MAX];
	for (int n = 0;; n++) {
		snprintf(path, sizeof(path), "%s/live_%03d.bin", race_dir, n % 1000);
		pattern(b, 0, race_size, race_seed + 1000 + (uint64_t)n % 1000);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			race_give_up("open", path);
		for (size_t off = 0; off < race_size; off += 65536) {
			size_t k = race_size - off < 65536 ? race_size - off : 65536;
			if (write(fd, b + off, k) != (ssize_t)k)
				race_give_up("write", path);
			/* as a program computing between writes: the exit meets
			 * a file open and being written */
			sleep_ms(1);
			if (!strcmp(race_action, "abort-late") && atomic_load(&race_exiting)) {
				sleep_ms(30);
				abort();
			}
		}
		if (close(fd) != 0)
			race_give_up("close", path);
	}
	return NULL;
}

/* exitrace DIR N SIZE SEED exit|abort|abort-late: writes and closes N
 * checkpoints (done_NN.bin), opens empty.bin and leaves it open and empty,
 * starts a thread that writes more, and calls exit(0) while that thread is
 * writing. Whatever the thread sees, every closed checkpoint must be whole at
 * its real path afterwards, and empty.bin must exist. */
static int m_exitrace(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED exit|abort|abort-late");
	char path[PATH_MAX];
	race_dir = arg.path;
	race_size = arg.size;
	race_seed = arg.seed;
	race_action = argv[5];
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/done_%02ld.bin", arg.path, i);
		gen_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	snprintf(path, sizeof(path), "%s/empty.bin", arg.path);
	xopen(path, O_WRONLY | O_CREAT | O_TRUNC);
	pthread_t t;
	if (pthread_create(&t, NULL, race_writer, NULL) != 0)
		fail("pthread_create");
	sleep_ms(20);
	atomic_store(&race_exiting, true);
	exit(0);
}

/* prefix PATH SEED: the file holds a prefix (possibly empty) of stream SEED. */
static int m_prefix(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SEED");
	int fd = raw_open(arg.path, O_RDONLY);
	if (fd < 0)
		fail("%s: %s", arg.path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0)
		fail("fstat %s: %s", arg.path, strerror(errno));
	unsigned char *b = xmalloc((size_t)st.st_size);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = raw_read(fd, b + got, (size_t)st.st_size - got);
		if (r <= 0)
			fail("read %s: %s", arg.path, r < 0 ? strerror(errno) : "short");
		got += (size_t)r;
	}
	size_t d = pattern_diff(b, 0, got, arg.seed);
	if (d != got)
		fail("%s: byte %zu of %zu differs from what was written", arg.path, d, got);
	free(b);
	return 0;
}

/* ---- main ----------------------------------------------------------------- */

struct modedef {
	const char *name;
	int (*fn)(int, char **);
};

static const struct modedef modes[] = {
	{ "gen", m_gen }, { "rss", m_rss },	    { "check", m_check },	{ "wr", m_wr },
	{ "rawcheck", m_rawcheck }, { "history", m_history },	{ "threads", m_threads },
	{ "readfd", m_readfd },	    { "fork", m_fork },		{ "rawsys", m_rawsys },
	{ "mmap", m_mmap },	    { "procfd", m_procfd },	{ "uring", m_uring },
	{ "aio", m_aio },	    { "locks", m_locks },	{ "fdops", m_fdops },
	{ "fsync-never", m_fsync_never }, { "stdio", m_stdio }, { "stdio-large", m_stdio_large }, { "stdio-large-writes", m_stdio_large_writes }, { "statcached", m_statcached },
	{ "closeby", m_closeby },   { "meta", m_meta },	    { "copycalls", m_copycalls },
	{ "misc", m_misc },	    { "histcheck", m_histcheck }, { "rewrite", m_rewrite },
	{ "growhints", m_growhints }, { "unlinkrace", m_unlinkrace }, { "handover", m_handover }, { "pingpong", m_pingpong }, { "renames", m_renames }, { "churn", m_churn }, { "noclose", m_noclose },	    { "freopen", m_freopen },	    { "stdout", m_stdout },	    { "sharedfd", m_sharedfd },	{ "n1part", m_n1part },	    { "rename", m_rename },	    { "unlink", m_unlink },	{ "plainops", m_plainops },
	{ "exitrace", m_exitrace }, { "prefix", m_prefix },
};

int main(int argc, char **argv)
{
	self_exe = realpath("/proc/self/exe", NULL);
	if (argc < 2) {
		fprintf(stderr, "usage: " PROG " MODE ARGS...\nmodes:");
		for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
			fprintf(stderr, " %s", modes[i].name);
		fputc('\n', stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(argv[1], modes[i].name) == 0) {
			mode = modes[i].name;
			return modes[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, PROG ": unknown mode '%s'\n", argv[1]);
	return 2;
}
