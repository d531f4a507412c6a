/* Backtraces for the unexpected: a fault the library did not expect, or a
 * fallback taken where the normal path failed, is logged at
 * CKPTCACHE_LOG=debug with the call chain that led there, once per site.
 * libunwind is loaded when the first backtrace of a fault is wanted (the
 * library needs it for nothing else): it unwinds from the interrupted
 * context through the signal frame and names static functions too. A
 * fallback's backtrace, and a fault's without libunwind, come from glibc's
 * backtrace() (the frames of the current stack). */
#include "config.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "backtrace.h"
#include "log.h"
#include "sys.h"

#define BT_DEPTH 24
#define BT_SITES 32

/* Sites already reported (a site is the faulting or calling address). */
static _Atomic(uintptr_t) bt_seen[BT_SITES];

static bool bt_first_time(uintptr_t site)
{
	for (int i = 0; i < BT_SITES; i++) {
		uintptr_t cur = atomic_load(&bt_seen[i]);
		if (cur == site)
			return false;
		if (cur == 0) {
			uintptr_t expected = 0;
			if (atomic_compare_exchange_strong(&bt_seen[i], &expected, site))
				return true;
			if (expected == site)
				return false;
		}
	}
	/* the table is full: report nothing more */
	return false;
}

#if defined(HAVE_LIBUNWIND) && defined(__x86_64__)
/* libunwind's local unwinder, by its exported names (the header maps
 * unw_init_local2 and the others to them). */
static struct {
	int (*init2)(unw_cursor_t *, unw_context_t *, int);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*proc_name)(unw_cursor_t *, char *, size_t, unw_word_t *);
} bt_lib;
static atomic_int bt_state; /* 0 not tried, 1 loaded, -1 absent */

/* Opens libunwind: from the loader's path, else beside this library (a
 * build carried to a machine that lacks it). */
static bool bt_load(void)
{
	int st = atomic_load(&bt_state);
	if (st)
		return st > 0;
	void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	Dl_info di;
	if (!h && dladdr((void *)bt_load, &di) && di.dli_fname) {
		char path[PATH_MAX];
		const char *slash = strrchr(di.dli_fname, '/');
		if (slash && (size_t)(slash - di.dli_fname) + 20 < sizeof(path)) {
			snprintf(path, sizeof(path), "%.*s/libunwind.so.8", (int)(slash - di.dli_fname),
				 di.dli_fname);
			h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
	}
	if (h) {
		*(void **)&bt_lib.init2 = sys_dlsym(h, "_ULx86_64_init_local2");
		*(void **)&bt_lib.step = sys_dlsym(h, "_ULx86_64_step");
		*(void **)&bt_lib.get_reg = sys_dlsym(h, "_ULx86_64_get_reg");
		*(void **)&bt_lib.proc_name = sys_dlsym(h, "_ULx86_64_get_proc_name");
	}
	st = h && bt_lib.init2 && bt_lib.step && bt_lib.get_reg && bt_lib.proc_name ? 1 : -1;
	atomic_store(&bt_state, st);
	return st > 0;
}

/* One line per frame into buf, from the signal context uc; returns the
 * frames written. */
static int bt_unwind(void *uc, char *buf, size_t len)
{
	unw_cursor_t cursor;
	int frames = 0;
	size_t used = 0;

	if (!uc || bt_lib.init2(&cursor, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	do {
		unw_word_t ip = 0, off = 0;
		char name[128];
		if (bt_lib.get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		if (bt_lib.proc_name(&cursor, name, sizeof(name), &off) < 0)
			snprintf(name, sizeof(name), "?");
		Dl_info di;
		const char *obj = dladdr((void *)ip, &di) && di.dli_fname ? di.dli_fname : "?";
		const char *base = strrchr(obj, '/');
		int k = snprintf(buf + used, len - used, "\n  #%d %#lx %s+%#lx (%s)", frames, (unsigned long)ip,
				 name, (unsigned long)off, base ? base + 1 : obj);
		if (k < 0 || (size_t)k >= len - used)
			break;
		used += (size_t)k;
		frames++;
	} while (frames < BT_DEPTH && bt_lib.step(&cursor) > 0);
	return frames;
}
#else
static bool bt_load(void)
{
	return false;
}

static int bt_unwind(void *uc, char *buf, size_t len)
{
	(void)uc;
	(void)buf;
	(void)len;
	return 0;
}
#endif

/* The same with glibc's unwinder (the current stack, from here). */
static int bt_glibc(char *buf, size_t len)
{
	void *ips[BT_DEPTH];
	int n = backtrace(ips, BT_DEPTH), frames = 0;
	size_t used = 0;
	for (int i = 0; i < n; i++) {
		Dl_info di;
		bool named = dladdr(ips[i], &di);
		const char *obj = named && di.dli_fname ? di.dli_fname : "?";
		const char *base = strrchr(obj, '/');
		int k = snprintf(buf + used, len - used, "\n  #%d %p %s (%s)", i, ips[i],
				 named && di.dli_sname ? di.dli_sname : "?", base ? base + 1 : obj);
		if (k < 0 || (size_t)k >= len - used)
			break;
		used += (size_t)k;
		frames++;
	}
	return frames;
}

void ckc_backtrace_log(const char *what, void *uc)
{
	if (ckc_log_threshold < CKC_LOG_DEBUG)
		return;
	uintptr_t site = (uintptr_t)__builtin_return_address(0);
#if defined(__x86_64__)
	if (uc)
		site = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#endif
	if (!bt_first_time(site))
		return;
	char buf[4096];
	buf[0] = '\0';
	int n = bt_load() ? bt_unwind(uc, buf, sizeof(buf)) : 0;
	const char *how = "libunwind";
	if (n == 0) {
		n = bt_glibc(buf, sizeof(buf));
		how = "glibc";
	}
	ckc_debug("%s: backtrace (%s, %d frames):%s", what, how, n, buf);
}
