/* Tagged paths as the wrappers see them: a path and the directory it is
 * relative to, matched by the patterns of src/tagpat.c. Two quick answers
 * keep untagged work free of system
 * calls: a name no pattern's last component matches, and a directory
 * descriptor below which no pattern can match (known per descriptor once
 * its path was looked up, or inherited from the descriptor it was opened at
 * by one name that is not followed if it is a symbolic link). */
#include "config.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "intercept.h"
#include "log.h"
#include "path.h"
#include "tagpat.h"

/* Per descriptor number: TAG_DIR_NONE once no path below that directory
 * can be tagged, TAG_DIR_PATH while its path may be kept (below). Cleared
 * when the number is closed or replaced. */
#define TAG_DIR_NONE CKC_TAG_DIR_NONE
#define TAG_DIR_PATH CKC_TAG_DIR_PATH
CKC_HOT_DATA _Atomic uint8_t *ckc_tag_dirv;
CKC_HOT_DATA size_t ckc_tag_dirv_cap;
atomic_uint ckc_tag_dirv_hi;
_Atomic unsigned ckc_tag_dpath_gen[CKC_TAG_DPATHS];

/* The paths of the last directory descriptors looked up, and of the
 * working directory, for a walker's opens of the names in a tagged folder
 * (tar, cp -r, rsync: an openat of each name at the folder's descriptor; a
 * Python loop: an open of each relative name), which would otherwise read
 * /proc/self/fd/N or call getcwd for each. A descriptor's path is kept
 * while its number is not closed or replaced through the library
 * (ckc_tag_dpath_gen of its slot), the working directory's while chdir and
 * fchdir are not called (tag_cwd_gen), and either is used only for an open
 * that the caller passes to the real file whatever the answer
 * (ckc_tag_keep_ok: a read, or a stat, in a process that has not started
 * the cache) and only while this process holds no checkpoint: then the
 * path decides whether the read is counted as a tagged one and which path
 * the node's other processes are asked to publish first. A folder renamed
 * on the node by a process of the library makes every kept path go (the
 * node's count of moves, ckc_node_moves); where the node's table is not
 * mapped, a path is kept only while nothing on the node is held. A number
 * closed and reused behind the library's back (a raw system call) while
 * another process holds a checkpoint below it could ask that process about
 * the wrong path: raw system calls are not seen (ckptcache(7)). Each is
 * taken with a try-lock: a thread that finds it busy looks the path up. */
typedef struct {
	atomic_flag busy;
	int fd;
	unsigned gen;
	uint64_t moves; /* the node's count of moves when it was looked up */
	bool none; /* no path below it can be tagged (ckc_tag_dir_holds_none) */
	bool all;  /* every name in it is tagged (ckc_tag_dir_holds_all) */
	size_t len;
	char path[PATH_MAX];
} tag_kept_t;

/* Four descriptors' paths, by number: a walker's folder and the folder
 * inside it that it reads next (tar, du), each kept while it works in the
 * other. */
static tag_kept_t tag_dpath[CKC_TAG_DPATHS] = {
	[0 ... CKC_TAG_DPATHS - 1] = { .busy = ATOMIC_FLAG_INIT, .fd = -1 },
};
static tag_kept_t tag_cwd = { .busy = ATOMIC_FLAG_INIT, .fd = -1 };
CKC_HOT_DATA static _Atomic unsigned tag_cwd_gen;

__thread bool ckc_tag_keep_ok;

static bool tag_kept_trusted(void)
{
	return ckc_tag_keep_ok && !ckc_read_needs_engine() && !ckc_holds_objects() &&
	       (atomic_load_explicit(&ckc_node_used, memory_order_relaxed) || !ckc_node_holds_any());
}

/* Copies k's path into out, and its verdict into none, if it is fd's of
 * generation gen, looked up at the node's count of moves mv. */
static bool tag_kept_get(tag_kept_t *k, int fd, unsigned gen, uint64_t mv, char *out, bool *none, bool *all)
{
	if (atomic_flag_test_and_set_explicit(&k->busy, memory_order_acquire))
		return false;
	bool hit = k->fd == fd && k->gen == gen && k->moves == mv;
	if (hit) {
		memcpy(out, k->path, k->len + 1);
		*none = k->none;
		*all = k->all;
	}
	atomic_flag_clear_explicit(&k->busy, memory_order_release);
	return hit;
}

/* gen, mv: the generation and the count of moves read before the path
 * was looked up. */
static void tag_kept_put(tag_kept_t *k, int fd, unsigned gen, uint64_t mv, const char *path, size_t len, bool none,
			 bool all)
{
	if (len >= PATH_MAX || atomic_flag_test_and_set_explicit(&k->busy, memory_order_acquire))
		return;
	k->fd = fd;
	k->gen = gen;
	k->moves = mv;
	k->none = none;
	k->all = all;
	k->len = len;
	memcpy(k->path, path, len + 1);
	atomic_flag_clear_explicit(&k->busy, memory_order_release);
}

