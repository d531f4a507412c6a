/* Lending device memory between the ranks of a node (peer.h decides when
 * and to whom). Each rank that joined the peer board runs one thread that
 * serves an abstract UNIX socket named after the board and its entry:
 *
 * - as a lender, it answers a peer's request for n chunks by cutting free
 *   chunks off its own gpu region, making as many exportable allocations
 *   and passing them as file descriptors (SCM_RIGHTS); it keeps their
 *   handles until the borrower gives them back, closes the connection or
 *   dies, then lets its region grow again;
 * - as a borrower, it asks the peers that the schedule names, maps what
 *   they lend in a region of its gpu tier (ckc_gpu_borrow_add), gives it
 *   back when asked (what is being flushed first), and stops placing
 *   anything there when the lender is gone, giving it back once flushed.
 *
 * Both ends check that the other is a process of the same user. */
#ifndef CKC_PEER_LEND_H
#define CKC_PEER_LEND_H

#include <stdbool.h>
#include <stdint.h>

/* How long a capture that found no room waits for a borrowing round. */
#define CKC_PEER_BORROW_WAIT_S 0.05

/* How long a borrower waits for what is being flushed before it gives
 * chunks back; how long a lender whose program needs the memory waits for
 * them (longer). */
#define CKC_PEER_RETURN_WAIT_S 2.0
#define CKC_PEER_TAKE_WAIT_S 3.0

/* One part of a remainder, as a schedule places it: board entry slot
 * (whose device is ordinal home here) takes bytes. */
typedef struct ckc_lend_part {
	int slot, home;
	uint64_t bytes;
} ckc_lend_part_t;

/* Starts serving entry slot of the board named name (the segment's file
 * name). 0, or -errno (the name too long for a socket, no thread). */
int ckc_lend_start(const char *name, int slot);

/* Stops the thread (no lock held): what this process lent is given up (a
 * borrower keeps its mapping until it gives it back), what it borrowed
 * stays mapped until the gpu tier is torn down. Idempotent. */
void ckc_lend_stop(void);

/* In a forked child: the parent's thread and connections are the
 * parent's; the child's copies of its descriptors are closed. */
void ckc_lend_atfork_child(void);

/* Whether a capture that found no room may wait for a borrowing round:
 * the thread runs and the last round (if recent) got something. Lock not
 * needed. */
bool ckc_lend_may_borrow(void);

/* Asks the peers that the schedule names for room for len bytes and waits
 * at most wait_s for the round (no lock held). True when new room was
 * mapped. */
bool ckc_lend_borrow(uint64_t len, double wait_s);

/* The program needs want bytes of this device back: borrowers are asked
 * to give back what they have of this process's, waiting at most wait_s
 * (no lock held). Returns the bytes that came back. */
uint64_t ckc_lend_take_back(uint64_t want, double wait_s);

typedef struct ckc_lend_stats {
	uint64_t lent_bytes, lent_now_max, returned_bytes, taken_back_bytes, lend_refused;
	uint64_t borrowed_bytes, borrow_rounds, gave_back_bytes, lenders_lost;
} ckc_lend_stats_t;

void ckc_lend_stats(ckc_lend_stats_t *s);

/* A capture was placed in borrowed memory (lock held). */
void ckc_lend_placed(uint64_t bytes);
uint64_t ckc_lend_placed_bytes(void);

#endif
