/* The restore queue: a ring of entries indexed by position, plus an
 * open-addressing table from key to that key's entries, linked in position
 * order so that its earliest unconsumed entry is always at hand. */
#include "config.h"

#include "queue.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "sys.h"

/* Positions start in the middle of the range so that pushes at either end
 * never wrap; differences from the head are what callers see. */
#define HQ_ORIGIN (UINT64_C(1) << 62)
#define HQ_NONE UINT64_MAX
#define HQ_RING_MIN 64
#define HQ_TAB_MIN 64

struct hq_key {
	uint64_t hash;
	uint64_t first;	/* earliest unconsumed entry */
	uint64_t last;	/* latest one, where push_back links */
	size_t count;	/* unconsumed entries; the key is dropped at 0 */
	char key[];
};

struct hq_slot {
	struct hq_key *k;	/* NULL once consumed */
	uint64_t next;		/* next entry of the same key, or HQ_NONE */
};

struct hint_queue {
	/* Positions [head, tail) live in the ring; everything below head is
	 * consumed and forgotten, which keeps memory bounded by what is
	 * still queued (plus holes left by out-of-order consumption). */
	struct hq_slot *ring;
	size_t ring_cap;
	uint64_t head, tail;
	size_t live;

	struct hq_key **tab;
	size_t tab_cap;
	size_t nkeys;

	uint64_t gen;
};

static uint64_t hq_hash(const char *s)
{
	uint64_t h = UINT64_C(14695981039346656037);

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= UINT64_C(1099511628211);
	}
	/* FNV-1a's low bits mix poorly for keys differing in their last
	 * characters; the table indexes with the low bits. */
	h ^= h >> 29;
	h *= UINT64_C(0xbf58476d1ce4e5b9);
	h ^= h >> 32;
	return h;
}

static inline struct hq_slot *hq_slot(const hint_queue_t *q, uint64_t pos)
{
	return &q->ring[pos & (q->ring_cap - 1)];
}

/* Returns the table index holding key, or the empty index where it would
 * go; *found says which. */
static size_t hq_probe(const hint_queue_t *q, const char *key, uint64_t hash, bool *found)
{
	size_t mask = q->tab_cap - 1;
	size_t i = (size_t)hash & mask;

	for (;;) {
		struct hq_key *k = q->tab[i];
		if (!k) {
			*found = false;
			return i;
		}
		if (k->hash == hash && strcmp(k->key, key) == 0) {
			*found = true;
			return i;
		}
		i = (i + 1) & mask;
	}
}

static struct hq_key *hq_lookup(const hint_queue_t *q, const char *key)
{
	bool found;
	size_t i;

	if (!q || !key || !q->nkeys)
		return NULL;
	i = hq_probe(q, key, hq_hash(key), &found);
	return found ? q->tab[i] : NULL;
}

static int hq_tab_grow(hint_queue_t *q)
{
	size_t cap = q->tab_cap * 2;
	struct hq_key **tab = sys_calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < q->tab_cap; i++) {
		struct hq_key *k = q->tab[i];
		if (!k)
			continue;
		size_t j = (size_t)k->hash & (cap - 1);
		while (tab[j])
			j = (j + 1) & (cap - 1);
		tab[j] = k;
	}
	sys_free(q->tab);
	q->tab = tab;
	q->tab_cap = cap;
	return 0;
}

static struct hq_key *hq_key_get(hint_queue_t *q, const char *key, int *err)
{
	uint64_t hash = hq_hash(key);
	bool found;
	size_t i = hq_probe(q, key, hash, &found);

	if (found)
		return q->tab[i];
	/* Load stays at or below one half so probes stay short. */
	if ((q->nkeys + 1) * 2 > q->tab_cap) {
		*err = hq_tab_grow(q);
		if (*err)
			return NULL;
		i = hq_probe(q, key, hash, &found);
	}
	size_t len = strlen(key);
	struct hq_key *k = sys_malloc(sizeof(*k) + len + 1);
	if (!k) {
		*err = -ENOMEM;
		return NULL;
	}
	k->hash = hash;
	k->first = HQ_NONE;
	k->last = HQ_NONE;
	k->count = 0;
	memcpy(k->key, key, len + 1);
	q->tab[i] = k;
	q->nkeys++;
	return k;
}

/* Backward-shift deletion: linear probing then needs no tombstones. */
static void hq_key_drop(hint_queue_t *q, struct hq_key *k)
{
	size_t mask = q->tab_cap - 1;
	size_t i = (size_t)k->hash & mask;

	while (q->tab[i] != k)
		i = (i + 1) & mask;
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		struct hq_key *m = q->tab[j];
		if (!m)
			break;
		size_t home = (size_t)m->hash & mask;
		bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
		if (stays)
			continue;
		q->tab[i] = m;
		i = j;
	}
	q->tab[i] = NULL;
	q->nkeys--;
	sys_free(k);
}

static int hq_ring_resize(hint_queue_t *q, size_t cap)
{
	struct hq_slot *ring = sys_malloc(cap * sizeof(*ring));

	if (!ring)
		return -ENOMEM;
	for (uint64_t p = q->head; p != q->tail; p++)
		ring[p & (cap - 1)] = *hq_slot(q, p);
	sys_free(q->ring);
	q->ring = ring;
	q->ring_cap = cap;
	return 0;
}

