/* Tests of the choice between the cache and the real path (src/aside.c):
 * where it begins, what it tries, when it changes its mind, what it
 * ignores, and how few checkpoints it sends to the slower side in a steady
 * world. */
#include <criterion/criterion.h>

#include "aside.h"

#define MiB (1ull << 20)

/* ns that bytes take at gbps GB/s */
static uint64_t at(uint64_t bytes, double gbps)
{
	return (uint64_t)((double)bytes / gbps);
}

/* Runs n checkpoints of size bytes in a world where the cache writes at
 * cache_gbps and the real path at home_gbps; counts those sent to each. */
static void world(aside_t *a, int n, uint64_t size, double cache_gbps, double home_gbps, int sent[2])
{
	for (int i = 0; i < n; i++) {
		aside_side_t s = aside_pick(a);
		sent[s]++;
		aside_note(a, s, size, at(size, s == ASIDE_HOME ? home_gbps : cache_gbps));
	}
}

Test(aside, off_always_answers_the_cache_and_learns_nothing)
{
	aside_t a;
	aside_init(&a, false);
	aside_prior(&a, 1e9, 9e9, 0, 0);
	int sent[2] = { 0, 0 };
	world(&a, 100, 16 * MiB, 1, 9, sent);
	cr_assert_eq(sent[ASIDE_HOME], 0);
	cr_assert_eq(a.n[0] + a.n[1], 0);
	cr_assert_eq(a.tries, 0);
}

Test(aside, a_process_begins_on_the_real_path_and_tries_the_cache_after_the_warm_up)
{
	aside_t a;
	aside_init(&a, true);
	for (int i = 0; i < ASIDE_WARM; i++) {
		cr_assert_eq(aside_pick(&a), ASIDE_HOME, "checkpoint %d goes where it would without the library", i);
		aside_note(&a, ASIDE_HOME, 16 * MiB, at(16 * MiB, 5));
	}
	cr_assert_eq(aside_pick(&a), ASIDE_CACHE, "then the cache is tried");
	cr_assert_not(aside_note(&a, ASIDE_CACHE, 16 * MiB, at(16 * MiB, 0.5)), "a slow try changes nothing");
	cr_assert_eq(a.choice, ASIDE_HOME);
	int sent[2] = { 0, 0 };
	world(&a, 1000, 16 * MiB, 0.5, 5, sent);
	/* gaps of 8, 16, ... 256: the cache's tries are paid for */
	cr_assert_leq(sent[ASIDE_CACHE], 5 + 1000 / ASIDE_EVERY_MAX_CACHE + 1, "%d tries of the slower cache",
		      sent[ASIDE_CACHE]);
	cr_assert_geq(sent[ASIDE_CACHE], 1000 / ASIDE_EVERY_MAX_CACHE, "tries go on: %d", sent[ASIDE_CACHE]);
	cr_assert_eq(a.switches, 0);
}

Test(aside, a_faster_cache_takes_the_checkpoints_and_the_real_path_is_still_tried)
{
	aside_t a;
	aside_init(&a, true);
	int sent[2] = { 0, 0 };
	world(&a, 1000, 16 * MiB, 10, 1, sent);
	cr_assert_eq(a.choice, ASIDE_CACHE);
	cr_assert_eq(a.switches, 1);
	cr_assert_leq(sent[ASIDE_HOME], ASIDE_WARM + 4 + 1000 / ASIDE_EVERY_MAX + 1, "%d of 1000 on the real path",
		      sent[ASIDE_HOME]);
	cr_assert_geq(sent[ASIDE_HOME], 1000 / ASIDE_EVERY_MAX, "tries of the real path go on: %d",
		      sent[ASIDE_HOME]);
}

/* A cache whose copies are fast but whose checkpoints the program then
 * waits for (a listing of their folder that publishes them, a rotation's
 * glob after each one): the wait is added to each one's sample, and the
 * checkpoints go to the real path, which the same program writes faster
 * than the copy and the wait together; a charge of nothing, or of a side
 * never sampled, changes nothing. */
Test(aside, a_wait_for_the_cached_checkpoints_counts_against_the_cache)
{
	aside_t a;
	aside_init(&a, true);
	cr_assert_not(aside_charge(&a, ASIDE_CACHE, 16 * MiB, 1000000), "no sample of the cache yet");
	int sent[2] = { 0, 0 };
	/* the cache copies at 10 GB/s, the real path takes 5 GB/s, and the
	 * program waits for each cached one at the real path's speed */
	for (int i = 0; i < 200; i++) {
		aside_side_t s = aside_pick(&a);
		sent[s]++;
		aside_note(&a, s, 16 * MiB, at(16 * MiB, s == ASIDE_HOME ? 5 : 10));
		if (s == ASIDE_CACHE)
			aside_charge(&a, ASIDE_CACHE, 16 * MiB, at(16 * MiB, 5));
	}
	cr_assert_eq(a.choice, ASIDE_HOME, "the real path: %.2f GB/s against the cache's %.2f", a.bw[ASIDE_HOME] / 1e9,
		     a.bw[ASIDE_CACHE] / 1e9);
	cr_assert_leq(sent[ASIDE_CACHE], 10, "%d of 200 cached", sent[ASIDE_CACHE]);
	cr_assert_lt(a.bw[ASIDE_CACHE], 3.5e9, "the cache's samples carry the waits: %.2f GB/s", a.bw[ASIDE_CACHE] / 1e9);
	/* without the waits the same world keeps the cache */
	aside_t b;
	aside_init(&b, true);
	int kept[2] = { 0, 0 };
	world(&b, 200, 16 * MiB, 10, 5, kept);
	cr_assert_eq(b.choice, ASIDE_CACHE);
	double before = b.bw[ASIDE_CACHE];
	cr_assert_not(aside_charge(&b, ASIDE_CACHE, 16 * MiB, 0));
	cr_assert_not(aside_charge(&b, ASIDE_CACHE, 1000, 1000000), "a small checkpoint teaches nothing");
	cr_assert_eq(b.bw[ASIDE_CACHE], before);
}

