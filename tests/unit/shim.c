/* Runner of tests/unit/shim.h: forks one process per registered test, in
 * registration order, and prints a Criterion-style synthesis line. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim.h"

#define SHIM_MAX 256

static struct {
	const char *suite, *name;
	void (*fn)(void);
} shim_tests[SHIM_MAX];
static int shim_n;

void shim_register(const char *suite, const char *name, void (*fn)(void))
{
	if (shim_n < SHIM_MAX) {
		shim_tests[shim_n].suite = suite;
		shim_tests[shim_n].name = name;
		shim_tests[shim_n].fn = fn;
		shim_n++;
	}
}

void shim_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "[----] %s:%d: Assertion Failed\n[----]   assert(%s)", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	_exit(1);
}

static double shim_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs the tests whose name holds argv[1] (all without it), SHIM_JOBS of
 * them at once (default 1), each in a process of its own; prints each
 * test's result and seconds as it ends, then the synthesis. */
int main(int argc, char **argv)
{
	int pass = 0, fail = 0, crash = 0, jobs = 1, running = 0;
	const char *filter = argc > 1 ? argv[1] : NULL;
	const char *env = getenv("SHIM_JOBS");
	pid_t pids[SHIM_MAX];
	double t0[SHIM_MAX];

	if (env && atoi(env) > 0)
		jobs = atoi(env) < 16 ? atoi(env) : 16;
	setvbuf(stdout, NULL, _IONBF, 0);
	for (int i = 0; i <= shim_n; i++) {
		if (i < shim_n) {
			char full[256];
			snprintf(full, sizeof(full), "%s/%s", shim_tests[i].suite, shim_tests[i].name);
			pids[i] = 0;
			if (filter && !strstr(full, filter))
				continue;
		}
		/* wait for one to end while all slots are taken, or for all at the end */
		while (running > 0 && (running >= jobs || i == shim_n)) {
			int st = 0, k;
			pid_t pid = wait(&st);
			if (pid < 0)
				break;
			for (k = 0; k < i && pids[k] != pid; k++)
				;
			if (k == i)
				continue;
			running--;
			pids[k] = 0;
			double secs = shim_now() - t0[k];
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
				pass++;
				printf("[PASS] %s::%s (%.1f s)\n", shim_tests[k].suite, shim_tests[k].name, secs);
			} else if (WIFEXITED(st)) {
				fail++;
				printf("[FAIL] %s::%s (exit %d, %.1f s)\n", shim_tests[k].suite, shim_tests[k].name,
				       WEXITSTATUS(st), secs);
			} else {
				crash++;
				printf("[FAIL] %s::%s: crashed (signal %d, %.1f s)\n", shim_tests[k].suite,
				       shim_tests[k].name, WIFSIGNALED(st) ? WTERMSIG(st) : 0, secs);
			}
		}
		if (i == shim_n)
			break;
		t0[i] = shim_now();
		pid_t pid = fork();
		if (pid == 0) {
			shim_tests[i].fn();
			exit(0);
		}
		if (pid < 0) {
			crash++;
			printf("[FAIL] %s::%s: fork: %s\n", shim_tests[i].suite, shim_tests[i].name, strerror(errno));
			continue;
		}
		pids[i] = pid;
		running++;
	}
	printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: %d \n",
	       pass + fail + crash, pass, fail, crash);
	return fail + crash ? 1 : 0;
}
