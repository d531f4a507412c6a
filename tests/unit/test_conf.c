/* Unit tests for the configuration loader (src/conf.c): defaults, every
 * variable's valid and bad values with their exact messages, the size syntax,
 * the ssd directory checks, and the rank and local-size lookup. */
#include "config.h"

#include "conf.h"
#include "copy.h"
#include "log.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MIB (1024ULL * 1024)
#define GIB (1024ULL * MIB)
#define TIB (1024ULL * GIB)

#define FINAL_DISABLED \
	"ckptcache: error: configuration errors: the cache is disabled and every call passes through"
#define FINAL_STRICT "ckptcache: error: configuration errors: aborting (CKPTCACHE_STRICT=1)"

/* The environment the loader sees: a table, so that no test touches the
 * process's real environment. */
#define CONF_ENV_MAX 48
static struct {
	const char *name;
	const char *value;
} conf_env[CONF_ENV_MAX];
static size_t conf_nenv;

static void env(const char *name, const char *value)
{
	for (size_t i = 0; i < conf_nenv; i++) {
		if (strcmp(conf_env[i].name, name) == 0) {
			conf_env[i].value = value;
			return;
		}
	}
	cr_assert_lt(conf_nenv, CONF_ENV_MAX);
	conf_env[conf_nenv].name = name;
	conf_env[conf_nenv].value = value;
	conf_nenv++;
}

static int conf_get_calls;

static const char *conf_get(const char *name, void *ctx)
{
	cr_assert_eq(ctx, &conf_env, "the loader must pass ctx through");
	conf_get_calls++;
	for (size_t i = 0; i < conf_nenv; i++)
		if (strcmp(conf_env[i].name, name) == 0)
			return conf_env[i].value;
	return NULL;
}

/* The machine: memory is chosen per test; fs_info reports chosen facts for
 * directories that exist, and ENOENT (like statvfs) for those that do not. */
static uint64_t fake_avail;
static bool fake_in_memory;
static int fake_rc;
static int fake_calls;
static char fake_last_dir[PATH_MAX];

static int fake_fs_info(const char *dir, uint64_t *avail, bool *in_memory)
{
	struct stat st;

	fake_calls++;
	snprintf(fake_last_dir, sizeof(fake_last_dir), "%s", dir);
	if (fake_rc)
		return fake_rc;
	if (stat(dir, &st) != 0)
		return -errno;
	*avail = fake_avail;
	*in_memory = fake_in_memory;
	return 0;
}

static ckc_sysinfo_t sys = { 8 * GIB, fake_fs_info };

/* Messages, captured through the log sink. */
#define CONF_MSG_MAX 32
static struct {
	int level;
	char text[1100];
} msgs[CONF_MSG_MAX];
static int nmsgs;

static void conf_sink(int level, const char *msg)
{
	if (nmsgs < CONF_MSG_MAX) {
		msgs[nmsgs].level = level;
		snprintf(msgs[nmsgs].text, sizeof(msgs[nmsgs].text), "%s", msg);
	}
	nmsgs++;
}

static ckc_config_t cfg;
static char tmpdir[64];

static int conf_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* A fresh configuration with only CKPTCACHE_PATHS set. */
static void conf_reset(void)
{
	ckc_config_free(&cfg);
	memset(&cfg, 0, sizeof(cfg));
	conf_nenv = 0;
	nmsgs = 0;
	conf_get_calls = 0;
	fake_calls = 0;
	fake_last_dir[0] = '\0';
	ckc_log_threshold = CKC_LOG_WARN;
	env("CKPTCACHE_PATHS", "/ckpt/*.h5");
}

static void setup(void)
{
	fake_avail = 100 * GIB;
	fake_in_memory = false;
	fake_rc = 0;
	sys.mem_total = 8 * GIB;
	sys.fs_info = fake_fs_info;
	sys.tier_files = NULL;
	tmpdir[0] = '\0';
	ckc_log_sink = conf_sink;
	conf_reset();
}

static void teardown(void)
{
	ckc_config_free(&cfg);
	ckc_log_sink = NULL;
	ckc_log_threshold = CKC_LOG_WARN;
	if (tmpdir[0]) {
		chmod(tmpdir, 0700);
		nftw(tmpdir, conf_rm, 16, FTW_DEPTH | FTW_PHYS);
	}
}

TestSuite(conf, .init = setup, .fini = teardown);

static int load(void)
{
	return ckc_config_load(&cfg, conf_get, &conf_env, &sys);
}

static const char *make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ckc-conf-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	return tmpdir;
}

/* A path below tmpdir; the returned buffer is one of a few rotating ones. */
static const char *under(const char *rel)
{
	static char buf[4][PATH_MAX];
	static int next;
	char *b = buf[next++ % 4];
	snprintf(b, PATH_MAX, "%s/%s", tmpdir, rel);
	return b;
}

static void make_file(const char *path)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "cannot create %s", path);
	fclose(f);
}

static int count_level(int level)
{
	int n = 0;
	for (int i = 0; i < nmsgs && i < CONF_MSG_MAX; i++)
		n += msgs[i].level == level;
	return n;
}

/* Loads with var=value added and expects exactly that one error, worded
 * exactly, followed by the closing message. */
static void expect_single_error(const char *var, const char *value, const char *reason)
{
	char want[1200];

	conf_reset();
	env(var, value);
	int rc = load();
	snprintf(want, sizeof(want), "ckptcache: error: %s='%s': %s", var, value, reason);
	cr_expect_eq(rc, 1, "%s='%s': returned %d", var, value, rc);
	cr_expect_not(cfg.enabled, "%s='%s': still enabled", var, value);
	cr_expect_eq(nmsgs, 2, "%s='%s': %d messages", var, value, nmsgs);
	if (nmsgs >= 1) {
		cr_expect_eq(msgs[0].level, CKC_LOG_ERROR);
		cr_expect_str_eq(msgs[0].text, want);
	}
	if (nmsgs >= 2)
		cr_expect_str_eq(msgs[1].text, FINAL_DISABLED);
}

/* ---- CKPTCACHE_PATHS ---------------------------------------------------- */

Test(conf, paths_unset_disables_silently)
{
	conf_reset();
	conf_nenv = 0;
	env("CKPTCACHE_ORDER", "backwards");
	env("CKPTCACHE_HOST_CACHE", "12Q");
	env("CKPTCACHE_LOG", "debug");
	env("CKPTCACHE_STRICT", "yes");
	env("CKPTCACHE_SSD_DIR", "/nonexistent/ckc");
	cr_assert_eq(load(), 0);
	cr_expect_not(cfg.enabled);
	cr_expect_eq(nmsgs, 0);
	cr_expect_eq(ckc_log_threshold, CKC_LOG_WARN, "CKPTCACHE_LOG must not apply when disabled");
	cr_expect_null(cfg.paths);
	cr_expect_null(cfg.ssd_dir);
	cr_expect_eq(fake_calls, 0, "no file-system probing when disabled");
}

Test(conf, paths_empty_or_blank_disables_silently)
{
	const char *blank[] = { "", "   ", "\t\n" };
	for (size_t i = 0; i < sizeof(blank) / sizeof(blank[0]); i++) {
		conf_reset();
		env("CKPTCACHE_PATHS", blank[i]);
		env("CKPTCACHE_ORDER", "backwards");
		cr_expect_eq(load(), 0, "PATHS='%s'", blank[i]);
		cr_expect_not(cfg.enabled, "PATHS='%s'", blank[i]);
		cr_expect_eq(nmsgs, 0, "PATHS='%s'", blank[i]);
	}
}

Test(conf, paths_kept_as_given)
{
	env("CKPTCACHE_PATHS", "/scratch/run*/ckpt_*.h5:/gpfs/**/restart.*");
	cr_assert_eq(load(), 0);
	cr_expect(cfg.enabled);
	cr_expect_str_eq(cfg.paths, "/scratch/run*/ckpt_*.h5:/gpfs/**/restart.*");
}

/* ---- defaults ------------------------------------------------------------- */

