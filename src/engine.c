/* The engine: its state (ckc_eng), start and stop, the exit drain. The
 * operations the interposer calls live beside it: engine_obj.c (the object
 * map), engine_write.c, engine_read.c, engine_names.c (durability, names),
 * engine_hints.c (hints, fork) and engine_capture.c (the gpu tier). One
 * mutex guards all metadata; bytes move outside it, with the copies they
 * touch pinned. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "lanes.h"
#include "ktouch.h"
#include "copy.h"
#include "log.h"
#include "memlimit.h"
#include "thread.h"
#include "path.h"
#include "peer.h"
#include "state.h"
#include "trace.h"
#include "sys.h"

ckc_engine_t ckc_eng = {
	.lock = CKC_MUTEX_INIT(ENGINE),
	.cv = { [0 ... EC_N - 1] = PTHREAD_COND_INITIALIZER },
	.trace_fd = -1,
};

/* Serialises start and stop; never taken by the data path. */
ckc_mutex_t eng_life = CKC_MUTEX_INIT(ENG_LIFE);
CKC_LOCKS_AT_START(eng_life, ckc_locks_add, &eng_life)
CKC_LOCKS_AT_START(engine, ckc_locks_add, &ckc_eng.lock)

CKC_TAGGED_PATH uint64_t ckc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

/* The share of the address space left under RLIMIT_AS that a host tier of
 * the default size may take. */
#define CKC_AS_SHARE 4

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
		/* under an address-space limit the tier's mapping counts as
		 * much as the program's own: a quarter of what is left once
		 * the library's threads have reserved theirs (their stacks,
		 * their malloc arenas) */
		uint64_t room = ckc_memlimit_as_room("/proc/self/statm");
		uint64_t threads = (uint64_t)CKC_THREADS_AS * CKC_THREAD_AS;
		/* (threads started already are counted twice: a smaller tier;
		 * little room: half of it, and a tier of 2 MiB at least) */
		if (room)
			room = room > 2 * threads ? room - threads : room / 2;
		if (room && c->host_cache > room / CKC_AS_SHARE) {
			c->host_cache = room / CKC_AS_SHARE / (2u << 20) * (2u << 20);
			if (c->host_cache < (2u << 20))
				c->host_cache = 2u << 20;
			ckc_info("host tier: %llu bytes, a quarter of the address space left under this "
				 "process's limit (ulimit -v) once the library's threads have theirs",
				 (unsigned long long)c->host_cache);
		}
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
		t->ops = &ckc_tier_host_ops;
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
		t->ops = &ckc_tier_ssd_ops;
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
	h->ops = &ckc_tier_home_ops;
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
	for (int l = 0; l < ckc_eng.ntier; l++)
		ckc_tier_close(&ckc_eng.tier[l]);
}

