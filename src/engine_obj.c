/* The object map (canonical path -> current version), objects' life (new, get, put, retire), and the trace file. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "log.h"
#include "memlimit.h"
#include "path.h"
#include "state.h"
#include "trace.h"
#include "sys.h"

/* ---- object map ---------------------------------------------------- */

/* ckc_eng.nobj for readers without the lock; the versions of the map
 * that their real paths do not hold; those of them that replace a file
 * their real paths held (or may have held) when they began. */
CKC_HOT_DATA atomic_size_t ckc_eng_nobj_now;
CKC_HOT_DATA static atomic_size_t eng_unpublished;
CKC_HOT_DATA static atomic_size_t eng_replacing;

CKC_START_PATH bool ckc_holds_unpublished(void)
{
	return atomic_load_explicit(&eng_unpublished, memory_order_relaxed) != 0;
}

bool ckc_holds_replacements(void)
{
	return atomic_load_explicit(&eng_replacing, memory_order_relaxed) != 0;
}

/* o's part in the two counts: 1 for unpublished, 2 for replacing. */
static unsigned unpub_part(const ckc_obj_t *o)
{
	if (!o->mapped || o->at_home)
		return 0;
	return 1u | (o->base.known && !o->base.exists ? 0u : 2u);
}

/* The counts follow o from part `was` to its part now (lock held). */
static void unpub_count(const ckc_obj_t *o, unsigned was)
{
	unsigned now = unpub_part(o);
	if ((was ^ now) & 1u) {
		if (now & 1u)
			atomic_fetch_add_explicit(&eng_unpublished, 1, memory_order_relaxed);
		else
			atomic_fetch_sub_explicit(&eng_unpublished, 1, memory_order_relaxed);
	}
	if ((was ^ now) & 2u) {
		if (now & 2u)
			atomic_fetch_add_explicit(&eng_replacing, 1, memory_order_relaxed);
		else
			atomic_fetch_sub_explicit(&eng_replacing, 1, memory_order_relaxed);
	}
}

void eng_set_home(ckc_obj_t *o, bool home)
{
	unsigned was = unpub_part(o);
	o->at_home = home;
	unpub_count(o, was);
	if (home) {
		/* the real file's own inode is what stat reports from now */
		eng_id_drop(o);
		o->id_known = false;
		eng_id_lent_end(o);
	}
}

void eng_set_base(ckc_obj_t *o, const ckc_fid_t *base)
{
	unsigned was = unpub_part(o);
	o->base = *base;
	o->base_by_name = false;
	unpub_count(o, was);
}

static uint64_t key_hash(const char *k)
{
	return ckc_path_hash(k);
}

CKC_TAGGED_PATH ckc_obj_t *ckc_map_find(const char *key)
{
	if (!ckc_eng.map_cap)
		return NULL;
	for (ckc_obj_t *o = ckc_eng.map[key_hash(key) & (ckc_eng.map_cap - 1)]; o; o = o->hnext)
		if (strcmp(o->key, key) == 0)
			return o;
	return NULL;
}

int eng_map_insert(ckc_obj_t *o)
{
	if (ckc_eng.nobj + 1 > ckc_eng.map_cap / 2) {
		size_t cap = ckc_eng.map_cap ? ckc_eng.map_cap * 2 : 256;
		ckc_obj_t **m = sys_calloc(cap, sizeof(*m));
		if (!m)
			return -ENOMEM;
		for (size_t i = 0; i < ckc_eng.map_cap; i++)
			for (ckc_obj_t *x = ckc_eng.map[i], *n; x; x = n) {
				n = x->hnext;
				size_t b = key_hash(x->key) & (cap - 1);
				x->hnext = m[b];
				m[b] = x;
			}
		sys_free(ckc_eng.map);
		ckc_eng.map = m;
		ckc_eng.map_cap = cap;
	}
	size_t b = key_hash(o->key) & (ckc_eng.map_cap - 1);
	o->hnext = ckc_eng.map[b];
	ckc_eng.map[b] = o;
	ckc_eng.nobj++;
	atomic_store_explicit(&ckc_eng_nobj_now, ckc_eng.nobj, memory_order_relaxed);
	unsigned was = unpub_part(o);
	o->mapped = true;
	unpub_count(o, was);
	return 0;
}

void eng_map_remove(ckc_obj_t *o)
{
	ckc_obj_t **pp = &ckc_eng.map[key_hash(o->key) & (ckc_eng.map_cap - 1)];
	while (*pp && *pp != o)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = o->hnext;
		ckc_eng.nobj--;
		atomic_store_explicit(&ckc_eng_nobj_now, ckc_eng.nobj, memory_order_relaxed);
		unsigned was = unpub_part(o);
		o->mapped = false;
		unpub_count(o, was);
	}
	o->hnext = NULL;
}

