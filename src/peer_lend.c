/* Lending device memory between the ranks of a node (peer_lend.h). One
 * thread per process serves its entry's socket and its connections to the
 * peers it borrowed from; a capture that found no room hands it a
 * borrowing round and waits for it a bounded time. Messages are fixed-size
 * records on SOCK_SEQPACKET sockets; a grant carries its chunks' file
 * descriptors (at most LEND_FDS a message). This file owns the thread, the
 * lender's and the borrower's sides and the rounds; the messages' layout
 * and their sending and receiving are peer_lend_msg.c's. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "engine_int.h"
#include "log.h"
#include "peer.h"
#include "peer_lend.h"
#include "peer_lend_int.h"
#include "peer_sched.h"

/* poll(2) made here: the library exports its own poll (for the program's
 * checkpoint descriptors), which the engine must not call. */
static int lend_poll(struct pollfd *fds, nfds_t n, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	return (int)ckc_syscall6(SYS_ppoll, (long)fds, (long)n, ms < 0 ? 0 : (long)&ts, 0, 8, 0);
}
#include "thread.h"
#include "sys.h"

/* How long a borrower waits for each message of a grant. */
#define LEND_REPLY_MS 2000
/* After a round that asked lenders and got nothing, captures do not wait
 * for another for this long. (A round that found no lender with room on
 * the node's board asked nobody: the next miss looks again, so that room
 * a lender publishes later, its tier mapped in the background, is used
 * at once.) */
#define LEND_QUIET_NS 100000000ull

/* The lender's side of one borrower's connection. */
typedef struct loan {
	int fd;           /* -1: none */
	int slot;         /* the borrower's entry (-1: not yet said) */
	uint64_t chunk;
	uint64_t *h;      /* the handles lent, in the order granted */
	size_t n, cap;
	uint64_t taking;  /* bytes asked back, not yet returned */
} loan_t;

/* The borrower's side of its connection to one lender (by its entry). */
typedef struct debt {
	int fd;           /* -1: none */
	int home;         /* the lender's device, as this process numbers it */
	uint64_t bytes;   /* mapped now */
	bool lost;        /* the lender is gone: given back once flushed */
} debt_t;

static struct {
	ckc_mutex_t mx;
	pthread_cond_t round_cv; /* a borrowing round ended (done), or stop */
	pthread_cond_t back_cv;  /* lent bytes came back (taken_back_bytes), or stop */
	pthread_t thread;
	bool running;
	atomic_bool stop;
	int lfd, wake, slot;
	char name[108];    /* the socket name's stem, after its leading NUL */
	loan_t loan[CKC_PEER_MAX];
	debt_t debt[CKC_PEER_MAX];
	/* the borrowing round (mx) */
	uint64_t want;     /* bytes asked for, 0: none */
	uint64_t asked, done;
	bool last_got;
	uint64_t last_round_ns;
	ckc_lend_stats_t st;
	uint64_t lent_now;
	uint64_t take;     /* bytes the program needs back from borrowers (mx) */
	atomic_uint_fast64_t placed;
} L = { .mx = CKC_MUTEX_INIT(LEND), .round_cv = PTHREAD_COND_INITIALIZER,
	.back_cv = PTHREAD_COND_INITIALIZER, .lfd = -1, .wake = -1 };

CKC_LOCKS_AT_START(lend_mx, ckc_locks_add, &L.mx)

/* ---- messages ------------------------------------------------------------ */

static int lend_addr(struct sockaddr_un *a, int slot)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "%s.lend%d", L.name, slot);
	if (n < 0 || (size_t)n >= sizeof(a->sun_path) - 1)
		return -ENAMETOOLONG;
	return (int)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}


/* ---- the lender's side ---------------------------------------------------- */

/* Keeps handle h of loan l; false when there is no memory for it. */
static bool loan_add(loan_t *l, uint64_t h)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		uint64_t *p = sys_realloc(l->h, cap * sizeof(*p));
		if (!p)
			return false;
		l->h = p;
		l->cap = cap;
	}
	l->h[l->n++] = h;
	return true;
}

