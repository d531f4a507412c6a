/* Internal functions of the engine over its data (engine_types.h):
 * objects, their per-tier copies, the tiers, the flush edges, the one
 * engine lock and its conditions. Shared by the engine's files, the tier
 * files, flusher.c and prefetcher.c; never seen by the interposer. */
#ifndef CKC_ENGINE_INT_H
#define CKC_ENGINE_INT_H

#include "engine_types.h"

/* The restore queue or the room for prefetches changed (lock held): the
 * prefetcher looks again. It has a condition variable of its own, so that
 * the broadcasts of every read and unpin do not wake it for nothing. */
void ckc_prefetcher_need(void);
static inline void ckc_prefetch_kick(void)
{
	ckc_eng.prefetch_gen++;
	pthread_cond_signal(&ckc_eng.cv[EC_PREFETCH]);
	if (!ckc_eng.prefetcher_running)
		ckc_prefetcher_need();
}

/* Room may have appeared in the top tier (a read consumed a checkpoint;
 * lock held): the prefetcher is woken only if it waits for room. Waking
 * it costs the reader a wake-up of another CPU at every checkpoint it
 * reads, for nothing when every checkpoint the queue names is in the
 * cache or in the page cache already. */
static inline void ckc_prefetch_room(void)
{
	if (ckc_eng.prefetch_wants_room)
		ckc_prefetch_kick();
}

/* engine.c */
/* The predicted size of the next checkpoint (lock held): the largest of
 * the last few, 0 before the first. */
uint64_t ckc_predict_size(void);
void ckc_obj_get(ckc_obj_t *o);
void ckc_obj_put(ckc_obj_t *o);               /* lock held */
/* Replaces o by nothing (a newer version, an unlink, a hand-over): its
 * flushes are cancelled and its copies freed once unused. Lock held. */
void ckc_obj_retire(ckc_obj_t *o);
ckc_obj_t *ckc_map_find(const char *key);
ckc_obj_t *ckc_obj_import_home(const char *key); /* lock held (dropped for a stat); NULL if no real file */
/* Tells the node registry whether o holds bytes its real path lacks (after
 * any change of that). Lock held. */
void ckc_node_note(ckc_obj_t *o);
/* A version retired that no descriptor reads any more: its copies can go
 * (one that is read keeps them until its last reader closes). */
static inline bool ckc_obj_gone(const ckc_obj_t *o)
{
	return o->retired && o->readers == 0 && o->writers == 0;
}

/* A trace line of op on key, of which the engine holds no object (v0). */
void ckc_trace_key(const char *op, const char *key);
void ckc_trace(const char *op, const ckc_obj_t *o, uint64_t off, uint64_t len, int level,
	       uint64_t t0_ns);
bool ckc_persist_wanted(const ckc_obj_t *o);  /* must it reach the real path? */

/* object.c: copies, extents, room and eviction (lock held throughout;
 * functions that may wait say so) */
/* The most bytes one copy of o may hold in tier level (its region's mapped
 * bytes in the gpu tier). Lock held. */
uint64_t ckc_place_limit(const ckc_obj_t *o, int level);
int ckc_place_reserve(ckc_obj_t *o, int level, uint64_t need, int mode, uint64_t dist_limit); /* may wait */
/* The same for a prefetch promoting o from level src (CKC_ALLOC_PREFETCH,
 * never waits): in the gpu tier it evicts no checkpoint the queue still
 * names that would then be read from a level no faster than src. */
int ckc_place_reserve_promote(ckc_obj_t *o, int level, uint64_t need, uint64_t dist, int src);
void ckc_unpin(ckc_obj_t *o, int level);
#define CKC_ALLOC_WRITE 0
#define CKC_ALLOC_FLUSH 1
#define CKC_ALLOC_PREFETCH 2
void ckc_place_trim(ckc_obj_t *o, int level, uint64_t size);
int ckc_place_append(ckc_place_t *p, uint64_t aoff, uint64_t alen);
void ckc_place_free(ckc_obj_t *o, int level);
uint64_t ckc_place_bytes(const ckc_place_t *p);
bool ckc_lower_has(const ckc_obj_t *o, int level);
/* Whether tier level takes a copy of o: an ssd tier on the file system of
 * o's real path does not take one that must reach that path. */
bool ckc_tier_takes(const ckc_obj_t *o, int level);

/* Marks FLUSHED every complete copy whose bytes are now safe below it (in a
 * lower tier, at the real path or in a rescue file). */