/* The path of directory descriptor dirfd into out (PATH_MAX bytes), kept
 * or looked up, whether no path below it can be tagged into none, and
 * whether every name in it is into all (each when not NULL); 0 or -1. */
/* The last folder's verdicts this thread worked out (the patterns never
 * change once loaded): its path's hash with the low two bits the verdicts,
 * one word, so that a signal handler that interrupts its store reads an
 * old answer or the new one whole. A tool that writes a tree at a folder's
 * descriptor (tar x, cp -r, rsync) asks of one folder file after file. */
static __thread uint64_t tag_verdict_memo;

/* Whether nothing below folder dir (canonical) can be tagged (*none), and
 * whether everything is (*all): what ckc_tag_dir_holds_none and
 * ckc_tag_dir_holds_all answer. */
CKC_TAGGED_PATH static void tag_dir_verdicts(const char *dir, bool *none, bool *all)
{
	uint64_t h = ckc_path_hash(dir) & ~(uint64_t)3;
	uint64_t m = tag_verdict_memo;
	if ((m & ~(uint64_t)3) == h && h) {
		*none = m & 1;
		*all = m & 2;
		return;
	}
	*none = ckc_tag_dir_holds_none(dir);
	*all = !*none && ckc_tag_dir_holds_all(dir);
	tag_verdict_memo = h | (uint64_t)*none | ((uint64_t)*all << 1);
}

CKC_TAGGED_PATH static int tag_dir_path(int dirfd, char *out, bool *none, bool *all)
{
	bool kn, ka;
	bool trusted = tag_kept_trusted() && (size_t)dirfd < ckc_tag_dirv_cap;
	unsigned gen = 0;
	uint64_t mv = 0;
	if (trusted) {
		/* the mark first: a close from now on changes the generation */
		uint8_t v = atomic_load_explicit(&ckc_tag_dirv[dirfd], memory_order_acquire);
		if (v == 0) { /* (v stays 0 if marked, else it is the mark found) */
			ckc_tag_dirv_reach(dirfd);
			(void)atomic_compare_exchange_strong_explicit(&ckc_tag_dirv[dirfd], &v, TAG_DIR_PATH,
								      memory_order_acq_rel, memory_order_relaxed);
		}
		if (v != 0 && v != TAG_DIR_PATH)
			trusted = false;
		gen = atomic_load_explicit(&ckc_tag_dpath_gen[(unsigned)dirfd % CKC_TAG_DPATHS], memory_order_acquire);
		mv = ckc_node_moves();
		if (trusted && tag_kept_get(&tag_dpath[(unsigned)dirfd % CKC_TAG_DPATHS], dirfd, gen, mv, out, &kn, &ka)) {
			if (none)
				*none = kn;
			if (all)
				*all = ka;
			return 0;
		}
	}
	ssize_t n = ckc_fd_name(dirfd, out, PATH_MAX);
	if (n < 0)
		return -1;
	kn = ka = false;
	if (none || all || trusted)
		tag_dir_verdicts(out, &kn, &ka);
	if (none)
		*none = kn;
	if (all)
		*all = ka;
	if (trusted)
		tag_kept_put(&tag_dpath[(unsigned)dirfd % CKC_TAG_DPATHS], dirfd, gen, mv, out, (size_t)n, kn, ka);
	return 0;
}

/* The same for the working directory. */
static int tag_cwd_path(char *out, bool *none, bool *all)
{
	bool trusted = tag_kept_trusted(), kn, ka;
	unsigned gen = atomic_load_explicit(&tag_cwd_gen, memory_order_acquire);
	uint64_t mv = trusted ? ckc_node_moves() : 0;
	if (trusted && tag_kept_get(&tag_cwd, AT_FDCWD, gen, mv, out, &kn, &ka)) {
		if (none)
			*none = kn;
		if (all)
			*all = ka;
		return 0;
	}
	if (!getcwd(out, PATH_MAX))
		return -1;
	kn = ka = false;
	if (none || all || trusted)
		tag_dir_verdicts(out, &kn, &ka);
	if (none)
		*none = kn;
	if (all)
		*all = ka;
	if (trusted)
		tag_kept_put(&tag_cwd, AT_FDCWD, gen, mv, out, strlen(out), kn, ka);
	return 0;
}

int ckc_path_at(int dirfd, const char *path, char out[PATH_MAX])
{
	char base[PATH_MAX];
	if (!path || !*path)
		return -ENOENT;
	if (path[0] != '/' && (dirfd == AT_FDCWD ? tag_cwd_path(base, NULL, NULL) : tag_dir_path(dirfd, base, NULL, NULL)))
		return -ENOENT;
	return ckc_path_key(path, path[0] == '/' ? "/" : base, out, PATH_MAX);
}

