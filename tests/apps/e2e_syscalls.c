/* e2e_helper: Calls around the wrappers: raw system calls, mmap, /proc/self/fd, io_uring, POSIX AIO, file locks. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

#define FILLER 0x5A

/* After calls on the tagged reader fd that had to fail: b still holds
 * FILLER (else "WROTE wrote into the buffer"), and the library's own read()
 * still gives PATH's bytes e from offset 0 (else "read() after AFTER ..."). */
void reader_intact(int fd, unsigned char *b, const unsigned char *e, const struct args *arg,
			  const char *wrote, const char *after)
{
	for (size_t k = 0; k < arg->size; k++)
		if (b[k] != FILLER)
			fail("%s wrote into the buffer (byte %zu)", wrote, k);
	if (!reads_back(fd, b, e, arg->size, arg->path))
		fail("read() after %s returned wrong bytes", after);
	close(fd);
}

/* After calls on the tagged writer wfd that had to fail: the library's own
 * write() still works, and PATH2 ends up holding e. */
static void writer_intact(int wfd, const unsigned char *e, const struct args *arg)
{
	write_all(wfd, e, arg->size, arg->path2);
	close(wfd);
	check_file(arg->path2, arg->size, arg->seed, 0);
}

int m_rawsys(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size);

	int fd = gen_open(arg.path, arg.size, arg.seed);
	memset(b, FILLER, arg.size);
	errno = 0;
	long r = syscall(SYS_read, fd, b, arg.size);
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_read) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	errno = 0;
	r = syscall(SYS_pread64, fd, b, arg.size, 0);
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_pread64) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	struct iovec iov = { b, arg.size };
	errno = 0;
	r = syscall(SYS_readv, fd, &iov, 1);
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_readv) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	reader_intact(fd, b, e, &arg, "a raw syscall", "the raw syscalls");

	int wfd = xopen(arg.path2, O_WRONLY | O_CREAT | O_TRUNC);
	static const char junk[4096] = { 'J' };
	errno = 0;
	r = syscall(SYS_write, wfd, junk, sizeof(junk));
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_write) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	errno = 0;
	r = syscall(SYS_pwrite64, wfd, junk, sizeof(junk), 0);
	if (r != -1 || errno != EBADF)
		fail("syscall(SYS_pwrite64) on a tagged fd returned %ld (%s), expected -1 EBADF", r,
		     strerror(errno));
	write_all(wfd, e, arg.size, arg.path2);
	xclose(wfd, arg.path2);
	check_file(arg.path2, arg.size, arg.seed, 0);
	printf("rawsys: SYS_read, SYS_pread64, SYS_readv, SYS_write, SYS_pwrite64 failed with EBADF\n");
	free(b);
	free(e);
	return 0;
}

/* Maps the reader fd of PATH as prot and flags (named flags_name in
 * messages) and checks that the map shows PATH's bytes e. */
void expect_map(int fd, int prot, int flags, const char *flags_name, const unsigned char *e,
		       const struct args *arg)
{
	unsigned char *m = mmap(NULL, arg->size, prot, flags, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap(%s) of a tagged fd: %s", flags_name, strerror(errno));
	if (memcmp(m, e, arg->size) != 0)
		fail("mmap(%s) of %s shows wrong bytes", flags_name, arg->path);
	munmap(m, arg->size);
}

int m_mmap(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size);

	/* a cached checkpoint mapped read-only, shared and private */
	int fd = gen_open(arg.path, arg.size, arg.seed);
	if (read_all(fd, b, 1000, arg.path) != 1000)
		fail("short read of %s", arg.path);
	expect_map(fd, PROT_READ, MAP_SHARED, "MAP_SHARED", e, &arg);
	expect_map(fd, PROT_READ | PROT_WRITE, MAP_PRIVATE, "MAP_PRIVATE", e, &arg);
	/* the descriptor keeps its position and now reads the real file */
	if (read_all(fd, b + 1000, arg.size - 1000, arg.path) != arg.size - 1000)
		fail("short read of %s after mmap", arg.path);
	if (memcmp(b, e, arg.size) != 0)
		fail("read of %s after mmap returned wrong bytes", arg.path);
	struct stat st;
	if (fstat(fd, &st) != 0 || (size_t)st.st_size != arg.size)
		fail("fstat %s after mmap: wrong size", arg.path);
	close(fd);
	check_file(arg.path, arg.size, arg.seed, 0);

	/* a writer that maps its checkpoint and changes it through the map */
	fd = xopen(arg.path2, O_RDWR | O_CREAT | O_TRUNC);
	write_all(fd, e, arg.size, arg.path2);
	unsigned char *m = mmap(NULL, arg.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap(MAP_SHARED, PROT_WRITE) of a tagged writer: %s", strerror(errno));
	if (memcmp(m, e, arg.size) != 0)
		fail("mmap of the writer %s shows wrong bytes", arg.path2);
	memset(m, 'M', 4096);
	memcpy(e, m, 4096);
	if (msync(m, arg.size, MS_SYNC) != 0)
		fail("msync: %s", strerror(errno));
	munmap(m, arg.size);
	xclose(fd, arg.path2);
	fd = xopen(arg.path2, O_RDONLY);
	if (read_all(fd, b, arg.size, arg.path2) != arg.size || read(fd, b, 0) != 0)
		fail("short read of %s", arg.path2);
	if (memcmp(b, e, arg.size) != 0)
		fail("%s does not hold what was written through write() and the map", arg.path2);
	close(fd);
	printf("mmap: tagged descriptors map the right bytes\n");
	free(b);
	free(e);
	return 0;
}

int m_procfd(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size + 1);
	char proc[64], devfd[64];

	gen_file(arg.path, arg.size, arg.seed, 0);
	for (int acc = 0; acc < 2; acc++) {
		const char *what = acc ? "a tagged writer" : "a tagged reader";
		int fd = xopen(arg.path, acc ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY);
		if (acc)
			write_all(fd, e, arg.size, arg.path);
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		snprintf(devfd, sizeof(devfd), "/dev/fd/%d", fd);
		int fd2 = open(proc, O_RDONLY);
		if (fd2 < 0)
			fail("reopening %s of %s: %s", proc, what, strerror(errno));
		size_t got = read_all(fd2, b, arg.size + 1, proc);
		if (got != arg.size || memcmp(b, e, arg.size) != 0)
			fail("%s of %s read %zu bytes%s, expected the %zu of the checkpoint", proc, what, got,
			     got == arg.size ? " that differ" : "", arg.size);
		close(fd2);
		FILE *f = fopen(devfd, "r");
		if (!f)
			fail("fopen %s of %s: %s", devfd, what, strerror(errno));
		got = fread(b, 1, arg.size + 1, f);
		if (got != arg.size || memcmp(b, e, arg.size) != 0)
			fail("%s of %s read %zu bytes, expected the checkpoint", devfd, what, got);
		fclose(f);
		if (acc) {
			/* a write through the reopened path reaches the file */
			fd2 = open(proc, O_WRONLY);
			if (fd2 < 0 || pwrite(fd2, e, 1, 0) != 1)
				fail("writing through %s: %s", proc, strerror(errno));
			close(fd2);
		}
		/* the first descriptor still reads the checkpoint */
		if (pread(fd, b, arg.size, 0) != (ssize_t)arg.size || memcmp(b, e, arg.size) != 0)
			fail("%s: the descriptor reopened through %s no longer reads the checkpoint", what, proc);
		close(fd);
	}
	check_file(arg.path, arg.size, arg.seed, 0);
	printf("procfd: tagged descriptors reopened through /proc/self/fd and /dev/fd\n");
	free(b);
	free(e);
	return 0;
}

