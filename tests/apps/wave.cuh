/* wave.cuh: the GPU side that rtm_proxy_cuda.cu and uvm_baseline.cu share:
 * CUDA error checks, the 2-D acoustic wave propagator (grid, model, stencil
 * step with its Ricker source, forward and backward steps) and its checksum. */
/* One propagator for both, so that the UVM baseline moves exactly the state
 * the file-based proxy checkpoints. The includer defines PROG first. */
#ifndef CKC_WAVE_CUH
#define CKC_WAVE_CUH

#include <cuda_runtime.h>

#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "proxy_common.h"

#include "cuda_check.cuh"

/* Makes device the current one and returns its properties; an ordinal past
 * the last device is a usage error (exit 2). */
static inline void gpu_open(int device, cudaDeviceProp *prop)
{
	int ndev = 0;
	CK(cudaGetDeviceCount(&ndev));
	if (device >= ndev) {
		fprintf(stderr, PROG ": --device %d: only %d CUDA device(s)\n", device, ndev);
		exit(2);
	}
	CK(cudaSetDevice(device));
	CK(cudaGetDeviceProperties(prop, device));
}

/* ---- the model and the kernels ------------------------------------------------ */

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
static inline struct grid make_grid(size_t bytes)
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

static inline float ricker(double t)
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

/* ---- the propagator on the host side ------------------------------------------ */

struct gpu {
	struct grid g;
	cudaStream_t s;       /* of the kernels: 0 (the default stream) or a created one */
	float *state;         /* 2 * g.field floats: the checkpoint */
	float *vel2;
	unsigned long long *sum; /* device scratch of the checksum */
	int blocks;           /* grid-stride launches */
	long t;               /* time index of the newer field: p(t * DT) */
};

/* Sizes the grid for a state of `bytes` bytes, allocates the state, the model
 * and the checksum scratch, and starts their initialisation on stream s
 * (not waited for). */
static inline void gpu_init(struct gpu *G, size_t bytes, int sms, cudaStream_t s, unsigned long long seed)
{
	memset(G, 0, sizeof(*G));
	G->g = make_grid(bytes);
	G->blocks = sms * 8;
	G->s = s;
	CK(cudaMalloc(&G->state, 2 * G->g.field * sizeof(float)));
	CK(cudaMalloc(&G->vel2, G->g.field * sizeof(float)));
	CK(cudaMalloc(&G->sum, sizeof(*G->sum)));
	init_kernel<<<G->blocks, 256, 0, G->s>>>(G->state, G->vel2, G->g.nx, G->g.nz, G->g.field, seed);
	CK_LAUNCH("init_kernel");
}

/* The stream is the caller's: it created it. */
static inline void gpu_free(struct gpu *G)
{
	CK(cudaFree(G->sum));
	CK(cudaFree(G->vel2));
	CK(cudaFree(G->state));
}

/* The newer field sits in the second half when t is even (the step swaps the
 * roles of the halves). */
static inline float *newer(struct gpu *G) { return G->state + (G->t % 2 == 0 ? G->g.field : 0); }
static inline float *older(struct gpu *G) { return G->state + (G->t % 2 == 0 ? 0 : G->g.field); }

static inline void launch_step(struct gpu *G, float *out, const float *cur, double src_t)
{
	dim3 b(32, 8), gr((unsigned)((G->g.nx + 31) / 32), (unsigned)((G->g.nz + 7) / 8));
	step_kernel<<<gr, b, 0, G->s>>>(out, cur, G->vel2, G->g.nx, G->g.nz, G->g.src, ricker(src_t));
	CK_LAUNCH("step_kernel");
}

/* p(t+1) = 2 p(t) - p(t-1) + L p(t) + s(t), written over p(t-1). */
static inline void forward_step(struct gpu *G)
{
	launch_step(G, older(G), newer(G), G->t * (double)DT);
	G->t++;
}

/* p(t-2) = 2 p(t-1) - p(t) + L p(t-1) + s(t-1), written over p(t). */
static inline void backward_step(struct gpu *G)
{
	launch_step(G, newer(G), older(G), (G->t - 1) * (double)DT);
	G->t--;
}

/* gpu_checksum over the first `bytes` bytes of the state (a multiple of 8);
 * gpu_checksum is the whole state. */
static inline uint64_t prefix_checksum(struct gpu *G, size_t bytes)
{
	size_t n = bytes / 8;
	unsigned long long h = 0;
	CK(cudaMemsetAsync(G->sum, 0, sizeof(*G->sum), G->s));
	checksum_kernel<<<G->blocks, 256, 0, G->s>>>((const unsigned long long *)G->state, n, G->sum);
	CK_LAUNCH("checksum_kernel");
	CK(cudaMemcpyAsync(&h, G->sum, sizeof(h), cudaMemcpyDeviceToHost, G->s));
	CK(cudaStreamSynchronize(G->s));
	return splitmix64(h ^ (uint64_t)n);
}

static inline uint64_t gpu_checksum(struct gpu *G)
{
	/* 64-bit words of the state: 2 fields x field floats */
	return prefix_checksum(G, G->g.field * 8);
}

/* A block of time steps of the forward pass; returns the checksum of the
 * state it reaches, which waits for the steps. */
static inline uint64_t forward_steps(struct gpu *G, long steps)
{
	for (long k = 0; k < steps; k++)
		forward_step(G);
	return gpu_checksum(G);
}

/* What the restore phase does with a state just copied back into G->state:
 * verifies it against the checksum `want` taken at time index t (a mismatch
 * prints a line naming `what`), then runs `steps` backward time steps from it
 * and adds their time, waited for, to *tcomp. Returns whether it verified. */
static inline bool check_and_step_back(struct gpu *G, long t, uint64_t want, const char *what, long steps,
				       double *tcomp)
{
	G->t = t;
	uint64_t h = gpu_checksum(G);
	if (h != want)
		printf(PROG ": MISMATCH in %s: GPU checksum %016" PRIx64 ", expected %016" PRIx64 "\n", what, h,
		       want);
	double t0 = now_s();
	for (long b = 0; b < steps; b++)
		backward_step(G);
	CK(cudaStreamSynchronize(G->s));
	*tcomp += now_s() - t0;
	return h == want;
}

/* check_and_step_back for a checkpoint of `bytes` bytes: only that prefix
 * of the state was restored, and only it is verified. */
static inline bool check_prefix_and_step_back(struct gpu *G, size_t bytes, long t, uint64_t want, const char *what,
				       long steps, double *tcomp)
{
	if (bytes == 2 * G->g.field * sizeof(float))
		return check_and_step_back(G, t, want, what, steps, tcomp);
	G->t = t;
	uint64_t h = prefix_checksum(G, bytes);
	if (h != want)
		printf(PROG ": MISMATCH in %s: GPU checksum of the first %zu bytes %016" PRIx64 ", expected %016" PRIx64
			    "\n", what, bytes, h, want);
	double t0 = now_s();
	for (long b = 0; b < steps; b++)
		backward_step(G);
	CK(cudaStreamSynchronize(G->s));
	*tcomp += now_s() - t0;
	return h == want;
}

#endif