/* ---- objects ------------------------------------------------------- */

/* A new version named key, outside the map. Lock held. */
ckc_obj_t *eng_obj_alloc(const char *key)
{
	ckc_obj_t *o = sys_calloc(1, sizeof(*o));
	if (!o || !(o->key = strdup(key))) {
		sys_free(o);
		return NULL;
	}
	o->version = ++ckc_eng.next_version;
	o->mode = 0644;
	o->home_fd = -1;
	o->id_fd = -1;
	o->keep_fd = -1;
	o->flush_edge = -1;
	o->wlevel = ckc_eng.ntier - 1;
	return o;
}

ckc_obj_t *eng_obj_new(const char *key)
{
	ckc_obj_t *o = eng_obj_alloc(key);
	if (!o)
		return NULL;
	o->refs = 1; /* the map's */
	if (eng_map_insert(o)) {
		sys_free(o->key);
		sys_free(o);
		return NULL;
	}
	return o;
}

/* ---- file work after the lock (eng_unlock) ---------------------------- */

/* One piece: fd closed (with tmp: discarded, tmp freed); or, with keep,
 * keep's real file opened and held for its readers (a reference held). */
typedef struct later {
	int fd;
	char *tmp;
	ckc_obj_t *keep;
	char *key;
} later_t;
/* This thread's pieces: made with the first, freed once done (the
 * library's thread-local storage stays small: tests/launcher checks it). */
__thread int eng_later_n;
static __thread later_t *later;
static __thread int later_cap;

/* Closes fd, or with tmp discards that temporary file and frees tmp. */
static void later_close(int fd, char *tmp)
{
	if (tmp)
		ckc_home_discard(tmp, fd);
	else
		sys_close(fd);
	sys_free(tmp);
}

/* Room for one more piece: false where no memory is left. */
static bool later_room(void)
{
	if (eng_later_n < later_cap)
		return true;
	int cap = later_cap ? 2 * later_cap : 8;
	later_t *l = sys_realloc(later, (size_t)cap * sizeof(*l));
	if (!l)
		return false;
	later = l;
	later_cap = cap;
	return true;
}

/* Lock held. Where no memory is left for the note, the work is done now. */
static void later_add(int fd, char *tmp, ckc_obj_t *keep)
{
	char *key = keep ? strdup(keep->key) : NULL;
	if ((keep && !key) || !later_room()) {
		sys_free(key);
		if (keep)
			keep->keep_fd = sys_open(keep->key, O_RDONLY | O_CLOEXEC, 0);
		else
			later_close(fd, tmp);
		return;
	}
	if (keep)
		ckc_obj_get(keep);
	later[eng_later_n++] = (later_t){ fd, tmp, keep, key };
}

void eng_unlock_later(void)
{
	later_t *mine = later;
	int n = eng_later_n;
	later = NULL;
	later_cap = eng_later_n = 0;
	ckc_mutex_unlock(&ckc_eng.lock);
	for (int i = 0; i < n; i++) {
		later_t *w = &mine[i];
		if (!w->keep) {
			later_close(w->fd, w->tmp);
			continue;
		}
		int fd = sys_open(w->key, O_RDONLY | O_CLOEXEC, 0);
		sys_free(w->key);
		ckc_mutex_lock(&ckc_eng.lock);
		if (fd >= 0 && w->keep->keep_fd < 0 && w->keep->readers > 0) {
			w->keep->keep_fd = fd;
			fd = -1;
		}
		ckc_obj_put(w->keep);
		eng_unlock(); /* what the put left, too */
		if (fd >= 0)
			sys_close(fd);
	}
	sys_free(mine);
}

void eng_close_later(int fd, char *tmp)
{
	later_add(fd, tmp, NULL);
}

void ckc_obj_get(ckc_obj_t *o)
{
	o->refs++;
}

void ckc_obj_put(ckc_obj_t *o)
{
	if (--o->refs > 0)
		return;
	for (int l = 0; l < ckc_eng.ntier - 1; l++)
		if (o->place[l].nexts)
			ckc_place_free(o, l);
	eng_signal(EC_ROOM);
	for (int l = 0; l < CKC_MAX_TIERS; l++)
		sys_free(o->place[l].ext);
	if (o->keep_fd >= 0)
		later_add(o->keep_fd, NULL, NULL);
	if (o->home_fd >= 0 && !o->home_live) {
		later_add(o->home_fd, o->home_tmp, NULL);
		o->home_tmp = NULL;
	} else if (o->home_fd >= 0) {
		later_add(o->home_fd, NULL, NULL);
	}
	sys_free(o->home_tmp);
	eng_id_drop(o);
	sys_free(o->rescue);
	sys_free(o->key);
	sys_free(o);
}

