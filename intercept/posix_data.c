/* POSIX I/O wrappers, the data and its durability: read/write family,
 * seek, sync, truncate, fallocate. Shapes as in posix.c. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/mman.h>
#include <linux/close_range.h>
#include <linux/falloc.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "intercept.h"
#include "sigdefer.h"
#include "owed.h"
#include "log.h"
#include "path.h"

/* ---- data ------------------------------------------------------------ */

/* What one call moves at most (CKC_RW_MAX, as the kernel). */
static inline size_t rw_len(size_t n)
{
	return n < CKC_RW_MAX ? n : CKC_RW_MAX;
}

/* The tagged halves of the hottest calls, out of line: the untagged path,
 * which all of a program's other I/O takes, stays a table load and a jump
 * to libc. A number whose placeholder is gone is passed to libc too. Each
 * holds the descriptor for its transfer (ckc_vfd_hold), so that another
 * thread's close of the number meanwhile leaves it, and its handle, whole
 * until the call ends, as the kernel leaves a read in progress its file. */
/* The end of a held call: whether it was handed over to the real file
 * (ckc_px_handed_over, *r), the reference dropped either way. */
static bool vfd_done(long *r, ckc_vfd_t *v, int saved)
{
	bool handed = ckc_px_handed_over(r, v);
	ckc_vfd_put(v);
	/* (the real call that follows leaves errno as it finds it where it
	 * succeeds: the program's, not what the hand-over met) */
	if (handed)
		errno = saved;
	return handed;
}

static __attribute__((noinline)) ssize_t read_tagged(int fd, void *buf, size_t n)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(read)(fd, buf, n);
	int saved = errno;
	long r = ckc_vfd_read(v, buf, rw_len(n));
	if (vfd_done(&r, v, saved))
		return REAL(read)(fd, buf, n);
	return ckc_result(r, saved);
}

static __attribute__((noinline)) ssize_t write_tagged(int fd, const void *buf, size_t n)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(write)(fd, buf, n);
	int saved = errno;
	long r = ckc_vfd_write(v, buf, rw_len(n));
	if (vfd_done(&r, v, saved))
		return REAL(write)(fd, buf, n);
	return ckc_result(r, saved);
}

static __attribute__((noinline)) ssize_t pread_tagged(int fd, void *buf, size_t n, off_t off,
						      ssize_t (*real)(int, void *, size_t, off_t))
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return real(fd, buf, n, off);
	int saved = errno;
	long r = ckc_vfd_pread(v, buf, rw_len(n), off);
	if (vfd_done(&r, v, saved))
		return real(fd, buf, n, off);
	return ckc_result(r, saved);
}

static __attribute__((noinline)) ssize_t pwrite_tagged(int fd, const void *buf, size_t n, off_t off,
						       ssize_t (*real)(int, const void *, size_t, off_t))
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return real(fd, buf, n, off);
	int saved = errno;
	long r = ckc_px_vfd_pwrite(v, buf, rw_len(n), off);
	if (vfd_done(&r, v, saved))
		return real(fd, buf, n, off);
	return ckc_result(r, saved);
}

CKC_HOT_PATH CKC_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1)) {
		ckc_owed_touch(buf, n);
		return REAL(read)(fd, buf, n);
	}
	return read_tagged(fd, buf, n);
}

CKC_HOT_PATH CKC_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1)) {
		ckc_owed_touch(buf, n);
		return REAL(write)(fd, buf, n);
	}
	return write_tagged(fd, buf, n);
}

CKC_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1)) {
		ckc_owed_touch(buf, n);
		return REAL(pread)(fd, buf, n, off);
	}
	return pread_tagged(fd, buf, n, off, REAL(pread));
}

CKC_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1)) {
		ckc_owed_touch(buf, n);
		return REAL(pread64)(fd, buf, n, off);
	}
	return pread_tagged(fd, buf, n, off, REAL(pread64));
}

CKC_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1)) {
		ckc_owed_touch(buf, n);
		return REAL(pwrite)(fd, buf, n, off);
	}
	return pwrite_tagged(fd, buf, n, off, REAL(pwrite));
}

CKC_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1)) {
		ckc_owed_touch(buf, n);
		return REAL(pwrite64)(fd, buf, n, off);
	}
	return pwrite_tagged(fd, buf, n, off, REAL(pwrite64));
}

/* dprintf(3) and vdprintf(3) write through the C library's own write(2),
 * which the wrappers never see: on a tagged descriptor the text is made
 * here (what a conversion that fails leaves before it is written too, as
 * the C library's stream writes it) and written with write(). */
