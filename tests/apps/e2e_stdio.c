/* e2e_helper: Descriptor operations and stdio: standard output, lseek/fstat/dup/fcntl, fsync under persist=never, fread/fwrite in all sizes, freopen, files left open at exit. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <signal.h>

int m_stdout(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	const char *path = argv[1];
	static const char via_write[] = "via write()\n", via_stdio[] = "via stdio\n";
	char b[256];

	fflush(stdout);
	int saved = dup(1);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (saved < 0 || fd < 0)
		fail("open %s: %s", path, strerror(errno));
	if (dup2(fd, 1) != 1)
		fail("dup2: %s", strerror(errno));
	close(fd);
	ssize_t w = write(1, via_write, sizeof(via_write) - 1);
	int we = errno;
	fputs(via_stdio, stdout);
	int fr = fflush(stdout);
	int fe = errno;
	__fpurge(stdout);
	clearerr(stdout);
	if (dup2(saved, 1) != 1)
		fail("dup2 back: %s", strerror(errno));
	close(saved);
	if (w != (ssize_t)sizeof(via_write) - 1)
		fail("write() to stdout on a tagged descriptor: %s", w < 0 ? strerror(we) : "short");

	fd = xopen(path, O_RDONLY);
	size_t got = read_all(fd, (unsigned char *)b, sizeof(b) - 1, path);
	close(fd);
	b[got] = '\0';
	if (fr != 0)
		fail("stdio on a tagged stdout failed (%s); the checkpoint holds '%s'", strerror(fe), b);
	if (strcmp(b, "via write()\nvia stdio\n") != 0)
		fail("stdio on a tagged stdout succeeded but the checkpoint holds '%s'", b);
	printf("stdout: write() and stdio on a tagged stdout worked\n");
	return 0;
}

/* ---- modes: descriptor operations ------------------------------------------ */

static off_t xlseek(int fd, off_t off, int whence, off_t expect, const char *what)
{
	off_t r = lseek(fd, off, whence);
	if (r != expect)
		fail("lseek %s returned %lld (%s), expected %lld", what, (long long)r,
		     r < 0 ? strerror(errno) : "ok", (long long)expect);
	return r;
}

static void expect_fstat(int fd, off_t size, const char *what)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		fail("fstat %s: %s", what, strerror(errno));
	if (!S_ISREG(st.st_mode))
		fail("fstat %s: not a regular file (mode %o)", what, (unsigned)st.st_mode);
	if (st.st_size != size)
		fail("fstat %s: size %lld, expected %lld", what, (long long)st.st_size, (long long)size);
}

