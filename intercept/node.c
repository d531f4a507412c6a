/* The node registry: which processes of this user on this node hold bytes
 * that a real file lacks (an open writer's, or a closed checkpoint not yet
 * published). The table (src/nodetab.h) lives in a file under /dev/shm
 * that those processes map; each of them runs a service, an abstract UNIX
 * socket named after its pid, that publishes such a file when asked.
 * Before a tagged path is opened, truncated, renamed, linked or removed,
 * its holders are asked, so another process sees what was closed before
 * (close-to-open) and never a file that is replaced behind its back. Forked
 * and vfork children ask their parent like any other process. */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "intercept.h"
#include "io.h"
#include "log.h"
#include "nodetab.h"
#include "path.h"
#include "sigdefer.h"
#include "tagpat.h"
#include "thread.h"

#define NODE_SLOTS (1u << 16)
/* The table's first NODE_FRONT slots take every entry that finds room
 * within NODE_FRONT_PROBE slots of its place there; the others (the back)
 * take the rest, and are searched only while the header counts entries in
 * them. Each process that maps the table counts the pages it touched as
 * its own resident memory: the few thousand checkpoints a node holds at
 * once touch the front's 32 KiB, not the whole table's 512 KiB. */
#define NODE_FRONT 4096u
#define NODE_FRONT_PROBE 256u
#define NODE_BACK (NODE_SLOTS - NODE_FRONT)
/* "ckptnod7": the layout of the shared file and of the messages (2: the
 * folder requests, which a process of layout 1 would leave unanswered; 3:
 * the front and the back, where a process of layout 2 would look for an
 * entry in the wrong place; 4: the last slot of each part kept empty, so
 * that a front whose every slot was once taken empties again, where
 * layout 3 left it all freed slots that every search walked; 5: an entry
 * for each folder a process holds something in, which a listing of that
 * folder looks for, and which a process of layout 4 would not make; 6:
 * keys of a hash that reads a path eight bytes a step, ckc_path_hash,
 * where layout 5's read it a byte a step, in 4 times as long; 7: the
 * header's count of folder entries made, which a process of layout 6
 * would not keep, so that a process of layout 7 that found a folder
 * empty of holders would never look again), each in a file of its own
 * name, so that two layouts never ask each other */
#define NODE_MAGIC 0x636b70746e6f6437ull
/* The table's file, in /dev/shm or /tmp: ckptcache-UID.nodes7 */
#define NODE_FILE_PREFIX "ckptcache-"
#define NODE_FILE_SUFFIX ".nodes7"
/* How long an open waits for a holder to publish (a large checkpoint on a
 * slow file system). */
#define NODE_ASK_WAIT_MS 60000
/* How long a holder whose program filled its descriptor table tries to
 * publish what another process asks for. */
#define NODE_SHORT_WAIT_NS (5000ull * 1000000u)
/* How often a wait for a holder looks whether it is stopped. */
#define NODE_ASK_SLICE_NS (200ull * 1000000u)
/* Slots of one path looked at (one per version a process holds: more
 * than a few is rare). */
#define NODE_ASK_MAX 16

typedef struct node_hdr {
	_Atomic uint64_t magic;
	/* slots in use, or more (never fewer: it goes up before a slot is
	 * taken and down after one is freed), so that 0 lets every process
	 * skip the search */
	_Atomic int64_t used;
	/* slots of the back in use, or more (the same way) */
	_Atomic int64_t back;
	/* folders renamed by a process of the node, counted before and after
	 * each: the paths of directory descriptors a process keeps (tag.c)
	 * hold while it does not change (a field of what was padding: a
	 * library without it leaves it 0) */
	_Atomic uint64_t moves;
	/* folder entries made, counted after each is in the table, and
	 * whether one could not be made (the table was full): a process that
	 * found no entry of a folder asks nobody about the files in it while
	 * the count stays the same (node_none_dir) */
	_Atomic uint64_t folders;
	_Atomic uint64_t folders_lost;
	char pad[16];
} node_hdr_t;

typedef struct node_req {
	uint64_t magic;
	char path[PATH_MAX];
} node_req_t;

typedef struct node_rep {
	uint64_t magic;
	int32_t rc; /* 0 published, NODE_NOT_HELD, or -errno */
} node_rep_t;

#define NODE_NOT_HELD 1
/* node_ask_one's answer when nobody serves that pid any more */
#define NODE_GONE 2
/* published: the holder had it open for writing, and its descriptors are
 * descriptors of the real file from now on */
#define NODE_HANDED 3

__thread bool ckc_node_writer_handed;

/* Requests about a folder (the path names one), each answered as one
 * about a file: publish the closed checkpoints under it (it is listed or
 * about to be removed); that, and hand over its open writers (it moves:
 * their descriptors follow the files); retire its open writers (it was
 * removed: they write on, as into unlinked files). */
#define NODE_DIR_LIST (NODE_MAGIC + 1)
#define NODE_DIR_MOVE (NODE_MAGIC + 2)
#define NODE_DIR_GONE (NODE_MAGIC + 3)
/* A request of this process's own vfork child (the path is
 * "/proc/self/fd/N"): descriptor N of this process is given to a new
 * program, so its checkpoint is handed over to the real file (N becomes a
 * descriptor of it) and N is sent along with the answer, for the child to
 * put in place of its placeholder: one open file, one offset, as a
 * descriptor a child inherits shares with its parent. */
#define NODE_FD_GIVE (NODE_MAGIC + 4)
#define NODE_FD_PATH "/proc/self/fd/"
/* A folder request's answer: done, and the holder has open writers under
 * the folder. */
#define NODE_DIR_WRITING 4
/* Processes asked about a folder at most. */
#define NODE_DIR_PIDS 256
/* How long a holder waits for flushes under way before it answers. */
#define NODE_DIR_WAIT_NS (50ull * 1000000000u)

CKC_HOT_DATA static node_hdr_t *node_hdr;
CKC_HOT_DATA static nodetab_slot_t *node_tab; /* NULL: no registry here */
CKC_HOT_DATA static uid_t node_uid;
static pid_t node_pid;           /* whose slots this process's engine writes */
static _Atomic pid_t node_me;    /* this process (set again in a forked child) */
static int node_listen = -1;
static pthread_t node_thread;
static atomic_bool node_serving;

static pid_t node_getpid(void)
{
	return (pid_t)ckc_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
}

/* This process's id, asked of the kernel once: an open and a close of a
 * file written in place name their writer, and a system call each (three
 * per file) cost a script writing small files more than the rest of the
 * library's work. A forked child forgets it (ckc_node_atfork_child); a
 * vfork child, which shares this memory, asks each time. */
static _Atomic pid_t node_self;

CKC_TAGGED_PATH static pid_t node_self_pid(void)
{
	if (ckc_in_vfork_child())
		return node_getpid();
	pid_t p = atomic_load_explicit(&node_self, memory_order_relaxed);
	if (__builtin_expect(p == 0, 0)) {
		p = node_getpid();
		atomic_store_explicit(&node_self, p, memory_order_relaxed);
	}
	return p;
}

static bool pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* Maps this user's table (made on first use), or returns -1. Only a
 * regular file of this user, readable by nobody else, is used. */
/* dir/ckptcache-UID.nodes7 into out (64 bytes), not with snprintf: a
 * forked child attaches before its new program, and a call the parent
 * never made is bound in each child (the loader's tables faulted in
 * again). */
CKC_START_PATH static void node_file(char out[64], const char *dir, unsigned uid, const char *suffix)
{
	size_t n = strlen(dir);
	memcpy(out, dir, n);
	memcpy(out + n, "/" NODE_FILE_PREFIX, sizeof(NODE_FILE_PREFIX));
	n += sizeof(NODE_FILE_PREFIX);
	n += ckc_path_decimal(out + n, uid);
	memcpy(out + n, suffix, strlen(suffix) + 1);
}