Test(aside, the_real_path_is_kept_down_to_a_fraction_of_the_cache_speed)
{
	/* from the real path, where a process begins: it is left below ASIDE_LEAVE */
	double ratio[] = { ASIDE_LEAVE - 0.01, ASIDE_LEAVE + 0.01, 1.0, 0.5, 1.5 };
	aside_side_t want[] = { ASIDE_CACHE, ASIDE_HOME, ASIDE_HOME, ASIDE_CACHE, ASIDE_HOME };
	for (int k = 0; k < 5; k++) {
		aside_t a;
		aside_init(&a, true);
		int sent[2] = { 0, 0 };
		world(&a, 50, 8 * MiB, 10, 10 * ratio[k], sent);
		cr_assert_eq(a.choice, want[k], "the real path at %.2f of the cache's speed", ratio[k]);
	}
}

Test(aside, small_checkpoints_teach_nothing)
{
	aside_t a;
	aside_init(&a, true);
	int sent[2] = { 0, 0 };
	world(&a, 500, ASIDE_MIN_BYTES - 1, 0.1, 10, sent);
	cr_assert_eq(a.n[ASIDE_CACHE] + a.n[ASIDE_HOME], 0);
	cr_assert_eq(a.tries, 0, "nothing to compare: nothing tried");
	cr_assert_not(aside_note(&a, ASIDE_CACHE, 64 * MiB, 0), "a sample of no time is ignored");
	cr_assert_eq(a.n[ASIDE_CACHE], 0);
}

/* Runs n small checkpoints whose open-to-close time is cache_us through
 * the cache and home_us on the real path (the model of small files). */
static void small_world(aside_t *a, int n, double cache_us, double home_us, int sent[2])
{
	for (int i = 0; i < n; i++) {
		aside_side_t s = aside_pick(a);
		sent[s]++;
		aside_note_time(a, s, (uint64_t)((s == ASIDE_HOME ? home_us : cache_us) * 1e3));
	}
}

/* A new model (on) after n small checkpoints of such a world. */
static aside_t small_fresh(int n, double cache_us, double home_us, int sent[2])
{
	aside_t a;
	aside_init(&a, true);
	sent[0] = sent[1] = 0;
	small_world(&a, n, cache_us, home_us, sent);
	return a;
}

Test(aside, small_files_stay_on_a_real_path_that_takes_them_faster)
{
	/* a local file system that creates a file in 15 us, and a cache whose
	 * own work beside its publications costs the program 50 us a file */
	int sent[2];
	aside_t a = small_fresh(3000, 50, 15, sent);
	cr_assert_eq(a.choice, ASIDE_HOME);
	cr_assert_eq(a.switches, 0);
	cr_assert_leq(sent[ASIDE_CACHE], 5 + 3000 / ASIDE_EVERY_MAX_CACHE + 1, "%d small files went to the slower cache",
		      sent[ASIDE_CACHE]);
	cr_assert_geq(sent[ASIDE_CACHE], 1, "the cache is tried");
}

Test(aside, small_files_go_to_the_cache_where_the_file_system_is_slow_to_make_them)
{
	/* a file system in the middle of a purge: 400 us a file, against 20
	 * through the cache */
	int sent[2];
	aside_t a = small_fresh(3000, 20, 400, sent);
	cr_assert_eq(a.choice, ASIDE_CACHE);
	cr_assert_geq(sent[ASIDE_CACHE], 2900, "only %d of 3000 went to the cache", sent[ASIDE_CACHE]);
	/* and when the file system recovers, the real path takes them back */
	int later[2] = { 0, 0 };
	small_world(&a, 3000, 20, 10, later);
	cr_assert_eq(a.choice, ASIDE_HOME);
	cr_assert_geq(later[ASIDE_HOME], 2800, "only %d of 3000 went straight", later[ASIDE_HOME]);
}

Test(aside, tries_of_a_much_slower_cache_cost_the_program_half_a_percent)
{
	/* a small file through the cache 150 us, 30 us straight (the build
	 * machine's Python loop of 3,000: 153 against 33): tries every
	 * ASIDE_EVERY_MAX_CACHE files cost the program 1.7% of its time */
	int sent[2];
	aside_t a = small_fresh(10000, 150, 30, sent);
	cr_assert_eq(a.choice, ASIDE_HOME);
	double spent = sent[ASIDE_HOME] * 30.0 + sent[ASIDE_CACHE] * 150.0, straight = 10000 * 30.0;
	cr_assert_leq(spent / straight - 1.0, 0.01, "%d tries of the cache cost %.2f%%", sent[ASIDE_CACHE],
		      100.0 * (spent / straight - 1.0));
	cr_assert_geq(sent[ASIDE_CACHE], 5, "tries go on: %d", sent[ASIDE_CACHE]);
	cr_assert_leq(a.every, ASIDE_EVERY_MAX_SLOW);
	/* a cache only a little slower keeps the usual gap */
	aside_t b = small_fresh(10000, 40, 30, sent);
	cr_assert_eq(b.every, ASIDE_EVERY_MAX_CACHE);
	/* and a real path that slows down is tried against the cache at once,
	 * whatever the gap */
	int later[2] = { 0, 0 };
	small_world(&a, 40, 150, 900, later);
	cr_assert_eq(a.choice, ASIDE_CACHE, "the cache was not tried again in 40 files");
}

