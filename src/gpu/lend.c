/* The gpu tier's side of lending between the ranks of a node (the
 * protocol and the schedule are peer_lend.c's and peer.c's). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "gpu_int.h"
#include "log.h"
#include "peer_lend.h"
#include "thread.h"

#ifdef HAVE_CUDA_H
#include "sys.h"

/* A lender cuts whole free chunks off the end of its own region (its
 * ceiling drops by as much, so its mapping thread does not take them
 * again) and makes allocations of the same size that can be exported as
 * file descriptors; a borrower imports them and maps them, for its own
 * device, in a slot of its address range of their own: a region whose
 * chunks live on the peer's device. Placement, copies, flushes and eviction
 * treat it as any region; only a capture that finds no room in its own
 * device's region is placed there. */

typedef CUresult (*export_fn)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
typedef CUresult (*import_fn)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);

/* This process's own region that lends (lock held; NULL: none). */
static ckc_gpu_dev_t *gpu_lender_region(ckc_gpu_t *g)
{
	for (int i = 0; i < g->ndev; i++)
		if (!g->dev[i].lender1 && g->dev[i].usable)
			return &g->dev[i];
	return NULL;
}

/* The free bytes at the end of region r's mapped part (lock held). */
static uint64_t gpu_free_tail(const ckc_tier_t *t, const ckc_gpu_dev_t *r)
{
	uint64_t end = r->off + (uint64_t)r->nmapped * t->gpu->chunk;
	ssize_t idx = arena_index_of(&t->arena, end);
	if (idx <= 0 || end == r->off)
		return 0;
	const arena_frag_t *f = &t->arena.frag[idx - 1];
	if (f->owner)
		return 0;
	return end - (f->off > r->off ? f->off : r->off);
}

uint64_t ckc_gpu_chunk(void)
{
	const ckc_tier_t *t = &ckc_eng.tier[0];
	return t->kind == TIER_GPU && t->gpu ? t->gpu->chunk : 0;
}

uint64_t ckc_gpu_lendable(void)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	if (t->kind != TIER_GPU || !ckc_gpu_usable(t))
		return 0;
	ckc_gpu_dev_t *r = gpu_lender_region(t->gpu);
	return r ? gpu_free_tail(t, r) / t->gpu->chunk * t->gpu->chunk : 0;
}

int ckc_gpu_lend_cut(uint64_t want, uint64_t *cut, uint64_t *chunk)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	*cut = 0;
	ckc_mutex_lock(&gpu_life);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_gpu_dev_t *r = ckc_eng.active && t->kind == TIER_GPU && ckc_gpu_usable(t) ? gpu_lender_region(t->gpu) : NULL;
	if (!r) {
		eng_unlock();
		ckc_mutex_unlock(&gpu_life);
		return -ENODEV;
	}
	ckc_gpu_t *g = t->gpu;
	*chunk = g->chunk;
	uint64_t tail = gpu_free_tail(t, r) / g->chunk;
	uint64_t k = (want + g->chunk - 1) / g->chunk;
	if (k > tail)
		k = tail;
	if (k) {
		/* its ceiling first, so that its mapping thread does not
		 * map them again; the tail is free, nothing is evicted */
		r->ceiling -= k * g->chunk;
		*cut = gpu_cut_tail(t, r, (uint64_t)r->nmapped * g->chunk - k * g->chunk, 0);
		r->ceiling += k * g->chunk - *cut;
	}
	eng_unlock();
	ckc_mutex_unlock(&gpu_life);
	return 0;
}

