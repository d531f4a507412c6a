/* The engine: start and stop, the object map (canonical path -> current
 * version), and the operations the interposer calls: open, write, read,
 * close, sync, unlink, rename, stat, hints. One mutex guards all metadata;
 * bytes move outside it, with the copies they touch pinned. */
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

ckc_engine_t ckc_eng = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.pcv = PTHREAD_COND_INITIALIZER,
	.trace_fd = -1,
};

/* Serialises start and stop; never taken by the data path. */
static pthread_mutex_t eng_life = PTHREAD_MUTEX_INITIALIZER;

struct ckc_handle {
	ckc_obj_t *o;
	bool writer;
	bool waited;       /* this reader already counted a wait */
	bool counted;      /* its checkpoint was counted as read from a tier */
	int home_fd;       /* the real file, opened by the first read from it */
	int nrange, caprange;
	uint64_t (*range)[2]; /* bytes read so far: sorted, disjoint [a, b) */
	/* small reads of a copy in device memory come from one host copy of a
	 * window of it (ckc_gpu_window), not a device transfer each */
	char *win;
	uint64_t win_off, win_len;
};

uint64_t ckc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- object map ---------------------------------------------------- */

/* ckc_eng.nobj for readers without the lock. */
static atomic_size_t eng_nobj;

bool ckc_holds_objects(void)
{
	return atomic_load_explicit(&eng_nobj, memory_order_relaxed) != 0;
}

static uint64_t key_hash(const char *k)
{
	uint64_t h = 1469598103934665603ull;
	while (*k)
		h = (h ^ (unsigned char)*k++) * 1099511628211ull;
	return h;
}

ckc_obj_t *ckc_map_find(const char *key)
{
	if (!ckc_eng.map_cap)
		return NULL;
	for (ckc_obj_t *o = ckc_eng.map[key_hash(key) & (ckc_eng.map_cap - 1)]; o; o = o->hnext)
		if (strcmp(o->key, key) == 0)
			return o;
	return NULL;
}

static int map_insert(ckc_obj_t *o)
{
	if (ckc_eng.nobj + 1 > ckc_eng.map_cap / 2) {
		size_t cap = ckc_eng.map_cap ? ckc_eng.map_cap * 2 : 256;
		ckc_obj_t **m = calloc(cap, sizeof(*m));
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
	atomic_store_explicit(&eng_nobj, ckc_eng.nobj, memory_order_relaxed);
	return 0;
}

static void map_remove(ckc_obj_t *o)
{
	ckc_obj_t **pp = &ckc_eng.map[key_hash(o->key) & (ckc_eng.map_cap - 1)];
	while (*pp && *pp != o)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = o->hnext;
		ckc_eng.nobj--;
		atomic_store_explicit(&eng_nobj, ckc_eng.nobj, memory_order_relaxed);
	}
	o->hnext = NULL;
}

/* ---- objects ------------------------------------------------------- */

/* A new version named key, outside the map. Lock held. */
static ckc_obj_t *obj_alloc(const char *key)
{
	ckc_obj_t *o = calloc(1, sizeof(*o));
	if (!o || !(o->key = strdup(key))) {
		sys_free(o);
		return NULL;
	}
	o->version = ++ckc_eng.next_version;
	o->mode = 0644;
	o->home_fd = -1;
	o->flush_edge = -1;
	o->wlevel = ckc_eng.ntier - 1;
	return o;
}

static ckc_obj_t *obj_new(const char *key)
{
	ckc_obj_t *o = obj_alloc(key);
	if (!o)
		return NULL;
	o->refs = 1; /* the map's */
	if (map_insert(o)) {
		sys_free(o->key);
		sys_free(o);
		return NULL;
	}
	return o;
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
	for (int l = 0; l < CKC_MAX_TIERS; l++)
		sys_free(o->place[l].ext);
	if (o->home_fd >= 0 && !o->home_live)
		ckc_home_discard(o->home_tmp, o->home_fd);
	else if (o->home_fd >= 0)
		sys_close(o->home_fd);
	sys_free(o->home_tmp);
	sys_free(o->rescue);
	sys_free(o->key);
	sys_free(o);
}

void (*ckc_node_hook)(bool holds, const char *key);

void ckc_node_note(ckc_obj_t *o)
{
	/* bytes the real path lacks: an open writer's, or a closed version's
	 * that must still be published */
	bool holds = ckc_node_hook && !o->retired && !o->capture && !o->at_home && !o->rescue &&
		     !o->handed && ckc_eng.cfg.persist != CKC_PERSIST_NEVER &&
		     (!o->complete || ckc_persist_wanted(o));
	if (holds != o->announced) {
		o->announced = holds;
		ckc_node_hook(holds, o->key);
	}
}

/* Replaces o by nothing: a newer version, an unlink or a rename took its
 * path. Its queued flush is cancelled, a running one discarded, and its
 * copies freed as soon as no transfer uses them. */
void ckc_obj_retire(ckc_obj_t *o)
{
	o->retired = true;
	ckc_node_note(o);
	map_remove(o);
	ckc_eng.st.objects_retired++;
	ckc_flush_dequeue(o);
	if (o->flushing)
		o->flush_cancel = true;
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		ckc_place_t *p = &o->place[l];
		if (p->pins == 0 && p->state != LC_INIT && !(l == 0 && o->gref)) {
			ckc_place_free(o, l);
			ckc_set_state(o, l, LC_EV_DROP);
		}
	}
	ckc_trace("retire", o, 0, o->size, -1, 0);
	pthread_cond_broadcast(&ckc_eng.cv);
	ckc_obj_put(o);
}

ckc_obj_t *ckc_obj_import_home(const char *key)
{
	struct stat st;

	if (sys_stat(key, &st) != 0 || !S_ISREG(st.st_mode))
		return NULL;
	ckc_obj_t *o = obj_new(key);
	if (!o)
		return NULL;
	o->size = (uint64_t)st.st_size;
	o->complete = true;
	o->at_home = true;
	o->from_home = true;
	ckc_fid_of(&st, &o->base);
	o->home_dev = st.st_dev;
	o->home_dev_known = true;
	o->mode = st.st_mode & 07777;
	o->mtime = st.st_mtim;
	return o;
}

/* ---- trace --------------------------------------------------------- */

static uint64_t trace_off;

void ckc_trace(const char *op, const ckc_obj_t *o, uint64_t off, uint64_t len, int level,
	       uint64_t t0_ns)
{
	if (ckc_eng.trace_fd < 0)
		return;
	uint64_t now = ckc_now_ns();
	char line[PATH_MAX + 160];
	int n = snprintf(line, sizeof(line), "%.6f %s %s v%llu off=%llu len=%llu tier=%s us=%.1f\n",
			 (double)(now - ckc_eng.t0_ns) / 1e9, op, o->key,
			 (unsigned long long)o->version, (unsigned long long)off,
			 (unsigned long long)len,
			 level >= 0 && level < ckc_eng.ntier ? ckc_eng.tier[level].name : "-",
			 t0_ns ? (double)(now - t0_ns) / 1e3 : 0.0);
	if (n > 0 && (size_t)n < sizeof(line) &&
	    ckc_io_pwrite_all(ckc_eng.trace_fd, line, (size_t)n, (off_t)trace_off) == 0)
		trace_off += (uint64_t)n;
}

/* ---- start and stop ------------------------------------------------ */

static int output_open(const char *name, const char **why);

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void config_copy(ckc_config_t *dst, const ckc_config_t *src)
{
	*dst = *src;
	dst->paths = dup_or_null(src->paths);
	dst->hints = dup_or_null(src->hints);
	dst->ssd_dir = dup_or_null(src->ssd_dir);
	dst->rescue_dir = dup_or_null(src->rescue_dir);
	dst->stats = dup_or_null(src->stats);
	dst->trace = dup_or_null(src->trace);
}

static int tiers_open(void)
{
	ckc_config_t *c = &ckc_eng.cfg;
	int n = 0, rc;

	/* a job's memory limit (Slurm, a container) is its machine: read when
	 * the cache starts, not in every process that loads the library */
	if (c->host_cache_from != CKC_SIZE_BYTES) {
		uint64_t was = c->host_cache, lim = ckc_memlimit_job();
		if (lim)
			ckc_config_host_for(c, lim);
		if (c->host_cache != was)
			ckc_info("host tier: %llu bytes, from the memory limit of this job's control group "
				 "(%llu bytes)", (unsigned long long)c->host_cache, (unsigned long long)lim);
	}

	if (c->capture == CKC_CAPTURE_DEVICE && (c->gpu_cache_pct > 0 || c->gpu_cache > 0)) {
		/* mapped at the program's first capture, on its device */
		if ((rc = ckc_gpu_open(&ckc_eng.tier[n])) != 0)
			return rc;
		ckc_eng.ntier = ++n;
	}
	if (c->host_cache) {
		ckc_tier_t *t = &ckc_eng.tier[n];
		t->name = "host";
		t->kind = TIER_HOST;
		rc = ckc_host_open(t, c->host_cache, !c->host_whole, ckc_eng.ntier > 0);
		if (rc) {
			ckc_error("CKPTCACHE_HOST_CACHE=%llu: cannot map the host tier (%s)",
				  (unsigned long long)c->host_cache, strerror(-rc));
			return rc;
		}
		ckc_eng.ntier = ++n; /* so that a failure below closes it */
	}
	if (c->ssd_cache) {
		ckc_tier_t *t = &ckc_eng.tier[n];
		t->name = "ssd";
		t->kind = TIER_SSD;
		rc = ckc_ssd_open(t, c->ssd_cache, c->ssd_dir);
		if (rc == -ENOSPC || rc == -EDQUOT) {
			/* the tiers of the processes already running (a parent's,
			 * say) took the space: this one goes without */
			char h[32];
			ckc_warn("CKPTCACHE_SSD_DIR='%s': no room for an ssd tier of %s now (%s): this "
				 "process runs without one",
				 c->ssd_dir, ckc_format_size(c->ssd_cache, h, sizeof(h)), strerror(-rc));
			memset(t, 0, sizeof(*t));
			t->fd = -1;
		} else if (rc) {
			ckc_error("CKPTCACHE_SSD_DIR='%s': cannot create the ssd tier file of %llu bytes (%s)",
				  c->ssd_dir, (unsigned long long)c->ssd_cache, strerror(-rc));
			return rc;
		} else {
			ckc_eng.ntier = ++n;
		}
	}
	ckc_tier_t *h = &ckc_eng.tier[n];
	h->name = "home";
	h->kind = TIER_HOME;
	h->fd = -1;
	n++;
	ckc_eng.ntier = n;
	for (int l = 0; l < n; l++) {
		ckc_eng.tier[l].level = l;
		ckc_eng.tier[l].st.capacity = ckc_eng.tier[l].arena.capacity;
		/* first guesses until flushes are measured */
		ckc_eng.edge[l].bw = ckc_eng.tier[l].kind == TIER_GPU ? 20e9 :
				     ckc_eng.tier[l].kind == TIER_HOST && l + 1 < n - 1 ? 2e9 : 1e9;
	}
	return 0;
}

