/* ckptcache doctor: checks the CKPTCACHE_* configuration and this machine
 * (tiers, ssd directory, hint file, CUDA, the library to preload) and says
 * what the preloaded library would do; exits 1 when anything is wrong. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "stats_tool.h"
#include "tagpat.h"

extern char **environ;

#include "doctor.h"

int problems;

/* ---- output ---------------------------------------------------------- */

static void vsay(const char *tag, const char *fmt, va_list ap)
{
	printf("%-8s", tag);
	vprintf(fmt, ap);
	putchar('\n');
}

void ok(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("ok", fmt, ap);
	va_end(ap);
}

void warning(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("warning", fmt, ap);
	va_end(ap);
}

void problem(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("problem", fmt, ap);
	va_end(ap);
	problems++;
}

bool blank(const char *s)
{
	for (; s && *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\v' && *s != '\f')
			return false;
	return true;
}

const char *env(const char *name)
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
	"CKPTCACHE_PEER",      "CKPTCACHE_STEP_ASIDE",	"CKPTCACHE_KERNEL_TOUCH",
	"CKPTCACHE_COPY",
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
	check_peer(&c);
	check_library(argc == 2 ? argv[1] : NULL);

	ckc_config_free(&c);
	ckc_tagpat_free();
	for (int i = 0; i < npatterns; i++)
		free(patterns[i]);
	printf("ckptcache doctor: %d problem(s)\n", problems);
	return problems ? 1 : 0;
}

