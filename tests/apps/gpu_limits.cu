/* gpu_limits: the physical limits a checkpoint cache works against on this
 * machine, measured with the same sizes the benchmarks use. This file owns:
 * the measurements of device-to-device copy (cudaMemcpyAsync, GPU-timed),
 * pinned and pageable device-to-host and host-to-device copies, host memcpy
 * with 1, 2, 4 and 8 threads, and O_DIRECT write and read of a file on the
 * local disk (removed afterwards), each printed as one line
 *   LIMIT name GBps=X
 * (GB = 1e9 bytes) for scripts/bench/gpu to read. No device: exit 77. */

#include <cuda_runtime.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <thread>
#include <unistd.h>
#include <vector>

#define PROG "gpu_limits"
#include "proxy_common.h"

/* ---- errors ---------------------------------------------------------------- */

#include "cuda_check.cuh"

/* The disk test's file, removed at exit whatever ends the program. */
static char tmpfile_path[PATH_MAX];

static void remove_tmpfile(void)
{
	if (tmpfile_path[0])
		unlink(tmpfile_path);
}

/* ---- options --------------------------------------------------------------- */

struct opts {
	size_t size = 128u << 20;       /* of each copy */
	size_t disk_size = 1ul << 30;   /* of the disk file */
	size_t chunk = 16u << 20;       /* of each O_DIRECT write/read */
	long repeat = 10;
	const char *dir = nullptr;
	int device = 0;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options]\n"
		"Measures the physical limits of this machine for a checkpoint cache and\n"
		"prints one line per limit, 'LIMIT name GBps=X' (GB = 1e9 bytes):\n"
		"  d2d               device-to-device cudaMemcpyAsync (timed with events)\n"
		"  d2h_pinned, h2d_pinned      copies to/from cudaMallocHost memory\n"
		"  d2h_pageable, h2d_pageable  copies to/from malloc memory, pages touched\n"
		"  memcpy_1t .. memcpy_8t      host memcpy split over 1, 2, 4, 8 threads\n"
		"  disk_write_odirect, disk_read_odirect\n"
		"                    a file in --dir written with O_DIRECT (then fdatasync)\n"
		"                    and read back with O_DIRECT, then removed\n"
		"Each copy measure is the mean over --repeat copies after one untimed warm-up.\n"
		"\n"
		"  --size S          bytes per copy (default 128M)\n"
		"  --repeat N        copies per measure (default 10)\n"
		"  --dir D           folder on the local disk for the disk test; without it\n"
		"                    the disk test is skipped\n"
		"  --disk-size S     size of the disk test's file (default 1G)\n"
		"  --chunk S         bytes per O_DIRECT write() or read() (default 16M)\n"
		"  --device N        CUDA device ordinal (default 0)\n"
		"  --help            this text\n"
		"\n"
		"Exit: 0 when every measure ran (a disk test that the folder does not allow,\n"
		"e.g. O_DIRECT on tmpfs, is skipped with a message), 1 on a failed system\n"
		"call or CUDA error, 2 on a usage error, 77 when there is no CUDA device.\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_SIZE = 256, OPT_REPEAT, OPT_DIR, OPT_DISK, OPT_CHUNK, OPT_DEVICE, OPT_HELP };
	static const struct option lo[] = {
		{ "size", required_argument, nullptr, OPT_SIZE },
		{ "repeat", required_argument, nullptr, OPT_REPEAT },
		{ "dir", required_argument, nullptr, OPT_DIR },
		{ "disk-size", required_argument, nullptr, OPT_DISK },
		{ "chunk", required_argument, nullptr, OPT_CHUNK },
		{ "device", required_argument, nullptr, OPT_DEVICE },
		{ "help", no_argument, nullptr, OPT_HELP },
		{ nullptr, 0, nullptr, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, nullptr)) != -1) {
		switch (c) {
		case OPT_SIZE: o->size = parse_size_min(optarg, "size", 4096); break;
		case OPT_REPEAT: o->repeat = parse_long(optarg, "repeat", 1); break;
		case OPT_DIR: o->dir = optarg; break;
		case OPT_DISK: o->disk_size = parse_size_min(optarg, "disk-size", 4096); break;
		case OPT_CHUNK: o->chunk = parse_size_min(optarg, "chunk", 4096); break;
		case OPT_DEVICE: o->device = parse_device(optarg); break;
		case 'h':
		case OPT_HELP: usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	/* O_DIRECT wants sizes and offsets in multiples of the block size */
	o->size &= ~(size_t)4095;
	o->chunk &= ~(size_t)4095;
	o->disk_size = o->disk_size / o->chunk * o->chunk;
	if (o->disk_size == 0)
		o->disk_size = o->chunk;
}

static void limit(const char *name, double bytes, double secs, const char *how)
{
	printf("LIMIT %s GBps=%.2f\n", name, secs > 0 ? bytes / secs / 1e9 : 0.0);
	printf(PROG ":   %-18s %.1f MiB in %.6f s (%s)\n", name, bytes / MiB, secs, how);
	fflush(stdout);
}

/* ---- copies ------------------------------------------------------------------ */

/* The mean over `repeat` copies, after one untimed warm-up, timed by events
 * on stream s. */
static double time_copies(void *dst, const void *src, size_t n, cudaMemcpyKind kind, long repeat, cudaStream_t s)
{
	cudaEvent_t a, b;
	float ms = 0;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaMemcpyAsync(dst, src, n, kind, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaEventRecord(a, s));
	for (long r = 0; r < repeat; r++)
		CK(cudaMemcpyAsync(dst, src, n, kind, s));
	CK(cudaEventRecord(b, s));
	CK(cudaEventSynchronize(b));
	CK(cudaEventElapsedTime(&ms, a, b));
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return (double)ms / 1e3;
}

/* Pageable copies are timed on the host clock around a synchronous
 * cudaMemcpy each: the runtime stages them through its own pinned buffers,
 * and the program waits for all of it. */
static double time_sync_copies(void *dst, const void *src, size_t n, cudaMemcpyKind kind, long repeat)
{
	CK(cudaMemcpy(dst, src, n, kind));
	double t0 = now_s();
	for (long r = 0; r < repeat; r++)
		CK(cudaMemcpy(dst, src, n, kind));
	return now_s() - t0;
}

static void *host_alloc(size_t n, const char *what)
{
	void *p = nullptr;
	if (posix_memalign(&p, 4096, n) != 0)
		die_sys("posix_memalign", what);
	memset(p, 0x5a, n); /* touched: no page faults in the timed copies */
	return p;
}

static void measure_copies(const struct opts *o)
{
	size_t n = o->size;
	double total = (double)n * (double)o->repeat;
	cudaStream_t s;
	void *d0, *d1, *pin, *pg;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&d0, n));
	CK(cudaMalloc(&d1, n));
	CK(cudaMemset(d0, 0x3c, n));
	CK(cudaMemset(d1, 0, n));

	limit("d2d", total, time_copies(d1, d0, n, cudaMemcpyDeviceToDevice, o->repeat, s),
	      "cudaMemcpyAsync device to device, bytes copied per second");

	CK(cudaMallocHost(&pin, n));
	memset(pin, 0x5a, n);
	limit("d2h_pinned", total, time_copies(pin, d0, n, cudaMemcpyDeviceToHost, o->repeat, s),
	      "cudaMemcpyAsync into cudaMallocHost memory");
	limit("h2d_pinned", total, time_copies(d1, pin, n, cudaMemcpyHostToDevice, o->repeat, s),
	      "cudaMemcpyAsync from cudaMallocHost memory");
	CK(cudaFreeHost(pin));

	pg = host_alloc(n, "pageable buffer");
	limit("d2h_pageable", total, time_sync_copies(pg, d0, n, cudaMemcpyDeviceToHost, o->repeat),
	      "cudaMemcpy into malloc memory, pages touched");
	limit("h2d_pageable", total, time_sync_copies(d1, pg, n, cudaMemcpyHostToDevice, o->repeat),
	      "cudaMemcpy from malloc memory, pages touched");
	free(pg);

	CK(cudaFree(d0));
	CK(cudaFree(d1));
	CK(cudaStreamDestroy(s));
}

