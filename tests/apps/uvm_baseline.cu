/* uvm_baseline: the CUDA Unified Memory (UVM) baseline of the HPDC'23 paper
 * (section 5.2.2), on the same GPU RTM proxy as tests/apps/rtm_proxy_cuda.cu.
 * This file owns: the same 2-D wave propagator and GPU checksum, with the
 * checkpoint history kept in CUDA managed memory instead of files. A
 * checkpoint is a device-to-device copy of the wavefield into its own managed
 * buffer, then cudaMemAdvise(SetPreferredLocation, host) and
 * cudaMemPrefetchAsync to the host, so that its GPU memory is released while
 * the next time steps run. A restore prefetches the buffer back to the GPU
 * (with --hints all, checkpoint k+1 is prefetched while k is in use) and
 * copies it device-to-device into the wavefield, which is then verified
 * against the checksum computed on the GPU when it was taken. No files, and
 * nothing of ckptcache. Safety rule of the GPU machines: the whole managed
 * history must fit in 80% of the free device memory (cudaMemGetInfo),
 * otherwise the program refuses to run (exit 2): oversubscribed managed
 * memory can hang the GPU. Built by tests/gpu/build. */

#include <cuda_runtime.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <getopt.h>
#include <unistd.h>

#define PROG "uvm_baseline"
#define MiB (1024.0 * 1024.0)
#define MAX_FRACTION 0.8 /* of the free device memory the managed history may take */

/* ---- errors ---------------------------------------------------------------- */

/* Every failed CUDA call ends the run with its error string. No device (or no
 * usable driver) exits 77, the automake code for "skipped". */
[[noreturn]] static void cuda_die(const char *call, cudaError_t e, const char *file, int line)
{
	fprintf(stderr, PROG ": CUDA error at %s:%d: %s: %s (%s)\n", file, line, call, cudaGetErrorString(e),
		cudaGetErrorName(e));
	exit(e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? 77 : 1);
}
#define CK(call)                                                                                                   \
	do {                                                                                                       \
		cudaError_t e_ = (call);                                                                           \
		if (e_ != cudaSuccess)                                                                             \
			cuda_die(#call, e_, __FILE__, __LINE__);                                                   \
	} while (0)
#define CK_LAUNCH(what)                                                                                            \
	do {                                                                                                       \
		cudaError_t e_ = cudaGetLastError();                                                               \
		if (e_ != cudaSuccess)                                                                             \
			cuda_die("launch of " what, e_, __FILE__, __LINE__);                                       \
	} while (0)

[[noreturn]] static void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n" PROG ": try '" PROG " --help'\n");
	exit(2);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void idle_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- options --------------------------------------------------------------- */

enum order_kind { ORDER_SEQUENTIAL, ORDER_REVERSE, ORDER_RANDOM };
static const char *const order_names[] = { "sequential", "reverse", "random" };

struct opts {
	long count = 32;
	size_t size = 64u << 20;
	long steps = 10;
	long back_steps = -1; /* -1: = steps */
	long interval_ms = 0;
	enum order_kind order = ORDER_REVERSE;
	uint64_t seed = 1;
	bool prefetch = true; /* --hints all */
	int device = 0;
};

/* Bytes, or a number (fractions allowed) with K, M, G or T (powers of 1024),
 * optionally followed by B or iB. */
static bool parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || !(v >= 0))
		return false;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 'K': mul = 1024.0; end++; break;
	case 'M': mul = MiB; end++; break;
	case 'G': mul = MiB * 1024; end++; break;
	case 'T': mul = MiB * MiB; end++; break;
	default: break;
	}
	if (mul > 1 && (end[0] == 'i' || end[0] == 'I') && toupper((unsigned char)end[1]) == 'B')
		end += 2;
	else if (toupper((unsigned char)*end) == 'B')
		end++;
	if (*end != '\0')
		return false;
	v *= mul;
	if (v > (double)SSIZE_MAX)
		return false;
	*out = (size_t)v;
	return true;
}

