/* The stat family on tagged files: a cached checkpoint reports its real
 * size and times before it reaches disk, with the real file's identity when
 * it has one. stat/lstat/fstat/fstatat (and 64), statx, and the
 * __xstat family that binaries built against glibc < 2.33 call. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct stat64 is struct stat on every 64-bit Linux ABI this builds for */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat64 layout");

#include "intercept.h"
#include "log.h"
#include "path.h"

/* What the real file says of canon (its device, inode, owner, links), or
 * what stands in for it before it is there (absent: known not there, as a
 * look just now found; gone: the version has no name, unlinked or renamed
 * over, and the file at canon is another one). Returns STAT_REAL, STAT_IDENT (the file its
 * publication is to name) or STAT_MADE (a number derived from the path). */
enum { STAT_REAL, STAT_IDENT, STAT_MADE };
static int stat_base(const char *canon, const ckc_handle_t *h, const ckc_stat_t *c, struct stat *st,
		     bool absent, bool gone)
{
	int how = STAT_REAL;
	int (*rs)(const char *, struct stat *) = REAL(stat);
	struct stat real;

	if (!absent && rs && rs(canon, &real) == 0 && S_ISREG(real.st_mode)) {
		*st = real;
	} else {
		char dir[PATH_MAX];
		dev_t dev;
		ino_t ino;
		memset(st, 0, sizeof(*st));
		int id = h ? ckc_handle_ident(h, &dev, &ino) : ckc_ident(canon, &dev, &ino);
		if (id == -EEXIST && !gone && rs && rs(canon, &real) == 0 && S_ISREG(real.st_mode)) {
			*st = real; /* published meanwhile */
			return STAT_REAL;
		} else if (id == 0) {
			/* the file its publication names: the inode holds after it */
			st->st_dev = dev;
			st->st_ino = ino;
			how = STAT_IDENT;
		} else {
			how = STAT_MADE;
			st->st_blksize = 4096;
			/* its folder's file system, and the transfer size it
			 * gives (stdio sizes its buffers by it) */
			if (rs && ckc_path_dirname(canon, dir, sizeof(dir)) == 0 && rs(dir, &real) == 0) {
				st->st_dev = real.st_dev;
				if (real.st_blksize > 0)
					st->st_blksize = real.st_blksize;
			}
			/* no inode to be had: a stable number derived from the path
			 * (and from the version, where the path names another) */
			uint64_t made = gone && h ? (uint64_t)ckc_handle_version(h) * 0x9e3779b97f4a7c15ull
						  : ckc_path_hash(canon);
			st->st_ino = (ino_t)(made | 1);
		}
		st->st_mode = S_IFREG | (c->mode & 07777);
		st->st_nlink = 1;
		st->st_uid = ckc_geteuid();
		st->st_gid = ckc_getegid();
		if (how != STAT_MADE)
			st->st_blksize = 4096;
		st->st_atim = c->mtime;
	}
	return how;
}

/* The cache's version over it: size, mode, owner and times. */
static void stat_apply(const ckc_stat_t *c, struct stat *st)
{
	/* the blocks a file system of 4 KiB blocks gives those bytes (the
	 * real file's own count where it holds this version's size) */
	if (st->st_size != (off_t)c->size || !st->st_blocks)
		st->st_blocks = (blkcnt_t)((c->size + 4095) / 4096 * 8);
	st->st_size = (off_t)c->size;
	st->st_mode = S_IFREG | (c->mode & 07777);
	if (c->has_owner) {
		if (c->uid != (uid_t)-1)
			st->st_uid = c->uid;
		if (c->gid != (gid_t)-1)
			st->st_gid = c->gid;
	}
	st->st_atim = c->atime;
	st->st_mtim = c->mtime;
	st->st_ctim = c->mtime;
}

static void stat_fill(const char *canon, const ckc_stat_t *c, struct stat *st)
{
	stat_base(canon, NULL, c, st, false, false);
	stat_apply(c, st);
}

static inline bool stat_fd(int fd, struct stat *st);

