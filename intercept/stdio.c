/* stdio on tagged files: fopen and fdopen hand out fopencookie(3) streams
 * over a virtual descriptor, so fread, fwrite, fseek, ftell, fflush, setvbuf
 * and the fgetc/fputc family all reach the cache; fileno returns the
 * descriptor, fclose closes it. freopen onto a tagged path uses the real
 * file (the cache hands the path over first). */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "intercept.h"


/* Large enough that big fwrites go straight to the cache in one call. */
#define STDIO_BUF (256u << 10)

/* Tagged streams and their descriptors (few are open at a time). */
typedef struct stdio_ent {
	FILE *f;
	struct stdio_cookie *c;
} stdio_ent_t;

static stdio_ent_t *stdio_ents;
static size_t stdio_n, stdio_cap;
static pthread_mutex_t stdio_lock = PTHREAD_MUTEX_INITIALIZER;

static int stdio_add(FILE *f, struct stdio_cookie *c)
{
	int rc = 0;
	pthread_mutex_lock(&stdio_lock);
	if (stdio_n == stdio_cap) {
		size_t cap = stdio_cap ? 2 * stdio_cap : 16;
		stdio_ent_t *e = realloc(stdio_ents, cap * sizeof(*e));
		if (e) {
			stdio_ents = e;
			stdio_cap = cap;
		} else {
			rc = -ENOMEM;
		}
	}
	if (!rc)
		stdio_ents[stdio_n++] = (stdio_ent_t){ f, c };
	pthread_mutex_unlock(&stdio_lock);
	return rc;
}

/* The cookie of a tagged stream (removing the entry if take), or NULL. */
static struct stdio_cookie *stdio_find(FILE *f, bool take)
{
	struct stdio_cookie *c = NULL;
	pthread_mutex_lock(&stdio_lock);
	for (size_t i = 0; i < stdio_n; i++)
		if (stdio_ents[i].f == f) {
			c = stdio_ents[i].c;
			if (take)
				stdio_ents[i] = stdio_ents[--stdio_n];
			break;
		}
	pthread_mutex_unlock(&stdio_lock);
	return c;
}

/* A tagged stream's cookie: the descriptor under it, which freopen can
 * replace (with a tagged one or, for an untagged path, a real one). */
typedef struct stdio_cookie {
	atomic_int fd;
} stdio_cookie_t;

bool ckc_stdio_tagged(FILE *f)
{
	return stdio_n && stdio_find(f, false) != NULL;
}

static ssize_t cookie_read(void *c, char *buf, size_t n)
{
	int fd = atomic_load(&((stdio_cookie_t *)c)->fd);
	ckc_vfd_t *v = ckc_vfd_get(fd);
	if (!v)
		return REAL(read)(fd, buf, n);
	ssize_t r = ckc_vfd_read(v, buf, n);
	/* handed over to the real file meanwhile: its descriptor names it now */
	if (r == CKC_HANDED && ckc_vfd_switch(v) == 0)
		return REAL(read)(fd, buf, n);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static ssize_t cookie_write(void *c, const char *buf, size_t n)
{
	int fd = atomic_load(&((stdio_cookie_t *)c)->fd);
	ckc_vfd_t *v = ckc_vfd_get(fd);
	ssize_t r;
	if (v) {
		r = ckc_vfd_write(v, buf, n);
		if (r == CKC_HANDED && ckc_vfd_switch(v) == 0)
			v = NULL;
	}
	if (!v) {
		r = REAL(write)(fd, buf, n);
		if (r < 0)
			r = -errno;
	}
	if (r < 0) {
		errno = (int)-r;
		return 0; /* stdio's convention for a failed write */
	}
	return r;
}

static int cookie_seek(void *c, off64_t *off, int whence)
{
	int fd = atomic_load(&((stdio_cookie_t *)c)->fd);
	ckc_vfd_t *v = ckc_vfd_get(fd);
	off_t r = v ? ckc_vfd_lseek(v, *off, whence) : REAL(lseek)(fd, *off, whence);
	if (!v && r < 0)
		return -1;
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	*off = r;
	return 0;
}

static int cookie_close(void *c)
{
	int fd = atomic_load(&((stdio_cookie_t *)c)->fd);
	free(c);
	return ckc_close_fd(fd);
}

static const cookie_io_functions_t stdio_funcs = {
	.read = cookie_read,
	.write = cookie_write,
	.seek = cookie_seek,
	.close = cookie_close,
};

/* open(2) flags of an fopen mode; -1 if the mode is invalid. */
static int stdio_flags(const char *mode)
{
	int flags;
	switch (mode[0]) {
	case 'r': flags = O_RDONLY; break;
	case 'w': flags = O_WRONLY | O_CREAT | O_TRUNC; break;
	case 'a': flags = O_WRONLY | O_CREAT | O_APPEND; break;
	default: return -1;
	}
	for (const char *m = mode + 1; *m && *m != ','; m++) {
		if (*m == '+')
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		else if (*m == 'x')
			flags |= O_EXCL;
		else if (*m == 'e')
			flags |= O_CLOEXEC;
	}
	return flags;
}

/* A stream over tagged descriptor fd (which it owns from now on). */
static FILE *stdio_stream(int fd, const char *mode)
{
	stdio_cookie_t *c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	atomic_init(&c->fd, fd);
	FILE *f = fopencookie(c, mode, stdio_funcs);
	if (!f) {
		free(c);
		return NULL;
	}
	setvbuf(f, NULL, _IOFBF, STDIO_BUF);
	if (stdio_add(f, c) != 0) {
		atomic_store(&c->fd, -1); /* the caller still owns fd */
		REAL(fclose)(f);
		errno = ENOMEM;
		return NULL;
	}
	return f;
}

static FILE *fopen_common(const char *path, const char *mode, FILE *(*real)(const char *, const char *))
{
	char canon[PATH_MAX];
	int saved = errno;

	if (mode && ckc_tagged_asked(AT_FDCWD, path, canon)) {
		int flags = stdio_flags(mode);
		if (flags < 0) {
			errno = EINVAL;
			return NULL;
		}
		int fd = ckc_open_tagged(canon, flags, 0666);
		if (fd >= 0) {
			FILE *f = stdio_stream(fd, mode);
			if (!f)
				ckc_close_fd(fd);
			else
				errno = saved;
			return f;
		}
		if (fd != CKC_PASS) {
			errno = -fd;
			return NULL;
		}
	}
	return real(path, mode);
}

CKC_EXPORT FILE *fopen(const char *path, const char *mode)
{
	return fopen_common(path, mode, REAL(fopen));
}

CKC_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return fopen_common(path, mode, REAL(fopen64));
}