Test(aside, a_time_sample_counts_a_pick_as_ended)
{
	aside_t a;
	aside_init(&a, true);
	aside_side_t s = aside_pick(&a);
	cr_assert_eq(aside_open(&a, s), 1);
	aside_note_time(&a, s, 20000);
	cr_assert_eq(aside_open(&a, s), 0);
	cr_assert_eq(a.measured[s], 1);
	cr_assert_float_eq(a.bw[s], 1e9 / 20000.0, 1e-6, "speed is files per second");
	cr_assert_not(aside_note_time(&a, ASIDE_CACHE, 0), "a zero time teaches nothing");
	cr_assert_eq(a.measured[ASIDE_CACHE], 0);
}

Test(aside, a_real_path_that_slows_down_sends_the_checkpoints_back_to_the_cache)
{
	aside_t a;
	aside_init(&a, true);
	int sent[2] = { 0, 0 };
	world(&a, 100, 16 * MiB, 4, 8, sent);
	cr_assert_eq(a.choice, ASIDE_HOME);
	/* the page cache fills: writes are throttled to the disk's speed */
	int later[2] = { 0, 0 };
	world(&a, 100, 16 * MiB, 4, 0.5, later);
	cr_assert_eq(a.choice, ASIDE_CACHE);
	cr_assert_eq(a.switches, 1, "it began on the real path and changed once");
	cr_assert_leq(later[ASIDE_HOME], 2 + 100 / ASIDE_EVERY_MIN, "%d went on to the slow real path",
		      later[ASIDE_HOME]);
}

Test(aside, a_prior_starts_where_the_last_process_ended)
{
	aside_t a;
	aside_init(&a, true);
	aside_prior(&a, 6e9, 2e9, 0, 0);
	cr_assert_eq(a.choice, ASIDE_CACHE);
	cr_assert_eq(aside_pick(&a), ASIDE_CACHE, "the first checkpoint goes to the cache");
	/* a process that wrote one checkpoint, to its real path: the next
	 * one tries the cache with its one checkpoint */
	aside_t b;
	aside_init(&b, true);
	aside_prior(&b, 0, 6e9, 0, 0);
	cr_assert_eq(b.choice, ASIDE_HOME, "one side known: no choice yet");
	cr_assert_eq(aside_pick(&b), ASIDE_CACHE);
	aside_t c;
	aside_init(&c, true);
	aside_prior(&c, 3e9, 0, 0, 0);
	cr_assert_eq(aside_pick(&c), ASIDE_HOME, "the side not known is measured");
	/* the rhythm of the tries goes on from process to process */
	aside_t d;
	aside_init(&d, true);
	aside_prior(&d, 2e9, 6e9, ASIDE_EVERY_MAX_CACHE, ASIDE_EVERY_MAX_CACHE);
	cr_assert_eq(aside_pick(&d), ASIDE_CACHE, "the try that was due");
	aside_t e;
	aside_init(&e, true);
	aside_prior(&e, 2e9, 6e9, 3, 2 * ASIDE_EVERY_MAX_SLOW);
	cr_assert_eq(e.every, ASIDE_EVERY_MIN, "a rhythm out of range is not taken");
	cr_assert_eq(aside_pick(&e), ASIDE_HOME);
}

/* The real path slows down with the machine (memory the host must hand
 * back first, a write-back): the cache, known only from the record, is
 * tried once before it takes the checkpoints, and where it is as slow
 * the real path keeps them; where it is faster it takes them at once. */
Test(aside, a_real_path_that_slows_with_the_machine_is_kept_unless_a_try_of_the_cache_beats_it)
{
	aside_t a;
	aside_init(&a, true);
	aside_prior(&a, 3.4e9, 5.4e9, 0, ASIDE_EVERY_MIN);
	cr_assert_eq(a.choice, ASIDE_HOME);
	int sent[2] = { 0, 0 };
	world(&a, 60, 16 * MiB, 0.6, 0.5, sent);
	cr_assert_eq(a.choice, ASIDE_HOME);
	cr_assert_eq(a.switches, 0, "the choice changed %u times", a.switches);
	cr_assert_leq(sent[ASIDE_CACHE], 1 + 60 / ASIDE_EVERY_MIN, "%d of 60 went to the cache", sent[ASIDE_CACHE]);

	aside_t b;
	aside_init(&b, true);
	aside_prior(&b, 6e9, 8e9, 0, ASIDE_EVERY_MIN);
	int first[2] = { 0, 0 };
	world(&b, 4, 16 * MiB, 6, 0.5, first);
	cr_assert_eq(b.choice, ASIDE_CACHE, "a try of a faster cache takes the checkpoints");
	cr_assert_eq(b.switches, 1);
	cr_assert_eq(b.tries, 1, "one try before the change");
	cr_assert_eq(first[ASIDE_HOME], 1, "the record's speed of the real path gave way to its first sample: %d "
		     "checkpoints went there", first[ASIDE_HOME]);
}

/* A record whose cache figure came from a slow try (pages new to the
 * process) long ago, with the real path chosen and tries spaced far apart:
 * the real path turns as slow as that figure. Once a try comes, its sample
 * stands for the record's, and the checkpoints go to the cache; before,
 * the record's two samples outvoted it. */
