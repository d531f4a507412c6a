/* Per-tier copies of objects: their extents in a tier's arena, room for new
 * bytes (best-fit gap, else Algorithm 1 eviction, waiting or bypassing), and
 * the scores that drive eviction. Every function runs with the engine lock
 * held; ckc_place_reserve may wait on the engine condition variable. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "log.h"
#include "peer.h"
#include "sys.h"

uint64_t ckc_place_bytes(const ckc_place_t *p)
{
	uint64_t n = 0;

	for (int i = 0; i < p->nexts; i++)
		n += p->ext[i].alen;
	return n;
}

void ckc_set_state(ckc_obj_t *o, int level, lc_event_t ev)
{
	if (!lc_apply(&o->place[level].state, ev))
		ckc_debug("%s v%llu in %s", o->key, (unsigned long long)o->version,
			  ckc_eng.tier[level].name);
}

uint64_t ckc_dist(const ckc_obj_t *o)
{
	return ckc_eng.hq ? hq_distance(ckc_eng.hq, o->key) : HQ_FAR;
}

void ckc_mark_safe(ckc_obj_t *o)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++)
		if (o->place[l].state == LC_WRITE_COMPLETE && ckc_lower_has(o, l))
			ckc_set_state(o, l, LC_EV_FLUSH_DONE);
}

bool ckc_lower_has(const ckc_obj_t *o, int level)
{
	for (int l = level + 1; l < ckc_eng.ntier - 1; l++)
		if (lc_readable(o->place[l].state))
			return true;
	return o->at_home || o->rescue != NULL;
}

bool ckc_tier_takes(const ckc_obj_t *o, int level)
{
	const ckc_tier_t *t = &ckc_eng.tier[level];

	/* A copy there would cost the device a second write (and a read to
	 * publish it), and the program's reads of it bypass the page cache
	 * that the real file's go through: that tier holds only checkpoints
	 * the real path does not need (persist=never, or consumed ones under
	 * persist=unconsumed). */
	return t->kind != TIER_SSD || !o->home_dev_known || o->home_dev != t->dev ||
	       !ckc_persist_wanted(o);
}

int ckc_best_level(const ckc_obj_t *o)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		const ckc_place_t *p = &o->place[l];
		if (lc_readable(p->state))
			return l;
		/* bytes being written are readable by a concurrent reader */
		if (p->state == LC_WRITE_IN_PROGRESS && l == o->wlevel && !o->migrating)
			return l;
	}
	if (o->at_home || o->rescue || (o->from_home && !o->retired))
		return ckc_eng.ntier - 1;
	return -1;
}

int ckc_place_segments(const ckc_place_t *p, uint64_t off, uint64_t len, ckc_ext_t *seg, int max)
{
	uint64_t fstart = 0;
	int n = 0;

	for (int i = 0; i < p->nexts && len > 0; i++) {
		const ckc_ext_t *e = &p->ext[i];
		uint64_t fend = fstart + e->alen;
		if (off < fend) {
			uint64_t in = off - fstart;
			uint64_t take = e->alen - in < len ? e->alen - in : len;
			if (n == max)
				return -E2BIG;
			seg[n].aoff = e->aoff + in;
			seg[n].alen = take;
			n++;
			off += take;
			len -= take;
		}
		fstart = fend;
	}
	return len ? -ERANGE : n;
}

bool ckc_ext_run(const ckc_ext_t *ext, int n, uint64_t off, uint64_t *aoff, uint64_t *avail)
{
	uint64_t fstart = 0;

	for (int i = 0; i < n; i++) {
		if (off < fstart + ext[i].alen) {
			*aoff = ext[i].aoff + (off - fstart);
			*avail = fstart + ext[i].alen - off;
			return true;
		}
		fstart += ext[i].alen;
	}
	return false;
}

void ckc_place_free(ckc_obj_t *o, int level)
{
	ckc_place_t *p = &o->place[level];
	arena_t *a = &ckc_eng.tier[level].arena;

	for (int i = 0; i < p->nexts; i++) {
		ssize_t idx = arena_index_of(a, p->ext[i].aoff & ~(a->align - 1));
		if (idx >= 0 && a->frag[idx].owner == o)
			arena_release(a, (size_t)idx);
		else
			ckc_error("arena of %s lost an extent of %s", ckc_eng.tier[level].name, o->key);
	}
	sys_free(p->ext);
	p->ext = NULL;
	p->nexts = p->capexts = 0;
	if (ckc_eng.tier[level].kind == TIER_GPU)
		ckc_peer_room();
}

