/* The statistics summary of the ckptcache tool (stats.c). */
#ifndef CKC_STATS_TOOL_H
#define CKC_STATS_TOOL_H

/* Prints the summary of the statistics file at path. Returns 0, 1 when it
 * cannot be read, 3 when it is not a statistics file (not JSON, or no
 * tier in it). */
int ckc_stats_summary(const char *path);

#endif
