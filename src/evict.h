/* Eviction choice of a full tier (Algorithm 1 of the HPDC'23 paper): which
 * contiguous window of fragments to free so that a new object fits. Pure
 * function of a snapshot of the tier's fragment table. */
#ifndef CKC_EVICT_H
#define CKC_EVICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVICT_FAR (UINT64_C(1) << 40)      /* prefetch distance of gaps and of objects not in the restore queue */

typedef enum evict_policy { EVICT_SCORE, EVICT_FIFO, EVICT_LRU } evict_policy_t;

typedef struct evict_frag {
	uint64_t len;
	double p;      /* estimated seconds until evictable: 0 for gaps, flushed or consumed extents; remaining flush time for flushing ones; INFINITY = excluded (open, prefetched-unconsumed, being read) */
	uint64_t s;    /* prefetch distance (position in the restore queue); EVICT_FAR for gaps and unhinted */
	uint64_t age;  /* FIFO: insertion sequence; LRU: last-access sequence; 0 for gaps */
	bool gap;
} evict_frag_t;

typedef struct evict_choice {
	bool found;
	size_t first, last;     /* fragment indices of the window */
	double p;               /* max p over the window: the estimated wait */
	uint64_t s;             /* sum of s over the window */
	uint64_t evict_bytes;   /* bytes of non-gap fragments in the window */
} evict_choice_t;

/*
 * Candidates: for each left index i, the window [i, j] with the smallest
 * j >= i such that the lengths of [i..j] sum to at least need, provided no
 * fragment of [i..j] has p == INFINITY.
 * EVICT_SCORE ranks them by smallest max p, then largest sum of s, then
 * smallest evict_bytes, then smallest i. EVICT_FIFO and EVICT_LRU rank them
 * by smallest max age, then smallest evict_bytes, then smallest max p, then
 * smallest i. Doubles compare exactly; p must not be NaN, and the lengths
 * (and the s values) of the whole table must sum without overflowing.
 */

/* O(N): chooses the window to evict so that `need` bytes fit. Returns 0 with
 * out->found set, or 0 with !found (other fields zero) if no window can ever
 * fit; -EINVAL for a bad argument, -ENOMEM. */
int evict_choose(const evict_frag_t *f, size_t n, uint64_t need, evict_policy_t pol, evict_choice_t *out);

#endif
