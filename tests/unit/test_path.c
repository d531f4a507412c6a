/* Canonical absolute paths (object and hint keys). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "path.h"

static void check(const char *in, const char *base, const char *want)
{
	char out[PATH_MAX];
	cr_assert_eq(ckc_path_canon(in, base, out, sizeof(out)), 0, "%s", in);
	cr_assert_str_eq(out, want, "canon(%s, %s)", in, base ? base : "cwd");
}

Test(path, absolute)
{
	check("/a/b/c", NULL, "/a/b/c");
	check("//a///b/", NULL, "/a/b");
	check("/a/./b/../c", NULL, "/a/c");
	check("/../..", NULL, "/");
	check("/", NULL, "/");
	check("/a/b/../../..", NULL, "/");
}

Test(path, relative_to_base)
{
	check("x.bin", "/run/42", "/run/42/x.bin");
	check("../x.bin", "/run/42", "/run/x.bin");
	check("./sub/./x", "/run//42/", "/run/42/sub/x");
	check("x", "/", "/x");
	check("..", "/", "/");
}

Test(path, relative_to_cwd)
{
	char cwd[PATH_MAX], want[PATH_MAX + 8];
	cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "%s/f", strcmp(cwd, "/") ? cwd : "");
	check("f", NULL, want);
}

Test(path, errors)
{
	char out[8];
	cr_assert_eq(ckc_path_canon("", NULL, out, sizeof(out)), -EINVAL);
	cr_assert_eq(ckc_path_canon(NULL, NULL, out, sizeof(out)), -EINVAL);
	cr_assert_eq(ckc_path_canon("/abcdefghij", NULL, out, sizeof(out)), -ENAMETOOLONG);
	cr_assert_eq(ckc_path_canon("/abcdef", NULL, out, sizeof(out)), 0);
}

Test(path, dirname)
{
	char out[PATH_MAX];
	cr_assert_eq(ckc_path_dirname("/a/b/c", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/a/b");
	cr_assert_eq(ckc_path_dirname("/c", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/");
	cr_assert_eq(ckc_path_dirname("/a/b", out, 2), -ENAMETOOLONG);
}

/* ---- ".." as the kernel takes it ----------------------------------------- */

static char rdir[64];

static void resolve_setup(void)
{
	snprintf(rdir, sizeof(rdir), "/tmp/ckc-path-XXXXXX");
	cr_assert_not_null(mkdtemp(rdir));
	char p[PATH_MAX];
	const char *dirs[] = { "ck", "ck/deep", "ck/deep/sub", "other", "other/in" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", rdir, dirs[i]);
		cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
	}
	struct {
		const char *target, *name;
	} links[] = {
		{ "deep/sub", "ck/lnk" },		/* relative */
		{ NULL, "ck/abs" },			/* absolute: rdir/other/in */
		{ "lnk", "ck/chain" },			/* a link to a link */
		{ "loop2", "ck/loop1" },		/* a loop */
		{ "loop1", "ck/loop2" },
	};
	char abs[PATH_MAX];
	snprintf(abs, sizeof(abs), "%s/other/in", rdir);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", rdir, links[i].name);
		cr_assert_eq(symlink(links[i].target ? links[i].target : abs, p), 0, "%s", p);
	}
	snprintf(p, sizeof(p), "%s/ck/file", rdir);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fclose(f);
}

static void resolve_teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", rdir);
	cr_assert_eq(system(cmd), 0);
}

