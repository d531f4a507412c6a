/* Restore hints given through the API, and the fork hooks. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "peer.h"
#include "log.h"
#include "memlimit.h"
#include "path.h"
#include "state.h"
#include "trace.h"
#include "sys.h"

/* ---- hints --------------------------------------------------------- */

int ckc_hint_enqueue(const char *path)
{
	char key[PATH_MAX];
	int rc = eng_canon(path, key);
	if (rc)
		return rc;
	ckc_mutex_lock(&ckc_eng.lock);
	if (ckc_eng.active) {
		rc = hq_push_back(ckc_eng.hq, key);
		ckc_prefetch_kick();
		eng_signal(EC_ROOM);
	} else {
		rc = -ENODEV;
	}
	eng_unlock();
	return rc;
}

int ckc_prefetch_start(void)
{
	ckc_mutex_lock(&ckc_eng.lock);
	if (ckc_eng.cfg.prefetch != CKC_PREFETCH_OFF)
		ckc_eng.prefetch_started = true;
	ckc_prefetch_kick();
	eng_signal(EC_ROOM);
	eng_unlock();
	return 0;
}

int ckc_wait_flushed(void)
{
	ckc_mutex_lock(&ckc_eng.lock);
	for (;;) {
		bool busy = false;
		for (int l = 0; l + 1 < ckc_eng.ntier; l++)
			busy |= ckc_edge_busy(&ckc_eng.edge[l]);
		if (!busy || !ckc_eng.active)
			break;
		if (!ckc_flush_unthreaded())
			eng_wait(EC_FLUSHED);
	}
	int rc = ckc_eng.st.rescued ? -EIO : 0;
	eng_unlock();
	return rc;
}

/* ---- fork ---------------------------------------------------------- */

/* Every registered lock of the library, the engine's among them, in rank
 * order (lockrank.h). */
void ckc_atfork_prepare(void)
{
	ckc_locks_prefork();
}

void ckc_atfork_parent(void)
{
	ckc_locks_postfork_parent();
}

void ckc_atfork_child(void)
{
	/* Only the forking thread exists here: the flushers and the
	 * prefetcher are gone, so the child must never wait for them. Its
	 * copy of the cache is simply abandoned (the parent still owns it and
	 * the ssd file). */
	ckc_locks_postfork_child();
	for (int c = 0; c < EC_N; c++)
		pthread_cond_init(&ckc_eng.cv[c], NULL);
	ckc_eng.active = false;
	ckc_eng.trace_fd = -1;
	ckc_trace_atfork_child();
	ckc_peer_atfork_child();
}

void ckc_stats_get(ckc_stats_t *s)
{
	ckc_mutex_lock(&ckc_eng.lock);
	eng_stats_collect(s);
	eng_unlock();
}
