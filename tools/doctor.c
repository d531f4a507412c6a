/* ckptcache doctor: checks the CKPTCACHE_* configuration and this machine
 * (tiers, ssd directory, hint file, CUDA, the library to preload) and says
 * what the preloaded library would do; exits 1 when anything is wrong. */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"
#include "hintfile.h"
#include "log.h"
#include "memlimit.h"
#include "path.h"
#include "state.h"
#include "stats_tool.h"
#include "tagpat.h"

extern char **environ;

#define MIB (1024ull * 1024)
#define TEST_BYTES (1 * MIB)
/* Malformed hint lines shown one by one; the rest are only counted. */
#define HINT_REPORT_MAX 20
/* Directory entries looked at when counting existing checkpoints. */
#define SCAN_MAX 100000
#define MAX_PATTERNS 64

static int problems;

/* ---- output ---------------------------------------------------------- */

static void vsay(const char *tag, const char *fmt, va_list ap)
{
	printf("%-8s", tag);
	vprintf(fmt, ap);
	putchar('\n');
}

static void ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void ok(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("ok", fmt, ap);
	va_end(ap);
}

static void warning(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("warning", fmt, ap);
	va_end(ap);
}

static void problem(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("problem", fmt, ap);
	va_end(ap);
	problems++;
}


static bool blank(const char *s)
{
	for (; s && *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\v' && *s != '\f')
			return false;
	return true;
}

/* Set and not blank: the loader treats a blank value as unset. */
static const char *env(const char *name)
{
	const char *v = getenv(name);
	return blank(v) ? NULL : v;
}

/* ---- the variables ----------------------------------------------------- */

static const char *const known_vars[] = {
	"CKPTCACHE_PATHS",     "CKPTCACHE_ORDER",	"CKPTCACHE_HINTS",
	"CKPTCACHE_CAPTURE",   "CKPTCACHE_GPU_CACHE",	"CKPTCACHE_HOST_CACHE",
	"CKPTCACHE_SSD_DIR",   "CKPTCACHE_SSD_CACHE",	"CKPTCACHE_RESCUE_DIR",
	"CKPTCACHE_PERSIST",   "CKPTCACHE_EVICTION",	"CKPTCACHE_PREFETCH",
	"CKPTCACHE_STATS",     "CKPTCACHE_TRACE",	"CKPTCACHE_LOG",
	"CKPTCACHE_STRICT",    "CKPTCACHE_TERM_WAIT",	"CKPTCACHE_LANES",
};
/* Read by the ckptcache launcher, not by the library; CKPTCACHE_REPORTED is
 * left by the library for the children of a process that reported a bad
 * setting. */
static const char *const launcher_vars[] = { "CKPTCACHE_LIB", "CKPTCACHE_DOCTOR", "CKPTCACHE_REPORTED" };

static bool in_list(const char *name, size_t n, const char *const *list, size_t count)
{
	for (size_t i = 0; i < count; i++)
		if (strlen(list[i]) == n && strncmp(list[i], name, n) == 0)
			return true;
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* What the loader said, kept until the variables are listed: a variable
 * it found wrong is not listed as ok first. */
typedef struct said {
	int level;
	char *msg;
} said_t;
static said_t *said;
static size_t nsaid;

/* Whether the loader reported a problem with variable name (len bytes). */
static bool loader_faulted(const char *name, size_t len)
{
	for (size_t i = 0; i < nsaid; i++) {
		const char *m = strstr(said[i].msg, "CKPTCACHE_");
		if (said[i].level == CKC_LOG_ERROR && m && strncmp(m, name, len) == 0 &&
		    (m[len] == '=' || m[len] == ':' || m[len] == ' '))
			return true;
	}
	return false;
}

static void check_variables(void)
{
	size_t n = 0, cap = 0;
	const char **set = NULL;

	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "CKPTCACHE_", 10) != 0 || !strchr(*e, '='))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			const char **grown = realloc(set, cap * sizeof(*set));
			if (!grown)
				break;
			set = grown;
		}
		set[n++] = *e;
	}
	if (n)
		qsort(set, n, sizeof(*set), cmp_str);
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(set[i], '=');
		size_t len = (size_t)(eq - set[i]);
		if (in_list(set[i], len, known_vars, sizeof(known_vars) / sizeof(known_vars[0]))) {
			if (loader_faulted(set[i], len))
				continue; /* its problem line follows */
			if (blank(eq + 1))
				ok("%.*s is blank: taken as unset", (int)len, set[i]);
			else
				ok("%.*s='%s'", (int)len, set[i], eq + 1);
		} else if (in_list(set[i], len, launcher_vars,
				   sizeof(launcher_vars) / sizeof(launcher_vars[0]))) {
			ok("%.*s='%s' (read by the ckptcache launcher)", (int)len, set[i], eq + 1);
		} else {
			warning("%.*s='%s': not a ckptcache variable, ignored (misspelt?)", (int)len,
				set[i], eq + 1);
		}
	}
	free(set);
}

