/* Distance buckets and the JSON summary written to CKPTCACHE_STATS. */
#include "config.h"

#include "stats.h"

#include <errno.h>
#include "sys.h"

/* (names, not pointers to them: the loader relocates pointers at every
 * start, and the pages it writes before .data are to fit in one) */
static const char dist_label[CKC_DIST_BUCKETS][9] = {
	"0", "1", "2", "3", "4", "5", "6", "7", "8-15", "16-31", "32-63", "64+", "unhinted",
};


int ckc_stats_dist_bucket(uint64_t dist, int far)
{
	if (far)
		return CKC_DIST_BUCKETS - 1;
	if (dist < 8)
		return (int)dist;
	if (dist < 16)
		return 8;
	if (dist < 32)
		return 9;
	if (dist < 64)
		return 10;
	return 11;
}

int ckc_stats_write_json(const ckc_stats_t *s, FILE *f)
{
	fprintf(f, "{\n  \"tiers\": [\n");
	for (int i = 0; i < s->ntier; i++) {
		const ckc_tier_stats_t *t = &s->tier[i];
		fprintf(f,
			"    {\"name\": \"%s\", \"capacity\": %llu,"
			" \"put_ops\": %llu, \"put_bytes\": %llu,"
			" \"read_ops\": %llu, \"read_bytes\": %llu, \"ckpt_reads\": %llu,"
			" \"hits\": %llu, \"misses\": %llu,"
			" \"flush_ops\": %llu, \"flush_bytes\": %llu, \"flush_errors\": %llu,"
			" \"flush_bw\": %.0f,"
			" \"prefetch_ops\": %llu, \"prefetch_bytes\": %llu, \"prefetch_cached\": %llu,"
			" \"evictions\": %llu, \"evicted_bytes\": %llu,"
			" \"bypasses\": %llu, \"waits\": %llu, \"wait_s\": %.6f,"
			" \"populated_bytes\": %llu, \"given_back_bytes\": %llu,"
			" \"peak_used_bytes\": %llu, \"peak_populated_bytes\": %llu}%s\n",
			s->tier_name[i], (unsigned long long)t->capacity,
			(unsigned long long)t->put_ops, (unsigned long long)t->put_bytes,
			(unsigned long long)t->read_ops, (unsigned long long)t->read_bytes,
			(unsigned long long)t->ckpt_reads,
			(unsigned long long)t->hits, (unsigned long long)t->misses,
			(unsigned long long)t->flush_ops, (unsigned long long)t->flush_bytes,
			(unsigned long long)t->flush_errors, t->flush_bw,
			(unsigned long long)t->prefetch_ops, (unsigned long long)t->prefetch_bytes,
			(unsigned long long)t->prefetch_cached,
			(unsigned long long)t->evictions, (unsigned long long)t->evicted_bytes,
			(unsigned long long)t->bypasses, (unsigned long long)t->waits, t->wait_s,
			(unsigned long long)t->populated_bytes, (unsigned long long)t->given_back_bytes,
			(unsigned long long)t->peak_used_bytes, (unsigned long long)t->peak_populated_bytes,
			i + 1 < s->ntier ? "," : "");
	}
	fprintf(f, "  ],\n");
	fprintf(f,
		"  \"objects\": {\"written\": %llu, \"opened_for_read\": %llu, \"read_from_real_file\": %llu,"
		" \"consumed\": %llu,"
		" \"retired\": %llu, \"rescued\": %llu, \"lost\": %llu},\n",
		(unsigned long long)s->objects_written, (unsigned long long)s->objects_opened_read,
		(unsigned long long)s->objects_passed_read, (unsigned long long)s->objects_consumed, (unsigned long long)s->objects_retired,
		(unsigned long long)s->rescued, (unsigned long long)s->lost);
	fprintf(f, "  \"reads_waited_for_prefetch\": %llu,\n  \"read_wait_s\": %.6f,\n",
		(unsigned long long)s->reads_waited, s->read_wait_s);
	fprintf(f, "  \"drain_s\": %.6f,\n", s->drain_s);
	fprintf(f,
		"  \"step_aside\": {\"on\": %s, \"choice\": \"%s\", \"written_straight\": %llu,"
		" \"moved_to_cache\": %llu,"
		" \"tries\": %u, \"switches\": %u, \"cache_bw\": %.0f, \"real_path_bw\": %.0f,"
		" \"small\": {\"choice\": \"%s\", \"cache_samples\": %u, \"real_path_samples\": %u,"
		" \"cache_us\": %.1f, \"real_path_us\": %.1f}},\n",
		s->aside_on ? "true" : "false", s->aside_home ? "real_path" : "cache",
		(unsigned long long)s->aside_objects, (unsigned long long)s->aside_moved, s->aside_tries, s->aside_switches, s->aside_bw_cache,
		s->aside_bw_home, s->small_home ? "real_path" : "cache", s->small_samples[0], s->small_samples[1],
		s->small_us[0], s->small_us[1]);
	fprintf(f, "  \"copy\": \"%s\",\n", s->copy_movsb ? "movsb" : "libc");
	fprintf(f, "  \"lanes\": {\"helpers\": %d, \"copies\": %llu, \"bytes\": %llu},\n", s->lane_helpers,
		(unsigned long long)s->lane_copies, (unsigned long long)s->lane_bytes);
	fprintf(f,
		"  \"kernel_touch\": {\"mode\": \"%s\", \"state\": \"%s\", \"buffers\": %llu, \"pages\": %llu,"
		" \"dropped\": %llu, \"seconds\": %.6f, \"probe_ns_per_page\": [",
		s->ktouch.mode ? s->ktouch.mode : "auto", s->ktouch.state ? s->ktouch.state : "idle",
		(unsigned long long)s->ktouch.buffers, (unsigned long long)s->ktouch.pages,
		(unsigned long long)s->ktouch.dropped, s->ktouch.seconds);
	for (int i = 0; i < s->ktouch.probes; i++)
		fprintf(f, "%s%u", i ? ", " : "", s->ktouch.probe_ns[i]);
	fprintf(f, "]},\n");
	fprintf(f, "  \"prefetch_distance_at_read\": {");
	for (int i = 0; i < CKC_DIST_BUCKETS; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", dist_label[i],
			(unsigned long long)s->dist_hist[i]);
	fprintf(f, "}");
	if (s->cuda_seen) {
		fprintf(f, ",\n  \"cuda\": {\"calls\": {");
		for (int i = 0; i < s->cuda_nkinds; i++)
			fprintf(f, "%s\"%s\": %llu", i ? ", " : "", s->cuda_kind_name[i],
				(unsigned long long)s->cuda_calls[i]);
		fprintf(f, "}, \"hooked_through\": {");
		for (int i = 0; i < s->cuda_npaths; i++)
			fprintf(f, "%s\"%s\": %llu", i ? ", " : "", s->cuda_path_name[i],
				(unsigned long long)s->cuda_hooked[i]);
		fprintf(f, "}}");
	}
	if (s->gpu_present) {
		fprintf(f, ",\n  \"gpu\": {\"device\": %d, \"devices\": [", s->gpu_device);
		for (int i = 0; i < s->gpu_ndev; i++)
			fprintf(f, "%s%d", i ? ", " : "", s->gpu_devs[i]);
		fprintf(f,
			"], \"arena_bytes\": %llu, \"mapped_bytes\": %llu,"
			" \"released_bytes\": %llu, \"releases\": %llu, \"host_pinned\": %s}",
			(unsigned long long)s->gpu_arena_bytes,
			(unsigned long long)s->gpu_mapped_bytes, (unsigned long long)s->gpu_released_bytes,
			(unsigned long long)s->gpu_releases, s->host_pinned ? "true" : "false");
	}
	if (s->peer_mode)
		fprintf(f,
			",\n  \"peer\": {\"mode\": \"%s\", \"lending\": %s, \"entry\": %d,"
			" \"ranks\": %d, \"ranks_max\": %d, \"stale_segment\": %s,"
			" \"entry_reclaimed\": %s, \"segment_removed\": %s, \"remainder_bytes\": %llu,"
			" \"plan\": {\"to_peers_bytes\": %llu, \"to_host_bytes\": %llu},"
			" \"blocking_s\": {\"local\": %.6f, \"greedy\": %.6f, \"maxflow\": %.6f},"
			" \"lent\": {\"bytes\": %llu, \"most_at_once_bytes\": %llu, \"returned_bytes\": %llu,"
			" \"taken_back_bytes\": %llu, \"refused\": %llu},"
			" \"borrowed\": {\"bytes\": %llu, \"rounds\": %llu, \"placed_bytes\": %llu,"
			" \"given_back_bytes\": %llu, \"lenders_lost\": %llu}}",
			s->peer_mode, s->peer_lending ? "true" : "false", s->peer_slot, s->peer_ranks,
			s->peer_ranks_max, s->peer_was_stale ? "true" : "false",
			s->peer_reclaimed ? "true" : "false", s->peer_removed ? "true" : "false",
			(unsigned long long)s->peer_rem_bytes, (unsigned long long)s->peer_to_peers_bytes,
			(unsigned long long)s->peer_to_host_bytes, s->peer_local_s, s->peer_greedy_s,
			s->peer_maxflow_s, (unsigned long long)s->peer_lend.lent_bytes,
			(unsigned long long)s->peer_lend.lent_now_max, (unsigned long long)s->peer_lend.returned_bytes,
			(unsigned long long)s->peer_lend.taken_back_bytes, (unsigned long long)s->peer_lend.lend_refused,
			(unsigned long long)s->peer_lend.borrowed_bytes, (unsigned long long)s->peer_lend.borrow_rounds,
			(unsigned long long)s->peer_placed_bytes, (unsigned long long)s->peer_lend.gave_back_bytes,
			(unsigned long long)s->peer_lend.lenders_lost);
	if (s->capture_seen)
		fprintf(f,
			",\n  \"capture\": {\"captured\": %llu, \"captured_bytes\": %llu,"
			" \"attached\": %llu, \"copied_in\": %llu, \"read_refs\": %llu,"
			" \"restored_d2d\": %llu, \"filled\": %llu, \"dropped\": %llu, \"passed\": %llu,"
			" \"deferred\": %llu, \"capture_s\": %.6f, \"restore_s\": %.6f, \"write_s\": %.6f,"
			" \"read_s\": %.6f, \"fill_s\": %.6f, \"read_engine_s\": %.6f, \"read_owe_s\": %.6f,"
			" \"restore_wait_s\": %.6f, \"pageable\": %s, \"huge_pinned\": %llu}",
			(unsigned long long)s->cap_captured, (unsigned long long)s->cap_captured_bytes,
			(unsigned long long)s->cap_attached, (unsigned long long)s->cap_copied_in,
			(unsigned long long)s->cap_read_refs, (unsigned long long)s->cap_restored_d2d,
			(unsigned long long)s->cap_filled, (unsigned long long)s->cap_dropped,
			(unsigned long long)s->cap_passed, (unsigned long long)s->cap_deferred,
			s->cap_capture_s, s->cap_restore_s,
			s->cap_write_s, s->cap_read_s, s->cap_fill_s, s->cap_read_engine_s, s->cap_read_owe_s,
			s->cap_restore_wait_s, s->cap_pageable ? "true" : "false",
			(unsigned long long)s->cap_huge_pinned);
	fprintf(f, "\n}\n");
	if (fflush(f) == EOF || ferror(f))
		return -(errno ? errno : EIO);
	return 0;
}
