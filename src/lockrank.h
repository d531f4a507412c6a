/* Named, ranked locks: every mutex and read-write lock of the library has a
 * rank, and the ranks below are the one place that writes the order they are
 * taken in. The fork hooks take every registered lock in that order.
 *
 * A thread may take a lock only while every lock it holds has a lower rank.
 * In a build configured with --enable-lock-check (CKC_LOCK_CHECK in
 * config.h) every lock taken checks that rule before it blocks: a lock taken
 * out of order is reported through the log with both names, and aborts
 * when CKPTCACHE_STRICT=1 or in a build configured with
 * --enable-lock-check=abort. With --enable-lock-check=io, the engine's file
 * system calls (src/sys.h) report themselves when they run under the engine
 * lock or the owed-range table's (ckc_rank_io_check): none does (work an
 * object leaves under the engine lock is done after it, eng_unlock; a fill
 * of owed pages lets the table go, intercept/owed.c). Waits on the engine's
 * conditions name their predicate (eng_cond_t, src/engine_types.h).
 * --enable-lock-check=all does both, and the
 * sanitizer builds of scripts/build, which run the tests, use it. In the
 * release build a lock is a plain pthread call: the rank is a field that
 * only the fork hooks read. */
#ifndef CKC_LOCKRANK_H
#define CKC_LOCKRANK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* The ranks, outermost (taken first) to innermost, each with the reason its
 * lock sits where it does. */
typedef enum ckc_rank {
	CKC_RANK_NONE = 0,
	/* The list of tagged stdio streams: taken alone, by fopen, fclose and
	 * fileno, around the list only. */
	CKC_RANK_STDIO,
	/* The other spellings of checkpoints written through a folder's
	 * symbolic link: taken alone, around the list only. */
	CKC_RANK_ALIAS,
	/* A tagged descriptor's offset and switch: held across the whole
	 * engine call of a read or write that uses the offset, so it comes
	 * before everything the engine takes. */
	CKC_RANK_FD,
	/* The descriptor table: taken by a descriptor's switch to its real
	 * file (the descriptor held) around the dup of its numbers. */
	CKC_RANK_FDTAB,
	/* The folder of the file-lock files: made once, by a lock call on a
	 * descriptor (the descriptor held). */
	CKC_RANK_LOCKDIR,
	/* Start and stop of the engine: they take the engine lock inside. */
	CKC_RANK_ENG_LIFE,
	/* The gpu tier's set-up and tear-down: they take the engine lock
	 * inside, and are serialised with each other only. */
	CKC_RANK_GPU_LIFE,
	/* The table of host ranges owed by device captures: held around the
	 * table and the protection of its pages; a fill lets it go (a claim,
	 * intercept/owed.c) except where it cannot, and reads the cache (the
	 * engine lock) either way. */
	CKC_RANK_OWED,
	/* The owed-range fills under way without the table lock: each holds
	 * it for reading (the table lock let go, the engine lock taken
	 * inside); fork takes it for writing, after the table, so that a
	 * child never finds a fill half done. */
	CKC_RANK_OWED_FILL,
	/* The program's huge-page pinned allocations: a list, taken around
	 * the list only. */
	CKC_RANK_HUGEPIN,
	/* The hint file's reader: held while the file is read (the engine
	 * lock is not), taking the engine lock for each line's push onto the
	 * restore queue. */
	CKC_RANK_HINTS,
	/* The engine's metadata: objects, the tiers' arenas, the queues, the
	 * statistics. Never held during bulk I/O or a file system call. */
	CKC_RANK_ENGINE,
	/* The host tier's populating thread's wake-ups: signalled with the
	 * engine lock held. */
	CKC_RANK_HOST_GROW,
	/* The record of this process's temporary files: written when the
	 * engine makes one (the engine lock held). */
	CKC_RANK_STATE,
	/* The folders whose times the program set (tier_home.c): taken
	 * around a copy of an entry, and around the fstat and futimens of a
	 * folder's descriptor that put its time back. */
	CKC_RANK_DIRTIMES,
	/* The copy lanes' hand-off: taken around a post and its end only. */
	CKC_RANK_LANES,
	/* The kernel touch's queue (ktouch.h): taken around a note and the
	 * thread's turn only. */
	CKC_RANK_KTOUCH,
	/* The trace's buffer (trace.h): a line appended (the engine lock
	 * held), the writer's take of the buffer. */
	CKC_RANK_TRACE,
	/* The node registry's table of writers in place (its first
	 * allocation): nothing is taken inside. */
	CKC_RANK_INPLACE,
	/* Lending between the ranks of a node: the borrowing round's
	 * hand-off and the counts, read for the statistics (the engine lock
	 * held). Its thread takes nothing else while holding it. */
	CKC_RANK_LEND,
	/* The program's device and pinned memory by address: looked up by the
	 * engine's capture decisions (the engine lock held). */
	CKC_RANK_CU_RANGES,
	/* The spare CUDA events and each device's last deferred capture:
	 * lists, taken around the lists only, also by captures the engine
	 * makes (the engine lock held). */
	CKC_RANK_CU_EVENTS,
	/* The library's opening of a file of its own (readable, or a socket)
	 * and its move above the program's numbers: held for reading around
	 * those calls only, taking nothing inside; fork takes it for writing,
	 * last, so that a child never has such a file at a number the program
	 * closed (where it would read or write the cache's file). */
	CKC_RANK_FD_OPEN,
	/* The program's own SIGSEGV handler: read by the library's handler,
	 * which may run on a thread that holds any other lock. */
	CKC_RANK_SEGV,
	CKC_RANK_COUNT
} ckc_rank_t;

