/* One formatted line per message, written with a single write(2) so lines
 * from several threads never interleave, and never through stdio. */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include "sys.h"

CKC_HOT_DATA int ckc_log_threshold = CKC_LOG_WARN;
CKC_HOT_DATA void (*ckc_log_sink)(int level, const char *msg);

static const char *const level_name[] = { "error", "warning", "info", "debug" };

void ckc_log(int level, const char *fmt, ...)
{
	if (level > ckc_log_threshold)
		return;
	int saved = errno;
	char line[1024];
	int n = snprintf(line, sizeof(line), "ckptcache: %s: ", level_name[level]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	if (ckc_log_sink) {
		line[len] = '\0';
		ckc_log_sink(level, line);
	} else {
		line[len++] = '\n';
		ssize_t w = sys_write(STDERR_FILENO, line, len);
		(void)w;
	}
	errno = saved;
}
