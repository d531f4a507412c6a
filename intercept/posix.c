/* POSIX I/O wrappers: open family, close, read/write family, seek, sync,
 * truncate, dup family, fcntl, access, unlink, rename, mmap and the copy
 * calls. Every wrapper has one shape: an untagged call goes straight to
 * libc; a tagged one goes to the engine, and errno is kept on success. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/close_range.h>
#include <linux/falloc.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "intercept.h"
#include "owed.h"
#include "log.h"
#include "path.h"


/* A tagged descriptor inherited across fork, or used after the engine
 * stopped, cannot reach the cache any more: fail, loudly. */
static int vfd_usable(const ckc_vfd_t *v)
{
	static atomic_bool said;
	if (atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed))
		return 0;
	if (!atomic_exchange(&said, true))
		ckc_error("a descriptor of checkpoint %s is used where the cache is not running "
			  "(a forked child, or after exit began): the call fails with EBADF",
			  v->path);
	return -EBADF;
}

/* Whether *r says that v's version went to its real file meanwhile (a
 * hand-over by another thread or process) and v's numbers now name that
 * file: the caller then makes its call again there. A descriptor that
 * could not be switched fails (said). */
static bool handed_over(long *r, ckc_vfd_t *v)
{
	if (*r != CKC_HANDED)
		return false;
	if (ckc_vfd_switch(v) == 0)
		return true;
	*r = -EIO;
	return false;
}

/* ---- operations on virtual descriptors ------------------------------ */

ssize_t ckc_vfd_pread(ckc_vfd_t *v, void *buf, size_t n, off_t off)
{
	int rc = vfd_usable(v);
	if (rc)
		return rc;
	if ((v->flags & O_ACCMODE) == O_WRONLY)
		return -EBADF;
	if (off < 0)
		return -EINVAL;
	ckc_enter();
	ssize_t r = CKC_OWED_PASS;
	if (ckc_owed_read_ok)
		r = ckc_owed_pread(v->h, buf, n, (uint64_t)off, CKC_OWED_SITE_READ);
	if (r == CKC_OWED_PASS) {
		ckc_owed_will_write(buf, n);
		r = ckc_pread(v->h, buf, n, (uint64_t)off);
	}
	ckc_leave();
	return r;
}

