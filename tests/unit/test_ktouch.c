/* Unit tests of the kernel's early touch of program buffers (src/ktouch.c):
 * the auto mode's judgement of the machine, table by table, and the thread
 * at work: it touches each page that begins in a noted buffer without changing a
 * byte, skips small buffers, and survives a buffer that is gone before its
 * turn; the engine's stop ends the thread and a later note starts another. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <errno.h>

#include "ckc.h"
#include "io.h"
#include "ktouch.h"

Test(ktouch, judge)
{
	static const struct {
		uint32_t ns[CKC_KTOUCH_PROBES];
		int probes, want;
	} cases[] = {
		{ { 0 }, 0, -1 },                          /* nothing measured yet */
		{ { 60, 70, 55 }, 3, -1 },                 /* fast so far: wait for the last probe */
		{ { 60, 70, 55, 80 }, 4, 0 },              /* fast every time: stop */
		{ { 5000 }, 1, 1 },                        /* one slow touch decides at once */
		{ { 60, 70, 55, CKC_KTOUCH_SLOW_NS }, 4, 1 }, /* the threshold itself is slow */
		{ { 60, CKC_KTOUCH_SLOW_NS - 1, 55, 80 }, 4, 0 },
		{ { 70, 70, 70, 70 }, 9, 0 },              /* more probes than kept: the kept ones */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_eq(ckc_ktouch_judge(cases[i].ns, cases[i].probes), cases[i].want, "case %zu", i);
}

static ckc_ktouch_stats_t stats_now(void)
{
	ckc_ktouch_stats_t s;
	ckc_ktouch_stats(&s);
	return s;
}

/* Waits up to 5 s for the thread to have touched `buffers` buffers. */
static ckc_ktouch_stats_t wait_buffers(uint64_t buffers)
{
	ckc_ktouch_stats_t s = stats_now();
	for (int i = 0; i < 500 && s.buffers < buffers; i++) {
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
		s = stats_now();
	}
	return s;
}

Test(ktouch, touches_whole_pages_and_changes_nothing)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t n = 4u << 20;
	unsigned char *b = mmap(NULL, n + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(b, MAP_FAILED);
	for (size_t i = 0; i < n + (size_t)pg; i++)
		b[i] = (unsigned char)(i * 131 + 7);

	ckc_ktouch_configure(CKC_KTOUCH_ON);
	cr_assert_str_eq(stats_now().state, "idle", "nothing noted yet: no thread");
	ckc_ktouch_note(b, CKC_KTOUCH_MIN - 1);
	cr_assert_str_eq(stats_now().state, "idle", "a small buffer is not worth it");

	/* a buffer that starts mid-page: its first partial page is skipped */
	ckc_ktouch_note(b + 100, n);
	ckc_ktouch_stats_t s = wait_buffers(1);
	cr_assert_eq(s.buffers, 1, "the thread touched the buffer (state %s)", s.state);
	cr_assert_str_eq(s.state, "touching");
	cr_assert_str_eq(s.mode, "on");
	cr_assert_eq(s.pages, (n + 100 - 1) / (size_t)pg, "whole pages of the buffer: %llu",
		     (unsigned long long)s.pages);
	cr_assert_eq(s.probes, 1);
	for (size_t i = 0; i < n + (size_t)pg; i++)
		cr_assert_eq(b[i], (unsigned char)(i * 131 + 7), "byte %zu changed", i);

	/* a buffer gone before its turn: the kernel's read fails, nothing more */
	munmap(b, n + (size_t)pg);
	ckc_ktouch_note(b, n);
	s = wait_buffers(2);
	cr_assert_eq(s.buffers, 2);
	cr_assert_eq(s.pages, (n + 100 - 1) / (size_t)pg, "no page of an unmapped buffer counts");

	/* the engine's stop ends the thread and keeps what was counted; the
	 * next note starts it again */
	ckc_ktouch_stop();
	s = stats_now();
	cr_assert_eq(s.buffers, 2);
	cr_assert_str_eq(s.state, "touching", "the statistics keep the last state");
	static char again[2u << 20];
	ckc_ktouch_note(again, sizeof(again));
	s = wait_buffers(3);
	cr_assert_eq(s.buffers, 3, "a note after the stop is touched by a new thread");
	ckc_ktouch_stop();
}