/* io_uring through its raw system calls (liburing is not needed). */
struct uring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int uring_init(struct uring *u)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	u->fd = (int)syscall(__NR_io_uring_setup, 4, &p);
	if (u->fd < 0)
		return -errno;
	size_t sqsz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cqsz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	bool single = p.features & IORING_FEAT_SINGLE_MMAP;
	if (single && cqsz > sqsz)
		sqsz = cqsz;
	char *sq = mmap(NULL, sqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd,
			IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		fail("mmap of the io_uring SQ ring: %s", strerror(errno));
	char *cq = single ? sq :
		   mmap(NULL, cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd,
			IORING_OFF_CQ_RING);
	if (cq == MAP_FAILED)
		fail("mmap of the io_uring CQ ring: %s", strerror(errno));
	u->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_SQES);
	if (u->sqes == MAP_FAILED)
		fail("mmap of the io_uring SQEs: %s", strerror(errno));
	u->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	u->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	u->sq_array = (unsigned *)(sq + p.sq_off.array);
	u->cq_head = (unsigned *)(cq + p.cq_off.head);
	u->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	u->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	u->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* Submits one read or write and returns its completion's result. */
static int uring_rw(struct uring *u, int op, int fd, void *buf, unsigned len, uint64_t off)
{
	unsigned tail = *u->sq_tail, idx = tail & *u->sq_mask;
	struct io_uring_sqe *sqe = &u->sqes[idx];
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = (uint8_t)op;
	sqe->fd = fd;
	sqe->addr = (uint64_t)(uintptr_t)buf;
	sqe->len = len;
	sqe->off = off;
	sqe->user_data = 42;
	u->sq_array[idx] = idx;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
	long r = syscall(__NR_io_uring_enter, u->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
	if (r < 0)
		fail("io_uring_enter: %s", strerror(errno));
	unsigned head = __atomic_load_n(u->cq_head, __ATOMIC_ACQUIRE);
	if (head == __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE))
		fail("io_uring: no completion after io_uring_enter");
	struct io_uring_cqe *cqe = &u->cqes[head & *u->cq_mask];
	int res = cqe->res;
	__atomic_store_n(u->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

int m_uring(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	struct uring u;
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size);

	int rc = uring_init(&u);
	if (rc < 0)
		note("io_uring not tested: io_uring_setup failed here (%s)", strerror(-rc));
	int fd = gen_open(arg.path, arg.size, arg.seed);
	memset(b, FILLER, arg.size);
	struct iovec iov = { b, arg.size };
	int r = uring_rw(&u, IORING_OP_READ, fd, b, (unsigned)arg.size, 0);
	int rv = uring_rw(&u, IORING_OP_READV, fd, &iov, 1, 0);
	if (r >= 0 || rv >= 0)
		fail("io_uring read of a tagged fd returned %d / readv %d (expected errors)", r, rv);
	reader_intact(fd, b, e, &arg, "io_uring", "io_uring");

	int wfd = xopen(arg.path2, O_WRONLY | O_CREAT | O_TRUNC);
	int w = uring_rw(&u, IORING_OP_WRITE, wfd, b, (unsigned)arg.size, 0);
	if (w >= 0)
		fail("io_uring write to a tagged fd returned %d (expected an error)", w);
	writer_intact(wfd, e, &arg);
	printf("uring: read %s, readv %s, write %s\n", strerror(-r), strerror(-rv), strerror(-w));
	free(b);
	free(e);
	return 0;
}

/* One POSIX aio_read or aio_write of n bytes at offset 0, which must fail;
 * returns its error. */
static void aio_run(int fd, unsigned char *b, size_t n, bool wr, bool list)
{
	struct aiocb cb;
	memset(&cb, 0, sizeof(cb));
	cb.aio_fildes = fd;
	cb.aio_buf = b;
	cb.aio_nbytes = n;
	cb.aio_lio_opcode = wr ? LIO_WRITE : LIO_READ;
	struct aiocb *l[1] = { &cb };
	int rc = list ? lio_listio(LIO_NOWAIT, l, 1, NULL) : wr ? aio_write(&cb) : aio_read(&cb);
	if (rc != 0)
		fail("%s on a tagged descriptor: %s", list ? "lio_listio" : wr ? "aio_write" : "aio_read",
		     strerror(errno));
	const struct aiocb *wait[1] = { &cb };
	while (aio_error(&cb) == EINPROGRESS)
		aio_suspend(wait, 1, NULL);
	int err = aio_error(&cb);
	ssize_t r = aio_return(&cb);
	if (err != 0 || r != (ssize_t)n)
		fail("POSIX %s on a tagged descriptor: %zd bytes of %zu (%s)", list ? "lio_listio" :
		     wr ? "aio_write" : "aio_read", r, n, strerror(err));
}

/* aio PATH PATH2 SIZE SEED: POSIX AIO (aio_read, aio_write, lio_listio,
 * aio_fsync) on tagged descriptors: the C library's helper threads call the
 * kernel directly, on the real file the checkpoint goes to first. */
int m_aio(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH PATH2 SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size);

	for (int list = 0; list < 2; list++) {
		int fd = gen_open(arg.path, arg.size, arg.seed);
		memset(b, FILLER, arg.size);
		aio_run(fd, b, arg.size, false, list);
		expect_bytes(b, e, 0, arg.size, "aio_read of a tagged reader");
		close(fd);

		int wfd = xopen(arg.path2, O_RDWR | O_CREAT | O_TRUNC);
		aio_run(wfd, e, arg.size, true, list);
		struct aiocb s;
		memset(&s, 0, sizeof(s));
		s.aio_fildes = wfd;
		if (aio_fsync(O_SYNC, &s) != 0)
			fail("aio_fsync: %s", strerror(errno));
		const struct aiocb *wait[1] = { &s };
		while (aio_error(&s) == EINPROGRESS)
			aio_suspend(wait, 1, NULL);
		if (aio_error(&s) != 0)
			fail("aio_fsync of a tagged writer: %s", strerror(aio_error(&s)));
		/* the descriptor reads what aio wrote, and so does the file */
		if (!reads_back(wfd, b, e, arg.size, arg.path2))
			fail("read() after aio_write returned wrong bytes");
		close(wfd);
		check_file(arg.path2, arg.size, arg.seed, 0);
	}
	printf("aio: aio_read, aio_write, lio_listio and aio_fsync on tagged descriptors\n");
	free(b);
	free(e);
	return 0;
}

