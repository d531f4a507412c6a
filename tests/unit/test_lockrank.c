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

#include "io.h"
#include "lockrank.h"
#include "log.h"
#include "sigdefer.h"

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

static void need_sink(int level, const char *msg)
{
	sink(level, msg);
	if (strstr(msg, "lock rule: the prefetch thread is started without the engine lock"))
		_exit(42);
}

Test(lockrank, a_guarded_write_without_its_lock_is_reported, .exit_code = 42)
{
	ckc_log_sink = need_sink;
	ckc_rank_need(CKC_RANK_ENGINE, "the prefetch thread is started");
}

Test(lockrank, a_guarded_write_under_its_lock_is_quiet)
{
	ckc_log_sink = sink;
	ckc_mutex_t engine = CKC_MUTEX_INIT(ENGINE);
	ckc_mutex_lock(&engine);
	ckc_rank_need(CKC_RANK_ENGINE, "the prefetch thread is started");
	ckc_mutex_unlock(&engine);
	cr_assert_str_eq(said, "", "said: %s", said);
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

/* ---- the program's signal handlers behind the library's (sigdefer.h) ---- */

static int sd_real(int sig, const struct sigaction *act, struct sigaction *old)
{
	return sigaction(sig, act, old);
}

static volatile sig_atomic_t sd_runs, sd_value, sd_locks_seen, sd_blocked_seen;

static void sd_info_handler(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	sd_runs++;
	sd_value = si ? si->si_value.sival_int : -1;
	sd_locks_seen = (sig_atomic_t)ckc_tl_locks;
	sigset_t now;
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	sd_blocked_seen = sigismember(&now, sig) == 1 && sigismember(&now, SIGUSR2) == 1;
}

static void sd_plain_handler(int sig)
{
	(void)sig;
	sd_runs++;
}

static void sd_reset(int sig)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	ckc_sig_action(sig, &dfl, NULL, false, sd_real);
	sd_runs = 0;
	sd_value = 0;
}

/* sd_plain_handler for sig, through the library, its count at 0. */
static void sd_install_plain(int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sd_plain_handler;
	sigemptyset(&sa.sa_mask);
	sd_runs = 0;
	cr_assert_eq(ckc_sig_action(sig, &sa, NULL, false, sd_real), 0);
}

Test(sigdefer, a_handler_waits_for_the_last_lock)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sd_info_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR2);
	sd_runs = 0;
	cr_assert_eq(ckc_sig_action(SIGUSR1, &sa, NULL, false, sd_real), 0);
	/* the program sees its own handler, with its flags and mask */
	cr_assert_eq(ckc_sig_action(SIGUSR1, NULL, &old, false, sd_real), 0);
	cr_assert_eq((void *)old.sa_sigaction, (void *)sd_info_handler);
	cr_assert(old.sa_flags & SA_SIGINFO);
	cr_assert_eq(sigismember(&old.sa_mask, SIGUSR2), 1);
	/* not inside the library: at once */
	union sigval v = { .sival_int = 41 };
	cr_assert_eq(sigqueue(getpid(), SIGUSR1, v), 0);
	cr_assert_eq(sd_runs, 1);
	cr_assert_eq(sd_value, 41);
	/* holding two locks: after the last is let go, with its value, its
	 * mask, and no lock held */
	ckc_mutex_lock(&outer);
	ckc_mutex_lock(&inner);
	v.sival_int = 42;
	cr_assert_eq(sigqueue(getpid(), SIGUSR1, v), 0);
	cr_assert_eq(sd_runs, 1, "the handler ran while the thread held the library's locks");
	ckc_mutex_unlock(&inner);
	cr_assert_eq(sd_runs, 1, "the handler ran while the thread held a lock");
	ckc_mutex_unlock(&outer);
	cr_assert_eq(sd_runs, 2, "the deferred handler never ran");
	cr_assert_eq(sd_value, 42);
	cr_assert_eq(sd_locks_seen, 0);
	cr_assert(sd_blocked_seen, "the handler's mask was not applied");
	/* inside an engine call (no lock): the same */
	ckc_io_guard++;
	cr_assert_eq(sigqueue(getpid(), SIGUSR1, v), 0);
	cr_assert_eq(sd_runs, 2);
	ckc_io_guard--;
	ckc_rw_rdlock(&rw);
	ckc_rw_unlock(&rw); /* (leaving: the next unlock runs it) */
	cr_assert_eq(sd_runs, 3);
	sd_reset(SIGUSR1);
}

Test(sigdefer, a_signal_that_comes_twice_while_deferred_runs_once)
{
	sd_install_plain(SIGUSR1);
	ckc_mutex_lock(&outer);
	raise(SIGUSR1);
	raise(SIGUSR1);
	cr_assert_eq(sd_runs, 0);
	ckc_mutex_unlock(&outer);
	cr_assert_eq(sd_runs, 1);
	sd_reset(SIGUSR1);
}

