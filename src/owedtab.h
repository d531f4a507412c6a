/* The table of owed host ranges (device capture): disjoint, page-aligned
 * [start, end) ranges sorted by start, each naming the device bytes that
 * belong there. Pure logic; the caller locks. */
#ifndef CKC_OWEDTAB_H
#define CKC_OWEDTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ckc_ref ckc_ref_t;

typedef struct ckc_owed {
	uintptr_t start, end; /* protected pages */
	uintptr_t cap_start;  /* host address of the reference's byte 0 */
	uint64_t cap_len;     /* bytes of the reference that belong in host memory */
	ckc_ref_t *ref;
	bool pinned;          /* pinned or registered memory: filled in place */
	bool edges_ok;        /* edge_sum holds the edges' bytes as they were */
	bool ordered;         /* ready is a deferred capture's: the cache's own
			       * reads of the gpu tier wait for it anyway */
	uint64_t edge_sum[2]; /* of [cap_start, start) and [end, cap_start + cap_len) */
	void *ready;          /* event: the capture's device copy is done */
	void *busy;           /* event: a device copy reading it is done */
	intptr_t park;        /* pageable pages moved out (owed.c): the page at
			       * address x is at x + park; 0: in place */
	uintptr_t site;       /* the program's call that made it owed */
	bool used;            /* written or copied to the device from since */
} ckc_owed_t;

typedef struct ckc_owedtab {
	ckc_owed_t *e;
	size_t n, cap;
} ckc_owedtab_t;

/* Index of the first entry overlapping [lo, hi), or t->n if none: O(log n). */
size_t ckc_owedtab_first(const ckc_owedtab_t *t, uintptr_t lo, uintptr_t hi);

/* Inserts e, which must overlap nothing. Returns 0, -EINVAL (empty or
 * overlapping), -ENOMEM. */
int ckc_owedtab_insert(ckc_owedtab_t *t, const ckc_owed_t *e);

/* Takes [a, b) (inside entry i) out of entry i: what lies left and right of
 * it stays, as one or two entries that share i's fields. Returns how many
 * entries remain of i (0, 1 or 2), or -ENOMEM (nothing changed). */
int ckc_owedtab_cut(ckc_owedtab_t *t, size_t i, uintptr_t a, uintptr_t b);

/* Removes entry i. */
void ckc_owedtab_remove(ckc_owedtab_t *t, size_t i);

void ckc_owedtab_free(ckc_owedtab_t *t);

#endif
