/* uvm_baseline: the CUDA Unified Memory (UVM) baseline of the HPDC'23 paper
 * (section 5.2.2), on the same GPU RTM proxy as tests/apps/rtm_proxy_cuda.cu.
 * This file owns: the checkpoint history of the same 2-D wave propagator
 * (wave.cuh), kept in CUDA managed memory instead of files. A
 * checkpoint is a device-to-device copy of the wavefield into its own managed
 * buffer, then cudaMemAdvise(SetPreferredLocation, host) and
 * cudaMemPrefetchAsync to the host, so that its GPU memory is released while
 * the next time steps run. A restore prefetches the buffer back to the GPU
 * (with --hints all, checkpoint k+1 is prefetched while k is in use) and
 * copies it device-to-device into the wavefield, which is then verified
 * against the checksum computed on the GPU when it was taken. No files, and
 * nothing of ckptcache. With --sizes the checkpoints have the sizes of a
 * trace: each buffer holds a prefix of the state (sized for the largest),
 * verified by a checksum over that prefix. Safety rule of the GPU machines:
 * the whole managed history must fit in 80% of the free device memory
 * (cudaMemGetInfo), otherwise the program refuses to run (exit 2):
 * oversubscribed managed memory can hang the GPU. Built by tests/gpu/build. */

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>

#define PROG "uvm_baseline"
#include "proxy_common.h"
#include "wave.cuh"

#define MAX_FRACTION 0.8 /* of the free device memory the managed history may take */

/* ---- options --------------------------------------------------------------- */

struct opts {
	long count = 32;
	size_t size = 64u << 20;
	long steps = 10;
	long back_steps = -1; /* -1: = steps */
	long interval_ms = 0;
	enum order_kind order = ORDER_REVERSE;
	uint64_t seed = 1;
	bool prefetch = true; /* --hints all */
	const char *sizes_spec = nullptr; /* --sizes FILE[:COL] */
	struct ckpt_sizes sizes = {};
	bool count_set = false, size_set = false;
	int device = 0;
};

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
		"  --count N             number of checkpoints (default 32, or the rows of --sizes)\n"
		"  --size S              checkpoint (wavefield state) size: bytes or K/M/G/T,\n"
		"                        at least 4K; rounded down to a multiple of 8 (default 64M)\n"
		PROXY_SIZES_HELP
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
		"The whole history (the sum of the checkpoint sizes) must fit in 80%% of the\n"
		"free device memory, or the program refuses to run (oversubscribed managed\n"
		"memory can hang the GPU).\n"
		"Output: 'checkpoint' and 'restore' lines (buffers, MiB, seconds, GB/s with\n"
		"GB = 1e9 bytes), 'verified K/N checkpoints', and\n"
		"  RESULT checkpoint_GBps=X restore_GBps=Y verified=K/N ckpt_s=A restore_s=B bytes=T\n"
		"(A, B: seconds of timed checkpoint and restore calls; T: bytes checkpointed).\n"
		"Exit: 0 when every checkpoint verified, 1 on a mismatch or a CUDA error,\n"
		"2 on a usage error (a bad --sizes file included) or a history too large for\n"
		"the device, 77 when there is no CUDA device or it cannot prefetch managed\n"
		"memory.\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_COUNT = 256, OPT_SIZE, OPT_STEPS, OPT_BACK, OPT_INTERVAL, OPT_ORDER, OPT_SEED, OPT_HINTS,
	       OPT_DEVICE, OPT_HELP, OPT_SIZES };
	static const struct option lo[] = {
		{ "count", required_argument, nullptr, OPT_COUNT },
		{ "size", required_argument, nullptr, OPT_SIZE },
		{ "sizes", required_argument, nullptr, OPT_SIZES },
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
		case OPT_ORDER: o->order = parse_order(optarg); break;
		case OPT_SEED: o->seed = parse_seed(optarg); break;
		case OPT_HINTS:
			if (strcmp(optarg, "all") == 0)
				o->prefetch = true;
			else if (strcmp(optarg, "none") == 0)
				o->prefetch = false;
			else
				die_usage("--hints '%s': expected all or none", optarg);
			break;
		case OPT_DEVICE: o->device = parse_device(optarg); break;
		case 'h':
		case OPT_HELP: usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (o->back_steps < 0)
		o->back_steps = o->steps;
	resolve_sizes(o->sizes_spec, o->size_set, o->count_set, &o->size, &o->count, &o->sizes);
}

