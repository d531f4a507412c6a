/* The engine's data: objects and their copies in each tier (places,
 * extents), the tiers, the flush edges, and the engine itself with its one
 * lock and its conditions (one per predicate). The functions over them are
 * engine_int.h's. */
#ifndef CKC_ENGINE_TYPES_H
#define CKC_ENGINE_TYPES_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "arena.h"
#include "aside.h"
#include "ckc.h"
#include "conf.h"
#include "evict.h"
#include "hintfile.h"
#include "io.h"
#include "lifecycle.h"
#include "lockrank.h"
#include "queue.h"
#include "stats.h"
#include "tier.h"

#define CKC_ALIGN 4096u
#define CKC_PREDICT_SLOTS 4
/* Smallest first reservation when nothing is known about sizes yet. */
#define CKC_MIN_RESERVE (1u << 20)

typedef enum tier_kind { TIER_GPU, TIER_HOST, TIER_SSD, TIER_HOME } tier_kind_t;

/* File bytes follow one another from extent to extent. An extent normally
 * starts on an aligned arena offset and holds a whole number of aligned
 * blocks; one attached from a device capture (gpu tier) may start inside its
 * first block and end anywhere: its arena fragment is the aligned span. */
typedef struct ckc_ext {
	uint64_t aoff; /* arena offset of its first file byte */
	uint64_t alen; /* file bytes it holds (room for them, for the last one) */
} ckc_ext_t;

/* One object's copy in one bounded tier. */
typedef struct ckc_place {
	lc_state_t state;
	int pins;           /* transfers in or out of this copy running unlocked */
	int nexts, capexts;
	ckc_ext_t *ext;     /* in file order */
	uint64_t seq_in;    /* FIFO age */
	uint64_t seq_use;   /* LRU age */
} ckc_place_t;

typedef struct ckc_obj ckc_obj_t;

/* What a real path held: nothing, or a file's identity and change marks.
 * A version remembers the file it is to replace (taken when it starts, and
 * after each of its publications), so that a file changed behind the
 * cache's back is noticed before it would be overwritten. */
typedef struct ckc_fid {
	bool known;          /* false: nothing recorded (no check) */
	bool exists;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
} ckc_fid_t;

/* Internal result of a publication that found the real file changed since
 * the version's record of it: the newer file was kept (flusher.c). */
#define CKC_CHANGED (-EUCLEAN)

struct ckc_obj {
	char *key;           /* canonical absolute path */
	uint64_t version;
	ckc_obj_t *hnext;    /* object map chain */
	int refs;            /* handles and transfers; freed at 0 once retired */
	int readers;         /* reading handles open: a retired version keeps its
				copies for them, as an unlinked file its blocks */
	int writers;         /* writing handles open: the same for them (a file
				unlinked while its writer still uses it) */
	ckc_obj_t *wnext, *wprev; /* in ckc_eng.writing while writers > 0 */
	int keep_fd;         /* retired with readers while its real file held it:
				that file, for them, or -1 */
	mode_t mode;

	uint64_t size;       /* bytes written (end of the furthest write) */
	uint64_t writes;     /* writes and truncations so far (a publication's
				snapshot is whole if none came since it began) */
	bool complete;       /* its writer closed it */
	bool home_snap;      /* published while open (an fsync): the real file
				holds its bytes as of home_writes writes, durable
				if home_snap_durable; its close then publishes
				nothing if none came since */
	bool home_snap_durable;
	uint64_t home_writes;
	bool retired;        /* a newer version or an unlink replaced it */
	bool unnamed;        /* unlinked, or renamed over: no name is its (a
				newer version of its path, or another
				program's change, left it the file there) */
	bool consumed;       /* read back whole at least once */
	bool from_home;      /* imported from a file of an earlier run */
	struct timespec mtime;
	struct timespec stamped; /* the cache's last stamp of it (eng_touch_mtime) */
	bool stamp_kernel;       /* that stamp is the fine clock's, for the kernel's (eng_stamp_kernel) */
	bool mtime_seen;     /* stat looked at it since it last changed */
	ckc_attr_t attr;     /* set by the program; given to the real file */