/* Maps this user's table of slots slots named by suffix, whose header
 * says magic, into *hdr and *tab: 0, or -1. */
CKC_START_PATH static int node_map(const char *suffix, size_t slots, uint64_t want, bool create, node_hdr_t **hdr,
				   nodetab_slot_t **tab)
{
	static const char *const dirs[] = { "/dev/shm", "/tmp" };
	size_t bytes = sizeof(node_hdr_t) + slots * sizeof(nodetab_slot_t);
	char path[64];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		node_file(path, dirs[i], (unsigned)node_uid, suffix);
		/* (a file of its own, above the program's numbers for its
		 * moment: intercept.h) */
		ckc_fd_quiet_begin();
		int fd = ckc_fd_quiet_made(REAL(openat)(AT_FDCWD, path, O_RDWR | (create ? O_CREAT : 0) | O_NOFOLLOW |
									    O_CLOEXEC, 0600),
					   CKC_FD_OWN_FLOOR);
		if (fd < 0)
			continue;
		struct stat st;
		if (REAL(fstat)(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != node_uid ||
		    (st.st_mode & 077)) {
			ckc_warn("%s is not a private file of this user: it is not used to tell the "
				 "other processes of this node about cached checkpoints", path);
			REAL(close)(fd);
			continue;
		}
		if ((size_t)st.st_size < bytes && REAL(ftruncate)(fd, (off_t)bytes) != 0) {
			REAL(close)(fd);
			continue;
		}
		void *m = REAL(mmap)(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		REAL(close)(fd);
		if (m == MAP_FAILED)
			continue;
		node_hdr_t *h = m;
		uint64_t magic = 0;
		if (!atomic_compare_exchange_strong(&h->magic, &magic, want) && magic != want) {
			REAL(munmap)(m, bytes);
			continue; /* another layout: a different version of the library */
		}
		*hdr = h;
		*tab = (nodetab_slot_t *)(h + 1);
		return 0;
	}
	return -1;
}

CKC_START_PATH static int node_attach(bool create)
{
	int rc = node_map(NODE_FILE_SUFFIX, NODE_SLOTS, NODE_MAGIC, create, &node_hdr, &node_tab);
	if (rc == 0)
		atomic_store_explicit(&ckc_node_used, &node_hdr->used, memory_order_release);
	return rc;
}

static socklen_t node_addr(struct sockaddr_un *a, pid_t pid)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "ckptcache-nodes-%u-%d",
			 (unsigned)node_uid, (int)pid);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* The slots this process holds (node_hook): a table whose used slots are
 * all this process's needs no search for another holder. */
CKC_HOT_DATA _Atomic int64_t ckc_node_mine;
CKC_HOT_DATA _Atomic int64_t *_Atomic ckc_node_used;

static nodetab_slot_t *node_back(void)
{
	return node_tab + NODE_FRONT;
}

static bool node_back_used(void)
{
	return atomic_load_explicit(&node_hdr->back, memory_order_acquire) > 0;
}

static int node_add(uint64_t val)
{
	atomic_fetch_add(&node_hdr->used, 1);
	int rc = nodetab_add_within(node_tab, NODE_FRONT, val, NODE_FRONT_PROBE);
	if (rc == -ENOSPC) {
		atomic_fetch_add(&node_hdr->back, 1);
		if ((rc = nodetab_add(node_back(), NODE_BACK, val)) != 0)
			atomic_fetch_sub(&node_hdr->back, 1);
	}
	if (rc)
		atomic_fetch_sub(&node_hdr->used, 1);
	return rc;
}

static int node_del(uint64_t val)
{
	int rc = nodetab_del_within(node_tab, NODE_FRONT, val, NODE_FRONT_PROBE);
	if (rc && node_back_used() && (rc = nodetab_del(node_back(), NODE_BACK, val)) == 0)
		atomic_fetch_sub(&node_hdr->back, 1);
	if (!rc)
		atomic_fetch_sub(&node_hdr->used, 1);
	return rc;
}

/* The values held for key, front then back, into vals (NODE_ASK_MAX): how
 * many there are (more than fit, maybe); *probed: the slots looked at. */
static size_t node_find(uint64_t key, uint64_t *vals, size_t *probed)
{
	*probed = 0;
	size_t n = nodetab_find_within(node_tab, NODE_FRONT, key, vals, NODE_ASK_MAX, probed, NODE_FRONT_PROBE);
	if (node_back_used()) {
		size_t k = n < NODE_ASK_MAX ? n : NODE_ASK_MAX, more;
		n += nodetab_find(node_back(), NODE_BACK, key, vals + k, NODE_ASK_MAX - k, &more);
		*probed += more;
	}
	return n;
}

/* The key of the folder of path: its path up to its last '/', with it
 * ("/a/b/" for "/a/b/c", "/" for "/c"); a file's path never ends in '/',
 * so no file has the key of a folder (but by a collision of the hash,
 * which costs a question). 0 where the path has no '/' or is too long. */
static uint64_t node_folder_key(const char *path, size_t len)
{
	char buf[PATH_MAX];
	if (len == 0 || len >= sizeof(buf) - 1)
		return 0;
	memcpy(buf, path, len);
	if (buf[len - 1] != '/')
		buf[len++] = '/';
	buf[len] = '\0';
	return nodetab_key(buf);
}

/* The folders this process holds something in, each with how many of its
 * checkpoints there hold bytes their real files lack, and whether the
 * folder's entry is in the table (it was not where the table was full):
 * a listing of one folder asks only the processes whose entry names it.
 * Under the engine's lock (node_hook); a forked child starts with none. */
typedef struct {
	uint64_t key;
	uint32_t n;
	bool entered;
} node_folder_t;
static node_folder_t *node_folders;
static size_t node_nfolders, node_folders_cap;

/* One more (holds) or one fewer checkpoint of this process in key's
 * folder: its entry is made before the file's own and taken away after
 * it, so that a process that finds a file's entry finds its folder's.
 * False where the entry could not be made. */
static bool node_folder_note(const char *key, bool holds)
{
	const char *slash = strrchr(key, '/');
	uint64_t k = slash ? node_folder_key(key, (size_t)(slash - key) + 1) : 0;
	if (!k)
		return true;
	size_t i = 0;
	while (i < node_nfolders && node_folders[i].key != k)
		i++;
	if (!holds) {
		if (i == node_nfolders || --node_folders[i].n > 0)
			return true;
		if (node_folders[i].entered && node_del(nodetab_val(k, node_pid)) == 0)
			atomic_fetch_sub(&ckc_node_mine, 1);
		node_folders[i] = node_folders[--node_nfolders];
		return true;
	}
	if (i == node_nfolders) {
		if (node_nfolders == node_folders_cap) {
			size_t cap = node_folders_cap ? 2 * node_folders_cap : 16;
			node_folder_t *f = realloc(node_folders, cap * sizeof(*f));
			if (!f)
				return false;
			node_folders = f;
			node_folders_cap = cap;
		}
		node_folders[node_nfolders++] = (node_folder_t){ .key = k };
	}
	node_folder_t *f = &node_folders[i];
	if (f->n++ == 0 || !f->entered) {
		f->entered = node_add(nodetab_val(k, node_pid)) == 0;
		if (f->entered) {
			atomic_fetch_add(&ckc_node_mine, 1);
			/* after the entry: a process that reads the new count
			 * finds the entry too */
			atomic_fetch_add(&node_hdr->folders, 1);
		} else {
			atomic_store(&node_hdr->folders_lost, 1);
		}
	}
	return f->entered;
}

