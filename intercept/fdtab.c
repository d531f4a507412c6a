/* The table of virtual descriptors: fd number -> the tagged file behind it.
 * Indexed directly so the fast path of every untagged read or write is one
 * load; sized from RLIMIT_NOFILE (at most 2^20 entries). Also the switch of
 * a virtual descriptor to the real file once its version was handed over
 * (fork, exec, a second open, mmap). */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define HAVE_SINGLE_THREADED 1
#endif
#endif

#include "intercept.h"
#include "sigdefer.h"
#include "io.h"
#include "path.h"
#include "log.h"

CKC_HOT_DATA _Atomic(ckc_vfd_t *) *ckc_vfd_tab;
CKC_HOT_DATA size_t ckc_vfd_cap;
CKC_HOT_DATA atomic_bool ckc_vfd_ever;
atomic_size_t ckc_vfd_hi;

/* Serialises install and take, so dup2 onto a tagged number is atomic. */
static ckc_mutex_t fdtab_lock = CKC_MUTEX_INIT(FDTAB);
CKC_LOCKS_AT_START(fdtab_lock, ckc_locks_add, &fdtab_lock)

/* Slots the descriptor table is known to have (it never shrinks). */
static atomic_long fd_slots;
/* Threads the process had at that read, and when it was made. */
static atomic_long fd_threads;
static _Atomic uint64_t fd_table_ns;
#define FD_TABLE_NS 100000000ull

