/* The engine's table of real functions (resolved with the real dlsym, so
 * that nothing here is bound to a wrapper of the preloaded library) and the
 * full-transfer helpers every tier uses. */
#include "config.h"

#include "io.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lockrank.h"

#ifdef CKC_LOCK_CHECK_IO
#define CKC_IO_CHECK(what) ckc_rank_io_check(what)
#else
#define CKC_IO_CHECK(what) ((void)0)
#endif

__thread int ckc_io_guard __attribute__((tls_model("initial-exec")));

/* ---- resolution ----------------------------------------------------- */

/* The real functions, once resolved (with the wrappers' data: the first
 * use writes them in every process). */
CKC_HOT_DATA static struct {
	int (*open)(const char *, int, ...);
	int (*fallocate)(int, int, off_t, off_t);
	int (*posix_fallocate)(int, off_t, off_t);
	void (*free)(void *);
#define IO_FIELD(name, ret, params, args) ret(*name) params;
	CKC_IO_LIBC(IO_FIELD)
#undef IO_FIELD
} io_real;

static pthread_once_t io_once = PTHREAD_ONCE_INIT;
CKC_HOT_DATA static ckc_dlsym_fn io_dlsym_fn;

/* Called by the interposed dlsym, which a sanitizer's runtime uses before
 * its shadow memory exists: no instrumentation here. */
