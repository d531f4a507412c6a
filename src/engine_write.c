/* The write path: opening a checkpoint for writing, its writes into the top tier (or through to its real path), truncation and close. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "ktouch.h"
#include "log.h"
#include "memlimit.h"
#include "path.h"
#include "state.h"
#include "sys.h"

/* ---- writing ------------------------------------------------------- */

uint64_t ckc_predict_size(void)
{
	uint64_t m = 0;
	for (int i = 0; i < ckc_eng.nrecent && i < CKC_PREDICT_SLOTS; i++)
		m = ckc_eng.recent[i] > m ? ckc_eng.recent[i] : m;
	return m;
}

int eng_canon(const char *path, char *out)
{
	return ckc_path_key(path, NULL, out, PATH_MAX);
}

/* Canonicalises path into key (PATH_MAX bytes) and takes the engine lock.
 * Returns 0 with the lock held, and *op the current version of key (NULL if
 * none, or if the engine is stopped); or -errno for a bad path, unlocked. */
CKC_TAGGED_PATH int eng_lookup_locked(const char *path, char *key, ckc_obj_t **op)
{
	int rc = eng_canon(path, key);
	if (rc)
		return rc;
	ckc_mutex_lock(&ckc_eng.lock);
	*op = ckc_eng.active ? ckc_map_find(key) : NULL;
	return 0;
}

/* key, the canonical form of path, with the lock held and the engine
 * running: 0; else -errno (-ENODEV: stopped), unlocked. */
CKC_TAGGED_PATH int eng_open_locked(const char *path, char *key)
{
	int rc = eng_canon(path, key);
	if (rc)
		return rc;
	ckc_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active) {
		eng_unlock();
		return -ENODEV;
	}
	return 0;
}

/* Undoes eng_handle_new for a handle never given out (lock held). */
static void eng_handle_drop(ckc_handle_t *h)
{
	ckc_obj_t *o = h->o;
	if (h->writer)
		eng_writer_leave(o);
	else
		o->readers--;
	ckc_obj_put(o);
	sys_free(h);
}

void eng_writer_leave(ckc_obj_t *o)
{
	if (--o->writers == 0) {
		if (o->wprev)
			o->wprev->wnext = o->wnext;
		else
			ckc_eng.writing = o->wnext;
		if (o->wnext)
			o->wnext->wprev = o->wprev;
		o->wnext = o->wprev = NULL;
	}
	atomic_fetch_sub_explicit(&ckc_eng_writers, 1, memory_order_relaxed);
}

ckc_handle_t *eng_handle_new(ckc_obj_t *o, bool writer)
{
	ckc_handle_t *h = sys_calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->o = o;
	h->writer = writer;
	h->home_fd = -1;
	ckc_obj_get(o);
	if (writer) {
		if (o->writers++ == 0) {
			o->wnext = ckc_eng.writing;
			if (o->wnext)
				o->wnext->wprev = o;
			ckc_eng.writing = o; /* (wprev NULL: eng_writer_leave) */
		}
		atomic_fetch_add_explicit(&ckc_eng_writers, 1, memory_order_relaxed);
	} else {
		o->readers++;
	}
	return h;
}

/* Where the model sends a new version o (lock held): the cache tier it
 * was given, or its real path when that wrote as fast for the program. */
static void aside_place(ckc_obj_t *o)
{
	if (!ckc_eng.aside.on || o->wlevel >= ckc_eng.ntier - 1 || ckc_eng.tier[o->wlevel].kind == TIER_GPU)
		return;
	/* a program whose checkpoints are small: they teach nothing, and the
	 * cache spares each one its file system's metadata operations */
	if (ckc_eng.nrecent > 0 && ckc_predict_size() < ASIDE_MIN_BYTES)
		return;
	o->aside_sample = true;
	o->grew = false;
	/* a try of the cache measures a write into room at hand, as the
	 * cache's later checkpoints find it, not the first touch of pages new
	 * to the process (1 MiB took 3.4 ms there, against 0.16 ms into the
	 * page cache's recycled pages): while its room is being populated,
	 * the checkpoint goes to the real path and the try waits */
	ckc_tier_t *t = &ckc_eng.tier[o->wlevel];
	bool defer = ckc_eng.aside.choice == ASIDE_HOME && aside_peek(&ckc_eng.aside) == ASIDE_CACHE &&
		     t->kind == TIER_HOST && !ckc_host_room_ready(t) && aside_defer(&ckc_eng.aside);
	if (!defer && aside_pick(&ckc_eng.aside) != ASIDE_HOME)
		return;
	o->aside_home = true;
	o->aside_level = o->wlevel;
	/* the last of the warm-up: the first try's room is populated while
	 * this one is written */
	if (t->kind == TIER_HOST && aside_try_soon(&ckc_eng.aside))
		ckc_host_expect(t);
	o->wlevel = ckc_eng.ntier - 1;
}

/* The time a version written to the cache costs the program for the
 * model: its write time; for a program known to end with its flushes
 * behind it (aside.ends_behind), where a flush on its way to the real path
 * was still behind the program when this one closed (an earlier version
 * in flight or queued on the same way down), the time that flush takes
 * for its bytes at the edge's measured speed, if longer: such a program
 * only defers the rest of the publication to its exit (lock held). */
static uint64_t aside_cost_ns(const ckc_obj_t *o)
{
	uint64_t ns = o->write_ns;

	if (o->aside_home || !ckc_eng.aside.ends_behind)
		return ns;
	for (int l = o->wlevel; l + 1 < ckc_eng.ntier; l++) {
		const ckc_edge_t *e = &ckc_eng.edge[l];
		bool behind = (e->current && e->current != o) || e->queued > (o->flush_edge == l ? 1u : 0u);
		/* before this process's first flush ends, the real path's
		 * write speed (what the record gave) stands for the flushes' */
		double bw = e->bw > 0 ? e->bw : ckc_eng.aside.bw[ASIDE_HOME];
		if (!behind || bw <= 0)
			continue;
		uint64_t flush_ns = (uint64_t)((double)o->size * 1e9 / bw);
		if (flush_ns > ns)
			ns = flush_ns;
	}
	return ns;
}