void ckc_mark_safe(ckc_obj_t *o);
int ckc_best_level(const ckc_obj_t *o);       /* readable copy; ntier-1 = home; -1 none */
void ckc_set_state(ckc_obj_t *o, int level, lc_event_t ev);
/* Segments of [off, off+len) of a copy: fills up to max (aoff, len) pairs. */
int ckc_place_segments(const ckc_place_t *p, uint64_t off, uint64_t len, ckc_ext_t *seg, int max);
/* Where file offset off of a copy lies in its arena, and how many bytes
 * follow it in the same extent; false past the copy's end. */
bool ckc_ext_run(const ckc_ext_t *ext, int n, uint64_t off, uint64_t *aoff, uint64_t *avail);
uint64_t ckc_dist(const ckc_obj_t *o);        /* restore-queue distance, HQ_FAR if none */
void ckc_refresh_flush_eta(int edge);

/* gpu/tier.c, gpu/xfer.c, gpu/pin.c, gpu/release.c, gpu/lend.c */
/* A host buffer of CKC_GPU_WINDOW bytes for a reader's window on a copy in
 * device memory (pinned when one is spare), NULL when none can be had;
 * given back with ckc_gpu_window_put. */
#define CKC_GPU_WINDOW ((uint64_t)8 << 20)
void *ckc_gpu_window_get(void);
void ckc_gpu_window_put(void *w);
int ckc_gpu_open(ckc_tier_t *t);
void ckc_gpu_close(ckc_tier_t *t);   /* lock held */
void ckc_gpu_stop(ckc_tier_t *t);    /* stops the mapping thread; lock not held */
bool ckc_gpu_usable(const ckc_tier_t *t);
int ckc_gpu_put(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len);
int ckc_gpu_get(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len);
/* len bytes into the gpu tier at aoff, which fill(ctx, off, buf, n) writes
 * piece by piece (off from 0) into a pinned buffer of the calling thread:
 * a background copy from a file without a pageable bounce. 0 or -errno
 * (fill's own included). */
int ckc_gpu_put_filled(ckc_tier_t *t, uint64_t aoff, size_t len,
		       int (*fill)(void *ctx, uint64_t off, void *buf, size_t n), void *ctx);
/* ckc_gpu_get straight into buf (pinned memory), never through a CPU copy. */
int ckc_gpu_get_direct(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len);
int ckc_gpu_dtod(ckc_tier_t *t, uint64_t dst, uint64_t src, size_t len);
int ckc_gpu_dtoh(ckc_tier_t *t, void *dst, uint64_t src, size_t len);
void ckc_gpu_stats(const ckc_tier_t *t, ckc_stats_t *s);
/* Lending between the ranks of a node (peer_lend.c): the lender's side. The
 * free bytes at the end of this process's own region that it can lend
 * (whole chunks; lock held); cutting up to want bytes of them off the
 * region (*cut: what was cut; its device and context); an allocation of
 * len bytes on that device made to be exported, as a descriptor (*fd) and
 * a handle; giving a handle back; raising the region's ceiling again by
 * bytes once lent memory came back (grow) or not (the program took it). */
uint64_t ckc_gpu_lendable(void);
int ckc_gpu_lend_cut(uint64_t want, uint64_t *cut, uint64_t *chunk);
int ckc_gpu_lend_alloc(uint64_t len, int *fd, uint64_t *handle);
void ckc_gpu_lend_free(uint64_t handle);
void ckc_gpu_lend_back(uint64_t bytes, bool grow);
/* The borrower's side: maps n chunks lent by board entry lender (each a
 * descriptor of chunk bytes on this process's ordinal home) after the
 * region it already has from it, or in a new one; returns how many were
 * mapped or -errno. Gives back up to want bytes (UINT64_MAX: all, and
 * nothing more is placed there) from the end of that region, waiting at
 * most wait_s for what is still being flushed; returns the bytes given
 * back. The chunk size lent chunks must have. */
int ckc_gpu_borrow_add(int lender, int home, const int *fds, int n, uint64_t chunk);
uint64_t ckc_gpu_borrow_return(int lender, uint64_t want, double wait_s);
uint64_t ckc_gpu_chunk(void);
/* The regions lent to this process with room (lock held): their 1-based
 * indexes, at most max; how many. */
int ckc_gpu_lent_regions(int *greg1, int max);
/* The arena offsets [*lo, *hi) where o's gpu copy may be placed: the mapped
 * part of its device's region (of the first region when its device has
 * none). -ENOSPC when there is none. Lock held. */
