/* Attributes of tagged files: chmod, chown and the utime family, by path
 * and by descriptor. A cached checkpoint keeps them and its real file gets
 * them when it is published (at once if it is there already), so tar -x,
 * cp -p and friends work on checkpoints that have not reached the disk. */
#include "config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <utime.h>

#include "intercept.h"

/* Sets a on the cached checkpoint at path (relative to dirfd); -ENOENT if
 * it is not one (the caller then calls the real function). */
static int meta_path(int dirfd, const char *path, const ckc_attr_t *a)
{
	char canon[PATH_MAX];
	if (!ckc_cached_at(dirfd, path, canon, NULL))
		return -ENOENT;
	ckc_enter();
	int rc = ckc_setattr(canon, a);
	ckc_leave();
	return rc;
}

static int meta_fd(ckc_vfd_t *v, const ckc_attr_t *a)
{
	ckc_enter();
	int rc = ckc_handle_setattr(v->h, a);
	ckc_leave();
	return rc;
}

/* utimensat's times, resolved: NULL or UTIME_NOW is now, UTIME_OMIT keeps
 * the current value (st). */
static void meta_times(const struct timespec in[2], const ckc_stat_t *st, ckc_attr_t *a)
{
	struct timespec now;
	ckc_file_now(&now);
	a->mask = CKC_ATTR_TIMES;
	for (int i = 0; i < 2; i++) {
		if (!in || in[i].tv_nsec == UTIME_NOW)
			a->times[i] = now;
		else if (in[i].tv_nsec == UTIME_OMIT)
			a->times[i] = i ? st->mtime : st->atime;
		else
			a->times[i] = in[i];
	}
}

/* After the program set the times of a real path (rc: the real call's;
 * held: whether the cache held unpublished checkpoints before that call):
 * a folder's are put back after the publications into it that follow
 * (ckc_dir_times_note). dirfd and path name it, or fd does (path NULL).
 * (The look before the call: the last checkpoint owed to the folder may be
 * published between the call and this look, changing the folder's time,
 * and then none is held any more.) */
static int meta_dir_set(int rc, bool held, int dirfd, const char *path, int flags, const struct timespec *ts)
{
	/* (the access time alone: the modification time is not the program's) */
	if (rc != 0 || !(held || ckc_holds_unpublished()) || (ts && ts[1].tv_nsec == UTIME_OMIT))
		return rc;
	int saved = errno;
	struct stat st;
	char canon[PATH_MAX];
	bool got = path ? REAL(fstatat)(dirfd, path, &st, flags & AT_SYMLINK_NOFOLLOW) == 0 &&
				  S_ISDIR(st.st_mode) && ckc_path_at(dirfd, path, canon) == 0
			: REAL(fstat)(dirfd, &st) == 0 && S_ISDIR(st.st_mode) &&
				  ckc_fd_name(dirfd, canon, sizeof(canon)) > 0;
	if (got) {
		/* the time asked for: a publication may have changed the folder
		 * between the call and the look */
		if (ts && ts[1].tv_nsec != UTIME_NOW && ts[1].tv_nsec != UTIME_OMIT)
			st.st_mtim = ts[1];
		ckc_enter();
		ckc_dir_times_note(canon, &st);
		ckc_leave();
	}
	errno = saved;
	return rc;
}

static void meta_tv(const struct timeval tv[2], struct timespec ts[2])
{
	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = tv[i].tv_sec;
		ts[i].tv_nsec = tv[i].tv_usec * 1000;
	}
}

/* ---- modes ------------------------------------------------------------ */

CKC_EXPORT int fchmod(int fd, mode_t mode)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v) {
		ckc_dir_guarding(fd, "", (int)mode);
		return REAL(fchmod)(fd, mode);
	}
	ckc_attr_t a = { .mask = CKC_ATTR_MODE, .mode = mode };
	int saved = errno, rc = meta_fd(v, &a);
	ckc_vfd_put(v);
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
	ckc_attr_t a = { .mask = CKC_ATTR_MODE, .mode = mode };
	int saved = errno, rc = meta_path(dirfd, path, &a);
	if (rc == -ENOENT) {
		ckc_dir_guarding(dirfd, path, (int)mode);
		return ckc_enoent_checked(dirfd, path, REAL(fchmodat)(dirfd, path, mode, flags));
	}
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int chmod(const char *path, mode_t mode)
{
	ckc_attr_t a = { .mask = CKC_ATTR_MODE, .mode = mode };
	int saved = errno, rc = meta_path(AT_FDCWD, path, &a);
	if (rc == -ENOENT) {
		ckc_dir_guarding(AT_FDCWD, path, (int)mode);
		return ckc_enoent_checked(AT_FDCWD, path, REAL(chmod)(path, mode));
	}
	return (int)ckc_result(rc, saved);
}

/* ---- owners ----------------------------------------------------------- */

