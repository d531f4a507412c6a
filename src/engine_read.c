/* The read path: opening a checkpoint for reading, its reads from the fastest tier that holds it, the waits for a prefetch under way, windows of a copy in device memory. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "copy.h"
#include "engine_int.h"
#include "log.h"
#include "memlimit.h"
#include "path.h"
#include "state.h"
#include "sys.h"

/* ---- reading ------------------------------------------------------- */

/* A read of the program from level's copy of o begins (lock held): the
 * copy is pinned there and counted as used now. */
static void pin_read(ckc_obj_t *o, int level)
{
	o->place[level].pins++;
	o->place[level].seq_use = ++ckc_eng.seq;
}

/* A copy of the program's of len bytes out of the cache begins (lock not
 * held): the background copies give way to one of CKC_PROG_COPY_MIN or
 * more. Returns whether it counts, for prog_read_end. */
static bool prog_read_begin(size_t len)
{
	if (len < CKC_PROG_COPY_MIN)
		return false;
	ckc_prog_begin();
	ckc_pace_reading(1);
	return true;
}

static void prog_read_end(bool counted)
{
	if (counted) {
		ckc_pace_reading(-1);
		ckc_prog_end();
	}
}

/* A closed version not yet published whose real file was made or changed
 * by someone else since it began: that file is newer, so the version goes
 * to a rescue file and the cache forgets it (lock held; dropped while the
 * bytes move). */
static void keep_newer_now(ckc_obj_t *o)
{
	int level = ckc_best_level(o);
	ckc_src_t src;

	ckc_obj_get(o);
	if (level >= 0 && level < ckc_eng.ntier - 1) {
		o->place[level].pins++;
		if (ckc_src_snapshot(o, level, &src) == 0) {
			ckc_keep_newer(o, &src, o->size);
			ckc_src_release(&src);
		}
		ckc_unpin(o, level);
	} else if (!o->retired) {
		/* its bytes are in a rescue file already, or nowhere */
		ckc_obj_retire(o);
	}
	ckc_obj_put(o);
}

/* The current version of key, after a look at the real file: a published
 * (or imported) version whose file changed since, or a version not yet
 * published whose file was made or changed by someone else since it began,
 * is older than that file, so the cache forgets it and NULL is returned.
 * Lock held; dropped for the look. */
ckc_obj_t *eng_current_locked(const char *key)
{
	struct stat st;
	int what;

	return eng_current_seen_locked(key, &st, &what);
}

CKC_TAGGED_PATH ckc_obj_t *eng_current_seen_locked(const char *key, struct stat *seen, int *what)
{
	ckc_obj_t *o;
	*what = CKC_SEEN_NONE;
	/* a publication being committed ends first (a rename: short) */
	while ((o = ckc_map_find(key)) && o->home_busy)
		eng_wait(EC_HOME);
	if (!o || !o->complete || !o->base.known || o->capture)
		return o;
	uint64_t v = o->version;
	bool published = o->at_home;
	ckc_fid_t base = o->base, now;
	eng_unlock();
	ckc_fid_take_st(key, &now, seen);
	ckc_mutex_lock(&ckc_eng.lock);
	o = ckc_map_find(key);
	if (!o || o->version != v || o->home_busy || o->at_home != published)
		return o;
	if (ckc_fid_same(&base, &now)) {
		if (now.exists && S_ISREG(seen->st_mode))
			*what = CKC_SEEN_FILE;
		else if (now.known && !now.exists)
			*what = CKC_SEEN_ABSENT;
		return o;
	}
	if (published) {
		ckc_trace("stale", o, 0, o->size, -1, 0);
		ckc_obj_retire(o);
	} else if (now.exists) {
		keep_newer_now(o);
	} else {
		return o; /* removed behind it: publishing will make it again */
	}
	return NULL;
}

/* Whether the restore queue names key (a hint, the write order, or the
 * API): the prefetcher may bring it into a tier. Lock held. */
static bool named_ahead(const char *key)
{
	return ckc_eng.hq && hq_distance(ckc_eng.hq, key) != HQ_FAR;
}

/* The first read of the program starts the prefetching (lock held). */
static void start_prefetch_locked(void)
{
	if (!ckc_eng.prefetch_started && ckc_eng.cfg.prefetch == CKC_PREFETCH_AUTO) {
		ckc_eng.prefetch_started = true;
		ckc_prefetch_kick();
		eng_signal(EC_ROOM);
	}
}

/* n checkpoints opened for reading at their real paths, the cache holding
 * nothing of them and no hint naming them (lock held). */
CKC_TAGGED_PATH static void count_passed_locked(uint64_t n)
{
	ckc_eng.tier[ckc_eng.ntier - 1].st.ckpt_reads += n;
	ckc_eng.st.objects_opened_read += n;
	ckc_eng.st.objects_passed_read += n;
	ckc_eng.st.dist_hist[ckc_stats_dist_bucket(HQ_FAR, true)] += n;
}

void ckc_count_passed_reads(uint64_t n)
{
	if (!n)
		return;
	ckc_mutex_lock(&ckc_eng.lock);
	if (ckc_eng.active)
		count_passed_locked(n);
	eng_unlock();
}

/* Whether o is a version written straight to its real path that no tier
 * holds (lock held). */
static bool aside_home_only(const ckc_obj_t *o)
{
	return o->aside_home && o->complete && !o->retired && o->at_home && !o->rescue &&
	       ckc_best_level(o) == ckc_eng.ntier - 1 && o->place[0].state != LC_READ_IN_PROGRESS;
}

