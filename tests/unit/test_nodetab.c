/* The node registry's table: keys and values, several holders of one path
 * and several versions held by one process, freed slots that searches go
 * past and additions reuse, a full neighbourhood, the last slot kept empty,
 * a table once full that empties again, the sweep of dead processes, and
 * additions and removals racing in threads. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "nodetab.h"

#define N 64

static nodetab_slot_t tab[N];

static void clear(void)
{
	for (size_t i = 0; i < N; i++)
		atomic_store(&tab[i], 0);
}

/* A key whose first slot is at (before the last: no key's place is
 * there). */
static uint64_t key_at(size_t at, uint64_t salt)
{
	return (salt + 1) * (N - 1) + at;
}

Test(nodetab, keys_and_values)
{
	uint64_t a = nodetab_key("/lustre/run/ckpt_0001.bin"), b = nodetab_key("/lustre/run/ckpt_0002.bin");
	cr_assert_neq(a, b);
	cr_assert_neq(a, 0);
	cr_assert_lt(a, 1ull << 40);
	cr_assert_eq(nodetab_key("/lustre/run/ckpt_0001.bin"), a);
	uint64_t v = nodetab_val(a, 4194303);
	cr_assert_eq(nodetab_val_key(v), a);
	cr_assert_eq(nodetab_val_pid(v), 4194303);
	cr_assert_gt(v, NODETAB_FREED);
}

Test(nodetab, holders_of_one_path_are_all_found)
{
	clear();
	uint64_t k = key_at(5, 0), other = key_at(5, 1), vals[8];
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 100)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(other, 100)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 200)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 200)), 0); /* a second version */
	cr_assert_eq(nodetab_find(tab, N, k, vals, 8, NULL), 3);
	cr_assert_eq(nodetab_val_pid(vals[0]), 100);
	cr_assert_eq(nodetab_val_pid(vals[1]), 200);
	cr_assert_eq(nodetab_find(tab, N, other, vals, 8, NULL), 1);
	cr_assert_eq(nodetab_find(tab, N, key_at(6, 3), vals, 8, NULL), 0);
	/* one removal per version */
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(k, 200)), 0);
	cr_assert_eq(nodetab_find(tab, N, k, vals, 8, NULL), 2);
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(k, 200)), 0);
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(k, 200)), -ENOENT);
	cr_assert_eq(nodetab_find(tab, N, k, vals, 1, NULL), 1);
	cr_assert_eq(nodetab_val_pid(vals[0]), 100);
}

Test(nodetab, freed_slots_are_passed_and_reused)
{
	clear();
	uint64_t a = key_at(10, 0), b = key_at(10, 1), vals[4];
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(a, 1)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(b, 2)), 0); /* in the slot after a's */
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(a, 1)), 0);
	cr_assert_eq(nodetab_find(tab, N, b, vals, 4, NULL), 1, "a search stopped at a freed slot");
	cr_assert_eq(atomic_load(&tab[10]), NODETAB_FREED);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(a, 3)), 0);
	cr_assert_eq(atomic_load(&tab[10]), nodetab_val(a, 3), "the freed slot was not reused");
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(b, 2)), 0);
}

/* Freed slots that no search needs (an empty one follows) become empty
 * again: a table that many versions went through is not left with freed
 * slots for every search to walk. */
Test(nodetab, freed_slots_empty_again_where_no_search_needs_them)
{
	clear();
	uint64_t a = key_at(10, 0), b = key_at(10, 1), c = key_at(10, 2), vals[4];
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(a, 1)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(b, 2)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(c, 3)), 0);
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(c, 3)), 0);
	cr_assert_eq(atomic_load(&tab[12]), NODETAB_EMPTY, "the last of a run");
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(a, 1)), 0);
	cr_assert_eq(atomic_load(&tab[10]), NODETAB_FREED, "b's search passes it");
	size_t probed;
	cr_assert_eq(nodetab_find(tab, N, b, vals, 4, &probed), 1);
	cr_assert_eq(probed, 2);
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(b, 2)), 0);
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(atomic_load(&tab[i]), NODETAB_EMPTY, "slot %zu", i);
	cr_assert_eq(nodetab_find(tab, N, a, vals, 4, &probed), 0);
	cr_assert_eq(probed, 0);
}

/* A table that an older version left full of freed slots: compacted, every
 * value is still found, and searches stop where nothing lies beyond. */
