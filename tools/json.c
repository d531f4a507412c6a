/* A recursive-descent JSON reader (RFC 8259): objects, arrays, strings
 * with their escapes (\uXXXX written as UTF-8, surrogate pairs joined),
 * numbers, true, false, null. Nesting is bounded so that a hostile file
 * cannot exhaust the stack. */
#include "config.h"

#include "json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct jp {
	const char *s, *start;
	char *err;
	size_t errlen;
	int depth;
} jp_t;

static int jp_fail(jp_t *p, const char *what)
{
	if (p->err && p->errlen)
		snprintf(p->err, p->errlen, "%s at byte %zu", what, (size_t)(p->s - p->start));
	return -1;
}

static void jp_space(jp_t *p)
{
	while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
		p->s++;
}

static int jp_value(jp_t *p, json_t *v);

/* Appends the UTF-8 form of code point c to out at *n. */
static void jp_utf8(char *out, size_t *n, uint32_t c)
{
	if (c < 0x80) {
		out[(*n)++] = (char)c;
	} else if (c < 0x800) {
		out[(*n)++] = (char)(0xc0 | c >> 6);
		out[(*n)++] = (char)(0x80 | (c & 0x3f));
	} else if (c < 0x10000) {
		out[(*n)++] = (char)(0xe0 | c >> 12);
		out[(*n)++] = (char)(0x80 | (c >> 6 & 0x3f));
		out[(*n)++] = (char)(0x80 | (c & 0x3f));
	} else {
		out[(*n)++] = (char)(0xf0 | c >> 18);
		out[(*n)++] = (char)(0x80 | (c >> 12 & 0x3f));
		out[(*n)++] = (char)(0x80 | (c >> 6 & 0x3f));
		out[(*n)++] = (char)(0x80 | (c & 0x3f));
	}
}

static int jp_hex4(jp_t *p, uint32_t *c)
{
	*c = 0;
	for (int i = 0; i < 4; i++) {
		char h = p->s[i];
		int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
			h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
		if (d < 0)
			return jp_fail(p, "bad \\u escape");
		*c = *c << 4 | (uint32_t)d;
	}
	p->s += 4;
	return 0;
}

/* A string at p->s (its opening quote); *out gets a copy. */
static int jp_string(jp_t *p, char **out)
{
	const char *q = ++p->s;
	size_t cap = 0;
	/* the decoded string is never longer than the escaped one */
	while (*q && *q != '"') {
		if (*q == '\\' && q[1])
			q++;
		q++;
	}
	if (*q != '"')
		return jp_fail(p, "unterminated string");
	cap = (size_t)(q - p->s) + 1;
	char *s = malloc(cap + 4);
	size_t n = 0;
	if (!s)
		return jp_fail(p, "out of memory");
	while (*p->s != '"') {
		unsigned char ch = (unsigned char)*p->s;
		if (ch < 0x20) {
			free(s);
			return jp_fail(p, "control character in a string");
		}
		if (ch != '\\') {
			s[n++] = (char)ch;
			p->s++;
			continue;
		}
		p->s++;
		char e = *p->s++;
		uint32_t c;
		switch (e) {
		case '"': s[n++] = '"'; break;
		case '\\': s[n++] = '\\'; break;
		case '/': s[n++] = '/'; break;
		case 'b': s[n++] = '\b'; break;
		case 'f': s[n++] = '\f'; break;
		case 'n': s[n++] = '\n'; break;
		case 'r': s[n++] = '\r'; break;
		case 't': s[n++] = '\t'; break;
		case 'u':
			if (jp_hex4(p, &c)) {
				free(s);
				return -1;
			}
			if (c >= 0xd800 && c < 0xdc00 && p->s[0] == '\\' && p->s[1] == 'u') {
				uint32_t lo;
				p->s += 2;
				if (jp_hex4(p, &lo)) {
					free(s);
					return -1;
				}
				if (lo >= 0xdc00 && lo < 0xe000)
					c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
				else
					jp_utf8(s, &n, 0xfffd), c = lo;
			}
			jp_utf8(s, &n, c);
			break;
		default:
			free(s);
			return jp_fail(p, "bad escape in a string");
		}
	}
	p->s++;
	s[n] = '\0';
	*out = s;
	return 0;
}

