/* Flushers: one thread per tier edge (host->ssd, ssd->home, or host->home
 * without an ssd tier) moving completed copies down in FIFO order, measuring
 * the edge's bandwidth for the p-score, and saving the bytes in a rescue file
 * when the real path cannot be written. Bulk copies run without the engine
 * lock; the copy being read is pinned so nothing evicts or frees it. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine_int.h"
#include "log.h"
#include "thread.h"
#include "sys.h"

static void edge_thread(ckc_edge_t *e);

/* A publication that failed for want of a descriptor or of memory (the
 * program's descriptor table full, say) is tried again later, not
 * reported: that passes. Waits between tries grow from 1 to 64 ms. After
 * 10 s of such failures, or, once the program ends, 2 s without a
 * publication that succeeded, the failure is reported as any other (and a
 * rescue file tried); the end of the program tries such a checkpoint once
 * more (ckc_flush_short_again). */
#define FLUSH_RETRY_MIN_NS 1000000ull
#define FLUSH_RETRY_MAX_NS 64000000ull
#define FLUSH_RETRY_RUN_NS 10000000000ull
#define FLUSH_RETRY_DRAIN_NS 2000000000ull

bool (*ckc_spare_fd_hook)(void);

/* Whether o's publication, if it fails short, may be tried again (lock
 * held). */
static bool flush_may_retry(const ckc_obj_t *o)
{
	uint64_t now = ckc_now_ns();
	if (ckc_eng.draining) {
		uint64_t from = ckc_eng.drain_t0 > ckc_eng.flush_ok_ns ? ckc_eng.drain_t0 : ckc_eng.flush_ok_ns;
		return now - from < FLUSH_RETRY_DRAIN_NS;
	}
	return !o->short_t0 || now - o->short_t0 < FLUSH_RETRY_RUN_NS;
}

/* Notes how o's publication ended (lock held). */
static void flush_note_short(ckc_obj_t *o, int rc)
{
	if (!rc)
		ckc_eng.flush_ok_ns = ckc_now_ns();
	if (!ckc_io_short(rc)) {
		o->short_t0 = 0;
		o->short_said = false;
	} else if (!o->short_t0) {
		o->short_t0 = ckc_now_ns();
	}
}

void ckc_flush_short_again(void)
{
	for (size_t i = 0; i < ckc_eng.map_cap; i++)
		for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext) {
			if (!o->short_t0 || o->flushing || o->flush_edge >= 0)
				continue;
			int l = ckc_best_level(o);
			if (l >= 0 && l < ckc_eng.ntier - 1 && ckc_flush_wanted(o, l))
				ckc_flush_enqueue(o, l);
		}
}

bool ckc_persist_wanted(const ckc_obj_t *o)
{
	switch (ckc_eng.cfg.persist) {
	case CKC_PERSIST_ALWAYS:
		return true;
	case CKC_PERSIST_UNCONSUMED:
		return !o->consumed;
	default:
		return false;
	}
}

bool ckc_flush_wanted(const ckc_obj_t *o, int level)
{
	if (o->retired || !o->complete)
		return false;
	if (level + 1 >= ckc_eng.ntier - 1)
		return ckc_persist_wanted(o) && !o->at_home;
	/* to a lower cache tier: to reach home later, or to make room */
	if (ckc_eng.cfg.persist == CKC_PERSIST_ALWAYS)
		return !o->at_home || !o->consumed;
	return !o->consumed;
}

void ckc_flush_enqueue(ckc_obj_t *o, int level)
{
	ckc_edge_t *e = &ckc_eng.edge[level];

	if (o->flush_edge >= 0 || level >= ckc_eng.ntier - 1)
		return;
	o->flush_edge = level;
	o->fq_next = NULL;
	if (e->tail)
		e->tail->fq_next = o;
	else
		e->head = o;
	e->tail = o;
	e->queued++;
	ckc_obj_get(o);
	pthread_cond_signal(&e->cv);
	edge_thread(e);
}

