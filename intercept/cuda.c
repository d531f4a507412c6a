/* CUDA driver interception. Programs reach the driver three ways (CUDA.md):
 * the exported cu* symbols, dlsym(libcuda, name), and cuGetProcAddress (both
 * ABIs), which the runtime and PyTorch use for everything. Each wrapped entry
 * point is keyed by its exact versioned name (_v2, _ptds, _ptsz) and keeps
 * its own real pointer. libcuda.so.1 is opened only when the program itself
 * calls into CUDA; a process without CUDA never touches it.
 *
 * In copy mode the hooks hand out the driver's own functions (nothing of
 * CUDA is touched); in device mode they hand out the wrappers, which count
 * every copy by kind and path (what device capture builds on). */
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
	X(CU_STREAM, cuStreamCreate, (CUstream *p, unsigned f), (p, f), cu_stream_made(f)) \
	X(CU_STREAM, cuStreamCreateWithPriority, (CUstream *p, unsigned f, int pr), (p, f, pr), cu_stream_made(f))

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
			cu_settle();                                                   \
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

static void cu_settle(void);
static void cu_stream_made(unsigned flags);

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

/* ---- driver functions of device capture ------------------------------- */

static _Atomic(void *) cx_dtod, cx_dtoh, cx_htod, cx_sync, cx_ctx, cx_dev, cx_evc, cx_evr, cx_evs, cx_evd, cx_evq;
typedef CUresult (*dtod_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t, CUstream);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*sync_fn)(CUstream);

