/* Start and stop of the preloaded library: the constructor reads the
 * configuration, points the engine's I/O at the real libc functions, loads
 * the tagged-path patterns and starts the engine; the destructor drains it
 * (and term.c, when a signal ends the program).
 * fork handlers keep the parent's locks sane and leave the child without a
 * cache. */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "intercept.h"
#include "path.h"
#include "owed.h"
#include "log.h"
#include "thread.h"
#include "aside.h"

CKC_HOT_DATA atomic_bool ckc_icpt_on;
atomic_bool ckc_inplace_ever;

/* The engine's files are kept above the numbers programs pick themselves
 * (a program that dup2s onto a number it believes free must not replace a
 * file the cache's threads opened meanwhile), when the limit allows and,
 * in a process with more than one thread, the descriptor table is that
 * large already (ckc_fd_above). */
#define ENGINE_FD_FLOOR CKC_FD_OWN_FLOOR

/* A descriptor the engine just made (in ckc_fd_own_begin's section, which
 * this ends): moved above the program's numbers, marked as the engine's
 * (a fork meanwhile waits: its child must not find it at the low number
 * it had until it is moved; nor does a program's call that takes the
 * lowest number find it there, intercept.h). */
static int icpt_own_fd(int fd)
{
	if (fd >= 0) {
		fd = ckc_fd_above(fd, ENGINE_FD_FLOOR);
		ckc_fd_mine_set(fd, true);
	}
	int e = errno;
	ckc_fd_own_end();
	errno = e;
	return fd;
}

static int icpt_open(const char *path, int flags, mode_t mode)
{
	ckc_fd_own_begin();
	return icpt_own_fd(REAL(open)(path, flags | O_CLOEXEC, mode));
}

static int icpt_close(int fd)
{
	ckc_fd_mine_set(fd, false);
	return REAL(close)(fd);
}

static int icpt_socket(int d, int t, int p)
{
	ckc_fd_own_begin();
	return icpt_own_fd(REAL(socket)(d, t | SOCK_CLOEXEC, p));
}

static int icpt_accept4(int s, struct sockaddr *a, socklen_t *n, int fl)
{
	ckc_fd_own_begin();
	return icpt_own_fd(REAL(accept4)(s, a, n, fl | SOCK_CLOEXEC));
}

static int icpt_eventfd(unsigned int v, int fl)
{
	ckc_fd_own_begin();
	return icpt_own_fd(REAL(eventfd)(v, fl | EFD_CLOEXEC));
}

static DIR *icpt_opendir(const char *path)
{
	int fd = icpt_open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
	if (fd < 0)
		return NULL;
	DIR *d = REAL(fdopendir)(fd);
	if (!d) {
		int e = errno;
		icpt_close(fd);
		errno = e;
	}
	return d;
}

/* The engine's streams (/proc files, its state files), on its files. */
static FILE *icpt_fopen(const char *path, const char *mode)
{
	int flags;
	switch (mode[0]) {
	case 'r': flags = O_RDONLY; break;
	case 'w': flags = O_WRONLY | O_CREAT | O_TRUNC; break;
	case 'a': flags = O_WRONLY | O_CREAT | O_APPEND; break;
	default: errno = EINVAL; return NULL;
	}
	for (const char *m = mode + 1; *m; m++) {
		if (*m == '+')
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		else if (*m == 'x')
			flags |= O_EXCL;
	}
	int fd = icpt_open(path, flags, 0666);
	if (fd < 0)
		return NULL;
	FILE *f = REAL(fdopen)(fd, mode);
	if (!f) {
		int e = errno;
		icpt_close(fd);
		errno = e;
	}
	return f;
}

static int icpt_fclose(FILE *f)
{
	ckc_fd_mine_set(fileno(f), false);
	return REAL(fclose)(f);
}

static int icpt_closedir(DIR *d)
{
	ckc_fd_mine_set(dirfd(d), false);
	return REAL(closedir)(d);
}