void ckc_flush_dequeue(ckc_obj_t *o)
{
	if (o->flush_edge < 0)
		return;
	ckc_edge_t *e = &ckc_eng.edge[o->flush_edge];
	ckc_obj_t **pp = &e->head, *prev = NULL;
	while (*pp && *pp != o) {
		prev = *pp;
		pp = &(*pp)->fq_next;
	}
	if (*pp) {
		*pp = o->fq_next;
		if (e->tail == o)
			e->tail = prev;
		e->queued--;
	}
	o->flush_edge = -1;
	o->fq_next = NULL;
	ckc_obj_put(o);
	eng_signal(EC_FLUSHED);
}

static ckc_obj_t *edge_pop(ckc_edge_t *e)
{
	ckc_obj_t *o = e->head;

	e->head = o->fq_next;
	if (!e->head)
		e->tail = NULL;
	e->queued--;
	o->flush_edge = -1;
	o->fq_next = NULL;
	return o; /* the queue's reference passes to the caller */
}

static void edge_progress(uint64_t done, void *ctx)
{
	ckc_obj_t *o = ctx;

	ckc_mutex_lock(&ckc_eng.lock);
	o->flush_done = done;
	eng_unlock();
}

static void edge_measure(ckc_edge_t *e, uint64_t bytes, uint64_t ns)
{
	if (bytes < (1u << 16) || ns == 0)
		return;
	double bw = (double)bytes * 1e9 / (double)ns;
	e->bw = e->bw > 0 ? 0.7 * e->bw + 0.3 * bw : bw;
	ckc_eng.tier[e->level].st.flush_bw = e->bw;
}

/* The real paths being replaced now (lock held): two versions of one
 * checkpoint, flushed from two tiers (a full tier's copies go to the real
 * files directly), commit one after the other, so the older, retired
 * meanwhile, never lands last. */
typedef struct commit {
	const char *key;
	struct commit *next;
} commit_t;
static commit_t *commits;

bool ckc_committing(const char *key)
{
	for (const commit_t *c = commits; c; c = c->next)
		if (!strcmp(c->key, key))
			return true;
	return false;
}

/* Saves o's bytes in a rescue file, once (lock held, dropped for the
 * copy): a second caller meanwhile (the program's open finding the real
 * file changed while a flush saves the version) waits for the first one's
 * file. 0 (saved now or before) or -errno; *made: saved by this call. */
static int rescue_file(ckc_obj_t *o, const ckc_src_t *src, uint64_t size, bool *made)
{
	char *key = strdup(o->key), *where = NULL;
	int rc = key ? 0 : -ENOMEM;

	*made = false;
	while (o->rescuing)
		eng_wait(EC_HOME);
	if (!o->rescue && !rc) {
		o->rescuing = true;
		eng_unlock();
		rc = ckc_home_rescue(key, src, size, &where);
		ckc_mutex_lock(&ckc_eng.lock);
		o->rescuing = false;
		eng_signal(EC_HOME);
		if (!rc) {
			o->rescue = where;
			ckc_eng.st.rescued++;
			*made = true;
		}
	}
	sys_free(key);
	return rc;
}

int ckc_rescue_save(ckc_obj_t *o, const ckc_src_t *src, uint64_t size)
{
	bool made;
	int rc = rescue_file(o, src, size, &made);
	if (made)
		ckc_error("checkpoint %s: its %llu bytes are saved in %s", o->key, (unsigned long long)size,
			  o->rescue);
	return rc;
}