/* The touch runs while the program computes: nothing while one of its
 * copies is in progress, the whole buffer once it pauses; a stop while the
 * thread waits for that pause returns at once and touches nothing. */
Test(ktouch, waits_for_the_program_to_pause)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t n = 4u << 20;
	unsigned char *b = mmap(NULL, 2 * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(b, MAP_FAILED);
	memset(b, 0x5a, 2 * n);

	ckc_ktouch_configure(CKC_KTOUCH_ON);
	ckc_prog_begin();
	ckc_ktouch_note(b, n);
	struct timespec ts = { 0, 100000000 };
	nanosleep(&ts, NULL);
	ckc_ktouch_stats_t s = stats_now();
	cr_assert_str_eq(s.state, "touching");
	cr_assert_eq(s.pages, 0, "%llu pages touched while the program copied", (unsigned long long)s.pages);
	ckc_prog_end();
	s = wait_buffers(1);
	cr_assert_eq(s.buffers, 1, "touched once the program paused");
	cr_assert_eq(s.pages, n / (size_t)pg);

	ckc_prog_begin();
	ckc_ktouch_note(b + n, n);
	nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	uint64_t t0 = ckc_now_ns();
	ckc_ktouch_stop();
	uint64_t took = ckc_now_ns() - t0;
	ckc_prog_end();
	cr_assert_lt(took, 1000000000ull, "the stop waited %llu ns for the program to pause",
		     (unsigned long long)took);
	s = stats_now();
	cr_assert_eq(s.pages, n / (size_t)pg, "nothing more touched: %llu", (unsigned long long)s.pages);
	for (size_t i = 0; i < 2 * n; i++)
		cr_assert_eq(b[i], 0x5a, "byte %zu changed", i);
	munmap(b, 2 * n);
}

Test(ktouch, off_touches_nothing)
{
	static char buf[2u << 20];
	ckc_ktouch_configure(CKC_KTOUCH_OFF);
	ckc_ktouch_note(buf, sizeof(buf));
	struct timespec ts = { 0, 50000000 };
	nanosleep(&ts, NULL);
	ckc_ktouch_stats_t s = stats_now();
	cr_assert_str_eq(s.mode, "off");
	cr_assert_str_eq(s.state, "idle");
	cr_assert_eq(s.buffers, 0);
}

/* No file to touch into (neither /dev/shm nor /tmp takes one): the thread
 * says failed, the buffer is unchanged, and later notes are ignored. */
static int open_fails(const char *path, int flags, mode_t mode)
{
	(void)path;
	(void)flags;
	(void)mode;
	errno = EOPNOTSUPP;
	return -1;
}

Test(ktouch, without_a_file_it_fails_once_and_touches_nothing)
{
	static unsigned char buf[2u << 20];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 1);
	ckc_io.open = open_fails;
	ckc_ktouch_configure(CKC_KTOUCH_ON);
	ckc_ktouch_note(buf, sizeof(buf));
	ckc_ktouch_stats_t s = stats_now();
	for (int i = 0; i < 500 && strcmp(s.state, "failed") != 0; i++) {
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
		s = stats_now();
	}
	cr_assert_str_eq(s.state, "failed");
	cr_assert_eq(s.buffers, 0);
	cr_assert_eq(s.pages, 0);
	ckc_ktouch_note(buf, sizeof(buf));
	cr_assert_str_eq(stats_now().state, "failed", "a later note changes nothing");
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], (unsigned char)(i * 7 + 1), "byte %zu changed", i);
	ckc_ktouch_stop();
}
