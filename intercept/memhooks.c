/* Calls that end, move or hand to the kernel memory the cache may owe
 * (device capture): free, realloc, munmap, mremap and madvise drop or fill
 * owed pages first; send/recv and the stdio calls that pass the program's
 * buffer straight to the kernel fill them; sigaction and signal keep the
 * library's SIGSEGV handler in front of the program's, and put the
 * program's handlers of asynchronous signals behind the library's
 * (src/sigdefer.h). Each costs one load when nothing is owed. */
#include "config.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "intercept.h"
#include "owed.h"
#include "sigdefer.h"

#undef fwrite_unlocked
#undef fread_unlocked

/* Something is owed, and the caller is the program (the library's own
 * calls, made with its locks held, never touch owed memory). */
static inline bool owed_any(void)
{
	return __builtin_expect(atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) != 0, 0) &&
	       !ckc_io_guard;
}

/* ---- the allocator ---------------------------------------------------- */

extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_memalign(size_t, size_t);

CKC_HOT_DATA static void (*real_free)(void *);
CKC_HOT_DATA static void *(*real_realloc)(void *, size_t);
CKC_HOT_DATA static void *(*real_malloc)(size_t);
CKC_HOT_DATA static void *(*real_calloc)(size_t, size_t);
CKC_HOT_DATA static void *(*real_memalign)(size_t, size_t);
CKC_HOT_DATA static int (*real_posix_memalign)(void **, size_t, size_t);
CKC_HOT_DATA static void *(*real_aligned_alloc)(size_t, size_t);
static __thread int mem_resolving;

/* The next allocator (the C library's, or one preloaded after this
 * library); glibc's own while the lookup itself allocates. */
CKC_START_PATH static void mem_resolve(void)
{
	if (real_free || mem_resolving)
		return;
	mem_resolving = 1;
	dlsym_fn rd = ckc_real_dlsym();
	void *f = rd ? rd(RTLD_NEXT, "free") : NULL;
	void *r = rd ? rd(RTLD_NEXT, "realloc") : NULL;
	void *m = rd ? rd(RTLD_NEXT, "malloc") : NULL;
	void *c = rd ? rd(RTLD_NEXT, "calloc") : NULL;
	void *ma = rd ? rd(RTLD_NEXT, "memalign") : NULL;
	void *pm = rd ? rd(RTLD_NEXT, "posix_memalign") : NULL;
	void *aa = rd ? rd(RTLD_NEXT, "aligned_alloc") : NULL;
	real_malloc = m ? (void *(*)(size_t))m : __libc_malloc;
	real_calloc = c ? (void *(*)(size_t, size_t))c : __libc_calloc;
	real_memalign = ma ? (void *(*)(size_t, size_t))ma : __libc_memalign;
	real_posix_memalign = (int (*)(void **, size_t, size_t))pm;
	real_aligned_alloc = (void *(*)(size_t, size_t))aa;
	real_realloc = r ? (void *(*)(void *, size_t))r : __libc_realloc;
	real_free = f ? (void (*)(void *))f : __libc_free;
	mem_resolving = 0;
	ckc_mem_route();
}

/* ---- the way each call goes ------------------------------------------- */

/* The function each of free, malloc and realloc calls: the next
 * allocator's, or the wrapper's slow path while the allocator is not
 * looked up yet, a probe is under way, the allocator is watched, or
 * (free, realloc) something is owed. A walker frees as often as it opens
 * a file several times over (tar: 19 frees a file): one load and a jump. */
static void free_slow(void *p);
static void *malloc_slow(size_t n);
static void *realloc_slow(void *p, size_t n);
static void free_watched(void *p);
static void *malloc_watched(size_t n);
static void *realloc_watched(void *p, size_t n);
CKC_HOT_DATA static void (*_Atomic free_fn)(void *) = free_slow;
CKC_HOT_DATA static void *(*_Atomic malloc_fn)(size_t) = malloc_slow;
CKC_HOT_DATA static void *(*_Atomic realloc_fn)(void *, size_t) = realloc_slow;

CKC_HOT_DATA static atomic_int free_probes;
CKC_HOT_DATA static atomic_bool alloc_watch;

