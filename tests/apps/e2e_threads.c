/* e2e_helper: Threads, forks and shared descriptors: concurrent writers and readers, churn, descriptors read by children, several processes writing one file. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#define NWRITERS 4
#define NSHARERS 2
/* odd sizes so that no write lines up with the cache's 4 KiB extents */
#define THR_CHUNK 65537u
#define SHARED_CHUNK 40961u

struct thr {
	pthread_t tid;
	int idx;
	char path[PATH_MAX];
	size_t size;
	uint64_t seed;
	int fd; /* shared descriptor for the pwrite threads */
	const char *err;
	int err_no;
};

static pthread_barrier_t thr_barrier;

static void *writer_thread(void *arg)
{
	struct thr *t = arg;
	unsigned char *b = pattern_buf(t->size, t->seed);
	pthread_barrier_wait(&thr_barrier);
	int fd = open(t->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		t->err = "open";
		t->err_no = errno;
		free(b);
		return NULL;
	}
	for (size_t k = 0; k < t->size && !t->err;) {
		size_t m = t->size - k < THR_CHUNK ? t->size - k : THR_CHUNK;
		ssize_t w = write(fd, b + k, m);
		if (w <= 0) {
			t->err = "write";
			t->err_no = w < 0 ? errno : EIO;
		} else {
			k += (size_t)w;
		}
	}
	if (close(fd) != 0 && !t->err) {
		t->err = "close";
		t->err_no = errno;
	}
	free(b);
	return NULL;
}

/* The two sharers write alternate chunks of one file through one fd. */
static void *sharer_thread(void *arg)
{
	struct thr *t = arg;
	unsigned char *b = xmalloc(SHARED_CHUNK);
	pthread_barrier_wait(&thr_barrier);
	size_t nchunks = (t->size + SHARED_CHUNK - 1) / SHARED_CHUNK;
	for (size_t c = (size_t)t->idx; c < nchunks && !t->err; c += NSHARERS) {
		uint64_t off = (uint64_t)c * SHARED_CHUNK;
		size_t m = t->size - off < SHARED_CHUNK ? t->size - off : SHARED_CHUNK;
		pattern(b, off, m, t->seed);
		ssize_t w = pwrite(t->fd, b, m, (off_t)off);
		if (w != (ssize_t)m) {
			t->err = "pwrite";
			t->err_no = w < 0 ? errno : EIO;
		}
	}
	free(b);
	return NULL;
}

static void *reader_thread(void *arg)
{
	struct thr *t = arg;
	pthread_barrier_wait(&thr_barrier);
	check_file(t->path, t->size, t->seed, THR_CHUNK);
	return NULL;
}

/* Four threads read() one descriptor: every 4 KiB block of the file must
 * come out exactly once (the position is shared and moves atomically).
 * Each 8-byte word of the file holds its own offset. */
#define OFF_SIZE (4u << 20)
#define OFF_BLOCK 4096u

struct offreader {
	pthread_t tid;
	int fd;
	size_t nblocks;
	uint64_t *first; /* first word of each block read */
	const char *err;
};

static void *offset_reader(void *arg)
{
	struct offreader *r = arg;
	uint64_t b[OFF_BLOCK / 8];
	pthread_barrier_wait(&thr_barrier);
	for (;;) {
		ssize_t got = read(r->fd, b, sizeof(b));
		if (got == 0)
			break;
		if (got != (ssize_t)sizeof(b)) {
			r->err = got < 0 ? strerror(errno) : "a short read";
			break;
		}
		for (unsigned k = 1; k < OFF_BLOCK / 8; k++)
			if (b[k] != b[0] + 8 * k) {
				r->err = "a block mixing two positions";
				return NULL;
			}
		r->first[r->nblocks++] = b[0];
	}
	return NULL;
}

static void shared_readers(const char *dir)
{
	char path[PATH_MAX];
	uint64_t *w = xmalloc(OFF_SIZE);
	for (size_t k = 0; k < OFF_SIZE / 8; k++)
		w[k] = 8 * k;
	snprintf(path, sizeof(path), "%s/offsets.bin", dir);
	int fd = xopen(path, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(fd, (unsigned char *)w, OFF_SIZE, path);
	close(fd);
	fd = xopen(path, O_RDONLY);
	struct offreader r[4];
	pthread_barrier_init(&thr_barrier, NULL, 4);
	for (int i = 0; i < 4; i++) {
		r[i] = (struct offreader){ .fd = fd, .first = xmalloc(OFF_SIZE / OFF_BLOCK * 8) };
		pthread_create(&r[i].tid, NULL, offset_reader, &r[i]);
	}
	unsigned char *seen = calloc(OFF_SIZE / OFF_BLOCK, 1);
	for (int i = 0; i < 4; i++) {
		pthread_join(r[i].tid, NULL);
		if (r[i].err)
			fail("shared reader %d: %s", i, r[i].err);
		for (size_t k = 0; k < r[i].nblocks; k++) {
			uint64_t off = r[i].first[k];
			if (off % OFF_BLOCK || off >= OFF_SIZE || seen[off / OFF_BLOCK]++)
				fail("shared readers: block at %llu read twice or misplaced",
				     (unsigned long long)off);
		}
		free(r[i].first);
	}
	for (size_t k = 0; k < OFF_SIZE / OFF_BLOCK; k++)
		if (!seen[k])
			fail("shared readers: block %zu never read", k);
	pthread_barrier_destroy(&thr_barrier);
	close(fd);
	free(seen);
	free(w);
}

int m_threads(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE");
	struct thr w[NWRITERS], s[NSHARERS];
	char shared[PATH_MAX];

	pthread_barrier_init(&thr_barrier, NULL, NWRITERS + NSHARERS);
	snprintf(shared, sizeof(shared), "%s/shared.bin", arg.path);
	int sfd = xopen(shared, O_WRONLY | O_CREAT | O_TRUNC);
	for (int i = 0; i < NWRITERS; i++) {
		w[i] = (struct thr){ .idx = i, .size = arg.size, .seed = 100 + (uint64_t)i, .fd = -1 };
		snprintf(w[i].path, sizeof(w[i].path), "%s/thr_%d.bin", arg.path, i);
		pthread_create(&w[i].tid, NULL, writer_thread, &w[i]);
	}
	for (int i = 0; i < NSHARERS; i++) {
		s[i] = (struct thr){ .idx = i, .size = 2 * arg.size, .seed = 200, .fd = sfd };
		pthread_create(&s[i].tid, NULL, sharer_thread, &s[i]);
	}
	for (int i = 0; i < NWRITERS; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].err)
			fail("writer %d: %s %s: %s", i, w[i].err, w[i].path, strerror(w[i].err_no));
	}
	for (int i = 0; i < NSHARERS; i++) {
		pthread_join(s[i].tid, NULL);
		if (s[i].err)
			fail("sharer %d: %s: %s", i, s[i].err, strerror(s[i].err_no));
	}
	struct stat st;
	if (fstat(sfd, &st) != 0 || (size_t)st.st_size != 2 * arg.size)
		fail("fstat %s: size %lld, expected %zu", shared, (long long)st.st_size, 2 * arg.size);
	xclose(sfd, shared);
	pthread_barrier_destroy(&thr_barrier);

	/* read back: four threads at once, then the shared file with pread
	 * from the end towards the start */
	pthread_barrier_init(&thr_barrier, NULL, NWRITERS);
	for (int i = 0; i < NWRITERS; i++)
		pthread_create(&w[i].tid, NULL, reader_thread, &w[i]);
	for (int i = 0; i < NWRITERS; i++)
		pthread_join(w[i].tid, NULL);
	pthread_barrier_destroy(&thr_barrier);

	int fd = xopen(shared, O_RDONLY);
	unsigned char *b = xmalloc(2 * arg.size);
	size_t step = 100003;
	for (size_t end = 2 * arg.size; end > 0;) {
		size_t off = end > step ? end - step : 0;
		ssize_t r = pread(fd, b + off, end - off, (off_t)off);
		if (r != (ssize_t)(end - off))
			fail("pread %s at %zu: %zd", shared, off, r);
		end = off;
	}
	size_t d = pattern_diff(b, 0, 2 * arg.size, 200);
	if (d != 2 * arg.size)
		fail("%s: byte %zu differs from what the two threads wrote", shared, d);
	close(fd);
	free(b);
	check_file(shared, 2 * arg.size, 200, 0);
	shared_readers(arg.path);
	printf("threads: 4 files and 1 shared file verified; 4 readers shared one position\n");
	return 0;
}

