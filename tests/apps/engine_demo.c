/* The engine demonstration: writes a checkpoint history larger than the host
 * tier, reads it back in reverse order with a hint file, verifies every
 * byte, and prints where each read was served from and the throughput the
 * program saw, next to the same history written and read with plain
 * write()/read() on the same directory. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckc.h"
#include "conf.h"
#include "log.h"

#define MiB (1024.0 * 1024.0)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Checkpoint i's bytes: a pattern that differs per checkpoint and offset. */
static void fill(unsigned char *b, size_t n, int i)
{
	uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
	for (size_t k = 0; k < n; k += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t m = n - k < 8 ? n - k : 8;
		memcpy(b + k, &x, m);
	}
}

static uint64_t parse_size(const char *s)
{
	uint64_t v;
	double pct;
	if (ckc_parse_size(s, &v, &pct) || pct >= 0) {
		fprintf(stderr, "engine_demo: '%s' is not a size (e.g. 64M)\n", s);
		exit(2);
	}
	return v;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: engine_demo [--dir D] [--count N] [--size S] [--host-cache S]\n"
		"                   [--ssd-cache S] [--interval-ms MS] [--no-baseline]\n");
	exit(2);
}

/* Plain write()/read() of the same history: what the program sees today. */
static void baseline(const char *dir, int count, size_t size, int interval, unsigned char *buf,
		     double *wbw, double *rbw)
{
	char path[4400];
	double tw = 0, tr = 0;
	for (int i = 0; i < count; i++) {
		snprintf(path, sizeof(path), "%s/plain_%04d.bin", dir, i);
		fill(buf, size, i);
		double t0 = now_s();
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, size) != (ssize_t)size || close(fd) != 0) {
			perror(path);
			exit(1);
		}
		tw += now_s() - t0;
		pause_ms(interval);
	}
	for (int i = count - 1; i >= 0; i--) {
		snprintf(path, sizeof(path), "%s/plain_%04d.bin", dir, i);
		double t0 = now_s();
		int fd = open(path, O_RDONLY);
		if (fd < 0 || read(fd, buf, size) != (ssize_t)size || close(fd) != 0) {
			perror(path);
			exit(1);
		}
		tr += now_s() - t0;
		unlink(path);
		pause_ms(interval);
	}
	*wbw = (double)size * count / tw / 1e9;
	*rbw = (double)size * count / tr / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "count", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },
		{ "host-cache", required_argument, NULL, 'H' },
		{ "ssd-cache", required_argument, NULL, 'S' },
		{ "interval-ms", required_argument, NULL, 'i' },
		{ "no-baseline", no_argument, NULL, 'B' },
		{ NULL, 0, NULL, 0 },
	};
	char dir[3900] = "";
	int count = 40, interval = 10, c, do_baseline = 1;
	uint64_t size = 8u << 20, host = 64u << 20, ssd = 128u << 20;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': snprintf(dir, sizeof(dir), "%s", optarg); break;
		case 'n': count = atoi(optarg); break;
		case 's': size = parse_size(optarg); break;
		case 'H': host = parse_size(optarg); break;
		case 'S': ssd = parse_size(optarg); break;
		case 'i': interval = atoi(optarg); break;
		case 'B': do_baseline = 0; break;
		default: usage();
		}
	}
	if (count < 1 || count > 100000 || size == 0 || interval < 0)
		usage();
	if (!*dir) {
		strcpy(dir, "/tmp/ckptcache-demo-XXXXXX");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			return 1;
		}
	} else if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		perror(dir);
		return 1;
	}
	char home[4200], ssd_dir[4200], hints[4200], path[4300];
	snprintf(home, sizeof(home), "%s/run", dir);
	snprintf(ssd_dir, sizeof(ssd_dir), "%s/ssd", dir);
	snprintf(hints, sizeof(hints), "%s/restore-order.txt", dir);
	mkdir(home, 0755);
	mkdir(ssd_dir, 0700);

	/* the hint file: the backward pass reads the history in reverse */
	FILE *hf = fopen(hints, "w");
	if (!hf) {
		perror(hints);
		return 1;
	}
	fprintf(hf, "# ckptcache-hints v1: the backward pass\nrun/ckpt_%%04d.bin %d..0\n", count - 1);
	fclose(hf);

	ckc_config_t cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.enabled = true;
	cfg.host_cache = host;
	cfg.ssd_cache = ssd;
	cfg.ssd_dir = ssd_dir;
	cfg.rescue_dir = ssd_dir;
	cfg.hints = hints;
	cfg.persist = CKC_PERSIST_ALWAYS;
	cfg.eviction = CKC_EVICT_SCORE;
	cfg.prefetch = CKC_PREFETCH_AUTO;
	cfg.log_level = CKC_LOG_WARN;
	cfg.local_size = 1;
	int rc = ckc_init_config(&cfg);
	if (rc != 0) {
		fprintf(stderr, "engine_demo: the cache did not start (%d)\n", rc);
		return 1;
	}

	unsigned char *buf = malloc(size), *want = malloc(size);
	if (!buf || !want) {
		perror("malloc");
		return 1;
	}
	printf("ckptcache engine demo: %d checkpoints of %.1f MiB = %.0f MiB history\n", count,
	       (double)size / MiB, (double)size * count / MiB);
	printf("tiers: host %.0f MiB, ssd %.0f MiB (%s), home %s\n", (double)host / MiB,
	       (double)ssd / MiB, ssd_dir, home);
	printf("restore order: %s (reverse); %d ms of computation between checkpoints\n\n", hints,
	       interval);

	/* forward pass */
	double tw = 0;
	for (int i = 0; i < count; i++) {
		snprintf(path, sizeof(path), "%s/ckpt_%04d.bin", home, i);
		fill(buf, size, i);
		double t0 = now_s();
		ckc_handle_t *h;
		if (ckc_open_write(path, 0644, &h) || ckc_pwrite(h, buf, size, 0) != (ssize_t)size ||
		    ckc_close(h)) {
			fprintf(stderr, "engine_demo: writing %s failed\n", path);
			return 1;
		}
		tw += now_s() - t0;
		pause_ms(interval);
	}

	/* backward pass */
	printf("%-16s %10s  %-10s %10s\n", "checkpoint", "MiB", "served by", "GB/s");
	double tr = 0;
	int served[CKC_MAX_TIERS] = { 0 };
	ckc_stats_t before, after;
	for (int i = count - 1; i >= 0; i--) {
		snprintf(path, sizeof(path), "%s/ckpt_%04d.bin", home, i);
		ckc_stats_get(&before);
		double t0 = now_s();
		ckc_handle_t *h;
		ssize_t n = -1;
		if (ckc_open_read(path, &h) == 0) {
			n = ckc_pread(h, buf, size, 0);
			ckc_close(h);
		}
		double dt = now_s() - t0;
		tr += dt;
		ckc_stats_get(&after);
		fill(want, size, i);
		if (n != (ssize_t)size || memcmp(buf, want, size) != 0) {
			fprintf(stderr, "engine_demo: %s came back wrong\n", path);
			return 1;
		}
		int tier = -1;
		for (int l = 0; l < after.ntier; l++)
			if (after.tier[l].hits > before.tier[l].hits)
				tier = l;
		if (tier >= 0)
			served[tier]++;
		printf("ckpt_%04d.bin    %10.1f  %-10s %10.2f\n", i, (double)size / MiB,
		       tier >= 0 ? after.tier_name[tier] : "?", (double)size / dt / 1e9);
		pause_ms(interval);
	}
	ckc_stats_get(&after);
	ckc_shutdown();

	double wbw = (double)size * count / tw / 1e9, rbw = (double)size * count / tr / 1e9;
	printf("\nall %d checkpoints verified byte for byte\n", count);
	printf("reads served by:");
	for (int l = 0; l < after.ntier; l++)
		printf(" %s %d", after.tier_name[l], served[l]);
	printf("\nhost tier: %llu evictions, %llu prefetches; ssd tier: %llu evictions\n",
	       (unsigned long long)after.tier[0].evictions,
	       (unsigned long long)after.tier[0].prefetch_ops,
	       (unsigned long long)(after.ntier > 2 ? after.tier[1].evictions : 0));
	printf("\n%-28s %12s %12s\n", "throughput seen by the program", "checkpoint", "restore");
	printf("%-28s %9.2f GB/s %7.2f GB/s\n", "with ckptcache (engine)", wbw, rbw);
	if (do_baseline) {
		double bw, br;
		baseline(home, count, size, interval, buf, &bw, &br);
		printf("%-28s %9.2f GB/s %7.2f GB/s\n", "plain write()/read()", bw, br);
		printf("%-28s %10.1fx %10.1fx\n", "ratio", wbw / bw, rbw / br);
		printf("(plain I/O goes through the page cache of this machine; on a parallel file system the gap is wider)\n");
	}
	printf("every checkpoint is at its real path: %s/ckpt_*.bin\n", home);
	free(buf);
	free(want);
	return 0;
}
