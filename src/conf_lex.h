/* The lexical pieces of a CKPTCACHE_* value that the configuration loader
 * (conf.c) and the size syntax (size.c) share. */
#ifndef CKC_CONF_LEX_H
#define CKC_CONF_LEX_H

#include <stdbool.h>
#include <string.h>

static inline bool config_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

static inline bool config_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static inline char config_lower(char ch)
{
	return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

/* The value without surrounding whitespace, as a span: a fixed buffer could
 * truncate a long value into one that happens to be valid. */
static inline void config_span(const char *s, const char **start, size_t *len)
{
	while (config_space(*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && config_space(s[n - 1]))
		n--;
	*start = s;
	*len = n;
}

#endif
