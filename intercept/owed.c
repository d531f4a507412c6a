/* Owed host ranges of device capture (CKPTCACHE_CAPTURE=device). A captured
 * device-to-host copy, or a tagged read answered from the gpu tier, leaves
 * the program's host pages unfilled: the whole pages of the destination are
 * protected (PROT_NONE) and recorded here with a reference to the device
 * bytes that belong there. The first CPU touch faults and fills them: fresh
 * pages filled from the device and moved into place with mremap for
 * pageable memory (no thread can see a half-filled page), a DMA into the
 * still-protected pages for pinned memory, then the protection is lifted.
 * The pages of a large pageable range are moved out of the way while it is
 * owed, so that protecting it costs the kernel next to nothing (see
 * pages_park).
 * Every call that hands such memory to the kernel or the driver (write of
 * an untagged fd, send, recv, the CUDA copies the cache does not turn into
 * device copies, fork) fills it first; free, munmap and madvise(DONTNEED)
 * drop it. Pure table logic lives in src/owedtab.c. */
#include "config.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "intercept.h"
#include "log.h"
#include "owed.h"
#include "owedtab.h"
#include "ranges.h"

atomic_size_t ckc_owed_count;
ckc_owed_stats_t ckc_owed_st;

static ckc_owedtab_t tab;
static pthread_mutex_t tab_mutex = PTHREAD_MUTEX_INITIALIZER;
/* This thread holds the table: whatever it calls (free, realloc, munmap
 * of its own memory) must not come back for it. */
static __thread bool tab_held;

static bool tab_lock(void)
{
	if (tab_held)
		return false;
	pthread_mutex_lock(&tab_mutex);
	tab_held = true;
	return true;
}

static void tab_unlock(void)
{
	tab_held = false;
	pthread_mutex_unlock(&tab_mutex);
}
static atomic_bool segv_installed;
static struct sigaction segv_prev;
static pthread_mutex_t segv_lock = PTHREAD_MUTEX_INITIALIZER;

/* Ranges filled lately: a thread that faulted on a page another thread
 * was filling finds it here and retries the access. */
#define RECENT 16
static struct {
	_Atomic uintptr_t start, end;
} recent[RECENT];
static atomic_uint recent_next;

static const ckc_owed_ops_t *ops;

/* The pages a prepare found owed exactly as the next entry will be: still
 * protected, so the add needs no mprotect (a staging buffer reused); and
 * where they are parked. */
static __thread uintptr_t same_pages;
static __thread intptr_t same_park;

void ckc_owed_set_ops(const ckc_owed_ops_t *o)
{
	ops = o;
}

uintptr_t ckc_page_size(void)
{
	static uintptr_t ps;
	if (!ps)
		ps = (uintptr_t)sysconf(_SC_PAGESIZE);
	return ps;
}

/* ---- the pages of owed pageable ranges ---------------------------------
 * Changing the protection of populated pages costs the kernel about 30 ns
 * a page: 1 ms for a 128 MiB staging buffer, on the program's copy. The
 * bytes of an owed range's pages are never read again (a fill replaces
 * them, a drop means they are to be overwritten or discarded), so a new
 * owed range of pageable memory first has its pages moved out, whole page
 * tables at a time, to a spare place aligned alike: they are "parked", and
 * the range stays mapped, empty (mremap with MREMAP_DONTUNMAP, Linux 5.7).
 * Its protection then has no page to change. A fill writes the parked
 * pages and moves them back; a drop moves them back as they are. Pinned
 * memory (the driver holds its pages), small ranges and mappings that
 * cannot be moved are protected in place. */
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#define PARK_ALIGN ((uintptr_t)2 << 20) /* what one page table maps */
#define PARK_MIN (2 * PARK_ALIGN)

/* Moves the pages of [a, b) out; returns where they went, as an offset
 * from a, or 0 when they stay. */
