/* The engine API: what the interposer (and the public ckptcache.h API) calls.
 * Paths are canonicalised here; every function is thread-safe. Errors are
 * negative errno values; nothing here changes errno. */
#ifndef CKC_H
#define CKC_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "conf.h"
#include "stats.h"

typedef struct ckc_handle ckc_handle_t;
typedef struct ckc_ref ckc_ref_t;

typedef struct ckc_stat {
	uint64_t size;          /* bytes of the current version */
	struct timespec mtime;  /* when it was last written */
	bool complete;          /* closed by its writer */
	bool at_home;           /* the real path holds this version */
	mode_t mode;            /* permission bits it is created with */
	bool has_owner;         /* uid/gid were set (chown) */
	uid_t uid;
	gid_t gid;
	struct timespec atime;  /* as set (utimensat), else mtime */
	int readers;            /* descriptors of this process reading it */
	bool passed_read;       /* it was written straight to its real path and opened
				   for reading there: descriptors may read that file */
	bool linked;            /* its path still names it (not unlinked, not replaced) */
} ckc_stat_t;

/* Attributes a program sets on a cached checkpoint (chmod, chown,
 * utimensat); they are kept and given to the real file when it is
 * published, or applied to it at once if it is already there. */
#define CKC_ATTR_MODE 1
#define CKC_ATTR_OWNER 2
#define CKC_ATTR_TIMES 4
typedef struct ckc_attr {
	int mask;
	mode_t mode;
	uid_t uid;                 /* (uid_t)-1: unchanged */
	gid_t gid;
	struct timespec times[2];  /* atime, mtime: resolved, no UTIME_NOW/OMIT */
} ckc_attr_t;

/* Reads the configuration from the environment and starts the engine.
 * Returns 0 when the cache is active, 1 when it is disabled (no
 * CKPTCACHE_PATHS, or a configuration error: everything passes through),
 * or -errno when a tier could not be set up (then also disabled). Aborts
 * only under CKPTCACHE_STRICT=1. Idempotent. */
int ckc_init(void);

/* Starts the engine with an explicit configuration (copied). Same returns. */
int ckc_init_config(const ckc_config_t *c);

/* Whether the engine is started and caching. */
bool ckc_active(void);

/* Whether the engine holds any checkpoint now (one load; no lock): inline,
 * as every stat of a walker asks it. */
extern _Atomic size_t ckc_eng_nobj_now;
static inline bool ckc_holds_objects(void)
{
	return __atomic_load_n(&ckc_eng_nobj_now, __ATOMIC_RELAXED) != 0;
}

/* Whether it holds a checkpoint that its real path does not (one load; no
 * lock): where not, a path reaches the bytes the cache holds through the
 * kernel, whatever links it goes through. */
bool ckc_holds_unpublished(void);

/* The program set the times of the folder dir (canonical), which now has
 * the attributes st: the publications into it that follow, each a link or
 * rename that sets its modification time, put that time back while
 * nothing else changed the folder (tar -x, cp -a and rsync -a set a
 * folder's times after writing its files). */
void ckc_dir_times_note(const char *dir, const struct stat *st);

/* The program makes or opens to make a file at path (canonical): its
 * folder changes as the program asked after the times it set, which are
 * no longer put back. */
void ckc_dir_times_forget(const char *path);

/* Whether the program set the times of a folder whose publications are
 * to come (one load, no lock). */
bool ckc_dir_times_any(void);

/* The program is about to change the folder of path (canonical) by a call
 * of its own (a folder, link or node made, a name removed or renamed):
 * until ckc_dir_times_changed, nothing puts that folder's times back. A
 * token for it, 0 where they were not set. */
uint64_t ckc_dir_times_changing(const char *path);

/* That call ended (done: it changed the folder): the times the program had
 * set are no longer put back; or the call failed and they are, again. */
void ckc_dir_times_changed(const char *path, uint64_t tok, bool done);

/* Whether one of those replaces a file its real path held when it began
 * (one load; no lock): where not, a path that reaches a version not yet
 * published through links finds no file there, and the kernel's open of it
 * fails. */
bool ckc_holds_replacements(void);