CKC_START_PATH int ckc_tag_load(const char *paths, long rank)
{
	ckc_tag_free();
	int n = ckc_tagpat_load(paths, rank);
	/* as many numbers as the descriptor table (its pages stay unbacked
	 * until used) */
	if (n && !ckc_tag_dirv && ckc_fdtab_dirv) {
		ckc_tag_dirv = ckc_fdtab_dirv;
		ckc_tag_dirv_cap = ckc_vfd_cap;
	}
	return n;
}

void ckc_tag_free(void)
{
	ckc_tagpat_free();
	if (ckc_tag_dirv)
		memset((void *)ckc_tag_dirv, 0, ckc_tag_dirv_cap);
}

/* A relative path that never leaves its directory. */
static bool tag_stays_below(const char *path)
{
	/* (by its dots: the C library's strstr costs more to set up than a
	 * walker's short names take to scan) */
	for (const char *p = path; (p = strchr(p, '.')); p++)
		if (p[1] == '.' && (p == path || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
			return false;
	return true;
}

/* Whether the cached verdict of dirfd may be trusted: a verdict left by a
 * number closed behind the library's back (a raw system call) could hide a
 * checkpoint the cache holds, so verdicts count only while it holds none;
 * a checkpoint missed then is read and written at its real path. */
static bool tag_dir_known_empty(int dirfd)
{
	return (size_t)dirfd < ckc_tag_dirv_cap &&
	       atomic_load_explicit(&ckc_tag_dirv[dirfd], memory_order_relaxed) == TAG_DIR_NONE &&
	       !ckc_holds_objects();
}

/* The same for the working directory (cleared by chdir and fchdir). */
CKC_HOT_DATA static _Atomic uint8_t tag_cwdv;

CKC_WARM_PATH void ckc_tag_cwd_changed(void)
{
	atomic_store_explicit(&tag_cwdv, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&tag_cwd_gen, 1, memory_order_release);
}

static void tag_dir_set(int fd, uint8_t v)
{
	if ((size_t)fd >= ckc_tag_dirv_cap)
		return;
	if (v)
		ckc_tag_dirv_reach(fd);
	if (atomic_exchange_explicit(&ckc_tag_dirv[fd], v, memory_order_relaxed) == TAG_DIR_PATH)
		ckc_tag_dpath_gone(fd); /* path kept: it goes */
}

CKC_WARM_PATH bool ckc_tag_dir_none(int fd)
{
	return (size_t)fd < ckc_tag_dirv_cap &&
	       atomic_load_explicit(&ckc_tag_dirv[fd], memory_order_relaxed) == TAG_DIR_NONE;
}

void ckc_tag_dir_mark_none(int fd)
{
	tag_dir_set(fd, TAG_DIR_NONE);
}

static size_t tag_one_name(const char *path);

CKC_TAGGED_PATH bool ckc_tag_name_none(int dirfd, const char *path)
{
	return dirfd >= 0 && path && path[0] && tag_dir_known_empty(dirfd) &&
	       atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) && !ckc_in_vfork_child() &&
	       tag_one_name(path) != 0;
}

/* Whether path begins "/proc/" or "/dev/fd/", the two forms whose
 * descriptor number ckc_px_procfd_number (posix.c) then reads (byte by
 * byte: no read past a shorter path's end). */
static inline bool tag_fd_dir(const char *p)
{
	if (p[0] != '/')
		return false;
	if (p[1] == 'p')
		return p[2] == 'r' && p[3] == 'o' && p[4] == 'c' && p[5] == '/';
	return p[1] == 'd' && p[2] == 'e' && p[3] == 'v' && p[4] == '/' && p[5] == 'f' && p[6] == 'd' && p[7] == '/';
}

CKC_TAGGED_PATH int ckc_tag_name_look(const char *path)
{
	if (!path || !path[0] || !atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) || ckc_in_vfork_child() ||
	    tag_fd_dir(path))
		return CKC_NAME_ASK;
	/* (inside the engine nothing is tagged: the full look says so) */
	int known = path[0] == '/' && !ckc_io_guard ? ckc_tag_match_known_folder(path) : -1;
	if (known >= 0)
		return known ? CKC_NAME_TAGGED : CKC_NAME_UNTAGGED;
	return ckc_tag_name_may_match(path) ? CKC_NAME_MAY : CKC_NAME_UNTAGGED;
}

CKC_TAGGED_PATH void ckc_tag_opened_none(int fd, int flags)
{
	if ((flags & O_NOFOLLOW) && (size_t)fd < ckc_tag_dirv_cap)
		tag_dir_set(fd, TAG_DIR_NONE);
}

