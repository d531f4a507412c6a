/* The checking entry points of _FORTIFY_SOURCE. A program built with it
 * (Debian's and Ubuntu's compilers enable it at -O2) calls __read_chk and
 * friends wherever the compiler knows the buffer's size but not the
 * length; glibc's versions check and then make the real call inside libc,
 * past this library. Here the same check is made, and a failed one ends
 * the program through glibc's __chk_fail as it would without the library;
 * the call then goes the interposed way, so a tagged descriptor or stream,
 * or owed host memory, is served as for the plain call. */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "intercept.h"

#undef fread_unlocked

extern void __chk_fail(void) __attribute__((noreturn));

CKC_EXPORT ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return readlink(path, buf, n);
}

CKC_EXPORT char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
	if (resolvedlen < PATH_MAX)
		__chk_fail();
	return realpath(path, resolved);
}

CKC_EXPORT ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return readlinkat(dirfd, path, buf, n);
}

CKC_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return read(fd, buf, n);
}

CKC_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread(fd, buf, n, off);
}

CKC_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread64(fd, buf, n, off);
}

/* size * n bytes into a buffer of buflen: glibc refuses an overflowing
 * product as well as a short buffer */
static void fread_check(size_t buflen, size_t size, size_t n)
{
	size_t bytes;
	if (__builtin_mul_overflow(size, n, &bytes) || bytes > buflen)
		__chk_fail();
}

CKC_EXPORT size_t __fread_chk(void *p, size_t buflen, size_t size, size_t n, FILE *f)
{
	fread_check(buflen, size, n);
	return fread(p, size, n, f);
}

CKC_EXPORT size_t __fread_unlocked_chk(void *p, size_t buflen, size_t size, size_t n, FILE *f)
{
	fread_check(buflen, size, n);
	return fread_unlocked(p, size, n, f);
}

CKC_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		__chk_fail();
	return recv(fd, buf, n, flags);
}

CKC_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				  struct sockaddr *from, socklen_t *fromlen)
{
	if (n > buflen)
		__chk_fail();
	return recvfrom(fd, buf, n, flags, from, fromlen);
}