/* churn DIR THREADS FILES SEED [verify]: every thread writes FILES
 * checkpoints of varied sizes and, after each, reads back a random
 * completed checkpoint of any thread, so writes, flushes, evictions and
 * reads overlap; then everything is read back. With "verify", only the
 * final pass runs (to check the real files without the library). */
#define CHURN_MAXT 8
#define CHURN_MAXF 64

struct churn {
	pthread_t tid;
	int t, nfiles;
	const char *dir;
	uint64_t seed;
	const char *err;
	char errpath[PATH_MAX];
};

static atomic_int churn_done[CHURN_MAXT];

static size_t churn_size(uint64_t seed, int t, int i)
{
	return 50000 + (size_t)(mix64(seed * 131 + (uint64_t)t * 1000 + (uint64_t)i) % 2000000);
}

static void churn_path(char *p, size_t cap, const char *dir, int t, int i)
{
	snprintf(p, cap, "%s/c_%d_%02d.bin", dir, t, i);
}

/* Reads one checkpoint back; returns an error text or NULL. */
static const char *churn_check(const char *path, size_t size, uint64_t seed)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return "cannot be opened";
	unsigned char *b = malloc(size + 1);
	size_t got = 0;
	ssize_t r;
	while (b && got <= size && (r = read(fd, b + got, size + 1 - got)) > 0)
		got += (size_t)r;
	close(fd);
	const char *err = !b ? "out of memory" : got != size ? "has the wrong size" :
			  pattern_diff(b, 0, size, seed) != size ? "holds wrong bytes" : NULL;
	free(b);
	return err;
}

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	char path[PATH_MAX];
	uint64_t rnd = mix64(c->seed + (uint64_t)c->t);
	for (int i = 0; i < c->nfiles && !c->err; i++) {
		size_t size = churn_size(c->seed, c->t, i);
		churn_path(path, sizeof(path), c->dir, c->t, i);
		unsigned char *b = pattern_buf(size, c->seed * 1000 + (uint64_t)c->t * 100 + (uint64_t)i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		size_t done = 0;
		while (fd >= 0 && done < size) {
			size_t m = size - done < 100003 ? size - done : 100003;
			ssize_t w = write(fd, b + done, m);
			if (w <= 0)
				break;
			done += (size_t)w;
		}
		free(b);
		if (fd < 0 || done < size || close(fd) != 0) {
			c->err = "could not be written";
			snprintf(c->errpath, sizeof(c->errpath), "%s", path);
			break;
		}
		atomic_store(&churn_done[c->t], i + 1);
		/* a random completed checkpoint of a random thread */
		rnd = mix64(rnd);
		int t2 = (int)(rnd % CHURN_MAXT);
		int n2 = t2 < CHURN_MAXT ? atomic_load(&churn_done[t2]) : 0;
		if (n2 > 0) {
			int i2 = (int)((rnd >> 20) % (uint64_t)n2);
			churn_path(path, sizeof(path), c->dir, t2, i2);
			const char *e = churn_check(path, churn_size(c->seed, t2, i2),
						    c->seed * 1000 + (uint64_t)t2 * 100 + (uint64_t)i2);
			if (e) {
				c->err = e;
				snprintf(c->errpath, sizeof(c->errpath), "%s", path);
			}
		}
	}
	return NULL;
}

int m_churn(int argc, char **argv)
{
	need_args(argc, 5, "DIR THREADS FILES SEED [verify]");
	int nt = (int)num(argv[2]), nf = (int)num(argv[3]);
	uint64_t seed = num(argv[4]);
	bool verify = verify_only(argc, argv, 5);
	struct churn c[CHURN_MAXT];
	char path[PATH_MAX];

	if (nt < 1 || nt > CHURN_MAXT || nf < 1 || nf > CHURN_MAXF)
		fail("THREADS must be 1..%d and FILES 1..%d", CHURN_MAXT, CHURN_MAXF);
	if (!verify) {
		for (int t = 0; t < nt; t++) {
			c[t] = (struct churn){ .t = t, .nfiles = nf, .dir = argv[1], .seed = seed };
			pthread_create(&c[t].tid, NULL, churn_thread, &c[t]);
		}
		for (int t = 0; t < nt; t++) {
			pthread_join(c[t].tid, NULL);
			if (c[t].err)
				fail("thread %d: %s %s", t, c[t].errpath, c[t].err);
		}
	}
	for (int t = 0; t < nt; t++)
		for (int i = nf - 1; i >= 0; i--) {
			churn_path(path, sizeof(path), argv[1], t, i);
			const char *e = churn_check(path, churn_size(seed, t, i), seed * 1000 + (uint64_t)t * 100 + (uint64_t)i);
			if (e)
				fail("%s %s", path, e);
		}
	printf("churn: %d x %d checkpoints verified\n", nt, nf);
	return 0;
}

