/* The kernel's early touch of program buffers (ktouch.h): a queue of
 * buffers, and one thread, started on the first note, that has the kernel
 * read a byte of each of their pages. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ckc.h"
#include "io.h"
#include "ktouch.h"
#include "lockrank.h"
#include "log.h"
#include "thread.h"
#include "sys.h"


/* Pages one system call touches: 1 MiB of 4 KiB pages, 2 to 3 ms where
 * the touch is needed at all. */
#define KT_BATCH 256

enum { KT_IDLE, KT_TOUCHING, KT_STOPPED, KT_FAILED };
static const char *const kt_state_name[] = { "idle", "touching", "stopped", "failed" };
static const char *const kt_mode_name[] = { "auto", "on", "off" };

static struct {
	ckc_mutex_t mu;
	pthread_cond_t cv;
	int mode;
	int state;
	bool running; /* the thread exists (joined by ckc_ktouch_stop) */
	bool stop;
	pthread_t thread;
	uintptr_t qa[CKC_KTOUCH_QUEUE], qb[CKC_KTOUCH_QUEUE];
	int qhead, qlen;
	uint64_t buffers, pages, dropped, ns;
	uint32_t probe_ns[CKC_KTOUCH_PROBES];
	int probes;
	/* the file the touched bytes go to, and which file it is (a
	 * descriptor the program closed and reused is never written) */
	int fd;
	dev_t dev;
	ino_t ino;
} K = { .mu = CKC_MUTEX_INIT(KTOUCH), .cv = PTHREAD_COND_INITIALIZER, .fd = -1 };

/* Read without the lock by the note's early return. */
static atomic_int kt_live = 1;
/* the program ends (ckc_ktouch_end) */
static atomic_bool kt_ending;
/* Set by the stop for a thread waiting for the program to pause. */
static atomic_bool kt_halt;

/* Waits until the program has made no copy for CKC_KTOUCH_QUIET_NS: a
 * touch beside the program's own copies slows them more than it saves its
 * later reads (on the build machine, a stencil code's 48 bands written
 * and read back to back ran at half speed beside the touch). False when
 * the thread is to stop. */
static bool kt_wait_quiet(void)
{
	while (!atomic_load_explicit(&kt_halt, memory_order_acquire)) {
		uint64_t quiet = ckc_prog_quiet_ns();
		if (quiet >= CKC_KTOUCH_QUIET_NS)
			return true;
		/* the rest of the pause asked for (the whole of it while the
		 * program copies), 0.2 ms at least */
		uint64_t left = CKC_KTOUCH_QUIET_NS - quiet;
		struct timespec ts = { 0, (long)(left > 200000 ? left : 200000) };
		nanosleep(&ts, NULL);
	}
	return false;
}

int ckc_ktouch_judge(const uint32_t *ns_per_page, int probes)
{
	for (int i = 0; i < probes && i < CKC_KTOUCH_PROBES; i++)
		if (ns_per_page[i] >= CKC_KTOUCH_SLOW_NS)
			return 1;
	return probes >= CKC_KTOUCH_PROBES ? 0 : -1;
}

void ckc_ktouch_configure(int mode)
{
	ckc_mutex_lock(&K.mu);
	K.mode = mode;
	atomic_store(&kt_ending, false);
	atomic_store(&kt_live, mode != CKC_KTOUCH_OFF && K.state != KT_STOPPED && K.state != KT_FAILED);
	ckc_mutex_unlock(&K.mu);
}

/* The file, still ours (made on first use). */
static bool kt_sink(void)
{
	struct stat st;

	if (K.fd >= 0 && sys_fstat(K.fd, &st) == 0 && st.st_dev == K.dev && st.st_ino == K.ino)
		return true;
	if (atomic_load(&kt_ending))
		return false;
	/* gone: the program closed the number (and may use it for its own
	 * file now), so it is not ours to close. An unnamed file (the
	 * engine's open keeps it above the program's numbers), in memory
	 * where there is a /dev/shm. */
	K.fd = sys_open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (K.fd < 0)
		K.fd = sys_open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (K.fd < 0 || sys_fstat(K.fd, &st) != 0) {
		ckc_debug("kernel touch: no file to touch into (%s): buffers are not touched", strerror(errno));
		if (K.fd >= 0)
			sys_close(K.fd);
		K.fd = -1;
		return false;
	}
	K.dev = st.st_dev;
	K.ino = st.st_ino;
	return true;
}

/* Has the kernel read the first byte of each page that begins in [a, b),
 * a batch at a time, each while the program pauses. Returns the pages
 * touched (0 when the buffer is gone; fewer when the thread is to stop),
 * or -1 without a file to touch into; *ns: the time the touches took. */
