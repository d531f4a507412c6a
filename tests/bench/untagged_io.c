/* Untagged I/O cost: N small write()s then N small read()s on an untagged
 * file, timed; scripts/bench/untagged runs it with and without the library
 * preloaded and compares. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
	if (argc < 2) {
		fprintf(stderr, "usage: untagged_io FILE [N] [SIZE]\n");
		return 2;
	}
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	size_t size = argc > 3 ? (size_t)atol(argv[3]) : 64;
	char *buf = calloc(1, size);
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || !buf) {
		perror(argv[1]);
		return 1;
	}
	double t0 = now();
	for (long i = 0; i < n; i++)
		if (write(fd, buf, size) != (ssize_t)size) {
			perror("write");
			return 1;
		}
	double t1 = now();
	lseek(fd, 0, SEEK_SET);
	for (long i = 0; i < n; i++)
		if (read(fd, buf, size) != (ssize_t)size) {
			perror("read");
			return 1;
		}
	double t2 = now();
	close(fd);
	unlink(argv[1]);
	printf("untagged_io n=%ld size=%zu write_ns=%.1f read_ns=%.1f total_s=%.4f\n", n, size,
	       (t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)n * 1e9, t2 - t0);
	free(buf);
	return 0;
}