Test(conf, all_defaults)
{
	cr_assert_eq(load(), 0);
	cr_expect_eq(nmsgs, 0);
	cr_expect(cfg.enabled);
	cr_expect_not(cfg.strict);
	cr_expect_str_eq(cfg.paths, "/ckpt/*.h5");
	cr_expect_eq(cfg.order, CKC_ORDER_NONE);
	cr_expect_null(cfg.hints);
	cr_expect_eq(cfg.capture, CKC_CAPTURE_COPY);
	cr_expect_eq(cfg.gpu_cache, 0);
	cr_expect_eq(cfg.gpu_cache_pct, 25.0);
	cr_expect_eq(cfg.host_cache, 858993459ULL, "10%% of 8 GiB, got %llu",
		     (unsigned long long)cfg.host_cache);
	cr_expect_eq(cfg.ssd_cache, 0);
	cr_expect_str_eq(cfg.ssd_dir, "/tmp");
	cr_expect_str_eq(cfg.rescue_dir, "/tmp");
	cr_expect_eq(cfg.persist, CKC_PERSIST_ALWAYS);
	cr_expect_eq(cfg.eviction, CKC_EVICT_SCORE);
	cr_expect_eq(cfg.prefetch, CKC_PREFETCH_AUTO);
	cr_expect_null(cfg.stats);
	cr_expect_null(cfg.trace);
	cr_expect_eq(cfg.log_level, CKC_LOG_WARN);
	cr_expect_eq(ckc_log_threshold, CKC_LOG_WARN);
	cr_expect_eq(cfg.rank, 0);
	cr_expect_eq(cfg.local_size, 1);
	cr_expect_eq(fake_calls, 0, "the ssd tier is off: no file-system probing");
}

Test(conf, blank_values_mean_default)
{
	const char *vars[] = { "CKPTCACHE_ORDER",     "CKPTCACHE_CAPTURE",   "CKPTCACHE_GPU_CACHE",
			       "CKPTCACHE_HOST_CACHE", "CKPTCACHE_SSD_CACHE", "CKPTCACHE_SSD_DIR",
			       "CKPTCACHE_PERSIST",   "CKPTCACHE_EVICTION",  "CKPTCACHE_PREFETCH",
			       "CKPTCACHE_LOG",       "CKPTCACHE_STRICT",    "CKPTCACHE_HINTS",
			       "CKPTCACHE_STATS",     "CKPTCACHE_TRACE",     "CKPTCACHE_RESCUE_DIR" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		env(vars[i], i % 2 ? "" : "  ");
	cr_assert_eq(load(), 0);
	cr_expect_eq(nmsgs, 0);
	cr_expect(cfg.enabled);
	cr_expect_eq(cfg.host_cache, 858993459ULL);
	cr_expect_eq(cfg.gpu_cache_pct, 25.0);
	cr_expect_eq(cfg.ssd_cache, 0);
	cr_expect_str_eq(cfg.ssd_dir, "/tmp");
	cr_expect_null(cfg.hints);
	cr_expect_null(cfg.stats);
	cr_expect_null(cfg.trace);
	cr_expect_str_eq(cfg.rescue_dir, "/tmp");
}

/* ---- word variables ------------------------------------------------------- */

static int f_order(const ckc_config_t *c) { return (int)c->order; }
static int f_capture(const ckc_config_t *c) { return (int)c->capture; }
static int f_persist(const ckc_config_t *c) { return (int)c->persist; }
static int f_eviction(const ckc_config_t *c) { return (int)c->eviction; }
static int f_prefetch(const ckc_config_t *c) { return (int)c->prefetch; }
static int f_copy(const ckc_config_t *c) { return c->copy; }
static int f_log(const ckc_config_t *c) { return c->log_level; }
static int f_strict(const ckc_config_t *c) { return c->strict; }

struct word_case {
	const char *var;
	const char *value;
	int (*field)(const ckc_config_t *c);
	int want;
};

static void check_words(const struct word_case *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		conf_reset();
		env(t[i].var, t[i].value);
		int rc = load();
		cr_expect_eq(rc, 0, "%s='%s': returned %d", t[i].var, t[i].value, rc);
		cr_expect(cfg.enabled, "%s='%s'", t[i].var, t[i].value);
		cr_expect_eq(count_level(CKC_LOG_ERROR), 0, "%s='%s'", t[i].var, t[i].value);
		cr_expect_eq(t[i].field(&cfg), t[i].want, "%s='%s': got %d, want %d", t[i].var,
			     t[i].value, t[i].field(&cfg), t[i].want);
	}
}

Test(conf, order_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_ORDER", "reverse", f_order, CKC_ORDER_REVERSE },
		{ "CKPTCACHE_ORDER", "REVERSE", f_order, CKC_ORDER_REVERSE },
		{ "CKPTCACHE_ORDER", " Reverse\t", f_order, CKC_ORDER_REVERSE },
		{ "CKPTCACHE_ORDER", "sequential", f_order, CKC_ORDER_SEQUENTIAL },
		{ "CKPTCACHE_ORDER", "SeQuEnTiAl\n", f_order, CKC_ORDER_SEQUENTIAL },
		{ "CKPTCACHE_ORDER", "none", f_order, CKC_ORDER_NONE },
		{ "CKPTCACHE_ORDER", "  NONE  ", f_order, CKC_ORDER_NONE },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
}

Test(conf, capture_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_CAPTURE", "copy", f_capture, CKC_CAPTURE_COPY },
		{ "CKPTCACHE_CAPTURE", " COPY ", f_capture, CKC_CAPTURE_COPY },
		{ "CKPTCACHE_CAPTURE", "device", f_capture, CKC_CAPTURE_DEVICE },
		{ "CKPTCACHE_CAPTURE", "\tDevice", f_capture, CKC_CAPTURE_DEVICE },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
}

Test(conf, persist_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_PERSIST", "always", f_persist, CKC_PERSIST_ALWAYS },
		{ "CKPTCACHE_PERSIST", "ALWAYS ", f_persist, CKC_PERSIST_ALWAYS },
		{ "CKPTCACHE_PERSIST", "unconsumed", f_persist, CKC_PERSIST_UNCONSUMED },
		{ "CKPTCACHE_PERSIST", " UnConsumed", f_persist, CKC_PERSIST_UNCONSUMED },
		{ "CKPTCACHE_PERSIST", "never", f_persist, CKC_PERSIST_NEVER },
		{ "CKPTCACHE_PERSIST", "\tNEVER\t", f_persist, CKC_PERSIST_NEVER },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
}

Test(conf, eviction_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_EVICTION", "score", f_eviction, CKC_EVICT_SCORE },
		{ "CKPTCACHE_EVICTION", " Score", f_eviction, CKC_EVICT_SCORE },
		{ "CKPTCACHE_EVICTION", "fifo", f_eviction, CKC_EVICT_FIFO },
		{ "CKPTCACHE_EVICTION", "FIFO ", f_eviction, CKC_EVICT_FIFO },
		{ "CKPTCACHE_EVICTION", "lru", f_eviction, CKC_EVICT_LRU },
		{ "CKPTCACHE_EVICTION", "\nLrU", f_eviction, CKC_EVICT_LRU },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
}

Test(conf, prefetch_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_PREFETCH", "auto", f_prefetch, CKC_PREFETCH_AUTO },
		{ "CKPTCACHE_PREFETCH", "AUTO", f_prefetch, CKC_PREFETCH_AUTO },
		{ "CKPTCACHE_PREFETCH", "eager", f_prefetch, CKC_PREFETCH_EAGER },
		{ "CKPTCACHE_PREFETCH", " Eager ", f_prefetch, CKC_PREFETCH_EAGER },
		{ "CKPTCACHE_PREFETCH", "off", f_prefetch, CKC_PREFETCH_OFF },
		{ "CKPTCACHE_PREFETCH", "OFF\t", f_prefetch, CKC_PREFETCH_OFF },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
}

Test(conf, copy_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_COPY", "auto", f_copy, CKC_COPY_AUTO },
		{ "CKPTCACHE_COPY", " Auto", f_copy, CKC_COPY_AUTO },
		{ "CKPTCACHE_COPY", "libc", f_copy, CKC_COPY_LIBC },
		{ "CKPTCACHE_COPY", "LIBC\t", f_copy, CKC_COPY_LIBC },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
	conf_reset();
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.copy, CKC_COPY_AUTO, "unset: auto");
}

Test(conf, bad_copy)
{
	const char *why = "unknown value (expected auto or libc)";
	expect_single_error("CKPTCACHE_COPY", "movsb", why);
	expect_single_error("CKPTCACHE_COPY", "memcpy", why);
	expect_single_error("CKPTCACHE_COPY", "off", why);
}

