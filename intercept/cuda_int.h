/* What the parts of the CUDA interception share (cuda.c, cuda_mem.c): the
 * driver's real functions by name, the capture mode, the map of the
 * program's memory, and the huge-page pinned allocations. */
#ifndef CKC_CUDA_INT_H
#define CKC_CUDA_INT_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckc.h"
#include "intercept.h"
#include "ranges.h"

/* The driver's function name, resolved once into *slot (NULL without
 * libcuda or the symbol). */
void *ckc_cu_real(_Atomic(void *) *slot, const char *name);
#define CX(slot, name, type) ((type)ckc_cu_real(&slot, name))

static inline bool cu_device_mode(void)
{
	return ckc_capture_mode() == CKC_CAPTURE_DEVICE;
}

/* The program's memory by address: [p, p+n) is of kind now; p's range is
 * gone; every range within [p, p+n) is gone. */
void ckc_cu_track(CUdeviceptr p, size_t n, ckc_mem_kind_t kind);
void ckc_cu_untrack(CUdeviceptr p);
void ckc_cu_untrack_span(CUdeviceptr p, size_t n);
/* The length of the recorded pinned or registered block that starts at p,
 * 0 if none. */
uint64_t ckc_cu_block_len(const void *p);

/* Under device capture a large pinned allocation is made of huge pages,
 * populated and registered with the driver: true with *pp set, or false
 * (the driver makes it as asked). */
bool ckc_cu_hugepin_alloc(void **pp, size_t n, unsigned flags);
/* Gives back such an allocation at p: true if it was one. */
bool ckc_cu_hugepin_free(void *p);
/* The huge-page allocations made (the statistics). */
uint64_t ckc_cu_hugepins_made(void);

#endif
