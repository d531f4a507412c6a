/* A stand-in for libcuda.so.1 on machines without a GPU, for the end-to-end
 * tests of device capture: built as libcuda.so.1 and found through
 * LD_LIBRARY_PATH, it gives the preloaded library and the test programs the
 * driver entry points they use. Its "device memory" is host memory: device
 * pointers are host addresses, kernels are whatever the program computes
 * with the CPU there. What matters for the tests is where host memory is
 * read and written: a copy to or from pageable memory goes through the CPU
 * (memcpy, so a protected page faults, as the real driver's staging copy
 * does), while a copy to or from pinned or registered memory is a "DMA" that
 * bypasses page protections (through /proc/self/mem, as the real engine's
 * transfers do). Copies are synchronous; events and streams are tokens.
 * FAKECUDA_DEVICE_MIB sets the device's size (default 4096).
 *
 * The node has FAKECUDA_DEVICES devices (default 1), each with its own PCI
 * address, every pair linked (peer access, performance rank 0, native
 * atomics: an NVLink); CUDA_VISIBLE_DEVICES picks and orders the ones a
 * process sees, as with the real driver, so processes of one node each on
 * its own device (CUDA_VISIBLE_DEVICES=2,0,1,3) see each other's devices
 * by the same PCI addresses. Only the first device seen has a context (the
 * program's); the others answer the device queries. An allocation made to
 * be exported (cuMemCreate asking for a POSIX file descriptor handle) keeps
 * its bytes in a memory file: another process that imports the descriptor
 * maps the same bytes, as a rank maps memory a peer lent it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUmemGenericAllocationHandle;

#define OK 0
#define ERR_INVALID 1
#define ERR_OOM 2
#define ERR_NOT_FOUND 500

#define EXPORT __attribute__((visibility("default")))

/* ---- memory: device allocations and pinned host ranges ----------------- */

typedef struct range {
	uintptr_t start, end;
	int kind; /* 'd' device allocation, 'h' pinned allocation, 'r' registered */
} range_t;

static range_t *ranges;
static size_t nranges, capranges;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t dev_used;

static uint64_t dev_total(void)
{
	const char *e = getenv("FAKECUDA_DEVICE_MIB");
	long mib = e ? atol(e) : 4096;
	return (uint64_t)(mib > 0 ? mib : 4096) << 20;
}

static int range_add(uintptr_t p, size_t n, int kind)
{
	pthread_mutex_lock(&mem_lock);
	if (nranges == capranges) {
		size_t cap = capranges ? 2 * capranges : 64;
		range_t *r = realloc(ranges, cap * sizeof(*r));
		if (!r) {
			pthread_mutex_unlock(&mem_lock);
			return ERR_OOM;
		}
		ranges = r;
		capranges = cap;
	}
	ranges[nranges++] = (range_t){ p, p + n, kind };
	pthread_mutex_unlock(&mem_lock);
	return OK;
}

/* Removes the range starting at p; its length in *n. */
static int range_del(uintptr_t p, int kind, size_t *n)
{
	int rc = ERR_INVALID;
	pthread_mutex_lock(&mem_lock);
	for (size_t i = 0; i < nranges; i++)
		if (ranges[i].start == p && ranges[i].kind == kind) {
			if (n)
				*n = ranges[i].end - ranges[i].start;
			ranges[i] = ranges[--nranges];
			rc = OK;
			break;
		}
	pthread_mutex_unlock(&mem_lock);
	return rc;
}

/* Whether [p, p+n) lies in pinned or registered host memory. */
static int is_pinned(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	int yes = 0;
	pthread_mutex_lock(&mem_lock);
	for (size_t i = 0; i < nranges && !yes; i++)
		yes = ranges[i].kind != 'd' && a >= ranges[i].start && a + n <= ranges[i].end;
	pthread_mutex_unlock(&mem_lock);
	return yes;
}

/* A transfer that bypasses page protections, as DMA does. */
static int self_mem = -1;