/* Gives up the last n chunks of loan l: they came back (grow: the
 * region may map them again) or the program took them. */
static void loan_drop(loan_t *l, size_t n, bool grow)
{
	if (n > l->n)
		n = l->n;
	for (size_t i = 0; i < n; i++)
		ckc_gpu_lend_free(l->h[--l->n]);
	uint64_t bytes = (uint64_t)n * l->chunk;
	if (bytes && grow && !atomic_load(&L.stop))
		ckc_gpu_lend_back(bytes, true);
	ckc_mutex_lock(&L.mx);
	L.lent_now -= bytes < L.lent_now ? bytes : L.lent_now;
	L.st.returned_bytes += bytes;
	if (!grow)
		L.st.taken_back_bytes += bytes;
	pthread_cond_broadcast(&L.back_cv);
	ckc_mutex_unlock(&L.mx);
}

static void loan_end(loan_t *l)
{
	if (l->n && !atomic_load(&L.stop))
		ckc_info("peer GPUs: entry %d is gone: the %llu bytes it borrowed came back", l->slot,
			 (unsigned long long)l->n * l->chunk);
	loan_drop(l, l->n, true);
	sys_close(l->fd);
	l->fd = -1;
	l->slot = -1;
	l->taking = 0;
}

/* A borrower asks for m->n chunks of m->chunk bytes. */
static void loan_grant(loan_t *l, const lend_msg_t *m)
{
	lend_msg_t r = { .magic = LEND_MAGIC, .op = LEND_GRANT, .slot = L.slot, .chunk = m->chunk };
	uint64_t cut = 0, mine = 0;
	int made = 0, *fds = NULL;
	l->slot = m->slot;
	/* one chunk size a connection: the borrower's */
	if (m->n > 0 && m->chunk > 0 && (!l->n || l->chunk == m->chunk) &&
	    ckc_gpu_lend_cut((uint64_t)m->n * m->chunk, &cut, &mine) == 0 && cut) {
		l->chunk = m->chunk;
		int want = (int)(cut / m->chunk < (uint64_t)m->n ? cut / m->chunk : (uint64_t)m->n);
		fds = sys_malloc(sizeof(int) * (size_t)(want > 0 ? want : 1));
		for (; fds && made < want; made++) {
			uint64_t h;
			if (ckc_gpu_lend_alloc(m->chunk, &fds[made], &h) != 0)
				break;
			if (!loan_add(l, h)) {
				sys_close(fds[made]);
				ckc_gpu_lend_free(h);
				break;
			}
		}
		if (cut > (uint64_t)made * m->chunk)
			ckc_gpu_lend_back(cut - (uint64_t)made * m->chunk, true);
	}
	/* in messages of at most LEND_FDS descriptors; one empty message
	 * when there is nothing to lend */
	for (int i = 0; i < made || i == 0; i += LEND_FDS) {
		r.n = made - i < LEND_FDS ? made - i : LEND_FDS;
		r.bytes = (uint64_t)(made - i - r.n);
		if (lend_send(l->fd, &r, fds ? fds + i : NULL, r.n) != 0)
			break;
	}
	if (fds)
		lend_close_fds(fds, made);
	sys_free(fds);
	ckc_mutex_lock(&L.mx);
	if (made) {
		L.st.lent_bytes += (uint64_t)made * m->chunk;
		L.lent_now += (uint64_t)made * m->chunk;
		if (L.lent_now > L.st.lent_now_max)
			L.st.lent_now_max = L.lent_now;
	} else {
		L.st.lend_refused++;
	}
	ckc_mutex_unlock(&L.mx);
	if (made)
		ckc_info("peer GPUs: lent %llu bytes of this device to entry %d",
			 (unsigned long long)made * m->chunk, m->slot);
}

