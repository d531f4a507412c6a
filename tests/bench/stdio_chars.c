/* stdio a character or a record at a time, as text tools and record
 * readers do it:
 *   stdio_chars text FILE MB     putc MB megabytes of text lines into FILE,
 *                                then read them back with getc; prints
 *                                write_s= read_s= and checks the bytes
 *   stdio_chars records FILE     read FILE with fread of 4-byte records;
 *                                prints read_s= records= sum=
 *   stdio_chars writes DIR FILES MB RECORD PIECES
 *                                write FILES files of MB megabytes into DIR
 *                                (w_N.bin) a RECORD-byte record at a time,
 *                                with write(2), or PIECES records per
 *                                writev(2) where PIECES > 1, as a program
 *                                without a buffer of its own does; prints
 *                                write_s= and checks the files' bytes
 * scripts/bench/parity runs it with and without the preloaded library. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int text(const char *path, long mb)
{
	static const char line[] = "0123456789 the quick brown fox jumps over the lazy dog, line of text\n";
	const long n = mb * 1000000L, len = (long)sizeof(line) - 1;
	double t0 = now();
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	for (long i = 0; i < n; i++)
		putc(line[i % len], f);
	if (fclose(f) != 0) {
		perror("fclose");
		return 1;
	}
	double t1 = now();
	f = fopen(path, "r");
	if (!f) {
		perror(path);
		return 1;
	}
	long i = 0, bad = 0;
	int c;
	while ((c = getc(f)) != EOF) {
		bad += c != line[i % len];
		i++;
	}
	fclose(f);
	double t2 = now();
	if (i != n || bad) {
		fprintf(stderr, "stdio_chars: read %ld bytes back (%ld wrong), wrote %ld\n", i, bad, n);
		return 1;
	}
	printf("write_s=%.6f read_s=%.6f bytes=%ld\n", t1 - t0, t2 - t1, n);
	return 0;
}

static int records(const char *path)
{
	double t0 = now();
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	uint32_t x;
	uint64_t sum = 0, k = 0;
	while (fread(&x, sizeof(x), 1, f) == 1) {
		sum += x;
		k++;
	}
	fclose(f);
	printf("read_s=%.6f records=%llu sum=%llu\n", now() - t0, (unsigned long long)k, (unsigned long long)sum);
	return 0;
}

/* Record i of file f: its bytes a function of both. */
static void record_fill(unsigned char *r, long rec, int f, long i)
{
	for (long j = 0; j < rec; j++)
		r[j] = (unsigned char)(f * 31 + i * 7 + j);
}

static int writes(const char *dir, int files, long mb, long rec, int pieces)
{
	if (files < 1 || mb < 1 || rec < 1 || pieces < 1 || pieces > 1024) {
		fprintf(stderr, "stdio_chars writes: bad arguments\n");
		return 2;
	}
	long n = mb * 1000000L / rec;
	unsigned char *buf = malloc((size_t)(rec * pieces));
	struct iovec *iov = calloc((size_t)pieces, sizeof(*iov));
	char path[4096];
	if (!buf || !iov)
		return 1;
	for (int k = 0; k < pieces; k++)
		iov[k] = (struct iovec){ buf + k * rec, (size_t)rec };
	double t0 = now();
	for (int f = 0; f < files; f++) {
		snprintf(path, sizeof(path), "%s/w_%d.bin", dir, f);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			perror(path);
			return 1;
		}
		for (long i = 0; i < n; i += pieces) {
			int m = n - i < pieces ? (int)(n - i) : pieces;
			for (int k = 0; k < m; k++)
				record_fill(buf + k * rec, rec, f, i + k);
			ssize_t w = m > 1 ? writev(fd, iov, m) : write(fd, buf, (size_t)rec);
			if (w != m * rec) {
				perror("write");
				return 1;
			}
		}
		if (close(fd) != 0) {
			perror("close");
			return 1;
		}
	}
	double t1 = now();
	unsigned char *want = malloc((size_t)rec), *got = malloc((size_t)rec);
	if (!want || !got)
		return 1;
	for (int f = 0; f < files; f++) {
		snprintf(path, sizeof(path), "%s/w_%d.bin", dir, f);
		FILE *in = fopen(path, "rb");
		long i = 0, bad = 0;
		while (in && fread(got, 1, (size_t)rec, in) == (size_t)rec) {
			record_fill(want, rec, f, i);
			bad += memcmp(want, got, (size_t)rec) != 0;
			i++;
		}
		bad += in && fgetc(in) != EOF;
		if (in)
			fclose(in);
		if (i != n || bad) {
			fprintf(stderr, "stdio_chars: %s: %ld records of %ld read back, %ld wrong\n", path, i, n, bad);
			return 1;
		}
	}
	printf("write_s=%.6f records=%ld\n", t1 - t0, n * files);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 7 && !strcmp(argv[1], "writes"))
		return writes(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]), atoi(argv[6]));
	if (argc == 4 && !strcmp(argv[1], "text"))
		return text(argv[2], atol(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "records"))
		return records(argv[2]);
	fprintf(stderr, "usage: stdio_chars text FILE MB | records FILE | writes DIR FILES MB RECORD PIECES\n");
	return 2;
}
