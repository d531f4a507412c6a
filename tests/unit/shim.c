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

/* Runs the tests whose name holds argv[1] (all without it), one at a time,
 * each in a process of its own; prints each test's result and seconds,
 * then the synthesis. */
int main(int argc, char **argv)
{
	int pass = 0, fail = 0, crash = 0;
	const char *filter = argc > 1 ? argv[1] : NULL;

	setvbuf(stdout, NULL, _IONBF, 0);
	for (int i = 0; i < shim_n; i++) {
		char full[256];
		snprintf(full, sizeof(full), "%s/%s", shim_tests[i].suite, shim_tests[i].name);
		if (filter && !strstr(full, filter))
			continue;
		double t0 = shim_now();
		pid_t pid = fork();
		if (pid == 0) {
			shim_tests[i].fn();
			exit(0);
		}
		int st = 0;
		if (pid < 0 || waitpid(pid, &st, 0) != pid) {
			crash++;
			printf("[FAIL] %s::%s: fork or wait: %s\n", shim_tests[i].suite, shim_tests[i].name,
			       strerror(errno));
			continue;
		}
		double secs = shim_now() - t0;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			pass++;
			printf("[PASS] %s::%s (%.1f s)\n", shim_tests[i].suite, shim_tests[i].name, secs);
		} else if (WIFEXITED(st)) {
			fail++;
			printf("[FAIL] %s::%s (exit %d, %.1f s)\n", shim_tests[i].suite, shim_tests[i].name,
			       WEXITSTATUS(st), secs);
		} else {
			crash++;
			printf("[FAIL] %s::%s: crashed (signal %d, %.1f s)\n", shim_tests[i].suite,
			       shim_tests[i].name, WIFSIGNALED(st) ? WTERMSIG(st) : 0, secs);
		}
	}
	printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: %d \n",
	       pass + fail + crash, pass, fail, crash);
	return fail + crash ? 1 : 0;
}
