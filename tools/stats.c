/* `ckptcache stats FILE`: the summary of a statistics file that
 * CKPTCACHE_STATS wrote (src/stats.c writes it), read with the JSON reader
 * of json.c. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "stats_tool.h"

/* bytes as "512 bytes", "1.5 GiB" */
static const char *human(double b, char *buf, size_t len)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	int i = 0;
	if (b < 1024) {
		snprintf(buf, len, "%.0f bytes", b);
		return buf;
	}
	for (; b >= 1024 && i < 6; i++)
		b /= 1024;
	snprintf(buf, len, "%.1f %s", b, unit[i]);
	return buf;
}

static void ops_bytes(const char *label, const json_t *t, const char *ops, const char *bytes)
{
	char h[32];
	printf("  %-18s %.0f ops, %s\n", label, json_num(t, ops), human(json_num(t, bytes), h, sizeof(h)));
}

static void print_tier(const json_t *t, bool last, bool per_ckpt, double below)
{
	char h[32], h2[32];
	const json_t *name = json_get(t, "name");
	double cap = json_num(t, "capacity"), hits, misses;
	const char *what;

	printf("\ntier %s (capacity %s)\n", name && name->type == JSON_STR ? name->str : "",
	       cap ? human(cap, h, sizeof(h)) : "unbounded: the real paths");
	ops_bytes("writes", t, "put_ops", "put_bytes");
	if (per_ckpt) {
		printf("  %-18s %.0f checkpoints (%.0f read calls, %s)\n", "read back here",
		       json_num(t, "ckpt_reads"), json_num(t, "read_ops"), human(json_num(t, "read_bytes"), h, sizeof(h)));
		hits = json_num(t, "ckpt_reads");
		misses = below;
		what = "checkpoints";
	} else {
		ops_bytes("reads served", t, "read_ops", "read_bytes");
		hits = json_num(t, "hits");
		misses = json_num(t, "misses");
		what = "read calls";
	}
	printf("  %-18s %.0f / %.0f %s", "hits / misses", hits, misses, what);
	if (hits + misses)
		printf(" (%.1f%% hits)", 100 * hits / (hits + misses));
	printf("\n");
	if (!last) {
		double bw = json_num(t, "flush_bw");
		printf("  %-18s %.0f ops, %s, %.0f errors", "flushes", json_num(t, "flush_ops"),
		       human(json_num(t, "flush_bytes"), h, sizeof(h)), json_num(t, "flush_errors"));
		if (bw > 0 && json_num(t, "flush_ops") > 0)
			printf(", %.1f MB/s", bw / 1e6);
		printf("\n");
	}
	if (json_num(t, "populated_bytes") || json_num(t, "given_back_bytes"))
		printf("  %-18s %s populated at exit, %s given back while idle\n", "memory",
		       human(json_num(t, "populated_bytes"), h, sizeof(h)),
		       human(json_num(t, "given_back_bytes"), h2, sizeof(h2)));
	ops_bytes("prefetches", t, "prefetch_ops", "prefetch_bytes");
	printf("  %-18s %.0f (%s)\n", "evictions", json_num(t, "evictions"),
	       human(json_num(t, "evicted_bytes"), h, sizeof(h)));
	printf("  %-18s %.0f\n", "bypasses", json_num(t, "bypasses"));
	printf("  %-18s %.0f (%.3f s)\n", "waits for room", json_num(t, "waits"), json_num(t, "wait_s"));
}

static void print_objects(const json_t *o)
{
	static const char *const row[][2] = { { "written", "written" },
					      { "opened for read", "opened_for_read" },
					      { "  from the real file", "read_from_real_file" },
					      { "consumed", "consumed" },
					      { "retired", "retired" },
					      { "rescued", "rescued" } };
	printf("\nobjects\n");
	for (size_t i = 0; i < sizeof(row) / sizeof(row[0]); i++)
		printf("  %-18s %.0f\n", row[i][0], json_num(o, row[i][1]));
	if (json_get(o, "lost")) {
		double lost = json_num(o, "lost");
		printf("  %-18s %.0f%s\n", "lost", lost,
		       lost ? "   (checkpoints that never reached their real path)" : "");
	}
}

