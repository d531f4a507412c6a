/* The trace (CKPTCACHE_TRACE): the lines the engine writes, one per
 * operation, and the thread that writes them to the file, so that no file
 * system call of the trace runs under the engine lock. */
#ifndef CKC_TRACE_H
#define CKC_TRACE_H

#include <stddef.h>

/* Starts writing the trace to fd (opened for it): its writer thread, or,
 * where none can start, lines written as they come. */
void ckc_trace_begin(int fd);

/* Appends one line (n bytes) for the writer; with the engine lock held. A
 * writer more than 64 MiB behind loses lines, and says how many. */
void ckc_trace_put(const char *line, size_t n);

/* Writes what is buffered and stops the writer (no engine lock held);
 * lines put after it are written as they come. */
void ckc_trace_end(void);

/* Forgets the file (it is closed by the caller). */
void ckc_trace_close(void);

/* In a forked child: no writer thread, no file. */
void ckc_trace_atfork_child(void);

#endif
