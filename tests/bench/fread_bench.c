/* Tagged fread against memcpy: writes FILE (SIZE bytes, with write()), then
 * REPS times reads it whole with fopen/fread/fclose into one buffer and
 * copies that buffer with memcpy into another, each timed; prints the best
 * of each and checks the bytes. scripts/bench/parity runs it with the
 * library preloaded and FILE tagged, so fread is served by the cache. */
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

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fread_bench FILE SIZE_MIB [REPS]\n");
		return 2;
	}
	size_t size = (size_t)atol(argv[2]) << 20;
	int reps = argc > 3 ? atoi(argv[3]) : 5;
	unsigned char *src = malloc(size), *a = malloc(size), *b = malloc(size);
	if (!src || !a || !b || size == 0) {
		fprintf(stderr, "fread_bench: cannot allocate 3 x %zu bytes\n", size);
		return 1;
	}
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < size; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(src + i, &x, size - i < 8 ? size - i : 8);
	}
	memset(a, 1, size);
	memset(b, 1, size);
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, src, size) != (ssize_t)size || close(fd) != 0) {
		fprintf(stderr, "fread_bench: writing %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	double best_fread = 1e9, best_memcpy = 1e9;
	for (int r = 0; r < reps; r++) {
		double t0 = now();
		FILE *f = fopen(argv[1], "rb");
		size_t got = f ? fread(a, 1, size, f) : 0;
		if (!f || fclose(f) != 0 || got != size) {
			fprintf(stderr, "fread_bench: reading %s: %zu bytes: %s\n", argv[1], got, strerror(errno));
			return 1;
		}
		double t1 = now();
		memcpy(b, a, size);
		double t2 = now();
		if (memcmp(a, src, size) != 0 || b[size / 3] != src[size / 3]) {
			fprintf(stderr, "fread_bench: %s read back wrong\n", argv[1]);
			return 1;
		}
		best_fread = t1 - t0 < best_fread ? t1 - t0 : best_fread;
		best_memcpy = t2 - t1 < best_memcpy ? t2 - t1 : best_memcpy;
	}
	printf("fread_GBps=%.3f memcpy_GBps=%.3f\n", (double)size / best_fread / 1e9,
	       (double)size / best_memcpy / 1e9);
	unlink(argv[1]);
	return 0;
}