typedef struct ckc_mutex {
	pthread_mutex_t mu;
	ckc_rank_t rank;
} ckc_mutex_t;

typedef struct ckc_rwlock {
	pthread_rwlock_t rw;
	ckc_rank_t rank;
} ckc_rwlock_t;

#define CKC_MUTEX_INIT(r) { PTHREAD_MUTEX_INITIALIZER, CKC_RANK_##r }
#define CKC_RWLOCK_INIT(r) { PTHREAD_RWLOCK_INITIALIZER, CKC_RANK_##r }

/* The printable name of rank r. */
const char *ckc_rank_name(ckc_rank_t r);

#ifdef CKC_LOCK_CHECK
/* Checks that this thread holds no lock of rank r or above (a violation is
 * reported, see above) and records r as held. */
void ckc_rank_take(ckc_rank_t r);
/* Records that this thread let go of one lock of rank r. */
void ckc_rank_drop(ckc_rank_t r);
/* Whether this thread holds a lock of rank r. */
bool ckc_rank_held(ckc_rank_t r);
/* Reports what (a write of a field the lock of rank r guards) where this
 * thread does not hold that lock; reported and stopped as an order
 * violation is. */
void ckc_rank_need(ckc_rank_t r, const char *what);
/* Reports a file system call (what) made under the engine lock or the
 * owed-range table's. */
void ckc_rank_io_check(const char *what);
#else
static inline void ckc_rank_take(ckc_rank_t r)
{
	(void)r;
}
static inline void ckc_rank_drop(ckc_rank_t r)
{
	(void)r;
}
static inline bool ckc_rank_held(ckc_rank_t r)
{
	(void)r;
	return false;
}
static inline void ckc_rank_need(ckc_rank_t r, const char *what)
{
	(void)r;
	(void)what;
}
static inline void ckc_rank_io_check(const char *what)
{
	(void)what;
}
#endif

/* The library's locks this thread holds (or waits for), and the signals
 * whose handlers it deferred meanwhile (src/sigdefer.h): a handler that
 * interrupts a thread inside the library (holding a lock, or inside an
 * engine call: ckc_io_guard, src/io.h) runs as the thread leaves it.
 * Initial-exec: a handler reads them. */
extern __thread unsigned ckc_tl_locks __attribute__((tls_model("initial-exec")));
extern __thread volatile uint64_t ckc_tl_sigdefer __attribute__((tls_model("initial-exec")));
extern __thread int ckc_io_guard __attribute__((tls_model("initial-exec")));
/* Calls of the allocator under way in this thread, counted once the
 * program has a handler behind the library's (intercept/memhooks.c): a
 * handler's call into the library allocates, and the thread it interrupts
 * may hold the allocator's lock, so it runs as that call returns. */
extern __thread unsigned ckc_tl_alloc __attribute__((tls_model("initial-exec")));
void ckc_sig_run_deferred(void);

/* The thread's cancellation (pthread_cancel) is held off while it is
 * inside the library: cancelled at one of the calls the library makes, it
 * would leave a lock held, or an object half handed over, for the other
 * threads to wait on for ever. A cancellation asked meanwhile acts at the
 * program's next cancellation point. */
void ckc_cancel_hold(void);
void ckc_cancel_release(void);

/* Whether this thread runs the program's own code: no lock of the
 * library held, no engine call, no call of the allocator counted. */
static inline bool ckc_tl_outside(void)
{
	return ckc_tl_locks == 0 && ckc_io_guard == 0 && ckc_tl_alloc == 0;
}

