/* POSIX I/O wrappers: the operations on virtual descriptors, the open
 * family and close; posix_data.c (read/write family, seek, sync, truncate)
 * and posix_names.c (dup family, fcntl, access, unlink, rename, mmap, the
 * copy calls) hold the rest. Every wrapper has one shape: an untagged call
 * goes straight to libc; a tagged one goes to the engine, and errno is kept
 * on success. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/close_range.h>
#include <linux/falloc.h>
#include <sys/sendfile.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "copy.h"
#include "intercept.h"
#include "tagpat.h"
#include "sigdefer.h"
#include "owed.h"
#include "log.h"
#include "path.h"


/* A tagged descriptor inherited across fork, or used after the engine
 * stopped, cannot reach the cache any more: fail, loudly. */
int ckc_px_vfd_usable(const ckc_vfd_t *v)
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
bool ckc_px_handed_over(long *r, ckc_vfd_t *v)
{
	if (*r != CKC_HANDED)
		return false;
	if (ckc_vfd_switch(v) == 0)
		return true;
	*r = -EIO;
	return false;
}

/* ---- operations on virtual descriptors ------------------------------ */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Reads of this size or more prefault the program's buffer. */
#define PREFAULT_MIN ((size_t)256 << 10)
static atomic_bool prefault_off; /* the kernel has no MADV_POPULATE_WRITE */

/* The buffer of a large read, made present in one call when its pages are
 * not yet there (fresh memory: a large malloc, mmap, a new tensor's
 * storage): the kernel fills them in one pass, where the copy would fault
 * on every page (here 256 MiB took 0.6 s so against 0.1 s, and a restore
 * into new buffers ran 1.3x as fast as without the library). A buffer whose
 * middle and last pages are there is left as it is (a reused buffer: the
 * look costs two mincore calls). */
static void prefault(void *buf, size_t n)
{
	if (n < PREFAULT_MIN || atomic_load_explicit(&prefault_off, memory_order_relaxed))
		return;
	const uintptr_t pg = 4096;
	uintptr_t lo = ((uintptr_t)buf + pg - 1) & ~(pg - 1), hi = ((uintptr_t)buf + n) & ~(pg - 1);
	if (hi < lo + 4 * pg)
		return;
	uintptr_t mid = lo + (((hi - lo) / 2) & ~(pg - 1));
	unsigned char in_mid = 0, in_last = 0;
	int saved = errno;
	if (ckc_syscall6(SYS_mincore, (long)mid, (long)pg, (long)&in_mid, 0, 0, 0) == 0 &&
	    ckc_syscall6(SYS_mincore, (long)(hi - pg), (long)pg, (long)&in_last, 0, 0, 0) == 0 &&
	    (in_mid & 1) && (in_last & 1)) {
		errno = saved;
		return;
	}
	/* (a range the kernel cannot fill, one with a page the program
	 * protected, is filled by the copy as before) */
	if (ckc_syscall6(SYS_madvise, (long)lo, (long)(hi - lo), MADV_POPULATE_WRITE, 0, 0, 0) != 0 &&
	    errno == EINVAL)
		atomic_store(&prefault_off, true);
	errno = saved;
}

