/* The trace's writer: lines appended to a buffer with the engine lock held,
 * written to the file by a thread of their own with no lock held. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io.h"
#include "lockrank.h"
#include "thread.h"
#include "trace.h"
#include "sys.h"

/* A buffer this full wakes the writer; a shorter one waits TRACE_LINGER_NS
 * at most, so that a plot of a run still going sees its recent lines. */
#define TRACE_WAKE (64u << 10)
#define TRACE_LINGER_NS 200000000L
/* Beyond this much not yet written, lines are counted, not kept. */
#define TRACE_MAX (64u << 20)

static ckc_mutex_t trace_lock = CKC_MUTEX_INIT(TRACE);
CKC_LOCKS_AT_START(trace_lock, ckc_locks_add, &trace_lock)
static pthread_cond_t trace_cv = PTHREAD_COND_INITIALIZER;

static struct {
	char *buf;
	size_t len, cap;
	uint64_t dropped; /* lines lost since the last write */
	int fd;
	uint64_t off;     /* where the next bytes go (the writer's alone) */
	bool running;     /* the writer thread runs */
	bool stop;        /* asked to end */
	bool direct;      /* no writer: lines are written as they come */
	pthread_t thread;
} T = { .fd = -1 };

static void trace_write(int fd, const char *b, size_t n)
{
	if (fd >= 0 && ckc_io_pwrite_all(fd, b, n, (off_t)T.off) == 0)
		T.off += n;
}

/* Takes the buffer and writes it, the lock dropped meanwhile (held on
 * entry and on return). */
static void trace_drain_locked(void)
{
	char *b = T.buf;
	size_t n = T.len;
	uint64_t lost = T.dropped;
	int fd = T.fd;

	T.buf = NULL;
	T.len = T.cap = 0;
	T.dropped = 0;
	ckc_mutex_unlock(&trace_lock);
	trace_write(fd, b, n);
	if (lost) {
		char note[96];
		int k = snprintf(note, sizeof(note), "# %llu lines not written: the trace's writer fell behind\n",
				 (unsigned long long)lost);
		trace_write(fd, note, (size_t)k);
	}
	sys_free(b);
	ckc_mutex_lock(&trace_lock);
}

static void *trace_main(void *arg)
{
	(void)arg;
	ckc_io_guard = 1; /* never re-enter the wrappers */
	ckc_mutex_lock(&trace_lock);
	for (;;) {
		if (!T.stop && T.len == 0 && !T.dropped) {
			ckc_cond_wait(&trace_cv, &trace_lock);
		} else if (!T.stop && T.len < TRACE_WAKE) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += TRACE_LINGER_NS;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			ckc_cond_timedwait(&trace_cv, &trace_lock, &ts);
		}
		if (T.len || T.dropped)
			trace_drain_locked();
		if (T.stop)
			break;
	}
	ckc_mutex_unlock(&trace_lock);
	return NULL;
}

void ckc_trace_begin(int fd)
{
	ckc_mutex_lock(&trace_lock);
	T.fd = fd;
	T.off = 0;
	T.stop = false;
	T.direct = false;
	ckc_mutex_unlock(&trace_lock);
	if (ckc_thread_start(&T.thread, trace_main, NULL, "ckc-trace", false) != 0) {
		ckc_mutex_lock(&trace_lock);
		T.direct = true;
		ckc_mutex_unlock(&trace_lock);
		return;
	}
	T.running = true;
}

void ckc_trace_put(const char *line, size_t n)
{
	ckc_mutex_lock(&trace_lock);
	if (T.direct) {
		/* no writer: the line goes now (under the caller's lock, as a
		 * trace without a thread must) */
		trace_write(T.fd, line, n);
		ckc_mutex_unlock(&trace_lock);
		return;
	}
	if (T.len + n > TRACE_MAX) {
		T.dropped++;
	} else {
		if (T.len + n > T.cap) {
			size_t cap = T.cap ? T.cap : TRACE_WAKE;
			while (cap < T.len + n)
				cap *= 2;
			char *b = sys_realloc(T.buf, cap);
			if (!b) {
				T.dropped++;
				ckc_mutex_unlock(&trace_lock);
				return;
			}
			T.buf = b;
			T.cap = cap;
		}
		memcpy(T.buf + T.len, line, n);
		T.len += n;
	}
	if (T.len >= TRACE_WAKE || T.len == n)
		pthread_cond_signal(&trace_cv);
	ckc_mutex_unlock(&trace_lock);
}

void ckc_trace_end(void)
{
	if (T.running) {
		ckc_mutex_lock(&trace_lock);
		T.stop = true;
		pthread_cond_signal(&trace_cv);
		ckc_mutex_unlock(&trace_lock);
		pthread_join(T.thread, NULL);
		T.running = false;
	}
	ckc_mutex_lock(&trace_lock);
	if (T.len || T.dropped)
		trace_drain_locked();
	T.direct = true;
	ckc_mutex_unlock(&trace_lock);
}

void ckc_trace_close(void)
{
	ckc_trace_end();
	ckc_mutex_lock(&trace_lock);
	T.fd = -1;
	T.direct = false;
	T.stop = false;
	ckc_mutex_unlock(&trace_lock);
}

void ckc_trace_atfork_child(void)
{
	/* the lock was made anew by the fork hooks; the buffer is the parent's */
	T.buf = NULL;
	T.len = T.cap = 0;
	T.dropped = 0;
	T.fd = -1;
	T.running = false;
	T.stop = false;
	T.direct = true;
	pthread_cond_init(&trace_cv, NULL);
}
