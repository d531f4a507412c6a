/* Replays a per-rank checkpoint-size trace (one line per checkpoint, one
 * column per rank, bytes) over a modelled link graph of one node, with each
 * rank's gpu tier of one size: what does not fit a rank's own tier goes off
 * it by the local-only, greedy or minimum-time schedule (src/peer_sched.h),
 * lent room counting against the lender. Prints the group's blocking time
 * per schedule for three link models and the time one minimum-time schedule
 * takes to compute.
 *   peer_sim TRACE.csv [CACHE_GIB]   (default: 90% of the median rank's history) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer_sched.h"

#define STEPS 4096
#define UNIT (2.0 * 1024 * 1024)
#define D2D_BW 1400e9 /* a capture into the rank's own tier */

static double sizes[STEPS][CKC_PEER_MAX];
static int nsteps, nranks;

static int load(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[4096];
	while (nsteps < STEPS && fgets(line, sizeof(line), f)) {
		int n = 0;
		for (char *p = strtok(line, ",\n"); p && n < CKC_PEER_MAX; p = strtok(NULL, ",\n"))
			sizes[nsteps][n++] = strtod(p, NULL);
		if (!n)
			continue;
		if (nranks && n != nranks)
			break;
		nranks = n;
		nsteps++;
	}
	fclose(f);
	return nsteps ? 0 : -1;
}

struct model {
	const char *name, *what;
	double pair, pair_near, host;
	int kind; /* 0: every pair; 1: hybrid cube mesh; 2: PCIe switches */
};

static double pair_bw(const struct model *m, int i, int j)
{
	if (i == j)
		return 0;
	switch (m->kind) {
	case 0:
		return m->pair;
	case 1: /* two quads fully linked inside, and i to i+4 */
		if ((i ^ j) == 1)
			return m->pair_near;
		if (i / 4 == j / 4 || (i % 4) == (j % 4))
			return m->pair;
		return 0;
	default: /* pairs under one switch, the rest through the root complex */
		return (i ^ j) == 1 ? m->pair_near : m->pair;
	}
}

static double ns_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double sched_ns[STEPS];
static int nsched;

/* One replay: the group's blocking time in seconds. */
static double replay(const struct model *m, int how, double cache)
{
	double used[CKC_PEER_MAX] = { 0 }, total = 0;
	for (int k = 0; k < nsteps; k++) {
		ckc_peer_graph_t g;
		memset(&g, 0, sizeof(g));
		g.n = nranks;
		g.unit = UNIT;
		double local_t = 0;
		for (int i = 0; i < nranks; i++) {
			double s = sizes[k][i], room = cache - used[i], local = s < room ? s : room;
			local = local > 0 ? local : 0;
			used[i] += local;
			g.rem[i] = (uint64_t)((s - local + UNIT - 1) / UNIT);
			local_t = local / D2D_BW > local_t ? local / D2D_BW : local_t;
			g.host_bw[i] = m->host;
			for (int j = 0; j < nranks; j++)
				g.bw[i][j] = pair_bw(m, i, j);
		}
		for (int j = 0; j < nranks; j++)
			g.spare[j] = cache > used[j] ? (uint64_t)((cache - used[j]) / UNIT) : 0;
		ckc_peer_plan_t p;
		if (how == 0) {
			ckc_peer_local(&g, &p);
		} else if (how == 1) {
			ckc_peer_greedy(&g, &p);
		} else {
			uint64_t any = 0;
			for (int i = 0; i < nranks; i++)
				any += g.rem[i];
			double t0 = ns_now();
			ckc_peer_maxflow(&g, &p);
			if (any && nsched < STEPS) /* a checkpoint with something to place */
				sched_ns[nsched++] = ns_now() - t0;
		}
		if (!ckc_peer_plan_valid(&g, &p)) {
			fprintf(stderr, "peer_sim: an invalid plan at checkpoint %d\n", k);
			exit(1);
		}
		for (int i = 0; i < nranks; i++)
			for (int j = 0; j < nranks; j++)
				used[j] += (double)p.to[i][j] * UNIT;
		double t = ckc_peer_makespan(&g, &p);
		total += t > local_t ? t : local_t;
	}
	return total;
}

int main(int argc, char **argv)
{
	if (argc < 2 || load(argv[1])) {
		fprintf(stderr, "usage: peer_sim TRACE.csv [CACHE_GIB] (one line per checkpoint, one column per rank)\n");
		return 2;
	}
	double hist[CKC_PEER_MAX];
	for (int i = 0; i < nranks; i++) {
		hist[i] = 0;
		for (int k = 0; k < nsteps; k++)
			hist[i] += sizes[k][i];
	}
	double sorted[CKC_PEER_MAX];
	memcpy(sorted, hist, sizeof(sorted));
	qsort(sorted, (size_t)nranks, sizeof(double), cmp_d);
	double cache = argc > 2 ? atof(argv[2]) * 1073741824.0 : 0.9 * sorted[nranks / 2];
	static const struct model models[] = {
		{ "nvswitch", "every pair 64 GB/s (450 GB/s of NVLink shared by 7 peers), host 54 GB/s", 64e9, 64e9, 54e9, 0 },
		{ "cube-mesh", "hybrid cube mesh: 48 GB/s to the pair, 24 GB/s in the quad and across, host 12 GB/s", 24e9,
		  48e9, 12e9, 1 },
		{ "pcie", "25 GB/s under one switch, 12 GB/s through the root complex, host 12 GB/s", 12e9, 25e9, 12e9, 2 },
	};
	printf("trace %s: %d checkpoints x %d ranks; gpu tier %.2f GiB per rank; unit %.0f MiB\n\n", argv[1], nsteps,
	       nranks, cache / 1073741824.0, UNIT / 1048576);
	printf("| link model | local-only s | greedy s | min-time s | local/greedy | greedy/min-time |\n");
	printf("|---|---:|---:|---:|---:|---:|\n");
	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		double tl = replay(&models[m], 0, cache), tg = replay(&models[m], 1, cache);
		double tm = replay(&models[m], 2, cache);
		printf("| %s | %.4f | %.4f | %.4f | %.2f | %.2f |\n", models[m].name, tl, tg, tm, tg > 0 ? tl / tg : 0,
		       tm > 0 ? tg / tm : 0);
	}
	printf("\n");
	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++)
		printf("- %s: %s\n", models[m].name, models[m].what);
	qsort(sched_ns, (size_t)nsched, sizeof(double), cmp_d);
	printf("\nmin-time schedule for %d ranks: median %.1f us, max %.1f us over the %d checkpoints with bytes to place\n", nranks,
	       nsched ? sched_ns[nsched / 2] / 1e3 : 0, nsched ? sched_ns[nsched - 1] / 1e3 : 0, nsched);
	return 0;
}
