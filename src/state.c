/* The private folder <dir>/ckptcache-<uid>: its safe creation, this
 * process's record of its temporary files in checkpoint folders
 * (proc.<pid>.<start>, rewritten whenever that set changes), and the sweep
 * of what processes that died (SIGKILL, _exit, a crash) left behind. A
 * process is named by its pid and start time, so a reused pid is no mistake. */
#include "config.h"

#include "state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "lockrank.h"
#include "log.h"
#include "sys.h"

#define STATE_MAX_TMP 256

static ckc_mutex_t state_lock = CKC_MUTEX_INIT(STATE);
CKC_LOCKS_AT_START(state_lock, ckc_locks_add, &state_lock)
static char state_dir[PATH_MAX];
static char state_rec[PATH_MAX];
static int state_fd = -1;
static char *state_tmp[STATE_MAX_TMP];
static int state_ntmp;
/* ckc_state_later: where ckc_state_open is to run with the first record */
static char *state_later_base, *state_later_var;
/* A deferred record found no descriptor (state_open_due): not tried
 * again. */
static bool state_short;

static void owner_name(uid_t uid, char *out, size_t len)
{
	struct passwd pw, *r = NULL;
	char buf[1024];
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &r) == 0 && r)
		snprintf(out, len, "%s (uid %u)", r->pw_name, (unsigned)uid);
	else
		snprintf(out, len, "uid %u", (unsigned)uid);
}

int ckc_private_dir(const char *base, const char *var, char *out, size_t outlen, char *why,
		    size_t whylen)
{
	struct stat st;
	uid_t me = getuid();

	why[0] = '\0';
	if (snprintf(out, outlen, "%s/ckptcache-%u", base, (unsigned)me) >= (int)outlen) {
		snprintf(why, whylen, "%s/ckptcache-%u: the path is too long", base, (unsigned)me);
		return -ENAMETOOLONG;
	}
	if (sys_mkdir(out, 0700) != 0 && errno != EEXIST) {
		int e = errno;
		snprintf(why, whylen, "cannot create folder %s (%s)", out, strerror(e));
		return -e;
	}
	if (sys_lstat(out, &st) != 0) {
		int e = errno;
		snprintf(why, whylen, "folder %s: %s", out, strerror(e));
		return -e;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(why, whylen, "%s is a symbolic link, not a folder of this user: the cache will "
			 "not follow it; remove it, or set %s to another folder", out, var);
		return -ELOOP;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "%s is not a folder: remove it, or set %s to another folder", out,
			 var);
		return -ENOTDIR;
	}
	if (st.st_uid != me) {
		char who[96], self[96];
		owner_name(st.st_uid, who, sizeof(who));
		owner_name(me, self, sizeof(self));
		snprintf(why, whylen, "folder %s belongs to user %s, not to this user %s, so the cache "
			 "cannot keep its files there privately: remove it (as that user or root), or "
			 "set %s to another folder", out, who, self, var);
		return -EPERM;
	}
	/* nobody else may read the checkpoints or replace files in it */
	if ((st.st_mode & 0077) && sys_chmod(out, 0700) != 0) {
		int e = errno;
		snprintf(why, whylen, "folder %s is open to other users and cannot be made private (%s)",
			 out, strerror(e));
		return -e;
	}
	return 0;
}