ssize_t ckc_vfd_pwrite(ckc_vfd_t *v, const void *buf, size_t n, off_t off)
{
	int rc = vfd_usable(v);
	if (rc)
		return rc;
	if ((v->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if (off < 0)
		return -EINVAL;
	ckc_enter();
	ssize_t r = CKC_OWED_PASS;
	if (atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		r = ckc_owed_pwrite(v->h, buf, n, (uint64_t)off);
	if (r == CKC_OWED_PASS)
		r = ckc_pwrite(v->h, buf, n, (uint64_t)off);
	ckc_leave();
	return r;
}

ssize_t ckc_vfd_read(ckc_vfd_t *v, void *buf, size_t n)
{
	pthread_mutex_lock(&v->lock);
	ssize_t r = ckc_vfd_pread(v, buf, n, (off_t)v->pos);
	if (r > 0)
		v->pos += (uint64_t)r;
	pthread_mutex_unlock(&v->lock);
	return r;
}

ssize_t ckc_vfd_write(ckc_vfd_t *v, const void *buf, size_t n)
{
	pthread_mutex_lock(&v->lock);
	if (v->flags & O_APPEND)
		v->pos = ckc_handle_size(v->h);
	ssize_t r = ckc_vfd_pwrite(v, buf, n, (off_t)v->pos);
	if (r > 0)
		v->pos += (uint64_t)r;
	pthread_mutex_unlock(&v->lock);
	return r;
}

off_t ckc_vfd_lseek(ckc_vfd_t *v, off_t off, int whence)
{
	int err = vfd_usable(v);
	if (err)
		return err;
	pthread_mutex_lock(&v->lock);
	off_t size = (off_t)ckc_handle_size(v->h), r = 0;
	switch (whence) {
	case SEEK_SET: r = off; break;
	case SEEK_CUR: r = (off_t)v->pos + off; break;
	case SEEK_END: r = size + off; break;
	/* a checkpoint shows no holes: all of it is data */
	case SEEK_DATA: r = off; err = off < size ? 0 : -ENXIO; break;
	case SEEK_HOLE: r = size; err = off < size ? 0 : -ENXIO; break;
	default: err = -EINVAL; break;
	}
	if (!err && (r < 0 || (off < 0 && whence >= SEEK_DATA)))
		err = whence >= SEEK_DATA ? -ENXIO : -EINVAL;
	if (!err)
		v->pos = (uint64_t)r;
	pthread_mutex_unlock(&v->lock);
	return err ? err : r;
}

/* Scatter/gather over pread/pwrite; stops at the first short transfer. */
static ssize_t vfd_iov(ckc_vfd_t *v, const struct iovec *iov, int cnt, off_t off, bool use_pos,
		       bool wr)
{
	ssize_t total = 0;

	if (cnt < 0)
		return -EINVAL;
	if (use_pos) {
		pthread_mutex_lock(&v->lock);
		if (wr && (v->flags & O_APPEND))
			v->pos = ckc_handle_size(v->h);
		off = (off_t)v->pos;
	}
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len == 0)
			continue;
		ssize_t r = wr ? ckc_vfd_pwrite(v, iov[i].iov_base, iov[i].iov_len, off + total) :
				 ckc_vfd_pread(v, iov[i].iov_base, iov[i].iov_len, off + total);
		if (r < 0) {
			if (total == 0)
				total = r;
			break;
		}
		total += r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	if (use_pos) {
		if (total > 0)
			v->pos += (uint64_t)total;
		pthread_mutex_unlock(&v->lock);
	}
	return total;
}

/* ---- open and close ------------------------------------------------- */

static int real_stat_path(const char *p, struct stat *st)
{
	int (*rs)(const char *, struct stat *) = REAL(stat);
	return rs ? rs(p, st) : -1;
}

static int real_access(const char *p, int mode)
{
	int (*ra)(const char *, int) = REAL(access);
	return ra ? ra(p, mode) : 0;
}

static int install_new(ckc_handle_t *h, int flags, const char *canon)
{
	int fd = ckc_placeholder(flags);
	if (fd < 0) {
		ckc_close(h);
		return fd;
	}
	if (fd == 1 || fd == 2) {
		/* standard output or error: the C library's stdio writes there
		 * with calls the library never sees, so the file is used
		 * directly (what the cache holds of it goes there first) */
		REAL(close)(fd);
		int rc = ckc_handoff(h);
		ckc_close(h);
		return rc && rc != -ESTALE ? rc : CKC_PASS;
	}
	ckc_vfd_t *v = ckc_vfd_new(h, flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC), canon);
	int rc = v ? ckc_vfd_install(fd, v) : -ENOMEM;
	if (rc) {
		REAL(close)(fd);
		ckc_close(h);
		free(v);
		if (rc == -EMFILE)
			ckc_warn("descriptor %d is beyond the table of tagged descriptors: %s is not cached",
				 fd, canon);
		return rc == -EMFILE ? CKC_PASS : rc;
	}
	return fd;
}

/* The open logic for a tagged path: returns an fd, -errno, or CKC_PASS. */
static int open_tagged(const char *canon, int flags, mode_t mode)
{
	int acc = flags & O_ACCMODE;
	ckc_stat_t cst;
	struct stat rst;
	ckc_handle_t *h;

	if ((flags & (O_PATH | O_DIRECTORY)) || (flags & O_TMPFILE) == O_TMPFILE)
		return CKC_PASS;
	bool cached = ckc_stat(canon, &cst) == 0;
	if (cached && !cst.complete) {
		/* this process has the file open for writing: every descriptor
		 * of a file shares one state, so the written bytes go to the
		 * real file, the open descriptors with them, and so does this
		 * open (O_TRUNC truncates the shared file, reads see writes) */
		int rc = ckc_handoff_path(canon);
		if (rc && rc != -ENOENT) {
			ckc_error("checkpoint %s is open for writing and opened again: its bytes so far "
				  "could not be written to its real path (%s)", canon, strerror(-rc));
			return rc;
		}
		ckc_vfd_switch_path(canon);
		return CKC_PASS;
	}
	/* a read of a checkpoint the cache holds is answered from the cache
	 * alone: the real file is older (or not there yet) */
	bool rd = acc == O_RDONLY && !(flags & O_TRUNC);
	bool real = !(rd && cached) && real_stat_path(canon, &rst) == 0;
	if (real && !S_ISREG(rst.st_mode))
		return CKC_PASS;
	bool exists = cached || real;

	if ((flags & O_CREAT) && (flags & O_EXCL) && exists)
		return -EEXIST;
	if (rd) {
		if (!exists)
			return flags & O_CREAT ? CKC_PASS : -ENOENT;
		if (!cached && real_access(canon, R_OK) != 0)
			return -errno;
		int rc = ckc_open_read(canon, &h);
		if (rc == -ENOENT || rc == -ENODEV)
			return CKC_PASS;
		return rc ? rc : install_new(h, flags, canon);
	}
	/* A new version is cached when it replaces the file (O_TRUNC) or
	 * creates it exclusively. O_CREAT without either may be one of several
	 * processes writing parts of one shared file (MPI-IO, HDF5): the real
	 * file is used, never replaced (below). */
	if (acc != O_RDONLY && ((flags & O_TRUNC) || (!exists && (flags & O_EXCL)))) {
		char dir[PATH_MAX];
		if (!exists && !(flags & O_CREAT))
			return -ENOENT;
		/* fail now, as the real open would, not at flush time */
		if (ckc_path_dirname(canon, dir, sizeof(dir)) == 0 &&
		    real_access(dir, W_OK | X_OK) != 0)
			return -errno;
		if (real && real_access(canon, W_OK) != 0)
			return -errno;
		/* the cache publishes a new file by rename: that would replace
		 * a symbolic link and split a hard link, so such a checkpoint
		 * is written to the real file directly */
		struct stat lst;
		if (real && (rst.st_nlink > 1 ||
			     (REAL(lstat)(canon, &lst) == 0 && S_ISLNK(lst.st_mode)))) {
			if (cached)
				(void)ckc_hand_over_path(canon);
			return CKC_PASS;
		}
		/* an existing file keeps its mode when it is truncated */
		mode_t m = real ? rst.st_mode : cached ? cst.mode : mode;
		/* from now on this process can hold bytes others may ask for */
		ckc_writer_start();
		int rc = ckc_open_write(canon, m & 07777, &h);
		if (rc == -ENODEV)
			return CKC_PASS;
		return rc ? rc : install_new(h, flags, canon);
	}
	/* Any other write to an existing checkpoint works on the real file:
	 * make it current there, forget the cached copy, pass through. */
	if (cached) {
		int rc = ckc_hand_over_path(canon);
		if (rc) {
			ckc_error("checkpoint %s could not be written to its real path for an in-place "
				  "update (%s)", canon, strerror(-rc));
			return rc;
		}
	}
	return CKC_PASS;
}

int ckc_open_tagged(const char *canon, int flags, mode_t mode)
{
	if (!ckc_engine_ready())
		return CKC_PASS;
	ckc_enter();
	/* the cache's file creations and renames in the checkpoint folders
	 * wait meanwhile: the program's lookups there would wait for them */
	ckc_prog_begin();
	int fd = open_tagged(canon, flags, mode);
	ckc_prog_end();
	ckc_leave();
	return fd;
}

static int open_common(int dirfd, const char *path, int flags, mode_t mode)
{
	char canon[PATH_MAX];
	int saved = errno;

	if (ckc_tagged_asked(dirfd, path, canon)) {
		int fd = ckc_open_tagged(canon, flags, mode);
		if (fd != CKC_PASS)
			return (int)ckc_result(fd, saved);
	}
	int (*ro)(int, const char *, int, ...) = REAL(openat);
	if (!ro) {
		ckc_real_missing("openat");
		errno = ENOSYS;
		return -1;
	}
	int fd = ro(dirfd, path, flags, mode);
	if (fd >= 0 && (flags & O_NOFOLLOW) && ckc_tag_dirv_cap)
		ckc_tag_opened(dirfd, path, flags, fd);
	return fd;
}

static inline bool needs_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

#define OPEN_MODE(flags, mode)                  \
	do {                                    \
		if (needs_mode(flags)) {        \
			va_list ap;             \
			va_start(ap, flags);    \
			mode = va_arg(ap, int); \
			va_end(ap);             \
		}                               \
	} while (0)

CKC_EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	return open_common(AT_FDCWD, path, flags, mode);
}

