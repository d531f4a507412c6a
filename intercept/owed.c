/* Owed host ranges of device capture (CKPTCACHE_CAPTURE=device). A captured
 * device-to-host copy, or a tagged read answered from the gpu tier, leaves
 * the whole pages of the program's host destination unfilled: they are
 * protected (PROT_NONE) and recorded here with a reference to the device
 * bytes that belong there. The first CPU touch faults and fills them; every
 * call that hands such memory to the kernel or the driver (an untagged
 * write, send, recv, the CUDA copies the cache does not turn into device
 * copies, fork) fills it first; free, munmap and madvise(DONTNEED) drop it.
 *
 * Each page of an entry is in one of two places, which the entry records:
 * protected in place, or "parked" (its frame moved out of the way at
 * address + park, see pages_park). Every operation works on parts of
 * entries and moves each part's pages back from where that part says they
 * are; owing a page that is owed already only changes the table (the page
 * stays protected where it is). The fault handler cannot loop: a page of
 * ours that faults again right after being let through is made accessible
 * as it is and reported with a backtrace; a fault that is not ours goes to
 * the program's handler or to the default action. Pure table logic lives
 * in src/owedtab.c.
 *
 * This file owns the table, its lock, parked pages, the fill and drop of
 * an entry's parts, the claims of fills under way and new owed ranges; what
 * a host-to-device copy may take from device memory is owed_plan.c's, what
 * owing pays by call site is owed_site.c's, the fault handler
 * owed_fault.c's, tagged write() and read() owed_io.c's. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backtrace.h"
#include "intercept.h"
#include "log.h"
#include "owed.h"
#include "owed_int.h"
#include "owedtab.h"
#include "ranges.h"

CKC_HOT_DATA atomic_size_t ckc_owed_count;
ckc_owed_stats_t ckc_owed_st;

ckc_owedtab_t ckc_owed_tab;
static ckc_mutex_t tab_mutex = CKC_MUTEX_INIT(OWED);
CKC_LOCKS_AT_START(tab_mutex, ckc_locks_add, &tab_mutex)
/* This thread holds the table: whatever it calls (free, realloc, munmap
 * of its own memory) must not come back for it. */
__thread CKC_TLS_IE bool ckc_owed_tab_held;
/* The host range this thread's fill is writing (a fault there comes from
 * the fill itself). */
__thread CKC_TLS_IE uintptr_t ckc_owed_filling_lo, ckc_owed_filling_hi;

/* ---- claims -------------------------------------------------------------
 * A fill moves device bytes into host pages (a millisecond per megabyte or
 * so) and a drop may wait for a device copy that reads them: neither runs
 * under the table lock. The thread that takes the parts of [lo, hi) out of
 * the table claims that range first and lets the lock go while it fills
 * (or drops); every other operation on an overlapping range, a fault there
 * included, waits for the claim to end, so that no thread finds a page
 * taken out of the table and not yet filled. While the lock is let go the
 * claimant holds fill_rw for reading: fork takes it for writing, so that
 * no fill is half done in a child. A claim waits for a free slot; a part
 * the table could not split off its entry (no memory to grow it), and a
 * claim still waiting after the bound, are filled with the lock held, as
 * the one way that cannot fail. */
#define CLAIMS 32
static struct {
	uintptr_t lo, hi; /* hi == 0: a free slot */
} claims[CLAIMS];
static size_t nclaims;
static pthread_cond_t claim_cv = PTHREAD_COND_INITIALIZER;
static ckc_rwlock_t fill_rw = CKC_RWLOCK_INIT(OWED_FILL);
CKC_LOCKS_AT_START(fill_rw, ckc_locks_add_rw, &fill_rw)
/* The longest an operation waits for another thread's claim before it
 * goes on (and says so): a fill stuck in the driver must not hold every
 * thread of the program. */
#define CLAIM_WAIT_S 30

static void count_publish(void)
{
	size_t was = atomic_exchange(&ckc_owed_count, ckc_owed_tab.n + nclaims);
	/* free and realloc go the slow way while something is owed */
	if (!was != !(ckc_owed_tab.n + nclaims))
		ckc_mem_route();
}

