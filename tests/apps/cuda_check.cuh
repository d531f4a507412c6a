/* cuda_check.cuh: the CUDA error checks of the GPU test programs (include
 * after proxy_common.h, which defines PROG). */
#ifndef CKC_CUDA_CHECK_CUH
#define CKC_CUDA_CHECK_CUH

#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

/* ---- errors ---------------------------------------------------------------- */

/* Every failed CUDA call ends the run with its error string: the benchmark must
 * never report a throughput for a copy that did not happen. No device (or no
 * usable driver) exits 77, the automake code for "skipped". */
[[noreturn]] static inline void cuda_die(const char *call, cudaError_t e, const char *file, int line)
{
	fprintf(stderr, PROG ": CUDA error at %s:%d: %s: %s (%s)\n", file, line, call, cudaGetErrorString(e),
		cudaGetErrorName(e));
	exit(e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? 77 : 1);
}
#define CK(call)                                                                                                   \
	do {                                                                                                       \
		cudaError_t e_ = (call);                                                                           \
		if (e_ != cudaSuccess)                                                                             \
			cuda_die(#call, e_, __FILE__, __LINE__);                                                   \
	} while (0)
/* After a kernel launch: a bad configuration is reported here, a fault in the
 * kernel by the next synchronising call. */
#define CK_LAUNCH(what)                                                                                            \
	do {                                                                                                       \
		cudaError_t e_ = cudaGetLastError();                                                               \
		if (e_ != cudaSuccess)                                                                             \
			cuda_die("launch of " what, e_, __FILE__, __LINE__);                                       \
	} while (0)

#endif
