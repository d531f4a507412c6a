/* Tests of the gpu tier and device capture in the engine, without a GPU: the
 * driver the tier reaches through ckc_svc.gpu_sym is a small stand-in whose
 * "device memory" is host memory (copies are memcpy), so captures,
 * attachment, copies in, reads answered by references, flushes, prefetches,
 * the elastic release and the exit evacuation all run here, and every byte
 * read back is compared with the byte written. */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "engine_util.h"

#include "engine_int.h"
#include "fake_cuda.h"
#include "ranges.h"
#include "tier.h"

/* ---- fixtures --------------------------------------------------------- */

static tenv_t env;

/* What the interposer would say of any host memory (ckc_services_t.host_kind):
 * pinned unless a test says otherwise, so that no copy runs in lanes. */
static atomic_int host_kind_now = CKC_MEM_PINNED;

static int host_kind(const void *p)
{
	(void)p;
	return atomic_load(&host_kind_now);
}

/* The chunks a tier of bytes is mapped in: an eighth of it each, at least
 * the driver's 2 MiB, at most 256 MiB. */
static int tier_chunks(uint64_t bytes)
{
	uint64_t c = bytes / 8 < 256 * MiB ? bytes / 8 : 256 * MiB;
	c = (c + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
	return (int)(bytes / c);
}

/* The next gpu_start populates its host tier whole at start. */
static bool start_whole;

static void gpu_start(uint64_t gpu_bytes, uint64_t host_bytes, ckc_persist_t persist)
{
#ifndef HAVE_CUDA_H
	cr_skip_test("built without the CUDA headers: no gpu tier");
#endif
	tenv_make(&env);
	ckc_services_set(&(ckc_services_t){ .gpu_sym = fake_sym, .host_kind = host_kind });
	fake_creates = fake_releases = 0;
	ckc_config_t c = tcfg(&env, host_bytes, 0);
	c.capture = CKC_CAPTURE_DEVICE;
	c.gpu_cache = gpu_bytes;
	c.gpu_cache_pct = -1;
	c.persist = persist;
	c.lanes = 2; /* a helper even on two CPUs */
	c.host_whole = start_whole;
	if (getenv("TGPU_DEBUG"))
		c.log_level = CKC_LOG_DEBUG;
	cr_assert_eq(ckc_init_config(&c), 0);
	cr_assert_eq(ckc_gpu_attach((void *)0x1, 0), 0, "the stand-in driver brings the tier up");
	ckc_wait_ready();
}

static void gpu_stop(void)
{
	ckc_shutdown();
	ckc_services_set(&(ckc_services_t){ 0 });
	tenv_clean(&env);
}

/* A "device buffer" holding checkpoint bytes: plain memory here. */
static unsigned char *dev_buf(size_t n, uint64_t seed)
{
	unsigned char *d = malloc(n);
	cr_assert_not_null(d);
	tfill(d, n, seed, 0);
	return d;
}

/* A capture of n bytes of d on device dev whose host destination starts
 * skew bytes into a page, as the interposer makes it: a reference and the
 * device address. */
static ckc_ref_t *capture_on(int dev, const unsigned char *d, size_t n, unsigned skew)
{
	ckc_ref_t *r;
	uint64_t dptr;
	cr_assert_eq(ckc_capture_begin(n, skew, dev, &r, &dptr), 0);
	cr_assert_eq(ckc_gpu_device_of(dptr), dev, "the copy lands in the region of its device");
	uint64_t in_page = dptr & 4095;
	cr_assert_eq(in_page, skew, "byte 0 lands at the host page offset");
	memcpy((void *)(uintptr_t)dptr, d, n); /* the device-to-device copy */
	return r;
}

static ckc_ref_t *capture(const unsigned char *d, size_t n, unsigned skew)
{
	return capture_on(0, d, n, skew);
}

/* A checkpoint of n bytes of seed written as the interposer writes a
 * captured one: attached when the gpu tier has room, else the bytes as the
 * program had them. */
static void put_ckpt(const char *path, uint64_t seed, size_t n)
{
	unsigned char *d = dev_buf(n, seed);
	ckc_handle_t *h;
	ckc_ref_t *r;
	uint64_t dptr;
	cr_assert_eq(ckc_open_write(path, 0644, &h), 0);
	if (ckc_capture_begin(n, 0, 0, &r, &dptr) == 0) {
		memcpy((void *)(uintptr_t)dptr, d, n);
		cr_assert_eq(ckc_pwrite_ref(h, r, 0, n, 0), (ssize_t)n);
		ckc_ref_put(r);
	} else {
		cr_assert_eq(ckc_pwrite(h, d, n, 0), (ssize_t)n);
	}
	cr_assert_eq(ckc_close(h), 0);
	free(d);
}

/* ---- tests ------------------------------------------------------------ */

Test(gpu, capture_attaches_and_reads_back_every_byte)
{
	gpu_start(512 * MiB, 256 * MiB, CKC_PERSIST_ALWAYS);
	char path[PATH_MAX];
	tpath(&env, path, 0);
	size_t n = 8 * MiB + 100;
	unsigned char *d = dev_buf(n, 7);
	ckc_ref_t *r = capture(d, n, 16);

	ckc_handle_t *h;
	cr_assert_eq(ckc_open_write(path, 0644, &h), 0);
	cr_assert_eq(ckc_pwrite_ref(h, r, 0, n, 0), (ssize_t)n);
	cr_assert_eq(ckc_close(h), 0);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_expect_eq(st.cap_attached, 1, "a whole capture at the end of the file is attached");
	cr_expect_str_eq(ckc_where(path), "gpu");

	/* the reference now names the checkpoint's bytes */
	unsigned char *back = malloc(n);
	cr_assert_eq(ckc_ref_fill(r, 0, back, n), 0);
	cr_expect_eq(memcmp(back, d, n), 0);
	ckc_ref_put(r);

	/* a read answered by a reference, then by bytes */
	cr_assert_eq(ckc_open_read(path, &h), 0);
	ckc_ref_t *rr;
	cr_assert_eq(ckc_pread_ref(h, 4096, n, &rr), (ssize_t)(n - 4096), "clipped at the end");
	memset(back, 0, n);
	cr_assert_eq(ckc_ref_fill(rr, 0, back, n - 4096), 0);
	cr_expect_eq(memcmp(back, d + 4096, n - 4096), 0);
	uint64_t a;
	cr_expect_eq(ckc_ref_addr(rr, 0, n - 4096, &a), 0, "one extent: contiguous");
	ckc_ref_put(rr);
	memset(back, 0, n);
	cr_assert_eq(ckc_pread(h, back, n, 0), (ssize_t)n);
	cr_expect_eq(memcmp(back, d, n), 0);
	cr_assert_eq(ckc_close(h), 0);

	/* and at its real path after the flushes */
	cr_assert_eq(ckc_wait_flushed(), 0);
	cr_expect(thome_matches(path, 7, n));
	free(back);
	free(d);
	gpu_stop();
}

/* A capture whose device copy completes in stream order: here it completes
 * only when the tier waits for it (ckc_svc.gpu_settle), so a read of the tier
 * that did not wait would find zeros. */
static _Atomic(void *) pend_dst;
static const void *pend_src;
static size_t pend_n;
static atomic_int pend_waits;

static void pend_settle(void)
{
	atomic_fetch_add(&pend_waits, 1);
	void *d = atomic_exchange(&pend_dst, NULL);
	if (d)
		memcpy(d, pend_src, pend_n);
}

Test(gpu, the_tier_waits_for_a_capture_completing_in_stream_order_before_it_reads)
{
	gpu_start(512 * MiB, 256 * MiB, CKC_PERSIST_ALWAYS);
	char path[PATH_MAX];
	tpath(&env, path, 0);
	size_t n = 4 * MiB + 10;
	unsigned char *d = dev_buf(n, 9);
	ckc_ref_t *r;
	uint64_t dptr;
	cr_assert_eq(ckc_capture_begin(n, 0, 0, &r, &dptr), 0);
	memset((void *)(uintptr_t)dptr, 0, n);
	pend_src = d;
	pend_n = n;
	atomic_store(&pend_waits, 0);
	atomic_store(&pend_dst, (void *)(uintptr_t)dptr);
	ckc_services_set(&(ckc_services_t){ .gpu_sym = fake_sym, .gpu_settle = pend_settle });

	ckc_handle_t *h;
	cr_assert_eq(ckc_open_write(path, 0644, &h), 0);
	cr_assert_eq(ckc_pwrite_ref(h, r, 0, n, 0), (ssize_t)n);
	cr_assert_eq(ckc_close(h), 0);
	ckc_ref_put(r);
	cr_assert_eq(ckc_wait_flushed(), 0);
	cr_expect(thome_matches(path, 9, n), "the flush read the bytes after the capture completed");
	cr_expect(atomic_load(&pend_waits) > 0, "the tier waited for the capture");
	tverify(path, 9, n, n);
	ckc_services_set(&(ckc_services_t){ .gpu_sym = fake_sym });
	free(d);
	gpu_stop();
}

Test(gpu, without_pinned_buffers_transfers_go_direct_and_keep_every_byte)
{
	/* no pinned memory at all: the host tier stays pageable, the background
	 * transfers have no pinned stage and small reads no bounce buffer, so
	 * every copy is made straight from or to the host bytes */
	atomic_store(&fake_no_pinned, true);
	gpu_start(256 * MiB, 48 * MiB, CKC_PERSIST_ALWAYS);
	size_t n = 6 * MiB + 333;
	int count = 12;
	for (int i = 0; i < count; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		put_ckpt(path, 300 + (uint64_t)i, n);
	}
	cr_assert_eq(ckc_wait_flushed(), 0);
	for (int i = count - 1; i >= 0; i--) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		cr_expect(thome_matches(path, 300 + (uint64_t)i, n), "%s", path);
		tverify(path, 300 + (uint64_t)i, n, n);
	}
	/* a small read of a gpu copy, which would use the bounce buffer */
	char path[PATH_MAX];
	tpath(&env, path, count - 1);
	unsigned char small[100], want[100];
	ckc_handle_t *h;
	cr_assert_eq(ckc_open_read(path, &h), 0);
	cr_assert_eq(ckc_pread(h, small, sizeof(small), 4096), (ssize_t)sizeof(small));
	cr_assert_eq(ckc_close(h), 0);
	tfill(want, sizeof(want), 300 + (uint64_t)(count - 1), 4096);
	cr_expect_eq(memcmp(small, want, sizeof(small)), 0);
	gpu_stop();
	atomic_store(&fake_no_pinned, false);
}

