/* Durability and names: publication, fsync, materialize and forget, hand-over of open writers, unlink, rename, stat and attributes. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "log.h"
#include "memlimit.h"
#include "path.h"
#include "state.h"
#include "sys.h"

/* ---- durability, names --------------------------------------------- */

/* Makes the real path hold o's bytes (lock held): fsync'ed if durable,
 * whatever CKPTCACHE_PERSIST says otherwise. CKC_CHANGED: the real file
 * was changed by someone else meanwhile; it was kept and o forgotten.
 * again: the second look, after another thread changed o's state under
 * the first. */
static int publish_locked(ckc_obj_t *o, bool durable, bool again)
{
	/* a flush under way ends first: its publication is this one (a
	 * second one beside it would copy the bytes again, and its rename
	 * could land on what another process writes there once told) */
	eng_wait_idle(o, EB_HOME | EB_MOVE | EB_FLUSH | EB_HAND);
	if (eng_through_open(o)) {
		/* written through, still open: the bytes are in a temporary
		 * file, which the first sync puts at the real path, where it
		 * stays open (the program's later writes land in the real
		 * file): what the program synced is at its real path, whatever
		 * becomes of the process. Each sync then syncs that descriptor,
		 * as the program's own would (writes after one leave no mark
		 * that a second could look at instead). */
		if (!durable)
			return o->home_live ? 0 : -ENOTSUP; /* (at its real path: published) */
		bool named = !o->home_live;
		int rc = named ? eng_keep_open_commit(o, &o->base) : 0;
		if (rc)
			return rc;
		/* closed or handed over by another thread meanwhile: its state
		 * says what the sync still owes */
		if (o->complete || o->retired || o->home_fd < 0 || !o->home_live)
			return again ? -ECANCELED : publish_locked(o, durable, true);
		/* the fsync (seconds, on a busy file system) runs without the
		 * engine lock; the close waits for it (home_busy), and with it
		 * the descriptor's end; the folder's, until it is synced once
		 * since the name was made (here, or by a sync(2)'s naming) */
		int fd = o->home_fd;
		char *key = o->home_dir_synced ? NULL : strdup(o->key);
		if (!o->home_dir_synced && !key)
			return -ENOMEM;
		eng_home_io_begin(o);
		rc = sys_fsync(fd) ? -errno : 0;
		if (!rc && key)
			rc = ckc_fsync_dir_of(key);
		sys_free(key);
		eng_home_io_end(o);
		if (!rc && key && o->home_live)
			o->home_dir_synced = true;
		ckc_obj_put(o);
		return rc;
	}
	if (o->at_home && (!durable || o->durable))
		return 0;
	/* an open version published with no write since (a second fsync) */
	if (eng_home_snap(o) && (!durable || o->home_snap_durable))
		return 0;
	if (o->at_home) {
		/* published, not yet durable: the fsync (seconds, on a busy
		 * parallel file system) runs without the engine lock, the real
		 * file held busy meanwhile as during a publication */
		char *key = strdup(o->key);
		if (!key)
			return -ENOMEM;
		eng_home_io_begin(o);
		int fd = sys_open(key, O_RDONLY, 0);
		int rc = fd < 0 ? -errno : sys_fsync(fd) ? -errno : 0;
		if (fd >= 0)
			sys_close(fd);
		if (!rc)
			rc = ckc_fsync_dir_of(key);
		sys_free(key);
		eng_home_io_end(o);
		if (!rc && o->at_home)
			o->durable = true;
		ckc_obj_put(o);
		return rc;
	}
	uint64_t writes = o->writes;
	/* (the real file's modification time is the version's, its last
	 * write's: a sync changes none) */
	int rc = ckc_flush_home_now(o, durable);
	/* a snapshot of a checkpoint still open, or closed meanwhile after
	 * more writes: its final bytes come with its close's flush (queued
	 * again: the one queued at the close may have found this publication
	 * and stood down) */
	if (!rc && (!o->complete || o->writes != writes)) {
		/* an open version whose snapshot is whole: its close finds the
		 * real file holding its bytes if no write came meanwhile (the
		 * real file is not published again, nor removed by a rename) */
		o->home_snap = !o->complete && o->writes == writes && o->at_home;
		o->home_snap_durable = o->durable;
		o->home_writes = writes;
		eng_set_home(o, false);
		o->durable = false;
		ckc_node_note(o);
		int l = ckc_best_level(o);
		if (o->complete && !o->retired && l >= 0 && l < ckc_eng.ntier - 1 && ckc_flush_wanted(o, l)) {
			eng_note_owed(o);
			ckc_flush_enqueue(o, l);
		}
	}
	return rc;
}

