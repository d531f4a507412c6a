/* The home tier: the checkpoint's real path. A version is published by
 * writing a temporary file in the same directory and renaming it into place,
 * so no reader ever sees a partial file. Also rescue files, for bytes whose
 * real path could not be written. */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "log.h"
#include "path.h"
#include "state.h"
#include "sys.h"

static atomic_uint home_tmp_counter;

int ckc_src_snapshot(const ckc_obj_t *o, int level, ckc_src_t *s)
{
	memset(s, 0, sizeof(*s));
	if (level >= ckc_eng.ntier - 1) {
		s->path = o->rescue && !o->at_home ? o->rescue : o->key;
		s->path = strdup(s->path);
		return s->path ? 0 : -ENOMEM;
	}
	const ckc_place_t *p = &o->place[level];
	s->t = &ckc_eng.tier[level];
	s->n = p->nexts;
	if (p->nexts) {
		s->ext = sys_malloc((size_t)p->nexts * sizeof(*s->ext));
		if (!s->ext)
			return -ENOMEM;
		memcpy(s->ext, p->ext, (size_t)p->nexts * sizeof(*s->ext));
	}
	return 0;
}

void ckc_src_release(ckc_src_t *s)
{
	sys_free(s->ext);
	sys_free((char *)s->path);
	memset(s, 0, sizeof(*s));
}

int ckc_src_read(const ckc_src_t *s, uint64_t off, void *buf, size_t len, int *fdp)
{
	if (!s->t) {
		ssize_t r = ckc_home_read(s->path, buf, len, off, fdp);
		return r < 0 ? (int)r : (size_t)r == len ? 0 : -EIO;
	}
	ckc_place_t p = { .nexts = s->n, .ext = s->ext };
	ckc_ext_t seg[16];
	char *dst = buf;
	while (len > 0) {
		int n = ckc_place_segments(&p, off, len, seg, 16);
		if (n == -E2BIG)
			n = 16;
		else if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			int rc = ckc_tier_get(s->t, seg[i].aoff, dst, seg[i].alen);
			if (rc)
				return rc;
			dst += seg[i].alen;
			off += seg[i].alen;
			len -= seg[i].alen;
		}
	}
	return 0;
}

int ckc_src_copy(const ckc_src_t *from, const ckc_src_t *to, uint64_t size,
		 void (*progress)(uint64_t done, void *ctx), void *ctx)
{
	int rc = 0;
	uint64_t have = 0;

	/* a copy whose extents end exactly at its last byte (an attached
	 * capture) has fewer bytes than the aligned size asked for */
	for (int i = 0; i < from->n; i++)
		have += from->ext[i].alen;
	if (size > have)
		size = have;
	for (uint64_t off = 0; !rc && off < size;) {
		uint64_t a, b, na, nb, n = size - off < CKC_BG_PIECE ? size - off : CKC_BG_PIECE;
		if (!ckc_ext_run(from->ext, from->n, off, &a, &na) ||
		    !ckc_ext_run(to->ext, to->n, off, &b, &nb))
			return -EIO;
		/* the largest run contiguous in both copies */
		n = n < na ? n : na;
		n = n < nb ? n : nb;
		ckc_bg_yield();
		rc = ckc_tier_copy(from->t, a, to->t, b, (size_t)n);
		off += n;
		if (progress)
			progress(off, ctx);
	}
	return rc;
}

static _Atomic uint64_t home_written;

uint64_t ckc_home_written(void)
{
	return atomic_load_explicit(&home_written, memory_order_relaxed);
}

void ckc_home_wrote(uint64_t n)
{
	atomic_fetch_add_explicit(&home_written, n, memory_order_relaxed);
}

