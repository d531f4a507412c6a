/* slowfs: a shim preloaded after libckptcache.so by the end-to-end tests, so
 * that the library's own unlink(2) and rename(2) of real files take as long
 * as a parallel file system's metadata operations do (milliseconds). It
 * widens the windows in which flushes and the program's renames overlap.
 *   SLOWFS_MATCH  only paths containing this string are slowed
 *   SLOWFS_US     microseconds added before each such call
 *   SLOWFS_OPS    which calls: any of "unlink", "rename" (default both) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void slow(const char *op, const char *path)
{
	const char *m = getenv("SLOWFS_MATCH"), *us = getenv("SLOWFS_US"), *ops = getenv("SLOWFS_OPS");
	if (!m || !us || !path || !strstr(path, m) || (ops && !strstr(ops, op)))
		return;
	long n = atol(us);
	struct timespec ts = { n / 1000000, (n % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) != 0)
		;
}

int unlink(const char *path)
{
	static int (*real)(const char *);
	if (!real)
		real = (int (*)(const char *))dlsym(RTLD_NEXT, "unlink");
	slow("unlink", path);
	return real(path);
}

int rename(const char *from, const char *to)
{
	static int (*real)(const char *, const char *);
	if (!real)
		real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
	slow("rename", to);
	return real(from, to);
}
