/*
 * test_timing.c: the timeline model (device/timeline.c, sim/timing.c,
 * sim/timing_merge.c; docs/timing.md "Timeline model"): the shipped cost
 * table and its parser, the setup from a trace's header (capture mode,
 * capture_overhead, GPU and driver, workload), the trace's own calls
 * preferred over the table, the capture's share and per-record costs
 * taken off the host, launch latency, gpu_scale, and `run --requests`.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../device/cost.h"
#include "../sim/engine.h"
#include "../sim/timing.h"
#include "helpers.h"

extern const struct alloc_policy policy_cuda_malloc;
extern const struct alloc_policy policy_pytorch;

/* An H200 capture header (driver 580), capture mode callbacks, torch. */
static void h200_header(struct th_sbuf *b, const char *extra_label)
{
	th_sb_printf(b, "gpumemsim-trace 1\nH producer gpumemsim-capture\nH gpu NVIDIA H200\n"
		     "H driver 580.159.04\nL workload=torch\nL capture_api=callbacks\n");
	if (extra_label)
		th_sb_printf(b, "L %s\n", extra_label);
}

static void fit(const char *path, const char *knobs, struct cost_model *m)
{
	char err[512] = "";
	cr_assert_eq(cost_fit_trace(path, knobs, m, err, sizeof err), 0, "%s", err);
}

static uint64_t step_ns(const char *path, const struct alloc_policy *pol, const struct cost_model *m)
{
	char err[512] = "";
	struct sim_result r;
	struct sim_options o = {.trace_path = path, .policy = pol, .cost = m};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	uint64_t s = r.step_time_ns;
	sim_result_free(&r);
	return s;
}

/* The table compiled in is the shipped data file, byte for byte. */
Test(timing, builtin_table_is_the_data_file)
{
	const char *name = NULL;
	const char *t = cost_table_builtin("NVIDIA H200", "580.159.04", &name);
	cr_assert_not_null(t);
	cr_assert_str_eq(name, "h200-580");
	char *f = th_slurp("traces/timing/cost/h200-580.tsv");
	cr_assert_not_null(f, "traces/timing/cost/h200-580.tsv: unreadable");
	cr_assert_str_eq(t, f, "device/timeline.c's copy differs from the data file: regenerate it");
	free(f);
	cr_assert_null(cost_table_builtin("NVIDIA A100", "580.159.04", NULL));
	cr_assert_null(cost_table_builtin("NVIDIA H200", "550.1", NULL));
	cr_assert_null(cost_table_builtin(NULL, NULL, NULL));
}

/* The caching allocator's cost per call compiled in (COST_HIT_NS) is the
 * one measured in traces/timing/caching_cost/runs, as the table prints it. */
Test(timing, hit_cost_is_the_measured_one)
{
	char out[8192], want[128];
	cr_assert_eq(th_capture("scripts/caching_cost_table.sh", out, sizeof out), 0, "%s", out);
	snprintf(want, sizeof want, "mean %.2f us", COST_HIT_NS / 1000.0);
	cr_assert(strstr(out, want), "COST_HIT_NS is not the measured mean ('%s'):\n%s", want, out);
	cr_assert(strstr(out, "| median of 16 |"), "%s", out);
	cr_assert_neq(th_capture("scripts/caching_cost_table.sh no-such-dir", out, sizeof out), 0);
}

/* caching_requests.sh writes a no-caching capture's tensors as the request
 * stream caching_cost.cpp replays: one line per a/f record, every free
 * naming an earlier allocation, once. */
Test(timing, caching_requests_keep_every_request)
{
	char out[256];
	cr_assert_eq(th_capture("traces/timing/caching_requests.sh build/gpumemsim "
				"capture/tests/data/resnet18-nocache.trace.gz | awk '"
				"$1 == \"a\" { if ($2 in a) bad++; a[$2] = 1; na++; next } "
				"$1 == \"f\" { if (!($2 in a) || ($2 in f)) bad++; f[$2] = 1; nf++; next } "
				"{ bad++ } END { printf \"%d %d %d\\n\", na, nf, bad }'",
				out, sizeof out), 0, "%s", out);
	cr_assert_str_eq(out, "2268 1254 0\n", "allocs, frees, bad lines: %s", out);
	cr_assert_neq(th_capture("traces/timing/caching_requests.sh build/gpumemsim", out, sizeof out), 0);
}

/* The pool's cost by live allocations, as docs/timing.md's table prints it. */
Test(timing, pool_cost_table_reads_the_shipped_runs)
{
	char out[8192];
	cr_assert_eq(th_capture("scripts/pool_cost_table.sh", out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "| 0 | idle | 0.57 | 0.67 |"), "%s", out);
	cr_assert(strstr(out, "| 4096 | launch | 1.84 | 2.28 |"), "%s", out);
	cr_assert_neq(th_capture("scripts/pool_cost_table.sh no-such-dir", out, sizeof out), 0);
}

