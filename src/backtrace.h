/* Backtraces of unexpected faults and fallbacks (backtrace.c). */
#ifndef CKC_BACKTRACE_H
#define CKC_BACKTRACE_H

/* At CKPTCACHE_LOG=debug, logs "what" and the call chain, once per site
 * (the faulting instruction of the signal context uc, or the caller when
 * uc is NULL). Usable from a SIGSEGV handler. */
void ckc_backtrace_log(const char *what, void *uc);

#endif
