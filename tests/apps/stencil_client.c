/* A stencil-style checkpointing program written against the CUDA driver
 * API the way such codes are written, knowing nothing of ckptcache: a 2-D
 * field in device memory is advanced step by step, and after each block of
 * steps the band of rows that holds the wave (a different size each time,
 * rarely a whole number of pages, from a different offset) is copied to a
 * host staging buffer with cuMemcpyDtoH and written to DIR/ckpt_NNNNN.bin.
 * The restore phase reads the files back in the chosen order into the same
 * staging buffer (whatever its size and alignment) and copies each one to
 * the device with cuMemcpyHtoD, optionally touching the buffer first; every
 * restored byte is checked against a hash taken of the device bytes at
 * checkpoint time.
 *
 * It runs on the real driver (device memory is then read back with
 * cuMemcpyDtoH to be checked) and on the tests' stand-in libcuda.so.1,
 * whose device memory is host memory (tests/apps/fake_libcuda.c). The
 * driver is reached as the CUDA runtime reaches it: dlopen("libcuda.so.1"),
 * then cuGetProcAddress_v2 for every entry point (--resolve dlsym: dlsym).
 *
 *   stencil_client --dir DIR [--count N] [--side S] [--staging KIND]
 *                  [--io write|fwrite|pread] [--order reverse|sequential|random]
 *                  [--hints FILE] [--touch none|read|write] [--chunk BYTES]
 *                  [--seed N] [--keep] [--resolve gpa|dlsym] [--own-fault] [--whole]
 *                  [--hold FILE] [--linger FILE] [--grab-beyond MIB]
 *   KIND: malloc (one buffer for every size, as malloc returns it), offset
 *   (malloc + 16 bytes), each (malloc'd and freed per checkpoint), pinned
 *   (cuMemAllocHost). Prints "RESULT ... verified=V/N" and exits 0 iff every
 *   restore verified. --whole: every checkpoint is the whole field (one
 *   size, page-aligned when the staging buffer is). --hold and --linger are the
 *   barriers of a job of several ranks: before its restore phase (--hold)
 *   or before it ends (--linger) the program says so ("holding FILE") and
 *   waits until FILE exists (at most 60 s, then it goes on). --grab-beyond:
 *   after the checkpoints (and --hold), the program allocates MIB more device memory
 *   than the driver reports free, as a code that sizes its next phase by
 *   what it sees does, and says "grabbed N bytes: ok" (or the error); the
 *   allocation is kept to the end. --own-fault: at the end the program reads a page it
 *   protected itself, and must die of SIGSEGV (within 20 s). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static struct {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(int *, int);
	CUresult (*retain)(void **, int);
	CUresult (*set)(void *);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*alloc_host)(void **, size_t);
	CUresult (*free_host)(void *);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*mem_info)(size_t *, size_t *);
} cu;

static int fake; /* the stand-in driver: device memory is host memory */

static void die(const char *what)
{
	fprintf(stderr, "stencil_client: %s\n", what);
	exit(2);
}

#define CK(call)                                                            \
	do {                                                                \
		CUresult rc_ = (call);                                      \
		if (rc_ != 0) {                                             \
			fprintf(stderr, "stencil_client: %s failed: %d\n", #call, rc_); \
			exit(2);                                            \
		}                                                           \
	} while (0)

static void *resolve(void *lib, const char *name, int gpa)
{
	void *p = NULL;
	if (gpa) {
		CUresult (*g)(const char *, void **, int, unsigned long long, int *) =
			(CUresult(*)(const char *, void **, int, unsigned long long, int *))dlsym(lib, "cuGetProcAddress_v2");
		int st = 0;
		if (!g || g(name, &p, 12000, 0, &st) != 0)
			p = NULL;
	} else {
		char exact[64];
		snprintf(exact, sizeof(exact), "%s", name);
		p = dlsym(lib, exact);
		if (!p) {
			snprintf(exact, sizeof(exact), "%s_v2", name);
			p = dlsym(lib, exact);
		}
	}
	if (!p) {
		fprintf(stderr, "stencil_client: the driver has no %s\n", name);
		exit(2);
	}
	return p;
}

static void driver_load(int gpa)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib)
		die("cannot open libcuda.so.1");
	fake = dlsym(lib, "cuMemAddressReserve") && getenv("FAKECUDA_DEVICE_MIB") != NULL;
	*(void **)&cu.init = resolve(lib, "cuInit", gpa);
	*(void **)&cu.device_get = resolve(lib, "cuDeviceGet", gpa);
	*(void **)&cu.retain = resolve(lib, "cuDevicePrimaryCtxRetain", gpa);
	*(void **)&cu.set = resolve(lib, "cuCtxSetCurrent", gpa);
	*(void **)&cu.alloc = resolve(lib, "cuMemAlloc", gpa);
	*(void **)&cu.free = resolve(lib, "cuMemFree", gpa);
	*(void **)&cu.alloc_host = resolve(lib, "cuMemAllocHost", gpa);
	*(void **)&cu.free_host = resolve(lib, "cuMemFreeHost", gpa);
	*(void **)&cu.dtoh = resolve(lib, "cuMemcpyDtoH", gpa);
	*(void **)&cu.htod = resolve(lib, "cuMemcpyHtoD", gpa);
	*(void **)&cu.mem_info = resolve(lib, "cuMemGetInfo", gpa);
}

