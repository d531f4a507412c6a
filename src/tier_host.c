/* The host tier: one anonymous mapping (huge pages advised) whose pages a
 * background thread populates, so the program's copies rarely fault. It
 * grows with use: only the room the next checkpoints will take is populated
 * ahead of them, and free room is given back when the tier has been idle
 * (under device capture nothing is given back). A tier populated whole
 * (when asked) is registered with CUDA by the gpu tier. Bytes move in and
 * out with memcpy. The mapping is never moved, so the pinning can register
 * it as it is. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "copy.h"
#include "engine_int.h"
#include "lanes.h"
#include "log.h"
#include "memlimit.h"
#include "thread.h"
#include "sys.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Short holds of the address space's lock, which a page protection of the
 * program's (a device capture) waits for: one huge page at a time. Also
 * the unit in which a growing tier populates and gives back. */
#define HOST_PIECE CKC_HOST_PIECE

/* A growing tier keeps twice the predicted checkpoint size of free room
 * populated, at least HOST_AHEAD_MIN and at most HOST_AHEAD_MAX (a larger
 * checkpoint faults the rest of its pages in as it is copied: memory a job
 * does not use is not held for it), once the process has written
 * HOST_AHEAD_AFTER checkpoints: one checkpoint says nothing of a next one
 * (a pickle of one large dict, one HDF5 file), and room populated for it
 * counted against the job's memory (a pickle of 128 MiB peaked 370 MiB
 * above the program without the library, the limit being 1.1 x what the
 * program took and the cache held). Before that, twice what the tier
 * holds, at most HOST_AHEAD_FIRST. Checkpoints so small that twice one is
 * below HOST_AHEAD_SMALL get no minimum: a script whose checkpoints are
 * small files populates the pieces it uses and no more (a Python process
 * of 14 MiB peaked at 50 MiB writing 1000 files of at most 4 KiB with 32
 * MiB ahead, at 29 MiB with two pieces). */
#define HOST_AHEAD_MIN (2 * HOST_PIECE)
#define HOST_AHEAD_SMALL (512ull << 10)
#define HOST_AHEAD_FIRST (8ull << 20)
#define HOST_AHEAD_MAX (256ull << 20)
#define HOST_AHEAD_AFTER 2

/* From HOST_AHEAD_AFTER checkpoints on, the room populated ahead is also
 * at most 1/HOST_AHEAD_SHARE of what the program holds besides the tier
 * (its resident memory less the tier's populated pieces) and the tier
 * holds in checkpoints, and at least HOST_AHEAD_MIN: room no checkpoint
 * ever takes is memory the job pays for, and a job's peak is to stay
 * within 10% of what it takes without the library plus what it cached (4
 * checkpoints of 64 MiB in a program of 65 MiB peaked at 450 MiB with
 * twice a checkpoint ahead, for 256 MiB cached). The share leaves room for
 * the library's own. Where checkpoints are large against the job, the
 * later part of the next one is faulted in by its own copy. */
#define HOST_AHEAD_SHARE 16
/* The program's resident memory is read again at most this often. */
#define HOST_RSS_EVERY_NS 20000000ull

/* Before its first checkpoint of more than CKC_HOST_HUGE_FROM bytes, a
 * growing tier has small pages, and this much room populated ahead of the
 * next allocation (again once half of it is taken): a script whose
 * checkpoints are small files holds what they take, not whole huge pages
 * (3,000 files of at most 4 KiB held 8 MiB of huge pages for 6.4 MiB of
 * checkpoints; 600 such files of 2.4 MiB in all, 6 MiB). Its pieces count
 * as populated (statistics) once any of their pages is. */
#define HOST_SMALL_AHEAD (64ull << 10)

/* Free room beyond that is given back after this long without an
 * allocation in the tier; the toucher looks at least this often. */
#define HOST_IDLE_NS 1000000000ull

/* Reads one byte of each page of [p, p+len) from this thread, in
 * assembly (a read the sanitizers do not see: the program's copy may be
 * writing those bytes meanwhile, and a read of them changes nothing). */
