/* Tests of the eviction window choice: hand-made cases for every ordering
 * rule and tie-break, and a property test against a literal O(N^2)
 * implementation of the definition in evict.h. */
#include "config.h"

#include "evict.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#define EV_PROP_SEED UINT64_C(0x5eed2023c0ffee01)
#define EV_PROP_TABLES 10000
#define EV_PROP_MAXN 64

static evict_frag_t ev_ext(uint64_t len, double p, uint64_t s, uint64_t age)
{
	return (evict_frag_t){ .len = len, .p = p, .s = s, .age = age, .gap = false };
}

static evict_frag_t ev_gap(uint64_t len)
{
	return (evict_frag_t){ .len = len, .p = 0, .s = EVICT_FAR, .age = 0, .gap = true };
}

static evict_choice_t ev_run(const evict_frag_t *f, size_t n, uint64_t need, evict_policy_t pol)
{
	evict_choice_t c;
	int rc = evict_choose(f, n, need, pol, &c);

	cr_assert_eq(rc, 0, "evict_choose returned %d", rc);
	return c;
}

#define EV_N(a) (sizeof(a) / sizeof((a)[0]))

static void ev_expect(evict_choice_t c, size_t first, size_t last)
{
	cr_assert(c.found, "no window found, expected [%zu,%zu]", first, last);
	cr_expect_eq(c.first, first, "first %zu, expected %zu", c.first, first);
	cr_expect_eq(c.last, last, "last %zu, expected %zu", c.last, last);
}

Test(evict, smallest_max_p_wins)
{
	evict_frag_t f[] = {
		ev_ext(10, 2, 5, 1), ev_ext(10, 0.5, 1, 2), ev_ext(10, 1, EVICT_FAR, 3),
	};
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_SCORE);

	ev_expect(c, 1, 1);
	cr_expect_eq(c.p, 0.5);
	cr_expect_eq(c.s, 1);
	cr_expect_eq(c.evict_bytes, 10);
}

Test(evict, window_p_is_the_maximum)
{
	/* Two-fragment windows: [0,1] max 2, [1,2] max 1, [2,3] max 1.5. */
	evict_frag_t f[] = {
		ev_ext(5, 2, 1, 1), ev_ext(5, 0, 1, 2), ev_ext(5, 1, 1, 3), ev_ext(5, 1.5, 1, 4),
	};
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_SCORE);

	ev_expect(c, 1, 2);
	cr_expect_eq(c.p, 1.0);
	cr_expect_eq(c.s, 2);
}

Test(evict, p_ties_broken_by_largest_sum_s)
{
	evict_frag_t f[] = {
		ev_ext(10, 0, 3, 1), ev_ext(10, 0, EVICT_FAR, 2), ev_ext(10, 0, 7, 3),
	};
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_SCORE);

	ev_expect(c, 1, 1);
	cr_expect_eq(c.s, EVICT_FAR);
}

Test(evict, sum_s_counts_every_fragment_including_gaps)
{
	/* [0,1] sums 2 + F, [1,2] sums F (gap) + F, [2,2] is F alone. */
	evict_frag_t f[] = {
		ev_ext(5, 0, 2, 1), ev_gap(5), ev_ext(10, 0, EVICT_FAR, 2),
	};
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_SCORE);

	ev_expect(c, 1, 2);
	cr_expect_eq(c.s, 2 * EVICT_FAR);
	cr_expect_eq(c.evict_bytes, 10);
}

Test(evict, p_and_s_ties_broken_by_smallest_evict_bytes)
{
	/* [0,1] and [1,2] both have p 0 and s 2F; the gap makes [1,2] cheaper. */
	evict_frag_t f[] = {
		ev_ext(6, 0, EVICT_FAR, 1), ev_ext(4, 0, EVICT_FAR, 2), ev_gap(6), ev_ext(4, 0, 0, 3),
	};
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_SCORE);

	ev_expect(c, 1, 2);
	cr_expect_eq(c.s, 2 * EVICT_FAR);
	cr_expect_eq(c.evict_bytes, 4);
}

