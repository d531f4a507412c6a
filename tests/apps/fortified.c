/* A program built with -O2 -D_FORTIFY_SOURCE=2, as distributions build
 * theirs: it writes a checkpoint, then reads it back through read, pread
 * and fread into a buffer whose size the compiler knows, with lengths it
 * does not know, so that the reads go to glibc's checking entry points
 * (__read_chk, __pread_chk, __fread_chk). Every byte read is compared with
 * the byte written. A text checkpoint beside it (FILE.txt) is written with
 * fwprintf and read back with fgetws (__fwprintf_chk, __fgetws_chk).
 *   fortified FILE BYTES      exit 0: equal; 1: a difference or an error */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#define CAP (4u << 20)
static unsigned char want[CAP], got[CAP];

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "fortified: %s %s: %s\n", what, path, strerror(errno));
	return 1;
}

static int same(const char *how, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i]) {
			fprintf(stderr, "fortified: %s: byte %zu is %u, expected %u\n", how, i, got[i], want[i]);
			return 0;
		}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fortified FILE BYTES (at most %u)\n", CAP);
		return 2;
	}
	const char *path = argv[1];
	size_t n = strtoul(argv[2], NULL, 0);
	if (n == 0 || n > CAP) {
		fprintf(stderr, "fortified: BYTES must be 1 to %u\n", CAP);
		return 2;
	}
	for (size_t i = 0; i < n; i++)
		want[i] = (unsigned char)(i * 131 + 7 + i / 4093);
	/* a length whose bound the compiler cannot see, as in a real program */
	volatile size_t vn = n;
	n = vn;

	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return fail("open", path);
	for (size_t done = 0; done < n;) {
		ssize_t w = write(fd, want + done, n - done);
		if (w <= 0)
			return fail("write", path);
		done += (size_t)w;
	}
	if (close(fd) != 0)
		return fail("close", path);

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return fail("open", path);
	/* the first call of each loop has the whole buffer: the checking entry */
	size_t done = 0;
	while (done < n) {
		ssize_t r = done ? read(fd, got + done, n - done) : read(fd, got, n);
		if (r < 0)
			return fail("read", path);
		if (r == 0)
			break;
		done += (size_t)r;
	}
	if (done != n || !same("read", n))
		return 1;
	memset(got, 0, n);
	done = 0;
	while (done < n) {
		ssize_t r = done ? pread(fd, got + done, n - done, (off_t)done) : pread(fd, got, n, 0);
		if (r < 0)
			return fail("pread", path);
		if (r == 0)
			break;
		done += (size_t)r;
	}
	if (done != n || !same("pread", n))
		return 1;
	close(fd);

	memset(got, 0, n);
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail("fopen", path);
	if (fread(got, 1, n, f) != n)
		return fail("fread", path);
	fclose(f);
	if (!same("fread", n))
		return 1;
	char tp[4096];
	snprintf(tp, sizeof(tp), "%s.txt", path);
	FILE *w = fopen(tp, "w");
	if (!w)
		return fail("fopen", tp);
	int k = fwprintf(w, L"step %d of %ls\n", 42, L"many");
	if (fclose(w) != 0 || k != 16) {
		fprintf(stderr, "fortified: fwprintf to %s gave %d, expected 16\n", tp, k);
		return 1;
	}
	wchar_t line[64];
	FILE *r = fopen(tp, "r");
	if (!r)
		return fail("fopen", tp);
	/* a length the compiler does not know: the checking entry point */
	if (!fgetws(line, (int)(sizeof(line) / sizeof(line[0])) - (argc - 3), r) ||
	    wcscmp(line, L"step 42 of many\n") != 0) {
		fprintf(stderr, "fortified: fgetws of %s did not read back what fwprintf wrote\n", tp);
		return 1;
	}
	fclose(r);
	printf("fortified: %zu bytes read back equal through read, pread and fread; fwprintf and fgetws agree\n",
	       n);
	return 0;
}