static void host_read_touch(const char *p, uint64_t len)
{
	for (uint64_t o = 0; o < len; o += 4096) {
#if defined(__x86_64__)
		__asm__ volatile("movb (%0), %%al" : : "r"(p + o) : "al", "memory");
#elif defined(__aarch64__)
		__asm__ volatile("ldrb w9, [%0]" : : "r"(p + o) : "w9", "memory");
#else
		(void)*(const volatile char *)(p + o);
#endif
	}
}

/* Populates [off, off+len) of the mapping. 0 or -errno. MADV_POPULATE_WRITE
 * faults the pages in without writing to them, so it can run while the
 * program's bytes arrive. The pages are then read once from user space: a
 * guest whose hypervisor keeps shadow page tables (the build machine, a
 * PVM guest) maps a page for the process on its first user access, which
 * the kernel's populate is not (a copy of 1 MiB into populated pages took
 * 1.3-1.7 ms there, 0.08 ms once read; on other machines a read of a
 * mapped page costs a TLB miss). */
static int host_populate(ckc_tier_t *t, uint64_t off, uint64_t len)
{
	if (sys_madvise(t->base + off, len, MADV_POPULATE_WRITE) != 0)
		return -errno;
	/* a tier populated whole is the one registered with CUDA (pinned),
	 * whose copies are the GPU's transfers, not the program's memcpy */
	if (t->grow)
		host_read_touch(t->base + off, len);
	return 0;
}

/* Keeps the most memory populated at once (the statistics). */
static void host_peak(ckc_tier_t *t)
{
	uint_fast64_t p = atomic_load(&t->populated), m = atomic_load(&t->populated_peak);
	while (p > m && !atomic_compare_exchange_weak(&t->populated_peak, &m, p))
		;
}

static void host_toucher_whole(ckc_tier_t *t)
{
	uint64_t cap = t->arena.capacity;

	for (uint64_t off = 0; off < cap && !atomic_load(&t->toucher_stop); off += HOST_PIECE) {
		uint64_t len = cap - off < HOST_PIECE ? cap - off : HOST_PIECE;
		ckc_bg_yield();
		int rc = host_populate(t, off, len);
		if (rc) {
			ckc_debug("host tier: pages are populated on first use (%s)", strerror(-rc));
			break;
		}
		atomic_store(&t->populated, off + len);
		host_peak(t);
	}
	atomic_store(&t->populated, cap);
	host_peak(t);
}

/* ---- a growing tier ------------------------------------------------- */

/* Piece k is populated now (by the toucher or the program's copies).
 * True where it was not before. */
static bool host_mark(ckc_tier_t *t, uint64_t k)
{
	uint8_t none = 0;
	if (!atomic_compare_exchange_strong(&t->piece[k], &none, CKC_PIECE_USED))
		return false;
	atomic_fetch_add(&t->populated, HOST_PIECE);
	host_peak(t);
	return true;
}

static bool host_pinned(const ckc_tier_t *t, uint64_t off, uint64_t n)
{
	return !t->piece && off + n <= atomic_load(&t->pinned_bytes);
}

static bool host_holds(const ckc_tier_t *t, const void *p, uint64_t *off)
{
	const char *c = p;
	if (!t->base || c < t->base || c >= t->base + t->arena.capacity)
		return false;
	if (off)
		*off = (uint64_t)(c - t->base);
	return true;
}

/* A tier populated whole is registered from its start once populated, in
 * CKC_PIN_PIECE pieces. A growing tier is not: its pages come and go. */
