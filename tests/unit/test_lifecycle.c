/* Life cycle: every legal transition and every illegal one, against the
 * table written out independently below from DESIGN.md. */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"

struct move {
	lc_state_t from;
	lc_event_t ev;
	lc_state_t to;
};

static const struct move legal[] = {
	{ LC_INIT, LC_EV_WRITE_BEGIN, LC_WRITE_IN_PROGRESS },
	{ LC_INIT, LC_EV_READ_BEGIN, LC_READ_IN_PROGRESS },
	{ LC_WRITE_IN_PROGRESS, LC_EV_WRITE_END, LC_WRITE_COMPLETE },
	{ LC_WRITE_IN_PROGRESS, LC_EV_DROP, LC_INIT },
	{ LC_WRITE_COMPLETE, LC_EV_FLUSH_DONE, LC_FLUSHED },
	{ LC_WRITE_COMPLETE, LC_EV_CONSUME, LC_CONSUMED },
	{ LC_WRITE_COMPLETE, LC_EV_DROP, LC_INIT },
	{ LC_FLUSHED, LC_EV_CONSUME, LC_CONSUMED },
	{ LC_FLUSHED, LC_EV_EVICT, LC_INIT },
	{ LC_FLUSHED, LC_EV_DROP, LC_INIT },
	{ LC_READ_IN_PROGRESS, LC_EV_READ_END, LC_READ_COMPLETE },
	{ LC_READ_IN_PROGRESS, LC_EV_DROP, LC_INIT },
	{ LC_READ_COMPLETE, LC_EV_CONSUME, LC_CONSUMED },
	{ LC_READ_COMPLETE, LC_EV_DROP, LC_INIT },
	{ LC_CONSUMED, LC_EV_FLUSH_DONE, LC_CONSUMED },
	{ LC_CONSUMED, LC_EV_CONSUME, LC_CONSUMED },
	{ LC_CONSUMED, LC_EV_EVICT, LC_INIT },
	{ LC_CONSUMED, LC_EV_DROP, LC_INIT },
};

static const struct move *find_legal(lc_state_t s, lc_event_t ev)
{
	for (size_t i = 0; i < sizeof(legal) / sizeof(legal[0]); i++)
		if (legal[i].from == s && legal[i].ev == ev)
			return &legal[i];
	return NULL;
}

static int errors_logged;
static void count_sink(int level, const char *msg)
{
	(void)msg;
	if (level == CKC_LOG_ERROR)
		errors_logged++;
}

Test(lifecycle, every_legal_move)
{
	for (size_t i = 0; i < sizeof(legal) / sizeof(legal[0]); i++) {
		lc_state_t s = legal[i].from;
		cr_assert_eq(lc_next(s, legal[i].ev), legal[i].to, "%s --%s-->", lc_state_name(s),
			     lc_event_name(legal[i].ev));
		cr_assert(lc_apply(&s, legal[i].ev));
		cr_assert_eq(s, legal[i].to);
	}
}

Test(lifecycle, every_illegal_move_is_rejected_and_logged)
{
	int illegal = 0;
	ckc_log_sink = count_sink;
	ckc_log_threshold = CKC_LOG_DEBUG;
	for (int s = 0; s < LC_NSTATES; s++)
		for (int e = 0; e < LC_NEVENTS; e++) {
			if (find_legal((lc_state_t)s, (lc_event_t)e))
				continue;
			illegal++;
			lc_state_t st = (lc_state_t)s;
			errors_logged = 0;
			cr_assert_eq(lc_next(st, (lc_event_t)e), LC_NSTATES, "%s --%s--> accepted",
				     lc_state_name(st), lc_event_name((lc_event_t)e));
			cr_assert_not(lc_apply(&st, (lc_event_t)e));
			cr_assert_eq(st, (lc_state_t)s, "an illegal move changed the state");
			cr_assert_eq(errors_logged, 1, "an illegal move must be logged loudly");
		}
	ckc_log_sink = NULL;
	cr_assert_eq(illegal, LC_NSTATES * LC_NEVENTS - (int)(sizeof(legal) / sizeof(legal[0])));
}

Test(lifecycle, out_of_range_inputs)
{
	cr_assert_eq(lc_next(LC_NSTATES, LC_EV_DROP), LC_NSTATES);
	cr_assert_eq(lc_next(LC_INIT, LC_NEVENTS), LC_NSTATES);
	cr_assert_str_eq(lc_state_name(LC_NSTATES), "?");
	cr_assert_str_eq(lc_event_name(LC_NEVENTS), "?");
}

Test(lifecycle, readable_states)
{
	for (int s = 0; s < LC_NSTATES; s++) {
		bool want = s == LC_WRITE_COMPLETE || s == LC_FLUSHED || s == LC_READ_COMPLETE ||
			    s == LC_CONSUMED;
		cr_assert_eq(lc_readable((lc_state_t)s), want, "%s", lc_state_name((lc_state_t)s));
	}
}

Test(lifecycle, checkpoint_and_prefetch_paths)
{
	lc_state_t s = LC_INIT;
	const lc_event_t ckpt[] = { LC_EV_WRITE_BEGIN, LC_EV_WRITE_END, LC_EV_FLUSH_DONE,
				    LC_EV_EVICT, LC_EV_READ_BEGIN, LC_EV_READ_END, LC_EV_CONSUME,
				    LC_EV_EVICT };
	const lc_state_t want[] = { LC_WRITE_IN_PROGRESS, LC_WRITE_COMPLETE, LC_FLUSHED, LC_INIT,
				    LC_READ_IN_PROGRESS, LC_READ_COMPLETE, LC_CONSUMED, LC_INIT };
	for (size_t i = 0; i < sizeof(ckpt) / sizeof(ckpt[0]); i++) {
		cr_assert(lc_apply(&s, ckpt[i]));
		cr_assert_eq(s, want[i], "step %zu: %s", i, lc_state_name(s));
	}
	/* a prefetched, unread copy is never evicted */
	s = LC_READ_COMPLETE;
	cr_assert_not(lc_apply(&s, LC_EV_EVICT));
	cr_assert_eq(s, LC_READ_COMPLETE);
}