static intptr_t pages_park(uintptr_t a, uintptr_t b)
{
	size_t len = b - a, span = len + PARK_ALIGN;
	if (len < PARK_MIN || !REAL(mremap) || !REAL(munmap))
		return 0;
	char *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return 0;
	/* the same offset within a page table: the kernel moves whole ones */
	char *to = r + ((a - (uintptr_t)r) & (PARK_ALIGN - 1));
	if (REAL(mremap)((void *)a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to) ==
	    MAP_FAILED) {
		REAL(munmap)(r, span);
		return 0;
	}
	if (to > r)
		REAL(munmap)(r, (size_t)(to - r));
	if (r + span > to + len)
		REAL(munmap)(to + len, (size_t)(r + span - (to + len)));
	return (intptr_t)((uintptr_t)to - a);
}

/* Moves the parked pages of [a, b) back in place, readable and writable. */
static int pages_unpark(uintptr_t a, uintptr_t b, intptr_t park)
{
	size_t len = b - a;
	void *at = (void *)(a + (uintptr_t)park);
	if (REAL(mremap)(at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)a) != MAP_FAILED)
		return 0;
	int rc = -errno;
	REAL(munmap)(at, len);
	mprotect((void *)a, len, PROT_READ | PROT_WRITE);
	return rc;
}

/* ---- filling and dropping one entry (table lock held) ----------------- */

static void entry_release(ckc_owed_t *e)
{
	if (ops && e->busy)
		ops->event_wait(e->busy);
	if (ops && e->busy)
		ops->event_put(e->busy);
	if (ops && e->ready)
		ops->event_put(e->ready);
	if (e->ref)
		ckc_ref_put(e->ref);
	e->ref = NULL;
	e->busy = e->ready = NULL;
}

/* Fills [a, b) of e (page aligned, inside e) and lifts its protection. */
static int entry_fill(ckc_owed_t *e, uintptr_t a, uintptr_t b)
{
	uint64_t t0 = ckc_now_ns();
	size_t len = b - a;
	uint64_t roff = a - e->cap_start;
	int rc;

	if (ops && e->ready)
		ops->event_wait(e->ready);
	if (e->pinned) {
		/* DMA lands in protected pinned pages */
		rc = ckc_ref_fill(e->ref, roff, (void *)a, len);
		if (!rc && mprotect((void *)a, len, PROT_READ | PROT_WRITE) != 0)
			rc = -errno;
	} else if (e->park) {
		/* the parked pages take the bytes and move back */
		rc = ckc_ref_fill(e->ref, roff, (void *)(a + (uintptr_t)e->park), len);
		int back = pages_unpark(a, b, e->park);
		if (!rc)
			rc = back;
	} else {
		void *fresh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (fresh == MAP_FAILED)
			return -errno;
#ifdef MADV_POPULATE_WRITE
		(void)madvise(fresh, len, MADV_POPULATE_WRITE);
#endif
		rc = ckc_ref_fill(e->ref, roff, fresh, len);
		if (!rc && mremap(fresh, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)a) == MAP_FAILED)
			rc = -errno;
		if (rc)
			munmap(fresh, len);
	}
	if (rc) {
		ckc_error("device capture: %zu bytes at %p could not be filled from device memory (%s)",
			  len, (void *)a, strerror(-rc));
		/* never leave the program faulting forever */
		mprotect((void *)a, len, PROT_READ | PROT_WRITE);
		if (ckc_strict())
			abort();
	}
	unsigned k = atomic_fetch_add(&recent_next, 1) % RECENT;
	atomic_store(&recent[k].start, a);
	atomic_store(&recent[k].end, b);
	ckc_owed_st.filled++;
	atomic_fetch_add(&ckc_owed_st.fill_ns, ckc_now_ns() - t0);
	return rc;
}

static int entry_drop(ckc_owed_t *e, uintptr_t a, uintptr_t b)
{
	ckc_owed_st.dropped++;
	if (e->park)
		return pages_unpark(a, b, e->park);
	return mprotect((void *)a, b - a, PROT_READ | PROT_WRITE) == 0 ? 0 : -errno;
}

/* The part [a, b) of every entry overlapping [lo, hi) is filled (fill) or
 * dropped; what lies outside stays owed. Table lock held. */
/* Takes [a, b) out of entry i; *a and *b widen to the whole entry when
 * the table cannot split it. Returns the entry as it was. */
