/* Children and new programs: fork, vfork, posix_spawn, system, popen, the
 * exec family and _exit. Before a child can exist, the tagged descriptors
 * it would inherit become real descriptors of their real files, and what
 * the cache owes the real files is published; a vfork child never enters
 * the cache, whose memory and locks it shares with its parent. */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "intercept.h"
#include "sigdefer.h"
#include "thread.h"
#include "log.h"
#include "owed.h"

/* How long a child or a new program waits at most for publications
 * already under way (a new program replaces the cache's memory: what is
 * not published then is lost, so it waits longer). */
#define SPAWN_WAIT_NS (60ull * 1000000000u)
#define EXEC_WAIT_NS (120ull * 1000000000u)

/* The shell system() and popen() run. */
#define CKC_SHELL "/bin/sh"

#if defined(__x86_64__)
#define CKC_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define CKC_ELF_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define CKC_ELF_MACHINE EM_PPC64
#else
#define CKC_ELF_MACHINE EM_NONE /* not known: every new program is taken for one that will not ask */
#endif

__thread pid_t ckc_tl_vfork_pid __attribute__((tls_model("initial-exec")));

bool ckc_vfork_child_slow(void)
{
	pid_t me = (pid_t)ckc_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	if (me != ckc_tl_vfork_pid)
		return true;
	/* the parent runs again: its child has gone or replaced itself */
	ckc_tl_vfork_pid = 0;
	return false;
}

/* Whether the cache runs in this process and the caller is the program. */
static bool spawn_applies(void)
{
	return atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) && !ckc_io_guard &&
	       !ckc_in_vfork_child();
}

enum child { CHILD_FORK, CHILD_SPAWN, CHILD_EXEC };

/* ---- whether a new program runs this library ------------------------------ */

/* Whether the program file at path is one the loader would preload this
 * library into: a dynamically linked executable of this machine's kind,
 * not set-user-ID, set-group-ID or given capabilities (the loader ignores
 * LD_PRELOAD's paths for those), or a script whose interpreter is such a
 * program (depth: the scripts left to follow); or no file at all (the
 * exec fails and starts nothing: a search of PATH tries each folder).
 * Raw system calls: this may run in a vfork child. errno is kept. */
CKC_START_PATH static bool program_preloads(const char *path, int depth)
{
	int saved = errno;
	bool ok = false;
	errno = ENOENT;
	long fd = path && *path ? ckc_syscall6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0) : -1;
	if (fd < 0) {
		ok = errno == ENOENT || errno == ENOTDIR;
		errno = saved;
		return ok;
	}
	struct stat st;
	union {
		ElfW(Ehdr) h;
		char b[256];
	} u;
	long n = -1;
	if (ckc_syscall6(SYS_fstat, fd, (long)&st, 0, 0, 0, 0) == 0 && S_ISREG(st.st_mode) &&
	    !(st.st_mode & (S_ISUID | S_ISGID)) &&
	    ckc_syscall6(SYS_fgetxattr, fd, (long)"security.capability", 0, 0, 0, 0) < 0)
		n = ckc_syscall6(SYS_pread64, fd, (long)u.b, sizeof(u.b) - 1, 0, 0, 0);
	if (n >= 2 && u.b[0] == '#' && u.b[1] == '!' && depth > 0) {
		/* #! interpreter [argument] */
		u.b[n] = '\0';
		char *i = u.b + 2, interp[sizeof(u.b)];
		i += strspn(i, " \t");
		size_t k = strcspn(i, " \t\n");
		memcpy(interp, i, k);
		interp[k] = '\0';
		ckc_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
		errno = saved;
		return k > 0 && program_preloads(interp, depth - 1);
	}
	if (n >= (long)sizeof(ElfW(Ehdr)) && !memcmp(u.h.e_ident, ELFMAG, SELFMAG) &&
	    u.h.e_ident[EI_CLASS] == (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) &&
	    u.h.e_machine == CKC_ELF_MACHINE && u.h.e_phentsize == sizeof(ElfW(Phdr)) &&
	    u.h.e_phnum > 0 && u.h.e_phnum <= 64) {
		/* the program headers, a few at a time (a forked child writes
		 * each page of stack it reaches) */
		ElfW(Phdr) ph[8];
		for (size_t at = 0; at < u.h.e_phnum && !ok; at += 8) {
			size_t k = u.h.e_phnum - at < 8 ? u.h.e_phnum - at : 8, len = k * sizeof(ph[0]);
			if (ckc_syscall6(SYS_pread64, fd, (long)ph, (long)len,
					 (long)(u.h.e_phoff + at * sizeof(ph[0])), 0, 0) != (long)len)
				break;
			for (size_t i = 0; i < k && !ok; i++)
				ok = ph[i].p_type == PT_INTERP; /* static programs load nothing */
		}
	}
	ckc_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
	errno = saved;
	return ok;
}