/* A barrier: waits until path exists (at most 60 s). */
static void hold(const char *path)
{
	if (!path)
		return;
	printf("holding %s (pid %ld)\n", path, (long)getpid());
	fflush(stdout);
	for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++)
		usleep(10000);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static uint64_t hash(const unsigned char *p, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = mix(h ^ w);
	}
	for (; i < n; i++)
		h = mix(h ^ p[i]);
	return h;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Hash of n device bytes at d: read in place on the stand-in driver, else
 * through a bounce copy. */
static uint64_t dev_hash(CUdeviceptr d, size_t n, unsigned char *bounce)
{
	if (fake)
		return hash((const unsigned char *)(uintptr_t)d, n);
	CK(cu.dtoh(bounce, d, n));
	return hash(bounce, n);
}

/* One block of steps of the "stencil": on the stand-in driver the CPU
 * updates the device field in place; on a real device the program's kernel
 * would, here a host update copied in. */
static void step(CUdeviceptr field, size_t bytes, long i, unsigned char *host)
{
	unsigned char *f = fake ? (unsigned char *)(uintptr_t)field : host;
	uint64_t s = mix((uint64_t)i + 1);
	for (size_t k = 0; k + 8 <= bytes; k += 8) {
		uint64_t w;
		memcpy(&w, f + k, 8);
		w = mix(w ^ s ^ k);
		memcpy(f + k, &w, 8);
	}
	if (!fake)
		CK(cu.htod(field, host, bytes));
}

static void write_ckpt(const char *path, const unsigned char *b, size_t n, const char *io)
{
	if (!strcmp(io, "fwrite")) {
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0)
			die("fwrite failed");
		return;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("open for writing failed");
	size_t done = 0;
	while (done < n) {
		ssize_t k = !strcmp(io, "pread") ? pwrite(fd, b + done, n - done, (off_t)done) :
						   write(fd, b + done, n - done);
		if (k <= 0)
			die("write failed");
		done += (size_t)k;
	}
	if (close(fd) != 0)
		die("close failed");
}