static long kt_touch(uintptr_t a, uintptr_t b, uint64_t *ns)
{
	struct iovec iov[KT_BATCH];
	long pg = sysconf(_SC_PAGESIZE), done = 0;

	*ns = 0;
	a = (a + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	while (a < b) {
		int k = 0;
		for (; k < KT_BATCH && a < b; k++, a += (uintptr_t)pg) {
			iov[k].iov_base = (void *)a;
			iov[k].iov_len = 1;
		}
		if (!kt_wait_quiet())
			return done;
		if (!kt_sink())
			return -1;
		uint64_t t0 = ckc_now_ns();
		long rc = ckc_syscall6(SYS_pwritev, K.fd, (long)iov, k, 0, 0, 0);
		*ns += ckc_now_ns() - t0;
		if (rc < 0)
			return done; /* EFAULT: the program let the buffer go */
		done += rc;
		if (rc < k)
			return done;
	}
	return done;
}

static void *kt_main(void *unused)
{
	(void)unused;
	ckc_io_guard = 1;
	ckc_mutex_lock(&K.mu);
	for (;;) {
		while (K.qlen == 0 && !K.stop)
			ckc_cond_wait(&K.cv, &K.mu);
		if (K.stop)
			break;
		uintptr_t a = K.qa[K.qhead], b = K.qb[K.qhead];
		K.qhead = (K.qhead + 1) % CKC_KTOUCH_QUEUE;
		K.qlen--;
		ckc_mutex_unlock(&K.mu);
		uint64_t ns;
		long n = kt_touch(a, b, &ns);
		ckc_mutex_lock(&K.mu);
		if (n < 0 && atomic_load(&kt_ending)) {
			K.qlen = 0;
			continue;
		}
		if (n < 0) {
			K.state = KT_FAILED;
			atomic_store(&kt_live, 0);
			K.qlen = 0;
			continue;
		}
		K.buffers++;
		K.pages += (uint64_t)n;
		K.ns += ns;
		if (n >= 64 && K.probes < CKC_KTOUCH_PROBES) {
			uint64_t per = ns / (uint64_t)n;
			K.probe_ns[K.probes++] = per > UINT32_MAX ? UINT32_MAX : (uint32_t)per;
		}
		if (K.mode == CKC_KTOUCH_AUTO && ckc_ktouch_judge(K.probe_ns, K.probes) == 0) {
			ckc_debug("kernel touch: %d touches cost under %u ns a page: not needed here",
				  K.probes, CKC_KTOUCH_SLOW_NS);
			K.state = KT_STOPPED;
			atomic_store(&kt_live, 0);
			K.qlen = 0;
		}
	}
	ckc_mutex_unlock(&K.mu);
	return NULL;
}

/* No thread any more: its file closed, its queue emptied; the next note
 * starts them again. What was measured, and the state the statistics
 * show, are kept. */
static void kt_forget(void)
{
	if (K.fd >= 0)
		sys_close(K.fd);
	K.fd = -1;
	K.running = K.stop = false;
	atomic_store(&kt_halt, false);
	K.qlen = K.qhead = 0;
}

/* A forked child has no thread, and the lock may have been held by a
 * thread that is not there; the file was the parent's at the fork and is
 * closed (before the program can reuse its number). */
static void kt_child(void)
{
	ckc_mutex_init(&K.mu, CKC_RANK_KTOUCH);
	pthread_cond_init(&K.cv, NULL);
	kt_forget();
}

/* Lock held. */
static void kt_start(void)
{
	static atomic_bool forks_known;
	pthread_t t;

	if (!atomic_exchange(&forks_known, true))
		pthread_atfork(NULL, NULL, kt_child);
	int rc = ckc_thread_start(&t, kt_main, NULL, "ckc-ktouch", false);
	if (rc) {
		ckc_debug("kernel touch: no thread (%s)", strerror(rc));
		K.state = KT_FAILED;
		atomic_store(&kt_live, 0);
		return;
	}
	K.thread = t;
	K.running = true;
	K.state = KT_TOUCHING;
}

void ckc_ktouch_end(void)
{
	atomic_store(&kt_ending, true);
	atomic_store(&kt_live, 0);
	ckc_mutex_lock(&K.mu);
	K.qlen = 0;
	ckc_mutex_unlock(&K.mu);
}

void ckc_ktouch_note(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p, b = a + n;

	if (n < CKC_KTOUCH_MIN || !atomic_load_explicit(&kt_live, memory_order_relaxed))
		return;
	ckc_mutex_lock(&K.mu);
	if (K.mode == CKC_KTOUCH_OFF || K.state == KT_STOPPED || K.state == KT_FAILED)
		goto out;
	if (!K.running)
		kt_start();
	if (K.state != KT_TOUCHING)
		goto out;
	/* a buffer noted again before its touch is touched once */
	for (int i = 0; i < K.qlen; i++) {
		int j = (K.qhead + i) % CKC_KTOUCH_QUEUE;
		if (K.qa[j] <= a && b <= K.qb[j])
			goto out;
	}
	if (K.qlen == CKC_KTOUCH_QUEUE) {
		K.dropped++;
		goto out;
	}
	int j = (K.qhead + K.qlen++) % CKC_KTOUCH_QUEUE;
	K.qa[j] = a;
	K.qb[j] = b;
	pthread_cond_signal(&K.cv);
out:
	ckc_mutex_unlock(&K.mu);
}

void ckc_ktouch_stop(void)
{
	ckc_mutex_lock(&K.mu);
	bool running = K.running;
	K.stop = true;
	atomic_store(&kt_halt, true);
	pthread_cond_signal(&K.cv);
	ckc_mutex_unlock(&K.mu);
	if (running)
		pthread_join(K.thread, NULL);
	ckc_mutex_lock(&K.mu);
	kt_forget();
	ckc_mutex_unlock(&K.mu);
}

void ckc_ktouch_stats(ckc_ktouch_stats_t *s)
{
	ckc_mutex_lock(&K.mu);
	s->mode = kt_mode_name[K.mode];
	s->state = kt_state_name[K.state];
	s->buffers = K.buffers;
	s->pages = K.pages;
	s->dropped = K.dropped;
	s->seconds = (double)K.ns / 1e9;
	s->probes = K.probes;
	memcpy(s->probe_ns, K.probe_ns, sizeof(s->probe_ns));
	ckc_mutex_unlock(&K.mu);
}
