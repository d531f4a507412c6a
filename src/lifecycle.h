/* The life cycle of one object in one tier: states, events and the single
 * table-driven transition function; nothing else writes a state. */
#ifndef CKC_LIFECYCLE_H
#define CKC_LIFECYCLE_H

#include <stdbool.h>

typedef enum lc_state {
	LC_INIT = 0,           /* no bytes of the object in this tier */
	LC_WRITE_IN_PROGRESS,  /* the program (or a flush from above) is writing */
	LC_WRITE_COMPLETE,     /* complete; not yet in the tier below */
	LC_FLUSHED,            /* complete and safe below: evictable */
	LC_READ_IN_PROGRESS,   /* being promoted into this tier by the prefetcher */
	LC_READ_COMPLETE,      /* prefetched, not yet read: never evicted */
	LC_CONSUMED,           /* read back by the program: evictable */
	LC_NSTATES
} lc_state_t;

typedef enum lc_event {
	LC_EV_WRITE_BEGIN = 0, /* a write of this object into the tier starts */
	LC_EV_WRITE_END,       /* the object is complete in the tier */
	LC_EV_FLUSH_DONE,      /* the tier below holds the bytes */
	LC_EV_READ_BEGIN,      /* a prefetch into the tier starts */
	LC_EV_READ_END,        /* the prefetch is complete */
	LC_EV_CONSUME,         /* the program read the whole object */
	LC_EV_EVICT,           /* the tier's copy is evicted */
	LC_EV_DROP,            /* the object is retired, or a transfer failed */
	LC_NEVENTS
} lc_event_t;

/* Returns the state that event ev leads to from s, or LC_NSTATES when the
 * move is illegal. */
lc_state_t lc_next(lc_state_t s, lc_event_t ev);

/* Applies ev to *s. Returns true on a legal move; on an illegal one leaves *s
 * unchanged, logs it (loudly in debug builds) and returns false. */
bool lc_apply(lc_state_t *s, lc_event_t ev);

/* Whether a tier copy in state s holds readable bytes. */
bool lc_readable(lc_state_t s);

const char *lc_state_name(lc_state_t s);
const char *lc_event_name(lc_event_t ev);

#endif