static bool claims_overlap(uintptr_t lo, uintptr_t hi)
{
	for (int k = 0; k < CLAIMS && nclaims; k++)
		if (claims[k].hi && claims[k].lo < hi && lo < claims[k].hi)
			return true;
	return false;
}

static int claim_free_slot(void)
{
	for (int k = 0; k < CLAIMS; k++)
		if (!claims[k].hi)
			return k;
	return -1;
}

/* Waits until no claim overlaps [lo, hi) and, with take, a slot is free,
 * which it then claims for [lo, hi). Returns the slot (take), or -1; *waited
 * says whether it waited. After the bound it goes on as if nothing were in
 * the way (without claiming). Table lock held (let go meanwhile). */
static int claim_wait_take(uintptr_t lo, uintptr_t hi, bool take, bool *waited)
{
	struct timespec end;
	bool timed = false;
	for (;;) {
		bool busy = claims_overlap(lo, hi);
		int k = take && !busy ? claim_free_slot() : -1;
		if (!busy && (!take || k >= 0)) {
			if (take) {
				claims[k].lo = lo;
				claims[k].hi = hi;
				nclaims++;
			}
			*waited = timed;
			return k;
		}
		if (!timed) {
			clock_gettime(CLOCK_REALTIME, &end);
			end.tv_sec += CLAIM_WAIT_S;
			timed = true;
		}
		if (ckc_cond_timedwait(&claim_cv, &tab_mutex, &end) == ETIMEDOUT) {
			ckc_error("device capture: a fill of host memory near %p has run for %d s: "
				  "this thread goes on without it",
				  (void *)lo, CLAIM_WAIT_S);
			*waited = true;
			return -1;
		}
	}
}

/* Waits until no claim overlaps [lo, hi); true if there was one. Table
 * lock held. */
bool ckc_owed_claims_wait(uintptr_t lo, uintptr_t hi)
{
	bool waited;
	claim_wait_take(lo, hi, false, &waited);
	return waited;
}

static void claim_end(int k)
{
	claims[k].lo = claims[k].hi = 0;
	nclaims--;
	pthread_cond_broadcast(&claim_cv);
}

/* Lets the table lock go for a claimed fill, and takes it back. The thread
 * still counts as holding the table (ckc_owed_tab_held): what it calls
 * must not come back for it, and a fault of its own fill is its own. */
static void claim_unlock(void)
{
	count_publish();
	ckc_rw_rdlock(&fill_rw);
	ckc_mutex_unlock(&tab_mutex);
}

static void claim_relock(void)
{
	ckc_rw_unlock(&fill_rw);
	ckc_mutex_lock(&tab_mutex);
}

void ckc_owed_atfork_child(void)
{
	/* the claimants are gone; fork waited for their fills (fill_rw) */
	memset(claims, 0, sizeof(claims));
	nclaims = 0;
	pthread_cond_init(&claim_cv, NULL);
	count_publish();
}

bool ckc_owed_tab_lock(void)
{
	if (ckc_owed_tab_held)
		return false;
	ckc_mutex_lock(&tab_mutex);
	ckc_owed_tab_held = true;
	return true;
}

void ckc_owed_tab_unlock(void)
{
	count_publish();
	ckc_owed_tab_held = false;
	ckc_mutex_unlock(&tab_mutex);
}

/* Ranges filled lately: a thread that faulted on a page another thread
 * was filling finds it here and retries the access. */
#define RECENT 16
static struct {
	_Atomic uintptr_t start, end;
} recent[RECENT];
static atomic_uint recent_next;

const ckc_owed_ops_t *ckc_owed_ops;

void ckc_owed_set_ops(const ckc_owed_ops_t *o)
{
	ckc_owed_ops = o;
}

uintptr_t ckc_page_size(void)
{
	static uintptr_t ps;
	if (!ps)
		ps = (uintptr_t)sysconf(_SC_PAGESIZE);
	return ps;
}

