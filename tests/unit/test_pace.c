/* Unit tests of the pacing of background copies (src/pace.c): piece sizes
 * that follow the time pieces take, and how long a piece waits for the
 * program's copies (a read: the full yield, a flush half the time; writes: a
 * few pieces' time). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "engine_int.h"

/* A piece of n bytes that took ns nanoseconds. */
static void piece_took(size_t n, uint64_t ns)
{
	ckc_pace_end(n, ckc_now_ns() - ns);
}

Test(pace, pieces_follow_the_time_they_take)
{
	uint64_t t0;
	ckc_tl_background = true;
	size_t n = ckc_pace_begin(64u << 20, &t0);
	cr_assert_eq(n, CKC_BG_PIECE, "the first piece is the largest");
	/* slow pieces (memory the kernel must find first): halved down to the minimum */
	for (int i = 0; i < 10; i++) {
		piece_took(n, 4 * CKC_BG_SLICE_NS);
		n = ckc_pace_begin(64u << 20, &t0);
	}
	cr_assert_eq(n, CKC_BG_PIECE_MIN);
	/* fast ones: doubled back up to the maximum */
	for (int i = 0; i < 10; i++) {
		piece_took(n, CKC_BG_SLICE_NS / 10);
		n = ckc_pace_begin(64u << 20, &t0);
	}
	cr_assert_eq(n, CKC_BG_PIECE);
	/* the last piece of a copy is what is left, and says nothing */
	cr_assert_eq(ckc_pace_begin(1000, &t0), 1000);
	piece_took(1000, 100 * CKC_BG_SLICE_NS);
	cr_assert_eq(ckc_pace_begin(64u << 20, &t0), CKC_BG_PIECE);
}

/* How long ckc_pace_begin waited, in ns, after pieces of 100 us. */
static uint64_t waited(void)
{
	uint64_t t0, a;
	size_t n = ckc_pace_begin(64u << 20, &t0);
	piece_took(n, 100000);
	a = ckc_now_ns();
	ckc_pace_begin(64u << 20, &t0);
	return t0 - a;
}

Test(pace, a_read_of_the_program_holds_the_pieces_a_write_only_a_few)
{
	ckc_tl_background = true;
	cr_assert_lt(waited(), 1000000, "nothing of the program's in progress: no wait");
	uint64_t r = 0, w = UINT64_MAX;
	/* (the shortest of five tries: a loaded machine's sleeps overshoot by
	 * milliseconds, 5.5 ms once against the bound of 3) */
	for (int k = 0; k < 5 && w >= 3000000; k++) {
		/* a checkpoint being restored: the background gives way in full */
		ckc_prog_begin();
		ckc_pace_reading(1);
		r = waited();
		ckc_pace_reading(-1);
		struct timespec gap = { 0, 2 * CKC_BG_READ_GAP_NS };
		nanosleep(&gap, NULL);
		/* one being written: the flushes keep a share (four pieces' time at most) */
		w = waited();
		ckc_prog_end();
	}
	cr_assert_geq(r, CKC_BG_YIELD_MAX_NS, "a read in progress: waited %llu ns", (unsigned long long)r);
	cr_assert_lt(w, 3000000, "a write in progress: waited %llu ns", (unsigned long long)w);
	cr_assert_geq(w, CKC_BG_WRITE_WAITS * 100000ull, "a write in progress: waited %llu ns", (unsigned long long)w);
}

Test(pace, the_program_s_own_threads_never_wait)
{
	ckc_tl_background = false;
	ckc_prog_begin();
	ckc_pace_reading(1);
	uint64_t t0, a = ckc_now_ns();
	ckc_pace_begin(64u << 20, &t0);
	ckc_pace_reading(-1);
	ckc_prog_end();
	cr_assert_lt(t0 - a, 1000000);
}

Test(pace, a_piece_waits_a_little_after_a_read_of_the_program)
{
	/* a program that reads one checkpoint after another leaves short
	 * gaps: a piece begun in one would run into the next read */
	uint64_t t0, w = UINT64_MAX;
	ckc_tl_background = true;
	/* (the shortest of a few tries: a thread the scheduler leaves out
	 * on a loaded machine oversleeps) */
	for (int k = 0; k < 5; k++) {
		ckc_prog_begin();
		ckc_pace_reading(1);
		ckc_pace_reading(-1);
		ckc_prog_end();
		uint64_t a = ckc_now_ns();
		ckc_pace_begin(64u << 20, &t0);
		if (t0 - a < w)
			w = t0 - a;
	}
	cr_assert_geq(w, CKC_BG_READ_GAP_NS * 9 / 10, "waited %llu ns after a read", (unsigned long long)w);
	cr_assert_lt(w, CKC_BG_YIELD_MAX_NS, "waited %llu ns after a read", (unsigned long long)w);
	cr_assert_lt(waited(), CKC_BG_READ_GAP_NS / 2, "a while after the read: no wait");
}

