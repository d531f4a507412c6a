/* Peer GPUs (peer.h): when to join the node's peer board, what this
 * process publishes in its entry (its device, its gpu tier's free room,
 * the bytes that did not fit it, its link estimates) and the schedule the
 * board implies at exit. The driver's peer queries are optional: without
 * them (or without a link) a link is unknown and counts as none. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "engine_int.h"
#include "log.h"
#include "peer.h"
#include "peer_lend.h"
#include "peerseg.h"

/* The schedules' unit: what the board holds in bytes, they count in MiB. */
#define PEER_UNIT (1024.0 * 1024.0)
/* How long a process waits for another that is initialising the segment. */
#define PEER_WAIT_S 2.0
/* Nominal link figures, for want of a measurement: a peer link with
 * native atomics (NVLink) and one without (PCIe), each divided by one
 * plus the driver's performance rank of the link (0: the best). */
#define PEER_BW_NVLINK 48e9
#define PEER_BW_PCIE 12e9

/* Guarded by ckc_eng.lock once joined. */
static struct {
	bool on;
	ckc_peer_t mode;         /* greedy or maxflow */
	ckc_peerseg_t seg;
	int device, nord, slot;
	uint64_t bus;            /* this device's */
	uint64_t ord_bus[CKC_GPU_MAXDEV]; /* each ordinal's, as this process numbers them */
	double ord_bw[CKC_GPU_MAXDEV];    /* from this device to each ordinal's */
	uint32_t seen;           /* the entries with an owner, when the links were last derived */
	uint64_t spare, rem;     /* as published */
	bool rem_closed;         /* the last capture found room: the next miss starts anew */
	bool lending;            /* peer_lend's thread serves this entry */
	int ranks_max;
	/* at exit */
	bool done, removed;
	int ranks;
	uint64_t to_peers, to_host;
	double local_s, greedy_s, maxflow_s;
} peer = { .seg = { .fd = -1, .slot = -1 } };

#ifdef HAVE_CUDA_H
#include <cuda.h>

typedef CUresult (*busid_fn)(char *, int, CUdevice);
typedef CUresult (*canpeer_fn)(int *, CUdevice, CUdevice);
typedef CUresult (*p2pattr_fn)(int *, CUdevice_P2PAttribute, CUdevice, CUdevice);
typedef CUresult (*count_fn)(int *);

static void *peer_sym(const char *name)
{
	return ckc_svc.gpu_sym ? ckc_svc.gpu_sym(name) : NULL;
}

/* Each ordinal's PCI address, and the link estimate from device to it
 * (0: none or unknown). Returns whether any other device is reachable. */
static bool peer_probe(int device)
{
	busid_fn busid = (busid_fn)peer_sym("cuDeviceGetPCIBusId");
	canpeer_fn canpeer = (canpeer_fn)peer_sym("cuDeviceCanAccessPeer");
	p2pattr_fn attr = (p2pattr_fn)peer_sym("cuDeviceGetP2PAttribute");
	count_fn count = (count_fn)peer_sym("cuDeviceGetCount");
	int n = 0;
	bool any = false;

	if (!count || count(&n) != CUDA_SUCCESS || n < 1)
		n = 1;
	peer.nord = n < CKC_GPU_MAXDEV ? n : CKC_GPU_MAXDEV;
	for (int k = 0; k < peer.nord; k++) {
		char pci[32] = "";
		peer.ord_bus[k] = busid && busid(pci, (int)sizeof(pci), k) == CUDA_SUCCESS ? peerboard_bus(pci) : 0;
		peer.ord_bw[k] = 0;
		int can = 0, perf = 0, atomics = 0;
		if (k == device || !canpeer || canpeer(&can, device, k) != CUDA_SUCCESS || !can)
			continue;
		if (attr && attr(&perf, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, device, k) != CUDA_SUCCESS)
			perf = 0;
		if (attr && attr(&atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, device, k) != CUDA_SUCCESS)
			atomics = 0;
		peer.ord_bw[k] = (atomics ? PEER_BW_NVLINK : PEER_BW_PCIE) / (1.0 + (perf > 0 ? perf : 0));
		any = true;
	}
	peer.bus = device < peer.nord ? peer.ord_bus[device] : 0;
	return any;
}
#else
static bool peer_probe(int device)
{
	(void)device;
	peer.nord = 0;
	return false;
}
#endif

/* The entries that have an owner, as a bit set. */
static uint32_t peer_owners(void)
{
	uint32_t m = 0;
	for (int i = 0; i < CKC_PEER_MAX; i++)
		if (atomic_load_explicit(&peer.seg.board->e[i].pid, memory_order_relaxed))
			m |= 1u << i;
	return m;
}

/* This process's entry, its links to the entries there now derived from
 * their PCI addresses (a device this process does not see, or its own
 * device shared with another rank, has no link). Lock held. */