/* A written version's sample for the model, and the message, once, of
 * the first choice of the real paths over a cache that was tried (lock
 * held). */
void eng_aside_note(ckc_obj_t *o)
{
	aside_t *a = &ckc_eng.aside;

	if (!o->aside_sample)
		return;
	o->aside_sample = false;
	uint64_t ns = aside_cost_ns(o);
	if (ns > o->write_ns)
		a->capped++;
	aside_side_t side = o->aside_home ? ASIDE_HOME : ASIDE_CACHE;
	const ckc_tier_t *t = &ckc_eng.tier[o->wlevel];
	/* the write took room not populated before, or the toucher was still
	 * populating it (a sample that counts for its flush's time is that
	 * time's, not the touch's) */
	bool growing = side == ASIDE_CACHE && ns == o->write_ns && t->kind == TIER_HOST && t->grow &&
		       (o->grew || !atomic_load(&t->caught_up));
	bool changed = growing ? aside_note_growing(a, o->size, ns) : aside_note(a, side, o->size, ns);
	if (o->size >= ASIDE_MIN_BYTES)
		ckc_eng.aside_last[side] = o->version;
	o->aside_cached = !o->aside_home;
	/* the next checkpoint tries the cache: its room is populated first */
	if (aside_try_soon(a) && ckc_eng.tier[0].kind == TIER_HOST)
		ckc_host_expect(&ckc_eng.tier[0]);
	if (a->choice != ASIDE_HOME || !a->n[ASIDE_CACHE] || !a->n[ASIDE_HOME])
		return;
	if (!ckc_eng.aside_said) {
		ckc_eng.aside_said = true;
		ckc_info("checkpoints are written straight to their real paths: there the program wrote "
			 "%.2f GB/s, into the cache %.2f GB/s (CKPTCACHE_STEP_ASIDE=off keeps them in the "
			 "cache)", a->bw[ASIDE_HOME] / 1e9, a->bw[ASIDE_CACHE] / 1e9);
	} else if (changed) {
		ckc_debug("checkpoints go to their real paths again (%.2f GB/s there, %.2f GB/s in the "
			  "cache)", a->bw[ASIDE_HOME] / 1e9, a->bw[ASIDE_CACHE] / 1e9);
	}
}

/* Small checkpoints (all of the last few under ASIDE_MIN_BYTES) waiting
 * for publication beyond which a new one goes straight to its real path:
 * their time is the file system's metadata operations, which publishing
 * pays as the program would, plus the cache's own work, so a program that
 * makes them faster than its file system takes them only defers that
 * time to its end. */
#define ASIDE_SMALL_BACKLOG 64

/* Where a new checkpoint goes for that, or by the model of small
 * checkpoints when pick is set (lock held): a CKC_ASIDE_ answer. */
static int small_aside_locked(bool pick)
{
	if (!ckc_eng.aside.on || ckc_eng.nrecent < CKC_PREDICT_SLOTS || ckc_predict_size() >= ASIDE_MIN_BYTES)
		return CKC_ASIDE_NO;
	uint32_t queued = 0;
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		queued += ckc_eng.edge[l].queued;
	if (queued >= ASIDE_SMALL_BACKLOG) {
		ckc_eng.st.aside_objects++;
		if (!ckc_eng.small_said) {
			ckc_eng.small_said = true;
			ckc_info("small checkpoints are written straight to their real paths while %u wait "
				 "to be published (CKPTCACHE_STEP_ASIDE=off keeps them in the cache)", queued);
		}
		return CKC_ASIDE_BACKLOG;
	}
	if (!pick)
		return CKC_ASIDE_NO;
	/* a small checkpoint costs the program its file system's metadata
	 * operations on the real path, and the cache's own work in the cache
	 * (its publication then pays those operations beside the program):
	 * the model sends it where the program's last ones took less time */
	if (aside_pick(&ckc_eng.aside_small) == ASIDE_CACHE)
		return CKC_ASIDE_CACHE;
	ckc_eng.st.aside_objects++;
	return CKC_ASIDE_HOME;
}

CKC_TAGGED_PATH static bool aside_straight(int how)
{
	return how == CKC_ASIDE_BACKLOG || how == CKC_ASIDE_HOME;
}

CKC_TAGGED_PATH void ckc_small_note(int side, uint64_t ns)
{
	if (side != CKC_ASIDE_HOME && side != CKC_ASIDE_CACHE)
		return;
	ckc_mutex_lock(&ckc_eng.lock);
	aside_t *a = &ckc_eng.aside_small;
	bool changed = aside_note_time(a, side == CKC_ASIDE_HOME ? ASIDE_HOME : ASIDE_CACHE, ns);
	if (changed && a->choice == ASIDE_HOME && !ckc_eng.small_model_said) {
		ckc_eng.small_model_said = true;
		ckc_info("small checkpoints are written straight to their real paths: there the program "
			 "took %.1f us for one, through the cache %.1f us (CKPTCACHE_STEP_ASIDE=off keeps them "
			 "in the cache)", 1e6 / a->bw[ASIDE_HOME], 1e6 / a->bw[ASIDE_CACHE]);
	}
	eng_unlock();
}

CKC_TAGGED_PATH void ckc_small_asked(uint64_t size, uint64_t ns)
{
	if (size < ASIDE_MIN_BYTES)
		ckc_small_note(CKC_ASIDE_CACHE, ns);
}

static int open_write(const char *path, mode_t mode, bool aside_ok, ckc_handle_t **hp);

/* Whether a version of key opened write-only goes straight to the real
 * file for the small checkpoints waiting (lock held; old: the version the
 * cache holds, which no publication is committing). It may replace old
 * only where the real file holds it (its name, mode and existence are
 * what the program's open meets there) and nobody reads it; old is then
 * forgotten (its flush stands down). */