int ckc_gpu_span(const ckc_tier_t *t, const ckc_obj_t *o, uint64_t *lo, uint64_t *hi);
/* File work that objects retired or freed under the engine lock leave:
 * a descriptor to close, a temporary file to discard, a retired version's
 * real file to hold open for its readers. It is done by the same thread
 * once it lets the lock go (eng_unlock), before it goes on to what the
 * program asked (an unlink or a rename of the name, say): no file system
 * call runs under the engine lock. */
extern __thread int eng_later_n;
/* Writing handles open now (engine_names.c). */
extern atomic_size_t ckc_eng_writers;
/* Leaves fd to close after the lock (with tmp: the temporary file to
 * discard, and tmp to free). Lock held. */
void eng_close_later(int fd, char *tmp);
/* Lets the engine lock go, then does this thread's file work left. */
void eng_unlock_later(void);
static inline void eng_unlock(void)
{
	if (__builtin_expect(eng_later_n != 0, 0))
		eng_unlock_later();
	else
		ckc_mutex_unlock(&ckc_eng.lock);
}
/* Set on the cache's own threads: their device transfers give way to the
 * program's copies. */
extern __thread bool ckc_tl_background;
/* Set on the flush threads: their pieces give way to the program's reads
 * for half the time at most (pace.c). */
extern __thread bool ckc_tl_flushing;
/* Set on the prefetch thread. While a read of the program waits for the
 * prefetch in flight (eng_prefetch_wait: ckc_prefetch_awaited(+1), then
 * -1), that prefetch gives way to nothing: the waiting read is counted as
 * a copy of the program (ckc_owed_pread holds ckc_prog_begin across it),
 * and a prefetch that yielded to it, up to CKC_BG_YIELD_MAX_NS before each
 * piece, kept the program's read of a 64 MiB checkpoint waiting 0.28-0.32 s
 * for a copy from the host tier into the gpu tier that takes about 10 ms
 * (an H200: restores with hints at 1.5-2.3 GB/s, 3.4-4.7 without the
 * library). */
extern __thread bool ckc_tl_prefetcher;
void ckc_prefetch_awaited(int delta);
/* Set by the read path around a read the program asked for: only such a
 * copy into pageable memory runs in lanes (gpu/xfer.c). A fill of owed
 * memory may run inside a fault the program took holding a lock (its own,
 * the driver's, the owed table's) that the helpers would wait for. */
extern __thread bool ckc_tl_program_read;
/* The same around a write the program asked for: a large copy from its
 * memory into the host tier runs in lanes (host_put), the tier's fresh
 * pages faulted in by several threads. */
extern __thread bool ckc_tl_program_write;
/* On a background thread, before a piece of work that could hold up the
 * program: waits (CKC_BG_YIELD_MAX_NS at most) while a copy or capture of
 * the program is in progress. */
#define CKC_BG_YIELD_MAX_NS 5000000ull
void ckc_bg_yield(void);
/* On a background thread, before a file is made in a checkpoint folder
 * and before its name is linked there: waits (CKC_BG_YIELD_MAX_NS at
 * most) until the program has opened no checkpoint for reading for
 * CKC_BG_READ_QUIET_NS. The link holds the folder's lock, which the
 * program's lookups there wait for: a Python loop reading back 3,000
 * small files, some being published meanwhile, waited for it 1,700 times
 * (a wake-up each) and took 10-15% longer. Making the file costs the
 * kernel up to a millisecond beside the program (ext4 looks through its
 * inode table for one not deleted recently). Longer waits (50 ms) kept the
 * flush off the CPUs during such a loop, but held the publications a
 * restore needs for room (a checkpoint is evicted once published): the
 * RTM proxy's restores ran 2-5% slower, and a program's exit waited for
 * what had not been published. */
#define CKC_BG_READ_QUIET_NS 300000ull
void ckc_bg_yield_reads(void);
/* The program's copies in progress now (ckc_prog_begin). */
int ckc_prog_copies(void);
/* The program's own copies of this size or more (a tagged write or read)
 * count as copies the background work gives way to. */
#define CKC_PROG_COPY_MIN (1u << 20)
/* Background transfers move in pieces of this size at most, giving way
 * between them (a piece takes a millisecond or less, more when the kernel
 * must find fresh memory for it). */
#define CKC_BG_PIECE (2u << 20)
/* pace.c: the copies whose speed depends on the memory the kernel finds
 * (into and out of the page cache) move in pieces that take about
 * CKC_BG_SLICE_NS, of CKC_BG_PIECE_MIN to CKC_BG_PIECE bytes. */
