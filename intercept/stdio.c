/* stdio on tagged files: fopen and fdopen hand out fopencookie(3) streams
 * over a virtual descriptor, so fread, fwrite, fseek, ftell, fflush, setvbuf
 * and the fgetc/fputc family all reach the cache; fileno returns the
 * descriptor, fclose closes it. Each stream gets a buffer of its own, and a
 * read of a whole buffer or more goes straight from the cache into the
 * caller's memory, as glibc does for a file stream. freopen onto a tagged
 * path uses the real file (the cache hands the path over first). */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "intercept.h"
#include "log.h"
#include "thread.h"


/* The buffer of a tagged stream that only reads; a read of a whole buffer
 * or more bypasses it (ckc_stdio_fread). glibc's own choice for a cookie
 * stream would be 8 KiB, and every read of a cookie stream goes through the
 * buffer: a large fread would reach the cache in 8 KiB pieces. A stream
 * that writes gets the buffer glibc gives a file stream (the file's
 * st_blksize): glibc writes whole multiples of it straight through and
 * keeps the rest, so what the file holds after each fwrite (what a crash
 * or an _exit leaves) is what it holds without the library. */
#define STDIO_BUF (256u << 10)

/* Reads smaller than this always go through glibc (a stream the program
 * made unbuffered would otherwise read them byte by byte). */
#define STDIO_DIRECT_MIN 4096u

/* glibc marks a stream made by fopencookie with this _fileno. */
#define STDIO_COOKIE_FILENO (-2)

/* Tagged streams and their descriptors (few are open at a time). */
typedef struct stdio_ent {
	FILE *f;
	struct stdio_cookie *c;
	char *buf;    /* the stream's buffer, freed after fclose */
} stdio_ent_t;

static stdio_ent_t *stdio_ents;
static size_t stdio_n, stdio_cap;
static ckc_mutex_t stdio_lock = CKC_MUTEX_INIT(STDIO);
CKC_LOCKS_AT_START(stdio_lock, ckc_locks_add, &stdio_lock)

static int stdio_add(FILE *f, struct stdio_cookie *c, char *buf)
{
	int rc = 0;
	ckc_mutex_lock(&stdio_lock);
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
		stdio_ents[stdio_n++] = (stdio_ent_t){ f, c, buf };
	ckc_mutex_unlock(&stdio_lock);
	return rc;
}

/* The cookie of a tagged stream, or NULL. With bufp, the entry is removed
 * and *bufp receives its buffer (for the caller to free once the stream is
 * closed). */
static struct stdio_cookie *stdio_find(FILE *f, char **bufp)
{
	struct stdio_cookie *c = NULL;
	ckc_mutex_lock(&stdio_lock);
	for (size_t i = 0; i < stdio_n; i++)
		if (stdio_ents[i].f == f) {
			c = stdio_ents[i].c;
			if (bufp) {
				*bufp = stdio_ents[i].buf;
				stdio_ents[i] = stdio_ents[--stdio_n];
			}
			break;
		}
	ckc_mutex_unlock(&stdio_lock);
	return c;
}

/* A tagged stream's cookie: the descriptor under it, which freopen can
 * replace (with a tagged one or, for an untagged path, a real one). */
typedef struct stdio_cookie {
	atomic_int fd;
	atomic_int orient; /* fwide's: 0 none yet, 1 wide, -1 bytes (wstdio.c) */
	atomic_bool moved; /* bytes went through it (its read or write ran) */
	/* how much the next fill of the buffer reads (STDIO_WINDOW_MIN after a
	 * seek that moved, doubling with each fill up to STDIO_BUF): a reader
	 * that seeks to read a small header, then reads a record past it (a
	 * zip archive's, torch.load's), gets a small fill, not 256 KiB copied
	 * for its 30 bytes */
	atomic_uint window;
} stdio_cookie_t;

#define STDIO_WINDOW_MIN (16u << 10)