void (*ckc_node_hook)(bool holds, const char *key);

void ckc_node_note(ckc_obj_t *o)
{
	/* read once: the program's exit stops the registry (and clears the
	 * hook) while its other threads still close checkpoints */
	void (*hook)(bool, const char *) = __atomic_load_n(&ckc_node_hook, __ATOMIC_ACQUIRE);
	/* bytes the real path lacks: an open writer's, or a closed version's
	 * that must still be published */
	bool holds = hook && !o->retired && !o->capture && !o->at_home && !o->rescue && !o->handed &&
		     ckc_eng.cfg.persist != CKC_PERSIST_NEVER && (!o->complete || ckc_persist_wanted(o));
	if (holds != o->announced) {
		o->announced = holds;
		if (hook)
			hook(holds, o->key);
	}
}

/* Replaces o by nothing: a newer version, an unlink or a rename took its
 * path. Its queued flush is cancelled, a running one discarded, and its
 * copies freed as soon as no transfer uses them. */
void ckc_obj_retire(ckc_obj_t *o)
{
	o->retired = true;
	ckc_node_note(o);
	eng_map_remove(o);
	ckc_eng.st.objects_retired++;
	ckc_flush_dequeue(o);
	if (o->flushing)
		o->flush_cancel = true;
	/* a descriptor still open for reading reads the version it opened, as
	 * after a rename over the file or an unlink: its copies go with the
	 * last handle, and so does its real file (opened as this thread lets
	 * the lock go, before it removes or replaces the name) */
	if (o->readers > 0 && o->at_home && o->keep_fd < 0)
		later_add(-1, NULL, o);
	for (int l = 0; l < ckc_eng.ntier - 1 && ckc_obj_gone(o); l++) {
		ckc_place_t *p = &o->place[l];
		if (p->pins == 0 && p->state != LC_INIT && !(l == 0 && o->gref)) {
			ckc_place_free(o, l);
			ckc_set_state(o, l, LC_EV_DROP);
		}
	}
	ckc_trace("retire", o, 0, o->size, -1, 0);
	eng_signal(EC_ROOM);
	ckc_obj_put(o);
}

ckc_obj_t *ckc_obj_import_home(const char *key)
{
	struct stat st;
	/* the look at the real file runs without the lock (key may go with
	 * it: a name in the restore queue) */
	char *k = strdup(key);
	if (!k)
		return NULL;
	eng_unlock();
	bool found = sys_stat(k, &st) == 0 && S_ISREG(st.st_mode);
	ckc_mutex_lock(&ckc_eng.lock);
	/* written or imported meanwhile: that version is the current one */
	ckc_obj_t *o = ckc_map_find(k);
	if (o || !found || !ckc_eng.active) {
		sys_free(k);
		return o;
	}
	o = eng_obj_new(k);
	sys_free(k);
	if (!o)
		return NULL;
	o->size = (uint64_t)st.st_size;
	o->complete = true;
	eng_set_home(o, true);
	o->from_home = true;
	ckc_fid_t base;
	ckc_fid_of(&st, &base);
	eng_set_base(o, &base);
	o->home_dev = st.st_dev;
	o->home_dev_known = true;
	o->mode = st.st_mode & 07777;
	o->mtime = st.st_mtim;
	return o;
}

/* ---- trace --------------------------------------------------------- */


static void trace_line(const char *op, const char *key, uint64_t version, uint64_t off, uint64_t len,
		       int level, uint64_t t0_ns)
{
	uint64_t now = ckc_now_ns();
	char line[PATH_MAX + 160];
	int n = snprintf(line, sizeof(line), "%.6f %s %s v%llu off=%llu len=%llu tier=%s us=%.1f\n",
			 (double)(now - ckc_eng.t0_ns) / 1e9, op, key,
			 (unsigned long long)version, (unsigned long long)off,
			 (unsigned long long)len,
			 level >= 0 && level < ckc_eng.ntier ? ckc_eng.tier[level].name : "-",
			 t0_ns ? (double)(now - t0_ns) / 1e3 : 0.0);
	if (n > 0 && (size_t)n < sizeof(line))
		ckc_trace_put(line, (size_t)n); /* written by the trace's thread */
}

