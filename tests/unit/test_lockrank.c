/* Ranked locks: a child forked while another thread holds a registered lock
 * finds it free (the fork hooks take every lock in rank order, and make
 * them anew in the child); in a checking build (--enable-lock-check), a
 * lock taken out of rank order is reported with both names, and a file
 * system call under the engine lock too. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lockrank.h"
#include "log.h"

static ckc_mutex_t outer = CKC_MUTEX_INIT(FDTAB);
static ckc_mutex_t inner = CKC_MUTEX_INIT(STATE);
static ckc_rwlock_t rw = CKC_RWLOCK_INIT(CU_RANGES);

static atomic_int holding;

/* Holds the three locks for a while, as a thread in the middle of a call. */
static void *holder(void *arg)
{
	(void)arg;
	ckc_mutex_lock(&outer);
	ckc_mutex_lock(&inner);
	ckc_rw_rdlock(&rw);
	atomic_store(&holding, 1);
	struct timespec ts = { 0, 200 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	ckc_rw_unlock(&rw);
	ckc_mutex_unlock(&inner);
	ckc_mutex_unlock(&outer);
	return NULL;
}

/* In the child: every lock can be taken within a second. */
static int child_takes_all(void)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 1;
	if (pthread_mutex_timedlock(&outer.mu, &dl) || pthread_mutex_timedlock(&inner.mu, &dl) ||
	    pthread_rwlock_timedwrlock(&rw.rw, &dl))
		return 1;
	return 0;
}

Test(lockrank, fork_while_another_thread_holds_locks)
{
	ckc_locks_add(&outer);
	ckc_locks_add(&inner);
	ckc_locks_add_rw(&rw);
	cr_assert_eq(pthread_atfork(ckc_locks_prefork, ckc_locks_postfork_parent, ckc_locks_postfork_child),
		     0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, holder, NULL), 0);
	while (!atomic_load(&holding))
		sched_yield();
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child_takes_all());
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the child found a lock held (status %d)", st);
	pthread_join(t, NULL);
	/* the parent's locks are free again */
	cr_assert_eq(pthread_mutex_trylock(&outer.mu), 0);
	pthread_mutex_unlock(&outer.mu);
	cr_assert_eq(pthread_mutex_trylock(&inner.mu), 0);
	pthread_mutex_unlock(&inner.mu);
	ckc_locks_remove(&outer);
	ckc_locks_remove(&inner);
}

Test(lockrank, names)
{
	cr_assert_str_eq(ckc_rank_name(CKC_RANK_ENGINE), "engine");
	cr_assert_str_eq(ckc_rank_name(CKC_RANK_FD), "descriptor");
	for (int r = CKC_RANK_NONE; r < CKC_RANK_COUNT; r++)
		cr_assert_neq(strcmp(ckc_rank_name((ckc_rank_t)r), "?"), 0, "rank %d has no name", r);
}

#ifdef CKC_LOCK_CHECK

static char said[512];

static void sink(int level, const char *msg)
{
	(void)level;
	snprintf(said, sizeof(said), "%s", msg);
}

/* A violation aborts in the test builds: the message is checked in the
 * process that aborts, before it does (the sink writes it to stderr). */
static void loud_sink(int level, const char *msg)
{
	sink(level, msg);
	if (strstr(msg, "lock order:") && strstr(msg, "the engine lock is taken") &&
	    strstr(msg, "holds the private-folder record lock"))
		_exit(42);
}

Test(lockrank, out_of_order_is_reported, .exit_code = 42)
{
	ckc_log_sink = loud_sink;
	ckc_mutex_t engine = CKC_MUTEX_INIT(ENGINE);
	ckc_mutex_lock(&inner);
	ckc_mutex_lock(&engine); /* the engine lock comes before the record's */
	ckc_mutex_unlock(&engine);
	ckc_mutex_unlock(&inner);
}

static void io_sink(int level, const char *msg)
{
	sink(level, msg);
	if (strstr(msg, "lock order: fsync(2) is called while this thread holds the engine lock"))
		_exit(42);
}

Test(lockrank, io_under_the_engine_lock_is_reported, .exit_code = 42)
{
	ckc_log_sink = io_sink;
	ckc_mutex_t engine = CKC_MUTEX_INIT(ENGINE);
	ckc_mutex_lock(&engine);
	ckc_rank_io_check("fsync");
	ckc_mutex_unlock(&engine);
}

Test(lockrank, in_order_is_quiet)
{
	ckc_log_sink = sink;
	ckc_mutex_t engine = CKC_MUTEX_INIT(ENGINE);
	ckc_mutex_lock(&outer);
	ckc_mutex_lock(&engine);
	ckc_mutex_lock(&inner);
	cr_assert(ckc_rank_held(CKC_RANK_ENGINE));
	ckc_mutex_unlock(&inner);
	ckc_mutex_unlock(&engine);
	ckc_rank_io_check("fsync");
	ckc_mutex_unlock(&outer);
	cr_assert(!ckc_rank_held(CKC_RANK_ENGINE));
	cr_assert_str_eq(said, "", "said: %s", said);
}

#endif
