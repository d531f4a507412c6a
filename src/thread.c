/* The library's own threads: what thread.h says. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "thread.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "io.h"
#include "sys.h"

/* ---- the streams' locks (thread.h) ---------------------------------- */

/* glibc's stream flag (libio.h, not installed) and its list of streams
 * (exported since 2.2.5); __libc_single_threaded since 2.32. Where any is
 * missing, or a stream lacks the flag right after a thread was created,
 * nothing is changed. */
#define THREAD_STDIO_NEED_LOCK 0x80

enum { STDIO_UNKNOWN, STDIO_SOLO, STDIO_SHARED };
CKC_HOT_DATA static atomic_int thread_stdio;

struct stdio_list {
	void (*lock)(void), (*unlock)(void);
	void *(*begin)(void), *(*end)(void), *(*next)(void *);
	FILE *(*file)(void *);
	char *single;
};

static bool stdio_list(struct stdio_list *l)
{
	ckc_dlsym_fn d = ckc_io_real_dlsym();
	if (!d)
		return false;
	*(void **)&l->lock = d(RTLD_DEFAULT, "_IO_list_lock");
	*(void **)&l->unlock = d(RTLD_DEFAULT, "_IO_list_unlock");
	*(void **)&l->begin = d(RTLD_DEFAULT, "_IO_iter_begin");
	*(void **)&l->end = d(RTLD_DEFAULT, "_IO_iter_end");
	*(void **)&l->next = d(RTLD_DEFAULT, "_IO_iter_next");
	*(void **)&l->file = d(RTLD_DEFAULT, "_IO_iter_file");
	l->single = d(RTLD_DEFAULT, "__libc_single_threaded");
	return l->lock && l->unlock && l->begin && l->end && l->next && l->file && l->single;
}

/* Sets (on) or clears the lock flag of every stream; clearing is done only
 * where every stream has it, as the first pthread_create leaves them. */
static bool stdio_locks(const struct stdio_list *l, bool on)
{
	bool all = true;
	l->lock();
	if (!on)
		for (void *i = l->begin(); i != l->end(); i = l->next(i))
			all = all && (l->file(i)->_flags2 & THREAD_STDIO_NEED_LOCK);
	if (all)
		for (void *i = l->begin(); i != l->end(); i = l->next(i)) {
			FILE *f = l->file(i);
			f->_flags2 = on ? f->_flags2 | THREAD_STDIO_NEED_LOCK : f->_flags2 & ~THREAD_STDIO_NEED_LOCK;
		}
	l->unlock();
	return all;
}

/* Also called from the interposed dlsym, which may run before a
 * sanitizer's runtime is ready: no instrumentation here (nothing but
 * loads and an exchange unless the locks were turned off). */
__attribute__((no_sanitize_address, no_sanitize("undefined"), no_sanitize("thread")))
void ckc_thread_program_creates(void)
{
	if (atomic_load_explicit(&thread_stdio, memory_order_relaxed) == STDIO_SHARED)
		return;
	struct stdio_list l;
	if (atomic_exchange(&thread_stdio, STDIO_SHARED) == STDIO_SOLO && stdio_list(&l))
		stdio_locks(&l, true);
}

CKC_START_PATH void ckc_thread_stream(FILE *f)
{
	if (f && atomic_load_explicit(&thread_stdio, memory_order_relaxed) == STDIO_SOLO)
		f->_flags2 &= ~THREAD_STDIO_NEED_LOCK;
}

/* What the new thread runs, and its name, set by the thread itself (a
 * detached thread may be gone before its creator could name it). */
struct start {
	void *(*fn)(void *);
	void *arg;
	char name[16];
};

/* The library's threads running now (counted from before each is made
 * to after its function returned). */
static atomic_int thread_live;

int ckc_thread_live(void)
{
	return atomic_load(&thread_live);
}

/* glibc's __libc_single_threaded (2.32 on), or NULL */
static _Atomic(char *) single_mark;

CKC_START_PATH void ckc_thread_single_init(void)
{
	static atomic_bool looked;
	if (atomic_load_explicit(&looked, memory_order_acquire))
		return;
	ckc_dlsym_fn d = ckc_io_real_dlsym();
	if (d)
		atomic_store(&single_mark, (char *)d(RTLD_DEFAULT, "__libc_single_threaded"));
	atomic_store_explicit(&looked, true, memory_order_release);
}

CKC_START_PATH bool ckc_thread_single(void)
{
	char *single = atomic_load(&single_mark);
	return single && *single && atomic_load(&thread_live) == 0;
}

static void *thread_main(void *p)
{
	struct start s = *(struct start *)p;
	sys_free(p);
	if (s.name[0])
		pthread_setname_np(pthread_self(), s.name);
	void *r = s.fn(s.arg);
	atomic_fetch_sub(&thread_live, 1);
	return r;
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
	struct start *s = sys_calloc(1, sizeof(*s));

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
	/* under an address-space limit (ulimit -v) each stack counts whole:
	 * the library's threads take CKC_THREAD_STACK_AS, not the 8 MiB of
	 * the stack limit */
	struct rlimit as, st;
	bool small = false;
	if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
		size_t want = CKC_THREAD_STACK_AS;
		if (getrlimit(RLIMIT_STACK, &st) == 0 && st.rlim_cur != RLIM_INFINITY && st.rlim_cur < want)
			want = (size_t)st.rlim_cur;
		small = pthread_attr_setstacksize(&attr, want) == 0;
	}
	/* the new thread inherits the creator's mask: block for the creation
	 * only, then give the creator its own back */
	/* the process's first thread: the program has had one thread only */
	struct stdio_list l;
	bool first = false;
	if (atomic_load(&thread_stdio) == STDIO_UNKNOWN) {
		first = stdio_list(&l) && *l.single;
		int expect = STDIO_UNKNOWN;
		if (!first) /* the program has threads of its own already */
			atomic_compare_exchange_strong(&thread_stdio, &expect, STDIO_SHARED);
	}
	pthread_sigmask(SIG_SETMASK, &block, &old);
	atomic_fetch_add(&thread_live, 1);
	rc = sys_pthread_create(&th, &attr, thread_main, s);
	if (rc == EINVAL && small) {
		/* (a program's static TLS is carved from each stack: one too
		 * large for the small stack gets the default one) */
		pthread_attr_t dflt;
		if (pthread_attr_init(&dflt) == 0) {
			if (detached)
				pthread_attr_setdetachstate(&dflt, PTHREAD_CREATE_DETACHED);
			rc = sys_pthread_create(&th, &dflt, thread_main, s);
			pthread_attr_destroy(&dflt);
		}
	}
	if (rc)
		atomic_fetch_sub(&thread_live, 1);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!rc && first) {
		int expect = STDIO_UNKNOWN;
		if (stdio_locks(&l, false) && !atomic_compare_exchange_strong(&thread_stdio, &expect, STDIO_SOLO))
			stdio_locks(&l, true);
	}
	pthread_attr_destroy(&attr);
	if (rc) {
		sys_free(s);
		return rc;
	}
	if (t)
		*t = th;
	return 0;
}
