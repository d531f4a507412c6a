/* The gpu tier: an arena in spare device memory, a region of it on each
 * device the program checkpoints from. One address range is reserved at
 * the first capture (cuMemAddressReserve), a slot of it per device of the
 * process; a region's physical chunks are created on its device and mapped
 * into its slot by a background thread (cuMemCreate/cuMemMap), so the
 * program never waits for it; the region's capacity grows with its mapped
 * chunks, and a fence in the arena covers the rest of its slot. When the
 * program's own allocation fails for lack of device memory, the tail of
 * that device's region is emptied and its chunks are unmapped and released
 * (ckc_gpu_release). Copies in and out run on non-blocking streams of the
 * calling thread, one per region (and per flusher and prefetcher). The
 * first mapping thread pins the host tier once its pages are populated
 * (cuMemHostRegister), one process of the node at a time.
 *
 * The driver is reached only through ckc_svc.gpu_sym, which the preloaded
 * library points at libcuda's real functions; without it (or without a
 * device) the tier stays empty and every placement bypasses it. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "engine_int.h"
#include "gpu_int.h"
#include "lanes.h"
#include "ranges.h"
#include "log.h"
#include "peer.h"
#include "peer_lend.h"
#include "thread.h"

__thread bool ckc_tl_background;
__thread bool ckc_tl_program_read;
char ckc_gpu_fence;

int ckc_gpu_open(ckc_tier_t *t)
{
	t->name = "gpu";
	t->kind = TIER_GPU;
	t->ops = &ckc_tier_gpu_ops;
	t->gpu = calloc(1, sizeof(*t->gpu));
	if (!t->gpu)
		return -ENOMEM;
	/* a placeholder until the program's first capture brings a context */
	return arena_init(&t->arena, CKC_ALIGN, CKC_ALIGN);
}

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include "sys.h"

/* The gpu tier is mapped in chunks of an eighth of its size, at most
 * this (rounded to the driver's granularity). */
#define GPU_CHUNK_MAX (256ull << 20)

ckc_mutex_t gpu_life = CKC_MUTEX_INIT(GPU_LIFE);
gpu_drv_t gpu_drv;
CKC_LOCKS_AT_START(gpu_life, ckc_locks_add, &gpu_life)