static void engine_reset(void)
{
	ckc_config_free(&ckc_eng.cfg);
	sys_free(ckc_eng.map);
	if (ckc_eng.hq)
		hq_free(ckc_eng.hq);
	if (ckc_eng.hints_open)
		hint_reader_close(&ckc_eng.hints);
	if (ckc_eng.trace_fd >= 0) {
		ckc_trace_close();
		sys_close(ckc_eng.trace_fd);
	}
	ckc_mutex_t lock = ckc_eng.lock;
	pthread_cond_t cv[EC_N];
	memcpy(cv, ckc_eng.cv, sizeof(cv));
	memset(&ckc_eng, 0, sizeof(ckc_eng));
	ckc_eng.lock = lock;
	memcpy(ckc_eng.cv, cv, sizeof(cv));
	ckc_eng.trace_fd = -1;
	for (int l = 0; l < CKC_MAX_TIERS; l++)
		ckc_eng.tier[l].fd = -1;
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
	if ((c->peer == CKC_PEER_GREEDY || c->peer == CKC_PEER_MAXFLOW) && ckc_eng.tier[0].kind != TIER_GPU)
		ckc_warn("CKPTCACHE_PEER=%s: no gpu tier (it needs CKPTCACHE_CAPTURE=device and a gpu "
			 "cache): nothing to share with the node's other ranks", ckc_config_peer_name(c->peer));
	if (c->trace) {
		char name[PATH_MAX];
		const char *why = "the name is too long";
		ckc_eng.trace_fd = ckc_expand_name(c->trace, name, sizeof(name)) ? -1 :
				   output_open(name, &why);
		if (ckc_eng.trace_fd < 0)
			ckc_warn("CKPTCACHE_TRACE='%s': %s; no trace is written", c->trace, why);
		else
			ckc_trace_begin(ckc_eng.trace_fd);
	}
	ckc_eng.prefetch_started = c->prefetch == CKC_PREFETCH_EAGER;
	/* only in copy mode, and only where every checkpoint goes home anyway:
	 * under PERSIST=never or unconsumed the cache spares the real path */
	aside_init(&ckc_eng.aside, c->step_aside && c->capture == CKC_CAPTURE_COPY &&
					   c->persist == CKC_PERSIST_ALWAYS && ckc_eng.ntier > 1 &&
					   ckc_eng.tier[0].kind != TIER_GPU);
	aside_init(&ckc_eng.aside_small, ckc_eng.aside.on);
	ckc_aside_load(&ckc_eng.aside, &ckc_eng.aside_small, c->paths);
	/* the hint file as it is now, before the first read is counted */
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_hints_poll(false);
	eng_unlock();
	/* the threads start when there is work for them: a flush thread with
	 * its first flush, the prefetch thread now only with a hint file to
	 * read (or eager prefetching), else with a restore queue */
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		ckc_flusher_init(l);
	/* under the lock: the prefetch thread reads both at once */
	ckc_mutex_lock(&ckc_eng.lock);
	rc = c->hints || c->prefetch == CKC_PREFETCH_EAGER ? ckc_prefetcher_start() : 0;
	ckc_eng.active = rc == 0;
	eng_unlock();
	if (rc)
		return rc;
	ckc_info("cache active: %d tier(s) above home, persist=%d, eviction=%d",
		 ckc_eng.ntier - 1, (int)c->persist, (int)c->eviction);
	return 0;
}

static void threads_stop(void)
{
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_eng.stopping = true;
	eng_wake_all();
	eng_unlock();
	ckc_prefetcher_stop();
	/* no more lending or borrowing: before the gpu tier stops */
	ckc_lend_stop();
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		ckc_flusher_stop(l);
	for (int l = 0; l < ckc_eng.ntier; l++)
		ckc_tier_stop(&ckc_eng.tier[l]);
	ckc_ktouch_stop();
}

int ckc_init_config(const ckc_config_t *c)
{
	ckc_mutex_lock(&eng_life);
	if (ckc_eng.active) {
		ckc_mutex_unlock(&eng_life);
		return 0;
	}
	engine_reset();
	/* every system call of the engine's threads through a real function */
	ckc_io_resolve();
	config_copy(&ckc_eng.cfg, c);
	ckc_lanes_configure(c->lanes);
	ckc_ktouch_configure(c->ktouch);
	ckc_copy_configure(c->copy);
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
	ckc_mutex_unlock(&eng_life);
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
	ckc_mutex_lock(&ckc_eng.lock);
	bool a = ckc_eng.active;
	eng_unlock();
	return a;
}