int m_locks(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");

	gen_file(arg.path, arg.size, arg.seed, 0);
	for (int acc = 0; acc < 2; acc++) {
		int fd = xopen(arg.path, acc ? O_WRONLY | O_TRUNC : O_RDONLY);
		if (flock(fd, acc ? LOCK_EX : LOCK_SH) != 0)
			fail("flock on a tagged %s fd: %s", acc ? "writer" : "reader", strerror(errno));
		if (flock(fd, LOCK_UN) != 0)
			fail("flock(LOCK_UN) on a tagged %s fd: %s", acc ? "writer" : "reader", strerror(errno));
		struct flock fl = { .l_type = (short)(acc ? F_WRLCK : F_RDLCK), .l_whence = SEEK_SET };
		if (fcntl(fd, F_SETLK, &fl) != 0)
			fail("fcntl(F_SETLK) on a tagged %s fd: %s", acc ? "writer" : "reader", strerror(errno));
		struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		if (fcntl(fd, F_GETLK, &q) != 0 || q.l_type != F_UNLCK)
			fail("fcntl(F_GETLK) on a tagged %s fd sees a lock of another process", acc ? "writer" : "reader");
		/* the kernel's rule: no write lock through a reader, nor read
		 * lock through a writer */
		struct flock wrong = { .l_type = (short)(acc ? F_RDLCK : F_WRLCK), .l_whence = SEEK_SET };
		errno = 0;
		if (fcntl(fd, F_SETLK, &wrong) == 0 || errno != EBADF)
			fail("a %s lock through a tagged %s fd: %s", acc ? "read" : "write", acc ? "writer" : "reader",
			     errno ? strerror(errno) : "it succeeded");
		printf("locks: %s fd: flock, F_SETLK and F_GETLK work\n", acc ? "writer" : "reader");
		if (acc) {
			unsigned char *e = pattern_buf(arg.size, arg.seed);
			write_all(fd, e, arg.size, arg.path);
			free(e);
		}
		close(fd);
	}
	check_file(arg.path, arg.size, arg.seed, 0);
	/* a record lock of a new checkpoint excludes another process, which
	 * locks the real file (here with raw system calls, no library) */
	char np[PATH_MAX];
	snprintf(np, sizeof(np), "%s.new", arg.path);
	int fd = open(np, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open %s: %s", np, strerror(errno));
	unsigned char *e = pattern_buf(arg.size, arg.seed + 1);
	write_all(fd, e, arg.size / 2, np);
	if (lockf(fd, F_TLOCK, 0) != 0)
		fail("lockf(F_TLOCK) of a new checkpoint: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		int o = (int)syscall(SYS_openat, AT_FDCWD, np, O_RDWR);
		struct flock w = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		long r = o < 0 ? -1 : syscall(SYS_fcntl, o, F_SETLK, &w);
		_exit(o < 0 ? 2 : r == 0 ? 3 : (errno == EAGAIN || errno == EACCES) ? 0 : 4);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		fail("fork: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("another process locking %s while this one holds lockf(F_TLOCK): %s", np,
		     WEXITSTATUS(st) == 2 ? "the real file is missing" :
		     WEXITSTATUS(st) == 3 ? "it got the lock" : "an unexpected error");
	write_all(fd, e + arg.size / 2, arg.size - arg.size / 2, np);
	close(fd);
	check_file(np, arg.size, arg.seed + 1, 0);
	free(e);
	printf("locks: a record lock of a new checkpoint excludes another process\n");
	return 0;
}

/* stdout moved onto a tagged descriptor with dup2: glibc's stdio writes
 * there with internal calls the library cannot see, so the file must be
 * used directly, and it holds what write() and stdio wrote, in order. */

/* append-positional PATH: Linux's rule for O_APPEND descriptors: pwrite,
 * pwritev and pwritev2 write at the end whatever their offset, and leave
 * the position alone; pwritev2 with RWF_APPEND appends on any descriptor.
 * The file must read "12345ABCDEF" (in the process, and at its real path
 * checked by append-positional-check). */
static void append_pos(int fd, off_t want, const char *after)
{
	off_t pos = lseek(fd, 0, SEEK_CUR);
	if (pos != want)
		fail("the position after %s is %lld, expected %lld", after, (long long)pos, (long long)want);
}

static void append_expect(const char *path)
{
	char b[64] = "";
	int fd = xopen(path, O_RDONLY);
	ssize_t r = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (r != 11 || memcmp(b, "12345ABCDEF", 11) != 0)
		fail("%s holds '%.*s' (%zd bytes), expected '12345ABCDEF': a positional write to an O_APPEND "
		     "descriptor went to its offset", path, (int)(r > 0 ? r : 0), b, r);
}

int m_append_positional(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0)
		fail("open %s: %s", argv[1], strerror(errno));
	if (write(fd, "12345", 5) != 5)
		fail("write: %s", strerror(errno));
	append_pos(fd, 5, "write");
	if (pwrite(fd, "AB", 2, 0) != 2)
		fail("pwrite: %s", strerror(errno));
	append_pos(fd, 5, "pwrite at 0 of an O_APPEND descriptor");
	struct iovec v[2] = { { "C", 1 }, { "D", 1 } };
	if (pwritev(fd, v, 2, 1) != 2)
		fail("pwritev: %s", strerror(errno));
	append_pos(fd, 5, "pwritev at 1 of an O_APPEND descriptor");
	close(fd);
	fd = open(argv[1], O_WRONLY);
	if (fd < 0)
		fail("reopen %s: %s", argv[1], strerror(errno));
	struct iovec e = { "E", 1 };
	if (pwritev2(fd, &e, 1, 0, RWF_APPEND) != 1)
		fail("pwritev2(RWF_APPEND): %s", strerror(errno));
	append_pos(fd, 0, "pwritev2(RWF_APPEND) at 0");
	off_t end = lseek(fd, 0, SEEK_END);
	if (end != 10)
		fail("the file ends at %lld after 10 bytes were written (%s)", (long long)end,
		     end < 0 ? strerror(errno) : "positional writes to O_APPEND went to their offset");
	if (write(fd, "F", 1) != 1)
		fail("write at the end: %s", strerror(errno));
	close(fd);
	append_expect(argv[1]);
	printf("append-positional: positional writes to O_APPEND went to the end\n");
	return 0;
}

int m_append_positional_check(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	append_expect(argv[1]);
	return 0;
}

/* seek-limits TAGGED PLAIN: lseek on a tagged descriptor answers as on an
 * untagged file of the same file system: positions past the largest file
 * it allows, and sums that overflow, fail with EINVAL; SEEK_DATA and
 * SEEK_HOLE past the end fail with ENXIO. Both files hold 10 bytes. */
int m_seek_limits(int argc, char **argv)
{
	need_args(argc, 3, "TAGGED PLAIN");
	static const off_t offs[] = { 0, 5, -5, -11, (off_t)1 << 40, ((off_t)1 << 44) - 4096, (off_t)1 << 44,
				      ((off_t)1 << 44) + 4096, (off_t)1 << 60, INT64_MAX - 5, INT64_MAX, INT64_MIN };
	static const int whences[] = { SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE };
	int fd[2];
	for (int k = 0; k < 2; k++) {
		fd[k] = open(argv[1 + k], O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd[k] < 0)
			fail("open %s: %s", argv[1 + k], strerror(errno));
		if (write(fd[k], "0123456789", 10) != 10)
			fail("write %s: %s", argv[1 + k], strerror(errno));
	}
	int n = 0;
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		for (size_t w = 0; w < sizeof(whences) / sizeof(whences[0]); w++) {
			off_t r[2];
			int e[2];
			for (int k = 0; k < 2; k++) {
				if (lseek(fd[k], 7, SEEK_SET) != 7)
					fail("lseek to 7: %s", strerror(errno));
				errno = 0;
				r[k] = lseek(fd[k], offs[i], whences[w]);
				e[k] = r[k] < 0 ? errno : 0;
			}
			if (r[0] != r[1] || e[0] != e[1])
				fail("lseek(%lld, whence %d) at 7: %lld (%s) on the tagged file, %lld (%s) on the "
				     "untagged one", (long long)offs[i], whences[w], (long long)r[0], strerror(e[0]),
				     (long long)r[1], strerror(e[1]));
			n++;
		}
	close(fd[0]);
	close(fd[1]);
	/* a stream's fseeko by SEEK_CUR, after bytes still in its buffer */
	static const off_t soffs[] = { 3, -13, ((off_t)1 << 44) - 4096, INT64_MAX - 5, INT64_MAX };
	for (size_t i = 0; i < sizeof(soffs) / sizeof(soffs[0]); i++) {
		int rc[2], e[2];
		off_t at[2];
		for (int k = 0; k < 2; k++) {
			FILE *f = fopen(argv[1 + k], "w+");
			if (!f || fwrite("0123456789", 1, 10, f) != 10)
				fail("fopen/fwrite %s: %s", argv[1 + k], strerror(errno));
			errno = 0;
			rc[k] = fseeko(f, soffs[i], SEEK_CUR);
			e[k] = rc[k] ? errno : 0;
			at[k] = ftello(f);
			fclose(f);
		}
		if (rc[0] != rc[1] || e[0] != e[1] || at[0] != at[1])
			fail("fseeko(%lld, SEEK_CUR) after 10 bytes: %d (%s) at %lld on the tagged stream, %d (%s) "
			     "at %lld on the untagged one", (long long)soffs[i], rc[0], strerror(e[0]),
			     (long long)at[0], rc[1], strerror(e[1]), (long long)at[1]);
		n++;
	}
	printf("seek-limits: %d seeks answered as on an untagged file\n", n);
	return 0;
}

/* errno-kept DIR: successful calls on tagged files leave errno as the
 * program set it (EDOM here), as the C library's calls do: a program may
 * test errno after a call that succeeded. */
static void errno_check(const char *what, bool ok)
{
	int e = errno;
	if (!ok)
		fail("%s failed: %s", what, strerror(e));
	if (e != EDOM)
		fail("%s succeeded but changed errno from EDOM to %s", what, strerror(e));
}

int m_errno_kept(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	static const int flags[] = { O_WRONLY | O_CREAT | O_APPEND, O_RDWR | O_CREAT, O_WRONLY | O_CREAT,
				     O_WRONLY | O_CREAT | O_TRUNC, O_RDWR | O_CREAT | O_EXCL, O_RDWR | O_CREAT | O_TRUNC };
	static const char *const modes[] = { "a", "a+", "w", "w+", "r+", "r" };
	char p[PATH_MAX], q[PATH_MAX];
	struct stat st;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		snprintf(p, sizeof(p), "%s/open%zu.bin", argv[1], i);
		for (int again = 0; again < 2; again++) {
			if (again && (flags[i] & O_EXCL))
				continue;
			errno = EDOM;
			int fd = open(p, flags[i], 0644);
			errno_check(again ? "open of an existing file" : "open of a new file", fd >= 0);
			errno = EDOM;
			errno_check("write", write(fd, "0123456789", 10) == 10);
			errno = EDOM;
			errno_check("lseek", lseek(fd, 0, SEEK_SET) == 0);
			errno = EDOM;
			errno_check("fstat", fstat(fd, &st) == 0);
			errno = EDOM;
			errno_check("close", close(fd) == 0);
		}
		errno = EDOM;
		errno_check("stat", stat(p, &st) == 0);
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(p, sizeof(p), "%s/stream%zu.bin", argv[1], i);
		if (modes[i][0] == 'r') {
			int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || write(fd, "0123456789", 10) != 10 || close(fd) != 0)
				fail("writing %s: %s", p, strerror(errno));
		}
		errno = EDOM;
		FILE *f = fopen(p, modes[i]);
		errno_check("fopen", f != NULL);
		char b[4];
		errno = EDOM;
		if (modes[i][0] == 'r' && modes[i][1] == '\0')
			errno_check("fread", fread(b, 1, 4, f) == 4);
		else
			errno_check("fwrite", fwrite("abcd", 1, 4, f) == 4);
		errno = EDOM;
		errno_check("fclose", fclose(f) == 0);
	}
	snprintf(p, sizeof(p), "%s/open0.bin", argv[1]);
	snprintf(q, sizeof(q), "%s/moved.bin", argv[1]);
	errno = EDOM;
	errno_check("access", access(p, R_OK | W_OK) == 0);
	errno = EDOM;
	errno_check("faccessat", faccessat(AT_FDCWD, p, R_OK, 0) == 0);
	errno = EDOM;
	errno_check("rename", rename(p, q) == 0);
	errno = EDOM;
	errno_check("unlink", unlink(q) == 0);
	/* a growth that sends a cached checkpoint to its real file (a hole of
	 * more than 64 MiB), and a write after it, at the real file */
	snprintf(p, sizeof(p), "%s/grown.bin", argv[1]);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0123456789", 10) != 10)
		fail("writing %s: %s", p, strerror(errno));
	errno = EDOM;
	errno_check("ftruncate by a hole of 100 MiB", ftruncate(fd, 100L << 20) == 0);
	errno = EDOM;
	errno_check("write after it", write(fd, "x", 1) == 1);
	errno = EDOM;
	errno_check("close", close(fd) == 0);
	unlink(p);
	printf("errno-kept: successful calls left errno alone\n");
	return 0;
}

