/* Sorted table of owed host ranges: lookup by overlap, insertion and
 * cutting a sub-range out of an entry. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "owedtab.h"
#include "sys.h"

size_t ckc_owedtab_first(const ckc_owedtab_t *t, uintptr_t lo, uintptr_t hi)
{
	size_t l = 0, h = t->n;

	if (lo >= hi)
		return t->n;
	/* first entry whose end lies past lo */
	while (l < h) {
		size_t m = l + (h - l) / 2;
		if (t->e[m].end <= lo)
			l = m + 1;
		else
			h = m;
	}
	return l < t->n && t->e[l].start < hi ? l : t->n;
}

static int grow(ckc_owedtab_t *t)
{
	if (t->n < t->cap)
		return 0;
	size_t cap = t->cap ? 2 * t->cap : 16;
	ckc_owed_t *e = sys_realloc(t->e, cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	t->e = e;
	t->cap = cap;
	return 0;
}

int ckc_owedtab_insert(ckc_owedtab_t *t, const ckc_owed_t *e)
{
	if (e->start >= e->end || ckc_owedtab_first(t, e->start, e->end) < t->n)
		return -EINVAL;
	if (grow(t))
		return -ENOMEM;
	size_t i = 0;
	while (i < t->n && t->e[i].start < e->start)
		i++;
	memmove(&t->e[i + 1], &t->e[i], (t->n - i) * sizeof(*e));
	t->e[i] = *e;
	t->n++;
	return 0;
}

void ckc_owedtab_remove(ckc_owedtab_t *t, size_t i)
{
	memmove(&t->e[i], &t->e[i + 1], (t->n - i - 1) * sizeof(t->e[0]));
	t->n--;
}

int ckc_owedtab_cut(ckc_owedtab_t *t, size_t i, uintptr_t a, uintptr_t b)
{
	ckc_owed_t e = t->e[i];
	bool left = e.start < a, right = b < e.end;

	if (left && right) {
		if (grow(t))
			return -ENOMEM;
		memmove(&t->e[i + 2], &t->e[i + 1], (t->n - i - 1) * sizeof(e));
		t->n++;
		t->e[i].end = a;
		t->e[i + 1] = e;
		t->e[i + 1].start = b;
		return 2;
	}
	if (left) {
		t->e[i].end = a;
		return 1;
	}
	if (right) {
		t->e[i].start = b;
		return 1;
	}
	ckc_owedtab_remove(t, i);
	return 0;
}

void ckc_owedtab_free(ckc_owedtab_t *t)
{
	sys_free(t->e);
	memset(t, 0, sizeof(*t));
}