void ckc_keep_newer(ckc_obj_t *o, const ckc_src_t *src, uint64_t size)
{
	bool made;
	/* a version still open and empty that a hand-over publishes: the
	 * other process's writer in place made the file between its open and
	 * the hand-over (four ranks open one shared file at once, one with
	 * O_TRUNC); its truncation comes first, as the kernel may order the
	 * two opens, and the file is kept with nothing to rescue or say (the
	 * hand-over retires it) */
	if (o->handing && !o->complete && size == 0)
		return;
	int rc = rescue_file(o, src, size, &made);
	if (o->rescue) {
		if (made)
			ckc_error("checkpoint %s was changed at its real path by another program (or by "
				  "a call of this one that the library does not see, a raw system call) "
				  "after this one began its version: that file is kept, and this program's "
				  "version (%llu bytes) is saved in %s", o->key, (unsigned long long)size,
				  o->rescue);
		if (!o->retired) {
			ckc_trace("changed", o, 0, size, -1, 0);
			ckc_obj_retire(o);
		}
	} else {
		ckc_error("checkpoint %s was changed at its real path by another program (or by a "
			  "call of this one that the library does not see, a raw system call) after "
			  "this one began its version: that file is kept, and this program's version stays "
			  "in the cache (no rescue file: %s)", o->key, strerror(-rc));
	}
}

/* Writes the copy at level to the real path (lock held; dropped while the
 * bytes move). Returns 0, -ECANCELED if the object was retired meanwhile, or
 * -errno from the file system. A failure ckc_io_short names is not reported
 * while retry says it will be tried again. */
static int flush_to_home(ckc_obj_t *o, int level, bool fsync_it, bool retry)
{
	ckc_src_t src;
	char *tmp = NULL, *key = strdup(o->key);
	int fd = -1, rc;
	bool drop_tmp = false; /* the filled file is not published */

	if (!key)
		return -ENOMEM;
	/* another publication has the file of its identity, or fills a file
	 * of its own: it ends first (two copies side by side would take the
	 * room of the file system twice, and the second could fail for want
	 * of it), and where it published the version there is nothing left
	 * to do */
	while (o->id_lent || o->pub_own_temp)
		eng_wait(EC_HOME);
	if (o->at_home && (!fsync_it || o->durable)) {
		sys_free(key);
		return 0;
	}
	rc = ckc_src_snapshot(o, level, &src);
	uint64_t size = o->size;
	mode_t mode = o->mode;
	if (rc) {
		sys_free(key);
		return rc;
	}
	/* the file whose inode stat reported, where there is one; a stat
	 * meanwhile waits for the real file this one makes */
	bool id = eng_id_take(o, &fd, &tmp);
	bool own = !id && !o->pub_own_temp;
	if (own)
		o->pub_own_temp = true;
	eng_unlock();
	if (!id)
		rc = ckc_home_temp(key, mode, &tmp, &fd);
	if (!rc) {
		/* (a durable one is synced by its commit, once, with its
		 * times, before its name) */
		rc = ckc_home_fill(fd, &src, size, edge_progress, o);
		if (rc && id) {
			ckc_mutex_lock(&ckc_eng.lock);
			eng_id_return(o, fd, tmp);
			eng_unlock();
			tmp = NULL;
			fd = -1;
		} else if (rc) {
			ckc_home_discard(tmp, fd);
		}
	}
	ckc_mutex_lock(&ckc_eng.lock);
	/* another publication of this object may be committing: let it end,
	 * then decide on what is true after it */
	while (o->home_busy || ckc_committing(key))
		eng_wait(EC_HOME);
	if (o->retired || o->flush_cancel || strcmp(key, o->key) != 0) {
		/* retired, handed over or renamed meanwhile: these bytes must not
		 * be published under the old name (a failed write included: its
		 * folder may have been renamed) */
		drop_tmp = !rc;
		rc = o->retired || o->flush_cancel ? -ECANCELED : -EAGAIN;
	} else if (o->at_home && (!fsync_it || o->durable)) {
		/* published meanwhile by a publication that began while this
		 * copy was being filled (another process's ask, an fsync): the
		 * real file holds these bytes already, and that process may be
		 * writing it now that it was told so */
		drop_tmp = !rc; /* a fill that failed discarded its file */
		rc = 0;
	} else if (!rc) {
		o->home_busy = true;
		commit_t me = { key, commits };
		commits = &me;
		ckc_attr_t attr = o->attr;
		/* the real file's times are the version's, as stat reported
		 * them, not the time of its publication: a tool that compares
		 * them with a file the program wrote afterwards sees the order
		 * the program made */
		attr.mask |= CKC_ATTR_TIMES;
		eng_version_times(o, attr.times);
		ckc_fid_t base = o->base, now;
		eng_unlock();
		/* a file made or changed there since this version began is
		 * newer than it: never replaced (CKC_CHANGED) */
		rc = ckc_home_commit(tmp, key, fd, fsync_it, &attr, &base);
		if (!rc)
			ckc_fid_take(key, &now);
		ckc_mutex_lock(&ckc_eng.lock);
		for (commit_t **pp = &commits; *pp; pp = &(*pp)->next)
			if (*pp == &me) {
				*pp = me.next;
				break;
			}
		if (!rc) {
			/* each publication replaces the file: durable only if
			 * this one was synced */
			eng_set_home(o, true);
			o->durable = fsync_it;
			eng_set_base(o, &now);
			ckc_node_note(o);
		}
		eng_home_end(o); /* and the commit's */
	}
	if (drop_tmp && id) {
		/* renamed meanwhile: its next publication names it */
		eng_id_return(o, fd, tmp);
		tmp = NULL;
	} else if (drop_tmp) {
		eng_unlock();
		ckc_home_discard(tmp, fd);
		ckc_mutex_lock(&ckc_eng.lock);
	}
	if (rc == CKC_CHANGED && !o->retired) {
		ckc_keep_newer(o, &src, size);
	} else if (rc && rc != CKC_CHANGED && rc != -ECANCELED && rc != -EAGAIN && !o->retired &&
		   !(retry && ckc_io_short(rc)) && !(ckc_io_short(rc) && o->short_said)) {
		o->short_said = ckc_io_short(rc);
		ckc_error("could not write checkpoint %s (%s)", key, strerror(-rc));
		if (level < ckc_eng.ntier - 1)
			ckc_eng.tier[level].st.flush_errors++;
		/* a version still written (a hand-over while the program writes
		 * it: one grown past half the free space) has more bytes to come:
		 * the cache keeps it whole, and its publication once closed, or
		 * its rescue, takes them all (a rescue file of the bytes so far
		 * stood for the whole version) */
		int r2 = o->complete ? ckc_rescue_save(o, &src, size) : 0;
		if (r2)
			ckc_error("checkpoint %s could not be saved to a rescue file either (%s): "
				  "it stays in the cache until the program ends",
				  key, strerror(-r2));
	}
	if (id)
		eng_id_lent_end(o);
	if (own) {
		o->pub_own_temp = false;
		eng_signal(EC_HOME);
	}
	ckc_mark_safe(o);
	ckc_src_release(&src);
	sys_free(tmp);
	sys_free(key);
	return rc;
}

