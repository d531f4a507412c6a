// A 2-D finite-difference stencil that checkpoints as such codes commonly
// do, knowing nothing of ckptcache: after each block of time steps the band
// of rows that holds the wave (a different size each time, rarely a whole
// number of pages, starting anywhere) is copied with cudaMemcpy into a host
// staging buffer and written with write() or fwrite(); the restore phase
// reads the files back in reverse, random or forward order into the same
// staging buffer and copies each to the device with cudaMemcpy. Every
// restored byte is checked on the GPU against a hash taken of the device
// bytes at checkpoint time.
//
//   stencil_cuda --dir DIR [--side N] [--count C] [--steps K]
//                [--staging malloc|offset|pinned|each] [--io write|fwrite]
//                [--order reverse|random|sequential] [--hints FILE]
//                [--touch none|read|write] [--interval-ms MS] [--seed S] [--keep]
//   malloc: one malloc'd buffer for every size (as malloc returns it: 16
//   bytes into a page for large sizes); offset: 16 bytes further; pinned:
//   cudaMallocHost; each: malloc'd and freed per checkpoint. touch: the
//   program reads (read) or changes a few bytes of (write) the staging
//   buffer between the read and the copy to the device.
// Prints per-phase times and
//   RESULT checkpoint_s=X restore_s=Y checkpoint_GBps=.. restore_GBps=.. verified=V/C bytes=B
// and exits 0 iff every restore verified.
#include <cuda_runtime.h>

#include <fcntl.h>
#include <getopt.h>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

#define PROG "stencil_cuda"
#include "proxy_common.h"
#include "cuda_check.cuh"

[[noreturn]] static void die(const char *what)
{
	fprintf(stderr, PROG ": %s\n", what);
	exit(1);
}

__host__ __device__ static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

// The hash of n 32-bit words: a sum of mixed (word, index) pairs, the same
// on the host and the device whatever the order.
__global__ void hash_kernel(const uint32_t *w, size_t n, unsigned long long *out)
{
	uint64_t acc = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		acc += mix64(((uint64_t)w[i] << 32) ^ i);
	atomicAdd(out, (unsigned long long)acc);
}

static uint64_t host_hash(const unsigned char *p, size_t bytes)
{
	uint64_t acc = 0;
	for (size_t i = 0; i < bytes / 4; i++) {
		uint32_t w;
		memcpy(&w, p + 4 * i, 4);
		acc += mix64(((uint64_t)w << 32) ^ i);
	}
	return acc;
}

static uint64_t dev_hash(const void *d, size_t bytes, unsigned long long *acc)
{
	unsigned long long h = 0;
	CK(cudaMemset(acc, 0, sizeof(*acc)));
	hash_kernel<<<256, 256>>>((const uint32_t *)d, bytes / 4, acc);
	CK(cudaGetLastError());
	CK(cudaMemcpy(&h, acc, sizeof(h), cudaMemcpyDeviceToHost));
	return h;
}

// One step of the acoustic wave equation, second order in time, a point
// source near the top edge: the wave spreads down the field over time.
__global__ void wave_step(const float *prev, const float *cur, float *next, int n, float c, int t)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x <= 0 || y <= 0 || x >= n - 1 || y >= n - 1)
		return;
	size_t i = (size_t)y * n + x;
	float lap = cur[i - 1] + cur[i + 1] + cur[i - n] + cur[i + n] - 4.0f * cur[i];
	float v = 2.0f * cur[i] - prev[i] + c * lap;
	if (x == n / 2 && y == 8)
		v += sinf(0.05f * (float)t);
	next[i] = v;
}

static void write_ckpt(const char *path, const unsigned char *b, size_t n, bool use_stdio)
{
	if (use_stdio) {
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0)
			die_sys("fwrite", path);
		return;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die_sys("open", path);
	for (size_t done = 0; done < n;) {
		ssize_t k = write(fd, b + done, n - done);
		if (k <= 0)
			die_sys("write", path);
		done += (size_t)k;
	}
	if (close(fd) != 0)
		die_sys("close", path);
}