#define CKC_BG_SLICE_NS 250000ull
#define CKC_BG_PIECE_MIN (128u << 10)
/* Gives way to the program, then returns the size of the next piece of a
 * copy with left bytes to go, and its start time in *t0: while the
 * program reads checkpoints (a read in progress, or one that ended
 * CKC_BG_READ_GAP_NS ago or less), for CKC_BG_YIELD_MAX_NS at most; while it
 * only writes or copies, for CKC_BG_WRITE_WAITS pieces' time at most, so
 * that a program that writes without a pause still leaves the flushes a
 * share (its writes need the room they free). */
#define CKC_BG_WRITE_WAITS 4
#define CKC_BG_READ_GAP_NS 1000000ull
size_t ckc_pace_begin(uint64_t left, uint64_t *t0);
/* The program begins (+1) or ends (-1) reading a checkpoint through the
 * cache, CKC_PROG_COPY_MIN bytes or more (with ckc_prog_begin/end). */
void ckc_pace_reading(int delta);
/* The piece of n bytes begun at t0 is done: the next ones are sized by it. */
void ckc_pace_end(size_t n, uint64_t t0);
/* engine.c: moves every gpu copy down or drops it (before the driver goes) */
void ckc_gpu_evacuate(void);

/* tier_host.c / tier_ssd.c / tier_home.c */
/* The host tier's pieces: a growing tier populates and gives back one
 * piece at a time. */
#define CKC_HOST_PIECE ((uint64_t)2 << 20)
#define CKC_PIECE_USED 1
/* Maps the host tier; grow: it grows with use, and gives room back when
 * idle unless keep (under a gpu tier, whose copies may be in flight). 0 or
 * -errno. */
int ckc_host_open(ckc_tier_t *t, uint64_t capacity, bool grow, bool keep);
/* Stops the toucher (lock not held: it takes the lock). */
void ckc_host_stop(ckc_tier_t *t);
/* Unmaps the tier; its toucher must be stopped if the lock is held. */
void ckc_host_close(ckc_tier_t *t);
/* A growing host tier takes huge pages from its first checkpoint of more
 * than this many bytes (or predicted so) on; before, small pages. A first
 * checkpoint reserves CKC_MIN_RESERVE whatever its size. */
#define CKC_HOST_HUGE_FROM ((uint64_t)CKC_MIN_RESERVE)
/* Bytes [aoff, aoff+len) of host tier t were allocated for a checkpoint
 * that holds whole bytes there now (lock held): the toucher populates
 * ahead of the next allocations, and gives these back once they are free
 * again and the tier idle. True where some of them were not populated (the
 * copy into them faults pages new to the process in). */
bool ckc_host_used(ckc_tier_t *t, uint64_t aoff, uint64_t len, uint64_t whole);
/* A checkpoint is coming into a growing host tier (a try of the cache by
 * stepping aside), though the tier may not have been used yet: its toucher
 * starts, or wakes, and populates the room planned for it (lock held). */
void ckc_host_expect(ckc_tier_t *t);
/* Whether a growing tier's room for the next checkpoint is populated (a
 * tier populated whole: true); where nothing was expected yet, expects
 * one (ckc_host_expect) and answers false. */
bool ckc_host_room_ready(ckc_tier_t *t);
int ckc_ssd_open(ckc_tier_t *t, uint64_t capacity, const char *dir);
void ckc_ssd_close(ckc_tier_t *t);
/* Removes the tier's file name; its descriptor still works. */
void ckc_ssd_unlink(ckc_tier_t *t);

/* A copy's extents, snapshotted under the lock so bytes can move unlocked. */
typedef struct ckc_src {
	ckc_tier_t *t;   /* NULL: the file at path */
	ckc_ext_t *ext;
	int n;
	const char *path;
} ckc_src_t;
int ckc_src_snapshot(const ckc_obj_t *o, int level, ckc_src_t *s);
void ckc_src_release(ckc_src_t *s);
/* Reads [off, off+len) of a snapshot into buf. Returns 0 or -errno. */
int ckc_src_read(const ckc_src_t *s, uint64_t off, void *buf, size_t len, int *fdp);
/* Copies bytes [0, size) of one bounded copy to another (both snapshots),
 * run by run; progress(done, ctx) after each chunk. Returns 0 or -errno. */
int ckc_src_copy(const ckc_src_t *from, const ckc_src_t *to, uint64_t size,
		 void (*progress)(uint64_t done, void *ctx), void *ctx);
/* Writes bytes [0, size) of src to fd; progress(done, ctx) after each chunk.
 * Returns 0 or -errno. */
int ckc_home_fill(int fd, const ckc_src_t *src, uint64_t size,
		  void (*progress)(uint64_t done, void *ctx), void *ctx);
