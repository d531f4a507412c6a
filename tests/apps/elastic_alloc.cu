/* elastic_alloc: the test of ckptcache's elastic GPU arena, as a program that
 * knows nothing of ckptcache. This file owns: N checkpoints, each filled on the
 * GPU with a pattern derived from its index, checksummed on the GPU, copied
 * device->host (cudaMemcpy) into a pageable staging buffer and written to
 * DIR/e_%03d.bin; then one cudaMalloc of most of the device memory, which
 * under CKPTCACHE_CAPTURE=device only succeeds if the cache gives its arena
 * back; then every checkpoint read back in reverse order, copied host->device
 * and verified against its checksum on the GPU. Built by tests/gpu/build. */

#include <cuda_runtime.h>

#include <cinttypes>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>

#define PROG "elastic_alloc"
#include "proxy_common.h"

#define GiB (1024.0 * MiB)

#include "cuda_check.cuh"

/* ---- the GPU side ------------------------------------------------------------ */

__host__ __device__ static inline uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Word k of checkpoint idx: every checkpoint differs from every other one, so
 * a restore of the wrong file cannot verify. */
__global__ void fill_kernel(unsigned long long *p, size_t n, uint64_t idx)
{
	for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
		p[k] = mix64((idx << 40) ^ k);
}

/* A sum of position-dependent hashes: a permutation of the words or a
 * stale buffer changes it. One atomic per warp. */
__global__ void checksum_kernel(const unsigned long long *p, size_t n, unsigned long long *out)
{
	unsigned long long h = 0;
	for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
		h += mix64(p[k] ^ (k * 0xD6E8FEB86659FD93ull));
	for (int o = 16; o > 0; o /= 2)
		h += __shfl_down_sync(0xffffffffu, h, o);
	if ((threadIdx.x & 31) == 0)
		atomicAdd(out, h);
}

static int blocks; /* 4 per SM: enough to saturate memory bandwidth */

static uint64_t gpu_checksum(const unsigned long long *d, size_t n, unsigned long long *dsum)
{
	unsigned long long h = 0;
	CK(cudaMemset(dsum, 0, sizeof(*dsum)));
	checksum_kernel<<<blocks, 256>>>(d, n, dsum);
	CK(cudaGetLastError());
	CK(cudaMemcpy(&h, dsum, sizeof(h), cudaMemcpyDeviceToHost));
	return mix64(h ^ n);
}

/* ---- options ------------------------------------------------------------------ */

struct opts {
	const char *dir = nullptr;
	long count = 8;
	size_t size = 64u << 20;
	double fraction = 0.9;
	long settle_ms = 0;
	bool keep = false;
	int device = 0;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --dir D [options]\n"
		"Writes N checkpoints (each filled and checksummed on the GPU, copied to a\n"
		"pageable staging buffer with cudaMemcpy, written to DIR/e_%%03d.bin), then\n"
		"allocates one block of F x total device memory minus what it already holds\n"
		"with cudaMalloc, writes all of it with cudaMemset and checks a value back,\n"
		"frees it, and reads the checkpoints back in reverse order (read, cudaMemcpy\n"
		"to the GPU), verifying each on the GPU.\n"
		"\n"
		"  --dir D               where the checkpoints go (created if missing; required)\n"
		"  --count N             number of checkpoints (default 8)\n"
		"  --size S              checkpoint size: bytes or K/M/G/T, at least 4K, rounded\n"
		"                        down to a multiple of 8 (default 64M)\n"
		"  --alloc-fraction F    the block is F x total device memory minus what the\n"
		"                        program holds, 0 < F < 1 (default 0.9)\n"
		"  --settle-ms MS        idle time between the checkpoints and the allocation,\n"
		"                        as a program computing would spend it (default 0)\n"
		"  --keep                do not delete the checkpoints at the end\n"
		"  --device N            CUDA device ordinal (default 0)\n"
		"  --help                this text\n"
		"\n"
		"Output: the free/total device memory before and after the allocation, and\n"
		"  RESULT alloc=ok|FAILED verified=K/N\n"
		"Exit: 0 when the allocation succeeded and every checkpoint verified, 1\n"
		"otherwise or on a failed system call or CUDA error, 2 on a usage error,\n"
		"77 when there is no CUDA device.\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_DIR = 256, OPT_COUNT, OPT_SIZE, OPT_FRACTION, OPT_SETTLE, OPT_KEEP, OPT_DEVICE, OPT_HELP };
	static const struct option lo[] = {
		{ "dir", required_argument, nullptr, OPT_DIR },
		{ "count", required_argument, nullptr, OPT_COUNT },
		{ "size", required_argument, nullptr, OPT_SIZE },
		{ "alloc-fraction", required_argument, nullptr, OPT_FRACTION },
		{ "settle-ms", required_argument, nullptr, OPT_SETTLE },
		{ "keep", no_argument, nullptr, OPT_KEEP },
		{ "device", required_argument, nullptr, OPT_DEVICE },
		{ "help", no_argument, nullptr, OPT_HELP },
		{ nullptr, 0, nullptr, 0 },
	};
	int c;
	char *end;

