/* The program's CUDA memory, for device capture: the map of its device,
 * managed, pinned and registered ranges by address (what a copy's host or
 * device side is), and its large pinned allocations, made of huge pages
 * (cuda.c's wrappers of the allocation calls use both). */
#include "config.h"

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "cuda_int.h"
#include "intercept.h"
#include "ranges.h"

/* ---- the program's memory, by address --------------------------------- */

static ckc_ranges_t cu_ranges;
static ckc_rwlock_t cu_ranges_lock = CKC_RWLOCK_INIT(CU_RANGES);
CKC_LOCKS_AT_START(cu_ranges, ckc_locks_add_rw, &cu_ranges_lock)

void ckc_cu_track(CUdeviceptr p, size_t n, ckc_mem_kind_t kind)
{
	ckc_rw_wrlock(&cu_ranges_lock);
	ckc_ranges_add(&cu_ranges, (uint64_t)p, n, kind, -1);
	ckc_rw_unlock(&cu_ranges_lock);
}

void ckc_cu_untrack(CUdeviceptr p)
{
	ckc_rw_wrlock(&cu_ranges_lock);
	ckc_ranges_remove(&cu_ranges, (uint64_t)p);
	ckc_rw_unlock(&cu_ranges_lock);
}

void ckc_cu_untrack_span(CUdeviceptr p, size_t n)
{
	ckc_rw_wrlock(&cu_ranges_lock);
	ckc_ranges_remove_span(&cu_ranges, (uint64_t)p, n);
	ckc_rw_unlock(&cu_ranges_lock);
}

int ckc_cuda_mem_kind(const void *addr)
{
	ckc_rw_rdlock(&cu_ranges_lock);
	ckc_mem_kind_t k = ckc_ranges_kind(&cu_ranges, (uint64_t)(uintptr_t)addr);
	ckc_rw_unlock(&cu_ranges_lock);
	return k;
}

/* Length of the recorded pinned or registered block starting at p, 0 if
 * none. */
uint64_t ckc_cu_block_len(const void *p)
{
	ckc_rw_rdlock(&cu_ranges_lock);
	const ckc_range_t *r = ckc_ranges_find(&cu_ranges, (uint64_t)(uintptr_t)p);
	uint64_t len = r && r->start == (uint64_t)(uintptr_t)p ? r->end - r->start : 0;
	ckc_rw_unlock(&cu_ranges_lock);
	return len;
}

/* ---- pinned host allocations of huge pages -----------------------------
 * Owing pinned memory changes the protection of its pages in place (the
 * driver holds them): 1.7 to 7 ms for a 128 MiB staging buffer of 4 KiB
 * pages on an H100 machine, on the program's read. Under device capture a
 * large pinned allocation (cudaMallocHost, cudaHostAlloc, torch's pinned
 * memory) is therefore made of huge pages, populated and registered with the
 * driver (portable and mapped, as an allocation of its own is under unified
 * addressing): its protection then changes one entry per 2 MiB. Write-
 * combined ones, small ones and any the kernel refuses are made by the
 * driver as asked. */
#define HUGE_PIN_MIN ((size_t)4 << 20)
#define HUGE_PIN_ALIGN ((size_t)2 << 20)

typedef struct cu_hugepin {
	void *p;
	size_t len;
} cu_hugepin_t;
static cu_hugepin_t *hugepins;
static atomic_ullong hugepins_made;
static size_t nhugepins, caphugepins;
static ckc_mutex_t hugepin_lock = CKC_MUTEX_INIT(HUGEPIN);
CKC_LOCKS_AT_START(hugepin, ckc_locks_add, &hugepin_lock)
static _Atomic(void *) cx_hreg, cx_hunreg;

/* A registered huge-page allocation of n bytes in *pp, or false. */
bool ckc_cu_hugepin_alloc(void **pp, size_t n, unsigned flags)
{
	if (!cu_device_mode() || n < HUGE_PIN_MIN || (flags & CU_MEMHOSTALLOC_WRITECOMBINED))
		return false;
	CUresult (*reg)(void *, size_t, unsigned) =
		CX(cx_hreg, "cuMemHostRegister_v2", CUresult(*)(void *, size_t, unsigned));
	if (!reg)
		return false;
	size_t len = (n + HUGE_PIN_ALIGN - 1) & ~(HUGE_PIN_ALIGN - 1);
	char *m = mmap(NULL, len + HUGE_PIN_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return false;
	char *p = (char *)(((uintptr_t)m + HUGE_PIN_ALIGN - 1) & ~(uintptr_t)(HUGE_PIN_ALIGN - 1));
	if (p > m)
		REAL(munmap)(m, (size_t)(p - m));
	if (m + len + HUGE_PIN_ALIGN > p + len)
		REAL(munmap)(p + len, (size_t)(m + len + HUGE_PIN_ALIGN - (p + len)));
	(void)REAL(madvise)(p, len, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
	(void)REAL(madvise)(p, len, MADV_POPULATE_WRITE);
#endif
	ckc_mutex_lock(&hugepin_lock);
	bool room = nhugepins < caphugepins;
	if (!room) {
		size_t cap = caphugepins ? 2 * caphugepins : 16;
		cu_hugepin_t *t = realloc(hugepins, cap * sizeof(*t));
		if (t) {
			hugepins = t;
			caphugepins = cap;
			room = true;
		}
	}
	ckc_mutex_unlock(&hugepin_lock);
	if (!room || reg(p, len, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP) != CUDA_SUCCESS) {
		REAL(munmap)(p, len);
		return false;
	}
	ckc_mutex_lock(&hugepin_lock);
	hugepins[nhugepins++] = (cu_hugepin_t){ p, len };
	ckc_mutex_unlock(&hugepin_lock);
	atomic_fetch_add(&hugepins_made, 1);
	ckc_cu_track((CUdeviceptr)(uintptr_t)p, n, CKC_MEM_PINNED);
	*pp = p;
	return true;
}

/* Gives back a huge-page allocation at p: true if it was one. */
bool ckc_cu_hugepin_free(void *p)
{
	size_t len = 0;
	ckc_mutex_lock(&hugepin_lock);
	for (size_t i = 0; i < nhugepins; i++)
		if (hugepins[i].p == p) {
			len = hugepins[i].len;
			hugepins[i] = hugepins[--nhugepins];
			break;
		}
	ckc_mutex_unlock(&hugepin_lock);
	if (!len)
		return false;
	CUresult (*unreg)(void *) = CX(cx_hunreg, "cuMemHostUnregister", CUresult(*)(void *));
	if (unreg)
		unreg(p);
	ckc_cu_untrack((CUdeviceptr)(uintptr_t)p);
	REAL(munmap)(p, len);
	return true;
}

uint64_t ckc_cu_hugepins_made(void)
{
	return atomic_load(&hugepins_made);
}

#endif