Test(conf, log_words_set_level_and_threshold)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_LOG", "error", f_log, CKC_LOG_ERROR },
		{ "CKPTCACHE_LOG", " ERROR ", f_log, CKC_LOG_ERROR },
		{ "CKPTCACHE_LOG", "warn", f_log, CKC_LOG_WARN },
		{ "CKPTCACHE_LOG", "Warn", f_log, CKC_LOG_WARN },
		{ "CKPTCACHE_LOG", "info", f_log, CKC_LOG_INFO },
		{ "CKPTCACHE_LOG", "INFO\n", f_log, CKC_LOG_INFO },
		{ "CKPTCACHE_LOG", "debug", f_log, CKC_LOG_DEBUG },
		{ "CKPTCACHE_LOG", "\tDeBuG", f_log, CKC_LOG_DEBUG },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		conf_reset();
		env(t[i].var, t[i].value);
		load();
		cr_expect_eq(ckc_log_threshold, t[i].want, "CKPTCACHE_LOG='%s': threshold %d",
			     t[i].value, ckc_log_threshold);
	}
}

Test(conf, strict_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_STRICT", "0", f_strict, 0 },
		{ "CKPTCACHE_STRICT", " 0 ", f_strict, 0 },
		{ "CKPTCACHE_STRICT", "1", f_strict, 1 },
		{ "CKPTCACHE_STRICT", "\t1\n", f_strict, 1 },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
}

Test(conf, bad_order)
{
	const char *why = "unknown value (expected reverse, sequential or none)";
	expect_single_error("CKPTCACHE_ORDER", "backwards", why);
	expect_single_error("CKPTCACHE_ORDER", "rev", why);
	expect_single_error("CKPTCACHE_ORDER", "reverse,none", why);
	expect_single_error("CKPTCACHE_ORDER", "re verse", why);
	expect_single_error("CKPTCACHE_ORDER", "1", why);
	expect_single_error("CKPTCACHE_ORDER", " reversed ", why);
}

Test(conf, bad_capture)
{
	const char *why = "unknown value (expected copy or device)";
	expect_single_error("CKPTCACHE_CAPTURE", "gpu", why);
	expect_single_error("CKPTCACHE_CAPTURE", "cop", why);
	expect_single_error("CKPTCACHE_CAPTURE", "copy device", why);
	expect_single_error("CKPTCACHE_CAPTURE", "0", why);
}

Test(conf, bad_persist)
{
	const char *why = "unknown value (expected always, unconsumed or never)";
	expect_single_error("CKPTCACHE_PERSIST", "sometimes", why);
	expect_single_error("CKPTCACHE_PERSIST", "alway", why);
	expect_single_error("CKPTCACHE_PERSIST", "yes", why);
	expect_single_error("CKPTCACHE_PERSIST", "1", why);
}

Test(conf, bad_eviction)
{
	const char *why = "unknown value (expected score, fifo or lru)";
	expect_single_error("CKPTCACHE_EVICTION", "lfu", why);
	expect_single_error("CKPTCACHE_EVICTION", "fif", why);
	expect_single_error("CKPTCACHE_EVICTION", "fifo,lru", why);
	expect_single_error("CKPTCACHE_EVICTION", "2", why);
}

Test(conf, bad_prefetch)
{
	const char *why = "unknown value (expected auto, eager or off)";
	expect_single_error("CKPTCACHE_PREFETCH", "on", why);
	expect_single_error("CKPTCACHE_PREFETCH", "lazy", why);
	expect_single_error("CKPTCACHE_PREFETCH", "no", why);
	expect_single_error("CKPTCACHE_PREFETCH", "0", why);
}

Test(conf, bad_log)
{
	const char *why = "unknown value (expected error, warn, info or debug)";
	expect_single_error("CKPTCACHE_LOG", "warning", why);
	cr_expect_eq(cfg.log_level, CKC_LOG_WARN);
	cr_expect_eq(ckc_log_threshold, CKC_LOG_WARN);
	expect_single_error("CKPTCACHE_LOG", "verbose", why);
	expect_single_error("CKPTCACHE_LOG", "3", why);
	expect_single_error("CKPTCACHE_LOG", "err", why);
}

Test(conf, bad_strict)
{
	const char *why = "unknown value (expected 0 or 1)";
	expect_single_error("CKPTCACHE_STRICT", "yes", why);
	cr_expect_not(cfg.strict);
	expect_single_error("CKPTCACHE_STRICT", "true", why);
	expect_single_error("CKPTCACHE_STRICT", "2", why);
	expect_single_error("CKPTCACHE_STRICT", "01", why);
	expect_single_error("CKPTCACHE_STRICT", "-1", why);
	expect_single_error("CKPTCACHE_STRICT", "1.0", why);
}

/* ---- log level applies to the rest of the load ----------------------------- */

Test(conf, log_parsed_before_other_variables)
{
	fake_in_memory = true;
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_LOG", "info");
	cr_assert_eq(load(), 0);
	cr_expect_eq(nmsgs, 1, "the tmpfs info message passes an info threshold");
	cr_expect_eq(msgs[0].level, CKC_LOG_INFO);

	conf_reset();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_LOG", "error");
	ckc_log_threshold = CKC_LOG_DEBUG;
	cr_assert_eq(load(), 0);
	cr_expect_eq(nmsgs, 0, "CKPTCACHE_LOG=error silences the info message");
}

Test(conf, log_error_still_reports_errors)
{
	env("CKPTCACHE_LOG", "error");
	env("CKPTCACHE_ORDER", "backwards");
	cr_assert_eq(load(), 1);
	cr_expect_eq(nmsgs, 2);
	cr_expect_str_eq(msgs[1].text, FINAL_DISABLED);
}

/* ---- several errors, strict ------------------------------------------------ */

Test(conf, multiple_errors_counted_in_order)
{
	env("CKPTCACHE_LOG", "loud");
	env("CKPTCACHE_STRICT", "maybe");
	env("CKPTCACHE_ORDER", "backwards");
	env("CKPTCACHE_HOST_CACHE", "12Q");
	env("CKPTCACHE_PREFETCH", "lazy");
	cr_assert_eq(load(), 5);
	cr_expect_not(cfg.enabled);
	cr_assert_eq(nmsgs, 6);
	cr_expect_eq(count_level(CKC_LOG_ERROR), 6);
	cr_expect(strstr(msgs[0].text, "CKPTCACHE_LOG='loud': unknown value"));
	cr_expect(strstr(msgs[1].text, "CKPTCACHE_STRICT='maybe': unknown value"));
	cr_expect(strstr(msgs[2].text, "CKPTCACHE_ORDER='backwards': unknown value"));
	cr_expect_str_eq(msgs[3].text, "ckptcache: error: CKPTCACHE_HOST_CACHE='12Q': not a size "
				       "(use e.g. 512M, 4G or 10%)");
	cr_expect(strstr(msgs[4].text, "CKPTCACHE_PREFETCH='lazy': unknown value"));
	cr_expect_str_eq(msgs[5].text, FINAL_DISABLED);
}

Test(conf, strict_with_errors_says_aborting)
{
	env("CKPTCACHE_STRICT", "1");
	env("CKPTCACHE_ORDER", "backwards");
	env("CKPTCACHE_EVICTION", "lfu");
	cr_assert_eq(load(), 2);
	cr_expect(cfg.strict);
	cr_expect_not(cfg.enabled);
	cr_assert_eq(nmsgs, 3);
	cr_expect_str_eq(msgs[2].text, FINAL_STRICT);
}

Test(conf, strict_without_errors_enables)
{
	env("CKPTCACHE_STRICT", "1");
	cr_assert_eq(load(), 0);
	cr_expect(cfg.strict);
	cr_expect(cfg.enabled);
	cr_expect_eq(nmsgs, 0);
}

Test(conf, strict_zero_with_errors_disables)
{
	env("CKPTCACHE_STRICT", "0");
	env("CKPTCACHE_CAPTURE", "gpu");
	cr_assert_eq(load(), 1);
	cr_expect_not(cfg.strict);
	cr_assert_eq(nmsgs, 2);
	cr_expect_str_eq(msgs[1].text, FINAL_DISABLED);
}

/* ---- string variables ------------------------------------------------------ */

Test(conf, string_variables)
{
	make_tmpdir();
	env("CKPTCACHE_HINTS", "/home/u/run/hints.txt");
	env("CKPTCACHE_STATS", "/home/u/run/ckc-stats.json");
	env("CKPTCACHE_TRACE", "/home/u/run/ckc.trace");
	env("CKPTCACHE_RESCUE_DIR", tmpdir);
	cr_assert_eq(load(), 0);
	cr_expect_eq(nmsgs, 0, "a hint file that does not exist yet is not an error");
	cr_expect_str_eq(cfg.hints, "/home/u/run/hints.txt");
	cr_expect_str_eq(cfg.stats, "/home/u/run/ckc-stats.json");
	cr_expect_str_eq(cfg.trace, "/home/u/run/ckc.trace");
	cr_expect_str_eq(cfg.rescue_dir, tmpdir);
}