/* The engine tells: this process holds (or no longer holds) bytes that the
 * real file key lacks. Engine lock held: a compare-and-swap for the file,
 * and one for its folder where it is the first of this process there. */
static void node_hook(bool holds, const char *key)
{
	static atomic_bool said;
	uint64_t val = nodetab_val(nodetab_key(key), node_pid);

	if (!holds) {
		if (node_del(val) == 0)
			atomic_fetch_sub(&ckc_node_mine, 1);
		(void)node_folder_note(key, false);
		return;
	}
	bool folder = node_folder_note(key, true);
	if (node_add(val) == 0)
		atomic_fetch_add(&ckc_node_mine, 1);
	else
		folder = false;
	if (!folder && !atomic_exchange(&said, true))
		ckc_warn("the table of cached checkpoints of this node is full: other processes may "
			 "open or list %s before it reaches its real path and read an older version, "
			 "or miss its name",
			 key);
}

/* ---- writers in place ---------------------------------------------------- */

/* A tagged file this process opened for writing at its real file (a shared
 * file's open without O_TRUNC, an update in place, a writer handed over):
 * another process that opens it with O_TRUNC would otherwise cache a new
 * version and publish it by rename, and this one's writes would go on in a
 * file no name leads to. Such a descriptor has a slot in a table of its own
 * (ckptcache-UID.inplace3 beside the node's, searched only by an open with
 * O_TRUNC: nobody is asked about it, and a process that holds nothing
 * unpublished counts for nothing in the node's table) for as long as it is
 * open; an O_TRUNC open that finds one of another live process writes in
 * place too. By descriptor number, to free it at the close. */
#define INPLACE_SLOTS 4096u
#define INPLACE_FILE_SUFFIX ".inplace3"
/* "ckptinp3" (1: before the table's last slot was kept empty; 2: the keys
 * of the node table's layout 5) */
#define INPLACE_MAGIC 0x636b7074696e7033ull
static node_hdr_t *inplace_hdr;
static nodetab_slot_t *inplace_tab;
static _Atomic uint64_t *inplace_val;
CKC_HOT_DATA atomic_uint ckc_node_inplace_n; /* entries in inplace_val */
static atomic_size_t inplace_hi; /* the highest number inplace_val has held */
static atomic_bool inplace_ready_now; /* the three above are mapped */
static ckc_mutex_t inplace_lock = CKC_MUTEX_INIT(INPLACE);
CKC_LOCKS_AT_START(inplace_lock, ckc_locks_add, &inplace_lock)

/* The slots of writers that died without taking theirs back (a job
 * killed mid-write) are freed, and the freed slots that searches would
 * walk emptied: left there, they kept the count of slots above this
 * process's own, so that every open for writing searched the table, and
 * the freed slots before them piled up until a search walked nearly all
 * of it (3,985 of 4,096 slots on a machine that had run many killed
 * jobs: 2 us more per small file written). Once per process, at its
 * first write in place, while another process's slots are there. */
static void inplace_tidy(void)
{
	if (atomic_load_explicit(&inplace_hdr->used, memory_order_acquire) <= 0)
		return;
	int saved = errno;
	size_t gone = nodetab_sweep(inplace_tab, INPLACE_SLOTS, pid_alive);
	if (gone)
		atomic_fetch_sub(&inplace_hdr->used, (int64_t)gone);
	(void)nodetab_compact(inplace_tab, INPLACE_SLOTS);
	errno = saved;
}

/* The table and this process's numbers, mapped once (made if need be):
 * whether they are. */