/* Whether stepping aside, in a process that has not started the cache,
 * sends its first checkpoint to the real path (what an earlier process on
 * this node learnt about paths, the CKPTCACHE_PATHS value, may say the
 * cache; one read of a small file). Each such checkpoint opened is noted
 * (ckc_aside_first_note) and counted in the statistics'
 * step_aside.written_straight (ckc_aside_firsts). *small_home: whether that
 * process's small checkpoints (under 1 MiB) went faster to their real
 * paths than into the cache, by the model's own rule. */
bool ckc_aside_first_home(const char *paths, bool *small_home);
void ckc_aside_first_note(void);
unsigned ckc_aside_firsts(void);
/* A forked child's count starts again (its parent's are its parent's). */
void ckc_aside_firsts_forget(void);
/* A process that wrote checkpoints that way and never started the cache
 * writes its statistics (CKPTCACHE_STATS of c) at exit: those checkpoints,
 * and no tier. */
void ckc_stats_write_unstarted(const ckc_config_t *c);

/* The program ends: drains every required flush (until deadline_ns on
 * ckc_now_ns()'s clock; 0: no limit), hands each checkpoint still open for
 * writing over to its real file (its bytes so far are published there and
 * later writes go there directly), stops the threads, writes statistics and
 * removes the ssd tier's file and this process's record. The engine goes on
 * serving the program's other threads (reads from the tiers, writes to
 * handed-over files; files opened for writing from now on pass through),
 * so that no call of theirs fails while the process ends. A second caller
 * waits for the first, until its own deadline. Returns 0, or -ETIMEDOUT
 * when the deadline came first. */
int ckc_finish(uint64_t deadline_ns);

/* ckc_finish without a deadline, then releases everything (tiers, objects,
 * threads). Idempotent; the engine may be started again. */
void ckc_shutdown(void);

/* Starts a new version of path for writing (the previous version is
 * retired). mode is used when the real file is created. Returns 0 or -errno. */
int ckc_open_write(const char *path, mode_t mode, ckc_handle_t **h);
/* The same for a descriptor that writes the version from its start (no
 * O_APPEND; read too or not): the version may go straight to its real path
 * where that writes as fast as the cache (stepping aside, aside.h), and
 * the descriptor reads it back from there. */
int ckc_open_write_only(const char *path, mode_t mode, ckc_handle_t **h);
/* Where a new version of path, opened write-only (O_TRUNC, no O_APPEND),
 * goes when the checkpoints are small (aside.h): */
enum {
	CKC_ASIDE_NO = 0,   /* as any other: ckc_open_write_only decides */
	CKC_ASIDE_BACKLOG,  /* its real path, for the small checkpoints waiting
			     * to be published */
	CKC_ASIDE_HOME,     /* its real path, a sample of the small model: the
			     * caller times the program's open to its close */
	CKC_ASIDE_CACHE,    /* the cache, a sample of the small model likewise */
};
/* Where such a version goes now. For the two straight answers the version
 * this process holds (nobody reads it) is forgotten, and the program
 * writes the real file itself, with no look at it first. */
int ckc_write_aside(const char *path, bool trunc);
/* A new version that the program made its standard output or error before
 * writing a byte (a shell's "echo ... >file"), handed over to its real
 * file there. After a few in a row, with no version closed by the program
 * in between, the process's new write-only versions go to their real
 * files from the start (ckc_write_aside: CKC_ASIDE_BACKLOG), as each
 * would be handed over there anyway; not with CKPTCACHE_STEP_ASIDE=off. */
void ckc_redirect_noted(void);

/* A small checkpoint of size bytes that another process asked for soon
 * after its close took ns to publish, which that process waited: the
 * model of small checkpoints counts it as their cost in the cache (a
 * shell loop that writes a file and runs a tool that reads it). */
void ckc_small_asked(uint64_t size, uint64_t ns);

/* The time a small checkpoint whose ckc_write_aside answered
 * CKC_ASIDE_HOME or CKC_ASIDE_CACHE took the program, from its open to
 * its close (that answer passed on as side). */
void ckc_small_note(int side, uint64_t ns);

/* Writes len bytes at off of a writing handle. Returns len or -errno. */
ssize_t ckc_pwrite(ckc_handle_t *h, const void *buf, size_t len, uint64_t off);

