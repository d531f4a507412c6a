/* e2e_helper: What a program does beside the library's threads: signals it
 * takes for itself (a signalfd event loop, sigtimedwait), and children it
 * starts while its own threads open and close checkpoints. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <sys/wait.h>

/* Waits up to 5 s on the signalfd for signal sig; fails if it never comes. */
static void expect_signal(int sfd, int sig, const char *what)
{
	struct pollfd p = { .fd = sfd, .events = POLLIN };
	for (;;) {
		int n = poll(&p, 1, 5000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fail("%s (%s) was never read from the signalfd: another thread of the process "
			     "took it",
			     what, strsignal(sig));
		struct signalfd_siginfo si;
		ssize_t r = read(sfd, &si, sizeof(si));
		if (r != (ssize_t)sizeof(si))
			fail("read of the signalfd: %s", r < 0 ? strerror(errno) : "short");
		if ((int)si.ssi_signo == sig)
			return;
	}
}

/* signals DIR N SIZE SEED: writes N checkpoints and reads them back, so the
 * library has started its threads; then blocks SIGUSR1, SIGUSR2 and SIGCHLD
 * in its only thread and takes them through a signalfd, as an event loop
 * does: a SIGUSR1 sent to the process, a child's SIGCHLD, and a SIGUSR2 taken
 * by sigtimedwait. A thread of the library that took one of them would end
 * the process (SIGUSR1's default) or lose it (SIGCHLD's). The checkpoints are
 * read back once more at the end. */
int m_signals(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED");
	char path[PATH_MAX];
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/sig_%02ld.bin", arg.path, i);
		gen_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/sig_%02ld.bin", arg.path, i);
		check_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	/* the library's threads are running now (flushes of what was written) */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		fail("sigprocmask: %s", strerror(errno));
	sigset_t fdset;
	sigemptyset(&fdset);
	sigaddset(&fdset, SIGUSR1);
	sigaddset(&fdset, SIGCHLD);
	int sfd = signalfd(-1, &fdset, SFD_CLOEXEC);
	if (sfd < 0)
		fail("signalfd: %s", strerror(errno));

	for (int round = 0; round < 8; round++) {
		if (kill(getpid(), SIGUSR1) != 0)
			fail("kill: %s", strerror(errno));
		expect_signal(sfd, SIGUSR1, "SIGUSR1 sent to the process");
		pid_t c = fork();
		if (c < 0)
			fail("fork: %s", strerror(errno));
		if (c == 0)
			_exit(0);
		expect_signal(sfd, SIGCHLD, "a child's SIGCHLD");
		int st;
		if (waitpid(c, &st, 0) != c)
			fail("waitpid: %s", strerror(errno));
		if (kill(getpid(), SIGUSR2) != 0)
			fail("kill: %s", strerror(errno));
		sigset_t two;
		sigemptyset(&two);
		sigaddset(&two, SIGUSR2);
		struct timespec ts = { 5, 0 };
		if (sigtimedwait(&two, NULL, &ts) != SIGUSR2)
			fail("SIGUSR2 sent to the process never came to sigtimedwait: %s",
			     strerror(errno));
		/* more checkpoints between rounds, so that threads the library
		 * starts late are there too */
		snprintf(path, sizeof(path), "%s/sig_r%02d.bin", arg.path, round);
		gen_file(path, arg.size, arg.seed + 100 + (uint64_t)round, 0);
		check_file(path, arg.size, arg.seed + 100 + (uint64_t)round, 0);
	}
	close(sfd);
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/sig_%02ld.bin", arg.path, i);
		check_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	return 0;
}

static const char *spawn_dir;
static size_t spawn_size;
static atomic_bool spawn_stop;
static atomic_long spawn_rounds;

/* Writes its own files again and again and reads each back: descriptors
 * of tagged files open and close all the time. */
static void *spawn_churner(void *arg)
{
	long k = (long)(intptr_t)arg;
	unsigned char *b = xmalloc(spawn_size);
	char path[PATH_MAX];
	for (long i = 0; !atomic_load(&spawn_stop); i++) {
		snprintf(path, sizeof(path), "%s/c%ld_%ld.bin", spawn_dir, k, i % 5);
		uint64_t seed = (uint64_t)(k * 1000 + i % 5);
		pattern(b, 0, spawn_size, seed);
		int fd = xopen(path, O_WRONLY | O_CREAT | O_TRUNC);
		write_all(fd, b, spawn_size, path);
		xclose(fd, path);
		fd = xopen(path, O_RDONLY);
		size_t got = read_all(fd, b, spawn_size, path);
		xclose(fd, path);
		if (got != spawn_size || pattern_diff(b, 0, spawn_size, seed) != spawn_size)
			fail("%s: read back differs from what was written", path);
		atomic_fetch_add(&spawn_rounds, 1);
	}
	free(b);
	return NULL;
}

/* spawnrace DIR N SIZE SEED: four threads write and read back their own
 * tagged files without pause while the main thread starts N children in
 * turn (posix_spawn of /bin/true, vfork+exec, fork): each start hands the
 * program's tagged descriptors over to their real files while the threads
 * close them. Every child must end well and every read be exact. */
int m_spawnrace(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED");
	spawn_dir = arg.path;
	spawn_size = arg.size;
	pthread_t t[4];
	for (long k = 0; k < 4; k++)
		if (pthread_create(&t[k], NULL, spawn_churner, (void *)(intptr_t)k) != 0)
			fail("pthread_create");
	extern char **environ;
	char *const targv[] = { "true", NULL };
	for (long i = 0; i < arg.n; i++) {
		pid_t c = -1;
		switch (i % 3) {
		case 0:
			if (posix_spawn(&c, "/bin/true", NULL, NULL, targv, environ) != 0)
				fail("posix_spawn: %s", strerror(errno));
			break;
		case 1:
			c = vfork();
			if (c == 0) {
				execv("/bin/true", targv);
				_exit(127);
			}
			break;
		default:
			c = fork();
			if (c == 0)
				_exit(0);
			break;
		}
		if (c < 0)
			fail("starting child %ld: %s", i, strerror(errno));
		int st;
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail("child %ld ended badly (status %#x)", i, st);
	}
	atomic_store(&spawn_stop, true);
	for (int k = 0; k < 4; k++)
		pthread_join(t[k], NULL);
	if (atomic_load(&spawn_rounds) < 4)
		fail("the writer threads made only %ld rounds", atomic_load(&spawn_rounds));
	return 0;
}

/* ---- a signal handler that writes a checkpoint -------------------------- */

#define HW_RECORDS 4096
#define HW_REC 64
static int hw_fd = -1;
static volatile sig_atomic_t hw_next;
static volatile sig_atomic_t hw_stop;
static ssize_t hw_rc[HW_RECORDS];
static int hw_errno[HW_RECORDS];

static void hw_record(unsigned char *r, long k)
{
	for (int i = 0; i < HW_REC; i++)
		r[i] = (unsigned char)(k * 31 + i * 7 + 1);
}

static void hw_handler(int sig)
{
	(void)sig;
	int saved = errno;
	long k = hw_next;
	if (!hw_stop && k < HW_RECORDS) {
		unsigned char r[HW_REC];
		hw_record(r, k);
		hw_rc[k] = pwrite(hw_fd, r, sizeof(r), (off_t)k * HW_REC);
		hw_errno[k] = errno;
		hw_next = (sig_atomic_t)(k + 1);
	}
	errno = saved;
}

/* handlerwrites DIR N SIZE SEED: a SIGALRM handler, run every 100 us,
 * writes a record into a checkpoint open for the whole run (DIR/log.bin)
 * while the program writes N checkpoints of SIZE (DIR/hw_K.bin) and forks
 * a child after each: the handler interrupts the program inside the
 * library's calls and inside its fork. Every record the handler wrote, and
 * every checkpoint, is read back; the run must end (a handler that waited
 * for what the thread it interrupted holds would wait for ever). */
int m_handlerwrites(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED");
	char path[PATH_MAX];
	/* the cache starts with the second checkpoint: two first */
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/hw_warm%d.bin", arg.path, i);
		gen_file(path, arg.size, arg.seed + 100 + (uint64_t)i, 0);
	}
	snprintf(path, sizeof(path), "%s/log.bin", arg.path);
	hw_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (hw_fd < 0)
		fail("open %s: %s", path, strerror(errno));
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = hw_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGALRM, &sa, NULL) != 0)
		fail("sigaction: %s", strerror(errno));
	struct itimerval it = { { 0, 100 }, { 0, 100 } };
	if (setitimer(ITIMER_REAL, &it, NULL) != 0)
		fail("setitimer: %s", strerror(errno));
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/hw_%02ld.bin", arg.path, i);
		gen_file(path, arg.size, arg.seed + (uint64_t)i, 64 << 10);
		pid_t c = fork();
		if (c < 0)
			fail("fork: %s", strerror(errno));
		if (c == 0)
			_exit(0);
		int st;
		while (waitpid(c, &st, 0) < 0 && errno == EINTR)
			;
	}
	hw_stop = 1;
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	long n = hw_next;
	if (n < 10)
		fail("the handler ran %ld times: the timer did not interrupt the program", n);
	unsigned char want[HW_REC], got[HW_REC];
	for (long k = 0; k < n; k++) {
		if (hw_rc[k] != HW_REC)
			fail("the handler's write %ld of %ld: %s", k, n,
			     hw_rc[k] < 0 ? strerror(hw_errno[k]) : "short");
		hw_record(want, k);
		if (pread(hw_fd, got, HW_REC, (off_t)k * HW_REC) != HW_REC || memcmp(got, want, HW_REC))
			fail("record %ld of %ld read back wrong", k, n);
	}
	xclose(hw_fd, "log.bin");
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/hw_%02ld.bin", arg.path, i);
		check_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	printf("records=%ld\n", n);
	return 0;
}

