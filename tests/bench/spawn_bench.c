/* The cost of starting a short program: COUNT posix_spawn + waitpid of
 * PROGRAM, the spawner itself without any preloaded library. The child's
 * environment is the spawner's, less LD_PRELOAD, plus LD_PRELOAD=$CHILD_PRELOAD
 * when that is set, so only the child pays for what it preloads.
 *
 *     spawn_bench COUNT PROGRAM
 *
 * Prints "us_per_spawn=X", "faults_per_spawn=F" (the children's minor
 * page faults: a page the program touches first, or one a loaded library
 * writes; each costs a trap, and on a virtual machine often more), and the
 * children's user and system CPU time per spawn. */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

/* Microseconds from a to b. */
static double tv_us(struct timeval a, struct timeval b)
{
	return (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_usec - a.tv_usec);
}

int main(int argc, char **argv)
{
	if (argc != 3 || atoi(argv[1]) <= 0) {
		fprintf(stderr, "usage: spawn_bench COUNT PROGRAM\n");
		return 2;
	}
	int count = atoi(argv[1]);
	size_t n = 0;
	for (char **e = environ; *e; e++)
		n++;
	char **env = calloc(n + 2, sizeof(*env));
	if (!env)
		return 1;
	size_t k = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) != 0)
			env[k++] = *e;
	const char *pre = getenv("CHILD_PRELOAD");
	char *line = NULL;
	if (pre && *pre) {
		if (asprintf(&line, "LD_PRELOAD=%s", pre) < 0)
			return 1;
		env[k++] = line;
	}
	env[k] = NULL;
	char *av[] = { argv[2], NULL };
	struct timespec a, b;
	struct rusage ra, rb;
	getrusage(RUSAGE_CHILDREN, &ra);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < count; i++) {
		pid_t pid;
		int rc = posix_spawn(&pid, argv[2], NULL, NULL, av, env);
		if (rc) {
			fprintf(stderr, "spawn_bench: %s: %s\n", argv[2], strerror(rc));
			return 1;
		}
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "spawn_bench: %s ended with status %d\n", argv[2], st);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	getrusage(RUSAGE_CHILDREN, &rb);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	printf("us_per_spawn=%.1f\n", ns / 1e3 / count);
	printf("faults_per_spawn=%.1f\n", (double)(rb.ru_minflt - ra.ru_minflt) / count);
	printf("user_us_per_spawn=%.1f\nsys_us_per_spawn=%.1f\n", tv_us(ra.ru_utime, rb.ru_utime) / count,
	       tv_us(ra.ru_stime, rb.ru_stime) / count);
	free(line);
	free(env);
	return 0;
}
