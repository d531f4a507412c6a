/* Unit tests of the hint file parser and reader (hints/hintfile.c): valid
 * entries, every malformed-line class, the entry cap, files that grow or
 * shrink while read, and I/O failures injected through ckc_io. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hintfile.h"
#include "io.h"

struct report {
	char *file;
	unsigned line;
	char *msg;
};

/* What the callbacks saw. */
static struct {
	char **paths;
	size_t n, cap;
	struct report *reps;
	size_t nrep, caprep;
	bool count_only;	/* for a million entries: count and keep the last */
	size_t count;
	char last[PATH_MAX];
	long stop_at;		/* emit fails with -ENOSPC at this entry; -1 never */
} S;

static char dir[] = "/tmp/ckc-hint-XXXXXX";
static char hpath[PATH_MAX];

static int sink_emit(void *ctx, const char *path)
{
	cr_assert_eq(ctx, &S, "emit got the wrong context");
	if (S.stop_at >= 0 && S.count == (size_t)S.stop_at) {
		S.stop_at = -1;
		return -ENOSPC;
	}
	S.count++;
	if (S.count_only) {
		strcpy(S.last, path);
		return 0;
	}
	if (S.n == S.cap) {
		S.cap = S.cap ? S.cap * 2 : 16;
		S.paths = realloc(S.paths, S.cap * sizeof(*S.paths));
		cr_assert_not_null(S.paths);
	}
	S.paths[S.n] = strdup(path);
	cr_assert_not_null(S.paths[S.n]);
	S.n++;
	return 0;
}

static void sink_report(void *ctx, const char *file, unsigned line, const char *msg)
{
	cr_assert_eq(ctx, &S, "report got the wrong context");
	if (S.nrep == S.caprep) {
		S.caprep = S.caprep ? S.caprep * 2 : 16;
		S.reps = realloc(S.reps, S.caprep * sizeof(*S.reps));
		cr_assert_not_null(S.reps);
	}
	S.reps[S.nrep].file = strdup(file);
	S.reps[S.nrep].line = line;
	S.reps[S.nrep].msg = strdup(msg);
	S.nrep++;
}

