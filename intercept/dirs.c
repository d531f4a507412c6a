/* Folder listings and removals of folders that hold checkpoints the cache
 * still owes to their real paths.
 *
 * A closed checkpoint is the cache's until its flush publishes it: its name
 * is not in its folder yet. A program that lists the folder (os.listdir,
 * glob, os.scandir, ls, a "keep the last k" rotation, a resume from the
 * newest checkpoint found) or removes it (shutil.rmtree, rm -r) would miss
 * it: the resume picks an older one, the removal leaves it to be published
 * into the folder afterwards. So opendir, fdopendir (the C library's and
 * gnulib's directory walkers) and rmdir of a folder under which the cache
 * owes closed checkpoints publish those first, waiting at most DIR_WAIT_NS
 * for flushes already under way; the listing then sees what it would have
 * seen without the library. A folder it owes nothing costs a look at the
 * cache's map (none at all in a process that cached nothing). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "intercept.h"
#include "log.h"
#include "path.h"

#define DIR_WAIT_NS (60ull * 1000000000u)

/* What this process last asked the node about: a folder listed (or about
 * to be removed), when, and whether a holder writes below it. A walker
 * lists every folder below the one it starts from, and a holder asked
 * about that one published what it owed below it at any depth: the
 * folders below it are not asked about again for DIR_ASKED_NS, and their
 * removals ask only if a holder writes below it. */
#define DIR_ASKED_NS (2ull * 1000000000u)
static struct {
	atomic_flag busy;
	uint64_t t_ns;
	bool writing;
	size_t len;
	char dir[PATH_MAX];
} dir_asked = { .busy = ATOMIC_FLAG_INIT };

/* Whether canon is (below) the folder last asked about within the window;
 * *writing: whether a holder writes below it. */
static bool dir_recently_asked(const char *canon, bool *writing)
{
	if (atomic_flag_test_and_set_explicit(&dir_asked.busy, memory_order_acquire))
		return false;
	size_t n = dir_asked.len;
	bool hit = dir_asked.t_ns && ckc_now_ns() - dir_asked.t_ns < DIR_ASKED_NS &&
		   !strncmp(canon, dir_asked.dir, n) && (canon[n] == '/' || canon[n] == '\0' || n == 1);
	*writing = dir_asked.writing;
	atomic_flag_clear_explicit(&dir_asked.busy, memory_order_release);
	return hit;
}

static void dir_asked_note(const char *canon, uint64_t t_ns, bool writing)
{
	size_t n = strlen(canon);
	if (atomic_flag_test_and_set_explicit(&dir_asked.busy, memory_order_acquire))
		return;
	dir_asked.t_ns = n < PATH_MAX ? t_ns : 0;
	dir_asked.writing = writing;
	dir_asked.len = n;
	if (n < PATH_MAX)
		memcpy(dir_asked.dir, canon, n + 1);
	atomic_flag_clear_explicit(&dir_asked.busy, memory_order_release);
}

/* Whether the patterns may tag a file under the folder canon, or where one
 * (a listing of that folder alone), a file in it. */
static bool dir_may_hold(const char *canon, bool one)
{
	return one ? !ckc_tag_dir_names_none(canon) : !ckc_tag_dir_holds_none(canon);
}

/* Other processes of the node that hold checkpoints are asked about the
 * folder dir (ckc_node_ask_dir), where the patterns may tag a file under
 * it (one: in it; then only those that hold something in it, by their
 * entry for the folder in the node's table, each time: a walker's look at
 * a folder nobody holds anything in is a search of the table). errno
 * kept. */
__attribute__((noinline)) static void others_ask(const char *dir, int what, bool one)
{
	char canon[PATH_MAX];
	int saved = errno;
	ckc_enter();
	if (ckc_path_resolve(dir, NULL, canon, sizeof(canon)) == 0 && dir_may_hold(canon, one)) {
		if (what == CKC_NODE_DIR_LIST && one) {
			(void)ckc_node_ask_dir_one(canon);
		} else if (what == CKC_NODE_DIR_MOVE) {
			dir_asked_note("", 0, true); /* files move: nothing known holds */
			ckc_node_ask_dir(canon, what);
		} else {
			bool writing = true;
			bool recent = dir_recently_asked(canon, &writing);
			if (what == CKC_NODE_DIR_LIST && !recent) {
				uint64_t t0 = ckc_now_ns();
				dir_asked_note(canon, t0, ckc_node_ask_dir(canon, what));
			} else if (what == CKC_NODE_DIR_GONE && (!recent || writing)) {
				ckc_node_ask_dir(canon, what);
			}
		}
	}
	ckc_leave();
	errno = saved;
}

