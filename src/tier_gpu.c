/* The gpu tier: an arena in spare device memory of the device the program
 * checkpoints from. Its address range is reserved once (cuMemAddressReserve)
 * and physical chunks are created and mapped into it by a background thread
 * (cuMemCreate/cuMemMap), so the program never waits for it; the arena's
 * capacity grows with the mapped chunks. When the program's own allocation
 * fails for lack of device memory, the tail of the arena is emptied and its
 * chunks are unmapped and released (ckc_gpu_release). Copies in and out run
 * on a non-blocking stream of the calling thread (one per flusher and
 * prefetcher). The same thread pins the host tier once its pages are
 * populated (cuMemHostRegister), one process of the node at a time.
 *
 * The driver is reached only through ckc_gpu_sym, which the preloaded
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
#include "log.h"

void *(*ckc_gpu_sym)(const char *name);
__thread bool ckc_tl_background;
void (*ckc_gpu_settle)(void);

int ckc_gpu_open(ckc_tier_t *t)
{
	t->name = "gpu";
	t->kind = TIER_GPU;
	t->gpu = calloc(1, sizeof(*t->gpu));
	if (!t->gpu)
		return -ENOMEM;
	/* a placeholder until the program's first capture brings a context */
	return arena_init(&t->arena, CKC_ALIGN, CKC_ALIGN);
}

#ifdef HAVE_CUDA_H

#include <cuda.h>

#define GPU_CHUNK_MIN (256ull << 20)

/* The driver functions the tier calls, by their exact versioned names. */
#define GPU_DRV(X)                                                                                     \
	X(cuCtxGetCurrent, (CUcontext *))                                                              \
	X(cuCtxSetCurrent, (CUcontext))                                                                \
	X(cuCtxGetDevice, (CUdevice *))                                                                \
	X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                           \
	X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                                    \
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
static struct {
	GPU_DRV(GPU_FIELD)
	bool loaded;
} drv;

static pthread_mutex_t gpu_life = PTHREAD_MUTEX_INITIALIZER;

