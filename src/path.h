/* Canonical absolute paths: the keys of checkpoint objects and hint entries. */
#ifndef CKC_PATH_H
#define CKC_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes the canonical absolute form of path into out: relative paths are
 * resolved against base (an absolute directory; NULL means the current
 * working directory), then ".", ".." and repeated slashes are removed
 * lexically (symbolic links are not followed, so the file need not exist).
 * Returns 0, -ENAMETOOLONG when out is too small, -EINVAL for an empty path,
 * or -errno from getcwd. */
int ckc_path_canon(const char *path, const char *base, char *out, size_t outlen);

/* Whether path is canonical as it is: absolute, with no "." or ".."
 * component, no repeated or trailing '/', no name longer than NAME_MAX
 * (ckc_path_canon would return it unchanged). */
bool ckc_path_plain(const char *path);

/* As ckc_path_canon, but ".." is taken as the kernel takes it: from the
 * directory the path so far leads to, so a symbolic link before ".." is
 * followed first (lnk/../x is x beside lnk's target, not beside lnk). Other
 * symbolic links are kept as spelt, and a path without ".." costs no system
 * call. Returns 0, or the -errno with which the kernel would refuse the path
 * (-ENOENT, -ENOTDIR, -ELOOP, -EACCES, ...), or ckc_path_canon's errors. */
int ckc_path_resolve(const char *path, const char *base, char *out, size_t outlen);

/* ckc_path_resolve of a path relative to canon_base, a folder's path as
 * the kernel gives it (readlink of /proc/self/fd/N, getcwd): canonical
 * already, so taken as it is. */
int ckc_path_resolve_in(const char *path, const char *canon_base, char *out, size_t outlen);
/* One name (no slash, not "." or "..", namelen bytes) joined to the
 * canonical folder path that out's first dirlen bytes hold: 0, or
 * -ENAMETOOLONG (a name over NAME_MAX, or more than outlen bytes in all). */
int ckc_path_join_name(char *out, size_t dirlen, const char *name, size_t namelen, size_t outlen);

/* The key of a path that need not exist (a hint entry, the API):
 * ckc_path_resolve, else ckc_path_canon when the kernel's walk would fail. */
int ckc_path_key(const char *path, const char *base, char *out, size_t outlen);

/* Writes the directory part of the canonical path canon into out ("/" for a
 * file in the root). Returns 0 or -ENAMETOOLONG. */
int ckc_path_dirname(const char *canon, char *out, size_t outlen);

/* v in decimal into out (at least 20 bytes; no NUL): its length. A name's
 * number (a rank, a user id) without the C library's printf, whose code a
 * short program or a forked child would otherwise fault in for it. */
size_t ckc_path_decimal(char *out, unsigned long long v);

/* A 64-bit hash of a path, eight bytes a step: the keys of the node's
 * tables (which processes of other builds read: its values are part of
 * their layout, and a change to them comes with new table names), the
 * process's own tables (the object map, the marks of descriptors), a
 * stand-in inode number. */
uint64_t ckc_path_hash(const char *path);

#endif