static CUresult cx_copy_dtod(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream t)
{
	dtod_fn f = CX(cx_dtod, "cuMemcpyDtoDAsync_v2", dtod_fn);
	return f ? f(d, s, n, t) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult cx_copy_dtoh(void *d, CUdeviceptr s, size_t n, CUstream t)
{
	dtoh_fn f = CX(cx_dtoh, "cuMemcpyDtoHAsync_v2", dtoh_fn);
	return n == 0 ? CUDA_SUCCESS : f ? f(d, s, n, t) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult cx_copy_htod(CUdeviceptr d, const void *s, size_t n, CUstream t)
{
	htod_fn f = CX(cx_htod, "cuMemcpyHtoDAsync_v2", htod_fn);
	return n == 0 ? CUDA_SUCCESS : f ? f(d, s, n, t) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult cx_stream_sync(CUstream t)
{
	sync_fn f = CX(cx_sync, "cuStreamSynchronize", sync_fn);
	return f ? f(t) : CUDA_ERROR_NOT_INITIALIZED;
}

static atomic_int cu_gpu_state; /* 0 untried, 1 up, -1 off */

/* Events shared by owed entries: counted, destroyed with the last user. */
typedef struct cu_ev {
	CUevent ev;
	CUcontext ctx;
	atomic_int refs;
} cu_ev_t;

/* Spent events are kept for reuse (creating one costs microseconds). */
#define EV_KEEP 32
static cu_ev_t *ev_free[EV_KEEP];
static int ev_nfree;
static ckc_mutex_t ev_lock = CKC_MUTEX_INIT(CU_EVENTS);
CKC_LOCKS_AT_START(ev_lock, ckc_locks_add, &ev_lock)

static void cu_ev_destroy(cu_ev_t *e)
{
	CUresult (*destroy)(CUevent) = CX(cx_evd, "cuEventDestroy_v2", CUresult(*)(CUevent));
	if (destroy)
		destroy(e->ev);
	free(e);
}

/* A new event of the current context ctx, or NULL. */
static cu_ev_t *cu_ev_make(CUcontext ctx)
{
	CUresult (*create)(CUevent *, unsigned) = CX(cx_evc, "cuEventCreate", CUresult(*)(CUevent *, unsigned));
	cu_ev_t *e = malloc(sizeof(*e));
	if (!e || !create || create(&e->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
		free(e);
		return NULL;
	}
	e->ctx = ctx;
	return e;
}

/* An unused event goes to the spares (false: there was no room). */
static bool cu_ev_keep(cu_ev_t *e)
{
	ckc_mutex_lock(&ev_lock);
	bool kept = ev_nfree < EV_KEEP && atomic_load(&cu_gpu_state) > 0;
	if (kept)
		ev_free[ev_nfree++] = e;
	ckc_mutex_unlock(&ev_lock);
	return kept;
}

static cu_ev_t *cu_ev_record(CUstream t)
{
	CUresult (*record)(CUevent, CUstream) = CX(cx_evr, "cuEventRecord", CUresult(*)(CUevent, CUstream));
	CUresult (*ctxf)(CUcontext *) = CX(cx_ctx, "cuCtxGetCurrent", CUresult(*)(CUcontext *));
	CUcontext ctx = NULL;
	if (!record || !ctxf || ctxf(&ctx) != CUDA_SUCCESS)
		return NULL;
	/* an event is recorded on streams of the context it was made in */
	cu_ev_t *e = NULL;
	ckc_mutex_lock(&ev_lock);
	for (int i = ev_nfree - 1; i >= 0 && !e; i--)
		if (ev_free[i]->ctx == ctx) {
			e = ev_free[i];
			ev_free[i] = ev_free[--ev_nfree];
		}
	ckc_mutex_unlock(&ev_lock);
	if (!e && !(e = cu_ev_make(ctx)))
		return NULL;
	atomic_init(&e->refs, 1);
	if (record(e->ev, t) != CUDA_SUCCESS) {
		cu_ev_destroy(e);
		return NULL;
	}
	return e;
}

/* Waits for a device copy of the cache's: the event is polled, and a wait
 * longer than EV_WAIT_WARN_NS is reported (once) with what it waits for;
 * the device completes the copy or the program's next call on its stream
 * would not return either. */
#define EV_WAIT_WARN_NS 10000000000ull
static void cu_ev_wait(void *p)
{
	cu_ev_t *e = p;
	CUresult (*query)(CUevent) = CX(cx_evq, "cuEventQuery", CUresult(*)(CUevent));
	CUresult (*sync)(CUevent) = CX(cx_evs, "cuEventSynchronize", CUresult(*)(CUevent));
	if (!e)
		return;
	if (!query) {
		if (sync)
			sync(e->ev);
		return;
	}
	uint64_t t0 = ckc_now_ns(), pause = 20000;
	bool said = false;
	for (;;) {
		CUresult r = query(e->ev);
		if (r != CUDA_ERROR_NOT_READY)
			return;
		uint64_t now = ckc_now_ns();
		/* most copies end within a fraction of a millisecond: asked
		 * for without a pause first, as cuEventSynchronize would spin */
		if (now - t0 < 200000)
			continue;
		if (!said && now - t0 > EV_WAIT_WARN_NS) {
			said = true;
			ckc_warn("device capture: a device copy of the cache has not completed after %.0f s; "
				 "still waiting for the device",
				 (double)(now - t0) / 1e9);
			ckc_backtrace_log("device capture: a long wait for the device", NULL);
		}
		struct timespec ts = { 0, (long)pause };
		nanosleep(&ts, NULL);
		if (pause < 1000000)
			pause *= 2;
	}
}

static void cu_ev_get(void *p)
{
	atomic_fetch_add(&((cu_ev_t *)p)->refs, 1);
}

static void cu_ev_put(void *p)
{
	cu_ev_t *e = p;
	if (atomic_fetch_sub(&e->refs, 1) != 1)
		return;
	/* a recorded event may be recorded again: a later wait on it waits
	 * for the later work only, and nothing waits on a spent one */
	if (!cu_ev_keep(e))
		cu_ev_destroy(e);
}

static const ckc_owed_ops_t cu_owed_ops = { cu_ev_wait, cu_ev_get, cu_ev_put };

/* A few spare events of the current context ctx, made when its device's
 * region is set up (at the program's first allocation there), so that the
 * first capture does not make them. */
#define EV_STOCK 4
static void cu_ev_stock(CUcontext ctx)
{
	for (int i = 0; i < EV_STOCK; i++) {
		cu_ev_t *e = cu_ev_make(ctx);
		if (!e)
			return;
		if (!cu_ev_keep(e)) {
			cu_ev_destroy(e);
			return;
		}
	}
}

/* ---- the gpu tier's first use ----------------------------------------- */

static atomic_uint cu_gpu_devs, cu_gpu_tried; /* devices with a region; tried */
static atomic_ullong cap_captured, cap_bytes, cap_restored, cap_passed, cap_ns, rest_ns;

static void cu_exit(void)
{
	ckc_enter();
	ckc_owed_fill_all();
	atomic_store(&cu_gpu_state, -1);
	ckc_gpu_exit();
	ckc_leave();
}

static bool cu_read_ok(const void *buf, size_t n);

/* The gpu tier's region on the device of the calling thread's context,
 * set up on its first use there: true and that device in *devp when it is
 * up. */
static bool cu_gpu_up(int *devp)
{
	int st = atomic_load_explicit(&cu_gpu_state, memory_order_acquire);
	if (st < 0)
		return false;
	CUresult (*ctxf)(CUcontext *) = CX(cx_ctx, "cuCtxGetCurrent", CUresult(*)(CUcontext *));
	CUresult (*devf)(CUdevice *) = CX(cx_dev, "cuCtxGetDevice", CUresult(*)(CUdevice *));
	CUcontext ctx = NULL;
	CUdevice dev = 0;
	if (!ctxf || !devf || ctxf(&ctx) != CUDA_SUCCESS || !ctx || devf(&dev) != CUDA_SUCCESS ||
	    dev < 0 || dev >= CKC_GPU_MAXDEV)
		return false;
	uint32_t bit = 1u << dev;
	if (devp)
		*devp = (int)dev;
	if (atomic_load_explicit(&cu_gpu_devs, memory_order_acquire) & bit)
		return true;
	if (!ckc_engine_ready() || (atomic_fetch_or(&cu_gpu_tried, bit) & bit))
		return false;
	ckc_enter();
	int rc = ckc_gpu_attach(ctx, (int)dev);
	ckc_leave();
	if (rc == -ENODEV && !atomic_load(&cu_gpu_devs))
		atomic_store(&cu_gpu_state, -1);
	if (rc)
		return false;
	if (atomic_exchange(&cu_gpu_state, 1) == 0) {
		ckc_owed_set_ops(&cu_owed_ops);
		ckc_owed_read_ok = cu_read_ok;
		/* runs before the runtime's own exit handlers, which were
		 * registered at its start, earlier */
		atexit(cu_exit);
	}
	atomic_fetch_or_explicit(&cu_gpu_devs, bit, memory_order_release);
	cu_ev_stock(ctx);
	return true;
}

/* Whether the program's free(3) and munmap(2) are this library's: an
 * allocator that comes before it (one preloaded first, such as a
 * sanitizer's, or one linked into the program) frees memory the library
 * never hears of, and pageable memory it owed could be handed out again
 * while still recorded as owed. Pageable memory is then never owed (pinned
 * memory is given back through the driver, which the library sees). */
static atomic_int cu_pageable_known; /* 0 not yet, 1 safe, -1 not */

static bool cu_pageable_safe(void)
{
	atomic_int *const known = &cu_pageable_known;
	int k = atomic_load_explicit(known, memory_order_relaxed);
	if (k)
		return k > 0;
	bool safe = ckc_free_is_ours();
	if (!safe)
		ckc_warn("device capture: the program's free() is not this library's (another allocator or "
			 "a sanitizer comes before it): only pinned host memory is captured, pageable copies "
			 "are made as asked");
	atomic_store(known, safe ? 1 : -1);
	return safe;
}

static bool cu_host_ok(const void *p, bool *pinned)
{
	int k = ckc_cuda_mem_kind(p);
	if (k == CKC_MEM_DEVICE || k == CKC_MEM_MANAGED)
		return false;
	*pinned = k == CKC_MEM_PINNED || k == CKC_MEM_REGISTERED;
	if (*pinned)
		return !ckc_capture_pageable_only();
	return cu_pageable_safe();
}

static bool cu_read_ok(const void *buf, size_t n)
{
	bool pinned;
	return atomic_load(&cu_gpu_state) > 0 && n >= ckc_capture_min() && cu_host_ok(buf, &pinned);
}

/* The stream a copy ran on: the legacy or the per-thread default stream
 * for the synchronous forms and for stream 0 of the _ptsz forms. */
static CUstream cu_stream(CUstream t, bool async, bool per_thread)
{
	if (!async || !t)
		return per_thread ? CU_STREAM_PER_THREAD : (t ? t : CU_STREAM_LEGACY);
	return t;
}

/* A host range the driver is about to write whole. */
static void cu_host_written(const void *p, size_t n)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		return;
	ckc_enter();
	ckc_owed_will_write(p, n);
	ckc_leave();
}

/* A host range the driver is about to read: owed bytes are filled. */
static void cu_host_read(const void *p, size_t n)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || !p || !n)
		return;
	ckc_enter();
	ckc_owed_cut(p, n, true);
	ckc_leave();
}

/* This thread's pinned buffer for the edges of a synchronous capture (two
 * pages), or NULL. */
static _Atomic(void *) cx_mah;
static __thread char *edge_bounce;
static __thread bool edge_bounce_tried;

static char *cu_edge_bounce(void)
{
	if (!edge_bounce_tried) {
		edge_bounce_tried = true;
		edge_bounce = ckc_gpu_pinned_slot(2 * ckc_page_size());
		CUresult (*mah)(void **, size_t) = CX(cx_mah, "cuMemAllocHost_v2", CUresult(*)(void **, size_t));
		void *p = NULL;
		if (!edge_bounce && mah && mah(&p, 2 * ckc_page_size()) == CUDA_SUCCESS)
			edge_bounce = p;
	}
	return edge_bounce;
}

/* ---- deferred completion of synchronous captures -----------------------
 * A synchronous device-to-host copy must not return before the device
 * bytes were read: the program may change them next. While every stream of
 * the program is ordered with the legacy default stream (none was made
 * non-blocking, no per-thread default stream is used), whatever the program
 * does to device memory next runs after the capture's device copy in stream
 * order; the capture then returns once the edges are in host memory, and
 * the device copy completes behind it. The cache's own reads of the gpu
 * tier, a free of device memory and a fill of owed pages wait for it
 * first (cu_settle). */
static atomic_bool cu_unordered;
static cu_ev_t *cap_pending[CKC_GPU_MAXDEV]; /* each device's last deferred capture (ev_lock) */
static atomic_int cap_npending;
static atomic_ullong cap_deferred;

static void cu_settle(void)
{
	if (!atomic_load_explicit(&cap_npending, memory_order_acquire))
		return;
	for (int d = 0; d < CKC_GPU_MAXDEV; d++) {
		ckc_mutex_lock(&ev_lock);
		cu_ev_t *e = cap_pending[d];
		if (e)
			cu_ev_get(e);
		ckc_mutex_unlock(&ev_lock);
		if (!e)
			continue;
		cu_ev_wait(e);
		ckc_mutex_lock(&ev_lock);
		bool last = cap_pending[d] == e;
		if (last) {
			cap_pending[d] = NULL;
			atomic_fetch_sub(&cap_npending, 1);
		}
		ckc_mutex_unlock(&ev_lock);
		if (last)
			cu_ev_put(e);
		cu_ev_put(e);
	}
}

/* e: the latest deferred capture on device dev. */
static void cu_pending(int dev, cu_ev_t *e)
{
	cu_ev_get(e);
	ckc_mutex_lock(&ev_lock);
	cu_ev_t *old = cap_pending[dev];
	cap_pending[dev] = e;
	if (!old)
		atomic_fetch_add(&cap_npending, 1);
	ckc_mutex_unlock(&ev_lock);
	if (old)
		cu_ev_put(old);
}

static void cu_stream_made(unsigned flags)
{
	if (flags & CU_STREAM_NON_BLOCKING)
		atomic_store(&cu_unordered, true);
}

/* The edges of a capture of [d, d+n) from src whose whole pages are
 * [a, b): [d, a) to lo and [b, d+n) to hi, on stream s. */
static CUresult cu_copy_edges(void *lo, void *hi, CUdeviceptr src, uintptr_t d, size_t n, uintptr_t a,
			      uintptr_t b, CUstream s)
{
	CUresult r = cx_copy_dtoh(lo, src, a - d, s);
	return r == CUDA_SUCCESS ? cx_copy_dtoh(hi, src + (b - d), d + n - b, s) : r;
}

/* Device capture of a device-to-host copy: a device-to-device copy into the
 * gpu tier on the program's stream, the host pages owed. False: the caller
 * makes the real copy. */
static bool cu_capture(void *dst, CUdeviceptr src, size_t n, CUstream t, bool async, bool pt, uintptr_t site)
{
	bool pinned;
	uintptr_t ps = ckc_page_size(), d = (uintptr_t)dst;
	uintptr_t a = (d + ps - 1) & ~(ps - 1), b = (d + n) & ~(ps - 1);

	int dev;
	if (!cu_device_mode() || n < ckc_capture_min() || b <= a || !cu_host_ok(dst, &pinned) ||
	    !cu_gpu_up(&dev))
		return false;
	if (!ckc_owed_site_ok(site)) {
		/* what this call copied was touched before use, lately: the
		 * copy as asked costs less than a capture and a fill */
		atomic_fetch_add(&cap_passed, 1);
		return false;
	}
	ckc_ref_t *ref;
	uint64_t dptr;
	ckc_enter();
	/* the copy in the arena keeps the source's alignment: the driver's
	 * device-to-device copy is quickest between equally aligned ends */
	int rc = ckc_capture_begin(n, (unsigned)(src & (ps - 1)), dev, &ref, &dptr);
	ckc_leave();
	if (rc) {
		atomic_fetch_add(&cap_passed, 1);
		return false;
	}
	CUstream s = cu_stream(t, async, pt);
	/* the edges, whose pages hold other data too, as the program asked:
	 * for a synchronous copy through a small pinned buffer (no staged
	 * pageable transfer); when deferred, before the device copy so that
	 * they can be waited for alone. A deferred copy returns once the
	 * stream's work before it is done, as a synchronous copy does, edges
	 * or none (a page-aligned buffer has none). Owed bytes of the partial
	 * pages are filled first: the copy writes part of them. */
	bool edges = a > d || b < d + n;
	if (edges) {
		ckc_enter();
		ckc_owed_edges_fill(d, n);
		ckc_leave();
	}
	char *bounce = async || !edges ? NULL : cu_edge_bounce();
	bool defer = !async && (bounce || !edges) && !pt &&
		     !atomic_load_explicit(&cu_unordered, memory_order_relaxed);
	cu_ev_t *eev = NULL, *ev = NULL;
	CUresult r = CUDA_SUCCESS;
	if (defer) {
		if (edges)
			r = cu_copy_edges(bounce, bounce + ps, src, d, n, a, b, s);
		if (r == CUDA_SUCCESS && !(eev = cu_ev_record(s)))
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r == CUDA_SUCCESS)
		r = cx_copy_dtod((CUdeviceptr)dptr, src, n, s);
	if (r != CUDA_SUCCESS) {
		cx_stream_sync(s);
		if (eev)
			cu_ev_put(eev);
		ckc_ref_put(ref);
		atomic_fetch_add(&cap_passed, 1);
		return false;
	}
	if (!defer && edges)
		r = bounce ? cu_copy_edges(bounce, bounce + ps, src, d, n, a, b, s) :
			     cu_copy_edges(dst, (void *)b, src, d, n, a, b, s);
	if (r == CUDA_SUCCESS && (async || defer))
		ev = cu_ev_record(s);
	if (r == CUDA_SUCCESS && defer && ev) {
		cu_ev_wait(eev);
	} else if (r == CUDA_SUCCESS && (!async || !ev)) {
		/* no event: waited for here */
		defer = false;
		r = cx_stream_sync(s);
	}
	if (eev)
		cu_ev_put(eev);
	if (r == CUDA_SUCCESS && bounce) {
		memcpy(dst, bounce, a - d);
		memcpy((void *)b, bounce + ps, d + n - b);
	}
	if (r == CUDA_SUCCESS && defer)
		cu_pending(dev, ev);
	ckc_enter();
	rc = r == CUDA_SUCCESS ? ckc_owed_add_len(a, b, d, n, ref, pinned, ev, defer, site) : -EIO;
	if (rc && r != CUDA_SUCCESS)
		ckc_owed_cut((void *)a, b - a, false);
	ckc_leave();
	if (rc) {
		/* nothing is owed there now: the interior as asked, too */
		if (r == CUDA_SUCCESS)
			r = cx_copy_dtoh((void *)a, src + (a - d), b - a, s);
		if (r == CUDA_SUCCESS)
			cx_stream_sync(s);
		if (ev)
			cu_ev_put(ev);
		ckc_ref_put(ref);
		atomic_fetch_add(&cap_passed, 1);
		ckc_backtrace_log("device capture: a capture fell back to a plain copy", NULL);
		return true;
	}
	atomic_fetch_add(&cap_captured, 1);
	atomic_fetch_add(&cap_bytes, n);
	if (defer)
		atomic_fetch_add(&cap_deferred, 1);
	return true;
}

/* A host-to-device copy from owed host memory: a device-to-device copy out
 * of the gpu tier (and the rest from host memory). False: the caller makes
 * the real copy (owed bytes were filled first). */
static bool cu_restore(CUdeviceptr dst, const void *src, size_t n, CUstream t, bool async, bool pt)
{
	uintptr_t s0 = (uintptr_t)src, s1 = s0 + n;
	ckc_owed_plan_t pl;

	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || !cu_device_mode())
		return false;
	ckc_enter();
	ckc_owed_edges_fill(s0, n);
	bool found = ckc_owed_plan(s0, n, &pl);
	uint64_t dsrc = 0;
	bool ok = found && ckc_ref_addr(pl.e.ref, pl.lo - pl.e.cap_start, pl.hi - pl.lo, &dsrc) == 0;
	ckc_leave();
	/* from the region of the device the copy goes to (another device's
	 * memory is not mapped for it) */
	int dev;
	if (ok && (!cu_gpu_up(&dev) || ckc_gpu_device_of(dsrc) != dev))
		ok = false;
	if (!ok) {
		if (found) {
			ckc_enter();
			ckc_owed_plan_done(&pl, NULL);
			ckc_leave();
		}
		cu_host_read(src, n);
		return false;
	}
	uint64_t w0 = ckc_now_ns();
	if (pl.e.ready)
		cu_ev_wait(pl.e.ready);
	CUstream s = cu_stream(t, async, pt);
	/* a deferred capture is ordered with the legacy stream only */
	if (s != CU_STREAM_LEGACY)
		cu_settle();
	uint64_t waited = ckc_now_ns() - w0;
	uintptr_t lo = pl.lo, hi = pl.hi;
	CUresult r = cx_copy_dtod(dst + (lo - s0), (CUdeviceptr)dsrc, hi - lo, s);
	if (r == CUDA_SUCCESS)
		r = cx_copy_htod(dst, src, lo - s0, s);
	if (r == CUDA_SUCCESS)
		r = cx_copy_htod(dst + (hi - s0), (const void *)hi, s1 - hi, s);
	/* A synchronous copy from pageable memory returns, as CUDA's own
	 * does, once the host bytes are no longer needed: the device copy
	 * completes in stream order. From pinned memory it is waited for. */
	bool wait = !async && pl.e.pinned;
	cu_ev_t *ev = NULL;
	if (r == CUDA_SUCCESS && !wait)
		ev = cu_ev_record(s);
	if (r == CUDA_SUCCESS && !ev) {
		w0 = ckc_now_ns();
		r = cx_stream_sync(s);
		waited += ckc_now_ns() - w0;
	}
	atomic_fetch_add(&ckc_owed_st.restore_wait_ns, waited);
	ckc_enter();
	ckc_owed_plan_done(&pl, ev);
	ckc_leave();
	if (r != CUDA_SUCCESS) {
		/* the real copy, from filled host memory */
		cu_host_read(src, n);
		return false;
	}
	atomic_fetch_add(&cap_restored, 1);
	return true;
}

