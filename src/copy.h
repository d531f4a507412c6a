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
 * every copy. Builds with a sanitizer use memcpy, which it checks.
 *
 * Except a near copy: one whose destination lies 1 to CKC_COPY_NEAR - 1
 * bytes after its source, modulo a 4 KiB page. That is a restore into a
 * buffer from malloc (16 bytes into its page) out of the host tier (whose
 * pieces start on pages). On an AMD EPYC of family 25 (Zen 3) a `rep
 * movsb` of 256 MiB ran at 2.6 GB/s there and 14 to 15 GB/s at distances
 * 0, 64 or 4080; glibc's memcpy of that size (non-temporal stores)
 * at 3.4 to 6.3 GB/s for distances up to 512 bytes; 32-byte loads with
 * non-temporal stores at 13 to 16 GB/s at every distance (16 MiB: 15 to
 * 20 GB/s). The kernel's copy into such a buffer is a `rep movsb` too: a
 * read of a cached file into it ran at 2 GB/s. On an AMD processor with
 * AVX2, a near copy of CKC_COPY_STREAM_MIN bytes or more is made with those
 * stores; every other near copy by memcpy. On the Intel Xeon of an H200
 * machine the string move, memcpy and those stores ran a near copy of
 * 16 MiB at 8.0, 8.0 and 7.7 GB/s, and a program's fread restores into
 * such a buffer (then copied to the device) took 0.50 s with the stores
 * against 0.37 s with memcpy. */
#ifndef CKC_COPY_H
#define CKC_COPY_H

#include <stdbool.h>
#include <signal.h>
#include <stddef.h>

/* Below this a string move's start-up costs more than it saves. */
#define CKC_COPY_MOVSB_MIN (64u << 10)
/* A near copy: destination 1 to CKC_COPY_NEAR - 1 bytes after the source,
 * modulo CKC_COPY_PAGE. */
#define CKC_COPY_PAGE 4096u
#define CKC_COPY_NEAR 64u
/* Near copies from this size use non-temporal stores: below it the
 * destination stays in the caches, where memcpy's stores are as fast. */
#define CKC_COPY_STREAM_MIN (1u << 20)

/* How ckc_copy makes one copy. */
enum { CKC_WAY_LIBC = 0, CKC_WAY_MOVSB, CKC_WAY_STREAM };

enum { CKC_COPY_AUTO = 0, CKC_COPY_LIBC };

/* The mode (CKPTCACHE_COPY); CKC_COPY_AUTO uses the string move where the
 * processor announces it. */
void ckc_copy_configure(int mode);

/* Whether copies of CKC_COPY_MOVSB_MIN bytes or more use `rep movsb`. */
bool ckc_copy_movsb(void);

/* Whether dst lies 1 to CKC_COPY_NEAR - 1 bytes after src, modulo a page. */
bool ckc_copy_near(const void *dst, const void *src);

/* The way (CKC_WAY_*) ckc_copy copies n bytes from src to dst. */
int ckc_copy_way(const void *dst, const void *src, size_t n);

/* memcpy(dst, src, n), for copies of checkpoint bytes; the ranges do not
 * overlap. */
void ckc_copy(void *dst, const void *src, size_t n);

/* ckc_copy of memory the program named (its buffer of a write or a read):
 * where the program cannot read src or write dst, the fault ends the copy
 * with -EFAULT, as the kernel answers such a buffer, where it would end
 * the program. The library's handlers of SIGSEGV and SIGBUS call
 * ckc_copy_fault first. 0 or -EFAULT (the bytes copied before the fault
 * are left where they went). */
int ckc_copy_checked(void *dst, const void *src, size_t n);
/* In a handler of SIGSEGV or SIGBUS (uc: its third argument): returns only
 * where the fault is not one of a checked copy of this thread's. */
void ckc_copy_fault(int sig, const siginfo_t *si, void *uc);

#endif