/* A look at a cached checkpoint's descriptor by its name in /proc/self/fd
 * or /dev/fd (os.path.getsize of it, a shell's test -s /dev/fd/3): its
 * number names the library's placeholder, a socket, for the kernel. The
 * checkpoint's stat, as fstat gives it; the link's own (lstat), as the
 * kernel makes it for a descriptor opened as the checkpoint was: the
 * owner's read and search bits for one open for reading, write and search
 * for writing. */
static bool stat_procfd(const char *path, struct stat *st, bool follow)
{
	if (path[0] != '/' || (path[1] != 'p' && path[1] != 'd'))
		return false;
	int n = ckc_px_procfd_number(path);
	if (!ckc_vfd_get(n))
		return false;
	if (follow)
		return stat_fd(n, st);
	int saved = errno;
	ckc_vfd_t *v = ckc_vfd_held(n);
	if (!v || REAL(lstat)(path, st) != 0 || !S_ISLNK(st->st_mode)) {
		ckc_vfd_drop(v);
		errno = saved;
		return false;
	}
	int acc = v->flags & O_ACCMODE;
	ckc_vfd_put(v);
	errno = saved;
	st->st_mode = S_IFLNK | (acc != O_WRONLY ? S_IRUSR | S_IXUSR : 0) | (acc != O_RDONLY ? S_IWUSR | S_IXUSR : 0);
	return true;
}

CKC_WARM_PATH __attribute__((noinline)) static bool stat_cached_look(int dirfd, const char *path, struct stat *st,
									 bool follow)
{
	char canon[PATH_MAX];
	ckc_stat_t c;

	if (path && stat_procfd(path, st, follow))
		return true;
	int saved = errno;
	if (!(follow ? ckc_cached_follow : ckc_cached_at)(dirfd, path, canon, &c))
		return false;
	stat_fill(canon, &c, st);
	errno = saved;
	return true;
}

/* Fills st if path (relative to dirfd) is a cached checkpoint, or (follow)
 * a symbolic link to one. With nothing cached here or held by another
 * process of the node, two loads: a walker's stat of each name (du, find,
 * tar) makes no stack frame for a path. */
static inline bool stat_cached(int dirfd, const char *path, struct stat *st, bool follow)
{
	if (!ckc_holds_objects() && !ckc_node_holds_any_mapping())
		return false;
	return stat_cached_look(dirfd, path, st, follow);
}

/* The cache's version over a descriptor's answer of the real file. */
static void stat_done(const ckc_stat_t *c, struct stat *st)
{
	stat_apply(c, st);
	/* unlinked, or replaced by a rename since: no name is left */
	if (!c->linked)
		st->st_nlink = 0;
}

/* A tagged descriptor's stat (out of line: fstat of an untagged one is
 * a table load and the real call). */
__attribute__((noinline)) static bool stat_fd_look(ckc_vfd_t *v, struct stat *st);

static inline bool stat_fd(int fd, struct stat *st)
{
	/* held for the look: another thread's close of the number meanwhile
	 * leaves the descriptor and its handle whole until it ends */
	ckc_vfd_t *v = ckc_fd_maybe_tagged(fd) ? ckc_vfd_hold(fd) : NULL;
	if (!v)
		return false;
	bool done = stat_fd_look(v, st);
	int saved = errno;
	ckc_vfd_put(v);
	errno = saved;
	return done;
}

