/* The events of device capture's copies: made, recorded on the program's
 * streams, waited for, counted by the owed entries that share them and kept
 * for reuse; and each device's last deferred capture, which the cache's own
 * reads, frees of device memory and fills of owed pages wait for. */
#include "config.h"

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include <stdlib.h>
#include <time.h>

#include "backtrace.h"
#include "intercept.h"
#include "log.h"
#include "owed.h"
#include "cuda_int.h"

static _Atomic(void *) cx_ctx, cx_evc, cx_evr, cx_evs, cx_evd, cx_evq;

/* Events shared by owed entries: counted, destroyed with the last user. */
struct cu_ev {
	CUevent ev;
	CUcontext ctx;
	atomic_int refs;
};

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
	bool kept = ev_nfree < EV_KEEP && atomic_load(&ckc_cu_gpu_state) > 0;
	if (kept)
		ev_free[ev_nfree++] = e;
	ckc_mutex_unlock(&ev_lock);
	return kept;
}

cu_ev_t *ckc_cu_ev_record(CUstream t)
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
void ckc_cu_ev_wait(void *p)
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

void ckc_cu_ev_put(void *p)
{
	cu_ev_t *e = p;
	if (atomic_fetch_sub(&e->refs, 1) != 1)
		return;
	/* a recorded event may be recorded again: a later wait on it waits
	 * for the later work only, and nothing waits on a spent one */
	if (!cu_ev_keep(e))
		cu_ev_destroy(e);
}

const ckc_owed_ops_t ckc_cu_owed_ops = { ckc_cu_ev_wait, cu_ev_get, ckc_cu_ev_put };

/* A few spare events of the current context ctx, made when its device's
 * region is set up (at the program's first allocation there), so that the
 * first capture does not make them. */
#define EV_STOCK 4
void ckc_cu_ev_stock(CUcontext ctx)
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

/* Deferred completion of synchronous captures (cuda_capture.c). */
static cu_ev_t *cap_pending[CKC_GPU_MAXDEV]; /* each device's last deferred capture (ev_lock) */
static atomic_int cap_npending;

void ckc_cu_settle(void)
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
		ckc_cu_ev_wait(e);
		ckc_mutex_lock(&ev_lock);
		bool last = cap_pending[d] == e;
		if (last) {
			cap_pending[d] = NULL;
			atomic_fetch_sub(&cap_npending, 1);
		}
		ckc_mutex_unlock(&ev_lock);
		if (last)
			ckc_cu_ev_put(e);
		ckc_cu_ev_put(e);
	}
}

/* e: the latest deferred capture on device dev. */
void ckc_cu_pending(int dev, cu_ev_t *e)
{
	cu_ev_get(e);
	ckc_mutex_lock(&ev_lock);
	cu_ev_t *old = cap_pending[dev];
	cap_pending[dev] = e;
	if (!old)
		atomic_fetch_add(&cap_npending, 1);
	ckc_mutex_unlock(&ev_lock);
	if (old)
		ckc_cu_ev_put(old);
}

#endif /* HAVE_CUDA_H */