/* Opens the current version of path for reading: a cached object, or the
 * real file (a checkpoint of an earlier run). Returns 0, or -ENOENT when
 * neither exists, or -errno. */
int ckc_open_read(const char *path, ckc_handle_t **h);

/* ckc_open_read for a program's open: *held tells whether the cache had a
 * version of path as the open began; a version this process still writes
 * is not opened (-EBUSY, *held set: every descriptor of a file being
 * written shares its state, so the open goes to the real file). */
int ckc_open_read_held(const char *path, ckc_handle_t **h, bool *held);

/* Counts n checkpoints the program opened for reading at their real paths
 * before the engine started (nothing could be cached or named ahead then),
 * as the engine counts such opens itself (statistics). */
void ckc_count_passed_reads(uint64_t n);

/* Reads up to len bytes at off from the fastest tier holding them (a writing
 * handle reads what was written so far). Returns the number of bytes (0 at
 * end) or -errno. */
ssize_t ckc_pread(ckc_handle_t *h, void *buf, size_t len, uint64_t off);

/* For a reading handle whose checkpoint the real file holds as it is: a
 * descriptor of that file, owned by h, for the kernel's own copy calls of
 * [off, off + len), where no cache tier holds the bytes (they are only in
 * the real file, which may well be in the page cache) or where the page
 * cache holds that range; -ENOENT otherwise (the bytes are read with
 * ckc_pread then). */
int ckc_handle_home_fd(ckc_handle_t *h, uint64_t off, uint64_t len);

/* For a reading handle whose checkpoint a host tier holds: fn(ctx, p, n)
 * runs on the bytes of [off, off + n) where they lie in that tier's memory
 * (n <= len: as far as they run unbroken there), pinned there and with the
 * engine's lock not held; returns fn's result (bytes it took > 0 count as
 * read), or 0 where no host tier holds off (the bytes are read with
 * ckc_pread then). A copy out of a checkpoint into a socket takes them from
 * there, where a read would copy them first. */
ssize_t ckc_handle_lend(ckc_handle_t *h, uint64_t off, size_t len,
			ssize_t (*fn)(void *ctx, const void *p, size_t n), void *ctx);

/* Counts [off, off+len) of h as read by the program from the real file
 * (statistics, and whether the checkpoint was read whole). */
void ckc_handle_note_read(ckc_handle_t *h, uint64_t off, uint64_t len);

/* The bytes the library has written into files of the real paths' file
 * systems so far (publications, checkpoints written through), which a
 * look at their free space taken earlier does not count; ckc_home_wrote
 * counts n more. */
uint64_t ckc_home_written(void);
void ckc_home_wrote(uint64_t n);

/* A write of h's waits (waiting) or no longer waits for the checkpoints
 * owed to its file system: meanwhile the version is not one left
 * unwritten (ckc_idle_writers). */
void ckc_handle_room_wait(ckc_handle_t *h, bool waiting);

/* Current size of the object behind h. */
uint64_t ckc_handle_size(const ckc_handle_t *h);
/* Whether h's writes (wr) or reads are served by a tier in host memory
 * now (not written through to the real path, nor on an ssd): a hint, for
 * the gathering of a vector's pieces (intercept/posix.c). */
bool ckc_handle_in_memory(const ckc_handle_t *h, bool wr);
/* The cnt pieces of iov (len bytes in all) written at off in one
 * pwritev(2) of the real file where h's version is written through to it
 * now (the kernel's answers: a short count, EFAULT); -EAGAIN where it is
 * not (the caller writes the pieces as usual), CKC_HANDED where it went to
 * its real file. */
ssize_t ckc_pwritev_home(ckc_handle_t *h, const struct iovec *iov, int cnt, size_t len, uint64_t off);

/* The bytes of closed versions the cache still owes to real files on the
 * file system of h's (where that is known; else on any), other than h's
 * own, counted until they reach `enough`; where the cache's tiers hold
 * fewer bytes than that besides h's, those bytes (no fewer than the owed
 * ones) answer with no count. */
uint64_t ckc_owed_bytes_beside(const ckc_handle_t *h, uint64_t enough);

/* Fills st for the version behind h (which may have been replaced since).
 * Returns 0. */
