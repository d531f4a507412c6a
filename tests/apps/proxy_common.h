/* proxy_common.h: the host code the RTM stand-ins share (rtm_proxy.c,
 * rtm_proxy_cuda.cu, uvm_baseline.cu; gpu_limits.cu takes its errors,
 * clocks and option values): fatal errors, clocks, option values,
 * variable checkpoint sizes from a trace, the restore order, checkpoint
 * paths, the hint file (whole, or grown one line at a time) and whole-file
 * I/O. */
/* C11 that is also C++17, since nvcc compiles the .cu files as C++; all static
 * inline, so that each program stays one translation unit with no build
 * change. The includer defines PROG, the name that starts every message. */
#ifndef CKC_PROXY_COMMON_H
#define CKC_PROXY_COMMON_H

#ifndef PROG
#error "define PROG (the program name of the messages) before including proxy_common.h"
#endif

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#define MiB (1024.0 * 1024.0)

/* _Noreturn is C11 only, [[noreturn]] C++ only. */
#ifdef __cplusplus
#define PROXY_NORETURN [[noreturn]]
#else
#define PROXY_NORETURN _Noreturn
#endif

/* ---- errors and clocks ------------------------------------------------------ */

/* Every failed system call ends the run: the benchmark must never report a
 * throughput for I/O that did not happen. */
PROXY_NORETURN static inline void die_sys(const char *call, const char *path)
{
	int e = errno;
	fprintf(stderr, PROG ": %s %s: %s\n", call, path, strerror(e));
	exit(1);
}

PROXY_NORETURN static inline void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n" PROG ": try '" PROG " --help'\n");
	exit(2);
}

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The simulated computation or host-side idle time: sleeping (not spinning)
 * leaves the CPU to the library's background threads, as a GPU kernel would. */
static inline void idle_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- option values ---------------------------------------------------------- */

enum io_kind { IO_WRITE, IO_FWRITE };
enum order_kind { ORDER_SEQUENTIAL, ORDER_REVERSE, ORDER_RANDOM };

/* The --sizes lines of a GPU program's usage (a printf format). */
#define PROXY_SIZES_HELP                                                                        \
	"  --sizes FILE[:COL]    variable checkpoint sizes instead of --size: one size per\n"      \
	"                        row of column COL (0-based, default 0) of the CSV file\n"         \
	"                        FILE (bytes or K/M/G/T, each rounded down to a multiple\n"        \
	"                        of 8, at least 4K; a header row and '#' lines are\n"              \
	"                        skipped); checkpoint k has the size of row k %% rows. The\n"      \
	"                        state is sized for the largest; a smaller checkpoint is a\n"      \
	"                        prefix of it, and its GPU checksum covers that prefix\n"

static const char *const order_names[] = { "sequential", "reverse", "random" };

/* Bytes, or a number (fractions allowed) with K, M, G or T (powers of 1024),
 * optionally followed by B or iB. */
static inline bool parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || !(v >= 0))
		return false;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 'K': mul = 1024.0; end++; break;
	case 'M': mul = MiB; end++; break;
	case 'G': mul = MiB * 1024; end++; break;
	case 'T': mul = MiB * MiB; end++; break;
	default: break;
	}
	if (mul > 1 && (end[0] == 'i' || end[0] == 'I') && toupper((unsigned char)end[1]) == 'B')
		end += 2;
	else if (toupper((unsigned char)*end) == 'B')
		end++;
	if (*end != '\0')
		return false;
	v *= mul;
	if (v > (double)SSIZE_MAX)
		return false;
	*out = (size_t)v; /* a fraction of a byte is dropped */
	return true;
}

static inline long parse_long(const char *s, const char *what, long min)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || errno || v < min) {
		fprintf(stderr, PROG ": --%s '%s': expected an integer >= %ld\n", what, s, min);
		exit(2);
	}
	return v;
}

/* A size option (bytes or K, M, G, T) of at least min bytes. */
static inline size_t parse_size_min(const char *s, const char *what, size_t min)
{
	size_t v;
	if (!parse_size(s, &v) || v < min) {
		fprintf(stderr, PROG ": --%s '%s': expected a size (bytes or K, M, G, T)", what, s);
		if (min > 0)
			fprintf(stderr, " of at least %zu bytes", min);
		fprintf(stderr, "\n");
		exit(2);
	}
	return v;
}

/* --device: an int, since the CUDA API takes one. */
static inline int parse_device(const char *s)
{
	long d = parse_long(s, "device", 0);
	if (d > INT_MAX)
		die_usage("--device '%s': out of range", s);
	return (int)d;
}

static inline enum io_kind parse_io(const char *s)
{
	if (strcmp(s, "write") == 0)
		return IO_WRITE;
	if (strcmp(s, "fwrite") != 0)
		die_usage("--io '%s': expected write or fwrite", s);
	return IO_FWRITE;
}

