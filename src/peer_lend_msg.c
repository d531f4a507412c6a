/* The messages of lending between the ranks of a node: fixed-size records
 * on SOCK_SEQPACKET sockets, a grant's file descriptors attached
 * (SCM_RIGHTS), sent and received by the lending thread (peer_lend.c); and
 * the check that the other end is this user's. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine_int.h"
#include "peer_lend_int.h"
#include "sys.h"

/* ---- messages ------------------------------------------------------------ */

/* Sends m with fds (n of them) attached. */
int lend_send(int fd, const lend_msg_t *m, const int *fds, int n)
{
	struct iovec v = { (void *)m, sizeof(*m) };
	union {
		char buf[CMSG_SPACE(sizeof(int) * LEND_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = &v, .msg_iovlen = 1 };
	if (n > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	}
	long r = ckc_syscall6(SYS_sendmsg, fd, (long)&mh, MSG_NOSIGNAL, 0, 0, 0);
	return r == (long)sizeof(*m) ? 0 : -EPIPE;
}

/* Receives one message (its descriptors in fds, *nfd of them, closed by
 * the caller). 1, 0 at the end of the connection, -errno. */
int lend_recv(int fd, lend_msg_t *m, int *fds, int *nfd)
{
	struct iovec v = { m, sizeof(*m) };
	union {
		char buf[CMSG_SPACE(sizeof(int) * LEND_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = &v, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	*nfd = 0;
	long r = ckc_syscall6(SYS_recvmsg, fd, (long)&mh, MSG_CMSG_CLOEXEC, 0, 0, 0);
	if (r < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++) {
				int x;
				memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (*nfd < LEND_FDS)
					fds[(*nfd)++] = x;
				else
					sys_close(x);
			}
		}
	if (r == 0)
		return 0;
	if (r != (long)sizeof(*m) || m->magic != LEND_MAGIC || (mh.msg_flags & MSG_CTRUNC)) {
		for (int i = 0; i < *nfd; i++)
			sys_close(fds[i]);
		*nfd = 0;
		return -EPROTO;
	}
	return 1;
}

void lend_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			sys_close(fds[i]);
}

/* Whether the process at the other end of fd is this user's. */
bool lend_same_user(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == geteuid();
}