Test(evict, evict_bytes_tie_break_alone)
{
	evict_frag_t f[] = {
		ev_ext(8, 0, EVICT_FAR, 1), ev_ext(8, 0, EVICT_FAR, 2), ev_gap(8), ev_ext(8, 0, EVICT_FAR, 4),
	};
	evict_choice_t c = ev_run(f, EV_N(f), 8, EVICT_SCORE);

	ev_expect(c, 2, 2);
	cr_expect_eq(c.evict_bytes, 0);
}

Test(evict, full_tie_takes_lowest_index)
{
	evict_frag_t f[] = {
		ev_ext(4, 1, 9, 5), ev_ext(4, 1, 9, 5), ev_ext(4, 1, 9, 5),
	};

	ev_expect(ev_run(f, EV_N(f), 4, EVICT_SCORE), 0, 0);
	ev_expect(ev_run(f, EV_N(f), 4, EVICT_FIFO), 0, 0);
	ev_expect(ev_run(f, EV_N(f), 4, EVICT_LRU), 0, 0);
}

Test(evict, only_minimal_right_windows_are_candidates)
{
	/* [0,1] would have s = 1 + FAR, but the candidate for i = 0 is [0,0]. */
	evict_frag_t f[] = { ev_ext(10, 0, 1, 1), ev_ext(10, 0, EVICT_FAR, 2) };
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_SCORE);

	ev_expect(c, 1, 1);
	cr_expect_eq(c.s, EVICT_FAR);
}

Test(evict, excluded_fragment_never_in_window)
{
	evict_frag_t f[] = {
		ev_ext(4, 0, EVICT_FAR, 1), ev_ext(4, INFINITY, EVICT_FAR, 2),
		ev_ext(4, 2, 1, 3), ev_ext(4, 2, 1, 4),
	};
	/* The p=0 fragment alone is too small and its window crosses the excluded one. */
	evict_choice_t c = ev_run(f, EV_N(f), 8, EVICT_SCORE);

	ev_expect(c, 2, 3);
	cr_expect_eq(c.p, 2.0);
	cr_expect_eq(c.s, 2);
	cr_expect_eq(c.evict_bytes, 8);
}

Test(evict, excluded_resets_window_in_every_policy)
{
	/* The better windows lie after the excluded fragment. */
	evict_frag_t f[] = {
		ev_ext(4, 1, 1, 5), ev_ext(4, 1, 1, 6), ev_ext(4, INFINITY, 1, 0),
		ev_ext(4, 0, 1, 1), ev_ext(4, 0, 1, 2),
	};

	ev_expect(ev_run(f, EV_N(f), 8, EVICT_SCORE), 3, 4);
	ev_expect(ev_run(f, EV_N(f), 8, EVICT_FIFO), 3, 4);
	ev_expect(ev_run(f, EV_N(f), 8, EVICT_LRU), 3, 4);
	cr_expect_not(ev_run(f, EV_N(f), 12, EVICT_SCORE).found);
	cr_expect_not(ev_run(f, EV_N(f), 12, EVICT_FIFO).found);
	cr_expect_not(ev_run(f, EV_N(f), 12, EVICT_LRU).found);
}

Test(evict, not_found_when_nothing_fits)
{
	evict_frag_t f[] = {
		ev_ext(4, 0, 1, 1), ev_ext(4, INFINITY, 1, 2), ev_gap(4), ev_ext(4, 0, 1, 3),
	};
	evict_choice_t c;

	c = ev_run(f, EV_N(f), 9, EVICT_SCORE);
	cr_expect_not(c.found);
	c = ev_run(f, EV_N(f), 100, EVICT_FIFO);
	cr_expect_not(c.found);
	cr_expect_eq(c.first, 0);
	cr_expect_eq(c.last, 0);
	cr_expect_eq(c.evict_bytes, 0);
	c = ev_run(f, 0, 1, EVICT_LRU);
	cr_expect_not(c.found);
	c = ev_run(f, EV_N(f), 8, EVICT_LRU);
	ev_expect(c, 2, 3);
}