static void loan_serve(loan_t *l)
{
	lend_msg_t m;
	int fds[LEND_FDS], nfd;
	int rc = lend_recv(l->fd, &m, fds, &nfd);
	lend_close_fds(fds, nfd);
	if (rc <= 0) {
		/* the borrower gave everything back by leaving, or died: the
		 * driver dropped its mappings with it */
		loan_end(l);
		return;
	}
	if (m.op == LEND_BORROW)
		loan_grant(l, &m);
	else if (m.op == LEND_RETURNED && m.n > 0) {
		bool taken = l->taking > 0;
		uint64_t bytes = (uint64_t)m.n * l->chunk;
		l->taking -= bytes < l->taking ? bytes : l->taking;
		loan_drop(l, (size_t)m.n, !taken);
	}
}

/* Asks borrowers for take bytes of what they have. */
static void lend_ask_back(uint64_t take)
{
	uint64_t asked = 0;
	for (int i = 0; i < CKC_PEER_MAX && asked < take; i++) {
		loan_t *l = &L.loan[i];
		uint64_t has = (uint64_t)l->n * l->chunk;
		has -= l->taking < has ? l->taking : has;
		if (l->fd < 0 || !has)
			continue;
		uint64_t ask = take - asked < has ? take - asked : has;
		lend_msg_t m = { .magic = LEND_MAGIC, .op = LEND_TAKE, .slot = L.slot, .bytes = ask, .chunk = l->chunk };
		if (lend_send(l->fd, &m, NULL, 0) == 0) {
			l->taking += ask;
			asked += ask;
		}
	}
}

static void lend_accept(void)
{
	int fd = sys_accept4(L.lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (!lend_same_user(fd)) {
		sys_close(fd);
		return;
	}
	for (int i = 0; i < CKC_PEER_MAX; i++)
		if (L.loan[i].fd < 0) {
			L.loan[i].fd = fd;
			L.loan[i].slot = -1;
			return;
		}
	sys_close(fd);
}

/* ---- the borrower's side ------------------------------------------------------ */

/* Gives back up to want bytes of what lender lent (UINT64_MAX: all, and
 * nothing more goes there), telling it when it still listens. */
static void debt_return(int lender, uint64_t want, double wait_s)
{
	debt_t *d = &L.debt[lender];
	uint64_t back = ckc_gpu_borrow_return(lender, want, wait_s);
	uint64_t chunk = ckc_gpu_chunk();
	if (back && chunk) {
		d->bytes -= back < d->bytes ? back : d->bytes;
		if (d->fd >= 0) {
			lend_msg_t r = { .magic = LEND_MAGIC, .op = LEND_RETURNED, .slot = L.slot,
					 .n = (int32_t)(back / chunk), .chunk = chunk };
			lend_send(d->fd, &r, NULL, 0);
		}
		ckc_mutex_lock(&L.mx);
		L.st.gave_back_bytes += back;
		ckc_mutex_unlock(&L.mx);
		ckc_info("peer GPUs: gave %llu bytes back to entry %d", (unsigned long long)back, lender);
	}
}

static void debt_lost(int lender)
{
	debt_t *d = &L.debt[lender];
	if (d->fd >= 0)
		sys_close(d->fd);
	d->fd = -1;
	if (!d->lost) {
		d->lost = true;
		ckc_mutex_lock(&L.mx);
		L.st.lenders_lost++;
		ckc_mutex_unlock(&L.mx);
		if (d->bytes)
			ckc_info("peer GPUs: entry %d, which lent %llu bytes, is gone: they are given back once "
				 "flushed", lender, (unsigned long long)d->bytes);
	}
	debt_return(lender, UINT64_MAX, 0);
}

/* One message from a lender outside a round. */
static void debt_message(int lender, const lend_msg_t *m)
{
	if (m->op == LEND_TAKE)
		debt_return(lender, m->bytes, CKC_PEER_RETURN_WAIT_S);
}

static void debt_serve(int lender)
{
	lend_msg_t m;
	int fds[LEND_FDS], nfd;
	int rc = lend_recv(L.debt[lender].fd, &m, fds, &nfd);
	lend_close_fds(fds, nfd);
	if (rc <= 0)
		debt_lost(lender);
	else
		debt_message(lender, &m);
}

static int lend_connect(int slot)
{
	struct sockaddr_un a;
	int len = lend_addr(&a, slot);
	if (len < 0)
		return len;
	int fd = sys_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, (socklen_t)len) != 0 || !lend_same_user(fd)) {
		int e = errno ? errno : EPERM;
		sys_close(fd);
		return -e;
	}
	return fd;
}