Test(aside, a_try_replaces_the_records_figure_of_the_cache)
{
	aside_t a;
	aside_init(&a, true);
	aside_prior(&a, 0.41e9, 0.45e9, ASIDE_EVERY_MAX_CACHE - 3, ASIDE_EVERY_MAX_CACHE);
	cr_assert_eq(a.choice, ASIDE_HOME);
	int sent[2] = { 0, 0 };
	world(&a, 8, 16 * MiB, 12, 0.45, sent);
	cr_assert_eq(a.choice, ASIDE_CACHE, "the cache, 12 GB/s, against a real path of 0.45");
	cr_assert_eq(a.tries, 1, "%u tries", a.tries);
	cr_assert_geq(sent[ASIDE_CACHE], 4, "%d of 8 went to the cache", sent[ASIDE_CACHE]);
}

/* A process whose checkpoints went to the cache faster than they were
 * published, and whose exit then waited for the rest, leaves the next
 * process the cache's speed with that wait counted: it starts on the real
 * path. One whose exit waited for nothing, or that cached nothing, leaves
 * the speeds it measured. */
Test(aside, an_exit_that_waited_for_the_flushes_counts_against_the_cache)
{
	aside_t a;
	aside_init(&a, true);
	aside_prior(&a, 6e9, 2e9, 0, ASIDE_EVERY_MAX_CACHE);
	int sent[2] = { 0, 0 };
	world(&a, 100, 16 * MiB, 6, 2, sent);
	cr_assert_eq(a.choice, ASIDE_CACHE);
	cr_assert_geq(sent[ASIDE_CACHE], 95, "%d of 100 to the cache", sent[ASIDE_CACHE]);
	double measured = a.bw[ASIDE_CACHE];
	aside_t quiet = a;
	aside_drained(&quiet, 0);
	cr_assert_float_eq(quiet.bw[ASIDE_CACHE], measured, 1.0, "no wait at the exit: the speed measured");
	aside_t short_wait = a;
	aside_drained(&short_wait, 10000000); /* 10 ms against 0.27 s of writes */
	cr_assert_gt(short_wait.bw[ASIDE_CACHE], 5.5e9, "%.2f GB/s", short_wait.bw[ASIDE_CACHE] / 1e9);
	/* the flushes of 1.6 GB ran at 0.5 GB/s: 2.9 s left for the exit */
	aside_drained(&a, 2900000000ull);
	cr_assert_lt(a.bw[ASIDE_CACHE], 0.8 * a.bw[ASIDE_HOME], "%.2f GB/s into the cache with the wait",
		     a.bw[ASIDE_CACHE] / 1e9);
	aside_t next;
	aside_init(&next, true);
	aside_prior(&next, a.bw[ASIDE_CACHE], a.bw[ASIDE_HOME], a.since, a.every);
	cr_assert_eq(aside_pick(&next), ASIDE_HOME, "the next process starts on the real path");

	aside_t home;
	aside_init(&home, true);
	aside_prior(&home, 2e9, 6e9, 0, ASIDE_EVERY_MAX_CACHE);
	world(&home, 20, 16 * MiB, 2, 6, sent);
	double hb = home.bw[ASIDE_CACHE];
	uint64_t cached = home.cache_bytes;
	aside_drained(&home, 2900000000ull);
	cr_assert(cached == 0 || home.bw[ASIDE_CACHE] < hb, "a try of the cache waited for counts too");
	aside_t none;
	aside_init(&none, true);
	aside_prior(&none, 2e9, 6e9, 0, ASIDE_EVERY_MAX_CACHE);
	aside_drained(&none, 2900000000ull);
	cr_assert_float_eq(none.bw[ASIDE_CACHE], 2e9, 1.0, "nothing cached: the record's speed stays");
}

/* One slow sample among fast ones (a write that met the page cache's
 * write-back) changes nothing: a side's speed is a median. */
Test(aside, one_outlier_does_not_change_the_choice)
{
	aside_t a;
	aside_init(&a, true);
	int sent[2] = { 0, 0 };
	world(&a, 40, 16 * MiB, 2, 6, sent);
	cr_assert_eq(a.choice, ASIDE_HOME);
	cr_assert_not(aside_note(&a, ASIDE_HOME, 16 * MiB, at(16 * MiB, 0.1)));
	cr_assert_eq(a.choice, ASIDE_HOME);
	cr_assert_not(aside_note(&a, ASIDE_HOME, 16 * MiB, at(16 * MiB, 0.1)));
	cr_assert_eq(a.choice, ASIDE_HOME, "two of five samples are still outliers");
	aside_note(&a, ASIDE_HOME, 16 * MiB, at(16 * MiB, 0.1));
	/* three of five are the real path's speed now: the cache, last
	 * measured more than five samples ago, is tried first */
	cr_assert_eq(a.choice, ASIDE_HOME, "the cache was not measured among the last five");
	cr_assert_eq(aside_pick(&a), ASIDE_CACHE, "the next checkpoint tries the cache");
	aside_note(&a, ASIDE_CACHE, 16 * MiB, at(16 * MiB, 2));
	cr_assert_eq(a.choice, ASIDE_CACHE, "the try confirmed it: the cache takes the checkpoints");
}

/* Between the two thresholds the choice stays as it is. */
Test(aside, hysteresis_keeps_a_choice_between_the_thresholds)
{
	double mid = (ASIDE_ENTER + ASIDE_LEAVE) / 2;
	aside_t a;
	aside_init(&a, true);
	int sent[2] = { 0, 0 };
	world(&a, 50, 16 * MiB, 10, 1, sent);
	cr_assert_eq(a.choice, ASIDE_CACHE);
	world(&a, 200, 16 * MiB, 10, 10 * mid, sent);
	cr_assert_eq(a.choice, ASIDE_CACHE, "in the cache: the real path is not fast enough to enter");
	aside_t b;
	aside_init(&b, true);
	world(&b, 200, 16 * MiB, 10, 10 * mid, sent);
	cr_assert_eq(b.choice, ASIDE_HOME, "on the real path: not slow enough to leave");
	cr_assert_eq(b.switches, 0);
}

