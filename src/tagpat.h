/* The tagged-path patterns (CKPTCACHE_PATHS) and their matcher: one set
 * per process, loaded once. */
#ifndef CKC_TAGPAT_H
#define CKC_TAGPAT_H

#include <stdbool.h>

/* Loads the patterns of a colon-separated list ("%r" is the rank), in
 * place of those loaded before. Returns how many are usable; a pattern
 * that is not a usable path is reported and left out. */
int ckc_tagpat_load(const char *paths, long rank);
int ckc_tagpat_count(void);
void ckc_tagpat_free(void);

/* Whether canonical absolute path canon is tagged. */
bool ckc_tag_match(const char *canon);

/* Whether some pattern names the rank ("%r"), and whether canonical path
 * canon matches such a pattern with any rank in its place (a file of
 * another rank of the job, which this process does not cache but whose
 * holder it asks to publish before it opens or stats it). */
extern int ckc_tag_nothers;
static inline bool ckc_tag_other_ranks(void)
{
	return ckc_tag_nothers > 0; /* (one load: every untagged open asks) */
}
bool ckc_tag_match_other_rank(const char *canon);

/* Absolute path whose folder is, byte for byte, that of the last canonical
 * path this thread matched (a loop over one folder's files), and whose
 * last name is a file's (not "." or "..", not too long): path is
 * canonical, and 1 or 0 says whether it is tagged; -1: not told so. */
int ckc_tag_match_known_folder(const char *path);

/* Whether some pattern's last component matches the last component of
 * path (true when that cannot be told from the name). */
bool ckc_tag_name_may_match(const char *path);

/* Whether no path below canonical directory dir can be tagged. */
bool ckc_tag_dir_holds_none(const char *dir);
/* Whether no name directly in canonical directory dir can be tagged (what
 * a listing of dir alone shows). */
bool ckc_tag_dir_names_none(const char *dir);
/* Every name directly in canonical directory dir is tagged: dir is, or is
 * below, the folder of a pattern whose last component is "**" and whose
 * folder has no wildcard. */
bool ckc_tag_dir_holds_all(const char *dir);

/* fnmatch(pat, s, pathname ? FNM_PATHNAME : 0) == 0, with literal bytes
 * and '*' matched byte by byte. */
bool ckc_glob_match(const char *pat, const char *s, bool pathname);

#endif