/* ckc_open_read, and ckc_open_read_held where held is not NULL. */
CKC_TAGGED_PATH static int open_read(const char *path, ckc_handle_t **hp, bool *held)
{
	char key[PATH_MAX];
	int rc = eng_open_locked(path, key);
	if (rc)
		return rc;
	ckc_hints_reading();
	if (!ckc_eng.active) {
		/* stopped while the hint file was read */
		eng_unlock();
		return -ENODEV;
	}
	/* a version written straight to its real path (aside.h), which no
	 * tier holds and nothing names ahead, reads as a file the cache holds
	 * nothing of: the real open answers, with no look at the file first
	 * (whether it changed since is the real file's own business then); a
	 * version named ahead is read through the cache, after the look */
	ckc_obj_t *o = ckc_map_find(key);
	if (held && o) {
		*held = true;
		if (!o->complete) {
			eng_unlock();
			return -EBUSY;
		}
	}
	bool home_only = o && !o->home_busy && aside_home_only(o) && !named_ahead(key);
	struct stat seen;
	int seen_what = CKC_SEEN_NONE;
	if (!home_only) {
		o = eng_current_seen_locked(key, &seen, &seen_what);
		home_only = o && aside_home_only(o);
	}
	if ((!o || home_only) && ckc_eng.active && !named_ahead(key)) {
		if (o)
			o->passed_read = true;
		/* the cache holds nothing of it and no hint names it: each read
		 * would come from the real file anyway, so the program reads
		 * that directly, as without the library (a read of 128 KiB,
		 * cat's, costs the engine's bookkeeping a few per cent) */
		count_passed_locked(1);
		start_prefetch_locked();
		ckc_trace_key("open-read-real", key);
		eng_unlock();
		return -ENOENT;
	}
	if (!o && ckc_eng.active)
		o = ckc_obj_import_home(key);
	/* consumed and dropped (CKPTCACHE_PERSIST=unconsumed or never):
	 * gone, as if deleted */
	if (o && o->complete && ckc_best_level(o) < 0 && o->place[0].state != LC_READ_IN_PROGRESS)
		o = NULL;
	if (!o) {
		eng_unlock();
		return -ENOENT;
	}
	ckc_handle_t *h = eng_handle_new(o, false);
	if (!h) {
		eng_unlock();
		return -ENOMEM;
	}
	h->seen_what = seen_what;
	h->seen_at_home = o->at_home;
	if (seen_what == CKC_SEEN_FILE)
		h->seen = seen;
	uint64_t d = ckc_dist(o);
	ckc_eng.st.objects_opened_read++;
	ckc_eng.st.dist_hist[ckc_stats_dist_bucket(d, d >= HQ_FAR)]++;
	start_prefetch_locked();
	ckc_trace("open-read", o, 0, o->size, ckc_best_level(o), 0);
	eng_unlock();
	*hp = h;
	return 0;
}

int ckc_open_read(const char *path, ckc_handle_t **hp)
{
	return open_read(path, hp, NULL);
}

CKC_TAGGED_PATH int ckc_open_read_held(const char *path, ckc_handle_t **hp, bool *held)
{
	*held = false;
	return open_read(path, hp, held);
}

/* The disjoint ranges a handle keeps of what it read, at most: a read
 * that would make one more is not kept. The ranges serve only to tell
 * whether the handle read all of its checkpoint (consume_locked at its
 * close): one not kept makes that answer no, never a wrong yes, and a
 * program's random reads of small pieces (4 KiB preads all over 256 MiB)
 * no longer shift tens of thousands of ranges at each read (it read at a
 * sixth of its speed without the library). */
#define RANGES_KEPT 64

void eng_range_add(ckc_handle_t *h, uint64_t a, uint64_t b)
{
	int i = 0, j, hi = h->nrange;

	/* the first range that ends at a or after it */
	while (i < hi) {
		int m = i + (hi - i) / 2;
		if (h->range[m][1] < a)
			i = m + 1;
		else
			hi = m;
	}
	for (j = i; j < h->nrange && h->range[j][0] <= b; j++) {
		a = h->range[j][0] < a ? h->range[j][0] : a;
		b = h->range[j][1] > b ? h->range[j][1] : b;
	}
	/* ranges [i, j) merge into [a, b) */
	if (i == j) {
		if (h->nrange >= RANGES_KEPT)
			return;
		if (h->nrange == h->caprange) {
			int cap = h->caprange ? 2 * h->caprange : 4;
			void *r = sys_realloc(h->range, (size_t)cap * sizeof(*h->range));
			if (!r)
				return; /* only consumption accounting is lost */
			h->range = r;
			h->caprange = cap;
		}
		memmove(h->range + i + 1, h->range + i, (size_t)(h->nrange - i) * sizeof(*h->range));
		h->nrange++;
	} else if (j - i > 1) {
		memmove(h->range + i + 1, h->range + j, (size_t)(h->nrange - j) * sizeof(*h->range));
		h->nrange -= j - i - 1;
	}
	h->range[i][0] = a;
	h->range[i][1] = b;
}

/* The longest a read waits for a prefetch of its object in flight; then it
 * is served from the copy the prefetch reads (a stalled lower tier must
 * not hold the program). */
#define PREFETCH_WAIT_MAX_NS 2000000000ull