/* ---- host memcpy -------------------------------------------------------------- */

static void measure_memcpy(const struct opts *o)
{
	size_t n = o->size;
	unsigned char *src = (unsigned char *)host_alloc(n, "memcpy source");
	unsigned char *dst = (unsigned char *)host_alloc(n, "memcpy destination");
	static const int nthreads[] = { 1, 2, 4, 8 };

	for (int t : nthreads) {
		/* each thread copies one slice of n / t bytes (the last the rest) */
		auto one_round = [&]() {
			std::vector<std::thread> th;
			size_t slice = n / (size_t)t;
			for (int k = 0; k < t; k++) {
				size_t off = (size_t)k * slice, len = k + 1 == t ? n - off : slice;
				th.emplace_back([=]() { memcpy(dst + off, src + off, len); });
			}
			for (auto &x : th)
				x.join();
		};
		one_round();
		double t0 = now_s();
		for (long r = 0; r < o->repeat; r++)
			one_round();
		double secs = now_s() - t0;
		char name[32], how[64];
		snprintf(name, sizeof(name), "memcpy_%dt", t);
		snprintf(how, sizeof(how), "memcpy split over %d thread(s), thread start included", t);
		limit(name, (double)n * (double)o->repeat, secs, how);
	}
	free(src);
	free(dst);
}

/* ---- the local disk ------------------------------------------------------------- */

/* Writes then reads disk_size bytes with O_DIRECT in chunk-byte calls. A
 * folder that refuses O_DIRECT (tmpfs) or lacks the room is skipped with a
 * message: those are facts about the folder, not failures. */