/* Another thread's open of a path that one open just sent straight to the
 * real file: between that decision and its open of the real file (which
 * then announces it, ckc_node_inplace_any), a version cached now would
 * find at its publication the file truncated and written after it began,
 * as if by another program. So for a while after the decision (the open
 * that follows takes microseconds) the path's other opens go there too,
 * as every open of a file shares the file without the library. The same
 * after a writer of the path is handed over to the real file (a second
 * open of it while it was written): the open that asked for it reaches
 * the real file after the hand-over, and the writer's descriptor is
 * switched there at its next call. */
#define STRAIGHT_NS 100000000ull
/* (renewed by the opens it sends there, a second at most from the model's
 * decision: a path rewritten every few milliseconds by one thread goes
 * back to the model's choice) */
#define STRAIGHT_MAX_NS 1000000000ull
#define STRAIGHT_SLOTS ((int)(sizeof(ckc_eng.straight) / sizeof(ckc_eng.straight[0])))

static void straight_note(const char *key, bool forced)
{
	uint64_t h = ckc_path_hash(key), now = ckc_now_ns();
	int pick = 0;
	bool found = false;
	for (int i = 0; i < STRAIGHT_SLOTS; i++) {
		if (ckc_eng.straight[i].hash == h) {
			pick = i;
			found = true;
			break;
		}
		if (ckc_eng.straight[i].until_ns < ckc_eng.straight[pick].until_ns)
			pick = i;
	}
	if (!found || !forced || ckc_eng.straight[pick].until_ns <= now)
		ckc_eng.straight[pick].since_ns = now;
	ckc_eng.straight[pick].hash = h;
	uint64_t until = now + STRAIGHT_NS, most = ckc_eng.straight[pick].since_ns + STRAIGHT_MAX_NS;
	ckc_eng.straight[pick].until_ns = until < most ? until : most;
}

void eng_straight_note(const char *key)
{
	straight_note(key, false);
}

CKC_TAGGED_PATH static bool straight_now(const char *key)
{
	uint64_t h = 0, now = 0;
	for (int i = 0; i < STRAIGHT_SLOTS; i++) {
		if (!ckc_eng.straight[i].until_ns)
			continue;
		if (!now) {
			now = ckc_now_ns();
			h = ckc_path_hash(key);
		}
		if (ckc_eng.straight[i].hash == h && ckc_eng.straight[i].until_ns > now)
			return true;
	}
	return false;
}

/* Fresh versions redirected in a row (ckc_redirect_noted), and how many
 * send the next ones straight: a shell's redirections cost it a version
 * made in the cache and a hand-over each, two to three times what its
 * open of the real file costs (300 "echo >file" took 126 ms against 98 ms
 * without the library). One open in REDIRECT_TRY goes to the cache all
 * the same: a program that closes it itself, as its checkpoints, ends
 * the streak (lock held). */
static atomic_uint redirect_streak;
static unsigned redirect_sent;
#define REDIRECT_STREAK 3
#define REDIRECT_TRY 16

void ckc_redirect_noted(void)
{
	atomic_fetch_add_explicit(&redirect_streak, 1, memory_order_relaxed);
}

CKC_TAGGED_PATH static bool redirect_straight(void)
{
	return ckc_eng.aside.on && atomic_load_explicit(&redirect_streak, memory_order_relaxed) >= REDIRECT_STREAK &&
	       ++redirect_sent % REDIRECT_TRY != 0;
}

CKC_TAGGED_PATH static int small_aside_takes(const char *key, ckc_obj_t *old, bool pick, bool redirect)
{
	if (old && !(old->complete && old->at_home && !old->retired && old->readers == 0 &&
		     !old->passed_read))
		return CKC_ASIDE_NO;
	/* (such an open goes there untimed, and renews the window within its
	 * bound: the model decides again once it ends; a redirection's streak
	 * counts at the first look of a write-only O_TRUNC open only,
	 * ckc_write_aside's: the second, ckc_open_write_only's, follows a first
	 * that kept it in the cache, and an O_RDWR or O_EXCL open, which has
	 * only that one, is no shell's redirection) */
	bool forced = straight_now(key) || (redirect && redirect_straight());
	int how = forced ? CKC_ASIDE_BACKLOG : small_aside_locked(pick);
	if (aside_straight(how)) {
		if (old)
			ckc_obj_retire(old);
		straight_note(key, forced);
	}
	return how;
}

CKC_TAGGED_PATH int ckc_write_aside(const char *path, bool trunc)
{
	char key[PATH_MAX];
	if (eng_open_locked(path, key))
		return CKC_ASIDE_NO;
	ckc_obj_t *old = ckc_map_find(key);
	/* a publication of it under way: open_write waits for it, then decides */
	int how = ckc_eng.draining || (old && old->home_busy) || ckc_committing(key) ? CKC_ASIDE_NO :
										       small_aside_takes(key, old, true, trunc);
	eng_unlock();
	return how;
}

int ckc_open_write(const char *path, mode_t mode, ckc_handle_t **hp)
{
	return open_write(path, mode, false, hp);
}

int ckc_open_write_only(const char *path, mode_t mode, ckc_handle_t **hp)
{
	return open_write(path, mode, true, hp);
}

