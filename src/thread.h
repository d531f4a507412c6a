/* The library's own threads (flushers, prefetcher, populating threads, copy
 * lanes, kernel touch, gpu mappers, lending, node server, end by signal).
 *
 * A signal sent to a process goes to any of its threads that does not block
 * it. A program that takes its signals through signalfd, sigwait or a
 * dedicated thread blocks them in its own threads; a library thread that
 * left them open would take them instead: SIGUSR1's default would end the
 * program, a child's SIGCHLD would be lost, a SIGINT would stop the program
 * without its handler. So every library thread starts with every signal
 * blocked except those a fault of its own raises (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGTRAP, SIGSYS): a copy that touches memory a device capture
 * owes must still reach the library's handler. Each thread carries a name
 * (at most 15 characters, "ckc-" first) for top -H, gdb and /proc. */
#ifndef CKC_THREAD_H
#define CKC_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* Starts fn(arg) in a new thread named name, detached when asked. Returns 0
 * or the error pthread_create gave (t untouched then). */
int ckc_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name, bool detached);

/* The signals a library thread keeps open: the set blocked in it is every
 * signal but these (tests). */
bool ckc_thread_open_signal(int sig);

#endif
