/* Tests of the arena fragment table: every operation by hand, then random
 * operation sequences checked against a shadow model that records the owner
 * of every alignment unit. */
#include "config.h"

#include "arena.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define AR_SEED UINT64_C(0xa7e4a0c4c0ffee17)
#define AR_SEQUENCES 10000
#define AR_MAX_UNITS 160
#define AR_MAX_OPS 64
#define AR_MAX_OWNERS (AR_MAX_UNITS + AR_MAX_OPS + 1)

/* Owners are addresses inside this array, so an owner maps back to an id. */
static char ar_tokens[AR_MAX_OWNERS];

static void *ar_owner(unsigned id)
{
	return &ar_tokens[id];
}

static unsigned ar_id(const void *owner)
{
	return owner ? (unsigned)((const char *)owner - ar_tokens) : 0;
}

typedef struct ar_drops {
	unsigned n;
	unsigned id[AR_MAX_OWNERS];
} ar_drops_t;

static void ar_drop(void *owner, void *ctx)
{
	ar_drops_t *d = ctx;

	cr_assert_not_null(owner, "drop called for a gap");
	cr_assert_lt(d->n, AR_MAX_OWNERS);
	d->id[d->n++] = ar_id(owner);
}

static arena_t ar_new(uint64_t capacity, uint64_t align)
{
	arena_t a;
	int rc = arena_init(&a, capacity, align);

	cr_assert_eq(rc, 0, "arena_init(%" PRIu64 ", %" PRIu64 ") = %d", capacity, align, rc);
	cr_assert(arena_check(&a));
	return a;
}

static ssize_t ar_take(arena_t *a, uint64_t len, unsigned id)
{
	ssize_t g = arena_find_gap(a, len);
	ssize_t r;

	cr_assert_geq(g, 0, "no gap for %" PRIu64, len);
	r = arena_take(a, (size_t)g, len, ar_owner(id));
	cr_assert_eq(r, g, "arena_take returned %zd", r);
	cr_assert(arena_check(a));
	return r;
}

static void ar_expect_frag(const arena_t *a, size_t i, uint64_t off, uint64_t len, unsigned id)
{
	cr_assert_lt(i, a->nfrag, "fragment %zu missing (nfrag %zu)", i, a->nfrag);
	cr_expect_eq(a->frag[i].off, off, "frag %zu off %" PRIu64 ", expected %" PRIu64, i, a->frag[i].off, off);
	cr_expect_eq(a->frag[i].len, len, "frag %zu len %" PRIu64 ", expected %" PRIu64, i, a->frag[i].len, len);
	cr_expect_eq(ar_id(a->frag[i].owner), id, "frag %zu owner %u, expected %u", i, ar_id(a->frag[i].owner), id);
}

Test(arena, init_and_rounding)
{
	arena_t a;

	cr_expect_eq(arena_init(&a, 1000, 0), -EINVAL);
	cr_expect_eq(arena_init(&a, 1000, 48), -EINVAL);
	cr_expect_eq(arena_init(&a, 100, 128), -EINVAL);
	cr_expect_eq(arena_init(&a, 0, 1), -EINVAL);

	a = ar_new(1000, 64);
	cr_expect_eq(a.capacity, 960);
	cr_expect_eq(a.align, 64);
	cr_expect_eq(a.used, 0);
	cr_expect_eq(a.nfrag, 1);
	ar_expect_frag(&a, 0, 0, 960, 0);
	cr_expect_eq(arena_round(&a, 0), 0);
	cr_expect_eq(arena_round(&a, 1), 64);
	cr_expect_eq(arena_round(&a, 64), 64);
	cr_expect_eq(arena_round(&a, 65), 128);
	cr_expect_eq(arena_round(&a, UINT64_MAX), UINT64_MAX);
	cr_expect_eq(arena_round(&a, UINT64_MAX - 10), UINT64_MAX);
	cr_expect_eq(arena_round(&a, UINT64_MAX - 100), UINT64_MAX - 63);
	cr_expect_eq(arena_find_gap(&a, UINT64_MAX), -1);
	arena_fini(&a);
	cr_expect_null(a.frag);
	cr_expect_eq(a.nfrag, 0);

	a = ar_new(4096, 1);
	cr_expect_eq(a.capacity, 4096);
	cr_expect_eq(arena_round(&a, 17), 17);
	arena_fini(&a);
}

