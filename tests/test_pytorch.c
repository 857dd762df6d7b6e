/*
 * test_pytorch.c: the pytorch policy (policies/pytorch.c) on small hand-made
 * request streams: rounding (512 B granules and both roundup_power2_divisions
 * forms), pool and segment sizes, splitting and merging, the
 * max_split_size rules, release-and-retry before an OOM, empty_cache,
 * expandable segments, and knob errors.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "../policies/policy.h"

#define MiB (1ull << 20)

extern const struct alloc_policy policy_pytorch;

struct pt_fixture {
	struct sim_device *dev;
	void *st;
	uint64_t next_id;
};

static void setup(struct pt_fixture *f, const char *conf, uint64_t cap)
{
	char err[256];
	struct policy_env env = {0};
	f->dev = device_create(cap, DEVICE_ADDR_SYNTHETIC);
	cr_assert_not_null(f->dev);
	f->st = calloc(1, policy_pytorch.state_size);
	cr_assert_not_null(f->st);
	env.dev = f->dev;
	env.capacity = cap;
	f->next_id = 0;
	cr_assert_eq(policy_pytorch.init(f->st, conf, &env, err, sizeof err), 0, "init: %s", err);
}

static void teardown(struct pt_fixture *f)
{
	policy_pytorch.fini(f->st);
	free(f->st);
	device_destroy(f->dev);
}

static int alloc(struct pt_fixture *f, uint64_t bytes, struct alloc_result *r)
{
	struct alloc_request q = {f->next_id++, bytes, 0, 0};
	return policy_pytorch.alloc(f->st, &q, r);
}

static struct alloc_result must_alloc(struct pt_fixture *f, uint64_t bytes)
{
	struct alloc_result r;
	cr_assert_eq(alloc(f, bytes, &r), POLICY_OK, "alloc %llu failed", (unsigned long long)bytes);
	return r;
}

static void release(struct pt_fixture *f, struct alloc_result r)
{
	policy_pytorch.free(f->st, r.addr, r.block_bytes, 0);
}

struct stat_probe { const char *name; int64_t value; int found; };

static void probe(void *ctx, const char *name, int64_t value)
{
	struct stat_probe *p = ctx;
	if (!strcmp(p->name, name)) {
		p->value = value;
		p->found = 1;
	}
}

static int64_t pt_stat(struct pt_fixture *f, const char *name)
{
	struct stat_probe p = {name, 0, 0};
	policy_pytorch.stats(f->st, probe, &p);
	cr_assert(p.found, "stat %s missing", name);
	return p.value;
}

static uint64_t mallocs(struct pt_fixture *f)
{
	struct device_counters c;
	device_get_counters(f->dev, &c);
	return c.mallocs;
}

Test(pytorch, rounding_default)
{
	struct pt_fixture f;
	setup(&f, "", 0);
	cr_assert_eq(must_alloc(&f, 1).block_bytes, 512);
	cr_assert_eq(must_alloc(&f, 512).block_bytes, 512);
	cr_assert_eq(must_alloc(&f, 513).block_bytes, 1024);
	cr_assert_eq(must_alloc(&f, 1000000).block_bytes, 1000448);
	/* large requests round to 512 B too; the segment is what grows */
	cr_assert_eq(must_alloc(&f, 3 * MiB + 1).block_bytes, 3 * MiB + 512);
	teardown(&f);
}

Test(pytorch, rounding_power2_divisions_number)
{
	struct pt_fixture f;
	setup(&f, "roundup_power2_divisions:4", 0);
	/* 1200 MiB + 1: floor power 1024 MiB, step 256 MiB -> 1280 MiB */
	cr_assert_eq(must_alloc(&f, 1200 * MiB + 1).block_bytes, 1280 * MiB);
	/* powers of two stay */
	cr_assert_eq(must_alloc(&f, 64 * MiB).block_bytes, 64 * MiB);
	/* small sizes (<= 512 x divisions) keep 512 B rounding */
	cr_assert_eq(must_alloc(&f, 1500).block_bytes, 1536);
	/* 5 MiB + 1: floor 4 MiB, step 1 MiB -> 6 MiB */
	cr_assert_eq(must_alloc(&f, 5 * MiB + 1).block_bytes, 6 * MiB);
	teardown(&f);
}