static void sink_clear(void)
{
	for (size_t i = 0; i < S.n; i++)
		free(S.paths[i]);
	for (size_t i = 0; i < S.nrep; i++) {
		free(S.reps[i].file);
		free(S.reps[i].msg);
	}
	free(S.paths);
	free(S.reps);
	memset(&S, 0, sizeof(S));
	S.stop_at = -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void setup(void)
{
	sink_clear();
	ckc_io_reset();
	strcpy(dir, "/tmp/ckc-hint-XXXXXX");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(hpath, sizeof(hpath), "%s/hints.txt", dir);
}

static void teardown(void)
{
	sink_clear();
	ckc_io_reset();
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(hint, .init = setup, .fini = teardown);

static void put(const char *path, const void *data, size_t len, int flags)
{
	int fd = open(path, O_WRONLY | O_CREAT | flags, 0644);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void write_hints(const char *text)
{
	put(hpath, text, strlen(text), O_TRUNC);
}

static void append_hints(const char *text)
{
	put(hpath, text, strlen(text), O_APPEND);
}

/* Expands a leading "@" to the test folder. */
static const char *expand(const char *want, char *buf, size_t len)
{
	if (want[0] != '@')
		return want;
	snprintf(buf, len, "%s%s", dir, want + 1);
	return buf;
}

/* Checks that exactly want[0..n) were emitted since the last call. */
static size_t seen;
static void expect_paths(const char *const *want, size_t n)
{
	char buf[PATH_MAX];

	cr_assert_eq(S.n - seen, n, "%zu entries emitted, expected %zu", S.n - seen, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(S.paths[seen + i], expand(want[i], buf, sizeof(buf)), "entry %zu", i);
	seen = S.n;
}

static void expect_report(size_t i, unsigned line, const char *needle)
{
	cr_assert_lt(i, S.nrep, "report %zu missing (only %zu)", i, S.nrep);
	cr_assert_str_eq(S.reps[i].file, hpath);
	cr_assert_eq(S.reps[i].line, line, "report %zu (%s) on line %u, expected %u", i, S.reps[i].msg,
		     S.reps[i].line, line);
	cr_assert_not_null(strstr(S.reps[i].msg, needle), "report %zu: '%s' does not say '%s'", i,
			   S.reps[i].msg, needle);
}

/* Reads the whole hint file with one reader; returns the entry count. */
static long read_all(long rank, size_t max)
{
	hint_reader_t r;
	long a, b;

	cr_assert_eq(hint_reader_open(&r, hpath, rank, max), 0);
	a = hint_reader_poll(&r, sink_emit, sink_report, &S);
	cr_assert_geq(a, 0, "poll: %ld", a);
	b = hint_reader_finish(&r, sink_emit, sink_report, &S);
	cr_assert_geq(b, 0, "finish: %ld", b);
	hint_reader_close(&r);
	return a + b;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

Test(hint, paths_and_comments)
{
	write_hints("# restore order for run 7\n"
		    "\n"
		    "/abs/one.bin\n"
		    "rel/two.bin\n"
		    "   ./three.bin   # the third\n"
		    "\t\n"
		    "../up/four.bin\n"
		    "with space/file five.bin\n"
		    "file#6.bin\n"
		    "  # indented comment\n"
		    "/abs//x/../seven.bin#not-a-comment # but this is\n"
		    "crlf.bin\r\n");
	cr_assert_eq(read_all(0, 0), 8);
	char up[PATH_MAX];
	snprintf(up, sizeof(up), "%.*s/up/four.bin", (int)(strrchr(dir, '/') - dir), dir);
	const char *want[] = { "/abs/one.bin", "@/rel/two.bin", "@/three.bin", up,
			       "@/with space/file five.bin", "@/file#6.bin", "/abs/seven.bin#not-a-comment",
			       "@/crlf.bin" };
	cr_assert_eq(S.n, 8);
	expect_paths(want, N(want));
	cr_assert_eq(S.nrep, 0, "unexpected report: %s", S.nrep ? S.reps[0].msg : "");
}

Test(hint, ranges)
{
	write_hints("ckpt_%04d.bin 3..0\n"
		    "up_%d.bin 0..6:2\n"
		    "miss_%d.bin 0..7:3\n"
		    "down_%d.bin 10..0:3\n"
		    "one_%d.bin 5..5\n"
		    "/abs/big_%d 9223372036854775806..9223372036854775807\n");
	cr_assert_eq(read_all(0, 0), 18);
	const char *want[] = { "@/ckpt_0003.bin", "@/ckpt_0002.bin", "@/ckpt_0001.bin", "@/ckpt_0000.bin",
			       "@/up_0.bin", "@/up_2.bin", "@/up_4.bin", "@/up_6.bin",
			       "@/miss_0.bin", "@/miss_3.bin", "@/miss_6.bin",
			       "@/down_10.bin", "@/down_7.bin", "@/down_4.bin", "@/down_1.bin",
			       "@/one_5.bin",
			       "/abs/big_9223372036854775806", "/abs/big_9223372036854775807" };
	expect_paths(want, N(want));
	cr_assert_eq(S.nrep, 0, "unexpected report: %s", S.nrep ? S.reps[0].msg : "");
}

Test(hint, conversions)
{
	write_hints("x_%x 254..257\n"
		    "X_%X 171..171\n"
		    "hx_%#x 0..1\n"
		    "o_%o 8..8\n"
		    "ho_%#o 8..8\n"
		    "u_%u 42..42\n"
		    "i_%i 7..7\n"
		    "p_%+d 3..3\n"
		    "l_%-4d| 12..12\n"
		    "pr_%.3d 5..5\n"
		    "w_%5d 5..5\n"
		    "z_%08.3d 9..9\n"
		    "zx_%06x 255..255\n"
		    "ff_%00004d 1..1\n");
	const char *want[] = { "@/x_fe", "@/x_ff", "@/x_100", "@/x_101", "@/X_AB", "@/hx_0", "@/hx_0x1",
			       "@/o_10", "@/ho_010", "@/u_42", "@/i_7", "@/p_+3", "@/l_12  |", "@/pr_005",
			       "@/w_    5", "@/z_     009", "@/zx_0000ff", "@/ff_0001" };
	cr_assert_eq(read_all(0, 0), (long)N(want));
	expect_paths(want, N(want));
	cr_assert_eq(S.nrep, 0, "unexpected report: %s", S.nrep ? S.reps[0].msg : "");
}

Test(hint, rank_and_percent)
{
	write_hints("rank%r/ckpt_%03d.bin 1..0\n"
		    "100%%_%d.bin 2..2\n"
		    "%%r_%r.bin\n"
		    "lit%%d.bin\n"
		    "/a/%r%r\n"
		    "%%%d 4..4\n"
		    "r%r/notes 1..x\n"
		    "100%% done..\n");
	/* Without a real conversion, a last token with ".." is part of the
	 * path, not a bad range. */
	const char *want[] = { "@/rank12/ckpt_001.bin", "@/rank12/ckpt_000.bin", "@/100%_2.bin", "@/%r_12.bin",
			       "@/lit%d.bin", "/a/1212", "@/%4", "@/r12/notes 1..x", "@/100% done.." };
	cr_assert_eq(read_all(12, 0), (long)N(want));
	expect_paths(want, N(want));
	cr_assert_eq(S.nrep, 0, "unexpected report: %s", S.nrep ? S.reps[0].msg : "");
}

Test(hint, negative_rank)
{
	write_hints("r%r.bin\n");
	const char *want[] = { "@/r-3.bin" };
	cr_assert_eq(read_all(-3, 0), 1);
	expect_paths(want, 1);
}

struct bad_line {
	const char *text;
	size_t len;	/* 0: strlen */
	const char *says;
};

/* Each malformed line is followed by a valid one, which must still come. */
static void check_bad_lines(const struct bad_line *b, size_t n, long rank)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_not_null(f);
	for (size_t i = 0; i < n; i++) {
		fwrite(b[i].text, 1, b[i].len ? b[i].len : strlen(b[i].text), f);
		fprintf(f, "\nok_%zu.bin\n", i);
	}
	fclose(f);
	put(hpath, text, len, O_TRUNC);
	free(text);

	cr_assert_eq(read_all(rank, 0), (long)n);
	cr_assert_eq(S.nrep, n, "%zu reports for %zu bad lines (first: %s)", S.nrep, n,
		     S.nrep ? S.reps[0].msg : "none");
	for (size_t i = 0; i < n; i++) {
		char want[PATH_MAX];
		expect_report(i, (unsigned)(2 * i + 1), b[i].says);
		snprintf(want, sizeof(want), "%s/ok_%zu.bin", dir, i);
		cr_assert_str_eq(S.paths[i], want);
	}
}

Test(hint, bad_utf8_nul_length)
{
	static char longline[5001];
	memset(longline, 'a', 5000);
	const struct bad_line b[] = {
		{ "bad\xff.bin", 0, "invalid UTF-8 at byte 4" },
		{ "\xc0\xafx.bin", 0, "invalid UTF-8 at byte 1" },
		{ "sur\xed\xa0\x80.bin", 0, "invalid UTF-8 at byte 4" },
		{ "trunc\xe2\x82", 0, "invalid UTF-8 at byte 6" },
		{ "big\xf4\x90\x80\x80.bin", 0, "invalid UTF-8" },
		{ "cont\x80.bin", 0, "invalid UTF-8" },
		{ "# comment \xfe", 0, "invalid UTF-8" },
		{ "a\0b.bin", 7, "embedded NUL byte at byte 2" },
		{ longline, 0, "line too long: 5000 bytes" },
	};
	check_bad_lines(b, N(b), 0);
}

Test(hint, valid_utf8)
{
	write_hints("caf\xc3\xa9/\xe2\x82\xac_%d.bin 1..1\n\xf0\x9f\x92\xbe.bin\n");
	const char *want[] = { "@/caf\xc3\xa9/\xe2\x82\xac_1.bin", "@/\xf0\x9f\x92\xbe.bin" };
	cr_assert_eq(read_all(0, 0), 2);
	expect_paths(want, 2);
	cr_assert_eq(S.nrep, 0);
}

Test(hint, line_of_exactly_4096_bytes)
{
	static char line[HINT_LINE_MAX + 3];
	memset(line, ' ', HINT_LINE_MAX);
	memcpy(line, "/ok.bin", 7);
	line[HINT_LINE_MAX - 2] = '#';
	line[HINT_LINE_MAX] = '\n';
	write_hints(line);
	cr_assert_eq(read_all(0, 0), 1);
	cr_assert_eq(S.nrep, 0, "unexpected report: %s", S.nrep ? S.reps[0].msg : "");
	cr_assert_str_eq(S.paths[0], "/ok.bin");
	line[HINT_LINE_MAX] = 'x';
	line[HINT_LINE_MAX + 1] = '\n';
	write_hints(line);
	sink_clear();
	cr_assert_eq(read_all(0, 0), 0);
	expect_report(0, 1, "line too long: 4097 bytes");
}

Test(hint, bad_ranges)
{
	const struct bad_line b[] = {
		{ "c_%d.bin 1..", 0, "bad range '1..'" },
		{ "c_%d.bin ..3", 0, "bad range '..3'" },
		{ "c_%d.bin 1..5:0", 0, "step must be at least 1" },
		{ "c_%d.bin 1..x", 0, "bad range '1..x'" },
		{ "c_%d.bin 1..5:", 0, "bad range" },
		{ "c_%d.bin -1..5", 0, "bad range" },
		{ "c_%d.bin 1...5", 0, "bad range" },
		{ "c_%d.bin 0..9223372036854775808", 0, "larger than 9223372036854775807" },
		{ "c_%d.bin 99999999999999999999..0", 0, "larger than" },
		{ "c_%d.bin 0..3:99999999999999999999", 0, "larger than" },
		{ "plain.bin 0..3", 0, "no integer conversion" },
		{ "c_%d.bin", 0, "conversion '%d' but no range" },
		{ "c_%d.bin 5", 0, "but no range" },
		{ "c_%d_%d.bin 0..1", 0, "more than one integer conversion" },
		{ "c_%03x_%r_%u.bin 0..1", 0, "more than one" },
		{ "0..3", 0, "empty path" },
		{ "   12..3:2   # comment", 0, "empty path" },
		{ "1..2:0", 0, "empty path" },
	};
	check_bad_lines(b, N(b), 0);
}

Test(hint, unsupported_conversions)
{
	const struct bad_line b[] = {
		{ "%s.bin 0..1", 0, "unsupported conversion '%s'" },
		{ "%n 0..1", 0, "unsupported conversion '%n'" },
		{ "%f 0..1", 0, "unsupported conversion '%f'" },
		{ "%p 0..1", 0, "unsupported conversion '%p'" },
		{ "%c 0..1", 0, "unsupported conversion '%c'" },
		{ "%ld 0..1", 0, "unsupported conversion '%l'" },
		{ "%lld 0..1", 0, "unsupported conversion '%l'" },
		{ "%hd 0..1", 0, "unsupported conversion '%h'" },
		{ "%zu 0..1", 0, "unsupported conversion '%z'" },
		{ "%jd 0..1", 0, "unsupported" },
		{ "%*d 0..1", 0, "unsupported conversion '%*'" },
		{ "%'d 0..1", 0, "unsupported" },
		{ "%1$d 0..1", 0, "unsupported" },
		{ "end% 0..1", 0, "unsupported conversion '%'" },
		{ "w%05 0..1", 0, "unsupported conversion '%05'" },
		{ "%s.bin", 0, "unsupported conversion '%s'" },
		{ "x_%d_%s 0..1", 0, "unsupported conversion '%s'" },
	};
	check_bad_lines(b, N(b), 0);
}

Test(hint, generated_path_too_long)
{
	/* A line fits in 4096 bytes but the path it makes does not. */
	static char rel[4091], pat[4082], many_r[2001];
	memset(rel, 'r', 4090);
	memset(pat, 'p', 4078);
	memcpy(pat + 4078, "%d", 2);
	for (int i = 0; i < 1000; i++)
		memcpy(many_r + 2 * i, "%r", 2);
	char patline[4200], wide[64];
	snprintf(patline, sizeof(patline), "%s 0..5", pat);
	snprintf(wide, sizeof(wide), "/w_%%%dd 0..1", PATH_MAX);
	/* Only the larger values of this range overflow: the line is refused
	 * whole, not emitted up to the first long one. */
	static char grow[4200];
	size_t glen = 4095 - strlen(dir) - 3;
	memset(grow, 'g', glen);
	snprintf(grow + glen, sizeof(grow) - glen, "%%d 0..99999");
	const struct bad_line b[] = {
		{ rel, 0, "too long" },
		{ patline, 0, "too long" },
		{ grow, 0, "too long" },
		{ wide, 0, "too long" },
		{ many_r, 0, "path too long" },
		{ "/x_%.5000d 0..1", 0, "conversion '%.5000d' is wider than 4096 bytes" },
	};
	check_bad_lines(b, N(b), 123456789);
}

Test(hint, huge_range_small_cap)
{
	write_hints("c_%d.bin 0..9223372036854775807\n"
		    "after.bin\n"
		    "d_%d.bin 0..3\n"
		    "bad_%d.bin\n");
	cr_assert_eq(read_all(0, 5), 5);
	const char *want[] = { "@/c_0.bin", "@/c_1.bin", "@/c_2.bin", "@/c_3.bin", "@/c_4.bin" };
	expect_paths(want, N(want));
	cr_assert_eq(S.nrep, 4);
	expect_report(0, 1, "range too large: 9223372036854775808 entries, only the first 5 kept");
	expect_report(1, 2, "entry limit reached");
	expect_report(2, 3, "entry limit reached: line dropped (4 entries)");
	/* A malformed line is still called malformed. */
	expect_report(3, 4, "but no range");
}

Test(hint, cap_reached_exactly)
{
	write_hints("a.bin\nc_%d 9..7\nb.bin\n");
	cr_assert_eq(read_all(0, 4), 4);
	const char *want[] = { "@/a.bin", "@/c_9", "@/c_8", "@/c_7" };
	expect_paths(want, N(want));
	cr_assert_eq(S.nrep, 1);
	expect_report(0, 3, "entry limit reached");
}

Test(hint, huge_range_default_cap, .timeout = 60)
{
	S.count_only = true;
	write_hints("c_%d.bin 0..9223372036854775807\nnext.bin\n");
	cr_assert_eq(read_all(0, HINT_MAX_ENTRIES_DEFAULT), (long)HINT_MAX_ENTRIES_DEFAULT);
	cr_assert_eq(S.count, HINT_MAX_ENTRIES_DEFAULT);
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/c_%zu.bin", dir, HINT_MAX_ENTRIES_DEFAULT - 1);
	cr_assert_str_eq(S.last, want);
	cr_assert_eq(S.nrep, 2);
	expect_report(0, 1, "range too large: 9223372036854775808 entries, only the first 1048576 kept");
	expect_report(1, 2, "entry limit reached");
}

Test(hint, empty_file)
{
	write_hints("");
	cr_assert_eq(read_all(0, 0), 0);
	cr_assert_eq(S.n, 0);
	cr_assert_eq(S.nrep, 0);
	write_hints("# nothing\n\n   \n\t# still nothing\n");
	cr_assert_eq(read_all(0, 0), 0);
	cr_assert_eq(S.n, 0);
	cr_assert_eq(S.nrep, 0);
}

Test(hint, growing_file)
{
	hint_reader_t r;

	write_hints("");
	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), 0);
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 0);

	append_hints("a.bin\nc_%d 1..0\n");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 3);
	const char *w1[] = { "@/a.bin", "@/c_1", "@/c_0" };
	expect_paths(w1, N(w1));

	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 0, "nothing new, nothing emitted");

	append_hints("b.bin\nd_%d 0..");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 1);
	const char *w2[] = { "@/b.bin" };
	expect_paths(w2, N(w2));

	/* The partial line is not reported as a bad range. */
	cr_assert_eq(S.nrep, 0);
	append_hints("2:2");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 0);
	cr_assert_eq(S.n, seen);

	append_hints("\nbad_%d\ne.bin\nf.b");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 3);
	const char *w3[] = { "@/d_0", "@/d_2", "@/e.bin" };
	expect_paths(w3, N(w3));
	cr_assert_eq(S.nrep, 1);
	expect_report(0, 5, "but no range");

	append_hints("in");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 0);
	cr_assert_eq(hint_reader_finish(&r, sink_emit, sink_report, &S), 1);
	const char *w4[] = { "@/f.bin" };
	expect_paths(w4, N(w4));
	hint_reader_close(&r);
	hint_reader_close(&r);
}