	int wlevel;          /* tier receiving the writer's bytes */
	bool aside_home;     /* written straight to its real path by the choice of
				ckc_eng.aside (a sample of the real path's speed) */
	bool aside_sample;   /* its write time is a sample for ckc_eng.aside */
	int aside_level;     /* aside_home: the cache tier it was taken from */
	uint64_t promote_at; /* ...its writes when its move into it is looked at next (0: PROMOTE_EVERY) */
	bool grew;           /* its write took host tier room not populated before */
	bool aside_cached;   /* ...of the cache, taken: a wait of the program's
				for its publication is added to it */
	uint64_t write_ns;   /* the program's time in its open, writes and close */
	uint64_t wrote_at;   /* when it was opened or last written (ckc_now_ns) */
	uint64_t opened_at;  /* when this version was opened for writing (its only writer handle's open) */
	int room_waits;      /* writes of it waiting for room at its real path
				(ckc_handle_room_wait): not left unwritten */
	bool passed_read;    /* opened for reading at its real path (aside_home) */
	bool migrating;      /* its bytes are moving to a lower tier */
	int home_fd;         /* write-through at home: the temporary file */
	int home_reads;      /* ...reads of it by its writers under way */
	char *home_tmp;
	bool home_live;      /* handed over at the end: home_fd is the real file */
	bool home_dir_synced; /* home_live: its folder synced since it was named there */
	bool id_excl;        /* created exclusively: stat may make id_fd */
	int id_fd;           /* the unnamed file its first publication is to fill
				and name, made when stat asked for the identity
				of a real file not there yet (eng_ident), or -1 */
	char *id_tmp;        /* ... its temporary name, where it has one */
	bool id_lent;        /* ... taken by a publication under way (eng_id_take) */
	bool pub_own_temp;   /* a publication under way fills a file of its own */
	bool id_known;       /* id_dev/id_ino: id_fd's, or home_fd's before it is
				named (the inode the real file will have) */
	dev_t id_dev;
	ino_t id_ino;
	bool home_dev_known; /* home_dev is the file system of its real path */
	dev_t home_dev;

	ckc_place_t place[CKC_MAX_TIERS];

	bool at_home;        /* the real path holds this version (eng_set_home) */
	bool mapped;         /* in the object map (eng_map_insert) */
	bool durable;        /* ... and it was fsync'ed */
	ckc_fid_t base;      /* the real file this version replaces, or published */
	/* base is a file this version replaces by name (the program renamed
	 * the version onto it): never written in place, since a descriptor
	 * another program keeps of it must go on reading its own bytes */
	bool base_by_name;
	bool handed;         /* handed over to the real file (ckc_handoff) */
	bool handing;        /* a hand-over is publishing its bytes: writes wait */
	int writing;         /* writes through its handles in progress */
	bool announced;      /* in the node registry (ckc_node_hook) */
	bool home_busy;      /* a transfer to the real path is running */
	char *rescue;        /* file holding the bytes after a failed flush */
	bool rescuing;       /* its rescue file is being written (rescue_file) */

	int flush_edge;      /* edge whose queue holds it, or -1 */
	bool flushing;       /* its flush is running */
	bool flush_cancel;   /* the running flush must be discarded */
	uint64_t flush_done; /* bytes of the running flush so far */
	uint64_t short_t0;   /* since when its publications fail short (flusher.c), or 0 */
	bool short_said;     /* that failure was reported (once: other processes' asks try again) */
	double flush_eta;    /* estimated seconds until its flush completes */
	ckc_obj_t *fq_next;  /* edge queue link */

	uint64_t pc_until;   /* its real file was in the page cache: the prefetcher
				leaves it there until this time (ns) */
	bool pc_counted;     /* ... and counted it (prefetch_cached) */

	ckc_ref_t *gref;     /* host ranges owed from its gpu copy */
	bool capture;        /* an anonymous device capture, not yet a file */
	int gdev1;           /* 1 + the device it came from (0: none known) */
	int greg1;           /* 1 + the gpu region a capture is placed in (0: its device's) */
};

/* A host range the interposer owes from an object's gpu copy: bytes
 * [base, base + length) of the object. The copy cannot be evicted while a
 * reference exists. */
struct ckc_ref {
	ckc_obj_t *o;
	uint64_t base;
	int refs;
	ckc_ref_t *next;     /* o's list */
};

/* The gpu tier's device memory: one address range holds a region (slot)
 * per device the program checkpoints from, each with its own physical
 * chunks, context, streams and mapping thread. A region's unmapped part is
 * covered in the arena by a fence extent (owner &ckc_gpu_fence), so every
 * gap lies within the mapped part of one region. */