int ckc_home_fill(int fd, const ckc_src_t *src, uint64_t size,
		  void (*progress)(uint64_t done, void *ctx), void *ctx)
{
	char *bounce = NULL;
	int rc = 0, rfd = -1;
	uint64_t told = 0;

	for (uint64_t off = 0, t0; off < size && rc == 0;) {
		size_t n = ckc_pace_begin(size - off, &t0);
		if (src->t && src->t->kind == TIER_HOST) {
			/* host memory goes straight to the file, run by run */
			uint64_t aoff, avail;
			if (!ckc_ext_run(src->ext, src->n, off, &aoff, &avail)) {
				rc = -EIO;
				break;
			}
			if (avail < n)
				n = (size_t)avail;
			rc = ckc_io_pwrite_all(fd, src->t->base + aoff, n, (off_t)off);
		} else {
			if (!bounce && sys_posix_memalign((void **)&bounce, CKC_ALIGN, CKC_BG_PIECE)) {
				rc = -ENOMEM;
				break;
			}
			rc = ckc_src_read(src, off, bounce, n, &rfd);
			if (!rc)
				rc = ckc_io_pwrite_all(fd, bounce, n, (off_t)off);
		}
		ckc_pace_end(n, t0);
		if (!rc)
			ckc_home_wrote(n);
		off += n;
		/* the progress takes the engine lock: not for every small piece */
		if (progress && (off - told >= CKC_BG_PIECE || off == size)) {
			progress(off, ctx);
			told = off;
		}
	}
	if (rfd >= 0)
		sys_close(rfd);
	sys_free(bounce);
	return rc;
}

/* A name for a temporary file in dir that no legal checkpoint name can
 * make too long: ".ckc.<pid>.<start>.<random>" (the process that made it
 * can be told from it, so that a later one removes it if this one dies). */
static char *home_tmp_name(const char *dir)
{
	char *name;
	uint64_t r = ckc_now_ns() ^ ((uint64_t)atomic_fetch_add(&home_tmp_counter, 1) << 40);
	r ^= r >> 29;
	r *= 0xBF58476D1CE4E5B9ull;
	if (asprintf(&name, "%s/.ckc.%ld.%llu.%08x", strcmp(dir, "/") ? dir : "", (long)getpid(),
		     ckc_self_start(), (unsigned)(r >> 32)) < 0)
		return NULL;
	return name;
}

/* Cleared once the kernel says anonymous files are not made here. */
static atomic_bool home_tmpfile_ok = true;

/* The process's umask as the program last set it (umask(2), seen by the
 * library), or as /proc/self/status said at the first need; -1 before. */
static _Atomic int home_umask = -1;

mode_t ckc_umask(void)
{
	int m = atomic_load(&home_umask);
	if (m >= 0)
		return (mode_t)m;
	m = 022;
	FILE *f = sys_fopen("/proc/self/status", "re");
	if (f) {
		char line[128];
		unsigned u;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "Umask: %o", &u) == 1) {
				m = (int)(u & 0777);
				break;
			}
		sys_fclose(f);
	}
	int none = -1;
	/* a umask(2) of the program's meanwhile is newer */
	atomic_compare_exchange_strong(&home_umask, &none, m);
	return (mode_t)atomic_load(&home_umask);
}

void ckc_umask_set(mode_t m)
{
	atomic_store(&home_umask, (int)(m & 0777));
}

/* A version's mode is final (the umask of its open applied, or an
 * existing file's): the umask now, which its creation applied, may have
 * taken bits of it away. It is set whatever the umask seems to be: the
 * program's umask(2) changes the kernel's before the library's copy of it,
 * and a file made in between lost bits the copy did not show (a rewrite
 * that keeps the file's mode then kept the wrong one). */
static void home_mode(int fd, mode_t mode)
{
	(void)sys_fchmod(fd, mode & 07777);
}

/* A change this process makes to the folder of a path (a publication, a
 * named temporary file made or removed there): counted as under way from
 * before it to after it, and the folder's times put back afterwards where
 * the program set them (ckc_dir_times_note). */
typedef struct dir_change {
	char dir[PATH_MAX];
	uint64_t seq;
	bool named, kept;
} dir_change_t;
static void dir_change_begin(const char *path, dir_change_t *c);
static void dir_change_end(const char *path, dir_change_t *c, bool changed);