__attribute__((noinline)) static bool stat_fd_look(ckc_vfd_t *v, struct stat *st)
{
	ckc_stat_t c;
	int saved = errno;
	ckc_enter();
	ckc_handle_stat(v->h, &c);
	/* a closed version's real file changes only with its publication:
	 * an fstat in a loop (Python's reads ask twice) looks at it once,
	 * and then takes no lock of the descriptor */
	const ckc_vfd_stat_t *k = atomic_load_explicit(&v->stat_snap, memory_order_acquire);
	if (k && c.complete && k->at_home == c.at_home) {
		*st = k->st;
		stat_done(&c, st);
		ckc_leave();
		errno = saved;
		return true;
	}
	ckc_mutex_lock(&v->lock);
	if (!c.complete || !v->stat_known || v->stat_at_home != c.at_home) {
		/* the open's look found no real file, and none is published since */
		bool absent = v->stat_absent && !c.at_home && c.at_home == v->stat_at_home;
		v->stat_absent = false;
		/* the real file at the version's name now (renamed since it
		 * was opened: the new one); unlinked or renamed over, none is
		 * its (the file at its old name is another one) */
		char now[PATH_MAX];
		const char *name = ckc_vfd_file_name(v, now);
		int how = stat_base(name ? name : v->path, v->h, &c, &v->stat_real, absent || !name, !name);
		if (how == STAT_IDENT) {
			v->id_known = true;
			v->id_dev = v->stat_real.st_dev;
			v->id_ino = v->stat_real.st_ino;
		} else if (how == STAT_MADE && v->id_known) {
			/* unlinked since (or replaced): still the file it was */
			v->stat_real.st_dev = v->id_dev;
			v->stat_real.st_ino = v->id_ino;
		}
		v->stat_known = c.complete;
		v->stat_at_home = c.at_home;
		ckc_vfd_stat_keep(v);
	}
	*st = v->stat_real;
	ckc_mutex_unlock(&v->lock);
	stat_done(&c, st);
	ckc_leave();
	errno = saved;
	return true;
}

/* The system calls of the C library's stat family, made here where the
 * function found for the wrapper is the C library's own (REAL_KERNEL):
 * the kernel's struct stat is the C library's on these machines. */
#if CKC_REAL_KERNEL
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "one struct stat");
static inline int stat_kernel_at(int dirfd, const char *path, struct stat *st, int flags)
{
	return (int)ckc_syscall6(SYS_newfstatat, dirfd, (long)path, (long)st, flags, 0, 0);
}
static inline int stat_kernel_fd(int fd, struct stat *st)
{
	return (int)ckc_syscall6(SYS_fstat, fd, (long)st, 0, 0, 0, 0);
}
#else
#define stat_kernel_at(dirfd, path, st, flags) (errno = ENOSYS, -1)
#define stat_kernel_fd(fd, st) (errno = ENOSYS, -1)
#endif
/* name's real answer: kcall where the C library's function is next */
#define STAT_NEXT(name, kcall, ...) (REAL_KERNEL(name) ? (kcall) : REAL(name)(__VA_ARGS__))

/* A real file's answer: its change time, a stamp of the kernel's clock,
 * is one the cache's next stamps must not be older than (ckc_file_now). */
static inline int stat_seen(int rc, const struct stat *st)
{
	if (rc == 0)
		ckc_stamp_seen(&st->st_ctim);
	return rc;
}

CKC_HOT_PATH CKC_EXPORT int stat(const char *path, struct stat *st)
{
	if (stat_cached(AT_FDCWD, path, st, true))
		return 0;
	return ckc_enoent_checked(AT_FDCWD, path,
				  stat_seen(STAT_NEXT(stat, stat_kernel_at(AT_FDCWD, path, st, 0), path, st), st));
}

CKC_HOT_PATH CKC_EXPORT int stat64(const char *path, struct stat64 *st64)
{
	struct stat *st = (struct stat *)st64;
	if (stat_cached(AT_FDCWD, path, st, true))
		return 0;
	return ckc_enoent_checked(AT_FDCWD, path,
				  stat_seen(STAT_NEXT(stat64, stat_kernel_at(AT_FDCWD, path, st, 0), path, st), st));
}

/* A cached checkpoint is never a symbolic link: lstat is stat. */
CKC_HOT_PATH CKC_EXPORT int lstat(const char *path, struct stat *st)
{
	if (stat_cached(AT_FDCWD, path, st, false))
		return 0;
	return ckc_enoent_checked(AT_FDCWD, path,
				  stat_seen(STAT_NEXT(lstat, stat_kernel_at(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW), path, st), st));
}

CKC_HOT_PATH CKC_EXPORT int lstat64(const char *path, struct stat64 *st64)
{
	struct stat *st = (struct stat *)st64;
	if (stat_cached(AT_FDCWD, path, st, false))
		return 0;
	return ckc_enoent_checked(AT_FDCWD, path,
				  stat_seen(STAT_NEXT(lstat64, stat_kernel_at(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW), path, st), st));
}