void eng_home_io_begin(ckc_obj_t *o)
{
	o->home_busy = true;
	ckc_obj_get(o);
	eng_unlock();
}

void eng_home_io_end(ckc_obj_t *o)
{
	ckc_mutex_lock(&ckc_eng.lock);
	eng_home_end(o);
}

/* ---- the identity of a real file not there yet --------------------- */

/* Unnamed files held for identities at most: each is a descriptor of the
 * process's, held until the version's first publication, so a quarter of
 * its limit on them (64 to 4096). */
static int id_max(void)
{
	static atomic_int max;
	int m = atomic_load_explicit(&max, memory_order_relaxed);
	if (!m) {
		struct rlimit rl;
		rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur / 4 : 256;
		m = n < 64 ? 64 : n > 4096 ? 4096 : (int)n;
		atomic_store_explicit(&max, m, memory_order_relaxed);
	}
	return m;
}

/* Whether o's first publication is still to come, names a new file and
 * may be the one to name id_fd (lock held); a file is made for it only
 * where o was created exclusively (id_excl). */
static bool id_wanted(const ckc_obj_t *o)
{
	return !o->retired && !o->at_home && !o->handed && !o->home_live && !o->capture &&
	       !o->rescue && o->base.known && !o->base.exists &&
	       ckc_eng.cfg.persist != CKC_PERSIST_NEVER;
}

void eng_id_drop(ckc_obj_t *o)
{
	if (o->id_fd < 0)
		return;
	later_add(o->id_fd, o->id_tmp, NULL);
	o->id_fd = -1;
	o->id_tmp = NULL;
	ckc_eng.id_held--;
}

bool eng_id_take(ckc_obj_t *o, int *fd, char **tmp)
{
	if (o->id_fd >= 0 && !id_wanted(o))
		eng_id_drop(o);
	if (o->id_fd < 0)
		return false;
	*fd = o->id_fd;
	*tmp = o->id_tmp;
	o->id_fd = -1;
	o->id_tmp = NULL;
	o->id_lent = true;
	ckc_eng.id_held--;
	return true;
}

void eng_id_detach(ckc_obj_t *from, eng_id_t *id)
{
	id->fd = -1;
	if (from->id_fd < 0 || from->at_home)
		return;
	id->fd = from->id_fd;
	id->tmp = from->id_tmp;
	id->dev = from->id_dev;
	id->ino = from->id_ino;
	from->id_fd = -1;
	from->id_tmp = NULL;
	from->id_known = false;
	ckc_eng.id_held--;
}

void eng_id_attach(ckc_obj_t *to, eng_id_t *id)
{
	if (id->fd < 0)
		return;
	if (!to || to->id_fd >= 0) {
		later_add(id->fd, id->tmp, NULL);
		return;
	}
	to->id_fd = id->fd;
	to->id_tmp = id->tmp;
	to->id_known = true;
	to->id_dev = id->dev;
	to->id_ino = id->ino;
	to->id_excl = true;
	ckc_eng.id_held++;
}

void eng_id_lent_end(ckc_obj_t *o)
{
	if (!o->id_lent)
		return;
	o->id_lent = false;
	eng_signal(EC_HOME);
	/* not given back: the identity went with the file */
	if (o->id_fd < 0 && o->home_fd < 0)
		o->id_known = false;
}

void eng_id_return(ckc_obj_t *o, int fd, char *tmp)
{
	struct stat st;
	eng_unlock();
	/* an unnamed file, emptied: whatever a failed fill left goes */
	bool usable = sys_fstat(fd, &st) == 0 && st.st_nlink == 0 && sys_ftruncate(fd, 0) == 0;
	ckc_mutex_lock(&ckc_eng.lock);
	if (usable && o->id_fd < 0 && o->home_fd < 0 && id_wanted(o) && o->id_known &&
	    st.st_dev == o->id_dev && st.st_ino == o->id_ino) {
		o->id_fd = fd;
		o->id_tmp = tmp;
		o->id_lent = false;
		ckc_eng.id_held++;
		eng_signal(EC_HOME);
		return;
	}
	later_add(fd, tmp, NULL);
	eng_id_lent_end(o);
}

/* Makes the unnamed file o's first publication will name (lock held;
 * dropped while it is made). */