static bool inplace_ready(void)
{
	static bool tried; /* (under inplace_lock: a thread that comes while
			     * another maps them waits for its answer) */
	if (atomic_load_explicit(&inplace_ready_now, memory_order_acquire))
		return true;
	ckc_mutex_lock(&inplace_lock);
	if (tried) {
		ckc_mutex_unlock(&inplace_lock);
		return atomic_load(&inplace_ready_now);
	}
	tried = true;
	node_uid = geteuid();
	node_hdr_t *h;
	nodetab_slot_t *t;
	void *m = ckc_vfd_cap ? REAL(mmap)(NULL, ckc_vfd_cap * sizeof(uint64_t), PROT_READ | PROT_WRITE,
					   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
			      : MAP_FAILED;
	if (m != MAP_FAILED && node_map(INPLACE_FILE_SUFFIX, INPLACE_SLOTS, INPLACE_MAGIC, true, &h, &t) == 0) {
		inplace_val = m;
		inplace_hdr = h;
		inplace_tab = t;
		inplace_tidy();
		atomic_store_explicit(&inplace_ready_now, true, memory_order_release);
	} else if (m != MAP_FAILED) {
		REAL(munmap)(m, ckc_vfd_cap * sizeof(uint64_t));
	}
	ckc_mutex_unlock(&inplace_lock);
	return atomic_load(&inplace_ready_now);
}

size_t ckc_node_inplace_top(void)
{
	return atomic_load(&inplace_hi);
}

void ckc_node_inplace_map(void)
{
	(void)inplace_ready();
}

CKC_TAGGED_PATH static pid_t inplace_me(void)
{
	return nodetab_val_pid(nodetab_val(1, node_self_pid()));
}

CKC_TAGGED_PATH uint64_t ckc_node_inplace_begin(const char *canon, bool start)
{
	/* (not from a signal handler, which may have interrupted malloc, nor
	 * while the program ends, whose descriptors may be the last ones:
	 * such a write is not announced) */
	if (ckc_sig_in_handler() || ckc_in_vfork_child() || !(start ? inplace_ready() : atomic_load(&inplace_ready_now)))
		return 0;
	uint64_t val = nodetab_val(nodetab_key(canon), node_self_pid());
	atomic_fetch_add(&inplace_hdr->used, 1);
	if (nodetab_add(inplace_tab, INPLACE_SLOTS, val) != 0) {
		atomic_fetch_sub(&inplace_hdr->used, 1);
		return 0;
	}
	atomic_fetch_add(&ckc_node_inplace_n, 1);
	atomic_store_explicit(&ckc_inplace_ever, true, memory_order_release);
	return val;
}

/* Frees one slot val (the count of this process's too, where mine). */
CKC_TAGGED_PATH static void inplace_drop(uint64_t val, bool mine)
{
	if (mine && nodetab_del(inplace_tab, INPLACE_SLOTS, val) == 0)
		atomic_fetch_sub(&inplace_hdr->used, 1);
	atomic_fetch_sub(&ckc_node_inplace_n, 1);
}

CKC_TAGGED_PATH int ckc_node_inplace_opened(uint64_t val, int fd)
{
	int e = errno;
	ckc_node_inplace_end(val, fd);
	errno = e;
	return fd;
}

CKC_TAGGED_PATH void ckc_node_inplace_end(uint64_t val, int fd)
{
	if (!val)
		return;
	if (fd < 0 || (size_t)fd >= ckc_vfd_cap) {
		inplace_drop(val, true); /* the open failed */
		return;
	}
	size_t hi = atomic_load(&inplace_hi);
	while ((size_t)fd > hi && !atomic_compare_exchange_weak(&inplace_hi, &hi, (size_t)fd))
		;
	uint64_t old = atomic_exchange(&inplace_val[fd], val);
	if (old)
		inplace_drop(old, nodetab_val_pid(old) == inplace_me()); /* a number closed unseen */
}

void ckc_node_inplace_end_now(void)
{
	if (!inplace_val || !atomic_load(&ckc_node_inplace_n) || ckc_in_vfork_child())
		return;
	pid_t me = inplace_me();
	size_t hi = atomic_load(&inplace_hi);
	for (size_t fd = 0; fd <= hi && fd < ckc_vfd_cap; fd++) {
		uint64_t old = atomic_exchange(&inplace_val[fd], 0);
		if (old) /* (a slot copied from a parent at fork stays the parent's) */
			inplace_drop(old, nodetab_val_pid(old) == me);
	}
}

CKC_TAGGED_PATH void ckc_node_inplace_close(int fd)
{
	/* a vfork child's numbers are its own, this table its parent's */
	if (fd < 0 || (size_t)fd >= ckc_vfd_cap || !inplace_val || ckc_in_vfork_child())
		return;
	uint64_t old = atomic_exchange(&inplace_val[fd], 0);
	if (old) /* (a forked child's copy: the slot is its parent's, which may still write there) */
		inplace_drop(old, nodetab_val_pid(old) == inplace_me());
}

/* Whether a live process of the node writes canon at its real file, this
 * one included where mine. */
CKC_TAGGED_PATH static bool inplace_by(const char *canon, bool mine)
{
	uint64_t vals[NODE_ASK_MAX];
	/* (none at all, or only this process's: no search) */
	if (!inplace_ready())
		return false;
	int64_t used = atomic_load_explicit(&inplace_hdr->used, memory_order_acquire);
	if (used <= 0 || (!mine && used <= (int64_t)atomic_load(&ckc_node_inplace_n)))
		return false;
	size_t probed;
	size_t n = nodetab_find(inplace_tab, INPLACE_SLOTS, nodetab_key(canon), vals, NODE_ASK_MAX, &probed);
	if (n > NODE_ASK_MAX)
		n = NODE_ASK_MAX;
	pid_t me = inplace_me();
	bool found = false;
	int saved = errno;
	for (size_t i = 0; i < n && !found; i++) {
		pid_t pid = nodetab_val_pid(vals[i]);
		if (pid == me)
			found = mine;
		else if (pid_alive(pid))
			found = true;
		else
			while (nodetab_del(inplace_tab, INPLACE_SLOTS, vals[i]) == 0) /* a writer that died */
				atomic_fetch_sub(&inplace_hdr->used, 1);
	}
	errno = saved;
	return found;
}

CKC_TAGGED_PATH bool ckc_node_inplace_other(const char *canon)
{
	return inplace_by(canon, false);
}

CKC_TAGGED_PATH bool ckc_node_inplace_any(const char *canon)
{
	return inplace_by(canon, true);
}

/* ---- the service ----------------------------------------------------------- */

/* Publishes what this process holds of canon: an open writer's bytes so
 * far are handed over to the real file (its descriptors follow), a closed
 * version is written there. */
static int node_publish(const char *canon)
{
	ckc_stat_t st;
	int rc;

	if (!ckc_active() || ckc_stat(canon, &st) != 0)
		return NODE_NOT_HELD;
	if (!st.complete) {
		rc = ckc_hand_over_path(canon);
		if (rc == 0)
			return NODE_HANDED;
	} else {
		uint64_t t0 = ckc_now_ns();
		rc = ckc_materialize(canon);
		/* the program filled its descriptor table: another process
		 * waits to open this file. The library's own number is given
		 * up for it; the cache's publications take turns with it, each
		 * giving the number back as it ends. */
		uint64_t wait_ns = 1000000u;
		while (ckc_io_short(rc) && ckc_now_ns() - t0 < NODE_SHORT_WAIT_NS) {
			(void)ckc_ph_spare_base();
			struct timespec ts = { 0, (long)wait_ns };
			nanosleep(&ts, NULL);
			wait_ns = wait_ns * 2 < 50000000u ? wait_ns * 2 : 50000000u;
			rc = ckc_materialize(canon);
		}
		if (rc == 0 && !st.at_home)
			ckc_small_asked(st.size, ckc_now_ns() - t0);
	}
	return rc == -ENOENT ? NODE_NOT_HELD : rc;
}

/* A folder request (NODE_DIR_*) of another process about dir. */
static int node_publish_dir(const char *dir, uint64_t what)
{
	char key[PATH_MAX];
	int rc = 0;

	if (!ckc_active())
		return NODE_NOT_HELD;
	if (what != NODE_DIR_LIST)
		rc = ckc_dir_each_writer(dir, what == NODE_DIR_MOVE ? ckc_hand_over_path : ckc_forget);
	if (what != NODE_DIR_GONE) {
		int r = ckc_publish_under_asked(dir, NODE_DIR_WAIT_NS);
		if (!rc)
			rc = r;
	}
	if (what == NODE_DIR_LIST && (!rc || rc == -ENOENT) && ckc_writer_under(dir, key) == 0)
		return NODE_DIR_WRITING;
	return rc == -ENOENT ? NODE_NOT_HELD : rc;
}

/* Receives one datagram into buf: its length, or -errno. *cr gets the
 * sender's credentials (pid 0 when the kernel gave none); a descriptor
 * passed along goes to *fd (unless fd is NULL, or it was set already: -1
 * before the call), the others are closed at once. */
static ssize_t node_recv(int s, void *buf, size_t len, struct sockaddr_un *from,
			 socklen_t *fromlen, int flags, struct ucred *cr, int *fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(16 * sizeof(int))];
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr m = { .msg_name = from, .msg_namelen = from ? sizeof(*from) : 0,
			    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	ssize_t n = recvmsg(s, &m, flags | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	memset(cr, 0, sizeof(*cr));
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_CREDENTIALS) {
			memcpy(cr, CMSG_DATA(c), sizeof(*cr));
		} else if (c->cmsg_type == SCM_RIGHTS) {
			int fds[16];
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			memcpy(fds, CMSG_DATA(c), (k < 16 ? k : 16) * sizeof(int));
			for (size_t i = 0; i < k && i < 16; i++) {
				if (fd && *fd < 0)
					*fd = fds[i];
				else
					REAL(close)(fds[i]);
			}
		}
	}
	if (fromlen)
		*fromlen = m.msg_namelen;
	return n;
}

/* Whether process pid is a child of this one (/proc/PID/stat's fourth
 * field). */
static bool node_my_child(pid_t pid)
{
	char path[64], buf[512];
	int ppid = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (ckc_px_read_file(path, buf, sizeof(buf)) <= 0)
		return false;
	char *p = strrchr(buf, ')');
	return p && sscanf(p + 1, " %*c %d", &ppid) == 1 && (pid_t)ppid == node_getpid();
}

/* NODE_FD_GIVE from a vfork child of this process (pid): descriptor N
 * made a descriptor of its real file, and sent with the answer. */
