/* The peer segment (peerseg.h): a file in /dev/shm shared by the ranks of
 * one job on one node, found by its name alone (no MPI call).
 *
 * A file under /dev/shm, opened through the engine's real open, rather
 * than shm_open: shm_open is that same open of /dev/shm/NAME inside the C
 * library, where the preloaded wrappers would see it; a plain path also
 * lets ckptcache doctor list and check the segments with readdir.
 *
 * Life, with flock on the segment's descriptor (released by the kernel
 * when a process dies, SIGKILL included):
 * - every process that uses the segment holds a shared lock on it;
 * - a joiner that gets an exclusive lock without waiting is alone: nobody
 *   uses the segment, so whatever is in it (nothing, or the board of a job
 *   whose processes all died) is initialised again, the entry claimed, and
 *   the lock turned into a shared one. That turn is not atomic in flock: a
 *   second joiner may get the exclusive lock in between, and keeps the
 *   board as it is because a live process owns an entry of it;
 * - a joiner that gets a shared lock uses the board as it is: the process
 *   that initialised it held the exclusive lock until it was done;
 * - a leaver that gets an exclusive lock is the last and removes the file.
 * After any lock, the path must still name the descriptor's file: one
 * removed meanwhile by the last leaver is opened (created) again. The one
 * thing taken on trust is a pid: a stale board whose dead owner's pid
 * now names another process is kept (and that entry read as alive) until
 * the segment is left by all. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "peerseg.h"
#include "sys.h"

#define SEG_SIZE sizeof(peer_board_t)

bool ckc_peerseg_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int ckc_peerseg_path(char *out, size_t len, const char *dir, const char *job, const char *node)
{
	if (!job || !*job || !node || !*node)
		return -EINVAL;
	int n = snprintf(out, len, "%s/" CKC_PEERSEG_PREFIX "%u-%s-%s", dir, (unsigned)geteuid(), job,
			 node);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Whether path still names fd's file (the last leaver may have removed it). */
