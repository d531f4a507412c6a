/* Unit tests of the restore queue (hints/queue.c): ordering, distances,
 * consumption, iteration, a million-entry run and a randomised comparison
 * with a plain array model. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"

static hint_queue_t *q;

static void setup(void)
{
	q = hq_new();
	cr_assert_not_null(q);
}

static void teardown(void)
{
	hq_free(q);
	q = NULL;
}

TestSuite(queue, .init = setup, .fini = teardown);

/* Checks that walking q gives exactly keys[] at distances dists[]. */
static void expect_walk(const char *const *keys, const uint64_t *dists, size_t n)
{
	uint64_t cur = 0, dist = 0;
	const char *key = NULL;
	size_t i = 0;

	while (hq_next(q, &cur, &key, &dist)) {
		cr_assert_lt(i, n, "walk returned more than %zu entries", n);
		cr_assert_str_eq(key, keys[i], "entry %zu", i);
		cr_assert_eq(dist, dists[i], "entry %zu (%s): distance %llu, expected %llu", i, key,
			     (unsigned long long)dist, (unsigned long long)dists[i]);
		i++;
	}
	cr_assert_eq(i, n, "walk returned %zu entries, expected %zu", i, n);
	cr_assert_eq(hq_len(q), n);
}

Test(queue, empty)
{
	uint64_t cur = 0, dist = 7;
	const char *key = NULL;

	cr_assert_eq(hq_len(q), 0);
	cr_assert_eq(hq_distance(q, "a"), HQ_FAR);
	cr_assert_not(hq_consume(q, "a"));
	cr_assert_eq(hq_remove_all(q, "a"), 0);
	cr_assert_not(hq_next(q, &cur, &key, &dist));
	cr_assert_null(key);
	cr_assert_eq(hq_distance(NULL, "a"), HQ_FAR);
	cr_assert_eq(hq_push_back(q, NULL), -EINVAL);
	cr_assert_eq(hq_push_front(NULL, "a"), -EINVAL);
	cr_assert_eq(hq_len(q), 0);
}

Test(queue, push_back_order)
{
	cr_assert_eq(hq_push_back(q, "a"), 0);
	cr_assert_eq(hq_push_back(q, "b"), 0);
	cr_assert_eq(hq_push_back(q, "c"), 0);
	cr_assert_eq(hq_distance(q, "a"), 0);
	cr_assert_eq(hq_distance(q, "b"), 1);
	cr_assert_eq(hq_distance(q, "c"), 2);
	cr_assert_eq(hq_distance(q, "d"), HQ_FAR);
	const char *keys[] = { "a", "b", "c" };
	const uint64_t dists[] = { 0, 1, 2 };
	expect_walk(keys, dists, 3);
}

Test(queue, push_front_order)
{
	/* ORDER=reverse: each completed checkpoint is read back first. */
	cr_assert_eq(hq_push_front(q, "c1"), 0);
	cr_assert_eq(hq_push_front(q, "c2"), 0);
	cr_assert_eq(hq_push_front(q, "c3"), 0);
	cr_assert_eq(hq_distance(q, "c3"), 0);
	cr_assert_eq(hq_distance(q, "c2"), 1);
	cr_assert_eq(hq_distance(q, "c1"), 2);

	cr_assert_eq(hq_push_back(q, "tail"), 0);
	cr_assert_eq(hq_push_front(q, "c4"), 0);
	const char *keys[] = { "c4", "c3", "c2", "c1", "tail" };
	const uint64_t dists[] = { 0, 1, 2, 3, 4 };
	expect_walk(keys, dists, 5);
}

Test(queue, consume_at_head)
{
	hq_push_back(q, "a");
	hq_push_back(q, "b");
	hq_push_back(q, "c");
	cr_assert(hq_consume(q, "a"));
	cr_assert_eq(hq_distance(q, "a"), HQ_FAR);
	cr_assert_eq(hq_distance(q, "b"), 0);
	cr_assert_eq(hq_distance(q, "c"), 1);
	cr_assert_eq(hq_len(q), 2);
	cr_assert_not(hq_consume(q, "a"));
	cr_assert(hq_consume(q, "b"));
	cr_assert(hq_consume(q, "c"));
	cr_assert_eq(hq_len(q), 0);
	cr_assert_eq(hq_distance(q, "c"), HQ_FAR);

	/* A drained queue takes new entries at either end from distance 0. */
	cr_assert_eq(hq_push_back(q, "x"), 0);
	cr_assert_eq(hq_distance(q, "x"), 0);
	cr_assert_eq(hq_push_front(q, "y"), 0);
	cr_assert_eq(hq_distance(q, "y"), 0);
	cr_assert_eq(hq_distance(q, "x"), 1);
}