int ckc_home_temp(const char *key, mode_t mode, char **tmp, int *fd)
{
	char dir[PATH_MAX];
	int rc = ckc_path_dirname(key, dir, sizeof(dir));

	if (rc)
		return rc;
	ckc_state_publishing();
	ckc_bg_yield();
	ckc_bg_yield_reads();
	if (atomic_load(&home_tmpfile_ok)) {
		/* an anonymous file: nothing to clean up if the process dies
		 * before it is published */
		int f = sys_open(dir, O_TMPFILE | O_RDWR, mode);
		if (f >= 0) {
			home_mode(f, mode);
			if (!(*tmp = home_tmp_name(dir))) {
				sys_close(f);
				return -ENOMEM;
			}
			*fd = f;
			return 0;
		}
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
			return -errno;
		atomic_store(&home_tmpfile_ok, false);
	}
	for (int tries = 0; tries < 16; tries++) {
		char *name = home_tmp_name(dir);
		if (!name)
			return -ENOMEM;
		ckc_state_tmp_add(name);
		ckc_bg_yield();
		/* (a new name in the folder changes its times, as the
		 * publication's link or rename does) */
		dir_change_t c;
		dir_change_begin(name, &c);
		int f = sys_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
		int e = errno;
		dir_change_end(name, &c, f >= 0);
		errno = e;
		if (f >= 0) {
			home_mode(f, mode);
			*tmp = name;
			*fd = f;
			return 0;
		}
		rc = -errno;
		ckc_state_tmp_del(name);
		sys_free(name);
		if (rc != -EEXIST)
			return rc;
	}
	return -EEXIST;
}

void ckc_home_discard(const char *tmp, int fd)
{
	if (fd >= 0)
		sys_close(fd);
	if (tmp) {
		/* an anonymous file has no name yet: nothing is removed */
		dir_change_t c;
		dir_change_begin(tmp, &c);
		int rc = sys_unlink(tmp);
		dir_change_end(tmp, &c, rc == 0);
		ckc_state_tmp_del(tmp);
	}
}

/* Gives the anonymous file fd the name tmp (a file made with a name keeps
 * it). Returns 0 or -errno. */