static void peer_publish(void)
{
	peer_info_t v;
	memset(&v, 0, sizeof(v));
	v.device = peer.device;
	v.bus = peer.bus;
	v.spare = peer.spare;
	v.rem = peer.rem;
	v.host_bw = ckc_eng.edge[0].bw > 0 ? ckc_eng.edge[0].bw : 1e9;
	peer.seen = peer_owners();
	for (int s = 0; s < CKC_PEER_MAX; s++) {
		peer_info_t o;
		if (s == peer.seg.slot || !peerboard_read(peer.seg.board, s, &o, NULL) || !o.bus)
			continue;
		for (int k = 0; k < peer.nord; k++)
			if (peer.ord_bus[k] == o.bus)
				v.bw[s] = peer.ord_bw[k];
	}
	peerboard_publish(peer.seg.board, peer.seg.slot, peer.seg.pid, &v);
	int n = __builtin_popcount(peer.seen);
	if (n > peer.ranks_max)
		peer.ranks_max = n;
}

static void peer_say_swept(const char *path, bool removed, void *ctx)
{
	(void)ctx;
	if (removed)
		ckc_info("peer segment %s: no process held it (its job's processes all died): removed", path);
}

/* The mode asked for, or the reason there is none (NULL: on). */
static const char *peer_why_off(const ckc_config_t *c, int device, ckc_peer_t *mode)
{
	bool p2p = peer_probe(device);
	*mode = c->peer == CKC_PEER_AUTO ? CKC_PEER_MAXFLOW : c->peer;
	if (!c->job[0])
		return "no job id (SLURM_JOB_ID, OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE) to name the "
		       "node's segment by";
	if (c->local_rank < 0 || c->local_rank >= CKC_PEER_MAX)
		return c->local_rank < 0 ? "no local rank (SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, "
					   "MPI_LOCALRANKID or PMIX_LOCAL_RANK)"
					 : "the local rank is beyond the board's 16 entries";
	if (c->peer == CKC_PEER_AUTO && c->local_size < 2)
		return "one process of the job on this node";
	if (c->peer == CKC_PEER_AUTO && !p2p)
		return "no peer access from this device to another";
	return NULL;
}

void ckc_peer_attach(int device)
{
	const ckc_config_t *c = &ckc_eng.cfg;
	ckc_peer_t mode;
	char path[PATH_MAX];

	ckc_mutex_lock(&ckc_eng.lock);
	bool once = peer.on || peer.done;
	eng_unlock();
	if (c->peer == CKC_PEER_OFF || once)
		return;
	const char *why = peer_why_off(c, device, &mode);
	int rc = why ? 0 : ckc_peerseg_path(path, sizeof(path), CKC_PEERSEG_DIR, c->job, c->node);
	if (!why && rc)
		why = "the segment's name is too long";
	if (why) {
		if (c->peer == CKC_PEER_AUTO)
			ckc_info("peer GPUs: off (%s)", why);
		else
			ckc_warn("CKPTCACHE_PEER=%s: %s: peer GPUs are off", ckc_config_peer_name(c->peer), why);
		return;
	}
	rc = ckc_peerseg_open(&peer.seg, path, c->job, (int)c->local_rank, PEER_WAIT_S);
	if (rc) {
		ckc_warn("peer segment %s: cannot join it (%s): peer GPUs are off", path,
			 rc == -EPERM ? "not a private file of this user" : strerror(-rc));
		return;
	}
	if (peer.seg.initialised)
		ckc_peerseg_sweep(CKC_PEERSEG_DIR, true, peer_say_swept, NULL);
	if (peer.seg.was_stale)
		ckc_info("peer segment %s: left by a job whose processes all died: initialised again", path);
	if (peer.seg.reclaimed)
		ckc_info("peer segment %s: entry %d taken over from a process that died", path, peer.seg.slot);
	ckc_mutex_lock(&ckc_eng.lock);
	peer.mode = mode;
	peer.device = device;
	peer.slot = peer.seg.slot;
	peer.spare = ckc_gpu_lendable();
	peer.on = true;
	peer_publish();
	eng_unlock();
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	rc = ckc_lend_start(name, peer.seg.slot);
	peer.lending = rc == 0;
	if (rc)
		ckc_warn("peer GPUs: %s, entry %d of %s: cannot serve the node's ranks (%s): the schedule is "
			 "computed, nothing is lent",
			 ckc_config_peer_name(mode), peer.seg.slot, path, strerror(-rc));
	else
		ckc_info("peer GPUs: %s, entry %d of %s, lending and borrowing device memory",
			 ckc_config_peer_name(mode), peer.seg.slot, path);
}

/* The link graph of the live ranks on the board (*n of them; rank k is
 * entry slot_of[k]): this process's rank in it, -1 when it is not there. */
static int peer_graph(ckc_peer_graph_t *g, int slot_of[CKC_PEER_MAX], int *n)
{
	int me = -1;
	*n = peerboard_graph(peer.seg.board, PEER_UNIT, ckc_peerseg_alive, g, slot_of);
	for (int k = 0; k < *n; k++)
		me = slot_of[k] == peer.seg.slot ? k : me;
	return me;
}

