/* POSIX I/O wrappers, descriptors and names: dup family, fcntl, access,
 * stat of paths, unlink, rename, link, mmap and the copy calls. Shapes as in
 * posix.c. */
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
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/inotify.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "intercept.h"
#include "owed.h"
#include "log.h"
#include "path.h"

/* ---- descriptors ------------------------------------------------------ */

/* After a real dup onto newfd: newfd shares oldfd's virtual descriptor v (or
 * loses the one it had: dup2 closed it). v is oldfd's after the dup, held
 * by the caller: a close of oldfd meanwhile leaves it whole for the copy. */
static int dup_fixup(ckc_vfd_t *v, int oldfd, int newfd)
{
	if (newfd < 0)
		return newfd;
	if (oldfd == newfd)
		return newfd;
	(void)ckc_small_take(newfd); /* a new number: nothing timed, no base there */
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
			bool fresh = (v->flags & O_ACCMODE) == O_WRONLY && v->pos == 0 && !v->switched;
			int rc = ckc_px_vfd_make_real(v);
			if (fresh && rc == 0)
				ckc_redirect_noted();
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
	if (!ckc_vfd_get(fd)) {
		int r = CKC_FD_NUM(REAL(dup)(fd));
		ckc_vfd_unseen(r);
		(void)ckc_small_take(r);
		ckc_passed_dup(fd, r);
		return ckc_tag_dup(fd, r);
	}
	int r = CKC_FD_NUM(REAL(dup)(fd));
	ckc_vfd_t *v = ckc_vfd_held(fd);
	r = dup_fixup(v, fd, r);
	ckc_vfd_drop(v);
	return r;
}

/* A dup2 or dup3 onto one of the library's own files (a program that
 * keeps its own files at fixed high numbers it believes free): the
 * library's file there (a checkpoint's publication under way, a lock, the
 * cache's tier) cannot move, and replacing it would send the cache's
 * writes into the program's file. The call fails with EBUSY, said once.
 * As a call that takes a number (intercept.h), it waits for the library's
 * file being made to be marked, and the library for it. */
static bool dup_onto_mine(int oldfd, int newfd)
{
	if (oldfd == newfd || !ckc_fd_mine(newfd) || !ckc_fd_mine_live())
		return false;
	/* (a bad oldfd is the kernel's to refuse, as it would: EBADF) */
	int saved = errno;
	if (REAL(fcntl)(oldfd, F_GETFD) < 0) {
		errno = saved;
		return false;
	}
	static atomic_bool said;
	if (!atomic_exchange(&said, true))
		ckc_warn("the program's dup2 or dup3 of descriptor %d onto %d failed with EBUSY: the library "
			 "holds a file of its own at %d (it keeps its files at %d and above where the "
			 "descriptor table allows, else near its top); a program that puts its files at "
			 "fixed numbers must keep them clear of the library's",
			 oldfd, newfd, newfd, CKC_FD_OWN_FLOOR);
	errno = EBUSY;
	return true;
}

static int dup2_real(int oldfd, int newfd)
{
	ckc_fd_num_begin();
	int r = dup_onto_mine(oldfd, newfd) ? -1 : REAL(dup2)(oldfd, newfd);
	ckc_fd_num_end();
	return r;
}

static int dup3_real(int oldfd, int newfd, int flags)
{
	ckc_fd_num_begin();
	int r = dup_onto_mine(oldfd, newfd) ? -1 : REAL(dup3)(oldfd, newfd, flags);
	ckc_fd_num_end();
	return r;
}

CKC_WARM_PATH CKC_EXPORT int dup2(int oldfd, int newfd)
{
	if (oldfd != newfd) {
		ckc_tag_forget_fd(newfd);
		(void)ckc_small_take(newfd);
	}
	if (!ckc_vfd_get(oldfd) && !ckc_vfd_get(newfd)) {
		int r = dup2_real(oldfd, newfd);
		if (oldfd != newfd)
			ckc_passed_dup(oldfd, r);
		return ckc_tag_dup(oldfd, r);
	}
	int r = dup2_real(oldfd, newfd);
	ckc_vfd_t *v = ckc_vfd_held(oldfd);
	r = dup_fixup(v, oldfd, r);
	ckc_vfd_drop(v);
	return r;
}

CKC_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (oldfd != newfd) {
		ckc_tag_forget_fd(newfd);
		(void)ckc_small_take(newfd);
	}
	if (!ckc_vfd_get(oldfd) && !ckc_vfd_get(newfd)) {
		int r = dup3_real(oldfd, newfd, flags);
		if (oldfd != newfd)
			ckc_passed_dup(oldfd, r);
		return ckc_tag_dup(oldfd, r);
	}
	int r = dup3_real(oldfd, newfd, flags);
	ckc_vfd_t *v = ckc_vfd_held(oldfd);
	r = dup_fixup(v, oldfd, r);
	ckc_vfd_drop(v);
	return r;
}

/* Calls that make descriptors, wrapped only to look at the numbers they
 * give: a number the table still holds lost its checkpoint's placeholder
 * to a close the library did not see (ckc_vfd_unseen). */
static int made_one(int fd)
{
	ckc_vfd_unseen(fd);
	return fd;
}

static int made_two(int rc, const int fds[2])
{
	if (rc == 0) {
		ckc_vfd_unseen(fds[0]);
		ckc_vfd_unseen(fds[1]);
	}
	return rc;
}

CKC_EXPORT int pipe(int fds[2])
{
	return made_two(CKC_FD_NUM(REAL(pipe)(fds)), fds);
}

CKC_EXPORT int pipe2(int fds[2], int flags)
{
	return made_two(CKC_FD_NUM(REAL(pipe2)(fds, flags)), fds);
}

CKC_EXPORT int socketpair(int domain, int type, int proto, int fds[2])
{
	return made_two(CKC_FD_NUM(REAL(socketpair)(domain, type, proto, fds)), fds);
}

CKC_EXPORT int socket(int domain, int type, int proto)
{
	return made_one(CKC_FD_NUM(REAL(socket)(domain, type, proto)));
}

/* (the kernel gives the number before the wait for a connection: counted
 * while it waits, which the library's waits bound, intercept.h) */
CKC_EXPORT int accept(int s, struct sockaddr *a, socklen_t *n)
{
	return made_one(CKC_FD_NUM(REAL(accept)(s, a, n)));
}

CKC_EXPORT int accept4(int s, struct sockaddr *a, socklen_t *n, int flags)
{
	return made_one(CKC_FD_NUM(REAL(accept4)(s, a, n, flags)));
}

CKC_EXPORT int eventfd(unsigned int v, int flags)
{
	return made_one(CKC_FD_NUM(REAL(eventfd)(v, flags)));
}

CKC_EXPORT int memfd_create(const char *name, unsigned int flags)
{
	return made_one(CKC_FD_NUM(REAL(memfd_create)(name, flags)));
}

/* Other calls that take the lowest free number (a missing one in this C
 * library: ENOSYS). */
#define NUM_WRAPPER(name, params, args)                                   \
	CKC_EXPORT int name params                                        \
	{                                                                 \
		if (!REAL(name)) {                                        \
			errno = ENOSYS;                                   \
			return -1;                                        \
		}                                                         \
		return made_one(CKC_FD_NUM(REAL(name) args));             \
	}
