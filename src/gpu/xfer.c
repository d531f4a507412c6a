/* The gpu tier's copies: between host memory and its regions, on a stream
 * of the calling thread per region, through pinned buffers where the host
 * side is pageable; a background thread's in pieces that give way to the
 * program's copies, a program's read into pageable memory in lanes, and
 * device-to-device copies within a region or across two. */
#include "config.h"

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include <errno.h>
#include <string.h>

#include "engine_int.h"
#include "gpu_int.h"
#include "lanes.h"
#include "log.h"
#include "ranges.h"
#include "sys.h"

/* This thread's stream on each region (made in the region's context) and
 * its pinned bounce buffer for small copies to pageable memory (a pageable
 * copy costs a staged, synchronous transfer inside the driver). */
static __thread CUstream tl_stream[CKC_GPU_MAXDEV];
static __thread CUcontext tl_ctx[CKC_GPU_MAXDEV];
static __thread void *tl_bounce;
#define BOUNCE (64u << 10)

/* ---- sharing the device with the program -----------------------------
 * Copies queued in one direction delay the program's copies in that
 * direction behind them: the background threads move bytes in pieces of at
 * most GPU_XFER through pinned memory only, each started after
 * ckc_bg_yield. */
#define GPU_XFER (4u << 20)

static __thread void *tl_stage; /* GPU_XFER pinned bytes */

/* The region holding device address d (NULL: none). */
const ckc_gpu_dev_t *gpu_region_of(const ckc_gpu_t *g, uint64_t d)
{
	if (d < g->base || d - g->base >= g->span)
		return NULL;
	/* a slot's address is handed out only once its region is set up */
	return &g->dev[(d - g->base) / g->slot];
}

/* Makes region r's context current and gives this thread's stream there. */
static int gpu_enter(const ckc_gpu_t *g, const ckc_gpu_dev_t *r, CUstream *s)
{
	CUcontext cur = NULL;
	size_t i = (size_t)(r - g->dev);
	if (gpu_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
		return -ENODEV;
	if (cur != (CUcontext)r->ctx && gpu_drv.cuCtxSetCurrent((CUcontext)r->ctx) != CUDA_SUCCESS)
		return -ENODEV;
	if (!tl_stream[i] || tl_ctx[i] != (CUcontext)r->ctx) {
		if (gpu_drv.cuStreamCreate(&tl_stream[i], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
			tl_stream[i] = NULL;
			return -EIO;
		}
		tl_ctx[i] = (CUcontext)r->ctx;
	}
	*s = tl_stream[i];
	return 0;
}

/* The tier holding host address p (its offset there in *off), or NULL. */
static const ckc_tier_t *host_tier_of(const void *p, uint64_t *off)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++)
		if (ckc_tier_holds(&ckc_eng.tier[l], p, off))
			return &ckc_eng.tier[l];
	return NULL;
}

/* Bytes of a copy at host address p that stay within one pinned piece of a
 * host tier (all of len elsewhere). */
static size_t pin_run(const void *p, size_t len)
{
	uint64_t off;
	if (!host_tier_of(p, &off))
		return len;
	uint64_t end = (off / CKC_PIN_PIECE + 1) * CKC_PIN_PIECE;
	return end - off < len ? (size_t)(end - off) : len;
}

/* n bytes between host and device ('h': to host, 'd': to device) through
 * the pinned buffer via (directly when via is host), waited for. */
static CUresult copy_via(char kind, void *via, void *host, uint64_t dev, size_t n, CUstream s)
{
	if (kind == 'd' && via != host)
		memcpy(via, host, n);
	CUresult r = kind == 'h' ? gpu_drv.cuMemcpyDtoHAsync_v2(via, (CUdeviceptr)dev, n, s) :
				   gpu_drv.cuMemcpyHtoDAsync_v2((CUdeviceptr)dev, via, n, s);
	if (r == CUDA_SUCCESS)
		r = gpu_drv.cuStreamSynchronize(s);
	if (r == CUDA_SUCCESS && kind == 'h' && via != host)
		memcpy(host, via, n);
	return r;
}

/* n bytes between host and device directly, one copy per registered piece
 * of a host tier (a copy never crosses one), then waited for. */
static CUresult copy_runs(char kind, char *host, uint64_t dev, size_t n, CUstream s)
{
	CUresult r = CUDA_SUCCESS;
	for (size_t done = 0, k; r == CUDA_SUCCESS && done < n; done += k) {
		k = pin_run(host + done, n - done);
		r = kind == 'h' ? gpu_drv.cuMemcpyDtoHAsync_v2(host + done, (CUdeviceptr)(dev + done), k, s) :
				  gpu_drv.cuMemcpyHtoDAsync_v2((CUdeviceptr)(dev + done), host + done, k, s);
	}
	return r == CUDA_SUCCESS ? gpu_drv.cuStreamSynchronize(s) : r;
}

/* This thread's pinned buffer of len bytes in *buf, made on first use. */
static void *pinned_buf(void **buf, size_t len)
{
	if (!*buf && gpu_drv.cuMemAllocHost_v2(buf, len) != CUDA_SUCCESS)
		*buf = NULL;
	return *buf;
}

