/* The gpu tier's side of the engine: device captures written as checkpoints, their restores by device copy, the owed host ranges, evacuation at exit. */
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
#include "peer.h"
#include "memlimit.h"
#include "path.h"
#include "state.h"
#include "sys.h"

/* ---- the gpu tier: device captures and owed host ranges ------------- */

/* An object outside the map holding device bytes the program's host
 * memory owes. Lock held. */
static ckc_obj_t *anon_new(void)
{
	ckc_obj_t *o = eng_obj_alloc("(device capture)");
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
	ckc_ref_t *r = sys_calloc(1, sizeof(*r));
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
void eng_ref_detach(ckc_obj_t *o)
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

/* Places capture c (need bytes) in memory a peer lent, borrowing more
 * (a bounded wait, without the lock) when none has room. Lock held. */
static int capture_in_lent(ckc_obj_t *c, uint64_t need)
{
	int reg[CKC_GPU_MAXDEV];
	int n = ckc_gpu_lent_regions(reg, CKC_GPU_MAXDEV);
	for (int i = 0; i < n; i++) {
		c->greg1 = reg[i];
		int rc = ckc_place_reserve(c, 0, need, CKC_ALLOC_PREFETCH, 0);
		c->greg1 = 0;
		if (rc == 0) {
			ckc_lend_placed(need);
			return 0;
		}
	}
	return -EAGAIN;
}

static int capture_on_peers(ckc_obj_t *c, uint64_t need)
{
	if (capture_in_lent(c, need) == 0)
		return 0;
	if (!ckc_lend_may_borrow())
		return -EAGAIN;
	eng_unlock();
	bool got = ckc_lend_borrow(need, CKC_PEER_BORROW_WAIT_S);
	ckc_mutex_lock(&ckc_eng.lock);
	if (!got || !ckc_eng.active)
		return -EAGAIN;
	return capture_in_lent(c, need);
}

int ckc_capture_begin(size_t len, unsigned skew, int device, ckc_ref_t **ref, uint64_t *dptr)
{
	int rc;

	if (len == 0 || skew >= CKC_ALIGN)
		return -EINVAL;
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_tier_t *t = &ckc_eng.tier[0];
	if (!ckc_eng.active || t->kind != TIER_GPU || !ckc_gpu_usable(t)) {
		eng_unlock();
		return -ENODEV;
	}
	ckc_obj_t *c = anon_new();
	ckc_ref_t *r = c ? ref_new(c, 0) : NULL;
	if (!r) {
		if (c) {
			sys_free(c->key);
			sys_free(c);
		}
		eng_unlock();
		return -ENOMEM;
	}
	/* the capture must not wait for room: a full tier means the copy
	 * goes to the host as the program asked */
	ckc_set_state(c, 0, LC_EV_WRITE_BEGIN);
	c->gdev1 = device + 1;
	c->retired = false;
	rc = ckc_place_reserve(c, 0, (uint64_t)skew + len, CKC_ALLOC_PREFETCH, 0);
	/* what does not fit goes to the node's other devices (lent memory),
	 * else to the host */
	bool miss = rc == -EAGAIN || rc == -ENOSPC;
	ckc_peer_remainder(miss ? len : 0);
	if (miss)
		rc = capture_on_peers(c, (uint64_t)skew + len);
	c->retired = true;
	if (rc) {
		eng_unlock();
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
	eng_unlock();
	return 0;
}

void ckc_ref_get(ckc_ref_t *r)
{
	ckc_mutex_lock(&ckc_eng.lock);
	r->refs++;
	eng_unlock();
}

void ckc_ref_put(ckc_ref_t *r)
{
	ckc_mutex_lock(&ckc_eng.lock);
	if (--r->refs > 0) {
		eng_unlock();
		return;
	}
	ckc_obj_t *o = r->o;
	for (ckc_ref_t **pp = &o->gref; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	sys_free(r);
	if (!o->gref && ckc_obj_gone(o) && !o->capture && o->place[0].pins == 0 &&
	    o->place[0].state != LC_INIT) {
		ckc_place_free(o, 0);
		ckc_set_state(o, 0, LC_EV_DROP);
	}
	ckc_obj_put(o);
	/* its copy may be evicted now */
	ckc_prefetch_kick();
	eng_signal(EC_ROOM);
	eng_unlock();
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
	ckc_mutex_lock(&ckc_eng.lock);
	int rc = ref_addr_locked(r, roff, len, dptr);
	eng_unlock();
	return rc;
}

int ckc_ref_fill(ckc_ref_t *r, uint64_t roff, void *buf, size_t len)
{
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_src_t src;
	ckc_obj_t *o = r->o;
	int rc = ckc_src_snapshot(o, 0, &src);
	eng_unlock();
	/* the references keep the copy where it is */
	if (!rc)
		rc = ckc_src_read(&src, r->base + roff, buf, len, NULL);
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_src_release(&src);
	eng_unlock();
	return rc;
}

int ckc_ref_fill_dma(ckc_ref_t *r, uint64_t roff, void *buf, size_t len)
{
	ckc_tier_t *t = &ckc_eng.tier[0];
	ckc_ext_t seg[16];
	char *dst = buf;
	int rc = 0;

	while (!rc && len > 0) {
		ckc_mutex_lock(&ckc_eng.lock);
		int n = t->kind == TIER_GPU ? ckc_place_segments(&r->o->place[0], r->base + roff, len, seg, 16) :
					      -ENODEV;
		eng_unlock();
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
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_obj_t *o = h->o, *c = r->o;
	ckc_tier_t *t = &ckc_eng.tier[0];
	eng_wait_idle(o, EB_MOVE);
	if (o->handed) {
		eng_unlock();
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
			eng_unlock();
			return (ssize_t)len;
		}
	}
	uint64_t dsrc;
	int rc = ref_addr_locked(r, roff, len, &dsrc);
	if (!rc)
		ckc_eng.st.cap_copied_in++;
	eng_unlock();
	if (rc)
		return rc;
	/* the reference keeps the source where it is */
	return eng_pwrite_src(h, NULL, dsrc, len, off);
}

ssize_t ckc_pread_ref(ckc_handle_t *h, uint64_t off, size_t len, ckc_ref_t **ref)
{
	ckc_obj_t *o = h->o;
	uint64_t t0 = ckc_now_ns();

	ckc_mutex_lock(&ckc_eng.lock);
	/* a prefetch into the gpu tier in flight is worth waiting for, a
	 * while (then the read is served from below) */
	uint64_t deadline = 0;
	while (o->migrating || (o->place[0].state == LC_READ_IN_PROGRESS && eng_prefetch_wait(h, &deadline))) {
		if (o->migrating)
			eng_wait(EC_MOVED);
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
	eng_range_add(h, off, off + len);
	ckc_trace("read-ref", o, off, len, 0, t0);
	*ref = r;
	rc = (ssize_t)len;
out:
	eng_unlock();
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
	return eng_migrate_down(o) == 0;
}

static bool evac_drop(ckc_obj_t *o)
{
	ckc_place_t *p = &o->place[0];
	if (p->state == LC_INIT || p->pins > 0)
		return false;
	if (!ckc_lower_has(o, 0) && o->complete && ckc_persist_wanted(o))
		ckc_error("checkpoint %s: its only copy was in device memory at exit", o->key);
	if (o->gref)
		eng_ref_detach(o);
	else
		ckc_place_free(o, 0);
	ckc_set_state(o, 0, LC_EV_DROP);
	return false;
}

void ckc_gpu_evacuate(void)
{
	ckc_mutex_lock(&ckc_eng.lock);
	ckc_tier_t *t = &ckc_eng.tier[0];
	if (!ckc_eng.active || t->kind != TIER_GPU) {
		eng_unlock();
		return;
	}
	/* nothing new comes in */
	if (t->gpu)
		t->gpu->usable = false;
	map_walk(evac_writer);
	/* what must survive is flushed down by the gpu edge's flusher */
	if (ckc_eng.cfg.persist != CKC_PERSIST_NEVER)
		while (ckc_edge_busy(&ckc_eng.edge[0]))
			eng_wait(EC_FLUSHED);
	for (;;) {
		bool pinned = false;
		for (size_t i = 0; i < ckc_eng.map_cap; i++)
			for (ckc_obj_t *o = ckc_eng.map[i]; o; o = o->hnext)
				pinned |= o->place[0].pins > 0;
		if (!pinned)
			break;
		eng_wait(EC_PINS);
	}
	map_walk(evac_drop);
	eng_unlock();
}