Test(timing, table_parse_and_lookup)
{
	struct cost_model m;
	char err[256] = "";
	cost_defaults(&m);
	const char *t = "# comment\n"
			"0\t1048576\t10000\t50\t7000\t50\n"
			"1048576\t2097152\t60000\t10\t-1\t0\n"
			"2097152\t4194304\t80000\t10\t50000\t10\n";
	cr_assert_eq(cost_table_parse(&m, t, "t.tsv", err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(m.table_name, "t.tsv");
	cr_assert_eq(m.malloc_c.ntab, 3);
	cr_assert_eq(cost_curve_ns(&m.malloc_c, 4096), 10000);
	cr_assert_eq(cost_curve_ns(&m.malloc_c, 1048576), 60000);
	cr_assert_eq(cost_curve_ns(&m.malloc_c, 3 << 20), 80000);
	cr_assert_eq(cost_curve_ns(&m.malloc_c, 1ull << 40), 80000); /* beyond: the last bin */
	cr_assert_eq(cost_curve_ns(&m.free_c, 1048576), 7000);      /* no samples: the bin below */
	m.malloc_c.extra_ns = 500;
	cr_assert_eq(cost_curve_ns(&m.malloc_c, 4096), 10500);
	cr_assert_eq(cost_table_parse(&m, "0 10 x\n", "bad.tsv", err, sizeof err), -1);
	cr_assert(strstr(err, "bad.tsv:1"), "%s", err);
	cr_assert_eq(cost_table_parse(&m, "10 20 1 1 1 1\n0 10 1 1 1 1\n", "o.tsv", err, sizeof err), -1);
	cr_assert(strstr(err, "out of order"), "%s", err);
	cr_assert_eq(cost_table_parse(&m, "# only\n", "e.tsv", err, sizeof err), -1);
	cr_assert_eq(cost_table_load(&m, "/nonexistent/t.tsv", err, sizeof err), -1);
	cr_assert(strstr(err, "/nonexistent/t.tsv"), "%s", err);
	/* the knob loads a file, "none" goes back to the curves */
	cr_assert_eq(cost_parse(&m, "table=traces/timing/cost/h200-580.tsv", err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(m.table_name, "h200-580.tsv");
	cr_assert_eq(cost_parse(&m, "table=none", err, sizeof err), 0, "%s", err);
	cr_assert_eq(m.malloc_c.ntab, 0);
}

/* A capture's header picks the corrections, the table and the framework
 * cost; a trace from elsewhere gets none of the capture's. */
Test(timing, setup_from_the_header)
{
	struct th_sbuf b = {0};
	char path[64];
	struct cost_model m;
	h200_header(&b, NULL);
	th_sb_printf(&b, "x 1000 step 1\n");
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "tlsetup", b.s);
	fit(path, NULL, &m);
	cr_assert_eq(m.timeline, 1);
	cr_assert_str_eq(m.cap_mode, "callbacks");
	cr_assert_str_eq(m.table_name, "h200-580");
	cr_assert_float_eq(m.host_scale, 0.70, 1e-9);
	cr_assert_eq(m.scale_calls, 0);
	cr_assert_float_eq(m.dev_call_ns, 6000, 1e-9);
	cr_assert_float_eq(m.malloc_c.extra_ns, 6000, 1e-9);
	cr_assert_float_eq(m.launch_latency_ns, 3000, 1e-9);
	/* timeline=0: the fit alone, as before the timeline model */
	fit(path, "timeline=0", &m);
	cr_assert_eq(m.timeline, 0);
	cr_assert_eq(m.malloc_c.ntab, 0);
	cr_assert_float_eq(m.host_scale, 1, 1e-9);
	cr_assert_float_eq(m.dev_call_ns, 0, 1e-9);
	unlink(path);
	free(b.s);

	/* the capture_overhead field wins over the mode's defaults */
	memset(&b, 0, sizeof b);
	h200_header(&b, "capture_overhead=share=0.5,api_ns=2000,range_ns=300");
	th_sb_printf(&b, "x 1000 step 1\n");
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "tlsetup", b.s);
	fit(path, NULL, &m);
	cr_assert_str_eq(m.cap_mode, "header");
	cr_assert_float_eq(m.host_scale, 0.5, 1e-9);
	cr_assert_float_eq(m.cap_api_ns, 2000, 1e-9);
	cr_assert_float_eq(m.cap_range_ns, 300, 1e-9);
	unlink(path);
	free(b.s);

	memset(&b, 0, sizeof b);
	h200_header(&b, "capture_overhead=bogus_ns=1");
	th_sb_printf(&b, "x 1000 step 1\n");
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "tlsetup", b.s);
	char err[256] = "";
	cr_assert_eq(cost_fit_trace(path, NULL, &m, err, sizeof err), -1);
	cr_assert(strstr(err, "bogus_ns"), "%s", err);
	unlink(path);
	free(b.s);

	/* not a capture (an import, a synthetic trace): no capture corrections */
	memset(&b, 0, sizeof b);
	th_sb_printf(&b, "gpumemsim-trace 1\nL workload=cnn\n");
	th_sb_printf(&b, "x 1000 step 1\n");
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "tlsetup", b.s);
	fit(path, NULL, &m);
	cr_assert_str_eq(m.cap_mode, "none");
	cr_assert_float_eq(m.host_scale, 1, 1e-9);
	cr_assert_float_eq(m.dev_call_ns, 0, 1e-9);
	cr_assert_eq(m.malloc_c.ntab, 0);
	unlink(path);
	free(b.s);
}

/* Bins where the capture has enough calls of its own use them. */
Test(timing, own_calls_beat_the_table)
{
	struct th_sbuf b = {0};
	char path[64];
	struct cost_model m;
	h200_header(&b, NULL);
	th_sb_printf(&b, "S 0 cudaMalloc\n");
	uint64_t t = 1000;
	for (int i = 0; i < 40; i++) {
		th_sb_printf(&b, "p %lu %lu 0 %d\n", t, t + 3000, i + 1);
		th_sb_printf(&b, "a %lu 0x%lx 4096 - 3 0 %d -\n", t + 1, 0x10000000ul * (i + 1), i + 1);
		t += 10000;
	}
	/* 5 large ones: too few, the table's bin stays */
	for (int i = 0; i < 5; i++) {
		th_sb_printf(&b, "p %lu %lu 0 %d\n", t, t + 1000, 100 + i);
		th_sb_printf(&b, "a %lu 0x%lx %lu - 3 0 %d -\n", t + 1, 0x20000000ul * (i + 1),
			  3ul << 20, 100 + i);
		t += 10000;
	}
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "tlown", b.s);
	struct cost_model tab;
	char err[256];
	cost_defaults(&tab);
	cr_assert_eq(cost_table_parse(&tab, cost_table_builtin("H200", "580.1", NULL), "x", err,
				      sizeof err), 0);
	fit(path, NULL, &m);
	cr_assert_eq(cost_curve_ns(&m.malloc_c, 4096), 3000 + 6000); /* own, + PyTorch's path */
	cr_assert_eq(cost_curve_ns(&m.malloc_c, 3ul << 20), cost_curve_ns(&tab.malloc_c, 3ul << 20) + 6000);
	unlink(path);
	free(b.s);
}

