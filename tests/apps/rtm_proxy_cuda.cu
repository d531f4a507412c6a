/* rtm_proxy_cuda: a GPU stand-in for a reverse-time-migration (RTM) code.
 * This file owns: a 2-D acoustic wave propagator on the GPU (2nd order in
 * time, 8th order in space, Ricker source, layered velocity model), a forward
 * pass that checkpoints the wavefield (p_prev and p_cur) after every block of
 * time steps by copying it device->host into a staging buffer and writing it
 * to DIR/ckpt_%05d.bin, and a restore phase that reads the files back in a
 * chosen order, copies them host->device and verifies each one against a
 * 64-bit checksum computed ON THE GPU when it was taken. It knows nothing of
 * ckptcache: it is an unmodified program that the library is preloaded into.
 * tests/gpu/build builds it three ways: static cudart (rtm_proxy_cuda),
 * shared cudart (rtm_proxy_cuda_shared) and --default-stream per-thread
 * (rtm_proxy_cuda_ptds). Only the checkpoint I/O is timed: D2H copy +
 * open/write/close, and open/read/close + H2D copy. */

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
#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "rtm_proxy_cuda"
#define MiB (1024.0 * 1024.0)

/* ---- errors ---------------------------------------------------------------- */

/* Every failed CUDA call ends the run with its error string: the benchmark must
 * never report a throughput for a copy that did not happen. No device (or no
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
/* After a kernel launch: a bad configuration is reported here, a fault in the
 * kernel by the next synchronising call. */
#define CK_LAUNCH(what)                                                                                            \
	do {                                                                                                       \
		cudaError_t e_ = cudaGetLastError();                                                               \
		if (e_ != cudaSuccess)                                                                             \
			cuda_die("launch of " what, e_, __FILE__, __LINE__);                                       \
	} while (0)

[[noreturn]] static void die_sys(const char *call, const char *path)
{
	int e = errno;
	fprintf(stderr, PROG ": %s %s: %s\n", call, path, strerror(e));
	exit(1);
}

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

/* Extra idle time (the program "thinks" on the host); nanosleep leaves the CPU
 * to the library's background threads. */
static void idle_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- options --------------------------------------------------------------- */

enum io_kind { IO_WRITE, IO_FWRITE };
enum order_kind { ORDER_SEQUENTIAL, ORDER_REVERSE, ORDER_RANDOM };
static const char *const order_names[] = { "sequential", "reverse", "random" };