static int sync_locked(ckc_obj_t *o)
{
	if (ckc_eng.cfg.persist == CKC_PERSIST_NEVER)
		return 0;
	int rc = publish_locked(o, true, false);
	/* the program's bytes are in a rescue file, not at the real path */
	return rc == CKC_CHANGED ? -EIO : rc;
}

int ckc_sync(ckc_handle_t *h)
{
	uint64_t t0 = ckc_now_ns();
	ckc_mutex_lock(&ckc_eng.lock);
	int rc = h->o->handed ? CKC_HANDED : h->o->retired ? 0 : sync_locked(h->o);
	/* the program's time in a sync of a version it still writes is part
	 * of that version's cost (stepping aside weighs it: a cached one
	 * that the program syncs pays its publication there) */
	if (h->writer && !h->o->complete)
		h->o->write_ns += ckc_now_ns() - t0;
	/* handed over to its real file meanwhile (another thread's fork makes
	 * every tagged descriptor real first), or removed: the publication
	 * stood down, and the real file is the caller's to sync */
	if (rc == -ECANCELED && (h->o->handed || h->o->retired))
		rc = h->o->handed ? CKC_HANDED : 0;
	eng_unlock();
	return rc;
}

int ckc_sync_path(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = eng_lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? sync_locked(o) : -ENOENT;
	eng_unlock();
	return rc;
}

int ckc_unlink(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = eng_lookup_locked(path, key, &o);
	if (rc)
		return rc;
	bool cached = o != NULL;
	if (o) {
		eng_wait_idle(o, EB_HOME | EB_FLUSH);
		ckc_trace("unlink", o, 0, o->size, -1, 0);
		o->unnamed = true;
		ckc_obj_retire(o);
	}
	if (ckc_eng.hq)
		hq_remove_all(ckc_eng.hq, key);
	eng_unlock();
	rc = sys_unlink(key) ? -errno : 0;
	return rc == -ENOENT && cached ? 0 : rc;
}

int ckc_materialize(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = eng_lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? publish_locked(o, false, false) : -ENOENT;
	eng_unlock();
	/* a newer real file was kept: it is what the caller will use */
	return rc == CKC_CHANGED ? 0 : rc;
}

int ckc_forget(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = eng_lookup_locked(path, key, &o);
	if (rc)
		return rc;
	if (o) {
		/* a running flush ends first, so that no temporary file of it is
		 * left for the caller's next move (a rename of its folder) */
		eng_wait_idle(o, EB_HOME | EB_FLUSH);
		ckc_trace("forget", o, 0, o->size, -1, 0);
		ckc_obj_retire(o);
	}
	eng_unlock();
	return o ? 0 : -ENOENT;
}

/* Publishes o's bytes so far and lets the cache forget it; its handles
 * answer CKC_HANDED from then on (lock held). */
int eng_handoff_locked(ckc_obj_t *o)
{
	int rc = 0;

	/* another hand-over under way ends first: its answer is this one (a
	 * process told "handed" before the real file exists would create it,
	 * and the hand-over's rename would take its bytes away) */
	eng_wait_idle(o, EB_HAND);
	if (o->handed)
		return 0;
	if (o->retired)
		return -ESTALE; /* a newer version has the name: nothing to hand */
	ckc_obj_get(o);
	/* new writes wait; the version stays announced to the node (other
	 * processes ask this one, and wait) until its bytes are there */
	o->handing = true;
	eng_wait_idle(o, EB_WRITE | EB_MOVE | EB_HOME);
	if (o->retired) {
		rc = 0; /* forgotten meanwhile (its real file was kept) */
	} else if (!o->complete && eng_through_open(o)) {
		/* written through: the temporary file becomes the real file */
		rc = eng_close_home_writer(o);
	} else if (!o->at_home && (rc = ckc_flush_home_in_place(o)) == 1) {
		rc = ckc_flush_home_now(o, false);
	}
	if (!rc || rc == CKC_CHANGED) {
		o->handed = true;
		ckc_node_note(o);
		if (!o->retired) {
			ckc_trace("handoff", o, 0, o->size, -1, 0);
			ckc_obj_retire(o);
		}
	}
	eng_hand_end(o);
	ckc_obj_put(o);
	return rc == CKC_CHANGED ? 0 : rc;
}