static ckc_owed_t take_locked(size_t i, uintptr_t *a, uintptr_t *b)
{
	ckc_owed_t e = tab.e[i];
	int kept = ckc_owedtab_cut(&tab, i, *a, *b);
	if (kept < 0) {
		*a = e.start;
		*b = e.end;
		ckc_owedtab_remove(&tab, i);
		kept = 0;
	}
	/* the remainders keep their own references */
	for (int k = 0; k < kept; k++) {
		ckc_ref_get(e.ref);
		if (ops && e.ready)
			ops->event_get(e.ready);
		if (ops && e.busy)
			ops->event_get(e.busy);
	}
	return e;
}

static void cut_locked(uintptr_t lo, uintptr_t hi, bool fill)
{
	size_t i;

	while ((i = ckc_owedtab_first(&tab, lo, hi)) < tab.n) {
		uintptr_t a = tab.e[i].start > lo ? tab.e[i].start : lo;
		uintptr_t b = tab.e[i].end < hi ? tab.e[i].end : hi;
		ckc_owed_t e = take_locked(i, &a, &b);
		if (fill)
			entry_fill(&e, a, b);
		else
			entry_drop(&e, a, b);
		entry_release(&e);
	}
	atomic_store(&ckc_owed_count, tab.n);
}

void ckc_owed_cut(const void *p, size_t n, bool fill)
{
	ckc_owed_cut_addr((uintptr_t)p, n, fill);
}

void ckc_owed_cut_addr(uintptr_t p, size_t n, bool fill)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || n == 0)
		return;
	uintptr_t ps = ckc_page_size();
	uintptr_t lo = p & ~(ps - 1);
	uintptr_t hi = (p + n + ps - 1) & ~(ps - 1);
	if (hi < lo)
		hi = UINTPTR_MAX & ~(ps - 1);
	if (!tab_lock())
		return;
	cut_locked(lo, hi, fill);
	tab_unlock();
}

void ckc_owed_fill_all(void)
{
	if (!atomic_load(&ckc_owed_count))
		return;
	if (!tab_lock())
		return;
	cut_locked(0, UINTPTR_MAX, true);
	tab_unlock();
}

/* ---- the fault handler ---------------------------------------------- */

static bool recent_has(uintptr_t a)
{
	for (int k = 0; k < RECENT; k++)
		if (a >= atomic_load(&recent[k].start) && a < atomic_load(&recent[k].end))
			return true;
	return false;
}

static void segv_chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction prev;
	pthread_mutex_lock(&segv_lock);
	prev = segv_prev;
	pthread_mutex_unlock(&segv_lock);
	if (prev.sa_flags & SA_SIGINFO) {
		prev.sa_sigaction(sig, si, uc);
	} else if (prev.sa_handler == SIG_IGN) {
		return;
	} else if (prev.sa_handler == SIG_DFL) {
		/* the access faults again and the default action happens */
		signal(sig, SIG_DFL);
	} else {
		prev.sa_handler(sig);
	}
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	uintptr_t a = (uintptr_t)si->si_addr;

	if (si->si_code == SEGV_ACCERR && atomic_load(&ckc_owed_count)) {
		ckc_enter();
		if (!tab_lock())
			goto chain;
		size_t i = ckc_owedtab_first(&tab, a, a + 1);
		bool ours = i < tab.n;
		if (ours) {
			/* the whole range: a program that reads a staging buffer
			 * reads all of it */
			ckc_owed_t e = tab.e[i];
			cut_locked(e.start, e.end, true);
		}
		tab_unlock();
		ckc_leave();
		if (ours || recent_has(a)) {
			errno = saved;
			return;
		}
	} else if (si->si_code == SEGV_ACCERR && recent_has(a)) {
		errno = saved;
		return;
	}
	if (0) {
chain:
		ckc_leave();
	}
	segv_chain(sig, si, uc);
	errno = saved;
}

static int segv_install(void)
{
	if (atomic_load(&segv_installed))
		return 0;
	pthread_mutex_lock(&segv_lock);
	int rc = 0;
	if (!atomic_load(&segv_installed)) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = segv_handler;
		sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		if (ckc_real_sigaction(SIGSEGV, &sa, &segv_prev) == 0)
			atomic_store(&segv_installed, true);
		else
			rc = -errno;
	}
	pthread_mutex_unlock(&segv_lock);
	return rc;
}

