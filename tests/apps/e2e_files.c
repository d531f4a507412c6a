/* e2e_helper: Files written and read back whole: generation, checks, memory, histories, rewrites, growing hint files. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "e2e_helper.h"

int m_gen(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED [CHUNK]");
	gen_file(arg.path, arg.size, arg.seed, chunk_arg(argc, argv));
	return 0;
}

int m_check(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED [CHUNK]");
	check_file(arg.path, arg.size, arg.seed, chunk_arg(argc, argv));
	return 0;
}

/* This process's resident memory (VmRSS), in KiB. */
static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	if (kb < 0)
		fail("no VmRSS in /proc/self/status");
	return kb;
}

/* rss PATH SIZE SEED N: the resident memory of this process (KiB) before N
 * checkpoints PATH.0.. of SIZE bytes, after writing and reading them back
 * and a second of quiet, and once they were removed and the cache idle for
 * two seconds and a half. */
int m_rss(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED N");
	char p[PATH_MAX];
	/* this program's own buffers go back to the system when freed (glibc
	 * would otherwise raise its mapping threshold and keep them) */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	long before = rss_kib();
	for (long i = 0; i < arg.n; i++) {
		snprintf(p, sizeof(p), "%s.%ld", arg.path, i);
		gen_file(p, arg.size, arg.seed + (uint64_t)i, 0);
		check_file(p, arg.size, arg.seed + (uint64_t)i, 0);
	}
	sleep_ms(1000);
	long cached = rss_kib();
	for (long i = 0; i < arg.n; i++) {
		snprintf(p, sizeof(p), "%s.%ld", arg.path, i);
		if (unlink(p) != 0)
			fail("unlink %s: %s", p, strerror(errno));
	}
	sleep_ms(2500);
	printf("rss_kib before=%ld cached=%ld after=%ld\n", before, cached, rss_kib());
	return 0;
}

/* Write then read back in the same process: the read must come from the
 * cache (the driver checks the statistics). */
int m_wr(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED [CHUNK]");
	size_t chunk = chunk_arg(argc, argv);
	gen_file(arg.path, arg.size, arg.seed, chunk);
	check_file(arg.path, arg.size, arg.seed, chunk);
	return 0;
}

int m_rawcheck(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH SIZE SEED");
	unsigned char *e = pattern_buf(arg.size, arg.seed);
	raw_check(arg.path, e, arg.size, "rawcheck");
	free(e);
	return 0;
}

/* Checkpoint i of a numbered series in dir: dir/PREFIX_NNN.bin. */
void nth_path(char path[PATH_MAX], const char *dir, const char *prefix, long i)
{
	snprintf(path, PATH_MAX, "%s/%s_%03ld.bin", dir, prefix, i);
}

/* The names checkpoint i of a series in dir is written under and renamed
 * to: tmp = dir/PREFIX_NNN.bin.tmp, path = dir/PREFIX_NNN.bin. */
void tmp_and_path(char tmp[PATH_MAX], char path[PATH_MAX], const char *dir, const char *prefix,
			 long i)
{
	nth_path(path, dir, prefix, i);
	snprintf(tmp, PATH_MAX, "%s/%s_%03ld.bin.tmp", dir, prefix, i);
}

/* Reads back checkpoint i of a history (stream seed+i). */
static void hist_check(const char *dir, long i, size_t size, uint64_t seed)
{
	char path[PATH_MAX];
	nth_path(path, dir, "h", i);
	check_file(path, size, seed + (uint64_t)i, 0);
}

/* history DIR N SIZE SEED READ: writes DIR/h_NNN.bin for i < N (stream
 * SEED+i), then reads back whole the ones listed in READ (comma-separated
 * indices, "all" for every one from the last, or "none"). */
int m_history(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR N SIZE SEED READ");
	char path[PATH_MAX];
	for (long i = 0; i < arg.n; i++) {
		nth_path(path, arg.path, "h", i);
		gen_file(path, arg.size, arg.seed + (uint64_t)i, 0);
	}
	if (strcmp(argv[5], "all") == 0) {
		for (long i = arg.n - 1; i >= 0; i--)
			hist_check(arg.path, i, arg.size, arg.seed);
	} else if (strcmp(argv[5], "none") != 0) {
		char *list = strdup(argv[5]), *save = NULL;
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
			hist_check(arg.path, (long)num(t), arg.size, arg.seed);
		free(list);
	}
	return 0;
}

/* histcheck DIR N SIZE SEED: every file of a history holds its bytes.
 * (SIZE and SEED are read only when N > 0, hence no parse_args.) */
int m_histcheck(int argc, char **argv)
{
	need_args(argc, 5, "DIR N SIZE SEED");
	for (long i = 0; i < (long)num(argv[2]); i++)
		hist_check(argv[1], i, num(argv[3]), num(argv[4]));
	return 0;
}

/* rewrite PATH N SIZE SEED: N versions of one checkpoint, of different
 * sizes, some read back; the last one must be what remains. */
int m_rewrite(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "PATH N SIZE SEED");
	for (long i = 0; i < arg.n; i++) {
		size_t sz = arg.size - (size_t)(i % 7) * 40961;
		gen_file(arg.path, sz, arg.seed + (uint64_t)i, i % 2 ? 65536 : 0);
		if (i % 3 == 0 || i == arg.n - 1)
			check_file(arg.path, sz, arg.seed + (uint64_t)i, 0);
	}
	printf("rewrite: %ld versions\n", arg.n);
	return 0;
}