	while ((c = getopt_long(argc, argv, "h", lo, nullptr)) != -1) {
		switch (c) {
		case OPT_DIR: o->dir = optarg; break;
		case OPT_COUNT: o->count = parse_long(optarg, "count", 1); break;
		case OPT_SIZE: o->size = parse_size_min(optarg, "size", 4096); break;
		case OPT_FRACTION:
			o->fraction = strtod(optarg, &end);
			if (end == optarg || *end || !(o->fraction > 0 && o->fraction < 1))
				die_usage("--alloc-fraction '%s': expected a number between 0 and 1", optarg);
			break;
		case OPT_SETTLE: o->settle_ms = parse_long(optarg, "settle-ms", 0); break;
		case OPT_KEEP: o->keep = true; break;
		case OPT_DEVICE: o->device = parse_device(optarg); break;
		case 'h':
		case OPT_HELP: usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (!o->dir)
		die_usage("%s", "--dir is required");
	o->size &= ~(size_t)7;
}

/* ---- main --------------------------------------------------------------------- */

static void path_of(char *buf, size_t cap, const char *dir, long i)
{
	if ((size_t)snprintf(buf, cap, "%s/e_%03ld.bin", dir, i) >= cap) {
		fprintf(stderr, PROG ": the path of checkpoint %ld is longer than %zu bytes\n", i, cap);
		exit(1);
	}
}

/* Prints the free and total device memory; returns the total. */
static size_t print_mem(const char *when)
{
	size_t fr = 0, total = 0;
	CK(cudaMemGetInfo(&fr, &total));
	printf(PROG ": %-22s free %.2f GiB of %.2f GiB\n", when, fr / GiB, total / GiB);
	fflush(stdout);
	return total;
}

int main(int argc, char **argv)
{
	struct opts o;
	char path[PATH_MAX];

	parse_opts(argc, argv, &o);
	o.dir = abs_dir(o.dir);

	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev == 0) {
		printf(PROG ": SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return 77;
	}
	if (o.device >= ndev) {
		fprintf(stderr, PROG ": --device %d: there are %d device(s)\n", o.device, ndev);
		return 2;
	}
	CK(cudaSetDevice(o.device));
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, o.device));
	blocks = 4 * prop.multiProcessorCount;

	const size_t S = o.size, words = S / 8;
	const long n = o.count;
	unsigned long long *dbuf, *dsum;
	CK(cudaMalloc(&dbuf, S));
	CK(cudaMalloc(&dsum, sizeof(*dsum)));
	const size_t held = S + sizeof(*dsum);
	/* pageable and touched once, as the buffer of a real program would be */
	unsigned char *stage;
	if (posix_memalign((void **)&stage, 4096, S) != 0)
		die_sys("posix_memalign", "staging buffer");
	memset(stage, 0, S);
	uint64_t *sum = (uint64_t *)malloc((size_t)n * sizeof(*sum));
	if (!sum)
		die_sys("malloc", "checksum table");
	printf(PROG ": device %d %s, %ld checkpoints of %.1f MiB in %s\n", o.device, prop.name, n, S / MiB, o.dir);