static long parse_long(const char *s, const char *what, long min)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || errno || v < min) {
		fprintf(stderr, PROG ": --%s '%s': expected an integer >= %ld\n", what, s, min);
		exit(2);
	}
	return v;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options]\n"
		"The UVM baseline: the GPU RTM proxy's checkpoints kept in CUDA managed\n"
		"memory (one cudaMallocManaged buffer each). Checkpoint: D2D copy into the\n"
		"buffer, cudaMemAdvise(SetPreferredLocation, host), cudaMemPrefetchAsync to\n"
		"the host. Restore: prefetch back to the GPU and D2D copy, verified against\n"
		"the checksum computed on the GPU. Only the checkpoint/restore calls are timed.\n"
		"\n"
		"  --count N             number of checkpoints (default 32)\n"
		"  --size S              checkpoint (wavefield state) size: bytes or K/M/G/T,\n"
		"                        at least 4K; rounded down to a multiple of 8 (default 64M)\n"
		"  --steps-per-ckpt K    time steps between two checkpoints (default 10)\n"
		"  --backward-steps B    backward time steps after each restore (default: K)\n"
		"  --interval-ms MS      extra idle time before each checkpoint and between two\n"
		"                        restores (default 0)\n"
		"  --order O             restore order: sequential, reverse, random (default reverse)\n"
		"  --seed N              seed of the random order and of the initial field (default 1)\n"
		"  --hints all|none      all: the restore order is known, checkpoint k+1 is\n"
		"                        prefetched to the GPU while k is in use; none: no\n"
		"                        prefetch, the copy pulls the pages on demand (default all)\n"
		"  --device N            CUDA device ordinal (default 0)\n"
		"  --help                this text\n"
		"\n"
		"The whole history (count x size) must fit in 80%% of the free device memory,\n"
		"or the program refuses to run (oversubscribed managed memory can hang the GPU).\n"
		"Output: 'checkpoint' and 'restore' lines (buffers, MiB, seconds, GB/s with\n"
		"GB = 1e9 bytes), 'verified K/N checkpoints', and\n"
		"  RESULT checkpoint_GBps=X restore_GBps=Y verified=K/N\n"
		"Exit: 0 when every checkpoint verified, 1 on a mismatch or a CUDA error,\n"
		"2 on a usage error or a history too large for the device, 77 when there is\n"
		"no CUDA device or it cannot prefetch managed memory.\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_COUNT = 256, OPT_SIZE, OPT_STEPS, OPT_BACK, OPT_INTERVAL, OPT_ORDER, OPT_SEED, OPT_HINTS,
	       OPT_DEVICE, OPT_HELP };
	static const struct option lo[] = {
		{ "count", required_argument, nullptr, OPT_COUNT },
		{ "size", required_argument, nullptr, OPT_SIZE },
		{ "steps-per-ckpt", required_argument, nullptr, OPT_STEPS },
		{ "backward-steps", required_argument, nullptr, OPT_BACK },
		{ "interval-ms", required_argument, nullptr, OPT_INTERVAL },
		{ "order", required_argument, nullptr, OPT_ORDER },
		{ "seed", required_argument, nullptr, OPT_SEED },
		{ "hints", required_argument, nullptr, OPT_HINTS },
		{ "device", required_argument, nullptr, OPT_DEVICE },
		{ "help", no_argument, nullptr, OPT_HELP },
		{ nullptr, 0, nullptr, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, nullptr)) != -1) {
		switch (c) {
		case OPT_COUNT: o->count = parse_long(optarg, "count", 1); break;
		case OPT_SIZE:
			if (!parse_size(optarg, &o->size) || o->size < 4096)
				die_usage("--size '%s': expected a size of at least 4K (bytes or K, M, G, T)", optarg);
			break;
		case OPT_STEPS: o->steps = parse_long(optarg, "steps-per-ckpt", 0); break;
		case OPT_BACK: o->back_steps = parse_long(optarg, "backward-steps", 0); break;
		case OPT_INTERVAL: o->interval_ms = parse_long(optarg, "interval-ms", 0); break;
		case OPT_ORDER: {
			size_t k;
			for (k = 0; k < 3 && strcmp(optarg, order_names[k]) != 0; k++)
				;
			if (k == 3)
				die_usage("--order '%s': expected sequential, reverse or random", optarg);
			o->order = (enum order_kind)k;
			break;
		}
		case OPT_SEED: {
			char *end;
			errno = 0;
			o->seed = strtoull(optarg, &end, 0);
			if (end == optarg || *end || errno || optarg[0] == '-')
				die_usage("--seed '%s': expected a non-negative integer", optarg);
			break;
		}
		case OPT_HINTS:
			if (strcmp(optarg, "all") == 0)
				o->prefetch = true;
			else if (strcmp(optarg, "none") == 0)
				o->prefetch = false;
			else
				die_usage("--hints '%s': expected all or none", optarg);
			break;
		case OPT_DEVICE: {
			long d = parse_long(optarg, "device", 0);
			if (d > INT_MAX)
				die_usage("--device '%s': out of range", optarg);
			o->device = (int)d;
			break;
		}
		case 'h':
		case OPT_HELP: usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (o->back_steps < 0)
		o->back_steps = o->steps;
	o->size &= ~(size_t)7;
}

/* ---- the restore order ------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static inline uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* The same orders as the CPU and GPU proxies for the same seed. */
static long *restore_order(const struct opts *o)
{
	long n = o->count, *ord = (long *)malloc((size_t)n * sizeof(*ord));
	if (!ord) {
		fprintf(stderr, PROG ": out of host memory\n");
		exit(1);
	}
	for (long k = 0; k < n; k++)
		ord[k] = o->order == ORDER_REVERSE ? n - 1 - k : k;
	if (o->order == ORDER_RANDOM) {
		uint64_t s = splitmix64(o->seed ^ 0x5EEDull);
		if (!s)
			s = 1;
		for (long k = n - 1; k > 0; k--) {
			long j = (long)(xorshift64(&s) % (uint64_t)(k + 1));
			long t = ord[k];
			ord[k] = ord[j];
			ord[j] = t;
		}
	}
	return ord;
}

/* ---- the GPU side: wave propagation and checksum (as in rtm_proxy_cuda.cu) -- */

/* 8th-order central second derivative: c0 + sum_k ck (f[+k] + f[-k]). */
#define C0 (-205.0f / 72.0f)
#define C1 (8.0f / 5.0f)
#define C2 (-1.0f / 5.0f)
#define C3 (8.0f / 315.0f)
#define C4 (-1.0f / 560.0f)

#define DX 10.0f      /* grid spacing, m */
#define VMAX 4500.0f  /* fastest velocity of the model, m/s */
#define DT (0.4f * DX / VMAX) /* Courant number 0.4: stable for this stencil in 2-D */
#define F0 15.0f      /* Ricker peak frequency, Hz */

struct grid {
	int nx, nz;     /* grid points; nx * nz <= field */
	size_t field;   /* floats per field: the state is 2 * field floats = the checkpoint */
	size_t src;     /* index of the source point */
};

/* Picks nx x nz as square as possible with nx * nz == field, or, where the
 * field's size has no divisor near its square root, nx * nz a little below it
 * (the few floats past the grid are then zero padding of the state). */
static struct grid make_grid(size_t bytes)
{
	struct grid g;
	g.field = bytes / 8;
	size_t r = (size_t)sqrt((double)g.field), nx = 0;
	while (r * r > g.field)
		r--;
	for (size_t d = r; d >= r / 2 && d >= 1; d--)
		if (g.field % d == 0) {
			nx = d;
			break;
		}
	if (!nx)
		nx = r;
	size_t nz = g.field / nx;
	if (nx > INT_MAX || nz > INT_MAX || (nz + 7) / 8 > 65535) {
		fprintf(stderr, PROG ": --size %zu: grid %zu x %zu too large\n", bytes, nx, nz);
		exit(2);
	}
	g.nx = (int)nx;
	g.nz = (int)nz;
	g.src = (size_t)(g.nz / 8) * nx + nx / 2; /* near the surface, mid-line */
	return g;
}

static float ricker(double t)
{
	double a = M_PI * F0 * (t - 1.0 / F0);
	a *= a;
	return (float)((1.0 - 2.0 * a) * exp(-a));
}

__device__ __forceinline__ float at(const float *p, int x, int z, int nx, int nz)
{
	return (x >= 0 && x < nx && z >= 0 && z < nz) ? p[(size_t)z * nx + x] : 0.0f;
}

/* One leapfrog step: out = 2 cur - out + (v dt/dx)^2 lap(cur) + amp at src.
 * out holds p(t - dt) on entry and p(t + dt) on return (in place: each point
 * reads only its own value of out). Outside the grid the field is zero. The
 * scheme is symmetric in time: called with the two fields swapped it steps
 * backward. */
__global__ void step_kernel(float *__restrict__ out, const float *__restrict__ cur,
			    const float *__restrict__ vel2, int nx, int nz, size_t src, float amp)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int z = blockIdx.y * blockDim.y + threadIdx.y;
	if (x >= nx || z >= nz)
		return;
	size_t i = (size_t)z * nx + x;
	float c = cur[i];
	float lap = 2.0f * C0 * c;
	lap += C1 * (at(cur, x - 1, z, nx, nz) + at(cur, x + 1, z, nx, nz) + at(cur, x, z - 1, nx, nz) +
		     at(cur, x, z + 1, nx, nz));
	lap += C2 * (at(cur, x - 2, z, nx, nz) + at(cur, x + 2, z, nx, nz) + at(cur, x, z - 2, nx, nz) +
		     at(cur, x, z + 2, nx, nz));
	lap += C3 * (at(cur, x - 3, z, nx, nz) + at(cur, x + 3, z, nx, nz) + at(cur, x, z - 3, nx, nz) +
		     at(cur, x, z + 3, nx, nz));
	lap += C4 * (at(cur, x - 4, z, nx, nz) + at(cur, x + 4, z, nx, nz) + at(cur, x, z - 4, nx, nz) +
		     at(cur, x, z + 4, nx, nz));
	float next = 2.0f * c - out[i] + vel2[i] * lap;
	if (i == src)
		next += amp;
	out[i] = next;
}