CKC_TAGGED_PATH void ckc_tag_opened(int dirfd, const char *path, int flags, int fd)
{
	/* one name, not followed if it is a symbolic link: what is opened is
	 * surely below dirfd (a walker's way: tar, du, find) */
	if ((size_t)fd >= ckc_tag_dirv_cap || (size_t)dirfd >= ckc_tag_dirv_cap || !(flags & O_NOFOLLOW) ||
	    atomic_load_explicit(&ckc_tag_dirv[dirfd], memory_order_relaxed) != TAG_DIR_NONE || !path || !*path ||
	    strchr(path, '/') || !strcmp(path, ".."))
		return;
	tag_dir_set(fd, TAG_DIR_NONE);
}

/* Whether path names a folder by its form: a last component "." or "..",
 * or a slash at the end ("ckpt.bin/"), which the kernel refuses for a file
 * (ENOTDIR, EISDIR). */
CKC_START_PATH static bool tag_dirish(const char *path)
{
	size_t n = strlen(path);
	if (!n || path[n - 1] == '/')
		return n != 0;
	if (path[n - 1] != '.')
		return false;
	/* a last component "." or ".." */
	return n == 1 || path[n - 2] == '/' || (path[n - 2] == '.' && (n == 2 || path[n - 3] == '/'));
}

/* Such a path is the kernel's to answer: a version of the file it spells
 * with its slashes and dots stripped, which the real path lacks, goes
 * there first, so that the kernel finds the file. */
CKC_START_PATH __attribute__((noinline)) static void tag_dirish_first(int dirfd, const char *path)
{
	char p[PATH_MAX], canon[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof(p))
		return;
	memcpy(p, path, n + 1);
	for (;;) {
		if (n > 1 && p[n - 1] == '/')
			p[--n] = '\0';
		else if (n > 2 && p[n - 1] == '.' && p[n - 2] == '/')
			p[n -= 2] = '\0';
		else
			break;
	}
	if (n && !tag_dirish(p) && ckc_tag_path_at(dirfd, p, canon))
		(void)ckc_hand_over_path(canon);
}

static bool tag_path_at(int dirfd, const char *path, size_t one, char *out, bool named);

/* A walker's name (tar, cp -r, a Python loop over os.listdir): one
 * component, not "." or "..": its length, else 0 (looked at in one pass:
 * a walker opens thousands). */
CKC_TAGGED_PATH static size_t tag_one_name(const char *path)
{
	const char *e = strchrnul(path, '/');
	if (*e || (path[0] == '.' && (!path[1] || (path[1] == '.' && !path[2]))))
		return 0;
	return (size_t)(e - path);
}

CKC_TAGGED_PATH static bool tagged_at(int dirfd, const char *path, char *out, bool named)
{
	if (!atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) || ckc_in_vfork_child())
		return false;
	size_t one = path && *path ? tag_one_name(path) : 0;
	if (!one && path && *path && tag_dirish(path)) {
		/* (its two paths are on the stack only where something is
		 * unpublished) */
		int saved = errno;
		if (ckc_holds_unpublished())
			tag_dirish_first(dirfd, path);
		errno = saved;
		return false;
	}
	return tag_path_at(dirfd, path, one, out, named);
}

CKC_TAGGED_PATH bool ckc_tagged_at(int dirfd, const char *path, char *out)
{
	return tagged_at(dirfd, path, out, false);
}

CKC_TAGGED_PATH bool ckc_tagged_at_named(int dirfd, const char *path, char *out)
{
	return tagged_at(dirfd, path, out, true);
}

/* canon lies below folder dir (canonical, not the root). */
static bool tag_below(const char *canon, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(canon, dir, n) == 0 && canon[n] == '/' && canon[n + 1];
}

CKC_START_PATH bool ckc_tag_path_at(int dirfd, const char *path, char *out)
{
	return tag_path_at(dirfd, path, path && *path ? tag_one_name(path) : 0, out, false);
}

static bool tag_path_in(int dirfd, const char *path, size_t one, char *out, bool named, char *base);

/* tag_path_in with a folder's path of its own (out of line: only a
 * relative path of several names needs it). */
CKC_TAGGED_PATH __attribute__((noinline)) static bool tag_path_based(int dirfd, const char *path, size_t one, char *out, bool named)
{
	char base[PATH_MAX];
	return tag_path_in(dirfd, path, one, out, named, base);
}

/* ckc_tag_path_at; one: path's length if it is one name (tag_one_name),
 * else 0; named: ckc_tag_name_may_match(path) held already. An absolute
 * path, and one name joined to its folder in out, are looked at with no
 * second path on the stack. */
CKC_TAGGED_PATH static bool tag_path_at(int dirfd, const char *path, size_t one, char *out, bool named)
{
	if (!path || !*path || ckc_io_guard || ckc_tagpat_count() == 0)
		return false;
	if (path[0] == '/' || one)
		return tag_path_in(dirfd, path, one, out, named, NULL);
	return tag_path_based(dirfd, path, one, out, named);
}

