/* CKPTCACHE_PATHS' glob patterns, canonicalised once, matched against
 * canonical absolute paths as fnmatch(FNM_PATHNAME) matches them
 * (ckc_glob_match); a pattern whose last component is "**" tags everything
 * below its directory. The one matcher of the library: the wrappers
 * (intercept/tag.c) and ckptcache doctor use it. */
#include "config.h"

#include <fnmatch.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "path.h"
#include "tagpat.h"
#include "sys.h"

typedef struct tag_pat {
	char *glob;      /* canonical pattern */
	size_t lit;      /* length of its literal prefix (no wildcard before) */
	bool subtree;    /* last component "**": everything below glob */
	const char *last; /* glob's last component; NULL: any name may match */
	char *compbuf;   /* the strings comps point into */
	/* where what follows the literal prefix is one '*' and literal bytes
	 * ("/run/ckpt_*.bin"): those bytes (a match is a name of the prefix's
	 * folder that ends with them), else NULL */
	const char *tail;
	size_t tail_len;
	/* the same of the last component ("*.bin"), else NULL */
	const char *last_tail;
	size_t last_tail_len;
	/* glob's components (split: false where a '/' might sit in a
	 * bracket or be escaped), matched one by one: a path of as many
	 * components matches where each of its components matches the
	 * pattern's (FNM_PATHNAME: no '*' or '?' crosses a '/'), a component
	 * "*tail" by its end, a literal one by its bytes */
	bool split;
	struct tag_comp *comps;
	int ncomps;
	/* the components wholly inside the literal prefix (which a path
	 * matched first), and the offset of the '/' after them */
	int lit_comps;
	size_t lit_off;
} tag_pat_t;

enum { COMP_LIT, COMP_TAIL, COMP_GLOB };
typedef struct tag_comp {
	const char *s; /* the component ("ckpt_*", "*.bin": its tail follows the '*') */
	size_t len;
	int kind;
} tag_comp_t;

/* strcspn and strpbrk, here: the C library's are on pages of its code
 * that a short program never touches otherwise, and the patterns are read
 * at every process's start (each such page a fault there) */
static size_t tag_span(const char *s, const char *reject)
{
	size_t n = 0;
	while (s[n] && !strchr(reject, s[n]))
		n++;
	return n;
}

static bool tag_has_any(const char *s, const char *set)
{
	return s[tag_span(s, set)] != '\0';
}

/* pat is '*' followed by literal bytes with no '/': those bytes, else NULL. */
CKC_START_PATH static const char *star_tail(const char *pat, size_t *len)
{
	if (pat[0] != '*' || tag_has_any(pat + 1, "*?[\\/"))
		return NULL;
	*len = strlen(pat + 1);
	return pat + 1;
}

/* s (of n bytes) ends with tail and holds no '/' (pathname) before it:
 * what "*tail" matches. */
static bool tail_match(const char *s, size_t n, const char *tail, size_t tail_len, bool pathname)
{
	return n >= tail_len && memcmp(s + n - tail_len, tail, tail_len) == 0 &&
	       (!pathname || !memchr(s, '/', n - tail_len));
}

CKC_HOT_DATA static tag_pat_t *tag_pats;
CKC_HOT_DATA static int tag_npats;
CKC_HOT_DATA static bool tag_any_name; /* some pattern may match any last component */

/* The patterns that name a rank ("%r"), any rank in its place: the files
 * of the job's other ranks (ckc_tag_match_other_rank). */
typedef struct {
	char *glob;   /* canonical, without its final subtree part */
	bool subtree; /* it ended in "/" and two stars */
	int comps;    /* its components */
} tag_other_t;
static tag_other_t *tag_others;
CKC_HOT_DATA int ckc_tag_nothers;

/* A glob whose '/' might sit inside a bracket or be escaped cannot be split
 * into components with certainty. */
static bool tag_splittable(const char *g)
{
	return !tag_has_any(g, "[\\");
}

/* strtok_r with one delimiter: the next non-empty run of s (NULL: go on
 * from *save) without sep, ended with a NUL; NULL after the last. (The C
 * library's pulls a page of its code into every process that loads a
 * pattern, which a short program would not touch.) */
CKC_START_PATH static char *tag_token(char *s, char sep, char **save)
{
	char *p = s ? s : *save;
	while (*p == sep)
		p++;
	if (!*p) {
		*save = p;
		return NULL;
	}
	char *end = strchr(p, sep);
	if (end)
		*end++ = '\0';
	else
		end = p + strlen(p);
	*save = end;
	return p;
}

