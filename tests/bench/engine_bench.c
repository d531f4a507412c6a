/* Engine benchmark: host-tier put/get throughput against memcpy (same sizes,
 * threads, footprint and run) and malloc'ed metadata per cached object.
 * Usage in usage(); exits 0 unless something broke (failed targets included). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ckc.h"
#include "conf.h"
#include "log.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* Bytes of distinct objects each thread writes per repetition. Far above the
 * last-level cache, so neither the engine nor the baseline copies into memory
 * the cache still holds from the previous object. */
#define WORKING_SET (256 * MiB)
#define MAX_SIZES 16
#define META_OBJECTS 10000
#define META_SIZE (4 * KiB)
#define META_TARGET 1024.0
#define RATIO_TARGET 0.80
/* Bound on the repetitions --min-time may ask for. */
#define MAX_REPS 1000
#define TAG_MAGIC UINT64_C(0xC4C7B3AC00000000)

enum phase {
	PH_BASE_PUT,   /* memcpy source -> ring slot i */
	PH_BASE_GET,   /* memcpy ring slot i -> destination */
	PH_BASE_CHECK, /* untimed: first and last copy of both baseline phases */
	PH_HOT_PUT,    /* memcpy source -> one destination (cache-resident) */
	PH_ENG_PUT,    /* ckc_open_write + ckc_pwrite + ckc_close of object i */
	PH_ENG_GET,    /* ckc_open_read + ckc_pread + ckc_close of object i */
	PH_ENG_CHECK,  /* untimed: first and last object of both engine phases */
	PH_ENG_UNLINK, /* untimed: ckc_unlink of every object of the repetition */
	PH_QUIT,
};

struct bench;

typedef struct worker {
	struct bench *b;
	int id;
	pthread_t th;
	unsigned char *src, *dst; /* max size each; src holds this thread's pattern */
	unsigned char *ring;      /* baseline destinations: the largest footprint */
	size_t buf_len, ring_len;
	char (*paths)[160];       /* this size's objects, built before timing */
	int err;                  /* 0, 1 internal error, 2 data mismatch */
	char msg[256];
} worker_t;

typedef struct bench {
	int nthreads;
	pthread_barrier_t start, end;
	enum phase phase;
	size_t size;
	size_t nobj;              /* objects per thread per repetition */
	unsigned rep;
	char dir[64];
	worker_t *w;
} bench_t;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void size_label(uint64_t s, char *out, size_t len)
{
	if (s % MiB == 0)
		snprintf(out, len, "%" PRIu64 "MiB", s / MiB);
	else if (s % KiB == 0)
		snprintf(out, len, "%" PRIu64 "KiB", s / KiB);
	else
		snprintf(out, len, "%" PRIu64 "B", s);
}

/* Anonymous memory advised and touched like the host tier's arena, so the
 * baseline and the engine copy between pages of the same kind. */
static void *bench_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	(void)madvise(p, len, MADV_HUGEPAGE);
	memset(p, 0x5a, len);
	return p;
}