ssize_t ckc_vfd_pread(ckc_vfd_t *v, void *buf, size_t n, off_t off)
{
	int rc = ckc_px_vfd_usable(v);
	if (rc)
		return rc;
	/* refused as by the kernel, in its order: a negative offset, a
	 * descriptor not open for reading, an end (offset + count) past the
	 * largest offset */
	if (off < 0)
		return -EINVAL;
	if ((v->flags & O_ACCMODE) == O_WRONLY)
		return -EBADF;
	if (n > (uint64_t)INT64_MAX - (uint64_t)off)
		return -EINVAL;
	ckc_enter();
	ssize_t r = CKC_OWED_PASS;
	if (ckc_owed_read_ok)
		r = ckc_owed_pread(v->h, buf, n, (uint64_t)off, CKC_OWED_SITE_READ);
	if (r == CKC_OWED_PASS) {
		ckc_owed_will_write(buf, n);
		if (!atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
			prefault(buf, n);
		r = ckc_pread(v->h, buf, n, (uint64_t)off);
	}
	ckc_leave();
	return r;
}

/* A write or truncation that would leave a hole of more than this, and more
 * than the file holds so far (a sparse file: a header, then a seek far
 * past it), makes the checkpoint its real file first: the file system keeps
 * the hole as a hole, the cache would hold it, and publish it, as zeros (a
 * 2 GiB hole took 2 GiB of memory and 1.3 s, and its real file 2 GiB). */
#define HOLE_ASIDE ((uint64_t)64 << 20)

/* v's version goes to its real file now, where a write is to go instead:
 * 0, or -errno when the real file could not take it (-ESTALE: the
 * version was unlinked or renamed over, and has no real file; the file
 * now at its name is another one). */
static int vfd_to_real(ckc_vfd_t *v)
{
	ckc_enter();
	int rc = ckc_handoff(v->h);
	ckc_leave();
	return rc;
}

int ckc_px_hole_aside(ckc_vfd_t *v, uint64_t to)
{
	/* (no hole that large below it: no look at the size, which takes the
	 * engine's lock) */
	if (to <= HOLE_ASIDE)
		return 0;
	uint64_t size = ckc_handle_size(v->h);
	if (to <= size + HOLE_ASIDE || to - size <= size)
		return 0;
	int rc = vfd_to_real(v);
	/* (unlinked or renamed over: the cache keeps the file's bytes, as the
	 * kernel keeps an unlinked file's) */
	if (rc && rc != -ESTALE)
		ckc_warn("checkpoint %s: a hole of %llu bytes is kept in the cache (the real file could not "
			 "take it: %s)", v->path, (unsigned long long)(to - size), strerror(-rc));
	return rc ? 0 : CKC_HANDED;
}

/* The cache publishes a version by writing a new file beside the real one:
 * a version that would not fit in the free space of that file system goes
 * to its real file while half of that space is still free, so that the
 * program's own writes there meet ENOSPC (or EDQUOT) where they would
 * without the library, not its publication later. The space is the free
 * space less the bytes of closed versions still owed to that file system
 * (which take their room first, as the program's earlier writes would
 * have); one that does not fit waits for those to land (ROOM_WAIT_NS at
 * most) before it is looked at again, and before it goes to its real
 * file. The free space is looked at by a version's first write (a
 * thread's answer for the same folder, less what the library wrote since,
 * is kept ROOM_KEEP_NS for that one), then each time the version has grown
 * by half of what was left, at least ROOM_STEP. */
#define ROOM_KEEP_NS 100000000ull
/* ... where that answer was this much at least: nearer a full file system,
 * what the program wrote itself since (a file at its real path) counts */
#define ROOM_KEEP_MIN ((uint64_t)4 << 30)
#define ROOM_WAIT_NS (10ull * 1000000000u)
#define ROOM_RETRY_NS 1000000000ull
#define ROOM_STEP ((uint64_t)64 << 10)
static __thread uint64_t room_dir_hash, room_bytes, room_at, room_written, room_failed_at;

/* The bytes free to this process in the file system of folder dir, or
 * UINT64_MAX where it cannot be known (a kept answer less what the
 * library wrote there since). */
static uint64_t room_free(const char *dir, bool first)
{
	uint64_t h = ckc_path_hash(dir), now = first ? ckc_now_ns() : 0;
	if (first && h == room_dir_hash && now - room_at < ROOM_KEEP_NS && room_bytes >= ROOM_KEEP_MIN) {
		uint64_t since = ckc_home_written() - room_written;
		return room_bytes > since ? room_bytes - since : 0;
	}
	uint64_t written = ckc_home_written();
	struct statvfs fs;
	int saved = errno;
	if (statvfs(dir, &fs) != 0) {
		errno = saved;
		return UINT64_MAX;
	}
	uint64_t unit = fs.f_frsize ? fs.f_frsize : fs.f_bsize;
	uint64_t room = (uint64_t)(ckc_geteuid() == 0 ? fs.f_bfree : fs.f_bavail) * unit;
	room_dir_hash = h;
	room_bytes = room;
	room_written = written;
	room_at = now ? now : ckc_now_ns();
	return room;
}

static int room_aside(ckc_vfd_t *v, uint64_t end)
{
	uint64_t next = atomic_load_explicit(&v->room_next, memory_order_relaxed);
	if (end < next)
		return 0;
	char dir[PATH_MAX];
	uint64_t room = ckc_path_dirname(v->path, dir, sizeof(dir)) == 0 ? room_free(dir, next == 0) : UINT64_MAX;
	if (room == UINT64_MAX) {
		atomic_store(&v->room_next, UINT64_MAX); /* not known: not looked at again */
		return 0;
	}
	for (int look = 0;; look++) {
		/* what the versions owed there may take and leave this one
		 * its half */
		uint64_t need = end < room / 2 ? room - 2 * end : 0;
		ckc_enter();
		uint64_t owed = ckc_owed_bytes_beside(v->h, need ? need : 1);
		ckc_leave();
		if (owed < need) {
			uint64_t step = (room - owed - end) / 2;
			atomic_store(&v->room_next, end + (step > ROOM_STEP ? step : ROOM_STEP));
			return 0;
		}
		/* (a wait that found publications failing is not tried again
		 * for a second by this thread: they stay owed, and each try
		 * would copy them again) */
		uint64_t now = ckc_now_ns();
		if (look > 0 || owed == 0 || (room_failed_at && now - room_failed_at < ROOM_RETRY_NS))
			break;
		/* the versions owed there land first, as the program's
		 * earlier writes would have; then a fresh look */
		ckc_enter();
		ckc_handle_room_wait(v->h, true);
		int prc = ckc_publish_all(ROOM_WAIT_NS, false);
		ckc_handle_room_wait(v->h, false);
		ckc_leave();
		room_failed_at = prc ? ckc_now_ns() : 0;
		if (prc)
			ckc_debug("checkpoint %s: the checkpoints before it did not all reach their real paths (%s)",
				  v->path, strerror(-prc));
		room = room_free(dir, false);
		if (room == UINT64_MAX)
			return 0;
	}
	int rc = vfd_to_real(v);
	if (rc == -ENOSPC || rc == -EDQUOT) {
		/* the bytes so far do not fit there: the write fails as the
		 * program's own would without the library (its bytes so far
		 * stay in the cache, published or rescued whole once closed);
		 * the next write looks again */
		return rc;
	}
	if (rc) {
		atomic_store(&v->room_next, UINT64_MAX);
		if (rc != -ESTALE)
			ckc_warn("checkpoint %s is larger than half the free space of its file system: it stays "
				 "in the cache (the real file could not take it: %s)", v->path, strerror(-rc));
		return 0;
	}
	return CKC_HANDED;
}

/* What a write of n bytes at off meets first: 0, or its answer (an error,
 * or CKC_HANDED where its checkpoint went to the real file for it). */
static int vfd_write_first(ckc_vfd_t *v, size_t n, off_t off)
{
	int rc = ckc_px_vfd_usable(v);
	if (rc)
		return rc;
	/* (the kernel's order: the offset, then the descriptor's mode) */
	if (off < 0)
		return -EINVAL;
	if ((v->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if ((rc = ckc_px_hole_aside(v, (uint64_t)off)) != 0)
		return rc;
	return room_aside(v, (uint64_t)off + n);
}

ssize_t ckc_vfd_pwrite(ckc_vfd_t *v, const void *buf, size_t n, off_t off)
{
	int rc = vfd_write_first(v, n, off);
	if (rc)
		return rc;
	ckc_enter();
	ssize_t r = CKC_OWED_PASS;
	if (atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		r = ckc_owed_pwrite(v->h, buf, n, (uint64_t)off);
	if (r == CKC_OWED_PASS)
		r = ckc_pwrite(v->h, buf, n, (uint64_t)off);
	ckc_leave();
	return r;
}

/* The pieces of a vector (len bytes) in one write of the real file, where
 * v's checkpoint is written through to it: -EAGAIN where it is not (or a
 * device capture's owed ranges are about: ckc_vfd_pwrite for each piece). */
static ssize_t vfd_pwritev(ckc_vfd_t *v, const struct iovec *iov, int cnt, size_t len, off_t off)
{
	if (atomic_load_explicit(&ckc_owed_count, memory_order_relaxed))
		return -EAGAIN;
	int rc = vfd_write_first(v, len, off);
	if (rc)
		return rc;
	ckc_enter();
	ssize_t r = ckc_pwritev_home(v->h, iov, cnt, len, (uint64_t)off);
	ckc_leave();
	return r;
}

ssize_t ckc_vfd_read(ckc_vfd_t *v, void *buf, size_t n)
{
	ckc_mutex_lock(&v->lock);
	ssize_t r = ckc_vfd_pread(v, buf, n, (off_t)v->pos);
	if (r > 0)
		ckc_vfd_pos_set(v, v->pos + (uint64_t)r);
	ckc_mutex_unlock(&v->lock);
	return r;
}

ssize_t ckc_vfd_write(ckc_vfd_t *v, const void *buf, size_t n)
{
	ckc_mutex_lock(&v->lock);
	if (v->flags & O_APPEND)
		ckc_vfd_pos_set(v, ckc_handle_size(v->h));
	ssize_t r = ckc_vfd_pwrite(v, buf, n, (off_t)v->pos);
	if (r > 0)
		ckc_vfd_pos_set(v, v->pos + (uint64_t)r);
	ckc_mutex_unlock(&v->lock);
	return r;
}

/* Whether v's real file system allows position r, asked of an unnamed file
 * in its real folder, else of the real file: ext4 refuses positions past
 * 16 TiB - 4 KiB with EINVAL, as the cache must. A folder that can be
 * asked neither way allows it. */
bool ckc_px_seek_fits(const ckc_vfd_t *v, off_t r)
{
	if (r <= CKC_SEEK_ASK_FROM)
		return true;
	char dir[PATH_MAX];
	if (ckc_path_dirname(v->path, dir, sizeof(dir)))
		return true;
	ckc_fd_own_begin();
	int fd = REAL(open)(dir, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
	if (fd < 0)
		fd = REAL(open)(v->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	bool fits = fd < 0 || REAL(lseek)(fd, r, SEEK_SET) == r || errno != EINVAL;
	if (fd >= 0)
		REAL(close)(fd);
	ckc_fd_own_end();
	return fits;
}

off_t ckc_vfd_lseek(ckc_vfd_t *v, off_t off, int whence)
{
	int err = ckc_px_vfd_usable(v);
	if (err)
		return err;
	/* the position asked (SEEK_CUR by 0: Python's tell() twice after
	 * each open), whatever it is, as the kernel answers it */
	if (whence == SEEK_CUR && off == 0)
		return (off_t)ckc_vfd_pos(v);
	int saved = errno;
	ckc_mutex_lock(&v->lock);
	/* the size only where the answer depends on it: a position asked
	 * (SEEK_CUR by 0, Python's tell() after each open) costs no look at
	 * the version under the engine's lock */
	off_t size = whence >= SEEK_END && whence <= SEEK_HOLE ? (off_t)ckc_handle_size(v->h) : 0, r = 0;
	bool over = false;
	switch (whence) {
	case SEEK_SET: r = off; break;
	case SEEK_CUR: over = __builtin_add_overflow((off_t)v->pos, off, &r); break;
	case SEEK_END: over = __builtin_add_overflow(size, off, &r); break;
	/* a checkpoint shows no holes: all of it is data */
	case SEEK_DATA: r = off; err = off < size ? 0 : -ENXIO; break;
	case SEEK_HOLE: r = size; err = off < size ? 0 : -ENXIO; break;
	default: err = -EINVAL; break;
	}
	if (!err && (over || r < 0 || (off < 0 && whence >= SEEK_DATA)))
		err = whence >= SEEK_DATA ? -ENXIO : -EINVAL;
	/* the kernel's SEEK_CUR by 0 answers the position, whatever it is */
	if (!err && !(whence == SEEK_CUR && off == 0) && whence <= SEEK_END && !ckc_px_seek_fits(v, r))
		err = -EINVAL;
	if (!err)
		ckc_vfd_pos_set(v, (uint64_t)r);
	ckc_mutex_unlock(&v->lock);
	errno = saved;
	return err ? err : r;
}

/* Pieces of a vector under IOV_GATHER_MAX go together where the cache
 * holds the checkpoint in host memory: a run of IOV_GATHER_MIN of them
 * or more is one transfer through a buffer of the library's, where each
 * piece would cost the engine's work (a writev of 100 pieces of 100 bytes
 * took 2.5 to 5 times as long as without the library). There the copies
 * of the library's meet a piece the program cannot read or write as its
 * copy of a single piece does (SIGSEGV, ckptcache(7)); on a checkpoint
 * written through to its real path (or read from it, or from an ssd),
 * each piece is a call of the kernel's, which answers such a piece with
 * EFAULT, and a checkpoint written so with small pieces moves into the
 * cache after its first writes (engine_write.c). Larger pieces, and
 * shorter runs, go alone. */
#define IOV_GATHER_MAX ((size_t)16 << 10)
#define IOV_GATHER_BUF ((size_t)256 << 10)
#define IOV_GATHER_MIN 8

/* The bytes of the run of pieces from i, at most cap in all and left
 * bytes of the call (0 where it has fewer than IOV_GATHER_MIN pieces);
 * *end: the first piece after the run. */
static size_t iov_run(const struct iovec *iov, int i, int cnt, size_t cap, size_t left, int *end)
{
	size_t bytes = 0;
	int k = 0;
	for (; i < cnt && bytes < left; i++, k++) {
		size_t l = iov[i].iov_len < left - bytes ? iov[i].iov_len : left - bytes;
		if (l >= IOV_GATHER_MAX || bytes + l > cap)
			break;
		bytes += l;
	}
	*end = i;
	return k >= IOV_GATHER_MIN ? bytes : 0;
}

long ckc_px_iov_check(ckc_vfd_t *v, const struct iovec *iov, int cnt, off_t off, bool use_pos, int wr,
		      size_t *all)
{
	/* refused as by the kernel, in its order: a negative offset, a
	 * descriptor not open for the transfer, too many pieces, pieces
	 * longer than SSIZE_MAX together */
	*all = 0;
	if (!use_pos && off < 0)
		return -EINVAL;
	if ((v->flags & O_ACCMODE) == (wr ? O_RDONLY : O_WRONLY))
		return -EBADF;
	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - *all)
			return -EINVAL;
		*all += iov[i].iov_len;
	}
	/* a read's end past the largest offset, as the kernel judges the
	 * whole vector (a write's is the engine's: EFBIG) */
	if (!wr && !use_pos && *all > (uint64_t)INT64_MAX - (uint64_t)off)
		return -EINVAL;
	return 0;
}

/* Scatter/gather over pread/pwrite; stops at the first short transfer. */
ssize_t ckc_px_vfd_iov(ckc_vfd_t *v, const struct iovec *iov, int cnt, off_t off, bool use_pos, int wr,
		       size_t *done)
{
	ssize_t total = 0;
	size_t all, small = 0;
	long bad = ckc_px_iov_check(v, iov, cnt, off, use_pos, wr, &all);
	if (bad)
		return bad;
	int nsmall = 0;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len < IOV_GATHER_MAX) {
			small += iov[i].iov_len;
			nsmall++;
		}
	}
	/* where the cache holds the checkpoint in memory, the buffer of the
	 * runs of small pieces; where it is written through, one call */
	char *gbuf = NULL;
	size_t gcap = small < IOV_GATHER_BUF ? small : IOV_GATHER_BUF;
	bool mem = false;
	if (cnt > 1 && ckc_px_vfd_usable(v) == 0) {
		ckc_enter();
		mem = ckc_handle_in_memory(v->h, wr != 0);
		ckc_leave();
	}
	if (mem && nsmall >= IOV_GATHER_MIN && gcap > 0 && !ckc_sig_in_handler()) {
		int saved = errno;
		gbuf = malloc(gcap);
		errno = saved;
	}
	bool append = wr == CKC_PX_APPEND || (wr && wr != CKC_PX_AT_OFFSET && (v->flags & O_APPEND));
	bool handed = false;
	if (done)
		*done = 0;
	if (use_pos || append) {
		ckc_mutex_lock(&v->lock);
		off = append ? (off_t)ckc_handle_size(v->h) : (off_t)v->pos;
	}
	/* a vector written through to the real file: one call of the kernel's
	 * for all of it */
	if (wr && !mem && cnt > 1 && all > 0 && all <= CKC_RW_MAX) {
		ssize_t r = vfd_pwritev(v, iov, cnt, all, off);
		if (r != -EAGAIN) {
			if (r > 0 && use_pos)
				ckc_vfd_pos_set(v, (uint64_t)(off + r));
			if (use_pos || append)
				ckc_mutex_unlock(&v->lock);
			return r;
		}
	}
	for (int i = 0; i < cnt && (size_t)total < CKC_RW_MAX;) {
		/* (all the pieces together move at most CKC_RW_MAX bytes) */
		size_t left = CKC_RW_MAX - (size_t)total;
		size_t len = iov[i].iov_len < left ? iov[i].iov_len : left;
		int end = i + 1;
		if (len == 0) {
			i++;
			continue;
		}
		ssize_t r = 0;
		bool moved = false;
		if (gbuf && len < IOV_GATHER_MAX && (len = iov_run(iov, i, cnt, gcap, left, &end)) > 0) {
			moved = true;
			/* a piece the program cannot read or write ends the
			 * call there, as the kernel's does: EFAULT where it is
			 * the first */
			if (wr) {
				size_t at = 0;
				for (int k = i; k < end; k++) {
					size_t l = iov[k].iov_len < len - at ? iov[k].iov_len : len - at;
					if (ckc_copy_checked(gbuf + at, iov[k].iov_base, l) != 0) {
						len = at;
						end = -1;
						break;
					}
					at += l;
				}
				r = len ? ckc_vfd_pwrite(v, gbuf, len, off + total) : -EFAULT;
			} else {
				r = ckc_vfd_pread(v, gbuf, len, off + total);
				size_t at = 0;
				for (int k = i; k < end && r > 0 && at < (size_t)r; k++) {
					size_t l = iov[k].iov_len < (size_t)r - at ? iov[k].iov_len : (size_t)r - at;
					if (ckc_copy_checked(iov[k].iov_base, gbuf + at, l) != 0) {
						r = at ? (ssize_t)at : -EFAULT;
						end = -1;
						break;
					}
					at += l;
				}
			}
		}
		if (!moved) {
			len = iov[i].iov_len < left ? iov[i].iov_len : left;
			end = i + 1;
			r = wr ? ckc_vfd_pwrite(v, iov[i].iov_base, len, off + total) :
				 ckc_vfd_pread(v, iov[i].iov_base, len, off + total);
		}
		if (r < 0) {
			/* gone to its real file after some pieces: the caller
			 * moves the rest there (*done) */
			handed = r == CKC_HANDED && total > 0;
			if (total == 0)
				total = r;
			break;
		}
		total += r;
		if ((size_t)r < len || end < 0)
			break;
		i = end;
	}
	if (use_pos || append) {
		if (use_pos && total > 0)
			ckc_vfd_pos_set(v, (uint64_t)(off + total));
		ckc_mutex_unlock(&v->lock);
	}
	if (handed) {
		if (done)
			*done = (size_t)total;
		total = CKC_HANDED;
	}
	if (gbuf) {
		int saved = errno;
		free(gbuf);
		errno = saved;
	}
	return total;
}

ssize_t ckc_px_vfd_pwrite(ckc_vfd_t *v, const void *buf, size_t n, off_t off)
{
	if (!(v->flags & O_APPEND))
		return ckc_vfd_pwrite(v, buf, n, off);
	struct iovec one = { (void *)buf, n };
	return ckc_px_vfd_iov(v, &one, 1, off, false, 1, NULL);
}

/* ---- open and close ------------------------------------------------- */

int ckc_px_real_stat_path(const char *p, struct stat *st)
{
	int (*rs)(const char *, struct stat *) = REAL(stat);
	return rs ? rs(p, st) : -1;
}

int ckc_px_real_access(const char *p, int mode)
{
	int (*ra)(const char *, int) = REAL(access);
	return ra ? ra(p, mode) : 0;
}

CKC_TAGGED_PATH bool ckc_fsize_limited(void)
{
	/* asked of the kernel each time: another process may set it
	 * (prlimit --pid), which no wrapper of this one sees */
	struct rlimit rl;
	int saved = errno;
	bool limited = getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
	errno = saved;
	return limited;
}

/* Whether the descriptor table is crowded for a new version whose
 * placeholder is ph, while stepping aside is on: a version written through
 * to its real path holds a file of the library's beside the placeholder
 * while it is open, so a program that keeps many checkpoints open at once
 * ran out of descriptors at half its limit (ulimit -n 64: its 29th open
 * failed with EMFILE; ulimit -n 1024: near its 510th). Crowded: a
 * sixteenth of the limit in checkpoints open for writing, or half of it
 * in use below ph (every number below it is taken). A new version then is
 * written at its real file by the program's own open, as without the
 * library, which takes one descriptor. (Asked of the kernel only past 4
 * open for writing or a placeholder past 31: a program with few files open
 * makes no system call for it.) */
CKC_TAGGED_PATH static bool table_crowded(int ph)
{
	int writers = atomic_load_explicit(&ckc_vfd_writers, memory_order_relaxed);
	if ((ph < 32 && writers < 4) || !ckc_step_aside_on())
		return false;
	struct rlimit rl;
	int saved = errno;
	bool crowded = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		       ((rlim_t)writers >= rl.rlim_cur / 16 || (rlim_t)ph >= rl.rlim_cur / 2);
	errno = saved;
	if (crowded) {
		static atomic_bool said;
		if (!atomic_exchange(&said, true))
			ckc_info("%d checkpoints open for writing, descriptor %d (ulimit -n %llu): new checkpoints "
				 "are written at their real files while the table is this full, as without the library",
				 writers, ph, (unsigned long long)rl.rlim_cur);
	}
	return crowded;
}

/* fd: a placeholder taken before the version was made (a write's open:
 * a full descriptor table then fails it with nothing made), or -1. */
static int install_new(int fd, ckc_handle_t *h, int flags, const char *canon, uint64_t small_t0)
{
	if (fd < 0)
		fd = ckc_placeholder(flags);
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
	/* a file made exclusively is one whose identity its maker may
	 * record (a placeholder, a lock, mkstemp's): stat gives it the
	 * inode its publication will keep */
	if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
		ckc_handle_keep_ident(h);
	ckc_vfd_t *v = ckc_vfd_new(h, flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC), canon);
	if (v)
		v->small_t0 = small_t0;
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

/* Makes the cached version of canon current at its real path, for an open
 * that then uses the real file (why: what that open is): CKC_PASS, or
 * -errno (said). */
static int hand_over_for(const char *canon, const char *why)
{
	int rc = ckc_hand_over_path(canon);
	if (rc) {
		ckc_error("checkpoint %s could not be written to its real path for %s (%s)", canon, why,
			  strerror(-rc));
		return rc;
	}
	return CKC_PASS;
}

/* An open of canon, which this process has open for writing: every
 * descriptor of a file shares one state, so the written bytes go to the
 * real file, the open descriptors with them, and so does this open
 * (O_TRUNC truncates the shared file, reads see writes). CKC_PASS or
 * -errno (said). */
static int open_while_written(const char *canon)
{
	/* (the writers' descriptors, switched below, are announced: another
	 * open of the path with O_TRUNC writes there too) */
	ckc_node_inplace_map();
	int rc = ckc_handoff_reopened(canon);
	if (rc && rc != -ENOENT) {
		ckc_error("checkpoint %s is open for writing and opened again: its bytes so far "
			  "could not be written to its real path (%s)", canon, strerror(-rc));
		return rc;
	}
	ckc_vfd_switch_path(canon);
	return CKC_PASS;
}

/* A write of canon at its real file, in place: its spelling through a
 * folder's link, if it has one, is noted (ckc_alias_write). */
static void alias_in_place(const char *canon)
{
	char lreal[PATH_MAX];
	ckc_alias_write(canon, ckc_link_real_recent(canon, lreal) ? lreal : NULL, false);
}

/* A write through a symbolic link (the real file's) to a checkpoint this
 * process holds: that checkpoint goes to its real file first, which the
 * write then changes. */
static void link_hand_over(const char *canon)
{
	char target[PATH_MAX];
	if (ckc_link_held(canon, target))
		(void)ckc_hand_over_path(target);
}

/* A tagged open for reading through the engine: an fd, -errno, or
 * CKC_PASS where the cache has nothing to do with the file. Where the
 * cache held no version as the open began, the engine may bring the real
 * file in, which the program must be allowed to read; a version this
 * process still writes is opened as open_while_written says. */
CKC_TAGGED_PATH static int open_read_tagged(const char *canon, int flags)
{
	ckc_handle_t *h;
	bool held;
	int rc = ckc_open_read_held(canon, &h, &held);
	/* a symbolic link to a checkpoint this process holds (the "latest"
	 * link of a restart): the kernel's walk would find it missing or old */
	char target[PATH_MAX];
	if (rc == -ENOENT && !(flags & O_NOFOLLOW)) {
		/* where every such version is of a new file, a link to one
		 * leads to no file: the look (two path walks) waits for the
		 * real open to fail */
		if (!ckc_holds_replacements())
			return CKC_PASS_LINKS;
		if (ckc_link_held(canon, target))
			rc = ckc_open_read_held(canon = target, &h, &held);
	}
	if (rc == -ENOENT || rc == -ENODEV)
		return CKC_PASS;
	if (rc == -EBUSY)
		return open_while_written(canon);
	if (rc)
		return rc;
	if (!held && ckc_px_real_access(canon, R_OK) != 0) {
		rc = -errno;
		ckc_close(h);
		return rc;
	}
	/* a version the cache holds: its mode and owner, as the kernel
	 * would judge the real file's (a file made with mode 0, or chmod
	 * 000 after it was written); root reads every one */
	ckc_stat_t st;
	if (held && ckc_geteuid() != 0 && ckc_handle_stat(h, &st) == 0 &&
	    (!ckc_cached_permits_file(canon, &st, R_OK, true) || !ckc_cached_reachable(canon))) {
		ckc_close(h);
		return -EACCES;
	}
	return install_new(-1, h, flags, canon, 0);
}

/* The owner and group of the version the cache holds: its creator's (this
 * process's), or as chown set them. */
static void cached_owner(const ckc_stat_t *cst, uid_t *uid, gid_t *gid)
{
	*uid = cst->has_owner && cst->uid != (uid_t)-1 ? cst->uid : ckc_geteuid();
	*gid = cst->has_owner && cst->gid != (gid_t)-1 ? cst->gid : ckc_getegid();
}

/* Whether this process may do want with the version the cache holds
 * (its mode and owner as the kernel would judge the real file's). */
bool ckc_cached_permits(const ckc_stat_t *cst, int want, bool effective)
{
	uid_t me = effective ? ckc_geteuid() : ckc_getuid();
	gid_t my = effective ? ckc_getegid() : ckc_getgid();
	if (me == 0)
		return !(want & X_OK); /* a checkpoint is never run */
	uid_t uid;
	gid_t gid;
	cached_owner(cst, &uid, &gid);
	int bits;
	if (uid == me) {
		bits = (cst->mode >> 6) & 7;
	} else {
		bool member = gid == my;
		gid_t g[256];
		int n = member ? 0 : getgroups(256, g);
		for (int i = 0; i < n && !member; i++)
			member = g[i] == gid;
		bits = member ? (cst->mode >> 3) & 7 : cst->mode & 7;
	}
	return (bits & want) == want;
}

atomic_bool ckc_identity_changed;

bool ckc_cached_permits_file(const char *canon, const ckc_stat_t *cst, int want, bool effective)
{
	/* after a change of user, a version its real file holds is judged
	 * by that file's owner (it was published under the old identity) */
	if (cst->at_home && atomic_load_explicit(&ckc_identity_changed, memory_order_relaxed)) {
		int saved = errno;
		bool ok = REAL(faccessat)(AT_FDCWD, canon, want ? want : F_OK, effective ? AT_EACCESS : 0) == 0 ||
			  errno != EACCES;
		errno = saved;
		return ok;
	}
	return ckc_cached_permits(cst, want, effective);
}

static bool cached_writable(const ckc_stat_t *cst)
{
	return ckc_cached_permits(cst, W_OK, true);
}

/* Whether an existing file in folder dir has the owner and group
 * a new file of this process there gets: those of the version the cache
 * holds (cst), else the real file's (rst). A new file's group is the
 * folder's where the folder is setgid. */
static bool owned_as_new(const char *dir, const struct stat *rst, const ckc_stat_t *cst)
{
	uid_t uid = rst ? rst->st_uid : ckc_geteuid();
	gid_t gid = rst ? rst->st_gid : ckc_getegid();
	if (cst)
		cached_owner(cst, &uid, &gid);
	if (uid != ckc_geteuid())
		return false;
	if (gid == ckc_getegid())
		return true;
	struct stat dst;
	return ckc_px_real_stat_path(dir, &dst) == 0 && (dst.st_mode & S_ISGID) && dst.st_gid == gid;
}

/* Whether the real file at canon has extended attributes a new file in its
 * place would not get (an ACL, user.* names; a security label the folder
 * gives every new file is not counted). */
static bool has_attributes(const char *canon)
{
	char names[512];
	int saved = errno;
	ssize_t n = REAL(listxattr)(canon, names, sizeof(names) - 1);
	bool has = n < 0 && errno == ERANGE; /* more names than fit */
	if (n > 0)
		names[n] = '\0';
	for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(names + i) + 1)
		if (strncmp(names + i, "security.", 9) != 0)
			has = true;
	errno = saved;
	return has;
}

/* A write-only open that makes a new version whole (O_TRUNC, or a new file
 * with O_CREAT|O_EXCL), no append: a small checkpoint's, which the small
 * checkpoints' model times and sends to a side (open_tagged). */
static inline bool small_whole_write(int flags)
{
	return (flags & O_ACCMODE) == O_WRONLY && !(flags & O_APPEND) &&
	       ((flags & O_TRUNC) || (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL));
}

/* The open logic for a tagged path: returns an fd, -errno, CKC_PASS or
 * CKC_PASS_TIMED. t0: when the program's open began. */
CKC_TAGGED_PATH static int open_tagged(const char *canon, int flags, mode_t mode, uint64_t t0)
{
	int acc = flags & O_ACCMODE;
	ckc_stat_t cst;
	struct stat rst;
	ckc_handle_t *h;

	if ((flags & O_TMPFILE) == O_TMPFILE)
		return CKC_PASS;
	if (flags & O_DIRECTORY) /* a cached checkpoint is a file */
		return ckc_stat(canon, &cst) == 0 ? -ENOTDIR : CKC_PASS;
	if (flags & O_PATH)
		return CKC_PASS;
	bool rd = acc == O_RDONLY && !(flags & O_TRUNC);
	/* a read's open is one question to the engine, which looks at the
	 * real file once: a checkpoint the cache holds nothing of is the real
	 * open's to answer (ENOENT, EACCES, a folder, O_CREAT), as without the
	 * library, with no look at the file first, unless a hint brings it
	 * through the cache; O_EXCL is the real file's to judge below */
	if (rd && !(flags & O_EXCL))
		return open_read_tagged(canon, flags);
	/* a small checkpoint written while many wait to be published, or
	 * where the program's last ones took less time, goes straight to the
	 * real file: the real open decides everything, with no look at
	 * the file first (a version this process writes stays in the cache;
	 * one the cache held and the real file does not is never sent there,
	 * so a file size limit, the kernel's to apply there, changes nothing) */
	int small = CKC_ASIDE_NO;
	if (small_whole_write(flags)) {
		small = ckc_write_aside(canon, (flags & O_TRUNC) != 0);
		if (small == CKC_ASIDE_BACKLOG)
			return CKC_PASS;
		if (small == CKC_ASIDE_HOME)
			return CKC_PASS_TIMED;
	}
	/* a file size limit is the kernel's to apply, write by write (a
	 * short write, EFBIG, SIGXFSZ): the real file is used (asked of the
	 * kernel only here, where the file would be cached: one more system
	 * call per small file went straight made a script's save of many
	 * small files measurably slower) */
	if (ckc_fsize_limited()) {
		static atomic_bool said;
		if (!atomic_exchange(&said, true))
			ckc_warn("this process has a file size limit (ulimit -f): the checkpoints it writes go "
				 "to their real paths, not through the cache");
		return hand_over_for(canon, "a write under a file size limit");
	}
	/* a write the program asks to be on disk when each call returns
	 * (O_SYNC, O_DSYNC) goes to the real file, as without the library:
	 * the cache would hold bytes the kernel's answer says are there */
	if (acc != O_RDONLY && (flags & O_DSYNC))
		return hand_over_for(canon, "a synchronous write (O_SYNC, O_DSYNC)");
	bool cached = (rd ? ckc_stat_held(canon, &cst) : ckc_stat(canon, &cst)) == 0;
	if (cached && !cst.complete)
		return open_while_written(canon);
	bool real = !(rd && cached) && ckc_px_real_stat_path(canon, &rst) == 0;
	if (real && !S_ISREG(rst.st_mode))
		return CKC_PASS;
	bool exists = cached || real;

	if ((flags & O_CREAT) && (flags & O_EXCL) && exists)
		return -EEXIST;
	/* a read of a checkpoint the cache holds is answered from the cache
	 * alone: the real file is older (or not there yet) */
	if (rd) {
		if (!exists)
			return flags & O_CREAT ? CKC_PASS : -ENOENT;
		return open_read_tagged(canon, flags);
	}
	/* A new version is cached when it replaces the file (O_TRUNC) or
	 * creates it exclusively. O_CREAT without either may be one of several
	 * processes writing parts of one shared file (MPI-IO, HDF5): the real
	 * file is used, never replaced (below). */
	if (acc != O_RDONLY && ((flags & O_TRUNC) || (!exists && (flags & O_EXCL)))) {
		char dir[PATH_MAX], lreal[PATH_MAX];
		if (!exists && !(flags & O_CREAT))
			return -ENOENT;
		/* through a folder's link to a folder no pattern tags: the
		 * file is read there by its untagged path, from the real file */
		bool spelt = ckc_link_real(canon, lreal);
		if (spelt && !ckc_tag_match(lreal)) {
			if (cached)
				(void)ckc_hand_over_path(canon);
			return CKC_PASS;
		}
		/* the cache publishes a version by a rename in its folder, as a
		 * new file of this process: where the real open would write
		 * the file in place or refuse it, it does (a folder the process
		 * cannot write, a file it may not write, or one another user
		 * or group owns, which a new file would not keep: a sticky
		 * folder refuses its replacement) */
		if (ckc_path_dirname(canon, dir, sizeof(dir)) != 0 || ckc_px_real_access(dir, W_OK | X_OK) != 0)
			return hand_over_for(canon, "a rewrite in a folder the process cannot write");
		if (exists && !owned_as_new(dir, real ? &rst : NULL, cached ? &cst : NULL))
			return hand_over_for(canon, "a rewrite of a file another user or group owns");
		if (real && !cached && ckc_px_real_access(canon, W_OK) != 0)
			return CKC_PASS;
		/* a file with extended attributes or an ACL keeps them when the
		 * kernel truncates it; a new file would not have them */
		if (real && (!cached || cst.at_home) && has_attributes(canon))
			return hand_over_for(canon, "a rewrite of a file with extended attributes");
		if (cached && !cached_writable(&cst))
			return -EACCES;
		/* the cache publishes a new file by rename: that would replace
		 * a symbolic link and split a hard link, so such a checkpoint
		 * is written to the real file directly */
		struct stat lst;
		bool hard = real && rst.st_nlink > 1;
		/* a link, or one whose target is not there yet: the program's
		 * open makes that target */
		bool sym = !hard && REAL(lstat)(canon, &lst) == 0 && S_ISLNK(lst.st_mode);
		if (hard || sym) {
			if (cached)
				(void)ckc_hand_over_path(canon);
			else if (sym)
				link_hand_over(canon);
			return CKC_PASS;
		}
		/* a descriptor of this process still reads the checkpoint: the
		 * truncated file is the one it reads, so the version goes to the
		 * real file, the descriptors with it, and so does this open */
		if (cached && (cst.readers > 0 || cst.passed_read) && (flags & O_TRUNC))
			return hand_over_for(canon, "a truncation while it is open for reading");
		/* one this process has open or mapped at its real file (a
		 * file of an earlier run it reads, its first checkpoint, an
		 * np.load with mmap_mode): rewritten in place there, as that
		 * descriptor or mapping sees */
		if (real && ckc_passed_using(canon))
			return hand_over_for(canon, "a truncation while it is open or mapped at its real path");
		/* an existing file keeps its mode when it is truncated; a new
		 * one's is the open's with the umask of now applied, except
		 * in a folder with a default ACL, which the real open applies
		 * (a mode from it, and an ACL the cache's file would lack) */
		if (!exists && ckc_folder_default_acl(canon))
			return CKC_PASS;
		/* (a cached version not yet at its real path: its mode, which
		 * the program may have changed since and its publication is to
		 * bring, is the file's; one published since this look may have
		 * left the real file's older) */
		mode_t m = cached && (!cst.at_home || !real) ? cst.mode : real ? rst.st_mode : mode & ~ckc_umask();
		/* the descriptor first: an open that fails for the want of one
		 * (EMFILE) makes no version, which its close would publish */
		int ph = ckc_placeholder(flags);
		if (ph < 0)
			return ph;
		if (table_crowded(ph)) {
			REAL(close)(ph);
			return cached ? hand_over_for(canon, "a rewrite with a crowded descriptor table") : CKC_PASS;
		}
		ckc_alias_write(canon, spelt ? lreal : NULL, true);
		/* from now on this process can hold bytes others may ask for */
		ckc_writer_start();
		int rc = !(flags & O_APPEND) ? ckc_open_write_only(canon, m & 07777, &h) :
								 ckc_open_write(canon, m & 07777, &h);
		if (rc) {
			REAL(close)(ph);
			return rc == -ENODEV ? CKC_PASS : rc;
		}
		/* a new file made for reading and writing (HDF5's "w") has the
		 * identity of a file made exclusively: a second open of it in
		 * this process (HDF5's own look for a file it has open, by
		 * device and inode) meets the inode the first one reported */
		int iflags = !exists && acc == O_RDWR && (flags & O_CREAT) ? flags | O_EXCL : flags;
		int fd = install_new(ph, h, iflags, canon, small == CKC_ASIDE_CACHE ? t0 : 0);
		/* the node's table names the new version now: a writer in place
		 * announced since the look before it (ckc_open_tagged) did not
		 * find it when it asked the holders, so it is looked for again,
		 * and the version, empty still, goes to the real file (in place,
		 * or kept as the other process made it), as the kernel's
		 * truncation would (open_look asks again after announcing: of
		 * two such opens at once, one sees the other) */
		if (fd >= 0 && ckc_node_inplace_other(canon))
			(void)ckc_hand_over_path(canon);
		return fd;
	}
	/* Any other write to an existing checkpoint works on the real file:
	 * make it current there, forget the cached copy, pass through. */
	if (cached)
		return hand_over_for(canon, "an in-place update");
	link_hand_over(canon);
	alias_in_place(canon);
	return CKC_PASS;
}

/* A tagged open failed with EMFILE: the library's own descriptors (its
 * files; a checkpoint written at its real path while the cache is on may
 * hold one more) take part of the program's limit, so the open may fail
 * where it would not without the library. Said once. */
static void emfile_said(const char *canon)
{
	static atomic_bool said;
	if (!atomic_exchange(&said, true))
		ckc_warn("the open of %s failed with EMFILE: the library holds descriptors of its own (its "
			 "files, and up to one for each checkpoint the program keeps open), which count against "
			 "the limit (ulimit -n): raise it",
			 canon);
}

CKC_TAGGED_PATH int ckc_open_tagged(const char *canon, int flags, mode_t mode, uint64_t *t0)
{
	/* a signal handler of the program that interrupted it, perhaps inside
	 * malloc, whose lock the cache's work would wait for: while the cache
	 * holds no version that a real file lacks, its checkpoints go to
	 * their real paths, as when stepping aside (open, write and close
	 * are async-signal-safe without the library) */
	if (ckc_sig_in_handler() && !ckc_holds_unpublished())
		return CKC_PASS;
	/* a file made in a folder after the program set its times changes
	 * it, as without the library: those times are not put back */
	if ((flags & O_CREAT) && !ckc_sig_in_handler())
		ckc_dir_times_forget(canon);
	/* only a small checkpoint's open is timed (open_tagged) */
	uint64_t start = small_whole_write(flags) ? ckc_now_ns() : 0;
	if (t0)
		*t0 = start;
	/* a process that has only read checkpoints so far, none of them named
	 * ahead, holds nothing: its reads (tar, cat, cp, a restore in a new
	 * process) go to the real files without starting the cache, which
	 * costs a process 0.2-0.4 ms (its threads, its files) */
	if ((flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC) && !ckc_read_needs_engine()) {
		/* (a folder's or a path's open reads no checkpoint) */
		if (!(flags & (O_DIRECTORY | O_PATH)))
			ckc_read_passed();
		return CKC_PASS;
	}
	/* a process's first checkpoint written whole (truncated, or made
	 * new: cp's O_EXCL) goes to its real path, as stepping aside begins,
	 * without starting the cache (its threads, its files, its drain at
	 * the end: 1.4 ms of a cp of 2 ms): a tool that writes one file and
	 * ends (cp, tee, a converter) pays nothing; the cache starts with the
	 * second */
	int acc = flags & O_ACCMODE;
	bool whole = acc != O_RDONLY && !(flags & O_APPEND) &&
		     ((flags & O_TRUNC) || (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL));
	if (whole && !(flags & (O_PATH | O_DIRECTORY))) {
		if (ckc_first_write_aside(canon))
			return CKC_PASS_FIRST;
		/* the next ones too, for a while (init.c): a plain pass, so
		 * that the write is announced as one at its real file */
		if (ckc_write_deferred())
			return CKC_PASS;
	}
	/* a write that makes no new version (an update in place, a shared
	 * file's O_CREAT, an append, HDF5's look for a file before it makes
	 * it) works on the real file, of which a cache that has not started
	 * holds nothing: the real open answers, and the process's first
	 * whole checkpoint still goes to its real path as above */
	if (acc != O_RDONLY && !(flags & (O_TRUNC | O_EXCL)) && !ckc_engine_started()) {
		alias_in_place(canon);
		return CKC_PASS;
	}
	/* another process, or another descriptor of this one, writes the
	 * file at its real path (handed over to it, or opened there): so does
	 * this open, as without the library (a version cached meanwhile would
	 * find at its publication a file changed after it began) */
	if (!ckc_engine_ready() ||
	    (acc != O_RDONLY && (ckc_node_writer_handed || ((flags & O_TRUNC) && ckc_node_inplace_any(canon)))))
		return CKC_PASS;
	ckc_enter();
	/* the cache's file creations and renames in the checkpoint folders
	 * wait meanwhile: the program's lookups there would wait for them */
	ckc_prog_begin();
	int fd = open_tagged(canon, flags, mode, start);
	ckc_prog_end();
	if ((flags & O_ACCMODE) == O_RDONLY)
		ckc_prog_read_opened();
	ckc_leave();
	if (fd == -EMFILE)
		emfile_said(canon);
	return fd;
}

int ckc_open_linked(const char *canon, int flags)
{
	char target[PATH_MAX];
	int saved = errno;
	if (!ckc_engine_ready() || !ckc_link_held(canon, target))
		return CKC_PASS;
	ckc_enter();
	ckc_prog_begin();
	int fd = open_read_tagged(target, flags);
	ckc_prog_end();
	ckc_prog_read_opened();
	ckc_leave();
	errno = saved;
	return fd == CKC_PASS_LINKS ? CKC_PASS : fd;
}

/* The number at the start of *q ("123/"), past it and its slash, where it
 * names a thread of this process (its id or one of its threads' ids: the
 * kernel's /proc/<tid>/ and /proc/<pid>/task/<tid>/ show this process's
 * descriptors) and what follows is "fd/" (or "task/", with task); NULL
 * otherwise. The id is asked about last, and only then: a look at another
 * process's /proc entry (ps, top, psutil) costs no system call. */
CKC_WARM_PATH static const char *procfd_own_id(const char *q, bool task)
{
	long id = 0;
	const char *p = q;
	if (*p < '1' || *p > '9')
		return NULL;
	for (; *p >= '0' && *p <= '9' && id < INT_MAX / 10; p++)
		id = id * 10 + (*p - '0');
	if (*p++ != '/' || (strncmp(p, "fd/", 3) != 0 && !(task && strncmp(p, "task/", 5) == 0)))
		return NULL;
	pid_t me = getpid();
	/* (another id: one of this process's threads when a signal 0 to it,
	 * within this process, reaches one) */
	if (id != me && syscall(SYS_tgkill, (long)me, id, 0L) != 0)
		return NULL;
	return p;
}

CKC_START_PATH int ckc_px_procfd_number(const char *path)
{
	const char *p = NULL;
	if (!path || path[0] != '/' || (path[1] != 'p' && path[1] != 'd'))
		return -1;
	if (!strncmp(path, "/dev/fd/", 8)) {
		p = path + 8;
	} else if (!strncmp(path, "/proc/", 6)) {
		const char *q = path + 6, *fd;
		int saved = errno;
		if (!strncmp(q, "self/", 5))
			fd = q + 5;
		else if (!strncmp(q, "thread-self/", 12))
			fd = q + 12;
		else
			fd = procfd_own_id(q, true);
		/* /proc/self/task/<tid>/fd/ and the like */
		if (fd && !strncmp(fd, "task/", 5))
			fd = procfd_own_id(fd + 5, false);
		errno = saved;
		if (!fd || strncmp(fd, "fd/", 3) != 0)
			return -1;
		p = fd + 3;
	} else {
		return -1;
	}
	long n = 0;
	/* the kernel's numbers there have no leading zero: /dev/fd/05 is
	 * no name of descriptor 5 */
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0'))
		return -1;
	for (; *p >= '0' && *p <= '9' && n < INT_MAX / 10; p++)
		n = n * 10 + (*p - '0');
	return *p ? -1 : (int)n;
}

int ckc_px_vfd_make_real(ckc_vfd_t *v)
{
	int rc = ckc_px_vfd_usable(v);
	return rc ? rc : ckc_vfd_demote(v);
}

void ckc_px_fd_make_real(int fd, const char *what)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return;
	int saved = errno;
	int rc = ckc_px_vfd_make_real(v);
	if (rc)
		ckc_error("checkpoint %s given to %s: it cannot be made a real file (%s); the call gets "
			  "another file", v->path, what, strerror(-rc));
	ckc_vfd_put(v);
	errno = saved;
}

