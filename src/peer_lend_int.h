/* What the parts of lending share (peer_lend.c, peer_lend_msg.c): the
 * layout of a message and the calls that send and receive one. */
#ifndef CKC_PEER_LEND_INT_H
#define CKC_PEER_LEND_INT_H

#include <stdbool.h>
#include <stdint.h>

/* "ckcL" and the layout's version */
#define LEND_MAGIC 0x4c636b01u
#define LEND_FDS 32

enum { LEND_BORROW = 1, LEND_GRANT, LEND_TAKE, LEND_RETURNED };

typedef struct lend_msg {
	uint32_t magic, op;
	int32_t slot; /* the sender's board entry */
	int32_t n;    /* BORROW: chunks asked; GRANT: descriptors attached; RETURNED: chunks */
	uint64_t bytes; /* GRANT: chunks still to come; TAKE: bytes asked back */
	uint64_t chunk; /* the chunks' size */
} lend_msg_t;

/* Sends m with fds (n of them) attached: 0 or -EPIPE. */
int lend_send(int fd, const lend_msg_t *m, const int *fds, int n);
/* Receives one message (its descriptors in fds, *nfd of them, closed by
 * the caller). 1, 0 at the end of the connection, -errno. */
int lend_recv(int fd, lend_msg_t *m, int *fds, int *nfd);
/* Closes the n descriptors of fds that are open. */
void lend_close_fds(int *fds, int n);
/* Whether the process at the other end of fd is this user's. */
bool lend_same_user(int fd);

#endif
