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

#define sys_open (*ckc_io.open)
#define sys_close (*ckc_io.close)
#define sys_pread (*ckc_io.pread)
#define sys_pwrite (*ckc_io.pwrite)
#define sys_preadv2 (*ckc_io.preadv2)
#define sys_pread_cached (*ckc_io.pread_cached)
#define sys_cached (*ckc_io.cached)
#define sys_write (*ckc_io.write)
#define sys_fsync (*ckc_io.fsync)
#define sys_ftruncate (*ckc_io.ftruncate)
#define sys_fallocate (*ckc_io.fallocate)
#define sys_rename (*ckc_io.rename)
#define sys_unlink (*ckc_io.unlink)
#define sys_stat (*ckc_io.stat)
#define sys_lstat (*ckc_io.lstat)
#define sys_fstat (*ckc_io.fstat)
#define sys_access (*ckc_io.access)
#define sys_mkdir (*ckc_io.mkdir)
#define sys_chmod (*ckc_io.chmod)
#define sys_fchmod (*ckc_io.fchmod)
#define sys_fchown (*ckc_io.fchown)
#define sys_futimens (*ckc_io.futimens)
#define sys_linkat (*ckc_io.linkat)
#define sys_flock (*ckc_io.flock)
#define sys_mmap (*ckc_io.mmap)
#define sys_munmap (*ckc_io.munmap)
#define sys_madvise (*ckc_io.madvise)
#define sys_fopen (*ckc_io.fopen)
#define sys_fclose (*ckc_io.fclose)
#define sys_fwrite (*ckc_io.fwrite)
#define sys_closedir (*ckc_io.closedir)
#define sys_free (*ckc_io.free)
#define sys_realloc (*ckc_io.realloc)
#define sys_dlsym (*ckc_io.dlsym)

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
#pragma GCC poison chdir fchdir closedir mkdir flock
#pragma GCC poison fopen fopen64 fdopen freopen freopen64 fclose fread
#pragma GCC poison fwrite fileno popen
#pragma GCC poison mmap mmap64 munmap mremap madvise free realloc dlsym
#pragma GCC poison fork vfork system execl execle execlp execv execve execveat execvp execvpe
#pragma GCC poison fexecve posix_spawn posix_spawnp signal
#pragma GCC poison recv recvfrom recvmsg send sendto sendmsg

#endif
