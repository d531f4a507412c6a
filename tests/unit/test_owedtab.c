/* Tests of the owed-range table: overlap lookup, insertion rules, and
 * cutting sub-ranges out of entries (the remainders keep their fields). */
#include <criterion/criterion.h>
#include <errno.h>

#include "owedtab.h"

#define P 4096u

static ckc_owed_t ent(uintptr_t s, uintptr_t e, uintptr_t cap)
{
	ckc_owed_t o = { .start = s, .end = e, .cap_start = cap, .cap_len = e - cap + 16 };
	return o;
}

Test(owedtab, lookup_finds_the_first_overlap_only)
{
	ckc_owedtab_t t = { 0 };
	ckc_owed_t a = ent(10 * P, 20 * P, 10 * P - 16), b = ent(30 * P, 40 * P, 30 * P);

	cr_assert_eq(ckc_owedtab_insert(&t, &b), 0);
	cr_assert_eq(ckc_owedtab_insert(&t, &a), 0);
	cr_assert_eq(t.n, 2);
	cr_expect_eq(t.e[0].start, 10 * P, "sorted by start");
	cr_expect_eq(ckc_owedtab_first(&t, 0, 10 * P), t.n, "touching is not overlapping");
	cr_expect_eq(ckc_owedtab_first(&t, 0, 10 * P + 1), 0);
	cr_expect_eq(ckc_owedtab_first(&t, 20 * P, 30 * P), t.n, "the gap between them");
	cr_expect_eq(ckc_owedtab_first(&t, 19 * P, 31 * P), 0, "first of two");
	cr_expect_eq(ckc_owedtab_first(&t, 25 * P, 35 * P), 1);
	cr_expect_eq(ckc_owedtab_first(&t, 39 * P, 50 * P), 1);
	cr_expect_eq(ckc_owedtab_first(&t, 5 * P, 5 * P), t.n, "empty range");
	ckc_owedtab_free(&t);
}

Test(owedtab, insert_refuses_overlaps_and_empty_ranges)
{
	ckc_owedtab_t t = { 0 };
	ckc_owed_t a = ent(10 * P, 20 * P, 10 * P), o = ent(19 * P, 21 * P, 19 * P),
		   z = ent(5 * P, 5 * P, 5 * P);

	cr_assert_eq(ckc_owedtab_insert(&t, &a), 0);
	cr_expect_eq(ckc_owedtab_insert(&t, &o), -EINVAL);
	cr_expect_eq(ckc_owedtab_insert(&t, &z), -EINVAL);
	cr_expect_eq(t.n, 1);
	ckc_owedtab_free(&t);
}

Test(owedtab, cut_keeps_the_remainders_with_their_fields)
{
	ckc_owedtab_t t = { 0 };
	ckc_owed_t a = ent(10 * P, 20 * P, 10 * P - 100);
	a.pinned = true;

	cr_assert_eq(ckc_owedtab_insert(&t, &a), 0);
	/* the middle: two remainders */
	cr_assert_eq(ckc_owedtab_cut(&t, 0, 12 * P, 14 * P), 2);
	cr_assert_eq(t.n, 2);
	cr_expect_eq(t.e[0].start, 10 * P);
	cr_expect_eq(t.e[0].end, 12 * P);
	cr_expect_eq(t.e[1].start, 14 * P);
	cr_expect_eq(t.e[1].end, 20 * P);
	cr_expect_eq(t.e[1].cap_start, 10 * P - 100, "the reference offset stays right");
	cr_expect(t.e[1].pinned);
	/* the head of the second: one remainder */
	cr_assert_eq(ckc_owedtab_cut(&t, 1, 14 * P, 15 * P), 1);
	cr_expect_eq(t.e[1].start, 15 * P);
	/* the tail of the first */
	cr_assert_eq(ckc_owedtab_cut(&t, 0, 11 * P, 12 * P), 1);
	cr_expect_eq(t.e[0].end, 11 * P);
	/* all of one */
	cr_assert_eq(ckc_owedtab_cut(&t, 0, 10 * P, 11 * P), 0);
	cr_assert_eq(t.n, 1);
	cr_expect_eq(t.e[0].start, 15 * P);
	cr_expect_eq(ckc_owedtab_first(&t, 0, 15 * P), t.n);
	ckc_owedtab_free(&t);
}

Test(owedtab, many_entries_stay_sorted_and_disjoint)
{
	ckc_owedtab_t t = { 0 };

	/* inserted out of order, then each cut in its middle */
	for (unsigned i = 0; i < 100; i++) {
		unsigned k = (i * 37) % 100;
		ckc_owed_t e = ent((uintptr_t)(1000 + 10 * k) * P, (uintptr_t)(1000 + 10 * k + 6) * P,
				   (uintptr_t)(1000 + 10 * k) * P);
		cr_assert_eq(ckc_owedtab_insert(&t, &e), 0);
	}
	for (size_t i = 0; i < t.n; i += 2) {
		uintptr_t s = t.e[i].start;
		cr_assert_eq(ckc_owedtab_cut(&t, i, s + 2 * P, s + 3 * P), 2);
	}
	cr_assert_eq(t.n, 200);
	for (size_t i = 1; i < t.n; i++)
		cr_assert_leq(t.e[i - 1].end, t.e[i].start, "entry %zu overlaps the one before", i);
	for (size_t i = 0; i < t.n; i++)
		cr_assert_eq(ckc_owedtab_first(&t, t.e[i].start, t.e[i].start + 1), i);
	ckc_owedtab_free(&t);
}