/* The program that execvp would run for file, as it searches PATH (the
 * first executable regular file), into out; false where none is found. */
static bool program_on_path(const char *file, char *out, size_t len)
{
	if (!file || !*file)
		return false;
	if (strchr(file, '/')) {
		size_t k = strlen(file);
		if (k >= len)
			return false;
		memcpy(out, file, k + 1);
		return true;
	}
	const char *p = getenv("PATH");
	if (!p)
		p = "/bin:/usr/bin";
	for (;;) {
		size_t k = strcspn(p, ":"), f = strlen(file);
		const char *dir = k ? p : ".";
		size_t d = k ? k : 1;
		if (d + 1 + f < len) {
			memcpy(out, dir, d);
			out[d] = '/';
			memcpy(out + d + 1, file, f + 1);
			struct stat st;
			if (ckc_syscall6(SYS_faccessat, AT_FDCWD, (long)out, X_OK, 0, 0, 0) == 0 &&
			    ckc_syscall6(SYS_newfstatat, AT_FDCWD, (long)out, (long)&st, 0, 0, 0) == 0 &&
			    S_ISREG(st.st_mode))
				return true;
		}
		if (!p[k])
			return false;
		p += k + 1;
	}
}

/* Whether the new program (path as execve takes it, or searched on PATH)
 * given envp runs this library with this process's configuration: it then
 * asks the processes that hold a checkpoint for it, as this process's
 * fork children do, and nothing need be published before it starts. */
/* program_preloads of the program execvp would run for file (its path's
 * buffer on the stack only for a search: see icpt_cwd_same). */
CKC_START_PATH __attribute__((noinline)) static bool program_on_path_preloads(const char *file)
{
	char found[PATH_MAX];
	int saved = errno;
	bool got = program_on_path(file, found, sizeof(found));
	errno = saved;
	return got && program_preloads(found, 2);
}

CKC_START_PATH static bool new_program_asks(const char *path, bool search, char *const envp[])
{
	if (!ckc_env_runs_library(envp))
		return false;
	return search ? program_on_path_preloads(path) : program_preloads(path, 2);
}

/* Before a child or a new program: descriptors it inherits become real
 * (every tagged one for a fork, vfork or posix_spawn, whose child may dup2
 * a close-on-exec one onto another number; those without FD_CLOEXEC for
 * an exec, system or popen), and the real files get what the cache owes
 * them, so that the child sees the versions closed before it started. */