/* (the gate: a folder's path is on the stack only where another process
 * of the node may hold something) */
CKC_WARM_PATH static void others_first(const char *dir, int what, bool one)
{
	if (!dir || ckc_io_guard || ckc_in_vfork_child() || !ckc_node_others())
		return;
	others_ask(dir, what, one);
}

/* Publishes what the cache owes under the folder dir before the caller
 * lists or removes it (and has the node's other processes publish what
 * they owe there); one: dir alone is listed, and where no file in it can
 * be tagged (a working folder above the checkpoints' own: Python lists
 * its own at its start) nothing of the cache's is there. errno kept. */
__attribute__((noinline)) static void owed_publish(const char *dir, bool one)
{
	static atomic_bool said;
	char canon[PATH_MAX];
	int saved = errno;
	ckc_enter();
	bool owes = ckc_owes_under(NULL), writers = ckc_writers_open();
	if ((owes || writers) && one && ckc_path_resolve(dir, NULL, canon, sizeof(canon)) == 0 &&
	    !dir_may_hold(canon, true))
		owes = writers = false;
	if (owes && ckc_owes_under(dir)) {
		int rc = ckc_publish_under(dir, DIR_WAIT_NS, false);
		if (rc == -ETIMEDOUT && !atomic_exchange(&said, true))
			ckc_warn("%s is listed before every closed checkpoint in it reached its real "
				 "path (waited %llu s): the listing may miss some",
				 dir, (unsigned long long)(DIR_WAIT_NS / 1000000000u));
	}
	/* a new file still being written: without the library the folder
	 * holds its name (and its bytes so far), so it is handed over to its
	 * real file, which it then writes through (bounded: a hand-over that
	 * fails leaves the rest) */
	char key[PATH_MAX];
	for (int i = 0; writers && i < 1000 && ckc_new_writer_under(dir, key) == 0; i++) {
		ckc_leave();
		int rc = ckc_hand_over_path(key);
		ckc_enter();
		if (rc)
			break;
	}
	ckc_leave();
	errno = saved;
}

/* Whether owed_first would look at anything: another process of the node
 * may hold something (others_first's gate), or this one's cache started. */
static inline bool owed_looks(void)
{
	return !ckc_io_guard && ((!ckc_in_vfork_child() && ckc_node_others()) || ckc_engine_started());
}

/* (the gate: this process's cache is asked only where it started); one:
 * the folder alone is listed (or removed), not the tree below it (a
 * walker of the C library's own, glob, a folder's new mode) */
CKC_WARM_PATH static void owed_first(const char *dir, bool one)
{
	others_first(dir, CKC_NODE_DIR_LIST, one);
	if (!dir || ckc_io_guard || !ckc_engine_started())
		return;
	owed_publish(dir, one);
}

/* The folder path names relative to dirfd, in full (PATH_MAX bytes), when
 * this process owes something, or another one may hold something, or
 * (writers) this process holds a version its real path lacks (one it
 * writes): 0, or -1 when none of these (or the folder cannot be named). */
CKC_WARM_PATH static int dir_full_at(int dirfd, const char *path, char *full, bool writers)
{
	if (!path || ckc_io_guard)
		return -1;
	if (path[0] == '/' || dirfd == AT_FDCWD) {
		size_t n = strlen(path);
		if (n >= PATH_MAX)
			return -1;
		memcpy(full, path, n + 1);
		return 0;
	}
	int saved = errno;
	bool owes = false;
	if (ckc_engine_started()) {
		ckc_enter();
		owes = ckc_owes_under(NULL) || (writers && ckc_holds_unpublished());
		ckc_leave();
	}
	int rc = -1;
	/* the node's other processes are asked only about a folder below
	 * which a file may be tagged: a walker's folders (opened one name at
	 * a time below one where none can be) are known without a look */
	bool others = !owes && !ckc_in_vfork_child() && !(!path[0] && ckc_tag_dir_none(dirfd)) &&
		      ckc_node_others();
	if (owes || others) {
		ssize_t n = ckc_fd_name(dirfd, full, PATH_MAX);
		if (n > 0) {
			size_t k = (size_t)n;
			if (!path[0] && ckc_tag_dir_holds_none(full))
				ckc_tag_dir_mark_none(dirfd);
			if (!path[0] || snprintf(full + k, PATH_MAX - k, "/%s", path) < (int)(PATH_MAX - k))
				rc = 0;
		}
	}
	errno = saved;
	return rc;
}

