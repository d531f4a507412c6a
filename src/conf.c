/* The configuration loader: reads every CKPTCACHE_* variable, resolves the
 * defaults against the machine (memory, file-system space), and reports each
 * bad value once. Also owns the rank/local-size lookup; the size syntax is
 * size.c's. */
#include "config.h"

#include "conf.h"
#include "lanes.h"
#include "ktouch.h"
#include "copy.h"
#include "memlimit.h"
#include "log.h"
#include "state.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/magic.h>
#include <sys/vfs.h>
#include "sys.h"
#endif

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif

#define CONFIG_MIB (1024ULL * 1024)
#define CONFIG_GIB (1024ULL * CONFIG_MIB)

#define CONFIG_SIZE_HINT "use e.g. 512M, 4G or 10%%"

typedef const char *(*config_get_fn)(const char *name, void *ctx);

typedef struct config_loader {
	ckc_config_t *c;
	config_get_fn get;
	void *ctx;
	const ckc_sysinfo_t *sys;
	int errors;
} config_loader_t;

typedef struct config_word {
	const char *word;
	int value;
} config_word_t;

#include "conf_lex.h"

/* Set-but-blank counts as unset, so that `export CKPTCACHE_X=` restores the
 * default instead of being an error. */
static const char *config_value(config_loader_t *ld, const char *name)
{
	const char *v = ld->get(name, ld->ctx);
	if (!v)
		return NULL;
	for (const char *p = v; *p; p++)
		if (!config_space(*p))
			return v;
	return NULL;
}

static char *config_strdup(config_loader_t *ld, const char *s)
{
	char *d = strdup(s);
	if (!d) {
		ckc_error("configuration: out of memory");
		ld->errors++;
	}
	return d;
}

/* A decimal integer in [min, LONG_MAX]; with leading, only a prefix must be
 * one (Slurm's "4(x2)"). */
static bool config_long(const char *s, bool leading, long min, long *out)
{
	const char *p;
	size_t n;

	if (!s)
		return false;
	config_span(s, &p, &n);
	if (n == 0 || !config_digit(p[0]))
		return false;
	long v = 0;
	size_t i = 0;
	for (; i < n && config_digit(p[i]); i++) {
		int d = p[i] - '0';
		if (v > (LONG_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (i < n && !leading)
		return false;
	if (v < min)
		return false;
	*out = v;
	return true;
}

long ckc_config_rank(const char *(*get)(const char *name, void *ctx), void *ctx)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
					    "PMIX_RANK" };
	long v;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (config_long(get(vars[i], ctx), false, 0, &v))
			return v;
	return 0;
}

static long config_local_size(config_get_fn get, void *ctx)
{
	long v;
	if (config_long(get("OMPI_COMM_WORLD_LOCAL_SIZE", ctx), false, 1, &v))
		return v;
	if (config_long(get("MPI_LOCALNRANKS", ctx), false, 1, &v))
		return v;
	if (config_long(get("SLURM_NTASKS_PER_NODE", ctx), true, 1, &v))
		return v;
	return 1;
}

static long config_local_rank(config_get_fn get, void *ctx)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
					    "SLURM_LOCALID", "PMIX_LOCAL_RANK" };
	long v;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (config_long(get(vars[i], ctx), false, 0, &v))
			return v;
	return -1;
}

/* Copies s into a name of the peer segment: letters, digits, '.', '-'
 * and '_' kept, anything else (a '/' above all) made '_'. */
static void config_name_part(char *dst, size_t len, const char *s)
{
	size_t i = 0;
	for (; s && s[i] && i + 1 < len; i++) {
		char ch = s[i];
		bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || config_digit(ch) ||
			    ch == '.' || ch == '-' || ch == '_';
		dst[i] = keep ? ch : '_';
	}
	dst[i] = '\0';
}

/* The job the process belongs to, the one every rank of it reads alike:
 * Slurm's job and step, Open MPI's job id, a PMIx namespace. */
