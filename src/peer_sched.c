/* Peer placement schedules (peer_sched.h): local only, greedy, and the
 * minimum-time maximum flow, over one node's link graph. */
#include "config.h"

#include <string.h>

#include "peer_sched.h"
#include "sys.h"

/* Units a link of bw bytes/s moves in t seconds (a hair of slack for the
 * rounding of t itself). */
static uint64_t link_units(double t, double bw, double unit)
{
	if (bw <= 0 || t <= 0)
		return 0;
	double u = t * bw / unit * (1 + 1e-12);
	return u >= 1e18 ? (uint64_t)1e18 : (uint64_t)u;
}

static double link_time(uint64_t units, double bw, double unit)
{
	return units ? (double)units * unit / bw : 0;
}

double ckc_peer_makespan(const ckc_peer_graph_t *g, const ckc_peer_plan_t *p)
{
	double worst = 0;
	for (int i = 0; i < g->n; i++) {
		double t = link_time(p->to_host[i], g->host_bw[i], g->unit);
		for (int j = 0; j < g->n; j++)
			if (p->to[i][j]) {
				double tj = link_time(p->to[i][j], g->bw[i][j], g->unit);
				t = tj > t ? tj : t;
			}
		worst = t > worst ? t : worst;
	}
	return worst;
}

void ckc_peer_local(const ckc_peer_graph_t *g, ckc_peer_plan_t *p)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < g->n; i++)
		p->to_host[i] = g->rem[i];
}

void ckc_peer_greedy(const ckc_peer_graph_t *g, ckc_peer_plan_t *p)
{
	int order[CKC_PEER_MAX];
	uint64_t room[CKC_PEER_MAX];

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < g->n; i++) {
		order[i] = i;
		room[i] = g->spare[i];
	}
	/* the largest remainder first (insertion sort: a node's ranks) */
	for (int a = 1; a < g->n; a++)
		for (int b = a; b > 0 && g->rem[order[b]] > g->rem[order[b - 1]]; b--) {
			int t = order[b];
			order[b] = order[b - 1];
			order[b - 1] = t;
		}
	for (int k = 0; k < g->n; k++) {
		int i = order[k];
		uint64_t left = g->rem[i];
		while (left) {
			int best = -1;
			for (int j = 0; j < g->n; j++)
				if (j != i && room[j] && g->bw[i][j] > g->host_bw[i] &&
				    (best < 0 || g->bw[i][j] > g->bw[i][best]))
					best = j;
			if (best < 0)
				break;
			uint64_t take = left < room[best] ? left : room[best];
			p->to[i][best] += take;
			room[best] -= take;
			left -= take;
		}
		p->to_host[i] = left;
	}
}

/* ---- maximum flow (Dinic) on the placement network --------------------
 * Nodes: the source, the ranks as senders, the ranks as lenders, the host,
 * the sink. */
#define NODES (2 * CKC_PEER_MAX + 3)
#define EDGES (2 * (CKC_PEER_MAX * CKC_PEER_MAX + 3 * CKC_PEER_MAX + 1))

typedef struct flow_net {
	int nn, ne;
	int head[NODES], next[EDGES], to[EDGES];
	uint64_t cap[EDGES];
	int level[NODES], it[NODES], queue[NODES];
} flow_net_t;

static int net_edge(flow_net_t *f, int a, int b, uint64_t cap)
{
	int e = f->ne;
	f->to[e] = b;
	f->cap[e] = cap;
	f->next[e] = f->head[a];
	f->head[a] = e;
	f->to[e + 1] = a;
	f->cap[e + 1] = 0;
	f->next[e + 1] = f->head[b];
	f->head[b] = e + 1;
	f->ne += 2;
	return e;
}

static int net_levels(flow_net_t *f, int s, int t)
{
	int qh = 0, qt = 0;
	for (int v = 0; v < f->nn; v++)
		f->level[v] = -1;
	f->level[s] = 0;
	f->queue[qt++] = s;
	while (qh < qt) {
		int v = f->queue[qh++];
		for (int e = f->head[v]; e >= 0; e = f->next[e])
			if (f->cap[e] && f->level[f->to[e]] < 0) {
				f->level[f->to[e]] = f->level[v] + 1;
				f->queue[qt++] = f->to[e];
			}
	}
	return f->level[t] >= 0;
}

