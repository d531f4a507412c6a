/* Resolution of the real libc functions (dlsym(RTLD_NEXT)), lazily, so a
 * wrapper called before the library's constructor (by another library's
 * constructor, say) still reaches libc. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "io.h"
#include "log.h"
#include "real.h"

ckc_real_t ckc_real;

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

static void real_resolve_all(void)
{
	dlsym_fn dls = ckc_real_dlsym();
	if (!dls)
		return;
	/* the __xstat family is only a compatibility symbol on glibc >= 2.33,
	 * which plain dlsym does not return */
#define CKC_REAL_RESOLVE(name, ret, args)                                     \
	ckc_real.name = (ret(*) args)dls(RTLD_NEXT, #name);                \
	if (!ckc_real.name)                                                   \
		ckc_real.name = (ret(*) args)dlvsym(RTLD_NEXT, #name, "GLIBC_2.2.5"); \
	if (!ckc_real.name) {                                                 \
		ckc_real.name = (ret(*) args)_Generic((ret *)0, FILE **: (void (*)(void))real_stub_null, \
						      default: (void (*)(void))real_stub_neg1); \
	}
	CKC_REAL_FUNCS(CKC_REAL_RESOLVE)
#undef CKC_REAL_RESOLVE
}

/* Called by the interposed dlsym, which a sanitizer's runtime uses before
 * its shadow memory exists: no instrumentation here. */
__attribute__((no_sanitize_address, no_sanitize("undefined"), no_sanitize("thread")))
dlsym_fn ckc_real_dlsym(void)
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