CKC_EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	return open_common(AT_FDCWD, path, flags, mode);
}

CKC_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	return open_common(dirfd, path, flags, mode);
}

CKC_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	return open_common(dirfd, path, flags, mode);
}

CKC_EXPORT int creat(const char *path, mode_t mode)
{
	return open_common(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

CKC_EXPORT int creat64(const char *path, mode_t mode)
{
	return open_common(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

/* The _FORTIFY_SOURCE entry points (open without a mode argument). */
CKC_EXPORT int __open_2(const char *path, int flags)
{
	return open_common(AT_FDCWD, path, flags, 0);
}

CKC_EXPORT int __open64_2(const char *path, int flags)
{
	return open_common(AT_FDCWD, path, flags, 0);
}

CKC_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	return open_common(dirfd, path, flags, 0);
}

CKC_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	return open_common(dirfd, path, flags, 0);
}

int ckc_close_fd(int fd)
{
	if (ckc_in_vfork_child())
		return REAL(close)(fd);
	ckc_vfd_t *v = ckc_vfd_take(fd);
	int (*rc_close)(int) = REAL(close);
	int saved = errno;
	int rc = rc_close ? rc_close(fd) : 0;
	if (!v)
		return rc;
	int e = ckc_vfd_put(v);
	return (int)ckc_result(e < 0 ? e : rc < 0 ? -errno : 0, saved);
}

CKC_EXPORT int close(int fd)
{
	ckc_tag_forget_fd(fd);
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1))
		return REAL(close)(fd);
	return ckc_close_fd(fd);
}

CKC_EXPORT int chdir(const char *path)
{
	ckc_tag_cwd_changed();
	return REAL(chdir)(path);
}

CKC_EXPORT int fchdir(int fd)
{
	ckc_tag_cwd_changed();
	return REAL(fchdir)(fd);
}

/* The directory stream's descriptor is closed inside the C library. */
CKC_EXPORT int closedir(DIR *d)
{
	ckc_tag_forget_fd(dirfd(d));
	return REAL(closedir)(d);
}

/* Drops the virtual descriptors of [first, last] (the real call closes the
 * placeholders). */
static void vfd_close_range(unsigned first, unsigned last)
{
	for (unsigned fd = first; fd < ckc_tag_dirv_cap && fd <= last; fd++)
		ckc_tag_forget_fd((int)fd);
	if (ckc_vfd_cap == 0 || first >= ckc_vfd_cap || ckc_in_vfork_child())
		return;
	if (last >= ckc_vfd_cap)
		last = (unsigned)ckc_vfd_cap - 1;
	for (unsigned fd = first; fd <= last; fd++)
		if (atomic_load_explicit(&ckc_vfd_tab[fd], memory_order_relaxed)) {
			ckc_vfd_t *v = ckc_vfd_take((int)fd);
			if (v)
				ckc_vfd_put(v);
		}
}

CKC_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	int (*rc_range)(unsigned, unsigned, int) = REAL(close_range);
	if (!rc_range) {
		errno = ENOSYS;
		return -1;
	}
	int rc = rc_range(first, last, flags);
	/* CLOSE_RANGE_CLOEXEC only marks them; the program still has them */
	if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
		vfd_close_range(first, last);
	return rc;
}

