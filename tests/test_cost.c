/*
 * test_cost.c: the timing model (device/cost.c and the engine's use of it):
 * the fit from synthetic cudaMalloc/cudaFree records, knob parsing, the
 * exact prediction for cuda_malloc on a trace without API records, the
 * remove-then-re-add round trip, and step times; the waits recorded
 * for GPU work launched before a call but recorded after it (the fitter's
 * free waits, the engine's sync waits).
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../device/cost.h"
#include "../sim/engine.h"
#include "helpers.h"

extern const struct alloc_policy policy_cuda_malloc;

static void run_timed(const char *path, const struct cost_model *m, struct sim_result *r)
{
	char err[512] = "";
	struct sim_options o = {.trace_path = path, .policy = &policy_cuda_malloc, .cost = m};
	cr_assert_eq(sim_run(&o, r, err, sizeof err), 0, "%s", err);
}

Test(cost, api_kinds)
{
	cr_assert_eq(cost_api_kind("cudaMalloc"), COST_API_MALLOC);
	cr_assert_eq(cost_api_kind("cudaFree"), COST_API_FREE);
	cr_assert_eq(cost_api_kind("cuMemMap"), COST_API_MEM);
	cr_assert_eq(cost_api_kind("cudaLaunchKernel"), COST_API_OTHER);
	cr_assert_eq(cost_api_kind(NULL), COST_API_OTHER);
}

Test(cost, knobs_parse_and_bad_knob_is_named)
{
	struct cost_model m;
	char err[256] = "";
	cost_defaults(&m);
	cr_assert_eq(cost_parse(&m, "malloc_us=10,free_us:2.5,free_sync=0,hit_us=0", err, sizeof err), 0, "%s", err);
	cr_assert_float_eq(m.malloc_c.small_ns, 10000, 1e-6);
	cr_assert_float_eq(m.free_c.small_ns, 2500, 1e-6);
	cr_assert_eq(m.free_sync, 0);
	cr_assert_float_eq(m.hit_ns, 0, 1e-9);
	cr_assert_eq(cost_parse(&m, "malloc_ms=1", err, sizeof err), -1);
	cr_assert(strstr(err, "malloc_ms"), "%s", err);
	cr_assert_eq(cost_parse(&m, "free_sync=2", err, sizeof err), -1);
	cr_assert(strstr(err, "free_sync"), "%s", err);
	cr_assert_eq(m.calibrate, 0, "off by default");
	cr_assert_eq(cost_parse(&m, "calibrate=1", err, sizeof err), 0, "%s", err);
	cr_assert_eq(m.calibrate, 1);
	cr_assert_eq(cost_parse(&m, "calibrate=yes", err, sizeof err), -1);
	cr_assert(strstr(err, "calibrate") && strstr(err, "not 0 or 1"), "%s", err);
	/* the expandable-segment and pool costs (docs/timing.md, "What an
	 * allocator setting costs") */
	cr_assert_eq(cost_parse(&m, "map_page_us=10,unmap_page_us=20,unmap_us_per_mib=0.5,pool_alloc_us=3,"
				"pool_free_us=2,pool_grow_us=40,pool_grow_us_per_mib=1,pool_trim_us=50,"
				"pool_trim_us_per_mib=2", err, sizeof err), 0, "%s", err);
	cr_assert_float_eq(m.map_page_ns, 10000, 1e-6);
	cr_assert_float_eq(m.unmap_page_ns, 20000, 1e-6);
	cr_assert_float_eq(m.unmap_ns_per_mib, 500, 1e-6);
	cr_assert_float_eq(m.pool_alloc_ns, 3000, 1e-6);
	cr_assert_float_eq(m.pool_free_ns, 2000, 1e-6);
	cr_assert_float_eq(m.pool_grow_ns + m.pool_grow_ns_per_mib, 41000, 1e-6);
	cr_assert_float_eq(m.pool_trim_ns + m.pool_trim_ns_per_mib, 52000, 1e-6);
	cr_assert_eq(cost_parse(&m, "pool_alloc_us=-1", err, sizeof err), -1);
	cr_assert(strstr(err, "pool_alloc_us"), "%s", err);
}