static bool drv_load(void)
{
	if (gpu_drv.loaded)
		return true;
	if (!ckc_svc.gpu_sym)
		return false;
#define GPU_LOAD(name, params)                                                     \
	if (!(gpu_drv.name = (CUresult(*) params)ckc_svc.gpu_sym(#name))) {                \
		ckc_warn("gpu tier: libcuda has no %s: the tier stays off", #name); \
		return false;                                                      \
	}
	GPU_DRV(GPU_LOAD)
#undef GPU_LOAD
	gpu_drv.loaded = true;
	return true;
}

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

int gpu_err(CUresult rc)
{
	switch (rc) {
	case CUDA_SUCCESS:
		return 0;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUDA_ERROR_DEINITIALIZED:
	case CUDA_ERROR_NOT_INITIALIZED:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
		return -ENODEV;
	default:
		return -EIO;
	}
}

/* The region holding device address d (NULL: none). */
static const ckc_gpu_dev_t *gpu_region_of(const ckc_gpu_t *g, uint64_t d)
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

static const ckc_tier_t *host_tier_of(const void *p, uint64_t *off);
static size_t pin_run(const void *p, size_t len);

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

/* ---- mapping --------------------------------------------------------- */

/* Maps chunk i of region r (lock not held). */
int gpu_map_handle(ckc_gpu_t *g, ckc_gpu_dev_t *r, size_t i, uint64_t handle)
{
	CUmemGenericAllocationHandle h = (CUmemGenericAllocationHandle)handle;
	CUdeviceptr at = (CUdeviceptr)(g->base + r->off + i * g->chunk);
	CUresult rc = gpu_drv.cuMemMap(at, g->chunk, 0, h, 0);
	if (rc != CUDA_SUCCESS)
		return gpu_err(rc);
	CUmemAccessDesc acc = { 0 };
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = r->device;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if ((rc = gpu_drv.cuMemSetAccess(at, g->chunk, &acc, 1)) != CUDA_SUCCESS) {
		gpu_drv.cuMemUnmap(at, g->chunk);
		return gpu_err(rc);
	}
	r->handle[i] = handle;
	return 0;
}

/* Maps chunk i of region r, made on its device (lock not held). */
static int gpu_map_chunk(ckc_gpu_t *g, ckc_gpu_dev_t *r, size_t i)
{
	CUmemAllocationProp prop = { 0 };
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = r->device;
	CUmemGenericAllocationHandle h;
	CUresult rc = gpu_drv.cuMemCreate(&h, g->chunk, &prop, 0);
	if (rc != CUDA_SUCCESS)
		return gpu_err(rc);
	int e = gpu_map_handle(g, r, i, (uint64_t)h);
	if (e)
		gpu_drv.cuMemRelease(h);
	return e;
}

void gpu_unmap_chunk(ckc_gpu_t *g, ckc_gpu_dev_t *r, size_t i)
{
	gpu_drv.cuMemUnmap((CUdeviceptr)(g->base + r->off + i * g->chunk), g->chunk);
	gpu_drv.cuMemRelease((CUmemGenericAllocationHandle)r->handle[i]);
	r->handle[i] = 0;
}

/* Moves the start of region r's fence to arena offset at (lock held). */
int gpu_fence_to(ckc_tier_t *t, const ckc_gpu_dev_t *r, uint64_t from, uint64_t at)
{
	arena_t *a = &t->arena;
	ssize_t idx = arena_index_of(a, r->off + from);
	if (idx < 0 || a->frag[idx].owner != &ckc_gpu_fence) {
		ckc_error("gpu tier: the arena lost the fence of device %d", r->device);
		return -EIO;
	}
	return arena_move_start(a, (size_t)idx, r->off + at);
}

/* The tier's capacity: the regions' mapped bytes (lock held). */
void gpu_capacity(ckc_tier_t *t)
{
	const ckc_gpu_t *g = t->gpu;
	uint64_t cap = 0;
	bool usable = false;
	for (int i = 0; i < g->ndev; i++) {
		cap += (uint64_t)g->dev[i].nmapped * g->chunk;
		usable |= g->dev[i].usable;
	}
	t->st.capacity = cap;
	t->gpu->usable = usable;
	ckc_peer_room();
}

int gpu_join_chunk(ckc_tier_t *t, ckc_gpu_dev_t *r, size_t i)
{
	uint64_t chunk = t->gpu->chunk;
	int rc = gpu_fence_to(t, r, (uint64_t)i * chunk, (uint64_t)(i + 1) * chunk);
	if (rc)
		return rc;
	r->nmapped = i + 1;
	if (r->nmapped > r->nmapped_max)
		r->nmapped_max = r->nmapped;
	r->usable = true;
	gpu_capacity(t);
	pthread_cond_broadcast(&ckc_eng.obj_cv);
	return 0;
}

/* Adds one mapped chunk to region r (lock not held). Returns 0, 1 when
 * the region is complete (or was cut), or -errno. */
static int gpu_grow_one(ckc_tier_t *t, ckc_gpu_dev_t *r)
{
	ckc_gpu_t *g = t->gpu;

	ckc_mutex_lock(&ckc_eng.lock);
	size_t i = r->nmapped;
	bool done = i >= r->nchunk || (uint64_t)(i + 1) * g->chunk > r->ceiling || g->stop;
	if (done)
		r->mapper_idle = true;
	ckc_mutex_unlock(&ckc_eng.lock);
	if (done)
		return 1;
	int rc = gpu_map_chunk(g, r, i);
	if (rc)
		return rc;
	ckc_mutex_lock(&ckc_eng.lock);
	if (r->nmapped != i || (uint64_t)(i + 1) * g->chunk > r->ceiling || g->stop) {
		/* a release cut the region meanwhile */
		ckc_mutex_unlock(&ckc_eng.lock);
		gpu_unmap_chunk(g, r, i);
		return 1;
	}
	rc = gpu_join_chunk(t, r, i);
	if (rc == 0)
		ckc_prefetch_kick();
	ckc_mutex_unlock(&ckc_eng.lock);
	if (rc)
		gpu_unmap_chunk(g, r, i);
	return rc;
}

/* Serialises pinning across the processes of the node: a lock file in the
 * node-local directory. */
static int pin_lock(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.ckptcache-pin.lock", dir && *dir ? dir : "/tmp");
	int fd = sys_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd >= 0)
		while (sys_flock(fd, LOCK_EX) != 0 && errno == EINTR)
			;
	return fd;
}

/* The host tier registers its memory in CKC_PIN_PIECE pieces through
 * these, each a short call (about 0.1 ms for 1 MiB, up to 2 ms on a
 * machine's first use of its memory), so that the program's own CUDA calls
 * are never held up for long (a call of the program's that starts during a
 * registration waits for it); a single copy to or from the tier never
 * crosses a piece. */
static int pin_reg(void *p, size_t n)
{
	ckc_bg_yield();
	CUresult r = gpu_drv.cuMemHostRegister_v2(p, n, CU_MEMHOSTREGISTER_PORTABLE);
	/* let the program's calls in between */
	struct timespec ts = { 0, 100000 };
	nanosleep(&ts, NULL);
	return (int)r;
}

static void pin_unreg(void *p, size_t n)
{
	(void)n;
	gpu_drv.cuMemHostUnregister(p);
}

/* One process of the node registers at a time (pin_lock). */
static int pin_turn = -1;

static void pin_begin(void)
{
	pin_turn = pin_lock(ckc_eng.cfg.ssd_dir);
}

static void pin_end(void)
{
	if (pin_turn >= 0)
		sys_close(pin_turn);
	pin_turn = -1;
}

static const ckc_pin_fns_t pin_fns = { .begin = pin_begin, .end = pin_end, .reg = pin_reg, .unreg = pin_unreg };

/* Registers the host tiers populated whole for transfers at the link's
 * speed: one process of the node at a time (pin_lock), in short calls. A
 * growing tier is not registered: registering while the program runs held
 * up its own CUDA calls (on an H100 the restores of the HPDC'23 shot ran at
 * 170-200 GB/s with it, 870-1050 GB/s without), so its transfers with the
 * gpu tier go through the threads' pinned buffers. */
static void gpu_pin_host(ckc_gpu_t *g)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		ckc_tier_t *h = &ckc_eng.tier[l];
		uint64_t t0 = ckc_now_ns(), done = 0;
		int r = ckc_tier_pin(h, &pin_fns, &g->stop, &done);
		if (r == 0 && !atomic_load(&g->stop))
			ckc_info("%s tier: %llu bytes pinned in %.1f ms", h->name, (unsigned long long)done,
				 (double)(ckc_now_ns() - t0) / 1e6);
		else if (r > 0)
			ckc_warn("%s tier: cannot pin its memory past %llu bytes (CUDA error %d): copies "
				 "there run at pageable speed",
				 h->name, (unsigned long long)done, r);
	}
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

/* Small pinned buffers for the program's threads (the edges of a
 * synchronous capture), allocated here in the background: the first
 * pinned allocation of a process costs the better part of a millisecond,
 * which a checkpoint should not pay. */
#define SLOTS 16
static _Atomic(char *) slot_block;
static size_t slot_len;
static atomic_int slot_next;

static void gpu_make_slots(void)
{
	void *b = NULL;
	size_t len = 2 * (size_t)sysconf(_SC_PAGESIZE);
	if (gpu_drv.cuMemAllocHost_v2(&b, SLOTS * len) != CUDA_SUCCESS)
		return;
	slot_len = len;
	atomic_store_explicit(&slot_block, (char *)b, memory_order_release);
}

void *ckc_gpu_pinned_slot(size_t len)
{
	char *b = atomic_load_explicit(&slot_block, memory_order_acquire);
	if (!b || len > slot_len)
		return NULL;
	int i = atomic_fetch_add(&slot_next, 1);
	return i < SLOTS ? b + (size_t)i * slot_len : NULL;
}

/* Windows for readers: a few pinned ones made in the background with the
 * slots (a device-to-host transfer into pinned memory runs at the link's
 * speed), then malloc'd ones. */
#define WINDOWS 4
static _Atomic(char *) win_pool[WINDOWS];
static char *win_pinned[WINDOWS];

static void gpu_make_windows(void)
{
	for (int i = 0; i < WINDOWS; i++) {
		void *w = NULL;
		if (gpu_drv.cuMemAllocHost_v2(&w, CKC_GPU_WINDOW) != CUDA_SUCCESS)
			return;
		win_pinned[i] = w;
		atomic_store(&win_pool[i], (char *)w);
	}
}

void *ckc_gpu_window_get(void)
{
	for (int i = 0; i < WINDOWS; i++) {
		char *w = atomic_exchange(&win_pool[i], NULL);
		if (w)
			return w;
	}
	return malloc(CKC_GPU_WINDOW);
}

void ckc_gpu_window_put(void *w)
{
	for (int i = 0; i < WINDOWS; i++)
		if (win_pinned[i] == w) {
			atomic_store(&win_pool[i], (char *)w);
			return;
		}
	sys_free(w);
}

void *gpu_mapper(void *arg)
{
	ckc_gpu_dev_t *r = arg;
	ckc_tier_t *t = &ckc_eng.tier[0];
	ckc_gpu_t *g = t->gpu;
	ckc_io_guard = 1;
	ckc_tl_background = true;

	gpu_drv.cuCtxSetCurrent((CUcontext)r->ctx);
	bool first = !atomic_exchange(&g->pinning, true);
	if (first) {
		gpu_make_slots();
		gpu_make_windows();
	}
	int rc;
	do
		ckc_bg_yield();
	while ((rc = gpu_grow_one(t, r)) == 0);
	ckc_mutex_lock(&ckc_eng.lock);
	r->mapper_idle = true;
	ckc_mutex_unlock(&ckc_eng.lock);
	if (rc < 0)
		ckc_info("gpu tier: %llu bytes mapped on device %d; the rest stays unmapped (%s)",
			 (unsigned long long)r->nmapped * g->chunk, r->device, strerror(-rc));
	if (first)
		gpu_pin_host(g);
	return NULL;
}

bool ckc_gpu_usable(const ckc_tier_t *t)
{
	return t->gpu && t->gpu->usable && !t->gpu->gone;
}

/* The region of device (NULL: none); a region of lent memory is no
 * device's own. */
static ckc_gpu_dev_t *gpu_region_for(const ckc_gpu_t *g, int device)
{
	for (int i = 0; i < g->ndev; i++)
		if (g->dev[i].device == device && !g->dev[i].lender1)
			return (ckc_gpu_dev_t *)&g->dev[i];
	return NULL;
}

int ckc_gpu_span(const ckc_tier_t *t, const ckc_obj_t *o, uint64_t *lo, uint64_t *hi)
{
	const ckc_gpu_t *g = t->gpu;
	const ckc_gpu_dev_t *r = NULL;

	if (!g || !g->usable || g->gone)
		return -ENOSPC;
	if (o->place[0].nexts > 0)
		r = gpu_region_of(g, g->base + o->place[0].ext[0].aoff);
	else if (o->greg1 > 0 && o->greg1 <= g->ndev)
		r = g->dev[o->greg1 - 1].closing ? NULL : &g->dev[o->greg1 - 1];
	else if (o->gdev1)
		r = gpu_region_for(g, o->gdev1 - 1);
	else
		for (int i = 0; i < g->ndev && !r; i++)
			r = g->dev[i].usable && !g->dev[i].lender1 ? &g->dev[i] : NULL;
	if (!r || !r->usable)
		return -ENOSPC;
	*lo = r->off;
	*hi = r->off + (uint64_t)r->nmapped * g->chunk;
	return 0;
}

int ckc_gpu_device_of(uint64_t dptr)
{
	const ckc_tier_t *t = &ckc_eng.tier[0];
	const ckc_gpu_dev_t *r = t->kind == TIER_GPU && t->gpu ? gpu_region_of(t->gpu, dptr) : NULL;
	return r ? r->device : -1;
}

/* The bytes the tier wants on the current context's device: the
 * configured size or share of its free memory, at most all of it. 0 when
 * the free memory cannot be read. */
static uint64_t gpu_want(size_t *freep)
{
	size_t fr = 0, total = 0;
	if (gpu_drv.cuMemGetInfo_v2(&fr, &total) != CUDA_SUCCESS)
		return 0;
	const ckc_config_t *c = &ckc_eng.cfg;
	uint64_t want = c->gpu_cache_pct >= 0 ? (uint64_t)((double)fr * c->gpu_cache_pct / 100.0) : c->gpu_cache;
	*freep = fr;
	return want > fr ? fr : want;
}

/* The address range: a slot for each device of the process (the largest
 * device's memory and one chunk more, so that a region never fills its
 * slot and its fence is never empty), or one slot when so much address
 * space is refused. The arena covers it, fenced. Lock gpu_life held. */
static int gpu_reserve(ckc_tier_t *t, int device, uint64_t want)
{
	ckc_gpu_t *g = t->gpu;
	CUmemAllocationProp prop = { 0 };
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = device;
	size_t gran = 0;
	if (gpu_drv.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
		    CUDA_SUCCESS || gran == 0)
		gran = 2u << 20;
	/* several chunks a region, so that it grows, shrinks and lends in
	 * steps smaller than itself */
	uint64_t chunk = want / 8 < GPU_CHUNK_MAX ? want / 8 : GPU_CHUNK_MAX;
	g->chunk = (chunk + gran - 1) / gran * gran;
	int count = 0;
	if (gpu_drv.cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1)
		count = 1;
	if (count > CKC_GPU_MAXDEV)
		count = CKC_GPU_MAXDEV;
	uint64_t most = 0;
	for (int d = 0; d < count; d++) {
		size_t total = 0;
		if (gpu_drv.cuDeviceTotalMem_v2(&total, (CUdevice)d) == CUDA_SUCCESS && total > most)
			most = total;
	}
	if (most == 0)
		return -ENODEV;
	g->slot = (most + g->chunk - 1) / g->chunk * g->chunk + g->chunk;
	CUdeviceptr base = 0;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	for (; count >= 1; count = count > 1 ? 1 : 0)
		if ((r = gpu_drv.cuMemAddressReserve(&base, count * g->slot, g->chunk, 0, 0)) == CUDA_SUCCESS)
			break;
	if (r != CUDA_SUCCESS) {
		ckc_warn("gpu tier: cannot reserve %llu bytes of address space (CUDA error %d)",
			 (unsigned long long)g->slot, (int)r);
		return gpu_err(r);
	}
	g->base = (uint64_t)base;
	g->nslot = count;
	g->span = (uint64_t)count * g->slot;
	ckc_mutex_lock(&ckc_eng.lock);
	arena_t *a = &t->arena;
	arena_fini(a);
	int rc = arena_init(a, g->span, CKC_ALIGN);
	for (int i = 0; !rc && i < count; i++)
		rc = arena_take(a, (size_t)i, g->slot, &ckc_gpu_fence) < 0 ? -ENOMEM : 0;
	if (rc) {
		arena_fini(a);
		arena_init(a, CKC_ALIGN, CKC_ALIGN);
	}
	ckc_mutex_unlock(&ckc_eng.lock);
	if (rc) {
		gpu_drv.cuMemAddressFree(base, g->span);
		g->base = g->span = 0;
		g->nslot = 0;
	}
	return rc;
}

int ckc_gpu_attach(void *ctx, int device)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	int rc = 0;
	bool first = false;

	ckc_mutex_lock(&gpu_life);
	if (!ckc_eng.active || ckc_eng.ntier < 2 || t->kind != TIER_GPU || t->gpu->gone) {
		rc = -ENODEV;
		goto out;
	}
	ckc_gpu_t *g = t->gpu;
	if (gpu_region_for(g, device))
		goto out;
	if (!g->tried) {
		g->tried = true;
		size_t fr0 = 0;
		uint64_t want0 = drv_load() ? gpu_want(&fr0) : 0;
		if (!gpu_drv.loaded || (rc = gpu_reserve(t, device, want0 ? want0 : GPU_CHUNK_MAX)) != 0) {
			rc = -ENODEV;
			goto out;
		}
	}
	if (!g->nslot) {
		rc = -ENODEV;
		goto out;
	}
	if (g->ndev >= g->nslot) {
		ckc_warn("gpu tier: no room left for device %d (%d devices have a region): its "
			 "checkpoints are copied as asked",
			 device, g->ndev);
		rc = -ENOSPC;
		goto out;
	}
	ckc_gpu_dev_t *r = &g->dev[g->ndev];
	memset(r, 0, sizeof(*r));
	r->ctx = ctx;
	r->device = device;
	r->off = (uint64_t)g->ndev * g->slot;
	CUcontext prim = NULL;
	if (gpu_drv.cuDevicePrimaryCtxRetain(&prim, (CUdevice)device) == CUDA_SUCCESS) {
		/* held so that the runtime's release at exit cannot destroy
		 * the region's context before the cache has emptied it */
		if (prim == (CUcontext)ctx)
			r->retained = true;
		else
			gpu_drv.cuDevicePrimaryCtxRelease_v2((CUdevice)device);
	}
	size_t fr = 0;
	uint64_t want = gpu_want(&fr);
	if (want > g->slot - g->chunk)
		want = g->slot - g->chunk;
	want = want / g->chunk * g->chunk;
	if (want == 0) {
		char b1[32], b2[32], b3[32];
		ckc_warn("CKPTCACHE_GPU_CACHE: %s on device %d (%s free) is less than the tier's %s chunk: no "
			 "gpu tier there",
			 ckc_format_size(gpu_want(&fr), b1, sizeof(b1)), device,
			 ckc_format_size((uint64_t)fr, b3, sizeof(b3)), ckc_format_size(g->chunk, b2, sizeof(b2)));
		rc = -ENOSPC;
		goto unretain;
	}
	r->nchunk = (size_t)(want / g->chunk);
	r->reserved = r->ceiling = want;
	r->handle = calloc(r->nchunk, sizeof(*r->handle));
	if (!r->handle) {
		rc = -ENOMEM;
		goto unretain;
	}
	ckc_mutex_lock(&ckc_eng.lock);
	g->ndev++;
	ckc_mutex_unlock(&ckc_eng.lock);
	/* the first chunk now, so the first capture finds room; the rest in
	 * the background */
	if ((rc = gpu_grow_one(t, r)) < 0) {
		ckc_warn("gpu tier: cannot map memory of device %d (%s)", device, strerror(-rc));
		ckc_mutex_lock(&ckc_eng.lock);
		g->ndev--;
		ckc_mutex_unlock(&ckc_eng.lock);
		sys_free(r->handle);
		r->handle = NULL;
		goto unretain;
	}
	rc = 0;
	r->mapper_running = ckc_thread_start(&r->mapper, gpu_mapper, r, "ckc-gpu-map", false) == 0;
	char b1[32];
	ckc_info("gpu tier: %s on device %d, mapped in %llu chunks in the background",
		 ckc_format_size(want, b1, sizeof(b1)), device, (unsigned long long)r->nchunk);
	first = g->ndev == 1;
	goto out;
unretain:
	if (r->retained)
		gpu_drv.cuDevicePrimaryCtxRelease_v2((CUdevice)device);
	r->retained = false;
out:
	ckc_mutex_unlock(&gpu_life);
	/* the node's other ranks learn of this device (off by default
	 * without peer access) */
	if (first)
		ckc_peer_attach(device);
	return rc;
}