Test(queue, consume_out_of_order)
{
	hq_push_back(q, "a");
	hq_push_back(q, "b");
	hq_push_back(q, "c");
	hq_push_back(q, "d");

	/* A hole above the head keeps counting in distances. */
	cr_assert(hq_consume(q, "c"));
	cr_assert_eq(hq_distance(q, "a"), 0);
	cr_assert_eq(hq_distance(q, "d"), 3);
	cr_assert_eq(hq_len(q), 3);
	const char *k1[] = { "a", "b", "d" };
	const uint64_t d1[] = { 0, 1, 3 };
	expect_walk(k1, d1, 3);

	cr_assert(hq_consume(q, "a"));
	cr_assert_eq(hq_distance(q, "b"), 0);
	cr_assert_eq(hq_distance(q, "d"), 2);

	/* Consuming b moves the head past the hole left by c. */
	cr_assert(hq_consume(q, "b"));
	cr_assert_eq(hq_distance(q, "d"), 0);
	const char *k2[] = { "d" };
	const uint64_t d2[] = { 0 };
	expect_walk(k2, d2, 1);

	/* push_front lands just before the head, not before old holes. */
	cr_assert_eq(hq_push_front(q, "e"), 0);
	cr_assert_eq(hq_distance(q, "e"), 0);
	cr_assert_eq(hq_distance(q, "d"), 1);
}

Test(queue, duplicates)
{
	/* Binomial checkpointing: c1 is read at positions 1 and 3. */
	hq_push_back(q, "c0");
	hq_push_back(q, "c1");
	hq_push_back(q, "c2");
	hq_push_back(q, "c1");
	hq_push_front(q, "c1");
	/* c1 c0 c1 c2 c1 */
	cr_assert_eq(hq_len(q), 5);
	cr_assert_eq(hq_distance(q, "c1"), 0);
	cr_assert(hq_consume(q, "c1"));
	cr_assert_eq(hq_distance(q, "c0"), 0);
	cr_assert_eq(hq_distance(q, "c1"), 1);
	cr_assert(hq_consume(q, "c1"));
	cr_assert_eq(hq_distance(q, "c1"), 3);
	cr_assert_eq(hq_distance(q, "c2"), 2);
	const char *k[] = { "c0", "c2", "c1" };
	const uint64_t d[] = { 0, 2, 3 };
	expect_walk(k, d, 3);
	cr_assert(hq_consume(q, "c1"));
	cr_assert_eq(hq_distance(q, "c1"), HQ_FAR);
	cr_assert_not(hq_consume(q, "c1"));
	cr_assert_eq(hq_len(q), 2);
}

Test(queue, next_cursor)
{
	uint64_t cur = 0, dist = 0;
	const char *key = NULL;

	hq_push_back(q, "a");
	hq_push_back(q, "b");
	hq_push_back(q, "c");
	hq_consume(q, "b");
	cr_assert(hq_next(q, &cur, &key, &dist));
	cr_assert_str_eq(key, "a");
	cr_assert_eq(dist, 0);
	cr_assert(hq_next(q, &cur, &key, &dist));
	cr_assert_str_eq(key, "c");
	cr_assert_eq(dist, 2);
	cr_assert_not(hq_next(q, &cur, &key, &dist));
	/* Stays at the end. */
	cr_assert_not(hq_next(q, &cur, &key, &dist));
	cur = 0;
	cr_assert(hq_next(q, &cur, &key, &dist));
	cr_assert_str_eq(key, "a");
}

Test(queue, remove_all)
{
	hq_push_back(q, "a");
	hq_push_back(q, "x");
	hq_push_back(q, "b");
	hq_push_back(q, "x");
	hq_push_front(q, "x");
	/* x a x b x */
	cr_assert_eq(hq_remove_all(q, "x"), 3);
	cr_assert_eq(hq_distance(q, "x"), HQ_FAR);
	cr_assert_eq(hq_len(q), 2);
	cr_assert_eq(hq_distance(q, "a"), 0);
	cr_assert_eq(hq_distance(q, "b"), 2);
	const char *k[] = { "a", "b" };
	const uint64_t d[] = { 0, 2 };
	expect_walk(k, d, 2);
	cr_assert_eq(hq_remove_all(q, "x"), 0);
	cr_assert_eq(hq_remove_all(q, "a"), 1);
	cr_assert_eq(hq_distance(q, "b"), 0);
	/* The key can be queued again afterwards; the hole its last entry
	 * left after b still counts. */
	cr_assert_eq(hq_push_back(q, "x"), 0);
	cr_assert_eq(hq_distance(q, "x"), 2);
}

