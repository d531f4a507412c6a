/* What the parts of the owed host ranges share (owed.c, owed_site.c,
 * owed_fault.c, owed_io.c): the table and its lock, the events'
 * operations, the page arithmetic, and the calls one part makes into
 * another. Nothing outside them includes it. */
#ifndef CKC_OWED_INT_H
#define CKC_OWED_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "owed.h"
#include "owedtab.h"

#define CKC_TLS_IE __attribute__((tls_model("initial-exec")))

static inline uintptr_t page_down(uintptr_t x)
{
	return x & ~(ckc_page_size() - 1);
}

static inline uintptr_t page_up(uintptr_t x)
{
	uintptr_t ps = ckc_page_size();
	return x > UINTPTR_MAX - ps ? page_down(UINTPTR_MAX) : (x + ps - 1) & ~(ps - 1);
}

/* ---- owed.c ---- */

/* The owed entries, under ckc_owed_tab_lock. */
extern ckc_owedtab_t ckc_owed_tab;
/* This thread holds the table; the host range its fill is writing. */
extern __thread CKC_TLS_IE bool ckc_owed_tab_held;
extern __thread CKC_TLS_IE uintptr_t ckc_owed_filling_lo, ckc_owed_filling_hi;
/* Takes the table: false when this thread holds it already. */
bool ckc_owed_tab_lock(void);
void ckc_owed_tab_unlock(void);
/* The events of the device copies (NULL before the gpu tier is up). */
extern const ckc_owed_ops_t *ckc_owed_ops;
/* The owed pages of [lo, hi) are filled (fill) or dropped; touch: the
 * program's own use of the bytes. Table lock held. */
void ckc_owed_cut_touch_locked(uintptr_t lo, uintptr_t hi, bool fill, bool touch);
/* Waits until no other thread's fill or drop works in [lo, hi) (a claim:
 * see owed.c), at most a bound; true if one did. Table lock held (let go
 * meanwhile). */
bool ckc_owed_claims_wait(uintptr_t lo, uintptr_t hi);
/* The part at e was used: its site paid. Table lock held. */
void ckc_owed_part_used(ckc_owed_t *e);
/* Whether a was in a range filled lately. */
bool ckc_owed_recent_has(uintptr_t a);

/* ---- owed_site.c ---- */

/* One outcome of a call site's owing: paid (the owed bytes were used as
 * they are) or not (the CPU touched them first). */
void ckc_owed_site_outcome(uintptr_t site, bool paid);

/* ---- owed_fault.c ---- */

/* Counts new owings: a page owed anew may fault anew. */
extern atomic_uint_fast64_t ckc_owed_gen;
/* Installs the fault handler once: 0 or -errno. */
int ckc_owed_segv_install(void);

#endif