/* tag_path_at's look; base: PATH_MAX bytes for the folder's path, or NULL
 * where path is absolute or one name. */
CKC_TAGGED_PATH static bool tag_path_in(int dirfd, const char *path, size_t one, char *out, bool named, char *base)
{
	const char *b = NULL;

	/* a walker's name in a folder already known to hold none is not
	 * looked at (a pattern's last component may match every file there) */
	bool below = one || (path[0] != '/' && tag_stays_below(path));
	if (below && (dirfd == AT_FDCWD ? atomic_load_explicit(&tag_cwdv, memory_order_relaxed) == TAG_DIR_NONE &&
						  !ckc_holds_objects()
					: tag_dir_known_empty(dirfd)))
		return false;
	if (!named && !ckc_tag_name_may_match(path))
		return false;
	bool all = false;
	/* (one name: its folder's path goes where the name is joined to it) */
	char *bb = one ? out : base;
	if (path[0] != '/' && dirfd == AT_FDCWD) {
		bool none;
		if (tag_cwd_path(bb, &none, &all))
			return false;
		b = bb;
		if (none) {
			atomic_store_explicit(&tag_cwdv, TAG_DIR_NONE, memory_order_relaxed);
			if (below)
				return false;
		}
	} else if (path[0] != '/') {
		if (ckc_vfd_get(dirfd))
			return false; /* not a directory: the real call says so */
		bool none;
		if (tag_dir_path(dirfd, bb, &none, &all))
			return false;
		b = bb;
		if (none) {
			tag_dir_set(dirfd, TAG_DIR_NONE);
			if (below)
				return false;
		}
	}
	/* resolved as the kernel will: a path it refuses (a name longer than
	 * NAME_MAX, which the cache would take and never publish) is not
	 * tagged, and the real call gives the program the kernel's error (the
	 * kernel names a folder canonically); one name is joined to its
	 * folder, with nothing to walk */
	if (one && b == out && out[0] == '/') {
		bool root = !out[1];
		if (ckc_path_join_name(out, strlen(out), path, one, PATH_MAX) != 0)
			return false;
		/* (below a folder all of whose names are tagged: no match) */
		return (all && !root) || ckc_tag_match(out);
	}
	if (b == out) { /* (a folder's path of another form: walked) */
		if (!base)
			return tag_path_based(dirfd, path, one, out, named);
		b = memcpy(base, out, strlen(out) + 1);
	}
	if ((b ? ckc_path_resolve_in(path, b, out, PATH_MAX) : ckc_path_resolve(path, NULL, out, PATH_MAX)) != 0)
		return false;
	/* below a folder every path under which is tagged (a "**" pattern's):
	 * no match to make (a walker's open of each name at the folder's
	 * descriptor: tar, rsync) */
	if (all && tag_below(out, b))
		return true;
	return ckc_tag_match(out);
}

/* Links followed in a row by ckc_link_held, as the kernel follows 40. */
#define LINK_HOPS 8

/* A thread's last answers about a folder (freed when the thread ends): the
 * path the kernel reaches through it, kept while the folder it leads to
 * is the same one (a link retargeted leads elsewhere); whether it has a
 * default ACL, kept a second. */
#define ACL_KEEP_NS 1000000000ull
struct tag_cache {
	char dir[PATH_MAX], real[PATH_MAX];
	dev_t dev;
	ino_t ino;
	uint64_t at; /* when dir was last found to be that folder */
	bool known;
	char acl_dir[PATH_MAX];
	uint64_t acl_at;
	bool acl;
};
static pthread_key_t tag_cache_key;
static pthread_once_t tag_cache_once = PTHREAD_ONCE_INIT;
static bool tag_cache_ok;

static void tag_cache_make(void)
{
	tag_cache_ok = pthread_key_create(&tag_cache_key, free) == 0;
}

static struct tag_cache *tag_cache(void)
{
	pthread_once(&tag_cache_once, tag_cache_make);
	if (!tag_cache_ok)
		return NULL;
	struct tag_cache *c = pthread_getspecific(tag_cache_key);
	if (!c && (c = calloc(1, sizeof(*c))) && pthread_setspecific(tag_cache_key, c) != 0) {
		free(c);
		c = NULL;
	}
	return c;
}

/* The folder the kernel reaches through dir (its symbolic links followed),
 * in real: 0, or -errno. One stat of dir when the thread's last answer was
 * about it (none where that answer is younger than keep_ns); the kernel's
 * name of it otherwise (O_PATH, /proc/self/fd). */
