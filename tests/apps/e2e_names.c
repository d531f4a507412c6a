/* e2e_helper: Names and metadata: renames, hand-overs, unlink races, stat of cached files, attributes, copy calls, miscellaneous path calls, plain operations. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

static void renames_final(char p[PATH_MAX], const char *dir, long i)
{
	if (i % 2)
		snprintf(p, PATH_MAX, "%s/r_%03ld.final", dir, i);
	else
		nth_path(p, dir, "r", i);
}

int m_renames(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE [verify]");
	char tmp[PATH_MAX], fin[PATH_MAX], mid[PATH_MAX];
	if (!verify_only(argc, argv, 4))
		for (long i = 0; i < arg.n; i++) {
			tmp_and_path(tmp, mid, arg.path, "r", i);
			gen_file(tmp, arg.size, 500 + (uint64_t)i, 0);
			if (rename(tmp, mid) != 0)
				fail("rename %s: %s", tmp, strerror(errno));
			renames_final(fin, arg.path, i);
			if (i % 2 && rename(mid, fin) != 0)
				fail("rename %s: %s", mid, strerror(errno));
		}
	for (long i = 0; i < arg.n; i++) {
		renames_final(fin, arg.path, i);
		check_file(fin, arg.size, 500 + (uint64_t)i, 0);
		tmp_and_path(tmp, mid, arg.path, "r", i);
		if (access(tmp, F_OK) == 0)
			fail("%s still exists after its rename", tmp);
		if (i % 2 && access(mid, F_OK) == 0)
			fail("%s still exists after its second rename", mid);
	}
	printf("renames: %ld checkpoints renamed and verified\n", arg.n);
	return 0;
}

/* pingpong DIR SIZE N [verify]: one checkpoint renamed back and forth
 * between two names N times right after it was written, while its flush
 * runs; it must end under the last name only. */
int m_pingpong(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE N [verify]");
	char a[PATH_MAX], b[PATH_MAX];
	snprintf(a, sizeof(a), "%s/ping.bin", arg.path);
	snprintf(b, sizeof(b), "%s/pong.bin", arg.path);
	const char *last = arg.n % 2 ? b : a, *other = arg.n % 2 ? a : b;
	if (!verify_only(argc, argv, 4)) {
		gen_file(a, arg.size, 77, 0);
		for (long i = 0; i < arg.n; i++)
			if (rename(i % 2 ? b : a, i % 2 ? a : b) != 0)
				fail("rename %ld: %s", i, strerror(errno));
	}
	check_file(last, arg.size, 77, 0);
	if (access(other, F_OK) == 0)
		fail("%s exists after the checkpoint was renamed to %s", other, last);
	printf("pingpong: %ld renames\n", arg.n);
	return 0;
}

/* handover PATH SIZE N append|truncate: N times, writes a checkpoint and
 * at once updates it in place (O_APPEND, or truncate(2)), which makes the
 * real file the checkpoint while its background flush may still be
 * running; 30 ms later the real file must hold the update. */
int m_handover(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE N append|truncate");
	bool app = strcmp(argv[4], "append") == 0;
	unsigned char *e = xmalloc(arg.size + 32);
	for (long i = 0; i < arg.n; i++) {
		gen_file(arg.path, arg.size, 900 + (uint64_t)i, 0);
		pattern(e, 0, arg.size, 900 + (uint64_t)i);
		size_t len = arg.size / 2;
		if (app) {
			int fd = open(arg.path, O_WRONLY | O_APPEND);
			if (fd < 0 || write(fd, "APPENDED", 8) != 8 || close(fd) != 0)
				fail("append to %s: %s", arg.path, strerror(errno));
			memcpy(e + arg.size, "APPENDED", 8);
			len = arg.size + 8;
		} else if (truncate(arg.path, (off_t)len) != 0) {
			fail("truncate %s: %s", arg.path, strerror(errno));
		}
		sleep_ms(30);
		char when[64];
		snprintf(when, sizeof(when), "round %ld, 30 ms after the %s", i, argv[4]);
		raw_check(arg.path, e, len, when);
	}
	printf("handover: %ld rounds of %s\n", arg.n, argv[4]);
	free(e);
	return 0;
}

/* unlinkrace DIR N: N times, writes DIR/u_NNN.bin.tmp, renames it to
 * DIR/u_NNN.bin and unlinks that at once, while its flush may be running;
 * afterwards none of them may exist at its real path. */
int m_unlinkrace(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N");
	char tmp[PATH_MAX], fin[PATH_MAX];
	for (long i = 0; i < arg.n; i++) {
		tmp_and_path(tmp, fin, arg.path, "u", i);
		gen_file(tmp, 16384, 700 + (uint64_t)i, 0);
		if (rename(tmp, fin) != 0)
			fail("rename %s: %s", tmp, strerror(errno));
		if (unlink(fin) != 0)
			fail("unlink %s: %s", fin, strerror(errno));
	}
	sleep_ms(200);
	for (long i = 0; i < arg.n; i++) {
		tmp_and_path(tmp, fin, arg.path, "u", i);
		if (raw_exists(fin))
			fail("%s is at its real path after it was unlinked", fin);
		if (raw_exists(tmp))
			fail("%s is at its real path after it was renamed and unlinked", tmp);
	}
	printf("unlinkrace: %ld checkpoints renamed and unlinked\n", arg.n);
	return 0;
}

