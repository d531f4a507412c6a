/* rtm_proxy: a CPU stand-in for a reverse-time-migration code. It writes a
 * checkpoint history with plain POSIX or stdio calls, reads it back in a chosen
 * order, verifies every checkpoint and reports the throughput it saw. It knows
 * nothing of ckptcache: it is the unmodified program the library is preloaded into. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "rtm_proxy"
#include "proxy_common.h"

struct opts {
	const char *dir;
	long count;
	size_t size;
	const char *trace;
	long trace_gpu;
	long interval_ms;
	enum io_kind io;
	size_t chunk; /* 0: the whole checkpoint in one call */
	bool fsync;
	enum order_kind order;
	uint64_t seed;
	const char *hints;
	bool read_only;
	bool keep;
	bool drop_caches;
	const char *prefix;
};

/* ---- data: generator and checksum ---------------------------------------- */

/* Checkpoint i's stream: xorshift64 seeded from (i, seed), so that two
 * checkpoints (or two runs with different seeds) never hold the same bytes. */
static uint64_t stream_seed(long i, uint64_t seed)
{
	uint64_t s = splitmix64(seed ^ splitmix64((uint64_t)i + 1));
	return s ? s : 1;
}

#define FNV_OFFSET 0xCBF29CE484222325ull
#define FNV_PRIME 0x100000001B3ull

static inline uint64_t fnv_word(uint64_t h, uint64_t w)
{
	return (h ^ w) * FNV_PRIME;
}

/* FNV-1a over 64-bit little-endian words; a short tail is zero-padded, and
 * the length is folded in last so that a truncated file cannot collide with
 * a zero-padded one. */
static uint64_t checksum(const unsigned char *b, size_t n)
{
	uint64_t h = FNV_OFFSET, w;
	size_t k = 0;
	for (; k + 8 <= n; k += 8) {
		memcpy(&w, b + k, 8);
		h = fnv_word(h, w);
	}
	if (k < n) {
		w = 0;
		memcpy(&w, b + k, n - k);
		h = fnv_word(h, w);
	}
	return fnv_word(h, (uint64_t)n);
}

/* Fills b with checkpoint i's n bytes; returns their checksum, computed in the
 * same pass so that the forward pass touches the data once. */
static uint64_t generate(unsigned char *b, size_t n, long i, uint64_t seed)
{
	uint64_t s = stream_seed(i, seed), h = FNV_OFFSET, w;
	size_t k = 0;
	for (; k + 8 <= n; k += 8) {
		w = xorshift64(&s);
		memcpy(b + k, &w, 8);
		h = fnv_word(h, w);
	}
	if (k < n) {
		w = xorshift64(&s);
		memcpy(b + k, &w, n - k);
		uint64_t t = 0;
		memcpy(&t, b + k, n - k);
		h = fnv_word(h, t);
	}
	return fnv_word(h, (uint64_t)n);
}

/* Where a read-back buffer first differs from checkpoint i's bytes; n if it
 * does not (the checksum then differed in a word it shares with the tail). */
static size_t first_difference(const unsigned char *b, size_t n, long i, uint64_t seed)
{
	uint64_t s = stream_seed(i, seed);
	for (size_t k = 0; k < n; k += 8) {
		uint64_t w = xorshift64(&s);
		size_t m = n - k < 8 ? n - k : 8;
		if (memcmp(b + k, &w, m) != 0) {
			for (size_t j = 0; j < m; j++)
				if (b[k + j] != ((const unsigned char *)&w)[j])
					return k + j;
		}
	}
	return n;
}