int ckc_gpu_lend_alloc(uint64_t len, int *fd, uint64_t *handle)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	export_fn ex = ckc_svc.gpu_sym ? (export_fn)ckc_svc.gpu_sym("cuMemExportToShareableHandle") : NULL;
	if (!ex || t->kind != TIER_GPU || !t->gpu)
		return -ENOTSUP;
	ckc_mutex_lock(&ckc_eng.lock);
	const ckc_gpu_dev_t *r = gpu_lender_region(t->gpu);
	int device = r ? r->device : -1;
	void *ctx = r ? r->ctx : NULL;
	eng_unlock();
	if (device < 0)
		return -ENODEV;
	gpu_drv.cuCtxSetCurrent((CUcontext)ctx);
	CUmemAllocationProp prop = { 0 };
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = device;
	CUmemGenericAllocationHandle h;
	CUresult rc = gpu_drv.cuMemCreate(&h, len, &prop, 0);
	if (rc != CUDA_SUCCESS)
		return gpu_err(rc);
	int out = -1;
	if ((rc = ex(&out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) != CUDA_SUCCESS || out < 0) {
		gpu_drv.cuMemRelease(h);
		return rc != CUDA_SUCCESS ? gpu_err(rc) : -EIO;
	}
	*fd = out;
	*handle = (uint64_t)h;
	return 0;
}

void ckc_gpu_lend_free(uint64_t handle)
{
	if (gpu_drv.loaded && handle)
		gpu_drv.cuMemRelease((CUmemGenericAllocationHandle)handle);
}

void ckc_gpu_lend_back(uint64_t bytes, bool grow)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	ckc_mutex_lock(&gpu_life);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_gpu_dev_t *r = ckc_eng.active && t->kind == TIER_GPU && t->gpu && !t->gpu->gone && !t->gpu->stop
				   ? gpu_lender_region(t->gpu)
				   : NULL;
	bool start = false;
	if (r && grow) {
		r->ceiling += bytes;
		if (r->ceiling > r->reserved)
			r->ceiling = r->reserved;
		/* a mapping thread still at work sees the new ceiling */
		start = r->nmapped < r->nchunk && (uint64_t)(r->nmapped + 1) * t->gpu->chunk <= r->ceiling &&
			(!r->mapper_running || r->mapper_idle);
		if (start)
			r->mapper_idle = false;
	}
	eng_unlock();
	if (start) {
		if (r->mapper_running)
			pthread_join(r->mapper, NULL);
		r->mapper_running = ckc_thread_start(&r->mapper, gpu_mapper, r, "ckc-gpu-map", false) == 0;
	}
	ckc_mutex_unlock(&gpu_life);
}

/* The region lent by board entry lender, or a new one (lock held; NULL:
 * no slot left). */
static ckc_gpu_dev_t *gpu_lent_region(ckc_gpu_t *g, int lender, bool make)
{
	for (int i = 0; i < g->ndev; i++)
		if (g->dev[i].lender1 == lender + 1)
			return &g->dev[i];
	if (!make || g->ndev >= g->nslot || !g->ndev)
		return NULL;
	ckc_gpu_dev_t *r = &g->dev[g->ndev];
	memset(r, 0, sizeof(*r));
	r->off = (uint64_t)g->ndev * g->slot;
	r->nchunk = (size_t)(g->slot / g->chunk) - 1;
	r->handle = sys_calloc(r->nchunk, sizeof(*r->handle));
	if (!r->handle)
		return NULL;
	r->lender1 = lender + 1;
	/* copies run in the context of the device the captures come from */
	r->ctx = g->dev[0].ctx;
	r->device = g->dev[0].device;
	r->reserved = r->ceiling = (uint64_t)r->nchunk * g->chunk;
	g->ndev++;
	return r;
}

