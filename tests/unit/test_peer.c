/* Tests of the peer placement schedules (src/peer_sched.c): on small link
 * graphs, the minimum-time flow's makespan equals the best of every
 * possible placement (brute force), greedy never beats it, local-only
 * never beats greedy, and every plan places every unit within the spares. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "peer_sched.h"

/* The least makespan over every placement of every unit (brute force). */
static const ckc_peer_graph_t *bg;
static uint64_t bleft[CKC_PEER_MAX];
static double best;

static void brute(ckc_peer_plan_t *p, int i, int j)
{
	if (i == bg->n) {
		double m = ckc_peer_makespan(bg, p);
		best = m < best ? m : best;
		return;
	}
	uint64_t placed = p->to_host[i];
	for (int k = 0; k < j; k++)
		placed += p->to[i][k];
	uint64_t left = bg->rem[i] - placed;
	if (j == bg->n) { /* the rest to the host */
		p->to_host[i] += left;
		brute(p, i + 1, 0);
		p->to_host[i] -= left;
		return;
	}
	uint64_t most = j == i || bg->bw[i][j] <= 0 ? 0 : left < bleft[j] ? left : bleft[j];
	for (uint64_t u = 0; u <= most; u++) {
		p->to[i][j] = u;
		bleft[j] -= u;
		brute(p, i, j + 1);
		bleft[j] += u;
	}
	p->to[i][j] = 0;
}

static double brute_best(const ckc_peer_graph_t *g)
{
	ckc_peer_plan_t p;
	memset(&p, 0, sizeof(p));
	bg = g;
	for (int j = 0; j < g->n; j++)
		bleft[j] = g->spare[j];
	best = 1e300;
	brute(&p, 0, 0);
	return best;
}

static void random_graph(ckc_peer_graph_t *g, unsigned *seed)
{
	static const double bws[] = { 0, 1e9, 2e9, 3e9, 5e9, 8e9 };
	memset(g, 0, sizeof(*g));
	g->n = 2 + rand_r(seed) % 3;
	g->unit = 1 << 20;
	for (int i = 0; i < g->n; i++) {
		g->host_bw[i] = (1 + rand_r(seed) % 3) * 1e9;
		g->rem[i] = rand_r(seed) % 4;
		g->spare[i] = rand_r(seed) % 4;
		for (int j = 0; j < g->n; j++)
			g->bw[i][j] = i == j ? 0 : bws[rand_r(seed) % 6];
	}
}

Test(peer, maxflow_is_the_best_placement_and_greedy_and_local_follow)
{
	unsigned seed = 12345;
	int checked = 0, greedy_worse = 0;
	for (int k = 0; k < 400; k++) {
		ckc_peer_graph_t g;
		random_graph(&g, &seed);
		ckc_peer_plan_t pl, pg, pm;
		ckc_peer_local(&g, &pl);
		ckc_peer_greedy(&g, &pg);
		ckc_peer_maxflow(&g, &pm);
		cr_assert(ckc_peer_plan_valid(&g, &pl), "graph %d: local plan invalid", k);
		cr_assert(ckc_peer_plan_valid(&g, &pg), "graph %d: greedy plan invalid", k);
		cr_assert(ckc_peer_plan_valid(&g, &pm), "graph %d: maxflow plan invalid", k);
		double tl = ckc_peer_makespan(&g, &pl), tg = ckc_peer_makespan(&g, &pg);
		double tm = ckc_peer_makespan(&g, &pm), tb = brute_best(&g);
		cr_assert(tm <= tb * (1 + 1e-9) && tm >= tb * (1 - 1e-9),
			  "graph %d (%d ranks): maxflow %.9g s, the best placement %.9g s", k, g.n, tm, tb);
		cr_assert(tg >= tm * (1 - 1e-9), "graph %d: greedy %.9g s beats the best %.9g s", k, tg, tm);
		cr_assert(tl >= tg * (1 - 1e-9), "graph %d: local %.9g s beats greedy %.9g s", k, tl, tg);
		greedy_worse += tg > tm * (1 + 1e-9);
		checked++;
	}
	cr_assert_eq(checked, 400);
	cr_expect_gt(greedy_worse, 0, "some graph where greedy is not the best (else the test shows little)");
}

Test(peer, without_spare_memory_everything_goes_to_the_host)
{
	ckc_peer_graph_t g;
	memset(&g, 0, sizeof(g));
	g.n = 4;
	g.unit = 256 << 20;
	for (int i = 0; i < 4; i++) {
		g.host_bw[i] = 12e9;
		g.rem[i] = 3 + i;
		for (int j = 0; j < 4; j++)
			g.bw[i][j] = i == j ? 0 : 48e9;
	}
	ckc_peer_plan_t p;
	ckc_peer_maxflow(&g, &p);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(p.to_host[i], g.rem[i]);
	ckc_peer_greedy(&g, &p);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(p.to_host[i], g.rem[i]);
}

Test(peer, one_full_rank_spreads_over_its_neighbours)
{
	/* rank 0 has 12 units left over; three neighbours, 48 GB/s each, with
	 * room for 4 each; the host takes 12 GB/s. Local: 12 units at 12 GB/s.
	 * Best: 3 units to each neighbour and 3 to the host at once. */
	ckc_peer_graph_t g;
	memset(&g, 0, sizeof(g));
	g.n = 4;
	g.unit = 1e9;
	g.rem[0] = 12;
	for (int i = 0; i < 4; i++) {
		g.host_bw[i] = 12e9;
		g.spare[i] = i ? 4 : 0;
		for (int j = 0; j < 4; j++)
			g.bw[i][j] = i == j ? 0 : 48e9;
	}
	ckc_peer_plan_t pl, pg, pm;
	ckc_peer_local(&g, &pl);
	ckc_peer_greedy(&g, &pg);
	ckc_peer_maxflow(&g, &pm);
	cr_expect_float_eq(ckc_peer_makespan(&g, &pl), 1.0, 1e-9);
	cr_expect_float_eq(ckc_peer_makespan(&g, &pg), 4 / 48.0, 1e-9, "greedy fills one neighbour after another");
	cr_expect_float_eq(ckc_peer_makespan(&g, &pm), 3 / 48.0 > 1 / 12.0 ? 3 / 48.0 : 1 / 12.0, 1e-9);
	cr_expect_leq(ckc_peer_makespan(&g, &pm), ckc_peer_makespan(&g, &pg));
}