static void print_gpu(const json_t *g)
{
	char h[32], h2[32];
	const json_t *devs = json_get(g, "devices");
	if (devs && devs->type == JSON_ARR && devs->n > 1) {
		printf("\ngpu tier (devices ");
		for (size_t i = 0; i < devs->n; i++)
			printf("%s%.0f", i ? "," : "", devs->items[i].num);
		printf(")\n");
	} else {
		printf("\ngpu tier (device %.0f)\n", json_num(g, "device"));
	}
	printf("  %-18s %s reserved, %s mapped at most\n", "arena", human(json_num(g, "arena_bytes"), h, sizeof(h)),
	       human(json_num(g, "mapped_bytes"), h2, sizeof(h2)));
	printf("  %-18s %.0f (%s)\n", "given back", json_num(g, "releases"),
	       human(json_num(g, "released_bytes"), h, sizeof(h)));
	printf("  %-18s %s\n", "host tier pinned", json_num(g, "host_pinned") ? "yes" : "no");
}

static void print_peer(const json_t *p)
{
	char h[32], h2[32], h3[32], h4[32];
	const json_t *mode = json_get(p, "mode"), *plan = json_get(p, "plan"), *b = json_get(p, "blocking_s");
	const json_t *lent = json_get(p, "lent"), *bor = json_get(p, "borrowed");
	printf("\npeer GPUs (%s; %s)\n", mode && mode->type == JSON_STR ? mode->str : "?",
	       json_num(p, "lending") ? "lending on" : "computed only, nothing was lent");
	printf("  %-18s entry %.0f; %.0f rank(s) at exit, %.0f at most%s%s\n", "board",
	       json_num(p, "entry"), json_num(p, "ranks"), json_num(p, "ranks_max"),
	       json_num(p, "stale_segment") ? "; a stale segment made anew" : "",
	       json_num(p, "entry_reclaimed") ? "; the entry of a dead process taken over" : "");
	printf("  %-18s %s; the schedule: %s to peers, %s to the host\n", "remainder",
	       human(json_num(p, "remainder_bytes"), h, sizeof(h)),
	       human(plan ? json_num(plan, "to_peers_bytes") : 0, h2, sizeof(h2)),
	       human(plan ? json_num(plan, "to_host_bytes") : 0, h3, sizeof(h3)));
	if (b)
		printf("  %-18s local %.6f s, greedy %.6f s, maxflow %.6f s\n", "group blocking",
		       json_num(b, "local"), json_num(b, "greedy"), json_num(b, "maxflow"));
	if (lent)
		printf("  %-18s %s, %s at most at once; %s came back (%s taken back for the program)\n", "lent to peers",
		       human(json_num(lent, "bytes"), h, sizeof(h)), human(json_num(lent, "most_at_once_bytes"), h2, sizeof(h2)),
		       human(json_num(lent, "returned_bytes"), h3, sizeof(h3)),
		       human(json_num(lent, "taken_back_bytes"), h4, sizeof(h4)));
	if (bor)
		printf("  %-18s %s in %.0f round(s); %s of captures placed there; %s given back; %.0f lender(s) lost\n",
		       "borrowed", human(json_num(bor, "bytes"), h, sizeof(h)), json_num(bor, "rounds"),
		       human(json_num(bor, "placed_bytes"), h2, sizeof(h2)),
		       human(json_num(bor, "given_back_bytes"), h3, sizeof(h3)), json_num(bor, "lenders_lost"));
}

static void print_aside(const json_t *a)
{
	const json_t *choice = json_get(a, "choice");
	bool home = choice && choice->type == JSON_STR && strcmp(choice->str, "real_path") == 0;
	printf("checkpoints written straight to their real paths: %.0f (%.0f tries, %.0f changes of mind);"
	       " the program wrote %.2f GB/s into the cache, %.2f GB/s to the real paths; at exit: %s\n",
	       json_num(a, "written_straight"), json_num(a, "tries"), json_num(a, "switches"),
	       json_num(a, "cache_bw") / 1e9, json_num(a, "real_path_bw") / 1e9,
	       home ? "the real paths" : "the cache");
}

static void print_capture(const json_t *c)
{
	char h[32];
	printf("\ndevice capture\n");
	printf("  %-18s %.0f (%s, %.3f s), %.0f completing in stream order\n", "captured copies",
	       json_num(c, "captured"), human(json_num(c, "captured_bytes"), h, sizeof(h)), json_num(c, "capture_s"),
	       json_num(c, "deferred"));
	printf("  %-18s %.0f attached, %.0f copied (%.3f s)\n", "writes of them", json_num(c, "attached"),
	       json_num(c, "copied_in"), json_num(c, "write_s"));
	printf("  %-18s %.0f reads (%.3f s), %.0f device copies (%.3f s)\n", "restores", json_num(c, "read_refs"),
	       json_num(c, "read_s"), json_num(c, "restored_d2d"), json_num(c, "restore_s"));
	printf("  %-18s %.0f filled (%.3f s), %.0f dropped\n", "owed ranges", json_num(c, "filled"),
	       json_num(c, "fill_s"), json_num(c, "dropped"));
	printf("  %-18s %.0f\n", "made as asked", json_num(c, "passed"));
}

