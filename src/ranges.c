/* A sorted array of disjoint address ranges with binary search: lookups
 * (one per copy) are frequent, changes (one per allocation) are rare. */
#include "config.h"

#include "ranges.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "sys.h"

/* Index of the first range whose end is above addr. */
static size_t ranges_lower(const ckc_ranges_t *t, uint64_t addr)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* memmove of n ranges, nothing when n is 0 (the array may not exist yet) */
static void ranges_move(ckc_range_t *dst, const ckc_range_t *src, size_t n)
{
	if (n)
		memmove(dst, src, n * sizeof(*dst));
}

static int ranges_reserve(ckc_ranges_t *t, size_t more)
{
	if (t->n + more <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap * 2 : 64;
	while (cap < t->n + more)
		cap *= 2;
	ckc_range_t *r = sys_realloc(t->r, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	t->r = r;
	t->cap = cap;
	return 0;
}

int ckc_ranges_remove_span(ckc_ranges_t *t, uint64_t start, uint64_t len)
{
	uint64_t end = start + len;
	if (len == 0 || end < start)
		return 0;
	size_t i = ranges_lower(t, start);
	if (i < t->n && t->r[i].start < start && t->r[i].end > end) {
		/* the span is inside one range: it splits in two */
		if (ranges_reserve(t, 1))
			return -ENOMEM;
		ranges_move(t->r + i + 1, t->r + i, t->n - i);
		t->n++;
		t->r[i].end = start;
		t->r[i + 1].start = end;
		return 0;
	}
	if (i < t->n && t->r[i].start < start) {
		t->r[i].end = start; /* keep its head */
		i++;
	}
	size_t j = i;
	while (j < t->n && t->r[j].end <= end)
		j++;
	if (j < t->n && t->r[j].start < end)
		t->r[j].start = end; /* keep its tail */
	ranges_move(t->r + i, t->r + j, t->n - j);
	t->n -= j - i;
	return 0;
}

int ckc_ranges_add(ckc_ranges_t *t, uint64_t start, uint64_t len, ckc_mem_kind_t kind, int device)
{
	if (len == 0 || start + len < start)
		return -EINVAL;
	if (ckc_ranges_remove_span(t, start, len) || ranges_reserve(t, 1))
		return -ENOMEM;
	size_t i = ranges_lower(t, start);
	ranges_move(t->r + i + 1, t->r + i, t->n - i);
	t->r[i] = (ckc_range_t){ start, start + len, kind, device };
	t->n++;
	return 0;
}

uint64_t ckc_ranges_remove(ckc_ranges_t *t, uint64_t start)
{
	size_t i = ranges_lower(t, start);
	if (i >= t->n || t->r[i].start != start)
		return 0;
	uint64_t len = t->r[i].end - t->r[i].start;
	ranges_move(t->r + i, t->r + i + 1, t->n - i - 1);
	t->n--;
	return len;
}

const ckc_range_t *ckc_ranges_find(const ckc_ranges_t *t, uint64_t addr)
{
	size_t i = ranges_lower(t, addr);
	return i < t->n && t->r[i].start <= addr ? &t->r[i] : NULL;
}

ckc_mem_kind_t ckc_ranges_kind(const ckc_ranges_t *t, uint64_t addr)
{
	const ckc_range_t *r = ckc_ranges_find(t, addr);
	return r ? r->kind : CKC_MEM_UNKNOWN;
}

void ckc_ranges_free(ckc_ranges_t *t)
{
	sys_free(t->r);
	memset(t, 0, sizeof(*t));
}