static int host_pin(ckc_tier_t *t, const ckc_pin_fns_t *f, const atomic_bool *stop, uint64_t *done)
{
	if (t->piece || !t->base)
		return -ENOTSUP;
	while (!atomic_load(stop) && atomic_load(&t->populated) < t->arena.capacity) {
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	uint64_t cap = t->arena.capacity;
	int rc = 0;
	if (f->begin)
		f->begin();
	for (uint64_t off = 0; off < cap && !atomic_load(stop) && !rc; off += CKC_PIN_PIECE) {
		uint64_t n = cap - off < CKC_PIN_PIECE ? cap - off : CKC_PIN_PIECE;
		if ((rc = f->reg(t->base + off, n)) == 0) {
			atomic_store(&t->pinned_bytes, off + n);
			atomic_store(&t->pinned_once, true);
		}
	}
	if (f->end)
		f->end();
	*done = atomic_load(&t->pinned_bytes);
	return rc;
}

static void host_unpin(ckc_tier_t *t, const ckc_pin_fns_t *f)
{
	uint64_t pinned = atomic_load(&t->pinned_bytes);
	for (uint64_t off = 0; off < pinned; off += CKC_PIN_PIECE)
		f->unreg(t->base + off, pinned - off < CKC_PIN_PIECE ? pinned - off : CKC_PIN_PIECE);
	atomic_store(&t->pinned_bytes, 0);
}

/* The room ahead where copy mode steps aside (lock held): none while new
 * checkpoints go straight to their real paths, and one checkpoint's before
 * the next try of the cache, so that the try measures a write into memory
 * at hand, as the cache's later checkpoints would find it, not the first
 * touch of pages new to the process (an H100 machine's host tier took a
 * first 64 MiB checkpoint at 3.0 GB/s, the page cache 4.8 GB/s). False
 * where the choice does not apply. */
static bool host_aside_ahead(uint64_t p, uint64_t *ahead)
{
	const aside_t *a = &ckc_eng.aside;

	if (!a->on || a->choice != ASIDE_HOME || ckc_eng.nrecent == 0 || p < ASIDE_MIN_BYTES)
		return false;
	/* a try under way has its room: none for the one after it */
	*ahead = aside_try_soon(a) ? p : 0;
	return true;
}

/* Huge pages from now on (lock held): the tier's checkpoints are large. */
static void host_go_huge(ckc_tier_t *t)
{
	if (atomic_load(&t->huge))
		return;
	(void)sys_madvise(t->base, t->arena.capacity, MADV_HUGEPAGE);
	atomic_store(&t->huge, true);
}

/* The room the next allocations will take (lock held): in best-fit order,
 * the starts of the gaps that fit a predicted checkpoint, ahead bytes in
 * all. prog: the program's resident bytes besides the tier (UINT64_MAX:
 * not known). Marks their pieces in want[]; *next_off and *next_len (when not
 * NULL) get the start of the first gap and what of it small pages
 * populate (0: none). Returns the pieces marked. */
static size_t host_plan(ckc_tier_t *t, uint64_t prog, uint8_t *want, uint64_t *next_off,
			uint64_t *next_len)
{
	const arena_t *a = &t->arena;
	uint64_t p = ckc_predict_size(), ahead;
	size_t n = 0;

	if (p > CKC_HOST_HUGE_FROM)
		host_go_huge(t);
	uint64_t first_off = 0, first_len = 0;

	if (host_aside_ahead(p, &ahead)) {
		/* stepping aside: its own rule */
	} else if (ckc_eng.nrecent >= HOST_AHEAD_AFTER) {
		ahead = 2 * p;
		if (prog != UINT64_MAX) {
			uint64_t share = (prog + a->used) / HOST_AHEAD_SHARE;
			if (ahead > share)
				ahead = share;
		}
	} else {
		/* twice what the tier holds now (the first checkpoint as it
		 * grows), at most HOST_AHEAD_FIRST */
		uint64_t u = a->used > p ? a->used : p;
		ahead = 2 * u < HOST_AHEAD_FIRST ? 2 * u : HOST_AHEAD_FIRST;
	}
	if (ahead < HOST_AHEAD_MIN && ahead >= HOST_AHEAD_SMALL)
		ahead = HOST_AHEAD_MIN;
	if (ahead > HOST_AHEAD_MAX)
		ahead = HOST_AHEAD_MAX;
	memset(want, 0, t->npiece);
	/* the arena allocates the smallest gap that fits, lowest first */
	for (uint64_t floor = 0, floor_off = 0; ahead > 0;) {
		ssize_t best = -1;
		for (size_t i = 0; i < a->nfrag; i++) {
			const arena_frag_t *f = &a->frag[i];
			if (f->owner || f->len < p || f->len < floor || (f->len == floor && f->off <= floor_off))
				continue;
			if (best < 0 || f->len < a->frag[best].len)
				best = (ssize_t)i;
		}
		if (best < 0)
			break;
		const arena_frag_t *g = &a->frag[best];
		uint64_t take = g->len < ahead ? g->len : ahead;
		if (!first_len) {
			/* small pages: HOST_SMALL_AHEAD, or what the plan takes
			 * of the gap once checkpoints are known to be that
			 * large (a checkpoint of 1 MiB written into room 64
			 * KiB of which was populated took 3 ms here, against
			 * 0.1 ms into populated room); before any is known the
			 * plan's guess (1 MiB) would hold room a script of
			 * small files never uses */
			uint64_t want_len = ckc_eng.nrecent > 0 && take > HOST_SMALL_AHEAD ? take : HOST_SMALL_AHEAD;
			first_off = g->off;
			first_len = g->len < want_len ? g->len : want_len;
		}
		for (uint64_t k = g->off / HOST_PIECE; k * HOST_PIECE < g->off + take; k++)
			if (!want[k]) {
				want[k] = 1;
				n++;
			}
		ahead -= take;
		floor = g->len;
		floor_off = g->off;
	}
	if (next_off) {
		*next_off = first_off;
		*next_len = first_len;
	}
	return n;
}

/* Gives back the pieces lying wholly in free room that the plan does not
 * want and that were populated or used since they were last given back
 * (lock held: nothing can allocate them meanwhile). Returns the bytes
 * given back. */
static uint64_t host_give_back(ckc_tier_t *t, const uint8_t *want)
{
	const arena_t *a = &t->arena;
	uint64_t bytes = 0;

	for (size_t i = 0; i < a->nfrag; i++) {
		const arena_frag_t *f = &a->frag[i];
		if (f->owner)
			continue;
		uint64_t k = (f->off + HOST_PIECE - 1) / HOST_PIECE, end = (f->off + f->len) / HOST_PIECE;
		if (f->off + f->len == a->capacity)
			end = t->npiece; /* the last piece may be short */
		for (; k < end; k++) {
			if (want[k] || !atomic_load(&t->piece[k]))
				continue;
			uint64_t off = k * HOST_PIECE, len = a->capacity - off;
			if (sys_madvise(t->base + off, len < HOST_PIECE ? len : HOST_PIECE, MADV_DONTNEED) == 0 &&
			    atomic_exchange(&t->piece[k], 0))
				bytes += HOST_PIECE;
		}
	}
	return bytes;
}

/* Small pages: [off, off+len) of the room ahead, in whole pages, unless
 * half of it is still ahead in what was populated last ([*from, *to)). */
static void host_populate_small(ckc_tier_t *t, uint64_t off, uint64_t len, uint64_t *from, uint64_t *to)
{
	uint64_t a = off & ~(uint64_t)4095, b = (off + len + 4095) & ~(uint64_t)4095;
	if (b > t->arena.capacity)
		b = t->arena.capacity;
	if (a >= *from && a < *to && *to - a >= (b - a) / 2)
		return;
	if (host_populate(t, a, b - a) != 0)
		return;
	for (uint64_t k = a / HOST_PIECE; k * HOST_PIECE < b; k++)
		host_mark(t, k);
	*from = a;
	*to = b;
}

/* Huge pages: the pieces the plan wants that are not populated yet. */
static void host_populate_wanted(ckc_tier_t *t, const uint8_t *want)
{
	for (size_t k = 0; k < t->npiece && !atomic_load(&t->toucher_stop); k++) {
		if (!want[k] || atomic_load(&t->piece[k]))
			continue;
		ckc_bg_yield();
		uint64_t off = k * HOST_PIECE, len = t->arena.capacity - off;
		if (host_populate(t, off, len < HOST_PIECE ? len : HOST_PIECE) != 0)
			break;
		host_mark(t, k);
	}
}

/* The process's resident bytes less the tier's populated pieces
 * (UINT64_MAX where /proc/self/statm cannot be read). */
static uint64_t host_prog_resident(ckc_tier_t *t)
{
	uint64_t mapped, resident;
	if (!ckc_memlimit_statm("/proc/self/statm", &mapped, &resident))
		return UINT64_MAX;
	uint64_t pop = atomic_load(&t->populated);
	return resident > pop ? resident - pop : 0;
}

static void host_toucher_grow(ckc_tier_t *t)
{
	uint8_t *want = sys_calloc(t->npiece, 1);
	uint64_t seen = 0, last_use = ckc_now_ns();
	uint64_t small_from = 0, small_to = 0; /* small pages populated last */
	uint64_t prog = UINT64_MAX, prog_at = 0;

	if (!want)
		return;
	while (!atomic_load(&t->toucher_stop)) {
		/* nothing ahead of a tier that was never used: a process that
		 * only reads checkpoints from their real files needs no room */
		uint64_t small_off = 0, small_len = 0;
		bool used = atomic_load(&t->use_seq) || atomic_load(&t->expected);
		if (used && ckc_now_ns() - prog_at >= HOST_RSS_EVERY_NS) {
			prog = host_prog_resident(t);
			prog_at = ckc_now_ns();
		}
		ckc_mutex_lock(&ckc_eng.lock);
		uint64_t planned = atomic_load(&t->use_seq);
		if (planned || atomic_load(&t->expected))
			host_plan(t, prog, want, &small_off, &small_len);
		bool small = !atomic_load(&t->huge);
		eng_unlock();
		/* small pages: the room just ahead of the next allocation; huge
		 * pages: what the next checkpoints will take, piece by piece */
		if (small) {
			if (small_len)
				host_populate_small(t, small_off, small_len, &small_from, &small_to);
		} else {
			host_populate_wanted(t, want);
		}
		ckc_mutex_lock(&t->grow_mx);
		atomic_store(&t->planned_seq, planned);
		atomic_store(&t->caught_up, true);
		pthread_cond_broadcast(&t->caught_cv);
		if (!atomic_load(&t->toucher_stop) && atomic_load(&t->use_seq) == seen) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += HOST_IDLE_NS / 1000000000ull;
			ckc_cond_timedwait(&t->grow_cv, &t->grow_mx, &ts);
		}
		ckc_mutex_unlock(&t->grow_mx);
		uint64_t seq = atomic_load(&t->use_seq);
		if (seq != seen) {
			seen = seq;
			last_use = ckc_now_ns();
			continue;
		}
		if (ckc_now_ns() - last_use < HOST_IDLE_NS || t->keep)
			continue;
		/* idle: free room beyond what the next checkpoints take goes
		 * back to the system (room freed since the last look included) */
		ckc_mutex_lock(&ckc_eng.lock);
		host_plan(t, prog, want, NULL, NULL);
		uint64_t b = host_give_back(t, want);
		t->st.given_back_bytes += b;
		eng_unlock();
		atomic_fetch_sub(&t->populated, b);
		if (b)
			small_from = small_to = 0;
	}
	sys_free(want);
}

