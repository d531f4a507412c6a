/* Tagged write() and read() under device capture: a write of owed host
 * memory is attached from the gpu tier where it can be, and a tagged read
 * into host memory may leave its destination owed instead of filling it. */
#include "config.h"

#include <string.h>

#include "intercept.h"
#include "log.h"
#include "owed.h"
#include "owed_int.h"
#include "owedtab.h"
#include "ranges.h"

/* ---- tagged write() and read() under device capture ------------------- */

/* The first owed part overlapping [p, p+n), with a reference (and ready
 * event) of its own for the caller; whole: the capture's whole pages are
 * all still owed by it. */
static bool owed_first(uintptr_t p, size_t n, ckc_owed_t *out, bool *whole)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		return false;
	if (!ckc_owed_tab_lock())
		return false;
	ckc_owed_claims_wait(page_down(p), page_up(p + n));
	size_t i = ckc_owedtab_first(&ckc_owed_tab, p, p + n);
	bool found = i < ckc_owed_tab.n;
	if (found) {
		*out = ckc_owed_tab.e[i];
		uintptr_t ca = page_up(out->cap_start), cb = page_down(out->cap_start + (uintptr_t)out->cap_len);
		/* walk the capture's parts from its first page */
		size_t j = ckc_owedtab_first(&ckc_owed_tab, ca, cb);
		uintptr_t hi = ca;
		while (j < ckc_owed_tab.n && ckc_owed_tab.e[j].start == hi && ckc_owed_tab.e[j].ref == out->ref)
			hi = ckc_owed_tab.e[j++].end;
		*whole = hi == cb;
		for (size_t k = ckc_owedtab_first(&ckc_owed_tab, ca, cb); k < ckc_owed_tab.n && ckc_owed_tab.e[k].start < cb; k++)
			if (ckc_owed_tab.e[k].ref == out->ref)
				ckc_owed_part_used(&ckc_owed_tab.e[k]);
		ckc_ref_get(out->ref);
		if (ckc_owed_ops && out->ready)
			ckc_owed_ops->event_get(out->ready);
	}
	ckc_owed_tab_unlock();
	return found;
}

static void owed_put(ckc_owed_t *e)
{
	if (ckc_owed_ops && e->ready)
		ckc_owed_ops->event_put(e->ready);
	ckc_ref_put(e->ref);
}

static ssize_t host_part(ckc_handle_t *h, uintptr_t p, uintptr_t q, uint64_t off)
{
	size_t len = q - p;
	return len ? ckc_pwrite(h, (const void *)p, len, off) : 0;
}

static ssize_t owed_pwrite(ckc_handle_t *h, const void *buf, size_t n, uint64_t off);

/* The tagged read and write paths below, and fills, change the program's
 * page tables: the cache's background work (population and registration of
 * the host tier, which hold the address space's lock) gives way meanwhile
 * (ckc_prog_begin). */

ssize_t ckc_owed_pwrite(ckc_handle_t *h, const void *buf, size_t n, uint64_t off)
{
	uint64_t t0 = ckc_now_ns();
	ckc_prog_begin();
	ssize_t r = owed_pwrite(h, buf, n, off);
	ckc_prog_end();
	if (r != CKC_OWED_PASS)
		atomic_fetch_add(&ckc_owed_st.write_ns, ckc_now_ns() - t0);
	return r;
}