/* The thread's last step out of the library (no lock held, no engine
 * call): its cancellation back as it was, the handlers deferred meanwhile
 * run. */
static inline void ckc_library_left(void)
{
	ckc_cancel_release();
	if (__builtin_expect(ckc_tl_sigdefer != 0, 0) && ckc_tl_alloc == 0)
		ckc_sig_run_deferred();
}

static inline void ckc_locks_in(void)
{
	if (ckc_tl_locks++ == 0 && ckc_io_guard == 0)
		ckc_cancel_hold();
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void ckc_locks_out(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	if (--ckc_tl_locks == 0 && ckc_io_guard == 0)
		ckc_library_left();
}

static inline void ckc_mutex_init(ckc_mutex_t *m, ckc_rank_t r)
{
	pthread_mutex_init(&m->mu, NULL);
	m->rank = r;
}

static inline void ckc_mutex_destroy(ckc_mutex_t *m)
{
	pthread_mutex_destroy(&m->mu);
}

static inline void ckc_mutex_lock(ckc_mutex_t *m)
{
	ckc_locks_in();
	ckc_rank_take(m->rank);
	pthread_mutex_lock(&m->mu);
}

static inline void ckc_mutex_unlock(ckc_mutex_t *m)
{
	pthread_mutex_unlock(&m->mu);
	ckc_rank_drop(m->rank);
	ckc_locks_out();
}

/* A lock held around a few loads and stores only: no cancellation point
 * and no other lock inside, so the thread's cancellation is left as it is
 * (two calls to the C library saved on each tagged read and write); the
 * program's signal handlers still wait until it is let go. */
static inline void ckc_mutex_lock_brief(ckc_mutex_t *m)
{
	ckc_tl_locks++;
	atomic_signal_fence(memory_order_seq_cst);
	ckc_rank_take(m->rank);
	pthread_mutex_lock(&m->mu);
}

static inline void ckc_mutex_unlock_brief(ckc_mutex_t *m)
{
	pthread_mutex_unlock(&m->mu);
	ckc_rank_drop(m->rank);
	atomic_signal_fence(memory_order_seq_cst);
	if (--ckc_tl_locks == 0 && ckc_io_guard == 0 && __builtin_expect(ckc_tl_sigdefer != 0, 0) &&
	    ckc_tl_alloc == 0)
		ckc_sig_run_deferred();
}

/* The waits keep the rank recorded: the thread takes nothing while it
 * waits, and holds the lock again when they return. */
static inline int ckc_cond_wait(pthread_cond_t *cv, ckc_mutex_t *m)
{
	return pthread_cond_wait(cv, &m->mu);
}

static inline int ckc_cond_timedwait(pthread_cond_t *cv, ckc_mutex_t *m, const struct timespec *ts)
{
	return pthread_cond_timedwait(cv, &m->mu, ts);
}

static inline void ckc_rw_rdlock(ckc_rwlock_t *l)
{
	ckc_locks_in();
	ckc_rank_take(l->rank);
	pthread_rwlock_rdlock(&l->rw);
}

static inline void ckc_rw_wrlock(ckc_rwlock_t *l)
{
	ckc_locks_in();
	ckc_rank_take(l->rank);
	pthread_rwlock_wrlock(&l->rw);
}

static inline void ckc_rw_unlock(ckc_rwlock_t *l)
{
	pthread_rwlock_unlock(&l->rw);
	ckc_rank_drop(l->rank);
	ckc_locks_out();
}

/* ---- fork -------------------------------------------------------------- */

/* Registers a lock with the fork hooks (at most CKC_LOCKS_MAX); a lock that
 * is destroyed is unregistered first. Per-descriptor locks are not
 * registered (see intercept/fdtab.c). */
#define CKC_LOCKS_MAX 32
void ckc_locks_add(ckc_mutex_t *m);
void ckc_locks_add_rw(ckc_rwlock_t *l);
void ckc_locks_remove(ckc_mutex_t *m);

/* Registers a lock of static storage before main runs. */
#define CKC_LOCKS_AT_START(id, addfn, lock)                                        \
	__attribute__((constructor)) static void ckc_locks_start_##id(void) \
	{                                                                      \
		addfn(lock);                                                   \
	}

/* Before fork: takes every registered lock in rank order. After it: the
 * parent lets them go; the child, whose other threads are gone, makes them
 * anew (unlocked). */
void ckc_locks_prefork(void);
void ckc_locks_postfork_parent(void);
void ckc_locks_postfork_child(void);

#endif