/* ---- modes: names -------------------------------------------------------- */

/* stat of a cached file before it reaches disk (CKPTCACHE_PERSIST=never) */
int m_statcached(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	struct stat st;

	gen_file(arg.path, arg.size, arg.seed, 0);
	if (raw_exists(arg.path))
		fail("%s is at its real path although CKPTCACHE_PERSIST=never", arg.path);
	if (stat(arg.path, &st) != 0)
		fail("stat %s: %s", arg.path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size != arg.size)
		fail("stat %s: mode %o size %lld, expected a regular file of %zu bytes", arg.path,
		     (unsigned)st.st_mode, (long long)st.st_size, arg.size);
	mode_t um = umask(0);
	umask(um);
	if ((st.st_mode & 07777) != (0644 & ~um))
		fail("stat %s: permissions %o, expected %o", arg.path, (unsigned)(st.st_mode & 07777),
		     (unsigned)(0644 & ~um));
	if (lstat(arg.path, &st) != 0 || (size_t)st.st_size != arg.size)
		fail("lstat %s: wrong size", arg.path);
	if (fstatat(AT_FDCWD, arg.path, &st, 0) != 0 || (size_t)st.st_size != arg.size)
		fail("fstatat %s: wrong size", arg.path);
	struct statx sx;
	if (statx(AT_FDCWD, arg.path, 0, STATX_SIZE, &sx) != 0 || sx.stx_size != arg.size)
		fail("statx %s: wrong size", arg.path);
	if (access(arg.path, R_OK | W_OK) != 0)
		fail("access %s: %s", arg.path, strerror(errno));
	int fd = open(arg.path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size != arg.size)
		fail("fstat of an open %s: wrong size", arg.path);
	close(fd);
	check_file(arg.path, arg.size, arg.seed, 0);
	if (raw_exists(arg.path))
		fail("%s reached its real path although CKPTCACHE_PERSIST=never", arg.path);
	printf("statcached: stat/lstat/fstatat/statx/fstat report %zu bytes\n", arg.size);
	return 0;
}

static void expect_enoent(const char *path, const char *when)
{
	struct stat st;
	if (stat(path, &st) == 0 || errno != ENOENT)
		fail("%s: stat %s does not fail with ENOENT", when, path);
	int fd = open(path, O_RDONLY);
	if (fd >= 0 || errno != ENOENT)
		fail("%s: open %s does not fail with ENOENT", when, path);
	if (access(path, F_OK) == 0)
		fail("%s: access %s succeeds", when, path);
}

int m_rename(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE SEED");
	char tmp[PATH_MAX], fin[PATH_MAX], a[PATH_MAX], bb[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s/final.bin.tmp", arg.path);
	snprintf(fin, sizeof(fin), "%s/final.bin", arg.path);
	gen_file(tmp, arg.size, arg.seed, 0);
	if (rename(tmp, fin) != 0)
		fail("rename %s -> %s: %s", tmp, fin, strerror(errno));
	expect_enoent(tmp, "after rename");
	check_file(fin, arg.size, arg.seed, 0);

	/* a rename over an existing checkpoint replaces it */
	snprintf(a, sizeof(a), "%s/a.bin", arg.path);
	snprintf(bb, sizeof(bb), "%s/b.bin", arg.path);
	gen_file(a, arg.size, arg.seed + 1, 0);
	gen_file(bb, arg.size / 2, arg.seed + 2, 0);
	if (rename(a, bb) != 0)
		fail("rename %s -> %s: %s", a, bb, strerror(errno));
	expect_enoent(a, "after rename over another checkpoint");
	check_file(bb, arg.size, arg.seed + 1, 0);
	printf("rename: ok\n");
	return 0;
}

int m_unlink(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR SIZE SEED");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/u.bin", arg.path);
	gen_file(path, arg.size, arg.seed, 0);
	if (unlink(path) != 0)
		fail("unlink %s: %s", path, strerror(errno));
	expect_enoent(path, "after unlink");
	if (unlink(path) != -1 || errno != ENOENT)
		fail("a second unlink of %s did not fail with ENOENT", path);
	if (raw_exists(path))
		fail("%s is at its real path after unlink", path);
	sleep_ms(200);
	if (raw_exists(path))
		fail("%s appeared at its real path after unlink", path);
	/* a new version after the unlink is a normal checkpoint */
	gen_file(path, arg.size, arg.seed + 1, 0);
	check_file(path, arg.size, arg.seed + 1, 0);
	if (remove(path) != 0)
		fail("remove %s: %s", path, strerror(errno));
	expect_enoent(path, "after remove");
	printf("unlink: ok\n");
	return 0;
}