/* One wait of h's read for the prefetch of its object (lock held): false
 * once *deadline (set at the first call) has passed. */
bool eng_prefetch_wait(ckc_handle_t *h, uint64_t *deadline)
{
	/* a prefetch into the gpu tier from the host tier below it is not
	 * waited for: it stages the bytes through pinned memory (a host tier
	 * that grows is not pinned), 64 MiB in about 10 ms on an H200, while
	 * the read copies them from there in 3.6-5.5 ms, and the program's
	 * own copy to the device from pinned staging takes 1.2 ms: the read
	 * takes them as it would without hints (the prefetch goes on; what it
	 * lands serves a later read) */
	int src = ckc_best_level(h->o);
	if (src > 0 && src < ckc_eng.ntier - 1 && ckc_eng.tier[src].kind == TIER_HOST &&
	    ckc_eng.tier[0].kind == TIER_GPU)
		return false;
	uint64_t w0 = ckc_now_ns();
	if (!*deadline) {
		*deadline = w0 + PREFETCH_WAIT_MAX_NS;
		if (!h->waited) {
			h->waited = true;
			ckc_eng.st.reads_waited++;
		}
	}
	/* the prefetch stops giving way to the program meanwhile: to this
	 * very read (pace.c) */
	ckc_prefetch_awaited(1);
	bool more = eng_wait_until(EC_LANDED, *deadline);
	ckc_prefetch_awaited(-1);
	ckc_eng.st.read_wait_s += (double)(ckc_now_ns() - w0) / 1e9;
	if (!more) {
		static atomic_bool said;
		if (!atomic_exchange(&said, true))
			ckc_warn("a prefetch of %s took longer than %.0f s: the read is served from the copy it "
				 "reads",
				 h->o->key, PREFETCH_WAIT_MAX_NS / 1e9);
	}
	return more;
}

/* Reads of fewer bytes than this from a copy in device memory are served
 * from the handle's window (stdio and Python read in pieces of 8 KiB and
 * less; each a device transfer of its own costs ten times its size). */
#define WIN_READ_MAX (256u << 10)

/* Counts a read of [off, off+len) through h served at level (lock held):
 * the checkpoint read back there once per handle, a hit there and a miss
 * in every tier above, the range read for consumption, the trace line. */
static void read_account(ckc_handle_t *h, int level, uint64_t off, uint64_t len, uint64_t t0)
{
	ckc_tier_stats_t *st = &ckc_eng.tier[level].st;
	if (!h->writer && !h->counted) {
		h->counted = true;
		st->ckpt_reads++;
	}
	st->read_ops++;
	st->read_bytes += len;
	st->hits++;
	for (int l = 0; l < level; l++)
		ckc_eng.tier[l].st.misses++;
	if (!h->writer)
		eng_range_add(h, off, off + len);
	ckc_trace("read", h->o, off, len, level, t0);
}

/* [off, off+len) of h's complete object, whose best copy is in the gpu
 * tier, from the handle's window, filled first when it does not hold them
 * (lock held; returns with it released). Returns the bytes, -errno, or
 * -EAGAIN when no window could be had (the caller reads as usual). */
static ssize_t window_read(ckc_handle_t *h, void *buf, size_t len, uint64_t off, uint64_t t0)
{
	ckc_obj_t *o = h->o;
	int rc = 0;
	if (!h->win || off < h->win_off || off + len > h->win_off + h->win_len) {
		if (!h->win && !(h->win = ckc_gpu_window_get())) {
			eng_unlock();
			return -EAGAIN;
		}
		uint64_t wl = o->size - off < CKC_GPU_WINDOW ? o->size - off : CKC_GPU_WINDOW;
		ckc_src_t src;
		if ((rc = ckc_src_snapshot(o, 0, &src)) != 0) {
			eng_unlock();
			return rc;
		}
		o->place[0].pins++;
		h->win_len = 0;
		eng_unlock();
		rc = ckc_src_read(&src, off, h->win, (size_t)wl, NULL);
		ckc_mutex_lock(&ckc_eng.lock);
		ckc_src_release(&src);
		ckc_unpin(o, 0);
		if (!rc) {
			h->win_off = off;
			h->win_len = wl;
			ckc_eng.tier[0].st.read_ops++;
			ckc_eng.tier[0].st.read_bytes += wl;
		}
	}
	if (!rc) {
		ckc_eng.tier[0].st.hits++;
		eng_range_add(h, off, off + len);
		o->place[0].seq_use = ++ckc_eng.seq;
		ckc_trace("read", o, off, len, 0, t0);
	}
	eng_unlock();
	/* the window is the handle's own: copied from without the lock */
	if (!rc)
		ckc_copy(buf, h->win + (off - h->win_off), len);
	return rc ? rc : (ssize_t)len;
}

/* A read this small of a version the host tier holds is copied out under
 * the lock, through the stack, in one round: a script that reads back
 * thousands of small files paid two rounds of the lock, a pin and a copy
 * of the version's extents for each read. */
#define SMALL_READ 4096u

/* [off, off + len) of h's object from host tier level (lock held; returns
 * with it released). */
static ssize_t small_read(ckc_handle_t *h, int level, void *buf, size_t len, uint64_t off, uint64_t t0)
{
	char tmp[SMALL_READ];
	const ckc_place_t *p = &h->o->place[level];
	ckc_src_t s = { .t = &ckc_eng.tier[level], .ext = p->ext, .n = p->nexts };
	int rc = ckc_src_read(&s, off, tmp, len, NULL);
	if (rc == 0)
		read_account(h, level, off, len, t0);
	eng_unlock();
	if (!rc)
		rc = ckc_copy_checked(buf, tmp, len);
	return rc ? rc : (ssize_t)len;
}