static int hq_ring_reserve(hint_queue_t *q)
{
	if (q->tail - q->head < q->ring_cap)
		return 0;
	if (q->ring_cap > SIZE_MAX / 2 / sizeof(struct hq_slot))
		return -ENOMEM;
	return hq_ring_resize(q, q->ring_cap * 2);
}

static void hq_advance(hint_queue_t *q)
{
	while (q->head != q->tail && !hq_slot(q, q->head)->k)
		q->head++;
	/* Give memory back once the queue has drained to a quarter; halving
	 * (not quartering) leaves room so that push/consume at the boundary
	 * does not resize every time. A failed shrink is harmless. */
	if (q->ring_cap > HQ_RING_MIN && q->tail - q->head < q->ring_cap / 4)
		(void)hq_ring_resize(q, q->ring_cap / 2);
}

/* Consumes k's earliest entry; drops k when it was its last. */
static void hq_take_first(hint_queue_t *q, struct hq_key *k)
{
	struct hq_slot *s = hq_slot(q, k->first);

	k->first = s->next;
	s->k = NULL;
	s->next = HQ_NONE;
	k->count--;
	q->live--;
	if (!k->count)
		hq_key_drop(q, k);
}

hint_queue_t *hq_new(void)
{
	hint_queue_t *q = sys_calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->ring = sys_malloc(HQ_RING_MIN * sizeof(*q->ring));
	q->tab = sys_calloc(HQ_TAB_MIN, sizeof(*q->tab));
	if (!q->ring || !q->tab) {
		sys_free(q->ring);
		sys_free(q->tab);
		sys_free(q);
		return NULL;
	}
	q->ring_cap = HQ_RING_MIN;
	q->tab_cap = HQ_TAB_MIN;
	q->head = HQ_ORIGIN;
	q->tail = HQ_ORIGIN;
	return q;
}

void hq_free(hint_queue_t *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->tab_cap; i++)
		sys_free(q->tab[i]);
	sys_free(q->tab);
	sys_free(q->ring);
	sys_free(q);
}

int hq_push_back(hint_queue_t *q, const char *key)
{
	int err = 0;

	if (!q || !key)
		return -EINVAL;
	/* Reserve ring space first: a failure after the key exists would
	 * leave a key with no entries in the table. */
	err = hq_ring_reserve(q);
	if (err)
		return err;
	struct hq_key *k = hq_key_get(q, key, &err);
	if (!k)
		return err;

	uint64_t pos = q->tail++;
	struct hq_slot *s = hq_slot(q, pos);
	s->k = k;
	s->next = HQ_NONE;
	if (k->count)
		hq_slot(q, k->last)->next = pos;
	else
		k->first = pos;
	k->last = pos;
	k->count++;
	q->live++;
	q->gen++;
	return 0;
}

int hq_push_front(hint_queue_t *q, const char *key)
{
	int err = 0;

	if (!q || !key)
		return -EINVAL;
	err = hq_ring_reserve(q);
	if (err)
		return err;
	struct hq_key *k = hq_key_get(q, key, &err);
	if (!k)
		return err;

	uint64_t pos = --q->head;
	struct hq_slot *s = hq_slot(q, pos);
	s->k = k;
	s->next = k->count ? k->first : HQ_NONE;
	if (!k->count)
		k->last = pos;
	k->first = pos;
	k->count++;
	q->live++;
	q->gen++;
	return 0;
}

uint64_t hq_distance(const hint_queue_t *q, const char *key)
{
	struct hq_key *k = hq_lookup(q, key);

	return k ? k->first - q->head : HQ_FAR;
}

bool hq_consume(hint_queue_t *q, const char *key)
{
	struct hq_key *k = hq_lookup(q, key);

	if (!k)
		return false;
	hq_take_first(q, k);
	hq_advance(q);
	q->gen++;
	return true;
}

bool hq_next(const hint_queue_t *q, uint64_t *cursor, const char **key, uint64_t *dist)
{
	if (!q)
		return false;
	uint64_t span = q->tail - q->head;
	uint64_t off = *cursor;

	while (off < span && !hq_slot(q, q->head + off)->k)
		off++;
	if (off >= span) {
		*cursor = span;
		return false;
	}
	*key = hq_slot(q, q->head + off)->k->key;
	*dist = off;
	*cursor = off + 1;
	return true;
}

size_t hq_len(const hint_queue_t *q)
{
	return q ? q->live : 0;
}

uint64_t hq_generation(const hint_queue_t *q)
{
	return q ? q->gen : 0;
}

int hq_remove_all(hint_queue_t *q, const char *key)
{
	struct hq_key *k = hq_lookup(q, key);

	if (!k)
		return 0;
	size_t n = k->count;
	for (size_t i = 0; i < n; i++)
		hq_take_first(q, k);
	hq_advance(q);
	q->gen++;
	return n > INT_MAX ? INT_MAX : (int)n;
}