/* Splits t's canonical glob into components (t->comps); leaves t->split
 * false when it cannot. */
static void tag_split(tag_pat_t *t)
{
	size_t n = 0;
	for (const char *p = t->glob; *p; p++)
		n += *p == '/';
	tag_comp_t *c = sys_calloc(n + 1, sizeof(*c));
	char *copy = strdup(t->glob), *save = NULL;
	if (!c || !copy) {
		sys_free(c);
		sys_free(copy);
		return;
	}
	n = 0;
	for (char *tok = tag_token(copy, '/', &save); tok; tok = tag_token(NULL, '/', &save)) {
		size_t tl;
		int kind = star_tail(tok, &tl) ? COMP_TAIL : tag_has_any(tok, "*?") ? COMP_GLOB : COMP_LIT;
		c[n++] = (tag_comp_t){ tok, strlen(tok), kind };
	}
	t->comps = c;
	t->ncomps = (int)n;
	t->compbuf = copy;
	t->split = true;
	/* ("/run/ckpt_*": "run" lies before the prefix's last '/') */
	t->lit_comps = 0;
	t->lit_off = 0;
	for (size_t off = 0; off < t->lit && t->glob[off] == '/';) {
		const char *e = strchrnul(t->glob + off + 1, '/');
		size_t end = (size_t)(e - t->glob);
		if (end >= t->lit || !*e)
			break;
		t->lit_comps++;
		off = t->lit_off = end;
	}
}