/* A rescue folder is needed only when a real path fails: too late to find
 * out that it is not there, so it is checked at start. */
Test(conf, rescue_dir_checked_at_start)
{
	make_tmpdir();
	const char *bad[] = { under("nowhere"), under("afile") };
	FILE *f = fopen(under("afile"), "w");
	cr_assert_not_null(f);
	fclose(f);
	for (int i = 0; i < 2; i++) {
		conf_reset();
		env("CKPTCACHE_RESCUE_DIR", bad[i]);
		cr_assert_eq(load(), 1, "%s", bad[i]);
		cr_expect_not(cfg.enabled);
		char want[PATH_MAX + 64];
		snprintf(want, sizeof(want), "CKPTCACHE_RESCUE_DIR='%s': not a writable folder", bad[i]);
		cr_expect_not_null(strstr(msgs[0].text, want), "%s", msgs[0].text);
	}
	struct stat st;
	cr_expect_neq(stat(under("nowhere"), &st), 0, "the rescue folder is checked, not made");
}

/* Tier sizes below one block name the minimum (they used to fail later with
 * "Invalid argument"); 0 still turns a tier off. */
Test(conf, tier_minimum_named)
{
	make_tmpdir();
	static const struct {
		const char *var, *value;
	} bad[] = {
		{ "CKPTCACHE_HOST_CACHE", "100" },
		{ "CKPTCACHE_HOST_CACHE", "4095" },
		{ "CKPTCACHE_HOST_CACHE", "0.00001%" },
		{ "CKPTCACHE_SSD_CACHE", "1K" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		conf_reset();
		env("CKPTCACHE_SSD_DIR", tmpdir);
		env(bad[i].var, bad[i].value);
		cr_assert_eq(load(), 1, "%s=%s", bad[i].var, bad[i].value);
		cr_expect_not_null(strstr(msgs[0].text, "below the minimum of 4 KiB"), "%s", msgs[0].text);
		cr_expect_not_null(strstr(msgs[0].text, bad[i].var), "%s", msgs[0].text);
	}
	conf_reset();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_HOST_CACHE", "4K");
	env("CKPTCACHE_SSD_CACHE", "0");
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.host_cache, 4096);
	cr_expect_eq(cfg.ssd_cache, 0);
}

/* A child of a program with an ssd tier (system(), a shell) reads the same
 * settings after its parent took its share of the space: the parent's tier
 * file counts as space the ssd tiers may use, not as space gone. */
static uint64_t fake_tier_files(const char *dir)
{
	(void)dir;
	return 512 * MIB;
}

Test(conf, ssd_size_counts_running_tiers_back)
{
	make_tmpdir();
	fake_avail = 300 * MIB;
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_SSD_CACHE", "512M");
	cr_expect_eq(load(), 1, "without the tier files' bytes: larger than available");
	conf_reset();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_SSD_CACHE", "512M");
	sys.tier_files = fake_tier_files;
	int rc = load();
	sys.tier_files = NULL;
	cr_assert_eq(rc, 0, "%s", nmsgs ? msgs[0].text : "");
	cr_expect_eq(cfg.ssd_cache, 512 * MIB);
}

Test(conf, rescue_dir_defaults_to_ssd_dir)
{
	env("TMPDIR", "/scratch/job42");
	cr_assert_eq(load(), 0);
	cr_expect_str_eq(cfg.ssd_dir, "/scratch/job42");
	cr_expect_str_eq(cfg.rescue_dir, "/scratch/job42");
	cr_expect_neq(cfg.rescue_dir, cfg.ssd_dir, "two allocations, freed separately");

	conf_reset();
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	cr_assert_eq(load(), 0);
	cr_expect_str_eq(cfg.rescue_dir, tmpdir);
}

/* ---- GPU_CACHE --------------------------------------------------------------- */

Test(conf, gpu_cache_values)
{
	static const struct {
		const char *value;
		uint64_t bytes;
		double pct;
	} t[] = {
		{ "2G", 2 * GIB, -1 },  { " 1gib ", GIB, -1 }, { "512M", 512 * MIB, -1 },
		{ "0", 0, -1 },         { "40%", 0, 40 },      { "12.5%", 0, 12.5 },
		{ "100%", 0, 100 },     { "0%", 0, 0 },        { "1.5T", 3 * TIB / 2, -1 },
		{ "64G", 64 * GIB, -1 }, /* bytes are checked against the device later */
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		conf_reset();
		env("CKPTCACHE_GPU_CACHE", t[i].value);
		cr_expect_eq(load(), 0, "'%s'", t[i].value);
		cr_expect_eq(cfg.gpu_cache, t[i].bytes, "'%s': %llu", t[i].value,
			     (unsigned long long)cfg.gpu_cache);
		cr_expect_eq(cfg.gpu_cache_pct, t[i].pct, "'%s': %g", t[i].value, cfg.gpu_cache_pct);
	}
}

Test(conf, capture_settings)
{
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.capture_min, MIB, "default threshold 1 MiB");
	cr_expect(!cfg.capture_pageable_only);

	conf_reset();
	env("CKPTCACHE_CAPTURE", "device");
	env("CKPTCACHE_CAPTURE_MIN", "64K");
	env("CKPTCACHE_CAPTURE_HOST", "pageable");
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.capture, CKC_CAPTURE_DEVICE);
	cr_expect_eq(cfg.capture_min, 64 * 1024);
	cr_expect(cfg.capture_pageable_only);

	conf_reset();
	env("CKPTCACHE_CAPTURE_MIN", "10%");
	cr_expect_eq(load(), 1, "a percentage is no threshold");
	cr_expect(!cfg.enabled);

	conf_reset();
	env("CKPTCACHE_CAPTURE_HOST", "pinned");
	cr_expect_eq(load(), 1);
	cr_expect(!cfg.enabled);
}

/* The size errors are the same for the three size variables. */
static void check_bad_sizes(const char *var)
{
	const char *nas = "not a size (use e.g. 512M, 4G or 10%)";
	const char *big = "too large (expected less than 16 EiB)";
	const char *pct = "percentage above 100 (expected 0% to 100%)";
	expect_single_error(var, "12Q", nas);
	expect_single_error(var, "-1", nas);
	expect_single_error(var, "1e9", nas);
	expect_single_error(var, "G", nas);
	expect_single_error(var, "%", nas);
	expect_single_error(var, "1.5", nas);
	expect_single_error(var, "4 G", nas);
	expect_single_error(var, "0x10", nas);
	expect_single_error(var, "4GBs", nas);
	expect_single_error(var, "many", nas);
	expect_single_error(var, "101%", pct);
	expect_single_error(var, "100.5%", pct);
	expect_single_error(var, "99999999999999999999", big);
	expect_single_error(var, "20000000T", big);
}

Test(conf, bad_gpu_cache)
{
	check_bad_sizes("CKPTCACHE_GPU_CACHE");
}

/* ---- HOST_CACHE -------------------------------------------------------------- */

static uint64_t host_default(uint64_t mem, const char *local)
{
	conf_reset();
	sys.mem_total = mem;
	if (local)
		env("OMPI_COMM_WORLD_LOCAL_SIZE", local);
	cr_assert_eq(load(), 0);
	cr_assert_eq(nmsgs, 0);
	return cfg.host_cache;
}

Test(conf, host_cache_default_formula)
{
	/* 10% of memory per local rank */
	cr_expect_eq(host_default(8 * GIB, NULL), 858993459ULL);
	cr_expect_eq(host_default(8 * GIB, "1"), 858993459ULL);
	cr_expect_eq(host_default(8 * GIB, "8"), 107374182ULL);
	cr_expect_eq(host_default(64 * GIB, "4"), 1717986918ULL);
	/* capped at 16 GiB */
	cr_expect_eq(host_default(256 * GIB, "1"), 16 * GIB);
	cr_expect_eq(host_default(160 * GIB + 10, "1"), 16 * GIB);
	/* raised to 64 MiB while that is at most half of memory */
	cr_expect_eq(host_default(8 * GIB, "16"), 64 * MIB);
	cr_expect_eq(host_default(8 * GIB, "128"), 64 * MIB);
	cr_expect_eq(host_default(128 * MIB, "4"), 64 * MIB);
	/* ... but not beyond it */
	cr_expect_eq(host_default(128 * MIB - 2, "4"), 3355443ULL);
	cr_expect_eq(host_default(100 * MIB, "1"), 10485760ULL);
}