/* Launches 20 us apart on the host, kernels of 5 us: host-bound. The
 * capture's share comes off the gaps and the calls, a per-record cost off
 * the gap before each call (never below min_gap). The launches CSTEP
 * correlation ids apart; OWN: the 'p' records' own-time fields (" OWN_NS
 * OWN_CBS"), NULL for none; SYNC: each step ends in a device-wide
 * synchronisation. */
static void host_bound_steps(char *path, size_t len, const char *label, unsigned cstep,
			     const char *own, int sync)
{
	struct th_sbuf b = {0};
	h200_header(&b, label);
	th_sb_printf(&b, "S 0 cudaLaunchKernel\nS 1 kern\nS 2 step 0\nS 3 step 1\nS 4 step 2\n"
		      "S 5 tail\n%s", sync ? "S 6 cudaDeviceSynchronize\n" : "");
	uint64_t t = 1000000;
	unsigned corr = 1;
	for (int s = 0; s < 3; s++) {
		uint64_t s0 = t;
		char lines[64][160];
		int nl = 0;
		for (int i = 0; i < 10; i++) {
			uint64_t p = t + 16000; /* 16 us gap, 4 us call */
			snprintf(lines[nl++], sizeof lines[0], "p %lu %lu 0 %u%s", p, p + 4000, corr,
				 own ? own : "");
			snprintf(lines[nl++], sizeof lines[0], "k %lu %lu 7 1 1,1,1 1,1,1 0 0 %u",
				 p + 4500, p + 9500, corr);
			corr += cstep;
			t = p + 4000;
		}
		if (sync) {
			/* the step waits for its work at its end */
			snprintf(lines[nl++], sizeof lines[0], "p %lu %lu 6 %u", t + 1000, t + 8000, corr);
			snprintf(lines[nl++], sizeof lines[0], "y %lu %lu context - %u", t + 1000, t + 8000,
				 corr);
			corr += cstep;
		}
		t += 10000;
		th_sb_printf(&b, "r %lu %lu %d 0\n", s0, t, 2 + s);
		for (int i = 0; i < nl; i++)
			th_sb_printf(&b, "%s\n", lines[i]);
	}
	/* a record after the last step, so that it ends at its range's end */
	th_sb_printf(&b, "r %lu %lu 5 0\n", t + 5000, t + 6000);
	th_sb_end(&b);
	th_tmpfile(path, len, "tlhost", b.s);
	free(b.s);
}

/* The same without the synchronisations. */
static void host_bound_own(char *path, size_t len, const char *label, unsigned cstep,
			   const char *own)
{
	host_bound_steps(path, len, label, cstep, own, 0);
}

static void host_bound_corr(char *path, size_t len, const char *label, unsigned cstep)
{
	host_bound_own(path, len, label, cstep, NULL);
}

/* The same, one CUPTI correlation id a launch (no unrecorded calls). */
static void host_bound(char *path, size_t len, const char *label)
{
	host_bound_corr(path, len, label, 1);
}

Test(timing, capture_cost_comes_off_the_host)
{
	char path[64];
	struct cost_model m;
	host_bound(path, sizeof path, NULL);
	/* recorded: 10 x (16 + 4) + 10 us = 210 us a step */
	fit(path, "timeline=0", &m);
	uint64_t rec = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(rec, 210000, "%lu", rec);
	/* share 0.30: gaps and calls x 0.70; the last kernel ends 5 us + the
	 * 3 us launch latency after its launch returns */
	fit(path, NULL, &m);
	uint64_t s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * 14000 + 3000 + 5000, "%lu", s);
	/* per record: 6 us of each 16 us gap before a call (the gap
	 * closing the step is not before one), never below min_gap */
	fit(path, "host_scale=1,cap_api_us=6,launch_latency_us=0", &m);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * 14000 + 10000, "%lu", s);
	fit(path, "host_scale=1,cap_api_us=100,min_gap_us=2,launch_latency_us=0", &m);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * 6000 + 10000, "%lu", s);
	/* inside the calls */
	fit(path, "host_scale=1,cap_call_us=2,launch_latency_us=0", &m);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * 18000 + 10000, "%lu", s);
	unlink(path);
}

/* PyTorch's work around a device call (dev_call_us, and dev_call_frac of
 * its cost) is charged with each call the policy makes and taken out of
 * the recorded host gaps; where the gap in front is too short (a cudaFree
 * right after the previous call, as PyTorch's no-caching path makes them)
 * the rest comes off the next gaps, so replaying a no-caching capture
 * without caching charges and takes out the same: the step does not move
 * with the knob. */
