/* Device capture's algorithms: the gpu tier's first use on a device, a
 * device-to-host copy captured into it (ckc_cu_capture, its edges, the
 * deferred completion of synchronous ones), a host-to-device copy restored
 * from it (ckc_cu_restore), the owed host memory that other copies and
 * frees touch, and the statistics of capture. The wrappers that call these
 * are cuda.c's. */
#include "config.h"

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "backtrace.h"
#include "intercept.h"
#include "log.h"
#include "owed.h"
#include "cuda_int.h"

/* ---- driver functions of device capture ------------------------------- */

static _Atomic(void *) cx_dtod, cx_dtoh, cx_htod, cx_sync, cx_ctx, cx_dev;
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

atomic_int ckc_cu_gpu_state; /* 0 untried, 1 up, -1 off */

/* ---- the gpu tier's first use ----------------------------------------- */

static atomic_uint cu_gpu_devs, cu_gpu_tried; /* devices with a region; tried */
static atomic_ullong cap_captured, cap_bytes, cap_restored, cap_passed;
atomic_ullong ckc_cu_cap_ns, ckc_cu_rest_ns;

static void cu_exit(void)
{
	ckc_enter();
	ckc_owed_fill_all();
	atomic_store(&ckc_cu_gpu_state, -1);
	ckc_gpu_exit();
	ckc_leave();
}

static bool cu_read_ok(const void *buf, size_t n);

/* The gpu tier's region on the device of the calling thread's context,
 * set up on its first use there: true and that device in *devp when it is
 * up. */
static bool cu_gpu_up(int *devp)
{
	int st = atomic_load_explicit(&ckc_cu_gpu_state, memory_order_acquire);
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
		atomic_store(&ckc_cu_gpu_state, -1);
	if (rc)
		return false;
	if (atomic_exchange(&ckc_cu_gpu_state, 1) == 0) {
		ckc_owed_set_ops(&ckc_cu_owed_ops);
		ckc_owed_read_ok = cu_read_ok;
		/* runs before the runtime's own exit handlers, which were
		 * registered at its start, earlier */
		atexit(cu_exit);
	}
	atomic_fetch_or_explicit(&cu_gpu_devs, bit, memory_order_release);
	ckc_cu_ev_stock(ctx);
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
	return atomic_load(&ckc_cu_gpu_state) > 0 && n >= ckc_capture_min() && cu_host_ok(buf, &pinned);
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
void ckc_cu_host_written(const void *p, size_t n)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		return;
	ckc_enter();
	ckc_owed_will_write(p, n);
	ckc_leave();
}

/* A host range the driver is about to read: owed bytes are filled. */
void ckc_cu_host_read(const void *p, size_t n)
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
 * first (ckc_cu_settle). */
static atomic_bool cu_unordered;
static atomic_ullong cap_deferred;

void ckc_cu_stream_made(unsigned flags)
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
bool ckc_cu_capture(void *dst, CUdeviceptr src, size_t n, CUstream t, bool async, bool pt, uintptr_t site)
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
		if (r == CUDA_SUCCESS && !(eev = ckc_cu_ev_record(s)))
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r == CUDA_SUCCESS)
		r = cx_copy_dtod((CUdeviceptr)dptr, src, n, s);
	if (r != CUDA_SUCCESS) {
		cx_stream_sync(s);
		if (eev)
			ckc_cu_ev_put(eev);
		ckc_ref_put(ref);
		atomic_fetch_add(&cap_passed, 1);
		return false;
	}
	if (!defer && edges)
		r = bounce ? cu_copy_edges(bounce, bounce + ps, src, d, n, a, b, s) :
			     cu_copy_edges(dst, (void *)b, src, d, n, a, b, s);
	if (r == CUDA_SUCCESS && (async || defer))
		ev = ckc_cu_ev_record(s);
	if (r == CUDA_SUCCESS && defer && ev) {
		ckc_cu_ev_wait(eev);
	} else if (r == CUDA_SUCCESS && (!async || !ev)) {
		/* no event: waited for here */
		defer = false;
		r = cx_stream_sync(s);
	}
	if (eev)
		ckc_cu_ev_put(eev);
	if (r == CUDA_SUCCESS && bounce) {
		memcpy(dst, bounce, a - d);
		memcpy((void *)b, bounce + ps, d + n - b);
	}
	if (r == CUDA_SUCCESS && defer)
		ckc_cu_pending(dev, ev);
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
			ckc_cu_ev_put(ev);
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
bool ckc_cu_restore(CUdeviceptr dst, const void *src, size_t n, CUstream t, bool async, bool pt)
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
		ckc_cu_host_read(src, n);
		return false;
	}
	uint64_t w0 = ckc_now_ns();
	if (pl.e.ready)
		ckc_cu_ev_wait(pl.e.ready);
	CUstream s = cu_stream(t, async, pt);
	/* a deferred capture is ordered with the legacy stream only */
	if (s != CU_STREAM_LEGACY)
		ckc_cu_settle();
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
		ev = ckc_cu_ev_record(s);
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
		ckc_cu_host_read(src, n);
		return false;
	}
	atomic_fetch_add(&cap_restored, 1);
	return true;
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
	ckc_cu_host_read((const char *)host + first, last - first);
}

