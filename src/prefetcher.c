/* The prefetcher: one thread that follows the restore queue P from its head
 * and promotes checkpoints (from the ssd tier, or from their real path, so a
 * file of an earlier run counts too) into the top tier, as far ahead as room
 * allows without evicting anything the queue needs sooner. It also picks up
 * lines appended to the hint file. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "log.h"
#include "path.h"
#include "thread.h"
#include "sys.h"

/* How far down the queue one pass looks. */
#define PREFETCH_LOOKAHEAD 4096
#define HINTS_POLL_NS 50000000ull

/* The hint file is read under its own lock, never the engine's: a line
 * read is pushed onto the restore queue under the engine lock, taken for
 * that push only. The hint fields of ckc_eng (hints, hints_open,
 * hints_said, hints_bad, hints_next_try_ns, hints_last_off,
 * hints_quiet_since) belong to this lock. */
static ckc_mutex_t hints_lock = CKC_MUTEX_INIT(HINTS);
CKC_LOCKS_AT_START(hints_lock, ckc_locks_add, &hints_lock)

static int hints_emit(void *ctx, const char *canon)
{
	(void)ctx;
	ckc_mutex_lock(&ckc_eng.lock);
	int rc = hq_push_back(ckc_eng.hq, canon);
	eng_unlock();
	return rc;
}

/* Malformed lines shown one by one; the others are counted, and the count
 * is given at the end (a binary or generated file can have millions). */
#define HINTS_SHOWN 10

static void hints_report(void *ctx, const char *file, unsigned line, const char *msg)
{
	(void)ctx;
	if (!line) {
		ckc_warn("%s: %s", file, msg);
		return;
	}
	if (++ckc_eng.hints_bad <= HINTS_SHOWN)
		ckc_warn("%s:%u: %s", file, line, msg);
	else if (ckc_eng.hints_bad == HINTS_SHOWN + 1)
		ckc_warn("%s:%u: more malformed lines follow; they are skipped and counted, not shown",
			 file, line);
}

void ckc_hints_summary(void)
{
	ckc_mutex_lock(&hints_lock);
	uint64_t bad = ckc_eng.hints_bad;
	ckc_mutex_unlock(&hints_lock);
	if (bad > HINTS_SHOWN)
		ckc_warn("CKPTCACHE_HINTS='%s': %llu malformed lines in all, the first %d shown",
			 ckc_eng.cfg.hints, (unsigned long long)bad, HINTS_SHOWN);
}

/* Opens the hint file if it is due (hints_lock held); false while it is
 * not open. */
static bool hints_open_due(uint64_t now, bool now_anyway)
{
	if (ckc_eng.hints_open)
		return true;
	if (ckc_eng.hints_next_try_ns == UINT64_MAX || (now < ckc_eng.hints_next_try_ns && !now_anyway))
		return false;
	/* one hint file per rank: CKPTCACHE_HINTS=order.%r.txt */
	char name[PATH_MAX];
	int rc = ckc_expand_name(ckc_eng.cfg.hints, name, sizeof(name));
	if (!rc)
		rc = hint_reader_open(&ckc_eng.hints, name, ckc_eng.cfg.rank, HINT_MAX_ENTRIES_DEFAULT);
	if (rc == -EINVAL) {
		/* never opened again: a FIFO would block the reader or release
		 * its writer */
		ckc_warn("CKPTCACHE_HINTS='%s': not a regular file (a FIFO, socket or device), "
			 "which could block the program: it is not read; checkpoints are read "
			 "without its order", ckc_eng.cfg.hints);
		ckc_eng.hints_said = true;
		ckc_eng.hints_next_try_ns = UINT64_MAX;
		return false;
	}
	if (rc) {
		/* a program often writes its hint file after it starts: one
		 * that is not there yet is reported only if the program starts
		 * reading checkpoints without it */
		if (rc != -ENOENT && !ckc_eng.hints_said) {
			ckc_warn("CKPTCACHE_HINTS='%s': %s; looking again every %llu ms",
				 ckc_eng.cfg.hints, strerror(-rc),
				 (unsigned long long)(HINTS_POLL_NS / 1000000));
			ckc_eng.hints_said = true;
		} else if (ckc_eng.hints_next_try_ns == 0) {
			ckc_info("CKPTCACHE_HINTS='%s' is not there yet; looking for it every %llu ms",
				 ckc_eng.cfg.hints, (unsigned long long)(HINTS_POLL_NS / 1000000));
		}
		ckc_eng.hints_next_try_ns = now + HINTS_POLL_NS;
		return false;
	}
	ckc_eng.hints_open = true;
	return true;
}

