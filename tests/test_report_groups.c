/*
 * test_report_groups.c: the report groups runs by workload and model: two
 * workloads that share a model name ("r") are two groups, in every table
 * row and figure, and an OOM run is never the best setting nor counted in
 * a saving. The runs: workload a (2 x 8 MiB per batch unit) and workload b
 * (2 x 32 MiB per batch unit) at batch 8 and 16, under pytorch, pytorch
 * with a 20% memory fraction (which runs out of memory at a's batch 16
 * with the lowest peak of all) and optimal, at 1 GiB and 600 MiB.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

static char dir[64], db[128];

static void write_trace(const char *path, const char *workload, long batch, uint64_t mib)
{
	char err[256], bstr[24];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_STREAM, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	snprintf(bstr, sizeof bstr, "%ld", batch);
	struct trace_label labels[] = {{"workload", (char *)workload}, {"model", "r"},
				       {"batch", bstr}};
	struct trace_header h = {.version = 1, .producer = "test", .total_memory = 1ull << 30,
				 .labels = labels, .nlabels = 3};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	th_mem(w, TREC_ALLOC, 1000, 0x100000, mib << 20);
	th_mem(w, TREC_ALLOC, 2000000, 0x40000000, mib << 20);
	th_mem(w, TREC_FREE, 4000000, 0x100000, 0);
	th_mem(w, TREC_FREE, 5000000, 0x40000000, 0);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

static void setup(void)
{
	const char *b = th_bin();
	snprintf(dir, sizeof dir, "/tmp/gpumemsim_repgrp_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(db, sizeof db, "%s/r.db", dir);
	const char *wls[] = {"a", "b"};
	const uint64_t unit[] = {8, 32};
	for (int w = 0; w < 2; w++)
		for (long batch = 8; batch <= 16; batch *= 2) {
			char tr[160];
			snprintf(tr, sizeof tr, "%s/%s-r-b%ld.trace", dir, wls[w], batch);
			write_trace(tr, wls[w], batch, unit[w] * (uint64_t)batch);
		}
	cr_assert_eq(th_sh("%s sweep --traces %s --policies pytorch optimal --confs 'pytorch=' "
			   "'pytorch=fraction:0.2' --capacities 1GiB 600MiB --db %s -j 1 "
			   "--no-progress >/dev/null 2>&1", b, dir, db), 0);
}

static void teardown(void)
{
	if (dir[0])
		th_sh("rm -rf '%s'", dir);
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

Test(report_groups, two_workloads_one_model, .init = setup, .fini = teardown)
{
	cr_assert_eq(th_sh("%s report --db %s -o %s/rep >/dev/null 2>&1", th_bin(), db, dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/rep/report.md", dir);
	char *m = th_slurp(p);
	cr_assert_not_null(m);
	/* two groups, each with its own two traces */
	cr_assert_not_null(strstr(m, "| a r | 2 | 8, 16 | 1.00 GiB, 600.00 MiB | 3 |"), "%s", m);
	cr_assert_not_null(strstr(m, "| b r | 2 | 8, 16 | 1.00 GiB, 600.00 MiB | 3 |"), "%s", m);
	/* largest batch at 600 MiB: a fits both batches (but the fraction),
	 * b fits 8 only (2 x 512 MiB > 600 MiB): never one mixed row */
	cr_assert_not_null(strstr(m, "| a r | 600.00 MiB | the 2 settings not listed below | 16 "
				     "(every stored batch) |"), "%s", m);
	cr_assert_not_null(strstr(m, "| b r | 600.00 MiB | pytorch (default), optimal (default) | "
				     "8 | 16 | pytorch (default): capacity:"), "%s", m);
	/* best at 1 GiB for a: the fraction run's OOM peak (128 MiB at batch
	 * 16, half the floor) is the lowest of all, yet the best is pytorch's
	 * default, which ran every batch */
	cr_assert_not_null(strstr(m, "| a r | 1.00 GiB | pytorch (default) |"), "%s", m);
	cr_assert_not_null(strstr(m, "| 2 of 2 | is the policy's default |"), "%s", m);
	cr_assert_null(strstr(m, "0.500"), "the OOM run's peak over the floor: %s", m);
	/* batch figures: one per group and capacity with two batches */
	if (th_have("gnuplot")) {
		snprintf(p, sizeof p, "%s/rep/report.html", dir);
		char *h = th_slurp(p);
		cr_assert_not_null(h);
		cr_assert_null(strstr(h, "figure not drawn"));
		cr_assert_eq(count(h, "<figcaption>Peak reserved against batch size, a r, at "), 2);
		cr_assert_eq(count(h, "<figcaption>Peak reserved against batch size, b r, at "), 2);
		free(h);
	}
	/* runs.csv: one row per run (4 traces x 3 settings x 2 capacities) */
	snprintf(p, sizeof p, "%s/rep/runs.csv", dir);
	char *c = th_slurp(p);
	cr_assert_not_null(c);
	cr_assert_eq(count(c, "\n"), 1 + 24, "%s", c);
	cr_assert_eq(count(c, "\na r,a,r,"), 12, "%s", c);
	cr_assert_eq(count(c, "\nb r,b,r,"), 12, "%s", c);
	free(c);
	free(m);
}

/* The batch figure refuses to mix: two workloads of one model, or two
 * traces at one batch, are an error that says how to narrow. */
Test(report_groups, batch_figure_never_mixes, .init = setup, .fini = teardown)
{
	if (!th_have("gnuplot"))
		cr_skip_test("gnuplot not installed");
	char log[256], out[256];
	snprintf(log, sizeof log, "%s/err.txt", dir);
	snprintf(out, sizeof out, "%s/b.png", dir);
	cr_assert_eq(th_sh("%s plot batch --db %s --label model=r -o %s 2>%s", th_bin(), db, out,
			   log), 1);
	char *e = th_slurp(log);
	cr_assert(e && strstr(e, "one workload and model"), "%s", e);
	free(e);
	cr_assert_eq(th_sh("%s plot batch --db %s --label model=r --where \"json_extract(labels_json,"
			   "'$.workload')='a' AND capacity=629145600\" -o %s 2>%s", th_bin(), db, out,
			   log), 0);
	cr_assert_gt(th_file_size(out), 1000);
}