/* In a steady world the slower side gets few checkpoints, whichever it is. */
Test(aside, the_slower_side_gets_a_bounded_share)
{
	double speeds[][2] = { { 10, 1 }, { 1, 10 }, { 5, 4.5 }, { 3, 2 }, { 12, 2.4 } };
	for (size_t k = 0; k < sizeof(speeds) / sizeof(speeds[0]); k++) {
		aside_t a;
		aside_init(&a, true);
		int sent[2] = { 0, 0 };
		world(&a, 2000, 16 * MiB, speeds[k][0], speeds[k][1], sent);
		aside_side_t best = speeds[k][1] >= ASIDE_LEAVE * speeds[k][0] ? ASIDE_HOME : ASIDE_CACHE;
		cr_assert_eq(a.choice, best, "world %zu", k);
		cr_assert_leq(sent[!best], 2 * ASIDE_WARM + 2000 / ASIDE_EVERY_MAX + 8, "world %zu: %d of 2000 on the other side",
			      k, sent[!best]);
	}
}

/* ---- the node-local record (src/aside_store.c) ------------------------- */

#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_int.h"

static void a_unique_pattern(char *out, size_t len, const char *what)
{
	snprintf(out, len, "/test-aside-%s-%ld-%ld/*.bin", what, (long)getpid(), (long)time(NULL));
}

/* Each test keeps its records in a folder of its own: the tests of this
 * file run at once, and one of them damages every record it finds. */
static char store_dir[64];

static void private_store(void)
{
	snprintf(store_dir, sizeof(store_dir), "/tmp/test-aside-store-XXXXXX");
	cr_assert_not_null(mkdtemp(store_dir));
	ckc_aside_store_dir = store_dir;
}

static void private_store_gone(void)
{
	char file[256];
	if (ckc_aside_store_path(file, sizeof(file)) == 0)
		unlink(file);
	rmdir(store_dir);
}

Test(aside_store, what_a_process_learnt_is_the_next_ones_prior, .init = private_store, .fini = private_store_gone)
{
	char paths[128], other[128];
	a_unique_pattern(paths, sizeof(paths), "prior");
	a_unique_pattern(other, sizeof(other), "other");
	aside_t a;
	aside_init(&a, true);
	int sent[2] = { 0, 0 };
	world(&a, 40, 16 * MiB, 2, 6, sent);
	cr_assert_eq(a.choice, ASIDE_HOME);
	ckc_aside_save(&a, NULL, paths);

	aside_t b;
	aside_init(&b, true);
	ckc_aside_load(&b, NULL, paths);
	cr_assert_eq(b.n[ASIDE_CACHE], ASIDE_WARM, "the record's cache speed is a warm side");
	cr_assert_float_eq(b.bw[ASIDE_CACHE], a.bw[ASIDE_CACHE], 1.0);
	cr_assert_float_eq(b.bw[ASIDE_HOME], a.bw[ASIDE_HOME], 1.0);
	cr_assert_eq(b.every, a.every, "the rhythm of the tries goes on");
	cr_assert_eq(b.choice, ASIDE_HOME);

	aside_t c;
	aside_init(&c, true);
	ckc_aside_load(&c, NULL, other);
	cr_assert_eq(c.n[ASIDE_CACHE] + c.n[ASIDE_HOME], 0, "another pattern has no record");

	aside_t off;
	aside_init(&off, false);
	ckc_aside_load(&off, NULL, paths);
	cr_assert_eq(off.n[ASIDE_CACHE] + off.n[ASIDE_HOME], 0, "a model that is off takes nothing");
}

/* A record whose bytes were torn (two processes wrote it at once) or
 * damaged is ignored, never read as speeds. */
Test(aside_store, a_damaged_record_is_ignored, .init = private_store, .fini = private_store_gone)
{
	char paths[128], file[256];
	a_unique_pattern(paths, sizeof(paths), "torn");
	aside_t a;
	aside_init(&a, true);
	int sent[2] = { 0, 0 };
	world(&a, 40, 16 * MiB, 2, 6, sent);
	ckc_aside_save(&a, NULL, paths);
	cr_assert_eq(ckc_aside_store_path(file, sizeof(file)), 0);
	int fd = open(file, O_RDWR);
	cr_assert_geq(fd, 0);
	/* find the record by loading, then damage every record's speeds */
	unsigned char rec[64];
	int damaged = 0;
	for (off_t off = 0; pread(fd, rec, sizeof(rec), off) == (ssize_t)sizeof(rec); off += 64) {
		rec[9] ^= 0x40;
		cr_assert_eq(pwrite(fd, rec, sizeof(rec), off), (ssize_t)sizeof(rec));
		damaged++;
	}
	cr_assert_gt(damaged, 0);
	aside_t b;
	aside_init(&b, true);
	ckc_aside_load(&b, NULL, paths);
	cr_assert_eq(b.n[ASIDE_CACHE] + b.n[ASIDE_HOME], 0, "the damaged record was taken");
	/* undo, so that the other records of this user stay good */
	for (off_t off = 0; pread(fd, rec, sizeof(rec), off) == (ssize_t)sizeof(rec); off += 64) {
		rec[9] ^= 0x40;
		cr_assert_eq(pwrite(fd, rec, sizeof(rec), off), (ssize_t)sizeof(rec));
	}
	close(fd);
	aside_t c;
	aside_init(&c, true);
	ckc_aside_load(&c, NULL, paths);
	cr_assert_eq(c.n[ASIDE_CACHE], ASIDE_WARM, "restored, the record is taken again");
}

