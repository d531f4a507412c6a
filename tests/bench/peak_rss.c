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
 * writes its peak in KiB to FILE and exits as it did. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: peak_rss FILE PROGRAM [ARG]...\n");
		return 2;
	}
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
	FILE *f = fopen(argv[1], "w");
	if (!f || fprintf(f, "%ld\n", ru.ru_maxrss) < 0 || fclose(f) != 0) {
		perror(argv[1]);
		return 126;
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