/* b (size bytes) written to path anew, fsync'd and closed. */
static void write_synced(const char *path, const unsigned char *b, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open %s: %s", path, strerror(errno));
	write_all(fd, b, size, path);
	if (fsync(fd) != 0)
		fail("fsync %s: %s", path, strerror(errno));
	xclose(fd, path);
}

/* fsync-replace DIR SIZE N: the durable-replace idiom, N times:
 * write DIR/state.tmp, fsync, close, rename it to DIR/state.bin, fsync
 * the folder. Once rename returns, the real file state.bin holds the
 * step's bytes and state.tmp is gone (a kill then loses nothing): the
 * fsync made them durable there, and the rename moves that file. */
int m_fsync_replace(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE N");
	char tmp[PATH_MAX], path[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/state.tmp", arg.path);
	snprintf(path, sizeof(path), "%s/state.bin", arg.path);
	for (long s = 1; s <= arg.n; s++) {
		unsigned char *b = pattern_buf(arg.size, (uint64_t)s);
		write_synced(tmp, b, arg.size);
		if (rename(tmp, path) != 0)
			fail("rename %s: %s", tmp, strerror(errno));
		int dfd = open(arg.path, O_RDONLY | O_DIRECTORY);
		if (dfd < 0 || fsync(dfd) != 0)
			fail("fsync of the folder %s: %s", arg.path, strerror(errno));
		close(dfd);
		char when[64];
		snprintf(when, sizeof(when), "step %ld, right after the rename", s);
		raw_check(path, b, arg.size, when);
		if (raw_exists(tmp))
			fail("%s: %s is still there", when, tmp);
		free(b);
	}
	/* a rename the kernel refuses (onto a folder): the fsync'd file stays
	 * where it is, at its real path and in the process */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/folder", arg.path);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		fail("mkdir %s: %s", dir, strerror(errno));
	unsigned char *b = pattern_buf(arg.size, 99);
	write_synced(tmp, b, arg.size);
	errno = 0;
	if (rename(tmp, dir) == 0 || errno != EISDIR)
		fail("rename of %s onto the folder %s: %s, expected EISDIR", tmp, dir, strerror(errno));
	raw_check(tmp, b, arg.size, "after a rename refused");
	unsigned char *r = xmalloc(arg.size + 1);
	int fd = xopen(tmp, O_RDONLY);
	if (read_all(fd, r, arg.size + 1, tmp) != arg.size || memcmp(r, b, arg.size) != 0)
		fail("%s does not read back as written after a rename refused", tmp);
	xclose(fd, tmp);
	free(r);
	free(b);
	printf("fsync-replace: each step's bytes were at the real path when rename returned\n");
	return 0;
}

/* umask-modes DIR: a program that changes its umask between checkpoints
 * (umask(077) before a private file): each new file's mode is 0666 with
 * the umask of its open taken away, in fstat and stat while cached, and
 * at its real path (checked after exit: DIR/m022.bin 644, m077.bin 600,
 * m002.bin 664, m000.bin 666, s077.bin 600 by fopen; keep.bin, made 0666,
 * rewritten under umask 077, stays 666). */
static void umask_expect(const char *path, int fd, mode_t want)
{
	struct stat st;
	if ((fd >= 0 ? fstat(fd, &st) : stat(path, &st)) != 0)
		fail("%s %s: %s", fd >= 0 ? "fstat" : "stat", path, strerror(errno));
	if ((st.st_mode & 07777) != want)
		fail("%s of %s says mode %o, expected %o", fd >= 0 ? "fstat" : "stat", path,
		     (unsigned)(st.st_mode & 07777), (unsigned)want);
}

/* Writes path (made with mode mode) and checks the mode fstat gives while
 * it is open and stat after its close: want, or want_after where it is
 * not -1 (an existing file keeps its mode). */
static void umask_file(const char *path, mode_t mode, const unsigned char *b, mode_t want, int want_after)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0)
		fail("open %s: %s", path, strerror(errno));
	write_all(fd, b, 100000, path);
	if (want_after < 0)
		umask_expect(path, fd, want);
	xclose(fd, path);
	umask_expect(path, -1, want_after < 0 ? want : (mode_t)want_after);
	unsigned char *r = xmalloc(100001);
	fd = xopen(path, O_RDONLY);
	if (read_all(fd, r, 100001, path) != 100000 || memcmp(r, b, 100000) != 0)
		fail("%s does not read back as written", path);
	xclose(fd, path);
	free(r);
}