struct opts {
	const char *dir = nullptr;
	long count = 32;
	size_t size = 64u << 20;
	long steps = 10;           /* time steps per checkpoint */
	long back_steps = -1;      /* backward steps after each restore; -1: = steps */
	long interval_ms = 0;
	enum io_kind io = IO_WRITE;
	bool pinned = false;
	bool async = false;
	enum order_kind order = ORDER_REVERSE;
	uint64_t seed = 1;
	const char *hints = nullptr;
	bool keep = false;
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
		"usage: " PROG " --dir D [options]\n"
		"A GPU reverse-time-migration stand-in: a 2-D acoustic wave propagator\n"
		"(8th order in space, 2nd order in time, Ricker source) runs N blocks of\n"
		"time steps; after each block the wavefield (p_prev and p_cur) is copied to\n"
		"a host staging buffer and written to DIR/ckpt_%%05d.bin. The restore phase\n"
		"reads them back in the chosen order, copies each to the GPU, verifies it\n"
		"against the checksum computed on the GPU when it was taken, and runs a few\n"
		"backward time steps from it. Only the checkpoint I/O is timed.\n"
		"\n"
		"  --dir D               where the checkpoints go (created if missing; required)\n"
		"  --count N             number of checkpoints (default 32)\n"
		"  --size S              checkpoint (wavefield state) size: bytes or K/M/G/T,\n"
		"                        at least 4K; rounded down to a multiple of 8 (default 64M).\n"
		"                        The grid is chosen so that 2 fields x nx x nz floats = S\n"
		"  --steps-per-ckpt K    time steps between two checkpoints (default 10)\n"
		"  --backward-steps B    backward time steps after each restore (default: K)\n"
		"  --interval-ms MS      extra idle time before each checkpoint and between two\n"
		"                        restores, on top of the time steps (default 0)\n"
		"  --staging pageable|pinned  host staging buffer from malloc (touched once) or\n"
		"                        cudaMallocHost (default pageable)\n"
		"  --copy sync|async     cudaMemcpy, or cudaMemcpyAsync on a created stream +\n"
		"                        cudaStreamSynchronize; with async the kernels run on\n"
		"                        that stream too (default sync)\n"
		"  --io write|fwrite     open/write/read/close, or fopen/fwrite/fread/fclose\n"
		"                        (default write)\n"
		"  --order O             restore order: sequential, reverse, random (default reverse)\n"
		"  --seed N              seed of the random order and of the initial field (default 1)\n"
		"  --hints FILE          before the forward pass, write the restore order to FILE\n"
		"                        as a ckptcache hint file (one absolute path per line;\n"
		"                        written to FILE.tmp.PID and renamed into place)\n"
		"  --keep                do not delete the checkpoints at the end\n"
		"  --device N            CUDA device ordinal (default 0)\n"
		"  --help                this text\n"
		"\n"
		"Output: 'checkpoint' and 'restore' lines (files, MiB, seconds, GB/s with\n"
		"GB = 1e9 bytes) with their copy/file split, 'verified K/N checkpoints', and\n"
		"  RESULT checkpoint_GBps=X restore_GBps=Y verified=K/N\n"
		"Exit: 0 when every checkpoint verified, 1 on a mismatch, a failed system\n"
		"call or a CUDA error, 2 on a usage error, 77 when there is no CUDA device.\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_DIR = 256, OPT_COUNT, OPT_SIZE, OPT_STEPS, OPT_BACK, OPT_INTERVAL, OPT_STAGING, OPT_COPY,
	       OPT_IO, OPT_ORDER, OPT_SEED, OPT_HINTS, OPT_KEEP, OPT_DEVICE, OPT_HELP };
	static const struct option lo[] = {
		{ "dir", required_argument, nullptr, OPT_DIR },
		{ "count", required_argument, nullptr, OPT_COUNT },
		{ "size", required_argument, nullptr, OPT_SIZE },
		{ "steps-per-ckpt", required_argument, nullptr, OPT_STEPS },
		{ "backward-steps", required_argument, nullptr, OPT_BACK },
		{ "interval-ms", required_argument, nullptr, OPT_INTERVAL },
		{ "staging", required_argument, nullptr, OPT_STAGING },
		{ "copy", required_argument, nullptr, OPT_COPY },
		{ "io", required_argument, nullptr, OPT_IO },
		{ "order", required_argument, nullptr, OPT_ORDER },
		{ "seed", required_argument, nullptr, OPT_SEED },
		{ "hints", required_argument, nullptr, OPT_HINTS },
		{ "keep", no_argument, nullptr, OPT_KEEP },
		{ "device", required_argument, nullptr, OPT_DEVICE },
		{ "help", no_argument, nullptr, OPT_HELP },
		{ nullptr, 0, nullptr, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, nullptr)) != -1) {
		switch (c) {
		case OPT_DIR: o->dir = optarg; break;
		case OPT_COUNT: o->count = parse_long(optarg, "count", 1); break;
		case OPT_SIZE:
			if (!parse_size(optarg, &o->size) || o->size < 4096)
				die_usage("--size '%s': expected a size of at least 4K (bytes or K, M, G, T)", optarg);
			break;
		case OPT_STEPS: o->steps = parse_long(optarg, "steps-per-ckpt", 0); break;
		case OPT_BACK: o->back_steps = parse_long(optarg, "backward-steps", 0); break;
		case OPT_INTERVAL: o->interval_ms = parse_long(optarg, "interval-ms", 0); break;
		case OPT_STAGING:
			if (strcmp(optarg, "pageable") == 0)
				o->pinned = false;
			else if (strcmp(optarg, "pinned") == 0)
				o->pinned = true;
			else
				die_usage("--staging '%s': expected pageable or pinned", optarg);
			break;
		case OPT_COPY:
			if (strcmp(optarg, "sync") == 0)
				o->async = false;
			else if (strcmp(optarg, "async") == 0)
				o->async = true;
			else
				die_usage("--copy '%s': expected sync or async", optarg);
			break;
		case OPT_IO:
			if (strcmp(optarg, "write") == 0)
				o->io = IO_WRITE;
			else if (strcmp(optarg, "fwrite") == 0)
				o->io = IO_FWRITE;
			else
				die_usage("--io '%s': expected write or fwrite", optarg);
			break;
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
		case OPT_HINTS: o->hints = optarg; break;
		case OPT_KEEP: o->keep = true; break;
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
	if (!o->dir)
		die_usage("%s", "--dir is required");
	if (o->back_steps < 0)
		o->back_steps = o->steps;
	o->size &= ~(size_t)7;
}

/* ---- the restore order and the hint file ------------------------------------ */

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

/* The same orders as the CPU proxy (tests/apps/rtm_proxy.c) for the same seed. */
static long *restore_order(const struct opts *o)
{
	long n = o->count, *ord = (long *)malloc((size_t)n * sizeof(*ord));
	if (!ord)
		die_sys("malloc", "restore order");
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

static void ckpt_path(char *buf, size_t cap, const struct opts *o, long i)
{
	if ((size_t)snprintf(buf, cap, "%s/ckpt_%05ld.bin", o->dir, i) >= cap) {
		fprintf(stderr, PROG ": the path of checkpoint %ld is longer than %zu bytes\n", i, cap);
		exit(1);
	}
}

/* Written to a temporary file and renamed into place, so that a reader that
 * follows FILE never sees a truncated one. */
static void write_hints(const struct opts *o, const long *ord)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", o->hints, (long)getpid()) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		die_sys("fopen", o->hints);
	}
	FILE *f = fopen(tmp, "w");
	if (!f)
		die_sys("fopen", tmp);
	fprintf(f, "# " PROG " restore order: %s, %ld checkpoints\n", order_names[o->order], o->count);
	for (long k = 0; k < o->count; k++) {
		ckpt_path(path, sizeof(path), o, ord[k]);
		fprintf(f, "%s\n", path);
	}
	if (fclose(f) != 0)
		die_sys("fclose", tmp);
	if (rename(tmp, o->hints) != 0)
		die_sys("rename", tmp);
}

