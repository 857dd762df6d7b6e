/*
 * test_vec.c: the doubling growth helper (base/vec.c): capacities it picks,
 * contents kept across growth, and that every failure (size overflow, out of
 * memory) returns -1 with the old buffer and capacity untouched.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "../base/vec.h"

#if defined(__SANITIZE_ADDRESS__)
#define VEC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VEC_TEST_ASAN 1
#endif
#endif

struct pair {
	uint64_t a;
	uint32_t b;
};

Test(vec, doubles_and_keeps_contents)
{
	uint32_t *v = NULL;
	size_t cap = 0;
	cr_assert_eq(VEC_RESERVE(v, cap, 1, 8), 0);
	cr_assert_not_null(v);
	cr_assert_eq(cap, 8);
	for (uint32_t i = 0; i < 8; i++)
		v[i] = i * 3;
	cr_assert_eq(VEC_RESERVE(v, cap, 9, 8), 0);
	cr_assert_eq(cap, 16);
	cr_assert_eq(VEC_RESERVE(v, cap, 100, 8), 0);
	cr_assert_eq(cap, 128, "doubles until it holds NEED, got %zu", cap);
	for (uint32_t i = 0; i < 8; i++)
		cr_assert_eq(v[i], i * 3);
	uint32_t *same = v;
	cr_assert_eq(VEC_RESERVE(v, cap, 128, 8), 0);
	cr_assert_eq(VEC_RESERVE(v, cap, 0, 8), 0);
	cr_assert_eq(v, same, "no growth when it fits");
	cr_assert_eq(cap, 128);
	v[127] = 7;
	free(v);
}

Test(vec, first_capacity)
{
	struct pair *p = NULL;
	size_t cap = 0;
	cr_assert_eq(VEC_RESERVE(p, cap, 20, 8), 0);
	cr_assert_eq(cap, 32, "first capacity doubled up to NEED, got %zu", cap);
	p[31].a = 1;
	p[31].b = 2;
	free(p);

	char *s = NULL;
	cap = 0;
	cr_assert_eq(VEC_RESERVE(s, cap, 5, 0), 0);
	cr_assert_eq(cap, 5, "first capacity 0 means exactly NEED");
	cr_assert_eq(VEC_RESERVE(s, cap, 6, 0), 0);
	cr_assert_eq(cap, 10);
	s[9] = 'x';
	free(s);

	/* a capacity the caller set (e.g. after its own malloc) doubles from there */
	s = malloc(4096);
	cr_assert_not_null(s);
	cap = 4096;
	cr_assert_eq(vec_reserve(&s, &cap, 4097, 1, 256), 0);
	cr_assert_eq(cap, 8192);
	free(s);
}

Test(vec, size_overflow_leaves_buffer)
{
	uint64_t *v = NULL;
	size_t cap = 0;
	cr_assert_eq(VEC_RESERVE(v, cap, 4, 4), 0);
	v[0] = 11;
	v[3] = 44;
	uint64_t *old = v;
	cr_assert_eq(VEC_RESERVE(v, cap, SIZE_MAX / sizeof *v + 1, 4), -1);
	cr_assert_eq(VEC_RESERVE(v, cap, SIZE_MAX, 4), -1);
	cr_assert_eq(vec_grow(&v, &cap, SIZE_MAX / 2 + 1, 2, 4), -1);
	cr_assert_eq(v, old);
	cr_assert_eq(cap, 4);
	cr_assert_eq(v[0], 11);
	cr_assert_eq(v[3], 44);
	free(v);
}

/* A size the allocator refuses (over PTRDIFF_MAX bytes, glibc fails it with
 * ENOMEM); ASan aborts on such a request instead, so it is skipped there. */
Test(vec, alloc_failure_leaves_buffer)
{
#ifdef VEC_TEST_ASAN
	cr_skip_test("ASan aborts on an impossible allocation instead of failing it");
#else
	uint64_t *v = NULL;
	size_t cap = 0;
	cr_assert_eq(VEC_RESERVE(v, cap, 3, 2), 0);
	cr_assert_eq(cap, 4);
	v[0] = 5;
	v[3] = 9;
	uint64_t *old = v;
	size_t huge = (size_t)PTRDIFF_MAX / sizeof *v + 1;
	cr_assert_eq(VEC_RESERVE(v, cap, huge, 2), -1);
	/* doubling past the size limit falls back to NEED, which still fails here */
	cap = SIZE_MAX / sizeof *v / 2 + 1;
	cr_assert_eq(VEC_RESERVE(v, cap, cap + 1, 2), -1);
	cr_assert_eq(cap, SIZE_MAX / sizeof *v / 2 + 1);
	cr_assert_eq(v, old);
	cr_assert_eq(v[0], 5);
	cr_assert_eq(v[3], 9);
	free(v);
#endif
}