/* handlerlog PATH: the handler's records at PATH, each as written (read
 * without the library). */
int m_handlerlog(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH");
	int fd = open(arg.path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		fail("%s: %s", arg.path, strerror(errno));
	if (st.st_size < 10 * HW_REC || st.st_size % HW_REC)
		fail("%s: %lld bytes, not ten records or more", arg.path, (long long)st.st_size);
	long n = (long)(st.st_size / HW_REC);
	unsigned char want[HW_REC], got[HW_REC];
	for (long k = 0; k < n; k++) {
		hw_record(want, k);
		if (pread(fd, got, HW_REC, (off_t)k * HW_REC) != HW_REC || memcmp(got, want, HW_REC))
			fail("record %ld of %ld wrong at %s", k, n, arg.path);
	}
	close(fd);
	return 0;
}

/* ---- _exit in a signal handler ------------------------------------------ */

static void hx_handler(int sig)
{
	(void)sig;
	_exit(7);
}

/* handlerexit DIR N SIZE SEED: writes N checkpoints (the last left open),
 * then allocates and frees without pause until a SIGALRM handler ends the
 * program with _exit(7), as a time limit's handler does: it interrupts
 * malloc most times, whose lock the library's work at _exit must not wait
 * for. The checkpoints are checked at their real paths afterwards. */
int m_handlerexit(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED");
	char path[PATH_MAX];
	int last = -1;
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/hx_%02ld.bin", arg.path, i);
		unsigned char *b = pattern_buf(arg.size, arg.seed + (uint64_t)i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			fail("open %s: %s", path, strerror(errno));
		write_all(fd, b, arg.size, path);
		free(b);
		if (i + 1 < arg.n)
			xclose(fd, path);
		else
			last = fd;
	}
	(void)last;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = hx_handler;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) != 0)
		fail("sigaction: %s", strerror(errno));
	struct itimerval it = { { 0, 0 }, { 0, 200000 } };
	if (setitimer(ITIMER_REAL, &it, NULL) != 0)
		fail("setitimer: %s", strerror(errno));
	void *keep[64] = { 0 };
	unsigned r = 1;
	for (;;) {
		r = r * 1103515245u + 12345u;
		unsigned j = (r >> 8) % 64;
		free(keep[j]);
		keep[j] = malloc((r >> 4) % 100000 + 1);
	}
}