__device__ __forceinline__ unsigned long long mix64(unsigned long long x)
{
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Initial state and model: both fields get low-amplitude "ambient noise" (so
 * that every word of every checkpoint is live data, not zeros), the squared
 * Courant number comes from a layered model with a fast block. */
__global__ void init_kernel(float *state, float *vel2, int nx, int nz, size_t field, unsigned long long seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < field; i += (size_t)gridDim.x * blockDim.x) {
		for (int f = 0; f < 2; f++) {
			unsigned long long h = mix64(seed * 0x9E3779B97F4A7C15ull + 2 * i + f + 1);
			state[f * field + i] = i < (size_t)nx * nz ? ((float)(h >> 40) / 16777216.0f - 0.5f) * 2e-3f : 0.0f;
		}
		int z = (int)(i / (size_t)nx), x = (int)(i % (size_t)nx);
		float v = 1500.0f + 2500.0f * (float)z / (float)nz;               /* gradient, 1500..4000 m/s */
		if (z > nz / 2 && z < 3 * nz / 4 && x > nx / 3 && x < 2 * nx / 3) /* a salt body */
			v = VMAX;
		float c = v * DT / DX;
		vel2[i] = c * c;
	}
}

/* Sum over the words of mix64(word ^ index * golden): position-sensitive and
 * independent of the summation order, so blocks can add atomically. */