Test(conf, host_cache_values)
{
	static const struct {
		const char *value;
		uint64_t bytes;
	} t[] = {
		{ "4G", 4 * GIB },      { " 2g ", 2 * GIB },     { "512M", 512 * MIB },
		{ "8G", 8 * GIB },      { "8589934592", 8 * GIB }, { "0", 0 },
		{ "0%", 0 },            { "50%", 4 * GIB },      { "12.5%", GIB },
		{ "100%", 8 * GIB },    { "10%", 858993459ULL }, { "1.5GiB", 3 * GIB / 2 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		conf_reset();
		env("CKPTCACHE_HOST_CACHE", t[i].value);
		cr_expect_eq(load(), 0, "'%s'", t[i].value);
		cr_expect_eq(nmsgs, 0, "'%s'", t[i].value);
		cr_expect_eq(cfg.host_cache, t[i].bytes, "'%s': %llu", t[i].value,
			     (unsigned long long)cfg.host_cache);
	}
}

Test(conf, host_cache_percent_follows_memory)
{
	sys.mem_total = 96 * GIB;
	env("CKPTCACHE_HOST_CACHE", "25%");
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.host_cache, 24 * GIB);
}

Test(conf, host_cache_larger_than_machine)
{
	const char *why = "larger than this machine's memory (8 GiB)";
	expect_single_error("CKPTCACHE_HOST_CACHE", "9G", why);
	expect_single_error("CKPTCACHE_HOST_CACHE", "8589934593", why);
	expect_single_error("CKPTCACHE_HOST_CACHE", "1T", why);
	sys.mem_total = 8 * GIB + 512 * MIB;
	expect_single_error("CKPTCACHE_HOST_CACHE", "9G", "larger than this machine's memory (8.5 GiB)");
}

Test(conf, bad_host_cache)
{
	check_bad_sizes("CKPTCACHE_HOST_CACHE");
}

/* ---- SSD_DIR / SSD_CACHE ------------------------------------------------------ */

Test(conf, ssd_neither_set_is_off_with_tmpdir)
{
	env("TMPDIR", "/local/scratch");
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.ssd_cache, 0);
	cr_expect_str_eq(cfg.ssd_dir, "/local/scratch");
	cr_expect_eq(fake_calls, 0);

	conf_reset();
	env("TMPDIR", " ");
	cr_assert_eq(load(), 0);
	cr_expect_str_eq(cfg.ssd_dir, "/tmp");
}

Test(conf, ssd_cache_only_uses_tmpdir)
{
	make_tmpdir();
	env("TMPDIR", tmpdir);
	env("CKPTCACHE_SSD_CACHE", "10G");
	cr_assert_eq(load(), 0);
	cr_expect_eq(nmsgs, 0);
	cr_expect_str_eq(cfg.ssd_dir, tmpdir);
	cr_expect_eq(cfg.ssd_cache, 10 * GIB);
	cr_expect_str_eq(fake_last_dir, tmpdir);
}

Test(conf, ssd_cache_only_defaults_to_slash_tmp)
{
	env("CKPTCACHE_SSD_CACHE", "1G");
	cr_assert_eq(load(), 0);
	cr_expect_str_eq(cfg.ssd_dir, "/tmp");
	cr_expect_eq(cfg.ssd_cache, GIB);
}

Test(conf, ssd_default_size_formula)
{
	static const struct {
		uint64_t avail;
		const char *local;
		uint64_t want;
	} t[] = {
		{ 100 * GIB, NULL, 25 * GIB },    { 100 * GIB, "8", 3355443200ULL },
		{ 1 * TIB, NULL, 64 * GIB },      { 1 * TIB, "2", 64 * GIB },
		{ 1 * TIB, "8", 32 * GIB },       { 100000, NULL, 25000 },
		/* below the smallest tier: none, without an error */
		{ 1000, NULL, 0 },                { 3, NULL, 0 },
	};
	make_tmpdir();
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		conf_reset();
		fake_avail = t[i].avail;
		env("CKPTCACHE_SSD_DIR", tmpdir);
		if (t[i].local)
			env("SLURM_NTASKS_PER_NODE", t[i].local);
		cr_expect_eq(load(), 0, "case %zu", i);
		cr_expect_eq(nmsgs, 0, "case %zu", i);
		cr_expect_eq(cfg.ssd_cache, t[i].want, "case %zu: %llu", i,
			     (unsigned long long)cfg.ssd_cache);
		cr_expect_str_eq(cfg.ssd_dir, tmpdir);
	}
}

Test(conf, ssd_cache_values)
{
	static const struct {
		const char *value;
		uint64_t want;
	} t[] = {
		{ "10%", 10 * GIB },   { "12.5%", 12 * GIB + 512 * MIB }, { "100%", 100 * GIB },
		{ "0%", 0 },           { "0", 0 },                        { "100G", 100 * GIB },
		{ " 64g ", 64 * GIB }, { "4096M", 4 * GIB },
	};
	make_tmpdir();
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		conf_reset();
		env("CKPTCACHE_SSD_DIR", tmpdir);
		env("CKPTCACHE_SSD_CACHE", t[i].value);
		cr_expect_eq(load(), 0, "'%s'", t[i].value);
		cr_expect_eq(nmsgs, 0, "'%s'", t[i].value);
		cr_expect_eq(cfg.ssd_cache, t[i].want, "'%s': %llu", t[i].value,
			     (unsigned long long)cfg.ssd_cache);
	}
}

Test(conf, ssd_cache_larger_than_available)
{
	char why[PATH_MAX + 100];
	make_tmpdir();
	snprintf(why, sizeof(why), "larger than the space available in '%s' (100 GiB)", tmpdir);
	conf_reset();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_SSD_CACHE", "101G");
	cr_assert_eq(load(), 1);
	cr_assert_eq(nmsgs, 2);
	char want[PATH_MAX + 200];
	snprintf(want, sizeof(want), "ckptcache: error: CKPTCACHE_SSD_CACHE='101G': %s", why);
	cr_expect_str_eq(msgs[0].text, want);
	cr_expect_str_eq(msgs[1].text, FINAL_DISABLED);
	cr_expect_not(cfg.enabled);
}

Test(conf, bad_ssd_cache)
{
	check_bad_sizes("CKPTCACHE_SSD_CACHE");
}

Test(conf, ssd_tmpfs_default_is_off_with_info)
{
	fake_in_memory = true;
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_LOG", "info");
	cr_assert_eq(load(), 0);
	cr_expect(cfg.enabled);
	cr_expect_eq(cfg.ssd_cache, 0);
	cr_expect_str_eq(cfg.ssd_dir, tmpdir);
	cr_assert_eq(nmsgs, 1);
	cr_expect_eq(msgs[0].level, CKC_LOG_INFO);
	char want[PATH_MAX + 200];
	snprintf(want, sizeof(want),
		 "ckptcache: info: CKPTCACHE_SSD_DIR='%s' is on a memory-backed file system "
		 "(tmpfs or ramfs): the ssd tier is off (set CKPTCACHE_SSD_CACHE to use it anyway)",
		 tmpdir);
	cr_expect_str_eq(msgs[0].text, want);
}

Test(conf, ssd_tmpfs_default_at_warn_is_silent)
{
	fake_in_memory = true;
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.ssd_cache, 0);
	cr_expect_eq(nmsgs, 0);
}

Test(conf, ssd_tmpfs_explicit_size_is_kept)
{
	fake_in_memory = true;
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_SSD_CACHE", "2G");
	env("CKPTCACHE_LOG", "debug");
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.ssd_cache, 2 * GIB);
	cr_expect_eq(nmsgs, 0);
}

Test(conf, ssd_tmpfs_missing_dir_not_created)
{
	fake_in_memory = true;
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", under("a/b"));
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.ssd_cache, 0);
	struct stat st;
	cr_expect_neq(stat(under("a"), &st), 0, "a tier that is off creates nothing");
}

Test(conf, ssd_zero_size_dir_not_created)
{
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", under("x"));
	env("CKPTCACHE_SSD_CACHE", "0");
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.ssd_cache, 0);
	struct stat st;
	cr_expect_neq(stat(under("x"), &st), 0);
}

Test(conf, ssd_dir_created_mode_0700)
{
	mode_t old = umask(022);
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", under("job42"));
	env("CKPTCACHE_SSD_CACHE", "1G");
	int rc = load();
	umask(old);
	cr_assert_eq(rc, 0);
	cr_expect_eq(cfg.ssd_cache, GIB);
	struct stat st;
	cr_assert_eq(stat(under("job42"), &st), 0, "not created");
	cr_expect(S_ISDIR(st.st_mode));
	cr_expect_eq(st.st_mode & 07777, 0700, "mode %o", st.st_mode & 07777);
	/* said, not silent */
	cr_assert_eq(nmsgs, 1);
	cr_expect_eq(msgs[0].level, CKC_LOG_WARN);
	cr_expect_not_null(strstr(msgs[0].text, "did not exist: created it"), "%s", msgs[0].text);
}