int m_fdops(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SEED");
	const size_t n = 300000;
	unsigned char *exp = xmalloc(2 * n), *b = xmalloc(2 * n);
	size_t len;

	int fd = open(arg.path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		fail("open %s: %s", arg.path, strerror(errno));
	pattern(exp, 0, n, arg.seed);
	write_all(fd, exp, n, arg.path);
	len = n;
	expect_fstat(fd, (off_t)len, "after write");
	xlseek(fd, 0, SEEK_CUR, (off_t)n, "SEEK_CUR");
	xlseek(fd, -100, SEEK_END, (off_t)n - 100, "SEEK_END-100");
	xlseek(fd, 0, SEEK_HOLE, (off_t)n, "SEEK_HOLE");
	xlseek(fd, 12345, SEEK_SET, 12345, "SEEK_SET");
	if (lseek(fd, -1, SEEK_SET) != -1 || errno != EINVAL)
		fail("lseek to -1 did not fail with EINVAL");

	/* an O_RDWR writer reads what it wrote so far */
	if (read_all(fd, b, 1000, arg.path) != 1000 || memcmp(b, exp + 12345, 1000) != 0)
		fail("read on the writer returned wrong bytes");
	if (pread(fd, b, 777, 200000) != 777 || memcmp(b, exp + 200000, 777) != 0)
		fail("pread on the writer returned wrong bytes");

	/* dup shares the position; dup2 onto a chosen number, F_DUPFD too */
	int d1 = dup(fd);
	if (d1 < 0)
		fail("dup: %s", strerror(errno));
	xlseek(d1, 0, SEEK_CUR, 13345, "SEEK_CUR on the dup");
	if (read_all(d1, b, 655, arg.path) != 655 || memcmp(b, exp + 13345, 655) != 0)
		fail("read on the dup returned wrong bytes");
	xlseek(fd, 0, SEEK_CUR, 14000, "SEEK_CUR after reading the dup");
	int d2 = dup2(fd, 77);
	if (d2 != 77)
		fail("dup2 to 77: %s", strerror(errno));
	int d3 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	if (d3 < 100)
		fail("fcntl(F_DUPFD_CLOEXEC): %s", strerror(errno));
	if (!(fcntl(d3, F_GETFD) & FD_CLOEXEC))
		fail("F_DUPFD_CLOEXEC copy has no FD_CLOEXEC");
	int fl = fcntl(d2, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) != O_RDWR || (fl & O_APPEND))
		fail("F_GETFL returned %#x, expected O_RDWR without O_APPEND", (unsigned)fl);

	/* dup2 of an untagged fd onto a tagged number: that number is no
	 * longer the checkpoint, the others still are */
	int nul = open("/dev/null", O_RDONLY);
	if (dup2(nul, d1) != d1)
		fail("dup2(/dev/null, tagged): %s", strerror(errno));
	if (read(d1, b, 10) != 0)
		fail("a number dup2'ed over by /dev/null still reads checkpoint bytes");
	close(nul);
	close(d1);

	/* O_APPEND through F_SETFL: a write goes to the end */
	if (fcntl(d2, F_SETFL, fl | O_APPEND) != 0)
		fail("F_SETFL O_APPEND: %s", strerror(errno));
	if (!(fcntl(fd, F_GETFL) & O_APPEND))
		fail("F_SETFL on a dup is not seen by the original");
	pattern(exp + len, len, 5000, arg.seed);
	write_all(fd, exp + len, 5000, arg.path);
	len += 5000;
	xlseek(fd, 0, SEEK_CUR, (off_t)len, "SEEK_CUR after an append");
	if (fcntl(fd, F_SETFL, fl) != 0)
		fail("F_SETFL: %s", strerror(errno));

	/* writev / readv / pwritev / preadv */
	struct iovec iov[3] = { { exp + len, 1 }, { exp + len + 1, 4095 }, { exp + len + 4096, 10000 } };
	pattern(exp + len, len, 14096, arg.seed);
	if (writev(fd, iov, 3) != 14096)
		fail("writev: %s", strerror(errno));
	len += 14096;
	struct iovec riov[2] = { { b, 3 }, { b + 3, 14093 } };
	if (preadv(fd, riov, 2, (off_t)(len - 14096)) != 14096 || memcmp(b, exp + len - 14096, 14096) != 0)
		fail("preadv returned wrong bytes");

	/* ftruncate: shorter drops the tail, longer adds zeros */
	if (ftruncate(fd, 250000) != 0)
		fail("ftruncate 250000: %s", strerror(errno));
	len = 250000;
	expect_fstat(fd, (off_t)len, "after shrinking");
	if (ftruncate(fd, 260000) != 0)
		fail("ftruncate 260000: %s", strerror(errno));
	memset(exp + len, 0, 10000);
	len = 260000;
	expect_fstat(d3, (off_t)len, "after growing (on a dup)");
	if (pread(fd, b, len + 10, 0) != (ssize_t)len || memcmp(b, exp, len) != 0)
		fail("after ftruncate the checkpoint reads wrong bytes");

	/* fsync returns only when the real file holds these bytes */
	if (fsync(fd) != 0)
		fail("fsync: %s", strerror(errno));
	raw_check(arg.path, exp, len, "right after fsync");
	pattern(exp + len, len, 40000, arg.seed);
	if (pwrite(fd, exp + len, 40000, (off_t)len) != 40000)
		fail("pwrite: %s", strerror(errno));
	len += 40000;
	if (fdatasync(d2) != 0)
		fail("fdatasync: %s", strerror(errno));
	raw_check(arg.path, exp, len, "right after fdatasync");
	/* pwritev2 with RWF_DSYNC syncs like fdatasync; preadv2 at offset -1
	 * reads at the position */
	pattern(exp + len, len, 3000, arg.seed);
	struct iovec v2 = { exp + len, 3000 };
	if (pwritev2(fd, &v2, 1, (off_t)len, RWF_DSYNC) != 3000)
		fail("pwritev2(RWF_DSYNC): %s", strerror(errno));
	len += 3000;
	raw_check(arg.path, exp, len, "right after pwritev2(RWF_DSYNC)");
	if (lseek(fd, 100, SEEK_SET) != 100)
		fail("lseek");
	struct iovec r2 = { b, 500 };
	if (preadv2(fd, &r2, 1, -1, 0) != 500 || memcmp(b, exp + 100, 500) != 0 ||
	    lseek(fd, 0, SEEK_CUR) != 600)
		fail("preadv2 at the position returned wrong bytes or left the position wrong");

	close(d2);
	close(d3);
	if (close(fd) != 0)
		fail("close: %s", strerror(errno));
	if (close(fd) != -1 || errno != EBADF)
		fail("a second close did not fail with EBADF");

	/* read-only: writes fail, ftruncate fails, positions are its own */
	fd = xopen(arg.path, O_RDONLY);
	expect_fstat(fd, (off_t)len, "reopened");
	if (write(fd, "x", 1) != -1 || errno != EBADF)
		fail("write to a read-only tagged fd did not fail with EBADF");
	if (ftruncate(fd, 0) != -1)
		fail("ftruncate of a read-only tagged fd succeeded");
	if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
		fail("F_GETFL of a read-only fd is not O_RDONLY");
	if (read_all(fd, b, 2 * n, arg.path) != len || memcmp(b, exp, len) != 0)
		fail("the reopened checkpoint reads wrong bytes");
	if (lseek(fd, (off_t)len, SEEK_DATA) != -1 || errno != ENXIO)
		fail("SEEK_DATA at the end did not fail with ENXIO");
	/* errno is the program's own across a successful call */
	errno = 4242;
	if (lseek(fd, 0, SEEK_SET) != 0 || errno != 4242)
		fail("a successful lseek changed errno");
	if (read(fd, b, 10) != 10 || errno != 4242)
		fail("a successful read changed errno");
	close(fd);

	/* fsync of a reader: the finished checkpoint is at its real path */
	char path2[PATH_MAX];
	snprintf(path2, sizeof(path2), "%s.2", arg.path);
	gen_file(path2, 3u << 20, arg.seed + 1, 0);
	fd = open(path2, O_RDONLY);
	if (fd < 0 || fsync(fd) != 0)
		fail("fsync of a reader of %s: %s", path2, strerror(errno));
	unsigned char *e2 = pattern_buf(3u << 20, arg.seed + 1);
	raw_check(path2, e2, 3u << 20, "right after fsync on a reader");
	close(fd);
	free(e2);
	printf("fdops: fstat, lseek, dup, dup2, F_DUPFD, F_GETFL/F_SETFL, readv/writev, ftruncate, fsync ok\n");
	free(b);
	free(exp);
	return 0;
}