CKC_START_PATH static void before_child(enum child kind, bool inherited_only, const char *who, bool child_asks)
{
	static atomic_bool said;
	int saved = errno;

	if (!spawn_applies() || !ckc_engine_started())
		return;
	ckc_vfd_demote_all(inherited_only, who);
	/* a forked child asks for what it opens (node.c); so does a new
	 * program that runs this library with this configuration (child_asks)
	 * while this process answers; a new program in place of this one
	 * takes the cache's memory with it */
	if (kind == CHILD_EXEC || !child_asks || !ckc_node_serving()) {
		uint64_t wait = kind == CHILD_EXEC ? EXEC_WAIT_NS : SPAWN_WAIT_NS;
		ckc_enter();
		int rc = ckc_publish_all(wait, kind == CHILD_EXEC);
		ckc_leave();
		if (rc == -ETIMEDOUT && !atomic_exchange(&said, true))
			ckc_warn("%s starts before every closed checkpoint reached its real path "
				 "(waited %llu s)%s", who, (unsigned long long)(wait / 1000000000u),
				 kind == CHILD_EXEC ? ": those not there yet are lost with this program" :
						      ": it may read older versions");
	}
	errno = saved;
}

/* Before a new program (posix_spawn, system, popen, exec; path as execve
 * takes it, searched on PATH where search is set, NULL where not known):
 * before_child, and, where the new program will not ask for what it
 * reads, every other process of the node publishes what it owes too. That
 * is told from wherever the process's image runs the library with a
 * configuration: a forked child's exec included (its interception is off,
 * its parent may hold them), not one whose library is off. */
CKC_START_PATH static void before_new_program(enum child kind, bool inherited_only, const char *who, const char *path,
			       bool search, char *const envp[])
{
	bool asks = path && new_program_asks(path, search, envp);
	before_child(kind, inherited_only, who, asks);
	/* a vfork child's parent kept its close-on-exec writers cached: a
	 * program that will not ask reads their real files */
	if (!asks && ckc_in_vfork_child() && !ckc_io_guard)
		ckc_node_parent_hands_over();
	if (!asks && ckc_library_configured() && !ckc_io_guard)
		ckc_node_publish_others();
}

CKC_START_PATH CKC_EXPORT pid_t fork(void)
{
	ckc_child_ready();
	before_child(CHILD_FORK, false, "a forked child", true);
	return REAL(fork)();
}

/* The C library's daemon() and forkpty() fork by its own call, which the
 * wrapper above does not see (the child would inherit the placeholders of
 * the checkpoints open for writing, and fail on them), and daemon()'s
 * parent ends with its own _exit, which writes nothing of the cache to the
 * real files: both are made of the wrapped calls once the cache runs. */
CKC_EXPORT int daemon(int nochdir, int noclose)
{
	if (!spawn_applies() || !ckc_engine_started())
		return REAL(daemon)(nochdir, noclose);
	pid_t p = fork();
	if (p < 0)
		return -1;
	if (p > 0)
		_exit(0); /* the cache's checkpoints reach their real paths first */
	if (setsid() < 0)
		return -1;
	if (!nochdir && chdir("/") != 0)
		return -1;
	if (!noclose) {
		int fd = open("/dev/null", O_RDWR);
		struct stat st;
		if (fd < 0)
			return -1;
		if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) {
			close(fd);
			errno = ENODEV;
			return -1;
		}
		(void)dup2(fd, 0);
		(void)dup2(fd, 1);
		(void)dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	return 0;
}

CKC_EXPORT pid_t forkpty(int *amaster, char *name, const struct termios *tp, const struct winsize *wp)
{
	int (*op)(int *, int *, char *, const struct termios *, const struct winsize *) = REAL(openpty);
	int (*lt)(int) = REAL(login_tty);
	if (!spawn_applies() || !ckc_engine_started())
		return REAL(forkpty)(amaster, name, tp, wp);
	int master, slave;
	if (op(&master, &slave, name, tp, wp) != 0)
		return -1;
	pid_t p = fork();
	if (p < 0) {
		int e = errno;
		close(master);
		close(slave);
		errno = e;
		return -1;
	}
	if (p == 0) {
		close(master);
		if (lt(slave) != 0)
			_exit(1);
		return 0;
	}
	*amaster = master;
	close(slave);
	return p;
}