static int home_link(const char *tmp, int fd)
{
	struct stat st;
	char proc[64];

	if (sys_fstat(fd, &st) != 0)
		return -errno;
	if (st.st_nlink > 0)
		return 0;
	ckc_state_tmp_add(tmp);
	snprintf(proc, sizeof(proc), "/proc/thread-self/fd/%d", fd);
	if (sys_linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	int rc = -errno;
	ckc_state_tmp_del(tmp);
	return rc;
}

int ckc_fsync_dir_of(const char *path)
{
	char dir[PATH_MAX];
	int rc = ckc_path_dirname(path, dir, sizeof(dir));

	if (rc)
		return rc;
	int fd = sys_open(dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return -errno;
	rc = sys_fsync(fd) ? -errno : 0;
	sys_close(fd);
	return rc;
}

int ckc_attr_apply_fd(int fd, const ckc_attr_t *a)
{
	/* the owner first: a chown clears the set-user-ID bit that the
	 * recorded mode holds only if the program set it after its chown */
	if ((a->mask & CKC_ATTR_OWNER) && sys_fchown(fd, a->uid, a->gid) != 0)
		return -errno;
	if ((a->mask & CKC_ATTR_MODE) && sys_fchmod(fd, a->mode & 07777) != 0)
		return -errno;
	if ((a->mask & CKC_ATTR_TIMES) && sys_futimens(fd, a->times) != 0)
		return -errno;
	return 0;
}

/* A checkpoint whose real path did not exist when it began, in an
 * anonymous file: linking that file to the real path publishes it in one
 * step, with no temporary name to record, rename or clean up, and fails
 * with EEXIST where something was made there meanwhile: a file, a folder,
 * a symbolic link (one there when the checkpoint was opened made the
 * program write through it), each newer than the version. *named: it was
 * published; *taken: the name was taken. */
static void home_link_new(int fd, const char *key, bool *named, bool *taken)
{
	struct stat st;
	char proc[64];

	*named = *taken = false;
	if (sys_fstat(fd, &st) != 0 || st.st_nlink > 0)
		return; /* a named temporary file: renamed as any other */
	snprintf(proc, sizeof(proc), "/proc/thread-self/fd/%d", fd);
	if (sys_linkat(AT_FDCWD, proc, AT_FDCWD, key, AT_SYMLINK_FOLLOW) == 0)
		*named = true;
	else
		*taken = errno == EEXIST; /* anything else fails the same way below */
}

/* Whether the file at path is base's (ckc_fid_same), its change time left
 * out: a rename sets it. A file that cannot be looked at is not. */
static bool home_is_base(const ckc_fid_t *base, const char *path)
{
	ckc_fid_t now;
	ckc_fid_take(path, &now);
	if (!now.known || !now.exists)
		return false;
	now.ctime = base->ctime;
	return ckc_fid_same(base, &now);
}

/* The file named tmp takes the name key. Where the version began over a
 * file there (base), the two names are exchanged and the file key named
 * is looked at: one another program put there after the look before (a
 * rename of its own onto key meanwhile, which a rename of tmp would
 * replace for good) gets its name back, and the version is CKC_CHANGED
 * (it goes to a rescue file) with tmp removed by the caller. A file system
 * that cannot exchange names gets a rename. 0 or -errno. */
static int home_replace(const char *tmp, const char *key, const ckc_fid_t *base)
{
	if (base && base->known && base->exists) {
		if (sys_renameat2(AT_FDCWD, tmp, AT_FDCWD, key, RENAME_EXCHANGE) == 0) {
			if (home_is_base(base, tmp)) {
				(void)sys_unlink(tmp); /* the replaced file */
				return 0;
			}
			if (sys_renameat2(AT_FDCWD, tmp, AT_FDCWD, key, RENAME_EXCHANGE) == 0)
				return CKC_CHANGED;
			/* the other program's file keeps the temporary name */
			ckc_warn("checkpoint %s: the file another program put there meanwhile could not be given its "
				 "name back (%s); it is kept as %s",
				 key, strerror(errno), tmp);
			return 0;
		}
		if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP && errno != ENOENT)
			return -errno;
		/* no exchange here, or no file at key any more: a rename */
	}
	return sys_rename(tmp, key) == 0 ? 0 : -errno;
}

/* A publication (home_publish): fd closed unless keep_open. */
static int home_publish_in(char *tmp, const char *key, int fd, const ckc_fid_t *base, bool fsync_it,
			   bool keep_open, const ckc_attr_t *a)
{
	int rc = a ? ckc_attr_apply_fd(fd, a) : 0;
	bool named = false, taken = false;

	/* the sync before the name (once: its bytes and its times), so that
	 * a failed sync leaves nothing named, and a name is never on a file
	 * whose bytes may not be on disk */
	if (!rc && fsync_it && sys_fsync(fd) != 0)
		rc = -errno;
	if (!rc && !keep_open) {
		ckc_bg_yield();
		ckc_bg_yield_reads();
	}
	if (!rc && base && base->known && !base->exists)
		home_link_new(fd, key, &named, &taken);
	/* a file made or changed there since the version began is newer
	 * than it: never replaced */
	if (!rc && !named && base && (taken || ckc_fid_changed(base, key)))
		rc = CKC_CHANGED;
	if (!rc && !named)
		rc = home_link(tmp, fd);
	if (!keep_open && sys_close(fd) != 0 && !rc) {
		rc = -errno;
		if (named)
			(void)sys_unlink(key); /* its bytes may not be there */
	}
	if (!rc && !named)
		rc = home_replace(tmp, key, base);
	if (rc && !named) {
		ckc_home_discard(tmp, -1);
		return rc;
	}
	if (rc)
		return rc;
	if (!named)
		ckc_state_tmp_del(tmp);
	if (fsync_it)
		rc = ckc_fsync_dir_of(key);
	return rc;
}

static bool ts_eq(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* ---- folder times the program set ------------------------------------- */

/* Folders whose times the program set while this process held checkpoints
 * not yet published (ckc_dir_times_note): the most recent few. */
#define DIR_TIMES_MAX 16

typedef struct dir_times {
	char dir[PATH_MAX];
	dev_t dev; /* the folder itself: one made anew at the path is another */
	ino_t ino;
	struct timespec mtime; /* as the program set it */
	uint64_t seq;          /* when it was noted (dir_times_seq) */
	int changing;          /* the program's own changes of it under way */
} dir_times_t;

static dir_times_t dir_times[DIR_TIMES_MAX];
static _Atomic int dir_times_n; /* entries kept: 0 lets a publication skip the look */
static unsigned dir_times_next; /* the entry replaced when all are kept */
static _Atomic uint64_t dir_times_seq; /* notes so far */
/* publications under way, into any folder: while another is, a folder's
 * changed time may be its link's */
static _Atomic int dir_times_pubs;
/* one more as each of them begins and as each ends: a look that saw it
 * change met one that began or ended meanwhile (the count alone, read
 * after the look, misses one that ended between the two, its time put
 * back after the look saw its link's) */
static _Atomic uint64_t dir_times_gen;

/* A publication (or a note, which puts a time back) begins, and ends
 * (after its time is back). */
static void dir_pub_begin(void)
{
	atomic_fetch_add(&dir_times_pubs, 1);
	atomic_fetch_add(&dir_times_gen, 1);
}

static void dir_pub_end(void)
{
	atomic_fetch_add(&dir_times_gen, 1);
	atomic_fetch_sub(&dir_times_pubs, 1);
}
static ckc_mutex_t dir_times_lock = CKC_MUTEX_INIT(DIRTIMES);
CKC_LOCKS_AT_START(dir_times_lock, ckc_locks_add, &dir_times_lock)

/* The entry of dir, or -1 (dir_times_lock held). */
static int dir_times_find(const char *dir)
{
	for (int i = 0; i < DIR_TIMES_MAX; i++)
		if (dir_times[i].dir[0] && strcmp(dir_times[i].dir, dir) == 0)
			return i;
	return -1;
}

/* A copy of dir's entry into out: whether there is one. */
static bool dir_times_get(const char *dir, dir_times_t *out)
{
	ckc_mutex_lock(&dir_times_lock);
	int i = dir_times_find(dir);
	if (i >= 0)
		*out = dir_times[i];
	ckc_mutex_unlock(&dir_times_lock);
	return i >= 0;
}

/* Drops entry i if it is still the one noted at seq (dir_times_lock held). */
static void dir_times_drop(int i, uint64_t seq)
{
	if (i >= 0 && dir_times[i].seq == seq) {
		dir_times[i].dir[0] = '\0';
		atomic_fetch_sub(&dir_times_n, 1);
	}
}

/* Puts the modification time the program set last back on keep's folder,
 * if it is still that folder and still noted. The look and the setting
 * are made with the entry's lock held: a change of the program's to the
 * folder (ckc_dir_times_changing, before its call) then comes after the
 * time is back, or finds it not put back. */
static void dir_times_put_back(const dir_times_t *keep)
{
	int fd = sys_open(keep->dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return;
	struct stat st;
	struct timespec t[2] = { { .tv_nsec = UTIME_OMIT }, keep->mtime };
	ckc_mutex_lock(&dir_times_lock);
	int i = dir_times_find(keep->dir);
	/* (set again meanwhile: the newer time) */
	if (i >= 0 && !dir_times[i].changing && dir_times[i].dev == keep->dev && dir_times[i].ino == keep->ino &&
	    sys_fstat(fd, &st) == 0 && st.st_dev == keep->dev && st.st_ino == keep->ino) {
		t[1] = dir_times[i].mtime;
		if (!ts_eq(st.st_mtim, t[1]))
			(void)sys_futimens(fd, t);
	}
	ckc_mutex_unlock(&dir_times_lock);
	sys_close(fd);
}

void ckc_dir_times_note(const char *dir, const struct stat *st)
{
	if (strlen(dir) >= PATH_MAX)
		return;
	/* counted as a publication under way until the time is back: one
	 * that begins meanwhile may find the folder changed by one that
	 * linked a file there after the program's call, and must not take it
	 * for a change of someone else's */
	dir_pub_begin();
	ckc_mutex_lock(&dir_times_lock);
	int i = dir_times_find(dir);
	if (i < 0) {
		for (i = 0; i < DIR_TIMES_MAX && dir_times[i].dir[0]; i++)
			;
		if (i == DIR_TIMES_MAX)
			i = (int)(dir_times_next++ % DIR_TIMES_MAX);
		else
			atomic_fetch_add(&dir_times_n, 1);
		strcpy(dir_times[i].dir, dir);
		dir_times[i].changing = 0;
	}
	dir_times[i].dev = st->st_dev;
	dir_times[i].ino = st->st_ino;
	dir_times[i].mtime = st->st_mtim;
	dir_times[i].seq = atomic_fetch_add(&dir_times_seq, 1) + 1;
	dir_times_t keep = dir_times[i];
	ckc_mutex_unlock(&dir_times_lock);
	/* a publication between the program's call and the note changed it:
	 * put back (those from now on do it themselves) */
	dir_times_put_back(&keep);
	dir_pub_end();
}

bool ckc_dir_times_any(void)
{
	return atomic_load_explicit(&dir_times_n, memory_order_relaxed) > 0;
}

uint64_t ckc_dir_times_changing(const char *path)
{
	char dir[PATH_MAX];
	if (!ckc_dir_times_any() || ckc_path_dirname(path, dir, sizeof(dir)) != 0)
		return 0;
	ckc_mutex_lock(&dir_times_lock);
	int i = dir_times_find(dir);
	uint64_t tok = i >= 0 ? dir_times[i].seq : 0;
	if (i >= 0)
		dir_times[i].changing++;
	ckc_mutex_unlock(&dir_times_lock);
	return tok;
}

void ckc_dir_times_changed(const char *path, uint64_t tok, bool done)
{
	char dir[PATH_MAX];
	if (!tok || ckc_path_dirname(path, dir, sizeof(dir)) != 0)
		return;
	dir_times_t keep;
	ckc_mutex_lock(&dir_times_lock);
	int i = dir_times_find(dir);
	bool found = i >= 0 && dir_times[i].changing > 0;
	if (found) {
		dir_times[i].changing--;
		keep = dir_times[i];
		/* changed after its times were set: as without the library
		 * (unless they were set again meanwhile) */
		if (done && keep.seq == tok) {
			dir_times_drop(i, tok);
			found = false;
		}
	}
	ckc_mutex_unlock(&dir_times_lock);
	/* the call failed: the publications meanwhile put nothing back */
	if (found && !keep.changing)
		dir_times_put_back(&keep);
}

void ckc_dir_times_forget(const char *path)
{
	char dir[PATH_MAX];
	if (!atomic_load_explicit(&dir_times_n, memory_order_relaxed) || ckc_path_dirname(path, dir, sizeof(dir)) != 0)
		return;
	ckc_mutex_lock(&dir_times_lock);
	int i = dir_times_find(dir);
	if (i >= 0)
		dir_times_drop(i, dir_times[i].seq);
	ckc_mutex_unlock(&dir_times_lock);
}

/* Before a publication into key's folder (dir: its name): whether the
 * program set that folder's times, and nothing but this process's
 * publications changed it since. A folder changed otherwise (its time is
 * not the one set while no other publication of this process is under
 * way, or it is another folder now) is forgotten: it changed as without
 * the library. */
static bool dir_times_before(const char *dir)
{
	dir_times_t keep;
	if (!dir_times_get(dir, &keep))
		return false;
	/* (another publication under way may be one into this folder whose
	 * link changed it: a change is not told from it then) */
	/* (one the program is changing: its call decides, as it ends) */
	if (keep.changing)
		return true;
	/* another under way when the look began, or one that began or
	 * ended while it went on */
	uint64_t gen = atomic_load(&dir_times_gen);
	bool others = atomic_load(&dir_times_pubs) > 1;
	struct stat st;
	bool same = sys_stat(dir, &st) == 0 && st.st_dev == keep.dev && st.st_ino == keep.ino &&
		    (ts_eq(st.st_mtim, keep.mtime) || others || atomic_load(&dir_times_gen) != gen);
	if (!same) {
		ckc_mutex_lock(&dir_times_lock);
		dir_times_drop(dir_times_find(dir), keep.seq);
		ckc_mutex_unlock(&dir_times_lock);
	}
	return same;
}

/* After a publication into dir: the folder's time as the program set it
 * last, where the program set it before the publication (kept: what
 * dir_times_before said) or while it went on (noted after seq). */
static void dir_times_after(const char *dir, bool kept, uint64_t seq)
{
	dir_times_t keep;
	if (dir_times_get(dir, &keep) && (kept || keep.seq > seq))
		dir_times_put_back(&keep);
}

static void dir_change_begin(const char *path, dir_change_t *c)
{
	/* counted from before the look to after the time is back: a look
	 * meanwhile finds a changed time that may be this change's */
	dir_pub_begin();
	/* (the folder's times may be set while it changes: looked at after
	 * it as well) */
	c->seq = atomic_load(&dir_times_seq);
	c->named = c->kept = false;
	int saved = errno;
	if (atomic_load(&dir_times_n) && (c->named = ckc_path_dirname(path, c->dir, sizeof(c->dir)) == 0))
		c->kept = dir_times_before(c->dir);
	errno = saved;
}

static void dir_change_end(const char *path, dir_change_t *c, bool changed)
{
	int saved = errno;
	if (changed && (c->kept || atomic_load(&dir_times_n)) &&
	    (c->named || (c->named = ckc_path_dirname(path, c->dir, sizeof(c->dir)) == 0)))
		dir_times_after(c->dir, c->kept, c->seq);
	dir_pub_end();
	errno = saved;
}

/* ckc_home_commit and ckc_home_commit_open: fd closed unless keep_open;
 * the folder's times put back where the program set them. */
static int home_publish(char *tmp, const char *key, int fd, const ckc_fid_t *base, bool fsync_it,
			bool keep_open, const ckc_attr_t *a)
{
	dir_change_t c;
	dir_change_begin(key, &c);
	int rc = home_publish_in(tmp, key, fd, base, fsync_it, keep_open, a);
	/* (one that failed may have changed the folder all the same: its
	 * temporary name linked there and removed, a close that failed after
	 * the file was linked, a folder sync that failed) */
	dir_change_end(key, &c, true);
	return rc;
}

int ckc_home_commit(char *tmp, const char *key, int fd, bool fsync_it, const ckc_attr_t *a,
		    const ckc_fid_t *base)
{
	return home_publish(tmp, key, fd, base, fsync_it, false, a);
}

int ckc_home_commit_open(char *tmp, const char *key, int fd, const ckc_attr_t *a, const ckc_fid_t *base)
{
	return home_publish(tmp, key, fd, base, false, true, a);
}

ssize_t ckc_home_read(const char *path, void *buf, size_t len, uint64_t off, int *fdp)
{
	if (*fdp < 0) {
		*fdp = sys_open(path, O_RDONLY, 0);
		if (*fdp < 0)
			return -errno;
	}
	return ckc_io_pread_all(*fdp, buf, len, (off_t)off);
}

size_t ckc_home_read_cached(const char *path, void *buf, size_t len, uint64_t off, int *fdp)
{
	if (*fdp < 0 && (*fdp = sys_open(path, O_RDONLY, 0)) < 0)
		return 0;
	return ckc_io_pread_cached_all(*fdp, buf, len, (off_t)off);
}

bool ckc_home_dev(const char *key, const ckc_fid_t *id, dev_t *dev)
{
	char dir[PATH_MAX];
	struct stat st;

	if (id->known && id->exists) {
		*dev = id->dev;
		return true;
	}
	if (ckc_path_dirname(key, dir, sizeof(dir)) != 0 || sys_stat(dir, &st) != 0)
		return false;
	*dev = st.st_dev;
	return true;
}

bool ckc_home_in_memory(const char *path, uint64_t size)
{
	int fd = sys_open(path, O_RDONLY, 0);
	if (fd < 0)
		return false;
	struct stat st;
	/* the file that is there now, whole, and every page of it */
	bool held = sys_fstat(fd, &st) == 0 && (uint64_t)st.st_size == size && ckc_home_range_cached(fd, 0, size);
	sys_close(fd);
	return held;
}

bool ckc_home_range_cached(int fd, uint64_t off, uint64_t len)
{
	const uint64_t pg = 4096;
	uint64_t first = off / pg * pg, span = off + len - first;
	int64_t n = sys_cached(fd, first, span);
	return n >= 0 && (uint64_t)n >= span;
}

/* One line of the rescue index: the rescue file's name, a tab, the real
 * path, with backslash, tab and newline escaped. */
static void rescue_index(const char *priv, const char *name, const char *key)
{
	char idx[PATH_MAX];
	if (snprintf(idx, sizeof(idx), "%s/rescue.index", priv) >= (int)sizeof(idx))
		return;
	size_t n = strlen(name) + 2 * strlen(key) + 3, k = 0;
	char *line = sys_malloc(n);
	if (!line)
		return;
	k += (size_t)sprintf(line, "%s\t", name);
	for (const char *c = key; *c; c++) {
		if (*c == '\\' || *c == '\t' || *c == '\n')
			line[k++] = '\\';
		line[k++] = *c == '\t' ? 't' : *c == '\n' ? 'n' : *c;
	}
	line[k++] = '\n';
	int fd = sys_open(idx, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		/* O_APPEND: each line lands whole at the end, whatever the offset */
		(void)ckc_io_pwrite_all(fd, line, k, 0);
		sys_close(fd);
	}
	sys_free(line);
}

int ckc_home_rescue(const char *key, const ckc_src_t *src, uint64_t size, char **where)
{
	static atomic_uint rescue_seq;
	const char *base = ckc_eng.cfg.rescue_dir ? ckc_eng.cfg.rescue_dir : "/tmp";
	char priv[PATH_MAX], why[512];
	const char *leaf = strrchr(key, '/');
	int rc = ckc_private_dir(base, "CKPTCACHE_RESCUE_DIR", priv, sizeof(priv), why, sizeof(why));

	if (rc) {
		ckc_error("no rescue file for %s: %s", key, why);
		return rc;
	}
	leaf = leaf ? leaf + 1 : key;
	for (int tries = 0; tries < 64; tries++) {
		/* short whatever the path: the real path is in the index */
		char *name;
		if (asprintf(&name, "%s/rescue.%ld.%u-%.100s", priv, (long)getpid(),
			     atomic_fetch_add(&rescue_seq, 1), leaf) < 0)
			return -ENOMEM;
		/* a name nobody else could have made: in a private folder, new,
		 * and never through a symbolic link */
		int fd = sys_open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
		if (fd < 0) {
			rc = -errno;
			sys_free(name);
			if (rc == -EEXIST)
				continue;
			return rc;
		}
		rc = ckc_home_fill(fd, src, size, NULL, NULL);
		if (!rc && sys_fsync(fd) != 0)
			rc = -errno;
		sys_close(fd);
		if (rc) {
			sys_unlink(name);
			sys_free(name);
			return rc;
		}
		rescue_index(priv, strrchr(name, '/') + 1, key);
		(void)ckc_fsync_dir_of(name);
		*where = name;
		return 0;
	}
	return -EEXIST;
}

/* ---- what the real path holds ---------------------------------------- */

void ckc_fid_of(const struct stat *st, ckc_fid_t *id)
{
	id->known = true;
	id->exists = true;
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->size = st->st_size;
	id->mtime = st->st_mtim;
	id->ctime = st->st_ctim;
}

void ckc_fid_take_st(const char *path, ckc_fid_t *id, struct stat *st)
{
	memset(id, 0, sizeof(*id));
	if (sys_stat(path, st) == 0)
		ckc_fid_of(st, id);
	else
		id->known = errno == ENOENT; /* known to be absent */
}

void ckc_fid_take(const char *path, ckc_fid_t *id)
{
	struct stat st;

	ckc_fid_take_st(path, id, &st);
}

bool ckc_fid_same(const ckc_fid_t *a, const ckc_fid_t *b)
{
	if (!a->known || !b->known)
		return true; /* nothing to compare: no evidence of a change */
	if (a->exists != b->exists)
		return false;
	return !a->exists || (a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
			      ts_eq(a->mtime, b->mtime) && ts_eq(a->ctime, b->ctime));
}

bool ckc_fid_changed(const ckc_fid_t *base, const char *path)
{
	ckc_fid_t now;

	if (!base->known)
		return false;
	ckc_fid_take(path, &now);
	/* a file removed since is not overwritten by publishing */
	return now.known && now.exists && !ckc_fid_same(base, &now);
}
