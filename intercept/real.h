/* The real libc functions behind the wrappers, resolved once with
 * dlsym(RTLD_NEXT). A wrapper whose real function is missing fails its
 * calls with ENOSYS and says so once; it never stops the program. */
#ifndef CKC_REAL_H
#define CKC_REAL_H

#include <aio.h>
#include <stdint.h>
#include <dirent.h>
#include <mqueue.h>
#include <netdb.h>
#include <threads.h>
#include <time.h>
#include <fts.h>
#include <ftw.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <sys/types.h>
#include <termios.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <wchar.h>
#include <sys/uio.h>

struct statx;
struct timeval;
struct utimbuf;

#define CKC_REAL_FUNCS(X)                                                                  \
	X(open, int, (const char *, int, ...))                                             \
	X(open64, int, (const char *, int, ...))                                           \
	X(openat, int, (int, const char *, int, ...))                                      \
	X(openat64, int, (int, const char *, int, ...))                                    \
	X(creat, int, (const char *, mode_t))                                              \
	X(creat64, int, (const char *, mode_t))                                            \
	X(__open_2, int, (const char *, int))                                              \
	X(__open64_2, int, (const char *, int))                                            \
	X(__openat_2, int, (int, const char *, int))                                       \
	X(__openat64_2, int, (int, const char *, int))                                     \
	X(close, int, (int))                                                               \
	X(close_range, int, (unsigned int, unsigned int, int))                             \
	X(closefrom, void, (int))                                                          \
	X(poll, int, (struct pollfd *, nfds_t, int))                                       \
	X(__poll_chk, int, (struct pollfd *, nfds_t, int, size_t))                         \
	X(ppoll, int, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *)) \
	X(__ppoll_chk, int, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t)) \
	X(select, int, (int, fd_set *, fd_set *, fd_set *, struct timeval *))              \
	X(pselect, int, (int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *)) \
	X(epoll_ctl, int, (int, int, int, struct epoll_event *))                           \
	X(setuid, int, (uid_t))                                                            \
	X(seteuid, int, (uid_t))                                                           \
	X(setreuid, int, (uid_t, uid_t))                                                   \
	X(setresuid, int, (uid_t, uid_t, uid_t))                                           \
	X(setgid, int, (gid_t))                                                            \
	X(setegid, int, (gid_t))                                                           \
	X(setregid, int, (gid_t, gid_t))                                                   \
	X(setresgid, int, (gid_t, gid_t, gid_t))                                           \
	X(closedir, int, (DIR *))                                                          \
	X(opendir, DIR *, (const char *))                                                  \
	X(scandir, int, (const char *, struct dirent ***, int (*)(const struct dirent *),  \
			 int (*)(const struct dirent **, const struct dirent **)))          \
	X(scandir64, int, (const char *, struct dirent64 ***,                             \
			   int (*)(const struct dirent64 *),                                \
			   int (*)(const struct dirent64 **, const struct dirent64 **)))    \
	X(scandirat, int, (int, const char *, struct dirent ***,                          \
			   int (*)(const struct dirent *),                                  \
			   int (*)(const struct dirent **, const struct dirent **)))        \
	X(scandirat64, int, (int, const char *, struct dirent64 ***,                      \
			     int (*)(const struct dirent64 *),                              \
			     int (*)(const struct dirent64 **, const struct dirent64 **)))  \
	X(glob, int, (const char *, int, int (*)(const char *, int), glob_t *))            \
	X(glob64, int, (const char *, int, int (*)(const char *, int), glob64_t *))        \
	X(nftw, int, (const char *, __nftw_func_t, int, int))                              \
	X(nftw64, int, (const char *, __nftw64_func_t, int, int))                          \
	X(fts_open, FTS *, (char *const *, int, int (*)(const FTSENT **, const FTSENT **))) \
	X(fdopendir, DIR *, (int))                                                         \
	X(rmdir, int, (const char *))                                                      \
	X(sync_file_range, int, (int, off_t, off_t, unsigned int))                         \
	X(syncfs, int, (int))                                                              \
	X(sync, void, (void))                                                              \
	X(mkdir, int, (const char *, mode_t))                                              \
	X(mkdirat, int, (int, const char *, mode_t))                                       \
	X(symlink, int, (const char *, const char *))                                      \
	X(symlinkat, int, (const char *, int, const char *))                               \
	X(mknod, int, (const char *, mode_t, dev_t))                                       \
	X(mknodat, int, (int, const char *, mode_t, dev_t))                                \
	X(mkfifo, int, (const char *, mode_t))                                             \
	X(mkfifoat, int, (int, const char *, mode_t))                                      \
	X(chdir, int, (const char *))                                                      \
	X(fchdir, int, (int))                                                              \
	X(readlinkat, ssize_t, (int, const char *, char *, size_t))                        \
	X(realpath, char *, (const char *, char *))                                        \
	X(euidaccess, int, (const char *, int))                                            \
	X(statfs, int, (const char *, struct statfs *))                                    \
	X(statfs64, int, (const char *, struct statfs64 *))                                \
	X(statvfs, int, (const char *, struct statvfs *))                                  \
	X(statvfs64, int, (const char *, struct statvfs64 *))                              \
	X(pathconf, long, (const char *, int))                                             \
	X(fstatfs, int, (int, struct statfs *))                                            \
	X(fstatfs64, int, (int, struct statfs64 *))                                        \
	X(fstatvfs, int, (int, struct statvfs *))                                          \
	X(fstatvfs64, int, (int, struct statvfs64 *))                                      \
	X(fpathconf, long, (int, int))                                                     \
	X(read, ssize_t, (int, void *, size_t))                                            \
	X(write, ssize_t, (int, const void *, size_t))                                     \
	X(__vdprintf_chk, int, (int, int, const char *, va_list))                          \
	X(pread, ssize_t, (int, void *, size_t, off_t))                                    \
	X(pread64, ssize_t, (int, void *, size_t, off_t))                                  \
	X(pwrite, ssize_t, (int, const void *, size_t, off_t))                             \
	X(pwrite64, ssize_t, (int, const void *, size_t, off_t))                           \
	X(readv, ssize_t, (int, const struct iovec *, int))                                \
	X(writev, ssize_t, (int, const struct iovec *, int))                               \
	X(preadv, ssize_t, (int, const struct iovec *, int, off_t))                        \
	X(preadv64, ssize_t, (int, const struct iovec *, int, off_t))                      \
	X(pwritev, ssize_t, (int, const struct iovec *, int, off_t))                       \
	X(pwritev64, ssize_t, (int, const struct iovec *, int, off_t))                     \
	X(preadv2, ssize_t, (int, const struct iovec *, int, off_t, int))                  \
	X(preadv64v2, ssize_t, (int, const struct iovec *, int, off_t, int))               \
	X(pwritev2, ssize_t, (int, const struct iovec *, int, off_t, int))                 \
	X(pwritev64v2, ssize_t, (int, const struct iovec *, int, off_t, int))              \
	X(lseek, off_t, (int, off_t, int))                                                 \
	X(lseek64, off_t, (int, off_t, int))                                               \
	X(ioctl, int, (int, unsigned long, ...))                                           \
	X(isatty, int, (int))                                                              \
	X(tcgetattr, int, (int, struct termios *))                                         \
	X(fsync, int, (int))                                                               \
	X(fdatasync, int, (int))                                                           \
	X(ftruncate, int, (int, off_t))                                                    \
	X(ftruncate64, int, (int, off_t))                                                  \
	X(truncate, int, (const char *, off_t))                                            \
	X(truncate64, int, (const char *, off_t))                                          \
	X(dup, int, (int))                                                                 \
	X(dup2, int, (int, int))                                                           \
	X(dup3, int, (int, int, int))                                                      \
	X(pipe, int, (int *))                                                              \
	X(pipe2, int, (int *, int))                                                        \
	X(socket, int, (int, int, int))                                                    \
	X(socketpair, int, (int, int, int, int *))                                         \
	X(accept, int, (int, struct sockaddr *, socklen_t *))                              \
	X(accept4, int, (int, struct sockaddr *, socklen_t *, int))                        \
	X(eventfd, int, (unsigned int, int))                                               \
	X(memfd_create, int, (const char *, unsigned int))                                 \
	X(epoll_create, int, (int))                                                        \
	X(epoll_create1, int, (int))                                                       \
	X(inotify_init, int, (void))                                                       \
	X(inotify_init1, int, (int))                                                       \
	X(timerfd_create, int, (int, int))                                                 \
	X(signalfd, int, (int, const sigset_t *, int))                                     \
	X(mkstemp, int, (char *))                                                          \
	X(mkostemp, int, (char *, int))                                                    \
	X(mkstemps, int, (char *, int))                                                    \
	X(mkostemps, int, (char *, int, int))                                              \
	X(mkstemp64, int, (char *))                                                        \
	X(mkostemp64, int, (char *, int))                                                  \
	X(fcntl, int, (int, int, ...))                                                     \
	X(fcntl64, int, (int, int, ...))                                                   \
	X(flock, int, (int, int))                                                          \
	X(lockf, int, (int, int, off_t))                                                   \
	X(lockf64, int, (int, int, off_t))                                                 \
	X(stat, int, (const char *, struct stat *))                                        \
	X(lstat, int, (const char *, struct stat *))                                       \
	X(umask, mode_t, (mode_t))                                                         \
	X(fstat, int, (int, struct stat *))                                                \
	X(fstatat, int, (int, const char *, struct stat *, int))                           \
	X(stat64, int, (const char *, struct stat *))                                      \
	X(lstat64, int, (const char *, struct stat *))                                     \
	X(fstat64, int, (int, struct stat *))                                              \
	X(fstatat64, int, (int, const char *, struct stat *, int))                         \
	X(statx, int, (int, const char *, int, unsigned int, struct statx *))              \
	X(__xstat, int, (int, const char *, struct stat *))                                \
	X(__lxstat, int, (int, const char *, struct stat *))                               \
	X(__fxstat, int, (int, int, struct stat *))                                        \
	X(__fxstatat, int, (int, int, const char *, struct stat *, int))                   \
	X(__xstat64, int, (int, const char *, struct stat *))                              \
	X(__lxstat64, int, (int, const char *, struct stat *))                             \
	X(__fxstat64, int, (int, int, struct stat *))                                      \
	X(__fxstatat64, int, (int, int, const char *, struct stat *, int))                 \
	X(chmod, int, (const char *, mode_t))                                              \
	X(fchmod, int, (int, mode_t))                                                      \
	X(fchmodat, int, (int, const char *, mode_t, int))                                 \
	X(chown, int, (const char *, uid_t, gid_t))                                        \
	X(lchown, int, (const char *, uid_t, gid_t))                                       \
	X(fchown, int, (int, uid_t, gid_t))                                                \
	X(fchownat, int, (int, const char *, uid_t, gid_t, int))                           \
	X(utimensat, int, (int, const char *, const struct timespec *, int))               \
	X(futimens, int, (int, const struct timespec *))                                   \
	X(utimes, int, (const char *, const struct timeval *))                             \
	X(lutimes, int, (const char *, const struct timeval *))                            \
	X(futimes, int, (int, const struct timeval *))                                     \
	X(utime, int, (const char *, const struct utimbuf *))                              \
	X(fsetxattr, int, (int, const char *, const void *, size_t, int))                  \
	X(fgetxattr, ssize_t, (int, const char *, void *, size_t))                         \
	X(flistxattr, ssize_t, (int, char *, size_t))                                      \
	X(fremovexattr, int, (int, const char *))                                          \
	X(setxattr, int, (const char *, const char *, const void *, size_t, int))          \
	X(lsetxattr, int, (const char *, const char *, const void *, size_t, int))         \
	X(getxattr, ssize_t, (const char *, const char *, void *, size_t))                 \
	X(listxattr, ssize_t, (const char *, char *, size_t))                               \
	X(llistxattr, ssize_t, (const char *, char *, size_t))                              \
	X(removexattr, int, (const char *, const char *))                                   \
	X(lremovexattr, int, (const char *, const char *))                                  \
	X(lgetxattr, ssize_t, (const char *, const char *, void *, size_t))                \
	X(access, int, (const char *, int))                                                \
	X(faccessat, int, (int, const char *, int, int))                                   \
	X(unlink, int, (const char *))                                                     \
	X(unlinkat, int, (int, const char *, int))                                         \
	X(remove, int, (const char *))                                                     \
	X(rename, int, (const char *, const char *))                                       \
	X(renameat, int, (int, const char *, int, const char *))                           \
	X(renameat2, int, (int, const char *, int, const char *, unsigned int))            \
	X(posix_fadvise, int, (int, off_t, off_t, int))                                    \
	X(posix_fadvise64, int, (int, off_t, off_t, int))                                  \
	X(readahead, ssize_t, (int, off_t, size_t))                                        \
	X(fallocate, int, (int, int, off_t, off_t))                                        \
	X(fallocate64, int, (int, int, off_t, off_t))                                      \
	X(posix_fallocate, int, (int, off_t, off_t))                                       \
	X(posix_fallocate64, int, (int, off_t, off_t))                                     \
	X(mmap, void *, (void *, size_t, int, int, int, off_t))                            \
	X(mmap64, void *, (void *, size_t, int, int, int, off_t))                          \
	X(sendfile, ssize_t, (int, int, off_t *, size_t))                                  \
	X(sendfile64, ssize_t, (int, int, off_t *, size_t))                                \
	X(copy_file_range, ssize_t, (int, off_t *, int, off_t *, size_t, unsigned int))    \
	X(splice, ssize_t, (int, off_t *, int, off_t *, size_t, unsigned int))             \
	X(fopen, FILE *, (const char *, const char *))                                     \
	X(fopen64, FILE *, (const char *, const char *))                                   \
	X(fdopen, FILE *, (int, const char *))                                             \
	X(freopen, FILE *, (const char *, const char *, FILE *))                           \
	X(freopen64, FILE *, (const char *, const char *, FILE *))                         \
	X(fclose, int, (FILE *))                                                           \
	X(fileno, int, (FILE *))                                                           \
	X(fseek, int, (FILE *, long, int))                                                 \
	X(fseeko, int, (FILE *, off_t, int))                                               \
	X(fseeko64, int, (FILE *, off64_t, int))                                           \
	X(fwrite, size_t, (const void *, size_t, size_t, FILE *))                          \
	X(fread, size_t, (void *, size_t, size_t, FILE *))                                 \
	X(fwrite_unlocked, size_t, (const void *, size_t, size_t, FILE *))                 \
	X(fread_unlocked, size_t, (void *, size_t, size_t, FILE *))                        \
	X(fwide, int, (FILE *, int))                                                       \
	X(fputwc, wint_t, (wchar_t, FILE *))                                               \
	X(putwc, wint_t, (wchar_t, FILE *))                                                \
	X(fputwc_unlocked, wint_t, (wchar_t, FILE *))                                      \
	X(putwc_unlocked, wint_t, (wchar_t, FILE *))                                       \
	X(fputws, int, (const wchar_t *, FILE *))                                          \
	X(fputws_unlocked, int, (const wchar_t *, FILE *))                                 \
	X(fgetwc, wint_t, (FILE *))                                                        \
	X(getwc, wint_t, (FILE *))                                                         \
	X(fgetwc_unlocked, wint_t, (FILE *))                                               \
	X(getwc_unlocked, wint_t, (FILE *))                                                \
	X(fgetws, wchar_t *, (wchar_t *, int, FILE *))                                     \
	X(fgetws_unlocked, wchar_t *, (wchar_t *, int, FILE *))                            \
	X(ungetwc, wint_t, (wint_t, FILE *))                                               \
	X(vfwprintf, int, (FILE *, const wchar_t *, va_list))                              \
	X(vfwscanf, int, (FILE *, const wchar_t *, va_list))                               \
	X(__isoc99_vfwscanf, int, (FILE *, const wchar_t *, va_list))                      \
	X(__vfwprintf_chk, int, (FILE *, int, const wchar_t *, va_list))                   \
	X(__fgetws_chk, wchar_t *, (wchar_t *, size_t, int, FILE *))                       \
	X(__fgetws_unlocked_chk, wchar_t *, (wchar_t *, size_t, int, FILE *))              \
	X(munmap, int, (void *, size_t))                                                   \
	X(mremap, void *, (void *, size_t, size_t, int, ...))                              \
	X(madvise, int, (void *, size_t, int))                                             \
	X(send, ssize_t, (int, const void *, size_t, int))                                 \
	X(sendto, ssize_t, (int, const void *, size_t, int, const struct sockaddr *, socklen_t)) \
	X(sendmsg, ssize_t, (int, const struct msghdr *, int))                             \
	X(recv, ssize_t, (int, void *, size_t, int))                                       \
	X(recvfrom, ssize_t, (int, void *, size_t, int, struct sockaddr *, socklen_t *))   \
	X(recvmsg, ssize_t, (int, struct msghdr *, int))                                   \
	X(sigaction, int, (int, const struct sigaction *, struct sigaction *))             \
	X(signal, sighandler_t, (int, sighandler_t))                                       \
	X(link, int, (const char *, const char *))                                         \
	X(linkat, int, (int, const char *, int, const char *, int))                        \
	X(fork, pid_t, (void))                                                             \
	X(daemon, int, (int, int))                                                         \
	X(forkpty, pid_t, (int *, char *, const struct termios *, const struct winsize *)) \
	X(openpty, int, (int *, int *, char *, const struct termios *, const struct winsize *)) \
	X(login_tty, int, (int))                                                           \
	X(posix_spawn, int, (pid_t *, const char *, const posix_spawn_file_actions_t *,    \
			     const posix_spawnattr_t *, char *const[], char *const[]))      \
	X(posix_spawnp, int, (pid_t *, const char *, const posix_spawn_file_actions_t *,   \
			      const posix_spawnattr_t *, char *const[], char *const[]))     \
	X(posix_spawn_file_actions_addopen, int, (posix_spawn_file_actions_t *, int, const char *, int, \
						  mode_t))                                   \
	X(system, int, (const char *))                                                     \
	X(popen, FILE *, (const char *, const char *))                                     \
	X(execve, int, (const char *, char *const[], char *const[]))                       \
	X(execv, int, (const char *, char *const[]))                                       \
	X(execvp, int, (const char *, char *const[]))                                      \
	X(execvpe, int, (const char *, char *const[], char *const[]))                      \
	X(fexecve, int, (int, char *const[], char *const[]))                               \
	X(execveat, int, (int, const char *, char *const[], char *const[], int))           \
	X(_exit, void, (int))                                                              \
	X(_Exit, void, (int))                                                              \
	X(pthread_create, int, (pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)) \
	X(pthread_exit, void, (void *))                                                    \
	X(thrd_create, int, (thrd_t *, thrd_start_t, void *))                              \
	X(timer_create, int, (clockid_t, struct sigevent *, timer_t *))                     \
	X(mq_notify, int, (mqd_t, const struct sigevent *))                                 \
	X(getaddrinfo_a, int, (int, struct gaicb **, int, struct sigevent *))               \
	X(aio_read, int, (struct aiocb *))                                                  \
	X(aio_read64, int, (struct aiocb64 *))                                              \
	X(aio_write, int, (struct aiocb *))                                                 \
	X(aio_write64, int, (struct aiocb64 *))                                             \
	X(aio_fsync, int, (int, struct aiocb *))                                            \
	X(aio_fsync64, int, (int, struct aiocb64 *))                                        \
	X(lio_listio, int, (int, struct aiocb *const[], int, struct sigevent *))            \
	X(lio_listio64, int, (int, struct aiocb64 *const[], int, struct sigevent *))

