/* ckptcache doctor, the files: the checkpoint path patterns and their
 * folders, the host and ssd tiers, what killed processes left, and the
 * statistics and trace files (doctor.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

#include "path.h"
#include "state.h"
#include "tagpat.h"

extern char **environ;

#include "doctor.h"

/* ---- checkpoint path patterns -------------------------------------------- */

char *patterns[MAX_PATTERNS];
int npatterns;

/* The pattern with %r replaced by the rank, in canonical absolute form. */
static int pattern_canon(const char *p, size_t n, long rank, char *out, size_t outlen)
{
	char tmp[PATH_MAX], rk[24];
	size_t o = 0;
	int rl = snprintf(rk, sizeof(rk), "%ld", rank);

	for (size_t i = 0; i < n; i++) {
		if (p[i] == '%' && i + 1 < n && p[i + 1] == 'r') {
			if (o + (size_t)rl >= sizeof(tmp))
				return -ENAMETOOLONG;
			memcpy(tmp + o, rk, (size_t)rl);
			o += (size_t)rl;
			i++;
		} else {
			if (o + 1 >= sizeof(tmp))
				return -ENAMETOOLONG;
			tmp[o++] = p[i];
		}
	}
	tmp[o] = '\0';
	return ckc_path_canon(tmp, NULL, out, outlen);
}

static bool has_glob(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '*' || s[i] == '?' || s[i] == '[')
			return true;
	return false;
}

/* Looks at the folder a pattern names: whether it exists, and how many
 * files in it match already (checkpoints of an earlier run, which the
 * prefetcher can read). Sets *dev to the folder's device, or 0. */
static void pattern_folder(const char *canon, dev_t *dev)
{
	const char *slash = strrchr(canon, '/');
	size_t dlen = (size_t)(slash - canon);
	char dir[PATH_MAX];
	struct stat st;

	*dev = 0;
	/* the folder part: up to the last '/' before any wildcard */
	for (size_t i = 0; i < dlen; i++) {
		if (canon[i] == '*' || canon[i] == '?' || canon[i] == '[') {
			while (i > 0 && canon[i] != '/')
				i--;
			dlen = i;
			break;
		}
	}
	if (dlen == 0) {
		strcpy(dir, "/");
	} else {
		memcpy(dir, canon, dlen);
		dir[dlen] = '\0';
	}
	if (stat(dir, &st) != 0) {
		warning("checkpoint folder %s does not exist (yet): nothing in it is tagged until it does", dir);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		problem("checkpoint folder %s is not a folder", dir);
		return;
	}
	*dev = st.st_dev;
	bool flat = canon + dlen == slash; /* the wildcards are all in the last component */
	size_t n = strlen(canon);
	if (!flat || (n >= 3 && strcmp(canon + n - 3, "/**") == 0)) {
		ok("checkpoint folder %s exists", dir);
		return;
	}
	DIR *d = opendir(dir);
	if (!d) {
		warning("checkpoint folder %s cannot be listed (%s)", dir, strerror(errno));
		return;
	}
	unsigned long seen = 0, match = 0;
	struct dirent *de;
	char full[PATH_MAX];
	while ((de = readdir(d)) && seen < SCAN_MAX) {
		seen++;
		if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		if (snprintf(full, sizeof(full), "%s/%s", dlen ? dir : "", de->d_name) >=
		    (int)sizeof(full))
			continue;
		if (ckc_glob_match(canon, full, true))
			match++;
	}
	closedir(d);
	if (match)
		ok("checkpoint folder %s exists; %lu%s file(s) match now (an earlier run's checkpoints are "
		   "read through the cache and can be prefetched)",
		   dir, match, seen >= SCAN_MAX ? "+" : "");
	else
		ok("checkpoint folder %s exists; no file matches yet", dir);
}

void check_patterns(const ckc_config_t *c, dev_t *home_dev)
{
	const char *s = c->paths;
	*home_dev = 0;
	while (s && *s) {
		const char *e = strchr(s, ':');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n == 0 || blank(s) || (e && strspn(s, " \t") == n)) {
			warning("CKPTCACHE_PATHS: empty pattern (two colons, or one at an end) ignored");
		} else {
			char canon[PATH_MAX];
			int rc = pattern_canon(s, n, c->rank, canon, sizeof(canon));
			if (rc) {
				problem("CKPTCACHE_PATHS: pattern '%.*s' cannot be resolved (%s)", (int)n,
					s, strerror(-rc));
			} else {
				if (strlen(canon) == n && strncmp(canon, s, n) == 0)
					ok("checkpoint paths: %s", canon);
				else
					ok("checkpoint paths: '%.*s', as %s", (int)n, s, canon);
				if (!has_glob(canon, strlen(canon)))
					ok("'%s' has no wildcard: only this one file is tagged", canon);
				if (npatterns < MAX_PATTERNS) {
					patterns[npatterns] = strdup(canon);
					if (patterns[npatterns])
						npatterns++;
				}
				dev_t dev;
				pattern_folder(canon, &dev);
				if (!*home_dev)
					*home_dev = dev;
			}
		}
		if (!e)
			break;
		s = e + 1;
	}
}