CKC_EXPORT void closefrom(int lowfd)
{
	void (*rc_from)(int) = REAL(closefrom);
	if (rc_from)
		rc_from(lowfd);
	if (lowfd >= 0)
		vfd_close_range((unsigned)lowfd, ~0u);
}

/* ---- data ------------------------------------------------------------ */

/* The tagged halves of the hottest calls, out of line: the untagged path,
 * which all of a program's other I/O takes, stays a table load and a jump
 * to libc. A number whose placeholder is gone is passed to libc too. */
static __attribute__((noinline)) ssize_t read_tagged(int fd, void *buf, size_t n)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(read)(fd, buf, n);
	int saved = errno;
	long r = ckc_vfd_read(v, buf, n);
	if (handed_over(&r, v))
		return REAL(read)(fd, buf, n);
	return ckc_result(r, saved);
}

static __attribute__((noinline)) ssize_t write_tagged(int fd, const void *buf, size_t n)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(write)(fd, buf, n);
	int saved = errno;
	long r = ckc_vfd_write(v, buf, n);
	if (handed_over(&r, v))
		return REAL(write)(fd, buf, n);
	return ckc_result(r, saved);
}

static __attribute__((noinline)) ssize_t pread_tagged(int fd, void *buf, size_t n, off_t off,
						      ssize_t (*real)(int, void *, size_t, off_t))
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return real(fd, buf, n, off);
	int saved = errno;
	long r = ckc_vfd_pread(v, buf, n, off);
	if (handed_over(&r, v))
		return real(fd, buf, n, off);
	return ckc_result(r, saved);
}

static __attribute__((noinline)) ssize_t pwrite_tagged(int fd, const void *buf, size_t n, off_t off,
						       ssize_t (*real)(int, const void *, size_t, off_t))
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return real(fd, buf, n, off);
	int saved = errno;
	long r = ckc_vfd_pwrite(v, buf, n, off);
	if (handed_over(&r, v))
		return real(fd, buf, n, off);
	return ckc_result(r, saved);
}

CKC_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1)) {
		ckc_owed_touch(buf, n);
		return REAL(read)(fd, buf, n);
	}
	return read_tagged(fd, buf, n);
}

CKC_EXPORT ssize_t write(int fd, const void *buf, size_t n)
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

CKC_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v) {
		ckc_owed_touch_iov(iov, cnt);
		return REAL(readv)(fd, iov, cnt);
	}
	int saved = errno;
	long r = vfd_iov(v, iov, cnt, 0, true, false);
	if (handed_over(&r, v))
		return REAL(readv)(fd, iov, cnt);
	return ckc_result(r, saved);
}

CKC_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v) {
		ckc_owed_touch_iov(iov, cnt);
		return REAL(writev)(fd, iov, cnt);
	}
	int saved = errno;
	long r = vfd_iov(v, iov, cnt, 0, true, true);
	if (handed_over(&r, v))
		return REAL(writev)(fd, iov, cnt);
	return ckc_result(r, saved);
}

#define VFD_IOV_WRAPPER(name, wr)                                                          \
	CKC_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, off_t off)      \
	{                                                                                  \
		ckc_vfd_t *v = ckc_vfd_get(fd);                                            \
		if (!v) {                                                                  \
			ckc_owed_touch_iov(iov, cnt);                                      \
			return REAL(name)(fd, iov, cnt, off);                              \
		}                                                                          \
		int saved = errno;                                                         \
		long r = vfd_iov(v, iov, cnt, off, false, wr);                             \
		if (handed_over(&r, v))                                                    \
			return REAL(name)(fd, iov, cnt, off);                              \
		return ckc_result(r, saved);                                               \
	}

VFD_IOV_WRAPPER(preadv, false)
VFD_IOV_WRAPPER(preadv64, false)
VFD_IOV_WRAPPER(pwritev, true)
VFD_IOV_WRAPPER(pwritev64, true)

/* preadv2/pwritev2: offset -1 means the current position; flags are hints
 * (RWF_HIPRI, RWF_DSYNC...) that the cache satisfies or ignores, except
 * RWF_DSYNC/RWF_SYNC, which sync like fdatasync. */
#define VFD_IOV2_WRAPPER(name, wr)                                                         \
	CKC_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, off_t off,      \
				int flags)                                                 \
	{                                                                                  \
		ckc_vfd_t *v = ckc_vfd_get(fd);                                            \
		if (!v)                                                                    \
			return REAL(name)(fd, iov, cnt, off, flags);                       \
		int saved = errno;                                                         \
		long r = vfd_iov(v, iov, cnt, off, off == -1, wr);                         \
		if (handed_over(&r, v))                                                    \
			return REAL(name)(fd, iov, cnt, off, flags);                       \
		if (r > 0 && wr && (flags & (RWF_DSYNC | RWF_SYNC))) {                     \
			ckc_enter();                                                       \
			int s = ckc_sync(v->h);                                            \
			ckc_leave();                                                       \
			if (s < 0)                                                         \
				r = s;                                                     \
		}                                                                          \
		return ckc_result(r, saved);                                                   \
	}

VFD_IOV2_WRAPPER(preadv2, false)
VFD_IOV2_WRAPPER(preadv64v2, false)
VFD_IOV2_WRAPPER(pwritev2, true)
VFD_IOV2_WRAPPER(pwritev64v2, true)

