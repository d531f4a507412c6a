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

/* ---- the peer board ------------------------------------------------------ */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peerboard.h"

static pid_t dead_pid = 999999; /* a pid the tests call dead */

static bool alive_but_dead_pid(pid_t pid)
{
	return pid != dead_pid && (kill(pid, 0) == 0 || errno == EPERM);
}

static peer_board_t *board_new(void)
{
	peer_board_t *b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(b, MAP_FAILED);
	return b;
}

static peer_info_t info_of(int device, uint64_t spare, uint64_t rem)
{
	peer_info_t v;
	memset(&v, 0, sizeof(v));
	v.device = device;
	v.spare = spare;
	v.rem = rem;
	v.host_bw = 12e9;
	for (int j = 0; j < CKC_PEER_MAX; j++)
		v.bw[j] = 48e9 + j;
	return v;
}

Test(peerboard, one_job_per_board)
{
	peer_board_t *b = board_new();
	cr_expect_eq(peerboard_init(b, "slurm-4242"), 0);
	cr_expect_eq(peerboard_init(b, "slurm-4242"), 0, "a second rank of the job");
	cr_expect_eq(peerboard_init(b, "slurm-4243"), -EEXIST, "another job's board");
	atomic_store(&b->magic, 77);
	cr_expect_eq(peerboard_init(b, "slurm-4242"), -EPROTO, "another layout");
	munmap(b, sizeof(*b));
}

Test(peerboard, an_entry_is_its_owners_until_the_owner_dies)
{
	peer_board_t *b = board_new();
	cr_assert_eq(peerboard_init(b, "j"), 0);
	pid_t me = getpid();
	peer_info_t v = info_of(3, 100, 7), got;
	pid_t owner = 0;
	cr_expect(!peerboard_read(b, 2, &got, &owner), "a free entry reads as nothing");
	cr_assert_eq(peerboard_claim(b, 2, me, alive_but_dead_pid), 0);
	peerboard_publish(b, 2, me, &v);
	cr_assert(peerboard_read(b, 2, &got, &owner));
	cr_expect_eq(owner, me);
	cr_expect_eq(got.device, 3);
	cr_expect_eq(got.spare, 100);
	cr_expect_eq(got.rem, 7);
	cr_expect_float_eq(got.bw[5], 48e9 + 5, 1);
	/* a live process cannot take it, nor write it */
	cr_expect_eq(peerboard_claim(b, 2, getppid(), alive_but_dead_pid), -EBUSY);
	peer_info_t other = info_of(9, 1, 1);
	peerboard_publish(b, 2, getppid(), &other);
	cr_assert(peerboard_read(b, 2, &got, &owner));
	cr_expect_eq(got.device, 3, "only the owner writes its entry");
	peerboard_release(b, 2, getppid());
	cr_expect(peerboard_read(b, 2, &got, &owner), "only the owner gives it back");
	/* its owner dies halfway through a write: readers skip it, a new
	 * claimant gets it empty and whole */
	atomic_store(&b->e[4].pid, dead_pid);
	atomic_store(&b->e[4].seq, 5);
	atomic_store(&b->e[4].rem, 123);
	cr_expect(!peerboard_read(b, 4, &got, &owner), "half written: not read");
	cr_expect_eq(peerboard_claim(b, 4, me, alive_but_dead_pid), 0, "a dead owner's entry is taken");
	cr_assert(peerboard_read(b, 4, &got, &owner));
	cr_expect_eq(got.rem, 0);
	cr_expect_eq(got.device, -1);
	cr_expect_eq(atomic_load(&b->e[4].seq) & 1u, 0);
	peerboard_release(b, 2, me);
	cr_expect(!peerboard_read(b, 2, &got, &owner));
	cr_expect_eq(peerboard_claim(b, CKC_PEER_MAX, me, NULL), -EINVAL);
	munmap(b, sizeof(*b));
}

