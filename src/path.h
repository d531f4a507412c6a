/* Canonical absolute paths: the keys of checkpoint objects and hint entries. */
#ifndef CKC_PATH_H
#define CKC_PATH_H

#include <stddef.h>

/* Writes the canonical absolute form of path into out: relative paths are
 * resolved against base (an absolute directory; NULL means the current
 * working directory), then ".", ".." and repeated slashes are removed
 * lexically (symbolic links are not followed, so the file need not exist).
 * Returns 0, -ENAMETOOLONG when out is too small, -EINVAL for an empty path,
 * or -errno from getcwd. */
int ckc_path_canon(const char *path, const char *base, char *out, size_t outlen);

/* Writes the directory part of the canonical path canon into out ("/" for a
 * file in the root). Returns 0 or -ENAMETOOLONG. */
int ckc_path_dirname(const char *canon, char *out, size_t outlen);

#endif
