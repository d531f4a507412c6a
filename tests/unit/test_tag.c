/* Tagged-path matching: CKPTCACHE_PATHS globs with FNM_PATHNAME, "**" as a
 * last component, "%r", relative patterns and relative paths with dirfds. */
#include "config.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "intercept.h"
#include "path.h"

atomic_bool ckc_icpt_on;
/* no vfork here (spawn.c is not linked) */
__thread pid_t ckc_tl_vfork_pid;
bool ckc_vfork_child_slow(void)
{
	return false;
}
/* whether another process of the node holds a checkpoint (node.c is not
 * linked): the count of the node table's slots in use, none of them this
 * process's */
static _Atomic int64_t node_used_now;
_Atomic int64_t *_Atomic ckc_node_used = &node_used_now;
_Atomic int64_t ckc_node_mine;
/* the table is mapped already (ckc_node_used is set): not called */
bool ckc_node_holds_any_unmapped(bool map)
{
	(void)map;
	return true;
}
/* the node's count of folders renamed (node.c is not linked) */
static uint64_t node_moves_now;
uint64_t ckc_node_moves(void)
{
	return node_moves_now;
}
/* the paths another process was asked to publish (node.c is not linked) */
static char node_asked[4][PATH_MAX];
static int node_nasked;
void ckc_node_ask(const char *canon)
{
	if (node_nasked < 4)
		snprintf(node_asked[node_nasked++], PATH_MAX, "%s", canon);
}
/* a forked child's ask about a path (node.c is not linked; the
 * interception stays on here, so none is made) */
void ckc_node_ask_at(int dirfd, const char *path)
{
	(void)dirfd;
	(void)path;
	cr_assert_fail("asked as a forked child");
}
/* an ask about another rank's file (node.c is not linked): counted */
static int other_rank_asks;
void ckc_node_ask_other_rank(int dirfd, const char *path)
{
	(void)dirfd;
	(void)path;
	other_rank_asks++;
}
/* a writer in place announced to the node (node.c is not linked: none) */
uint64_t ckc_node_inplace_begin(const char *canon, bool start)
{
	(void)canon;
	(void)start;
	return 0;
}
void ckc_node_inplace_end(uint64_t val, int fd)
{
	(void)val;
	(void)fd;
}
/* a vfork child's claim of its parent's descriptor (node.c is not linked;
 * no vfork child runs here) */
int ckc_node_claim_fd(int fd, uint64_t id)
{
	(void)fd;
	(void)id;
	return -ENOSYS;
}
/* a descriptor made the real file's (posix.c is not linked) */
int ckc_px_vfd_make_real(ckc_vfd_t *v)
{
	(void)v;
	return -ENOSYS;
}
/* the cache not started (init.c is not linked) */
bool ckc_read_needs_engine(void)
{
	return false;
}

static void load(const char *paths, long rank)
{
	cr_assert_gt(ckc_tag_load(paths, rank), 0, "%s", paths);
	atomic_store(&ckc_icpt_on, true);
}

Test(tag, glob_does_not_cross_slashes)
{
	load("/lustre/u/run42/ckpt_*.bin", 0);
	cr_assert(ckc_tag_match("/lustre/u/run42/ckpt_0001.bin"));
	cr_assert(ckc_tag_match("/lustre/u/run42/ckpt_.bin"));
	cr_assert_not(ckc_tag_match("/lustre/u/run42/sub/ckpt_1.bin"));
	cr_assert_not(ckc_tag_match("/lustre/u/run42/ckpt_1.txt"));
	cr_assert_not(ckc_tag_match("/lustre/u/run4/ckpt_1.bin"));
	ckc_tag_free();
	cr_assert_not(ckc_tag_match("/lustre/u/run42/ckpt_0001.bin"));
}

Test(tag, several_patterns_and_classes)
{
	load("/a/x?.bin::/b/[0-9]*.dat", 0);
	cr_assert(ckc_tag_match("/a/x1.bin"));
	cr_assert_not(ckc_tag_match("/a/x12.bin"));
	cr_assert(ckc_tag_match("/b/7z.dat"));
	cr_assert_not(ckc_tag_match("/b/z7.dat"));
}

Test(tag, subtree)
{
	load("/scratch/run/**", 0);
	cr_assert(ckc_tag_match("/scratch/run/a"));
	cr_assert(ckc_tag_match("/scratch/run/d/e/f.bin"));
	cr_assert_not(ckc_tag_match("/scratch/run"));
	cr_assert_not(ckc_tag_match("/scratch/runner/a"));
	/* every name in the folder and below it is tagged; not beside it */
	cr_assert(ckc_tag_dir_holds_all("/scratch/run"));
	cr_assert(ckc_tag_dir_holds_all("/scratch/run/d/e"));
	cr_assert_not(ckc_tag_dir_holds_all("/scratch"));
	cr_assert_not(ckc_tag_dir_holds_all("/scratch/runner"));
	ckc_tag_free();
	load("/scratch/shot_*/**", 0);
	cr_assert(ckc_tag_match("/scratch/shot_3/a/b"));
	cr_assert_not(ckc_tag_match("/scratch/other/a"));
	cr_assert_not(ckc_tag_dir_holds_all("/scratch/other"));
	ckc_tag_free();
	load("/scratch/run/*.bin", 0);
	cr_assert_not(ckc_tag_dir_holds_all("/scratch/run"));
	ckc_tag_free();
	load("/**", 0);
	cr_assert(ckc_tag_match("/anything"));
	cr_assert_not(ckc_tag_match("/"));
	cr_assert(ckc_tag_dir_holds_all("/"));
	cr_assert(ckc_tag_dir_holds_all("/x"));
}

/* A listing of a folder alone needs the holders only where a name in it
 * can be tagged: never above the checkpoints' folder (a program's working
 * folder), always in it, and in a subtree's folders at any depth. */
