/* The ssd tier: one sparse file per process in the private (0700) folder
 * under CKPTCACHE_SSD_DIR (state.c), opened with O_DIRECT where the file
 * system allows it, removed when the engine stops. Unaligned transfers go
 * through an aligned bounce buffer. A write the file system has no room
 * for (ENOSPC, EDQUOT) closes the tier to new copies (ckc_ssd_full). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy.h"
#include "engine_int.h"
#include "lanes.h"
#include "log.h"
#include "state.h"
#include "sys.h"

#define SSD_BOUNCE (4u << 20)

int ckc_ssd_open(ckc_tier_t *t, uint64_t capacity, const char *dir)
{
	char pdir[PATH_MAX], why[512];
	int rc, fd = -1;

	/* twice: another process may remove the folder, empty, just then */
	for (int tries = 0; tries < 2 && fd < 0; tries++) {
		rc = ckc_private_dir(dir, "CKPTCACHE_SSD_DIR", pdir, sizeof(pdir), why, sizeof(why));
		if (rc) {
			ckc_error("ssd tier: %s", why);
			return rc;
		}
		/* the pid and start time name this process: a later one tells a
		 * file left by a process that died from a live one's */
		if (snprintf(t->path, sizeof(t->path), "%s/ssd.%ld.%llu", pdir, (long)getpid(),
			     ckc_self_start()) >= (int)sizeof(t->path))
			return -ENAMETOOLONG;
		fd = ckc_own_open(t->path, O_RDWR | O_NOFOLLOW | O_DIRECT, false);
		t->direct = fd >= 0;
		if (fd < 0 && errno == EINVAL)
			fd = ckc_own_open(t->path, O_RDWR | O_NOFOLLOW, false);
		if (fd < 0 && errno != ENOENT)
			break;
	}
	if (fd < 0)
		return -errno;
	rc = arena_init(&t->arena, capacity, CKC_ALIGN);
	if (rc)
		goto fail;
	/* sparse: the file takes space on its file system as the tier holds
	 * checkpoints, not its whole size at start (the processes of a node
	 * each took a quarter of what was left, and a few of them filled the
	 * disk that the program's real files needed) */
	if (sys_ftruncate(fd, (off_t)t->arena.capacity) != 0) {
		rc = -errno;
		arena_fini(&t->arena);
		goto fail;
	}
	struct stat st;
	if (sys_fstat(fd, &st) != 0) {
		rc = -errno;
		arena_fini(&t->arena);
		goto fail;
	}
	t->dev = st.st_dev;
	t->fd = fd;
	return 0;
fail:
	sys_close(fd);
	sys_unlink(t->path);
	return rc;
}

void ckc_ssd_unlink(ckc_tier_t *t)
{
	if (t->fd >= 0 && t->path[0]) {
		sys_unlink(t->path);
		t->path[0] = '\0';
	}
}

void ckc_ssd_close(ckc_tier_t *t)
{
	if (t->fd >= 0) {
		sys_close(t->fd);
		if (t->path[0])
			sys_unlink(t->path);
	}
	t->fd = -1;
	arena_fini(&t->arena);
}

static bool aligned(const void *buf, uint64_t off, size_t len)
{
	return ((uintptr_t)buf % CKC_ALIGN) == 0 && off % CKC_ALIGN == 0 && len % CKC_ALIGN == 0;
}

static int ssd_put_bytes(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len);

/* The file system had no room for a write into the tier's file: the tier
 * takes no new copy from now on (ckc_place_reserve), and says so once; the
 * write's caller moves its bytes to the next tier. The copies it holds stay. */
static void ssd_full(ckc_tier_t *t, int err)
{
	if (!atomic_exchange(&t->full, true)) {
		ckc_warn("ssd tier: the file system of %s has no room for more (%s): the tier keeps "
			 "the copies it holds and takes no new ones",
			 t->path, strerror(-err));
	}
}

static int ssd_put(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len)
{
	int rc = ssd_put_bytes(t, aoff, buf, len);
	if (rc == -ENOSPC || rc == -EDQUOT)
		ssd_full(t, rc);
	return rc;
}

static int ssd_put_bytes(ckc_tier_t *t, uint64_t aoff, const void *buf, size_t len)
{
	if (!t->direct || aligned(buf, aoff, len))
		return ckc_io_pwrite_all(t->fd, buf, len, (off_t)aoff);
	/* O_DIRECT needs aligned memory, offsets and lengths: stage whole
	 * blocks, reading back the edges another extent may share. */
	char *bounce;
	if (sys_posix_memalign((void **)&bounce, CKC_ALIGN, SSD_BOUNCE))
		return -ENOMEM;
	int rc = 0;
	const char *src = buf;
	while (len > 0 && rc == 0) {
		uint64_t start = aoff & ~(uint64_t)(CKC_ALIGN - 1);
		uint64_t head = aoff - start;
		size_t n = SSD_BOUNCE - head < len ? SSD_BOUNCE - head : len;
		size_t span = (head + n + CKC_ALIGN - 1) & ~(size_t)(CKC_ALIGN - 1);
		if (head || (n % CKC_ALIGN)) {
			ssize_t r = ckc_io_pread_all(t->fd, bounce, span, (off_t)start);
			if (r < 0) {
				rc = (int)r;
				break;
			}
		}
		rc = ckc_copy_checked(bounce + head, src, n);
		if (rc)
			break;
		rc = ckc_io_pwrite_all(t->fd, bounce, span, (off_t)start);
		src += n;
		aoff += n;
		len -= n;
	}
	sys_free(bounce);
	return rc;
}

static int ssd_get(ckc_tier_t *t, uint64_t aoff, void *buf, size_t len)
{
	if (!t->direct || aligned(buf, aoff, len)) {
		ssize_t r = ckc_io_pread_all(t->fd, buf, len, (off_t)aoff);
		return r < 0 ? (int)r : (size_t)r == len ? 0 : -EIO;
	}
	char *bounce;
	if (sys_posix_memalign((void **)&bounce, CKC_ALIGN, SSD_BOUNCE))
		return -ENOMEM;
	int rc = 0;
	char *dst = buf;
	while (len > 0) {
		uint64_t start = aoff & ~(uint64_t)(CKC_ALIGN - 1);
		uint64_t head = aoff - start;
		size_t n = SSD_BOUNCE - head < len ? SSD_BOUNCE - head : len;
		size_t span = (head + n + CKC_ALIGN - 1) & ~(size_t)(CKC_ALIGN - 1);
		ssize_t r = ckc_io_pread_all(t->fd, bounce, span, (off_t)start);
		if (r < 0 || (size_t)r < head + n) {
			rc = r < 0 ? (int)r : -EIO;
			break;
		}
		rc = ckc_copy_checked(dst, bounce + head, n);
		if (rc)
			break;
		dst += n;
		aoff += n;
		len -= n;
	}
	sys_free(bounce);
	return rc;
}

const ckc_tier_ops_t ckc_tier_ssd_ops = {
	.put = ssd_put,
	.get = ssd_get,
	.finish = ckc_ssd_unlink,
	.teardown = ckc_ssd_close,
};