Test(queue, generation)
{
	uint64_t g = hq_generation(q);

	hq_push_back(q, "a");
	cr_assert_neq(hq_generation(q), g);
	g = hq_generation(q);
	hq_push_front(q, "b");
	cr_assert_neq(hq_generation(q), g);
	g = hq_generation(q);
	cr_assert(hq_consume(q, "a"));
	cr_assert_neq(hq_generation(q), g);
	g = hq_generation(q);
	cr_assert_not(hq_consume(q, "zz"));
	cr_assert_eq(hq_generation(q), g, "a consume that found nothing is no mutation");
	cr_assert_eq(hq_remove_all(q, "zz"), 0);
	cr_assert_eq(hq_generation(q), g);
	cr_assert_eq(hq_remove_all(q, "b"), 1);
	cr_assert_neq(hq_generation(q), g);
	g = hq_generation(q);
	(void)hq_distance(q, "a");
	cr_assert_eq(hq_generation(q), g);
}

#define MILLION 1000000u

static void key_of(char *buf, size_t len, unsigned i)
{
	snprintf(buf, len, "/ckpt/run/c%07u.bin", i);
}

Test(queue, million_in_order, .timeout = 60)
{
	char key[64];

	for (unsigned i = 0; i < MILLION; i++) {
		key_of(key, sizeof(key), i);
		cr_assert_eq(hq_push_back(q, key), 0);
	}
	cr_assert_eq(hq_len(q), MILLION);
	for (unsigned i = 0; i < MILLION; i++) {
		key_of(key, sizeof(key), i);
		uint64_t d = hq_distance(q, key);
		if (d != i)
			cr_assert_fail("%s: distance %llu, expected %u", key, (unsigned long long)d, i);
	}
	for (unsigned i = 0; i < MILLION; i++) {
		key_of(key, sizeof(key), i);
		if (hq_distance(q, key) != 0)
			cr_assert_fail("%s not at the head", key);
		if (!hq_consume(q, key))
			cr_assert_fail("%s not consumed", key);
		if (hq_distance(q, key) != HQ_FAR)
			cr_assert_fail("%s still queued", key);
		/* Every 100,000 consumptions, re-check a stride of the rest. */
		if (i % 100000 == 99999) {
			for (unsigned j = i + 1; j < MILLION; j += 97) {
				key_of(key, sizeof(key), j);
				uint64_t d = hq_distance(q, key);
				if (d != j - i - 1)
					cr_assert_fail("%s: distance %llu, expected %u", key,
						       (unsigned long long)d, j - i - 1);
			}
		}
	}
	cr_assert_eq(hq_len(q), 0);
}

Test(queue, million_mixed_ends, .timeout = 60)
{
	char key[64];
	const unsigned half = MILLION / 2;

	/* Even i at the back, odd i at the front: the queue reads
	 * odd keys descending, then even keys ascending. */
	for (unsigned i = 0; i < MILLION; i++) {
		key_of(key, sizeof(key), i);
		int rc = i % 2 ? hq_push_front(q, key) : hq_push_back(q, key);
		if (rc)
			cr_assert_fail("push %u: %d", i, rc);
	}
	for (unsigned i = 0; i < MILLION; i++) {
		uint64_t want = i % 2 ? (uint64_t)(half - 1 - i / 2) : (uint64_t)(half + i / 2);
		key_of(key, sizeof(key), i);
		uint64_t d = hq_distance(q, key);
		if (d != want)
			cr_assert_fail("%s: distance %llu, expected %llu", key, (unsigned long long)d,
				       (unsigned long long)want);
	}
	/* Consume every even key (the back half) from the end first: the
	 * head does not move while holes open behind it. */
	for (unsigned i = MILLION; i >= 2; i -= 2) {
		key_of(key, sizeof(key), i - 2);
		if (!hq_consume(q, key))
			cr_assert_fail("%s not consumed", key);
	}
	key_of(key, sizeof(key), MILLION - 1);
	cr_assert_eq(hq_distance(q, key), 0);
	cr_assert_eq(hq_len(q), half);
	for (unsigned i = 1; i < MILLION; i += 2) {
		key_of(key, sizeof(key), i);
		uint64_t d = hq_distance(q, key);
		if (d != (uint64_t)(half - 1 - i / 2))
			cr_assert_fail("%s: distance %llu", key, (unsigned long long)d);
	}
	for (unsigned i = MILLION - 1; i < MILLION; i -= 2) {
		key_of(key, sizeof(key), i);
		if (hq_distance(q, key) != 0 || !hq_consume(q, key))
			cr_assert_fail("%s not at the head", key);
	}
	cr_assert_eq(hq_len(q), 0);
	uint64_t cur = 0, dist;
	const char *k;
	cr_assert_not(hq_next(q, &cur, &k, &dist));
}

/* The reference model: entries in read order, consumed ones marked; a
 * consumed prefix is dropped, as the queue forgets entries below its head. */
struct model {
	int key[8192];
	bool gone[8192];
	size_t n;
};

