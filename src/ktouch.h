/* The kernel's first touch of a program's buffer, made early and off the
 * program's path.
 *
 * A program without the library checkpoints with write(): the kernel reads
 * the buffer. Under the library a checkpoint is copied out of the buffer by
 * the library's own code, so the kernel's first access to the buffer comes
 * later, in a restore read that a real file serves. On a virtual machine
 * whose hypervisor keeps separate page tables for the guest's kernel and
 * user code (shadow paging), that first kernel access costs a fault per
 * page: the first read() of 16 MiB into such a buffer runs at 0.5 to 2.5
 * GB/s against 12 to 21 GB/s once the kernel has touched it
 * (scripts/bench/first_touch), and it lands in the program's restore.
 *
 * So after a program's write of CKC_KTOUCH_MIN bytes or more has been
 * copied into the cache, a background thread has the kernel read one byte
 * of each page that begins in the buffer (a pwritev of those bytes into an
 * unnamed file of the library in /dev/shm), paying the faults where the
 * program does not wait: a megabyte at a time, each once the program has
 * made no copy for CKC_KTOUCH_QUIET_NS (it computes). Where the first CKC_KTOUCH_PROBES touches all cost less than
 * CKC_KTOUCH_SLOW_NS a page (any machine without the effect), the thread
 * stops touching for good. CKPTCACHE_KERNEL_TOUCH=on|off overrides that
 * choice. The touch only reads, and never the program's memory through its
 * own code: a buffer freed meanwhile makes the kernel's read fail, nothing
 * more. */
#ifndef CKC_KTOUCH_H
#define CKC_KTOUCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CKC_KTOUCH_MIN (1u << 20)
/* The touch waits until the program has made no copy for this long (its
 * writes and reads of checkpoints, its captures): it runs while the
 * program computes. */
#define CKC_KTOUCH_QUIET_NS 1000000ull
#define CKC_KTOUCH_PROBES 4
#define CKC_KTOUCH_SLOW_NS 1000u
/* Buffers waiting for the thread; a note beyond that is dropped. */
#define CKC_KTOUCH_QUEUE 16

enum { CKC_KTOUCH_AUTO = 0, CKC_KTOUCH_ON, CKC_KTOUCH_OFF };

/* The mode (CKPTCACHE_KERNEL_TOUCH), before the first note. */
void ckc_ktouch_configure(int mode);

/* The program's buffer [p, p + n) was copied by the library's code: have
 * the kernel touch the pages that begin in it soon. Never blocks on the
 * thread. */
void ckc_ktouch_note(const void *p, size_t n);

/* The program ends: nothing more is touched, and the file is not opened
 * again (a number given up for a publication as the program ends with its
 * table full is not taken). */
void ckc_ktouch_end(void);

/* Ends the thread and closes its file (at the engine's stop: the thread
 * uses the engine's table of real functions); the next note starts them
 * again. What was measured is kept. */
void ckc_ktouch_stop(void);

/* Whether the auto mode's probes found the machine slow: given the costs
 * of the touches so far (ns per page, probes of them), true (keep
 * touching), false (stop), or undecided (-1) while fewer than
 * CKC_KTOUCH_PROBES were made. Pure. */
int ckc_ktouch_judge(const uint32_t *ns_per_page, int probes);

typedef struct ckc_ktouch_stats {
	const char *mode; /* "auto", "on", "off" */
	const char *state; /* "idle" (nothing noted yet), "touching", "stopped" (not needed here), "failed" */
	uint64_t buffers, pages, dropped;
	double seconds;
	uint32_t probe_ns[CKC_KTOUCH_PROBES]; /* ns per page of the first touches */
	int probes;
} ckc_ktouch_stats_t;

void ckc_ktouch_stats(ckc_ktouch_stats_t *s);

#endif