int m_umask_modes(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	static const mode_t masks[] = { 022, 077, 002, 000 };
	char p[PATH_MAX];
	unsigned char *b = pattern_buf(100000, 5);
	snprintf(p, sizeof(p), "%s/keep.bin", argv[1]);
	umask(0);
	umask_file(p, 0666, b, 0666, -1);
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		umask(masks[i]);
		snprintf(p, sizeof(p), "%s/m%03o.bin", argv[1], (unsigned)masks[i]);
		umask_file(p, 0666, b, 0666 & ~masks[i], -1);
	}
	/* a vfork child's umask is its own (Python's subprocess with umask=) */
	umask(022);
	pid_t pid = vfork();
	if (pid == 0) {
		umask(077);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, NULL, 0) != pid)
		fail("vfork: %s", strerror(errno));
	snprintf(p, sizeof(p), "%s/v022.bin", argv[1]);
	umask_file(p, 0666, b, 0644, -1);
	umask(077);
	snprintf(p, sizeof(p), "%s/s077.bin", argv[1]);
	FILE *f = xfopen(p, "w");
	if (fwrite(b, 1, 100000, f) != 100000)
		fail("fwrite %s: %s", p, strerror(errno));
	xfclose(f);
	umask_expect(p, -1, 0600);
	snprintf(p, sizeof(p), "%s/keep.bin", argv[1]);
	umask_file(p, 0600, b, 0, 0666);
	/* a folder with a default ACL (u::rwx g::rwx o::rwx, as setfacl -d
	 * makes): the kernel gives a new file the open's mode, not the umask's */
	snprintf(p, sizeof(p), "%s/acl", argv[1]);
	if (mkdir(p, 0755) != 0)
		fail("mkdir %s: %s", p, strerror(errno));
	struct { uint32_t version; struct { uint16_t tag, perm; uint32_t id; } e[3]; } acl = {
		2, { { 0x01, 7, 0xffffffff }, { 0x04, 7, 0xffffffff }, { 0x20, 7, 0xffffffff } } };
	bool acls = setxattr(p, "system.posix_acl_default", &acl, sizeof(acl), 0) == 0;
	if (acls) {
		umask(022);
		snprintf(p, sizeof(p), "%s/acl/a.bin", argv[1]);
		umask_file(p, 0666, b, 0666, -1);
	}
	/* the library publishes under this umask, which takes more away */
	umask(0777);
	free(b);
	printf("umask-modes: each file has the mode of its open's umask%s\n",
	       acls ? " or of its folder's default ACL" : " (no ACLs here)");
	return 0;
}