int ckc_handle_stat(const ckc_handle_t *h, ckc_stat_t *st);
/* The device and inode the real file of h's version (ckc_ident: of
 * path's cached version) will have: where it is a new file not published
 * yet and created exclusively (ckc_handle_keep_ident), the unnamed file
 * in its folder that its first publication fills and names, made now if
 * need be, so that what stat reports before the publication holds after
 * it. 0, or -errno where there is none (the real file is there, nothing is
 * to be published, the file was not made exclusively, or too many are
 * held); -EEXIST where its publication, under way, made the real file
 * meanwhile (whose inode is the answer). */
void ckc_handle_keep_ident(ckc_handle_t *h);
int ckc_handle_ident(const ckc_handle_t *h, dev_t *dev, ino_t *ino);
int ckc_ident(const char *path, dev_t *dev, ino_t *ino);

/* What the open of a reading handle found at its real path when it checked
 * its version against that file: */
enum {
	CKC_SEEN_NONE = 0, /* nothing kept: no look, or not a regular file */
	CKC_SEEN_FILE,     /* a regular file: what stat said */
	CKC_SEEN_ABSENT,   /* no file (the version is not published yet) */
};
/* That (a CKC_SEEN_ answer), with stat's answer in *st for CKC_SEEN_FILE,
 * and in *at_home whether the version was published then. */
int ckc_handle_seen(const ckc_handle_t *h, struct stat *st, bool *at_home);

/* Sets attributes of the current version of path. Returns 0, or -ENOENT if
 * it is not cached, or -errno from the real file. */
int ckc_setattr(const char *path, const ckc_attr_t *a);

/* Sets attributes of the version behind h. Returns 0 or -errno. */
int ckc_handle_setattr(ckc_handle_t *h, const ckc_attr_t *a);

/* Sets the size of a writing handle's object: shorter drops the tail,
 * longer adds zeros. Returns 0, -EBADF for a reading handle, or -errno. */
int ckc_ftruncate(ckc_handle_t *h, uint64_t size);

/* A reservation of space (fallocate(2), mode 0 or FALLOC_FL_KEEP_SIZE) in
 * a version that a writing handle writes straight to its real path: made
 * on its file there, as the program's own call would have been (numpy
 * reserves each array's bytes before writing them, and ext4 took them
 * 10% faster into reserved space). Returns 0 or -errno from the file
 * system; -ENOENT when the cache holds the version (a reservation there
 * is the cache's business). */
int ckc_fallocate_home(ckc_handle_t *h, int mode, uint64_t off, uint64_t len);

/* Closes h: a writer completes its object (unused space is returned and
 * flushing starts); a reader that read every byte consumes it. Returns 0 or
 * -errno (a failed write-through to the real path). */
int ckc_close(ckc_handle_t *h);

/* Returns when the object behind h (its bytes so far) is durable at its real
 * path; 0 or -errno. With CKPTCACHE_PERSIST=never it returns 0 at once. */
int ckc_sync(ckc_handle_t *h);

/* ckc_sync for the current version of path; -ENOENT if it is not cached. */
int ckc_sync_path(const char *path);

/* Drops the cached versions of path and removes the real file.
 * Returns 0, or -errno from the real unlink (-ENOENT if neither existed). */
int ckc_unlink(const char *path);

/* Hands every cached checkpoint below directory dir over to the real files
 * (written there now, then forgotten), before the directory itself is
 * renamed or removed. Returns 0 or the first -errno. */
int ckc_handover_dir(const char *dir);

/* The key (canonical path, PATH_MAX bytes) of a checkpoint under directory
 * dir that is open for writing and not handed over: 0, or -ENOENT when
 * there is none (-errno for a bad dir). */
int ckc_writer_under(const char *dir, char *key);
/* The same for a version of a new file (its real path held nothing when
 * it began): the one writer whose name a listing of the folder lacks. */
int ckc_new_writer_under(const char *dir, char *key);
/* Whether any checkpoint is open for writing now (a load, no lock). */
bool ckc_writers_open(void);
/* The names (PATH_MAX each, up to max) of the versions open for writing
 * whose real files lack their bytes, of 1 to small bytes, none written for
 * idle_ns or more, or open for open_ns or more (a log written every few
 * tenths of a second): how many there are (possibly more than max). */
