/* The peer board (peerboard.h): claiming, publishing and reading entries
 * in shared memory, and the link graph of the live ranks. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "peerboard.h"
#include "sys.h"

#define READ_TRIES 64

static uint64_t bits_of(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

static double double_of(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof(d));
	return d;
}

int peerboard_init(peer_board_t *b, const char *job)
{
	uint64_t magic = 0;
	if (!atomic_compare_exchange_strong(&b->magic, &magic, PEERBOARD_MAGIC)) {
		if (magic != PEERBOARD_MAGIC)
			return -EPROTO;
		/* made by another rank: wait (briefly) for its job name */
		for (int k = 0; k < 1000000 && !atomic_load(&b->ready); k++)
			;
		if (!atomic_load(&b->ready))
			return -EPROTO;
		return strncmp(b->job, job, PEERBOARD_JOB) == 0 ? 0 : -EEXIST;
	}
	strncpy(b->job, job, PEERBOARD_JOB - 1);
	b->job[PEERBOARD_JOB - 1] = '\0';
	atomic_store(&b->ready, 1);
	return 0;
}

int peerboard_claim(peer_board_t *b, int slot, pid_t pid, peer_alive_fn alive)
{
	if (slot < 0 || slot >= CKC_PEER_MAX || pid <= 0)
		return -EINVAL;
	peer_entry_t *e = &b->e[slot];
	for (;;) {
		int32_t cur = atomic_load(&e->pid);
		if (cur == pid)
			return 0;
		if (cur && alive && alive(cur))
			return -EBUSY;
		if (!atomic_compare_exchange_strong(&e->pid, &cur, pid))
			continue; /* another claimant was first: look again */
		/* a dead owner may have died writing: even again, nothing yet */
		uint32_t s = atomic_load(&e->seq);
		atomic_store(&e->seq, s + (s & 1u) + 1u);
		atomic_store(&e->rem, 0);
		atomic_store(&e->spare, 0);
		atomic_store(&e->device, -1);
		atomic_store(&e->bus, 0);
		atomic_fetch_add(&e->seq, 1u);
		return 0;
	}
}

void peerboard_release(peer_board_t *b, int slot, pid_t pid)
{
	if (slot < 0 || slot >= CKC_PEER_MAX)
		return;
	int32_t cur = pid;
	atomic_compare_exchange_strong(&b->e[slot].pid, &cur, 0);
}

void peerboard_publish(peer_board_t *b, int slot, pid_t pid, const peer_info_t *v)
{
	if (slot < 0 || slot >= CKC_PEER_MAX || atomic_load(&b->e[slot].pid) != pid)
		return;
	peer_entry_t *e = &b->e[slot];
	atomic_fetch_add(&e->seq, 1u); /* odd: being written */
	atomic_store_explicit(&e->device, v->device, memory_order_relaxed);
	atomic_store_explicit(&e->bus, v->bus, memory_order_relaxed);
	atomic_store_explicit(&e->spare, v->spare, memory_order_relaxed);
	atomic_store_explicit(&e->rem, v->rem, memory_order_relaxed);
	atomic_store_explicit(&e->host_bw, bits_of(v->host_bw), memory_order_relaxed);
	for (int j = 0; j < CKC_PEER_MAX; j++)
		atomic_store_explicit(&e->bw[j], bits_of(v->bw[j]), memory_order_relaxed);
	atomic_fetch_add(&e->seq, 1u); /* even: whole */
}

static void set_one(peer_board_t *b, int slot, pid_t pid, size_t field, uint64_t v)
{
	if (slot < 0 || slot >= CKC_PEER_MAX || atomic_load(&b->e[slot].pid) != pid)
		return;
	peer_entry_t *e = &b->e[slot];
	atomic_fetch_add(&e->seq, 1u);
	atomic_store_explicit((_Atomic uint64_t *)((char *)e + field), v, memory_order_relaxed);
	atomic_fetch_add(&e->seq, 1u);
}

void peerboard_set_spare(peer_board_t *b, int slot, pid_t pid, uint64_t spare)
{
	set_one(b, slot, pid, offsetof(peer_entry_t, spare), spare);
}

void peerboard_set_rem(peer_board_t *b, int slot, pid_t pid, uint64_t rem)
{
	set_one(b, slot, pid, offsetof(peer_entry_t, rem), rem);
}

uint64_t peerboard_bus(const char *pci)
{
	unsigned dom, bus, dev, fn;
	int end = 0;
	if (!pci || sscanf(pci, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &end) != 4 || pci[end] ||
	    bus > 0xff || dev > 0x1f || fn > 7)
		return 0;
	/* the low bit set: never 0 for a real address */
	return ((uint64_t)dom << 32 | bus << 16 | dev << 8 | fn << 4) | 1u;
}

bool peerboard_read(peer_board_t *b, int slot, peer_info_t *v, pid_t *owner)
{
	if (slot < 0 || slot >= CKC_PEER_MAX)
		return false;
	peer_entry_t *e = &b->e[slot];
	for (int k = 0; k < READ_TRIES; k++) {
		uint32_t s0 = atomic_load(&e->seq);
		int32_t pid = atomic_load(&e->pid);
		if (!pid)
			return false;
		if (s0 & 1u)
			continue;
		v->device = atomic_load_explicit(&e->device, memory_order_relaxed);
		v->bus = atomic_load_explicit(&e->bus, memory_order_relaxed);
		v->spare = atomic_load_explicit(&e->spare, memory_order_relaxed);
		v->rem = atomic_load_explicit(&e->rem, memory_order_relaxed);
		v->host_bw = double_of(atomic_load_explicit(&e->host_bw, memory_order_relaxed));
		for (int j = 0; j < CKC_PEER_MAX; j++)
			v->bw[j] = double_of(atomic_load_explicit(&e->bw[j], memory_order_relaxed));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load(&e->seq) == s0 && atomic_load(&e->pid) == pid) {
			if (owner)
				*owner = pid;
			return true;
		}
	}
	return false;
}

int peerboard_graph(peer_board_t *b, double unit, peer_alive_fn alive, ckc_peer_graph_t *g,
		    int slot_of[CKC_PEER_MAX])
{
	peer_info_t info[CKC_PEER_MAX];
	int n = 0;

	memset(g, 0, sizeof(*g));
	g->unit = unit;
	for (int s = 0; s < CKC_PEER_MAX; s++) {
		pid_t owner;
		if (!peerboard_read(b, s, &info[n], &owner) || (alive && !alive(owner)) || info[n].host_bw <= 0)
			continue;
		slot_of[n++] = s;
	}
	g->n = n;
	for (int i = 0; i < n; i++) {
		g->host_bw[i] = info[i].host_bw;
		g->spare[i] = (uint64_t)((double)info[i].spare / unit);
		g->rem[i] = (uint64_t)(((double)info[i].rem + unit - 1) / unit);
		for (int j = 0; j < n; j++)
			g->bw[i][j] = i == j ? 0 : info[i].bw[slot_of[j]];
	}
	return n;
}
