/* The program's handlers of asynchronous signals behind the library's
 * (sigdefer.h). */
#include "config.h"

#include "sigdefer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "io.h"
#include "lockrank.h"

#define SIGS 65 /* 1..64 */

/* The program's handler of a signal whose disposition is the library's
 * trampoline; fn NULL where it is not. */
typedef struct {
	_Atomic(void *) fn;
	atomic_int flags;
	sigset_t mask;
} prog_handler_t;

static prog_handler_t prog[SIGS];

/* Handlers of the program this thread runs where they interrupted it. */
static __thread unsigned in_handler __attribute__((tls_model("initial-exec")));

bool ckc_sig_in_handler(void)
{
	return in_handler > 0;
}

/* A delivery deferred: one per signal, as the kernel keeps one standard
 * signal pending (the same signal again before its handler ran merges with
 * it), with the handler installed when it came. */
enum { DEF_FREE, DEF_FILLING, DEF_HELD };
typedef struct {
	atomic_int state;
	void *fn;
	int flags;
	sigset_t mask;
	siginfo_t si;
	ucontext_t uc;
} deferred_t;

static deferred_t deferred[SIGS];

bool ckc_sig_deferrable(int sig)
{
	switch (sig) {
	case SIGKILL:
	case SIGSTOP:
	/* raised for the instruction the thread runs, or by abort() */
	case SIGSEGV:
	case SIGBUS:
	case SIGFPE:
	case SIGILL:
	case SIGTRAP:
	case SIGSYS:
	case SIGABRT:
		return false;
	default:
		return sig > 0 && sig < SIGS && (sig < 32 || sig > 33); /* 32, 33: the C library's */
	}
}

static void prog_call(void *fn, int flags, int sig, siginfo_t *si, void *uc)
{
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
	else
		((void (*)(int))fn)(sig);
}

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	if (sig <= 0 || sig >= SIGS)
		return;
	void *fn = atomic_load_explicit(&prog[sig].fn, memory_order_acquire);
	if (!fn)
		return; /* set back to the default or ignored as it came */
	int flags = atomic_load_explicit(&prog[sig].flags, memory_order_relaxed);
	if (ckc_tl_locks == 0 && ckc_io_guard == 0) {
		in_handler++;
		prog_call(fn, flags, sig, si, uc);
		in_handler--;
		return;
	}
	deferred_t *d = &deferred[sig];
	int free_ = DEF_FREE;
	if (atomic_compare_exchange_strong(&d->state, &free_, DEF_FILLING)) {
		d->fn = fn;
		d->flags = flags;
		d->mask = prog[sig].mask;
		if (si)
			d->si = *si;
		else
			memset(&d->si, 0, sizeof(d->si));
		if (uc)
			memcpy(&d->uc, uc, sizeof(d->uc));
		else
			memset(&d->uc, 0, sizeof(d->uc));
		atomic_store(&d->state, DEF_HELD);
	}
	ckc_tl_sigdefer |= 1ull << (sig - 1);
}

void ckc_sig_run_deferred(void)
{
	int saved = errno, guard = ckc_io_guard;
	sigset_t all, before;
	sigfillset(&all);
	ckc_io_guard = 0; /* the program's code, no lock held */
	for (;;) {
		/* the mask read and cleared with signals blocked: a handler of
		 * this thread sets it */
		pthread_sigmask(SIG_BLOCK, &all, &before);
		uint64_t m = ckc_tl_sigdefer;
		if (!m) {
			pthread_sigmask(SIG_SETMASK, &before, NULL);
			break;
		}
		int sig = __builtin_ctzll(m) + 1;
		ckc_tl_sigdefer = m & ~(1ull << (sig - 1));
		deferred_t *d = &deferred[sig];
		int held = DEF_HELD;
		if (!atomic_compare_exchange_strong(&d->state, &held, DEF_FILLING)) {
			/* another thread's deferral of it ran it */
			pthread_sigmask(SIG_SETMASK, &before, NULL);
			continue;
		}
		void *fn = d->fn;
		int flags = d->flags;
		siginfo_t si = d->si;
		ucontext_t uc;
		memcpy(&uc, &d->uc, sizeof(uc));
		sigset_t during = before;
		for (int s = 1; s < SIGS; s++)
			if (sigismember(&d->mask, s) == 1)
				sigaddset(&during, s);
		if (!(flags & SA_NODEFER))
			sigaddset(&during, sig);
		atomic_store(&d->state, DEF_FREE);
		/* as the kernel runs a handler: its mask and the signal blocked */
		pthread_sigmask(SIG_SETMASK, &during, NULL);
		prog_call(fn, flags, sig, &si, &uc);
		pthread_sigmask(SIG_SETMASK, &before, NULL);
	}
	ckc_io_guard = guard;
	errno = saved;
}

void ckc_sig_atfork_child(void)
{
	ckc_tl_sigdefer = 0;
	for (int s = 1; s < SIGS; s++)
		atomic_store(&deferred[s].state, DEF_FREE);
}

int ckc_sig_action(int sig, const struct sigaction *act, struct sigaction *old, bool table_ro,
		   int (*real)(int, const struct sigaction *, struct sigaction *))
{
	if (!ckc_sig_deferrable(sig))
		return real(sig, act, old);
	void *was_fn = atomic_load(&prog[sig].fn);
	int was_flags = atomic_load(&prog[sig].flags);
	sigset_t was_mask = prog[sig].mask;
	int rc;
	if (act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN && !table_ro) {
		/* the program's handler first: a signal that comes as ours is
		 * installed finds it */
		prog[sig].mask = act->sa_mask;
		atomic_store(&prog[sig].flags, act->sa_flags);
		atomic_store_explicit(&prog[sig].fn, (void *)act->sa_sigaction, memory_order_release);
		struct sigaction mine = *act;
		mine.sa_sigaction = trampoline;
		mine.sa_flags |= SA_SIGINFO;
		rc = real(sig, &mine, old);
		if (rc != 0) {
			int e = errno;
			prog[sig].mask = was_mask;
			atomic_store(&prog[sig].flags, was_flags);
			atomic_store(&prog[sig].fn, was_fn);
			errno = e;
			return rc;
		}
	} else {
		rc = real(sig, act, old);
		if (rc == 0 && act && !table_ro)
			atomic_store(&prog[sig].fn, NULL);
	}
	if (rc == 0 && old && old->sa_sigaction == trampoline) {
		/* the program's own, as it set it */
		old->sa_sigaction = (void (*)(int, siginfo_t *, void *))was_fn;
		old->sa_flags = was_flags;
		old->sa_mask = was_mask;
	}
	return rc;
}