static void fill_pattern(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * UINT64_C(0x9E3779B97F4A7C15) + 1;

	for (size_t i = 0; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
}

/* Each object differs from the source pattern by a tag in its first and last
 * 8 bytes, so a copy of the wrong object (or no copy) is caught. */
static uint64_t obj_tag(int thread, unsigned rep, size_t i)
{
	return TAG_MAGIC ^ ((uint64_t)thread << 48) ^ ((uint64_t)rep << 24) ^ (uint64_t)i;
}

static void stamp(unsigned char *buf, size_t len, uint64_t tag)
{
	memcpy(buf, &tag, 8);
	memcpy(buf + len - 8, &tag, 8);
}

static bool stamp_ok(const unsigned char *buf, size_t len, uint64_t tag)
{
	return memcmp(buf, &tag, 8) == 0 && memcmp(buf + len - 8, &tag, 8) == 0;
}

/* Full comparison: tags plus every byte of the body against the source. */
static bool obj_ok(const unsigned char *got, const unsigned char *src, size_t len, uint64_t tag)
{
	return stamp_ok(got, len, tag) && memcmp(got + 8, src + 8, len - 16) == 0;
}

static void fail(worker_t *w, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(worker_t *w, int kind, const char *fmt, ...)
{
	va_list ap;

	if (w->err)
		return;
	w->err = kind;
	va_start(ap, fmt);
	vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
	va_end(ap);
}

static int eng_put(worker_t *w, const char *path, size_t len)
{
	ckc_handle_t *h;
	int rc = ckc_open_write(path, 0644, &h);

	if (rc) {
		fail(w, 1, "ckc_open_write %s: %s", path, strerror(-rc));
		return -1;
	}
	ssize_t n = ckc_pwrite(h, w->src, len, 0);
	rc = ckc_close(h);
	if (n != (ssize_t)len || rc) {
		fail(w, 1, "ckc_pwrite/close %s: %zd, %d", path, n, rc);
		return -1;
	}
	return 0;
}

static int eng_get(worker_t *w, const char *path, size_t len)
{
	ckc_handle_t *h;
	int rc = ckc_open_read(path, &h);

	if (rc) {
		fail(w, 1, "ckc_open_read %s: %s", path, strerror(-rc));
		return -1;
	}
	ssize_t n = ckc_pread(h, w->dst, len, 0);
	rc = ckc_close(h);
	if (n != (ssize_t)len || rc) {
		fail(w, 1, "ckc_pread/close %s: %zd, %d", path, n, rc);
		return -1;
	}
	return 0;
}

static void run_phase(worker_t *w)
{
	bench_t *b = w->b;
	size_t len = b->size, n = b->nobj;

	switch (b->phase) {
	case PH_BASE_PUT:
		for (size_t i = 0; i < n; i++) {
			stamp(w->src, len, obj_tag(w->id, b->rep, i));
			memcpy(w->ring + i * len, w->src, len);
		}
		break;
	case PH_BASE_GET:
		for (size_t i = 0; i < n; i++) {
			memcpy(w->dst, w->ring + i * len, len);
			if (!stamp_ok(w->dst, len, obj_tag(w->id, b->rep, i)))
				fail(w, 2, "memcpy get: copy %zu has the wrong tag", i);
		}
		break;
	case PH_BASE_CHECK:
		if (!obj_ok(w->dst, w->src, len, obj_tag(w->id, b->rep, n - 1)) ||
		    !obj_ok(w->ring, w->src, len, obj_tag(w->id, b->rep, 0)) ||
		    !obj_ok(w->ring + (n - 1) * len, w->src, len, obj_tag(w->id, b->rep, n - 1)))
			fail(w, 2, "memcpy baseline: bytes differ");
		break;
	case PH_HOT_PUT:
		for (size_t i = 0; i < n; i++) {
			stamp(w->src, len, obj_tag(w->id, b->rep, i));
			memcpy(w->dst, w->src, len);
		}
		break;
	case PH_ENG_PUT:
		for (size_t i = 0; i < n && !w->err; i++) {
			stamp(w->src, len, obj_tag(w->id, b->rep, i));
			eng_put(w, w->paths[i], len);
		}
		break;
	case PH_ENG_GET:
		for (size_t i = 0; i < n && !w->err; i++) {
			if (eng_get(w, w->paths[i], len) == 0 &&
			    !stamp_ok(w->dst, len, obj_tag(w->id, b->rep, i)))
				fail(w, 2, "engine get: %s has the wrong tag", w->paths[i]);
		}
		break;
	case PH_ENG_CHECK:
		/* dst holds the last object of the timed get; then read the
		 * first and the last again and compare every byte. */
		if (!obj_ok(w->dst, w->src, len, obj_tag(w->id, b->rep, n - 1))) {
			fail(w, 2, "engine get: bytes of %s differ", w->paths[n - 1]);
			break;
		}
		for (int k = 0; k < 2 && !w->err; k++) {
			size_t i = k ? n - 1 : 0;
			memset(w->dst, 0, len);
			if (eng_get(w, w->paths[i], len) == 0 &&
			    !obj_ok(w->dst, w->src, len, obj_tag(w->id, b->rep, i)))
				fail(w, 2, "engine put: bytes of %s differ", w->paths[i]);
		}
		break;
	case PH_ENG_UNLINK:
		for (size_t i = 0; i < n; i++) {
			int rc = ckc_unlink(w->paths[i]);
			if (rc)
				fail(w, 1, "ckc_unlink %s: %s", w->paths[i], strerror(-rc));
		}
		break;
	case PH_QUIT:
		break;
	}
}

static void *worker_main(void *arg)
{
	worker_t *w = arg;
	bench_t *b = w->b;

	for (;;) {
		pthread_barrier_wait(&b->start);
		if (b->phase == PH_QUIT)
			break;
		/* after an error keep meeting the barriers, but do nothing */
		if (!w->err)
			run_phase(w);
		pthread_barrier_wait(&b->end);
	}
	return NULL;
}

/* Runs one phase on every worker; returns its wall time, or -1 on error. */
static double phase(bench_t *b, enum phase ph)
{
	double t0, t1;

	b->phase = ph;
	pthread_barrier_wait(&b->start);
	t0 = now_s();
	pthread_barrier_wait(&b->end);
	t1 = now_s();
	for (int k = 0; k < b->nthreads; k++)
		if (b->w[k].err)
			return -1;
	return t1 - t0;
}

static int worker_error(const bench_t *b)
{
	int e = 0;

	for (int k = 0; k < b->nthreads; k++)
		if (b->w[k].err) {
			fprintf(stderr, "engine_bench: thread %d: %s\n", k, b->w[k].msg);
			e = e > b->w[k].err ? e : b->w[k].err;
		}
	return e;
}

static size_t objs_per_rep(uint64_t size, uint64_t total)
{
	uint64_t ws = total < WORKING_SET ? total : WORKING_SET;
	uint64_t n = (ws + size - 1) / size;

	return n ? (size_t)n : 1;
}

static ckc_config_t bench_cfg(const char *dir, uint64_t host, ckc_order_t order)
{
	ckc_config_t c;

	memset(&c, 0, sizeof(c));
	c.enabled = true;
	c.host_cache = host;
	c.ssd_cache = 0;
	c.ssd_dir = (char *)dir;
	c.rescue_dir = (char *)dir;
	/* nothing competes with the measured copies: no flusher work, no
	 * prefetcher, nothing reaches the disk */
	c.persist = CKC_PERSIST_NEVER;
	c.eviction = CKC_EVICT_SCORE;
	c.prefetch = CKC_PREFETCH_OFF;
	c.order = order;
	c.log_level = CKC_LOG_WARN;
	c.local_size = 1;
	/* populated whole before timing, so no copy meets a page fault */
	c.host_whole = true;
	return c;
}

static void print_result(const char *dir, const char *label, int threads, double eng_bps,
			 double base_bps)
{
	double ratio = eng_bps / base_bps;

	printf("host-tier %s size=%s threads=%d engine_GBps=%.2f memcpy_GBps=%.2f ratio=%.3f "
	       "target ratio>=%.2f: %s\n",
	       dir, label, threads, eng_bps / 1e9, base_bps / 1e9, ratio, RATIO_TARGET,
	       ratio >= RATIO_TARGET ? "PASS" : "FAIL");
}

static int check_tier_stats(const char *what, uint64_t want_puts)
{
	ckc_stats_t st;

	ckc_stats_get(&st);
	if (st.ntier < 2 || strcmp(st.tier_name[0], "host") != 0) {
		fprintf(stderr, "engine_bench: %s: tier 0 is not the host tier\n", what);
		return 1;
	}
	const ckc_tier_stats_t *t = &st.tier[0];
	printf("  %s host-tier stats: put_ops=%" PRIu64 " read_ops=%" PRIu64 " bypasses=%" PRIu64
	       " evictions=%" PRIu64 " waits=%" PRIu64 "\n",
	       what, t->put_ops, t->read_ops, t->bypasses, t->evictions, t->waits);
	if (t->bypasses || t->evictions || t->waits || t->put_ops != want_puts) {
		fprintf(stderr, "engine_bench: %s: objects left the host tier or were not all "
			"written there (want put_ops=%" PRIu64 ")\n", what, want_puts);
		return 1;
	}
	return 0;
}

static int throughput(const char *dir, const uint64_t *sizes, int nsizes, int nthreads,
		      uint64_t total, double min_time)
{
	bench_t b;
	uint64_t max_size = 0, max_fp = 0, want_puts = 0;
	int rc = 0, started = 0;

	memset(&b, 0, sizeof(b));
	b.nthreads = nthreads;
	snprintf(b.dir, sizeof(b.dir), "%s", dir);
	for (int k = 0; k < nsizes; k++) {
		uint64_t fp = objs_per_rep(sizes[k], total) * sizes[k];
		max_size = sizes[k] > max_size ? sizes[k] : max_size;
		max_fp = fp > max_fp ? fp : max_fp;
	}
	/* Room for every object of one repetition of every thread, plus one
	 * over-sized first reservation per thread (the engine reserves the
	 * largest recent size for a new object and trims it at close), and
	 * slack for alignment. */
	uint64_t host = (uint64_t)nthreads * (max_fp + max_size + 8 * MiB) + 64 * MiB;

	b.w = calloc((size_t)nthreads, sizeof(*b.w));
	if (!b.w)
		return 1;
	for (int k = 0; k < nthreads; k++) {
		worker_t *w = &b.w[k];
		w->b = &b;
		w->id = k;
		w->buf_len = (size_t)max_size;
		w->ring_len = (size_t)max_fp;
		w->src = bench_map(w->buf_len);
		w->dst = bench_map(w->buf_len);
		w->ring = bench_map(w->ring_len);
		if (!w->src || !w->dst || !w->ring) {
			fprintf(stderr, "engine_bench: cannot map %zu bytes of buffers\n",
				2 * w->buf_len + w->ring_len);
			rc = 1;
			goto out;
		}
		fill_pattern(w->src, w->buf_len, (uint64_t)k + 1);
	}

	ckc_config_t c = bench_cfg(dir, host, CKC_ORDER_NONE);
	int irc = ckc_init_config(&c);
	if (irc != 0) {
		fprintf(stderr, "engine_bench: ckc_init_config: %d\n", irc);
		rc = 1;
		goto out;
	}
	/* Start-up never waits for the arena's pages; the benchmark does, so
	 * page faults are not part of the measured copies. */
	double tr = now_s();
	ckc_wait_ready();
	tr = now_s() - tr;
	printf("host-tier setup threads=%d host_cache=%" PRIu64 "MiB ckc_wait_ready=%.2fs "
	       "(%.2f GBps populated; start-up does not wait, the benchmark waits before timing) "
	       "persist=never ssd=0 prefetch=off order=none\n",
	       nthreads, host / MiB, tr, tr > 0 ? (double)host / tr / 1e9 : 0.0);
	printf("  method: per repetition each thread puts N distinct objects (one ckc_pwrite "
	       "each), gets them back (one ckc_pread each), then unlinks them untimed, so the "
	       "timed put never retires an older version; the memcpy baseline copies the same "
	       "source into N distinct destination buffers of the same size (same footprint) "
	       "and back; each measurement moves >= %" PRIu64 "MiB per thread and lasts >= %.2fs, "
	       "after one warm-up repetition; GBps = 1e9 bytes/s of all threads together\n",
	       total / MiB, min_time);

	if (pthread_barrier_init(&b.start, NULL, (unsigned)nthreads + 1) ||
	    pthread_barrier_init(&b.end, NULL, (unsigned)nthreads + 1)) {
		rc = 1;
		goto out_engine;
	}
	for (; started < nthreads; started++)
		if (pthread_create(&b.w[started].th, NULL, worker_main, &b.w[started])) {
			/* the started ones wait in a barrier that can never fill
			 * (and that is no cancellation point): give up at once */
			fprintf(stderr, "engine_bench: pthread_create failed\n");
			exit(1);
		}

	for (int k = 0; k < nsizes && !rc; k++) {
		size_t len = (size_t)sizes[k], n = objs_per_rep(sizes[k], total);
		uint64_t per_rep = (uint64_t)n * len;
		unsigned reps = (unsigned)((total + per_rep - 1) / per_rep);
		double t[PH_QUIT] = { 0 };
		char label[32];

		size_label(len, label, sizeof(label));
		b.size = len;
		b.nobj = n;
		for (int j = 0; j < nthreads && !rc; j++) {
			worker_t *w = &b.w[j];
			free(w->paths);
			w->paths = calloc(n, sizeof(*w->paths));
			if (!w->paths) {
				rc = 1;
				break;
			}
			for (size_t i = 0; i < n; i++)
				snprintf(w->paths[i], sizeof(w->paths[i]), "%s/t%d/ckpt_%s_%06zu.bin",
					 dir, j, label, i);
		}
		/* Repetition 0 warms up both sides and is not counted. The two
		 * sides take turns going first, so drift (frequency, other
		 * tenants) does not always favour the same one. */
		for (unsigned r = 0; r <= reps && !rc; r++) {
			static const enum phase order[2][8] = {
				{ PH_BASE_PUT, PH_BASE_GET, PH_BASE_CHECK, PH_HOT_PUT,
				  PH_ENG_PUT, PH_ENG_GET, PH_ENG_CHECK, PH_ENG_UNLINK },
				{ PH_ENG_PUT, PH_ENG_GET, PH_ENG_CHECK, PH_ENG_UNLINK,
				  PH_BASE_PUT, PH_BASE_GET, PH_BASE_CHECK, PH_HOT_PUT },
			};
			double warm[PH_QUIT] = { 0 };
			b.rep = r;
			for (size_t p = 0; p < 8; p++) {
				enum phase ph = order[r & 1][p];
				double dt = phase(&b, ph);
				if (dt < 0) {
					rc = worker_error(&b);
					break;
				}
				if (r > 0)
					t[ph] += dt;
				else
					warm[ph] = dt;
			}
			want_puts += (uint64_t)nthreads * n;
			if (r == 0 && !rc) {
				/* enough repetitions that the fastest measured phase
				 * also lasts min_time */
				double fastest = warm[PH_BASE_PUT];
				static const enum phase timed[] = { PH_BASE_GET, PH_ENG_PUT, PH_ENG_GET };
				for (size_t q = 0; q < 3; q++)
					fastest = warm[timed[q]] < fastest ? warm[timed[q]] : fastest;
				if (fastest > 0 && fastest * reps < min_time) {
					double want = min_time / fastest + 1;
					reps = want > MAX_REPS ? MAX_REPS : (unsigned)want;
				}
			}
		}
		if (rc)
			break;
		double bytes = (double)reps * (double)per_rep * nthreads;
		print_result("put", label, nthreads, bytes / t[PH_ENG_PUT], bytes / t[PH_BASE_PUT]);
		print_result("get", label, nthreads, bytes / t[PH_ENG_GET], bytes / t[PH_BASE_GET]);
		printf("  detail size=%s threads=%d objects_per_rep=%zu reps=%u bytes=%.0f "
		       "engine_put_s=%.4f engine_get_s=%.4f memcpy_put_s=%.4f memcpy_get_s=%.4f "
		       "memcpy_hot_GBps=%.2f (one cache-resident destination, not the baseline)\n",
		       label, nthreads, n, reps, bytes, t[PH_ENG_PUT], t[PH_ENG_GET],
		       t[PH_BASE_PUT], t[PH_BASE_GET], bytes / t[PH_HOT_PUT] / 1e9);
		fflush(stdout);
	}
	if (!rc)
		rc = check_tier_stats("throughput", want_puts);

	b.phase = PH_QUIT;
	pthread_barrier_wait(&b.start);
	for (int j = 0; j < started; j++)
		pthread_join(b.w[j].th, NULL);
	pthread_barrier_destroy(&b.start);
	pthread_barrier_destroy(&b.end);
out_engine:
	ckc_shutdown();
out:
	for (int k = 0; k < nthreads; k++) {
		worker_t *w = &b.w[k];
		if (w->src)
			munmap(w->src, w->buf_len);
		if (w->dst)
			munmap(w->dst, w->buf_len);
		if (w->ring)
			munmap(w->ring, w->ring_len);
		free(w->paths);
	}
	free(b.w);
	return rc;
}

/* Bytes malloc has handed out: small chunks in the heaps plus chunks above
 * the mmap threshold (the object map and the arena's fragment table grow
 * past it, and uordblks alone would miss them). */
static uint64_t malloc_used(uint64_t *heap, uint64_t *mapped)
{
#ifdef HAVE_MALLINFO2
	struct mallinfo2 mi = mallinfo2();
	*heap = mi.uordblks;
	*mapped = mi.hblkhd;
#else
	struct mallinfo mi = mallinfo();
	*heap = (unsigned)mi.uordblks;
	*mapped = (unsigned)mi.hblkhd;
#endif
	return *heap + *mapped;
}

static int metadata(const char *dir)
{
	unsigned char *buf = malloc(META_SIZE), *back = malloc(META_SIZE);
	char path[PATH_MAX];
	uint64_t h0, m0, h1, m1, before, after, pathbytes = 0;
	int rc = 0;

	if (!buf || !back) {
		free(buf);
		free(back);
		return 1;
	}
	fill_pattern(buf, META_SIZE, 42);
	/* 4 KiB objects plus the first reservation of 1 MiB, with room to spare */
	ckc_config_t c = bench_cfg(dir, 2 * (uint64_t)META_OBJECTS * META_SIZE + 64 * MiB,
				   CKC_ORDER_REVERSE);
	int irc = ckc_init_config(&c);
	if (irc != 0) {
		fprintf(stderr, "engine_bench: ckc_init_config: %d\n", irc);
		free(buf);
		free(back);
		return 1;
	}
	ckc_wait_ready();
	/* An allocator that mallinfo2 does not see (a sanitizer, an LD_PRELOAD'ed
	 * malloc) would read as zero bytes per object: refuse to report that. */
	before = malloc_used(&h0, &m0);
	void *probe = malloc(64 * KiB);
	after = malloc_used(&h1, &m1);
	free(probe);
	if (!probe || after < before + 64 * KiB) {
		fprintf(stderr, "engine_bench: malloc statistics do not track allocations; "
			"metadata cannot be measured here\n");
		ckc_shutdown();
		free(buf);
		free(back);
		return 1;
	}
	before = malloc_used(&h0, &m0);
	for (unsigned i = 0; i < META_OBJECTS && !rc; i++) {
		ckc_handle_t *h;
		int n = snprintf(path, sizeof(path), "%s/lustre/user/run42/shot_%04u/ckpt_%06u.bin",
				 dir, i / 100, i);
		pathbytes += (uint64_t)n;
		stamp(buf, META_SIZE, obj_tag(0, 0, i));
		if (ckc_open_write(path, 0644, &h) != 0 ||
		    ckc_pwrite(h, buf, META_SIZE, 0) != (ssize_t)META_SIZE || ckc_close(h) != 0) {
			fprintf(stderr, "engine_bench: metadata: cannot write %s\n", path);
			rc = 1;
		}
	}
	after = malloc_used(&h1, &m1);
	/* the objects must really be there: read the first and the last back */
	for (unsigned k = 0; k < 2 && !rc; k++) {
		unsigned i = k ? META_OBJECTS - 1 : 0;
		ckc_handle_t *h;
		snprintf(path, sizeof(path), "%s/lustre/user/run42/shot_%04u/ckpt_%06u.bin", dir,
			 i / 100, i);
		if (ckc_open_read(path, &h) != 0) {
			fprintf(stderr, "engine_bench: metadata: %s is not cached\n", path);
			rc = 1;
			break;
		}
		ssize_t got = ckc_pread(h, back, META_SIZE, 0);
		ckc_close(h);
		if (got != (ssize_t)META_SIZE || !obj_ok(back, buf, META_SIZE, obj_tag(0, 0, i))) {
			fprintf(stderr, "engine_bench: metadata: bytes of %s differ\n", path);
			rc = 2;
		}
	}
	if (!rc) {
		double per = ((double)after - (double)before) / META_OBJECTS;
		printf("metadata bytes_per_object=%.0f (objects=%u, includes path string, arena "
		       "fragment, object map and restore-queue entry if ORDER=reverse) "
		       "target <= %.0f: %s\n",
		       per, META_OBJECTS, META_TARGET, per <= META_TARGET ? "PASS" : "FAIL");
		printf("  detail order=reverse object_size=%uKiB avg_path_len=%.1f "
		       "heap_delta=%" PRId64 " mmapped_delta=%" PRId64 " (mallinfo2 uordblks + "
		       "hblkhd; object bytes live in the mmap'ed arena, not in malloc, so this "
		       "is metadata only)\n",
		       (unsigned)(META_SIZE / KiB), (double)pathbytes / META_OBJECTS,
		       (int64_t)(h1 - h0), (int64_t)(m1 - m0));
		rc = check_tier_stats("metadata", META_OBJECTS);
	}
	ckc_shutdown();
	free(buf);
	free(back);
	return rc;
}

static void machine_line(void)
{
	char date[64], model[128] = "unknown", line[256];
	time_t t = time(NULL);
	cpu_set_t set;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int usable = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : (int)online;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "model name", 10) == 0) {
				char *v = strchr(line, ':');
				if (v) {
					v += strspn(v + 1, " \t") + 1;
					v[strcspn(v, "\n")] = '\0';
					snprintf(model, sizeof(model), "%s", v);
				}
				break;
			}
		fclose(f);
	}
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S%z", localtime(&t));
	printf("machine cpus=%d online=%ld model=\"%s\" date=%s\n", usable, online, model, date);
}

