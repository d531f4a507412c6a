/* The interposed dlsym. Only "cu..." lookups are looked at (cuda.c); every
 * other one reaches the C library's dlsym as a tail call, so that RTLD_NEXT
 * keeps meaning "after the caller" for other interposers (a sanitizer's
 * runtime, say). Kept apart from <dlfcn.h>, whose declaration promises a
 * non-null name that a caller may not keep. */
#include "config.h"

#include <stddef.h>

#define CKC_EXPORT __attribute__((visibility("default")))

typedef void *(*dlsym_fn)(void *, const char *);
dlsym_fn ckc_real_dlsym(void);
void *ckc_cu_dlsym(void *handle, const char *name);

CKC_EXPORT void *dlsym(void *handle, const char *name);

__attribute__((optimize("O2", "optimize-sibling-calls"), no_sanitize_address,
	       no_sanitize("undefined"), noinline))
void *dlsym(void *handle, const char *name)
{
#ifdef HAVE_CUDA_H
	if (name && name[0] == 'c' && name[1] == 'u')
		return ckc_cu_dlsym(handle, name);
#endif
	return ckc_real_dlsym()(handle, name);
}