CKC_EXPORT int fchown(int fd, uid_t uid, gid_t gid)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v) {
		ckc_dir_guarding(fd, "", -1);
		return REAL(fchown)(fd, uid, gid);
	}
	ckc_attr_t a = { .mask = CKC_ATTR_OWNER, .uid = uid, .gid = gid };
	int saved = errno, rc = meta_fd(v, &a);
	ckc_vfd_put(v);
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	ckc_attr_t a = { .mask = CKC_ATTR_OWNER, .uid = uid, .gid = gid };
	int saved = errno, rc = meta_path(dirfd, path, &a);
	if (rc == -ENOENT) {
		ckc_dir_guarding(dirfd, path, -1);
		return ckc_enoent_checked(dirfd, path, REAL(fchownat)(dirfd, path, uid, gid, flags));
	}
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int chown(const char *path, uid_t uid, gid_t gid)
{
	ckc_attr_t a = { .mask = CKC_ATTR_OWNER, .uid = uid, .gid = gid };
	int saved = errno, rc = meta_path(AT_FDCWD, path, &a);
	if (rc == -ENOENT) {
		ckc_dir_guarding(AT_FDCWD, path, -1);
		return ckc_enoent_checked(AT_FDCWD, path, REAL(chown)(path, uid, gid));
	}
	return (int)ckc_result(rc, saved);
}

/* A cached checkpoint is never a symbolic link: lchown is chown. */
CKC_EXPORT int lchown(const char *path, uid_t uid, gid_t gid)
{
	ckc_attr_t a = { .mask = CKC_ATTR_OWNER, .uid = uid, .gid = gid };
	int saved = errno, rc = meta_path(AT_FDCWD, path, &a);
	if (rc == -ENOENT) {
		ckc_dir_guarding(AT_FDCWD, path, -1);
		return ckc_enoent_checked(AT_FDCWD, path, REAL(lchown)(path, uid, gid));
	}
	return (int)ckc_result(rc, saved);
}

/* ---- times ------------------------------------------------------------ */

static int times_fd(ckc_vfd_t *v, const struct timespec ts[2])
{
	ckc_stat_t st;
	ckc_attr_t a;
	ckc_vfd_stat_of(v, &st);
	meta_times(ts, &st, &a);
	return meta_fd(v, &a);
}

static int times_path(int dirfd, const char *path, const struct timespec ts[2])
{
	char canon[PATH_MAX];
	ckc_stat_t st;
	ckc_attr_t a;
	if (!ckc_cached_at(dirfd, path, canon, &st))
		return -ENOENT;
	meta_times(ts, &st, &a);
	ckc_enter();
	int rc = ckc_setattr(canon, &a);
	ckc_leave();
	return rc;
}

CKC_EXPORT int futimens(int fd, const struct timespec ts[2])
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v) {
		bool held = ckc_holds_unpublished();
		return meta_dir_set(REAL(futimens)(fd, ts), held, fd, NULL, 0, ts);
	}
	int saved = errno, rc = times_fd(v, ts);
	ckc_vfd_put(v);
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int utimensat(int dirfd, const char *path, const struct timespec ts[2], int flags)
{
	int saved = errno, rc;
	/* glibc declares path non-null, but the kernel takes NULL (the
	 * descriptor itself): keep the compiler from dropping the test */
	const char *volatile laundered = path;
	if (!laundered) {
		/* the descriptor itself, as futimens does, where the C library
		 * passes a null path on (recent glibc refuses it with EINVAL:
		 * a call on a descriptor that cannot exist tells which) */
		static int null_path = -1; /* 0: refused, 1: passed on */
		if (!ckc_vfd_get(dirfd))
			return REAL(utimensat)(dirfd, path, ts, flags);
		if (null_path < 0) {
			int r = REAL(utimensat)(-1, laundered, NULL, 0);
			null_path = !(r < 0 && errno == EINVAL);
		}
		if (!null_path)
			return (int)ckc_result(-EINVAL, saved);
		ckc_vfd_t *v = ckc_vfd_held(dirfd);
		if (!v)
			return (int)ckc_result(-EBADF, saved);
		rc = times_fd(v, ts);
		ckc_vfd_put(v);
		return (int)ckc_result(rc, saved);
	}
	bool held = ckc_holds_unpublished();
	rc = times_path(dirfd, path, ts);
	if (rc == -ENOENT)
		return ckc_enoent_checked(dirfd, path, meta_dir_set(REAL(utimensat)(dirfd, path, ts, flags), held,
								 dirfd, path, flags, ts));
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int futimes(int fd, const struct timeval tv[2])
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(futimes)(fd, tv);
	struct timespec ts[2];
	if (tv)
		meta_tv(tv, ts);
	int saved = errno, rc = times_fd(v, tv ? ts : NULL);
	ckc_vfd_put(v);
	return (int)ckc_result(rc, saved);
}

