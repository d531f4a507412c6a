/* Canonical absolute paths (object and hint keys). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
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
