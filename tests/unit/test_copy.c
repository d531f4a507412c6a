/* Unit tests of the library's copies of checkpoint bytes (src/copy.c):
 * every size around the string move's threshold, at every alignment of
 * source and destination, copies exactly its bytes and nothing beside
 * them, with either mode; the auto mode uses the string move exactly where
 * the processor announces fast string moves (read from /proc/cpuinfo, not
 * from the code under test) and a sanitizer does not check it. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* whether /proc/cpuinfo names erms or fsrm among the flags */
static bool cpuinfo_fast_strings(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192];
	bool found = false;
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		for (char *w = strtok(strchr(line, ':') + 1, " \t\n"); w; w = strtok(NULL, " \t\n"))
			if (strcmp(w, "erms") == 0 || strcmp(w, "fsrm") == 0)
				found = true;
		break;
	}
	fclose(f);
	return found;
}

Test(copy, modes)
{
	ckc_copy_configure(CKC_COPY_LIBC);
	cr_expect_not(ckc_copy_movsb(), "libc: never the string move");
	ckc_copy_configure(CKC_COPY_AUTO);
#if defined(__x86_64__)
	bool want = !SANITIZED && cpuinfo_fast_strings();
#else
	bool want = false;
#endif
	cr_expect_eq(ckc_copy_movsb(), want, "auto: the string move %s", want ? "expected" : "not expected");
}

static void copy_sizes(int mode)
{
	static const size_t sizes[] = { 0, 1, 7, 4095, 4096, CKC_COPY_MOVSB_MIN - 1, CKC_COPY_MOVSB_MIN,
					CKC_COPY_MOVSB_MIN + 1, (1u << 20) + 13, (3u << 20) + 4093 };
	const size_t pad = 64, most = (3u << 20) + 4093 + 2 * pad + 16;
	unsigned char *src = malloc(most), *dst = malloc(most), *want = malloc(most);
	cr_assert(src && dst && want);
	for (size_t i = 0; i < most; i++)
		src[i] = (unsigned char)(i * 131 + (i >> 11) + 7);
	ckc_copy_configure(mode);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (size_t sa = 0; sa < 8; sa++)
			for (size_t da = 0; da < 8; da += (sizes[k] > 4096 ? 3 : 1)) {
				size_t n = sizes[k];
				memset(dst, 0xA5, most);
				memset(want, 0xA5, most);
				memcpy(want + pad + da, src + sa, n);
				ckc_copy(dst + pad + da, src + sa, n);
				cr_assert(memcmp(dst, want, most) == 0,
					  "mode %d: %zu bytes, source +%zu, destination +%zu: wrong bytes", mode, n,
					  sa, da);
			}
	free(src);
	free(dst);
	free(want);
}

Test(copy, every_size_and_alignment_auto)
{
	copy_sizes(CKC_COPY_AUTO);
}

Test(copy, every_size_and_alignment_libc)
{
	copy_sizes(CKC_COPY_LIBC);
}

/* A near copy (destination 1 to 63 bytes after the source, modulo a page:
 * a restore into a buffer from malloc out of a tier piece that starts on
 * a page) never takes the string move, which ran five times slower there
 * on an AMD EPYC of family 25; a large one streams on an AMD processor
 * with AVX2 and is memcpy's elsewhere (streaming lost to memcpy on an
 * Intel Xeon); a copy at any other distance takes the string move where
 * the processor announces fast strings. */
Test(copy, near_copies_avoid_the_string_move)
{
	static const size_t dists[] = { 1, 8, 16, 31, 32, 63 }, far[] = { 0, 64, 512, 4080, 4095 };
	unsigned char *page = aligned_alloc(4096, 3 * 4096);
	cr_assert(page);
	ckc_copy_configure(CKC_COPY_AUTO);
	bool movsb = ckc_copy_movsb();
	for (size_t s = 0; s < 3; s++) {
		const unsigned char *src = page + s * 100;
		for (size_t i = 0; i < sizeof(dists) / sizeof(dists[0]); i++) {
			const unsigned char *dst = src + 4096 + dists[i];
			cr_expect(ckc_copy_near(dst, src), "distance %zu: near", dists[i]);
			cr_expect_neq(ckc_copy_way(dst, src, 16u << 20), CKC_WAY_MOVSB,
				      "distance %zu: no string move", dists[i]);
			cr_expect_eq(ckc_copy_way(dst, src, 16u << 20),
				     movsb && __builtin_cpu_supports("avx2") && __builtin_cpu_is("amd") ? CKC_WAY_STREAM
													 : CKC_WAY_LIBC,
				     "distance %zu: streamed on AMD with AVX2, else memcpy", dists[i]);
			cr_expect_eq(ckc_copy_way(dst, src, CKC_COPY_STREAM_MIN - 1), CKC_WAY_LIBC,
				     "distance %zu, under 1 MiB: memcpy", dists[i]);
		}
		for (size_t i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
			const unsigned char *dst = src + 4096 + far[i];
			cr_expect_not(ckc_copy_near(dst, src), "distance %zu: not near", far[i]);
			cr_expect_eq(ckc_copy_way(dst, src, 16u << 20), movsb ? CKC_WAY_MOVSB : CKC_WAY_LIBC,
				     "distance %zu: the string move where announced", far[i]);
		}
	}
	ckc_copy_configure(CKC_COPY_LIBC);
	cr_expect_eq(ckc_copy_way(page + 16, page, 16u << 20), CKC_WAY_LIBC, "libc: memcpy always");
	free(page);
}

/* Near copies of every size around the stream's threshold, from sources
 * at several offsets into a page: exactly their bytes, nothing beside. */
Test(copy, near_copies_keep_every_byte)
{
	static const size_t sizes[] = { CKC_COPY_MOVSB_MIN + 1, CKC_COPY_STREAM_MIN - 1, CKC_COPY_STREAM_MIN,
					CKC_COPY_STREAM_MIN + 13, (3u << 20) + 4093 };
	static const size_t dists[] = { 1, 16, 33, 63 }, soffs[] = { 0, 5, 100, 4000 };
	const size_t most = (3u << 20) + 4093 + 3 * 4096;
	void *s = NULL, *d = NULL;
	cr_assert_eq(posix_memalign(&s, 4096, most), 0);
	cr_assert_eq(posix_memalign(&d, 4096, most + 4096), 0);
	unsigned char *src = s, *dst = d, *want = malloc(most + 4096);
	cr_assert(want);
	for (size_t i = 0; i < most; i++)
		src[i] = (unsigned char)(i * 131 + (i >> 11) + 7);
	ckc_copy_configure(CKC_COPY_AUTO);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (size_t d = 0; d < sizeof(dists) / sizeof(dists[0]); d++)
			for (size_t o = 0; o < sizeof(soffs) / sizeof(soffs[0]); o++) {
				size_t n = sizes[k], at = 4096 + soffs[o] + dists[d];
				memset(dst, 0xA5, most + 4096);
				memset(want, 0xA5, most + 4096);
				memcpy(want + at, src + soffs[o], n);
				cr_assert(ckc_copy_near(dst + at, src + soffs[o]));
				ckc_copy(dst + at, src + soffs[o], n);
				cr_assert(memcmp(dst, want, most + 4096) == 0,
					  "%zu bytes, source +%zu, distance %zu: wrong bytes", n, soffs[o], dists[d]);
			}
	free(src);
	free(dst);
	free(want);
}