	/* (a) the checkpoints */
	for (long i = 0; i < n; i++) {
		fill_kernel<<<blocks, 256>>>(dbuf, words, (uint64_t)i);
		CK(cudaGetLastError());
		sum[i] = gpu_checksum(dbuf, words, dsum);
		CK(cudaMemcpy(stage, dbuf, S, cudaMemcpyDeviceToHost));
		path_of(path, sizeof(path), o.dir, i);
		write_file(path, stage, S, IO_WRITE, 0, false);
	}

	idle_ms(o.settle_ms);

	/* (b) most of the device: only possible if the cache gives its memory back */
	size_t total = print_mem("before the allocation:");
	size_t want = (size_t)(o.fraction * (double)total);
	want = want > held ? want - held : 0;
	printf(PROG ": allocating %.2f GiB (%.2f x total minus %.1f MiB held)\n", want / GiB, o.fraction,
	       held / MiB);
	fflush(stdout);
	bool alloc_ok = false;
	void *block = nullptr;
	e = cudaMalloc(&block, want);
	if (e != cudaSuccess) {
		printf(PROG ": cudaMalloc of %zu bytes failed: %s (%s)\n", want, cudaGetErrorString(e),
		       cudaGetErrorName(e));
		(void)cudaGetLastError(); /* an allocation failure is not sticky: carry on */
	} else {
		print_mem("after the allocation:");
		unsigned char back[8];
		CK(cudaMemset(block, 0xA5, want));
		CK(cudaMemcpy(back, (unsigned char *)block + want - sizeof(back), sizeof(back),
			      cudaMemcpyDeviceToHost));
		alloc_ok = true;
		for (unsigned char b : back)
			alloc_ok &= b == 0xA5;
		if (!alloc_ok)
			printf(PROG ": the allocated block does not read back what cudaMemset wrote\n");
		CK(cudaFree(block));
		print_mem("after the free:");
	}

	/* (c) the restores, newest first, verified on the GPU */
	long verified = 0;
	for (long i = n - 1; i >= 0; i--) {
		uint64_t fsize = 0;
		path_of(path, sizeof(path), o.dir, i);
		size_t got = read_file(path, stage, S, IO_WRITE, 0, &fsize);
		if (fsize != S || got != S) {
			printf(PROG ": MISMATCH in %s: size %" PRIu64 " (read %zu bytes), expected %zu\n", path, fsize,
			       got, S);
			continue;
		}
		CK(cudaMemset(dbuf, 0xFF, S)); /* a copy that does not happen cannot verify */
		CK(cudaMemcpy(dbuf, stage, S, cudaMemcpyHostToDevice));
		uint64_t h = gpu_checksum(dbuf, words, dsum);
		if (h == sum[i])
			verified++;
		else
			printf(PROG ": MISMATCH in %s: GPU checksum %016" PRIx64 ", expected %016" PRIx64 "\n", path,
			       h, sum[i]);
	}

	bool ok = alloc_ok && verified == n;
	if (verified == n && !o.keep) {
		for (long i = 0; i < n; i++) {
			path_of(path, sizeof(path), o.dir, i);
			if (unlink(path) != 0)
				die_sys("unlink", path);
		}
	}
	printf(PROG ": verified %ld/%ld checkpoints%s\n", verified, n,
	       verified == n || o.keep ? "" : " (checkpoints kept for inspection)");
	printf("RESULT alloc=%s verified=%ld/%ld\n", alloc_ok ? "ok" : "FAILED", verified, n);
	fflush(stdout);

	free(sum);
	free(stage);
	CK(cudaFree(dsum));
	CK(cudaFree(dbuf));
	return ok ? 0 : 1;
}