static void tiers_close(void)
{
	for (int l = 0; l < ckc_eng.ntier; l++) {
		ckc_tier_t *t = &ckc_eng.tier[l];
		if (t->kind == TIER_GPU)
			ckc_gpu_close(t);
		else if (t->kind == TIER_HOST)
			ckc_host_close(t);
		else if (t->kind == TIER_SSD)
			ckc_ssd_close(t);
	}
}

static void engine_reset(void)
{
	ckc_config_free(&ckc_eng.cfg);
	sys_free(ckc_eng.map);
	if (ckc_eng.hq)
		hq_free(ckc_eng.hq);
	if (ckc_eng.hints_open)
		hint_reader_close(&ckc_eng.hints);
	if (ckc_eng.trace_fd >= 0)
		sys_close(ckc_eng.trace_fd);
	pthread_mutex_t lock = ckc_eng.lock;
	pthread_cond_t cv = ckc_eng.cv, pcv = ckc_eng.pcv;
	memset(&ckc_eng, 0, sizeof(ckc_eng));
	ckc_eng.lock = lock;
	ckc_eng.cv = cv;
	ckc_eng.pcv = pcv;
	ckc_eng.trace_fd = -1;
	for (int l = 0; l < CKC_MAX_TIERS; l++)
		ckc_eng.tier[l].fd = -1;
	trace_off = 0;
}

static int engine_start(void)
{
	const ckc_config_t *c = &ckc_eng.cfg;
	int rc;

	ckc_log_threshold = c->log_level;
	ckc_eng.t0_ns = ckc_now_ns();
	for (int l = 0; l < CKC_MAX_TIERS; l++)
		ckc_eng.tier[l].fd = -1;
	/* the private folder first when there is an ssd tier: the tier lives
	 * in it, and the files of processes that died before this one are
	 * cleaned up from it; without one, it is made when the process first
	 * needs a record of a temporary file */
	const char *base = c->ssd_dir ? c->ssd_dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (!c->ssd_cache)
		ckc_state_later(base, "CKPTCACHE_SSD_DIR");
	else if ((rc = ckc_state_open(base, "CKPTCACHE_SSD_DIR")) != 0)
		return rc;
	if ((rc = tiers_open()) != 0) {
		tiers_close();
		ckc_state_close();
		return rc;
	}
	if (!(ckc_eng.hq = hq_new()))
		return -ENOMEM;
	if (c->hints && c->order != CKC_ORDER_NONE)
		ckc_info("CKPTCACHE_HINTS is set: CKPTCACHE_ORDER is ignored");
	if (c->trace) {
		char name[PATH_MAX];
		const char *why = "the name is too long";
		ckc_eng.trace_fd = ckc_expand_name(c->trace, name, sizeof(name)) ? -1 :
				   output_open(name, &why);
		if (ckc_eng.trace_fd < 0)
			ckc_warn("CKPTCACHE_TRACE='%s': %s; no trace is written", c->trace, why);
	}
	ckc_eng.prefetch_started = c->prefetch == CKC_PREFETCH_EAGER;
	/* the hint file as it is now, before the first read is counted */
	pthread_mutex_lock(&ckc_eng.lock);
	ckc_hints_poll(false);
	pthread_mutex_unlock(&ckc_eng.lock);
	/* the threads start when there is work for them: a flush thread with
	 * its first flush, the prefetch thread now only with a hint file to
	 * read (or eager prefetching), else with a restore queue */
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		ckc_flusher_init(l);
	if ((c->hints || c->prefetch == CKC_PREFETCH_EAGER) && (rc = ckc_prefetcher_start()) != 0)
		return rc;
	ckc_eng.active = true;
	ckc_info("cache active: %d tier(s) above home, persist=%d, eviction=%d",
		 ckc_eng.ntier - 1, (int)c->persist, (int)c->eviction);
	return 0;
}

static void threads_stop(void)
{
	pthread_mutex_lock(&ckc_eng.lock);
	ckc_eng.stopping = true;
	pthread_cond_broadcast(&ckc_eng.cv);
	pthread_cond_broadcast(&ckc_eng.pcv);
	pthread_mutex_unlock(&ckc_eng.lock);
	ckc_prefetcher_stop();
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		ckc_flusher_stop(l);
	if (ckc_eng.tier[0].kind == TIER_GPU)
		ckc_gpu_stop(&ckc_eng.tier[0]);
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		if (ckc_eng.tier[l].kind == TIER_HOST)
			ckc_host_stop(&ckc_eng.tier[l]);
}

int ckc_init_config(const ckc_config_t *c)
{
	pthread_mutex_lock(&eng_life);
	if (ckc_eng.active) {
		pthread_mutex_unlock(&eng_life);
		return 0;
	}
	engine_reset();
	/* every system call of the engine's threads through a real function */
	ckc_io_resolve();
	config_copy(&ckc_eng.cfg, c);
	int rc = c->enabled ? engine_start() : 1;
	if (rc < 0) {
		ckc_error("the cache is disabled and every call passes through");
		threads_stop();
		tiers_close();
		ckc_state_close();
		engine_reset();
		if (c->strict) {
			ckc_error("aborting (CKPTCACHE_STRICT=1)");
			abort();
		}
	}
	pthread_mutex_unlock(&eng_life);
	return rc;
}

int ckc_init(void)
{
	ckc_config_t c;
	int errors = ckc_config_from_env(&c);

	if (errors && c.strict)
		abort();
	int rc = ckc_init_config(&c);
	ckc_config_free(&c);
	return rc;
}

bool ckc_active(void)
{
	pthread_mutex_lock(&ckc_eng.lock);
	bool a = ckc_eng.active;
	pthread_mutex_unlock(&ckc_eng.lock);
	return a;
}

static void stats_collect(ckc_stats_t *s)
{
	*s = ckc_eng.st;
	if (ckc_svc.stats_extra)
		ckc_svc.stats_extra(s);
	s->ntier = ckc_eng.ntier;
	for (int l = 0; l < ckc_eng.ntier; l++) {
		s->tier_name[l] = ckc_eng.tier[l].name;
		s->tier[l] = ckc_eng.tier[l].st;
		/* the edge's bandwidth is a guess until something was flushed */
		if (l + 1 < ckc_eng.ntier && s->tier[l].flush_ops)
			s->tier[l].flush_bw = ckc_eng.edge[l].bw;
		if (ckc_eng.tier[l].kind == TIER_HOST)
			s->tier[l].populated_bytes = atomic_load(&ckc_eng.tier[l].populated);
		if (ckc_eng.tier[l].kind == TIER_GPU && ckc_eng.tier[l].gpu)
			ckc_gpu_stats(&ckc_eng.tier[l], s);
		if (ckc_eng.tier[l].kind == TIER_HOST && ckc_eng.tier[l].pinned_once)
			s->host_pinned = true;
	}
}

int ckc_expand_name(const char *tmpl, char *out, size_t outlen)
{
	size_t n = 0;

	for (const char *p = tmpl; *p; p++) {
		char num[256];
		const char *add = NULL;
		if (p[0] == '%' && p[1]) {
			switch (p[1]) {
			case 'p': snprintf(num, sizeof(num), "%ld", (long)getpid()); add = num; break;
			case 'r': snprintf(num, sizeof(num), "%ld", ckc_eng.cfg.rank); add = num; break;
			case 'h':
				if (gethostname(num, sizeof(num) - 1) != 0)
					strcpy(num, "host");
				num[sizeof(num) - 1] = '\0';
				add = num;
				break;
			case '%': add = "%"; break;
			}
		}
		if (add) {
			size_t k = strlen(add);
			if (n + k >= outlen)
				return -ENAMETOOLONG;
			memcpy(out + n, add, k);
			n += k;
			p++;
		} else {
			if (n + 1 >= outlen)
				return -ENAMETOOLONG;
			out[n++] = *p;
		}
	}
	out[n] = '\0';
	return 0;
}

/* Opens an output file of the library (statistics, trace) for writing from
 * its start. Such files often go to a shared folder: a symbolic link there
 * is not followed, and a file of another user is not written. Returns an
 * fd, or -1 with *why saying why not. */
static int output_open(const char *name, const char **why)
{
	struct stat st;
	int fd = sys_open(name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0644);

	if (fd < 0) {
		*why = errno == ELOOP ? "it is a symbolic link, which is not followed" : strerror(errno);
		return -1;
	}
	if (sys_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		*why = "it is not a regular file of this user";
		sys_close(fd);
		return -1;
	}
	if (sys_ftruncate(fd, 0) != 0) {
		*why = strerror(errno);
		sys_close(fd);
		return -1;
	}
	return fd;
}

static void stats_write(void)
{
	char *buf = NULL;
	size_t len = 0;
	ckc_stats_t s;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return;
	stats_collect(&s);
	ckc_stats_write_json(&s, f);
	sys_fclose(f);
	char name[PATH_MAX];
	const char *why = "the name is too long";
	int fd = ckc_expand_name(ckc_eng.cfg.stats, name, sizeof(name)) ? -1 : output_open(name, &why);
	int rc = fd < 0 ? 0 : ckc_io_pwrite_all(fd, buf, len, 0);
	if (rc)
		why = strerror(-rc);
	if (fd < 0 || rc)
		ckc_warn("CKPTCACHE_STATS='%s': %s; no statistics written", ckc_eng.cfg.stats, why);
	if (fd >= 0)
		sys_close(fd);
	sys_free(buf);
}

static int migrate_to(ckc_obj_t *o, bool home_only);

/* Waits on the engine's condition until deadline_ns (0: no limit). Lock
 * held. Returns false once the deadline has passed. */