CKC_EXPORT off_t lseek(int fd, off_t off, int whence)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(lseek)(fd, off, whence);
	int saved = errno;
	return ckc_result(ckc_vfd_lseek(v, off, whence), saved);
}

CKC_EXPORT off_t lseek64(int fd, off_t off, int whence)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(lseek64)(fd, off, whence);
	int saved = errno;
	return ckc_result(ckc_vfd_lseek(v, off, whence), saved);
}

/* ---- durability and size --------------------------------------------- */

static int vfd_sync(ckc_vfd_t *v)
{
	int rc = vfd_usable(v);
	if (rc)
		return rc;
	ckc_enter();
	rc = ckc_sync(v->h);
	ckc_leave();
	return rc;
}

CKC_EXPORT int fsync(int fd)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(fsync)(fd);
	int saved = errno;
	long r = vfd_sync(v);
	if (handed_over(&r, v))
		return REAL(fsync)(fd);
	return (int)ckc_result(r, saved);
}

CKC_EXPORT int fdatasync(int fd)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(fdatasync)(fd);
	int saved = errno;
	long r = vfd_sync(v);
	if (handed_over(&r, v))
		return REAL(fdatasync)(fd);
	return (int)ckc_result(r, saved);
}

static int vfd_truncate(ckc_vfd_t *v, off_t len)
{
	int rc = vfd_usable(v);
	if (rc)
		return rc;
	if (len < 0)
		return -EINVAL;
	if ((v->flags & O_ACCMODE) == O_RDONLY)
		return -EINVAL;
	ckc_enter();
	rc = ckc_ftruncate(v->h, (uint64_t)len);
	ckc_leave();
	return rc;
}

CKC_EXPORT int ftruncate(int fd, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(ftruncate)(fd, len);
	int saved = errno;
	long r = vfd_truncate(v, len);
	if (handed_over(&r, v))
		return REAL(ftruncate)(fd, len);
	return (int)ckc_result(r, saved);
}

CKC_EXPORT int ftruncate64(int fd, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(ftruncate64)(fd, len);
	int saved = errno;
	long r = vfd_truncate(v, len);
	if (handed_over(&r, v))
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
	return real(path, len);
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
CKC_EXPORT int posix_fadvise(int fd, off_t off, off_t len, int advice)
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

/* Space reservation: a checkpoint's space is the cache's business; a
 * reservation past the end makes the file that long, as on a real file. */
static int vfd_allocate(ckc_vfd_t *v, int mode, off_t off, off_t len)
{
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return -EOPNOTSUPP;
	if ((v->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	uint64_t end = (uint64_t)off + (uint64_t)len;
	if ((mode & FALLOC_FL_KEEP_SIZE) || end <= ckc_handle_size(v->h))
		return 0;
	return vfd_truncate(v, (off_t)end);
}

CKC_EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(fallocate)(fd, mode, off, len);
	int saved = errno;
	long r = vfd_allocate(v, mode, off, len);
	if (handed_over(&r, v))
		return REAL(fallocate)(fd, mode, off, len);
	return (int)ckc_result(r, saved);
}

CKC_EXPORT int fallocate64(int fd, int mode, off_t off, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(fallocate64)(fd, mode, off, len);
	int saved = errno;
	long r = vfd_allocate(v, mode, off, len);
	if (handed_over(&r, v))
		return REAL(fallocate64)(fd, mode, off, len);
	return (int)ckc_result(r, saved);
}

/* posix_fallocate returns the error number instead of setting errno. */
CKC_EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(posix_fallocate)(fd, off, len);
	long r = vfd_allocate(v, 0, off, len);
	if (handed_over(&r, v))
		return REAL(posix_fallocate)(fd, off, len);
	return (int)-r;
}

CKC_EXPORT int posix_fallocate64(int fd, off_t off, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(posix_fallocate64)(fd, off, len);
	long r = vfd_allocate(v, 0, off, len);
	if (handed_over(&r, v))
		return REAL(posix_fallocate64)(fd, off, len);
	return (int)-r;
}

/* ---- descriptors ------------------------------------------------------ */

/* After a real dup onto newfd: newfd shares oldfd's virtual descriptor (or
 * loses the one it had: dup2 closed it). */
static int dup_fixup(int oldfd, int newfd)
{
	ckc_vfd_t *v = ckc_vfd_get(oldfd);

	if (newfd < 0)
		return newfd;
	if (oldfd == newfd)
		return newfd;
	if (v) {
		int saved = errno;
		if (ckc_vfd_install(newfd, v) != 0) {
			/* cannot track the copy: it must not be a usable alias */
			REAL(close)(newfd);
			errno = EMFILE;
			return -1;
		}
		/* standard output or error (a shell's "echo >file", a program
		 * redirecting its stdout): the C library's stdio writes there
		 * with calls the library never sees, so the file goes to its
		 * real path and every descriptor of it is a real one from now on */
		if (newfd == 1 || newfd == 2) {
			int rc = vfd_usable(v);
			if (!rc)
				rc = ckc_vfd_demote(v);
			if (rc)
				ckc_error("checkpoint %s on standard descriptor %d: it cannot be made a "
					  "real file (%s); the C library's stdio fails there", v->path,
					  newfd, strerror(-rc));
		}
		errno = saved;
	} else {
		ckc_vfd_t *old = ckc_vfd_take(newfd);
		if (old)
			ckc_vfd_put(old);
	}
	return newfd;
}

CKC_EXPORT int dup(int fd)
{
	if (!ckc_vfd_get(fd))
		return ckc_tag_dup(fd, REAL(dup)(fd));
	return dup_fixup(fd, REAL(dup)(fd));
}

CKC_EXPORT int dup2(int oldfd, int newfd)
{
	if (oldfd != newfd)
		ckc_tag_forget_fd(newfd);
	if (!ckc_vfd_get(oldfd) && !ckc_vfd_get(newfd))
		return ckc_tag_dup(oldfd, REAL(dup2)(oldfd, newfd));
	return dup_fixup(oldfd, REAL(dup2)(oldfd, newfd));
}

CKC_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (oldfd != newfd)
		ckc_tag_forget_fd(newfd);
	if (!ckc_vfd_get(oldfd) && !ckc_vfd_get(newfd))
		return ckc_tag_dup(oldfd, REAL(dup3)(oldfd, newfd, flags));
	return dup_fixup(oldfd, REAL(dup3)(oldfd, newfd, flags));
}

