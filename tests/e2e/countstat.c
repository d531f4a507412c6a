/* countstat: a shim preloaded after libckptcache.so by the end-to-end case
 * tools/stat-next-interposer. It counts the calls of the stat family and
 * fcntl that reach it, passes each on to the C library, and at its end
 * adds its count to the file COUNTSTAT_OUT names (one line, "N"). The
 * library makes some of these calls itself without the C library's
 * function where nothing lies between them; with this shim between, every
 * call must still reach the shim. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_long calls;

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int stat(const char *p, struct stat *st)
{
	calls++;
	return NEXT(stat)(p, st);
}
int stat64(const char *p, struct stat64 *st)
{
	calls++;
	return NEXT(stat64)(p, st);
}
int lstat(const char *p, struct stat *st)
{
	calls++;
	return NEXT(lstat)(p, st);
}
int lstat64(const char *p, struct stat64 *st)
{
	calls++;
	return NEXT(lstat64)(p, st);
}
int fstat(int fd, struct stat *st)
{
	calls++;
	return NEXT(fstat)(fd, st);
}
int fstat64(int fd, struct stat64 *st)
{
	calls++;
	return NEXT(fstat64)(fd, st);
}
int fstatat(int d, const char *p, struct stat *st, int fl)
{
	calls++;
	return NEXT(fstatat)(d, p, st, fl);
}
int fstatat64(int d, const char *p, struct stat64 *st, int fl)
{
	calls++;
	return NEXT(fstatat64)(d, p, st, fl);
}
static int fcntl_next(const char *name, int fd, int cmd, va_list ap)
{
	unsigned long arg = va_arg(ap, unsigned long);
	int (*f)(int, int, ...) = (int (*)(int, int, ...))dlsym(RTLD_NEXT, name);
	calls++;
	return f(fd, cmd, arg);
}
int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	int r = fcntl_next("fcntl", fd, cmd, ap);
	va_end(ap);
	return r;
}
int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	int r = fcntl_next("fcntl64", fd, cmd, ap);
	va_end(ap);
	return r;
}

__attribute__((destructor)) static void countstat_end(void)
{
	const char *out = getenv("COUNTSTAT_OUT");
	if (!out)
		return;
	/* one line per process, summed by the case */
	int fd = open(out, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd < 0)
		return;
	char b[32];
	int n = snprintf(b, sizeof b, "%ld\n", (long)calls);
	if (write(fd, b, (size_t)n) != n)
		perror("countstat");
	close(fd);
}