/* What aside_peek foretells is what the next aside_pick answers, whatever
 * the samples, the prior or the thresholds crossed meanwhile; peeking
 * changes nothing. */
Test(aside, a_peek_foretells_the_next_pick)
{
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (int run = 0; run < 40; run++) {
		aside_t a;
		aside_init(&a, run % 10 != 0);
		if (run % 3 == 1)
			aside_prior(&a, 1e9 * (1 + run % 4), 2e9, (uint32_t)run % 9, ASIDE_EVERY_MIN * (1u + run % 4));
		for (int i = 0; i < 300; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			aside_side_t want = aside_peek(&a);
			cr_assert_eq(aside_peek(&a), want, "a peek changes nothing");
			aside_side_t s = aside_pick(&a);
			cr_assert_eq(s, want, "run %d, checkpoint %d: peek %d, pick %d", run, i, want, s);
			/* speeds that wander across both thresholds */
			double gbps = 0.5 + (double)(x % 4000) / 1000.0;
			aside_note(&a, s, (x >> 20) % 3 ? 16 * MiB : 4096, at(16 * MiB, gbps));
		}
	}
}

/* ends_behind: set by an exit that waited a fifth of the cache's time or
 * more, unless the cache with that wait still beat the real path by the
 * margin the choice asks, kept by a process that cached too little to say otherwise,
 * cleared by one that took ASIDE_CLEAR_SAMPLES samples of the cache and
 * waited for (almost) nothing; it goes from process to process with the
 * record. */
Test(aside_store, the_mark_of_a_program_that_ends_behind_its_flushes, .init = private_store, .fini = private_store_gone)
{
	char paths[128];
	a_unique_pattern(paths, sizeof(paths), "behind");
	aside_t a;
	aside_init(&a, true);
	aside_prior(&a, 6e9, 2e9, 0, ASIDE_EVERY_MAX_CACHE);
	int sent[2] = { 0, 0 };
	world(&a, 20, 16 * MiB, 6, 2, sent);
	cr_assert_not(a.ends_behind);
	aside_t b = a;
	aside_drained(&b, a.cache_ns / 10);
	cr_assert_not(b.ends_behind, "a wait of a tenth of the cache's time");
	aside_t c = a;
	aside_drained(&c, a.cache_ns / 4);
	cr_assert_not(c.ends_behind, "a wait of a quarter of it, the cache still ahead of the real path with it");
	aside_drained(&a, 3 * a.cache_ns);
	cr_assert(a.ends_behind, "a wait of three times it: with it, the cache is slower than the real path");
	ckc_aside_save(&a, NULL, paths);
	aside_t next;
	aside_init(&next, true);
	ckc_aside_load(&next, NULL, paths);
	cr_assert(next.ends_behind, "the mark goes with the record");
	cr_assert_eq(next.every, a.every, "and the rhythm of the tries is whole");
	/* a process that cached only its tries, and waited for nothing */
	for (int i = 0; i < 3; i++)
		aside_note(&next, ASIDE_CACHE, 16 * MiB, at(16 * MiB, 6));
	next.measured[ASIDE_CACHE] = ASIDE_CLEAR_SAMPLES - 1;
	aside_drained(&next, 0);
	cr_assert(next.ends_behind, "too few samples of the cache to clear it");
	next.measured[ASIDE_CACHE] = ASIDE_CLEAR_SAMPLES;
	next.capped = 1;
	aside_drained(&next, 0);
	cr_assert(next.ends_behind, "a sample capped at its flush's time: kept");
	next.capped = 0;
	aside_drained(&next, 0);
	cr_assert_not(next.ends_behind, "enough samples, none capped, no wait: cleared");
	ckc_aside_save(&next, NULL, paths);
	aside_t third;
	aside_init(&third, true);
	ckc_aside_load(&third, NULL, paths);
	cr_assert_not(third.ends_behind);
}

/* What a new process takes from paths' record: its model of checkpoints
 * into *small. */
static void next_process_small(const char *paths, aside_t *small)
{
	aside_t big;
	aside_init(&big, true);
	aside_init(small, true);
	ckc_aside_load(&big, small, paths);
}

/* The small checkpoints' record carries their speeds, not the rhythm of
 * their tries: the next process's small model starts from those speeds
 * at the gap they settle at, not from ASIDE_EVERY_MIN (a Python loop of
 * 3,000 small files made 18 tries of a cache 4.6 times slower, each
 * 120 us of the program's time). */