/* ---- tiers ----------------------------------------------------------- */

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

static const char *fs_name(unsigned long magic, bool *network)
{
	static const struct {
		unsigned long magic;
		const char *name;
		bool network;
	} fs[] = {
		{ 0xEF53, "ext2/3/4", false },	     { 0x58465342, "xfs", false },
		{ 0x9123683E, "btrfs", false },	     { 0x2FC12FC1, "zfs", false },
		{ 0x01021994, "tmpfs", false },	     { 0x858458F6, "ramfs", false },
		{ 0x794C7630, "overlayfs", false },  { 0x65735546, "fuse", false },
		{ 0x6969, "nfs", true },	     { 0x0BD00BD0, "lustre", true },
		{ 0x47504653, "gpfs", true },	     { 0x19830326, "beegfs", true },
		{ 0xFF534D42, "cifs", true },	     { 0xFE534D42, "smb2", true },
		{ 0x00C36400, "ceph", true },	     { 0xAAD7AAEA, "panfs", true },
		{ 0x0BADBEEF, "wekafs", true },
	};
	*network = false;
	for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		if ((uint32_t)magic == (uint32_t)fs[i].magic) {
			*network = fs[i].network;
			return fs[i].name;
		}
	return NULL;
}

void check_host(const ckc_config_t *c, const ckc_sysinfo_t *sys)
{
	char a[32], b[32], d[32];
	const char *from = env("CKPTCACHE_HOST_CACHE") ? "from CKPTCACHE_HOST_CACHE"
						       : "the default: 10% of memory shared by the "
							 "node's processes, 64 MiB to 16 GiB";
	if (!c->host_cache) {
		const char *v = env("CKPTCACHE_HOST_CACHE");
		uint64_t bytes;
		double pct;
		if (v && ckc_parse_size(v, &bytes, &pct) == 0 &&
		    (pct >= 0 ? (uint64_t)((long double)sys->mem_total * pct / 100) == 0 : bytes == 0))
			ok("host tier: off (CKPTCACHE_HOST_CACHE='%s')", v);
		else if (v)
			ok("host tier: off (because of the error above)");
		else
			warning("host tier: off: this machine's memory is too small or unknown");
		return;
	}
	if (sys->mem_total)
		ok("host tier: %s, %.1f%% of %s of memory (%s)", ckc_format_size(c->host_cache, a, sizeof(a)),
		   100.0 * (double)c->host_cache / (double)sys->mem_total,
		   ckc_format_size(sys->mem_total, b, sizeof(b)), from);
	else
		ok("host tier: %s (%s)", ckc_format_size(c->host_cache, a, sizeof(a)), from);

	uint64_t avail = mem_available();
	if (avail && c->host_cache > avail)
		warning("host tier: %s is more than the memory available now (%s): the program may "
			"be short of memory",
			ckc_format_size(c->host_cache, a, sizeof(a)), ckc_format_size(avail, b, sizeof(b)));
	if (sys->mem_total && c->local_size > 1 &&
	    c->host_cache * (uint64_t)c->local_size > sys->mem_total / 2)
		warning("host tier: %ld processes x %s = %s, more than half of this node's memory",
			c->local_size, ckc_format_size(c->host_cache, a, sizeof(a)),
			ckc_format_size(c->host_cache * (uint64_t)c->local_size, d, sizeof(d)));
}

/* ---- what killed processes left ---------------------------------------- */

struct stale_count {
	long removed, kept;
	uint64_t bytes;
};

static void stale_found(const char *path, uint64_t bytes, bool removed, void *ctx)
{
	struct stale_count *n = ctx;
	char h[32];
	if (removed) {
		n->removed++;
		n->bytes += bytes;
		ok("removed %s (%s), left by a process of this user that no longer runs", path,
		   ckc_format_size(bytes, h, sizeof(h)));
	} else {
		n->kept++;
		warning("%s (%s) was left by a process of this user that no longer runs, and cannot "
			"be removed (%s)", path, ckc_format_size(bytes, h, sizeof(h)), strerror(errno));
	}
}