static int utimes_common(const char *path, const struct timeval tv[2],
			 int (*real)(const char *, const struct timeval *))
{
	struct timespec ts[2];
	int saved = errno;
	if (tv)
		meta_tv(tv, ts);
	bool held = ckc_holds_unpublished();
	int rc = times_path(AT_FDCWD, path, tv ? ts : NULL);
	if (rc == -ENOENT)
		return ckc_enoent_checked(AT_FDCWD, path,
					  meta_dir_set(real(path, tv), held, AT_FDCWD, path,
						       real == REAL(lutimes) ? AT_SYMLINK_NOFOLLOW : 0, tv ? ts : NULL));
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int utimes(const char *path, const struct timeval tv[2])
{
	return utimes_common(path, tv, REAL(utimes));
}

CKC_EXPORT int lutimes(const char *path, const struct timeval tv[2])
{
	return utimes_common(path, tv, REAL(lutimes));
}

CKC_EXPORT int utime(const char *path, const struct utimbuf *b)
{
	struct timespec ts[2];
	int saved = errno;
	if (b) {
		ts[0].tv_sec = b->actime;
		ts[1].tv_sec = b->modtime;
		ts[0].tv_nsec = ts[1].tv_nsec = 0;
	}
	bool held = ckc_holds_unpublished();
	int rc = times_path(AT_FDCWD, path, b ? ts : NULL);
	if (rc == -ENOENT)
		return ckc_enoent_checked(AT_FDCWD, path,
					  meta_dir_set(REAL(utime)(path, b), held, AT_FDCWD, path, 0, b ? ts : NULL));
	return (int)ckc_result(rc, saved);
}

/* ---- extended attributes and ACLs --------------------------------------- */

/* A cached checkpoint has none and takes none: ENOTSUP, which tools such as
 * cp -p and tar treat as "this file system has no ACLs" and fall back to
 * the mode bits. */
CKC_WARM_PATH static bool meta_cached(const char *path, bool follow)
{
	char canon[PATH_MAX];
	ckc_stat_t st;
	bool c = follow ? ckc_cached_follow(AT_FDCWD, path, canon, &st) : ckc_cached_at(AT_FDCWD, path, canon, &st);
	/* a version at its real path: that file's attributes are its own */
	return c && !st.at_home;
}

CKC_EXPORT int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags)
{
	if (!ckc_vfd_get(fd))
		return REAL(fsetxattr)(fd, name, value, size, flags);
	errno = ENOTSUP;
	return -1;
}

CKC_EXPORT ssize_t fgetxattr(int fd, const char *name, void *value, size_t size)
{
	if (!ckc_vfd_get(fd))
		return REAL(fgetxattr)(fd, name, value, size);
	errno = ENOTSUP;
	return -1;
}

CKC_EXPORT ssize_t flistxattr(int fd, char *list, size_t size)
{
	if (!ckc_vfd_get(fd))
		return REAL(flistxattr)(fd, list, size);
	return 0; /* no attributes */
}

CKC_EXPORT int fremovexattr(int fd, const char *name)
{
	if (!ckc_vfd_get(fd))
		return REAL(fremovexattr)(fd, name);
	errno = ENODATA; /* it has none to remove */
	return -1;
}

CKC_EXPORT int setxattr(const char *path, const char *name, const void *value, size_t size, int flags)
{
	if (!meta_cached(path, true))
		return ckc_enoent_checked(AT_FDCWD, path, REAL(setxattr)(path, name, value, size, flags));
	errno = ENOTSUP;
	return -1;
}

CKC_EXPORT int lsetxattr(const char *path, const char *name, const void *value, size_t size, int flags)
{
	if (!meta_cached(path, false))
		return ckc_enoent_checked(AT_FDCWD, path, REAL(lsetxattr)(path, name, value, size, flags));
	errno = ENOTSUP;
	return -1;
}

CKC_WARM_PATH CKC_EXPORT ssize_t getxattr(const char *path, const char *name, void *value, size_t size)
{
	if (!meta_cached(path, true))
		return ckc_enoent_checked_l(AT_FDCWD, path, REAL(getxattr)(path, name, value, size));
	errno = ENOTSUP;
	return -1;
}

CKC_WARM_PATH CKC_EXPORT ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size)
{
	if (!meta_cached(path, false))
		return ckc_enoent_checked_l(AT_FDCWD, path, REAL(lgetxattr)(path, name, value, size));
	errno = ENOTSUP;
	return -1;
}

/* (shutil.copy2 lists a file's attributes to copy them) */
CKC_EXPORT ssize_t listxattr(const char *path, char *list, size_t size)
{
	if (!meta_cached(path, true))
		return ckc_enoent_checked_l(AT_FDCWD, path, REAL(listxattr)(path, list, size));
	return 0; /* no attributes */
}

CKC_EXPORT ssize_t llistxattr(const char *path, char *list, size_t size)
{
	if (!meta_cached(path, false))
		return ckc_enoent_checked_l(AT_FDCWD, path, REAL(llistxattr)(path, list, size));
	return 0;
}

CKC_EXPORT int removexattr(const char *path, const char *name)
{
	if (!meta_cached(path, true))
		return ckc_enoent_checked(AT_FDCWD, path, REAL(removexattr)(path, name));
	errno = ENODATA; /* it has none to remove */
	return -1;
}

CKC_EXPORT int lremovexattr(const char *path, const char *name)
{
	if (!meta_cached(path, false))
		return ckc_enoent_checked(AT_FDCWD, path, REAL(lremovexattr)(path, name));
	errno = ENODATA; /* it has none to remove */
	return -1;
}
