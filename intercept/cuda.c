/* CUDA driver interception. Programs reach the driver three ways (CUDA.md):
 * the exported cu* symbols, dlsym(libcuda, name), and cuGetProcAddress (both
 * ABIs), which the runtime and PyTorch use for everything. Each wrapped entry
 * point is keyed by its exact versioned name (_v2, _ptds, _ptsz) and keeps
 * its own real pointer. libcuda.so.1 is opened only when the program itself
 * calls into CUDA; a process without CUDA never touches it.
 *
 * In copy mode the hooks hand out the driver's own functions (nothing of
 * CUDA is touched); in device mode they hand out the wrappers, which count
 * every copy by kind and path (what device capture builds on).
 *
 * This file owns the resolution of the driver's functions, the wrappers and
 * their table, cuGetProcAddress, dlsym and the call counters; the capture
 * and restore algorithms are cuda_capture.c's, the events of their copies
 * cuda_events.c's, the program's memory by address cuda_mem.c's. */
#include "config.h"

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backtrace.h"
#include "intercept.h"
#include "log.h"
#include "owed.h"
#include "ranges.h"
#include "cuda_int.h"

/* ---- the real dlsym and libcuda ------------------------------------- */

static _Atomic(void *) cu_lib;
static _Atomic(uintptr_t) cu_self_base;

/* libcuda.so.1 (never libcuda.so, which can be the toolkit's stub). */
static void *cu_libcuda(void)
{
	void *h = atomic_load(&cu_lib);
	if (h)
		return h;
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (h)
		atomic_store(&cu_lib, h);
	return h;
}

/* Whether p lies in this library (a lookup that found our own wrapper). */
static bool cu_is_ours(const void *p)
{
	Dl_info di;
	uintptr_t base = atomic_load(&cu_self_base);
	if (!base && dladdr((void *)cu_libcuda, &di))
		atomic_store(&cu_self_base, base = (uintptr_t)di.dli_fbase);
	return p && dladdr(p, &di) && (uintptr_t)di.dli_fbase == base;
}

/* ---- counters ------------------------------------------------------- */

enum { CU_DTOH, CU_HTOD, CU_DFLT, CU_2D, CU_3D, CU_PEER, CU_BATCH, CU_ALLOC, CU_FREE,
       CU_HOSTMEM, CU_GPA, CU_DFLT_DTOH, CU_DFLT_HTOD, CU_DFLT_DTOD, CU_DFLT_HTOH, CU_STREAM,
       CU_NKINDS };
enum { CU_PATH_EXPORTED, CU_PATH_DLSYM, CU_PATH_GPA, CU_NPATHS };

static const char *const cu_kind_name[CU_NKINDS] = {
	"memcpy_dtoh", "memcpy_htod", "memcpy_default", "memcpy_2d", "memcpy_3d",
	"memcpy_peer", "memcpy_batch", "alloc", "free", "host_memory", "get_proc_address",
	"default_dtoh", "default_htod", "default_dtod", "default_htoh", "stream_create",
};
static const char *const cu_path_name[CU_NPATHS] = { "exported", "dlsym", "get_proc_address" };

static atomic_ullong cu_calls[CU_NKINDS];
static atomic_ullong cu_hooked[CU_NPATHS];

/* A kind=Default copy, classified by the table (no driver query). */
static void cu_classify(CUdeviceptr d, CUdeviceptr s)
{
	bool dd = ckc_cuda_mem_kind((void *)(uintptr_t)d) == CKC_MEM_DEVICE;
	bool sd = ckc_cuda_mem_kind((void *)(uintptr_t)s) == CKC_MEM_DEVICE;
	int k = sd ? (dd ? CU_DFLT_DTOD : CU_DFLT_DTOH) : (dd ? CU_DFLT_HTOD : CU_DFLT_HTOH);
	atomic_fetch_add_explicit(&cu_calls[k], 1, memory_order_relaxed);
}


