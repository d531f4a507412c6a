/* Hint file format v1: checking and splitting a line, expanding a printf
 * range one entry at a time (never allocating per range), and the reader
 * that follows a growing file through the ckc_io table. */
#include "config.h"

#include "hintfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io.h"
#include "path.h"
#include "sys.h"

#define HINT_CHUNK (64 * 1024)
#define HINT_MSG_MAX 512
/* How much of a user's text a message quotes. */
#define HINT_QUOTE 160

/* hint_parse's results besides a negative value from emit. */
enum { HINT_DONE = 0, HINT_BAD = 1 };

static const char hint_flagset[] = "-0 +#";

/* A line's path split around its one conversion: lit holds the literal text
 * (with %r and %% already resolved), the conversion goes at pre_len. */
struct hint_tmpl {
	char lit[PATH_MAX];
	size_t pre_len;
	size_t lit_len;
	int nconv;
	bool is_signed;
	size_t conv_off;	/* where the conversion is in the line's path */
	size_t conv_len;
	char fmt[32];		/* the conversion rewritten with "ll" */
};

struct hint_range {
	uint64_t a, b, step;
};

static void hint_msg(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void hint_msg(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void hint_msg_clear(char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
}

static inline bool hint_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static inline bool hint_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Returns the offset of the first byte that does not start a well-formed
 * UTF-8 sequence (overlong forms, surrogates and values past U+10FFFF are
 * refused), or n when all of s is valid. */
static size_t hint_utf8_bad(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i];
		unsigned lo = 0x80, hi = 0xbf;
		size_t need;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
		} else if (c == 0xe0) {
			need = 2;
			lo = 0xa0;
		} else if (c == 0xed) {
			need = 2;
			hi = 0x9f;
		} else if (c >= 0xe1 && c <= 0xef) {
			need = 2;
		} else if (c == 0xf0) {
			need = 3;
			lo = 0x90;
		} else if (c == 0xf4) {
			need = 3;
			hi = 0x8f;
		} else if (c >= 0xf1 && c <= 0xf3) {
			need = 3;
		} else {
			return i;
		}
		if (n - i - 1 < need)
			return i;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return i;
		for (size_t k = 2; k <= need; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
		i += need + 1;
	}
	return n;
}

/* Reads decimal digits at t[*i]; sets *over when the value passes
 * INT64_MAX. Returns false when there is no digit. */
static bool hint_num(const char *t, size_t n, size_t *i, uint64_t *v, bool *over)
{
	size_t start = *i;

	*v = 0;
	while (*i < n && hint_digit(t[*i])) {
		uint64_t d = (uint64_t)(t[*i] - '0');
		if (*v > ((uint64_t)INT64_MAX - d) / 10)
			*over = true;
		else
			*v = *v * 10 + d;
		(*i)++;
	}
	return *i > start;
}

/* Returns 1 when t is "A..B" or "A..B:S" (values in r), 0 for any other
 * shape, -ERANGE when the shape is right but a number passes INT64_MAX. */
static int hint_range_parse(const char *t, size_t n, struct hint_range *r)
{
	bool over = false;
	size_t i = 0;

	r->step = 1;
	if (!hint_num(t, n, &i, &r->a, &over))
		return 0;
	if (n - i < 2 || t[i] != '.' || t[i + 1] != '.')
		return 0;
	i += 2;
	if (!hint_num(t, n, &i, &r->b, &over))
		return 0;
	if (i < n) {
		if (t[i] != ':')
			return 0;
		i++;
		if (!hint_num(t, n, &i, &r->step, &over))
			return 0;
	}
	if (i != n)
		return 0;
	return over ? -ERANGE : 1;
}

/* True when p has a '%' that is neither %% nor %r: the user meant a pattern,
 * so a malformed last token is a bad range rather than part of the path. */
static bool hint_has_conv(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%')
			continue;
		if (i + 1 < n && (p[i + 1] == '%' || p[i + 1] == 'r')) {
			i++;
			continue;
		}
		return true;
	}
	return false;
}

static bool hint_lit_add(struct hint_tmpl *t, const char *s, size_t n)
{
	if (n >= sizeof(t->lit) - t->lit_len)
		return false;
	memcpy(t->lit + t->lit_len, s, n);
	t->lit_len += n;
	return true;
}