int ckc_handoff(ckc_handle_t *h)
{
	uint64_t t0 = ckc_now_ns();
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_obj_t *o = h->o;
	/* the cache's last sample of its speed, closed and not yet at its
	 * real path, which the program now waits to find there (a map of
	 * it, a sendfile from it): that wait is the cache's time too, as a
	 * wait for a folder's publications is */
	bool sample = o->complete && !o->at_home;
	int rc = ckc_eng.active || o->handed ? eng_handoff_locked(o) : -ENODEV;
	if (!rc && sample && o->version == ckc_eng.aside_last[ASIDE_CACHE]) {
		ckc_eng.aside_last[ASIDE_CACHE] = 0;
		o->aside_cached = false;
		(void)aside_charge(&ckc_eng.aside, ASIDE_CACHE, o->size, ckc_now_ns() - t0);
	}
	eng_unlock();
	return rc;
}

static int handoff_path(const char *path, bool reopened)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = eng_lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? eng_handoff_locked(o) : -ENOENT;
	if (!rc && reopened)
		eng_straight_note(key);
	eng_unlock();
	return rc;
}

int ckc_handoff_path(const char *path)
{
	return handoff_path(path, false);
}

int ckc_handoff_reopened(const char *path)
{
	return handoff_path(path, true);
}

bool ckc_handle_handed(const ckc_handle_t *h)
{
	ckc_mutex_lock(&ckc_eng.lock);
	bool handed = h->o->handed;
	eng_unlock();
	return handed;
}

bool ckc_handle_name(const ckc_handle_t *h, char out[PATH_MAX], bool *gone, bool *unnamed)
{
	ckc_mutex_lock(&ckc_eng.lock);
	const ckc_obj_t *o = h->o;
	size_t n = o->key ? strlen(o->key) : 0;
	bool named = n > 0 && n < PATH_MAX;
	if (named)
		memcpy(out, o->key, n + 1);
	/* (a version handed over is retired, its name the real file's) */
	*gone = o->retired && !o->handed;
	if (unnamed)
		*unnamed = o->unnamed && !o->handed;
	eng_unlock();
	return named;
}

uintptr_t ckc_handle_version(const ckc_handle_t *h)
{
	return (uintptr_t)h->o;
}

/* Whether o is a closed version whose publication is still owed. */
static bool owed_home(const ckc_obj_t *o)
{
	return o->complete && !o->retired && !o->at_home && !o->rescue && !o->capture &&
	       ckc_persist_wanted(o);
}

/* Whether key names a file under the folder prefix (its n bytes), or
 * prefix is NULL (every file). */
static bool under(const char *key, const char *prefix, size_t n)
{
	return !prefix || (!strncmp(key, prefix, n) && (key[n] == '/' || n == 1));
}

int ckc_publish_all(uint64_t timeout_ns, bool writers)
{
	return ckc_publish_under(NULL, timeout_ns, writers);
}

/* Drops the notes of versions no longer current or owed; whether one left
 * is under the folder prefix (its n bytes; NULL: anywhere). Lock held. */
static bool owed_prune(const char *prefix, size_t n)
{
	bool owed = false;
	size_t keep = 0;
	for (size_t i = 0; i < ckc_eng.nowed; i++) {
		struct eng_owed *e = &ckc_eng.owed[i];
		ckc_obj_t *o = ckc_map_find(e->key);
		if (!o || o->version != e->version || !owed_home(o)) {
			sys_free(e->key);
			continue;
		}
		owed |= under(e->key, prefix, n);
		ckc_eng.owed[keep++] = *e;
	}
	__atomic_store_n(&ckc_eng.nowed, keep, __ATOMIC_RELAXED);
	return owed;
}

