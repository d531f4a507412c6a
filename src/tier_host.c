/* The host tier: one anonymous mapping (huge pages advised) whose pages a
 * background thread populates, so start-up never waits for them. Bytes move
 * in and out with memcpy. The mapping is never moved, so a later pinning
 * step can register it as it is. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "engine_int.h"
#include "log.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Short holds of the address space's lock, which a page protection of the
 * program's (a device capture) waits for: one huge page at a time. */
#define HOST_POPULATE_CHUNK (2u << 20)

static void *host_toucher(void *arg)
{
	ckc_tier_t *t = arg;
	ckc_io_guard = 1; /* never re-enter the wrappers */
	ckc_tl_background = true;
	uint64_t cap = t->arena.capacity;

	for (uint64_t off = 0; off < cap && !atomic_load(&t->toucher_stop);
	     off += HOST_POPULATE_CHUNK) {
		uint64_t len = cap - off < HOST_POPULATE_CHUNK ? cap - off : HOST_POPULATE_CHUNK;
		ckc_bg_yield();
		/* MADV_POPULATE_WRITE faults the pages in without writing to
		 * them, so it can run while the program's bytes arrive. */
		if (madvise(t->base + off, len, MADV_POPULATE_WRITE) != 0) {
			ckc_debug("host tier: pages are populated on first use (%s)", strerror(errno));
			break;
		}
		atomic_store(&t->populated, off + len);
	}
	atomic_store(&t->populated, cap);
	return NULL;
}

int ckc_host_open(ckc_tier_t *t, uint64_t capacity)
{
	int rc = arena_init(&t->arena, capacity, CKC_ALIGN);
	if (rc)
		return rc;
	capacity = t->arena.capacity;
	void *p = mmap(NULL, capacity, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		arena_fini(&t->arena);
		return rc;
	}
	(void)madvise(p, capacity, MADV_HUGEPAGE);
	t->base = p;
	atomic_store(&t->populated, 0);
	atomic_store(&t->toucher_stop, false);
	t->toucher_running = pthread_create(&t->toucher, NULL, host_toucher, t) == 0;
	if (!t->toucher_running)
		atomic_store(&t->populated, capacity);
	return 0;
}

void ckc_host_close(ckc_tier_t *t)
{
	if (t->toucher_running) {
		atomic_store(&t->toucher_stop, true);
		pthread_join(t->toucher, NULL);
		t->toucher_running = false;
	}
	if (t->base)
		munmap(t->base, t->arena.capacity);
	t->base = NULL;
	arena_fini(&t->arena);
}

void ckc_wait_ready(void)
{
	for (int l = 0; l < ckc_eng.ntier - 1; l++) {
		ckc_tier_t *t = &ckc_eng.tier[l];
		if (t->kind == TIER_HOST && t->toucher_running)
			while (atomic_load(&t->populated) < t->arena.capacity) {
				struct timespec ts = { 0, 1000000 };
				nanosleep(&ts, NULL);
			}
	}
}
