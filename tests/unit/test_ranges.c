/* The address-range table: add, remove, partial unmap, lookup, checked
 * against a byte-map model on random operations. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ranges.h"

Test(ranges, add_find_remove)
{
	ckc_ranges_t t = { 0 };
	cr_assert_eq(ckc_ranges_add(&t, 0x1000, 0x1000, CKC_MEM_DEVICE, 0), 0);
	cr_assert_eq(ckc_ranges_add(&t, 0x8000, 0x100, CKC_MEM_PINNED, -1), 0);
	cr_assert_eq(ckc_ranges_kind(&t, 0x1000), CKC_MEM_DEVICE);
	cr_assert_eq(ckc_ranges_kind(&t, 0x1fff), CKC_MEM_DEVICE);
	cr_assert_eq(ckc_ranges_kind(&t, 0x2000), CKC_MEM_UNKNOWN);
	cr_assert_eq(ckc_ranges_kind(&t, 0xfff), CKC_MEM_UNKNOWN);
	cr_assert_eq(ckc_ranges_kind(&t, 0x80ff), CKC_MEM_PINNED);
	/* a sub-allocation inside a block is found by its address */
	const ckc_range_t *r = ckc_ranges_find(&t, 0x1800);
	cr_assert_not_null(r);
	cr_assert_eq(r->start, 0x1000);
	cr_assert_eq(ckc_ranges_remove(&t, 0x1800), 0, "only a block's start removes it");
	cr_assert_eq(ckc_ranges_remove(&t, 0x1000), 0x1000);
	cr_assert_eq(ckc_ranges_kind(&t, 0x1800), CKC_MEM_UNKNOWN);
	cr_assert_eq(ckc_ranges_add(&t, 5, 0, CKC_MEM_DEVICE, 0), -EINVAL);
	cr_assert_eq(ckc_ranges_add(&t, UINT64_MAX - 2, 10, CKC_MEM_DEVICE, 0), -EINVAL);
	ckc_ranges_free(&t);
}

Test(ranges, overlap_replaces_and_partial_unmap_splits)
{
	ckc_ranges_t t = { 0 };
	cr_assert_eq(ckc_ranges_add(&t, 0, 100, CKC_MEM_DEVICE, 0), 0);
	cr_assert_eq(ckc_ranges_add(&t, 50, 100, CKC_MEM_MANAGED, 0), 0);
	cr_assert_eq(t.n, 2);
	cr_assert_eq(ckc_ranges_kind(&t, 49), CKC_MEM_DEVICE);
	cr_assert_eq(ckc_ranges_kind(&t, 50), CKC_MEM_MANAGED);
	cr_assert_eq(ckc_ranges_remove_span(&t, 60, 10), 0);
	cr_assert_eq(t.n, 3);
	cr_assert_eq(ckc_ranges_kind(&t, 59), CKC_MEM_MANAGED);
	cr_assert_eq(ckc_ranges_kind(&t, 65), CKC_MEM_UNKNOWN);
	cr_assert_eq(ckc_ranges_kind(&t, 70), CKC_MEM_MANAGED);
	cr_assert_eq(ckc_ranges_remove_span(&t, 0, 1000), 0);
	cr_assert_eq(t.n, 0);
	ckc_ranges_free(&t);
}

Test(ranges, random_operations_match_a_byte_model)
{
	enum { SPACE = 4096 };
	unsigned char model[SPACE];
	uint64_t seed = 0x2545F4914F6CDD1Dull;
	for (int round = 0; round < 200; round++) {
		ckc_ranges_t t = { 0 };
		memset(model, 0, sizeof(model));
		for (int op = 0; op < 300; op++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			uint64_t start = seed % SPACE, len = 1 + (seed >> 20) % 200;
			if (start + len > SPACE)
				len = SPACE - start;
			if ((seed >> 40) % 3) {
				ckc_mem_kind_t k = (ckc_mem_kind_t)(1 + (seed >> 45) % 4);
				cr_assert_eq(ckc_ranges_add(&t, start, len, k, 0), 0);
				memset(model + start, k, len);
			} else {
				cr_assert_eq(ckc_ranges_remove_span(&t, start, len), 0);
				memset(model + start, 0, len);
			}
			for (size_t i = 1; i < t.n; i++)
				cr_assert_leq(t.r[i - 1].end, t.r[i].start, "sorted and disjoint");
		}
		for (uint64_t a = 0; a < SPACE; a++)
			cr_assert_eq(ckc_ranges_kind(&t, a), model[a], "round %d addr %llu", round,
				     (unsigned long long)a);
		ckc_ranges_free(&t);
	}
}