Test(tag, names_in_a_folder_alone)
{
	static const char *const names[] = { "ckpt_1.bin", "x", "ckpt_.bin", "run", "sub" };
	static const struct {
		const char *paths, *dir;
		bool may;
	} cases[] = {
		{ "/s/u/run/ckpt_*.bin", "/", false },
		{ "/s/u/run/ckpt_*.bin", "/s/u", false },
		{ "/s/u/run/ckpt_*.bin", "/s/u/run", true },
		{ "/s/u/run/ckpt_*.bin", "/s/u/run/sub", false },
		{ "/s/u/run/ckpt_*.bin", "/s/u/other", false },
		{ "/s/u/r*/ckpt_*.bin", "/s/u/run", true },
		{ "/s/u/r*/ckpt_*.bin", "/s/u/x", false },
		{ "/s/run/**", "/s", false },
		{ "/s/run/**", "/s/run", true },
		{ "/s/run/**", "/s/run/a/b", true },
		{ "/s/run/**", "/s/runner", false },
		{ "/**", "/", true },
		{ "/a/b/*.bin:/s/run/**", "/a", false },
		{ "/a/b/*.bin:/s/run/**", "/a/b", true },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		load(cases[i].paths, 0);
		cr_assert_eq(!ckc_tag_dir_names_none(cases[i].dir), cases[i].may, "%s in %s", cases[i].dir,
			     cases[i].paths);
		/* never "none" where a name in it is tagged */
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			char p[256];
			snprintf(p, sizeof(p), "%s/%s", strcmp(cases[i].dir, "/") ? cases[i].dir : "", names[k]);
			if (ckc_tag_match(p))
				cr_assert_not(ckc_tag_dir_names_none(cases[i].dir), "%s is tagged by %s", p,
					      cases[i].paths);
		}
		ckc_tag_free();
	}
}

Test(tag, rank_and_canonical_patterns)
{
	load("/run/rank%r/../r%r/*.bin", 12);
	cr_assert(ckc_tag_match("/run/r12/x.bin"));
	cr_assert_not(ckc_tag_match("/run/r1/x.bin"));
	cr_assert_not(ckc_tag_match("/run/rank12/x.bin"));
	/* rank 0, a long rank, "%r" twice in a component, empty patterns and
	 * doubled slashes between the patterns' pieces */
	load("/run/r%r/%r.bin", 0);
	cr_assert(ckc_tag_match("/run/r0/0.bin"));
	cr_assert_not(ckc_tag_match("/run/r/.bin"));
	load(":/run//r%r_%r//*.bin::/other/%r:", 1234567890123);
	cr_assert(ckc_tag_match("/run/r1234567890123_1234567890123/a.bin"));
	cr_assert(ckc_tag_match("/other/1234567890123"));
	cr_assert_not(ckc_tag_match("/other/123456789012"));
	cr_assert_not(ckc_tag_match("/run/r1234567890123/a.bin"));
	load("/run/r%r/*.bin", -1);
	cr_assert(ckc_tag_match("/run/r-1/a.bin"));
}

Test(tag, relative_pattern_and_paths)
{
	char dir[] = "/tmp/ckc-tag-XXXXXX", canon[PATH_MAX], want[PATH_MAX];
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(chdir(dir), 0);
	load("ck/*.bin", 0);
	snprintf(want, sizeof(want), "%s/ck/a.bin", dir);
	cr_assert(ckc_tag_match(want));
	cr_assert(ckc_tagged_at(AT_FDCWD, "ck/./a.bin", canon));
	cr_assert_str_eq(canon, want);
	cr_assert(ckc_tagged_at(AT_FDCWD, want, canon));
	cr_assert_not(ckc_tagged_at(AT_FDCWD, "ck/a.txt", canon));
	/* relative to a directory descriptor */
	cr_assert_eq(mkdir("ck", 0755), 0);
	int dfd = open("ck", O_RDONLY | O_DIRECTORY);
	cr_assert_geq(dfd, 0);
	cr_assert(ckc_tagged_at(dfd, "a.bin", canon));
	cr_assert_str_eq(canon, want);
	close(dfd);
	/* nothing is tagged while interception is off or inside the engine */
	atomic_store(&ckc_icpt_on, false);
	cr_assert_not(ckc_tagged_at(AT_FDCWD, want, canon));
	atomic_store(&ckc_icpt_on, true);
	ckc_io_guard = 1;
	cr_assert_not(ckc_tagged_at(AT_FDCWD, want, canon));
	ckc_io_guard = 0;
	cr_assert_not(ckc_tagged_at(AT_FDCWD, NULL, canon));
	cr_assert_not(ckc_tagged_at(AT_FDCWD, "", canon));
	cr_assert_eq(chdir("/"), 0);
	rmdir(want);
	snprintf(want, sizeof(want), "%s/ck", dir);
	rmdir(want);
	rmdir(dir);
}

/* What a directory walk relies on: an untagged name is answered without
 * looking at the directory, and a directory below which nothing can be
 * tagged is known as such, for its descriptor and what is opened at it;
 * nothing of that hides a tagged path. */