static void node_give_fd(int s, const char *path, pid_t pid, const struct sockaddr_un *to, socklen_t tolen)
{
	node_rep_t rep = { NODE_MAGIC, NODE_NOT_HELD };
	char *end = NULL;
	long n = -1;
	unsigned long long id = 0;
	if (!strncmp(path, NODE_FD_PATH, strlen(NODE_FD_PATH)))
		n = strtol(path + strlen(NODE_FD_PATH), &end, 10);
	if (end && *end == ':')
		id = strtoull(end + 1, &end, 10);
	int fd = -1, at = -1;
	if (n >= 0 && n <= INT_MAX && id && end && !*end && node_my_child(pid) && ckc_active()) {
		/* the checkpoint the child has at n: another thread may have
		 * closed n since, and opened another file there */
		ckc_vfd_t *v = ckc_vfd_hold_id((int)n, id, &at);
		if (v) {
			rep.rc = v->switched ? 0 : ckc_px_vfd_make_real(v);
			ckc_vfd_put(v);
			int fl = rep.rc == 0 ? REAL(fcntl)(at, F_GETFL) : -1;
			if (fl >= 0 && !(fl & O_PATH))
				fd = at;
			else if (rep.rc == 0)
				rep.rc = -EBADF;
		} else if ((at = ckc_vfd_switched_at((int)n, id)) >= 0) {
			/* sent to its real file since the child was made (a
			 * hand-over of this thread's, another thread's) */
			rep.rc = 0;
			fd = at;
		}
	}
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { &rep, sizeof(rep) };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	(void)sendmsg(s, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Serves one request from the service socket: a datagram from a process
 * of this user (the kernel says who sent it), answered to its address. */
static void node_serve_one(int s)
{
	node_req_t req;
	struct sockaddr_un from;
	socklen_t fromlen;
	struct ucred cr;

	ssize_t n = node_recv(s, &req, sizeof(req), &from, &fromlen, 0, &cr, NULL);
	if (n < (ssize_t)offsetof(node_req_t, path) + 2 || !cr.pid || cr.uid != node_uid ||
	    req.magic < NODE_MAGIC || req.magic > NODE_FD_GIVE ||
	    fromlen <= offsetof(struct sockaddr_un, sun_path))
		return;
	req.path[(size_t)n - offsetof(node_req_t, path) - 1] = '\0';
	if (req.path[0] != '/')
		return;
	if (req.magic == NODE_FD_GIVE) {
		node_give_fd(s, req.path, cr.pid, &from, fromlen);
		return;
	}
	node_rep_t rep = { NODE_MAGIC, req.magic == NODE_MAGIC ? node_publish(req.path) :
							       node_publish_dir(req.path, req.magic) };
	(void)sendto(s, &rep, sizeof(rep), MSG_NOSIGNAL | MSG_DONTWAIT, (struct sockaddr *)&from,
		     fromlen);
}

/* An open checkpoint of at most NODE_IDLE_SMALL bytes that its program
 * left unwritten for NODE_IDLE_NS, or has kept open for NODE_OPEN_NS (a
 * status line flushed every 0.2 s never leaves it unwritten that long),
 * goes to its real file, its descriptors with it: a status or progress
 * file that a program without the library watches (a monitor, tail -f, a
 * handshake that waits for a line) sees what the program flushed, as
 * without the library, where the cache would show it only at the close.
 * Looked at every NODE_IDLE_LOOK_MS while checkpoints are open for
 * writing. */
#define NODE_IDLE_NS (500ull * 1000000u)
#define NODE_OPEN_NS (500ull * 1000000u)
#define NODE_IDLE_SMALL ((uint64_t)1 << 20)
#define NODE_IDLE_LOOK_MS 200
#define NODE_IDLE_MAX 8

static void node_idle_publish(void)
{
	static char keys[NODE_IDLE_MAX][PATH_MAX];
	static bool said;
	/* paths whose hand-over failed (a folder that takes no new file):
	 * not tried again at each look, each try said as an error, while the
	 * program keeps them open; their versions stay in the cache (the node
	 * thread's own) */
	static uint64_t failed[NODE_IDLE_MAX];
	static unsigned nfailed;
	size_t n = ckc_idle_writers(keys, NODE_IDLE_MAX, NODE_IDLE_NS, NODE_OPEN_NS, NODE_IDLE_SMALL);
	for (size_t i = 0; i < n && i < NODE_IDLE_MAX; i++) {
		uint64_t h = ckc_path_hash(keys[i]);
		bool before = false;
		for (unsigned k = 0; k < NODE_IDLE_MAX && !before; k++)
			before = failed[k] == h;
		if (before)
			continue;
		int rc = ckc_hand_over_path(keys[i]);
		if (rc) {
			failed[nfailed++ % NODE_IDLE_MAX] = h;
			ckc_debug("checkpoint %s, open and unwritten, could not go to its real path (%s)", keys[i],
				  strerror(-rc));
		} else if (!said) {
			said = true;
			ckc_info("checkpoint %s, of at most %llu KiB, was left open and unwritten for %llu ms, or "
				 "kept open for %llu ms: it is written at its real path from now on, where another "
				 "program may be reading it",
				 keys[i], (unsigned long long)(NODE_IDLE_SMALL >> 10), NODE_IDLE_NS / 1000000ull,
				 NODE_OPEN_NS / 1000000ull);
		} else {
			ckc_debug("checkpoint %s, open and unwritten, goes to its real path", keys[i]);
		}
	}
}

static void *node_main(void *arg)
{
	(void)arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* the program's signals are not for it */
	ckc_io_guard = 1;
	/* a datagram socket: no accept(2), which would hold the lowest free
	 * descriptor number while it waits and make a program's dup2 onto
	 * that number fail */
	uint64_t looked = 0;
	while (atomic_load(&node_serving)) {
		struct pollfd p = { node_listen, POLLIN, 0 };
		int r = poll(&p, 1, NODE_IDLE_LOOK_MS);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)))
			break;
		if (r > 0)
			node_serve_one(node_listen);
		uint64_t now = ckc_now_ns();
		if (now - looked >= NODE_IDLE_LOOK_MS * 1000000ull && ckc_writers_open() && ckc_active()) {
			looked = now;
			node_idle_publish();
		}
	}
	return NULL;
}

/* A datagram socket of the library's for one exchange, above the
 * program's numbers (intercept.h). */
static int node_socket(void)
{
	ckc_fd_quiet_begin();
	return ckc_fd_quiet_made(REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), CKC_FD_OWN_FLOOR);
}

/* fd again at a number near the top of the descriptor limit (or 4096, so
 * that a huge limit does not grow the descriptor table much): programs,
 * shells above all, use the low numbers as they please, with dup2 over
 * numbers they believe free. */
static int fd_out_of_the_way(int fd)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 256)
		return fd;
	long top = rl.rlim_cur > 4096 ? 4096 : (long)rl.rlim_cur;
	return ckc_fd_above(fd, (int)(top - (top / 4 < 64 ? top / 4 : 64)));
}

/* After a walk of the back: its pages leave this process (they stay in the
 * shared file), which would otherwise carry 480 KiB more resident memory
 * for the rest of its life (a search touches a few). */
static void node_walked(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)node_back() + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	uintptr_t e = (uintptr_t)(node_tab + NODE_SLOTS) & ~((uintptr_t)pg - 1);
	if (pg > 0 && e > a)
		(void)REAL(madvise)((void *)a, e - a, MADV_DONTNEED);
}

/* Frees the slots of processes that died without taking theirs back;
 * returns how many. */
static size_t node_sweep(void)
{
	size_t n = nodetab_sweep(node_tab, NODE_FRONT, pid_alive);
	if (node_back_used()) {
		size_t b = nodetab_sweep(node_back(), NODE_BACK, pid_alive);
		atomic_fetch_sub(&node_hdr->back, (int64_t)b);
		n += b;
		node_walked();
	}
	atomic_fetch_sub(&node_hdr->used, (int64_t)n);
	return n;
}

/* Empties the freed slots that searches would walk; returns how many. */
static size_t node_compact(void)
{
	size_t n = nodetab_compact(node_tab, NODE_FRONT);
	if (node_back_used()) {
		n += nodetab_compact(node_back(), NODE_BACK);
		node_walked();
	}
	return n;
}

/* Up to max distinct processes that hold something (a walk of the front,
 * and of the back while it is used). */
static size_t node_pids(pid_t *pids, size_t max)
{
	size_t k = nodetab_pids(node_tab, NODE_FRONT, pids, max);
	if (k < max && node_back_used()) {
		pid_t more[NODE_DIR_PIDS];
		size_t m = nodetab_pids(node_back(), NODE_BACK, more, NODE_DIR_PIDS);
		for (size_t i = 0; i < m && k < max; i++) {
			size_t j = 0;
			while (j < k && pids[j] != more[i])
				j++;
			if (j == k)
				pids[k++] = more[i];
		}
		node_walked();
	}
	return k;
}