/* One piece of a background transfer: at most GPU_XFER bytes, directly
 * when the host side is pinned memory (one copy per registered piece, one
 * wait), else through the thread's pinned stage. */
static CUresult bg_piece(char kind, char *host, uint64_t dev, size_t n, CUstream s)
{
	ckc_bg_yield();
	uint64_t off;
	const ckc_tier_t *h = host_tier_of(host, &off);
	if (h && ckc_tier_pinned(h, off, n))
		return copy_runs(kind, host, dev, n, s);
	void *via = pinned_buf(&tl_stage, GPU_XFER);
	return copy_via(kind, via ? via : host, host, dev, n, s);
}

/* ---- copies to pageable memory, in lanes ----------------------------
 * The driver copies to pageable memory through its own pinned buffer on
 * one thread, and memory the program has never touched (a new numpy array)
 * pays its page faults inside that copy: 70 MiB took 21-25 ms on an H100
 * machine, where the page cache served the same read in 20-30 ms. In lanes
 * (lanes.h) each piece is faulted in, copied to the lane's pinned stage and
 * from there into place, four pieces at a time: 6-8 ms. */
static atomic_bool lanes_off;

/* The pinned stage of the lane on the reading thread: one for whichever
 * thread holds the lanes (one copy at a time), so that a program thread
 * that restores once and ends leaves no pinned memory behind; a helper
 * has its own (tl_stage). */
static void *lane_reader_stage;

struct lane_copy {
	const ckc_gpu_t *g;
	const ckc_gpu_dev_t *reg;
	uint64_t src;
};

/* One piece: its pages faulted in by MADV_POPULATE_WRITE, which also fails
 * on memory the program may not write (the copy then goes as it would
 * have, and fails as it would have), then through the lane's stage. */
static int lane_piece(void *arg, uintptr_t a, uintptr_t b, uint64_t at)
{
	const struct lane_copy *c = arg;
	int rc = ckc_lanes_populate(a, b);
	if (rc)
		return rc;
	CUstream s;
	rc = gpu_enter(c->g, c->reg, &s); /* first: the stage needs a context */
	if (rc)
		return rc;
	char *stage = pinned_buf(ckc_lanes_helper() ? &tl_stage : &lane_reader_stage, GPU_XFER);
	if (!stage)
		return -ENOMEM;
	return gpu_err(copy_via('h', stage, (void *)a, c->src + at, b - a, s));
}

/* Whether [host, host + n) is memory only the CPU copies into: neither a
 * host tier nor memory the program pinned or registered. */
static bool lanes_pageable(void *host, size_t n)
{
	return ckc_svc.host_kind && !host_tier_of(host, NULL) && ckc_svc.host_kind(host) == CKC_MEM_UNKNOWN &&
	       ckc_svc.host_kind((char *)host + n - 1) == CKC_MEM_UNKNOWN;
}

/* n bytes from device address src to pageable memory in lanes: true when
 * done; false when the copy is still to be made. */
static bool copy_lanes(const ckc_gpu_t *g, const ckc_gpu_dev_t *reg, void *host, uint64_t src, size_t n)
{
	if (n < CKC_LANE_MIN || !ckc_tl_program_read || atomic_load_explicit(&lanes_off, memory_order_relaxed) ||
	    !lanes_pageable(host, n))
		return false;
	struct lane_copy c = { g, reg, src };
	int rc = ckc_lanes_run((uintptr_t)host, n, lane_piece, &c);
	if (!rc)
		return true;
	if (rc == -ENOSYS && !atomic_exchange(&lanes_off, true))
		ckc_info("gpu tier: this kernel has no MADV_POPULATE_WRITE: restores to pageable memory are "
			 "copied by the driver, on one thread");
	else if (rc != -EAGAIN)
		ckc_debug("gpu tier: a copy of %zu bytes in lanes failed (%s): the driver copies it", n, strerror(-rc));
	return false;
}

static int gpu_copy(const ckc_gpu_t *g, char kind, void *host, uint64_t dst, uint64_t src, size_t n);

/* A device-to-device copy between two regions (two devices): through this
 * thread's pinned stage, piece by piece. */
static int gpu_copy_across(const ckc_gpu_t *g, uint64_t dst, uint64_t src, size_t n)
{
	CUstream s;
	/* a thread's first pinned stage needs a current context */
	const ckc_gpu_dev_t *from = gpu_region_of(g, src), *to = gpu_region_of(g, dst);
	if (!from || !to)
		return -EFAULT;
	if (gpu_enter(g, from, &s))
		return -ENODEV;
	if (from->ctx == to->ctx) {
		/* memory lent by a peer is mapped for this device: one copy */
		ckc_bg_yield();
		CUresult r = gpu_drv.cuMemcpyDtoDAsync_v2((CUdeviceptr)dst, (CUdeviceptr)src, n, s);
		if (r == CUDA_SUCCESS)
			r = gpu_drv.cuStreamSynchronize(s);
		return gpu_err(r);
	}
	char *stage = pinned_buf(&tl_stage, GPU_XFER);
	if (!stage)
		return -ENOMEM;
	int rc = 0;
	for (size_t done = 0, k; !rc && done < n; done += k) {
		k = n - done < GPU_XFER ? n - done : GPU_XFER;
		rc = gpu_copy(g, 'h', stage, 0, src + done, k);
		if (!rc)
			rc = gpu_copy(g, 'd', stage, dst + done, 0, k);
	}
	return rc;
}