static int fcntl_common(int (*rf)(int, int, ...), int fd, int cmd, unsigned long arg)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);

	if (!rf) {
		errno = ENOSYS;
		return -1;
	}
	if (!v) {
		int r = rf(fd, cmd, arg);
		return cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC ? ckc_tag_dup(fd, r) : r;
	}
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return dup_fixup(fd, rf(fd, cmd, arg));
	case F_GETFL:
		return v->flags;
	case F_SETFL: {
		/* only the status flags may change, as for a real file */
		int keep = O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_ASYNC;
		v->flags = (v->flags & ~keep) | ((int)arg & keep);
		return 0;
	}
	default: {
		int saved = errno, r = ckc_lock_fcntl(v, cmd, arg);
		if (r != CKC_PASS)
			return (int)ckc_result(r, saved);
		/* F_GETFD/F_SETFD act on the placeholder as they should; the
		 * rest fail there (EBADF) */
		return rf(fd, cmd, arg);
	}
	}
}

CKC_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl_common(REAL(fcntl), fd, cmd, arg);
}

CKC_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl_common(REAL(fcntl64), fd, cmd, arg);
}

/* ---- names ------------------------------------------------------------ */

/* A cached checkpoint can be read and written, not executed. */
static int access_cached(int mode)
{
	if (mode & X_OK) {
		errno = EACCES;
		return -1;
	}
	return 0;
}

CKC_EXPORT int access(const char *path, int mode)
{
	char canon[PATH_MAX];
	if (ckc_cached_at(AT_FDCWD, path, canon))
		return access_cached(mode);
	return REAL(access)(path, mode);
}

CKC_EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	char canon[PATH_MAX];
	if (ckc_cached_at(dirfd, path, canon))
		return access_cached(mode);
	return REAL(faccessat)(dirfd, path, mode, flags);
}

static int unlink_tagged(const char *canon)
{
	int saved = errno;
	ckc_enter();
	int rc = ckc_unlink(canon);
	ckc_leave();
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int unlink(const char *path)
{
	char canon[PATH_MAX];
	if (ckc_tagged_asked(AT_FDCWD, path, canon))
		return unlink_tagged(canon);
	return REAL(unlink)(path);
}

CKC_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	char canon[PATH_MAX];
	if (!(flags & AT_REMOVEDIR) && ckc_tagged_asked(dirfd, path, canon))
		return unlink_tagged(canon);
	return REAL(unlinkat)(dirfd, path, flags);
}

/* Whether the cache holds a version of canon now. */
static bool cached_now(const char *canon)
{
	ckc_stat_t st;
	ckc_enter();
	bool cached = ckc_stat(canon, &st) == 0;
	ckc_leave();
	return cached;
}

CKC_EXPORT int remove(const char *path)
{
	char canon[PATH_MAX];
	if (ckc_tagged_asked(AT_FDCWD, path, canon) && cached_now(canon))
		return unlink_tagged(canon);
	return REAL(remove)(path);
}

/* What the kernel would say about renaming within the cache: both folders
 * must exist and be writable, or the rename fails as the real one would
 * (and no flush is left to fail later into a rescue file). */
static int rename_dirs_ok(const char *cf, const char *ct)
{
	char dir[PATH_MAX];
	const char *ends[] = { cf, ct };

	for (int i = 0; i < 2; i++)
		if (ckc_path_dirname(ends[i], dir, sizeof(dir)) == 0 &&
		    real_access(dir, W_OK | X_OK) != 0)
			return -errno;
	return 0;
}