/* Creates a temporary file beside key (same directory, so the rename that
 * publishes it is atomic): an anonymous one (O_TMPFILE) where the file
 * system makes them, else one named *tmp. *tmp is the short name it is
 * published through either way, so no checkpoint name is too long for it.
 * Returns 0 or -errno. */
int ckc_home_temp(const char *key, mode_t mode, char **tmp, int *fd);
/* Publishes a temporary file of ckc_home_temp: applies a, fsyncs (if
 * asked), names it tmp if it is anonymous, closes fd and renames tmp to key
 * (atomic); removes it on failure. With base (the record of the real path
 * when the version began; NULL: no check), a file made or changed there
 * since is kept and CKC_CHANGED returned; where there was none, an
 * anonymous file is linked to key directly. Returns 0 or -errno. */
int ckc_home_commit(char *tmp, const char *key, int fd, bool fsync_it, const ckc_attr_t *a,
		    const ckc_fid_t *base);
/* The same, but fd stays open: it then writes to the real file (and on
 * CKC_CHANGED still holds the bytes). */
int ckc_home_commit_open(char *tmp, const char *key, int fd, const ckc_attr_t *a, const ckc_fid_t *base);
/* Drops a temporary file of ckc_home_temp: closes fd (if >= 0), removes tmp. */
void ckc_home_discard(const char *tmp, int fd);
/* Applies a to the open file fd (fchmod, fchown, futimens). 0 or -errno. */
int ckc_attr_apply_fd(int fd, const ckc_attr_t *a);
/* Reads from the file at path, opening it once into *fdp. Returns bytes read or -errno. */
ssize_t ckc_home_read(const char *path, void *buf, size_t len, uint64_t off, int *fdp);
/* The same for what the page cache holds of [off, off+len) from its start
 * on, without waiting for the device. Returns the bytes read (0: none). */
size_t ckc_home_read_cached(const char *path, void *buf, size_t len, uint64_t off, int *fdp);
/* The file system of key's real path into *dev (id: what the path holds;
 * its folder is looked at when it holds nothing). Returns false if unknown. */
bool ckc_home_dev(const char *key, const ckc_fid_t *id, dev_t *dev);
/* Whether the page cache holds every page of the file at path, which is
 * size bytes long (reading it then costs what a read of memory does). */
bool ckc_home_in_memory(const char *path, uint64_t size);
/* The same for the pages of [off, off + len) of the file fd. */
bool ckc_home_range_cached(int fd, uint64_t off, uint64_t len);
/* Records in *id what the real path holds now (known = false if it could
 * not be looked at). */
void ckc_fid_take(const char *path, ckc_fid_t *id);
/* ckc_fid_take, keeping what stat said in *st (valid when id->exists). */
void ckc_fid_take_st(const char *path, ckc_fid_t *id, struct stat *st);
void ckc_fid_of(const struct stat *st, ckc_fid_t *id);
/* Whether path holds the file id describes (both absent counts). */
bool ckc_fid_same(const ckc_fid_t *id, const ckc_fid_t *now);
/* Whether publishing over path would overwrite a file that was created or
 * changed after base was recorded (a file removed since is no conflict). */
bool ckc_fid_changed(const ckc_fid_t *base, const char *path);
/* Saves bytes [0, size) of src to a new rescue file, mode 0600, in the
 * private folder under CKPTCACHE_RESCUE_DIR (rescue.<pid>.<n>-<name>; the
 * real path is added to rescue.index there); *where gets its path.
 * Returns 0 or -errno. */
int ckc_home_rescue(const char *key, const ckc_src_t *src, uint64_t size, char **where);
int ckc_fsync_dir_of(const char *path);

/* flusher.c */
/* Sets up the edge from tier level (its thread starts with its first
 * flush); stops its thread, if any (lock not held). */
void ckc_flusher_init(int level);
void ckc_flusher_stop(int level);
/* Flushes, in the calling thread, what waits on an edge whose thread could
 * not be started (lock held; dropped while bytes move). Returns whether it
 * flushed anything. */
bool ckc_flush_unthreaded(void);
/* At the end of the program (draining): the calling thread publishes one
 * small checkpoint waiting in a flush queue, beside the flush threads
 * (lock held; dropped meanwhile). Whether it did. */
bool ckc_flush_help(void);
void ckc_flush_enqueue(ckc_obj_t *o, int level);  /* lock held */
void ckc_flush_dequeue(ckc_obj_t *o);              /* lock held */
bool ckc_flush_wanted(const ckc_obj_t *o, int level);
/* Whether a publication to key is being committed now (lock held). */
bool ckc_committing(const char *key);
/* A version whose real file changed behind the cache's back: its bytes go
 * to a rescue file (the newer file is kept), it says so, and the cache
 * forgets it; an empty one still open that a hand-over publishes, nothing
 * (the file is kept). Lock held; dropped while the bytes move. */