/* ---- parked pages -------------------------------------------------------
 * Changing the protection of populated pages costs the kernel about 30 ns
 * a page: 1 ms for a 128 MiB staging buffer, on the program's copy. The
 * bytes of an owed page are never read again (a fill replaces them, a drop
 * means they are to be overwritten or discarded), so a new owed range of
 * pageable memory first has its pages moved out, whole page tables at a
 * time, to a spare place aligned alike (mremap with MREMAP_DONTUNMAP,
 * Linux 5.7): the range stays mapped, empty, and its protection has no page
 * to change. A fill writes the parked pages and moves them back; a drop
 * moves them back as they are. Pinned memory (the driver holds its pages),
 * small ranges and mappings that cannot be moved are protected in place. */
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

/* Moves the parked pages of [a, b) back in place, readable and writable.
 * On failure the range is made accessible anyway (its bytes are then
 * zeros) and -errno returned. */
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

/* The part at e was used (written or copied back): its site paid. Table
 * lock held. */
void ckc_owed_part_used(ckc_owed_t *e)
{
	if (!e->used) {
		e->used = true;
		ckc_owed_site_outcome(e->site, true);
	}
}

/* ---- one part of an entry: filled or dropped (table lock held) --------- */

static void part_release(ckc_owed_t *e)
{
	if (ckc_owed_ops && e->busy)
		ckc_owed_ops->event_wait(e->busy);
	if (ckc_owed_ops && e->busy)
		ckc_owed_ops->event_put(e->busy);
	if (ckc_owed_ops && e->ready)
		ckc_owed_ops->event_put(e->ready);
	if (e->ref)
		ckc_ref_put(e->ref);
	e->ref = NULL;
	e->busy = e->ready = NULL;
}

static void recent_add(uintptr_t a, uintptr_t b)
{
	unsigned k = atomic_fetch_add(&recent_next, 1) % RECENT;
	atomic_store(&recent[k].start, a);
	atomic_store(&recent[k].end, b);
}

bool ckc_owed_recent_has(uintptr_t a)
{
	for (int k = 0; k < RECENT; k++)
		if (a >= atomic_load(&recent[k].start) && a < atomic_load(&recent[k].end))
			return true;
	return false;
}

/* Writes the owed bytes of [a, b) (pages of e) where e keeps them and
 * makes the pages accessible. */
static int part_fill(const ckc_owed_t *e, uintptr_t a, uintptr_t b)
{
	uint64_t t0 = ckc_now_ns();
	size_t len = b - a;
	uint64_t roff = a - e->cap_start;
	int rc;

	if (ckc_owed_ops && e->ready)
		ckc_owed_ops->event_wait(e->ready);
	if (e->pinned) {
		/* device-to-host transfers land in the protected pinned pages */
		ckc_owed_filling_lo = a;
		ckc_owed_filling_hi = b;
		rc = ckc_ref_fill_dma(e->ref, roff, (void *)a, len);
		if (mprotect((void *)a, len, PROT_READ | PROT_WRITE) != 0 && !rc)
			rc = -errno;
	} else if (e->park) {
		/* the parked pages take the bytes and move back */
		ckc_owed_filling_lo = a + (uintptr_t)e->park;
		ckc_owed_filling_hi = b + (uintptr_t)e->park;
		rc = ckc_ref_fill(e->ref, roff, (void *)(a + (uintptr_t)e->park), len);
		int back = pages_unpark(a, b, e->park);
		if (!rc)
			rc = back;
	} else {
		/* fresh pages take the bytes and move into place whole: no
		 * thread can see a half-filled page */
		void *fresh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		rc = fresh == MAP_FAILED ? -errno : 0;
		if (!rc) {
#ifdef MADV_POPULATE_WRITE
			(void)REAL(madvise)(fresh, len, MADV_POPULATE_WRITE);
#endif
			rc = ckc_ref_fill(e->ref, roff, fresh, len);
			if (!rc && REAL(mremap)(fresh, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)a) ==
					   MAP_FAILED)
				rc = -errno;
			if (rc)
				REAL(munmap)(fresh, len);
		}
		if (rc)
			mprotect((void *)a, len, PROT_READ | PROT_WRITE);
	}
	ckc_owed_filling_lo = ckc_owed_filling_hi = 0;
	if (rc) {
		ckc_error("device capture: %zu bytes at %p could not be filled from device memory (%s): "
			  "they hold stale bytes",
			  len, (void *)a, strerror(-rc));
		ckc_backtrace_log("device capture: a fill failed", NULL);
		if (ckc_strict())
			abort();
	}
	recent_add(a, b);
	ckc_owed_st.filled++;
	uint64_t dt = ckc_now_ns() - t0;
	atomic_fetch_add(&ckc_owed_st.fill_ns, dt);
	ckc_debug("device capture: filled %zu bytes at %p (%s) in %.3f ms", len, (void *)a,
		  e->pinned ? "pinned" : e->park ? "parked" : "fresh pages", (double)dt / 1e6);
	if (len >= (1u << 20))
		ckc_backtrace_log("device capture: a fill of 1 MiB or more", NULL);
	return rc;
}

