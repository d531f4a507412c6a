/* e2e_helper: Calls whose answers on a checkpoint the cache holds must be
 * the kernel's: each is made on a just-written tagged file and on its
 * untagged twin, and the two answers (result and errno) must agree; and the
 * C library's directory walkers, which must find every closed checkpoint. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

#include <dirent.h>
#include <fts.h>
#include <ftw.h>
#include <glob.h>
#include <sys/stat.h>
#include <wchar.h>

struct answer {
	long r;
	int err;
};

static const char *ans_dirs[2]; /* tagged, untagged */

/* A file of 8 KiB written and closed at dir/name. */
static void fresh(const char *dir, const char *name, uint64_t seed)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	gen_file(p, 8192, seed, 0);
}

static int ans_differ;

/* Each difference is told; the test fails at the end (ans_done). */
static void agree(const char *what, struct answer a[2])
{
	if (a[0].r != a[1].r || (a[0].r < 0 && a[0].err != a[1].err)) {
		fprintf(stderr, "%s %s: differs: %s: %ld (%s) on the checkpoint, %ld (%s) on an untagged file\n",
			PROG, mode, what, a[0].r, a[0].r < 0 ? strerror(a[0].err) : "no error", a[1].r,
			a[1].r < 0 ? strerror(a[1].err) : "no error");
		ans_differ++;
	}
}

#define BOTH(what, expr)                                                      \
	do {                                                                  \
		struct answer a_[2];                                          \
		for (int side = 0; side < 2; side++) {                       \
			const char *dir = ans_dirs[side];                     \
			char p[PATH_MAX], q[PATH_MAX];                        \
			(void)p, (void)q, (void)dir;                          \
			errno = 0;                                            \
			a_[side].r = (long)(expr);                            \
			a_[side].err = errno;                                 \
		}                                                             \
		agree(what, a_);                                              \
	} while (0)

static long in(char *p, const char *dir, const char *name)
{
	snprintf(p, PATH_MAX, "%s/%s", dir, name);
	return 0;
}