Test(pytorch, rounding_power2_divisions_list)
{
	struct pt_fixture f;
	setup(&f, "roundup_power2_divisions:[256:1,512:2,>:4]", 0);
	/* 600 MiB: interval of 512 MiB -> 2 divisions: step 256 MiB -> 768 MiB */
	cr_assert_eq(must_alloc(&f, 600 * MiB).block_bytes, 768 * MiB);
	/* 1.5 GiB + 1: above -> 4 divisions: step 256 MiB -> 1792 MiB */
	cr_assert_eq(must_alloc(&f, 1536 * MiB + 1).block_bytes, 1792 * MiB);
	/* 100 MiB: 1 division -> plain 512 B rounding */
	cr_assert_eq(must_alloc(&f, 100 * MiB + 1).block_bytes, 100 * MiB + 512);
	teardown(&f);
}

Test(pytorch, pools_and_segment_sizes)
{
	struct pt_fixture f;
	setup(&f, "", 0);
	must_alloc(&f, 1000);                           /* small: 2 MiB segment */
	cr_assert_eq(device_reserved(f.dev), 2 * MiB);
	must_alloc(&f, 5 * MiB);                        /* large < 10 MiB: 20 MiB */
	cr_assert_eq(device_reserved(f.dev), 22 * MiB);
	/* >= 10 MiB and no cached fit (15 MiB left): own segment, 2 MiB granules */
	must_alloc(&f, 16 * MiB + 3);
	cr_assert_eq(device_reserved(f.dev), 40 * MiB);
	/* a second small request is carved from the same small segment */
	must_alloc(&f, 1000);
	cr_assert_eq(mallocs(&f), 3);
	cr_assert_eq(pt_stat(&f, "num_device_alloc"), 3);
	teardown(&f);
}

Test(pytorch, split_merge_and_lowest_address)
{
	struct pt_fixture f;
	setup(&f, "", 0);
	struct alloc_result a = must_alloc(&f, MiB), b = must_alloc(&f, MiB);
	cr_assert_eq(b.addr, a.addr + MiB, "the allocation takes the low end");
	cr_assert_eq(mallocs(&f), 1);
	release(&f, a);
	cr_assert_eq(pt_stat(&f, "inactive_split_bytes.all.current"), (int64_t)MiB);
	release(&f, b);
	/* merged back into one whole segment: nothing inactive-split */
	cr_assert_eq(pt_stat(&f, "inactive_split_bytes.all.current"), 0);
	cr_assert_eq(pt_stat(&f, "largest_free_block"), (int64_t)(2 * MiB));
	struct alloc_result c = must_alloc(&f, 900 * 1024);
	cr_assert_eq(c.addr, a.addr);
	/* large: 5 MiB splits a 20 MiB segment, the next 5 MiB follows it */
	struct alloc_result l1 = must_alloc(&f, 5 * MiB), l2 = must_alloc(&f, 5 * MiB);
	cr_assert_eq(l2.addr, l1.addr + 5 * MiB);
	cr_assert_eq(mallocs(&f), 2);
	/* remainder of 1 MiB or less is not split off: the whole block is counted */
	struct alloc_result w = must_alloc(&f, 19 * MiB + 600 * 1024);
	cr_assert_eq(w.block_bytes, 20 * MiB);
	cr_assert_eq(pt_stat(&f, "allocated_bytes.all.current"),
		     (int64_t)(c.block_bytes + 10 * MiB + 20 * MiB));
	teardown(&f);
}

Test(pytorch, max_split_size_rules)
{
	struct pt_fixture f;
	setup(&f, "max_split_size_mb:32", 0);
	struct alloc_result big = must_alloc(&f, 40 * MiB);
	release(&f, big);
	/* a small-ish request never takes an oversize cached block */
	struct alloc_result s = must_alloc(&f, 8 * MiB);
	cr_assert_neq(s.addr, big.addr);
	cr_assert_eq(mallocs(&f), 2);
	/* an oversize request takes it only within max_non_split_rounding (20 MiB) */
	struct alloc_result o = must_alloc(&f, 36 * MiB);
	cr_assert_eq(o.addr, big.addr);
	cr_assert_eq(o.block_bytes, 40 * MiB, "oversize blocks are not split");
	release(&f, o);
	struct alloc_result o2 = must_alloc(&f, 18 * MiB); /* < max_split: rejected */
	cr_assert_neq(o2.addr, big.addr);
	teardown(&f);
}