static void *host_toucher(void *arg);
static void host_wake(ckc_tier_t *t);

bool ckc_host_used(ckc_tier_t *t, uint64_t aoff, uint64_t len, uint64_t whole)
{
	if (!t->grow || !len)
		return false;
	if (whole > CKC_HOST_HUGE_FROM)
		host_go_huge(t);
	bool grew = false;
	for (uint64_t k = aoff / HOST_PIECE; k * HOST_PIECE < aoff + len && k < t->npiece; k++)
		grew |= host_mark(t, k);
	atomic_fetch_add(&t->use_seq, 1);
	host_wake(t);
	return grew;
}

void ckc_host_expect(ckc_tier_t *t)
{
	if (!t->grow)
		return;
	/* asked again with no allocation since the toucher last caught up:
	 * the room it populated is still free (a wake would only have the
	 * next checkpoint find the tier not ready) */
	if (atomic_exchange(&t->expected, true) && atomic_load(&t->caught_up) &&
	    atomic_load(&t->planned_seq) == atomic_load(&t->use_seq))
		return;
	host_wake(t);
}

bool ckc_host_room_ready(ckc_tier_t *t)
{
	if (!t->grow)
		return true;
	if (!atomic_load(&t->expected)) {
		ckc_host_expect(t);
		return false;
	}
	return atomic_load(&t->caught_up);
}