#define CU_COUNT(k) atomic_fetch_add_explicit(&cu_calls[k], 1, memory_order_relaxed)

#define CU_DTOH(name, params, t, async, pt)                                             \
	CUresult ckc_cu_##name params                                                   \
	{                                                                               \
		CU_REAL(name, params);                                                  \
		CU_COUNT(CU_DTOH);                                                      \
		uint64_t t0 = ckc_now_ns();                                             \
		ckc_prog_begin();                                                       \
		CUresult rc_ = CUDA_SUCCESS;                                            \
		if (cu_capture(d, s, n, t, async, pt, (uintptr_t)__builtin_return_address(0))) { \
			atomic_fetch_add(&cap_ns, ckc_now_ns() - t0);                   \
		} else {                                                                \
			cu_host_written(d, n);                                          \
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
		if (cu_restore(d, s, n, t, async, pt))                                  \
			atomic_fetch_add(&rest_ns, ckc_now_ns() - t0);                  \
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
	if (dhost && sk == CKC_MEM_DEVICE && cu_capture((void *)(uintptr_t)d, s, n, t, async, pt, site))
		goto out;
	if (shost && dk == CKC_MEM_DEVICE && cu_restore(d, (const void *)(uintptr_t)s, n, t, async, pt))
		goto out;
	if (shost)
		cu_host_read((const void *)(uintptr_t)s, n);
	if (dhost)
		cu_host_written((const void *)(uintptr_t)d, n);
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

/* 2-D and 3-D copies pass through; the host memory they read or write
 * (its bounding span) is filled first. */
static void cu_host_span(CUmemorytype type, const void *host, size_t x, size_t y, size_t z,
			 size_t pitch, size_t height, size_t w, size_t h, size_t depth)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		return;
	if (type != CU_MEMORYTYPE_HOST && type != CU_MEMORYTYPE_UNIFIED)
		return;
	if (!host || !w || !h || !depth)
		return;
	size_t slice = pitch * (height ? height : 1);
	size_t first = x + y * pitch + z * slice;
	size_t last = first + (depth - 1) * slice + (h - 1) * pitch + w;
	cu_host_read((const char *)host + first, last - first);
}

static void cu_2d(const CUDA_MEMCPY2D *p)
{
	if (!p)
		return;
	cu_host_span(p->srcMemoryType, p->srcHost, p->srcXInBytes, p->srcY, 0, p->srcPitch, 0,
		     p->WidthInBytes, p->Height, 1);
	cu_host_span(p->dstMemoryType, p->dstHost, p->dstXInBytes, p->dstY, 0, p->dstPitch, 0,
		     p->WidthInBytes, p->Height, 1);
}

static void cu_3d(const CUDA_MEMCPY3D *p)
{
	if (!p)
		return;
	cu_host_span(p->srcMemoryType, p->srcHost, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch,
		     p->srcHeight, p->WidthInBytes, p->Height, p->Depth);
	cu_host_span(p->dstMemoryType, p->dstHost, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
		     p->dstHeight, p->WidthInBytes, p->Height, p->Depth);
}

#define CU_PASS(name, params, args, kind, pre)          \
	CUresult ckc_cu_##name params                   \
	{                                               \
		CU_REAL(name, params);                  \
		CU_COUNT(kind);                         \
		pre;                                    \
		return real args;                       \
	}

CU_PASS(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *p), (p), CU_2D, cu_2d(p))
CU_PASS(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *p), (p), CU_2D, cu_2d(p))
CU_PASS(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *p), (p), CU_2D, cu_2d(p))
CU_PASS(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *p), (p), CU_2D, cu_2d(p))
CU_PASS(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *p, CUstream t), (p, t), CU_2D, cu_2d(p))
CU_PASS(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *p, CUstream t), (p, t), CU_2D, cu_2d(p))
CU_PASS(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *p), (p), CU_3D, cu_3d(p))
CU_PASS(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *p), (p), CU_3D, cu_3d(p))
CU_PASS(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *p, CUstream t), (p, t), CU_3D, cu_3d(p))
CU_PASS(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *p, CUstream t), (p, t), CU_3D, cu_3d(p))