Test(hint, finish_without_partial)
{
	hint_reader_t r;

	write_hints("a.bin\n");
	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), 0);
	cr_assert_eq(hint_reader_finish(&r, sink_emit, sink_report, &S), 1);
	cr_assert_eq(hint_reader_finish(&r, sink_emit, sink_report, &S), 0);
	hint_reader_close(&r);
	cr_assert_eq(S.n, 1);
}

Test(hint, long_line_across_polls)
{
	hint_reader_t r;
	static char part[3001];

	memset(part, 'a', 3000);
	write_hints("first.bin\n");
	append_hints(part);
	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), 0);
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 1);
	append_hints(part);
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 0);
	cr_assert_eq(S.nrep, 0);
	append_hints(part);
	append_hints("\nz.bin\n");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 1);
	cr_assert_eq(S.nrep, 1);
	expect_report(0, 2, "line too long: 9000 bytes");
	const char *want[] = { "@/first.bin", "@/z.bin" };
	expect_paths(want, N(want));
	hint_reader_close(&r);
}

Test(hint, line_split_across_polls_is_joined)
{
	hint_reader_t r;

	write_hints("dir/ckpt_%0");
	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), 0);
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 0);
	append_hints("3d.bin 2..");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 0);
	append_hints("1\n");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 2);
	const char *want[] = { "@/dir/ckpt_002.bin", "@/dir/ckpt_001.bin" };
	expect_paths(want, N(want));
	cr_assert_eq(S.nrep, 0);
	hint_reader_close(&r);
}