Test(peerboard, the_ranks_of_a_node_make_one_graph)
{
	peer_board_t *b = board_new();
	cr_assert_eq(peerboard_init(b, "job"), 0);
	int go[2], done[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(done), 0);
	pid_t kids[4];
	for (int r = 0; r < 4; r++) {
		kids[r] = fork();
		cr_assert_geq(kids[r], 0);
		if (kids[r] == 0) {
			/* local rank r: entry r*3 (the board takes any entry) */
			peer_board_t *kb = b;
			if (peerboard_init(kb, "job") || peerboard_claim(kb, r * 3, getpid(), alive_but_dead_pid))
				_exit(1);
			peer_info_t v = info_of(r, (uint64_t)r << 30, r == 0 ? 3ull << 30 : 0);
			peerboard_publish(kb, r * 3, getpid(), &v);
			char c = 'x';
			if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
				_exit(1);
			_exit(0);
		}
	}
	char c;
	for (int r = 0; r < 4; r++)
		cr_assert_eq(read(done[0], &c, 1), 1);
	ckc_peer_graph_t g;
	int slot_of[CKC_PEER_MAX];
	int n = peerboard_graph(b, 1 << 30, alive_but_dead_pid, &g, slot_of);
	cr_expect_eq(n, 4);
	for (int k = 0; k < n; k++) {
		cr_expect_eq(slot_of[k], k * 3);
		cr_expect_eq(g.spare[k], (uint64_t)k, "rank %d lends %d GiB", k, k);
		cr_expect_eq(g.rem[k], k == 0 ? 3u : 0u);
		for (int j = 0; j < n; j++)
			cr_expect_float_eq(g.bw[k][j], j == k ? 0 : 48e9 + j * 3, 1);
	}
	ckc_peer_plan_t p;
	ckc_peer_maxflow(&g, &p);
	cr_expect(ckc_peer_plan_valid(&g, &p));
	cr_expect_eq(p.to_host[0], 0, "rank 0's 3 GiB go to the ranks that lend 1+2+3 GiB over faster links");
	for (int r = 0; r < 4; r++)
		cr_assert_eq(write(go[1], "g", 1), 1);
	for (int r = 0; r < 4; r++) {
		int st;
		cr_assert_eq(waitpid(kids[r], &st, 0), kids[r]);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	/* now dead: out of the graph, though still on the board */
	cr_expect_eq(peerboard_graph(b, 1 << 30, alive_but_dead_pid, &g, slot_of), 0);
	munmap(b, sizeof(*b));
}

static peer_board_t *tb;
static atomic_bool t_stop;

static void *t_writer(void *arg)
{
	(void)arg;
	pid_t me = getpid();
	for (uint64_t k = 1; !atomic_load(&t_stop); k++) {
		peer_info_t v = info_of((int)(k & 0x7fffffff), k, k);
		v.host_bw = (double)k;
		peerboard_publish(tb, 1, me, &v);
		/* (a pause now and then: on a loaded machine a writer that
		 * never stops left a reader no whole read in 200,000) */
		if (k % 64 == 0)
			sched_yield();
	}
	return NULL;
}

Test(peerboard, a_reader_never_sees_half_an_update)
{
	tb = board_new();
	cr_assert_eq(peerboard_init(tb, "j"), 0);
	cr_assert_eq(peerboard_claim(tb, 1, getpid(), NULL), 0);
	peer_info_t v0 = info_of(0, 0, 0);
	v0.host_bw = 0;
	peerboard_publish(tb, 1, getpid(), &v0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, t_writer, NULL), 0);
	int whole = 0;
	for (int k = 0; k < 200000; k++) {
		peer_info_t v;
		if (!peerboard_read(tb, 1, &v, NULL))
			continue;
		whole++;
		if (v.spare != v.rem || (double)v.spare != v.host_bw || v.device != (int)(v.spare & 0x7fffffff)) {
			atomic_store(&t_stop, true);
			pthread_join(t, NULL);
			cr_assert_fail("a torn read: spare %llu rem %llu host_bw %g device %d",
				       (unsigned long long)v.spare, (unsigned long long)v.rem, v.host_bw, v.device);
		}
	}
	atomic_store(&t_stop, true);
	pthread_join(t, NULL);
	cr_expect_gt(whole, 0);
	munmap(tb, sizeof(*tb));
}