/* ---- modes: fork and exec -------------------------------------------------- */

/* readfd FD SEED: reads 4096 bytes from descriptor FD (inherited through
 * exec) at its offset and compares them with stream SEED there. Exit 0
 * when they match, 3 when they differ, 4 on a short read, 5 on an error. */
int m_readfd(int argc, char **argv)
{
	need_args(argc, 3, "FD SEED");
	int fd = (int)num(argv[1]);
	uint64_t seed = num(argv[2]);
	unsigned char b[4096];
	off_t at = lseek(fd, 0, SEEK_CUR);
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t r = read(fd, b + got, sizeof(b) - got);
		if (r < 0) {
			printf("readfd: read fd %d: %s\n", fd, strerror(errno));
			return 5;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got < sizeof(b) || at < 0) {
		printf("readfd: %zu bytes from inherited fd %d at %lld\n", got, fd, (long long)at);
		return 4;
	}
	if (pattern_diff(b, (uint64_t)at, sizeof(b), seed) != sizeof(b)) {
		printf("readfd: wrong bytes from inherited fd %d at %lld\n", fd, (long long)at);
		return 3;
	}
	return 0;
}

static int wait_child(pid_t pid, const char *what)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		fail("waitpid %s: %s", what, strerror(errno));
	if (WIFSIGNALED(st))
		fail("%s: killed by signal %d", what, WTERMSIG(st));
	return WEXITSTATUS(st);
}

/* A pipe in p, then a fork: the child's 0 or the parent's child pid. */
static pid_t pipe_fork(int p[2])
{
	if (pipe(p) != 0)
		fail("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	return pid;
}

/* Runs argv in a child with stdin = in (if >= 0) and stdout captured;
 * returns the exit status and the number of bytes it printed. */
static int run_captured(int in, char *const *av, size_t *printed, char *out, size_t outlen)
{
	int p[2];
	pid_t pid = pipe_fork(p);
	if (pid == 0) {
		if (in >= 0 && dup2(in, 0) < 0)
			_exit(120);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(av[0], av);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t r;
	char tmp[4096];
	while ((r = read(p[0], tmp, sizeof(tmp))) > 0) {
		if (n < outlen - 1) {
			size_t m = (size_t)r < outlen - 1 - n ? (size_t)r : outlen - 1 - n;
			memcpy(out + n, tmp, m);
		}
		n += (size_t)r;
	}
	out[n < outlen - 1 ? n : outlen - 1] = '\0';
	close(p[0]);
	*printed = n;
	return wait_child(pid, av[0]);
}

/* The VmSize line of /proc/self/status, KiB. */
static long vm_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		fail("/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* "forkcost PATH SIZE SEED": writes and reads back a checkpoint, then
 * forks a child that exits at once. Prints the page faults the child
 * took in its fork (the atfork handlers' work) and the address space of
 * each side: "child_minflt=N child_vm_kib=K parent_vm_kib=K". */
int m_forkcost(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *b = xmalloc(arg.size), *e = pattern_buf(arg.size, arg.seed);
	int fd = gen_open(arg.path, arg.size, arg.seed);
	if (!reads_back(fd, b, e, arg.size, arg.path))
		fail("%s read back wrong", arg.path);
	xclose(fd, arg.path);
	int p[2];
	pid_t pid = pipe_fork(p);
	if (pid == 0) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		long got[2] = { ru.ru_minflt, vm_kib() };
		_exit(write(p[1], got, sizeof(got)) == (ssize_t)sizeof(got) ? 0 : 3);
	}
	close(p[1]);
	long got[2];
	if (read(p[0], got, sizeof(got)) != (ssize_t)sizeof(got))
		fail("the child said nothing");
	close(p[0]);
	if (wait_child(pid, "forked child") != 0)
		fail("the forked child failed");
	printf("child_minflt=%ld child_vm_kib=%ld parent_vm_kib=%ld\n", got[0], got[1], vm_kib());
	return 0;
}

int m_fork(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	unsigned char *b = xmalloc(arg.size), *e = pattern_buf(arg.size, arg.seed);
	char fdnum[16], seed[32], out[256];
	size_t printed;

	if (arg.size < 16384)
		fail("SIZE must be at least 16K");
	int fd = gen_open(arg.path, arg.size, arg.seed);
	if (!reads_back(fd, b, e, 100, arg.path))
		fail("parent: the first 100 bytes of %s are wrong", arg.path);

	/* 1. a forked child (no exec) reads the inherited descriptor, at the
	 * offset it shares with the parent */
	pid_t pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		unsigned char c[4096];
		if (read_all(fd, c, sizeof(c), arg.path) != sizeof(c) || memcmp(c, e + 100, sizeof(c)))
			_exit(3);
		if (pread(fd, c, sizeof(c), 0) != (ssize_t)sizeof(c) || memcmp(c, e, sizeof(c)))
			_exit(4);
		close(fd);
		_exit(0);
	}
	int rc = wait_child(pid, "forked reader");
	if (rc != 0)
		fail("a forked child read wrong bytes from an inherited tagged descriptor (status %d)", rc);
	if (lseek(fd, 0, SEEK_CUR) != 100 + 4096)
		fail("parent: the offset shared with the forked child is %lld, expected %d",
		     (long long)lseek(fd, 0, SEEK_CUR), 100 + 4096);

	/* 2. a child that execs this program in "readfd N SEED" mode */
	snprintf(fdnum, sizeof(fdnum), "%d", fd);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)arg.seed);
	char *av1[] = { self_exe, "readfd", fdnum, seed, NULL };
	rc = run_captured(-1, av1, &printed, out, sizeof(out));
	if (rc != 0)
		fail("an exec'ed child reading inherited fd %d: %s(status %d)", fd, out, rc);

	/* 3. cat with the descriptor as its standard input (cat <&N): the rest */
	size_t at = 100 + 2 * 4096;
	char *av2[] = { "/bin/cat", NULL };
	char *all = xmalloc(arg.size + 1);
	rc = run_captured(fd, av2, &printed, all, arg.size + 1);
	if (rc != 0 || printed != arg.size - at || memcmp(all, e + at, printed) != 0)
		fail("cat <&%d printed %zu bytes (expected the last %zu), status %d", fd, printed,
		     arg.size - at, rc);

	/* 4. cat /proc/self/fd/N: a reopen through /proc in an exec'ed child */
	char procp[64];
	snprintf(procp, sizeof(procp), "/proc/self/fd/%d", fd);
	char *av3[] = { "/bin/cat", procp, NULL };
	rc = run_captured(-1, av3, &printed, all, arg.size + 1);
	if (rc != 0 || printed != arg.size || memcmp(all, e, arg.size) != 0)
		fail("cat %s printed %zu bytes (expected %zu), status %d", procp, printed, arg.size, rc);
	free(all);
	xclose(fd, arg.path);

	/* 5. a forked child writes the second half through an inherited writer */
	int wfd = xopen(arg.path2, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(wfd, e, arg.size / 2, arg.path2);
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		ssize_t w = write(wfd, e + arg.size / 2, arg.size - arg.size / 2);
		_exit(w == (ssize_t)(arg.size - arg.size / 2) ? 0 : 3);
	}
	rc = wait_child(pid, "forked writer");
	if (rc != 0)
		fail("a forked child could not write an inherited tagged descriptor");
	xclose(wfd, arg.path2);

	check_file(arg.path, arg.size, arg.seed, 0);
	check_file(arg.path2, arg.size, arg.seed, 0);
	printf("fork: children read and wrote the inherited descriptors\n");
	free(b);
	free(e);
	return 0;
}