/* ---- options --------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --dir D [options]\n"
		"A reverse-time-migration stand-in: a forward pass writes N checkpoints\n"
		"(DIR/PREFIX%%05d.bin), a restore phase reads them back in the chosen order\n"
		"and verifies each one against the checksum recorded when it was written.\n"
		"Only the I/O calls (open..close) are timed.\n"
		"\n"
		"  --dir D             where the checkpoints go (created if missing; required)\n"
		"  --count N           number of checkpoints (default 32)\n"
		"  --size S            checkpoint size: bytes or K/M/G/T (default 16M)\n"
		"  --trace CSV         take the sizes from a trace: one row per checkpoint,\n"
		"                      one column per GPU, sizes in bytes; cycled if N is\n"
		"                      larger than the trace (overrides --size)\n"
		"  --trace-gpu G       the trace column to use, from 0 (default 0)\n"
		"  --interval-ms MS    simulated computation (nanosleep) before each checkpoint\n"
		"                      and between two restores (default 10)\n"
		"  --io write|fwrite   open/write/read/close, or fopen/fwrite/fread/fclose\n"
		"                      with default buffering (default write)\n"
		"  --chunk S           bytes per write()/read() (fwrite()/fread()) call\n"
		"                      (default: the whole checkpoint in one call)\n"
		"  --fsync             fsync (stdio: fflush + fsync) each checkpoint before close\n"
		"  --order O           restore order: sequential, reverse, random (default reverse)\n"
		"  --seed N            seed of the random order and of the data (default 1)\n"
		"  --hints FILE        before the forward pass, write the restore order to FILE\n"
		"                      as a ckptcache hint file (one absolute path per line;\n"
		"                      written to FILE.tmp.PID and renamed into place)\n"
		"  --read-only         skip the forward pass: read back and verify checkpoints\n"
		"                      left by an earlier run with the same --count, --size or\n"
		"                      --trace, --seed and --prefix (deleted at the end unless --keep)\n"
		"  --keep              do not delete the checkpoints at the end\n"
		"  --drop-caches       before the restore phase, write back and drop each\n"
		"                      checkpoint's pages (fdatasync + POSIX_FADV_DONTNEED), and\n"
		"                      as root write 1 to /proc/sys/vm/drop_caches; reports how\n"
		"                      many pages stayed resident (mincore)\n"
		"  --prefix NAME       file name prefix (default ckpt_)\n"
		"  --help              this text\n"
		"\n"
		"Output: 'checkpoint' and 'restore' lines (files, MiB, seconds, GB/s with\n"
		"GB = 1e9 bytes), 'verified K/N checkpoints', and a machine-readable line\n"
		"  RESULT checkpoint_GBps=X restore_GBps=Y verified=K/N [page_cache_dropped=yes|no]\n"
		"Exit: 0 when every checkpoint verified, 1 on a mismatch or a failed system\n"
		"call, 2 on a usage error.\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_DIR = 256, OPT_COUNT, OPT_SIZE, OPT_TRACE, OPT_TRACE_GPU, OPT_INTERVAL, OPT_IO, OPT_CHUNK,
	       OPT_FSYNC, OPT_ORDER, OPT_SEED, OPT_HINTS, OPT_READ_ONLY, OPT_KEEP, OPT_DROP, OPT_PREFIX, OPT_HELP };
	static const struct option lo[] = {
		{ "dir", required_argument, NULL, OPT_DIR },
		{ "count", required_argument, NULL, OPT_COUNT },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "trace", required_argument, NULL, OPT_TRACE },
		{ "trace-gpu", required_argument, NULL, OPT_TRACE_GPU },
		{ "interval-ms", required_argument, NULL, OPT_INTERVAL },
		{ "io", required_argument, NULL, OPT_IO },
		{ "chunk", required_argument, NULL, OPT_CHUNK },
		{ "fsync", no_argument, NULL, OPT_FSYNC },
		{ "order", required_argument, NULL, OPT_ORDER },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "hints", required_argument, NULL, OPT_HINTS },
		{ "read-only", no_argument, NULL, OPT_READ_ONLY },
		{ "keep", no_argument, NULL, OPT_KEEP },
		{ "drop-caches", no_argument, NULL, OPT_DROP },
		{ "prefix", required_argument, NULL, OPT_PREFIX },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .count = 32, .size = 16u << 20, .interval_ms = 10, .io = IO_WRITE,
			    .order = ORDER_REVERSE, .seed = 1, .prefix = "ckpt_" };
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case OPT_DIR: o->dir = optarg; break;
		case OPT_COUNT: o->count = parse_long(optarg, "count", 1); break;
		case OPT_SIZE: o->size = parse_size_min(optarg, "size", 0); break;
		case OPT_TRACE: o->trace = optarg; break;
		case OPT_TRACE_GPU: o->trace_gpu = parse_long(optarg, "trace-gpu", 0); break;
		case OPT_INTERVAL: o->interval_ms = parse_long(optarg, "interval-ms", 0); break;
		case OPT_IO: o->io = parse_io(optarg); break;
		case OPT_CHUNK: o->chunk = parse_size_min(optarg, "chunk", 1); break;
		case OPT_FSYNC: o->fsync = true; break;
		case OPT_ORDER: o->order = parse_order(optarg); break;
		case OPT_SEED: o->seed = parse_seed(optarg); break;
		case OPT_HINTS: o->hints = optarg; break;
		case OPT_READ_ONLY: o->read_only = true; break;
		case OPT_KEEP: o->keep = true; break;
		case OPT_DROP: o->drop_caches = true; break;
		case OPT_PREFIX:
			if (!*optarg || strchr(optarg, '/'))
				die_usage("--prefix '%s': expected a file name prefix without '/'", optarg);
			o->prefix = optarg;
			break;
		case 'h':
		case OPT_HELP: usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (!o->dir)
		die_usage("%s", "--dir is required");
	if (o->trace_gpu && !o->trace)
		die_usage("%s", "--trace-gpu needs --trace");
}

/* ---- the trace ------------------------------------------------------------- */