static bool drv_load(void)
{
	if (drv.loaded)
		return true;
	if (!ckc_gpu_sym)
		return false;
#define GPU_LOAD(name, params)                                                     \
	if (!(drv.name = (CUresult(*) params)ckc_gpu_sym(#name))) {                \
		ckc_warn("gpu tier: libcuda has no %s: the tier stays off", #name); \
		return false;                                                      \
	}
	GPU_DRV(GPU_LOAD)
#undef GPU_LOAD
	drv.loaded = true;
	return true;
}

/* The context of the arena current on this thread, this thread's stream
 * and its pinned bounce buffer for small copies to pageable memory (a
 * pageable copy costs a staged, synchronous transfer inside the driver). */
static __thread CUstream tl_stream;
static __thread CUcontext tl_ctx;
static __thread void *tl_bounce;
#define BOUNCE (64u << 10)

/* ---- sharing the device with the program -----------------------------
 * The driver serialises more than the hardware does: a transfer to or from
 * pageable memory, a registration of host memory and the mapping of device
 * memory hold the program's own calls for their whole length, and copies
 * queued in one direction delay the program's copies in that direction
 * behind them. The cache's background threads (flushers, prefetcher,
 * mapping thread) therefore move bytes in pieces of at most GPU_XFER
 * through pinned memory only, and start each piece (or registration, or
 * mapping) only while no copy of the program is in progress, waiting at
 * most GPU_YIELD_MAX_NS for it. */
#define GPU_XFER (4u << 20)
#define GPU_YIELD_MAX_NS 5000000ull

static atomic_int prog_copies;
static __thread void *tl_stage; /* GPU_XFER pinned bytes */

void ckc_gpu_prog_begin(void)
{
	atomic_fetch_add_explicit(&prog_copies, 1, memory_order_acq_rel);
}

void ckc_gpu_prog_end(void)
{
	atomic_fetch_sub_explicit(&prog_copies, 1, memory_order_acq_rel);
}

static void gpu_yield(void)
{
	if (!ckc_tl_background || atomic_load_explicit(&prog_copies, memory_order_acquire) <= 0)
		return;
	uint64_t t0 = ckc_now_ns();
	while (atomic_load_explicit(&prog_copies, memory_order_acquire) > 0 &&
	       ckc_now_ns() - t0 < GPU_YIELD_MAX_NS) {
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}

static int gpu_err(CUresult rc)
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

static int gpu_enter(const ckc_gpu_t *g, CUstream *s)
{
	CUcontext cur = NULL;
	if (drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
		return -ENODEV;
	if (cur != (CUcontext)g->ctx && drv.cuCtxSetCurrent((CUcontext)g->ctx) != CUDA_SUCCESS)
		return -ENODEV;
	if (!tl_stream || tl_ctx != (CUcontext)g->ctx) {
		if (drv.cuStreamCreate(&tl_stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
			tl_stream = NULL;
			return -EIO;
		}
		tl_ctx = (CUcontext)g->ctx;
	}
	*s = tl_stream;
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
	CUresult r = kind == 'h' ? drv.cuMemcpyDtoHAsync_v2(via, (CUdeviceptr)dev, n, s) :
				   drv.cuMemcpyHtoDAsync_v2((CUdeviceptr)dev, via, n, s);
	if (r == CUDA_SUCCESS)
		r = drv.cuStreamSynchronize(s);
	if (r == CUDA_SUCCESS && kind == 'h' && via != host)
		memcpy(host, via, n);
	return r;
}

/* This thread's pinned buffer of len bytes in *buf, made on first use. */
static void *pinned_buf(void **buf, size_t len)
{
	if (!*buf && drv.cuMemAllocHost_v2(buf, len) != CUDA_SUCCESS)
		*buf = NULL;
	return *buf;
}

/* One piece of a background transfer: at most GPU_XFER bytes, through the
 * thread's pinned stage when the host side is not pinned memory. */
static CUresult bg_piece(char kind, char *host, uint64_t dev, size_t n, CUstream s)
{
	gpu_yield();
	uint64_t off;
	const ckc_tier_t *h = host_tier_of(host, &off);
	void *via = h && off < atomic_load(&h->pinned_bytes) ? NULL : pinned_buf(&tl_stage, GPU_XFER);
	return copy_via(kind, via ? via : host, host, dev, n, s);
}

/* One copy on this thread's stream, waited for. kind: 'h' device->host,
 * 'd' host->device, 'x' device->device. */
static int gpu_copy(const ckc_gpu_t *g, char kind, void *host, uint64_t dst, uint64_t src, size_t n)
{
	CUstream s;
	int rc = gpu_enter(g, &s);
	if (rc)
		return rc;
	if (ckc_gpu_settle)
		ckc_gpu_settle();
	bool prog = !ckc_tl_background;
	if (prog)
		ckc_gpu_prog_begin();
	CUresult r = CUDA_SUCCESS;
	if (kind == 'x') {
		gpu_yield();
		r = drv.cuMemcpyDtoDAsync_v2((CUdeviceptr)dst, (CUdeviceptr)src, n, s);
		if (r == CUDA_SUCCESS)
			r = drv.cuStreamSynchronize(s);
	} else if (ckc_tl_background) {
		uint64_t dev = kind == 'h' ? src : dst;
		for (size_t done = 0, k; r == CUDA_SUCCESS && done < n; done += k) {
			k = pin_run((char *)host + done, n - done);
			if (k > GPU_XFER)
				k = GPU_XFER;
			r = bg_piece(kind, (char *)host + done, dev + done, k, s);
		}
	} else if (n <= BOUNCE && !host_tier_of(host, NULL) && pinned_buf(&tl_bounce, BOUNCE)) {
		r = copy_via(kind, tl_bounce, host, kind == 'h' ? src : dst, n, s);
	} else {
		for (size_t done = 0; r == CUDA_SUCCESS && done < n;) {
			char *hp = (char *)host + done;
			size_t k = pin_run(hp, n - done);
			r = kind == 'h' ? drv.cuMemcpyDtoHAsync_v2(hp, (CUdeviceptr)(src + done), k, s) :
					  drv.cuMemcpyHtoDAsync_v2((CUdeviceptr)(dst + done), hp, k, s);
			done += k;
		}
		if (r == CUDA_SUCCESS)
			r = drv.cuStreamSynchronize(s);
	}
	if (prog)
		ckc_gpu_prog_end();
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

int ckc_gpu_dtod(ckc_tier_t *t, uint64_t dst, uint64_t src, size_t len)
{
	return gpu_copy(t->gpu, 'x', NULL, dst, src, len);
}

int ckc_gpu_dtoh(ckc_tier_t *t, void *dst, uint64_t src, size_t len)
{
	return gpu_copy(t->gpu, 'h', dst, 0, src, len);
}

/* ---- mapping --------------------------------------------------------- */

/* Maps chunk i (lock not held). */
static int gpu_map_chunk(ckc_gpu_t *g, size_t i)
{
	CUmemAllocationProp prop = { 0 };
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = g->device;
	CUmemGenericAllocationHandle h;
	CUdeviceptr at = (CUdeviceptr)(g->base + i * g->chunk);
	CUresult r = drv.cuMemCreate(&h, g->chunk, &prop, 0);
	if (r != CUDA_SUCCESS)
		return gpu_err(r);
	if ((r = drv.cuMemMap(at, g->chunk, 0, h, 0)) != CUDA_SUCCESS) {
		drv.cuMemRelease(h);
		return gpu_err(r);
	}
	CUmemAccessDesc acc = { 0 };
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if ((r = drv.cuMemSetAccess(at, g->chunk, &acc, 1)) != CUDA_SUCCESS) {
		drv.cuMemUnmap(at, g->chunk);
		drv.cuMemRelease(h);
		return gpu_err(r);
	}
	g->handle[i] = (uint64_t)h;
	return 0;
}

static void gpu_unmap_chunk(ckc_gpu_t *g, size_t i)
{
	drv.cuMemUnmap((CUdeviceptr)(g->base + i * g->chunk), g->chunk);
	drv.cuMemRelease((CUmemGenericAllocationHandle)g->handle[i]);
	g->handle[i] = 0;
}

/* Adds one mapped chunk to the arena (lock not held). Returns 0, 1 when
 * the arena is complete (or was cut), or -errno. */
static int gpu_grow_one(ckc_tier_t *t)
{
	ckc_gpu_t *g = t->gpu;

	pthread_mutex_lock(&ckc_eng.lock);
	size_t i = g->nmapped;
	bool done = i >= g->nchunk || (uint64_t)(i + 1) * g->chunk > g->ceiling || g->stop;
	pthread_mutex_unlock(&ckc_eng.lock);
	if (done)
		return 1;
	int rc = gpu_map_chunk(g, i);
	if (rc)
		return rc;
	pthread_mutex_lock(&ckc_eng.lock);
	if (g->nmapped != i || (uint64_t)(i + 1) * g->chunk > g->ceiling || g->stop) {
		/* a release cut the arena meanwhile */
		pthread_mutex_unlock(&ckc_eng.lock);
		gpu_unmap_chunk(g, i);
		return 1;
	}
	g->nmapped = i + 1;
	if (g->nmapped > g->nmapped_max)
		g->nmapped_max = g->nmapped;
	uint64_t cap = (uint64_t)g->nmapped * g->chunk;
	if (!g->usable) {
		arena_fini(&t->arena);
		rc = arena_init(&t->arena, cap, CKC_ALIGN);
	} else
		rc = arena_resize(&t->arena, cap);
	if (rc == 0) {
		g->usable = true;
		t->st.capacity = cap;
		ckc_eng.prefetch_gen++;
		pthread_cond_broadcast(&ckc_eng.cv);
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

/* Serialises pinning across the processes of the node: a lock file in the
 * node-local directory. */
static int pin_lock(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.ckptcache-pin.lock", dir && *dir ? dir : "/tmp");
	int fd = ckc_io.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd >= 0)
		while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
			;
	return fd;
}

/* The host tier is registered in pieces, each a short call (about 0.15 ms
 * for 4 MiB), so that the program's own CUDA calls are never held up for
 * long; a copy to or from it never crosses a piece. */
#define PIN_PIECE ((uint64_t)GPU_XFER)

static void gpu_pin_host(ckc_gpu_t *g)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		ckc_tier_t *h = &ckc_eng.tier[l];
		if (h->kind != TIER_HOST)
			continue;
		while (!g->stop && atomic_load(&h->populated) < h->arena.capacity) {
			struct timespec ts = { 0, 2000000 };
			nanosleep(&ts, NULL);
		}
		if (g->stop)
			return;
		int fd = pin_lock(ckc_eng.cfg.ssd_dir);
		uint64_t t0 = ckc_now_ns(), cap = h->arena.capacity, off;
		CUresult r = CUDA_SUCCESS;
		for (off = 0; off < cap && !g->stop; off += PIN_PIECE) {
			uint64_t n = cap - off < PIN_PIECE ? cap - off : PIN_PIECE;
			gpu_yield();
			if ((r = drv.cuMemHostRegister_v2(h->base + off, n, CU_MEMHOSTREGISTER_PORTABLE)) !=
			    CUDA_SUCCESS)
				break;
			atomic_store(&h->pinned_bytes, off + n);
			h->pinned_once = true;
			/* let the program's calls in between */
			struct timespec ts = { 0, 200000 };
			nanosleep(&ts, NULL);
		}
		if (fd >= 0)
			ckc_io.close(fd);
		if (r == CUDA_SUCCESS && off >= cap)
			ckc_info("host tier: %llu bytes pinned in %.1f ms",
				 (unsigned long long)cap, (double)(ckc_now_ns() - t0) / 1e6);
		else if (r != CUDA_SUCCESS)
			ckc_warn("host tier: cannot pin its memory past %llu bytes (CUDA error %d): copies "
				 "there run at pageable speed",
				 (unsigned long long)atomic_load(&h->pinned_bytes), (int)r);
	}
}

/* The host tier holding host address p (its offset there in *off), or
 * NULL. */
static const ckc_tier_t *host_tier_of(const void *p, uint64_t *off)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		const ckc_tier_t *h = &ckc_eng.tier[l];
		const char *c = p;
		if (h->kind == TIER_HOST && h->base && c >= h->base && c < h->base + h->arena.capacity) {
			if (off)
				*off = (uint64_t)(c - h->base);
			return h;
		}
	}
	return NULL;
}

/* Bytes of a copy at host address p that stay within one pinned piece of a
 * host tier (all of len elsewhere). */
static size_t pin_run(const void *p, size_t len)
{
	uint64_t off;
	if (!host_tier_of(p, &off))
		return len;
	uint64_t end = (off / PIN_PIECE + 1) * PIN_PIECE;
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
	if (drv.cuMemAllocHost_v2(&b, SLOTS * len) != CUDA_SUCCESS)
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

static void *gpu_mapper(void *arg)
{
	ckc_tier_t *t = arg;
	ckc_gpu_t *g = t->gpu;
	ckc_io_guard = 1;
	ckc_tl_background = true;

	drv.cuCtxSetCurrent((CUcontext)g->ctx);
	gpu_make_slots();
	int rc;
	do
		gpu_yield();
	while ((rc = gpu_grow_one(t)) == 0);
	if (rc < 0)
		ckc_info("gpu tier: %llu bytes mapped; the rest stays unmapped (%s)",
			 (unsigned long long)g->nmapped * g->chunk, strerror(-rc));
	gpu_pin_host(g);
	return NULL;
}

bool ckc_gpu_usable(const ckc_tier_t *t)
{
	return t->gpu && t->gpu->usable && !t->gpu->gone;
}

int ckc_gpu_attach(void *ctx, int device)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	int rc = 0;

	pthread_mutex_lock(&gpu_life);
	if (!ckc_eng.active || ckc_eng.ntier < 2 || t->kind != TIER_GPU) {
		rc = -ENODEV;
		goto out;
	}
	ckc_gpu_t *g = t->gpu;
	if (g->tried) {
		rc = g->usable && !g->gone ? (g->device == device ? 0 : -EXDEV) : -ENODEV;
		goto out;
	}
	g->tried = true;
	if (!drv_load()) {
		rc = -ENODEV;
		goto out;
	}
	g->ctx = ctx;
	g->device = device;
	CUcontext prim = NULL;
	if (drv.cuDevicePrimaryCtxRetain(&prim, (CUdevice)device) == CUDA_SUCCESS) {
		/* held so that the runtime's release at exit cannot destroy
		 * the arena's context before the cache has emptied it */
		if (prim == (CUcontext)ctx)
			g->retained = true;
		else
			drv.cuDevicePrimaryCtxRelease_v2((CUdevice)device);
	}
	size_t fr = 0, total = 0;
	if (drv.cuMemGetInfo_v2(&fr, &total) != CUDA_SUCCESS) {
		rc = -ENODEV;
		goto out;
	}
	const ckc_config_t *c = &ckc_eng.cfg;
	uint64_t want = c->gpu_cache_pct >= 0 ? (uint64_t)((double)fr * c->gpu_cache_pct / 100.0) :
						c->gpu_cache;
	CUmemAllocationProp prop = { 0 };
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = device;
	size_t gran = 0;
	if (drv.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
		    CUDA_SUCCESS || gran == 0)
		gran = 2u << 20;
	uint64_t chunk = (GPU_CHUNK_MIN + gran - 1) / gran * gran;
	if (want > fr)
		want = fr;
	want = want / chunk * chunk;
	if (want == 0) {
		char b1[32], b2[32];
		ckc_warn("CKPTCACHE_GPU_CACHE: %s of device %d is less than one %s chunk: no gpu tier",
			 ckc_format_size((uint64_t)fr, b1, sizeof(b1)), device,
			 ckc_format_size(chunk, b2, sizeof(b2)));
		rc = -ENOSPC;
		goto out;
	}
	CUdeviceptr base;
	CUresult r = drv.cuMemAddressReserve(&base, want, chunk, 0, 0);
	if (r != CUDA_SUCCESS) {
		ckc_warn("gpu tier: cannot reserve %llu bytes of address space (CUDA error %d)",
			 (unsigned long long)want, (int)r);
		rc = gpu_err(r);
		goto out;
	}
	g->base = (uint64_t)base;
	g->chunk = chunk;
	g->nchunk = (size_t)(want / chunk);
	g->reserved = want;
	g->ceiling = want;
	g->handle = calloc(g->nchunk, sizeof(*g->handle));
	if (!g->handle) {
		drv.cuMemAddressFree(base, want);
		rc = -ENOMEM;
		goto out;
	}
	/* the first chunk now, so the first capture finds room; the rest in
	 * the background */
	if ((rc = gpu_grow_one(t)) < 0) {
		ckc_warn("gpu tier: cannot map device memory (%s)", strerror(-rc));
		free(g->handle);
		g->handle = NULL;
		drv.cuMemAddressFree(base, want);
		goto out;
	}
	rc = 0;
	g->mapper_running = pthread_create(&g->mapper, NULL, gpu_mapper, t) == 0;
	char b1[32];
	ckc_info("gpu tier: %s on device %d, mapped in %llu chunks in the background",
		 ckc_format_size(want, b1, sizeof(b1)), device, (unsigned long long)g->nchunk);
out:
	pthread_mutex_unlock(&gpu_life);
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

/* Evicts every copy in [from, capacity) of the arena that may go; lock
 * held. Returns whether everything there is free now. */
static bool gpu_empty_tail(ckc_tier_t *t, uint64_t from)
{
	arena_t *a = &t->arena;
	for (size_t i = 0; i < a->nfrag; i++) {
		arena_frag_t *f = &a->frag[i];
		if (!f->owner || f->off + f->len <= from)
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
		}
	}
	return arena_busy_end(a) <= from;
}

uint64_t ckc_gpu_release(uint64_t bytes)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	uint64_t released = 0;

	pthread_mutex_lock(&gpu_life);
	pthread_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active || t->kind != TIER_GPU || !ckc_gpu_usable(t)) {
		pthread_mutex_unlock(&ckc_eng.lock);
		pthread_mutex_unlock(&gpu_life);
		return 0;
	}
	ckc_gpu_t *g = t->gpu;
	uint64_t cap = (uint64_t)g->nmapped * g->chunk;
	uint64_t want = (bytes + g->chunk - 1) / g->chunk * g->chunk;
	uint64_t target = want >= cap ? 0 : cap - want;
	/* no more growth: the program needs this memory */
	g->ceiling = target;
	/* what is being flushed or read goes once it is safe below: wait a
	 * little for it (flushes to the host run at tens of GB/s) */
	uint64_t deadline = ckc_now_ns() + 2000000000ull;
	while (!gpu_empty_tail(t, target) && ckc_now_ns() < deadline) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&ckc_eng.cv, &ckc_eng.lock, &ts);
	}
	uint64_t busy = arena_busy_end(&t->arena);
	uint64_t keep = (busy + g->chunk - 1) / g->chunk * g->chunk;
	if (keep < target)
		keep = target;
	size_t nkeep = (size_t)(keep / g->chunk);
	if (nkeep < g->nmapped) {
		if (nkeep == 0) {
			g->usable = false;
			arena_fini(&t->arena);
			arena_init(&t->arena, CKC_ALIGN, CKC_ALIGN);
		} else {
			arena_resize(&t->arena, keep);
		}
		size_t from = nkeep, to = g->nmapped;
		g->nmapped = nkeep;
		t->st.capacity = keep;
		pthread_mutex_unlock(&ckc_eng.lock);
		if (ckc_gpu_settle)
			ckc_gpu_settle();
		for (size_t i = from; i < to; i++)
			gpu_unmap_chunk(g, i);
		released = (uint64_t)(to - from) * g->chunk;
		pthread_mutex_lock(&ckc_eng.lock);
		g->released_bytes += released;
		g->releases++;
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	pthread_mutex_unlock(&gpu_life);
	if (released)
		ckc_info("gpu tier: %llu bytes given back to the program", (unsigned long long)released);
	return released;
}

static void gpu_stop_mapper(ckc_gpu_t *g, bool locked)
{
	if (!locked)
		pthread_mutex_lock(&ckc_eng.lock);
	g->stop = true;
	pthread_cond_broadcast(&ckc_eng.cv);
	if (!locked)
		pthread_mutex_unlock(&ckc_eng.lock);
	if (g->mapper_running) {
		/* it takes the lock: it must not be held here */
		if (!locked)
			pthread_join(g->mapper, NULL);
		else
			ckc_error("gpu tier: mapping thread still running at close");
		g->mapper_running = false;
	}
}

void ckc_gpu_stop(ckc_tier_t *t)
{
	if (t->gpu)
		gpu_stop_mapper(t->gpu, false);
}

/* Unmaps everything and gives the memory back. */
static void gpu_teardown(ckc_tier_t *t, bool locked)
{
	ckc_gpu_t *g = t->gpu;

	gpu_stop_mapper(g, locked);
	if (!drv.loaded || !g->handle)
		return;
	if (ckc_gpu_settle)
		ckc_gpu_settle();
	drv.cuCtxSetCurrent((CUcontext)g->ctx);
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		ckc_tier_t *h = &ckc_eng.tier[l];
		uint64_t pinned = h->kind == TIER_HOST ? atomic_load(&h->pinned_bytes) : 0;
		for (uint64_t off = 0; off < pinned; off += PIN_PIECE)
			drv.cuMemHostUnregister(h->base + off);
		if (pinned)
			atomic_store(&h->pinned_bytes, 0);
	}
	for (size_t i = 0; i < g->nmapped; i++)
		gpu_unmap_chunk(g, i);
	g->nmapped = 0;
	drv.cuMemAddressFree((CUdeviceptr)g->base, g->reserved);
	free(g->handle);
	g->handle = NULL;
	if (g->retained)
		drv.cuDevicePrimaryCtxRelease_v2((CUdevice)g->device);
	g->retained = false;
}