/* One copy on this thread's stream of the region it touches, waited for.
 * kind: 'h' device->host, 'd' host->device, 'x' device->device, 'H'
 * device->host straight into the destination (pinned memory that must not
 * be written by the CPU). */
static int gpu_copy(const ckc_gpu_t *g, char kind, void *host, uint64_t dst, uint64_t src, size_t n)
{
	CUstream s;
	bool direct = kind == 'H';
	if (direct)
		kind = 'h';
	const ckc_gpu_dev_t *reg = gpu_region_of(g, kind == 'h' ? src : dst);
	if (!reg)
		return -EFAULT;
	if (kind == 'x' && gpu_region_of(g, src) != reg)
		return gpu_copy_across(g, dst, src, n);
	int rc = gpu_enter(g, reg, &s);
	if (rc)
		return rc;
	if (ckc_svc.gpu_settle)
		ckc_svc.gpu_settle();
	bool prog = !ckc_tl_background;
	if (prog)
		ckc_prog_begin();
	CUresult r = CUDA_SUCCESS;
	if (kind == 'x') {
		ckc_bg_yield();
		r = gpu_drv.cuMemcpyDtoDAsync_v2((CUdeviceptr)dst, (CUdeviceptr)src, n, s);
		if (r == CUDA_SUCCESS)
			r = gpu_drv.cuStreamSynchronize(s);
	} else if (direct) {
		r = copy_runs(kind, host, src, n, s);
	} else if (ckc_tl_background) {
		uint64_t dev = kind == 'h' ? src : dst;
		for (size_t done = 0, k; r == CUDA_SUCCESS && done < n; done += k) {
			k = n - done < GPU_XFER ? n - done : GPU_XFER;
			r = bg_piece(kind, (char *)host + done, dev + done, k, s);
		}
	} else if (n <= BOUNCE && !host_tier_of(host, NULL) && pinned_buf(&tl_bounce, BOUNCE)) {
		r = copy_via(kind, tl_bounce, host, kind == 'h' ? src : dst, n, s);
	} else if (kind == 'h' && copy_lanes(g, reg, host, src, n)) {
		r = CUDA_SUCCESS;
	} else {
		r = copy_runs(kind, host, kind == 'h' ? src : dst, n, s);
	}
	if (prog)
		ckc_prog_end();
	if (r != CUDA_SUCCESS)
		ckc_error("gpu tier: a copy of %zu bytes failed (CUDA error %d)", n, (int)r);
	return gpu_err(r);
}

int ckc_gpu_put(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len)
{
	return gpu_copy(t->gpu, 'd', (void *)buf, t->gpu->base + aoff, 0, len);
}

int ckc_gpu_put_filled(ckc_tier_t *t, uint64_t aoff, size_t len,
		       int (*fill)(void *ctx, uint64_t off, void *buf, size_t n), void *ctx)
{
	const ckc_gpu_t *g = t->gpu;
	uint64_t dst = g->base + aoff;
	const ckc_gpu_dev_t *reg = gpu_region_of(g, dst);
	CUstream s;
	if (!reg || gpu_region_of(g, dst + (len ? len - 1 : 0)) != reg)
		return -EFAULT;
	int rc = gpu_enter(g, reg, &s);
	if (rc)
		return rc;
	char *stage = pinned_buf(&tl_stage, GPU_XFER);
	if (!stage)
		return -ENOMEM;
	for (size_t done = 0, k; !rc && done < len; done += k) {
		k = len - done < GPU_XFER ? len - done : GPU_XFER;
		rc = fill(ctx, done, stage, k);
		if (rc)
			break;
		if (ckc_svc.gpu_settle)
			ckc_svc.gpu_settle();
		ckc_bg_yield();
		CUresult r = copy_via('d', stage, stage, dst + done, k, s);
		if (r != CUDA_SUCCESS)
			ckc_error("gpu tier: a copy of %zu bytes failed (CUDA error %d)", k, (int)r);
		rc = gpu_err(r);
	}
	return rc;
}

int ckc_gpu_get(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len)
{
	return gpu_copy(t->gpu, 'h', buf, 0, t->gpu->base + aoff, len);
}

int ckc_gpu_get_direct(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len)
{
	return gpu_copy(t->gpu, 'H', buf, 0, t->gpu->base + aoff, len);
}

int ckc_gpu_dtod(ckc_tier_t *t, uint64_t dst, uint64_t src, size_t len)
{
	return gpu_copy(t->gpu, 'x', NULL, dst, src, len);
}

int ckc_gpu_dtoh(ckc_tier_t *t, void *dst, uint64_t src, size_t len)
{
	return gpu_copy(t->gpu, 'h', dst, 0, src, len);
}

#endif /* HAVE_CUDA_H */
