/* The table of virtual descriptors: fd number -> the tagged file behind it.
 * Indexed directly so the fast path of every untagged read or write is one
 * load; sized from RLIMIT_NOFILE (at most 2^20 entries). */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "intercept.h"

_Atomic(ckc_vfd_t *) *ckc_vfd_tab;
size_t ckc_vfd_cap;

/* Serialises install and take, so dup2 onto a tagged number is atomic. */
static pthread_mutex_t fdtab_lock = PTHREAD_MUTEX_INITIALIZER;

int ckc_fdtab_init(void)
{
	struct rlimit rl;
	size_t cap = 1024;

	if (ckc_vfd_tab)
		return 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rlim_t want = rl.rlim_max == RLIM_INFINITY ? rl.rlim_cur : rl.rlim_max;
		if (want > cap)
			cap = want;
	}
	if (cap > (1u << 20))
		cap = 1u << 20;
	/* calloc'ed pages stay untouched (and unbacked) until used */
	ckc_vfd_tab = calloc(cap, sizeof(*ckc_vfd_tab));
	if (!ckc_vfd_tab)
		return -ENOMEM;
	ckc_vfd_cap = cap;
	return 0;
}

ckc_vfd_t *ckc_vfd_new(ckc_handle_t *h, int flags, const char *path)
{
	size_t n = strlen(path) + 1;
	ckc_vfd_t *v = malloc(sizeof(*v) + n);
	if (!v)
		return NULL;
	pthread_mutex_init(&v->lock, NULL);
	atomic_init(&v->refs, 0);
	v->h = h;
	v->pos = 0;
	v->flags = flags;
	memcpy(v->path, path, n);
	return v;
}

int ckc_vfd_install(int fd, ckc_vfd_t *v)
{
	if (fd < 0 || (size_t)fd >= ckc_vfd_cap)
		return -EMFILE;
	atomic_fetch_add(&v->refs, 1);
	pthread_mutex_lock(&fdtab_lock);
	ckc_vfd_t *old = atomic_exchange(&ckc_vfd_tab[fd], v);
	pthread_mutex_unlock(&fdtab_lock);
	if (old)
		ckc_vfd_put(old); /* the number was reused under us (dup2) */
	return 0;
}

ckc_vfd_t *ckc_vfd_check(int fd, ckc_vfd_t *v)
{
	int (*rf)(int, int, ...) = REAL(fcntl);
	int fl = rf ? rf(fd, F_GETFL) : O_PATH;

	if (fl >= 0 && (fl & O_PATH))
		return v;
	/* the number no longer holds our placeholder: forget it, once */
	pthread_mutex_lock(&fdtab_lock);
	bool mine = atomic_compare_exchange_strong(&ckc_vfd_tab[fd], &v, NULL);
	pthread_mutex_unlock(&fdtab_lock);
	if (mine)
		ckc_vfd_put(v);
	return NULL;
}

ckc_vfd_t *ckc_vfd_take(int fd)
{
	if (fd < 0 || (size_t)fd >= ckc_vfd_cap)
		return NULL;
	pthread_mutex_lock(&fdtab_lock);
	ckc_vfd_t *v = atomic_exchange(&ckc_vfd_tab[fd], NULL);
	pthread_mutex_unlock(&fdtab_lock);
	return v;
}

int ckc_vfd_put(ckc_vfd_t *v)
{
	int rc = 0;
	if (atomic_fetch_sub(&v->refs, 1) != 1)
		return 0;
	/* in a forked child, or once the engine stopped, the handle belongs
	 * to a cache that is not running here: only the descriptor goes */
	if (atomic_load(&ckc_icpt_on)) {
		ckc_enter();
		rc = ckc_close(v->h);
		ckc_leave();
	}
	pthread_mutex_destroy(&v->lock);
	free(v);
	return rc;
}

void ckc_fdtab_atfork(int phase)
{
	if (phase == 0)
		pthread_mutex_lock(&fdtab_lock);
	else if (phase == 1)
		pthread_mutex_unlock(&fdtab_lock);
	else
		pthread_mutex_init(&fdtab_lock, NULL);
}

int ckc_placeholder(int oflags)
{
	/* O_PATH: read, write, mmap, io_uring and every other data operation
	 * on it fail with EBADF, so a path around the library cannot touch
	 * wrong bytes. */
	int (*ropen)(const char *, int, ...) = REAL(open);
	if (!ropen)
		return -ENOSYS;
	int fd = ropen("/", O_PATH | O_DIRECTORY | (oflags & O_CLOEXEC));
	return fd < 0 ? -errno : fd;
}