static int dprintf_tagged(int fd, const char *fmt, va_list ap)
{
	char *s = NULL;
	size_t len = 0;
	int saved = errno;
	FILE *m = open_memstream(&s, &len);
	if (!m)
		return -1;
	int n = vfprintf(m, fmt, ap), e = n < 0 ? errno : saved;
	if (fclose(m) != 0) {
		free(s);
		return -1;
	}
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, s + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			e = w < 0 ? errno : EIO;
			n = -1;
			break;
		}
		done += (size_t)w;
	}
	free(s);
	errno = e;
	return n;
}

CKC_EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	if (ckc_fd_maybe_tagged(fd))
		return dprintf_tagged(fd, fmt, ap);
	if (!REAL(__vdprintf_chk)) {
		errno = ENOSYS;
		return -1;
	}
	return REAL(__vdprintf_chk)(fd, flag, fmt, ap);
}

/* (glibc's vdprintf is its checking one without checks: flag 0) */
CKC_EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	return __vdprintf_chk(fd, 0, fmt, ap);
}

CKC_EXPORT int dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vdprintf(fd, fmt, ap);
	va_end(ap);
	return n;
}

CKC_EXPORT int __dprintf_chk(int fd, int flag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = __vdprintf_chk(fd, flag, fmt, ap);
	va_end(ap);
	return n;
}

/* After a vector's checkpoint went to its real file in its middle
 * (done bytes moved before): the pieces past those bytes, in
 * a new array *rest, and their count; -1 where no memory is left. */
static int iov_past(const struct iovec *iov, int cnt, size_t done, struct iovec **rest)
{
	int i = 0;
	while (i < cnt && done >= iov[i].iov_len) {
		done -= iov[i].iov_len;
		i++;
	}
	int saved = errno;
	struct iovec *r = malloc((size_t)(cnt - i + 1) * sizeof(*r));
	errno = saved;
	if (!r)
		return -1;
	int n = 0;
	for (; i < cnt; i++, n++) {
		r[n] = iov[i];
		r[n].iov_base = (char *)r[n].iov_base + done;
		r[n].iov_len -= done;
		done = 0;
	}
	*rest = r;
	return n;
}

/* The call CALL (on rest, n pieces) for the rest of a vector after such a
 * hand-over, or the whole call ALL where none happened mid-vector; the
 * answer counts the bytes moved before it (a failure of the rest leaves
 * those, as the kernel answers a vector it moved in part). */
#define IOV_AFTER_HAND(ALL, CALL) IOV_AFTER_HAND_SYNC(ALL, CALL, NULL)

/* The same, where the call asked for its bytes on disk (RWF_DSYNC,
 * RWF_SYNC): the bytes the hand-over moved before the rest reached the real
 * file without it, so sync (the real fdatasync or fsync) makes them so; its
 * failure fails the call, as the kernel's own sync after a write does. */
#define IOV_AFTER_HAND_SYNC(ALL, CALL, SYNC)                                              \
	do {                                                                              \
		if (!done) {                                                              \
			errno = saved;                                                    \
			return ALL;                                                       \
		}                                                                         \
		struct iovec *rest = NULL;                                                \
		int n = iov_past(iov, cnt, done, &rest);                                  \
		ssize_t more = n > 0 ? CALL : 0;                                          \
		free(rest);                                                               \
		int (*sync_fn)(int) = (SYNC);                                             \
		if (sync_fn && sync_fn(fd) != 0)                                          \
			return -1;                                                        \
		errno = saved;                                                            \
		return (ssize_t)done + (more > 0 ? more : 0);                             \
	} while (0)

CKC_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v) {
		ckc_owed_touch_iov(iov, cnt);
		return REAL(readv)(fd, iov, cnt);
	}
	int saved = errno;
	size_t done;
	long r = ckc_px_vfd_iov(v, iov, cnt, 0, true, false, &done);
	if (vfd_done(&r, v, saved))
		IOV_AFTER_HAND(REAL(readv)(fd, iov, cnt), REAL(readv)(fd, rest, n));
	return ckc_result(r, saved);
}

CKC_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v) {
		ckc_owed_touch_iov(iov, cnt);
		return REAL(writev)(fd, iov, cnt);
	}
	int saved = errno;
	size_t done;
	long r = ckc_px_vfd_iov(v, iov, cnt, 0, true, true, &done);
	if (vfd_done(&r, v, saved))
		IOV_AFTER_HAND(REAL(writev)(fd, iov, cnt), REAL(writev)(fd, rest, n));
	return ckc_result(r, saved);
}

