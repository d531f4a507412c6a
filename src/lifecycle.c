/* Transition table of the per-tier life cycle (DESIGN.md "Life cycle").
 * Checkpoint path: INIT -> WRITE_IN_PROGRESS -> WRITE_COMPLETE -> FLUSHED;
 * prefetch path: INIT -> READ_IN_PROGRESS -> READ_COMPLETE; a read by the
 * program -> CONSUMED. Evicted or dropped copies return to INIT. */
#include "config.h"

#include "lifecycle.h"
#include "log.h"
#include "sys.h"

#define X LC_NSTATES

/* next[state][event]; X marks an illegal move. */
static const unsigned char lc_table[LC_NSTATES][LC_NEVENTS] = {
	/*                      WBEGIN               WEND               FLUSH       RBEGIN               REND              CONSUME      EVICT    DROP */
	[LC_INIT] =             { LC_WRITE_IN_PROGRESS, X,                 X,          LC_READ_IN_PROGRESS, X,                X,           X,       X },
	[LC_WRITE_IN_PROGRESS] ={ X,                    LC_WRITE_COMPLETE, X,          X,                   X,                X,           X,       LC_INIT },
	/* A copy read before its flush is consumed; whether it may then be
	 * evicted depends on the pending flush, which the p-score accounts for. */
	[LC_WRITE_COMPLETE] =   { X,                    X,                 LC_FLUSHED, X,                   X,                LC_CONSUMED, X,       LC_INIT },
	[LC_FLUSHED] =          { X,                    X,                 X,          X,                   X,                LC_CONSUMED, LC_INIT, LC_INIT },
	[LC_READ_IN_PROGRESS] = { X,                    X,                 X,          X,                   LC_READ_COMPLETE, X,           X,       LC_INIT },
	/* Prefetched and unread: only a read (or retirement) releases it, which
	 * is what keeps the prefetcher from thrashing. */
	[LC_READ_COMPLETE] =    { X,                    X,                 X,          X,                   X,                LC_CONSUMED, X,       LC_INIT },
	/* A checkpoint may be read several times; a flush that completes after
	 * the read leaves it consumed. */
	[LC_CONSUMED] =         { X,                    X,                 LC_CONSUMED, X,                  X,                LC_CONSUMED, LC_INIT, LC_INIT },
};

#undef X

static const char *const lc_state_names[LC_NSTATES] = {
	"INIT", "WRITE_IN_PROGRESS", "WRITE_COMPLETE", "FLUSHED",
	"READ_IN_PROGRESS", "READ_COMPLETE", "CONSUMED",
};

static const char *const lc_event_names[LC_NEVENTS] = {
	"write-begin", "write-end", "flush-done", "read-begin",
	"read-end", "consume", "evict", "drop",
};

lc_state_t lc_next(lc_state_t s, lc_event_t ev)
{
	if ((unsigned)s >= LC_NSTATES || (unsigned)ev >= LC_NEVENTS)
		return LC_NSTATES;
	return (lc_state_t)lc_table[s][ev];
}

bool lc_apply(lc_state_t *s, lc_event_t ev)
{
	lc_state_t n = lc_next(*s, ev);

	if (n == LC_NSTATES) {
		/* An illegal move is a bug in the engine, never the program's
		 * fault: say so at error level in debug builds. */
#ifdef NDEBUG
		ckc_debug("illegal life-cycle move %s on %s", lc_event_name(ev), lc_state_name(*s));
#else
		ckc_error("illegal life-cycle move %s on %s (engine bug)", lc_event_name(ev),
			  lc_state_name(*s));
#endif
		return false;
	}
	*s = n;
	return true;
}

bool lc_readable(lc_state_t s)
{
	return s == LC_WRITE_COMPLETE || s == LC_FLUSHED || s == LC_READ_COMPLETE ||
	       s == LC_CONSUMED;
}

const char *lc_state_name(lc_state_t s)
{
	return (unsigned)s < LC_NSTATES ? lc_state_names[s] : "?";
}

const char *lc_event_name(lc_event_t ev)
{
	return (unsigned)ev < LC_NEVENTS ? lc_event_names[ev] : "?";
}
