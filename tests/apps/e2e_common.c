/* e2e_helper: what every mode uses (e2e_helper.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"
const char *mode = "?";
char *self_exe;


_Noreturn void fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, PROG " %s: FAIL: ", mode);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}


_Noreturn void note(const char *fmt, ...)
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

uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Bytes [off, off+n) of stream seed: any slice can be checked on its own,
 * so interleaved or partial writes are verifiable. */
void pattern(unsigned char *b, uint64_t off, size_t n, uint64_t seed)
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
size_t pattern_diff(const unsigned char *b, uint64_t off, size_t n, uint64_t seed)
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

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		fail("out of memory (%zu bytes)", n);
	return p;
}

unsigned char *pattern_buf(size_t n, uint64_t seed)
{
	unsigned char *b = xmalloc(n);
	pattern(b, 0, n, seed);
	return b;
}

/* ---- argument parsing ------------------------------------------------------ */

uint64_t num(const char *s)
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

void need_args(int argc, int n, const char *usage)
{
	if (argc < n) {
		fprintf(stderr, "usage: " PROG " %s %s\n", mode, usage);
		exit(2);
	}
}


/* The word of usage after the one at w. */
static const char *next_word(const char *w)
{
	w += strcspn(w, " ");
	return w + strspn(w, " ");
}

/* need_args for the operands before the first "[...]" of usage, then reads
 * each of them whose name struct args knows; the others (READ, HINTS,
 * append|truncate, ...) are left in argv for the mode. */
struct args parse_args(int argc, char **argv, const char *usage)
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
size_t chunk_arg(int argc, char **argv)
{
	return argc > 4 ? num(argv[4]) : 0;
}

/* Whether the optional operand at argv[i] asks for the "verify" pass only. */
bool verify_only(int argc, char **argv, int i)
{
	return argc > i && strcmp(argv[i], "verify") == 0;
}

/* ---- I/O through the library ----------------------------------------------- */

/* open(2) that fails the test; a file it creates gets mode 0644 */
int xopen(const char *path, int flags)
{
	int fd = open(path, flags, 0644);
	if (fd < 0)
		fail("open %s: %s", path, strerror(errno));
	return fd;
}

/* close(2) that fails the test: a tagged writer reports a failed flush here */
void xclose(int fd, const char *path)
{
	if (close(fd) != 0)
		fail("close %s: %s", path, strerror(errno));
}

/* fopen(3) that fails the test */
FILE *xfopen(const char *path, const char *how)
{
	FILE *f = fopen(path, how);
	if (!f)
		fail("fopen %s %s: %s", path, how, strerror(errno));
	return f;
}

void xfclose(FILE *f)
{
	if (fclose(f) != 0)
		fail("fclose: %s", strerror(errno));
}

void write_all(int fd, const unsigned char *b, size_t n, const char *what)
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

size_t read_all(int fd, unsigned char *b, size_t n, const char *what)
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
void gen_file(const char *path, size_t size, uint64_t seed, size_t chunk)
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
void check_file(const char *path, size_t size, uint64_t seed, size_t chunk)
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
int gen_open(const char *path, size_t size, uint64_t seed)
{
	gen_file(path, size, seed, 0);
	return xopen(path, O_RDONLY);
}

/* Whether the next n bytes read from fd are expect's. */
bool reads_back(int fd, unsigned char *b, const unsigned char *expect, size_t n,
		       const char *path)
{
	return read_all(fd, b, n, path) == n && memcmp(b, expect, n) == 0;
}

/* ---- I/O around the library: raw system calls ------------------------------ */

int raw_open(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0);
}

ssize_t raw_read(int fd, void *b, size_t n)
{
	return (ssize_t)syscall(SYS_read, fd, b, n);
}

/* Whether path exists at its real location (the library cannot see this). */
bool raw_exists(const char *path)
{
	struct stat st;
	return syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0;
}

/* The real file at path holds exactly `size` bytes equal to expect. */
void raw_check(const char *path, const unsigned char *expect, size_t size, const char *when)
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
void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- modes: files ------------------------------------------------------------ */