static int open_write(const char *path, mode_t mode, bool aside_ok, ckc_handle_t **hp)
{
	char key[PATH_MAX];
	uint64_t t0 = ckc_now_ns();
	int rc = eng_open_locked(path, key);
	if (rc)
		return rc;
	/* a publication of this path under way ends first, so that the file
	 * this version replaces is the one recorded below */
	ckc_obj_t *old;
	while (((old = ckc_map_find(key)) && old->home_busy) || ckc_committing(key))
		eng_wait(EC_HOME);
	if (ckc_eng.draining) {
		/* the program ends: the new version goes to the real file
		 * directly, after any publication of the old one */
		while (old && (old->home_busy || old->flushing) && !old->retired)
			eng_wait(old->home_busy ? EC_HOME : EC_FLUSHED);
		if (old && !old->retired)
			ckc_obj_retire(old);
		eng_unlock();
		return -ENODEV;
	}
	if (aside_ok && aside_straight(small_aside_takes(key, old, false, false))) {
		eng_unlock();
		return -ENODEV; /* the program writes the real file */
	}
	/* a rewrite of a version not published yet (O_TRUNC): the kernel
	 * would truncate that same file, so the file of its identity, with
	 * the inode stat reported, is this version's to name */
	eng_id_t id = { .fd = -1 };
	/* the owner the program gave the version it replaces, where it has
	 * not reached the real file (the publication that was to bring it is
	 * cancelled with it): the kernel's truncation keeps the file's, so
	 * the new version has it (its mode comes with the caller's mode,
	 * open_tagged's look at that version) */
	bool kept_owner = old && !old->at_home && (old->attr.mask & CKC_ATTR_OWNER);
	uid_t kept_uid = kept_owner ? old->attr.uid : (uid_t)-1;
	gid_t kept_gid = kept_owner ? old->attr.gid : (gid_t)-1;
	if (old) {
		eng_id_detach(old, &id);
		ckc_obj_retire(old);
	}
	ckc_obj_t *o = eng_obj_new(key);
	eng_id_attach(o, &id);
	ckc_handle_t *h = o ? eng_handle_new(o, true) : NULL;
	if (!h) {
		if (o)
			ckc_obj_retire(o);
		eng_unlock();
		return -ENOMEM;
	}
	o->mode = mode & 07777;
	if (kept_owner) {
		o->attr.mask |= CKC_ATTR_OWNER;
		o->attr.uid = kept_uid;
		o->attr.gid = kept_gid;
	}
	eng_touch_mtime(o);
	o->wrote_at = o->opened_at = t0;
	o->wlevel = ckc_eng.ntier > 1 ? 0 : ckc_eng.ntier - 1;
	/* a gpu tier without device memory yet (no capture so far) */
	if (o->wlevel == 0 && ckc_eng.tier[0].kind == TIER_GPU && !ckc_gpu_usable(&ckc_eng.tier[0]))
		o->wlevel = 1;
	int cache_level = o->wlevel;
	if (aside_ok)
		aside_place(o);
	if (o->wlevel == ckc_eng.ntier - 1 &&
	    (rc = eng_home_temp(o)) != 0) {
		if (!o->aside_home) {
			ckc_obj_retire(o);
			eng_handle_drop(h);
			eng_unlock();
			return rc;
		}
		/* the real path's folder takes no new file now: the cache
		 * holds the version, as it would have without the choice */
		o->aside_home = o->aside_sample = false;
		o->wlevel = cache_level;
		rc = 0;
	}
	if (o->aside_home)
		ckc_eng.st.aside_objects++;
	if (o->wlevel < ckc_eng.ntier - 1)
		ckc_set_state(o, o->wlevel, LC_EV_WRITE_BEGIN);
	ckc_trace("open-write", o, 0, 0, o->wlevel, 0);
	ckc_node_note(o);
	eng_unlock();
	/* no handle is out yet: nothing can publish o meanwhile */
	ckc_fid_t base;
	dev_t dev = 0;
	ckc_fid_take(key, &base);
	bool dev_known = ckc_home_dev(key, &base, &dev);
	ckc_mutex_lock(&ckc_eng.lock);
	eng_set_base(o, &base);
	o->home_dev = dev;
	o->home_dev_known = dev_known;
	o->write_ns += ckc_now_ns() - t0;
	eng_unlock();
	*hp = h;
	return 0;
}

/* Copies bytes [0, size) of src into o's copy at bounded level `to`
 * (lock held; dropped while the bytes move). */
static int copy_into_tier(ckc_obj_t *o, const ckc_src_t *src, int to, uint64_t size)
{
	ckc_src_t dst;
	int rc = ckc_src_snapshot(o, to, &dst);

	if (rc)
		return rc;
	o->place[to].pins++;
	eng_unlock();
	rc = ckc_src_copy(src, &dst, size, NULL, NULL);
	ckc_mutex_lock(&ckc_eng.lock);
	o->place[to].pins--;
	eng_signal(EC_PINS);
	ckc_src_release(&dst);
	return rc;
}


/* Moves the bytes written so far from the write tier to the next tier that
 * takes them (the object outgrew its tier, or the tier failed), or with
 * home_only to a temporary file at home. Lock held; dropped while the bytes
 * move. Returns 0 or -errno. */
int eng_migrate_to(ckc_obj_t *o, bool home_only)
{
	int from = o->wlevel, home = ckc_eng.ntier - 1, rc = 0;
	ckc_place_t *fp = &o->place[from];
	ckc_src_t src;

	o->migrating = true;
	while (fp->pins > 0)
		eng_wait(EC_PINS);
	ckc_eng.tier[from].st.bypasses++;
	uint64_t size = o->size;
	if ((rc = ckc_src_snapshot(o, from, &src)) != 0)
		goto out;
	int to;
	for (to = home_only ? home : from + 1; to < home; to++) {
		if (!ckc_tier_takes(o, to))
			continue;
		rc = ckc_place_reserve(o, to, size ? size : 1, CKC_ALLOC_WRITE, 0);
		if (rc == -ENOSPC) {
			ckc_eng.tier[to].st.bypasses++;
			continue;
		}
		if (rc)
			break;
		ckc_set_state(o, to, LC_EV_WRITE_BEGIN);
		rc = copy_into_tier(o, &src, to, arena_round(&ckc_eng.tier[to].arena, size));
		if (!rc)
			break;
		ckc_warn("%s tier: could not store %s (%s); trying the next tier",
			 ckc_eng.tier[to].name, o->key, strerror(-rc));
		ckc_eng.tier[to].st.flush_errors++;
		ckc_place_free(o, to);
		ckc_set_state(o, to, LC_EV_DROP);
	}
	if (to == home) {
		rc = eng_home_temp(o);
		if (!rc) {
			int fd = o->home_fd;
			eng_unlock();
			rc = ckc_home_fill(fd, &src, size, NULL, NULL);
			ckc_mutex_lock(&ckc_eng.lock);
		}
	}
	ckc_src_release(&src);
	if (rc) {
		/* (a full descriptor table as the program ends: the hand-over
		 * tries another way, and says what it could not do) */
		if (!(home_only && ckc_eng.draining && ckc_io_short(rc)))
			ckc_error("checkpoint %s could not move out of the %s tier (%s)", o->key,
				  ckc_eng.tier[from].name, strerror(-rc));
		goto out;
	}
	if (from == 0 && o->gref)
		eng_ref_detach(o);
	else
		ckc_place_free(o, from);
	ckc_set_state(o, from, LC_EV_DROP);
	o->wlevel = to;
	ckc_trace("bypass", o, 0, size, to, 0);
out:
	eng_move_end(o);
	return rc;
}