static void config_job(ckc_config_t *c, config_get_fn get, void *ctx)
{
	const char *slurm = get("SLURM_JOB_ID", ctx), *step = get("SLURM_STEP_ID", ctx);
	const char *ompi = get("OMPI_MCA_ess_base_jobid", ctx), *pmix = get("PMIX_NAMESPACE", ctx);
	char buf[2 * CKC_JOB_NAME];
	long v;

	buf[0] = '\0';
	if (config_long(slurm, false, 0, &v))
		snprintf(buf, sizeof(buf), "slurm%ld.%s", v, step && *step ? step : "0");
	else if (ompi && *ompi)
		snprintf(buf, sizeof(buf), "ompi%s", ompi);
	else if (pmix && *pmix)
		snprintf(buf, sizeof(buf), "pmix%s", pmix);
	config_name_part(c->job, sizeof(c->job), buf);
	const char *node = get("SLURM_NODEID", ctx);
	if (config_long(node, false, 0, &v)) {
		snprintf(buf, sizeof(buf), "n%ld", v);
	} else if (gethostname(buf, sizeof(buf) - 1) != 0) {
		strcpy(buf, "host");
	}
	buf[sizeof(buf) - 1] = '\0';
	config_name_part(c->node, sizeof(c->node), buf);
}

/* Reports an unknown word with the list of valid ones, in the given order. */
static int config_word(config_loader_t *ld, const char *name, const config_word_t *words,
		       size_t nwords, int def)
{
	const char *raw = config_value(ld, name);
	if (!raw)
		return def;
	const char *p;
	size_t n;
	config_span(raw, &p, &n);
	for (size_t i = 0; i < nwords; i++)
		if (strlen(words[i].word) == n && strncasecmp(p, words[i].word, n) == 0)
			return words[i].value;

	char expected[128];
	size_t off = 0;
	expected[0] = '\0';
	for (size_t i = 0; i < nwords && off < sizeof(expected); i++) {
		const char *sep = i == 0 ? "" : i + 1 == nwords ? " or " : ", ";
		int m = snprintf(expected + off, sizeof(expected) - off, "%s%s", sep, words[i].word);
		if (m < 0)
			break;
		off += (size_t)m;
	}
	ckc_error("%s='%s': unknown value (expected %s)", name, raw, expected);
	ld->errors++;
	return def;
}

/* Parses a size variable; on a bad value reports it and returns false. */
static bool config_size(config_loader_t *ld, const char *name, const char *raw, uint64_t *bytes,
			double *pct)
{
	const char *p;
	size_t n;
	config_span(raw, &p, &n);
	int rc = ckc_parse_size_span(p, n, bytes, pct);
	if (rc == -ERANGE)
		ckc_error("%s='%s': too large (expected less than 16 EiB)", name, raw);
	else if (rc)
		ckc_error("%s='%s': not a size (" CONFIG_SIZE_HINT ")", name, raw);
	else if (*pct > 100)
		ckc_error("%s='%s': percentage above 100 (expected 0%% to 100%%)", name, raw);
	else
		return true;
	ld->errors++;
	return false;
}

static uint64_t config_pct_of(uint64_t total, double pct)
{
	return (uint64_t)((long double)total * pct / 100);
}

static char *config_string(config_loader_t *ld, const char *name)
{
	const char *raw = config_value(ld, name);
	return raw ? config_strdup(ld, raw) : NULL;
}

static void config_log_level(config_loader_t *ld)
{
	static const config_word_t words[] = {
		{ "error", CKC_LOG_ERROR }, { "warn", CKC_LOG_WARN },
		{ "info", CKC_LOG_INFO },   { "debug", CKC_LOG_DEBUG },
	};
	ld->c->log_level = config_word(ld, "CKPTCACHE_LOG", words, 4, CKC_LOG_WARN);
	ckc_log_threshold = ld->c->log_level;
}

static void config_strict(config_loader_t *ld)
{
	static const config_word_t words[] = { { "0", 0 }, { "1", 1 } };
	ld->c->strict = config_word(ld, "CKPTCACHE_STRICT", words, 2, 0) == 1;
}

