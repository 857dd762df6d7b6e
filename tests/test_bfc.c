/*
 * test_bfc.c: the BFC rules that decide memory: region growth by doubling,
 * best fit across bins, the split rule, merging, knob validation.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/policy.h"

extern const struct alloc_policy policy_bfc;

#define MIB (1ull << 20)

struct fx { struct sim_device *dev; void *st; };

static struct fx open_bfc(const char *conf)
{
	struct fx f = {device_create(64ull << 30, DEVICE_ADDR_SYNTHETIC), NULL};
	struct policy_env env = {f.dev, 64ull << 30, NULL};
	char err[256] = "";
	f.st = calloc(1, policy_bfc.state_size);
	cr_assert_eq(policy_bfc.init(f.st, conf, &env, err, sizeof err), 0, "%s", err);
	return f;
}

static void close_bfc(struct fx *f)
{
	policy_bfc.fini(f->st);
	cr_assert_eq(device_reserved(f->dev), 0);
	free(f->st);
	device_destroy(f->dev);
}

static struct alloc_result get(struct fx *f, uint64_t bytes)
{
	struct alloc_request rq = {0, bytes, 0, 0};
	struct alloc_result rs = {0, 0};
	cr_assert_eq(policy_bfc.alloc(f->st, &rq, &rs), POLICY_OK, "alloc %llu", (unsigned long long)bytes);
	return rs;
}

struct one { const char *name; int64_t v; };
static void grab(void *ctx, const char *name, int64_t v)
{
	struct one *o = ctx;
	if (!strcmp(name, o->name))
		o->v = v;
}
static int64_t stat_of(struct fx *f, const char *name)
{
	struct one o = {name, -1};
	policy_bfc.stats(f->st, grab, &o);
	return o.v;
}

Test(bfc, growth_doubles_regions)
{
	struct fx f = open_bfc("allow_growth:true,memory_limit:1GiB");
	get(&f, 1 * MIB);                       /* first region: 2 MiB */
	cr_assert_eq(stat_of(&f, "pool_bytes"), 2 * MIB);
	get(&f, 1 * MIB + MIB / 2);             /* misses: 4 MiB */
	cr_assert_eq(stat_of(&f, "pool_bytes"), 6 * MIB);
	get(&f, 3 * MIB);                       /* misses: 8 MiB */
	cr_assert_eq(stat_of(&f, "pool_bytes"), 14 * MIB);
	get(&f, 20 * MIB);                      /* 16 is too small: 32 MiB */
	cr_assert_eq(stat_of(&f, "pool_bytes"), 46 * MIB);
	get(&f, 40 * MIB);                      /* grew last time, so 32 -> 64 only now */
	cr_assert_eq(stat_of(&f, "pool_bytes"), 110 * MIB);
	cr_assert_eq(stat_of(&f, "num_regions"), 5);
	cr_assert_eq(device_reserved(f.dev), 110 * MIB);
	close_bfc(&f);
}

Test(bfc, no_growth_takes_the_whole_limit)
{
	struct fx f = open_bfc("memory_limit_mb:1000");
	get(&f, 1000);
	cr_assert_eq(stat_of(&f, "pool_bytes"), 1000 * MIB);
	cr_assert_eq(stat_of(&f, "bytes_limit"), 1000 * MIB);
	close_bfc(&f);
}

Test(bfc, default_limit_keeps_the_system_reserve)
{
	struct fx f = open_bfc("");
	cr_assert_eq(stat_of(&f, "bytes_limit"), (64ll << 30) - 1800ll * (int64_t)MIB);
	close_bfc(&f);
	f = open_bfc("preset:jax");
	cr_assert_eq(stat_of(&f, "bytes_limit"), (48ll << 30));
	close_bfc(&f);
}