Test(conf, ssd_dir_typo_makes_no_folders)
{
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", under("scartch/job42/ssd"));
	env("CKPTCACHE_SSD_CACHE", "1G");
	cr_assert_eq(load(), 1);
	cr_expect_not(cfg.enabled);
	cr_assert_geq(nmsgs, 1);
	cr_expect_not_null(strstr(msgs[0].text, "CKPTCACHE_SSD_DIR="), "%s", msgs[0].text);
	cr_expect_not_null(strstr(msgs[0].text, "no such folder, nor its parent"), "%s", msgs[0].text);
	struct stat st;
	cr_expect_neq(stat(under("scartch"), &st), 0, "a folder was made from a mistyped name");
}

Test(conf, ssd_missing_dir_default_uses_ancestor_facts)
{
	make_tmpdir();
	fake_avail = 40 * GIB;
	env("CKPTCACHE_SSD_DIR", under("new/"));
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.ssd_cache, 10 * GIB);
	cr_expect_str_eq(fake_last_dir, tmpdir, "facts from the nearest existing ancestor");
	struct stat st;
	cr_expect_eq(stat(under("new"), &st), 0);
}

static void expect_dir_error(const char *dir, const char *reason)
{
	char want[PATH_MAX + 200];
	cr_assert_eq(load(), 1, "%s", dir);
	cr_expect_not(cfg.enabled);
	cr_assert_eq(nmsgs, 2);
	snprintf(want, sizeof(want),
		 "ckptcache: error: CKPTCACHE_SSD_DIR='%s': not a writable directory (%s)", dir,
		 reason);
	cr_expect_str_eq(msgs[0].text, want);
	cr_expect_str_eq(msgs[1].text, FINAL_DISABLED);
}

Test(conf, ssd_dir_unwritable)
{
	make_tmpdir();
	if (geteuid() == 0) {
		/* access() ignores permission bits for root: a path under a
		 * regular file can never be created, by anyone. */
		make_file(under("file"));
		env("CKPTCACHE_SSD_DIR", under("file/sub"));
		env("CKPTCACHE_SSD_CACHE", "1G");
		expect_dir_error(under("file/sub"), strerror(ENOTDIR));
	} else {
		cr_assert_eq(mkdir(under("ro"), 0500), 0);
		env("CKPTCACHE_SSD_DIR", under("ro"));
		env("CKPTCACHE_SSD_CACHE", "1G");
		expect_dir_error(under("ro"), strerror(EACCES));
		chmod(under("ro"), 0700);
	}
}

Test(conf, ssd_dir_under_a_file)
{
	make_tmpdir();
	make_file(under("file"));
	env("CKPTCACHE_SSD_DIR", under("file/a/b"));
	env("CKPTCACHE_SSD_CACHE", "10%");
	expect_dir_error(under("file/a/b"), strerror(ENOTDIR));
}

Test(conf, ssd_dir_default_size_under_a_file)
{
	make_tmpdir();
	make_file(under("file"));
	env("CKPTCACHE_SSD_DIR", under("file/sub"));
	expect_dir_error(under("file/sub"), strerror(ENOTDIR));
}

Test(conf, ssd_dir_is_a_file)
{
	make_tmpdir();
	make_file(under("file"));
	env("CKPTCACHE_SSD_DIR", under("file"));
	env("CKPTCACHE_SSD_CACHE", "1G");
	expect_dir_error(under("file"), strerror(ENOTDIR));
}

Test(conf, ssd_fs_info_failure)
{
	make_tmpdir();
	fake_rc = -EIO;
	env("CKPTCACHE_SSD_DIR", tmpdir);
	expect_dir_error(tmpdir, strerror(EIO));

	conf_reset();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_SSD_CACHE", "25%");
	expect_dir_error(tmpdir, strerror(EIO));

	/* A byte size does not need the facts; the directory itself is fine. */
	conf_reset();
	env("CKPTCACHE_SSD_DIR", tmpdir);
	env("CKPTCACHE_SSD_CACHE", "3G");
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.ssd_cache, 3 * GIB);
}

Test(conf, ssd_unwritable_tmpdir_names_ssd_cache)
{
	char want[PATH_MAX + 200];
	make_tmpdir();
	make_file(under("file"));
	env("TMPDIR", under("file/sub"));
	env("CKPTCACHE_SSD_CACHE", "1G");
	cr_assert_eq(load(), 1);
	cr_assert_eq(nmsgs, 2);
	snprintf(want, sizeof(want),
		 "ckptcache: error: CKPTCACHE_SSD_CACHE='1G': '%s' (the default, as "
		 "CKPTCACHE_SSD_DIR is unset) is not a writable directory (%s)",
		 under("file/sub"), strerror(ENOTDIR));
	cr_expect_str_eq(msgs[0].text, want);
	cr_expect_str_eq(msgs[1].text, FINAL_DISABLED);
}

Test(conf, ssd_bad_size_skips_dir_check)
{
	make_tmpdir();
	env("CKPTCACHE_SSD_DIR", under("never"));
	env("CKPTCACHE_SSD_CACHE", "lots");
	cr_assert_eq(load(), 1);
	struct stat st;
	cr_expect_neq(stat(under("never"), &st), 0);
}

/* ---- rank and local size ----------------------------------------------------- */

