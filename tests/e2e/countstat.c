/* countstat: a shim preloaded after libckptcache.so by the end-to-end case
 * tools/stat-next-interposer. It counts the calls of the stat family,
 * fcntl, lseek and ioctl that reach it, passes each on to the C library,
 * and at its end adds its counts to the file COUNTSTAT_OUT names (a line
 * "NAME N" per function). The library makes some of these calls itself
 * without the C library's function where nothing lies between them; with
 * this shim between, every call must still reach the shim. */
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

/* the calls of each function that reached the shim */
enum { C_STAT, C_LSTAT, C_FSTAT, C_FSTATAT, C_FCNTL, C_LSEEK, C_IOCTL, C_N };
static const char *const names[C_N] = { "stat", "lstat", "fstat", "fstatat", "fcntl", "lseek", "ioctl" };
static atomic_long calls[C_N];

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int stat(const char *p, struct stat *st)
{
	calls[C_STAT]++;
	return NEXT(stat)(p, st);
}
int stat64(const char *p, struct stat64 *st)
{
	calls[C_STAT]++;
	return NEXT(stat64)(p, st);
}
int lstat(const char *p, struct stat *st)
{
	calls[C_LSTAT]++;
	return NEXT(lstat)(p, st);
}
int lstat64(const char *p, struct stat64 *st)
{
	calls[C_LSTAT]++;
	return NEXT(lstat64)(p, st);
}
int fstat(int fd, struct stat *st)
{
	calls[C_FSTAT]++;
	return NEXT(fstat)(fd, st);
}
int fstat64(int fd, struct stat64 *st)
{
	calls[C_FSTAT]++;
	return NEXT(fstat64)(fd, st);
}
int fstatat(int d, const char *p, struct stat *st, int fl)
{
	calls[C_FSTATAT]++;
	return NEXT(fstatat)(d, p, st, fl);
}
int fstatat64(int d, const char *p, struct stat64 *st, int fl)
{
	calls[C_FSTATAT]++;
	return NEXT(fstatat64)(d, p, st, fl);
}
static int fcntl_next(const char *name, int fd, int cmd, va_list ap)
{
	unsigned long arg = va_arg(ap, unsigned long);
	int (*f)(int, int, ...) = (int (*)(int, int, ...))dlsym(RTLD_NEXT, name);
	calls[C_FCNTL]++;
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

off_t lseek(int fd, off_t off, int whence)
{
	calls[C_LSEEK]++;
	return NEXT(lseek)(fd, off, whence);
}
off64_t lseek64(int fd, off64_t off, int whence)
{
	calls[C_LSEEK]++;
	return NEXT(lseek64)(fd, off, whence);
}
int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int (*f)(int, unsigned long, ...) = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	calls[C_IOCTL]++;
	return f(fd, req, arg);
}

__attribute__((destructor)) static void countstat_end(void)
{
	const char *out = getenv("COUNTSTAT_OUT");
	if (!out)
		return;
	/* a line per function and process ("NAME N"), summed by the case */
	int fd = open(out, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd < 0)
		return;
	char b[256];
	int n = 0;
	for (int i = 0; i < C_N; i++)
		n += snprintf(b + n, sizeof b - (size_t)n, "%s %ld\n", names[i], (long)calls[i]);
	if (write(fd, b, (size_t)n) != n)
		perror("countstat");
	close(fd);
}
