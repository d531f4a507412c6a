/* The engine's system calls: one table of the real functions, which the
 * engine, the tiers and the hints call through and never by name (src/sys.h
 * poisons the interposed names). Its entries are resolved with the real
 * dlsym (the next object after this one, where the C library is), never
 * bound at link time: in the preloaded library a call by name would reach
 * the library's own wrapper. Tests swap entries to inject faults (ENOSPC,
 * EIO, slow storage); the interposer swaps open for one that keeps the
 * engine's descriptors out of the program's way. */
#ifndef CKC_IO_H
#define CKC_IO_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* The C library functions of the table, by name, return type, parameters
 * and the arguments that pass them on. */
#define CKC_IO_LIBC(X)                                                                    \
	X(close, int, (int fd), (fd))                                                     \
	X(pread, ssize_t, (int fd, void *buf, size_t len, off_t off), (fd, buf, len, off)) \
	X(pwrite, ssize_t, (int fd, const void *buf, size_t len, off_t off),              \
	  (fd, buf, len, off))                                                            \
	X(preadv2, ssize_t, (int fd, const struct iovec *v, int n, off_t off, int fl),    \
	  (fd, v, n, off, fl))                                                            \
	X(pwritev, ssize_t, (int fd, const struct iovec *v, int n, off_t off), (fd, v, n, off)) \
	X(write, ssize_t, (int fd, const void *buf, size_t len), (fd, buf, len))          \
	X(fsync, int, (int fd), (fd))                                                     \
	X(ftruncate, int, (int fd, off_t len), (fd, len))                                 \
	X(rename, int, (const char *from, const char *to), (from, to))                    \
	X(renameat2, int, (int ofd, const char *op, int nfd, const char *np, unsigned fl), \
	  (ofd, op, nfd, np, fl))                                                         \
	X(unlink, int, (const char *path), (path))                                        \
	X(stat, int, (const char *path, struct stat *st), (path, st))                     \
	X(lstat, int, (const char *path, struct stat *st), (path, st))                    \
	X(fstat, int, (int fd, struct stat *st), (fd, st))                                \
	X(access, int, (const char *path, int how), (path, how))                          \
	X(mkdir, int, (const char *path, mode_t mode), (path, mode))                      \
	X(chmod, int, (const char *path, mode_t mode), (path, mode))                      \
	X(fchmod, int, (int fd, mode_t mode), (fd, mode))                                 \
	X(fchown, int, (int fd, uid_t uid, gid_t gid), (fd, uid, gid))                    \
	X(futimens, int, (int fd, const struct timespec *t), (fd, t))                     \
	X(linkat, int, (int ofd, const char *op, int nfd, const char *np, int fl),        \
	  (ofd, op, nfd, np, fl))                                                         \
	X(flock, int, (int fd, int op), (fd, op))                                         \
	X(mmap, void *, (void *a, size_t len, int prot, int fl, int fd, off_t off),       \
	  (a, len, prot, fl, fd, off))                                                    \
	X(munmap, int, (void *a, size_t len), (a, len))                                   \
	X(madvise, int, (void *a, size_t len, int advice), (a, len, advice))              \
	X(fopen, FILE *, (const char *path, const char *mode), (path, mode))              \
	X(fclose, int, (FILE *f), (f))                                                    \
	X(fwrite, size_t, (const void *p, size_t size, size_t n, FILE *f), (p, size, n, f)) \
	X(opendir, DIR *, (const char *path), (path))                                     \
	X(rmdir, int, (const char *path), (path))                                         \
	X(closedir, int, (DIR *d), (d))                                                   \
	X(realloc, void *, (void *p, size_t n), (p, n))                                   \
	X(malloc, void *, (size_t n), (n))                                                \
	X(socket, int, (int d, int t, int p), (d, t, p))                                  \
	X(accept4, int, (int s, struct sockaddr *a, socklen_t *n, int fl), (s, a, n, fl)) \
	X(eventfd, int, (unsigned int v, int fl), (v, fl))                                \
	X(calloc, void *, (size_t k, size_t n), (k, n))                                   \
	X(posix_memalign, int, (void **p, size_t a, size_t n), (p, a, n))                 \
	X(dlsym, void *, (void *h, const char *name), (h, name))                          \
	X(pthread_create, int, (pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg), \
	  (t, a, fn, arg))

