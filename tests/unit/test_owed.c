/* Tests of the owed host ranges of device capture (intercept/owed.c) over the
 * engine and the stand-in driver: a host buffer is owed as the interposer
 * owes it after a captured device-to-host copy, then touched, cut, owed
 * again, written over or freed; every byte that comes back is compared with
 * the captured bytes, and mincore(2) tells whether the owed pages were moved
 * out of the way (parked) or protected in place. */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_util.h"
#include "fake_cuda.h"
#include "intercept.h"
#include "owed.h"
#include "ranges.h"

/* What owed.c takes from the rest of the interposer: every buffer here is
 * pageable memory, the program's SIGSEGV handler is the real one. */
int ckc_cuda_mem_kind(const void *addr)
{
	(void)addr;
	return CKC_MEM_UNKNOWN;
}

bool ckc_strict(void)
{
	return false;
}

int ckc_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return sigaction(sig, act, old);
}

/* (no allocator wrappers here: memhooks.c is not linked) */
void ckc_mem_route(void)
{
}

/* ---- fixtures --------------------------------------------------------- */

static tenv_t env;

static void owed_start(void)
{
#ifndef HAVE_CUDA_H
	cr_skip_test("built without the CUDA headers: no gpu tier");
#endif
	tenv_make(&env);
	ckc_services_set(&(ckc_services_t){ .gpu_sym = fake_sym });
	ckc_config_t c = tcfg(&env, 64 * MiB, 0);
	c.capture = CKC_CAPTURE_DEVICE;
	c.gpu_cache = 256 * MiB;
	c.gpu_cache_pct = -1;
	cr_assert_eq(ckc_init_config(&c), 0);
	cr_assert_eq(ckc_gpu_attach((void *)0x1, 0), 0, "the stand-in driver brings the tier up");
	ckc_wait_ready();
}

static void owed_stop(void)
{
	ckc_owed_fill_all();
	ckc_shutdown();
	ckc_services_set(&(ckc_services_t){ 0 });
	tenv_clean(&env);
}

#define PS ((uintptr_t)4096)
#define OLD 0xee /* the host bytes before the capture */

/* A host buffer of len bytes from its own mapping, every page resident and
 * holding OLD. */
static unsigned char *host_buf(size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(m, MAP_FAILED);
	memset(m, OLD, len);
	return m;
}

/* Resident pages of the page-aligned range [a, b). */
static size_t resident(uintptr_t a, uintptr_t b)
{
	size_t np = (b - a) / PS, k = 0;
	unsigned char *v = malloc(np);
	cr_assert_not_null(v);
	cr_assert_eq(mincore((void *)a, b - a, v), 0);
	for (size_t i = 0; i < np; i++)
		k += v[i] & 1;
	free(v);
	return k;
}

/* Owes [h, h+n) from a capture of the "device" bytes d, as the interposer
 * does after a device-to-host copy: the device copy into the gpu tier, the
 * edge bytes copied, the whole pages [*a, *b) owed. */
static void owe(unsigned char *h, size_t n, const unsigned char *d, uintptr_t *a, uintptr_t *b)
{
	uintptr_t p = (uintptr_t)h;
	*a = (p + PS - 1) & ~(PS - 1);
	*b = (p + n) & ~(PS - 1);
	ckc_ref_t *r;
	uint64_t dptr;
	cr_assert_eq(ckc_capture_begin(n, 0, 0, &r, &dptr), 0);
	memcpy((void *)(uintptr_t)dptr, d, n);
	ckc_owed_edges_fill(p, n);
	memcpy(h, d, *a - p);
	memcpy((void *)*b, d + (*b - p), p + n - *b);
	cr_assert_eq(ckc_owed_add_len(*a, *b, p, n, r, false, NULL, false, 0), 0);
}

static unsigned char *dev_bytes(size_t n, uint64_t seed)
{
	unsigned char *d = malloc(n);
	cr_assert_not_null(d);
	tfill(d, n, seed, 0);
	return d;
}