/* The ssd tier files and temporary files of processes that were killed
 * (SIGKILL, a crash, _exit) are found through the private folder, shown and
 * removed, as the library's next start would; rescue files are shown, never
 * removed. */
void check_leftovers(const ckc_config_t *c)
{
	char priv[PATH_MAX], why[512];
	struct stat st;
	const char *dirs[2] = { c->ssd_dir ? c->ssd_dir : "/tmp", c->rescue_dir };

	for (int i = 0; i < 2; i++) {
		if (!dirs[i] || (i == 1 && strcmp(dirs[0], dirs[1]) == 0))
			continue;
		if (snprintf(priv, sizeof(priv), "%s/ckptcache-%u", dirs[i], (unsigned)getuid()) >=
			    (int)sizeof(priv) ||
		    lstat(priv, &st) != 0)
			continue;
		/* a folder that is not safe to use is reported, never entered */
		if (ckc_private_dir(dirs[i], i ? "CKPTCACHE_RESCUE_DIR" : "CKPTCACHE_SSD_DIR", priv,
				    sizeof(priv), why, sizeof(why)) != 0) {
			problem("%s", why);
			continue;
		}
		struct stale_count n = { 0, 0, 0 };
		if (i == 0) {
			ckc_stale_sweep(priv, true, stale_found, &n);
			if (!n.removed && !n.kept)
				ok("%s: nothing left by processes that no longer run", priv);
		}
		DIR *d = opendir(priv);
		long rescued = 0;
		struct dirent *de;
		while (d && (de = readdir(d)))
			rescued += !strncmp(de->d_name, "rescue.", 7) && strcmp(de->d_name, "rescue.index");
		if (d)
			closedir(d);
		if (rescued)
			warning("%s holds %ld rescue file(s): checkpoints that could not reach their real "
				"paths; rescue.index there gives each one's real path", priv, rescued);
	}
}

/* Writes, syncs and removes a 1 MiB file in dir the way the ssd tier opens
 * its file. Returns false when the tier could not work there. */
static bool ssd_write_test(const char *dir)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/.ckptcache-doctor.%ld", dir, (long)getpid()) >=
	    (int)sizeof(path)) {
		problem("ssd directory %s: path too long", dir);
		return false;
	}
	bool direct = true;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_DIRECT, 0600);
	if (fd < 0 && errno == EINVAL) {
		direct = false;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	}
	if (fd < 0) {
		problem("ssd directory %s: cannot create a file there (%s)", dir, strerror(errno));
		return false;
	}

	void *buf = NULL;
	bool good = false;
	const char *alloc_note = "";
	int rc = posix_fallocate(fd, 0, (off_t)TEST_BYTES);
	if (rc == EOPNOTSUPP || rc == EINVAL) {
		alloc_note = "; no preallocation here (the tier file is sized with ftruncate)";
	} else if (rc) {
		problem("ssd directory %s: cannot allocate %llu bytes (%s)", dir,
			(unsigned long long)TEST_BYTES, strerror(rc));
		goto out;
	}
	if (posix_memalign(&buf, 4096, TEST_BYTES) != 0) {
		problem("ssd directory %s: out of memory for the write test", dir);
		buf = NULL;
		goto out;
	}
	for (size_t i = 0; i < TEST_BYTES; i++)
		((unsigned char *)buf)[i] = (unsigned char)(i * 131 + 7);

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	size_t done = 0;
	while (done < TEST_BYTES) {
		ssize_t n = pwrite(fd, (char *)buf + done, TEST_BYTES - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			problem("ssd directory %s: writing 1 MiB failed (%s)%s", dir,
				n < 0 ? strerror(errno) : "no progress",
				direct ? " with O_DIRECT" : "");
			goto out;
		}
		done += (size_t)n;
	}
	if (fsync(fd) != 0) {
		problem("ssd directory %s: fsync failed (%s)", dir, strerror(errno));
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (s <= 0)
		s = 1e-9;
	ok("ssd directory %s: writable; O_DIRECT %s; 1 MiB written and synced in %.2f ms, "
	   "%.0f MB/s (a rough figure)%s",
	   dir, direct ? "works" : "not supported (the tier goes through the page cache)", s * 1e3,
	   (double)TEST_BYTES / s / 1e6, alloc_note);
	good = true;
out:
	free(buf);
	close(fd);
	if (unlink(path) != 0)
		warning("ssd directory %s: cannot remove the test file %s (%s)", dir, path,
			strerror(errno));
	return good;
}

/* Whether an ssd size resolves to no bytes: "0", "0M", "0%", or a
 * percentage of almost nothing. */
