/* File locks on tagged descriptors: flock(2), lockf(3) and the fcntl(2)
 * lock commands. A tagged descriptor is a placeholder on which the kernel
 * refuses locks (EBADF), so its locks are taken on a descriptor of the real
 * file, opened as the tagged one was: a process that opens the file
 * without the library, or with a descriptor the cache passes through,
 * locks the same inode. A checkpoint whose real file does not exist yet (a
 * new version not published) is locked through a lock file of its path, in
 * a 0700 folder of the user's under /dev/shm (else the library's private
 * folder), the same for every process of the user that runs with the
 * library. When the descriptor goes to the real file (a child, another
 * process that needs the file), the real file's locked descriptor becomes
 * the program's, so its locks stay with it. Byte ranges are kept; an
 * offset from the current position or the end is made absolute first. */
#include "config.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "intercept.h"
#include "log.h"
#include "state.h"

static ckc_mutex_t lockdir_mu = CKC_MUTEX_INIT(LOCKDIR);
CKC_LOCKS_AT_START(lockdir, ckc_locks_add, &lockdir_mu)

/* The folder of the lock files: created 0700, refused when it is not the
 * user's own folder. */
static int lock_dir(char *out, size_t len)
{
	static char dir[PATH_MAX];
	int rc = 0;
	ckc_mutex_lock(&lockdir_mu);
	if (!dir[0]) {
		char cand[PATH_MAX];
		struct stat st;
		snprintf(cand, sizeof(cand), "/dev/shm/ckptcache-%u.locks", (unsigned)getuid());
		if (mkdir(cand, 0700) != 0 && errno != EEXIST)
			cand[0] = '\0';
		if (cand[0] && (lstat(cand, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
				(st.st_mode & 077))) {
			static atomic_bool said;
			if (!atomic_exchange(&said, true))
				ckc_warn("%s is not a private folder of this user: file locks on checkpoints use "
					 "the library's own folder",
					 cand);
			cand[0] = '\0';
		}
		if (!cand[0] && ckc_state_dir())
			snprintf(cand, sizeof(cand), "%s", ckc_state_dir());
		if (cand[0])
			snprintf(dir, sizeof(dir), "%s", cand);
		else
			rc = -ENOLCK;
	}
	if (!rc)
		snprintf(out, len, "%s", dir);
	ckc_mutex_unlock(&lockdir_mu);
	return rc;
}

static int lockfile_open(const char *canon);

/* The descriptor v's locks are taken on, opened once per virtual
 * descriptor: the real file, else the lock file of v's path. */
static int lock_fd(ckc_vfd_t *v)
{
	int fd = atomic_load(&v->lock_fd);
	if (fd >= 0)
		return fd;
	int (*ro)(const char *, int, ...) = REAL(open);
	if (!ro)
		return -ENOSYS;
	bool real = true;
	fd = ro(v->path, (v->flags & O_ACCMODE) | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		real = false;
		fd = lockfile_open(v->path);
	}
	if (fd < 0)
		return fd == -1 ? -errno : fd;
	int expected = -1;
	if (!atomic_compare_exchange_strong(&v->lock_fd, &expected, fd)) {
		REAL(close)(fd);
		return expected;
	}
	v->lock_real = real;
	return fd;
}

/* The lock file of path: -errno when none can be had. */
static int lockfile_open(const char *canon)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	int rc = lock_dir(dir, sizeof(dir));
	if (rc)
		return rc;
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *c = canon; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	snprintf(path, sizeof(path), "%s/lock.%016llx", dir, (unsigned long long)h);
	int fd = REAL(open)(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? -errno : fd;
}

int ckc_lock_switch_fd(ckc_vfd_t *v)
{
	int fd = atomic_load(&v->lock_fd);
	if (fd < 0 || !v->lock_real || REAL(lseek)(fd, (off_t)v->pos, SEEK_SET) < 0)
		return -1;
	atomic_store(&v->lock_fd, -1);
	return fd;
}

void ckc_lock_switched(ckc_vfd_t *v, int real)
{
	int fd = atomic_load(&v->lock_fd);
	if (fd < 0 || v->lock_real)
		return;
	/* the lock file's locks go to the real file, then the lock file (a
	 * record lock of part of the file is not carried over) */
	if (v->lock_flock && REAL(flock)(real, v->lock_flock | LOCK_NB) != 0)
		ckc_warn("checkpoint %s: its flock could not move to its real file (%s)", v->path,
			 strerror(errno));
	struct flock whole = { .l_type = (short)v->lock_whole, .l_whence = SEEK_SET };
	if (v->lock_whole && REAL(fcntl)(real, F_SETLK, &whole) != 0)
		ckc_warn("checkpoint %s: its record lock could not move to its real file (%s)", v->path,
			 strerror(errno));
	ckc_lock_release(v);
}

void ckc_lock_release(ckc_vfd_t *v)
{
	int fd = atomic_exchange(&v->lock_fd, -1);
	if (fd >= 0 && REAL(close))
		REAL(close)(fd);
}

/* A lock request's range made absolute: SEEK_CUR from v's position,
 * SEEK_END from the checkpoint's size. */
static int lock_absolute(ckc_vfd_t *v, struct flock *fl)
{
	off_t base = 0;
	if (fl->l_whence == SEEK_CUR)
		base = (off_t)v->pos;
	else if (fl->l_whence == SEEK_END)
		base = (off_t)ckc_handle_size(v->h);
	else if (fl->l_whence != SEEK_SET)
		return -EINVAL;
	if (base && __builtin_add_overflow(fl->l_start, base, &fl->l_start))
		return -EOVERFLOW;
	fl->l_whence = SEEK_SET;
	return 0;
}

int ckc_lock_fcntl(ckc_vfd_t *v, int cmd, unsigned long arg)
{
	switch (cmd) {
	case F_GETLK:
	case F_SETLK:
	case F_SETLKW:
#ifdef F_OFD_GETLK
	case F_OFD_GETLK:
	case F_OFD_SETLK:
	case F_OFD_SETLKW:
#endif
		break;
	default:
		return CKC_PASS;
	}
	struct flock *user = (struct flock *)arg, fl;
	if (!user)
		return -EFAULT;
	fl = *user;
	/* as the kernel asks: a read lock of a readable descriptor, a write
	 * lock of a writable one */
	int acc = v->flags & O_ACCMODE;
	bool set = cmd == F_SETLK || cmd == F_SETLKW
#ifdef F_OFD_SETLK
		   || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW
#endif
		;
	if (set && ((fl.l_type == F_RDLCK && acc == O_WRONLY) || (fl.l_type == F_WRLCK && acc == O_RDONLY)))
		return -EBADF;
	int rc = lock_absolute(v, &fl);
	int fd = rc ? rc : lock_fd(v);
	if (fd < 0)
		return fd;
	if (REAL(fcntl)(fd, cmd, &fl) != 0)
		return -errno;
	if ((cmd == F_SETLK || cmd == F_SETLKW) && fl.l_start == 0 && fl.l_len == 0)
		v->lock_whole = fl.l_type == F_UNLCK ? 0 : fl.l_type;
	if (cmd == F_GETLK
#ifdef F_OFD_GETLK
	    || cmd == F_OFD_GETLK
#endif
	)
		*user = fl;
	return 0;
}

CKC_EXPORT int flock(int fd, int op)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v || !REAL(flock))
		return REAL(flock) ? REAL(flock)(fd, op) : (errno = ENOSYS, -1);
	int saved = errno, lf = lock_fd(v);
	if (lf < 0)
		return (int)ckc_result(lf, saved);
	if (REAL(flock)(lf, op) != 0)
		return -1;
	v->lock_flock = (op & LOCK_UN) ? 0 : (op & (LOCK_SH | LOCK_EX));
	return (int)ckc_result(0, saved);
}

