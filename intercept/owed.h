/* Owed host ranges of device capture (owed.c): the pages of a program's host
 * buffer whose bytes are still in the gpu tier. */
#ifndef CKC_OWED_H
#define CKC_OWED_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "ckc.h"
#include "owedtab.h"

/* The host page size. */
uintptr_t ckc_page_size(void);

/* Entries in the table: 0 on every path that owes nothing (one load). */
extern atomic_size_t ckc_owed_count;

/* Counters for the statistics (updated under the table lock). */
typedef struct ckc_owed_stats {
	uint64_t filled, dropped;
	atomic_ullong write_ns, read_ns, fill_ns;
	atomic_ullong read_engine_ns, read_owe_ns, restore_wait_ns;
} ckc_owed_stats_t;
extern ckc_owed_stats_t ckc_owed_st;

/* Events of the device copies, from the CUDA side (cuda_events.c). */
typedef struct ckc_owed_ops {
	void (*event_wait)(void *ev);
	void (*event_get)(void *ev);
	void (*event_put)(void *ev);
} ckc_owed_ops_t;
void ckc_owed_set_ops(const ckc_owed_ops_t *ops);
/* The child of fork: the claims of the parent's other threads are gone. */
void ckc_owed_atfork_child(void);

/* Fills (fill) or drops every owed byte in the pages of [p, p+n); the rest
 * of an entry reaching outside stays owed. */
void ckc_owed_cut(const void *p, size_t n, bool fill);
void ckc_owed_cut_addr(uintptr_t p, size_t n, bool fill);

/* Before the kernel or the C library reads or writes [p, p+n) behind the
 * program's back (an untagged read, write, send...): owed bytes there are
 * filled. One load when nothing is owed. */
static inline void ckc_owed_touch(const void *p, size_t n)
{
	if (__builtin_expect(atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) != 0, 0))
		ckc_owed_cut_addr((uintptr_t)p, n, true);
}

static inline void ckc_owed_touch_iov(const struct iovec *iov, int cnt)
{
	if (__builtin_expect(atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) != 0, 0))
		for (int i = 0; iov && i < cnt; i++)
			ckc_owed_cut_addr((uintptr_t)iov[i].iov_base, iov[i].iov_len, true);
}

/* Before a copy overwrites all of [p, p+n): owed pages it covers whole are
 * released (unprotected), partly covered ones filled. */
void ckc_owed_will_write(const void *p, size_t n);

/* Fills everything (fork, exit). */
void ckc_owed_fill_all(void);

/* Before a copy writes [d, d+n): owed bytes of its partial first and last
 * pages are filled (the copy writes part of them). */
void ckc_owed_edges_fill(uintptr_t d, size_t n);

/* Owes the whole pages [a, b) of a capture to ref, whose cap_len bytes
 * belong at host address cap_start: pages owed already keep their
 * protection and change owner, the others are protected. The table takes
 * ref and ready. ordered: ready is a deferred capture's (the edges are
 * final already). Returns 0, or -errno: then nothing in [a, b) is owed any
 * more, its pages are accessible, and the caller keeps ref and ready. */
int ckc_owed_add_len(uintptr_t a, uintptr_t b, uintptr_t cap_start, uint64_t cap_len,
		     ckc_ref_t *ref, bool pinned, void *ready, bool ordered, uintptr_t site);

/* Whether owing memory at the program's call site `site` (its return
 * address) has paid lately: its owed ranges were written to a checkpoint or
 * copied to the device more often than touched by the CPU first (then each
 * had cost a fill on top of the copy the program asked for). A site that
 * does not pay is tried again now and then. */
bool ckc_owed_site_ok(uintptr_t site);
/* The site of every tagged read into host memory (the program's reads are
 * judged together: a read's call site is not known below its wrapper). */
#define CKC_OWED_SITE_READ ((uintptr_t)1)

/* What a host-to-device copy from [s0, s0+n) may take from device memory:
 * [lo, hi) from the capture of e (the whole copy when every whole page of
 * the capture in it is still owed by it and its partial pages are
 * unchanged), the rest from host memory, where nothing is owed. */
typedef struct ckc_owed_plan {
	ckc_owed_t e;     /* the first owed part: its ref and ready are held */
	uintptr_t lo, hi;
	bool whole;
} ckc_owed_plan_t;

/* False when nothing in the whole pages of the copy is owed, or the owed
 * pages there are not one run of one capture (the caller fills them and
 * copies host memory). The partial pages must have been filled first
 * (ckc_owed_edges_fill). */
bool ckc_owed_plan(uintptr_t s0, size_t n, ckc_owed_plan_t *pl);

/* Ends a plan; busy (taken), when not NULL: the device copy reading it
 * completes with that event, and the capture stays until then. */
void ckc_owed_plan_done(ckc_owed_plan_t *pl, void *busy);

/* Whether a tagged read into buf may leave it owed (set by cuda_capture.c). */
extern bool (*ckc_owed_read_ok)(const void *buf, size_t n);

/* Whether the partial pages of e's capture still hold the bytes they had
 * when it was recorded. */
bool ckc_owed_edges_same(const ckc_owed_t *e);

/* sigaction(SIGSEGV) of the program once the library's handler is in
 * place: 0 when handled here (the program's handler runs behind ours),
 * 1 when the real call should be made. */
int ckc_owed_sigaction(const struct sigaction *act, struct sigaction *old);

/* Device capture's use of write(2)/read(2) on tagged descriptors (posix.c):
 * the bytes of [buf, buf+n) written at off, owed ranges as device copies.
 * Returns bytes, -errno, or CKC_OWED_PASS when nothing is owed there. */
#define CKC_OWED_PASS (-4097)
ssize_t ckc_owed_pwrite(ckc_handle_t *h, const void *buf, size_t n, uint64_t off);
/* A tagged read into host memory answered from the gpu tier (the buffer
 * becomes owed). Returns bytes, or CKC_OWED_PASS to read normally. */
ssize_t ckc_owed_pread(ckc_handle_t *h, void *buf, size_t n, uint64_t off, uintptr_t site);

#endif