/* ---- modes: the descriptor table ------------------------------------------ */

/* A tagged descriptor closed behind the library's back (close_range,
 * closefrom, a raw close): the number is free again in the kernel, and the
 * untagged file that gets it next must read its own bytes. */
int m_closeby(int argc, char **argv)
{
	need_args(argc, 4, "close_range|closefrom|syscall|asm TAGGED UNTAGGED");
	const char *how = argv[1], *tagged = argv[2], *untagged = argv[3];
	static const char mine[] = "the untagged file's own bytes";
	char b[128];

	int u = open(untagged, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (u < 0 || write(u, mine, sizeof(mine) - 1) != (ssize_t)sizeof(mine) - 1 || close(u) != 0)
		fail("writing %s: %s", untagged, strerror(errno));
	int fd = gen_open(tagged, 4096, 3);
	int rc;
	if (strcmp(how, "close_range") == 0)
		rc = close_range((unsigned)fd, (unsigned)fd, 0);
	else if (strcmp(how, "closefrom") == 0)
		closefrom(fd), rc = 0;
	else if (strcmp(how, "asm") == 0) {
#if defined(__x86_64__)
		long r;
		__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_close), "D"((long)fd) : "rcx", "r11", "memory");
		rc = r < 0 ? (errno = (int)-r, -1) : 0;
		how = "close(2) in inline assembly";
#else
		note("a close(2) in inline assembly is written for x86-64 only");
#endif
	} else
		rc = (int)syscall(SYS_close, fd), how = "syscall(SYS_close)";
	if (rc != 0)
		fail("%s of fd %d: %s", how, fd, strerror(errno));
	u = xopen(untagged, O_RDONLY);
	memset(b, 0, sizeof(b));
	ssize_t r = read(u, b, sizeof(b) - 1);
	unsigned char e[16];
	pattern(e, 0, sizeof(e), 3);
	if (r < 0)
		fail("after %s closed tagged fd %d, read of untagged %s (fd %d) failed: %s", how, fd,
		     untagged, u, strerror(errno));
	if (r >= 16 && memcmp(b, e, 16) == 0)
		fail("after %s closed tagged fd %d, the untagged file %s opened as fd %d reads the "
		     "checkpoint's bytes", how, fd, untagged, u);
	if (r != (ssize_t)sizeof(mine) - 1 || memcmp(b, mine, sizeof(mine) - 1) != 0)
		fail("after %s closed tagged fd %d, the untagged file %s (fd %d) reads %zd wrong bytes", how,
		     fd, untagged, u, r);
	struct stat st;
	if (fstat(u, &st) != 0 || st.st_size != (off_t)sizeof(mine) - 1)
		fail("after %s closed tagged fd %d, fstat of the untagged fd %d reports the checkpoint", how,
		     fd, u);
	close(u);
	check_file(tagged, 4096, 3, 0);
	printf("closeby %s: the reused descriptor reads the untagged file\n", how);
	return 0;
}

/* daemonout TAGGED MARKER: standard output goes to a checkpoint, then a
 * child becomes a daemon (glibc's daemon() forks again and puts /dev/null
 * on 0, 1 and 2 by its own calls, which the library does not see): the
 * daemon's writes to its standard output must reach /dev/null, and the
 * checkpoint must hold only what the program wrote to it. The daemon
 * tells how its write went in MARKER (untagged). */
int m_daemonout(int argc, char **argv)
{
	need_args(argc, 3, "TAGGED MARKER");
	static const char mine[] = "the program's own line\n";
	char tmp[PATH_MAX], b[256];
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]);
	fflush(stdout);
	int saved = dup(1), fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	/* close-on-exec: a fork leaves it to the child as it is */
	if (saved < 0 || fd < 0 || dup3(fd, 1, O_CLOEXEC) != 1)
		fail("standard output onto %s: %s", argv[1], strerror(errno));
	close(fd);
	if (write(1, mine, sizeof(mine) - 1) != (ssize_t)sizeof(mine) - 1)
		fail("write to the tagged standard output: %s", strerror(errno));
	pid_t p = fork();
	if (p < 0)
		fail("fork: %s", strerror(errno));
	if (p == 0) {
		if (daemon(1, 0) != 0)
			_exit(3);
		ssize_t w = write(1, "the daemon's line\n", 18);
		int n = snprintf(b, sizeof(b), "%zd %s\n", w, w < 0 ? strerror(errno) : "ok");
		int m = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (m >= 0 && write(m, b, (size_t)n) == n && close(m) == 0)
			rename(tmp, argv[2]);
		_exit(0);
	}
	int st;
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("the child that calls daemon() ended with status %#x", st);
	int m = -1;
	for (int i = 0; i < 1000 && (m = open(argv[2], O_RDONLY)) < 0; i++)
		sleep_ms(10);
	if (m < 0)
		fail("the daemon left no word in %s within 10 s", argv[2]);
	ssize_t r = read(m, b, sizeof(b) - 1);
	close(m);
	b[r > 0 ? r : 0] = 0;
	if (strcmp(b, "18 ok\n") != 0)
		fail("the daemon's write to its standard output (/dev/null) returned %s", b);
	if (dup2(saved, 1) != 1)
		fail("dup2 back: %s", strerror(errno));
	close(saved);
	fd = xopen(argv[1], O_RDONLY);
	r = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (r != (ssize_t)sizeof(mine) - 1 || memcmp(b, mine, sizeof(mine) - 1) != 0)
		fail("%s holds %zd bytes, not the program's one line", argv[1], r);
	printf("daemonout: the daemon wrote to /dev/null, the checkpoint holds the program's line\n");
	return 0;
}