static volatile sig_atomic_t rt_vals[4], rt_n;

static void sd_rt_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (rt_n < 4)
		rt_vals[rt_n] = si->si_value.sival_int;
	rt_n++;
}

Test(sigdefer, real_time_signals_deferred_are_queued_in_order)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sd_rt_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	rt_n = 0;
	cr_assert_eq(ckc_sig_action(SIGRTMIN, &sa, NULL, false, sd_real), 0);
	ckc_mutex_lock(&outer);
	for (int i = 0; i < 3; i++) {
		union sigval v = { .sival_int = 100 + i };
		cr_assert_eq(sigqueue(getpid(), SIGRTMIN, v), 0);
	}
	cr_assert_eq(rt_n, 0);
	ckc_mutex_unlock(&outer);
	cr_assert_eq(rt_n, 3, "%d of 3 queued signals ran", (int)rt_n);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rt_vals[i], 100 + i);
	sd_reset(SIGRTMIN);
}

static int sd_real_fails(int sig, const struct sigaction *act, struct sigaction *old)
{
	(void)sig;
	(void)act;
	(void)old;
	errno = EINVAL;
	return -1;
}

Test(sigdefer, a_sigaction_that_fails_leaves_the_handler_as_it_was)
{
	sd_install_plain(SIGUSR1);
	struct sigaction sa, got;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sd_info_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	errno = 0;
	cr_assert_eq(ckc_sig_action(SIGUSR1, &sa, NULL, false, sd_real_fails), -1);
	cr_assert_eq(errno, EINVAL);
	/* the program still has its earlier handler, which still runs */
	cr_assert_eq(ckc_sig_action(SIGUSR1, NULL, &got, false, sd_real), 0);
	cr_assert_eq(got.sa_handler, sd_plain_handler);
	raise(SIGUSR1);
	cr_assert_eq(sd_runs, 1);
	/* signals that cannot be caught fail as the kernel says */
	errno = 0;
	cr_assert_eq(ckc_sig_action(SIGKILL, &sa, NULL, false, sd_real), -1);
	cr_assert_eq(errno, EINVAL);
	sd_reset(SIGUSR1);
}

Test(sigdefer, default_ignored_and_synchronous_signals_are_as_given)
{
	struct sigaction sa, got;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(ckc_sig_action(SIGUSR2, &sa, NULL, false, sd_real), 0);
	cr_assert_eq(sigaction(SIGUSR2, NULL, &got), 0);
	cr_assert_eq(got.sa_handler, SIG_IGN);
	/* a synchronous signal's handler is installed as it is */
	cr_assert_not(ckc_sig_deferrable(SIGSEGV));
	cr_assert_not(ckc_sig_deferrable(SIGBUS));
	cr_assert_not(ckc_sig_deferrable(SIGABRT));
	cr_assert(ckc_sig_deferrable(SIGTERM));
	cr_assert(ckc_sig_deferrable(SIGRTMIN + 1));
	sa.sa_handler = sd_plain_handler;
	cr_assert_eq(ckc_sig_action(SIGFPE, &sa, NULL, false, sd_real), 0);
	cr_assert_eq(sigaction(SIGFPE, NULL, &got), 0);
	cr_assert_eq(got.sa_handler, sd_plain_handler);
	/* a handler installed then set back: the kernel's default, and the
	 * program is told its handler was there */
	cr_assert_eq(ckc_sig_action(SIGUSR2, &sa, NULL, false, sd_real), 0);
	cr_assert_eq(sigaction(SIGUSR2, NULL, &got), 0);
	cr_assert_neq(got.sa_handler, sd_plain_handler, "the library's handler is not in front");
	memset(&got, 0, sizeof(got));
	sa.sa_handler = SIG_DFL;
	cr_assert_eq(ckc_sig_action(SIGUSR2, &sa, &got, false, sd_real), 0);
	cr_assert_eq(got.sa_handler, sd_plain_handler);
	cr_assert_eq(sigaction(SIGUSR2, NULL, &got), 0);
	cr_assert_eq(got.sa_handler, SIG_DFL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGFPE, &sa, NULL);
}

Test(sigdefer, a_forked_child_does_not_run_the_parents_deferred_handler)
{
	sd_install_plain(SIGUSR1);
	ckc_locks_prefork();
	raise(SIGUSR1); /* comes while the fork holds every lock */
	cr_assert_eq(sd_runs, 0);
	pid_t c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		ckc_locks_postfork_child();
		_exit(sd_runs == 0 && ckc_tl_locks == 0 && ckc_tl_sigdefer == 0 ? 0 : 1);
	}
	ckc_locks_postfork_parent();
	cr_assert_eq(sd_runs, 1, "the parent's handler did not run after the fork");
	int st;
	cr_assert_eq(waitpid(c, &st, 0), c);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child ran the parent's handler or kept its locks");
	sd_reset(SIGUSR1);
}