/* fsync under CKPTCACHE_PERSIST=never: returns at once, nothing at home */
int m_fsync_never(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed);
	int fd = xopen(arg.path, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(fd, e, arg.size, arg.path);
	if (fsync(fd) != 0)
		fail("fsync: %s", strerror(errno));
	if (raw_exists(arg.path))
		fail("with CKPTCACHE_PERSIST=never, fsync put %s at its real path", arg.path);
	close(fd);
	check_file(arg.path, arg.size, arg.seed, 0);
	free(e);
	return 0;
}

/* ---- modes: stdio --------------------------------------------------------- */

int m_stdio(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = xmalloc(arg.size + 64), *b = xmalloc(arg.size + 64);
	pattern(e, 0, arg.size, arg.seed);

	FILE *f = xfopen(arg.path, "wb");
	for (size_t k = 0, c = 1; k < arg.size; k += c, c = c * 3 + 1) {
		size_t m = arg.size - k < c ? arg.size - k : c;
		if (fwrite(e + k, 1, m, f) != m)
			fail("fwrite: %s", strerror(errno));
	}
	if (fputc('Z', f) != 'Z' || fprintf(f, "%s", "tail") != 4)
		fail("fputc/fprintf: %s", strerror(errno));
	memcpy(e + arg.size, "Ztail", 5);
	size_t len = arg.size + 5;
	if (ftell(f) != (long)len)
		fail("ftell after writing: %ld, expected %zu", ftell(f), len);
	if (fflush(f) != 0)
		fail("fflush: %s", strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size != len)
		fail("fstat(fileno) of the stream: wrong size");
	xfclose(f);

	f = xfopen(arg.path, "rb");
	if (fseek(f, 0, SEEK_END) != 0 || ftell(f) != (long)len)
		fail("fseek/ftell to the end: %ld, expected %zu", ftell(f), len);
	rewind(f);
	size_t got = 0;
	for (size_t c = 7; got < len + 10; c = c * 2 + 3) {
		size_t r = fread(b + got, 1, c, f);
		got += r;
		if (r < c)
			break;
	}
	if (got != len || !feof(f) || ferror(f))
		fail("fread: %zu bytes, expected %zu", got, len);
	if (memcmp(b, e, len) != 0)
		fail("fread returned wrong bytes");
	if (fseek(f, (long)(arg.size / 2), SEEK_SET) != 0)
		fail("fseek: %s", strerror(errno));
	int c = fgetc(f);
	if (c != e[arg.size / 2] || ungetc(c, f) != c || fgetc(f) != c)
		fail("fgetc/ungetc returned a wrong byte");
	if (fseek(f, -5, SEEK_END) != 0 || fgetc(f) != 'Z')
		fail("fseek from the end: wrong byte");
	xfclose(f);

	/* w+: read back through the same stream */
	f = xfopen(arg.path, "w+");
	if (fwrite(e, 1, arg.size, f) != arg.size)
		fail("fwrite w+: %s", strerror(errno));
	rewind(f);
	if (fread(b, 1, arg.size, f) != arg.size || memcmp(b, e, arg.size) != 0)
		fail("a w+ stream reads back wrong bytes");
	fclose(f);

	/* append: the stream continues the checkpoint at its real path (after
	 * the w+ version's flush: an append racing it is the subject of the
	 * handover mode) */
	sleep_ms(100);
	f = xfopen(arg.path, "ab");
	if (fwrite("APPENDED", 1, 8, f) != 8 || fclose(f) != 0)
		fail("append: %s", strerror(errno));
	memcpy(e + arg.size, "APPENDED", 8);
	len = arg.size + 8;
	f = xfopen(arg.path, "r");
	got = fread(b, 1, len + 10, f);
	if (got != len || memcmp(b, e, len) != 0)
		fail("after appending the file reads %zu bytes, expected %zu, or wrong bytes", got, len);
	fclose(f);
	/* freopen of another stream onto a tagged path writes the real file */
	char p2[PATH_MAX];
	snprintf(p2, sizeof(p2), "%s.freopen", arg.path);
	FILE *g = fopen("/dev/null", "w");
	if (!g || !(g = freopen(p2, "w", g)))
		fail("freopen onto %s: %s", p2, strerror(errno));
	if (fwrite(e, 1, arg.size, g) != arg.size || fclose(g) != 0)
		fail("writing through freopen: %s", strerror(errno));
	check_file(p2, arg.size, arg.seed, 0);
	printf("stdio: fwrite/fread/fseek/ftell/fgetc/ungetc/w+/a/freopen ok\n");
	free(b);
	free(e);
	return 0;
}