#define VFD_IOV_WRAPPER(name, wr)                                                          \
	CKC_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, off_t off)      \
	{                                                                                  \
		ckc_vfd_t *v = ckc_vfd_held(fd);                                           \
		if (!v) {                                                                  \
			ckc_owed_touch_iov(iov, cnt);                                      \
			return REAL(name)(fd, iov, cnt, off);                              \
		}                                                                          \
		int saved = errno;                                                         \
		size_t done;                                                               \
		long r = ckc_px_vfd_iov(v, iov, cnt, off, false, wr, &done);               \
		if (vfd_done(&r, v, saved))                                                       \
			IOV_AFTER_HAND(REAL(name)(fd, iov, cnt, off),                      \
				       REAL(name)(fd, rest, n, off + (off_t)done));        \
		return ckc_result(r, saved);                                               \
	}

VFD_IOV_WRAPPER(preadv, false)
VFD_IOV_WRAPPER(preadv64, false)
VFD_IOV_WRAPPER(pwritev, true)
VFD_IOV_WRAPPER(pwritev64, true)

/* preadv2/pwritev2: offset -1 means the current position; flags are hints
 * (RWF_HIPRI, RWF_DSYNC...) that the cache satisfies or ignores, except
 * RWF_DSYNC/RWF_SYNC, which sync like fdatasync. */
/* The flags Linux has defined (HIPRI, DSYNC, SYNC, NOWAIT, APPEND, NOAPPEND,
 * ATOMIC, DONTCACHE, NOSIGNAL): any other bit is refused, as the kernel
 * refuses it; of these, a kernel older than the flag refuses it too, which
 * the cache does not. APPEND with NOAPPEND is refused (EINVAL), and so is
 * ATOMIC (EOPNOTSUPP): the cache makes no write atomic, and the kernel
 * takes it only for a write through a file system that does (a program
 * that asks falls back, as on such a file system), never for a read. */
#define RWF_KNOWN 0x1ffu
#define RWF_NOAPPEND_FLAG 0x20u
#define RWF_ATOMIC_FLAG 0x40u
static inline int rwf_refused(int flags)
{
	unsigned f = (unsigned)flags;
	if ((f & ~RWF_KNOWN) || (f & RWF_ATOMIC_FLAG))
		return EOPNOTSUPP;
	return (f & RWF_APPEND) && (f & RWF_NOAPPEND_FLAG) ? EINVAL : 0;
}
#define VFD_IOV2_WRAPPER(name, wr)                                                         \
	CKC_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, off_t off,      \
				int flags)                                                 \
	{                                                                                  \
		ckc_vfd_t *v = ckc_vfd_held(fd);                                           \
		if (!v)                                                                    \
			return REAL(name)(fd, iov, cnt, off, flags);                       \
		int saved = errno, refused = rwf_refused(flags);                          \
		if (refused) {                                                             \
			/* (the kernel's other answers first: an empty vector     \
			 * moves nothing, whatever the flags) */                   \
			size_t all;                                                        \
			long c = ckc_px_iov_check(v, iov, cnt, off, off == -1, wr, &all);  \
			ckc_vfd_put(v);                                                    \
			if (c == 0 && all == 0)                                            \
				return 0;                                                  \
			errno = c ? (int)-c : refused;                                     \
			return -1;                                                         \
		}                                                                          \
		size_t done;                                                               \
		long r = ckc_px_vfd_iov(v, iov, cnt, off, off == -1,                       \
					wr ? ((flags & RWF_APPEND) ? CKC_PX_APPEND :               \
					      (flags & RWF_NOAPPEND_FLAG) ? CKC_PX_AT_OFFSET : 1) : 0, \
					&done);                                                    \
		bool handed = ckc_px_handed_over(&r, v);                                   \
		if (!handed && r > 0 && wr && (flags & (RWF_DSYNC | RWF_SYNC))) {          \
			ckc_enter();                                                       \
			int s = ckc_sync(v->h);                                            \
			ckc_leave();                                                       \
			if (s < 0)                                                         \
				r = s;                                                     \
		}                                                                          \
		ckc_vfd_put(v);                                                            \
		if (handed)                                                                \
			IOV_AFTER_HAND_SYNC(REAL(name)(fd, iov, cnt, off, flags),          \
					    REAL(name)(fd, rest, n, off == -1 ? -1 : off + (off_t)done, flags), \
					    !wr ? NULL : (flags & RWF_SYNC) ? REAL(fsync) :        \
					    (flags & RWF_DSYNC) ? REAL(fdatasync) : NULL);         \
		return ckc_result(r, saved);                                               \
	}

