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

__thread unsigned ckc_tl_in_handler __attribute__((tls_model("initial-exec")));

/* Deliveries deferred, each with the thread that took it and the handler
 * installed when it came: a standard signal that comes again to a thread
 * that defers it already merges with it, as the kernel keeps one pending;
 * a real-time one takes a slot of its own, as the kernel queues it. */
enum { DEF_FREE, DEF_FILLING, DEF_HELD, DEF_TAKEN };
#define DEF_SLOTS 1024
typedef struct {
	atomic_int state;
	pthread_t owner;
	uint64_t seq;
	int sig;
	void *fn;
	int flags;
	sigset_t mask;
	siginfo_t si;
	ucontext_t uc;
} deferred_t;

static deferred_t deferred[DEF_SLOTS];
static atomic_uint_fast64_t deferred_seq;
/* Slots below this were ever taken (a slot is taken lowest first): the
 * searches and a fork child's reset go no further, so that a process that
 * never deferred a signal touches none of the table's pages (a fork child
 * that cleared all of them paid 0.8 ms of page faults). A thread's own
 * slots are below the mark it raised itself. */
static atomic_int deferred_hi;
/* Signals this thread deferred when every slot was taken: run with a
 * siginfo of their number only. */
static __thread uint64_t deferred_over __attribute__((tls_model("initial-exec")));

CKC_START_PATH bool ckc_sig_deferrable(int sig)
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

CKC_START_PATH static void trampoline(int sig, siginfo_t *si, void *uc)
{
	if (sig <= 0 || sig >= SIGS)
		return;
	void *fn = atomic_load_explicit(&prog[sig].fn, memory_order_acquire);
	if (!fn)
		return; /* set back to the default or ignored as it came */
	int flags = atomic_load_explicit(&prog[sig].flags, memory_order_relaxed);
	if (ckc_tl_outside()) {
		ckc_tl_in_handler++;
		prog_call(fn, flags, sig, si, uc);
		ckc_tl_in_handler--;
		return;
	}
	pthread_t me = pthread_self();
	bool rt = sig >= SIGRTMIN;
	int hi = atomic_load(&deferred_hi);
	for (int i = 0; !rt && i < hi; i++)
		if (atomic_load(&deferred[i].state) == DEF_HELD && deferred[i].sig == sig &&
		    pthread_equal(deferred[i].owner, me)) {
			ckc_tl_sigdefer = 1;
			return; /* merged with the one pending */
		}
	for (int i = 0; i < DEF_SLOTS; i++) {
		deferred_t *d = &deferred[i];
		int free_ = DEF_FREE;
		if (!atomic_compare_exchange_strong(&d->state, &free_, DEF_FILLING))
			continue;
		for (int h = atomic_load(&deferred_hi); h <= i && !atomic_compare_exchange_weak(&deferred_hi, &h, i + 1);)
			;
		d->owner = me;
		d->seq = atomic_fetch_add(&deferred_seq, 1);
		d->sig = sig;
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
		ckc_tl_sigdefer = 1;
		return;
	}
	deferred_over |= 1ull << (sig - 1);
	ckc_tl_sigdefer = 1;
}

/* This thread's deferred delivery that came first, taken (its slot freed)
 * into out; false when none is left. */
static bool deferred_take(deferred_t *out)
{
	pthread_t me = pthread_self();
	int best = -1, hi = atomic_load(&deferred_hi);
	for (int i = 0; i < hi; i++)
		if (atomic_load(&deferred[i].state) == DEF_HELD && pthread_equal(deferred[i].owner, me) &&
		    (best < 0 || deferred[i].seq < deferred[best].seq))
			best = i;
	if (best >= 0) {
		deferred_t *d = &deferred[best];
		int held = DEF_HELD;
		if (!atomic_compare_exchange_strong(&d->state, &held, DEF_TAKEN))
			return false;
		out->sig = d->sig;
		out->fn = d->fn;
		out->flags = d->flags;
		out->mask = d->mask;
		out->si = d->si;
		memcpy(&out->uc, &d->uc, sizeof(out->uc));
		atomic_store(&d->state, DEF_FREE);
		return true;
	}
	if (!deferred_over)
		return false;
	int sig = __builtin_ctzll(deferred_over) + 1;
	deferred_over &= ~(1ull << (sig - 1));
	void *fn = atomic_load(&prog[sig].fn);
	if (!fn)
		return deferred_take(out);
	out->sig = sig;
	out->fn = fn;
	out->flags = atomic_load(&prog[sig].flags);
	out->mask = prog[sig].mask;
	memset(&out->si, 0, sizeof(out->si));
	out->si.si_signo = sig;
	out->si.si_code = SI_USER;
	memset(&out->uc, 0, sizeof(out->uc));
	return true;
}

void ckc_sig_run_deferred(void)
{
	int saved = errno, guard = ckc_io_guard;
	sigset_t all, before;
	sigfillset(&all);
	ckc_io_guard = 0; /* the program's code, no lock held */
	for (;;) {
		/* taken with signals blocked: a handler of this thread adds */
		pthread_sigmask(SIG_BLOCK, &all, &before);
		deferred_t d;
		if (!deferred_take(&d)) {
			ckc_tl_sigdefer = 0;
			pthread_sigmask(SIG_SETMASK, &before, NULL);
			break;
		}
		sigset_t during;
		sigorset(&during, &before, &d.mask);
		if (!(d.flags & SA_NODEFER))
			sigaddset(&during, d.sig);
		sigset_t uc_was = d.uc.uc_sigmask;
		/* as the kernel runs a handler: its mask and the signal blocked */
		pthread_sigmask(SIG_SETMASK, &during, NULL);
		prog_call(d.fn, d.flags, d.sig, &d.si, &d.uc);
		/* as the kernel returns from one: the mask of its context, which
		 * the handler may have changed */
		pthread_sigmask(SIG_SETMASK, memcmp(&uc_was, &d.uc.uc_sigmask, sizeof(uc_was)) ? &d.uc.uc_sigmask : &before,
				NULL);
	}
	ckc_io_guard = guard;
	errno = saved;
}

void ckc_sig_atfork_child(void)
{
	ckc_tl_sigdefer = 0;
	deferred_over = 0;
	for (int i = 0, hi = atomic_load(&deferred_hi); i < hi; i++)
		atomic_store(&deferred[i].state, DEF_FREE);
}

CKC_START_PATH int ckc_sig_action(int sig, const struct sigaction *act, struct sigaction *old, bool table_ro,
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
		/* (each store only where it changes something: a shell sets
		 * the same handlers around each fork, and a page written
		 * while a child shares it is copied first) */
		if (memcmp(&was_mask, &act->sa_mask, sizeof(was_mask)) != 0)
			prog[sig].mask = act->sa_mask;
		if (was_flags != act->sa_flags)
			atomic_store(&prog[sig].flags, act->sa_flags);
		if (was_fn != (void *)act->sa_sigaction)
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
		if (rc == 0 && act && !table_ro && was_fn)
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