CKC_TAGGED_PATH void ckc_px_procfd_open(const char *path)
{
	/* the kernel's open of that path opens the file behind the
	 * descriptor: it must be the real one */
	int n = ckc_px_procfd_number(path);
	if (n >= 0)
		ckc_px_fd_make_real(n, path);
}

CKC_TAGGED_PATH void ckc_px_real_opened(int fd, const char *path, const char *canon)
{
	if (fd < 0)
		return;
	/* a tagged path opened at its real file: marked, so that a rewrite
	 * of it goes in place, as this descriptor sees */
	if (canon) {
		ckc_passed_open(fd, canon);
		return;
	}
	(void)ckc_small_take(fd);
	/* a descriptor open at a real file, opened again by that path, is
	 * one more of that file */
	if (atomic_load_explicit(&ckc_passed_n, memory_order_relaxed)) {
		int n = ckc_px_procfd_number(path);
		if (n >= 0)
			ckc_passed_dup(n, fd);
	}
}

static int open_look(int dirfd, const char *path, int flags, mode_t mode, int look, int saved);

/* fd, which the real open gave: its number's past is forgotten, and a
 * folder opened without following a link is noted for the walk below it */
static inline int open_seen(int dirfd, const char *path, int flags, int fd)
{
	ckc_vfd_unseen(fd);
	if (fd >= 0 && (flags & O_NOFOLLOW) && ckc_tag_dirv_cap)
		ckc_tag_opened(dirfd, path, flags, fd);
	return fd;
}