/* Compares n bytes read at offset off of the file with the stream. */
void expect_bytes(const unsigned char *b, const unsigned char *e, size_t off, size_t n,
			 const char *what)
{
	if (memcmp(b, e + off, n) != 0)
		fail("%s: wrong bytes at offset %zu", what, off);
}

/* stdio-large PATH SIZE SEED: large freads of a tagged file, mixed with
 * what moves a stream's position or its buffer: a small read first, ftell
 * and fseek, ungetc, a stream of a dup'ed descriptor whose position is
 * handed back to the descriptor (as numpy's fromfile does), a w+ stream
 * reading back, fread_unlocked, an unbuffered stream. */
int m_stdio_large(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	size_t n = arg.size, big = n / 4 * 3;
	unsigned char *e = pattern_buf(n, arg.seed), *b = xmalloc(n + 64);

	FILE *f = xfopen(arg.path, "wb");
	if (fwrite(e, 1, n, f) != n)
		fail("fwrite: %s", strerror(errno));
	xfclose(f);

	f = xfopen(arg.path, "rb");
	if (fread(b, 1, 10, f) != 10 || fread(b + 10, 1, big, f) != big)
		fail("fread of 10 then %zu bytes: %s", big, strerror(errno));
	expect_bytes(b, e, 0, 10 + big, "a small then a large fread");
	if (ftell(f) != (long)(10 + big))
		fail("ftell after the large fread: %ld, expected %zu", ftell(f), 10 + big);
	size_t rest = n - 10 - big, got = fread(b, 1, rest + 4096, f);
	if (got != rest || !feof(f) || ferror(f))
		fail("fread past the end: %zu bytes (expected %zu), eof %d", got, rest, feof(f));
	expect_bytes(b, e, 10 + big, rest, "fread to the end");
	if (fread(b, 1, big, f) != 0)
		fail("fread at the end returned bytes");
	if (fseek(f, 100, SEEK_SET) != 0)
		fail("fseek: %s", strerror(errno));
	int c = fgetc(f);
	if (c != e[100] || ungetc(c, f) != c)
		fail("fgetc/ungetc after fseek");
	if (fread(b, 1, big, f) != big)
		fail("fread after ungetc: %s", strerror(errno));
	expect_bytes(b, e, 100, big, "fread after ungetc");
	if (ftell(f) != (long)(100 + big))
		fail("ftell after ungetc + fread: %ld, expected %zu", ftell(f), 100 + big);
	if (fseek(f, -(long)big, SEEK_CUR) != 0 || fread_unlocked(b, 1, big, f) != big)
		fail("fseek(SEEK_CUR) + fread_unlocked: %s", strerror(errno));
	expect_bytes(b, e, 100, big, "fread_unlocked");
	xfclose(f);

	/* a stream of a dup'ed descriptor, its position handed back */
	int fd = open(arg.path, O_RDONLY);
	if (fd < 0 || lseek(fd, 77, SEEK_SET) != 77)
		fail("open/lseek: %s", strerror(errno));
	FILE *g = fdopen(dup(fd), "rb");
	if (!g || fseek(g, 77, SEEK_SET) != 0 || fread(b, 1, big, g) != big)
		fail("fdopen(dup) + fseek + fread: %s", strerror(errno));
	expect_bytes(b, e, 77, big, "fread of a dup'ed descriptor's stream");
	long pos = ftell(g);
	xfclose(g);
	if (pos != (long)(77 + big) || lseek(fd, pos, SEEK_SET) != pos || read(fd, b, 10) != 10)
		fail("handing the position (%ld) back to the descriptor", pos);
	expect_bytes(b, e, 77 + big, 10, "read after the stream's position");
	close(fd);

	/* w+: bytes still in the buffer, then read back past them */
	f = xfopen(arg.path, "w+");
	if (fwrite(e, 1, 1000, f) != 1000 || fwrite(e + 1000, 1, n - 1000, f) != n - 1000)
		fail("fwrite w+: %s", strerror(errno));
	if (fseek(f, 5, SEEK_SET) != 0 || fread(b, 1, n - 5, f) != n - 5)
		fail("fseek + fread on a w+ stream: %s", strerror(errno));
	expect_bytes(b, e, 5, n - 5, "a w+ stream");
	xfclose(f);

	/* unbuffered: a large read is still one read */
	f = xfopen(arg.path, "rb");
	setvbuf(f, NULL, _IONBF, 0);
	if (fread(b, 1, n, f) != n)
		fail("fread of an unbuffered stream: %s", strerror(errno));
	expect_bytes(b, e, 0, n, "an unbuffered stream");
	xfclose(f);
	printf("stdio-large: large freads ok\n");
	free(b);
	free(e);
	return 0;
}

/* stdio-large-writes PATH SIZE SEED: large fwrites of a tagged stream,
 * mixed with small ones, ftell, fseek back over written bytes, append
 * mode, fwrite_unlocked; the file must hold what was written, in order,
 * and the large writes reach the cache whole. */
/* "stdio-handed PATH SIZE SEED HOW": a checkpoint written through a "w"
 * (and then a "w+") stream whose descriptor the library hands over to the
 * real file in the middle (HOW: system, popen or fork: a child must see
 * the file; ls: ls -l of it, started with system), then written on with
 * fwrites of a whole stream buffer and more, of an odd size, and small
 * ones; every fwrite must take all its bytes, and the file, read back in
 * the process and at its real path, holds them. An earlier checkpoint
 * starts the cache first. */