/* copy-checks TAGGEDDIR PLAINDIR: copy_file_range, sendfile and splice
 * with a tagged side refuse what they refuse on untagged files: an output
 * in append mode, an input open only for writing, an output open only for
 * reading, a splice between two files; the outputs keep their bytes. */
static long copy_try(int call, int in, int out)
{
	off_t off = 0;
	errno = 0;
	ssize_t r = call == 0 ? copy_file_range(in, NULL, out, NULL, 100, 0) :
		    call == 1 ? sendfile(out, in, &off, 100) : splice(in, &off, out, NULL, 100, 0);
	return r < 0 ? -errno : r;
}

int m_copy_checks(int argc, char **argv)
{
	need_args(argc, 3, "TAGGEDDIR PLAINDIR");
	static const char *const calls[] = { "copy_file_range", "sendfile", "splice" };
	/* the input's and the output's open flags */
	static const int cases[][2] = { { O_RDONLY, O_WRONLY | O_APPEND }, { O_WRONLY, O_WRONLY },
					{ O_RDONLY, O_RDONLY }, { O_RDONLY, O_RDWR | O_APPEND }, { O_RDONLY, O_WRONLY } };
	unsigned char *b = pattern_buf(4096, 9);
	char src[2][PATH_MAX], dst[2][PATH_MAX];
	for (int k = 0; k < 2; k++) {
		snprintf(src[k], PATH_MAX, "%s/src.bin", argv[1 + k]);
		snprintf(dst[k], PATH_MAX, "%s/dst.bin", argv[1 + k]);
		int fd = open(src[k], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			fail("open %s: %s", src[k], strerror(errno));
		write_all(fd, b, 4096, src[k]);
		xclose(fd, src[k]);
	}
	int n = 0;
	for (int c = 0; c < 3; c++)
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			long r[2];
			off_t size[2];
			for (int k = 0; k < 2; k++) {
				int fd = open(dst[k], O_WRONLY | O_CREAT | O_TRUNC, 0644);
				if (fd < 0)
					fail("open %s: %s", dst[k], strerror(errno));
				write_all(fd, b, 100, dst[k]);
				xclose(fd, dst[k]);
				int in = open(src[k], cases[i][0]), out = open(dst[k], cases[i][1]);
				if (in < 0 || out < 0)
					fail("open: %s", strerror(errno));
				r[k] = copy_try(c, in, out);
				close(in);
				close(out);
				struct stat st;
				if (stat(dst[k], &st) != 0)
					fail("stat %s: %s", dst[k], strerror(errno));
				size[k] = st.st_size;
			}
			if (r[0] != r[1] || size[0] != size[1])
				fail("%s, case %zu: %ld (%s) and %lld bytes after it with the tagged files, %ld (%s) and "
				     "%lld bytes with the untagged ones", calls[c], i, r[0], r[0] < 0 ? strerror((int)-r[0]) : "-",
				     (long long)size[0], r[1], r[1] < 0 ? strerror((int)-r[1]) : "-", (long long)size[1]);
			n++;
		}
	/* into a pipe, a socket and a folder: copy_file_range copies between
	 * files only, splice needs a pipe */
	int pp[2], sp[2], dir[2];
	if (pipe(pp) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0)
		fail("pipe or socketpair: %s", strerror(errno));
	for (int k = 0; k < 2; k++) {
		if ((dir[k] = open(argv[1 + k], O_RDONLY | O_DIRECTORY)) < 0)
			fail("open %s: %s", argv[1 + k], strerror(errno));
		/* a new version: the copies above may have made the last one
		 * its real file */
		int fd = open(src[k], O_WRONLY | O_TRUNC);
		if (fd < 0)
			fail("open %s: %s", src[k], strerror(errno));
		write_all(fd, b, 4096, src[k]);
		xclose(fd, src[k]);
	}
	for (int c = 0; c < 3; c++)
		for (int to = 0; to < 3; to++) {
			long r[2];
			for (int k = 0; k < 2; k++) {
				int in = open(src[k], O_RDONLY);
				if (in < 0)
					fail("open %s: %s", src[k], strerror(errno));
				int out = to == 0 ? pp[1] : to == 1 ? sp[0] : dir[k];
				r[k] = c == 1 && to == 2 ? r[0] : copy_try(c, in, out);
				close(in);
				char sink[8192];
				while (to == 0 && r[k] > 0 && read(pp[0], sink, sizeof(sink)) == sizeof(sink))
					;
				while (to == 1 && r[k] > 0 && recv(sp[1], sink, sizeof(sink), MSG_DONTWAIT) > 0)
					;
			}
			if (r[0] != r[1])
				fail("%s into a %s: %ld (%s) from the tagged file, %ld (%s) from the untagged one", calls[c],
				     to == 0 ? "pipe" : to == 1 ? "socket" : "folder", r[0],
				     r[0] < 0 ? strerror((int)-r[0]) : "-", r[1], r[1] < 0 ? strerror((int)-r[1]) : "-");
			n++;
		}
	close(pp[0]);
	close(pp[1]);
	close(sp[0]);
	close(sp[1]);
	close(dir[0]);
	close(dir[1]);
	free(b);
	printf("copy-checks: %d copy calls answered as on untagged files\n", n);
	return 0;
}

/* emfile-excl PATH: an O_CREAT|O_EXCL open of a tagged path that fails
 * with EMFILE (the descriptor table full) makes no file, in the process or
 * at the real path; once two descriptors are freed the same open works. */
int m_emfile_excl(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	struct rlimit rl = { 64, 64 };
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		fail("setrlimit: %s", strerror(errno));
	int junk[64], n = 0;
	for (;;) {
		int fd = open("/dev/null", O_RDONLY);
		if (fd < 0)
			break;
		if (n == 64)
			fail("more than 64 descriptors under a limit of 64");
		junk[n++] = fd;
	}
	errno = 0;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd >= 0 || errno != EMFILE)
		fail("open with the table full: %d (%s), expected EMFILE", fd, strerror(errno));
	struct stat st;
	if (stat(argv[1], &st) == 0)
		fail("the failed open made %s (stat finds it)", argv[1]);
	if (raw_exists(argv[1]))
		fail("the failed open made %s at its real path", argv[1]);
	close(junk[--n]);
	close(junk[--n]);
	fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		fail("open once two descriptors were freed: %s", strerror(errno));
	unsigned char *b = pattern_buf(1000, 3);
	write_all(fd, b, 1000, argv[1]);
	xclose(fd, argv[1]);
	free(b);
	while (n > 0)
		close(junk[--n]);
	printf("emfile-excl: the open that failed made nothing\n");
	return 0;
}