static int link_folder(const char *dir, char real[PATH_MAX], uint64_t keep_ns)
{
	struct stat st;
	struct tag_cache *c = tag_cache();
	uint64_t now = keep_ns ? ckc_now_ns() : 0;
	if (keep_ns && c && c->known && now - c->at < keep_ns && !strcmp(c->dir, dir)) {
		strcpy(real, c->real);
		return 0;
	}
	if (REAL(stat)(dir, &st) != 0)
		return -errno;
	if (!now)
		now = ckc_now_ns();
	if (c && c->known && c->dev == st.st_dev && c->ino == st.st_ino && !strcmp(c->dir, dir)) {
		strcpy(real, c->real);
		c->at = now;
		return 0;
	}
	ckc_fd_quiet_begin();
	int fd = REAL(open)(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		ckc_fd_quiet_end();
		return -e;
	}
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/thread-self/fd/%d", fd);
	ssize_t k = readlink(proc, real, PATH_MAX - 1);
	int rc = k > 0 && real[0] == '/' ? 0 : -ENOENT;
	REAL(close)(fd);
	ckc_fd_quiet_end();
	if (rc)
		return rc;
	real[k] = '\0';
	if (c && strlen(dir) < sizeof(c->dir)) {
		strcpy(c->dir, dir);
		strcpy(c->real, real);
		c->dev = st.st_dev;
		c->ino = st.st_ino;
		c->at = now;
		c->known = true;
	}
	return 0;
}

/* Whether canon's folder has a default ACL, which gives a new file there
 * its mode in place of the umask (and an ACL of its own): asked of the
 * kernel once a second per thread and folder. */
bool ckc_folder_default_acl(const char *canon)
{
	char dir[PATH_MAX];
	if (ckc_path_dirname(canon, dir, sizeof(dir)))
		return false;
	uint64_t now = ckc_now_ns();
	struct tag_cache *c = tag_cache();
	if (c && c->acl_at && now - c->acl_at < ACL_KEEP_NS && !strcmp(c->acl_dir, dir))
		return c->acl;
	ssize_t (*gx)(const char *, const char *, void *, size_t) = REAL(getxattr);
	int saved = errno;
	bool acl = gx && gx(dir, "system.posix_acl_default", NULL, 0) > 0;
	errno = saved;
	if (c) {
		strcpy(c->acl_dir, dir);
		c->acl = acl;
		c->acl_at = now;
	}
	return acl;
}

/* Checkpoints this process wrote through a folder's symbolic link (run/x,
 * run a link to run_real), each with the path the kernel reaches
 * (run_real/x): two spellings of one file would be two versions in the
 * cache, published in either order. The list keeps the last ALIAS_MAX;
 * the one it drops is published first, so that no version is left that a
 * write through the other spelling would not see. */
#define ALIAS_MAX 1024
/* Spellings of one file looked at (a file has few). */
#define ALIAS_SAME 8
static struct alias {
	char *spelt, *real;
} *aliases;
static atomic_uint alias_n;
static unsigned alias_next;
static ckc_mutex_t alias_lock = CKC_MUTEX_INIT(ALIAS);
CKC_LOCKS_AT_START(alias_lock, ckc_locks_add, &alias_lock)

/* An in-place write's look at its folder, for the alias list alone, trusts
 * the thread's answer of the last LINK_KEEP_NS: a shell's loop of appends
 * (echo >> log) paid one stat of the folder for each. */
#define LINK_KEEP_NS 100000000ull

static bool link_real(const char *canon, char real[PATH_MAX], uint64_t keep_ns)
{
	char dir[PATH_MAX], rdir[PATH_MAX];
	if (ckc_path_dirname(canon, dir, sizeof(dir)) || link_folder(dir, rdir, keep_ns) || !strcmp(dir, rdir))
		return false;
	const char *base = canon + strlen(dir) + (strcmp(dir, "/") != 0);
	return snprintf(real, PATH_MAX, "%s/%s", rdir, base) < PATH_MAX;
}

bool ckc_link_real(const char *canon, char real[PATH_MAX])
{
	return link_real(canon, real, 0);
}

bool ckc_link_real_recent(const char *canon, char real[PATH_MAX])
{
	return link_real(canon, real, LINK_KEEP_NS);
}

