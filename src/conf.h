/* Configuration from the environment (CKPTCACHE_*), validated. ckptcache(7)
 * and the README are the reference for every variable and default. */
#ifndef CKC_CONF_H
#define CKC_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ckc_order { CKC_ORDER_NONE, CKC_ORDER_REVERSE, CKC_ORDER_SEQUENTIAL } ckc_order_t;
typedef enum ckc_capture { CKC_CAPTURE_COPY, CKC_CAPTURE_DEVICE } ckc_capture_t;
typedef enum ckc_persist { CKC_PERSIST_ALWAYS, CKC_PERSIST_UNCONSUMED, CKC_PERSIST_NEVER } ckc_persist_t;
typedef enum ckc_eviction { CKC_EVICT_SCORE, CKC_EVICT_FIFO, CKC_EVICT_LRU } ckc_eviction_t;
typedef enum ckc_prefetch { CKC_PREFETCH_AUTO, CKC_PREFETCH_EAGER, CKC_PREFETCH_OFF } ckc_prefetch_t;
/* CKPTCACHE_PEER; auto (unset) becomes maxflow where peer access exists. */
typedef enum ckc_peer { CKC_PEER_AUTO, CKC_PEER_OFF, CKC_PEER_GREEDY, CKC_PEER_MAXFLOW } ckc_peer_t;

/* Longest job and node names kept (the peer segment's name holds both). */
#define CKC_JOB_NAME 48

/* Where a size came from: given in bytes, a percentage of something, or
 * the default. */
enum { CKC_SIZE_BYTES, CKC_SIZE_PERCENT, CKC_SIZE_DEFAULT };

typedef struct ckc_config {
	bool enabled;          /* false: the library passes everything through */
	bool strict;           /* CKPTCACHE_STRICT=1 */
	char *paths;           /* CKPTCACHE_PATHS as given (colon-separated globs) */
	ckc_order_t order;
	char *hints;           /* hint file, or NULL */
	ckc_capture_t capture;
	uint64_t gpu_cache;    /* bytes; used when gpu_cache_pct < 0 */
	double gpu_cache_pct;  /* percent of free device memory, or -1 */
	uint64_t capture_min;  /* smallest device-to-host copy captured */
	bool capture_pageable_only; /* never capture into pinned host memory */
	uint64_t host_cache;   /* bytes, resolved; 0 disables the tier */
	int host_cache_from;   /* CKC_SIZE_*: how host_cache was found */
	double host_cache_pct; /* CKC_SIZE_PERCENT: the percentage */
	uint64_t ssd_cache;    /* bytes, resolved; 0 disables the tier */
	char *ssd_dir;         /* node-local directory for the ssd tier */
	char *rescue_dir;      /* where a failed home flush leaves its bytes */
	ckc_persist_t persist;
	ckc_eviction_t eviction;
	ckc_prefetch_t prefetch;
	bool step_aside;       /* CKPTCACHE_STEP_ASIDE=auto: copy mode may write a checkpoint
				  straight to its real path where that is as fast (aside.h) */
	char *stats;           /* JSON summary at exit, or NULL */
	char *trace;           /* one line per operation, or NULL */
	double term_wait_s;    /* the most a SIGTERM/SIGINT/SIGABRT waits for the drain */
	int lanes;             /* threads that copy one large read (lanes.h); 0: by the CPUs */
	int ktouch;            /* CKPTCACHE_KERNEL_TOUCH: CKC_KTOUCH_* (ktouch.h) */
	int copy;              /* CKPTCACHE_COPY: CKC_COPY_* (copy.h) */
	int log_level;         /* CKC_LOG_* */
	long rank;             /* from the MPI/Slurm environment; 0 if none */
	long local_size;       /* processes of this job on this node; 1 if unknown */
	long local_rank;       /* this process's number among them; -1 if unknown */
	char job[CKC_JOB_NAME];  /* the job (and step) from Slurm, Open MPI or PMIx; "" if none */
	char node[CKC_JOB_NAME]; /* the node's number in the job, else the host name */
	ckc_peer_t peer;       /* CKPTCACHE_PEER */
	bool host_whole;       /* populate the host tier whole at start instead of growing
				  it with use (not from the environment: for benchmarks) */
} ckc_config_t;

/* What the loader needs to know about the machine; tests pass their own. */
typedef struct ckc_sysinfo {
	uint64_t mem_total; /* bytes of physical memory */
	/* Fills the bytes available to an unprivileged user in the file system
	 * holding dir, and whether it is memory-backed (tmpfs/ramfs).
	 * Returns 0 or -errno. */
	int (*fs_info)(const char *dir, uint64_t *avail, bool *in_memory);
	/* Bytes that this user's ssd tier files hold in dir's file system
	 * (the caches of processes already running); NULL: none. */
	uint64_t (*tier_files)(const char *dir);
	/* A missing directory is checked (its nearest existing parent must be
	 * writable) instead of made: ckptcache doctor changes nothing. */
	bool no_mkdir;
} ckc_sysinfo_t;

/* The smallest host or ssd tier: one block of the arenas. */
#define CKC_TIER_MIN 4096u

/* The real machine's facts (MemTotal, statfs). Physical memory only: it is
 * read in every process; the job's memory limit (ckc_memlimit) is applied
 * when the cache starts (ckc_config_host_for). */
void ckc_sysinfo_default(ckc_sysinfo_t *sys);

/* Fills c from variables looked up with get (getenv-like; ctx is passed
 * through). Every bad value is reported once, naming the variable and the
 * value, and counted. Returns the number of errors; when it is not 0,
 * c->enabled is false (the caller aborts instead if c->strict). c must be
 * released with ckc_config_free whatever the result. */
int ckc_config_load(ckc_config_t *c, const char *(*get)(const char *name, void *ctx),
		    void *ctx, const ckc_sysinfo_t *sys);

/* ckc_config_load with getenv and the real machine. */
int ckc_config_from_env(ckc_config_t *c);

/* The host tier's size for a machine (or a job) of mem bytes of memory:
 * the default and a percentage are taken again of mem, a size in bytes
 * stays. Sets and returns c->host_cache (unchanged when mem is 0). */
uint64_t ckc_config_host_for(ckc_config_t *c, uint64_t mem);

/* Releases the strings of c. */
void ckc_config_free(ckc_config_t *c);

/* Parses a size: bytes, or a number with K, M, G, T (powers of 1024; an
 * optional trailing "B" or "iB"), or a percentage "N%" (0..100, decimals
 * allowed). On success returns 0 and sets *bytes, or *pct (>= 0) for a
 * percentage with *bytes = 0; returns -EINVAL for anything else and
 * -ERANGE on overflow. */
int ckc_parse_size(const char *s, uint64_t *bytes, double *pct);
/* ckc_parse_size over the n bytes at s (already without surrounding white
 * space), a percentage of any size in *pct (else -1). */
int ckc_parse_size_span(const char *s, size_t n, uint64_t *bytes, double *pct);

/* Bytes for people ("512 MiB", "1.5 GiB"): exact when a whole number of
 * the unit, else one decimal. Writes buf and returns it. */
const char *ckc_format_size(uint64_t v, char *buf, size_t len);

/* The process's rank from OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID,
 * PMIX_RANK (first one set and valid), looked up with get; 0 if none. */
long ckc_config_rank(const char *(*get)(const char *name, void *ctx), void *ctx);

/* The name of a CKPTCACHE_PEER value ("auto" for CKC_PEER_AUTO). */
const char *ckc_config_peer_name(ckc_peer_t p);

#endif