/* Small mallocs take 5 us, large ones 100 us + 10 us/MiB, frees 3 us of
 * their own plus the wait for a kernel queued just before them. */
Test(cost, fit_from_api_records)
{
	struct th_sbuf b = {0};
	char path[64], err[256];
	uint64_t t = 1000, corr = 1;
	th_sb_printf(&b, "gpumemsim-trace 1\nS 0 cudaMalloc\nS 1 cudaFree\n");
	for (int i = 0; i < 40; i++) {
		uint64_t bytes = i % 2 ? 4096 : (uint64_t)(1 + i % 8) << 20;
		uint64_t md = bytes < COST_SMALL_LIMIT ? 5000 : 100000 + 10000 * (bytes >> 20);
		th_sb_printf(&b, "p %lu %lu 0 %lu\n", t, t + md, corr);
		th_sb_printf(&b, "a %lu 0x%lx %lu - 3 0 %lu -\n", t + 1, 0x10000000ul * (i + 1), bytes, corr);
		corr++;
		t += md + 100;
		th_sb_printf(&b, "k %lu %lu 7 0 1,1,1 1,1,1 0 0 0\n", t, t + 2000);
		th_sb_printf(&b, "p %lu %lu 1 %lu\n", t + 10, t + 2000 + 3000, corr);
		th_sb_printf(&b, "f %lu 0x%lx %lu - 3 0 %lu -\n", t + 11, 0x10000000ul * (i + 1), bytes, corr);
		corr++;
		t += 6000;
	}
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "cost", b.s);
	struct cost_model m;
	cr_assert_eq(cost_fit_trace(path, NULL, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(m.n_malloc, 40);
	cr_assert_eq(m.n_free, 40);
	cr_assert_float_eq(m.malloc_c.small_ns, 5000, 1e-6);
	cr_assert_float_eq(m.malloc_c.large_ns, 100000, 1.0);
	cr_assert_float_eq(m.malloc_c.large_ns_per_mib, 10000, 1.0);
	/* the free waited 1990 ns for the kernel: only 3000 are its own */
	cr_assert_float_eq(m.free_c.small_ns, 3000, 1e-6);
	cr_assert_float_eq(m.free_c.large_ns, 3000, 1.0);
	cr_assert_float_eq(m.free_c.large_ns_per_mib, 0, 1.0);
	/* knobs apply over the fit */
	cr_assert_eq(cost_fit_trace(path, "hit_us=2", &m, err, sizeof err), 0, "%s", err);
	cr_assert_float_eq(m.hit_ns, 2000, 1e-6);
	unlink(path);
	free(b.s);
}

Test(cost, defaults_without_api_records)
{
	char path[64], err[256];
	th_tmpfile(path, sizeof path, "cost",
		   "gpumemsim-trace 1\na 10 0x1000 4096 -\nf 20 0x1000 4096 -\nend 2 0\n");
	struct cost_model m, d;
	cost_defaults(&d);
	cr_assert_eq(cost_fit_trace(path, NULL, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(m.n_malloc, 0);
	cr_assert_float_eq(m.malloc_c.small_ns, d.malloc_c.small_ns, 1e-9);
	cr_assert_float_eq(m.free_c.large_ns, d.free_c.large_ns, 1e-9);
	unlink(path);
}

/* No API records: each iteration is alloc, a kernel, then the free that
 * waits for it. Predicted = recorded compute + n * (malloc + free + wait). */
Test(cost, cuda_malloc_prediction_is_exact)
{
	const uint64_t n = 10, G = 1000, K = 500, M = 10000, F = 5000;
	struct th_sbuf b = {0};
	char path[64], err[256];
	th_sb_printf(&b, "gpumemsim-trace 1\nS 0 kern\n");
	for (uint64_t i = 0; i < n; i++) {
		th_sb_printf(&b, "a %lu 0x%lx 4096 -\n", i * G, 0x1000 * (i + 1));
		th_sb_printf(&b, "k %lu %lu 7 0 1,1,1 1,1,1 0 0 0\n", i * G + 10, i * G + 10 + K);
		th_sb_printf(&b, "f %lu 0x%lx 4096 -\n", i * G + 20, 0x1000 * (i + 1));
	}
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "cost", b.s);
	struct cost_model m;
	cost_defaults(&m);
	cr_assert_eq(cost_parse(&m, "malloc_us=10,free_us=5,hit_us=0", err, sizeof err), 0, "%s", err);
	struct sim_result r;
	run_timed(path, &m, &r);
	uint64_t compute = (n - 1) * G + 20;
	cr_assert_eq(r.sim_duration_ns, compute + n * (M + F + (K - 10)),
		     "got %lu", (unsigned long)r.sim_duration_ns);
	cr_assert_eq(r.mem_api_ns, n * (M + F));
	cr_assert_eq(r.mem_wait_ns, n * (K - 10));
	cr_assert_eq(r.timed, 1);
	sim_result_free(&r);
	/* without a model the replay keeps the recorded times */
	struct sim_options o = {.trace_path = path, .policy = &policy_cuda_malloc};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.sim_duration_ns, (n - 1) * G + 10 + K);
	cr_assert_eq(r.timed, 0);
	sim_result_free(&r);
	unlink(path);
	free(b.s);
}

/* A no-caching capture: cudaMalloc/cudaFree records whose durations are
 * the API cost (and, for the free, the wait for the kernel). Removing them
 * and re-adding cuda_malloc's fitted costs gives the recorded timeline
 * back; steps come from 'x step' records. */
Test(cost, round_trip_and_steps)
{
	const uint64_t M = 7000, F = 4000, K = 30000, gap = 2000;
	struct th_sbuf b = {0};
	char path[64], err[256];
	uint64_t t = 100, corr = 1;
	th_sb_printf(&b, "gpumemsim-trace 1\nS 0 cudaMalloc\nS 1 cudaFree\nS 2 kern\n");
	for (int step = 0; step < 4; step++) {
		th_sb_printf(&b, "x %lu step %d\n", t, step);
		for (int i = 0; i < 5; i++) {
			uint64_t addr = 0x100000ul * (uint64_t)(step * 8 + i + 1);
			th_sb_printf(&b, "p %lu %lu 0 %lu\n", t, t + M, corr);
			th_sb_printf(&b, "a %lu 0x%lx 65536 - 3 0 %lu -\n", t + M / 2, addr, corr);
			corr++;
			t += M + 10;
			th_sb_printf(&b, "k %lu %lu 7 2 1,1,1 1,1,1 0 0 0\n", t, t + K);
			t += gap;
			/* the free waits for the kernel, then does its own work */
			uint64_t kend = t - gap + K;
			th_sb_printf(&b, "p %lu %lu 1 %lu\n", t, kend + F, corr);
			th_sb_printf(&b, "f %lu 0x%lx 65536 - 3 0 %lu -\n", t + 1, addr, corr);
			corr++;
			t = kend + F + gap;
		}
	}
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "cost", b.s);
	struct cost_model m;
	cr_assert_eq(cost_fit_trace(path, "hit_us=0", &m, err, sizeof err), 0, "%s", err);
	cr_assert_float_eq(m.malloc_c.small_ns, M, 1e-6);
	cr_assert_float_eq(m.free_c.small_ns, F, 1e-6);
	struct sim_result r;
	run_timed(path, &m, &r);
	double rel = ((double)r.sim_duration_ns - (double)r.trace_duration_ns) / (double)r.trace_duration_ns;
	cr_assert(rel < 0.01 && rel > -0.01, "sim %lu vs trace %lu", (unsigned long)r.sim_duration_ns,
		  (unsigned long)r.trace_duration_ns);
	cr_assert_eq(r.step_count, 4);
	cr_assert_eq(r.nsteps, 4);
	uint64_t rec_step = 5 * (M + 10 + gap + (K - gap) + F + gap) - 0;
	double srel = ((double)r.step_time_ns - (double)rec_step) / (double)rec_step;
	cr_assert(srel < 0.01 && srel > -0.01, "step %lu vs %lu", (unsigned long)r.step_time_ns,
		  (unsigned long)rec_step);
	cr_assert_gt(r.api_removed_ns, 0);
	sim_result_free(&r);
	unlink(path);
	free(b.s);
}

