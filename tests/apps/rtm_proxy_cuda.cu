/* rtm_proxy_cuda: a GPU stand-in for a reverse-time-migration (RTM) code.
 * This file owns: a forward pass of the 2-D acoustic wave propagator of
 * wave.cuh (2nd order in time, 8th order in space, Ricker source, layered
 * velocity model) that checkpoints the wavefield (p_prev and p_cur) after every
 * block of time steps by copying it device->host into a staging buffer and
 * writing it to DIR/ckpt_%05d.bin, and a restore phase that reads the files
 * back in a chosen order, copies them host->device and verifies each one
 * against a 64-bit checksum computed ON THE GPU when it was taken. It knows
 * nothing of ckptcache: it is an unmodified program that the library is
 * preloaded into. tests/gpu/build builds it three ways: static cudart
 * (rtm_proxy_cuda), shared cudart (rtm_proxy_cuda_shared) and --default-stream
 * per-thread (rtm_proxy_cuda_ptds). Only the checkpoint I/O is timed: D2H copy
 * + open/write/close, and open/read/close + H2D copy. With --sizes the
 * checkpoints have the sizes of a trace: each is a prefix of the state (sized
 * for the largest), and its checksum covers exactly that prefix. The restore
 * order reaches a cache as a hint file written whole before the forward pass,
 * or grown one checkpoint ahead of each read (--hint-level). */

#include <cuda_runtime.h>

#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>

#define PROG "rtm_proxy_cuda"
#include "proxy_common.h"
#include "wave.cuh"

/* ---- options --------------------------------------------------------------- */

/* How much of the restore order the hint file tells, and when: nothing; the
 * next checkpoint to be read, appended just before each read; the whole
 * order, before the forward pass. */
enum hint_level { HINTS_NONE, HINTS_SINGLE, HINTS_ALL };
static const char *const hint_level_names[] = { "none", "single", "all" };

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
	/* --copy default: the copies name no direction (cudaMemcpyDefault), as
	 * much code does; the driver tells direction from the pointers */
	bool dflt = false;
	enum order_kind order = ORDER_REVERSE;
	uint64_t seed = 1;
	const char *hints = nullptr;
	enum hint_level hint_level = HINTS_ALL;
	bool hint_level_set = false;
	long restore_delay_ms = 0;
	const char *sizes_spec = nullptr; /* --sizes FILE[:COL] */
	struct ckpt_sizes sizes = {};
	bool count_set = false, size_set = false;
	bool keep = false;
	int device = 0;
	int devices = 1;
	const char *times = nullptr; /* --times FILE */
};