CKC_EXPORT FILE *fdopen(int fd, const char *mode)
{
	if (!ckc_vfd_get(fd))
		return REAL(fdopen)(fd, mode);
	int saved = errno;
	FILE *f = stdio_stream(fd, mode);
	if (f)
		errno = saved;
	return f;
}

/* freopen of a tagged stream: glibc cannot reopen a cookie stream, so the
 * stream keeps its cookie and gets the new file's descriptor under it. */
static FILE *freopen_cookie(const char *path, const char *mode, FILE *stream,
			    struct stdio_cookie *c)
{
	char canon[PATH_MAX];
	int flags = stdio_flags(mode), saved = errno, fd = CKC_PASS;

	if (!path || flags < 0) {
		/* a change of mode alone cannot be made on a cookie stream */
		errno = path ? EINVAL : EBADF;
		return NULL;
	}
	fflush(stream);
	if (ckc_tagged_asked(AT_FDCWD, path, canon))
		fd = ckc_open_tagged(canon, flags, 0666);
	if (fd == CKC_PASS)
		fd = REAL(openat)(AT_FDCWD, path, flags, 0666);
	else if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	if (fd < 0)
		return NULL;
	int old = atomic_exchange(&c->fd, fd);
	ckc_close_fd(old);
	clearerr(stream);
	fseeko(stream, 0, (flags & O_APPEND) ? SEEK_END : SEEK_SET);
	errno = saved;
	return stream;
}

static FILE *freopen_common(const char *path, const char *mode, FILE *stream,
			    FILE *(*real)(const char *, const char *, FILE *))
{
	char canon[PATH_MAX];
	struct stdio_cookie *c = stream ? stdio_find(stream, false) : NULL;

	if (c)
		return freopen_cookie(path, mode, stream, c);
	if (path && ckc_tagged_asked(AT_FDCWD, path, canon)) {
		int rc = ckc_hand_over_path(canon);
		if (rc) {
			errno = -rc;
			return NULL;
		}
	}
	return real(path, mode, stream);
}

CKC_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	return freopen_common(path, mode, stream, REAL(freopen));
}

CKC_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	return freopen_common(path, mode, stream, REAL(freopen64));
}

void ckc_stdio_flush_all(void)
{
	/* glibc flushes stdio buffers only after the library destructors ran,
	 * when the cache is gone: push what the tagged streams hold now */
	pthread_mutex_lock(&stdio_lock);
	size_t n = stdio_n;
	FILE **fs = malloc(n * sizeof(*fs) + 1);
	for (size_t i = 0; fs && i < n; i++)
		fs[i] = stdio_ents[i].f;
	pthread_mutex_unlock(&stdio_lock);
	for (size_t i = 0; fs && i < n; i++)
		fflush(fs[i]);
	free(fs);
}

void ckc_stdio_atfork(int phase)
{
	if (phase == 0)
		pthread_mutex_lock(&stdio_lock);
	else if (phase == 1)
		pthread_mutex_unlock(&stdio_lock);
	else
		pthread_mutex_init(&stdio_lock, NULL);
}

CKC_EXPORT int fclose(FILE *f)
{
	if (f && !ckc_in_vfork_child())
		stdio_find(f, true);
	return REAL(fclose)(f);
}

CKC_EXPORT int fileno(FILE *f)
{
	struct stdio_cookie *c = f ? stdio_find(f, false) : NULL;
	if (c)
		return atomic_load(&c->fd);
	return REAL(fileno)(f);
}