/* ---- the wrapped entry points ---------------------------------------- */

/* kind, exact driver symbol, parameters, arguments, what to record after a
 * successful call */
#define CU_FUNCS(X)                                                                           \
	X(CU_PEER, cuMemcpyPeer, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n), (d, dc, s, sc, n), (void)0) \
	X(CU_PEER, cuMemcpyPeer_ptds, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n), (d, dc, s, sc, n), (void)0) \
	X(CU_PEER, cuMemcpyPeerAsync, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream t), (d, dc, s, sc, n, t), (void)0) \
	X(CU_PEER, cuMemcpyPeerAsync_ptsz, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream t), (d, dc, s, sc, n, t), (void)0) \
	X(CU_FREE, cuMemFree_v2, (CUdeviceptr p), (p), ckc_cu_untrack(p)) \
	X(CU_FREE, cuMemFreeAsync, (CUdeviceptr p, CUstream t), (p, t), ckc_cu_untrack(p)) \
	X(CU_FREE, cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream t), (p, t), ckc_cu_untrack(p)) \
	X(CU_HOSTMEM, cuMemHostRegister_v2, (void *p, size_t n, unsigned f), (p, n, f), ckc_cu_track((CUdeviceptr)(uintptr_t)p, n, CKC_MEM_REGISTERED)) \
	X(CU_ALLOC, cuMemMap, (CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h, unsigned long long f), (p, n, o, h, f), ckc_cu_track(p, n, CKC_MEM_DEVICE)) \
	X(CU_FREE, cuMemUnmap, (CUdeviceptr p, size_t n), (p, n), ckc_cu_untrack_span(p, n)) \
	X(CU_STREAM, cuStreamCreate, (CUstream *p, unsigned f), (p, f), ckc_cu_stream_made(f)) \
	X(CU_STREAM, cuStreamCreateWithPriority, (CUstream *p, unsigned f, int pr), (p, f, pr), ckc_cu_stream_made(f))

/* Each wrapper: count, resolve its own real pointer once, call it. The
 * exported symbol has the driver's exact name, so a program linked with
 * -lcuda reaches it too. */
