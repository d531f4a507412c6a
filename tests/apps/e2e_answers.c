/* e2e_helper: Calls whose answers on a checkpoint the cache holds must be
 * the kernel's: each is made on a just-written tagged file and on its
 * untagged twin, and the two answers (result and errno) must agree. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

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