static bool wait_until(uint64_t deadline_ns)
{
	if (!deadline_ns) {
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
		return true;
	}
	uint64_t now = ckc_now_ns();
	if (now >= deadline_ns)
		return false;
	/* the condition waits on CLOCK_REALTIME: wake up in small steps */
	uint64_t step = deadline_ns - now < 50000000ull ? deadline_ns - now : 50000000ull;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)step;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_cond_timedwait(&ckc_eng.cv, &ckc_eng.lock, &ts);
	return true;
}

static bool flushes_pending(void)
{
	bool busy = false;
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		busy |= ckc_eng.edge[l].head || ckc_eng.edge[l].current;
	return busy;
}

/* A checkpoint the program still has open for writing as it ends, which
 * must reach its real path. Lock held. */
static ckc_obj_t *open_writer(void)
{
	if (ckc_eng.cfg.persist == CKC_PERSIST_NEVER)
		return NULL; /* nothing is written to the real paths */
	for (size_t i = 0; i < ckc_eng.map_cap; i++)
		for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext)
			if (!o->complete && !o->retired && !o->home_live && !o->capture)
				return o;
	return NULL;
}

/* Hands o, still open for writing, over to its real file: its bytes so far
 * go to a temporary file at home, which is renamed into place and stays
 * open, so that the program's later writes land in the real file. Lock
 * held; dropped while bytes move. */
static void handover(ckc_obj_t *o)
{
	int rc = 0;

	while (o->migrating)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (o->complete || o->retired || o->home_live)
		return;
	if (o->wlevel < ckc_eng.ntier - 1)
		rc = migrate_to(o, true);
	if (!rc && !o->complete && !o->retired) {
		char *tmp = o->home_tmp;
		int fd = o->home_fd;
		ckc_attr_t attr = o->attr;
		o->home_busy = true;
		pthread_mutex_unlock(&ckc_eng.lock);
		rc = ckc_home_commit_open(tmp, o->key, fd, &attr);
		pthread_mutex_lock(&ckc_eng.lock);
		o->home_busy = false;
		if (!rc) {
			sys_free(o->home_tmp);
			o->home_tmp = NULL;
			o->home_live = true;
			o->at_home = true;
		}
		pthread_cond_broadcast(&ckc_eng.cv);
	}
	if (rc) {
		ckc_error("checkpoint %s, still open as the program ends, could not be written to its "
			  "real path (%s)", o->key, strerror(-rc));
		/* not tried again: its bytes stay in the cache until the end */
		o->home_live = true;
	}
}

/* Every required flush done and every open checkpoint handed over, or the
 * deadline passed (false). Lock held. */
static bool drain_locked(uint64_t deadline_ns)
{
	for (;;) {
		if (!flushes_pending()) {
			ckc_obj_t *o = open_writer();
			if (!o)
				return true;
			ckc_obj_get(o);
			handover(o);
			ckc_obj_put(o);
			continue;
		}
		for (int l = 0; l + 1 < ckc_eng.ntier; l++)
			pthread_cond_signal(&ckc_eng.edge[l].cv);
		if (ckc_flush_unthreaded())
			continue;
		if (!wait_until(deadline_ns))
			return false;
	}
}

static void report_unpublished(void)
{
	for (size_t i = 0; i < ckc_eng.map_cap; i++)
		for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext)
			if (ckc_persist_wanted(o) && !o->at_home && !o->retired && !o->capture)
				ckc_error("checkpoint %s did not reach its real path%s%s", o->key,
					  o->rescue ? "; its bytes are in " : "",
					  o->rescue ? o->rescue : "");
}

int ckc_finish(uint64_t deadline_ns)
{
	pthread_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return 0;
	}
	if (ckc_eng.finish_state) {
		bool in_time = true;
		while (ckc_eng.finish_state == 1 && in_time)
			in_time = wait_until(deadline_ns);
		pthread_mutex_unlock(&ckc_eng.lock);
		return in_time ? 0 : -ETIMEDOUT;
	}
	ckc_eng.finish_state = 1;
	ckc_eng.draining = true;
	pthread_cond_broadcast(&ckc_eng.cv);
	uint64_t drain0 = ckc_now_ns();
	bool done = drain_locked(deadline_ns);
	ckc_eng.st.drain_s = (double)(ckc_now_ns() - drain0) / 1e9;
	pthread_mutex_unlock(&ckc_eng.lock);
	/* a flush that is stuck past the deadline is not waited for */
	if (done)
		threads_stop();
	pthread_mutex_lock(&ckc_eng.lock);
	if (done)
		report_unpublished();
	ckc_hints_summary();
	if (ckc_eng.cfg.stats)
		stats_write();
	/* the tier's file goes now (this process's threads may still read it
	 * through its descriptor); nothing in the checkpoint folders is left */
	for (int l = 0; l < ckc_eng.ntier; l++)
		if (ckc_eng.tier[l].kind == TIER_SSD)
			ckc_ssd_unlink(&ckc_eng.tier[l]);
	/* a flush still running keeps its temporary file on the record, for
	 * the next process to remove once this one is gone */
	if (done)
		ckc_state_close();
	ckc_eng.finish_state = 2;
	pthread_cond_broadcast(&ckc_eng.cv);
	pthread_mutex_unlock(&ckc_eng.lock);
	return done ? 0 : -ETIMEDOUT;
}

void ckc_shutdown(void)
{
	pthread_mutex_lock(&eng_life);
	ckc_finish(0);
	pthread_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active) {
		pthread_mutex_unlock(&ckc_eng.lock);
		pthread_mutex_unlock(&eng_life);
		return;
	}
	for (size_t i = 0; i < ckc_eng.map_cap; i++)
		while (ckc_eng.map[i]) {
			ckc_obj_t *o = ckc_eng.map[i];
			map_remove(o);
			o->retired = true;
			ckc_node_note(o);
			ckc_obj_put(o);
		}
	tiers_close();
	ckc_state_close();
	ckc_eng.active = false;
	pthread_mutex_unlock(&ckc_eng.lock);
	engine_reset();
	pthread_mutex_unlock(&eng_life);
}

/* ---- writing ------------------------------------------------------- */

uint64_t ckc_predict_size(void)
{
	uint64_t m = 0;
	for (int i = 0; i < ckc_eng.nrecent && i < CKC_PREDICT_SLOTS; i++)
		m = ckc_eng.recent[i] > m ? ckc_eng.recent[i] : m;
	return m;
}

static int canon(const char *path, char *out)
{
	return ckc_path_key(path, NULL, out, PATH_MAX);
}

/* Canonicalises path into key (PATH_MAX bytes) and takes the engine lock.
 * Returns 0 with the lock held, and *op the current version of key (NULL if
 * none, or if the engine is stopped); or -errno for a bad path, unlocked. */
static int lookup_locked(const char *path, char *key, ckc_obj_t **op)
{
	int rc = canon(path, key);
	if (rc)
		return rc;
	pthread_mutex_lock(&ckc_eng.lock);
	*op = ckc_eng.active ? ckc_map_find(key) : NULL;
	return 0;
}

static ckc_handle_t *handle_new(ckc_obj_t *o, bool writer)
{
	ckc_handle_t *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->o = o;
	h->writer = writer;
	h->home_fd = -1;
	ckc_obj_get(o);
	return h;
}

int ckc_open_write(const char *path, mode_t mode, ckc_handle_t **hp)
{
	char key[PATH_MAX];
	int rc = canon(path, key);
	if (rc)
		return rc;
	pthread_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENODEV;
	}
	/* a publication of this path under way ends first, so that the file
	 * this version replaces is the one recorded below */
	ckc_obj_t *old;
	while (((old = ckc_map_find(key)) && old->home_busy) || ckc_committing(key))
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (ckc_eng.draining) {
		/* the program ends: the new version goes to the real file
		 * directly, after any publication of the old one */
		while (old && (old->home_busy || old->flushing) && !old->retired)
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
		if (old && !old->retired)
			ckc_obj_retire(old);
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENODEV;
	}
	if (old)
		ckc_obj_retire(old);
	ckc_obj_t *o = obj_new(key);
	ckc_handle_t *h = o ? handle_new(o, true) : NULL;
	if (!h) {
		if (o)
			ckc_obj_retire(o);
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENOMEM;
	}
	o->mode = mode & 07777;
	clock_gettime(CLOCK_REALTIME, &o->mtime);
	o->wlevel = ckc_eng.ntier > 1 ? 0 : ckc_eng.ntier - 1;
	/* a gpu tier without device memory yet (no capture so far) */
	if (o->wlevel == 0 && ckc_eng.tier[0].kind == TIER_GPU && !ckc_gpu_usable(&ckc_eng.tier[0]))
		o->wlevel = 1;
	if (o->wlevel < ckc_eng.ntier - 1) {
		ckc_set_state(o, o->wlevel, LC_EV_WRITE_BEGIN);
	} else if ((rc = ckc_home_temp(key, o->mode, &o->home_tmp, &o->home_fd)) != 0) {
		ckc_obj_retire(o);
		pthread_mutex_unlock(&ckc_eng.lock);
		sys_free(h);
		return rc;
	}
	ckc_trace("open-write", o, 0, 0, o->wlevel, 0);
	ckc_node_note(o);
	pthread_mutex_unlock(&ckc_eng.lock);
	/* no handle is out yet: nothing can publish o meanwhile */
	ckc_fid_t base;
	dev_t dev = 0;
	ckc_fid_take(key, &base);
	bool dev_known = ckc_home_dev(key, &base, &dev);
	pthread_mutex_lock(&ckc_eng.lock);
	o->base = base;
	o->home_dev = dev;
	o->home_dev_known = dev_known;
	pthread_mutex_unlock(&ckc_eng.lock);
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
	pthread_mutex_unlock(&ckc_eng.lock);
	rc = ckc_src_copy(src, &dst, size, NULL, NULL);
	pthread_mutex_lock(&ckc_eng.lock);
	o->place[to].pins--;
	ckc_src_release(&dst);
	return rc;
}

static void ref_detach(ckc_obj_t *o);

/* Moves the bytes written so far from the write tier to the next tier that
 * takes them (the object outgrew its tier, or the tier failed), or with
 * home_only to a temporary file at home. Lock held; dropped while the bytes
 * move. Returns 0 or -errno. */