Test(aside_store, the_small_checkpoints_record_spaces_the_next_process_tries, .init = private_store,
     .fini = private_store_gone)
{
	char paths[128];
	a_unique_pattern(paths, sizeof(paths), "small");
	aside_t big, small;
	aside_init(&big, true);
	int sent[2];
	small = small_fresh(3000, 150, 30, sent);
	cr_assert_eq(small.choice, ASIDE_HOME);
	ckc_aside_save(&big, &small, paths);

	aside_t small2;
	next_process_small(paths, &small2);
	cr_assert_eq(small2.choice, ASIDE_HOME);
	cr_assert_float_eq(small2.bw[ASIDE_CACHE], small.bw[ASIDE_CACHE], 1.0);
	cr_assert_geq(small2.every, ASIDE_EVERY_MAX_CACHE, "the first try after %u files", small2.every);
	int next[2] = { 0, 0 };
	small_world(&small2, 3000, 150, 30, next);
	cr_assert_leq(next[ASIDE_CACHE], 5, "%d of the next process's 3000 tried the cache", next[ASIDE_CACHE]);
	cr_assert_geq(next[ASIDE_CACHE], 1, "it still tries it");

	/* a record whose small checkpoints went faster through the cache */
	aside_t quick = small_fresh(3000, 20, 400, sent);
	cr_assert_eq(quick.choice, ASIDE_CACHE);
	ckc_aside_save(&big, &quick, paths);
	aside_t small3;
	next_process_small(paths, &small3);
	cr_assert_eq(small3.choice, ASIDE_CACHE, "the next process sends them to the cache from the first");
	cr_assert_eq(small3.every, ASIDE_EVERY_MAX);

	/* no record of small checkpoints: the model starts as a new one */
	char bare[128];
	a_unique_pattern(bare, sizeof(bare), "bare");
	aside_t only;
	aside_init(&only, true);
	world(&only, 40, 16 * MiB, 2, 6, sent);
	ckc_aside_save(&only, NULL, bare);
	aside_t small4;
	next_process_small(bare, &small4);
	cr_assert_eq(small4.n[ASIDE_CACHE] + small4.n[ASIDE_HOME], 0);
	cr_assert_eq(small4.every, ASIDE_EVERY_MIN);
}

/* Processes that end at once (the ranks of a job on one node, with
 * programs or patterns of their own) each keep their record: none takes
 * the slot another is writing. */
