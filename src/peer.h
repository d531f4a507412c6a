/* Peer GPUs: the library's side of the node's peer board. A process whose
 * gpu tier has a device joins its node's segment (peerseg.h), publishes
 * what the peer schedules need of it, lends and borrows device memory
 * through peer_lend.h as the schedule says, and at exit computes the
 * schedule the board implies, for the statistics. */
#ifndef CKC_PEER_H
#define CKC_PEER_H

#include <stdint.h>

#include "peer_lend.h"
#include "stats.h"

/* The gpu tier has its first region, on device: joins the segment when
 * CKPTCACHE_PEER (or, unset, the machine) asks for it. Lock not held. */
void ckc_peer_attach(int device);

/* The gpu tier's free room changed (an allocation, a free, its mapped
 * size): one write to the board when it differs. Lock held. */
void ckc_peer_room(void);

/* A capture of len bytes found no room in the gpu tier (len > 0), or one
 * found room (0). Lock held. */
void ckc_peer_remainder(uint64_t len);

/* At exit: the schedule the board implies, kept for the statistics. Lock
 * held. */
void ckc_peer_finish(void);
/* Then, without the engine lock: the entry given back and the segment
 * left (the last out removes it). */
void ckc_peer_release(void);

/* Where a remainder of len bytes of this process goes, as the schedule
 * over the board now says: the peers' entries, their devices' ordinals
 * here and the bytes; how many parts (at most max). */
int ckc_peer_plan_parts(uint64_t len, ckc_lend_part_t *parts, int max);

/* In a forked child: the parent's segment is the parent's. */
void ckc_peer_atfork_child(void);

/* What the board showed (lock held). */
void ckc_peer_stats(ckc_stats_t *s);

#endif