Test(gpu, header_then_capture_is_copied_in_and_stays_in_order)
{
	gpu_start(512 * MiB, 256 * MiB, CKC_PERSIST_ALWAYS);
	char path[PATH_MAX];
	tpath(&env, path, 1);
	size_t n = 3 * MiB;
	unsigned char hdr[100], tail[8];
	tfill(hdr, sizeof(hdr), 11, 0);
	tfill(tail, sizeof(tail), 12, 0);
	unsigned char *d = dev_buf(n, 13);

	ckc_handle_t *h;
	cr_assert_eq(ckc_open_write(path, 0644, &h), 0);
	cr_assert_eq(ckc_pwrite(h, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	/* a whole capture after a header: attached behind the header's bytes */
	ckc_ref_t *r = capture(d, n, 0);
	cr_assert_eq(ckc_pwrite_ref(h, r, 0, n, sizeof(hdr)), (ssize_t)n);
	cr_assert_eq(ckc_pwrite(h, tail, sizeof(tail), sizeof(hdr) + n), (ssize_t)sizeof(tail));
	/* part of a capture: copied in */
	ckc_ref_t *r2 = capture(d, n, 0);
	cr_assert_eq(ckc_pwrite_ref(h, r2, 1000, 5000, sizeof(hdr) + n + sizeof(tail)), 5000);
	cr_assert_eq(ckc_close(h), 0);
	ckc_ref_put(r2);
	ckc_ref_put(r);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_expect_eq(st.cap_attached, 1);
	cr_expect_eq(st.cap_copied_in, 1);

	size_t total = sizeof(hdr) + n + sizeof(tail) + 5000;
	unsigned char *want = malloc(total), *got = malloc(total);
	memcpy(want, hdr, sizeof(hdr));
	memcpy(want + sizeof(hdr), d, n);
	memcpy(want + sizeof(hdr) + n, tail, sizeof(tail));
	memcpy(want + sizeof(hdr) + n + sizeof(tail), d + 1000, 5000);
	cr_assert_eq(ckc_open_read(path, &h), 0);
	cr_assert_eq(ckc_pread(h, got, total, 0), (ssize_t)total);
	cr_expect_eq(memcmp(got, want, total), 0, "every byte in file order");
	cr_assert_eq(ckc_close(h), 0);
	cr_assert_eq(ckc_wait_flushed(), 0);
	int fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	memset(got, 0, total);
	cr_expect_eq(pread(fd, got, total, 0), (ssize_t)total);
	cr_expect_eq(memcmp(got, want, total), 0, "the real file too");
	close(fd);
	free(want);
	free(got);
	free(d);
	gpu_stop();
}

Test(gpu, a_tier_smaller_than_a_chunk_is_one_smaller_chunk_and_captures)
{
	/* a 128 MiB tier (tests/gpu/run --quick): mapped whole, in one chunk
	 * of its size, not left empty for want of a 256 MiB chunk */
	gpu_start(128 * MiB, 64 * MiB, CKC_PERSIST_ALWAYS);
	ckc_stats_t st;
	for (int i = 0; i < 200 && fake_creates < tier_chunks(128 * MiB); i++)
		usleep(10000);
	ckc_stats_get(&st);
	cr_assert_eq(st.gpu_mapped_bytes, 128 * MiB, "the whole tier is mapped");
	char path[PATH_MAX];
	tpath(&env, path, 0);
	put_ckpt(path, 9, 64 * MiB);
	ckc_stats_get(&st);
	cr_expect_eq(st.cap_attached, 1, "the capture was attached in the gpu tier");
	cr_expect_str_eq(ckc_where(path), "gpu");
	tverify(path, 9, 64 * MiB, 1 * MiB);
	gpu_stop();
}

Test(gpu, small_reads_of_a_copy_in_device_memory_come_from_one_window)
{
	/* stdio and Python read in 8 KiB pieces: one device transfer per
	 * window, not one per piece */
	gpu_start(256 * MiB, 64 * MiB, CKC_PERSIST_ALWAYS);
	char path[PATH_MAX];
	tpath(&env, path, 0);
	size_t n = 20 * MiB + 777;
	put_ckpt(path, 21, n);
	cr_assert_str_eq(ckc_where(path), "gpu");
	ckc_stats_t before, after;
	ckc_stats_get(&before);
	tverify(path, 21, n, 8192);
	ckc_stats_get(&after);
	uint64_t pieces = (n + 8191) / 8192, transfers = after.tier[0].read_ops - before.tier[0].read_ops;
	cr_expect_eq(after.tier[0].hits - before.tier[0].hits, pieces, "every piece was served by the gpu tier");
	cr_assert_leq(transfers, 3, "%llu device transfers for %llu pieces of 8 KiB (a window is 8 MiB)",
		      (unsigned long long)transfers, (unsigned long long)pieces);
	/* and a large read still goes straight to the tier */
	tverify(path, 21, n, 4 * MiB);
	gpu_stop();
}

Test(gpu, a_host_tier_under_it_grows_with_use_and_is_not_registered_while_the_program_runs)
{
	/* a 2 GiB host tier under a 256 MiB gpu tier: only the room the
	 * flushes use is populated, not 2 GiB at start, and nothing is
	 * registered (registering held up the program's own CUDA calls) */
	int pins0 = atomic_load(&fake_pins);
	gpu_start(256 * MiB, 2048 * MiB, CKC_PERSIST_ALWAYS);
	for (int i = 0; i < 6; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		put_ckpt(path, 300 + (uint64_t)i, 16 * MiB);
	}
	cr_assert_eq(ckc_wait_flushed(), 0);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_assert_eq(st.tier[1].capacity, 2048 * MiB, "tier 1 is the host tier");
	cr_assert_lt(st.tier[1].populated_bytes, 1024 * MiB, "the tier was not populated whole (%llu bytes)",
		     (unsigned long long)st.tier[1].populated_bytes);
	cr_assert_eq(atomic_load(&fake_pins), pins0, "no piece of it was registered");
	for (int i = 0; i < 6; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		tverify(path, 300 + (uint64_t)i, 16 * MiB, 4 * MiB);
	}
	gpu_stop();
}

Test(gpu, a_host_tier_populated_whole_is_registered_in_pieces_and_unregistered_at_the_end)
{
	/* the host tier registers its own memory, piece by piece, through
	 * the gpu tier's functions; the flushes then use it directly */
	int pins0 = atomic_load(&fake_pins);
	start_whole = true;
	gpu_start(64 * MiB, 64 * MiB, CKC_PERSIST_ALWAYS);
	start_whole = false;
	int want = (int)(64 * MiB / CKC_PIN_PIECE);
	for (int i = 0; i < 500 && atomic_load(&fake_pins) - pins0 < want; i++)
		usleep(10000);
	cr_assert_eq(atomic_load(&fake_pins) - pins0, want, "%d pieces registered, %d expected",
		     atomic_load(&fake_pins) - pins0, want);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_assert(st.host_pinned, "the statistics say the host tier was pinned");
	for (int i = 0; i < 4; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		put_ckpt(path, 400 + (uint64_t)i, 16 * MiB);
	}
	cr_assert_eq(ckc_wait_flushed(), 0);
	for (int i = 0; i < 4; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		tverify(path, 400 + (uint64_t)i, 16 * MiB, 4 * MiB);
	}
	gpu_stop();
	cr_expect_eq(atomic_load(&fake_pins), pins0, "every piece unregistered at the end");
}

Test(gpu, a_host_tier_the_driver_will_not_register_stays_pageable_and_keeps_every_byte)
{
	/* the registration fails at its first piece: nothing is counted as
	 * pinned, nothing is left registered, and the flushes go through the
	 * threads' own buffers (or directly) */
	int pins0 = atomic_load(&fake_pins), tries0 = atomic_load(&fake_pin_tries);
	atomic_store(&fake_no_pinned, true);
	start_whole = true;
	gpu_start(64 * MiB, 64 * MiB, CKC_PERSIST_ALWAYS);
	start_whole = false;
	for (int i = 0; i < 500 && atomic_load(&fake_pin_tries) == tries0; i++)
		usleep(10000);
	cr_assert_gt(atomic_load(&fake_pin_tries), tries0, "the tier's registration was tried");
	usleep(20000); /* and its failure handled */
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_expect(!st.host_pinned, "a tier the driver refused is not reported pinned");
	cr_expect_eq(atomic_load(&fake_pins), pins0);
	for (int i = 0; i < 4; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		put_ckpt(path, 450 + (uint64_t)i, 16 * MiB);
	}
	cr_assert_eq(ckc_wait_flushed(), 0);
	for (int i = 0; i < 4; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		tverify(path, 450 + (uint64_t)i, 16 * MiB, 4 * MiB);
		cr_expect(thome_matches(path, 450 + (uint64_t)i, 16 * MiB), "%s at its real path", path);
	}
	gpu_stop();
	atomic_store(&fake_no_pinned, false);
	cr_expect_eq(atomic_load(&fake_pins), pins0);
}

Test(gpu, history_larger_than_the_tier_flows_down_and_comes_back)
{
	/* 24 checkpoints of 4 MiB through a 32 MiB gpu tier and a 48 MiB host
	 * tier, read back in reverse: evicted, flushed, prefetched */
	gpu_start(256 * MiB, 48 * MiB, CKC_PERSIST_ALWAYS);
	/* the stand-in maps whole 256 MiB chunks; the arena is that one chunk */
	size_t n = 4 * MiB;
	int count = 24;
	for (int i = 0; i < count; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		put_ckpt(path, 100 + (uint64_t)i, n);
		cr_assert_eq(ckc_hint_enqueue(path), 0);
	}
	unsigned char *got = malloc(n);
	for (int i = count - 1; i >= 0; i--) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		tverify(path, 100 + (uint64_t)i, n, n);
		(void)got;
	}
	cr_assert_eq(ckc_wait_flushed(), 0);
	for (int i = 0; i < count; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		cr_expect(thome_matches(path, 100 + (uint64_t)i, n), "%s", path);
	}
	free(got);
	gpu_stop();
}

Test(gpu, release_gives_device_memory_back_and_keeps_every_byte)
{
	gpu_start(1024 * MiB, 512 * MiB, CKC_PERSIST_ALWAYS);
	/* wait for the background mapping of every chunk */
	int want = tier_chunks(1024 * MiB);
	for (int i = 0; i < 200 && fake_creates < want; i++)
		usleep(10000);
	cr_assert_eq(fake_creates, want);
	size_t n = 16 * MiB;
	for (int i = 0; i < 8; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		unsigned char *d = dev_buf(n, 200 + (uint64_t)i);
		ckc_ref_t *r = capture(d, n, 0);
		ckc_handle_t *h;
		cr_assert_eq(ckc_open_write(path, 0644, &h), 0);
		cr_assert_eq(ckc_pwrite_ref(h, r, 0, n, 0), (ssize_t)n);
		cr_assert_eq(ckc_close(h), 0);
		ckc_ref_put(r);
		free(d);
	}
	/* the program needs 900 MiB: the arena gives back what it can */
	uint64_t got = ckc_gpu_release(0, 900 * MiB);
	cr_expect_geq(got, 768 * MiB, "released %llu", (unsigned long long)got);
	cr_expect_geq(fake_releases, 3);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_expect_eq(st.gpu_releases, 1);
	for (int i = 0; i < 8; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		tverify(path, 200 + (uint64_t)i, n, n);
	}
	gpu_stop();
}

/* The region's mapping thread while a cut of its tail unmaps: the cut
 * drops the lock to unmap, and waits here (ckc_svc.gpu_settle, called in
 * that window) long enough for the thread to take a step. */
static void slow_settle(void)
{
	usleep(30000);
}

/* Whether every byte of [p, p+n) can be read: a write to a pipe from
 * memory that cannot fails with EFAULT (no signal). */
static bool readable(uint64_t p, size_t n, size_t step)
{
	int fd[2];
	cr_assert_eq(pipe(fd), 0);
	bool ok = true;
	for (size_t o = 0; o < n && ok; o += step)
		ok = write(fd[1], (const void *)(uintptr_t)(p + o), 1) == 1;
	close(fd[0]);
	close(fd[1]);
	return ok;
}

/* A lender cuts free chunks off its region's tail while its mapping thread
 * still grows it (the program copies, so the thread pauses between steps):
 * no chunk the cut unmaps is mapped again before the cut is done, so every
 * chunk the region counts as mapped is device memory. */
Test(gpu, a_cut_while_the_region_grows_leaves_every_counted_chunk_mapped)
{
	gpu_start(256 * MiB, 64 * MiB, CKC_PERSIST_NEVER);
	ckc_services_set(&(ckc_services_t){ .gpu_sym = fake_sym, .host_kind = host_kind, .gpu_settle = slow_settle });
	ckc_gpu_t *g = ckc_eng.tier[0].gpu;
	ckc_gpu_dev_t *r = &g->dev[0];
	ckc_prog_begin();
	int cuts = 0;
	for (int k = 0; k < 3; k++) {
		size_t seen = 0;
		for (int i = 0; i < 2000 && seen < 2; i++) {
			ckc_mutex_lock(&ckc_eng.lock);
			seen = r->nmapped;
			ckc_mutex_unlock(&ckc_eng.lock);
			usleep(500);
		}
		uint64_t cut = 0, chunk = 0;
		cr_assert_eq(ckc_gpu_lend_cut(1, &cut, &chunk), 0);
		cuts += cut > 0;
	}
	ckc_prog_end();
	cr_assert_gt(cuts, 0, "the lender cut its tail");
	/* the region grows to its ceiling again */
	bool idle = false;
	for (int i = 0; i < 500 && !idle; i++) {
		ckc_mutex_lock(&ckc_eng.lock);
		idle = r->mapper_idle;
		ckc_mutex_unlock(&ckc_eng.lock);
		usleep(10000);
	}
	ckc_mutex_lock(&ckc_eng.lock);
	size_t n = r->nmapped;
	uint64_t ceiling = r->ceiling;
	ckc_mutex_unlock(&ckc_eng.lock);
	cr_expect(idle, "the mapping thread ended");
	cr_expect_eq((uint64_t)n * g->chunk, ceiling, "mapped %zu chunks of %llu bytes, ceiling %llu", n,
		     (unsigned long long)g->chunk, (unsigned long long)ceiling);
	for (size_t i = 0; i < n; i++)
		cr_expect(readable(g->base + r->off + i * g->chunk, g->chunk, 4096),
			  "chunk %zu of %zu counted as mapped is device memory", i, n);
	ckc_services_set(&(ckc_services_t){ .gpu_sym = fake_sym, .host_kind = host_kind });
	gpu_stop();
}

/* Two devices: the tier on device 0 as gpu_start makes it, then device 1,
 * each region of gpu_bytes mapped whole. */
static void gpu_start2(uint64_t gpu_bytes, uint64_t host_bytes)
{
	fake_ndev = 2;
	gpu_start(gpu_bytes, host_bytes, CKC_PERSIST_ALWAYS);
	cr_assert_eq(ckc_gpu_attach((void *)0x2, 1), 0, "a second device gets a region");
	cr_assert_eq(ckc_gpu_attach((void *)0x2, 1), 0, "once");
	int want = 2 * tier_chunks(gpu_bytes);
	for (int i = 0; i < 300 && fake_creates < want; i++)
		usleep(10000);
	cr_assert_eq(fake_creates, want, "both regions mapped");
}

/* A checkpoint at path made of one capture on device dev. */
static void put_capture(const char *path, int dev, const unsigned char *d, size_t n)
{
	ckc_ref_t *r = capture_on(dev, d, n, 0);
	ckc_handle_t *h;
	cr_assert_eq(ckc_open_write(path, 0644, &h), 0);
	cr_assert_eq(ckc_pwrite_ref(h, r, 0, n, 0), (ssize_t)n);
	cr_assert_eq(ckc_close(h), 0);
	ckc_ref_put(r);
}

Test(gpu, each_device_has_its_own_region_and_every_byte_comes_back)
{
	gpu_start2(128 * MiB, 256 * MiB);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_expect_eq(st.gpu_ndev, 2);
	cr_expect_eq(st.gpu_devs[0], 0);
	cr_expect_eq(st.gpu_devs[1], 1);
	cr_expect_eq(st.gpu_arena_bytes, 256 * MiB, "both regions counted");
	size_t n = 6 * MiB + 77;
	for (int i = 0; i < 6; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		unsigned char *d = dev_buf(n, 500 + (uint64_t)i);
		put_capture(path, i % 2, d, n);
		free(d);
	}
	for (int i = 0; i < 6; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		cr_expect_str_eq(ckc_where(path), "gpu", "%s", path);
		/* a restore is answered from the region of the device it came from */
		ckc_handle_t *h;
		ckc_ref_t *rr;
		uint64_t a;
		cr_assert_eq(ckc_open_read(path, &h), 0);
		cr_assert_eq(ckc_pread_ref(h, 0, n, &rr), (ssize_t)n);
		cr_assert_eq(ckc_ref_addr(rr, 0, n, &a), 0);
		int dev = i & 1;
		cr_expect_eq(ckc_gpu_device_of(a), dev, "%s", path);
		unsigned char *got = malloc(n), *want = dev_buf(n, 500 + (uint64_t)i);
		cr_assert_eq(ckc_ref_fill(rr, 0, got, n), 0);
		cr_expect_eq(memcmp(got, want, n), 0, "%s", path);
		ckc_ref_put(rr);
		cr_assert_eq(ckc_close(h), 0);
		free(got);
		free(want);
		tverify(path, 500 + (uint64_t)i, n, n);
	}
	cr_assert_eq(ckc_wait_flushed(), 0);
	for (int i = 0; i < 6; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		cr_expect(thome_matches(path, 500 + (uint64_t)i, n), "%s", path);
	}
	gpu_stop();
}

Test(gpu, a_full_region_does_not_spill_into_another_device)
{
	gpu_start2(128 * MiB, 256 * MiB);
	/* owed captures (references held) cannot be evicted */
	unsigned char *d = dev_buf(75 * MiB, 600);
	ckc_ref_t *r0 = capture_on(0, d, 75 * MiB, 0);
	ckc_ref_t *r1 = capture_on(1, d, 25 * MiB, 0);
	ckc_ref_t *r;
	uint64_t dptr;
	cr_expect_eq(ckc_capture_begin(75 * MiB, 0, 0, &r, &dptr), -ENOSPC,
		     "device 0's region is full although device 1's has room");
	ckc_ref_t *r2 = capture_on(1, d, 75 * MiB, 0);
	uint64_t a0, a1;
	cr_assert_eq(ckc_ref_addr(r0, 0, 75 * MiB, &a0), 0);
	cr_assert_eq(ckc_ref_addr(r1, 0, 25 * MiB, &a1), 0);
	cr_expect(a1 >= a0 + 75 * MiB || a0 >= a1 + 25 * MiB, "no overlap");
	unsigned char *got = malloc(75 * MiB);
	cr_assert_eq(ckc_ref_fill(r2, 0, got, 75 * MiB), 0);
	cr_expect_eq(memcmp(got, d, 75 * MiB), 0);
	cr_assert_eq(ckc_ref_fill(r0, 0, got, 75 * MiB), 0);
	cr_expect_eq(memcmp(got, d, 75 * MiB), 0, "device 1's captures did not overwrite device 0's");
	ckc_ref_put(r0);
	ckc_ref_put(r1);
	ckc_ref_put(r2);
	free(got);
	free(d);
	gpu_stop();
}

Test(gpu, a_copy_between_devices_goes_through_the_host_and_keeps_every_byte)
{
	gpu_start2(256 * MiB, 256 * MiB);
	char path[PATH_MAX];
	tpath(&env, path, 0);
	size_t n0 = 5 * MiB + 3, n1 = 7 * MiB + 5;
	unsigned char *d0 = dev_buf(n0, 700), *d1 = dev_buf(n1, 701);
	ckc_ref_t *r0 = capture_on(0, d0, n0, 0), *r1 = capture_on(1, d1, n1, 0);
	ckc_handle_t *h;
	cr_assert_eq(ckc_open_write(path, 0644, &h), 0);
	cr_assert_eq(ckc_pwrite_ref(h, r0, 0, n0, 0), (ssize_t)n0, "attached in device 0's region");
	/* part of device 1's capture: copied into the checkpoint's region */
	cr_assert_eq(ckc_pwrite_ref(h, r1, 4096, n1 - 4096, n0), (ssize_t)(n1 - 4096));
	cr_assert_eq(ckc_close(h), 0);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_expect_eq(st.cap_copied_in, 1);
	unsigned char *got = malloc(n0 + n1);
	cr_assert_eq(ckc_open_read(path, &h), 0);
	cr_assert_eq(ckc_pread(h, got, n0 + n1, 0), (ssize_t)(n0 + n1 - 4096));
	cr_assert_eq(ckc_close(h), 0);
	cr_expect_eq(memcmp(got, d0, n0), 0);
	cr_expect_eq(memcmp(got + n0, d1 + 4096, n1 - 4096), 0);
	ckc_ref_put(r0);
	ckc_ref_put(r1);
	free(got);
	free(d0);
	free(d1);
	gpu_stop();
}

Test(gpu, release_on_one_device_leaves_the_other_region)
{
	gpu_start2(512 * MiB, 512 * MiB);
	size_t n = 16 * MiB;
	for (int i = 0; i < 4; i++) {
		char path[PATH_MAX];
		tpath(&env, path, i);
		unsigned char *d = dev_buf(n, 800 + (uint64_t)i);
		put_capture(path, i % 2, d, n);
		free(d);
	}
	int before = fake_releases;
	uint64_t got = ckc_gpu_release(1, 900 * MiB);
	cr_expect_eq(got, 512 * MiB, "all of device 1's region, nothing of device 0's");
	cr_expect_eq(fake_releases - before, tier_chunks(512 * MiB), "every chunk of its region");
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_expect_eq(st.gpu_releases, 1);
	cr_expect_eq(st.tier[0].capacity, 512 * MiB, "device 0's region stays");
	cr_expect_eq(ckc_gpu_release(7, MiB), 0, "a device without a region gives nothing");
	ckc_ref_t *r;
	uint64_t dptr;
	cr_expect_eq(ckc_capture_begin(MiB, 0, 1, &r, &dptr), -ENOSPC, "device 1 has no room now");
	unsigned char *d = dev_buf(n, 810);
	char path[PATH_MAX];
	tpath(&env, path, 10);
	put_capture(path, 0, d, n);
	free(d);
	for (int i = 0; i < 4; i++) {
		tpath(&env, path, i);
		tverify(path, 800 + (uint64_t)i, n, n);
	}
	tpath(&env, path, 10);
	tverify(path, 810, n, n);
	cr_assert_eq(ckc_wait_flushed(), 0);
	cr_expect(thome_matches(path, 810, n));
	gpu_stop();
}

Test(gpu, exit_evacuates_open_writers_and_unflushed_copies)
{
	gpu_start(256 * MiB, 128 * MiB, CKC_PERSIST_ALWAYS);
	size_t n = 2 * MiB;
	char path[PATH_MAX], open_path[PATH_MAX];
	tpath(&env, path, 0);
	tpath(&env, open_path, 1);
	unsigned char *d = dev_buf(n, 300);
	ckc_ref_t *r = capture(d, n, 0);
	ckc_handle_t *h, *w;
	cr_assert_eq(ckc_open_write(path, 0644, &h), 0);
	cr_assert_eq(ckc_pwrite_ref(h, r, 0, n, 0), (ssize_t)n);
	cr_assert_eq(ckc_close(h), 0);
	ckc_ref_put(r);
	/* a writer still open in the gpu tier when the driver goes away */
	unsigned char *d2 = dev_buf(n, 301);
	ckc_ref_t *r2 = capture(d2, n, 0);
	cr_assert_eq(ckc_open_write(open_path, 0644, &w), 0);
	cr_assert_eq(ckc_pwrite_ref(w, r2, 0, n, 0), (ssize_t)n);
	ckc_ref_put(r2);
	ckc_gpu_exit();
	cr_expect_eq(fake_pins, 0, "the host tier is unregistered");
	/* the gpu tier is gone: the rest of the writer goes below it */
	unsigned char more[512];
	tfill(more, sizeof(more), 302, 0);
	cr_assert_eq(ckc_pwrite(w, more, sizeof(more), n), (ssize_t)sizeof(more));
	cr_assert_eq(ckc_close(w), 0);
	tverify(path, 300, n, n);
	unsigned char *got = malloc(n + sizeof(more));
	cr_assert_eq(ckc_open_read(open_path, &h), 0);
	cr_assert_eq(ckc_pread(h, got, n + sizeof(more), 0), (ssize_t)(n + sizeof(more)));
	cr_expect_eq(memcmp(got, d2, n), 0);
	cr_expect_eq(memcmp(got + n, more, sizeof(more)), 0);
	cr_assert_eq(ckc_close(h), 0);
	cr_assert_eq(ckc_wait_flushed(), 0);
	cr_expect(thome_matches(path, 300, n));
	free(got);
	free(d);
	free(d2);
	gpu_stop();
}

Test(gpu, without_a_driver_the_tier_stays_off_and_writes_go_below)
{
	tenv_make(&env);
	ckc_services_set(&(ckc_services_t){ 0 });
	ckc_config_t c = tcfg(&env, 64 * MiB, 0);
	c.capture = CKC_CAPTURE_DEVICE;
	c.gpu_cache_pct = 25;
	cr_assert_eq(ckc_init_config(&c), 0);
	cr_expect_eq(ckc_gpu_attach((void *)0x1, 0), -ENODEV);
	ckc_ref_t *r;
	uint64_t dptr;
	cr_expect_eq(ckc_capture_begin(MiB, 0, 0, &r, &dptr), -ENODEV);
	char path[PATH_MAX];
	tpath(&env, path, 0);
	twrite(path, 400, 3 * MiB, MiB);
	cr_expect_str_eq(ckc_where(path), "host");
	tverify(path, 400, 3 * MiB, MiB);
	ckc_shutdown();
	tenv_clean(&env);
}

/* ---- copies to pageable memory in lanes -------------------------------- */

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "lanes.h"

/* A read of the whole checkpoint at path into a fresh mapping, 16 bytes
 * into its first page; the bytes compared; the lane copies it made. */
static uint64_t read_fresh(const char *path, uint64_t seed, size_t n, size_t chunk)
{
	ckc_stats_t before, after;
	ckc_stats_get(&before);
	unsigned char *m = mmap(NULL, n + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(m, MAP_FAILED);
	unsigned char *want = dev_buf(n, seed);
	ckc_handle_t *h;
	cr_assert_eq(ckc_open_read(path, &h), 0);
	for (size_t off = 0; off < n; off += chunk) {
		size_t k = n - off < chunk ? n - off : chunk;
		cr_assert_eq(ckc_pread(h, m + 16 + off, k, off), (ssize_t)k);
	}
	cr_assert_eq(ckc_close(h), 0);
	cr_expect_eq(memcmp(m + 16, want, n), 0, "every byte read back");
	cr_expect_eq(m[15], 0, "nothing before the buffer written");
	cr_expect_eq(m[16 + n], 0, "nothing after the buffer written");
	munmap(m, n + 8192);
	free(want);
	ckc_stats_get(&after);
	return after.lane_copies - before.lane_copies;
}

/* The tier up and a checkpoint of n bytes of seed at path in it, to be read
 * into memory the program neither pinned nor registered. */
static void lanes_ckpt(char *path, uint64_t seed, size_t n)
{
	gpu_start(256 * MiB, 64 * MiB, CKC_PERSIST_ALWAYS);
	tpath(&env, path, 0);
	put_ckpt(path, seed, n);
	cr_assert_eq(ckc_wait_flushed(), 0); /* the flusher's own stage taken */
	cr_assert_str_eq(ckc_where(path), "gpu");
	atomic_store(&host_kind_now, CKC_MEM_UNKNOWN);
}

Test(gpu, a_large_read_into_pageable_memory_runs_in_lanes_and_keeps_every_byte)
{
	char path[PATH_MAX];
	size_t n = 37 * MiB + 333;
	lanes_ckpt(path, 51, n);

	atomic_store(&fake_dtoh_us, 2000); /* long enough for the helpers to take pieces */
	uint64_t lanes = read_fresh(path, 51, n, n);
	atomic_store(&fake_dtoh_us, 0);
	if (ckc_lanes_helpers() > 0)
		cr_expect_eq(lanes, 1, "one read of 37 MiB, in lanes");
	else
		cr_expect_eq(lanes, 0, "one CPU: no helper, the driver copies");
	cr_expect_eq(read_fresh(path, 51, n, 4 * MiB), 0, "reads under 8 MiB go as they are");

	atomic_store(&host_kind_now, CKC_MEM_REGISTERED);
	cr_expect_eq(read_fresh(path, 51, n, n), 0, "registered memory is copied to directly");
	atomic_store(&host_kind_now, CKC_MEM_PINNED);
	gpu_stop();
}

/* A program that protects its pages to see its own writes (a collector's
 * write barrier, an incremental checkpointer) and lifts the protection of a
 * page when a write faults on it. */
static void unprotect_on_write(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	mprotect((void *)((uintptr_t)si->si_addr & ~(pg - 1)), pg, PROT_READ | PROT_WRITE);
}

Test(gpu, a_read_into_pages_the_program_protects_leaves_the_lanes_on)
{
	char path[PATH_MAX];
	size_t n = 21 * MiB + 333;
	lanes_ckpt(path, 53, n);

	/* MADV_POPULATE_WRITE refuses the protected page (EINVAL); the driver
	 * then copies, and the program's handler lets the write through */
	struct sigaction sa = { .sa_sigaction = unprotect_on_write, .sa_flags = SA_SIGINFO }, old;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGSEGV, &sa, &old), 0);
	unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(mprotect(m + 10 * MiB, 4096, PROT_READ), 0);
	unsigned char *want = dev_buf(n, 53);
	ckc_handle_t *h;
	cr_assert_eq(ckc_open_read(path, &h), 0);
	cr_assert_eq(ckc_pread(h, m, n, 0), (ssize_t)n);
	cr_assert_eq(ckc_close(h), 0);
	sigaction(SIGSEGV, &old, NULL);
	cr_expect_eq(memcmp(m, want, n), 0, "every byte read back");
	munmap(m, n);
	free(want);

	/* a kernel that has MADV_POPULATE_WRITE still has it */
	uint64_t lanes = read_fresh(path, 53, n, n);
	cr_expect_eq(lanes, ckc_lanes_helpers() > 0 ? 1 : 0, "the next read into a new buffer: %llu copies in lanes",
		     (unsigned long long)lanes);
	atomic_store(&host_kind_now, CKC_MEM_PINNED);
	gpu_stop();
}

