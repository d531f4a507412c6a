/* The memory limit the host tier's size is taken from. */
#ifndef CKC_MEMLIMIT_H
#define CKC_MEMLIMIT_H

#include <stdbool.h>
#include <stdint.h>

/* The smallest memory limit of the control groups in cgroup (a file in the
 * format of /proc/self/cgroup), found through mountinfo (the format of
 * /proc/self/mountinfo), each mount point prefixed with prefix ("" for the
 * real system): cgroup v2 memory.max and v1 memory.limit_in_bytes of the
 * group and of each ancestor below its hierarchy's root. Returns bytes, or
 * 0 when no limit applies. */
uint64_t ckc_memlimit_cgroup(const char *cgroup, const char *mountinfo, const char *prefix);

/* The smaller of phys (physical memory; 0: unknown) and this process's
 * control-group limit. */
uint64_t ckc_memlimit(uint64_t phys);

/* This process's control-group limit when it is below physical memory,
 * else 0. */
uint64_t ckc_memlimit_job(void);

/* The address space this process may still map under its RLIMIT_AS (ulimit
 * -v, set by some batch systems): the limit less what it maps now (the
 * first field of statm, a file in the format of /proc/self/statm), at least
 * 1; 0 when no limit applies. */
uint64_t ckc_memlimit_as_room(const char *statm);

/* The bytes mapped and resident (the first two fields of statm, a file in
 * the format of /proc/self/statm). False, and zeros, where it cannot be
 * read. */
bool ckc_memlimit_statm(const char *statm, uint64_t *mapped, uint64_t *resident);

#endif