int ckc_stdio_orient(FILE *f, int mode)
{
	stdio_cookie_t *c = f && f->_fileno == STDIO_COOKIE_FILENO && stdio_n ? stdio_find(f, NULL) : NULL;
	if (!c)
		return CKC_NOT_TAGGED_STREAM;
	int none = 0;
	/* a byte function used first makes the stream one of bytes, as in
	 * glibc: bytes in its buffer, or passed through it */
	if (atomic_load(&c->orient) == 0 &&
	    (atomic_load(&c->moved) || f->_IO_write_ptr != f->_IO_write_base || f->_IO_read_ptr != f->_IO_read_end))
		atomic_compare_exchange_strong(&c->orient, &none, -1);
	none = 0;
	if (mode)
		atomic_compare_exchange_strong(&c->orient, &none, mode > 0 ? 1 : -1);
	return atomic_load(&c->orient);
}

bool ckc_stdio_tagged(FILE *f)
{
	return f && f->_fileno == STDIO_COOKIE_FILENO && stdio_n && stdio_find(f, NULL) != NULL;
}

static ssize_t cookie_read(void *cv, char *buf, size_t n)
{
	stdio_cookie_t *c = cv;
	atomic_store(&c->moved, true);
	int fd = atomic_load(&c->fd);
	ckc_vfd_t *v = ckc_vfd_held(fd);
	if (!v)
		return REAL(read)(fd, buf, n);
	unsigned w = atomic_load_explicit(&c->window, memory_order_relaxed);
	if (n > w)
		n = w;
	ssize_t r = ckc_vfd_read(v, buf, n);
	/* handed over to the real file meanwhile: its descriptor names it now */
	bool handed = r == CKC_HANDED && ckc_vfd_switch(v) == 0;
	ckc_vfd_drop(v);
	if (handed)
		return REAL(read)(fd, buf, n);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (w < STDIO_BUF)
		atomic_store_explicit(&c->window, 2 * w < STDIO_BUF ? 2 * w : STDIO_BUF, memory_order_relaxed);
	return r;
}

/* One write of the stream's bytes: the count, or -errno. */
static ssize_t cookie_write_once(stdio_cookie_t *c, const char *buf, size_t n)
{
	int fd = atomic_load(&c->fd);
	ckc_vfd_t *v = ckc_vfd_held(fd);
	ssize_t r;
	if (v) {
		r = ckc_vfd_write(v, buf, n);
		bool handed = r == CKC_HANDED && ckc_vfd_switch(v) == 0;
		ckc_vfd_drop(v);
		if (handed)
			v = NULL;
	}
	if (!v) {
		r = REAL(write)(fd, buf, n);
		if (r < 0)
			r = -errno;
	}
	return r;
}

/* The C library takes a cookie's short write for an error with errno as
 * it was; its own file streams write the rest, and a write that then
 * fails says why (a file-size limit reached: EFBIG). So the rest is
 * written here: what was written, with the failure's errno, or 0 (stdio's
 * convention for a failed write). */
