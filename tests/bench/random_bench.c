/* random_bench DIR N MIB: N files of MIB MiB written with write(), then
 * read back by 4 KiB preads at random page offsets of random files, as
 * many as the files have pages (a restore that gathers pieces: a mesh's
 * blocks, an index's records), each checked; prints random_read_s= (the
 * preads' time). scripts/bench/parity runs it with and without the
 * preloaded library. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The byte at offset off of file i. */
static unsigned char byte_at(int i, uint64_t off)
{
	return (unsigned char)(off * 131 + (off >> 12) * 7 + (uint64_t)i * 29);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: random_bench DIR N MIB\n");
		return 2;
	}
	int n = atoi(argv[2]);
	size_t len = (size_t)atol(argv[3]) << 20;
	if (n < 1 || n > 1024 || len < PAGE)
		return 2;
	unsigned char *buf = malloc(len), page[PAGE];
	int *fds = calloc((size_t)n, sizeof(int));
	char path[4096];
	if (!buf || !fds)
		return 2;
	for (int i = 0; i < n; i++) {
		for (size_t o = 0; o < len; o++)
			buf[o] = byte_at(i, o);
		snprintf(path, sizeof(path), "%s/random_%03d.bin", argv[1], i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, len) != (ssize_t)len || close(fd) != 0) {
			perror(path);
			return 1;
		}
	}
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/random_%03d.bin", argv[1], i);
		if ((fds[i] = open(path, O_RDONLY)) < 0) {
			perror(path);
			return 1;
		}
	}
	uint64_t pages = len / PAGE, reads = pages * (uint64_t)n, x = 88172645463325252ull;
	double t0 = now();
	for (uint64_t k = 0; k < reads; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int i = (int)(x % (uint64_t)n);
		uint64_t off = (x >> 20) % pages * PAGE;
		if (pread(fds[i], page, PAGE, (off_t)off) != PAGE) {
			perror("pread");
			return 1;
		}
		if (page[0] != byte_at(i, off) || page[PAGE - 1] != byte_at(i, off + PAGE - 1)) {
			fprintf(stderr, "random_%03d.bin: bytes at %llu differ\n", i, (unsigned long long)off);
			return 1;
		}
	}
	double spent = now() - t0;
	for (int i = 0; i < n; i++)
		close(fds[i]);
	printf("random_read_s=%.6f\n", spent);
	free(buf);
	free(fds);
	return 0;
}