/* The engine's table of real functions, resolved in full before any of
 * its threads runs (a missing function is a stub that fails with ENOSYS);
 * its files are opened above the program's numbers. */
static void icpt_route_engine_io(void)
{
	/* the rest of both tables resolves on first use (the engine's as it
	 * starts): a process that runs a tool pays for what it calls */
	ckc_real_resolve_early();
	ckc_mem_own_alloc();
	ckc_io.open = icpt_open;
	ckc_io.close = icpt_close;
	ckc_io.fopen = icpt_fopen;
	ckc_io.fclose = icpt_fclose;
	ckc_io.opendir = icpt_opendir;
	ckc_io.closedir = icpt_closedir;
	ckc_io.socket = icpt_socket;
	ckc_io.accept4 = icpt_accept4;
	ckc_io.eventfd = icpt_eventfd;
}

/* Whether this fork is made by the process's only thread, which has never
 * had another (glibc's own mark): no other thread can hold a lock of the
 * library (the engine's threads, once started, are threads too). */
static bool fork_alone;

/* fork takes every lock of the library in rank order (src/lockrank.h),
 * so that the child finds none held by a thread it does not have; a
 * process of one thread has none to take. Each page either side writes
 * after the fork is copied first (a shell's fork of a tool paid 100 us for
 * the locks' pages), so the child writes only what it must change. */
CKC_START_PATH static void icpt_prepare(void)
{
	/* a child must not inherit pages that only the parent's cache can fill */
	if (atomic_load(&ckc_owed_count)) {
		ckc_enter();
		ckc_owed_fill_all();
		ckc_leave();
	}
	ckc_thread_single_init(); /* (once: the process's first fork) */
	bool alone = ckc_thread_single();
	if (fork_alone != alone) /* (written on a change only: the page stays shared with the child) */
		fork_alone = alone;
	if (!alone)
		ckc_atfork_prepare();
}

CKC_START_PATH static void icpt_parent(void)
{
	if (!fork_alone)
		ckc_atfork_parent();
}

CKC_START_PATH static void icpt_child(void)
{
	ckc_aside_firsts_forget();
	if (!fork_alone) {
		ckc_atfork_child();
		ckc_owed_atfork_child();
	}
	ckc_fdtab_atfork_child();
	atomic_store(&ckc_icpt_on, false);
	ckc_node_atfork_child();
}

/* A bad setting is reported once per job, not by every process of it: the
 * first process that reports it leaves in its environment, for its
 * children, a digest of the variables it read; a process that finds the
 * same digest there loads the configuration quietly. A child given other
 * variables reports them. */
#define ICPT_REPORTED "CKPTCACHE_REPORTED"

static void icpt_quiet(int level, const char *msg)
{
	(void)level;
	(void)msg;
}

/* Whether s begins with p. (A forked child compares its new program's
 * environment before the exec: in the library's own code, whose page it
 * has, rather than in the C library's string functions, whose pages it
 * would fault in again.) */
CKC_START_PATH static bool icpt_prefix(const char *s, const char *p)
{
	while (*p)
		if (*s++ != *p++)
			return false;
	return true;
}

/* A digest of every CKPTCACHE_ variable but ICPT_REPORTED: the sum of
 * their FNV-1a hashes, as a shell may pass them on in another order. */
CKC_START_PATH static unsigned long long icpt_env_digest(char *const *env)
{
	unsigned long long sum = 0;
	for (char *const *e = env; e && *e; e++) {
		if (!icpt_prefix(*e, "CKPTCACHE_") || icpt_prefix(*e, ICPT_REPORTED "="))
			continue;
		sum += ckc_path_hash(*e);
	}
	return sum;
}

/* v in lower-case hexadecimal, as "%llx" writes it (without the C
 * library's printf, which a tool that never prints would load for it). */