/* Makes the pages of [a, b) of e accessible as they are (their bytes are
 * about to be overwritten or discarded). */
static void part_drop(const ckc_owed_t *e, uintptr_t a, uintptr_t b)
{
	ckc_owed_st.dropped++;
	if (e->park)
		pages_unpark(a, b, e->park);
	else
		mprotect((void *)a, b - a, PROT_READ | PROT_WRITE);
}

/* Takes [a, b) (inside entry i) out of the table; returns the entry as it
 * was, with references of its own for what remains of it. When the table
 * cannot split the entry, *a and *b widen to all of it. */
static ckc_owed_t part_take(size_t i, uintptr_t *a, uintptr_t *b)
{
	ckc_owed_t e = ckc_owed_tab.e[i];
	int kept = ckc_owedtab_cut(&ckc_owed_tab, i, *a, *b);
	if (kept < 0) {
		*a = e.start;
		*b = e.end;
		ckc_owedtab_remove(&ckc_owed_tab, i);
		kept = 0;
	}
	/* the remainders keep their own references */
	for (int k = 0; k < kept; k++) {
		ckc_ref_get(e.ref);
		if (ckc_owed_ops && e.ready)
			ckc_owed_ops->event_get(e.ready);
		if (ckc_owed_ops && e.busy)
			ckc_owed_ops->event_get(e.busy);
	}
	return e;
}

/* The owed pages of [lo, hi) are filled (fill) or dropped; what entries
 * hold outside stays owed. touch: the program's own use of the bytes (a
 * fault, a system call on them), which an owing that was never used did
 * not pay for. Table lock held. */
void ckc_owed_cut_touch_locked(uintptr_t lo, uintptr_t hi, bool fill, bool touch)
{
	size_t i;
	int claim = -1;
	bool waited;

	ckc_owed_claims_wait(lo, hi);
	if (ckc_owedtab_first(&ckc_owed_tab, lo, hi) < ckc_owed_tab.n)
		claim = claim_wait_take(lo, hi, true, &waited);
	while ((i = ckc_owedtab_first(&ckc_owed_tab, lo, hi)) < ckc_owed_tab.n) {
		uintptr_t a = ckc_owed_tab.e[i].start > lo ? ckc_owed_tab.e[i].start : lo;
		uintptr_t b = ckc_owed_tab.e[i].end < hi ? ckc_owed_tab.e[i].end : hi;
		uintptr_t a0 = a, b0 = b;
		ckc_owed_t e = part_take(i, &a, &b);
		if (touch && fill && !e.used) {
			/* the remainders of this part count as used: one outcome */
			for (size_t j = 0; j < ckc_owed_tab.n; j++)
				if (ckc_owed_tab.e[j].ref == e.ref && ckc_owed_tab.e[j].cap_start == e.cap_start)
					ckc_owed_tab.e[j].used = true;
			ckc_owed_site_outcome(e.site, false);
		}
		/* the bytes move without the lock, inside the claim (a part
		 * widened to a whole entry reaches outside it: not) */
		bool unlocked = claim >= 0 && a == a0 && b == b0;
		if (unlocked)
			claim_unlock();
		if (fill)
			part_fill(&e, a, b);
		else
			part_drop(&e, a, b);
		part_release(&e);
		if (unlocked)
			claim_relock();
	}
	if (claim >= 0)
		claim_end(claim);
}