/* 0: all three fast; 1: free and realloc slow; 2: all three slow; 3: all
 * three counted (the allocator watched, and nothing else to look at). */
CKC_START_PATH static int mem_way(void)
{
	if (!real_free || !real_malloc || !real_realloc)
		return 2;
	bool watch = atomic_load(&alloc_watch);
	if (atomic_load(&free_probes) != 0 || atomic_load(&ckc_owed_count) != 0)
		return watch ? 2 : 1;
	return watch ? 3 : 0;
}

/* After each change of what mem_way looks at. Whoever stores looks again
 * after its store, and stores again while what it stored is out of date:
 * of two changes at once, the later one's way stays. */
CKC_START_PATH void ckc_mem_route(void)
{
	for (int way = mem_way();;) {
		atomic_store(&free_fn, way == 3 ? free_watched : way ? free_slow : real_free);
		atomic_store(&realloc_fn, way == 3 ? realloc_watched : way ? realloc_slow : real_realloc);
		atomic_store(&malloc_fn, way == 3 ? malloc_watched : way == 2 ? malloc_slow : real_malloc);
		int now = mem_way();
		if (now == way)
			return;
		way = now;
	}
}

/* ---- a handler that interrupts the allocator -------------------------- */

/* Set for good once the program has put a handler behind the library's
 * (src/sigdefer.h) and the cache has started (before, a handler's calls
 * pass to the real files, which allocates nothing): from then on each call
 * of the allocator counts in ckc_tl_alloc, and a handler that interrupts
 * one runs as it returns. Until then, and in a program without a handler
 * or a checkpoint, the wrappers below are a load and a jump. A handler
 * that interrupts a call begun just before the watch began is not held
 * (a window of one call of the allocator at the cache's start). */
static atomic_bool alloc_handlers;