/* Three NVTX "step" ranges (the first ending at T + FIRST_END), a kernel in
 * each; the replay's three step times into STEPS, their mean without the
 * first into *MEAN. */
static void three_steps(const char *first_end, uint64_t steps[3], uint64_t *mean)
{
	char path[64], err[256], text[512];
	snprintf(text, sizeof text,
		 "gpumemsim-trace 1\nS 0 step\nS 1 kern\n"
		 "r 0 +%s 0 0\nk 10 +900 7 1 1,1,1 1,1,1 0 0 0\n"
		 "r 2000 +100 0 0\nk 2010 +300 7 1 1,1,1 1,1,1 0 0 0\n"
		 "r 3000 +100 0 0\nk 3010 +500 7 1 1,1,1 1,1,1 0 0 0\n"
		 "end 6 0\n", first_end);
	th_tmpfile(path, sizeof path, "cost", text);
	struct sim_options o = {.trace_path = path, .policy = &policy_cuda_malloc};
	struct sim_result r;
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.step_count, 3);
	memcpy(steps, r.step_ns, 3 * sizeof *steps);
	*mean = r.step_time_ns;
	sim_result_free(&r);
	unlink(path);
}

/* NVTX ranges named "step" delimit steps when there are no 'x step'
 * records; each lasts until its range ends and its kernel is done; the
 * mean leaves the first (warm-up) step out. */