/* ---- vfork ---------------------------------------------------------------- */

/* The C library's vfork, jumped to (not called) by the vfork below so that
 * it returns straight to the program's caller, in the child as well. */
__attribute__((visibility("hidden"))) pid_t (*ckc_real_vfork)(void);

static pid_t vfork_as_fork(void)
{
	return fork();
}

/* Runs in the program's thread before its vfork: the child will share this
 * memory, so everything it could need from the cache is done here, and the
 * thread is marked so that the child's calls pass the cache by. */
CKC_WARM_PATH __attribute__((visibility("hidden"), used)) void ckc_vfork_prepare(void)
{
	int saved = errno;
	if (!ckc_real_vfork) {
		dlsym_fn rd = ckc_real_dlsym();
		void *f = rd ? rd(RTLD_NEXT, "vfork") : NULL;
		ckc_real_vfork = f ? (pid_t(*)(void))f : vfork_as_fork;
	}
	ckc_vfork_snapshot(false);
	ckc_child_ready();
	if (spawn_applies()) {
		/* the program the child runs is not known yet: its exec asks
		 * the others to publish where it turns out not to ask itself.
		 * Only the checkpoints the child inherits become real files:
		 * while this process serves the node, a close-on-exec one the
		 * child keeps after all is claimed from here (ckc_vfd_check) */
		before_child(CHILD_SPAWN, ckc_node_serving(), "a vfork child", ckc_env_runs_library(environ));
		ckc_vfork_snapshot(true);
		ckc_enter();
		ckc_owed_fill_all();
		ckc_leave();
		ckc_tl_vfork_pid = (pid_t)ckc_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	}
	errno = saved;
}

#if defined(__x86_64__)
/* vfork: the preparation, then a jump to the C library's vfork with the
 * program's return address still on the stack (a call would leave this
 * function's frame for the child to return through, and the parent's
 * stack would be clobbered). */
__asm__(".pushsection .text.sorted.ckc.2,\"ax\",@progbits\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	subq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call ckc_vfork_prepare\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jmp *ckc_real_vfork(%rip)\n"
	"	.cfi_endproc\n"
	".size vfork, .-vfork\n"
	".popsection\n");
#else
/* Elsewhere vfork is a fork (which POSIX allows). */
CKC_WARM_PATH CKC_EXPORT pid_t vfork(void)
{
	return fork();
}
#endif

/* ---- the end of the main thread --------------------------------------------- */

/* A process ends when its last thread does (glibc then calls exit(0)),
 * which the library's threads, which never end, would prevent: a main
 * thread that ends with pthread_exit while the cache runs waits here for
 * the program's other threads instead, then ends the process so (its own
 * thread-specific data is not destroyed first). */
CKC_EXPORT void pthread_exit(void *ret)
{
	/* (whether or not the cache runs yet: the node's service and the
	 * signal thread start with the first checkpoint a process writes, a
	 * program thread's included, even one written straight to its real
	 * path, and they would keep a process whose main thread had gone) */
	if (gettid() == getpid() && atomic_load(&ckc_icpt_on) && !ckc_in_vfork_child()) {
		long ms = 1;
		for (;;) {
			long n = ckc_px_threads(0);
			if (n < 0)
				break;
			if (n - ckc_thread_live() <= 1)
				exit(0);
			struct timespec d = { 0, ms * 1000000L };
			nanosleep(&d, NULL);
			if (ms < 50)
				ms *= 2;
		}
	}
	REAL(pthread_exit)(ret);
	__builtin_unreachable();
}

/* ---- posix_spawn, system, popen --------------------------------------------- */

/* A file action that opens a path is the C library's to carry out in the
 * child, by calls of its own that this library does not see (the child's
 * later opens, through the library, ask): a tagged path gets what this
 * process and the others of the node hold of it when the action is added,
 * as an open of it here would. A reader of it in the child sees the
 * version closed before; a writer's bytes are not replaced by an older
 * version published after it. */