static inline void alloc_in(void)
{
	ckc_tl_alloc++;
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void alloc_out(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	--ckc_tl_alloc;
	if (__builtin_expect(ckc_tl_sigdefer != 0, 0) && ckc_tl_outside())
		ckc_sig_run_deferred();
}

static inline bool alloc_fast(const void *fn)
{
	return __builtin_expect(fn != NULL && !atomic_load_explicit(&alloc_watch, memory_order_relaxed), 1);
}

/* The allocator's call fn(args), counted, with glibc's own (dflt) until
 * the allocator is looked up. */
#define ALLOC_SLOW(ret, fn, dflt, args)                 \
	do {                                            \
		if (!(fn))                              \
			mem_resolve();                  \
		alloc_in();                             \
		ret = (fn) ? (fn)args : (dflt)args;     \
		alloc_out();                            \
	} while (0)

CKC_START_PATH static void *malloc_slow(size_t n)
{
	void *p;
	ALLOC_SLOW(p, real_malloc, __libc_malloc, (n));
	return p;
}

/* The watched calls with nothing else to look at (mem_way 3: the
 * allocator is looked up, no probe, nothing owed): counted, and no more
 * (a program that allocates on every row it reads pays two thread-local
 * counts a call, not the slow paths' look at each condition). */
static void *malloc_watched(size_t n)
{
	alloc_in();
	void *p = real_malloc(n);
	alloc_out();
	return p;
}

static void free_watched(void *p)
{
	alloc_in();
	real_free(p);
	alloc_out();
}

static void *realloc_watched(void *p, size_t n)
{
	alloc_in();
	void *q = real_realloc(p, n);
	alloc_out();
	return q;
}

CKC_HOT_PATH CKC_EXPORT void *malloc(size_t n)
{
	return atomic_load_explicit(&malloc_fn, memory_order_relaxed)(n);
}

__attribute__((noinline)) static void *calloc_slow(size_t k, size_t n)
{
	void *p;
	ALLOC_SLOW(p, real_calloc, __libc_calloc, (k, n));
	return p;
}

CKC_HOT_PATH CKC_EXPORT void *calloc(size_t k, size_t n)
{
	void *(*f)(size_t, size_t) = real_calloc;
	if (alloc_fast(f))
		return f(k, n);
	return calloc_slow(k, n);
}

CKC_EXPORT void *memalign(size_t a, size_t n)
{
	void *(*f)(size_t, size_t) = real_memalign;
	if (alloc_fast(f))
		return f(a, n);
	void *p;
	ALLOC_SLOW(p, real_memalign, __libc_memalign, (a, n));
	return p;
}

/* glibc's rules for the two calls memalign does not check */
static int memalign_posix(void **pp, size_t a, size_t n)
{
	if (a % sizeof(void *) != 0 || (a & (a - 1)) != 0 || a == 0)
		return EINVAL;
	int saved = errno;
	void *p = (real_memalign ? real_memalign : __libc_memalign)(a, n);
	int e = errno;
	errno = saved;
	if (!p)
		return e ? e : ENOMEM;
	*pp = p;
	return 0;
}

static void *memalign_c11(size_t a, size_t n)
{
	if (a == 0 || (a & (a - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return (real_memalign ? real_memalign : __libc_memalign)(a, n);
}

CKC_EXPORT int posix_memalign(void **pp, size_t a, size_t n)
{
	int (*f)(void **, size_t, size_t) = real_posix_memalign;
	if (alloc_fast(f))
		return f(pp, a, n);
	int rc;
	ALLOC_SLOW(rc, real_posix_memalign, memalign_posix, (pp, a, n));
	return rc;
}

CKC_WARM_PATH CKC_EXPORT void *aligned_alloc(size_t a, size_t n)
{
	void *(*f)(size_t, size_t) = real_aligned_alloc;
	if (alloc_fast(f))
		return f(a, n);
	void *p;
	ALLOC_SLOW(p, real_aligned_alloc, memalign_c11, (a, n));
	return p;
}

/* Allocator calls count from now on (through the watched ways, or the slow
 * ones while a probe or owed memory is looked at as well). */
static void alloc_watch_on(void)
{
	bool was = false;
	if (atomic_compare_exchange_strong(&alloc_watch, &was, true))
		ckc_mem_route();
}

void ckc_mem_engine_started(void)
{
	if (atomic_load(&alloc_handlers))
		alloc_watch_on();
}

/* Resolved when the library is loaded, before the program runs: the first
 * call of the wrapper may come from inside the dynamic loader's error
 * handling (dlsym or dlopen freeing the message of the failure before),
 * where a lookup of its own would free that message a second time. */
__attribute__((constructor(101))) static void mem_resolve_at_load(void)
{
	mem_resolve();
}

/* The probe of ckc_free_is_ours: the block this thread frees through the
 * program's own free, and whether this wrapper saw it. */
static __thread void *free_probe;
static __thread bool free_probe_seen;
/* Probes under way (free_probes, above): a free while there is none
 * touches no thread-local variable (a walker's free of every entry would
 * call the loader's __tls_get_addr each time). */

/* The process ends with what the cache owes written by one of the
 * library's threads, while the thread that called _exit may hold the
 * allocator's lock (ckc_mem_leak_frees): the library's frees are skipped. */
static atomic_bool mem_leak;

void ckc_mem_leak_frees(void)
{
	atomic_store(&mem_leak, true);
	atomic_fetch_add(&free_probes, 1); /* (every free takes the slow way) */
	ckc_mem_route();
}

/* free with a probe under way, something owed, the allocator not looked up
 * yet, or the library's frees skipped. */
static void free_slow(void *p)
{
	if (atomic_load_explicit(&mem_leak, memory_order_relaxed) && ckc_io_guard > 0)
		return;
	if (!real_free)
		mem_resolve();
	if (atomic_load_explicit(&free_probes, memory_order_relaxed) != 0 && p && p == free_probe)
		free_probe_seen = true;
	if (p && owed_any()) {
		ckc_enter();
		ckc_owed_cut(p, malloc_usable_size(p), false);
		ckc_leave();
	}
	if (!atomic_load_explicit(&alloc_watch, memory_order_relaxed)) {
		(real_free ? real_free : __libc_free)(p);
		return;
	}
	alloc_in();
	(real_free ? real_free : __libc_free)(p);
	alloc_out();
}

CKC_HOT_PATH CKC_EXPORT void free(void *p)
{
	atomic_load_explicit(&free_fn, memory_order_relaxed)(p);
}

bool ckc_free_is_ours(void)
{
	/* the program's free is the first definition in the global scope (the
	 * canonical address dlsym gives may be a stub of the executable's):
	 * free a block through it and see whether this wrapper was called */
	dlsym_fn rd = ckc_real_dlsym();
	void (*prog_free)(void *) = rd ? (void (*)(void *))rd(RTLD_DEFAULT, "free") : NULL;
	void *p = malloc(64);
	if (!prog_free || !p) {
		free(p);
		return true;
	}
	free_probe = p;
	free_probe_seen = false;
	atomic_fetch_add(&free_probes, 1);
	ckc_mem_route();
	prog_free(p);
	atomic_fetch_sub(&free_probes, 1);
	ckc_mem_route();
	free_probe = NULL;
	return free_probe_seen;
}

CKC_HOT_PATH CKC_EXPORT void *realloc(void *p, size_t n)
{
	return atomic_load_explicit(&realloc_fn, memory_order_relaxed)(p, n);
}

static void *realloc_slow(void *p, size_t n)
{
	if (!real_realloc)
		mem_resolve();
	if (p && owed_any()) {
		/* the bytes move: they must be there */
		ckc_enter();
		ckc_owed_cut(p, malloc_usable_size(p), true);
		ckc_leave();
	}
	void *q;
	ALLOC_SLOW(q, real_realloc, __libc_realloc, (p, n));
	return q;
}

/* This object's own free and realloc, by names that bind to them: the
 * engine's allocator lookup (io.c) must not take these wrappers for the
 * allocator. */
static __typeof__(free) own_free __attribute__((alias("free"), copy(free)));
static __typeof__(realloc) own_realloc __attribute__((alias("realloc"), copy(realloc)));
static __typeof__(malloc) own_malloc __attribute__((alias("malloc"), copy(malloc)));
static __typeof__(calloc) own_calloc __attribute__((alias("calloc"), copy(calloc)));
static __typeof__(posix_memalign) own_posix_memalign __attribute__((alias("posix_memalign"), copy(posix_memalign)));

CKC_START_PATH void ckc_mem_own_alloc(void)
{
	void *const own[] = { (void *)own_free, (void *)own_realloc, (void *)own_malloc, (void *)own_calloc,
			      (void *)own_posix_memalign };
	ckc_io_own_alloc(own, sizeof(own) / sizeof(own[0]));
}

/* ---- mappings ---------------------------------------------------------- */

CKC_EXPORT int munmap(void *p, size_t n)
{
	if (owed_any()) {
		ckc_enter();
		ckc_owed_cut(p, n, false);
		ckc_leave();
	}
	ckc_mapped_cut(p, n);
	return REAL(munmap)(p, n);
}

CKC_EXPORT void *mremap(void *old, size_t oldn, size_t n, int flags, ...)
{
	void *to = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	if (owed_any()) {
		ckc_enter();
		ckc_owed_cut(old, oldn, true);
		if (flags & MREMAP_FIXED)
			ckc_owed_cut(to, n, false);
		ckc_leave();
	}
	void *p = REAL(mremap)(old, oldn, n, flags, to);
	if (p != MAP_FAILED && atomic_load_explicit(&ckc_mapped_n, memory_order_relaxed)) {
		int saved = errno;
		ckc_mapped_moved(old, p, n);
		errno = saved;
	}
	return p;
}

CKC_EXPORT int madvise(void *p, size_t n, int advice)
{
	if (owed_any()) {
		bool gone = advice == MADV_DONTNEED || advice == MADV_REMOVE
#ifdef MADV_FREE
			    || advice == MADV_FREE
#endif
			;
		bool kept = advice == MADV_DONTFORK || advice == MADV_WIPEONFORK;
		if (gone || kept) {
			ckc_enter();
			/* their content is discarded; or they must be whole
			 * before a fork copies or wipes them */
			ckc_owed_cut(p, n, !gone);
			ckc_leave();
		}
	}
	return REAL(madvise)(p, n, advice);
}

/* ---- sockets ---------------------------------------------------------- */

CKC_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	ckc_owed_touch(buf, n);
	return REAL(send)(fd, buf, n, flags);
}

CKC_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
			  socklen_t tl)
{
	ckc_owed_touch(buf, n);
	return REAL(sendto)(fd, buf, n, flags, to, tl);
}

CKC_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	if (m)
		ckc_owed_touch_iov(m->msg_iov, (int)m->msg_iovlen);
	return REAL(sendmsg)(fd, m, flags);
}

CKC_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	ckc_owed_touch(buf, n);
	return REAL(recv)(fd, buf, n, flags);
}