Test(bfc, split_rule)
{
	struct fx f = open_bfc("allow_growth:true,memory_limit:1GiB");
	/* 1.5 MiB from a 2 MiB region: < 2x and 0.5 MiB < 128 MiB: no split */
	struct alloc_result a = get(&f, 1 * MIB + MIB / 2);
	cr_assert_eq(a.block_bytes, 2 * MIB);
	/* 300 B rounds to 512; the 4 MiB region is >= 2x: split */
	struct alloc_result b = get(&f, 300);
	cr_assert_eq(b.block_bytes, 512);
	cr_assert_eq(stat_of(&f, "bytes_in_use"), 2 * MIB + 512);
	close_bfc(&f);
	/* big leftover: 600 MiB from 1 GiB is < 2x but leaves >= 128 MiB */
	f = open_bfc("memory_limit:1GiB");
	struct alloc_result c = get(&f, 600 * MIB);
	cr_assert_eq(c.block_bytes, 600 * MIB);
	close_bfc(&f);
	/* with fragmentation_fraction 0.5 the limit is 512 MiB: no split */
	f = open_bfc("memory_limit:1GiB,fragmentation_fraction:0.5");
	c = get(&f, 600 * MIB);
	cr_assert_eq(c.block_bytes, 1024 * MIB);
	close_bfc(&f);
}

Test(bfc, best_fit_across_bins_and_merge)
{
	struct fx f = open_bfc("memory_limit:1GiB");
	struct alloc_result a = get(&f, 1 * MIB), s1 = get(&f, 1000);
	struct alloc_result c = get(&f, 4 * MIB), s2 = get(&f, 1000);
	struct alloc_result e = get(&f, 2 * MIB), s3 = get(&f, 1000);
	policy_bfc.free(f.st, a.addr, a.block_bytes, 0);
	policy_bfc.free(f.st, c.addr, c.block_bytes, 0);
	policy_bfc.free(f.st, e.addr, e.block_bytes, 0);
	/* 1.5 MiB: bin 12 holds the 1 MiB chunk (too small); best fit is the
	 * 2 MiB chunk of bin 13, not the 4 MiB one; < 2x: no split */
	struct alloc_result g = get(&f, 1 * MIB + MIB / 2);
	cr_assert_eq(g.addr, e.addr);
	cr_assert_eq(g.block_bytes, 2 * MIB);
	struct alloc_result h = get(&f, 1 * MIB);
	cr_assert_eq(h.addr, a.addr);
	/* free everything: one chunk again, the whole region */
	policy_bfc.free(f.st, g.addr, g.block_bytes, 0);
	policy_bfc.free(f.st, h.addr, h.block_bytes, 0);
	policy_bfc.free(f.st, s1.addr, s1.block_bytes, 0);
	policy_bfc.free(f.st, s2.addr, s2.block_bytes, 0);
	policy_bfc.free(f.st, s3.addr, s3.block_bytes, 0);
	cr_assert_eq(stat_of(&f, "free_chunks"), 1);
	cr_assert_eq(stat_of(&f, "largest_free_block"), 1024 * MIB);
	cr_assert_eq(stat_of(&f, "largest_free_bin"), 20);
	close_bfc(&f);
}

/* Free chunks below 16 MiB are kept per exact size, larger ones in one
 * ordered set: best fit must cross that boundary and, among equal sizes,
 * take the lowest address. */