Test(arena, take_splits_and_rounds)
{
	arena_t a = ar_new(1024, 64);

	cr_expect_eq(ar_take(&a, 100, 1), 0);
	ar_expect_frag(&a, 0, 0, 128, 1);
	ar_expect_frag(&a, 1, 128, 896, 0);
	cr_expect_eq(a.used, 128);
	cr_expect_eq(a.nfrag, 2);

	cr_expect_eq(arena_take(&a, 1, 896, ar_owner(2)), 1);
	cr_expect_eq(a.nfrag, 2, "taking a whole gap must not split it");
	ar_expect_frag(&a, 1, 128, 896, 2);
	cr_expect_eq(a.used, 1024);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, take_rejects)
{
	arena_t a = ar_new(1024, 64);

	cr_expect_eq(arena_take(&a, 0, 1025, ar_owner(1)), -EINVAL);
	cr_expect_eq(arena_take(&a, 0, 1000, ar_owner(1)), 0, "1000 rounds to 1024: fits");
	cr_expect_eq(a.used, 1024);
	cr_expect_eq(arena_release(&a, 0), 0);
	cr_expect_eq(a.used, 0);
	cr_expect_eq(arena_take(&a, 0, 0, ar_owner(1)), -EINVAL);
	cr_expect_eq(arena_take(&a, 0, 64, NULL), -EINVAL);
	cr_expect_eq(arena_take(&a, 1, 64, ar_owner(1)), -EINVAL);
	cr_expect_eq(arena_take(&a, 0, 64, ar_owner(1)), 0);
	cr_expect_eq(arena_take(&a, 0, 64, ar_owner(2)), -EINVAL, "an extent is not a gap");
	cr_expect_eq(arena_take(&a, 1, 961, ar_owner(2)), -EINVAL);
	cr_expect_eq(a.used, 64);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, take_too_small_after_rounding)
{
	arena_t a = ar_new(1024, 64);

	cr_assert_eq(arena_take(&a, 0, 960, ar_owner(1)), 0);
	/* The remaining gap is 64 bytes; 65 bytes round to 128. */
	cr_expect_eq(arena_take(&a, 1, 65, ar_owner(2)), -EINVAL);
	cr_expect_eq(arena_find_gap(&a, 65), -1);
	cr_expect_eq(arena_find_gap(&a, 64), 1);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, release_coalesces_both_sides)
{
	arena_t a = ar_new(64 * 10, 64);
	size_t r;

	ar_take(&a, 64, 1);
	ar_take(&a, 128, 2);
	ar_take(&a, 64, 3);
	ar_take(&a, 64, 4);
	/* A(1) B(2,2u) C(3) D(4) gap(5u) */
	cr_assert_eq(a.nfrag, 5);

	r = arena_release(&a, 0);
	cr_expect_eq(r, 0);
	cr_expect_eq(a.nfrag, 5, "no gap neighbour: nothing merges");
	ar_expect_frag(&a, 0, 0, 64, 0);

	r = arena_release(&a, 2);
	cr_expect_eq(r, 2);
	ar_expect_frag(&a, 2, 192, 64, 0);
	cr_expect(arena_check(&a));

	/* B sits between two gaps. */
	r = arena_release(&a, 1);
	cr_expect_eq(r, 0);
	cr_expect_eq(a.nfrag, 3);
	ar_expect_frag(&a, 0, 0, 256, 0);
	ar_expect_frag(&a, 1, 256, 64, 4);
	cr_expect(arena_check(&a));

	r = arena_release(&a, 1);
	cr_expect_eq(r, 0);
	cr_expect_eq(a.nfrag, 1);
	ar_expect_frag(&a, 0, 0, 640, 0);
	cr_expect_eq(a.used, 0);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, release_merges_following_gap_only)
{
	arena_t a = ar_new(64 * 4, 64);

	ar_take(&a, 64, 1);
	ar_take(&a, 64, 2);
	cr_expect_eq(arena_release(&a, 1), 1);
	cr_expect_eq(a.nfrag, 2);
	ar_expect_frag(&a, 1, 64, 192, 0);
	cr_expect_eq(a.used, 64);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, index_of)
{
	arena_t a = ar_new(64 * 8, 64);

	ar_take(&a, 64, 1);
	ar_take(&a, 128, 2);
	ar_take(&a, 64, 3);
	cr_expect_eq(arena_index_of(&a, 0), 0);
	cr_expect_eq(arena_index_of(&a, 64), 1);
	cr_expect_eq(arena_index_of(&a, 192), 2);
	cr_expect_eq(arena_index_of(&a, 256), 3);
	cr_expect_eq(arena_index_of(&a, 128), -1);
	cr_expect_eq(arena_index_of(&a, 100), -1);
	cr_expect_eq(arena_index_of(&a, 512), -1);
	cr_expect_eq(arena_index_of(&a, UINT64_MAX), -1);
	arena_fini(&a);
}