/* Reads the lines appended since the last poll (hints_lock held); returns
 * how many went onto the queue. */
static long hints_read_new(uint64_t now, bool now_anyway)
{
	if (!hints_open_due(now, now_anyway))
		return 0;
	long n = hint_reader_poll(&ckc_eng.hints, hints_emit, hints_report, NULL);
	/* a last line without its newline counts once the file has been
	 * quiet for a second */
	if (ckc_eng.hints.partial_len == 0 || n != 0 || ckc_eng.hints.off != ckc_eng.hints_last_off) {
		ckc_eng.hints_last_off = ckc_eng.hints.off;
		ckc_eng.hints_quiet_since = now;
	} else if (now - ckc_eng.hints_quiet_since > 1000000000ull) {
		n = hint_reader_finish(&ckc_eng.hints, hints_emit, hints_report, NULL);
	}
	return n;
}

/* The poll itself (engine lock held, dropped while the file is read);
 * reading: the program opens a checkpoint for reading. */
static void hints_poll(bool now_anyway, bool reading)
{
	if (!ckc_eng.cfg.hints)
		return;
	eng_unlock();
	ckc_mutex_lock(&hints_lock);
	long n = 0;
	if (!reading || !ckc_eng.hints_said) {
		n = hints_read_new(ckc_now_ns(), now_anyway);
		if (reading && !ckc_eng.hints_open && !ckc_eng.hints_said) {
			ckc_eng.hints_said = true;
			ckc_warn("CKPTCACHE_HINTS='%s': no such file as the program starts reading "
				 "checkpoints; they are read without prefetching until it appears",
				 ckc_eng.cfg.hints);
		}
	}
	ckc_mutex_unlock(&hints_lock);
	ckc_mutex_lock(&ckc_eng.lock);
	if (n > 0) {
		ckc_prefetch_kick();
		eng_signal(EC_ROOM);
	}
}

/* The program opens a checkpoint for reading (lock held): the hint file's
 * lines so far are read first, also where the prefetcher opened the file
 * before the program had written them. */
void ckc_hints_reading(void)
{
	hints_poll(true, true);
}

void ckc_hints_poll(bool now_anyway)
{
	hints_poll(now_anyway, false);
}

/* A piece of a promotion into the gpu tier, read from its source. */
struct fill_from {
	const ckc_src_t *src;
	uint64_t off;
	int *fd;
};

static int fill_from(void *ctx, uint64_t off, void *buf, size_t n)
{
	const struct fill_from *f = ctx;
	return ckc_src_read(f->src, f->off + off, buf, n, f->fd);
}

/* Promotes o into the top tier (lock held, dropped during the copy).
 * Returns 0, -EAGAIN when there is no room for it now, or -errno. */
