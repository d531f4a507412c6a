/* State shared by the wrappers: whether interception is on, the per-thread
 * guard that sends the engine's own calls straight to libc, tagged-path
 * matching, and the table of virtual descriptors (tagged fds). */
#ifndef CKC_INTERCEPT_H
#define CKC_INTERCEPT_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ckc.h"
#include "io.h"
#include "lockrank.h"
#include "tagpat.h"
#include "real.h"

#define CKC_EXPORT __attribute__((visibility("default")))

/* Interception is on: the engine started and patterns are set. Cleared in
 * a forked child and after the engine stops. */
extern atomic_bool ckc_icpt_on;

/* Starts the engine on first use (once). False if it could not start:
 * tagged files then pass through. */
bool ckc_engine_ready(void);

/* Whether the engine was started here (without starting it). */
bool ckc_engine_started(void);
/* The cache started: the allocator's calls are counted from now on if the
 * program has a signal handler (memhooks.c). */
void ckc_mem_engine_started(void);
/* Whether this write's open, the process's first of a whole checkpoint,
 * goes to its real path without starting the cache (once per process;
 * only where stepping aside is on, in copy mode with PERSIST=always, and
 * an earlier process's choice of the cache is not in force). canon: its
 * real path, kept where the later ones may follow it (ckc_write_deferred). */
bool ckc_first_write_aside(const char *canon);
/* Its real open ended: counted where it opened the file, and the next
 * checkpoint may go so where it did not. */
void ckc_first_write_done(bool opened);
/* Whether a later whole checkpoint's open goes to its real path too
 * without starting the cache: after a first that went so and was smaller
 * than 1 MiB, for the first 200 ms from it (counted as written straight). */
bool ckc_write_deferred(void);
/* At the end of a process that started no cache: its statistics, where it
 * wrote checkpoints straight to their real paths (ckc_first_write_aside). */
void ckc_stats_unstarted(void);
/* Whether a read of a checkpoint needs the engine when it has not started:
 * false when nothing could have named the checkpoint ahead (no hint file,
 * no order, prefetching not eager), so the cache holds nothing of it and
 * the real open answers. */
bool ckc_read_needs_engine(void);
/* A read passed to its real path for that: counted once the engine runs. */
void ckc_read_passed(void);

/* Set, in the thread that calls vfork, to its process id: the vfork child
 * runs in that thread's memory and must never enter the cache, whose locks
 * and threads belong to the parent (spawn.c). */
extern __thread pid_t ckc_tl_vfork_pid __attribute__((tls_model("initial-exec")));
bool ckc_vfork_child_slow(void);

/* Whether this is a vfork child: every call that could reach the cache
 * passes it by there. One thread-local load on other paths; the parent
 * clears the mark the first time it asks. */
static inline bool ckc_in_vfork_child(void)
{
	if (__builtin_expect(ckc_tl_vfork_pid == 0, 1))
		return false;
	return ckc_vfork_child_slow();
}

/* CKPTCACHE_CAPTURE as configured (copy until the constructor ran). */
int ckc_capture_mode(void);

/* Device capture settings (CKPTCACHE_CAPTURE_MIN, CKPTCACHE_CAPTURE_HOST)
 * and CKPTCACHE_STRICT. */
uint64_t ckc_capture_min(void);
bool ckc_capture_pageable_only(void);
bool ckc_strict(void);
/* CKPTCACHE_STEP_ASIDE is on (auto) */
bool ckc_step_aside_on(void);

/* Catches SIGTERM, SIGINT and SIGABRT where the program left them at
 * their default, so that the cache is drained (for at most wait_s seconds)
 * before the signal ends the program (term.c). Once per process. */
void ckc_term_install(double wait_s);
/* _exit called in a signal handler, which may have interrupted the
 * program inside the allocator: the drain runs on the library's thread for
 * the end by signal, the caller waiting for it (CKPTCACHE_TERM_WAIT at
 * most); false where there is no such thread. */
bool ckc_term_exit_drain(void);
/* The program set sig's disposition back to the default (sigaction,
 * signal) after the end by signal was set up: the library's handler takes
 * its place again, as at the start (the program reads SIG_DFL back). */
void ckc_term_default_set(int sig);
/* Whether sa is the library's own end-by-signal handler, which the
 * program is told is the default (it was, before the library set it). */
bool ckc_term_handler_is(const struct sigaction *sa);
/* From now on the library's own frees are skipped (the process ends). */
void ckc_mem_leak_frees(void);
/* free, malloc and realloc take the way (fast or slow) that what they look
 * at calls for now: after each change of it (memhooks.c, owed.c). */
void ckc_mem_route(void);

/* Whether the program's free(3) reaches this library's wrapper (memhooks.c):
 * false under an allocator or a sanitizer that comes before it. */
bool ckc_free_is_ours(void);
/* Tells the engine's table (io.c) which free and realloc are this
 * library's own wrappers. */
void ckc_mem_own_alloc(void);

/* The CUDA part of the engine's services (cuda.c): the driver's own
 * functions, the wait for captures completing in stream order, the
 * statistics of device capture. */
void ckc_cuda_services(ckc_services_t *svc);

/* The "cu..." half of the interposed dlsym (cuda.c). */
void *ckc_cu_dlsym(void *handle, const char *name);

/* The kind of memory at addr as the driver calls told (cuda.c): device,
 * managed, pinned, registered, or unknown (pageable host memory). */
int ckc_cuda_mem_kind(const void *addr);

/* ---- tagged paths (tag.c) ---- */

/* Loads CKPTCACHE_PATHS (colon-separated globs, "%r" = rank, relative ones
 * against the cwd) into src/tagpat.c's matcher (ckc_tag_match), and makes
 * room for the directory verdicts. Returns the number of patterns. */
int ckc_tag_load(const char *paths, long rank);
void ckc_tag_free(void);

/* The directory descriptors below which nothing can be tagged (tag.c). */
extern _Atomic uint8_t *ckc_tag_dirv;
/* Its pages, mapped with the descriptor tables (ckc_fdtab_init). */
extern _Atomic uint8_t *ckc_fdtab_dirv;
extern size_t ckc_tag_dirv_cap;
/* One past the highest number whose mark was ever set: a bulk close looks
 * no further (a close_range(3, ~0) in every child of a spawn walked the
 * whole table). */
extern atomic_uint ckc_tag_dirv_hi;

/* Number fd gets a mark. */
static inline void ckc_tag_dirv_reach(int fd)
{
	unsigned h = atomic_load_explicit(&ckc_tag_dirv_hi, memory_order_relaxed);
	while ((unsigned)fd >= h && !atomic_compare_exchange_weak_explicit(&ckc_tag_dirv_hi, &h, (unsigned)fd + 1,
									      memory_order_relaxed, memory_order_relaxed))
		;
}
/* ckc_tag_dirv's values: nothing below the directory can be tagged, or its
 * path is kept (tag.c); a number whose path is kept that is closed or
 * replaced makes the kept paths of its number's slot go
 * (ckc_tag_dpath_gen[fd % CKC_TAG_DPATHS]). */
#define CKC_TAG_DIR_NONE 1
#define CKC_TAG_DIR_PATH 2
#define CKC_TAG_DPATHS 4
extern _Atomic unsigned ckc_tag_dpath_gen[CKC_TAG_DPATHS];

static inline void ckc_tag_dpath_gone(int fd)
{
	atomic_fetch_add_explicit(&ckc_tag_dpath_gen[(unsigned)fd % CKC_TAG_DPATHS], 1, memory_order_release);
}

/* A real open of path (relative to dirfd) with flags returned fd: what is
 * opened below a directory where nothing can be tagged, by one name with
 * O_NOFOLLOW, inherits that. */
