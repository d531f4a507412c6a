/* Fragment table of a bounded tier: placement, release, resizing and window
 * eviction over a sorted dynamic array of extents and gaps. */
#include "config.h"

#include "arena.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "sys.h"

#define ARENA_INITIAL_SLOTS 16

/*
 * Slot reserve: no two gaps are adjacent, so a table with E extents never has
 * more than 2E + 1 fragments. Keeping cap >= 2E + 1 at all times (only
 * arena_take adds an extent, and it may fail with -ENOMEM anyway) lets
 * arena_shrink split off its tail without ever allocating.
 */
static size_t arena_reserve_for(size_t extents)
{
	return 2 * extents + 1;
}

static size_t arena_count_extents(const arena_t *a)
{
	size_t e = 0;

	for (size_t i = 0; i < a->nfrag; i++)
		e += a->frag[i].owner != NULL;
	return e;
}

static int arena_grow(arena_t *a, size_t want)
{
	size_t ncap = a->cap ? a->cap : ARENA_INITIAL_SLOTS;
	arena_frag_t *nf;

	if (want <= a->cap)
		return 0;
	while (ncap < want) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / sizeof(*nf))
		return -ENOMEM;
	nf = sys_realloc(a->frag, ncap * sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	a->frag = nf;
	a->cap = ncap;
	return 0;
}

/* Opens a hole at idx; the caller has made sure a slot is free. */
static void arena_insert_slot(arena_t *a, size_t idx)
{
	assert(a->nfrag < a->cap);
	memmove(&a->frag[idx + 1], &a->frag[idx], (a->nfrag - idx) * sizeof(a->frag[0]));
	a->nfrag++;
}

static void arena_remove_slots(arena_t *a, size_t idx, size_t count)
{
	memmove(&a->frag[idx], &a->frag[idx + count],
		(a->nfrag - idx - count) * sizeof(a->frag[0]));
	a->nfrag -= count;
}

static bool arena_is_gap(const arena_t *a, size_t idx)
{
	return idx < a->nfrag && a->frag[idx].owner == NULL;
}

/* Merges gap idx with the gaps on either side; returns its new index. */
static size_t arena_coalesce(arena_t *a, size_t idx)
{
	if (arena_is_gap(a, idx + 1)) {
		a->frag[idx].len += a->frag[idx + 1].len;
		arena_remove_slots(a, idx + 1, 1);
	}
	if (idx > 0 && arena_is_gap(a, idx - 1)) {
		a->frag[idx - 1].len += a->frag[idx].len;
		arena_remove_slots(a, idx, 1);
		idx--;
	}
	return idx;
}

int arena_init(arena_t *a, uint64_t capacity, uint64_t align)
{
	memset(a, 0, sizeof(*a));
	if (align == 0 || (align & (align - 1)))
		return -EINVAL;
	capacity &= ~(align - 1);
	if (capacity == 0)
		return -EINVAL;
	if (arena_grow(a, ARENA_INITIAL_SLOTS))
		return -ENOMEM;
	a->capacity = capacity;
	a->align = align;
	a->frag[0] = (arena_frag_t){ .off = 0, .len = capacity, .owner = NULL };
	a->nfrag = 1;
	return 0;
}

void arena_fini(arena_t *a)
{
	sys_free(a->frag);
	memset(a, 0, sizeof(*a));
}

uint64_t arena_round(const arena_t *a, uint64_t len)
{
	uint64_t mask = a->align - 1;

	if (len > UINT64_MAX - mask)
		return UINT64_MAX;
	return (len + mask) & ~mask;
}

ssize_t arena_find_gap(const arena_t *a, uint64_t len)
{
	return arena_find_gap_in(a, len, 0, a->capacity);
}

ssize_t arena_find_gap_in(const arena_t *a, uint64_t len, uint64_t lo, uint64_t hi)
{
	uint64_t want = arena_round(a, len);
	ssize_t best = -1;

	for (size_t i = 0; i < a->nfrag; i++) {
		const arena_frag_t *f = &a->frag[i];

		if (f->owner || f->len < want || f->off < lo || f->off >= hi || f->len > hi - f->off)
			continue;
		if (best < 0 || f->len < a->frag[best].len)
			best = (ssize_t)i;
	}
	return best;
}

