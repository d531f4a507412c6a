/* The node-local segment that holds the peer board (peerboard.h): its
 * name, its creation, initialisation and removal, and the recognition of
 * a segment that every process using it left without removing it (all of
 * them killed). What lives in it is peerboard's. */
#ifndef CKC_PEERSEG_H
#define CKC_PEERSEG_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "peerboard.h"

/* Where the segments are made: the node's shared-memory file system. */
#define CKC_PEERSEG_DIR "/dev/shm"
/* The name's start; the user's id, the job and the node follow. */
#define CKC_PEERSEG_PREFIX "ckptcache-peer-"

typedef struct ckc_peerseg {
	int fd;               /* holds a shared flock while attached; -1: closed */
	peer_board_t *board;  /* mapped, sizeof(peer_board_t) */
	int slot;             /* the entry claimed, -1: none */
	pid_t pid;            /* the process that claimed it */
	bool initialised;     /* this process (re)initialised the segment */
	bool was_stale;       /* ... because it was left by processes that all died */
	bool reclaimed;       /* the entry's former owner had died without giving it back */
	char path[PATH_MAX];
} ckc_peerseg_t;

/* dir/ckptcache-peer-UID-JOB-NODE. Returns 0, -EINVAL when job or node is
 * empty, -ENAMETOOLONG. */
int ckc_peerseg_path(char *out, size_t len, const char *dir, const char *job, const char *node);

/* Joins the segment at path (creating it, mode 0600, when there is none)
 * for job, and claims its entry slot. A segment that no process holds is
 * initialised again, whatever it holds. Waits at most wait_s for a
 * process that is initialising it. Returns 0, or -errno: -ETIMEDOUT,
 * -EBUSY (a live process holds the entry), -EPERM (the file is not this
 * user's private file), -EEXIST (another job's board under that name). */
int ckc_peerseg_open(ckc_peerseg_t *s, const char *path, const char *job, int slot, double wait_s);

/* Gives the entry back and leaves; the last process out removes the
 * segment. Returns 1 when it removed it, 0 when others still hold it. */
int ckc_peerseg_close(ckc_peerseg_t *s);

/* In a forked child: drops the parent's mapping and descriptor without
 * touching the entry or the lock (both the parent's). */
void ckc_peerseg_forget(ckc_peerseg_t *s);

/* Whether a process runs (kill(pid, 0)). */
bool ckc_peerseg_alive(pid_t pid);

typedef void (*ckc_peerseg_fn)(const char *path, bool removed, void *ctx);

/* The segments of this user in dir that no process holds and whose board
 * names no live process (left by jobs whose processes all died; a joiner
 * turning its exclusive lock into a shared one holds none for a moment):
 * fn for each, removed first when drop.
 * Returns how many. */
int ckc_peerseg_sweep(const char *dir, bool drop, ckc_peerseg_fn fn, void *ctx);

#endif