NUM_WRAPPER(epoll_create, (int size), (size))
NUM_WRAPPER(epoll_create1, (int flags), (flags))
NUM_WRAPPER(inotify_init, (void), ())
NUM_WRAPPER(inotify_init1, (int flags), (flags))
NUM_WRAPPER(timerfd_create, (int clock, int flags), (clock, flags))
NUM_WRAPPER(signalfd, (int fd, const sigset_t *mask, int flags), (fd, mask, flags))
NUM_WRAPPER(mkstemp, (char *tmpl), (tmpl))
NUM_WRAPPER(mkostemp, (char *tmpl, int flags), (tmpl, flags))
NUM_WRAPPER(mkstemps, (char *tmpl, int suffix), (tmpl, suffix))
NUM_WRAPPER(mkostemps, (char *tmpl, int suffix, int flags), (tmpl, suffix, flags))
NUM_WRAPPER(mkstemp64, (char *tmpl), (tmpl))
NUM_WRAPPER(mkostemp64, (char *tmpl, int flags), (tmpl, flags))

/* The kernel's O_LARGEFILE, which F_GETFL shows for a 64-bit process's
 * files (glibc's is 0 there). */
#if defined(__x86_64__)
#define KERNEL_O_LARGEFILE 0100000
#elif defined(__aarch64__)
#define KERNEL_O_LARGEFILE 0400000
#else
#define KERNEL_O_LARGEFILE 0
#endif

static int degrade_vfd(ckc_vfd_t *v);

/* Whether cmd is one the C library passes to the kernel as it is, and
 * which is no cancellation point (REAL_KERNEL): a walker's dup, F_GETFL and
 * F_SETFD of each folder. */
static inline bool fcntl_plain(int cmd)
{
	return cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC || cmd == F_GETFD || cmd == F_SETFD || cmd == F_GETFL ||
	       cmd == F_SETFL;
}

/* rf: the real fcntl or fcntl64; kernel: its REAL_KERNEL */
static int fcntl_tagged(ckc_vfd_t *v, int (*rf)(int, int, ...), int fd, int cmd, unsigned long arg);

CKC_WARM_PATH static int fcntl_common(int (*rf)(int, int, ...), bool kernel, int fd, int cmd, unsigned long arg)
{
	if (!rf) {
		errno = ENOSYS;
		return -1;
	}
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v) {
		bool num = cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC;
		if (num)
			ckc_fd_num_begin();
		int r = kernel && fcntl_plain(cmd) ? (int)ckc_syscall6(SYS_fcntl, fd, cmd, (long)arg, 0, 0, 0)
						   : rf(fd, cmd, arg);
		if (num)
			ckc_fd_num_end();
		if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)
			return r;
		ckc_vfd_unseen(r);
		(void)ckc_small_take(r);
		ckc_passed_dup(fd, r);
		return ckc_tag_dup(fd, r);
	}
	int r = fcntl_tagged(v, rf, fd, cmd, arg);
	ckc_vfd_drop(v);
	return r;
}

/* fcntl on tagged fd, whose virtual descriptor v the caller holds */
static int fcntl_tagged(ckc_vfd_t *v, int (*rf)(int, int, ...), int fd, int cmd, unsigned long arg)
{
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC: {
		/* (the number's descriptor after the dup, as dup takes it) */
		int r = CKC_FD_NUM(rf(fd, cmd, arg));
		ckc_vfd_t *now = ckc_vfd_held(fd);
		r = dup_fixup(now, fd, r);
		ckc_vfd_drop(now);
		return r;
	}
	case F_GETFL:
		/* as the kernel answers: the open's creation flags are gone, a
		 * 64-bit process's file is large */
		return (v->flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_CLOEXEC)) | KERNEL_O_LARGEFILE;
	case F_GETLEASE: /* no lease is taken on a cached checkpoint */
		return F_UNLCK;
	case F_SETLEASE:
		if ((int)arg == F_UNLCK)
			return 0;
		errno = EAGAIN; /* as for a file another descriptor has open */
		return -1;
	case F_SETFL: {
		/* only the status flags may change, as for a real file */
		int keep = O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_ASYNC;
		v->flags = (v->flags & ~keep) | ((int)arg & keep);
		return 0;
	}
	default:
		/* F_GETFD/F_SETFD act on the placeholder as they should; the
		 * rest are the real file's to answer: record locks (which
		 * other processes, with the library or not, take on the real
		 * file), owners, signals, seals, hints, commands the kernel
		 * refuses */
		if (cmd != F_GETFD && cmd != F_SETFD && degrade_vfd(v) != 0)
			return -1;
		return rf(fd, cmd, arg);
	}
}

CKC_WARM_PATH CKC_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	int (*rf)(int, int, ...) = REAL(fcntl);
	return fcntl_common(rf, REAL_KERNEL(fcntl), fd, cmd, arg);
}

CKC_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	int (*rf)(int, int, ...) = REAL(fcntl64);
	return fcntl_common(rf, REAL_KERNEL(fcntl64), fd, cmd, arg);
}

/* ---- names ------------------------------------------------------------ */

/* A cached checkpoint can be read and written as its mode and owner say
 * (access: for the real user and group, faccessat's AT_EACCESS: the
 * effective ones), never executed. */
static int access_cached(const char *canon, const ckc_stat_t *st, int mode, bool effective)
{
	if (mode != F_OK && !ckc_cached_permits_file(canon, st, mode & (R_OK | W_OK | X_OK), effective)) {
		errno = EACCES;
		return -1;
	}
	return 0;
}

/* /proc/self/fd/N or /dev/fd/N of a cached checkpoint's descriptor (the
 * kernel would judge the file behind it, not the library's placeholder):
 * true, and *rc the answer. */
CKC_START_PATH static bool access_vfd(const char *path, int mode, bool effective, int *rc)
{
	int n = path && path[0] == '/' ? ckc_px_procfd_number(path) : -1;
	ckc_vfd_t *v = ckc_vfd_held(n);
	bool cached = v && !v->switched;
	if (cached) {
		ckc_stat_t st;
		ckc_vfd_stat_of(v, &st);
		*rc = access_cached(v->path, &st, mode, effective);
	}
	ckc_vfd_drop(v);
	return cached;
}

/* access and euidaccess (effective): a cached checkpoint, or the file
 * behind a tagged descriptor's number, judged by the cache. */
/* dirfd/path (follow: or the file a link there leads to) is a cached
 * checkpoint: true, and *rc the answer. Out of line: the path is on the
 * stack only where something is held (access_held). */
__attribute__((noinline)) static bool access_look(int dirfd, const char *path, int mode, bool effective, bool follow,
						  int *rc)
{
	char canon[PATH_MAX];
	ckc_stat_t st;
	if (!(follow ? ckc_cached_follow : ckc_cached_at)(dirfd, path, canon, &st))
		return false;
	*rc = access_cached(canon, &st, mode, effective);
	return true;
}

/* access_look, where this process's cache or another process of the node
 * holds anything (as the stat family asks) */
static inline bool access_held(int dirfd, const char *path, int mode, bool effective, bool follow, int *rc)
{
	if (!ckc_holds_objects() && !ckc_node_holds_any_mapping())
		return false;
	return access_look(dirfd, path, mode, effective, follow, rc);
}