/* ---- modes: several descriptors and several writers of one file ----------- */

static void xpwrite_all(int fd, const unsigned char *b, size_t n, off_t off, const char *what)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, b, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail("pwrite %s: %s", what, w < 0 ? strerror(errno) : "wrote 0 bytes");
		b += w;
		off += w;
		n -= (size_t)w;
	}
}

static off_t fd_size(int fd, const char *what)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		fail("fstat %s: %s", what, strerror(errno));
	return st.st_size;
}

/* One process, several descriptors of one file, as the kernel shares them:
 * a second open of a file open for writing sees what was written and its
 * writes land in the same file; a second O_TRUNC empties it for every
 * descriptor; a map of a descriptor that has a dup changes the file that
 * the dup writes to. The real file must end as the kernel would leave it. */
int m_sharedfd(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SEED");
	const size_t M = 1 << 20;
	unsigned char *x = pattern_buf(3 * M, arg.seed), *b = xmalloc(3 * M);
	char p1[PATH_MAX], p2[PATH_MAX], p3[PATH_MAX];
	snprintf(p1, sizeof(p1), "%s/two-opens.bin", arg.path);
	snprintf(p2, sizeof(p2), "%s/second-trunc.bin", arg.path);
	snprintf(p3, sizeof(p3), "%s/map-dup.bin", arg.path);

	/* 1. a second open (O_RDWR) of a file open for writing */
	int fd1 = xopen(p1, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(fd1, x, M, p1);
	int fd2 = xopen(p1, O_RDWR);
	if (!reads_back(fd2, b, x, M, p1))
		fail("a second open of a file open for writing does not read what was written");
	xpwrite_all(fd2, x + 2 * M, M, (off_t)(2 * M), p1);
	write_all(fd1, x + M, M, p1); /* at fd1's offset, 1 MiB */
	if (fd_size(fd1, p1) != (off_t)(3 * M) || fd_size(fd2, p1) != (off_t)(3 * M))
		fail("the two descriptors of %s see sizes %lld and %lld, expected %zu", p1,
		     (long long)fd_size(fd1, p1), (long long)fd_size(fd2, p1), 3 * M);
	xclose(fd2, p1);
	xclose(fd1, p1);
	check_file(p1, 3 * M, arg.seed, 0);

	/* 2. a second open with O_TRUNC empties the file for the first one too */
	fd1 = xopen(p2, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(fd1, x + M, M, p2);
	fd2 = xopen(p2, O_WRONLY | O_CREAT | O_TRUNC);
	if (fd_size(fd1, p2) != 0)
		fail("after a second open with O_TRUNC the first descriptor sees %lld bytes",
		     (long long)fd_size(fd1, p2));
	write_all(fd2, x, M, p2);
	write_all(fd1, x + M, M, p2); /* fd1 is still at 1 MiB */
	xclose(fd1, p2);
	xclose(fd2, p2);
	check_file(p2, 2 * M, arg.seed, 0);

	/* 3. mmap of a descriptor that has a dup, then writes through the dup */
	int fd = xopen(p3, O_RDWR | O_CREAT | O_TRUNC);
	write_all(fd, x, M, p3);
	int d = dup(fd);
	if (d < 0)
		fail("dup: %s", strerror(errno));
	unsigned char *m = mmap(NULL, M, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap of %s: %s", p3, strerror(errno));
	if (memcmp(m, x, M) != 0)
		fail("the map of %s shows wrong bytes", p3);
	memset(m, 'M', 4096);
	if (msync(m, M, MS_SYNC) != 0)
		fail("msync: %s", strerror(errno));
	munmap(m, M);
	write_all(d, x + M, 4096, p3); /* the dup shares the offset: 1 MiB */
	xclose(d, p3);
	xclose(fd, p3);
	memset(x, 'M', 4096);
	fd = xopen(p3, O_RDONLY);
	if (read_all(fd, b, M + 4097, p3) != M + 4096 || memcmp(b, x, M + 4096) != 0)
		fail("%s does not hold the map's bytes and the dup's write", p3);
	xclose(fd, p3);
	raw_check(p3, x, M + 4096, "after the dup's write");
	printf("sharedfd: descriptors of one file share its state\n");
	free(x);
	free(b);
	return 0;
}

/* Waits until path exists (a barrier between processes), at most 30 s. */
static void wait_for(const char *path)
{
	for (int i = 0; i < 3000; i++) {
		if (access(path, F_OK) == 0)
			return;
		sleep_ms(10);
	}
	fail("%s did not appear in 30 s", path);
}

/* One writer of a file shared by several processes (MPI-IO, HDF5): opens
 * PATH with FLAGS (w: O_WRONLY|O_CREAT, t: ... |O_TRUNC, r: O_RDWR), says
 * so by creating MARKS/opened.N, waits for MARKS/go, writes its region
 * [N*SIZE, (N+1)*SIZE) of stream SEED with pwrite, fsyncs, closes. */
int m_n1part(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH N SIZE SEED w|t|r MARKS [warm]");
	int flags = !strcmp(argv[5], "t") ? O_WRONLY | O_CREAT | O_TRUNC :
		    !strcmp(argv[5], "r") ? O_RDWR : O_WRONLY | O_CREAT;
	char mark[PATH_MAX + 32];
	if (argc > 7 && !strcmp(argv[7], "warm")) {
		/* checkpoints of its own first, as a step before wrote them:
		 * its cache has started when it opens the shared file */
		for (int k = 0; k < 3; k++) {
			snprintf(mark, sizeof(mark), "%s.rank%ld", arg.path, arg.n);
			gen_file(mark, 2 << 20, (uint64_t)k + 1000, 0);
		}
	}
	unsigned char *b = xmalloc(arg.size);
	pattern(b, (uint64_t)arg.n * arg.size, arg.size, arg.seed);
	int fd = xopen(arg.path, flags);
	snprintf(mark, sizeof(mark), "%s/opened.%ld", argv[6], arg.n);
	xclose(xopen(mark, O_WRONLY | O_CREAT), mark);
	snprintf(mark, sizeof(mark), "%s/go", argv[6]);
	wait_for(mark);
	xpwrite_all(fd, b, arg.size, (off_t)((uint64_t)arg.n * arg.size), arg.path);
	if (fsync(fd) != 0)
		fail("fsync %s: %s", arg.path, strerror(errno));
	xclose(fd, arg.path);
	free(b);
	return 0;
}

/* ---- modes: unsupported call paths ----------------------------------------- */

/* What a buffer holds before a call that must fail on a tagged reader:
 * the call may not have written into it. */

/* main-exits DIR: the main thread writes DIR/main.bin and ends with
 * pthread_exit while a thread of the program writes DIR/worker.bin a
 * moment later and returns: the process ends (exit status 0) when that
 * last thread does, with both files at their real paths. */
static void *main_exits_worker(void *p)
{
	const char *dir = p;
	char path[PATH_MAX];
	struct timespec d = { 0, 100000000 };
	nanosleep(&d, NULL);
	snprintf(path, sizeof(path), "%s/worker.bin", dir);
	gen_file(path, 100000, 12, 0);
	return NULL;
}

/* ... and with "raw", the main thread ends by the exit system call (the
 * process's first thread then a zombie, /proc/self/fd gone) and the worker
 * ends the process with exit(0). */
static void *main_exits_raw_worker(void *p)
{
	main_exits_worker(p);
	exit(0);
}

int m_main_exits(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[2], "raw") == 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, main_exits_raw_worker, argv[1]) != 0)
			fail("pthread_create: %s", strerror(errno));
		syscall(SYS_exit, 0);
	}
	need_args(argc, 2, "DIR");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/main.bin", argv[1]);
	gen_file(path, 100000, 11, 0);
	pthread_t t;
	if (pthread_create(&t, NULL, main_exits_worker, argv[1]) != 0)
		fail("pthread_create: %s", strerror(errno));
	pthread_exit(NULL);
}

