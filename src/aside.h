/* Stepping aside: where a new checkpoint is written in copy mode, into the
 * cache or straight to its real path, from the write speed the program saw
 * through each. Pure logic: no threads, no I/O; the engine feeds it one
 * sample per checkpoint closed and asks it before each one opened. */
#ifndef CKC_ASIDE_H
#define CKC_ASIDE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum aside_side { ASIDE_CACHE = 0, ASIDE_HOME = 1 } aside_side_t;

/* Checkpoints smaller than this teach nothing: their time is the open and
 * close, which both sides pay. */
#define ASIDE_MIN_BYTES (1u << 20)
/* Samples of the side chosen before the other is first tried. A process
 * begins on the real path, as the program would run without the library:
 * the cache has to prove itself faster before it takes checkpoints. */
#define ASIDE_WARM 2
/* A side's speed is the median of its last ASIDE_KEEP samples: one write
 * that met a page-cache write-back or a populating thread is an outlier. */
#define ASIDE_KEEP 5
/* The real path is taken when it wrote at least ASIDE_ENTER times the
 * cache's speed, and left when it falls below ASIDE_LEAVE times: what the
 * cache costs the program later (the flush's copy beside its work, the
 * memory it holds) is not in its write time, and a choice that flips on
 * every sample pays for both sides. */
#define ASIDE_ENTER 0.8
#define ASIDE_LEAVE 0.65
/* Checkpoints between two tries of the side not chosen: the first gap,
 * and the largest it grows to while the tries confirm the choice. A try of
 * the real path costs the program nothing it would not pay without the
 * library; a try of the cache, where the real path is the faster, is paid
 * (the cache's memory is new to the process), so those grow rarer. */
#define ASIDE_EVERY_MIN 8
#define ASIDE_EVERY_MAX 64
#define ASIDE_EVERY_MAX_CACHE 256
/* Where the cache is so much slower that tries every
 * ASIDE_EVERY_MAX_CACHE checkpoints would cost the program more than
 * ASIDE_TRY_SHARE of its time on the real path (a small file through the
 * cache 153 us against 33 us straight: 1.4%), the gap grows on, to
 * ASIDE_EVERY_MAX_SLOW at most. A real path that slows down is tried
 * against the cache at once (aside_follow), whatever the gap. */
#define ASIDE_TRY_SHARE 0.005
#define ASIDE_EVERY_MAX_SLOW 4096
typedef struct aside {
	bool on;
	double bw[2];              /* bytes/s: the median of the kept samples; 0: none */
	double keep[2][ASIDE_KEEP];/* the last samples, bytes/s (ring) */
	uint32_t n[2];             /* samples taken (a prior counts as ASIDE_WARM) */
	aside_side_t choice;       /* the side checkpoints go to between tries */
	uint32_t since;            /* checkpoints begun on the chosen side since the last try */
	uint32_t every;            /* checkpoints between tries */
	uint32_t switches;         /* times the choice changed */
	uint32_t tries;            /* checkpoints begun on the side not chosen */
	uint32_t deferred;         /* tries of the cache put off in a row (aside_defer) */
	uint32_t measured[2];      /* samples this process took itself */
	double last[2];            /* bytes/s: the last of those; 0: none */
	uint32_t seq;              /* samples this process took, both sides */
	uint32_t seq_at[2];        /* seq after each side's last sample */
	uint32_t picked[2];        /* checkpoints sent to each side */
	uint32_t noted[2];         /* of those, the ones whose write ended (aside_note) */
	uint64_t cache_bytes;      /* bytes of this process's samples of the cache */
	uint64_t cache_ns;         /* ... and the program's time in them */
	uint32_t capped;           /* this process's samples of the cache that
				      counted for their flush's time */
	bool ends_behind;          /* the program ended with its flushes behind
				      it (aside_drained): a checkpoint cached
				      while they are behind counts for its
				      flush's time (the engine's part) */
} aside_t;

/* Samples of the cache a process must have taken for an exit that waited
 * for nothing to clear ends_behind. */
#define ASIDE_CLEAR_SAMPLES 8

/* A model that begins on the real path; on false: it always answers
 * ASIDE_CACHE and learns nothing. */
void aside_init(aside_t *a, bool on);

/* Starts from what an earlier process learnt (bw 0: that side unknown): a
 * known speed counts as a warm side's samples, so the first checkpoint may
 * try the other side, and both known set the choice; since and every
 * carry the rhythm of the tries on (a process that writes one checkpoint
 * still tries the other side now and then). */