/* ---- loading the configuration ------------------------------------------ */

static int sink_errors;
static const char *placeholder_paths = "/nonexistent/ckptcache-doctor/*";

/* The loader's messages are kept (said) and become check lines after the
 * variables. Its closing summary is left out: the lines below say what the
 * errors mean. */
static void sink_keep(int level, const char *msg)
{
	said_t *s = realloc(said, (nsaid + 1) * sizeof(*s));
	if (!s)
		return;
	said = s;
	said[nsaid].level = level;
	said[nsaid].msg = strdup(msg);
	if (said[nsaid].msg)
		nsaid++;
}

/* Drops what the matcher would say of a pattern (said once above). */
static void sink_drop(int level, const char *msg)
{
	(void)level, (void)msg;
}

static void sink_show(int level, const char *msg)
{
	static const char *const prefix[] = { "ckptcache: error: ", "ckptcache: warning: ",
					      "ckptcache: info: ", "ckptcache: debug: " };
	if (level >= 0 && level <= CKC_LOG_DEBUG &&
	    strncmp(msg, prefix[level], strlen(prefix[level])) == 0)
		msg += strlen(prefix[level]);
	if (level == CKC_LOG_ERROR) {
		if (strncmp(msg, "configuration errors:", 21) == 0)
			return;
		sink_errors++;
		problem("%s", msg);
	} else if (level == CKC_LOG_WARN) {
		warning("%s", msg);
	} else {
		ok("%s", msg);
	}
}

/* getenv, except that an unset CKPTCACHE_PATHS is replaced so that the
 * loader still checks every other variable. */
static const char *doctor_get(const char *name, void *ctx)
{
	bool *paths_unset = ctx;
	if (*paths_unset && strcmp(name, "CKPTCACHE_PATHS") == 0)
		return placeholder_paths;
	return getenv(name);
}

/* ---- rank and node ----------------------------------------------------- */

static const char *source_of(const char *const *vars, size_t n, long value)
{
	char want[32];
	snprintf(want, sizeof(want), "%ld", value);
	for (size_t i = 0; i < n; i++) {
		const char *v = env(vars[i]);
		if (v && strncmp(v, want, strlen(want)) == 0)
			return vars[i];
	}
	return NULL;
}

static void check_rank(const ckc_config_t *c)
{
	static const char *const rank_vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK",
						 "SLURM_PROCID", "PMIX_RANK" };
	static const char *const size_vars[] = { "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
						 "SLURM_NTASKS_PER_NODE" };
	const char *rs = source_of(rank_vars, 4, c->rank);
	const char *ls = source_of(size_vars, 3, c->local_size);

	ok("rank %ld, for %%r in patterns and hint files (%s%s)", c->rank,
	   rs ? "from " : "no MPI or Slurm rank variable set", rs ? rs : "");
	ok("%ld process(es) of the job on this node share the default tier sizes (%s%s)",
	   c->local_size, ls ? "from " : "no MPI or Slurm local-size variable set", ls ? ls : "");
}

/* ---- checkpoint path patterns -------------------------------------------- */

static char *patterns[MAX_PATTERNS];
static int npatterns;

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

static void check_patterns(const ckc_config_t *c, dev_t *home_dev)
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

static void check_host(const ckc_config_t *c, const ckc_sysinfo_t *sys)
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
static void check_leftovers(const ckc_config_t *c)
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

static void check_ssd(const ckc_config_t *c, const ckc_sysinfo_t *sys, dev_t home_dev)
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
static void check_output_file(const char *what, const char *var, const char *path)
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

/* ---- restore order ----------------------------------------------------- */

struct hint_count {
	unsigned long entries, untagged, reports;
	char first[PATH_MAX], last[PATH_MAX], untagged_example[PATH_MAX];
};