#define CU_WRAPPER(kind, name, params, args, after)                                   \
	static _Atomic(void *) cu_real_##name;                                         \
	CKC_EXPORT CUresult ckc_cu_##name params __asm__(#name);                       \
	CUresult ckc_cu_##name params                                                  \
	{                                                                              \
		CUresult(*r) params = (CUresult(*) params)ckc_cu_real(&cu_real_##name, #name); \
		if (!r)                                                                \
			return CUDA_ERROR_NOT_INITIALIZED;                             \
		atomic_fetch_add_explicit(&cu_calls[kind], 1, memory_order_relaxed);   \
		if (kind == CU_FREE)                                                   \
			ckc_cu_settle();                                               \
		CUresult rc = r args;                                                  \
		if (rc == CUDA_SUCCESS) {                                              \
			after;                                                         \
		}                                                                      \
		return rc;                                                             \
	}

/* The real function behind a wrapper, resolved from libcuda on first use. */
void *ckc_cu_real(_Atomic(void *) *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	if (p)
		return p;
	void *h = cu_libcuda();
	dlsym_fn rd = ckc_real_dlsym();
	p = h && rd ? rd(h, name) : NULL;
	if (!p || cu_is_ours(p)) {
		ckc_error("libcuda.so.1 has no %s: the call fails", name);
		return NULL;
	}
	atomic_store(slot, p);
	return p;
}

CU_FUNCS(CU_WRAPPER)

/* The entry points with wrappers of their own (below): device capture,
 * restores, the other copies that may touch owed host memory, allocations
 * that give the gpu arena back when the device runs out. */
#define CU_HAND(X)                                                                          \
	X(cuMemcpyDtoH_v2, (void *d, CUdeviceptr s, size_t n))                              \
	X(cuMemcpyDtoH_v2_ptds, (void *d, CUdeviceptr s, size_t n))                         \
	X(cuMemcpyDtoHAsync_v2, (void *d, CUdeviceptr s, size_t n, CUstream t))             \
	X(cuMemcpyDtoHAsync_v2_ptsz, (void *d, CUdeviceptr s, size_t n, CUstream t))        \
	X(cuMemcpyHtoD_v2, (CUdeviceptr d, const void *s, size_t n))                        \
	X(cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void *s, size_t n))                   \
	X(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void *s, size_t n, CUstream t))       \
	X(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void *s, size_t n, CUstream t))  \
	X(cuMemcpy, (CUdeviceptr d, CUdeviceptr s, size_t n))                               \
	X(cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n))                          \
	X(cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream t))              \
	X(cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream t))         \
	X(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *p))                                          \
	X(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *p))                                     \
	X(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *p))                                 \
	X(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *p))                            \
	X(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *p, CUstream t))                         \
	X(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *p, CUstream t))                    \
	X(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *p))                                          \
	X(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *p))                                     \
	X(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *p, CUstream t))                         \
	X(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *p, CUstream t))                    \
	X(cuMemcpyBatchAsync, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *f, CUstream t)) \
	X(cuMemcpyBatchAsync_ptsz, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *f, CUstream t)) \
	X(cuMemcpyBatchAsync_v2, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream t)) \
	X(cuMemAlloc_v2, (CUdeviceptr *p, size_t n))                                        \
	X(cuMemAllocPitch_v2, (CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e)) \
	X(cuMemAllocManaged, (CUdeviceptr *p, size_t n, unsigned f))                        \
	X(cuMemAllocAsync, (CUdeviceptr *p, size_t n, CUstream t))                          \
	X(cuMemAllocAsync_ptsz, (CUdeviceptr *p, size_t n, CUstream t))                     \
	X(cuMemCreate, (CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *pr, unsigned long long f)) \
	X(cuMemFreeHost, (void *p))                                                         \
	X(cuMemHostAlloc, (void **p, size_t n, unsigned f))                                 \
	X(cuMemAllocHost_v2, (void **p, size_t n))                                          \
	X(cuMemHostUnregister, (void *p))

#define CU_HAND_DECL(name, params)                                     \
	static _Atomic(void *) cu_real_##name;                          \
	CKC_EXPORT CUresult ckc_cu_##name params __asm__(#name);
CU_HAND(CU_HAND_DECL)