CKC_START_PATH static int access_path(const char *path, int mode, bool effective, int (*real)(const char *, int))
{
	int rc;
	if (access_vfd(path, mode, effective, &rc))
		return rc;
	if (access_held(AT_FDCWD, path, mode, effective, true, &rc))
		return rc;
	return ckc_enoent_checked(AT_FDCWD, path, real(path, mode));
}

CKC_WARM_PATH CKC_EXPORT int access(const char *path, int mode)
{
	return access_path(path, mode, false, REAL(access));
}

CKC_EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	int rc;
	if (!(flags & AT_SYMLINK_NOFOLLOW) && access_vfd(path, mode, (flags & AT_EACCESS) != 0, &rc))
		return rc;
	if (access_held(dirfd, path, mode, (flags & AT_EACCESS) != 0, !(flags & AT_SYMLINK_NOFOLLOW), &rc))
		return rc;
	return ckc_enoent_checked(dirfd, path, REAL(faccessat)(dirfd, path, mode, flags));
}

/* euidaccess and eaccess check with the C library's own calls. */
CKC_START_PATH CKC_EXPORT int euidaccess(const char *path, int mode)
{
	return access_path(path, mode, true, REAL(euidaccess));
}

CKC_START_PATH CKC_EXPORT int eaccess(const char *path, int mode)
{
	return euidaccess(path, mode);
}

/* The file system calls (statfs, statvfs, pathconf) on a checkpoint: its
 * real path may not be there yet, and a tagged descriptor's number holds a
 * placeholder in another file system; the checkpoint's folder answers for
 * it, in the same file system. A path's real call answers first: the
 * cache is asked only where it found nothing (ENOENT). */
CKC_WARM_PATH static bool fs_folder_of_path(const char *path, char dir[PATH_MAX])
{
	if (errno != ENOENT)
		return false;
	/* (the checkpoint's canonical path, cut at its last '/' in place) */
	if (ckc_cached_follow(AT_FDCWD, path, dir, NULL)) {
		char *slash = strrchr(dir, '/');
		if (!slash || slash == dir)
			strcpy(dir, "/");
		else
			*slash = '\0';
		return true;
	}
	/* a folder on the way that is a checkpoint: ENOTDIR */
	(void)ckc_enoent_checked(AT_FDCWD, path, -1);
	return false;
}

CKC_WARM_PATH static bool fs_folder_of_fd(int fd, char dir[PATH_MAX])
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	bool got = v && !v->switched && ckc_path_dirname(v->path, dir, PATH_MAX) == 0;
	ckc_vfd_drop(v);
	return got;
}

/* (each with its folder's path out of line, on the stack only where the
 * real call found nothing, or the descriptor is tagged) */
#define FS_BY_PATH(name, type)                                                   \
	__attribute__((noinline)) CKC_WARM_PATH static int name##_folder(const char *path, type *buf, int saved) \
	{                                                                        \
		char dir[PATH_MAX];                                              \
		if (!fs_folder_of_path(path, dir)) {                             \
			/* nothing cached there (any more): a publication  \
			 * that landed meanwhile is the kernel's to answer */ \
			if (errno != ENOENT)                                     \
				return -1;                                       \
			errno = saved;                                           \
			return REAL(name)(path, buf);                            \
		}                                                                \
		errno = saved;                                                   \
		return REAL(name)(dir, buf);                                     \
	}                                                                        \
	CKC_WARM_PATH CKC_EXPORT int name(const char *path, type *buf)           \
	{                                                                        \
		int saved = errno;                                               \
		int rc = REAL(name)(path, buf);                                  \
		if (rc == 0 || errno != ENOENT)                                  \
			return rc;                                               \
		return name##_folder(path, buf, saved);                          \
	}
#define FS_BY_FD(name, by_path, type)                                            \
	__attribute__((noinline)) static int name##_tagged(int fd, type *buf)  \
	{                                                                        \
		char dir[PATH_MAX];                                              \
		if (fs_folder_of_fd(fd, dir))                                    \
			return REAL(by_path)(dir, buf);                          \
		return REAL(name)(fd, buf);                                      \
	}                                                                        \
	CKC_WARM_PATH CKC_EXPORT int name(int fd, type *buf)                     \
	{                                                                        \
		if (ckc_vfd_get(fd))                                             \
			return name##_tagged(fd, buf);                           \
		return REAL(name)(fd, buf);                                      \
	}
FS_BY_PATH(statfs, struct statfs)
FS_BY_PATH(statfs64, struct statfs64)
FS_BY_PATH(statvfs, struct statvfs)
FS_BY_PATH(statvfs64, struct statvfs64)
FS_BY_FD(fstatfs, statfs, struct statfs)
FS_BY_FD(fstatfs64, statfs64, struct statfs64)
FS_BY_FD(fstatvfs, statvfs, struct statvfs)
FS_BY_FD(fstatvfs64, statvfs64, struct statvfs64)

__attribute__((noinline)) static long pathconf_folder(const char *path, int name, int saved)
{
	char dir[PATH_MAX];
	if (!fs_folder_of_path(path, dir))
		return -1;
	errno = saved;
	return REAL(pathconf)(dir, name);
}

CKC_EXPORT long pathconf(const char *path, int name)
{
	int saved = errno;
	long rc = REAL(pathconf)(path, name);
	if (rc != -1 || errno != ENOENT)
		return rc;
	return pathconf_folder(path, name, saved);
}

__attribute__((noinline)) static long fpathconf_tagged(int fd, int name)
{
	char dir[PATH_MAX];
	if (fs_folder_of_fd(fd, dir))
		return REAL(pathconf)(dir, name);
	return REAL(fpathconf)(fd, name);
}

CKC_EXPORT long fpathconf(int fd, int name)
{
	if (ckc_vfd_get(fd))
		return fpathconf_tagged(fd, name);
	return REAL(fpathconf)(fd, name);
}

/* ---- the program's own changes of a folder ---------------------------- */

void ckc_px_change_begin(ckc_px_change_t *c, int dirfd, const char *path)
{
	c->tok = 0;
	if (!c->canon || !path || !*path)
		return;
	int saved = errno;
	if (ckc_path_at(dirfd, path, c->canon) == 0) {
		ckc_enter();
		c->tok = ckc_dir_times_changing(c->canon);
		ckc_leave();
	}
	errno = saved;
}

int ckc_px_change_end(ckc_px_change_t *c, int rc)
{
	if (c->tok) {
		int saved = errno;
		ckc_enter();
		ckc_dir_times_changed(c->canon, c->tok, rc == 0);
		ckc_leave();
		errno = saved;
	}
	return rc;
}

/* A folder's link at canon about to be replaced or removed (ln -sfn, a
 * job's "current" link retargeted): what the cache holds under the link's
 * spelling belongs to the folder it leads to now, and goes there first
 * (0 or -errno). */
