/* The ranked locks' names, the order check of the checking build
 * (--enable-lock-check), and the registry the fork hooks take every lock
 * from. The ranks themselves are in lockrank.h. */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lockrank.h"
#include "log.h"
#include "sigdefer.h"

__thread unsigned ckc_tl_locks __attribute__((tls_model("initial-exec")));
__thread volatile uint64_t ckc_tl_sigdefer __attribute__((tls_model("initial-exec")));
__thread unsigned ckc_tl_alloc __attribute__((tls_model("initial-exec")));

/* (an array of names, not of pointers: pointers are relocated by the
 * loader at every start, on pages it copies for each process) */
static const char rank_name[CKC_RANK_COUNT][24] = {
	[CKC_RANK_NONE] = "none",
	[CKC_RANK_STDIO] = "stdio stream list",
	[CKC_RANK_ALIAS] = "checkpoint spellings",
	[CKC_RANK_FD] = "descriptor",
	[CKC_RANK_FDTAB] = "descriptor table",
	[CKC_RANK_LOCKDIR] = "file-lock folder",
	[CKC_RANK_ENG_LIFE] = "engine life",
	[CKC_RANK_GPU_LIFE] = "gpu tier life",
	[CKC_RANK_OWED] = "owed-range table",
	[CKC_RANK_OWED_FILL] = "owed-range fills",
	[CKC_RANK_HUGEPIN] = "huge-page pin list",
	[CKC_RANK_HINTS] = "hint file",
	[CKC_RANK_CU_EVENTS] = "cuda event spares",
	[CKC_RANK_ENGINE] = "engine",
	[CKC_RANK_HOST_GROW] = "host tier growth",
	[CKC_RANK_STATE] = "private-folder record",
	[CKC_RANK_DIRTIMES] = "folder times",
	[CKC_RANK_LANES] = "copy lanes",
	[CKC_RANK_KTOUCH] = "kernel touch queue",
	[CKC_RANK_TRACE] = "trace buffer",
	[CKC_RANK_INPLACE] = "writers in place",
	[CKC_RANK_LEND] = "peer lending",
	[CKC_RANK_CU_RANGES] = "cuda memory map",
	[CKC_RANK_FD_OPEN] = "own file opening",
	[CKC_RANK_SEGV] = "segv handler",
};

const char *ckc_rank_name(ckc_rank_t r)
{
	return (unsigned)r < CKC_RANK_COUNT && rank_name[r][0] ? rank_name[r] : "?";
}

#ifdef CKC_LOCK_CHECK

#define TLS_IE __attribute__((tls_model("initial-exec")))

/* The locks this thread holds, counted by rank (a lock taken in a signal
 * handler counts too: the handler's thread holds it). */
static __thread TLS_IE unsigned char held[CKC_RANK_COUNT];

/* A violation: said through the log; aborts where the build or
 * CKPTCACHE_STRICT=1 asks for it. */
static void rank_stop(void)
{
#ifdef CKC_LOCK_CHECK_ABORT
	abort();
#else
	const char *s = getenv("CKPTCACHE_STRICT");
	if (s && strcmp(s, "1") == 0)
		abort();
#endif
}

static void rank_violation(const char *what, const char *held_name)
{
	ckc_error("lock order: %s while this thread holds the %s lock "
		  "(the order is in src/lockrank.h)", what, held_name);
	rank_stop();
}

/* The highest rank this thread holds, or CKC_RANK_NONE. */
static ckc_rank_t rank_top(void)
{
	for (int r = CKC_RANK_COUNT - 1; r > CKC_RANK_NONE; r--)
		if (held[r])
			return (ckc_rank_t)r;
	return CKC_RANK_NONE;
}

void ckc_rank_take(ckc_rank_t r)
{
	ckc_rank_t top = rank_top();
	if (top >= r) {
		char what[96];
		snprintf(what, sizeof(what), "the %s lock is taken", ckc_rank_name(r));
		rank_violation(what, ckc_rank_name(top));
	}
	held[r]++;
}

void ckc_rank_drop(ckc_rank_t r)
{
	if (held[r])
		held[r]--;
}

bool ckc_rank_held(ckc_rank_t r)
{
	return held[r] != 0;
}

void ckc_rank_need(ckc_rank_t r, const char *what)
{
	if (held[r])
		return;
	ckc_error("lock rule: %s without the %s lock, which guards it", what, ckc_rank_name(r));
	rank_stop();
}

void ckc_rank_io_check(const char *what)
{
	ckc_rank_t r = held[CKC_RANK_ENGINE] ? CKC_RANK_ENGINE : held[CKC_RANK_OWED] ? CKC_RANK_OWED : CKC_RANK_NONE;
	if (r == CKC_RANK_NONE)
		return;
	char msg[96];
	snprintf(msg, sizeof(msg), "%s(2) is called", what);
	rank_violation(msg, ckc_rank_name(r));
}

