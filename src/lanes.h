/* Copy lanes: one large copy of the program's, split into pieces that the
 * calling thread and a few helper threads run at once. A copy into memory
 * the program has never touched (a new numpy array, a fresh staging buffer)
 * spends most of its time faulting pages in; one thread does that at a
 * fraction of the rate several do. */
#ifndef CKC_LANES_H
#define CKC_LANES_H

#include <stddef.h>
#include <stdint.h>

/* Pieces start at multiples of this in the address space (a transparent
 * huge page: no two lanes fault the same one). */
#define CKC_LANE_PIECE (2u << 20)
/* The caller and at most CKC_LANES_MAX - 1 helpers. */
#define CKC_LANES_MAX 4

/* The work of one piece: bytes [a, b) of the range, which begins at offset
 * at of the copy. 0 or a negative errno. */
typedef int (*ckc_lane_fn)(void *arg, uintptr_t a, uintptr_t b, uint64_t at);

/* Runs fn over [p, p + n) in pieces, each exactly once, on the caller and
 * the helpers, and returns once every piece has run: 0, or the first error
 * of fn (pieces not yet begun are then skipped). -EAGAIN, with nothing
 * run, when no helper can take part (another copy holds them, the process
 * may use one CPU, a helper could not be started): the caller copies as
 * it would have. Helpers start on first use and wait, with every signal
 * blocked, for the next copy; a forked child starts its own. */
int ckc_lanes_run(uintptr_t p, size_t n, ckc_lane_fn fn, void *arg);

/* The helpers started in this process (0 before the first use). */
int ckc_lanes_helpers(void);

#endif