/* ---- pthread_cancel of threads that write checkpoints ------------------- */

static void *cw_worker(void *arg)
{
	const char *dir = ((const char **)arg)[0];
	long id = (long)((const char **)arg)[1];
	size_t size = 1 << 20;
	unsigned char *b = pattern_buf(size, 500 + (uint64_t)id);
	char path[PATH_MAX];
	for (long it = 0;; it++) {
		snprintf(path, sizeof(path), "%s/cw_%ld_%ld.bin", dir, id, it % 3);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			continue;
		for (size_t o = 0; o < size; o += 65536)
			(void)!write(fd, b + o, 65536);
		close(fd);
	}
	return NULL;
}

/* cancelwrite DIR N SIZE SEED: N rounds of three threads that write
 * checkpoints without pause (open, write and close are cancellation
 * points), cancelled after 20 to 50 ms and joined; then a checkpoint of
 * SIZE written and read back. A thread cancelled inside the library left
 * its lock held, and the next round waited for ever. */
int m_cancelwrite(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED");
	const char *targ[3][2];
	for (long k = 0; k < arg.n; k++) {
		pthread_t t[3];
		for (long i = 0; i < 3; i++) {
			targ[i][0] = arg.path;
			targ[i][1] = (const char *)(i + 10 * (k % 3));
			if (pthread_create(&t[i], NULL, cw_worker, targ[i]) != 0)
				fail("pthread_create");
		}
		usleep(20000 + (unsigned)(k * 7919 % 30000));
		for (int i = 0; i < 3; i++)
			pthread_cancel(t[i]);
		for (int i = 0; i < 3; i++)
			pthread_join(t[i], NULL);
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/cw_final.bin", arg.path);
	gen_file(path, arg.size, arg.seed, 0);
	check_file(path, arg.size, arg.seed, 0);
	return 0;
}

/* closerace: one thread writes checkpoints under DIR and reads each back
 * (open, write, close; open, read, close: the numbers come and go), while
 * another closes numbers inside the C library or in a range, HOW times
 * over: closedir of DIR's listing, fclose of an untagged file, freopen of
 * an untagged stream, close_range of a number it just opened. The number
 * such a call closes is free the moment it returns, and the writer's next
 * open may get it: the checkpoint there must stay the writer's. */
struct closerace {
	const char *dir, *how, *plain;
	atomic_bool stop;
	long rounds;
};

static void *closerace_closer(void *arg)
{
	struct closerace *c = arg;
	FILE *keep = NULL;
	if (!strcmp(c->how, "freopen") && !(keep = fopen(c->plain, "r")))
		fail("fopen %s: %s", c->plain, strerror(errno));
	while (!atomic_load(&c->stop)) {
		if (!strcmp(c->how, "closedir")) {
			DIR *d = opendir(c->dir);
			if (!d)
				fail("opendir %s: %s", c->dir, strerror(errno));
			while (readdir(d))
				;
			closedir(d);
		} else if (!strcmp(c->how, "fclose")) {
			FILE *f = fopen(c->plain, "r");
			if (!f)
				fail("fopen %s: %s", c->plain, strerror(errno));
			fclose(f);
		} else if (!strcmp(c->how, "freopen")) {
			if (!(keep = freopen(c->plain, "r", keep)))
				fail("freopen %s: %s", c->plain, strerror(errno));
		} else {
			int fd = open(c->plain, O_RDONLY);
			if (fd < 0)
				fail("open %s: %s", c->plain, strerror(errno));
			if (close_range((unsigned)fd, (unsigned)fd, 0) != 0)
				fail("close_range: %s", strerror(errno));
		}
		c->rounds++;
	}
	if (keep)
		fclose(keep);
	return NULL;
}

int m_closerace(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N HOW PLAINFILE");
	if (argc < 5)
		fail("usage: closerace DIR N HOW PLAINFILE");
	struct closerace c = { .dir = arg.path, .how = argv[3], .plain = argv[4] };
	atomic_init(&c.stop, false);
	pthread_t t;
	if (pthread_create(&t, NULL, closerace_closer, &c) != 0)
		fail("pthread_create");
	size_t sizes[] = { 1, 4097, 65536, 1 << 20 };
	long bad = 0;
	for (long i = 0; i < arg.n && !bad; i++) {
		char p[PATH_MAX];
		size_t n = sizes[i % 4];
		snprintf(p, sizeof(p), "%s/c%ld.bin", arg.path, i % 4);
		unsigned char *b = pattern_buf(n, (uint64_t)i + 1);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			fail("round %ld: open %s for writing: %s", i, p, strerror(errno));
		write_all(fd, b, n, p);
		if (close(fd) != 0)
			fail("round %ld: close %s: %s", i, p, strerror(errno));
		fd = open(p, O_RDONLY);
		if (fd < 0)
			fail("round %ld: open %s for reading: %s", i, p, strerror(errno));
		struct stat st;
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != n)
			fail("round %ld: fstat of %s: %s, mode %o, size %lld of %zu", i, p, strerror(errno),
			     (unsigned)st.st_mode, (long long)st.st_size, n);
		unsigned char *r = xmalloc(n + 1);
		ssize_t got = read(fd, r, n + 1);
		if (got != (ssize_t)n || memcmp(r, b, n) != 0) {
			fprintf(stderr, "round %ld: %s read back %zd of %zu bytes (%s), or other bytes\n", i, p, got, n,
				got < 0 ? strerror(errno) : "ok");
			bad++;
		}
		if (close(fd) != 0)
			fail("round %ld: close %s after reading: %s", i, p, strerror(errno));
		free(r);
		free(b);
	}
	atomic_store(&c.stop, true);
	pthread_join(t, NULL);
	if (bad)
		fail("%ld round(s) read back wrong", bad);
	printf("closerace %s: %ld rounds, %ld closes beside them\n", c.how, arg.n, c.rounds);
	return 0;
}

