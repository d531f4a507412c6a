/* Stepping aside (aside.h): a two-armed choice between the cache and the
 * real path, from the median of the program's last write speeds on each,
 * with hysteresis, and tries of the arm not chosen that grow rarer while
 * they confirm the choice. */
#include "config.h"

#include "aside.h"

#include <string.h>

void aside_init(aside_t *a, bool on)
{
	memset(a, 0, sizeof(*a));
	a->on = on;
	a->choice = on ? ASIDE_HOME : ASIDE_CACHE;
	a->every = ASIDE_EVERY_MIN;
}

/* The side that speeds bw favour, from the current choice. */
static aside_side_t aside_favoured(const aside_t *a, const double bw[2])
{
	double r = bw[ASIDE_HOME] / bw[ASIDE_CACHE];
	if (a->choice == ASIDE_HOME)
		return r >= ASIDE_LEAVE ? ASIDE_HOME : ASIDE_CACHE;
	return r >= ASIDE_ENTER ? ASIDE_HOME : ASIDE_CACHE;
}

/* The side the medians favour. */
static aside_side_t aside_better(const aside_t *a)
{
	return aside_favoured(a, a->bw);
}

CKC_TAGGED_PATH static double aside_median(const double *v, uint32_t n)
{
	double s[ASIDE_KEEP];
	memcpy(s, v, n * sizeof(*v));
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && s[j - 1] > s[j]; j--) {
			double t = s[j];
			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Side s's sample i (of the ring) is bw now; its median follows. */
static void aside_set(aside_t *a, aside_side_t s, uint32_t i, double bw)
{
	a->keep[s][i % ASIDE_KEEP] = bw;
	a->bw[s] = aside_median(a->keep[s], a->n[s] < ASIDE_KEEP ? a->n[s] : ASIDE_KEEP);
}

static void aside_keep(aside_t *a, aside_side_t s, double bw)
{
	a->n[s]++;
	aside_set(a, s, a->n[s] - 1, bw);
}

/* The largest gap between tries of the cache while the real path is
 * chosen: ASIDE_EVERY_MAX_CACHE, or more where a try costs more than
 * ASIDE_TRY_SHARE of the checkpoints between two (a try costs what the
 * cache takes over the real path: bw_home / bw_cache - 1 checkpoints of
 * the real path's time). */
static uint32_t aside_most_cache(const aside_t *a)
{
	if (!(a->bw[ASIDE_CACHE] > 0) || !(a->bw[ASIDE_HOME] > 0))
		return ASIDE_EVERY_MAX_CACHE;
	double cost = a->bw[ASIDE_HOME] / a->bw[ASIDE_CACHE] - 1.0;
	double want = cost / ASIDE_TRY_SHARE;
	if (want <= ASIDE_EVERY_MAX_CACHE)
		return ASIDE_EVERY_MAX_CACHE;
	return want >= ASIDE_EVERY_MAX_SLOW ? ASIDE_EVERY_MAX_SLOW : (uint32_t)want;
}

void aside_prior(aside_t *a, double bw_cache, double bw_home, uint32_t since, uint32_t every)
{
	if (!a->on)
		return;
	if (every >= ASIDE_EVERY_MIN && every <= ASIDE_EVERY_MAX_SLOW) {
		a->every = every;
		a->since = since < every ? since : every;
	}
	double bw[2] = { bw_cache, bw_home };
	for (int s = 0; s < 2; s++)
		for (int i = 0; bw[s] > 0 && i < ASIDE_WARM; i++)
			aside_keep(a, (aside_side_t)s, bw[s]);
	if (bw_cache > 0 && bw_home > 0)
		a->choice = aside_better(a);
}

void aside_prior_settled(aside_t *a, double bw_cache, double bw_home)
{
	if (!a->on || !(bw_cache > 0) || !(bw_home > 0))
		return;
	aside_prior(a, bw_cache, bw_home, 0, 0);
	a->every = a->choice == ASIDE_HOME ? aside_most_cache(a) : ASIDE_EVERY_MAX;
	a->since = 0;
}

aside_side_t aside_peek(const aside_t *a)
{
	if (!a->on)
		return ASIDE_CACHE;
	aside_side_t other = a->choice == ASIDE_CACHE ? ASIDE_HOME : ASIDE_CACHE;
	/* never measured: tried once the chosen side is known */
	if (a->n[other] == 0)
		return a->n[a->choice] >= ASIDE_WARM ? other : a->choice;
	return a->since >= a->every ? other : a->choice;
}

bool aside_defer(aside_t *a)
{
	if (!a->on || a->choice != ASIDE_HOME || aside_peek(a) != ASIDE_CACHE || a->deferred >= ASIDE_DEFER_MAX)
		return false;
	a->deferred++;
	a->picked[ASIDE_HOME]++;
	return true;
}

CKC_TAGGED_PATH aside_side_t aside_pick(aside_t *a)
{
	if (!a->on)
		return ASIDE_CACHE;
	aside_side_t s = aside_peek(a);
	a->deferred = 0;
	a->picked[s]++;
	if (s == a->choice) {
		a->since++;
	} else {
		a->since = 0;
		a->tries++;
	}
	return s;
}

uint32_t aside_open(const aside_t *a, aside_side_t s)
{
	return a->picked[s] - a->noted[s];
}

bool aside_try_next(const aside_t *a)
{
	return a->on && a->choice == ASIDE_HOME && aside_peek(a) == ASIDE_CACHE && !aside_open(a, ASIDE_CACHE);
}

bool aside_try_soon(const aside_t *a)
{
	return aside_try_next(a) || (a->on && a->choice == ASIDE_HOME && a->n[ASIDE_CACHE] == 0 &&
				     a->picked[ASIDE_HOME] >= ASIDE_WARM && !aside_open(a, ASIDE_CACHE));
}

/* One sample of speed on side s: the choice follows. It changes where
 * the medians favour the other side and so does that side's last sample,
 * taken by this process within the chosen side's last ASIDE_KEEP: a
 * median of the side not chosen may be as old as the record it came from
 * or the last try, and the chosen side's slowing down is often the
 * machine's (memory the host has to hand back first, a page-cache
 * write-back), which the other side meets too. Where that sample is
 * older, the next checkpoint tries the other side first. aside_follow
 * gives the choice after the medians changed: 1 where it changed, 0 where
 * it stands, -1 where the other side is to be tried first. */
CKC_TAGGED_PATH static int aside_follow(aside_t *a)
{
	if (!a->n[ASIDE_CACHE] || !a->n[ASIDE_HOME])
		return -1;
	aside_side_t was = a->choice, other = was == ASIDE_CACHE ? ASIDE_HOME : ASIDE_CACHE;
	if (aside_better(a) == other) {
		if (!a->measured[other] || a->seq - a->seq_at[other] > ASIDE_KEEP) {
			if (a->since < a->every)
				a->since = a->every;
			return -1;
		}
		double fresh[2] = { a->bw[ASIDE_CACHE], a->bw[ASIDE_HOME] };
		fresh[other] = a->last[other];
		if (aside_favoured(a, fresh) == other)
			a->choice = other;
	}
	if (a->choice == was)
		return 0;
	a->switches++;
	a->every = ASIDE_EVERY_MIN;
	a->since = 0;
	return 1;
}

/* Whether a sample of speed on side s, set against the other side's
 * median, favours s. */
static bool aside_sample_favours(const aside_t *a, aside_side_t s, double speed)
{
	double fresh[2] = { a->bw[ASIDE_CACHE], a->bw[ASIDE_HOME] };
	fresh[s] = speed;
	return aside_favoured(a, fresh) == s;
}

/* A try confirmed the choice: the next comes after twice as many. */
static void aside_space_tries(aside_t *a)
{
	uint32_t most = a->choice == ASIDE_HOME ? aside_most_cache(a) : ASIDE_EVERY_MAX;
	if (a->every < most)
		a->every = a->every * 2 < ASIDE_EVERY_MAX_SLOW ? a->every * 2 : ASIDE_EVERY_MAX_SLOW;
}

CKC_TAGGED_PATH static bool aside_learn(aside_t *a, aside_side_t s, double speed)
{
	/* this process's first sample of s stands for the record's: a record
	 * is rewritten at each exit from the medians it gave, so a side the
	 * processes no longer take keeps the speed it had when it was last
	 * taken (a try of the cache that met pages new to the process, 0.41
	 * GB/s, held RTM proxies on a real path of 0.4-0.6 GB/s through 144
	 * checkpoints; the cache wrote 10-16 GB/s) */
	if (!a->measured[s])
		for (uint32_t i = 0; i < a->n[s] && i < ASIDE_KEEP; i++)
			a->keep[s][i] = speed;
	aside_keep(a, s, speed);
	a->measured[s]++;
	a->last[s] = speed;
	a->seq_at[s] = ++a->seq;
	int f = aside_follow(a);
	if (f)
		return f > 0;
	if (s == a->choice)
		return false;
	/* a try faster than the choice allows, which the older samples
	 * (an earlier process's record among them) outvote: the next
	 * checkpoint tries again, until the median follows or a try confirms
	 * the choice */
	if (aside_sample_favours(a, s, speed))
		a->since = a->every;
	else
		aside_space_tries(a);
	return false;
}

/* A side's write ended: counted against its picks. */
static void aside_ended(aside_t *a, aside_side_t s)
{
	if (a->noted[s] != a->picked[s])
		a->noted[s]++;
}

static bool aside_note_held(aside_t *a, aside_side_t s, uint64_t bytes, uint64_t ns, bool hold, uint64_t min)
{
	if (!a->on)
		return false;
	aside_ended(a, s);
	if (bytes < min || ns == 0)
		return false;
	if (s == ASIDE_CACHE) {
		a->cache_bytes += bytes;
		a->cache_ns += ns;
	}
	if (hold && a->choice == ASIDE_CACHE)
		return false;
	return aside_learn(a, s, (double)bytes * 1e9 / (double)ns);
}

bool aside_note(aside_t *a, aside_side_t s, uint64_t bytes, uint64_t ns)
{
	return aside_note_held(a, s, bytes, ns, false, ASIDE_MIN_BYTES);
}

bool aside_note_rate(aside_t *a, aside_side_t s, uint64_t bytes, uint64_t ns)
{
	return aside_note_held(a, s, bytes, ns, false, 1);
}

bool aside_note_growing(aside_t *a, uint64_t bytes, uint64_t ns)
{
	return aside_note_held(a, ASIDE_CACHE, bytes, ns, true, ASIDE_MIN_BYTES);
}

bool aside_charge(aside_t *a, aside_side_t s, uint64_t bytes, uint64_t ns)
{
	if (!a->on || !a->measured[s] || bytes < ASIDE_MIN_BYTES || ns == 0)
		return false;
	uint32_t i = a->n[s] - 1;
	double was = a->keep[s][i % ASIDE_KEEP];
	if (was <= 0)
		return false;
	double speed = (double)bytes / ((double)bytes / was + (double)ns / 1e9);
	aside_set(a, s, i, speed);
	a->last[s] = speed;
	if (s == ASIDE_CACHE)
		a->cache_ns += ns;
	int f = aside_follow(a);
	if (f)
		return f > 0;
	/* a try whose sample, with the wait, no longer beats the choice:
	 * the next try waits its turn again (aside_learn) */
	if (s != a->choice && a->since >= a->every && !aside_sample_favours(a, s, speed)) {
		a->since = 0;
		aside_space_tries(a);
	}
	return false;
}

void aside_drained(aside_t *a, uint64_t drain_ns)
{
	if (!a->on || !a->cache_bytes || !a->cache_ns || !a->n[ASIDE_CACHE])
		return;
	double eff = (double)a->cache_bytes * 1e9 / (double)(a->cache_ns + drain_ns);
	/* a wait that left the cache, with it, as far ahead of the real path
	 * as the choice asks (the program's other work ran beside the
	 * flushes) does not mark it: a loop of atomic replaces of 1 MiB
	 * waited 5 ms at its exit for 20 ms in its writes, at 8 GB/s with
	 * the wait against 1.5 for the real path */
	bool still_ahead = a->bw[ASIDE_HOME] > 0 && aside_sample_favours(a, ASIDE_CACHE, eff);
	bool long_wait = (double)drain_ns >= 0.2 * (double)a->cache_ns && !still_ahead;
	if (long_wait)
		a->ends_behind = true;
	else if (a->measured[ASIDE_CACHE] >= ASIDE_CLEAR_SAMPLES && !a->capped)
		a->ends_behind = false;
	if (drain_ns && eff < a->bw[ASIDE_CACHE])
		a->bw[ASIDE_CACHE] = eff;
}

CKC_TAGGED_PATH bool aside_note_time(aside_t *a, aside_side_t s, uint64_t ns)
{
	if (!a->on)
		return false;
	aside_ended(a, s);
	return ns ? aside_learn(a, s, 1e9 / (double)ns) : false;
}