Test(nodetab, compact_empties_freed_slots_and_keeps_every_value)
{
	clear();
	for (size_t i = 0; i < N - 1; i++)
		atomic_store(&tab[i], NODETAB_FREED);
	uint64_t k = key_at(5, 0), m = key_at(40, 1), vals[4];
	atomic_store(&tab[7], nodetab_val(k, 11)); /* placed past two slots taken then */
	atomic_store(&tab[40], nodetab_val(m, 12));
	size_t probed;
	cr_assert_eq(nodetab_find(tab, N, key_at(20, 2), vals, 4, &probed), 0);
	cr_assert_eq(probed, N - 1 - 20, "a search walks every freed slot");
	cr_assert_gt(nodetab_compact(tab, N), 0);
	cr_assert_eq(nodetab_find(tab, N, k, vals, 4, &probed), 1);
	cr_assert_eq(vals[0], nodetab_val(k, 11));
	cr_assert_eq(nodetab_find(tab, N, m, vals, 4, &probed), 1);
	cr_assert_eq(probed, 1);
	cr_assert_eq(nodetab_find(tab, N, key_at(50, 2), vals, 4, &probed), 0);
	cr_assert_eq(probed, 0, "searched %zu slots after the compaction", probed);
	/* the freed slots before a value stay while it is there, and go with
	 * it */
	cr_assert_eq(nodetab_find(tab, N, key_at(20, 2), vals, 4, &probed), 0);
	cr_assert_eq(probed, 21);
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(m, 12)), 0);
	cr_assert_eq(nodetab_find(tab, N, key_at(20, 2), vals, 4, &probed), 0);
	cr_assert_eq(probed, 0);
	cr_assert_eq(atomic_load(&tab[5]), NODETAB_FREED, "k's search needs it");
	cr_assert_eq(atomic_load(&tab[6]), NODETAB_FREED, "k's search needs it");
	cr_assert_eq(atomic_load(&tab[8]), NODETAB_EMPTY);
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(k, 11)), 0);
	cr_assert_eq(atomic_load(&tab[5]), NODETAB_EMPTY, "emptied with the value after it");
}

Test(nodetab, fills_up_to_the_last_slot_which_stays_empty)
{
	clear();
	uint64_t k = key_at(N - 3, 0), vals[N];
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 1000)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 1001)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 1002)), -ENOSPC, "placed in the last slot or past it");
	cr_assert_eq(atomic_load(&tab[N - 1]), NODETAB_EMPTY);
	cr_assert_eq(atomic_load(&tab[0]), NODETAB_EMPTY, "wrapped around");
	clear();
	k = key_at(0, 0);
	for (int i = 0; i < N - 1; i++)
		cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 1000 + i)), 0, "add %d", i);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 7)), -ENOSPC);
	cr_assert_eq(atomic_load(&tab[N - 1]), NODETAB_EMPTY);
	cr_assert_eq(nodetab_find(tab, N, k, vals, N, NULL), N - 1);
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(k, 1000 + N - 2)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, 7)), 0);
}

/* A table whose every slot was taken at once (more checkpoints held on
 * the node than it has slots near their places), then emptied in any
 * order: a search stops at once again, by the removals themselves or by
 * one compaction. In a table with no slot left empty, every freed slot
 * stayed freed and every search walked its whole window. */
Test(nodetab, a_table_once_full_empties_again)
{
	uint64_t vals[4];
	size_t probed;
	for (int order = 0; order < 3; order++) {
		clear();
		for (size_t at = 0; at < N; at++)
			(void)nodetab_add(tab, N, nodetab_val(key_at(at % (N - 1), at / (N - 1)), 500 + (pid_t)at));
		for (size_t i = 0; i < N; i++) {
			/* first to last, last to first, and a scattered order */
			size_t at = order == 0 ? i : order == 1 ? N - 1 - i : (i * 37) % N;
			(void)nodetab_del(tab, N, nodetab_val(key_at(at % (N - 1), at / (N - 1)), 500 + (pid_t)at));
		}
		(void)nodetab_compact(tab, N);
		for (size_t i = 0; i < N; i++)
			cr_assert_eq(atomic_load(&tab[i]), NODETAB_EMPTY, "order %d: slot %zu still %#llx", order, i,
				     (unsigned long long)atomic_load(&tab[i]));
		cr_assert_eq(nodetab_find(tab, N, key_at(20, 3), vals, 4, &probed), 0);
		cr_assert_eq(probed, 0, "order %d: a search walked %zu slots", order, probed);
	}
}