/* Batches: every pointer that may be host memory is filled first. */
static void cu_batch(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || !d || !s || !n)
		return;
	for (size_t i = 0; i < c; i++) {
		cu_host_read((const void *)(uintptr_t)s[i], n[i]);
		cu_host_read((const void *)(uintptr_t)d[i], n[i]);
	}
}

CU_PASS(cuMemcpyBatchAsync, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *f, CUstream t),
	(d, s, n, c, a, ai, na, f, t), CU_BATCH, cu_batch(d, s, n, c))
CU_PASS(cuMemcpyBatchAsync_ptsz, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *f, CUstream t),
	(d, s, n, c, a, ai, na, f, t), CU_BATCH, cu_batch(d, s, n, c))
CU_PASS(cuMemcpyBatchAsync_v2, (CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c, CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream t),
	(d, s, n, c, a, ai, na, t), CU_BATCH, cu_batch(d, s, n, c))

/* Device capture sets its arena up at the program's first device
 * allocation, so that it is mapped before the first checkpoint. */
static void cu_gpu_early(void)
{
	if (atomic_load_explicit(&cu_gpu_state, memory_order_relaxed) >= 0 && cu_device_mode())
		cu_gpu_up(NULL);
}

/* Allocations: when the device is out of memory, the gpu arena gives some
 * back and the allocation is tried again. */
