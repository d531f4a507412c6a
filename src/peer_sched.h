/* Schedules for placing the checkpoint bytes that do not fit a rank's own
 * gpu tier on the spare device memory of the other ranks of its node (or on
 * the host): pure functions over a link graph, no threads, no CUDA.
 *
 * The model: bytes move in units of one size. A rank's remainder goes over
 * directed links, each with its own bandwidth, the units on one link one
 * after another and the links of a rank at once; the host takes any amount.
 * A rank blocks until its last unit has moved; the group blocks until its
 * slowest rank is done (a tightly coupled step waits for every rank). */
#ifndef CKC_PEER_SCHED_H
#define CKC_PEER_SCHED_H

#include <stdint.h>

#define CKC_PEER_MAX 16

typedef struct ckc_peer_graph {
	int n;                             /* ranks, at most CKC_PEER_MAX */
	double bw[CKC_PEER_MAX][CKC_PEER_MAX]; /* bytes/s from i's device to j's; 0: no link */
	double host_bw[CKC_PEER_MAX];      /* bytes/s from i's device to host memory (> 0) */
	uint64_t rem[CKC_PEER_MAX];        /* units rank i must place off its device */
	uint64_t spare[CKC_PEER_MAX];      /* units rank j's device can take from others */
	double unit;                       /* bytes per unit */
} ckc_peer_graph_t;

typedef struct ckc_peer_plan {
	uint64_t to[CKC_PEER_MAX][CKC_PEER_MAX]; /* units from rank i to rank j's device */
	uint64_t to_host[CKC_PEER_MAX];          /* units from rank i to host memory */
} ckc_peer_plan_t;

/* Seconds the group blocks under plan p: the longest link of any rank. */
double ckc_peer_makespan(const ckc_peer_graph_t *g, const ckc_peer_plan_t *p);

/* Every remainder to host memory (no peers). */
void ckc_peer_local(const ckc_peer_graph_t *g, ckc_peer_plan_t *p);

/* The largest remainder first; each goes to the fastest link with room
 * (a peer's spare or the host, whichever link is faster), then the next. */
void ckc_peer_greedy(const ckc_peer_graph_t *g, ckc_peer_plan_t *p);

/* Minimum time: the least makespan T for which the flow network (each
 * rank's remainder, each link carrying what it moves in T, each peer its
 * spare, the host without bound) carries every unit, found by bisection on
 * T with a maximum flow at each step; the plan is that flow. Optimal for
 * the model. Returns the number of flow computations. */
int ckc_peer_maxflow(const ckc_peer_graph_t *g, ckc_peer_plan_t *p);

/* Whether p places every remainder, within the spares and the links. */
int ckc_peer_plan_valid(const ckc_peer_graph_t *g, const ckc_peer_plan_t *p);

#endif