/* A window of W slots: an addition goes no further than W slots from its
 * key's place (-ENOSPC though the table has room), and a search of W
 * slots finds every value added so, in a table with no empty slot left. */
Test(nodetab, within_a_window)
{
	clear();
	const size_t w = 4;
	uint64_t k = key_at(10, 0), vals[N], probed = 0;
	for (int i = 0; i < (int)w; i++)
		cr_assert_eq(nodetab_add_within(tab, N, nodetab_val(k, 100 + i), w), 0, "add %d", i);
	cr_assert_eq(nodetab_add_within(tab, N, nodetab_val(k, 7), w), -ENOSPC);
	cr_assert_eq(atomic_load(&tab[10 + w]), NODETAB_EMPTY, "added past the window");
	/* every other slot taken by keys of their own places */
	for (size_t at = 0; at < N - 1; at++)
		if (at < 10 || at >= 10 + w)
			cr_assert_eq(nodetab_add_within(tab, N, nodetab_val(key_at(at, 1), 9), w), 0);
	size_t got = nodetab_find_within(tab, N, k, vals, N, (size_t *)&probed, w);
	cr_assert_eq(got, w);
	cr_assert_eq(probed, w, "a search of a full table went %zu slots", (size_t)probed);
	cr_assert_eq(nodetab_find_within(tab, N, key_at(63, 5), vals, N, NULL, w), 0);
	cr_assert_eq(nodetab_del_within(tab, N, nodetab_val(k, 100 + w - 1), w), 0);
	cr_assert_eq(nodetab_del_within(tab, N, nodetab_val(k, 7), w), -ENOENT);
	cr_assert_eq(nodetab_find_within(tab, N, k, vals, N, NULL, w), w - 1);
}

static bool odd_alive(pid_t pid)
{
	return pid % 2 == 1;
}

Test(nodetab, sweep_frees_dead_processes_only)
{
	clear();
	uint64_t k = key_at(20, 0), vals[16];
	for (int pid = 1; pid <= 10; pid++)
		cr_assert_eq(nodetab_add(tab, N, nodetab_val(k, pid)), 0);
	cr_assert_eq(nodetab_sweep(tab, N, odd_alive), 5);
	cr_assert_eq(nodetab_find(tab, N, k, vals, 16, NULL), 5);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(nodetab_val_pid(vals[i]) % 2, 1);
	cr_assert_eq(nodetab_sweep(tab, N, odd_alive), 0);
}

/* Threads add and remove their own values for a few shared keys: every
 * value added and not removed is found exactly as often as it was added. */
#define RACE_THREADS 4
#define RACE_ROUNDS 20000
#define RACE_SLOTS 4096
#define RACE_KEPT(r) ((r) % 50 == 0)
static nodetab_slot_t big[RACE_SLOTS];
static atomic_int race_errors;

static uint64_t race_vals[RACE_THREADS][RACE_SLOTS];

static void *racer(void *arg)
{
	pid_t me = (pid_t)(uintptr_t)arg;
	uint64_t *mine = race_vals[me - 100];
	for (int r = 0; r < RACE_ROUNDS; r++) {
		uint64_t v = nodetab_val(key_at((size_t)(r % 3), 9), me);
		if (nodetab_add(big, RACE_SLOTS, v) != 0)
			atomic_fetch_add(&race_errors, 1);
		/* found at once, whatever the others free and empty meanwhile */
		size_t n = nodetab_find(big, RACE_SLOTS, key_at((size_t)(r % 3), 9), mine, RACE_SLOTS, NULL);
		bool seen = false;
		for (size_t i = 0; i < n && i < RACE_SLOTS && !seen; i++)
			seen = mine[i] == v;
		if (!seen)
			atomic_fetch_add(&race_errors, 1);
		if (!RACE_KEPT(r) && nodetab_del(big, RACE_SLOTS, v) != 0)
			atomic_fetch_add(&race_errors, 1);
	}
	return NULL;
}