int eng_migrate_down(ckc_obj_t *o)
{
	return eng_migrate_to(o, false);
}

/* Makes the write tier's copy of o hold end bytes. Lock held. */
int eng_write_room(ckc_obj_t *o, uint64_t end)
{
	while (o->wlevel < ckc_eng.ntier - 1) {
		ckc_place_t *p = &o->place[o->wlevel];
		uint64_t have = ckc_place_bytes(p);
		if (end <= have)
			return 0;
		uint64_t cap = ckc_place_limit(o, o->wlevel), need;
		if (have == 0) {
			uint64_t guess = ckc_predict_size();
			need = end > guess ? end : guess;
			/* the last checkpoints' size where known: a reservation
			 * of CKC_MIN_RESERVE for each small file had the host
			 * tier populate room beyond it, which the next file
			 * did not take once this one was cut to its size */
			if (need < CKC_MIN_RESERVE && end <= CKC_MIN_RESERVE && !guess)
				need = CKC_MIN_RESERVE;
		} else {
			need = end > 2 * have ? end : 2 * have;
		}
		if (need > cap)
			need = end;
		int rc = ckc_place_reserve(o, o->wlevel, need, CKC_ALLOC_WRITE, 0);
		if (rc == -ENOSPC && need > end)
			rc = ckc_place_reserve(o, o->wlevel, end, CKC_ALLOC_WRITE, 0);
		if (rc == 0)
			return 0;
		if (rc != -ENOSPC)
			return rc;
		if ((rc = eng_migrate_down(o)) != 0)
			return rc;
	}
	return 0;
}

static int device_bounce(uint64_t dsrc, size_t len, ckc_tier_t *t, uint64_t aoff, int fd);

/* Copies len bytes at device address dsrc into tier t at aoff. */
static int put_from_device(ckc_tier_t *t, uint64_t aoff, uint64_t dsrc, size_t len)
{
	ckc_tier_t *g = &ckc_eng.tier[0];

	if (t->kind == TIER_GPU)
		return ckc_gpu_dtod(t, t->gpu->base + aoff, dsrc, len);
	if (t->kind == TIER_HOST)
		return ckc_gpu_dtoh(g, t->base + aoff, dsrc, len);
	return device_bounce(dsrc, len, t, aoff, -1);
}

/* Device bytes to a tier without memory of its own, or to a file (fd >= 0,
 * at file offset aoff), through host memory. */
static int device_bounce(uint64_t dsrc, size_t len, ckc_tier_t *t, uint64_t aoff, int fd)
{
	size_t chunk = len < (8u << 20) ? len : (8u << 20);
	char *bounce = sys_malloc(chunk);
	int rc = bounce ? 0 : -ENOMEM;

	while (!rc && len > 0) {
		size_t n = len < chunk ? len : chunk;
		rc = ckc_gpu_dtoh(&ckc_eng.tier[0], bounce, dsrc, n);
		if (!rc)
			rc = fd >= 0 ? ckc_io_pwrite_all(fd, bounce, n, (off_t)aoff) :
				       ckc_tier_put(t, aoff, bounce, n);
		dsrc += n;
		aoff += n;
		len -= n;
	}
	sys_free(bounce);
	return rc;
}

/* Copies buf (or, when buf is NULL, the device bytes at dsrc) into the
 * write tier's copy at off (lock held; dropped while the bytes move). */
static int write_bytes(ckc_obj_t *o, const void *buf, uint64_t dsrc, size_t len, uint64_t off)
{
	ckc_tier_t *t = &ckc_eng.tier[o->wlevel];
	ckc_place_t *p = &o->place[o->wlevel];
	ckc_ext_t seg[8];
	const char *src = buf;

	/* no buffer and no device address: the program's NULL, which the
	 * kernel answers with EFAULT (taken for a device address, it was
	 * copied from, on a machine with no GPU too) */
	if (!buf && !dsrc)
		return -EFAULT;
	while (len > 0) {
		int n = ckc_place_segments(p, off, len, seg, 8);
		if (n == -E2BIG)
			n = 8;
		else if (n < 0)
			return n;
		p->pins++;
		eng_unlock();
		int rc = 0;
		bool big = buf && len >= CKC_PROG_COPY_MIN;
		const char *src0 = src;
		if (big)
			ckc_prog_begin();
		ckc_tl_program_write = big;
		for (int i = 0; i < n && !rc; i++) {
			rc = buf ? ckc_tier_put(t, seg[i].aoff, src, seg[i].alen) :
				   put_from_device(t, seg[i].aoff, dsrc, seg[i].alen);
			src += seg[i].alen;
			dsrc += seg[i].alen;
			off += seg[i].alen;
			len -= seg[i].alen;
		}
		ckc_tl_program_write = false;
		if (big)
			ckc_prog_end();
		if (big && !rc)
			ckc_ktouch_note(src0, (size_t)(src - src0));
		ckc_mutex_lock(&ckc_eng.lock);
		ckc_unpin(o, t->level);
		if (rc)
			return rc;
	}
	return 0;
}

