/* The engine's own I/O calls, behind a table of function pointers.
 * Tests swap entries to inject faults (ENOSPC, EIO, slow storage); the
 * interposer points them at the real libc symbols so that the engine's own
 * I/O never re-enters a wrapper. */
#ifndef CKC_IO_H
#define CKC_IO_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct ckc_io {
	int (*open)(const char *path, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	/* pread of what the page cache holds, never waiting for the device:
	 * fewer bytes (or -1 with EAGAIN) where it holds nothing */
	ssize_t (*pread_cached)(int fd, void *buf, size_t len, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
	int (*fsync)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	int (*rename)(const char *from, const char *to);
	int (*unlink)(const char *path);
	int (*stat)(const char *path, struct stat *st);
	int (*fstat)(int fd, struct stat *st);
	int (*mkdir)(const char *path, mode_t mode);
	int (*linkat)(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
		      int flags);
} ckc_io_t;

/* Nonzero while this thread runs engine code (the engine's threads, or a
 * wrapper calling into the engine): the interposed wrappers then go straight
 * to libc, so the engine's own I/O never re-enters them. */
extern __thread int ckc_io_guard;

/* The table in use; never NULL. */
extern ckc_io_t ckc_io;

/* Restores every entry to the libc default. */
void ckc_io_reset(void);

/* Writes all of buf at off, retrying short writes and EINTR.
 * Returns 0 on success, -errno on failure. */
int ckc_io_pwrite_all(int fd, const void *buf, size_t len, off_t off);

/* Reads len bytes at off, retrying short reads and EINTR. Returns the number
 * of bytes read (less than len only at end of file), or -errno. */
ssize_t ckc_io_pread_all(int fd, void *buf, size_t len, off_t off);

/* Reads what the page cache holds of [off, off+len) from its start on.
 * Returns the bytes read (0 when it holds nothing there, or cannot say). */
size_t ckc_io_pread_cached_all(int fd, void *buf, size_t len, off_t off);

#endif
