/* Helpers shared by the engine tests: temporary directories, configurations,
 * deterministic checkpoint bytes, and write/read/verify of whole objects. */
#ifndef CKC_TEST_ENGINE_UTIL_H
#define CKC_TEST_ENGINE_UTIL_H

#ifdef CKC_TEST_SHIM
#include "shim.h"
#else
#include <criterion/criterion.h>
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckc.h"
#include "conf.h"
#include "io.h"
#include "log.h"

#define MiB (1024u * 1024u)

typedef struct tenv {
	char root[64];
	char home[96];
	char ssd[96];
	char rescue[96];
} tenv_t;

/* The ssd tier's folder is on another file system than the checkpoints'
 * (a tmpfs, where there is one): an ssd tier on their own file system
 * takes no copy that must reach them (ckc_tier_takes). */
static inline void tenv_make(tenv_t *e)
{
	strcpy(e->root, "/tmp/ckc-test-XXXXXX");
	cr_assert_not_null(mkdtemp(e->root));
	snprintf(e->home, sizeof(e->home), "%s/home", e->root);
	snprintf(e->rescue, sizeof(e->rescue), "%s/rescue", e->root);
	cr_assert_eq(mkdir(e->home, 0755), 0);
	cr_assert_eq(mkdir(e->rescue, 0700), 0);
	strcpy(e->ssd, "/dev/shm/ckc-test-ssd-XXXXXX");
	if (!mkdtemp(e->ssd)) {
		snprintf(e->ssd, sizeof(e->ssd), "%s/ssd", e->root);
		cr_assert_eq(mkdir(e->ssd, 0700), 0);
	}
}

static inline void tenv_rm(const char *path)
{
	DIR *d = opendir(path);
	if (!d) {
		unlink(path);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *sub;
		if (asprintf(&sub, "%s/%s", path, de->d_name) < 0)
			break;
		tenv_rm(sub);
		free(sub);
	}
	closedir(d);
	rmdir(path);
}

static inline void tenv_clean(tenv_t *e)
{
	tenv_rm(e->ssd);
	tenv_rm(e->root);
}

/* The ssd tier's folder on the checkpoints' own file system. */
static inline void tenv_ssd_beside(tenv_t *e)
{
	tenv_rm(e->ssd);
	snprintf(e->ssd, sizeof(e->ssd), "%s/ssd", e->root);
	cr_assert_eq(mkdir(e->ssd, 0700), 0);
}

static inline ckc_config_t tcfg(const tenv_t *e, uint64_t host, uint64_t ssd)
{
	ckc_config_t c;
	memset(&c, 0, sizeof(c));
	c.enabled = true;
	c.host_cache = host;
	c.ssd_cache = ssd;
	c.ssd_dir = (char *)e->ssd;
	c.rescue_dir = (char *)e->rescue;
	c.persist = CKC_PERSIST_ALWAYS;
	c.eviction = CKC_EVICT_SCORE;
	c.prefetch = CKC_PREFETCH_AUTO;
	c.order = CKC_ORDER_NONE;
	c.log_level = CKC_LOG_ERROR;
	c.local_size = 1;
	return c;
}

/* A scratch environment and an engine on it with a host tier of host
 * bytes and no ssd tier. */
static inline void tstart(tenv_t *e, uint64_t host)
{
	tenv_make(e);
	ckc_config_t c = tcfg(e, host, 0);
	cr_assert_eq(ckc_init_config(&c), 0);
}

static inline void tpath(const tenv_t *e, char *out, int i)
{
	snprintf(out, PATH_MAX, "%s/ckpt_%04d.bin", e->home, i);
}

/* The 8 bytes of word off / 8 of checkpoint seed, least significant first:
 * a cheap mix that differs per seed and word. */
static inline uint64_t tword(uint64_t seed, uint64_t word)
{
	uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ word * 0xBF58476D1CE4E5B9ull;
	x ^= x >> 31;
	x *= 0x94D049BB133111EBull;
	x ^= x >> 29;
	return x;
}

/* Byte off of checkpoint `seed`. */
static inline unsigned char tbyte(uint64_t seed, uint64_t off)
{
	return (unsigned char)(tword(seed, off / 8) >> (8 * (off % 8)));
}