/* Starts the service, once: at the first checkpoint this process writes,
 * the first time it can hold bytes another process may ask for (a process
 * that only reads checkpoints needs none, and pays nothing for it). */
static void node_start_once(void)
{
	struct sockaddr_un a;

	node_uid = geteuid();
	node_pid = node_getpid();
	atomic_store(&node_me, node_pid);
	if (!node_tab && node_attach(true) != 0)
		return;
	/* slots of processes that died without taking theirs back (none
	 * while no slot is used) */
	if (atomic_load_explicit(&node_hdr->used, memory_order_acquire) > 0) {
		(void)node_sweep();
		(void)node_compact();
	}
	ckc_fd_own_begin();
	int s = REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s >= 0) {
		s = fd_out_of_the_way(s);
		ckc_fd_mine_set(s, true); /* (before the section ends: intercept.h) */
	}
	ckc_fd_own_end();
	if (s < 0)
		return;
	int one = 1;
	socklen_t len = node_addr(&a, node_pid);
	if (setsockopt(s, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0 ||
	    bind(s, (struct sockaddr *)&a, len) != 0) {
		ckc_fd_mine_close(s);
		return;
	}
	node_listen = s;
	atomic_store(&node_serving, true);
	if (ckc_thread_start(&node_thread, node_main, NULL, "ckc-node", false) != 0) {
		atomic_store(&node_serving, false);
		ckc_fd_mine_close(s);
		node_listen = -1;
		return;
	}
	__atomic_store_n(&ckc_node_hook, node_hook, __ATOMIC_RELEASE);
}

static pthread_once_t node_once = PTHREAD_ONCE_INIT;

void ckc_node_start(void)
{
	pthread_once(&node_once, node_start_once);
}

void ckc_node_stop(void)
{
	if (!atomic_exchange(&node_serving, false))
		return;
	__atomic_store_n(&ckc_node_hook, NULL, __ATOMIC_RELEASE);
	/* wakes the service's poll: a datagram to itself */
	struct sockaddr_un a;
	socklen_t len = node_addr(&a, node_pid);
	int s = node_socket();
	if (s >= 0) {
		(void)sendto(s, "", 1, MSG_DONTWAIT, (struct sockaddr *)&a, len);
		REAL(close)(s);
	}
	pthread_join(node_thread, NULL);
	ckc_fd_mine_close(node_listen);
	node_listen = -1;
}

CKC_WARM_PATH bool ckc_node_serving(void)
{
	return atomic_load(&node_serving);
}

/* The folder in which this process last found that no process of the
 * node holds anything (no entry of the folder in the table; its path,
 * with its last '/'), and the count of folder entries made then, plus 1
 * (0: none kept). While the count stays the same, no process has begun
 * to hold something in a folder since, and a look at a file in that
 * folder asks nobody: a walker's stat of each name (du, ls -l, find
 * -newer) in a folder beside the ones a running job holds checkpoints in
 * costs a comparison, where it was a search of the table. A folder whose
 * path is longer is looked at each time, and so is every folder while
 * another thread looks at this one (busy; a process's thread-local
 * storage stays small: a dlopen() of the library takes it from a small
 * static reserve). */
#define NODE_NONE_DIR_MAX 256
static struct {
	atomic_bool busy;
	uint64_t made;
	size_t len;
	char dir[NODE_NONE_DIR_MAX];
} node_none_dir;

CKC_START_PATH void ckc_node_atfork_child(void)
{
	/* (each store only where it changes something: a page the child
	 * writes is copied first) */
	if (atomic_load(&node_me))
		atomic_store(&node_me, node_getpid());
	if (atomic_load_explicit(&node_self, memory_order_relaxed))
		atomic_store_explicit(&node_self, 0, memory_order_relaxed);
	if (atomic_load(&ckc_node_mine))
		atomic_store(&ckc_node_mine, 0); /* the parent's slots are the parent's */
	if (node_nfolders)
		node_nfolders = 0; /* and so are its folders' */
	if (atomic_load_explicit(&node_none_dir.busy, memory_order_relaxed))
		atomic_store(&node_none_dir.busy, false); /* another thread's look at fork */
	/* the service thread stayed in the parent; the child must not keep
	 * the parent's name bound once the parent is gone */
	if (atomic_load(&node_serving) && atomic_exchange(&node_serving, false)) {
		ckc_fd_mine_close(node_listen);
		node_listen = -1;
	}
	if (__atomic_load_n(&ckc_node_hook, __ATOMIC_ACQUIRE))
		__atomic_store_n(&ckc_node_hook, NULL, __ATOMIC_RELEASE);
}

/* ---- asking ------------------------------------------------------------------ */

/* What a holder that has not answered yet is doing, from /proc/PID/stat
 * (the state after the command's closing ')', and the kernel's flags six
 * fields on): running, stopped (SIGSTOP, a debugger's breakpoint), or gone
 * (no longer there, a zombie, or exiting: a process killed with SIGKILL
 * that frees a large memory takes a while to end, and never answers). */
enum { HOLDER_RUNS, HOLDER_STOPPED, HOLDER_GONE };
#define PF_EXITING_FLAG 0x4u
static int node_holder(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (ckc_px_read_file(path, buf, sizeof(buf)) <= 0)
		return kill(pid, 0) != 0 && errno == ESRCH ? HOLDER_GONE : HOLDER_RUNS;
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return HOLDER_RUNS;
	char st = p[2];
	unsigned long long flags = 0;
	bool ending = st == 'Z' || st == 'X' || st == 'x' ||
		      (sscanf(p + 3, " %*d %*d %*d %*d %*d %llu", &flags) == 1 && (flags & PF_EXITING_FLAG));
	/* (a main thread that ended with pthread_exit leaves the others
	 * running: the process's count of threads tells) */
	if (ending)
		return ckc_px_threads(pid) > 1 ? HOLDER_RUNS : HOLDER_GONE;
	return st == 'T' || st == 't' ? HOLDER_STOPPED : HOLDER_RUNS;
}

static bool node_stopped(pid_t pid)
{
	return node_holder(pid) == HOLDER_STOPPED;
}

/* Asks process pid to publish canon. Returns what it answered, NODE_GONE
 * when no process of this user serves that pid, or -errno; a descriptor
 * sent with the answer goes to *fd (fd NULL: closed). */