Test(tag, quick_answers_never_hide_a_tagged_path)
{
	char dir[] = "/tmp/ckc-tag-XXXXXX", canon[PATH_MAX], p[PATH_MAX + 32];
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(ckc_fdtab_init(), 0);
	snprintf(p, sizeof(p), "%s/run/ckpt_*.bin:%s/sub/**", dir, dir);
	load(p, 0);
	cr_assert_eq(chdir(dir), 0);
	cr_assert_eq(mkdir("run", 0755), 0);
	cr_assert_eq(mkdir("sub", 0755), 0);
	cr_assert_eq(mkdir("other", 0755), 0);
	cr_assert_eq(mkdir("other/deep", 0755), 0);
	int top = open(dir, O_RDONLY | O_DIRECTORY), run = open("run", O_RDONLY | O_DIRECTORY);
	int other = open("other", O_RDONLY | O_DIRECTORY), sub = open("sub", O_RDONLY);
	cr_assert(top >= 0 && run >= 0 && other >= 0 && sub >= 0);
	/* names and subtrees as patterns say */
	cr_assert(ckc_tagged_at(run, "ckpt_1.bin", canon));
	cr_assert_not(ckc_tagged_at(run, "notes.txt", canon));
	cr_assert(ckc_tagged_at(top, "run/ckpt_2.bin", canon));
	cr_assert(ckc_tagged_at(sub, "any/thing", canon));
	cr_assert(ckc_tagged_at(top, "sub/x", canon));
	cr_assert_not(ckc_tagged_at(other, "x.bin", canon));
	/* nothing below other: known for its descriptor, and for what is
	 * opened at it; not for the top, which holds run and sub */
	cr_assert_eq(atomic_load(&ckc_tag_dirv[other]), 1);
	cr_assert_neq(atomic_load(&ckc_tag_dirv[top]), 1);
	cr_assert_neq(atomic_load(&ckc_tag_dirv[run]), 1);
	cr_assert_neq(atomic_load(&ckc_tag_dirv[sub]), 1);
	int deep = openat(other, "deep", O_RDONLY | O_NOFOLLOW);
	cr_assert_geq(deep, 0);
	ckc_tag_opened(other, "deep", O_RDONLY | O_NOFOLLOW, deep);
	cr_assert_eq(atomic_load(&ckc_tag_dirv[deep]), 1);
	/* a name that may be a symbolic link, or a path of several names, may
	 * lead anywhere: not inherited */
	ckc_tag_opened(other, "deep", O_RDONLY, 905);
	ckc_tag_opened(other, "deep/x", O_RDONLY | O_NOFOLLOW, 906);
	cr_assert_eq(atomic_load(&ckc_tag_dirv[905]), 0);
	cr_assert_eq(atomic_load(&ckc_tag_dirv[906]), 0);
	cr_assert_eq(ckc_tag_dup(other, 900), 900);
	cr_assert_eq(atomic_load(&ckc_tag_dirv[900]), 1);
	ckc_tag_forget_fd(900);
	cr_assert_eq(atomic_load(&ckc_tag_dirv[900]), 0);
	/* a way out of the directory is looked at; names with dots that are
	 * not ".." stay below it */
	cr_assert(ckc_tagged_at(other, "../sub/y", canon));
	cr_assert(ckc_tagged_at(other, "deep/..//../sub/y", canon));
	cr_assert_not(ckc_tagged_at(other, "..x", canon));
	cr_assert_not(ckc_tagged_at(other, "x..", canon));
	cr_assert_not(ckc_tagged_at(other, "deep/a..b/...", canon));
	cr_assert(ckc_tagged_at(deep, "../../run/ckpt_3.bin", canon));
	ckc_tag_opened(deep, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 901);
	cr_assert_eq(atomic_load(&ckc_tag_dirv[901]), 0);
	/* a trailing slash spells a folder, which no checkpoint is (the
	 * kernel's ENOTDIR, EISDIR); a way back through ".." still reaches a
	 * tagged name */
	cr_assert_not(ckc_tagged_at(run, "ckpt_4.bin/", canon));
	cr_assert(ckc_tagged_at(top, "other/../run/ckpt_5.bin", canon));
	close(deep);
	close(top);
	close(run);
	close(other);
	close(sub);
	cr_assert_eq(chdir("/"), 0);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(tag, empty_patterns_are_ignored)
{
	cr_assert_eq(ckc_tag_load("::", 0), 0);
	cr_assert_not(ckc_tag_match("/x"));
}

Test(tag, virtual_descriptor_table)
{
	cr_assert_eq(ckc_fdtab_init(), 0);
	cr_assert_gt(ckc_vfd_cap, 0);
	int fd = ckc_placeholder(0);
	cr_assert_geq(fd, 0);
	char c;
	/* a placeholder refuses every byte that bypasses the library */
	cr_assert_eq(read(fd, &c, 1), -1);
	cr_assert_eq(errno, EBADF);
	cr_assert_eq(write(fd, "x", 1), -1);
	cr_assert_eq(errno, EBADF);
	cr_assert_null(ckc_vfd_get(fd));
	cr_assert_eq(ckc_vfd_install((int)ckc_vfd_cap, NULL), -EMFILE);
	close(fd);
}

static void *sleeper(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

/* Moving descriptors up (the engine does it for each file it opens, one
 * per checkpoint published) in a process of several threads reads the
 * descriptor table's size now and then, not for each. */
Test(tag, descriptors_moved_up_read_the_table_size_rarely)
{
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, sleeper, NULL), 0);
	unsigned long before = atomic_load(&ckc_fd_table_reads);
	for (int i = 0; i < 200; i++) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		cr_assert_geq(fd, 0);
		int up = ckc_fd_above(fd, 4096);
		cr_assert_geq(up, fd, "moved down: %d to %d", fd, up);
		cr_assert_eq(fcntl(up, F_GETFD), FD_CLOEXEC);
		close(up);
	}
	unsigned long reads = atomic_load(&ckc_fd_table_reads) - before;
	cr_assert_geq(reads, 1);
	cr_assert_leq(reads, 20, "the table's size was read %lu times for 200 descriptors", reads);
	pthread_cancel(t);
	pthread_join(t, NULL);
}

/* Random text of n pieces from pieces[]. */
static void rand_text(char *out, int n, const char *const *pieces, int npieces, unsigned *seed)
{
	out[0] = '\0';
	for (int i = 0; i < n; i++)
		strcat(out, pieces[rand_r(seed) % (unsigned)npieces]);
}