/* rename for any pair of directory descriptors; real() does the real call */
static int rename_common(int fd1, const char *from, int fd2, const char *to, unsigned flags,
			 int (*real)(int, const char *, int, const char *, unsigned))
{
	char cf[PATH_MAX], ct[PATH_MAX];
	ckc_stat_t st;
	int saved = errno;
	bool tf = ckc_tagged_asked(fd1, from, cf);
	bool tt = ckc_tagged_asked(fd2, to, ct);
	struct stat ds;

	/* a directory (tagged or not) may hold cached checkpoints: they go to
	 * their real files before the directory moves */
	if (atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) && !ckc_io_guard &&
	    !ckc_in_vfork_child() &&
	    REAL(fstatat)(fd1, from, &ds, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(ds.st_mode) &&
	    ckc_path_resolve(from, NULL, cf, sizeof(cf)) == 0) {
		char base[PATH_MAX];
		if (fd1 != AT_FDCWD && from[0] != '/') {
			char link[64];
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd1);
			ssize_t n = readlink(link, base, sizeof(base) - 1);
			if (n > 0) {
				base[n] = '\0';
				ckc_path_resolve(from, base, cf, sizeof(cf));
			}
		}
		ckc_enter();
		int rc = ckc_handover_dir(cf);
		ckc_leave();
		if (rc)
			return (int)ckc_result(rc, saved);
		return real(fd1, from, fd2, to, flags);
	}

	if (tf || tt) {
		ckc_enter();
		bool cached = tf && ckc_stat(cf, &st) == 0;
		bool dest_cached = tt && ckc_stat(ct, &st) == 0;
		int rc = 0;
		if (cached && tt && !(flags & RENAME_EXCHANGE)) {
			struct stat rst;
			if ((flags & RENAME_NOREPLACE) && (dest_cached || real_stat_path(ct, &rst) == 0))
				rc = -EEXIST;
			else if ((rc = rename_dirs_ok(cf, ct)) == 0)
				rc = ckc_rename(cf, ct);
			ckc_leave();
			return (int)ckc_result(rc, saved);
		}
		/* the real files take over: publish what the cache holds */
		ckc_leave();
		if (cached)
			rc = ckc_hand_over_path(cf);
		ckc_enter();
		if (!rc && dest_cached) {
			rc = (flags & RENAME_EXCHANGE) ? ckc_materialize(ct) : 0;
			if (!rc)
				ckc_forget(ct);
		}
		ckc_leave();
		if (rc)
			return (int)ckc_result(rc, saved);
	}
	return real(fd1, from, fd2, to, flags);
}

static int real_rename2(int fd1, const char *from, int fd2, const char *to, unsigned flags)
{
	if (flags == 0 && fd1 == AT_FDCWD && fd2 == AT_FDCWD)
		return REAL(rename)(from, to);
	if (flags == 0)
		return REAL(renameat)(fd1, from, fd2, to);
	int (*r2)(int, const char *, int, const char *, unsigned) = REAL(renameat2);
	if (!r2) {
		errno = ENOSYS;
		return -1;
	}
	return r2(fd1, from, fd2, to, flags);
}

CKC_EXPORT int rename(const char *from, const char *to)
{
	return rename_common(AT_FDCWD, from, AT_FDCWD, to, 0, real_rename2);
}

CKC_EXPORT int renameat(int fd1, const char *from, int fd2, const char *to)
{
	return rename_common(fd1, from, fd2, to, 0, real_rename2);
}

CKC_EXPORT int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned int flags)
{
	return rename_common(fd1, from, fd2, to, flags, real_rename2);
}

/* A hard link names the real file: a cached checkpoint goes there first
 * (and is forgotten: a file with two names is written directly from then
 * on), so the new name holds the current bytes. A cached checkpoint at the
 * new name exists for the program: EEXIST, as the kernel would say. */
static int link_common(int fd1, const char *from, int fd2, const char *to, int flags, bool at)
{
	char cf[PATH_MAX], ct[PATH_MAX];
	int saved = errno;

	if (ckc_tagged_asked(fd2, to, ct) && cached_now(ct))
		return (int)ckc_result(-EEXIST, saved);
	if (ckc_tagged_asked(fd1, from, cf)) {
		int rc = ckc_hand_over_path(cf);
		if (rc)
			return (int)ckc_result(rc, saved);
	}
	return at ? REAL(linkat)(fd1, from, fd2, to, flags) : REAL(link)(from, to);
}

CKC_EXPORT int link(const char *from, const char *to)
{
	return link_common(AT_FDCWD, from, AT_FDCWD, to, 0, false);
}

CKC_EXPORT int linkat(int fd1, const char *from, int fd2, const char *to, int flags)
{
	return link_common(fd1, from, fd2, to, flags, true);
}

/* ---- mapping and copying --------------------------------------------- */

/* Turns tagged fd, and every other descriptor of its file, into a real
 * descriptor of the real file, which gets the bytes first: for calls the
 * cache cannot serve (mmap). */
static int degrade(int fd)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	int saved = errno;
	if (!v)
		return 0;
	int rc = vfd_usable(v);
	if (!rc)
		rc = ckc_vfd_demote(v);
	if (rc == -ESTALE) {
		/* the real file holds a newer version than this descriptor reads */
		ckc_error("checkpoint %s: a descriptor of a version replaced since cannot be "
			  "mapped", v->path);
		rc = -ENODEV;
	}
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (!(flags & MAP_ANONYMOUS) && ckc_vfd_get(fd) && degrade(fd) != 0)
		return MAP_FAILED;
	return REAL(mmap)(addr, len, prot, flags, fd, off);
}

CKC_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (!(flags & MAP_ANONYMOUS) && ckc_vfd_get(fd) && degrade(fd) != 0)
		return MAP_FAILED;
	return REAL(mmap64)(addr, len, prot, flags, fd, off);
}

/* A copy out of a tagged checkpoint that only its real file holds, into an
 * untagged descriptor: the kernel's own copy call on the real file (no copy
 * through user memory, as without the library). Returns the bytes copied,
 * -errno, or CKC_PASS when the copy must go through the cache. */