ssize_t ckc_pread(ckc_handle_t *h, void *buf, size_t len, uint64_t off)
{
	ckc_obj_t *o = h->o;
	ssize_t rc;

	ckc_mutex_lock(&ckc_eng.lock);
	/* (the time a read began is for its trace line only) */
	uint64_t t0 = ckc_eng.trace_fd >= 0 ? ckc_now_ns() : 0;
	uint64_t deadline = 0;
	for (;;) {
		if (o->handed) {
			eng_unlock();
			return CKC_HANDED;
		}
		if (off >= o->size || len == 0) {
			eng_unlock();
			return 0;
		}
		/* a prefetch in flight is worth waiting for, a while */
		if (ckc_eng.ntier > 1 && o->place[0].state == LC_READ_IN_PROGRESS && eng_prefetch_wait(h, &deadline))
			continue;
		if (o->migrating) {
			eng_wait(EC_MOVED);
			continue;
		}
		break;
	}
	if (len > o->size - off)
		len = (size_t)(o->size - off);
	if (h->writer && o->home_fd >= 0) {
		/* written through at home: the bytes are in the temporary file
		 * (counted: a move into the cache leaves it alone meanwhile) */
		int fd = o->home_fd;
		o->home_reads++;
		eng_unlock();
		ssize_t n = ckc_io_pread_all(fd, buf, len, (off_t)off);
		ckc_mutex_lock(&ckc_eng.lock);
		o->home_reads--;
		eng_unlock();
		return n;
	}
	int level = ckc_best_level(o);
	if (level < 0) {
		ckc_error("checkpoint %s: no copy of its bytes is left", o->key);
		eng_unlock();
		return -EIO;
	}
	if (level == 0 && ckc_eng.tier[0].kind == TIER_GPU && !h->writer && o->complete && len < WIN_READ_MAX) {
		rc = window_read(h, buf, len, off, t0);
		if (rc != -EAGAIN)
			return rc;
		ckc_mutex_lock(&ckc_eng.lock);
		level = ckc_best_level(o);
		if (level < 0) {
			eng_unlock();
			return -EIO;
		}
	}
	if (len <= SMALL_READ && level < ckc_eng.ntier - 1 && ckc_eng.tier[level].kind == TIER_HOST)
		return small_read(h, level, buf, len, off, t0);
	ckc_src_t src;
	if ((rc = ckc_src_snapshot(o, level, &src)) != 0) {
		eng_unlock();
		return rc;
	}
	bool bounded = level < ckc_eng.ntier - 1;
	if (bounded)
		pin_read(o, level);
	/* a copy in the ssd tier of a checkpoint already published: what the
	 * page cache still holds of the real file comes faster from there */
	char *home = !h->writer && ckc_eng.tier[level].kind == TIER_SSD && o->at_home && !o->retired ?
			     strdup(o->key) : NULL;
	/* a version retired since: its real file as it was, held by the object
	 * (the name may be gone, or another file's) */
	int keep = o->retired && h->home_fd < 0 ? o->keep_fd : -1;
	int *hfd = keep >= 0 ? &keep : &h->home_fd;
	eng_unlock();
	bool big = prog_read_begin(len);
	size_t got = home ? ckc_home_read_cached(home, buf, len, off, &h->home_fd) : 0;
	ckc_tl_program_read = true;
	rc = got < len ? ckc_src_read(&src, off + got, (char *)buf + got, len - got, hfd) : 0;
	ckc_tl_program_read = false;
	prog_read_end(big);
	sys_free(home);
	ckc_mutex_lock(&ckc_eng.lock);
	if (got && o->retired) {
		/* a newer version may have replaced the real file meanwhile */
		eng_unlock();
		got = 0;
		rc = ckc_src_read(&src, off, buf, len, hfd);
		ckc_mutex_lock(&ckc_eng.lock);
	}
	ckc_src_release(&src);
	if (bounded)
		ckc_unpin(o, level);
	if (rc == 0) {
		if (got == len)
			level = ckc_eng.ntier - 1;
		read_account(h, level, off, len, t0);
		rc = (ssize_t)len;
	}
	eng_unlock();
	return rc;
}

/* Whether the real file holds o's bytes (published, or imported and
 * never rewritten): what a read of it gets. Where a tier holds them too
 * (also_held), only once no writer can change them and no publication or
 * rename is moving a file to its path. Lock held. */
static bool home_holds(const ckc_obj_t *o, bool also_held)
{
	return eng_home_holds(o) &&
	       (!also_held || (o->complete && o->writers == 0 && !o->home_busy && o->base.known && o->base.exists));
}

/* A copy call's range is looked at up to this far (the look without
 * cachestat maps the range and takes a byte a page). */
#define HOME_LOOK_MAX ((uint64_t)256 << 20)

/* Whether the page cache holds [off, off + len) of the real file fd
 * (clipped to size, and to HOME_LOOK_MAX): a copy from there runs at
 * memory speed. */
static bool home_range_cached(int fd, uint64_t off, uint64_t len, uint64_t size)
{
	if (off >= size)
		return true; /* (the kernel's copy ends there) */
	if (len > size - off)
		len = size - off;
	return ckc_home_range_cached(fd, off, len < HOME_LOOK_MAX ? len : HOME_LOOK_MAX);
}