typedef struct ckc_gpu_dev {
	void *ctx;           /* CUcontext of the program's first capture there */
	int device;
	bool usable, retained;
	uint64_t off;        /* the region's offset in the arena */
	uint64_t reserved, ceiling; /* bytes it may map; growth stops at ceiling */
	size_t nchunk, nmapped, nmapped_max;
	uint64_t *handle;    /* per chunk */
	int lender1;         /* 1 + the peer board entry whose device lent the chunks (0: own) */
	int home;            /* lent: the ordinal of the device that holds the chunks */
	bool closing;        /* lent: nothing more is placed in it; it goes back once empty */
	pthread_t mapper;
	bool mapper_running;
	bool mapper_idle;    /* its mapping thread took its last step (lock) */
	bool unmapping;      /* a cut unmaps chunks past nmapped (lock dropped): none is mapped meanwhile */
	uint64_t released_bytes, releases;
} ckc_gpu_dev_t;

typedef struct ckc_gpu {
	bool tried, usable, gone; /* usable: some region is */
	atomic_bool stop;    /* the mapping threads must end (read unlocked) */
	atomic_bool pinning; /* the host tier's pinning has been started */
	uint64_t base;       /* reserved virtual range: nslot slots */
	uint64_t span, slot, chunk;
	int nslot, ndev;     /* slots reserved, regions set up (in that order) */
	ckc_gpu_dev_t dev[CKC_GPU_MAXDEV];
} ckc_gpu_t;

/* The owner of the fences. */
extern char ckc_gpu_fence;

typedef struct ckc_tier {
	const char *name;
	tier_kind_t kind;
	const ckc_tier_ops_t *ops;  /* tier.h: how the engine reaches it */
	int level;
	arena_t arena;
	ckc_tier_stats_t st;

	/* host: one anonymous mapping, populated by a background thread:
	 * whole at start (populated grows from 0 to the capacity), or, when it
	 * grows with use (grow), piece by piece ahead of the allocations, and
	 * given back when idle (populated: the bytes of pieces populated now) */
	char *base;
	pthread_t toucher;
	bool toucher_running, toucher_tried; /* (grow_mx) */
	atomic_uint_fast64_t populated;
	atomic_uint_fast64_t populated_peak; /* the most populated at once */
	atomic_bool toucher_stop;
	bool grow;
	bool keep;                     /* grow, under a gpu tier: nothing is given back */
	_Atomic uint8_t *piece;        /* grow: per CKC_HOST_PIECE, CKC_PIECE_USED when populated
					  or allocated since it was last given back */
	size_t npiece;
	atomic_bool huge;              /* grow: huge pages advised (from the first checkpoint
					  of more than CKC_HOST_HUGE_FROM bytes) */
	atomic_uint_fast64_t use_seq;  /* grow: allocations in the tier so far */
	atomic_uint_fast64_t planned_seq; /* grow: use_seq when the toucher last caught up */
	atomic_bool expected;          /* grow: a checkpoint comes, though none came yet
					  (ckc_host_expect) */
	atomic_bool caught_up;         /* grow: the toucher has nothing left to populate */
	ckc_mutex_t grow_mx;           /* the toucher's wake-ups */
	pthread_cond_t grow_cv;        /* work for the toucher: a new use, or stop */
	pthread_cond_t caught_cv;      /* caught_up became true, or stop */

	atomic_uint_fast64_t pinned_bytes; /* registered with CUDA, from base (device capture,
					     a tier populated whole) */
	atomic_bool pinned_once;

	/* gpu: spare device memory */
	ckc_gpu_t *gpu;

	/* ssd: one sparse file of this process, on file system dev */
	int fd;
	atomic_bool full; /* a write found its file system full: no new copies */
	bool direct;
	dev_t dev;
	char path[PATH_MAX];
} ckc_tier_t;

/* The flusher of the edge from tier `level` to the tier below it. */
typedef struct ckc_edge {
	int level;
	ckc_obj_t *head, *tail; /* FIFO queue */
	ckc_obj_t *current;     /* the object being flushed by the edge's thread */
	int helping;            /* flushes the ending program's thread runs beside it */
	uint32_t queued;        /* objects in the queue */
	pthread_t thread;
	bool running;
	pthread_cond_t cv;
	double bw;              /* measured bytes/s, moving average */
	uint64_t retry_ns;      /* the wait before a publication that failed short is tried again */
} ckc_edge_t;

/* Whether an edge has a flush queued or running (lock held). */
static inline bool ckc_edge_busy(const ckc_edge_t *e)
{
	return e->head || e->current || e->helping;
}