/* Replaces every "%r" with the k bytes of num. */
CKC_START_PATH static char *tag_expand(const char *p, const char *num, size_t k)
{
	size_t n = 0, cap = strlen(p) + 1;
	for (const char *q = p; *q; q++)
		if (q[0] == '%' && q[1] == 'r')
			cap += k, q++;
	char *out = sys_malloc(cap);
	if (!out)
		return NULL;
	while (*p) {
		if (p[0] == '%' && p[1] == 'r') {
			memcpy(out + n, num, k);
			n += k;
			p += 2;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
	return out;
}

/* Replaces every "%r" with the rank. */
static char *tag_expand_rank(const char *p, long rank)
{
	char num[24];
	size_t k = rank < 0;
	num[0] = '-';
	k += ckc_path_decimal(num + k, rank < 0 ? 0ull - (unsigned long long)rank : (unsigned long long)rank);
	return tag_expand(p, num, k);
}

/* The canonical form of the pattern p, allocated: NULL with *bad set where
 * it is not a usable path, NULL alone where there was no memory. */
__attribute__((noinline)) CKC_START_PATH static char *tag_canon_walked(const char *p, bool *bad)
{
	char canon[PATH_MAX];
	if (ckc_path_canon(p, NULL, canon, sizeof(canon)) != 0) {
		*bad = true;
		return NULL;
	}
	return strdup(canon);
}

CKC_START_PATH static char *tag_canon(const char *p, bool *bad)
{
	/* an absolute pattern canonical as written, the usual one, is copied:
	 * the walk's buffers (and the calls made below them) reach pages of
	 * the stack that a short program never touches, each a fault at every
	 * process's start */
	return ckc_path_plain(p) ? strdup(p) : tag_canon_walked(p, bad);
}

/* The canonical form of pattern p (allocated, freed here) without a final
 * "/" and two stars, which *subtree tells of: allocated, or NULL (*bad set
 * where p is not a usable path). */
CKC_START_PATH static char *tag_glob_of(char *p, bool *subtree, bool *bad)
{
	size_t len = strlen(p);
	*subtree = len >= 3 && !strcmp(p + len - 3, "/**");
	if (*subtree)
		p[len - 3] = '\0';
	char *glob = tag_canon(*p ? p : "/", bad);
	sys_free(p);
	return glob;
}

/* raw, a pattern with "%r", with every "%r" made "*", kept among the
 * other ranks' patterns. */
CKC_START_PATH static void tag_add_other(const char *raw)
{
	char *p = tag_expand(raw, "*", 1);
	bool subtree, bad = false;
	char *glob = p ? tag_glob_of(p, &subtree, &bad) : NULL;
	tag_other_t *t = glob ? sys_realloc(tag_others, (size_t)(ckc_tag_nothers + 1) * sizeof(*t)) : NULL;
	if (!t) {
		sys_free(glob);
		return;
	}
	tag_others = t;
	t = &tag_others[ckc_tag_nothers++];
	t->glob = glob;
	t->subtree = subtree;
	t->comps = 0;
	for (const char *q = glob; *q; q++)
		t->comps += *q == '/';
}

CKC_TAGGED_PATH bool ckc_tag_match_other_rank(const char *canon)
{
	for (int i = 0; i < ckc_tag_nothers; i++) {
		const tag_other_t *t = &tag_others[i];
		if (!t->subtree) {
			if (ckc_glob_match(t->glob, canon, true))
				return true;
			continue;
		}
		/* below the folder: its components of canon, then more */
		int c = 0;
		const char *q = canon;
		for (; *q; q++)
			if (*q == '/' && ++c > t->comps)
				break;
		size_t len = (size_t)(q - canon);
		char prefix[PATH_MAX];
		if (*q != '/' || !q[1] || len >= sizeof(prefix))
			continue;
		memcpy(prefix, canon, len);
		prefix[len] = '\0';
		if (ckc_glob_match(t->glob, prefix, true))
			return true;
	}
	return false;
}

CKC_START_PATH static int tag_add(const char *raw, long rank)
{
	if (strstr(raw, "%r"))
		tag_add_other(raw);
	char *p = tag_expand_rank(raw, rank);
	if (!p)
		return -1;
	bool subtree, bad = false;
	char *glob = tag_glob_of(p, &subtree, &bad);
	if (!glob) {
		if (bad)
			ckc_error("CKPTCACHE_PATHS: pattern '%s' is not a usable path", raw);
		return -1;
	}
	tag_pat_t *t = sys_realloc(tag_pats, (size_t)(tag_npats + 1) * sizeof(*t));
	if (!t) {
		sys_free(glob);
		return -1;
	}
	tag_pats = t;
	t = &tag_pats[tag_npats];
	t->glob = glob;
	t->lit = tag_span(glob, "*?[\\");
	t->subtree = subtree;
	t->last = NULL;
	t->compbuf = NULL;
	t->split = false;
	t->comps = NULL;
	t->ncomps = 0;
	if (tag_splittable(t->glob)) {
		tag_split(t);
		if (!subtree)
			t->last = strrchr(t->glob, '/') + 1;
	}
	t->tail = star_tail(t->glob + t->lit, &t->tail_len);
	t->last_tail = t->last ? star_tail(t->last, &t->last_tail_len) : NULL;
	tag_any_name |= !t->last;
	tag_npats++;
	return 0;
}

/* Whether some pattern's last component matches the last component of path
 * (true when that cannot be told from the name: ".", "..", a long name). */
CKC_TAGGED_PATH bool ckc_tag_name_may_match(const char *path)
{
	char name[NAME_MAX + 1];
	size_t end = strlen(path);

	if (tag_any_name)
		return true;
	while (end > 1 && path[end - 1] == '/')
		end--;
	const char *slash = memrchr(path, '/', end);
	size_t start = slash ? (size_t)(slash - path) + 1 : 0;
	size_t len = end - start;
	if (len == 0 || len > NAME_MAX || (path[start] == '.' && (len == 1 || (len == 2 && path[start + 1] == '.'))))
		return true;
	name[0] = '\0';
	for (int i = 0; i < tag_npats; i++) {
		const tag_pat_t *t = &tag_pats[i];
		if (t->last_tail) {
			if (tail_match(path + start, len, t->last_tail, t->last_tail_len, false))
				return true;
			continue;
		}
		if (!name[0]) {
			memcpy(name, path + start, len);
			name[len] = '\0';
		}
		if (ckc_glob_match(t->last, name, false))
			return true;
	}
	return false;
}

/* How far canonical directory dir goes along pattern t's components: how
 * many it has (each matching t's), TAG_DEEPER where it has more than t
 * (its first ones matching t's), TAG_OFF where one does not match, or
 * TAG_ANY where that cannot be told (anything below it may match). */
enum { TAG_ANY = -3, TAG_OFF = -2, TAG_DEEPER = -1 };
static int tag_dir_depth(const tag_pat_t *t, const char *dir)
{
	char comp[NAME_MAX + 1];
	int i = 0;

	if (!t->split)
		return TAG_ANY;
	for (const char *p = dir; *p;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		size_t len = (size_t)(strchrnul(p, '/') - p);
		if (i == t->ncomps)
			return TAG_DEEPER;
		if (len > NAME_MAX)
			return TAG_ANY;
		memcpy(comp, p, len);
		comp[len] = '\0';
		if (!ckc_glob_match(t->comps[i].s, comp, false))
			return TAG_OFF;
		i++;
		p += len;
	}
	return i;
}

/* Whether a path below canonical directory dir could match pattern t: dir
 * is an ancestor of what t names (each of its components matches), or lies
 * inside t's subtree. */
static bool tag_dir_may_hold(const tag_pat_t *t, const char *dir)
{
	int d = tag_dir_depth(t, dir);
	/* an ancestor of what t names, or (subtree) its root or below: what
	 * is below it may match; a non-subtree pattern needs at least one
	 * component more */
	return d == TAG_ANY || (d == TAG_DEEPER ? t->subtree : d >= 0 && (t->subtree || d < t->ncomps));
}


/* Whether a name directly in canonical directory dir could match pattern
 * t: dir is the folder of t's last component, or lies in t's subtree. */
static bool tag_dir_may_name(const tag_pat_t *t, const char *dir)
{
	int d = tag_dir_depth(t, dir);
	return d == TAG_ANY || (d == TAG_DEEPER ? t->subtree : d >= 0 && (t->subtree ? d == t->ncomps : d + 1 == t->ncomps));
}

/* Whether no pattern may tag a path below canonical directory dir (names:
 * a name directly in it). */
static bool tag_dir_none(const char *dir, bool names)
{
	for (int i = 0; i < tag_npats; i++)
		if (names ? tag_dir_may_name(&tag_pats[i], dir) : tag_dir_may_hold(&tag_pats[i], dir))
			return false;
	return true;
}

CKC_WARM_PATH bool ckc_tag_dir_holds_none(const char *dir)
{
	return tag_dir_none(dir, false);
}

CKC_WARM_PATH bool ckc_tag_dir_names_none(const char *dir)
{
	return tag_dir_none(dir, true);
}

CKC_WARM_PATH bool ckc_tag_dir_holds_all(const char *dir)
{
	for (int i = 0; i < tag_npats; i++) {
		const tag_pat_t *t = &tag_pats[i];
		size_t n = strlen(t->glob);
		/* a subtree of a literal folder: what ckc_tag_match tags at once */
		if (t->subtree && t->lit == n && strncmp(dir, t->glob, n) == 0 &&
		    (n == 1 || dir[n] == '/' || dir[n] == '\0'))
			return true;
	}
	return false;
}

/* fnmatch(pat, s, pathname ? FNM_PATHNAME : 0) == 0. Literal bytes and '*'
 * (the usual "ckpt_*.bin") are matched here byte by byte: in a multibyte
 * locale glibc's fnmatch converts both strings to wide characters, with an
 * allocation, on every call, a tenth of an untagged du's time; a run of
 * bytes is a run of characters in UTF-8, and '/' is never part of another
 * character. A pattern with '?', brackets or escapes goes to fnmatch once
 * the match reaches one. */
CKC_TAGGED_PATH bool ckc_glob_match(const char *pat, const char *s, bool pathname)
{
	const char *p0 = pat, *s0 = s;
	const char *bp = NULL, *bs = NULL; /* after the last '*', and where it began */
	for (;;) {
		if (*pat == '?' || *pat == '[' || *pat == '\\')
			return fnmatch(p0, s0, pathname ? FNM_PATHNAME : 0) == 0;
		if (*pat == '*') {
			while (*pat == '*')
				pat++;
			bp = pat;
			bs = s;
			continue;
		}
		if (*s && *pat == *s) {
			pat++;
			s++;
			continue;
		}
		if (!*s && !*pat)
			return true;
		/* the last '*' takes one byte more, never a '/' of a path */
		if (!bp || !*bs || (pathname && *bs == '/'))
			return false;
		s = ++bs;
		pat = bp;
	}
}

/* One component c against the n bytes at s: 1, 0, or -1 (not told so). */
CKC_TAGGED_PATH static int tag_comp_match(const tag_comp_t *c, const char *s, size_t n)
{
	if (c->kind == COMP_LIT)
		return n == c->len && memcmp(s, c->s, n) == 0;
	if (c->kind == COMP_TAIL)
		return tail_match(s, n, c->s + 1, c->len - 1, false);
	char comp[NAME_MAX + 1];
	if (n > NAME_MAX)
		return -1;
	memcpy(comp, s, n);
	comp[n] = '\0';
	return ckc_glob_match(c->s, comp, false);
}

/* Canonical absolute path canon against t's components (t->comps): what
 * ckc_glob_match(t->glob, canon, true) answers, as both have single
 * slashes between their components; -1 where it cannot be told so. */
CKC_TAGGED_PATH static int tag_comps_match(const tag_pat_t *t, const char *canon)
{
	const char *p = canon + t->lit_off;
	for (int i = t->lit_comps; i < t->ncomps; i++) {
		if (*p != '/')
			return 0; /* fewer components than the pattern */
		p++;
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		int m = tag_comp_match(&t->comps[i], p, n);
		if (m <= 0)
			return m;
		p = e;
	}
	return *p == '\0';
}

/* ckc_tag_match, pattern by pattern against the whole path. */
CKC_TAGGED_PATH static bool tag_match_whole(const char *canon)
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
				if (ckc_glob_match(t->glob, tmp, true))
					return true;
			}
			continue;
		}
		/* the prefix matched: the rest of the pattern against the rest
		 * (component by component where the pattern could be split) */
		if (t->tail) {
			if (tail_match(canon + t->lit, strlen(canon + t->lit), t->tail, t->tail_len, true))
				return true;
			continue;
		}
		int m = t->split && t->ncomps ? tag_comps_match(t, canon) : -1;
		if (m < 0)
			m = ckc_glob_match(t->glob + t->lit, canon + t->lit, true);
		if (m)
			return true;
	}
	return false;
}

