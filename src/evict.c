/* Window choice for eviction: one pass of two pointers over the fragment
 * table with running sums and monotonic deques for the sliding maxima. */
#include "config.h"

#include "evict.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sys.h"

/* Tables up to this size need no heap allocation per decision. */
#define EVICT_STACK_FRAGS 128

/*
 * Monotonic deque of fragment indices whose keys decrease from head to tail,
 * so the head is the maximum of the window. Every index is pushed at most
 * once between resets, so a flat array of n slots never wraps.
 */
typedef struct evict_deque {
	size_t *idx;
	size_t head, tail;
} evict_deque_t;

typedef struct evict_best {
	bool found;
	size_t first, last;
	double p;
	uint64_t s, ev, age;
} evict_best_t;

static void evict_push_p(evict_deque_t *q, const evict_frag_t *f, size_t r)
{
	while (q->tail > q->head && f[q->idx[q->tail - 1]].p <= f[r].p)
		q->tail--;
	q->idx[q->tail++] = r;
}

static void evict_push_age(evict_deque_t *q, const evict_frag_t *f, size_t r)
{
	while (q->tail > q->head && f[q->idx[q->tail - 1]].age <= f[r].age)
		q->tail--;
	q->idx[q->tail++] = r;
}

static void evict_pop_left(evict_deque_t *q, size_t i)
{
	if (q->tail > q->head && q->idx[q->head] == i)
		q->head++;
}

/* Strict "better than", so that among equals the earlier (smaller i) stays. */
static bool evict_better(const evict_best_t *c, const evict_best_t *b, bool by_age)
{
	if (!b->found)
		return true;
	if (by_age) {
		if (c->age != b->age)
			return c->age < b->age;
		if (c->ev != b->ev)
			return c->ev < b->ev;
		return c->p < b->p;
	}
	if (c->p != b->p)
		return c->p < b->p;
	if (c->s != b->s)
		return c->s > b->s;
	return c->ev < b->ev;
}

int evict_choose(const evict_frag_t *f, size_t n, uint64_t need, evict_policy_t pol, evict_choice_t *out)
{
	size_t stackbuf[2 * EVICT_STACK_FRAGS];
	size_t *buf = stackbuf;
	evict_deque_t qp = { 0 }, qa = { 0 };
	evict_best_t best = { 0 };
	uint64_t sum_len = 0, sum_s = 0, sum_ev = 0;
	bool by_age;
	size_t i = 0, r = 0;

	if (!out || (n && !f))
		return -EINVAL;
	if (pol != EVICT_SCORE && pol != EVICT_FIFO && pol != EVICT_LRU)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (n == 0)
		return 0;
	by_age = pol != EVICT_SCORE;
	if (n > EVICT_STACK_FRAGS) {
		if (n > SIZE_MAX / (2 * sizeof(*buf)))
			return -ENOMEM;
		buf = sys_malloc(2 * n * sizeof(*buf));
		if (!buf)
			return -ENOMEM;
	}
	qp.idx = buf;
	qa.idx = buf + n;

	while (i < n) {
		/* r == i forces a non-empty window even when need is 0. */
		while (r < n && (r == i || sum_len < need)) {
			if (f[r].p == INFINITY)
				break;
			sum_len += f[r].len;
			sum_s += f[r].s;
			if (!f[r].gap)
				sum_ev += f[r].len;
			evict_push_p(&qp, f, r);
			if (by_age)
				evict_push_age(&qa, f, r);
			r++;
		}
		if (r > i && sum_len >= need) {
			evict_best_t c = {
				.found = true, .first = i, .last = r - 1,
				.p = f[qp.idx[qp.head]].p, .s = sum_s, .ev = sum_ev,
				.age = by_age ? f[qa.idx[qa.head]].age : 0,
			};

			if (evict_better(&c, &best, by_age))
				best = c;
		} else if (r < n) {
			/* Fragment r is excluded: every window starting at or
			 * before it would have to cover it. */
			i = r + 1;
			r = i;
			sum_len = sum_s = sum_ev = 0;
			qp.head = qp.tail = qa.head = qa.tail = 0;
			continue;
		} else {
			/* Even the rest of the table is too small. */
			break;
		}
		sum_len -= f[i].len;
		sum_s -= f[i].s;
		if (!f[i].gap)
			sum_ev -= f[i].len;
		evict_pop_left(&qp, i);
		if (by_age)
			evict_pop_left(&qa, i);
		i++;
	}

	if (buf != stackbuf)
		sys_free(buf);
	if (best.found) {
		out->found = true;
		out->first = best.first;
		out->last = best.last;
		out->p = best.p;
		out->s = best.s;
		out->evict_bytes = best.ev;
	}
	return 0;
}