/* Whether o's gpu copy can go now without losing anything: its bytes are
 * safe below (flushed, or prefetched from there), or nothing needs them. A
 * copy still being written, flushed or owed by host memory waits. */
static bool gpu_may_drop(const ckc_obj_t *o)
{
	const ckc_place_t *p = &o->place[0];

	if (p->pins > 0 || o->migrating || o->gref)
		return false;
	switch (p->state) {
	case LC_FLUSHED:
		return true;
	case LC_READ_COMPLETE:
		return ckc_lower_has(o, 0);
	case LC_CONSUMED:
		return ckc_lower_has(o, 0) || ckc_eng.cfg.persist != CKC_PERSIST_ALWAYS;
	default:
		return false;
	}
}

/* Evicts every copy in [from, to) of the arena that may go; lock held.
 * Returns the end of what is still there (from when nothing is). */
static uint64_t gpu_empty_tail(ckc_tier_t *t, uint64_t from, uint64_t to)
{
	arena_t *a = &t->arena;
	uint64_t busy = from;
	for (size_t i = 0; i < a->nfrag; i++) {
		arena_frag_t *f = &a->frag[i];
		if (!f->owner || f->owner == &ckc_gpu_fence || f->off + f->len <= from || f->off >= to)
			continue;
		ckc_obj_t *o = f->owner;
		if (gpu_may_drop(o)) {
			uint64_t bytes = ckc_place_bytes(&o->place[0]);
			lc_event_t ev = o->place[0].state == LC_READ_COMPLETE ? LC_EV_DROP : LC_EV_EVICT;
			ckc_place_free(o, 0);
			ckc_set_state(o, 0, ev);
			t->st.evictions++;
			t->st.evicted_bytes += bytes;
			i = (size_t)-1; /* the table changed: look again */
			busy = from;
		} else if (f->off + f->len > busy) {
			busy = f->off + f->len;
		}
	}
	return busy;
}