static void *read_fresh_thread(void *path)
{
	read_fresh(path, 54, 17 * MiB + 5, 17 * MiB + 5);
	return NULL;
}

Test(gpu, threads_that_read_in_lanes_and_end_leave_no_pinned_memory_behind)
{
	char path[PATH_MAX];
	lanes_ckpt(path, 54, 17 * MiB + 5);
	atomic_store(&fake_dtoh_us, 2000); /* long enough for the helpers to take pieces */
	read_fresh(path, 54, 17 * MiB + 5, 17 * MiB + 5);
	int pinned = atomic_load(&fake_hostallocs);
	/* a program that starts a thread for each restore */
	for (int i = 0; i < 6; i++) {
		pthread_t t;
		cr_assert_eq(pthread_create(&t, NULL, read_fresh_thread, path), 0);
		pthread_join(t, NULL);
	}
	atomic_store(&fake_dtoh_us, 0);
	cr_expect_eq(atomic_load(&fake_hostallocs), pinned, "6 readers came and went: %d pinned buffers more",
		     atomic_load(&fake_hostallocs) - pinned);
	atomic_store(&host_kind_now, CKC_MEM_PINNED);
	gpu_stop();
}

/* ckc_lanes_run alone: which thread ran which piece. */
#define LANE_SPAN (37 * MiB + 123)
static atomic_int lane_runs[LANE_SPAN / CKC_LANE_PIECE + 2];
static pthread_t lane_thread[LANE_SPAN / CKC_LANE_PIECE + 2];
static atomic_size_t lane_bytes_seen;
static uintptr_t lane_p;
static atomic_int lane_fail_at = -1;
static atomic_bool lane_hold;