static int id_make(ckc_obj_t *o)
{
	char *key = strdup(o->key), *tmp = NULL;
	int fd = -1;
	struct stat st;
	if (!key)
		return -ENOMEM;
	mode_t mode = o->mode;
	ckc_eng.id_held++; /* counted while it is made: the bound holds */
	eng_home_io_begin(o);
	int rc = ckc_home_temp(key, mode, &tmp, &fd);
	if (!rc && sys_fstat(fd, &st) != 0) {
		rc = -errno;
		ckc_home_discard(tmp, fd);
		sys_free(tmp);
	}
	eng_home_io_end(o);
	ckc_eng.id_held--;
	/* renamed meanwhile, published, or given a file by another thread:
	 * this one is not needed */
	if (!rc && (strcmp(key, o->key) != 0 || !id_wanted(o) || o->id_fd >= 0 || o->home_fd >= 0 ||
		    o->id_lent)) {
		later_add(fd, tmp, NULL);
		rc = -EAGAIN;
	} else if (!rc) {
		o->id_fd = fd;
		o->id_tmp = tmp;
		o->id_known = true;
		o->id_dev = st.st_dev;
		o->id_ino = st.st_ino;
		ckc_eng.id_held++;
	}
	sys_free(key);
	ckc_obj_put(o);
	return rc;
}

/* o's identity (lock held; dropped while a file is made). */
static int eng_ident(ckc_obj_t *o, dev_t *dev, ino_t *ino)
{
	int rc = -EAGAIN;
	ckc_obj_get(o); /* an unlink while the file is made frees nothing */
	for (int tries = 0; tries < 3 && rc == -EAGAIN; tries++) {
		/* a publication filling a file of its own: the real file it
		 * makes is the answer (its inode the only one to report) */
		uint64_t until = ckc_now_ns() + 10000000000ull;
		while (o->id_excl && o->pub_own_temp && !o->retired && ckc_now_ns() < until)
			eng_wait_ns(EC_HOME, 100000000);
		if (o->at_home && !o->retired) {
			rc = -EEXIST;
		} else if (!id_wanted(o)) {
			rc = -ENOENT;
		} else if (o->id_known && (o->id_fd >= 0 || o->home_fd >= 0 || o->id_lent)) {
			*dev = o->id_dev;
			*ino = o->id_ino;
			rc = 0;
		} else if (!o->id_excl || o->home_fd >= 0 || ckc_eng.id_held >= id_max()) {
			rc = -ENOSPC;
		} else if ((rc = id_make(o)) == 0) {
			rc = -EAGAIN; /* read on the next turn */
		}
	}
	ckc_obj_put(o);
	return rc;
}

void ckc_handle_keep_ident(ckc_handle_t *h)
{
	ckc_mutex_lock(&ckc_eng.lock);
	h->o->id_excl = true;
	eng_unlock();
}

int ckc_handle_ident(const ckc_handle_t *h, dev_t *dev, ino_t *ino)
{
	ckc_mutex_lock(&ckc_eng.lock);
	int rc = h->o->retired ? -ENOENT : eng_ident(h->o, dev, ino);
	eng_unlock();
	return rc;
}

int ckc_ident(const char *path, dev_t *dev, ino_t *ino)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = eng_lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? eng_ident(o, dev, ino) : -ENOENT;
	eng_unlock();
	return rc;
}

int eng_home_temp(ckc_obj_t *o)
{
	char *key = strdup(o->key), *tmp = NULL;
	mode_t mode = o->mode;
	int fd = -1;
	struct stat st;
	if (!key)
		return -ENOMEM;
	/* the file whose inode stat reported is the one to name */
	if (eng_id_take(o, &fd, &tmp)) {
		o->home_tmp = tmp;
		o->home_fd = fd;
		sys_free(key);
		return 0;
	}
	eng_home_io_begin(o);
	int rc = ckc_home_temp(key, mode, &tmp, &fd);
	bool known = !rc && sys_fstat(fd, &st) == 0;
	eng_home_io_end(o);
	if (!rc) {
		o->home_tmp = tmp;
		o->home_fd = fd;
		o->id_known = known;
		if (known) {
			o->id_dev = st.st_dev;
			o->id_ino = st.st_ino;
		}
	}
	sys_free(key);
	ckc_obj_put(o);
	return rc;
}

void ckc_trace(const char *op, const ckc_obj_t *o, uint64_t off, uint64_t len, int level,
	       uint64_t t0_ns)
{
	if (ckc_eng.trace_fd >= 0)
		trace_line(op, o->key, o->version, off, len, level, t0_ns);
}

void ckc_trace_key(const char *op, const char *key)
{
	if (ckc_eng.trace_fd >= 0)
		trace_line(op, key, 0, 0, 0, -1, 0);
}
