/* What a host-to-device copy of owed host memory may take from device
 * memory (the capture's copy in the gpu tier) instead of the host pages,
 * and the hold that copy keeps on the capture's parts until it is done. */
#include "config.h"

#include "owed.h"
#include "owed_int.h"
#include "owedtab.h"

/* ---- what a host-to-device copy may take from device memory ------------ */

bool ckc_owed_plan(uintptr_t s0, size_t n, ckc_owed_plan_t *pl)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || n == 0)
		return false;
	uintptr_t s1 = s0 + n, a = page_up(s0), b = page_down(s1);
	if (b <= a)
		return false;
	if (!ckc_owed_tab_lock())
		return false;
	ckc_owed_claims_wait(a, b);
	size_t i = ckc_owedtab_first(&ckc_owed_tab, a, b);
	bool ok = i < ckc_owed_tab.n;
	if (ok) {
		/* the owed pages of [a, b) must be one run of one capture */
		const ckc_owed_t *e = &ckc_owed_tab.e[i];
		uintptr_t lo = e->start > a ? e->start : a, hi = lo;
		size_t j = i;
		while (j < ckc_owed_tab.n && ckc_owed_tab.e[j].start < b && ckc_owed_tab.e[j].start == hi && ckc_owed_tab.e[j].ref == e->ref &&
		       ckc_owed_tab.e[j].cap_start == e->cap_start) {
			hi = ckc_owed_tab.e[j].end < b ? ckc_owed_tab.e[j].end : b;
			j++;
		}
		ok = j == ckc_owed_tab.n || ckc_owed_tab.e[j].start >= b;
		uintptr_t cap_end = e->cap_start + (uintptr_t)e->cap_len;
		uintptr_t ca = page_up(e->cap_start), cb = page_down(cap_end);
		/* every whole page of the capture inside [a, b) is still owed by
		 * it, and the copy lies within the capture: the whole copy can
		 * come from device memory if the partial pages are unchanged */
		pl->whole = ok && s0 >= e->cap_start && s1 <= cap_end && lo == (ca > a ? ca : a) &&
			    hi == (cb < b ? cb : b) && ckc_owed_edges_same(e);
		if (ok) {
			pl->e = *e;
			pl->lo = pl->whole ? s0 : lo;
			pl->hi = pl->whole ? s1 : hi;
			ckc_ref_get(e->ref);
			if (ckc_owed_ops && e->ready)
				ckc_owed_ops->event_get(e->ready);
			for (size_t k = i; k < j; k++)
				ckc_owed_part_used(&ckc_owed_tab.e[k]);
		}
	}
	ckc_owed_tab_unlock();
	return ok;
}

void ckc_owed_plan_done(ckc_owed_plan_t *pl, void *busy)
{
	if (busy && ckc_owed_tab_lock()) {
		/* the device copy reads [lo, hi) of the capture: its parts keep
		 * the gpu copy until it is done */
		size_t i;
		uintptr_t at = page_up(pl->lo);
		uintptr_t end = page_down(pl->hi);
		while (at < end && (i = ckc_owedtab_first(&ckc_owed_tab, at, end)) < ckc_owed_tab.n) {
			ckc_owed_t *e = &ckc_owed_tab.e[i];
			if (e->ref == pl->e.ref) {
				if (ckc_owed_ops && e->busy)
					ckc_owed_ops->event_put(e->busy);
				if (ckc_owed_ops)
					ckc_owed_ops->event_get(busy);
				e->busy = busy;
			}
			at = e->end;
		}
		ckc_owed_tab_unlock();
	}
	if (ckc_owed_ops && busy)
		ckc_owed_ops->event_put(busy);
	if (ckc_owed_ops && pl->e.ready)
		ckc_owed_ops->event_put(pl->e.ready);
	ckc_ref_put(pl->e.ref);
}