static int link_dir_hand_over(const char *canon)
{
	struct stat lst, st;
	if (!ckc_holds_objects() || REAL(lstat)(canon, &lst) != 0 || !S_ISLNK(lst.st_mode) ||
	    REAL(stat)(canon, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	ckc_enter();
	int rc = ckc_handover_dir(canon);
	ckc_leave();
	return rc;
}

static int unlink_tagged(const char *canon)
{
	int saved = errno;
	char other[PATH_MAX];
	ckc_stat_t st;
	int lrc = link_dir_hand_over(canon);
	if (lrc)
		return (int)ckc_result(lrc, saved);
	ckc_enter();
	bool held = ckc_stat_held(canon, &st) == 0;
	ckc_leave();
	/* written through its folder's other spelling: that version goes */
	if (!held && ckc_spelling_held(canon, other))
		canon = other;
	ckc_enter();
	int rc = ckc_unlink(canon);
	ckc_leave();
	return (int)ckc_result(rc, saved);
}

static int unlink_common(const char *path)
{
	char canon[PATH_MAX];
	if (ckc_tagged_asked(AT_FDCWD, path, canon))
		return ckc_enoent_checked(AT_FDCWD, path, unlink_tagged(canon));
	return ckc_enoent_checked(AT_FDCWD, path, REAL(unlink)(path));
}

CKC_EXPORT int unlink(const char *path)
{
	return CKC_CHANGING(AT_FDCWD, path, unlink_common(path));
}

static int unlinkat_common(int dirfd, const char *path, int flags)
{
	char canon[PATH_MAX];
	if (!(flags & AT_REMOVEDIR) && ckc_tagged_asked(dirfd, path, canon))
		return ckc_enoent_checked(dirfd, path, unlink_tagged(canon));
	if (flags & AT_REMOVEDIR)
		return ckc_enoent_checked(dirfd, path, ckc_dir_remove(dirfd, path, flags, REAL(unlinkat)));
	return ckc_enoent_checked(dirfd, path, REAL(unlinkat)(dirfd, path, flags));
}

CKC_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	return CKC_CHANGING(dirfd, path, unlinkat_common(dirfd, path, flags));
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

/* A new name (a folder, a symbolic link, a node) at dirfd/path: EEXIST where
 * the cache holds a checkpoint by that name that is not at its real path
 * yet, as the real call would fail on the file it stands for. */
static bool name_taken(int dirfd, const char *path)
{
	char canon[PATH_MAX];
	if (!ckc_tagged_asked(dirfd, path, canon) || !cached_now(canon))
		return false;
	errno = EEXIST;
	return true;
}

CKC_EXPORT int mkdir(const char *path, mode_t mode)
{
	return CKC_CHANGING(AT_FDCWD, path,
			name_taken(AT_FDCWD, path) ? -1 : ckc_enoent_checked(AT_FDCWD, path, REAL(mkdir)(path, mode)));
}

CKC_EXPORT int mkdirat(int dirfd, const char *path, mode_t mode)
{
	return CKC_CHANGING(dirfd, path,
			name_taken(dirfd, path) ? -1 : ckc_enoent_checked(dirfd, path, REAL(mkdirat)(dirfd, path, mode)));
}

/* A symbolic link made to a checkpoint this process holds: the checkpoint
 * is published first, so that whoever follows the link (another process, a
 * path the library does not tag) finds it. */
static void link_target_publish(int dirfd, const char *target, const char *path)
{
	char dir[PATH_MAX], t[PATH_MAX];
	if (!target || !*target || !ckc_holds_objects())
		return;
	int saved = errno;
	/* a relative target is taken from the link's folder */
	bool found = target[0] == '/' ? ckc_path_key(target, "/", t, sizeof(t)) == 0 :
		     ckc_path_at(dirfd, path, t) == 0 && ckc_path_dirname(t, dir, sizeof(dir)) == 0 &&
			     ckc_path_key(target, dir, t, sizeof(t)) == 0;
	if (found) {
		ckc_enter();
		(void)ckc_materialize(t);
		ckc_leave();
	}
	errno = saved;
}

static int symlink_common(const char *target, int dirfd, const char *path)
{
	if (name_taken(dirfd, path))
		return -1;
	link_target_publish(dirfd, target, path);
	return ckc_enoent_checked(dirfd, path,
				  dirfd == AT_FDCWD ? REAL(symlink)(target, path) : REAL(symlinkat)(target, dirfd, path));
}

CKC_EXPORT int symlink(const char *target, const char *path)
{
	return CKC_CHANGING(AT_FDCWD, path, symlink_common(target, AT_FDCWD, path));
}

CKC_EXPORT int symlinkat(const char *target, int dirfd, const char *path)
{
	return CKC_CHANGING(dirfd, path, symlink_common(target, dirfd, path));
}

CKC_EXPORT int mknod(const char *path, mode_t mode, dev_t dev)
{
	return CKC_CHANGING(AT_FDCWD, path,
			name_taken(AT_FDCWD, path) ? -1 : ckc_enoent_checked(AT_FDCWD, path, REAL(mknod)(path, mode, dev)));
}

CKC_EXPORT int mknodat(int dirfd, const char *path, mode_t mode, dev_t dev)
{
	return CKC_CHANGING(dirfd, path,
			name_taken(dirfd, path) ? -1 :
						  ckc_enoent_checked(dirfd, path, REAL(mknodat)(dirfd, path, mode, dev)));
}

CKC_EXPORT int mkfifo(const char *path, mode_t mode)
{
	return CKC_CHANGING(AT_FDCWD, path,
			name_taken(AT_FDCWD, path) ? -1 : ckc_enoent_checked(AT_FDCWD, path, REAL(mkfifo)(path, mode)));
}

CKC_EXPORT int mkfifoat(int dirfd, const char *path, mode_t mode)
{
	return CKC_CHANGING(dirfd, path,
			name_taken(dirfd, path) ? -1 : ckc_enoent_checked(dirfd, path, REAL(mkfifoat)(dirfd, path, mode)));
}

static int remove_common(const char *path)
{
	char canon[PATH_MAX];
	if (ckc_tagged_asked(AT_FDCWD, path, canon) && cached_now(canon))
		return unlink_tagged(canon);
	return ckc_enoent_checked(AT_FDCWD, path, REAL(remove)(path));
}

CKC_EXPORT int remove(const char *path)
{
	return CKC_CHANGING(AT_FDCWD, path, remove_common(path));
}

/* What the kernel would say about renaming within the cache: both folders
 * must exist, be folders (a file there is ENOTDIR, found on the way, before
 * any permission) and be writable, or the rename fails as the real one
 * would (and no flush is left to fail later into a rescue file). */
static int rename_dirs_ok(const char *cf, const char *ct)
{
	char dir[PATH_MAX];
	const char *ends[] = { cf, ct };
	struct stat st;

	for (int i = 0; i < 2; i++) {
		if (ckc_path_dirname(ends[i], dir, sizeof(dir)) != 0)
			continue;
		if (ckc_px_real_stat_path(dir, &st) != 0)
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		if (ckc_px_real_access(dir, W_OK | X_OK) != 0)
			return -errno;
	}
	return 0;
}

/* rename of a folder, which may hold cached checkpoints (cf: its path,
 * resolved from the working folder): they go to their real files before
 * the folder moves. Out of line, as the branches below: their paths are
 * on the stack only where they are needed. */
__attribute__((noinline)) static int rename_dir_first(int fd1, const char *from, int fd2, const char *to, unsigned flags,
						      int (*real)(int, const char *, int, const char *, unsigned),
						      char *cf, int saved)
{
	char base[PATH_MAX];
	if (fd1 != AT_FDCWD && from[0] != '/') {
		if (ckc_fd_name(fd1, base, sizeof(base)) > 0)
			ckc_path_resolve(from, base, cf, PATH_MAX);
	}
	ckc_dir_moving(cf);
	ckc_enter();
	int rc = ckc_handover_dir(cf);
	ckc_leave();
	if (rc)
		return (int)ckc_result(rc, saved);
	/* the paths the node's processes keep of directories go, before the
	 * move and after it (one looked up meanwhile may be the old one) */
	ckc_node_moves_note();
	rc = real(fd1, from, fd2, to, flags);
	int e = errno;
	ckc_node_moves_note();
	errno = e;
	return rc;
}

/* rename where either name is tagged (tf, tt; canonical cf, ct): true
 * with *out the answer where the cache renamed (or refused); false where
 * the real call is to be made, what the cache held of either name having
 * gone to its real file (cf becomes the spelling the cache held it by). */
__attribute__((noinline)) static bool rename_held(char *cf, const char *ct, bool tf, bool tt, unsigned flags,
						  int saved, int *out)
{
	ckc_stat_t st;
	ckc_enter();
	bool cached = tf && ckc_stat(cf, &st) == 0;
	ckc_leave();
	/* written through its folder's other spelling: that version moves */
	char other[PATH_MAX];
	if (tf && !cached && ckc_spelling_held(cf, other)) {
		strcpy(cf, other);
		cached = true;
	}
	/* over a file written in place (a descriptor of its real file open
	 * for writing, here or in another process of the node): the real
	 * files take over, so that the kernel's rename leaves that
	 * descriptor the file it replaced, as its writes expect (the cache's
	 * rename left the name the file's until the new version was
	 * published, which found the writes there and kept them) */
	bool dest_inplace = cached && tt && (ckc_node_inplace_any(ct) || ckc_real_writer_open(ct));
	ckc_enter();
	bool dest_cached = tt && ckc_stat(ct, &st) == 0;
	int rc = 0;
	/* into a folder no pattern tags, through a folder's link: the
	 * real files take over (below), as for a write's open there */
	char lreal[PATH_MAX];
	bool dest_untagged = cached && tt && ckc_link_real(ct, lreal) && !ckc_tag_match(lreal);
	if (cached && tt && !dest_untagged && !dest_inplace && !(flags & RENAME_EXCHANGE)) {
		struct stat rst;
		bool dest_real = !dest_cached && ckc_px_real_stat_path(ct, &rst) == 0;
		if ((flags & RENAME_NOREPLACE) && (dest_cached || dest_real))
			rc = -EEXIST;
		else if (dest_real && S_ISDIR(rst.st_mode))
			rc = -EISDIR; /* a file never replaces a directory */
		else if ((rc = rename_dirs_ok(cf, ct)) == 0)
			rc = ckc_rename(cf, ct);
		ckc_leave();
		*out = (int)ckc_result(rc, saved);
		return true;
	}
	/* the real files take over: what the cache holds of either
	 * name goes to its real file first (a writer's descriptors
	 * follow it there), so that the kernel's rename, whether it
	 * succeeds, fails (a missing source, NOREPLACE) or exchanges,
	 * finds what the program wrote */
	ckc_leave();
	if (cached)
		rc = ckc_hand_over_path(cf);
	if (!rc && dest_cached)
		rc = ckc_hand_over_path(ct);
	ckc_enter();
	if (!rc && dest_cached)
		ckc_forget(ct);
	if (!rc && cached && (flags & RENAME_EXCHANGE))
		ckc_forget(cf);
	ckc_leave();
	if (rc) {
		*out = (int)ckc_result(rc, saved);
		return true;
	}
	return false;
}

/* rename for any pair of directory descriptors; real() does the real call */
static int rename_common(int fd1, const char *from, int fd2, const char *to, unsigned flags,
			 int (*real)(int, const char *, int, const char *, unsigned))
{
	char cf[PATH_MAX], ct[PATH_MAX];
	int saved = errno;
	bool tf = ckc_tagged_asked(fd1, from, cf);
	bool tt = ckc_tagged_asked(fd2, to, ct);
	struct stat ds;

	/* a directory (tagged or not) may hold cached checkpoints: they go to
	 * their real files before the directory moves */
	if (atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) && !ckc_io_guard &&
	    !ckc_in_vfork_child() &&
	    REAL(fstatat)(fd1, from, &ds, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(ds.st_mode) &&
	    ckc_path_resolve(from, NULL, cf, sizeof(cf)) == 0)
		return rename_dir_first(fd1, from, fd2, to, flags, real, cf, saved);

	int out;
	if ((tf || tt) && rename_held(cf, ct, tf, tt, flags, saved, &out))
		return out;
	if (tt) {
		int lrc = link_dir_hand_over(ct);
		if (lrc == 0 && (flags & RENAME_EXCHANGE) && tf)
			lrc = link_dir_hand_over(cf);
		if (lrc)
			return (int)ckc_result(lrc, saved);
	}
	errno = saved; /* the cache's looks may have set it */
	int rc = real(fd1, from, fd2, to, flags);
	/* a descriptor open at the real file now has it by the new name */
	if (rc == 0 && tf && tt)
		ckc_passed_renamed(cf, ct, flags & RENAME_EXCHANGE);
	return rc;
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

/* ENOENT of a call on two paths where either uses a checkpoint the cache
 * holds as a folder: ENOTDIR, as the kernel says. */
static int two_paths_checked(int fd1, const char *from, int fd2, const char *to, int rc)
{
	rc = ckc_enoent_checked(fd1, from, rc);
	return ckc_enoent_checked(fd2, to, rc);
}

/* rename_common, a change of both folders */
static int rename_changing(int fd1, const char *from, int fd2, const char *to, unsigned flags)
{
	ckc_px_change_t c1 = CKC_CHANGE_INIT, c2 = CKC_CHANGE_INIT;
	ckc_px_change_begin(&c1, fd1, from);
	ckc_px_change_begin(&c2, fd2, to);
	int rc = two_paths_checked(fd1, from, fd2, to, rename_common(fd1, from, fd2, to, flags, real_rename2));
	ckc_px_change_end(&c2, rc);
	return ckc_px_change_end(&c1, rc);
}

CKC_EXPORT int rename(const char *from, const char *to)
{
	return rename_changing(AT_FDCWD, from, AT_FDCWD, to, 0);
}

CKC_EXPORT int renameat(int fd1, const char *from, int fd2, const char *to)
{
	return rename_changing(fd1, from, fd2, to, 0);
}

CKC_EXPORT int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned int flags)
{
	return rename_changing(fd1, from, fd2, to, flags);
}

/* A hard link names the real file: a cached checkpoint goes there first
 * (and is forgotten: a file with two names is written directly from then
 * on), so the new name holds the current bytes. A cached checkpoint at the
 * new name exists for the program: EEXIST, as the kernel would say. */
static int link_common(int fd1, const char *from, int fd2, const char *to, int flags, bool at)
{
	char cf[PATH_MAX], ct[PATH_MAX];
	int saved = errno;

	/* a checkpoint the cache holds at the new name goes to its real file,
	 * where the kernel finds it (EEXIST, or the source's error first) */
	if (ckc_tagged_asked(fd2, to, ct) && cached_now(ct)) {
		int rc = ckc_hand_over_path(ct);
		if (rc)
			return (int)ckc_result(rc, saved);
	}
	if (ckc_tagged_asked(fd1, from, cf)) {
		int rc = ckc_hand_over_path(cf);
		if (rc)
			return (int)ckc_result(rc, saved);
	}
	errno = saved; /* the cache's looks may have set it */
	return two_paths_checked(fd1, from, fd2, to,
				 at ? REAL(linkat)(fd1, from, fd2, to, flags) : REAL(link)(from, to));
}

CKC_EXPORT int link(const char *from, const char *to)
{
	return CKC_CHANGING(AT_FDCWD, to, link_common(AT_FDCWD, from, AT_FDCWD, to, 0, false));
}

CKC_EXPORT int linkat(int fd1, const char *from, int fd2, const char *to, int flags)
{
	return CKC_CHANGING(fd2, to, link_common(fd1, from, fd2, to, flags, true));
}

/* ---- mapping and copying --------------------------------------------- */

/* Turns v's numbers, and every other descriptor of its file, into
 * descriptors of the real file, which gets the bytes first: for calls the
 * cache cannot serve (mmap). */
static int degrade_vfd(ckc_vfd_t *v)
{
	int saved = errno;
	int rc = ckc_px_vfd_make_real(v);
	if (rc == -ESTALE) {
		/* the real file holds a newer version than this descriptor reads */
		ckc_error("checkpoint %s: a descriptor of a version replaced since cannot be "
			  "mapped", v->path);
		rc = -ENODEV;
	}
	return (int)ckc_result(rc, saved);
}

/* fd's checkpoint to its real file before a mapping of it; its path in
 * canon (empty: fd is not a checkpoint's). 0 or -1 (errno set). */
static int degrade(int fd, char *canon)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	canon[0] = '\0';
	if (!v)
		return 0;
	char now[PATH_MAX];
	const char *name = ckc_vfd_name(v, now);
	if (name)
		snprintf(canon, PATH_MAX, "%s", name);
	int rc = degrade_vfd(v);
	ckc_vfd_drop(v);
	return rc;
}

/* A file's mapping: a checkpoint's goes to its real file first, and a
 * mapping of a tagged path's real file is noted (ckc_mapped_add). */
static void *map_file(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len, int prot,
		      int flags, int fd, off_t off)
{
	char canon[PATH_MAX];
	canon[0] = '\0';
	if (!(flags & MAP_ANONYMOUS) && ckc_vfd_get(fd) && degrade(fd, canon) != 0)
		return MAP_FAILED;
	void *p = real(addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED && !(flags & MAP_ANONYMOUS)) {
		int saved = errno;
		ckc_mapped_add(fd, canon[0] ? canon : NULL, p, len);
		errno = saved;
	}
	return p;
}

CKC_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return map_file(REAL(mmap), addr, len, prot, flags, fd, off);
}

