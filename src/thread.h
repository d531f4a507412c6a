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
/* Under an address-space limit (ulimit -v): the stack each of the
 * library's threads gets (at most the stack limit), and what each may
 * reserve of the address space in all (that stack, and the 64 MiB glibc's
 * malloc reserves for a thread's own arena), for as many threads as a
 * cache runs (flush, prefetch, populate, node, end of job, kernel touch,
 * three copy lanes). */
#define CKC_THREAD_STACK_AS (2u << 20)
#define CKC_THREAD_AS (CKC_THREAD_STACK_AS + (64u << 20))
#define CKC_THREADS_AS 9
int ckc_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name, bool detached);

/* The signals a library thread keeps open: the set blocked in it is every
 * signal but these (tests). */
bool ckc_thread_open_signal(int sig);

/* The library's threads alive now (a thread leaving counts until it is
 * gone from the process, a little past this count's decrease). */
int ckc_thread_live(void);

/* Whether the process has only the calling thread and never had another
 * (the C library's own mark; false where it has none to read, before
 * ckc_thread_single_init). */
bool ckc_thread_single(void);
void ckc_thread_single_init(void);

/* glibc's getc, putc, fgetc, fputc, getchar and putchar skip the stream's
 * lock while a process has a single thread, and its first pthread_create
 * turns the locks on for every stream, for good: a program writing text a
 * character at a time then runs 1.5x as long. The library's threads
 * never use the program's streams: when the first thread of a process is
 * one of the library's, the locks are turned off again, and turned on for
 * every stream before the program creates a thread of its own, as the C
 * library itself would.
 *
 * ckc_thread_program_creates: the program (not the library) is about to
 * create a thread. ckc_thread_stream: the program opened stream f, which
 * needs no lock while the program's only thread is its first. Both cost a
 * load when nothing applies. */
#include <stdio.h>
void ckc_thread_program_creates(void);
void ckc_thread_stream(FILE *f);

#endif
