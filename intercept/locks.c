/* File locks on tagged descriptors. A tagged descriptor is a placeholder
 * on which the kernel refuses locks (EBADF). Record locks (fcntl(2)'s lock
 * commands, lockf(3)) exist to exclude other processes, which lock the
 * real file: the descriptor becomes the real file's first (the version
 * published there), and the kernel takes the lock. flock(2) (HDF5 takes
 * one on every file it opens) keeps the checkpoint in the cache: it is
 * taken on a descriptor of the real file, opened as the tagged one was, so
 * that a process without the library locks the same inode; a checkpoint
 * whose real file does not exist yet (a new version not published) is
 * locked through a lock file of its path, in a 0700 folder of the user's
 * under /dev/shm (else the library's private folder), the same for every
 * process of the user that runs with the library. When the descriptor
 * goes to the real file (a child, another process that needs the file),
 * the real file's locked descriptor becomes the program's, so its lock
 * stays with it.
 *
 * A lock file goes when a process that used it ends (exit, _exit): it
 * opens each lock file it used anew, takes it exclusively without waiting,
 * and removes it while it holds it; one that another process holds, or
 * has locked through a descriptor inherited, stays. Whoever locks a lock
 * file looks, once it has the lock, whether the path still names the file
 * it locked, and else opens it anew and locks again: a lock on a removed
 * file excludes nobody. (Removed at each close instead, a process that
 * locks and closes in a loop took the lock file from a waiting one each
 * time, which then found its lock on a removed file, over and over.) */
#include "config.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "intercept.h"
#include "log.h"
#include "state.h"

static ckc_mutex_t lockdir_mu = CKC_MUTEX_INIT(LOCKDIR);
CKC_LOCKS_AT_START(lockdir, ckc_locks_add, &lockdir_mu)

/* The folder of the lock files: created 0700, refused when it is not the
 * user's own folder. With lockdir_mu held, as every use of a lock file. */
static int lock_dir(char *out, size_t len)
{
	static char dir[PATH_MAX];
	int rc = 0;
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
	return rc;
}

static int lockfile_open(const char *canon, uint64_t *hash);

/* a lock file's key: a path, or an unnamed version's (lock_name) */
#define LOCK_KEY_MAX (PATH_MAX + 64)

/* The lock files this process opened (their names' hashes), removed at
 * its end where nobody holds them (ckc_locks_sweep); with lockdir_mu held.
 * One opened past the last slot stays. */
#define LOCKS_USED 1024
static uint64_t locks_used[LOCKS_USED];
static unsigned locks_nused;

/* v's lock descriptor kept in slot; CKC_HANDED where v's numbers name
 * the real file now (the lock is theirs to take, no descriptor of v's is
 * opened for it); -1: none opened yet. */
static int lock_slot(ckc_vfd_t *v, atomic_int *slot)
{
	int fd = atomic_load(slot);
	if (fd >= 0)
		return fd;
	return __atomic_load_n(&v->switched, __ATOMIC_ACQUIRE) ? CKC_HANDED : -1;
}

/* The name v's locks go by, in key: the name of its file in the kernel's
 * terms (ckc_vfd_file_name: renamed since it was opened, the new one). A
 * version unlinked or renamed over has none, and no real file: NULL, and
 * key holds a name of that version's alone, in this process, for its lock
 * file (the file now at its old name is another one, whose lockers it
 * must not exclude). A lock file once opened stays the descriptor's (its
 * key kept beside it) until a process's end removes it: a lock taken
 * before a rename stays on the file it was taken on. */
static const char *lock_name(const ckc_vfd_t *v, char key[LOCK_KEY_MAX])
{
	const char *name = ckc_vfd_file_name(v, key);
	if (!name)
		snprintf(key, LOCK_KEY_MAX, "(unnamed %ld %#llx)", (long)getpid(),
			 (unsigned long long)ckc_handle_version(v->h));
	return name;
}

/* The descriptor v's locks are taken on, opened once per virtual
 * descriptor: the real file at its name, else the lock file of the name. */