Test(pace, a_flush_keeps_half_the_time_while_the_program_reads)
{
	/* flushes must end before the program does: what they give way to
	 * its reads is paid at the exit */
	ckc_tl_background = true;
	ckc_tl_flushing = true;
	uint64_t w = UINT64_MAX;
	/* (the shortest of five tries, as above: 4.0 ms once on a loaded
	 * machine) */
	for (int k = 0; k < 5 && w >= CKC_BG_YIELD_MAX_NS * 4 / 5; k++) {
		ckc_prog_begin();
		ckc_pace_reading(1);
		uint64_t t = waited();
		ckc_pace_reading(-1);
		ckc_prog_end();
		if (t < w)
			w = t;
	}
	ckc_tl_flushing = false;
	cr_assert_geq(w, 100000, "a read in progress: a flush piece waited %llu ns", (unsigned long long)w);
	/* (a piece's time, not the longest wait: a busy machine's naps
	 * overshoot by a millisecond or two) */
	cr_assert_lt(w, CKC_BG_YIELD_MAX_NS * 4 / 5,
		     "a read in progress: a flush piece waited %llu ns, as long as a read's longest wait",
		     (unsigned long long)w);
}

/* How long ckc_bg_yield_reads held a background thread, in ns. */
static uint64_t held_for_reads(void)
{
	ckc_tl_background = true;
	uint64_t a = ckc_now_ns();
	ckc_bg_yield_reads();
	return ckc_now_ns() - a;
}

/* The least of three held_for_reads where no wait is due: a call that
 * waits does so every time, while the host's stop of the whole machine
 * (10 to 40 ms at a time on the build machine) lands in one at most. */
static uint64_t held_least(void)
{
	uint64_t least = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t w = held_for_reads();
		if (w < least)
			least = w;
	}
	return least;
}

/* A name made in a checkpoint folder waits until the program has read
 * nothing back there for a while (CKC_BG_READ_QUIET_NS); the program's own
 * threads never wait. */
Test(pace, a_publication_gives_way_to_the_program_reading_back)
{
	cr_assert_lt(held_least(), CKC_BG_READ_QUIET_NS / 2, "no read yet: no wait");
	ckc_prog_begin();
	ckc_prog_end();
	ckc_prog_read_opened();
	uint64_t w = held_for_reads();
	cr_assert_geq(w, CKC_BG_READ_QUIET_NS * 9 / 10, "waited %llu ns after a read", (unsigned long long)w);
	cr_assert_lt(w, 2 * CKC_BG_YIELD_MAX_NS, "waited %llu ns after a read", (unsigned long long)w);
	cr_assert_lt(held_least(), CKC_BG_READ_QUIET_NS / 2, "quiet since: no wait");
	/* the program's own thread never waits, even just after a read
	 * (the least of three tries, as held_least) */
	uint64_t own = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		ckc_prog_begin();
		ckc_prog_end();
		ckc_prog_read_opened();
		ckc_tl_background = false;
		uint64_t a = ckc_now_ns();
		ckc_bg_yield_reads();
		uint64_t w = ckc_now_ns() - a;
		own = w < own ? w : own;
	}
	cr_assert_lt(own, CKC_BG_READ_QUIET_NS / 2, "the program's own thread waited");
	/* and a write's open (no read) holds nothing */
	struct timespec gap = { 0, 2 * CKC_BG_READ_QUIET_NS };
	nanosleep(&gap, NULL);
	ckc_prog_begin();
	ckc_prog_end();
	cr_assert_lt(held_least(), CKC_BG_READ_QUIET_NS / 2, "after a write's open: no wait");
}

static atomic_bool reader_stop;

static void *reader_never_stops(void *arg)
{
	(void)arg;
	while (!atomic_load(&reader_stop)) {
		ckc_prog_begin();
		ckc_prog_end();
		ckc_prog_read_opened();
	}
	return NULL;
}

