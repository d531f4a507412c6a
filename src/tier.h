/* The tiers' interface: what every tier implements, and the one way the
 * engine reaches a tier's own code. A tier is opened by its own function
 * (ckc_gpu_open, ckc_host_open, ckc_ssd_open), which sets its operations;
 * from then on the engine calls it through the functions below, whatever
 * its kind. An operation a tier lacks (NULL) is nothing to do, or, for a
 * copy, -ENOTSUP. */
#ifndef CKC_TIER_H
#define CKC_TIER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"

typedef struct ckc_tier ckc_tier_t;
typedef struct ckc_obj ckc_obj_t;

/* A tier's memory is registered for transfers with a device (pinned) in
 * pieces of this size, each a short call; a copy that stays within one
 * piece sees one registration. */
#define CKC_PIN_PIECE ((uint64_t)1 << 20)

/* How memory is registered for transfers with a device: the caller's
 * functions (the gpu tier's, which call CUDA), called piece by piece. The
 * tier that owns the memory decides what is registered and keeps count. */
typedef struct ckc_pin_fns {
	/* Around the registration of one tier's memory, when it is
	 * registered at all (a node-wide turn, say); either may be NULL. */
	void (*begin)(void);
	void (*end)(void);
	/* Registers [p, p+n): 0, or the caller's nonzero error. */
	int (*reg)(void *p, size_t n);
	/* Undoes one reg of the same piece. */
	void (*unreg)(void *p, size_t n);
} ckc_pin_fns_t;

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
	/* Whether host address p lies in the tier's memory (its arena offset
	 * in *off when off is not NULL). */
	bool (*holds)(const ckc_tier_t *t, const void *p, uint64_t *off);
	/* Registers the tier's memory with fns, once it can be (a memory
	 * populated whole: waits for that while *stop is false), and sets
	 * *done to the bytes registered from its start. 0, fns' error, or
	 * -ENOTSUP for memory that is not registered (a tier that grows with
	 * use). Lock not held. */
	int (*pin)(ckc_tier_t *t, const ckc_pin_fns_t *fns, const atomic_bool *stop, uint64_t *done);
	/* Undoes pin. */
	void (*unpin)(ckc_tier_t *t, const ckc_pin_fns_t *fns);
	/* Whether [off, off+n) of the arena is registered. */
	bool (*pinned)(const ckc_tier_t *t, uint64_t off, uint64_t n);
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
bool ckc_tier_holds(const ckc_tier_t *t, const void *p, uint64_t *off);
int ckc_tier_pin(ckc_tier_t *t, const ckc_pin_fns_t *fns, const atomic_bool *stop, uint64_t *done);
void ckc_tier_unpin(ckc_tier_t *t, const ckc_pin_fns_t *fns);
bool ckc_tier_pinned(const ckc_tier_t *t, uint64_t off, uint64_t n);

#endif