void ckc_tag_opened(int dirfd, const char *path, int flags, int fd);
/* Whether path is one name (not "." or "..") at directory descriptor dirfd,
 * below which nothing can be tagged while nothing is cached here: a
 * walker's open over an untagged tree, which then needs no path built.
 * The interception on, not in a vfork child. */
bool ckc_tag_name_none(int dirfd, const char *path);
/* What path's last name tells of it, for an open (ckc_tag_name_look):
 * CKC_NAME_UNTAGGED, no pattern's last component matches it (a script's
 * JSON, a module an import opens), so that ckc_tagged_at would answer
 * false without resolving it (the interception on, not in a vfork child,
 * not a name under /proc or /dev/fd, whose open opens the file behind a
 * descriptor, posix.c); CKC_NAME_MAY, some pattern's last component may
 * match it (ckc_tagged_asked_named then skips that test); CKC_NAME_TAGGED,
 * an absolute path in the folder of the last tagged path this thread
 * looked at, canonical as it is, and tagged (ckc_tagged_asked_canonical);
 * CKC_NAME_ASK, not looked at. An absolute path in that folder that is
 * not tagged is CKC_NAME_UNTAGGED whatever its name. */
enum { CKC_NAME_ASK, CKC_NAME_UNTAGGED, CKC_NAME_MAY, CKC_NAME_TAGGED };
int ckc_tag_name_look(const char *path);
/* ckc_tag_opened after ckc_tag_name_none held: fd opened by that name. */
void ckc_tag_opened_none(int fd, int flags);
/* Directory descriptor fd is known to have nothing below it that can be
 * tagged; that is now known (the caller looked at its path). */
bool ckc_tag_dir_none(int fd);
void ckc_tag_dir_mark_none(int fd);

/* The working directory changed (chdir, fchdir). */
void ckc_tag_cwd_changed(void);

/* newfd (when >= 0) is a copy of oldfd: it knows what oldfd knows.
 * Returns newfd. */
static inline int ckc_tag_dup(int oldfd, int newfd)
{
	if ((unsigned)oldfd < ckc_tag_dirv_cap && (unsigned)newfd < ckc_tag_dirv_cap) {
		uint8_t v = atomic_load_explicit(&ckc_tag_dirv[oldfd], memory_order_relaxed);
		uint8_t was = atomic_load_explicit(&ckc_tag_dirv[newfd], memory_order_relaxed);
		/* a kept path is oldfd's number's only */
		if (v == CKC_TAG_DIR_PATH)
			v = 0;
		if (v != was) {
			if (v)
				ckc_tag_dirv_reach(newfd);
			atomic_store_explicit(&ckc_tag_dirv[newfd], v, memory_order_relaxed);
		}
		if (was == CKC_TAG_DIR_PATH)
			ckc_tag_dpath_gone(newfd);
	}
	return newfd;
}

/* Descriptor number fd is closed or replaced: what was known of it goes.
 * One load for a number that was never a directory looked at. */
static inline void ckc_tag_forget_fd(int fd)
{
	if ((unsigned)fd < ckc_tag_dirv_cap) {
		uint8_t v = atomic_load_explicit(&ckc_tag_dirv[fd], memory_order_relaxed);
		if (v) {
			atomic_store_explicit(&ckc_tag_dirv[fd], 0, memory_order_relaxed);
			if (v == CKC_TAG_DIR_PATH)
				ckc_tag_dpath_gone(fd);
		}
	}
}

/* Set by the caller around a lookup for a read (no O_TRUNC, no O_CREAT):
 * while the cache has not started, such a read goes to the real file
 * whatever the answer, which then only counts it, and kept folder paths
 * may be used (tag.c). */
extern __thread bool ckc_tag_keep_ok;

/* Canonicalises path (relative to dirfd, AT_FDCWD for the cwd) into out
 * (PATH_MAX bytes) and tells whether it is tagged. False for anything that
 * is not a tagged path (or while the thread is inside the engine). */
bool ckc_tagged_at(int dirfd, const char *path, char *out);
/* ckc_tagged_at for a path whose last name ckc_tag_name_look found may
 * match (CKC_NAME_MAY): that test is not made again. */
bool ckc_tagged_at_named(int dirfd, const char *path, char *out);

/* ckc_tagged_at where the cache is off (a forked or a vfork child): only
 * whether the patterns tag path. */
bool ckc_tag_path_at(int dirfd, const char *path, char *out);
/* The canonical path of path relative to dirfd (AT_FDCWD: the working
 * directory), tagged or not, with the folders' kept paths: 0 or -errno. */
int ckc_path_at(int dirfd, const char *path, char out[PATH_MAX]);

/* Whether path (relative to dirfd) is a tagged checkpoint the cache holds
 * now; canon (PATH_MAX bytes) receives its canonical form, st (unless
 * NULL) what the cache says of it. A process that caches nothing answers
 * without looking at the path. */
bool ckc_cached_at(int dirfd, const char *path, char *canon, ckc_stat_t *st);
/* The same, where a tagged path that is a symbolic link leads to a
 * checkpoint this process's cache holds (ckc_link_held): canon is then
 * that checkpoint's path. For the calls that follow links (stat, access). */
bool ckc_cached_follow(int dirfd, const char *path, char *canon, ckc_stat_t *st);
/* The checkpoint a tagged path (canonical) that is a symbolic link leads
 * to, where this process's cache holds a version of it, in target (up to
 * 8 links in a row, each relative target taken from its link's folder):
 * the real file there may not be published yet, or be an older version.
 * False at once while the cache holds nothing. */
bool ckc_link_held(const char *canon, char target[PATH_MAX]);
/* A call on dirfd/path that answered rc: where it failed with ENOENT and a
 * folder on the way is a checkpoint the cache holds and its real path
 * lacks yet, errno becomes ENOTDIR, as the kernel would say of that file.
 * Returns rc. */
long ckc_enoent_look(int dirfd, const char *path, long rc);
/* (inline: a walker's stat of every name pays one test when it succeeds) */
static inline long ckc_enoent_checked_l(int dirfd, const char *path, long rc)
{
	return rc >= 0 ? rc : ckc_enoent_look(dirfd, path, rc);
}
static inline int ckc_enoent_checked(int dirfd, const char *path, int rc)
{
	return rc >= 0 ? rc : (int)ckc_enoent_look(dirfd, path, rc);
}
/* The same without following canon's last component (the name unlink and
 * rename act on): its folder's link, or another spelling of the file. */
bool ckc_spelling_held(const char *canon, char target[PATH_MAX]);
/* The path the kernel reaches for canon through its folder's links, in
 * real: false if it is canon itself (or cannot be known). One look a
 * write's open: its result is what ckc_alias_write takes. */
bool ckc_link_real(const char *canon, char real[PATH_MAX]);
/* The same, where an answer of this thread's from the last 100 ms stands
 * without a look at the folder (the alias list of in-place writes). */
bool ckc_link_real_recent(const char *canon, char real[PATH_MAX]);
/* A write's open of canon (a tagged path; spelt_real: ckc_link_real's
 * answer, NULL where it was false): the versions this process holds of
 * the same file under another spelling (through a folder's symbolic link)
 * go to the real file first, so that the versions land in the order they
 * were written. */
void ckc_alias_write(const char *canon, const char *spelt_real, bool replacing);
/* Whether the folder of canon has a default ACL (a new file there takes
 * its mode and ACL from it, not from the umask: the real open makes it). */
bool ckc_folder_default_acl(const char *canon);

/* ---- the node registry (node.c) ---- */