/* unseenclose DIR: a checkpoint's descriptor copied (dup2) onto the number
 * of a stream, a folder stream and standard input, which the C library
 * then closes by its own calls (fclose, closedir, freopen); a pipe made
 * next takes the number, and must carry its own bytes, not the
 * checkpoint's. The checkpoint itself stays whole. */
static void unseen_pipe_check(const char *how)
{
	int p[2];
	if (pipe(p) != 0)
		fail("pipe: %s", strerror(errno));
	struct stat st;
	if (fstat(p[0], &st) != 0 || !S_ISFIFO(st.st_mode))
		fail("after %s, fstat of the new pipe (fd %d) reports no pipe", how, p[0]);
	if (write(p[1], "pipe", 4) != 4)
		fail("after %s, write to the new pipe (fd %d): %s", how, p[1], strerror(errno));
	char b[8] = { 0 };
	if (read(p[0], b, sizeof(b)) != 4 || memcmp(b, "pipe", 4) != 0)
		fail("after %s, the new pipe (fd %d) reads '%.4s', not its own bytes", how, p[0], b);
	close(p[0]);
	close(p[1]);
}

int m_unseenclose(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	char ck[PATH_MAX], plain[PATH_MAX];
	snprintf(ck, sizeof(ck), "%s/u.bin", argv[1]);
	snprintf(plain, sizeof(plain), "%s.plain", argv[1]);
	gen_file(ck, 1 << 20, 21, 0);
	FILE *pf = xfopen(plain, "w");
	fputs("plain\n", pf);
	xfclose(pf);
	int c = xopen(ck, O_RDONLY);

	FILE *f = xfopen(plain, "r");
	if (dup2(c, fileno(f)) != fileno(f))
		fail("dup2 onto a stream's number: %s", strerror(errno));
	fclose(f);
	unseen_pipe_check("fclose of a stream whose number held a checkpoint's copy");

	DIR *d = opendir(argv[1]);
	if (!d || dup2(c, dirfd(d)) != dirfd(d))
		fail("dup2 onto a folder stream's number: %s", strerror(errno));
	closedir(d);
	unseen_pipe_check("closedir of a folder stream whose number held a checkpoint's copy");

	int saved = dup(0);
	if (saved < 0 || dup2(c, 0) != 0)
		fail("dup2 onto standard input: %s", strerror(errno));
	if (!freopen(plain, "r", stdin))
		fail("freopen of standard input: %s", strerror(errno));
	char b[16] = { 0 };
	if (read(0, b, sizeof(b) - 1) != 6 || strcmp(b, "plain\n") != 0)
		fail("after freopen of standard input, read(0) returns '%s', not the new file", b);
	fclose(stdin);
	unseen_pipe_check("fclose(stdin) after freopen");
	check_file(ck, 1 << 20, 21, 0);
	close(c);
	if (saved != 0)
		dup2(saved, 0);
	/* the wrappers' failures are the kernel's, errno and all */
	errno = 0;
	if (syscall(SYS_close, 1000000) != -1 || errno != EBADF)
		fail("syscall(SYS_close) of a number not open: errno %d, not EBADF", errno);
	errno = 0;
	if (close_range(10, 5, 0) != -1 || errno != EINVAL)
		fail("close_range(10, 5): errno %d, not EINVAL", errno);
	errno = 0;
	if (socket(-1, SOCK_STREAM, 0) != -1 || errno != EAFNOSUPPORT)
		fail("socket of no family: errno %d, not EAFNOSUPPORT", errno);
	int p2[2];
	errno = 0;
	if (pipe2(p2, -1) != -1 || errno != EINVAL)
		fail("pipe2 with bad flags: errno %d, not EINVAL", errno);
	printf("unseenclose: numbers closed inside the C library serve their new files\n");
	return 0;
}

/* daemonkeeps DIR MARKER: four checkpoints closed and one open for
 * writing, then daemon(): the parent's end (the C library's _exit inside
 * daemon) must leave the closed ones at their real paths, and the daemon
 * writes the second half of the open one through the descriptor it
 * inherited, closes it, and says so in MARKER (untagged). */