/* links DIR: checkpoints reached through symbolic links, as a restart
 * script reaches them: a "latest" link remade to each new checkpoint
 * (stat, read, and the real file through the link, which another process
 * would open), a link made once to a file rewritten at each step, and a
 * folder reached through a link (run -> run_real), written through both
 * spellings in turn and read through the other one each time. The last
 * step leaves DIR/run_real/state.bin with the bytes of seed 16. */
static void links_read(const char *path, const unsigned char *b, size_t n, const char *what)
{
	struct stat st;
	if (stat(path, &st) != 0 || (size_t)st.st_size != n)
		fail("%s: stat %s: %s, size %lld, expected %zu", what, path, strerror(errno),
		     (long long)st.st_size, n);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("%s: open %s: %s", what, path, strerror(errno));
	unsigned char *r = xmalloc(n + 1);
	size_t got = read_all(fd, r, n + 1, path);
	xclose(fd, path);
	if (got != n || memcmp(r, b, n) != 0)
		fail("%s: %s reads %zu bytes%s", what, path, got, got == n ? " that differ" : "");
	free(r);
}

static void links_write(const char *path, const unsigned char *b, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open %s: %s", path, strerror(errno));
	write_all(fd, b, n, path);
	xclose(fd, path);
}

int m_links(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	const size_t n = 1 << 20;
	char p[PATH_MAX], l[PATH_MAX], q[PATH_MAX];
	snprintf(l, sizeof(l), "%s/latest.bin", argv[1]);
	for (int s = 0; s < 4; s++) {
		unsigned char *b = pattern_buf(n, (uint64_t)s);
		char name[32];
		snprintf(name, sizeof(name), "ckpt_%d.bin", s);
		snprintf(p, sizeof(p), "%s/%s", argv[1], name);
		links_write(p, b, n);
		unlink(l);
		if (symlink(name, l) != 0)
			fail("symlink %s: %s", l, strerror(errno));
		links_read(l, b, n, "the latest link");
		raw_check(l, b, n, "the real file through the latest link");
		free(b);
	}
	snprintf(p, sizeof(p), "%s/restart.bin", argv[1]);
	snprintf(l, sizeof(l), "%s/current.bin", argv[1]);
	for (int s = 4; s < 8; s++) {
		unsigned char *b = pattern_buf(n, (uint64_t)s);
		links_write(p, b, n);
		if (s == 4 && symlink("restart.bin", l) != 0)
			fail("symlink %s: %s", l, strerror(errno));
		links_read(l, b, n, "a link to a file rewritten");
		free(b);
	}
	snprintf(p, sizeof(p), "%s/run_real", argv[1]);
	snprintf(l, sizeof(l), "%s/run", argv[1]);
	if (mkdir(p, 0755) != 0 || symlink("run_real", l) != 0)
		fail("mkdir or symlink in %s: %s", argv[1], strerror(errno));
	snprintf(p, sizeof(p), "%s/run_real/state.bin", argv[1]);
	snprintf(q, sizeof(q), "%s/run/state.bin", argv[1]);
	for (int s = 8; s <= 16; s++) {
		unsigned char *b = pattern_buf(n, (uint64_t)s);
		bool via_link = s % 2;
		links_write(via_link ? q : p, b, n);
		links_read(via_link ? p : q, b, n, via_link ? "written through the folder's link, read by its folder"
							   : "written in the folder, read through its link");
		free(b);
	}
	/* a folder link retargeted between two writes through it (A/x, then
	 * B/x); a file removed by its other spelling (B/y); 1,100 files
	 * written through the link, then the first again through the folder */
	char cur[PATH_MAX];
	snprintf(cur, sizeof(cur), "%s/cur", argv[1]);
	snprintf(p, sizeof(p), "%s/A", argv[1]);
	snprintf(q, sizeof(q), "%s/B", argv[1]);
	if (mkdir(p, 0755) != 0 || mkdir(q, 0755) != 0 || symlink("A", cur) != 0)
		fail("mkdir or symlink in %s: %s", argv[1], strerror(errno));
	unsigned char *b20 = pattern_buf(n, 20), *b21 = pattern_buf(n, 21);
	snprintf(l, sizeof(l), "%s/cur/x.bin", argv[1]);
	links_write(l, b20, n);
	/* retargeted by a rename over the link, at once (a removal and a new
	 * link leave a moment without the folder: ckptcache(7)) */
	char tmpl[PATH_MAX];
	snprintf(tmpl, sizeof(tmpl), "%s/cur.new", argv[1]);
	if (symlink("B", tmpl) != 0 || rename(tmpl, cur) != 0)
		fail("retargeting %s: %s", cur, strerror(errno));
	links_write(l, b21, n);
	snprintf(p, sizeof(p), "%s/A/x.bin", argv[1]);
	links_read(p, b20, n, "written through a folder link before it was retargeted");
	snprintf(p, sizeof(p), "%s/B/x.bin", argv[1]);
	links_read(p, b21, n, "written through a folder link after it was retargeted");
	snprintf(l, sizeof(l), "%s/cur/y.bin", argv[1]);
	links_write(l, b21, n);
	snprintf(p, sizeof(p), "%s/B/y.bin", argv[1]);
	if (unlink(p) != 0)
		fail("unlink %s, written as %s: %s", p, l, strerror(errno));
	struct stat st;
	if (stat(l, &st) == 0 || errno != ENOENT)
		fail("%s is still there after its other spelling %s was removed", l, p);
	for (int i = 0; i < 1100; i++) {
		snprintf(l, sizeof(l), "%s/cur/f_%d.bin", argv[1], i);
		links_write(l, b20, 16);
	}
	snprintf(p, sizeof(p), "%s/B/f_0.bin", argv[1]);
	links_write(p, b21, 16);
	snprintf(l, sizeof(l), "%s/cur/f_0.bin", argv[1]);
	links_read(l, b21, 16, "written through a folder link 1,100 files ago, then through the folder");
	free(b20);
	free(b21);
	/* what the kernel refuses through links, refused the same: a loop
	 * (ELOOP), a link to nothing (ENOENT), a walk out of a missing folder
	 * to a held checkpoint (ENOENT) */
	static const struct { const char *name, *target; int err; } bad[] = {
		{ "loop_a.bin", "loop_b.bin", ELOOP }, { "loop_b.bin", "loop_a.bin", ELOOP },
		{ "dangling.bin", "never.bin", ENOENT }, { "walk.bin", "nodir/../latest.bin", ENOENT } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(l, sizeof(l), "%s/%s", argv[1], bad[i].name);
		if (symlink(bad[i].target, l) != 0)
			fail("symlink %s: %s", l, strerror(errno));
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(l, sizeof(l), "%s/%s", argv[1], bad[i].name);
		errno = 0;
		int fd = open(l, O_RDONLY);
		int oe = errno;
		errno = 0;
		int sr = stat(l, &st);
		if (fd >= 0 || oe != bad[i].err || sr == 0 || errno != bad[i].err)
			fail("%s -> %s: open %d (%s), stat %d (%s), expected %s", l, bad[i].target, fd, strerror(oe), sr,
			     strerror(errno), strerror(bad[i].err));
	}
	printf("links: checkpoints read through links as written\n");
	return 0;
}