Test(tag, glob_match_agrees_with_fnmatch_in_a_multibyte_locale)
{
	/* the matcher against glibc's own, both ways of FNM_PATHNAME, with
	 * multibyte characters in the names; one pattern in four may hold
	 * '?' or brackets (fnmatch's once reached) */
	const char *pp[] = { "a", "b", ".", "/", "*", "**", "\xc3\xa9", "?", "[ab]", "[!a]" };
	const char *sp[] = { "a", "b", ".", "/", "\xc3\xa9", "ab" };
	cr_assert_not_null(setlocale(LC_ALL, "C.UTF-8"), "the C.UTF-8 locale is missing");
	unsigned seed = 12345;
	char pat[64], s[64];
	int both = 0;
	for (int i = 0; i < 200000; i++) {
		rand_text(pat, 1 + (int)(rand_r(&seed) % 6), pp, i % 4 ? 7 : 10, &seed);
		rand_text(s, (int)(rand_r(&seed) % 8), sp, 6, &seed);
		for (int pn = 0; pn < 2; pn++) {
			bool want = fnmatch(pat, s, pn ? FNM_PATHNAME : 0) == 0;
			cr_assert_eq(ckc_glob_match(pat, s, pn), want, "pattern \"%s\", \"%s\", FNM_PATHNAME %d: %d, fnmatch %d",
				     pat, s, pn, !want, want);
			both += want;
		}
	}
	cr_assert_gt(both, 1000, "too few matches to say anything");
	/* patterns with '?', brackets or escapes are fnmatch's */
	cr_assert(ckc_glob_match("ckpt_?.bin", "ckpt_\xc3\xa9.bin", true));
	cr_assert(ckc_glob_match("ckpt_[0-9].bin", "ckpt_7.bin", true));
	cr_assert_not(ckc_glob_match("ckpt_\\*.bin", "ckpt_1.bin", true));
	setlocale(LC_ALL, "C");
}

Test(tag, prefix_and_tail_patterns_agree_with_fnmatch)
{
	/* patterns whose rest after the literal prefix is '*' and literal
	 * bytes ("/r/ckpt_*.bin") are matched by their prefix and their end;
	 * every pattern, of that form or not, tags what fnmatch(FNM_PATHNAME)
	 * matches of canonical paths, and the quick look at the last name
	 * never says no to one of them */
	const char *pp[] = { "a", "b", ".", "/", "*", "x", "?" };
	const char *sp[] = { "a", "b", ".", "x", "/", "ab" };
	unsigned seed = 777;
	char rest[64], pat[80], s[64], path[80];
	int matched = 0, tails = 0;
	for (int i = 0; i < 20000; i++) {
		rand_text(rest, 1 + (int)(rand_r(&seed) % 4), pp, i % 3 ? 6 : 7, &seed);
		/* one pattern in two is the prefix, '*', then literal bytes */
		if (i % 2) {
			rest[0] = '*';
			for (char *c = rest + 1; *c; c++)
				if (*c == '*' || *c == '?' || *c == '/')
					*c = 'x';
			tails++;
		}
		snprintf(pat, sizeof(pat), "/d/p%s", rest);
		if (pat[strlen(pat) - 1] == '/' || strstr(pat, "//") || strstr(pat, "/./") || strstr(pat, "/../") ||
		    !strcmp(pat + strlen(pat) - 2, "/.") || !strcmp(pat + strlen(pat) - 3, "/.."))
			continue; /* not canonical: the loader canonicalises it first */
		if (strlen(pat) >= 3 && !strcmp(pat + strlen(pat) - 3, "/**"))
			continue; /* a subtree (tag.subtree) */
		ckc_tag_free();
		load(pat, 0);
		for (int k = 0; k < 20; k++) {
			rand_text(s, (int)(rand_r(&seed) % 6), sp, 6, &seed);
			snprintf(path, sizeof(path), "/d/p%s", s);
			char canon[PATH_MAX];
			if (ckc_path_canon(path, "/", canon, sizeof(canon)) != 0 || strcmp(canon, path))
				continue;
			bool want = fnmatch(pat, path, FNM_PATHNAME) == 0;
			cr_assert_eq(ckc_tag_match(path), want, "pattern \"%s\", \"%s\": %d, fnmatch %d", pat, path,
				     !want, want);
			if (want)
				cr_assert(ckc_tag_name_may_match(path), "pattern \"%s\": the name of \"%s\"", pat, path);
			matched += want;
		}
	}
	ckc_tag_free();
	cr_assert_gt(matched, 500, "too few matches to say anything");
	cr_assert_gt(tails, 5000);
}

Test(tag, component_patterns_agree_with_fnmatch)
{
	/* patterns of several components with wildcards (files "ckpt_*.bin"
	 * in folders "run*", "/d/run?/a*b/x"): matched component by component
	 * (literal, '*' and a tail, others), tagging what fnmatch(FNM_PATHNAME)
	 * matches of canonical paths of as many components and of others */
	const char *pc[] = { "a", "ab", "*", "*b", "a*", "*.bin", "a*b", "?", "a?", "*a*", "b" };
	const char *sc[] = { "a", "b", "ab", "ba", "x.bin", "a.bin", "aab", ".bin", "abab" };
	unsigned seed = 4242;
	char pat[128], path[128];
	int matched = 0, tried = 0;
	for (int i = 0; i < 4000; i++) {
		int np = 1 + (int)(rand_r(&seed) % 4);
		strcpy(pat, "/d");
		for (int k = 0; k < np; k++) {
			strcat(pat, "/");
			strcat(pat, pc[rand_r(&seed) % (sizeof(pc) / sizeof(pc[0]))]);
		}
		ckc_tag_free();
		load(pat, 0);
		for (int j = 0; j < 30; j++) {
			/* as many components as the pattern mostly, else one less or more */
			int ns = np + (j % 5 == 0 ? (int)(rand_r(&seed) % 3) - 1 : 0);
			strcpy(path, "/d");
			for (int k = 0; k < ns; k++) {
				strcat(path, "/");
				strcat(path, sc[rand_r(&seed) % (sizeof(sc) / sizeof(sc[0]))]);
			}
			bool want = fnmatch(pat, path, FNM_PATHNAME) == 0;
			cr_assert_eq(ckc_tag_match(path), want, "pattern \"%s\", \"%s\": %d, fnmatch %d", pat, path, !want,
				     want);
			if (want)
				cr_assert(ckc_tag_name_may_match(path), "pattern \"%s\": the name of \"%s\"", pat, path);
			matched += want;
			tried++;
		}
	}
	ckc_tag_free();
	cr_assert_gt(matched, tried / 20, "too few matches to say anything: %d of %d", matched, tried);
}

