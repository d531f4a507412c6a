/* Shared by the files of e2e_helper (tests/apps/e2e_helper.c has the
 * mode table): the checks that fail a test, the byte patterns, argument
 * parsing, I/O that fails the test on error, and each mode. */
#ifndef E2E_HELPER_H
#define E2E_HELPER_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <aio.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>


#define PROG "e2e_helper"
/* exit status of a sub-test that cannot run here (not a failure) */
#define EXIT_NOTE 77

extern const char *mode;
extern char *self_exe;

/* The operands most modes take, named as in their usage line. */
struct args {
	const char *path;  /* PATH or DIR */
	const char *path2; /* PATH2 */
	long n;		   /* N */
	size_t size;	   /* SIZE */
	uint64_t seed;	   /* SEED */
};

_Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t mix64(uint64_t x);
void pattern(unsigned char *b, uint64_t off, size_t n, uint64_t seed);
size_t pattern_diff(const unsigned char *b, uint64_t off, size_t n, uint64_t seed);
void *xmalloc(size_t n);
unsigned char *pattern_buf(size_t n, uint64_t seed);
uint64_t num(const char *s);
void need_args(int argc, int n, const char *usage);
struct args parse_args(int argc, char **argv, const char *usage);
size_t chunk_arg(int argc, char **argv);
bool verify_only(int argc, char **argv, int i);
int xopen(const char *path, int flags);
void xclose(int fd, const char *path);
FILE *xfopen(const char *path, const char *how);
void xfclose(FILE *f);
void write_all(int fd, const unsigned char *b, size_t n, const char *what);
size_t read_all(int fd, unsigned char *b, size_t n, const char *what);
void gen_file(const char *path, size_t size, uint64_t seed, size_t chunk);
void check_file(const char *path, size_t size, uint64_t seed, size_t chunk);
int gen_open(const char *path, size_t size, uint64_t seed);
bool reads_back(int fd, unsigned char *b, const unsigned char *expect, size_t n,
		       const char *path);
int raw_open(const char *path, int flags);
ssize_t raw_read(int fd, void *b, size_t n);
bool raw_exists(const char *path);
void raw_check(const char *path, const unsigned char *expect, size_t size, const char *when);
void sleep_ms(long ms);
int m_gen(int argc, char **argv);
int m_check(int argc, char **argv);
int m_rss(int argc, char **argv);
int m_wr(int argc, char **argv);
int m_rawcheck(int argc, char **argv);
void nth_path(char path[PATH_MAX], const char *dir, const char *prefix, long i);
void tmp_and_path(char tmp[PATH_MAX], char path[PATH_MAX], const char *dir, const char *prefix,
			 long i);
int m_history(int argc, char **argv);
int m_histcheck(int argc, char **argv);
int m_rewrite(int argc, char **argv);
int m_growhints(int argc, char **argv);
int m_threads(int argc, char **argv);
int m_churn(int argc, char **argv);
int m_readfd(int argc, char **argv);
int m_fork(int argc, char **argv);
int m_forkcost(int argc, char **argv);
int m_sharedfd(int argc, char **argv);
int m_n1part(int argc, char **argv);
void reader_intact(int fd, unsigned char *b, const unsigned char *e, const struct args *arg,
			  const char *wrote, const char *after);
int m_rawsys(int argc, char **argv);
void expect_map(int fd, int prot, int flags, const char *flags_name, const unsigned char *e,
		       const struct args *arg);
int m_mmap(int argc, char **argv);
int m_procfd(int argc, char **argv);
int m_uring(int argc, char **argv);
int m_aio(int argc, char **argv);
int m_unlink_open(int argc, char **argv);
int m_append_positional(int argc, char **argv);
int m_append_positional_check(int argc, char **argv);
int m_seek_limits(int argc, char **argv);
int m_errno_kept(int argc, char **argv);
int m_fsync_replace(int argc, char **argv);
int m_umask_modes(int argc, char **argv);
int m_copy_checks(int argc, char **argv);
int m_emfile_excl(int argc, char **argv);
int m_links(int argc, char **argv);
int m_sparse(int argc, char **argv);
int m_mtime_order(int argc, char **argv);
int m_thread_files(int argc, char **argv);
int m_closerace(int argc, char **argv);
int m_locks(int argc, char **argv);
int m_stdout(int argc, char **argv);
int m_fdops(int argc, char **argv);
int m_fsync_never(int argc, char **argv);
int m_stdio(int argc, char **argv);
void expect_bytes(const unsigned char *b, const unsigned char *e, size_t off, size_t n,
			 const char *what);
int m_stdio_large(int argc, char **argv);
int m_stdio_large_writes(int argc, char **argv);
int m_stdio_exit(int argc, char **argv);
int m_stdio_handed(int argc, char **argv);
int m_stdio_handed_efbig(int argc, char **argv);
int m_freopen(int argc, char **argv);
int m_stdio_threads(int argc, char **argv);
int m_stdio_seek_cur(int argc, char **argv);
int m_stdio_records(int argc, char **argv);
int m_daemonout(int argc, char **argv);
int m_unseenclose(int argc, char **argv);
int m_daemonkeeps(int argc, char **argv);
int m_closeall(int argc, char **argv);
int m_stdio_threads_check(int argc, char **argv);
int m_noclose(int argc, char **argv);
int m_renames(int argc, char **argv);
int m_pingpong(int argc, char **argv);
int m_handover(int argc, char **argv);
int m_unlinkrace(int argc, char **argv);
int m_statcached(int argc, char **argv);
int m_rename(int argc, char **argv);
int m_unlink(int argc, char **argv);
int m_closeby(int argc, char **argv);
int m_meta(int argc, char **argv);
int m_copycalls(int argc, char **argv);
int m_misc(int argc, char **argv);
int m_plainops(int argc, char **argv);
int m_exitrace(int argc, char **argv);
int m_prefix(int argc, char **argv);
int m_signals(int argc, char **argv);
int m_handlerwrites(int argc, char **argv);
int m_handlerlog(int argc, char **argv);
int m_handlerexit(int argc, char **argv);
int m_cancelwrite(int argc, char **argv);
int m_handlermalloc(int argc, char **argv);
int m_spawnrace(int argc, char **argv);
int m_answers(int argc, char **argv);
int m_fsize_child(int argc, char **argv);
int m_main_exits(int argc, char **argv);
int m_crash(int argc, char **argv);
int m_walkers(int argc, char **argv);
int m_exitthreads(int argc, char **argv);
int m_closeread(int argc, char **argv);
int m_closemeta(int argc, char **argv);
int m_closeflock(int argc, char **argv);
int m_flockpub(int argc, char **argv);
int m_flockupgrade(int argc, char **argv);
int m_vforkflock(int argc, char **argv);

#endif
