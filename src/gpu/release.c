/* Device memory given back to the program: when its own allocation fails
 * for lack of memory, what this device lent to the node's other ranks comes
 * back first, then the tail of its region is emptied (copies that are safe
 * below are evicted) and its chunks are unmapped and released. */
#include "config.h"

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include <errno.h>
#include <time.h>

#include "engine_int.h"
#include "gpu_int.h"
#include "log.h"
#include "peer_lend.h"
#include "sys.h"

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
	       ckc_now_ns() < deadline)
		eng_wait_ns(EC_ROOM, 10000000);
	uint64_t keep = (busy - r->off + g->chunk - 1) / g->chunk * g->chunk;
	if (keep < target)
		keep = target;
	size_t nkeep = (size_t)(keep / g->chunk);
	if (nkeep >= r->nmapped || gpu_fence_to(t, r, cap, keep) != 0)
		return 0;
	size_t from = nkeep, to = r->nmapped;
	r->nmapped = nkeep;
	r->usable = nkeep > 0;
	/* the region's mapping thread may grow it again below the ceiling:
	 * not into the chunks unmapped here before they are */
	r->unmapping = true;
	gpu_capacity(t);
	eng_unlock();
	if (ckc_svc.gpu_settle)
		ckc_svc.gpu_settle();
	gpu_drv.cuCtxSetCurrent((CUcontext)r->ctx);
	for (size_t i = from; i < to; i++)
		gpu_unmap_chunk(g, r, i);
	ckc_mutex_lock(&ckc_eng.lock);
	r->unmapping = false;
	eng_signal(EC_ROOM);
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
		eng_unlock();
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
	eng_unlock();
	ckc_mutex_unlock(&gpu_life);
	if (released)
		ckc_info("gpu tier: %llu bytes of device %d given back to the program",
			 (unsigned long long)released, device);
	return released + back;
}

#endif /* HAVE_CUDA_H */