static size_t read_ckpt(const char *path, unsigned char *b, size_t n, const char *io, size_t chunk)
{
	size_t done = 0;
	if (!chunk)
		chunk = n;
	if (!strcmp(io, "fwrite")) {
		FILE *f = fopen(path, "rb");
		if (!f)
			die("fopen for reading failed");
		while (done < n) {
			size_t m = n - done < chunk ? n - done : chunk;
			size_t k = fread(b + done, 1, m, f);
			done += k;
			if (k < m)
				break;
		}
		fclose(f);
		return done;
	}
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open for reading failed");
	while (done < n) {
		size_t m = n - done < chunk ? n - done : chunk;
		ssize_t k = !strcmp(io, "pread") ? pread(fd, b + done, m, (off_t)done) : read(fd, b + done, m);
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	close(fd);
	return done;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *staging = "malloc", *io = "write", *order = "reverse", *hints = NULL;
	const char *touch = "none", *hold_file = NULL, *linger_file = NULL;
	long count = 24, side = 1024, seed = 1, grab_mib = -1;
	size_t chunk = 0;
	int keep = 0, gpa = 1, own_fault = 0, whole = 0;
	static const struct option opts[] = {
		{ "dir", 1, 0, 'd' },   { "count", 1, 0, 'n' },  { "side", 1, 0, 's' },
		{ "staging", 1, 0, 'S' }, { "io", 1, 0, 'i' },   { "order", 1, 0, 'o' },
		{ "hints", 1, 0, 'H' }, { "touch", 1, 0, 't' },  { "chunk", 1, 0, 'c' },
		{ "seed", 1, 0, 'x' },  { "keep", 0, 0, 'k' },   { "resolve", 1, 0, 'r' },
		{ "own-fault", 0, 0, 'F' }, { "whole", 0, 0, 'W' }, { "hold", 1, 0, 'h' },
		{ "linger", 1, 0, 'l' }, { "grab-beyond", 1, 0, 'g' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'n': count = atol(optarg); break;
		case 's': side = atol(optarg); break;
		case 'S': staging = optarg; break;
		case 'i': io = optarg; break;
		case 'o': order = optarg; break;
		case 'H': hints = optarg; break;
		case 't': touch = optarg; break;
		case 'c': chunk = (size_t)atol(optarg); break;
		case 'x': seed = atol(optarg); break;
		case 'k': keep = 1; break;
		case 'r': gpa = strcmp(optarg, "dlsym") != 0; break;
		case 'F': own_fault = 1; break;
		case 'W': whole = 1; break;
		case 'h': hold_file = optarg; break;
		case 'l': linger_file = optarg; break;
		case 'g': grab_mib = atol(optarg); break;
		default: die("bad option (see the comment at the top of stencil_client.c)");
		}
	}
	if (!dir || count < 1 || side < 64)
		die("--dir is required; --count >= 1, --side >= 64");

	driver_load(gpa);
	CK(cu.init(0));
	int dev;
	void *ctx;
	CK(cu.device_get(&dev, 0));
	CK(cu.retain(&ctx, dev));
	CK(cu.set(ctx));

	size_t fbytes = (size_t)side * (size_t)side * 4, row = (size_t)side * 4;
	CUdeviceptr field, back;
	CK(cu.alloc(&field, fbytes));
	CK(cu.alloc(&back, fbytes));
	/* the real driver's stand-in for a kernel, and a buffer for checks */
	unsigned char *host = malloc(fbytes), *chk = malloc(fbytes);
	if (!host || !chk)
		die("out of memory");
	memset(host, 0, fbytes);
	for (size_t k = 0; k < fbytes; k++)
		host[k] = (unsigned char)mix((uint64_t)seed * 1315423911u + k);
	if (fake)
		memcpy((void *)(uintptr_t)field, host, fbytes);
	else
		CK(cu.htod(field, host, fbytes));

	/* each checkpoint: the band [off, off+len) of the field */
	size_t *off = calloc((size_t)count, sizeof(*off)), *len = calloc((size_t)count, sizeof(*len));
	uint64_t *sum = calloc((size_t)count, sizeof(*sum));
	long *ord = calloc((size_t)count, sizeof(*ord));
	if (!off || !len || !sum || !ord)
		die("out of memory");
	for (long i = 0; i < count; i++) {
		uint64_t r = mix((uint64_t)seed * 7919 + (uint64_t)i);
		size_t rows = 1 + (size_t)(r % (uint64_t)side);
		size_t first = (size_t)((r >> 20) % (uint64_t)(side - rows + 1));
		off[i] = first * row + 4 * ((r >> 40) % 7);
		len[i] = rows * row - 4 * ((r >> 44) % 5) - 4 * ((r >> 40) % 7);
		if (off[i] + len[i] > fbytes)
			len[i] = fbytes - off[i];
		if (len[i] == 0)
			len[i] = 4;
		if (whole) {
			off[i] = 0;
			len[i] = fbytes;
		}
	}

	unsigned char *stage = NULL, *base = NULL;
	int each = !strcmp(staging, "each");
	if (!strcmp(staging, "pinned")) {
		CK(cu.alloc_host((void **)&stage, fbytes));
	} else if (!strcmp(staging, "malloc") || !strcmp(staging, "offset")) {
		base = malloc(fbytes + 64);
		if (!base)
			die("out of memory");
		memset(base, 0x5a, fbytes + 64);
		stage = base + (!strcmp(staging, "offset") ? 16 : 0);
	} else if (!each) {
		die("--staging: malloc, offset, each or pinned");
	}

	char path[4096];
	double tw = 0, tr = 0;
	size_t total = 0;
	for (long i = 0; i < count; i++) {
		step(field, fbytes, i, host);
		sum[i] = dev_hash(field + off[i], len[i], chk);
		if (each && !(stage = malloc(len[i])))
			die("out of memory");
		double t0 = now();
		CK(cu.dtoh(stage, field + off[i], len[i]));
		snprintf(path, sizeof(path), "%s/ckpt_%05ld.bin", dir, i);
		write_ckpt(path, stage, len[i], io);
		tw += now() - t0;
		total += len[i];
		if (each)
			free(stage);
	}

	for (long k = 0; k < count; k++)
		ord[k] = !strcmp(order, "sequential") ? k : count - 1 - k;
	if (!strcmp(order, "random"))
		for (long k = count - 1; k > 0; k--) {
			long j = (long)(mix((uint64_t)seed + (uint64_t)k * 31) % (uint64_t)(k + 1));
			long t = ord[k];
			ord[k] = ord[j];
			ord[j] = t;
		}
	if (hints) {
		FILE *h = fopen(hints, "w");
		if (!h)
			die("cannot write the hint file");
		for (long k = 0; k < count; k++)
			fprintf(h, "%s/ckpt_%05ld.bin\n", dir, ord[k]);
		if (fclose(h) != 0)
			die("cannot write the hint file");
	}

	hold(hold_file);
	if (grab_mib >= 0) {
		size_t fr = 0, total = 0;
		CK(cu.mem_info(&fr, &total));
		size_t want = fr + ((size_t)grab_mib << 20);
		CUdeviceptr grabbed;
		CUresult r = cu.alloc(&grabbed, want);
		if (r == 0)
			printf("grabbed %zu bytes: ok\n", want);
		else
			printf("grabbed %zu bytes: CUDA error %d\n", want, (int)r);
		fflush(stdout);
	}
	long verified = 0;
	for (long k = 0; k < count; k++) {
		long i = ord[k];
		if (each && !(stage = malloc(len[i])))
			die("out of memory");
		snprintf(path, sizeof(path), "%s/ckpt_%05ld.bin", dir, i);
		double t0 = now();
		size_t got = read_ckpt(path, stage, len[i], io, chunk);
		tr += now() - t0;
		uint64_t want = sum[i];
		int ok = got == len[i];
		if (ok && strcmp(touch, "none")) {
			/* the program looks at the bytes it read (and may change some) */
			ok = hash(stage, len[i]) == sum[i];
			if (ok && !strcmp(touch, "write")) {
				for (size_t q = 0; q < 5; q++) {
					size_t at = (size_t)(mix((uint64_t)k * 5 + q) % len[i]);
					stage[at] ^= 0xa5;
				}
				want = hash(stage, len[i]);
			}
		}
		t0 = now();
		if (ok)
			CK(cu.htod(back + off[i], stage, len[i]));
		tr += now() - t0;
		if (ok && dev_hash(back + off[i], len[i], chk) == want)
			verified++;
		else
			fprintf(stderr, "stencil_client: checkpoint %ld (%zu bytes at %zu) does not verify\n", i,
				len[i], off[i]);
		if (each)
			free(stage);
	}
	if (!keep)
		for (long i = 0; i < count; i++) {
			snprintf(path, sizeof(path), "%s/ckpt_%05ld.bin", dir, i);
			unlink(path);
		}
	printf("RESULT checkpoint_GBps=%.3f restore_GBps=%.3f verified=%ld/%ld bytes=%zu\n",
	       tw > 0 ? (double)total / tw / 1e9 : 0.0, tr > 0 ? (double)total / tr / 1e9 : 0.0, verified,
	       count, total);
	fflush(stdout);
	hold(linger_file);
	if (own_fault) {
		/* the staging buffer may still be owed by a cache; this page is
		 * the program's own, and protected by it */
		alarm(20);
		volatile unsigned char *own = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
						   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (own == MAP_FAILED || mprotect((void *)own, 4096, PROT_NONE) != 0)
			die("cannot make the protected page");
		printf("reading a protected page\n");
		fflush(stdout);
		return own[7];
	}
	if (!strcmp(staging, "pinned"))
		cu.free_host(stage);
	free(base);
	free(host);
	free(chk);
	cu.free(field);
	cu.free(back);
	return verified == count ? 0 : 1;
}
