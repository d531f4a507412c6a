/* stdio a character or a record at a time, as text tools and record
 * readers do it:
 *   stdio_chars text FILE MB     putc MB megabytes of text lines into FILE,
 *                                then read them back with getc; prints
 *                                write_s= read_s= and checks the bytes
 *   stdio_chars records FILE     read FILE with fread of 4-byte records;
 *                                prints read_s= records= sum=
 * scripts/bench/parity runs it with and without the preloaded library. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "text"))
		return text(argv[2], atol(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "records"))
		return records(argv[2]);
	fprintf(stderr, "usage: stdio_chars text FILE MB | records FILE\n");
	return 2;
}