Test(cost, nvtx_steps_exclude_warmup)
{
	uint64_t s[3], mean;
	three_steps("1000", s, &mean);
	cr_assert_eq(s[0], 1000);
	cr_assert_eq(s[1], 310);
	cr_assert_eq(s[2], 510);
	cr_assert_eq(mean, (310 + 510) / 2);
}

/* A step range whose end lies inside a later step (the capture writes a
 * range that arrived late with both ends late: step 0 in 58 of 74 H200
 * torch captures) ends only its own step, which the next step's start
 * already closed; the later step runs to its own end. */
Test(cost, step_range_ending_in_a_later_step_does_not_cut_it)
{
	uint64_t s[3], mean;
	three_steps("3005", s, &mean);
	cr_assert_eq(s[0], 2000);
	cr_assert_eq(s[1], 310);
	cr_assert_eq(s[2], 510, "the third step was cut at %lu", (unsigned long)s[2]);
}

/* GPU work is queued when its launch call returns (joined by correlation
 * id), not at its recorded start: a cudaFree after the launch waits for
 * the kernel even though the kernel's record comes later in the file. */
Test(cost, kernels_issue_at_their_launch)
{
	char path[64], err[256];
	th_tmpfile(path, sizeof path, "cost",
		   "gpumemsim-trace 1\nS 0 cudaLaunchKernel\nS 1 cudaFree\nS 2 kern\n"
		   "a 0 0x1000 4096 -\n"
		   "p 10 110 0 5\n"
		   "p 200 300 1 6\n"
		   "f 201 0x1000 4096 - 3 0 6 -\n"
		   "k 10000 10500 7 2 1,1,1 1,1,1 0 0 5\n"
		   "end 5 0\n");
	struct cost_model m;
	cost_defaults(&m);
	cr_assert_eq(cost_parse(&m, "malloc_us=0,free_us=0,hit_us=0", err, sizeof err), 0, "%s", err);
	struct sim_result r;
	run_timed(path, &m, &r);
	/* launched at 110, done at 610; the free starts at 200 */
	cr_assert_eq(r.mem_wait_ns, 410, "wait %lu", (unsigned long)r.mem_wait_ns);
	cr_assert_eq(r.sim_duration_ns, 610, "sim %lu", (unsigned long)r.sim_duration_ns);
	cr_assert_eq(r.api_removed_ns, 100);
	sim_result_free(&r);
	unlink(path);
}