static int lock_fd(ckc_vfd_t *v)
{
	int fd = lock_slot(v, &v->lock_fd);
	if (fd != -1)
		return fd;
	int (*ro)(const char *, int, ...) = REAL(open);
	if (!ro)
		return -ENOSYS;
	bool real = true;
	char key[LOCK_KEY_MAX];
	const char *name = lock_name(v, key);
	/* (kept above the program's numbers while v holds locks) */
	if (name) {
		ckc_fd_quiet_begin();
		fd = ckc_fd_quiet_made_mine(ro(name, (v->flags & O_ACCMODE) | O_CLOEXEC | O_NOCTTY),
					    CKC_FD_OWN_FLOOR);
		if (fd < 0)
			fd = -errno;
	} else {
		fd = -ENOENT;
	}
	uint64_t h = 0;
	ckc_mutex_lock(&lockdir_mu);
	if (fd == -ENOENT) {
		real = false;
		fd = lockfile_open(key, &h); /* (above the program's numbers too) */
	}
	int have = atomic_load(&v->lock_fd);
	if (fd >= 0 && have < 0) {
		v->lock_real = real; /* (before the descriptor is there to be seen) */
		v->lock_fd_key = h;
		atomic_store(&v->lock_fd, fd);
	}
	ckc_mutex_unlock(&lockdir_mu);
	if (fd >= 0 && have >= 0) {
		ckc_fd_mine_close(fd);
		return have;
	}
	return fd;
}

static uint64_t lockfile_hash(const char *canon)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *c = canon; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	return h;
}

/* The path of the lock file of hash h (lockdir_mu held): -errno when there
 * is no folder. */
static int lockfile_name(uint64_t h, char *path, size_t len)
{
	char dir[PATH_MAX];
	int rc = lock_dir(dir, sizeof(dir));
	if (rc)
		return rc;
	snprintf(path, len, "%s/lock.%016llx", dir, (unsigned long long)h);
	return 0;
}

/* The lock file of path (lockdir_mu held), its key's hash in *hash:
 * -errno when none can be had. */
static int lockfile_open(const char *canon, uint64_t *hash)
{
	char path[PATH_MAX + 32];
	uint64_t h = lockfile_hash(canon);
	*hash = h;
	int rc = lockfile_name(h, path, sizeof(path));
	if (rc)
		return rc;
	/* (the library's file, above the program's numbers: intercept.h) */
	ckc_fd_quiet_begin();
	int fd = ckc_fd_quiet_made_mine(REAL(open)(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600),
					CKC_FD_OWN_FLOOR);
	if (fd < 0)
		return -errno;
	unsigned k = 0;
	while (k < locks_nused && locks_used[k] != h)
		k++;
	if (k == locks_nused && k < LOCKS_USED)
		locks_used[locks_nused++] = h;
	return fd;
}

/* Whether descriptor fd is of the file at path (relative to folder dfd,
 * fstatat's flags) now: a publication replaces the file the descriptor was
 * opened on; a process's end removes a lock file. */
