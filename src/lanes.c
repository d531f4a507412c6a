/* Copy lanes (lanes.h): the helper threads, started on first use, and the
 * hand-out of one copy's pieces to them and to the calling thread. One copy
 * at a time holds the helpers; a second one meanwhile runs as it would
 * have without them. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lockrank.h"
#include "thread.h"

#include "copy.h"
#include "io.h"
#include "lanes.h"
#include "log.h"
#include "sys.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static struct {
	ckc_mutex_t mu;
	pthread_cond_t go;   /* a copy was posted */
	pthread_cond_t idle; /* the last helper left a copy */
	int helpers;         /* started */
	bool tried;          /* helpers were asked for in this process */
	int lanes;           /* as configured: 0 by the CPUs */
	bool held;           /* a copy holds the helpers */
	bool joinable;       /* helpers may still join the copy */
	unsigned gen;        /* copies posted */
	int inside;          /* helpers working on the copy */
	/* the copy */
	uintptr_t p, base, end;
	size_t npiece;
	ckc_lane_fn fn;
	void *arg;
	atomic_size_t next; /* the next piece to hand out */
	atomic_int err;     /* the first error */
	uint64_t copies, bytes; /* made in lanes */
} L = { .mu = CKC_MUTEX_INIT(LANES), .go = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER };

/* Takes pieces until none is left or one failed. */
static void lanes_work(void)
{
	while (!atomic_load_explicit(&L.err, memory_order_relaxed)) {
		size_t k = atomic_fetch_add(&L.next, 1);
		if (k >= L.npiece)
			return;
		uintptr_t a = L.base + k * (uintptr_t)CKC_LANE_PIECE, b = a + CKC_LANE_PIECE;
		if (a < L.p)
			a = L.p;
		if (b > L.end)
			b = L.end;
		int rc = L.fn(L.arg, a, b, (uint64_t)(a - L.p));
		if (rc) {
			int none = 0;
			atomic_compare_exchange_strong(&L.err, &none, rc);
		}
	}
}

static __thread bool on_helper;

bool ckc_lanes_helper(void)
{
	return on_helper;
}

static void *lanes_main(void *unused)
{
	(void)unused;
	unsigned seen = 0;
	on_helper = true;
	ckc_io_guard = 1; /* never re-enter the wrappers: the copy's owner may hold their locks */
	ckc_mutex_lock(&L.mu);
	for (;;) {
		while (!L.joinable || L.gen == seen)
			ckc_cond_wait(&L.go, &L.mu);
		seen = L.gen;
		L.inside++;
		ckc_mutex_unlock(&L.mu);
		lanes_work();
		ckc_mutex_lock(&L.mu);
		if (--L.inside == 0)
			pthread_cond_broadcast(&L.idle);
	}
	return NULL;
}

/* A forked child has none of its parent's helpers, and the lock may have
 * been held by a thread that is not there. */
static void lanes_child(void)
{
	ckc_mutex_init(&L.mu, CKC_RANK_LANES);
	pthread_cond_init(&L.go, NULL);
	pthread_cond_init(&L.idle, NULL);
	L.helpers = 0;
	L.tried = false;
	L.held = L.joinable = false;
	L.inside = 0;
}

/* The CPUs this process may run on. */
static int lanes_cpus(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	return CPU_COUNT(&set);
}

/* Starts the helpers once per process (lock held); a helper starts with
 * every signal blocked, so that the program's handlers never run on it. */
static void lanes_start(void)
{
	static atomic_bool forks_known;

	L.tried = true;
	int cpus = lanes_cpus();
	int want = L.lanes ? L.lanes - 1 : cpus >= CKC_LANES_AUTO ? CKC_LANES_AUTO - 1 : 0;
	if (want > cpus - 1)
		want = cpus - 1;
	if (want <= 0)
		return;
	if (!atomic_exchange(&forks_known, true))
		pthread_atfork(NULL, NULL, lanes_child);
	for (int i = 0; i < want; i++) {
		int rc = ckc_thread_start(NULL, lanes_main, NULL, "ckc-lane", true);
		if (rc) {
			ckc_debug("copy lanes: helper %d not started (%s)", i, strerror(rc));
			break;
		}
		L.helpers++;
	}
}