CKC_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return map_file(REAL(mmap64), addr, len, prot, flags, fd, off);
}

/* Where a copy out of v begins: *inoff, or the descriptor's position
 * (taken, and set after the copy, as the kernel's sendfile does: the
 * descriptor is not locked while the copy waits for its output, so another
 * thread's read, lseek or fstat of it goes on meanwhile). */
static off_t copy_at(ckc_vfd_t *v, const off_t *inoff)
{
	if (inoff)
		return *inoff;
	ckc_mutex_lock(&v->lock);
	off_t off = (off_t)v->pos;
	ckc_mutex_unlock(&v->lock);
	return off;
}

/* After a copy out of v: *inoff, or the descriptor's position, at off. */
static void copy_at_set(ckc_vfd_t *v, off_t *inoff, off_t off)
{
	if (inoff) {
		*inoff = off;
		return;
	}
	ckc_mutex_lock(&v->lock);
	ckc_vfd_pos_set(v, (uint64_t)off);
	ckc_mutex_unlock(&v->lock);
}

/* A copy out of a tagged checkpoint whose real file holds it, into an
 * untagged descriptor, where no tier holds it or the page cache holds the
 * range: the kernel's own copy call on the real file (no copy through user
 * memory, as without the library; into a pipe, the page cache's pages
 * themselves). Returns the bytes copied, -errno, or CKC_PASS when the copy
 * must go through the cache. */