VFD_IOV2_WRAPPER(preadv2, false)
VFD_IOV2_WRAPPER(preadv64v2, false)
VFD_IOV2_WRAPPER(pwritev2, true)
VFD_IOV2_WRAPPER(pwritev64v2, true)

/* lseek and lseek64 (one function on 64-bit targets, two names). */
#define LSEEK_WRAPPER(name)                                                                      \
	CKC_WARM_PATH CKC_EXPORT off_t name(int fd, off_t off, int whence)                       \
	{                                                                                        \
		ckc_vfd_t *v = ckc_vfd_held(fd);                                                     \
		if (!v)                                                                          \
			return REAL_KERNEL(name) ? ckc_syscall6(SYS_lseek, fd, off, whence, 0, 0, 0) \
						 : REAL(name)(fd, off, whence);                  \
		int saved = errno;                                                               \
		off_t r = ckc_vfd_lseek(v, off, whence);                                         \
		ckc_vfd_put(v);                                                                  \
		return ckc_result(r, saved);                                                     \
	}
LSEEK_WRAPPER(lseek)
LSEEK_WRAPPER(lseek64)

/* The virtual descriptor behind fd, held (ckc_vfd_held), while the cache
 * answers for it (not handed over to its real file), or NULL. */
static ckc_vfd_t *vfd_cached(int fd)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (v && v->switched) {
		ckc_vfd_drop(v);
		v = NULL;
	}
	return v;
}

/* ioctl(2) on a tagged descriptor. Its placeholder answers every request
 * with EBADF, where a regular file answers a terminal's (isatty(3), as
 * Python's open() and stdio ask) with ENOTTY, FIONREAD with the size less
 * the position (negative past the end), and the other requests of its file
 * system as that supports them: those the cache cannot answer get ENOTTY,
 * as from a file system without them. */
CKC_START_PATH CKC_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (!REAL(ioctl)) {
		errno = ENOSYS;
		return -1;
	}
	ckc_vfd_t *v = vfd_cached(fd);
	if (!v)
		return REAL_KERNEL(ioctl) ? (int)ckc_syscall6(SYS_ioctl, fd, (long)req, (long)arg, 0, 0, 0)
					  : REAL(ioctl)(fd, req, arg);
	int saved = errno, rc = ckc_px_vfd_usable(v);
	if (!rc && req == FIONREAD) {
		rc = -EFAULT;
		if (arg) {
			ckc_mutex_lock(&v->lock);
			/* as the kernel puts it: the difference, cut to an int */
			int left = (int)((int64_t)ckc_handle_size(v->h) - (int64_t)v->pos);
			ckc_mutex_unlock(&v->lock);
			memcpy(arg, &left, sizeof(left)); /* the caller's int need not be aligned */
			rc = 0;
		}
	} else if (!rc) {
		rc = -ENOTTY;
	}
	ckc_vfd_put(v);
	return (int)ckc_result(rc, saved);
}

/* isatty(3) and tcgetattr(3) ask the kernel from inside the C library,
 * past the ioctl above: a tagged descriptor is no terminal. */
CKC_WARM_PATH CKC_EXPORT int isatty(int fd)
{
	if (ckc_fd_cached(fd)) {
		errno = ENOTTY;
		return 0;
	}
	return REAL(isatty) ? REAL(isatty)(fd) : 0;
}

CKC_EXPORT int tcgetattr(int fd, struct termios *t)
{
	if (ckc_fd_cached(fd)) {
		errno = ENOTTY;
		return -1;
	}
	if (!REAL(tcgetattr)) {
		errno = ENOSYS;
		return -1;
	}
	return REAL(tcgetattr)(fd, t);
}

/* ---- durability and size --------------------------------------------- */

static int vfd_sync(ckc_vfd_t *v)
{
	int rc = ckc_px_vfd_usable(v);
	if (rc)
		return rc;
	ckc_enter();
	rc = ckc_sync(v->h);
	ckc_leave();
	return rc;
}

/* A sync may take seconds (a publication, an fsync of the real file):
 * the descriptor is held for it, so that a close of its number by another
 * thread meanwhile leaves it, and its handle, whole until the sync ends. */