int m_stdio_handed(int argc, char **argv)
{
	need_args(argc, 5, "PATH SIZE SEED HOW");
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED HOW");
	const char *how = argv[4];
	size_t n = arg.size, quarter = n / 4;
	unsigned char *e = pattern_buf(n, arg.seed), *b = xmalloc(n + 1);
	char pre[PATH_MAX], cmd[2 * PATH_MAX];

	snprintf(pre, sizeof(pre), "%s.pre", arg.path);
	gen_file(pre, 2u << 20, arg.seed + 1, 0);
	const char *modes[] = { "w", "w+" };
	for (int m = 0; m < 2; m++) {
		FILE *f = xfopen(arg.path, modes[m]);
		if (fwrite(e, 1, quarter, f) != quarter || fflush(f) != 0)
			fail("%s: the first fwrite: %s", modes[m], strerror(errno));
		if (!strcmp(how, "system")) {
			if (system("true") != 0)
				fail("system");
		} else if (!strcmp(how, "popen")) {
			FILE *pp = popen("echo hi", "r");
			char l[8];
			if (!pp || !fgets(l, sizeof(l), pp) || pclose(pp) != 0)
				fail("popen");
		} else if (!strcmp(how, "fork")) {
			pid_t pid = fork();
			if (pid < 0)
				fail("fork: %s", strerror(errno));
			if (pid == 0)
				_exit(0);
			int st = 0;
			if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
				fail("the child failed");
		} else {
			snprintf(cmd, sizeof(cmd), "ls -l '%s' >/dev/null", arg.path);
			if (system(cmd) != 0)
				fail("%s", cmd);
		}
		/* a whole buffer and more, an odd size, small ones, a large one */
		size_t at = quarter, parts[] = { n / 4, 3, 1000, n / 4 + 5 };
		for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
			errno = 0;
			size_t k = fwrite(e + at, 1, parts[i], f);
			if (k != parts[i])
				fail("%s after %s: fwrite of %zu bytes took %zu (ferror %d, %s)", modes[m], how, parts[i],
				     k, ferror(f), strerror(errno));
			at += parts[i];
		}
		if (fwrite(e + at, 1, n - at, f) != n - at)
			fail("%s after %s: the last fwrite: %s", modes[m], how, strerror(errno));
		if (m == 1) {
			if (fseek(f, 0, SEEK_SET) != 0 || fread(b, 1, n, f) != n)
				fail("w+ after %s: reading back: %s", how, strerror(errno));
			expect_bytes(b, e, 0, n, "a w+ stream read back after its hand-over");
		}
		xfclose(f);
		f = xfopen(arg.path, "rb");
		if (fread(b, 1, n + 1, f) != n)
			fail("%s after %s: the file holds the wrong number of bytes", modes[m], how);
		expect_bytes(b, e, 0, n, "the checkpoint read back");
		xfclose(f);
	}
	printf("stdio-handed: %s: every fwrite took its bytes\n", how);
	return 0;
}

/* "stdio-handed-efbig PATH SIZE SEED": the error path of a handed-over
 * stream: after a quarter is written and system() hands the checkpoint
 * over, its file may grow to SIZE + 100000 bytes (RLIMIT_FSIZE, SIGXFSZ
 * ignored), and an fwrite of SIZE bytes runs past the limit. Prints what fwrite
 * took, ferror, errno and the file's size, for a comparison with the same
 * run without the library. */
int m_stdio_handed_efbig(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	size_t n = arg.size, quarter = n / 4;
	unsigned char *e = pattern_buf(n, arg.seed);
	char pre[PATH_MAX];

	snprintf(pre, sizeof(pre), "%s.pre", arg.path);
	gen_file(pre, 2u << 20, arg.seed + 1, 0);
	FILE *f = xfopen(arg.path, "w");
	if (fwrite(e, 1, quarter, f) != quarter || fflush(f) != 0)
		fail("the first fwrite: %s", strerror(errno));
	if (system("true") != 0)
		fail("system");
	/* the limit once the stream is handed over */
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl;
	if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
		fail("getrlimit: %s", strerror(errno));
	rl.rlim_cur = n + 100000;
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		fail("setrlimit: %s", strerror(errno));
	errno = 0;
	size_t k = fwrite(e, 1, n, f);
	int fe = ferror(f), en = errno;
	fclose(f);
	struct stat st;
	if (stat(arg.path, &st) != 0)
		fail("stat: %s", strerror(errno));
	printf("fwrite took %zu of %zu, ferror %d, errno %s, file %lld bytes\n", k, n, fe ? 1 : 0,
	       en == EFBIG ? "EFBIG" : strerror(en), (long long)st.st_size);
	return 0;
}