/* closeread PATH: a cached checkpoint of 4 MiB and 77 bytes is read by a
 * thread in pieces of 64 KiB with pread, read and readv (and an fstat and
 * an lseek before them) while the main
 * thread closes its descriptor, 20 times: each piece is the file's bytes
 * or EBADF, as without the library (under it the reader used the
 * descriptor's freed handle: heap corruption, an abort). */
#define CR_SIZE (4u * 1024 * 1024 + 77)
#define CR_PIECE 65536u
static atomic_int cr_fd;
static atomic_bool cr_stop, cr_closing;
static atomic_long cr_wrong;
static unsigned char *cr_expect;

static void *cr_reader(void *arg)
{
	(void)arg;
	unsigned char *b = xmalloc(CR_PIECE);
	for (long k = 0; !atomic_load(&cr_stop); k++) {
		uint64_t off = (uint64_t)(k * 4099) % (CR_SIZE - CR_PIECE);
		int fd = atomic_load(&cr_fd);
		ssize_t got;
		struct stat st;
		if (fstat(fd, &st) == 0 && !atomic_load(&cr_closing) && st.st_size != (off_t)CR_SIZE)
			atomic_fetch_add(&cr_wrong, 1);
		if (k % 3 == 0) {
			got = pread(fd, b, CR_PIECE, (off_t)off);
		} else if (lseek(fd, (off_t)off, SEEK_SET) != (off_t)off) {
			got = -1;
		} else if (k % 3 == 1) {
			got = read(fd, b, CR_PIECE);
		} else {
			struct iovec iov[2] = { { b, 1000 }, { b + 1000, CR_PIECE - 1000 } };
			got = readv(fd, iov, 2);
		}
		if (got < 0 && errno == EBADF)
			break;
		/* (the bytes of a read that ended before the close began: one
		 * after it may have read another file given the number) */
		if (got > 0 && !atomic_load(&cr_closing) && memcmp(b, cr_expect + off, (size_t)got) != 0)
			atomic_fetch_add(&cr_wrong, 1);
	}
	free(b);
	return NULL;
}

int m_closeread(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	const char *path = argv[1];
	gen_file(path, CR_SIZE, 31, 1u << 20);
	cr_expect = pattern_buf(CR_SIZE, 31);
	for (int rep = 0; rep < 20; rep++) {
		atomic_store(&cr_fd, xopen(path, O_RDONLY));
		atomic_store(&cr_stop, false);
		atomic_store(&cr_closing, false);
		pthread_t t;
		if (pthread_create(&t, NULL, cr_reader, NULL) != 0)
			fail("pthread_create");
		sleep_ms(2 + rep % 4);
		atomic_store(&cr_closing, true);
		if (close(atomic_load(&cr_fd)) != 0)
			fail("close: %s", strerror(errno));
		sleep_ms(1);
		atomic_store(&cr_stop, true);
		pthread_join(t, NULL);
	}
	if (atomic_load(&cr_wrong))
		fail("%ld pieces read with wrong bytes", atomic_load(&cr_wrong));
	check_file(path, CR_SIZE, 31, 1u << 20);
	free(cr_expect);
	printf("closeread: 20 closes during reads\n");
	return 0;
}

/* closemeta PATH: the same file, opened for update, gets the calls that
 * neither read nor write it (ftruncate and fallocate to its own size,
 * fchmod, futimens, fstatvfs, ioctl FIONREAD, sync_file_range, flock,
 * fcntl, isatty, fchdir, poll, dup, access and readlink of its
 * /proc/self/fd name) from three threads while the main thread closes the
 * descriptor, 300 times: each call succeeds, or fails with EBADF (ENOENT
 * for the /proc name) as without the library. Under the library a call
 * that took the descriptor without holding it used freed memory when the
 * close came between its look-up and its use. */
#define CM_REPS 300
static atomic_long cm_calls;

/* Whether the answer r (errno e) of call k is one the file allows: the
 * call's success, or the closed number's failure. */
static bool cm_ok(int k, long r, int e)
{
	if (r >= 0)
		return !(k == 9) || r == 0; /* fchdir never succeeds on a file */
	if (e == EBADF)
		return true;
	if ((k == 13 || k == 14) && e == ENOENT) /* the /proc name is gone */
		return true;
	return k == 9 && e == ENOTDIR;
}