/* The real openat, as a call of the program's that takes the lowest free
 * number (intercept.h); mode is always given. */
static int num_openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = (mode_t)va_arg(ap, int);
	va_end(ap);
	return CKC_FD_NUM(REAL(openat)(dirfd, path, flags, mode));
}

CKC_TAGGED_PATH static int open_common(int dirfd, const char *path, int flags, mode_t mode)
{
	int saved = errno;
	int (*ro)(int, const char *, int, ...) = REAL(openat) ? num_openat : NULL;
	int fd;
	/* a folder (a walker's open: find, du, tar, os.walk): no checkpoint is
	 * one, so the real open answers first, without a look at the path;
	 * the cache is asked only when the name is missing there (a checkpoint
	 * it holds and the real path lacks is a file: ENOTDIR) */
	if ((flags & O_DIRECTORY) && (flags & O_TMPFILE) != O_TMPFILE && ro) {
		fd = ro(dirfd, path, flags, mode);
		if (fd >= 0 || errno != ENOENT)
			goto opened;
		errno = saved;
	}
	/* what the look below would answer untagged, without a path built:
	 * one name in a folder below which nothing can be tagged (tar, cp -r,
	 * rsync over an untagged tree), whose verdict goes to what is opened,
	 * or a name no pattern can match (a Python script's JSON, a module
	 * its imports open) */
	bool none = false;
	int look = CKC_NAME_ASK;
	if (ro && (flags & O_TMPFILE) != O_TMPFILE) {
		none = ckc_tag_name_none(dirfd, path);
		look = none ? CKC_NAME_UNTAGGED : ckc_tag_name_look(path);
	}
	if (look == CKC_NAME_UNTAGGED) {
		if (__builtin_expect(ckc_tag_other_ranks(), 0) && !none && ckc_node_holds_any())
			ckc_node_ask_other_rank(dirfd, path);
		fd = ro(dirfd, path, flags, mode);
		if (fd < 0)
			return ckc_enoent_checked(dirfd, path, fd);
		(void)ckc_small_take(fd);
		if (!none)
			goto opened;
		ckc_vfd_unseen(fd);
		ckc_tag_opened_none(fd, flags);
		return fd;
	}
	return open_look(dirfd, path, flags, mode, look, saved);
opened:
	return open_seen(dirfd, path, flags, fd);
}

