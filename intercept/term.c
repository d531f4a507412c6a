/* The program's end by a signal: SIGTERM (what a batch system sends before
 * SIGKILL), SIGINT, SIGABRT and every other signal whose default ends the
 * program and that comes from outside it or from its own calls (a hang-up,
 * a quit, SIGUSR1 as a time limit's warning, an alarm, a broken pipe, a CPU
 * or file size limit), where the program left them at their default; and
 * the faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL) of the program's own code, so
 * that a crash keeps the checkpoints it closed before. A fault inside the
 * library (a thread in a wrapper or one of the library's threads) ends the
 * process at once, as without a handler: the library may be what broke.
 * A thread of the library drains the cache (ckc_finish) within
 * CKPTCACHE_TERM_WAIT seconds while the handler waits for it; then the
 * signal takes its default course. A handler never does the work itself:
 * the thread it interrupted may hold any lock. */
#include "config.h"

#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "intercept.h"
#include "log.h"
#include "sigdefer.h"
#include "thread.h"

static const int term_sigs[] = { SIGTERM, SIGINT,  SIGABRT,   SIGHUP,  SIGQUIT, SIGUSR1,
				 SIGUSR2, SIGPIPE, SIGALRM,   SIGXCPU, SIGXFSZ, SIGVTALRM,
				 SIGPROF, SIGSEGV, SIGBUS,    SIGFPE,  SIGILL };
#define TERM_NSIGS (int)(sizeof(term_sigs) / sizeof(term_sigs[0]))

static sem_t term_sem;
static atomic_int term_sig;      /* the first signal caught, 0 before; TERM_EXIT */
/* _exit called in a signal handler (ckc_term_exit_drain) */
#define TERM_EXIT (-1)
static atomic_bool term_done;    /* the drain ended (or gave up) */
static pid_t term_pid;           /* the process the thread runs in */
static uint64_t term_wait_ns;

static uint64_t term_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Set while the library itself sets a disposition: a default it sets back
 * (for the signal to end the process) is not the program's. */
static __thread bool term_setting;

/* Installs the library's handler: in front of the program's (the faults'
 * handler of device capture stays in front, as it does of the program's),
 * and never deferred (src/sigdefer.h) behind the library's own. */
static void term_sigaction(int sig, const struct sigaction *sa)
{
	term_setting = true;
	if (ckc_sig_deferrable(sig))
		ckc_real_sigaction(sig, sa, NULL);
	else
		sigaction(sig, sa, NULL);
	term_setting = false;
}

/* Back to the default disposition: the next delivery ends the process. */
static void term_default(int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	term_sigaction(sig, &sa);
}

/* Waits for the drain of term_main, a little longer than its own bound, so
 * that it can say what it could not do; whether it ended. */
static bool term_wait_done(void)
{
	uint64_t until = term_now() + term_wait_ns + 200000000ull;
	while (!atomic_load(&term_done) && term_now() < until) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	return atomic_load(&term_done);
}

static void term_handler(int sig, siginfo_t *si, void *uc)
{
	/* a copy of the library's from or to a buffer the program cannot
	 * use: EFAULT for the program's call */
	ckc_copy_fault(sig, si, uc);
	int saved = errno;
	bool here = getpid() == term_pid; /* not a forked child */
	/* raised by the kernel for the instruction this thread ran (not sent
	 * by kill): it faults again when the handler returns */
	bool fault = (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL) && si &&
		     si->si_code > 0;

	if (fault && (!here || ckc_io_guard)) {
		/* inside the library, or a child's: no drain; the instruction
		 * faults again with the default disposition */
		term_default(sig);
		errno = saved;
		return;
	}
	if (here && atomic_exchange(&term_sig, sig) == 0)
		sem_post(&term_sem);
	/* a thread inside the library may hold what the drain needs: it goes
	 * on, and the library's thread ends the process after the drain */
	if (here && ckc_io_guard) {
		errno = saved;
		return;
	}
	if (here)
		(void)term_wait_done();
	term_default(sig);
	if (!fault)
		raise(sig); /* blocked in this handler: delivered as it returns */
	errno = saved;
}