static bool ssd_size_zero(const char *v, uint64_t avail)
{
	uint64_t bytes;
	double pct;
	if (!v || ckc_parse_size(v, &bytes, &pct) != 0)
		return false;
	return pct >= 0 ? (uint64_t)((long double)avail * pct / 100) == 0 : bytes == 0;
}

void check_ssd(const ckc_config_t *c, const ckc_sysinfo_t *sys, dev_t home_dev)
{
	const char *dir = c->ssd_dir ? c->ssd_dir : "/tmp";
	bool dir_set = env("CKPTCACHE_SSD_DIR") != NULL;
	bool cache_set = env("CKPTCACHE_SSD_CACHE") != NULL;
	uint64_t avail = 0;
	bool in_memory = false, network = false;
	struct statfs sf;
	struct stat st;
	char a[32], b[32], fsbuf[40];
	const char *fs = NULL;

	bool exists = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
	/* The facts of the nearest existing folder: where dir would be made. */
	char probe[PATH_MAX];
	snprintf(probe, sizeof(probe), "%s", dir);
	while (sys->fs_info(probe, &avail, &in_memory) == -ENOENT && strcmp(probe, "/") != 0) {
		char *slash = strrchr(probe, '/');
		if (!slash)
			break;
		if (slash == probe)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	if (statfs(probe, &sf) == 0) {
		fs = fs_name((unsigned long)sf.f_type, &network);
		if (!fs) {
			snprintf(fsbuf, sizeof(fsbuf), "file system 0x%lx", (unsigned long)sf.f_type);
			fs = fsbuf;
		}
	}

	if (!c->ssd_cache) {
		if (!dir_set && !cache_set)
			ok("ssd tier: off (set CKPTCACHE_SSD_DIR to a node-local directory to add one)");
		else if (cache_set && ssd_size_zero(env("CKPTCACHE_SSD_CACHE"), avail))
			ok("ssd tier: off (CKPTCACHE_SSD_CACHE='%s')", env("CKPTCACHE_SSD_CACHE"));
		else if (!cache_set && in_memory)
			ok("ssd tier: off: %s is on a memory-backed file system (%s), where it would "
			   "hold the same memory as the host tier (set CKPTCACHE_SSD_CACHE to use it "
			   "anyway)",
			   dir, fs ? fs : "tmpfs or ramfs");
		else
			ok("ssd tier: off (because of the error above)");
		return;
	}

	ok("ssd tier: %s in %s/ckptcache-%u/ssd.<pid>.<start> (%.1f%% of the %s available; %s)",
	   ckc_format_size(c->ssd_cache, a, sizeof(a)), dir, (unsigned)getuid(),
	   avail ? 100.0 * (double)c->ssd_cache / (double)avail : 0.0, ckc_format_size(avail, b, sizeof(b)),
	   cache_set ? "from CKPTCACHE_SSD_CACHE"
		     : "the default: 25% of the free space shared by the node's processes, "
		       "at most 64 GiB");
	if (fs)
		ok("ssd directory %s: on %s, %s", dir, fs,
		   in_memory ? "memory-backed" : "not memory-backed");
	if (in_memory)
		warning("ssd directory %s is memory-backed: the ssd tier takes memory, as the host "
			"tier does",
			dir);
	if (network)
		warning("ssd directory %s is on a network file system (%s): the ssd tier should be "
			"node-local storage",
			dir, fs);
	if (exists && home_dev && st.st_dev == home_dev)
		warning("ssd directory %s is on the same file system as the checkpoints: the ssd "
			"tier adds copies without adding a faster level",
			dir);
	if (!exists) {
		/* the loader found that it can be made: the library makes it at
		 * start; the file system is tried where it will be */
		ok("ssd directory %s does not exist yet: the library makes it (mode 0700) in %s", dir,
		   probe);
		ssd_write_test(probe);
		return;
	}
	ssd_write_test(dir);
}

/* A file the library writes at exit: its folder must exist and be writable. */
void check_output_file(const char *what, const char *var, const char *path)
{
	char canon[PATH_MAX], dir[PATH_MAX];
	if (ckc_path_canon(path, NULL, canon, sizeof(canon)) != 0 ||
	    ckc_path_dirname(canon, dir, sizeof(dir)) != 0) {
		warning("%s='%s': cannot resolve the path", var, path);
		return;
	}
	struct stat st;
	if (stat(canon, &st) == 0 && S_ISDIR(st.st_mode))
		warning("%s='%s' is a folder: no %s would be written", var, path, what);
	else if (access(dir, W_OK | X_OK) != 0)
		warning("%s='%s': folder %s is not writable (%s): no %s would be written", var, path,
			dir, strerror(errno), what);
	else
		ok("%s: written to %s", what, canon);
}