/* open_common's look at a path that may be tagged (look: what
 * ckc_tag_name_look said of it) and its open: the descriptor, or -1 with
 * errno. Out of line, as the canonical path is made only here: an open of
 * a name no pattern can match reaches no deeper into the program's stack
 * than the C library's. */
CKC_TAGGED_PATH __attribute__((noinline)) static int open_look(int dirfd, const char *path, int flags, mode_t mode, int look, int saved)
{
	char canon[PATH_MAX];
	int (*ro)(int, const char *, int, ...) = REAL(openat) ? num_openat : NULL;
	int fd;
	uint64_t t0 = 0;
	bool timed = false, links = false, first = false;
	/* a read passes to the real file whatever the path while the cache
	 * has not started (tag.c checks that): a folder's kept path may be
	 * used for it */
	ckc_tag_keep_ok = (flags & O_ACCMODE) == O_RDONLY && !(flags & (O_TRUNC | O_CREAT));
	bool tagged = look == CKC_NAME_TAGGED ? ckc_tagged_asked_canonical(path, canon)
		      : look == CKC_NAME_MAY  ? ckc_tagged_asked_named(dirfd, path, canon)
					      : ckc_tagged_asked(dirfd, path, canon);
	ckc_tag_keep_ok = false;
	if (tagged) {
		fd = ckc_open_tagged(canon, flags, mode, &t0);
		timed = fd == CKC_PASS_TIMED;
		links = fd == CKC_PASS_LINKS;
		first = fd == CKC_PASS_FIRST;
		if (fd != CKC_PASS && !timed && !links && !first)
			return (int)ckc_result(fd, saved);
	}
	if (!ro) {
		ckc_real_missing("openat");
		errno = ENOSYS;
		return -1;
	}
	if (!tagged)
		ckc_px_procfd_open(path);
	/* a checkpoint written at its real file (an update in place, a shared
	 * file's open without O_TRUNC): another process's new version of it
	 * is written there too (a process's first checkpoint, written whole
	 * at its real path before the cache starts, is not announced: it
	 * starts nothing) */
	uint64_t inplace = tagged && !first && (flags & O_ACCMODE) != O_RDONLY && !(flags & (O_PATH | O_DIRECTORY))
				   ? ckc_node_inplace_begin(canon, true)
				   : 0;
	/* announced, the holders are asked again: another process whose
	 * O_TRUNC open looked for writers in place before this one was
	 * announced, and made its version after this path's first ask
	 * (tag.c), holds it now (four ranks opening one shared file at once,
	 * rank 0 with O_TRUNC: its version replaced the file the others had
	 * written, which the library kept, saying so, in 1 of 20 runs) */
	if (inplace)
		ckc_node_ask(canon);
	errno = saved; /* the cache's looks may have set it */
	fd = ro(dirfd, path, flags, mode);
	if (inplace)
		ckc_node_inplace_opened(inplace, fd);
	if (first)
		ckc_first_write_done(fd >= 0);
	if (links && fd < 0 && errno == ENOENT) {
		int lfd = ckc_open_linked(canon, flags);
		if (lfd != CKC_PASS)
			return (int)ckc_result(lfd, saved);
		errno = saved;
		fd = ro(dirfd, path, flags, mode);
	}
	if (fd < 0)
		(void)ckc_enoent_checked(dirfd, path, fd);
	/* the number's last timed file may have left without a close the
	 * library saw: that sample is dropped (one load when none is timed) */
	if (timed && fd >= 0)
		ckc_small_opened(fd, t0);
	else
		ckc_px_real_opened(fd, path, tagged && !(flags & (O_PATH | O_DIRECTORY)) ? canon : NULL);
	return open_seen(dirfd, path, flags, fd);
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

CKC_TAGGED_PATH CKC_EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	return open_common(AT_FDCWD, path, flags, mode);
}