int m_stdio_large_writes(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	size_t n = arg.size, big = n / 2;
	unsigned char *e = pattern_buf(n, arg.seed), *b = xmalloc(n + 64);

	FILE *f = xfopen(arg.path, "wb");
	if (fwrite(e, 1, 7, f) != 7 || fwrite(e + 7, 1, big, f) != big)
		fail("fwrite of 7 then %zu bytes: %s", big, strerror(errno));
	if (ftell(f) != (long)(7 + big))
		fail("ftell after the large fwrite: %ld, expected %zu", ftell(f), 7 + big);
	if (fwrite_unlocked(e + 7 + big, 1, 100, f) != 100)
		fail("fwrite_unlocked: %s", strerror(errno));
	size_t rest = n - 107 - big;
	if (fwrite(e + 107 + big, 1, rest, f) != rest)
		fail("fwrite of the rest: %s", strerror(errno));
	if (ftell(f) != (long)n)
		fail("ftell at the end: %ld, expected %zu", ftell(f), n);
	xfclose(f);
	f = xfopen(arg.path, "rb");
	if (fread(b, 1, n + 1, f) != n)
		fail("reading back: %s", strerror(errno));
	expect_bytes(b, e, 0, n, "small and large fwrites");
	xfclose(f);

	/* w+: a large fwrite over bytes written before, then read back */
	f = xfopen(arg.path, "w+");
	memset(b, 0x5a, n);
	if (fwrite(b, 1, n, f) != n || fseek(f, 3, SEEK_SET) != 0 || fwrite(e + 3, 1, n - 3, f) != n - 3 ||
	    fseek(f, 0, SEEK_SET) != 0 || fwrite(e, 1, 3, f) != 3 || fseek(f, 0, SEEK_SET) != 0)
		fail("fwrite over written bytes: %s", strerror(errno));
	if (fread(b, 1, n, f) != n)
		fail("fread of a w+ stream: %s", strerror(errno));
	expect_bytes(b, e, 0, n, "a large fwrite over written bytes");
	xfclose(f);

	/* append: large writes go to the end */
	f = xfopen(arg.path, "wb");
	if (fwrite(e, 1, big, f) != big)
		fail("fwrite before the append: %s", strerror(errno));
	xfclose(f);
	f = xfopen(arg.path, "ab");
	if (fwrite(e + big, 1, n - big, f) != n - big)
		fail("fwrite of an append stream: %s", strerror(errno));
	xfclose(f);
	printf("stdio-large-writes: large fwrites ok\n");
	free(b);
	free(e);
	return 0;
}

/* freopen of a stream that fopen returned for a tagged path: the stream
 * moves to the new file, and the checkpoint holds what was written before. */
int m_freopen(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed);
	char other[PATH_MAX];

	snprintf(other, sizeof(other), "%s.other", arg.path);
	FILE *f = fopen(arg.path, "w");
	if (!f || fwrite(e, 1, arg.size, f) != arg.size)
		fail("fopen/fwrite %s: %s", arg.path, strerror(errno));
	f = freopen(other, "w", f);
	if (!f)
		fail("freopen of a tagged stream onto %s: %s", other, strerror(errno));
	if (fputs("other\n", f) == EOF || fclose(f) != 0)
		fail("writing the reopened stream: %s", strerror(errno));
	check_file(arg.path, arg.size, arg.seed, 0);
	f = fopen(other, "r");
	char line[16] = "";
	if (!f || !fgets(line, sizeof(line), f) || strcmp(line, "other\n") != 0)
		fail("the reopened stream did not write %s", other);
	fclose(f);
	printf("freopen: a tagged stream reopened elsewhere\n");
	free(e);
	return 0;
}

/* noclose PATH SIZE SEED fd|stream: writes a checkpoint and exits without
 * closing it (a stream's last bytes still in its buffer): the bytes written
 * so far are the checkpoint, at its real path after exit. */
int m_noclose(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED fd|stream");
	unsigned char *e = pattern_buf(arg.size, arg.seed);
	if (strcmp(argv[4], "stream") == 0) {
		FILE *f = fopen(arg.path, "w");
		if (!f || fwrite(e, 1, arg.size, f) != arg.size)
			fail("fopen/fwrite %s: %s", arg.path, strerror(errno));
		/* no fclose, no fflush: exit(3) flushes */
	} else {
		int fd = xopen(arg.path, O_WRONLY | O_CREAT | O_TRUNC);
		write_all(fd, e, arg.size, arg.path);
		/* no close */
	}
	exit(0);
}

/* renames DIR N SIZE [verify]: N checkpoints written under a temporary
 * name and renamed at once (while their flush may be running), half of
 * them renamed a second time; then each is read under its final name. */

/* stdio-threads TAGGED UNTAGGED [locks-any]: the program opens a tagged stream (the
 * library's threads start) and an untagged one, then starts threads of its
 * own that putc their own letter into both streams at once. glibc's putc
 * and getc skip the stream's lock while the process has one thread; with
 * the program's threads running, every byte must arrive: each letter
 * exactly as often as it was written. */
#define STDIO_THREADS 4
#define STDIO_PUTS 1000000L

struct stdio_threads_arg {
	FILE *f[2];
	int id;
	pthread_barrier_t *go;
};

static void *stdio_threads_main(void *p)
{
	struct stdio_threads_arg *a = p;
	pthread_barrier_wait(a->go);
	for (long i = 0; i < STDIO_PUTS; i++)
		for (int k = 0; k < 2; k++)
			putc('a' + a->id, a->f[k]);
	return NULL;
}