void eng_note_owed(const ckc_obj_t *o)
{
	if (o->capture || !ckc_persist_wanted(o))
		return;
	/* a full table first loses what was published since: it grows only
	 * with what is still owed */
	if (ckc_eng.nowed == ckc_eng.owed_cap)
		owed_prune(NULL, 0);
	if (ckc_eng.nowed == ckc_eng.owed_cap) {
		size_t cap = ckc_eng.owed_cap ? 2 * ckc_eng.owed_cap : 64;
		struct eng_owed *a = sys_realloc(ckc_eng.owed, cap * sizeof(*a));
		if (!a)
			return; /* a listing may then miss it, as before it was noted */
		ckc_eng.owed = a;
		ckc_eng.owed_cap = cap;
	}
	char *k = strdup(o->key);
	if (!k)
		return;
	ckc_eng.owed[ckc_eng.nowed] = (struct eng_owed){ k, o->version };
	__atomic_store_n(&ckc_eng.nowed, ckc_eng.nowed + 1, __ATOMIC_RELAXED);
}

void eng_owed_clear(void)
{
	for (size_t i = 0; i < ckc_eng.nowed; i++)
		sys_free(ckc_eng.owed[i].key);
	sys_free(ckc_eng.owed);
	ckc_eng.owed = NULL;
	ckc_eng.owed_cap = 0;
	__atomic_store_n(&ckc_eng.nowed, 0, __ATOMIC_RELAXED);
}

uint64_t ckc_owed_bytes_beside(const ckc_handle_t *h, uint64_t enough)
{
	ckc_mutex_lock(&ckc_eng.lock);
	const ckc_obj_t *me = h->o;
	uint64_t sum = 0;
	if (!ckc_eng.active || ckc_eng.cfg.persist == CKC_PERSIST_NEVER) {
		eng_unlock();
		return 0; /* nothing is owed to a real path */
	}
	/* every owed byte is in a tier of the cache: where those hold fewer
	 * than enough besides h's (where its own are there too), that is
	 * the answer, with no walk */
	uint64_t held = 0, mine = me->wlevel < ckc_eng.ntier - 1 ? me->size : 0;
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		held += ckc_eng.tier[l].arena.used;
	held = held > mine ? held - mine : 0;
	if (held < enough) {
		sum = held;
	} else {
		for (size_t i = 0; i < ckc_eng.nowed && sum < enough; i++) {
			const struct eng_owed *e = &ckc_eng.owed[i];
			ckc_obj_t *o = ckc_map_find(e->key);
			if (!o || o == me || o->version != e->version || !owed_home(o))
				continue;
			if (o->home_dev_known && me->home_dev_known && o->home_dev != me->home_dev)
				continue;
			sum += o->size;
		}
	}
	eng_unlock();
	return sum;
}

void ckc_handle_room_wait(ckc_handle_t *h, bool waiting)
{
	ckc_mutex_lock(&ckc_eng.lock);
	h->o->room_waits += waiting ? 1 : -1;
	eng_unlock();
}

bool ckc_owes_under(const char *dir)
{
	char key[PATH_MAX];
	/* a look without the lock: a note made meanwhile is of a close that
	 * races this listing anyway */
	if (!__atomic_load_n(&ckc_eng.nowed, __ATOMIC_RELAXED))
		return false;
	if (dir && eng_canon(dir, key))
		return false;
	size_t n = dir ? strlen(key) : 0;
	bool owed = false;
	ckc_mutex_lock(&ckc_eng.lock);
	if (ckc_eng.active && ckc_eng.cfg.persist != CKC_PERSIST_NEVER)
		owed = owed_prune(dir ? key : NULL, n);
	eng_unlock();
	return owed;
}

static int publish_under(const char *dir, uint64_t timeout_ns, bool writers, bool programs);

int ckc_publish_under(const char *dir, uint64_t timeout_ns, bool writers)
{
	return publish_under(dir, timeout_ns, writers, true);
}

int ckc_publish_under_asked(const char *dir, uint64_t timeout_ns)
{
	return publish_under(dir, timeout_ns, false, false);
}

/* programs: the program waits for it (a sample of the cache among the
 * versions published counts that wait) */