static long vfd_sync_held(int fd, int (*real)(int))
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return real(fd);
	int saved = errno;
	long r = vfd_sync(v);
	if (vfd_done(&r, v, saved))
		return real(fd);
	return ckc_result(r, saved);
}

CKC_EXPORT int fsync(int fd)
{
	return (int)vfd_sync_held(fd, REAL(fsync));
}

CKC_EXPORT int fdatasync(int fd)
{
	return (int)vfd_sync_held(fd, REAL(fdatasync));
}

/* Starting or waiting for the write-back of a range: the cache's bytes reach
 * the real file by its own flush, so there is nothing to start. */
CKC_EXPORT int sync_file_range(int fd, off_t off, off_t len, unsigned int flags)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(sync_file_range)(fd, off, len, flags);
	int saved = errno;
	/* refused as by the kernel: an unknown flag, a negative offset or
	 * length, a range whose end is past the largest offset */
	long r = (flags & ~(unsigned)(SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				      SYNC_FILE_RANGE_WAIT_AFTER)) ||
			 off < 0 || len < 0 || len > INT64_MAX - off
		 ? -EINVAL
		 : ckc_px_vfd_usable(v);
	if (vfd_done(&r, v, saved))
		return REAL(sync_file_range)(fd, off, len, flags);
	return (int)ckc_result(r, saved);
}

/* How long sync(2) waits for the cache's publications (each bounded by the
 * real file system's speed; a program's sync waits for its disk anyway). */
#define SYNC_PUBLISH_WAIT_NS (60ull * 1000000000u)

/* Before a sync of everything: without the library the kernel's sync puts
 * every byte the program wrote on disk, so the checkpoints not yet at
 * their real paths (closed, or still open: they go on at their real
 * files) are published first, for the kernel's sync to take them. */
static void publish_for_sync(void)
{
	/* (not from a signal handler of the program's, which may have
	 * interrupted it inside malloc: the kernel's sync alone there) */
	if (ckc_io_guard || ckc_in_vfork_child() || ckc_sig_in_handler() || !ckc_library_configured() ||
	    !ckc_engine_started())
		return;
	int saved = errno;
	ckc_enter();
	(void)ckc_publish_all(SYNC_PUBLISH_WAIT_NS, true);
	ckc_leave();
	errno = saved;
}

CKC_EXPORT void sync(void)
{
	publish_for_sync();
	if (REAL(sync))
		REAL(sync)();
}

/* The file system of a tagged descriptor: the file is synced as by fsync
 * (the real file system holds nothing of it before that). Of another
 * descriptor: as sync(2), the cache's checkpoints published first. */
CKC_EXPORT int syncfs(int fd)
{
	if (!ckc_fd_cached(fd))
		publish_for_sync();
	return (int)vfd_sync_held(fd, REAL(syncfs));
}

static int vfd_truncate(ckc_vfd_t *v, off_t len)
{
	int rc = ckc_px_vfd_usable(v);
	if (rc)
		return rc;
	if (len < 0)
		return -EINVAL;
	if ((v->flags & O_ACCMODE) == O_RDONLY)
		return -EINVAL;
	if ((rc = ckc_px_hole_aside(v, (uint64_t)len)) != 0)
		return rc;
	ckc_enter();
	rc = ckc_ftruncate(v->h, (uint64_t)len);
	ckc_leave();
	return rc;
}

CKC_EXPORT int ftruncate(int fd, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(ftruncate)(fd, len);
	int saved = errno;
	long r = vfd_truncate(v, len);
	if (vfd_done(&r, v, saved))
		return REAL(ftruncate)(fd, len);
	return (int)ckc_result(r, saved);
}

CKC_EXPORT int ftruncate64(int fd, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(ftruncate64)(fd, len);
	int saved = errno;
	long r = vfd_truncate(v, len);
	if (vfd_done(&r, v, saved))
		return REAL(ftruncate64)(fd, len);
	return (int)ckc_result(r, saved);
}

static int truncate_common(const char *path, off_t len, int (*real)(const char *, off_t))
{
	char canon[PATH_MAX];
	int saved = errno;
	if (ckc_tagged_asked(AT_FDCWD, path, canon)) {
		int rc = ckc_hand_over_path(canon);
		if (rc)
			return (int)ckc_result(rc, saved);
	}
	return ckc_enoent_checked(AT_FDCWD, path, real(path, len));
}

CKC_EXPORT int truncate(const char *path, off_t len)
{
	return truncate_common(path, len, REAL(truncate));
}