static inline void tfill(unsigned char *buf, size_t len, uint64_t seed, uint64_t off)
{
	size_t i = 0;
	/* bytes up to the next word, whole words, the bytes after the last */
	for (; i < len && (off + i) % 8; i++)
		buf[i] = tbyte(seed, off + i);
	for (; i + 8 <= len; i += 8) {
		uint64_t x = tword(seed, (off + i) / 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		memcpy(buf + i, &x, 8); /* one store */
#else
		for (int k = 0; k < 8; k++)
			buf[i + k] = (unsigned char)(x >> (8 * k));
#endif
	}
	for (; i < len; i++)
		buf[i] = tbyte(seed, off + i);
}

/* Writes object `seed` of size bytes at path in chunks of about chunk. */
static inline void twrite(const char *path, uint64_t seed, uint64_t size, size_t chunk)
{
	ckc_handle_t *h;
	cr_assert_eq(ckc_open_write(path, 0644, &h), 0, "open_write %s", path);
	unsigned char *buf = malloc(chunk ? chunk : 1);
	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
		tfill(buf, n, seed, off);
		cr_assert_eq(ckc_pwrite(h, buf, n, off), (ssize_t)n, "pwrite %s at %llu", path,
			     (unsigned long long)off);
		off += n;
	}
	free(buf);
	cr_assert_eq(ckc_close(h), 0, "close %s", path);
}

/* Reads the whole object at path through the engine and compares every byte. */
static inline void tverify(const char *path, uint64_t seed, uint64_t size, size_t chunk)
{
	ckc_handle_t *h;
	int rc = ckc_open_read(path, &h);
	cr_assert_eq(rc, 0, "open_read %s: %d", path, rc);
	cr_assert_eq(ckc_handle_size(h), size, "size of %s", path);
	unsigned char *buf = malloc(chunk), *want = malloc(chunk);
	for (uint64_t off = 0; off < size;) {
		ssize_t n = ckc_pread(h, buf, chunk, off);
		cr_assert_gt(n, 0, "pread %s at %llu: %zd", path, (unsigned long long)off, n);
		tfill(want, (size_t)n, seed, off);
		cr_assert(memcmp(buf, want, (size_t)n) == 0, "bytes of %s differ at %llu", path,
			  (unsigned long long)off);
		off += (uint64_t)n;
	}
	cr_assert_eq(ckc_pread(h, buf, chunk, size), 0, "read past the end of %s", path);
	free(buf);
	free(want);
	cr_assert_eq(ckc_close(h), 0);
}

/* The engine holds nothing of path and leaves its reads to the real file
 * (ckc_open_read: -ENOENT; the wrappers then open the real file), whose
 * bytes are object seed of size bytes. */
static inline bool thome_matches(const char *path, uint64_t seed, uint64_t size);
static inline void tverify_real(const char *path, uint64_t seed, uint64_t size)
{
	ckc_handle_t *h;
	int rc = ckc_open_read(path, &h);
	if (rc == 0)
		ckc_close(h);
	cr_assert_eq(rc, -ENOENT, "open_read %s: %d, not left to the real file", path, rc);
	cr_assert(thome_matches(path, seed, size), "the real file %s", path);
}

/* Compares the real file at path with object seed; returns false if absent. */
static inline bool thome_matches(const char *path, uint64_t seed, uint64_t size)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, size, "real size of %s", path);
	unsigned char *buf = malloc(1 * MiB), *want = malloc(1 * MiB);
	for (uint64_t off = 0; off < size;) {
		ssize_t n = pread(fd, buf, 1 * MiB, (off_t)off);
		cr_assert_gt(n, 0);
		tfill(want, (size_t)n, seed, off);
		cr_assert(memcmp(buf, want, (size_t)n) == 0, "real bytes of %s differ at %llu", path,
			  (unsigned long long)off);
		off += (uint64_t)n;
	}
	free(buf);
	free(want);
	close(fd);
	return true;
}

static inline bool texists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Waits up to ms milliseconds until a read of path would be served by tier. */
static inline bool twait_where(const char *path, const char *tier, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		const char *w = ckc_where(path);
		if (w && !strcmp(w, tier))
			return true;
		usleep(10000);
	}
	return false;
}

/* The page cache as the tests want it: holding nothing of any file (the
 * prefetcher then promotes what the queue names, as it does when the
 * files are on the device only), or every file whole. */
static inline int64_t tcached_none(int fd, uint64_t off, uint64_t len)
{
	(void)fd, (void)off, (void)len;
	return 0;
}

static inline int64_t tcached_all(int fd, uint64_t off, uint64_t len)
{
	(void)fd, (void)off;
	return (int64_t)len;
}

/* Deterministic pseudo-random numbers for test plans. */
static inline uint64_t trand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#endif