static ssize_t copy_from_home(ckc_vfd_t *v, off_t *inoff, int out, off_t *outoff, size_t count,
			      unsigned flags, ssize_t (*real)(int, off_t *, int, off_t *, size_t, unsigned))
{
	if (ckc_px_vfd_usable(v) || (v->flags & O_ACCMODE) == O_WRONLY)
		return CKC_PASS;
	off_t off = copy_at(v, inoff), start = off;
	ckc_enter();
	int fd = ckc_handle_home_fd(v->h, (uint64_t)off, count);
	ckc_leave();
	if (fd < 0)
		return CKC_PASS;
	ssize_t n = real(fd, &off, out, outoff, count, flags);
	int e = errno;
	if (n > 0) {
		copy_at_set(v, inoff, off);
		ckc_enter();
		ckc_handle_note_read(v->h, (uint64_t)start, (uint64_t)n);
		ckc_leave();
	}
	return n < 0 ? -e : n;
}

static ssize_t real_cfr(int in, off_t *inoff, int out, off_t *outoff, size_t count, unsigned flags)
{
	return REAL(copy_file_range)(in, inoff, out, outoff, count, flags);
}

static ssize_t real_sendfile(int in, off_t *inoff, int out, off_t *outoff, size_t count, unsigned flags)
{
	(void)outoff; /* sendfile writes at out's position */
	(void)flags;
	return REAL(sendfile64)(out, in, inoff, count);
}

static ssize_t real_splice(int in, off_t *inoff, int out, off_t *outoff, size_t count, unsigned flags)
{
	return REAL(splice)(in, inoff, out, outoff, count, flags);
}

/* Where an emulated copy's pieces go: out, written until each is taken
 * whole (a file; a socket, where sendfile too waits until all is sent,
 * and a non-blocking one takes part or nothing), or, into a pipe, through
 * a pipe of the library's own from which the kernel splices into out.
 * Through that pipe the copy is the kernel's: it waits only until out
 * takes something (not at all where out, or the call's flags, say not
 * to), moves what out takes, and returns that count; what out did not
 * take stays behind in the library's pipe. (A write() into a pipe waits
 * until all of it is taken: a program that reads that pipe later, in the
 * same thread, would wait forever.) What did not reach out is given back
 * to the input's offset. */
struct copy_out {
	int fd;
	off_t *off;     /* NULL: out's position */
	int pipe[2];    /* the library's pipe; -1: none */
	unsigned flags; /* splice's */
};

/* The library's pipe for o, which limits the pieces to *piece: 0, or -1
 * where none can be had. A blocking one: the kernel's splice between pipes
 * does not wait for room in out where either pipe is non-blocking, and a
 * piece never exceeds what it holds, so writing into it never waits. */
