/* Peer GPUs: the library's side of the node's peer board. A process whose
 * gpu tier has a device joins its node's segment (peerseg.h), publishes
 * what the peer schedules need of it, and at exit computes the schedule
 * the board implies, for the statistics. Nothing is lent: no byte is
 * placed on another rank's device. */
#ifndef CKC_PEER_H
#define CKC_PEER_H

#include <stdint.h>

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

/* At exit: the schedule the board implies, kept for the statistics; the
 * entry given back and the segment left (the last out removes it). Lock
 * held. */
void ckc_peer_finish(void);

/* In a forked child: the parent's segment is the parent's. */
void ckc_peer_atfork_child(void);

/* What the board showed (lock held). */
void ckc_peer_stats(ckc_stats_t *s);

#endif
