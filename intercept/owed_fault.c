/* The fault handler of owed host ranges: a CPU touch of an owed page fills
 * the entry that owes it, a page of ours that faults again is let through
 * as it is, and a fault that is not ours goes to the program's SIGSEGV
 * handler (kept behind ours) or to the default action. */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "backtrace.h"
#include "copy.h"
#include "intercept.h"
#include "log.h"
#include "owed.h"
#include "owed_int.h"
#include "owedtab.h"

/* ---- the fault handler ---------------------------------------------- */

static atomic_bool segv_installed;
static struct sigaction segv_prev;
static ckc_mutex_t segv_lock = CKC_MUTEX_INIT(SEGV);
CKC_LOCKS_AT_START(segv_lock, ckc_locks_add, &segv_lock)

/* The program's handler, or the default action. */
static void segv_chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction prev;
	ckc_mutex_lock(&segv_lock);
	prev = segv_prev;
	if (prev.sa_flags & SA_RESETHAND) {
		memset(&segv_prev, 0, sizeof(segv_prev));
		segv_prev.sa_handler = SIG_DFL;
	}
	ckc_mutex_unlock(&segv_lock);
	if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
		prev.sa_sigaction(sig, si, uc);
	} else if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
		/* a fault cannot be ignored: the default action, when the
		 * access is made again (set with the real sigaction: the
		 * interposed one would keep this handler in front) */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		atomic_store(&segv_installed, false);
		ckc_real_sigaction(sig, &dfl, NULL);
	} else {
		prev.sa_handler(sig);
	}
}

/* The page of this thread's last fault that the handler let through as
 * its own, how many times in a row, and the table's generation then (a
 * page owed anew since faults anew). */
static __thread CKC_TLS_IE struct {
	uintptr_t page;
	unsigned again;
	uint64_t gen;
} fault_last; /* one variable: each takes a slot the loader relocates */
atomic_uint_fast64_t ckc_owed_gen;

/* Makes the page of a accessible as it is: the way out of a fault that
 * would otherwise come back forever. */
static void page_release(uintptr_t a, void *uc, const char *why)
{
	int rc = mprotect((void *)page_down(a), ckc_page_size(), PROT_READ | PROT_WRITE);
	ckc_error("device capture: %s at %p: the page is made accessible as it is%s", why, (void *)a,
		  rc ? " (that failed: the fault goes to the program)" : "");
	ckc_backtrace_log("device capture: unexpected fault", uc);
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	uintptr_t a = (uintptr_t)si->si_addr, page = page_down(a);

	if (si->si_code != SEGV_ACCERR)
		goto chain;
	if (ckc_owed_tab_held) {
		/* this thread's own fill wrote to a page still protected: it
		 * holds the right bytes once the write goes through */
		if (a >= ckc_owed_filling_lo && a < ckc_owed_filling_hi) {
			page_release(a, uc, "a fill faulted on its own page");
			errno = saved;
			return;
		}
		goto chain;
	}
	uint64_t gen = atomic_load(&ckc_owed_gen);
	fault_last.again = page == fault_last.page && gen == fault_last.gen ? fault_last.again + 1 : 0;
	fault_last.page = page;
	fault_last.gen = gen;
	if (fault_last.again >= 2) {
		/* ours, filled or let through twice already, still faulting */
		fault_last.page = 0;
		page_release(a, uc, "a page faulted again after its fill");
		errno = saved;
		return;
	}
	bool ours = false;
	if (atomic_load(&ckc_owed_count)) {
		ckc_enter();
		ckc_prog_begin();
		if (ckc_owed_tab_lock()) {
			/* a page another thread is filling: the access is made
			 * again once the fill is done */
			bool waited = ckc_owed_claims_wait(page, page + ckc_page_size());
			size_t i = ckc_owedtab_first(&ckc_owed_tab, a, a + 1);
			ours = i < ckc_owed_tab.n || waited;
			if (i < ckc_owed_tab.n) {
				/* the whole entry: a program that reads a staging
				 * buffer reads all of it */
				uintptr_t lo = ckc_owed_tab.e[i].start, hi = ckc_owed_tab.e[i].end;
				ckc_owed_cut_touch_locked(lo, hi, true, true);
			}
			ckc_owed_tab_unlock();
		}
		ckc_prog_end();
		ckc_leave();
	}
	/* another thread may have filled it just before: retried once */
	if (ours || (fault_last.again == 0 && ckc_owed_recent_has(a))) {
		errno = saved;
		return;
	}
chain:
	fault_last.page = 0;
	ckc_copy_fault(sig, si, uc);
	segv_chain(sig, si, uc);
	errno = saved;
}

int ckc_owed_segv_install(void)
{
	if (atomic_load(&segv_installed))
		return 0;
	ckc_mutex_lock(&segv_lock);
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
	ckc_mutex_unlock(&segv_lock);
	return rc;
}

/* The program's own SIGSEGV handler runs behind ours. */
int ckc_owed_sigaction(const struct sigaction *act, struct sigaction *old)
{
	if (!atomic_load(&segv_installed))
		return 1;
	ckc_mutex_lock(&segv_lock);
	if (old)
		*old = segv_prev;
	if (act)
		segv_prev = *act;
	ckc_mutex_unlock(&segv_lock);
	return 0;
}