/* ---- file I/O ----------------------------------------------------------------- */

static void write_all(int fd, const unsigned char *b, size_t n, const char *path)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die_sys("write", path);
		}
		if (w == 0) {
			errno = EIO;
			die_sys("write (wrote 0 bytes)", path);
		}
		b += w;
		n -= (size_t)w;
	}
}

static size_t read_all(int fd, unsigned char *b, size_t n, const char *path)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die_sys("read", path);
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static void write_file(const struct opts *o, const char *path, const unsigned char *b, size_t n)
{
	if (o->io == IO_WRITE) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die_sys("open", path);
		write_all(fd, b, n, path);
		if (close(fd) != 0)
			die_sys("close", path);
	} else {
		FILE *f = fopen(path, "wb");
		if (!f)
			die_sys("fopen", path);
		if (fwrite(b, 1, n, f) != n)
			die_sys("fwrite", path);
		if (fclose(f) != 0)
			die_sys("fclose", path);
	}
}

/* Reads up to n bytes; *size is the size the file reports (fstat, or
 * fseek/ftell for stdio); returns the bytes read. */
static size_t read_file(const struct opts *o, const char *path, unsigned char *b, size_t n, uint64_t *size)
{
	size_t got;
	if (o->io == IO_WRITE) {
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			die_sys("open", path);
		struct stat st;
		if (fstat(fd, &st) != 0)
			die_sys("fstat", path);
		*size = (uint64_t)st.st_size;
		got = read_all(fd, b, n, path);
		if (close(fd) != 0)
			die_sys("close", path);
	} else {
		FILE *f = fopen(path, "rb");
		if (!f)
			die_sys("fopen", path);
		if (fseek(f, 0, SEEK_END) != 0)
			die_sys("fseek", path);
		long end = ftell(f);
		if (end < 0)
			die_sys("ftell", path);
		*size = (uint64_t)end;
		if (fseek(f, 0, SEEK_SET) != 0)
			die_sys("fseek", path);
		got = fread(b, 1, n, f);
		if (got < n && ferror(f))
			die_sys("fread", path);
		if (fclose(f) != 0)
			die_sys("fclose", path);
	}
	return got;
}