int ckc_handle_home_fd(ckc_handle_t *h, uint64_t off, uint64_t len)
{
	ckc_obj_t *o = h->o;
	int fd = -ENOENT;

	if (h->writer)
		return -ENOENT;
	ckc_mutex_lock(&ckc_eng.lock);
	bool home_only = ckc_best_level(o) == ckc_eng.ntier - 1;
	bool held = home_holds(o, !home_only);
	uint64_t size = o->size;
	ckc_fid_t base = o->base;
	char *key = held && h->home_fd < 0 ? strdup(o->key) : NULL;
	eng_unlock();
	if (!held)
		return -ENOENT;
	if (key) {
		/* opened like a read from there opens it (ckc_home_read) */
		int f = sys_open(key, O_RDONLY, 0);
		sys_free(key);
		if (f < 0)
			return -ENOENT;
		ckc_mutex_lock(&ckc_eng.lock);
		if (h->home_fd < 0) {
			h->home_fd = f;
			f = -1;
		}
		eng_unlock();
		if (f >= 0)
			sys_close(f); /* opened by another read meanwhile */
	}
	if (!home_only) {
		/* a tier holds them too: the real file serves the copy where it
		 * is the very file the version was published as (not one a
		 * rename is replacing, nor another process's), and where the
		 * page cache holds the range (the kernel's copy, as without
		 * the library) */
		struct stat st;
		ckc_fid_t id;
		if (sys_fstat(h->home_fd, &st) != 0)
			return -ENOENT;
		ckc_fid_of(&st, &id);
		if (!ckc_fid_same(&base, &id) || !home_range_cached(h->home_fd, off, len, size))
			return -ENOENT;
	}
	ckc_mutex_lock(&ckc_eng.lock);
	/* a checkpoint promoted, rewritten or replaced meanwhile is read
	 * through the cache */
	if ((ckc_best_level(o) == ckc_eng.ntier - 1 || !home_only) && home_holds(o, !home_only) && o->size == size)
		fd = h->home_fd;
	eng_unlock();
	return fd;
}

ssize_t ckc_handle_lend(ckc_handle_t *h, uint64_t off, size_t len,
			ssize_t (*fn)(void *ctx, const void *p, size_t n), void *ctx)
{
	ckc_obj_t *o = h->o;
	uint64_t t0 = ckc_now_ns();

	if (h->writer || len == 0)
		return 0;
	ckc_mutex_lock(&ckc_eng.lock);
	int level = ckc_best_level(o);
	ckc_src_t src;
	uint64_t aoff, avail;
	/* what ckc_pread would wait for, fill or look up is its own to do */
	if (o->handed || o->migrating || o->retired || !o->complete || off >= o->size || level < 0 ||
	    level >= ckc_eng.ntier - 1 || ckc_eng.tier[level].kind != TIER_HOST ||
	    o->place[0].state == LC_READ_IN_PROGRESS || ckc_src_snapshot(o, level, &src) != 0) {
		eng_unlock();
		return 0;
	}
	if (!ckc_ext_run(src.ext, src.n, off, &aoff, &avail)) {
		ckc_src_release(&src);
		eng_unlock();
		return 0;
	}
	if (len > o->size - off)
		len = (size_t)(o->size - off);
	if (len > avail)
		len = (size_t)avail;
	pin_read(o, level);
	const char *p = src.t->base + aoff;
	eng_unlock();
	bool big = prog_read_begin(len);
	ssize_t n = fn(ctx, p, len);
	prog_read_end(big);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_src_release(&src);
	ckc_unpin(o, level);
	if (n > 0)
		read_account(h, level, off, (uint64_t)n, t0);
	eng_unlock();
	return n;
}

void ckc_handle_note_read(ckc_handle_t *h, uint64_t off, uint64_t len)
{
	if (len == 0)
		return;
	ckc_mutex_lock(&ckc_eng.lock);
	read_account(h, ckc_eng.ntier - 1, off, len, 0);
	eng_unlock();
}