/* owed_first for the folder path names relative to dirfd. */
CKC_WARM_PATH static void owed_first_at(int dirfd, const char *path)
{
	char full[PATH_MAX];
	if (dir_full_at(dirfd, path, full, ckc_writers_open()) == 0)
		owed_first(full, true);
}

/* Whether dirfd and path (empty: dirfd itself) name a folder, or may: a
 * name the kernel does not answer for is taken for one. errno kept. */
static bool names_folder(int dirfd, const char *path)
{
	struct stat st;
	int saved = errno;
	int rc = !REAL(fstatat) || !REAL(fstat) ? -1 : path[0] ? REAL(fstatat)(dirfd, path, &st, 0) : REAL(fstat)(dirfd, &st);
	errno = saved;
	return rc != 0 || S_ISDIR(st.st_mode);
}

void ckc_dir_guarding(int dirfd, const char *path, int mode)
{
	char target[PATH_MAX];
	/* a descriptor's name (/proc/self/fd/N, /dev/fd/N): the folder it
	 * names */
	int n = path ? ckc_px_procfd_number(path) : -1;
	if (n >= 0) {
		int saved = errno;
		if (ckc_fd_name(n, target, sizeof(target)) > 0) {
			path = target;
			dirfd = AT_FDCWD;
		}
		errno = saved;
	}
	/* a mode with every search bit, or a process that holds nothing, takes
	 * no search permission from a cached checkpoint's folder */
	bool guards = (mode < 0 || (mode & 0111) != 0111) && ckc_holds_objects();
	char full[PATH_MAX];
	bool named = dir_full_at(dirfd, path, full, ckc_writers_open()) == 0;
	bool asks = named && owed_looks();
	/* only a folder's owner or mode guards what is under it: a file's
	 * (tar -x, cp -p, rsync and Python's copystat set one for each file
	 * they make) asks no other process, each of which would answer in
	 * turn, and a busy one after its work */
	if ((!guards && !asks) || !path || !names_folder(dirfd, path))
		return;
	if (guards)
		atomic_store_explicit(&ckc_dirs_guarded, true, memory_order_relaxed);
	if (asks)
		owed_first(full, false);
}

/* After the folder dir was removed: the open writers under it, of this
 * process and of the node's others, write on as into unlinked files (and
 * are never published into a folder made again by that name). */
static int forget_writer(const char *key)
{
	ckc_enter();
	int rc = ckc_forget(key);
	ckc_leave();
	return rc;
}

static void dir_removed(const char *dir)
{
	others_first(dir, CKC_NODE_DIR_GONE, false);
	if (!dir || ckc_io_guard || !ckc_engine_started())
		return;
	int saved = errno;
	(void)ckc_dir_each_writer(dir, forget_writer);
	errno = saved;
}

CKC_WARM_PATH CKC_EXPORT DIR *opendir(const char *name)
{
	owed_first(name, true);
	DIR *d = CKC_FD_NUM(REAL(opendir)(name));
	if (!d)
		(void)ckc_enoent_checked(AT_FDCWD, name, -1);
	else
		ckc_vfd_unseen(dirfd(d));
	return d;
}

CKC_WARM_PATH CKC_EXPORT DIR *fdopendir(int fd)
{
	owed_first_at(fd, "");
	return REAL(fdopendir)(fd);
}

/* The C library's own walkers open their folders inside it, past the
 * wrappers above: the folder they start from is published first. */
CKC_EXPORT int scandir(const char *dir, struct dirent ***list, int (*sel)(const struct dirent *),
		       int (*cmp)(const struct dirent **, const struct dirent **))
{
	owed_first(dir, true);
	return REAL(scandir)(dir, list, sel, cmp);
}

CKC_EXPORT int scandir64(const char *dir, struct dirent64 ***list, int (*sel)(const struct dirent64 *),
			 int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	owed_first(dir, true);
	return REAL(scandir64)(dir, list, sel, cmp);
}

CKC_EXPORT int scandirat(int dirfd, const char *dir, struct dirent ***list,
			 int (*sel)(const struct dirent *),
			 int (*cmp)(const struct dirent **, const struct dirent **))
{
	owed_first_at(dirfd, dir);
	return REAL(scandirat)(dirfd, dir, list, sel, cmp);
}

CKC_EXPORT int scandirat64(int dirfd, const char *dir, struct dirent64 ***list,
			   int (*sel)(const struct dirent64 *),
			   int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	owed_first_at(dirfd, dir);
	return REAL(scandirat64)(dirfd, dir, list, sel, cmp);
}