Test(timing, device_call_cost_moves_past_a_short_gap)
{
	struct th_sbuf b = {0};
	char path[64];
	struct cost_model m;
	h200_header(&b, NULL);
	th_sb_printf(&b, "S 0 cudaMalloc\nS 1 cudaFree\nS 2 step 0\nS 3 step 1\nS 4 tail\n");
	uint64_t t = 1000000;
	unsigned corr = 1;
	for (int s = 0; s < 2; s++) {
		uint64_t s0 = t;
		th_sb_printf(&b, "r %lu %lu %d 0\n", s0, s0 + 10 * 41000 + 10000, 2 + s);
		for (int i = 0; i < 10; i++) {
			uint64_t p = t + 30000; /* 30 us gap, malloc 5 us, 1 us gap, free 5 us */
			uint64_t addr = 0x10000000ul * (uint64_t)(s * 10 + i + 1);
			th_sb_printf(&b, "p %lu %lu 0 %u\n", p, p + 5000, corr);
			th_sb_printf(&b, "a %lu 0x%lx 4096 - 3 0 %u -\n", p + 1, addr, corr);
			corr++;
			th_sb_printf(&b, "p %lu %lu 1 %u\n", p + 6000, p + 11000, corr);
			th_sb_printf(&b, "f %lu 0x%lx 4096 - 3 0 %u -\n", p + 6001, addr, corr);
			corr++;
			t = p + 11000;
		}
		t += 10000;
	}
	th_sb_printf(&b, "r %lu %lu 4 0\n", t + 5000, t + 6000);
	th_sb_end(&b);
	th_tmpfile(path, sizeof path, "tldev", b.s);
	free(b.s);
	fit(path, "host_scale=1,launch_latency_us=0,dev_call_us=0", &m);
	uint64_t base = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(base, 10 * 41000 + 10000, "%lu", base);
	fit(path, "host_scale=1,launch_latency_us=0,dev_call_us=6", &m);
	uint64_t s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, base, "%lu against %lu", s, base);
	/* in proportion to each call's cost (dev_call_frac): charged with
	 * the policy's calls, taken out of the gaps after the recorded ones */
	fit(path, "host_scale=1,launch_latency_us=0,dev_call_us=0,dev_call_frac=0.5", &m);
	cr_assert_float_eq(m.malloc_c.extra_frac, 0.5, 1e-12);
	cr_assert_eq(cost_curve_ns(&m.malloc_c, 4096), 7500); /* own calls: 5 us, + half */
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, base, "%lu against %lu", s, base);
	/* more than the gaps hold: what is left stays in the step */
	fit(path, "host_scale=1,launch_latency_us=0,dev_call_us=40", &m);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_gt(s, base, "%lu against %lu", s, base);
	unlink(path);
	char err[256] = "";
	cost_defaults(&m);
	cr_assert_lt(cost_parse(&m, "dev_call_frac=-0.1", err, sizeof err), 0);
	cr_assert(strstr(err, "dev_call_frac"), "%s", err);
}

/* Per CUPTI callback (cap_cb_us): the correlation ids between two API
 * records count the callbacks the capture took, also for the calls the
 * trace does not keep; each costs cap_cb_us off the gap before the
 * record, never below min_gap. */
Test(timing, capture_cost_per_callback)
{
	char path[64];
	struct cost_model m;
	/* 5 ids a launch: 4 calls not kept, then the launch */
	host_bound_corr(path, sizeof path, NULL, 5);
	fit(path, "host_scale=1,launch_latency_us=0", &m);
	cr_assert_float_eq(m.cap_cb_ns, 0, 1e-9); /* not in use by default */
	cr_assert_eq(step_ns(path, &policy_cuda_malloc, &m), 210000);
	fit(path, "host_scale=1,launch_latency_us=0,cap_cb_us=2", &m);
	uint64_t s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * (16000 - 5 * 2000 + 4000) + 10000, "%lu", s);
	fit(path, "host_scale=1,launch_latency_us=0,cap_cb_us=10,min_gap_us=3", &m);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * (3000 + 4000) + 10000, "%lu", s);
	unlink(path);
	/* the same from the trace's capture_overhead field */
	host_bound_corr(path, sizeof path, "capture_overhead=share=0,cb_ns=2000", 5);
	fit(path, "launch_latency_us=0", &m);
	cr_assert_float_eq(m.cap_cb_ns, 2000, 1e-9);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * (16000 - 5 * 2000 + 4000) + 10000, "%lu", s);
	unlink(path);
	/* one id a launch: one callback a gap */
	host_bound(path, sizeof path, NULL);
	fit(path, "host_scale=1,launch_latency_us=0,cap_cb_us=2", &m);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * (16000 - 2000 + 4000) + 10000, "%lu", s);
	unlink(path);
}

/* The capture's own time a trace measured ('p' own_ns) comes off the gap
 * before the call when cap_own says so (a factor), never below min_gap;
 * not by default (the fitted share already holds it). */
Test(timing, measured_own_time_comes_off_the_gap)
{
	char path[64];
	struct cost_model m;
	host_bound_own(path, sizeof path, NULL, 1, " 5000 1");
	fit(path, "host_scale=1,launch_latency_us=0", &m);
	cr_assert_float_eq(m.cap_own, 0, 1e-9);
	cr_assert_eq(step_ns(path, &policy_cuda_malloc, &m), 210000);
	fit(path, "host_scale=1,launch_latency_us=0,cap_own=1", &m);
	uint64_t s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * (16000 - 5000 + 4000) + 10000, "%lu", s);
	fit(path, "host_scale=1,launch_latency_us=0,cap_own=0.5", &m);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * (16000 - 2500 + 4000) + 10000, "%lu", s);
	fit(path, "host_scale=1,launch_latency_us=0,cap_own=10", &m);
	s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert_eq(s, 10 * (1000 + 4000) + 10000, "%lu", s);
	unlink(path);
	/* a trace without the fields: the knob changes nothing */
	host_bound(path, sizeof path, NULL);
	fit(path, "host_scale=1,launch_latency_us=0,cap_own=1", &m);
	cr_assert_eq(step_ns(path, &policy_cuda_malloc, &m), 210000);
	unlink(path);
	char err[256] = "";
	cost_defaults(&m);
	cr_assert_lt(cost_parse(&m, "cap_own=-1", err, sizeof err), 0);
	cr_assert(strstr(err, "cap_own"), "%s", err);
}

/* gpu_scale stretches every GPU duration: a GPU-bound step follows it. */
Test(timing, gpu_scale_scales_kernel_time)
{
	char path[64];
	struct cost_model m;
	host_bound(path, sizeof path, NULL);
	fit(path, "host_scale=1,launch_latency_us=0,gpu_scale=10", &m);
	uint64_t s = step_ns(path, &policy_cuda_malloc, &m);
	/* kernels of 50 us, launched every 20 us: the GPU sets the pace (the
	 * steps do not synchronise first, so the backlog grows) */
	cr_assert_geq(s, 10 * 50000, "%lu", s);
	fit(path, "host_scale=1,launch_latency_us=0", &m);
	cr_assert_eq(step_ns(path, &policy_cuda_malloc, &m), 210000);
	char err[128];
	cr_assert_eq(cost_parse(&m, "gpu_scale=0", err, sizeof err), -1);
	unlink(path);
}