__global__ void checksum_kernel(const unsigned long long *__restrict__ w, size_t n, unsigned long long *out)
{
	unsigned long long acc = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		acc += mix64(w[i] ^ ((i + 1) * 0x9E3779B97F4A7C15ull));
	for (int d = 16; d > 0; d /= 2)
		acc += __shfl_down_sync(0xffffffffu, acc, d);
	if ((threadIdx.x & 31) == 0)
		atomicAdd(out, acc);
}

struct gpu {
	struct grid g;
	cudaStream_t s;       /* the compute stream (created, non-blocking) */
	float *state;         /* 2 * g.field floats: the checkpoint */
	float *vel2;
	unsigned long long *sum; /* device scratch of the checksum */
	int blocks;           /* grid-stride launches */
	long t;               /* time index of the newer field: p(t * DT) */
};

/* The newer field sits in the second half when t is even (the step swaps the
 * roles of the halves). */
static float *newer(struct gpu *G) { return G->state + (G->t % 2 == 0 ? G->g.field : 0); }
static float *older(struct gpu *G) { return G->state + (G->t % 2 == 0 ? 0 : G->g.field); }

static void launch_step(struct gpu *G, float *out, const float *cur, double src_t)
{
	dim3 b(32, 8), gr((unsigned)((G->g.nx + 31) / 32), (unsigned)((G->g.nz + 7) / 8));
	step_kernel<<<gr, b, 0, G->s>>>(out, cur, G->vel2, G->g.nx, G->g.nz, G->g.src, ricker(src_t));
	CK_LAUNCH("step_kernel");
}