int ckc_flush_home_in_place(ckc_obj_t *o)
{
	char *key = strdup(o->key);
	ckc_fid_t base = o->base;
	ckc_attr_t attr = o->attr;
	uint64_t size = o->size;
	int level = size ? ckc_best_level(o) : -1;
	if (!key || !base.known || (size && (level < 0 || level >= ckc_eng.ntier - 1))) {
		sys_free(key);
		return 1;
	}
	while (o->home_busy || ckc_committing(key))
		eng_wait(EC_HOME);
	/* a file it replaces by name (renamed onto it, before or meanwhile),
	 * or another key: never written in place */
	if (o->base_by_name || strcmp(key, o->key) != 0) {
		sys_free(key);
		return 1;
	}
	ckc_src_t src = { 0 };
	if (size && ckc_src_snapshot(o, level, &src) != 0) {
		sys_free(key);
		return 1;
	}
	o->home_busy = true;
	if (size)
		o->place[level].pins++;
	eng_unlock();
	int rc = 1;
	int fd = sys_open(key, O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0);
	struct stat st;
	if (fd >= 0 && sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		ckc_fid_t now;
		ckc_fid_of(&st, &now);
		if (base.exists && ckc_fid_same(&base, &now)) {
			/* the file the version began over, unchanged since: its
			 * bytes become the version's where it is */
			rc = size ? ckc_home_fill(fd, &src, size, NULL, NULL) : 0;
			if (!rc && sys_ftruncate(fd, (off_t)size) != 0)
				rc = -errno;
			/* a fill cut short (ENOSPC) leaves no mix of the two
			 * versions there: the file is empty, as the program's
			 * O_TRUNC open made it without the library, and the
			 * version's bytes stay in the cache */
			if (rc && rc != 1)
				(void)sys_ftruncate(fd, 0);
			/* the owner, mode and times the program gave the version
			 * (a publication by a new file applies them to it) */
			int arc = !rc && attr.mask ? ckc_attr_apply_fd(fd, &attr) : 0;
			if (arc)
				ckc_error("checkpoint %s: its owner, mode or times could not be given to its "
					  "real file (%s)",
					  key, strerror(-arc));
		} else if (!size) {
			/* made or written since by another process (its open of
			 * the shared file): the version has no byte of its own
			 * yet, and writes on in that file */
			rc = 0;
		}
	}
	if (fd >= 0)
		sys_close(fd);
	ckc_fid_t after;
	if (!rc)
		ckc_fid_take(key, &after);
	ckc_mutex_lock(&ckc_eng.lock);
	if (size) {
		ckc_src_release(&src);
		ckc_unpin(o, level);
	}
	if (!rc) {
		eng_set_home(o, true);
		o->durable = false;
		eng_set_base(o, &after);
		ckc_node_note(o);
	}
	eng_home_end(o);
	sys_free(key);
	return rc;
}