/* The caching-on capture C (no requests in its steps) takes the requests
 * of the no-caching capture N, aligned by launch within each step. */
Test(timing, requests_merge_by_launch)
{
	struct th_sbuf c = {0}, n = {0};
	char cp[64], np[64], out[64];
	th_sb_printf(&c, "gpumemsim-trace 1\nL workload=torch\nS 0 cudaLaunchKernel\nS 1 kern\n"
		      "S 2 step 0\nS 3 step 1\nS 4 cudaMalloc\n");
	th_sb_printf(&n, "gpumemsim-trace 1\nL workload=torch\nS 0 cudaLaunchKernel\nS 1 kern\n"
		      "S 2 step 0\nS 3 step 1\nS 4 cudaMalloc\nS 5 cudaFree\n");
	/* C: a segment made before the steps (dropped), 2 steps x 3 launches */
	th_sb_printf(&c, "p 100 200 4 1\n");
	th_sb_printf(&c, "a 150 0x900000000 2097152 - 3 0 1 -\n");
	uint64_t t = 1000;
	unsigned corr = 10;
	for (int s = 0; s < 2; s++) {
		th_sb_printf(&c, "r %lu %lu %d 0\n", t, t + 900, 2 + s);
		for (int i = 0; i < 3; i++) {
			th_sb_printf(&c, "p %lu %lu 0 %u\n", t + 100 + 200 * i, t + 150 + 200 * i, corr);
			th_sb_printf(&c, "k %lu %lu 7 1 1,1,1 1,1,1 0 0 %u\n", t + 160 + 200 * i,
				  t + 190 + 200 * i, corr);
			corr++;
		}
		t += 1000;
	}
	th_sb_end(&c);
	/* N: in each step, alloc before the first launch, free after the second */
	t = 50000;
	corr = 10;
	for (int s = 0; s < 2; s++) {
		th_sb_printf(&n, "r %lu %lu %d 0\n", t, t + 5000, 2 + s);
		th_sb_printf(&n, "p %lu %lu 4 %u\n", t + 10, t + 60, corr);
		th_sb_printf(&n, "a %lu 0x%lx 4096 - 3 0 %u -\n", t + 20, 0x100000ul * (s + 1), corr);
		corr++;
		for (int i = 0; i < 3; i++) {
			th_sb_printf(&n, "p %lu %lu 0 %u\n", t + 100 + 1000 * i, t + 150 + 1000 * i, corr);
			corr++;
			if (i == 1) {
				th_sb_printf(&n, "p %lu %lu 5 %u\n", t + 1200, t + 1300, corr);
				th_sb_printf(&n, "f %lu 0x%lx 4096 - 3 0 %u -\n", t + 1210,
					  0x100000ul * (s + 1), corr);
				corr++;
			}
		}
		t += 10000;
	}
	th_sb_end(&n);
	th_tmpfile(cp, sizeof cp, "tlreqc", c.s);
	th_tmpfile(np, sizeof np, "tlreqn", n.s);
	th_tmpname(out, sizeof out, "tlreqo");
	char err[256] = "";
	cr_assert_eq(timing_merge_requests(cp, np, out, err, sizeof err), 0, "%s", err);
	struct trace_reader *rd = trace_reader_open(out);
	cr_assert_eq(trace_reader_status(rd), 0);
	struct trace_rec r;
	uint64_t at[4], fr[4];
	int na = 0, nf = 0;
	while (trace_reader_next(rd, &r) == TRACE_OK) {
		if (r.type == TREC_ALLOC)
			at[na++] = r.start;
		if (r.type == TREC_FREE)
			fr[nf++] = r.start;
	}
	trace_reader_close(rd);
	cr_assert_eq(na, 2); /* C's own segment is gone */
	cr_assert_eq(nf, 2);
	cr_assert_eq(at[0], 1000);      /* step 0's start in C */
	cr_assert_eq(fr[0], 1000 + 350); /* C's second launch of step 0 returned */
	cr_assert_eq(at[1], 2000);
	cr_assert_eq(fr[1], 2000 + 350);
	unlink(out);
	/* not a pair of stepped traces: an error naming the file */
	struct th_sbuf e = {0};
	th_sb_printf(&e, "gpumemsim-trace 1\n");
	th_sb_printf(&e, "x 10 step 1\n");
	th_sb_end(&e);
	char ep[64];
	th_tmpfile(ep, sizeof ep, "tlreqe", e.s);
	cr_assert_eq(timing_merge_requests(cp, ep, out, err, sizeof err), -1);
	cr_assert(strstr(err, ep), "%s", err);
	unlink(ep);
	unlink(cp);
	unlink(np);
	free(c.s);
	free(n.s);
	free(e.s);
}

/* The CLI: --requests replays the merged trace (and leaves no file). */
/* host_bound's trace with NSTEPS steps of STEP_NS appended as ranges
 * that ran with the capture paused. */
static void host_bound_paused(char *path, size_t len, int nsteps, uint64_t step)
{
	host_bound(path, len, NULL);
	/* the ranges go before the trailer, which counts them */
	char *text = th_slurp(path);
	cr_assert_not_null(text);
	char *end = strstr(text, "\nend ");
	unsigned long nrec = 0, dropped = 0;
	cr_assert(end && sscanf(end, "\nend %lu %lu", &nrec, &dropped) == 2, "%s", text);
	end[1] = '\0';
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	free(text);
	/* after host_bound's last record (its tail range ends before 2 ms) */
	uint64_t t = 2000000;
	for (int i = 0; i < nsteps; i++) {
		fprintf(f, "S %d step %d\nr %lu %lu %d 0 uncaptured\n", 6 + i, 3 + i,
			(unsigned long)t, (unsigned long)(t + step), 6 + i);
		t += step + 1000;
	}
	fprintf(f, "end %lu %lu\n", nrec + (unsigned long)nsteps, dropped);
	cr_assert_eq(fclose(f), 0);
}

