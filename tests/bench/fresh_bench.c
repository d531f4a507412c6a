/* fresh_bench DIR N MIB: N files of MIB MiB written with write() from one
 * buffer, then each read back with read() into memory the program has just
 * mapped (as a framework gives each loaded tensor a new storage), checked
 * and unmapped; prints restore_GBps=. scripts/bench/parity runs it with
 * and without the preloaded library. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	if (argc != 4) {
		fprintf(stderr, "usage: fresh_bench DIR N MIB\n");
		return 2;
	}
	int n = atoi(argv[2]);
	size_t len = (size_t)atol(argv[3]) << 20;
	char path[4096];
	unsigned char *src = malloc(len);
	if (!src || n < 1 || len == 0)
		return 2;
	double spent = 0;
	for (int i = 0; i < n; i++) {
		memset(src, 'a' + i % 26, len);
		snprintf(path, sizeof(path), "%s/fresh_%03d.bin", argv[1], i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, src, len) != (ssize_t)len || close(fd) != 0) {
			perror(path);
			return 1;
		}
	}
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/fresh_%03d.bin", argv[1], i);
		double t0 = now();
		unsigned char *d = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int fd = open(path, O_RDONLY);
		if (d == MAP_FAILED || fd < 0) {
			perror(path);
			return 1;
		}
		size_t got = 0;
		while (got < len) {
			ssize_t r = read(fd, d + got, len - got);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		close(fd);
		spent += now() - t0;
		if (got != len || d[0] != 'a' + i % 26 || d[len - 1] != 'a' + i % 26 ||
		    memcmp(d, d + len / 2, len / 2) != 0) {
			fprintf(stderr, "%s: read back differs\n", path);
			return 1;
		}
		munmap(d, len);
	}
	printf("restore_GBps=%.3f\n", (double)len * n / spent / 1e9);
	free(src);
	return 0;
}