static size_t ckpt_bytes(const struct opts *o, long i, size_t S)
{
	return sizes_bytes(&o->sizes, i, S);
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

	cudaDeviceProp prop;
	gpu_open(o.device, &prop);
	int cma = 0;
	CK(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, o.device));
	if (!cma) {
		fprintf(stderr, PROG ": SKIP: device %d (%s) cannot prefetch managed memory "
				"(cudaDevAttrConcurrentManagedAccess = 0)\n", o.device, prop.name);
		exit(77);
	}

	cudaStream_t s, ios; /* the compute stream, the prefetches */
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&ios, cudaStreamNonBlocking));
	struct gpu G;
	gpu_init(&G, o.size, prop.multiProcessorCount, s, o.seed);
	const size_t S = 2 * G.g.field * sizeof(float);
	CK(cudaStreamSynchronize(G.s));

	/* The safety rule: the whole managed history below 80% of what is free
	 * now, the working set above already allocated. */
	long n = o.count;
	if (n < 1) /* parse_opts saw to it; said again for the compiler's range analysis */
		die_usage("%s", "--count must be at least 1");
	size_t fr = 0, tot = 0;
	CK(cudaMemGetInfo(&fr, &tot));
	double history = 0;
	for (long i = 0; i < n; i++)
		history += (double)ckpt_bytes(&o, i, S);
	if (history > MAX_FRACTION * (double)fr) {
		fprintf(stderr,
			PROG ": refusing to run: %ld checkpoints of %s%.1f MiB = %.1f MiB of managed memory, more than "
			     "%.0f%% of the %.1f MiB free on device %d (oversubscribed managed memory can hang the GPU); "
			     "lower --count or --size\n",
			n, o.sizes.n ? "up to " : "", S / MiB, history / MiB, MAX_FRACTION * 100, (double)fr / MiB,
			o.device);
		exit(2);
	}

	void **buf = (void **)calloc((size_t)n, sizeof(*buf));
	cudaEvent_t *ev = (cudaEvent_t *)calloc((size_t)n, sizeof(*ev));
	uint64_t *sum = (uint64_t *)malloc((size_t)n * sizeof(*sum));
	long *tidx = (long *)malloc((size_t)n * sizeof(*tidx));
	long *ord = restore_order(n, o.order, o.seed);
	if (!buf || !ev || !sum || !tidx || !ord) {
		fprintf(stderr, PROG ": out of host memory\n");
		exit(1);
	}
	for (long i = 0; i < n; i++) {
		CK(cudaMallocManaged(&buf[i], ckpt_bytes(&o, i, S), cudaMemAttachGlobal));
		CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
	}
	const cudaMemLocation host = { cudaMemLocationTypeHost, 0 };
	const cudaMemLocation dev = { cudaMemLocationTypeDevice, o.device };

	printf(PROG ": device %d %s (sm_%d%d, %d SMs), grid %d x %d, state %.1f MiB, %ld checkpoints, "
	       "%ld steps each, managed history %.1f MiB of %.1f MiB free, hints %s, order %s\n",
	       o.device, prop.name, prop.major, prop.minor, prop.multiProcessorCount, G.g.nx, G.g.nz, S / MiB, n,
	       o.steps, history / MiB, (double)fr / MiB, o.prefetch ? "all" : "none", order_names[o.order]);
	if (o.sizes.n)
		printf(PROG ": sizes from %s column %ld: %ld rows, largest %.1f MiB (mean %.1f MiB); checkpoint k has "
			    "the size of row k %% %ld\n",
		       o.sizes.file, o.sizes.col, o.sizes.n, o.sizes.max / MiB, o.sizes.sum / o.sizes.n / MiB, o.sizes.n);
	fflush(stdout);

	/* Forward pass. The checkpoint blocks the program for the D2D copy and
	 * the advice; the prefetch to the host overlaps the next time steps, and
	 * whatever of it is left at the end of the pass (the drain) is counted. */
	double tcopy = 0, tcomp = 0, total = history;
	for (long i = 0; i < n; i++) {
		size_t sz = ckpt_bytes(&o, i, S);
		idle_ms(o.interval_ms);
		double t0 = now_s();
		if (sz == S) {
			sum[i] = forward_steps(&G, o.steps);
		} else {
			for (long k = 0; k < o.steps; k++)
				forward_step(&G);
			sum[i] = prefix_checksum(&G, sz);
		}
		tidx[i] = G.t;
		double t1 = now_s();
		CK(cudaMemcpyAsync(buf[i], G.state, sz, cudaMemcpyDeviceToDevice, G.s));
		CK(cudaStreamSynchronize(G.s)); /* the state changes with the next step */
		CK(cudaMemAdvise(buf[i], sz, cudaMemAdviseSetPreferredLocation, host));
		CK(cudaMemPrefetchAsync(buf[i], sz, host, 0, ios));
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
		size_t sz = ckpt_bytes(&o, i, S);
		CK(cudaMemRangeGetAttribute(&pref, sizeof(pref), cudaMemRangeAttributePreferredLocationType, buf[i], sz));
		CK(cudaMemRangeGetAttribute(&last, sizeof(last), cudaMemRangeAttributeLastPrefetchLocationType, buf[i], sz));
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
		CK(cudaMemPrefetchAsync(buf[ord[0]], ckpt_bytes(&o, ord[0], S), dev, 0, ios));
		CK(cudaEventRecord(ev[ord[0]], ios));
	}
	for (long k = 0; k < n; k++) {
		long i = ord[k];
		size_t sz = ckpt_bytes(&o, i, S);
		double r0 = now_s();
		if (o.prefetch)
			CK(cudaStreamWaitEvent(G.s, ev[i], 0));
		CK(cudaMemcpyAsync(G.state, buf[i], sz, cudaMemcpyDeviceToDevice, G.s));
		if (o.prefetch && k + 1 < n) {
			CK(cudaMemPrefetchAsync(buf[ord[k + 1]], ckpt_bytes(&o, ord[k + 1], S), dev, 0, ios));
			CK(cudaEventRecord(ev[ord[k + 1]], ios));
		}
		CK(cudaStreamSynchronize(G.s));
		tr += now_s() - r0;
		char what[40];
		snprintf(what, sizeof(what), "checkpoint %ld", i);
		verified += check_prefix_and_step_back(&G, sz, tidx[i], sum[i], what, o.back_steps, &tcomp);
		if (k + 1 < n)
			idle_ms(o.interval_ms);
	}
	CK(cudaStreamSynchronize(ios));
	printf(PROG ": compute     %ld backward steps  %.3f s\n", n * o.back_steps, tcomp);
	print_phase("restore", n, total, tr, o.prefetch ? "prefetch wait + D2D copy" : "on-demand D2D copy");

	bool ok = verified == n;
	printf(PROG ": verified %ld/%ld checkpoints\n", verified, n);
	printf("RESULT checkpoint_GBps=%.3f restore_GBps=%.3f verified=%ld/%ld ckpt_s=%.6f restore_s=%.6f bytes=%.0f\n",
	       tw > 0 ? total / tw / 1e9 : 0.0, tr > 0 ? total / tr / 1e9 : 0.0, verified, n, tw, tr, total);
	fflush(stdout);

	for (long i = 0; i < n; i++) {
		CK(cudaFree(buf[i]));
		CK(cudaEventDestroy(ev[i]));
	}
	gpu_free(&G);
	CK(cudaStreamDestroy(ios));
	CK(cudaStreamDestroy(G.s));
	free(buf);
	free(ev);
	free(sum);
	free(tidx);
	free(ord);
	free(o.sizes.v);
	free((void *)o.sizes.file);
	return ok ? 0 : 1;
}