/* The capture's share measured by its uncaptured steps (calibrate=1): the
 * share at which the replayed steady step is theirs. host_bound's step at
 * share s is 200 us x (1 - s) + 8 us, so 130 us steps mean s = 0.39. */
Test(timing, calibration_finds_the_share)
{
	char path[64], err[512] = "";
	struct cost_model m;
	struct timing_calibration cal;
	host_bound_paused(path, sizeof path, 3, 130000);
	/* off by default: the mode's share, the uncaptured steps only read */
	fit(path, NULL, &m);
	cr_assert_eq(timing_calibrate(path, &m, &cal, err, sizeof err), 0, "%s", err);
	cr_assert_eq(cal.measured, 0);
	cr_assert_float_eq(m.host_scale, 0.70, 1e-9);
	struct sim_result r;
	struct sim_options o = {.trace_path = path, .policy = &policy_cuda_malloc, .cost = &m};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.nsteps, 3, "the paused steps are not replayed: %zu", r.nsteps);
	cr_assert_eq(r.nuncaptured_steps, 3);
	cr_assert_eq(r.uncaptured_step_ns[2], 130000);
	sim_result_free(&r);

	fit(path, "calibrate=1", &m);
	cr_assert_eq(timing_calibrate(path, &m, &cal, err, sizeof err), 0, "%s", err);
	cr_assert_eq(cal.measured, 1);
	cr_assert_eq(cal.at_bound, 0);
	cr_assert_eq(cal.uncaptured_steps, 3);
	cr_assert_eq(cal.uncaptured_ns, 130000);
	cr_assert_float_eq(cal.mode_share, 0.30, 1e-9);
	cr_assert_float_eq(cal.share, 0.39, 0.002, "%f", cal.share);
	cr_assert_float_eq(m.host_scale, 1.0 - cal.share, 1e-12);
	cr_assert_str_eq(m.cap_mode, "measured");
	uint64_t s = step_ns(path, &policy_cuda_malloc, &m);
	cr_assert(s > 129000 && s < 131000, "%lu", (unsigned long)s);

	/* within 1% of the mode's share's step: the mode's share stays */
	host_bound_paused(path, sizeof path, 2, 148500);
	fit(path, "calibrate=1", &m);
	cr_assert_eq(timing_calibrate(path, &m, &cal, err, sizeof err), 0, "%s", err);
	cr_assert_eq(cal.measured, 1);
	cr_assert_float_eq(cal.share, 0.30, 1e-9);

	/* slower than the recorded host: the share cannot go below 0; said */
	host_bound_paused(path, sizeof path, 1, 300000);
	fit(path, "calibrate=1", &m);
	cr_assert_eq(timing_calibrate(path, &m, &cal, err, sizeof err), 0, "%s", err);
	cr_assert_eq(cal.at_bound, 1);
	cr_assert_float_eq(cal.share, 0, 1e-9);

	/* a host_scale knob is the user's: no calibration */
	fit(path, "calibrate=1,host_scale=0.5", &m);
	cr_assert_eq(timing_calibrate(path, &m, &cal, err, sizeof err), 0, "%s", err);
	cr_assert_eq(cal.measured, 0);
	cr_assert_float_eq(m.host_scale, 0.5, 1e-9);
	unlink(path);
}

/* A real capture paused at step 8 on the H200 (traces/timing/paused):
 * eight steps replayed, the five paused ones read, and the calibration
 * reaches their median. */
Test(timing, cli_paused_capture)
{
	char cmd[1024], buf[65536];
	const char *t = "traces/timing/paused/resnet18-b32-cap-caching.trace.gz";
	snprintf(cmd, sizeof cmd, "%s run %s --policy pytorch --timing --no-db --json | jq -c "
		 "'[(.steps_ns | length), (.uncaptured_steps_ns | length), .timing.calibration]'",
		 th_bin(), t);
	if (!th_have("jq"))
		cr_skip("needs jq");
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
	cr_assert_str_eq(buf, "[8,5,null]\n");
	snprintf(cmd, sizeof cmd, "%s run %s --policy pytorch --cost calibrate=1 --no-db --json | jq -r "
		 "'.timing.calibration | \"\\(.at_bound) \\(.replayed_step_ns / .uncaptured_step_ns)\"'",
		 th_bin(), t);
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
	double ratio = 0;
	cr_assert(!strncmp(buf, "false ", 6), "%s", buf);
	cr_assert_eq(sscanf(buf + 6, "%lf", &ratio), 1, "%s", buf);
	cr_assert(ratio > 0.99 && ratio < 1.01, "%s", buf);
	snprintf(cmd, sizeof cmd, "%s run %s --policy pytorch --timing --no-db", th_bin(), t);
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
	cr_assert(strstr(buf, "uncaptured steps 5,"), "%s", buf);
	/* the what-ifs see the recorded steps only */
	char out[64];
	th_tmpname(out, sizeof out, "paused_compile");
	snprintf(cmd, sizeof cmd, "%s whatif compile %s -o %s --json | jq -c .steps", th_bin(), t, out);
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
	cr_assert_str_eq(buf, "8\n");
	unlink(out);
}