static int copy_out_pipe(struct copy_out *o, size_t *piece)
{
	/* the library's, above the program's numbers (intercept.h) */
	ckc_fd_quiet_begin();
	int rc = made_two(REAL(pipe2) ? REAL(pipe2)(o->pipe, O_CLOEXEC) : -1, o->pipe);
	if (rc == 0) {
		o->pipe[0] = ckc_fd_above(o->pipe[0], CKC_FD_OWN_FLOOR);
		o->pipe[1] = ckc_fd_above(o->pipe[1], CKC_FD_OWN_FLOOR);
	}
	ckc_fd_quiet_end();
	if (rc != 0) {
		o->pipe[0] = o->pipe[1] = -1;
		return -1;
	}
	int cap = REAL(fcntl)(o->pipe[1], F_SETPIPE_SZ, (int)*piece);
	if (cap <= 0)
		cap = REAL(fcntl)(o->pipe[1], F_GETPIPE_SZ);
	if (cap > 0 && (size_t)cap < *piece)
		*piece = (size_t)cap;
	return 0;
}

/* One piece of n bytes to o: the bytes it took (after the first piece, a
 * pipe's reader is not waited for again: the kernel's sendfile and splice
 * return then), or -errno where it took none. */
static ssize_t copy_put(struct copy_out *o, const char *buf, size_t n, bool first)
{
	if (o->pipe[1] >= 0) {
		ssize_t in = REAL(write)(o->pipe[1], buf, n);
		if (in <= 0)
			return in < 0 ? -errno : -EIO;
		unsigned f = o->flags | (first ? 0 : SPLICE_F_NONBLOCK);
		ssize_t moved = REAL(splice)(o->pipe[0], NULL, o->fd, NULL, (size_t)in, f);
		return moved < 0 ? -errno : moved;
	}
	size_t done = 0;
	while (done < n) {
		ssize_t w = o->off ? pwrite(o->fd, buf + done, n - done, *o->off + (off_t)done) :
				     write(o->fd, buf + done, n - done);
		if (w <= 0)
			return done ? (ssize_t)done : (w < 0 ? -errno : -EIO);
		done += (size_t)w;
	}
	return (ssize_t)done;
}

/* Gives back to in's position (inoff NULL) the n bytes read from it that
 * did not reach out. */
static void copy_unread(int in, off_t *inoff, ssize_t n)
{
	if (!inoff && n > 0)
		(void)lseek(in, -(off_t)n, SEEK_CUR);
}

/* A send of lent tier memory into a socket: what it takes without waiting
 * (0 where it is full), or -errno. */