#define CKC_REAL_FIELD(name, ret, args) ret(*name) args;
typedef struct ckc_real {
	CKC_REAL_FUNCS(CKC_REAL_FIELD)
} ckc_real_t;
#undef CKC_REAL_FIELD

/* Each function's number, for ckc_real_resolve_one. */
#define CKC_REAL_NUMBER(name, ret, args) CKC_REAL_I_##name,
enum { CKC_REAL_FUNCS(CKC_REAL_NUMBER) CKC_REAL_N };
#undef CKC_REAL_NUMBER

extern ckc_real_t ckc_real;

/* The C library's dlsym (this library exports its own, for CUDA). */
typedef void *(*dlsym_fn)(void *, const char *);
dlsym_fn ckc_real_dlsym(void);

/* The C library's sigaction (this library keeps SIGSEGV for itself). */
int ckc_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* Resolves every real function (idempotent, thread-safe). */
void ckc_real_resolve(void);
/* Resolves the real function numbered i (CKC_REAL_I_name): each is looked
 * up on its first use, so a process pays for the few it calls (a lookup
 * costs about 0.2 us; the library wraps some 200). */
void ckc_real_resolve_one(unsigned i);
/* The few a signal handler may well call first (write, read, close...),
 * resolved as the library starts: a lookup from a handler that interrupted
 * the dynamic loader would enter it again; and those a forked child calls
 * (_exit, execve, dup2), which each child would look up again. */