typedef struct ckc_io {
	/* open(2) with O_CLOEXEC added */
	int (*open)(const char *path, int flags, mode_t mode);
	/* pread of what the page cache holds, never waiting for the device:
	 * fewer bytes (or -1 with EAGAIN) where it holds nothing */
	ssize_t (*pread_cached)(int fd, void *buf, size_t len, off_t off);
	/* bytes of [off, off+len) that the page cache holds (dirty ones
	 * included), or -1 when the kernel cannot say */
	int64_t (*cached)(int fd, uint64_t off, uint64_t len);
	/* fallocate(2), else posix_fallocate */
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	/* the free of the allocator malloc comes from (not this library's) */
	void (*free)(void *p);
#define CKC_IO_FIELD(name, ret, params, args) ret(*name) params;
	CKC_IO_LIBC(CKC_IO_FIELD)
#undef CKC_IO_FIELD
} ckc_io_t;

/* The table in use; never NULL: an entry not resolved yet looks up its
 * own function on its first call. */
extern ckc_io_t ckc_io;

/* Resolves the entries still at their defaults (the interposer calls it
 * as the engine starts, before any thread of the engine runs). */
void ckc_io_resolve(void);
/* Names the preloaded library's own wrappers of the allocator's
 * functions (n of them), which the engine's must never be (given before
 * they are first looked up). */
void ckc_io_own_alloc(void *const *fns, size_t n);

/* A system call made here, not through the C library's syscall() (which
 * the preloaded library wraps, intercept/posix.c): -1 with errno set on
 * failure, as syscall() returns. A sanitizer's runtime reaches it before
 * its shadow memory exists (setrlimit): no instrumentation. */
__attribute__((no_sanitize_address, no_sanitize("undefined"), no_sanitize("thread")))
static inline long ckc_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c,
		      x3 __asm__("x3") = d, x4 __asm__("x4") = e, x5 __asm__("x5") = f;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
	r = x0;
#else
#error "ckc_syscall6: no system call sequence for this architecture"
#endif
	if ((unsigned long)r > -4096ul) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* The real dlsym (dlvsym is never interposed). */
typedef void *(*ckc_dlsym_fn)(void *, const char *);
ckc_dlsym_fn ckc_io_real_dlsym(void);

/* Nonzero while this thread runs engine code (the engine's threads, or a
 * wrapper calling into the engine): a wrapper reached meanwhile (by a
 * library the engine calls, such as the CUDA driver or libunwind) goes
 * straight to libc. */
extern __thread int ckc_io_guard __attribute__((tls_model("initial-exec")));

/* Restores every entry to the real function. */
void ckc_io_reset(void);

/* Writes all of buf at off, retrying short writes and EINTR.
 * Returns 0 on success, -errno on failure. */
int ckc_io_pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* As much of [buf, buf+len) written at off as the file takes: the bytes
 * written where a write failed after some (a file size limit reached:
 * the kernel's short write, the next write failing; errno says why), or
 * -errno where the first did. */
ssize_t ckc_io_pwrite_most(int fd, const void *buf, size_t len, off_t off);
/* The same for the cnt pieces of iov (at most IOV_MAX), one pwritev(2) at a
 * time: the bytes written (short where the file takes no more, or at a
 * piece the kernel cannot read: EFAULT), or -errno where none was. */
ssize_t ckc_io_pwritev_most(int fd, const struct iovec *iov, int cnt, off_t off);

/* Whether a call failed (-errno rc) for want of a descriptor or of memory
 * (the process's descriptor table full, say): that passes, and the call
 * is worth making again later. */
static inline bool ckc_io_short(int rc)
{
	return rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM;
}

/* Reads len bytes at off, retrying short reads and EINTR. Returns the number
 * of bytes read (less than len only at end of file), or -errno. */
ssize_t ckc_io_pread_all(int fd, void *buf, size_t len, off_t off);

/* Reads what the page cache holds of [off, off+len) from its start on.
 * Returns the bytes read (0 when it holds nothing there, or cannot say). */
size_t ckc_io_pread_cached_all(int fd, void *buf, size_t len, off_t off);

#endif
