/* The tiers' interface (tier.h): the engine's calls, dispatched to each
 * tier's operations, and the copy between two tiers. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "engine_int.h"
#include "tier.h"
#include "sys.h"

/* A copy between two tiers neither of which is in memory goes through a
 * buffer of this size. */
#define TIER_BOUNCE (4u << 20)

int ckc_tier_put(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len)
{
	return t->ops && t->ops->put ? t->ops->put(t, aoff, buf, len) : -ENOTSUP;
}

int ckc_tier_get(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len)
{
	return t->ops && t->ops->get ? t->ops->get(t, aoff, buf, len) : -ENOTSUP;
}

int ckc_tier_copy(ckc_tier_t *from, uint64_t foff, ckc_tier_t *to, uint64_t toff, size_t len)
{
	if (from->kind == TIER_GPU && to->kind == TIER_GPU)
		return ckc_gpu_dtod(from, from->gpu->base + foff, to->gpu->base + toff, len);
	if (from->kind == TIER_HOST)
		return ckc_tier_put(to, toff, from->base + foff, len);
	if (to->kind == TIER_HOST)
		return ckc_tier_get(from, foff, to->base + toff, len);
	char *bounce;
	if (sys_posix_memalign((void **)&bounce, CKC_ALIGN, TIER_BOUNCE))
		return -ENOMEM;
	int rc = 0;
	while (len > 0 && rc == 0) {
		size_t n = len < TIER_BOUNCE ? len : TIER_BOUNCE;
		rc = ckc_tier_get(from, foff, bounce, n);
		if (!rc)
			rc = ckc_tier_put(to, toff, bounce, n);
		foff += n;
		toff += n;
		len -= n;
	}
	sys_free(bounce);
	return rc;
}

int ckc_tier_span(const ckc_tier_t *t, const ckc_obj_t *o, uint64_t *lo, uint64_t *hi)
{
	if (t->ops && t->ops->span)
		return t->ops->span(t, o, lo, hi);
	*lo = 0;
	*hi = t->arena.capacity;
	return 0;
}

void ckc_tier_stop(ckc_tier_t *t)
{
	if (t->ops && t->ops->stop)
		t->ops->stop(t);
}

void ckc_tier_finish(ckc_tier_t *t)
{
	if (t->ops && t->ops->finish)
		t->ops->finish(t);
}

void ckc_tier_close(ckc_tier_t *t)
{
	if (t->ops && t->ops->teardown)
		t->ops->teardown(t);
}

void ckc_tier_stats(const ckc_tier_t *t, ckc_stats_t *s)
{
	if (t->ops && t->ops->stats)
		t->ops->stats(t, s);
}

bool ckc_tier_holds(const ckc_tier_t *t, const void *p, uint64_t *off)
{
	return t->ops && t->ops->holds && t->ops->holds(t, p, off);
}

int ckc_tier_pin(ckc_tier_t *t, const ckc_pin_fns_t *fns, const atomic_bool *stop, uint64_t *done)
{
	*done = 0;
	return t->ops && t->ops->pin ? t->ops->pin(t, fns, stop, done) : -ENOTSUP;
}

void ckc_tier_unpin(ckc_tier_t *t, const ckc_pin_fns_t *fns)
{
	if (t->ops && t->ops->unpin)
		t->ops->unpin(t, fns);
}

bool ckc_tier_pinned(const ckc_tier_t *t, uint64_t off, uint64_t n)
{
	return t->ops && t->ops->pinned && t->ops->pinned(t, off, n);
}

/* The real files: read and written by the engine's own functions
 * (tier_home.c), never as an arena. */
const ckc_tier_ops_t ckc_tier_home_ops = { 0 };
