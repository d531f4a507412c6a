/* api_user: an end-to-end test program that declares its restore order
 * through the <ckptcache.h> API (linked with -lckptcache), waits for the
 * flushes, checks the real files behind the library's back, and reads the
 * history back in that order. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ckptcache.h"

static _Noreturn void fail(const char *what, const char *path)
{
	fprintf(stderr, "api_user: FAIL: %s %s (%s)\n", what, path ? path : "", strerror(errno));
	exit(1);
}

static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)x;
	}
}

/* Reads the real file with raw system calls: what is on disk, whatever the
 * library would answer. */
static int raw_matches(const char *path, const unsigned char *e, size_t n, unsigned char *b)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY, 0);
	size_t got = 0;
	long r;
	if (fd < 0)
		return 0;
	while (got <= n && (r = syscall(SYS_read, fd, b + got, n + 1 - got)) > 0)
		got += (size_t)r;
	syscall(SYS_close, fd);
	return got == n && memcmp(b, e, n) == 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: api_user DIR COUNT SIZE\n");
		return 2;
	}
	const char *dir = argv[1];
	int n = atoi(argv[2]);
	size_t size = (size_t)strtoull(argv[3], NULL, 0);
	unsigned char *e = malloc(size), *b = malloc(size + 1);
	char path[PATH_MAX];
	int *order = malloc((size_t)n * sizeof(*order)), k = 0;

	if (!e || !b || !order || n < 2)
		fail("setup", NULL);
	/* an order no CKPTCACHE_ORDER can express: odd ones down, even ones up */
	for (int i = (n - 1) | 1; i >= 1; i -= 2)
		if (i < n)
			order[k++] = i;
	for (int i = 0; i < n; i += 2)
		order[k++] = i;

	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/api_%03d.bin", dir, i);
		fill(e, size, (uint64_t)i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, e, size) != (ssize_t)size || close(fd) != 0)
			fail("write", path);
	}
	for (int j = 0; j < n; j++) {
		snprintf(path, sizeof(path), "%s/api_%03d.bin", dir, order[j]);
		if (ckptcache_prefetch_enqueue(path) != 0)
			fail("ckptcache_prefetch_enqueue", path);
	}
	errno = 0;
	if (ckptcache_prefetch_enqueue(NULL) != -1 || errno != EINVAL)
		fail("ckptcache_prefetch_enqueue(NULL) did not fail with EINVAL", NULL);
	if (ckptcache_prefetch_start() != 0)
		fail("ckptcache_prefetch_start", NULL);
	if (ckptcache_wait_flushed() != 0)
		fail("ckptcache_wait_flushed", NULL);
	/* every checkpoint is at its real path now (CKPTCACHE_PERSIST=always) */
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/api_%03d.bin", dir, i);
		fill(e, size, (uint64_t)i);
		if (!raw_matches(path, e, size, b))
			fail("after ckptcache_wait_flushed the real file is missing or wrong:", path);
	}
	for (int j = 0; j < n; j++) {
		snprintf(path, sizeof(path), "%s/api_%03d.bin", dir, order[j]);
		fill(e, size, (uint64_t)order[j]);
		int fd = open(path, O_RDONLY);
		size_t got = 0;
		ssize_t r;
		if (fd < 0)
			fail("open", path);
		while (got <= size && (r = read(fd, b + got, size + 1 - got)) > 0)
			got += (size_t)r;
		close(fd);
		if (got != size || memcmp(b, e, size) != 0)
			fail("read back wrong bytes:", path);
	}
	printf("api_user: %d checkpoints flushed, read back in a declared order, verified\n", n);
	free(order);
	free(b);
	free(e);
	return 0;
}