/* Starts this process's service and hooks the engine to the table, once
 * (before its first checkpoint write: the engine runs); stops it (at
 * exit); forgets it in a forked child. */
void ckc_node_start(void);
/* init.c: before the process's first checkpoint write, once: the node
 * service and the end by signal. */
void ckc_writer_start(void);
void ckc_node_stop(void);
void ckc_node_atfork_child(void);
/* Whether the service runs here (other processes can ask this one). */
bool ckc_node_serving(void);

/* Asks the other processes of this node that hold bytes the real file
 * canon lacks to publish them, and waits (bounded) until they did. One
 * load when nothing is held anywhere. */
void ckc_node_ask(const char *canon);
/* A tagged file opened for writing at its real file (an update in place, a
 * shared file's open without O_TRUNC): given a slot in the in-place
 * table before the open (the value to end it with, 0: none), then at the
 * number the open gave (fd < 0: it failed). Another process's open of the
 * path with O_TRUNC then writes in place too (ckc_node_inplace_other). The
 * number's close ends it (ckc_node_inplace_close). start: the table is
 * mapped first where it is not (else nothing is announced: a hand-over as
 * the program ends, whose descriptors may be the last ones). */
uint64_t ckc_node_inplace_begin(const char *canon, bool start);
/* Maps the in-place table where it is not yet (before a switch of a
 * writer's descriptors to the real file, which announces them only where
 * it is mapped). */
void ckc_node_inplace_map(void);
void ckc_node_inplace_end(uint64_t val, int fd);
/* The same after the open, errno kept; returns fd. */
int ckc_node_inplace_opened(uint64_t val, int fd);
void ckc_node_inplace_close(int fd);
/* The highest number the in-place table has held (a bound for a walk). */
size_t ckc_node_inplace_top(void);
/* The process ends: its registrations go (those copied from a parent at
 * fork stay the parent's). Async-signal-safe. */
void ckc_node_inplace_end_now(void);
/* Set once this process has written a tagged file in place (kept beside
 * ckc_icpt_on: a process that never did touches nothing more at its end). */
extern atomic_bool ckc_inplace_ever;
static inline void ckc_node_inplace_end_all(void)
{
	if (atomic_load_explicit(&ckc_inplace_ever, memory_order_acquire))
		ckc_node_inplace_end_now();
}
/* Registrations held (0: a close need not look). */
extern atomic_uint ckc_node_inplace_n;
static inline unsigned ckc_node_inplace_count(void)
{
	return atomic_load_explicit(&ckc_node_inplace_n, memory_order_relaxed);
}
/* Whether another live process of the node writes canon at its real file
 * (slots of dead ones are freed on the way). errno kept. */
bool ckc_node_inplace_other(const char *canon);
/* The same, this process's other descriptors included (another thread's
 * open of the path written at its real file). */
bool ckc_node_inplace_any(const char *canon);
/* The same for path relative to dirfd, if the patterns tag it. */
void ckc_node_ask_at(int dirfd, const char *path);
/* path (relative to dirfd), not tagged here, may be a checkpoint of
 * another rank of the job (a pattern with "%r", any rank in its place):
 * where another process of the node holds checkpoints, the holders of its
 * canonical path are asked to publish it (rank 0 reading what the others
 * wrote and closed). */
void ckc_node_ask_other_rank(int dirfd, const char *path);
/* Another process of the node may hold checkpoints (two loads once the
 * node's table is mapped). */
bool ckc_node_others(void);
/* Asks every other process of the node that holds checkpoints about the
 * folder dir (canonical): LIST publishes the closed ones under it (before
 * a listing or a removal), MOVE also hands over its open writers (before
 * the folder is renamed: their descriptors follow the files), GONE retires
 * its open writers (the folder was removed: they write on, as into
 * unlinked files). Waits for each (bounded). */
enum { CKC_NODE_DIR_LIST, CKC_NODE_DIR_MOVE, CKC_NODE_DIR_GONE };
bool ckc_node_ask_dir(const char *dir, int what);
/* The same for a listing of the folder dir alone (canonical): only the
 * processes that hold something in it (their entry for the folder) are
 * asked, and the answer says whether one writes there. */
bool ckc_node_ask_dir_one(const char *dir);

/* Asks every other process of this user on the node that holds
 * checkpoints to publish all it owes (a new program that will not run
 * this library is about to start); bounded as a folder's request. */
void ckc_node_publish_others(void);
/* In a vfork child: descriptor fd of the parent, the virtual descriptor id
 * at the vfork, is given to the child (node.c's NODE_FD_GIVE): the parent
 * hands its checkpoint over to the real file and sends the descriptor,
 * which takes the place of the child's placeholder at fd. 0, or -errno
 * (-EBADF: the parent no longer has it open). */
int ckc_node_claim_fd(int fd, uint64_t id);
/* In a vfork child whose new program will not ask for what it reads: the
 * parent hands its open writers over to their real files (their bytes so
 * far there, its descriptors real from now on), as it did for every
 * tagged descriptor before a fork. */
void ckc_node_parent_hands_over(void);

/* Whether a new program given envp runs this library with this process's
 * configuration (LD_PRELOAD names it, the CKPTCACHE_ variables are the
 * same): it then asks the holders for what it opens, lists or looks at. */
bool ckc_env_runs_library(char *const envp[]);
/* Before a fork, in the parent: what its children look up before their
 * new program (the real exec functions, this library's name) is looked up
 * here, once per process, not in each child. */
void ckc_child_ready(void);

/* Whether this process's image runs the library with a configuration (a
 * forked child's too, whose interception is off). */
bool ckc_library_configured(void);
/* (returns whether a process asked to LIST has open writers under dir) */
/* The last ckc_tagged_asked of this thread found another process writing
 * the file: that writer now writes the real file, so an open that writes
 * must use the real file too (both write one file, as without the
 * library: a cached version would replace the file the other writes). */
extern __thread bool ckc_node_writer_handed;
/* The count of the node table's slots in use (NULL until this process
 * attached the table), and of this process's own. */
extern _Atomic int64_t *_Atomic ckc_node_used;
extern _Atomic int64_t ckc_node_mine;
/* Whether a process of the node may hold a checkpoint its real file lacks:
 * some slot of the node's table is in use and not all are this process's
 * (a vfork child's count of its own is its parent's, whose slots are
 * another process's to it); true while this process has not mapped the
 * table. map: map it first (once per process, making it if it is missing;
 * not in a vfork child, nor where nothing is tagged), as the stat family
 * does: a program that asks stat of names and lists no folder (a script's
 * os.path.exists, make, test -e) would otherwise look at every name. Not
 * mapped otherwise, which would make the table for a process that never
 * touches a checkpoint. Inline: every stat of a walker asks it. */
bool ckc_node_holds_any_unmapped(bool map);
/* How many times a process of the node noted a folder renamed (before the
 * rename and after it): 0 while this process has not mapped the table. */
uint64_t ckc_node_moves(void);
/* A folder is renamed (called before the real call and after it). */
void ckc_node_moves_note(void);
static inline bool ckc_node_holds_any_at(bool map)
{
	_Atomic int64_t *u = atomic_load_explicit(&ckc_node_used, memory_order_acquire);
	if (__builtin_expect(!u, 0))
		return ckc_node_holds_any_unmapped(map);
	int64_t used = atomic_load_explicit(u, memory_order_acquire);
	if (used <= 0) /* nobody holds anything: no look at this thread */
		return false;
	if (ckc_in_vfork_child())
		return true;
	return used > atomic_load_explicit(&ckc_node_mine, memory_order_relaxed);
}
static inline bool ckc_node_holds_any(void)
{
	return ckc_node_holds_any_at(false);
}
static inline bool ckc_node_holds_any_mapping(void)
{
	return ckc_node_holds_any_at(true);
}

