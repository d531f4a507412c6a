/* A stand-in CUDA driver for the unit tests, reached through ckc_svc.gpu_sym:
 * its "device memory" is host memory (copies are memcpy), its devices and
 * contexts are numbers. Included by one test file each. */
#ifndef CKC_TEST_FAKE_CUDA_H
#define CKC_TEST_FAKE_CUDA_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult; /* CUDA_SUCCESS = 0 */
enum { OK = 0, OOM = 2 };

static size_t fake_free = 4ull << 30, fake_total = 8ull << 30;
static atomic_int fake_creates, fake_releases;
/* devices: device d's context is (void *)(d + 1) */
static int fake_ndev = 1;
/* as with CUDA, a thread has no current context until it sets one */
static __thread uintptr_t fake_cur;

static CUresult f_ctx_get(void **c) { *c = (void *)fake_cur; return OK; }
static CUresult f_ctx_set(void *c) { fake_cur = (uintptr_t)c; return OK; }
static CUresult f_ctx_dev(int *d) { *d = (int)fake_cur - 1; return OK; }
static CUresult f_prim_retain(void **c, int d) { *c = (void *)(uintptr_t)(d + 1); return OK; }
static CUresult f_dev_count(int *n) { *n = fake_ndev; return OK; }
static CUresult f_total(size_t *t, int d) { (void)d; *t = fake_total; return OK; }
static CUresult f_prim_release(int d) { (void)d; return OK; }
static CUresult f_meminfo(size_t *f, size_t *t) { *f = fake_free; *t = fake_total; return OK; }
static CUresult f_gran(size_t *g, const void *p, int fl) { (void)p; (void)fl; *g = 2u << 20; return OK; }
static CUresult f_reserve(uint64_t *p, size_t n, size_t al, uint64_t a, unsigned long long f)
{
	(void)al; (void)a; (void)f;
	void *m = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return OOM;
	*p = (uint64_t)(uintptr_t)m;
	return OK;
}
static CUresult f_addr_free(uint64_t p, size_t n) { munmap((void *)(uintptr_t)p, n); return OK; }
static CUresult f_create(uint64_t *h, size_t n, const void *p, unsigned long long f)
{
	(void)p; (void)f;
	*h = n;
	fake_creates++;
	return OK;
}
static CUresult f_release(uint64_t h) { (void)h; fake_releases++; return OK; }
static CUresult f_map(uint64_t p, size_t n, size_t o, uint64_t h, unsigned long long f)
{
	(void)o; (void)h; (void)f;
	return mprotect((void *)(uintptr_t)p, n, PROT_READ | PROT_WRITE) ? OOM : OK;
}
static CUresult f_unmap(uint64_t p, size_t n)
{
	/* unmapped device memory must not be read again: make it fault */
	return mprotect((void *)(uintptr_t)p, n, PROT_NONE) ? OOM : OK;
}
static CUresult f_access(uint64_t p, size_t n, const void *d, size_t c) { (void)p; (void)n; (void)d; (void)c; return OK; }
static CUresult f_stream(void **s, unsigned f) { (void)f; *s = (void *)0x2; return OK; }
static CUresult f_sync(void *s) { (void)s; return OK; }
/* microseconds each device-to-host copy takes on top of its memcpy */
static atomic_int fake_dtoh_us;
/* While the gate is shut, device-to-host copies wait (at most 5 s: then
 * they go on and count a timeout); waiting counts those waiting now. */