static ssize_t cookie_write(void *cv, const char *buf, size_t n)
{
	stdio_cookie_t *c = cv;
	size_t done = 0;
	atomic_store(&c->moved, true);
	while (done < n) {
		ssize_t r = cookie_write_once(c, buf + done, n - done);
		if (r <= 0) {
			if (r < 0)
				errno = (int)-r;
			break;
		}
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* The virtual descriptor under tagged stream f, held (ckc_vfd_held), or
 * NULL. */
static ckc_vfd_t *stdio_vfd(FILE *f)
{
	stdio_cookie_t *c = stdio_find(f, NULL);
	return c ? ckc_vfd_held(atomic_load(&c->fd)) : NULL;
}

/* Reads into p straight from the cache, bypassing the stream's buffer;
 * the stream's position is the descriptor's, which glibc asks for at every
 * ftell and fseek of a cookie stream. Returns the bytes read (short at the
 * end of the file or on an error, which glibc then meets itself). */
static size_t stdio_read_direct(FILE *f, char *p, size_t n)
{
	ckc_vfd_t *v = stdio_vfd(f);
	size_t got = 0;
	if (!v)
		return 0;
	int saved = errno;
	while (got < n) {
		ssize_t r = ckc_vfd_read(v, p + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	ckc_vfd_put(v);
	errno = saved;
	return got;
}

/* Writes [p, p+n) straight to the cache at the descriptor's position (the
 * stream's buffer is empty). Returns the bytes written; an error marks the
 * stream (ferror) with errno set. A stream whose checkpoint was handed over
 * to its real file (before this call or during it) writes no further here:
 * the caller writes the rest through the stream, whose cookie writes to
 * the real file. */
static size_t stdio_write_direct(FILE *f, const char *p, size_t n)
{
	ckc_vfd_t *v = stdio_vfd(f);
	size_t done = 0;
	if (!v)
		return 0;
	int saved = errno;
	while (done < n) {
		long r = ckc_vfd_write(v, p + done, n - done);
		if (ckc_px_handed_over(&r, v))
			break;
		if (r <= 0) {
			ckc_vfd_drop(v);
			errno = r < 0 ? (int)-r : EIO;
			f->_flags |= _IO_ERR_SEEN;
			return done;
		}
		done += (size_t)r;
	}
	ckc_vfd_put(v);
	errno = saved;
	return done;
}

/* fwrite/fwrite_unlocked of a tagged stream: a write of a whole buffer or
 * more goes straight from the caller's memory to the cache, after what the
 * buffer holds; glibc would copy the first part through the buffer, which
 * reads (and, under device capture, fills) the caller's staging memory.
 * Below STDIO_BUF what stays in the buffer is what glibc keeps there: the
 * bytes past the last whole buffer's worth of what it held and the new
 * ones (a larger write reaches the file whole: never less than glibc
 * writes). Streams
 * holding unread input or ungetc bytes, and line-buffered ones, are left
 * to glibc. */
size_t ckc_stdio_fwrite(const void *p, size_t size, size_t n, FILE *f, bool locked)
{
	size_t (*wr)(const void *, size_t, size_t, FILE *) = locked ? REAL(fwrite) : REAL(fwrite_unlocked);
	size_t bytes, bs = f->_IO_buf_base ? (size_t)(f->_IO_buf_end - f->_IO_buf_base) : 0;
	if (__builtin_mul_overflow(size, n, &bytes) || !bs || bytes < bs || (f->_flags & STDIO_LINE_BUF) ||
	    !ckc_stdio_tagged(f))
		return wr(p, size, n, f);
	if (locked)
		flockfile(f);
	size_t done = 0, held = 0;
	if ((f->_flags & STDIO_PUTTING) && f->_IO_write_ptr > f->_IO_write_base)
		held = (size_t)(f->_IO_write_ptr - f->_IO_write_base);
	/* (a write of STDIO_BUF or more goes through whole: under device
	 * capture the checkpoint is the whole of the staging buffer, and a
	 * tail copied through the stream's buffer would keep it from being
	 * attached) */
	size_t straight = bytes >= STDIO_BUF ? bytes : bytes - (held + bytes) % bs;
	bool direct = !(f->_flags & (STDIO_IN_BACKUP | _IO_ERR_SEEN)) && f->_IO_read_ptr >= f->_IO_read_end &&
		      fflush_unlocked(f) == 0;
	if (direct)
		done = stdio_write_direct(f, p, straight);
	if (done < bytes && !(f->_flags & _IO_ERR_SEEN))
		done += REAL(fwrite_unlocked)((const char *)p + done, 1, bytes - done, f);
	if (locked)
		funlockfile(f);
	return done / size;
}

size_t ckc_stdio_fread(void *p, size_t size, size_t n, FILE *f, bool locked)
{
	size_t (*rd)(void *, size_t, size_t, FILE *) = locked ? REAL(fread) : REAL(fread_unlocked);
	size_t bytes;
	if (__builtin_mul_overflow(size, n, &bytes) || bytes < STDIO_DIRECT_MIN || !ckc_stdio_tagged(f))
		return rd(p, size, n, f);
	if (locked)
		flockfile(f);
	size_t done = 0;
	if (!(f->_flags & (STDIO_IN_BACKUP | STDIO_PUTTING | _IO_EOF_SEEN | _IO_ERR_SEEN))) {
		/* what the buffer holds, then the rest in one read straight
		 * from the cache: glibc would read the part past the last
		 * whole buffer through the buffer and copy it, which under
		 * device capture writes into the destination's last owed page
		 * and fills it */
		size_t held = f->_IO_read_ptr < f->_IO_read_end ? (size_t)(f->_IO_read_end - f->_IO_read_ptr) : 0;
		done = REAL(fread_unlocked)(p, 1, held < bytes ? held : bytes, f);
		size_t want = bytes - done;
		if (done == held && want)
			done += stdio_read_direct(f, (char *)p + done, want);
	}
	if (done < bytes)
		done += REAL(fread_unlocked)((char *)p + done, 1, bytes - done, f);
	if (locked)
		funlockfile(f);
	return done / size;
}

static int cookie_seek(void *cv, off64_t *off, int whence)
{
	stdio_cookie_t *c = cv;
	int fd = atomic_load(&c->fd);
	ckc_vfd_t *v = ckc_vfd_held(fd);
	off_t was = v ? ckc_vfd_lseek(v, 0, SEEK_CUR) : -1;
	off_t r = v ? ckc_vfd_lseek(v, *off, whence) : REAL(lseek)(fd, *off, whence);
	ckc_vfd_drop(v);
	if (!v && r < 0)
		return -1;
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (r != was)
		atomic_store_explicit(&c->window, STDIO_WINDOW_MIN, memory_order_relaxed);
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
	atomic_init(&c->orient, 0);
	atomic_init(&c->moved, false);
	atomic_init(&c->window, STDIO_WINDOW_MIN);
	FILE *f = fopencookie(c, mode, stdio_funcs);
	if (!f) {
		free(c);
		return NULL;
	}
	ckc_thread_stream(f);
	/* glibc's cookie streams have no wide-character state: their own
	 * orientation stays that of bytes (a wide one would crash glibc),
	 * and the wide functions work through the byte ones (wstdio.c) */
	REAL(fwide)(f, -1);
	/* glibc sizes a file stream's buffer by an fstat of its file before
	 * the first transfer, which the file's times then show (a stamp of
	 * the kernel's fine clock at its next change): the same look here */
	size_t size = STDIO_BUF;
	if (mode[0] != 'r' || strchr(mode, '+')) {
		struct stat st;
		int saved = errno;
		size = fstat(fd, &st) == 0 && st.st_blksize > 0 ? (size_t)st.st_blksize : BUFSIZ;
		errno = saved;
	} else {
		ckc_vfd_t *v = ckc_vfd_held(fd);
		if (v) {
			ckc_stat_t st;
			ckc_vfd_stat_of(v, &st);
			ckc_vfd_drop(v);
		}
	}
	/* without a buffer of its own the stream keeps glibc's 8 KiB one */
	char *buf = malloc(size);
	if (buf)
		setvbuf(f, buf, _IOFBF, size);
	if (stdio_add(f, c, buf) != 0) {
		atomic_store(&c->fd, -1); /* the caller still owns fd */
		REAL(fclose)(f);
		free(buf);
		errno = ENOMEM;
		return NULL;
	}
	return f;
}

/* A stream the C library opened on a file the library does not cache. */
static FILE *stdio_opened_real(FILE *f, const char *path, const char *canon)
{
	if (f) {
		ckc_vfd_unseen(f->_fileno);
		ckc_px_real_opened(f->_fileno, path, canon);
	}
	ckc_thread_stream(f);
	return f;
}

/* fopen of a path that may be tagged (out of line: its canonical path is
 * on the stack only here) */
__attribute__((noinline)) CKC_TAGGED_PATH static FILE *fopen_look(const char *path, const char *mode,
								  FILE *(*real)(const char *, const char *))
{
	char canon[PATH_MAX];
	int saved = errno, flags = 0;
	bool tagged = false, links = false, first = false;

	if (mode && ckc_tagged_asked(AT_FDCWD, path, canon)) {
		flags = stdio_flags(mode);
		if (flags < 0) {
			errno = EINVAL;
			return NULL;
		}
		uint64_t t0;
		int fd = ckc_open_tagged(canon, flags, 0666, &t0);
		if (fd >= 0) {
			FILE *f = stdio_stream(fd, mode);
			if (!f)
				ckc_close_fd(fd);
			else
				errno = saved;
			return f;
		}
		errno = saved; /* the cache's looks may have set it */
		if (fd == CKC_PASS_TIMED) {
			/* timed to its fclose */
			FILE *f = CKC_FD_NUM(real(path, mode));
			if (f)
				ckc_small_opened(f->_fileno, t0);
			ckc_thread_stream(f);
			return f;
		}
		links = fd == CKC_PASS_LINKS;
		first = fd == CKC_PASS_FIRST;
		if (fd != CKC_PASS && !links && !first) {
			errno = -fd;
			return NULL;
		}
		tagged = true;
	}
	ckc_px_procfd_open(path);
	/* written at its real file: announced as open_common's are */
	uint64_t inplace = tagged && !first && (flags & O_ACCMODE) != O_RDONLY ? ckc_node_inplace_begin(canon, true) : 0;
	FILE *f = CKC_FD_NUM(real(path, mode));
	if (inplace)
		ckc_node_inplace_opened(inplace, f ? f->_fileno : -1);
	if (first)
		ckc_first_write_done(f != NULL);
	if (!f && links && errno == ENOENT) {
		int fd = ckc_open_linked(canon, flags);
		if (fd >= 0) {
			f = stdio_stream(fd, mode);
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
		errno = saved;
		f = CKC_FD_NUM(real(path, mode));
	}
	return stdio_opened_real(f, path, tagged ? canon : NULL);
}

/* fopen and fopen64: a name no pattern can match (ckc_tag_name_look) is
 * opened by the C library with no canonical path made */
CKC_WARM_PATH static FILE *fopen_common(const char *path, const char *mode, FILE *(*real)(const char *, const char *))
{
	if (!mode || ckc_tag_name_look(path) != CKC_NAME_UNTAGGED)
		return fopen_look(path, mode, real);
	ckc_px_procfd_open(path);
	return stdio_opened_real(CKC_FD_NUM(real(path, mode)), path, NULL);
}

CKC_WARM_PATH CKC_EXPORT FILE *fopen(const char *path, const char *mode)
{
	return fopen_common(path, mode, REAL(fopen));
}

CKC_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return fopen_common(path, mode, REAL(fopen64));
}

CKC_EXPORT FILE *fdopen(int fd, const char *mode)
{
	if (!ckc_vfd_get(fd)) {
		FILE *f = REAL(fdopen)(fd, mode);
		ckc_thread_stream(f);
		return f;
	}
	int saved = errno;
	/* as glibc's: a mode the descriptor's access does not allow is
	 * refused, and "a" sets O_APPEND on the descriptor */
	int want = mode ? stdio_flags(mode) : -1, fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return NULL;
	int acc = fl & O_ACCMODE, wacc = want & O_ACCMODE;
	if (want < 0 || (wacc == O_RDWR && acc != O_RDWR) || (wacc == O_RDONLY && acc == O_WRONLY) ||
	    (wacc == O_WRONLY && acc == O_RDONLY)) {
		errno = EINVAL;
		return NULL;
	}
	if ((want & O_APPEND) && !(fl & O_APPEND) && fcntl(fd, F_SETFL, fl | O_APPEND) != 0)
		return NULL;
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
	char canon[PATH_MAX], self[PATH_MAX];
	int flags = stdio_flags(mode), saved = errno, fd = CKC_PASS;

	if (flags < 0) {
		errno = EINVAL;
		return NULL;
	}
	fflush(stream);
	if (!path) {
		/* a change of mode: the stream's own file, by its name, as the
		 * C library reopens a file stream (through /proc/self/fd); the
		 * stream's descriptor is closed first, as freopen closes the
		 * file before it opens one (a rewrite's "w" truncates it, a
		 * read sees what the stream wrote), and where the open fails
		 * the stream is closed, as freopen leaves it */
		int cur = atomic_exchange(&c->fd, -1);
		ckc_vfd_t *v = ckc_vfd_held(cur);
		/* (a version unlinked or renamed over has no name: the
		 * file at the one it had is another, and it is not reopened) */
		char now[PATH_MAX];
		const char *name = v ? ckc_vfd_name(v, now) : NULL;
		static atomic_bool said;
		if (v && !name && !atomic_exchange(&said, true))
			ckc_warn("freopen of checkpoint %s, unlinked or renamed over while open: the library cannot "
				 "reopen it (EBADF)", v->path);
		ssize_t n = v ? (name ? (ssize_t)snprintf(self, sizeof(self), "%s", name) : -1) :
			    cur >= 0 ? ckc_fd_name(cur, self, sizeof(self)) : -1;
		ckc_vfd_drop(v);
		ckc_close_fd(cur);
		if (n <= 0 || (size_t)n >= sizeof(self) || self[0] != '/') {
			fclose(stream);
			errno = EBADF;
			return NULL;
		}
		path = self;
	}
	if (ckc_tagged_asked(AT_FDCWD, path, canon))
		fd = ckc_open_tagged(canon, flags, 0666, NULL);
	bool links = fd == CKC_PASS_LINKS, first = fd == CKC_PASS_FIRST;
	if (fd == CKC_PASS || fd == CKC_PASS_TIMED || links || first) {
		fd = CKC_FD_NUM(REAL(openat)(AT_FDCWD, path, flags, 0666));
		if (first)
			ckc_first_write_done(fd >= 0);
		if (fd < 0 && links && errno == ENOENT) {
			fd = ckc_open_linked(canon, flags);
			if (fd == CKC_PASS) {
				errno = saved;
				fd = CKC_FD_NUM(REAL(openat)(AT_FDCWD, path, flags, 0666));
			} else if (fd < 0) {
				errno = -fd;
				fd = -1;
			}
		}
	} else if (fd < 0) {
		errno = -fd;
		fd = -1;
	}
	if (fd < 0) {
		if (path == self) {
			int e = errno;
			fclose(stream);
			errno = e;
		}
		return NULL;
	}
	int old = atomic_exchange(&c->fd, fd);
	atomic_store(&c->window, STDIO_WINDOW_MIN);
	ckc_close_fd(old);
	/* the stream reads and writes as the new mode says (the C library
	 * set its flags from the mode the cookie stream was made with) */
	int acc = flags & O_ACCMODE;
	stream->_flags &= ~(STDIO_NO_READS | STDIO_NO_WRITES | STDIO_APPENDING);
	if (acc == O_RDONLY)
		stream->_flags |= STDIO_NO_WRITES;
	else if (acc == O_WRONLY)
		stream->_flags |= STDIO_NO_READS;
	if (flags & O_APPEND)
		stream->_flags |= STDIO_APPENDING;
	clearerr(stream);
	fseeko(stream, 0, (flags & O_APPEND) ? SEEK_END : SEEK_SET);
	errno = saved;
	return stream;
}

static FILE *freopen_common(const char *path, const char *mode, FILE *stream,
			    FILE *(*real)(const char *, const char *, FILE *))
{
	char canon[PATH_MAX];
	struct stdio_cookie *c = stream ? stdio_find(stream, NULL) : NULL;

	if (c)
		return freopen_cookie(path, mode, stream, c);
	if (path && ckc_tagged_asked(AT_FDCWD, path, canon)) {
		int rc = ckc_hand_over_path(canon);
		if (rc) {
			errno = -rc;
			return NULL;
		}
	}
	int old = stream && !ckc_in_vfork_child() ? stream->_fileno : -1;
	/* the C library closes the stream's number (a checkpoint's copy put
	 * there with dup2 included) and opens the new file itself */
	ckc_vfd_t *v = ckc_vfd_take_closing(old);
	FILE *f = real(path, mode, stream);
	if (v)
		ckc_vfd_put(v);
	if (f && f->_fileno != old)
		ckc_vfd_unseen(f->_fileno);
	return f;
}

CKC_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	return freopen_common(path, mode, stream, REAL(freopen));
}

CKC_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	return freopen_common(path, mode, stream, REAL(freopen64));
}

/* The program's threads: the streams' locks go back on first (thread.h).
 * The C library starts threads of its own for C11 threads, and for the
 * SIGEV_THREAD notifications of timers, message queues, POSIX AIO and
 * getaddrinfo_a, which run the program's code: each of those calls turns
 * them on as well (the first one; then each costs a load). */
CKC_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	ckc_thread_program_creates();
	return REAL(pthread_create)(t, a, fn, arg);
}

#define STDIO_THREADS_BY(ret, name, params, args)  \
	CKC_EXPORT ret name params                 \
	{                                          \
		ckc_thread_program_creates();      \
		return REAL(name) args;            \
	}
STDIO_THREADS_BY(int, thrd_create, (thrd_t * t, thrd_start_t fn, void *arg), (t, fn, arg))
STDIO_THREADS_BY(int, timer_create, (clockid_t c, struct sigevent *e, timer_t *t), (c, e, t))
STDIO_THREADS_BY(int, mq_notify, (mqd_t q, const struct sigevent *e), (q, e))
STDIO_THREADS_BY(int, getaddrinfo_a, (int m, struct gaicb **l, int n, struct sigevent *e), (m, l, n, e))
#undef STDIO_THREADS_BY

/* POSIX AIO: the C library's helper threads call the kernel on the
 * descriptor directly, so a tagged one becomes a descriptor of the real
 * file first (the checkpoint goes there), as for a reopen through
 * /proc/self/fd. */

#define AIO_ONE(name, params, args)                              \
	CKC_EXPORT int name params                               \
	{                                                        \
		ckc_thread_program_creates();                    \
		ckc_px_fd_make_real(a->aio_fildes, "POSIX AIO"); \
		return REAL(name) args;                          \
	}
AIO_ONE(aio_read, (struct aiocb * a), (a))
AIO_ONE(aio_read64, (struct aiocb64 * a), (a))
AIO_ONE(aio_write, (struct aiocb * a), (a))
AIO_ONE(aio_write64, (struct aiocb64 * a), (a))
AIO_ONE(aio_fsync, (int op, struct aiocb *a), (op, a))
AIO_ONE(aio_fsync64, (int op, struct aiocb64 *a), (op, a))
#undef AIO_ONE

#define AIO_LIST(name, cb_t)                                                          \
	CKC_EXPORT int name(int m, cb_t *const l[], int n, struct sigevent *e)        \
	{                                                                             \
		ckc_thread_program_creates();                                         \
		for (int i = 0; i < n; i++)                                           \
			if (l[i] && l[i]->aio_lio_opcode != LIO_NOP)                  \
				ckc_px_fd_make_real(l[i]->aio_fildes, "POSIX AIO");   \
		return REAL(name)(m, l, n, e);                                        \
	}
AIO_LIST(lio_listio, struct aiocb)
AIO_LIST(lio_listio64, struct aiocb64)
#undef AIO_LIST

void ckc_stdio_flush_all(void)
{
	/* glibc flushes stdio buffers only after the library destructors ran,
	 * when the cache is gone: push what the tagged streams hold now */
	ckc_mutex_lock(&stdio_lock);
	size_t n = stdio_n;
	FILE **fs = malloc(n * sizeof(*fs) + 1);
	for (size_t i = 0; fs && i < n; i++)
		fs[i] = stdio_ents[i].f;
	ckc_mutex_unlock(&stdio_lock);
	for (size_t i = 0; fs && i < n; i++)
		fflush(fs[i]);
	free(fs);
}

CKC_WARM_PATH CKC_EXPORT int fclose(FILE *f)
{
	char *buf = NULL;
	bool vforked = ckc_in_vfork_child();
	if (f && f->_fileno == STDIO_COOKIE_FILENO && !vforked)
		stdio_find(f, &buf);
	uint64_t t0 = 0;
	int fd = -1;
	if (f && f->_fileno != STDIO_COOKIE_FILENO && !vforked) {
		fd = f->_fileno;
		ckc_tag_forget_fd(fd);
		t0 = ckc_small_take(fd);
		if (ckc_node_inplace_count())
			ckc_node_inplace_close(fd);
	}
	/* a checkpoint's copy put on the stream's number (dup2 onto fileno)
	 * is closed inside the C library: its entry goes */
	ckc_vfd_t *v = ckc_vfd_take_closing(fd);
	int rc = REAL(fclose)(f);
	if (v)
		ckc_vfd_put(v);
	if (rc == 0 && t0)
		ckc_small_done(t0);
	/* glibc is done with a buffer it did not allocate once the stream is
	 * closed (its last flush included) */
	free(buf);
	return rc;
}

/* fseek(SEEK_CUR) of a cookie stream that holds written bytes in its
 * buffer: glibc flushes them, then moves from the position it had before
 * they were written (fputc at 1000, fseek(0, SEEK_CUR): 1000, not 1001),
 * and the next write lands one byte early. A tagged stream's SEEK_CUR is
 * made a SEEK_SET from ftello, which counts them. */
static bool stdio_seek_cur(FILE *f, off64_t *off, int *whence)
{
	if (*whence != SEEK_CUR || f->_fileno != STDIO_COOKIE_FILENO || !ckc_stdio_tagged(f))
		return true;
	off64_t cur = ftello64(f);
	if (cur < 0)
		return false;
	/* a position the file system refuses fails here, as SEEK_CUR fails
	 * on a file stream, where the position stays: glibc's SEEK_SET would
	 * first move to the block below it */
	bool fits = !__builtin_add_overflow(cur, *off, off) && *off >= 0;
	if (fits && *off > CKC_SEEK_ASK_FROM) {
		struct stdio_cookie *c = stdio_find(f, NULL);
		ckc_vfd_t *v = c ? ckc_vfd_held(atomic_load(&c->fd)) : NULL;
		fits = !v || ckc_px_seek_fits(v, *off);
		ckc_vfd_drop(v);
	}
	if (!fits) {
		errno = EINVAL;
		return false;
	}
	*whence = SEEK_SET;
	return true;
}

/* long and off_t are off64_t here (LP64): one conversion serves the three */
_Static_assert(sizeof(long) == sizeof(off64_t) && sizeof(off_t) == sizeof(off64_t), "64-bit offsets");

CKC_EXPORT int fseek(FILE *f, long off, int whence)
{
	if (__builtin_expect(f && f->_fileno < -1, 0) && !stdio_seek_cur(f, (off64_t *)&off, &whence))
		return -1;
	return REAL(fseek)(f, off, whence);
}

CKC_EXPORT int fseeko(FILE *f, off_t off, int whence)
{
	if (__builtin_expect(f && f->_fileno < -1, 0) && !stdio_seek_cur(f, (off64_t *)&off, &whence))
		return -1;
	return REAL(fseeko)(f, off, whence);
}

CKC_EXPORT int fseeko64(FILE *f, off64_t off, int whence)
{
	if (__builtin_expect(f && f->_fileno < -1, 0) && !stdio_seek_cur(f, &off, &whence))
		return -1;
	return REAL(fseeko64)(f, off, whence);
}

CKC_START_PATH CKC_EXPORT int fileno(FILE *f)
{
	struct stdio_cookie *c = f && f->_fileno == STDIO_COOKIE_FILENO ? stdio_find(f, NULL) : NULL;
	if (c)
		return atomic_load(&c->fd);
	return REAL(fileno)(f);
}
