/* The library's own threads: what thread.h says. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "thread.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

/* What the new thread runs, and its name, set by the thread itself (a
 * detached thread may be gone before its creator could name it). */
struct start {
	void *(*fn)(void *);
	void *arg;
	char name[16];
};

static void *thread_main(void *p)
{
	struct start s = *(struct start *)p;
	sys_free(p);
	if (s.name[0])
		pthread_setname_np(pthread_self(), s.name);
	return s.fn(s.arg);
}

static const int open_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS };

bool ckc_thread_open_signal(int sig)
{
	for (size_t i = 0; i < sizeof(open_signals) / sizeof(open_signals[0]); i++)
		if (open_signals[i] == sig)
			return true;
	return false;
}

int ckc_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name, bool detached)
{
	sigset_t block, old;
	pthread_attr_t attr;
	pthread_t th;
	struct start *s = calloc(1, sizeof(*s));

	if (!s)
		return ENOMEM;
	s->fn = fn;
	s->arg = arg;
	if (name)
		strncpy(s->name, name, sizeof(s->name) - 1);
	sigfillset(&block);
	for (size_t i = 0; i < sizeof(open_signals) / sizeof(open_signals[0]); i++)
		sigdelset(&block, open_signals[i]);
	int rc = pthread_attr_init(&attr);
	if (rc) {
		sys_free(s);
		return rc;
	}
	if (detached)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* the new thread inherits the creator's mask: block for the creation
	 * only, then give the creator its own back */
	pthread_sigmask(SIG_SETMASK, &block, &old);
	rc = pthread_create(&th, &attr, thread_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc) {
		sys_free(s);
		return rc;
	}
	if (t)
		*t = th;
	return 0;
}