static uint64_t net_push(flow_net_t *f, int v, int t, uint64_t want)
{
	if (v == t)
		return want;
	for (; f->it[v] >= 0; f->it[v] = f->next[f->it[v]]) {
		int e = f->it[v], w = f->to[e];
		if (!f->cap[e] || f->level[w] != f->level[v] + 1)
			continue;
		uint64_t got = net_push(f, w, t, want < f->cap[e] ? want : f->cap[e]);
		if (got) {
			f->cap[e] -= got;
			f->cap[e ^ 1] += got;
			return got;
		}
	}
	return 0;
}

static uint64_t net_maxflow(flow_net_t *f, int s, int t)
{
	uint64_t total = 0;
	while (net_levels(f, s, t)) {
		for (int v = 0; v < f->nn; v++)
			f->it[v] = f->head[v];
		for (uint64_t got; (got = net_push(f, s, t, UINT64_MAX)) != 0;)
			total += got;
	}
	return total;
}

/* The network for makespan t; edge_of[i][j] (j == n: the host) is the edge
 * index of each sender-to-lender link, -1 where there is none. Returns
 * whether every unit can be placed, and the flow in f. */
static int net_fits(const ckc_peer_graph_t *g, double t, flow_net_t *f, int edge_of[][CKC_PEER_MAX + 1],
		    uint64_t total)
{
	int n = g->n, src = 0, host = 2 * n + 1, sink = 2 * n + 2;
	f->nn = 2 * n + 3;
	f->ne = 0;
	for (int v = 0; v < f->nn; v++)
		f->head[v] = -1;
	for (int i = 0; i < n; i++) {
		if (g->rem[i])
			net_edge(f, src, 1 + i, g->rem[i]);
		if (g->spare[i])
			net_edge(f, 1 + n + i, sink, g->spare[i]);
		for (int j = 0; j < n; j++) {
			uint64_t c = j != i && g->spare[j] ? link_units(t, g->bw[i][j], g->unit) : 0;
			edge_of[i][j] = c ? net_edge(f, 1 + i, 1 + n + j, c) : -1;
		}
		uint64_t c = link_units(t, g->host_bw[i], g->unit);
		edge_of[i][n] = c ? net_edge(f, 1 + i, host, c) : -1;
	}
	net_edge(f, host, sink, total);
	return net_maxflow(f, src, sink) == total;
}

int ckc_peer_maxflow(const ckc_peer_graph_t *g, ckc_peer_plan_t *p)
{
	flow_net_t f; /* on the stack: the library's thread-local storage is static and small */
	int edge_of[CKC_PEER_MAX][CKC_PEER_MAX + 1];
	uint64_t total = 0;
	int runs = 0;

	ckc_peer_local(g, p);
	for (int i = 0; i < g->n; i++)
		total += g->rem[i];
	if (!total)
		return 0;
	/* all to the host fits in the local-only time; nothing fits in none */
	double lo = 0, hi = ckc_peer_makespan(g, p);
	while (hi - lo > hi * 1e-12 && runs < 200) {
		double mid = lo + (hi - lo) / 2;
		runs++;
		if (net_fits(g, mid, &f, edge_of, total))
			hi = mid;
		else
			lo = mid;
	}
	runs++;
	if (!net_fits(g, hi, &f, edge_of, total))
		return runs; /* cannot happen: hi was feasible; p stays local */
	for (int i = 0; i < g->n; i++) {
		for (int j = 0; j < g->n; j++)
			p->to[i][j] = edge_of[i][j] >= 0 ? f.cap[edge_of[i][j] ^ 1] : 0;
		p->to_host[i] = edge_of[i][g->n] >= 0 ? f.cap[edge_of[i][g->n] ^ 1] : 0;
	}
	return runs;
}

int ckc_peer_plan_valid(const ckc_peer_graph_t *g, const ckc_peer_plan_t *p)
{
	uint64_t used[CKC_PEER_MAX] = { 0 };
	for (int i = 0; i < g->n; i++) {
		uint64_t sum = p->to_host[i];
		for (int j = 0; j < g->n; j++) {
			if (p->to[i][j] && (j == i || g->bw[i][j] <= 0))
				return 0;
			sum += p->to[i][j];
			used[j] += p->to[i][j];
		}
		if (sum != g->rem[i])
			return 0;
	}
	for (int j = 0; j < g->n; j++)
		if (used[j] > g->spare[j])
			return 0;
	return 1;
}
