/* The node registry's table: open addressing with linear probing over
 * shared slots, one compare-and-swap per change (see nodetab.h). The last
 * slot is no key's place and is never taken, and a search never goes past
 * it: it stays empty, so that freed slots always have an empty one after
 * them to be emptied from (reclaim, nodetab_compact), however full the
 * table once was. */
#include "config.h"

#include <errno.h>

#include "nodetab.h"
#include "path.h"
#include "sys.h"

#define PID_BITS 24u
#define PID_MASK ((1ull << PID_BITS) - 1)

CKC_TAGGED_PATH uint64_t nodetab_key(const char *path)
{
	uint64_t k = ckc_path_hash(path) >> PID_BITS;
	return k ? k : 1;
}

CKC_TAGGED_PATH uint64_t nodetab_val(uint64_t key, pid_t pid)
{
	return key << PID_BITS | ((uint64_t)pid & PID_MASK);
}

uint64_t nodetab_val_key(uint64_t val)
{
	return val >> PID_BITS;
}

CKC_TAGGED_PATH pid_t nodetab_val_pid(uint64_t val)
{
	return (pid_t)(val & PID_MASK);
}

/* A key's place: one of the first n - 1 slots. */
CKC_TAGGED_PATH static size_t place(uint64_t key, size_t n)
{
	return n > 1 ? (size_t)(key % (n - 1)) : 0;
}

/* The slots a search from start looks at: up to within, and not the last
 * slot (nor past it). */
CKC_TAGGED_PATH static size_t probe_len(size_t n, size_t start, size_t within)
{
	if (within > NODETAB_PROBE)
		within = NODETAB_PROBE;
	size_t room = n > start + 1 ? n - 1 - start : 0;
	return room < within ? room : within;
}

/* Whether a search from start reaches slot start + at: no empty slot
 * before it, nor one being emptied. */
CKC_TAGGED_PATH static bool reaches(nodetab_slot_t *t, size_t start, size_t at)
{
	for (size_t i = 0; i < at; i++) {
		uint64_t v = atomic_load(&t[start + i]);
		if (v == NODETAB_EMPTY || v == NODETAB_EMPTYING)
			return false;
	}
	return true;
}

/* Whether a slot's value is none of a holder's (empty, freed, or being
 * emptied: the sentinels are the smallest values). */
CKC_TAGGED_PATH static inline bool slot_free(uint64_t v)
{
	return v <= NODETAB_EMPTYING;
}

void (*nodetab_add_pause)(size_t slot);
void (*nodetab_reclaim_pause)(void);

static size_t reclaim(nodetab_slot_t *t, size_t i);

CKC_TAGGED_PATH int nodetab_add(nodetab_slot_t *t, size_t n, uint64_t val)
{
	return nodetab_add_within(t, n, val, NODETAB_PROBE);
}

CKC_TAGGED_PATH int nodetab_add_within(nodetab_slot_t *t, size_t n, uint64_t val, size_t within)
{
	size_t start = place(nodetab_val_key(val), n), len = probe_len(n, start, within);
	for (;;) {
		size_t at = len;
		for (size_t i = 0; i < len && at == len; i++) {
			nodetab_slot_t *s = &t[start + i];
			uint64_t v = atomic_load(s);
			if (__builtin_expect(nodetab_add_pause != NULL, 0))
				nodetab_add_pause(start + i);
			/* a slot another process takes meanwhile is skipped */
			while (slot_free(v))
				if (atomic_compare_exchange_weak(s, &v, val)) {
					at = i;
					break;
				}
		}
		if (at == len)
			return -ENOSPC;
		/* a freed slot before it that a removal emptied meanwhile
		 * (nodetab_del) would stop a search short of it: placed again,
		 * there or before */
		if (reaches(t, start, at))
			return 0;
		uint64_t v = val;
		if (atomic_compare_exchange_strong(&t[start + at], &v, (uint64_t)NODETAB_FREED))
			(void)reclaim(t, start + at);
	}
}

/* Slot i (before the last) is freed: it becomes empty, and so does each
 * freed slot before it, while the slot after is empty. A search that
 * reached such a slot would stop at the next one anyway. An addition may
 * take the slot after it meanwhile, its search having passed slot i while
 * that still held a value: the slot is marked (NODETAB_EMPTYING) before
 * the slot after it is looked at, and the addition looks at the slots
 * before its own after taking it (reaches), so that one of the two sees
 * the other's change (else the value would be in a slot no search
 * reaches). Where the removal saw the slot after taken it puts the mark
 * back to freed; where the addition saw the mark it places its value
 * again. Returns how many. */