/* The engine's conditions, one per predicate; a waiter for several of an
 * object's flags waits on the condition of the first one still set
 * (eng_wait_idle), so each flag's end wakes only its own waiters. */
typedef enum eng_cond {
	EC_MOVED,    /* an object's move between tiers ended: migrating went false */
	EC_HOME,     /* an object's real file is no longer being changed: home_busy
			went false, or a commit of its real path ended (ckc_committing) */
	EC_HANDED,   /* an object's hand-over to its real file ended: handing went false */
	EC_FLUSHED,  /* a flush ended (flushing went false) or an object left a flush
			queue: the queues (edge head, current) may be empty now */
	EC_WRITES,   /* an object's writes in flight ended: writing went to 0 */
	EC_PINS,     /* a place's pins went down */
	EC_LANDED,   /* a prefetch ended: its object's top place left READ_IN_PROGRESS */
	EC_ROOM,     /* a tier's room, or what its eviction weighs, changed: a place
			was freed or became evictable, an object retired, was consumed
			or closed, a hint was pushed, a gpu region was mapped or stopped */
	EC_FINISH,   /* ckc_finish ended (finish_state 2) */
	EC_PREFETCH, /* the prefetcher's alone: prefetch_gen changed, or stop */
	EC_N
} eng_cond_t;

typedef struct ckc_engine {
	ckc_mutex_t lock;       /* guards everything below; never held during I/O */
	/* One condition per predicate (eng_cond_t), each broadcast where its
	 * predicate may have turned, the lock held; eng_wake_all at a stop. */
	pthread_cond_t cv[EC_N];
	bool active;
	bool stopping;
	bool draining;          /* the program ends: flushes go home, new files pass through */
	atomic_bool fds_short;  /* a descriptor was given up for a publication (eng_spare_fd) */
	uint64_t drain_t0;      /* when draining began */
	uint64_t flush_ok_ns;   /* when a publication last succeeded */
	int finish_state;       /* ckc_finish: 0 not yet, 1 running, 2 done */
	ckc_config_t cfg;

	int ntier;              /* bounded tiers, then home */
	ckc_tier_t tier[CKC_MAX_TIERS];
	ckc_edge_t edge[CKC_MAX_TIERS];

	ckc_obj_t *writing;     /* the objects with writing handles open (wnext) */
	ckc_obj_t **map;        /* key -> current version */
	size_t map_cap, nobj;
	uint64_t next_version;
	uint64_t seq;           /* FIFO/LRU clock */

	uint64_t recent[CKC_PREDICT_SLOTS];
	int nrecent;

	aside_t aside;          /* copy mode: the cache or the real path for new checkpoints */
	bool aside_said;        /* the first step aside was reported */
	/* the version whose write was each side's last sample: a rename of
	 * it (the atomic-replace idiom) adds its time to that sample */
	uint64_t aside_last[2];
	bool small_said;        /* the first small checkpoint stepped aside was reported */
	/* copy mode: the cache or the real path for small checkpoints, from
	 * the program's time per file through each (ckc_small_note) */
	aside_t aside_small;
	bool small_model_said;  /* its first choice of the real paths was reported */
	/* the paths (by hash) whose last open went straight to the real file,
	 * and until when another open of them does too (engine_write.c) */
	struct {
		uint64_t hash, until_ns, since_ns;
	} straight[16];

	/* The names (and versions) of checkpoints that may be owed to their
	 * real paths (closed, or renamed, and not published yet): what a
	 * folder's listing looks at instead of the whole map. An entry goes
	 * when its version is no longer current or no longer owed. */
	struct eng_owed {
		char *key;
		uint64_t version;
	} *owed;
	size_t nowed, owed_cap;

	hint_queue_t *hq;
	hint_reader_t hints;
	bool hints_open;
	bool hints_said; /* a missing hint file was reported */
	uint64_t hints_bad; /* malformed lines met */
	uint64_t hints_next_try_ns;
	off_t hints_last_off;
	uint64_t hints_quiet_since;
	bool prefetch_started;
	pthread_t prefetcher;
	bool prefetcher_running;
	uint64_t prefetch_gen;  /* bumped when room may have appeared */
	bool prefetch_wants_room; /* the last pass stopped for want of room */

	int id_held;            /* objects' id_fd files open */

	int trace_fd;
	uint64_t t0_ns;
	ckc_stats_t st;
} ckc_engine_t;

extern ckc_engine_t ckc_eng;

#endif
