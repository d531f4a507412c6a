/* slowfs: a shim preloaded after libckptcache.so by the end-to-end tests, so
 * that the library's own unlink(2) and rename(2) of real files take as long
 * as a parallel file system's metadata operations do (milliseconds), or
 * fail. It widens the windows in which flushes and the program's renames
 * overlap.
 *   SLOWFS_MATCH  only paths containing this string are slowed
 *   SLOWFS_US     microseconds added before each such call
 *   SLOWFS_OPS    which calls: any of "unlink", "rename", "open", "openat",
 *                 "pwrite", "dupfd" (default all but openat, pwrite and
 *                 dupfd; open: the library's own opens; openat: the
 *                 program's opens of real files, which the library makes
 *                 with openat(2); rename: a
 *                 file given its name, by rename(2), renameat2(2) (an
 *                 exchange of names) or linkat(2) of an anonymous file,
 *                 the ways the library publishes;
 *                 pwrite: a write to a descriptor of such a path, as a slow
 *                 file system's data path; dupfd: fcntl's F_DUPFD and
 *                 F_DUPFD_CLOEXEC of a descriptor of such a path, the
 *                 library's move of its files above the program's numbers)
 *   SLOWFS_ERRNO  instead of a delay, such a call fails with this errno
 *                 (a real path that cannot be written: the rescue path)
 *   SLOWFS_NOTMPFILE  open(O_TMPFILE) fails with EOPNOTSUPP, as on file
 *                 systems without anonymous files (the library then makes
 *                 named temporary files)
 *   SLOWFS_TMPFILE_ERRNO  open(O_TMPFILE) fails with this errno (a folder
 *                 that takes no new file now) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* 0, or -1 with errno set when the call must fail */
static int slow(const char *op, const char *path)
{
	const char *m = getenv("SLOWFS_MATCH"), *us = getenv("SLOWFS_US"), *ops = getenv("SLOWFS_OPS");
	const char *err = getenv("SLOWFS_ERRNO");
	if (!m || (!us && !err) || !path || !strstr(path, m) || (ops && !strstr(ops, op)))
		return 0;
	if (err) {
		errno = atoi(err);
		return -1;
	}
	long n = atol(us);
	struct timespec ts = { n / 1000000, (n % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) != 0)
		;
	return 0;
}

int unlink(const char *path)
{
	static int (*real)(const char *);
	if (!real)
		real = (int (*)(const char *))dlsym(RTLD_NEXT, "unlink");
	if (slow("unlink", path))
		return -1;
	return real(path);
}

int rename(const char *from, const char *to)
{
	static int (*real)(const char *, const char *);
	if (!real)
		real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
	if (slow("rename", to))
		return -1;
	return real(from, to);
}

int renameat2(int olddirfd, const char *from, int newdirfd, const char *to, unsigned int flags)
{
	static int (*real)(int, const char *, int, const char *, unsigned int);
	if (!real)
		real = (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT, "renameat2");
	if (slow("rename", to))
		return -1;
	return real(olddirfd, from, newdirfd, to, flags);
}

int linkat(int olddirfd, const char *from, int newdirfd, const char *to, int flags)
{
	static int (*real)(int, const char *, int, const char *, int);
	if (!real)
		real = (int (*)(int, const char *, int, const char *, int))dlsym(RTLD_NEXT, "linkat");
	if (slow("rename", to))
		return -1;
	return real(olddirfd, from, newdirfd, to, flags);
}

/* The descriptor's path (for an anonymous file, its folder's, with the
 * kernel's " (deleted)" name): false if unknown. */
static int fd_path(int fd, char *path, size_t size)
{
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	ssize_t len = readlink(self, path, size - 1);
	if (len <= 0)
		return 0;
	path[len] = '\0';
	return 1;
}

/* SLOWFS_OPS must name pwrite: data writes are slowed only when asked. */
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	static ssize_t (*real)(int, const void *, size_t, off_t);
	const char *ops = getenv("SLOWFS_OPS");
	if (!real)
		real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
	char path[4096];
	if (ops && strstr(ops, "pwrite") && fd_path(fd, path, sizeof(path)) && slow("pwrite", path))
		return -1;
	return real(fd, buf, n, off);
}

int open(const char *path, int flags, ...)
{
	static int (*real)(const char *, int, ...);
	mode_t mode = 0;
	if (!real)
		real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if ((flags & O_TMPFILE) == O_TMPFILE && getenv("SLOWFS_NOTMPFILE")) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if ((flags & O_TMPFILE) == O_TMPFILE && getenv("SLOWFS_TMPFILE_ERRNO")) {
		errno = atoi(getenv("SLOWFS_TMPFILE_ERRNO"));
		return -1;
	}
	/* slowed only where SLOWFS_OPS names it */
	const char *ops = getenv("SLOWFS_OPS");
	if (ops && strstr(ops, "open") && slow("open", path))
		return -1;
	return real(path, flags, mode);
}

/* SLOWFS_OPS must name dupfd: a dup of a descriptor of a matching path to a
 * number above a floor waits before it (fcntl64 is the same call). */
int fcntl(int fd, int cmd, ...)
{
	static int (*real)(int, int, ...);
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
	const char *ops = getenv("SLOWFS_OPS");
	char path[4096];
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && ops && strstr(ops, "dupfd") && fd_path(fd, path, sizeof(path)) &&
	    slow("dupfd", path))
		return -1;
	return real(fd, cmd, arg);
}
int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

/* SLOWFS_OPS must name openat: a real open the library makes for the
 * program (a checkpoint written straight to its real path). */
int openat(int dirfd, const char *path, int flags, ...)
{
	static int (*real)(int, const char *, int, ...);
	mode_t mode = 0;
	if (!real)
		real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	const char *ops = getenv("SLOWFS_OPS");
	if (ops && strstr(ops, "openat") && slow("openat", path))
		return -1;
	return real(dirfd, path, flags, mode);
}
