/* The gpu tier's background threads give way to the program. */
#include "config.h"

#include <stdatomic.h>
#include <time.h>

#include "engine_int.h"
#include "sys.h"

/* The driver serialises more than the hardware does, and the kernel more
 * than the program sees: a transfer to or from pageable memory, a
 * registration of host memory and the mapping of device memory hold the
 * program's own calls for their whole length; a population of host pages
 * holds the address space's lock, which a capture's page protection needs.
 * The cache's background threads (flushers, prefetcher, mapping thread,
 * host populator) therefore work in short pieces, and start each one only
 * while no copy or capture of the program is in progress, waiting at most
 * CKC_BG_YIELD_MAX_NS for it. */

static atomic_int prog_busy;

void ckc_prog_begin(void)
{
	atomic_fetch_add_explicit(&prog_busy, 1, memory_order_acq_rel);
}

void ckc_prog_end(void)
{
	atomic_fetch_sub_explicit(&prog_busy, 1, memory_order_acq_rel);
}

int ckc_prog_copies(void)
{
	return atomic_load_explicit(&prog_busy, memory_order_acquire);
}

void ckc_bg_yield(void)
{
	if (!ckc_tl_background || atomic_load_explicit(&prog_busy, memory_order_acquire) <= 0)
		return;
	uint64_t t0 = ckc_now_ns();
	while (atomic_load_explicit(&prog_busy, memory_order_acquire) > 0 && ckc_now_ns() - t0 < CKC_BG_YIELD_MAX_NS) {
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}