size_t ckc_idle_writers(char (*keys)[PATH_MAX], size_t max, uint64_t idle_ns, uint64_t open_ns, uint64_t small);

/* Moves the cached object at from to to (retiring any object at to) and
 * renames the real file if it exists. Returns 0, -ENOENT if from is not
 * cached, or -errno. */
int ckc_rename(const char *from, const char *to);

/* The process's umask: as the program last set it through umask(2) (the
 * library's wrapper tells ckc_umask_set), else as the kernel said at the
 * first need. A version's mode is the open's with it applied. */
mode_t ckc_umask(void);
void ckc_umask_set(mode_t m);

/* The newest time stamp the process has seen the kernel give a file (a
 * change time a stat returned, a checkpoint written straight to its real
 * path), in nanoseconds since the epoch. The kernel stamps a file with its
 * coarse clock or, where another stamp of the node since the last tick
 * was fine (multigrain timestamps, Linux 6.13 and later), with the newest
 * of those: later than the coarse clock the library reads, so a
 * checkpoint the cache stamped with that clock looked older than a file
 * written before it. (The cache's fine stamps are the kernel's too:
 * eng_touch_mtime.) */
extern _Atomic int64_t ckc_stamp_floor_ns;

static inline int64_t ckc_ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* Raises ckc_stamp_floor_ns to t where t is later and not in the future
 * (a time the program set on a file is not a stamp of the clock). */
void ckc_stamp_seen_slow(const struct timespec *t);
static inline void ckc_stamp_seen(const struct timespec *t)
{
	if (ckc_ts_ns(t) > __atomic_load_n(&ckc_stamp_floor_ns, __ATOMIC_RELAXED))
		ckc_stamp_seen_slow(t);
}

/* Now, as the kernel stamps a file it writes: its coarse clock (a tick's
 * granularity), so that a file the program writes right after a checkpoint
 * is never older than it (the fine clock put a checkpoint up to a tick
 * after a later file), and never before a stamp seen already. */
static inline void ckc_file_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME_COARSE, ts);
	int64_t floor = __atomic_load_n(&ckc_stamp_floor_ns, __ATOMIC_RELAXED);
	if (floor > ckc_ts_ns(ts)) {
		ts->tv_sec = (time_t)(floor / 1000000000);
		ts->tv_nsec = (long)(floor % 1000000000);
	}
}

/* Writes the current version of path to its real path now, whatever
 * CKPTCACHE_PERSIST says (before the real file is used directly). Returns
 * 0, -ENOENT if path is not cached, or -errno. */
int ckc_materialize(const char *path);

/* Retires the cached versions of path without touching the real file (the
 * caller has made the real file current). Returns 0, or -ENOENT if path is
 * not cached. */
int ckc_forget(const char *path);

/* Fills st for the current cached version of path. Returns 0 or -ENOENT
 * (also when a published version's real file was changed since by someone
 * else: the cache then forgets its version). */
int ckc_stat(const char *path, ckc_stat_t *st);
/* The same without the look at the real file: what this process's cache
 * holds of path (a read's open, which ckc_open_read checks then). */
int ckc_stat_held(const char *path, ckc_stat_t *st);

/* What a call on a handle returns once its version was handed over to the
 * real file: the caller makes the call again on the real file. */
#define CKC_HANDED (-EXDEV)

/* Hands the version behind h over to its real file: the bytes written so
 * far (an open writer's) or all of them are published, whatever
 * CKPTCACHE_PERSIST says, and the cache forgets the version; every handle
 * of it answers CKC_HANDED from then on. Waits for the writes under way.
 * Returns 0 (also when it was handed before), -ESTALE when a newer version
 * has the name, or -errno (the version stays cached). */
int ckc_handoff(ckc_handle_t *h);

/* ckc_handoff for the current version of path; -ENOENT if none is cached. */
int ckc_handoff_path(const char *path);
/* The same for a second open of path while it is written, which goes to
 * the real file: so do the path's other opens for a while (the writer's
 * descriptors follow it there at their next call, which may come later
 * than another thread's next open). */
int ckc_handoff_reopened(const char *path);

/* Whether the version behind h was handed over. */
bool ckc_handle_handed(const ckc_handle_t *h);