/* Empties region r from target bytes to its mapped end, evicting what may
 * go and waiting at most wait_s for what is being flushed or read, then
 * unmaps the chunks from the end of what is still there. Returns the bytes
 * unmapped. gpu_life and the engine lock held (the latter dropped while
 * unmapping). */
uint64_t gpu_cut_tail(ckc_tier_t *t, ckc_gpu_dev_t *r, uint64_t target, double wait_s)
{
	ckc_gpu_t *g = t->gpu;
	uint64_t cap = (uint64_t)r->nmapped * g->chunk, busy;
	uint64_t deadline = ckc_now_ns() + (uint64_t)(wait_s * 1e9);
	while ((busy = gpu_empty_tail(t, r->off + target, r->off + cap)) > r->off + target &&
	       ckc_now_ns() < deadline) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		ckc_cond_timedwait(&ckc_eng.obj_cv, &ckc_eng.lock, &ts);
	}
	uint64_t keep = (busy - r->off + g->chunk - 1) / g->chunk * g->chunk;
	if (keep < target)
		keep = target;
	size_t nkeep = (size_t)(keep / g->chunk);
	if (nkeep >= r->nmapped || gpu_fence_to(t, r, cap, keep) != 0)
		return 0;
	size_t from = nkeep, to = r->nmapped;
	r->nmapped = nkeep;
	r->usable = nkeep > 0;
	gpu_capacity(t);
	ckc_mutex_unlock(&ckc_eng.lock);
	if (ckc_svc.gpu_settle)
		ckc_svc.gpu_settle();
	gpu_drv.cuCtxSetCurrent((CUcontext)r->ctx);
	for (size_t i = from; i < to; i++)
		gpu_unmap_chunk(g, r, i);
	ckc_mutex_lock(&ckc_eng.lock);
	return (uint64_t)(to - from) * g->chunk;
}