CKC_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
			    socklen_t *fl)
{
	ckc_owed_touch(buf, n);
	return REAL(recvfrom)(fd, buf, n, flags, from, fl);
}

CKC_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	if (m)
		ckc_owed_touch_iov(m->msg_iov, (int)m->msg_iovlen);
	ssize_t r = REAL(recvmsg)(fd, m, flags);
	/* descriptors passed in: numbers the table may still hold */
	if (r >= 0 && m && m->msg_control && m->msg_controllen)
		for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				for (size_t i = 0; (i + 1) * sizeof(int) <= c->cmsg_len - CMSG_LEN(0); i++) {
					int got;
					memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(got));
					ckc_vfd_unseen(got);
				}
	return r;
}

/* ---- stdio: large transfers go between the buffer and the kernel ------ */

/* A cookie stream (_fileno -2) may be a tagged one, whose reads the cache
 * serves (stdio.c); every other stream costs one compare. */

/* The slow path of the four calls below: a cookie stream, which may be a
 * tagged one, or owed bytes in [p, p+size*n) of an untagged stream's
 * transfer, filled first (a tagged stream hands the buffer to the cache,
 * which knows). Out of line, so that the common case is a compare, a load
 * and a jump into the C library, with no frame of its own: a program
 * reading 4 bytes per fread pays about 9 ns a call. */