/* The real function of a hand-written wrapper, or return an error. */
#define CU_REAL(name, params)                                                                  \
	CUresult(*real) params = (CUresult(*) params)ckc_cu_real(&cu_real_##name, #name);        \
	if (!real)                                                                             \
		return CUDA_ERROR_NOT_INITIALIZED


#define CU_COUNT(k) atomic_fetch_add_explicit(&cu_calls[k], 1, memory_order_relaxed)

#define CU_DTOH(name, params, t, async, pt)                                             \
	CUresult ckc_cu_##name params                                                   \
	{                                                                               \
		CU_REAL(name, params);                                                  \
		CU_COUNT(CU_DTOH);                                                      \
		uint64_t t0 = ckc_now_ns();                                             \
		ckc_prog_begin();                                                       \
		CUresult rc_ = CUDA_SUCCESS;                                            \
		if (ckc_cu_capture(d, s, n, t, async, pt, (uintptr_t)__builtin_return_address(0))) { \
			atomic_fetch_add(&ckc_cu_cap_ns, ckc_now_ns() - t0);            \
		} else {                                                                \
			ckc_cu_host_written(d, n);                                      \
			rc_ = real CU_ARGS_##name;                                      \
		}                                                                       \
		ckc_prog_end();                                                         \
		return rc_;                                                             \
	}
#define CU_HTOD(name, params, t, async, pt)                                             \
	CUresult ckc_cu_##name params                                                   \
	{                                                                               \
		CU_REAL(name, params);                                                  \
		CU_COUNT(CU_HTOD);                                                      \
		uint64_t t0 = ckc_now_ns();                                             \
		ckc_prog_begin();                                                       \
		CUresult rc_ = CUDA_SUCCESS;                                            \
		if (ckc_cu_restore(d, s, n, t, async, pt))                              \
			atomic_fetch_add(&ckc_cu_rest_ns, ckc_now_ns() - t0);           \
		else                                                                    \
			rc_ = real CU_ARGS_##name;                                      \
		ckc_prog_end();                                                         \
		return rc_;                                                             \
	}
#define CU_ARGS_cuMemcpyDtoH_v2 (d, s, n)
#define CU_ARGS_cuMemcpyDtoH_v2_ptds (d, s, n)
#define CU_ARGS_cuMemcpyDtoHAsync_v2 (d, s, n, t)
#define CU_ARGS_cuMemcpyDtoHAsync_v2_ptsz (d, s, n, t)
#define CU_ARGS_cuMemcpyHtoD_v2 (d, s, n)
#define CU_ARGS_cuMemcpyHtoD_v2_ptds (d, s, n)
#define CU_ARGS_cuMemcpyHtoDAsync_v2 (d, s, n, t)
#define CU_ARGS_cuMemcpyHtoDAsync_v2_ptsz (d, s, n, t)

CU_DTOH(cuMemcpyDtoH_v2, (void *d, CUdeviceptr s, size_t n), NULL, false, false)
CU_DTOH(cuMemcpyDtoH_v2_ptds, (void *d, CUdeviceptr s, size_t n), NULL, false, true)
CU_DTOH(cuMemcpyDtoHAsync_v2, (void *d, CUdeviceptr s, size_t n, CUstream t), t, true, false)
CU_DTOH(cuMemcpyDtoHAsync_v2_ptsz, (void *d, CUdeviceptr s, size_t n, CUstream t), t, true, true)
CU_HTOD(cuMemcpyHtoD_v2, (CUdeviceptr d, const void *s, size_t n), NULL, false, false)
CU_HTOD(cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void *s, size_t n), NULL, false, true)
CU_HTOD(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void *s, size_t n, CUstream t), t, true, false)
CU_HTOD(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void *s, size_t n, CUstream t), t, true, true)

/* kind=Default: the direction from the address table. */
static CUresult cu_default(void *real, CUdeviceptr d, CUdeviceptr s, size_t n, CUstream t,
			   bool async, bool pt, uintptr_t site)
{
	CU_COUNT(CU_DFLT);
	cu_classify(d, s);
	int dk = ckc_cuda_mem_kind((void *)(uintptr_t)d), sk = ckc_cuda_mem_kind((void *)(uintptr_t)s);
	bool dhost = dk != CKC_MEM_DEVICE && dk != CKC_MEM_MANAGED;
	bool shost = sk != CKC_MEM_DEVICE && sk != CKC_MEM_MANAGED;
	CUresult rc = CUDA_SUCCESS;
	ckc_prog_begin();
	if (dhost && sk == CKC_MEM_DEVICE && ckc_cu_capture((void *)(uintptr_t)d, s, n, t, async, pt, site))
		goto out;
	if (shost && dk == CKC_MEM_DEVICE && ckc_cu_restore(d, (const void *)(uintptr_t)s, n, t, async, pt))
		goto out;
	if (shost)
		ckc_cu_host_read((const void *)(uintptr_t)s, n);
	if (dhost)
		ckc_cu_host_written((const void *)(uintptr_t)d, n);
	rc = async ? ((CUresult(*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))real)(d, s, n, t) :
		     ((CUresult(*)(CUdeviceptr, CUdeviceptr, size_t))real)(d, s, n);
out:
	ckc_prog_end();
	return rc;
}

CUresult ckc_cu_cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{
	CU_REAL(cuMemcpy, (CUdeviceptr, CUdeviceptr, size_t));
	return cu_default((void *)real, d, s, n, NULL, false, false, (uintptr_t)__builtin_return_address(0));
}