CKC_WARM_PATH CKC_EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	return open_common(AT_FDCWD, path, flags, mode);
}

CKC_TAGGED_PATH CKC_EXPORT int openat(int dirfd, const char *path, int flags, ...)
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

CKC_WARM_PATH CKC_EXPORT int creat(const char *path, mode_t mode)
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

CKC_TAGGED_PATH CKC_EXPORT int __openat_2(int dirfd, const char *path, int flags)
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
	uint64_t t0 = v ? 0 : ckc_small_take(fd);
	int rc = rc_close ? rc_close(fd) : 0;
	if (!v) {
		if (rc == 0)
			ckc_small_done(t0);
		return rc;
	}
	int e = ckc_vfd_put(v);
	return (int)ckc_result(e < 0 ? e : rc < 0 ? -errno : 0, saved);
}

/* (the first of the fast paths in link order: on a page's start, so that
 * their code, under two pages, takes two whatever the size of the code
 * the linker puts before it; tests/launcher/run checks) */
CKC_HOT_PATH __attribute__((aligned(4096))) CKC_EXPORT int close(int fd)
{
	ckc_tag_forget_fd(fd);
	if (__builtin_expect(ckc_node_inplace_count() != 0, 0))
		ckc_node_inplace_close(fd);
	if (__builtin_expect(!ckc_fd_maybe_tagged(fd), 1)) {
		/* one of the library's files: not the program's (a loop that
		 * closes every number from 3 up took a checkpoint's file from
		 * its publication), as without the library, EBADF */
		if (__builtin_expect(ckc_fd_mine(fd), 0) && ckc_fd_mine_live()) {
			errno = EBADF;
			return -1;
		}
		uint64_t t0 = ckc_small_take(fd);
		int rc = REAL(close)(fd);
		if (rc == 0 && t0)
			ckc_small_done(t0);
		return rc;
	}
	return ckc_close_fd(fd);
}