/* Reads column gpu of a CSV with one row per checkpoint and one column per
 * GPU (rtm-8gpu-sample.csv's layout). Blank lines and '#' comments are
 * skipped, and so is a first row that is not numeric (a header). */
static size_t *read_trace(const char *file, long gpu, long *len)
{
	FILE *f = fopen(file, "r");
	if (!f)
		die_sys("fopen", file);
	char *line = NULL;
	size_t cap = 0, n = 0, alloc = 0;
	size_t *v = NULL;
	long lineno = 0;
	bool first = true;
	ssize_t r;

	errno = 0;
	while ((r = getline(&line, &cap, f)) != -1) {
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		char *p = line + strspn(line, " \t");
		if (!*p || *p == '#')
			continue;
		/* find field gpu */
		char *field = p;
		long col = 0;
		for (; col < gpu && field; col++) {
			field = strchr(field, ',');
			if (field)
				field++;
		}
		char *end;
		errno = 0;
		unsigned long long x = field ? strtoull(field, &end, 10) : 0;
		if (field)
			end += strspn(end, " \t");
		bool ok = field && end != field && (*end == ',' || *end == '\0') && !errno &&
			  field[strspn(field, " \t")] != '-' && x <= (unsigned long long)SSIZE_MAX;
		if (!ok && first && !isdigit((unsigned char)p[strspn(p, " \t")])) {
			first = false;
			continue; /* a header row */
		}
		first = false;
		if (!field) {
			fprintf(stderr, PROG ": %s:%ld: no column %ld (GPUs are numbered from 0)\n", file, lineno,
				gpu);
			exit(1);
		}
		if (!ok) {
			fprintf(stderr, PROG ": %s:%ld: column %ld is not a size in bytes\n", file, lineno, gpu);
			exit(1);
		}
		if (n == alloc) {
			alloc = alloc ? 2 * alloc : 64;
			v = realloc(v, alloc * sizeof(*v));
			if (!v)
				die_sys("realloc", file);
		}
		v[n++] = (size_t)x;
		errno = 0;
	}
	if (ferror(f))
		die_sys("getline", file);
	free(line);
	fclose(f);
	if (n == 0) {
		fprintf(stderr, PROG ": %s: no checkpoint sizes in the trace\n", file);
		exit(1);
	}
	*len = (long)n;
	return v;
}