/* Asks part's lender for its bytes; maps what it grants. True when some
 * was mapped. */
static bool borrow_from(const ckc_lend_part_t *part, uint64_t chunk)
{
	debt_t *d = &L.debt[part->slot];
	if (d->lost)
		return false;
	if (d->fd < 0 && (d->fd = lend_connect(part->slot)) < 0) {
		d->fd = -1;
		return false;
	}
	d->home = part->home;
	uint64_t n = (part->bytes + chunk - 1) / chunk;
	lend_msg_t q = { .magic = LEND_MAGIC, .op = LEND_BORROW, .slot = L.slot,
			 .n = (int32_t)(n < 1024 ? n : 1024), .chunk = chunk };
	if (lend_send(d->fd, &q, NULL, 0) != 0) {
		debt_lost(part->slot);
		return false;
	}
	int mapped = 0, unmapped = 0;
	bool failed = false;
	for (;;) {
		struct pollfd pf = { d->fd, POLLIN, 0 };
		if (lend_poll(&pf, 1, LEND_REPLY_MS) <= 0) {
			if (mapped) {
				/* what it granted is mapped here: it is not the
				 * lender's to reuse any more, it goes back once flushed */
				debt_lost(part->slot);
				return true;
			}
			/* no answer (the lender's own thread may be waiting on
			 * this one): the connection goes, the lender gives up
			 * what it may have granted, and a later round asks anew */
			sys_close(d->fd);
			d->fd = -1;
			return false;
		}
		lend_msg_t m;
		int fds[LEND_FDS], nfd;
		int rc = lend_recv(d->fd, &m, fds, &nfd);
		if (rc <= 0) {
			lend_close_fds(fds, nfd);
			debt_lost(part->slot);
			return mapped > 0;
		}
		if (m.op != LEND_GRANT) {
			lend_close_fds(fds, nfd);
			debt_message(part->slot, &m);
			continue;
		}
		int got = 0;
		if (nfd > 0 && !failed) {
			got = ckc_gpu_borrow_add(part->slot, part->home, fds, nfd, chunk);
			if (got < 0)
				got = 0;
			failed = got < nfd;
		}
		mapped += got;
		unmapped += nfd - got;
		lend_close_fds(fds, nfd);
		if (m.bytes == 0)
			break;
	}
	if (unmapped > 0) {
		/* the last ones granted: the lender keeps them no longer */
		lend_msg_t r = { .magic = LEND_MAGIC, .op = LEND_RETURNED, .slot = L.slot, .n = unmapped,
				 .chunk = chunk };
		lend_send(d->fd, &r, NULL, 0);
	}
	if (mapped) {
		d->bytes += (uint64_t)mapped * chunk;
		ckc_mutex_lock(&L.mx);
		L.st.borrowed_bytes += (uint64_t)mapped * chunk;
		ckc_mutex_unlock(&L.mx);
		ckc_info("peer GPUs: borrowed %llu bytes of entry %d's device", (unsigned long long)mapped * chunk,
			 part->slot);
	}
	return mapped > 0;
}

/* A round: asks the lenders the plan names for len bytes. *asked: some
 * lender was asked. */
static bool borrow_round(uint64_t len, bool *asked)
{
	ckc_lend_part_t parts[CKC_PEER_MAX];
	uint64_t chunk = ckc_gpu_chunk();
	int n = chunk ? ckc_peer_plan_parts(len, parts, CKC_PEER_MAX) : 0;
	bool got = false;
	*asked = n > 0;
	for (int i = 0; i < n; i++)
		got |= borrow_from(&parts[i], chunk);
	return got;
}

/* ---- the thread ---------------------------------------------------------------- */