#define MAX_DEVICES 8

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
		"  --count N             number of checkpoints (default 32, or the rows of --sizes)\n"
		"  --size S              checkpoint (wavefield state) size: bytes or K/M/G/T,\n"
		"                        at least 4K; rounded down to a multiple of 8 (default 64M).\n"
		"                        The grid is chosen so that 2 fields x nx x nz floats = S\n"
		PROXY_SIZES_HELP
		"  --steps-per-ckpt K    time steps between two checkpoints (default 10)\n"
		"  --backward-steps B    backward time steps after each restore (default: K)\n"
		"  --interval-ms MS      extra idle time before each checkpoint and between two\n"
		"                        restores, on top of the time steps (default 0)\n"
		"  --staging pageable|pinned  host staging buffer from malloc (touched once) or\n"
		"                        cudaMallocHost (default pageable)\n"
		"  --copy sync|async|default\n"
		"                        cudaMemcpy, or cudaMemcpyAsync on a created stream +\n"
		"                        cudaStreamSynchronize; with async the kernels run on\n"
		"                        that stream too (default sync)\n"
		"  --io write|fwrite     open/write/read/close, or fopen/fwrite/fread/fclose\n"
		"                        (default write)\n"
		"  --order O             restore order: sequential, reverse, random (default reverse)\n"
		"  --seed N              seed of the random order and of the initial field (default 1)\n"
		"  --hints FILE          tell the restore order in FILE, a ckptcache hint file\n"
		"                        (one absolute path per line), as --hint-level says\n"
		"  --hint-level L        with --hints: all: before the forward pass, the whole\n"
		"                        restore order (written to FILE.tmp.PID and renamed into\n"
		"                        place); single: FILE is created empty (truncated if it\n"
		"                        exists) before the forward pass, and just before each\n"
		"                        restore read the checkpoint to be read after it is\n"
		"                        appended (open O_APPEND, one write, close; before the\n"
		"                        first read, the first one too), so FILE is always one\n"
		"                        ahead of the reads; none: FILE is not written\n"
		"                        (default all)\n"
		"  --restore-delay-ms MS idle time between the forward pass and the restore\n"
		"                        phase, untimed (e.g. to let a cache finish its flushes;\n"
		"                        default 0)\n"
		"  --keep                do not delete the checkpoints at the end\n"
		"  --device N            CUDA device ordinal (default 0)\n"
		"  --devices K           a wavefield on each of devices N..N+K-1 (default 1);\n"
		"                        checkpoint i is taken from and restored to device\n"
		"                        N + i %% K\n"
		"  --times FILE          write each checkpoint's and restore's timed seconds to\n"
		"                        FILE (CSV: phase,index,bytes,copy_s,file_s; the\n"
		"                        restore rows in restore order)\n"
		"  --help                this text\n"
		"\n"
		"Output: 'checkpoint' and 'restore' lines (files, MiB, seconds, GB/s with\n"
		"GB = 1e9 bytes) with their copy/file split, 'verified K/N checkpoints', and\n"
		"  RESULT checkpoint_GBps=X restore_GBps=Y verified=K/N ckpt_s=A restore_s=B bytes=T\n"
		"(A, B: seconds of timed checkpoint and restore I/O; T: bytes checkpointed).\n"
		"Exit: 0 when every checkpoint verified, 1 on a mismatch, a failed system\n"
		"call or a CUDA error, 2 on a usage error (a bad --sizes file included),\n"
		"77 when there is no CUDA device.\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_DIR = 256, OPT_COUNT, OPT_SIZE, OPT_STEPS, OPT_BACK, OPT_INTERVAL, OPT_STAGING, OPT_COPY,
	       OPT_IO, OPT_ORDER, OPT_SEED, OPT_HINTS, OPT_KEEP, OPT_DEVICE, OPT_DEVICES, OPT_HELP, OPT_SIZES, OPT_HINT_LEVEL,
	       OPT_DELAY, OPT_TIMES };
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
		{ "hint-level", required_argument, nullptr, OPT_HINT_LEVEL },
		{ "restore-delay-ms", required_argument, nullptr, OPT_DELAY },
		{ "sizes", required_argument, nullptr, OPT_SIZES },
		{ "keep", no_argument, nullptr, OPT_KEEP },
		{ "device", required_argument, nullptr, OPT_DEVICE },
		{ "devices", required_argument, nullptr, OPT_DEVICES },
		{ "times", required_argument, nullptr, OPT_TIMES },
		{ "help", no_argument, nullptr, OPT_HELP },
		{ nullptr, 0, nullptr, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, nullptr)) != -1) {
		switch (c) {
		case OPT_DIR: o->dir = optarg; break;
		case OPT_COUNT:
			o->count = parse_long(optarg, "count", 1);
			o->count_set = true;
			break;
		case OPT_SIZE:
			o->size = parse_size_min(optarg, "size", 4096);
			o->size_set = true;
			break;
		case OPT_SIZES: o->sizes_spec = optarg; break;
		case OPT_STEPS: o->steps = parse_long(optarg, "steps-per-ckpt", 0); break;
		case OPT_BACK: o->back_steps = parse_long(optarg, "backward-steps", 0); break;
		case OPT_INTERVAL: o->interval_ms = parse_long(optarg, "interval-ms", 0); break;
		case OPT_DELAY: o->restore_delay_ms = parse_long(optarg, "restore-delay-ms", 0); break;
		case OPT_HINT_LEVEL: {
			int k;
			for (k = 0; k < 3 && strcmp(optarg, hint_level_names[k]) != 0; k++)
				;
			if (k == 3)
				die_usage("--hint-level '%s': expected none, single or all", optarg);
			o->hint_level = (enum hint_level)k;
			o->hint_level_set = true;
			break;
		}
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
			else if (strcmp(optarg, "default") == 0)
				o->dflt = true;
			else
				die_usage("--copy '%s': expected sync, async or default", optarg);
			break;
		case OPT_IO: o->io = parse_io(optarg); break;
		case OPT_ORDER: o->order = parse_order(optarg); break;
		case OPT_SEED: o->seed = parse_seed(optarg); break;
		case OPT_HINTS: o->hints = optarg; break;
		case OPT_KEEP: o->keep = true; break;
		case OPT_TIMES: o->times = optarg; break;
		case OPT_DEVICE: o->device = parse_device(optarg); break;
		case OPT_DEVICES:
			o->devices = parse_device(optarg);
			if (o->devices < 1 || o->devices > MAX_DEVICES)
				die_usage("--devices '%s': expected 1 to 8", optarg);
			break;
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
	if (o->hint_level_set && !o->hints)
		die_usage("%s", "--hint-level needs --hints FILE");
	resolve_sizes(o->sizes_spec, o->size_set, o->count_set, &o->size, &o->count, &o->sizes);
}

static size_t ckpt_bytes(const struct opts *o, long i, size_t S)
{
	return sizes_bytes(&o->sizes, i, S);
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
	char path[PATH_MAX];

	parse_opts(argc, argv, &o);
	o.dir = abs_dir(o.dir);

	/* The devices, and a wavefield on each. */
	cudaDeviceProp prop;
	const int nd = o.devices;
	int ndev = 0;
	CK(cudaGetDeviceCount(&ndev));
	if (o.device + nd > ndev) {
		printf(PROG ": --devices %d from device %d: only %d CUDA device(s)\n", nd, o.device, ndev);
		return 77;
	}
	struct gpu Gs[MAX_DEVICES];
	for (int d = nd - 1; d >= 0; d--) {
		gpu_open(o.device + d, &prop);
		cudaStream_t s = 0;
		if (o.async)
			CK(cudaStreamCreate(&s));
		gpu_init(&Gs[d], o.size, prop.multiProcessorCount, s, o.seed + (uint64_t)d);
	}
	const size_t S = 2 * Gs[0].g.field * sizeof(float); /* == o.size */

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
	for (int d = nd - 1; d >= 0; d--) {
		CK(cudaSetDevice(o.device + d));
		CK(cudaStreamSynchronize(Gs[d].s));
	}
	const struct gpu &G0 = Gs[0];

	if (nd > 1)
		printf(PROG ": %d devices from %d, checkpoint i on device %d + i %% %d\n", nd, o.device, o.device,
		       nd);
	printf(PROG ": device %d %s (sm_%d%d, %d SMs), grid %d x %d, state %.1f MiB, %ld checkpoints, "
	       "%ld steps each, staging %s, copy %s, io %s, order %s\n",
	       o.device, prop.name, prop.major, prop.minor, prop.multiProcessorCount, G0.g.nx, G0.g.nz, S / MiB,
	       o.count, o.steps, o.pinned ? "pinned" : "pageable", o.async ? "async" : o.dflt ? "default" : "sync",
	       o.io == IO_WRITE ? "write" : "fwrite", order_names[o.order]);
	if (o.sizes.n) {
		size_t mn = o.sizes.max;
		for (long k = 0; k < o.sizes.n; k++)
			mn = o.sizes.v[k] < mn ? o.sizes.v[k] : mn;
		printf(PROG ": sizes from %s column %ld: %ld rows, %.1f to %.1f MiB (mean %.1f MiB); checkpoint k has "
			    "the size of row k %% %ld\n",
		       o.sizes.file, o.sizes.col, o.sizes.n, mn / MiB, o.sizes.max / MiB, o.sizes.sum / o.sizes.n / MiB,
		       o.sizes.n);
	}
	if (o.hints)
		printf(PROG ": hints %s in %s\n", hint_level_names[o.hint_level], o.hints);
	fflush(stdout);

	long n = o.count, *ord = restore_order(n, o.order, o.seed);
	if (!ord)
		die_sys("malloc", "restore order");
	uint64_t *sum = (uint64_t *)malloc((size_t)n * sizeof(*sum));
	long *tidx = (long *)malloc((size_t)n * sizeof(*tidx));
	if (!sum || !tidx)
		die_sys("malloc", "checkpoint table");
	FILE *times = nullptr;
	if (o.times) {
		if (!(times = fopen(o.times, "w")))
			die_sys("fopen", o.times);
		fprintf(times, "phase,index,bytes,copy_s,file_s\n");
	}
	if (o.hints && o.hint_level == HINTS_ALL)
		write_hints(o.hints, o.dir, "ckpt_", o.order, ord, n);
	else if (o.hints && o.hint_level == HINTS_SINGLE)
		hint_create_empty(o.hints);

	/* Forward pass: compute, checksum on the GPU, then the timed checkpoint. */
	double tcopy = 0, tfile = 0, tcomp = 0, total = 0;
	for (long i = 0; i < n; i++)
		total += (double)ckpt_bytes(&o, i, S);
	for (long i = 0; i < n; i++) {
		size_t sz = ckpt_bytes(&o, i, S);
		struct gpu &G = Gs[i % nd];
		if (nd > 1)
			CK(cudaSetDevice(o.device + (int)(i % nd)));
		idle_ms(o.interval_ms);
		double t0 = now_s();
		if (sz == S) {
			sum[i] = forward_steps(&G, o.steps); /* synchronises the stream */
		} else {
			for (long k = 0; k < o.steps; k++)
				forward_step(&G);
			sum[i] = prefix_checksum(&G, sz);
		}
		tidx[i] = G.t;
		double t1 = now_s();
		if (o.async) {
			CK(cudaMemcpyAsync(stage, G.state, sz, cudaMemcpyDeviceToHost, G.s));
			CK(cudaStreamSynchronize(G.s));
		} else {
			CK(cudaMemcpy(stage, G.state, sz, o.dflt ? cudaMemcpyDefault : cudaMemcpyDeviceToHost));
		}
		double t2 = now_s();
		ckpt_path(path, sizeof(path), o.dir, "ckpt_", i);
		write_file(path, stage, sz, o.io, 0, false);
		double t3 = now_s();
		tcomp += t1 - t0;
		tcopy += t2 - t1;
		tfile += t3 - t2;
		if (times)
			fprintf(times, "checkpoint,%ld,%zu,%.9f,%.9f\n", i, sz, t2 - t1, t3 - t2);
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
		const struct gpu &G = Gs[(n - 1) % nd];
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
	if (o.restore_delay_ms > 0) {
		idle_ms(o.restore_delay_ms);
		printf(PROG ": waited %ld ms before the restore phase (untimed)\n", o.restore_delay_ms);
		fflush(stdout);
	}

	/* Restore phase: the timed read + H2D copy, then verification on the GPU
	 * and a few backward steps from the restored state. */
	long verified = 0;
	double rcopy = 0, rfile = 0;
	tcomp = 0;
	for (long k = 0; k < n; k++) {
		long i = ord[k];
		size_t sz = ckpt_bytes(&o, i, S);
		struct gpu &G = Gs[i % nd];
		if (nd > 1)
			CK(cudaSetDevice(o.device + (int)(i % nd)));
		uint64_t fsize = 0;
		/* untimed, as the whole order written before the forward pass is */
		if (o.hints && o.hint_level == HINTS_SINGLE) {
			if (k == 0)
				hint_append(o.hints, o.dir, "ckpt_", ord[0]);
			if (k + 1 < n)
				hint_append(o.hints, o.dir, "ckpt_", ord[k + 1]);
		}
		ckpt_path(path, sizeof(path), o.dir, "ckpt_", i);
		double t0 = now_s();
		size_t got = read_file(path, stage, sz, o.io, 0, &fsize);
		double t1 = now_s();
		rfile += t1 - t0;
		if (fsize != sz || got != sz) {
			printf(PROG ": MISMATCH in %s: size %" PRIu64 " (read %zu bytes), expected %zu\n", path, fsize,
			       got, sz);
		} else {
			if (o.async) {
				CK(cudaMemcpyAsync(G.state, stage, sz, cudaMemcpyHostToDevice, G.s));
				CK(cudaStreamSynchronize(G.s));
			} else {
				CK(cudaMemcpy(G.state, stage, sz, o.dflt ? cudaMemcpyDefault : cudaMemcpyHostToDevice));
			}
			double t2 = now_s();
			rcopy += t2 - t1;
			if (times)
				fprintf(times, "restore,%ld,%zu,%.9f,%.9f\n", i, sz, t2 - t1, t1 - t0);
			verified += check_prefix_and_step_back(&G, sz, tidx[i], sum[i], path, o.back_steps, &tcomp);
		}
		if (k + 1 < n)
			idle_ms(o.interval_ms);
	}
	double tr = rcopy + rfile;
	if (times && fclose(times) != 0)
		die_sys("fclose", o.times);
	printf(PROG ": compute     %ld backward steps  %.3f s\n", n * o.back_steps, tcomp);
	print_phase("restore", n, total, tr, rcopy, rfile);

	bool ok = finish_ckpts(o.dir, "ckpt_", n, verified, o.keep);
	printf("RESULT checkpoint_GBps=%.3f restore_GBps=%.3f verified=%ld/%ld ckpt_s=%.6f restore_s=%.6f bytes=%.0f\n",
	       tw > 0 ? total / tw / 1e9 : 0.0, tr > 0 ? total / tr / 1e9 : 0.0, verified, n, tw, tr, total);
	fflush(stdout);

	if (o.pinned)
		CK(cudaFreeHost(stage));
	else
		free(stage);
	for (int d = 0; d < nd; d++) {
		CK(cudaSetDevice(o.device + d));
		gpu_free(&Gs[d]);
		if (o.async)
			CK(cudaStreamDestroy(Gs[d].s));
	}
	free(ord);
	free(sum);
	free(tidx);
	free(o.sizes.v);
	free((void *)o.sizes.file);
	return ok ? 0 : 1;
}