__attribute__((no_sanitize_address, no_sanitize("undefined"), no_sanitize("thread")))
CKC_START_PATH ckc_dlsym_fn ckc_io_real_dlsym(void)
{
	ckc_dlsym_fn f = __atomic_load_n(&io_dlsym_fn, __ATOMIC_ACQUIRE);
	if (f)
		return f;
	/* dlsym@GLIBC_2.34 is the current one */
	f = (ckc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!f)
		f = (ckc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	__atomic_store_n(&io_dlsym_fn, f, __ATOMIC_RELEASE);
	return f;
}

/* What an entry whose function cannot be found calls instead: it fails
 * with ENOSYS (the stubs take no arguments: on the System V ABI extra
 * arguments are harmless to a callee that ignores them). */
static long io_stub_neg1(void)
{
	errno = ENOSYS;
	return -1;
}

static void *io_stub_null(void)
{
	errno = ENOSYS;
	return NULL;
}

static size_t io_stub_zero(void)
{
	errno = ENOSYS;
	return 0;
}

static void io_stub_void(void)
{
}

/* The next definition of name after the object holding this code: the C
 * library's in the preloaded library, whatever a test program links. */
CKC_START_PATH static void *io_sym(const char *name)
{
	ckc_dlsym_fn d = ckc_io_real_dlsym();
	void *f = d ? d(RTLD_NEXT, name) : NULL;
	if (!f) /* a compatibility symbol only */
		f = dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5");
	return f;
}

/* free and realloc must be those of the allocator the engine's malloc
 * comes from: the first in the global scope (a sanitizer's runtime
 * preloaded before the library, a program's own allocator), unless that is
 * this object's own wrapper, whose job is then the next one's. */
/* this object's own wrappers of the allocator, where it has them
 * (ckc_io_own_alloc) */
#define IO_OWN_MAX 8
CKC_HOT_DATA static void *io_own[IO_OWN_MAX];

CKC_START_PATH void ckc_io_own_alloc(void *const *fns, size_t n)
{
	for (size_t i = 0; i < n && i < IO_OWN_MAX; i++)
		io_own[i] = fns[i];
}

CKC_START_PATH static void *io_alloc_sym(const char *name)
{
	ckc_dlsym_fn d = ckc_io_real_dlsym();
	void *f = d ? d(RTLD_DEFAULT, name) : NULL;
	bool own = !f;
	for (int i = 0; i < IO_OWN_MAX && !own; i++)
		own = io_own[i] && f == io_own[i];
	return own ? io_sym(name) : f;
}

/* Entries that are the allocator's (io_alloc_sym) */
CKC_START_PATH static bool io_is_alloc(const char *name)
{
	return !strcmp(name, "realloc") || !strcmp(name, "malloc") || !strcmp(name, "calloc") ||
	       !strcmp(name, "posix_memalign");
}

/* One entry looked up: the allocator's realloc as free's (io_alloc_sym),
 * the C library's dlsym, or the next definition; a missing one is a stub
 * that fails. */
#define IO_ONE(name, ret, params, args)                                                             \
	CKC_START_PATH static ret(*io_one_##name(void)) params                                                      \
	{                                                                                            \
		ret(*f) params = (ret(*) params)(io_is_alloc(#name) ? io_alloc_sym(#name)             \
					 : !strcmp(#name, "dlsym") ? (void *)ckc_io_real_dlsym()      \
								     : io_sym(#name));                \
		if (!f)                                                                              \
			f = (ret(*) params)_Generic((ret *)0, FILE **: (void (*)(void))io_stub_null,  \
						    void **: !strcmp(#name, "mmap")                   \
							     ? (void (*)(void))io_stub_neg1 /* MAP_FAILED */ \
							     : (void (*)(void))io_stub_null,          \
						    size_t *: (void (*)(void))io_stub_zero,           \
						    default: (void (*)(void))io_stub_neg1);           \
		__atomic_store_n(&io_real.name, f, __ATOMIC_RELEASE);                                \
		return f;                                                                            \
	}
CKC_IO_LIBC(IO_ONE)
#undef IO_ONE

static void io_resolve_all(void)
{
	io_real.open = (int (*)(const char *, int, ...))io_sym("open");
	io_real.fallocate = (int (*)(int, int, off_t, off_t))io_sym("fallocate");
	io_real.posix_fallocate = (int (*)(int, off_t, off_t))io_sym("posix_fallocate");
	if (!io_real.open)
		io_real.open = (int (*)(const char *, int, ...))(void (*)(void))io_stub_neg1;
	if (!__atomic_load_n(&io_real.free, __ATOMIC_ACQUIRE)) {
		void (*f)(void *) = (void (*)(void *))io_alloc_sym("free");
		__atomic_store_n(&io_real.free, f ? f : (void (*)(void *))(void (*)(void))io_stub_void,
				 __ATOMIC_RELEASE);
	}
#define IO_RESOLVE(name, ret, params, args)                     \
	if (!__atomic_load_n(&io_real.name, __ATOMIC_ACQUIRE)) \
		(void)io_one_##name();
	CKC_IO_LIBC(IO_RESOLVE)
#undef IO_RESOLVE
}

static void io_once_resolve(void)
{
	pthread_once(&io_once, io_resolve_all);
}

/* The defaults before resolution: each looks up its own entry on its first
 * call (a process that never starts the engine pays for the few it used). */
#define IO_LAZY(name, ret, params, args)                                            \
	CKC_START_PATH static ret io_lazy_##name params                                             \
	{                                                                            \
		ret(*io_fn_) params = __atomic_load_n(&io_real.name, __ATOMIC_ACQUIRE);  \
		if (!io_fn_)                                                         \
			io_fn_ = io_one_##name();                                         \
		return io_fn_ args;                                                       \
	}
CKC_IO_LIBC(IO_LAZY)
#undef IO_LAZY

CKC_START_PATH static void io_lazy_free(void *p)
{
	void (*f)(void *) = __atomic_load_n(&io_real.free, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (void (*)(void *))io_alloc_sym("free");
		if (!f)
			f = (void (*)(void *))(void (*)(void))io_stub_void;
		__atomic_store_n(&io_real.free, f, __ATOMIC_RELEASE);
	}
	f(p);
}

/* ---- the entries that are more than one C library function ---------- */

static int io_open(const char *path, int flags, mode_t mode)
{
	io_once_resolve();
	return io_real.open(path, flags | O_CLOEXEC, mode);
}

static int io_fallocate(int fd, int mode, off_t off, off_t len)
{
	io_once_resolve();
#ifdef HAVE_FALLOCATE
	if (io_real.fallocate)
		return io_real.fallocate(fd, mode, off, len);
#endif
	(void)mode;
	int rc = io_real.posix_fallocate ? io_real.posix_fallocate(fd, off, len) : ENOSYS;
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}

static ssize_t io_pread_cached(int fd, void *buf, size_t len, off_t off)
{
#ifdef RWF_NOWAIT
	struct iovec v = { buf, len };
	return ckc_io.preadv2(fd, &v, 1, off, RWF_NOWAIT);
#else
	(void)fd, (void)buf, (void)len, (void)off;
	errno = EOPNOTSUPP;
	return -1;
#endif
}

/* cachestat(2) (Linux 6.5), by number where the headers predate it: the
 * same number on every architecture */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

struct io_cachestat_range {
	uint64_t off, len;
};

struct io_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* mincore(2) over a mapping of the range, for kernels without cachestat. */
static int64_t io_cached_mincore(int fd, uint64_t off, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t start = off / (uint64_t)pg * (uint64_t)pg, span = off + len - start;
	size_t npg = (size_t)((span + (uint64_t)pg - 1) / (uint64_t)pg);
	void *m = ckc_io.mmap(NULL, (size_t)span, PROT_READ, MAP_SHARED, fd, (off_t)start);
	if (m == MAP_FAILED)
		return -1;
	unsigned char *vec = ckc_io.malloc(npg);
	int64_t n = -1;
	if (vec && mincore(m, (size_t)span, vec) == 0) {
		n = 0;
		for (size_t i = 0; i < npg; i++)
			n += vec[i] & 1;
		n *= pg;
	}
	ckc_io.free(vec);
	ckc_io.munmap(m, (size_t)span);
	return n;
}

static int64_t io_cached(int fd, uint64_t off, uint64_t len)
{
	static atomic_bool no_cachestat;
	struct io_cachestat_range r = { off, len };
	struct io_cachestat cs;

	if (len == 0)
		return 0;
	if (!atomic_load_explicit(&no_cachestat, memory_order_relaxed)) {
		if (ckc_syscall6(SYS_cachestat, fd, (long)&r, (long)&cs, 0, 0, 0) == 0)
			return (int64_t)(cs.nr_cache * (uint64_t)sysconf(_SC_PAGESIZE));
		if (errno != ENOSYS)
			return -1;
		atomic_store(&no_cachestat, true);
	}
	return io_cached_mincore(fd, off, len);
}

#define IO_LAZY_ENTRY(name, ret, params, args) .name = io_lazy_##name,
/* (with the fast paths' data: the loader writes each of its pointers in
 * every process) */
CKC_HOT_DATA ckc_io_t ckc_io = {
	.open = io_open, .pread_cached = io_pread_cached, .cached = io_cached,
	.fallocate = io_fallocate, .free = io_lazy_free,
	CKC_IO_LIBC(IO_LAZY_ENTRY)
};
#undef IO_LAZY_ENTRY

void ckc_io_resolve(void)
{
	io_once_resolve();
	if (ckc_io.free == io_lazy_free)
		ckc_io.free = io_real.free;
#define IO_SET(name, ret, params, args)      \
	if (ckc_io.name == io_lazy_##name)    \
		ckc_io.name = io_real.name;
	CKC_IO_LIBC(IO_SET)
#undef IO_SET
}

void ckc_io_reset(void)
{
	io_once_resolve();
	ckc_io.open = io_open;
	ckc_io.pread_cached = io_pread_cached;
	ckc_io.cached = io_cached;
	ckc_io.fallocate = io_fallocate;
	ckc_io.free = io_real.free;
#define IO_RESET(name, ret, params, args) ckc_io.name = io_real.name;
	CKC_IO_LIBC(IO_RESET)
#undef IO_RESET
}

ssize_t ckc_io_pwrite_most(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	size_t done = 0;

	CKC_IO_CHECK("pwrite");
	while (done < len) {
		ssize_t n = ckc_io.pwrite(fd, p + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO; /* (what ckc_io_pwrite_all says then) */
			return done > 0 ? (ssize_t)done : -errno;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t ckc_io_pwritev_most(int fd, const struct iovec *iov, int cnt, off_t off)
{
	size_t done = 0;
	int at = 0;

	CKC_IO_CHECK("pwritev");
	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	while (at < cnt) {
		ssize_t n = ckc_io.pwritev(fd, iov + at, cnt - at, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (n == 0 && iov[at].iov_len > 0))
			return done > 0 ? (ssize_t)done : n < 0 ? -errno : -EIO;
		done += (size_t)n;
		/* past the pieces written whole; the rest of one written in
		 * part on its own, then on with the next */
		while (at < cnt && (size_t)n >= iov[at].iov_len)
			n -= (ssize_t)iov[at++].iov_len;
		if (at < cnt && n > 0) {
			size_t left = iov[at].iov_len - (size_t)n;
			ssize_t m = ckc_io_pwrite_most(fd, (const char *)iov[at].iov_base + n, left, off + (off_t)done);
			if (m < 0)
				return (ssize_t)done;
			done += (size_t)m;
			if ((size_t)m < left)
				return (ssize_t)done;
			at++;
		}
	}
	return (ssize_t)done;
}

int ckc_io_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t n = ckc_io_pwrite_most(fd, buf, len, off);
	return n < 0 ? (int)n : (size_t)n < len ? -errno : 0;
}

size_t ckc_io_pread_cached_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t done = 0;

	CKC_IO_CHECK("pread");
	while (done < len) {
		ssize_t n = ckc_io.pread_cached(fd, p + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	return done;
}

ssize_t ckc_io_pread_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = ckc_io.pread(fd, p + done, len - done, off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}
