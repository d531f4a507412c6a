/* ckptcache: optional API for programs that know their restore order.
 *
 * Everything works without it (preload the library and set CKPTCACHE_PATHS).
 * A program may call these functions when the library is preloaded or when
 * it links -lckptcache; when the cache is not active they do nothing and
 * return 0 (or -1 with errno set as stated). See ckptcache(7). */
#ifndef CKPTCACHE_H
#define CKPTCACHE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Appends path to the restore queue: the checkpoint the program will read
 * after every one queued before. Returns 0, or -1 with errno set (ENOMEM,
 * ENAMETOOLONG). */
int ckptcache_prefetch_enqueue(const char *path);

/* Starts prefetching now instead of at the first read. Returns 0. */
int ckptcache_prefetch_start(void);

/* Returns when every checkpoint written so far has reached its real path
 * (as CKPTCACHE_PERSIST requires). Returns 0, or -1 with errno EIO when some
 * checkpoint could only be saved to a rescue file. */
int ckptcache_wait_flushed(void);

#ifdef __cplusplus
}
#endif

#endif