static int node_ask_one(pid_t pid, const char *canon, uint64_t what, int *fd)
{
	static atomic_bool said;
	struct sockaddr_un a, self = { .sun_family = AF_UNIX };
	node_req_t req = { what, { 0 } };
	node_rep_t rep;
	int rc, one = 1;

	int s = node_socket();
	if (s < 0)
		return -errno;
	/* an address of its own (chosen by the kernel) for the answer, and
	 * the sender's credentials on it */
	if (setsockopt(s, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0 ||
	    bind(s, (struct sockaddr *)&self, sizeof(sa_family_t)) != 0) {
		rc = -errno;
		goto out;
	}
	size_t n = strlen(canon);
	memcpy(req.path, canon, n + 1);
	socklen_t len = node_addr(&a, pid);
	uint64_t end = ckc_now_ns() + (uint64_t)NODE_ASK_WAIT_MS * 1000000u;
	/* the holder's queue is full while it does not run (stopped: every
	 * asker's request waits there): never block on it */
	while (sendto(s, &req, offsetof(node_req_t, path) + n + 1, MSG_NOSIGNAL | MSG_DONTWAIT,
		      (struct sockaddr *)&a, len) < 0) {
		if (errno == EINTR)
			continue;
		if ((errno != EAGAIN && errno != EWOULDBLOCK) || node_stopped(pid) || ckc_now_ns() >= end) {
			rc = errno == ECONNREFUSED || errno == ENOENT ? NODE_GONE :
			     errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
			goto out;
		}
		struct timespec ms10 = { 0, 10000000 };
		nanosleep(&ms10, NULL);
	}
	/* in slices, 2 ms first and growing: a holder that is stopped answers
	 * nothing until it runs again, and one that is exiting never does,
	 * so neither is waited for */
	uint64_t slice = 2000000u;
	for (;;) {
		uint64_t now = ckc_now_ns();
		struct pollfd p = { s, POLLIN, 0 };
		if (slice > end - now)
			slice = end - now;
		int ready = now < end ? poll(&p, 1, (int)(slice / 1000000u) + 1) : 0;
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready == 0 && ckc_now_ns() < end) {
			slice = slice * 2 < NODE_ASK_SLICE_NS ? slice * 2 : NODE_ASK_SLICE_NS;
			int h = node_holder(pid);
			if (h == HOLDER_RUNS)
				continue;
			if (h == HOLDER_GONE) {
				rc = NODE_GONE;
				goto out;
			}
			static atomic_bool said_stopped;
			if (!atomic_exchange(&said_stopped, true)) {
				if (what == NODE_MAGIC)
					ckc_warn("process %d, which holds %s, is stopped: this process reads "
						 "what its real path holds", (int)pid, canon);
				else
					ckc_warn("process %d, which holds checkpoints, is stopped: what it "
						 "holds under %s, if anything, is not there for this process",
						 (int)pid, canon);
			}
			rc = -EAGAIN;
			goto out;
		}
		if (ready <= 0) {
			if (!atomic_exchange(&said, true))
				ckc_warn("process %d did not publish %s within %d s: this process may "
					 "read an older version of it", (int)pid, canon,
					 NODE_ASK_WAIT_MS / 1000);
			rc = -ETIMEDOUT;
			goto out;
		}
		struct ucred cr;
		int passed = -1;
		ssize_t got = node_recv(s, &rep, sizeof(rep), NULL, NULL, MSG_DONTWAIT, &cr, fd ? &passed : NULL);
		if (got < 0)
			continue;
		bool from_holder = cr.uid == node_uid && cr.pid == pid;
		/* anything else (another user's datagram) is not the answer */
		if (from_holder && got == (ssize_t)sizeof(rep) && rep.magic == NODE_MAGIC) {
			rc = rep.rc;
			if (fd)
				*fd = passed;
			break;
		}
		if (passed >= 0)
			REAL(close)(passed);
	}
out:
	REAL(close)(s);
	return rc;
}

/* The table, mapped on first use in a process whose engine never started
 * (a forked child of one that did not, a tool that only reads). */
CKC_HOT_DATA static atomic_bool node_tried;
CKC_START_PATH static bool node_ready(void)
{
	if (node_tab)
		return true;
	if (atomic_load_explicit(&node_tried, memory_order_relaxed) || atomic_exchange(&node_tried, true))
		return node_tab != NULL;
	node_uid = geteuid();
	return node_attach(true) == 0;
}

CKC_START_PATH bool ckc_node_holds_any_unmapped(bool map)
{
	if (!map || !atomic_load(&ckc_icpt_on) || ckc_in_vfork_child())
		return true;
	int saved = errno;
	bool mapped = node_ready();
	errno = saved;
	return !mapped || ckc_node_holds_any();
}

/* The node's header, once this process mapped the table, else NULL. */
static node_hdr_t *node_hdr_mapped(void)
{
	_Atomic int64_t *u = atomic_load_explicit(&ckc_node_used, memory_order_acquire);
	return u ? (node_hdr_t *)(void *)((char *)u - offsetof(node_hdr_t, used)) : NULL;
}

uint64_t ckc_node_moves(void)
{
	node_hdr_t *h = node_hdr_mapped();
	return h ? atomic_load_explicit(&h->moves, memory_order_acquire) : 0;
}

void ckc_node_moves_note(void)
{
	int saved = errno;
	if (atomic_load(&ckc_icpt_on) && !ckc_in_vfork_child() && node_ready())
		atomic_fetch_add_explicit(&node_hdr_mapped()->moves, 1, memory_order_acq_rel);
	errno = saved;
}

/* Whether another process may hold something (two loads, no search): a
 * process reading back what it wrote itself, its versions still on their
 * way to the real files, asks nobody. */
CKC_TAGGED_PATH static bool node_anything(void)
{
	return node_ready() && ckc_node_holds_any();
}

/* A search that walked this many slots found a table full of freed slots
 * (left by a version of the library that never emptied them): this
 * process empties them, once. */
#define NODE_PROBE_LONG 64

static void node_compact_if(size_t probed)
{
	static atomic_bool done;
	if (probed > NODE_PROBE_LONG && !atomic_exchange(&done, true)) {
		size_t n = node_compact();
		ckc_debug("node table: %zu freed slots emptied", n);
	}
}

/* Whether canon's folder (its first len bytes) is the one kept, with
 * made the count of folder entries now. */
CKC_TAGGED_PATH static bool node_none_dir_is(const char *canon, size_t len, uint64_t made)
{
	if (atomic_exchange_explicit(&node_none_dir.busy, true, memory_order_acquire))
		return false;
	bool is = node_none_dir.made == made + 1 && node_none_dir.len == len && !memcmp(node_none_dir.dir, canon, len);
	atomic_store_explicit(&node_none_dir.busy, false, memory_order_release);
	return is;
}

/* canon's folder (its first len bytes) has no entry in the table: kept,
 * with made, the count of folder entries read before the search of
 * canon's own entry. */
static void node_none_dir_note(const char *canon, size_t len, uint64_t made)
{
	uint64_t vals[NODE_ASK_MAX];
	uint64_t k = node_folder_key(canon, len);
	size_t probed;
	if (!k || node_find(k, vals, &probed) != 0 ||
	    atomic_exchange_explicit(&node_none_dir.busy, true, memory_order_acquire))
		return;
	memcpy(node_none_dir.dir, canon, len);
	node_none_dir.len = len;
	node_none_dir.made = made + 1;
	atomic_store_explicit(&node_none_dir.busy, false, memory_order_release);
}

CKC_TAGGED_PATH void ckc_node_ask(const char *canon)
{
	uint64_t vals[NODE_ASK_MAX];

	if (!node_anything())
		return;
	/* (the count read before any search: an entry made after the
	 * searches below is counted after it, and the count read at the next
	 * look differs) */
	const char *slash = strrchr(canon, '/');
	size_t dl = slash ? (size_t)(slash - canon) + 1 : 0;
	uint64_t made = atomic_load_explicit(&node_hdr->folders, memory_order_acquire);
	bool memo = dl > 0 && dl < NODE_NONE_DIR_MAX && !atomic_load_explicit(&node_hdr->folders_lost, memory_order_acquire);
	if (memo && node_none_dir_is(canon, dl, made))
		return;
	size_t probed;
	size_t n = node_find(nodetab_key(canon), vals, &probed);
	node_compact_if(probed);
	if (n == 0) {
		if (memo)
			node_none_dir_note(canon, dl, made);
		return;
	}
	int saved = errno;
	/* a vfork child shares the parent's memory, and a process whose
	 * engine never started has no node_me */
	pid_t me = atomic_load(&node_me);
	if (!me || ckc_in_vfork_child())
		me = node_getpid();
	if (n > NODE_ASK_MAX)
		n = NODE_ASK_MAX;
	for (size_t i = 0; i < n; i++) {
		pid_t pid = nodetab_val_pid(vals[i]);
		bool asked = pid == me;
		for (size_t j = 0; j < i && !asked; j++)
			asked = nodetab_val_pid(vals[j]) == pid;
		if (asked)
			continue;
		int rc = node_ask_one(pid, canon, NODE_MAGIC, NULL);
		ckc_debug("asked process %d to publish %s: %s", (int)pid, canon,
			  rc == 0 ? "published" : rc == NODE_HANDED ? "its writer goes on in the real file" :
			  rc == NODE_NOT_HELD ? "not held" : rc == NODE_GONE ? "gone" : strerror(-rc));
		if (rc == NODE_HANDED)
			ckc_node_writer_handed = true;
		/* the holder is gone, or holds nothing of it: its slots go */
		if (rc == NODE_GONE || rc == NODE_NOT_HELD)
			while (node_del(vals[i]) == 0)
				;
	}
	errno = saved;
}