/* Bytes newly in extents, and the most there were at once. */
static void arena_add_used(arena_t *a, uint64_t n)
{
	a->used += n;
	if (a->used > a->peak)
		a->peak = a->used;
}

ssize_t arena_take(arena_t *a, size_t gap_idx, uint64_t len, void *owner)
{
	uint64_t want = arena_round(a, len);
	arena_frag_t *g;

	if (!owner || len == 0 || !arena_is_gap(a, gap_idx))
		return -EINVAL;
	if (a->frag[gap_idx].len < want)
		return -EINVAL;
	/* The cheap bound (extents <= nfrag) usually holds; count only when not. */
	if (a->cap < arena_reserve_for(a->nfrag + 1)) {
		size_t need = arena_reserve_for(arena_count_extents(a) + 1);

		if (arena_grow(a, need))
			return -ENOMEM;
	}
	g = &a->frag[gap_idx];
	if (g->len > want) {
		arena_insert_slot(a, gap_idx + 1);
		g = &a->frag[gap_idx];
		a->frag[gap_idx + 1] = (arena_frag_t){
			.off = g->off + want, .len = g->len - want, .owner = NULL,
		};
		g->len = want;
	}
	g->owner = owner;
	arena_add_used(a, want);
	return (ssize_t)gap_idx;
}

size_t arena_release(arena_t *a, size_t idx)
{
	assert(idx < a->nfrag);
	if (a->frag[idx].owner) {
		a->used -= a->frag[idx].len;
		a->frag[idx].owner = NULL;
	}
	return arena_coalesce(a, idx);
}

ssize_t arena_index_of(const arena_t *a, uint64_t off)
{
	size_t lo = 0, hi = a->nfrag;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->frag[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < a->nfrag && a->frag[lo].off == off)
		return (ssize_t)lo;
	return -1;
}

int arena_shrink(arena_t *a, size_t idx, uint64_t newlen)
{
	arena_frag_t *f;
	uint64_t keep, tail;

	if (idx >= a->nfrag || !a->frag[idx].owner || newlen == 0)
		return -EINVAL;
	f = &a->frag[idx];
	keep = arena_round(a, newlen);
	if (keep > f->len)
		return -EINVAL;
	tail = f->len - keep;
	if (tail == 0)
		return 0;
	f->len = keep;
	a->used -= tail;
	if (arena_is_gap(a, idx + 1)) {
		a->frag[idx + 1].off -= tail;
		a->frag[idx + 1].len += tail;
		return 0;
	}
	arena_insert_slot(a, idx + 1);
	a->frag[idx + 1] = (arena_frag_t){
		.off = a->frag[idx].off + keep, .len = tail, .owner = NULL,
	};
	return 0;
}

int arena_extend(arena_t *a, size_t idx, uint64_t newlen)
{
	arena_frag_t *f, *next;
	uint64_t want, grow;

	if (idx >= a->nfrag || !a->frag[idx].owner)
		return -EINVAL;
	f = &a->frag[idx];
	want = arena_round(a, newlen);
	if (want < f->len)
		return -EINVAL;
	grow = want - f->len;
	if (grow == 0)
		return 0;
	if (!arena_is_gap(a, idx + 1) || a->frag[idx + 1].len < grow)
		return -ENOSPC;
	next = &a->frag[idx + 1];
	f->len = want;
	arena_add_used(a, grow);
	if (next->len == grow) {
		arena_remove_slots(a, idx + 1, 1);
	} else {
		next->off += grow;
		next->len -= grow;
	}
	return 0;
}