void eng_stats_collect(ckc_stats_t *s)
{
	*s = ckc_eng.st;
	s->aside_objects += ckc_aside_firsts();
	ckc_lanes_stats(&s->lane_helpers, &s->lane_copies, &s->lane_bytes);
	s->copy_movsb = ckc_copy_movsb();
	ckc_ktouch_stats(&s->ktouch);
	if (ckc_svc.stats_extra)
		ckc_svc.stats_extra(s);
	ckc_peer_stats(s);
	s->aside_on = ckc_eng.aside.on;
	s->aside_tries = ckc_eng.aside.tries;
	s->aside_switches = ckc_eng.aside.switches;
	s->aside_bw_cache = ckc_eng.aside.bw[ASIDE_CACHE];
	s->aside_bw_home = ckc_eng.aside.bw[ASIDE_HOME];
	s->aside_home = ckc_eng.aside.choice == ASIDE_HOME;
	const aside_t *sm = &ckc_eng.aside_small;
	s->small_home = sm->choice == ASIDE_HOME;
	for (int k = 0; k < 2; k++) {
		s->small_samples[k] = sm->measured[k];
		s->small_us[k] = sm->bw[k] > 0 ? 1e6 / sm->bw[k] : 0;
	}
	s->ntier = ckc_eng.ntier;
	for (int l = 0; l < ckc_eng.ntier; l++) {
		s->tier_name[l] = ckc_eng.tier[l].name;
		s->tier[l] = ckc_eng.tier[l].st;
		/* the edge's bandwidth is a guess until something was flushed */
		if (l + 1 < ckc_eng.ntier && s->tier[l].flush_ops)
			s->tier[l].flush_bw = ckc_eng.edge[l].bw;
		s->tier[l].peak_used_bytes = ckc_eng.tier[l].arena.peak;
		ckc_tier_stats(&ckc_eng.tier[l], s);
	}
}

static int expand_name_rank(const char *tmpl, long rank, char *out, size_t outlen);

int ckc_expand_name(const char *tmpl, char *out, size_t outlen)
{
	return expand_name_rank(tmpl, ckc_eng.cfg.rank, out, outlen);
}