static int lane_record(void *arg, uintptr_t a, uintptr_t b, uint64_t at)
{
	(void)arg;
	size_t k = (a - (lane_p & ~(uintptr_t)(CKC_LANE_PIECE - 1))) / CKC_LANE_PIECE;
	if (a < lane_p || b > lane_p + LANE_SPAN || b <= a || at != a - lane_p ||
	    (b - a > CKC_LANE_PIECE) || k >= sizeof(lane_runs) / sizeof(lane_runs[0]))
		return -ERANGE;
	atomic_fetch_add(&lane_runs[k], 1);
	lane_thread[k] = pthread_self();
	atomic_fetch_add(&lane_bytes_seen, b - a);
	while (atomic_load(&lane_hold))
		usleep(1000);
	usleep(2000); /* long enough for a helper to take pieces */
	return (int)k == atomic_load(&lane_fail_at) ? -EFAULT : 0;
}

static void lanes_reset(uintptr_t p)
{
	ckc_lanes_configure(3); /* helpers even on two CPUs */
	for (size_t k = 0; k < sizeof(lane_runs) / sizeof(lane_runs[0]); k++)
		atomic_store(&lane_runs[k], 0);
	atomic_store(&lane_bytes_seen, 0);
	atomic_store(&lane_fail_at, -1);
	lane_p = p;
}