/* Splits the path p (n bytes) into t. Returns 0, or -1 with a message. */
static int hint_tmpl_parse(struct hint_tmpl *t, const char *p, size_t n, long rank, char *err, size_t errlen)
{
	char rk[24];
	size_t rkl = (size_t)snprintf(rk, sizeof(rk), "%ld", rank);
	size_t i = 0;

	t->lit_len = 0;
	t->pre_len = 0;
	t->nconv = 0;
	while (i < n) {
		bool ok;

		if (p[i] != '%') {
			ok = hint_lit_add(t, p + i, 1);
			i++;
		} else if (i + 1 < n && p[i + 1] == '%') {
			ok = hint_lit_add(t, "%", 1);
			i += 2;
		} else if (i + 1 < n && p[i + 1] == 'r') {
			ok = hint_lit_add(t, rk, rkl);
			i += 2;
		} else {
			unsigned flags = 0;
			long width = -1, prec = -1;
			size_t j = i + 1;
			const char *f;

			while (j < n && p[j] && (f = strchr(hint_flagset, p[j]))) {
				flags |= 1u << (f - hint_flagset);
				j++;
			}
			if (j < n && hint_digit(p[j])) {
				width = 0;
				for (; j < n && hint_digit(p[j]); j++)
					if (width <= PATH_MAX)
						width = width * 10 + (p[j] - '0');
			}
			if (j < n && p[j] == '.') {
				prec = 0;
				for (j++; j < n && hint_digit(p[j]); j++)
					if (prec <= PATH_MAX)
						prec = prec * 10 + (p[j] - '0');
			}
			char conv = j < n ? p[j] : '\0';
			size_t clen = (j < n ? j + 1 : j) - i;
			if (!conv || !strchr("diuxXo", conv)) {
				hint_msg(err, errlen,
					 "unsupported conversion '%.*s' (only d, i, u, x, X, o with flags, width and precision; %%r is the rank, %%%% a percent sign)",
					 (int)clen, p + i);
				return -1;
			}
			if (++t->nconv > 1) {
				hint_msg(err, errlen, "more than one integer conversion ('%.*s' and '%.*s')",
					 (int)t->conv_len, p + t->conv_off, (int)clen, p + i);
				return -1;
			}
			if (width > PATH_MAX || prec > PATH_MAX) {
				hint_msg(err, errlen, "generated path too long: conversion '%.*s' is wider than %d bytes",
					 (int)clen, p + i, PATH_MAX);
				return -1;
			}
			char *o = t->fmt;
			*o++ = '%';
			for (int k = 0; hint_flagset[k]; k++)
				if (flags & (1u << k))
					*o++ = hint_flagset[k];
			if (width >= 0)
				o += sprintf(o, "%ld", width);
			if (prec >= 0)
				o += sprintf(o, ".%ld", prec);
			*o++ = 'l';
			*o++ = 'l';
			*o++ = conv;
			*o = '\0';
			t->is_signed = conv == 'd' || conv == 'i';
			t->conv_off = i;
			t->conv_len = clen;
			t->pre_len = t->lit_len;
			ok = true;
			i = j + 1;
		}
		if (!ok) {
			hint_msg(err, errlen, "path too long: more than %d bytes", PATH_MAX - 1);
			return -1;
		}
	}
	t->lit[t->lit_len] = '\0';
	if (!t->nconv)
		t->pre_len = t->lit_len;
	return 0;
}

/* Writes t's path for value v into out (PATH_MAX bytes).
 * Returns 0 or -ENAMETOOLONG. */