Test(evict, all_excluded)
{
	evict_frag_t f[] = { ev_ext(4, INFINITY, 1, 1), ev_ext(4, INFINITY, 1, 2) };

	cr_expect_not(ev_run(f, EV_N(f), 1, EVICT_SCORE).found);
	cr_expect_not(ev_run(f, EV_N(f), 0, EVICT_FIFO).found);
}

Test(evict, zero_need_picks_a_single_fragment)
{
	evict_frag_t f[] = { ev_ext(4, 1, 1, 1), ev_gap(4), ev_ext(4, 0, 1, 2) };
	evict_choice_t c = ev_run(f, EV_N(f), 0, EVICT_SCORE);

	/* Gap and [2] both have p 0; the gap has s FAR. */
	ev_expect(c, 1, 1);
	cr_expect_eq(c.evict_bytes, 0);
}

Test(evict, fifo_prefers_oldest_even_when_slower)
{
	evict_frag_t f[] = {
		ev_ext(10, 0, EVICT_FAR, 7), ev_ext(10, 2, 1, 3), ev_ext(10, 0, EVICT_FAR, 5),
	};
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_FIFO);

	ev_expect(c, 1, 1);
	cr_expect_eq(c.p, 2.0);
	cr_expect_eq(c.s, 1);
	cr_expect_eq(ev_run(f, EV_N(f), 10, EVICT_SCORE).first, 0);
}

Test(evict, fifo_window_age_is_the_maximum)
{
	/* [0,1] max 9; [1,2] max 4; [2,3] max 8. */
	evict_frag_t f[] = {
		ev_ext(5, 0, 1, 9), ev_ext(5, 0, 1, 1), ev_ext(5, 0, 1, 4), ev_ext(5, 0, 1, 8),
	};

	ev_expect(ev_run(f, EV_N(f), 10, EVICT_FIFO), 1, 2);
}

Test(evict, fifo_gaps_have_age_zero)
{
	evict_frag_t f[] = { ev_ext(5, 0, 1, 3), ev_gap(5), ev_ext(5, 0, 1, 2), ev_ext(5, 0, 1, 4) };
	/* [0,1] max 3 ev 5; [1,2] max 2 ev 5; [2,3] max 4. */
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_FIFO);

	ev_expect(c, 1, 2);
	cr_expect_eq(c.evict_bytes, 5);
}

Test(evict, fifo_age_tie_broken_by_evict_bytes_then_p)
{
	evict_frag_t f[] = {
		ev_ext(10, 0, 1, 5), ev_gap(6), ev_ext(4, 1, 1, 5), ev_ext(10, 0.5, 1, 5),
	};
	/* need 10: [0,0] ev 10 p 0; [1,2] ev 4 p 1; [2,3] ev 14; [3,3] ev 10 p .5 */
	evict_choice_t c = ev_run(f, EV_N(f), 10, EVICT_FIFO);

	ev_expect(c, 1, 2);
	cr_expect_eq(c.evict_bytes, 4);
	cr_expect_eq(c.p, 1.0);

	/* Remove the gap advantage: [0,0] and [3,3] tie on age and bytes; p decides. */
	f[1].gap = false;
	f[1].len = 6;
	f[1].age = 6;
	f[0].p = 2;
	c = ev_run(f, EV_N(f), 10, EVICT_FIFO);
	ev_expect(c, 3, 3);
	cr_expect_eq(c.p, 0.5);
}

Test(evict, lru_uses_last_access)
{
	evict_frag_t f[] = {
		ev_ext(8, 0, EVICT_FAR, 40), ev_ext(8, 0.5, 2, 12), ev_ext(8, 0, EVICT_FAR, 30),
		ev_ext(8, INFINITY, EVICT_FAR, 1),
	};
	evict_choice_t c = ev_run(f, EV_N(f), 8, EVICT_LRU);

	ev_expect(c, 1, 1);
	cr_expect_eq(c.p, 0.5);
	cr_expect_eq(c.s, 2);
	c = ev_run(f, EV_N(f), 16, EVICT_LRU);
	/* [0,1] max 40; [1,2] max 30; [2,3] crosses the excluded one. */
	ev_expect(c, 1, 2);
}