/* The program's own SIGSEGV handler runs behind ours. */
int ckc_owed_sigaction(const struct sigaction *act, struct sigaction *old)
{
	if (!atomic_load(&segv_installed))
		return 1;
	pthread_mutex_lock(&segv_lock);
	if (old)
		*old = segv_prev;
	if (act)
		segv_prev = *act;
	pthread_mutex_unlock(&segv_lock);
	return 0;
}

/* ---- new owed ranges -------------------------------------------------- */

/* Pages of [dst, dst+n) are about to receive new bytes from a real copy
 * (edges) or to be owed anew (interior [a, b)): owed pages outside the
 * interior are filled (a copy writes part of them), those inside dropped
 * without lifting their protection when it is put back at once. */
bool ckc_owed_prepare(uintptr_t dst, size_t n, uintptr_t a, uintptr_t b)
{
	bool inside = false;
	same_pages = 0;
	same_park = 0;
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		return false;
	uintptr_t ps = ckc_page_size();
	uintptr_t lo = dst & ~(ps - 1), hi = (dst + n + ps - 1) & ~(ps - 1);
	if (!tab_lock())
		return false;
	if (lo < a)
		cut_locked(lo, a, true);
	if (b < hi)
		cut_locked(b, hi, true);
	/* the interior: entries fully inside are released as they are (the
	 * pages stay protected); parts of entries reaching outside are cut */
	size_t i;
	while (a < b && (i = ckc_owedtab_first(&tab, a, b)) < tab.n) {
		uintptr_t x = tab.e[i].start > a ? tab.e[i].start : a;
		uintptr_t y = tab.e[i].end < b ? tab.e[i].end : b;
		ckc_owed_t e = take_locked(i, &x, &y);
		if (x < a || y > b) {
			/* could not split: what lies outside is filled */
			entry_fill(&e, x, y);
		} else if (x == a && y == b && e.start == a && e.end == b) {
			same_pages = a;
			same_park = e.park;
		} else if (e.park) {
			pages_unpark(x, y, e.park);
		}
		ckc_owed_st.dropped++;
		entry_release(&e);
		inside = true;
	}
	atomic_store(&ckc_owed_count, tab.n);
	tab_unlock();
	return inside;
}

void ckc_owed_will_write(const void *p, size_t n)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || !p || !n)
		return;
	uintptr_t ps = ckc_page_size(), d = (uintptr_t)p;
	uintptr_t a = (d + ps - 1) & ~(ps - 1), b = (d + n) & ~(ps - 1);
	if (b <= a)
		ckc_owed_cut(p, n, true);
	else if (ckc_owed_prepare(d, n, a, b))
		ckc_owed_unprotect(a, b);
	same_pages = 0;
	same_park = 0;
}

void ckc_owed_unprotect(uintptr_t a, uintptr_t b)
{
	if (same_pages == a && same_park)
		pages_unpark(a, b, same_park);
	else
		mprotect((void *)a, b - a, PROT_READ | PROT_WRITE);
	same_pages = 0;
	same_park = 0;
}

/* Two independent 64-bit sums of the edges of a range: the bytes of
 * [cap_start, a) and [b, cap_start + cap_len). */
static void edges_sum(uintptr_t cap_start, uint64_t cap_len, uintptr_t a, uintptr_t b,
		      uint64_t out[2])
{
	uint64_t h1 = 0x9e3779b97f4a7c15ull, h2 = 0xc2b2ae3d27d4eb4full;
	const unsigned char *spans[2] = { (const unsigned char *)cap_start, (const unsigned char *)b };
	size_t lens[2] = { a > cap_start ? a - cap_start : 0,
			   cap_start + cap_len > b ? cap_start + cap_len - b : 0 };
	for (int k = 0; k < 2; k++) {
		const unsigned char *q = spans[k];
		size_t n = lens[k], i = 0;
		for (; i + 8 <= n; i += 8) {
			uint64_t w;
			memcpy(&w, q + i, 8);
			h1 = (h1 ^ w) * 0x100000001b3ull;
			h1 ^= h1 >> 32;
			h2 = (h2 + w + 1) * 0xff51afd7ed558ccdull;
			h2 ^= h2 >> 29;
		}
		for (; i < n; i++) {
			h1 = (h1 ^ q[i]) * 0x100000001b3ull;
			h2 = (h2 + q[i] + 1) * 0xff51afd7ed558ccdull;
			h2 ^= h2 >> 29;
		}
		h1 ^= n;
		h2 += n;
	}
	out[0] = h1;
	out[1] = h2;
}