static void stdio_threads_check(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		fail("reopen %s: %s", path, strerror(errno));
	long count[256] = { 0 }, total = 0;
	int c;
	while ((c = getc(f)) != EOF) {
		count[c]++;
		total++;
	}
	fclose(f);
	for (int id = 0; id < STDIO_THREADS; id++)
		if (count['a' + id] != STDIO_PUTS)
			fail("%s: %ld bytes '%c' of %ld written by one thread, %ld bytes in all (bytes that threads "
			     "put at once were lost)", path, count['a' + id], 'a' + id, STDIO_PUTS, total);
	if (total != STDIO_THREADS * STDIO_PUTS)
		fail("%s: %ld bytes, expected %ld", path, total, STDIO_THREADS * STDIO_PUTS);
}

int m_stdio_threads(int argc, char **argv)
{
	if (argc < 3)
		need_args(argc, 3, "TAGGED UNTAGGED [locks-any]");
	FILE *f[2] = { fopen(argv[1], "w"), NULL };
	if (!f[0] || fputs("", f[0]) == EOF)
		fail("fopen %s: %s", argv[1], strerror(errno));
	f[1] = fopen(argv[2], "w");
	if (!f[1])
		fail("fopen %s: %s", argv[2], strerror(errno));
	/* the library's threads run (the tagged open started them), the
	 * program's own do not yet: glibc's putc and getc skip the lock of a
	 * stream (its flag 0x80, libio.h) as in a process of one thread */
	bool locks_any = argc > 3 && !strcmp(argv[3], "locks-any");
	for (int k = 0; k < 2 && !locks_any; k++)
		if (f[k]->_flags2 & 0x80)
			fail("%s: the stream's lock is on before the program has a thread of its own "
			     "(putc and getc pay for it)", argv[1 + k]);
	pthread_t t[STDIO_THREADS];
	struct stdio_threads_arg a[STDIO_THREADS];
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, STDIO_THREADS);
	for (int i = 0; i < STDIO_THREADS; i++) {
		a[i] = (struct stdio_threads_arg){ { f[0], f[1] }, i, &go };
		int rc = pthread_create(&t[i], NULL, stdio_threads_main, &a[i]);
		if (rc)
			fail("pthread_create: %s", strerror(rc));
	}
	for (int i = 0; i < STDIO_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	if (fclose(f[0]) != 0 || fclose(f[1]) != 0)
		fail("fclose: %s", strerror(errno));
	stdio_threads_check(argv[1]);
	stdio_threads_check(argv[2]);
	printf("stdio-threads: %d threads x %ld putc into shared streams, every byte there\n", STDIO_THREADS,
	       STDIO_PUTS);
	return 0;
}

/* stdio-threads-check PATH: the lines of stdio-threads, read back. */
int m_stdio_threads_check(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	stdio_threads_check(argv[1]);
	return 0;
}

/* stdio-seek-cur TAGGED UNTAGGED: the same writes, seeks and reads on a
 * tagged and an untagged stream, fseek(SEEK_CUR) after a write among them:
 * positions, bytes read and the files (also at the real path, compared by
 * the case) must agree. */
static void seek_cur_run(const char *path, long *pos, int *got)
{
	static char b[100000];
	memset(b, 'a', sizeof(b));
	FILE *f = fopen(path, "w+");
	if (!f)
		fail("fopen %s: %s", path, strerror(errno));
	int k = 0;
	fwrite(b, 1, sizeof(b), f);
	fseek(f, 1000, SEEK_SET);
	fputc('Q', f);
	pos[k++] = ftell(f);
	fseek(f, 0, SEEK_CUR);
	pos[k++] = ftell(f);
	got[0] = getc(f);
	fseeko(f, 0, SEEK_CUR);
	fputc('R', f);
	fputs("xyz", f);
	fseeko64(f, -2, SEEK_CUR);
	pos[k++] = ftell(f);
	got[1] = getc(f);
	fseek(f, 5, SEEK_CUR);
	fputc('S', f);
	pos[k++] = ftell(f);
	if (fclose(f) != 0)
		fail("fclose %s: %s", path, strerror(errno));
}

int m_stdio_seek_cur(int argc, char **argv)
{
	need_args(argc, 3, "TAGGED UNTAGGED");
	long pt[4], pu[4];
	int gt[2], gu[2];
	seek_cur_run(argv[1], pt, gt);
	seek_cur_run(argv[2], pu, gu);
	for (int i = 0; i < 4; i++)
		if (pt[i] != pu[i])
			fail("position %d: %ld on the tagged stream, %ld on the untagged one", i, pt[i], pu[i]);
	for (int i = 0; i < 2; i++)
		if (gt[i] != gu[i])
			fail("read %d: %d on the tagged stream, %d on the untagged one", i, gt[i], gu[i]);
	printf("stdio-seek-cur: positions and bytes agree\n");
	return 0;
}

/* stdio-records PATH [threads|bycaller]: small freads of a file in every
 * size from 1 to 40 bytes, locked and unlocked, among getc, ungetc, seeks
 * and short writes, each read checked against the file read with pread;
 * prints a digest of what each call returned and where the stream stood,
 * which must be the same with and without the library. "threads" starts
 * a thread first (glibc then locks every stream), "bycaller" sets
 * FSETLOCKING_BYCALLER. */
static void *records_thread(void *arg)
{
	return arg;
}