static int hint_emit(void *ctx, const char *path)
{
	struct hint_count *h = ctx;
	if (!h->entries)
		snprintf(h->first, sizeof(h->first), "%s", path);
	snprintf(h->last, sizeof(h->last), "%s", path);
	h->entries++;
	/* the library's own matcher (src/tagpat.c), with its patterns */
	if (!ckc_tag_match(path) && !h->untagged++)
		snprintf(h->untagged_example, sizeof(h->untagged_example), "%s", path);
	return 0;
}

static void hint_report(void *ctx, const char *file, unsigned line, const char *msg)
{
	struct hint_count *h = ctx;
	if (++h->reports > HINT_REPORT_MAX)
		return;
	/* a cut range is the documented cap, not a mistake in the line */
	if (strstr(msg, "entry limit"))
		warning("%s:%u: %s", file, line, msg);
	else
		problem("%s:%u: %s (the line is skipped)", file, line, msg);
}

static void check_order(const ckc_config_t *c)
{
	static const char *const order_word[] = { "none", "reverse", "sequential" };
	static const char *const prefetch_word[] = { "auto: from the first read",
						     "eager: from the start", "off" };

	if (!c->hints) {
		if (c->order == CKC_ORDER_NONE)
			ok("restore order: none (nothing is prefetched unless the program calls "
			   "ckptcache_prefetch_enqueue; set CKPTCACHE_ORDER or CKPTCACHE_HINTS)");
		else
			ok("restore order: %s of the write order (CKPTCACHE_ORDER)",
			   order_word[c->order]);
	} else {
		if (env("CKPTCACHE_ORDER"))
			warning("CKPTCACHE_ORDER is ignored: CKPTCACHE_HINTS is set");
		hint_reader_t r;
		int rc = hint_reader_open(&r, c->hints, c->rank, 0);
		if (rc == -ENOENT) {
			warning("hint file %s does not exist (yet): the library looks for it every "
				"second",
				c->hints);
		} else if (rc == -EINVAL) {
			problem("hint file %s: not a regular file (a FIFO, socket or device): the "
				"library does not read it, as a read could block the program",
				c->hints);
		} else if (rc) {
			problem("hint file %s: %s", c->hints, strerror(-rc));
		} else {
			struct hint_count *h = calloc(1, sizeof(*h));
			long n = h ? hint_reader_finish(&r, hint_emit, hint_report, h) : -ENOMEM;
			if (n < 0) {
				problem("hint file %s: %s", r.path, strerror((int)-n));
			} else {
				if (h->reports > HINT_REPORT_MAX)
					problem("hint file %s: %lu more message(s) not shown", r.path,
						h->reports - HINT_REPORT_MAX);
				if (h->entries)
					ok("hint file %s: readable, %u line(s), %lu entr%s, read first "
					   "%s, last %s",
					   r.path, r.line, h->entries, h->entries == 1 ? "y" : "ies",
					   h->first, h->last);
				else
					warning("hint file %s: readable, %u line(s), no entry yet", r.path,
						r.line);
				if (h->untagged && npatterns)
					warning("hint file %s: %lu of %lu entries match no "
						"CKPTCACHE_PATHS pattern (e.g. %s): reads of them do "
						"not go through the cache",
						r.path, h->untagged, h->entries, h->untagged_example);
			}
			free(h);
			hint_reader_close(&r);
		}
	}
	ok("prefetching: %s", prefetch_word[c->prefetch]);
	if (c->prefetch == CKC_PREFETCH_OFF && (c->hints || c->order != CKC_ORDER_NONE))
		warning("CKPTCACHE_PREFETCH=off: the restore order is not used");
}

