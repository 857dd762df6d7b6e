/*
 * test_buddy.c: buddy splitting, merging back to the whole chunk, chunk
 * release at empty_cache, knob validation.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/policy.h"
#include "helpers.h"

extern const struct alloc_policy policy_buddy;
#define P policy_buddy
#define MIB (1ull << 20)

static int64_t stat_of(void *st, const char *name)
{
	return th_policy_stat(&P, st, name);
}

static struct alloc_result get(void *st, uint64_t bytes)
{
	struct alloc_request rq = {0, bytes, 0, 0};
	struct alloc_result rs = {0, 0};
	cr_assert_eq(P.alloc(st, &rq, &rs), POLICY_OK);
	return rs;
}

Test(buddy, split_and_merge)
{
	struct sim_device *dev = device_create(1ull << 30, DEVICE_ADDR_SYNTHETIC);
	struct policy_env env = {dev, 1ull << 30, NULL};
	void *st = calloc(1, P.state_size);
	char err[256] = "";
	cr_assert_eq(P.init(st, "min_block:256,chunk_size:1MiB", &env, err, sizeof err), 0, "%s", err);
	struct alloc_result a = get(st, 300), b = get(st, 256), c = get(st, 600 * 1024);
	cr_assert_eq(a.block_bytes, 512);
	cr_assert_eq(b.block_bytes, 256);
	cr_assert_eq(b.addr, a.addr + 512, "256 B takes the lowest free buddy");
	cr_assert_eq(c.block_bytes, 1 * MIB, "600 KiB needs a whole 1 MiB chunk");
	cr_assert_eq(stat_of(st, "num_chunks"), 2);
	/* a split left free buddies of 256 B, 1 KiB, 2 KiB ... 512 KiB */
	cr_assert_eq(stat_of(st, "free_blocks"), 11);
	P.free(st, a.addr, a.block_bytes, 0);
	P.free(st, b.addr, b.block_bytes, 0);
	cr_assert_eq(stat_of(st, "free_blocks"), 1, "merged back into the whole chunk");
	cr_assert_eq(stat_of(st, "largest_free_block"), (int64_t)MIB);
	P.free(st, c.addr, c.block_bytes, 0);
	P.control(st, POLICY_CTL_EMPTY_CACHE, 0);
	cr_assert_eq(device_reserved(dev), 0);
	struct alloc_result big = get(st, 3 * MIB);
	cr_assert_eq(big.block_bytes, 4 * MIB, "larger than a chunk: own power-of-two chunk");
	P.free(st, big.addr, big.block_bytes, 0);
	P.fini(st);
	cr_assert_eq(device_reserved(dev), 0);
	free(st);
	device_destroy(dev);
}

Test(buddy, bad_knobs_are_named)
{
	struct sim_device *dev = device_create(1ull << 30, DEVICE_ADDR_SYNTHETIC);
	struct policy_env env = {dev, 1ull << 30, NULL};
	void *st = calloc(1, P.state_size);
	char err[256] = "";
	cr_assert_eq(P.init(st, "min_block:300", &env, err, sizeof err), -1);
	cr_assert(strstr(err, "min_block"), "%s", err);
	cr_assert_eq(P.init(st, "chunk_size:128", &env, err, sizeof err), -1);
	cr_assert(strstr(err, "chunk_size"), "%s", err);
	free(st);
	device_destroy(dev);
}