int ckc_peer_plan_parts(uint64_t len, ckc_lend_part_t *parts, int max)
{
	ckc_peer_graph_t g;
	ckc_peer_plan_t p;
	int slot_of[CKC_PEER_MAX], n, c = 0;
	if (!peer.on || !len)
		return 0;
	int me = peer_graph(&g, slot_of, &n);
	if (me < 0)
		return 0;
	g.rem[me] = (uint64_t)(((double)len + PEER_UNIT - 1) / PEER_UNIT);
	if (peer.mode == CKC_PEER_GREEDY)
		ckc_peer_greedy(&g, &p);
	else
		ckc_peer_maxflow(&g, &p);
	for (int j = 0; j < n && c < max; j++) {
		peer_info_t o;
		if (j == me || !p.to[me][j] || !peerboard_read(peer.seg.board, slot_of[j], &o, NULL) || !o.bus)
			continue;
		int home = -1;
		for (int k = 0; k < peer.nord && home < 0; k++)
			if (peer.ord_bus[k] == o.bus && peer.ord_bw[k] > 0)
				home = k;
		if (home < 0)
			continue;
		parts[c].slot = slot_of[j];
		parts[c].home = home;
		parts[c].bytes = (uint64_t)((double)p.to[me][j] * PEER_UNIT);
		c++;
	}
	return c;
}

void ckc_peer_room(void)
{
	if (!peer.on)
		return;
	uint64_t spare = ckc_gpu_lendable();
	if (peer_owners() != peer.seen) {
		peer.spare = spare;
		peer_publish(); /* a rank came or went: the links again */
	} else if (spare != peer.spare) {
		peer.spare = spare;
		peerboard_set_spare(peer.seg.board, peer.seg.slot, peer.seg.pid, spare);
	}
}

void ckc_peer_remainder(uint64_t len)
{
	if (!peer.on)
		return;
	if (!len) {
		peer.rem_closed = true;
		return;
	}
	/* the misses since the tier last had room: one checkpoint's remainder */
	peer.rem = peer.rem_closed ? len : peer.rem + len;
	peer.rem_closed = false;
	peerboard_set_rem(peer.seg.board, peer.seg.slot, peer.seg.pid, peer.rem);
}

/* The plan's units of this process's rank k, in bytes. */
static void peer_plan_bytes(const ckc_peer_plan_t *p, int n, int k)
{
	uint64_t to = 0;
	for (int j = 0; j < n; j++)
		to += p->to[k][j];
	peer.to_peers = (uint64_t)((double)to * PEER_UNIT);
	peer.to_host = (uint64_t)((double)p->to_host[k] * PEER_UNIT);
}

void ckc_peer_finish(void)
{
	if (!peer.on)
		return;
	peer.spare = ckc_gpu_lendable();
	peer_publish();
	ckc_peer_graph_t g;
	ckc_peer_plan_t p;
	int slot_of[CKC_PEER_MAX], n;
	int me = peer_graph(&g, slot_of, &n);
	peer.ranks = n;
	ckc_peer_local(&g, &p);
	peer.local_s = ckc_peer_makespan(&g, &p);
	ckc_peer_greedy(&g, &p);
	peer.greedy_s = ckc_peer_makespan(&g, &p);
	if (me >= 0 && peer.mode == CKC_PEER_GREEDY)
		peer_plan_bytes(&p, n, me);
	ckc_peer_maxflow(&g, &p);
	peer.maxflow_s = ckc_peer_makespan(&g, &p);
	if (me >= 0 && peer.mode == CKC_PEER_MAXFLOW)
		peer_plan_bytes(&p, n, me);
	peer.on = false;
	peer.done = true;
}

void ckc_peer_release(void)
{
	if (!peer.done || peer.seg.fd < 0)
		return;
	bool removed = ckc_peerseg_close(&peer.seg) == 1;
	ckc_mutex_lock(&ckc_eng.lock);
	peer.removed = removed;
	eng_unlock();
}

void ckc_peer_atfork_child(void)
{
	ckc_lend_atfork_child();
	if (peer.on)
		ckc_peerseg_forget(&peer.seg);
	peer.on = false;
	peer.done = true;
}

void ckc_peer_stats(ckc_stats_t *s)
{
	if (!peer.on && !peer.done)
		return;
	s->peer_mode = ckc_config_peer_name(peer.mode);
	s->peer_slot = peer.slot;
	s->peer_ranks = peer.ranks;
	s->peer_ranks_max = peer.ranks_max;
	s->peer_was_stale = peer.seg.was_stale;
	s->peer_reclaimed = peer.seg.reclaimed;
	s->peer_removed = peer.removed;
	s->peer_rem_bytes = peer.rem;
	s->peer_to_peers_bytes = peer.to_peers;
	s->peer_to_host_bytes = peer.to_host;
	s->peer_local_s = peer.local_s;
	s->peer_greedy_s = peer.greedy_s;
	s->peer_maxflow_s = peer.maxflow_s;
	s->peer_lending = peer.lending;
	ckc_lend_stats(&s->peer_lend);
	s->peer_placed_bytes = ckc_lend_placed_bytes();
}
