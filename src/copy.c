/* Copies of checkpoint bytes (copy.h). */
#include "copy.h"

#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CKC_COPY_CHECKED 1
#else
#define CKC_COPY_CHECKED 0
#endif

/* whether large copies use the string move: set once by configure, read by
 * every copy */
static atomic_bool use_movsb;

/* Whether the processor announces fast string moves: ERMS (CPUID leaf 7,
 * EBX bit 9) or FSRM (EDX bit 4). */
static bool cpu_fast_strings(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & (1u << 9)) || (d & (1u << 4));
#else
	return false;
#endif
}

void ckc_copy_configure(int mode)
{
	atomic_store(&use_movsb, !CKC_COPY_CHECKED && mode == CKC_COPY_AUTO && cpu_fast_strings());
}

bool ckc_copy_movsb(void)
{
	return atomic_load_explicit(&use_movsb, memory_order_relaxed);
}

void ckc_copy(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	/* never set in a sanitizer's build (ckc_copy_configure) */
	if (n >= CKC_COPY_MOVSB_MIN && atomic_load_explicit(&use_movsb, memory_order_relaxed)) {
		__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
		return;
	}
#endif
	memcpy(dst, src, n);
}
