/* What stepping aside learnt, kept for the next processes of this user on
 * this node: one small file in /dev/shm of fixed records, one per
 * CKPTCACHE_PATHS value and program, read at start and written at exit. A job that
 * writes one checkpoint per process (one HDF5 file, one pickle) learns
 * nothing in the process itself; the next run starts where it ended.
 * Records are advice: a torn or stale one is ignored. */
#include "config.h"

#include <stdatomic.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "log.h"
#include "sys.h"

#define STORE_RECS 64
/* Older records are not taken: the page cache and the file systems the
 * node mounts are not the same an hour later. */
#define STORE_MAX_AGE_S 3600
/* The record's every carries ends_behind in its top bit (a record of an
 * earlier layout has it clear). */
#define STORE_ENDS_BEHIND (1u << 31)

typedef struct store_rec {
	uint64_t key;
	double bw_cache, bw_home;
	uint64_t stamp; /* seconds, CLOCK_REALTIME */
	uint32_t since, every;
	uint64_t check;
	/* the small checkpoints' model (files a second on each side: ASIDE_CACHE,
	 * ASIDE_HOME), 0 where not measured; outside the check, so that a
	 * record of a version that left them 0 stays valid */
	double small_bw[2];
} store_rec_t;

_Static_assert(sizeof(store_rec_t) == 64, "a record is 64 bytes");