bool ckc_owed_edges_same(const ckc_owed_t *e)
{
	uint64_t now[2];
	if (!e->edges_ok)
		return false;
	edges_sum(e->cap_start, e->cap_len, e->start, e->end, now);
	return now[0] == e->edge_sum[0] && now[1] == e->edge_sum[1];
}

int ckc_owed_add_len(uintptr_t a, uintptr_t b, uintptr_t cap_start, uint64_t cap_len,
		     ckc_ref_t *ref, bool pinned, void *ready, bool ordered)
{
	/* pages still protected (or parked) from the entry a prepare
	 * released stay so */
	bool same = same_pages == a && a != 0;
	intptr_t park = same ? same_park : 0;
	same_pages = 0;
	same_park = 0;
	int rc = segv_install();
	if (!rc && !same) {
		if (!pinned)
			park = pages_park(a, b);
		if (mprotect((void *)a, b - a, PROT_NONE) != 0)
			rc = -errno;
	}
	if (rc) {
		if (park)
			pages_unpark(a, b, park);
		return rc;
	}
	ckc_owed_t e = { .start = a, .end = b, .cap_start = cap_start, .cap_len = cap_len, .ref = ref,
			 .pinned = pinned, .ready = ready, .ordered = ordered, .park = park };
	/* the edges hold their final bytes unless a copy into them is still
	 * in flight (ready, not ordered) */
	if (!ready || ordered) {
		edges_sum(cap_start, cap_len, a, b, e.edge_sum);
		e.edges_ok = true;
	}
	if (!tab_lock()) {
		rc = -EDEADLK;
	} else {
		rc = ckc_owedtab_insert(&tab, &e);
		atomic_store(&ckc_owed_count, tab.n);
		tab_unlock();
	}
	if (rc && park)
		pages_unpark(a, b, park);
	else if (rc)
		mprotect((void *)a, b - a, PROT_READ | PROT_WRITE);
	return rc;
}

/* ---- lookups for write() and host-to-device copies --------------------- */

bool ckc_owed_find(uintptr_t p, size_t n, ckc_owed_t *out)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		return false;
	if (!tab_lock())
		return false;
	size_t i = ckc_owedtab_first(&tab, p, p + n);
	bool found = i < tab.n;
	if (found) {
		*out = tab.e[i];
		ckc_ref_get(out->ref);
		if (ops && out->ready)
			ops->event_get(out->ready);
	}
	tab_unlock();
	return found;
}

void ckc_owed_found_put(ckc_owed_t *e)
{
	if (ops && e->ready)
		ops->event_put(e->ready);
	ckc_ref_put(e->ref);
}

/* Marks the entry holding [a, b) as read by a device copy not yet done:
 * its reference is released only once ev has completed. */
void ckc_owed_set_busy(uintptr_t a, void *ev)
{
	if (!tab_lock())
		return (void)(ops && ev ? (ops->event_put(ev), 0) : 0);
	size_t i = ckc_owedtab_first(&tab, a, a + 1);
	if (i < tab.n) {
		ckc_owed_t *e = &tab.e[i];
		if (ops && e->busy)
			ops->event_put(e->busy);
		e->busy = ev;
	} else if (ops && ev) {
		ops->event_put(ev);
	}
	tab_unlock();
}

/* ---- tagged write() and read() under device capture ------------------- */

static ssize_t host_part(ckc_handle_t *h, uintptr_t p, uintptr_t q, uint64_t off)
{
	size_t len = q - p;
	return len ? ckc_pwrite(h, (const void *)p, len, off) : 0;
}

static ssize_t owed_pwrite(ckc_handle_t *h, const void *buf, size_t n, uint64_t off);

ssize_t ckc_owed_pwrite(ckc_handle_t *h, const void *buf, size_t n, uint64_t off)
{
	uint64_t t0 = ckc_now_ns();
	ssize_t r = owed_pwrite(h, buf, n, off);
	if (r != CKC_OWED_PASS)
		atomic_fetch_add(&ckc_owed_st.write_ns, ckc_now_ns() - t0);
	return r;
}

