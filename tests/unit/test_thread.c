/* Unit tests of the library's thread start (src/thread.c): a library thread
 * blocks every signal a program may take for itself and keeps open those a
 * fault of its own raises, whatever mask its creator had; the creator's own
 * mask is left as it was; the thread carries its name; a detached thread
 * runs too. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "thread.h"

struct seen {
	sigset_t mask;
	char name[16];
	atomic_int done;
};

static void *look(void *p)
{
	struct seen *s = p;
	pthread_sigmask(SIG_SETMASK, NULL, &s->mask);
	pthread_getname_np(pthread_self(), s->name, sizeof(s->name));
	atomic_store(&s->done, 1);
	return NULL;
}

static void expect_library_mask(const sigset_t *m)
{
	for (int sig = 1; sig < 32; sig++) { /* 32 and 33 belong to glibc */
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (ckc_thread_open_signal(sig))
			cr_expect(!sigismember(m, sig), "signal %d (%s) blocked in a library thread", sig,
				  strsignal(sig));
		else
			cr_expect(sigismember(m, sig), "signal %d (%s) open in a library thread", sig,
				  strsignal(sig));
	}
	cr_expect(sigismember(m, SIGRTMIN + 1), "a real-time signal open in a library thread");
}

/* Starts a library thread from a creator whose mask is creator, checks the
 * new thread's mask, and gives the creator's mask after the start in after
 * (the caller's own mask is put back). */
static void start_from(const sigset_t *creator, sigset_t *after)
{
	sigset_t before;
	pthread_sigmask(SIG_SETMASK, creator, &before);
	struct seen s = { 0 };
	pthread_t t;
	cr_assert_eq(ckc_thread_start(&t, look, &s, "ckc-test", false), 0);
	pthread_join(t, NULL);
	expect_library_mask(&s.mask);
	pthread_sigmask(SIG_SETMASK, &before, after);
}

Test(thread, blocks_the_programs_signals_from_an_open_creator)
{
	sigset_t none, after;
	sigemptyset(&none);
	start_from(&none, &after);
	cr_expect(!sigismember(&after, SIGUSR1), "the creator's mask changed");
	cr_expect(!sigismember(&after, SIGCHLD), "the creator's mask changed");
}

Test(thread, opens_fault_signals_a_creator_blocked)
{
	sigset_t all, after;
	sigfillset(&all);
	start_from(&all, &after);
	cr_expect(sigismember(&after, SIGUSR1) && sigismember(&after, SIGSEGV),
		  "the creator's mask changed");
}

Test(thread, carries_its_name_cut_to_fifteen_characters)
{
	struct seen s = { 0 };
	pthread_t t;
	cr_assert_eq(ckc_thread_start(&t, look, &s, "ckc-a-name-longer-than-fifteen", false), 0);
	pthread_join(t, NULL);
	cr_expect_str_eq(s.name, "ckc-a-name-long");
}

Test(thread, detached_runs)
{
	static struct seen s;
	cr_assert_eq(ckc_thread_start(NULL, look, &s, "ckc-detached", true), 0);
	for (int i = 0; i < 5000 && !atomic_load(&s.done); i++)
		usleep(1000);
	cr_assert(atomic_load(&s.done), "the detached thread never ran");
	expect_library_mask(&s.mask);
	cr_expect_str_eq(s.name, "ckc-detached");
}
