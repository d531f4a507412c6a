/* The tiers' interface: what every tier implements, and the one way the
 * engine reaches a tier's own code. A tier is opened by its own function
 * (ckc_gpu_open, ckc_host_open, ckc_ssd_open), which sets its operations;
 * from then on the engine calls it through the functions below, whatever
 * its kind. An operation a tier lacks (NULL) is nothing to do, or, for a
 * copy, -ENOTSUP. */
#ifndef CKC_TIER_H
#define CKC_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "stats.h"

typedef struct ckc_tier ckc_tier_t;
typedef struct ckc_obj ckc_obj_t;

typedef struct ckc_tier_ops {
	/* Moves len bytes between a caller's buffer and arena offset aoff of
	 * the tier. 0 or -errno. */
	int (*put)(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len);
	int (*get)(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len);
	/* The arena offsets [*lo, *hi) where o may be placed; NULL: the
	 * whole arena. 0 or -ENOSPC. Lock held. */
	int (*span)(const ckc_tier_t *t, const ckc_obj_t *o, uint64_t *lo, uint64_t *hi);
	/* Stops the tier's own threads (lock not held: they take it). */
	void (*stop)(ckc_tier_t *t);
	/* At the engine's end, what must not outlive the process (the ssd
	 * tier's file name). Lock held. */
	void (*finish)(ckc_tier_t *t);
	/* Gives everything back (lock held; the threads stopped). */
	void (*teardown)(ckc_tier_t *t);
	/* Its own figures, beside the counters every tier has. Lock held. */
	void (*stats)(const ckc_tier_t *t, ckc_stats_t *s);
} ckc_tier_ops_t;

extern const ckc_tier_ops_t ckc_tier_gpu_ops, ckc_tier_host_ops, ckc_tier_ssd_ops, ckc_tier_home_ops;

int ckc_tier_put(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len);
int ckc_tier_get(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len);
/* Between two tiers' copies (device to device where both are the gpu
 * tier's; through a bounce buffer between two that are in no memory). */
int ckc_tier_copy(ckc_tier_t *from, uint64_t foff, ckc_tier_t *to, uint64_t toff, size_t len);
int ckc_tier_span(const ckc_tier_t *t, const ckc_obj_t *o, uint64_t *lo, uint64_t *hi);
void ckc_tier_stop(ckc_tier_t *t);
void ckc_tier_finish(ckc_tier_t *t);
void ckc_tier_close(ckc_tier_t *t);
void ckc_tier_stats(const ckc_tier_t *t, ckc_stats_t *s);

#endif