/* p(t+1) = 2 p(t) - p(t-1) + L p(t) + s(t), written over p(t-1). */
static void forward_step(struct gpu *G)
{
	launch_step(G, older(G), newer(G), G->t * (double)DT);
	G->t++;
}

/* p(t-2) = 2 p(t-1) - p(t) + L p(t-1) + s(t-1), written over p(t). */
static void backward_step(struct gpu *G)
{
	launch_step(G, newer(G), older(G), (G->t - 1) * (double)DT);
	G->t--;
}

static uint64_t gpu_checksum(struct gpu *G)
{
	size_t n = G->g.field; /* 64-bit words of the state: 2 fields x field floats */
	unsigned long long h = 0;
	CK(cudaMemsetAsync(G->sum, 0, sizeof(*G->sum), G->s));
	checksum_kernel<<<G->blocks, 256, 0, G->s>>>((const unsigned long long *)G->state, n, G->sum);
	CK_LAUNCH("checksum_kernel");
	CK(cudaMemcpyAsync(&h, G->sum, sizeof(h), cudaMemcpyDeviceToHost, G->s));
	CK(cudaStreamSynchronize(G->s));
	return splitmix64(h ^ (uint64_t)n); /* fold in the length */
}

/* ---- main ------------------------------------------------------------------- */

static void print_phase(const char *name, long n, double bytes, double secs, const char *split)
{
	printf(PROG ": %-10s  %ld buffers  %.1f MiB  %.3f s  %.2f GB/s  (%s)\n", name, n, bytes / MiB, secs,
	       secs > 0 ? bytes / secs / 1e9 : 0.0, split);
}

static double free_mib(void)
{
	size_t fr = 0, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	return (double)fr / MiB;
}