/* ---- the GPU side: wave propagation and checksum ------------------------------ */

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
	cudaStream_t s;       /* 0 with --copy sync, a created stream with --copy async */
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

static void print_phase(const char *name, long files, double bytes, double secs, double tcopy, double tfile)
{
	printf(PROG ": %-10s  %ld files  %.1f MiB  %.3f s  %.2f GB/s  (copy %.3f s %.2f GB/s, file %.3f s %.2f GB/s)\n",
	       name, files, bytes / MiB, secs, secs > 0 ? bytes / secs / 1e9 : 0.0, tcopy,
	       tcopy > 0 ? bytes / tcopy / 1e9 : 0.0, tfile, tfile > 0 ? bytes / tfile / 1e9 : 0.0);
}

int main(int argc, char **argv)
{
	struct opts o;
	static char absdir[PATH_MAX];
	char path[PATH_MAX];

	parse_opts(argc, argv, &o);
	if (mkdir(o.dir, 0755) != 0 && errno != EEXIST)
		die_sys("mkdir", o.dir);
	if (!realpath(o.dir, absdir)) /* absolute paths: the hint file names what is opened */
		die_sys("realpath", o.dir);
	o.dir = absdir;

	/* The device. */
	int ndev = 0;
	CK(cudaGetDeviceCount(&ndev));
	if (o.device >= ndev) {
		fprintf(stderr, PROG ": --device %d: only %d CUDA device(s)\n", o.device, ndev);
		exit(2);
	}
	CK(cudaSetDevice(o.device));
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, o.device));

	struct gpu G;
	memset(&G, 0, sizeof(G));
	G.g = make_grid(o.size);
	G.blocks = prop.multiProcessorCount * 8;
	const size_t S = 2 * G.g.field * sizeof(float); /* == o.size */
	if (o.async)
		CK(cudaStreamCreate(&G.s));
	CK(cudaMalloc(&G.state, S));
	CK(cudaMalloc(&G.vel2, G.g.field * sizeof(float)));
	CK(cudaMalloc(&G.sum, sizeof(*G.sum)));
	init_kernel<<<G.blocks, 256, 0, G.s>>>(G.state, G.vel2, G.g.nx, G.g.nz, G.g.field, o.seed);
	CK_LAUNCH("init_kernel");

	/* The staging buffer; pageable memory is touched once (untimed), as a
	 * buffer a real code reuses would be. */
	unsigned char *stage;
	if (o.pinned) {
		CK(cudaMallocHost((void **)&stage, S));
	} else {
		if (posix_memalign((void **)&stage, 4096, S) != 0)
			die_sys("posix_memalign", "staging buffer");
		memset(stage, 0, S);
	}
	CK(cudaStreamSynchronize(G.s));

	printf(PROG ": device %d %s (sm_%d%d, %d SMs), grid %d x %d, state %.1f MiB, %ld checkpoints, "
	       "%ld steps each, staging %s, copy %s, io %s, order %s\n",
	       o.device, prop.name, prop.major, prop.minor, prop.multiProcessorCount, G.g.nx, G.g.nz, S / MiB,
	       o.count, o.steps, o.pinned ? "pinned" : "pageable", o.async ? "async" : "sync",
	       o.io == IO_WRITE ? "write" : "fwrite", order_names[o.order]);
	fflush(stdout);

	long n = o.count, *ord = restore_order(&o);
	uint64_t *sum = (uint64_t *)malloc((size_t)n * sizeof(*sum));
	long *tidx = (long *)malloc((size_t)n * sizeof(*tidx));
	if (!sum || !tidx)
		die_sys("malloc", "checkpoint table");
	if (o.hints)
		write_hints(&o, ord);

	/* Forward pass: compute, checksum on the GPU, then the timed checkpoint. */
	double tcopy = 0, tfile = 0, tcomp = 0, total = (double)S * (double)n;
	for (long i = 0; i < n; i++) {
		idle_ms(o.interval_ms);
		double t0 = now_s();
		for (long k = 0; k < o.steps; k++)
			forward_step(&G);
		sum[i] = gpu_checksum(&G); /* synchronises the stream */
		tidx[i] = G.t;
		double t1 = now_s();
		if (o.async) {
			CK(cudaMemcpyAsync(stage, G.state, S, cudaMemcpyDeviceToHost, G.s));
			CK(cudaStreamSynchronize(G.s));
		} else {
			CK(cudaMemcpy(stage, G.state, S, cudaMemcpyDeviceToHost));
		}
		double t2 = now_s();
		ckpt_path(path, sizeof(path), &o, i);
		write_file(&o, path, stage, S);
		double t3 = now_s();
		tcomp += t1 - t0;
		tcopy += t2 - t1;
		tfile += t3 - t2;
	}
	double tw = tcopy + tfile;
	printf(PROG ": compute     %ld forward steps  %.3f s\n", n * o.steps, tcomp);
	{
		/* A sanity check of the physics (untimed): the staging buffer still
		 * holds the last checkpoint; the scheme is stable if it is finite
		 * and of the order of the source. */
		const float *p = (const float *)stage;
		float mx = 0;
		size_t bad = 0;
		for (size_t k = 0; k < 2 * G.g.field; k++) {
			if (!std::isfinite(p[k]))
				bad++;
			else if (fabsf(p[k]) > mx)
				mx = fabsf(p[k]);
		}
		printf(PROG ": wavefield   at t = %.3f s: max |p| %.4g, %zu non-finite values\n", G.t * (double)DT,
		       (double)mx, bad);
	}
	print_phase("checkpoint", n, total, tw, tcopy, tfile);
	fflush(stdout);

	/* Restore phase: the timed read + H2D copy, then verification on the GPU
	 * and a few backward steps from the restored state. */
	long verified = 0;
	double rcopy = 0, rfile = 0;
	tcomp = 0;
	for (long k = 0; k < n; k++) {
		long i = ord[k];
		uint64_t fsize = 0;
		ckpt_path(path, sizeof(path), &o, i);
		double t0 = now_s();
		size_t got = read_file(&o, path, stage, S, &fsize);
		double t1 = now_s();
		rfile += t1 - t0;
		if (fsize != S || got != S) {
			printf(PROG ": MISMATCH in %s: size %" PRIu64 " (read %zu bytes), expected %zu\n", path, fsize,
			       got, S);
		} else {
			if (o.async) {
				CK(cudaMemcpyAsync(G.state, stage, S, cudaMemcpyHostToDevice, G.s));
				CK(cudaStreamSynchronize(G.s));
			} else {
				CK(cudaMemcpy(G.state, stage, S, cudaMemcpyHostToDevice));
			}
			double t2 = now_s();
			rcopy += t2 - t1;
			G.t = tidx[i];
			uint64_t h = gpu_checksum(&G);
			if (h == sum[i])
				verified++;
			else
				printf(PROG ": MISMATCH in %s: GPU checksum %016" PRIx64 ", expected %016" PRIx64 "\n",
				       path, h, sum[i]);
			double t3 = now_s();
			for (long b = 0; b < o.back_steps; b++)
				backward_step(&G);
			CK(cudaStreamSynchronize(G.s));
			tcomp += now_s() - t3;
		}
		if (k + 1 < n)
			idle_ms(o.interval_ms);
	}
	double tr = rcopy + rfile;
	printf(PROG ": compute     %ld backward steps  %.3f s\n", n * o.back_steps, tcomp);
	print_phase("restore", n, total, tr, rcopy, rfile);

	bool ok = verified == n;
	if (!o.keep && ok) {
		for (long i = 0; i < n; i++) {
			ckpt_path(path, sizeof(path), &o, i);
			if (unlink(path) != 0)
				die_sys("unlink", path);
		}
	}
	printf(PROG ": verified %ld/%ld checkpoints%s\n", verified, n,
	       ok || o.keep ? "" : " (checkpoints kept for inspection)");
	printf("RESULT checkpoint_GBps=%.3f restore_GBps=%.3f verified=%ld/%ld\n", tw > 0 ? total / tw / 1e9 : 0.0,
	       tr > 0 ? total / tr / 1e9 : 0.0, verified, n);
	fflush(stdout);

	if (o.pinned)
		CK(cudaFreeHost(stage));
	else
		free(stage);
	CK(cudaFree(G.sum));
	CK(cudaFree(G.vel2));
	CK(cudaFree(G.state));
	if (o.async)
		CK(cudaStreamDestroy(G.s));
	free(ord);
	free(sum);
	free(tidx);
	return ok ? 0 : 1;
}