CKC_TAGGED_PATH static size_t reclaim(nodetab_slot_t *t, size_t i)
{
	size_t done = 0;
	for (;; i--) {
		uint64_t v = NODETAB_FREED;
		if (!atomic_compare_exchange_strong(&t[i], &v, (uint64_t)NODETAB_EMPTYING))
			break;
		bool after_empty = atomic_load(&t[i + 1]) == NODETAB_EMPTY;
		if (__builtin_expect(nodetab_reclaim_pause != NULL, 0))
			nodetab_reclaim_pause();
		/* (an addition may have taken the marked slot itself: then it
		 * is its, and both exchanges below leave it) */
		v = NODETAB_EMPTYING;
		if (!after_empty) {
			atomic_compare_exchange_strong(&t[i], &v, (uint64_t)NODETAB_FREED);
			break;
		}
		if (!atomic_compare_exchange_strong(&t[i], &v, (uint64_t)NODETAB_EMPTY))
			break;
		done++;
		if (i == 0)
			break;
	}
	return done;
}

CKC_TAGGED_PATH int nodetab_del(nodetab_slot_t *t, size_t n, uint64_t val)
{
	return nodetab_del_within(t, n, val, NODETAB_PROBE);
}

CKC_TAGGED_PATH int nodetab_del_within(nodetab_slot_t *t, size_t n, uint64_t val, size_t within)
{
	size_t start = place(nodetab_val_key(val), n), len = probe_len(n, start, within);
	for (size_t i = 0; i < len; i++) {
		nodetab_slot_t *s = &t[start + i];
		uint64_t v = atomic_load(s);
		if (v == NODETAB_EMPTY)
			break;
		if (v == val && atomic_compare_exchange_strong(s, &v, (uint64_t)NODETAB_FREED)) {
			reclaim(t, start + i);
			return 0;
		}
	}
	return -ENOENT;
}

size_t nodetab_compact(nodetab_slot_t *t, size_t n)
{
	size_t done = 0;
	/* backwards from the slot before the last, which is always empty */
	for (size_t i = n > 1 ? n - 1 : 0; i-- > 0;)
		if (atomic_load(&t[i]) == NODETAB_FREED)
			done += reclaim(t, i);
	return done;
}

CKC_TAGGED_PATH size_t nodetab_find(nodetab_slot_t *t, size_t n, uint64_t key, uint64_t *vals, size_t max, size_t *probed)
{
	return nodetab_find_within(t, n, key, vals, max, probed, NODETAB_PROBE);
}

CKC_TAGGED_PATH size_t nodetab_find_within(nodetab_slot_t *t, size_t n, uint64_t key, uint64_t *vals, size_t max, size_t *probed,
			   size_t within)
{
	size_t start = place(key, n), len = probe_len(n, start, within), found = 0, i;
	for (i = 0; i < len; i++) {
		uint64_t v = atomic_load(&t[start + i]);
		if (v == NODETAB_EMPTY)
			break;
		if (v != NODETAB_FREED && nodetab_val_key(v) == key) {
			if (found < max)
				vals[found] = v;
			found++;
		}
	}
	if (probed)
		*probed = i;
	return found;
}

size_t nodetab_pids(nodetab_slot_t *t, size_t n, pid_t *pids, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k < max; i++) {
		uint64_t v = atomic_load_explicit(&t[i], memory_order_relaxed);
		if (slot_free(v))
			continue;
		pid_t pid = nodetab_val_pid(v);
		size_t j = 0;
		while (j < k && pids[j] != pid)
			j++;
		if (j == k)
			pids[k++] = pid;
	}
	return k;
}

size_t nodetab_sweep(nodetab_slot_t *t, size_t n, bool (*alive)(pid_t pid))
{
	size_t freed = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = atomic_load(&t[i]);
		if (slot_free(v) || alive(nodetab_val_pid(v)))
			continue;
		if (atomic_compare_exchange_strong(&t[i], &v, (uint64_t)NODETAB_FREED))
			freed++;
	}
	return freed;
}