/* Each piece of the span ran once, their bytes add up; the threads that
 * ran them. */
static int lanes_check(void)
{
	size_t npiece = ((lane_p + LANE_SPAN + CKC_LANE_PIECE - 1) / CKC_LANE_PIECE) - lane_p / CKC_LANE_PIECE;
	int threads = 0;
	for (size_t k = 0; k < npiece; k++) {
		cr_assert_eq(atomic_load(&lane_runs[k]), 1, "piece %zu ran %d times", k, atomic_load(&lane_runs[k]));
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = pthread_equal(lane_thread[j], lane_thread[k]);
		threads += !seen;
	}
	cr_assert_eq(atomic_load(&lane_runs[npiece]), 0);
	cr_assert_eq(atomic_load(&lane_bytes_seen), LANE_SPAN);
	return threads;
}

Test(lanes, every_piece_runs_once_and_the_helpers_take_part)
{
	uintptr_t p = (uintptr_t)3 * CKC_LANE_PIECE + 4096 * 3 + 5; /* never touched: only addresses */
	lanes_reset(p);
	cr_assert_eq(ckc_lanes_run(p, LANE_SPAN, lane_record, NULL), 0);
	int threads = lanes_check();
	if (ckc_lanes_helpers() > 0)
		cr_expect_gt(threads, 1, "the caller and %d helpers: %d ran pieces", ckc_lanes_helpers(), threads);
	/* and again, with the helpers already there */
	lanes_reset(p + 77);
	cr_assert_eq(ckc_lanes_run(p + 77, LANE_SPAN, lane_record, NULL), 0);
	lanes_check();
}