static bool seg_same(const char *path, int fd)
{
	struct stat a, b;
	return sys_stat(path, &a) == 0 && sys_fstat(fd, &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

/* A regular file of this user that nobody else may open. */
static bool seg_private(int fd)
{
	struct stat st;
	return sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & 077) == 0;
}

static bool seg_has_live_owner(peer_board_t *b)
{
	for (int i = 0; i < CKC_PEER_MAX; i++)
		if (ckc_peerseg_alive(atomic_load(&b->e[i].pid)))
			return true;
	return false;
}

static int seg_map(ckc_peerseg_t *s)
{
	void *p = sys_mmap(NULL, SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	s->board = p;
	return 0;
}

static void seg_unmap(ckc_peerseg_t *s)
{
	if (s->board)
		sys_munmap(s->board, SEG_SIZE);
	s->board = NULL;
}

/* Alone on the segment (exclusive lock held): a board that a live process
 * uses is kept (it is between its exclusive and its shared lock), anything
 * else is made anew. */
static int seg_init(ckc_peerseg_t *s, const char *job)
{
	struct stat st;
	if (sys_fstat(s->fd, &st) != 0)
		return -errno;
	if ((size_t)st.st_size == SEG_SIZE) {
		int rc = seg_map(s);
		if (rc)
			return rc;
		if (atomic_load(&s->board->magic) == PEERBOARD_MAGIC && atomic_load(&s->board->ready) &&
		    seg_has_live_owner(s->board))
			return peerboard_init(s->board, job);
		seg_unmap(s);
	}
	s->was_stale = st.st_size > 0;
	/* zeroed from its first byte: nothing of the old board is kept */
	if (sys_ftruncate(s->fd, 0) != 0 || sys_ftruncate(s->fd, (off_t)SEG_SIZE) != 0)
		return -errno;
	int rc = seg_map(s);
	if (rc)
		return rc;
	s->initialised = true;
	return peerboard_init(s->board, job);
}

/* The exclusive lock given up for a shared one, trying until deadline. */
static int seg_share(int fd, uint64_t deadline)
{
	while (sys_flock(fd, LOCK_SH | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK || ckc_now_ns() > deadline)
			return errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

static int seg_claim(ckc_peerseg_t *s, int slot)
{
	pid_t was = atomic_load(&s->board->e[slot].pid);
	int rc = peerboard_claim(s->board, slot, s->pid, ckc_peerseg_alive);
	if (rc == 0) {
		s->slot = slot;
		s->reclaimed = was && was != s->pid;
	}
	return rc;
}

/* One attempt: 0 (joined), -EAGAIN (try again), or -errno. */
static int seg_try(ckc_peerseg_t *s, const char *job, int slot, uint64_t deadline)
{
	int rc;
	s->fd = sys_open(s->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->fd < 0)
		return -errno;
	if (!seg_private(s->fd)) {
		rc = -EPERM;
	} else if (sys_flock(s->fd, LOCK_EX | LOCK_NB) == 0) {
		rc = !seg_same(s->path, s->fd) ? -EAGAIN : seg_init(s, job);
		if (rc == 0)
			rc = seg_claim(s, slot);
		if (rc == 0 && (rc = seg_share(s->fd, deadline)) != 0)
			peerboard_release(s->board, slot, s->pid);
	} else if (errno != EWOULDBLOCK) {
		rc = -errno;
	} else if (sys_flock(s->fd, LOCK_SH | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ? -EAGAIN : -errno; /* being initialised */
	} else {
		struct stat st;
		rc = !seg_same(s->path, s->fd) ? -EAGAIN : sys_fstat(s->fd, &st) != 0 ? -errno
			: (size_t)st.st_size != SEG_SIZE ? -EPROTO : seg_map(s);
		if (rc == 0)
			rc = peerboard_init(s->board, job);
		if (rc == 0)
			rc = seg_claim(s, slot);
	}
	if (rc) {
		seg_unmap(s);
		sys_close(s->fd);
		s->fd = -1;
		s->initialised = s->was_stale = false;
	}
	return rc;
}

int ckc_peerseg_open(ckc_peerseg_t *s, const char *path, const char *job, int slot, double wait_s)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->slot = -1;
	s->pid = getpid();
	if (slot < 0 || slot >= CKC_PEER_MAX)
		return -EINVAL;
	if (strlen(path) >= sizeof(s->path))
		return -ENAMETOOLONG;
	strcpy(s->path, path);
	uint64_t deadline = ckc_now_ns() + (uint64_t)(wait_s * 1e9);
	for (;;) {
		int rc = seg_try(s, job, slot, deadline);
		if (rc != -EAGAIN)
			return rc;
		if (ckc_now_ns() > deadline)
			return -ETIMEDOUT;
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
}

static bool seg_file_has_live_owner(int fd);

/* How long the last one out waits for a lock that no process on the board
 * holds: a leaver that let its entry go just before and has not closed yet
 * (two processes leaving at once each saw the other's lock), another job's
 * sweep looking at it. */
#define SEG_LAST_WAIT_NS 50000000ull

/* The last one out (its own descriptor closed): removes path once no other
 * descriptor locks it, unless a live process is on its board again (a
 * joiner); 1 where it removed it. */
static int seg_remove_when_free(const char *path)
{
	uint64_t deadline = ckc_now_ns() + SEG_LAST_WAIT_NS;
	for (;;) {
		int fd = sys_open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
		if (fd < 0)
			return 0; /* removed meanwhile, by whoever held it */
		int rc = -1;
		if (!seg_private(fd) || seg_file_has_live_owner(fd))
			rc = 0;
		else if (sys_flock(fd, LOCK_EX | LOCK_NB) == 0)
			rc = seg_same(path, fd) && !seg_file_has_live_owner(fd) && sys_unlink(path) == 0;
		else if (errno != EWOULDBLOCK || ckc_now_ns() > deadline)
			rc = 0;
		sys_close(fd);
		if (rc >= 0)
			return rc;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

int ckc_peerseg_close(ckc_peerseg_t *s)
{
	int removed = 0;
	if (s->fd < 0)
		return 0;
	if (s->board && s->slot >= 0)
		peerboard_release(s->board, s->slot, s->pid);
	bool others = s->board && seg_has_live_owner(s->board);
	seg_unmap(s);
	/* alone: nobody else holds it, nobody can be joining it unseen (a
	 * joiner that opened it checks the path after its lock) */
	bool alone = sys_flock(s->fd, LOCK_EX | LOCK_NB) == 0;
	if (alone && seg_same(s->path, s->fd))
		removed = sys_unlink(s->path) == 0;
	sys_close(s->fd);
	/* the board names nobody else, yet a lock was held: the last one
	 * out waits (a bounded while) for that holder to go */
	if (!alone && !others)
		removed = seg_remove_when_free(s->path);
	s->fd = -1;
	s->slot = -1;
	return removed;
}

void ckc_peerseg_forget(ckc_peerseg_t *s)
{
	seg_unmap(s);
	if (s->fd >= 0)
		sys_close(s->fd);
	s->fd = -1;
	s->slot = -1;
}

/* Whether the board in fd names a live process (a joiner between its
 * exclusive and its shared lock holds neither, and has claimed its entry
 * already). A file of another size holds no board. */
static bool seg_file_has_live_owner(int fd)
{
	struct stat st;
	if (sys_fstat(fd, &st) != 0 || (size_t)st.st_size != SEG_SIZE)
		return false;
	peer_board_t *b = sys_mmap(NULL, SEG_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (b == MAP_FAILED)
		return false;
	bool live = atomic_load(&b->magic) == PEERBOARD_MAGIC && seg_has_live_owner(b);
	sys_munmap(b, SEG_SIZE);
	return live;
}

int ckc_peerseg_sweep(const char *dir, bool drop, ckc_peerseg_fn fn, void *ctx)
{
	char mine[64], path[PATH_MAX];
	snprintf(mine, sizeof(mine), CKC_PEERSEG_PREFIX "%u-", (unsigned)geteuid());
	DIR *d = sys_opendir(dir);
	if (!d)
		return 0;
	int found = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, mine, strlen(mine)) != 0 ||
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		int fd = sys_open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0);
		if (fd < 0)
			continue;
		/* held by nobody, and no live process on its board: every
		 * process of its job is gone */
		if (seg_private(fd) && sys_flock(fd, LOCK_EX | LOCK_NB) == 0 && seg_same(path, fd) &&
		    !seg_file_has_live_owner(fd)) {
			found++;
			bool removed = drop && sys_unlink(path) == 0;
			if (fn)
				fn(path, removed, ctx);
		}
		sys_close(fd);
	}
	sys_closedir(d);
	return found;
}
