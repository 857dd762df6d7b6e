/*
 * test_steps.c: every step of a run side by side (users' question 10):
 * the engine's per-step peaks (sim_result.step_mem), the percentiles and
 * the worst step (sim/steps.h), `run --steps` and its figure, and the
 * validation against the real allocator's per-step peaks.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/engine.h"
#include "../sim/steps.h"
#include "helpers.h"

extern const struct alloc_policy policy_cuda_malloc;

/* 100 B of weights before the steps; step 0 makes 1000 B, then 3000 B
 * inside its "conv" range; step 1 makes 500 B. */
static const char *TRACE = "gpumemsim-trace 1\nS 0 step 0\nS 1 step 1\nS 2 conv\n"
			   "a 1 0x1000 100 -\n"
			   "r 10 +100 0 0\na 20 0x2000 1000 -\nf 30 0x2000 1000 -\n"
			   "r 40 +20 2 1\na 45 0x3000 3000 -\nf 50 0x3000 3000 -\n"
			   "r 120 +100 1 0\na 130 0x4000 500 -\nf 140 0x4000 500 -\nend 10 0\n";

Test(steps, engine_keeps_each_steps_peaks_and_where)
{
	char path[64], err[256] = "";
	struct sim_result r;
	th_tmpfile(path, sizeof path, "steps", TRACE);
	struct sim_options o = {.trace_path = path, .policy = &policy_cuda_malloc};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.nsteps, 2);
	cr_assert_not_null(r.step_mem);
	const struct sim_step_mem *a = &r.step_mem[0], *b = &r.step_mem[1];
	cr_assert_str_eq(a->name, "step 0");
	cr_assert_str_eq(b->name, "step 1");
	/* the weights count in every step: the level it starts from */
	cr_assert_eq(a->peak_allocated, 3100);
	cr_assert_eq(b->peak_allocated, 600);
	cr_assert_eq(a->peak_reserved, 3100);
	cr_assert_eq(a->reserved_start, 100);
	cr_assert_eq(a->reserved_end, 100);
	cr_assert_eq(a->device_allocs, 2);
	cr_assert_eq(a->device_frees, 2);
	cr_assert_eq(b->device_allocs, 1);
	cr_assert_str_eq(a->at, "conv", "the innermost range at the step's peak");
	cr_assert_str_eq(b->at, "step 1");
	cr_assert_eq(a->t, 9);
	sim_result_free(&r);
	unlink(path);
}

/* A step whose range came late (a nested range began before it with no
 * range open, as a capture writes a range that outlasted its reorder
 * hold) is flagged and taken to have begun with that nested range: its
 * memory from there is its own. The next, recorded on time, is not. */
Test(steps, a_step_recorded_late_is_flagged)
{
	char path[64], err[256] = "";
	struct sim_result r;
	th_tmpfile(path, sizeof path, "steps", "gpumemsim-trace 1\nS 0 step 0\nS 1 step 1\nS 2 forward\n"
		   "r 5 +10 2 1\na 6 0x1000 5000 -\nf 8 0x1000 5000 -\n"
		   "r 20 +10 0 0\na 22 0x2000 100 -\nf 24 0x2000 100 -\n"
		   "r 40 +10 1 0\nr 41 +5 2 1\na 42 0x3000 100 -\nf 43 0x3000 100 -\nend 10 0\n");
	struct sim_options o = {.trace_path = path, .policy = &policy_cuda_malloc};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.nsteps, 2);
	cr_assert_eq(r.step_mem[0].late, 1);
	cr_assert_eq(r.step_mem[0].peak_allocated, 5000, "the 5000 B made in its forward are in it");
	cr_assert_eq(r.step_mem[0].t, 0, "it began with the forward range");
	cr_assert_eq(r.step_mem[0].device_allocs, 2);
	cr_assert_str_eq(r.step_mem[0].at, "forward");
	cr_assert_eq(r.step_mem[1].late, 0);
	cr_assert_eq(r.step_mem[1].peak_allocated, 100);
	sim_result_free(&r);
	unlink(path);
}