Test(arena, shrink)
{
	arena_t a = ar_new(64 * 16, 64);

	ar_take(&a, 256, 1);
	ar_take(&a, 256, 2);
	/* 1(4u) 2(4u) gap(8u) */
	cr_expect_eq(arena_shrink(&a, 0, 0), -EINVAL);
	cr_expect_eq(arena_shrink(&a, 0, 257), -EINVAL);
	cr_expect_eq(arena_shrink(&a, 2, 64), -EINVAL, "a gap cannot shrink");
	cr_expect_eq(arena_shrink(&a, 9, 64), -EINVAL);
	cr_expect_eq(arena_shrink(&a, 0, 256), 0);
	cr_expect_eq(a.nfrag, 3);

	/* Followed by an extent: the tail becomes a new gap. */
	cr_expect_eq(arena_shrink(&a, 0, 100), 0);
	cr_expect_eq(a.nfrag, 4);
	ar_expect_frag(&a, 0, 0, 128, 1);
	ar_expect_frag(&a, 1, 128, 128, 0);
	ar_expect_frag(&a, 2, 256, 256, 2);
	cr_expect_eq(a.used, 384);
	cr_expect(arena_check(&a));

	/* Followed by a gap: the tail joins it. */
	cr_expect_eq(arena_shrink(&a, 2, 64), 0);
	cr_expect_eq(a.nfrag, 4);
	ar_expect_frag(&a, 2, 256, 64, 2);
	ar_expect_frag(&a, 3, 320, 704, 0);
	cr_expect_eq(a.used, 192);
	cr_expect(arena_check(&a));

	/* Shrinking the extent before a gap that follows a gap cannot create adjacency. */
	cr_expect_eq(arena_shrink(&a, 0, 64), 0);
	ar_expect_frag(&a, 1, 64, 192, 0);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, shrink_never_reallocates)
{
	enum { N = 5000 };
	arena_t a = ar_new(64 * 2 * N, 64);
	const arena_frag_t *table;

	for (unsigned i = 0; i < N; i++)
		cr_assert_eq(arena_take(&a, i, 128, ar_owner(1 + i % 100)), (ssize_t)i);
	cr_assert_eq(a.nfrag, N);
	table = a.frag;
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(arena_shrink(&a, 2 * i, 64), 0);
	cr_expect_eq(a.nfrag, 2 * N);
	cr_expect_eq(a.frag, table, "arena_shrink reallocated the table");
	cr_expect_eq(a.used, 64 * N);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, extend)
{
	arena_t a = ar_new(64 * 16, 64);

	ar_take(&a, 64, 1);
	ar_take(&a, 64, 2);
	/* 1 2 gap(14u) */
	cr_expect_eq(arena_extend(&a, 0, 128), -ENOSPC, "next is an extent");
	cr_expect_eq(arena_extend(&a, 0, 64), 0, "same size is a no-op");
	cr_expect_eq(arena_extend(&a, 0, 1), 0, "rounds to the same size");
	cr_expect_eq(arena_extend(&a, 1, 1), 0);
	cr_expect_eq(arena_extend(&a, 2, 64), -EINVAL, "a gap cannot extend");
	cr_expect_eq(arena_extend(&a, 7, 64), -EINVAL);

	cr_expect_eq(arena_extend(&a, 1, 65), 0);
	ar_expect_frag(&a, 1, 64, 128, 2);
	ar_expect_frag(&a, 2, 192, 832, 0);
	cr_expect_eq(a.used, 192);
	cr_expect_eq(arena_extend(&a, 1, 64), -EINVAL, "use arena_shrink to shrink");
	cr_expect_eq(arena_extend(&a, 1, 128 + 833), -ENOSPC, "gap too small after rounding");
	cr_expect(arena_check(&a));

	/* Filling the gap exactly removes it; then nothing follows. */
	cr_expect_eq(arena_extend(&a, 1, 960), 0);
	cr_expect_eq(a.nfrag, 2);
	ar_expect_frag(&a, 1, 64, 960, 2);
	cr_expect_eq(a.used, 1024);
	cr_expect_eq(arena_extend(&a, 1, 1024), -ENOSPC, "last fragment has no following gap");
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

static size_t ar_build_row(arena_t *a, const unsigned *ids, size_t n)
{
	/* One unit per entry; id 0 leaves a gap. */
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(arena_take(a, i, a->align, ar_owner(ids[i] ? ids[i] : 99)), (ssize_t)i);
	for (size_t i = n; i-- > 0;)
		if (!ids[i])
			arena_release(a, i);
	cr_assert(arena_check(a));
	return a->nfrag;
}

Test(arena, evict_window_drops_and_coalesces)
{
	/* 1 gap 2 3 4 gap 5 | tail gap */
	static const unsigned ids[] = { 1, 0, 2, 3, 4, 0, 5 };
	arena_t a = ar_new(64 * 10, 64);
	ar_drops_t d = { 0 };
	size_t r;

	ar_build_row(&a, ids, 7);
	cr_assert_eq(a.nfrag, 8);

	/* Window [2,3] (extents 2, 3): gap before merges, extent 4 after stays. */
	r = arena_evict_window(&a, 2, 3, ar_drop, &d);
	cr_expect_eq(r, 1);
	cr_expect_eq(d.n, 2);
	cr_expect_eq(d.id[0], 2);
	cr_expect_eq(d.id[1], 3);
	ar_expect_frag(&a, 1, 64, 192, 0);
	ar_expect_frag(&a, 2, 256, 64, 4);
	cr_expect_eq(a.used, 64 * 3);
	cr_expect(arena_check(&a));

	/* Window [2,2] (extent 4): gaps on both sides merge. */
	d.n = 0;
	r = arena_evict_window(&a, 2, 2, ar_drop, &d);
	cr_expect_eq(r, 1);
	cr_expect_eq(d.n, 1);
	cr_expect_eq(d.id[0], 4);
	ar_expect_frag(&a, 1, 64, 320, 0);
	ar_expect_frag(&a, 2, 384, 64, 5);
	cr_expect(arena_check(&a));

	/* A window holding only gaps and extents from both ends, no callback. */
	r = arena_evict_window(&a, 0, a.nfrag - 1, NULL, NULL);
	cr_expect_eq(r, 0);
	cr_expect_eq(a.nfrag, 1);
	ar_expect_frag(&a, 0, 0, 640, 0);
	cr_expect_eq(a.used, 0);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, evict_window_of_a_gap_and_following_extents)
{
	static const unsigned ids[] = { 1, 0, 2, 3, 4 };
	arena_t a = ar_new(64 * 5, 64);
	ar_drops_t d = { 0 };
	size_t r;

	ar_build_row(&a, ids, 5);
	cr_assert_eq(a.nfrag, 5);
	r = arena_evict_window(&a, 1, 3, ar_drop, &d);
	cr_expect_eq(r, 1);
	cr_expect_eq(d.n, 2);
	cr_expect_eq(d.id[0], 2);
	cr_expect_eq(d.id[1], 3);
	cr_expect_eq(a.nfrag, 3);
	ar_expect_frag(&a, 0, 0, 64, 1);
	ar_expect_frag(&a, 1, 64, 192, 0);
	ar_expect_frag(&a, 2, 256, 64, 4);
	cr_expect(arena_check(&a));
	arena_fini(&a);
}

Test(arena, find_gap_best_fit)
{
	/* Gaps of 3, 1, 2, 1 and (tail) 4 units. */
	static const unsigned ids[] = { 0, 0, 0, 1, 0, 2, 0, 0, 3, 0, 4 };
	arena_t a = ar_new(64 * 15, 64);

	ar_build_row(&a, ids, 11);
	cr_expect_eq(arena_find_gap(&a, 1), arena_index_of(&a, 64 * 4), "smallest, lowest offset");
	cr_expect_eq(arena_find_gap(&a, 64), arena_index_of(&a, 64 * 4));
	cr_expect_eq(arena_find_gap(&a, 65), arena_index_of(&a, 64 * 6));
	cr_expect_eq(arena_find_gap(&a, 128), arena_index_of(&a, 64 * 6));
	cr_expect_eq(arena_find_gap(&a, 129), arena_index_of(&a, 0));
	cr_expect_eq(arena_find_gap(&a, 192), arena_index_of(&a, 0));
	cr_expect_eq(arena_find_gap(&a, 193), arena_index_of(&a, 64 * 11));
	cr_expect_eq(arena_find_gap(&a, 257), -1);
	cr_expect_eq(arena_find_gap(&a, 0), arena_index_of(&a, 64 * 4));
	arena_fini(&a);

	a = ar_new(128, 64);
	cr_assert_eq(arena_take(&a, 0, 128, ar_owner(1)), 0);
	cr_expect_eq(arena_find_gap(&a, 0), -1, "a full arena has no gap");
	arena_fini(&a);
}

/* ---- randomized sequences against a shadow model ---- */

static uint64_t ar_rng(uint64_t *st)
{
	uint64_t z = (*st += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t ar_below(uint64_t *st, uint64_t n)
{
	return ar_rng(st) % n;
}

typedef struct ar_model {
	unsigned units;
	uint64_t align;
	unsigned owner[AR_MAX_UNITS]; /* id per unit; 0 = free */
	unsigned next_id;
	unsigned seq, op;
	uint64_t peak; /* the most used after any operation */
} ar_model_t;

#define AR_CTX "seed %#" PRIx64 " sequence %u op %u: "
#define AR_CTX_ARGS(m) AR_SEED, (m)->seq, (m)->op

/* The arena must describe exactly the model: one fragment per maximal run. */
static void ar_compare(const arena_t *a, ar_model_t *m)
{
	uint64_t used = 0;

	cr_assert(arena_check(a), AR_CTX "arena_check failed", AR_CTX_ARGS(m));
	cr_assert_eq(a->capacity, m->units * m->align, AR_CTX "capacity", AR_CTX_ARGS(m));
	for (size_t i = 0; i < a->nfrag; i++) {
		const arena_frag_t *f = &a->frag[i];
		unsigned u0 = (unsigned)(f->off / m->align);
		unsigned u1 = (unsigned)((f->off + f->len) / m->align);
		unsigned id = ar_id(f->owner);

		for (unsigned u = u0; u < u1; u++)
			cr_assert_eq(m->owner[u], id, AR_CTX "unit %u owner %u, arena says %u",
				     AR_CTX_ARGS(m), u, m->owner[u], id);
		cr_assert(u0 == 0 || m->owner[u0 - 1] != id,
			  AR_CTX "fragment %zu is not a maximal run", AR_CTX_ARGS(m), i);
		if (id)
			used += f->len;
	}
	cr_assert_eq(a->used, used, AR_CTX "used", AR_CTX_ARGS(m));
	used = 0;
	for (unsigned u = 0; u < m->units; u++)
		used += m->owner[u] ? m->align : 0;
	cr_assert_eq(a->used, used, AR_CTX "used %" PRIu64 ", model %" PRIu64,
		     AR_CTX_ARGS(m), a->used, used);
	if (used > m->peak)
		m->peak = used;
	cr_assert_eq(a->peak, m->peak, AR_CTX "peak %" PRIu64 ", model %" PRIu64, AR_CTX_ARGS(m),
		     a->peak, m->peak);
}

/* A random length in bytes of about `units` units, not always aligned. */
static uint64_t ar_rand_len(uint64_t *st, const ar_model_t *m, unsigned units)
{
	if (units == 0)
		return 0;
	if (m->align == 1 || ar_below(st, 2))
		return (uint64_t)units * m->align;
	return (uint64_t)(units - 1) * m->align + 1 + ar_below(st, m->align - 1);
}

static ssize_t ar_model_best_gap(const ar_model_t *m, unsigned want, unsigned *off)
{
	unsigned best_len = 0, best_off = 0;
	bool have = false;

	for (unsigned u = 0; u < m->units;) {
		unsigned v = u;

		if (m->owner[u]) {
			u++;
			continue;
		}
		while (v < m->units && !m->owner[v])
			v++;
		if (v - u >= want && (!have || v - u < best_len)) {
			have = true;
			best_len = v - u;
			best_off = u;
		}
		u = v;
	}
	*off = best_off;
	return have ? 0 : -1;
}

static size_t ar_pick(uint64_t *st, const arena_t *a, int want_extent)
{
	size_t cand[2 * AR_MAX_UNITS + 2], n = 0;

	for (size_t i = 0; i < a->nfrag; i++)
		if (want_extent < 0 || (a->frag[i].owner != NULL) == (want_extent > 0))
			cand[n++] = i;
	return n ? cand[ar_below(st, n)] : SIZE_MAX;
}

static void ar_op_take(uint64_t *st, arena_t *a, ar_model_t *m)
{
	unsigned want = 1 + (unsigned)ar_below(st, ar_below(st, 4) ? 8 : m->units);
	uint64_t len = ar_rand_len(st, m, want);
	unsigned id = m->next_id;
	uint64_t glen;
	size_t gi;
	ssize_t r;

	if (ar_below(st, 2)) {
		unsigned off;
		ssize_t g = arena_find_gap(a, len);

		if (ar_model_best_gap(m, want, &off) < 0) {
			cr_assert_eq(g, -1, AR_CTX "find_gap(%" PRIu64 ") found %zd, model none",
				     AR_CTX_ARGS(m), len, g);
			return;
		}
		cr_assert_geq(g, 0, AR_CTX "find_gap(%" PRIu64 ") found none", AR_CTX_ARGS(m), len);
		cr_assert_eq(a->frag[g].off, off * m->align, AR_CTX "find_gap not best fit",
			     AR_CTX_ARGS(m));
		gi = (size_t)g;
	} else {
		gi = ar_pick(st, a, 0);
		if (gi == SIZE_MAX)
			return;
	}
	glen = a->frag[gi].len;
	r = arena_take(a, gi, len, ar_owner(id));
	if (glen < (uint64_t)want * m->align) {
		cr_assert_eq(r, -EINVAL, AR_CTX "take into too small gap returned %zd", AR_CTX_ARGS(m), r);
		return;
	}
	cr_assert_eq(r, (ssize_t)gi, AR_CTX "take returned %zd", AR_CTX_ARGS(m), r);
	for (unsigned u = 0; u < want; u++)
		m->owner[a->frag[gi].off / m->align + u] = id;
	m->next_id++;
}

static void ar_op_release(uint64_t *st, arena_t *a, ar_model_t *m)
{
	size_t i = ar_pick(st, a, 1), r;
	uint64_t off, end;

	if (i == SIZE_MAX)
		return;
	off = a->frag[i].off;
	end = off + a->frag[i].len;
	for (uint64_t u = off / m->align; u < end / m->align; u++)
		m->owner[u] = 0;
	r = arena_release(a, i);
	cr_assert_lt(r, a->nfrag, AR_CTX "release index", AR_CTX_ARGS(m));
	cr_assert(a->frag[r].owner == NULL && a->frag[r].off <= off &&
		  a->frag[r].off + a->frag[r].len >= end,
		  AR_CTX "release did not return the covering gap", AR_CTX_ARGS(m));
}

static void ar_op_shrink(uint64_t *st, arena_t *a, ar_model_t *m)
{
	size_t i = ar_pick(st, a, ar_below(st, 10) ? 1 : -1);
	unsigned cur, keep;
	uint64_t newlen;
	int rc;

	if (i == SIZE_MAX)
		return;
	cur = (unsigned)(a->frag[i].len / m->align);
	keep = (unsigned)ar_below(st, cur + 2);
	newlen = ar_rand_len(st, m, keep);
	rc = arena_shrink(a, i, newlen);
	if (!a->frag[i].owner || keep == 0 || keep > cur) {
		cr_assert_eq(rc, -EINVAL, AR_CTX "shrink(%u of %u units) returned %d",
			     AR_CTX_ARGS(m), keep, cur, rc);
		return;
	}
	cr_assert_eq(rc, 0, AR_CTX "shrink returned %d", AR_CTX_ARGS(m), rc);
	for (unsigned u = keep; u < cur; u++)
		m->owner[a->frag[i].off / m->align + u] = 0;
}

static void ar_op_extend(uint64_t *st, arena_t *a, ar_model_t *m)
{
	size_t i = ar_pick(st, a, ar_below(st, 10) ? 1 : -1);
	unsigned cur, want, u0, room = 0;
	uint64_t newlen;
	int rc, expect;

	if (i == SIZE_MAX)
		return;
	cur = (unsigned)(a->frag[i].len / m->align);
	u0 = (unsigned)(a->frag[i].off / m->align);
	want = cur + (unsigned)ar_below(st, 6);
	if (want > 0 && ar_below(st, 8) == 0)
		want = (unsigned)ar_below(st, cur);
	newlen = ar_rand_len(st, m, want);
	for (unsigned u = u0 + cur; u < m->units && !m->owner[u]; u++)
		room++;
	if (!a->frag[i].owner || want < cur)
		expect = -EINVAL;
	else if (want - cur > room)
		expect = -ENOSPC;
	else
		expect = 0;
	rc = arena_extend(a, i, newlen);
	cr_assert_eq(rc, expect, AR_CTX "extend(%u -> %u units, room %u) returned %d, expected %d",
		     AR_CTX_ARGS(m), cur, want, room, rc, expect);
	if (rc == 0)
		for (unsigned u = cur; u < want; u++)
			m->owner[u0 + u] = m->owner[u0];
}

static void ar_op_evict(uint64_t *st, arena_t *a, ar_model_t *m)
{
	size_t first = ar_below(st, a->nfrag);
	size_t last = first + ar_below(st, a->nfrag - first < 5 ? a->nfrag - first : 5);
	uint64_t off = a->frag[first].off, end = a->frag[last].off + a->frag[last].len;
	ar_drops_t d = { 0 };
	unsigned expect[AR_MAX_OWNERS], ne = 0;
	size_t r;

	for (size_t i = first; i <= last; i++)
		if (a->frag[i].owner)
			expect[ne++] = ar_id(a->frag[i].owner);
	r = arena_evict_window(a, first, last, ar_drop, &d);
	cr_assert_eq(d.n, ne, AR_CTX "evict_window dropped %u owners, expected %u",
		     AR_CTX_ARGS(m), d.n, ne);
	for (unsigned k = 0; k < ne; k++)
		cr_assert_eq(d.id[k], expect[k], AR_CTX "drop %u", AR_CTX_ARGS(m), k);
	cr_assert_lt(r, a->nfrag, AR_CTX "evict_window index", AR_CTX_ARGS(m));
	cr_assert(a->frag[r].owner == NULL && a->frag[r].off <= off &&
		  a->frag[r].off + a->frag[r].len >= end,
		  AR_CTX "evict_window did not return the covering gap", AR_CTX_ARGS(m));
	for (uint64_t u = off / m->align; u < end / m->align; u++)
		m->owner[u] = 0;
}

static void ar_op_index(uint64_t *st, arena_t *a, ar_model_t *m)
{
	unsigned u = (unsigned)ar_below(st, m->units + 1);
	ssize_t r = arena_index_of(a, (uint64_t)u * m->align);
	bool starts = u < m->units && (u == 0 || m->owner[u] != m->owner[u - 1]);

	if (!starts) {
		cr_assert_eq(r, -1, AR_CTX "index_of(unit %u) = %zd", AR_CTX_ARGS(m), u, r);
		return;
	}
	cr_assert_geq(r, 0, AR_CTX "index_of(unit %u) missing", AR_CTX_ARGS(m), u);
	cr_assert_eq(a->frag[r].off, (uint64_t)u * m->align, AR_CTX "index_of", AR_CTX_ARGS(m));
}

Test(arena, find_gap_in_keeps_to_the_range)
{
	/* Gaps of 3, 1, 2, 1 and (tail) 4 units. */
	static const unsigned ids[] = { 0, 0, 0, 1, 0, 2, 0, 0, 3, 0, 4 };
	arena_t a = ar_new(64 * 15, 64);

	ar_build_row(&a, ids, 11);
	cr_expect_eq(arena_find_gap_in(&a, 1, 64 * 5, 64 * 15), arena_index_of(&a, 64 * 9),
		     "the smallest gap inside the range, not the one before it");
	cr_expect_eq(arena_find_gap_in(&a, 65, 64 * 5, 64 * 15), arena_index_of(&a, 64 * 6));
	cr_expect_eq(arena_find_gap_in(&a, 64, 64 * 5, 64 * 8), arena_index_of(&a, 64 * 6),
		     "a gap ending exactly at the range's end is inside");
	cr_expect_eq(arena_find_gap_in(&a, 64, 64 * 5, 64 * 7), -1,
		     "a gap reaching past the range's end is not offered");
	cr_expect_eq(arena_find_gap_in(&a, 64, 64 * 1, 64 * 3), -1,
		     "a gap starting before the range is not offered");
	cr_expect_eq(arena_find_gap_in(&a, 256, 0, 64 * 15), arena_index_of(&a, 64 * 11));
	cr_expect_eq(arena_find_gap_in(&a, 256, 0, 64 * 14), -1);
	arena_fini(&a);
}

Test(arena, move_start_grows_into_and_gives_back_to_the_gap_before)
{
	arena_t a = ar_new(64 * 10, 64);

	ar_take(&a, 64 * 2, 1);                      /* [0,2) 1, [2,10) gap */
	cr_assert_eq(arena_take(&a, 1, 64 * 8, ar_owner(2)), 1);
	cr_assert_eq(arena_move_start(&a, 1, 64 * 6), 0, "the head goes back as a gap");
	ar_expect_frag(&a, 0, 0, 64 * 2, 1);
	ar_expect_frag(&a, 1, 64 * 2, 64 * 4, 0);
	ar_expect_frag(&a, 2, 64 * 6, 64 * 4, 2);
	cr_expect_eq(a.used, 64 * 6);
	cr_assert(arena_check(&a));

	cr_assert_eq(arena_move_start(&a, 2, 64 * 7), 0, "a later start joins the gap before");
	ar_expect_frag(&a, 1, 64 * 2, 64 * 5, 0);
	ar_expect_frag(&a, 2, 64 * 7, 64 * 3, 2);
	cr_assert(arena_check(&a));

	cr_expect_eq(arena_move_start(&a, 2, 64 * 1), -ENOSPC, "not past the gap before");
	cr_expect_eq(arena_move_start(&a, 2, 64 * 10), -EINVAL, "not at or past its end");
	cr_expect_eq(arena_move_start(&a, 2, 64 * 3 + 1), -EINVAL, "aligned only");
	cr_expect_eq(arena_move_start(&a, 1, 64 * 3), -EINVAL, "extents only");
	ar_expect_frag(&a, 2, 64 * 7, 64 * 3, 2);
	cr_assert(arena_check(&a), "unchanged by the refusals");

	cr_assert_eq(arena_move_start(&a, 2, 64 * 4), 0, "an earlier start takes from the gap");
	ar_expect_frag(&a, 1, 64 * 2, 64 * 2, 0);
	ar_expect_frag(&a, 2, 64 * 4, 64 * 6, 2);
	cr_assert_eq(arena_move_start(&a, 2, 64 * 2), 0, "the whole gap");
	cr_expect_eq(a.nfrag, 2, "the emptied gap is gone");
	ar_expect_frag(&a, 1, 64 * 2, 64 * 8, 2);
	cr_expect_eq(a.used, 64 * 10);
	cr_assert(arena_check(&a));

	cr_expect_eq(arena_move_start(&a, 1, 64 * 1), -ENOSPC, "no gap before it");
	cr_assert_eq(arena_move_start(&a, 1, 64 * 5), 0, "a head after an extent becomes a new gap");
	ar_expect_frag(&a, 0, 0, 64 * 2, 1);
	ar_expect_frag(&a, 1, 64 * 2, 64 * 3, 0);
	ar_expect_frag(&a, 2, 64 * 5, 64 * 5, 2);
	cr_expect_eq(a.used, 64 * 7);
	cr_assert(arena_check(&a));
	arena_fini(&a);
}

Test(arena, random_sequences_match_model)
{
	static const uint64_t aligns[] = { 1, 8, 64, 4096 };
	uint64_t st = AR_SEED;
	ar_model_t m;
	unsigned long ops = 0, max_nfrag = 0;

	for (unsigned seq = 0; seq < AR_SEQUENCES; seq++) {
		arena_t a;
		unsigned nops = 1 + (unsigned)ar_below(&st, AR_MAX_OPS);

		memset(&m, 0, sizeof(m));
		m.seq = seq;
		m.next_id = 1;
		m.units = 1 + (unsigned)ar_below(&st, ar_below(&st, 4) ? 40 : AR_MAX_UNITS);
		m.align = aligns[ar_below(&st, 4)];
		cr_assert_eq(arena_init(&a, m.units * m.align + ar_below(&st, m.align), m.align), 0);
		ar_compare(&a, &m);
		/* Some sequences start packed with one-unit extents. */
		if (ar_below(&st, 4) == 0) {
			for (unsigned u = 0; u < m.units; u++) {
				cr_assert_eq(arena_take(&a, u, 1, ar_owner(m.next_id)), (ssize_t)u);
				m.owner[u] = m.next_id++;
			}
			ar_compare(&a, &m);
		}
		for (m.op = 0; m.op < nops; m.op++) {
			switch (ar_below(&st, 12)) {
			case 0: case 1: case 2: case 3:
				ar_op_take(&st, &a, &m);
				break;
			case 4: case 5:
				ar_op_release(&st, &a, &m);
				break;
			case 6: case 7:
				ar_op_shrink(&st, &a, &m);
				break;
			case 8: case 9:
				ar_op_extend(&st, &a, &m);
				break;
			case 10:
				ar_op_evict(&st, &a, &m);
				break;
			default:
				ar_op_index(&st, &a, &m);
				break;
			}
			ar_compare(&a, &m);
			ops++;
			if (a.nfrag > max_nfrag)
				max_nfrag = a.nfrag;
		}
		arena_fini(&a);
	}
	cr_expect_gt(ops, AR_SEQUENCES * 10UL);
	cr_expect_gt(max_nfrag, 32, "sequences never grew the table (max %lu)", max_nfrag);
}

Test(arena, resize_grows_and_shrinks_only_over_free_room)
{
	arena_t a = ar_new(64 * 4096, 4096);

	cr_assert_eq(arena_busy_end(&a), 0);
	ar_take(&a, 8 * 4096, 1);
	/* grow: the trailing gap gets longer */
	cr_assert_eq(arena_resize(&a, 128 * 4096), 0);
	cr_assert(arena_check(&a));
	cr_expect_eq(a.capacity, 128 * 4096);
	ar_expect_frag(&a, 1, 8 * 4096, 120 * 4096, 0);
	/* shrink into the gap: allowed */
	cr_assert_eq(arena_resize(&a, 16 * 4096 + 100), 0);
	cr_assert(arena_check(&a));
	cr_expect_eq(a.capacity, 16 * 4096);
	/* shrink below the extent: refused, unchanged */
	cr_expect_eq(arena_resize(&a, 4 * 4096), -EBUSY);
	cr_expect_eq(a.capacity, 16 * 4096);
	cr_expect_eq(arena_busy_end(&a), 8 * 4096);
	/* shrink exactly to the extent's end: the gap disappears */
	cr_assert_eq(arena_resize(&a, 8 * 4096), 0);
	cr_assert(arena_check(&a));
	cr_expect_eq(a.nfrag, 1);
	cr_expect_eq(arena_busy_end(&a), 8 * 4096);
	/* grow after a full arena: a new gap is appended */
	cr_assert_eq(arena_resize(&a, 12 * 4096), 0);
	cr_assert(arena_check(&a));
	ar_expect_frag(&a, 1, 8 * 4096, 4 * 4096, 0);
	cr_expect_eq(arena_resize(&a, 100), -EINVAL);
	ar_take(&a, 4 * 4096, 2);
	cr_expect_eq(arena_resize(&a, 8 * 4096), -EBUSY);
	arena_fini(&a);
}