CKC_HOT_PATH CKC_EXPORT int fstat(int fd, struct stat *st)
{
	if (stat_fd(fd, st))
		return 0;
	return stat_seen(STAT_NEXT(fstat, stat_kernel_fd(fd, st), fd, st), st);
}

CKC_HOT_PATH CKC_EXPORT int fstat64(int fd, struct stat64 *st64)
{
	struct stat *st = (struct stat *)st64;
	if (stat_fd(fd, st))
		return 0;
	return stat_seen(STAT_NEXT(fstat64, stat_kernel_fd(fd, st), fd, st), st);
}

static inline bool statat_cached(int dirfd, const char *path, struct stat *st, int flags)
{
	if ((flags & AT_EMPTY_PATH) && path && !*path)
		return stat_fd(dirfd, st);
	return stat_cached(dirfd, path, st, !(flags & AT_SYMLINK_NOFOLLOW));
}

CKC_HOT_PATH CKC_EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	if (statat_cached(dirfd, path, st, flags))
		return 0;
	return ckc_enoent_checked(dirfd, path,
				  stat_seen(STAT_NEXT(fstatat, stat_kernel_at(dirfd, path, st, flags), dirfd, path, st, flags), st));
}

CKC_HOT_PATH CKC_EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st64, int flags)
{
	struct stat *st = (struct stat *)st64;
	if (statat_cached(dirfd, path, st, flags))
		return 0;
	return ckc_enoent_checked(dirfd, path,
				  stat_seen(STAT_NEXT(fstatat64, stat_kernel_at(dirfd, path, st, flags), dirfd, path, st, flags), st));
}

static void statx_from_stat(const struct stat *st, unsigned mask, struct statx *sx)
{
	memset(sx, 0, sizeof(*sx));
	sx->stx_mask = (STATX_BASIC_STATS) & (mask ? mask | STATX_BASIC_STATS : STATX_BASIC_STATS);
	sx->stx_blksize = (uint32_t)st->st_blksize;
	sx->stx_nlink = (uint32_t)st->st_nlink;
	sx->stx_uid = st->st_uid;
	sx->stx_gid = st->st_gid;
	sx->stx_mode = (uint16_t)st->st_mode;
	sx->stx_ino = st->st_ino;
	sx->stx_size = (uint64_t)st->st_size;
	sx->stx_blocks = (uint64_t)st->st_blocks;
	sx->stx_atime.tv_sec = st->st_atim.tv_sec;
	sx->stx_atime.tv_nsec = (uint32_t)st->st_atim.tv_nsec;
	sx->stx_mtime.tv_sec = st->st_mtim.tv_sec;
	sx->stx_mtime.tv_nsec = (uint32_t)st->st_mtim.tv_nsec;
	sx->stx_ctime.tv_sec = st->st_ctim.tv_sec;
	sx->stx_ctime.tv_nsec = (uint32_t)st->st_ctim.tv_nsec;
	sx->stx_dev_major = major(st->st_dev);
	sx->stx_dev_minor = minor(st->st_dev);
}

CKC_WARM_PATH CKC_EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *sx)
{
	struct stat st;
	int saved = errno;
	if (statat_cached(dirfd, path, &st, flags)) {
		statx_from_stat(&st, mask, sx);
		errno = saved;
		return 0;
	}
	int (*rs)(int, const char *, int, unsigned int, struct statx *) = REAL(statx);
	if (!rs) {
		errno = ENOSYS;
		return -1;
	}
	int rc = rs(dirfd, path, flags, mask, sx);
	if (rc == 0 && (sx->stx_mask & STATX_CTIME)) {
		struct timespec c = { .tv_sec = (time_t)sx->stx_ctime.tv_sec, .tv_nsec = (long)sx->stx_ctime.tv_nsec };
		ckc_stamp_seen(&c);
	}
	return ckc_enoent_checked(dirfd, path, rc);
}

/* glibc < 2.33 binaries: stat() and friends were inline calls to these. */
CKC_EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	if (stat_cached(AT_FDCWD, path, st, true))
		return 0;
	return stat_seen(REAL(__xstat)(ver, path, st), st);
}

CKC_EXPORT int __xstat64(int ver, const char *path, struct stat *st)
{
	if (stat_cached(AT_FDCWD, path, st, true))
		return 0;
	return stat_seen(REAL(__xstat64)(ver, path, st), st);
}