void ckc_unpin(ckc_obj_t *o, int level)
{
	ckc_place_t *p = &o->place[level];

	if (--p->pins == 0 && ckc_obj_gone(o) && p->state != LC_INIT) {
		ckc_place_free(o, level);
		ckc_set_state(o, level, LC_EV_DROP);
	}
	eng_signal(EC_PINS);
	if (p->pins == 0) /* evictable now, or freed */
		eng_signal(EC_ROOM);
}

void ckc_place_trim(ckc_obj_t *o, int level, uint64_t size)
{
	ckc_place_t *p = &o->place[level];
	arena_t *a = &ckc_eng.tier[level].arena;
	uint64_t keep = arena_round(a, size), fstart = 0;
	int n = 0;

	for (int i = 0; i < p->nexts; i++) {
		ckc_ext_t *e = &p->ext[i];
		uint64_t skew = e->aoff & (a->align - 1);
		ssize_t idx = arena_index_of(a, e->aoff - skew);
		if (idx < 0)
			continue;
		if (fstart >= keep) {
			arena_release(a, (size_t)idx);
		} else {
			if (fstart + e->alen > keep) {
				arena_shrink(a, (size_t)idx, skew + keep - fstart);
				e->alen = keep - fstart;
			}
			p->ext[n++] = *e;
		}
		fstart += e->alen;
	}
	p->nexts = n;
	if (ckc_eng.tier[level].kind == TIER_GPU)
		ckc_peer_room();
}

