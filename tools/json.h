/* A small JSON reader for the tools (the statistics file that
 * CKPTCACHE_STATS writes): the whole text parsed into a tree of values,
 * objects keeping their members in order. */
#ifndef CKC_JSON_H
#define CKC_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ } json_type_t;

typedef struct json {
	json_type_t type;
	bool b;
	double num;
	char *str;          /* JSON_STR */
	size_t n;           /* members of an array or an object */
	struct json *items; /* their values */
	char **keys;        /* an object's keys, in order */
} json_t;

/* Parses text (NUL-terminated) into *out. Returns 0, or -1 with a message
 * naming the byte where it failed in err. */
int json_parse(const char *text, json_t *out, char *err, size_t errlen);
void json_free(json_t *v);

/* The member of object v named key, or NULL (also when v is not an
 * object). */
const json_t *json_get(const json_t *v, const char *key);

/* The number at key in object v (a boolean counts 0 or 1), or 0 when it
 * is missing or of another kind. */
double json_num(const json_t *v, const char *key);

#endif