static int dma(void *dst, const void *src, size_t n, int to_host)
{
	if (self_mem < 0) {
		int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/mem", O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return ERR_INVALID;
		int expected = -1;
		if (!__atomic_compare_exchange_n(&self_mem, &expected, fd, 0, __ATOMIC_SEQ_CST,
						 __ATOMIC_SEQ_CST))
			close(fd);
	}
	size_t done = 0;
	while (done < n) {
		/* raw system calls: a preloaded library's pread/pwrite wrappers
		 * must not see the driver's own transfers */
		ssize_t k = to_host ? syscall(SYS_pwrite64, self_mem, (const char *)src + done, n - done,
					      (off_t)((uintptr_t)dst + done)) :
				      syscall(SYS_pread64, self_mem, (char *)dst + done, n - done,
					      (off_t)((uintptr_t)src + done));
		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			return ERR_INVALID;
		}
		done += (size_t)k;
	}
	return OK;
}

static CUresult copy_dtoh(void *h, CUdeviceptr d, size_t n)
{
	if (!n)
		return OK;
	if (is_pinned(h, n))
		return dma(h, (const void *)(uintptr_t)d, n, 1);
	memcpy(h, (const void *)(uintptr_t)d, n);
	return OK;
}

static CUresult copy_htod(CUdeviceptr d, const void *h, size_t n)
{
	if (!n)
		return OK;
	if (is_pinned(h, n))
		return dma((void *)(uintptr_t)d, h, n, 0);
	memcpy((void *)(uintptr_t)d, h, n);
	return OK;
}

/* ---- initialisation, devices, contexts ---------------------------------- */

static __thread CUcontext cur_ctx;
static char ctx0; /* device 0's primary context */

EXPORT CUresult cuInit(unsigned flags) { (void)flags; return OK; }
EXPORT CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
#define MAX_DEVICES 16

/* The physical device of each ordinal this process sees; their number. */
static int visible[MAX_DEVICES];
static int nvisible = -1;
static pthread_once_t devices_once = PTHREAD_ONCE_INIT;

static void devices_init(void)
{
	const char *e = getenv("FAKECUDA_DEVICES"), *v = getenv("CUDA_VISIBLE_DEVICES");
	int n = e ? atoi(e) : 1;
	n = n < 1 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : n;
	nvisible = 0;
	if (!v) {
		for (int i = 0; i < n; i++)
			visible[nvisible++] = i;
		return;
	}
	/* the driver's rule: the list ends at the first invalid entry */
	for (char *p = (char *)v, *end; *p && nvisible < MAX_DEVICES; p = *end ? end + 1 : end) {
		long k = strtol(p, &end, 10);
		if (end == p || k < 0 || k >= n || (*end && *end != ','))
			break;
		visible[nvisible++] = (int)k;
	}
}

static int ndevices(void)
{
	pthread_once(&devices_once, devices_init);
	return nvisible;
}

static bool valid_device(CUdevice d) { return d >= 0 && d < ndevices(); }

EXPORT CUresult cuDeviceGetCount(int *n) { *n = ndevices(); return OK; }
EXPORT CUresult cuDeviceGet(CUdevice *d, int ord) { if (!valid_device(ord)) return ERR_INVALID; *d = ord; return OK; }
EXPORT CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice d)
{
	if (!valid_device(d) || !buf || len < 13)
		return ERR_INVALID;
	snprintf(buf, (size_t)len, "0000:%02X:00.0", 0x18 + visible[d]);
	return OK;
}
EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer)
{
	if (!valid_device(d) || !valid_device(peer))
		return ERR_INVALID;
	*can = d != peer;
	return OK;
}
/* CU_DEVICE_P2P_ATTRIBUTE_*: 1 performance rank, 2 access supported,
 * 3 native atomics supported, 4 CUDA arrays supported */
