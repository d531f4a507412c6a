/* The peer board, as pure logic (no I/O): one entry per rank of a job on a
 * node, in memory those ranks share, where each rank says what the peer
 * schedules (peer_sched.h) need of it: its device, the device memory it can
 * lend, the bytes it must place off its device, and its links. A rank
 * claims the entry of its local rank number; an entry whose owner died is
 * claimed again. Entries change under a sequence count (odd while written),
 * so a reader never takes half of an update, and a process killed while
 * writing leaves an entry that readers skip until it is claimed again. */
#ifndef CKC_PEERBOARD_H
#define CKC_PEERBOARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "peer_sched.h"

#define PEERBOARD_MAGIC 0x3272656570636b63ull /* "ckcpeer2" */
#define PEERBOARD_JOB 64

typedef struct peer_entry {
	_Atomic uint32_t seq;          /* odd while its owner writes it */
	_Atomic int32_t pid;           /* its owner, 0: free */
	_Atomic int32_t device;        /* CUDA ordinal in its owner, -1: none */
	_Atomic uint64_t bus;          /* its PCI address (peerboard_bus), 0: unknown */
	_Atomic uint64_t spare;        /* bytes it can lend */
	_Atomic uint64_t rem;          /* bytes it must place off its device */
	_Atomic uint64_t host_bw;      /* bytes/s to host memory */
	_Atomic uint64_t bw[CKC_PEER_MAX]; /* bytes/s to the device of each entry's rank */
} peer_entry_t;

typedef struct peer_board {
	_Atomic uint64_t magic;
	_Atomic uint32_t ready;   /* the job's name is written */
	char job[PEERBOARD_JOB];  /* the job the board belongs to */
	peer_entry_t e[CKC_PEER_MAX];
} peer_board_t;

/* What a rank publishes (plain values). */
typedef struct peer_info {
	int device;
	uint64_t bus;
	uint64_t spare, rem;
	double host_bw;
	double bw[CKC_PEER_MAX];
} peer_info_t;

/* Whether a process runs (the caller's test: kill(pid, 0) in a process). */
typedef bool (*peer_alive_fn)(pid_t pid);

/* Makes b (zeroed memory, or a board already made) the board of job.
 * 0, -EEXIST when it belongs to another job, -EPROTO for another layout. */
int peerboard_init(peer_board_t *b, const char *job);

/* Claims entry slot for pid: 0 when it is free, pid's already, or its owner
 * is dead; -EBUSY when a live process holds it; -EINVAL out of range. */
int peerboard_claim(peer_board_t *b, int slot, pid_t pid, peer_alive_fn alive);

/* Gives entry slot back (only its owner's call does anything). */
void peerboard_release(peer_board_t *b, int slot, pid_t pid);

/* Writes pid's entry slot (nothing unless pid owns it). */
void peerboard_publish(peer_board_t *b, int slot, pid_t pid, const peer_info_t *v);

/* Sets one field of pid's entry slot (nothing unless pid owns it): one
 * write under the sequence count, for what changes often. */
void peerboard_set_spare(peer_board_t *b, int slot, pid_t pid, uint64_t spare);
void peerboard_set_rem(peer_board_t *b, int slot, pid_t pid, uint64_t rem);

/* A PCI address "DDDD:BB:DD.F" (as cuDeviceGetPCIBusId writes it) as a
 * number that names a device the same in every process; 0 if it is not
 * one. */
uint64_t peerboard_bus(const char *pci);

/* A consistent copy of entry slot: true, with its owner in *owner; false
 * when it is free or being written (after a few tries). */
bool peerboard_read(peer_board_t *b, int slot, peer_info_t *v, pid_t *owner);

/* The link graph of the live ranks on the board, in units of unit bytes
 * (spare rounded down, remainders up); rank k of g is entry slot_of[k].
 * Returns the number of ranks. */
int peerboard_graph(peer_board_t *b, double unit, peer_alive_fn alive, ckc_peer_graph_t *g,
		    int slot_of[CKC_PEER_MAX]);

#endif