int arena_move_start(arena_t *a, size_t idx, uint64_t off)
{
	if (idx >= a->nfrag || !a->frag[idx].owner || (off & (a->align - 1)))
		return -EINVAL;
	arena_frag_t *f = &a->frag[idx];
	uint64_t end = f->off + f->len;
	if (off >= end)
		return -EINVAL;
	if (off < f->off) {
		/* grows into the gap before it */
		uint64_t grow = f->off - off;
		if (idx == 0 || !arena_is_gap(a, idx - 1) || a->frag[idx - 1].len < grow)
			return -ENOSPC;
		arena_frag_t *g = &a->frag[idx - 1];
		g->len -= grow;
		f->off = off;
		f->len += grow;
		arena_add_used(a, grow);
		if (g->len == 0)
			arena_remove_slots(a, idx - 1, 1);
		return 0;
	}
	uint64_t head = off - f->off;
	if (head == 0)
		return 0;
	if (idx > 0 && arena_is_gap(a, idx - 1)) {
		a->frag[idx - 1].len += head;
	} else {
		/* a gap of its own: the table still has no two adjacent gaps,
		 * so the slot reserve holds it */
		arena_insert_slot(a, idx);
		a->frag[idx] = (arena_frag_t){ .off = a->frag[idx + 1].off, .len = head, .owner = NULL };
		idx++;
	}
	a->frag[idx].off = off;
	a->frag[idx].len -= head;
	a->used -= head;
	return 0;
}

size_t arena_evict_window(arena_t *a, size_t first, size_t last,
			  void (*drop)(void *owner, void *ctx), void *ctx)
{
	size_t lo = first, hi = last;
	uint64_t end;

	assert(first <= last && last < a->nfrag);
	for (size_t i = first; i <= last; i++) {
		arena_frag_t *f = &a->frag[i];

		if (!f->owner)
			continue;
		if (drop)
			drop(f->owner, ctx);
		a->used -= f->len;
		f->owner = NULL;
	}
	if (lo > 0 && a->frag[lo - 1].owner == NULL)
		lo--;
	if (arena_is_gap(a, hi + 1))
		hi++;
	end = a->frag[hi].off + a->frag[hi].len;
	a->frag[lo].len = end - a->frag[lo].off;
	if (hi > lo)
		arena_remove_slots(a, lo + 1, hi - lo);
	return lo;
}

int arena_resize(arena_t *a, uint64_t capacity)
{
	capacity &= ~(a->align - 1);
	if (capacity == 0)
		return -EINVAL;
	if (capacity == a->capacity)
		return 0;
	arena_frag_t *last = &a->frag[a->nfrag - 1];
	if (capacity > a->capacity) {
		uint64_t more = capacity - a->capacity;
		if (last->owner == NULL) {
			last->len += more;
		} else {
			if (arena_grow(a, a->nfrag + 1))
				return -ENOMEM;
			a->frag[a->nfrag++] = (arena_frag_t){ .off = a->capacity, .len = more, .owner = NULL };
		}
		a->capacity = capacity;
		return 0;
	}
	/* shrinking: everything past the new end must be one gap */
	if (last->owner != NULL || last->off > capacity)
		return -EBUSY;
	if (last->off == capacity)
		a->nfrag--;
	else
		last->len = capacity - last->off;
	a->capacity = capacity;
	return 0;
}

uint64_t arena_busy_end(const arena_t *a)
{
	const arena_frag_t *last = &a->frag[a->nfrag - 1];
	return last->owner ? a->capacity : last->off;
}

bool arena_check(const arena_t *a)
{
	uint64_t pos = 0, used = 0;
	size_t extents = 0;

	if (a->align == 0 || (a->align & (a->align - 1)))
		return false;
	if (a->capacity == 0 || (a->capacity & (a->align - 1)))
		return false;
	if (!a->frag || a->nfrag == 0 || a->nfrag > a->cap)
		return false;
	for (size_t i = 0; i < a->nfrag; i++) {
		const arena_frag_t *f = &a->frag[i];

		if (f->off != pos || f->len == 0 || (f->len & (a->align - 1)))
			return false;
		if (f->len > a->capacity - pos)
			return false;
		if (f->owner) {
			used += f->len;
			extents++;
		} else if (i > 0 && a->frag[i - 1].owner == NULL) {
			return false;
		}
		pos += f->len;
	}
	if (pos != a->capacity || used != a->used)
		return false;
	return a->cap >= arena_reserve_for(extents);
}
