/* Allocation table of one bounded cache tier: fragments (object extents and
 * gaps) sorted by offset and covering [0, capacity). Pure bookkeeping; the
 * caller serialises access and owns the bytes the offsets refer to. */
#ifndef CKC_ARENA_H
#define CKC_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct arena_frag {
	uint64_t off, len;
	void *owner;                /* NULL = gap */
} arena_frag_t;

typedef struct arena {
	uint64_t capacity, align;   /* align: power of two; every off/len is a multiple; capacity rounded down to align */
	arena_frag_t *frag;
	size_t nfrag, cap;
	uint64_t used;              /* bytes in extents */
	uint64_t peak;              /* the most used at once */
} arena_t;

/* One gap covering everything; 0, -EINVAL (align not a power of two, or
 * capacity below align), -ENOMEM. */
int arena_init(arena_t *a, uint64_t capacity, uint64_t align);

/* Frees the table; a is left empty and may be initialised again. */
void arena_fini(arena_t *a);

/* len rounded up to align; saturates at UINT64_MAX (which fits no gap). */
uint64_t arena_round(const arena_t *a, uint64_t len);

/* Best fit: index of the smallest gap with len >= arena_round(len) (lowest
 * offset on ties), -1 if none. */
ssize_t arena_find_gap(const arena_t *a, uint64_t len);

/* The same among the gaps lying wholly within [lo, hi). */
ssize_t arena_find_gap_in(const arena_t *a, uint64_t len, uint64_t lo, uint64_t hi);

/* Moves the start of extent idx to off (aligned, below its end), its end
 * staying: earlier takes the bytes from the gap before it (-ENOSPC when
 * that gap is missing or too short), later gives its head back as gap
 * (coalesced; never allocates). 0, -EINVAL or -ENOSPC; the table is
 * unchanged on error. */
int arena_move_start(arena_t *a, size_t idx, uint64_t off);

/* The first arena_round(len) bytes of gap gap_idx become an extent of owner
 * (index returned, always gap_idx); the rest stays a gap; -EINVAL if not a
 * gap, too small, len == 0 or owner == NULL; -ENOMEM. */
ssize_t arena_take(arena_t *a, size_t gap_idx, uint64_t len, void *owner);

/* Extent idx -> gap, coalesced with neighbouring gaps; returns the index of
 * the resulting gap. idx must be a valid index. */
size_t arena_release(arena_t *a, size_t idx);

/* Binary search: index of the fragment starting at off, -1 if none. */
ssize_t arena_index_of(const arena_t *a, uint64_t off);

/* Extent keeps its first arena_round(newlen) bytes (newlen > 0), tail becomes
 * (coalesced) gap; 0 or -EINVAL. Never allocates, so it cannot fail for lack
 * of memory. */
int arena_shrink(arena_t *a, size_t idx, uint64_t newlen);

/* Grows extent idx in place to arena_round(newlen) bytes into the following
 * gap; 0, -EINVAL if idx is not an extent or newlen is below its length, or
 * -ENOSPC if the next fragment is not a gap big enough. */
int arena_extend(arena_t *a, size_t idx, uint64_t newlen);

/* Frees every extent in fragments [first, last] (calling drop(owner, ctx)
 * for each extent, in offset order, before it is freed; drop may be NULL and
 * must not touch a) and coalesces the window with neighbouring gaps into one
 * gap; returns that gap's index. first <= last < nfrag is required. */
size_t arena_evict_window(arena_t *a, size_t first, size_t last,
			  void (*drop)(void *owner, void *ctx), void *ctx);

/* Sets the capacity (rounded down to align). Growing adds room at the end;
 * shrinking is allowed only when everything past the new end is free.
 * Returns 0, -EINVAL (0 after rounding), -EBUSY (an extent lies past the
 * new end) or -ENOMEM. */
int arena_resize(arena_t *a, uint64_t capacity);

/* The end of the last extent (0 when empty): the smallest capacity that
 * arena_resize accepts without evicting anything. */
uint64_t arena_busy_end(const arena_t *a);

/* Invariants: sorted, contiguous, cover [0,capacity), len > 0 and aligned,
 * no two adjacent gaps, used == sum of extents, and enough spare slots that
 * arena_shrink never needs to allocate. */
bool arena_check(const arena_t *a);

#endif