void ckc_keep_newer(ckc_obj_t *o, const ckc_src_t *src, uint64_t size);
/* Saves size bytes of src, o's bytes its real path could not take, in a
 * rescue file and says where (lock held; dropped while the bytes move).
 * 0 (also when o has one already) or -errno. */
int ckc_rescue_save(ckc_obj_t *o, const ckc_src_t *src, uint64_t size);
int ckc_flush_home_now(ckc_obj_t *o, bool fsync_it); /* lock held; drops it while writing */
/* A hand-over's publication in place: o's real file is written where it is
 * rather than replaced by a new one (another process of the node may have
 * it open, as the writers of one shared file do: a rename would leave
 * their writes in a file no name leads to) when it is the very file o's
 * version began over and unchanged since, or when o holds no byte yet
 * (its open's truncation came before another process's open made or
 * wrote it: both write that file, as without the library). Lock held;
 * dropped while the bytes move. 0, 1 where neither holds (a publication
 * as any other then), or -errno. */
int ckc_flush_home_in_place(ckc_obj_t *o);
/* Queues again, as the program ends, the checkpoints whose publications
 * failed for want of a descriptor or of memory and were given up (lock
 * held). */
void ckc_flush_short_again(void);

/* prefetcher.c */
/* Starts the prefetch thread, once there is something for it to do: a
 * hint file to read, or a restore queue (lock held). Returns 0 or -errno. */
int ckc_prefetcher_start(void);
void ckc_prefetcher_stop(void);
/* Reads the hint file's new lines; a missing file is looked for again after
 * HINTS_POLL_NS, or now_anyway. Lock held; dropped while the file is
 * read. */
void ckc_hints_poll(bool now_anyway);
/* The same as the program opens a checkpoint for reading. */
void ckc_hints_reading(void);
/* Says how many malformed hint lines were not shown (lock not held). */
void ckc_hints_summary(void);

/* Shared by the engine's files (engine*.c), lock held unless said. */
extern ckc_mutex_t eng_life;
void eng_stats_collect(ckc_stats_t *s);
bool eng_wait_until(eng_cond_t c, uint64_t deadline_ns);
int eng_wait_ns(eng_cond_t c, uint64_t ns);
/* The CLOCK_REALTIME time ns nanoseconds from now, for a timed wait. */
void eng_abstime(uint64_t ns, struct timespec *ts);

/* Notes o, just closed or renamed, among the versions that may be owed to
 * their real paths (ckc_owes_under). Lock held. */
void eng_note_owed(const ckc_obj_t *o);
/* The program looked at o's times (stat; lock held): its next change gets
 * the fine clock where the kernel's would (eng_touch_mtime). Returns the
 * descriptor of its real file being written straight, or -1, for
 * eng_kernel_look once the lock is dropped. */
int eng_mtime_looked(ckc_obj_t *o);
void eng_kernel_look(int fd);
/* Sets o's modification time to now, as the kernel would stamp its file
 * (engine lock held). */
void eng_touch_mtime(ckc_obj_t *o);
/* Where o's last stamp (fine, taken under the lock) is still the one
 * eng_touch_mtime gave, replaces it with a fine stamp the kernel hands out
 * now (the times of /dev/shm/ckptcache-stamp-UID set and read back), so
 * that the kernel's later stamps are no older. Lock not held. */
void eng_stamp_kernel(ckc_obj_t *o, struct timespec fine);
/* Whether o, still open, was published (an fsync) with no write since:
 * the real file holds its bytes (engine lock held). */
static inline bool eng_home_snap(const ckc_obj_t *o)
{
	return o->home_snap && !o->complete && !o->retired && o->writes == o->home_writes;
}
/* Whether o's real file holds its bytes (published, or imported and never
 * rewritten): what a read of that file gets (engine lock held). */
static inline bool eng_home_holds(const ckc_obj_t *o)
{
	return !o->retired && (o->at_home || (o->from_home && !o->rescue));
}
/* I/O on o's real file without the engine lock: begin marks the file busy
 * (home_busy: publications, closes and readers of it wait), takes a
 * reference and drops the lock; end takes the lock back, clears the mark
 * and wakes the waiters, the reference still held (the caller records
 * what the I/O found, then ckc_obj_put). */
void eng_home_io_begin(ckc_obj_t *o);
void eng_home_io_end(ckc_obj_t *o);
/* Makes o's temporary file in its real path's folder, o->home_tmp and
 * o->home_fd (lock held; dropped while the file is made, o busy at home
 * meanwhile). Returns 0 or -errno. */