int ckc_lanes_run(uintptr_t p, size_t n, ckc_lane_fn fn, void *arg)
{
	if (!n)
		return 0;
	ckc_mutex_lock(&L.mu);
	if (!L.tried)
		lanes_start();
	if (L.held || !L.helpers) {
		ckc_mutex_unlock(&L.mu);
		return -EAGAIN;
	}
	L.held = L.joinable = true;
	L.p = p;
	L.end = p + n;
	L.base = p & ~(uintptr_t)(CKC_LANE_PIECE - 1);
	L.npiece = (L.end - L.base + CKC_LANE_PIECE - 1) / CKC_LANE_PIECE;
	L.fn = fn;
	L.arg = arg;
	atomic_store(&L.next, 0);
	atomic_store(&L.err, 0);
	L.gen++;
	pthread_cond_broadcast(&L.go);
	ckc_mutex_unlock(&L.mu);

	lanes_work();

	ckc_mutex_lock(&L.mu);
	L.joinable = false; /* a helper that wakes now has nothing to do */
	while (L.inside)
		ckc_cond_wait(&L.idle, &L.mu);
	L.held = false;
	int rc = atomic_load(&L.err);
	if (!rc) {
		L.copies++;
		L.bytes += n;
	}
	ckc_mutex_unlock(&L.mu);
	return rc;
}

static int populate(uintptr_t a, uintptr_t b)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t pa = a & ~(pg - 1), pb = (b + pg - 1) & ~(pg - 1);
	return sys_madvise((void *)pa, pb - pa, MADV_POPULATE_WRITE) ? -errno : 0;
}

/* Whether the kernel has MADV_POPULATE_WRITE, asked once of a page of our
 * own: EINVAL is also its answer for memory the program may not write
 * (read-only, or protected for a while to see its writes). */
static bool populate_known(void)
{
	static atomic_int known; /* 0: not asked; 1: yes; -1: no */
	static char ours;
	int k = atomic_load_explicit(&known, memory_order_relaxed);
	if (!k) {
		k = populate((uintptr_t)&ours, (uintptr_t)&ours + 1) == -EINVAL ? -1 : 1;
		atomic_store_explicit(&known, k, memory_order_relaxed);
	}
	return k > 0;
}

/* Faults in the whole pages of [a, b) for writing: 0 or -errno. */
int ckc_lanes_populate(uintptr_t a, uintptr_t b)
{
	int rc = populate(a, b);
	return rc == -EINVAL && !populate_known() ? -ENOSYS : rc;
}

static int memcpy_piece(void *arg, uintptr_t a, uintptr_t b, uint64_t at)
{
	int rc = ckc_lanes_populate(a, b);
	if (!rc)
		rc = ckc_copy_checked((void *)a, (const char *)arg + at, b - a);
	return rc;
}

int ckc_lanes_memcpy(void *dst, const void *src, size_t n)
{
	return ckc_lanes_run((uintptr_t)dst, n, memcpy_piece, (void *)src);
}

void ckc_lanes_configure(int lanes)
{
	ckc_mutex_lock(&L.mu);
	L.lanes = lanes < 0 ? 0 : lanes > CKC_LANES_MAX ? CKC_LANES_MAX : lanes;
	ckc_mutex_unlock(&L.mu);
}

void ckc_lanes_stats(int *helpers, uint64_t *copies, uint64_t *bytes)
{
	ckc_mutex_lock(&L.mu);
	*helpers = L.helpers;
	*copies = L.copies;
	*bytes = L.bytes;
	ckc_mutex_unlock(&L.mu);
}

int ckc_lanes_helpers(void)
{
	ckc_mutex_lock(&L.mu);
	int n = L.helpers;
	ckc_mutex_unlock(&L.mu);
	return n;
}