CKC_EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
	if (stat_cached(AT_FDCWD, path, st, false))
		return 0;
	return stat_seen(REAL(__lxstat)(ver, path, st), st);
}

CKC_EXPORT int __lxstat64(int ver, const char *path, struct stat *st)
{
	if (stat_cached(AT_FDCWD, path, st, false))
		return 0;
	return stat_seen(REAL(__lxstat64)(ver, path, st), st);
}

CKC_EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	if (stat_fd(fd, st))
		return 0;
	return stat_seen(REAL(__fxstat)(ver, fd, st), st);
}

CKC_EXPORT int __fxstat64(int ver, int fd, struct stat *st)
{
	if (stat_fd(fd, st))
		return 0;
	return stat_seen(REAL(__fxstat64)(ver, fd, st), st);
}

CKC_EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	if (statat_cached(dirfd, path, st, flags))
		return 0;
	return stat_seen(REAL(__fxstatat)(ver, dirfd, path, st, flags), st);
}

CKC_EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	if (statat_cached(dirfd, path, st, flags))
		return 0;
	return stat_seen(REAL(__fxstatat64)(ver, dirfd, path, st, flags), st);
}

/* setrlimit(2) and prlimit(2) of this process: a file size limit makes the
 * cache step aside for the files opened for writing after it
 * (ckc_fsize_limited). Made with the system call, as the C library makes
 * them (struct rlimit is struct rlimit64 in a 64-bit process): a sanitizer
 * runtime sets its limits before this library has started. */
/* How long a new file size limit waits for the publications before it. */
#define FSIZE_PUBLISH_WAIT_NS (60ull * 1000000000u)

static int rlimit_call(pid_t pid, int resource, const void *l, void *old)
{
	/* a file size limit binds the library's own writes of this process
	 * too: what the cache holds is published first (open writers handed
	 * over, their later writes the kernel's to limit), while the old
	 * limit lets it */
	const struct rlimit *nl = l;
	if (nl && resource == RLIMIT_FSIZE && nl->rlim_cur != RLIM_INFINITY && (pid == 0 || pid == getpid()) &&
	    atomic_load(&ckc_icpt_on) && !ckc_io_guard && !ckc_in_vfork_child() && ckc_engine_started()) {
		int saved = errno;
		ckc_vfd_demote_all(false, "a file size limit");
		ckc_enter();
		int r = ckc_publish_all(FSIZE_PUBLISH_WAIT_NS, true);
		ckc_leave();
		if (r)
			ckc_warn("a file size limit comes before every closed checkpoint reached its real path (%s): "
				 "those larger than the limit may not", strerror(-r));
		errno = saved;
	}
	return (int)ckc_syscall6(SYS_prlimit64, pid, resource, (long)l, (long)old, 0, 0);
}

_Static_assert(sizeof(struct rlimit) == sizeof(struct rlimit64), "a 64-bit struct rlimit");

CKC_EXPORT int setrlimit(__rlimit_resource_t r, const struct rlimit *l)
{
	return rlimit_call(0, (int)r, l, NULL);
}

CKC_EXPORT int setrlimit64(__rlimit_resource_t r, const struct rlimit64 *l)
{
	return rlimit_call(0, (int)r, l, NULL);
}

CKC_EXPORT int prlimit(pid_t pid, __rlimit_resource_t r, const struct rlimit *l, struct rlimit *old)
{
	return rlimit_call(pid, (int)r, l, old);
}

CKC_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t r, const struct rlimit64 *l, struct rlimit64 *old)
{
	return rlimit_call(pid, (int)r, l, old);
}

/* umask(2): the library creates the real files of versions opened before
 * and after, and gives each the mode its open had */
CKC_EXPORT mode_t umask(mode_t m)
{
	mode_t (*ru)(mode_t) = REAL(umask);
	mode_t old = ru ? ru(m) : (mode_t)ckc_syscall6(SYS_umask, (int)m, 0, 0, 0, 0, 0);
	/* a vfork child shares the parent's memory, not its umask */
	if (!ckc_in_vfork_child())
		ckc_umask_set(m);
	return old;
}