int main(int argc, char **argv)
{
	struct opts o;
	parse_opts(argc, argv, &o);

	int ndev = 0;
	CK(cudaGetDeviceCount(&ndev));
	if (o.device >= ndev) {
		fprintf(stderr, PROG ": --device %d: only %d CUDA device(s)\n", o.device, ndev);
		exit(2);
	}
	CK(cudaSetDevice(o.device));
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, o.device));
	int cma = 0;
	CK(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, o.device));
	if (!cma) {
		fprintf(stderr, PROG ": SKIP: device %d (%s) cannot prefetch managed memory "
				"(cudaDevAttrConcurrentManagedAccess = 0)\n", o.device, prop.name);
		exit(77);
	}

	struct gpu G;
	memset(&G, 0, sizeof(G));
	G.g = make_grid(o.size);
	G.blocks = prop.multiProcessorCount * 8;
	const size_t S = 2 * G.g.field * sizeof(float);
	cudaStream_t ios; /* the prefetches */
	CK(cudaStreamCreateWithFlags(&G.s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&ios, cudaStreamNonBlocking));
	CK(cudaMalloc(&G.state, S));
	CK(cudaMalloc(&G.vel2, G.g.field * sizeof(float)));
	CK(cudaMalloc(&G.sum, sizeof(*G.sum)));
	init_kernel<<<G.blocks, 256, 0, G.s>>>(G.state, G.vel2, G.g.nx, G.g.nz, G.g.field, o.seed);
	CK_LAUNCH("init_kernel");
	CK(cudaStreamSynchronize(G.s));

	/* The safety rule: the whole managed history below 80% of what is free
	 * now, the working set above already allocated. */
	long n = o.count;
	size_t fr = 0, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	double history = (double)S * (double)n;
	if (history > MAX_FRACTION * (double)fr) {
		fprintf(stderr,
			PROG ": refusing to run: %ld checkpoints of %.1f MiB = %.1f MiB of managed memory, more than "
			     "%.0f%% of the %.1f MiB free on device %d (oversubscribed managed memory can hang the GPU); "
			     "lower --count or --size\n",
			n, S / MiB, history / MiB, MAX_FRACTION * 100, (double)fr / MiB, o.device);
		exit(2);
	}

	void **buf = (void **)calloc((size_t)n, sizeof(*buf));
	cudaEvent_t *ev = (cudaEvent_t *)calloc((size_t)n, sizeof(*ev));
	uint64_t *sum = (uint64_t *)malloc((size_t)n * sizeof(*sum));
	long *tidx = (long *)malloc((size_t)n * sizeof(*tidx));
	long *ord = restore_order(&o);
	if (!buf || !ev || !sum || !tidx) {
		fprintf(stderr, PROG ": out of host memory\n");
		exit(1);
	}
	for (long i = 0; i < n; i++) {
		CK(cudaMallocManaged(&buf[i], S, cudaMemAttachGlobal));
		CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
	}
	const cudaMemLocation host = { cudaMemLocationTypeHost, 0 };
	const cudaMemLocation dev = { cudaMemLocationTypeDevice, o.device };

	printf(PROG ": device %d %s (sm_%d%d, %d SMs), grid %d x %d, state %.1f MiB, %ld checkpoints, "
	       "%ld steps each, managed history %.1f MiB of %.1f MiB free, hints %s, order %s\n",
	       o.device, prop.name, prop.major, prop.minor, prop.multiProcessorCount, G.g.nx, G.g.nz, S / MiB, n,
	       o.steps, history / MiB, (double)fr / MiB, o.prefetch ? "all" : "none", order_names[o.order]);
	fflush(stdout);

	/* Forward pass. The checkpoint blocks the program for the D2D copy and
	 * the advice; the prefetch to the host overlaps the next time steps, and
	 * whatever of it is left at the end of the pass (the drain) is counted. */
	double tcopy = 0, tcomp = 0, total = history;
	for (long i = 0; i < n; i++) {
		idle_ms(o.interval_ms);
		double t0 = now_s();
		for (long k = 0; k < o.steps; k++)
			forward_step(&G);
		sum[i] = gpu_checksum(&G);
		tidx[i] = G.t;
		double t1 = now_s();
		CK(cudaMemcpyAsync(buf[i], G.state, S, cudaMemcpyDeviceToDevice, G.s));
		CK(cudaStreamSynchronize(G.s)); /* the state changes with the next step */
		CK(cudaMemAdvise(buf[i], S, cudaMemAdviseSetPreferredLocation, host));
		CK(cudaMemPrefetchAsync(buf[i], S, host, 0, ios));
		double t2 = now_s();
		tcomp += t1 - t0;
		tcopy += t2 - t1;
	}
	double t0 = now_s();
	CK(cudaStreamSynchronize(ios));
	double tdrain = now_s() - t0, tw = tcopy + tdrain;
	char split[160];
	printf(PROG ": compute     %ld forward steps  %.3f s\n", n * o.steps, tcomp);
	snprintf(split, sizeof(split), "copy+advise+prefetch issue %.3f s, drain %.3f s", tcopy, tdrain);
	print_phase("checkpoint", n, total, tw, split);
	/* Where the driver says the history went (it may keep the GPU chunks of
	 * migrated pages cached, so cudaMemGetInfo need not rise). */
	long on_host = 0;
	for (long i = 0; i < n; i++) {
		int pref = 0, last = 0;
		CK(cudaMemRangeGetAttribute(&pref, sizeof(pref), cudaMemRangeAttributePreferredLocationType, buf[i], S));
		CK(cudaMemRangeGetAttribute(&last, sizeof(last), cudaMemRangeAttributeLastPrefetchLocationType, buf[i], S));
		on_host += pref == cudaMemLocationTypeHost && last == cudaMemLocationTypeHost;
	}
	printf(PROG ": history: %ld/%ld buffers with preferred and last-prefetch location host; device memory "
		    "free %.1f MiB (cudaMemGetInfo)\n", on_host, n, free_mib());
	fflush(stdout);

	/* Restore phase. */
	long verified = 0;
	double tr = 0;
	tcomp = 0;
	if (o.prefetch) {
		CK(cudaMemPrefetchAsync(buf[ord[0]], S, dev, 0, ios));
		CK(cudaEventRecord(ev[ord[0]], ios));
	}
	for (long k = 0; k < n; k++) {
		long i = ord[k];
		double r0 = now_s();
		if (o.prefetch)
			CK(cudaStreamWaitEvent(G.s, ev[i], 0));
		CK(cudaMemcpyAsync(G.state, buf[i], S, cudaMemcpyDeviceToDevice, G.s));
		if (o.prefetch && k + 1 < n) {
			CK(cudaMemPrefetchAsync(buf[ord[k + 1]], S, dev, 0, ios));
			CK(cudaEventRecord(ev[ord[k + 1]], ios));
		}
		CK(cudaStreamSynchronize(G.s));
		tr += now_s() - r0;
		G.t = tidx[i];
		uint64_t h = gpu_checksum(&G);
		if (h == sum[i])
			verified++;
		else
			printf(PROG ": MISMATCH in checkpoint %ld: GPU checksum %016" PRIx64 ", expected %016" PRIx64 "\n",
			       i, h, sum[i]);
		double r1 = now_s();
		for (long b = 0; b < o.back_steps; b++)
			backward_step(&G);
		CK(cudaStreamSynchronize(G.s));
		tcomp += now_s() - r1;
		if (k + 1 < n)
			idle_ms(o.interval_ms);
	}
	CK(cudaStreamSynchronize(ios));
	printf(PROG ": compute     %ld backward steps  %.3f s\n", n * o.back_steps, tcomp);
	print_phase("restore", n, total, tr, o.prefetch ? "prefetch wait + D2D copy" : "on-demand D2D copy");

	bool ok = verified == n;
	printf(PROG ": verified %ld/%ld checkpoints\n", verified, n);
	printf("RESULT checkpoint_GBps=%.3f restore_GBps=%.3f verified=%ld/%ld\n", tw > 0 ? total / tw / 1e9 : 0.0,
	       tr > 0 ? total / tr / 1e9 : 0.0, verified, n);
	fflush(stdout);

	for (long i = 0; i < n; i++) {
		CK(cudaFree(buf[i]));
		CK(cudaEventDestroy(ev[i]));
	}
	CK(cudaFree(G.sum));
	CK(cudaFree(G.vel2));
	CK(cudaFree(G.state));
	CK(cudaStreamDestroy(ios));
	CK(cudaStreamDestroy(G.s));
	free(buf);
	free(ev);
	free(sum);
	free(tidx);
	free(ord);
	return ok ? 0 : 1;
}