static void *cm_caller(void *arg)
{
	char proc[64], link[PATH_MAX];
	for (long k = (long)(intptr_t)arg * 5; !atomic_load(&cr_stop); k++) {
		int fd = atomic_load(&cr_fd), op = (int)(k % 16), e = 0;
		long r = 0;
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		errno = 0;
		switch (op) {
		case 0: r = ftruncate(fd, (off_t)CR_SIZE); break;
		case 1: r = fchmod(fd, 0644); break;
		case 2: r = futimens(fd, NULL); break;
		case 3: { int n = 0; r = ioctl(fd, FIONREAD, &n); break; }
		case 4: r = sync_file_range(fd, 0, 0, 0); break;
		case 5: r = fcntl(fd, F_GETFL); break;
		case 6: { int pe = posix_fallocate(fd, 0, 4096); r = pe ? -1 : 0; errno = pe; break; }
		case 7: r = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096); if (r < 0 && errno == EOPNOTSUPP) r = 0; break;
		case 8: r = isatty(fd) ? -1 : (errno == EBADF ? -1 : 0); if (r == 0) errno = 0; break;
		case 9: r = fchdir(fd); break;
		case 10: { struct statvfs sv; r = fstatvfs(fd, &sv); break; }
		case 11: { struct pollfd p = { fd, POLLIN, 0 }; r = poll(&p, 1, 0);
			   if (r == 1 && (p.revents & POLLNVAL)) { r = -1; errno = EBADF; } break; }
		case 12: { int d = dup(fd); r = d; if (d >= 0) close(d); break; }
		case 13: r = access(proc, R_OK); break;
		case 14: { ssize_t n = readlink(proc, link, sizeof(link)); r = n; break; }
		case 15: r = flock(fd, LOCK_SH); if (r == 0) r = flock(fd, LOCK_UN); break;
		}
		e = errno;
		atomic_fetch_add(&cm_calls, 1);
		if (!cm_ok(op, r, e) && !atomic_load(&cr_closing)) {
			fprintf(stderr, "closemeta: call %d answered %ld (%s)\n", op, r, strerror(e));
			atomic_fetch_add(&cr_wrong, 1);
		}
		if (r < 0 && e == EBADF && atomic_load(&cr_closing))
			break;
	}
	return NULL;
}

int m_closemeta(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	const char *path = argv[1];
	gen_file(path, CR_SIZE, 31, 1u << 20);
	for (int rep = 0; rep < CM_REPS; rep++) {
		atomic_store(&cr_fd, xopen(path, O_RDWR));
		atomic_store(&cr_stop, false);
		atomic_store(&cr_closing, false);
		pthread_t t[3];
		for (intptr_t i = 0; i < 3; i++)
			if (pthread_create(&t[i], NULL, cm_caller, (void *)i) != 0)
				fail("pthread_create");
		sleep_ms(rep % 3);
		atomic_store(&cr_closing, true);
		if (close(atomic_load(&cr_fd)) != 0)
			fail("close: %s", strerror(errno));
		sleep_ms(1);
		atomic_store(&cr_stop, true);
		for (int i = 0; i < 3; i++)
			pthread_join(t[i], NULL);
	}
	if (atomic_load(&cr_wrong))
		fail("%ld calls answered wrongly", atomic_load(&cr_wrong));
	check_file(path, CR_SIZE, 31, 1u << 20);
	printf("closemeta: %d closes during %ld calls\n", CM_REPS, atomic_load(&cm_calls));
	return 0;
}

/* closeflock PATH: a thread's flock(LOCK_EX) on a cached checkpoint's
 * descriptor waits for another descriptor's lock on the file; meanwhile
 * the main thread closes the waiting descriptor, then unlocks the other,
 * 5 times. As without the library, the wait ends with the lock (0) or
 * EBADF, and nothing else: under the library the waiting call had taken
 * the descriptor without holding it, and wrote into its freed memory. */
/* The closeread file at path, published (fsync) to its real path. */
static void gen_published(const char *path)
{
	gen_file(path, CR_SIZE, 31, 1u << 20);
	int pub = xopen(path, O_RDONLY);
	if (fsync(pub) != 0)
		fail("fsync: %s", strerror(errno));
	close(pub);
}

static atomic_int cf_rc, cf_errno;
static atomic_bool cf_done;

static void *cf_waiter(void *arg)
{
	int fd = (int)(intptr_t)arg;
	errno = 0;
	int r = flock(fd, LOCK_EX);
	atomic_store(&cf_errno, r ? errno : 0);
	atomic_store(&cf_rc, r);
	atomic_store(&cf_done, true);
	return NULL;
}

int m_closeflock(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	const char *path = argv[1];
	/* (at its real path, where both descriptors' locks are taken) */
	gen_published(path);
	for (int rep = 0; rep < 5; rep++) {
		int holder = xopen(path, O_RDONLY), waiting = xopen(path, O_RDONLY);
		if (flock(holder, LOCK_EX) != 0)
			fail("flock: %s", strerror(errno));
		atomic_store(&cf_done, false);
		pthread_t t;
		if (pthread_create(&t, NULL, cf_waiter, (void *)(intptr_t)waiting) != 0)
			fail("pthread_create");
		sleep_ms(30);
		if (atomic_load(&cf_done))
			fail("run %d: flock did not wait for the other descriptor's lock (%d, %s)", rep,
			     atomic_load(&cf_rc), strerror(atomic_load(&cf_errno)));
		if (close(waiting) != 0)
			fail("close: %s", strerror(errno));
		sleep_ms(30);
		if (flock(holder, LOCK_UN) != 0)
			fail("flock(LOCK_UN): %s", strerror(errno));
		pthread_join(t, NULL);
		int r = atomic_load(&cf_rc), e = atomic_load(&cf_errno);
		if (r != 0 && e != EBADF)
			fail("run %d: the waiting flock answered %d (%s)", rep, r, strerror(e));
		/* the lock went with the closed descriptor: the file is free */
		if (flock(holder, LOCK_EX | LOCK_NB) != 0)
			fail("run %d: the file stays locked after the waiting descriptor closed (%s)", rep,
			     strerror(errno));
		close(holder);
	}
	check_file(path, CR_SIZE, 31, 1u << 20);
	printf("closeflock: 5 closes during a waiting flock\n");
	return 0;
}

/* flockpub PATH: a closed checkpoint (not yet at its real path) is locked
 * through one descriptor, then published (fsync); a second descriptor of
 * the file must not get the lock while the first holds it, and gets it
 * once that one lets go, as two descriptors of one file without the
 * library. Under the library the first lock was taken on the path's lock
 * file, the second on the real file that the publication made, and both
 * held it. */
