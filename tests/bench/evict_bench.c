/* Micro-benchmark of the eviction window choice on resident tables of 100,
 * 1,000 and 10,000 extents. Usage: evict_bench [repetitions-scale]; prints
 * one line per table size and policy. */
#include "config.h"

#include "evict.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MIB (UINT64_C(1) << 20)
#define BENCH_EXTENT (64 * BENCH_MIB)
/* Fragment visits per measured size at scale 1: enough to dwarf timer noise. */
#define BENCH_WORK 20000000.0

static uint64_t bench_rng(uint64_t *st)
{
	uint64_t z = (*st += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double bench_unit(uint64_t *st)
{
	return (double)(bench_rng(st) >> 11) / (double)(UINT64_C(1) << 53);
}

/*
 * A resident tier: mostly flushed extents, some still flushing, some hinted
 * for prefetch, some pinned (open or prefetched-unconsumed), few gaps. Ages
 * follow insertion order with local disorder, as after partial rewrites.
 */
static void bench_table(evict_frag_t *f, size_t n, uint64_t seed)
{
	uint64_t st = seed;

	for (size_t i = 0; i < n; i++) {
		double r = bench_unit(&st);
		uint64_t len = (32 + bench_rng(&st) % 65) * BENCH_MIB;

		if (r < 0.03) {
			f[i] = (evict_frag_t){ .len = len, .p = 0, .s = EVICT_FAR, .age = 0, .gap = true };
			continue;
		}
		f[i] = (evict_frag_t){ .len = len, .p = 0, .s = EVICT_FAR, .gap = false };
		f[i].age = i * 4 + bench_rng(&st) % 16;
		if (r < 0.13)
			f[i].p = INFINITY;
		else if (r < 0.35)
			f[i].p = 0.01 + 2.0 * bench_unit(&st);
		if (bench_unit(&st) < 0.3)
			f[i].s = bench_rng(&st) % n;
	}
}

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench_one(const evict_frag_t *f, size_t n, evict_policy_t pol, const char *name,
		     double scale)
{
	unsigned long reps = (unsigned long)(scale * BENCH_WORK / (double)n);
	volatile uint64_t sink = 0;
	evict_choice_t c;
	double t0, dt;

	if (reps < 10)
		reps = 10;
	/* Warm the caches and make sure the table really admits a window. */
	if (evict_choose(f, n, BENCH_EXTENT, pol, &c) || !c.found) {
		fprintf(stderr, "evict_bench: N=%zu policy=%s found no window\n", n, name);
		return -1;
	}
	t0 = bench_now();
	for (unsigned long k = 0; k < reps; k++) {
		evict_choose(f, n, BENCH_EXTENT, pol, &c);
		sink += c.first + c.evict_bytes;
	}
	dt = bench_now() - t0;
	(void)sink;
	printf("evict N=%zu policy=%s decisions=%lu us_per_decision=%.3f\n",
	       n, name, reps, dt * 1e6 / (double)reps);
	return 0;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 100, 1000, 10000 };
	double scale = 1.0;
	int rc = 0;

	if (argc > 1) {
		char *end;

		scale = strtod(argv[1], &end);
		if (end == argv[1] || *end || !(scale > 0) || !isfinite(scale)) {
			fprintf(stderr, "usage: %s [repetitions-scale > 0]\n", argv[0]);
			return 2;
		}
	}
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		evict_frag_t *f = malloc(n * sizeof(*f));

		if (!f) {
			fprintf(stderr, "evict_bench: %s\n", strerror(ENOMEM));
			return 1;
		}
		bench_table(f, n, UINT64_C(0xbe7c4) + n);
		if (bench_one(f, n, EVICT_SCORE, "score", scale) ||
		    bench_one(f, n, EVICT_FIFO, "fifo", scale))
			rc = 1;
		free(f);
	}
	return rc;
}