Test(hint, truncation_restarts)
{
	hint_reader_t r;

	write_hints("a.bin\nb.bin\nc.bin\n");
	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), 0);
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 3);
	const char *w1[] = { "@/a.bin", "@/b.bin", "@/c.bin" };
	expect_paths(w1, N(w1));

	write_hints("x.bin\nbad_%d\ny");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 1);
	const char *w2[] = { "@/x.bin" };
	expect_paths(w2, N(w2));
	cr_assert_eq(S.nrep, 2);
	expect_report(0, 0, "shrank from 18 to 14 bytes");
	/* Line numbers start again from the top. */
	expect_report(1, 2, "but no range");

	/* The partial line kept before a truncation is forgotten. */
	write_hints("p");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 0);
	append_hints("q.bin\n");
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 1);
	const char *w3[] = { "@/pq.bin" };
	expect_paths(w3, N(w3));
	cr_assert_eq(S.nrep, 3);
	expect_report(2, 0, "shrank");
	hint_reader_close(&r);
}

Test(hint, open_errors)
{
	hint_reader_t r;
	char missing[PATH_MAX];

	snprintf(missing, sizeof(missing), "%s/none.txt", dir);
	cr_assert_eq(hint_reader_open(&r, missing, 0, 0), -ENOENT);
	hint_reader_close(&r);
	cr_assert_eq(hint_reader_open(&r, dir, 0, 0), -EISDIR);
	cr_assert_eq(hint_reader_open(&r, NULL, 0, 0), -EINVAL);
	cr_assert_eq(hint_reader_open(&r, "", 0, 0), -EINVAL);
	/* The caller may retry once the file exists. */
	write_hints("a.bin\n");
	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), 0);
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 1);
	hint_reader_close(&r);
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), -EBADF);
}