CKC_EXPORT int nftw(const char *dir, __nftw_func_t fn, int nfd, int flags)
{
	owed_first(dir, false);
	return REAL(nftw)(dir, fn, nfd, flags);
}

CKC_EXPORT int nftw64(const char *dir, __nftw64_func_t fn, int nfd, int flags)
{
	owed_first(dir, false);
	return REAL(nftw64)(dir, fn, nfd, flags);
}

CKC_EXPORT FTS *fts_open(char *const *paths, int options,
			 int (*cmp)(const FTSENT **, const FTSENT **))
{
	for (size_t i = 0; paths && paths[i]; i++)
		owed_first(paths[i], false);
	return REAL(fts_open)(paths, options, cmp);
}

/* The folder a glob pattern lists: its part before the first wildcard, up
 * to the last '/' there (the working directory when there is none). */
static void glob_first(const char *pattern)
{
	char dir[PATH_MAX];
	if (!pattern || ckc_io_guard || !ckc_engine_started())
		return;
	size_t w = strcspn(pattern, "*?[");
	size_t cut = 0;
	for (size_t i = 0; i < w; i++)
		if (pattern[i] == '/')
			cut = i;
	if (w == 0 || cut == 0 || cut >= sizeof(dir)) {
		owed_first(cut == 0 && pattern[0] == '/' ? "/" : ".", false);
		return;
	}
	memcpy(dir, pattern, cut);
	dir[cut] = '\0';
	owed_first(dir, false);
}

CKC_EXPORT int glob(const char *pattern, int flags, int (*err)(const char *, int), glob_t *g)
{
	glob_first(pattern);
	return REAL(glob)(pattern, flags, err, g);
}

CKC_EXPORT int glob64(const char *pattern, int flags, int (*err)(const char *, int), glob64_t *g)
{
	glob_first(pattern);
	return REAL(glob64)(pattern, flags, err, g);
}

/* Whether this process still writes a new checkpoint under the folder
 * dir: the kernel finds the file the program made there, which the real
 * folder lacks until its close publishes it. */
__attribute__((noinline)) static bool dir_writer_look(const char *dir)
{
	char key[PATH_MAX];
	int saved = errno;
	ckc_enter();
	bool has = ckc_writer_under(dir, key) == 0;
	ckc_leave();
	errno = saved;
	return has;
}

static bool dir_has_writer(const char *dir)
{
	return !ckc_io_guard && ckc_engine_started() && dir_writer_look(dir);
}

static int rmdir_common(const char *path)
{
	char full[PATH_MAX];
	bool named = dir_full_at(AT_FDCWD, path, full, true) == 0;
	if (named)
		owed_first(full, true);
	if (named && dir_has_writer(full)) {
		errno = ENOTEMPTY;
		return -1;
	}
	int rc = REAL(rmdir)(path);
	if (rc == 0 && named)
		dir_removed(full);
	return ckc_enoent_checked(AT_FDCWD, path, rc);
}

CKC_EXPORT int rmdir(const char *path)
{
	return CKC_CHANGING(AT_FDCWD, path, rmdir_common(path));
}

int ckc_dir_remove(int dirfd, const char *path, int flags, int (*real)(int, const char *, int))
{
	char full[PATH_MAX];
	bool named = dir_full_at(dirfd, path, full, true) == 0;
	if (named)
		owed_first(full, true);
	if (named && dir_has_writer(full)) {
		errno = ENOTEMPTY;
		return -1;
	}
	int rc = real(dirfd, path, flags);
	if (rc == 0 && named)
		dir_removed(full);
	return rc;
}

int ckc_dir_each_writer(const char *dir, int (*fn)(const char *key))
{
	char key[PATH_MAX];
	/* bounded: a writer fn could not move on is not tried forever */
	for (int i = 0; i < 100000; i++) {
		ckc_enter();
		int rc = ckc_writer_under(dir, key);
		ckc_leave();
		if (rc)
			return 0;
		if ((rc = fn(key)) != 0)
			return rc;
	}
	return 0;
}

void ckc_dir_moving(const char *dir)
{
	others_first(dir, CKC_NODE_DIR_MOVE, false);
	if (ckc_io_guard || !ckc_engine_started())
		return;
	/* this process's own writers under it: their descriptors follow the
	 * files, which the folder takes along */
	int saved = errno;
	(void)ckc_dir_each_writer(dir, ckc_hand_over_path);
	errno = saved;
}
