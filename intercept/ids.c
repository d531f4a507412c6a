/* The process's user and group ids, kept (intercept.h: ckc_geteuid). */
#include "config.h"

#include <stdatomic.h>
#include <unistd.h>

#include "intercept.h"

/* The process's user and group ids as the kernel gave them first: the
 * library judges a cached checkpoint's mode and owner at each open, and a
 * question to the kernel each time cost a system call there. Once the
 * process changes either (the set*id calls of spawn.c, or syscall() with
 * one of their numbers), the kernel is asked each time. */
static atomic_bool ids_moved;
static _Atomic long long id_kept[4] = { -1, -1, -1, -1 };

static unsigned id_ask(int which)
{
	switch (which) {
	case 0: return (unsigned)getuid();
	case 1: return (unsigned)geteuid();
	case 2: return (unsigned)getgid();
	default: return (unsigned)getegid();
	}
}

static unsigned id_of(int which)
{
	long long v = atomic_load_explicit(&id_kept[which], memory_order_relaxed);
	if (v >= 0 && !atomic_load_explicit(&ids_moved, memory_order_acquire))
		return (unsigned)v;
	unsigned u = id_ask(which);
	/* (a change under way meanwhile: the flag is set before it is made,
	 * so an answer kept here is never used after it) */
	if (!atomic_load(&ids_moved))
		atomic_store_explicit(&id_kept[which], (long long)u, memory_order_relaxed);
	return u;
}

uid_t ckc_getuid(void)
{
	return (uid_t)id_of(0);
}

uid_t ckc_geteuid(void)
{
	return (uid_t)id_of(1);
}

gid_t ckc_getgid(void)
{
	return (gid_t)id_of(2);
}

gid_t ckc_getegid(void)
{
	return (gid_t)id_of(3);
}

void ckc_ids_changing(void)
{
	atomic_store(&ids_moved, true);
}
