/* How far below its caller each of a list of ordinary calls writes into the
 * stack: a short program pays a page fault for each stack page it reaches
 * for the first time, so a library preloaded into it should reach no
 * deeper than the C library alone does, by more than the one path buffer
 * a call on a name needs.
 *
 *     stack_reach DIR
 *
 * DIR: an existing folder the program may write (a file "f" and a folder
 * "d" are made there). For each call: its name and the bytes below the
 * calling frame that it wrote, a line each ("stat 312"). Built with
 * -z now by tests/launcher/run, so that no first call is the dynamic
 * linker's symbol lookup; each call runs once before it is measured, so
 * that one-time work (the library's start) is not counted. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define REGION (256 * 1024)
#define PAINT 0xa5

static const char *dir;
static char file[PATH_MAX], missing[PATH_MAX], sub[PATH_MAX], twocomp[PATH_MAX], other[PATH_MAX];

/* what the calls write, kept so that the compiler keeps the calls */
static volatile long sink;

static void c_stat(void)
{
	struct stat st;
	sink += stat(file, &st);
}

static void c_stat_missing(void)
{
	struct stat st;
	sink += stat(missing, &st);
}

static void c_lstat_relative(void)
{
	struct stat st;
	sink += lstat("f", &st);
}

static void c_fstatat_two(void)
{
	struct stat st;
	sink += fstatat(AT_FDCWD, twocomp, &st, 0);
}

static void c_access(void)
{
	sink += access(file, R_OK);
}

static void c_access_missing(void)
{
	sink += access(missing, R_OK);
}

static void c_faccessat(void)
{
	sink += faccessat(AT_FDCWD, "f", R_OK, AT_EACCESS);
}

static void c_open_close(void)
{
	int fd = open(file, O_RDONLY);
	sink += fd;
	if (fd >= 0)
		close(fd);
}

static void c_open_relative(void)
{
	int fd = open("f", O_RDONLY);
	sink += fd;
	if (fd >= 0)
		close(fd);
}

static void c_open_missing(void)
{
	sink += open(missing, O_RDONLY);
}

static void c_fopen_fclose(void)
{
	FILE *f = fopen(file, "r");
	sink += f != NULL;
	if (f)
		fclose(f);
}

static void c_unlink_missing(void)
{
	sink += unlink(missing);
}

static void c_rmdir_missing(void)
{
	sink += rmdir(missing);
}

static void c_mkdir_existing(void)
{
	sink += mkdir(sub, 0755);
}

static void c_rename_missing(void)
{
	sink += rename(missing, other);
}

static void c_statfs(void)
{
	struct statfs s;
	sink += statfs(file, &s);
}

static void c_statfs_missing(void)
{
	struct statfs s;
	sink += statfs(missing, &s);
}

static void c_statvfs(void)
{
	struct statvfs s;
	sink += statvfs(file, &s);
}

static void c_fstatfs(void)
{
	struct statfs s;
	int fd = open(file, O_RDONLY);
	if (fd >= 0) {
		sink += fstatfs(fd, &s);
		close(fd);
	}
}

static void c_pathconf(void)
{
	sink += pathconf(file, _PC_NAME_MAX);
}

static void c_flock(void)
{
	int fd = open(file, O_RDONLY);
	if (fd >= 0) {
		sink += flock(fd, LOCK_SH);
		sink += flock(fd, LOCK_UN);
		close(fd);
	}
}

static void c_readdir(void)
{
	DIR *d = opendir(".");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		sink += e->d_name[0];
	closedir(d);
}

static void c_readlink_missing(void)
{
	char buf[64];
	sink += readlink(missing, buf, sizeof(buf));
}

static const struct {
	const char *name;
	void (*fn)(void);
} calls[] = {
	{ "stat", c_stat },
	{ "stat_missing", c_stat_missing },
	{ "lstat_relative", c_lstat_relative },
	{ "fstatat_two", c_fstatat_two },
	{ "access", c_access },
	{ "access_missing", c_access_missing },
	{ "faccessat", c_faccessat },
	{ "open_close", c_open_close },
	{ "open_relative", c_open_relative },
	{ "open_missing", c_open_missing },
	{ "fopen_fclose", c_fopen_fclose },
	{ "unlink_missing", c_unlink_missing },
	{ "rmdir_missing", c_rmdir_missing },
	{ "mkdir_existing", c_mkdir_existing },
	{ "rename_missing", c_rename_missing },
	{ "statfs", c_statfs },
	{ "statfs_missing", c_statfs_missing },
	{ "statvfs", c_statvfs },
	{ "fstatfs", c_fstatfs },
	{ "pathconf", c_pathconf },
	{ "flock", c_flock },
	{ "readdir", c_readdir },
	{ "readlink_missing", c_readlink_missing },
};

/* Paints the REGION bytes below lo_top (memset's own frame lies above). */
static __attribute__((noinline)) void paint(char *lo, size_t n)
{
	memset(lo, PAINT, n);
	__asm__ volatile("" ::"r"(lo) : "memory");
}

/* The bytes below this frame that fn wrote. */
static __attribute__((noinline)) long reach(void (*fn)(void))
{
	char *top = __builtin_frame_address(0);
	char *lo = top - REGION, *hi = top - 1024;
	paint(lo, (size_t)(hi - lo));
	fn();
	__asm__ volatile("" ::: "memory");
	char *p = lo;
	while (p < hi && *(volatile char *)p == (char)PAINT)
		p++;
	return p < hi ? (long)(top - p) : 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: stack_reach DIR\n");
		return 2;
	}
	dir = argv[1];
	if (chdir(dir) != 0) {
		perror(dir);
		return 1;
	}
	snprintf(file, sizeof(file), "%s/f", dir);
	snprintf(missing, sizeof(missing), "%s/missing/x", dir);
	snprintf(sub, sizeof(sub), "%s/d", dir);
	snprintf(twocomp, sizeof(twocomp), "d/../f");
	snprintf(other, sizeof(other), "%s/g", dir);
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0 || (mkdir(sub, 0755) != 0 && errno != EEXIST)) {
		perror(file);
		return 1;
	}
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		calls[i].fn();
		printf("%s %ld\n", calls[i].name, reach(calls[i].fn));
	}
	return 0;
}