static bool ts_before(struct timespec a, struct timespec b)
{
	return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

/* Whether the kernel stamps a file whose times were looked at since its
 * last change with its fine clock (multigrain timestamps: Linux 6.13 and
 * later, on ext4, xfs, btrfs and tmpfs): Python and stdio look at every
 * file they open, so a checkpoint written straight to its real path gets
 * a fine stamp there, and one the cache held must too, or a checkpoint
 * the cache held looks older than the one written straight before it. */
static bool kernel_multigrain(void)
{
	static int known = -1;
	if (known < 0) {
		struct utsname u;
		int major = 0, minor = 0;
		known = uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
			(major > 6 || (major == 6 && minor >= 13));
	}
	return known;
}

CKC_HOT_DATA _Atomic int64_t ckc_stamp_floor_ns;

/* The latest reading of the clock ckc_stamp_seen_slow took: a stamp no
 * later than it is not in the future, and needs no other. */
CKC_HOT_DATA static _Atomic int64_t stamp_clock_ns;

/* *at = max(*at, v). */
static void stamp_raise(_Atomic int64_t *at, int64_t v)
{
	int64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);
	while (v > cur && !__atomic_compare_exchange_n(at, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

CKC_TAGGED_PATH void ckc_stamp_seen_slow(const struct timespec *t)
{
	int64_t v = ckc_ts_ns(t), clock = __atomic_load_n(&stamp_clock_ns, __ATOMIC_RELAXED);
	if (v > clock) {
		/* the first reading by the system call: the vDSO's reads the
		 * kernel's clock pages, faults in a short program (a tool's
		 * fstat of its output) that touches them nowhere else */
		struct timespec now;
		if (clock == 0 ? ckc_syscall6(SYS_clock_gettime, CLOCK_REALTIME, (long)&now, 0, 0, 0, 0) != 0
			       : clock_gettime(CLOCK_REALTIME, &now) != 0)
			return;
		clock = ckc_ts_ns(&now);
		stamp_raise(&stamp_clock_ns, clock);
		if (v > clock)
			return;
	}
	stamp_raise(&ckc_stamp_floor_ns, v);
}

/* A fine stamp the kernel hands out now, no earlier than *after, where it
 * can: the times of a small file of this user's in /dev/shm, set to now and
 * read back. The kernel then knows of it, as of a checkpoint written
 * straight to its real path, and stamps every later file no older (its
 * coarse stamps are never before its last fine one); the fine clock read
 * here was up to a tick after a file the program wrote next. Another
 * process or thread of this user's setting the same file's times between
 * this one's set and look (every process under the library stamps there)
 * leaves a coarse stamp, perhaps before *after: the look marks the file
 * looked at, so the next set is fine, and a few tries get one. False where
 * there is no such file, or no stamp came (*t untouched). */
static bool kernel_fine_now(struct timespec *t, const struct timespec *after)
{
	static atomic_int broken;
	char path[64];
	if (atomic_load(&broken) > 2)
		return false;
	snprintf(path, sizeof(path), "/dev/shm/ckptcache-stamp-%u", (unsigned)geteuid());
	int saved = errno;
	bool ok = false, there = false;
	for (int tries = 0; tries < 4 && !ok; tries++) {
		long rc = ckc_syscall6(SYS_utimensat, AT_FDCWD, (long)path, 0, AT_SYMLINK_NOFOLLOW, 0, 0);
		if (rc != 0 && errno == ENOENT) {
			int fd = sys_open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (fd >= 0)
				sys_close(fd);
			rc = ckc_syscall6(SYS_utimensat, AT_FDCWD, (long)path, 0, AT_SYMLINK_NOFOLLOW, 0, 0);
		}
		struct stat st;
		if (rc != 0 || sys_lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			break;
		there = true;
		ckc_stamp_seen(&st.st_mtim);
		if (!ts_before(st.st_mtim, *after)) {
			*t = st.st_mtim;
			ok = true;
		}
	}
	if (!there)
		atomic_fetch_add(&broken, 1);
	errno = saved;
	return ok;
}

void eng_stamp_kernel(ckc_obj_t *o, struct timespec fine)
{
	struct timespec k;
	bool got = kernel_fine_now(&k, &fine);
	ckc_mutex_lock(&ckc_eng.lock);
	if (o->stamp_kernel && ckc_ts_ns(&o->stamped) == ckc_ts_ns(&fine)) {
		if (got)
			o->mtime = o->stamped = k;
		o->stamp_kernel = false;
	}
	eng_unlock();
}

void eng_touch_mtime(ckc_obj_t *o)
{
	struct timespec t;
	ckc_file_now(&t);
	/* times looked at since their last change: the kernel's fine clock,
	 * as a kernel with multigrain timestamps stamps such a file; before
	 * those, only where no tick has passed since its last stamp, so that
	 * it is newer than what came before in that tick */
	bool fine = o->mtime_seen && (kernel_multigrain() || !ts_before(o->mtime, t));
	if (fine)
		clock_gettime(CLOCK_REALTIME, &t);
	/* and never before the fine stamp a write before it got (a write of
	 * the program the cache takes in pieces, the first one looked at) */
	if (ts_before(t, o->stamped))
		t = o->stamped;
	o->mtime = o->stamped = t;
	/* the kernel's own fine stamp replaces it once the lock is dropped */
	o->stamp_kernel = fine && kernel_multigrain();
	o->mtime_seen = false;
}

void eng_version_times(const ckc_obj_t *o, struct timespec t[2])
{
	t[0] = (o->attr.mask & CKC_ATTR_TIMES) ? o->attr.times[0] : o->mtime;
	t[1] = o->mtime;
}

void eng_stat_fill(const ckc_obj_t *o, ckc_stat_t *st)
{
	struct timespec t[2];
	eng_version_times(o, t);
	st->size = o->size;
	st->mtime = o->mtime;
	st->complete = o->complete;
	st->at_home = o->at_home;
	st->linked = o->mapped;
	st->mode = o->mode;
	st->has_owner = o->attr.mask & CKC_ATTR_OWNER;
	st->uid = o->attr.uid;
	st->gid = o->attr.gid;
	st->atime = t[0];
	st->readers = o->readers;
	st->passed_read = o->passed_read;
}

/* a on the file an O_PATH descriptor fd stands for, through its name in
 * /proc. 0 or -errno. */
static int attr_apply_named(int fd, const ckc_attr_t *a)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/thread-self/fd/%d", fd);
	/* the owner first, as ckc_attr_apply_fd */
	if ((a->mask & CKC_ATTR_OWNER) &&
	    ckc_syscall6(SYS_fchownat, AT_FDCWD, (long)proc, (long)a->uid, (long)a->gid, 0, 0) != 0)
		return -errno;
	if ((a->mask & CKC_ATTR_MODE) && sys_chmod(proc, a->mode & 07777) != 0)
		return -errno;
	if ((a->mask & CKC_ATTR_TIMES) &&
	    ckc_syscall6(SYS_utimensat, AT_FDCWD, (long)proc, (long)a->times, 0, 0, 0) != 0)
		return -errno;
	return 0;
}

/* Records a on o and, if o's bytes are at the real path already, applies
 * it there (lock held). */
static int setattr_locked(ckc_obj_t *o, const ckc_attr_t *a)
{
	eng_wait_idle(o, EB_HOME);
	if (a->mask & CKC_ATTR_MODE) {
		o->mode = a->mode & 07777;
		o->attr.mode = o->mode;
	}
	if (a->mask & CKC_ATTR_OWNER) {
		/* a chown of a regular file clears its set-ID bits (the
		 * kernel does so for root too, and for a chown that changes
		 * nothing) */
		mode_t was = o->mode;
		eng_clear_setid(o);
		if (o->mode != was)
			o->attr.mask |= CKC_ATTR_MODE;
		if (a->uid != (uid_t)-1)
			o->attr.uid = a->uid;
		else if (!(o->attr.mask & CKC_ATTR_OWNER))
			o->attr.uid = (uid_t)-1;
		if (a->gid != (gid_t)-1)
			o->attr.gid = a->gid;
		else if (!(o->attr.mask & CKC_ATTR_OWNER))
			o->attr.gid = (gid_t)-1;
	}
	if (a->mask & CKC_ATTR_TIMES) {
		o->attr.times[0] = a->times[0];
		o->attr.times[1] = a->times[1];
		o->mtime = a->times[1];
	}
	o->attr.mask |= a->mask;
	o->home_snap = false; /* the real file lacks it */
	if (!o->at_home)
		return 0;
	/* the real file takes it too, without the engine lock held: the
	 * file is busy meanwhile, as during a publication */
	char *key = strdup(o->key);
	if (!key)
		return -ENOMEM;
	eng_home_io_begin(o);
	int fd = sys_open(key, O_RDONLY, 0), rc;
	if (fd < 0 && errno == EACCES) {
		/* a file its mode keeps this process from opening (mode 0, a
		 * chmod 600 of it): by the name of a descriptor that opens
		 * nothing, as chmod(2) takes the file */
		fd = sys_open(key, O_PATH, 0);
		rc = fd < 0 ? -errno : attr_apply_named(fd, a);
	} else {
		rc = fd < 0 ? -errno : ckc_attr_apply_fd(fd, a);
	}
	/* the change time moved: this is still the file the cache published */
	struct stat st;
	bool seen = fd >= 0 && sys_fstat(fd, &st) == 0;
	if (fd >= 0)
		sys_close(fd);
	sys_free(key);
	eng_home_io_end(o);
	if (seen && o->at_home) {
		ckc_fid_t base;
		ckc_fid_of(&st, &base);
		eng_set_base(o, &base);
	}
	ckc_obj_put(o);
	return rc;
}

int ckc_setattr(const char *path, const ckc_attr_t *a)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = eng_lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? setattr_locked(o, a) : -ENOENT;
	eng_unlock();
	return rc;
}

int ckc_handle_setattr(ckc_handle_t *h, const ckc_attr_t *a)
{
	ckc_mutex_lock(&ckc_eng.lock);
	int rc = h->o->retired ? 0 : setattr_locked(h->o, a);
	eng_unlock();
	return rc;
}

int eng_mtime_looked(ckc_obj_t *o)
{
	o->mtime_seen = true;
	return o->home_fd;
}

void eng_kernel_look(int fd)
{
	/* a checkpoint written straight to its real path gets the kernel's
	 * stamps: the kernel must know it was looked at too, or it stamps
	 * the next write with its coarse clock, older than a fine stamp the
	 * cache gave a checkpoint before it (the number is the file's while
	 * its writer has not closed it; a look at another file changes
	 * nothing of it) */
	if (fd >= 0) {
		struct stat rst;
		int saved = errno;
		if (sys_fstat(fd, &rst) == 0)
			ckc_stamp_seen(&rst.st_ctim);
		errno = saved;
	}
}

int ckc_handle_stat(const ckc_handle_t *h, ckc_stat_t *st)
{
	ckc_mutex_lock(&ckc_eng.lock);
	eng_stat_fill(h->o, st);
	int look = eng_mtime_looked(h->o);
	eng_unlock();
	eng_kernel_look(look);
	return 0;
}

int ckc_handle_seen(const ckc_handle_t *h, struct stat *st, bool *at_home)
{
	/* set at the open, before the handle was handed out */
	*at_home = h->seen_at_home;
	if (h->seen_what == CKC_SEEN_FILE)
		*st = h->seen;
	return h->seen_what;
}

/* Truncates the writer's own file at home, as its writes use it: without
 * the lock, counted as a write (a hand-over waits for it). Lock held. */
static int home_truncate(ckc_obj_t *o, uint64_t size)
{
	int fd = o->home_fd;
	o->writing++;
	eng_unlock();
	int rc = sys_ftruncate(fd, (off_t)size) ? -errno : 0;
	ckc_mutex_lock(&ckc_eng.lock);
	eng_write_end(o);
	return rc;
}

int ckc_ftruncate(ckc_handle_t *h, uint64_t size)
{
	ckc_obj_t *o = h->o;
	int rc = 0;

	if (!h->writer)
		return -EBADF;
	ckc_mutex_lock(&ckc_eng.lock);
	eng_wait_idle(o, EB_MOVE | EB_HAND);
	/* (a version retired, unlinked or renamed over, is truncated as its
	 * writes land: in its copies, as an unlinked file through its
	 * descriptor) */
	if (o->handed || o->complete) {
		eng_unlock();
		return o->handed ? CKC_HANDED : -EBADF;
	}
	if (o->wlevel == ckc_eng.ntier - 1) {
		rc = home_truncate(o, size);
	} else if (size > o->size) {
		/* growing: the new bytes read as zeros (again where the object
		 * moved to another tier while writes in flight landed) */
		for (;;) {
			rc = eng_write_room(o, size);
			if (!rc && o->wlevel == ckc_eng.ntier - 1) {
				rc = home_truncate(o, size);
				break;
			}
			if (rc)
				break;
			int wl = o->wlevel;
			while (o->place[wl].pins > 0 || o->migrating)
				eng_wait(o->migrating ? EC_MOVED : EC_PINS);
			if (o->wlevel != wl)
				continue;
			rc = eng_zero_fill(o, o->size, size);
			break;
		}
	}
	if (!rc) {
		o->size = size;
		o->writes++;
	}
	o->attr.mask &= ~CKC_ATTR_TIMES;
	eng_touch_mtime(o);
	eng_unlock();
	return rc;
}

int ckc_fallocate_home(ckc_handle_t *h, int mode, uint64_t off, uint64_t len)
{
	ckc_obj_t *o = h->o;

	if (!h->writer)
		return -ENOENT;
	ckc_mutex_lock(&ckc_eng.lock);
	eng_wait_idle(o, EB_MOVE | EB_HAND);
	if (o->handed || o->retired || o->complete || o->wlevel != ckc_eng.ntier - 1 || o->home_fd < 0) {
		eng_unlock();
		return -ENOENT;
	}
	/* the writer's own file, as its writes use it: without the lock,
	 * counted as a write (a hand-over or a move into the cache waits) */
	int fd = o->home_fd;
	o->writing++;
	eng_unlock();
	int rc = sys_fallocate(fd, mode, (off_t)off, (off_t)len) != 0 ? -errno : 0;
	ckc_mutex_lock(&ckc_eng.lock);
	if (!rc && !(mode & FALLOC_FL_KEEP_SIZE)) {
		if (off + len > o->size)
			o->size = off + len;
		eng_touch_mtime(o);
	}
	eng_write_end(o);
	eng_unlock();
	return rc;
}

bool ckc_handle_in_memory(const ckc_handle_t *h, bool wr)
{
	const ckc_obj_t *o = h->o;
	ckc_mutex_lock(&ckc_eng.lock);
	int level = o->handed ? -1 : wr ? (h->writer ? o->wlevel : -1) : ckc_best_level(o);
	bool mem = level >= 0 && level < ckc_eng.ntier - 1 && ckc_eng.tier[level].kind == TIER_HOST &&
		   !(wr && o->migrating);
	eng_unlock();
	return mem;
}

uint64_t ckc_handle_size(const ckc_handle_t *h)
{
	ckc_mutex_lock(&ckc_eng.lock);
	uint64_t s = h->o->size;
	eng_unlock();
	return s;
}

static void consume_locked(ckc_obj_t *o)
{
	if (!o->consumed) {
		o->consumed = true;
		ckc_eng.st.objects_consumed++;
	}
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		lc_state_t s = o->place[l].state;
		if (s == LC_WRITE_COMPLETE || s == LC_FLUSHED || s == LC_READ_COMPLETE)
			ckc_set_state(o, l, LC_EV_CONSUME);
	}
	hq_consume(ckc_eng.hq, o->key);
	/* a consumed checkpoint whose persistence is not required drops its
	 * pending flush */
	if (o->flush_edge >= 0 && !ckc_flush_wanted(o, o->flush_edge))
		ckc_flush_dequeue(o);
	ckc_node_note(o);
	ckc_trace("consume", o, 0, o->size, -1, 0);
	ckc_prefetch_room();
	eng_signal(EC_ROOM);
}

int ckc_close(ckc_handle_t *h)
{
	ckc_obj_t *o = h->o;
	int rc = 0;
	uint64_t t0 = h->writer ? ckc_now_ns() : 0;

	ckc_mutex_lock(&ckc_eng.lock);
	if (h->writer) {
		if (!o->retired && !o->complete) {
			eng_close_writer_locked(o);
			/* a rescued version is saved, and said where, as a
			 * flush that fails is */
			if (o->wlevel == ckc_eng.ntier - 1 && !o->at_home && !o->rescue)
				rc = -EIO;
			o->write_ns += ckc_now_ns() - t0;
			if (!rc && !o->retired)
				eng_aside_note(o);
		}
	} else if (o->complete && !o->retired &&
		   (o->size == 0 ||
		    (h->nrange == 1 && h->range[0][0] == 0 && h->range[0][1] >= o->size))) {
		consume_locked(o);
	}
	if (h->writer) {
		eng_writer_leave(o);
	} else {
		o->readers--;
	}
	ckc_obj_put(o);
	eng_unlock();
	if (h->home_fd >= 0)
		sys_close(h->home_fd);
	if (h->win)
		ckc_gpu_window_put(h->win);
	sys_free(h->range);
	sys_free(h);
	return rc;
}