static int lockf_common(int (*real)(int, int, off_t), int fd, int cmd, off_t len)
{
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v || !real)
		return real ? real(fd, cmd, len) : (errno = ENOSYS, -1);
	/* lockf(3) is fcntl(2) record locking from the current position */
	struct flock fl = { .l_whence = SEEK_CUR, .l_start = 0, .l_len = len };
	int fcmd = F_SETLK, saved = errno;
	switch (cmd) {
	case F_ULOCK: fl.l_type = F_UNLCK; break;
	case F_LOCK: fl.l_type = F_WRLCK; fcmd = F_SETLKW; break;
	case F_TLOCK: fl.l_type = F_WRLCK; break;
	case F_TEST: fl.l_type = F_WRLCK; fcmd = F_GETLK; break;
	default: errno = EINVAL; return -1;
	}
	int rc = ckc_lock_fcntl(v, fcmd, (unsigned long)&fl);
	if (rc == 0 && cmd == F_TEST && fl.l_type != F_UNLCK && fl.l_pid != getpid())
		rc = -EAGAIN;
	if (rc == -EACCES)
		rc = -EAGAIN;
	return (int)ckc_result(rc, saved);
}

CKC_EXPORT int lockf(int fd, int cmd, off_t len)
{
	return lockf_common(REAL(lockf), fd, cmd, len);
}

CKC_EXPORT int lockf64(int fd, int cmd, off_t len)
{
	return lockf_common(REAL(lockf64), fd, cmd, len);
}
