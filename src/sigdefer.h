/* The program's signal handlers, run when the thread they interrupt holds
 * none of the library's locks.
 *
 * A handler that calls the library (a write to a checkpoint, an open, a
 * free of memory the cache owes) needs its locks; if the thread it
 * interrupted holds one of them, or is itself doing what the handler's
 * call waits for (a fork handing a checkpoint over to its real file), the
 * handler would wait for that thread, which waits for the handler: the
 * process hangs. So the program's handlers of asynchronous signals are
 * installed behind one of the library's (ckc_sig_action): when a signal
 * comes while the thread is inside the library (it holds a lock,
 * ckc_tl_locks of src/lockrank.h, or runs an engine call, ckc_io_guard),
 * or, once the cache has started, runs a call of the allocator
 * (ckc_tl_alloc: the handler's calls need memory, whose lock the thread
 * may hold), its handler runs as that thread leaves the library or the
 * allocator, with the signal's
 * siginfo and the handler's mask, microseconds later (the library never
 * blocks without a bound); otherwise at once. The signals the kernel raises for
 * the instruction the thread runs (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGTRAP, SIGSYS) are not deferred: their handlers are installed as given.
 */
#ifndef CKC_SIGDEFER_H
#define CKC_SIGDEFER_H

#include <signal.h>
#include <stdbool.h>

/* sigaction for the program: act's handler goes behind the library's where
 * sig can be deferred; old reports the program's own handler. table_ro: a
 * vfork child, which shares the parent's memory (its handlers are installed
 * as given, and the parent's table stays as it is). real is the C
 * library's sigaction. Returns as sigaction does. */
int ckc_sig_action(int sig, const struct sigaction *act, struct sigaction *old, bool table_ro,
		   int (*real)(int, const struct sigaction *, struct sigaction *));

/* Whether sig's handler can be deferred (an asynchronous signal). */
bool ckc_sig_deferrable(int sig);

/* Handlers of the program this thread runs where they interrupted it (not
 * one deferred: that runs where the thread left the library). */
extern __thread unsigned ckc_tl_in_handler __attribute__((tls_model("initial-exec")));

static inline bool ckc_sig_in_handler(void)
{
	return ckc_tl_in_handler > 0;
}

/* Runs the handlers deferred in this thread (its last lock let go). */
void ckc_sig_run_deferred(void);

/* In a forked child: what the parent's thread deferred is not the child's
 * (a child starts with no pending signal). */
void ckc_sig_atfork_child(void);

#endif
