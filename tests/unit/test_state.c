/* The private folder and what dead processes leave in it: a folder that is
 * not this user's is refused with a message saying whose it is; the sweep
 * removes the ssd tier files and listed temporary files of processes that no
 * longer run (a pid with another start time is another process), and
 * nothing of a live one's or that the library did not name. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "state.h"

static char sdir[64];

static void state_setup(void)
{
	snprintf(sdir, sizeof(sdir), "/tmp/ckc-state-XXXXXX");
	cr_assert_not_null(mkdtemp(sdir));
}

static void state_teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", sdir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(state, .init = state_setup, .fini = state_teardown);

static const char *at(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static const char *at(const char *fmt, ...)
{
	static char buf[4][PATH_MAX];
	static int next;
	char rel[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	char *b = buf[next++ % 4];
	snprintf(b, PATH_MAX, "%s/%s", sdir, rel);
	return b;
}

static void touch(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static bool there(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

Test(state, private_folder_is_made_0700)
{
	char out[PATH_MAX], why[512];
	cr_assert_eq(ckc_private_dir(sdir, "CKPTCACHE_SSD_DIR", out, sizeof(out), why, sizeof(why)), 0);
	struct stat st;
	cr_assert_eq(stat(out, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0700);
	/* one opened to others is made private again */
	chmod(out, 0755);
	cr_assert_eq(ckc_private_dir(sdir, "CKPTCACHE_SSD_DIR", out, sizeof(out), why, sizeof(why)), 0);
	cr_assert_eq(stat(out, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0700);
}

Test(state, a_link_or_a_file_is_refused)
{
	char out[PATH_MAX], why[512];
	cr_assert_eq(symlink("/tmp", at("ckptcache-%u", (unsigned)getuid())), 0);
	cr_assert_eq(ckc_private_dir(sdir, "CKPTCACHE_SSD_DIR", out, sizeof(out), why, sizeof(why)),
		     -ELOOP);
	cr_expect_not_null(strstr(why, "symbolic link"), "%s", why);
	unlink(at("ckptcache-%u", (unsigned)getuid()));
	touch(at("ckptcache-%u", (unsigned)getuid()), "", 0);
	cr_assert_eq(ckc_private_dir(sdir, "CKPTCACHE_SSD_DIR", out, sizeof(out), why, sizeof(why)),
		     -ENOTDIR);
	cr_expect_not_null(strstr(why, "CKPTCACHE_SSD_DIR"), "%s", why);
}

Test(state, another_users_folder_says_whose)
{
	if (geteuid() != 0)
		cr_skip_test("only root can give a folder to another user");
	char out[PATH_MAX], why[512];
	cr_assert_eq(mkdir(at("ckptcache-%u", (unsigned)getuid()), 0755), 0);
	cr_assert_eq(chown(at("ckptcache-%u", (unsigned)getuid()), 65534, 65534), 0);
	cr_assert_eq(ckc_private_dir(sdir, "CKPTCACHE_SSD_DIR", out, sizeof(out), why, sizeof(why)),
		     -EPERM);
	cr_expect_not_null(strstr(why, "belongs to user"), "%s", why);
	cr_expect_not_null(strstr(why, "uid 65534"), "%s", why);
	cr_expect_not_null(strstr(why, "remove it"), "%s", why);
	cr_expect_not_null(strstr(why, "CKPTCACHE_SSD_DIR"), "%s", why);
}

Test(state, start_time_names_a_process)
{
	unsigned long long me = ckc_self_start();
	cr_assert_gt(me, 0);
	cr_assert_eq(ckc_proc_start(getpid()), me);
	cr_assert_eq(ckc_proc_start(0x3fffffff), 0, "no such process");
}

struct seen {
	int n;
	char path[8][PATH_MAX];
};

static void seen_fn(const char *path, uint64_t bytes, bool removed, void *ctx)
{
	(void)bytes;
	struct seen *s = ctx;
	cr_expect(removed, "%s not removed", path);
	if (s->n < 8)
		snprintf(s->path[s->n], PATH_MAX, "%s", path);
	s->n++;
}