/* What the patterns say of the names directly in one folder: the patterns
 * a name there may match (each of their components but the last matches
 * the folder's), whether every name there is tagged (a subtree pattern's),
 * or that some pattern must be matched against the whole path. */
#define TAG_PLAN_PATS 64
typedef struct tag_plan {
	uint64_t maybe;
	bool all;
	bool whole;
} tag_plan_t;

/* Whether canonical folder dir (dl bytes) or one of its ancestors (the
 * root aside) matches subtree pattern t's folder. Out of line: the copy
 * of dir is on the stack only for such a pattern. */
__attribute__((noinline)) static bool tag_subtree_holds(const tag_pat_t *t, const char *dir, size_t dl)
{
	char tmp[PATH_MAX];
	bool all = false;
	memcpy(tmp, dir, dl + 1);
	for (size_t end = dl; end > 0 && !all;) {
		tmp[end] = '\0';
		all = ckc_glob_match(t->glob, tmp, true);
		while (end > 0 && tmp[--end] != '/')
			;
	}
	return all;
}

/* The plan of canonical folder dir (dl bytes, NUL after them; 0: the
 * root). */
static void tag_plan_make(const char *dir, size_t dl, tag_plan_t *pl)
{
	pl->maybe = 0;
	pl->all = false;
	pl->whole = tag_npats > TAG_PLAN_PATS;
	for (int i = 0; i < tag_npats && !pl->whole; i++) {
		const tag_pat_t *t = &tag_pats[i];
		if (t->subtree) {
			size_t n = strlen(t->glob);
			if (t->lit == n) {
				/* a literal folder: every name at it or below it */
				if (n == 1 || (dl >= n && memcmp(dir, t->glob, n) == 0 && (dl == n || dir[n] == '/')))
					pl->all = true;
			} else if (t->lit > dl) {
				pl->whole = true; /* its prefix reaches into the name */
			} else if (strncmp(dir, t->glob, t->lit) == 0) {
				pl->all = tag_subtree_holds(t, dir, dl);
			}
			continue;
		}
		if (!t->split || t->ncomps == 0) {
			pl->whole = true;
			continue;
		}
		/* the folder has one component fewer than the pattern, and
		 * each matches */
		const char *p = dir;
		int k = 0, m = 1;
		while (m > 0 && *p == '/' && k < t->ncomps - 1) {
			const char *e = strchrnul(p + 1, '/');
			m = tag_comp_match(&t->comps[k++], p + 1, (size_t)(e - p - 1));
			p = e;
		}
		if (m < 0)
			pl->whole = true;
		else if (m > 0 && *p == '\0' && k == t->ncomps - 1)
			pl->maybe |= 1ull << i;
	}
}

