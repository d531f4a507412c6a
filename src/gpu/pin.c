/* Host memory pinned for the gpu tier's transfers: the host tiers
 * registered with the driver, one process of the node at a time and in
 * short calls, by the first mapping thread; the small pinned slots of the
 * program's threads and the pinned windows of readers it makes then. */
#include "config.h"

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "engine_int.h"
#include "gpu_int.h"
#include "log.h"
#include "sys.h"

/* Serialises pinning across the processes of the node: a lock file in the
 * node-local directory. */
static int pin_lock(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.ckptcache-pin.lock", dir && *dir ? dir : "/tmp");
	int fd = sys_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd >= 0)
		while (sys_flock(fd, LOCK_EX) != 0 && errno == EINTR)
			;
	return fd;
}

/* The host tier registers its memory in CKC_PIN_PIECE pieces through
 * these, each a short call (about 0.1 ms for 1 MiB, up to 2 ms on a
 * machine's first use of its memory), so that the program's own CUDA calls
 * are never held up for long (a call of the program's that starts during a
 * registration waits for it); a single copy to or from the tier never
 * crosses a piece. */
static int pin_reg(void *p, size_t n)
{
	ckc_bg_yield();
	CUresult r = gpu_drv.cuMemHostRegister_v2(p, n, CU_MEMHOSTREGISTER_PORTABLE);
	/* let the program's calls in between */
	struct timespec ts = { 0, 100000 };
	nanosleep(&ts, NULL);
	return (int)r;
}

static void pin_unreg(void *p, size_t n)
{
	(void)n;
	gpu_drv.cuMemHostUnregister(p);
}

/* One process of the node registers at a time (pin_lock). */
static int pin_turn = -1;

static void pin_begin(void)
{
	pin_turn = pin_lock(ckc_eng.cfg.ssd_dir);
}

static void pin_end(void)
{
	if (pin_turn >= 0)
		sys_close(pin_turn);
	pin_turn = -1;
}

const ckc_pin_fns_t gpu_pin_fns = { .begin = pin_begin, .end = pin_end, .reg = pin_reg, .unreg = pin_unreg };

/* Registers the host tiers populated whole for transfers at the link's
 * speed: one process of the node at a time (pin_lock), in short calls. A
 * growing tier is not registered: registering while the program runs held
 * up its own CUDA calls (on an H100 the restores of the HPDC'23 shot ran at
 * 170-200 GB/s with it, 870-1050 GB/s without), so its transfers with the
 * gpu tier go through the threads' pinned buffers. */
void gpu_pin_host(ckc_gpu_t *g)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		ckc_tier_t *h = &ckc_eng.tier[l];
		uint64_t t0 = ckc_now_ns(), done = 0;
		int r = ckc_tier_pin(h, &gpu_pin_fns, &g->stop, &done);
		if (r == 0 && !atomic_load(&g->stop))
			ckc_info("%s tier: %llu bytes pinned in %.1f ms", h->name, (unsigned long long)done,
				 (double)(ckc_now_ns() - t0) / 1e6);
		else if (r > 0)
			ckc_warn("%s tier: cannot pin its memory past %llu bytes (CUDA error %d): copies "
				 "there run at pageable speed",
				 h->name, (unsigned long long)done, r);
	}
}

/* Small pinned buffers for the program's threads (the edges of a
 * synchronous capture), allocated here in the background: the first
 * pinned allocation of a process costs the better part of a millisecond,
 * which a checkpoint should not pay. */
#define SLOTS 16
static _Atomic(char *) slot_block;
static size_t slot_len;
static atomic_int slot_next;

void gpu_make_slots(void)
{
	void *b = NULL;
	size_t len = 2 * (size_t)sysconf(_SC_PAGESIZE);
	if (gpu_drv.cuMemAllocHost_v2(&b, SLOTS * len) != CUDA_SUCCESS)
		return;
	slot_len = len;
	atomic_store_explicit(&slot_block, (char *)b, memory_order_release);
}

void *ckc_gpu_pinned_slot(size_t len)
{
	char *b = atomic_load_explicit(&slot_block, memory_order_acquire);
	if (!b || len > slot_len)
		return NULL;
	int i = atomic_fetch_add(&slot_next, 1);
	return i < SLOTS ? b + (size_t)i * slot_len : NULL;
}

/* Windows for readers: a few pinned ones made in the background with the
 * slots (a device-to-host transfer into pinned memory runs at the link's
 * speed), then malloc'd ones. */
#define WINDOWS 4
static _Atomic(char *) win_pool[WINDOWS];
static char *win_pinned[WINDOWS];

void gpu_make_windows(void)
{
	for (int i = 0; i < WINDOWS; i++) {
		void *w = NULL;
		if (gpu_drv.cuMemAllocHost_v2(&w, CKC_GPU_WINDOW) != CUDA_SUCCESS)
			return;
		win_pinned[i] = w;
		atomic_store(&win_pool[i], (char *)w);
	}
}

void *ckc_gpu_window_get(void)
{
	for (int i = 0; i < WINDOWS; i++) {
		char *w = atomic_exchange(&win_pool[i], NULL);
		if (w)
			return w;
	}
	return sys_malloc(CKC_GPU_WINDOW);
}

void ckc_gpu_window_put(void *w)
{
	for (int i = 0; i < WINDOWS; i++)
		if (win_pinned[i] == w) {
			atomic_store(&win_pool[i], (char *)w);
			return;
		}
	sys_free(w);
}

#endif /* HAVE_CUDA_H */