Test(lanes, an_error_stops_the_copy_and_is_returned)
{
	lanes_reset(CKC_LANE_PIECE);
	atomic_store(&lane_fail_at, 3);
	int rc = ckc_lanes_run(CKC_LANE_PIECE, LANE_SPAN, lane_record, NULL);
	if (ckc_lanes_helpers() == 0)
		cr_expect_eq(rc, -EAGAIN);
	else
		cr_expect_eq(rc, -EFAULT);
	for (size_t k = 0; k < sizeof(lane_runs) / sizeof(lane_runs[0]); k++)
		cr_expect_leq(atomic_load(&lane_runs[k]), 1, "no piece twice");
}

static void *lanes_long_copy(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)ckc_lanes_run(lane_p, LANE_SPAN, lane_record, NULL);
}

Test(lanes, a_second_copy_meanwhile_is_told_to_go_alone)
{
	lanes_reset(CKC_LANE_PIECE);
	if (ckc_lanes_run(lane_p, 4096, lane_record, NULL) == -EAGAIN)
		cr_skip_test("one CPU: no helpers");
	lanes_reset(CKC_LANE_PIECE);
	atomic_store(&lane_hold, true);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, lanes_long_copy, NULL), 0);
	while (atomic_load(&lane_bytes_seen) == 0)
		usleep(1000);
	int rc = ckc_lanes_run(64 * MiB, 16 * MiB, lane_record, NULL);
	atomic_store(&lane_hold, false);
	void *first;
	pthread_join(t, &first);
	cr_expect_eq(rc, -EAGAIN, "the helpers are busy: the second copy goes alone");
	cr_expect_eq((intptr_t)first, 0);
	lanes_check();
}