static void measure_disk(const struct opts *o)
{
	if (!o->dir) {
		printf(PROG ": disk test skipped: no --dir\n");
		return;
	}
	struct statvfs vfs;
	if (statvfs(o->dir, &vfs) != 0)
		die_sys("statvfs", o->dir);
	double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
	if (avail < (double)o->disk_size + 256 * MiB) {
		printf(PROG ": disk test skipped: %s has %.0f MiB available, the test needs %.0f MiB + 256 MiB\n",
		       o->dir, avail / MiB, (double)o->disk_size / MiB);
		return;
	}
	if ((size_t)snprintf(tmpfile_path, sizeof(tmpfile_path), "%s/gpu_limits.%ld.tmp", o->dir, (long)getpid()) >=
	    sizeof(tmpfile_path)) {
		tmpfile_path[0] = '\0';
		errno = ENAMETOOLONG;
		die_sys("open", o->dir);
	}
	atexit(remove_tmpfile);

	unsigned char *buf = (unsigned char *)host_alloc(o->chunk, "disk buffer");
	for (size_t k = 0; k < o->chunk; k++)
		buf[k] = (unsigned char)(k * 131 + 7); /* not zeros: no file system shortcut */

	int fd = open(tmpfile_path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0600);
	if (fd < 0 && errno == EINVAL) {
		tmpfile_path[0] = '\0'; /* nothing was created */
		printf(PROG ": disk test skipped: %s does not allow O_DIRECT (tmpfs?)\n", o->dir);
		free(buf);
		return;
	}
	if (fd < 0)
		die_sys("open O_DIRECT", tmpfile_path);
	double t0 = now_s();
	for (size_t off = 0; off < o->disk_size; off += o->chunk) {
		ssize_t w;
		while ((w = pwrite(fd, buf, o->chunk, (off_t)off)) < 0 && errno == EINTR)
			;
		if (w < 0)
			die_sys("pwrite O_DIRECT", tmpfile_path);
		if ((size_t)w != o->chunk) {
			errno = EIO;
			die_sys("pwrite O_DIRECT (short write)", tmpfile_path);
		}
	}
	if (fdatasync(fd) != 0)
		die_sys("fdatasync", tmpfile_path);
	double tw = now_s() - t0;
	if (close(fd) != 0)
		die_sys("close", tmpfile_path);
	limit("disk_write_odirect", (double)o->disk_size, tw, "O_DIRECT pwrite, then fdatasync");

	fd = open(tmpfile_path, O_RDONLY | O_DIRECT);
	if (fd < 0)
		die_sys("open O_DIRECT", tmpfile_path);
	t0 = now_s();
	for (size_t off = 0; off < o->disk_size; off += o->chunk) {
		ssize_t r;
		while ((r = pread(fd, buf, o->chunk, (off_t)off)) < 0 && errno == EINTR)
			;
		if (r < 0)
			die_sys("pread O_DIRECT", tmpfile_path);
		if ((size_t)r != o->chunk) {
			errno = EIO;
			die_sys("pread O_DIRECT (short read)", tmpfile_path);
		}
	}
	double tr = now_s() - t0;
	if (close(fd) != 0)
		die_sys("close", tmpfile_path);
	limit("disk_read_odirect", (double)o->disk_size, tr, "O_DIRECT pread");
	if (unlink(tmpfile_path) != 0)
		die_sys("unlink", tmpfile_path);
	tmpfile_path[0] = '\0';
	free(buf);
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct opts o;
	parse_opts(argc, argv, &o);

	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || (e == cudaSuccess && ndev == 0)) {
		fprintf(stderr, PROG ": SKIP: no CUDA device (%s)\n",
			e == cudaSuccess ? "cudaGetDeviceCount returned 0" : cudaGetErrorString(e));
		return 77;
	}
	CK(e);
	if (o.device >= ndev) {
		fprintf(stderr, PROG ": --device %d: only %d CUDA device(s)\n", o.device, ndev);
		return 2;
	}
	CK(cudaSetDevice(o.device));
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, o.device));
	size_t fr = 0, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	if ((double)fr < 3.0 * (double)o.size) {
		fprintf(stderr, PROG ": device %d has %.0f MiB free, the copies need %.0f MiB\n", o.device, fr / MiB,
			3 * (double)o.size / MiB);
		return 1;
	}
	printf(PROG ": device %d %s (sm_%d%d), %.0f MiB free of %.0f MiB; copies of %.1f MiB x %ld, "
		    "%u host threads\n",
	       o.device, prop.name, prop.major, prop.minor, fr / MiB, tot / MiB, (double)o.size / MiB, o.repeat,
	       std::thread::hardware_concurrency());
	fflush(stdout);

	measure_copies(&o);
	measure_memcpy(&o);
	measure_disk(&o);
	return 0;
}