/* resolve(rdir/in) must be rdir/want, or fail with err */
static void resolved(const char *in, const char *want, int err)
{
	char path[PATH_MAX], out[PATH_MAX], exp[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", rdir, in);
	int rc = ckc_path_resolve(path, NULL, out, sizeof(out));
	cr_assert_eq(rc, err, "%s: %d", in, rc);
	if (err)
		return;
	snprintf(exp, sizeof(exp), "%s%s%s", rdir, *want ? "/" : "", want);
	cr_assert_str_eq(out, exp, "%s", in);
}

TestSuite(resolve, .init = resolve_setup, .fini = resolve_teardown);

Test(resolve, dotdot_after_a_link_is_taken_from_its_target)
{
	resolved("ck/lnk/../x.bin", "ck/deep/x.bin", 0);
	resolved("ck/chain/../x.bin", "ck/deep/x.bin", 0);
	resolved("ck/abs/../x.bin", "other/x.bin", 0);
	resolved("ck/lnk/../../x.bin", "ck/x.bin", 0);
	resolved("ck/abs/../../ck/lnk/../y", "ck/deep/y", 0);
}

Test(resolve, links_not_followed_by_dotdot_are_kept)
{
	resolved("ck/lnk/x.bin", "ck/lnk/x.bin", 0);
	resolved("ck/./deep//sub/../x", "ck/deep/x", 0);
	resolved("ck/deep/sub/../../x", "ck/x", 0);
}

Test(resolve, what_the_kernel_refuses_fails)
{
	resolved("ck/none/../x.bin", NULL, -ENOENT);
	resolved("ck/file/../x.bin", NULL, -ENOTDIR);
	resolved("ck/loop1/../x.bin", NULL, -ELOOP);
	/* a name longer than NAME_MAX, as the last name, inside, or joined to
	 * a canonical folder */
	char longp[NAME_MAX + 16], out[PATH_MAX];
	snprintf(longp, sizeof(longp), "/t/%0*d", NAME_MAX + 1, 0);
	cr_assert_eq(ckc_path_resolve(longp, NULL, out, sizeof(out)), -ENAMETOOLONG);
	cr_assert_eq(ckc_path_resolve_in(longp + 3, "/t", out, sizeof(out)), -ENAMETOOLONG);
	strcat(longp, "/x");
	cr_assert_eq(ckc_path_resolve(longp, NULL, out, sizeof(out)), -ENAMETOOLONG);
	snprintf(longp, sizeof(longp), "/t/%0*d", NAME_MAX, 0);
	cr_assert_eq(ckc_path_resolve(longp, NULL, out, sizeof(out)), 0);
	cr_assert_eq(ckc_path_resolve_in(longp + 3, "/t", out, sizeof(out)), 0);
}

Test(resolve, relative_paths_and_keys)
{
	char base[PATH_MAX], out[PATH_MAX], want[PATH_MAX];
	snprintf(base, sizeof(base), "%s/ck", rdir);
	cr_assert_eq(ckc_path_resolve("lnk/../x", base, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/ck/deep/x", rdir);
	cr_assert_str_eq(out, want);
	/* a key for a path the kernel would refuse: the lexical form */
	cr_assert_eq(ckc_path_key("none/../x", base, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/ck/x", rdir);
	cr_assert_str_eq(out, want);
	cr_assert_eq(ckc_path_key("lnk/../x", base, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/ck/deep/x", rdir);
	cr_assert_str_eq(out, want);
}

Test(resolve, a_canonical_base_is_taken_as_it_is)
{
	char base[PATH_MAX], out[PATH_MAX], want[PATH_MAX];
	snprintf(base, sizeof(base), "%s/ck", rdir);
	cr_assert_eq(ckc_path_resolve_in("lnk/../x", base, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/ck/deep/x", rdir);
	cr_assert_str_eq(out, want);
	cr_assert_eq(ckc_path_resolve_in("./a//b/", base, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/ck/a/b", rdir);
	cr_assert_str_eq(out, want);
	cr_assert_eq(ckc_path_resolve_in("x", "/", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/x");
	cr_assert_eq(ckc_path_resolve_in("..", "/", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/");
	cr_assert_eq(ckc_path_resolve_in("/abs/./y", base, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/abs/y");
	cr_assert_eq(ckc_path_resolve_in("none/../x", base, out, sizeof(out)), -ENOENT);
	/* too long for out, with the base or with the name */
	cr_assert_eq(ckc_path_resolve_in("x", base, out, strlen(base)), -ENAMETOOLONG);
	cr_assert_eq(ckc_path_resolve_in("xy", "/a", out, 4), -ENAMETOOLONG);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

Test(path, hash_tells_paths_apart)
{
	/* every length around the eight-byte steps, and paths that differ in
	 * one byte anywhere, or only in length (a trailing NUL-free tail) */
	enum { N = 4096 };
	static uint64_t h[N];
	char p[160];
	int n = 0;
	for (int len = 1; len <= 40; len++) {
		memset(p, 'a', (size_t)len);
		p[len] = '\0';
		h[n++] = ckc_path_hash(p);
		cr_assert_eq(ckc_path_hash(p), h[n - 1], "the same path, the same hash");
		for (int at = 0; at < len && n < N; at++) {
			p[at] = 'b';
			h[n++] = ckc_path_hash(p);
			p[at] = 'a';
		}
	}
	for (int i = 0; n < N; i++) {
		snprintf(p, sizeof(p), "/scratch/run/step_%04d/rank_%04d.bin", i / 100, i % 100);
		h[n++] = ckc_path_hash(p);
	}
	qsort(h, N, sizeof(h[0]), u64_cmp);
	for (int i = 1; i < N; i++)
		cr_assert_neq(h[i], h[i - 1], "two of %d paths share a hash", N);
}

Test(path, hash_values_are_the_node_tables_layout)
{
	/* the node's tables are keyed by these values in every process of
	 * the node, whatever its build: a change to them needs new table
	 * names (node.c), which this catches */
	cr_assert_eq(ckc_path_hash("/"), 0x64777e19c505223cull);
	cr_assert_eq(ckc_path_hash("/dev/shm/a"), 0x23e048aab5c03b62ull);
	cr_assert_eq(ckc_path_hash("/scratch/run/ckpt_0001.bin"), 0xd38a4ca023b8694cull);
}

Test(resolve, a_plain_absolute_path_is_its_own_canonical_form)
{
	/* an absolute path with no ".", "..", repeated or trailing '/' is taken
	 * as it is; every other spelling is walked: both give what the lexical
	 * canonicalisation gives where no link is involved */
	const char *pieces[] = { "/", "a", "b", ".", "..", "//", "/.", "./", "x.bin", "/..", "..." };
	unsigned seed = 4242;
	char path[128], a[PATH_MAX], b[PATH_MAX];
	int plain = 0;
	for (int i = 0; i < 50000; i++) {
		strcpy(path, "/tmp/ckc-none");
		int n = 1 + (int)(rand_r(&seed) % 6);
		for (int k = 0; k < n; k++)
			strcat(path, pieces[rand_r(&seed) % (i % 2 ? 3u : 11u)]);
		int ra = ckc_path_resolve(path, NULL, a, sizeof(a));
		int rb = ckc_path_canon(path, NULL, b, sizeof(b));
		if (!strstr(path, "..")) {
			/* nothing for the kernel to refuse: the two agree */
			cr_assert_eq(ra, 0, "%s", path);
			cr_assert_eq(rb, 0, "%s", path);
			cr_assert_str_eq(a, b, "resolve(%s)", path);
		}
		plain += ra == 0 && !strcmp(a, path);
	}
	cr_assert_gt(plain, 1000, "too few plain paths to say anything");
	/* and the length is checked */
	char small[8];
	cr_assert_eq(ckc_path_resolve("/abcdefgh", NULL, small, sizeof(small)), -ENAMETOOLONG);
	cr_assert_eq(ckc_path_resolve("/abcdef", NULL, small, sizeof(small)), 0);
	cr_assert_str_eq(small, "/abcdef");
}

/* ckc_path_plain: true exactly where the lexical canonical form is the
 * path itself (a pattern of CKPTCACHE_PATHS is then taken as written). */
Test(path, plain_is_exactly_its_own_canonical_form)
{
	const char *pieces[] = { "/", "a", "b*", ".", "..", "//", "/.", "./", "x.bin", "/..", "...", ".x" };
	unsigned seed = 77;
	char path[128], canon[PATH_MAX];
	int plain = 0, not_plain = 0;
	for (int i = 0; i < 50000; i++) {
		strcpy(path, i % 3 ? "/tmp" : "");
		int n = 1 + (int)(rand_r(&seed) % 6);
		for (int k = 0; k < n; k++)
			strcat(path, pieces[rand_r(&seed) % 12u]);
		if (!path[0])
			continue;
		bool same = ckc_path_canon(path, "/base", canon, sizeof(canon)) == 0 && !strcmp(canon, path);
		cr_assert_eq(ckc_path_plain(path), same, "plain(%s) is %d, its canonical form %s", path,
			     ckc_path_plain(path), canon);
		plain += same;
		not_plain += !same;
	}
	cr_assert_gt(plain, 1000, "too few plain paths to say anything");
	cr_assert_gt(not_plain, 1000, "too few other paths to say anything");
	/* a name longer than NAME_MAX is not taken as written */
	char longp[NAME_MAX + 8] = "/";
	memset(longp + 1, 'n', NAME_MAX + 1);
	longp[NAME_MAX + 2] = '\0';
	cr_assert(!ckc_path_plain(longp));
	longp[NAME_MAX + 1] = '\0';
	cr_assert(ckc_path_plain(longp));
}

Test(path, decimal_numbers)
{
	char b[21];
	static const struct {
		unsigned long long v;
		const char *s;
	} want[] = { { 0, "0" }, { 7, "7" }, { 10, "10" }, { 4294967295ull, "4294967295" },
		     { 18446744073709551615ull, "18446744073709551615" } };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		size_t n = ckc_path_decimal(b, want[i].v);
		b[n] = '\0';
		cr_assert_str_eq(b, want[i].s);
	}
}