static void *lend_main(void *arg)
{
	(void)arg;
	ckc_io_guard = 1;
	ckc_tl_background = true;
	while (!atomic_load(&L.stop)) {
		struct pollfd pf[2 + 2 * CKC_PEER_MAX];
		int who[2 + 2 * CKC_PEER_MAX], n = 0;
		pf[n] = (struct pollfd){ L.wake, POLLIN, 0 };
		who[n++] = -1;
		pf[n] = (struct pollfd){ L.lfd, POLLIN, 0 };
		who[n++] = -2;
		for (int i = 0; i < CKC_PEER_MAX; i++) {
			if (L.loan[i].fd >= 0) {
				pf[n] = (struct pollfd){ L.loan[i].fd, POLLIN, 0 };
				who[n++] = i;
			}
			if (L.debt[i].fd >= 0) {
				pf[n] = (struct pollfd){ L.debt[i].fd, POLLIN, 0 };
				who[n++] = CKC_PEER_MAX + i;
			}
		}
		int r = lend_poll(pf, (nfds_t)n, 100);
		if (atomic_load(&L.stop))
			break;
		for (int k = 0; r > 0 && k < n; k++) {
			if (!pf[k].revents)
				continue;
			if (who[k] == -1) {
				eventfd_t v;
				eventfd_read(L.wake, &v);
			} else if (who[k] == -2) {
				lend_accept();
			} else if (who[k] < CKC_PEER_MAX) {
				if (L.loan[who[k]].fd == pf[k].fd)
					loan_serve(&L.loan[who[k]]);
			} else if (L.debt[who[k] - CKC_PEER_MAX].fd == pf[k].fd) {
				debt_serve(who[k] - CKC_PEER_MAX);
			}
		}
		/* what lenders that are gone lent: back once flushed */
		for (int i = 0; i < CKC_PEER_MAX; i++)
			if (L.debt[i].lost && L.debt[i].bytes)
				debt_return(i, UINT64_MAX, 0);
		ckc_mutex_lock(&L.mx);
		uint64_t want = L.want, ticket = L.asked, take = L.take;
		L.want = L.take = 0;
		ckc_mutex_unlock(&L.mx);
		if (take)
			lend_ask_back(take);
		if (want) {
			bool asked;
			bool got = borrow_round(want, &asked);
			ckc_mutex_lock(&L.mx);
			L.done = ticket;
			L.last_got = got;
			if (asked) {
				L.last_round_ns = ckc_now_ns();
				L.st.borrow_rounds++;
			}
			pthread_cond_broadcast(&L.round_cv);
			ckc_mutex_unlock(&L.mx);
		}
	}
	return NULL;
}

int ckc_lend_start(const char *name, int slot)
{
	struct sockaddr_un a;
	if (L.running)
		return 0;
	snprintf(L.name, sizeof(L.name), "%s", name);
	L.slot = slot;
	int len = lend_addr(&a, slot);
	if (len < 0)
		return len;
	for (int i = 0; i < CKC_PEER_MAX; i++) {
		L.loan[i].fd = L.debt[i].fd = -1;
		L.loan[i].slot = -1;
	}
	L.lfd = sys_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (L.lfd < 0)
		return -errno;
	if (bind(L.lfd, (struct sockaddr *)&a, (socklen_t)len) != 0 || listen(L.lfd, CKC_PEER_MAX) != 0) {
		int e = errno;
		sys_close(L.lfd);
		L.lfd = -1;
		return -e;
	}
	L.wake = sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (L.wake < 0) {
		int e = errno;
		sys_close(L.lfd);
		L.lfd = -1;
		return -e;
	}
	atomic_store(&L.stop, false);
	if (ckc_thread_start(&L.thread, lend_main, NULL, "ckc-lend", false) != 0) {
		sys_close(L.lfd);
		sys_close(L.wake);
		L.lfd = L.wake = -1;
		return -EAGAIN;
	}
	ckc_mutex_lock(&L.mx);
	L.running = true;
	ckc_mutex_unlock(&L.mx);
	return 0;
}

