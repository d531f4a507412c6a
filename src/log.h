/* Messages to stderr, prefixed "ckptcache:", filtered by CKPTCACHE_LOG. */
#ifndef CKC_LOG_H
#define CKC_LOG_H

typedef enum ckc_log_level {
	CKC_LOG_ERROR = 0,
	CKC_LOG_WARN = 1,
	CKC_LOG_INFO = 2,
	CKC_LOG_DEBUG = 3,
} ckc_log_level_t;

/* Current threshold; messages above it are dropped. Default: warn. */
extern int ckc_log_threshold;

/* Optional sink for tests: when set, every message that passes the threshold
 * is handed to it (with its level) instead of being written to stderr. */
extern void (*ckc_log_sink)(int level, const char *msg);

/* Formats and writes one line; keeps errno. */
void ckc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ckc_error(...) ckc_log(CKC_LOG_ERROR, __VA_ARGS__)
#define ckc_warn(...) ckc_log(CKC_LOG_WARN, __VA_ARGS__)
#define ckc_info(...) ckc_log(CKC_LOG_INFO, __VA_ARGS__)
#define ckc_debug(...) ckc_log(CKC_LOG_DEBUG, __VA_ARGS__)

#endif
