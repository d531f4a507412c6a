/* The library's private folder on the node, <dir>/ckptcache-<uid> (mode
 * 0700, owned by the user): the ssd tier files, the rescue files and each
 * running process's list of the temporary files it has in checkpoint
 * folders; what processes that died left there is swept at start-up. */
#ifndef CKC_STATE_H
#define CKC_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Makes (if needed) and checks the private folder under base: out receives
 * its path. A folder that is not a directory, is a symbolic link or belongs
 * to another user is refused (-ENOTDIR, -ELOOP, -EPERM): why (whylen bytes)
 * then says whose it is and what to do, naming var, the setting that chose
 * base. Returns 0 or -errno. */
int ckc_private_dir(const char *base, const char *var, char *out, size_t outlen, char *why,
		    size_t whylen);

/* The start time of process pid (clock ticks since boot, /proc/PID/stat),
 * or 0 when it does not run. A pid and its start time name one process. */
unsigned long long ckc_proc_start(pid_t pid);

/* The start time of this process (cached; right after fork too). */
unsigned long long ckc_self_start(void);

/* Starts this process's record in the private folder under base (var names
 * the setting, for messages) and sweeps the files of processes that no longer
 * run. Returns 0 or -errno (the reason is logged). */
int ckc_state_open(const char *base, const char *var);

/* Remembers base and var for ckc_state_open, which then runs with the
 * first file this process publishes (ckc_state_publishing) or temporary
 * file it records (ckc_state_tmp_add): a process that makes none has no
 * record, and leaves the sweep to the next one that does. */
void ckc_state_later(const char *base, const char *var);

/* A file is about to be published: the record deferred by ckc_state_later
 * starts now (its sweep included), if it has not. One that finds the
 * descriptor table full is not tried again: the publications need the
 * descriptors. */
void ckc_state_publishing(void);

/* The private folder of ckc_state_open, or NULL before it. */
const char *ckc_state_dir(void);

/* Removes this process's record (the process ends with nothing left in the
 * checkpoint folders); the folder too if nothing else is in it. */
void ckc_state_close(void);

/* Creates path, a file named by this process's pid and start time (its
 * record, when record, or its ssd tier's file), with flags: a file of that
 * name is one this process's image before an exec left, and is replaced.
 * The descriptor, or -1 (errno). */
int ckc_own_open(const char *path, int flags, bool record);

/* Records that a temporary file is about to appear at path (so that a later
 * process removes it if this one dies before it is renamed), or that it is
 * gone. No-ops before ckc_state_open or ckc_state_later. */
void ckc_state_tmp_add(const char *path);
void ckc_state_tmp_del(const char *path);

/* One stale file found by ckc_stale_sweep: its path, its allocated bytes
 * and whether it was removed. */
typedef void (*ckc_stale_fn)(const char *path, uint64_t bytes, bool removed, void *ctx);

/* Finds what processes that no longer run left behind, through the private
 * folder priv: their ssd tier files, their records and the temporary files
 * those list. Removes them when remove is set; fn (may be NULL) hears of
 * each. Returns the number found. */
long ckc_stale_sweep(const char *priv, bool remove, ckc_stale_fn fn, void *ctx);

/* Bytes allocated to ssd tier files of this user in the private folder
 * under base (the space they hold in base's file system). */
uint64_t ckc_ssd_files_bytes(const char *base);

#endif
