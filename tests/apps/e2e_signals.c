/* e2e_helper: Signals a program takes for itself while the library's threads
 * run: a signalfd event loop and sigtimedwait. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
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

	for (int round = 0; round < 20; round++) {
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