Test(conf, rank_precedence)
{
	static const struct {
		const char *ompi, *pmi, *slurm, *pmix;
		long want;
	} t[] = {
		{ NULL, NULL, NULL, NULL, 0 },
		{ "7", "8", "9", "10", 7 },
		{ NULL, "8", "9", "10", 8 },
		{ NULL, NULL, "9", "10", 9 },
		{ NULL, NULL, NULL, "10", 10 },
		{ "abc", "8", NULL, NULL, 8 },
		{ "-1", NULL, "9", NULL, 9 },
		{ "", NULL, NULL, "10", 10 },
		{ "3x", "4.0", "+5", "6", 6 },
		{ "99999999999999999999999", NULL, NULL, NULL, 0 },
		{ " 12 ", NULL, NULL, NULL, 12 },
		{ "0", "8", NULL, NULL, 0 },
		{ "x", "y", "z", "w", 0 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		conf_reset();
		if (t[i].ompi)
			env("OMPI_COMM_WORLD_RANK", t[i].ompi);
		if (t[i].pmi)
			env("PMI_RANK", t[i].pmi);
		if (t[i].slurm)
			env("SLURM_PROCID", t[i].slurm);
		if (t[i].pmix)
			env("PMIX_RANK", t[i].pmix);
		cr_expect_eq(ckc_config_rank(conf_get, &conf_env), t[i].want, "case %zu", i);
		cr_expect_eq(load(), 0, "case %zu", i);
		cr_expect_eq(cfg.rank, t[i].want, "case %zu: %ld", i, cfg.rank);
		cr_expect_eq(nmsgs, 0, "case %zu", i);
	}
}

Test(conf, local_size_precedence)
{
	static const struct {
		const char *ompi, *mpich, *slurm;
		long want;
	} t[] = {
		{ NULL, NULL, NULL, 1 },
		{ "4", "5", "6", 4 },
		{ NULL, "5", "6", 5 },
		{ NULL, NULL, "6", 6 },
		{ NULL, NULL, "4(x2)", 4 },
		{ NULL, NULL, "12,8", 12 },
		{ "4(x2)", "5", NULL, 5 },
		{ "0", "x", "3", 3 },
		{ "-2", NULL, NULL, 1 },
		{ NULL, NULL, "(x2)", 1 },
		{ NULL, NULL, "0(x2)", 1 },
		{ "99999999999999999999999", NULL, "2", 2 },
		{ " 16\n", NULL, NULL, 16 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		conf_reset();
		if (t[i].ompi)
			env("OMPI_COMM_WORLD_LOCAL_SIZE", t[i].ompi);
		if (t[i].mpich)
			env("MPI_LOCALNRANKS", t[i].mpich);
		if (t[i].slurm)
			env("SLURM_NTASKS_PER_NODE", t[i].slurm);
		cr_expect_eq(load(), 0, "case %zu", i);
		cr_expect_eq(cfg.local_size, t[i].want, "case %zu: %ld", i, cfg.local_size);
		cr_expect_eq(nmsgs, 0, "case %zu", i);
	}
}

Test(conf, rank_and_local_size_filled_when_disabled)
{
	conf_nenv = 0;
	env("PMI_RANK", "3");
	env("MPI_LOCALNRANKS", "2");
	cr_assert_eq(load(), 0);
	cr_expect_not(cfg.enabled);
	cr_expect_eq(cfg.rank, 3);
	cr_expect_eq(cfg.local_size, 2);
}

/* ---- ckc_parse_size ----------------------------------------------------------- */

Test(conf, parse_size_table)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t bytes;
		double pct;
	} t[] = {
		{ "0", 0, 0, -1 },
		{ "100", 0, 100, -1 },
		{ "512M", 0, 512 * MIB, -1 },
		{ "512m", 0, 512 * MIB, -1 },
		{ "1K", 0, 1024, -1 },
		{ "1kb", 0, 1024, -1 },
		{ "1KiB", 0, 1024, -1 },
		{ "4G", 0, 4 * GIB, -1 },
		{ "4g", 0, 4 * GIB, -1 },
		{ "4GiB", 0, 4 * GIB, -1 },
		{ "4gib", 0, 4 * GIB, -1 },
		{ "4GB", 0, 4 * GIB, -1 },
		{ "4gB", 0, 4 * GIB, -1 },
		{ "2T", 0, 2 * TIB, -1 },
		{ "2TiB", 0, 2 * TIB, -1 },
		{ "1.5G", 0, 1610612736ULL, -1 },
		{ "1.5K", 0, 1536, -1 },
		{ "0.1K", 0, 102, -1 },
		{ "0.001K", 0, 1, -1 },
		{ "0.0001K", 0, 0, -1 },
		{ "1.0000000001K", 0, 1024, -1 },
		{ "0.99999999999999999999999999999999999999999999999999T", 0, TIB - 1, -1 },
		{ "0.5T", 0, TIB / 2, -1 },
		{ "007M", 0, 7 * MIB, -1 },
		{ "10%", 0, 0, 10 },
		{ "12.5%", 0, 0, 12.5 },
		{ "0%", 0, 0, 0 },
		{ "100%", 0, 0, 100 },
		{ "100.0%", 0, 0, 100 },
		{ "0.25%", 0, 0, 0.25 },
		{ "18446744073709551615", 0, UINT64_MAX, -1 },
		{ "16777215T", 0, UINT64_MAX - TIB + 1, -1 },
		{ "17179869183G", 0, UINT64_MAX - GIB + 1, -1 },
		{ "18446744073709551616", -ERANGE, 0, 0 },
		{ "99999999999999999999999999", -ERANGE, 0, 0 },
		{ "16777216T", -ERANGE, 0, 0 },
		{ "17179869184G", -ERANGE, 0, 0 },
		{ "16777216.5T", -ERANGE, 0, 0 },
		{ "", -EINVAL, 0, 0 },
		{ "-1", -EINVAL, 0, 0 },
		{ "+1", -EINVAL, 0, 0 },
		{ "1X", -EINVAL, 0, 0 },
		{ "G", -EINVAL, 0, 0 },
		{ "%", -EINVAL, 0, 0 },
		{ "101%", -EINVAL, 0, 0 },
		{ "100.01%", -EINVAL, 0, 0 },
		{ "99999999999999999999999%", -EINVAL, 0, 0 },
		{ "1e9", -EINVAL, 0, 0 },
		{ "1.5", -EINVAL, 0, 0 },
		{ "1.G", -EINVAL, 0, 0 },
		{ ".5G", -EINVAL, 0, 0 },
		{ "1..5G", -EINVAL, 0, 0 },
		{ "1.5.G", -EINVAL, 0, 0 },
		{ "4GiBx", -EINVAL, 0, 0 },
		{ "4GG", -EINVAL, 0, 0 },
		{ "4iB", -EINVAL, 0, 0 },
		{ "4Bi", -EINVAL, 0, 0 },
		{ "4B", -EINVAL, 0, 0 },
		{ "4 G", -EINVAL, 0, 0 },
		{ " 4G", -EINVAL, 0, 0 },
		{ "4G ", -EINVAL, 0, 0 },
		{ "0x10", -EINVAL, 0, 0 },
		{ "10%%", -EINVAL, 0, 0 },
		{ "%10", -EINVAL, 0, 0 },
		{ "10 %", -EINVAL, 0, 0 },
		{ "10%G", -EINVAL, 0, 0 },
		{ "4P", -EINVAL, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t bytes = 12345;
		double pct = -7;
		int rc = ckc_parse_size(t[i].s, &bytes, &pct);
		cr_expect_eq(rc, t[i].rc, "'%s': rc %d, want %d", t[i].s, rc, t[i].rc);
		if (rc == 0 && t[i].rc == 0) {
			cr_expect_eq(bytes, t[i].bytes, "'%s': %llu", t[i].s, (unsigned long long)bytes);
			cr_expect_eq(pct, t[i].pct, "'%s': pct %g", t[i].s, pct);
		}
	}
	cr_expect_eq(nmsgs, 0, "ckc_parse_size reports nothing itself");
}

Test(conf, parse_size_null_and_optional_outputs)
{
	uint64_t bytes = 1;
	double pct = 1;
	cr_expect_eq(ckc_parse_size(NULL, &bytes, &pct), -EINVAL);
	cr_expect_eq(ckc_parse_size("10%", &bytes, NULL), -EINVAL, "no room for a percentage");
	cr_expect_eq(ckc_parse_size("2K", &bytes, NULL), 0);
	cr_expect_eq(bytes, 2048);
	cr_expect_eq(ckc_parse_size("30%", NULL, &pct), 0);
	cr_expect_eq(pct, 30);
	cr_expect_eq(ckc_parse_size("1x", &bytes, &pct), -EINVAL);
	cr_expect_eq(bytes, 2048, "outputs untouched on failure");
	cr_expect_eq(pct, 30);
}

/* ---- the real machine ----------------------------------------------------------- */

Test(conf, sysinfo_default_memory_and_fs)
{
	ckc_sysinfo_t real;
	ckc_sysinfo_default(&real);
	uint64_t want = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
	cr_expect_eq(real.mem_total, want);
	cr_expect_gt(real.mem_total, 0);
	cr_assert_not_null(real.fs_info);

	uint64_t avail = 0;
	bool in_memory = true;
	make_tmpdir();
	cr_assert_eq(real.fs_info(tmpdir, &avail, &in_memory), 0);
	struct statvfs v;
	cr_assert_eq(statvfs(tmpdir, &v), 0);
	uint64_t sv = (uint64_t)v.f_bavail * v.f_frsize;
	/* other processes may write meanwhile: allow 1 GiB of drift */
	cr_expect(avail + GIB >= sv && sv + GIB >= avail, "avail %llu vs statvfs %llu",
		  (unsigned long long)avail, (unsigned long long)sv);

	cr_expect_eq(real.fs_info(under("missing/dir"), &avail, &in_memory), -ENOENT);
	cr_expect_eq(real.fs_info("/proc", &avail, &in_memory), 0);
	cr_expect_not(in_memory, "procfs is not tmpfs/ramfs");
}

Test(conf, sysinfo_default_detects_tmpfs)
{
	char line[4096], dev[256], dir[1024], type[64];
	bool found = false;
	FILE *m = fopen("/proc/self/mounts", "r");
	if (!m)
		cr_skip_test("no /proc/self/mounts");
	while (fgets(line, sizeof(line), m)) {
		if (sscanf(line, "%255s %1023s %63s", dev, dir, type) == 3 &&
		    strcmp(type, "tmpfs") == 0 && access(dir, R_OK) == 0) {
			found = true;
			break;
		}
	}
	fclose(m);
	if (!found)
		cr_skip_test("no tmpfs mounted");
	ckc_sysinfo_t real;
	ckc_sysinfo_default(&real);
	uint64_t avail;
	bool in_memory = false;
	cr_assert_eq(real.fs_info(dir, &avail, &in_memory), 0, "%s", dir);
	cr_expect(in_memory, "%s is tmpfs", dir);
}

static const char *real_getenv(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

Test(conf, from_env_matches_load_with_getenv)
{
	ckc_config_t a = { 0 }, b = { 0 };
	ckc_sysinfo_t real;
	ckc_sysinfo_default(&real);
	int ra = ckc_config_from_env(&a);
	int rb = ckc_config_load(&b, real_getenv, NULL, &real);
	cr_expect_eq(ra, rb);
	cr_expect_eq(a.enabled, b.enabled);
	cr_expect_eq(a.host_cache, b.host_cache);
	cr_expect_eq(a.rank, b.rank);
	cr_expect_eq(a.local_size, b.local_size);
	cr_expect_eq(a.paths == NULL, b.paths == NULL);
	if (a.paths && b.paths)
		cr_expect_str_eq(a.paths, b.paths);
	if (!getenv("CKPTCACHE_PATHS") || !*getenv("CKPTCACHE_PATHS")) {
		cr_expect_not(a.enabled);
		cr_expect_eq(ra, 0);
	}
	ckc_config_free(&a);
	ckc_config_free(&b);
}

Test(conf, free_is_safe_on_zeroed_and_twice)
{
	ckc_config_t z = { 0 };
	ckc_config_free(&z);
	env("CKPTCACHE_HINTS", "/h");
	env("CKPTCACHE_STATS", "/s");
	cr_assert_eq(load(), 0);
	ckc_config_free(&cfg);
	cr_expect_null(cfg.paths);
	cr_expect_null(cfg.hints);
	cr_expect_null(cfg.stats);
	cr_expect_null(cfg.ssd_dir);
	cr_expect_null(cfg.rescue_dir);
	ckc_config_free(&cfg);
}

Test(conf, load_zeroes_the_struct_first)
{
	memset(&cfg, 0xff, sizeof(cfg));
	cfg.paths = cfg.hints = cfg.ssd_dir = cfg.rescue_dir = cfg.stats = cfg.trace = NULL;
	cr_assert_eq(load(), 0);
	cr_expect_null(cfg.hints);
	cr_expect_null(cfg.stats);
	cr_expect_null(cfg.trace);
	cr_expect_not(cfg.strict);
	cr_expect_eq(cfg.order, CKC_ORDER_NONE);
}

/* ---- the engine started from the environment --------------------------- */

#include <signal.h>

#include "ckc.h"

Test(conf_env, engine_starts_from_the_environment)
{
	char dir[] = "/tmp/ckc-env-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	setenv("CKPTCACHE_PATHS", "/tmp/*", 1);
	setenv("CKPTCACHE_HOST_CACHE", "8M", 1);
	setenv("CKPTCACHE_SSD_DIR", dir, 1);
	setenv("CKPTCACHE_SSD_CACHE", "0", 1);
	cr_assert_eq(ckc_init(), 0);
	cr_assert(ckc_active());
	cr_assert_eq(ckc_init(), 0, "a second start is a no-op");
	ckc_shutdown();
	cr_assert_not(ckc_active());
	rmdir(dir);
}

Test(conf_env, no_paths_means_nothing_happens)
{
	unsetenv("CKPTCACHE_PATHS");
	cr_assert_eq(ckc_init(), 1);
	cr_assert_not(ckc_active());
}

Test(conf_env, bad_value_disables_the_cache)
{
	setenv("CKPTCACHE_PATHS", "/tmp/*", 1);
	setenv("CKPTCACHE_ORDER", "backwards", 1);
	unsetenv("CKPTCACHE_STRICT");
	cr_assert_eq(ckc_init(), 1);
	cr_assert_not(ckc_active());
}

Test(conf_env, strict_aborts_on_a_bad_value, .signal = SIGABRT)
{
	setenv("CKPTCACHE_PATHS", "/tmp/*", 1);
	setenv("CKPTCACHE_ORDER", "backwards", 1);
	setenv("CKPTCACHE_STRICT", "1", 1);
	ckc_init();
}

Test(conf_env, strict_aborts_when_a_tier_fails, .signal = SIGABRT)
{
	setenv("CKPTCACHE_PATHS", "/tmp/*", 1);
	setenv("CKPTCACHE_STRICT", "1", 1);
	ckc_config_t c;
	memset(&c, 0, sizeof(c));
	c.enabled = true;
	c.strict = true;
	c.ssd_cache = 1 << 20;
	c.ssd_dir = "/proc/none"; /* cannot hold the ssd file */
	ckc_init_config(&c);
}

Test(conf, lanes_auto_or_a_number_of_threads)
{
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.lanes, 0, "unset: chosen by the CPUs");
	const char *good[] = { "auto", " AUTO ", "1", "4", "8" };
	const int want[] = { 0, 0, 1, 4, 8 };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		conf_reset();
		env("CKPTCACHE_LANES", good[i]);
		cr_expect_eq(load(), 0, "CKPTCACHE_LANES='%s'", good[i]);
		cr_expect_eq(cfg.lanes, want[i], "CKPTCACHE_LANES='%s'", good[i]);
	}
	const char *bad[] = { "0", "9", "-1", "2x", "many" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		conf_reset();
		env("CKPTCACHE_LANES", bad[i]);
		cr_expect_eq(load(), 1, "CKPTCACHE_LANES='%s' is refused", bad[i]);
		cr_expect(!cfg.enabled);
	}
}

