/* e2e_helper: Exit races and path prefixes: writers still running when the program exits. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

static const char *race_dir;
static size_t race_size;
static uint64_t race_seed;
static const char *race_action;
static atomic_bool race_exiting;

/* What a program does when a write fails: gives up (exit(1)), or aborts. */
static _Noreturn void race_give_up(const char *call, const char *path)
{
	char msg[PATH_MAX + 128];
	int n = snprintf(msg, sizeof(msg), PROG " exitrace: writer: %s %s: %s\n", call, path,
			 strerror(errno));
	/* not through stdio, whose locks the exiting thread may hold */
	if (write(STDERR_FILENO, msg, (size_t)n) < 0)
		n = 0;
	if (strcmp(race_action, "abort") == 0)
		abort();
	exit(1);
}

/* Writes checkpoint after checkpoint (live_NNN.bin, stream seed + 1000 + n)
 * in 64 KiB pieces a millisecond apart until the process ends, so that its
 * writes meet the exit's work; with the action "abort-late" it aborts a while
 * after the exit began, as a thread that gives up on a timeout would. */
static void *race_writer(void *arg)
{
	(void)arg;
	unsigned char *b = pattern_buf(race_size, 0);
	char path[PATH_MAX];
	for (int n = 0;; n++) {
		snprintf(path, sizeof(path), "%s/live_%03d.bin", race_dir, n % 1000);
		pattern(b, 0, race_size, race_seed + 1000 + (uint64_t)n % 1000);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			race_give_up("open", path);
		for (size_t off = 0; off < race_size; off += 65536) {
			size_t k = race_size - off < 65536 ? race_size - off : 65536;
			if (write(fd, b + off, k) != (ssize_t)k)
				race_give_up("write", path);
			/* as a program computing between writes: the exit meets
			 * a file open and being written */
			sleep_ms(1);
			if (!strcmp(race_action, "abort-late") && atomic_load(&race_exiting)) {
				sleep_ms(30);
				abort();
			}
		}
		if (close(fd) != 0)
			race_give_up("close", path);
	}
	return NULL;
}

/* exitrace DIR N SIZE SEED exit|abort|abort-late: writes and closes N
 * checkpoints (done_NN.bin), opens empty.bin and leaves it open and empty,
 * starts a thread that writes more, and calls exit(0) while that thread is
 * writing. Whatever the thread sees, every closed checkpoint must be whole at
 * its real path afterwards, and empty.bin must exist. */
int m_exitrace(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED exit|abort|abort-late");
	char path[PATH_MAX];
	race_dir = arg.path;
	race_size = arg.size;
	race_seed = arg.seed;
	race_action = argv[5];
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/done_%02ld.bin", arg.path, i);
		gen_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	snprintf(path, sizeof(path), "%s/empty.bin", arg.path);
	xopen(path, O_WRONLY | O_CREAT | O_TRUNC);
	pthread_t t;
	if (pthread_create(&t, NULL, race_writer, NULL) != 0)
		fail("pthread_create");
	sleep_ms(20);
	atomic_store(&race_exiting, true);
	exit(0);
}

/* prefix PATH SEED: the file holds a prefix (possibly empty) of stream SEED. */
int m_prefix(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SEED");
	int fd = raw_open(arg.path, O_RDONLY);
	if (fd < 0)
		fail("%s: %s", arg.path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0)
		fail("fstat %s: %s", arg.path, strerror(errno));
	unsigned char *b = xmalloc((size_t)st.st_size);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = raw_read(fd, b + got, (size_t)st.st_size - got);
		if (r <= 0)
			fail("read %s: %s", arg.path, r < 0 ? strerror(errno) : "short");
		got += (size_t)r;
	}
	size_t d = pattern_diff(b, 0, got, arg.seed);
	if (d != got)
		fail("%s: byte %zu of %zu differs from what was written", arg.path, d, got);
	free(b);
	return 0;
}

/* ---- main ----------------------------------------------------------------- */

/* crash DIR N SIZE SEED segv|bus|fpe: writes and closes N checkpoints
 * (crash_NN.bin, streams SEED + i), then faults in its own code as a
 * program with a bug does: a store through a null pointer, a read past the
 * end of a mapped file, an integer division by zero. */
int m_crash(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED segv|bus|fpe");
	char path[PATH_MAX];
	for (long i = 0; i < arg.n; i++) {
		snprintf(path, sizeof(path), "%s/crash_%02ld.bin", arg.path, i);
		gen_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	const char *how = argv[5];
	if (strcmp(how, "segv") == 0) {
		volatile int *volatile p = NULL;
		*p = 1;
	} else if (strcmp(how, "bus") == 0) {
		char tmp[] = "/tmp/e2e-crash-XXXXXX";
		int fd = mkstemp(tmp);
		if (fd < 0 || ftruncate(fd, 4096) != 0)
			fail("mkstemp: %s", strerror(errno));
		volatile char *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
		unlink(tmp);
		if (m == MAP_FAILED)
			fail("mmap: %s", strerror(errno));
		(void)m[4096]; /* past the end of the file: SIGBUS */
	} else if (strcmp(how, "fpe") == 0) {
		volatile int zero = 0, one = 1;
		one = one / zero;
	}
	fail("the fault '%s' did not end the program", how);
}

static const char *xt_dir;

/* Writes and closes checkpoints (64 KiB pieces, computed between writes)
 * until the process ends. */
static void *xt_writer(void *arg)
{
	long k = (long)(intptr_t)arg;
	unsigned char *b = xmalloc(65536);
	char path[PATH_MAX];
	for (long i = 0;; i++) {
		snprintf(path, sizeof(path), "%s/x%ld_%06ld.bin", xt_dir, k, i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			continue;
		for (int p = 0; p < 16; p++) {
			for (size_t j = 0; j < 65536; j++) /* computing between writes */
				b[j] = (unsigned char)(i + (long)j + p);
			if (write(fd, b, 65536) < 0)
				break;
		}
		close(fd);
	}
	return NULL;
}

/* exitthreads DIR: four threads write and close checkpoints without pause
 * while the main thread calls exit(7) after 200 ms: the process must end
 * with status 7, as it does without the library. */
int m_exitthreads(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	xt_dir = argv[1];
	for (long k = 0; k < 4; k++) {
		pthread_t t;
		if (pthread_create(&t, NULL, xt_writer, (void *)(intptr_t)k) != 0)
			fail("pthread_create");
	}
	sleep_ms(200);
	exit(7);
}