static void cut_locked(uintptr_t lo, uintptr_t hi, bool fill)
{
	ckc_owed_cut_touch_locked(lo, hi, fill, false);
}

void ckc_owed_cut(const void *p, size_t n, bool fill)
{
	ckc_owed_cut_addr((uintptr_t)p, n, fill);
}

void ckc_owed_cut_addr(uintptr_t p, size_t n, bool fill)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || n == 0)
		return;
	uintptr_t lo = page_down(p);
	uintptr_t hi = p + n < p ? page_down(UINTPTR_MAX) : page_up(p + n);
	if (!ckc_owed_tab_lock())
		return;
	ckc_owed_cut_touch_locked(lo, hi, fill, true);
	ckc_owed_tab_unlock();
}

CKC_START_PATH void ckc_owed_fill_all(void)
{
	if (!atomic_load(&ckc_owed_count))
		return;
	if (!ckc_owed_tab_lock())
		return;
	cut_locked(0, UINTPTR_MAX, true);
	ckc_owed_tab_unlock();
}


/* ---- new owed ranges -------------------------------------------------- */

void ckc_owed_edges_fill(uintptr_t d, size_t n)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || n == 0)
		return;
	uintptr_t lo = page_down(d), hi = page_up(d + n);
	uintptr_t a = page_up(d), b = page_down(d + n);
	if (b < a)
		a = b = lo;
	if (!ckc_owed_tab_lock())
		return;
	if (lo < a)
		cut_locked(lo, a, true);
	if (b < hi && b >= a)
		cut_locked(b > lo ? b : lo, hi, true);
	ckc_owed_tab_unlock();
}

void ckc_owed_will_write(const void *p, size_t n)
{
	if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) || !p || !n)
		return;
	uintptr_t d = (uintptr_t)p, a = page_up(d), b = page_down(d + n);
	if (!ckc_owed_tab_lock())
		return;
	if (b <= a) {
		cut_locked(page_down(d), page_up(d + n), true);
	} else {
		/* the partial pages are written in part: filled; the whole
		 * ones are overwritten */
		if (page_down(d) < a)
			cut_locked(page_down(d), a, true);
		if (b < page_up(d + n))
			cut_locked(b, page_up(d + n), true);
		cut_locked(a, b, false);
	}
	ckc_owed_tab_unlock();
}

/* Two independent 64-bit sums of the partial pages of a capture: the bytes
 * of [cap_start, page_up(cap_start)) and [page_down(cap_end), cap_end). */
static void edges_sum(uintptr_t cap_start, uint64_t cap_len, uint64_t out[2])
{
	uint64_t h1 = 0x9e3779b97f4a7c15ull, h2 = 0xc2b2ae3d27d4eb4full;
	uintptr_t cap_end = cap_start + (uintptr_t)cap_len;
	uintptr_t a = page_up(cap_start), b = page_down(cap_end);
	if (b < a)
		a = b = cap_end;
	const unsigned char *spans[2] = { (const unsigned char *)cap_start, (const unsigned char *)b };
	size_t lens[2] = { a - cap_start, cap_end - b };
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
	edges_sum(e->cap_start, e->cap_len, now);
	return now[0] == e->edge_sum[0] && now[1] == e->edge_sum[1];
}

/* Protects the pages of [a, b), none of which is owed: parked first when
 * the range is large pageable memory (*park: where, 0 in place). Returns 0
 * or -errno. */
static int gap_protect(uintptr_t a, uintptr_t b, bool pinned, intptr_t *park)
{
	*park = pinned ? 0 : pages_park(a, b);
	if (mprotect((void *)a, b - a, PROT_NONE) != 0) {
		int rc = -errno;
		if (*park)
			pages_unpark(a, b, *park);
		*park = 0;
		return rc;
	}
	return 0;
}

/* Joins neighbouring parts of one capture in [a, b) whose pages are kept
 * the same way (so that a buffer owed again and again stays one entry).
 * Table lock held. */