/* Whether path is tagged (canon receives its canonical form), after the
 * processes holding it were asked to publish it: in a process whose cache
 * is off too, where the answer is false. */
bool ckc_tagged_asked(int dirfd, const char *path, char *canon);
/* The same through ckc_tagged_at_named. */
bool ckc_tagged_asked_named(int dirfd, const char *path, char *canon);
/* The same for a path ckc_tag_name_look found tagged (CKC_NAME_TAGGED):
 * canonical already, copied into canon. True. */
bool ckc_tagged_asked_canonical(const char *path, char *canon);

/* unlinkat(AT_REMOVEDIR) of the folder path (relative to dirfd), done by
 * real: what the cache (and the node's other processes) owe under it is
 * published first, so that the removal fails as it would without the
 * library if those files are still there; once it is removed, the open
 * writers under it write on as into unlinked files (dirs.c). */
int ckc_dir_remove(int dirfd, const char *path, int flags, int (*real)(int, const char *, int));
/* Before the folder dir (canonical) is renamed: the open writers under it,
 * this process's and the node's others', hand their bytes to the real
 * files, which the folder takes along with their descriptors; closed
 * versions of the others are published (dirs.c). */
void ckc_dir_moving(const char *dir);

/* Before the permissions (mode) or owner (mode -1) of dirfd/path change
 * (chmod, chown): a
 * folder may stop taking new files, or its files being read, so what the
 * cache owes under it, and what the node's other processes owe there, is
 * published first, and its new files still being written go on in their
 * real files (the publication would otherwise find the folder closed: an
 * archiving step's chmod a-w of a results folder). errno kept. */
void ckc_dir_guarding(int dirfd, const char *path, int mode);

/* The name of what descriptor fd stands for (its link in /proc), into out
 * (len bytes): its length, or -1 where it has no path name (a pipe, a
 * socket). */
ssize_t ckc_fd_name(int fd, char *out, size_t len);

/* Whether the version the cache holds (its mode and owner) lets this
 * process do want (R_OK, W_OK, X_OK bits) as the kernel would judge the
 * real file: for the effective user and groups, else the real ones. */
bool ckc_cached_permits(const ckc_stat_t *cst, int want, bool effective);

/* getuid, geteuid, getgid and getegid, asked of the kernel once until the
 * process changes its user or group through the C library (spawn.c). */
uid_t ckc_getuid(void);
uid_t ckc_geteuid(void);
gid_t ckc_getgid(void);
gid_t ckc_getegid(void);
/* The process is about to change its user or group: the kernel is asked
 * each time from then on. */
void ckc_ids_changing(void);
/* The same, and what it owes is published first, as before a set*id call
 * (spawn.c): a syscall() with one of their numbers. */
void ckc_identity_changing(void);

/* Set once this process changed its user or group (spawn.c): its cached
 * checkpoints were published under the old identity first. */
extern atomic_bool ckc_identity_changed;

/* ckc_cached_permits for the checkpoint canon, judged by its real file
 * where that holds it and this process has changed its identity. */
bool ckc_cached_permits_file(const char *canon, const ckc_stat_t *cst, int want, bool effective);

/* Set once this process, holding cached checkpoints, changed the owner of
 * something that is not a cached checkpoint, or gave it a mode without
 * every search bit (ckc_dir_guarding): from then on a cached
 * checkpoint's folders are looked at for search permission
 * (ckc_cached_reachable), which a process that never changes one need not
 * pay for. */
extern atomic_bool ckc_dirs_guarded;

/* Whether this process may still search the folder of the cached
 * checkpoint canon (always, for root or before any ckc_dirs_guarded). */
bool ckc_cached_reachable(const char *canon);

/* ---- virtual descriptors (fdtab.c) ---- */

typedef struct ckc_vfd_stat {
	struct ckc_vfd_stat *next;
	bool at_home;
	struct stat st;
} ckc_vfd_stat_t;

/* v's fstat answer of the real file, kept (stat_known) for an fstat
 * without v's lock (fdtab.c; v's lock held, or v not yet installed). */
struct ckc_vfd;
void ckc_vfd_stat_keep(struct ckc_vfd *v);

typedef struct ckc_vfd {
	ckc_mutex_t lock;     /* guards pos (ckc_vfd_pos_set) and switched */
	atomic_int refs;      /* descriptor numbers sharing it (dup) */
	ckc_handle_t *h;
	uint64_t pos;
	_Atomic uint64_t room_next; /* the size at which room_aside looks at the free space next */
	int flags;            /* access mode, O_APPEND, O_NONBLOCK... as opened */
	bool switched;        /* its numbers name the real file now */
	atomic_int lock_fd;   /* the file its locks are taken on (locks.c), or -1 */
	bool lock_real;       /* lock_fd is the real file, opened as v was */
	atomic_int lock_file_fd; /* beside a real lock_fd: its path's lock file, locked first, or -1 */
	uint64_t lock_fd_key, lock_file_key; /* the keys (hashed) of the lock files opened at
						lock_fd (not lock_real) and lock_file_fd: a lock taken
						stays on its file when the version is renamed */
	int lock_flock;       /* the flock(2) lock it holds: 0, LOCK_SH, LOCK_EX */
	/* what fstat took from the real file (under lock): kept for a closed
	 * version while the real path holds it or does not, as then */
	bool stat_known, stat_at_home;
	bool stat_absent;     /* the open found no real file (not yet published) */
	bool id_known;        /* id_dev/id_ino: what fstat reported of the file its
				 publication is to name (an unlink after keeps it) */
	dev_t id_dev;
	ino_t id_ino;
	struct stat stat_real;
	/* stat_real as last taken while stat_known, with stat_at_home, for
	 * an fstat without the lock (NULL: take the lock); each one stays
	 * until the descriptor goes (stat_snaps) */
	_Atomic(struct ckc_vfd_stat *) stat_snap;
	struct ckc_vfd_stat *stat_snaps;
	struct ckc_vfd_stat stat_first; /* the first one kept */
	bool stat_first_used;
	/* a small checkpoint the model sent to the cache as a sample: when
	 * the program's open began (0: not one) */
	uint64_t small_t0;
	uint64_t id;          /* this process's number for it, never reused */
	char path[];          /* canonical */
} ckc_vfd_t;

/* v's position: written under v->lock, read with or without it (a
 * position asked costs no lock). */
static inline uint64_t ckc_vfd_pos(const ckc_vfd_t *v)
{
	return __atomic_load_n(&v->pos, __ATOMIC_RELAXED);
}

static inline void ckc_vfd_pos_set(ckc_vfd_t *v, uint64_t pos)
{
	__atomic_store_n(&v->pos, pos, __ATOMIC_RELAXED);
}

extern _Atomic(ckc_vfd_t *) *ckc_vfd_tab;
extern size_t ckc_vfd_cap;
/* Whether a virtual descriptor was ever installed in this process (or its
 * parent before the fork): until then no descriptor is looked up, and the
 * table's pages are not touched (a walker's fstat, close and read). */
extern atomic_bool ckc_vfd_ever;
/* The highest number a virtual descriptor was ever installed at. */
extern atomic_size_t ckc_vfd_hi;

/* Confirms that fd is still the placeholder v was installed on (a raw
 * close(2) or close_range(2) syscall the library never saw may have freed
 * the number for an untagged file); drops v and returns NULL if not. */
ckc_vfd_t *ckc_vfd_check(int fd, ckc_vfd_t *v);

