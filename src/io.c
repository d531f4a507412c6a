/* Default (libc) implementation of the engine's I/O table and the
 * full-transfer helpers every tier uses. */
#include "config.h"

#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

/* cachestat(2) (Linux 6.5), by number where the headers predate it: the
 * same number on every architecture */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

struct io_cachestat_range {
	uint64_t off, len;
};

struct io_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* mincore(2) over a mapping of the range, for kernels without cachestat. */
static int64_t io_cached_mincore(int fd, uint64_t off, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t start = off / (uint64_t)pg * (uint64_t)pg, span = off + len - start;
	size_t npg = (size_t)((span + (uint64_t)pg - 1) / (uint64_t)pg);
	void *m = mmap(NULL, (size_t)span, PROT_READ, MAP_SHARED, fd, (off_t)start);
	if (m == MAP_FAILED)
		return -1;
	unsigned char *vec = malloc(npg);
	int64_t n = -1;
	if (vec && mincore(m, (size_t)span, vec) == 0) {
		n = 0;
		for (size_t i = 0; i < npg; i++)
			n += vec[i] & 1;
		n *= pg;
	}
	free(vec);
	munmap(m, (size_t)span);
	return n;
}

static int64_t io_cached(int fd, uint64_t off, uint64_t len)
{
	static atomic_bool no_cachestat;
	struct io_cachestat_range r = { off, len };
	struct io_cachestat cs;

	if (len == 0)
		return 0;
	if (!atomic_load_explicit(&no_cachestat, memory_order_relaxed)) {
		if (syscall(SYS_cachestat, fd, &r, &cs, 0) == 0)
			return (int64_t)(cs.nr_cache * (uint64_t)sysconf(_SC_PAGESIZE));
		if (errno != ENOSYS)
			return -1;
		atomic_store(&no_cachestat, true);
	}
	return io_cached_mincore(fd, off, len);
}

#define CKC_IO_LIBC                                                      \
	{                                                                \
		.open = io_open, .close = close, .pread = pread,         \
		.pread_cached = io_pread_cached, .cached = io_cached,    \
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