int ckc_flush_home_now(ckc_obj_t *o, bool fsync_it)
{
	int level = ckc_best_level(o);

	if (level < 0)
		return -EIO;
	if (level == ckc_eng.ntier - 1 && o->rescue && !o->at_home)
		return -EIO; /* its bytes are only in the rescue file */
	/* a publication that finds a newer real file forgets o: keep it
	 * until this is done with it */
	ckc_obj_get(o);
	if (level < ckc_eng.ntier - 1)
		o->place[level].pins++;
	bool retry = flush_may_retry(o) && level < ckc_eng.ntier - 1;
	int rc = flush_to_home(o, level, fsync_it, retry);
	flush_note_short(o, rc);
	if (level < ckc_eng.ntier - 1)
		ckc_unpin(o, level);
	/* the caller hears of the failure; the flusher tries again */
	if (retry && ckc_io_short(rc) && ckc_flush_wanted(o, level))
		ckc_flush_enqueue(o, level);
	ckc_obj_put(o);
	return rc;
}

/* Moves o's copy at level to the next bounded tier that takes it (lock
 * held). Returns the level it reached, or -errno; -ENOSPC means no cache
 * tier below had room. */
static int flush_to_tier(ckc_obj_t *o, int level, int target)
{
	ckc_tier_t *to = &ckc_eng.tier[target];
	int rc = ckc_place_reserve(o, target, o->size ? o->size : 1, CKC_ALLOC_FLUSH, 0);

	if (rc)
		return rc;
	ckc_set_state(o, target, LC_EV_WRITE_BEGIN);
	o->place[target].pins++;
	ckc_src_t src, dst = { 0 };
	rc = ckc_src_snapshot(o, level, &src);
	if (!rc)
		rc = ckc_src_snapshot(o, target, &dst);
	uint64_t size = arena_round(&to->arena, o->size);
	eng_unlock();
	if (!rc)
		rc = ckc_src_copy(&src, &dst, size, edge_progress, o);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_src_release(&src);
	ckc_src_release(&dst);
	o->place[target].pins--;
	eng_signal(EC_PINS);
	if (rc || o->retired || o->flush_cancel) {
		if (rc)
			ckc_warn("%s tier: could not store %s (%s)", to->name, o->key, strerror(-rc));
		if (o->place[target].state != LC_INIT) {
			ckc_place_free(o, target);
			ckc_set_state(o, target, LC_EV_DROP);
		}
		if (rc)
			to->st.flush_errors++;
		eng_signal(EC_ROOM);
		return rc ? -EIO : -ECANCELED;
	}
	ckc_set_state(o, target, LC_EV_WRITE_END);
	eng_signal(EC_ROOM);
	return target;
}