static void model_trim(struct model *m)
{
	size_t s = 0;

	while (s < m->n && m->gone[s])
		s++;
	memmove(m->key, m->key + s, (m->n - s) * sizeof(m->key[0]));
	memmove(m->gone, m->gone + s, (m->n - s) * sizeof(m->gone[0]));
	m->n -= s;
}

static uint64_t model_distance(const struct model *m, int k)
{
	for (size_t i = 0; i < m->n; i++)
		if (!m->gone[i] && m->key[i] == k)
			return i;
	return HQ_FAR;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define NKEYS 24

static void random_run(uint64_t seed, int ops)
{
	static struct model m;
	char names[NKEYS][16];
	uint64_t rs = seed;

	memset(&m, 0, sizeof(m));
	for (int k = 0; k < NKEYS; k++)
		snprintf(names[k], sizeof(names[k]), "key%02d", k);

	for (int op = 0; op < ops; op++) {
		int k = (int)(rng_next(&rs) % NKEYS);
		unsigned what = (unsigned)(rng_next(&rs) % 100);
		/* Every other 500 operations mostly consume, so that the ring
		 * grows and shrinks rather than only growing. */
		if ((op / 500) % 2 && what < 40)
			what += 55;
		uint64_t g = hq_generation(q);
		bool mutated;

		if (what < 30 && m.n < 8000) {
			cr_assert_eq(hq_push_back(q, names[k]), 0);
			m.key[m.n] = k;
			m.gone[m.n] = false;
			m.n++;
			mutated = true;
		} else if (what < 55 && m.n < 8000) {
			cr_assert_eq(hq_push_front(q, names[k]), 0);
			memmove(m.key + 1, m.key, m.n * sizeof(m.key[0]));
			memmove(m.gone + 1, m.gone, m.n * sizeof(m.gone[0]));
			m.key[0] = k;
			m.gone[0] = false;
			m.n++;
			mutated = true;
		} else if (what < 65 && m.n) {
			/* Consume at the head, as a restore in order would. */
			size_t h = 0;
			while (m.gone[h])
				h++;
			k = m.key[h];
			cr_assert(hq_consume(q, names[k]), "seed %llu op %d", (unsigned long long)seed, op);
			m.gone[h] = true;
			mutated = true;
		} else if (what < 95) {
			uint64_t d = model_distance(&m, k);
			bool got = hq_consume(q, names[k]);
			cr_assert_eq(got, d != HQ_FAR, "seed %llu op %d consume %s",
				     (unsigned long long)seed, op, names[k]);
			if (got)
				m.gone[d] = true;
			mutated = got;
		} else {
			int want = 0;
			for (size_t i = 0; i < m.n; i++) {
				if (!m.gone[i] && m.key[i] == k) {
					m.gone[i] = true;
					want++;
				}
			}
			cr_assert_eq(hq_remove_all(q, names[k]), want);
			mutated = want > 0;
		}
		model_trim(&m);

		if (mutated)
			cr_assert_neq(hq_generation(q), g, "seed %llu op %d", (unsigned long long)seed, op);
		else
			cr_assert_eq(hq_generation(q), g, "seed %llu op %d", (unsigned long long)seed, op);

		size_t live = 0;
		for (size_t i = 0; i < m.n; i++)
			live += !m.gone[i];
		cr_assert_eq(hq_len(q), live, "seed %llu op %d", (unsigned long long)seed, op);
		for (int j = 0; j < NKEYS; j++) {
			uint64_t want = model_distance(&m, j);
			uint64_t got = hq_distance(q, names[j]);
			cr_assert_eq(got, want, "seed %llu op %d: %s distance %llu, model %llu",
				     (unsigned long long)seed, op, names[j], (unsigned long long)got,
				     (unsigned long long)want);
		}

		uint64_t cur = 0, dist;
		const char *key;
		size_t i = 0;
		while (hq_next(q, &cur, &key, &dist)) {
			while (i < m.n && m.gone[i])
				i++;
			cr_assert_lt(i, m.n, "seed %llu op %d: walk too long", (unsigned long long)seed, op);
			cr_assert_str_eq(key, names[m.key[i]], "seed %llu op %d", (unsigned long long)seed, op);
			cr_assert_eq(dist, i, "seed %llu op %d", (unsigned long long)seed, op);
			i++;
		}
		while (i < m.n && m.gone[i])
			i++;
		cr_assert_eq(i, m.n, "seed %llu op %d: walk too short", (unsigned long long)seed, op);
	}
}

Test(queue, random_vs_model, .timeout = 60)
{
	static const uint64_t seeds[] = { 1, 0x9e3779b97f4a7c15ull, 42, 20240601, 77777 };

	for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		hq_free(q);
		q = hq_new();
		cr_assert_not_null(q);
		random_run(seeds[s], 2000);
	}
}

Test(queue, random_growth_vs_model, .timeout = 60)
{
	random_run(0xdeadbeefcafef00dull, 6000);
}
