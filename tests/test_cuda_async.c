/*
 * test_cuda_async.c: the stream-ordered pool's release threshold and its
 * stream-order reuse rule.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/policy.h"

extern const struct alloc_policy policy_cuda_async;
#define P policy_cuda_async
#define MIB (1ull << 20)

struct fx { struct sim_device *dev; void *st; };

static struct fx open_pool(const char *conf)
{
	struct fx f = {device_create(8ull << 30, DEVICE_ADDR_SYNTHETIC), NULL};
	struct policy_env env = {f.dev, 8ull << 30, NULL};
	char err[256] = "";
	f.st = calloc(1, P.state_size);
	cr_assert_eq(P.init(f.st, conf, &env, err, sizeof err), 0, "%s", err);
	return f;
}

static void close_pool(struct fx *f)
{
	P.fini(f->st);
	cr_assert_eq(device_reserved(f->dev), 0);
	free(f->st);
	device_destroy(f->dev);
}

static struct alloc_result get(struct fx *f, uint64_t bytes, uint32_t stream)
{
	struct alloc_request rq = {0, bytes, stream, 0};
	struct alloc_result rs = {0, 0};
	cr_assert_eq(P.alloc(f->st, &rq, &rs), POLICY_OK);
	return rs;
}

Test(cuda_async, release_at_sync_above_threshold)
{
	struct fx f = open_pool("");
	struct alloc_result a = get(&f, 10 * MIB, 0);
	cr_assert_eq(device_reserved(f.dev), 10 * MIB);
	P.free(f.st, a.addr, a.block_bytes, 0);
	cr_assert_eq(device_reserved(f.dev), 10 * MIB, "kept until a sync");
	P.control(f.st, POLICY_CTL_SYNC, 0);
	cr_assert_eq(device_reserved(f.dev), 0, "threshold 0: all released at the sync");
	close_pool(&f);

	f = open_pool("release_threshold:8MiB");
	a = get(&f, 20 * MIB, 0);
	P.free(f.st, a.addr, a.block_bytes, 0);
	P.control(f.st, POLICY_CTL_SYNC, 0);
	cr_assert_eq(device_reserved(f.dev), 8 * MIB, "trimmed down to the threshold");
	P.control(f.st, POLICY_CTL_EMPTY_CACHE, 0);
	cr_assert_eq(device_reserved(f.dev), 0, "empty_cache trims to 0");
	close_pool(&f);

	/* max: PyTorch's backend, the pool keeps everything until empty_cache */
	f = open_pool("release_threshold:max");
	a = get(&f, 20 * MIB, 0);
	P.free(f.st, a.addr, a.block_bytes, 0);
	P.control(f.st, POLICY_CTL_SYNC, 0);
	cr_assert_eq(device_reserved(f.dev), 20 * MIB, "max: nothing released at a sync");
	P.control(f.st, POLICY_CTL_EMPTY_CACHE, 0);
	cr_assert_eq(device_reserved(f.dev), 0);
	close_pool(&f);
}

Test(cuda_async, reuse_follows_stream_order)
{
	struct fx f = open_pool("release_threshold:1GiB");
	struct alloc_result a = get(&f, 4 * MIB, 1);
	P.free(f.st, a.addr, a.block_bytes, 1);
	struct alloc_result same = get(&f, 4 * MIB, 1);
	cr_assert_eq(same.addr, a.addr, "same stream reuses at once");
	P.free(f.st, same.addr, same.block_bytes, 1);
	struct alloc_result other = get(&f, 4 * MIB, 2);
	cr_assert_neq(other.addr, a.addr, "another stream must wait for a sync");
	P.free(f.st, other.addr, other.block_bytes, 2);
	P.control(f.st, POLICY_CTL_SYNC, 0);
	struct alloc_result after = get(&f, 4 * MIB, 2);
	cr_assert_eq(after.addr, a.addr, "after the sync every stream may reuse it");
	cr_assert_eq(device_reserved(f.dev), 8 * MIB, "nothing trimmed below the threshold");
	P.free(f.st, after.addr, after.block_bytes, 2);
	close_pool(&f);
}

/* Free ranges below 16 MiB are kept per exact size, larger ones in one
 * ordered set, per availability class: best fit crosses that boundary
 * inside a stream's own ranges, and a sync hands them to every stream. */
Test(cuda_async, best_fit_per_stream_across_the_size_boundary)
{
	struct fx f = open_pool("release_threshold:1GiB");
	struct alloc_result a = get(&f, 16 * MIB - 256, 1), s1 = get(&f, 1000, 1);
	struct alloc_result c = get(&f, 16 * MIB + 256, 1), s2 = get(&f, 1000, 1);
	P.free(f.st, a.addr, a.block_bytes, 1);
	P.free(f.st, c.addr, c.block_bytes, 1);
	struct alloc_result x = get(&f, 16 * MIB, 1);
	cr_assert_eq(x.addr, c.addr, "the only own range that fits");
	cr_assert_eq(x.block_bytes, 16 * MIB);
	struct alloc_result y = get(&f, 16 * MIB - 256, 2);
	cr_assert_gt(y.addr, s2.addr, "stream 1's ranges wait for a sync: from the top");
	P.control(f.st, POLICY_CTL_SYNC, 0);
	struct alloc_result z = get(&f, 16 * MIB - 256, 2);
	cr_assert_eq(z.addr, a.addr, "after the sync: the exact fit");
	struct alloc_result *all[] = {&s1, &s2, &x, &y, &z};
	for (int i = 0; i < 5; i++)
		P.free(f.st, all[i]->addr, all[i]->block_bytes, 2);
	close_pool(&f);
}

Test(cuda_async, small_blocks_share_a_page)
{
	struct fx f = open_pool("");
	struct alloc_result a = get(&f, 1000, 0), b = get(&f, 1000, 0);
	cr_assert_eq(a.block_bytes, 1024);
	cr_assert_eq(b.addr, a.addr + 1024);
	cr_assert_eq(device_reserved(f.dev), 2 * MIB);
	P.free(f.st, a.addr, a.block_bytes, 0);
	P.control(f.st, POLICY_CTL_SYNC, 0);
	cr_assert_eq(device_reserved(f.dev), 2 * MIB, "a page in use stays mapped");
	P.free(f.st, b.addr, b.block_bytes, 0);
	P.control(f.st, POLICY_CTL_SYNC, 0);
	cr_assert_eq(device_reserved(f.dev), 0);
	close_pool(&f);
}

Test(cuda_async, oom_trims_idle_pages_first)
{
	struct fx f = open_pool("release_threshold:8GiB");
	struct alloc_result a = get(&f, 6ull << 30, 0);
	P.free(f.st, a.addr, a.block_bytes, 0);
	/* another stream cannot reuse the 6 GiB yet; mapping 4 GiB more would
	 * exceed 8 GiB, so the idle pages go first */
	struct alloc_result b = get(&f, 4ull << 30, 1);
	cr_assert_eq(device_reserved(f.dev), 4ull << 30);
	P.free(f.st, b.addr, b.block_bytes, 1);
	close_pool(&f);
}

Test(cuda_async, bad_threshold_is_named)
{
	struct sim_device *dev = device_create(1ull << 30, DEVICE_ADDR_SYNTHETIC);
	struct policy_env env = {dev, 1ull << 30, NULL};
	void *st = calloc(1, P.state_size);
	char err[256] = "";
	cr_assert_eq(P.init(st, "release_threshold:xyz", &env, err, sizeof err), -1);
	cr_assert(strstr(err, "release_threshold"), "%s", err);
	free(st);
	device_destroy(dev);
}