static int migrate_to(ckc_obj_t *o, bool home_only)
{
	int from = o->wlevel, home = ckc_eng.ntier - 1, rc = 0;
	ckc_place_t *fp = &o->place[from];
	ckc_src_t src;

	o->migrating = true;
	while (fp->pins > 0)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
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
		rc = ckc_home_temp(o->key, o->mode, &o->home_tmp, &o->home_fd);
		if (!rc) {
			int fd = o->home_fd;
			pthread_mutex_unlock(&ckc_eng.lock);
			rc = ckc_home_fill(fd, &src, size, NULL, NULL);
			pthread_mutex_lock(&ckc_eng.lock);
		}
	}
	ckc_src_release(&src);
	if (rc) {
		ckc_error("checkpoint %s could not move out of the %s tier (%s)", o->key,
			  ckc_eng.tier[from].name, strerror(-rc));
		goto out;
	}
	if (from == 0 && o->gref)
		ref_detach(o);
	else
		ckc_place_free(o, from);
	ckc_set_state(o, from, LC_EV_DROP);
	o->wlevel = to;
	ckc_trace("bypass", o, 0, size, to, 0);
out:
	o->migrating = false;
	pthread_cond_broadcast(&ckc_eng.cv);
	return rc;
}

static int migrate_down(ckc_obj_t *o)
{
	return migrate_to(o, false);
}

/* Makes the write tier's copy of o hold end bytes. Lock held. */
static int write_room(ckc_obj_t *o, uint64_t end)
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
			if (need < CKC_MIN_RESERVE && end <= CKC_MIN_RESERVE)
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
		if ((rc = migrate_down(o)) != 0)
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
	char *bounce = malloc(chunk);
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

	while (len > 0) {
		int n = ckc_place_segments(p, off, len, seg, 8);
		if (n == -E2BIG)
			n = 8;
		else if (n < 0)
			return n;
		p->pins++;
		pthread_mutex_unlock(&ckc_eng.lock);
		int rc = 0;
		bool big = buf && len >= CKC_PROG_COPY_MIN;
		if (big)
			ckc_prog_begin();
		for (int i = 0; i < n && !rc; i++) {
			rc = buf ? ckc_tier_put(t, seg[i].aoff, src, seg[i].alen) :
				   put_from_device(t, seg[i].aoff, dsrc, seg[i].alen);
			src += seg[i].alen;
			dsrc += seg[i].alen;
			off += seg[i].alen;
			len -= seg[i].alen;
		}
		if (big)
			ckc_prog_end();
		pthread_mutex_lock(&ckc_eng.lock);
		ckc_unpin(o, t->level);
		if (rc)
			return rc;
	}
	return 0;
}

static int zero_fill(ckc_obj_t *o, uint64_t from, uint64_t to)
{
	static const char zeros[CKC_ALIGN];
	int rc = 0;

	/* holes are rare: fill them with the lock held so no concurrent
	 * writer of the same range can be overwritten */
	while (!rc && from < to) {
		size_t n = to - from < sizeof(zeros) ? (size_t)(to - from) : sizeof(zeros);
		ckc_place_t *p = &o->place[o->wlevel];
		ckc_ext_t seg;
		if (ckc_place_segments(p, from, n, &seg, 1) != 1)
			n = 1 + (size_t)((from | (CKC_ALIGN - 1)) - from);
		rc = ckc_place_segments(p, from, n, &seg, 1) == 1 ?
			     ckc_tier_put(&ckc_eng.tier[o->wlevel], seg.aoff, zeros, n) : -EIO;
		from += n;
	}
	return rc;
}

static ssize_t pwrite_src(ckc_handle_t *h, const void *buf, uint64_t dsrc, size_t len, uint64_t off);

ssize_t ckc_pwrite(ckc_handle_t *h, const void *buf, size_t len, uint64_t off)
{
	return pwrite_src(h, buf, 0, len, off);
}

/* pwrite_locked's answer when the write must start over (its tier changed
 * under it). */
#define PW_AGAIN (-4097)

/* One attempt at a write (lock held throughout, dropped while bytes move). */
static ssize_t pwrite_locked(ckc_obj_t *o, const void *buf, uint64_t dsrc, size_t len, uint64_t off,
			     uint64_t t0)
{
	uint64_t end = off + len;
	int rc;

	while (o->migrating)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (o->retired)
		return (ssize_t)len; /* a newer version replaced this one: its bytes go nowhere */
	if ((rc = write_room(o, end)) != 0)
		return rc;
	if (o->wlevel == ckc_eng.ntier - 1) {
		int fd = o->home_fd;
		pthread_mutex_unlock(&ckc_eng.lock);
		rc = buf ? ckc_io_pwrite_all(fd, buf, len, (off_t)off) :
			   device_bounce(dsrc, len, NULL, off, fd);
		pthread_mutex_lock(&ckc_eng.lock);
	} else {
		/* a write past the end leaves a hole; writes still in flight
		 * below it may fill it first, so let them land and look again */
		int wl = o->wlevel;
		while (off > o->size && o->place[wl].pins > 0)
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
		if (o->migrating || o->wlevel != wl)
			return PW_AGAIN;
		if (off > o->size && (rc = zero_fill(o, o->size, off)) != 0)
			return rc;
		if (off > o->size)
			o->size = off;
		rc = write_bytes(o, buf, dsrc, len, off);
		if (rc && rc != -ENOMEM && !o->retired) {
			/* the tier failed: move what is written down and retry */
			ckc_warn("%s tier: write of %s failed (%s)", ckc_eng.tier[o->wlevel].name,
				 o->key, strerror(-rc));
			ckc_eng.tier[o->wlevel].st.flush_errors++;
			if (migrate_down(o) == 0)
				return PW_AGAIN;
		}
	}
	if (!rc) {
		if (end > o->size)
			o->size = end;
		o->attr.mask &= ~CKC_ATTR_TIMES;
		ckc_tier_stats_t *st = &ckc_eng.tier[o->wlevel].st;
		st->put_ops++;
		st->put_bytes += len;
		ckc_trace("write", o, off, len, o->wlevel, t0);
	}
	return rc ? rc : (ssize_t)len;
}

static ssize_t pwrite_src(ckc_handle_t *h, const void *buf, uint64_t dsrc, size_t len, uint64_t off)
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
	pthread_mutex_lock(&ckc_eng.lock);
	if (!o->handed) {
		/* a hand-over waits for the writes under way (ckc_handoff) */
		o->writing++;
		do
			rc = pwrite_locked(o, buf, dsrc, len, off, t0);
		while (rc == PW_AGAIN);
		if (--o->writing == 0)
			pthread_cond_broadcast(&ckc_eng.cv);
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

static int close_home_writer(ckc_obj_t *o)
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
	pthread_mutex_unlock(&ckc_eng.lock);
	int rc;
	if (live) {
		/* handed over already: the file is at its real path */
		rc = ckc_attr_apply_fd(fd, &attr);
		if (sys_close(fd) != 0 && !rc)
			rc = -errno;
		if (!rc)
			ckc_fid_take(o->key, &now);
	} else if (ckc_fid_changed(&base, o->key)) {
		rc = CKC_CHANGED; /* fd stays open: the rescue below reads it */
	} else {
		rc = ckc_home_commit(tmp, o->key, fd, false, &attr);
		if (!rc)
			ckc_fid_take(o->key, &now);
	}
	pthread_mutex_lock(&ckc_eng.lock);
	o->home_busy = false;
	if (rc == CKC_CHANGED) {
		/* the temporary file may have no name (O_TMPFILE): read it
		 * through its descriptor */
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		ckc_src_t held = { .path = self };
		ckc_keep_newer(o, &held, o->size);
		ckc_home_discard(tmp, fd);
	} else if (!rc) {
		o->at_home = true;
		o->base = now;
		ckc_node_note(o);
	} else {
		ckc_error("checkpoint %s could not be written to its real path (%s)", o->key,
			  strerror(-rc));
	}
	sys_free(tmp);
	pthread_cond_broadcast(&ckc_eng.cv);
	return rc;
}

static void close_writer_locked(ckc_obj_t *o)
{
	int rc = 0;

	while (o->migrating)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (o->complete || o->retired)
		return;
	if (!(o->attr.mask & CKC_ATTR_TIMES))
		clock_gettime(CLOCK_REALTIME, &o->mtime);
	o->complete = true;
	if (o->wlevel == ckc_eng.ntier - 1) {
		rc = close_home_writer(o);
	} else {
		ckc_place_trim(o, o->wlevel, o->size);
		ckc_set_state(o, o->wlevel, LC_EV_WRITE_END);
		if (ckc_flush_wanted(o, o->wlevel))
			ckc_flush_enqueue(o, o->wlevel);
	}
	(void)rc;
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
	pthread_cond_broadcast(&ckc_eng.cv);
}

/* ---- reading ------------------------------------------------------- */

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
static ckc_obj_t *current_locked(const char *key)
{
	ckc_obj_t *o;
	/* a publication being committed ends first (a rename: short) */
	while ((o = ckc_map_find(key)) && o->home_busy)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (!o || !o->complete || !o->base.known || o->capture)
		return o;
	uint64_t v = o->version;
	bool published = o->at_home;
	ckc_fid_t base = o->base, now;
	pthread_mutex_unlock(&ckc_eng.lock);
	ckc_fid_take(key, &now);
	pthread_mutex_lock(&ckc_eng.lock);
	o = ckc_map_find(key);
	if (!o || o->version != v || o->home_busy || o->at_home != published ||
	    ckc_fid_same(&base, &now))
		return o;
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

int ckc_open_read(const char *path, ckc_handle_t **hp)
{
	char key[PATH_MAX];
	int rc = canon(path, key);
	if (rc)
		return rc;
	pthread_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENODEV;
	}
	ckc_hints_reading();
	ckc_obj_t *o = current_locked(key);
	if (!o && ckc_eng.active)
		o = ckc_obj_import_home(key);
	/* consumed and dropped (CKPTCACHE_PERSIST=unconsumed or never):
	 * gone, as if deleted */
	if (o && o->complete && ckc_best_level(o) < 0 && o->place[0].state != LC_READ_IN_PROGRESS)
		o = NULL;
	if (!o) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENOENT;
	}
	ckc_handle_t *h = handle_new(o, false);
	if (!h) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENOMEM;
	}
	uint64_t d = ckc_dist(o);
	ckc_eng.st.objects_opened_read++;
	ckc_eng.st.dist_hist[ckc_stats_dist_bucket(d, d >= HQ_FAR)]++;
	if (!ckc_eng.prefetch_started && ckc_eng.cfg.prefetch == CKC_PREFETCH_AUTO) {
		ckc_eng.prefetch_started = true;
		ckc_prefetch_kick();
		pthread_cond_broadcast(&ckc_eng.cv);
	}
	ckc_trace("open-read", o, 0, o->size, ckc_best_level(o), 0);
	pthread_mutex_unlock(&ckc_eng.lock);
	*hp = h;
	return 0;
}