static inline enum order_kind parse_order(const char *s)
{
	size_t k;
	for (k = 0; k < 3 && strcmp(s, order_names[k]) != 0; k++)
		;
	if (k == 3)
		die_usage("--order '%s': expected sequential, reverse or random", s);
	return (enum order_kind)k;
}

/* strtoull alone would take "-1" as 2^64 - 1: a seed the user did not mean. */
static inline uint64_t parse_seed(const char *s)
{
	char *end;
	errno = 0;
	uint64_t v = strtoull(s, &end, 0);
	if (end == s || *end || errno || s[0] == '-')
		die_usage("--seed '%s': expected a non-negative integer", s);
	return v;
}

/* ---- variable checkpoint sizes (--sizes FILE[:COL]) --------------------------- */

/* One checkpoint size per row of a CSV trace (e.g. bytes per GPU per
 * checkpoint): checkpoint k has size v[k % n]. */
struct ckpt_sizes {
	size_t *v;  /* bytes, each a multiple of 8 */
	long n;     /* rows */
	size_t max; /* the largest: the state the program allocates */
	double sum; /* over the n rows */
	const char *file;
	long col;
};

PROXY_NORETURN static inline void die_sizes(const char *file, long line, const char *msg, const char *field)
{
	if (line > 0)
		fprintf(stderr, PROG ": --sizes: %s:%ld: %s", file, line, msg);
	else
		fprintf(stderr, PROG ": --sizes: %s: %s", file, msg);
	if (field)
		fprintf(stderr, " '%s'", field);
	fprintf(stderr, "\n");
	exit(2);
}

/* Reads the sizes of column COL (0-based, default 0) of FILE, given as
 * "FILE" or "FILE:COL" (a last ':' followed by digits only names the
 * column). Fields are separated by commas; blank lines and lines whose
 * first non-blank character is '#' are skipped, and so is a first row
 * whose field is not a size (a header). A field is a size as --size takes
 * it (bytes, or K/M/G/T); each is rounded down to a multiple of 8 and must
 * then be at least min bytes. Any other problem ends the program with
 * FILE:LINE and exit status 2; an unreadable file with exit status 1. */
static inline void load_sizes(const char *spec, size_t min, struct ckpt_sizes *out)
{
	size_t len = strlen(spec);
	char *file = (char *)malloc(len + 1);
	if (!file)
		die_sys("malloc", "--sizes");
	memcpy(file, spec, len + 1);
	long col = 0;
	char *colon = strrchr(file, ':');
	if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
		errno = 0;
		char *end;
		long c = strtol(colon + 1, &end, 10);
		if (errno || c > 1000000)
			die_usage("--sizes '%s': column out of range", spec);
		col = c;
		*colon = '\0';
	}
	if (!file[0])
		die_usage("--sizes '%s': expected FILE or FILE:COL", spec);

	FILE *f = fopen(file, "r");
	if (!f)
		die_sys("fopen", file);
	memset(out, 0, sizeof(*out));
	out->file = file;
	out->col = col;
	size_t cap = 0;
	char *line = NULL;
	size_t lcap = 0;
	long no = 0;
	bool first = true;
	while (getline(&line, &lcap, f) >= 0) {
		no++;
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0')
			continue;
		/* the field: after col commas, up to the next comma or the end */
		char *fld = p;
		long k;
		for (k = 0; k < col; k++) {
			char *c = strchr(fld, ',');
			if (!c)
				break;
			fld = c + 1;
		}
		if (k < col) {
			char msg[96];
			snprintf(msg, sizeof(msg), "the row has %ld field(s): no column %ld", k + 1, col);
			die_sizes(file, no, msg, NULL);
		}
		size_t flen = strcspn(fld, ",\r\n");
		fld[flen] = '\0';
		while (*fld == ' ' || *fld == '\t')
			fld++;
		flen = strlen(fld);
		while (flen > 0 && (fld[flen - 1] == ' ' || fld[flen - 1] == '\t' || fld[flen - 1] == '"'))
			fld[--flen] = '\0';
		if (*fld == '"')
			fld++;
		size_t v;
		if (!parse_size(fld, &v)) {
			if (first) { /* a header */
				first = false;
				continue;
			}
			die_sizes(file, no, "not a size (bytes, or K, M, G, T):", fld);
		}
		first = false;
		v &= ~(size_t)7;
		if (v < min) {
			char msg[96];
			snprintf(msg, sizeof(msg), "a checkpoint of %zu bytes (rounded down to 8); the least is %zu:", v,
				 min);
			die_sizes(file, no, msg, fld);
		}
		if ((size_t)out->n == cap) {
			cap = cap ? 2 * cap : 64;
			size_t *nv = (size_t *)realloc(out->v, cap * sizeof(*nv));
			if (!nv)
				die_sys("realloc", "--sizes");
			out->v = nv;
		}
		out->v[out->n++] = v;
		out->sum += (double)v;
		if (v > out->max)
			out->max = v;
	}
	if (ferror(f))
		die_sys("read", file);
	free(line);
	fclose(f);
	if (out->n == 0)
		die_sizes(file, 0, "no sizes in the file", NULL);
}

