/* Path canonicalisation shared by the engine, the wrappers and the hint
 * parser: lexical, and resolved the way the kernel walks ".." after a
 * symbolic link. */
#include "config.h"

#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "io.h"
#include "sys.h"

/* Symbolic links followed in one resolution, as the kernel allows. */
#define PATH_MAX_LINKS 40

static int path_walk(const char *path, const char *base, bool base_canon, char *out, size_t outlen, int *links);
static int path_follow_last(char *out, size_t *n, size_t outlen, int *links);

CKC_START_PATH int ckc_path_canon(const char *path, const char *base, char *out, size_t outlen)
{
	return path_walk(path, base, false, out, outlen, NULL);
}

CKC_TAGGED_PATH int ckc_path_dirname(const char *canon, char *out, size_t outlen)
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

/* Makes the prefix out[0..*n) what the kernel would stand on before a "..":
 * the directory it names, with a symbolic link as its last component
 * replaced by the link's target (again and again). Returns 0, or the -errno
 * the kernel's walk would fail with. */
static int path_follow_last(char *out, size_t *n, size_t outlen, int *links)
{
	for (;;) {
		struct stat st;
		char target[PATH_MAX];
		out[*n] = '\0';
		if (sys_lstat(*n ? out : "/", &st) != 0)
			return -errno;
		if (S_ISDIR(st.st_mode))
			return 0;
		if (!S_ISLNK(st.st_mode))
			return -ENOTDIR;
		if (++*links > PATH_MAX_LINKS)
			return -ELOOP;
		/* the system call: readlink is one of the wrappers */
		long k = ckc_syscall6(SYS_readlinkat, AT_FDCWD, (long)out, (long)target, sizeof(target) - 1, 0, 0);
		if (k <= 0)
			return k == 0 ? -ENOENT : (int)k;
		target[k] = '\0';
		/* a relative target is taken from the link's folder */
		char *dir = sys_malloc(*n + 2);
		if (!dir)
			return -ENOMEM;
		int rc = ckc_path_dirname(out, dir, *n + 2);
		if (!rc)
			rc = path_walk(target, dir, false, out, outlen, links);
		sys_free(dir);
		if (rc)
			return rc;
		*n = strcmp(out, "/") ? strlen(out) : 0;
	}
}

/* The canonical form of path (relative to base, NULL: the working
 * directory; base_canon: base is canonical already, as the kernel names a
 * folder) in out: lexical when links is NULL, else with ".." taken from
 * the directory the path so far leads to (links counts the symbolic links
 * followed). */
CKC_START_PATH static int path_walk(const char *path, const char *base, bool base_canon, char *out, size_t outlen,
				    int *links)
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
		if (base_canon && base[0] == '/') {
			n = strlen(base);
			if (n + 1 > outlen)
				return -ENAMETOOLONG;
			memcpy(out, base, n + 1);
		} else {
			int rc = path_walk(base, "/", false, out, outlen, NULL);
			if (rc)
				return rc;
			n = strlen(out);
		}
		if (n == 1)
			n = 0; /* root: components append after the empty prefix */
	}
	/* out[0..n) is a canonical prefix without a trailing slash. */
	for (const char *p = path; *p;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchrnul(p, '/');
		size_t len = (size_t)(e - p);
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			int rc = links ? path_follow_last(out, &n, outlen, links) : 0;
			if (rc)
				return rc;
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--; /* drop the slash too */
		} else if (!(len == 1 && p[0] == '.')) {
			/* as the kernel: no name longer than NAME_MAX */
			if (len > NAME_MAX || n + 1 + len + 1 > outlen)
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

/* path is absolute, with no "." or ".." component, no repeated or trailing
 * '/' and no name longer than NAME_MAX: canonical as it is (*len: its
 * length). */
CKC_START_PATH static bool path_plain(const char *path, size_t *len)
{
	if (path[0] != '/')
		return false;
	for (const char *q = path;;) { /* q: a '/' */
		const char *c = q + 1;
		if (*c == '/' || (!*c && q != path))
			return false;
		if (c[0] == '.' && (!c[1] || c[1] == '/' || (c[1] == '.' && (!c[2] || c[2] == '/'))))
			return false;
		const char *e = strchrnul(c, '/');
		if (e - c > NAME_MAX)
			return false;
		if (!*e) {
			*len = (size_t)(e - path);
			return true;
		}
		q = e;
	}
}

CKC_START_PATH bool ckc_path_plain(const char *path)
{
	size_t n;
	return path_plain(path, &n);
}

CKC_START_PATH int ckc_path_resolve(const char *path, const char *base, char *out, size_t outlen)
{
	size_t n;
	if (path && path_plain(path, &n)) {
		if (n + 1 > outlen)
			return -ENAMETOOLONG;
		memcpy(out, path, n + 1);
		return 0;
	}
	int links = 0;
	return path_walk(path, base, false, out, outlen, &links);
}

CKC_TAGGED_PATH int ckc_path_join_name(char *out, size_t dirlen, const char *name, size_t namelen, size_t outlen)
{
	if (dirlen == 1)
		dirlen = 0; /* the root */
	if (namelen > NAME_MAX || dirlen + 1 + namelen + 1 > outlen)
		return -ENAMETOOLONG;
	out[dirlen] = '/';
	memcpy(out + dirlen + 1, name, namelen + 1);
	return 0;
}

CKC_WARM_PATH int ckc_path_resolve_in(const char *path, const char *canon_base, char *out, size_t outlen)
{
	/* one name (a walker's open of each name at its folder's descriptor):
	 * joined to the folder, with nothing to walk */
	if (path[0] && path[0] != '/' && canon_base[0] == '/' && !strchr(path, '/') && strcmp(path, ".") &&
	    strcmp(path, "..")) {
		size_t bl = strlen(canon_base);
		if (bl >= outlen)
			return -ENAMETOOLONG;
		memcpy(out, canon_base, bl);
		return ckc_path_join_name(out, bl, path, strlen(path), outlen);
	}
	int links = 0;
	return path_walk(path, canon_base, true, out, outlen, &links);
}

CKC_TAGGED_PATH int ckc_path_key(const char *path, const char *base, char *out, size_t outlen)
{
	int rc = ckc_path_resolve(path, base, out, outlen);
	if (rc && rc != -ENAMETOOLONG && rc != -EINVAL)
		rc = ckc_path_canon(path, base, out, outlen);
	return rc;
}


CKC_START_PATH size_t ckc_path_decimal(char *out, unsigned long long v)
{
	char rev[20];
	size_t m = 0, k = 0;
	do {
		rev[m++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (m)
		out[k++] = rev[--m];
	return k;
}

CKC_TAGGED_PATH uint64_t ckc_path_hash(const char *path)
{
	const size_t len = strlen(path);
	const char *end = path + len;
	uint64_t h = 0x9e3779b97f4a7c15ull, w = 0;
	for (; end - path >= 8; path += 8) {
		memcpy(&w, path, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	if (path != end) {
		if (len >= 8) {
			memcpy(&w, end - 8, 8); /* the last eight bytes, some hashed already */
		} else {
			w = 0;
			for (size_t i = 0; i < len; i++)
				w |= (uint64_t)(unsigned char)path[i] << (8 * i);
		}
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	/* the length last, after the bytes are mixed: paths that differ in
	 * length and in a byte do not cancel out */
	h = (h ^ len) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 32);
}