static void config_gpu(config_loader_t *ld)
{
	ckc_config_t *c = ld->c;
	const char *raw = config_value(ld, "CKPTCACHE_GPU_CACHE");
	uint64_t bytes;
	double pct;

	c->gpu_cache = 0;
	c->gpu_cache_pct = 25;
	if (!raw)
		return;
	if (!config_size(ld, "CKPTCACHE_GPU_CACHE", raw, &bytes, &pct))
		return;
	c->gpu_cache = bytes;
	c->gpu_cache_pct = pct;
}

static void config_capture(config_loader_t *ld)
{
	ckc_config_t *c = ld->c;
	const char *raw = config_value(ld, "CKPTCACHE_CAPTURE_MIN");
	uint64_t bytes;
	double pct;

	c->capture_min = 1u << 20;
	if (raw && config_size(ld, "CKPTCACHE_CAPTURE_MIN", raw, &bytes, &pct)) {
		if (pct >= 0) {
			ckc_error("CKPTCACHE_CAPTURE_MIN='%s': expected a size in bytes, not a percentage", raw);
			ld->errors++;
		} else {
			c->capture_min = bytes ? bytes : 1;
		}
	}
	static const config_word_t host[] = { { "all", 0 }, { "pageable", 1 } };
	c->capture_pageable_only = config_word(ld, "CKPTCACHE_CAPTURE_HOST", host, 2, 0) == 1;
}

#define CONFIG_TERM_WAIT_DEFAULT 20.0
#define CONFIG_TERM_WAIT_MAX 3600.0

/* Seconds, decimals allowed, 0 to an hour. */
static void config_term_wait(config_loader_t *ld)
{
	const char *raw = config_value(ld, "CKPTCACHE_TERM_WAIT"), *p;
	char buf[32], *end;
	size_t n;

	ld->c->term_wait_s = CONFIG_TERM_WAIT_DEFAULT;
	if (!raw)
		return;
	config_span(raw, &p, &n);
	if (n < sizeof(buf) && n > 0 && (config_digit(p[0]) || p[0] == '.')) {
		memcpy(buf, p, n);
		buf[n] = '\0';
		double v = strtod(buf, &end);
		if (*end == '\0' && v >= 0 && v <= CONFIG_TERM_WAIT_MAX) {
			ld->c->term_wait_s = v;
			return;
		}
	}
	ckc_error("CKPTCACHE_TERM_WAIT='%s': not a number of seconds (expected 0 to %.0f, e.g. 20 "
		  "or 2.5)", raw, CONFIG_TERM_WAIT_MAX);
	ld->errors++;
}

/* CKPTCACHE_LANES: 1 (off) to CKC_LANES_MAX threads per large read; unset
 * or "auto": chosen by the CPUs the process may use (lanes.c). */
static void config_lanes(config_loader_t *ld)
{
	const char *raw = config_value(ld, "CKPTCACHE_LANES");
	long v;
	const char *p;
	size_t n;

	ld->c->lanes = 0;
	if (!raw)
		return;
	config_span(raw, &p, &n);
	if (n == 4 && strncasecmp(p, "auto", 4) == 0)
		return;
	if (config_long(raw, false, 1, &v) && v <= CKC_LANES_MAX) {
		ld->c->lanes = (int)v;
		return;
	}
	ckc_error("CKPTCACHE_LANES='%s': expected auto or a number of threads from 1 (one thread "
		  "copies each read) to %d", raw, CKC_LANES_MAX);
	ld->errors++;
}

/* A tier size (resolved from raw): 0 turns the tier off, anything else
 * must be at least CKC_TIER_MIN. Returns the size, or 0 after an error. */
static uint64_t config_min_size(config_loader_t *ld, const char *name, const char *raw,
				uint64_t bytes)
{
	if (bytes == 0 || bytes >= CKC_TIER_MIN)
		return bytes;
	char h[32], m[32];
	ckc_error("%s='%s': %s is below the minimum of %s (use 0 to turn the tier off)", name, raw,
		  ckc_format_size(bytes, h, sizeof(h)), ckc_format_size(CKC_TIER_MIN, m, sizeof(m)));
	ld->errors++;
	return 0;
}

/* min(16 GiB, 10% of memory shared by the node's ranks), raised to 64 MiB
 * where the machine has room for that. */