ssize_t ckc_px_read_file(const char *path, char *buf, size_t size)
{
	ckc_fd_quiet_begin();
	int fd = REAL(openat)(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	ssize_t n = -1;
	if (fd >= 0) {
		n = REAL(read)(fd, buf, size - 1);
		REAL(close)(fd);
	}
	int e = errno;
	ckc_fd_quiet_end();
	errno = e;
	if (fd < 0)
		return -1;
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

long ckc_px_threads(pid_t pid)
{
	char path[64], buf[4096];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	long n = -1;
	const char *t = ckc_px_read_file(path, buf, sizeof(buf)) > 0 ? strstr(buf, "\nThreads:") : NULL;
	if (!t || sscanf(t, "\nThreads: %ld", &n) != 1)
		return -1;
	return n;
}

atomic_ulong ckc_fd_table_reads;

/* The process's descriptor table now: its slots and its threads (from
 * /proc/self/status). Returns false if unknown. */
static bool fd_table(long *slots, long *threads)
{
	char buf[4096];
	atomic_fetch_add_explicit(&ckc_fd_table_reads, 1, memory_order_relaxed);
	if (ckc_px_read_file("/proc/self/status", buf, sizeof(buf)) <= 0)
		return false;
	const char *fs = strstr(buf, "\nFDSize:"), *th = strstr(buf, "\nThreads:");
	return fs && th && sscanf(fs, "\nFDSize: %ld", slots) == 1 &&
	       sscanf(th, "\nThreads: %ld", threads) == 1;
}

/* Held for reading while the library opens a file of its own and moves it
 * above the program's numbers (ckc_fd_own_begin); fork takes it for writing
 * (src/lockrank.h). */
static ckc_rwlock_t own_open_rw = CKC_RWLOCK_INIT(FD_OPEN);
CKC_LOCKS_AT_START(own_open, ckc_locks_add_rw, &own_open_rw)

ckc_fd_taking_t ckc_fd_taking;

/* The bounds of the waits (intercept.h): the program's for a file of the
 * library's (an open and a move take microseconds on a file system that
 * answers), the library's for the program's calls under way (the kernel
 * gives a call its number as it starts: one under way longer, an open of a
 * FIFO that waits for a writer, a blocked accept, has it). */
#define FD_NUM_PROG_WAIT_NS 100000000ull
#define FD_NUM_OWN_WAIT_NS 500000ull

__thread int ckc_tl_fd_prog;

/* The library's sections of this thread (ckc_fd_quiet_begin), and the
 * cancellation state they set aside. */
static __thread unsigned fd_own_depth;
static __thread int fd_own_cancel;

/* A thread that ends inside calls counted (cancelled in a blocked open, a
 * cancellation point) gives its counts back. */
static pthread_key_t fd_key;
static pthread_once_t fd_key_once = PTHREAD_ONCE_INIT;

static void fd_thread_end(void *unused)
{
	(void)unused;
	if (ckc_tl_fd_prog > 1)
		atomic_fetch_sub(&ckc_fd_taking.prog, ckc_tl_fd_prog - 1);
	ckc_tl_fd_prog = 0;
	if (fd_own_depth)
		atomic_fetch_sub(&ckc_fd_taking.own, (int)fd_own_depth);
	fd_own_depth = 0;
}

static void fd_key_make(void)
{
	(void)pthread_key_create(&fd_key, fd_thread_end);
}

void ckc_fd_num_first(void)
{
	int saved = errno;
	if (ckc_tl_fd_prog == 0) {
		/* the thread's first: its end is watched (once a thread; not
		 * in a signal handler, where the key's functions may not run) */
		if (ckc_sig_in_handler())
			goto out;
		pthread_once(&fd_key_once, fd_key_make);
		(void)pthread_setspecific(fd_key, (void *)1);
		ckc_tl_fd_prog = 1;
	} else if (ckc_tl_fd_prog > 1 && !ckc_sig_in_handler()) {
		/* a call left without its end (a signal handler's longjmp out
		 * of a blocked open): not a call under way any more */
		atomic_fetch_sub(&ckc_fd_taking.prog, ckc_tl_fd_prog - 1);
		ckc_tl_fd_prog = 1;
	}
out:
	errno = saved;
}

/* (ckc_fd_taking.own_seq and .gave_up_seq: a file system that holds the
 * library's open for long, a stalled metadata server, makes the program's
 * first call wait its bound, not each of those that follow) */

void ckc_fd_num_wait(void)
{
	if (fd_own_depth)
		return;
	uint64_t seq = atomic_load(&ckc_fd_taking.own_seq);
	if (seq == atomic_load(&ckc_fd_taking.gave_up_seq))
		return;
	int saved = errno;
	uint64_t deadline = ckc_now_ns() + FD_NUM_PROG_WAIT_NS;
	while (atomic_load(&ckc_fd_taking.own) != 0) {
		atomic_fetch_sub(&ckc_fd_taking.prog, 1);
		while (atomic_load(&ckc_fd_taking.own) != 0 && ckc_now_ns() < deadline)
			sched_yield();
		atomic_fetch_add(&ckc_fd_taking.prog, 1);
		if (ckc_now_ns() >= deadline) {
			atomic_store(&ckc_fd_taking.gave_up_seq, atomic_load(&ckc_fd_taking.own_seq));
			break;
		}
	}
	errno = saved;
}

/* (a call of the program's that a library section makes, a signal
 * handler's or a wrapper the library calls, does not wait for it: the
 * thread's depth says so; no library section is a cancellation point, as
 * none is in the program's own call without the library, a flock's look
 * at its lock file) */
void ckc_fd_quiet_begin(void)
{
	int saved = errno;
	if (fd_own_depth++ == 0 && !ckc_sig_in_handler())
		(void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &fd_own_cancel);
	atomic_fetch_add(&ckc_fd_taking.own_seq, 1);
	atomic_fetch_add(&ckc_fd_taking.own, 1);
	/* the program's calls under way, this thread's own aside */
	int mine = ckc_tl_fd_prog > 1 ? ckc_tl_fd_prog - 1 : 0;
	if (atomic_load(&ckc_fd_taking.prog) > mine) {
		uint64_t deadline = ckc_now_ns() + FD_NUM_OWN_WAIT_NS;
		while (atomic_load(&ckc_fd_taking.prog) > mine && ckc_now_ns() < deadline) {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
	}
	errno = saved;
}

void ckc_fd_quiet_end(void)
{
	atomic_fetch_sub(&ckc_fd_taking.own, 1);
	if (--fd_own_depth == 0 && !ckc_sig_in_handler()) {
		int ignored;
		(void)pthread_setcancelstate(fd_own_cancel, &ignored);
	}
}

int ckc_fd_quiet_made(int fd, int floor)
{
	int e = errno;
	if (fd >= 0)
		fd = ckc_fd_above(fd, floor);
	ckc_fd_quiet_end();
	errno = e;
	return fd;
}

int ckc_fd_quiet_made_mine(int fd, int floor)
{
	int e = errno;
	if (fd >= 0) {
		fd = ckc_fd_above(fd, floor);
		ckc_fd_mine_set(fd, true);
	}
	ckc_fd_quiet_end();
	errno = e;
	return fd;
}

void ckc_fd_own_begin(void)
{
	ckc_rw_rdlock(&own_open_rw);
	ckc_fd_quiet_begin();
}

void ckc_fd_own_end(void)
{
	ckc_fd_quiet_end();
	ckc_rw_unlock(&own_open_rw);
}

/* Whether the process never had a second thread (the C library's own
 * mark): its table grows without waiting, so its size need not be read. */
static inline bool fd_never_threaded(void)
{
#ifdef HAVE_SINGLE_THREADED
	return __libc_single_threaded;
#else
	return false;
#endif
}

int ckc_fd_above(int fd, int floor)
{
	long slots = atomic_load(&fd_slots), threads = atomic_load(&fd_threads);

	if (fd >= floor)
		return fd;
	/* In a process with more than one thread, growing the table makes
	 * the kernel wait for an RCU grace period (10 to 20 ms here): there
	 * the number is taken near the top of the table it has now. The
	 * table's size is read again at most every FD_TABLE_NS: the engine
	 * opens a file for each checkpoint it publishes, and reading
	 * /proc/self/status for each cost 3,000 small files 60 ms. */
	if (floor >= slots && !fd_never_threaded()) {
		uint64_t now = ckc_now_ns(), last = atomic_load(&fd_table_ns);
		/* one thread then: maybe more now (no wait for those) */
		if ((threads <= 1 || now - last >= FD_TABLE_NS) && fd_table(&slots, &threads)) {
			atomic_store(&fd_slots, slots);
			atomic_store(&fd_threads, threads);
			atomic_store(&fd_table_ns, now);
		}
		if (threads > 1 && floor >= slots)
			floor = (int)(slots - slots / 4);
	}
	if (fd >= floor)
		return fd;
	int saved = errno, high = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, floor);
	if (high >= 0) {
		REAL(close)(fd);
		fd = high;
		if (high >= atomic_load(&fd_slots))
			atomic_store(&fd_slots, high + 1);
	}
	errno = saved;
	return fd;
}

/* The library's own files by number (the engine's, opened through
 * icpt_open, init.c; the lock files and the node's socket): a program that
 * closes numbers it does not know (a loop of close from 3 up, closefrom(3),
 * Python's os.closerange) leaves them open, as they are not the program's
 * (posix.c). One bit a number, for the numbers of the table. */
CKC_HOT_DATA _Atomic uint64_t *ckc_fd_mine_bits;
#define fd_mine ckc_fd_mine_bits

void ckc_fd_mine_set(int fd, bool mine)
{
	if (!fd_mine || fd < 0 || (size_t)fd >= ckc_vfd_cap)
		return;
	uint64_t bit = 1ull << (fd % 64);
	if (mine)
		atomic_fetch_or(&fd_mine[fd / 64], bit);
	else
		atomic_fetch_and(&fd_mine[fd / 64], ~bit);
}

int ckc_fd_mine_close(int fd)
{
	ckc_fd_mine_set(fd, false);
	return REAL(close)(fd);
}

int ckc_fd_mine_next(unsigned from, unsigned last)
{
	if (!fd_mine)
		return -1;
	for (size_t fd = from; fd <= last && fd < ckc_vfd_cap;) {
		uint64_t w = atomic_load_explicit(&fd_mine[fd / 64], memory_order_relaxed) >> (fd % 64);
		if (w) {
			size_t at = fd + (size_t)__builtin_ctzll(w);
			return at <= last && at < ckc_vfd_cap ? (int)at : -1;
		}
		fd = (fd / 64 + 1) * 64;
	}
	return -1;
}

CKC_WARM_PATH ssize_t ckc_fd_name(int fd, char *out, size_t len)
{
	static const char pre[] = "/proc/thread-self/fd/";
	char link[64];
	if (fd < 0 || len <= 1)
		return -1;
	memcpy(link, pre, sizeof(pre) - 1);
	link[sizeof(pre) - 1 + ckc_path_decimal(link + sizeof(pre) - 1, (unsigned long long)fd)] = '\0';
	/* a tagged descriptor is named by the library's readlink; any other
	 * (a folder's, where a tool writes a tree at it) by the kernel */
	ssize_t n = ckc_fd_maybe_tagged(fd) || !REAL(readlinkat) ? readlink(link, out, len - 1)
								   : REAL(readlinkat)(AT_FDCWD, link, out, len - 1);
	if (n <= 0 || out[0] != '/')
		return -1;
	out[n] = '\0';
	return n;
}

CKC_HOT_DATA _Atomic uint8_t *ckc_fdtab_dirv;

static void *ckc_zeroed(size_t bytes)
{
	/* pages of their own, untouched (and unbacked) until used: calloc
	 * clears a table it carves from the heap, and a tool started with
	 * the library paid 25 page faults for tables it never used */
	void *p = REAL(mmap)(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

CKC_START_PATH int ckc_fdtab_init(void)
{
	struct rlimit rl;
	size_t cap = 1024;

	if (ckc_vfd_tab)
		return 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rlim_t want = rl.rlim_max == RLIM_INFINITY ? rl.rlim_cur : rl.rlim_max;
		if (want > cap)
			cap = want;
	}
	if (cap > (1u << 20))
		cap = 1u << 20;
	/* the tables by number, and the folder answers' (tag.c), in one
	 * mapping: one system call and one mapping at start, each table on
	 * pages of its own */
	const size_t page = 4096;
	size_t sz[5] = { cap * sizeof(*ckc_vfd_tab), cap * sizeof(*ckc_small_t0), cap * sizeof(*ckc_vfd_seen),
			 (cap + 63) / 64 * sizeof(*fd_mine), cap * sizeof(*ckc_tag_dirv) };
	size_t total = 0;
	for (int i = 0; i < 5; i++)
		total += (sz[i] + page - 1) / page * page;
	char *m = ckc_zeroed(total);
	if (!m)
		return -ENOMEM;
	void *part[5];
	for (int i = 0; i < 5; i++) {
		part[i] = m;
		m += (sz[i] + page - 1) / page * page;
	}
	ckc_small_t0 = part[1];
	ckc_vfd_seen = part[2];
	fd_mine = part[3];
	ckc_fdtab_dirv = part[4];
	ckc_vfd_tab = part[0];
	ckc_vfd_cap = cap;
	return 0;
}

/* Tagged descriptors open for writing (posix.c: table_crowded). */
atomic_int ckc_vfd_writers;

ckc_vfd_t *ckc_vfd_new(ckc_handle_t *h, int flags, const char *path)
{
	size_t n = strlen(path) + 1;
	ckc_vfd_t *v = malloc(sizeof(*v) + n);
	if (!v)
		return NULL;
	ckc_mutex_init(&v->lock, CKC_RANK_FD);
	atomic_init(&v->refs, 0);
	v->h = h;
	v->pos = 0;
	atomic_init(&v->room_next, 0); /* looked at by the first write */
	v->flags = flags;
	if ((flags & O_ACCMODE) != O_RDONLY)
		atomic_fetch_add_explicit(&ckc_vfd_writers, 1, memory_order_relaxed);
	v->switched = false;
	atomic_init(&v->lock_fd, -1);
	atomic_init(&v->lock_file_fd, -1);
	v->lock_real = false;
	v->lock_flock = 0;
	v->small_t0 = 0;
	static atomic_uint_fast64_t ids;
	v->id = atomic_fetch_add(&ids, 1) + 1;
	/* the open's own look at the real file answers the first fstat */
	int seen = ckc_handle_seen(h, &v->stat_real, &v->stat_at_home);
	v->stat_known = seen == CKC_SEEN_FILE;
	v->stat_absent = seen == CKC_SEEN_ABSENT;
	atomic_init(&v->stat_snap, NULL);
	v->stat_snaps = NULL;
	v->stat_first_used = false;
	ckc_vfd_stat_keep(v);
	v->id_known = false;
	memcpy(v->path, path, n);
	return v;
}

int ckc_vfd_install(int fd, ckc_vfd_t *v)
{
	if (fd < 0 || (size_t)fd >= ckc_vfd_cap)
		return -EMFILE;
	if (!atomic_load_explicit(&ckc_vfd_ever, memory_order_relaxed))
		atomic_store(&ckc_vfd_ever, true);
	atomic_fetch_add(&v->refs, 1);
	ckc_mutex_lock(&fdtab_lock);
	if (ckc_vfd_seen)
		atomic_store_explicit(&ckc_vfd_seen[fd], atomic_load(&ckc_vfd_epoch), memory_order_relaxed);
	ckc_vfd_t *old = atomic_exchange(&ckc_vfd_tab[fd], v);
	if ((size_t)fd > atomic_load(&ckc_vfd_hi))
		atomic_store(&ckc_vfd_hi, (size_t)fd);
	ckc_mutex_unlock(&fdtab_lock);
	if (old)
		ckc_vfd_put(old); /* the number was reused under us (dup2) */
	return 0;
}

atomic_uint ckc_vfd_epoch = 1;
CKC_HOT_DATA atomic_uint *ckc_vfd_seen;

void ckc_vfd_epoch_next(void)
{
	atomic_fetch_add_explicit(&ckc_vfd_epoch, 1, memory_order_release);
}

/* fd no longer holds v's placeholder, and the library did not see it go:
 * v is forgotten there, once, and the other numbers are asked again. */
static void vfd_drop_unseen(int fd, ckc_vfd_t *v)
{
	ckc_mutex_lock(&fdtab_lock);
	bool mine = atomic_compare_exchange_strong(&ckc_vfd_tab[fd], &v, NULL);
	ckc_mutex_unlock(&fdtab_lock);
	if (mine) {
		ckc_vfd_epoch_next();
		ckc_vfd_put(v);
	}
}

static uint64_t vfork_snap_id(int fd);
static bool ph_inode_is(const struct stat *st);

/* In a vfork child, before its call on fd, whose number holds a virtual
 * descriptor of the parent: where the child's fd is still the parent's
 * placeholder (opened as a path only, ph_inode_is), the parent gives the
 * real file's descriptor for it (ckc_node_claim_fd). The parent left
 * close-on-exec checkpoints cached (the child's exec closes them); a child
 * that keeps one (dup2 onto its standard output, a cleared close-on-exec
 * flag) or uses it takes this way. */
static void vfork_claim(int fd)
{
	static atomic_bool said;
	struct stat st;
	uint64_t id = vfork_snap_id(fd);
	if (!id)
		return;
	int saved = errno;
	int fl = REAL(fcntl)(fd, F_GETFL);
	if (fl < 0 || !(fl & O_PATH) || REAL(fstat)(fd, &st) != 0 || !ph_inode_is(&st)) {
		errno = saved;
		return;
	}
	int rc = ckc_node_claim_fd(fd, id);
	if (rc && !atomic_exchange(&said, true))
		ckc_error("a vfork child uses descriptor %d, a checkpoint its parent holds, and the parent "
			  "could not make it a real file's (%s): it fails there with EBADF", fd, strerror(-rc));
	errno = saved;
}

ckc_vfd_t *ckc_vfd_check(int fd, ckc_vfd_t *v)
{
	int (*rf)(int, int, ...) = REAL(fcntl);
	/* a vfork child has its own numbers but the parent's table: a number
	 * that still holds the parent's placeholder is claimed (the parent
	 * makes it a descriptor of the real file and the child takes a copy),
	 * and every call of the child goes to the kernel */
	if (ckc_in_vfork_child()) {
		vfork_claim(fd);
		return NULL;
	}
	unsigned epoch = atomic_load_explicit(&ckc_vfd_epoch, memory_order_acquire);
	int fl = rf ? rf(fd, F_GETFL) : O_PATH;

	if (fl >= 0 && (fl & O_PATH)) {
		if (ckc_vfd_seen)
			atomic_store_explicit(&ckc_vfd_seen[fd], epoch, memory_order_relaxed);
		return v;
	}
	vfd_drop_unseen(fd, v);
	return NULL;
}

void ckc_vfd_stale(int fd)
{
	/* a vfork child's numbers are its own, the table its parent's */
	ckc_vfd_t *v = ckc_in_vfork_child() ? NULL : atomic_load(&ckc_vfd_tab[fd]);
	if (v)
		vfd_drop_unseen(fd, v);
}

ckc_vfd_t *ckc_vfd_take(int fd)
{
	if (fd < 0 || (size_t)fd >= ckc_vfd_cap)
		return NULL;
	ckc_mutex_lock(&fdtab_lock);
	ckc_vfd_t *v = atomic_exchange(&ckc_vfd_tab[fd], NULL);
	ckc_mutex_unlock(&fdtab_lock);
	return v;
}

int ckc_vfd_put(ckc_vfd_t *v)
{
	int rc = 0;
	if (atomic_fetch_sub(&v->refs, 1) != 1)
		return 0;
	/* in a forked child, or once the engine stopped, the handle belongs
	 * to a cache that is not running here: only the descriptor goes */
	if (atomic_load(&ckc_icpt_on)) {
		ckc_enter();
		rc = ckc_close(v->h);
		if (v->small_t0 && !rc)
			ckc_small_note(CKC_ASIDE_CACHE, ckc_now_ns() - v->small_t0);
		ckc_leave();
	}
	ckc_lock_release(v);
	ckc_mutex_destroy(&v->lock);
	if ((v->flags & O_ACCMODE) != O_RDONLY)
		atomic_fetch_sub_explicit(&ckc_vfd_writers, 1, memory_order_relaxed);
	for (ckc_vfd_stat_t *k = v->stat_snaps, *n; k; k = n) {
		n = k->next;
		free(k);
	}
	free(v);
	return rc;
}

void ckc_vfd_stat_keep(ckc_vfd_t *v)
{
	ckc_vfd_stat_t *k = NULL;
	if (v->stat_known) {
		/* (the first in the descriptor itself, the next ones apart) */
		if (!v->stat_first_used) {
			v->stat_first_used = true;
			k = &v->stat_first;
		} else if ((k = malloc(sizeof(*k)))) {
			k->next = v->stat_snaps;
			v->stat_snaps = k;
		}
	}
	if (k) {
		k->at_home = v->stat_at_home;
		k->st = v->stat_real;
	}
	atomic_store_explicit(&v->stat_snap, k, memory_order_release);
}

/* A descriptor's lock is held across a whole read or write of the cache,
 * so fork does not wait for them: the child makes them anew. It cannot use
 * what they guard (its calls on a tagged descriptor fail with EBADF), but
 * it takes them first. The table itself is among the locks every fork
 * takes (lockrank.h). */
CKC_START_PATH void ckc_fdtab_atfork_child(void)
{
	/* the other threads' calls under way (intercept.h) are not the
	 * child's (and only a change is written: the page stays shared) */
	int mine = ckc_tl_fd_prog > 1 ? ckc_tl_fd_prog - 1 : 0;
	if (atomic_load(&ckc_fd_taking.prog) != mine)
		atomic_store(&ckc_fd_taking.prog, mine);
	if (atomic_load(&ckc_fd_taking.own) != (int)fd_own_depth)
		atomic_store(&ckc_fd_taking.own, (int)fd_own_depth);
	/* (a shell's child that runs a tool writes none of the table's pages,
	 * each of which it would copy first) */
	if (!atomic_load(&ckc_vfd_ever))
		return;
	size_t hi = atomic_load(&ckc_vfd_hi);
	ckc_vfd_epoch_next();
	for (size_t fd = 0; ckc_vfd_tab && fd <= hi && fd < ckc_vfd_cap; fd++) {
		ckc_vfd_t *v = atomic_load(&ckc_vfd_tab[fd]);
		if (v)
			ckc_mutex_init(&v->lock, CKC_RANK_FD);
	}
}

/* Placeholders are copies of one descriptor kept above the program's
 * numbers (ph_inode_open): a copy and its close cost a quarter of an open
 * and close (0.46 against 1.8 us here), which a script reading many small
 * checkpoints pays for each. -1: none open. */
static atomic_int ph_base = -1;
#define PH_BASE_FLOOR 512

/* A descriptor, opened as a path only (O_PATH, with oflags' O_CLOEXEC),
 * of an inode the kernel can do nothing with on the program's behalf: a
 * UNIX socket's, made with mknod (no socket is bound to it) in /dev/shm
 * or /tmp, its name removed at once. A path through its number
 * (/dev/fd/N/name, /proc/self/fd/N/) fails with ENOTDIR and an open of
 * /proc/self/fd/N with ENXIO or ENOTDIR: as for the file the program
 * opened, they fail or reach that file, never another one (through a
 * descriptor of "/" they reached the whole tree: a file was created at
 * the root). "/" is the last resort, where no such inode can be made.
 * 17 us against 3 for "/", once per process. -errno. */
static int ph_inode_open(int oflags)
{
	static const char *const dirs[] = { "/dev/shm", "/tmp" };
	static atomic_uint made;
	int saved = errno, cloexec = oflags & O_CLOEXEC;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (size_t d = 0, tries = 0; d < sizeof(dirs) / sizeof(dirs[0]) && tries < 8; tries++) {
		/* (no snprintf: a signal handler's open or a forked child's may
		 * make it) */
		char name[80];
		size_t n = strlen(dirs[d]);
		memcpy(name, dirs[d], n);
		memcpy(name + n, "/ckptcache-ph.", 14);
		n += 14;
		n += ckc_path_decimal(name + n, (unsigned long long)getpid());
		name[n++] = '.';
		n += ckc_path_decimal(name + n, (unsigned long long)now.tv_nsec);
		name[n++] = '.';
		n += ckc_path_decimal(name + n, atomic_fetch_add(&made, 1));
		name[n] = '\0';
		/* (a name taken, by anything: another) */
		if (ckc_syscall6(SYS_mknodat, AT_FDCWD, (long)name, S_IFSOCK | 0600, 0, 0, 0) != 0) {
			d += errno != EEXIST;
			continue;
		}
		int fd = (int)ckc_syscall6(SYS_openat, AT_FDCWD, (long)name, O_PATH | O_NOFOLLOW | cloexec, 0, 0, 0);
		(void)ckc_syscall6(SYS_unlinkat, AT_FDCWD, (long)name, 0, 0, 0, 0);
		if (fd >= 0) {
			errno = saved;
			return fd;
		}
		d++;
	}
	int (*ropen)(const char *, int, ...) = REAL(open);
	int fd = ropen ? ropen("/", O_PATH | O_DIRECTORY | cloexec) : -1;
	fd = fd < 0 ? -(ropen ? errno : ENOSYS) : fd;
	errno = saved;
	return fd;
}

/* Whether st (of a descriptor opened as a path only) is a placeholder's
 * inode: ph_inode_open's socket, or "/". */
static bool ph_inode_is(const struct stat *st)
{
	struct stat root;
	if (S_ISSOCK(st->st_mode))
		return st->st_nlink == 0;
	return S_ISDIR(st->st_mode) && REAL(stat)("/", &root) == 0 && st->st_dev == root.st_dev &&
	       st->st_ino == root.st_ino;
}

/* The base at number b is forgotten, not closed: the number is the
 * program's now. */
static void ph_forget(int b)
{
	atomic_compare_exchange_strong(&ph_base, &b, -1);
}

/* ---- small checkpoints written straight, timed (ckc_small_opened) ---- */

CKC_HOT_DATA _Atomic uint64_t *ckc_small_t0;
/* One past the highest number whose slot was ever set (0: none was):
 * the searches of the slots look no further, and a close of a higher
 * number (each of a walker's) reads it instead of the table's page. */
CKC_HOT_DATA atomic_uint ckc_small_end;

static void small_reach(int fd)
{
	unsigned end = atomic_load(&ckc_small_end);
	while ((unsigned)fd >= end && !atomic_compare_exchange_weak(&ckc_small_end, &end, (unsigned)fd + 1))
		;
}

CKC_HOT_DATA atomic_uint ckc_passed_n;

/* Whether slot value s marks a descriptor passed for reading. */
static bool slot_passed(uint64_t s)
{
	return (s & CKC_SMALL_PASSED) && s != CKC_SMALL_BASE;
}

/* Puts s (a start, or a mark) in fd's slot, a number the program has just
 * been given: what the slot held goes (the base's number, closed by a way
 * the library does not see; a mark), and a mark is counted. Not in a vfork
 * child, whose numbers are its own while the slots are the parent's. */
CKC_TAGGED_PATH static void slot_put(int fd, uint64_t s)
{
	if (fd < 0 || (size_t)fd >= ckc_vfd_cap || !ckc_small_t0 || ckc_in_vfork_child())
		return;
	small_reach(fd);
	uint64_t old = atomic_exchange(&ckc_small_t0[fd], s);
	if (old == CKC_SMALL_BASE)
		ph_forget(fd);
	if (slot_passed(old) != slot_passed(s))
		atomic_fetch_add(&ckc_passed_n, slot_passed(s) ? 1u : (unsigned)-1);
}

CKC_TAGGED_PATH void ckc_small_opened(int fd, uint64_t t0)
{
	if (t0)
		slot_put(fd, t0);
}

static uint64_t passed_hash(const char *canon)
{
	return CKC_SMALL_PASSED | (ckc_path_hash(canon) >> 1);
}

CKC_TAGGED_PATH void ckc_passed_open(int fd, const char *canon)
{
	slot_put(fd, passed_hash(canon));
}

CKC_TAGGED_PATH void ckc_passed_gone(int fd, uint64_t mark)
{
	if (ckc_in_vfork_child())
		atomic_store(&ckc_small_t0[fd], mark);
	else
		atomic_fetch_sub(&ckc_passed_n, 1);
}

CKC_WARM_PATH void ckc_passed_dup(int oldfd, int newfd)
{
	if (oldfd < 0 || (size_t)oldfd >= ckc_vfd_cap || !ckc_small_t0 ||
	    !atomic_load_explicit(&ckc_passed_n, memory_order_relaxed))
		return;
	uint64_t m = atomic_load(&ckc_small_t0[oldfd]);
	if (slot_passed(m))
		slot_put(newfd, m);
}

/* ---- mappings of tagged files ---------------------------------------
 * A mapping shows its file as a descriptor does: a rewrite of a path this
 * process has mapped goes to the real file in place (truncated and written
 * there, as without the library), where a new version published by a
 * rename would leave the mapping on the old file, the program reading the
 * old bytes through it. The mappings' ranges with their paths' marks (as a
 * passed descriptor's, passed_hash), under fdtab_lock; past MAPPED_MAX at
 * once, every rewrite of a tagged path that has a real file goes there. */
#define MAPPED_MAX 256
static struct {
	uint64_t mark;
	uintptr_t a, b;
} mapped[MAPPED_MAX];
atomic_uint ckc_mapped_n;
static atomic_bool mapped_lost;

void ckc_mapped_add(int fd, const char *canon, const void *p, size_t len)
{
	uint64_t m = canon ? passed_hash(canon) : 0;
	if (!m && fd >= 0 && (size_t)fd < ckc_vfd_cap && ckc_small_t0) {
		uint64_t s = atomic_load_explicit(&ckc_small_t0[fd], memory_order_relaxed);
		if (slot_passed(s))
			m = s;
	}
	if (!m || !len)
		return;
	ckc_mutex_lock_brief(&fdtab_lock);
	unsigned n = atomic_load_explicit(&ckc_mapped_n, memory_order_relaxed);
	if (n < MAPPED_MAX) {
		mapped[n].mark = m;
		mapped[n].a = (uintptr_t)p;
		mapped[n].b = (uintptr_t)p + len;
		atomic_store(&ckc_mapped_n, n + 1);
	} else {
		atomic_store(&mapped_lost, true);
	}
	ckc_mutex_unlock_brief(&fdtab_lock);
}

void ckc_mapped_cut_slow(const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p, b = a + len;
	ckc_mutex_lock_brief(&fdtab_lock);
	unsigned n = atomic_load_explicit(&ckc_mapped_n, memory_order_relaxed);
	for (unsigned i = 0; i < n;) {
		/* gone whole; cut at one end; a hole in the middle keeps
		 * the range whole (it still maps the file) */
		if (mapped[i].a >= a && mapped[i].b <= b) {
			mapped[i] = mapped[--n];
			continue;
		}
		if (mapped[i].a >= a && mapped[i].a < b)
			mapped[i].a = b;
		else if (mapped[i].b > a && mapped[i].b <= b)
			mapped[i].b = a;
		i++;
	}
	atomic_store(&ckc_mapped_n, n);
	ckc_mutex_unlock_brief(&fdtab_lock);
}

void ckc_mapped_moved(const void *old, const void *to, size_t len)
{
	ckc_mutex_lock_brief(&fdtab_lock);
	unsigned n = atomic_load_explicit(&ckc_mapped_n, memory_order_relaxed);
	for (unsigned i = 0; i < n; i++)
		if (mapped[i].a == (uintptr_t)old) {
			mapped[i].a = (uintptr_t)to;
			mapped[i].b = (uintptr_t)to + len;
		}
	ckc_mutex_unlock_brief(&fdtab_lock);
}

static bool mapped_using(const char *canon)
{
	if (atomic_load_explicit(&mapped_lost, memory_order_relaxed))
		return true;
	if (!atomic_load_explicit(&ckc_mapped_n, memory_order_relaxed))
		return false;
	uint64_t h = passed_hash(canon);
	bool using = false;
	ckc_mutex_lock_brief(&fdtab_lock);
	unsigned n = atomic_load_explicit(&ckc_mapped_n, memory_order_relaxed);
	for (unsigned i = 0; i < n && !using; i++)
		using = mapped[i].mark == h;
	ckc_mutex_unlock_brief(&fdtab_lock);
	return using;
}

/* Whether a descriptor passed at canon's real file is open (writing: one
 * open for writing). */
static bool passed_open(const char *canon, bool writing)
{
	if (!atomic_load_explicit(&ckc_passed_n, memory_order_relaxed) || !ckc_small_t0)
		return false;
	uint64_t h = passed_hash(canon);
	unsigned end = atomic_load(&ckc_small_end);
	int saved = errno;
	bool found = false;
	for (unsigned fd = 0; fd < end && !found; fd++) {
		if (atomic_load_explicit(&ckc_small_t0[fd], memory_order_relaxed) != h)
			continue;
		int fl = writing ? REAL(fcntl)((int)fd, F_GETFL) : O_WRONLY;
		found = fl >= 0 && (fl & O_ACCMODE) != O_RDONLY;
	}
	errno = saved;
	return found;
}

bool ckc_passed_using(const char *canon)
{
	return mapped_using(canon) || passed_open(canon, false);
}

/* Whether a small checkpoint written straight (its slot a start time) is
 * open at canon's real file: by its inode, the slot holding no path. */
static bool straight_open(const char *canon)
{
	unsigned end = ckc_small_t0 ? atomic_load(&ckc_small_end) : 0;
	struct stat st, fst;
	bool known = false, found = false;
	int saved = errno;
	for (unsigned fd = 0; fd < end && !found; fd++) {
		uint64_t s = atomic_load_explicit(&ckc_small_t0[fd], memory_order_relaxed);
		if (!s || (s & CKC_SMALL_PASSED))
			continue;
		if (!known && !(known = REAL(stat)(canon, &st) == 0))
			break;
		found = REAL(fstat)((int)fd, &fst) == 0 && fst.st_dev == st.st_dev && fst.st_ino == st.st_ino;
	}
	errno = saved;
	return found;
}

bool ckc_real_writer_open(const char *canon)
{
	/* (a reader's descriptor, or a mapping, keeps the file it has
	 * without the kernel's rename too) */
	return passed_open(canon, true) || straight_open(canon);
}

void ckc_passed_renamed(const char *from, const char *to, bool exchange)
{
	if (!atomic_load_explicit(&ckc_passed_n, memory_order_relaxed) || !ckc_small_t0 || ckc_in_vfork_child())
		return;
	uint64_t hf = passed_hash(from), ht = passed_hash(to);
	unsigned end = atomic_load(&ckc_small_end);
	for (unsigned fd = 0; fd < end; fd++) {
		uint64_t m = atomic_load_explicit(&ckc_small_t0[fd], memory_order_relaxed);
		/* (a mark that left meanwhile stays gone) */
		if (m == hf)
			atomic_compare_exchange_strong(&ckc_small_t0[fd], &m, ht);
		else if (exchange && m == ht)
			atomic_compare_exchange_strong(&ckc_small_t0[fd], &m, hf);
	}
}

CKC_TAGGED_PATH void ckc_small_done(uint64_t t0)
{
	/* in a forked child the engine is not this process's */
	if (t0 && atomic_load(&ckc_icpt_on) && !ckc_in_vfork_child()) {
		int saved = errno;
		ckc_enter();
		ckc_small_note(CKC_ASIDE_HOME, ckc_now_ns() - t0);
		ckc_leave();
		errno = saved;
	}
}

void ckc_small_drop(unsigned first, unsigned last)
{
	unsigned end = atomic_load(&ckc_small_end);
	if (first >= end)
		return;
	if (last >= end)
		last = end - 1;
	for (unsigned fd = first; fd <= last; fd++)
		(void)ckc_small_take((int)fd);
}

void ckc_ph_base_lost(int fd)
{
	/* a vfork child shares this memory, not the descriptor table: the
	 * parent's base is still there */
	if (ckc_in_vfork_child()) {
		atomic_store(&ckc_small_t0[fd], CKC_SMALL_BASE);
		return;
	}
	ph_forget(fd);
}

/* The base's slot holds CKC_SMALL_BASE while the number is the base's. */
static bool ph_base_marked(int b)
{
	return ckc_small_t0 && (size_t)b < ckc_vfd_cap && atomic_load(&ckc_small_t0[b]) == CKC_SMALL_BASE;
}

/* Whether fd is a descriptor opened as a path only (as the base and its
 * copies are). */
static bool ph_path_only(int fd)
{
	int fl = REAL(fcntl)(fd, F_GETFL);
	return fl >= 0 && (fl & O_PATH);
}

/* The placeholders' base, opened if there is none: -1 if it cannot be. */
static int ph_base_get(void)
{
	int b = atomic_load(&ph_base);
	if (b >= 0)
		return b;
	ckc_fd_quiet_begin();
	int nb = ckc_fd_quiet_made(ph_inode_open(O_CLOEXEC), PH_BASE_FLOOR);
	if (nb < 0)
		return -1;
	if (atomic_compare_exchange_strong(&ph_base, &b, nb)) {
		if (ckc_small_t0 && (size_t)nb < ckc_vfd_cap) {
			small_reach(nb);
			atomic_store(&ckc_small_t0[nb], CKC_SMALL_BASE);
		}
		return nb;
	}
	REAL(close)(nb); /* another thread's came first: b is it */
	return b;
}

void ckc_ph_keep(void)
{
	(void)ph_base_get();
}

bool ckc_ph_spare(void)
{
	/* the process ends: a soft limit below the hard one is raised a
	 * little (nothing of the program runs long enough to notice), once */
	static atomic_bool raised;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return false;
	if (rl.rlim_cur < rl.rlim_max && !atomic_exchange(&raised, true)) {
		struct rlimit more = rl;
		more.rlim_cur = rl.rlim_max - rl.rlim_cur > 16 ? rl.rlim_cur + 16 : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &more) == 0)
			return true;
	}
	return ckc_ph_spare_base();
}

bool ckc_ph_spare_base(void)
{
	/* the base's number, if the limit lets a new descriptor take it (a
	 * later placeholder opens the base again, where there is room) */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return false;
	int b = atomic_load(&ph_base);
	if (b < 0 || (rlim_t)b >= rl.rlim_cur || !atomic_compare_exchange_strong(&ph_base, &b, -1))
		return false;
	/* the number is closed only while it is the base's: its mark taken
	 * here, or (no mark kept) a descriptor opened as a path only */
	if (ckc_small_t0 && (size_t)b < ckc_vfd_cap) {
		if (atomic_exchange(&ckc_small_t0[b], 0) != CKC_SMALL_BASE)
			return false;
	} else if (!ph_path_only(b)) {
		return false;
	}
	REAL(close)(b);
	return true;
}

int ckc_placeholder(int oflags)
{
	/* O_PATH: read, write, mmap, io_uring and every other data operation
	 * on it fail with EBADF, so a path around the library cannot touch
	 * wrong bytes. */
	int (*ropen)(const char *, int, ...) = REAL(open);
	int (*rf)(int, int, ...) = REAL(fcntl);
	if (!ropen || !rf)
		return -ENOSYS;
	int b = ph_base_get();
	if (b >= 0) {
		int fd = CKC_FD_NUM(rf(b, (oflags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0));
		if (fd < 0 && errno != EBADF)
			return -errno; /* EMFILE: the table is full, the base stays */
		if (fd >= 0) {
			/* the program may have closed the number and opened
			 * something else there: a copy of that is no placeholder.
			 * Every close, dup2, dup3, close_range and closefrom
			 * takes the mark before the number is freed, so a mark
			 * still there after the copy says the copy is of the
			 * base; else the copy itself is asked. */
			if (ph_base_marked(b) || ph_path_only(fd))
				return fd;
			REAL(close)(fd);
		}
		ph_forget(b);
	}
	return CKC_FD_NUM(ph_inode_open(oflags));
}

/* ---- switching to the real file ---------------------------------------- */

/* v's name: kernel, as ckc_vfd_file_name; else as ckc_vfd_name. */
static const char *vfd_name_as(const ckc_vfd_t *v, char now[PATH_MAX], bool kernel)
{
	if (!v->h) {
		snprintf(now, PATH_MAX, "%s", v->path);
		return now;
	}
	bool gone, unnamed;
	ckc_enter();
	bool named = ckc_handle_name(v->h, now, &gone, &unnamed);
	ckc_leave();
	return named && !(kernel ? unnamed : gone) ? now : NULL;
}

const char *ckc_vfd_name(const ckc_vfd_t *v, char now[PATH_MAX])
{
	return vfd_name_as(v, now, false);
}

const char *ckc_vfd_file_name(const ckc_vfd_t *v, char now[PATH_MAX])
{
	return vfd_name_as(v, now, true);
}

/* The real file of v at path (ckc_vfd_name), opened as v was (no O_CREAT,
 * O_TRUNC or O_EXCL: it exists and holds v's bytes) and placed at v's
 * offset. */
static int vfd_open_real(const ckc_vfd_t *v, const char *path)
{
	int keep = O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_SYNC | O_DSYNC;
	int fl = (v->flags & O_ACCMODE) | (v->flags & keep) | O_CLOEXEC;
	int fd = REAL(openat)(AT_FDCWD, path, fl);
	/* flags the file system or the owner refuses are only hints here */
	if (fd < 0 && (errno == EPERM || errno == EINVAL) && (fl & (O_NOATIME | O_DIRECT)))
		fd = REAL(openat)(AT_FDCWD, path, fl & ~(O_NOATIME | O_DIRECT));
	if (fd < 0)
		return -errno;
	if (REAL(lseek)(fd, (off_t)v->pos, SEEK_SET) < 0) {
		int e = errno;
		REAL(close)(fd);
		return -e;
	}
	return fd;
}

/* The numbers the last switches gave to real files, with the virtual
 * descriptor's id and the file (under fdtab_lock). */
#define SWITCHED_KEEP 32
static struct {
	uint64_t id;
	int fd;
	dev_t dev;
	ino_t ino;
} switched[SWITCHED_KEEP];
static unsigned switched_next;

int ckc_vfd_switched_at(int fd, uint64_t id)
{
	int at = -1;
	dev_t dev = 0;
	ino_t ino = 0;
	ckc_mutex_lock(&fdtab_lock);
	for (unsigned i = 0; i < SWITCHED_KEEP; i++)
		if (switched[i].id == id && (at < 0 || switched[i].fd == fd)) {
			at = switched[i].fd;
			dev = switched[i].dev;
			ino = switched[i].ino;
		}
	bool virt = at >= 0 && (size_t)at < ckc_vfd_cap && atomic_load(&ckc_vfd_tab[at]);
	ckc_mutex_unlock(&fdtab_lock);
	struct stat st;
	int saved = errno, fl = at >= 0 && !virt ? REAL(fcntl)(at, F_GETFL) : -1;
	bool same = fl >= 0 && !(fl & O_PATH) && REAL(fstat)(at, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
	errno = saved;
	return same ? at : -1;
}

int ckc_vfd_switch(ckc_vfd_t *v)
{
	int rc = 0, saved = errno;
	char now[PATH_MAX];
	const char *path = ckc_vfd_name(v, now);

	ckc_mutex_lock(&v->lock);
	if (v->switched)
		goto out;
	if (!path) {
		/* unlinked or renamed over, and never handed over: no real
		 * file is its (the one at its old name is another file) */
		rc = -ESTALE;
		ckc_error("checkpoint %s was unlinked or renamed over while open, and cannot go to a real file: "
			  "its descriptors fail from now on", v->path);
		goto out;
	}
	/* the real file's descriptor that holds v's locks, if any, becomes
	 * the program's: its locks stay with its numbers */
	int real = ckc_lock_switch_fd(v);
	if (real < 0) {
		/* (above the program's numbers until it is dup'd onto them) */
		ckc_fd_quiet_begin();
		real = ckc_fd_quiet_made(vfd_open_real(v, path), PH_BASE_FLOOR);
	}
	if (real < 0) {
		rc = real;
		ckc_error("checkpoint %s went to its real file, which cannot be opened again for its "
			  "descriptors (%s): they fail from now on", path, strerror(-rc));
		goto out;
	}
	/* never freed: see intercept.h */
	atomic_fetch_add(&v->refs, 1);
	/* a writer writes on at the real file, as one opened there: another
	 * process's new version of it is written there too */
	uint64_t inplace = (v->flags & O_ACCMODE) != O_RDONLY ? ckc_node_inplace_begin(path, false) : 0;
	int first_fd = -1;
	struct stat rst;
	if (REAL(fstat)(real, &rst) != 0)
		rst.st_ino = 0;
	/* under the table lock, so that no close or dup2 of these numbers
	 * slips in between the look and the dup */
	ckc_mutex_lock(&fdtab_lock);
	size_t hi = atomic_load(&ckc_vfd_hi);
	for (size_t fd = 0; fd <= hi && fd < ckc_vfd_cap; fd++) {
		if (atomic_load(&ckc_vfd_tab[fd]) != v)
			continue;
		int fdfl = REAL(fcntl)((int)fd, F_GETFD);
		if (REAL(dup3)(real, (int)fd, fdfl > 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
			rc = -errno;
			continue;
		}
		atomic_store(&ckc_vfd_tab[fd], NULL);
		atomic_fetch_sub(&v->refs, 1);
		/* a descriptor of the real file now: a rewrite of the path
		 * while it is open goes there in place, as this number (and a
		 * mapping made through it later) sees (ckc_passed_using) */
		slot_put((int)fd, passed_hash(path));
		if (first_fd < 0)
			first_fd = (int)fd;
		if (rst.st_ino) {
			unsigned i = switched_next++ % SWITCHED_KEEP;
			switched[i].id = v->id;
			switched[i].fd = (int)fd;
			switched[i].dev = rst.st_dev;
			switched[i].ino = rst.st_ino;
		}
	}
	ckc_mutex_unlock(&fdtab_lock);
	if (inplace)
		ckc_node_inplace_end(inplace, first_fd);
	ckc_lock_switched(v, real);
	ckc_fd_mine_close(real); /* (the lock's descriptor is the library's till here) */
	v->switched = rc == 0;
out:
	ckc_mutex_unlock(&v->lock);
	errno = saved;
	return rc;
}

/* The virtual descriptor at fd with a reference of the caller's (dropped
 * with ckc_vfd_put), or NULL: a walk of the table meets numbers that other
 * threads close meanwhile, and their last put frees v. */
static ckc_vfd_t *vfd_ref(size_t fd)
{
	ckc_mutex_lock_brief(&fdtab_lock);
	ckc_vfd_t *v = atomic_load(&ckc_vfd_tab[fd]);
	if (v)
		atomic_fetch_add(&v->refs, 1);
	ckc_mutex_unlock_brief(&fdtab_lock);
	return v;
}

ckc_vfd_t *ckc_vfd_hold_id(int fd, uint64_t id, int *at)
{
	ckc_vfd_t *v = ckc_vfd_hold(fd);
	if (v && v->id == id) {
		*at = fd;
		return v;
	}
	if (v)
		ckc_vfd_put(v);
	size_t hi = atomic_load(&ckc_vfd_hi);
	for (size_t n = 0; n <= hi && n < ckc_vfd_cap; n++) {
		ckc_vfd_t *w = atomic_load(&ckc_vfd_tab[n]);
		if (!w || w->id != id || !(w = ckc_vfd_hold((int)n)))
			continue;
		if (w->id == id) {
			*at = (int)n;
			return w;
		}
		ckc_vfd_put(w);
	}
	return NULL;
}

/* The vfork snapshot of the thread (its child shares this memory and this
 * thread's variables): numbers and ids. */
struct vfork_snap {
	int fd;
	uint64_t id;
};
static __thread struct vfork_snap *vfork_snap;
static __thread size_t vfork_nsnap, vfork_capsnap;

CKC_WARM_PATH void ckc_vfork_snapshot(bool take)
{
	vfork_nsnap = 0;
	if (!take || !ckc_vfd_tab)
		return;
	size_t hi = atomic_load(&ckc_vfd_hi);
	for (size_t n = 0; n <= hi && n < ckc_vfd_cap; n++) {
		ckc_vfd_t *v = atomic_load(&ckc_vfd_tab[n]);
		if (!v || !(v = vfd_ref(n)))
			continue;
		if (!v->switched) {
			if (vfork_nsnap == vfork_capsnap) {
				size_t cap = vfork_capsnap ? vfork_capsnap * 2 : 16;
				struct vfork_snap *s = realloc(vfork_snap, cap * sizeof(*s));
				if (!s) {
					ckc_vfd_put(v);
					return;
				}
				vfork_snap = s;
				vfork_capsnap = cap;
			}
			vfork_snap[vfork_nsnap++] = (struct vfork_snap){ (int)n, v->id };
		}
		ckc_vfd_put(v);
	}
}

/* The id of the checkpoint the vfork child has at fd, or 0. */
static uint64_t vfork_snap_id(int fd)
{
	for (size_t i = 0; i < vfork_nsnap; i++)
		if (vfork_snap[i].fd == fd)
			return vfork_snap[i].id;
	return 0;
}

ckc_vfd_t *ckc_vfd_vfork_unheld(int fd)
{
	if (ckc_in_vfork_child())
		vfork_claim(fd);
	return NULL;
}

ckc_vfd_t *ckc_vfd_hold(int fd)
{
	if (!ckc_fd_maybe_tagged(fd))
		return NULL;
	/* a vfork child's numbers are its own: it claims the number (the
	 * parent's memory, whose references it must not take), and its call
	 * goes to the kernel */
	if (ckc_in_vfork_child()) {
		vfork_claim(fd);
		return NULL;
	}
	ckc_vfd_t *v = vfd_ref((size_t)fd);
	if (!v)
		return NULL;
	if (!ckc_vfd_confirmed(fd) && !ckc_vfd_check(fd, v)) {
		ckc_vfd_drop(v);
		return NULL;
	}
	return v;
}

void ckc_vfd_switch_path(const char *canon)
{
	size_t hi = atomic_load(&ckc_vfd_hi);
	for (size_t fd = 0; fd <= hi && fd < ckc_vfd_cap; fd++) {
		if (!atomic_load(&ckc_vfd_tab[fd]))
			continue;
		ckc_vfd_t *v = vfd_ref(fd);
		if (!v)
			continue;
		/* (a version not handed over stays; one handed over is
		 * looked for by its name of now) */
		ckc_enter();
		bool handed = ckc_handle_handed(v->h);
		ckc_leave();
		char now[PATH_MAX];
		const char *name = handed ? ckc_vfd_name(v, now) : NULL;
		if (name && strcmp(name, canon) == 0)
			ckc_vfd_switch(v);
		ckc_vfd_put(v);
	}
}

int ckc_vfd_demote(ckc_vfd_t *v)
{
	ckc_enter();
	int rc = ckc_handoff(v->h);
	ckc_leave();
	if (rc)
		return rc;
	/* v's own numbers first: the caller is about to use one of them */
	rc = ckc_vfd_switch(v);
	char now[PATH_MAX];
	const char *name = ckc_vfd_name(v, now);
	if (name)
		ckc_vfd_switch_path(name);
	return rc;
}

/* fn(fd, v, arg) for each virtual descriptor of the table, v referenced
 * meanwhile. */
static void vfd_each(void (*fn)(size_t fd, ckc_vfd_t *v, const void *arg), const void *arg)
{
	size_t hi = atomic_load(&ckc_vfd_hi);
	for (size_t fd = 0; ckc_vfd_tab && fd <= hi && fd < ckc_vfd_cap; fd++) {
		if (!atomic_load(&ckc_vfd_tab[fd]))
			continue;
		ckc_vfd_t *v = vfd_ref(fd);
		if (!v)
			continue;
		fn(fd, v, arg);
		ckc_vfd_put(v);
	}
}

static void vfd_lock_release(size_t fd, ckc_vfd_t *v, const void *arg)
{
	(void)fd;
	(void)arg;
	ckc_lock_release(v);
}

void ckc_vfd_locks_release_all(void)
{
	vfd_each(vfd_lock_release, NULL);
}

struct demote_why {
	bool inherited_only;
	const char *why;
};

static void vfd_demote_one(size_t fd, ckc_vfd_t *v, const void *arg)
{
	const struct demote_why *d = arg;
	int fdfl = 0;
	if (!ckc_vfd_check((int)fd, v) ||
	    (d->inherited_only && ((fdfl = REAL(fcntl)((int)fd, F_GETFD)) < 0 || (fdfl & FD_CLOEXEC))))
		return;
	int rc = ckc_vfd_demote(v);
	/* the program filled its table: the library's own number is given
	 * up for the hand-over, whose descriptors last only while it runs */
	if (ckc_io_short(rc) && ckc_ph_spare_base())
		rc = ckc_vfd_demote(v);
	if (rc)
		ckc_error("descriptor %zu of checkpoint %s cannot be given to %s (%s): it "
			  "fails there with EBADF", fd, v->path, d->why,
			  rc == -ESTALE ? "it reads a version that a newer one replaced" : strerror(-rc));
}

void ckc_vfd_demote_all(bool inherited_only, const char *why)
{
	const struct demote_why d = { inherited_only, why };
	vfd_each(vfd_demote_one, &d);
}

int ckc_hand_over_path(const char *canon)
{
	int saved = errno; /* the publication's calls are not the program's */
	ckc_enter();
	int rc = ckc_handoff_path(canon);
	ckc_leave();
	errno = saved;
	if (rc == -ENOENT)
		return 0;
	if (!rc)
		ckc_vfd_switch_path(canon);
	return rc;
}