static void *term_main(void *arg)
{
	(void)arg;
	ckc_io_guard = 1; /* never re-enter the wrappers */
	while (sem_wait(&term_sem) != 0)
		;
	int sig = atomic_load(&term_sig);
	/* the signal may have interrupted the program in malloc: the drain
	 * gives nothing back to it (the process ends after it) */
	ckc_mem_leak_frees();
	char what[64];
	if (sig == TERM_EXIT)
		snprintf(what, sizeof(what), "_exit in a signal handler");
	else
		snprintf(what, sizeof(what), "signal %d (%s)", sig, strsignal(sig));
	ckc_info("%s: writing what the cache holds to the real paths (at most %.1f s)", what,
		 (double)term_wait_ns / 1e9);
	if (ckc_finish(ckc_now_ns() + term_wait_ns) != 0)
		ckc_error("%s: the cache could not write everything to the real paths in %.1f s "
			  "(CKPTCACHE_TERM_WAIT); the program ends now", what, (double)term_wait_ns / 1e9);
	atomic_store(&term_done, true);
	if (sig == TERM_EXIT)
		return NULL; /* the handler's _exit ends it */
	/* for a handler that could not wait: the signal's own end */
	term_default(sig);
	kill(getpid(), sig);
	return NULL;
}

CKC_START_PATH bool ckc_term_handler_is(const struct sigaction *sa)
{
	return sa && (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == term_handler;
}

/* The thread that ends the program's run by a signal is running. */
static atomic_bool term_running;

bool ckc_term_exit_drain(void)
{
	if (!atomic_load(&term_running) || getpid() != term_pid)
		return false;
	int none = 0;
	/* (a signal's drain under way already: the same wait) */
	if (atomic_compare_exchange_strong(&term_sig, &none, TERM_EXIT))
		sem_post(&term_sem);
	if (!term_wait_done()) {
		static const char msg[] = "ckptcache: error: _exit in a signal handler: the cache's "
					  "checkpoints could not all be written to their real paths in time "
					  "(the thread the handler interrupted may hold the allocator's lock)\n";
		ssize_t w = write(2, msg, sizeof(msg) - 1);
		(void)w;
	}
	return true;
}

static void term_catch(int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = term_handler;
	sigfillset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART | SA_SIGINFO;
	term_sigaction(sig, &sa);
}

CKC_WARM_PATH void ckc_term_default_set(int sig)
{
	/* (not once a signal's end began: the default then ends the process) */
	if (term_setting || ckc_io_guard || !atomic_load(&term_running) || atomic_load(&term_sig) != 0 ||
	    getpid() != term_pid)
		return;
	for (int i = 0; i < TERM_NSIGS; i++)
		if (term_sigs[i] == sig)
			term_catch(sig);
}

void ckc_term_install(double wait_s)
{
	static bool installed;

	if (installed)
		return;
	installed = true;
	term_wait_ns = (uint64_t)(wait_s * 1e9);
	term_pid = getpid();
	if (sem_init(&term_sem, 0, 0) != 0)
		return;
	/* the thread never runs a handler itself (thread.h) */
	int rc = ckc_thread_start(NULL, term_main, NULL, "ckc-term", true);
	atomic_store(&term_running, rc == 0);
	if (rc != 0) {
		ckc_warn("no thread for the end by signal (%s): SIGTERM ends the program without "
			 "writing the cache's checkpoints", strerror(rc));
		return;
	}
	for (int i = 0; i < TERM_NSIGS; i++) {
		struct sigaction cur;
		/* the program's own handler (or SIG_IGN) is left alone: if it
		 * ends the program with exit(), the exit drain runs */
		if (sigaction(term_sigs[i], NULL, &cur) != 0 || cur.sa_handler != SIG_DFL ||
		    (cur.sa_flags & SA_SIGINFO))
			continue;
		term_catch(term_sigs[i]);
	}
}
