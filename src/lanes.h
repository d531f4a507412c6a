/* Copy lanes: one large copy of the program's, split into pieces that the
 * calling thread and a few helper threads run at once. A copy into memory
 * the program has never touched (a new numpy array, a fresh staging buffer)
 * spends most of its time faulting pages in; one thread does that at a
 * fraction of the rate several do. */
#ifndef CKC_LANES_H
#define CKC_LANES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Pieces start at multiples of this in the address space (a transparent
 * huge page: no two lanes fault the same one). */
#define CKC_LANE_PIECE (2u << 20)
/* The smallest copy worth splitting. */
#define CKC_LANE_MIN (8u << 20)
/* The caller and at most CKC_LANES_MAX - 1 helpers (CKPTCACHE_LANES); by
 * default CKC_LANES_AUTO where the process may use that many CPUs, else
 * none: on two CPUs a second thread gained on 4 KiB pages and lost on
 * huge pages (a numpy array's) on a virtual machine. */
#define CKC_LANES_MAX 8
#define CKC_LANES_AUTO 4

/* The work of one piece: bytes [a, b) of the range, which begins at offset
 * at of the copy. 0 or a negative errno. */
typedef int (*ckc_lane_fn)(void *arg, uintptr_t a, uintptr_t b, uint64_t at);

/* The lanes of a copy: 0 chooses by the CPUs, 1 turns them off, more asks
 * for that many (the helpers never outnumber the other CPUs). Takes effect
 * when the helpers start, at the first copy. */
void ckc_lanes_configure(int lanes);

/* Runs fn over [p, p + n) in pieces, each exactly once, on the caller and
 * the helpers, and returns once every piece has run: 0, or the first error
 * of fn (pieces not yet begun are then skipped). -EAGAIN, with nothing
 * run, when no helper can take part (another copy holds them, the process
 * may use one CPU, a helper could not be started): the caller copies as
 * it would have. Helpers start on first use and wait, with every signal
 * blocked, for the next copy; a forked child starts its own. */
int ckc_lanes_run(uintptr_t p, size_t n, ckc_lane_fn fn, void *arg);

/* memcpy(dst, src, n) in lanes, each piece of dst faulted in first
 * (MADV_POPULATE_WRITE): 0 when done; else (as ckc_lanes_run, or the
 * kernel's error for memory dst that may not be written) nothing or part
 * of it was copied, and the caller copies it as it would have. */
int ckc_lanes_memcpy(void *dst, const void *src, size_t n);

/* Faults in the whole pages of [a, b) for writing (MADV_POPULATE_WRITE):
 * 0 or -errno (-ENOSYS: a kernel without it, before Linux 5.14; -EINVAL:
 * memory the program may not write now). */
int ckc_lanes_populate(uintptr_t a, uintptr_t b);

/* Whether this thread is a helper: one that lasts as long as the process
 * (what it keeps per thread is never left behind by a thread's end). */
bool ckc_lanes_helper(void);

/* The helpers started in this process (0 before the first use). */
int ckc_lanes_helpers(void);
/* The helpers, and the copies made in lanes and their bytes. */
void ckc_lanes_stats(int *helpers, uint64_t *copies, uint64_t *bytes);

#endif