uint64_t ckc_gpu_release(int device, uint64_t bytes)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	uint64_t released = 0;

	/* the allocation asks for bytes; the device lacks less than that
	 * (its pages are 2 MiB) */
	size_t fr = 0, total = 0;
	if (gpu_drv.loaded && gpu_drv.cuMemGetInfo_v2(&fr, &total) == CUDA_SUCCESS && fr < bytes)
		bytes = ((bytes - fr) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
	/* what this device lent to the node's other ranks comes back first:
	 * the cache's own copies are worth more to this program */
	uint64_t back = ckc_lend_take_back(bytes, CKC_PEER_TAKE_WAIT_S);
	if (back >= bytes)
		return back;
	bytes -= back;

	ckc_mutex_lock(&gpu_life);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_gpu_dev_t *r = NULL;
	if (ckc_eng.active && t->kind == TIER_GPU && ckc_gpu_usable(t))
		r = gpu_region_for(t->gpu, device);
	if (!r || !r->usable) {
		ckc_mutex_unlock(&ckc_eng.lock);
		ckc_mutex_unlock(&gpu_life);
		return back;
	}
	ckc_gpu_t *g = t->gpu;
	uint64_t cap = (uint64_t)r->nmapped * g->chunk;
	uint64_t want = (bytes + g->chunk - 1) / g->chunk * g->chunk;
	uint64_t target = want >= cap ? 0 : cap - want;
	/* no more growth: the program needs this memory */
	r->ceiling = target;
	/* what is being flushed or read goes once it is safe below: wait a
	 * little for it (flushes to the host run at tens of GB/s) */
	released = gpu_cut_tail(t, r, target, 2.0);
	if (released) {
		r->released_bytes += released;
		r->releases++;
	}
	ckc_mutex_unlock(&ckc_eng.lock);
	ckc_mutex_unlock(&gpu_life);
	if (released)
		ckc_info("gpu tier: %llu bytes of device %d given back to the program",
			 (unsigned long long)released, device);
	return released + back;
}