void ckc_real_resolve_early(void);
/* Those a forked child calls before its new program (once, in the parent,
 * at its first fork). */
void ckc_real_resolve_for_child(void);

/* Reports, once per function, that its real symbol is missing. */
void ckc_real_missing(const char *name);

/* The stat family, whose C library functions are its one system call
 * each (glibc >= 2.33 on x86_64 and aarch64), lseek and ioctl (the same
 * there, with a 64-bit time), and fcntl's commands that neither wait nor
 * need the C library's translation (descriptor flags, status flags, dup):
 * where the function found for one of them is the C library's own (no
 * other interposer between), its wrapper makes the call itself, and a
 * walker's stat of each name (du, tar: 100,000 and more) runs no second
 * function after the kernel returns. A bit of ckc_real_kernel per
 * function, set as it resolves. */
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__GLIBC__) && \
	(__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define CKC_REAL_KERNEL 1
#else
#define CKC_REAL_KERNEL 0
#endif
extern uint32_t ckc_real_kernel;
#define CKC_REAL_KERNEL_FUNCS(X)                                                                   \
	X(stat) X(stat64) X(lstat) X(lstat64) X(fstat) X(fstat64) X(fstatat) X(fstatat64) X(fcntl) \
	X(fcntl64) X(lseek) X(lseek64) X(ioctl)
#define CKC_REAL_KERNEL_NUMBER(name) CKC_REAL_K_##name,
enum { CKC_REAL_KERNEL_FUNCS(CKC_REAL_KERNEL_NUMBER) CKC_REAL_K_N };
#undef CKC_REAL_KERNEL_NUMBER
/* Function i's bit in ckc_real_kernel (0: none of these). */
static inline uint32_t ckc_real_kernel_bit(unsigned i)
{
#define CKC_REAL_KERNEL_CASE(name) \
	case CKC_REAL_I_##name:    \
		return 1u << CKC_REAL_K_##name;
	switch (i) {
		CKC_REAL_KERNEL_FUNCS(CKC_REAL_KERNEL_CASE)
	default:
		return 0;
	}
#undef CKC_REAL_KERNEL_CASE
}
/* Whether name's wrapper may make its system call itself. */
#define REAL_KERNEL(name) \
	(CKC_REAL_KERNEL && (__atomic_load_n(&ckc_real_kernel, __ATOMIC_RELAXED) & ckc_real_kernel_bit(CKC_REAL_I_##name)))

/* The real function `name`, resolving on first use; never NULL once
 * resolved (a missing one is a stub that fails with ENOSYS). */
#define REAL(name)                                                                    \
	({                                                                            \
		__typeof__(ckc_real.name) real_fn_ = __atomic_load_n(&ckc_real.name,  \
								      __ATOMIC_RELAXED); \
		if (__builtin_expect(!real_fn_, 0)) {                                 \
			ckc_real_resolve_one(CKC_REAL_I_##name);                      \
			real_fn_ = __atomic_load_n(&ckc_real.name, __ATOMIC_RELAXED); \
		}                                                                     \
		real_fn_;                                                             \
	})

#endif