/* Work for the toucher, started with the first (lock held). */
static void host_wake(ckc_tier_t *t)
{
	ckc_mutex_lock(&t->grow_mx);
	atomic_store(&t->caught_up, false);
	/* a growing tier's toucher starts with its first use: a process that
	 * never caches a byte here makes none (a failure leaves the pages to
	 * be faulted in by the copies themselves) */
	if (!t->toucher_running && !t->toucher_tried && !atomic_load(&t->toucher_stop)) {
		t->toucher_tried = true;
		t->toucher_running = ckc_thread_start(&t->toucher, host_toucher, t, "ckc-populate", false) == 0;
		if (!t->toucher_running) {
			atomic_store(&t->caught_up, true);
			pthread_cond_broadcast(&t->caught_cv);
		}
	}
	pthread_cond_broadcast(&t->grow_cv);
	ckc_mutex_unlock(&t->grow_mx);
}

static void *host_toucher(void *arg)
{
	ckc_tier_t *t = arg;
	ckc_io_guard = 1; /* never re-enter the wrappers */
	ckc_tl_background = true;
	if (t->grow)
		host_toucher_grow(t);
	else
		host_toucher_whole(t);
	return NULL;
}

/* An anonymous mapping of len bytes starting on a piece boundary, so that
 * each piece can be one huge page. NULL with errno on failure. */