CKC_EXPORT int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd, const char *path,
						int oflag, mode_t mode)
{
	char canon[PATH_MAX];
	int saved = errno;
	if (!ckc_io_guard && ckc_tagged_asked(AT_FDCWD, path, canon))
		(void)ckc_hand_over_path(canon);
	errno = saved;
	int (*real)(posix_spawn_file_actions_t *, int, const char *, int, mode_t) =
		REAL(posix_spawn_file_actions_addopen);
	if (!real) {
		ckc_real_missing("posix_spawn_file_actions_addopen");
		return ENOSYS;
	}
	return real(fa, fd, path, oflag, mode);
}

CKC_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	before_new_program(CHILD_SPAWN, false, "a child of posix_spawn", path, false, envp);
	return REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}

CKC_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	before_new_program(CHILD_SPAWN, false, "a child of posix_spawnp", file, true, envp);
	return REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}

CKC_EXPORT int system(const char *cmd)
{
	if (cmd)
		before_new_program(CHILD_SPAWN, true, "a command run by system()", CKC_SHELL, false, environ);
	return REAL(system)(cmd);
}

CKC_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	before_new_program(CHILD_SPAWN, true, "a command run by popen()", CKC_SHELL, false, environ);
	return REAL(popen)(cmd, mode);
}

/* ---- the exec family -------------------------------------------------------- */

/* Before a new program replaces this one: what this process owes is
 * published, the bytes so far of its open writers included (the cache's
 * memory goes with the old program), and what the others owe where the
 * new program will not ask (before_new_program). A vfork child does only
 * the latter, through the node's service (its parent, suspended, answers
 * from its service thread). */
static void before_exec(const char *path, bool search, char *const envp[])
{
	before_new_program(CHILD_EXEC, true, "a new program (exec)", path, search, envp);
}

CKC_START_PATH CKC_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec(path, false, envp);
	return REAL(execve)(path, argv, envp);
}

CKC_EXPORT int execv(const char *path, char *const argv[])
{
	before_exec(path, false, environ);
	return REAL(execv)(path, argv);
}

CKC_START_PATH CKC_EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec(file, true, environ);
	return REAL(execvp)(file, argv);
}

CKC_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec(file, true, envp);
	return REAL(execvpe)(file, argv, envp);
}

CKC_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec(NULL, false, envp);
	return REAL(fexecve)(fd, argv, envp);
}

CKC_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
			int flags)
{
	before_exec(path[0] == '/' ? path : NULL, false, envp);
	return REAL(execveat)(dirfd, path, argv, envp, flags);
}

/* The list forms: their arguments up to the NULL, as an array (on the
 * stack, as the C library does: exec must not allocate). */
#define EXEC_LIST(first, ap, argv)                                         \
	size_t argc_ = 1;                                                  \
	va_start(ap, first);                                               \
	while (va_arg(ap, const char *))                                   \
		argc_++;                                                   \
	va_end(ap);                                                        \
	char *argv[argc_ + 1];                                             \
	argv[0] = (char *)(first);                                         \
	va_start(ap, first);                                               \
	for (size_t i_ = 1; i_ <= argc_; i_++)                             \
		argv[i_] = va_arg(ap, char *);

CKC_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	EXEC_LIST(arg, ap, argv);
	va_end(ap);
	before_exec(path, false, environ);
	return REAL(execv)(path, argv);
}

CKC_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	EXEC_LIST(arg, ap, argv);
	va_end(ap);
	before_exec(file, true, environ);
	return REAL(execvp)(file, argv);
}

CKC_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	EXEC_LIST(arg, ap, argv);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	before_exec(path, false, envp);
	return REAL(execve)(path, argv, envp);
}

/* ---- a change of user or group ------------------------------------------ */