CKC_WARM_PATH bool ckc_node_others(void)
{
	return node_anything();
}

/* Asks the processes pids (n of them, this one's left out) about the
 * folder dir: whether one writes under it. errno kept. */
static bool node_ask_dir_of(const pid_t *pids, size_t n, const char *dir, int what)
{
	static const uint64_t magic[] = { [CKC_NODE_DIR_LIST] = NODE_DIR_LIST,
					  [CKC_NODE_DIR_MOVE] = NODE_DIR_MOVE,
					  [CKC_NODE_DIR_GONE] = NODE_DIR_GONE };
	static const char *const said[] = { [CKC_NODE_DIR_LIST] = "publish what it owes under",
					    [CKC_NODE_DIR_MOVE] = "hand over what it holds under",
					    [CKC_NODE_DIR_GONE] = "retire its writers under" };
	int saved = errno;
	pid_t me = atomic_load(&node_me);
	if (!me || ckc_in_vfork_child())
		me = node_getpid();
	bool swept = false, writing = false;
	for (size_t i = 0; i < n; i++) {
		if (pids[i] == me)
			continue;
		int rc = node_ask_one(pids[i], dir, magic[what], NULL);
		ckc_debug("asked process %d to %s %s: %s", (int)pids[i], said[what], dir,
			  rc == 0 ? "done" : rc == NODE_DIR_WRITING ? "done; it writes there" :
			  rc == NODE_NOT_HELD ? "nothing there" : rc == NODE_GONE ? "gone" : strerror(-rc));
		writing = writing || rc == NODE_DIR_WRITING;
		/* slots of processes that died without taking theirs back go
		 * (once), so that they are not asked again */
		if (rc == NODE_GONE && !swept) {
			swept = true;
			(void)node_sweep();
		}
	}
	errno = saved;
	return writing;
}

bool ckc_node_ask_dir(const char *dir, int what)
{
	pid_t pids[NODE_DIR_PIDS];

	if (!node_anything())
		return false;
	return node_ask_dir_of(pids, node_pids(pids, NODE_DIR_PIDS), dir, what);
}

bool ckc_node_ask_dir_one(const char *dir)
{
	uint64_t vals[NODE_ASK_MAX];
	pid_t pids[NODE_ASK_MAX];
	size_t probed, k = 0;

	if (!node_anything())
		return false;
	uint64_t key = node_folder_key(dir, strlen(dir));
	size_t n = key ? node_find(key, vals, &probed) : NODE_ASK_MAX + 1;
	if (n > NODE_ASK_MAX)
		return ckc_node_ask_dir(dir, CKC_NODE_DIR_LIST); /* more than fit: everyone */
	for (size_t i = 0; i < n; i++) {
		pid_t pid = nodetab_val_pid(vals[i]);
		size_t j = 0;
		while (j < k && pids[j] != pid)
			j++;
		if (j == k)
			pids[k++] = pid;
	}
	return k ? node_ask_dir_of(pids, k, dir, CKC_NODE_DIR_LIST) : false;
}

/* In a vfork child: its parent, which serves the node, or 0. */
static pid_t vfork_parent(void)
{
	pid_t parent = atomic_load(&node_me);
	return parent && ckc_in_vfork_child() && ckc_node_serving() ? parent : 0;
}

int ckc_node_claim_fd(int fd, uint64_t id)
{
	char path[sizeof(NODE_FD_PATH) + 48];
	pid_t parent = vfork_parent();
	int got = -1, saved = errno;

	if (!parent)
		return -ENOSYS;
	/* the placeholder's close-on-exec flag stays with the number */
	int fdfl = REAL(fcntl)(fd, F_GETFD);
	snprintf(path, sizeof(path), NODE_FD_PATH "%d:%llu", fd, (unsigned long long)id);
	int rc = node_ask_one(parent, path, NODE_FD_GIVE, &got);
	if (rc == 0 && got < 0)
		rc = -EBADF;
	if (rc == 0 && REAL(dup3)(got, fd, fdfl > 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		rc = -errno;
	if (got >= 0)
		REAL(close)(got);
	errno = saved;
	return rc == NODE_GONE || rc == NODE_NOT_HELD ? -EBADF : rc;
}

void ckc_node_parent_hands_over(void)
{
	pid_t parent = vfork_parent();
	if (!parent)
		return;
	int saved = errno;
	int rc = node_ask_one(parent, "/", NODE_DIR_MOVE, NULL);
	ckc_debug("asked the parent %d to hand over its writers: %s", (int)parent,
		  rc == 0 || rc == NODE_DIR_WRITING ? "done" : rc == NODE_NOT_HELD ? "nothing held" :
		  rc == NODE_GONE ? "gone" : strerror(-rc));
	errno = saved;
}

CKC_START_PATH void ckc_node_publish_others(void)
{
	/* no table on the node: nothing is held anywhere (not made here) */
	if (!node_tab) {
		node_uid = geteuid();
		if (node_attach(false) != 0)
			return;
	}
	(void)ckc_node_ask_dir("/", CKC_NODE_DIR_LIST);
}

CKC_TAGGED_PATH void ckc_node_ask_at(int dirfd, const char *path)
{
	char canon[PATH_MAX];

	/* the test first: the path need not be looked at when nothing is held */
	if (node_anything() && ckc_tag_path_at(dirfd, path, canon))
		ckc_node_ask(canon);
}

/* (out of line: its path is on the stack only where a pattern names the
 * rank) */
CKC_TAGGED_PATH __attribute__((noinline)) void ckc_node_ask_other_rank(int dirfd, const char *path)
{
	char canon[PATH_MAX];
	if (!path || !*path || ckc_io_guard || !ckc_tag_other_ranks() || !node_anything())
		return;
	int saved = errno;
	if (ckc_path_at(dirfd, path, canon) == 0 && ckc_tag_match_other_rank(canon))
		ckc_node_ask(canon);
	errno = saved;
}

/* canon is tagged: its holders are asked to publish it. True. */
CKC_TAGGED_PATH static bool asked_tagged(const char *canon)
{
	ckc_node_writer_handed = false; /* read only after a tagged answer */
	ckc_node_ask(canon);
	return true;
}

CKC_TAGGED_PATH static bool tagged_asked(int dirfd, const char *path, char *canon, bool named)
{
	if (named ? ckc_tagged_at_named(dirfd, path, canon) : ckc_tagged_at(dirfd, path, canon))
		return asked_tagged(canon);
	if (!atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) || ckc_in_vfork_child())
		ckc_node_ask_at(dirfd, path);
	else if (ckc_tag_other_ranks())
		ckc_node_ask_other_rank(dirfd, path);
	return false;
}

CKC_TAGGED_PATH bool ckc_tagged_asked(int dirfd, const char *path, char *canon)
{
	return tagged_asked(dirfd, path, canon, false);
}

CKC_TAGGED_PATH bool ckc_tagged_asked_named(int dirfd, const char *path, char *canon)
{
	return tagged_asked(dirfd, path, canon, true);
}

CKC_TAGGED_PATH bool ckc_tagged_asked_canonical(const char *path, char *canon)
{
	memcpy(canon, path, strlen(path) + 1);
	return asked_tagged(canon);
}