Test(pytorch, oom_release_and_retry)
{
	struct pt_fixture f;
	struct alloc_result r;
	setup(&f, "", 64 * MiB);
	struct alloc_result a = must_alloc(&f, 12 * MiB);
	release(&f, a);  /* cached, 12 MiB reserved */
	struct alloc_result b = must_alloc(&f, 60 * MiB);  /* needs the cache freed */
	cr_assert_eq(pt_stat(&f, "num_alloc_retries"), 1);
	cr_assert_eq(device_reserved(f.dev), 60 * MiB);
	cr_assert_eq(alloc(&f, 60 * MiB, &r), POLICY_OOM);
	cr_assert_eq(pt_stat(&f, "num_ooms"), 1);
	release(&f, b);
	teardown(&f);
}

Test(pytorch, fraction_limits_reserved)
{
	struct pt_fixture f;
	struct alloc_result r;
	setup(&f, "fraction:0.5", 100 * MiB);
	must_alloc(&f, 40 * MiB);
	cr_assert_eq(alloc(&f, 12 * MiB, &r), POLICY_OOM, "40 + 12 MiB > 50 MiB allowed");
	struct device_counters c;
	device_get_counters(f.dev, &c);
	cr_assert_eq(c.failed, 0, "a fraction refusal never reaches the driver");
	teardown(&f);
}

Test(pytorch, empty_cache_releases_whole_segments)
{
	struct pt_fixture f;
	setup(&f, "", 0);
	struct alloc_result a = must_alloc(&f, 1000), b = must_alloc(&f, 1000);
	struct alloc_result l = must_alloc(&f, 30 * MiB);
	release(&f, a);
	release(&f, l);
	policy_pytorch.control(f.st, POLICY_CTL_EMPTY_CACHE, 0);
	/* the small segment still holds b: it stays */
	cr_assert_eq(device_reserved(f.dev), 2 * MiB);
	release(&f, b);
	policy_pytorch.control(f.st, POLICY_CTL_EMPTY_CACHE, 0);
	cr_assert_eq(device_reserved(f.dev), 0);
	cr_assert_eq(pt_stat(&f, "num_device_free"), 2);
	cr_assert_eq(pt_stat(&f, "reserved_bytes.all.peak"), (int64_t)(32 * MiB));
	teardown(&f);
}

Test(pytorch, expandable_segments_map_pages)
{
	struct pt_fixture f;
	setup(&f, "expandable_segments:True", 1ull << 34);
	struct alloc_result a = must_alloc(&f, 5 * MiB);
	cr_assert_eq(device_reserved(f.dev), 20 * MiB, "one 20 MiB page");
	struct alloc_result b = must_alloc(&f, 30 * MiB);
	cr_assert_eq(b.addr, a.addr + 5 * MiB, "the segment grows in place");
	cr_assert_eq(device_reserved(f.dev), 40 * MiB);
	release(&f, a);
	release(&f, b);
	policy_pytorch.control(f.st, POLICY_CTL_EMPTY_CACHE, 0);
	cr_assert_eq(device_reserved(f.dev), 0);
	struct device_counters c;
	device_get_counters(f.dev, &c);
	cr_assert_eq(c.maps, 2);
	cr_assert_eq(c.unmaps, 1);
	teardown(&f);
}

static void expect_conf_error(const char *conf, const char *needle)
{
	char err[256] = "";
	struct sim_device *d = device_create(0, DEVICE_ADDR_SYNTHETIC);
	void *st = calloc(1, policy_pytorch.state_size);
	struct policy_env env = {d, 1ull << 30, NULL};
	cr_assert_lt(policy_pytorch.init(st, conf, &env, err, sizeof err), 0, "%s accepted", conf);
	cr_assert(strstr(err, needle), "error for '%s' was '%s'", conf, err);
	free(st);
	device_destroy(d);
}

Test(pytorch, knob_errors)
{
	expect_conf_error("foo:1", "foo");
	expect_conf_error("max_split_size_mb:10", "max_split_size_mb");
	expect_conf_error("max_split_size_mb:abc", "max_split_size_mb");
	expect_conf_error("roundup_power2_divisions:3", "roundup_power2_divisions");
	expect_conf_error("roundup_power2_divisions:[256:1,x]", "roundup_power2_divisions");
	expect_conf_error("garbage_collection_threshold:1.5", "garbage_collection_threshold");
	expect_conf_error("expandable_segments:maybe", "expandable_segments");
	expect_conf_error("backend:cudaMallocAsync", "cuda_async");
	expect_conf_error("fraction:2", "fraction");
}