int ckc_gpu_borrow_add(int lender, int home, const int *fds, int n, uint64_t chunk)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	import_fn im = ckc_svc.gpu_sym ? (import_fn)ckc_svc.gpu_sym("cuMemImportFromShareableHandle") : NULL;
	int mapped = 0;
	if (!im || t->kind != TIER_GPU || !t->gpu)
		return -ENOTSUP;
	ckc_mutex_lock(&gpu_life);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_gpu_t *g = t->gpu;
	ckc_gpu_dev_t *r = NULL;
	int rc = 0;
	if (!ckc_eng.active || !ckc_gpu_usable(t) || g->stop)
		rc = -ENODEV;
	else if (chunk != g->chunk)
		rc = -EINVAL;
	else if (!(r = gpu_lent_region(g, lender, true)))
		rc = -ENOSPC;
	else if (r->closing)
		rc = -ESHUTDOWN;
	if (r)
		r->home = home;
	eng_unlock();
	if (rc) {
		ckc_mutex_unlock(&gpu_life);
		return rc;
	}
	gpu_drv.cuCtxSetCurrent((CUcontext)r->ctx);
	for (int k = 0; k < n; k++) {
		size_t i = r->nmapped;
		if (i >= r->nchunk)
			break;
		CUmemGenericAllocationHandle h;
		CUresult cr = im(&h, (void *)(intptr_t)fds[k], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
		if (cr != CUDA_SUCCESS) {
			rc = gpu_err(cr);
			break;
		}
		if ((rc = gpu_map_handle(g, r, i, (uint64_t)h)) != 0) {
			gpu_drv.cuMemRelease(h);
			break;
		}
		ckc_mutex_lock(&ckc_eng.lock);
		rc = gpu_join_chunk(t, r, i);
		eng_unlock();
		if (rc) {
			gpu_unmap_chunk(g, r, i);
			break;
		}
		mapped++;
	}
	ckc_mutex_unlock(&gpu_life);
	if (rc && !mapped)
		ckc_warn("gpu tier: cannot map memory lent by peer entry %d (%s)", lender, strerror(-rc));
	return mapped ? mapped : rc;
}

uint64_t ckc_gpu_borrow_return(int lender, uint64_t want, double wait_s)
{
	ckc_tier_t *t = &ckc_eng.tier[0];

	ckc_mutex_lock(&gpu_life);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_gpu_dev_t *r = t->kind == TIER_GPU && t->gpu && t->gpu->nslot ? gpu_lent_region(t->gpu, lender, false) : NULL;
	if (!r || !r->nmapped) {
		eng_unlock();
		ckc_mutex_unlock(&gpu_life);
		return 0;
	}
	ckc_gpu_t *g = t->gpu;
	uint64_t cap = (uint64_t)r->nmapped * g->chunk;
	uint64_t target = want >= cap ? 0 : cap - (want + g->chunk - 1) / g->chunk * g->chunk;
	if (want == UINT64_MAX)
		r->closing = true;
	uint64_t back = gpu_cut_tail(t, r, target, wait_s);
	eng_unlock();
	ckc_mutex_unlock(&gpu_life);
	return back;
}

int ckc_gpu_lent_regions(int *greg1, int max)
{
	const ckc_tier_t *t = &ckc_eng.tier[0];
	int n = 0;
	if (t->kind != TIER_GPU || !t->gpu)
		return 0;
	for (int i = 0; i < t->gpu->ndev && n < max; i++) {
		const ckc_gpu_dev_t *r = &t->gpu->dev[i];
		if (r->lender1 && r->usable && !r->closing)
			greg1[n++] = i + 1;
	}
	return n;
}

#else /* !HAVE_CUDA_H */
#include "sys.h"

uint64_t ckc_gpu_lendable(void) { return 0; }
int ckc_gpu_lend_cut(uint64_t want, uint64_t *cut, uint64_t *chunk) { (void)want; *cut = 0; *chunk = 0; return -ENODEV; }
int ckc_gpu_lend_alloc(uint64_t len, int *fd, uint64_t *handle) { (void)len; (void)fd; (void)handle; return -ENOTSUP; }
void ckc_gpu_lend_free(uint64_t handle) { (void)handle; }
void ckc_gpu_lend_back(uint64_t bytes, bool grow) { (void)bytes; (void)grow; }
int ckc_gpu_borrow_add(int lender, int home, const int *fds, int n, uint64_t chunk) { (void)lender; (void)home; (void)fds; (void)n; (void)chunk; return -ENOTSUP; }
uint64_t ckc_gpu_borrow_return(int lender, uint64_t want, double wait_s) { (void)lender; (void)want; (void)wait_s; return 0; }
uint64_t ckc_gpu_chunk(void) { return 0; }
int ckc_gpu_lent_regions(int *greg1, int max) { (void)greg1; (void)max; return 0; }

#endif /* HAVE_CUDA_H */