/* A new file dir/name opened with flags and 100 bytes written: its fd. */
static int fresh_fd(const char *dir, const char *name, int flags)
{
	char p[PATH_MAX];
	in(p, dir, name);
	int fd = open(p, flags | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open %s: %s", p, strerror(errno));
	unsigned char b[100];
	memset(b, 7, sizeof(b));
	write_all(fd, b, sizeof(b), p);
	return fd;
}

static long fd_call(const char *dir, const char *name, int how)
{
	int fd = fresh_fd(dir, name, O_WRONLY);
	long r;
	switch (how) {
	case 0:
		r = sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
		break;
	case 1:
		r = syncfs(fd);
		break;
	case 2:
		r = fcntl(fd, F_GETLEASE);
		break;
	default: {
		const char *volatile none = NULL;
		r = utimensat(fd, none, NULL, 0);
		break;
	}
	}
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

/* The answer of call `how` on a descriptor of a new file, which is closed
 * after (errno kept). */
static long fd_answer(const char *dir, int how)
{
	static char big[8];
	struct iovec v[IOV_MAX + 1];
	for (int i = 0; i <= IOV_MAX; i++)
		v[i] = (struct iovec){ big, 1 };
	int fd = fresh_fd(dir, "v.bin", O_RDWR);
	long r;
	switch (how) {
	case 0: r = writev(fd, v, IOV_MAX + 1); break;
	case 1: r = preadv(fd, v, IOV_MAX + 1, 0); break;
	case 2: {
		struct iovec two[2] = { { big, 2 }, { big, (size_t)SSIZE_MAX + 1 } };
		r = writev(fd, two, 2);
		break;
	}
	case 3: r = pwritev2(fd, v, 1, 0, 0x1000000); break;
	case 4: r = fcntl(fd, F_GETFL); break;
	case 5: r = fcntl(fd, F_GETOWN); break;
	case 6: r = fcntl(fd, F_GET_SEALS); break;
	case 7: r = fcntl(fd, 9999); break;
	/* an end past the largest offset: EINVAL, not an end of file */
	case 9: r = pread(fd, big, 8, INT64_MAX - 5); break;
	case 10: r = preadv(fd, v, 8, INT64_MAX - 5); break;
	/* RWF_ATOMIC on a read: never taken */
	case 11: r = preadv2(fd, v, 1, 0, 0x40); break;
	default: r = lseek(fd, 0, SEEK_CUR); break;
	}
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

/* Whether the kernel takes pwritev2 flag on a file of the untagged folder
 * (RWF_NOAPPEND and RWF_DONTCACHE are younger than some kernels). */
static bool kernel_takes(unsigned flag)
{
	char p[PATH_MAX];
	in(p, ans_dirs[1], "probe.bin");
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open %s: %s", p, strerror(errno));
	struct iovec v = { "x", 1 };
	bool ok = pwritev2(fd, &v, 1, 0, (int)flag) == 1;
	close(fd);
	unlink(p);
	return ok;
}

/* pwritev2 with flag at offset 0 of a new file's O_APPEND descriptor
 * (RWF_NOAPPEND writes there, as pwrite on other descriptors): its result,
 * and the file's first byte and size after, in one. */
static long rwf_answer(const char *dir, unsigned flag)
{
	char p[PATH_MAX];
	int fd = fresh_fd(dir, "rwf.bin", O_RDWR | O_APPEND);
	struct iovec v = { "X", 1 };
	long r = pwritev2(fd, &v, 1, 0, (int)flag);
	long e = errno;
	close(fd);
	in(p, dir, "rwf.bin");
	char c = 0;
	fd = open(p, O_RDONLY);
	if (fd < 0 || read(fd, &c, 1) != 1)
		fail("read back %s: %s", p, strerror(errno));
	struct stat st;
	long size = fstat(fd, &st) == 0 ? (long)st.st_size : -1;
	close(fd);
	errno = (int)e;
	return r < 0 ? r : (r * 1000 + c) * 1000 + size;
}

/* fdopen of a new file's descriptor: "w" on a read-only one (refused), "a"
 * on its writer moved back to offset 0, which appends: the file's size
 * after. */
static long fdopen_answer(const char *dir, bool append)
{
	char p[PATH_MAX];
	in(p, dir, "f.bin");
	int fd = fresh_fd(dir, "f.bin", O_WRONLY);
	if (!append) {
		close(fd);
		if ((fd = open(p, O_RDONLY)) < 0)
			fail("open %s: %s", p, strerror(errno));
	} else if (lseek(fd, 0, SEEK_SET) != 0) {
		fail("lseek %s: %s", p, strerror(errno));
	}
	FILE *f = fdopen(fd, append ? "a" : "w");
	if (!f) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	fputs("tail", f);
	fclose(f);
	struct stat st;
	return stat(p, &st) == 0 ? (long)st.st_size : -2;
}

/* rmdir of a folder holding a new file still open for writing, then the
 * file after its close: -errno of the rmdir * 10 + whether it exists. */
static long rmdir_answer(const char *dir)
{
	char d[PATH_MAX], p[PATH_MAX];
	in(d, dir, "sub");
	if (mkdir(d, 0755) != 0)
		fail("mkdir %s: %s", d, strerror(errno));
	int fd = fresh_fd(d, "w.bin", O_WRONLY);
	long r = rmdir(d) == 0 ? 0 : -errno;
	close(fd);
	in(p, d, "w.bin");
	return r * 10 + (access(p, F_OK) == 0);
}

/* A path to a just-written file spelt as a folder's (how): the answer. */
static long slash_answer(const char *dir, int how)
{
	char p[PATH_MAX], q[PATH_MAX];
	struct stat st;
	fresh(dir, "t.bin", 5);
	in(p, dir, how == 4 ? "t.bin/." : "t.bin/");
	switch (how) {
	case 0: {
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0)
			close(fd);
		return fd >= 0 ? 1 : -1;
	}
	case 1: return stat(p, &st);
	case 2: return access(p, F_OK);
	case 3: return unlink(p);
	case 4: return stat(p, &st);
	case 5: return (in(q, dir, "b.bin"), rename(q, p));
	default: {
		in(p, dir, "t.bin/x");
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0)
			close(fd);
		return fd >= 0 ? 1 : -1;
	}
	}
}

/* fstat's link count of a new file unlinked while open. */
static long nlink_answer(const char *dir)
{
	char p[PATH_MAX];
	int fd = fresh_fd(dir, "u.bin", O_RDWR);
	in(p, dir, "u.bin");
	if (unlink(p) != 0)
		fail("unlink %s: %s", p, strerror(errno));
	struct stat st;
	long r = fstat(fd, &st) == 0 ? (long)st.st_nlink : -1;
	close(fd);
	return r;
}

/* fsize-child PATH: with a file size limit of 100000 bytes (SIGXFSZ
 * ignored), writes three pieces of 60000 to PATH; its exit status tells
 * how each went (0 whole, 1 short, 2 EFBIG, in base 3). */
int m_fsize_child(int argc, char **argv)
{
	need_args(argc, 2, "PATH");
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = { 100000, 100000 };
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		return 100;
	static char b[60000];
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644), code = 0;
	for (int i = 0; i < 3; i++) {
		ssize_t r = write(fd, b, sizeof(b));
		code = code * 3 + (r == (ssize_t)sizeof(b) ? 0 : r > 0 ? 1 : errno == EFBIG ? 2 : 0);
	}
	close(fd);
	return code;
}