int eng_home_temp(ckc_obj_t *o);
/* o's unnamed file of its identity (eng_ident, ckc_handle_ident), lock
 * held: drop closes it; take hands it to a publication of o's first
 * version that will fill and name it (false: o has none it may use);
 * return gives back one a publication took and did not name (the lock
 * dropped while it is emptied), or closes it. */
void eng_id_drop(ckc_obj_t *o);
bool eng_id_take(ckc_obj_t *o, int *fd, char **tmp);
void eng_id_return(ckc_obj_t *o, int fd, char *tmp);
/* A version replaced by another before its publication (a rewrite of
 * it) gives the next its file: detach takes it from the old one (id->fd
 * -1 where it has none), attach gives it to the new one (or closes it
 * where that is NULL). Lock held. */
typedef struct eng_id {
	int fd;
	char *tmp;
	dev_t dev;
	ino_t ino;
} eng_id_t;
void eng_id_detach(ckc_obj_t *from, eng_id_t *id);
void eng_id_attach(ckc_obj_t *to, eng_id_t *id);
/* The publication that took o's file ended without giving it back. */
void eng_id_lent_end(ckc_obj_t *o);
/* Drops every such note (the engine's stop). Lock held. */
void eng_owed_clear(void);

/* Wakes the waiters of condition c (lock held). */
static inline void eng_signal(eng_cond_t c)
{
	pthread_cond_broadcast(&ckc_eng.cv[c]);
}

/* Waits on condition c (lock held, dropped meanwhile). */
static inline void eng_wait(eng_cond_t c)
{
	ckc_cond_wait(&ckc_eng.cv[c], &ckc_eng.lock);
}

/* Wakes every waiter of the engine's conditions (a stop, a reset, the
 * exit's drain). Lock held. */
static inline void eng_wake_all(void)
{
	for (int c = 0; c < EC_N; c++)
		eng_signal((eng_cond_t)c);
}

/* An object's works that a caller may wait out (eng_wait_idle), each with
 * its flag and the condition its end broadcasts. */
#define EB_MOVE 1u  /* migrating: EC_MOVED */
#define EB_HOME 2u  /* home_busy: EC_HOME */
#define EB_HAND 4u  /* handing: EC_HANDED */
#define EB_FLUSH 8u /* flushing: EC_FLUSHED */
#define EB_WRITE 16u /* writing > 0: EC_WRITES */

/* Waits until none of o's works in `what` (EB_*) runs. Lock held. */
static inline void eng_wait_idle(const ckc_obj_t *o, unsigned what)
{
	for (;;) {
		if ((what & EB_MOVE) && o->migrating)
			eng_wait(EC_MOVED);
		else if ((what & EB_HOME) && o->home_busy)
			eng_wait(EC_HOME);
		else if ((what & EB_HAND) && o->handing)
			eng_wait(EC_HANDED);
		else if ((what & EB_FLUSH) && o->flushing)
			eng_wait(EC_FLUSHED);
		else if ((what & EB_WRITE) && o->writing > 0)
			eng_wait(EC_WRITES);
		else
			return;
	}
}

/* The ends of those works (lock held): each clears its flag and wakes its
 * condition's waiters. A move's end may also leave room behind. */
static inline void eng_move_end(ckc_obj_t *o)
{
	o->migrating = false;
	eng_signal(EC_MOVED);
	eng_signal(EC_ROOM);
}

/* Whether o is written through to its file at home and open there (the
 * temporary file, or its real file once named). */
static inline bool eng_through_open(const ckc_obj_t *o)
{
	return o->wlevel == ckc_eng.ntier - 1 && o->home_fd >= 0;
}

static inline void eng_home_end(ckc_obj_t *o)
{
	o->home_busy = false;
	eng_signal(EC_HOME);
}

static inline void eng_hand_end(ckc_obj_t *o)
{
	o->handing = false;
	eng_signal(EC_HANDED);
}

static inline void eng_flush_end(ckc_obj_t *o)
{
	o->flushing = false;
	eng_signal(EC_FLUSHED);
	eng_signal(EC_ROOM);
}

static inline void eng_write_end(ckc_obj_t *o)
{
	if (--o->writing == 0)
		eng_signal(EC_WRITES);
}

int eng_map_insert(ckc_obj_t *o);
void eng_map_remove(ckc_obj_t *o);
/* Sets whether o's real path holds its bytes, counted for
 * ckc_holds_unpublished. Lock held. */