static uint64_t store_hash(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static uint64_t store_check(const store_rec_t *r)
{
	return store_hash(r, offsetof(store_rec_t, check), 14695981039346656037ull) | 1;
}

CKC_HOT_DATA const char *ckc_aside_store_dir = CKC_ASIDE_STORE_DIR;

int ckc_aside_store_path(char *out, size_t len)
{
	int n = snprintf(out, len, "%s/" CKC_ASIDE_STORE_PREFIX "%u", ckc_aside_store_dir,
			 (unsigned)geteuid());
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The file, opened for reading and writing: created private to this user,
 * refused when it is not a regular file of this user. -1 on any failure. */
static int store_open(bool create)
{
	char path[256];
	if (ckc_aside_store_path(path, sizeof(path)))
		return -1;
	int fd = sys_open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
	if (fd < 0)
		return -1;
	struct stat st;
	if (sys_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		sys_close(fd);
		return -1;
	}
	return fd;
}

/* The program, and its first argument where that names a regular file
 * (python3 and its script, bash and its job script), from
 * /proc/self/cmdline: two programs that write under one pattern write in
 * their own ways. Any other first argument is left out: a program given
 * its run's folder (./sim /scratch/run42) or an option is the same
 * program from one run to the next. Empty where it cannot be read. */
static size_t store_program_read(char *out, size_t len)
{
	int fd = sys_open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ssize_t n = sys_pread(fd, out, len - 1, 0);
	sys_close(fd);
	if (n <= 0)
		return 0;
	out[n] = '\0';
	size_t first = strnlen(out, (size_t)n) + 1; /* the program, its '\0' included */
	if (first >= (size_t)n)
		return first > (size_t)n ? (size_t)n : first;
	size_t second = first + strnlen(out + first, (size_t)n - first);
	struct stat st;
	if (second < (size_t)n && out[first] && sys_stat(out + first, &st) == 0 && S_ISREG(st.st_mode))
		return second + 1;
	return first;
}

/* Read once, at the process's first look (its first checkpoint or its
 * cache's start): the record it saves at its end is the one it read,
 * whatever it made or left meanwhile. */
static char store_prog[512];
static size_t store_prog_n;
static pthread_once_t store_prog_once = PTHREAD_ONCE_INIT;

static void store_program_once(void)
{
	store_prog_n = store_program_read(store_prog, sizeof(store_prog));
}

static uint64_t store_key(const char *paths)
{
	(void)pthread_once(&store_prog_once, store_program_once);
	uint64_t h = store_hash(paths, strlen(paths) + 1, 14695981039346656037ull);
	return store_hash(store_prog, store_prog_n, h) | 1;
}

static uint64_t store_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec;
}

/* This node's record for paths (and this program), valid and not too old,
 * into *out: whether there is one. */
static bool store_find(const char *paths, store_rec_t *out)
{
	store_rec_t rec[STORE_RECS];
	int fd = store_open(false);
	if (fd < 0)
		return false;
	ssize_t n = sys_pread(fd, rec, sizeof(rec), 0);
	sys_close(fd);
	uint64_t key = store_key(paths), now = store_now_s();
	for (ssize_t i = 0; n > 0 && i < n / (ssize_t)sizeof(rec[0]); i++) {
		store_rec_t *r = &rec[i];
		if (r->key != key || r->check != store_check(r) || r->stamp > now ||
		    now - r->stamp > STORE_MAX_AGE_S || !(r->bw_cache >= 0) || !(r->bw_home >= 0))
			continue;
		*out = *r;
		return true;
	}
	return false;
}

static void store_apply(aside_t *a, const store_rec_t *r)
{
	aside_prior(a, r->bw_cache, r->bw_home, r->since, r->every & ~STORE_ENDS_BEHIND);
	a->ends_behind = (r->every & STORE_ENDS_BEHIND) != 0;
	ckc_debug("stepping aside: this node's last run wrote %.2f GB/s into the cache, %.2f GB/s to "
		  "the real paths", r->bw_cache / 1e9, r->bw_home / 1e9);
}

/* the small checkpoints' speeds of record r, 0 where not measured */
static double store_small_bw(const store_rec_t *r, int k)
{
	return r->small_bw[k] > 0 && r->small_bw[k] < 1e12 ? r->small_bw[k] : 0;
}

void ckc_aside_load(aside_t *a, aside_t *small, const char *paths)
{
	store_rec_t r;
	if (!a->on || !paths || !store_find(paths, &r))
		return;
	store_apply(a, &r);
	if (small)
		aside_prior_settled(small, store_small_bw(&r, ASIDE_CACHE), store_small_bw(&r, ASIDE_HOME));
}

/* checkpoints sent to their real paths before the cache started */
CKC_HOT_DATA static atomic_uint aside_firsts;

bool ckc_aside_first_home(const char *paths, bool *small_home)
{
	aside_t a;
	aside_init(&a, true);
	store_rec_t r;
	double bw[2] = { 0, 0 };
	if (paths && store_find(paths, &r)) {
		store_apply(&a, &r);
		for (int k = 0; k < 2; k++)
			bw[k] = store_small_bw(&r, k);
	}
	/* the small ones went faster to their real paths, as the model takes
	 * them there (aside.h: ASIDE_ENTER) */
	*small_home = bw[ASIDE_CACHE] > 0 && bw[ASIDE_HOME] >= ASIDE_ENTER * bw[ASIDE_CACHE];
	return aside_peek(&a) == ASIDE_HOME;
}

void ckc_aside_first_note(void)
{
	atomic_fetch_add(&aside_firsts, 1);
}

CKC_START_PATH unsigned ckc_aside_firsts(void)
{
	return atomic_load(&aside_firsts);
}

CKC_START_PATH void ckc_aside_firsts_forget(void)
{
	/* (a fork's child writes no page it need not) */
	if (atomic_load(&aside_firsts))
		atomic_store(&aside_firsts, 0);
}

/* Processes that end at once each read the records, pick a slot and write
 * it: without the lock two of them can pick the same free slot, and one
 * record is lost. Waits STORE_LOCK_WAIT_MS at most; a record not saved is
 * advice not given. (The lock goes with the close.) */
#define STORE_LOCK_WAIT_MS 50
static bool store_lock(int fd)
{
	for (int i = 0; i < STORE_LOCK_WAIT_MS * 10; i++) {
		if (sys_flock(fd, LOCK_EX | LOCK_NB) == 0)
			return true;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return false;
		struct timespec ts = { 0, 100 * 1000 };
		nanosleep(&ts, NULL);
	}
	return false;
}

void ckc_aside_save(const aside_t *a, const aside_t *small, const char *paths)
{
	store_rec_t rec[STORE_RECS];
	bool small_measured = small && small->on && (small->measured[ASIDE_CACHE] || small->measured[ASIDE_HOME]);
	if (!a->on || !paths || (!a->measured[ASIDE_CACHE] && !a->measured[ASIDE_HOME] && !small_measured))
		return;
	int fd = store_open(true);
	if (fd < 0)
		return;
	if (!store_lock(fd)) {
		sys_close(fd);
		return;
	}
	memset(rec, 0, sizeof(rec));
	ssize_t n = sys_pread(fd, rec, sizeof(rec), 0);
	uint64_t key = store_key(paths);
	int slot = -1, free_slot = -1, oldest = 0;
	for (int i = 0; i < STORE_RECS; i++) {
		bool valid = (ssize_t)((i + 1) * sizeof(rec[0])) <= n && rec[i].key &&
			     rec[i].check == store_check(&rec[i]);
		if (valid && rec[i].key == key) {
			slot = i;
			break;
		}
		if (!valid && free_slot < 0)
			free_slot = i;
		if (valid && rec[i].stamp < rec[oldest].stamp)
			oldest = i;
	}
	/* this key's record, else an empty or torn one, else the oldest; a
	 * side this process never wrote on keeps the record's speed */
	store_rec_t r = { .key = key,
			  .bw_cache = a->n[ASIDE_CACHE] ? a->bw[ASIDE_CACHE] : 0,
			  .bw_home = a->n[ASIDE_HOME] ? a->bw[ASIDE_HOME] : 0,
			  .stamp = store_now_s(),
			  .since = a->since,
			  .every = a->every | (a->ends_behind ? STORE_ENDS_BEHIND : 0u) };
	for (int k = 0; k < 2; k++)
		r.small_bw[k] = small_measured && small->measured[k] ? small->bw[k] : 0;
	if (slot >= 0) {
		if (!r.bw_cache)
			r.bw_cache = rec[slot].bw_cache;
		if (!r.bw_home)
			r.bw_home = rec[slot].bw_home;
		for (int k = 0; k < 2; k++)
			if (!r.small_bw[k] && rec[slot].small_bw[k] > 0)
				r.small_bw[k] = rec[slot].small_bw[k];
	} else {
		slot = free_slot >= 0 ? free_slot : oldest;
	}
	r.check = store_check(&r);
	(void)!sys_pwrite(fd, &r, sizeof(r), (off_t)slot * (off_t)sizeof(r));
	sys_close(fd);
}