void ckc_alias_write(const char *canon, const char *spelt_real, bool replacing)
{
	char real[PATH_MAX], *other[ALIAS_SAME], *moved = NULL;
	unsigned n = 0;
	bool spelt = spelt_real != NULL;
	if (!spelt && !atomic_load_explicit(&alias_n, memory_order_relaxed))
		return;
	strcpy(real, spelt ? spelt_real : canon);
	ckc_mutex_lock(&alias_lock);
	bool known = false;
	unsigned have = atomic_load(&alias_n);
	for (unsigned i = 0; i < have; i++) {
		bool same = !strcmp(aliases[i].spelt, canon);
		if (same && strcmp(aliases[i].real, real)) {
			/* the folder's link leads elsewhere now: a version held
			 * under this spelling belongs to the file it led to */
			char *r = strdup(real);
			if (r) {
				if (replacing && !moved)
					moved = aliases[i].real;
				else
					free(aliases[i].real);
				aliases[i].real = r;
			}
			known = true;
		} else if (!strcmp(aliases[i].real, real)) {
			if (!same) {
				if (n < ALIAS_SAME && (other[n] = strdup(aliases[i].spelt)))
					n++;
			} else {
				known = true;
			}
		}
	}
	char *dropped = NULL;
	if (spelt && !known && !aliases)
		aliases = calloc(ALIAS_MAX, sizeof(*aliases));
	if (spelt && !known && aliases) {
		struct alias *a = &aliases[alias_next];
		char *s = strdup(canon), *r = strdup(real);
		if (s && r) {
			dropped = a->spelt;
			free(a->real);
			*a = (struct alias){ s, r };
			alias_next = (alias_next + 1) % ALIAS_MAX;
			if (have < ALIAS_MAX)
				atomic_store(&alias_n, have + 1);
		} else {
			free(s);
			free(r);
		}
	}
	ckc_mutex_unlock(&alias_lock);
	/* it is named by that file's path, and published there (what the
	 * spelling leads to now is replaced by the version this open makes) */
	if (moved) {
		ckc_stat_t st;
		ckc_enter();
		/* (one published already is there: nothing to move) */
		if (ckc_stat_held(canon, &st) == 0 && !st.at_home)
			(void)ckc_rename(canon, moved);
		ckc_leave();
		free(moved);
	}
	if (dropped) {
		(void)ckc_hand_over_path(dropped);
		free(dropped);
	}
	/* the file's other spellings' versions go to it first, in order */
	if (spelt)
		(void)ckc_hand_over_path(real);
	for (unsigned i = 0; i < n; i++) {
		(void)ckc_hand_over_path(other[i]);
		free(other[i]);
	}
}

/* The spelling under which this process holds the file real names, from
 * the list of checkpoints written through a folder's link, in target. */
static bool alias_held(const char *real, char target[PATH_MAX])
{
	if (!atomic_load_explicit(&alias_n, memory_order_relaxed))
		return false;
	char *spelt[ALIAS_SAME];
	unsigned n = 0;
	ckc_mutex_lock(&alias_lock);
	unsigned have = atomic_load(&alias_n);
	for (unsigned i = 0; i < have; i++)
		if (n < ALIAS_SAME && !strcmp(aliases[i].real, real) && (spelt[n] = strdup(aliases[i].spelt)))
			n++;
	ckc_mutex_unlock(&alias_lock);
	bool held = false;
	for (unsigned i = 0; i < n; i++) {
		ckc_stat_t st;
		ckc_enter();
		if (!held && ckc_stat_held(spelt[i], &st) == 0 && strlen(spelt[i]) < PATH_MAX) {
			strcpy(target, spelt[i]);
			held = true;
		}
		ckc_leave();
		free(spelt[i]);
	}
	return held;
}

/* The held checkpoint canon names through its links: the last component's
 * when last (up to LINK_HOPS in a row), its folder's, and the spellings of
 * files written through a folder's link. */
static bool held_through(const char *canon, char target[PATH_MAX], bool last)
{
	char cur[PATH_MAX], t[PATH_MAX], dir[PATH_MAX];
	int hops = 0;
	/* a read or stat through links to a published version reaches its
	 * bytes through the kernel; an unlink or rename by a folder's other
	 * spelling must find a published one too, which the cache forgets */
	if (!(last ? ckc_holds_unpublished() : ckc_holds_objects()) || strlen(canon) >= sizeof(cur))
		return false;
	int saved = errno;
	strcpy(cur, canon);
	bool ok = true;
	for (struct stat st; last && ok && hops < LINK_HOPS && REAL(lstat)(cur, &st) == 0 && S_ISLNK(st.st_mode);
	     hops++) {
		ssize_t k = readlink(cur, t, sizeof(t) - 1);
		if (k > 0)
			t[k] = '\0';
		/* a relative target is taken from the link's folder; a walk the
		 * kernel would refuse (nodir/../x) finds nothing */
		ok = k > 0 && ckc_path_dirname(cur, dir, sizeof(dir)) == 0 &&
		     ckc_path_resolve(t, dir, cur, sizeof(cur)) == 0;
	}
	/* a folder on the way that is a link (run -> run_real) */
	if (ok && ckc_link_real(cur, t)) {
		strcpy(cur, t);
		hops++;
	}
	bool held = false;
	if (ok) {
		ckc_stat_t st;
		ckc_enter();
		held = hops > 0 && ckc_stat_held(cur, &st) == 0;
		ckc_leave();
		if (held)
			strcpy(target, cur);
		else
			held = alias_held(cur, target);
	}
	errno = saved;
	return held;
}

/* ckc_enoent_look's walk up path's folders (out of line: its two paths'
 * worth of stack is made only where the cache holds something unpublished;
 * a program's ENOENT otherwise reaches no deeper into its stack than the
 * real call did). */