/* ---- the page cache -------------------------------------------------------- */

struct drop_report {
	size_t pages, resident; /* after the drop, over every checkpoint */
	bool counted;           /* mincore answered for every file */
	bool fadvise_ok;
	int proc_errno;         /* 0: /proc/sys/vm/drop_caches was written */
};

/* Counts a file's pages that are in the page cache. */
static bool resident_pages(int fd, size_t len, size_t *pages, size_t *resident)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t np = (len + (size_t)pg - 1) / (size_t)pg;
	if (len == 0)
		return true;
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return false;
	unsigned char *vec = malloc(np);
	bool ok = vec && mincore(m, len, vec) == 0;
	if (ok) {
		*pages += np;
		for (size_t k = 0; k < np; k++)
			*resident += vec[k] & 1;
	}
	free(vec);
	munmap(m, len);
	return ok;
}

/* Tries to make the restore phase read from the device instead of memory.
 * DONTNEED drops only clean pages, so each file is written back first; none
 * of this is timed. */
static struct drop_report drop_caches(const struct opts *o, long n)
{
	struct drop_report d = { .counted = true, .fadvise_ok = true, .proc_errno = EPERM };
	char path[PATH_MAX];

	sync();
	for (long i = 0; i < n; i++) {
		ckpt_path(path, sizeof(path), o->dir, o->prefix, i);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			die_sys("open", path);
		if (fdatasync(fd) != 0)
			die_sys("fdatasync", path);
		int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (e) {
			if (d.fadvise_ok)
				fprintf(stderr, PROG ": posix_fadvise(DONTNEED) %s: %s\n", path, strerror(e));
			d.fadvise_ok = false;
		}
		if (close(fd) != 0)
			die_sys("close", path);
	}
	if (geteuid() == 0) {
		int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		if (fd >= 0 && write(fd, "1", 1) == 1)
			d.proc_errno = 0;
		else
			d.proc_errno = errno;
		if (fd >= 0)
			close(fd);
	}
	/* What is resident now is the answer to "did it work", whichever
	 * mechanism did it. */
	for (long i = 0; i < n; i++) {
		ckpt_path(path, sizeof(path), o->dir, o->prefix, i);
		int fd = open(path, O_RDONLY);
		struct stat st;
		if (fd < 0)
			die_sys("open", path);
		if (fstat(fd, &st) != 0)
			die_sys("fstat", path);
		if (!resident_pages(fd, (size_t)st.st_size, &d.pages, &d.resident))
			d.counted = false;
		close(fd);
	}
	return d;
}

/* ---- main ------------------------------------------------------------------ */

static void print_phase(const char *name, long files, double bytes, double secs)
{
	printf(PROG ": %-10s  %ld files  %.1f MiB  %.3f s  %.2f GB/s\n", name, files, bytes / MiB, secs,
	       secs > 0 ? bytes / secs / 1e9 : 0.0);
}