static int publish_under(const char *dir, uint64_t timeout_ns, bool writers, bool programs)
{
	struct timespec end;
	int rc = 0;
	char key[PATH_MAX];
	const char *pfx = NULL;
	size_t n = 0;

	if (dir) {
		if ((rc = eng_canon(dir, key)) != 0)
			return rc;
		pfx = key;
		n = strlen(key);
	}

	eng_abstime(timeout_ns, &end);
	ckc_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active || ckc_eng.cfg.persist == CKC_PERSIST_NEVER) {
		eng_unlock();
		return 0;
	}
	/* the versions there are now: those the program's other threads make
	 * meanwhile are not waited for (they would keep the caller forever) */
	uint64_t last = ckc_eng.next_version;
	/* open writers: their bytes so far (a snapshot; the writer goes on) */
	for (uint64_t seen = 0; writers;) {
		ckc_obj_t *w = NULL;
		for (size_t i = 0; i < ckc_eng.map_cap && !w; i++)
			for (ckc_obj_t *o = ckc_eng.map[i]; o && !w; o = o->hnext)
				if (!o->complete && !o->retired && !o->handed && o->version > seen &&
				    o->version <= last && !o->capture && under(o->key, pfx, n))
					w = o;
		if (!w)
			break;
		/* one at a time in version order: the map changes while unlocked */
		for (size_t i = 0; i < ckc_eng.map_cap; i++)
			for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext)
				if (!o->complete && !o->retired && !o->handed && o->version > seen &&
				    o->version < w->version && !o->capture && under(o->key, pfx, n))
					w = o;
		seen = w->version;
		/* (one written through to an unnamed file is named at its real
		 * path, where it goes on) */
		bool through = eng_through_open(w) && !w->home_live;
		if (w->wlevel < ckc_eng.ntier - 1 || through) {
			ckc_obj_get(w);
			int r = through ? eng_keep_open_commit(w, &w->base) : publish_locked(w, false, false);
			if (r && r != CKC_CHANGED && !rc)
				rc = r;
			ckc_obj_put(w);
		}
	}
	/* closed versions: published here, or by their flusher if it is at it;
	 * one that fails (and said so) is not tried again */
	uint64_t failed[32];
	int nfailed = 0;
	/* the cache's samples among them: the caller's wait is added to
	 * them (stepping aside), once */
	uint64_t t0 = ckc_now_ns(), sampled = 0;
	for (;;) {
		ckc_obj_t *due = NULL;
		bool busy = false;
		eng_cond_t wait_on = EC_FLUSHED; /* the first busy one's */
		for (size_t i = 0; i < ckc_eng.map_cap && !due; i++)
			for (ckc_obj_t *o = ckc_eng.map[i]; o && !due; o = o->hnext) {
				bool skip = false;
				for (int k = 0; k < nfailed; k++)
					skip |= failed[k] == o->version;
				if (skip || o->version > last || !owed_home(o) || !under(o->key, pfx, n))
					continue;
				if (programs && o->aside_cached) {
					o->aside_cached = false;
					sampled += o->size;
				}
				if (o->flushing || o->home_busy || o->migrating) {
					if (!busy)
						wait_on = o->flushing ? EC_FLUSHED : o->home_busy ? EC_HOME : EC_MOVED;
					busy = true;
				} else {
					due = o;
				}
			}
		if (due) {
			ckc_obj_get(due);
			int r = publish_locked(due, false, false);
			if (r && r != CKC_CHANGED && !rc)
				rc = r;
			bool stuck = owed_home(due);
			if (stuck && nfailed < (int)(sizeof(failed) / sizeof(failed[0])))
				failed[nfailed++] = due->version;
			ckc_obj_put(due);
			if (stuck && nfailed == (int)(sizeof(failed) / sizeof(failed[0])))
				break;
			continue;
		}
		if (!busy)
			break;
		if (ckc_cond_timedwait(&ckc_eng.cv[wait_on], &ckc_eng.lock, &end) == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	if (sampled)
		(void)aside_charge(&ckc_eng.aside, ASIDE_CACHE, sampled, ckc_now_ns() - t0);
	eng_unlock();
	return rc;
}

int ckc_handover_dir(const char *dir)
{
	char key[PATH_MAX];
	int rc = eng_canon(dir, key), first = 0;
	size_t n;

	if (rc)
		return rc;
	n = strlen(key);
	ckc_mutex_lock(&ckc_eng.lock);
	for (bool again = ckc_eng.active; again;) {
		ckc_obj_t *o = NULL;
		for (size_t i = 0; i < ckc_eng.map_cap && !o; i++)
			for (ckc_obj_t *x = ckc_eng.map[i]; x && !o; x = x->hnext)
				if (!strncmp(x->key, key, n) && (x->key[n] == '/' || n == 1))
					o = x;
		if (!o)
			break;
		ckc_obj_get(o);
		rc = publish_locked(o, false, false);
		if (rc && rc != CKC_CHANGED && !first)
			first = rc;
		eng_wait_idle(o, EB_HOME | EB_FLUSH);
		if (!o->retired) {
			ckc_trace("forget", o, 0, o->size, -1, 0);
			ckc_obj_retire(o);
		}
		ckc_obj_put(o);
	}
	eng_unlock();
	return first;
}

/* Writing handles open now (eng_handle_new, ckc_close): a folder's
 * listing looks for new files being written only while there are some. */
CKC_HOT_DATA atomic_size_t ckc_eng_writers;

static int writer_under(const char *dir, char *key, bool new_only)
{
	char pfx[PATH_MAX];
	int rc = eng_canon(dir, pfx);
	if (rc)
		return rc;
	size_t n = strlen(pfx);
	rc = -ENOENT;
	ckc_mutex_lock(&ckc_eng.lock);
	for (size_t i = 0; ckc_eng.active && i < ckc_eng.map_cap && rc; i++)
		for (ckc_obj_t *o = ckc_eng.map[i]; o && rc; o = o->hnext)
			if (!o->complete && !o->retired && !o->handed && !o->capture && under(o->key, pfx, n) &&
			    (!new_only || (o->base.known && !o->base.exists))) {
				snprintf(key, PATH_MAX, "%s", o->key);
				rc = 0;
			}
	eng_unlock();
	return rc;
}

int ckc_writer_under(const char *dir, char *key)
{
	return writer_under(dir, key, false);
}

CKC_TAGGED_PATH bool ckc_writers_open(void)
{
	return atomic_load_explicit(&ckc_eng_writers, memory_order_relaxed) != 0;
}

size_t ckc_idle_writers(char (*keys)[PATH_MAX], size_t max, uint64_t idle_ns, uint64_t open_ns, uint64_t small)
{
	size_t n = 0;
	uint64_t now = ckc_now_ns();
	ckc_mutex_lock(&ckc_eng.lock);
	bool on = ckc_eng.active && ckc_eng.cfg.persist != CKC_PERSIST_NEVER;
	for (ckc_obj_t *o = on ? ckc_eng.writing : NULL; o; o = o->wnext) {
		if (o->complete || o->retired || o->handed || o->handing || o->capture || o->rescue ||
		    !o->mapped || o->size == 0 || o->size > small || o->home_live || eng_home_snap(o) ||
		    o->writing > 0 || o->room_waits > 0 ||
		    (now - o->wrote_at < idle_ns && now - o->opened_at < open_ns))
			continue;
		if (n < max)
			snprintf(keys[n], PATH_MAX, "%s", o->key);
		n++;
	}
	eng_unlock();
	return n;
}

int ckc_new_writer_under(const char *dir, char *key)
{
	if (!ckc_writers_open())
		return -ENOENT;
	return writer_under(dir, key, true);
}

/* A rename of the version that was a side's last sample of the model
 * (lock held): the program's time in it is that checkpoint's too. Saving
 * by writing a temporary name and renaming it over the last one pays, on
 * the real path, the kernel's release of the replaced file's pages in the
 * rename, where the cache defers that to its publication. */
static void rename_charge(const ckc_obj_t *o, uint64_t t0)
{
	for (int s = 0; s < 2; s++)
		if (o->version == ckc_eng.aside_last[s]) {
			ckc_eng.aside_last[s] = 0;
			(void)aside_charge(&ckc_eng.aside, (aside_side_t)s, o->size, ckc_now_ns() - t0);
		}
}

int ckc_rename(const char *from, const char *to)
{
	char kf[PATH_MAX], kt[PATH_MAX];
	ckc_obj_t *o;
	uint64_t t0 = ckc_now_ns();
	int rc = eng_canon(to, kt);
	if (!rc)
		rc = eng_lookup_locked(from, kf, &o);
	if (rc)
		return rc;
	if (!o) {
		eng_unlock();
		return -ENOENT;
	}
	if (strcmp(kf, kt) == 0) {
		eng_unlock();
		return 0;
	}
	eng_wait_idle(o, EB_HOME);
	ckc_obj_t *victim = ckc_map_find(kt);
	if (victim) {
		victim->unnamed = true;
		ckc_obj_retire(victim);
	}
	/* a publication to the new name under way lands before the look at
	 * what that name holds (below) */
	while (ckc_committing(kt))
		eng_wait(EC_HOME);
	char *nk = strdup(kt);
	if (!nk) {
		eng_unlock();
		return -ENOMEM;
	}
	/* the node registry knows versions by name */
	if (o->announced) {
		void (*hook)(bool, const char *) = __atomic_load_n(&ckc_node_hook, __ATOMIC_ACQUIRE);
		o->announced = false;
		if (hook)
			hook(false, o->key);
	}
	eng_map_remove(o);
	/* the unnamed file of its identity is named in its folder only */
	const char *sf = strrchr(kf, '/'), *st = strrchr(kt, '/');
	if (sf - kf != st - kt || memcmp(kf, kt, (size_t)(sf - kf)) != 0)
		eng_id_drop(o);
	sys_free(o->key);
	o->key = nk;
	if (eng_map_insert(o) != 0) {
		eng_unlock();
		return -ENOMEM;
	}
	/* a closed version its real path lacks is owed under its new name:
	 * a listing of that folder publishes it first */
	if (o->complete && !o->at_home)
		eng_note_owed(o);
	/* an open version published by an fsync: the real file is renamed
	 * too, and its close finds it at the new name */
	bool at_home = o->at_home || eng_home_snap(o);
	o->home_busy = true;
	ckc_trace("rename", o, 0, o->size, -1, 0);
	eng_unlock();
	/* the real file follows the object; an older version left at the
	 * old name must not survive the rename either */
	if (at_home)
		rc = sys_rename(kf, kt) ? -errno : 0;
	else
		(void)sys_unlink(kf);
	/* what the new name holds now is what this version replaces */
	ckc_fid_t base;
	ckc_fid_take(kt, &base);
	ckc_mutex_lock(&ckc_eng.lock);
	eng_set_base(o, &base);
	/* unless the real file followed, that file is another one, which
	 * the rename replaces: a hand-over publishes a new file over it */
	o->base_by_name = !at_home || rc != 0;
	if (rc) {
		eng_set_home(o, false);
		o->home_snap = false;
		if (o->complete)
			eng_note_owed(o);
	}
	ckc_node_note(o);
	eng_home_end(o);
	rename_charge(o, t0);
	if (rc && !o->retired && o->complete && ckc_persist_wanted(o)) {
		/* the cache still has the bytes: publish them under the new name */
		int lvl = ckc_best_level(o);
		if (lvl >= 0 && lvl < ckc_eng.ntier - 1)
			ckc_flush_enqueue(o, lvl);
		rc = 0;
	}
	eng_unlock();
	return rc;
}

/* ckc_stat and ckc_stat_held: current, the look at the real file. */
static int stat_of(const char *path, ckc_stat_t *st, bool current)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = eng_lookup_locked(path, key, &o);
	if (rc)
		return rc;
	if (o && current)
		o = eng_current_locked(key);
	int look = -1;
	if (o) {
		eng_stat_fill(o, st);
		look = eng_mtime_looked(o);
	}
	eng_unlock();
	eng_kernel_look(look);
	return o ? 0 : -ENOENT;
}

int ckc_stat(const char *path, ckc_stat_t *st)
{
	return stat_of(path, st, true);
}

int ckc_stat_held(const char *path, ckc_stat_t *st)
{
	return stat_of(path, st, false);
}

const char *ckc_where(const char *path)
{
	char key[PATH_MAX];
	const char *name = NULL;
	ckc_obj_t *o;

	if (eng_lookup_locked(path, key, &o))
		return NULL;
	if (o) {
		int l = ckc_best_level(o);
		if (l < 0 && o->place[0].state == LC_READ_IN_PROGRESS)
			l = 0;
		name = l >= 0 ? ckc_eng.tier[l].name : NULL;
	}
	eng_unlock();
	return name;
}