void eng_set_home(ckc_obj_t *o, bool home);
/* Sets the file o replaces, counted for ckc_holds_replacements. Lock held. */
void eng_set_base(ckc_obj_t *o, const ckc_fid_t *base);
ckc_obj_t *eng_obj_alloc(const char *key);
ckc_obj_t *eng_obj_new(const char *key);
int eng_canon(const char *path, char *out);
int eng_lookup_locked(const char *path, char *key, ckc_obj_t **op);
int eng_open_locked(const char *path, char *key);
ckc_handle_t *eng_handle_new(ckc_obj_t *o, bool writer);
/* A writing handle of o is gone: o leaves ckc_eng.writing with its last
 * one (lock held). */
void eng_writer_leave(ckc_obj_t *o);
int eng_migrate_to(ckc_obj_t *o, bool home_only);
int eng_migrate_down(ckc_obj_t *o);
int eng_write_room(ckc_obj_t *o, uint64_t end);
int eng_zero_fill(ckc_obj_t *o, uint64_t from, uint64_t to);
ssize_t eng_pwrite_src(ckc_handle_t *h, const void *buf, uint64_t dsrc, size_t len, uint64_t off);
int eng_close_home_writer(ckc_obj_t *o);
int eng_keep_open_commit(ckc_obj_t *o, const ckc_fid_t *base);
/* A descriptor for the library as the program ends with its table full
 * (ckc_spare_fd_hook: the soft limit raised, or the library's own spare
 * number given up). */
bool eng_spare_fd(void);
/* Clears o's set-user-ID bit, and its set-group-ID bit where its group
 * may run it, as the kernel does on a chown, and on a write by a process
 * without privilege (lock held). */
void eng_clear_setid(ckc_obj_t *o);
/* ckc_handoff of o (lock held; dropped while bytes move). */
int eng_handoff_locked(ckc_obj_t *o);
/* The opens of key that follow go to its real file for a while (lock
 * held): a descriptor of this process is about to write it there
 * (engine_write.c). */
void eng_straight_note(const char *key);
void eng_close_writer_locked(ckc_obj_t *o);
void eng_aside_note(ckc_obj_t *o);

/* The node-local record of what stepping aside learnt (aside_store.c):
 * /dev/shm/ckptcache-aside-UID, one record per CKPTCACHE_PATHS value and
 * program. */
#define CKC_ASIDE_STORE_DIR "/dev/shm"
#define CKC_ASIDE_STORE_PREFIX "ckptcache-aside-"
/* where the record lives: CKC_ASIDE_STORE_DIR (the unit tests point
 * their processes at a folder of their own) */
extern const char *ckc_aside_store_dir;
int ckc_aside_store_path(char *out, size_t len);
/* Starts a from this node's last record for paths, if a recent one, and
 * small (if not NULL) from the small checkpoints' speeds it holds. */
void ckc_aside_load(aside_t *a, aside_t *small, const char *paths);
/* Records what a learnt (both sides measured), at exit. */
void ckc_aside_save(const aside_t *a, const aside_t *small, const char *paths);
ckc_obj_t *eng_current_locked(const char *key);
/* eng_current_locked, telling in *what what its look at the real file
 * found (CKC_SEEN_): a regular file (what stat said is in *seen), no file,
 * or nothing to keep (no look, or the version was not current). */
ckc_obj_t *eng_current_seen_locked(const char *key, struct stat *seen, int *what);
void eng_range_add(ckc_handle_t *h, uint64_t a, uint64_t b);
bool eng_prefetch_wait(ckc_handle_t *h, uint64_t *deadline);
/* The access and modification times of version o, as stat reports them
 * and its publication gives them to the real file: those the program set,
 * else its last write's for both. Lock held. */
void eng_version_times(const ckc_obj_t *o, struct timespec t[2]);
void eng_stat_fill(const ckc_obj_t *o, ckc_stat_t *st);
void eng_ref_detach(ckc_obj_t *o);

/* What ckc_open_write / ckc_open_read hand out. */
struct ckc_handle {
	ckc_obj_t *o;
	bool writer;
	bool waited;       /* this reader already counted a wait */
	bool counted;      /* its checkpoint was counted as read from a tier */
	int home_fd;       /* the real file, opened by the first read from it */
	/* what the open's look at the real file found (CKC_SEEN_), and
	 * whether the version was published then */
	int seen_what;
	bool seen_at_home;
	struct stat seen;
	int nrange, caprange;
	uint64_t (*range)[2]; /* bytes read so far: sorted, disjoint [a, b) */
	/* small reads of a copy in device memory come from one host copy of a
	 * window of it (ckc_gpu_window), not a device transfer each */
	char *win;
	uint64_t win_off, win_len;
};

#endif
