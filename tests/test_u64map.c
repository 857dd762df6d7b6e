/*
 * test_u64map.c: the open-addressing map (base/u64map.c) against a plain
 * reference array under random put/get/del, with keys that share low bits
 * (as device addresses do) so clusters and backward-shift deletion are
 * exercised.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "../base/u64map.h"

Test(u64map, basic)
{
	struct u64map m;
	uint64_t v;
	u64map_init(&m);
	cr_assert_eq(u64map_get(&m, 1, &v), 0);
	cr_assert_eq(u64map_del(&m, 1, &v), 0);
	cr_assert_eq(u64map_put(&m, 1, 10), 0);
	cr_assert_eq(u64map_put(&m, 1, 11), 0);
	cr_assert_eq(m.count, 1);
	cr_assert_eq(u64map_get(&m, 1, &v), 1);
	cr_assert_eq(v, 11);
	cr_assert_eq(u64map_put(&m, 0, 7), 0);
	cr_assert_eq(u64map_get(&m, 0, &v), 1);
	cr_assert_eq(v, 7);
	cr_assert_eq(u64map_del(&m, 1, NULL), 1);
	cr_assert_eq(u64map_get(&m, 1, &v), 0);
	cr_assert_eq(m.count, 1);
	u64map_free(&m);
	cr_assert_eq(m.count, 0);
}

Test(u64map, random_against_reference)
{
	enum { KEYS = 4096, OPS = 400000 };
	static uint64_t ref_val[KEYS];
	static int ref_has[KEYS];
	struct u64map m;
	uint64_t v;
	size_t count = 0;
	srand(777);
	u64map_init(&m);
	for (int i = 0; i < OPS; i++) {
		size_t k = (size_t)rand() % KEYS;
		uint64_t key = 0x7f0000000000ull + ((uint64_t)k << 21); /* 2 MiB aligned */
		int op = rand() % 3;
		if (op == 0) {
			uint64_t val = (uint64_t)rand();
			cr_assert_eq(u64map_put(&m, key, val), 0);
			count += !ref_has[k];
			ref_has[k] = 1;
			ref_val[k] = val;
		} else if (op == 1) {
			int got = u64map_del(&m, key, &v);
			cr_assert_eq(got, ref_has[k], "del of key %zu: %d vs %d", k, got, ref_has[k]);
			if (got)
				cr_assert_eq(v, ref_val[k]);
			count -= ref_has[k];
			ref_has[k] = 0;
		} else {
			int got = u64map_get(&m, key, &v);
			cr_assert_eq(got, ref_has[k]);
			if (got)
				cr_assert_eq(v, ref_val[k]);
		}
		cr_assert_eq(m.count, count);
	}
	for (size_t k = 0; k < KEYS; k++) {
		uint64_t key = 0x7f0000000000ull + ((uint64_t)k << 21);
		cr_assert_eq(u64map_get(&m, key, &v), ref_has[k]);
	}
	u64map_free(&m);
}