static void hex64(char out[17], unsigned long long v)
{
	char t[16];
	int n = 0;
	do {
		t[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	for (int i = 0; i < n; i++)
		out[i] = t[n - 1 - i];
	out[n] = '\0';
}

/* The digest of this process's variables, as the constructor read them. */
CKC_HOT_DATA static unsigned long long icpt_env_sum;

static int icpt_config_load(ckc_config_t *c)
{
	char digest[24];
	icpt_env_sum = icpt_env_digest(environ);
	hex64(digest, icpt_env_sum);
	const char *said = getenv(ICPT_REPORTED);
	bool quiet = said && strcmp(said, digest) == 0;
	void (*sink)(int, const char *) = ckc_log_sink;
	if (quiet)
		ckc_log_sink = icpt_quiet;
	int errors = ckc_config_from_env(c);
	ckc_log_sink = sink;
	if (errors && !quiet)
		setenv(ICPT_REPORTED, digest, 1);
	return errors;
}

/* The digest of this process's variables once the constructor found them
 * usable (0: never), and the name this library was loaded by, looked up
 * at the first child ("": not known; the loader's look walks the
 * library's symbols, which a process that starts no child need not pay). */
CKC_HOT_DATA static unsigned long long icpt_digest;
static _Atomic(const char *) icpt_lib_name; /* the loader's own string */
/* The user and group the library started as, and its folder where a
 * pattern is relative (resolved against it): a program started under
 * another identity or in another folder does not find what this one tags
 * through the same table and patterns. */
CKC_HOT_DATA static uid_t icpt_uid, icpt_euid;
CKC_HOT_DATA static gid_t icpt_gid, icpt_egid;
CKC_HOT_DATA static char *icpt_cwd;

static void icpt_note_self(const char *paths)
{
	icpt_uid = getuid();
	icpt_euid = geteuid();
	icpt_gid = getgid();
	icpt_egid = getegid();
	for (const char *p = paths; p && *p;) {
		if (*p != '/') {
			icpt_cwd = getcwd(NULL, 0);
			if (!icpt_cwd)
				return; /* (not known: no new program is taken to ask) */
			break;
		}
		p = strchr(p, ':');
		p = p ? p + 1 : NULL;
	}
	icpt_digest = icpt_env_sum | 1;
}

CKC_START_PATH bool ckc_library_configured(void)
{
	return icpt_digest != 0;
}

/* The name this library was loaded by, looked up at the first child, not
 * at start: the loader's look walks the library's symbols (a race computes
 * the same pointer twice). */
CKC_START_PATH static const char *icpt_lib_name_get(void)
{
	const char *n = atomic_load(&icpt_lib_name);
	if (n)
		return n;
	Dl_info di;
	n = dladdr((void *)icpt_lib_name_get, &di) && di.dli_fname && di.dli_fname[0] == '/' ? di.dli_fname : "";
	atomic_store(&icpt_lib_name, n);
	return n;
}

CKC_START_PATH void ckc_child_ready(void)
{
	static atomic_bool done;
	if (atomic_load_explicit(&done, memory_order_relaxed) || atomic_exchange(&done, true))
		return;
	int saved = errno;
	ckc_real_resolve_for_child();
	if (icpt_digest) {
		(void)icpt_lib_name_get();
		/* a child's look at a relative path it opens, while another
		 * process of the node holds checkpoints, reads the working
		 * folder: the C library's getcwd is bound here, once */
		char here[PATH_MAX];
		(void)!getcwd(here, sizeof(here));
		/* and what a child's exec looks at in its new environment:
		 * the C library's functions it calls are bound here, in the
		 * parent, not looked up again in each child (a shell's child
		 * that runs a tool faulted in the loader's and the C library's
		 * symbol tables for memcmp: 8 pages) */
		(void)ckc_env_runs_library(environ);
	}
	errno = saved;
}

/* Whether the working folder is the one the patterns were resolved in
 * (its buffer on the stack only where there is such a pattern: a forked
 * child writes each page of stack it reaches before its exec). */
CKC_START_PATH __attribute__((noinline)) static bool icpt_cwd_same(void)
{
	char here[PATH_MAX];
	return getcwd(here, sizeof(here)) && strcmp(here, icpt_cwd) == 0;
}

CKC_START_PATH bool ckc_env_runs_library(char *const envp[])
{
	if (!icpt_digest || !envp || (icpt_env_digest(envp) | 1) != icpt_digest)
		return false;
	if (getuid() != icpt_uid || geteuid() != icpt_euid || getgid() != icpt_gid || getegid() != icpt_egid)
		return false;
	if (icpt_cwd && !icpt_cwd_same())
		return false;
	const char *name = icpt_lib_name_get();
	size_t n = strlen(name);
	bool found = false;
	int lists = 0;
	for (char *const *e = envp; n && *e; e++) {
		if (!icpt_prefix(*e, "LD_PRELOAD="))
			continue;
		lists++; /* the loader takes one of several: none is trusted */
		/* the loader splits the list at spaces and colons */
		for (const char *t = *e + 11; *t;) {
			size_t k = 0;
			while (t[k] && t[k] != ' ' && t[k] != ':')
				k++;
			found = found || (k == n && !memcmp(t, name, n));
			t += k;
			t += *t != '\0';
		}
	}
	return found && lists == 1;
}

/* The configuration, read once by the constructor. */
CKC_HOT_DATA static ckc_config_t icpt_cfg;
static pthread_once_t icpt_engine_once = PTHREAD_ONCE_INIT;
CKC_HOT_DATA static atomic_bool icpt_engine_ok;

/* Reads passed to their real paths before the engine started: counted in
 * its statistics once it starts (a process that never starts it writes
 * none). */
static _Atomic uint64_t icpt_reads_before;

static void icpt_fold_reads(void)
{
	uint64_t n = atomic_exchange(&icpt_reads_before, 0);
	if (n) {
		ckc_enter();
		ckc_count_passed_reads(n);
		ckc_leave();
	}
}

static void icpt_engine_start(void)
{
	ckc_enter();
	/* the engine's table of C library functions, looked up until now
	 * on first use, is filled before its threads start */
	ckc_io_resolve();
	int rc = ckc_init_config(&icpt_cfg);
	ckc_leave();
	atomic_store(&icpt_engine_ok, rc == 0);
	if (rc == 0) {
		ckc_mem_engine_started();
		icpt_fold_reads();
	}
	else
		atomic_store(&ckc_icpt_on, false); /* everything passes through */
}

/* What a process needs once it can hold bytes that a real file lacks: the
 * node registry's service (other processes ask it to publish them) and
 * the end by signal (which writes them first). A process that only reads
 * checkpoints starts neither. */
static void icpt_writer_start(void)
{
	ckc_ph_keep();
	__atomic_store_n(&ckc_spare_fd_hook, ckc_ph_spare, __ATOMIC_RELEASE);
	ckc_term_install(icpt_cfg.term_wait_s);
	ckc_node_start();
}

void ckc_writer_start(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	ckc_enter(); /* (as ckc_engine_ready's) */
	pthread_once(&once, icpt_writer_start);
	ckc_leave();
}

int ckc_capture_mode(void)
{
	return icpt_cfg.capture;
}

uint64_t ckc_capture_min(void)
{
	return icpt_cfg.capture_min;
}

bool ckc_capture_pageable_only(void)
{
	return icpt_cfg.capture_pageable_only;
}

bool ckc_strict(void)
{
	return icpt_cfg.strict;
}

bool ckc_step_aside_on(void)
{
	return icpt_cfg.step_aside;
}

CKC_START_PATH bool ckc_engine_started(void)
{
	return atomic_load(&icpt_engine_ok);
}

static atomic_bool first_taken;

/* A process whose first checkpoint went to its real path, and whose node's
 * last run with the same CKPTCACHE_PATHS wrote its small checkpoints
 * faster there than into the cache (the record of the step-aside model),
 * writes the next ones there too, without starting the cache, for its
 * first CKC_START_DEFER_NS of checkpoints, while the first was under
 * 1 MiB: the cache's start and its end (its threads, its files, its tries
 * of the cache for the model, its drain) cost 2-3 ms, which a script that
 * writes a few thousand small files in 70 ms paid in full (0.5-1 us per
 * file), to send them where they went anyway. Once that time has gone by,
 * the next checkpoint starts the cache as the second did before: the start
 * is then at most a few per cent of what the program spent writing, and
 * the model measures both sides again. Without such a record the cache
 * starts with the second checkpoint. */
#define CKC_START_DEFER_NS (200ull * 1000000u)
static _Atomic uint64_t defer_from; /* when the first went (0: no deferring) */
/* The first checkpoint's real path, and whether its size allows deferring
 * (0: not looked at yet, 1: small, 2: large): a first checkpoint of 1 MiB
 * or more (an RTM proxy's 16 MiB) says that the cache is worth starting
 * at once, as before; its model then measures both sides. */
static char defer_first[PATH_MAX];
static atomic_int defer_size;

CKC_TAGGED_PATH bool ckc_first_write_aside(const char *canon)
{
	/* as stepping aside begins a process (engine.c): in copy mode, where
	 * every checkpoint goes to its real path anyway, on the real path
	 * unless what an earlier process on this node learnt says otherwise */
	if (!icpt_cfg.step_aside || icpt_cfg.capture != CKC_CAPTURE_COPY || icpt_cfg.persist != CKC_PERSIST_ALWAYS ||
	    atomic_load(&icpt_engine_ok) || atomic_load(&first_taken) || atomic_exchange(&first_taken, true))
		return false;
	bool small_home = false;
	if (!ckc_aside_first_home(icpt_cfg.paths, &small_home))
		return false;
	/* (one first at a time: first_taken) */
	size_t n = strlen(canon);
	if (small_home && n < sizeof(defer_first) && !atomic_load(&defer_from)) {
		memcpy(defer_first, canon, n + 1);
		atomic_store_explicit(&defer_from, ckc_now_ns(), memory_order_release);
	}
	return true;
}

CKC_TAGGED_PATH bool ckc_write_deferred(void)
{
	uint64_t from = atomic_load_explicit(&defer_from, memory_order_acquire);
	if (!from || atomic_load(&icpt_engine_ok) || ckc_now_ns() - from > CKC_START_DEFER_NS)
		return false;
	int size = atomic_load(&defer_size);
	if (!size) {
		struct stat st;
		int saved = errno;
		int (*rs)(const char *, struct stat *) = REAL(stat);
		size = rs && rs(defer_first, &st) == 0 && st.st_size < ASIDE_MIN_BYTES ? 1 : 2;
		errno = saved;
		atomic_store(&defer_size, size);
	}
	if (size != 1)
		return false;
	ckc_aside_first_note();
	return true;
}

void ckc_first_write_done(bool opened)
{
	if (opened)
		ckc_aside_first_note();
	else
		atomic_store(&first_taken, false); /* the next one may still go */
}

CKC_START_PATH void ckc_stats_unstarted(void)
{
	if (!ckc_aside_firsts())
		return;
	ckc_enter();
	ckc_stats_write_unstarted(&icpt_cfg);
	ckc_leave();
}

CKC_TAGGED_PATH void ckc_read_passed(void)
{
	atomic_fetch_add(&icpt_reads_before, 1);
	/* the engine may have started meanwhile (another thread's write) */
	if (atomic_load(&icpt_engine_ok))
		icpt_fold_reads();
}

CKC_TAGGED_PATH bool ckc_read_needs_engine(void)
{
	/* a hint file, an order or an eager prefetch may name a checkpoint
	 * ahead of its read: the engine brings it through the cache */
	return atomic_load(&icpt_engine_ok) || icpt_cfg.hints || icpt_cfg.order != CKC_ORDER_NONE ||
	       icpt_cfg.prefetch == CKC_PREFETCH_EAGER;
}

bool ckc_engine_ready(void)
{
	/* (inside the library for the once: a signal handler of the
	 * program's that the start deferred runs after it, not within it,
	 * where its own tagged open would wait for this once for ever) */
	ckc_enter();
	pthread_once(&icpt_engine_once, icpt_engine_start);
	ckc_leave();
	return atomic_load(&icpt_engine_ok);
}

/* pthread_atfork is a stub of libc_nonshared.a linked at the end of the
 * library's code, a page of its own that every process with a pattern
 * faulted in at its start for that one call: glibc's own entry instead. */
#ifdef __GLIBC__
extern void *__dso_handle __attribute__((visibility("hidden")));
extern int __register_atfork(void (*)(void), void (*)(void), void (*)(void), void *);
#define icpt_atfork(prepare, parent, child) __register_atfork(prepare, parent, child, __dso_handle)
#else
#define icpt_atfork pthread_atfork
#endif

/* What the loader calls at the process's exit in place of the C runtime's
 * empty _fini, which lies past the end of the library's code, on a page
 * no other call of a short program touches (-fini, configure.ac). */
CKC_START_PATH void ckc_fini_stub(void);
CKC_START_PATH void ckc_fini_stub(void)
{
}

__attribute__((constructor)) static void icpt_init(void)
{
	const char *paths = getenv("CKPTCACHE_PATHS");

	if (!paths || !*paths)
		return; /* nothing is tagged: the library does nothing at all */
	ckc_enter();
	icpt_route_engine_io();
	int errors = icpt_config_load(&icpt_cfg);
	if (errors && icpt_cfg.strict)
		abort(); /* CKPTCACHE_STRICT=1 asked for it; the loader said why */
	if (!errors && icpt_cfg.enabled && ckc_fdtab_init() == 0) {
		if (ckc_tag_load(paths, icpt_cfg.rank) > 0) {
			icpt_atfork(icpt_prepare, icpt_parent, icpt_child);
			ckc_services_t svc = { .start = ckc_engine_ready };
#ifdef HAVE_CUDA_H
			ckc_cuda_services(&svc);
#endif
			ckc_services_set(&svc);
#ifndef HAVE_CUDA_H
			if (icpt_cfg.capture == CKC_CAPTURE_DEVICE)
				ckc_warn("CKPTCACHE_CAPTURE=device: this build has no CUDA support; "
					 "checkpoints are cached as in copy mode");
#endif
			icpt_note_self(paths);
			atomic_store(&ckc_icpt_on, true);
			/* the engine (its memory, its threads) starts with the
			 * first tagged file, so a process that never opens one
			 * pays nothing; eager prefetching starts it now */
			if (icpt_cfg.prefetch == CKC_PREFETCH_EAGER)
				ckc_engine_ready();
		} else {
			ckc_error("CKPTCACHE_PATHS='%s': no usable pattern; the cache is disabled", paths);
		}
	}
	ckc_leave();
}

/* The program ends (exit, or a return from main). Its other threads run
 * until the process is gone, so interception stays on: their tagged calls
 * keep working (ckc_finish hands the files still open over to the real
 * paths), and none of them fails because the drain runs. */
__attribute__((destructor)) static void icpt_fini(void)
{
	if (!atomic_load(&icpt_engine_ok)) {
		/* the files it writes at their real paths are no longer written */
		ckc_node_inplace_end_all();
		atomic_store(&ckc_icpt_on, false);
		ckc_stats_unstarted();
		return;
	}
	ckc_stdio_flush_all();
	ckc_enter();
	ckc_finish(0);
	ckc_node_stop();
	ckc_leave();
	ckc_node_inplace_end_all(); /* (and the writers the end handed over) */
	ckc_locks_sweep();
}