int m_flockpub(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	const char *path = argv[1];
	gen_file(path, CR_SIZE, 31, 1u << 20);
	int a = xopen(path, O_RDONLY);
	if (flock(a, LOCK_EX) != 0)
		fail("flock: %s", strerror(errno));
	if (fsync(a) != 0)
		fail("fsync: %s", strerror(errno));
	int b = xopen(path, O_RDONLY);
	if (flock(b, LOCK_EX | LOCK_NB) == 0)
		fail("a second descriptor got the lock the first holds, after the file was published");
	if (errno != EWOULDBLOCK)
		fail("flock(LOCK_NB) of the second descriptor: %s, not EWOULDBLOCK", strerror(errno));
	if (flock(b, LOCK_SH | LOCK_NB) == 0)
		fail("a second descriptor got a shared lock beside the first's exclusive one");
	if (flock(a, LOCK_UN) != 0)
		fail("flock(LOCK_UN): %s", strerror(errno));
	if (flock(b, LOCK_EX | LOCK_NB) != 0)
		fail("the second descriptor cannot lock the file after the first let go: %s", strerror(errno));
	if (flock(a, LOCK_SH | LOCK_NB) == 0)
		fail("the first descriptor got a shared lock beside the second's exclusive one");
	close(b);
	if (flock(a, LOCK_SH | LOCK_NB) != 0)
		fail("the lock did not go with the second descriptor: %s", strerror(errno));
	close(a);
	check_file(path, CR_SIZE, 31, 1u << 20);
	printf("flockpub: the locks of two descriptors exclude each other across the publication\n");
	return 0;
}

/* flockupgrade PATH: two descriptors of a published checkpoint hold shared
 * flocks, and two threads convert them to exclusive at once, 20 times:
 * as without the library, one gets its lock, lets it go, and then the
 * other (the kernel's conversion lets the shared lock go first). Under the
 * library each descriptor locked the path's lock file, then the real
 * file, and the two conversions could each hold what the other waited for
 * (for ever). A conversion left waiting 10 s fails the run. */
static pthread_barrier_t fu_go;

static void *fu_convert(void *arg)
{
	int fd = (int)(intptr_t)arg;
	pthread_barrier_wait(&fu_go);
	if (flock(fd, LOCK_EX) != 0)
		return (void *)(intptr_t)errno;
	sleep_ms(2);
	if (flock(fd, LOCK_UN) != 0)
		return (void *)(intptr_t)errno;
	return NULL;
}

int m_flockupgrade(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	const char *path = argv[1];
	gen_published(path);
	for (int rep = 0; rep < 20; rep++) {
		int fd[2] = { xopen(path, O_RDONLY), xopen(path, O_RDONLY) };
		pthread_t t[2];
		pthread_barrier_init(&fu_go, NULL, 2);
		for (int i = 0; i < 2; i++) {
			if (flock(fd[i], LOCK_SH) != 0)
				fail("flock(LOCK_SH): %s", strerror(errno));
		}
		for (int i = 0; i < 2; i++)
			if (pthread_create(&t[i], NULL, fu_convert, (void *)(intptr_t)fd[i]) != 0)
				fail("pthread_create");
		for (int i = 0; i < 2; i++) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 10;
			void *r;
			int e = pthread_timedjoin_np(t[i], &r, &until);
			if (e == ETIMEDOUT)
				fail("run %d: two conversions of shared flocks to exclusive waited for each other 10 s", rep);
			if (e || r)
				fail("run %d: flock: %s", rep, strerror(e ? e : (int)(intptr_t)r));
		}
		pthread_barrier_destroy(&fu_go);
		close(fd[0]);
		close(fd[1]);
	}
	check_file(path, CR_SIZE, 31, 1u << 20);
	printf("flockupgrade: 20 conversions at once\n");
	return 0;
}

/* vforkflock DIR: a vfork child flocks a descriptor its parent holds
 * locked exclusively (the same open file, so the kernel lets it: a
 * repeat, a conversion to shared and back), for a checkpoint not yet
 * published (its lock is the path's lock file) and for a published one
 * (the real file's). The parent, resumed, still excludes another
 * descriptor until it unlocks; the bytes are whole. */
int m_vforkflock(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	char path[4096], first[4096];
	snprintf(first, sizeof(first), "%s/vf-first.bin", argv[1]);
	gen_file(first, 4096, 7, 4096);
	static unsigned char page[4096];
	for (size_t i = 0; i < sizeof(page); i++)
		page[i] = (unsigned char)(i * 13 + 5);
	for (int published = 0; published < 2; published++) {
		snprintf(path, sizeof(path), "%s/vf%d.bin", argv[1], published);
		int fd;
		if (published) {
			gen_published(path);
			fd = xopen(path, O_RDWR);
		} else {
			fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || write(fd, page, sizeof(page)) != (ssize_t)sizeof(page))
				fail("%s: %s", path, strerror(errno));
		}
		if (flock(fd, LOCK_EX) != 0)
			fail("flock(LOCK_EX): %s", strerror(errno));
		pid_t pid = vfork();
		if (pid == 0) {
			int r1 = flock(fd, LOCK_EX | LOCK_NB), r2 = flock(fd, LOCK_SH), r3 = flock(fd, LOCK_EX);
			_exit((r1 == 0) | (r2 == 0) << 1 | (r3 == 0) << 2);
		}
		if (pid < 0)
			fail("vfork: %s", strerror(errno));
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
			fail("%s: the vfork child's flocks of its parent's descriptor answered %#x", path,
			     WIFEXITED(st) ? WEXITSTATUS(st) : 0x100);
		int other = xopen(path, O_RDONLY);
		if (flock(other, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK)
			fail("%s: another descriptor got a shared lock beside the exclusive one", path);
		if (flock(fd, LOCK_UN) != 0 || flock(other, LOCK_SH | LOCK_NB) != 0)
			fail("%s: no shared lock after the unlock: %s", path, strerror(errno));
		close(other);
		close(fd);
		if (published) {
			check_file(path, CR_SIZE, 31, 1u << 20);
		} else {
			unsigned char got[sizeof(page) + 1];
			int rd = xopen(path, O_RDONLY);
			if (read(rd, got, sizeof(got)) != (ssize_t)sizeof(page) || memcmp(got, page, sizeof(page)))
				fail("%s: the bytes read back differ", path);
			close(rd);
		}
	}
	printf("vforkflock: both checkpoints\n");
	return 0;
}