static bool lock_fd_current_at(int fd, int dfd, const char *path, int atflags)
{
	struct stat a, b;
	return REAL(fstatat) && REAL(fstat)(fd, &a) == 0 && REAL(fstatat)(dfd, path, &b, atflags) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static bool lock_fd_current(int fd, const char *path)
{
	return lock_fd_current_at(fd, AT_FDCWD, path, 0);
}

/* Lock files that no process's end removed (its process ended by an
 * exec, a signal or a crash, or had opened more than LOCKS_USED): a
 * process that used lock files looks, at its end, at up to
 * LOCKS_STALE_LOOK of the folder's, and removes each older than
 * LOCKS_STALE_S that it can take exclusively without waiting (as its own:
 * one held stays, and one removed under a process that has it open is
 * opened anew by that process's next lock). The cost stays with the
 * processes that lock new checkpoints, and is bounded. The folder is read
 * with getdents64 into the stack, not readdir: this runs at _exit, which a
 * signal handler may call, where allocating is not safe. lockdir_mu held. */
#define LOCKS_STALE_S 600
#define LOCKS_STALE_LOOK 256

struct lock_dirent {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

static void locks_sweep_stale(void)
{
	char dir[PATH_MAX];
	if (lock_dir(dir, sizeof(dir)) != 0 || !REAL(fstatat) || !REAL(unlinkat))
		return;
	ckc_fd_quiet_begin();
	int dfd = ckc_fd_quiet_made(REAL(open)(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW), CKC_FD_OWN_FLOOR);
	if (dfd < 0)
		return;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	_Alignas(8) char buf[4096];
	unsigned looked = 0;
	long n;
	while (looked < LOCKS_STALE_LOOK && (n = ckc_syscall6(SYS_getdents64, dfd, (long)buf, sizeof(buf), 0, 0, 0)) > 0) {
		for (long off = 0; off < n && looked < LOCKS_STALE_LOOK;) {
			const struct lock_dirent *d = (const void *)(buf + off);
			off += d->reclen;
			if (strncmp(d->name, "lock.", 5) != 0)
				continue;
			looked++;
			struct stat st;
			if (REAL(fstatat)(dfd, d->name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
			    now.tv_sec - st.st_mtime < LOCKS_STALE_S)
				continue;
			ckc_fd_quiet_begin();
			int fd = REAL(openat)(dfd, d->name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
			if (fd >= 0) {
				if (REAL(flock)(fd, LOCK_EX | LOCK_NB) == 0 &&
				    lock_fd_current_at(fd, dfd, d->name, AT_SYMLINK_NOFOLLOW))
					(void)REAL(unlinkat)(dfd, d->name, 0);
				REAL(close)(fd);
			}
			ckc_fd_quiet_end();
		}
	}
	REAL(close)(dfd);
}

void ckc_locks_sweep(void)
{
	char path[PATH_MAX + 32];
	if (!REAL(open) || !REAL(flock) || !REAL(close))
		return;
	ckc_mutex_lock(&lockdir_mu);
	if (locks_nused)
		locks_sweep_stale();
	for (unsigned k = 0; k < locks_nused; k++) {
		if (lockfile_name(locks_used[k], path, sizeof(path)) != 0)
			break;
		ckc_fd_quiet_begin();
		int fd = REAL(open)(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			if (REAL(flock)(fd, LOCK_EX | LOCK_NB) == 0 && lock_fd_current(fd, path))
				(void)REAL(unlink)(path);
			REAL(close)(fd);
		}
		ckc_fd_quiet_end();
	}
	locks_nused = 0;
	ckc_mutex_unlock(&lockdir_mu);
}

/* Closes v's lock file beside its real lock_fd (and its lock with it). */
static void lock_file_release(ckc_vfd_t *v)
{
	int fd = atomic_exchange(&v->lock_file_fd, -1);
	if (fd >= 0 && REAL(close))
		ckc_fd_mine_close(fd);
}

int ckc_lock_switch_fd(ckc_vfd_t *v)
{
	int fd = atomic_load(&v->lock_fd);
	char key[LOCK_KEY_MAX];
	if (fd < 0 || !v->lock_real)
		return -1;
	/* (the file at the version's name now: its real file) */
	const char *name = lock_name(v, key);
	if (!name || !lock_fd_current(fd, name) || REAL(lseek)(fd, (off_t)v->pos, SEEK_SET) < 0)
		return -1;
	atomic_store(&v->lock_fd, -1);
	/* the program's number holds the real file's lock from now on (the
	 * descriptor stays the library's until its copies are made: the
	 * switch closes it, ckc_fd_mine_close) */
	lock_file_release(v);
	return fd;
}

void ckc_lock_switched(ckc_vfd_t *v, int real)
{
	int fd = atomic_load(&v->lock_fd);
	if (fd < 0)
		return;
	/* the flock of the lock file, or of a real file a publication has
	 * replaced since, goes to the real file; the old descriptor goes */
	if (v->lock_flock && REAL(flock)(real, v->lock_flock | LOCK_NB) != 0)
		ckc_warn("checkpoint %s: its flock could not move to its real file (%s)", v->path,
			 strerror(errno));
	ckc_lock_release(v);
}

void ckc_lock_release(ckc_vfd_t *v)
{
	int fd = atomic_exchange(&v->lock_fd, -1);
	if (fd >= 0 && REAL(close))
		ckc_fd_mine_close(fd);
	lock_file_release(v);
}

/* A lock file locked, then found removed by a process that ended before
 * this lock was had, is opened anew: each try follows such a removal (a
 * process that ended), and waits for the lock again, so the bound is far
 * above what a stream of short processes ending one after another takes
 * from a waiter that loses each race to the next one's sweep. */
#define LOCKFILE_TRIES 4096

/* The lock file of v's path, opened once per virtual descriptor into
 * v->lock_file_fd: locked first, beside a real lock_fd. */
static int lock_file_fd(ckc_vfd_t *v)
{
	int fd = lock_slot(v, &v->lock_file_fd);
	if (fd != -1)
		return fd;
	char key[LOCK_KEY_MAX];
	uint64_t h = 0;
	(void)lock_name(v, key);
	ckc_mutex_lock(&lockdir_mu);
	fd = lockfile_open(key, &h);
	int have = -1;
	bool mine = fd >= 0 && atomic_compare_exchange_strong(&v->lock_file_fd, &have, fd);
	if (mine)
		v->lock_file_key = h; /* (lockdir_mu held: read under it) */
	ckc_mutex_unlock(&lockdir_mu);
	if (fd >= 0 && !mine) {
		ckc_fd_mine_close(fd);
		return have;
	}
	return fd;
}

/* Takes op on the descriptor opener gives, which v keeps in *slot: 0 or
 * -errno. A lock file locked is looked at once had, and one removed
 * meanwhile (by a process's end) is opened anew and locked again (out of
 * line: the lock file's path is on the stack only here). */
__attribute__((noinline)) static int lock_taken(ckc_vfd_t *v, atomic_int *slot, int (*opener)(ckc_vfd_t *),
						 int op)
{
	char path[PATH_MAX + 32];
	for (int tries = 0;; tries++) {
		int lf = opener(v);
		if (lf < 0)
			return lf;
		if (REAL(flock)(lf, op) != 0)
			return -errno;
		if ((op & LOCK_UN) || (slot == &v->lock_fd && v->lock_real))
			return 0;
		/* (the lock file of the key it was opened by, which a rename
		 * since does not change: only its removal does) */
		ckc_mutex_lock(&lockdir_mu);
		uint64_t h = slot == &v->lock_fd ? v->lock_fd_key : v->lock_file_key;
		bool current = lockfile_name(h, path, sizeof(path)) != 0 || lock_fd_current(lf, path);
		ckc_mutex_unlock(&lockdir_mu);
		if (current)
			return 0;
		if (tries == LOCKFILE_TRIES) {
			REAL(flock)(lf, LOCK_UN);
			return -ENOLCK;
		}
		/* the lock on the removed file goes with its descriptor */
		int was = lf;
		if (atomic_compare_exchange_strong(slot, &was, -1))
			ckc_fd_mine_close(lf);
	}
}

/* The lock file's lock, then the real file's, taken with op (no LOCK_UN),
 * never waiting for one while holding the other: where the real file is
 * another's, the lock file's goes, the wait is for the real file alone,
 * and both are asked again (a waiter that held the lock file would keep
 * out every descriptor of the library's, shared ones the kernel lets in
 * beside a waiting exclusive one, and a process without the library that
 * holds the real file and waits for one of those would wait for ever).
 * held: v holds op's mode already (a repeat). 0 or -errno; on an error
 * nothing of op's is held (a repeat keeps what it held). */
static int flock_both(ckc_vfd_t *v, int op, bool held)
{
	int rc;
	for (;;) {
		if ((rc = lock_taken(v, &v->lock_file_fd, lock_file_fd, op)) != 0)
			return rc;
		rc = lock_taken(v, &v->lock_fd, lock_fd, op | LOCK_NB);
		if (rc == 0)
			return 0;
		int lf = atomic_load(&v->lock_file_fd);
		if (lf >= 0 && !held)
			REAL(flock)(lf, LOCK_UN);
		if (rc != -EWOULDBLOCK || (op & LOCK_NB) || held)
			return rc;
		if ((rc = lock_taken(v, &v->lock_fd, lock_fd, op)) != 0)
			return rc;
		int real = atomic_load(&v->lock_fd);
		if (real >= 0)
			REAL(flock)(real, LOCK_UN);
	}
}

/* flock of a tagged descriptor: 0, -errno, or CKC_HANDED where its
 * numbers became the real file's meanwhile (the call is theirs). Where
 * its real file exists the lock is taken there (a process without the
 * library locks that file), after the path's lock file: a descriptor
 * locked before the checkpoint's first publication holds only the lock
 * file, and one locked after it must wait for that one too. */
static int flock_tagged(ckc_vfd_t *v, int op)
{
	int rc = 0, real = lock_fd(v);
	if (real < 0)
		return real;
	int was = v->lock_flock, mode = op & (LOCK_SH | LOCK_EX);
	if (!v->lock_real) {
		rc = lock_taken(v, &v->lock_fd, lock_fd, op);
	} else if (op & LOCK_UN) {
		/* the real file's first; the lock file's, where there is one,
		 * whatever becomes of it */
		rc = lock_taken(v, &v->lock_fd, lock_fd, op);
		int lf = atomic_load(&v->lock_file_fd);
		if (lf >= 0)
			REAL(flock)(lf, LOCK_UN);
	} else {
		/* a change of mode lets the real file's lock go first, as the
		 * kernel's conversion lets the old lock go: two descriptors
		 * converting at once would each hold what the other waits for */
		if (was && was != mode)
			REAL(flock)(real, LOCK_UN);
		/* (no lock file to be had, no private folder: the real file's
		 * lock alone, as for a process without the library) */
		int lf = lock_file_fd(v);
		if (lf < 0 && lf != CKC_HANDED) {
			static atomic_bool said;
			if (!atomic_exchange(&said, true))
				ckc_warn("checkpoint %s: no lock file for its flock (%s): the real file is locked "
					 "alone, and a descriptor that locked it before its first publication does "
					 "not exclude this one",
					 v->path, strerror(-lf));
		}
		if (lf < 0)
			rc = lock_taken(v, &v->lock_fd, lock_fd, op);
		else
			rc = flock_both(v, op, was == mode);
	}
	if (rc && was && was != mode) {
		/* a conversion that failed holds nothing, as the kernel's */
		int lf = atomic_load(&v->lock_file_fd);
		if (lf >= 0)
			REAL(flock)(lf, LOCK_UN);
		if ((real = atomic_load(&v->lock_fd)) >= 0)
			REAL(flock)(real, LOCK_UN);
		v->lock_flock = 0;
	}
	if (rc)
		return rc;
	v->lock_flock = (op & LOCK_UN) ? 0 : mode;
	return 0;
}

CKC_EXPORT int flock(int fd, int op)
{
	if (!REAL(flock)) {
		errno = ENOSYS;
		return -1;
	}
	/* (held: a close of fd meanwhile leaves v whole until the lock is had) */
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(flock)(fd, op);
	int saved = errno, rc = flock_tagged(v, op);
	ckc_vfd_drop(v);
	if (rc == CKC_HANDED)
		return REAL(flock)(fd, op);
	return (int)ckc_result(rc, saved);
}

/* lockf(3) is fcntl(2) record locking: taken on the real file, which
 * the descriptor becomes first (as fcntl's lock commands do). */
static int lockf_common(int (*real)(int, int, off_t), int fd, int cmd, off_t len)
{
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (v) {
		int saved = errno, rc = ckc_px_vfd_make_real(v);
		ckc_vfd_put(v);
		if (rc)
			return (int)ckc_result(rc, saved);
		errno = saved;
	}
	return real(fd, cmd, len);
}

CKC_EXPORT int lockf(int fd, int cmd, off_t len)
{
	return lockf_common(REAL(lockf), fd, cmd, len);
}

CKC_EXPORT int lockf64(int fd, int cmd, off_t len)
{
	return lockf_common(REAL(lockf64), fd, cmd, len);
}