static int promote(ckc_obj_t *o, uint64_t dist)
{
	int src = ckc_best_level(o);

	if (src <= 0)
		return 0;
	int rc = ckc_place_reserve_promote(o, 0, o->size ? o->size : 1, dist, src);
	if (rc)
		return rc;
	ckc_obj_get(o);
	ckc_set_state(o, 0, LC_EV_READ_BEGIN);
	o->place[0].pins++;
	bool bounded = src < ckc_eng.ntier - 1;
	if (bounded)
		o->place[src].pins++;
	ckc_src_t from;
	rc = ckc_src_snapshot(o, src, &from);
	ckc_ext_t *dst = NULL;
	int ndst = o->place[0].nexts;
	if (!rc && (dst = sys_malloc((size_t)ndst * sizeof(*dst))) == NULL)
		rc = -ENOMEM;
	if (!rc)
		memcpy(dst, o->place[0].ext, (size_t)ndst * sizeof(*dst));
	uint64_t size = o->size, t0 = ckc_now_ns();
	ckc_tier_t *top = &ckc_eng.tier[0];
	eng_unlock();
	int fd = -1;
	uint64_t start = 0;
	if (!rc && from.t) {
		/* tier to tier: straight between their memories (pinned host
		 * to device, for the gpu tier) */
		ckc_src_t to = { .t = top, .ext = dst, .n = ndst };
		rc = ckc_src_copy(&from, &to, size, NULL, NULL);
		start = size;
	}
	for (uint64_t off = start, t0; !rc && off < size;) {
		uint64_t aoff, avail;
		if (!ckc_ext_run(dst, ndst, off, &aoff, &avail)) {
			rc = -EIO;
			break;
		}
		uint64_t n = ckc_pace_begin(size - off < avail ? size - off : avail, &t0);
		if (top->kind == TIER_HOST) {
			rc = ckc_src_read(&from, off, top->base + aoff, (size_t)n, &fd);
		} else if (top->kind == TIER_GPU) {
			/* from a file: read into pinned memory, copied from there */
			struct fill_from f = { &from, off, &fd };
			rc = ckc_gpu_put_filled(top, aoff, (size_t)n, fill_from, &f);
		} else {
			/* no host tier: stage through memory into the top tier */
			n = n < (4u << 20) ? n : (4u << 20);
			char *bounce = sys_malloc((size_t)n);
			rc = bounce ? ckc_src_read(&from, off, bounce, (size_t)n, &fd) : -ENOMEM;
			if (!rc)
				rc = ckc_tier_put(top, aoff, bounce, (size_t)n);
			sys_free(bounce);
		}
		ckc_pace_end((size_t)n, t0);
		off += n;
	}
	if (fd >= 0)
		sys_close(fd);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_src_release(&from);
	sys_free(dst);
	if (bounded)
		ckc_unpin(o, src);
	o->place[0].pins--;
	eng_signal(EC_PINS);
	if (rc || o->retired) {
		/* a published version whose real file is gone (renamed or
		 * removed by the program, or by another: a temporary file
		 * renamed into place, old checkpoints cleaned up) is a file
		 * the cache holds nothing of: forgotten, not looked for again
		 * (a prefetch is advice, and nothing is lost) */
		/* (the same where the real file came up short or failed: it
		 * was truncated or replaced meanwhile, and what a read gets
		 * now is the real file's own answer; otherwise said once) */
		bool gone = (rc == -ENOENT || rc == -EIO) && !bounded && o->at_home;
		static bool said;
		if (gone && !o->retired) {
			ckc_trace("prefetch-gone", o, 0, size, -1, t0);
			ckc_obj_retire(o);
		} else if (rc && !o->retired && !said) {
			said = true; /* (the engine lock held) */
			ckc_warn("could not prefetch %s (%s); further failures of prefetches are not said",
				 o->key, strerror(-rc));
		}
		if (o->place[0].state != LC_INIT) {
			ckc_place_free(o, 0);
			ckc_set_state(o, 0, LC_EV_DROP);
		}
	} else {
		ckc_set_state(o, 0, LC_EV_READ_END);
		top->st.prefetch_ops++;
		top->st.prefetch_bytes += size;
		ckc_trace("prefetch", o, 0, size, 0, t0);
	}
	ckc_obj_put(o);
	eng_signal(EC_LANDED);
	eng_signal(EC_ROOM);
	return rc == -EAGAIN ? -EIO : rc;
}

/* Whether o is left where it is because the page cache holds its real
 * file whole: the program reads it from there at memory speed, and a copy
 * into a host tier would only take room and memory bandwidth from it. Not
 * below a gpu tier: a read the gpu tier serves under device capture is a
 * device-to-device copy, a read of the page cache a copy to the program's
 * staging buffer and then its copy over the bus (on an H100 machine, 60 of
 * 96 restores of 128 MiB left in the page cache ran at 6.8 GB/s, against
 * hundreds of GB/s from the gpu tier). The look is repeated at most every
 * PAGE_CACHE_LOOK_NS (the kernel may drop the pages meanwhile). Lock held;
 * dropped for the look. */
#define PAGE_CACHE_LOOK_NS 1000000000ull

static bool left_in_page_cache(ckc_obj_t *o)
{
	int src = ckc_best_level(o), home = ckc_eng.ntier - 1;
	/* the real file must hold this version: what a read of it gets */
	bool published = eng_home_holds(o);

	if (src <= 0 || !published || ckc_eng.tier[0].kind == TIER_GPU)
		return false;
	if (src < home && ckc_eng.tier[src].kind != TIER_SSD)
		return false; /* a memory tier below the top one */
	uint64_t now = ckc_now_ns();
	if (now < o->pc_until)
		return true;
	char *key = strdup(o->key);
	uint64_t size = o->size;
	if (!key)
		return false;
	ckc_obj_get(o);
	eng_unlock();
	bool held = ckc_home_in_memory(key, size);
	ckc_mutex_lock(&ckc_eng.lock);
	sys_free(key);
	held = held && !o->retired && o->size == size && o->place[0].state == LC_INIT;
	o->pc_until = held ? now + PAGE_CACHE_LOOK_NS : 0;
	if (held && !o->pc_counted) {
		o->pc_counted = true;
		ckc_eng.tier[0].st.prefetch_cached++;
		ckc_trace("page-cache", o, 0, size, home, 0);
	}
	ckc_obj_put(o);
	return held;
}