EXPORT CUresult cuDeviceGetP2PAttribute(int *value, int attrib, CUdevice src, CUdevice dst)
{
	if (!valid_device(src) || !valid_device(dst) || src == dst || attrib < 1 || attrib > 4)
		return ERR_INVALID;
	*value = attrib == 1 ? 0 : 1;
	return OK;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *t, CUdevice d) { (void)d; *t = dev_total(); return OK; }
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { if (d != 0) return ERR_INVALID; *c = &ctx0; return OK; }
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return OK; }
EXPORT CUresult cuCtxSetCurrent(CUcontext c) { cur_ctx = c; return OK; }
EXPORT CUresult cuCtxGetCurrent(CUcontext *c) { *c = cur_ctx; return OK; }
EXPORT CUresult cuCtxGetDevice(CUdevice *d) { if (!cur_ctx) return 201; *d = 0; return OK; }
EXPORT CUresult cuCtxSynchronize(void) { return OK; }

EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t)
{
	pthread_mutex_lock(&mem_lock);
	uint64_t total = dev_total(), used = dev_used;
	pthread_mutex_unlock(&mem_lock);
	*t = total;
	*f = used < total ? total - used : 0;
	return OK;
}

/* ---- allocations ----------------------------------------------------------- */

/* Takes n bytes of the device's memory: false when it has no room. */
static bool dev_reserve(size_t n)
{
	pthread_mutex_lock(&mem_lock);
	bool room = dev_used + n <= dev_total();
	if (room)
		dev_used += n;
	pthread_mutex_unlock(&mem_lock);
	return room;
}

static CUresult dev_alloc(CUdeviceptr *p, size_t n)
{
	if (!n)
		return ERR_INVALID;
	if (!dev_reserve(n))
		return ERR_OOM;
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || range_add((uintptr_t)m, n, 'd') != OK) {
		if (m != MAP_FAILED)
			munmap(m, n);
		pthread_mutex_lock(&mem_lock);
		dev_used -= n;
		pthread_mutex_unlock(&mem_lock);
		return ERR_OOM;
	}
	*p = (CUdeviceptr)(uintptr_t)m;
	return OK;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return dev_alloc(p, n); }
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) { (void)s; return dev_alloc(p, n); }

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	size_t n;
	if (range_del((uintptr_t)p, 'd', &n) != OK)
		return ERR_INVALID;
	munmap((void *)(uintptr_t)p, n);
	pthread_mutex_lock(&mem_lock);
	dev_used -= n;
	pthread_mutex_unlock(&mem_lock);
	return OK;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; return cuMemFree_v2(p); }

EXPORT CUresult cuMemAllocHost_v2(void **p, size_t n)
{
	/* a driver keeps books of its allocations on the C heap */
	free(malloc(64));
	void *m = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		       -1, 0);
	if (m == MAP_FAILED)
		return ERR_OOM;
	if (range_add((uintptr_t)m, n ? n : 1, 'h') != OK) {
		munmap(m, n ? n : 1);
		return ERR_OOM;
	}
	/* as the real driver does: pinned pages are not shared with a child */
	madvise(m, n ? n : 1, MADV_DONTFORK);
	*p = m;
	return OK;
}

EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; return cuMemAllocHost_v2(p, n); }

EXPORT CUresult cuMemFreeHost(void *p)
{
	size_t n;
	if (range_del((uintptr_t)p, 'h', &n) != OK)
		return ERR_INVALID;
	munmap(p, n);
	return OK;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
	(void)flags;
	return range_add((uintptr_t)p, n, 'r');
}

EXPORT CUresult cuMemHostUnregister(void *p) { return range_del((uintptr_t)p, 'r', NULL); }

/* ---- virtual memory management (the gpu tier's arena) ------------------- */