int m_daemonkeeps(int argc, char **argv)
{
	need_args(argc, 3, "DIR MARKER");
	char p[PATH_MAX], tmp[PATH_MAX];
	const size_t half = 4 << 20;
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/closed%d.bin", argv[1], i);
		gen_file(p, 16 << 20, 30 + i, 0);
	}
	snprintf(p, sizeof(p), "%s/open.bin", argv[1]);
	unsigned char *b = pattern_buf(2 * half, 40);
	int w = xopen(p, O_WRONLY | O_CREAT | O_TRUNC);
	write_all(w, b, half, p);
	fflush(stdout);
	if (daemon(1, 1) != 0)
		fail("daemon: %s", strerror(errno));
	/* the daemon */
	ssize_t r = write(w, b + half, half);
	int e = errno, rc = close(w);
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]);
	FILE *m = fopen(tmp, "w");
	if (m) {
		fprintf(m, "%zd %s %d\n", r, r < 0 ? strerror(e) : "ok", rc);
		fclose(m);
		rename(tmp, argv[2]);
	}
	return 0;
}

/* closeall DIR close_range|closefrom: four checkpoints open for writing,
 * 2 MiB each, then every number above 2 closed at once, as a program that
 * closes what it does not know before its work does: the checkpoints
 * must reach their real paths (the library's own files, where it keeps
 * their bytes, are not the program's to close). */
int m_closeall(int argc, char **argv)
{
	need_args(argc, 3, "DIR close_range|closefrom");
	char p[PATH_MAX];
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/all%d.bin", argv[1], i);
		unsigned char *b = pattern_buf(2 << 20, 50 + i);
		int fd = xopen(p, O_WRONLY | O_CREAT | O_TRUNC);
		write_all(fd, b, 2 << 20, p);
		free(b);
	}
	fflush(stdout);
	if (!strcmp(argv[2], "closefrom"))
		closefrom(3);
	else if (close_range(3, ~0u, 0) != 0)
		fail("close_range: %s", strerror(errno));
	return 0;
}

/* ---- modes: metadata of cached checkpoints -------------------------------- */

/* chmod/chown/utimensat by path and fchmod/fchown/futimens on the
 * descriptor of a checkpoint that is still only in the cache. Every
 * failure is collected, so one run names them all. */
int m_meta(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	char p[PATH_MAX], q[PATH_MAX], errs[2048] = "";
	const struct timespec ts[2] = { { 1500000000, 0 }, { 1500000000, 0 } };
	struct stat st;
	size_t n = 0;
#define META_ERR(...) (n += (size_t)snprintf(errs + n, n < sizeof(errs) ? sizeof(errs) - n : 0, __VA_ARGS__))

	snprintf(p, sizeof(p), "%s/meta.bin", argv[1]);
	snprintf(q, sizeof(q), "%s/meta2.bin", argv[1]);
	gen_file(p, 100000, 4, 0);
	if (chmod(p, 0600) != 0)
		META_ERR("chmod: %s; ", strerror(errno));
	if (utimensat(AT_FDCWD, p, ts, 0) != 0)
		META_ERR("utimensat: %s; ", strerror(errno));
	if (chown(p, geteuid(), getegid()) != 0)
		META_ERR("chown: %s; ", strerror(errno));
	if (stat(p, &st) != 0)
		META_ERR("stat: %s; ", strerror(errno));
	else if ((st.st_mode & 07777) != 0600 || st.st_mtim.tv_sec != ts[1].tv_sec)
		META_ERR("stat after chmod/utimensat: mode %o mtime %lld; ", (unsigned)(st.st_mode & 07777),
			 (long long)st.st_mtim.tv_sec);

	int fd = xopen(q, O_WRONLY | O_CREAT | O_TRUNC);
	unsigned char *e = pattern_buf(100000, 5);
	write_all(fd, e, 100000, q);
	free(e);
	if (fchmod(fd, 0640) != 0)
		META_ERR("fchmod: %s; ", strerror(errno));
	if (fchown(fd, geteuid(), getegid()) != 0)
		META_ERR("fchown: %s; ", strerror(errno));
	if (futimens(fd, ts) != 0)
		META_ERR("futimens: %s; ", strerror(errno));
	xclose(fd, q);
	if (stat(q, &st) != 0)
		META_ERR("stat: %s; ", strerror(errno));
	else if ((st.st_mode & 07777) != 0640 || st.st_mtim.tv_sec != ts[1].tv_sec)
		META_ERR("stat after fchmod/futimens: mode %o mtime %lld; ", (unsigned)(st.st_mode & 07777),
			 (long long)st.st_mtim.tv_sec);
	check_file(p, 100000, 4, 0);
	check_file(q, 100000, 5, 0);
	if (n)
		fail("on a checkpoint still in the cache: %s", errs);
	printf("meta: chmod, chown, utimensat, fchmod, fchown, futimens ok\n");
	return 0;
#undef META_ERR
}

/* ---- modes: the copy calls ------------------------------------------------- */