static void check_policies(const ckc_config_t *c)
{
	static const char *const persist[] = {
		"always (every checkpoint reaches its real path; fsync waits until it is durable "
		"there)",
		"unconsumed (a checkpoint read back whole drops its pending flush)",
		"never (checkpoints reach their real paths only when every tier is full)",
	};
	static const char *const eviction[] = { "score", "fifo", "lru" };
	static const char *const log_word[] = { "error", "warn", "info", "debug" };

	ok("home tier: the checkpoints' real paths");
	ok("persistence: %s", persist[c->persist]);
	ok("eviction: %s", eviction[c->eviction]);
	if (c->rescue_dir) {
		struct stat st;
		int e = stat(c->rescue_dir, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
		if (e)
			warning("rescue folder %s: %s: a checkpoint that cannot reach its real path "
				"would stay in the cache only",
				c->rescue_dir, strerror(e));
		else if (access(c->rescue_dir, W_OK | X_OK) != 0)
			warning("rescue folder %s is not writable: a checkpoint that cannot reach its "
				"real path would stay in the cache only",
				c->rescue_dir);
		else
			ok("rescue folder: %s", c->rescue_dir);
	}
	if (c->stats)
		check_output_file("statistics", "CKPTCACHE_STATS", c->stats);
	if (c->trace)
		check_output_file("trace", "CKPTCACHE_TRACE", c->trace);
	ok("messages: %s and above%s", log_word[c->log_level],
	   c->strict ? "; a configuration error aborts the program (CKPTCACHE_STRICT=1)" : "");
}

/* ---- CUDA ---------------------------------------------------------------- */

/* The driver API's signatures, declared here so that no CUDA header is
 * needed: CUresult is an int-sized enum. */
typedef int (*cu_init_fn)(unsigned int flags);
typedef int (*cu_count_fn)(int *count);
typedef int (*cu_version_fn)(int *version);

static void check_cuda(const ckc_config_t *c)
{
	bool device = c->capture == CKC_CAPTURE_DEVICE;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		ok("CUDA: not found (the gpu tier and device capture are unavailable; copy mode "
		   "works)");
		if (device)
			warning("CKPTCACHE_CAPTURE=device needs CUDA, which is not found here");
		return;
	}
	/* copied rather than cast: ISO C has no object-to-function pointer
	 * conversion, POSIX guarantees the representations agree */
	cu_init_fn init;
	cu_count_fn count;
	cu_version_fn version;
	void *p_init = dlsym(h, "cuInit"), *p_count = dlsym(h, "cuDeviceGetCount"),
	     *p_version = dlsym(h, "cuDriverGetVersion");
	memcpy(&init, &p_init, sizeof(init));
	memcpy(&count, &p_count, sizeof(count));
	memcpy(&version, &p_version, sizeof(version));
	if (!init || !count || !version) {
		warning("CUDA: libcuda.so.1 found but it lacks cuInit, cuDeviceGetCount or "
			"cuDriverGetVersion");
		return;
	}
	int v = 0, n = 0;
	int vrc = version(&v);
	int irc = init(0);
	if (irc != 0) {
		if (vrc == 0)
			warning("CUDA: driver %d.%d found, but cuInit failed (error %d): no usable "
				"device",
				v / 1000, v % 1000 / 10, irc);
		else
			warning("CUDA: libcuda.so.1 found, but cuInit failed (error %d): no usable "
				"device",
				irc);
		if (device)
			warning("CKPTCACHE_CAPTURE=device: no usable CUDA device here");
		return;
	}
	if (count(&n) != 0)
		n = 0;
	ok("CUDA: driver %d.%d, %d device(s)", v / 1000, v % 1000 / 10, n);
	if (device) {
		if (n == 0)
			warning("CKPTCACHE_CAPTURE=device: no CUDA device here");
		else if (c->gpu_cache_pct >= 0)
			ok("gpu tier: %.4g%% of free device memory", c->gpu_cache_pct);
		else {
			char a[32];
			ok("gpu tier: %s of device memory", ckc_format_size(c->gpu_cache, a, sizeof(a)));
		}
	}
	/* left loaded: unloading a driver that was initialised gains nothing */
}

/* ---- the library ----------------------------------------------------------- */

static void check_library(const char *lib)
{
	struct stat st;

	if (!lib) {
		warning("library: no path given, not checked (ckptcache doctor passes the one it "
			"would preload)");
		return;
	}
	if (stat(lib, &st) != 0) {
		problem("library %s: %s", lib, strerror(errno));
		return;
	}
	/* Loaded with the cache inactive, so that its start-up code neither
	 * sets up tiers in this process nor writes statistics at exit. */
	unsetenv("CKPTCACHE_PATHS");
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		problem("library %s cannot be loaded: %s", lib, e ? e : "unknown error");
		return;
	}
	if (!dlsym(h, "ckptcache_prefetch_enqueue")) {
		problem("library %s loads but does not export ckptcache_prefetch_enqueue: not "
			"libckptcache?",
			lib);
		return;
	}
	ok("library %s: loads, exports the ckptcache API", lib);
	const char *pre = getenv("LD_PRELOAD");
	if (pre && strstr(pre, "libckptcache"))
		ok("LD_PRELOAD already names a ckptcache library: %s", pre);
}

/* ---- one hint line, for ckptcache hints ----------------------------------- */