Test(evict, lru_full_tie_lowest_index)
{
	evict_frag_t f[] = { ev_gap(8), ev_ext(8, 0, 1, 3), ev_gap(8) };
	evict_choice_t c = ev_run(f, EV_N(f), 8, EVICT_LRU);

	ev_expect(c, 0, 0);
}

Test(evict, bad_arguments)
{
	evict_frag_t f[] = { ev_ext(8, 0, 1, 1) };
	evict_choice_t c;

	cr_expect_eq(evict_choose(NULL, 1, 8, EVICT_SCORE, &c), -EINVAL);
	cr_expect_eq(evict_choose(f, 1, 8, EVICT_SCORE, NULL), -EINVAL);
	cr_expect_eq(evict_choose(f, 1, 8, (evict_policy_t)7, &c), -EINVAL);
	cr_expect_eq(evict_choose(NULL, 0, 8, EVICT_SCORE, &c), 0);
	cr_expect_not(c.found);
}

Test(evict, large_table_uses_heap_path)
{
	enum { N = 1000 };
	evict_frag_t *f = calloc(N, sizeof(*f));
	evict_choice_t c;

	cr_assert_not_null(f);
	for (size_t i = 0; i < N; i++)
		f[i] = ev_ext(4, (i % 7) ? 1 : INFINITY, i % 5, i + 1);
	f[600].p = 0;
	f[601].p = 0;
	f[601].s = 100;
	c = ev_run(f, N, 8, EVICT_SCORE);
	ev_expect(c, 600, 601);
	cr_expect_eq(c.p, 0.0);
	cr_expect_eq(c.s, 600 % 5 + 100);
	c = ev_run(f, N, 8, EVICT_FIFO);
	ev_expect(c, 1, 2);
	free(f);
}

/* ---- property test ---- */

