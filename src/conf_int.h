/* What the parts of the configuration loader share (conf.c, conf_tiers.c):
 * the loader's state and the helpers that read and check one variable. */
#ifndef CKC_CONF_INT_H
#define CKC_CONF_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "conf.h"

#define CONFIG_MIB (1024ULL * 1024)
#define CONFIG_GIB (1024ULL * CONFIG_MIB)

typedef const char *(*config_get_fn)(const char *name, void *ctx);

typedef struct config_loader {
	ckc_config_t *c;
	config_get_fn get;
	void *ctx;
	const ckc_sysinfo_t *sys;
	int errors;
} config_loader_t;

/* ---- conf.c ---- */

/* The variable's value; set-but-blank counts as unset (NULL). */
const char *config_value(config_loader_t *ld, const char *name);
/* A copy of s; NULL (an error counted) when out of memory. */
char *config_strdup(config_loader_t *ld, const char *s);
/* Parses a size variable (*pct < 0 when it is bytes); on a bad value
 * reports it and returns false. */
bool config_size(config_loader_t *ld, const char *name, const char *raw, uint64_t *bytes,
		 double *pct);
/* pct percent of total. */
uint64_t config_pct_of(uint64_t total, double pct);

/* ---- conf_tiers.c ---- */

/* CKPTCACHE_HOST_CACHE, or the default for this machine and node. */
void config_host(config_loader_t *ld);
/* CKPTCACHE_SSD_DIR and CKPTCACHE_SSD_CACHE. */
void config_ssd(config_loader_t *ld);
/* 0 when dir is (or has just been made, if create) a writable directory,
 * else the errno that explains why not. */
int config_usable_dir(const char *dir, bool create, bool no_mkdir);

#endif