static ssize_t lend_send(void *ctx, const void *p, size_t n)
{
	int fd = *(const int *)ctx;
	ssize_t k = REAL(send) ? REAL(send)(fd, p, n, MSG_DONTWAIT) : (errno = ENOSYS, -1);
	if (k >= 0)
		return k;
	return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

/* Into a socket out of a checkpoint a host tier holds (sendfile): up to
 * want bytes go from the tier's memory to the socket, where a read would
 * first copy them into a buffer; without waiting, so that no tier memory
 * stays held while the socket is full (the piece then goes through the
 * buffer, which waits as the kernel's sendfile does). The input's offset
 * moves by what was sent, as after a read. Returns the bytes sent, 0 where
 * none went this way, or -errno. */
static ssize_t copy_lent(ckc_vfd_t *v, off_t *inoff, int out, size_t want)
{
	if (ckc_px_vfd_usable(v))
		return 0;
	off_t off = copy_at(v, inoff);
	ckc_enter();
	ssize_t k = ckc_handle_lend(v->h, (uint64_t)off, want, lend_send, &out);
	ckc_leave();
	if (k > 0)
		copy_at_set(v, inoff, off + k);
	return k;
}

/* Copies count bytes from in (vin: its checkpoint's descriptor, or NULL)
 * to out through a buffer, with each side's offset pointer (NULL: the
 * descriptor's position), as the wrappers would; out of a checkpoint into
 * a pipe, as the kernel copies into one (flags: splice's; tin, tout: the
 * descriptors' file types, copy_check's). */
static ssize_t copy_emulated(int in, ckc_vfd_t *vin, off_t *inoff, int out, off_t *outoff, size_t count,
			     unsigned flags, mode_t tin, mode_t tout)
{
	struct copy_out o = { .fd = out, .off = outoff, .pipe = { -1, -1 }, .flags = flags };
	size_t piece = count < (1u << 20) ? (count ? count : 1) : (1u << 20);
	if (!outoff && vin && !ckc_vfd_get(out) && S_ISFIFO(tout)) {
		/* pieces of what out holds: more would be read from the
		 * checkpoint to be given back */
		int cap = REAL(fcntl)(out, F_GETPIPE_SZ);
		if (cap > 0 && (size_t)cap < piece)
			piece = (size_t)cap;
		(void)copy_out_pipe(&o, &piece); /* (else written, as into a file) */
	}
	/* out of a pipe or a socket, as the kernel's splice out of one: the
	 * call waits for the first bytes (not at all with SPLICE_F_NONBLOCK),
	 * and moves more only while more is there */
	bool stream = !inoff && !vin && (S_ISFIFO(tin) || S_ISSOCK(tin));
	/* into a pipe, out of a file: the kernel's pipe takes a page a slot,
	 * the first from the offset to the end of its page */
	size_t skew = 0;
	if (o.pipe[1] >= 0 && count > piece) {
		off_t at = inoff ? *inoff : lseek(in, 0, SEEK_CUR);
		skew = at > 0 ? (size_t)(at % 4096) : 0;
	}
	/* into a socket: from a host tier's memory where it holds the bytes */
	ckc_vfd_t *lend = !outoff && o.pipe[1] < 0 && S_ISSOCK(tout) ? vin : NULL;
	char *buf = malloc(piece);
	ssize_t total = 0;
	while (buf && (size_t)total < count) {
		size_t want = count - (size_t)total < piece ? count - (size_t)total : piece;
		if (total == 0 && skew && want == piece && piece > skew)
			want = piece - skew;
		if (lend) {
			ssize_t k = copy_lent(lend, inoff, out, want);
			if (k < 0) {
				if (total == 0)
					total = k;
				break;
			}
			total += k;
			if (k > 0)
				continue;
		}
		if (stream && (total > 0 || (flags & SPLICE_F_NONBLOCK))) {
			struct pollfd pf = { .fd = in, .events = POLLIN };
			if (poll(&pf, 1, 0) <= 0) {
				if (total == 0)
					total = -EAGAIN;
				break;
			}
		}
		ssize_t n = inoff ? pread(in, buf, want, *inoff) : read(in, buf, want);
		if (n <= 0) {
			if (n < 0 && total == 0)
				total = -errno;
			break;
		}
		ssize_t put = copy_put(&o, buf, (size_t)n, total == 0);
		copy_unread(in, inoff, put < 0 ? n : n - put);
		if (put < 0) {
			if (total == 0)
				total = put;
			break;
		}
		if (inoff)
			*inoff += put;
		if (outoff)
			*outoff += put;
		total += put;
		if (put < n || (size_t)n < want)
			break;
	}
	if (!buf)
		total = -ENOMEM;
	free(buf);
	if (o.pipe[0] >= 0) {
		close(o.pipe[0]);
		close(o.pipe[1]);
	}
	return total;
}

/* What the kernel checks of a copy call's descriptors before it moves a
 * byte, for a call with a tagged side (whose flags the kernel would see on
 * the real file): 0 or -errno. An input not open for reading, an output
 * not open for writing: EBADF; an output in append mode: EBADF for
 * copy_file_range, EINVAL for sendfile and splice; a splice with no pipe
 * on either side: EINVAL. */
enum copy_call { COPY_CFR, COPY_SENDFILE, COPY_SPLICE };

static int copy_fd_flags(int fd, ckc_vfd_t *v, mode_t *type)
{
	*type = S_IFREG; /* a checkpoint is a file */
	if (v)
		return v->flags;
	int fl = REAL(fcntl)(fd, F_GETFL);
	struct stat st;
	if (fl >= 0 && REAL(fstat)(fd, &st) == 0)
		*type = st.st_mode & S_IFMT;
	return fl < 0 ? -EBADF : fl;
}

static int copy_check(int in, ckc_vfd_t *vin, int out, ckc_vfd_t *vout, enum copy_call call, mode_t *tinp,
		      mode_t *toutp)
{
	mode_t tin, tout;
	int fin = copy_fd_flags(in, vin, &tin), fout = copy_fd_flags(out, vout, &tout);
	*tinp = tin;
	*toutp = tout;
	if (fin < 0 || fout < 0)
		return -EBADF;
	/* copy_file_range copies between files only */
	if (call == COPY_CFR && (tin == S_IFDIR || tout == S_IFDIR))
		return -EISDIR;
	if (call == COPY_CFR && (tin != S_IFREG || tout != S_IFREG))
		return -EINVAL;
	if ((fin & O_ACCMODE) == O_WRONLY || (fout & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	/* splice moves bytes through a pipe on one side */
	if (call == COPY_SPLICE && tin != S_IFIFO && tout != S_IFIFO)
		return -EINVAL;
	if ((fout & O_APPEND) && tout == S_IFREG)
		return call == COPY_CFR ? -EBADF : -EINVAL;
	return 0;
}

/* Whether a copy_file_range of count bytes within one checkpoint has
 * overlapping ranges (the kernel refuses them with EINVAL): the range read
 * is what the file holds from the input's offset, at most count. */
static bool copy_overlaps(ckc_vfd_t *vin, const off_t *inoff, ckc_vfd_t *vout, const off_t *outoff, size_t count)
{
	/* (one file in the kernel's terms: one version, whatever names its
	 * descriptors were opened by, or the versions of one name; a file
	 * made at a name after an unlink is another) */
	if (!vin->h || !vout->h || ckc_handle_version(vin->h) != ckc_handle_version(vout->h)) {
		char a[PATH_MAX], b[PATH_MAX];
		const char *na = ckc_vfd_file_name(vin, a), *nb = ckc_vfd_file_name(vout, b);
		if (!na || !nb || strcmp(na, nb) != 0)
			return false;
	}
	uint64_t at_in = inoff ? (uint64_t)*inoff : ckc_vfd_pos(vin),
		 at_out = outoff ? (uint64_t)*outoff : ckc_vfd_pos(vout);
	uint64_t size = ckc_handle_size(vin->h);
	if (at_in >= size)
		return false;
	uint64_t n = size - at_in < count ? size - at_in : count;
	return at_out + n > at_in && at_out < at_in + n;
}

/* A copy call with a tagged side. Into a checkpoint from an untagged file
 * (cp's copy_file_range): the kernel copies into a file in one pass, where
 * the cache would take the bytes through user memory and write them again
 * at the end, so the checkpoint becomes its real file (handed over, its
 * bytes so far published) and the real call runs. Out of a checkpoint only
 * its real file holds, into an untagged descriptor: the real call on that
 * file. Anything else goes through the cache. */
static ssize_t copy_held(int in, ckc_vfd_t *vin, off_t *inoff, int out, ckc_vfd_t *vout, off_t *outoff,
			 size_t count, unsigned flags, ssize_t (*real)(int, off_t *, int, off_t *, size_t, unsigned),
			 enum copy_call call)
{
	mode_t tin, tout;
	ssize_t n = copy_check(in, vin, out, vout, call, &tin, &tout);
	if (n)
		return n;
	/* a negative offset: the kernel's answer (copy_file_range's is
	 * EOVERFLOW; a read at it would say EINVAL) */
	if ((inoff && *inoff < 0) || (outoff && *outoff < 0))
		return call == COPY_CFR ? -EOVERFLOW : -EINVAL;
	if (count > CKC_RW_MAX)
		count = CKC_RW_MAX;
	if (call == COPY_CFR && vin && vout && copy_overlaps(vin, inoff, vout, outoff, count))
		return -EINVAL;
	n = CKC_PASS;
	if (vout && !vin && call != COPY_SPLICE && ckc_vfd_demote(vout) == 0 && !ckc_vfd_get(out)) {
		n = real(in, inoff, out, outoff, count, flags);
		return n < 0 ? -errno : n;
	}
	if (vin && !vout)
		n = copy_from_home(vin, inoff, out, outoff, count, flags, real);
	return n == CKC_PASS ? copy_emulated(in, vin, inoff, out, outoff, count, flags, tin, tout) : n;
}

/* copy_held with each side's descriptor held for the copy. */
static ssize_t copy_tagged(int in, off_t *inoff, int out, off_t *outoff, size_t count, unsigned flags,
			   ssize_t (*real)(int, off_t *, int, off_t *, size_t, unsigned), enum copy_call call)
{
	ckc_vfd_t *vin = ckc_vfd_held(in), *vout = ckc_vfd_held(out);
	ssize_t n = copy_held(in, vin, inoff, out, vout, outoff, count, flags, real, call);
	ckc_vfd_drop(vin);
	ckc_vfd_drop(vout);
	return n;
}

CKC_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	if (!ckc_vfd_get(in) && !ckc_vfd_get(out))
		return REAL(sendfile)(out, in, off, count);
	int saved = errno;
	return ckc_result(copy_tagged(in, off, out, NULL, count, 0, real_sendfile, COPY_SENDFILE), saved);
}

CKC_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	if (!ckc_vfd_get(in) && !ckc_vfd_get(out))
		return REAL(sendfile64)(out, in, off, count);
	int saved = errno;
	return ckc_result(copy_tagged(in, off, out, NULL, count, 0, real_sendfile, COPY_SENDFILE), saved);
}

CKC_WARM_PATH CKC_EXPORT ssize_t copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t count,
						 unsigned int flags)
{
	if (!ckc_vfd_get(in) && !ckc_vfd_get(out))
		return REAL(copy_file_range)(in, inoff, out, outoff, count, flags);
	int saved = errno;
	if (flags) {
		errno = EINVAL;
		return -1;
	}
	return ckc_result(copy_tagged(in, inoff, out, outoff, count, 0, real_cfr, COPY_CFR), saved);
}

CKC_EXPORT ssize_t splice(int in, off_t *inoff, int out, off_t *outoff, size_t count,
			  unsigned int flags)
{
	if (!ckc_vfd_get(in) && !ckc_vfd_get(out))
		return REAL(splice)(in, inoff, out, outoff, count, flags);
	int saved = errno;
	return ckc_result(copy_tagged(in, inoff, out, outoff, count, flags, real_splice, COPY_SPLICE), saved);
}