/* glibc's syscall() with a number that closes or replaces descriptors is
 * the call of that name (a checkpoint's number is closed as by close(),
 * its version published); any other number goes to the C library, with
 * the six arguments it takes from the registers whatever the number. A
 * sanitizer's runtime calls it (setrlimit) before its shadow memory
 * exists: no instrumentation here. */
__attribute__((no_sanitize_address, no_sanitize("undefined"), no_sanitize("thread")))
CKC_EXPORT long syscall(long n, ...)
{
	va_list ap;
	long a[6];
	va_start(ap, n);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	switch (n) {
	case SYS_close:
		return close((int)a[0]);
#ifdef SYS_close_range
	case SYS_close_range:
		return close_range((unsigned)a[0], (unsigned)a[1], (int)a[2]);
#endif
#ifdef SYS_dup2
	case SYS_dup2:
		return dup2((int)a[0], (int)a[1]);
#endif
	case SYS_dup3:
		return dup3((int)a[0], (int)a[1], (int)a[2]);
	/* a change of the calling thread's ids past the C library, as one
	 * through it: what the process owes is published first, and the ids
	 * the library keeps (ckc_geteuid) are asked of the kernel from then on */
	case SYS_setuid:
	case SYS_setgid:
	case SYS_setreuid:
	case SYS_setregid:
	case SYS_setresuid:
	case SYS_setresgid:
		ckc_identity_changing();
		return ckc_syscall6(n, a[0], a[1], a[2], a[3], a[4], a[5]);
	default:
		return ckc_syscall6(n, a[0], a[1], a[2], a[3], a[4], a[5]);
	}
}

