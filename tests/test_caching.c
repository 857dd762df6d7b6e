/*
 * test_caching.c: the `caching` wrapper policy (policies/caching.c): each
 * release rule fires when it should (and only then), knobs pass through to
 * the inner policy, bad knobs are named, and with a cost model a release
 * rule costs time.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../device/cost.h"
#include "../sim/engine.h"
#include "helpers.h"

extern const struct alloc_policy policy_caching;

/* Four steps (x step records), each inside an NVTX "optimizer" range end,
 * each allocating and freeing 8 MiB then 100 MiB. */
static const char *TRACE =
	"gpumemsim-trace 1\nS 0 optimizer\nS 1 kern\n"
	"x 0 step 1\na 10 0x1000 8388608 -\nf 20 0x1000 8388608 -\n"
	"a 30 0x2000 104857600 -\nf 40 0x2000 104857600 -\nr 50 +10 0 0\n"
	"y 70 +5 context - 0\n"
	"x 100 step 2\na 110 0x1000 8388608 -\nf 120 0x1000 8388608 -\n"
	"a 130 0x2000 104857600 -\nf 140 0x2000 104857600 -\nr 150 +10 0 0\n"
	"y 170 +5 context - 0\n"
	"x 200 step 3\na 210 0x1000 8388608 -\nf 220 0x1000 8388608 -\n"
	"a 230 0x2000 104857600 -\nf 240 0x2000 104857600 -\nr 250 +10 0 0\n"
	"y 270 +5 context - 0\n"
	"x 300 step 4\na 310 0x1000 8388608 -\nf 320 0x1000 8388608 -\n"
	"a 330 0x2000 104857600 -\nf 340 0x2000 104857600 -\nr 350 +10 0 0\n"
	"y 370 +5 context - 0\n"
	"end 28 0\n";

static int64_t stat_of(const struct sim_result *r, const char *name)
{
	for (size_t i = 0; i < r->nstats; i++)
		if (!strcmp(r->stats[i].name, name))
			return r->stats[i].value;
	cr_assert_fail("no stat %s", name);
	return -1;
}

static void run(const char *conf, const struct cost_model *m, struct sim_result *r)
{
	char path[64], err[512] = "";
	th_tmpfile(path, sizeof path, "caching", TRACE);
	struct sim_options o = {.trace_path = path, .policy = &policy_caching, .conf = conf, .cost = m};
	cr_assert_eq(sim_run(&o, r, err, sizeof err), 0, "%s: %s", conf, err);
	unlink(path);
}

Test(caching, default_is_the_inner_policy)
{
	struct sim_result r;
	run("", NULL, &r);
	cr_assert_eq(stat_of(&r, "caching.empty_cache_calls"), 0);
	cr_assert_eq(r.device_frees, 0); /* pytorch keeps its cache */
	cr_assert_eq(stat_of(&r, "caching.steps"), 4);
	sim_result_free(&r);
}

/* How many times the release rules in CONF emptied the cache over TRACE. */
static int64_t releases(const char *conf)
{
	struct sim_result r;
	run(conf, NULL, &r);
	int64_t n = stat_of(&r, "caching.empty_cache_calls");
	sim_result_free(&r);
	return n;
}

Test(caching, cache_limit_fires_on_free)
{
	struct sim_result r;
	run("cache_limit:1MiB", NULL, &r);
	/* every free leaves more than 1 MiB cached */
	cr_assert_eq(stat_of(&r, "caching.empty_cache_calls"), 8);
	cr_assert_gt(r.device_frees, 0);
	sim_result_free(&r);
	cr_assert_eq(releases("cache_limit:1GiB"), 0);
}

Test(caching, every_n_steps)
{
	cr_assert_eq(releases("empty_cache_every:2"), 2);
}

Test(caching, at_nvtx_range_end)
{
	cr_assert_eq(releases("empty_cache_at:optimizer"), 4);
	cr_assert_eq(releases("empty_cache_at:forward"), 0);
}

Test(caching, release_threshold_at_sync)
{
	cr_assert_eq(releases("release_threshold:50MiB"), 4);
	cr_assert_eq(releases("release_threshold:10GiB"), 0);
}

Test(caching, inner_knobs_pass_through_and_bad_ones_are_named)
{
	struct sim_result r;
	run("inner:pytorch,expandable_segments:True", NULL, &r);
	cr_assert_eq(r.allocs, 8);
	sim_result_free(&r);

	char path[64], err[512] = "";
	th_tmpfile(path, sizeof path, "caching", TRACE);
	struct sim_options o = {.trace_path = path, .policy = &policy_caching,
				.conf = "inner:pytorch,bogus_knob:1"};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "bogus_knob"), "%s", err);
	o.conf = "inner:nosuch";
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "nosuch"), "%s", err);
	o.conf = "cache_limit:lots";
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "cache_limit"), "%s", err);
	unlink(path);
}

Test(caching, releasing_costs_time_and_saves_memory)
{
	struct cost_model m;
	struct sim_result keep, rel;
	cost_defaults(&m);
	run("", &m, &keep);
	run("cache_limit:1MiB", &m, &rel);
	cr_assert_lt(rel.peak_reserved, keep.peak_reserved + 1); /* never more memory */
	cr_assert_gt(rel.device_allocs, keep.device_allocs);
	cr_assert_gt(rel.sim_duration_ns, keep.sim_duration_ns);
	cr_assert_gt(rel.mem_api_ns, keep.mem_api_ns);
	sim_result_free(&keep);
	sim_result_free(&rel);
}