static void gpu_stop_mappers(ckc_gpu_t *g, bool locked)
{
	if (!locked)
		ckc_mutex_lock(&ckc_eng.lock);
	g->stop = true;
	pthread_cond_broadcast(&ckc_eng.obj_cv);
	if (!locked)
		ckc_mutex_unlock(&ckc_eng.lock);
	for (int i = 0; i < g->ndev; i++) {
		ckc_gpu_dev_t *r = &g->dev[i];
		if (!r->mapper_running)
			continue;
		/* it takes the lock: it must not be held here */
		if (!locked)
			pthread_join(r->mapper, NULL);
		else
			ckc_error("gpu tier: mapping thread of device %d still running at close", r->device);
		r->mapper_running = false;
	}
}

void ckc_gpu_stop(ckc_tier_t *t)
{
	if (t->gpu)
		gpu_stop_mappers(t->gpu, false);
}

/* Unmaps everything and gives the memory back. */
static void gpu_teardown(ckc_tier_t *t, bool locked)
{
	ckc_gpu_t *g = t->gpu;

	gpu_stop_mappers(g, locked);
	if (!gpu_drv.loaded || !g->nslot)
		return;
	if (ckc_svc.gpu_settle)
		ckc_svc.gpu_settle();
	if (g->ndev)
		gpu_drv.cuCtxSetCurrent((CUcontext)g->dev[0].ctx);
	for (int l = 0; l < ckc_eng.ntier - 1; l++)
		ckc_tier_unpin(&ckc_eng.tier[l], &pin_fns);
	for (int d = 0; d < g->ndev; d++) {
		ckc_gpu_dev_t *r = &g->dev[d];
		gpu_drv.cuCtxSetCurrent((CUcontext)r->ctx);
		for (size_t i = 0; i < r->nmapped; i++)
			gpu_unmap_chunk(g, r, i);
		r->nmapped = 0;
		r->usable = false;
		sys_free(r->handle);
		r->handle = NULL;
		if (r->retained)
			gpu_drv.cuDevicePrimaryCtxRelease_v2((CUdevice)r->device);
		r->retained = false;
	}
	gpu_drv.cuMemAddressFree((CUdeviceptr)g->base, g->span);
	g->nslot = 0;
}