CKC_EXPORT int chdir(const char *path)
{
	ckc_tag_cwd_changed();
	return ckc_enoent_checked(AT_FDCWD, path, REAL(chdir)(path));
}

CKC_WARM_PATH CKC_EXPORT int fchdir(int fd)
{
	/* a cached checkpoint's number is a placeholder (no folder): as for
	 * the file it stands for */
	if (ckc_fd_cached(fd)) {
		errno = ENOTDIR;
		return -1;
	}
	ckc_tag_cwd_changed();
	return REAL(fchdir)(fd);
}

/* readlink(2) of /proc/self/fd/N (or /dev/fd/N) where N is a cached
 * checkpoint's number names the checkpoint, as the kernel names the file
 * behind a descriptor, not the placeholder's inode; the length, or
 * -1 where path is no such name. */
/* v's file's name into buf (len bytes at most): by its name of now, which
 * a rename moves; unlinked or renamed over, by the one it had last, as the
 * kernel names such a file (out of line: its two paths are on the stack
 * only for a checkpoint's number). */
__attribute__((noinline)) static ssize_t vfd_link_name(const ckc_vfd_t *v, char *buf, size_t len, bool *gone)
{
	char now[PATH_MAX], del[PATH_MAX + 16];
	ckc_enter();
	bool named = ckc_handle_name(v->h, now, gone, NULL);
	ckc_leave();
	const char *name = named ? now : v->path;
	if (*gone) {
		snprintf(del, sizeof(del), "%s (deleted)", name);
		name = del;
	}
	size_t k = strlen(name);
	if (k > len)
		k = len;
	memcpy(buf, name, k);
	return (ssize_t)k;
}

CKC_WARM_PATH static ssize_t readlink_vfd(const char *path, char *buf, size_t len, bool *gone)
{
	int n = ckc_px_procfd_number(path);
	ckc_vfd_t *v = ckc_vfd_held(n);
	ssize_t k = -1;
	*gone = false;
	if (v && !v->switched)
		k = vfd_link_name(v, buf, len, gone);
	ckc_vfd_drop(v);
	return k;
}

CKC_WARM_PATH CKC_EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	bool gone;
	ssize_t k = path[0] == '/' ? readlink_vfd(path, buf, len, &gone) : -1;
	if (k >= 0)
		return k;
	if (!REAL(readlinkat)) {
		errno = ENOSYS;
		return -1;
	}
	return REAL(readlinkat)(dirfd, path, buf, len);
}

CKC_WARM_PATH CKC_EXPORT ssize_t readlink(const char *path, char *buf, size_t len)
{
	return readlinkat(AT_FDCWD, path, buf, len);
}

/* realpath(3) looks at the path with the C library's own calls: the file
 * behind a tagged descriptor's /proc/self/fd/N is its placeholder to it,
 * and a cached checkpoint its real path lacks is not there (ENOENT). Both
 * are named here, as the kernel would name them. */
CKC_EXPORT char *realpath(const char *path, char *resolved)
{
	char canon[PATH_MAX];
	int saved = errno;
	bool gone = false;
	ssize_t k = path && path[0] == '/' ? readlink_vfd(path, canon, sizeof(canon) - 1, &gone) : -1;
	if (gone) {
		/* (the kernel's name of an unlinked file leads nowhere) */
		errno = ENOENT;
		return NULL;
	}
	if (k < 0) {
		if (!REAL(realpath)) {
			errno = ENOSYS;
			return NULL;
		}
		char *r = REAL(realpath)(path, resolved);
		if (r || errno != ENOENT)
			return r;
		if (!ckc_cached_follow(AT_FDCWD, path, canon, NULL)) {
			/* a folder on the way that is a checkpoint: ENOTDIR */
			(void)ckc_enoent_checked(AT_FDCWD, path, -1);
			/* none held any more: one published since the first
			 * look is at its real path now, which answers */
			return errno == ENOENT ? REAL(realpath)(path, resolved) : NULL;
		}
	} else {
		canon[k] = '\0';
	}
	char *r = resolved ? strcpy(resolved, canon) : strdup(canon);
	if (r)
		errno = saved;
	return r;
}

CKC_EXPORT char *canonicalize_file_name(const char *path)
{
	return realpath(path, NULL);
}

/* The directory stream's descriptor is closed inside the C library. */
CKC_WARM_PATH CKC_EXPORT int closedir(DIR *d)
{
	int fd = dirfd(d);
	ckc_tag_forget_fd(fd);
	/* a checkpoint's copy put on the folder's number (dup2) goes with it */
	ckc_vfd_t *v = ckc_vfd_take_closing(fd);
	int rc = REAL(closedir)(d);
	if (v)
		ckc_vfd_put(v);
	return rc;
}

/* Drops the virtual descriptors of [first, last], before the real call
 * closes the placeholders (after it, a number could already be another
 * thread's new checkpoint's). */
static void vfd_close_range(unsigned first, unsigned last)
{
	/* (asked once: in a vfork child each look is a system call, and a
	 * child closing up to the limit looked at each of 20,000 numbers) */
	bool vfork_child = ckc_in_vfork_child();
	unsigned dh = atomic_load_explicit(&ckc_tag_dirv_hi, memory_order_relaxed);
	for (unsigned fd = first; fd < ckc_tag_dirv_cap && fd < dh && fd <= last; fd++)
		ckc_tag_forget_fd((int)fd);
	/* (a vfork child's numbers are its own, the in-place table its
	 * parent's) */
	if (!vfork_child && ckc_node_inplace_count()) {
		size_t top = ckc_node_inplace_top();
		for (unsigned fd = first; fd < ckc_vfd_cap && fd <= last && fd <= top; fd++)
			ckc_node_inplace_close((int)fd);
	}
	if (ckc_vfd_cap == 0 || first >= ckc_vfd_cap || vfork_child)
		return;
	/* (numbers above the highest one ever virtual have no entry) */
	size_t vh = atomic_load(&ckc_vfd_hi);
	if (last >= ckc_vfd_cap)
		last = (unsigned)ckc_vfd_cap - 1;
	if (last > vh)
		last = (unsigned)vh;
	for (unsigned fd = first; fd <= last; fd++)
		if (atomic_load_explicit(&ckc_vfd_tab[fd], memory_order_relaxed)) {
			ckc_vfd_t *v = ckc_vfd_take((int)fd);
			if (v)
				ckc_vfd_put(v);
		}
}

/* close_range over [first, last] around the engine's own files, which a
 * program closing numbers it does not know (closefrom(3) before its work,
 * Python's os.closerange) would take from the cache: the bytes of the
 * checkpoints they hold were lost. 0, or -1 with the first failure's
 * errno. */
static int close_range_around(int (*rc_range)(unsigned, unsigned, int), unsigned first, unsigned last,
			      int flags)
{
	int e = 0;
	unsigned lo = first;
	/* (the engine's numbers are below the table's size: m + 1 never wraps) */
	for (int m; lo <= last && (m = ckc_fd_mine_next(lo, last)) >= 0; lo = (unsigned)m + 1)
		if ((unsigned)m > lo && rc_range(lo, (unsigned)m - 1, flags) != 0 && !e)
			e = errno;
	if (lo <= last && rc_range(lo, last, flags) != 0 && !e)
		e = errno;
	if (e)
		errno = e;
	return e ? -1 : 0;
}

CKC_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	int (*rc_range)(unsigned, unsigned, int) = REAL(close_range);
	if (!rc_range) {
		errno = ENOSYS;
		return -1;
	}
	/* the placeholders' base and the checkpoints are forgotten before
	 * their numbers are free; a call the kernel refuses at once (flags
	 * it does not know) closes nothing, and CLOSE_RANGE_CLOEXEC only
	 * marks them: the program still has them */
	bool closes = !(flags & ~(unsigned)CLOSE_RANGE_UNSHARE) && first <= last;
	if (closes) {
		ckc_small_drop(first, last);
		vfd_close_range(first, last);
	}
	return (flags & CLOSE_RANGE_CLOEXEC) || first > last || ckc_in_vfork_child()
		       ? rc_range(first, last, flags)
		       : close_range_around(rc_range, first, last, flags);
}

CKC_EXPORT void closefrom(int lowfd)
{
	void (*rc_from)(int) = REAL(closefrom);
	int (*rc_range)(unsigned, unsigned, int) = REAL(close_range);
	if (lowfd >= 0) {
		ckc_small_drop((unsigned)lowfd, ~0u);
		vfd_close_range((unsigned)lowfd, ~0u);
	}
	int saved = errno;
	/* (as the C library's: close_range, else the numbers one by one) */
	if (lowfd < 0 || ckc_in_vfork_child() || close_range_around(rc_range, (unsigned)lowfd, ~0u, 0) != 0)
		rc_from(lowfd);
	errno = saved;
}