Test(aside_store, records_saved_at_once_are_all_kept, .init = private_store, .fini = private_store_gone)
{
	enum { PROCS = 24, ROUNDS = 8 };
	for (int round = 0; round < ROUNDS; round++) {
		char file[256];
		cr_assert_eq(ckc_aside_store_path(file, sizeof(file)), 0);
		unlink(file);
		int go[2];
		cr_assert_eq(pipe(go), 0);
		pid_t kids[PROCS];
		for (int k = 0; k < PROCS; k++) {
			kids[k] = fork();
			cr_assert_geq(kids[k], 0);
			if (kids[k] == 0) {
				char paths[128], c;
				snprintf(paths, sizeof(paths), "/at-once-%d-%d/*.bin", round, k);
				aside_t a;
				aside_init(&a, true);
				int sent[2] = { 0, 0 };
				world(&a, 40, 16 * MiB, 2, 6, sent);
				close(go[1]);
				(void)!read(go[0], &c, 1);
				ckc_aside_save(&a, NULL, paths);
				_exit(0);
			}
		}
		close(go[0]);
		close(go[1]);
		for (int k = 0; k < PROCS; k++) {
			int st;
			cr_assert_eq(waitpid(kids[k], &st, 0), kids[k]);
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
		int kept = 0;
		for (int k = 0; k < PROCS; k++) {
			char paths[128];
			snprintf(paths, sizeof(paths), "/at-once-%d-%d/*.bin", round, k);
			aside_t b;
			aside_init(&b, true);
			ckc_aside_load(&b, NULL, paths);
			kept += b.n[ASIDE_CACHE] == ASIDE_WARM;
		}
		cr_assert_eq(kept, PROCS, "round %d: %d of %d records kept", round, kept, PROCS);
	}
}

/* A record that says the real path is the faster (a try of the cache
 * that met its first touch, in an earlier process) and has spaced the
 * tries to the most: a try that beats the real path is followed by
 * another at once, and the cache takes the checkpoints after a few, not
 * after hundreds. */
Test(aside, a_try_faster_than_the_record_is_tried_again_at_once)
{
	aside_t a;
	aside_init(&a, true);
	aside_prior(&a, 0.3e9, 1.5e9, 0, ASIDE_EVERY_MAX_CACHE);
	cr_assert_eq(a.choice, ASIDE_HOME);
	int sent[2] = { 0, 0 }, first = -1;
	for (int i = 0; i < 2 * ASIDE_EVERY_MAX_CACHE && a.choice == ASIDE_HOME; i++) {
		aside_side_t s = aside_pick(&a);
		sent[s]++;
		if (s == ASIDE_CACHE && first < 0)
			first = i;
		aside_note(&a, s, MiB, at(MiB, s == ASIDE_HOME ? 1.5 : 10));
	}
	cr_assert_eq(a.choice, ASIDE_CACHE, "the cache, after %d tries", sent[ASIDE_CACHE]);
	cr_assert_leq(sent[ASIDE_CACHE], 3, "%d tries of the cache", sent[ASIDE_CACHE]);
	cr_assert_geq(first, 0);
	/* a try that confirms the choice waits its turn */
	aside_t b;
	aside_init(&b, true);
	aside_prior(&b, 0.3e9, 1.5e9, 0, ASIDE_EVERY_MIN);
	int tried[2] = { 0, 0 };
	world(&b, 200, MiB, 0.3, 1.5, tried);
	cr_assert_eq(b.choice, ASIDE_HOME);
	cr_assert_leq(tried[ASIDE_CACHE], 6, "%d tries of the slower cache", tried[ASIDE_CACHE]);
}

/* Samples of the cache taken while it grows into memory new to the
 * process (aside_note_growing) do not send the checkpoints away from it;
 * the same slow samples noted as usual do; a try from the real path that
 * met the growth counts as usual. */
Test(aside, samples_of_a_growing_cache_do_not_send_it_away)
{
	aside_t a;
	aside_init(&a, true);
	aside_prior(&a, 10e9, 1.5e9, 0, ASIDE_EVERY_MIN);
	cr_assert_eq(a.choice, ASIDE_CACHE);
	aside_t b = a;
	for (int i = 0; i < 2 * ASIDE_KEEP; i++) {
		aside_side_t s = aside_pick(&a);
		if (s == ASIDE_HOME)
			cr_assert_not(aside_note(&a, s, MiB, at(MiB, 1.5)), "a try of the real path");
		else
			cr_assert_not(aside_note_growing(&a, MiB, at(MiB, 0.4)));
	}
	cr_assert_eq(a.choice, ASIDE_CACHE, "growing: kept");
	for (int i = 0; i < ASIDE_KEEP; i++) {
		aside_side_t s = aside_pick(&a);
		aside_note(&a, s, MiB, at(MiB, s == ASIDE_HOME ? 1.5 : 10));
	}
	cr_assert_eq(a.choice, ASIDE_CACHE);
	cr_assert_gt(a.bw[ASIDE_CACHE], 5e9, "the samples at hand take over: %.2f GB/s", a.bw[ASIDE_CACHE] / 1e9);
	for (int i = 0; i < 2 * ASIDE_KEEP && b.choice == ASIDE_CACHE; i++) {
		aside_side_t s = aside_pick(&b);
		aside_note(&b, s, MiB, at(MiB, s == ASIDE_HOME ? 1.5 : 0.4));
	}
	cr_assert_eq(b.choice, ASIDE_HOME, "the same speeds at hand: the real path");
	aside_t c;
	aside_init(&c, true);
	aside_prior(&c, 0.3e9, 1.5e9, 0, ASIDE_EVERY_MIN);
	for (int i = 0; i < 100; i++) {
		aside_side_t s = aside_pick(&c);
		if (s == ASIDE_CACHE)
			aside_note_growing(&c, MiB, at(MiB, 0.4));
		else
			aside_note(&c, s, MiB, at(MiB, 1.5));
	}
	cr_assert_eq(c.choice, ASIDE_HOME, "tries from the real path count as usual");
}

/* A try put off (its room not at hand) leaves the next checkpoint the
 * try; at most ASIDE_DEFER_MAX are put off in a row. */
Test(aside, a_try_is_put_off_a_bounded_number_of_times)
{
	aside_t a;
	aside_init(&a, true);
	for (int i = 0; i < ASIDE_WARM; i++) {
		cr_assert_eq(aside_pick(&a), ASIDE_HOME);
		aside_note(&a, ASIDE_HOME, MiB, at(MiB, 1.5));
	}
	cr_assert_eq(aside_peek(&a), ASIDE_CACHE);
	for (int i = 0; i < ASIDE_DEFER_MAX; i++) {
		cr_assert(aside_defer(&a), "put off %d", i);
		aside_note(&a, ASIDE_HOME, MiB, at(MiB, 1.5));
		cr_assert_eq(aside_peek(&a), ASIDE_CACHE, "still the try next");
	}
	cr_assert_not(aside_defer(&a), "no more than ASIDE_DEFER_MAX in a row");
	cr_assert_eq(aside_pick(&a), ASIDE_CACHE);
	cr_assert_eq(a.tries, 1);
	cr_assert_eq(a.deferred, 0);
	aside_note(&a, ASIDE_CACHE, MiB, at(MiB, 0.5));
	cr_assert_not(aside_defer(&a), "nothing to put off: the choice is next");
	aside_t off;
	aside_init(&off, false);
	cr_assert_not(aside_defer(&off));
}

/* The small checkpoints' model goes into the record with the large ones':
 * a next process of the same paths learns whether they went faster to
 * their real paths (by the model's rule, ASIDE_ENTER), and a record
 * without them (an older one, or no small checkpoint measured) says no. */
Test(aside_store, the_small_checkpoints_side_is_kept, .init = private_store, .fini = private_store_gone)
{
	char home[128], cache[128], none[128];
	a_unique_pattern(home, sizeof(home), "small-home");
	a_unique_pattern(cache, sizeof(cache), "small-cache");
	a_unique_pattern(none, sizeof(none), "small-none");
	aside_t big, small;
	aside_init(&big, true);
	aside_init(&small, true);
	/* files a second: the real path 30,000, the cache 10,000 */
	for (int i = 0; i < 4; i++) {
		aside_note_time(&small, ASIDE_HOME, 33333);
		aside_note_time(&small, ASIDE_CACHE, 100000);
	}
	ckc_aside_save(&big, &small, home);
	bool small_home = false;
	(void)ckc_aside_first_home(home, &small_home);
	cr_assert(small_home, "small checkpoints 3x faster at their real paths: the record says so");

	aside_t slow;
	aside_init(&slow, true);
	for (int i = 0; i < 4; i++) {
		aside_note_time(&slow, ASIDE_HOME, 100000);
		aside_note_time(&slow, ASIDE_CACHE, 33333);
	}
	ckc_aside_save(&big, &slow, cache);
	small_home = true;
	(void)ckc_aside_first_home(cache, &small_home);
	cr_assert(!small_home, "small checkpoints 3x faster in the cache: the record says so");

	int sent[2] = { 0, 0 };
	world(&big, 40, 16 * MiB, 2, 6, sent);
	ckc_aside_save(&big, NULL, none);
	small_home = true;
	(void)ckc_aside_first_home(none, &small_home);
	cr_assert(!small_home, "a record without small checkpoints says nothing of them");
	small_home = true;
	(void)ckc_aside_first_home("/no/record/for/*.these", &small_home);
	cr_assert(!small_home, "no record: nothing");
}