/* The name the version behind h has now (a rename while it is open moves
 * it; a hand-over leaves it at its real file's), into out; *gone where
 * that name is no longer its (unlinked, renamed over: the name it had
 * last). *unnamed (where given): whether it was unlinked or renamed over,
 * the file at its name another one (a version only superseded, by a newer
 * one of its name or another program's change, is still the file there in
 * the kernel's terms). False where there is none to give. */
bool ckc_handle_name(const ckc_handle_t *h, char out[PATH_MAX], bool *gone, bool *unnamed);
/* A number that names h's version among the process's live ones (its
 * file locks' key where it has no name). */
uintptr_t ckc_handle_version(const ckc_handle_t *h);

/* Publishes every closed version that CKPTCACHE_PERSIST says must reach its
 * real path and is not there yet (and, with writers, the bytes so far of
 * every open writer), waiting at most timeout_ns for flushes already under
 * way. Returns 0, -ETIMEDOUT, or the first -errno (said already). */
int ckc_publish_all(uint64_t timeout_ns, bool writers);

/* ckc_publish_all for the files under the folder dir (at any depth), NULL
 * for all. Returns -errno for a bad dir too. */
int ckc_publish_under(const char *dir, uint64_t timeout_ns, bool writers);
/* The same for closed versions, asked by another process of the node: its
 * wait is not this program's (stepping aside does not count it). */
int ckc_publish_under_asked(const char *dir, uint64_t timeout_ns);

/* Whether a closed version under the folder dir (NULL: anywhere) is owed to
 * its real path: what ckc_publish_under(dir, ...) would publish, writers
 * aside. */
bool ckc_owes_under(const char *dir);

/* Set by the preloaded library: told, with the engine lock held, when the
 * cache starts (holds) or stops holding bytes that the real file key lacks
 * (an open writer's, or a closed version's not yet published). Must not
 * block. NULL: nobody listens. */
extern void (*ckc_node_hook)(bool holds, const char *key);

/* Set by the preloaded library: makes room for one more descriptor, for a
 * publication that found the process's table full as the program ends.
 * Returns whether it did. NULL: none. */
extern bool (*ckc_spare_fd_hook)(void);

/* Appends path to the restore queue. Returns 0 or -errno. */
int ckc_hint_enqueue(const char *path);

/* Starts prefetching now (otherwise: at the first read). Returns 0. */
int ckc_prefetch_start(void);

/* Returns when every flush the persistence mode requires is done; 0, or
 * -EIO if some checkpoint could only be saved to a rescue file. */
int ckc_wait_flushed(void);

/* Name of the tier that would serve a read of path now ("host", "ssd",
 * "home"), or NULL if path is unknown. For tools and tests. */
const char *ckc_where(const char *path);

/* Waits until the host tier's memory is fully populated (start-up never
 * waits for it; benchmarks do). */
void ckc_wait_ready(void);

/* fork(2) handlers: the parent keeps the engine; the child gets none (its
 * threads did not survive the fork) and everything passes through there. */
void ckc_atfork_prepare(void);
void ckc_atfork_parent(void);
void ckc_atfork_child(void);

/* Expands "%p" (pid), "%r" (rank), "%h" (host name) and "%%" in a file
 * name template (CKPTCACHE_STATS, CKPTCACHE_TRACE). Returns 0 or
 * -ENAMETOOLONG. */
int ckc_expand_name(const char *tmpl, char *out, size_t outlen);

/* ---- the gpu tier and device capture (CKPTCACHE_CAPTURE=device) ----
 * A reference names bytes of an object's gpu copy that a host range of the
 * program owes; the copy stays in device memory while it exists. */

/* What the side that hosts the engine provides it: the preloaded library
 * sets it once at its start (ckc_services_set), a test its stand-ins. Each
 * entry may be NULL. */
typedef struct ckc_services {
	/* starts the engine on first use (the public API counts as one);
	 * NULL when the engine is linked directly */
	bool (*start)(void);
	/* the CUDA driver's own function of that name, for the gpu tier;
	 * NULL: no gpu tier */
	void *(*gpu_sym)(const char *name);
	/* waits until every capture whose device copy was left to complete
	 * in stream order has completed: the gpu tier calls it before it
	 * copies, and before it gives device memory back */
	void (*gpu_settle)(void);
	/* adds to a copy of the engine's counters what it does not know */
	void (*stats_extra)(ckc_stats_t *s);
	/* what host memory at p is (a ckc_mem_kind_t of ranges.h), as far as
	 * the program's CUDA calls tell; NULL: unknown, never pageable */
	int (*host_kind)(const void *p);
} ckc_services_t;