Test(hint, relative_hint_path)
{
	hint_reader_t r;
	char sub[PATH_MAX];

	snprintf(sub, sizeof(sub), "%s/sub", dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	snprintf(hpath, sizeof(hpath), "%s/sub/h.txt", dir);
	write_hints("x.bin\n../y.bin\n");
	cr_assert_eq(chdir(dir), 0);
	cr_assert_eq(hint_reader_open(&r, "./sub//h.txt", 0, 0), 0);
	cr_assert_str_eq(r.path, hpath);
	cr_assert_eq(hint_reader_finish(&r, sink_emit, sink_report, &S), 2);
	const char *want[] = { "@/sub/x.bin", "@/y.bin" };
	expect_paths(want, N(want));
	hint_reader_close(&r);
}

static ssize_t pread_eio(int fd, void *buf, size_t len, off_t off)
{
	(void)fd;
	(void)buf;
	(void)len;
	(void)off;
	errno = EIO;
	return -1;
}

static int fstat_eacces(int fd, struct stat *st)
{
	(void)fd;
	(void)st;
	errno = EACCES;
	return -1;
}

static int open_emfile(const char *path, int flags, mode_t mode)
{
	(void)path;
	(void)flags;
	(void)mode;
	errno = EMFILE;
	return -1;
}

static int eintr_left;
static ssize_t pread_eintr_once(int fd, void *buf, size_t len, off_t off)
{
	if (eintr_left) {
		eintr_left--;
		errno = EINTR;
		return -1;
	}
	return pread(fd, buf, len, off);
}

Test(hint, io_errors)
{
	hint_reader_t r;

	write_hints("a.bin\nb.bin\n");
	ckc_io.open = open_emfile;
	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), -EMFILE);
	ckc_io_reset();

	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), 0);
	ckc_io.pread = pread_eio;
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), -EIO);
	cr_assert_eq(S.n, 0);
	ckc_io.fstat = fstat_eacces;
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), -EACCES);
	ckc_io_reset();
	/* Nothing was lost: the next poll reads everything. */
	eintr_left = 2;
	ckc_io.pread = pread_eintr_once;
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 2);
	cr_assert_eq(eintr_left, 0);
	const char *want[] = { "@/a.bin", "@/b.bin" };
	expect_paths(want, N(want));
	hint_reader_close(&r);
}