static uint64_t ev_rng(uint64_t *st)
{
	uint64_t z = (*st += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t ev_below(uint64_t *st, uint64_t n)
{
	return ev_rng(st) % n;
}

typedef struct ev_key {
	double p;
	uint64_t s, ev, age;
} ev_key_t;

/* Literal reading of the definition: every i, its minimal j, then ranking. */
static evict_choice_t ev_brute(const evict_frag_t *f, size_t n, uint64_t need, evict_policy_t pol)
{
	evict_choice_t best = { 0 };
	ev_key_t bk = { 0 };

	for (size_t i = 0; i < n; i++) {
		uint64_t sum = 0;
		size_t j;
		bool have = false, excluded = false;
		ev_key_t k = { .p = 0, .s = 0, .ev = 0, .age = 0 };
		bool better;

		for (j = i; j < n; j++) {
			sum += f[j].len;
			if (sum >= need) {
				have = true;
				break;
			}
		}
		if (!have)
			continue;
		for (size_t m = i; m <= j; m++) {
			if (f[m].p == INFINITY)
				excluded = true;
			if (m == i || f[m].p > k.p)
				k.p = f[m].p;
			if (m == i || f[m].age > k.age)
				k.age = f[m].age;
			k.s += f[m].s;
			if (!f[m].gap)
				k.ev += f[m].len;
		}
		if (excluded)
			continue;
		if (!best.found) {
			better = true;
		} else if (pol == EVICT_SCORE) {
			better = k.p < bk.p ||
				 (k.p == bk.p && (k.s > bk.s || (k.s == bk.s && k.ev < bk.ev)));
		} else {
			better = k.age < bk.age ||
				 (k.age == bk.age && (k.ev < bk.ev || (k.ev == bk.ev && k.p < bk.p)));
		}
		if (better) {
			bk = k;
			best = (evict_choice_t){
				.found = true, .first = i, .last = j,
				.p = k.p, .s = k.s, .evict_bytes = k.ev,
			};
		}
	}
	return best;
}

static void ev_random_table(uint64_t *st, evict_frag_t *f, size_t n)
{
	static const double ps[] = { 0, 0.5, 1, 2, INFINITY };
	static const uint64_t ss[] = { 0, 1, 2, 3, 5, EVICT_FAR };
	unsigned gap_pct = (unsigned)ev_below(st, 60);
	unsigned inf_pct = (unsigned)ev_below(st, 40);
	bool unique_age = ev_below(st, 2);
	uint64_t lenmax = ev_below(st, 3) == 0 ? 4 : 32;

	for (size_t i = 0; i < n; i++) {
		uint64_t len = 1 + ev_below(st, lenmax);

		if (ev_below(st, 100) < gap_pct) {
			f[i] = ev_gap(len);
			continue;
		}
		f[i].len = len;
		f[i].gap = false;
		if (ev_below(st, 100) < inf_pct)
			f[i].p = INFINITY;
		else
			f[i].p = ps[ev_below(st, 4)];
		f[i].s = ss[ev_below(st, EV_N(ss))];
		f[i].age = unique_age ? 1 + ev_below(st, 1000000) : 1 + ev_below(st, 6);
	}
}

static const char *ev_pol_name(evict_policy_t pol)
{
	return pol == EVICT_SCORE ? "score" : pol == EVICT_FIFO ? "fifo" : "lru";
}

Test(evict, property_matches_brute_force)
{
	static const evict_policy_t pols[] = { EVICT_SCORE, EVICT_FIFO, EVICT_LRU };
	evict_frag_t f[EV_PROP_MAXN];
	uint64_t st = EV_PROP_SEED;
	unsigned found[3] = { 0 }, missing[3] = { 0 };

	for (unsigned t = 0; t < EV_PROP_TABLES; t++) {
		size_t n = 1 + ev_below(&st, EV_PROP_MAXN);
		uint64_t total = 0, need;

		ev_random_table(&st, f, n);
		for (size_t i = 0; i < n; i++)
			total += f[i].len;
		switch (ev_below(&st, 4)) {
		case 0:
			need = ev_below(&st, 40);
			break;
		case 1:
			need = total + 1 + ev_below(&st, 8);
			break;
		default:
			need = ev_below(&st, total + 2);
			break;
		}
		for (size_t k = 0; k < EV_N(pols); k++) {
			evict_choice_t want = ev_brute(f, n, need, pols[k]);
			evict_choice_t got;
			int rc = evict_choose(f, n, need, pols[k], &got);

			cr_assert_eq(rc, 0, "seed %#" PRIx64 " table %u policy %s: rc %d",
				     EV_PROP_SEED, t, ev_pol_name(pols[k]), rc);
			cr_assert_eq(got.found, want.found,
				     "seed %#" PRIx64 " table %u n %zu need %" PRIu64 " policy %s: found %d, brute %d",
				     EV_PROP_SEED, t, n, need, ev_pol_name(pols[k]), got.found, want.found);
			if (!want.found) {
				missing[k]++;
				continue;
			}
			found[k]++;
			cr_assert(got.first == want.first && got.last == want.last &&
				  got.p == want.p && got.s == want.s &&
				  got.evict_bytes == want.evict_bytes,
				  "seed %#" PRIx64 " table %u n %zu need %" PRIu64 " policy %s: "
				  "got [%zu,%zu] p %g s %" PRIu64 " ev %" PRIu64 ", "
				  "brute [%zu,%zu] p %g s %" PRIu64 " ev %" PRIu64,
				  EV_PROP_SEED, t, n, need, ev_pol_name(pols[k]),
				  got.first, got.last, got.p, got.s, got.evict_bytes,
				  want.first, want.last, want.p, want.s, want.evict_bytes);
			for (size_t m = got.first; m <= got.last; m++)
				cr_assert(f[m].p != INFINITY,
					  "seed %#" PRIx64 " table %u policy %s: window holds excluded fragment %zu",
					  EV_PROP_SEED, t, ev_pol_name(pols[k]), m);
		}
	}
	/* The generator must exercise both outcomes, or the test proves little. */
	for (size_t k = 0; k < EV_N(pols); k++) {
		cr_expect_gt(found[k], EV_PROP_TABLES / 4, "policy %s: only %u found",
			     ev_pol_name(pols[k]), found[k]);
		cr_expect_gt(missing[k], EV_PROP_TABLES / 20, "policy %s: only %u not found",
			     ev_pol_name(pols[k]), missing[k]);
	}
}
