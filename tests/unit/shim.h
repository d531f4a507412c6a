/* A minimal stand-in for the part of Criterion the engine tests use, so the
 * same test sources run under ThreadSanitizer (Criterion's runner cannot
 * start under it). Each test runs in its own forked process; the summary
 * line has Criterion's format so scripts/test counts it the same way. */
#ifndef CKC_TEST_SHIM_H
#define CKC_TEST_SHIM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void shim_register(const char *suite, const char *name, void (*fn)(void));
void shim_fail(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5)));

#define Test(suite, name)                                                            \
	static void suite##_##name##_impl(void);                                         \
	__attribute__((constructor)) static void suite##_##name##_reg(void)              \
	{                                                                                \
		shim_register(#suite, #name, suite##_##name##_impl);                     \
	}                                                                                \
	static void suite##_##name##_impl(void)

#define SHIM_MSG(...) " " __VA_ARGS__
#define cr_assert(c, ...) \
	do { if (!(c)) shim_fail(__FILE__, __LINE__, #c, SHIM_MSG(__VA_ARGS__)); } while (0)
#define cr_assert_not(c, ...) cr_assert(!(c), __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_null(a, ...) cr_assert((a) == NULL, __VA_ARGS__)
#define cr_assert_not_null(a, ...) cr_assert((a) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)

/* Expectations stop the test here too (stricter than Criterion's). */
#define cr_expect(c, ...) cr_assert(c, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) cr_assert_eq(a, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) cr_assert_geq(a, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) cr_assert_gt(a, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) cr_assert_leq(a, b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) cr_assert_str_eq(a, b, __VA_ARGS__)
/* A test that cannot run in this build ends here, reported as passed. */
#define cr_skip_test(...) \
	do { \
		printf("skipped: " __VA_ARGS__); \
		printf("\n"); \
		exit(0); \
	} while (0)

#endif