Test(hint, emit_stops_parsing)
{
	hint_reader_t r;

	write_hints("c_%d 0..3\nnext.bin\n");
	cr_assert_eq(hint_reader_open(&r, hpath, 0, 0), 0);
	S.stop_at = 2;
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), -ENOSPC);
	const char *w1[] = { "@/c_0", "@/c_1" };
	expect_paths(w1, N(w1));
	/* The next call goes on after the line that was stopped. */
	cr_assert_eq(hint_reader_poll(&r, sink_emit, sink_report, &S), 1);
	const char *w2[] = { "@/next.bin" };
	expect_paths(w2, N(w2));
	cr_assert_eq(S.nrep, 0);
	/* Only what was emitted counts against the cap. */
	cr_assert_eq(r.budget, HINT_MAX_ENTRIES_DEFAULT - 3);
	hint_reader_close(&r);
}

static long parse(const char *line, size_t *budget, char *err, size_t errlen)
{
	return hint_parse_line(line, strlen(line), "/base/dir", 4, budget, sink_emit, &S, err, errlen);
}

Test(hint, parse_line_api)
{
	char err[256];
	size_t budget = 5;

	strcpy(err, "junk");
	cr_assert_eq(parse("  # only a comment", &budget, err, sizeof(err)), 0);
	cr_assert_str_eq(err, "");
	cr_assert_eq(parse("", &budget, err, sizeof(err)), 0);
	cr_assert_eq(parse("../x_%r.bin", &budget, err, sizeof(err)), 1);
	cr_assert_str_eq(S.paths[0], "/base/x_4.bin");
	cr_assert_eq(budget, 4);
	cr_assert_eq(parse("r_%d 0..2", &budget, err, sizeof(err)), 3);
	cr_assert_eq(budget, 1);
	cr_assert_str_eq(S.paths[3], "/base/dir/r_2");

	cr_assert_eq(parse("s_%d 0..2", &budget, err, sizeof(err)), 1);
	cr_assert_eq(budget, 0);
	cr_assert_str_eq(err, "range too large: 3 entries, only the first 1 kept (entry limit reached)");
	cr_assert_eq(parse("t.bin", &budget, err, sizeof(err)), 0);
	cr_assert_str_eq(err, "entry limit reached: line dropped");
	cr_assert_eq(S.n, 5);

	cr_assert_eq(parse("t_%s 0..1", &budget, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "unsupported conversion '%s'"), "%s", err);
	/* A line is not required to end in a NUL. */
	cr_assert_eq(hint_parse_line("/a.binXXXX", 6, NULL, 0, NULL, sink_emit, &S, err, sizeof(err)), 1);
	cr_assert_str_eq(S.paths[5], "/a.bin");
	/* A sequence cut by the end of the line is no UTF-8. */
	char *cut = malloc(4);
	memcpy(cut, "x\xe2\x82\x82", 4);
	cr_assert_eq(hint_parse_line(cut, 3, NULL, 0, NULL, sink_emit, &S, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "invalid UTF-8 at byte 2");
	free(cut);
	cr_assert_eq(parse("x\xe2\x82y", NULL, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "invalid UTF-8 at byte 2");
	/* No budget means no limit; no err buffer is fine. */
	cr_assert_eq(parse("u_%d 1..3", NULL, NULL, 0), 3);
	cr_assert_eq(parse("u_%d", NULL, NULL, 0), -1);
	/* Short err buffers are cut, not overrun. */
	char tiny[8];
	cr_assert_eq(parse("u_%d", NULL, tiny, sizeof(tiny)), -1);
	cr_assert_eq(strlen(tiny), 7);

	S.stop_at = (long)S.count + 1;
	budget = 10;
	strcpy(err, "junk");
	cr_assert_eq(parse("v_%d 0..5", &budget, err, sizeof(err)), -ENOSPC);
	cr_assert_str_eq(err, "");
	cr_assert_eq(budget, 9);
}

Test(hint, parse_line_relative_to_cwd)
{
	char err[256];

	cr_assert_eq(chdir(dir), 0);
	cr_assert_eq(hint_parse_line("k.bin", 5, NULL, 0, NULL, sink_emit, &S, err, sizeof(err)), 1);
	const char *want[] = { "@/k.bin" };
	expect_paths(want, 1);
}

/* A FIFO (or socket, or device) is never opened, so a FIFO with no writer
 * cannot freeze the program, and one with a writer waiting is not touched;
 * a directory is refused as before. */
Test(hint, fifo_is_refused_without_blocking, .timeout = 10)
{
	hint_reader_t r;
	char fifo[PATH_MAX];
	snprintf(fifo, sizeof(fifo), "%s/order.fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(hint_reader_open(&r, fifo, 0, 0), -EINVAL);
	cr_assert_eq(hint_reader_open(&r, dir, 0, 0), -EISDIR);
	cr_assert_eq(hint_reader_open(&r, "/dev/null", 0, 0), -EINVAL);
	unlink(fifo);
}