int eng_zero_fill(ckc_obj_t *o, uint64_t from, uint64_t to)
{
	static const char zeros[CKC_ALIGN];
	int rc = 0, wl = o->wlevel;
	/* a file system write (the ssd tier) runs without the lock: the
	 * object's writes, moves and hand-over wait meanwhile (migrating), so
	 * no concurrent writer of the range can be overwritten; a tier in
	 * memory is filled with the lock held */
	bool io = ckc_eng.tier[wl].kind == TIER_SSD;

	if (io)
		o->migrating = true;
	while (!rc && from < to) {
		size_t n = to - from < sizeof(zeros) ? (size_t)(to - from) : sizeof(zeros);
		ckc_place_t *p = &o->place[wl];
		ckc_ext_t seg;
		if (ckc_place_segments(p, from, n, &seg, 1) != 1)
			n = 1 + (size_t)((from | (CKC_ALIGN - 1)) - from);
		if (ckc_place_segments(p, from, n, &seg, 1) != 1) {
			rc = -EIO;
		} else if (io) {
			p->pins++;
			eng_unlock();
			rc = ckc_tier_put(&ckc_eng.tier[wl], seg.aoff, zeros, n);
			ckc_mutex_lock(&ckc_eng.lock);
			ckc_unpin(o, wl);
		} else {
			rc = ckc_tier_put(&ckc_eng.tier[wl], seg.aoff, zeros, n);
		}
		from += n;
	}
	if (io)
		eng_move_end(o);
	return rc;
}

ssize_t ckc_pwrite(ckc_handle_t *h, const void *buf, size_t len, uint64_t off)
{
	return eng_pwrite_src(h, buf, 0, len, off);
}

/* pwrite_locked's answer when the write must start over (its tier changed
 * under it). */
#define PW_AGAIN (-4097)

/* A checkpoint the model sent to its real path as a sample whose writes
 * are small (a record at a time, without a buffer of the program's) moves
 * into the cache it was taken from: there each write costs a copy, at
 * the real path a system call (100-byte writes: 0.2 us against 1.5 us on
 * a 2-core machine), and the library's own work on each call made the
 * sample slower than the program without the library. What it wrote so
 * far is the model's sample of the real path. Looked at after
 * PROMOTE_EVERY writes, and again PROMOTE_EVERY later, or PROMOTE_SOON
 * where the cache's room is not populated yet (a first touch of its pages
 * costs more than the writes save) or another write or read of it is
 * under way. */
#define PROMOTE_EVERY 4096u
#define PROMOTE_MEAN 1024u                 /* mean bytes of a write, at most */
#define PROMOTE_MAX ((uint64_t)64 << 20)   /* bytes so far, copied back, at most */
#define PROMOTE_CHUNK ((size_t)CKC_PROG_COPY_MIN / 2) /* (a copy of the library's, not the program's) */

static bool promote_due(const ckc_obj_t *o)
{
	return o->aside_home && o->aside_sample && o->writes >= (o->promote_at ? o->promote_at : PROMOTE_EVERY) &&
	       o->size <= o->writes * PROMOTE_MEAN && o->size <= PROMOTE_MAX;
}

/* Writes before the next look after one that could not move o: soon where
 * what stood in the way passes (another thread's write or read of it
 * under way: threads writing records side by side), else PROMOTE_EVERY. */
#define PROMOTE_SOON 64u

/* Lock held (dropped while the bytes move); the caller's write is the only
 * one under way. Returns 0 where o now writes into the cache. */
static int eng_promote(ckc_obj_t *o)
{
	int to = o->aside_level, home = ckc_eng.ntier - 1;
	ckc_tier_t *t = &ckc_eng.tier[to];

	o->promote_at = o->writes + PROMOTE_EVERY;
	if (to >= home || t->kind != TIER_HOST || o->readers > 0 || o->home_fd < 0 || o->home_live ||
	    o->handing || o->handed || o->retired || o->passed_read || !ckc_tier_takes(o, to))
		return -EAGAIN;
	if (o->writing != 1 || o->home_reads > 0 || o->home_busy || o->migrating || !ckc_host_room_ready(t)) {
		o->promote_at = o->writes + PROMOTE_SOON;
		return -EAGAIN;
	}
	uint64_t size = o->size, guess = ckc_predict_size(), need = size > guess ? size : guess;
	uint64_t cap = ckc_place_limit(o, to);
	if (need > cap)
		need = size;
	char *buf = size ? sys_malloc(size < PROMOTE_CHUNK ? (size_t)size : PROMOTE_CHUNK) : NULL;
	if (size && !buf)
		return -ENOMEM;
	o->migrating = true;
	int rc = ckc_place_reserve(o, to, need ? need : 1, CKC_ALLOC_WRITE, 0);
	if (rc == 0) {
		ckc_set_state(o, to, LC_EV_WRITE_BEGIN);
		o->wlevel = to;
		int fd = o->home_fd;
		for (uint64_t off = 0; !rc && off < size;) {
			size_t n = size - off < PROMOTE_CHUNK ? (size_t)(size - off) : PROMOTE_CHUNK;
			eng_unlock();
			ssize_t r = ckc_io_pread_all(fd, buf, n, (off_t)off);
			ckc_mutex_lock(&ckc_eng.lock);
			rc = r < 0 ? (int)r : (size_t)r < n ? -EIO : write_bytes(o, buf, 0, n, off);
			off += n;
		}
		if (rc) {
			ckc_place_free(o, to);
			ckc_set_state(o, to, LC_EV_DROP);
			o->wlevel = home;
		}
	}
	sys_free(buf);
	if (!rc) {
		/* the model's sample: the real path's time for what went there */
		aside_note_rate(&ckc_eng.aside, ASIDE_HOME, size, o->write_ns);
		o->aside_home = o->aside_sample = false;
		ckc_eng.st.aside_moved++;
		int fd = o->home_fd;
		char *tmp = o->home_tmp;
		o->home_fd = -1;
		o->home_tmp = NULL;
		/* the emptied file keeps the identity stat reported, for the
		 * first publication to name (eng_id_return) */
		o->id_lent = true;
		eng_id_return(o, fd, tmp);
		ckc_trace("promote", o, 0, size, to, 0);
		ckc_debug("checkpoint %s: its writes are small (%llu bytes in %llu): into the cache", o->key,
			  (unsigned long long)size, (unsigned long long)o->writes);
	} else {
		ckc_debug("checkpoint %s stays at its real path (the cache could not take it: %s)", o->key,
			  strerror(-rc));
	}
	eng_move_end(o);
	return rc;
}

