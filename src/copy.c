/* Copies of checkpoint bytes (copy.h). */
#include "copy.h"

#include <errno.h>
#include <pthread.h>
#include <ucontext.h>

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CKC_COPY_CHECKED 1
#else
#define CKC_COPY_CHECKED 0
#endif

/* whether large copies use the string move: set once by configure, read by
 * every copy */
static atomic_bool use_movsb;
/* whether the near copies that avoid the string move stream (AVX2) */
static atomic_bool use_stream;

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

/* Whether the processor has AVX2 (CPUID leaf 7, EBX bit 5) and the system
 * saves the YMM registers (OSXSAVE, then XCR0 bits 1 and 2). Not
 * __builtin_cpu_supports: that links libgcc's CPU model, whose constructor
 * runs a dozen CPUID instructions in every process at load, each a trap to
 * the hypervisor on a virtual machine. */
static bool cpu_avx2(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))
		return false;
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & 6u) != 6u || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & (1u << 5)) != 0;
#else
	return false;
#endif
}

/* Whether the processor is AMD's (CPUID leaf 0: "AuthenticAMD"). */
static bool cpu_amd(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (!__get_cpuid(0, &a, &b, &c, &d))
		return false;
	return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
#else
	return false;
#endif
}

void ckc_copy_configure(int mode)
{
	bool movsb = !CKC_COPY_CHECKED && mode == CKC_COPY_AUTO && cpu_fast_strings();
	bool stream = movsb && cpu_amd() && cpu_avx2();
	atomic_store(&use_stream, stream);
	atomic_store(&use_movsb, movsb);
}

bool ckc_copy_movsb(void)
{
	return atomic_load_explicit(&use_movsb, memory_order_relaxed);
}

bool ckc_copy_near(const void *dst, const void *src)
{
	uintptr_t k = ((uintptr_t)dst - (uintptr_t)src) & (CKC_COPY_PAGE - 1);
	return k != 0 && k < CKC_COPY_NEAR;
}

#if defined(__x86_64__)
/* n bytes with 32-byte loads and non-temporal stores, four at a time, the
 * destination aligned to 32 first (a stream store requires it); the head
 * and tail by memcpy. The fence orders the stores before whatever the
 * caller does next, another thread's reads included. */
__attribute__((target("avx2"))) static void copy_stream(unsigned char *d, const unsigned char *s, size_t n)
{
	size_t head = (32 - ((uintptr_t)d & 31)) & 31;
	memcpy(d, s, head);
	size_t i = head;
	for (; i + 128 <= n; i += 128) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
		__m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64));
		__m256i e = _mm256_loadu_si256((const __m256i *)(s + i + 96));
		_mm256_stream_si256((__m256i *)(d + i), a);
		_mm256_stream_si256((__m256i *)(d + i + 32), b);
		_mm256_stream_si256((__m256i *)(d + i + 64), c);
		_mm256_stream_si256((__m256i *)(d + i + 96), e);
	}
	_mm_sfence();
	memcpy(d + i, s + i, n - i);
}
#endif

int ckc_copy_way(const void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	/* never set in a sanitizer's build (ckc_copy_configure) */
	if (n >= CKC_COPY_MOVSB_MIN && atomic_load_explicit(&use_movsb, memory_order_relaxed)) {
		if (!ckc_copy_near(dst, src))
			return CKC_WAY_MOVSB;
		if (n >= CKC_COPY_STREAM_MIN && atomic_load_explicit(&use_stream, memory_order_relaxed))
			return CKC_WAY_STREAM;
	}
#else
	(void)dst, (void)src, (void)n;
#endif
	return CKC_WAY_LIBC;
}

void ckc_copy(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	switch (ckc_copy_way(dst, src, n)) {
	case CKC_WAY_MOVSB:
		__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
		return;
	case CKC_WAY_STREAM:
		copy_stream(dst, src, n);
		return;
	default:
		break;
	}
#endif
	memcpy(dst, src, n);
}

/* The checked copy under way on this thread: where to go back to (the
 * compiler's own setjmp: no symbol of the C library's to bind, and the
 * signal mask is not saved, a system call per copy; the handler sets the
 * one the fault interrupted before it jumps). */
static __thread void **tl_copy_back;

int ckc_copy_checked(void *dst, const void *src, size_t n)
{
	void *back[5];
	/* a NULL buffer faults at once (and is no pointer memcpy may take) */
	if (n && (!dst || !src))
		return -EFAULT;
	if (__builtin_setjmp(back)) {
		tl_copy_back = NULL;
		return -EFAULT;
	}
	tl_copy_back = back;
	atomic_signal_fence(memory_order_seq_cst);
	ckc_copy(dst, src, n);
	atomic_signal_fence(memory_order_seq_cst);
	tl_copy_back = NULL;
	return 0;
}

void ckc_copy_fault(int sig, const siginfo_t *si, void *uc)
{
	void **back = tl_copy_back;
	/* raised by the kernel for this thread's access (not sent) */
	if (!back || !si || si->si_code <= 0 || (sig != SIGSEGV && sig != SIGBUS))
		return;
	tl_copy_back = NULL;
	if (uc)
		pthread_sigmask(SIG_SETMASK, &((ucontext_t *)uc)->uc_sigmask, NULL);
	__builtin_longjmp(back, 1);
}