static int jp_number(jp_t *p, json_t *v)
{
	const char *q = p->s;
	if (*q == '-')
		q++;
	if (*q < '0' || *q > '9')
		return jp_fail(p, "unexpected character");
	char *end;
	v->type = JSON_NUM;
	v->num = strtod(p->s, &end);
	if (end == p->s)
		return jp_fail(p, "bad number");
	p->s = end;
	return 0;
}

/* Grows the members of v by one; returns the new value, or NULL. */
static json_t *jp_push(json_t *v, char *key)
{
	json_t *items = realloc(v->items, (v->n + 1) * sizeof(*items));
	if (!items)
		return NULL;
	v->items = items;
	if (v->type == JSON_OBJ) {
		char **keys = realloc(v->keys, (v->n + 1) * sizeof(*keys));
		if (!keys)
			return NULL;
		v->keys = keys;
		v->keys[v->n] = key;
	}
	memset(&v->items[v->n], 0, sizeof(json_t));
	return &v->items[v->n++];
}

static int jp_members(jp_t *p, json_t *v, char close)
{
	p->s++;
	jp_space(p);
	if (*p->s == close) {
		p->s++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		jp_space(p);
		if (v->type == JSON_OBJ) {
			if (*p->s != '"')
				return jp_fail(p, "expected a key");
			if (jp_string(p, &key))
				return -1;
			jp_space(p);
			if (*p->s != ':') {
				free(key);
				return jp_fail(p, "expected ':'");
			}
			p->s++;
		}
		json_t *m = jp_push(v, key);
		if (!m) {
			free(key);
			return jp_fail(p, "out of memory");
		}
		if (jp_value(p, m))
			return -1;
		jp_space(p);
		if (*p->s == ',') {
			p->s++;
			continue;
		}
		if (*p->s == close) {
			p->s++;
			return 0;
		}
		return jp_fail(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int jp_value(jp_t *p, json_t *v)
{
	memset(v, 0, sizeof(*v));
	jp_space(p);
	switch (*p->s) {
	case '{':
	case '[':
		if (++p->depth > JSON_MAX_DEPTH)
			return jp_fail(p, "nested too deep");
		v->type = *p->s == '{' ? JSON_OBJ : JSON_ARR;
		if (jp_members(p, v, *p->s == '{' ? '}' : ']'))
			return -1;
		p->depth--;
		return 0;
	case '"':
		v->type = JSON_STR;
		return jp_string(p, &v->str);
	case 't':
	case 'f':
	case 'n': {
		static const struct { const char *w; json_type_t t; bool b; } lit[] = {
			{ "true", JSON_BOOL, true }, { "false", JSON_BOOL, false }, { "null", JSON_NULL, false }
		};
		for (size_t i = 0; i < 3; i++)
			if (!strncmp(p->s, lit[i].w, strlen(lit[i].w))) {
				p->s += strlen(lit[i].w);
				v->type = lit[i].t;
				v->b = lit[i].b;
				return 0;
			}
		return jp_fail(p, "unexpected word");
	}
	default:
		return jp_number(p, v);
	}
}

void json_free(json_t *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		json_free(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
	memset(v, 0, sizeof(*v));
}

int json_parse(const char *text, json_t *out, char *err, size_t errlen)
{
	jp_t p = { text, text, err, errlen, 0 };
	if (jp_value(&p, out)) {
		json_free(out);
		return -1;
	}
	jp_space(&p);
	if (*p.s) {
		json_free(out);
		return jp_fail(&p, "text after the value");
	}
	return 0;
}

const json_t *json_get(const json_t *v, const char *key)
{
	if (!v || v->type != JSON_OBJ)
		return NULL;
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->keys[i], key))
			return &v->items[i];
	return NULL;
}

double json_num(const json_t *v, const char *key)
{
	const json_t *m = json_get(v, key);
	return !m ? 0 : m->type == JSON_NUM ? m->num : m->type == JSON_BOOL ? m->b : 0;
}