CKC_WARM_PATH __attribute__((noinline)) static size_t stdio_slow(void *p, size_t size, size_t n, FILE *f, bool wr,
									  bool locked)
{
	if (f->_fileno < -1)
		return wr ? ckc_stdio_fwrite(p, size, n, f, locked) : ckc_stdio_fread(p, size, n, f, locked);
	if (owed_any() && size && n <= SIZE_MAX / size && !ckc_stdio_tagged(f))
		ckc_owed_touch(p, size * n);
	if (wr)
		return (locked ? REAL(fwrite) : REAL(fwrite_unlocked))(p, size, n, f);
	return (locked ? REAL(fread) : REAL(fread_unlocked))(p, size, n, f);
}

/* (a NULL stream crashes in the C library, as it does without this one;
 * the real call is resolved on the slow path the first time) */
#define STDIO_SLOW(f, fn) __builtin_expect((f)->_fileno < -1 || \
	atomic_load_explicit(&ckc_owed_count, memory_order_relaxed) != 0 || !(fn), 0)

/* glibc's _IO_FLAGS2_NEED_LOCK: set on every stream once a second thread
 * has started, and on streams that other threads may share */
#define STDIO_NEED_LOCK 128

/* A read the stream's buffer holds whole, copied here: what glibc's read
 * does first, without its lock (none is needed while the program has one
 * thread, or when it locks the stream itself) and without the hop into
 * the C library, which a program reading 4 bytes per fread would pay on
 * every call. Anything else (a partial buffer, pushed-back input, a
 * stream being written) goes to the C library. */
static inline bool stdio_buffered(void *p, size_t size, size_t n, FILE *f, bool locked)
{
	size_t bytes;
	if (locked && (f->_flags2 & STDIO_NEED_LOCK) && !(f->_flags & _IO_USER_LOCK))
		return false;
	if (__builtin_mul_overflow(size, n, &bytes) || bytes - 1 >= 32 || (f->_flags & (STDIO_IN_BACKUP | STDIO_PUTTING)) ||
	    f->_IO_read_ptr >= f->_IO_read_end || (size_t)(f->_IO_read_end - f->_IO_read_ptr) < bytes)
		return false;
	const char *s = f->_IO_read_ptr;
	char *d = p;
	if (bytes >= 16) {
		memcpy(d, s, 16);
		memcpy(d + bytes - 16, s + bytes - 16, 16);
	} else if (bytes >= 8) {
		memcpy(d, s, 8);
		memcpy(d + bytes - 8, s + bytes - 8, 8);
	} else if (bytes >= 4) {
		memcpy(d, s, 4);
		memcpy(d + bytes - 4, s + bytes - 4, 4);
	} else {
		d[0] = s[0];
		d[bytes / 2] = s[bytes / 2];
		d[bytes - 1] = s[bytes - 1];
	}
	f->_IO_read_ptr += bytes;
	return true;
}