/* Before this process takes another user or group (setpriv, su, runuser,
 * a daemon dropping root): the programs it runs then find another user's
 * table of the node, or none they may read, so they cannot ask this user's
 * processes for what they hold; what this process and the others of its
 * user owe is published first, while it still may ask them. */
static void before_identity(bool change)
{
	if (change)
		ckc_ids_changing();
	if (!change || !ckc_library_configured() || ckc_io_guard || ckc_in_vfork_child())
		return;
	int saved = errno;
	if (spawn_applies() && ckc_engine_started()) {
		ckc_enter();
		(void)ckc_publish_all(SPAWN_WAIT_NS, true);
		ckc_leave();
	}
	ckc_node_publish_others();
	atomic_store(&ckc_identity_changed, true);
	errno = saved;
}

void ckc_identity_changing(void)
{
	before_identity(true);
}

#define ID_CHANGES(v, now) ((v) != (__typeof__(v))-1 && (v) != (now))

CKC_EXPORT int setuid(uid_t u)
{
	before_identity(u != getuid() || u != geteuid());
	return REAL(setuid)(u);
}

CKC_EXPORT int seteuid(uid_t u)
{
	before_identity(ID_CHANGES(u, geteuid()));
	return REAL(seteuid)(u);
}

CKC_EXPORT int setreuid(uid_t r, uid_t e)
{
	before_identity(ID_CHANGES(r, getuid()) || ID_CHANGES(e, geteuid()));
	return REAL(setreuid)(r, e);
}

CKC_EXPORT int setresuid(uid_t r, uid_t e, uid_t s)
{
	before_identity(ID_CHANGES(r, getuid()) || ID_CHANGES(e, geteuid()) || s != (uid_t)-1);
	return REAL(setresuid)(r, e, s);
}

CKC_EXPORT int setgid(gid_t g)
{
	before_identity(g != getgid() || g != getegid());
	return REAL(setgid)(g);
}

CKC_EXPORT int setegid(gid_t g)
{
	before_identity(ID_CHANGES(g, getegid()));
	return REAL(setegid)(g);
}

CKC_EXPORT int setregid(gid_t r, gid_t e)
{
	before_identity(ID_CHANGES(r, getgid()) || ID_CHANGES(e, getegid()));
	return REAL(setregid)(r, e);
}

CKC_EXPORT int setresgid(gid_t r, gid_t e, gid_t s)
{
	before_identity(ID_CHANGES(r, getgid()) || ID_CHANGES(e, getegid()) || s != (gid_t)-1);
	return REAL(setresgid)(r, e, s);
}

/* ---- _exit ---------------------------------------------------------------- */

/* A program that ends with _exit (dash always does) skips exit's handlers,
 * the library's destructor among them: what the cache owes the real files
 * is written now, as at exit. */
CKC_WARM_PATH static void exit_drain(void)
{
	ckc_node_inplace_end_all();
	if (!spawn_applies())
		return;
	if (!ckc_engine_started()) {
		ckc_stats_unstarted();
		return;
	}
	/* a handler's _exit (async-signal-safe) may have interrupted the
	 * program in malloc, whose lock the drain would wait for */
	if (ckc_sig_in_handler() && ckc_term_exit_drain())
		return;
	ckc_enter();
	ckc_finish(0);
	ckc_node_stop();
	ckc_leave();
	ckc_node_inplace_end_all(); /* (the writers the end handed over) */
	ckc_vfd_locks_release_all();
	ckc_locks_sweep();
}

CKC_WARM_PATH CKC_EXPORT void _exit(int status)
{
	exit_drain();
	REAL(_exit)(status);
	ckc_syscall6(SYS_exit_group, status, 0, 0, 0, 0, 0);
	__builtin_unreachable();
}

CKC_EXPORT void _Exit(int status)
{
	exit_drain();
	REAL(_Exit)(status);
	ckc_syscall6(SYS_exit_group, status, 0, 0, 0, 0, 0);
	__builtin_unreachable();
}