static ssize_t copy_from_home(ckc_vfd_t *v, off_t *inoff, int out, off_t *outoff, size_t count,
			      ssize_t (*real)(int, off_t *, int, off_t *, size_t))
{
	if (vfd_usable(v) || (v->flags & O_ACCMODE) == O_WRONLY)
		return CKC_PASS;
	ckc_enter();
	int fd = ckc_handle_home_fd(v->h);
	ckc_leave();
	if (fd < 0)
		return CKC_PASS;
	if (!inoff)
		pthread_mutex_lock(&v->lock);
	off_t off = inoff ? *inoff : (off_t)v->pos, start = off;
	ssize_t n = real(fd, &off, out, outoff, count);
	int e = errno;
	if (n > 0) {
		if (inoff)
			*inoff = off;
		else
			v->pos = (uint64_t)off;
		ckc_enter();
		ckc_handle_note_read(v->h, (uint64_t)start, (uint64_t)n);
		ckc_leave();
	}
	if (!inoff)
		pthread_mutex_unlock(&v->lock);
	return n < 0 ? -e : n;
}

static ssize_t real_cfr(int in, off_t *inoff, int out, off_t *outoff, size_t count)
{
	return REAL(copy_file_range)(in, inoff, out, outoff, count, 0);
}

static ssize_t real_sendfile(int in, off_t *inoff, int out, off_t *outoff, size_t count)
{
	(void)outoff; /* sendfile writes at out's position */
	return REAL(sendfile64)(out, in, inoff, count);
}

/* Copies count bytes from in to out through a buffer, with each side's
 * offset pointer (NULL: the descriptor's position), as the wrappers would. */
static ssize_t copy_emulated(int in, off_t *inoff, int out, off_t *outoff, size_t count)
{
	size_t bufsz = count < (1u << 20) ? (count ? count : 1) : (1u << 20);
	char *buf = malloc(bufsz);
	ssize_t total = 0;

	if (!buf)
		return -ENOMEM;
	while ((size_t)total < count) {
		size_t want = count - (size_t)total < bufsz ? count - (size_t)total : bufsz;
		ssize_t n = inoff ? pread(in, buf, want, *inoff) : read(in, buf, want);
		if (n < 0) {
			if (total == 0)
				total = -errno;
			break;
		}
		if (n == 0)
			break;
		ssize_t done = 0;
		while (done < n) {
			ssize_t w = outoff ? pwrite(out, buf + done, (size_t)(n - done), *outoff + done) :
					     write(out, buf + done, (size_t)(n - done));
			if (w <= 0) {
				free(buf);
				if (inoff)
					*inoff += done;
				if (outoff)
					*outoff += done;
				return total + done > 0 ? total + done : (w < 0 ? -errno : -EIO);
			}
			done += w;
		}
		if (inoff)
			*inoff += n;
		if (outoff)
			*outoff += n;
		total += n;
		if ((size_t)n < want)
			break;
	}
	free(buf);
	return total;
}

/* A copy call with a tagged side. Into a checkpoint from an untagged file
 * (cp's copy_file_range): the kernel copies into a file in one pass, where
 * the cache would take the bytes through user memory and write them again
 * at the end, so the checkpoint becomes its real file (handed over, its
 * bytes so far published) and the real call runs. Out of a checkpoint only
 * its real file holds, into an untagged descriptor: the real call on that
 * file. Anything else goes through the cache. */
static ssize_t copy_tagged(int in, off_t *inoff, int out, off_t *outoff, size_t count,
			   ssize_t (*real)(int, off_t *, int, off_t *, size_t))
{
	ckc_vfd_t *vin = ckc_vfd_get(in), *vout = ckc_vfd_get(out);
	ssize_t n = CKC_PASS;
	if (vout && !vin && ckc_vfd_demote(vout) == 0 && !ckc_vfd_get(out)) {
		n = real(in, inoff, out, outoff, count);
		return n < 0 ? -errno : n;
	}
	if (vin && !vout)
		n = copy_from_home(vin, inoff, out, outoff, count, real);
	return n == CKC_PASS ? copy_emulated(in, inoff, out, outoff, count) : n;
}

CKC_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	if (!ckc_vfd_get(in) && !ckc_vfd_get(out))
		return REAL(sendfile)(out, in, off, count);
	int saved = errno;
	return ckc_result(copy_tagged(in, off, out, NULL, count, real_sendfile), saved);
}

CKC_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	if (!ckc_vfd_get(in) && !ckc_vfd_get(out))
		return REAL(sendfile64)(out, in, off, count);
	int saved = errno;
	return ckc_result(copy_tagged(in, off, out, NULL, count, real_sendfile), saved);
}

CKC_EXPORT ssize_t copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t count,
				   unsigned int flags)
{
	if (!ckc_vfd_get(in) && !ckc_vfd_get(out))
		return REAL(copy_file_range)(in, inoff, out, outoff, count, flags);
	int saved = errno;
	if (flags) {
		errno = EINVAL;
		return -1;
	}
	return ckc_result(copy_tagged(in, inoff, out, outoff, count, real_cfr), saved);
}

CKC_EXPORT ssize_t splice(int in, off_t *inoff, int out, off_t *outoff, size_t count,
			  unsigned int flags)
{
	if (!ckc_vfd_get(in) && !ckc_vfd_get(out))
		return REAL(splice)(in, inoff, out, outoff, count, flags);
	int saved = errno;
	return ckc_result(copy_emulated(in, inoff, out, outoff, count), saved);
}
