/* The interposed dlsym. Only "cu..." lookups are looked at (cuda.c); every
 * other one must reach the C library's dlsym with the caller's return
 * address intact, because RTLD_NEXT means "after the object that called":
 * another interposer (a sanitizer's runtime, a profiling shim) that asks
 * for RTLD_NEXT through this function must still get its own next symbol.
 * On x86-64 a trampoline jumps to the target, so that holds whatever the
 * compiler does (instrumented builds defeat tail calls); elsewhere it is a
 * C tail call. Kept apart from <dlfcn.h>, whose declaration promises a
 * non-null name that a caller may not keep. */
#include "config.h"

#include <stddef.h>

typedef void *(*dlsym_fn)(void *, const char *);
void *ckc_cu_dlsym(void *handle, const char *name);

/* This path runs before anything else in the process may be ready: a
 * sanitizer's runtime looks up its interceptors through dlsym while its
 * own shadow memory does not exist yet. So no instrumentation here. */
#define CKC_BARE __attribute__((no_sanitize_address, no_sanitize("undefined"), no_sanitize("thread")))

dlsym_fn ckc_real_dlsym(void);

/* Where a lookup goes: the CUDA half, or the C library's dlsym. */
__attribute__((used)) void *ckc_dlsym_route(void *handle, const char *name);
void ckc_thread_program_creates(void);

/* name is want (exact), or starts with it (pthread_create@@GLIBC_...). */
CKC_BARE static int route_is(const char *name, const char *want, int exact)
{
	while (*want && *name == *want) {
		name++;
		want++;
	}
	return !*want && (!exact || !*name);
}

CKC_BARE void *ckc_dlsym_route(void *handle, const char *name)
{
	(void)handle;
	/* a program that looks up a thread creation may create threads past
	 * the wrappers: the streams' locks go back on (thread.h); compared by
	 * hand, since a sanitizer's strcmp is not ready this early */
	if (name && (route_is(name, "pthread_create", 0) || route_is(name, "thrd_create", 1)))
		ckc_thread_program_creates();
#ifdef HAVE_CUDA_H
	if (name && name[0] == 'c' && name[1] == 'u')
		return (void *)ckc_cu_dlsym;
#else
	(void)name;
#endif
	return (void *)ckc_real_dlsym();
}

#if defined(__x86_64__)
/* dlsym(handle, name): keep the arguments, ask ckc_dlsym_route where to go,
 * and jump there, so the callee sees our caller's return address. The two
 * pushes and the 8 bytes keep the stack 16-byte aligned for the call. */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call ckc_dlsym_route@PLT\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jmp *%rax\n"
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#else
#define CKC_EXPORT __attribute__((visibility("default")))
CKC_EXPORT void *dlsym(void *handle, const char *name);

CKC_BARE __attribute__((optimize("O2", "optimize-sibling-calls"), noinline))
void *dlsym(void *handle, const char *name)
{
	return ((dlsym_fn)ckc_dlsym_route(handle, name))(handle, name);
}
#endif