void aside_prior(aside_t *a, double bw_cache, double bw_home, uint32_t since, uint32_t every);

/* aside_prior from both speeds without a rhythm (the small checkpoints'
 * record keeps none): the first try of the side not chosen comes after
 * the gap those speeds settle at (ASIDE_EVERY_MAX, or as many as keep a
 * try of the slower cache within ASIDE_TRY_SHARE), not after
 * ASIDE_EVERY_MIN. Nothing changes unless both are known. */
void aside_prior_settled(aside_t *a, double bw_cache, double bw_home);

/* The side for the next checkpoint (a try of the other side now and then). */
aside_side_t aside_pick(aside_t *a);

/* Checkpoints a try of the cache may be put off by (aside_defer), at
 * most, one after another: a try waits for the cache's room to be at
 * hand, not for ever. */
#define ASIDE_DEFER_MAX 8

/* Instead of aside_pick where it would try the cache while the real path
 * is chosen: the real path once more, the try put off to the next
 * checkpoint; false (nothing changed) once ASIDE_DEFER_MAX were put off in
 * a row, and the caller picks. */
bool aside_defer(aside_t *a);

/* The side the next aside_pick will answer, changing nothing. */
aside_side_t aside_peek(const aside_t *a);

/* Checkpoints sent to side s whose write has not ended yet. */
uint32_t aside_open(const aside_t *a, aside_side_t s);

/* Whether the next checkpoint is a try of the cache while checkpoints go
 * to the real path, and no try is under way. */
bool aside_try_next(const aside_t *a);

/* aside_try_next, or a process on the real path that has sent its warm-up
 * checkpoints there and never tried the cache (its first try comes with
 * the next noted sample): the cache's room for a try is made ready now,
 * while those are written. */
bool aside_try_soon(const aside_t *a);

/* One checkpoint of bytes written in ns on side s (the program's time in
 * its open, writes and close), which aside_pick sent there. Returns true
 * when the choice changed. */
bool aside_note(aside_t *a, aside_side_t s, uint64_t bytes, uint64_t ns);
/* The same for the first bytes of a checkpoint, of any size, whose speed
 * is the sample (many small writes: the rate, not the file's metadata
 * operations, makes it). */
bool aside_note_rate(aside_t *a, aside_side_t s, uint64_t bytes, uint64_t ns);

/* A checkpoint written into the cache (as aside_note) that met it
 * growing into memory new to the process, before its room was populated
 * (on a guest with shadow page tables, 1 MiB took 0.3-3.3 ms there, 0.08
 * ms into room at hand): where checkpoints go to the cache it is not a
 * sample of its speed (its time still counts for aside_drained). The
 * growth ends where the cache holds the program's checkpoints or is full,
 * and the real path pays the same first touch for new pages of its own. A
 * try of the cache from the real path counts as aside_note. */
bool aside_note_growing(aside_t *a, uint64_t bytes, uint64_t ns);

/* The process ends: its exit waited drain_ns for the flushes of what the
 * cache held. Where checkpoints went to the cache, the cache's speed that
 * the next processes start from (ckc_aside_save) is that of its samples
 * with the drain added to their time, if lower: a program that wrote its
 * checkpoints into the cache faster than they were published, and then
 * ended, paid the rest at its exit (a Python loop of np.save, then
 * exit), where one that went on working published them meanwhile (a
 * stencil that restores its history) and pays nothing. It also sets
 * ends_behind where the wait made the cache's time a fifth longer or
 * more, and clears it where the process took at least
 * ASIDE_CLEAR_SAMPLES samples of the cache, none of them capped at its
 * flush's time (capped), and its exit waited for no more than that: a
 * program known to end behind its flushes gives the cache only the
 * checkpoints whose flushes keep up (so it takes too few for its exit to
 * say otherwise), one that publishes its history while it works clears
 * the mark. */
void aside_drained(aside_t *a, uint64_t drain_ns);

/* The program waited ns for the publication of a checkpoint of bytes that
 * went to side s and was sampled there (a listing of its folder that
 * published it, a sync of it after its close): that time is added to the
 * side's last sample, as the program paid it for that checkpoint, and the
 * choice follows. Whether it changed. */
bool aside_charge(aside_t *a, aside_side_t s, uint64_t bytes, uint64_t ns);

/* One small checkpoint that took the program ns on side s, from its open
 * to its close (the model of small checkpoints, whose speed is files per
 * second: their time is metadata operations, not bytes). Returns true
 * when the choice changed. */
bool aside_note_time(aside_t *a, aside_side_t s, uint64_t ns);

#endif