/* A write of len bytes at off landed (lock held). */
static void write_noted(ckc_obj_t *o, uint64_t off, size_t len, uint64_t t0)
{
	if (off + len > o->size)
		o->size = off + len;
	o->writes++;
	o->wrote_at = t0;
	/* each write sets the modification time, as on a real file (also
	 * after utimes): a checkpoint closed after another was written is
	 * still the older */
	o->attr.mask &= ~CKC_ATTR_TIMES;
	eng_touch_mtime(o);
	ckc_tier_stats_t *st = &ckc_eng.tier[o->wlevel].st;
	st->put_ops++;
	st->put_bytes += len;
	ckc_trace("write", o, off, len, o->wlevel, t0);
}

/* One attempt at a write (lock held throughout, dropped while bytes move). */
static ssize_t pwrite_locked(ckc_obj_t *o, const void *buf, uint64_t dsrc, const struct iovec *iov, int cnt,
			     size_t len, uint64_t off, uint64_t t0)
{
	uint64_t end = off + len;
	int rc;

	/* a version retired (unlinked, renamed over, replaced) keeps its
	 * copies while a handle is open (ckc_obj_gone): its writer writes on,
	 * and reads back what it wrote, as into an unlinked file */
	eng_wait_idle(o, EB_MOVE);
	/* a vector goes whole to the real file only (one moving into the
	 * cache for its small writes takes the pieces one by one) */
	bool home = o->wlevel == ckc_eng.ntier - 1, due = home && promote_due(o);
	if (iov && (!home || due))
		return -EAGAIN;
	if ((rc = eng_write_room(o, end)) != 0)
		return rc;
	/* a write by a process without privilege clears the set-user-ID bit,
	 * and the set-group-ID bit of a file its group may run, as the kernel
	 * does on the real file's */
	if ((o->mode & (S_ISUID | S_ISGID)) && geteuid() != 0)
		eng_clear_setid(o);
	if (due && eng_promote(o) == 0)
		return PW_AGAIN;
	if (o->wlevel == ckc_eng.ntier - 1) {
		int fd = o->home_fd;
		/* the cache's background copies give way to it, as to a
		 * write into the cache */
		bool big = (buf || iov) && len >= CKC_PROG_COPY_MIN;
		eng_unlock();
		if (big)
			ckc_prog_begin();
		if (buf || iov || !dsrc) {
			/* a write the real file takes in part (a file size
			 * limit reached, perhaps set from outside the program;
			 * a piece of a vector the kernel cannot read): a short
			 * write, as the kernel's (a NULL buffer is the
			 * kernel's to refuse) */
			ssize_t n = iov ? ckc_io_pwritev_most(fd, iov, cnt, (off_t)off) :
					  ckc_io_pwrite_most(fd, buf, len, (off_t)off);
			rc = n < 0 ? (int)n : 0;
			if (n > 0)
				ckc_home_wrote((uint64_t)n);
			if (n > 0 && (size_t)n < len) {
				len = (size_t)n;
				end = off + len;
			}
		} else {
			rc = device_bounce(dsrc, len, NULL, off, fd);
		}
		if (big)
			ckc_prog_end();
		ckc_mutex_lock(&ckc_eng.lock);
	} else {
		/* a write past the end leaves a hole; writes still in flight
		 * below it may fill it first, so let them land and look again */
		int wl = o->wlevel;
		while (off > o->size && o->place[wl].pins > 0)
			eng_wait(EC_PINS);
		if (o->migrating || o->wlevel != wl)
			return PW_AGAIN;
		if (off > o->size && (rc = eng_zero_fill(o, o->size, off)) != 0)
			return rc;
		if (off > o->size)
			o->size = off;
		rc = write_bytes(o, buf, dsrc, len, off);
		if (rc && rc != -ENOMEM && rc != -EFAULT && !o->retired) {
			/* the tier failed: move what is written down and retry
			 * (EFAULT: the program's buffer could not be read) */
			ckc_warn("%s tier: write of %s failed (%s)", ckc_eng.tier[o->wlevel].name,
				 o->key, strerror(-rc));
			ckc_eng.tier[o->wlevel].st.flush_errors++;
			if (eng_migrate_down(o) == 0)
				return PW_AGAIN;
		}
	}
	if (!rc)
		write_noted(o, off, len, t0);
	return rc ? rc : (ssize_t)len;
}

/* A write of buf, of the device bytes at dsrc (buf NULL), or of the cnt
 * pieces of iov (only where o is written through to its real path:
 * -EAGAIN otherwise), len bytes at off. */
static ssize_t eng_write(ckc_handle_t *h, const void *buf, uint64_t dsrc, const struct iovec *iov, int cnt,
			 size_t len, uint64_t off)
{
	ckc_obj_t *o = h->o;
	uint64_t t0 = ckc_now_ns();
	ssize_t rc = CKC_HANDED;

	if (!h->writer)
		return -EBADF;
	if (len == 0)
		return 0;
	if (off + len < off)
		return -EFBIG;
	ckc_mutex_lock(&ckc_eng.lock);
	eng_wait_idle(o, EB_HAND); /* its bytes so far are being published */
	if (!o->handed) {
		/* a hand-over waits for the writes under way (ckc_handoff) */
		o->writing++;
		do
			rc = pwrite_locked(o, buf, dsrc, iov, cnt, len, off, t0);
		while (rc == PW_AGAIN);
		o->write_ns += ckc_now_ns() - t0;
		eng_write_end(o);
	}
	bool kstamp = o->stamp_kernel;
	struct timespec fine = o->stamped;
	eng_unlock();
	if (kstamp)
		eng_stamp_kernel(o, fine);
	return rc;
}