/* --size/--sizes/--count after parsing: with a trace, the state is sized for
 * its largest checkpoint and the count defaults to its rows. The size is
 * rounded down to a multiple of 8. */
static inline void resolve_sizes(const char *spec, bool size_set, bool count_set, size_t *size,
				 long *count, struct ckpt_sizes *sizes)
{
	if (spec) {
		if (size_set)
			die_usage("%s", "--size and --sizes exclude each other");
		load_sizes(spec, 4096, sizes);
		*size = sizes->max;
		if (!count_set)
			*count = (long)sizes->n;
	}
	*size &= ~(size_t)7;
}

/* The bytes of checkpoint i: a prefix of the state of S bytes. */
static inline size_t sizes_bytes(const struct ckpt_sizes *sizes, long i, size_t S)
{
	return sizes->n ? sizes->v[i % (long)sizes->n] : S;
}

/* ---- the restore order ------------------------------------------------------ */

static inline uint64_t splitmix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static inline uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* The n checkpoint indices in restore order; NULL when out of memory (each
 * program reports that its own way). One generator for every program, so that
 * a --seed gives the CPU and the GPU proxies the same random order. */
static inline long *restore_order(long n, enum order_kind order, uint64_t seed)
{
	long *ord = (long *)malloc((size_t)n * sizeof(*ord));
	if (!ord)
		return NULL;
	for (long k = 0; k < n; k++)
		ord[k] = order == ORDER_REVERSE ? n - 1 - k : k;
	if (order == ORDER_RANDOM) {
		/* Fisher-Yates with its own stream, so the order depends on the
		 * seed only, not on the data. */
		uint64_t s = splitmix64(seed ^ 0x5EEDull);
		if (!s)
			s = 1;
		for (long k = n - 1; k > 0; k--) {
			long j = (long)(xorshift64(&s) % (uint64_t)(k + 1));
			long t = ord[k];
			ord[k] = ord[j];
			ord[j] = t;
		}
	}
	return ord;
}

/* ---- checkpoint files and the hint file -------------------------------------- */

/* Creates dir if it is missing and returns its absolute path (a static
 * buffer): the hint file then names exactly what the program opens. */
static inline const char *abs_dir(const char *dir)
{
	static char abs[PATH_MAX];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		die_sys("mkdir", dir);
	if (!realpath(dir, abs))
		die_sys("realpath", dir);
	return abs;
}

static inline void ckpt_path(char *buf, size_t cap, const char *dir, const char *prefix, long i)
{
	if ((size_t)snprintf(buf, cap, "%s/%s%05ld.bin", dir, prefix, i) >= cap) {
		fprintf(stderr, PROG ": the path of checkpoint %ld is longer than %zu bytes\n", i, cap);
		exit(1);
	}
}

/* The end of a run: the checkpoints are deleted unless --keep, or unless one
 * did not verify (they are then kept for inspection); prints the verified
 * line and returns whether every checkpoint verified. */
static inline bool finish_ckpts(const char *dir, const char *prefix, long n, long verified, bool keep)
{
	char path[PATH_MAX];
	bool ok = verified == n;
	if (!keep && ok) {
		for (long i = 0; i < n; i++) {
			ckpt_path(path, sizeof(path), dir, prefix, i);
			if (unlink(path) != 0)
				die_sys("unlink", path);
		}
	}
	printf(PROG ": verified %ld/%ld checkpoints%s\n", verified, n,
	       ok || keep ? "" : " (checkpoints kept for inspection)");
	return ok;
}

/* Written to a temporary file and renamed into place: a reader that already
 * follows FILE (ckptcache polls its hint file for appended lines) then sees
 * either the old file or the whole new one, never a truncated one. */
static inline void write_hints(const char *file, const char *dir, const char *prefix, enum order_kind order,
			       const long *ord, long n)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", file, (long)getpid()) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		die_sys("fopen", file);
	}
	FILE *f = fopen(tmp, "w");
	if (!f)
		die_sys("fopen", tmp);
	fprintf(f, "# " PROG " restore order: %s, %ld checkpoints\n", order_names[order], n);
	for (long k = 0; k < n; k++) {
		ckpt_path(path, sizeof(path), dir, prefix, ord[k]);
		fprintf(f, "%s\n", path);
	}
	if (fclose(f) != 0)
		die_sys("fclose", tmp);
	if (rename(tmp, file) != 0)
		die_sys("rename", tmp);
}