static void range_add(ckc_handle_t *h, uint64_t a, uint64_t b)
{
	int i = 0, j;

	while (i < h->nrange && h->range[i][1] < a)
		i++;
	for (j = i; j < h->nrange && h->range[j][0] <= b; j++) {
		a = h->range[j][0] < a ? h->range[j][0] : a;
		b = h->range[j][1] > b ? h->range[j][1] : b;
	}
	/* ranges [i, j) merge into [a, b) */
	if (i == j) {
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
static bool prefetch_wait(ckc_handle_t *h, uint64_t *deadline)
{
	uint64_t w0 = ckc_now_ns();
	if (!*deadline) {
		*deadline = w0 + PREFETCH_WAIT_MAX_NS;
		if (!h->waited) {
			h->waited = true;
			ckc_eng.st.reads_waited++;
		}
	}
	bool more = wait_until(*deadline);
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
			pthread_mutex_unlock(&ckc_eng.lock);
			return -EAGAIN;
		}
		uint64_t wl = o->size - off < CKC_GPU_WINDOW ? o->size - off : CKC_GPU_WINDOW;
		ckc_src_t src;
		if ((rc = ckc_src_snapshot(o, 0, &src)) != 0) {
			pthread_mutex_unlock(&ckc_eng.lock);
			return rc;
		}
		o->place[0].pins++;
		h->win_len = 0;
		pthread_mutex_unlock(&ckc_eng.lock);
		rc = ckc_src_read(&src, off, h->win, (size_t)wl, NULL);
		pthread_mutex_lock(&ckc_eng.lock);
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
		range_add(h, off, off + len);
		o->place[0].seq_use = ++ckc_eng.seq;
		ckc_trace("read", o, off, len, 0, t0);
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	/* the window is the handle's own: copied from without the lock */
	if (!rc)
		memcpy(buf, h->win + (off - h->win_off), len);
	return rc ? rc : (ssize_t)len;
}

ssize_t ckc_pread(ckc_handle_t *h, void *buf, size_t len, uint64_t off)
{
	ckc_obj_t *o = h->o;
	uint64_t t0 = ckc_now_ns();
	ssize_t rc;

	pthread_mutex_lock(&ckc_eng.lock);
	uint64_t deadline = 0;
	for (;;) {
		if (o->handed) {
			pthread_mutex_unlock(&ckc_eng.lock);
			return CKC_HANDED;
		}
		if (off >= o->size || len == 0) {
			pthread_mutex_unlock(&ckc_eng.lock);
			return 0;
		}
		/* a prefetch in flight is worth waiting for, a while */
		if (ckc_eng.ntier > 1 && o->place[0].state == LC_READ_IN_PROGRESS && prefetch_wait(h, &deadline))
			continue;
		if (o->migrating) {
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
			continue;
		}
		break;
	}
	if (len > o->size - off)
		len = (size_t)(o->size - off);
	if (h->writer && o->home_fd >= 0) {
		/* written through at home: the bytes are in the temporary file */
		int fd = o->home_fd;
		pthread_mutex_unlock(&ckc_eng.lock);
		ssize_t n = ckc_io_pread_all(fd, buf, len, (off_t)off);
		return n;
	}
	int level = ckc_best_level(o);
	if (level < 0) {
		ckc_error("checkpoint %s: no copy of its bytes is left", o->key);
		pthread_mutex_unlock(&ckc_eng.lock);
		return -EIO;
	}
	if (level == 0 && ckc_eng.tier[0].kind == TIER_GPU && !h->writer && o->complete && len < WIN_READ_MAX) {
		rc = window_read(h, buf, len, off, t0);
		if (rc != -EAGAIN)
			return rc;
		pthread_mutex_lock(&ckc_eng.lock);
		level = ckc_best_level(o);
		if (level < 0) {
			pthread_mutex_unlock(&ckc_eng.lock);
			return -EIO;
		}
	}
	ckc_src_t src;
	if ((rc = ckc_src_snapshot(o, level, &src)) != 0) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return rc;
	}
	bool bounded = level < ckc_eng.ntier - 1;
	if (bounded) {
		o->place[level].pins++;
		o->place[level].seq_use = ++ckc_eng.seq;
	}
	/* a copy in the ssd tier of a checkpoint already published: what the
	 * page cache still holds of the real file comes faster from there */
	char *home = !h->writer && ckc_eng.tier[level].kind == TIER_SSD && o->at_home && !o->retired ?
			     strdup(o->key) : NULL;
	pthread_mutex_unlock(&ckc_eng.lock);
	bool big = len >= CKC_PROG_COPY_MIN;
	if (big) {
		ckc_prog_begin();
		ckc_pace_reading(1);
	}
	size_t got = home ? ckc_home_read_cached(home, buf, len, off, &h->home_fd) : 0;
	rc = got < len ? ckc_src_read(&src, off + got, (char *)buf + got, len - got, &h->home_fd) : 0;
	if (big) {
		ckc_pace_reading(-1);
		ckc_prog_end();
	}
	sys_free(home);
	pthread_mutex_lock(&ckc_eng.lock);
	if (got && o->retired) {
		/* a newer version may have replaced the real file meanwhile */
		pthread_mutex_unlock(&ckc_eng.lock);
		got = 0;
		rc = ckc_src_read(&src, off, buf, len, &h->home_fd);
		pthread_mutex_lock(&ckc_eng.lock);
	}
	ckc_src_release(&src);
	if (bounded)
		ckc_unpin(o, level);
	if (rc == 0) {
		if (got == len)
			level = ckc_eng.ntier - 1;
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
			range_add(h, off, off + len);
		ckc_trace("read", o, off, len, level, t0);
		rc = (ssize_t)len;
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_handle_home_fd(ckc_handle_t *h)
{
	ckc_obj_t *o = h->o;
	int fd = -ENOENT;

	if (h->writer)
		return -ENOENT;
	pthread_mutex_lock(&ckc_eng.lock);
	bool home_only = ckc_best_level(o) == ckc_eng.ntier - 1 && !o->retired &&
			 (o->at_home || (o->from_home && !o->rescue));
	char *key = home_only && h->home_fd < 0 ? strdup(o->key) : NULL;
	pthread_mutex_unlock(&ckc_eng.lock);
	if (!home_only)
		return -ENOENT;
	if (key) {
		/* opened like a read from there opens it (ckc_home_read) */
		int f = sys_open(key, O_RDONLY, 0);
		sys_free(key);
		if (f < 0)
			return -ENOENT;
		pthread_mutex_lock(&ckc_eng.lock);
		if (h->home_fd < 0)
			h->home_fd = f;
		else
			sys_close(f);
		pthread_mutex_unlock(&ckc_eng.lock);
	}
	pthread_mutex_lock(&ckc_eng.lock);
	/* a checkpoint promoted or rewritten meanwhile is read through the cache */
	if (ckc_best_level(o) == ckc_eng.ntier - 1 && !o->retired)
		fd = h->home_fd;
	pthread_mutex_unlock(&ckc_eng.lock);
	return fd;
}

void ckc_handle_note_read(ckc_handle_t *h, uint64_t off, uint64_t len)
{
	if (len == 0)
		return;
	pthread_mutex_lock(&ckc_eng.lock);
	ckc_tier_stats_t *st = &ckc_eng.tier[ckc_eng.ntier - 1].st;
	if (!h->writer && !h->counted) {
		h->counted = true;
		st->ckpt_reads++;
	}
	st->read_ops++;
	st->read_bytes += len;
	st->hits++;
	for (int l = 0; l < ckc_eng.ntier - 1; l++)
		ckc_eng.tier[l].st.misses++;
	if (!h->writer)
		range_add(h, off, off + len);
	ckc_trace("read", h->o, off, len, ckc_eng.ntier - 1, 0);
	pthread_mutex_unlock(&ckc_eng.lock);
}

static void stat_fill(const ckc_obj_t *o, ckc_stat_t *st)
{
	st->size = o->size;
	st->mtime = o->mtime;
	st->complete = o->complete;
	st->at_home = o->at_home;
	st->mode = o->mode;
	st->has_owner = o->attr.mask & CKC_ATTR_OWNER;
	st->uid = o->attr.uid;
	st->gid = o->attr.gid;
	st->atime = (o->attr.mask & CKC_ATTR_TIMES) ? o->attr.times[0] : o->mtime;
}

/* Records a on o and, if o's bytes are at the real path already, applies
 * it there (lock held). */
static int setattr_locked(ckc_obj_t *o, const ckc_attr_t *a)
{
	while (o->home_busy)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (a->mask & CKC_ATTR_MODE) {
		o->mode = a->mode & 07777;
		o->attr.mode = o->mode;
	}
	if (a->mask & CKC_ATTR_OWNER) {
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
	if (!o->at_home)
		return 0;
	int fd = sys_open(o->key, O_RDONLY, 0);
	if (fd < 0)
		return -errno;
	int rc = ckc_attr_apply_fd(fd, a);
	/* the change time moved: this is still the file the cache published */
	struct stat st;
	if (sys_fstat(fd, &st) == 0)
		ckc_fid_of(&st, &o->base);
	sys_close(fd);
	return rc;
}

int ckc_setattr(const char *path, const ckc_attr_t *a)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? setattr_locked(o, a) : -ENOENT;
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_handle_setattr(ckc_handle_t *h, const ckc_attr_t *a)
{
	pthread_mutex_lock(&ckc_eng.lock);
	int rc = h->o->retired ? 0 : setattr_locked(h->o, a);
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_handle_stat(const ckc_handle_t *h, ckc_stat_t *st)
{
	pthread_mutex_lock(&ckc_eng.lock);
	stat_fill(h->o, st);
	pthread_mutex_unlock(&ckc_eng.lock);
	return 0;
}

int ckc_ftruncate(ckc_handle_t *h, uint64_t size)
{
	ckc_obj_t *o = h->o;
	int rc = 0;

	if (!h->writer)
		return -EBADF;
	pthread_mutex_lock(&ckc_eng.lock);
	while (o->migrating)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (o->handed || o->retired || o->complete) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return o->handed ? CKC_HANDED : o->retired ? 0 : -EBADF;
	}
	if (o->wlevel == ckc_eng.ntier - 1) {
		rc = sys_ftruncate(o->home_fd, (off_t)size) ? -errno : 0;
	} else if (size > o->size) {
		/* growing: the new bytes read as zeros */
		rc = write_room(o, size);
		if (!rc && o->wlevel == ckc_eng.ntier - 1)
			rc = sys_ftruncate(o->home_fd, (off_t)size) ? -errno : 0;
		else if (!rc) {
			while (o->place[o->wlevel].pins > 0)
				pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
			rc = zero_fill(o, o->size, size);
		}
	}
	if (!rc)
		o->size = size;
	clock_gettime(CLOCK_REALTIME, &o->mtime);
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

uint64_t ckc_handle_size(const ckc_handle_t *h)
{
	pthread_mutex_lock(&ckc_eng.lock);
	uint64_t s = h->o->size;
	pthread_mutex_unlock(&ckc_eng.lock);
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
	pthread_cond_broadcast(&ckc_eng.cv);
}

int ckc_close(ckc_handle_t *h)
{
	ckc_obj_t *o = h->o;
	int rc = 0;

	pthread_mutex_lock(&ckc_eng.lock);
	if (h->writer) {
		if (!o->retired && !o->complete) {
			close_writer_locked(o);
			if (o->wlevel == ckc_eng.ntier - 1 && !o->at_home)
				rc = -EIO;
		}
	} else if (o->complete && !o->retired &&
		   (o->size == 0 ||
		    (h->nrange == 1 && h->range[0][0] == 0 && h->range[0][1] >= o->size))) {
		consume_locked(o);
	}
	ckc_obj_put(o);
	pthread_mutex_unlock(&ckc_eng.lock);
	if (h->home_fd >= 0)
		sys_close(h->home_fd);
	if (h->win)
		ckc_gpu_window_put(h->win);
	sys_free(h->range);
	sys_free(h);
	return rc;
}

/* ---- durability, names --------------------------------------------- */

/* Makes the real path hold o's bytes (lock held): fsync'ed if durable,
 * whatever CKPTCACHE_PERSIST says otherwise. CKC_CHANGED: the real file
 * was changed by someone else meanwhile; it was kept and o forgotten. */
static int publish_locked(ckc_obj_t *o, bool durable)
{
	/* a flush under way ends first: its publication is this one (a
	 * second one beside it would copy the bytes again, and its rename
	 * could land on what another process writes there once told) */
	while (o->home_busy || o->migrating || o->flushing)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (o->at_home && (!durable || o->durable))
		return 0;
	if (o->at_home) {
		/* published, not yet durable: the fsync (seconds, on a busy
		 * parallel file system) runs without the engine lock, the real
		 * file held busy meanwhile as during a publication */
		char *key = strdup(o->key);
		if (!key)
			return -ENOMEM;
		o->home_busy = true;
		ckc_obj_get(o);
		pthread_mutex_unlock(&ckc_eng.lock);
		int fd = sys_open(key, O_RDONLY, 0);
		int rc = fd < 0 ? -errno : sys_fsync(fd) ? -errno : 0;
		if (fd >= 0)
			sys_close(fd);
		if (!rc)
			rc = ckc_fsync_dir_of(key);
		sys_free(key);
		pthread_mutex_lock(&ckc_eng.lock);
		o->home_busy = false;
		if (!rc && o->at_home)
			o->durable = true;
		pthread_cond_broadcast(&ckc_eng.cv);
		ckc_obj_put(o);
		return rc;
	}
	if (o->wlevel == ckc_eng.ntier - 1 && o->home_fd >= 0) {
		/* written through: the bytes are in the temporary file, which
		 * becomes the real file at close */
		if (!durable)
			return -ENOTSUP;
		return sys_fsync(o->home_fd) ? -errno : 0;
	}
	bool complete = o->complete;
	int rc = ckc_flush_home_now(o, durable);
	if (!rc && !complete) {
		o->at_home = false; /* a snapshot: the final bytes come at close */
		ckc_node_note(o);
	}
	return rc;
}

static int sync_locked(ckc_obj_t *o)
{
	if (ckc_eng.cfg.persist == CKC_PERSIST_NEVER)
		return 0;
	int rc = publish_locked(o, true);
	/* the program's bytes are in a rescue file, not at the real path */
	return rc == CKC_CHANGED ? -EIO : rc;
}

int ckc_sync(ckc_handle_t *h)
{
	pthread_mutex_lock(&ckc_eng.lock);
	int rc = h->o->handed ? CKC_HANDED : h->o->retired ? 0 : sync_locked(h->o);
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_sync_path(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? sync_locked(o) : -ENOENT;
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_unlink(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = lookup_locked(path, key, &o);
	if (rc)
		return rc;
	bool cached = o != NULL;
	if (o) {
		while (o->home_busy || o->flushing)
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
		ckc_trace("unlink", o, 0, o->size, -1, 0);
		ckc_obj_retire(o);
	}
	if (ckc_eng.hq)
		hq_remove_all(ckc_eng.hq, key);
	pthread_mutex_unlock(&ckc_eng.lock);
	rc = sys_unlink(key) ? -errno : 0;
	return rc == -ENOENT && cached ? 0 : rc;
}

int ckc_materialize(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? publish_locked(o, false) : -ENOENT;
	pthread_mutex_unlock(&ckc_eng.lock);
	/* a newer real file was kept: it is what the caller will use */
	return rc == CKC_CHANGED ? 0 : rc;
}

int ckc_forget(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = lookup_locked(path, key, &o);
	if (rc)
		return rc;
	if (o) {
		/* a running flush ends first, so that no temporary file of it is
		 * left for the caller's next move (a rename of its folder) */
		while (o->home_busy || o->flushing)
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
		ckc_trace("forget", o, 0, o->size, -1, 0);
		ckc_obj_retire(o);
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return o ? 0 : -ENOENT;
}

/* Publishes o's bytes so far and lets the cache forget it; its handles
 * answer CKC_HANDED from then on (lock held). */
static int handoff_locked(ckc_obj_t *o)
{
	int rc = 0;

	if (o->handed)
		return 0;
	if (o->retired)
		return -ESTALE; /* a newer version has the name: nothing to hand */
	ckc_obj_get(o);
	o->handed = true;
	ckc_node_note(o);
	while (o->writing > 0 || o->migrating || o->home_busy)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (o->retired) {
		rc = 0; /* forgotten meanwhile (its real file was kept) */
	} else if (!o->complete && o->wlevel == ckc_eng.ntier - 1 && o->home_fd >= 0) {
		/* written through: the temporary file becomes the real file */
		rc = close_home_writer(o);
	} else if (!o->at_home) {
		rc = ckc_flush_home_now(o, false);
	}
	if (rc && rc != CKC_CHANGED) {
		o->handed = false;
		ckc_node_note(o);
		pthread_cond_broadcast(&ckc_eng.cv);
	} else if (!o->retired) {
		ckc_trace("handoff", o, 0, o->size, -1, 0);
		ckc_obj_retire(o);
	}
	ckc_obj_put(o);
	return rc == CKC_CHANGED ? 0 : rc;
}

int ckc_handoff(ckc_handle_t *h)
{
	pthread_mutex_lock(&ckc_eng.lock);
	int rc = ckc_eng.active || h->o->handed ? handoff_locked(h->o) : -ENODEV;
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_handoff_path(const char *path)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = lookup_locked(path, key, &o);
	if (rc)
		return rc;
	rc = o ? handoff_locked(o) : -ENOENT;
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

bool ckc_handle_handed(const ckc_handle_t *h)
{
	pthread_mutex_lock(&ckc_eng.lock);
	bool handed = h->o->handed;
	pthread_mutex_unlock(&ckc_eng.lock);
	return handed;
}

/* Whether o is a closed version whose publication is still owed. */
static bool owed_home(const ckc_obj_t *o)
{
	return o->complete && !o->retired && !o->at_home && !o->rescue && !o->capture &&
	       ckc_persist_wanted(o);
}

int ckc_publish_all(uint64_t timeout_ns, bool writers)
{
	struct timespec end;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += (time_t)(timeout_ns / 1000000000u);
	end.tv_nsec += (long)(timeout_ns % 1000000000u);
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active || ckc_eng.cfg.persist == CKC_PERSIST_NEVER) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return 0;
	}
	/* open writers: their bytes so far (a snapshot; the writer goes on) */
	for (uint64_t seen = 0; writers;) {
		ckc_obj_t *w = NULL;
		for (size_t i = 0; i < ckc_eng.map_cap && !w; i++)
			for (ckc_obj_t *o = ckc_eng.map[i]; o && !w; o = o->hnext)
				if (!o->complete && !o->retired && !o->handed && o->version > seen &&
				    !o->capture)
					w = o;
		if (!w)
			break;
		/* one at a time in version order: the map changes while unlocked */
		for (size_t i = 0; i < ckc_eng.map_cap; i++)
			for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext)
				if (!o->complete && !o->retired && !o->handed && o->version > seen &&
				    o->version < w->version && !o->capture)
					w = o;
		seen = w->version;
		if (w->wlevel < ckc_eng.ntier - 1) {
			ckc_obj_get(w);
			int r = publish_locked(w, false);
			if (r && r != CKC_CHANGED && !rc)
				rc = r;
			ckc_obj_put(w);
		}
	}
	/* closed versions: published here, or by their flusher if it is at it;
	 * one that fails (and said so) is not tried again */
	uint64_t failed[32];
	int nfailed = 0;
	for (;;) {
		ckc_obj_t *todo = NULL;
		bool busy = false;
		for (size_t i = 0; i < ckc_eng.map_cap && !todo; i++)
			for (ckc_obj_t *o = ckc_eng.map[i]; o && !todo; o = o->hnext) {
				bool skip = false;
				for (int k = 0; k < nfailed; k++)
					skip |= failed[k] == o->version;
				if (skip || !owed_home(o))
					continue;
				if (o->flushing || o->home_busy || o->migrating)
					busy = true;
				else
					todo = o;
			}
		if (todo) {
			ckc_obj_get(todo);
			int r = publish_locked(todo, false);
			if (r && r != CKC_CHANGED && !rc)
				rc = r;
			bool stuck = owed_home(todo);
			if (stuck && nfailed < (int)(sizeof(failed) / sizeof(failed[0])))
				failed[nfailed++] = todo->version;
			ckc_obj_put(todo);
			if (stuck && nfailed == (int)(sizeof(failed) / sizeof(failed[0])))
				break;
			continue;
		}
		if (!busy)
			break;
		if (pthread_cond_timedwait(&ckc_eng.cv, &ckc_eng.lock, &end) == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_handover_dir(const char *dir)
{
	char key[PATH_MAX];
	int rc = canon(dir, key), first = 0;
	size_t n;

	if (rc)
		return rc;
	n = strlen(key);
	pthread_mutex_lock(&ckc_eng.lock);
	for (bool again = ckc_eng.active; again;) {
		ckc_obj_t *o = NULL;
		for (size_t i = 0; i < ckc_eng.map_cap && !o; i++)
			for (ckc_obj_t *x = ckc_eng.map[i]; x && !o; x = x->hnext)
				if (!strncmp(x->key, key, n) && (x->key[n] == '/' || n == 1))
					o = x;
		if (!o)
			break;
		ckc_obj_get(o);
		rc = publish_locked(o, false);
		if (rc && rc != CKC_CHANGED && !first)
			first = rc;
		while (o->home_busy || o->flushing)
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
		if (!o->retired) {
			ckc_trace("forget", o, 0, o->size, -1, 0);
			ckc_obj_retire(o);
		}
		ckc_obj_put(o);
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return first;
}

int ckc_rename(const char *from, const char *to)
{
	char kf[PATH_MAX], kt[PATH_MAX];
	ckc_obj_t *o;
	int rc = canon(to, kt);
	if (!rc)
		rc = lookup_locked(from, kf, &o);
	if (rc)
		return rc;
	if (!o) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENOENT;
	}
	if (strcmp(kf, kt) == 0) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return 0;
	}
	while (o->home_busy)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	ckc_obj_t *victim = ckc_map_find(kt);
	if (victim)
		ckc_obj_retire(victim);
	/* a publication to the new name under way lands before the look at
	 * what that name holds (below) */
	while (ckc_committing(kt))
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	char *nk = strdup(kt);
	if (!nk) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENOMEM;
	}
	/* the node registry knows versions by name */
	if (o->announced) {
		o->announced = false;
		ckc_node_hook(false, o->key);
	}
	map_remove(o);
	sys_free(o->key);
	o->key = nk;
	if (map_insert(o) != 0) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENOMEM;
	}
	bool at_home = o->at_home;
	o->home_busy = true;
	ckc_trace("rename", o, 0, o->size, -1, 0);
	pthread_mutex_unlock(&ckc_eng.lock);
	/* the real file follows the object; an older version left at the
	 * old name must not survive the rename either */
	if (at_home)
		rc = sys_rename(kf, kt) ? -errno : 0;
	else
		(void)sys_unlink(kf);
	/* what the new name holds now is what this version replaces */
	ckc_fid_t base;
	ckc_fid_take(kt, &base);
	pthread_mutex_lock(&ckc_eng.lock);
	o->home_busy = false;
	o->base = base;
	if (rc)
		o->at_home = false;
	ckc_node_note(o);
	pthread_cond_broadcast(&ckc_eng.cv);
	if (rc && !o->retired && o->complete && ckc_persist_wanted(o)) {
		/* the cache still has the bytes: publish them under the new name */
		int lvl = ckc_best_level(o);
		if (lvl >= 0 && lvl < ckc_eng.ntier - 1)
			ckc_flush_enqueue(o, lvl);
		rc = 0;
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_stat(const char *path, ckc_stat_t *st)
{
	char key[PATH_MAX];
	ckc_obj_t *o;
	int rc = lookup_locked(path, key, &o);
	if (rc)
		return rc;
	if (o)
		o = current_locked(key);
	if (o)
		stat_fill(o, st);
	pthread_mutex_unlock(&ckc_eng.lock);
	return o ? 0 : -ENOENT;
}

const char *ckc_where(const char *path)
{
	char key[PATH_MAX];
	const char *name = NULL;
	ckc_obj_t *o;

	if (lookup_locked(path, key, &o))
		return NULL;
	if (o) {
		int l = ckc_best_level(o);
		if (l < 0 && o->place[0].state == LC_READ_IN_PROGRESS)
			l = 0;
		name = l >= 0 ? ckc_eng.tier[l].name : NULL;
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return name;
}

/* ---- hints --------------------------------------------------------- */

int ckc_hint_enqueue(const char *path)
{
	char key[PATH_MAX];
	int rc = canon(path, key);
	if (rc)
		return rc;
	pthread_mutex_lock(&ckc_eng.lock);
	if (ckc_eng.active) {
		rc = hq_push_back(ckc_eng.hq, key);
		ckc_prefetch_kick();
		pthread_cond_broadcast(&ckc_eng.cv);
	} else {
		rc = -ENODEV;
	}
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_prefetch_start(void)
{
	pthread_mutex_lock(&ckc_eng.lock);
	if (ckc_eng.cfg.prefetch != CKC_PREFETCH_OFF)
		ckc_eng.prefetch_started = true;
	ckc_prefetch_kick();
	pthread_cond_broadcast(&ckc_eng.cv);
	pthread_mutex_unlock(&ckc_eng.lock);
	return 0;
}

int ckc_wait_flushed(void)
{
	pthread_mutex_lock(&ckc_eng.lock);
	for (;;) {
		bool busy = false;
		for (int l = 0; l + 1 < ckc_eng.ntier; l++)
			busy |= ckc_eng.edge[l].head || ckc_eng.edge[l].current;
		if (!busy || !ckc_eng.active)
			break;
		if (!ckc_flush_unthreaded())
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	}
	int rc = ckc_eng.st.rescued ? -EIO : 0;
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

/* ---- fork ---------------------------------------------------------- */

void ckc_atfork_prepare(void)
{
	pthread_mutex_lock(&eng_life);
	pthread_mutex_lock(&ckc_eng.lock);
}

void ckc_atfork_parent(void)
{
	pthread_mutex_unlock(&ckc_eng.lock);
	pthread_mutex_unlock(&eng_life);
}

void ckc_atfork_child(void)
{
	/* Only the forking thread exists here: the flushers and the
	 * prefetcher are gone, so the child must never wait for them. Its
	 * copy of the cache is simply abandoned (the parent still owns it and
	 * the ssd file). */
	pthread_mutex_init(&eng_life, NULL);
	pthread_mutex_init(&ckc_eng.lock, NULL);
	pthread_cond_init(&ckc_eng.cv, NULL);
	pthread_cond_init(&ckc_eng.pcv, NULL);
	ckc_eng.active = false;
	ckc_eng.trace_fd = -1;
}

void ckc_stats_get(ckc_stats_t *s)
{
	pthread_mutex_lock(&ckc_eng.lock);
	stats_collect(s);
	pthread_mutex_unlock(&ckc_eng.lock);
}

/* ---- the gpu tier: device captures and owed host ranges ------------- */

/* An object outside the map holding device bytes the program's host
 * memory owes. Lock held. */
static ckc_obj_t *anon_new(void)
{
	ckc_obj_t *o = obj_alloc("(device capture)");
	if (!o)
		return NULL;
	/* held by its references only */
	o->wlevel = 0;
	o->retired = true;
	o->capture = true;
	return o;
}

static ckc_ref_t *ref_new(ckc_obj_t *o, uint64_t base)
{
	ckc_ref_t *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->o = o;
	r->base = base;
	r->refs = 1;
	r->next = o->gref;
	o->gref = r;
	ckc_obj_get(o);
	return r;
}

/* Moves every reference of from to to, their offsets shifted by delta. */
static void refs_move(ckc_obj_t *from, ckc_obj_t *to, uint64_t delta)
{
	int moved = 0;

	while (from->gref) {
		ckc_ref_t *r = from->gref;
		from->gref = r->next;
		r->o = to;
		r->base += delta;
		r->next = to->gref;
		to->gref = r;
		ckc_obj_get(to);
		moved++;
	}
	/* from may go with its last reference (a capture): not before the
	 * list is done with */
	while (moved-- > 0)
		ckc_obj_put(from);
}

/* o's gpu copy is leaving it (its writer moved down, or it was retired)
 * while host memory still owes bytes of it: the copy goes to an anonymous
 * holder with the references. Lock held. */
static void ref_detach(ckc_obj_t *o)
{
	ckc_obj_t *c = anon_new();
	if (!c) {
		ckc_error("out of memory: host memory owed from %s may read stale bytes", o->key);
		ckc_place_free(o, 0);
		return;
	}
	arena_t *a = &ckc_eng.tier[0].arena;
	c->place[0] = o->place[0];
	c->place[0].state = LC_INIT;
	c->place[0].pins = 0;
	ckc_set_state(c, 0, LC_EV_WRITE_BEGIN);
	o->place[0].ext = NULL;
	o->place[0].nexts = o->place[0].capexts = 0;
	for (int i = 0; i < c->place[0].nexts; i++) {
		ssize_t idx = arena_index_of(a, c->place[0].ext[i].aoff & ~(a->align - 1));
		if (idx >= 0)
			a->frag[idx].owner = c;
	}
	c->size = o->size;
	refs_move(o, c, 0);
}

int ckc_capture_begin(size_t len, unsigned skew, int device, ckc_ref_t **ref, uint64_t *dptr)
{
	int rc;

	if (len == 0 || skew >= CKC_ALIGN)
		return -EINVAL;
	pthread_mutex_lock(&ckc_eng.lock);
	ckc_tier_t *t = &ckc_eng.tier[0];
	if (!ckc_eng.active || t->kind != TIER_GPU || !ckc_gpu_usable(t)) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENODEV;
	}
	ckc_obj_t *c = anon_new();
	ckc_ref_t *r = c ? ref_new(c, 0) : NULL;
	if (!r) {
		if (c) {
			sys_free(c->key);
			sys_free(c);
		}
		pthread_mutex_unlock(&ckc_eng.lock);
		return -ENOMEM;
	}
	/* the capture must not wait for room: a full tier means the copy
	 * goes to the host as the program asked */
	ckc_set_state(c, 0, LC_EV_WRITE_BEGIN);
	c->gdev1 = device + 1;
	c->retired = false;
	rc = ckc_place_reserve(c, 0, (uint64_t)skew + len, CKC_ALLOC_PREFETCH, 0);
	c->retired = true;
	if (rc) {
		pthread_mutex_unlock(&ckc_eng.lock);
		ckc_ref_put(r);
		return rc == -EAGAIN ? -ENOSPC : rc;
	}
	ckc_ext_t *e = &c->place[0].ext[0];
	e->aoff += skew;
	e->alen = len;
	c->size = len;
	*dptr = t->gpu->base + e->aoff;
	*ref = r;
	t->st.put_ops++;
	t->st.put_bytes += len;
	pthread_mutex_unlock(&ckc_eng.lock);
	return 0;
}

void ckc_ref_get(ckc_ref_t *r)
{
	pthread_mutex_lock(&ckc_eng.lock);
	r->refs++;
	pthread_mutex_unlock(&ckc_eng.lock);
}

void ckc_ref_put(ckc_ref_t *r)
{
	pthread_mutex_lock(&ckc_eng.lock);
	if (--r->refs > 0) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return;
	}
	ckc_obj_t *o = r->o;
	for (ckc_ref_t **pp = &o->gref; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	sys_free(r);
	if (!o->gref && o->retired && !o->capture && o->place[0].pins == 0 &&
	    o->place[0].state != LC_INIT) {
		ckc_place_free(o, 0);
		ckc_set_state(o, 0, LC_EV_DROP);
	}
	ckc_obj_put(o);
	/* its copy may be evicted now */
	ckc_prefetch_kick();
	pthread_cond_broadcast(&ckc_eng.cv);
	pthread_mutex_unlock(&ckc_eng.lock);
}

/* Device address of [roff, roff+len) of r (lock held). */
static int ref_addr_locked(const ckc_ref_t *r, uint64_t roff, size_t len, uint64_t *dptr)
{
	const ckc_place_t *p = &r->o->place[0];
	uint64_t aoff, avail;
	ckc_tier_t *t = &ckc_eng.tier[0];

	if (t->kind != TIER_GPU || !t->gpu || !ckc_gpu_usable(t))
		return -ENODEV;
	if (!ckc_ext_run(p->ext, p->nexts, r->base + roff, &aoff, &avail) || avail < len)
		return -ERANGE;
	*dptr = t->gpu->base + aoff;
	return 0;
}

int ckc_ref_addr(ckc_ref_t *r, uint64_t roff, size_t len, uint64_t *dptr)
{
	pthread_mutex_lock(&ckc_eng.lock);
	int rc = ref_addr_locked(r, roff, len, dptr);
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_ref_fill(ckc_ref_t *r, uint64_t roff, void *buf, size_t len)
{
	pthread_mutex_lock(&ckc_eng.lock);
	ckc_src_t src;
	ckc_obj_t *o = r->o;
	int rc = ckc_src_snapshot(o, 0, &src);
	pthread_mutex_unlock(&ckc_eng.lock);
	/* the references keep the copy where it is */
	if (!rc)
		rc = ckc_src_read(&src, r->base + roff, buf, len, NULL);
	pthread_mutex_lock(&ckc_eng.lock);
	ckc_src_release(&src);
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

int ckc_ref_fill_dma(ckc_ref_t *r, uint64_t roff, void *buf, size_t len)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	ckc_ext_t seg[16];
	char *dst = buf;
	int rc = 0;

	while (!rc && len > 0) {
		pthread_mutex_lock(&ckc_eng.lock);
		int n = t->kind == TIER_GPU ? ckc_place_segments(&r->o->place[0], r->base + roff, len, seg, 16) :
					      -ENODEV;
		pthread_mutex_unlock(&ckc_eng.lock);
		if (n == -E2BIG)
			n = 16;
		else if (n < 0)
			return n;
		/* the references keep the copy where it is */
		for (int i = 0; !rc && i < n; i++) {
			rc = ckc_gpu_get_direct(t, seg[i].aoff, dst, seg[i].alen);
			dst += seg[i].alen;
			roff += seg[i].alen;
			len -= seg[i].alen;
		}
	}
	return rc;
}

ssize_t ckc_pwrite_ref(ckc_handle_t *h, ckc_ref_t *r, uint64_t roff, size_t len, uint64_t off)
{
	if (!h->writer)
		return -EBADF;
	if (len == 0)
		return 0;
	pthread_mutex_lock(&ckc_eng.lock);
	ckc_obj_t *o = h->o, *c = r->o;
	ckc_tier_t *t = &ckc_eng.tier[0];
	while (o->migrating)
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	if (o->handed) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return CKC_HANDED;
	}
	/* its gpu copy goes where the capture is */
	if (!o->gdev1)
		o->gdev1 = c->gdev1;
	/* a whole capture appended to an object written into the gpu tier:
	 * its extent becomes the object's */
	if (c->capture && c != o && r->base == 0 && roff == 0 && len == c->size &&
	    c->place[0].nexts == 1 && !o->retired && !o->complete && o->wlevel == 0 &&
	    off == o->size && o->place[0].pins == 0 && t->kind == TIER_GPU) {
		ckc_place_t *p = &o->place[0];
		if (p->state == LC_INIT)
			ckc_set_state(o, 0, LC_EV_WRITE_BEGIN);
		/* o's room ends exactly at its last byte */
		ckc_place_trim(o, 0, o->size);
		uint64_t fstart = 0;
		for (int i = 0; i + 1 < p->nexts; i++)
			fstart += p->ext[i].alen;
		if (p->nexts && o->size - fstart < p->ext[p->nexts - 1].alen)
			p->ext[p->nexts - 1].alen = o->size - fstart;
		ckc_ext_t e = c->place[0].ext[0];
		if (ckc_place_append(p, e.aoff, e.alen) == 0) {
			arena_t *a = &t->arena;
			ssize_t idx = arena_index_of(a, e.aoff & ~(a->align - 1));
			if (idx >= 0)
				a->frag[idx].owner = o;
			c->place[0].nexts = 0;
			ckc_set_state(c, 0, LC_EV_DROP);
			if (p->nexts == 1)
				p->seq_in = p->seq_use = ++ckc_eng.seq;
			o->size = off + len;
			o->attr.mask &= ~CKC_ATTR_TIMES;
			refs_move(c, o, off);
			ckc_eng.st.cap_attached++;
			ckc_trace("attach", o, off, len, 0, 0);
			pthread_mutex_unlock(&ckc_eng.lock);
			return (ssize_t)len;
		}
	}
	uint64_t dsrc;
	int rc = ref_addr_locked(r, roff, len, &dsrc);
	if (!rc)
		ckc_eng.st.cap_copied_in++;
	pthread_mutex_unlock(&ckc_eng.lock);
	if (rc)
		return rc;
	/* the reference keeps the source where it is */
	return pwrite_src(h, NULL, dsrc, len, off);
}

ssize_t ckc_pread_ref(ckc_handle_t *h, uint64_t off, size_t len, ckc_ref_t **ref)
{
	ckc_obj_t *o = h->o;
	uint64_t t0 = ckc_now_ns();

	pthread_mutex_lock(&ckc_eng.lock);
	/* a prefetch into the gpu tier in flight is worth waiting for, a
	 * while (then the read is served from below) */
	uint64_t deadline = 0;
	while (o->migrating || (o->place[0].state == LC_READ_IN_PROGRESS && prefetch_wait(h, &deadline))) {
		if (o->migrating)
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	}
	ssize_t rc = 0;
	uint64_t dptr;
	ckc_tier_t *t = &ckc_eng.tier[0];
	if (h->writer || !o->complete || off >= o->size || len == 0 || t->kind != TIER_GPU ||
	    ckc_best_level(o) != 0)
		goto out;
	if (len > o->size - off)
		len = (size_t)(o->size - off);
	ckc_ref_t tmp = { .o = o, .base = off };
	if (ref_addr_locked(&tmp, 0, len, &dptr) != 0)
		goto out;
	ckc_ref_t *r = ref_new(o, off);
	if (!r) {
		rc = -ENOMEM;
		goto out;
	}
	o->place[0].seq_use = ++ckc_eng.seq;
	t->st.read_ops++;
	t->st.read_bytes += len;
	t->st.hits++;
	ckc_eng.st.cap_read_refs++;
	range_add(h, off, off + len);
	ckc_trace("read-ref", o, off, len, 0, t0);
	*ref = r;
	rc = (ssize_t)len;
out:
	pthread_mutex_unlock(&ckc_eng.lock);
	return rc;
}

/* Visits every object of the map (lock held); fn may drop the lock, so the
 * walk starts over after a visit that returns true. */
static void map_walk(bool (*fn)(ckc_obj_t *o))
{
again:
	for (size_t i = 0; i < ckc_eng.map_cap; i++)
		for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext)
			if (fn(o))
				goto again;
}

static bool evac_writer(ckc_obj_t *o)
{
	if (o->complete || o->retired || o->wlevel != 0 || o->migrating)
		return false;
	return migrate_down(o) == 0;
}

static bool evac_drop(ckc_obj_t *o)
{
	ckc_place_t *p = &o->place[0];
	if (p->state == LC_INIT || p->pins > 0)
		return false;
	if (!ckc_lower_has(o, 0) && o->complete && ckc_persist_wanted(o))
		ckc_error("checkpoint %s: its only copy was in device memory at exit", o->key);
	if (o->gref)
		ref_detach(o);
	else
		ckc_place_free(o, 0);
	ckc_set_state(o, 0, LC_EV_DROP);
	return false;
}

void ckc_gpu_evacuate(void)
{
	pthread_mutex_lock(&ckc_eng.lock);
	ckc_tier_t *t = &ckc_eng.tier[0];
	if (!ckc_eng.active || t->kind != TIER_GPU) {
		pthread_mutex_unlock(&ckc_eng.lock);
		return;
	}
	/* nothing new comes in */
	if (t->gpu)
		t->gpu->usable = false;
	map_walk(evac_writer);
	/* what must survive is flushed down by the gpu edge's flusher */
	if (ckc_eng.cfg.persist != CKC_PERSIST_NEVER)
		while (ckc_eng.edge[0].head || ckc_eng.edge[0].current)
			pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	for (;;) {
		bool pinned = false;
		for (size_t i = 0; i < ckc_eng.map_cap; i++)
			for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext)
				pinned |= o->place[0].pins > 0;
		if (!pinned)
			break;
		pthread_cond_wait(&ckc_eng.cv, &ckc_eng.lock);
	}
	map_walk(evac_drop);
	pthread_mutex_unlock(&ckc_eng.lock);
}
