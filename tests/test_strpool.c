/*
 * test_strpool.c: the string pool (base/strpool.c): one id per distinct
 * string, dense in the order first added, every string intact after the
 * buffer and the table have grown many times over.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../base/strpool.h"

Test(strpool, ids_are_dense_and_shared)
{
	struct strpool p;
	uint32_t a, b, c, again;
	strpool_init(&p);
	cr_assert_eq(strpool_add(&p, "cudaMalloc", &a), 1);
	cr_assert_eq(strpool_add(&p, "", &b), 1, "the empty string is a string");
	cr_assert_eq(strpool_add(&p, "cudaMallocAsync", &c), 1, "a longer string with the same start");
	cr_assert_eq(strpool_add(&p, "cudaMalloc", &again), 0);
	cr_assert_eq(a, 0);
	cr_assert_eq(b, 1);
	cr_assert_eq(c, 2);
	cr_assert_eq(again, a);
	cr_assert_eq(p.n, 3);
	cr_assert_str_eq(strpool_str(&p, a), "cudaMalloc");
	cr_assert_str_eq(strpool_str(&p, b), "");
	cr_assert_str_eq(strpool_str(&p, c), "cudaMallocAsync");
	strpool_free(&p);
	cr_assert_eq(p.n, 0);
	cr_assert_null(p.buf);
}

/* 50,000 names each added three times, interleaved: every add finds the
 * id of the first, and each string reads back as written. */
Test(strpool, many_strings_survive_growth)
{
	struct strpool p;
	char s[64];
	enum { N = 50000 };
	strpool_init(&p);
	for (int round = 0; round < 3; round++)
		for (uint32_t i = 0; i < N; i++) {
			uint32_t id;
			snprintf(s, sizeof s, "_ZN2at6native%ukernelEv", i * 2654435761u);
			cr_assert_eq(strpool_add(&p, s, &id), round == 0, "round %d, string %u", round, i);
			cr_assert_eq(id, i);
		}
	cr_assert_eq(p.n, N);
	for (uint32_t i = 0; i < N; i++) {
		snprintf(s, sizeof s, "_ZN2at6native%ukernelEv", i * 2654435761u);
		cr_assert_str_eq(strpool_str(&p, i), s);
	}
	strpool_free(&p);
}