Test(bfc, best_fit_across_the_exact_size_boundary)
{
	struct fx f = open_bfc("memory_limit:1GiB");
	struct alloc_result a = get(&f, 16 * MIB - 256), s1 = get(&f, 1000);
	struct alloc_result b = get(&f, 16 * MIB), s2 = get(&f, 1000);
	struct alloc_result c = get(&f, 16 * MIB + 256), s3 = get(&f, 1000);
	struct alloc_result d = get(&f, 8 * MIB), s4 = get(&f, 1000);
	struct alloc_result e = get(&f, 8 * MIB), s5 = get(&f, 1000);
	struct alloc_result *freed[] = {&e, &c, &a, &d, &b};
	for (int i = 0; i < 5; i++)
		policy_bfc.free(f.st, freed[i]->addr, freed[i]->block_bytes, 0);
	cr_assert_eq(stat_of(&f, "free_chunks"), 6, "five holes and the tail");
	struct alloc_result g = get(&f, 8 * MIB);
	cr_assert_eq(g.addr, d.addr, "equal sizes: the lowest address");
	g = get(&f, 8 * MIB - 100);
	cr_assert_eq(g.addr, e.addr);
	g = get(&f, 16 * MIB - 300);
	cr_assert_eq(g.addr, a.addr, "the exact size below 16 MiB");
	g = get(&f, 16 * MIB - 300);
	cr_assert_eq(g.addr, b.addr, "none left below 16 MiB: the next size up");
	cr_assert_eq(g.block_bytes, 16 * MIB, "< 2x and a small leftover: no split");
	g = get(&f, 16 * MIB + 1);
	cr_assert_eq(g.addr, c.addr);
	cr_assert_eq(g.block_bytes, 16 * MIB + 256);
	cr_assert_eq(stat_of(&f, "free_chunks"), 1);
	struct alloc_result *spacers[] = {&s1, &s2, &s3, &s4, &s5};
	for (int i = 0; i < 5; i++)
		policy_bfc.free(f.st, spacers[i]->addr, spacers[i]->block_bytes, 0);
	cr_assert_eq(stat_of(&f, "largest_free_block"), 1024 * MIB - 64 * MIB - 4096,
		     "the tail after the live blocks, merged with the last spacer");
	close_bfc(&f);
}

Test(bfc, garbage_collection_frees_idle_regions)
{
	struct fx f = open_bfc("allow_growth:true,memory_limit:10MiB,garbage_collection:true");
	struct alloc_result a = get(&f, 2 * MIB);   /* region 2 MiB */
	struct alloc_result b = get(&f, 4 * MIB);   /* region 4 MiB */
	policy_bfc.free(f.st, a.addr, a.block_bytes, 0);
	policy_bfc.free(f.st, b.addr, b.block_bytes, 0);
	/* 8 MiB: room left is 4 MiB; GC frees both idle regions, then fits */
	struct alloc_result c = get(&f, 8 * MIB);
	cr_assert_eq(c.block_bytes, 8 * MIB);
	cr_assert_eq(stat_of(&f, "num_garbage_collections"), 1);
	close_bfc(&f);
	f = open_bfc("allow_growth:true,memory_limit:10MiB,garbage_collection:false");
	a = get(&f, 2 * MIB);
	b = get(&f, 4 * MIB);
	policy_bfc.free(f.st, a.addr, a.block_bytes, 0);
	policy_bfc.free(f.st, b.addr, b.block_bytes, 0);
	struct alloc_request rq = {0, 8 * MIB, 0, 0};
	cr_assert_eq(policy_bfc.alloc(f.st, &rq, &c), POLICY_OOM);
	close_bfc(&f);
}

Test(bfc, bad_knobs_are_named)
{
	struct sim_device *dev = device_create(1ull << 30, DEVICE_ADDR_SYNTHETIC);
	struct policy_env env = {dev, 1ull << 30, NULL};
	void *st = calloc(1, policy_bfc.state_size);
	char err[256];
	const char *bad[] = {"allow_growth:maybe", "preset:pytorch", "memory_limit:lots",
			     "per_process_gpu_memory_fraction:2", "memory_limit_mb:-3"};
	const char *name[] = {"allow_growth", "preset", "memory_limit",
			      "per_process_gpu_memory_fraction", "memory_limit_mb"};
	for (int i = 0; i < 5; i++) {
		err[0] = '\0';
		cr_assert_eq(policy_bfc.init(st, bad[i], &env, err, sizeof err), -1, "%s", bad[i]);
		cr_assert(strstr(err, name[i]), "'%s' -> '%s'", bad[i], err);
	}
	free(st);
	device_destroy(dev);
}