static bool cu_oom_retry(CUresult rc, size_t need)
{
	int dev;
	if (rc != CUDA_ERROR_OUT_OF_MEMORY || atomic_load(&cu_gpu_state) <= 0 || !cu_gpu_up(&dev))
		return false;
	ckc_enter();
	uint64_t got = ckc_gpu_release(dev, need ? need : 1);
	ckc_leave();
	return got > 0;
}

#define CU_ALLOCW(name, params, args, need, after)                   \
	CUresult ckc_cu_##name params                                \
	{                                                            \
		CU_REAL(name, params);                               \
		CU_COUNT(CU_ALLOC);                                  \
		CUresult rc = real args;                             \
		while (cu_oom_retry(rc, need))                       \
			rc = real args;                              \
		if (rc == CUDA_SUCCESS) {                            \
			after;                                       \
			cu_gpu_early();                              \
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

/* Pinned memory given back: what it owes is dropped. */
static void cu_host_freed(void *p)
{
	if (!p || !atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		return;
	uint64_t len = ckc_cu_block_len(p);
	if (len) {
		ckc_enter();
		ckc_owed_cut(p, len, false);
		ckc_leave();
	}
}

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
	cu_host_freed(p);
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
			cu_host_read(p, len);
	}
	CUresult rc = real(p);
	if (rc == CUDA_SUCCESS)
		ckc_cu_untrack((CUdeviceptr)(uintptr_t)p);
	return rc;
}

/* Statistics of device capture, for cu_stats. */
static void cu_capture_stats(ckc_stats_t *s)
{
	s->capture_seen = cu_device_mode();
	s->cap_pageable = atomic_load(&cu_pageable_known) >= 0;
	s->cap_huge_pinned = ckc_cu_hugepins_made();
	s->cap_captured = atomic_load(&cap_captured);
	s->cap_captured_bytes = atomic_load(&cap_bytes);
	s->cap_restored_d2d = atomic_load(&cap_restored);
	s->cap_passed = atomic_load(&cap_passed);
	s->cap_deferred = atomic_load(&cap_deferred);
	s->cap_filled = ckc_owed_st.filled;
	s->cap_dropped = ckc_owed_st.dropped;
	s->cap_capture_s = (double)atomic_load(&cap_ns) / 1e9;
	s->cap_restore_s = (double)atomic_load(&rest_ns) / 1e9;
	s->cap_write_s = (double)atomic_load(&ckc_owed_st.write_ns) / 1e9;
	s->cap_read_s = (double)atomic_load(&ckc_owed_st.read_ns) / 1e9;
	s->cap_fill_s = (double)atomic_load(&ckc_owed_st.fill_ns) / 1e9;
	s->cap_read_engine_s = (double)atomic_load(&ckc_owed_st.read_engine_ns) / 1e9;
	s->cap_read_owe_s = (double)atomic_load(&ckc_owed_st.read_owe_ns) / 1e9;
	s->cap_restore_wait_s = (double)atomic_load(&ckc_owed_st.restore_wait_ns) / 1e9;
}

typedef struct cu_entry {
	const char *name;
	void *wrapper;
	_Atomic(void *) *real;
} cu_entry_t;

#define CU_ENTRY(kind, name, params, args, after) { #name, (void *)ckc_cu_##name, &cu_real_##name },

#define CU_HAND_ENTRY(name, params) { #name, (void *)ckc_cu_##name, &cu_real_##name },

static cu_entry_t cu_table[] = {
	CU_FUNCS(CU_ENTRY)
	CU_HAND(CU_HAND_ENTRY)
};

static cu_entry_t *cu_find(const char *name)
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
	cu_entry_t *e;

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
	cu_capture_stats(s);
}

/* The driver's own functions, for the gpu tier (never a wrapper). */
static void *cu_driver_sym(const char *name)
{
	void *h = cu_libcuda();
	dlsym_fn rd = ckc_real_dlsym();
	void *p = h && rd ? rd(h, name) : NULL;
	return p && !cu_is_ours(p) ? p : NULL;
}

void ckc_cuda_services(ckc_services_t *svc)
{
	svc->gpu_sym = cu_driver_sym;
	svc->gpu_settle = cu_settle; /* returns at once while nothing is pending */
	svc->stats_extra = cu_stats;
	svc->host_kind = ckc_cuda_mem_kind;
}

#endif /* HAVE_CUDA_H */