/* The plan of this thread's last folder: each open of a loop over a
 * folder's files matches its name alone. seq is odd while the plan is
 * made: a signal handler that looks meanwhile matches whole paths, and
 * one that made another plan while this thread read it (seq moved on)
 * has this thread match whole paths too. */
#define TAG_MEMO_DIR 256
CKC_HOT_DATA static unsigned tag_gen = 1; /* moves on with each load of the patterns (0: no plan) */
static __thread struct tag_memo {
	unsigned seq, gen;
	size_t len;
	tag_plan_t plan;
	char dir[TAG_MEMO_DIR];
} tag_memo;

/* ckc_tag_match of canonical canon whose last '/' is at slash, followed by
 * a name of nl bytes, by the plan of its folder: made where it is another
 * folder than this thread's last (known: -1 instead, not told). */
CKC_TAGGED_PATH static int tag_plan_match(const char *canon, const char *slash, size_t nl, bool known)
{
	if (nl == 0 || tag_npats == 0 || (size_t)(slash - canon) >= TAG_MEMO_DIR)
		return known ? -1 : tag_match_whole(canon);
	struct tag_memo *m = &tag_memo;
	size_t dl = (size_t)(slash - canon);
	unsigned seq = m->seq;
	atomic_signal_fence(memory_order_seq_cst);
	if (seq & 1)
		return known ? -1 : tag_match_whole(canon);
	tag_plan_t plan;
	if (m->gen == tag_gen && m->len == dl && memcmp(m->dir, canon, dl) == 0) {
		plan = m->plan;
		atomic_signal_fence(memory_order_seq_cst);
		if (m->seq != seq)
			return known ? -1 : tag_match_whole(canon);
	} else if (known) {
		return -1;
	} else {
		m->seq = seq + 1;
		atomic_signal_fence(memory_order_seq_cst);
		memcpy(m->dir, canon, dl);
		m->dir[dl] = '\0';
		m->len = dl;
		m->gen = tag_gen;
		tag_plan_make(m->dir, dl, &m->plan);
		plan = m->plan;
		atomic_signal_fence(memory_order_seq_cst);
		m->seq = seq + 2;
	}
	if (plan.whole)
		return tag_match_whole(canon);
	if (plan.all)
		return 1;
	const char *name = slash + 1;
	for (uint64_t b = plan.maybe; b; b &= b - 1) {
		const tag_pat_t *t = &tag_pats[__builtin_ctzll(b)];
		int r = tag_comp_match(&t->comps[t->ncomps - 1], name, nl);
		if (r < 0)
			return tag_match_whole(canon);
		if (r)
			return 1;
	}
	return 0;
}

