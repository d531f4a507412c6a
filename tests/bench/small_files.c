/* small_files DIR COUNT [check]: a compiled program that keeps its run's
 * small files in the folder it is given as its first argument (as a
 * simulation is run: ./sim /scratch/run42): COUNT files of 1 B to 4 KiB
 * written with open, write and close, then read back and checked, each in
 * the order written; with check, only read and checked (the files of an
 * earlier run, at their real paths). Prints save_s= and load_s=; exits 1
 * on a wrong byte. Knows nothing of the library. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* file i's size and bytes */
static size_t body(unsigned char *b, long i)
{
	size_t n = 1 + (size_t)((i * 2654435761u) % 4096u);
	for (size_t j = 0; j < n; j++)
		b[j] = (unsigned char)(i * 131 + (long)j * 7);
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4 || atol(argv[2]) < 1 || (argc == 4 && strcmp(argv[3], "check") != 0)) {
		fprintf(stderr, "usage: small_files DIR COUNT [check]\n");
		return 2;
	}
	const char *dir = argv[1];
	long count = atol(argv[2]);
	bool check = argc == 4;
	if (!check && mkdir(dir, 0755) != 0 && errno != EEXIST) {
		perror(dir);
		return 1;
	}
	char path[4096];
	unsigned char want[4096], got[4097];
	double t0 = now();
	for (long i = 0; i < count && !check; i++) {
		snprintf(path, sizeof(path), "%s/f_%05ld.dat", dir, i);
		size_t n = body(want, i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, want, n) != (ssize_t)n || close(fd) != 0) {
			perror(path);
			return 1;
		}
	}
	double t1 = now();
	for (long i = 0; i < count; i++) {
		snprintf(path, sizeof(path), "%s/f_%05ld.dat", dir, i);
		size_t n = body(want, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t r = fd < 0 ? -1 : read(fd, got, sizeof(got));
		if (fd < 0 || r != (ssize_t)n || memcmp(got, want, n) != 0) {
			fprintf(stderr, "small_files: %s read back %zd bytes, wrote %zu%s\n", path, r, n,
				r == (ssize_t)n ? " (they differ)" : "");
			return 1;
		}
		close(fd);
	}
	double t2 = now();
	printf("save_s=%.6f load_s=%.6f\n", t1 - t0, t2 - t1);
	return 0;
}