CKC_EXPORT int truncate64(const char *path, off_t len)
{
	return truncate_common(path, len, REAL(truncate64));
}

/* Advice and readahead: the cache follows its own restore order, so they
 * are accepted and ignored on tagged descriptors. */
CKC_WARM_PATH CKC_EXPORT int posix_fadvise(int fd, off_t off, off_t len, int advice)
{
	if (!ckc_vfd_get(fd))
		return REAL(posix_fadvise)(fd, off, len, advice);
	return advice >= POSIX_FADV_NORMAL && advice <= POSIX_FADV_NOREUSE && len >= 0 ? 0 : EINVAL;
}

CKC_EXPORT int posix_fadvise64(int fd, off_t off, off_t len, int advice)
{
	if (!ckc_vfd_get(fd))
		return REAL(posix_fadvise64)(fd, off, len, advice);
	return advice >= POSIX_FADV_NORMAL && advice <= POSIX_FADV_NOREUSE && len >= 0 ? 0 : EINVAL;
}

CKC_EXPORT ssize_t readahead(int fd, off_t off, size_t count)
{
	(void)off;
	(void)count;
	if (!ckc_vfd_get(fd))
		return REAL(readahead)(fd, off, count);
	return 0;
}

/* Space reservation: in a checkpoint written straight to its real path,
 * made there (posix_fallocate's emulation, emulate, where the file system
 * has none: as below); in the cache, the cache's business, where a
 * reservation past the end makes the file that long, as on a real file. */
static int vfd_allocate(ckc_vfd_t *v, int mode, off_t off, off_t len, bool emulate)
{
	if (off < 0 || len <= 0)
		return -EINVAL;
	/* (the other modes are the real file's: allocate_real) */
	if ((v->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	int home = ckc_fallocate_home(v->h, mode, (uint64_t)off, (uint64_t)len);
	if (home != -ENOENT && !(emulate && home == -EOPNOTSUPP))
		return home;
	uint64_t end = (uint64_t)off + (uint64_t)len;
	if ((mode & FALLOC_FL_KEEP_SIZE) || end <= ckc_handle_size(v->h))
		return 0;
	return vfd_truncate(v, (off_t)end);
}

/* Punching a hole, zeroing, collapsing or inserting a range: the kernel's
 * work on the real file, which the descriptor becomes first (as for
 * fcntl's record locks); the file system answers as without the library
 * (EOPNOTSUPP where it has no such mode). 0, 1 or -errno. */
static int allocate_real(ckc_vfd_t *v, int mode, off_t off, off_t len)
{
	/* (1: a reservation, the cache's to answer) */
	if (!(mode & ~FALLOC_FL_KEEP_SIZE))
		return 1;
	/* (the kernel's answers that need no file, in its order, without
	 * the publication: the range, a hole that would change the size, a
	 * descriptor that cannot write) */
	if (off < 0 || len <= 0)
		return -EINVAL;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if ((v->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	return ckc_px_vfd_make_real(v);
}

static int fallocate_common(int (*real)(int, int, off_t, off_t), int fd, int mode, off_t off, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return real(fd, mode, off, len);
	int saved = errno, rc = allocate_real(v, mode, off, len);
	if (rc <= 0) {
		ckc_vfd_put(v);
		return rc ? (int)ckc_result(rc, saved) : real(fd, mode, off, len);
	}
	long r = vfd_allocate(v, mode, off, len, false);
	if (vfd_done(&r, v, saved))
		return real(fd, mode, off, len);
	return (int)ckc_result(r, saved);
}

CKC_EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
	return fallocate_common(REAL(fallocate), fd, mode, off, len);
}

CKC_EXPORT int fallocate64(int fd, int mode, off_t off, off_t len)
{
	return fallocate_common(REAL(fallocate64), fd, mode, off, len);
}

/* posix_fallocate returns the error number instead of setting errno. */
CKC_EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(posix_fallocate)(fd, off, len);
	int saved = errno;
	long r = vfd_allocate(v, 0, off, len, true);
	if (vfd_done(&r, v, saved))
		return REAL(posix_fallocate)(fd, off, len);
	return (int)-r;
}

CKC_EXPORT int posix_fallocate64(int fd, off_t off, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(posix_fallocate64)(fd, off, len);
	int saved = errno;
	long r = vfd_allocate(v, 0, off, len, true);
	if (vfd_done(&r, v, saved))
		return REAL(posix_fallocate64)(fd, off, len);
	return (int)-r;
}