/* growhints DIR HINTS N SIZE: writes N checkpoints, then appends their
 * restore order to the hint file one line at a time (as a program that
 * decides its order as it goes), waits, and reads them in that order. */
int m_growhints(int argc, char **argv)
{
	struct args arg = parse_args(argc, argv, "DIR HINTS N SIZE");
	char path[PATH_MAX], line[PATH_MAX + 2];
	for (long i = 0; i < arg.n; i++) {
		nth_path(path, arg.path, "g", i);
		gen_file(path, arg.size, 300 + (uint64_t)i, 0);
	}
	int h = xopen(argv[2], O_WRONLY | O_APPEND);
	for (long k = 0; k < arg.n; k++) {
		long i = (k * 3 + 1) % arg.n;
		nth_path(path, arg.path, "g", i);
		int m = snprintf(line, sizeof(line), "%s\n", path);
		if (write(h, line, (size_t)m) != m)
			fail("appending to %s: %s", argv[2], strerror(errno));
		sleep_ms(10);
	}
	close(h);
	/* the library picks appended lines up within 50 ms */
	sleep_ms(300);
	for (long k = 0; k < arg.n; k++) {
		long i = (k * 3 + 1) % arg.n;
		nth_path(path, arg.path, "g", i);
		check_file(path, arg.size, 300 + (uint64_t)i, 0);
	}
	printf("growhints: %ld checkpoints read in the appended order\n", arg.n);
	return 0;
}

/* ---- modes: threads ---------------------------------------------------------- */

/* unlink-open DIR: the scratch-file idiom: a file opened read-write,
 * unlinked, and used on through its descriptor (sizes 0 B to 3 MiB, a
 * write before and after the unlink): every byte written reads back, fstat
 * counts them, ftruncate shortens and grows it, and no file is left at
 * the path. The same for a file renamed over while its writer still
 * writes. */
int m_unlink_open(int argc, char **argv)
{
	need_args(argc, 2, "DIR");
	static const size_t sizes[] = { 0, 1, 5, 4096, 100003, 3u << 20 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (int how = 0; how < 2; how++) {
			size_t n = sizes[k], m = 1 + k * 1000;
			char path[PATH_MAX], other[PATH_MAX];
			snprintf(path, sizeof(path), "%s/scratch%zu.bin", argv[1], k);
			snprintf(other, sizeof(other), "%s/other%zu.bin", argv[1], k);
			unsigned char *e = pattern_buf(n + m, 7 + k);
			int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
			if (fd < 0)
				fail("open %s: %s", path, strerror(errno));
			if (write(fd, e, n) != (ssize_t)n)
				fail("write %zu bytes: %s", n, strerror(errno));
			if (how == 0 && unlink(path) != 0)
				fail("unlink %s: %s", path, strerror(errno));
			if (how == 1) {
				gen_file(other, 1000, 3, 0);
				if (rename(other, path) != 0)
					fail("rename %s over %s: %s", other, path, strerror(errno));
			}
			const char *what = how ? "renamed over" : "unlinked";
			if (write(fd, e + n, m) != (ssize_t)m)
				fail("write of %zu bytes after %s %zu: %s", m, what, n, strerror(errno));
			struct stat st;
			if (fstat(fd, &st) != 0 || st.st_size != (off_t)(n + m))
				fail("fstat of a file %s: %lld bytes, expected %zu", what, (long long)st.st_size, n + m);
			unsigned char *b = xmalloc(n + m + 4100);
			ssize_t r = pread(fd, b, n + m + 1, 0);
			if (r != (ssize_t)(n + m))
				fail("pread of a file %s after %zu+%zu bytes: %zd (%s)", what, n, m, r,
				     r < 0 ? strerror(errno) : "short");
			expect_bytes(b, e, 0, n + m, what);
			/* truncated through the descriptor, shorter and then
			 * longer: the new size, and zeros past the bytes kept */
			size_t half = (n + m) / 2, grown = n + m + 4099;
			if (ftruncate(fd, (off_t)half) != 0 || fstat(fd, &st) != 0 || st.st_size != (off_t)half ||
			    lseek(fd, 0, SEEK_END) != (off_t)half)
				fail("ftruncate of a file %s to %zu bytes: %lld (%s)", what, half, (long long)st.st_size,
				     strerror(errno));
			if (ftruncate(fd, (off_t)grown) != 0 || fstat(fd, &st) != 0 || st.st_size != (off_t)grown)
				fail("ftruncate of a file %s to %zu bytes: %lld (%s)", what, grown, (long long)st.st_size,
				     strerror(errno));
			r = pread(fd, b, grown + 1, 0);
			if (r != (ssize_t)grown)
				fail("pread of a file %s truncated to %zu bytes: %zd", what, grown, r);
			expect_bytes(b, e, 0, half, what);
			for (size_t i = half; i < grown; i++)
				if (b[i])
					fail("a file %s, shortened to %zu bytes and grown to %zu: byte %zu is %d", what, half,
					     grown, i, b[i]);
			close(fd);
			if (how == 0 && access(path, F_OK) == 0)
				fail("%s is back after its unlink", path);
			if (how == 1)
				check_file(path, 1000, 3, 0);
			unlink(path);
			free(b);
			free(e);
		}
	printf("unlink-open: files unlinked or renamed over while open read back whole\n");
	return 0;
}