/* One walk down the queue. Returns true if it promoted something, or if
 * the queue changed while the lock was dropped (the walk starts again). */
static bool prefetch_pass(void)
{
	uint64_t cursor = 0, dist;
	const char *key;
	int seen = 0;

	if (ckc_eng.ntier < 2)
		return false;
	ckc_eng.prefetch_wants_room = false;
	while (seen++ < PREFETCH_LOOKAHEAD && hq_next(ckc_eng.hq, &cursor, &key, &dist)) {
		ckc_obj_t *o = ckc_map_find(key);
		uint64_t gen = hq_generation(ckc_eng.hq);
		if (!o) {
			o = ckc_obj_import_home(key); /* the lock dropped for a stat */
			if (hq_generation(ckc_eng.hq) != gen)
				return true;
		}
		if (!o || !o->complete || o->retired || o->place[0].state != LC_INIT)
			continue;
		if (left_in_page_cache(o)) {
			if (hq_generation(ckc_eng.hq) != gen)
				return true;
			continue;
		}
		if (hq_generation(ckc_eng.hq) != gen)
			return true;
		int rc = promote(o, dist);
		if (rc == -EAGAIN) {
			ckc_eng.prefetch_wants_room = true;
			return false; /* no room for the next one the queue needs */
		}
		if (rc == 0 && o->place[0].state == LC_READ_COMPLETE)
			return true;  /* the queue may have changed while unlocked */
	}
	return false;
}

static void *prefetcher_main(void *arg)
{
	(void)arg;
	ckc_io_guard = 1; /* never re-enter the wrappers */
	ckc_tl_background = true;
	ckc_tl_prefetcher = true;
	ckc_mutex_lock(&ckc_eng.lock);
	while (!ckc_eng.stopping) {
		ckc_hints_poll(false);
		uint64_t gen = ckc_eng.prefetch_gen;
		if (ckc_eng.prefetch_started && !ckc_eng.draining && prefetch_pass())
			continue;
		/* sleep until room may have appeared or the queue changed */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)HINTS_POLL_NS;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (gen == ckc_eng.prefetch_gen && !ckc_eng.stopping &&
		       ckc_cond_timedwait(&ckc_eng.cv[EC_PREFETCH], &ckc_eng.lock, &ts) == 0)
			;
	}
	eng_unlock();
	return NULL;
}

int ckc_prefetcher_start(void)
{
	/* the new thread reads prefetcher_running under the lock at once */
	ckc_rank_need(CKC_RANK_ENGINE, "the prefetch thread is started");
	if (ckc_eng.prefetcher_running || ckc_eng.stopping || ckc_eng.cfg.prefetch == CKC_PREFETCH_OFF)
		return 0;
	int rc = ckc_thread_start(&ckc_eng.prefetcher, prefetcher_main, NULL, "ckc-prefetch", false);

	ckc_eng.prefetcher_running = rc == 0;
	return -rc;
}

/* Without a hint file the queue only grows from the program's writes
 * (CKPTCACHE_ORDER) and the API: a process that only reads checkpoints it
 * has no order for starts no prefetch thread. */
void ckc_prefetcher_need(void)
{
	static bool said;

	if (!ckc_eng.hq || hq_len(ckc_eng.hq) == 0)
		return;
	int rc = ckc_prefetcher_start();
	if (rc && !said) {
		said = true;
		ckc_warn("cannot start the prefetch thread (%s): checkpoints are read without "
			 "prefetching", strerror(-rc));
	}
}

/* After stopping is set (no thread starts it again): joins the thread. */
void ckc_prefetcher_stop(void)
{
	ckc_mutex_lock(&ckc_eng.lock);
	bool running = ckc_eng.prefetcher_running;
	eng_unlock();
	if (!running)
		return;
	pthread_join(ckc_eng.prefetcher, NULL);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_eng.prefetcher_running = false;
	eng_unlock();
}