Test(timing, cli_requests)
{
	const char *bin = th_bin();
	(void)bin;
	char cmd[1024], buf[8192];
	snprintf(cmd, sizeof cmd,
		 "%s run traces/timing/h200/resnet18-b32-cap-caching.trace.gz --policy cuda_malloc "
		 "--requests traces/timing/h200/resnet18-b32-cap-nocaching.trace.gz --no-db --json",
		 th_bin());
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
	cr_assert(strstr(buf, "\"timeline\": true") || strstr(buf, "\"timeline\":true"), "%s", buf);
	cr_assert(strstr(buf, "h200-580"), "%s", buf);
	snprintf(cmd, sizeof cmd,
		 "%s run traces/timing/h200/resnet18-b32-cap-caching.trace.gz --policy cuda_malloc "
		 "--requests /nonexistent.trace.gz --no-db", th_bin());
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 1, "%s", buf);
	cr_assert(strstr(buf, "--requests"), "%s", buf);
}

/* scripts/alloc_cost_table.sh on the shipped measurements
 * (traces/timing/alloc_cost; docs/timing.md "Captured without the source"):
 * a small cudaMalloc costs about 4x more with 256 allocations live than with
 * none, and torch.empty with caching stays a few microseconds. */
Test(timing, alloc_cost_table_reads_the_shipped_measurements)
{
	char out[1 << 14];
	cr_assert_eq(th_capture("scripts/alloc_cost_table.sh", out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "| size | plain | live0 | nosource | source | torch-nocaching | torch-caching |"),
		  "%s", out);
	cr_assert(strstr(out, "| 0 KiB-1 MiB | 14.7 | 3.6 | 18.3 | 20.2 | 6.0 | 2.4 |"), "%s", out);
	cr_assert(strstr(out, "| 4 GiB-8 GiB |"), "%s", out);
	cr_assert_neq(th_capture("scripts/alloc_cost_table.sh no-such-dir", out, sizeof out), 0);
	cr_assert(strstr(out, "no-such-dir"), "%s", out);
}

/* scripts/timing_hostspeed.sh on traces/timing/hostspeed (docs/timing.md,
 * "Host speed and batch size"): every pair shipped gets a row, and the
 * capture's cost on the host differs by process (1.01x to 1.90x). */
Test(timing, hostspeed_table_reads_the_shipped_runs)
{
	char out[1 << 14];
	if (!th_have("jq"))
		cr_skip_test("no jq");
	cr_assert_eq(th_capture("scripts/timing_hostspeed.sh", out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "| resnet18 | 32 | 10.4 | 8.3 | 13.2 | 11.2 | 9 | 6.4 | 1.75 |"), "%s", out);
	cr_assert(strstr(out, "| densenet121 | 32 |"), "%s", out);
	cr_assert(strstr(out, "| 1.90 |"), "%s", out);
	cr_assert(strstr(out, "| 1.01 |"), "%s", out);
	unsigned rows = 0;
	for (const char *p = out; (p = strstr(p, "\n| ")); p++)
		rows++;
	cr_assert_eq(rows, 9, "a row per pair (the header is the first line, the rule has no space): %s", out);
	cr_assert_neq(th_capture("scripts/timing_hostspeed.sh no-such-dir", out, sizeof out), 0);
	cr_assert(strstr(out, "no-such-dir"), "%s", out);
}

/* host_bound's steps, each ending in a device-wide synchronisation (as a
 * training step's torch.cuda.synchronize()). */
static void synced_steps(char *path, size_t len)
{
	host_bound_steps(path, len, NULL, 1, NULL, 1);
}

/* The GPU's busy time per step, and what bounds the replayed step
 * (docs/timing.md, "GPU-bound and host-bound"): host_bound's steps keep
 * the GPU busy 50 us of 148 us; with every kernel 20 times longer they
 * keep it busy the whole step but its first launch. `run` says which. */
Test(timing, gpu_busy_and_what_bounds_the_step)
{
	char path[64], err[512] = "";
	struct cost_model m;
	struct sim_result r;
	host_bound(path, sizeof path, NULL);
	fit(path, NULL, &m);
	struct sim_options o = {.trace_path = path, .policy = &policy_cuda_malloc, .cost = &m};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.nsteps, 3);
	for (size_t i = 0; i < r.nsteps; i++)
		cr_assert_eq(r.step_gpu_ns[i], 10 * 5000, "step %zu: %lu", i, r.step_gpu_ns[i]);
	cr_assert_eq(r.step_time_ns, 148000);
	cr_assert_float_eq(r.gpu_busy_fraction, 50000.0 / 148000.0, 1e-9);
	sim_result_free(&r);

	/* kernels 20 times longer, and each step waits for them at its end:
	 * the GPU is busy but for the step's first launch and latency */
	char synced[64];
	synced_steps(synced, sizeof synced);
	fit(synced, "gpu_scale=20", &m);
	o.trace_path = synced;
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.nsteps, 3);
	for (size_t i = 0; i < r.nsteps; i++)
		cr_assert_eq(r.step_gpu_ns[i], 10 * 100000, "step %zu: %lu", i, r.step_gpu_ns[i]);
	cr_assert_geq(r.gpu_busy_fraction, SIM_GPU_BOUND, "%f (step %lu ns)", r.gpu_busy_fraction,
		      r.step_time_ns);
	sim_result_free(&r);

	char cmd[512], out[1 << 14];
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --timing --no-db", th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "GPU busy         0.050 ms a step, 34% of it: host-bound"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --cost gpu_scale=20 --no-db --json",
		 th_bin(), synced);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"bound\":\"gpu\""), "%s", out);
	cr_assert(strstr(out, "\"steps_gpu_busy_ns\":[1000000,1000000,1000000]"), "%s", out);
	/* without a cost model nothing is predicted, so nothing is bound */
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --json", th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_null(strstr(out, "\"bound\""), "%s", out);
	unlink(path);
	unlink(synced);
}

/* The accuracy scripts replay a whole validation set: skipped under the
 * sanitizers (the same code runs in the other tests there) and without jq. */
static void skip_unless_script_run(void)
{
	const char *san = getenv("GPUMEMSIM_SAN");
	if (san && *san)
		cr_skip_test("sanitizer build");
	if (!th_have("jq"))
		cr_skip_test("no jq");
}