/* ---- CKPTCACHE_PEER and the job's names ---------------------------------- */

static int f_peer(const ckc_config_t *c) { return (int)c->peer; }

Test(conf, peer_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_PEER", "off", f_peer, CKC_PEER_OFF },
		{ "CKPTCACHE_PEER", " Greedy ", f_peer, CKC_PEER_GREEDY },
		{ "CKPTCACHE_PEER", "maxflow", f_peer, CKC_PEER_MAXFLOW },
		{ "CKPTCACHE_PEER", "MAXFLOW\t", f_peer, CKC_PEER_MAXFLOW },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
	conf_reset();
	cr_assert_eq(load(), 0);
	cr_expect_eq(cfg.peer, CKC_PEER_AUTO, "unset: decided by the machine");
	cr_expect_str_eq(ckc_config_peer_name(CKC_PEER_AUTO), "auto");
	cr_expect_str_eq(ckc_config_peer_name(CKC_PEER_GREEDY), "greedy");
}

Test(conf, bad_peer)
{
	const char *why = "unknown value (expected off, greedy or maxflow)";
	expect_single_error("CKPTCACHE_PEER", "on", why);
	expect_single_error("CKPTCACHE_PEER", "auto", why);
}

Test(conf, the_job_and_local_rank_name_the_peer_segment)
{
	conf_reset();
	env("SLURM_JOB_ID", "4242");
	env("SLURM_STEP_ID", "3");
	env("SLURM_NODEID", "7");
	env("SLURM_LOCALID", "2");
	cr_assert_eq(load(), 0);
	cr_expect_str_eq(cfg.job, "slurm4242.3");
	cr_expect_str_eq(cfg.node, "n7");
	cr_expect_eq(cfg.local_rank, 2);

	conf_reset();
	env("OMPI_MCA_ess_base_jobid", "1234/5");
	env("OMPI_COMM_WORLD_LOCAL_RANK", "1");
	cr_assert_eq(load(), 0);
	cr_expect_str_eq(cfg.job, "ompi1234_5", "no '/' in a file name");
	cr_expect_eq(cfg.local_rank, 1);
	cr_expect(cfg.node[0], "the host name when Slurm gives no node number");
	char host[256] = "";
	cr_assert_eq(gethostname(host, sizeof(host) - 1), 0);
	if (strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") == strlen(host) &&
	    strlen(host) < sizeof(cfg.node))
		cr_expect_str_eq(cfg.node, host, "the node's name is the host's");

	conf_reset();
	env("SLURM_JOB_ID", "x12");
	env("SLURM_LOCALID", "-1");
	cr_assert_eq(load(), 0);
	cr_expect_str_eq(cfg.job, "", "not a job id");
	cr_expect_eq(cfg.local_rank, -1);
}

static int f_aside(const ckc_config_t *c) { return (int)c->step_aside; }

Test(conf, step_aside_words)
{
	static const struct word_case t[] = {
		{ "CKPTCACHE_STEP_ASIDE", "off", f_aside, 0 },
		{ "CKPTCACHE_STEP_ASIDE", " OFF ", f_aside, 0 },
		{ "CKPTCACHE_STEP_ASIDE", "auto", f_aside, 1 },
		{ "CKPTCACHE_STEP_ASIDE", "Auto\t", f_aside, 1 },
	};
	check_words(t, sizeof(t) / sizeof(t[0]));
	conf_reset();
	cr_assert_eq(load(), 0);
	cr_expect(cfg.step_aside, "unset: auto");
	conf_reset();
	env("CKPTCACHE_STEP_ASIDE", "  ");
	cr_assert_eq(load(), 0);
	cr_expect(cfg.step_aside, "blank: auto");
}

Test(conf, bad_step_aside)
{
	const char *why = "unknown value (expected auto or off)";
	expect_single_error("CKPTCACHE_STEP_ASIDE", "on", why);
	expect_single_error("CKPTCACHE_STEP_ASIDE", "never", why);
}