Test(lanes, a_forked_child_starts_its_own_helpers)
{
#ifdef __SANITIZE_THREAD__
	cr_skip_test("ThreadSanitizer cannot start threads in a child of a threaded process");
#endif
	lanes_reset(CKC_LANE_PIECE);
	cr_assert_eq(ckc_lanes_run(lane_p, LANE_SPAN, lane_record, NULL) == 0 || ckc_lanes_helpers() == 0, 1);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		lanes_reset(CKC_LANE_PIECE + 4096);
		int rc = ckc_lanes_run(lane_p, LANE_SPAN, lane_record, NULL);
		size_t npiece = ((lane_p + LANE_SPAN + CKC_LANE_PIECE - 1) / CKC_LANE_PIECE) - lane_p / CKC_LANE_PIECE;
		bool ok = rc == -EAGAIN || rc == 0;
		for (size_t k = 0; rc == 0 && k < npiece; k++)
			ok = ok && atomic_load(&lane_runs[k]) == 1;
		_exit(ok && (rc == 0) == (ckc_lanes_helpers() > 0) ? 0 : 1);
	}
	int st = 0;
	for (int i = 0; i < 1000 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(10000);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's copy ran in its own lanes (status %d)", st);
}

Test(lanes, a_large_read_from_the_host_tier_runs_in_lanes_and_keeps_every_byte)
{
	tenv_make(&env);
	ckc_services_set(&(ckc_services_t){ 0 });
	ckc_config_t c = tcfg(&env, 96 * MiB, 0);
	c.lanes = 2;
	cr_assert_eq(ckc_init_config(&c), 0);
	char path[PATH_MAX];
	tpath(&env, path, 0);
	size_t n = 21 * MiB + 4095;
	twrite(path, 51, n, 3 * MiB);
	cr_assert_str_eq(ckc_where(path), "host");
	uint64_t lanes = read_fresh(path, 51, n, n);
	cr_expect_eq(lanes, ckc_lanes_helpers() > 0 ? 1 : 0, "one read of 21 MiB: %llu copies in lanes",
		     (unsigned long long)lanes);
	cr_expect_eq(read_fresh(path, 51, n, 4 * MiB), 0, "reads under 8 MiB go as they are");
	ckc_shutdown();
	tenv_clean(&env);
}