void ckc_gpu_exit(void)
{
	ckc_tier_t *t = &ckc_eng.tier[0];

	/* the lending thread maps and unmaps under gpu_life */
	ckc_lend_stop();
	ckc_mutex_lock(&gpu_life);
	if (!ckc_eng.active || t->kind != TIER_GPU || !t->gpu || t->gpu->gone) {
		ckc_mutex_unlock(&gpu_life);
		return;
	}
	ckc_gpu_evacuate();
	ckc_mutex_lock(&ckc_eng.lock);
	t->gpu->gone = true;
	t->gpu->usable = false;
	ckc_mutex_unlock(&ckc_eng.lock);
	gpu_teardown(t, false);
	ckc_mutex_unlock(&gpu_life);
}

void ckc_gpu_close(ckc_tier_t *t)
{
	if (!t->gpu)
		return;
	if (!t->gpu->gone)
		gpu_teardown(t, true);
	arena_fini(&t->arena);
	sys_free(t->gpu);
	t->gpu = NULL;
}

void ckc_gpu_stats(const ckc_tier_t *t, ckc_stats_t *s)
{
	const ckc_gpu_t *g = t->gpu;
	if (!g)
		return;
	s->gpu_present = true;
	s->gpu_device = g->ndev ? g->dev[0].device : -1;
	s->gpu_ndev = 0;
	for (int i = 0; i < g->ndev; i++) {
		const ckc_gpu_dev_t *r = &g->dev[i];
		if (r->lender1) {
			s->gpu_borrowed_bytes += (uint64_t)r->nmapped_max * g->chunk;
			continue;
		}
		s->gpu_devs[s->gpu_ndev++] = r->device;
		s->gpu_arena_bytes += r->reserved;
		s->gpu_mapped_bytes += (uint64_t)r->nmapped_max * g->chunk;
		s->gpu_released_bytes += r->released_bytes;
		s->gpu_releases += r->releases;
	}
}