int main(int argc, char **argv)
{
	struct opts o;
	char path[PATH_MAX];

	parse_opts(argc, argv, &o);

	o.dir = abs_dir(o.dir);

	long n = o.count;
	size_t *size = malloc((size_t)n * sizeof(*size)), maxsize = 1;
	uint64_t *sum = malloc((size_t)n * sizeof(*sum));
	if (!size || !sum)
		die_sys("malloc", "checkpoint table");
	if (o.trace) {
		long len;
		size_t *t = read_trace(o.trace, o.trace_gpu, &len);
		for (long i = 0; i < n; i++)
			size[i] = t[i % len];
		free(t);
	} else {
		for (long i = 0; i < n; i++)
			size[i] = o.size;
	}
	double total = 0;
	for (long i = 0; i < n; i++) {
		maxsize = size[i] > maxsize ? size[i] : maxsize;
		total += (double)size[i];
	}
	/* Page-aligned, so that a library copying with O_DIRECT-like
	 * constraints sees the buffer a real code would pass. */
	unsigned char *buf;
	if (posix_memalign((void **)&buf, 4096, maxsize) != 0)
		die_sys("posix_memalign", "checkpoint buffer");

	long *ord = restore_order(n, o.order, o.seed);
	if (!ord)
		die_sys("malloc", "restore order");
	if (o.hints)
		write_hints(o.hints, o.dir, o.prefix, o.order, ord, n);

	double tw = 0, tr = 0;
	if (!o.read_only) {
		for (long i = 0; i < n; i++) {
			idle_ms(o.interval_ms);
			sum[i] = generate(buf, size[i], i, o.seed);
			ckpt_path(path, sizeof(path), o.dir, o.prefix, i);
			double t0 = now_s(); /* only open..close is timed */
			write_file(path, buf, size[i], o.io, o.chunk, o.fsync);
			tw += now_s() - t0;
		}
		print_phase("checkpoint", n, total, tw);
	} else {
		/* The data is a function of (i, seed): the checksums need no
		 * record from the run that wrote the files. */
		for (long i = 0; i < n; i++)
			sum[i] = generate(buf, size[i], i, o.seed);
		printf(PROG ": checkpoint  skipped (--read-only)\n");
	}
	fflush(stdout);

	struct drop_report drop = { 0 };
	if (o.drop_caches) {
		drop = drop_caches(&o, n);
		printf(PROG ": drop-caches: fdatasync+POSIX_FADV_DONTNEED %s; /proc/sys/vm/drop_caches %s; ",
		       drop.fadvise_ok ? "done" : "failed",
		       drop.proc_errno == 0 ? "written" :
		       geteuid() != 0 ? "not tried (not root)" : strerror(drop.proc_errno));
		if (drop.counted)
			printf("resident after: %zu/%zu pages (%.1f%%) -> %s\n", drop.resident, drop.pages,
			       drop.pages ? 100.0 * (double)drop.resident / (double)drop.pages : 0.0,
			       drop.resident * 100 <= drop.pages ? "dropped" : "NOT dropped");
		else
			printf("resident pages unknown (mmap/mincore failed) -> %s\n",
			       drop.fadvise_ok || drop.proc_errno == 0 ? "probably dropped" : "NOT dropped");
	}

	long verified = 0;
	for (long k = 0; k < n; k++) {
		long i = ord[k];
		uint64_t fsize;
		ckpt_path(path, sizeof(path), o.dir, o.prefix, i);
		double t0 = now_s();
		size_t got = read_file(path, buf, size[i], o.io, o.chunk, &fsize);
		tr += now_s() - t0;
		if (fsize != size[i] || got != size[i]) {
			printf(PROG ": MISMATCH in %s: size %" PRIu64 " (read %zu bytes), expected %zu\n", path,
			       fsize, got, size[i]);
		} else {
			uint64_t h = checksum(buf, got);
			if (h == sum[i])
				verified++;
			else
				printf(PROG ": MISMATCH in %s: checksum %016" PRIx64 ", expected %016" PRIx64
					    " (first differing byte at offset %zu of %zu)\n",
				       path, h, sum[i], first_difference(buf, got, i, o.seed), got);
		}
		if (k + 1 < n)
			idle_ms(o.interval_ms);
	}
	print_phase("restore", n, total, tr);

	bool ok = finish_ckpts(o.dir, o.prefix, n, verified, o.keep);
	printf("RESULT checkpoint_GBps=");
	if (o.read_only)
		printf("n/a");
	else
		printf("%.3f", tw > 0 ? total / tw / 1e9 : 0.0);
	printf(" restore_GBps=%.3f verified=%ld/%ld", tr > 0 ? total / tr / 1e9 : 0.0, verified, n);
	if (o.drop_caches)
		printf(" page_cache_dropped=%s",
		       drop.counted ? (drop.resident * 100 <= drop.pages ? "yes" : "no") : "unknown");
	printf("\n");

	free(ord);
	free(buf);
	free(sum);
	free(size);
	return ok ? 0 : 1;
}