void ckc_gpu_exit(void)
{
	ckc_tier_t *t = &ckc_eng.tier[0];

	pthread_mutex_lock(&gpu_life);
	if (!ckc_eng.active || t->kind != TIER_GPU || !t->gpu || t->gpu->gone) {
		pthread_mutex_unlock(&gpu_life);
		return;
	}
	ckc_gpu_evacuate();
	pthread_mutex_lock(&ckc_eng.lock);
	t->gpu->gone = true;
	t->gpu->usable = false;
	pthread_mutex_unlock(&ckc_eng.lock);
	gpu_teardown(t, false);
	pthread_mutex_unlock(&gpu_life);
}

void ckc_gpu_close(ckc_tier_t *t)
{
	if (!t->gpu)
		return;
	if (!t->gpu->gone)
		gpu_teardown(t, true);
	arena_fini(&t->arena);
	free(t->gpu);
	t->gpu = NULL;
}

void ckc_gpu_stats(const ckc_tier_t *t, ckc_stats_t *s)
{
	const ckc_gpu_t *g = t->gpu;
	s->gpu_present = true;
	s->gpu_arena_bytes = g->reserved;
	s->gpu_mapped_bytes = (uint64_t)g->nmapped_max * g->chunk;
	s->gpu_released_bytes = g->released_bytes;
	s->gpu_releases = g->releases;
	s->gpu_device = g->device;
}

