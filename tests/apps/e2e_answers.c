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

static void agree(const char *what, struct answer a[2])
{
	if (a[0].r != a[1].r || (a[0].r < 0 && a[0].err != a[1].err))
		fail("%s: %ld (%s) on the checkpoint, %ld (%s) on an untagged file", what, a[0].r,
		     a[0].r < 0 ? strerror(a[0].err) : "no error", a[1].r,
		     a[1].r < 0 ? strerror(a[1].err) : "no error");
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

static long fd_call(const char *dir, const char *name, int how)
{
	char p[PATH_MAX];
	in(p, dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open %s: %s", p, strerror(errno));
	char b[4096] = { 1 };
	write_all(fd, (unsigned char *)b, sizeof(b), p);
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
	/* the files themselves are still what was written */
	for (int side = 0; side < 2; side++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/b.bin", ans_dirs[side]);
		check_file(p, 8192, 1, 0);
		snprintf(p, sizeof(p), "%s/a.bin", ans_dirs[side]);
		check_file(p, 8192, 2, 0);
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