/* The hint file of a program that tells its restore order one checkpoint at
 * a time: created empty (an existing one is truncated in place, so that a
 * reader that already follows it sees it shrink and starts again), then
 * grown by hint_append. */
static inline void hint_create_empty(const char *file)
{
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die_sys("open", file);
	if (close(fd) != 0)
		die_sys("close", file);
}

/* Appends one line naming checkpoint i: open(O_APPEND), one write() of the
 * whole line, close, so that a reader polling the file never sees a line
 * without its end unless the write itself was cut short. */
static inline void hint_append(const char *file, const char *dir, const char *prefix, long i)
{
	char line[PATH_MAX + 1];
	ckpt_path(line, sizeof(line) - 1, dir, prefix, i);
	size_t n = strlen(line);
	line[n++] = '\n';
	int fd = open(file, O_WRONLY | O_APPEND);
	if (fd < 0)
		die_sys("open", file);
	ssize_t w;
	while ((w = write(fd, line, n)) < 0 && errno == EINTR)
		;
	if (w < 0)
		die_sys("write", file);
	if ((size_t)w != n) {
		errno = EIO;
		die_sys("write (short)", file);
	}
	if (close(fd) != 0)
		die_sys("close", file);
}

/* write() until n bytes are written: a short write is legal and must not be
 * mistaken for an error (or, worse, ignored). */
static inline void write_all(int fd, const unsigned char *b, size_t n, const char *path)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die_sys("write", path);
		}
		if (w == 0) {
			errno = EIO;
			die_sys("write (wrote 0 bytes)", path);
		}
		b += w;
		n -= (size_t)w;
	}
}

/* read() up to n bytes; returns fewer only at end of file. */
static inline size_t read_all(int fd, unsigned char *b, size_t n, const char *path)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die_sys("read", path);
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Writes the n bytes of b to path with open/write/close or
 * fopen/fwrite/fclose, chunk bytes per write()/fwrite() call (0: all in one
 * call), and with do_fsync fsync (stdio: fflush + fsync) before the close. */
static inline void write_file(const char *path, const unsigned char *b, size_t n, enum io_kind io, size_t chunk,
			      bool do_fsync)
{
	if (!chunk)
		chunk = n ? n : 1;
	if (io == IO_WRITE) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die_sys("open", path);
		for (size_t k = 0; k < n; k += chunk)
			write_all(fd, b + k, n - k < chunk ? n - k : chunk, path);
		if (do_fsync && fsync(fd) != 0)
			die_sys("fsync", path);
		if (close(fd) != 0)
			die_sys("close", path);
	} else {
		FILE *f = fopen(path, "wb");
		if (!f)
			die_sys("fopen", path);
		for (size_t k = 0; k < n; k += chunk) {
			size_t m = n - k < chunk ? n - k : chunk;
			if (fwrite(b + k, 1, m, f) != m)
				die_sys("fwrite", path);
		}
		if (do_fsync && (fflush(f) != 0 || fsync(fileno(f)) != 0))
			die_sys("fflush+fsync", path);
		if (fclose(f) != 0)
			die_sys("fclose", path);
	}
}

/* Reads up to n bytes of path into b, chunk bytes per read()/fread() call
 * (0: all in one call); *size is the size the file reports (fstat, or
 * fseek/ftell for stdio), so that a caller can tell a short file from a
 * short read. Returns the bytes read. */
static inline size_t read_file(const char *path, unsigned char *b, size_t n, enum io_kind io, size_t chunk,
			       uint64_t *size)
{
	size_t got = 0;
	if (!chunk)
		chunk = n ? n : 1;
	if (io == IO_WRITE) {
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			die_sys("open", path);
		struct stat st;
		if (fstat(fd, &st) != 0)
			die_sys("fstat", path);
		*size = (uint64_t)st.st_size;
		while (got < n) {
			size_t m = n - got < chunk ? n - got : chunk;
			size_t r = read_all(fd, b + got, m, path);
			got += r;
			if (r < m)
				break;
		}
		if (close(fd) != 0)
			die_sys("close", path);
	} else {
		FILE *f = fopen(path, "rb");
		if (!f)
			die_sys("fopen", path);
		if (fseek(f, 0, SEEK_END) != 0)
			die_sys("fseek", path);
		long end = ftell(f);
		if (end < 0)
			die_sys("ftell", path);
		*size = (uint64_t)end;
		if (fseek(f, 0, SEEK_SET) != 0)
			die_sys("fseek", path);
		while (got < n) {
			size_t m = n - got < chunk ? n - got : chunk;
			size_t r = fread(b + got, 1, m, f);
			got += r;
			if (r < m) {
				if (ferror(f))
					die_sys("fread", path);
				break;
			}
		}
		if (fclose(f) != 0)
			die_sys("fclose", path);
	}
	return got;
}

#endif