/* Gives n bytes of the device's memory back. */
static void dev_unreserve(size_t n)
{
	pthread_mutex_lock(&mem_lock);
	dev_used -= n;
	pthread_mutex_unlock(&mem_lock);
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int flags)
{
	(void)prop;
	(void)flags;
	*g = 2u << 20;
	return OK;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t al, CUdeviceptr addr,
				    unsigned long long f)
{
	(void)al;
	(void)addr;
	(void)f;
	void *m = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return ERR_OOM;
	*p = (CUdeviceptr)(uintptr_t)m;
	return OK;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t n)
{
	munmap((void *)(uintptr_t)p, n);
	return OK;
}

/* A physical allocation: its size and, when it can be exported (or was
 * imported), the memory file that holds its bytes, shared by every process
 * that maps it; without one, the reserved range itself holds them. */
typedef struct alloc {
	size_t n;
	int fd;        /* -1: none */
	bool imported; /* another process's allocation: not this device's memory */
} alloc_t;

/* CUmemAllocationProp: type, then requestedHandleTypes (1: a POSIX file
 * descriptor) */
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const void *prop,
			    unsigned long long f)
{
	(void)f;
	int types = prop ? ((const int *)prop)[1] : 0;
	alloc_t *a = calloc(1, sizeof(*a));
	if (!a)
		return ERR_OOM;
	a->n = n;
	a->fd = -1;
	if (!dev_reserve(n)) {
		free(a);
		return ERR_OOM;
	}
	if (types & 1) {
		a->fd = (int)syscall(SYS_memfd_create, "fakecuda", 0);
		if (a->fd < 0 || ftruncate(a->fd, (off_t)n) != 0) {
			if (a->fd >= 0)
				close(a->fd);
			dev_unreserve(n);
			free(a);
			return ERR_OOM;
		}
	}
	*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return OK;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	alloc_t *a = (alloc_t *)(uintptr_t)h;
	if (!a)
		return ERR_INVALID;
	if (!a->imported)
		dev_unreserve(a->n);
	if (a->fd >= 0)
		close(a->fd);
	free(a);
	return OK;
}

/* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (1) only: a new descriptor of
 * the allocation's memory file */
EXPORT CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h, int type,
					     unsigned long long f)
{
	(void)f;
	alloc_t *a = (alloc_t *)(uintptr_t)h;
	if (!a || !out || type != 1 || a->fd < 0)
		return ERR_INVALID;
	int fd = dup(a->fd);
	if (fd < 0)
		return ERR_OOM;
	*(int *)out = fd;
	return OK;
}

/* The descriptor stays the caller's, as with the real driver. */
EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *handle, int type)
{
	int fd = (int)(intptr_t)handle;
	struct stat st;
	if (!h || type != 1 || fd < 0 || fstat(fd, &st) != 0)
		return ERR_INVALID;
	alloc_t *a = calloc(1, sizeof(*a));
	if (!a)
		return ERR_OOM;
	a->n = (size_t)st.st_size;
	a->imported = true;
	if ((a->fd = dup(fd)) < 0) {
		free(a);
		return ERR_OOM;
	}
	*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return OK;
}

EXPORT CUresult cuMemMap(CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h,
			 unsigned long long f)
{
	(void)f;
	alloc_t *a = (alloc_t *)(uintptr_t)h;
	if (!a || o + n > a->n)
		return ERR_INVALID;
	if (a->fd >= 0)
		return mmap((void *)(uintptr_t)p, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd,
			    (off_t)o) == MAP_FAILED ? ERR_OOM : OK;
	return mprotect((void *)(uintptr_t)p, n, PROT_READ | PROT_WRITE) ? ERR_OOM : OK;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t n)
{
	/* unmapped device memory must not be read again: it faults */
	void *m = mmap((void *)(uintptr_t)p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		       -1, 0);
	return m == MAP_FAILED ? ERR_INVALID : OK;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const void *d, size_t c)
{
	(void)p;
	(void)n;
	(void)d;
	(void)c;
	return OK;
}

/* ---- streams and events ----------------------------------------------------- */

