/* What the parts of ckptcache doctor share: the three kinds of finding it
 * prints, the environment as the library's loader reads it, and the
 * checkpoint path patterns it resolved (doctor.c owns the output, the
 * variables and main; doctor_files.c the paths, tiers and leftovers;
 * doctor_order.c the restore order, policies, CUDA, the library and one
 * hint line). */
#ifndef CKC_DOCTOR_H
#define CKC_DOCTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf.h"
#include "memlimit.h"

#define MIB (1024ull * 1024)
#define TEST_BYTES (1 * MIB)
/* Malformed hint lines shown one by one; the rest are only counted. */
#define HINT_REPORT_MAX 20
/* Directory entries looked at when counting existing checkpoints. */
#define SCAN_MAX 100000
#define MAX_PATTERNS 64

/* Findings, one line each; a problem makes the doctor exit 1. */
void ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int problems;

/* Set and not blank: the loader treats a blank value as unset. */
const char *env(const char *name);
/* Nothing but white space (or NULL). */
bool blank(const char *s);

/* The canonical checkpoint path patterns found by check_patterns. */
extern char *patterns[MAX_PATTERNS];
extern int npatterns;

/* doctor_files.c */
void check_patterns(const ckc_config_t *c, dev_t *home_dev);
void check_host(const ckc_config_t *c, const ckc_sysinfo_t *sys);
void check_leftovers(const ckc_config_t *c);
void check_ssd(const ckc_config_t *c, const ckc_sysinfo_t *sys, dev_t home_dev);
void check_output_file(const char *what, const char *var, const char *path);

/* doctor_order.c */
void check_order(const ckc_config_t *c);
void check_policies(const ckc_config_t *c);
void check_cuda(const ckc_config_t *c);
void check_peer(const ckc_config_t *c);
void check_library(const char *lib);
/* Checks one hint-file line with the library's parser (ckptcache hints):
 * the exit status, 0 or 2. */
int hint_line(const char *line);

#endif