/* host_scale shrinks every recorded host interval, api_overhead_us comes
 * off every kept API call; GPU durations stay as recorded. */
Test(cost, host_scale_and_api_overhead)
{
	char path[64], err[256];
	th_tmpfile(path, sizeof path, "cost",
		   "gpumemsim-trace 1\nS 0 cudaLaunchKernel\nS 1 kern\n"
		   "p 0 1000 0 1\n"
		   "k 1000 1100 7 1 1,1,1 1,1,1 0 0 1\n"
		   "p 5000 6000 0 2\n"
		   "k 6000 6100 7 1 1,1,1 1,1,1 0 0 2\n"
		   "end 4 0\n");
	struct cost_model m;
	struct sim_result r;
	cost_defaults(&m);
	run_timed(path, &m, &r);
	cr_assert_eq(r.sim_duration_ns, 6100, "sim %lu", (unsigned long)r.sim_duration_ns);
	sim_result_free(&r);
	cr_assert_eq(cost_parse(&m, "host_scale=0.5,api_overhead_us=0.2", err, sizeof err), 0, "%s", err);
	cr_assert_float_eq(m.host_scale, 0.5, 1e-12);
	cr_assert_float_eq(m.api_overhead_ns, 200, 1e-9);
	run_timed(path, &m, &r);
	/* second launch: 2500 scaled, minus two overheads, returns at 2600 */
	cr_assert_eq(r.sim_duration_ns, 2700, "sim %lu", (unsigned long)r.sim_duration_ns);
	sim_result_free(&r);
	/* a factor of 0 would make the host infinitely fast: refused by name */
	cr_assert_lt(cost_parse(&m, "host_scale=0", err, sizeof err), 0);
	cr_assert(strstr(err, "host_scale") != NULL, "%s", err);
	unlink(path);
}

/* scale_calls=0: host_scale shrinks the host's own intervals but not the
 * driver's cudaMalloc cost (the engine leaves call costs alone then). */
Test(cost, scale_calls_keeps_device_costs)
{
	struct cost_model m;
	char err[256] = "";
	cost_defaults(&m);
	cr_assert_eq(m.scale_calls, 1);
	cr_assert_eq(cost_parse(&m, "scale_calls=0,host_scale=0.5", err, sizeof err), 0, "%s", err);
	cr_assert_eq(m.scale_calls, 0);
	/* stored as fitted: the knobs never rewrite the call costs */
	cr_assert_float_eq(m.malloc_c.small_ns, 8000, 1e-6);
	cr_assert_float_eq(m.host_scale, 0.5, 1e-12);
	cr_assert_eq(cost_parse(&m, "malloc_us=10", err, sizeof err), 0, "%s", err);
	cr_assert_float_eq(m.malloc_c.small_ns, 10000, 1e-6);
	cr_assert_eq(cost_parse(&m, "scale_calls=1", err, sizeof err), 0, "%s", err);
	cr_assert_eq(m.scale_calls, 1);
	cr_assert_float_eq(m.malloc_c.small_ns, 10000, 1e-6);
	cr_assert_lt(cost_parse(&m, "scale_calls=2", err, sizeof err), 0);
	cr_assert(strstr(err, "scale_calls") != NULL, "%s", err);

	/* the replay: one small cudaMalloc (defaults: 8 us), 12 us of host
	 * gap, a launch of 1 us and its kernel */
	char path[64];
	th_tmpfile(path, sizeof path, "cost",
		   "gpumemsim-trace 1\nS 0 cudaMalloc\nS 1 cudaLaunchKernel\nS 2 kern\n"
		   "p 0 8000 0 1\n"
		   "a 1 0x1000 4096 - 3 0 1 -\n"
		   "p 20000 21000 1 2\n"
		   "k 21000 21100 7 2 1,1,1 1,1,1 0 0 2\n"
		   "end 4 0\n");
	struct sim_result r1, r0;
	cr_assert_eq(cost_fit_trace(path, "host_scale=0.5", &m, err, sizeof err), 0, "%s", err);
	run_timed(path, &m, &r1);
	cr_assert_eq(cost_fit_trace(path, "host_scale=0.5,scale_calls=0", &m, err, sizeof err), 0, "%s", err);
	run_timed(path, &m, &r0);
	/* the malloc costs 8 us instead of 4 us; everything else is alike */
	cr_assert_eq(r0.sim_duration_ns, r1.sim_duration_ns + 4000, "%lu vs %lu",
		     (unsigned long)r0.sim_duration_ns, (unsigned long)r1.sim_duration_ns);
	sim_result_free(&r1);
	sim_result_free(&r0);
	unlink(path);
}