unsigned long long ckc_proc_start(pid_t pid)
{
	char name[64], buf[1024];
	snprintf(name, sizeof(name), "/proc/%ld/stat", (long)pid);
	int fd = sys_open(name, O_RDONLY, 0);
	if (fd < 0)
		return 0;
	ssize_t n = sys_pread(fd, buf, sizeof(buf) - 1, 0);
	sys_close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: fields count from
	 * the last ')' (field 2's end); the start time is field 22 */
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

unsigned long long ckc_self_start(void)
{
	static pid_t pid;
	static unsigned long long start;
	pid_t now = getpid();
	if (__atomic_load_n(&pid, __ATOMIC_ACQUIRE) != now) {
		__atomic_store_n(&start, ckc_proc_start(now), __ATOMIC_RELAXED);
		__atomic_store_n(&pid, now, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&start, __ATOMIC_RELAXED);
}

/* Whether the process of a file name's pid and start time still runs; a
 * name without a start time (an older library's) only by its pid. */
static bool proc_alive(long pid, unsigned long long start, bool has_start)
{
	if (pid <= 0)
		return false;
	if (!has_start)
		return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
	unsigned long long now = ckc_proc_start((pid_t)pid);
	return now != 0 && now == start;
}

/* "<prefix>.<pid>[.<start>]": the pid and start time, or false. */
static bool parse_owner(const char *name, const char *prefix, long *pid, unsigned long long *start,
			bool *has_start)
{
	size_t n = strlen(prefix);
	char *end;
	if (strncmp(name, prefix, n) != 0 || name[n] != '.')
		return false;
	*pid = strtol(name + n + 1, &end, 10);
	if (end == name + n + 1 || *pid <= 0)
		return false;
	*has_start = *end == '.';
	*start = 0;
	if (*has_start) {
		const char *s = end + 1;
		*start = strtoull(s, &end, 10);
		if (end == s)
			return false;
	}
	return *end == '\0';
}

static uint64_t file_bytes(const char *path)
{
	struct stat st;
	return sys_lstat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* The temporary files a dead process's record lists: each was named by the
 * library (".ckc." first), and nothing else is touched. */
static long sweep_record(const char *rec, bool drop, ckc_stale_fn fn, void *ctx)
{
	long found = 0;
	int fd = sys_open(rec, O_RDONLY | O_NOFOLLOW, 0);
	if (fd < 0)
		return 0;
	struct stat st;
	char *buf = NULL;
	if (sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    st.st_size < (16 << 20) && (buf = sys_malloc((size_t)st.st_size + 1))) {
		ssize_t n = ckc_io_pread_all(fd, buf, (size_t)st.st_size, 0);
		buf[n > 0 ? n : 0] = '\0';
		for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(buf + i) + 1) {
			const char *p = buf + i, *base = strrchr(p, '/');
			if (!base || strncmp(base + 1, ".ckc.", 5) != 0)
				continue;
			uint64_t bytes = file_bytes(p);
			if (!bytes && sys_access(p, F_OK) != 0)
				continue;
			found++;
			bool removed = drop && sys_unlink(p) == 0;
			if (fn)
				fn(p, bytes, removed, ctx);
		}
	}
	sys_free(buf);
	sys_close(fd);
	return found;
}

long ckc_stale_sweep(const char *priv, bool drop, ckc_stale_fn fn, void *ctx)
{
	DIR *d = sys_opendir(priv);
	long found = 0;
	if (!d)
		return 0;
	struct dirent *de;
	char path[PATH_MAX];
	while ((de = readdir(d))) {
		long pid;
		unsigned long long start;
		bool has_start, rec = false;
		if (parse_owner(de->d_name, "proc", &pid, &start, &has_start))
			rec = true;
		else if (!parse_owner(de->d_name, "ssd", &pid, &start, &has_start))
			continue;
		if (proc_alive(pid, start, has_start) ||
		    snprintf(path, sizeof(path), "%s/%s", priv, de->d_name) >= (int)sizeof(path))
			continue;
		if (rec)
			found += sweep_record(path, drop, fn, ctx);
		uint64_t bytes = file_bytes(path);
		found++;
		bool removed = drop && sys_unlink(path) == 0;
		if (fn)
			fn(path, bytes, removed, ctx);
	}
	sys_closedir(d);
	return found;
}

uint64_t ckc_ssd_files_bytes(const char *base)
{
	char priv[PATH_MAX], path[PATH_MAX];
	uint64_t bytes = 0;
	if (snprintf(priv, sizeof(priv), "%s/ckptcache-%u", base, (unsigned)getuid()) >=
	    (int)sizeof(priv))
		return 0;
	DIR *d = sys_opendir(priv);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		long pid;
		unsigned long long start;
		bool has_start;
		if (parse_owner(de->d_name, "ssd", &pid, &start, &has_start) &&
		    snprintf(path, sizeof(path), "%s/%s", priv, de->d_name) < (int)sizeof(path))
			bytes += file_bytes(path);
	}
	sys_closedir(d);
	return bytes;
}

static void stale_said(const char *path, uint64_t bytes, bool removed, void *ctx)
{
	(void)ctx;
	ckc_info("%s %s, left by a process that no longer runs (%llu bytes)",
		 removed ? "removed" : "could not remove", path, (unsigned long long)bytes);
}

int ckc_own_open(const char *path, int flags, bool record)
{
	int fd = sys_open(path, flags | O_CREAT | O_EXCL, 0600);
	if (fd >= 0 || errno != EEXIST)
		return fd;
	/* named by this process's pid and start time: left by its image
	 * before an exec (the program that ran before in this process),
	 * which no longer uses it, nor the temporary files its record lists */
	if (record)
		(void)sweep_record(path, true, NULL, NULL);
	if (sys_unlink(path) != 0 && errno != ENOENT)
		return -1;
	return sys_open(path, flags | O_CREAT | O_EXCL, 0600);
}

/* ckc_state_open; a failure for want of a descriptor or of memory is not
 * reported when quiet_short says so (the caller tries again later). */
static int state_open(const char *base, const char *var, bool quiet_short)
{
	char why[512];
	int rc;

	ckc_mutex_lock(&state_lock);
	if (state_fd >= 0) {
		ckc_mutex_unlock(&state_lock);
		return 0;
	}
	/* twice: another process may remove the folder, empty, just then */
	for (int tries = 0; tries < 2; tries++) {
		rc = ckc_private_dir(base, var, state_dir, sizeof(state_dir), why, sizeof(why));
		if (rc) {
			ckc_error("%s='%s': %s", var, base, why);
			state_dir[0] = '\0';
			ckc_mutex_unlock(&state_lock);
			return rc;
		}
		if (tries == 0) {
			long n = ckc_stale_sweep(state_dir, true, stale_said, NULL);
			if (n > 0)
				ckc_info("%s: removed %ld file(s) of processes that no longer run",
					 state_dir, n);
		}
		if (snprintf(state_rec, sizeof(state_rec), "%s/proc.%ld.%llu", state_dir,
			     (long)getpid(), ckc_self_start()) >= (int)sizeof(state_rec)) {
			rc = -ENAMETOOLONG;
			break;
		}
		state_fd = ckc_own_open(state_rec, O_RDWR | O_NOFOLLOW, true);
		rc = state_fd < 0 ? -errno : 0;
		if (rc != -ENOENT)
			break;
	}
	if (rc && !(quiet_short && ckc_io_short(rc)))
		ckc_error("%s='%s': cannot create %s (%s)", var, base, state_rec, strerror(-rc));
	if (rc)
		state_dir[0] = '\0';
	ckc_mutex_unlock(&state_lock);
	return rc;
}

int ckc_state_open(const char *base, const char *var)
{
	return state_open(base, var, false);
}

const char *ckc_state_dir(void)
{
	return state_dir[0] ? state_dir : NULL;
}

void ckc_state_close(void)
{
	ckc_mutex_lock(&state_lock);
	if (state_fd >= 0) {
		sys_close(state_fd);
		sys_unlink(state_rec);
		state_fd = -1;
		(void)sys_rmdir(state_dir); /* only if nothing else is in it */
	}
	for (int i = 0; i < state_ntmp; i++)
		sys_free(state_tmp[i]);
	state_ntmp = 0;
	state_dir[0] = '\0';
	sys_free(state_later_base);
	sys_free(state_later_var);
	state_later_base = state_later_var = NULL;
	state_short = false;
	ckc_mutex_unlock(&state_lock);
}

/* The record holds the set as NUL-terminated paths. Lock held. */
static void state_write(void)
{
	size_t len = 0;
	for (int i = 0; i < state_ntmp; i++)
		len += strlen(state_tmp[i]) + 1;
	char *buf = sys_malloc(len ? len : 1), *p = buf;
	if (!buf)
		return;
	for (int i = 0; i < state_ntmp; i++) {
		size_t n = strlen(state_tmp[i]) + 1;
		memcpy(p, state_tmp[i], n);
		p += n;
	}
	if (ckc_io_pwrite_all(state_fd, buf, len, 0) == 0)
		(void)sys_ftruncate(state_fd, (off_t)len);
	sys_free(buf);
}

void ckc_state_later(const char *base, const char *var)
{
	ckc_mutex_lock(&state_lock);
	sys_free(state_later_base);
	sys_free(state_later_var);
	state_later_base = strdup(base);
	state_later_var = strdup(var);
	ckc_mutex_unlock(&state_lock);
}

/* The deferred ckc_state_open, if one is due (state_lock held; dropped
 * while it runs). One that found no descriptor or memory (the program's
 * table full) is due again at the next record. */
static void state_open_due(void)
{
	if (state_fd < 0 && state_later_base) {
		char *base = state_later_base, *var = state_later_var;
		state_later_base = state_later_var = NULL;
		ckc_mutex_unlock(&state_lock);
		int rc = state_open(base, var ? var : "CKPTCACHE_SSD_DIR", true);
		ckc_mutex_lock(&state_lock);
		if (ckc_io_short(rc) && !state_short) {
			/* the record would keep the number a publication needs
			 * (another process may be waiting to open that file):
			 * this process keeps none from now on */
			state_short = true;
			ckc_info("the descriptor table is full: this process keeps no record of its "
				 "temporary files from now on (a crash may leave one behind)");
		}
		sys_free(base);
		sys_free(var);
	}
}

void ckc_state_publishing(void)
{
	ckc_mutex_lock(&state_lock);
	state_open_due();
	ckc_mutex_unlock(&state_lock);
}

void ckc_state_tmp_add(const char *path)
{
	ckc_mutex_lock(&state_lock);
	state_open_due();
	if (state_fd >= 0 && state_ntmp < STATE_MAX_TMP) {
		char *c = strdup(path);
		if (c) {
			state_tmp[state_ntmp++] = c;
			state_write();
		}
	}
	ckc_mutex_unlock(&state_lock);
}

void ckc_state_tmp_del(const char *path)
{
	ckc_mutex_lock(&state_lock);
	for (int i = 0; i < state_ntmp; i++)
		if (!strcmp(state_tmp[i], path)) {
			sys_free(state_tmp[i]);
			state_tmp[i] = state_tmp[--state_ntmp];
			if (state_fd >= 0)
				state_write();
			break;
		}
	ckc_mutex_unlock(&state_lock);
}
