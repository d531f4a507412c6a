/* Readiness of tagged descriptors: poll, ppoll, select, pselect and
 * epoll_ctl. A tagged descriptor the cache serves is, to the kernel, an
 * O_PATH descriptor of a socket (poll answers POLLNVAL, select and epoll_ctl
 * EBADF); the program's file is a regular file, which the kernel always
 * reports ready for reading and writing, and which epoll refuses (EPERM).
 * These calls answer so for the tagged descriptors and ask the kernel about
 * the others, at once where a tagged one is ready. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "intercept.h"

/* (the C library declares poll's array write-only: it is read too) */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/* What the kernel reports of a regular file for the events asked. */
#define POLL_REGULAR (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM)
/* Entries whose numbers are kept aside on the stack (more: in place). */
#define POLL_FEW 1024

/* Whether fd is a descriptor the cache serves (not one handed over to its
 * real file, whose number names that file now). */
static bool poll_cached(int fd)
{
	if (fd < 0 || (size_t)fd > atomic_load_explicit(&ckc_vfd_hi, memory_order_relaxed))
		return false;
	return ckc_fd_cached(fd);
}

/* Whether any of the n entries is one. */
static bool poll_any(const struct pollfd *fds, nfds_t n)
{
	if (!fds || !atomic_load_explicit(&ckc_vfd_hi, memory_order_relaxed))
		return false;
	for (nfds_t i = 0; i < n; i++)
		if (poll_cached(fds[i].fd))
			return true;
	return false;
}

/* poll and ppoll with tagged entries: those are answered here, the others
 * asked of the kernel with the tagged ones' numbers made -1 meanwhile
 * (which poll skips; mine marks them) and no wait where a tagged one is
 * ready. real: the kernel's call with its wait (false: none). */
static int poll_mixed(struct pollfd *fds, nfds_t n, int (*real)(struct pollfd *, nfds_t, bool))
{
	bool few = n <= POLL_FEW;
	uint64_t marks[POLL_FEW / 64] = { 0 }, *mine = few ? marks : calloc((n + 63) / 64, sizeof(uint64_t));
	if (!mine)
		return real(fds, n, true); /* (the kernel's answer: POLLNVAL) */
	int ready = 0, others = 0;
	int keep[few ? n : 1];
	for (nfds_t i = 0; i < n; i++) {
		if (poll_cached(fds[i].fd)) {
			mine[i / 64] |= 1ull << (i % 64);
			if (few)
				keep[i] = fds[i].fd;
			fds[i].revents = (short)(fds[i].events & POLL_REGULAR);
			ready += fds[i].revents != 0;
		} else if (fds[i].fd >= 0) {
			others++;
		}
	}
	/* (a larger set keeps the numbers in the entries: the kernel's
	 * answer for those is POLLNVAL, replaced below) */
	for (nfds_t i = 0; i < n && few; i++)
		if (mine[i / 64] >> (i % 64) & 1)
			fds[i].fd = -1;
	int rc = others || !ready ? real(fds, n, ready == 0) : 0;
	int e = errno;
	int got = 0;
	for (nfds_t i = 0; i < n; i++) {
		if (mine[i / 64] >> (i % 64) & 1) {
			if (few)
				fds[i].fd = keep[i];
			fds[i].revents = (short)(fds[i].events & POLL_REGULAR);
		} else if (rc > 0 && fds[i].revents) {
			got++;
		}
	}
	if (!few)
		free(mine);
	if (rc < 0 && !(ready && e == EINTR)) {
		errno = e;
		return rc;
	}
	return got + ready;
}

static __thread int poll_timeout;

static int poll_real(struct pollfd *fds, nfds_t n, bool wait)
{
	return REAL(poll)(fds, n, wait ? poll_timeout : 0);
}

CKC_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!poll_any(fds, n))
		return REAL(poll)(fds, n, timeout);
	poll_timeout = timeout;
	return poll_mixed(fds, n, poll_real);
}

CKC_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n || !poll_any(fds, n))
		return REAL(__poll_chk)(fds, n, timeout, fdslen);
	poll_timeout = timeout;
	return poll_mixed(fds, n, poll_real);
}

static __thread const struct timespec *ppoll_ts;
static __thread const sigset_t *ppoll_mask;

