/* The node registry's table, as pure logic (no I/O): 64-bit slots in memory
 * that the processes of one user on one node share, each saying that a
 * process holds bytes a real file lacks: 40 bits of the hash of the file's
 * canonical path, then 24 bits of the process id. Lock-free: every change
 * is one compare-and-swap of one slot, so a process killed at any moment
 * leaves the table whole (its slots stay until found dead). A key's place
 * is one of the first n - 1 slots, and its values lie from there on, never
 * in the last slot and never past it: that slot stays empty, and freed
 * slots empty again from it backwards however full the table once was. */
#ifndef CKC_NODETAB_H
#define CKC_NODETAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NODETAB_EMPTY 0u /* never used: a search stops here */
#define NODETAB_FREED 1u /* used before: a search goes on */
/* freed, and being emptied (nodetab_del): a search goes on, an addition
 * may take it, and one placed after it is not reachable through it */
#define NODETAB_EMPTYING 2u
/* A search looks at most this many slots from a key's first one. */
#define NODETAB_PROBE 4096u

typedef _Atomic uint64_t nodetab_slot_t;

/* The key of a canonical path (40 bits, never 0). */
uint64_t nodetab_key(const char *path);

/* The slot value saying that pid holds key; its parts. */
uint64_t nodetab_val(uint64_t key, pid_t pid);
uint64_t nodetab_val_key(uint64_t val);
pid_t nodetab_val_pid(uint64_t val);

/* Puts val in a free slot of t (n slots). 0, or -ENOSPC when none is free
 * within NODETAB_PROBE slots of its key's place and before the last. */
int nodetab_add(nodetab_slot_t *t, size_t n, uint64_t val);

/* Frees one slot holding val (a value may be there more than once: one per
 * version the process holds). 0, or -ENOENT. A freed slot followed by an
 * empty one becomes empty, and so do the freed ones before it: freed
 * slots do not pile up where searches would walk them. */
int nodetab_del(nodetab_slot_t *t, size_t n, uint64_t val);

/* Copies up to max values held for key into vals; returns how many were
 * found (possibly more than max). *probed (unless NULL): the slots
 * looked at. */
size_t nodetab_find(nodetab_slot_t *t, size_t n, uint64_t key, uint64_t *vals, size_t max, size_t *probed);

/* nodetab_add, nodetab_del and nodetab_find within the first `within`
 * slots from a key's place (fewer than NODETAB_PROBE): a table whose
 * every value was added within that many finds them all there, and its
 * searches stay that short however full it is. */
int nodetab_add_within(nodetab_slot_t *t, size_t n, uint64_t val, size_t within);
int nodetab_del_within(nodetab_slot_t *t, size_t n, uint64_t val, size_t within);
size_t nodetab_find_within(nodetab_slot_t *t, size_t n, uint64_t key, uint64_t *vals, size_t max, size_t *probed,
			   size_t within);

/* Empties every freed slot that nodetab_del would have (a table left full
 * of freed slots by a version that kept them); returns how many. */
size_t nodetab_compact(nodetab_slot_t *t, size_t n);

/* Copies up to max distinct process ids that hold something in t into
 * pids; returns how many (a walk of the whole table). */
size_t nodetab_pids(nodetab_slot_t *t, size_t n, pid_t *pids, size_t max);

/* Frees every slot whose process alive() says is gone; returns how many. */
size_t nodetab_sweep(nodetab_slot_t *t, size_t n, bool (*alive)(pid_t pid));

/* For tests, called where set: by an addition after its look at a slot
 * and before it tries to take it; by a removal between its look at the
 * slot after a freed one and the freed one's emptying. */
extern void (*nodetab_add_pause)(size_t slot);
extern void (*nodetab_reclaim_pause)(void);

#endif