int m_stdio_records(int argc, char **argv)
{
	if (argc < 2)
		need_args(argc, 2, "PATH [threads|bycaller]");
	const char *mode = argc > 2 ? argv[2] : "";
	if (!strcmp(mode, "threads")) {
		pthread_t t;
		if (pthread_create(&t, NULL, records_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
			fail("pthread_create");
	}
	FILE *f = xfopen(argv[1], "r+");
	if (!strcmp(mode, "bycaller"))
		__fsetlocking(f, FSETLOCKING_BYCALLER);
	int fd = xopen(argv[1], O_RDONLY);
	uint64_t digest = 1469598103934665603ULL, x = 42;
	unsigned char b[128], want[128];
	long reads = 0, bytes = 0;
	for (int op = 0; op < 200000; op++) {
		x = mix64(x + (uint64_t)op);
		long at = ftell(f);
		bool pushed = f->_flags & 0x100; /* ungetc bytes stand in front */
		size_t size = 1 + x % 40, n = 1 + (x >> 8) % 3;
		if (size * n > sizeof(b))
			n = 1;
		size_t got = 0;
		switch ((x >> 16) % 16) {
		case 0: {
			int c = getc(f);
			digest = mix64(digest ^ (uint64_t)(c + 2));
			if (c != EOF && (x >> 24) % 2)
				ungetc((x >> 24) % 3 ? c : (c ^ 0x5a), f);
			continue;
		}
		case 1:
			if (fseek(f, -(long)((x >> 24) % 100), SEEK_CUR) != 0)
				rewind(f);
			continue;
		case 2:
			fseek(f, (long)((x >> 24) % 300000), SEEK_SET);
			continue;
		case 3:
			if ((x >> 24) % 8 == 0) {
				/* a short write, then a seek before the next read */
				pattern(b, (uint64_t)op, 5, 7);
				if (fwrite(b, 1, 5, f) != 5)
					fail("fwrite: %s", strerror(errno));
				fseek(f, 0, SEEK_CUR);
				fflush(f);
				continue;
			}
			/* fall through */
		case 4: case 5: case 6: case 7: case 8: case 9: case 10:
			got = fread(b, size, n, f);
			break;
		case 11:
			flockfile(f);
			got = fread(b, size, n, f);
			funlockfile(f);
			break;
		default:
			got = fread_unlocked(b, size, n, f);
			break;
		}
		reads++;
		bytes += (long)(got * size);
		digest = mix64(digest ^ got ^ ((uint64_t)at << 8) ^ ((uint64_t)feof(f) << 62));
		if (at >= 0 && got && !pushed) {
			/* the file says what came */
			ssize_t r = pread(fd, want, got * size, at);
			if (r != (ssize_t)(got * size))
				fail("pread at %ld: %zd", at, r);
			if (memcmp(b, want, got * size) != 0)
				fail("op %d: fread(%zu, %zu) at %ld returned bytes the file does not hold there", op,
				     size, n, at);
		}
		for (size_t i = 0; i < got * size; i++)
			digest = (digest ^ b[i]) * 1099511628211ULL;
		if (feof(f) && (x >> 28) % 2)
			clearerr(f);
	}
	xclose(fd, argv[1]);
	xfclose(f);
	printf("stdio-records %s: %ld reads, %ld bytes, digest %016" PRIx64 "\n", mode, reads, bytes, digest);
	return 0;
}

/* stdio-exit PATH MODE BUFFERING SIZES: fopen(PATH, MODE), the stream's
 * buffering set (default, none, line, own:N: a buffer of N bytes of the
 * program's), fwrites of the comma-separated SIZES of a pattern, then
 * _exit without an fflush: the file holds what the C library wrote by then,
 * which the case compares with a run without the library. */
int m_stdio_exit(int argc, char **argv)
{
	need_args(argc, 5, "PATH MODE BUFFERING SIZES");
	const char *path = argv[1], *mode = argv[2], *how = argv[3];
	size_t sizes[64], nsizes = 0, total = 0;
	for (const char *s = argv[4]; *s && nsizes < 64;) {
		char *end;
		sizes[nsizes] = strtoull(s, &end, 10);
		if (end == s || (*end && *end != ','))
			fail("bad SIZES '%s'", argv[4]);
		total += sizes[nsizes++];
		s = *end ? end + 1 : end;
	}
	unsigned char *e = pattern_buf(total + 1, 17);
	for (size_t i = 0; i < total; i += 61)
		e[i] = '\n'; /* lines, for a line-buffered stream */
	FILE *f = fopen(path, mode);
	if (!f)
		fail("fopen %s %s: %s", path, mode, strerror(errno));
	int rc = 0;
	if (!strcmp(how, "none"))
		rc = setvbuf(f, NULL, _IONBF, 0);
	else if (!strcmp(how, "line"))
		rc = setvbuf(f, NULL, _IOLBF, BUFSIZ);
	else if (!strncmp(how, "own:", 4)) {
		size_t n = strtoull(how + 4, NULL, 10);
		rc = setvbuf(f, xmalloc(n), _IOFBF, n);
	} else if (strcmp(how, "default"))
		fail("bad BUFFERING '%s'", how);
	if (rc)
		fail("setvbuf %s: %s", how, strerror(errno));
	size_t off = 0;
	for (size_t i = 0; i < nsizes; i++) {
		if (fwrite(e + off, 1, sizes[i], f) != sizes[i])
			fail("fwrite of %zu bytes at %zu: %s", sizes[i], off, strerror(errno));
		off += sizes[i];
	}
	_exit(0);
}