/* How long a publication gave way to a thread of the program that reads
 * checkpoints back without a pause (held_for_reads). */
/* (four threads: while other work shares the CPUs, one of them still
 * reads within every CKC_BG_READ_QUIET_NS) */
#define READERS 4

static uint64_t held_by_a_reader(void)
{
	pthread_t t[READERS];
	atomic_store(&reader_stop, false);
	for (int i = 0; i < READERS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, reader_never_stops, NULL), 0);
	struct timespec settle = { 0, 1000000 };
	nanosleep(&settle, NULL);
	uint64_t w = held_for_reads();
	atomic_store(&reader_stop, true);
	for (int i = 0; i < READERS; i++)
		pthread_join(t[i], NULL);
	return w;
}

/* A program that never stops reading checkpoints back holds a publication
 * for CKC_BG_YIELD_MAX_NS, and not much longer: it is never held up
 * for good. A reader descheduled for longer than CKC_BG_READ_QUIET_NS (a
 * loaded machine: on 2 cores under the sanitizers, 8 tries in a row were
 * all cut short) ends the wait early, so the longest of up to 64 tries,
 * or of 2 s of tries, counts. */
Test(pace, a_publication_is_never_held_for_good)
{
	uint64_t most = 0, until = ckc_now_ns() + 2000000000ull;
	for (int i = 0; i < 64 && most < CKC_BG_YIELD_MAX_NS * 9 / 10 && ckc_now_ns() < until; i++) {
		uint64_t w = held_by_a_reader();
		/* (bounded: naps of a loaded machine overshoot, so 10 x) */
		cr_assert_lt(w, 10 * CKC_BG_YIELD_MAX_NS, "waited %llu ns", (unsigned long long)w);
		most = w > most ? w : most;
	}
	cr_assert_geq(most, CKC_BG_YIELD_MAX_NS * 9 / 10, "waited %llu ns at most", (unsigned long long)most);
}

static void *reader_for_a_while(void *arg)
{
	uint64_t end = ckc_now_ns() + *(uint64_t *)arg;
	while (ckc_now_ns() < end) {
		ckc_prog_begin();
		ckc_prog_end();
		ckc_prog_read_opened();
	}
	return NULL;
}

/* A flush's file is made in a checkpoint folder only once the program has
 * stopped reading back there: making a file costs the kernel up to a
 * millisecond of work beside the program (an inode found on a file system
 * that has deleted many), which a program opening small files one after
 * another paid for in every open. */
Test(pace, a_flush_makes_its_file_once_the_program_has_read_back)
{
	char dir[] = "/tmp/ckc-pace-XXXXXX", key[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(key, sizeof(key), "%s/ckpt.bin", dir);
	uint64_t reading = 4 * CKC_BG_YIELD_MAX_NS, most = 0;
	/* (the longest of a few tries: see a_publication_is_never_held_for_good) */
	for (int i = 0; i < 8 && most < CKC_BG_YIELD_MAX_NS * 9 / 10; i++) {
		pthread_t t[READERS];
		for (int r = 0; r < READERS; r++)
			cr_assert_eq(pthread_create(&t[r], NULL, reader_for_a_while, &reading), 0);
		struct timespec settle = { 0, 1000000 };
		nanosleep(&settle, NULL);
		ckc_tl_background = true;
		uint64_t a = ckc_now_ns();
		char *tmp = NULL;
		int fd = -1;
		int rc = ckc_home_temp(key, 0644, &tmp, &fd);
		uint64_t w = ckc_now_ns() - a;
		ckc_tl_background = false;
		for (int r = 0; r < READERS; r++)
			pthread_join(t[r], NULL);
		cr_assert_eq(rc, 0, "ckc_home_temp: %d", rc);
		cr_assert_geq(fd, 0);
		close(fd);
		if (tmp && strncmp(tmp, dir, strlen(dir)) == 0)
			unlink(tmp);
		free(tmp);
		/* (a wait for the program's copies first, ckc_bg_yield's) */
		cr_assert_lt(w, 10 * (CKC_BG_YIELD_MAX_NS + CKC_BG_YIELD_MAX_NS), "waited %llu ns",
			     (unsigned long long)w);
		most = w > most ? w : most;
	}
	rmdir(dir);
	cr_assert_geq(most, CKC_BG_YIELD_MAX_NS * 9 / 10,
		      "the file was made %llu ns after the call at most, while the program read", (unsigned long long)most);
}