#else /* !HAVE_CUDA_H */

bool ckc_gpu_usable(const ckc_tier_t *t) { (void)t; return false; }
int ckc_gpu_attach(void *ctx, int device) { (void)ctx; (void)device; return -ENODEV; }
uint64_t ckc_gpu_release(int device, uint64_t bytes) { (void)device; (void)bytes; return 0; }
int ckc_gpu_span(const ckc_tier_t *t, const ckc_obj_t *o, uint64_t *lo, uint64_t *hi) { (void)t; (void)o; (void)lo; (void)hi; return -ENOSPC; }
int ckc_gpu_device_of(uint64_t dptr) { (void)dptr; return -1; }
void ckc_gpu_exit(void) {}
void *ckc_gpu_pinned_slot(size_t len) { (void)len; return NULL; }
void *ckc_gpu_window_get(void) { return malloc(CKC_GPU_WINDOW); }
void ckc_gpu_window_put(void *w) { sys_free(w); }
void ckc_gpu_stop(ckc_tier_t *t) { (void)t; }
void ckc_gpu_close(ckc_tier_t *t) { arena_fini(&t->arena); sys_free(t->gpu); t->gpu = NULL; }
int ckc_gpu_put(ckc_tier_t *t, uint64_t a, const void *b, size_t n) { (void)t; (void)a; (void)b; (void)n; return -ENODEV; }
int ckc_gpu_get(ckc_tier_t *t, uint64_t a, void *b, size_t n) { (void)t; (void)a; (void)b; (void)n; return -ENODEV; }
int ckc_gpu_get_direct(ckc_tier_t *t, uint64_t a, void *b, size_t n) { (void)t; (void)a; (void)b; (void)n; return -ENODEV; }
int ckc_gpu_dtod(ckc_tier_t *t, uint64_t d, uint64_t s, size_t n) { (void)t; (void)d; (void)s; (void)n; return -ENODEV; }
int ckc_gpu_dtoh(ckc_tier_t *t, void *d, uint64_t s, size_t n) { (void)t; (void)d; (void)s; (void)n; return -ENODEV; }
void ckc_gpu_stats(const ckc_tier_t *t, ckc_stats_t *s) { (void)t; s->gpu_present = true; s->gpu_device = -1; }


#endif /* HAVE_CUDA_H */

const ckc_tier_ops_t ckc_tier_gpu_ops = {
	.put = ckc_gpu_put,
	.get = ckc_gpu_get,
	.span = ckc_gpu_span,
	.stop = ckc_gpu_stop,
	.teardown = ckc_gpu_close,
	.stats = ckc_gpu_stats,
};