#else /* !HAVE_CUDA_H */

bool ckc_gpu_usable(const ckc_tier_t *t) { (void)t; return false; }
int ckc_gpu_attach(void *ctx, int device) { (void)ctx; (void)device; return -ENODEV; }
uint64_t ckc_gpu_release(uint64_t bytes) { (void)bytes; return 0; }
void ckc_gpu_exit(void) {}
void *ckc_gpu_pinned_slot(size_t len) { (void)len; return NULL; }
void ckc_gpu_prog_begin(void) {}
void ckc_gpu_prog_end(void) {}
void ckc_gpu_stop(ckc_tier_t *t) { (void)t; }
void ckc_gpu_close(ckc_tier_t *t) { arena_fini(&t->arena); free(t->gpu); t->gpu = NULL; }
int ckc_gpu_put(ckc_tier_t *t, uint64_t a, const void *b, size_t n) { (void)t; (void)a; (void)b; (void)n; return -ENODEV; }
int ckc_gpu_get(ckc_tier_t *t, uint64_t a, void *b, size_t n) { (void)t; (void)a; (void)b; (void)n; return -ENODEV; }
int ckc_gpu_dtod(ckc_tier_t *t, uint64_t d, uint64_t s, size_t n) { (void)t; (void)d; (void)s; (void)n; return -ENODEV; }
int ckc_gpu_dtoh(ckc_tier_t *t, void *d, uint64_t s, size_t n) { (void)t; (void)d; (void)s; (void)n; return -ENODEV; }
void ckc_gpu_stats(const ckc_tier_t *t, ckc_stats_t *s) { (void)t; s->gpu_present = true; }

#endif /* HAVE_CUDA_H */