/* ---- a handler that writes checkpoints while the program allocates ----- */

static char hm_dir[PATH_MAX];
static volatile sig_atomic_t hm_runs, hm_bad;

/* handlermalloc's "held" handler: reads back a checkpoint the program
 * wrote before (which the cache holds, unpublished, under
 * CKPTCACHE_PERSIST=never: the handler's open and read are the cache's) */
static void hm_held_handler(int sig)
{
	(void)sig;
	int saved = errno;
	char p[PATH_MAX], r[600];
	snprintf(p, sizeof(p), "%s/held.bin", hm_dir);
	int fd = open(p, O_RDONLY);
	ssize_t got = fd >= 0 ? read(fd, r, sizeof(r)) : -1;
	if (fd >= 0)
		close(fd);
	if (got != 512 || r[0] != 'h' || r[511] != 'h')
		hm_bad++;
	hm_runs++;
	errno = saved;
}

static void hm_handler(int sig)
{
	(void)sig;
	int saved = errno;
	char p[PATH_MAX], b[512], r[600];
	int k = hm_runs % 4;
	snprintf(p, sizeof(p), "%s/alarm%d.bin", hm_dir, k);
	memset(b, 'a' + k, sizeof(b));
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, b, sizeof(b)) != (ssize_t)sizeof(b))
		hm_bad++;
	if (fd >= 0)
		close(fd);
	fd = open(p, O_RDONLY);
	ssize_t got = fd >= 0 ? read(fd, r, sizeof(r)) : -1;
	if (fd >= 0)
		close(fd);
	if (got != (ssize_t)sizeof(b) || memcmp(r, b, sizeof(b)))
		hm_bad++;
	hm_runs++;
	errno = saved;
}