/* The restore queue's distance at each read, as a bar chart. */
static void print_distance(const json_t *d)
{
	double max = 0;
	for (size_t i = 0; i < d->n; i++)
		if (d->items[i].num > max)
			max = d->items[i].num;
	printf("\nrestore-queue distance at each read (unhinted: not in the queue)\n");
	for (size_t i = 0; i < d->n; i++) {
		double c = d->items[i].type == JSON_NUM ? d->items[i].num : 0;
		int w = max ? (int)(40 * c / max + 0.5) : 0;
		char bar[48];
		if (c && !w)
			w = 1;
		memset(bar, '#', (size_t)w);
		bar[w] = '\0';
		printf("  %-9s %10.0f%s%s\n", d->keys[i], c, w ? "  " : "", bar);
	}
}

/* Reads all of path into a NUL-terminated buffer; NULL with errno. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - 1 - n, f);
		if (n < cap - 1)
			break;
		char *b = realloc(buf, cap * 2);
		if (!b) {
			free(buf);
			buf = NULL;
			errno = ENOMEM;
			break;
		}
		buf = b;
		cap *= 2;
	}
	int bad = ferror(f);
	fclose(f);
	if (buf && bad) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	if (buf)
		buf[n] = '\0';
	return buf;
}

int ckc_stats_summary(const char *path)
{
	char *text = slurp(path), err[128];
	json_t root;

	if (!text) {
		fprintf(stderr, "ckptcache: stats: cannot read '%s' (%s)\n", path, strerror(errno));
		return 1;
	}
	int rc = json_parse(text, &root, err, sizeof(err));
	free(text);
	if (rc) {
		fprintf(stderr, "ckptcache: stats: '%s' is not JSON (%s)\n", path, err);
		return 3;
	}
	const json_t *tiers = json_get(&root, "tiers");
	if (!tiers || tiers->type != JSON_ARR || (!tiers->n && !json_get(&root, "step_aside"))) {
		json_free(&root);
		return 3;
	}
	printf("ckptcache statistics: %s\n", path);
	/* a process whose checkpoints all went to their real paths before a
	 * cache started has no tier */
	if (!tiers->n)
		printf("\nno cache was started: the checkpoints went straight to their real paths\n");
	/* checkpoints read back, by the tier that served each (files of an
	 * older library count read calls only) */
	bool per_ckpt = false;
	for (size_t i = 0; i < tiers->n; i++)
		per_ckpt |= json_get(&tiers->items[i], "ckpt_reads") != NULL;
	double below = 0;
	for (size_t i = 0; i < tiers->n; i++)
		below += json_num(&tiers->items[i], "ckpt_reads");
	for (size_t i = 0; i < tiers->n; i++) {
		below -= json_num(&tiers->items[i], "ckpt_reads");
		print_tier(&tiers->items[i], i + 1 == tiers->n, per_ckpt, below);
	}
	const json_t *o = json_get(&root, "objects"), *g = json_get(&root, "gpu"),
		     *c = json_get(&root, "capture"), *d = json_get(&root, "prefetch_distance_at_read");
	if (o && o->type == JSON_OBJ)
		print_objects(o);
	if (g && g->type == JSON_OBJ)
		print_gpu(g);
	if (c && c->type == JSON_OBJ)
		print_capture(c);
	const json_t *p = json_get(&root, "peer");
	if (p && p->type == JSON_OBJ)
		print_peer(p);
	if (json_get(&root, "reads_waited_for_prefetch") || json_get(&root, "read_wait_s"))
		printf("\nreads that waited for a prefetch: %.0f (%.3f s in all)\n",
		       json_num(&root, "reads_waited_for_prefetch"), json_num(&root, "read_wait_s"));
	const json_t *l = json_get(&root, "lanes");
	if (l && l->type == JSON_OBJ && json_num(l, "copies") > 0) {
		char h[32];
		printf("reads copied in lanes: %.0f (%s), by the reader and %.0f helper threads\n",
		       json_num(l, "copies"), human(json_num(l, "bytes"), h, sizeof(h)), json_num(l, "helpers"));
	}
	if (json_get(&root, "drain_s"))
		printf("at exit, waiting for flushes to finish: %.3f s\n", json_num(&root, "drain_s"));
	const json_t *a = json_get(&root, "step_aside");
	if (a && a->type == JSON_OBJ && json_num(a, "on"))
		print_aside(a);
	if (d && d->type == JSON_OBJ && d->n)
		print_distance(d);
	json_free(&root);
	return 0;
}