static int expand_name_rank(const char *tmpl, long rank, char *out, size_t outlen)
{
	size_t n = 0;

	for (const char *p = tmpl; *p; p++) {
		char num[256];
		const char *add = NULL;
		if (p[0] == '%' && p[1]) {
			switch (p[1]) {
			case 'p': snprintf(num, sizeof(num), "%ld", (long)getpid()); add = num; break;
			case 'r': snprintf(num, sizeof(num), "%ld", rank); add = num; break;
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

/* Writes s to the file CKPTCACHE_STATS (tmpl) names. */
static void stats_write_to(const ckc_stats_t *s, const char *tmpl, long rank)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return;
	ckc_stats_write_json(s, f);
	sys_fclose(f);
	char name[PATH_MAX];
	const char *why = "the name is too long";
	int fd = expand_name_rank(tmpl, rank, name, sizeof(name)) ? -1 : output_open(name, &why);
	int rc = fd < 0 ? 0 : ckc_io_pwrite_all(fd, buf, len, 0);
	if (rc)
		why = strerror(-rc);
	if (fd < 0 || rc)
		ckc_warn("CKPTCACHE_STATS='%s': %s; no statistics written", tmpl, why);
	if (fd >= 0)
		sys_close(fd);
	sys_free(buf);
}

static void stats_write(void)
{
	ckc_stats_t s;
	ckc_mutex_lock(&ckc_eng.lock);
	eng_stats_collect(&s);
	eng_unlock();
	stats_write_to(&s, ckc_eng.cfg.stats, ckc_eng.cfg.rank);
}

void ckc_stats_write_unstarted(const ckc_config_t *c)
{
	ckc_stats_t s;
	memset(&s, 0, sizeof(s));
	s.aside_on = true;
	s.aside_home = true;
	s.small_home = true;
	s.aside_objects = ckc_aside_firsts();
	if (c->stats && s.aside_objects)
		stats_write_to(&s, c->stats, c->rank);
}


void eng_abstime(uint64_t ns, struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += (time_t)(ns / 1000000000u);
	ts->tv_nsec += (long)(ns % 1000000000u);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Waits on the engine's condition c at most ns nanoseconds (lock held).
 * Returns ETIMEDOUT once they have passed, else 0. */
int eng_wait_ns(eng_cond_t c, uint64_t ns)
{
	struct timespec ts;
	eng_abstime(ns, &ts);
	return ckc_cond_timedwait(&ckc_eng.cv[c], &ckc_eng.lock, &ts);
}

/* Waits on the engine's condition c until deadline_ns (0: no limit). Lock
 * held. Returns false once the deadline has passed. */
bool eng_wait_until(eng_cond_t c, uint64_t deadline_ns)
{
	if (!deadline_ns) {
		eng_wait(c);
		return true;
	}
	uint64_t now = ckc_now_ns();
	if (now >= deadline_ns)
		return false;
	/* the condition waits on CLOCK_REALTIME: wake up in small steps */
	eng_wait_ns(c, deadline_ns - now < 50000000ull ? deadline_ns - now : 50000000ull);
	return true;
}

static bool flushes_pending(void)
{
	bool busy = false;
	for (int l = 0; l + 1 < ckc_eng.ntier; l++)
		busy |= ckc_edge_busy(&ckc_eng.edge[l]);
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
 * open, so that the program's later writes land in the real file. base:
 * the real file o began over (a file put there since is newer, kept, and
 * the answer CKC_CHANGED), NULL to replace whatever is there. Lock held;
 * dropped while bytes move. Returns 0 or -errno. */
int eng_keep_open_commit(ckc_obj_t *o, const ckc_fid_t *base)
{
	int rc = 0;

	/* a move between tiers, or the making of its temporary file, ends
	 * first */
	eng_wait_idle(o, EB_MOVE | EB_HOME);
	if (o->complete || o->retired || o->home_live)
		return 0;
	if (o->wlevel < ckc_eng.ntier - 1)
		rc = eng_migrate_to(o, true);
	if (!rc && !o->complete && !o->retired) {
		char *tmp = o->home_tmp;
		int fd = o->home_fd;
		ckc_attr_t attr = o->attr;
		ckc_fid_t was = base ? *base : (ckc_fid_t){ 0 };
		o->home_busy = true;
		eng_unlock();
		rc = ckc_home_commit_open(tmp, o->key, fd, &attr, base ? &was : NULL);
		ckc_mutex_lock(&ckc_eng.lock);
		if (!rc) {
			sys_free(o->home_tmp);
			o->home_tmp = NULL;
			o->home_live = true;
			o->home_dir_synced = false;
			eng_set_home(o, true);
		}
		eng_home_end(o);
	}
	return rc;
}

/* How long a hand-over at the end waits for a descriptor another thread
 * of the library holds, per try (8 tries). */
#define HANDOVER_WAIT_NS 50000000ull

/* Hands o over to its real file as the program ends. A descriptor kept
 * per open checkpoint may not fit a full table: once one did not, the
 * bytes so far of this one and of those after it are published through a
 * descriptor of the moment (ckc_handoff), and the program's later calls on
 * them go to the real file. Lock held; dropped while bytes move. */
static void handover(ckc_obj_t *o)
{
	static bool table_full;
	/* a publication found it full already (flush_later): a descriptor
	 * kept now would take the number given up for the publications, and
	 * those after it would find none */
	int rc = table_full || atomic_load(&ckc_eng.fds_short) ? -EMFILE : eng_keep_open_commit(o, NULL);
	if (ckc_io_short(rc) && !table_full) {
		table_full = true;
		ckc_warn("the descriptor table is full as the program ends: checkpoints still open are "
			 "written to their real paths and closed there");
		eng_spare_fd();
	}
	for (int tries = 0; ckc_io_short(rc) && tries < 8; tries++) {
		rc = eng_handoff_locked(o);
		/* no room made: the number given up went to a publication
		 * another thread retried (flush_later takes the spare too), which
		 * gives it back when done */
		if (ckc_io_short(rc) && !eng_spare_fd())
			eng_wait_ns(EC_FLUSHED, HANDOVER_WAIT_NS);
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
		/* many small checkpoints left: this thread publishes too (not
		 * with a deadline: a publication it began could outlast it) */
		if (!deadline_ns && ckc_flush_help())
			continue;
		if (!eng_wait_until(EC_FLUSHED, deadline_ns))
			return false;
	}
}

/* A checkpoint a program thread is closing as the process ends, its bytes
 * on their way to the real path (lock held). */
static bool closing_home(void)
{
	for (size_t i = 0; i < ckc_eng.map_cap; i++)
		for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext)
			if (o->home_busy && !o->retired)
				return true;
	return false;
}

/* Names each checkpoint owed to its real path that is not there; those
 * not in a rescue file either are counted lost (the cache ends with the
 * process). drained: the drain ended in time (else the deadline passed,
 * and nothing more is waited for). */
static void report_unpublished(uint64_t deadline_ns, bool drained)
{
	/* program threads still run during exit(): a close that is giving
	 * its file its name ends first (it is not lost) */
	while (drained && closing_home() && eng_wait_until(EC_HOME, deadline_ns))
		;
	for (size_t i = 0; i < ckc_eng.map_cap; i++)
		for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext) {
			if (!ckc_persist_wanted(o) || o->at_home || o->retired || o->capture)
				continue;
			ckc_error("checkpoint %s did not reach its real path%s%s", o->key,
				  o->rescue ? "; its bytes are in " : drained ? "" : " in time: it is lost",
				  o->rescue ? o->rescue : "");
			if (!o->rescue)
				ckc_eng.st.lost++;
		}
}

int ckc_finish(uint64_t deadline_ns)
{
	ckc_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active) {
		eng_unlock();
		return 0;
	}
	if (ckc_eng.finish_state) {
		bool in_time = true;
		while (ckc_eng.finish_state == 1 && in_time)
			in_time = eng_wait_until(EC_FINISH, deadline_ns);
		eng_unlock();
		return in_time ? 0 : -ETIMEDOUT;
	}
	ckc_eng.finish_state = 1;
	ckc_eng.draining = true;
	ckc_ktouch_end();
	eng_wake_all();
	uint64_t drain0 = ckc_eng.drain_t0 = ckc_now_ns();
	ckc_flush_short_again();
	bool done = drain_locked(deadline_ns);
	ckc_eng.st.drain_s = (double)(ckc_now_ns() - drain0) / 1e9;
	eng_unlock();
	/* a flush that is stuck past the deadline is not waited for */
	if (done)
		threads_stop();
	ckc_mutex_lock(&ckc_eng.lock);
	report_unpublished(deadline_ns, done);
	ckc_peer_finish();
	aside_t aside = ckc_eng.aside, small = ckc_eng.aside_small;
	if (done)
		aside_drained(&aside, (uint64_t)(ckc_eng.st.drain_s * 1e9));
	eng_unlock();
	/* the files this process leaves are written, and its own files
	 * removed, without the engine lock: program threads may still use
	 * the cache */
	ckc_peer_release();
	ckc_hints_summary();
	ckc_aside_save(&aside, &small, ckc_eng.cfg.paths);
	if (ckc_eng.cfg.stats)
		stats_write();
	/* the tier's file goes now (this process's threads may still read it
	 * through its descriptor); nothing in the checkpoint folders is left */
	for (int l = 0; l < ckc_eng.ntier; l++)
		ckc_tier_finish(&ckc_eng.tier[l]);
	/* a flush still running keeps its temporary file on the record, for
	 * the next process to remove once this one is gone */
	if (done)
		ckc_state_close();
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_eng.finish_state = 2;
	eng_signal(EC_FINISH);
	bool traced = ckc_eng.trace_fd >= 0;
	eng_unlock();
	if (traced)
		ckc_trace_end(); /* its lines so far, written */
	return done ? 0 : -ETIMEDOUT;
}

void ckc_shutdown(void)
{
	ckc_mutex_lock(&eng_life);
	ckc_finish(0);
	ckc_mutex_lock(&ckc_eng.lock);
	if (!ckc_eng.active) {
		eng_unlock();
		ckc_mutex_unlock(&eng_life);
		return;
	}
	for (size_t i = 0; i < ckc_eng.map_cap; i++)
		while (ckc_eng.map[i]) {
			ckc_obj_t *o = ckc_eng.map[i];
			eng_map_remove(o);
			o->retired = true;
			ckc_node_note(o);
			ckc_obj_put(o);
		}
	eng_owed_clear();
	ckc_eng.active = false;
	eng_wake_all();
	eng_unlock();
	/* no engine call starts now (the engine is not active): the tiers
	 * and the private folder's record close without the lock */
	tiers_close();
	ckc_state_close();
	engine_reset();
	ckc_mutex_unlock(&eng_life);
}