/* handlermalloc DIR N [held]: a SIGALRM handler, every 500 us, writes a
 * small checkpoint and reads it back (open, write, read and close are
 * async-signal-safe) while the program only allocates and frees, N
 * times (3M: 3 x 2^20): the handler interrupts malloc most times, whose lock the
 * library's work for the handler's calls waited for, for ever. With
 * "held", the program writes DIR/held.bin first and the handler only
 * reads it back. */
int m_handlermalloc(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N [held]");
	bool held = argc > 3 && !strcmp(argv[3], "held");
	snprintf(hm_dir, sizeof(hm_dir), "%s", arg.path);
	if (held) {
		char p[PATH_MAX], b[512];
		snprintf(p, sizeof(p), "%s/held.bin", hm_dir);
		memset(b, 'h', sizeof(b));
		int fd = xopen(p, O_WRONLY | O_CREAT | O_TRUNC);
		write_all(fd, (unsigned char *)b, sizeof(b), p);
		xclose(fd, p);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = held ? hm_held_handler : hm_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGALRM, &sa, NULL) != 0)
		fail("sigaction: %s", strerror(errno));
	struct itimerval it = { { 0, 500 }, { 0, 500 } };
	setitimer(ITIMER_REAL, &it, NULL);
	void *keep[64] = { 0 };
	unsigned r = 7;
	for (long i = 0; i < arg.n; i++) {
		r = r * 1103515245u + 12345u;
		unsigned j = (r >> 8) % 64;
		free(keep[j]);
		keep[j] = (r & 1) ? malloc((r >> 4) % 100000 + 1) : calloc(1, (r >> 4) % 5000 + 1);
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	if (hm_runs < 10 || hm_bad)
		fail("the handler ran %d times, %d of its checks failed", (int)hm_runs, (int)hm_bad);
	return 0;
}