int m_copycalls(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR UNTAGGED_DIR SIZE SEED");
	const char *dir = argv[1], *udir = argv[2];
	char a[PATH_MAX], bpath[PATH_MAX], c[PATH_MAX], d[PATH_MAX], u[PATH_MAX], v[PATH_MAX];
	unsigned char *e = pattern_buf(arg.size, arg.seed), *b = xmalloc(arg.size + 1);
	ssize_t r;

	snprintf(a, sizeof(a), "%s/src.bin", dir);
	snprintf(bpath, sizeof(bpath), "%s/sendfile.bin", dir);
	snprintf(c, sizeof(c), "%s/cfr.bin", dir);
	snprintf(d, sizeof(d), "%s/cfr_in.bin", dir);
	snprintf(u, sizeof(u), "%s/plain_src.bin", udir);
	snprintf(v, sizeof(v), "%s/plain_out.bin", udir);
	gen_file(a, arg.size, arg.seed, 0);
	gen_file(u, arg.size, arg.seed + 1, 0);

	/* sendfile: tagged -> tagged, with the input's position */
	int in = open(a, O_RDONLY), out = open(bpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (in < 0 || out < 0)
		fail("open: %s", strerror(errno));
	for (size_t done = 0; done < arg.size; done += (size_t)r)
		if ((r = sendfile(out, in, NULL, arg.size - done)) <= 0)
			fail("sendfile tagged -> tagged: %s", r < 0 ? strerror(errno) : "0 bytes");
	close(out);
	/* sendfile with an offset: the input's position does not move */
	if (lseek(in, 0, SEEK_SET) != 0)
		fail("lseek: %s", strerror(errno));
	out = open(v, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	off_t off = 1000;
	for (size_t done = 0; done < arg.size - 1000; done += (size_t)r)
		if ((r = sendfile(out, in, &off, arg.size - 1000 - done)) <= 0)
			fail("sendfile tagged -> untagged: %s", r < 0 ? strerror(errno) : "0 bytes");
	if (off != (off_t)arg.size || lseek(in, 0, SEEK_CUR) != 0)
		fail("sendfile with an offset: offset %lld, position %lld", (long long)off,
		     (long long)lseek(in, 0, SEEK_CUR));
	close(out);
	check_file(bpath, arg.size, arg.seed, 0);
	int fv = open(v, O_RDONLY);
	if (fv < 0 || read_all(fv, b, arg.size, v) != arg.size - 1000 ||
	    memcmp(b, e + 1000, arg.size - 1000) != 0)
		fail("sendfile to an untagged file: wrong bytes");
	close(fv);

	/* copy_file_range: tagged -> tagged with offsets, untagged -> tagged */
	out = open(c, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	off_t ioff = 5, ooff = 0;
	for (size_t done = 0; done < arg.size - 5; done += (size_t)r)
		if ((r = copy_file_range(in, &ioff, out, &ooff, arg.size - 5 - done, 0)) <= 0)
			fail("copy_file_range tagged -> tagged: %s", r < 0 ? strerror(errno) : "0 bytes");
	close(out);
	close(in);
	int fc = open(c, O_RDONLY);
	if (fc < 0 || read_all(fc, b, arg.size, c) != arg.size - 5 || memcmp(b, e + 5, arg.size - 5) != 0)
		fail("copy_file_range between tagged files: wrong bytes");
	close(fc);
	in = open(u, O_RDONLY);
	out = open(d, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (size_t done = 0; done < arg.size; done += (size_t)r)
		if ((r = copy_file_range(in, NULL, out, NULL, arg.size - done, 0)) <= 0)
			fail("copy_file_range untagged -> tagged: %s", r < 0 ? strerror(errno) : "0 bytes");
	close(in);
	close(out);
	check_file(d, arg.size, arg.seed + 1, 0);

	/* splice: tagged -> pipe, in pieces the pipe can hold */
	int p[2];
	if (pipe(p) != 0)
		fail("pipe: %s", strerror(errno));
	in = open(a, O_RDONLY);
	size_t got = 0;
	while (got < arg.size) {
		size_t want = arg.size - got < 16384 ? arg.size - got : 16384;
		r = splice(in, NULL, p[1], NULL, want, 0);
		if (r <= 0)
			fail("splice tagged -> pipe: %s", r < 0 ? strerror(errno) : "0 bytes");
		if (read_all(p[0], b + got, (size_t)r, "pipe") != (size_t)r)
			fail("short read from the pipe");
		got += (size_t)r;
	}
	if (memcmp(b, e, arg.size) != 0)
		fail("splice from a tagged file: wrong bytes");
	close(in);
	close(p[0]);
	close(p[1]);
	printf("copycalls: sendfile, copy_file_range, splice ok\n");
	free(b);
	free(e);
	return 0;
}

/* ---- modes: assorted open flags and sizes --------------------------------- */

int m_misc(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	const char *dir = argv[1];
	char p[PATH_MAX];
	unsigned char *e = xmalloc(1u << 21), *b = xmalloc(1u << 21);
	struct stat st;
	int fd;

#define MPATH(name) snprintf(p, sizeof(p), "%s/%s", dir, name)
	/* a write past the end leaves a hole that reads as zeros */
	MPATH("hole.bin");
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	pattern(e, 0, 1000, 1);
	write_all(fd, e, 1000, p);
	memset(e + 1000, 0, 4000);
	pattern(e + 5000, 5000, 1000, 1);
	if (pwrite(fd, e + 5000, 1000, 5000) != 1000)
		fail("pwrite past the end: %s", strerror(errno));
	if (lseek(fd, 9000, SEEK_SET) != 9000)
		fail("lseek past the end");
	memset(e + 6000, 0, 3000);
	pattern(e + 9000, 9000, 100, 1);
	write_all(fd, e + 9000, 100, p);
	if (pread(fd, b, 20000, 0) != 9100 || memcmp(b, e, 9100) != 0)
		fail("a checkpoint with holes reads wrong bytes");
	if (pread(fd, b, 10, 9100) != 0 || pread(fd, b, 10, 1 << 20) != 0)
		fail("pread at or past the end does not return 0");
	close(fd);

	/* O_EXCL on an existing checkpoint */
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd >= 0 || errno != EEXIST)
		fail("O_CREAT|O_EXCL of a cached checkpoint: %s", fd >= 0 ? "opened" : strerror(errno));

	/* O_APPEND on an existing checkpoint continues it */
	fd = open(p, O_WRONLY | O_APPEND);
	if (fd < 0)
		fail("open O_APPEND: %s", strerror(errno));
	pattern(e + 9100, 9100, 900, 1);
	write_all(fd, e + 9100, 900, p);
	close(fd);
	fd = open(p, O_RDONLY);
	if (fd < 0 || read_all(fd, b, 20000, p) != 10000 || memcmp(b, e, 10000) != 0)
		fail("after an O_APPEND open the checkpoint reads wrong bytes");
	close(fd);

	/* O_RDWR without O_TRUNC updates in place */
	fd = open(p, O_RDWR);
	if (fd < 0 || pwrite(fd, "UPDATE", 6, 100) != 6)
		fail("in-place update: %s", strerror(errno));
	memcpy(e + 100, "UPDATE", 6);
	if (pread(fd, b, 20000, 0) != 10000 || memcmp(b, e, 10000) != 0)
		fail("an O_RDWR descriptor reads wrong bytes after its update");
	close(fd);

	/* truncate(2) by name of a cached checkpoint */
	MPATH("trunc.bin");
	gen_file(p, 100000, 2, 0);
	if (truncate(p, 3000) != 0)
		fail("truncate: %s", strerror(errno));
	if (stat(p, &st) != 0 || st.st_size != 3000)
		fail("stat after truncate: size %lld", (long long)st.st_size);
	check_file(p, 3000, 2, 0);

	/* an empty checkpoint */
	MPATH("empty.bin");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || close(fd) != 0)
		fail("empty checkpoint: %s", strerror(errno));
	if (stat(p, &st) != 0 || st.st_size != 0)
		fail("stat of an empty checkpoint");
	fd = open(p, O_RDONLY);
	if (fd < 0 || read(fd, b, 10) != 0)
		fail("reading an empty checkpoint");
	close(fd);

	/* O_WRONLY|O_CREAT without O_TRUNC of a new file starts a checkpoint */
	MPATH("creat.bin");
	fd = creat(p, 0644);
	if (fd < 0)
		fail("creat: %s", strerror(errno));
	pattern(e, 0, 100000, 6);
	write_all(fd, e, 100000, p);
	close(fd);
	check_file(p, 100000, 6, 0);

	/* space reservation and advice */
	MPATH("falloc.bin");
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open: %s", strerror(errno));
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL) != 0)
		fail("posix_fadvise on a tagged writer");
	int pe = posix_fallocate(fd, 0, 1 << 20);
	if (pe != 0)
		fail("posix_fallocate: %s", strerror(pe));
	if (fstat(fd, &st) != 0 || st.st_size != 1 << 20)
		fail("after posix_fallocate(1M): size %lld", (long long)st.st_size);
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 2 << 20) != 0)
		fail("fallocate(KEEP_SIZE): %s", strerror(errno));
	if (fstat(fd, &st) != 0 || st.st_size != 1 << 20)
		fail("fallocate(KEEP_SIZE) changed the size to %lld", (long long)st.st_size);
	pattern(e, 0, 1000, 8);
	write_all(fd, e, 1000, p);
	memset(e + 1000, 0, (1u << 20) - 1000);
	close(fd);
	fd = open(p, O_RDONLY);
	if (fd < 0 || read_all(fd, b, 1u << 21, p) != 1u << 20 || memcmp(b, e, 1u << 20) != 0)
		fail("a preallocated checkpoint reads wrong bytes");
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0 || readahead(fd, 0, 4096) != 0)
		fail("posix_fadvise/readahead on a tagged reader");
	close(fd);
	/* O_DIRECT with aligned buffers, as HPC codes write checkpoints */
	MPATH("direct.bin");
	unsigned char *al;
	if (posix_memalign((void **)&al, 4096, 1u << 20) != 0)
		fail("posix_memalign");
	pattern(al, 0, 1u << 20, 9);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0)
		fail("open O_DIRECT for writing: %s", strerror(errno));
	for (size_t k = 0; k < (1u << 20); k += 256 * 1024)
		if (write(fd, al + k, 256 * 1024) != 256 * 1024)
			fail("O_DIRECT write: %s", strerror(errno));
	close(fd);
	memset(al, 0, 1u << 20);
	fd = open(p, O_RDONLY | O_DIRECT);
	if (fd < 0 || read(fd, al, 1u << 20) != 1u << 20 || pattern_diff(al, 0, 1u << 20, 9) != 1u << 20)
		fail("O_DIRECT read back wrong bytes");
	close(fd);
	free(al);

	/* errors the real open would give */
	MPATH("nodir/x.bin");
	if (open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644) != -1 || errno != ENOENT)
		fail("creating a checkpoint in a missing folder did not fail with ENOENT");
	MPATH("missing.bin");
	if (open(p, O_RDONLY) != -1 || errno != ENOENT)
		fail("opening a missing checkpoint did not fail with ENOENT");
	MPATH("adir");
	mkdir(p, 0755);
	if (open(p, O_WRONLY | O_TRUNC) != -1 || errno != EISDIR)
		fail("opening a folder for writing did not fail with EISDIR");
	rmdir(p);
	printf("misc: holes, O_EXCL, O_APPEND, O_RDWR update, truncate, empty, creat, fallocate, O_DIRECT ok\n");
	free(b);
	free(e);
	return 0;
