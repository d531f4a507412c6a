/* Resolution of the real libc functions (dlsym(RTLD_NEXT)), lazily, so a
 * wrapper called before the library's constructor (by another library's
 * constructor, say) still reaches libc. */
#include "config.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <string.h>

#include "io.h"
#include "log.h"
#include "real.h"

CKC_HOT_DATA ckc_real_t ckc_real;
CKC_HOT_DATA uint32_t ckc_real_kernel;

static pthread_once_t real_once = PTHREAD_ONCE_INIT;

/* What a wrapper whose C library function is missing calls instead: it
 * fails (ENOSYS; NULL for the FILE * functions) and says so once. The
 * stubs take no arguments: on the System V ABI extra arguments are
 * harmless to a callee that ignores them. */
static long real_stub_neg1(void)
{
	ckc_real_missing("a function this program calls");
	errno = ENOSYS;
	return -1;
}

static void *real_stub_null(void)
{
	ckc_real_missing("a function this program calls");
	errno = ENOSYS;
	return NULL;
}

/* Each function's name, its slot in ckc_real, and whether its stub
 * returns NULL (a FILE *, DIR *, FTS *, char * or wchar_t *) rather than
 * -1 (an int, or mmap's MAP_FAILED). The names are one block of bytes and
 * the table holds offsets into it: a table of pointers would be relocated
 * by the loader at every start, a page copied for each process. */
#define CKC_REAL_NAME_FIELD(name, ret, args) char name[sizeof(#name)];
#define CKC_REAL_NAME_INIT(name, ret, args) #name,
static const struct real_names {
	CKC_REAL_FUNCS(CKC_REAL_NAME_FIELD)
} real_names = { CKC_REAL_FUNCS(CKC_REAL_NAME_INIT) };
#define CKC_REAL_ENTRY(name, ret, args)                                                 \
	{ offsetof(struct real_names, name), offsetof(ckc_real_t, name),                \
	  _Generic((ret *)0, FILE **: true, DIR **: true, FTS **: true, char **: true, wchar_t **: true, default: false) },
static const struct real_entry {
	uint16_t name;
	uint16_t off;
	bool null_stub;
} real_tab[CKC_REAL_N] = { CKC_REAL_FUNCS(CKC_REAL_ENTRY) };
_Static_assert(sizeof(struct real_names) <= UINT16_MAX && sizeof(ckc_real_t) <= UINT16_MAX, "real_tab's offsets");
#undef CKC_REAL_ENTRY
#undef CKC_REAL_NAME_INIT
#undef CKC_REAL_NAME_FIELD

/* The loaded object f lies in (NULL: none). _dl_find_object (glibc 2.35)
 * is async-signal-safe and allocates nothing: the first stat of a process
 * may be a signal handler's, which interrupted malloc. dladdr, before it,
 * searches the object's symbols (some 30,000 instructions each). */
CKC_START_PATH static const void *real_object(void *f)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
	struct dl_find_object o;
	return _dl_find_object(f, &o) == 0 ? (const void *)o.dlfo_link_map : NULL;
#else
	Dl_info d;
	return dladdr(f, &d) ? d.dli_fbase : NULL;
#endif
}

/* Whether f is a function of the C library itself (of the object that
 * defines gnu_get_libc_version, which nothing interposes). */
CKC_START_PATH static bool real_in_libc(void *f)
{
	static const void *_Atomic libc;
	const void *c = atomic_load(&libc);
	if (!c) {
		c = real_object((void *)gnu_get_libc_version);
		if (!c)
			return false;
		atomic_store(&libc, c);
	}
	return real_object(f) == c;
}

CKC_START_PATH void ckc_real_resolve_one(unsigned i)
{
	dlsym_fn dls = ckc_real_dlsym();
	if (i >= CKC_REAL_N)
		return;
	const struct real_entry *e = &real_tab[i];
	const char *name = (const char *)&real_names + e->name;
	/* the __xstat family is only a compatibility symbol on glibc >= 2.33,
	 * which plain dlsym does not return */
	void *f = dls ? dls(RTLD_NEXT, name) : NULL;
	if (!f)
		f = dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5");
	void (*fn)(void) = f ? (void (*)(void))f
			     : e->null_stub ? (void (*)(void))real_stub_null : (void (*)(void))real_stub_neg1;
	/* every thread that looks it up finds the same function */
	__atomic_store_n((void (**)(void))((char *)&ckc_real + e->off), fn, __ATOMIC_RELAXED);
	uint32_t bit = ckc_real_kernel_bit(i);
	if (CKC_REAL_KERNEL && bit && f && real_in_libc(f))
		__atomic_fetch_or(&ckc_real_kernel, bit, __ATOMIC_RELAXED);
}

static void real_resolve_all(void)
{
	for (unsigned i = 0; i < CKC_REAL_N; i++)
		ckc_real_resolve_one(i);
}

/* Those of list not looked up yet (each slot set once: a second lookup
 * would find the same function). */
CKC_START_PATH static void real_resolve_list(const unsigned *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!__atomic_load_n((void (**)(void))((char *)&ckc_real + real_tab[list[i]].off), __ATOMIC_RELAXED))
			ckc_real_resolve_one(list[i]);
}

CKC_START_PATH void ckc_real_resolve_early(void)
{
	/* and those a forked child calls before it runs a program or ends:
	 * looked up in the parent once, not in each child */
	static const unsigned early[] = { CKC_REAL_I_write,  CKC_REAL_I_read,   CKC_REAL_I_close,
					  CKC_REAL_I_open,   CKC_REAL_I_fsync,  CKC_REAL_I_sigaction,
					  CKC_REAL_I__exit,  CKC_REAL_I__Exit,  CKC_REAL_I_execve,
					  CKC_REAL_I_execvp, CKC_REAL_I_dup2 };
	real_resolve_list(early, sizeof(early) / sizeof(early[0]));
}

CKC_START_PATH void ckc_real_resolve_for_child(void)
{
	/* what a forked child of a shell or a make calls between its fork and
	 * its new program: the exec family, and what the exec's ask of the
	 * node's holders opens; looked up in each child, each lookup walks
	 * the loader's tables, whose pages the child faults in again */
	static const unsigned child[] = { CKC_REAL_I_execve,   CKC_REAL_I_execv,  CKC_REAL_I_execvp,
					  CKC_REAL_I_execvpe,  CKC_REAL_I_fexecve, CKC_REAL_I_execveat,
					  CKC_REAL_I_openat,   CKC_REAL_I_fstat,  CKC_REAL_I_mmap,
					  CKC_REAL_I_munmap,   CKC_REAL_I_close,  CKC_REAL_I_ftruncate,
					  CKC_REAL_I__exit,    CKC_REAL_I_dup2 };
	real_resolve_list(child, sizeof(child) / sizeof(child[0]));
}

/* Called by the interposed dlsym, which a sanitizer's runtime uses before
 * its shadow memory exists: no instrumentation here. */
__attribute__((no_sanitize_address, no_sanitize("undefined"), no_sanitize("thread")))
CKC_START_PATH dlsym_fn ckc_real_dlsym(void)
{
	return ckc_io_real_dlsym();
}

void ckc_real_resolve(void)
{
	pthread_once(&real_once, real_resolve_all);
}

void ckc_real_missing(const char *name)
{
	static _Atomic unsigned said;
	/* one message per program is enough to explain every ENOSYS */
	if (atomic_fetch_add(&said, 1) == 0)
		ckc_error("the C library has no %s: the call fails with ENOSYS", name);
}