static uint64_t config_host_default(uint64_t mem, long local_size)
{
	uint64_t d = mem / 10 / (uint64_t)local_size;
	if (d > 16 * CONFIG_GIB)
		d = 16 * CONFIG_GIB;
	if (d < 64 * CONFIG_MIB && 64 * CONFIG_MIB <= mem / 2)
		d = 64 * CONFIG_MIB;
	return d;
}

static void config_host(config_loader_t *ld)
{
	ckc_config_t *c = ld->c;
	uint64_t mem = ld->sys->mem_total;
	const char *raw = config_value(ld, "CKPTCACHE_HOST_CACHE");
	uint64_t bytes;
	double pct;

	c->host_cache = 0;
	c->host_cache_from = CKC_SIZE_BYTES;
	if (!raw) {
		c->host_cache = config_host_default(mem, c->local_size);
		c->host_cache_from = CKC_SIZE_DEFAULT;
		return;
	}
	if (!config_size(ld, "CKPTCACHE_HOST_CACHE", raw, &bytes, &pct))
		return;
	if (pct >= 0) {
		c->host_cache = config_min_size(ld, "CKPTCACHE_HOST_CACHE", raw, config_pct_of(mem, pct));
		c->host_cache_from = CKC_SIZE_PERCENT;
		c->host_cache_pct = pct;
		return;
	}
	/* mem_total 0 means the machine's memory is unknown: nothing to compare. */
	if (mem && bytes > mem) {
		char h[32];
		ckc_format_size(mem, h, sizeof(h));
		ckc_error("CKPTCACHE_HOST_CACHE='%s': larger than this machine's memory (%s)", raw, h);
		ld->errors++;
		return;
	}
	c->host_cache = config_min_size(ld, "CKPTCACHE_HOST_CACHE", raw, bytes);
}

uint64_t ckc_config_host_for(ckc_config_t *c, uint64_t mem)
{
	if (!mem)
		return c->host_cache;
	if (c->host_cache_from == CKC_SIZE_DEFAULT)
		c->host_cache = config_host_default(mem, c->local_size > 0 ? c->local_size : 1);
	else if (c->host_cache_from == CKC_SIZE_PERCENT)
		c->host_cache = config_pct_of(mem, c->host_cache_pct);
	return c->host_cache;
}

/* The file-system facts for dir, or for its nearest existing ancestor when
 * dir does not exist yet: that is where it will be created. */
static int config_fs_facts(const ckc_sysinfo_t *sys, const char *dir, uint64_t *avail,
			   bool *in_memory)
{
	char *p = strdup(dir);
	if (!p)
		return -ENOMEM;
	int rc;
	for (;;) {
		rc = sys->fs_info(p, avail, in_memory);
		if (rc != -ENOENT || strcmp(p, "/") == 0 || strcmp(p, ".") == 0)
			break;
		size_t n = strlen(p);
		while (n > 1 && p[n - 1] == '/')
			n--;
		while (n > 0 && p[n - 1] != '/')
			n--;
		while (n > 1 && p[n - 1] == '/')
			n--;
		if (n == 0)
			strcpy(p, ".");
		else
			p[n] = '\0';
	}
	sys_free(p);
	return rc;
}

/* The folder dir is in ("." for a bare name), malloc'ed; NULL if out of
 * memory. */
static char *config_parent_of(const char *dir)
{
	char *parent = strdup(dir);
	if (!parent)
		return NULL;
	size_t n = strlen(parent);
	while (n > 1 && parent[n - 1] == '/')
		n--;
	while (n > 0 && parent[n - 1] != '/')
		n--;
	parent[n > 1 ? n - 1 : n] = '\0';
	if (!*parent)
		strcpy(parent, ".");
	return parent;
}

/* Creates dir (mode 0700) when its parent folder exists, and says so: a
 * mistyped name must not become a tree of new folders. Returns 0 or an
 * errno (ENOENT when the parent is missing too). */