__attribute__((noinline)) static void enoent_walk(int dirfd, const char *path)
{
	int saved = errno;
	char canon[PATH_MAX], dir[PATH_MAX];
	bool file = false;
	size_t len = strlen(path);
	/* the kernel found no folder where the cache holds a checkpoint: a
	 * file, which the path uses as a folder (its last name too, where a
	 * '/' follows it) */
	if (ckc_path_at(dirfd, path, canon) == 0) {
		ckc_enter();
		if (len > 1 && path[len - 1] == '/') {
			ckc_stat_t st;
			file = ckc_stat_held(canon, &st) == 0 && !st.at_home;
		}
		while (!file && ckc_path_dirname(canon, dir, sizeof(dir)) == 0 && strcmp(dir, canon) != 0) {
			ckc_stat_t st;
			file = ckc_stat_held(dir, &st) == 0 && !st.at_home;
			strcpy(canon, dir);
		}
		ckc_leave();
	}
	errno = file ? ENOTDIR : saved;
}

CKC_START_PATH long ckc_enoent_look(int dirfd, const char *path, long rc)
{
	if (rc < 0 && errno == ENOENT && path && ckc_holds_unpublished())
		enoent_walk(dirfd, path);
	return rc;
}

bool ckc_link_held(const char *canon, char target[PATH_MAX])
{
	return held_through(canon, target, true);
}

bool ckc_spelling_held(const char *canon, char target[PATH_MAX])
{
	return held_through(canon, target, false);
}

/* canon is a link to a checkpoint the cache holds: out receives its
 * version and canon its path. Out of line, as the link's path is made only
 * here: a walker's stat reaches no deeper into its stack for it. */
__attribute__((noinline)) static bool cached_link(char *canon, ckc_stat_t *out)
{
	char target[PATH_MAX];
	if (!ckc_link_held(canon, target))
		return false;
	ckc_enter();
	bool cached = ckc_stat(target, out) == 0;
	ckc_leave();
	if (cached)
		strcpy(canon, target);
	return cached;
}

CKC_START_PATH static bool cached_at(int dirfd, const char *path, char *canon, ckc_stat_t *out, bool follow)
{
	ckc_stat_t st;
	int saved = errno;

	/* nothing cached here or elsewhere on the node: every answer is the
	 * real file's, and the path need not be looked at (a walker's stat of
	 * each name: du, find, tar) */
	bool held = ckc_holds_objects(), others = ckc_node_holds_any_mapping();
	if (!held && !others) {
		errno = saved;
		return false;
	}
	/* the real call answers unless this process holds it: a folder's
	 * kept path may name what the others are asked to publish */
	bool keep = ckc_tag_keep_ok;
	ckc_tag_keep_ok = true;
	bool tagged = ckc_tagged_at(dirfd, path, canon);
	ckc_tag_keep_ok = keep;
	if (!tagged) {
		/* a forked child, whose cache is off, asks the holders all
		 * the same, as its opens do: a stat after its parent's close
		 * sees the version closed */
		if (others && (!atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) || ckc_in_vfork_child()))
			ckc_node_ask_at(dirfd, path);
		else if (others && ckc_tag_other_ranks())
			ckc_node_ask_other_rank(dirfd, path);
		errno = saved;
		return false;
	}
	/* another process that holds it publishes it first, as for an open:
	 * a stat after its writer's close sees it (find -newer, test -e) */
	if (others)
		ckc_node_ask(canon);
	if (!held) {
		errno = saved;
		return false;
	}
	ckc_enter();
	bool cached = ckc_stat(canon, out ? out : &st) == 0;
	ckc_leave();
	if (!cached && follow)
		cached = cached_link(canon, out ? out : &st);
	/* a folder above it that this process may no longer search: the real
	 * call answers (EACCES), as the kernel does for the file there */
	if (cached && !ckc_cached_reachable(canon))
		cached = false;
	errno = saved; /* the looks' (the call's own is the caller's) */
	return cached;
}

atomic_bool ckc_dirs_guarded;

bool ckc_cached_reachable(const char *canon)
{
	char dir[PATH_MAX];
	if (!atomic_load_explicit(&ckc_dirs_guarded, memory_order_relaxed) || ckc_geteuid() == 0)
		return true;
	int saved = errno;
	bool ok = ckc_path_dirname(canon, dir, sizeof(dir)) != 0 ||
		  REAL(faccessat)(AT_FDCWD, dir, X_OK, AT_EACCESS) == 0 || errno != EACCES;
	errno = saved;
	return ok;
}

CKC_WARM_PATH bool ckc_cached_at(int dirfd, const char *path, char *canon, ckc_stat_t *out)
{
	return cached_at(dirfd, path, canon, out, false);
}

CKC_START_PATH bool ckc_cached_follow(int dirfd, const char *path, char *canon, ckc_stat_t *out)
{
	return cached_at(dirfd, path, canon, out, true);
}