/* Asking the kernel on every call would cost a system call per read of a
 * cached checkpoint, so each number remembers the epoch in which it was
 * installed or last confirmed, and the epoch moves on whenever a number
 * may have changed what it names without a call the library saw: in a
 * fork's child, whose C library replaces numbers inside daemon() and
 * forkpty() by its own calls, and when a number the library did not
 * watch is confirmed gone. glibc's syscall() with a close or dup number
 * is the library's own close or dup (posix.c). A number closed by a
 * system call made without the C library (inline assembly) is not seen
 * until the epoch moves. NULL ckc_vfd_seen: every call asks. */
extern atomic_uint ckc_vfd_epoch;
extern atomic_uint *ckc_vfd_seen;
void ckc_vfd_epoch_next(void);

/* Whether fd, which holds a virtual descriptor, was confirmed in this
 * epoch (never in a vfork child, which has its own numbers). */
static inline bool ckc_vfd_confirmed(int fd)
{
	return __builtin_expect(ckc_vfd_seen != NULL, 1) &&
	       atomic_load_explicit(&ckc_vfd_seen[fd], memory_order_relaxed) ==
		       atomic_load_explicit(&ckc_vfd_epoch, memory_order_acquire) &&
	       !ckc_in_vfork_child();
}

/* Whether fd may be tagged: one table load, no call, so the untagged path
 * of the hottest wrappers needs no stack frame. In the thread that made a
 * vfork child (until it asks, ckc_in_vfork_child), every number may be:
 * the child's number may hold a placeholder whose checkpoint another
 * thread of the parent sent to its real file meanwhile, taking it off the
 * table, and the child claims it (ckc_vfd_hold). */
static inline bool ckc_fd_maybe_tagged(int fd)
{
	return (unsigned)fd < ckc_vfd_cap && atomic_load_explicit(&ckc_vfd_ever, memory_order_relaxed) &&
	       (atomic_load_explicit(&ckc_vfd_tab[fd], memory_order_relaxed) != NULL ||
		__builtin_expect(ckc_tl_vfork_pid != 0, 0));
}

/* A vfork child's call on fd, which the parent's table no longer holds:
 * fd is claimed if the child has the parent's placeholder there. NULL. */
ckc_vfd_t *ckc_vfd_vfork_unheld(int fd);

/* The virtual descriptor behind fd, or NULL: the fast path of every fd
 * call is the table load; only a tagged-looking fd pays the check. */
static inline ckc_vfd_t *ckc_vfd_get(int fd)
{
	if ((unsigned)fd >= ckc_vfd_cap || !atomic_load_explicit(&ckc_vfd_ever, memory_order_relaxed))
		return NULL;
	ckc_vfd_t *v = atomic_load_explicit(&ckc_vfd_tab[fd], memory_order_acquire);
	if (!v)
		return __builtin_expect(ckc_tl_vfork_pid != 0, 0) ? ckc_vfd_vfork_unheld(fd) : NULL;
	return ckc_vfd_confirmed(fd) ? v : ckc_vfd_check(fd, v);
}

/* fd (or a failure, < 0) was just given by the kernel to a call the
 * library passed on: a virtual descriptor still at that number lost its
 * placeholder without a call the library saw, and goes. (Only a number
 * the caller now holds: one closed meanwhile may be another thread's new
 * checkpoint's already; see ckc_vfd_take_closing.) */
void ckc_vfd_stale(int fd);
static inline void ckc_vfd_unseen(int fd)
{
	if (__builtin_expect(fd >= 0 && ckc_fd_maybe_tagged(fd), 0))
		ckc_vfd_stale(fd);
}

ckc_vfd_t *ckc_vfd_take(int fd);
/* Before a call that closes fd inside the C library (fclose, freopen,
 * closedir): the virtual descriptor at fd (a checkpoint's copy put on
 * that number with dup2), taken off the table while the number is still
 * the caller's; the caller drops it (ckc_vfd_put) after the call. Taken
 * after it, the number could already be another thread's new checkpoint's,
 * whose descriptor would go in its stead. NULL: none. */
static inline ckc_vfd_t *ckc_vfd_take_closing(int fd)
{
	if (__builtin_expect(fd >= 0 && ckc_fd_maybe_tagged(fd), 0) && !ckc_in_vfork_child())
		return ckc_vfd_take(fd);
	return NULL;
}

/* The same with a reference of the caller's (dropped with ckc_vfd_put),
 * for a call that may take long: a close of fd by another thread meanwhile
 * leaves v, and its handle, whole until the put. */
ckc_vfd_t *ckc_vfd_hold(int fd);
/* ckc_vfd_hold for a wrapper: an untagged number costs the inline table
 * test, not a call. Every call that uses a tagged descriptor's fields or
 * handle takes it so, and ends with ckc_vfd_drop: a close of the number by
 * another thread meanwhile leaves the descriptor whole until then, as the
 * kernel leaves a call in progress its file. */
static inline ckc_vfd_t *ckc_vfd_held(int fd)
{
	return ckc_fd_maybe_tagged(fd) ? ckc_vfd_hold(fd) : NULL;
}
/* The same for the virtual descriptor whose id is id: at fd, or at
 * another number that holds it (*at gets the number); NULL if no number
 * holds it any more. */
ckc_vfd_t *ckc_vfd_hold_id(int fd, uint64_t id, int *at);
/* After a switch of the virtual descriptor id to its real file: the number
 * that now holds the real file for the program's number fd (fd itself when
 * it was one of id's), while it still does; -1 if none. For a vfork child
 * whose number still holds the placeholder (node_give_fd). */
int ckc_vfd_switched_at(int fd, uint64_t id);
/* In the program's thread before its vfork: the numbers of the cached
 * checkpoints the child will have (placeholders) and their ids, which the
 * child's claims name (another thread may close a number and reuse it
 * while the child runs); take false: none (the child claims nothing). */
void ckc_vfork_snapshot(bool take);
int ckc_fdtab_init(void);
/* Marks fd as one of the engine's own files (or no longer); the first
 * such number in [from, last], or -1. */
void ckc_fd_mine_set(int fd, bool mine);
int ckc_fd_mine_next(unsigned from, unsigned last);
/* Closes the library's own fd, its mark taken first. */
int ckc_fd_mine_close(int fd);
extern _Atomic uint64_t *ckc_fd_mine_bits;
/* Whether the marks of the library's own files stand: not in a vfork
 * child (its own table), nor in a forked child, where the library is off
 * and nothing uses the files it inherited. */
