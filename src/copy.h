/* The library's copies of checkpoint bytes, made the way the kernel makes
 * the page cache's.
 *
 * A program's read() that the page cache serves is a copy by the kernel
 * (copy_to_user), and on x86-64 processors that announce fast string moves
 * (ERMS or FSRM in CPUID leaf 7) the kernel makes it with one `rep movsb`.
 * glibc's memcpy moves a copy this large with non-temporal stores instead.
 * On the build machine (AMD EPYC, 2 CPUs) a 16 MiB copy ran at 14.3 to
 * 21.6 GB/s with memcpy, 16.5 to 25.0 with `rep movsb` and 15.9 to 25.8
 * through pread() of a cached file (scripts/bench/copies), so a restore
 * served from the host tier by memcpy lost to the program without the
 * library by the difference; on an H100 machine (Intel Xeon) memcpy and
 * the string move were within the run-to-run spread. So copies of
 * CKC_COPY_MOVSB_MIN bytes or more use `rep movsb` where the processor
 * announces it, memcpy otherwise. CKPTCACHE_COPY=libc keeps memcpy for
 * every copy. Builds with a sanitizer use memcpy, which it checks. */
#ifndef CKC_COPY_H
#define CKC_COPY_H

#include <stdbool.h>
#include <stddef.h>

/* Below this a string move's start-up costs more than it saves. */
#define CKC_COPY_MOVSB_MIN (64u << 10)

enum { CKC_COPY_AUTO = 0, CKC_COPY_LIBC };

/* The mode (CKPTCACHE_COPY); CKC_COPY_AUTO uses the string move where the
 * processor announces it. */
void ckc_copy_configure(int mode);

/* Whether copies of CKC_COPY_MOVSB_MIN bytes or more use `rep movsb`. */
bool ckc_copy_movsb(void);

/* memcpy(dst, src, n), for copies of checkpoint bytes; the ranges do not
 * overlap. */
void ckc_copy(void *dst, const void *src, size_t n);

#endif
