/* A stencil code's checkpoint, as such codes write it: COUNT bands of MIB
 * MiB of one malloc'd grid, each to its own file (DIR/band_NNNN.bin) with
 * one write(), right after each other, with no computation between them;
 * then each band read back into the grid with one read() and checked. Only
 * the open..close calls are timed. Prints "checkpoint_GBps=X
 * restore_GBps=Y" (GB = 1e9 bytes); removes the files. scripts/bench/parity
 * runs it with and without the library (back-to-back writes of fresh data:
 * the cache's memory must be found as fast as the page cache finds its). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "bands_bench: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

/* The grid's value at byte offset i (8-byte words of a hash of i). */
static uint64_t cell(size_t i)
{
	uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + 1;
	x ^= x >> 31;
	return x * 0xBF58476D1CE4E5B9ull;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: bands_bench DIR COUNT MIB\n");
		return 2;
	}
	long count = atol(argv[2]);
	size_t band = (size_t)atol(argv[3]) << 20, size = band * (size_t)count;
	unsigned char *grid = malloc(size);
	char path[4096];
	if (count <= 0 || band == 0 || !grid) {
		fprintf(stderr, "bands_bench: no grid of %ld x %s MiB\n", count, argv[3]);
		return 2;
	}
	for (size_t i = 0; i < size; i += 8) {
		uint64_t v = cell(i);
		memcpy(grid + i, &v, 8);
	}
	double tw = 0, tr = 0;
	for (long b = 0; b < count; b++) {
		snprintf(path, sizeof(path), "%s/band_%04ld.bin", argv[1], b);
		double t0 = now();
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, grid + (size_t)b * band, band) != (ssize_t)band)
			die("writing", path);
		if (close(fd) != 0)
			die("closing", path);
		tw += now() - t0;
	}
	memset(grid, 0, size);
	for (long b = 0; b < count; b++) {
		snprintf(path, sizeof(path), "%s/band_%04ld.bin", argv[1], b);
		double t0 = now();
		int fd = open(path, O_RDONLY);
		if (fd < 0 || read(fd, grid + (size_t)b * band, band) != (ssize_t)band)
			die("reading", path);
		close(fd);
		tr += now() - t0;
	}
	for (size_t i = 0; i < size; i += 8) {
		uint64_t v = cell(i);
		if (memcmp(grid + i, &v, 8) != 0) {
			fprintf(stderr, "bands_bench: band %zu read back wrong at byte %zu\n", i / band,
				i % band);
			return 1;
		}
	}
	for (long b = 0; b < count; b++) {
		snprintf(path, sizeof(path), "%s/band_%04ld.bin", argv[1], b);
		unlink(path);
	}
	printf("checkpoint_GBps=%.3f restore_GBps=%.3f\n", (double)size / tw / 1e9, (double)size / tr / 1e9);
	free(grid);
	return 0;
}