static int parse_sizes(const char *arg, uint64_t *sizes, int *n)
{
	char *copy = strdup(arg), *save = NULL;
	int rc = 0;

	*n = 0;
	if (!copy)
		return -1;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		double pct;
		if (*n == MAX_SIZES || ckc_parse_size(tok, &v, &pct) || v < 4 * KiB ||
		    v > 64 * GiB) {
			rc = -1;
			break;
		}
		sizes[(*n)++] = v;
	}
	free(copy);
	return rc || *n == 0 ? -1 : 0;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--sizes 1M,16M,128M] [--threads N] [--total BYTES] "
		"[--min-time SECONDS] [--no-throughput] [--no-metadata]\n"
		"  --total: bytes each thread moves at least, per size and measurement (1G)\n"
		"  --min-time: seconds each measurement lasts at least (0.5)\n",
		argv0);
}

int main(int argc, char **argv)
{
	uint64_t sizes[MAX_SIZES] = { 1 * MiB, 16 * MiB, 128 * MiB }, total = 1 * GiB;
	int nsizes = 3, nthreads = 1, rc = 0;
	double min_time = 0.5;
	bool do_tput = true, do_meta = true;
	char dir[64];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		double pct;
		if (!strcmp(a, "--sizes") && v) {
			if (parse_sizes(v, sizes, &nsizes)) {
				fprintf(stderr, "engine_bench: --sizes '%s': sizes of 4K..64G\n", v);
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--threads") && v) {
			char *end;
			long t = strtol(v, &end, 10);
			if (*end || t < 1 || t > 256) {
				fprintf(stderr, "engine_bench: --threads '%s': 1..256\n", v);
				return 2;
			}
			nthreads = (int)t;
			i++;
		} else if (!strcmp(a, "--total") && v) {
			if (ckc_parse_size(v, &total, &pct) || total == 0) {
				fprintf(stderr, "engine_bench: --total '%s': a size in bytes\n", v);
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--min-time") && v) {
			char *end;
			min_time = strtod(v, &end);
			if (*end || end == v || !(min_time >= 0 && min_time <= 60)) {
				fprintf(stderr, "engine_bench: --min-time '%s': 0..60 seconds\n", v);
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--no-throughput")) {
			do_tput = false;
		} else if (!strcmp(a, "--no-metadata")) {
			do_meta = false;
		} else {
			usage(argv[0]);
			return 2;
		}
	}

	machine_line();
	fflush(stdout);
	/* Object paths live here; with persist=never nothing is ever written
	 * under it, and it is removed at the end. */
	snprintf(dir, sizeof(dir), "/tmp/ckc-bench-XXXXXX");
	if (!mkdtemp(dir)) {
		fprintf(stderr, "engine_bench: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	if (do_tput)
		rc = throughput(dir, sizes, nsizes, nthreads, total, min_time);
	fflush(stdout);
	if (!rc && do_meta)
		rc = metadata(dir);
	fflush(stdout);
	if (rmdir(dir) != 0) {
		fprintf(stderr, "engine_bench: %s is not empty: something was written to disk\n", dir);
		rc = rc ? rc : 1;
	}
	return rc;
}