static size_t read_ckpt(const char *path, unsigned char *b, size_t n, bool use_stdio)
{
	size_t done = 0;
	if (use_stdio) {
		FILE *f = fopen(path, "rb");
		if (!f)
			die_sys("fopen", path);
		done = fread(b, 1, n, f);
		fclose(f);
		return done;
	}
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die_sys("open", path);
	while (done < n) {
		ssize_t k = read(fd, b + done, n - done);
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	close(fd);
	return done;
}

int main(int argc, char **argv)
{
	const char *dir = nullptr, *staging = "offset", *order = "reverse", *hints = nullptr, *touch = "none";
	bool use_stdio = false, keep = false;
	long side = 4096, count = 300, steps = 4, interval = 0, seed = 1;
	static const option opts[] = {
		{ "dir", 1, nullptr, 'd' },     { "side", 1, nullptr, 's' },     { "count", 1, nullptr, 'n' },
		{ "steps", 1, nullptr, 'k' },   { "staging", 1, nullptr, 'S' },  { "io", 1, nullptr, 'i' },
		{ "order", 1, nullptr, 'o' },   { "hints", 1, nullptr, 'H' },    { "touch", 1, nullptr, 't' },
		{ "interval-ms", 1, nullptr, 'I' }, { "seed", 1, nullptr, 'x' }, { "keep", 0, nullptr, 'K' },
		{ nullptr, 0, nullptr, 0 },
	};
	for (int c; (c = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 's': side = atol(optarg); break;
		case 'n': count = atol(optarg); break;
		case 'k': steps = atol(optarg); break;
		case 'S': staging = optarg; break;
		case 'i': use_stdio = !strcmp(optarg, "fwrite"); break;
		case 'o': order = optarg; break;
		case 'H': hints = optarg; break;
		case 't': touch = optarg; break;
		case 'I': interval = atol(optarg); break;
		case 'x': seed = atol(optarg); break;
		case 'K': keep = true; break;
		default: fprintf(stderr, PROG ": see the comment at the top of stencil_cuda.cu\n"); return 2;
		}
	}
	if (!dir || side < 64 || count < 1) {
		fprintf(stderr, PROG ": --dir is required; --side >= 64, --count >= 1\n");
		return 2;
	}
	const size_t n = (size_t)side, fbytes = n * n * sizeof(float), row = n * sizeof(float);
	float *f[3];
	for (auto &p : f) {
		CK(cudaMalloc(&p, fbytes));
		CK(cudaMemset(p, 0, fbytes));
	}
	unsigned char *back;
	unsigned long long *acc;
	CK(cudaMalloc(&back, fbytes));
	CK(cudaMalloc(&acc, sizeof(*acc)));

	// each checkpoint: bytes [off, off+len) of the current field
	size_t *off = (size_t *)calloc(count, sizeof(size_t)), *len = (size_t *)calloc(count, sizeof(size_t));
	uint64_t *sum = (uint64_t *)calloc(count, sizeof(uint64_t));
	long *ord = (long *)calloc(count, sizeof(long));
	if (!off || !len || !sum || !ord)
		die("out of memory");
	for (long i = 0; i < count; i++) {
		uint64_t r = mix64((uint64_t)seed * 7919 + (uint64_t)i);
		size_t rows = 1 + (size_t)(r % n);
		size_t first = (size_t)((r >> 20) % (n - rows + 1));
		off[i] = first * row + 4 * ((r >> 40) % 7);
		len[i] = rows * row - 4 * ((r >> 44) % 5) - 4 * ((r >> 40) % 7);
		if (off[i] + len[i] > fbytes)
			len[i] = fbytes - off[i];
		if (len[i] < 4)
			len[i] = 4;
	}

	bool each = !strcmp(staging, "each"), pinned = !strcmp(staging, "pinned");
	unsigned char *base = nullptr, *stage = nullptr;
	if (pinned) {
		CK(cudaMallocHost(&stage, fbytes));
	} else if (!each) {
		base = (unsigned char *)malloc(fbytes + 64);
		if (!base)
			die("out of memory");
		stage = base + (!strcmp(staging, "offset") ? 16 : 0);
	}

	printf(PROG ": %ldx%ld field, %ld checkpoints, staging %s, io %s, order %s, touch %s\n", side, side, count,
	       staging, use_stdio ? "fwrite" : "write", order, touch);
	fflush(stdout);
	dim3 blk(32, 8), grd((unsigned)((n + 31) / 32), (unsigned)((n + 7) / 8));
	char path[4096];
	double tw = 0, tr = 0;
	double total = 0;
	int t = 0;
	for (long i = 0; i < count; i++) {
		for (long k = 0; k < steps; k++, t++) {
			wave_step<<<grd, blk>>>(f[0], f[1], f[2], (int)n, 0.2f, t);
			float *x = f[0];
			f[0] = f[1];
			f[1] = f[2];
			f[2] = x;
		}
		CK(cudaGetLastError());
		const unsigned char *cur = (const unsigned char *)f[1];
		sum[i] = dev_hash(cur + off[i], len[i], acc);
		if (each && !(stage = (unsigned char *)malloc(len[i])))
			die("out of memory");
		idle_ms(interval);
		double t0 = now_s();
		CK(cudaMemcpy(stage, cur + off[i], len[i], cudaMemcpyDeviceToHost));
		snprintf(path, sizeof(path), "%s/ckpt_%05ld.bin", dir, i);
		write_ckpt(path, stage, len[i], use_stdio);
		tw += now_s() - t0;
		total += (double)len[i];
		if (each)
			free(stage);
	}

	for (long k = 0; k < count; k++)
		ord[k] = !strcmp(order, "sequential") ? k : count - 1 - k;
	if (!strcmp(order, "random"))
		for (long k = count - 1; k > 0; k--) {
			long j = (long)(mix64((uint64_t)seed + (uint64_t)k * 31) % (uint64_t)(k + 1)), x = ord[k];
			ord[k] = ord[j];
			ord[j] = x;
		}
	if (hints) {
		FILE *h = fopen(hints, "w");
		if (!h)
			die_sys("fopen", hints);
		for (long k = 0; k < count; k++)
			fprintf(h, "%s/ckpt_%05ld.bin\n", dir, ord[k]);
		if (fclose(h) != 0)
			die_sys("fclose", hints);
	}

	long verified = 0;
	for (long k = 0; k < count; k++) {
		long i = ord[k];
		if (each && !(stage = (unsigned char *)malloc(len[i])))
			die("out of memory");
		snprintf(path, sizeof(path), "%s/ckpt_%05ld.bin", dir, i);
		idle_ms(interval);
		double t0 = now_s();
		size_t got = read_ckpt(path, stage, len[i], use_stdio);
		tr += now_s() - t0;
		uint64_t want = sum[i];
		bool ok = got == len[i];
		if (ok && strcmp(touch, "none")) {
			ok = host_hash(stage, len[i]) == sum[i];
			if (ok && !strcmp(touch, "write")) {
				for (int q = 0; q < 5; q++)
					stage[(size_t)(mix64((uint64_t)k * 5 + q) % len[i])] ^= 0xa5;
				want = host_hash(stage, len[i]);
			}
		}
		t0 = now_s();
		if (ok)
			CK(cudaMemcpy(back + off[i], stage, len[i], cudaMemcpyHostToDevice));
		tr += now_s() - t0;
		if (ok && dev_hash(back + off[i], len[i], acc) == want)
			verified++;
		else
			printf(PROG ": MISMATCH in checkpoint %ld (%zu bytes at %zu)\n", i, len[i], off[i]);
		if (each)
			free(stage);
	}
	if (!keep)
		for (long i = 0; i < count; i++) {
			snprintf(path, sizeof(path), "%s/ckpt_%05ld.bin", dir, i);
			unlink(path);
		}
	printf(PROG ": checkpoint %.3f s, restore %.3f s, %.3f GB\n", tw, tr, total / 1e9);
	printf("RESULT checkpoint_s=%.6f restore_s=%.6f checkpoint_GBps=%.3f restore_GBps=%.3f verified=%ld/%ld bytes=%.0f\n",
	       tw, tr, tw > 0 ? total / tw / 1e9 : 0.0, tr > 0 ? total / tr / 1e9 : 0.0, verified, count, total);
	fflush(stdout);
	if (pinned)
		CK(cudaFreeHost(stage));
	free(base);
	for (auto p : f)
		CK(cudaFree(p));
	CK(cudaFree(back));
	CK(cudaFree(acc));
	return verified == count ? 0 : 1;
}