void ckc_lend_stop(void)
{
	ckc_mutex_lock(&L.mx);
	bool was = L.running;
	L.running = false;
	pthread_cond_broadcast(&L.round_cv);
	pthread_cond_broadcast(&L.back_cv);
	ckc_mutex_unlock(&L.mx);
	if (!was)
		return;
	atomic_store(&L.stop, true);
	eventfd_write(L.wake, 1);
	pthread_join(L.thread, NULL);
	for (int i = 0; i < CKC_PEER_MAX; i++) {
		if (L.loan[i].fd >= 0)
			loan_end(&L.loan[i]);
		sys_free(L.loan[i].h);
		L.loan[i].h = NULL;
		L.loan[i].cap = 0;
		if (L.debt[i].fd >= 0)
			sys_close(L.debt[i].fd);
		L.debt[i].fd = -1;
	}
	sys_close(L.lfd);
	sys_close(L.wake);
	L.lfd = L.wake = -1;
}

/* The time wait_s from now, for a wait on L's conditions. */
static void lend_deadline(struct timespec *ts, double wait_s)
{
	clock_gettime(CLOCK_REALTIME, ts);
	uint64_t ns = (uint64_t)ts->tv_nsec + (uint64_t)(wait_s * 1e9);
	ts->tv_sec += (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

void ckc_lend_atfork_child(void)
{
	/* the thread is the parent's; so are the connections, which a child
	 * that outlives the parent must not keep open */
	if (!L.running)
		return;
	L.running = false;
	for (int i = 0; i < CKC_PEER_MAX; i++) {
		if (L.loan[i].fd >= 0)
			sys_close(L.loan[i].fd);
		if (L.debt[i].fd >= 0)
			sys_close(L.debt[i].fd);
		L.loan[i].fd = L.debt[i].fd = -1;
		L.loan[i].n = 0;
	}
	sys_close(L.lfd);
	sys_close(L.wake);
	L.lfd = L.wake = -1;
}

bool ckc_lend_may_borrow(void)
{
	ckc_mutex_lock(&L.mx);
	bool ok = L.running && (L.last_got || !L.last_round_ns || ckc_now_ns() - L.last_round_ns > LEND_QUIET_NS);
	ckc_mutex_unlock(&L.mx);
	return ok;
}

bool ckc_lend_borrow(uint64_t len, double wait_s)
{
	ckc_mutex_lock(&L.mx);
	if (!L.running) {
		ckc_mutex_unlock(&L.mx);
		return false;
	}
	uint64_t ticket = ++L.asked;
	if (len > L.want)
		L.want = len;
	eventfd_write(L.wake, 1);
	struct timespec ts;
	lend_deadline(&ts, wait_s);
	while (L.running && L.done < ticket)
		if (ckc_cond_timedwait(&L.round_cv, &L.mx, &ts) == ETIMEDOUT)
			break;
	bool got = L.done >= ticket && L.last_got;
	ckc_mutex_unlock(&L.mx);
	return got;
}

uint64_t ckc_lend_take_back(uint64_t want, double wait_s)
{
	ckc_mutex_lock(&L.mx);
	if (!L.running || !L.lent_now || !want) {
		ckc_mutex_unlock(&L.mx);
		return 0;
	}
	uint64_t before = L.st.taken_back_bytes;
	uint64_t asked = want < L.lent_now ? want : L.lent_now;
	L.take += asked;
	eventfd_write(L.wake, 1);
	struct timespec ts;
	lend_deadline(&ts, wait_s);
	while (L.running && L.st.taken_back_bytes - before < asked)
		if (ckc_cond_timedwait(&L.back_cv, &L.mx, &ts) == ETIMEDOUT)
			break;
	uint64_t got = L.st.taken_back_bytes - before;
	ckc_mutex_unlock(&L.mx);
	ckc_info("peer GPUs: the program needs this device's memory: %llu of %llu bytes lent came back",
		 (unsigned long long)got, (unsigned long long)asked);
	return got;
}

void ckc_lend_stats(ckc_lend_stats_t *s)
{
	ckc_mutex_lock(&L.mx);
	*s = L.st;
	ckc_mutex_unlock(&L.mx);
}

void ckc_lend_placed(uint64_t bytes)
{
	atomic_fetch_add(&L.placed, bytes);
}

uint64_t ckc_lend_placed_bytes(void)
{
	return atomic_load(&L.placed);
}