CKC_EXPORT size_t fwrite(const void *p, size_t size, size_t n, FILE *f)
{
	__typeof__(ckc_real.fwrite) fn = __atomic_load_n(&ckc_real.fwrite, __ATOMIC_RELAXED);
	if (STDIO_SLOW(f, fn))
		return stdio_slow((void *)p, size, n, f, true, true);
	return fn(p, size, n, f);
}

CKC_EXPORT size_t fread(void *p, size_t size, size_t n, FILE *f)
{
	__typeof__(ckc_real.fread) fn = __atomic_load_n(&ckc_real.fread, __ATOMIC_RELAXED);
	if (STDIO_SLOW(f, fn))
		return stdio_slow(p, size, n, f, false, true);
	if (stdio_buffered(p, size, n, f, true))
		return n;
	return fn(p, size, n, f);
}

CKC_WARM_PATH CKC_EXPORT size_t fwrite_unlocked(const void *p, size_t size, size_t n, FILE *f)
{
	__typeof__(ckc_real.fwrite_unlocked) fn = __atomic_load_n(&ckc_real.fwrite_unlocked, __ATOMIC_RELAXED);
	if (STDIO_SLOW(f, fn))
		return stdio_slow((void *)p, size, n, f, true, false);
	return fn(p, size, n, f);
}

CKC_EXPORT size_t fread_unlocked(void *p, size_t size, size_t n, FILE *f)
{
	__typeof__(ckc_real.fread_unlocked) fn = __atomic_load_n(&ckc_real.fread_unlocked, __ATOMIC_RELAXED);
	if (STDIO_SLOW(f, fn))
		return stdio_slow(p, size, n, f, false, false);
	if (stdio_buffered(p, size, n, f, false))
		return n;
	return fn(p, size, n, f);
}

/* ---- signal handlers (SIGSEGV: owed.c; the others: src/sigdefer.h) ------ */

CKC_START_PATH int ckc_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return REAL(sigaction)(sig, act, old);
}

/* The disposition the program set, as it reads it back: the library's
 * end-by-signal handler stands where the default was. */
static void old_as_set(struct sigaction *old)
{
	if (old && ckc_term_handler_is(old)) {
		memset(old, 0, sizeof(*old));
		old->sa_handler = SIG_DFL;
		sigemptyset(&old->sa_mask);
	}
}

CKC_START_PATH CKC_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int rc;
	if (sig == SIGSEGV && !ckc_in_vfork_child() && ckc_owed_sigaction(act, old) == 0) {
		rc = 0;
	} else {
		rc = ckc_sig_action(sig, act, old, ckc_in_vfork_child(), ckc_real_sigaction);
		/* the default set again, after the cache began: the end by
		 * signal drains it first, as where the default was left */
		if (rc == 0 && act && act->sa_handler == SIG_DFL && !ckc_in_vfork_child())
			ckc_term_default_set(sig);
	}
	if (rc == 0 && act && ckc_sig_deferrable(sig) && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
	    !atomic_load_explicit(&alloc_handlers, memory_order_relaxed) &&
	    !atomic_exchange(&alloc_handlers, true) && ckc_engine_started())
		alloc_watch_on();
	if (rc == 0)
		old_as_set(old);
	return rc;
}

CKC_WARM_PATH CKC_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	if (h == SIG_ERR)
		return REAL(signal)(sig, h);
	/* the C library's signal(): BSD's, the signal blocked in its handler */
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, sig);
	sa.sa_flags = SA_RESTART;
	if (sigaction(sig, &sa, &old) != 0)
		return SIG_ERR;
	return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)(void *)old.sa_sigaction : old.sa_handler;
}