/* The services in use (all NULL until set). */
extern ckc_services_t ckc_svc;
void ckc_services_set(const ckc_services_t *h);

/* Sets up the gpu tier's region on device, whose context ctx is current
 * (its first capture or allocation; later calls return at once). 0,
 * -ENODEV (no gpu tier or no driver), -ENOSPC (no room there, or no slot
 * left for another device), -errno. */
int ckc_gpu_attach(void *ctx, int device);

/* The device of the gpu tier's region holding device address dptr, or -1. */
int ckc_gpu_device_of(uint64_t dptr);

/* Room in device's region of the gpu tier for a capture of len bytes whose
 * host destination starts skew bytes into a page: *dptr is where byte 0
 * goes. Returns 0 and a reference (one count) to an anonymous capture,
 * -ENOSPC when the region has no room now, -errno. */
int ckc_capture_begin(size_t len, unsigned skew, int device, ckc_ref_t **ref, uint64_t *dptr);

/* Writes bytes [roff, roff+len) of a reference at off of a writing handle:
 * a whole capture appended at the end of an object in the gpu tier is
 * attached to it (no bytes move; the reference then names the object),
 * anything else is copied from device memory. Returns len or -errno. */
ssize_t ckc_pwrite_ref(ckc_handle_t *h, ckc_ref_t *ref, uint64_t roff, size_t len, uint64_t off);

/* A read of [off, off+len) of a complete object held contiguously in the
 * gpu tier, answered by a reference instead of bytes (counted as a read).
 * Returns the bytes referenced (> 0; fewer at the end of the object), 0
 * when the read must copy bytes instead, or -errno. */
ssize_t ckc_pread_ref(ckc_handle_t *h, uint64_t off, size_t len, ckc_ref_t **ref);

/* Device address of bytes [roff, roff+len) of a reference: 0, or -ERANGE
 * when they are not contiguous in device memory. */
int ckc_ref_addr(ckc_ref_t *ref, uint64_t roff, size_t len, uint64_t *dptr);

/* Copies bytes [roff, roff+len) of a reference to host memory. 0 or -errno. */
int ckc_ref_fill(ckc_ref_t *ref, uint64_t roff, void *buf, size_t len);

/* The same into pinned or registered host memory whose pages may be
 * protected: device-to-host transfers straight into buf, never a CPU copy
 * (which would fault there). 0 or -errno. */
int ckc_ref_fill_dma(ckc_ref_t *ref, uint64_t roff, void *buf, size_t len);

void ckc_ref_get(ckc_ref_t *ref);
void ckc_ref_put(ckc_ref_t *ref);

/* A pinned buffer of len bytes (at most two pages) for the calling thread
 * to keep, from a few made in the background; NULL when none is left. */
void *ckc_gpu_pinned_slot(size_t len);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ckc_now_ns(void);

/* Around a copy of the program's (device capture, restore, or the real
 * copy) and its opening of a checkpoint: the cache's background work waits
 * for it to end (ckc_bg_yield). */
void ckc_prog_begin(void);
void ckc_prog_end(void);
/* The program opened a checkpoint for reading (after ckc_prog_end): the
 * cache's publications in the checkpoint folders give way to a program
 * reading them back (ckc_bg_yield_reads). */
void ckc_prog_read_opened(void);
/* How long ago the program's last copy ended: 0 while one is in progress
 * (pace.c). */
uint64_t ckc_prog_quiet_ns(void);

/* The program's allocation of bytes of memory of device failed: empty and
 * unmap the end of that device's region. Returns the bytes given back. */
uint64_t ckc_gpu_release(int device, uint64_t bytes);

/* Before the driver goes away at exit: every gpu copy is moved down (or
 * dropped when nothing needs it) and the device memory is released. */
void ckc_gpu_exit(void);

/* A copy of the engine's counters (what CKPTCACHE_STATS would hold now). */
void ckc_stats_get(ckc_stats_t *s);

#endif