static int hint_line_count(void *ctx, const char *path)
{
	(void)path;
	++*(long *)ctx;
	return 0;
}

/* Checks LINE with the library's own hint-file parser: 0 and the number of
 * entries on stdout, or 2 and the parser's reason on stderr (a line that
 * holds no entry, a comment or a blank, is refused too). */
static int hint_line(const char *line)
{
	char err[256] = "";
	long n = 0;
	long r = hint_parse_line(line, strlen(line), "/", 0, NULL, hint_line_count, &n, err, sizeof(err));
	if (r < 0 || n == 0) {
		fprintf(stderr, "%s\n", r < 0 && err[0] ? err : "the line holds no entry (a comment or a blank)");
		return 2;
	}
	printf("%ld\n", n);
	return 0;
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--stats") == 0)
		return ckc_stats_summary(argv[2]);
	if (argc == 3 && strcmp(argv[1], "--hint-line") == 0)
		return hint_line(argv[2]);
	if (argc > 2 || (argc == 2 && (strcmp(argv[1], "--help") == 0 || argv[1][0] == '\0'))) {
		fprintf(stderr,
			"usage: %s [LIBRARY]\n"
			"       %s --stats FILE\n"
			"       %s --hint-line LINE\n"
			"Checks the CKPTCACHE_* configuration in the environment and this machine;\n"
			"LIBRARY is the libckptcache.so to check. Normally run as: ckptcache doctor\n"
			"--stats: the summary of a statistics file (ckptcache stats FILE)\n"
			"--hint-line: checks one hint-file line with the library's parser\n"
			"(ckptcache hints); prints its number of entries\n",
			argv[0], argv[0], argv[0]);
		return argc == 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	bool paths_unset = env("CKPTCACHE_PATHS") == NULL;
	ckc_sysinfo_t sys;
	ckc_config_t c;
	ckc_sysinfo_default(&sys);
	sys.no_mkdir = true;
	/* as the cache does when it starts: a job's memory limit is its memory */
	uint64_t lim = ckc_memlimit_job();
	if (lim)
		sys.mem_total = lim;
	/* the loader's verdict first, so that a variable it refuses is not
	 * listed as ok before its problem */
	ckc_log_sink = sink_keep;
	int errors = ckc_config_load(&c, doctor_get, &paths_unset, &sys);
	ckc_log_sink = NULL;

	check_variables();
	if (paths_unset)
		problem("CKPTCACHE_PATHS is not set: the library would do nothing (below: what the "
			"other variables would do with it set)");
	if (lim) {
		char a[32];
		ok("memory: %s, the limit of this process's control group", ckc_format_size(lim, a, sizeof(a)));
	}
	for (size_t i = 0; i < nsaid; i++)
		sink_show(said[i].level, said[i].msg);
	if (errors > sink_errors)
		problem("%d more configuration error(s)", errors - sink_errors);
	if (errors)
		warning("with %s the %s", errors == 1 ? "this error" : "these errors",
			c.strict ? "program would abort at start (CKPTCACHE_STRICT=1)"
				 : "library would disable the cache and pass every call through");

	dev_t home_dev = 0;
	if (!paths_unset) {
		check_patterns(&c, &home_dev);
		/* the library's matcher, for the hint files' entries (what it
		 * would say of a pattern, check_patterns said above) */
		void (*sink)(int, const char *) = ckc_log_sink;
		ckc_log_sink = sink_drop;
		ckc_tagpat_load(c.paths, c.rank);
		ckc_log_sink = sink;
		if (!npatterns)
			problem("CKPTCACHE_PATHS='%s' has no usable pattern: the cache would be "
				"disabled",
				c.paths ? c.paths : "");
	}
	check_rank(&c);
	ok("capture: %s", c.capture == CKC_CAPTURE_DEVICE
				  ? "device (copies between device buffers and the staging buffer "
				    "are captured on the GPU)"
				  : "copy (tagged writes and reads are copied through the cache)");
	check_host(&c, &sys);
	check_ssd(&c, &sys, home_dev);
	check_leftovers(&c);
	check_policies(&c);
	check_order(&c);
	check_cuda(&c);
	check_library(argc == 2 ? argv[1] : NULL);

	ckc_config_free(&c);
	ckc_tagpat_free();
	for (int i = 0; i < npatterns; i++)
		free(patterns[i]);
	printf("ckptcache doctor: %d problem(s)\n", problems);
	return problems ? 1 : 0;
}