CKC_TAGGED_PATH bool ckc_tag_match(const char *canon)
{
	const char *slash = strrchr(canon, '/');
	return slash ? tag_plan_match(canon, slash, strlen(slash + 1), false) : tag_match_whole(canon);
}

CKC_TAGGED_PATH int ckc_tag_match_known_folder(const char *path)
{
	const char *slash = strrchr(path, '/');
	/* a name the kernel takes as a file's, in a folder whose canonical
	 * path path's is (the last one looked at): path is canonical */
	if (!slash || slash == path || (slash[1] == '.' && (!slash[2] || (slash[2] == '.' && !slash[3]))))
		return -1;
	size_t nl = strlen(slash + 1);
	return nl > NAME_MAX ? -1 : tag_plan_match(path, slash, nl, true);
}


CKC_START_PATH int ckc_tagpat_load(const char *paths, long rank)
{
	char *copy = strdup(paths ? paths : ""), *save = NULL;

	ckc_tagpat_free();
	if (!copy)
		return 0;
	for (char *tok = tag_token(copy, ':', &save); tok; tok = tag_token(NULL, ':', &save))
		tag_add(tok, rank);
	sys_free(copy);
	tag_gen++;
	return tag_npats;
}

CKC_START_PATH int ckc_tagpat_count(void)
{
	return tag_npats;
}

CKC_START_PATH void ckc_tagpat_free(void)
{
	if (!tag_pats && !ckc_tag_nothers)
		return; /* (the first load: nothing to free; the counts are on the
			  * wrappers' page, tag_others is not) */
	for (int i = 0; i < tag_npats; i++) {
		sys_free(tag_pats[i].glob);
		sys_free(tag_pats[i].compbuf);
		sys_free(tag_pats[i].comps);
	}
	sys_free(tag_pats);
	tag_pats = NULL;
	tag_npats = 0;
	for (int i = 0; i < ckc_tag_nothers; i++)
		sys_free(tag_others[i].glob);
	sys_free(tag_others);
	tag_others = NULL;
	ckc_tag_nothers = 0;
	tag_any_name = false;
	tag_gen++;
}