static bool all_are(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* ---- tests ------------------------------------------------------------ */

TestSuite(owed, .init = owed_start, .fini = owed_stop);

Test(owed, a_large_pageable_range_is_parked_and_a_touch_fills_every_byte)
{
	size_t len = 16 * MiB, n = len - 300;
	unsigned char *m = host_buf(len), *h = m + 100, *d = dev_bytes(n, 1);
	uintptr_t a, b;

	owe(h, n, d, &a, &b);
	cr_assert_eq(resident(a, b), 0, "the owed pages were moved out, not protected in place");
	cr_assert_eq(atomic_load(&ckc_owed_count), 1);
	/* the comparison touches the pages: a fault fills them */
	cr_assert(memcmp(h, d, n) == 0, "every byte is the captured one");
	cr_assert_eq(atomic_load(&ckc_owed_count), 0);
	cr_assert_eq(resident(a, b), (b - a) / PS, "the filled pages are back in place");
	memset(h, 3, n); /* readable and writable again */
	free(d);
	munmap(m, len);
}

Test(owed, a_drop_puts_the_parked_pages_back_as_they_were)
{
	size_t len = 8 * MiB, n = len;
	unsigned char *h = host_buf(len), *d = dev_bytes(n, 2);
	uintptr_t a, b;

	owe(h, n, d, &a, &b);
	cr_assert_eq(resident(a, b), 0);
	/* a copy that overwrites all of it: nothing to fill */
	ckc_owed_will_write(h, n);
	cr_assert_eq(atomic_load(&ckc_owed_count), 0);
	cr_assert_eq(resident(a, b), (b - a) / PS, "the program's own pages came back");
	cr_assert(all_are(h, n, OLD), "with the bytes they held (not fresh zero pages)");
	free(d);
	munmap(h, len);
}

Test(owed, a_cut_inside_a_parked_range_fills_that_part_and_the_rest_later)
{
	size_t len = 16 * MiB, n = len - 5000;
	unsigned char *m = host_buf(len), *h = m + 5000, *d = dev_bytes(n, 3);
	uintptr_t a, b;

	owe(h, n, d, &a, &b);
	/* an untagged write(2) of 3 pages in the middle: those are filled */
	size_t mid = (size_t)(((uintptr_t)h + n / 2) & ~(PS - 1)) - (size_t)(uintptr_t)h;
	ckc_owed_cut(h + mid, 3 * PS, true);
	cr_assert_eq(atomic_load(&ckc_owed_count), 2, "what lies left and right stays owed");
	cr_assert_eq(resident((uintptr_t)h + mid, (uintptr_t)h + mid + 3 * PS), 3);
	cr_assert_eq(resident(a, (uintptr_t)h + mid), 0, "the left part stays parked");
	cr_assert(memcmp(h + mid, d + mid, 3 * PS) == 0);
	/* the rest by faults, each part from its own parked pages */
	cr_assert(memcmp(h, d, n) == 0, "every byte is the captured one");
	cr_assert_eq(atomic_load(&ckc_owed_count), 0);
	free(d);
	munmap(m, len);
}

Test(owed, a_range_owed_again_stays_parked_and_gets_the_new_bytes)
{
	size_t len = 8 * MiB, n = len - 64;
	unsigned char *h = host_buf(len), *d1 = dev_bytes(n, 4), *d2 = dev_bytes(n, 5);
	uintptr_t a, b;

	owe(h, n, d1, &a, &b);
	owe(h, n, d2, &a, &b); /* the staging buffer reused */
	cr_assert_eq(atomic_load(&ckc_owed_count), 1);
	cr_assert_eq(resident(a, b), 0);
	cr_assert(memcmp(h, d2, n) == 0, "the second capture's bytes");
	free(d1);
	free(d2);
	munmap(h, len);
}

Test(owed, a_capture_that_cannot_be_owed_leaves_nothing_owed_and_every_page_usable)
{
	size_t len = 8 * MiB, n = len;
	unsigned char *h = host_buf(len), *d = dev_bytes(n / 2, 6);
	uintptr_t a, b;

	/* its first half is owed already; its last page is not mapped, so
	 * the whole range cannot be protected: the interposer then copies as
	 * the program asked */
	owe(h, n / 2, d, &a, &b);
	cr_assert_eq(munmap(h + len - PS, PS), 0);
	ckc_ref_t *r;
	uint64_t dptr;
	cr_assert_eq(ckc_capture_begin(n, 0, 0, &r, &dptr), 0);
	int rc = ckc_owed_add_len((uintptr_t)h, (uintptr_t)h + len, (uintptr_t)h, n, r, false, NULL, false, 0);
	cr_assert_lt(rc, 0, "an unmapped page cannot be owed");
	cr_assert_eq(atomic_load(&ckc_owed_count), 0, "nothing of the range stays owed");
	memset(h, 9, len - PS);
	cr_assert(all_are(h, len - PS, 9), "every page is readable and writable");
	ckc_ref_put(r); /* the caller kept its reference */
	free(d);
	munmap(h, len - PS);
}

/* The model of a staging buffer that device capture owes: what every byte
 * must read as. */
static unsigned char *model;

/* Owes [h+off, h+off+n) from fresh "device" bytes, as a captured copy or a
 * tagged read of that size does, and records them in the model. */
static void owe_at(unsigned char *h, size_t off, size_t n, uint64_t seed)
{
	unsigned char *d = dev_bytes(n, seed);
	uintptr_t a, b, p = (uintptr_t)h + off;
	a = (p + PS - 1) & ~(PS - 1);
	b = (p + n) & ~(PS - 1);
	if (b <= a) {
		/* no whole page: copied as asked */
		ckc_owed_will_write(h + off, n);
		memcpy(h + off, d, n);
	} else {
		owe(h + off, n, d, &a, &b);
	}
	memcpy(model + off, d, n);
	free(d);
}

Test(owed, a_reused_misaligned_buffer_keeps_every_byte_through_any_mix_of_sizes_touches_and_copies)
{
	/* what the stencil programs do to a malloc'd staging buffer that
	 * starts 16 bytes into a page: captures and tagged reads of every
	 * size into it, touches between them, copies that overwrite part of
	 * it, writes of part of it to the kernel, a buffer given back */
	size_t len = 24 * MiB;
	unsigned char *m = host_buf(len + PS), *h = m + 16;
	model = malloc(len);
	cr_assert_not_null(model);
	memset(model, OLD, len);
	uint64_t x = 12345;
	for (int step = 0; step < 400; step++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		size_t off = (size_t)((x >> 33) % (len / 2)) & ~(size_t)(step % 3 ? 0 : 4095);
		size_t n = 1 + (size_t)((x >> 13) % (len - off));
		if (step % 5 == 0)
			n = len - off; /* the whole rest: the usual checkpoint */
		switch ((x >> 60) % 6) {
		case 0:
		case 1:
		case 2:
			owe_at(h, off, n, x);
			break;
		case 3: {
			/* the program reads part of it: faults fill what it owes */
			size_t k = n < 4096 ? n : 4096;
			cr_assert(memcmp(h + off, model + off, k) == 0, "step %d: bytes read at %zu", step, off);
			break;
		}
		case 4:
			/* a real copy overwrites part of it */
			ckc_owed_will_write(h + off, n);
			memset(h + off, (int)(x & 0xff), n);
			memset(model + off, (int)(x & 0xff), n);
			break;
		case 5:
			/* an untagged write(2) of part of it */
			ckc_owed_cut(h + off, n, true);
			cr_assert(memcmp(h + off, model + off, n) == 0, "step %d: bytes written at %zu", step, off);
			break;
		}
	}
	cr_assert(memcmp(h, model, len) == 0, "every byte is the last one put there");
	cr_assert_eq(atomic_load(&ckc_owed_count), 0, "reading everything filled everything");
	free(model);
	munmap(m, len + PS);
}

Test(owed, a_faulting_page_that_is_not_owed_goes_to_the_default_action_not_around_forever)
{
	/* a program's own protected page, touched after the handler is in
	 * place: the default action (the process dies of SIGSEGV), never a
	 * fault loop */
	size_t len = 8 * MiB;
	unsigned char *h = host_buf(len), *d = dev_bytes(len, 11);
	uintptr_t a, b;
	owe(h, len, d, &a, &b); /* the handler is installed */
	unsigned char *own = host_buf(PS);
	cr_assert_eq(mprotect(own, PS, PROT_NONE), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		free(d);
		alarm(10); /* a loop would end here, with SIGALRM */
		volatile unsigned char c = own[10];
		(void)c;
		_exit(0);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
#if defined(__SANITIZE_ADDRESS__)
	/* the sanitizer's handler, behind the library's, reports the fault
	 * and exits */
	if (WIFEXITED(st)) {
		cr_assert_neq(WEXITSTATUS(st), 0, "the child must end with its fault");
	} else
#endif
	{
		cr_assert(WIFSIGNALED(st), "the child must die of its fault");
		cr_assert_eq(WTERMSIG(st), SIGSEGV, "of SIGSEGV (signal %d), not of a loop", WTERMSIG(st));
	}
	cr_assert(memcmp(h, d, len) == 0);
	free(d);
	munmap(h, len);
	munmap(own, PS);
}

/* Owes [h, h+n) from fresh device bytes at call site `site`. */
static void owe_site(unsigned char *h, size_t n, uint64_t seed, uintptr_t site)
{
	ckc_ref_t *r;
	uint64_t dptr;
	cr_assert_eq(ckc_capture_begin(n, 0, 0, &r, &dptr), 0);
	tfill((unsigned char *)(uintptr_t)dptr, n, seed, 0);
	cr_assert_eq(ckc_owed_add_len((uintptr_t)h, (uintptr_t)h + n, (uintptr_t)h, n, r, false, NULL, false, site), 0);
}

Test(owed, a_call_site_whose_copies_are_touched_first_stops_being_owed_and_one_copied_back_does_not)
{
	/* torch.save checksums what it copied: each capture costs a fill on
	 * top of the copy; a restore path copies the bytes back to the
	 * device: each capture saves a copy */
	size_t n = 1 * MiB;
	unsigned char *h = host_buf(n), *want = malloc(n);
	uintptr_t touched = 0x1000, copied = 0x2000;
	for (int i = 0; i < 3; i++) {
		cr_assert(ckc_owed_site_ok(touched), "still owed after %d touches", i);
		owe_site(h, n, 100 + (uint64_t)i, touched);
		tfill(want, n, 100 + (uint64_t)i, 0);
		cr_assert(memcmp(h, want, n) == 0, "the touch fills every byte");
	}
	cr_assert(!ckc_owed_site_ok(touched), "after three touched copies the site is no longer owed");
	for (int i = 0; i < 10; i++) {
		owe_site(h, n, 200 + (uint64_t)i, copied);
		ckc_owed_plan_t pl;
		cr_assert(ckc_owed_plan((uintptr_t)h, n, &pl), "a copy back to the device can use the capture");
		ckc_owed_plan_done(&pl, NULL);
	}
	cr_assert(ckc_owed_site_ok(copied), "copies used before any touch keep their site owed");
	ckc_owed_cut(h, n, false);
	free(want);
	munmap(h, n);
}

Test(owed, a_freed_range_is_dropped_with_its_pages_in_place)
{
	size_t len = 8 * MiB, n = len - 8;
	unsigned char *h = host_buf(len), *d = dev_bytes(n, 7);
	uintptr_t a, b;

	owe(h, n, d, &a, &b);
	ckc_owed_cut(h, n, false); /* as free() and munmap() do */
	cr_assert_eq(atomic_load(&ckc_owed_count), 0);
	cr_assert_eq(resident(a, b), (b - a) / PS);
	memset(h, 9, n);
	cr_assert(all_are(h, n, 9));
	free(d);
	cr_assert_eq(munmap(h, len), 0);
}

Test(owed, a_small_range_is_protected_in_place_and_filled)
{
	size_t len = 1 * MiB, n = len - 40;
	unsigned char *m = host_buf(len), *h = m + 20, *d = dev_bytes(n, 8);
	uintptr_t a, b;

	owe(h, n, d, &a, &b);
	cr_assert_eq(resident(a, b), (b - a) / PS, "below the parking size the pages stay");
	cr_assert(memcmp(h, d, n) == 0);
	cr_assert_eq(atomic_load(&ckc_owed_count), 0);
	free(d);
	munmap(m, len);
}

/* A thread that reads a whole buffer back (its pages fault and fill). */
typedef struct reader {
	const unsigned char *h, *d;
	size_t n;
	bool same;
} reader_t;

static void *read_back(void *arg)
{
	reader_t *r = arg;
	r->same = memcmp(r->h, r->d, r->n) == 0;
	return NULL;
}

Test(owed, a_fill_under_way_holds_no_other_range_and_a_touch_of_its_pages_waits_for_it)
{
	size_t len = 8 * MiB, n = len - 100;
	unsigned char *m1 = host_buf(len), *m2 = host_buf(len), *d1 = dev_bytes(n, 11), *d2 = dev_bytes(n, 12);
	uintptr_t a, b;

	owe(m1 + 100, n, d1, &a, &b);
	/* the device copies of fills wait at the gate */
	atomic_store(&fake_dtoh_gate, true);
	reader_t r1 = { m1 + 100, d1, n, false }, r2 = r1;
	pthread_t t1, t2;
	cr_assert_eq(pthread_create(&t1, NULL, read_back, &r1), 0);
	for (int ms = 0; ms < 5000 && !atomic_load(&fake_dtoh_waiting); ms++)
		usleep(1000);
	cr_assert_gt(atomic_load(&fake_dtoh_waiting), 0, "the fault's fill is in the driver");
	/* another buffer is owed and written over meanwhile: it does not wait
	 * for that fill (the gate would time out if it did) */
	owe(m2 + 100, n, d2, &a, &b);
	ckc_owed_will_write(m2, len);
	cr_assert_eq(atomic_load(&fake_dtoh_timeouts), 0,
		     "owing and dropping another range waited for a fill of the first");
	/* a second reader of the buffer being filled waits for that fill */
	cr_assert_eq(pthread_create(&t2, NULL, read_back, &r2), 0);
	usleep(20000);
	atomic_store(&fake_dtoh_gate, false);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	cr_assert(r1.same, "the faulting reader read the captured bytes");
	cr_assert(r2.same, "the reader that came during the fill read them too");
	cr_assert_eq(atomic_load(&ckc_owed_count), 0);
	cr_assert(all_are((const unsigned char *)a, b - a, OLD),
		  "the whole pages written over came back as they were");
	free(d1);
	free(d2);
	munmap(m1, len);
	munmap(m2, len);
}
