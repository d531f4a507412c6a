/* Lexical path canonicalisation shared by the engine and the hint parser. */
#include "config.h"

#include "path.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

int ckc_path_canon(const char *path, const char *base, char *out, size_t outlen)
{
	char cwd[PATH_MAX];
	size_t n = 0;

	if (!path || !*path)
		return -EINVAL;
	if (outlen < 2)
		return -ENAMETOOLONG;
	if (path[0] != '/') {
		if (!base) {
			if (!getcwd(cwd, sizeof(cwd)))
				return -errno;
			base = cwd;
		}
		int rc = ckc_path_canon(base, "/", out, outlen);
		if (rc)
			return rc;
		n = strlen(out);
		if (n == 1)
			n = 0; /* root: components append after the empty prefix */
	}
	/* out[0..n) is a canonical prefix without a trailing slash. */
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = p;
		while (*e && *e != '/')
			e++;
		size_t len = (size_t)(e - p);
		if (len == 1 && p[0] == '.') {
			/* nothing */
		} else if (len == 2 && p[0] == '.' && p[1] == '.') {
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--; /* drop the slash too */
		} else {
			if (n + 1 + len + 1 > outlen)
				return -ENAMETOOLONG;
			out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p = e;
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = '\0';
	return 0;
}

int ckc_path_dirname(const char *canon, char *out, size_t outlen)
{
	const char *slash = strrchr(canon, '/');
	size_t len = slash ? (size_t)(slash - canon) : 0;

	if (len == 0)
		len = 1; /* "/" */
	if (len + 1 > outlen)
		return -ENAMETOOLONG;
	memcpy(out, canon, len);
	out[len] = '\0';
	return 0;
}
