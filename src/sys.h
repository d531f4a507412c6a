/* The names the preloaded library interposes, poisoned for the engine, the
 * tiers and the hints: each .c file of src/ and hints/ includes this header
 * last, and calls the C library through the table of real functions
 * (io.h) by the sys_ names below. A call by the interposed name would bind
 * to the library's own wrapper; here it does not compile. tests/launcher
 * checks the linked objects as well (no undefined reference of the engine's
 * objects names a function the library exports). stat is left out of the
 * poisoned names (struct stat shares it); the check of the objects covers
 * it. */
#ifndef CKC_SYS_H
#define CKC_SYS_H

#include "io.h"
#include "lockrank.h"

/* A file system call: in a build configured with --enable-lock-check=io,
 * it must not run under the engine lock or the owed-range table's
 * (lockrank.h). */
#ifdef CKC_LOCK_CHECK_IO
#define CKC_SYS_IO(name) (ckc_rank_io_check(#name), *ckc_io.name)
#else
#define CKC_SYS_IO(name) (*ckc_io.name)
#endif

#define sys_open CKC_SYS_IO(open)
#define sys_close CKC_SYS_IO(close)
#define sys_pread CKC_SYS_IO(pread)
#define sys_pwrite CKC_SYS_IO(pwrite)
#define sys_preadv2 CKC_SYS_IO(preadv2)
#define sys_pread_cached (*ckc_io.pread_cached)
#define sys_cached (*ckc_io.cached)
#define sys_write (*ckc_io.write)
#define sys_fsync CKC_SYS_IO(fsync)
#define sys_ftruncate CKC_SYS_IO(ftruncate)
#define sys_fallocate CKC_SYS_IO(fallocate)
#define sys_rename CKC_SYS_IO(rename)
#define sys_renameat2 CKC_SYS_IO(renameat2)
#define sys_unlink CKC_SYS_IO(unlink)
#define sys_stat CKC_SYS_IO(stat)
#define sys_lstat CKC_SYS_IO(lstat)
#define sys_fstat CKC_SYS_IO(fstat)
#define sys_access CKC_SYS_IO(access)
#define sys_mkdir CKC_SYS_IO(mkdir)
#define sys_chmod CKC_SYS_IO(chmod)
#define sys_fchmod CKC_SYS_IO(fchmod)
#define sys_fchown CKC_SYS_IO(fchown)
#define sys_futimens CKC_SYS_IO(futimens)
#define sys_linkat CKC_SYS_IO(linkat)
#define sys_flock CKC_SYS_IO(flock)
#define sys_mmap (*ckc_io.mmap)
#define sys_munmap (*ckc_io.munmap)
#define sys_madvise (*ckc_io.madvise)
#define sys_fopen CKC_SYS_IO(fopen)
#define sys_fclose CKC_SYS_IO(fclose)
#define sys_fwrite CKC_SYS_IO(fwrite)
#define sys_opendir CKC_SYS_IO(opendir)
#define sys_rmdir CKC_SYS_IO(rmdir)
#define sys_closedir CKC_SYS_IO(closedir)
#define sys_free (*ckc_io.free)
#define sys_realloc (*ckc_io.realloc)
#define sys_malloc (*ckc_io.malloc)
#define sys_calloc (*ckc_io.calloc)
#define sys_posix_memalign (*ckc_io.posix_memalign)
#define sys_socket (*ckc_io.socket)
#define sys_accept4 (*ckc_io.accept4)
#define sys_eventfd (*ckc_io.eventfd)
#define sys_dlsym (*ckc_io.dlsym)
#define sys_pthread_create (*ckc_io.pthread_create)

#pragma GCC poison open open64 openat openat64 creat creat64 close close_range closefrom
#pragma GCC poison read write pread pread64 pwrite pwrite64 readv writev
#pragma GCC poison preadv preadv64 pwritev pwritev64 preadv2 preadv64v2 pwritev2 pwritev64v2
#pragma GCC poison lseek lseek64 fsync fdatasync ftruncate ftruncate64 truncate truncate64
#pragma GCC poison fallocate fallocate64 posix_fallocate posix_fallocate64 posix_fadvise
#pragma GCC poison posix_fadvise64 readahead sendfile sendfile64 splice copy_file_range
#pragma GCC poison dup dup2 dup3 fcntl fcntl64 lockf lockf64
#pragma GCC poison lstat fstat fstatat stat64 lstat64 fstat64 fstatat64
#pragma GCC poison access faccessat chmod fchmod fchmodat chown lchown fchown fchownat
#pragma GCC poison utimensat futimens utimes lutimes futimes utime
#pragma GCC poison setxattr lsetxattr fsetxattr getxattr lgetxattr fgetxattr flistxattr
#pragma GCC poison fremovexattr link linkat rename renameat renameat2 unlink unlinkat remove
#pragma GCC poison chdir fchdir opendir fdopendir closedir mkdir rmdir flock
#pragma GCC poison fopen fopen64 fdopen freopen freopen64 fclose fread
#pragma GCC poison fwrite fileno popen
#pragma GCC poison mmap mmap64 munmap mremap madvise free realloc dlsym
#pragma GCC poison malloc calloc posix_memalign aligned_alloc memalign syscall
#pragma GCC poison pipe pipe2 socket socketpair accept accept4 eventfd memfd_create daemon forkpty
#pragma GCC poison fork vfork system execl execle execlp execv execve execveat execvp execvpe
#pragma GCC poison fexecve posix_spawn posix_spawnp signal
#pragma GCC poison recv recvfrom recvmsg send sendto sendmsg

#endif