/* That child, a new program (the library starts in it): its status and
 * the file's size after, in one. */
static long fsize_answer(const char *dir)
{
	char p[PATH_MAX];
	in(p, dir, "lim.bin");
	pid_t pid = fork();
	if (pid == 0) {
		execl(self_exe, self_exe, "fsize-child", p, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		fail("the file size limit's child: %s", strerror(errno));
	struct stat s;
	return WEXITSTATUS(st) * 1000000L + (stat(p, &s) == 0 ? (long)s.st_size : -1);
}

/* Wide characters written with fwprintf and read back with fgetwc and
 * fgetws: fwprintf's count, fwide's answer and what came back, in one. */
static long wide_answer(const char *dir)
{
	char p[PATH_MAX];
	in(p, dir, "w.txt");
	FILE *f = fopen(p, "w");
	if (!f)
		fail("fopen %s: %s", p, strerror(errno));
	long r = fwprintf(f, L"step %d\n", 42) * 10 + fwide(f, 0) + 1;
	fputws(L"x\n", f);
	fclose(f);
	if (!(f = fopen(p, "r")))
		fail("fopen %s: %s", p, strerror(errno));
	wchar_t line[32] = L"";
	wint_t c = fgetwc(f);
	ungetwc(c, f);
	if (!fgetws(line, 32, f) || wcscmp(line, L"step 42\n") != 0)
		r = -1;
	fclose(f);
	return r * 1000 + (long)c;
}

/* Wide characters the locale's encoding lacks (the C locale: none past
 * ASCII), written with fputws, fputwc and fwprintf: glibc's file streams
 * transliterate them ("EUR", "<<", else "?"). The calls' answers and a
 * digest of the bytes written, in one. */
static long wide_translit_answer(const char *dir)
{
	char p[PATH_MAX];
	in(p, dir, "wt.txt");
	FILE *f = fopen(p, "w");
	if (!f)
		fail("fopen %s: %s", p, strerror(errno));
	long r = fputws(L"h\u00e9llo \u20ac\n", f) * 100;
	r += (fputwc(L'\u00ab', f) == L'\u00ab') * 10;
	r += fwprintf(f, L"%lc|%ls|%d\n", (wint_t)0x20ac, L"\u00e9t\u00e9", 7);
	if (fclose(f) != 0)
		r = -1;
	if (!(f = fopen(p, "r")))
		fail("fopen %s: %s", p, strerror(errno));
	long digest = 0, n = 0;
	for (int c; (c = getc(f)) != EOF; n++)
		digest = (digest * 31 + c) % 1000003;
	fclose(f);
	return (r * 1000 + n) * 1000003 + digest;
}

/* Renames onto a new checkpoint still open for writing (its writer then
 * writes more and closes): how 0 from a missing file (fails), 1 with
 * RENAME_NOREPLACE from an existing file (fails), 2 with RENAME_EXCHANGE
 * (works); 3 a link from a missing file onto it (fails). The call's
 * result, its errno even on success, and the two files' sizes after, in
 * one. */
static long onto_open_answer(const char *dir, int how)
{
	char p[PATH_MAX], q[PATH_MAX];
	in(p, dir, "open.bin");
	in(q, dir, how == 0 || how == 3 ? "missing.bin" : "other.bin");
	unlink(q);
	if (how == 1 || how == 2)
		gen_file(q, 3000, 8, 0);
	int fd = fresh_fd(dir, "open.bin", O_WRONLY);
	errno = 0;
	long r = how == 3 ? link(q, p) : renameat2(AT_FDCWD, q, AT_FDCWD, p,
						  how == 1 ? RENAME_NOREPLACE : how == 2 ? RENAME_EXCHANGE : 0);
	long e = errno;
	unsigned char b[50];
	memset(b, 3, sizeof(b));
	write_all(fd, b, sizeof(b), p);
	close(fd);
	struct stat sp, sq;
	long a = stat(p, &sp) == 0 ? (long)sp.st_size : -1, c = stat(q, &sq) == 0 ? (long)sq.st_size : -1;
	return ((r * 1000 + e) * 100000 + a) * 100000 + c;
}

/* A stream used with a byte function first is one of bytes: fwide's
 * answer, then fputwc's (refused), and the file's size, in one. */
static long bytes_first_answer(const char *dir)
{
	char p[PATH_MAX];
	in(p, dir, "b.txt");
	FILE *f = fopen(p, "w");
	if (!f)
		fail("fopen %s: %s", p, strerror(errno));
	fputs("bytes", f);
	long o = fwide(f, 0), w = (long)fputwc(L'x', f);
	fclose(f);
	struct stat st;
	return ((o + 1) * 100000000000L + (w == (long)WEOF ? 0 : w + 1) * 1000) +
	       (stat(p, &st) == 0 ? (long)st.st_size : -1);
}

/* A file written under a temporary name and renamed: whether a listing of
 * its folder, right after, has it. */
static long listing_answer(const char *dir)
{
	char d[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	in(d, dir, "lst");
	if (mkdir(d, 0755) != 0)
		fail("mkdir %s: %s", d, strerror(errno));
	int fd = fresh_fd(d, "c.tmp", O_WRONLY);
	close(fd);
	in(p, d, "c.tmp");
	in(q, d, "c_0.bin");
	if (rename(p, q) != 0)
		fail("rename %s: %s", p, strerror(errno));
	DIR *dp = opendir(d);
	long n = 0;
	for (struct dirent *e; dp && (e = readdir(dp));)
		n += !strcmp(e->d_name, "c_0.bin");
	if (dp)
		closedir(dp);
	return n;
}

/* Run as root: a file of another owner and group rewritten (O_TRUNC)
 * keeps them, as the kernel's file does. */
static long owner_answer(const char *dir)
{
	char p[PATH_MAX];
	fresh(dir, "o.bin", 6);
	in(p, dir, "o.bin");
	int fd = open(p, O_RDONLY);
	if (fd >= 0)
		close(fd);
	if (chown(p, 65534, 65534) != 0)
		return -1;
	gen_file(p, 4096, 7, 0);
	struct stat st;
	return stat(p, &st) == 0 ? (long)st.st_uid * 100000 + (long)st.st_gid : -2;
}

/* answers TAGGED_DIR UNTAGGED_DIR */
int m_answers(int argc, char **argv)
{
	need_args(argc, 3, "TAGGED_DIR UNTAGGED_DIR");
	ans_dirs[0] = argv[1];
	ans_dirs[1] = argv[2];
	for (int side = 0; side < 2; side++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/dir", ans_dirs[side]);
		if (mkdir(p, 0755) != 0)
			fail("mkdir %s: %s", p, strerror(errno));
		fresh(ans_dirs[side], "b.bin", 1);
		fresh(ans_dirs[side], "a.bin", 2);
	}
	BOTH("rename of a file onto a folder", (in(p, dir, "b.bin"), in(q, dir, "dir"), rename(p, q)));
	BOTH("open(O_DIRECTORY) of a file", (in(p, dir, "a.bin"), open(p, O_RDONLY | O_DIRECTORY)));
	BOTH("symlink onto a file", (in(p, dir, "a.bin"), symlink("/etc/hostname", p)));
	BOTH("mkdir onto a file", (in(p, dir, "a.bin"), mkdir(p, 0755)));
	BOTH("mkfifo onto a file", (in(p, dir, "a.bin"), mkfifo(p, 0644)));
	BOTH("sync_file_range", fd_call(dir, "s.bin", 0));
	BOTH("syncfs", fd_call(dir, "s.bin", 1));
	BOTH("fcntl(F_GETLEASE)", fd_call(dir, "s.bin", 2));
	BOTH("utimensat(fd, NULL)", fd_call(dir, "s.bin", 3));
	BOTH("writev of IOV_MAX + 1 pieces", fd_answer(dir, 0));
	BOTH("preadv of IOV_MAX + 1 pieces", fd_answer(dir, 1));
	BOTH("writev of a piece longer than SSIZE_MAX", fd_answer(dir, 2));
	BOTH("pwritev2 with an unknown flag", fd_answer(dir, 3));
	BOTH("fcntl(F_GETFL)", fd_answer(dir, 4));
	BOTH("fcntl(F_GETOWN)", fd_answer(dir, 5));
	BOTH("fcntl(F_GET_SEALS)", fd_answer(dir, 6));
	BOTH("fcntl of an unknown command", fd_answer(dir, 7));
	BOTH("pread of 8 bytes at INT64_MAX - 5", fd_answer(dir, 9));
	BOTH("preadv of 8 bytes at INT64_MAX - 5", fd_answer(dir, 10));
	BOTH("the position after those", fd_answer(dir, 8));
	if (kernel_takes(0x20))
		BOTH("pwritev2(RWF_NOAPPEND) at 0 of an O_APPEND descriptor", rwf_answer(dir, 0x20));
	if (kernel_takes(0x80))
		BOTH("pwritev2(RWF_DONTCACHE)", rwf_answer(dir, 0x80));
	BOTH("pwritev2(RWF_APPEND|RWF_NOAPPEND)", rwf_answer(dir, 0x30));
	BOTH("preadv2(RWF_ATOMIC)", fd_answer(dir, 11));
	/* (a write through a file system that makes it atomic is taken by
	 * the kernel, not by the cache) */
	if (!kernel_takes(0x40))
		BOTH("pwritev2(RWF_ATOMIC)", rwf_answer(dir, 0x40));
	BOTH("fdopen(\"w\") of a read-only descriptor", fdopen_answer(dir, false));
	BOTH("fdopen(\"a\") of a writer, then fputs", fdopen_answer(dir, true));
	BOTH("rmdir of a folder with a file open for writing", rmdir_answer(dir));
	BOTH("open(\"file/\", O_CREAT|O_TRUNC)", slash_answer(dir, 0));
	BOTH("stat(\"file/\")", slash_answer(dir, 1));
	BOTH("access(\"file/\")", slash_answer(dir, 2));
	BOTH("unlink(\"file/\")", slash_answer(dir, 3));
	BOTH("stat(\"file/.\")", slash_answer(dir, 4));
	BOTH("rename onto \"file/\"", slash_answer(dir, 5));
	BOTH("open(\"file/x\", O_CREAT)", slash_answer(dir, 6));
	BOTH("fstat's link count after unlink", nlink_answer(dir));
	BOTH("writes under a file size limit", fsize_answer(dir));
	BOTH("a listing right after a rename", listing_answer(dir));
	BOTH("a rename of a missing file onto a checkpoint open for writing", onto_open_answer(dir, 0));
	BOTH("renameat2(RENAME_NOREPLACE) onto a checkpoint open for writing", onto_open_answer(dir, 1));
	BOTH("renameat2(RENAME_EXCHANGE) with a checkpoint open for writing", onto_open_answer(dir, 2));
	BOTH("a link of a missing file onto a checkpoint open for writing", onto_open_answer(dir, 3));
	if (geteuid() == 0)
		BOTH("owner and group of a rewritten file", owner_answer(dir));
	BOTH("fwide and fputwc after fputs", bytes_first_answer(dir));
	BOTH("fwprintf, fgetwc, fgetws", wide_answer(dir));
	BOTH("wide characters transliterated", wide_translit_answer(dir));
	if (ans_differ)
		fail("%d calls answered otherwise than on untagged files (above)", ans_differ);
	/* the files themselves are still what was written */
	for (int side = 0; side < 2; side++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/b.bin", ans_dirs[side]);
		check_file(p, 8192, 1, 0);
		snprintf(p, sizeof(p), "%s/a.bin", ans_dirs[side]);
		check_file(p, 8192, 2, 0);
		snprintf(p, sizeof(p), "%s/t.bin", ans_dirs[side]);
		check_file(p, 8192, 5, 0);
	}
	return 0;
}

static int walk_files;
static int walk_count(const char *p, const struct stat *s, int type, struct FTW *f)
{
	(void)p, (void)s, (void)f;
	walk_files += type == FTW_F;
	return 0;
}

/* How many regular files the C library's walker `how` finds in dir. */
static int walker_count(const char *dir, const char *how)
{
	char p[PATH_MAX];
	int n = 0;
	if (strcmp(how, "scandir") == 0 || strcmp(how, "scandirat") == 0) {
		struct dirent **l;
		int k = how[7] ? scandirat(AT_FDCWD, dir, &l, NULL, alphasort) :
				 scandir(dir, &l, NULL, alphasort);
		for (int i = 0; i < k; i++) {
			n += l[i]->d_name[0] != '.';
			free(l[i]);
		}
		if (k >= 0)
			free(l);
	} else if (strcmp(how, "glob") == 0) {
		glob_t g;
		snprintf(p, sizeof(p), "%s/*.bin", dir);
		if (glob(p, 0, NULL, &g) == 0)
			n = (int)g.gl_pathc;
		globfree(&g);
	} else if (strcmp(how, "nftw") == 0) {
		walk_files = 0;
		nftw(dir, walk_count, 16, FTW_PHYS);
		n = walk_files;
	} else {
		char *paths[] = { (char *)dir, NULL };
		FTS *f = fts_open(paths, FTS_PHYSICAL, NULL);
		FTSENT *e;
		while (f && (e = fts_read(f)))
			n += e->fts_info == FTS_F;
		if (f)
			fts_close(f);
	}
	return n;
}

/* walkers DIR N SIZE SEED: for each of the C library's directory walkers
 * (scandir, scandirat, glob, nftw, fts), writes N more checkpoints into a
 * fresh folder of DIR and has the walker count them: it must find every
 * one closed before it ran. */
int m_walkers(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED");
	const char *hows[] = { "scandir", "scandirat", "glob", "nftw", "fts" };
	char dir[PATH_MAX], path[PATH_MAX];
	for (size_t h = 0; h < sizeof(hows) / sizeof(hows[0]); h++) {
		snprintf(dir, sizeof(dir), "%s/%s", arg.path, hows[h]);
		if (mkdir(dir, 0755) != 0)
			fail("mkdir %s: %s", dir, strerror(errno));
		for (long i = 0; i < arg.n; i++) {
			snprintf(path, sizeof(path), "%s/w%03ld.bin", dir, i);
			gen_file(path, arg.size, arg.seed + (uint64_t)i, 0);
		}
		int n = walker_count(dir, hows[h]);
		if (n != (int)arg.n)
			fail("%s found %d of the %ld checkpoints closed in %s", hows[h], n, arg.n, dir);
	}
	return 0;
}