CUresult ckc_cu_cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{
	CU_REAL(cuMemcpy_ptds, (CUdeviceptr, CUdeviceptr, size_t));
	return cu_default((void *)real, d, s, n, NULL, false, true, (uintptr_t)__builtin_return_address(0));
}

CUresult ckc_cu_cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream t)
{
	CU_REAL(cuMemcpyAsync, (CUdeviceptr, CUdeviceptr, size_t, CUstream));
	return cu_default((void *)real, d, s, n, t, true, false, (uintptr_t)__builtin_return_address(0));
}

CUresult ckc_cu_cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream t)
{
	CU_REAL(cuMemcpyAsync_ptsz, (CUdeviceptr, CUdeviceptr, size_t, CUstream));
	return cu_default((void *)real, d, s, n, t, true, true, (uintptr_t)__builtin_return_address(0));
}

#define CU_PASS(name, params, args, kind, pre)          \
	CUresult ckc_cu_##name params                   \
	{                                               \
		CU_REAL(name, params);                  \
		CU_COUNT(kind);                         \
		pre;                                    \
		return real args;                       \
	}

CU_PASS(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *p), (p), CU_2D, ckc_cu_2d(p))
CU_PASS(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *p), (p), CU_2D, ckc_cu_2d(p))
CU_PASS(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *p), (p), CU_2D, ckc_cu_2d(p))
CU_PASS(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *p), (p), CU_2D, ckc_cu_2d(p))
CU_PASS(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *p, CUstream t), (p, t), CU_2D, ckc_cu_2d(p))
CU_PASS(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *p, CUstream t), (p, t), CU_2D, ckc_cu_2d(p))
CU_PASS(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *p), (p), CU_3D, ckc_cu_3d(p))
CU_PASS(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *p), (p), CU_3D, ckc_cu_3d(p))
CU_PASS(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *p, CUstream t), (p, t), CU_3D, ckc_cu_3d(p))
CU_PASS(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *p, CUstream t), (p, t), CU_3D, ckc_cu_3d(p))

CU_PASS(cuMemcpyBatchAsync, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *f, CUstream t),
	(d, s, n, c, a, ai, na, f, t), CU_BATCH, ckc_cu_batch(d, s, n, c))
CU_PASS(cuMemcpyBatchAsync_ptsz, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *f, CUstream t),
	(d, s, n, c, a, ai, na, f, t), CU_BATCH, ckc_cu_batch(d, s, n, c))
CU_PASS(cuMemcpyBatchAsync_v2, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream t),
	(d, s, n, c, a, ai, na, t), CU_BATCH, ckc_cu_batch(d, s, n, c))

#define CU_ALLOCW(name, params, args, need, after)                   \
	CUresult ckc_cu_##name params                                \
	{                                                            \
		CU_REAL(name, params);                               \
		CU_COUNT(CU_ALLOC);                                  \
		CUresult rc = real args;                             \
		while (ckc_cu_oom_retry(rc, need))                   \
			rc = real args;                              \
		if (rc == CUDA_SUCCESS) {                            \
			after;                                       \
			ckc_cu_gpu_early();                          \
		}                                                    \
		return rc;                                           \
	}

CU_ALLOCW(cuMemAlloc_v2, (CUdeviceptr *p, size_t n), (p, n), n, ckc_cu_track(*p, n, CKC_MEM_DEVICE))
CU_ALLOCW(cuMemAllocPitch_v2, (CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e), (p, pitch, w, h, e),
	  w * h, ckc_cu_track(*p, *pitch * h, CKC_MEM_DEVICE))