static char *host_map(uint64_t len)
{
	char *p = sys_mmap(NULL, len + HOST_PIECE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uintptr_t head = (HOST_PIECE - (uintptr_t)p % HOST_PIECE) % HOST_PIECE;
	if (head)
		sys_munmap(p, head);
	sys_munmap(p + head + len, HOST_PIECE - head);
	/* a fork child leaves the cache to its parent (its interception is
	 * off and it never reads the tier): without this, each fork copied
	 * the tier's page tables, and the parent's next writes into its
	 * populated room met copy-on-write faults */
	(void)sys_madvise(p + head, len, MADV_DONTFORK);
	return p + head;
}

int ckc_host_open(ckc_tier_t *t, uint64_t capacity, bool grow, bool keep)
{
	int rc = arena_init(&t->arena, capacity, CKC_ALIGN);
	if (rc)
		return rc;
	capacity = t->arena.capacity;
	char *p = host_map(capacity);
	if (!p) {
		rc = -errno;
		arena_fini(&t->arena);
		return rc;
	}
	/* a growing tier takes huge pages with its first large checkpoint */
	if (!grow)
		(void)sys_madvise(p, capacity, MADV_HUGEPAGE);
	atomic_store(&t->huge, !grow);
	t->base = p;
	t->grow = grow;
	t->keep = keep;
	t->npiece = (capacity + HOST_PIECE - 1) / HOST_PIECE;
	t->piece = grow ? sys_calloc(t->npiece, sizeof(*t->piece)) : NULL;
	if (grow && !t->piece) {
		sys_munmap(p, capacity);
		t->base = NULL;
		arena_fini(&t->arena);
		return -ENOMEM;
	}
	ckc_mutex_init(&t->grow_mx, CKC_RANK_HOST_GROW);
	ckc_locks_add(&t->grow_mx);
	pthread_cond_init(&t->grow_cv, NULL);
	pthread_cond_init(&t->caught_cv, NULL);
	atomic_store(&t->use_seq, 0);
	atomic_store(&t->planned_seq, 0);
	atomic_store(&t->caught_up, false);
	atomic_store(&t->populated, 0);
	atomic_store(&t->populated_peak, 0);
	atomic_store(&t->toucher_stop, false);
	t->toucher_running = t->toucher_tried = false;
	if (grow) {
		atomic_store(&t->caught_up, true); /* nothing to populate before the first use */
		return 0;
	}
	t->toucher_running = ckc_thread_start(&t->toucher, host_toucher, t, "ckc-populate", false) == 0;
	if (!t->toucher_running) {
		atomic_store(&t->populated, capacity);
		host_peak(t);
		atomic_store(&t->caught_up, true);
	}
	return 0;
}

void ckc_host_stop(ckc_tier_t *t)
{
	if (!t->base)
		return; /* closed already (or never mapped): no toucher, no lock */
	ckc_mutex_lock(&t->grow_mx);
	atomic_store(&t->toucher_stop, true);
	bool running = t->toucher_running;
	pthread_cond_broadcast(&t->grow_cv);
	pthread_cond_broadcast(&t->caught_cv);
	ckc_mutex_unlock(&t->grow_mx);
	if (!running)
		return;
	pthread_join(t->toucher, NULL);
	t->toucher_running = false;
}

void ckc_host_close(ckc_tier_t *t)
{
	ckc_host_stop(t);
	if (t->base)
		sys_munmap(t->base, t->arena.capacity);
	t->base = NULL;
	sys_free((void *)t->piece);
	t->piece = NULL;
	pthread_cond_destroy(&t->grow_cv);
	pthread_cond_destroy(&t->caught_cv);
	ckc_locks_remove(&t->grow_mx);
	ckc_mutex_destroy(&t->grow_mx);
	arena_fini(&t->arena);
}

void ckc_wait_ready(void)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		ckc_tier_t *t = &ckc_eng.tier[l];
		if (t->kind != TIER_HOST || !t->toucher_running)
			continue;
		if (t->grow) {
			ckc_mutex_lock(&t->grow_mx);
			while (!atomic_load(&t->caught_up))
				ckc_cond_wait(&t->caught_cv, &t->grow_mx);
			ckc_mutex_unlock(&t->grow_mx);
			continue;
		}
		while (atomic_load(&t->populated) < t->arena.capacity) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
}