static ssize_t owed_pwrite(ckc_handle_t *h, const void *buf, size_t n, uint64_t off)
{
	uintptr_t p = (uintptr_t)buf, end = p + n;
	ckc_owed_t e;
	ssize_t r;

	if (!ckc_owed_find(p, n, &e))
		return CKC_OWED_PASS;
	for (;;) {
		uint64_t at = off + (p - (uintptr_t)buf);
		/* host bytes before the owed pages */
		uintptr_t first = e.start > p ? e.start : p;
		uintptr_t cap_end = e.cap_start + (uintptr_t)e.cap_len;
		bool whole = e.cap_start >= p && cap_end <= end && e.cap_start <= e.start &&
			     cap_end >= e.end;
		uintptr_t from = whole ? e.cap_start : first;
		if ((r = host_part(h, p, from, at)) < 0)
			goto fail;
		at += from - p;
		/* attaching a deferred capture waits for nothing: the cache
		 * reads its bytes only after it completed */
		if (ops && e.ready && !(whole && e.ordered))
			ops->event_wait(e.ready);
		if (whole) {
			/* the whole capture, edges included: attached to the
			 * object when it lands at its end; the edge bytes are
			 * then written again from host memory, which the
			 * program may have changed since the copy */
			bool same = ckc_owed_edges_same(&e);
			r = ckc_pwrite_ref(h, e.ref, 0, (size_t)e.cap_len, at);
			if (r >= 0 && !same && (r = host_part(h, e.cap_start, e.start, at)) >= 0)
				r = host_part(h, e.end, cap_end, at + (e.end - e.cap_start));
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
		ckc_owed_found_put(&e);
		if (r < 0)
			return r;
		if (p >= end)
			return (ssize_t)n;
		if (!ckc_owed_find(p, end - p, &e)) {
			r = host_part(h, p, end, off + (p - (uintptr_t)buf));
			return r < 0 ? r : (ssize_t)n;
		}
	}
fail:
	ckc_owed_found_put(&e);
	return r;
}

/* Set by cuda.c: a host buffer may be owed from the gpu tier. */
bool (*ckc_owed_read_ok)(const void *buf, size_t n);

static ssize_t owed_pread(ckc_handle_t *h, void *buf, size_t n, uint64_t off);

ssize_t ckc_owed_pread(ckc_handle_t *h, void *buf, size_t n, uint64_t off)
{
	uint64_t t0 = ckc_now_ns();
	ssize_t r = owed_pread(h, buf, n, off);
	if (r != CKC_OWED_PASS)
		atomic_fetch_add(&ckc_owed_st.read_ns, ckc_now_ns() - t0);
	return r;
}

static ssize_t owed_pread(ckc_handle_t *h, void *buf, size_t n, uint64_t off)
{
	uintptr_t ps = ckc_page_size();
	uintptr_t p = (uintptr_t)buf;
	uintptr_t a = (p + ps - 1) & ~(ps - 1), b;
	ckc_ref_t *ref;
	bool pinned;

	if (!ckc_owed_read_ok || !ckc_owed_read_ok(buf, n))
		return CKC_OWED_PASS;
	int kind = ckc_cuda_mem_kind(buf);
	pinned = kind == CKC_MEM_PINNED || kind == CKC_MEM_REGISTERED;
	ssize_t len = ckc_pread_ref(h, off, n, &ref);
	if (len <= 0)
		return len < 0 ? len : CKC_OWED_PASS;
	b = (p + (size_t)len) & ~(ps - 1);
	if (b <= a) {
		ckc_ref_put(ref);
		return CKC_OWED_PASS;
	}
	ckc_owed_prepare(p, (size_t)len, a, b);
	int rc = ckc_ref_fill(ref, 0, buf, a - p);
	if (!rc)
		rc = ckc_ref_fill(ref, b - p, (void *)b, p + (size_t)len - b);
	if (!rc)
		rc = ckc_owed_add_len(a, b, p, (uint64_t)len, ref, pinned, NULL, false);
	if (rc) {
		/* bytes, then */
		ckc_owed_unprotect(a, b);
		rc = ckc_ref_fill(ref, a - p, (void *)a, b - a);
		ckc_ref_put(ref);
		return rc ? rc : len;
	}
	return len;
}