static int hint_tmpl_gen(const struct hint_tmpl *t, uint64_t v, char *out)
{
	size_t suf = t->lit_len - t->pre_len;
	int n;

	memcpy(out, t->lit, t->pre_len);
	/* t->fmt is one conversion built by hint_tmpl_parse from a checked
	 * set, always with "ll", so the argument types below match it. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	if (t->is_signed)
		n = snprintf(out + t->pre_len, PATH_MAX - t->pre_len, t->fmt, (long long)v);
	else
		n = snprintf(out + t->pre_len, PATH_MAX - t->pre_len, t->fmt, (unsigned long long)v);
#pragma GCC diagnostic pop
	if (n < 0 || t->pre_len + (size_t)n + suf >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(out + t->pre_len + n, t->lit + t->pre_len, suf);
	out[t->pre_len + n + suf] = '\0';
	return 0;
}

static int hint_resolve(const char *path, const char *base, char *out, char *err, size_t errlen)
{
	int rc = ckc_path_key(path, base, out, PATH_MAX);

	if (rc == -ENAMETOOLONG)
		hint_msg(err, errlen, "generated path too long (more than %d bytes once resolved): '%.*s'",
			 PATH_MAX - 1, HINT_QUOTE, path);
	else if (rc)
		hint_msg(err, errlen, "cannot resolve '%.*s' (error %d)", HINT_QUOTE, path, -rc);
	return rc;
}

/* The body of hint_parse_line; *emitted counts entries even when emit stops
 * the line. Returns HINT_DONE, HINT_BAD, or emit's negative value. */
static int hint_parse(const char *line, size_t len, const char *base, long rank, size_t *budget,
		      hint_emit_fn emit, void *ctx, char *err, size_t errlen, size_t *emitted)
{
	struct hint_tmpl t;
	struct hint_range rg = { 0, 0, 1 };
	char gen[PATH_MAX], canon[PATH_MAX];
	size_t bad, s, end, tok, pe;
	bool ranged;
	int rr;

	*emitted = 0;
	hint_msg_clear(err, errlen);
	if (len > HINT_LINE_MAX) {
		hint_msg(err, errlen, "line too long: %zu bytes (limit %d)", len, HINT_LINE_MAX);
		return HINT_BAD;
	}
	const char *nul = memchr(line, '\0', len);
	if (nul) {
		hint_msg(err, errlen, "embedded NUL byte at byte %zu", (size_t)(nul - line) + 1);
		return HINT_BAD;
	}
	bad = hint_utf8_bad((const unsigned char *)line, len);
	if (bad < len) {
		hint_msg(err, errlen, "invalid UTF-8 at byte %zu", bad + 1);
		return HINT_BAD;
	}

	/* A '#' starts a comment only at the start or after white space, so
	 * that "ckpt#3.bin" stays a path. */
	end = len;
	for (size_t i = 0; i < len; i++) {
		if (line[i] == '#' && (i == 0 || hint_ws(line[i - 1]))) {
			end = i;
			break;
		}
	}
	s = 0;
	while (s < end && hint_ws(line[s]))
		s++;
	while (end > s && hint_ws(line[end - 1]))
		end--;
	if (s == end)
		return HINT_DONE;

	tok = end;
	while (tok > s && !hint_ws(line[tok - 1]))
		tok--;
	pe = tok;
	while (pe > s && hint_ws(line[pe - 1]))
		pe--;

	rr = hint_range_parse(line + tok, end - tok, &rg);
	if (rr == 0) {
		if (pe > s && memmem(line + tok, end - tok, "..", 2) && hint_has_conv(line + s, pe - s)) {
			hint_msg(err, errlen, "bad range '%.*s': expected A..B or A..B:STEP (decimal, A and B >= 0, STEP >= 1)",
				 (int)(end - tok), line + tok);
			return HINT_BAD;
		}
		pe = end;
		ranged = false;
	} else {
		if (pe == s) {
			hint_msg(err, errlen, "empty path before the range '%.*s'", (int)(end - tok), line + tok);
			return HINT_BAD;
		}
		if (rr < 0) {
			hint_msg(err, errlen, "bad range '%.*s': number larger than %" PRId64, (int)(end - tok),
				 line + tok, INT64_MAX);
			return HINT_BAD;
		}
		if (rg.step == 0) {
			hint_msg(err, errlen, "bad range '%.*s': the step must be at least 1", (int)(end - tok),
				 line + tok);
			return HINT_BAD;
		}
		ranged = true;
	}

	if (hint_tmpl_parse(&t, line + s, pe - s, rank, err, errlen))
		return HINT_BAD;
	if (ranged && !t.nconv) {
		hint_msg(err, errlen, "range '%.*s' given but the path has no integer conversion such as %%d",
			 (int)(end - tok), line + tok);
		return HINT_BAD;
	}
	if (!ranged && t.nconv) {
		hint_msg(err, errlen, "conversion '%.*s' but no range (write e.g. 'ckpt_%%04d.bin 0..99')",
			 (int)t.conv_len, line + s + t.conv_off);
		return HINT_BAD;
	}

	if (!ranged) {
		if (hint_resolve(t.lit, base, canon, err, errlen))
			return HINT_BAD;
		if (budget && !*budget) {
			hint_msg(err, errlen, "entry limit reached: line dropped");
			return HINT_DONE;
		}
		int rc = emit(ctx, canon);
		if (rc < 0) {
			hint_msg_clear(err, errlen);
			return rc;
		}
		*emitted = 1;
		if (budget)
			(*budget)--;
		return HINT_DONE;
	}

	bool up = rg.a <= rg.b;
	uint64_t count = (up ? rg.b - rg.a : rg.a - rg.b) / rg.step + 1;
	uint64_t last = up ? rg.a + (count - 1) * rg.step : rg.a - (count - 1) * rg.step;

	/* Formatted values never shrink as values grow, so the largest value
	 * gives the longest path: checking it first means a line is either
	 * refused whole or expanded whole. */
	if (hint_tmpl_gen(&t, up ? last : rg.a, gen)) {
		hint_msg(err, errlen, "generated path too long (more than %d bytes) for '%.*s'", PATH_MAX - 1,
			 HINT_QUOTE, line + s);
		return HINT_BAD;
	}
	if (hint_resolve(gen, base, canon, err, errlen))
		return HINT_BAD;

	uint64_t n = count;
	if (budget && n > *budget)
		n = *budget;
	if (!n) {
		hint_msg(err, errlen, "entry limit reached: line dropped (%" PRIu64 " entries)", count);
		return HINT_DONE;
	}
	uint64_t v = rg.a;
	for (uint64_t i = 0; i < n; i++) {
		if (i)
			v = up ? v + rg.step : v - rg.step;
		if (hint_tmpl_gen(&t, v, gen)) {
			hint_msg(err, errlen, "generated path too long for value %" PRIu64 "; rest of the range dropped",
				 v);
			return HINT_DONE;
		}
		if (hint_resolve(gen, base, canon, err, errlen))
			return HINT_DONE;
		int rc = emit(ctx, canon);
		if (rc < 0) {
			hint_msg_clear(err, errlen);
			return rc;
		}
		(*emitted)++;
		if (budget)
			(*budget)--;
	}
	if (n < count)
		hint_msg(err, errlen, "range too large: %" PRIu64 " entries, only the first %" PRIu64
			 " kept (entry limit reached)", count, n);
	return HINT_DONE;
}

long hint_parse_line(const char *line, size_t len, const char *base_dir, long rank, size_t *budget,
		     hint_emit_fn emit, void *ctx, char *err, size_t errlen)
{
	size_t emitted;
	int rc;

	if (!line || !emit) {
		hint_msg(err, errlen, "no line or no emit function");
		return -1;
	}
	rc = hint_parse(line, len, base_dir, rank, budget, emit, ctx, err, errlen, &emitted);
	if (rc < 0)
		return rc;
	if (rc == HINT_BAD)
		return -1;
	return (long)emitted;
}

void hint_reader_close(hint_reader_t *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		sys_close(r->fd);
	sys_free(r->path);
	sys_free(r->dir);
	sys_free(r->partial);
	sys_free(r->chunk);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

int hint_reader_open(hint_reader_t *r, const char *path, long rank, size_t max_entries)
{
	char canon[PATH_MAX], dir[PATH_MAX];
	struct stat st;
	int rc;

	if (!r)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->fd = -1;
	if (!path)
		return -EINVAL;
	rc = ckc_path_canon(path, NULL, canon, sizeof(canon));
	if (rc)
		return rc;
	rc = ckc_path_dirname(canon, dir, sizeof(dir));
	if (rc)
		return rc;

	r->path = strdup(canon);
	r->dir = strdup(dir);
	r->partial = sys_malloc(HINT_LINE_MAX);
	r->chunk = sys_malloc(HINT_CHUNK);
	if (!r->path || !r->dir || !r->partial || !r->chunk) {
		rc = -ENOMEM;
		goto fail;
	}
	/* a FIFO, socket or device is never opened (a FIFO's open would wait
	 * for a writer, and release one that waits); O_NONBLOCK in case it was
	 * swapped in since */
	if (sys_stat(canon, &st) == 0 && !S_ISREG(st.st_mode)) {
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto fail;
	}
	r->fd = sys_open(canon, O_RDONLY | O_NONBLOCK, 0);
	if (r->fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (sys_fstat(r->fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto fail;
	}
	r->rank = rank;
	r->max_entries = max_entries ? max_entries : HINT_MAX_ENTRIES_DEFAULT;
	r->budget = r->max_entries;
	return 0;

fail:
	hint_reader_close(r);
	return rc;
}

/* Parses one complete line: data (n bytes) appended to whatever start of it
 * earlier reads left in r->partial. Returns entries emitted or emit's
 * negative value. */
static long hint_reader_line(hint_reader_t *r, const char *data, size_t n, hint_emit_fn emit,
			     hint_report_fn report, void *ctx)
{
	char err[HINT_MSG_MAX];
	unsigned no = ++r->line;
	const char *line = data;
	size_t len = n, emitted = 0;
	int rc;

	if (r->partial_len) {
		len = r->partial_len + n;
		if (len <= HINT_LINE_MAX)
			memcpy(r->partial + r->partial_len, data, n);
		line = r->partial;
		r->partial_len = 0;
	}
	/* Checked here too: the start of an over-long line was not kept. */
	if (len > HINT_LINE_MAX) {
		hint_msg(err, sizeof(err), "line too long: %zu bytes (limit %d)", len, HINT_LINE_MAX);
		if (report)
			report(ctx, r->path, no, err);
		return 0;
	}
	rc = hint_parse(line, len, r->dir, r->rank, &r->budget, emit, ctx, err, sizeof(err), &emitted);
	if (rc < 0)
		return rc;
	if (err[0] && report)
		report(ctx, r->path, no, err);
	return (long)emitted;
}

long hint_reader_poll(hint_reader_t *r, hint_emit_fn emit, hint_report_fn report, void *ctx)
{
	struct stat st;
	long total = 0;

	if (!r || !emit)
		return -EINVAL;
	if (r->fd < 0)
		return -EBADF;
	if (sys_fstat(r->fd, &st) < 0)
		return -errno;
	if (st.st_size < r->off) {
		char msg[HINT_MSG_MAX];
		snprintf(msg, sizeof(msg), "file shrank from %lld to %lld bytes: reading it again from the top",
			 (long long)r->off, (long long)st.st_size);
		if (report)
			report(ctx, r->path, 0, msg);
		r->off = 0;
		r->line = 0;
		r->partial_len = 0;
	}
	/* Only up to the size seen now: a writer that never stops must not
	 * keep one poll going for ever. */
	while (r->off < st.st_size) {
		off_t left = st.st_size - r->off;
		size_t want = left < HINT_CHUNK ? (size_t)left : HINT_CHUNK;
		ssize_t got = sys_pread(r->fd, r->chunk, want, r->off);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (got == 0)
			break;
		size_t s = 0, n = (size_t)got;
		while (s < n) {
			const char *nl = memchr(r->chunk + s, '\n', n - s);
			if (!nl) {
				size_t m = n - s;
				if (r->partial_len + m <= HINT_LINE_MAX)
					memcpy(r->partial + r->partial_len, r->chunk + s, m);
				r->partial_len += m;
				r->off += (off_t)m;
				break;
			}
			size_t e = (size_t)(nl - r->chunk);
			/* Taken before parsing, so that a stop by emit resumes
			 * after this line rather than emitting it twice. */
			r->off += (off_t)(e + 1 - s);
			long rc = hint_reader_line(r, r->chunk + s, e - s, emit, report, ctx);
			if (rc < 0)
				return rc;
			total += rc;
			s = e + 1;
		}
	}
	return total;
}

long hint_reader_finish(hint_reader_t *r, hint_emit_fn emit, hint_report_fn report, void *ctx)
{
	long total = hint_reader_poll(r, emit, report, ctx);

	if (total < 0 || !r->partial_len)
		return total;
	long rc = hint_reader_line(r, "", 0, emit, report, ctx);
	if (rc < 0)
		return rc;
	return total + rc;
}