int ckc_place_append(ckc_place_t *p, uint64_t aoff, uint64_t alen)
{
	if (p->nexts == p->capexts) {
		int cap = p->capexts ? p->capexts * 2 : 1;
		ckc_ext_t *e = sys_realloc(p->ext, (size_t)cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		p->ext = e;
		p->capexts = cap;
	}
	p->ext[p->nexts].aoff = aoff;
	p->ext[p->nexts].alen = alen;
	p->nexts++;
	return 0;
}

/* Must this copy be kept until it is safe elsewhere? */
static bool place_must_keep(const ckc_obj_t *o, int level)
{
	if (ckc_lower_has(o, level))
		return false;
	if (o->consumed && ckc_eng.cfg.persist != CKC_PERSIST_ALWAYS)
		return false;
	return true;
}

/* Estimated seconds until the copy at level may be evicted (the p-score);
 * INFINITY when it must not be evicted at all. */
static double place_p(const ckc_obj_t *o, int level)
{
	const ckc_place_t *p = &o->place[level];

	if (p->pins > 0 || o->migrating || (level == 0 && o->gref))
		return INFINITY;
	switch (p->state) {
	case LC_FLUSHED:
		return 0;
	case LC_WRITE_COMPLETE:
	case LC_CONSUMED:
		/* a complete copy that is safe below has been marked FLUSHED
		 * (ckc_mark_safe), so only a consumed one can be free here */
		if (p->state == LC_CONSUMED && !place_must_keep(o, level))
			return 0;
		/* never 0: until its flush is marked done it must not go */
		if (o->flush_edge == level || ckc_eng.edge[level].current == o)
			return o->flush_eta > 1e-6 ? o->flush_eta : 1e-6;
		return INFINITY;
	default:
		return INFINITY;
	}
}

void ckc_refresh_flush_eta(int level)
{
	ckc_edge_t *e = &ckc_eng.edge[level];
	double bw = e->bw > 0 ? e->bw : 1e9, t = 0;

	/* the running flush first: whatever is left of it, then the queue */
	if (e->current) {
		ckc_obj_t *c = e->current;
		uint64_t left = c->size > c->flush_done ? c->size - c->flush_done : 0;
		t = (double)left / bw;
		c->flush_eta = t;
	}
	for (ckc_obj_t *o = e->head; o; o = o->fq_next) {
		t += (double)o->size / bw;
		o->flush_eta = t;
	}
}

typedef struct frag_buf {
	evict_frag_t *f;
	size_t cap;
} frag_buf_t;

static frag_buf_t frag_bufs[CKC_MAX_TIERS];

/* The level the checkpoint this thread's prefetch promotes comes from
 * (ckc_place_reserve_promote), -1 outside one. */
static __thread int promote_src = -1;

/* The fastest level below level that holds o's bytes (the real path where
 * no tier does): where a read of o goes once level's copy is gone. */
static int level_below(const ckc_obj_t *o, int level)
{
	for (int l = level + 1; l < ckc_eng.ntier - 1; l++)
		if (lc_readable(o->place[l].state))
			return l;
	return ckc_eng.ntier - 1;
}

/* Whether a promotion into the gpu tier leaves o there although the queue
 * needs o only after the checkpoint promoted: evicted, o would be read
 * from a level no faster than the one the promoted checkpoint comes from.
 * Such a swap trades a read from the gpu tier later for one now, and wins
 * only where the copy lands before the program gets there; a prefetch
 * gives way to the program's copies, so during a restore it does not (a
 * restore under CKPTCACHE_ORDER=reverse with half the history in the gpu
 * tier evicted the oldest captures, which it reads last, for the newest,
 * in the host tier: the copy landed after the restore had ended, and the
 * oldest were read from the host tier and the real files instead; on an
 * H200 the restore took 1.2x as long as without hints, 4.5x before the
 * prefetch stopped giving way to reads waiting for it). */
static bool promote_keeps(const ckc_obj_t *o, int level, uint64_t d)
{
	return promote_src >= 0 && d < HQ_FAR && ckc_eng.tier[level].kind == TIER_GPU &&
	       level_below(o, level) >= promote_src;
}

int ckc_place_reserve_promote(ckc_obj_t *o, int level, uint64_t need, uint64_t dist, int src)
{
	promote_src = src;
	int rc = ckc_place_reserve(o, level, need, CKC_ALLOC_PREFETCH, dist);
	promote_src = -1;
	return rc;
}

/* Scores of every fragment of tier level's arena for a placement. */
static evict_frag_t *build_frags(int level, int mode, uint64_t dist_limit)
{
	arena_t *a = &ckc_eng.tier[level].arena;
	frag_buf_t *b = &frag_bufs[level];
	bool lru = ckc_eng.cfg.eviction == CKC_EVICT_LRU;

	if (b->cap < a->nfrag) {
		size_t cap = a->nfrag * 2;
		evict_frag_t *f = sys_realloc(b->f, cap * sizeof(*f));
		if (!f)
			return NULL;
		b->f = f;
		b->cap = cap;
	}
	for (size_t i = 0; i < a->nfrag; i++) {
		evict_frag_t *f = &b->f[i];
		ckc_obj_t *o = a->frag[i].owner;
		f->len = a->frag[i].len;
		if (o == (void *)&ckc_gpu_fence) {
			/* the unmapped part of a gpu region */
			f->gap = false;
			f->p = INFINITY;
			f->s = 0;
			f->age = 0;
			continue;
		}
		if (!o) {
			f->gap = true;
			f->p = 0;
			f->s = EVICT_FAR;
			f->age = 0;
			continue;
		}
		const ckc_place_t *p = &o->place[level];
		uint64_t d = ckc_dist(o);
		f->gap = false;
		f->p = place_p(o, level);
		f->s = d >= HQ_FAR ? EVICT_FAR : d;
		f->age = lru ? p->seq_use : p->seq_in;
		/* the prefetcher never evicts what the queue needs sooner */
		if (mode == CKC_ALLOC_PREFETCH && (d <= dist_limit || promote_keeps(o, level, d)))
			f->p = INFINITY;
	}
	return b->f;
}

static evict_policy_t policy(void)
{
	switch (ckc_eng.cfg.eviction) {
	case CKC_EVICT_FIFO:
		return EVICT_FIFO;
	case CKC_EVICT_LRU:
		return EVICT_LRU;
	default:
		return EVICT_SCORE;
	}
}

/* Evicts every object with an extent in fragments [first, last]. */
static void evict_window(int level, size_t first, size_t last)
{
	ckc_tier_t *t = &ckc_eng.tier[level];
	ckc_obj_t *victims[64];
	size_t nv = 0;

	for (size_t i = first; i <= last; i++) {
		ckc_obj_t *o = t->arena.frag[i].owner;
		bool seen = false;
		if (!o)
			continue;
		for (size_t k = 0; k < nv; k++)
			seen |= victims[k] == o;
		if (!seen) {
			if (nv == sizeof(victims) / sizeof(victims[0]))
				break; /* the rest is evicted on the next round */
			victims[nv++] = o;
		}
	}
	for (size_t k = 0; k < nv; k++) {
		ckc_obj_t *o = victims[k];
		uint64_t bytes = ckc_place_bytes(&o->place[level]);
		ckc_place_free(o, level);
		ckc_set_state(o, level, LC_EV_EVICT);
		t->st.evictions++;
		t->st.evicted_bytes += bytes;
		ckc_trace("evict", o, 0, bytes, level, 0);
	}
}

uint64_t ckc_place_limit(const ckc_obj_t *o, int level)
{
	uint64_t lo, hi;
	return ckc_tier_span(&ckc_eng.tier[level], o, &lo, &hi) ? 0 : hi - lo;
}

/* The fragments [*first, *end) that lie in [lo, hi). */
static void frag_span(const arena_t *a, uint64_t lo, uint64_t hi, size_t *first, size_t *end)
{
	size_t i = 0;
	while (i < a->nfrag && a->frag[i].off < lo)
		i++;
	*first = i;
	while (i < a->nfrag && a->frag[i].off < hi)
		i++;
	*end = i;
}

/* Finds room for a new extent of want bytes in tier level. */
static int find_room(ckc_obj_t *o, int level, uint64_t want, int mode, uint64_t dist_limit,
		     ssize_t *gap)
{
	ckc_tier_t *t = &ckc_eng.tier[level];
	bool waited = false;
	uint64_t t0 = 0, lo, hi;

	if (ckc_tier_span(t, o, &lo, &hi) != 0 || want > hi - lo)
		return mode == CKC_ALLOC_PREFETCH ? -EAGAIN : -ENOSPC;
	for (;;) {
		/* a retired version takes room only for its writer's bytes
		 * (a file unlinked while written) */
		if (o->retired && (mode != CKC_ALLOC_WRITE || o->writers == 0))
			return -ECANCELED;
		*gap = arena_find_gap_in(&t->arena, want, lo, hi);
		if (*gap >= 0)
			break;
		ckc_refresh_flush_eta(level);
		evict_frag_t *f = build_frags(level, mode, dist_limit);
		if (!f)
			return -ENOMEM;
		size_t first, end;
		frag_span(&t->arena, lo, hi, &first, &end);
		evict_choice_t c;
		evict_choose(f + first, end - first, want, policy(), &c);
		if (!c.found)
			return mode == CKC_ALLOC_PREFETCH ? -EAGAIN : -ENOSPC;
		if (c.p == 0) {
			evict_window(level, first + c.first, first + c.last);
			continue;
		}
		if (mode == CKC_ALLOC_PREFETCH)
			return -EAGAIN;
		/* VeloC's rule: when waiting for this tier is predicted slower
		 * than writing to the next one, write to the next one. */
		double bw = ckc_eng.edge[level].bw > 0 ? ckc_eng.edge[level].bw : 1e9;
		if (c.p > (double)want / bw)
			return -ENOSPC;
		if (!waited) {
			waited = true;
			t0 = ckc_now_ns();
			t->st.waits++;
		}
		eng_wait_ns(EC_ROOM, (uint64_t)((c.p < 0.05 ? c.p : 0.05) * 1e9));
	}
	if (waited)
		t->st.wait_s += (double)(ckc_now_ns() - t0) / 1e9;
	return 0;
}

int ckc_place_reserve(ckc_obj_t *o, int level, uint64_t need, int mode, uint64_t dist_limit)
{
	ckc_tier_t *t = &ckc_eng.tier[level];
	ckc_place_t *p = &o->place[level];
	uint64_t have = ckc_place_bytes(p);

	if (need <= have)
		return 0;
	if (t->kind == TIER_GPU && !ckc_gpu_usable(t))
		return mode == CKC_ALLOC_PREFETCH ? -EAGAIN : -ENOSPC;
	if (t->kind == TIER_SSD && atomic_load(&t->full))
		return -ENOSPC;
	uint64_t want = arena_round(&t->arena, need - have);
	uint64_t mask = t->arena.align - 1;
	if (p->nexts > 0 && !(p->ext[p->nexts - 1].aoff & mask) && !(p->ext[p->nexts - 1].alen & mask)) {
		ckc_ext_t *last = &p->ext[p->nexts - 1];
		ssize_t idx = arena_index_of(&t->arena, last->aoff);
		if (idx >= 0 && arena_extend(&t->arena, (size_t)idx, last->alen + want) == 0) {
			if (t->kind == TIER_HOST)
				o->grew |= ckc_host_used(t, last->aoff + last->alen, want, have + want);
			else if (t->kind == TIER_GPU)
				ckc_peer_room();
			last->alen += want;
			return 0;
		}
	}
	ssize_t gap;
	int rc = find_room(o, level, want, mode, dist_limit, &gap);
	if (rc)
		return rc;
	uint64_t aoff = t->arena.frag[gap].off;
	ssize_t idx = arena_take(&t->arena, (size_t)gap, want, o);
	if (idx < 0)
		return (int)idx;
	rc = ckc_place_append(p, aoff, t->arena.frag[idx].len);
	if (rc) {
		arena_release(&t->arena, (size_t)idx);
		return rc;
	}
	if (p->nexts == 1)
		p->seq_in = p->seq_use = ++ckc_eng.seq;
	if (t->kind == TIER_HOST)
		o->grew |= ckc_host_used(t, aoff, want, have + want);
	else if (t->kind == TIER_GPU)
		ckc_peer_room();
	return 0;
}
