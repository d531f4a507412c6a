/* The configuration loader: reads every CKPTCACHE_* variable, resolves the
 * defaults against the machine (memory, file-system space), and reports each
 * bad value once. Also owns the rank/local-size lookup; the sizes and
 * folders of the host and ssd tiers are conf_tiers.c's, the size syntax is
 * size.c's. */
#include "config.h"

#include "conf.h"
#include "conf_int.h"
#include "io.h"
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
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/magic.h>
#include <sys/vfs.h>
#include "sys.h"
#endif

#define CONFIG_SIZE_HINT "use e.g. 512M, 4G or 10%%"

typedef struct config_word {
	const char *word;
	int value;
} config_word_t;

#include "conf_lex.h"

/* Set-but-blank counts as unset, so that `export CKPTCACHE_X=` restores the
 * default instead of being an error. */
CKC_START_PATH const char *config_value(config_loader_t *ld, const char *name)
{
	const char *v = ld->get(name, ld->ctx);
	if (!v)
		return NULL;
	for (const char *p = v; *p; p++)
		if (!config_space(*p))
			return v;
	return NULL;
}

CKC_START_PATH char *config_strdup(config_loader_t *ld, const char *s)
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
CKC_START_PATH static bool config_long(const char *s, bool leading, long min, long *out)
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

CKC_START_PATH long ckc_config_rank(const char *(*get)(const char *name, void *ctx), void *ctx)
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
CKC_START_PATH static void config_name_part(char *dst, size_t len, const char *s)
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
CKC_START_PATH static void config_job(ckc_config_t *c, config_get_fn get, void *ctx)
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
	} else {
		/* the node's name (gethostname's, by the system call: its code
		 * is on a page of the C library a short program never touches) */
		struct utsname u;
		_Static_assert(sizeof(u.nodename) <= sizeof(buf), "the node's name fits");
		if (ckc_syscall6(SYS_uname, (long)&u, 0, 0, 0, 0, 0) == 0)
			memcpy(buf, u.nodename, sizeof(u.nodename));
		else
			strcpy(buf, "host");
	}
	buf[sizeof(buf) - 1] = '\0';
	config_name_part(c->node, sizeof(c->node), buf);
}

/* Reports an unknown word with the list of valid ones, in the given order. */
CKC_START_PATH static int config_word(config_loader_t *ld, const char *name, const config_word_t *words,
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
bool config_size(config_loader_t *ld, const char *name, const char *raw, uint64_t *bytes,
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

uint64_t config_pct_of(uint64_t total, double pct)
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

CKC_START_PATH int ckc_config_load(ckc_config_t *c, const char *(*get)(const char *name, void *ctx),
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

CKC_START_PATH static const char *config_getenv(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}
CKC_START_PATH int ckc_config_from_env(ckc_config_t *c)
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