/* o's publication failed short (ckc_io_short): queued again, then a wait
 * that grows while they keep failing (lock held; dropped meanwhile; o
 * stays queued through it, so that who waits for the flushes waits for
 * it). As the program ends, the library gives the process a descriptor of
 * its own for it: the program may end with its table full. */
static void flush_later(ckc_edge_t *e, ckc_obj_t *o)
{
	static bool said;

	if (!said) {
		said = true;
		ckc_warn("checkpoint %s: no descriptor or memory to publish it now; the cache keeps it "
			 "and tries again", o->key);
	}
	if (ckc_flush_wanted(o, e->level))
		ckc_flush_enqueue(o, e->level);
	e->retry_ns = e->retry_ns ? e->retry_ns * 2 : FLUSH_RETRY_MIN_NS;
	if (e->retry_ns > FLUSH_RETRY_MAX_NS)
		e->retry_ns = FLUSH_RETRY_MAX_NS;
	if (ckc_eng.draining && eng_spare_fd())
		return;
	struct timespec ts = { (time_t)(e->retry_ns / 1000000000ull), (long)(e->retry_ns % 1000000000ull) };
	eng_unlock();
	nanosleep(&ts, NULL);
	ckc_mutex_lock(&ckc_eng.lock);
}

bool eng_spare_fd(void)
{
	atomic_store(&ckc_eng.fds_short, true);
	bool (*spare)(void) = __atomic_load_n(&ckc_spare_fd_hook, __ATOMIC_ACQUIRE);
	return spare && spare();
}

/* One flush of o from level (lock held), by the edge's thread, or by
 * another beside it (help). Returns whether it failed short and o is queued
 * again. */
static bool flush_one(ckc_edge_t *e, ckc_obj_t *o, bool help)
{
	int level = e->level, home = ckc_eng.ntier - 1;
	ckc_place_t *p = &o->place[level];

	if (!lc_readable(p->state) || !ckc_flush_wanted(o, level))
		return false;
	p->pins++;
	if (help)
		e->helping++;
	else
		e->current = o;
	o->flushing = true;
	o->flush_done = 0;
	o->flush_cancel = false;
	uint64_t t0 = ckc_now_ns(), size = o->size;
	int reached = -ENOSPC;
	bool retry = false;
	/* At shutdown every byte that must reach home goes there directly. */
	bool direct = ckc_eng.draining && ckc_persist_wanted(o);
	for (int target = level + 1; target < home && !direct; target++) {
		if (!ckc_tier_takes(o, target))
			continue;
		reached = flush_to_tier(o, level, target);
		if (reached >= 0 || reached == -ECANCELED)
			break;
		if (reached == -ENOSPC)
			ckc_eng.tier[target].st.bypasses++;
	}
	if (reached < 0 && reached != -ECANCELED && ckc_persist_wanted(o) && !o->at_home) {
		/* a copy still in a faster tier is the faster source (an ssd
		 * file is read from the device, host memory is not) */
		int from = level;
		for (int l = 0; l < level; l++)
			if (lc_readable(o->place[l].state) && !o->migrating) {
				from = l;
				break;
			}
		if (from != level)
			o->place[from].pins++;
		retry = flush_may_retry(o);
		int rc = flush_to_home(o, from, false, retry);
		flush_note_short(o, rc);
		if (from != level)
			ckc_unpin(o, from);
		if (rc == -EAGAIN) /* renamed meanwhile: flush it again */
			ckc_flush_enqueue(o, level);
		retry = retry && ckc_io_short(rc);
		reached = rc ? rc : home;
	}
	if (help)
		e->helping--;
	else
		e->current = NULL;
	eng_flush_end(o);
	if (reached > level) {
		uint64_t ns = ckc_now_ns() - t0;
		edge_measure(e, size, ns);
		ckc_eng.tier[level].st.flush_ops++;
		ckc_eng.tier[level].st.flush_bytes += size;
		ckc_trace("flush", o, 0, size, reached, t0);
		ckc_mark_safe(o);
		if (reached < home && ckc_flush_wanted(o, reached))
			ckc_flush_enqueue(o, reached);
		e->retry_ns = 0;
	}
	ckc_unpin(o, level);
	if (retry)
		flush_later(e, o);
	return retry;
}

