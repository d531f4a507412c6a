/* ckptcache doctor, the order and the rest: the restore order and the hint
 * file, the policies, CUDA, peer GPUs and their segments, the library to
 * preload, and one hint line for ckptcache hints (doctor.h). */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hintfile.h"
#include "peerseg.h"
#include "tagpat.h"

extern char **environ;

#include "doctor.h"

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

void check_order(const ckc_config_t *c)
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

void check_policies(const ckc_config_t *c)
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

void check_cuda(const ckc_config_t *c)
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

/* ---- peer GPUs ------------------------------------------------------------- */

static void peer_stale(const char *path, bool removed, void *ctx)
{
	(void)removed, (void)ctx;
	warning("peer segment %s: no process holds it (left by a job whose processes all died); "
		"the next run of that job makes it anew, or remove it: rm %s",
		path, path);
}

void check_peer(const ckc_config_t *c)
{
	char seg[PATH_MAX];
	bool named = ckc_peerseg_path(seg, sizeof(seg), CKC_PEERSEG_DIR, c->job, c->node) == 0;

	if (c->peer == CKC_PEER_OFF) {
		ok("peer GPUs: off (CKPTCACHE_PEER=off): no segment is made");
	} else if (c->peer == CKC_PEER_AUTO) {
		ok("peer GPUs: decided at the first capture: maxflow where the gpu tier's device has "
		   "peer access to another and the job has more than one process on this node (%ld "
		   "here), else off",
		   c->local_size);
	} else {
		ok("peer GPUs: %s: the schedule is computed from the node's segment and shown in the "
		   "statistics; nothing is lent", ckc_config_peer_name(c->peer));
		if (c->capture != CKC_CAPTURE_DEVICE)
			warning("CKPTCACHE_PEER=%s needs a gpu tier (CKPTCACHE_CAPTURE=device): nothing "
				"would be shared", ckc_config_peer_name(c->peer));
	}
	if (c->peer != CKC_PEER_OFF && named)
		ok("peer segment of this job on this node: %s (mode 0600)", seg);
	else if (c->peer != CKC_PEER_OFF)
		(c->peer == CKC_PEER_AUTO ? ok : warning)(
			"peer GPUs: no job id or node (SLURM_JOB_ID, OMPI_MCA_ess_base_jobid or "
			"PMIX_NAMESPACE): the ranks could not find each other, peer GPUs stay off");
	if (!ckc_peerseg_sweep(CKC_PEERSEG_DIR, false, peer_stale, NULL))
		ok("%s: no peer segment of this user is left by processes that died", CKC_PEERSEG_DIR);
}

/* ---- the library ----------------------------------------------------------- */

void check_library(const char *lib)
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
int hint_line(const char *line)
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