CU_ALLOCW(cuMemAllocManaged, (CUdeviceptr *p, size_t n, unsigned f), (p, n, f), n, ckc_cu_track(*p, n, CKC_MEM_MANAGED))
CU_ALLOCW(cuMemAllocAsync, (CUdeviceptr *p, size_t n, CUstream t), (p, n, t), n, ckc_cu_track(*p, n, CKC_MEM_DEVICE))
CU_ALLOCW(cuMemAllocAsync_ptsz, (CUdeviceptr *p, size_t n, CUstream t), (p, n, t), n, ckc_cu_track(*p, n, CKC_MEM_DEVICE))
CU_ALLOCW(cuMemCreate, (CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *pr, unsigned long long f),
	  (h, n, pr, f), n, (void)0)

/* ---- pinned host allocations (the huge-page ones: cuda_mem.c) ----------- */

CUresult ckc_cu_cuMemHostAlloc(void **p, size_t n, unsigned f)
{
	CU_REAL(cuMemHostAlloc, (void **, size_t, unsigned));
	CU_COUNT(CU_HOSTMEM);
	if (p && ckc_cu_hugepin_alloc(p, n, f))
		return CUDA_SUCCESS;
	CUresult rc = real(p, n, f);
	if (rc == CUDA_SUCCESS)
		ckc_cu_track((CUdeviceptr)(uintptr_t)*p, n, CKC_MEM_PINNED);
	return rc;
}

CUresult ckc_cu_cuMemAllocHost_v2(void **p, size_t n)
{
	CU_REAL(cuMemAllocHost_v2, (void **, size_t));
	CU_COUNT(CU_HOSTMEM);
	if (p && ckc_cu_hugepin_alloc(p, n, 0))
		return CUDA_SUCCESS;
	CUresult rc = real(p, n);
	if (rc == CUDA_SUCCESS)
		ckc_cu_track((CUdeviceptr)(uintptr_t)*p, n, CKC_MEM_PINNED);
	return rc;
}

CUresult ckc_cu_cuMemFreeHost(void *p)
{
	CU_REAL(cuMemFreeHost, (void *));
	CU_COUNT(CU_HOSTMEM);
	ckc_cu_host_freed(p);
	if (ckc_cu_hugepin_free(p))
		return CUDA_SUCCESS;
	CUresult rc = real(p);
	if (rc == CUDA_SUCCESS)
		ckc_cu_untrack((CUdeviceptr)(uintptr_t)p);
	return rc;
}

CUresult ckc_cu_cuMemHostUnregister(void *p)
{
	CU_REAL(cuMemHostUnregister, (void *));
	CU_COUNT(CU_HOSTMEM);
	/* pageable again: what it owes must be filled the pageable way */
	if (p && atomic_load_explicit(&ckc_owed_count, memory_order_relaxed)) {
		uint64_t len = ckc_cu_block_len(p);
		if (len)
			ckc_cu_host_read(p, len);
	}
	CUresult rc = real(p);
	if (rc == CUDA_SUCCESS)
		ckc_cu_untrack((CUdeviceptr)(uintptr_t)p);
	return rc;
}

typedef struct cu_entry {
	const char *name;
	void *wrapper;
	_Atomic(void *) *real;
} cu_entry_t;

/* The table names each wrapper by a hidden alias of its exported symbol:
 * the loader fills the table without looking the names up, which every
 * process that loads the library would pay for at its start. */
