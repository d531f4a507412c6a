/* Default (libc) implementation of the engine's I/O table and the
 * full-transfer helpers every tier uses. */
#include "config.h"

#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

__thread int ckc_io_guard;

static int io_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags | O_CLOEXEC, mode);
}

static int io_fallocate(int fd, int mode, off_t off, off_t len)
{
#ifdef HAVE_FALLOCATE
	return fallocate(fd, mode, off, len);
#else
	(void)mode;
	int rc = posix_fallocate(fd, off, len);
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
#endif
}

static ssize_t io_pread_cached(int fd, void *buf, size_t len, off_t off)
{
#ifdef RWF_NOWAIT
	struct iovec v = { buf, len };
	return preadv2(fd, &v, 1, off, RWF_NOWAIT);
#else
	(void)fd, (void)buf, (void)len, (void)off;
	errno = EOPNOTSUPP;
	return -1;
#endif
}

#define CKC_IO_LIBC                                                      \
	{                                                                \
		.open = io_open, .close = close, .pread = pread,         \
		.pread_cached = io_pread_cached,                         \
		.pwrite = pwrite, .fsync = fsync, .ftruncate = ftruncate, \
		.fallocate = io_fallocate, .rename = rename,             \
		.unlink = unlink, .stat = stat, .fstat = fstat,          \
		.mkdir = mkdir, .linkat = linkat,                        \
	}

static const ckc_io_t io_default = CKC_IO_LIBC;
ckc_io_t ckc_io = CKC_IO_LIBC;

void ckc_io_reset(void)
{
	ckc_io = io_default;
}

int ckc_io_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = ckc_io.pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

size_t ckc_io_pread_cached_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = ckc_io.pread_cached(fd, p + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	return done;
}

ssize_t ckc_io_pread_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = ckc_io.pread(fd, p + done, len - done, off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}