Test(state, sweep_removes_what_dead_processes_left)
{
	char priv[PATH_MAX], why[512];
	cr_assert_eq(ckc_private_dir(sdir, "X", priv, sizeof(priv), why, sizeof(why)), 0);
	cr_assert_eq(mkdir(at("ck"), 0755), 0);
	long pid = (long)getpid();
	unsigned long long me = ckc_self_start();
	/* this pid with another start time: a process that died */
	unsigned long long dead = me + 1;
	touch(at("ckptcache-%u/ssd.%ld.%llu", (unsigned)getuid(), pid, dead), "x", 1);
	touch(at("ckptcache-%u/ssd.%ld.%llu", (unsigned)getuid(), pid, me), "x", 1);
	touch(at("ck/.ckc.%ld.%llu.1", pid, dead), "t", 1);
	touch(at("ck/.ckc.%ld.%llu.2", pid, me), "t", 1);
	touch(at("ck/precious.bin"), "p", 1);
	char rec[3 * PATH_MAX];
	size_t len = 0;
	const char *listed[] = { at("ck/.ckc.%ld.%llu.1", pid, dead), at("ck/precious.bin"),
				 at("ck/.ckc.%ld.%llu.9", pid, dead) };
	for (int i = 0; i < 3; i++) {
		size_t k = strlen(listed[i]) + 1;
		memcpy(rec + len, listed[i], k);
		len += k;
	}
	touch(at("ckptcache-%u/proc.%ld.%llu", (unsigned)getuid(), pid, dead), rec, len);
	touch(at("ckptcache-%u/proc.%ld.%llu", (unsigned)getuid(), pid, me), rec, len);
	touch(at("ckptcache-%u/rescue.%ld.0-a.bin", (unsigned)getuid(), pid), "r", 1);

	struct seen s = { 0 };
	long n = ckc_stale_sweep(priv, true, seen_fn, &s);
	cr_assert_eq(n, 3, "found %ld", n);
	cr_expect_not(there(at("ckptcache-%u/ssd.%ld.%llu", (unsigned)getuid(), pid, dead)));
	cr_expect_not(there(at("ckptcache-%u/proc.%ld.%llu", (unsigned)getuid(), pid, dead)));
	cr_expect_not(there(at("ck/.ckc.%ld.%llu.1", pid, dead)));
	/* a live process's files, files the library did not name, rescue files */
	cr_expect(there(at("ckptcache-%u/ssd.%ld.%llu", (unsigned)getuid(), pid, me)));
	cr_expect(there(at("ckptcache-%u/proc.%ld.%llu", (unsigned)getuid(), pid, me)));
	cr_expect(there(at("ck/.ckc.%ld.%llu.2", pid, me)));
	cr_expect(there(at("ck/precious.bin")));
	cr_expect(there(at("ckptcache-%u/rescue.%ld.0-a.bin", (unsigned)getuid(), pid)));
	cr_expect_eq(ckc_ssd_files_bytes(sdir), 4096, "the live tier file's allocation");
}

Test(state, record_lists_the_temporary_files_in_flight)
{
	cr_assert_eq(ckc_state_open(sdir, "X"), 0);
	const char *priv = ckc_state_dir();
	cr_assert_not_null(priv);
	const char *rec = at("ckptcache-%u/proc.%ld.%llu", (unsigned)getuid(), (long)getpid(),
			     ckc_self_start());
	ckc_state_tmp_add("/a/.ckc.1");
	ckc_state_tmp_add("/b/.ckc.2");
	ckc_state_tmp_del("/a/.ckc.1");
	char buf[64] = { 0 };
	int fd = open(rec, O_RDONLY);
	cr_assert_geq(fd, 0);
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	cr_assert_eq(n, 10);
	cr_assert_str_eq(buf, "/b/.ckc.2");
	ckc_state_close();
	cr_expect_not(there(rec), "the record goes with a normal end");
	cr_expect_not(there(at("ckptcache-%u", (unsigned)getuid())), "and the empty folder");
}