/* A cudaFree waits for the kernel launched just before it; the kernel
 * starts after the free did (launch latency), so its record comes later in
 * the file, here even after the free's 'f'. The fit still takes the wait
 * out: by correlation id (launched before the free) or, without ids, by
 * its start inside the call. */
Test(cost, free_wait_counts_work_recorded_after_the_free)
{
	for (int ids = 0; ids < 2; ids++) {
		struct th_sbuf b = {0};
		char path[64], err[256];
		uint64_t t = 1000, corr = 1;
		th_sb_printf(&b, "gpumemsim-trace 1\nS 0 cudaLaunchKernel\nS 1 cudaFree\nS 2 kern\n");
		for (int i = 0; i < 9; i++) {
			uint64_t bytes = 4096, kc = ids ? corr : 0;
			th_sb_printf(&b, "p %lu %lu 0 %lu\n", t, t + 1000, kc);
			corr++;
			/* free from t+1100; the kernel runs t+1200..t+3200; the
			 * free's own 3000 ns follow */
			th_sb_printf(&b, "p %lu %lu 1 %lu\n", t + 1100, t + 6200, ids ? corr : 0);
			th_sb_printf(&b, "f %lu 0x%lx %lu - 3 0 %lu -\n", t + 1101, 0x1000ul * (i + 1),
				  bytes, ids ? corr : 0);
			th_sb_printf(&b, "k %lu %lu 7 2 1,1,1 1,1,1 0 0 %lu\n", t + 1200, t + 3200, kc);
			corr++;
			t += 10000;
		}
		th_sb_end(&b);
		th_tmpfile(path, sizeof path, "cost", b.s);
		struct cost_model m;
		cr_assert_eq(cost_fit_trace(path, NULL, &m, err, sizeof err), 0, "%s", err);
		cr_assert_eq(m.n_free, 9, "ids %d", ids);
		/* 5100 recorded, 2100 of it the wait for the kernel */
		cr_assert_float_eq(m.free_c.small_ns, 3000, 1e-6, "ids %d: %f", ids, m.free_c.small_ns);
		unlink(path);
		free(b.s);
	}
}

/* A sync's recorded wait for GPU work launched before it but recorded
 * after it (the host ran ahead) is a wait, not the sync's own cost: the
 * launch raises the recorded-busy watermark to its kernel's recorded end.
 * The kernel runs 1200..9500 in the trace, the sync 1100..9600 (own cost
 * 100 ns); replayed, the kernel runs from the launch's return, 1000..9300,
 * and the sync returns when it is done, not 8400 ns of "own cost" later. */
Test(cost, sync_wait_counts_work_recorded_after_the_sync)
{
	char path[64], err[256];
	th_tmpfile(path, sizeof path, "cost",
		   "gpumemsim-trace 1\nS 0 cudaLaunchKernel\nS 1 cudaDeviceSynchronize\nS 2 kern\n"
		   "p 0 1000 0 1\n"
		   "p 1100 9600 1 2\n"
		   "y 1100 9600 context - 2\n"
		   "k 1200 9500 7 2 1,1,1 1,1,1 0 0 1\n"
		   "end 4 0\n");
	struct cost_model m;
	struct sim_result r;
	cost_defaults(&m);
	cr_assert_eq(cost_parse(&m, "hit_us=0", err, sizeof err), 0, "%s", err);
	run_timed(path, &m, &r);
	cr_assert_eq(r.sim_duration_ns, 9300, "sim %lu", (unsigned long)r.sim_duration_ns);
	sim_result_free(&r);
	unlink(path);
}