void ckc_cu_2d(const CUDA_MEMCPY2D *p)
{
	if (!p)
		return;
	cu_host_span(p->srcMemoryType, p->srcHost, p->srcXInBytes, p->srcY, 0, p->srcPitch, 0,
		     p->WidthInBytes, p->Height, 1);
	cu_host_span(p->dstMemoryType, p->dstHost, p->dstXInBytes, p->dstY, 0, p->dstPitch, 0,
		     p->WidthInBytes, p->Height, 1);
}

void ckc_cu_3d(const CUDA_MEMCPY3D *p)
{
	if (!p)
		return;
	cu_host_span(p->srcMemoryType, p->srcHost, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch,
		     p->srcHeight, p->WidthInBytes, p->Height, p->Depth);
	cu_host_span(p->dstMemoryType, p->dstHost, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
		     p->dstHeight, p->WidthInBytes, p->Height, p->Depth);
}

/* Batches: every pointer that may be host memory is filled first. */
void ckc_cu_batch(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t c)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || !d || !s || !n)
		return;
	for (size_t i = 0; i < c; i++) {
		ckc_cu_host_read((const void *)(uintptr_t)s[i], n[i]);
		ckc_cu_host_read((const void *)(uintptr_t)d[i], n[i]);
	}
}

/* Device capture sets its arena up at the program's first device
 * allocation, so that it is mapped before the first checkpoint. */
void ckc_cu_gpu_early(void)
{
	if (atomic_load_explicit(&ckc_cu_gpu_state, memory_order_relaxed) >= 0 && cu_device_mode())
		cu_gpu_up(NULL);
}

/* Allocations: when the device is out of memory, the gpu arena gives some
 * back and the allocation is tried again. */
bool ckc_cu_oom_retry(CUresult rc, size_t need)
{
	int dev;
	if (rc != CUDA_ERROR_OUT_OF_MEMORY || atomic_load(&ckc_cu_gpu_state) <= 0 || !cu_gpu_up(&dev))
		return false;
	ckc_enter();
	uint64_t got = ckc_gpu_release(dev, need ? need : 1);
	ckc_leave();
	return got > 0;
}

/* Pinned memory given back: what it owes is dropped. */
void ckc_cu_host_freed(void *p)
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

/* Statistics of device capture, for cu_stats. */
void ckc_cu_capture_stats(ckc_stats_t *s)
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
	s->cap_capture_s = (double)atomic_load(&ckc_cu_cap_ns) / 1e9;
	s->cap_restore_s = (double)atomic_load(&ckc_cu_rest_ns) / 1e9;
	s->cap_write_s = (double)atomic_load(&ckc_owed_st.write_ns) / 1e9;
	s->cap_read_s = (double)atomic_load(&ckc_owed_st.read_ns) / 1e9;
	s->cap_fill_s = (double)atomic_load(&ckc_owed_st.fill_ns) / 1e9;
	s->cap_read_engine_s = (double)atomic_load(&ckc_owed_st.read_engine_ns) / 1e9;
	s->cap_read_owe_s = (double)atomic_load(&ckc_owed_st.read_owe_ns) / 1e9;
	s->cap_restore_wait_s = (double)atomic_load(&ckc_owed_st.restore_wait_ns) / 1e9;
}

#endif /* HAVE_CUDA_H */