/* Run the shell command FMT (with %s: the gpumemsim binary) and check that
 * it exits 0 and prints each of the NULL-terminated lines that follow: a
 * documented table stays as documented. */
static void script_prints(const char *fmt, ...)
{
	char cmd[512];
	static char out[1 << 17];
	snprintf(cmd, sizeof cmd, fmt, th_bin());
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s: %s", cmd, out);
	va_list ap;
	va_start(ap, fmt);
	for (const char *want; (want = va_arg(ap, const char *));)
		cr_assert(strstr(out, want), "%s: no '%s' in\n%s", cmd, want, out);
	va_end(ap);
}

/* The held-out model families (traces/timing/heldout; docs/timing.md,
 * "Held-out models"): the same-batch predictions of scripts/timing_paused.sh
 * stay where the README says. Skipped under the sanitizers (the script
 * replays 84 times; the sanitizer build runs the same code in the other
 * tests). */
Test(timing, heldout_models_stay_as_documented, .timeout = 300)
{
	skip_unless_script_run();
	script_prints("scripts/timing_paused.sh %s traces/timing/heldout",
		      "- mode's share, against the plain processes: median |error| 2.5%, max 23.6% (32 figures)",
		      "GPU-bound replays (GPU busy 90% or more of the step): median |error| 0.9%, max 2.6% "
		      "(10 figures)",
		      "(the plain process, the capture's paused steps): median |error| 2.3%, max 15.2% "
		      "(32 figures)",
		      NULL);
}

/* The same held-out set through scripts/timing_accuracy.sh, both directions
 * and another batch size (docs/timing.md, "Held-out models"). */
Test(timing, heldout_models_accuracy_stays_as_documented, .timeout = 300)
{
	skip_unless_script_run();
	script_prints("MODELS='vgg11 efficientnet_b0 vit_b_16 regnet_y_400mf' "
		      "scripts/timing_accuracy.sh %s traces timing/heldout",
		      "| everything | 64 | 3.4% | 35.9% | 54 of 64 |",
		      "| GPU-bound replays (GPU busy 90% or more of the step) | 20 | 1.2% | 5.9% | 20 of 20 |",
		      NULL);
}

/* Issue 15's directions on the captures with a host probe at every step,
 * scored on all steps and on the fast ones (docs/timing.md, "Fast and slow
 * host periods"), and the third and fourth hosts' tables through
 * timing_paused.sh. */
Test(timing, probed_host_tables_stay_as_documented, .timeout = 300)
{
	skip_unless_script_run();
	script_prints("scripts/timing_fasthost.sh %s",
		      "- every step: median |error| 9.8%, max 36.1% (32 figures); under 10%: 17 of 32",
		      "- fast steps: median |error| 13.7%, max 26.7% (6 figures); under 10%: 1 of 6",
		      "| pinned | regnet_y_400mf | 64 | nc->c | 10 / 2 |", NULL);
	script_prints("scripts/timing_paused.sh %s traces/timing/heldout3",
		      "- mode's share, against the plain processes: median |error| 9.0%, max 20.5% (16 figures)",
		      "(the plain process, the capture's paused steps): median |error| 6.2%, max 21.4% "
		      "(16 figures)",
		      NULL);
	script_prints("scripts/timing_paused.sh %s traces/timing/probed",
		      "- mode's share, against the plain processes: median |error| 9.8%, max 36.1% (24 figures)",
		      "GPU-bound replays (GPU busy 90% or more of the step): median |error| 1.2%, max 1.4% "
		      "(4 figures)",
		      NULL);
}

/* What an allocator setting costs in step time, predicted from one
 * no-caching capture per model against uncaptured runs under each setting
 * (docs/timing.md, "What an allocator setting costs"): the table's
 * figures, and the pool calls' cost that makes async dearer. */
Test(timing, allocator_settings_stay_as_documented, .timeout = 300)
{
	skip_unless_script_run();
	script_prints("scripts/timing_settings.sh %s",
		      "- step time, every setting: median |error| 5.0%, max 64.6% (24 figures)",
		      "| pinned | regnet_y_400mf | 64 | async | 43.9 | 44.1 | 37.8 | 46% | +15.6% | +26.7% | -14.0% |",
		      "| settings | vgg11 | 64 | async | 27.8 | - | 27.9 | 99% | +1.2% | +0.1% | +0.4% |",
		      NULL);
}

/* size_scale: a device call costs what one of size_scale times its bytes
 * costs (another batch size); 1 by default, refused outside 0.01..100. */
Test(timing, size_scale_moves_a_call_to_the_scaled_size)
{
	struct cost_model m;
	char err[256] = "";
	cost_defaults(&m);
	const char *t = "0\t1048576\t10000\t50\t7000\t50\n"
			"1048576\t2097152\t60000\t10\t40000\t10\n"
			"2097152\t4194304\t80000\t10\t50000\t10\n";
	cr_assert_eq(cost_table_parse(&m, t, "t.tsv", err, sizeof err), 0, "%s", err);
	uint64_t b = 3u << 19; /* 1.5 MiB */
	cr_assert_eq(cost_call_bytes(&m, b), b);
	cr_assert_eq(cost_curve_ns(&m.malloc_c, cost_call_bytes(&m, b)), 60000);
	cr_assert_eq(cost_parse(&m, "size_scale=2", err, sizeof err), 0, "%s", err);
	cr_assert_eq(cost_call_bytes(&m, b), 2 * b);
	cr_assert_eq(cost_curve_ns(&m.malloc_c, cost_call_bytes(&m, b)), 80000);
	cr_assert_eq(cost_curve_ns(&m.free_c, cost_call_bytes(&m, b / 4)), 7000);
	cr_assert_eq(cost_parse(&m, "size_scale=0", err, sizeof err), -1);
	cr_assert(strstr(err, "size_scale"), "%s", err);
}