static int config_make_dir(const char *dir)
{
	char *parent = config_parent_of(dir);
	struct stat st;
	if (!parent)
		return ENOMEM;
	int err = 0;
	if (sys_stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
		err = ENOENT;
	else if (sys_mkdir(dir, 0700) != 0 && errno != EEXIST)
		err = errno;
	else
		ckc_warn("CKPTCACHE_SSD_DIR='%s' did not exist: created it (mode 0700)", dir);
	sys_free(parent);
	return err;
}

/* The errno why the missing dir could not be made (as config_make_dir
 * would: its parent exists, and is a writable folder), or 0. */
static int config_parent_writable(const char *dir)
{
	char *p = config_parent_of(dir);
	struct stat st;
	if (!p)
		return ENOMEM;
	int err = sys_stat(p, &st) != 0 || !S_ISDIR(st.st_mode) ? ENOENT : sys_access(p, W_OK | X_OK) ? errno : 0;
	sys_free(p);
	return err;
}

/* Returns 0 when dir is (or has just been made) a writable directory, else
 * the errno that explains why not. A missing dir is made if create, except
 * that with no_mkdir it is not: 0 when it could be. */
static int config_usable_dir(const char *dir, bool create, bool no_mkdir)
{
	struct stat st;
	if (sys_stat(dir, &st) != 0) {
		if (errno != ENOENT || !create)
			return errno;
		if (no_mkdir)
			return config_parent_writable(dir);
		int err = config_make_dir(dir);
		if (err)
			return err;
		if (sys_stat(dir, &st) != 0)
			return errno;
	}
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	if (sys_access(dir, W_OK | X_OK) != 0)
		return errno;
	return 0;
}

static void config_ssd_dir_error(config_loader_t *ld, const char *dir_raw, const char *cache_raw,
				 int err)
{
	if (dir_raw && err == ENOENT)
		ckc_error("CKPTCACHE_SSD_DIR='%s': no such folder, nor its parent (a typing error?): "
			  "create it first", dir_raw);
	else if (dir_raw)
		ckc_error("CKPTCACHE_SSD_DIR='%s': not a writable directory (%s)", dir_raw,
			  strerror(err));
	else
		ckc_error("CKPTCACHE_SSD_CACHE='%s': '%s' (the default, as CKPTCACHE_SSD_DIR is "
			  "unset) is not a writable directory (%s)",
			  cache_raw, ld->c->ssd_dir, strerror(err));
	ld->errors++;
}

static void config_ssd(config_loader_t *ld)
{
	ckc_config_t *c = ld->c;
	const char *dir_raw = config_value(ld, "CKPTCACHE_SSD_DIR");
	const char *cache_raw = config_value(ld, "CKPTCACHE_SSD_CACHE");
	const char *dir = dir_raw;

	c->ssd_cache = 0;
	if (!dir) {
		dir = config_value(ld, "TMPDIR");
		if (!dir)
			dir = "/tmp";
	}
	c->ssd_dir = config_strdup(ld, dir);
	if (!c->ssd_dir || (!dir_raw && !cache_raw))
		return;

	uint64_t avail = 0;
	bool in_memory = false;
	int fs_rc = config_fs_facts(ld->sys, dir, &avail, &in_memory);
	uint64_t size;
	/* the space the ssd tiers may have: what is free, and what this
	 * user's running caches took (a child of a program with an ssd tier
	 * must not count its parent's tier against its own) */
	if (fs_rc == 0 && ld->sys->tier_files)
		avail += ld->sys->tier_files(dir);

	if (cache_raw) {
		uint64_t bytes;
		double pct;
		if (!config_size(ld, "CKPTCACHE_SSD_CACHE", cache_raw, &bytes, &pct))
			return;
		if (pct >= 0) {
			if (fs_rc < 0) {
				config_ssd_dir_error(ld, dir_raw, cache_raw, -fs_rc);
				return;
			}
			size = config_pct_of(avail, pct);
		} else {
			/* Without the file system's facts the directory check
			 * below reports the actual problem. */
			if (fs_rc == 0 && bytes > avail) {
				char h[32];
				ckc_format_size(avail, h, sizeof(h));
				ckc_error("CKPTCACHE_SSD_CACHE='%s': larger than the space available "
					  "in '%s' (%s)",
					  cache_raw, dir, h);
				ld->errors++;
				return;
			}
			size = bytes;
		}
	} else {
		if (fs_rc < 0) {
			config_ssd_dir_error(ld, dir_raw, cache_raw, -fs_rc);
			return;
		}
		if (in_memory) {
			/* Staging in RAM-backed storage would double-count the
			 * host tier's memory. */
			ckc_info("CKPTCACHE_SSD_DIR='%s' is on a memory-backed file system (tmpfs "
				 "or ramfs): the ssd tier is off (set CKPTCACHE_SSD_CACHE to use it "
				 "anyway)",
				 dir_raw);
			return;
		}
		size = avail / 4 / (uint64_t)c->local_size;
		if (size > 64 * CONFIG_GIB)
			size = 64 * CONFIG_GIB;
	}

	if (cache_raw)
		size = config_min_size(ld, "CKPTCACHE_SSD_CACHE", cache_raw, size);
	else if (size < CKC_TIER_MIN)
		size = 0; /* the default on a full file system: no tier */
	if (size > 0) {
		int err = config_usable_dir(dir, true, ld->sys->no_mkdir);
		if (err) {
			config_ssd_dir_error(ld, dir_raw, cache_raw, err);
			return;
		}
	}
	c->ssd_cache = size;
}

int ckc_config_load(ckc_config_t *c, const char *(*get)(const char *name, void *ctx),
		    void *ctx, const ckc_sysinfo_t *sys)
{
	config_loader_t ld = { .c = c, .get = get, .ctx = ctx, .sys = sys, .errors = 0 };

	memset(c, 0, sizeof(*c));
	c->log_level = CKC_LOG_WARN;
	c->gpu_cache_pct = 25;
	c->rank = ckc_config_rank(get, ctx);
	c->local_size = config_local_size(get, ctx);
	c->local_rank = config_local_rank(get, ctx);
	config_job(c, get, ctx);

	const char *paths = config_value(&ld, "CKPTCACHE_PATHS");
	if (!paths)
		return 0;

	/* First, so that every later message obeys it. */
	config_log_level(&ld);
	config_strict(&ld);
	c->paths = config_strdup(&ld, paths);

	static const config_word_t order[] = {
		{ "reverse", CKC_ORDER_REVERSE },
		{ "sequential", CKC_ORDER_SEQUENTIAL },
		{ "none", CKC_ORDER_NONE },
	};
	c->order = config_word(&ld, "CKPTCACHE_ORDER", order, 3, CKC_ORDER_NONE);
	c->hints = config_string(&ld, "CKPTCACHE_HINTS");

	static const config_word_t capture[] = {
		{ "copy", CKC_CAPTURE_COPY },
		{ "device", CKC_CAPTURE_DEVICE },
	};
	c->capture = config_word(&ld, "CKPTCACHE_CAPTURE", capture, 2, CKC_CAPTURE_COPY);

	config_gpu(&ld);
	config_capture(&ld);
	config_host(&ld);
	config_ssd(&ld);

	const char *rescue = config_value(&ld, "CKPTCACHE_RESCUE_DIR");
	if (rescue) {
		/* checked now: it is needed when a real path cannot be written,
		 * which is too late to find out that it is not there */
		int err = config_usable_dir(rescue, false, false);
		if (err) {
			ckc_error("CKPTCACHE_RESCUE_DIR='%s': not a writable folder (%s): a checkpoint "
				  "whose real path cannot be written would have nowhere to go",
				  rescue, strerror(err));
			ld.errors++;
		}
		c->rescue_dir = config_strdup(&ld, rescue);
	} else if (c->ssd_dir) {
		c->rescue_dir = config_strdup(&ld, c->ssd_dir);
	}

	static const config_word_t persist[] = {
		{ "always", CKC_PERSIST_ALWAYS },
		{ "unconsumed", CKC_PERSIST_UNCONSUMED },
		{ "never", CKC_PERSIST_NEVER },
	};
	c->persist = config_word(&ld, "CKPTCACHE_PERSIST", persist, 3, CKC_PERSIST_ALWAYS);

	static const config_word_t eviction[] = {
		{ "score", CKC_EVICT_SCORE },
		{ "fifo", CKC_EVICT_FIFO },
		{ "lru", CKC_EVICT_LRU },
	};
	c->eviction = config_word(&ld, "CKPTCACHE_EVICTION", eviction, 3, CKC_EVICT_SCORE);

	static const config_word_t prefetch[] = {
		{ "auto", CKC_PREFETCH_AUTO },
		{ "eager", CKC_PREFETCH_EAGER },
		{ "off", CKC_PREFETCH_OFF },
	};
	c->prefetch = config_word(&ld, "CKPTCACHE_PREFETCH", prefetch, 3, CKC_PREFETCH_AUTO);

	static const config_word_t aside[] = {
		{ "auto", 1 },
		{ "off", 0 },
	};
	c->step_aside = config_word(&ld, "CKPTCACHE_STEP_ASIDE", aside, 2, 1) != 0;

	static const config_word_t ktouch[] = {
		{ "auto", CKC_KTOUCH_AUTO },
		{ "on", CKC_KTOUCH_ON },
		{ "off", CKC_KTOUCH_OFF },
	};
	c->ktouch = config_word(&ld, "CKPTCACHE_KERNEL_TOUCH", ktouch, 3, CKC_KTOUCH_AUTO);

	static const config_word_t copy[] = {
		{ "auto", CKC_COPY_AUTO },
		{ "libc", CKC_COPY_LIBC },
	};
	c->copy = config_word(&ld, "CKPTCACHE_COPY", copy, 2, CKC_COPY_AUTO);

	/* unset: decided when the gpu tier finds its device (peer.c) */
	static const config_word_t peer[] = {
		{ "off", CKC_PEER_OFF },
		{ "greedy", CKC_PEER_GREEDY },
		{ "maxflow", CKC_PEER_MAXFLOW },
	};
	c->peer = config_word(&ld, "CKPTCACHE_PEER", peer, 3, CKC_PEER_AUTO);

	config_term_wait(&ld);
	config_lanes(&ld);
	c->stats = config_string(&ld, "CKPTCACHE_STATS");
	c->trace = config_string(&ld, "CKPTCACHE_TRACE");

	if (ld.errors) {
		c->enabled = false;
		if (c->strict)
			ckc_error("configuration errors: aborting (CKPTCACHE_STRICT=1)");
		else
			ckc_error("configuration errors: the cache is disabled and every call "
				  "passes through");
	} else {
		c->enabled = true;
	}
	return ld.errors;
}

const char *ckc_config_peer_name(ckc_peer_t p)
{
	static const char *const names[] = { "auto", "off", "greedy", "maxflow" };
	return (unsigned)p < 4 ? names[p] : "auto";
}

static const char *config_getenv(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static int config_fs_info(const char *dir, uint64_t *avail, bool *in_memory)
{
	struct statvfs v;
	if (statvfs(dir, &v) != 0)
		return -errno;
	*avail = (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
	*in_memory = false;
#ifdef __linux__
	struct statfs f;
	if (statfs(dir, &f) == 0)
		*in_memory = (uint32_t)f.f_type == (uint32_t)TMPFS_MAGIC ||
			     (uint32_t)f.f_type == (uint32_t)RAMFS_MAGIC;
#endif
	return 0;
}

void ckc_sysinfo_default(ckc_sysinfo_t *sys)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);
	sys->mem_total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	sys->fs_info = config_fs_info;
	sys->no_mkdir = false;
	sys->tier_files = ckc_ssd_files_bytes;
}

int ckc_config_from_env(ckc_config_t *c)
{
	ckc_sysinfo_t sys;
	ckc_sysinfo_default(&sys);
	return ckc_config_load(c, config_getenv, NULL, &sys);
}

void ckc_config_free(ckc_config_t *c)
{
	sys_free(c->paths);
	sys_free(c->hints);
	sys_free(c->ssd_dir);
	sys_free(c->rescue_dir);
	sys_free(c->stats);
	sys_free(c->trace);
	c->paths = c->hints = c->ssd_dir = c->rescue_dir = c->stats = c->trace = NULL;
}