/* Several patterns at once (literal, '*', a tail, classes, a subtree of a
 * literal folder and of a folder with wildcards): the answers for paths
 * visited folder after folder, back and forth (each folder's plan made
 * once and used for its names), agree with fnmatch(FNM_PATHNAME) of each
 * pattern, a subtree pattern tagging what lies below a folder that
 * matches it. A new set of patterns makes new plans. */
static bool oracle(const char *const *pats, int n, const char *path)
{
	char anc[128];
	for (int i = 0; i < n; i++) {
		size_t l = strlen(pats[i]);
		if (l > 3 && strcmp(pats[i] + l - 3, "/**") == 0) {
			char dir[128];
			memcpy(dir, pats[i], l - 3);
			dir[l - 3] = '\0';
			/* a proper ancestor of path, not the root, matches dir */
			strcpy(anc, path);
			for (char *sl = strrchr(anc, '/'); sl && sl > anc; sl = strrchr(anc, '/')) {
				*sl = '\0';
				if (fnmatch(dir, anc, FNM_PATHNAME) == 0)
					return true;
			}
		} else if (fnmatch(pats[i], path, FNM_PATHNAME) == 0) {
			return true;
		}
	}
	return false;
}

Test(tag, a_folders_plan_agrees_with_whole_paths)
{
	const char *sets[][4] = {
		{ "/d/run*/ckpt_*.bin", "/d/a/b", "/d/x?/[ab]*", "/d/lit/**" },
		{ "/d/*/*", "/d/s_*/**", "/d/a*b/x.bin", "/d/*.dat" },
		{ "/d/a/*/c", "/d/*/b/**", "/d/run1/*b", "/d/r?n*/ck*_*.bin" },
	};
	const char *dirs[] = { "/d", "/d/run1", "/d/runx", "/d/a", "/d/a/b", "/d/a/b/c", "/d/xa", "/d/xyz",
			       "/d/lit", "/d/lit/deep", "/d/s_1", "/d/s_1/q", "/d/ab", "/d/a1b", "/d/q/b",
			       "/d/q/b/r", "/d/rin7", "/" };
	const char *names[] = { "ckpt_1.bin", "ckpt_.bin", "b", "a", "ab", "x.bin", "c", "f.dat", "bb", "ck_2.bin",
				".bin", "zz" };
	unsigned seed = 777;
	int tagged = 0, tried = 0;
	for (size_t k = 0; k < sizeof(sets) / sizeof(sets[0]); k++) {
		char list[256];
		snprintf(list, sizeof(list), "%s:%s:%s:%s", sets[k][0], sets[k][1], sets[k][2], sets[k][3]);
		ckc_tag_free();
		load(list, 0);
		for (int i = 0; i < 3000; i++) {
			/* mostly the folder of the path before, as a loop over one
			 * folder's files goes */
			static size_t d;
			if (i == 0 || rand_r(&seed) % 8 == 0)
				d = rand_r(&seed) % (sizeof(dirs) / sizeof(dirs[0]));
			char path[128];
			snprintf(path, sizeof(path), "%s/%s", strcmp(dirs[d], "/") ? dirs[d] : "",
				 names[rand_r(&seed) % (sizeof(names) / sizeof(names[0]))]);
			bool want = oracle(sets[k], 4, path);
			cr_assert_eq(ckc_tag_match(path), want, "patterns %s, \"%s\": %d, fnmatch %d", list, path,
				     !want, want);
			tagged += want;
			tried++;
		}
	}
	cr_assert_gt(tagged, tried / 10, "too few tagged paths to say anything: %d of %d", tagged, tried);
	cr_assert_lt(tagged, tried - tried / 10, "too few untagged paths to say anything: %d of %d", tagged, tried);
	/* the same folder under new patterns */
	ckc_tag_free();
	load("/d/run1/*.bin", 0);
	cr_assert(ckc_tag_match("/d/run1/ckpt_1.bin"));
	ckc_tag_free();
	load("/d/run1/*.dat", 0);
	cr_assert_not(ckc_tag_match("/d/run1/ckpt_1.bin"), "an answer of the patterns before");
	cr_assert(ckc_tag_match("/d/run1/f.dat"));
	ckc_tag_free();
}

/* The kept path of a folder's descriptor and of the working directory (a
 * walker's reads of each name, which go to the real files whatever the
 * path): only such a lookup keeps or uses one; a number closed or replaced
 * through the library, or a chdir, makes the next lookup find the new
 * folder; while another process holds a checkpoint nothing kept is used,
 * so that even a number changed behind the library's back is looked up. */