__thread bool ckc_tl_program_write;

static int host_put(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len)
{
	/* a program's write of a large checkpoint: the tier's pages it lands
	 * in are faulted in and filled by several threads (lanes.h), as the
	 * kernel's page cache would take it no slower */
	if (!ckc_tl_program_write || len < CKC_LANE_MIN || ckc_lanes_memcpy(t->base + aoff, buf, len))
		return ckc_copy_checked(t->base + aoff, buf, len);
	return 0;
}

static int host_get(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len)
{
	/* a program's read into memory it may never have touched: faulted in
	 * and copied by several threads (lanes.h) */
	if (!ckc_tl_program_read || len < CKC_LANE_MIN || ckc_lanes_memcpy(buf, t->base + aoff, len))
		return ckc_copy_checked(buf, t->base + aoff, len);
	return 0;
}

static void host_stats(const ckc_tier_t *t, ckc_stats_t *s)
{
	s->tier[t->level].populated_bytes = atomic_load(&((ckc_tier_t *)t)->populated);
	s->tier[t->level].peak_populated_bytes = atomic_load(&((ckc_tier_t *)t)->populated_peak);
	if (t->pinned_once)
		s->host_pinned = true;
}

const ckc_tier_ops_t ckc_tier_host_ops = {
	.put = host_put,
	.get = host_get,
	.stop = ckc_host_stop,
	.teardown = ckc_host_close,
	.stats = host_stats,
	.holds = host_holds,
	.pin = host_pin,
	.unpin = host_unpin,
	.pinned = host_pinned,
};
