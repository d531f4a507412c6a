/* The public API of ckptcache.h over the engine; the only symbols besides
 * the interposed ones that the shared library exports. */
#include "config.h"

#include <errno.h>

#include "ckc.h"
#include "ckptcache.h"
#include "sys.h"

#define CKC_PUBLIC __attribute__((visibility("default")))

CKC_HOT_DATA ckc_services_t ckc_svc;

CKC_START_PATH void ckc_services_set(const ckc_services_t *h)
{
	ckc_svc = *h;
}

/* The preloaded library starts the engine on first use: the API is a use. */
static void api_start(void)
{
	if (ckc_svc.start)
		ckc_svc.start();
}

static int api_result(int rc)
{
	if (rc >= 0 || rc == -ENODEV)
		return 0;
	errno = -rc;
	return -1;
}

CKC_PUBLIC int ckptcache_prefetch_enqueue(const char *path)
{
	if (!path) {
		errno = EINVAL;
		return -1;
	}
	api_start();
	return api_result(ckc_hint_enqueue(path));
}

CKC_PUBLIC int ckptcache_prefetch_start(void)
{
	api_start();
	return api_result(ckc_prefetch_start());
}

CKC_PUBLIC int ckptcache_wait_flushed(void)
{
	return api_result(ckc_wait_flushed());
}
