/* Address ranges of the program's memory as CUDA sees it: device
 * allocations (whole cuMemAlloc blocks, so a caching allocator's
 * sub-allocations are found too), managed memory, pinned and registered
 * host memory. Pure logic; the caller locks. */
#ifndef CKC_RANGES_H
#define CKC_RANGES_H

#include <stddef.h>
#include <stdint.h>

typedef enum ckc_mem_kind {
	CKC_MEM_UNKNOWN = 0, /* not recorded: pageable host memory */
	CKC_MEM_DEVICE,
	CKC_MEM_MANAGED,
	CKC_MEM_PINNED,      /* cuMemHostAlloc / cuMemAllocHost */
	CKC_MEM_REGISTERED,  /* cuMemHostRegister */
} ckc_mem_kind_t;

typedef struct ckc_range {
	uint64_t start, end; /* [start, end) */
	ckc_mem_kind_t kind;
	int device;
} ckc_range_t;

typedef struct ckc_ranges {
	ckc_range_t *r; /* sorted by start, disjoint */
	size_t n, cap;
} ckc_ranges_t;

/* Records [start, start+len) as kind; whatever it overlaps is replaced (a
 * free the library did not see). Returns 0, -EINVAL for len 0, -ENOMEM. */
int ckc_ranges_add(ckc_ranges_t *t, uint64_t start, uint64_t len, ckc_mem_kind_t kind, int device);

/* Forgets the range that starts at start. Returns its length, or 0 if none. */
uint64_t ckc_ranges_remove(ckc_ranges_t *t, uint64_t start);

/* Forgets every part of [start, start+len) (cuMemUnmap may unmap part of a
 * mapping); ranges cut in two keep both ends. Returns 0 or -ENOMEM. */
int ckc_ranges_remove_span(ckc_ranges_t *t, uint64_t start, uint64_t len);

/* The range holding addr, or NULL: O(log n). */
const ckc_range_t *ckc_ranges_find(const ckc_ranges_t *t, uint64_t addr);

/* The kind of memory at addr (CKC_MEM_UNKNOWN: pageable host memory). */
ckc_mem_kind_t ckc_ranges_kind(const ckc_ranges_t *t, uint64_t addr);

void ckc_ranges_free(ckc_ranges_t *t);

#endif