#endif

/* ---- fork ---------------------------------------------------------------- */

/* The registered locks: the address, with its low bit set for a
 * read-write lock; 0 is a free slot. */
CKC_HOT_DATA static _Atomic uintptr_t reg[CKC_LOCKS_MAX];
/* The locks the last prefork took, in the order it took them. */
static uintptr_t taken[CKC_LOCKS_MAX];
static int ntaken;
/* Serialises two threads that fork at once: the first one's list of taken
 * locks is the parent's until its parent hook ran. Outside the ranks: it
 * is taken first, by the forking thread, which holds no other. */
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;

static void locks_add(uintptr_t v)
{
	for (int i = 0; i < CKC_LOCKS_MAX; i++) {
		uintptr_t free_slot = 0;
		if (atomic_compare_exchange_strong(&reg[i], &free_slot, v))
			return;
	}
	ckc_warn("more than %d locks to take at fork: one is left out", CKC_LOCKS_MAX);
}

CKC_START_PATH void ckc_locks_add(ckc_mutex_t *m)
{
	locks_add((uintptr_t)m);
}

CKC_START_PATH void ckc_locks_add_rw(ckc_rwlock_t *l)
{
	locks_add((uintptr_t)l | 1);
}

void ckc_locks_remove(ckc_mutex_t *m)
{
	for (int i = 0; i < CKC_LOCKS_MAX; i++) {
		uintptr_t v = (uintptr_t)m;
		if (atomic_compare_exchange_strong(&reg[i], &v, 0))
			return;
	}
}

static ckc_rank_t ent_rank(uintptr_t v)
{
	return v & 1 ? ((ckc_rwlock_t *)(v & ~(uintptr_t)1))->rank : ((ckc_mutex_t *)v)->rank;
}

static __thread int cancel_was;

CKC_START_PATH void ckc_cancel_hold(void)
{
	(void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_was);
}

CKC_START_PATH void ckc_cancel_release(void)
{
	(void)pthread_setcancelstate(cancel_was, NULL);
}

/* This thread's count of locks before the fork took them. */
static unsigned locks_before_fork;

void ckc_locks_prefork(void)
{
	locks_before_fork = ckc_tl_locks;
	ckc_locks_in();
	pthread_mutex_lock(&fork_mu);
	ntaken = 0;
	for (int r = CKC_RANK_NONE + 1; r < CKC_RANK_COUNT; r++)
		for (int i = 0; i < CKC_LOCKS_MAX; i++) {
			uintptr_t v = atomic_load(&reg[i]);
			if (v && ent_rank(v) == (ckc_rank_t)r)
				taken[ntaken++] = v;
		}
	for (int i = 0; i < ntaken; i++) {
		uintptr_t v = taken[i];
		if (v & 1)
			ckc_rw_wrlock((ckc_rwlock_t *)(v & ~(uintptr_t)1));
		else
			ckc_mutex_lock((ckc_mutex_t *)v);
	}
}

void ckc_locks_postfork_parent(void)
{
	for (int i = ntaken - 1; i >= 0; i--) {
		uintptr_t v = taken[i];
		if (v & 1)
			ckc_rw_unlock((ckc_rwlock_t *)(v & ~(uintptr_t)1));
		else
			ckc_mutex_unlock((ckc_mutex_t *)v);
	}
	pthread_mutex_unlock(&fork_mu);
	ckc_locks_out();
}

/* The child has one thread, the one that forked: the locks it holds are
 * made anew, so that no lock of a thread that is gone stays held. */
void ckc_locks_postfork_child(void)
{
	for (int i = ntaken - 1; i >= 0; i--) {
		uintptr_t v = taken[i];
		if (v & 1) {
			ckc_rwlock_t *l = (ckc_rwlock_t *)(v & ~(uintptr_t)1);
			pthread_rwlock_init(&l->rw, NULL);
			ckc_rank_drop(l->rank);
		} else {
			ckc_mutex_t *m = (ckc_mutex_t *)v;
			pthread_mutex_init(&m->mu, NULL);
			ckc_rank_drop(m->rank);
		}
	}
	pthread_mutex_init(&fork_mu, NULL);
	/* the locks it held (each counted) and the fork's own are made anew;
	 * what the parent's thread deferred meanwhile is the parent's */
	ckc_tl_locks = locks_before_fork;
	if (ckc_tl_locks == 0 && ckc_io_guard == 0)
		ckc_cancel_release();
	ckc_sig_atfork_child();
}
