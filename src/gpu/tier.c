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
 * device) the tier stays empty and every placement bypasses it.
 *
 * This file owns the regions: their set-up on a device, their mapping
 * thread, their chunks and fences, and the tier's stop, tear-down and
 * statistics. The copies are xfer.c's, the pinned host memory pin.c's,
 * giving memory back to the program release.c's, lending lend.c's. */
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
	t->gpu = ckc_io.calloc(1, sizeof(*t->gpu));
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
	eng_signal(EC_ROOM);
	return 0;
}

/* Adds one mapped chunk to region r (lock not held). Returns 0, 1 when
 * the region is complete (or was cut), or -errno. */
static int gpu_grow_one(ckc_tier_t *t, ckc_gpu_dev_t *r)
{
	ckc_gpu_t *g = t->gpu;

	ckc_mutex_lock(&ckc_eng.lock);
	/* a cut of the tail unmaps chunks at and past nmapped without the
	 * lock: it ends first (it waits for no one) */
	while (r->unmapping && !g->stop)
		eng_wait_ns(EC_ROOM, 10000000);
	size_t i = r->nmapped;
	bool done = i >= r->nchunk || (uint64_t)(i + 1) * g->chunk > r->ceiling || g->stop;
	if (done)
		r->mapper_idle = true;
	eng_unlock();
	if (done)
		return 1;
	int rc = gpu_map_chunk(g, r, i);
	if (rc)
		return rc;
	ckc_mutex_lock(&ckc_eng.lock);
	if (r->nmapped != i || (uint64_t)(i + 1) * g->chunk > r->ceiling || g->stop) {
		/* a cut took the region's tail meanwhile: the next step looks
		 * again (a release lowered the ceiling; a loan, by as much as
		 * it took) */
		eng_unlock();
		gpu_unmap_chunk(g, r, i);
		return 0;
	}
	rc = gpu_join_chunk(t, r, i);
	if (rc == 0)
		ckc_prefetch_kick();
	eng_unlock();
	if (rc)
		gpu_unmap_chunk(g, r, i);
	return rc;
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
	/* (a loan's cut changes them under the lock) */
	unsigned long long mapped = (unsigned long long)r->nmapped * g->chunk;
	bool stop = g->stop;
	eng_unlock();
	if (rc < 0)
		ckc_info("gpu tier: %llu bytes mapped on device %d; the rest stays unmapped (%s)", mapped,
			 r->device, strerror(-rc));
	else if (!r->lender1 && !stop)
		ckc_info("gpu tier: %llu bytes mapped on device %d, all it may take now", mapped, r->device);
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
ckc_gpu_dev_t *gpu_region_for(const ckc_gpu_t *g, int device)
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
	eng_unlock();
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
	r->handle = sys_calloc(r->nchunk, sizeof(*r->handle));
	if (!r->handle) {
		rc = -ENOMEM;
		goto unretain;
	}
	ckc_mutex_lock(&ckc_eng.lock);
	g->ndev++;
	eng_unlock();
	/* the first chunk now, so the first capture finds room; the rest in
	 * the background */
	if ((rc = gpu_grow_one(t, r)) < 0) {
		ckc_warn("gpu tier: cannot map memory of device %d (%s)", device, strerror(-rc));
		ckc_mutex_lock(&ckc_eng.lock);
		g->ndev--;
		eng_unlock();
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

static void gpu_stop_mappers(ckc_gpu_t *g, bool locked)
{
	if (!locked)
		ckc_mutex_lock(&ckc_eng.lock);
	g->stop = true;
	eng_signal(EC_ROOM);
	if (!locked)
		eng_unlock();
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
		ckc_tier_unpin(&ckc_eng.tier[l], &gpu_pin_fns);
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
	eng_unlock();
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

#include "sys.h"

bool ckc_gpu_usable(const ckc_tier_t *t) { (void)t; return false; }
int ckc_gpu_attach(void *ctx, int device) { (void)ctx; (void)device; return -ENODEV; }
uint64_t ckc_gpu_release(int device, uint64_t bytes) { (void)device; (void)bytes; return 0; }
int ckc_gpu_span(const ckc_tier_t *t, const ckc_obj_t *o, uint64_t *lo, uint64_t *hi) { (void)t; (void)o; (void)lo; (void)hi; return -ENOSPC; }
int ckc_gpu_device_of(uint64_t dptr) { (void)dptr; return -1; }
void ckc_gpu_exit(void) {}
void *ckc_gpu_pinned_slot(size_t len) { (void)len; return NULL; }
void *ckc_gpu_window_get(void) { return sys_malloc(CKC_GPU_WINDOW); }
void ckc_gpu_window_put(void *w) { sys_free(w); }
void ckc_gpu_stop(ckc_tier_t *t) { (void)t; }
void ckc_gpu_close(ckc_tier_t *t) { arena_fini(&t->arena); sys_free(t->gpu); t->gpu = NULL; }
int ckc_gpu_put(ckc_tier_t *t, uint64_t a, const void *b, size_t n) { (void)t; (void)a; (void)b; (void)n; return -ENODEV; }
int ckc_gpu_get(ckc_tier_t *t, uint64_t a, void *b, size_t n) { (void)t; (void)a; (void)b; (void)n; return -ENODEV; }
int ckc_gpu_put_filled(ckc_tier_t *t, uint64_t a, size_t n, int (*f)(void *, uint64_t, void *, size_t), void *c)
{ (void)t; (void)a; (void)n; (void)f; (void)c; return -ENODEV; }
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