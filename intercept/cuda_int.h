/* What the parts of the CUDA interception share (cuda.c, cuda_capture.c,
 * cuda_events.c, cuda_mem.c): the driver's real functions by name, the
 * capture mode, the map of the program's memory, the huge-page pinned
 * allocations, the events of device capture and its algorithms. */
#ifndef CKC_CUDA_INT_H
#define CKC_CUDA_INT_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckc.h"
#include "intercept.h"
#include "owed.h"
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

/* ---- events of device capture (cuda_events.c) ---- */

/* An event shared by owed entries: counted, destroyed with the last user. */
typedef struct cu_ev cu_ev_t;
/* A new or spare event of the current context, recorded on stream t, with
 * one reference; NULL on failure. */
cu_ev_t *ckc_cu_ev_record(CUstream t);
/* Waits for the event's copy (NULL: returns at once). */
void ckc_cu_ev_wait(void *p);
/* Drops a reference; the last one keeps the event for reuse or destroys it. */
void ckc_cu_ev_put(void *p);
/* A few spare events of the current context ctx. */
void ckc_cu_ev_stock(CUcontext ctx);
/* The events as the owed table uses them. */
extern const ckc_owed_ops_t ckc_cu_owed_ops;
/* Waits for every device's deferred capture (returns at once while none is
 * pending). */
void ckc_cu_settle(void);
/* e: the latest deferred capture on device dev. */
void ckc_cu_pending(int dev, cu_ev_t *e);

/* ---- device capture (cuda_capture.c) ---- */

/* The gpu tier: 0 untried, 1 up, -1 off. */
extern atomic_int ckc_cu_gpu_state;
/* Time the program spent in captured and restored copies. */
extern atomic_ullong ckc_cu_cap_ns, ckc_cu_rest_ns;
/* A stream was made with these flags. */
void ckc_cu_stream_made(unsigned flags);
/* Device capture of a device-to-host copy; false: the caller makes the
 * real copy. */
bool ckc_cu_capture(void *dst, CUdeviceptr src, size_t n, CUstream t, bool async, bool pt, uintptr_t site);
/* A host-to-device copy from owed host memory, out of the gpu tier; false:
 * the caller makes the real copy (owed bytes were filled first). */
bool ckc_cu_restore(CUdeviceptr dst, const void *src, size_t n, CUstream t, bool async, bool pt);
/* A host range the driver is about to write whole, or to read (its owed
 * bytes are filled). */
void ckc_cu_host_written(const void *p, size_t n);
void ckc_cu_host_read(const void *p, size_t n);
/* The host memory of a 2-D, 3-D or batched copy, filled first. */
void ckc_cu_2d(const CUDA_MEMCPY2D *p);
void ckc_cu_3d(const CUDA_MEMCPY3D *p);
void ckc_cu_batch(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c);
/* At the program's first device allocation: the gpu tier set up. */
void ckc_cu_gpu_early(void);
/* Out of device memory: true when the gpu tier gave some back. */
bool ckc_cu_oom_retry(CUresult rc, size_t need);
/* Pinned memory given back: what it owes is dropped. */
void ckc_cu_host_freed(void *p);
/* The statistics of device capture. */
void ckc_cu_capture_stats(ckc_stats_t *s);

#endif
