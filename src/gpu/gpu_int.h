/* The gpu tier's parts: tier.c (the arena's regions and their mapping),
 * xfer.c (the copies), pin.c (pinned host memory for transfers),
 * release.c (giving memory back to the program) and lend.c (regions lent
 * to and borrowed from the node's other ranks). What they share: the
 * driver's table, the lock of the tier's set-up and tear-down, and the
 * region operations below. Not for the rest of the engine, which calls the
 * tier through engine_int.h. */
#ifndef CKC_GPU_INT_H
#define CKC_GPU_INT_H

#include "engine_int.h"

#ifdef HAVE_CUDA_H
#include <cuda.h>

/* The driver functions the tier calls, by their exact versioned names. */
#define GPU_DRV(X)                                                                                     \
	X(cuCtxGetCurrent, (CUcontext *))                                                              \
	X(cuCtxSetCurrent, (CUcontext))                                                                \
	X(cuCtxGetDevice, (CUdevice *))                                                                \
	X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                           \
	X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                                    \
	X(cuDeviceGetCount, (int *))                                                                   \
	X(cuDeviceTotalMem_v2, (size_t *, CUdevice))                                                   \
	X(cuMemGetInfo_v2, (size_t *, size_t *))                                                       \
	X(cuMemGetAllocationGranularity, (size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags)) \
	X(cuMemAddressReserve, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))      \
	X(cuMemAddressFree, (CUdeviceptr, size_t))                                                     \
	X(cuMemCreate, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long)) \
	X(cuMemRelease, (CUmemGenericAllocationHandle))                                                \
	X(cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))   \
	X(cuMemUnmap, (CUdeviceptr, size_t))                                                           \
	X(cuMemSetAccess, (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))                      \
	X(cuStreamCreate, (CUstream *, unsigned))                                                      \
	X(cuStreamSynchronize, (CUstream))                                                             \
	X(cuMemcpyDtoHAsync_v2, (void *, CUdeviceptr, size_t, CUstream))                              \
	X(cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, CUstream))                        \
	X(cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                         \
	X(cuMemHostRegister_v2, (void *, size_t, unsigned))                                            \
	X(cuMemAllocHost_v2, (void **, size_t))                                                        \
	X(cuMemFreeHost, (void *))                                                                     \
	X(cuMemHostUnregister, (void *))

#define GPU_FIELD(name, params) CUresult (*name) params;
typedef struct gpu_drv {
	GPU_DRV(GPU_FIELD)
	bool loaded;
} gpu_drv_t;

extern gpu_drv_t gpu_drv;
/* The tier's set-up and tear-down (lockrank.h, GPU_LIFE). */
extern ckc_mutex_t gpu_life;

/* A driver result as -errno. */
int gpu_err(CUresult rc);
/* Moves the start of region r's fence from from to at (bytes into the
 * region; lock held). */
int gpu_fence_to(ckc_tier_t *t, const ckc_gpu_dev_t *r, uint64_t from, uint64_t at);
/* The tier's capacity from its regions' mapped chunks (lock held). */
void gpu_capacity(ckc_tier_t *t);
/* Maps the allocation handle as chunk i of region r, with access for the
 * region's device, and records it (lock not held). 0 or -errno; on error
 * the handle is the caller's still. */
int gpu_map_handle(ckc_gpu_t *g, ckc_gpu_dev_t *r, size_t i, uint64_t handle);
/* Chunk i of region r, mapped, becomes part of the region: its fence
 * moves past it and the tier's capacity grows (lock held). */
int gpu_join_chunk(ckc_tier_t *t, ckc_gpu_dev_t *r, size_t i);
/* Unmaps chunk i of region r and releases its handle (lock not held). */
void gpu_unmap_chunk(ckc_gpu_t *g, ckc_gpu_dev_t *r, size_t i);
/* A region's mapping thread (arg: the region). */
void *gpu_mapper(void *arg);
/* Empties region r from target bytes on and unmaps what could be emptied
 * (gpu_life and the lock held; the lock is dropped while unmapping). */
uint64_t gpu_cut_tail(ckc_tier_t *t, ckc_gpu_dev_t *r, uint64_t target, double wait_s);
/* The region of device (NULL: none); a region of lent memory is no
 * device's own. */
ckc_gpu_dev_t *gpu_region_for(const ckc_gpu_t *g, int device);
/* The region holding device address d (NULL: none). */
const ckc_gpu_dev_t *gpu_region_of(const ckc_gpu_t *g, uint64_t d);
/* Registers the host tiers populated whole for transfers, one process of
 * the node at a time (the first mapping thread). */
void gpu_pin_host(ckc_gpu_t *g);
/* The registering functions the host tiers are handed (and unpinned with). */
extern const ckc_pin_fns_t gpu_pin_fns;
/* The program threads' small pinned slots and the readers' pinned windows,
 * made in the background by the first mapping thread. */
void gpu_make_slots(void);
void gpu_make_windows(void);
#endif

#endif