static char stream_token;
EXPORT CUresult cuStreamCreate(CUstream *s, unsigned f) { (void)f; *s = &stream_token; return OK; }
EXPORT CUresult cuStreamCreateWithPriority(CUstream *s, unsigned f, int p) { (void)p; return cuStreamCreate(s, f); }
EXPORT CUresult cuStreamDestroy_v2(CUstream s) { (void)s; return OK; }
EXPORT CUresult cuStreamSynchronize(CUstream s) { (void)s; return OK; }

EXPORT CUresult cuEventCreate(CUevent *e, unsigned f)
{
	(void)f;
	*e = malloc(1);
	return *e ? OK : ERR_OOM;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) { free(e); return OK; }
EXPORT CUresult cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return OK; }
EXPORT CUresult cuEventSynchronize(CUevent e) { (void)e; return OK; }
EXPORT CUresult cuEventQuery(CUevent e) { (void)e; return OK; }

/* ---- copies -------------------------------------------------------------------- */

EXPORT CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { return copy_dtoh(h, d, n); }
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { return copy_htod(d, h, n); }
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream s) { (void)s; return copy_dtoh(h, d, n); }
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s) { (void)s; return copy_htod(d, h, n); }

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream t)
{
	(void)t;
	memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
	return OK;
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { return cuMemcpyDtoDAsync_v2(d, s, n, NULL); }

/* Whether p is device memory of this driver. */
static int is_device(CUdeviceptr p)
{
	int yes = 0;
	pthread_mutex_lock(&mem_lock);
	for (size_t i = 0; i < nranges && !yes; i++)
		yes = ranges[i].kind == 'd' && p >= ranges[i].start && p < ranges[i].end;
	pthread_mutex_unlock(&mem_lock);
	return yes;
}

/* kind=Default: the direction from the pointers. */
EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{
	int dd = is_device(d), sd = is_device(s);
	if (sd && !dd)
		return copy_dtoh((void *)(uintptr_t)d, s, n);
	if (dd && !sd)
		return copy_htod(d, (const void *)(uintptr_t)s, n);
	memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
	return OK;
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream t) { (void)t; return cuMemcpy(d, s, n); }

/* ---- entry points by name ------------------------------------------------------ */

static const struct {
	const char *name, *exact;
} aliases[] = {
	{ "cuMemcpyDtoH", "cuMemcpyDtoH_v2" },   { "cuMemcpyHtoD", "cuMemcpyHtoD_v2" },
	{ "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2" }, { "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2" },
	{ "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2" }, { "cuMemcpyDtoD", "cuMemcpyDtoD_v2" },
	{ "cuMemAlloc", "cuMemAlloc_v2" },       { "cuMemFree", "cuMemFree_v2" },
	{ "cuMemAllocHost", "cuMemAllocHost_v2" }, { "cuMemHostRegister", "cuMemHostRegister_v2" },
	{ "cuMemGetInfo", "cuMemGetInfo_v2" },   { "cuDeviceTotalMem", "cuDeviceTotalMem_v2" },
	{ "cuEventDestroy", "cuEventDestroy_v2" }, { "cuStreamDestroy", "cuStreamDestroy_v2" },
	{ "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2" },
};

static void *self_sym(const char *name)
{
	static void *self;
	if (!self) {
		Dl_info di;
		if (dladdr((void *)self_sym, &di))
			self = dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	}
	return self ? dlsym(self, name) : NULL;
}

/* The runtime's way in: every entry point by its unversioned name. */
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, unsigned long long flags,
				    int *status)
{
	(void)ver;
	(void)flags;
	const char *exact = symbol;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcmp(aliases[i].name, symbol))
			exact = aliases[i].exact;
	*pfn = self_sym(exact);
	if (status)
		*status = *pfn ? 0 : 1;
	return *pfn ? OK : ERR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver, unsigned long long flags)
{
	return cuGetProcAddress_v2(symbol, pfn, ver, flags, NULL);
}