/* sparse DIR: sparse files in tagged paths: "HEAD", a seek 96 MiB on,
 * "TAIL" (sparse0.bin, write; sparse1.bin, pwrite), and "HEAD" then an
 * ftruncate to 128 MiB (sparse2.bin). Each reads back as written, holes as
 * zeros; at their real paths they stay sparse (checked after exit). */
static void sparse_expect(int fd, off_t off, const char *want, size_t n, const char *path)
{
	char b[8];
	if (pread(fd, b, n, off) != (ssize_t)n || memcmp(b, want, n) != 0)
		fail("%s: the %zu bytes at %lld are not as written", path, n, (long long)off);
}

int m_sparse(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	const off_t far = (off_t)96 << 20;
	char p[PATH_MAX];
	for (int k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "%s/sparse%d.bin", argv[1], k);
		int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			fail("open %s: %s", p, strerror(errno));
		if (write(fd, "HEAD", 4) != 4)
			fail("write %s: %s", p, strerror(errno));
		off_t end = k == 2 ? (off_t)128 << 20 : far + 4;
		if (k == 0 && (lseek(fd, far, SEEK_SET) != far || write(fd, "TAIL", 4) != 4))
			fail("seek and write %s: %s", p, strerror(errno));
		if (k == 1 && pwrite(fd, "TAIL", 4, far) != 4)
			fail("pwrite %s: %s", p, strerror(errno));
		if (k == 2 && ftruncate(fd, end) != 0)
			fail("ftruncate %s: %s", p, strerror(errno));
		struct stat st;
		if (fstat(fd, &st) != 0 || st.st_size != end)
			fail("fstat %s: size %lld, expected %lld", p, (long long)st.st_size, (long long)end);
		sparse_expect(fd, 0, "HEAD", 4, p);
		sparse_expect(fd, far / 2, "\0\0\0\0", 4, p);
		if (k < 2)
			sparse_expect(fd, far, "TAIL", 4, p);
		xclose(fd, p);
	}
	printf("sparse: sparse files read back as written\n");
	return 0;
}

/* mtime-order DIR N: N times, a checkpoint DIR/a_i.bin written and closed,
 * then an untagged file DIR/b_i.dat: the checkpoint's modification time is
 * never after the later file's, in stat while cached (and at the real
 * paths, checked after exit with find -newer), as the kernel stamps them.
 * Then a checkpoint DIR/c_i.bin written through stdio, which looks at its
 * file before writing: it prints how many are strictly newer than a_i.bin
 * (a kernel with fine-grained stamps for files looked at makes them so). */
static bool mtime_after(const struct stat *x, const struct stat *y)
{
	return x->st_mtim.tv_sec > y->st_mtim.tv_sec ||
	       (x->st_mtim.tv_sec == y->st_mtim.tv_sec && x->st_mtim.tv_nsec > y->st_mtim.tv_nsec);
}

int m_mtime_order(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N");
	char a[PATH_MAX], b[PATH_MAX];
	unsigned char *buf = pattern_buf(65536, 1);
	int inverted = 0, strict = 0;
	for (long i = 0; i < arg.n; i++) {
		snprintf(a, sizeof(a), "%s/a_%ld.bin", arg.path, i);
		snprintf(b, sizeof(b), "%s/b_%ld.dat", arg.path, i);
		int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			fail("open %s: %s", a, strerror(errno));
		write_all(fd, buf, 65536, a);
		xclose(fd, a);
		fd = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			fail("open %s: %s", b, strerror(errno));
		write_all(fd, buf, 100, b);
		xclose(fd, b);
		snprintf(b, sizeof(b), "%s/c_%ld.bin", arg.path, i);
		FILE *f = xfopen(b, "w");
		if (fwrite(buf, 1, 100, f) != 100)
			fail("fwrite %s: %s", b, strerror(errno));
		xfclose(f);
		struct stat sa, sb, sc;
		snprintf(b, sizeof(b), "%s/b_%ld.dat", arg.path, i);
		if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
			fail("stat: %s", strerror(errno));
		snprintf(b, sizeof(b), "%s/c_%ld.bin", arg.path, i);
		if (stat(b, &sc) != 0)
			fail("stat %s: %s", b, strerror(errno));
		inverted += mtime_after(&sa, &sb) || mtime_after(&sa, &sc);
		strict += mtime_after(&sc, &sa);
	}
	free(buf);
	if (inverted)
		fail("%d of %ld checkpoints have a modification time after that of a file written after them",
		     inverted, arg.n);
	printf("mtime-order: %ld checkpoints no newer than the files after them\nstrict=%d\n", arg.n, strict);
	return 0;
}

/* thread-files PATH N: N threads one after another, each rewriting the
 * checkpoint PATH (a program that saves from a new thread each time): the
 * heap ends within 1 KiB a thread of where it began (what the library
 * keeps for a thread goes with it). */
static void *thread_file(void *arg)
{
	const char *path = arg;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0123456789", 10) != 10)
		fail("writing %s: %s", path, strerror(errno));
	xclose(fd, path);
	return NULL;
}

int m_thread_files(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH N");
	/* the first ones set up what the process keeps */
	for (int i = 0; i < 20; i++)
		thread_file((void *)arg.path);
	size_t before = mallinfo2().uordblks;
	for (long i = 0; i < arg.n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, thread_file, (void *)arg.path) != 0 || pthread_join(t, NULL) != 0)
			fail("thread %ld: %s", i, strerror(errno));
	}
	size_t after = mallinfo2().uordblks;
	if (after > before + (size_t)arg.n * 1024)
		fail("the heap grew by %zu KiB over %ld threads", (after - before) / 1024, arg.n);
	printf("thread-files: the heap grew by %ld KiB over %ld threads\n",
	       ((long)after - (long)before) / 1024, arg.n);
	return 0;
}