/* Nearest rank: each percentile is a value some step had. */
Test(steps, percentiles_and_the_worst_step)
{
	struct sim_step_mem m[5];
	uint64_t ns[5] = {50, 10, 30, 20, 40};
	uint64_t alloc[5] = {900, 100, 500, 500, 300};
	uint64_t res[5] = {950, 150, 520, 600, 300};
	memset(m, 0, sizeof m);
	for (int i = 0; i < 5; i++) {
		snprintf(m[i].name, sizeof m[i].name, "step %d", i);
		m[i].peak_allocated = alloc[i];
		m[i].peak_reserved = res[i];
	}
	struct sim_result r;
	memset(&r, 0, sizeof r);
	r.step_mem = m;
	r.step_ns = ns;
	r.nsteps = 5;
	struct sim_steps_summary s;
	cr_assert_eq(sim_steps_summarise(&r, 0, &s), 0);
	cr_assert_eq(s.n, 5);
	cr_assert_eq(s.allocated[SIM_P50], 500);
	cr_assert_eq(s.allocated[SIM_P90], 900);
	cr_assert_eq(s.allocated[SIM_PMAX], 900);
	cr_assert_eq(s.time_ns[SIM_P50], 30);
	cr_assert_eq(s.worst, 0);
	cr_assert_eq(s.slowest, 0);
	/* the first left out: steps 1-4; two share the highest allocated,
	 * the one that reserved more is the worst */
	cr_assert_eq(sim_steps_summarise(&r, 1, &s), 0);
	cr_assert_eq(s.from, 1);
	cr_assert_eq(s.n, 4);
	cr_assert_eq(s.allocated[SIM_P50], 300);
	cr_assert_eq(s.allocated[SIM_P99], 500);
	cr_assert_eq(s.worst, 3);
	cr_assert_eq(s.slowest, 4);
	cr_assert_eq(sim_steps_summarise(&r, 5, &s), -1);
	r.step_mem = NULL; /* a sweep's result keeps none */
	cr_assert_eq(sim_steps_summarise(&r, 0, &s), -1);
}

Test(steps, run_prints_the_steps_and_the_worst)
{
	char path[64], cmd[512], out[1 << 14];
	th_tmpfile(path, sizeof path, "steps", TRACE);
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --steps", th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "worst step       step 0: peak allocated 3.03 KiB (5.17x the median "
			      "step's) at conv"), "%s", out);
	cr_assert(strstr(out, "percentiles over 2 step(s)"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --steps --steps-skip 1 --json",
		 th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"peak_allocated\":{\"p50\":600,\"p90\":600,\"p99\":600,\"max\":600}"),
		  "%s", out);
	cr_assert(strstr(out, "\"worst\":\"step 1\""), "%s", out);
	cr_assert(strstr(out, "\"peak_at\":\"conv\""), "%s", out);
	/* run_id stays the last field */
	cr_assert(strstr(out, "\"run_id\":null}"), "%s", out);
	/* without --steps the JSON is as it was */
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --json", th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_null(strstr(out, "\"steps\":{"), "%s", out);
	/* usage errors name the option */
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --steps-skip x", th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	cr_assert(strstr(out, "--steps-skip 'x'"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --steps-figure f.txt", th_bin(),
		 path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	cr_assert(strstr(out, ".png or .svg"), "%s", out);
	/* a figure that cannot be written fails before the replay prints anything */
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --steps-figure "
		 "/nonexistent/dir/x.png", th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, "--steps-figure /nonexistent/dir/x.png"), "%s", out);
	cr_assert_null(strstr(out, "peak allocated"), "%s", out);
	unlink(path);
}

Test(steps, figure_names_the_worst_step)
{
	if (!th_have("gnuplot"))
		cr_skip_test("no gnuplot");
	char path[64], dir[64], cmd[512], out[4096];
	th_tmpfile(path, sizeof path, "steps", TRACE);
	th_tmpname(dir, sizeof dir, "stepsfig");
	unlink(dir);
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --steps-figure %s.png "
		 "--steps-figure-data %s", th_bin(), path, dir, dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	char p[128];
	snprintf(p, sizeof p, "%s.png", dir);
	cr_assert_gt(th_file_size(p), 1000, "%s", out);
	snprintf(p, sizeof p, "%s/figure.gp", dir);
	char *gp = th_slurp(p);
	cr_assert(gp && strstr(gp, "worst: step 0, 3.03 KiB allocated at conv"), "%s", gp ? gp : "");
	free(gp);
	cr_assert_eq(th_sh("rm -rf %s %s.png", dir, dir), 0);
	unlink(path);
}

/* The multi-scale captures against the real allocator's own per-step peaks
 * (traces/torch/multiscale; docs/steps.md), as documented. */
Test(steps, multiscale_steps_stay_as_documented, .timeout = 120)
{
	const char *san = getenv("GPUMEMSIM_SAN");
	if (san && *san)
		cr_skip_test("sanitizer build");
	if (!th_have("jq"))
		cr_skip_test("no jq");
	char cmd[256], out[1 << 14];
	snprintf(cmd, sizeof cmd, "scripts/steps_accuracy.sh %s", th_bin());
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "per-step peak allocated: 32 steps, |error| median 0.0%, max 0.1%"), "%s",
		  out);
	cr_assert(strstr(out, "per-step peak reserved: 32 steps, |error| median 0.0%, max 2.8%"), "%s",
		  out);
	cr_assert(strstr(out, "| densenet121 | 32 | step 0 (late) | 160 | 3.18 GiB | 3.18 GiB | 0% |"),
		  "%s", out);
	cr_assert(strstr(out, "| resnet50 | 32 | step 4 | 320 | 10.02 GiB | 10.02 GiB | 0% |"), "%s", out);
}