#undef MPATH
}

/* ---- untagged files: a transcript to compare with and without the library -- */

static uint64_t fnv(const unsigned char *b, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

int m_plainops(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	const char *dir = argv[1];
	char p1[PATH_MAX], p2[PATH_MAX];
	const size_t n = 1u << 20;
	unsigned char *e = pattern_buf(n, 7), *b = xmalloc(n);
	struct stat st;
	long r;

	/* each result is taken before it is printed: printf's arguments are
	 * evaluated in no fixed order */
	snprintf(p1, sizeof(p1), "%s/plain1.dat", dir);
	snprintf(p2, sizeof(p2), "%s/plain2.dat", dir);
	int fd = open(p1, O_RDWR | O_CREAT | O_TRUNC, 0644);
	printf("open rw: %s\n", fd >= 0 ? "ok" : strerror(errno));
	r = write(fd, e, n);
	printf("write: %ld\n", r);
	printf("lseek cur: %lld\n", (long long)lseek(fd, 0, SEEK_CUR));
	fstat(fd, &st);
	printf("fstat: size %lld reg %d\n", (long long)st.st_size, S_ISREG(st.st_mode));
	memset(b, 0, n);
	r = pread(fd, b, 4096, 1000);
	printf("pread: %ld fnv %016" PRIx64 "\n", r, fnv(b, 4096));
	r = syscall(SYS_pread64, fd, b, 4096, 5000);
	printf("raw SYS_pread64: %ld fnv %016" PRIx64 "\n", r, fnv(b, 4096));
	lseek(fd, 0, SEEK_SET);
	r = syscall(SYS_read, fd, b, 4096);
	printf("raw SYS_read: %ld fnv %016" PRIx64 "\n", r, fnv(b, 4096));
	int d = dup(fd);
	printf("dup lseek: %lld\n", (long long)lseek(d, 0, SEEK_CUR));
	printf("F_GETFL accmode: %d\n", fcntl(d, F_GETFL) & O_ACCMODE);
	printf("ftruncate: %d\n", ftruncate(fd, 500000));
	printf("fsync: %d\n", fsync(fd));
	printf("flock: %d\n", flock(fd, LOCK_EX));
	unsigned char *m = mmap(NULL, 500000, PROT_READ, MAP_SHARED, fd, 0);
	printf("mmap: %s fnv %016" PRIx64 "\n", m == MAP_FAILED ? "failed" : "ok",
	       m == MAP_FAILED ? 0 : fnv(m, 500000));
	if (m != MAP_FAILED)
		munmap(m, 500000);
	close(d);
	close(fd);

	FILE *f = fopen(p2, "w+");
	printf("fopen: %s\n", f ? "ok" : strerror(errno));
	r = (long)fwrite(e, 1, 77777, f);
	printf("fwrite: %ld\n", r);
	rewind(f);
	memset(b, 0, n);
	r = (long)fread(b, 1, n, f);
	printf("fread: %ld fnv %016" PRIx64 "\n", r, fnv(b, 77777));
	fclose(f);
	printf("rename: %d\n", rename(p2, p1));
	r = stat(p1, &st);
	printf("stat: %ld size %lld\n", r, (long long)st.st_size);
	r = stat(p2, &st);
	printf("stat old name: %ld %s\n", r, strerror(errno));
	printf("unlink: %d\n", unlink(p1));
	r = open(p1, O_RDONLY);
	printf("open after unlink: %ld %s\n", r, strerror(errno));
	free(b);
	free(e);
	return 0;
}

/* ---- the end of a program with a thread still writing ---------------------- */
