/* Tagged paths: CKPTCACHE_PATHS' glob patterns, canonicalised once, matched
 * against canonical absolute paths with fnmatch(FNM_PATHNAME); a pattern
 * whose last component is "**" tags everything below its directory. */
#include "config.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "intercept.h"
#include "log.h"
#include "path.h"

typedef struct tag_pat {
	char *glob;      /* canonical pattern */
	size_t lit;      /* length of its literal prefix (no wildcard before) */
	bool subtree;    /* last component "**": everything below glob */
} tag_pat_t;

static tag_pat_t *tag_pats;
static int tag_npats;

/* Replaces every "%r" with the rank. */
static char *tag_expand_rank(const char *p, long rank)
{
	char num[24];
	size_t n = 0, cap = strlen(p) + 1;
	int k = snprintf(num, sizeof(num), "%ld", rank);
	for (const char *q = p; (q = strstr(q, "%r")); q += 2)
		cap += (size_t)k;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	while (*p) {
		if (p[0] == '%' && p[1] == 'r') {
			memcpy(out + n, num, (size_t)k);
			n += (size_t)k;
			p += 2;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
	return out;
}

static int tag_add(const char *raw, long rank)
{
	char canon[PATH_MAX];
	char *p = tag_expand_rank(raw, rank);
	if (!p)
		return -1;
	size_t len = strlen(p);
	bool subtree = len >= 3 && !strcmp(p + len - 3, "/**");
	if (subtree)
		p[len - 3] = '\0';
	int rc = ckc_path_canon(*p ? p : "/", NULL, canon, sizeof(canon));
	free(p);
	if (rc) {
		ckc_error("CKPTCACHE_PATHS: pattern '%s' is not a usable path", raw);
		return -1;
	}
	tag_pat_t *t = realloc(tag_pats, (size_t)(tag_npats + 1) * sizeof(*t));
	if (!t)
		return -1;
	tag_pats = t;
	t = &tag_pats[tag_npats];
	if (!(t->glob = strdup(canon)))
		return -1;
	t->lit = strcspn(canon, "*?[\\");
	t->subtree = subtree;
	tag_npats++;
	return 0;
}

int ckc_tag_load(const char *paths, long rank)
{
	char *copy = strdup(paths ? paths : ""), *save = NULL;

	ckc_tag_free();
	if (!copy)
		return 0;
	for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
		if (*tok)
			tag_add(tok, rank);
	free(copy);
	return tag_npats;
}

void ckc_tag_free(void)
{
	for (int i = 0; i < tag_npats; i++)
		free(tag_pats[i].glob);
	free(tag_pats);
	tag_pats = NULL;
	tag_npats = 0;
}

bool ckc_tag_match(const char *canon)
{
	for (int i = 0; i < tag_npats; i++) {
		const tag_pat_t *t = &tag_pats[i];
		if (strncmp(canon, t->glob, t->lit) != 0)
			continue;
		if (t->subtree) {
			/* the directory itself is not a checkpoint, what is below it is */
			size_t n = strlen(t->glob);
			if (t->lit == n) {
				if (n == 1 ? canon[1] != '\0' : canon[n] == '/' && canon[n + 1])
					return true;
				continue;
			}
			/* a wildcard in the directory part: match each ancestor */
			char tmp[PATH_MAX];
			snprintf(tmp, sizeof(tmp), "%s", canon);
			for (char *s = strrchr(tmp, '/'); s && s > tmp; s = strrchr(tmp, '/')) {
				*s = '\0';
				if (fnmatch(t->glob, tmp, FNM_PATHNAME) == 0)
					return true;
			}
			continue;
		}
		if (fnmatch(t->glob, canon, FNM_PATHNAME) == 0)
			return true;
	}
	return false;
}

bool ckc_tagged_at(int dirfd, const char *path, char *out)
{
	if (!atomic_load_explicit(&ckc_icpt_on, memory_order_relaxed) || ckc_in_vfork_child())
		return false;
	return ckc_tag_path_at(dirfd, path, out);
}

bool ckc_tag_path_at(int dirfd, const char *path, char *out)
{
	char base[PATH_MAX];
	const char *b = NULL;

	if (!path || !*path || ckc_io_guard || tag_npats == 0)
		return false;
	if (path[0] != '/' && dirfd != AT_FDCWD) {
		char link[64];
		if (ckc_vfd_get(dirfd))
			return false; /* not a directory: the real call says so */
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
		ssize_t n = readlink(link, base, sizeof(base) - 1);
		if (n <= 0 || base[0] != '/')
			return false;
		base[n] = '\0';
		b = base;
	}
	/* resolved as the kernel will: a path it refuses is not tagged, and
	 * the real call gives the program the kernel's error */
	if (ckc_path_resolve(path, b, out, PATH_MAX) != 0)
		return false;
	return ckc_tag_match(out);
}

bool ckc_cached_at(int dirfd, const char *path, char *canon)
{
	ckc_stat_t st;

	if (!ckc_tagged_at(dirfd, path, canon))
		return false;
	ckc_enter();
	bool cached = ckc_stat(canon, &st) == 0;
	ckc_leave();
	return cached;
}