Test(nodetab, concurrent_adds_and_removes)
{
	pthread_t th[RACE_THREADS];
	for (int i = 0; i < RACE_THREADS; i++)
		pthread_create(&th[i], NULL, racer, (void *)(uintptr_t)(100 + i));
	for (int i = 0; i < RACE_THREADS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(atomic_load(&race_errors), 0, "%d additions or removals failed",
		     atomic_load(&race_errors));
	static uint64_t vals[RACE_SLOTS];
	for (int k = 0; k < 3; k++) {
		size_t n = nodetab_find(big, RACE_SLOTS, key_at((size_t)k, 9), vals, RACE_SLOTS, NULL);
		size_t per[RACE_THREADS] = { 0 };
		for (size_t i = 0; i < n && i < RACE_SLOTS; i++)
			per[nodetab_val_pid(vals[i]) - 100]++;
		for (int t = 0; t < RACE_THREADS; t++) {
			size_t want = 0;
			for (int r = 0; r < RACE_ROUNDS; r++)
				want += r % 3 == k && RACE_KEPT(r);
			cr_assert_eq(per[t], want, "key %d thread %d: %zu kept, %zu expected", k, t, per[t], want);
		}
	}
}

/* An addition whose search passed slot 5 while X was there takes slot 6;
 * X's removal looks at slot 6 before that and empties slot 5 after the
 * addition looked back at it (the two pauses make that order): the value
 * added must still be found, and removed. */
static atomic_int order; /* 0, 1: the removal may start, 2: it looked, 3: it may go on */
static uint64_t order_x;

static bool order_wait(int want)
{
	for (long i = 0; i < 5000000L; i++) {
		if (atomic_load(&order) == want)
			return true;
		sched_yield();
	}
	return false;
}

static void order_add_pause(size_t slot)
{
	int zero = 0;
	if (slot == 6 && atomic_compare_exchange_strong(&order, &zero, 1))
		(void)order_wait(2);
}

static void order_reclaim_pause(void)
{
	int one = 1;
	if (atomic_compare_exchange_strong(&order, &one, 2))
		(void)order_wait(3);
}

static void *order_remover(void *arg)
{
	(void)arg;
	if (!order_wait(1))
		return (void *)(intptr_t)-100;
	return (void *)(intptr_t)nodetab_del_within(tab, N, order_x, 8);
}

Test(nodetab, an_addition_beside_a_removal_is_found)
{
	clear();
	uint64_t kx = key_at(5, 0), ky = key_at(5, 1), vals[4];
	order_x = nodetab_val(kx, 100);
	uint64_t y = nodetab_val(ky, 200);
	cr_assert_eq(nodetab_add_within(tab, N, order_x, 8), 0);
	atomic_store(&order, 0);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, order_remover, NULL), 0);
	nodetab_add_pause = order_add_pause;
	nodetab_reclaim_pause = order_reclaim_pause;
	int rc = nodetab_add_within(tab, N, y, 8);
	nodetab_add_pause = NULL;
	bool looked = atomic_load(&order) == 2;
	atomic_store(&order, 3);
	void *del;
	pthread_join(th, &del);
	nodetab_reclaim_pause = NULL;
	cr_assert(looked, "the removal did not reach its look at slot 6 while the addition waited");
	cr_assert_eq(rc, 0);
	cr_assert_eq((intptr_t)del, 0, "X's removal: %d", (int)(intptr_t)del);
	cr_assert_eq(nodetab_find_within(tab, N, kx, vals, 4, NULL, 8), 0);
	cr_assert_eq(nodetab_find_within(tab, N, ky, vals, 4, NULL, 8), 1, "the value added is in the table but no search finds it");
	cr_assert_eq(nodetab_del_within(tab, N, y, 8), 0);
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(atomic_load(&tab[i]), NODETAB_EMPTY, "slot %zu", i);
}

Test(nodetab, pids_lists_each_holder_once)
{
	clear();
	pid_t pids[8];
	cr_assert_eq(nodetab_pids(tab, N, pids, 8), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(key_at(3, 0), 100)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(key_at(9, 0), 100)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(key_at(9, 1), 300)), 0);
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(key_at(20, 0), 200)), 0);
	cr_assert_eq(nodetab_del(tab, N, nodetab_val(key_at(20, 0), 200)), 0); /* gone again */
	cr_assert_eq(nodetab_add(tab, N, nodetab_val(key_at(40, 0), 300)), 0);
	size_t k = nodetab_pids(tab, N, pids, 8);
	cr_assert_eq(k, 2, "%zu holders listed, expected 100 and 300", k);
	cr_assert(pids[0] != pids[1]);
	cr_assert((pids[0] == 100 || pids[0] == 300) && (pids[1] == 100 || pids[1] == 300));
	cr_assert_eq(nodetab_pids(tab, N, pids, 1), 1, "max is not kept");
}
