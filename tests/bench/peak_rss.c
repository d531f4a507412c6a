/* The peak resident memory of a program and of the children it waited for,
 * measured from a small process: a child's peak counts the memory of the
 * process that forked it (the kernel keeps the larger of the two across
 * exec), so a program started by the benchmark's own Python process (tens
 * of MiB) reported that as its peak whatever it used itself.
 *
 *     peak_rss FILE PROGRAM [ARG]...
 *
 * Runs PROGRAM with this process's environment, with LD_PRELOAD set to
 * $PEAK_RSS_PRELOAD where that is set (this process loads nothing of it),
 * writes its peak in KiB and the seconds it ran (from its fork to its exit)
 * to FILE, a line each, and exits as it did.
 *
 * With PEAK_RSS_AT_HAND_MIB=N, it first fills N MiB of memory (huge pages
 * where it can) and frees them, so that PROGRAM starts with that much
 * memory at hand in the guest: a virtual machine that hands freed memory
 * back to its host (free page reporting) otherwise makes whichever run
 * finds its memory handed back pay the host for every page, several times
 * what the same run costs with its memory at hand. The memory is freed
 * before PROGRAM is forked and counts nowhere in its peak. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Fills mib MiB of anonymous memory and unmaps it. */
static void at_hand(size_t mib)
{
	size_t len = mib << 20, huge = (size_t)2 << 20;
	char *p = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("peak_rss: mmap");
		return;
	}
	char *q = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	(void)madvise(q, len, MADV_HUGEPAGE);
	if (madvise(q, len, MADV_POPULATE_WRITE) != 0)
		for (size_t i = 0; i < len; i += 4096)
			((volatile char *)q)[i] = 1;
	munmap(p, len + huge);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: peak_rss FILE PROGRAM [ARG]...\n");
		return 2;
	}
	const char *hand = getenv("PEAK_RSS_AT_HAND_MIB");
	if (hand && atol(hand) > 0)
		at_hand((size_t)atol(hand));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("peak_rss: fork");
		return 126;
	}
	if (pid == 0) {
		const char *pre = getenv("PEAK_RSS_PRELOAD");
		if (pre) {
			setenv("LD_PRELOAD", pre, 1);
			unsetenv("PEAK_RSS_PRELOAD");
		}
		unsetenv("PEAK_RSS_AT_HAND_MIB");
		execvp(argv[2], argv + 2);
		perror(argv[2]);
		_exit(127);
	}
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR) {
			perror("peak_rss: wait4");
			return 126;
		}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ran = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	FILE *f = fopen(argv[1], "w");
	if (!f || fprintf(f, "%ld\n%.6f\n", ru.ru_maxrss, ran) < 0 || fclose(f) != 0) {
		perror(argv[1]);
		return 126;
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