static void coalesce_locked(uintptr_t a, uintptr_t b)
{
	size_t i = ckc_owedtab_first(&ckc_owed_tab, a, b);
	while (i < ckc_owed_tab.n && i + 1 < ckc_owed_tab.n && ckc_owed_tab.e[i + 1].start < b) {
		ckc_owed_t *x = &ckc_owed_tab.e[i], *y = &ckc_owed_tab.e[i + 1];
		if (x->end == y->start && x->ref == y->ref && x->cap_start == y->cap_start && x->park == y->park &&
		    x->pinned == y->pinned && x->ready == y->ready && !x->busy && !y->busy && x->used == y->used) {
			x->end = y->end;
			ckc_owed_t gone = *y;
			ckc_owedtab_remove(&ckc_owed_tab, i + 1);
			part_release(&gone);
		} else {
			i++;
		}
	}
}

int ckc_owed_add_len(uintptr_t a, uintptr_t b, uintptr_t cap_start, uint64_t cap_len,
		     ckc_ref_t *ref, bool pinned, void *ready, bool ordered, uintptr_t site)
{
	int rc = ckc_owed_segv_install();
	if (rc)
		return rc;
	ckc_owed_t e = { .start = a, .end = b, .cap_start = cap_start, .cap_len = cap_len, .ref = ref,
			 .pinned = pinned, .ready = ready, .ordered = ordered, .site = site };
	/* the edges hold their final bytes unless a copy into them is still
	 * in flight (ready, not ordered) */
	if (!ready || ordered) {
		edges_sum(cap_start, cap_len, e.edge_sum);
		e.edges_ok = true;
	}
	if (!ckc_owed_tab_lock())
		return -EDEADLK;
	ckc_owed_claims_wait(a, b);
	atomic_fetch_add(&ckc_owed_gen, 1);
	/* Page by page in address order: a page owed already keeps its
	 * protection (and place) and changes owner; the others are protected.
	 * Each part becomes an entry of its own, all holding ref. */
	uintptr_t at = a;
	int parts = 0;
	while (!rc && at < b) {
		size_t i = ckc_owedtab_first(&ckc_owed_tab, at, b);
		ckc_owed_t part = e;
		part.start = at;
		if (i < ckc_owed_tab.n && ckc_owed_tab.e[i].start <= at) {
			/* owed now: the part of it inside [at, b) */
			uintptr_t x = at, y = ckc_owed_tab.e[i].end < b ? ckc_owed_tab.e[i].end : b;
			ckc_owed_t old = part_take(i, &x, &y);
			if (x < at || y > b) {
				/* could not split: what lies outside is filled */
				if (x < at)
					part_fill(&old, x, at);
				if (y > b)
					part_fill(&old, b, y);
				y = y > b ? b : y;
			}
			part.end = y;
			part.park = old.park;
			part_release(&old);
			ckc_owed_st.dropped++;
		} else {
			/* not owed: up to the next owed page */
			uintptr_t y = i < ckc_owed_tab.n ? ckc_owed_tab.e[i].start : b;
			if ((rc = gap_protect(at, y, pinned, &part.park)) != 0)
				break;
			part.end = y;
		}
		if (parts > 0) {
			ckc_ref_get(ref);
			if (ckc_owed_ops && ready)
				ckc_owed_ops->event_get(ready);
		}
		if ((rc = ckc_owedtab_insert(&ckc_owed_tab, &part)) != 0) {
			part_drop(&part, part.start, part.end);
			if (parts == 0) {
				/* the caller keeps ref and ready */
				break;
			}
			part_release(&part);
			break;
		}
		parts++;
		at = part.end;
	}
	if (rc)
		ckc_debug("device capture: owing [%p, %p) failed after %d parts (%s)", (void *)a, (void *)b, parts,
			  strerror(-rc));
	if (rc && parts > 0) {
		/* what was owed of [a, b) goes; the caller keeps its own
		 * reference and event, which the entries took */
		ckc_ref_get(ref);
		if (ckc_owed_ops && ready)
			ckc_owed_ops->event_get(ready);
		cut_locked(a, b, false);
	} else if (rc) {
		cut_locked(a, b, false);
	} else {
		coalesce_locked(a, b);
	}
	ckc_owed_tab_unlock();
	return rc;
}