static atomic_bool fake_dtoh_gate;
static atomic_int fake_dtoh_waiting, fake_dtoh_timeouts;
static CUresult f_dtoh(void *h, uint64_t d, size_t n, void *s)
{
	(void)s;
	if (atomic_load(&fake_dtoh_gate)) {
		atomic_fetch_add(&fake_dtoh_waiting, 1);
		int ms = 0;
		while (atomic_load(&fake_dtoh_gate) && ms < 5000) {
			usleep(1000);
			ms++;
		}
		if (ms >= 5000)
			atomic_fetch_add(&fake_dtoh_timeouts, 1);
		atomic_fetch_sub(&fake_dtoh_waiting, 1);
	}
	if (atomic_load(&fake_dtoh_us))
		usleep((useconds_t)atomic_load(&fake_dtoh_us));
	memcpy(h, (void *)(uintptr_t)d, n);
	return OK;
}
static CUresult f_htod(uint64_t d, const void *h, size_t n, void *s) { (void)s; memcpy((void *)(uintptr_t)d, h, n); return OK; }
static CUresult f_dtod(uint64_t d, uint64_t x, size_t n, void *s) { (void)s; memmove((void *)(uintptr_t)d, (void *)(uintptr_t)x, n); return OK; }
static atomic_int fake_pins, fake_pin_tries;
static atomic_bool fake_no_pinned; /* cuMemAllocHost and cuMemHostRegister fail */
static CUresult f_hreg(void *p, size_t n, unsigned f)
{
	(void)p;
	(void)n;
	(void)f;
	fake_pin_tries++;
	if (atomic_load(&fake_no_pinned))
		return OOM;
	fake_pins++;
	return OK;
}
static CUresult f_hunreg(void *p) { (void)p; fake_pins--; return OK; }
static atomic_int fake_hostallocs; /* cuMemAllocHost blocks not freed */
static CUresult f_hostalloc(void **p, size_t n)
{
	if (!fake_cur)
		return 201; /* CUDA_ERROR_INVALID_CONTEXT */
	if (atomic_load(&fake_no_pinned))
		return OOM;
	*p = malloc(n);
	if (*p)
		fake_hostallocs++;
	return *p ? OK : OOM;
}
static CUresult f_freehost(void *p)
{
	if (p)
		fake_hostallocs--;
	free(p);
	return OK;
}

static const struct {
	const char *name;
	void *fn;
} fake_tab[] = {
	{ "cuCtxGetCurrent", (void *)f_ctx_get },
	{ "cuCtxSetCurrent", (void *)f_ctx_set },
	{ "cuCtxGetDevice", (void *)f_ctx_dev },
	{ "cuDevicePrimaryCtxRetain", (void *)f_prim_retain },
	{ "cuDevicePrimaryCtxRelease_v2", (void *)f_prim_release },
	{ "cuMemGetInfo_v2", (void *)f_meminfo },
	{ "cuDeviceGetCount", (void *)f_dev_count },
	{ "cuDeviceTotalMem_v2", (void *)f_total },
	{ "cuMemGetAllocationGranularity", (void *)f_gran },
	{ "cuMemAddressReserve", (void *)f_reserve },
	{ "cuMemAddressFree", (void *)f_addr_free },
	{ "cuMemCreate", (void *)f_create },
	{ "cuMemRelease", (void *)f_release },
	{ "cuMemMap", (void *)f_map },
	{ "cuMemUnmap", (void *)f_unmap },
	{ "cuMemSetAccess", (void *)f_access },
	{ "cuStreamCreate", (void *)f_stream },
	{ "cuStreamSynchronize", (void *)f_sync },
	{ "cuMemcpyDtoHAsync_v2", (void *)f_dtoh },
	{ "cuMemcpyHtoDAsync_v2", (void *)f_htod },
	{ "cuMemcpyDtoDAsync_v2", (void *)f_dtod },
	{ "cuMemHostRegister_v2", (void *)f_hreg },
	{ "cuMemHostUnregister", (void *)f_hunreg },
	{ "cuMemAllocHost_v2", (void *)f_hostalloc },
	{ "cuMemFreeHost", (void *)f_freehost },
};

static void *fake_sym(const char *name)
{
	for (size_t i = 0; i < sizeof(fake_tab) / sizeof(fake_tab[0]); i++)
		if (!strcmp(fake_tab[i].name, name))
			return fake_tab[i].fn;
	return NULL;
}

#endif