Test(tag, kept_folder_paths_follow_the_numbers)
{
	char dir[] = "/tmp/ckc-tag-XXXXXX", canon[PATH_MAX], p[PATH_MAX + 32], want[PATH_MAX + 32];
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(ckc_fdtab_init(), 0);
	snprintf(p, sizeof(p), "%s/**", dir);
	load(p, 0);
	cr_assert_eq(chdir(dir), 0);
	cr_assert_eq(mkdir("a", 0755), 0);
	cr_assert_eq(mkdir("b", 0755), 0);
	cr_assert_eq(mkdir("c", 0755), 0);
	int fd = open("a", O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	/* a lookup for anything but a read that passes keeps nothing */
	cr_assert(ckc_tagged_at(fd, "x.bin", canon));
	cr_assert_eq(atomic_load(&ckc_tag_dirv[fd]), 0, "kept for a lookup that may write");
	ckc_tag_keep_ok = true;
	for (int i = 0; i < 3; i++) {
		cr_assert(ckc_tagged_at(fd, "x.bin", canon));
		snprintf(want, sizeof(want), "%s/a/x.bin", dir);
		cr_assert_str_eq(canon, want);
	}
	cr_assert_eq(atomic_load(&ckc_tag_dirv[fd]), 2, "the path is kept");
	/* the longest name, and a path that leaves the folder */
	char longname[NAME_MAX + 1];
	memset(longname, 'n', NAME_MAX);
	longname[NAME_MAX] = '\0';
	cr_assert(ckc_tagged_at(fd, longname, canon), "a name of NAME_MAX bytes");
	snprintf(want, sizeof(want), "%s/a/%s", dir, longname);
	cr_assert_str_eq(canon, want);
	cr_assert(ckc_tagged_at(fd, "../b/y.bin", canon));
	snprintf(want, sizeof(want), "%s/b/y.bin", dir);
	cr_assert_str_eq(canon, want);
	/* closed (the close wrapper forgets the number), b opened there */
	ckc_tag_forget_fd(fd);
	close(fd);
	cr_assert_eq(open("b", O_RDONLY | O_DIRECTORY), fd);
	cr_assert(ckc_tagged_at(fd, "x.bin", canon));
	snprintf(want, sizeof(want), "%s/b/x.bin", dir);
	cr_assert_str_eq(canon, want, "after a close");
	/* c put there by dup2 (the wrapper forgets the number, then copies) */
	int c = open("c", O_RDONLY | O_DIRECTORY);
	cr_assert_geq(c, 0);
	ckc_tag_forget_fd(fd);
	cr_assert_eq(ckc_tag_dup(c, dup2(c, fd)), fd);
	cr_assert(ckc_tagged_at(fd, "x.bin", canon));
	snprintf(want, sizeof(want), "%s/c/x.bin", dir);
	cr_assert_str_eq(canon, want, "after a dup2");
	/* a walker's folder and the folder it reads inside it are kept at
	 * once: the inner one's close leaves the outer one's path */
	int top = open(".", O_RDONLY | O_DIRECTORY);
	cr_assert_geq(top, 0);
	while ((unsigned)top % CKC_TAG_DPATHS == (unsigned)fd % CKC_TAG_DPATHS) {
		/* the lowest free number may share fd's slot (whatever the
		 * runner left open): move it to a higher one */
		int moved = fcntl(top, F_DUPFD, top + 1);
		cr_assert_geq(moved, 0);
		close(top);
		top = moved;
	}
	cr_assert_neq((unsigned)top % CKC_TAG_DPATHS, (unsigned)fd % CKC_TAG_DPATHS);
	cr_assert(ckc_tagged_at(top, "a", canon));
	cr_assert(ckc_tagged_at(fd, "x.bin", canon));
	unsigned gen = atomic_load(&ckc_tag_dpath_gen[(unsigned)top % CKC_TAG_DPATHS]);
	int inner = open("a", O_RDONLY | O_DIRECTORY);
	cr_assert_geq(inner, 0);
	cr_assert(ckc_tagged_at(inner, "w.bin", canon));
	ckc_tag_forget_fd(inner);
	close(inner);
	cr_assert(ckc_tagged_at(top, "b", canon));
	snprintf(want, sizeof(want), "%s/b", dir);
	cr_assert_str_eq(canon, want);
	if ((unsigned)inner % CKC_TAG_DPATHS != (unsigned)top % CKC_TAG_DPATHS)
		cr_assert_eq(atomic_load(&ckc_tag_dpath_gen[(unsigned)top % CKC_TAG_DPATHS]), gen,
			     "the inner folder's close dropped the outer one's path");
	ckc_tag_forget_fd(top);
	close(top);
	/* a copy of a number whose path is kept does not take the path */
	cr_assert(ckc_tagged_at(c, "y.bin", canon));
	int d = dup(c);
	cr_assert_eq(ckc_tag_dup(c, d), d);
	cr_assert_neq(atomic_load(&ckc_tag_dirv[d]), 2);
	/* another process holds a checkpoint: the kept path still answers
	 * (a number changed behind the library's back, a raw dup2, is not
	 * seen), until a folder of the node is renamed */
	cr_assert(ckc_tagged_at(fd, "x.bin", canon));
	int a = open("a", O_RDONLY | O_DIRECTORY);
	cr_assert_geq(a, 0);
	cr_assert_eq(dup2(a, fd), fd);
	atomic_store(&node_used_now, 1);
	cr_assert(ckc_tagged_at(fd, "x.bin", canon));
	snprintf(want, sizeof(want), "%s/c/x.bin", dir);
	cr_assert_str_eq(canon, want, "kept while another process holds a checkpoint");
	node_moves_now++;
	cr_assert(ckc_tagged_at(fd, "x.bin", canon));
	snprintf(want, sizeof(want), "%s/a/x.bin", dir);
	cr_assert_str_eq(canon, want, "looked up again after a folder's rename on the node");
	/* the node's table not mapped (nothing tells of renames): while
	 * another process may hold one, the path is looked up */
	cr_assert_eq(dup2(c, fd), fd);
	atomic_store(&ckc_node_used, NULL);
	cr_assert(ckc_tagged_at(fd, "x.bin", canon));
	snprintf(want, sizeof(want), "%s/c/x.bin", dir);
	cr_assert_str_eq(canon, want, "a raw dup2 with the node's table not mapped");
	atomic_store(&ckc_node_used, &node_used_now);
	atomic_store(&node_used_now, 0);
	/* the working directory: kept until chdir through the library */
	cr_assert(ckc_tagged_at(AT_FDCWD, "a/z.bin", canon));
	snprintf(want, sizeof(want), "%s/a/z.bin", dir);
	cr_assert_str_eq(canon, want);
	cr_assert_eq(chdir("b"), 0);
	ckc_tag_cwd_changed();
	cr_assert(ckc_tagged_at(AT_FDCWD, "z.bin", canon));
	snprintf(want, sizeof(want), "%s/b/z.bin", dir);
	cr_assert_str_eq(canon, want, "after a chdir");
	cr_assert_eq(chdir("/"), 0);
	ckc_tag_cwd_changed();
	ckc_tag_keep_ok = false;
	for (const char *n = "abc"; *n; n++) {
		snprintf(p, sizeof(p), "%s/%c", dir, *n);
		rmdir(p);
	}
	rmdir(dir);
}

/* A stat of a tagged path while another process of the node holds
 * checkpoints asks it to publish that path first (close-to-open, as for an
 * open: find -newer or test -e after the writer's close); an untagged path
 * is not looked at, and nothing is asked while nobody holds anything. */
Test(tag, stat_asks_the_holders)
{
	char canon[PATH_MAX];
	load("/lustre/u/run42/*.bin", 0);
	atomic_store(&node_used_now, 1);
	node_nasked = 0;
	cr_assert_not(ckc_cached_at(AT_FDCWD, "/lustre/u/run42/a.bin", canon, NULL));
	cr_assert_not(ckc_cached_at(AT_FDCWD, "/lustre/u/run42/a.txt", canon, NULL));
	cr_assert_eq(node_nasked, 1);
	cr_assert_str_eq(node_asked[0], "/lustre/u/run42/a.bin");
	atomic_store(&node_used_now, 0);
	cr_assert_not(ckc_cached_at(AT_FDCWD, "/lustre/u/run42/b.bin", canon, NULL));
	cr_assert_eq(node_nasked, 1);
	ckc_tag_free();
}

/* Patterns with the rank: the other ranks' files are told apart (any rank
 * in its place), a subtree's folder needing something below it; a pattern
 * without "%r" names no other rank's file. */
Test(tag, other_ranks_patterns)
{
	load("/scratch/run/ck.%r:/scratch/rank%r/**:/x/*.bin", 3);
	cr_assert(ckc_tag_other_ranks());
	cr_assert(ckc_tag_match("/scratch/run/ck.3"));
	cr_assert_not(ckc_tag_match("/scratch/run/ck.1"));
	cr_assert(ckc_tag_match_other_rank("/scratch/run/ck.1"));
	cr_assert(ckc_tag_match_other_rank("/scratch/run/ck.12"));
	cr_assert_not(ckc_tag_match_other_rank("/scratch/run/sub/ck.1"));
	cr_assert(ckc_tag_match_other_rank("/scratch/rank7/a/b.dat"));
	cr_assert(ckc_tag_match_other_rank("/scratch/rank7/a"));
	cr_assert_not(ckc_tag_match_other_rank("/scratch/rank7"));
	cr_assert_not(ckc_tag_match_other_rank("/scratch/tank7/a"));
	cr_assert_not(ckc_tag_match_other_rank("/x/a.bin"));
	load("/x/*.bin", 3);
	cr_assert_not(ckc_tag_other_ranks());
	cr_assert_not(ckc_tag_match_other_rank("/scratch/run/ck.1"));
	ckc_tag_free();
}

Test(tag, a_path_spelt_as_a_folder_is_not_tagged)
{
	char out[PATH_MAX];
	load("/r/**", 0);
	cr_assert(ckc_tagged_at(AT_FDCWD, "/r/a.bin", out));
	cr_assert_str_eq(out, "/r/a.bin");
	cr_assert_not(ckc_tagged_at(AT_FDCWD, "/r/a.bin/", out));
	cr_assert_not(ckc_tagged_at(AT_FDCWD, "/r/a.bin//", out));
	cr_assert_not(ckc_tagged_at(AT_FDCWD, "/r/a.bin/.", out));
	cr_assert_not(ckc_tagged_at(AT_FDCWD, "/r/sub/..", out));
	/* names that end in dots without being "." or ".." are files */
	cr_assert(ckc_tagged_at(AT_FDCWD, "/r/a.b.", out));
	cr_assert(ckc_tagged_at(AT_FDCWD, "/r/..a", out));
	cr_assert(ckc_tagged_at(AT_FDCWD, "/r/a..", out));
	cr_assert_not(ckc_tagged_at(AT_FDCWD, "/r/sub/.", out));
	ckc_tag_free();
}

/* An open's first look at a path's last name: a name no pattern's last
 * component matches is untagged at once; a name under /proc or /dev/fd is
 * left to the full look (its open opens the file behind a descriptor),
 * read byte by byte; the answer agrees with ckc_tagged_at's. */
Test(tag, an_open_looks_at_the_last_name_first)
{
	char out[PATH_MAX];
	load("/r/*.bin:/t/ckpt_*", 0);
	cr_assert_eq(ckc_tag_name_look("/r/a.bin"), CKC_NAME_MAY);
	cr_assert_eq(ckc_tag_name_look("ckpt_1"), CKC_NAME_MAY);
	cr_assert_eq(ckc_tag_name_look("/r/a.json"), CKC_NAME_UNTAGGED);
	cr_assert_not(ckc_tagged_at(AT_FDCWD, "/r/a.json", out));
	cr_assert_eq(ckc_tag_name_look("/q/a.bin"), CKC_NAME_MAY, "by its name alone");
	cr_assert_not(ckc_tagged_at_named(AT_FDCWD, "/q/a.bin", out), "the path decides");
	cr_assert(ckc_tagged_at_named(AT_FDCWD, "/r/a.bin", out));
	cr_assert_str_eq(out, "/r/a.bin");
	/* the folder of the last tagged path: the answer at once, for a name
	 * of a file there spelt canonically */
	cr_assert_eq(ckc_tag_name_look("/r/b.bin"), CKC_NAME_TAGGED);
	cr_assert_eq(ckc_tag_name_look("/r/b.json"), CKC_NAME_UNTAGGED);
	cr_assert_eq(ckc_tag_name_look("/r/sub/b.bin"), CKC_NAME_MAY, "another folder");
	cr_assert_eq(ckc_tag_name_look("/r//b.bin"), CKC_NAME_MAY, "not canonical");
	cr_assert_eq(ckc_tag_name_look("/r/.."), CKC_NAME_MAY);
	cr_assert_neq(ckc_tag_name_look("/r/"), CKC_NAME_TAGGED, "a folder's form");
	cr_assert_eq(ckc_tag_name_look("r/b.bin"), CKC_NAME_MAY, "relative");
	char longname[NAME_MAX + 16] = "/r/";
	memset(longname + 3, 'x', NAME_MAX + 1);
	strcpy(longname + 3 + NAME_MAX + 1, ".bin");
	cr_assert_eq(ckc_tag_name_look(longname), CKC_NAME_MAY, "a name the kernel refuses");
	ckc_io_guard++;
	cr_assert_eq(ckc_tag_name_look("/r/b.bin"), CKC_NAME_MAY, "inside the engine");
	ckc_io_guard--;
	cr_assert_eq(ckc_tag_name_look("/proc/self/fd/3"), CKC_NAME_ASK);
	cr_assert_eq(ckc_tag_name_look("/dev/fd/3"), CKC_NAME_ASK);
	cr_assert_eq(ckc_tag_name_look("/dev/fdx"), CKC_NAME_UNTAGGED);
	cr_assert_eq(ckc_tag_name_look("/pr"), CKC_NAME_UNTAGGED);
	cr_assert_eq(ckc_tag_name_look("/d"), CKC_NAME_UNTAGGED);
	cr_assert_eq(ckc_tag_name_look(""), CKC_NAME_ASK);
	cr_assert_eq(ckc_tag_name_look("/r/."), CKC_NAME_MAY, "a folder's form is the full look's");
	atomic_store(&ckc_icpt_on, false);
	cr_assert_eq(ckc_tag_name_look("/r/a.json"), CKC_NAME_ASK, "the interception off");
	atomic_store(&ckc_icpt_on, true);
	ckc_tag_free();
	/* a folder whose every name is tagged: any last name may match */
	load("/r/*.bin:/s/**", 0);
	cr_assert_eq(ckc_tag_name_look("/s/x/anything"), CKC_NAME_MAY);
	cr_assert_eq(ckc_tag_name_look("/r/a.json"), CKC_NAME_MAY);
	ckc_tag_free();
}

/* One name at a folder's descriptor (a walker's open) is joined to the
 * folder's path without a walk: the answer and the path are the ones the
 * same name gets spelt another way (./name, walked), at the root and in a
 * folder whose every name is tagged, kept or not; "." and ".." are the
 * kernel's, and a name longer than NAME_MAX is not tagged. */
Test(tag, one_name_is_joined_as_it_would_be_walked)
{
	char dir[] = "/tmp/ckc-tag-XXXXXX", canon[PATH_MAX], walked[PATH_MAX], want[PATH_MAX + 32];
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(ckc_fdtab_init(), 0);
	snprintf(want, sizeof(want), "/ckc_root_*.bin:%s/**:/tmp/ckc-one-*.bin", dir);
	load(want, 0);
	int d = open(dir, O_RDONLY | O_DIRECTORY), root = open("/", O_RDONLY | O_DIRECTORY),
	    tmp = open("/tmp", O_RDONLY | O_DIRECTORY);
	cr_assert(d >= 0 && root >= 0 && tmp >= 0);
	char longname[NAME_MAX + 2];
	memset(longname, 'n', NAME_MAX + 1);
	longname[NAME_MAX + 1] = '\0';
	for (int keep = 0; keep < 2; keep++) {
		ckc_tag_keep_ok = keep;
		const struct {
			int fd;
			const char *name;
			bool tagged;
		} c[] = {
			{ d, "x.bin", true },          { d, "any", true },
			{ root, "ckc_root_1.bin", true }, { root, "ckc_root_1.txt", false },
			{ tmp, "ckc-one-2.bin", true }, { tmp, "ckc-one-2.txt", false },
			{ d, ".", false },              { d, "..", false },
			{ d, "...", true },             { d, ".x", true },
		};
		for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
			bool one = ckc_tagged_at(c[i].fd, c[i].name, canon);
			cr_assert_eq(one, c[i].tagged, "%s (fd %d, kept %d)", c[i].name, c[i].fd, keep);
			char spelt[NAME_MAX + 8];
			snprintf(spelt, sizeof(spelt), "./%s", c[i].name);
			cr_assert_eq(ckc_tagged_at(c[i].fd, spelt, walked), one, "%s walked", spelt);
			if (one)
				cr_assert_str_eq(canon, walked, "%s joined, walked", c[i].name);
		}
		cr_assert_not(ckc_tagged_at(d, longname, canon), "a name longer than NAME_MAX");
		cr_assert(ckc_tagged_at(d, longname + 1, canon), "a name of NAME_MAX bytes");
	}
	ckc_tag_keep_ok = false;
	close(d);
	close(root);
	close(tmp);
	rmdir(dir);
}

/* The ids the library keeps (ckc_geteuid) are the kernel's, and follow a
 * change of user or group announced as the set*id wrappers announce it. */
Test(tag, kept_ids_follow_a_change_of_identity)
{
	cr_assert_eq(ckc_geteuid(), geteuid());
	cr_assert_eq(ckc_getegid(), getegid());
	cr_assert_eq(ckc_getuid(), getuid());
	cr_assert_eq(ckc_getgid(), getgid());
	if (geteuid() != 0)
		cr_skip_test("a change of the effective ids needs root");
	ckc_ids_changing();
	cr_assert_eq(setegid(65534), 0);
	cr_assert_eq(seteuid(65534), 0);
	uid_t u = ckc_geteuid();
	gid_t g = ckc_getegid();
	cr_assert_eq(seteuid(0), 0);
	cr_assert_eq(setegid(0), 0);
	cr_assert_eq(u, 65534);
	cr_assert_eq(g, 65534);
	cr_assert_eq(ckc_geteuid(), 0);
}