#define CU_LOCAL_FUNC(kind, name, params, args, after) \
	extern __typeof__(ckc_cu_##name) cu_local_##name __attribute__((alias(#name), visibility("hidden")));
#define CU_LOCAL_HAND(name, params) \
	extern __typeof__(ckc_cu_##name) cu_local_##name __attribute__((alias(#name), visibility("hidden")));
CU_FUNCS(CU_LOCAL_FUNC)
CU_HAND(CU_LOCAL_HAND)

#define CU_ENTRY(kind, name, params, args, after) { #name, (void *)cu_local_##name, &cu_real_##name },

#define CU_HAND_ENTRY(name, params) { #name, (void *)cu_local_##name, &cu_real_##name },

static const cu_entry_t cu_table[] = {
	CU_FUNCS(CU_ENTRY)
	CU_HAND(CU_HAND_ENTRY)
};

static const cu_entry_t *cu_find(const char *name)
{
	for (size_t i = 0; i < sizeof(cu_table) / sizeof(cu_table[0]); i++)
		if (!strcmp(cu_table[i].name, name))
			return &cu_table[i];
	return NULL;
}

/* A driver function p known by its exact name: the wrapper to hand out in
 * its place (device mode), or p itself. */
static void *cu_swap(const char *name, void *p, int path)
{
	const cu_entry_t *e;

	if (!p || !cu_device_mode() || !(e = cu_find(name)) || cu_is_ours(p))
		return p;
	void *expected = NULL;
	/* the first real pointer of a variant is the one; the same name can
	 * only resolve to the same function */
	atomic_compare_exchange_strong(e->real, &expected, p);
	atomic_fetch_add_explicit(&cu_hooked[path], 1, memory_order_relaxed);
	return e->wrapper;
}

/* ---- cuGetProcAddress, both ABIs ---------------------------------------- */

typedef CUresult (*gpa4_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa5_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static _Atomic(void *) cu_real_gpa4, cu_real_gpa5, cu_real_gpa5_ptsz;

CKC_EXPORT CUresult ckc_cu_gpa4(const char *, void **, int, cuuint64_t) __asm__("cuGetProcAddress");
CKC_EXPORT CUresult ckc_cu_gpa5(const char *, void **, int, cuuint64_t,
				CUdriverProcAddressQueryResult *) __asm__("cuGetProcAddress_v2");
CKC_EXPORT CUresult ckc_cu_gpa5_ptsz(const char *, void **, int, cuuint64_t,
				     CUdriverProcAddressQueryResult *) __asm__("cuGetProcAddress_v2_ptsz");

/* What a lookup returned, as the program should see it. */
static void cu_gpa_fix(const char *symbol, void **pfn)
{
	Dl_info di;

	if (!*pfn || !cu_device_mode())
		return;
	atomic_fetch_add_explicit(&cu_calls[CU_GPA], 1, memory_order_relaxed);
	/* the runtime asks for cuGetProcAddress itself: hand out ours, of
	 * the ABI the driver returned */
	if (!strcmp(symbol, "cuGetProcAddress")) {
		if (!dladdr(*pfn, &di) || di.dli_saddr != *pfn || !di.dli_sname)
			return;
		if (!strcmp(di.dli_sname, "cuGetProcAddress_v2")) {
			atomic_store(&cu_real_gpa5, *pfn);
			*pfn = (void *)ckc_cu_gpa5;
		} else if (!strcmp(di.dli_sname, "cuGetProcAddress")) {
			atomic_store(&cu_real_gpa4, *pfn);
			*pfn = (void *)ckc_cu_gpa4;
		}
		return;
	}
	/* the variant the driver chose (_v2, _ptds, _ptsz...) is the name of
	 * the symbol at that address */
	if (dladdr(*pfn, &di) && di.dli_saddr == *pfn && di.dli_sname)
		*pfn = cu_swap(di.dli_sname, *pfn, CU_PATH_GPA);
}

CUresult ckc_cu_gpa4(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	gpa4_fn r = (gpa4_fn)ckc_cu_real(&cu_real_gpa4, "cuGetProcAddress");
	if (!r)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = r(symbol, pfn, ver, flags);
	if (rc == CUDA_SUCCESS && symbol && pfn)
		cu_gpa_fix(symbol, pfn);
	return rc;
}

static CUresult cu_gpa5_common(_Atomic(void *) *slot, const char *name, const char *symbol,
			       void **pfn, int ver, cuuint64_t flags,
			       CUdriverProcAddressQueryResult *status)
{
	gpa5_fn r = (gpa5_fn)ckc_cu_real(slot, name);
	if (!r)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = r(symbol, pfn, ver, flags, status);
	if (rc == CUDA_SUCCESS && symbol && pfn)
		cu_gpa_fix(symbol, pfn);
	return rc;
}

CUresult ckc_cu_gpa5(const char *symbol, void **pfn, int ver, cuuint64_t flags,
		     CUdriverProcAddressQueryResult *status)
{
	return cu_gpa5_common(&cu_real_gpa5, "cuGetProcAddress_v2", symbol, pfn, ver, flags, status);
}

CUresult ckc_cu_gpa5_ptsz(const char *symbol, void **pfn, int ver, cuuint64_t flags,
			  CUdriverProcAddressQueryResult *status)
{
	return cu_gpa5_common(&cu_real_gpa5_ptsz, "cuGetProcAddress_v2_ptsz", symbol, pfn, ver,
			      flags, status);
}

/* ---- dlsym ------------------------------------------------------------ */

void *ckc_cu_dlsym(void *handle, const char *name)
{
	dlsym_fn rd = ckc_real_dlsym();
	void *p = rd ? rd(handle, name) : NULL;

	/* a global lookup finds this library's exported wrappers first: it
	 * must see the driver's function (or nothing, without libcuda) */
	if (p && cu_is_ours(p)) {
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		p = h && rd ? rd(h, name) : NULL;
		if (h)
			dlclose(h);
	}
	if (!p || !cu_device_mode())
		return p;
	if (!strcmp(name, "cuGetProcAddress_v2") || !strcmp(name, "cuGetProcAddress") ||
	    !strcmp(name, "cuGetProcAddress_v2_ptsz")) {
		if (cu_is_ours(p))
			return p;
		_Atomic(void *) *slot = name[16] == '\0' ? &cu_real_gpa4 :
					name[19] == '\0' ? &cu_real_gpa5 : &cu_real_gpa5_ptsz;
		void *expected = NULL;
		atomic_compare_exchange_strong(slot, &expected, p);
		atomic_fetch_add_explicit(&cu_hooked[CU_PATH_DLSYM], 1, memory_order_relaxed);
		return name[16] == '\0' ? (void *)ckc_cu_gpa4 :
		       name[19] == '\0' ? (void *)ckc_cu_gpa5 : (void *)ckc_cu_gpa5_ptsz;
	}
	return cu_swap(name, p, CU_PATH_DLSYM);
}

/* ---- statistics --------------------------------------------------------- */

static void cu_stats(ckc_stats_t *s)
{
	bool seen = false;
	for (int i = 0; i < CU_NKINDS && i < CKC_CUDA_KINDS; i++) {
		s->cuda_calls[i] = atomic_load(&cu_calls[i]);
		s->cuda_kind_name[i] = cu_kind_name[i];
		seen |= s->cuda_calls[i] != 0;
	}
	for (int i = 0; i < CU_NPATHS && i < CKC_CUDA_PATHS; i++) {
		s->cuda_hooked[i] = atomic_load(&cu_hooked[i]);
		s->cuda_path_name[i] = cu_path_name[i];
		seen |= s->cuda_hooked[i] != 0;
	}
	s->cuda_nkinds = CU_NKINDS < CKC_CUDA_KINDS ? CU_NKINDS : CKC_CUDA_KINDS;
	s->cuda_npaths = CU_NPATHS;
	s->cuda_seen = seen;
	ckc_cu_capture_stats(s);
}

/* The driver's own functions, for the gpu tier (never a wrapper). */
static void *cu_driver_sym(const char *name)
{
	void *h = cu_libcuda();
	dlsym_fn rd = ckc_real_dlsym();
	void *p = h && rd ? rd(h, name) : NULL;
	return p && !cu_is_ours(p) ? p : NULL;
}

CKC_START_PATH void ckc_cuda_services(ckc_services_t *svc)
{
	svc->gpu_sym = cu_driver_sym;
	svc->gpu_settle = ckc_cu_settle; /* returns at once while nothing is pending */
	svc->stats_extra = cu_stats;
	svc->host_kind = ckc_cuda_mem_kind;
}

#endif /* HAVE_CUDA_H */