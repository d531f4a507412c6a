/* Counters of the engine, per tier and global, and their JSON summary.
 * Every counter is updated under the engine lock. */
#ifndef CKC_STATS_H
#define CKC_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ktouch.h"
#include "peer_lend.h"

#define CKC_MAX_TIERS 4
/* Devices of one process the gpu tier keeps a region on. */
#define CKC_GPU_MAXDEV 16
/* Prefetch distance at each read: 0..7 exact, then 8-15, 16-31, 32-63,
 * 64 and more, and reads of checkpoints that were not in the queue. */
#define CKC_DIST_BUCKETS 13

typedef struct ckc_tier_stats {
	uint64_t capacity;
	uint64_t put_ops, put_bytes;           /* program writes landing here */
	uint64_t read_ops, read_bytes;         /* program read calls served here */
	uint64_t ckpt_reads;                   /* checkpoints read back, each counted at the
						  tier that served its first read */
	uint64_t hits, misses;                 /* reads served here / from below */
	uint64_t flush_ops, flush_bytes;       /* copies flushed out of this tier */
	uint64_t flush_errors;
	uint64_t prefetch_ops, prefetch_bytes; /* copies promoted into this tier */
	uint64_t prefetch_cached;              /* checkpoints not promoted: the page cache
						  held their published real files whole */
	uint64_t evictions, evicted_bytes;
	uint64_t bypasses;                     /* objects sent past this tier */
	uint64_t waits;                        /* placements that waited for room */
	double wait_s;
	double flush_bw;                       /* bytes/s out of this tier (moving average) */
	uint64_t populated_bytes;              /* host: memory populated now */
	uint64_t given_back_bytes;             /* host: memory given back while idle */
	uint64_t peak_used_bytes;              /* the most bytes the tier held at once */
	uint64_t peak_populated_bytes;         /* host: the most memory populated at once */
} ckc_tier_stats_t;

#define CKC_CUDA_KINDS 16
#define CKC_CUDA_PATHS 3

typedef struct ckc_stats {
	int ntier;
	const char *tier_name[CKC_MAX_TIERS];
	ckc_tier_stats_t tier[CKC_MAX_TIERS];
	uint64_t objects_written, objects_opened_read, objects_consumed;
	uint64_t objects_passed_read;          /* of those opened for read: read from the real file directly */
	uint64_t objects_retired, rescued, lost;
	uint64_t reads_waited;                 /* reads that waited for a prefetch */
	double read_wait_s;
	double drain_s;                        /* at exit: waiting for the flushes to finish */
	/* copy mode's choice between the cache and the real paths (aside.h) */
	bool aside_on;
	uint64_t aside_objects;                /* checkpoints written straight to their real paths */
	uint64_t aside_moved;                  /* ...of those, moved into the cache for their small writes */
	uint32_t aside_tries, aside_switches;
	double aside_bw_cache, aside_bw_home;  /* bytes/s the program saw; 0: not measured */
	bool aside_home;                       /* the choice at the end */
	/* the same for small checkpoints, from the program's time per file */
	bool small_home;                       /* the choice at the end */
	uint32_t small_samples[2];             /* files timed: [0] cache, [1] real path */
	double small_us[2];                    /* median us per file; 0: not measured */
	uint64_t dist_hist[CKC_DIST_BUCKETS];
	/* CUDA driver calls the wrappers saw, by kind, and the entry points
	 * through which the wrappers were handed out */
	bool cuda_seen;
	int cuda_nkinds, cuda_npaths;
	uint64_t cuda_calls[CKC_CUDA_KINDS];
	const char *cuda_kind_name[CKC_CUDA_KINDS];
	uint64_t cuda_hooked[CKC_CUDA_PATHS];
	const char *cuda_path_name[CKC_CUDA_PATHS];
	/* the gpu tier and device capture */
	bool gpu_present;
	int gpu_device;                 /* the first region's */
	int gpu_ndev, gpu_devs[CKC_GPU_MAXDEV];
	uint64_t gpu_arena_bytes, gpu_mapped_bytes, gpu_released_bytes, gpu_releases;
	bool host_pinned;
	/* peer GPUs (peer.h): what the node's board showed at exit; peer_mode
	 * NULL when this process never joined it */
	const char *peer_mode;
	int peer_slot, peer_ranks, peer_ranks_max;
	bool peer_was_stale, peer_reclaimed, peer_removed;
	uint64_t peer_rem_bytes, peer_to_peers_bytes, peer_to_host_bytes;
	double peer_local_s, peer_greedy_s, peer_maxflow_s;
	bool peer_lending;
	ckc_lend_stats_t peer_lend;
	uint64_t peer_placed_bytes, gpu_borrowed_bytes;
	/* program reads copied in lanes (lanes.h) */
	int lane_helpers;
	uint64_t lane_copies, lane_bytes;
	bool copy_movsb;        /* large copies by `rep movsb` (copy.h) */
	/* the kernel's early touch of program buffers (ktouch.h) */
	ckc_ktouch_stats_t ktouch;
	bool capture_seen;
	uint64_t cap_captured, cap_captured_bytes, cap_attached, cap_copied_in;
	uint64_t cap_restored_d2d, cap_filled, cap_dropped, cap_passed, cap_read_refs;
	uint64_t cap_deferred; /* synchronous captures that returned before their device copy ended */
	bool cap_pageable;     /* pageable host memory may be owed (the program's free is seen) */
	uint64_t cap_huge_pinned; /* the program's pinned allocations made of huge pages */
	/* seconds the program spent in captured copies, device-copy restores,
	 * and tagged writes and reads that used owed ranges */
	double cap_capture_s, cap_restore_s, cap_write_s, cap_read_s, cap_fill_s;
	/* where a tagged read's time goes under device capture: the engine's
	 * lookup of the gpu copy, the owing of the pages; a restore's waits */
	double cap_read_engine_s, cap_read_owe_s, cap_restore_wait_s;
} ckc_stats_t;

/* Bucket of a prefetch distance (far = not queued). */
int ckc_stats_dist_bucket(uint64_t dist, int far);

/* Writes s as one JSON object to f. Returns 0 or -errno. */
int ckc_stats_write_json(const ckc_stats_t *s, FILE *f);

#endif