static inline bool ckc_fd_mine_live(void)
{
	return atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) && !ckc_in_vfork_child();
}
/* Whether fd is one of the library's own files (ckc_fd_mine_set). */
static inline bool ckc_fd_mine(int fd)
{
	_Atomic uint64_t *m = ckc_fd_mine_bits;
	return m && fd >= 0 && (size_t)fd < ckc_vfd_cap &&
	       (atomic_load_explicit(&m[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}
/* fd moved to the lowest free number at or above floor (closing fd), or
 * below floor near the top of the descriptor table where reaching floor
 * would grow the table of a process with more than one thread; fd itself
 * if it cannot be moved. errno is kept. */
int ckc_fd_above(int fd, int floor);
/* The floor of the library's own files (programs, shells above all, pick
 * the numbers below as they please). */
#define CKC_FD_OWN_FLOOR 512
/* Around the library's opening of a file of its own and its move above
 * the program's numbers: a fork waits until the file is where it goes,
 * and so does a call of the program's that takes the lowest free number
 * (ckc_fd_quiet_begin). */
void ckc_fd_own_begin(void);
void ckc_fd_own_end(void);
/* The kernel gives a new descriptor the lowest free number, and programs
 * count on it (close(1) then open: the new file is the standard output;
 * the next open after a close of 3 gets 3). A file of the library's that
 * has its low number for a moment (opened, then moved above the program's
 * numbers; a folder looked at and closed), in one of its threads or while
 * another thread of the program is in the library, would take the number
 * the program's call was given without the library, and the program's
 * bytes would go to the library's file or the library's to the program's.
 * So the two never overlap: the program's calls that take a number
 * (ckc_fd_num_begin/end: open, dup, opendir, pipe, socket...) wait while
 * the library has such a file (ckc_fd_quiet_begin/end), and the library
 * waits for those under way. Each wait is bounded (a program's open of a
 * FIFO blocks until a writer comes, a dead file server blocks the
 * library's), after which it goes on: the kernel gives the number as the
 * call starts, so one that blocks that long has its number already. */
/* (the program's calls under way, the library's sections under way, the
 * sections begun so far and the last one the program's calls gave up
 * waiting for: together, so that a short tool's first open and the
 * library's first file of its own touch one page between them) */
typedef struct {
	_Atomic int prog, own;
	_Atomic uint64_t own_seq, gave_up_seq;
} ckc_fd_taking_t;
extern ckc_fd_taking_t ckc_fd_taking;
/* This thread's calls under way, plus one once the thread is known (its
 * count goes back at its end, a cancellation's included): 1 between calls. */
extern __thread int ckc_tl_fd_prog __attribute__((tls_model("initial-exec")));
void ckc_fd_num_wait(void);
/* tagged descriptors open for writing */
extern atomic_int ckc_vfd_writers;
void ckc_fd_num_first(void);
static inline void ckc_fd_num_begin(void)
{
	if (__builtin_expect(ckc_tl_fd_prog != 1, 0))
		ckc_fd_num_first();
	ckc_tl_fd_prog++;
	atomic_fetch_add(&ckc_fd_taking.prog, 1);
	if (__builtin_expect(atomic_load(&ckc_fd_taking.own) != 0, 0))
		ckc_fd_num_wait();
}
static inline void ckc_fd_num_end(void)
{
	atomic_fetch_sub(&ckc_fd_taking.prog, 1);
	ckc_tl_fd_prog--;
}
/* The program's call expr, which takes the lowest free number. */
#define CKC_FD_NUM(expr)                                         \
	({                                                       \
		ckc_fd_num_begin();                              \
		__typeof__(expr) ckc_fd_num_r_ = (expr);         \
		ckc_fd_num_end();                                \
		ckc_fd_num_r_;                                   \
	})
void ckc_fd_quiet_begin(void);
void ckc_fd_quiet_end(void);
/* The end of the section ckc_fd_quiet_begin opened for a file of the
 * library's: fd (a new descriptor, or a failure's negative value, passed
 * on) moved above floor (ckc_fd_above) before the section ends; errno
 * kept. */
int ckc_fd_quiet_made(int fd, int floor);
/* The same for a file the library keeps (ckc_fd_mine_set), marked before
 * the section ends: a program's dup2 onto its number waits for the mark. */
int ckc_fd_quiet_made_mine(int fd, int floor);
/* The times ckc_fd_above read the process's descriptor table's size. */
extern atomic_ulong ckc_fd_table_reads;
ckc_vfd_t *ckc_vfd_new(ckc_handle_t *h, int flags, const char *path);
/* Puts v at fd (taking a reference). Returns 0, or -EMFILE past the table. */
int ckc_vfd_install(int fd, ckc_vfd_t *v);
/* Takes v off fd; the caller owns the reference it held. (Declared above.) */
/* Drops a reference; the last one closes the engine handle. Returns 0 or
 * -errno from that close. */
int ckc_vfd_put(ckc_vfd_t *v);
/* The end of a held call (ckc_vfd_held): the reference dropped, errno
 * kept (the last reference's close of the handle is the closer's, whose
 * close already answered); NULL: nothing. */
static inline void ckc_vfd_drop(ckc_vfd_t *v)
{
	if (v) {
		int saved = errno;
		ckc_vfd_put(v);
		errno = saved;
	}
}

/* Makes every descriptor number holding v a descriptor of the real file
 * v->path (the caller handed v's version over: ckc_handoff), opened with
 * v's access mode and status flags, at v's offset, keeping each number's
 * close-on-exec flag. v and its handle stay allocated: another thread may
 * still be inside a call on it (it then gets CKC_HANDED and repeats the
 * call on the real file). Returns 0 (also if switched before), or -errno
 * (said; the numbers keep v). */
int ckc_vfd_switch(ckc_vfd_t *v);
/* The path v's version has now (a rename while v is open moves it), in
 * now; NULL where it has none (unlinked, renamed over: the file at the
 * name v was opened at is another one). */
const char *ckc_vfd_name(const ckc_vfd_t *v, char now[PATH_MAX]);
/* The name of the file v is in the kernel's terms, into now: its version's
 * name now (renamed since it was opened: the new one; superseded by a
 * newer version of that name, or changed by another program: that name
 * still); NULL where it was unlinked or renamed over (the file at its
 * old name is another one). For its locks, fstat and copies. */
const char *ckc_vfd_file_name(const ckc_vfd_t *v, char now[PATH_MAX]);

/* Hands v's version over to its real file and switches every descriptor of
 * that version (v's numbers and those of other opens of it). Returns 0 or
 * -errno (-ESTALE: v reads a version that a newer one replaced). */
int ckc_vfd_demote(ckc_vfd_t *v);

/* Switches every virtual descriptor of path whose version was handed over. */
void ckc_vfd_switch_path(const char *canon);

/* The real file becomes the checkpoint (before a call works on it
 * directly): the cache's version of canon (an open writer's bytes so far,
 * or a closed one) is published there and forgotten, and every descriptor
 * of it names the real file from then on. Returns 0 (also when nothing is
 * cached) or -errno. */
int ckc_hand_over_path(const char *canon);

/* Demotes every virtual descriptor (only those without FD_CLOEXEC when
 * inherited_only) before a child or a new program gets them; why names the
 * occasion in messages about those that cannot be. */
void ckc_vfd_demote_all(bool inherited_only, const char *why);
/* The process ends without closing its descriptors (_exit): the files
 * their locks were taken on are let go. */
void ckc_vfd_locks_release_all(void);

/* fork handlers of the table and of the stdio list: 0 prepare, 1 parent,
 * 2 child. */
/* In a forked child: makes every descriptor's lock anew. */
void ckc_fdtab_atfork_child(void);

/* Whether f is a tagged (cookie) stream. */
#include <stdio.h>
/* glibc's stream flags (libio.h, not installed): a stream that is writing,
 * or reading back bytes pushed with ungetc, is left to glibc. */
#define STDIO_IN_BACKUP 0x0100
#define STDIO_LINE_BUF 0x0200
#define STDIO_PUTTING 0x0800
#define STDIO_NO_READS 0x0004
#define STDIO_NO_WRITES 0x0008
#define STDIO_APPENDING 0x1000
bool ckc_stdio_tagged(FILE *f);

/* A tagged stream's orientation as fwide(3) sets and answers it (mode 0:
 * the question): 1 wide, -1 bytes, 0 none yet; CKC_NOT_TAGGED_STREAM for
 * any other stream. */
#define CKC_NOT_TAGGED_STREAM (-2)
int ckc_stdio_orient(FILE *f, int mode);

/* fread (fread_unlocked when !locked) of any stream: on a tagged one, a
 * read of a whole buffer or more goes straight from the cache into p. */
size_t ckc_stdio_fread(void *p, size_t size, size_t n, FILE *f, bool locked);
size_t ckc_stdio_fwrite(const void *p, size_t size, size_t n, FILE *f, bool locked);

/* Flushes every tagged stdio stream (before the engine stops at exit). */
void ckc_stdio_flush_all(void);

/* flock(2) on a tagged descriptor (locks.c) acts on the real file, or on
 * a lock file of the checkpoint's path while the real file is missing, the
 * same for every process of the user on the node; record locks (fcntl(2),
 * lockf(3)) make the descriptor the real file's first. */
void ckc_lock_release(ckc_vfd_t *v);
/* The process ends: the lock files it used that nobody holds now are
 * removed (locks.c). */
void ckc_locks_sweep(void);
/* When v's numbers go to the real file (ckc_vfd_switch, v locked): the
 * descriptor that holds v's locks on the real file, at v's offset, for the
 * caller to put at v's numbers (then -1 stays in v), or -1. */
int ckc_lock_switch_fd(ckc_vfd_t *v);
/* After the switch to real: a flock v held on its lock file is taken on
 * real instead. */
void ckc_lock_switched(ckc_vfd_t *v, int real);

/* Opens a placeholder: a real, unique descriptor on which every read or
 * write that bypasses the library fails (O_PATH of "/"). */
int ckc_placeholder(int oflags);

/* ---- operations on virtual descriptors (posix.c) ---- */

ssize_t ckc_vfd_read(ckc_vfd_t *v, void *buf, size_t n);
ssize_t ckc_vfd_write(ckc_vfd_t *v, const void *buf, size_t n);
ssize_t ckc_vfd_pread(ckc_vfd_t *v, void *buf, size_t n, off_t off);
ssize_t ckc_vfd_pwrite(ckc_vfd_t *v, const void *buf, size_t n, off_t off);
off_t ckc_vfd_lseek(ckc_vfd_t *v, off_t off, int whence);
/* CKC_HANDED where a write or truncation of v to position to would leave a
 * large hole (the checkpoint then went to its real file), else 0. */
int ckc_px_hole_aside(ckc_vfd_t *v, uint64_t to);
/* Whether v's real file system allows position r: positions up to
 * CKC_SEEK_ASK_FROM are taken without asking it (every Linux file system
 * holds files of a TiB). */
#define CKC_SEEK_ASK_FROM ((off_t)1 << 40)
bool ckc_px_seek_fits(const ckc_vfd_t *v, off_t r);
/* The most bytes one read, write, vector or copy call moves, as the
 * kernel caps them (MAX_RW_COUNT: INT_MAX rounded down to a page): a
 * program's call on a tagged descriptor asking for more moves this many. */
#define CKC_RW_MAX ((size_t)0x7ffff000)
/* ckc_open_tagged's answer when the path is not for the cache: call the
 * real function. */
#define CKC_PASS (-4096)
/* The same for a small checkpoint written straight to its real path as a
 * sample of the model of small checkpoints: the caller hands the
 * descriptor it opens, and the open's start, to ckc_small_opened. */
#define CKC_PASS_TIMED (-4097)
/* The same for a read the cache holds nothing of, whose path may still
 * lead through links to a version not yet published: where the real open
 * finds no file (ENOENT), the caller asks ckc_open_linked. */
#define CKC_PASS_LINKS (-4098)
/* The same for a process's first checkpoint, sent to its real path before
 * the cache starts: the caller tells ckc_first_write_done how its real
 * open went. */
#define CKC_PASS_FIRST (-4099)

/* The open logic for a tagged path: an fd, -errno, CKC_PASS,
 * CKC_PASS_TIMED, CKC_PASS_LINKS or CKC_PASS_FIRST; *t0 (when not NULL) is
 * when the open began. */
int ckc_open_tagged(const char *canon, int flags, mode_t mode, uint64_t *t0);
/* After CKC_PASS_LINKS and a real open that found no file: the version
 * not yet published that canon leads to through links, opened for
 * reading (an fd, -errno), or CKC_PASS: none, and the real open is made
 * again (the version may have been published meanwhile). */
int ckc_open_linked(const char *canon, int flags);

/* The program-visible time of small checkpoints sampled by the model
 * (engine_write.c): fd, a real file opened at t0 for one written straight
 * to its real path, is timed to its close. Before
 * every close the program makes, ckc_small_take takes the number's start
 * (one load when none is timed: the number is free for another thread's
 * open once closed), and ckc_small_done notes it after a close that
 * succeeded. ckc_small_drop forgets the starts of numbers closed or
 * replaced otherwise (close_range, closefrom), before the call. */
void ckc_small_opened(int fd, uint64_t t0);
void ckc_small_done(uint64_t t0);
void ckc_small_drop(unsigned first, unsigned last);
extern _Atomic uint64_t *ckc_small_t0;
/* One past the highest number whose slot was ever set (0: none). */
extern atomic_uint ckc_small_end;
/* The slot of the number of the placeholders' base (ckc_placeholder): the
 * program closing or replacing that number takes it, and the base is
 * forgotten (ckc_ph_base_lost). */
#define CKC_SMALL_BASE UINT64_MAX
void ckc_ph_base_lost(int fd);
/* A number's slot also tells that it is a descriptor of a tagged path
 * opened at its real file (the cache held nothing of it, or the open went
 * there as a process's first checkpoint does): CKC_SMALL_PASSED and a hash
 * of the path (ckc_passed_open). A new version of that path replacing the
 * real file would leave that descriptor on the old one, where the kernel's
 * in-place rewrite shows it the new bytes (and takes its writes): such a
 * rewrite goes to the real file (ckc_passed_using). */
#define CKC_SMALL_PASSED (1ull << 63)
void ckc_passed_open(int fd, const char *canon);
/* The mark left fd's slot (mark: what was there): forgotten, except in a
 * vfork child, whose numbers are its own while the slots are the parent's. */
void ckc_passed_gone(int fd, uint64_t mark);
/* Whether a descriptor of this process open for writing on the real file
 * at canon is one the library saw opened there (ckc_passed_open, or a
 * small checkpoint written straight, ckc_small_opened). */
bool ckc_real_writer_open(const char *canon);
/* newfd, a copy of oldfd (dup), uses the file oldfd uses. */
void ckc_passed_dup(int oldfd, int newfd);
bool ckc_passed_using(const char *canon);
/* Mappings of tagged files (fdtab.c): the mapping [p, p + len) of fd,
 * a checkpoint's real file (canon: its path, or NULL for a descriptor
 * opened at its real file, which is marked); its unmapping and move; and
 * ckc_passed_using counts these mappings as it counts descriptors: a
 * rewrite of a mapped path goes to the real file in place, as the mapping
 * shows it. */
void ckc_mapped_add(int fd, const char *canon, const void *p, size_t len);
void ckc_mapped_cut_slow(const void *p, size_t len);
void ckc_mapped_moved(const void *old, const void *to, size_t len);
extern atomic_uint ckc_mapped_n;
static inline void ckc_mapped_cut(const void *p, size_t len)
{
	if (__builtin_expect(atomic_load_explicit(&ckc_mapped_n, memory_order_relaxed) != 0, 0))
		ckc_mapped_cut_slow(p, len);
}
/* The file at from was renamed to to (or the two exchanged): the marks of
 * its descriptors follow it. */
void ckc_passed_renamed(const char *from, const char *to, bool exchange);
extern atomic_uint ckc_passed_n;
/* Room for one more descriptor as the process ends with its table full
 * (ckc_spare_fd_hook): the soft descriptor limit raised towards the hard
 * one, once, or else the placeholders' base closed if its number is below
 * the limit (the next placeholder opens another). Returns whether it made
 * room. */
bool ckc_ph_spare(void);
/* Its second half alone: the base's number given up (a program still
 * running keeps its limit as it set it). */
bool ckc_ph_spare_base(void);
/* Opens the placeholders' base now if none is open: a process that
 * writes checkpoints keeps it, also as the descriptor ckc_ph_spare gives
 * back when the program ends with its table full. */
void ckc_ph_keep(void);
static inline uint64_t ckc_small_take(int fd)
{
	if ((unsigned)fd < atomic_load_explicit(&ckc_small_end, memory_order_relaxed) &&
	    __builtin_expect(atomic_load_explicit(&ckc_small_t0[fd], memory_order_relaxed) != 0, 0)) {
		uint64_t t0 = atomic_exchange(&ckc_small_t0[fd], 0);
		if (__builtin_expect(t0 == CKC_SMALL_BASE, 0)) {
			ckc_ph_base_lost(fd);
			return 0;
		}
		if (__builtin_expect(t0 & CKC_SMALL_PASSED, 0)) {
			ckc_passed_gone(fd, t0);
			return 0;
		}
		return t0;
	}
	return 0;
}
/* Closes fd (tagged or not). */
int ckc_close_fd(int fd);

/* ---- the per-thread guard ---- */

CKC_WARM_PATH static inline void ckc_enter(void)
{
	if (ckc_io_guard++ == 0 && ckc_tl_locks == 0)
		ckc_cancel_hold();
	atomic_signal_fence(memory_order_seq_cst);
}

CKC_WARM_PATH static inline void ckc_leave(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	if (--ckc_io_guard == 0 && ckc_tl_locks == 0)
		ckc_library_left();
}

/* Whether fd is a descriptor the cache answers for (tagged, not handed
 * over to its real file, whose number names that file now); an untagged
 * number costs the inline table test. */
static inline bool ckc_fd_cached(int fd)
{
	ckc_vfd_t *v = ckc_vfd_held(fd);
	bool cached = v && !v->switched;
	ckc_vfd_drop(v);
	return cached;
}

/* The stat of v's version, as the engine keeps it. */
static inline void ckc_vfd_stat_of(ckc_vfd_t *v, ckc_stat_t *st)
{
	ckc_enter();
	ckc_handle_stat(v->h, st);
	ckc_leave();
}

/* A wrapper's return: -1 with errno from a -errno result, or rc with the
 * caller's errno (saved) put back. */
static inline long ckc_result(long rc, int saved)
{
	if (rc < 0) {
		errno = (int)-rc;
		return -1;
	}
	errno = saved;
	return rc;
}

/* ---- shared by posix.c, posix_data.c and posix_names.c ---- */

int ckc_px_vfd_usable(const ckc_vfd_t *v);
bool ckc_px_handed_over(long *r, ckc_vfd_t *v);
/* wr: 0 reads, 1 writes, CKC_PX_APPEND writes at the end whatever off is
 * (RWF_APPEND); a write to an O_APPEND descriptor always goes at the end,
 * and only a write at the position moves it (pwrite's rule on Linux). */
#define CKC_PX_APPEND 2
/* CKC_PX_AT_OFFSET writes at off even on an O_APPEND descriptor (RWF_NOAPPEND). */
#define CKC_PX_AT_OFFSET 3
/* *done (where not NULL): the bytes moved before the checkpoint went to its
 * real file in the middle of the vector (the call then answers
 * CKC_HANDED, its position past them), for the caller to move the rest
 * there; 0 otherwise. */
ssize_t ckc_px_vfd_iov(ckc_vfd_t *v, const struct iovec *iov, int cnt, off_t off, bool use_pos, int wr,
		       size_t *done);
/* The answers ckc_px_vfd_iov gives before it moves anything (the kernel's,
 * in its order): 0 or -errno, and *all the bytes the pieces hold. */
long ckc_px_iov_check(ckc_vfd_t *v, const struct iovec *iov, int cnt, off_t off, bool use_pos, int wr,
		      size_t *all);
/* The checkpoint behind v goes to its real path and every descriptor of
 * it becomes a descriptor of the real file (a call the library cannot see
 * is about to use one): 0 or -errno. */
int ckc_px_vfd_make_real(ckc_vfd_t *v);
/* The same for descriptor fd if it is tagged, said (with what) if it
 * fails; errno kept. */
void ckc_px_fd_make_real(int fd, const char *what);
/* An open of /proc/self/fd/N (or /dev/fd/N...) of a tagged descriptor N:
 * N becomes a descriptor of the real file first. */
void ckc_px_procfd_open(const char *path);
/* After the program's real open of path gave fd (or -1): a tagged one
 * (canon not NULL) is marked as open at its real file (ckc_passed_open);
 * any other forgets what its number's slot held, and one of the form
 * /proc/self/fd/N uses the file descriptor N uses (ckc_passed_dup). */
void ckc_px_real_opened(int fd, const char *path, const char *canon);
/* A call of the program's that changes the folder of dirfd/path (a name
 * made, removed or renamed there), around it: the times the program set on
 * that folder are not put back over its change (ckc_dir_times_changing). */
typedef struct ckc_px_change {
	uint64_t tok;
	char *canon; /* PATH_MAX bytes, or NULL where no folder's times are set */
} ckc_px_change_t;
/* A change's start: its path's room is taken from the caller's stack
 * (alloca, freed as the wrapper returns) only where the program set some
 * folder's times, which is rare: a program's unlink, mkdir or rename
 * otherwise reaches no deeper into its stack for it. */
#define CKC_CHANGE_INIT { 0, ckc_dir_times_any() ? __builtin_alloca(PATH_MAX) : NULL }
void ckc_px_change_begin(ckc_px_change_t *c, int dirfd, const char *path);
/* rc, the call's result (0: it changed the folder), errno kept */
int ckc_px_change_end(ckc_px_change_t *c, int rc);
/* rc of a call that changes the folder of dirfd/path (mkdir, symlink, a
 * name removed), made by the expression call between the two */
#define CKC_CHANGING(dirfd, path, call)                   \
	({                                                \
		ckc_px_change_t chg_ = CKC_CHANGE_INIT;   \
		ckc_px_change_begin(&chg_, dirfd, path);  \
		ckc_px_change_end(&chg_, (call));         \
	})

/* The descriptor number a path of the form /proc/self/fd/N, /dev/fd/N,
 * /proc/thread-self/fd/N, /proc/ID/fd/N or /proc/self/task/ID/fd/N (ID:
 * this process's or one of its threads') names, or -1. */
int ckc_px_procfd_number(const char *path);
/* fn(key) for each checkpoint under the folder dir that this process has
 * open for writing, one at a time (fn hands it over or retires it, so that
 * it is not found again), until fn fails: 0 or fn's error (dirs.c). */
int ckc_dir_each_writer(const char *dir, int (*fn)(const char *key));
/* pwrite of a tagged descriptor, at the end when it is O_APPEND. */
ssize_t ckc_px_vfd_pwrite(ckc_vfd_t *v, const void *buf, size_t n, off_t off);
int ckc_px_real_stat_path(const char *p, struct stat *st);
/* The start of a small file (a /proc file) in buf, NUL-terminated: the
 * bytes read (at most size - 1), or -1. Through the real functions. */
ssize_t ckc_px_read_file(const char *path, char *buf, size_t size);
/* The threads of process pid (0: this one) from /proc/PID/status, or -1. */
long ckc_px_threads(pid_t pid);
int ckc_px_real_access(const char *p, int mode);
/* Whether this process has a file size limit (RLIMIT_FSIZE): a file
 * written then goes to its real path, whose writes the kernel limits
 * (EFBIG, SIGXFSZ). Asked of the kernel at each tagged open for writing
 * (a limit set by another process is seen at the next open). */
bool ckc_fsize_limited(void);

#endif