ssize_t eng_pwrite_src(ckc_handle_t *h, const void *buf, uint64_t dsrc, size_t len, uint64_t off)
{
	return eng_write(h, buf, dsrc, NULL, 0, len, off);
}

ssize_t ckc_pwritev_home(ckc_handle_t *h, const struct iovec *iov, int cnt, size_t len, uint64_t off)
{
	return eng_write(h, NULL, 0, iov, cnt, len, off);
}

void eng_clear_setid(ckc_obj_t *o)
{
	o->mode &= ~(mode_t)S_ISUID;
	if (o->mode & S_IXGRP)
		o->mode &= ~(mode_t)S_ISGID;
	o->attr.mode = o->mode; /* (a chmod recorded for the publication) */
}

int eng_close_home_writer(ckc_obj_t *o)
{
	int fd = o->home_fd;
	char *tmp = o->home_tmp;
	bool live = o->home_live;

	o->home_fd = -1;
	o->home_tmp = NULL;
	o->home_live = false;
	o->home_busy = true;
	ckc_attr_t attr = o->attr;
	ckc_fid_t base = o->base, now;
	eng_unlock();
	int rc;
	if (live) {
		/* handed over already: the file is at its real path */
		rc = ckc_attr_apply_fd(fd, &attr);
		if (sys_close(fd) != 0 && !rc)
			rc = -errno;
		if (!rc)
			ckc_fid_take(o->key, &now);
	} else {
		/* the descriptor stays open until the file has its name: if it
		 * cannot get it, or a newer file is there (CKC_CHANGED), the
		 * bytes are read back from it (below) */
		rc = ckc_home_commit_open(tmp, o->key, fd, &attr, &base);
		if (!rc) {
			if (sys_close(fd) != 0)
				ckc_error("checkpoint %s: closing its real file failed (%s)", o->key, strerror(errno));
			ckc_fid_take(o->key, &now);
		}
	}
	ckc_mutex_lock(&ckc_eng.lock);
	eng_home_end(o);
	/* the temporary file may have no name (O_TMPFILE): its bytes are read
	 * back through its descriptor */
	char self[64];
	snprintf(self, sizeof(self), "/proc/thread-self/fd/%d", fd);
	ckc_src_t held = { .path = self };
	if (rc == CKC_CHANGED) {
		ckc_keep_newer(o, &held, o->size);
		eng_close_later(fd, tmp);
		tmp = NULL;
	} else if (!rc) {
		eng_set_home(o, true);
		eng_set_base(o, &now);
		/* the time the kernel put on the file it wrote (the times the
		 * program set, where it set them), which a look at the
		 * checkpoint now reports, as its real file does */
		if (now.exists)
			o->mtime = now.mtime;
		/* a stamp of the kernel's, which the cache's next ones must not
		 * be older than (ckc_file_now) */
		if (now.exists && !(attr.mask & CKC_ATTR_TIMES))
			ckc_stamp_seen(&now.mtime);
		ckc_node_note(o);
	} else {
		ckc_error("checkpoint %s could not be written to its real path (%s)", o->key,
			  strerror(-rc));
		if (!live) {
			int r2 = ckc_rescue_save(o, &held, o->size);
			eng_close_later(fd, NULL);
			if (r2) {
				ckc_error("checkpoint %s could not be saved to a rescue file either (%s): "
					  "it is lost", o->key, strerror(-r2));
				ckc_eng.st.lost++;
			}
		}
	}
	sys_free(tmp);
	eng_signal(EC_HOME); /* its real file's state is settled */
	return rc;
}

void eng_close_writer_locked(ckc_obj_t *o)
{
	int rc = 0;

	/* a hand-over under way ends first (it closes a written-through
	 * version's file itself), and so does the exit's (home_busy): both
	 * would otherwise commit the same temporary file */
	eng_wait_idle(o, EB_MOVE | EB_HAND | EB_HOME);
	if (o->complete || o->retired)
		return;
	/* published by an fsync with no write since: the real file is this
	 * version, as it was made durable or not */
	bool home = eng_home_snap(o) && o->wlevel < ckc_eng.ntier - 1;
	o->complete = true;
	if (home) {
		eng_set_home(o, true);
		o->durable = o->home_snap_durable;
	} else {
		eng_note_owed(o);
	}
	o->home_snap = false;
	if (o->wlevel == ckc_eng.ntier - 1) {
		rc = eng_close_home_writer(o);
	} else {
		ckc_place_trim(o, o->wlevel, o->size);
		ckc_set_state(o, o->wlevel, LC_EV_WRITE_END);
		if (ckc_flush_wanted(o, o->wlevel))
			ckc_flush_enqueue(o, o->wlevel);
		else if (home)
			ckc_mark_safe(o);
	}
	(void)rc;
	/* a version the program wrote and closed itself: not a shell's */
	if (atomic_load_explicit(&redirect_streak, memory_order_relaxed))
		atomic_store_explicit(&redirect_streak, 0, memory_order_relaxed);
	memmove(ckc_eng.recent + 1, ckc_eng.recent, sizeof(ckc_eng.recent) - sizeof(uint64_t));
	ckc_eng.recent[0] = o->size;
	if (ckc_eng.nrecent < CKC_PREDICT_SLOTS)
		ckc_eng.nrecent++;
	ckc_eng.st.objects_written++;
	if (!ckc_eng.cfg.hints && ckc_eng.cfg.order != CKC_ORDER_NONE) {
		hq_remove_all(ckc_eng.hq, o->key);
		if (ckc_eng.cfg.order == CKC_ORDER_REVERSE)
			hq_push_front(ckc_eng.hq, o->key);
		else
			hq_push_back(ckc_eng.hq, o->key);
	}
	ckc_trace("close-write", o, 0, o->size, o->wlevel, 0);
	ckc_node_note(o);
	ckc_prefetch_kick();
	eng_signal(EC_ROOM);
}