/* Flushes the head of e's queue and wakes who waits for flushes (lock
 * held; dropped meanwhile). Returns flush_one's answer. */
static bool flush_head(ckc_edge_t *e, bool help)
{
	ckc_obj_t *o = edge_pop(e);
	bool again = flush_one(e, o, help);
	ckc_obj_put(o);
	eng_signal(EC_FLUSHED); /* e->current or e->helping changed */
	return again;
}

static void *flusher_main(void *arg)
{
	ckc_edge_t *e = arg;
	ckc_io_guard = 1; /* never re-enter the wrappers */
	ckc_tl_background = true;
	ckc_tl_flushing = true;

	ckc_mutex_lock(&ckc_eng.lock);
	for (;;) {
		while (!e->head && !ckc_eng.stopping)
			ckc_cond_wait(&e->cv, &ckc_eng.lock);
		if (!e->head)
			break;
		flush_head(e, false);
	}
	eng_unlock();
	return NULL;
}

void ckc_flusher_init(int level)
{
	ckc_edge_t *e = &ckc_eng.edge[level];

	e->level = level;
	e->head = e->tail = e->current = NULL;
	e->helping = 0;
	e->queued = 0;
	e->retry_ns = 0;
	e->running = false;
	pthread_cond_init(&e->cv, NULL);
}

/* The edge's thread starts with its first flush (lock held): a process
 * that writes no checkpoint starts none. One that cannot be made now is
 * tried again with the next flush; meanwhile ckc_flush_unthreaded
 * flushes when the program waits for it or ends. */
static void edge_thread(ckc_edge_t *e)
{
	static bool said;

	if (e->running || ckc_eng.stopping)
		return;
	int rc = ckc_thread_start(&e->thread, flusher_main, e, "ckc-flush", false);
	e->running = rc == 0;
	if (rc && !said) {
		said = true;
		ckc_warn("cannot start a flush thread (%s): checkpoints are flushed when the program "
			 "waits for them or ends", strerror(rc));
	}
}

bool ckc_flush_unthreaded(void)
{
	bool any = false;

	for (int l = 0; l + 1 < ckc_eng.ntier; l++) {
		ckc_edge_t *e = &ckc_eng.edge[l];
		if (e->head)
			edge_thread(e);
		/* one that must wait to be tried again ends the round: the
		 * caller decides whether to wait on */
		while (!e->running && e->head) {
			any = true;
			if (flush_head(e, false))
				break;
		}
	}
	return any;
}

/* Checkpoints up to this size are what the ending thread publishes beside
 * the flush threads: their time is the file system's metadata operations
 * (a file made, named), which run side by side; a larger one's is the
 * copy, which one thread already keeps the file system busy with. */
#define FLUSH_HELP_MAX_BYTES (1u << 20)

bool ckc_flush_help(void)
{
	for (int l = 0; l + 1 < ckc_eng.ntier; l++) {
		ckc_edge_t *e = &ckc_eng.edge[l];
		if (!e->running || !e->head || e->head->size > FLUSH_HELP_MAX_BYTES)
			continue;
		flush_head(e, true);
		return true;
	}
	return false;
}

void ckc_flusher_stop(int level)
{
	ckc_edge_t *e = &ckc_eng.edge[level];

	if (e->running) {
		ckc_mutex_lock(&ckc_eng.lock);
		pthread_cond_broadcast(&e->cv);
		eng_unlock();
		pthread_join(e->thread, NULL);
		e->running = false;
	}
	pthread_cond_destroy(&e->cv);
}