static int ppoll_real(struct pollfd *fds, nfds_t n, bool wait)
{
	static const struct timespec zero = { 0, 0 };
	return REAL(ppoll)(fds, n, wait ? ppoll_ts : &zero, ppoll_mask);
}

CKC_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	if (!poll_any(fds, n))
		return REAL(ppoll)(fds, n, ts, mask);
	ppoll_ts = ts;
	ppoll_mask = mask;
	return poll_mixed(fds, n, ppoll_real);
}

CKC_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask,
			   size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n || !poll_any(fds, n))
		return REAL(__ppoll_chk)(fds, n, ts, mask, fdslen);
	ppoll_ts = ts;
	ppoll_mask = mask;
	return poll_mixed(fds, n, ppoll_real);
}

/* select and pselect: the tagged descriptors in the read and write sets are
 * ready (those in the exception set never are); the others are asked of
 * the kernel without them, at once where a tagged one is ready. */
static bool select_split(int n, fd_set *r, fd_set *w, fd_set *x, fd_set *tr, fd_set *tw, int *ready)
{
	size_t hi = atomic_load_explicit(&ckc_vfd_hi, memory_order_relaxed);
	bool any = false;
	FD_ZERO(tr);
	FD_ZERO(tw);
	*ready = 0;
	if (!hi || n <= 0)
		return false;
	for (int fd = 0; fd < n && fd < FD_SETSIZE && (size_t)fd <= hi; fd++) {
		bool in_r = r && FD_ISSET(fd, r), in_w = w && FD_ISSET(fd, w), in_x = x && FD_ISSET(fd, x);
		if (!(in_r || in_w || in_x) || !poll_cached(fd))
			continue;
		any = true;
		if (in_r) {
			FD_SET(fd, tr);
			FD_CLR(fd, r);
			++*ready;
		}
		if (in_w) {
			FD_SET(fd, tw);
			FD_CLR(fd, w);
			++*ready;
		}
		if (in_x)
			FD_CLR(fd, x);
	}
	return any;
}

/* The kernel's answer for the others, and the tagged ones put back. */
static int select_join(int rc, int n, fd_set *r, fd_set *w, fd_set *x, const fd_set *tr, const fd_set *tw,
		       int ready)
{
	int e = errno;
	if (rc < 0 && !(ready && e == EINTR)) {
		errno = e;
		return rc;
	}
	if (rc < 0) {
		/* interrupted, with tagged ones ready: only those */
		if (r)
			FD_ZERO(r);
		if (w)
			FD_ZERO(w);
		if (x)
			FD_ZERO(x);
		rc = 0;
	}
	for (int fd = 0; fd < n && fd < FD_SETSIZE; fd++) {
		if (FD_ISSET(fd, tr))
			FD_SET(fd, r);
		if (FD_ISSET(fd, tw))
			FD_SET(fd, w);
	}
	return rc + ready;
}

/* Whether only tagged descriptors were asked about (the kernel need not
 * be: it would wait for nothing else). */
static bool select_none(int n, const fd_set *r, const fd_set *w, const fd_set *x)
{
	for (int fd = 0; fd < n && fd < FD_SETSIZE; fd++)
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x)))
			return false;
	return true;
}

CKC_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *tv)
{
	fd_set tr, tw;
	int ready;
	if (!select_split(n, r, w, x, &tr, &tw, &ready))
		return REAL(select)(n, r, w, x, tv);
	struct timeval zero = { 0, 0 };
	int rc = select_none(n, r, w, x) ? 0 : REAL(select)(n, r, w, x, ready ? &zero : tv);
	return select_join(rc, n, r, w, x, &tr, &tw, ready);
}

CKC_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *ts, const sigset_t *mask)
{
	fd_set tr, tw;
	int ready;
	if (!select_split(n, r, w, x, &tr, &tw, &ready))
		return REAL(pselect)(n, r, w, x, ts, mask);
	static const struct timespec zero = { 0, 0 };
	int rc = select_none(n, r, w, x) ? 0 : REAL(pselect)(n, r, w, x, ready ? &zero : ts, mask);
	return select_join(rc, n, r, w, x, &tr, &tw, ready);
}

/* epoll takes no regular file: EPERM, as the kernel answers for one. */
CKC_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && poll_cached(fd)) {
		errno = EPERM;
		return -1;
	}
	return REAL(epoll_ctl)(epfd, op, fd, ev);
}