static ssize_t owed_pwrite(ckc_handle_t *h, const void *buf, size_t n, uint64_t off)
{
	uintptr_t p = (uintptr_t)buf, end = p + n;
	ckc_owed_t e;
	bool whole_owed;
	ssize_t r;

	if (!owed_first(p, n, &e, &whole_owed))
		return CKC_OWED_PASS;
	for (;;) {
		uint64_t at = off + (p - (uintptr_t)buf);
		uintptr_t first = e.start > p ? e.start : p;
		uintptr_t cap_end = e.cap_start + (uintptr_t)e.cap_len;
		/* the whole capture, every page of it still owed, inside the
		 * write: attached as it is */
		bool whole = whole_owed && e.cap_start >= p && cap_end <= end;
		uintptr_t from = whole ? e.cap_start : first;
		/* host bytes before the owed pages */
		if ((r = host_part(h, p, from, at)) < 0)
			goto fail;
		at += from - p;
		/* attaching a deferred capture waits for nothing: the cache
		 * reads its bytes only after it completed */
		if (ckc_owed_ops && e.ready && !(whole && e.ordered))
			ckc_owed_ops->event_wait(e.ready);
		if (whole) {
			/* the edge bytes are written again from host memory
			 * when the program changed them since the copy */
			bool same = ckc_owed_edges_same(&e);
			uintptr_t ca = page_up(e.cap_start), cb = page_down(cap_end);
			if (cb < ca)
				ca = cb = cap_end;
			r = ckc_pwrite_ref(h, e.ref, 0, (size_t)e.cap_len, at);
			if (r >= 0 && !same && (r = host_part(h, e.cap_start, ca, at)) >= 0)
				r = host_part(h, cb, cap_end, at + (cb - e.cap_start));
			p = cap_end;
		} else {
			uintptr_t q = e.end < end ? e.end : end;
			r = ckc_pwrite_ref(h, e.ref, first - e.cap_start, q - first, at);
			if (r == -ERANGE || r == -ENODEV) {
				/* not contiguous in device memory: from host bytes */
				ckc_owed_cut((void *)first, q - first, true);
				r = host_part(h, first, q, at);
			}
			p = q;
		}
		owed_put(&e);
		if (r < 0)
			return r;
		if (p >= end)
			return (ssize_t)n;
		if (!owed_first(p, end - p, &e, &whole_owed)) {
			r = host_part(h, p, end, off + (p - (uintptr_t)buf));
			return r < 0 ? r : (ssize_t)n;
		}
	}
fail:
	owed_put(&e);
	return r;
}

/* Set by cuda_capture.c: a host buffer may be owed from the gpu tier. */
bool (*ckc_owed_read_ok)(const void *buf, size_t n);

static ssize_t owed_pread(ckc_handle_t *h, void *buf, size_t n, uint64_t off, uintptr_t site);

ssize_t ckc_owed_pread(ckc_handle_t *h, void *buf, size_t n, uint64_t off, uintptr_t site)
{
	uint64_t t0 = ckc_now_ns();
	ckc_prog_begin();
	ssize_t r = owed_pread(h, buf, n, off, site);
	ckc_prog_end();
	if (r != CKC_OWED_PASS)
		atomic_fetch_add(&ckc_owed_st.read_ns, ckc_now_ns() - t0);
	return r;
}

static ssize_t owed_pread(ckc_handle_t *h, void *buf, size_t n, uint64_t off, uintptr_t site)
{
	uintptr_t p = (uintptr_t)buf;
	uintptr_t a = page_up(p), b;
	ckc_ref_t *ref;

	if (!ckc_owed_read_ok || !ckc_owed_read_ok(buf, n) || !ckc_owed_site_ok(site))
		return CKC_OWED_PASS;
	int kind = ckc_cuda_mem_kind(buf);
	bool pinned = kind == CKC_MEM_PINNED || kind == CKC_MEM_REGISTERED;
	uint64_t t0 = ckc_now_ns();
	ssize_t len = ckc_pread_ref(h, off, n, &ref);
	uint64_t t1 = ckc_now_ns();
	atomic_fetch_add(&ckc_owed_st.read_engine_ns, t1 - t0);
	if (len <= 0)
		return len < 0 ? len : CKC_OWED_PASS;
	b = page_down(p + (size_t)len);
	if (b <= a) {
		ckc_ref_put(ref);
		return CKC_OWED_PASS;
	}
	/* the partial pages: filled where owed, then the read's bytes */
	ckc_owed_edges_fill(p, (size_t)len);
	int rc = ckc_ref_fill(ref, 0, buf, a - p);
	if (!rc)
		rc = ckc_ref_fill(ref, b - p, (void *)b, p + (size_t)len - b);
	if (!rc)
		rc = ckc_owed_add_len(a, b, p, (uint64_t)len, ref, pinned, NULL, false, site);
	atomic_fetch_add(&ckc_owed_st.read_owe_ns, ckc_now_ns() - t1);
	if (rc) {
		/* bytes, then (the pages are accessible again) */
		ckc_owed_cut((void *)a, b - a, false);
		rc = ckc_ref_fill(ref, a - p, (void *)a, b - a);
		ckc_ref_put(ref);
		return rc ? rc : len;
	}
	return len;
}