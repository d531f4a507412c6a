/* What owing pays, by call site: the last outcomes of each site that made a
 * device-to-host copy (its owed bytes touched by the CPU, or used as they
 * are) decide whether its next copies are owed. */
#include "config.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "owed.h"
#include "owed_int.h"

/* ---- what owing pays, by call site -----------------------------------
 * A program that touches what it copied (PyTorch's torch.save checksums the
 * bytes it writes) pays a fill on top of every capture; one that writes or
 * copies them back to the device gains a copy. The last outcomes of each
 * call site decide whether its next copies are owed. */
#define SITES 64
/* three outcomes decide: a numpy or HDF5 load that CuPy copies into a
 * pinned buffer with the CPU gains nothing from owing (its touch comes
 * before any device copy) and pays the protection, the fault and the fill
 * on top of the copy for every read owed before its site is judged; but a
 * site that alternates (a copy hashed, then one written, or a staging
 * buffer partly touched before its host-to-device copy) needs more than
 * one outcome to be seen gaining */
#define SITE_MIN_OUTCOMES 3
#define SITE_RETRY 64
static struct site_slot {
	_Atomic uintptr_t site;
	atomic_uint hist;  /* the last 32 outcomes, newest in bit 0: 1 paid */
	atomic_uint n;     /* outcomes so far (saturating) */
	atomic_uint skips; /* copies not owed since it stopped paying */
} sites[SITES];

static struct site_slot *site_slot(uintptr_t site, bool make)
{
	if (!site)
		return NULL;
	size_t h = (size_t)((site >> 4) * 0x9e3779b97f4a7c15ull >> 58);
	for (size_t k = 0; k < SITES; k++) {
		struct site_slot *s = &sites[(h + k) % SITES];
		uintptr_t cur = atomic_load(&s->site);
		if (cur == site)
			return s;
		if (cur == 0) {
			if (!make)
				return NULL;
			uintptr_t expected = 0;
			if (atomic_compare_exchange_strong(&s->site, &expected, site) || expected == site)
				return s;
		}
	}
	return NULL;
}

void ckc_owed_site_outcome(uintptr_t site, bool paid)
{
	struct site_slot *s = site_slot(site, true);
	if (!s)
		return;
	unsigned h = atomic_load(&s->hist);
	atomic_store(&s->hist, (h << 1) | (paid ? 1u : 0u));
	if (atomic_load(&s->n) < 1000)
		atomic_fetch_add(&s->n, 1);
}

bool ckc_owed_site_ok(uintptr_t site)
{
	struct site_slot *s = site_slot(site, false);
	if (!s || atomic_load(&s->n) < SITE_MIN_OUTCOMES)
		return true;
	unsigned n = atomic_load(&s->n), seen = n < 16 ? n : 16;
	unsigned last = atomic_load(&s->hist) & ((1u << seen) - 1u);
	/* paying one time in four of the last (up to) sixteen is worth it */
	if ((unsigned)__builtin_popcount(last) * 4 >= seen)
		return true;
	if (atomic_fetch_add(&s->skips, 1) % SITE_RETRY == SITE_RETRY - 1)
		return true;
	return false;
}
