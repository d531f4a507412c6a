/* The restore queue P: the order in which checkpoint files will be read back,
 * with O(1) look-up of how far a key is from the head, for the prefetcher and
 * the eviction scorer. Pure logic: no locks, the caller serialises. */
#ifndef CKC_QUEUE_H
#define CKC_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Distance of a key that is not queued; equal to EVICT_FAR on purpose. */
#define HQ_FAR (UINT64_C(1) << 40)

typedef struct hint_queue hint_queue_t;

/* Returns an empty queue, or NULL when out of memory. */
hint_queue_t *hq_new(void);

/* Releases q and every key it holds; q may be NULL. */
void hq_free(hint_queue_t *q);

/* Appends an entry for key (a copy is kept), read after everything queued.
 * Returns 0 on success, -ENOMEM or -EINVAL (NULL argument). */
int hq_push_back(hint_queue_t *q, const char *key);

/* Prepends an entry for key (a copy is kept), read before everything queued;
 * it becomes the head. Returns 0 on success, -ENOMEM or -EINVAL. */
int hq_push_front(hint_queue_t *q, const char *key);

/* Returns the position of key's earliest unconsumed entry minus the head's
 * position (0 for the head; consumed entries above the head still count),
 * or HQ_FAR when key has no unconsumed entry. O(1) on average. */
uint64_t hq_distance(const hint_queue_t *q, const char *key);

/* Consumes key's earliest unconsumed entry wherever it is; the head then
 * moves past any consumed entries. Returns true if there was one. */
bool hq_consume(hint_queue_t *q, const char *key);

/* Walks the unconsumed entries from the head: set *cursor to 0 to start.
 * Returns true and fills *key (valid until the next mutation) and *dist
 * (as hq_distance would give for that entry), or false at the end. */
bool hq_next(const hint_queue_t *q, uint64_t *cursor, const char **key, uint64_t *dist);

/* Returns the number of unconsumed entries. */
size_t hq_len(const hint_queue_t *q);

/* Returns a value that changes on every mutation (push, a consume that
 * found an entry, a remove_all that found some), so a walker knows when to
 * start again. */
uint64_t hq_generation(const hint_queue_t *q);

/* Consumes every unconsumed entry of key (its file was unlinked).
 * Returns how many there were. */
int hq_remove_all(hint_queue_t *q, const char *key);

#endif
