/* The machine's copies, no library involved: the two facts the library's
 * copies are built on (src/copy.h, CKC_HOME_PIECE in src/engine_int.h).
 *  1. A copy of BAND bytes from memory to memory with glibc's memcpy,
 *     with one `rep movsb` (x86-64 only), and by the kernel: a pread() of
 *     a file the page cache holds, into the same buffer.
 *     The same three into a destination 16 bytes into its page, as a
 *     buffer from malloc lies: a near copy (src/copy.h), which `rep movsb`
 *     ran five times slower on an AMD EPYC of family 25. Beside them, the
 *     library's own copy (ckc_copy, src/copy.c) and how it chose to make it.
 *  2. How fast files of BAND bytes read back from the page cache, by the
 *     size of the pieces they were written in (the page cache makes its
 *     folios no larger than the write that creates them).
 * Each figure is the median of RUNS passes over 48 bands of BAND bytes.
 *   copy_bench DIR [BAND_MIB [RUNS]]      (default 16 MiB, 5 runs)
 * scripts/bench/copies runs it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"

#define BANDS 48
#define RUNS_MAX 31

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "copy_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void movsb(void *d, const void *s, size_t n)
{
#if defined(__x86_64__)
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
#else
	memcpy(d, s, n);
#endif
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void band_path(char *p, size_t cap, const char *dir, int i)
{
	snprintf(p, cap, "%s/copy_bench_%02d.bin", dir, i);
}

/* Writes the BANDS files in pieces of `piece` bytes. */
static void write_bands(const char *dir, const char *src, size_t band, size_t piece)
{
	char p[4096];
	for (int i = 0; i < BANDS; i++) {
		band_path(p, sizeof(p), dir, i);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0)
			die(p);
		for (size_t off = 0; off < band; off += piece) {
			size_t n = band - off < piece ? band - off : piece;
			if (pwrite(fd, src + off, n, (off_t)off) != (ssize_t)n)
				die("pwrite");
		}
		close(fd);
	}
}

/* Seconds to read the BANDS files back into dst. */
static double read_bands(const char *dir, char *dst, size_t band)
{
	char p[4096];
	double t = now();
	for (int i = 0; i < BANDS; i++) {
		band_path(p, sizeof(p), dir, i);
		int fd = open(p, O_RDONLY);
		if (fd < 0 || pread(fd, dst, band, 0) != (ssize_t)band)
			die(p);
		close(fd);
	}
	return now() - t;
}

/* Prints the medians of RUNS passes of the BANDS bands copied into dst by
 * memcpy, by `rep movsb`, by the kernel (a pread of the files) and by the
 * library (with the way it took: libc, movsb or stream). */
static void copies(const char *label, const char *dir, const char *src, char *dst, size_t band, int runs)
{
	static const char *const way[] = { "libc", "movsb", "stream" };
	double m[RUNS_MAX], s[RUNS_MAX], k[RUNS_MAX], c[RUNS_MAX], gb = (double)band * BANDS / 1e9;
	for (int r = 0; r < runs; r++) {
		double t = now();
		for (int i = 0; i < BANDS; i++)
			memcpy(dst, src + (size_t)i * band, band);
		m[r] = gb / (now() - t);
		t = now();
		for (int i = 0; i < BANDS; i++)
			movsb(dst, src + (size_t)i * band, band);
		s[r] = gb / (now() - t);
		k[r] = gb / read_bands(dir, dst, band);
		t = now();
		for (int i = 0; i < BANDS; i++)
			ckc_copy(dst, src + (size_t)i * band, band);
		c[r] = gb / (now() - t);
	}
	printf("%s band=%zuMiB memcpy_GBps=%.2f movsb_GBps=%.2f pread_GBps=%.2f library_GBps=%.2f library_way=%s\n",
	       label, band >> 20, median(m, runs), median(s, runs), median(k, runs), median(c, runs),
	       way[ckc_copy_way(dst, src, band)]);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: copy_bench DIR [BAND_MIB [RUNS]]\n");
		return 2;
	}
	size_t band = (size_t)(argc > 2 ? atol(argv[2]) : 16) << 20;
	int runs = argc > 3 ? atoi(argv[3]) : 5;
	if (band == 0 || runs < 1 || runs > RUNS_MAX) {
		fprintf(stderr, "copy_bench: BAND_MIB > 0 and 1 <= RUNS <= %d\n", RUNS_MAX);
		return 2;
	}
	size_t size = band * BANDS;
	ckc_copy_configure(CKC_COPY_AUTO);
	char *src = aligned_alloc(4096, size), *dst = aligned_alloc(4096, band + 4096);
	if (!src || !dst)
		die("memory");
	for (size_t i = 0; i < size; i += 4096)
		memset(src + i, (int)(i >> 12), 4096);
	memset(dst, 0, band + 4096);
	double gb = (double)size / 1e9;

	/* 1. memory to memory, and the kernel's copy out of the page cache */
	write_bands(argv[1], src, band, band);
	copies("copy", argv[1], src, dst, band, runs);
	/* the same into a destination 16 bytes into its page */
	copies("near-copy dst_page_offset=16", argv[1], src, dst + 16, band, runs);

	/* 2. read speed by the pieces the files were written in */
	static const size_t pieces[] = { 64u << 10, 128u << 10, 512u << 10, 2u << 20, 0 };
	for (int j = 0; j < 5; j++) {
		size_t piece = pieces[j] && pieces[j] < band ? pieces[j] : band;
		double v[RUNS_MAX];
		for (int r = 0; r < runs; r++) {
			write_bands(argv[1], src, band, piece);
			v[r] = gb / read_bands(argv[1], dst, band);
		}
		printf("page-cache band=%zuMiB written_in=%zuKiB read_GBps=%.2f\n", band >> 20, piece >> 10,
		       median(v, runs));
		if (piece == band)
			break;
	}
	char p[4096];
	for (int i = 0; i < BANDS; i++) {
		band_path(p, sizeof(p), argv[1], i);
		unlink(p);
	}
	free(src);
	free(dst);
	return 0;
}
