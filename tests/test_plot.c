/*
 * test_plot.c: `gpumemsim plot` through the binary: every figure kind draws
 * a non-empty PNG or SVG from a small database made here, the data files
 * its script reads hold the expected rows, the same database gives the
 * same figure, and bad inputs fail clearly without leaving a figure.
 * Skips without GPUMEMSIM_BIN or gnuplot.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

static int count_lines(const char *text, const char *prefix)
{
	int n = 0;
	size_t lp = strlen(prefix);
	for (const char *p = text; p && *p;) {
		if (!strncmp(p, prefix, lp))
			n++;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return n;
}

static struct th_results F;
static void setup(void) { th_results_setup(&F); }
static void teardown(void) { th_results_teardown(&F); }

static void need_gnuplot(void)
{
	if (!th_have("gnuplot"))
		cr_skip_test("gnuplot not installed");
}

Test(plot, timeline_png_and_data, .init = setup, .fini = teardown)
{
	need_gnuplot();
	cr_assert_eq(th_sh("%s plot timeline --db %s --where \"trace_path LIKE '%%b16%%'\" -o %s/t.png "
			"--data-dir %s/dd", th_bin(), F.db, F.dir, F.dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/t.png", F.dir);
	cr_assert_gt(th_file_size(p), 1000);
	char *png = th_slurp(p);
	cr_assert(png && !memcmp(png, "\x89PNG", 4));
	free(png);
	snprintf(p, sizeof p, "%s/dd/timeline.dat", F.dir);
	char *d = th_slurp(p);
	cr_assert_not_null(d);
	/* four runs of the b16 trace: pytorch at two capacities, cuda_malloc, optimal */
	cr_assert_eq(count_lines(d, "# run "), 4, "%s", d);
	cr_assert_not_null(strstr(d, "pytorch (default)"));
	/* peak: two 128 MiB buffers = 0.25 GiB allocated */
	cr_assert_not_null(strstr(d, " 0.250000 "), "%s", d);
	free(d);
	snprintf(p, sizeof p, "%s/dd/oom.dat", F.dir);
	d = th_slurp(p);
	cr_assert_eq(count_lines(d, "#"), 1);
	cr_assert_eq(count_lines(d, "?"), 0, "the 200 MiB run's OOM is marked: %s", d);
	free(d);
}

Test(plot, batch_rows, .init = setup, .fini = teardown)
{
	need_gnuplot();
	cr_assert_eq(th_sh("%s plot batch --db %s --label model=m -o %s/b.svg --data-dir %s/dd",
			th_bin(), F.db, F.dir, F.dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/b.svg", F.dir);
	char *svg = th_slurp(p);
	cr_assert(svg && strstr(svg, "<svg"));
	cr_assert_not_null(strstr(svg, "batch size"));
	free(svg);
	snprintf(p, sizeof p, "%s/dd/batch.dat", F.dir);
	char *d = th_slurp(p);
	cr_assert_not_null(d);
	cr_assert_eq(count_lines(d, "# pytorch (default)"), 1, "%s", d);
	cr_assert_eq(count_lines(d, "# cuda_malloc (default)"), 1, "%s", d);
	cr_assert_eq(count_lines(d, "# optimal"), 0, "optimal is the floor, not a series");
	cr_assert_eq(count_lines(d, "8 "), 2, "%s", d);
	cr_assert_eq(count_lines(d, "16 "), 2, "one point per setting and batch: %s", d);
	free(d);
	snprintf(p, sizeof p, "%s/dd/floor.dat", F.dir);
	d = th_slurp(p);
	cr_assert(d && count_lines(d, "8 ") == 1 && count_lines(d, "16 ") == 1, "%s", d);
	free(d);
	/* the latest pytorch run at batch 16 is the OOM at 200 MiB */
	snprintf(p, sizeof p, "%s/dd/oom.dat", F.dir);
	d = th_slurp(p);
	cr_assert(d && count_lines(d, "16 ") == 1, "%s", d);
	free(d);
}

Test(plot, frag_and_compare, .init = setup, .fini = teardown)
{
	need_gnuplot();
	cr_assert_eq(th_sh("%s plot frag --db %s -o %s/f.png --data-dir %s/df", th_bin(), F.db, F.dir,
			F.dir), 0);
	cr_assert_eq(th_sh("%s plot compare --db %s --where \"trace_path LIKE '%%b8%%'\" -o %s/c.png "
			"--data-dir %s/dc", th_bin(), F.db, F.dir, F.dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/f.png", F.dir);
	cr_assert_gt(th_file_size(p), 1000);
	snprintf(p, sizeof p, "%s/c.png", F.dir);
	cr_assert_gt(th_file_size(p), 1000);
	snprintf(p, sizeof p, "%s/df/frag.dat", F.dir);
	char *d = th_slurp(p);
	/* settings: pytorch, cuda_malloc, optimal; columns: two traces */
	cr_assert(d && count_lines(d, "\"") == 3, "%s", d);
	cr_assert_not_null(strstr(d, "\"cuda_malloc (default)\" 0.0000 0.0000"), "%s", d);
	free(d);
	snprintf(p, sizeof p, "%s/dc/compare.dat", F.dir);
	d = th_slurp(p);
	cr_assert(d && count_lines(d, "1 \"") + count_lines(d, "0 \"") == 2, "%s", d);
	cr_assert_null(strstr(d, "optimal"));
	free(d);
}

Test(plot, same_db_same_figure, .init = setup, .fini = teardown)
{
	need_gnuplot();
	for (int i = 0; i < 2; i++)
		cr_assert_eq(th_sh("%s plot compare --db %s --where \"trace_path LIKE '%%b16%%'\" "
				"-o %s/c%d.svg --data-dir %s/d%d", th_bin(), F.db, F.dir, i, F.dir, i), 0);
	cr_assert_eq(th_sh("cmp -s %s/c0.svg %s/c1.svg && diff -r %s/d0 %s/d1 >/dev/null", F.dir,
			F.dir, F.dir, F.dir), 0);
}

Test(plot, bad_inputs, .init = setup, .fini = teardown)
{
	char out[256], log[256];
	snprintf(out, sizeof out, "%s/bad.png", F.dir);
	snprintf(log, sizeof log, "%s/err.txt", F.dir);
	cr_assert_eq(th_sh("%s plot timeline --db %s/missing.db -o %s 2>%s", th_bin(), F.dir, out, log), 1);
	char *e = th_slurp(log);
	cr_assert(e && strstr(e, "missing.db"), "%s", e);
	free(e);
	cr_assert_eq(th_file_size(out), -1);
	cr_assert_eq(th_sh("%s plot nosuch --db %s -o %s 2>/dev/null", th_bin(), F.db, out), 2);
	cr_assert_eq(th_sh("%s plot timeline --db %s -o %s/x.jpg 2>/dev/null", th_bin(), F.db, F.dir), 2);
	cr_assert_eq(th_sh("%s plot pareto --db %s -o %s 2>/dev/null", th_bin(), F.db, out), 1);
	cr_assert_eq(th_sh("%s plot frag --db %s --where \"policy='nope'\" -o %s 2>%s", th_bin(), F.db,
			out, log), 1);
	e = th_slurp(log);
	cr_assert(e && strstr(e, "no stored run"), "%s", e);
	free(e);
	cr_assert_eq(th_sh("%s plot frag --db %s --where \"1; DROP TABLE runs\" -o %s 2>%s", th_bin(),
			F.db, out, log), 1);
	e = th_slurp(log);
	cr_assert(e && strstr(e, "';'"), "%s", e);
	free(e);
	cr_assert_eq(th_sh("%s plot frag --db %s --where \"1) --\" -o %s 2>/dev/null", th_bin(), F.db,
			out), 1);
	if (th_have("gnuplot")) {
		cr_assert_eq(th_sh("%s plot timeline --db %s -o %s 2>%s", th_bin(), F.db, out, log), 1);
		e = th_slurp(log);
		cr_assert(e && strstr(e, "one trace"), "%s", e);
		free(e);
	}
	cr_assert_eq(th_file_size(out), -1, "no figure after a failure");
	/* the database is untouched */
	cr_assert_eq(th_sh("%s table --db %s | grep -q cuda_malloc", th_bin(), F.db), 0);
}

/* plot pareto marks the predictions whose replayed step the host bounds
 * (docs/timing.md, "GPU-bound and host-bound"), from the stored
 * gpu_busy_fraction: ResNet-18 b128 with caching keeps the GPU busy 94% of
 * its step, without caching 29%. */
Test(plot, pareto_marks_host_bound_predictions, .init = setup, .fini = teardown)
{
	const char *t = "traces/timing/nosource/resnet18-b128-cap-nocaching.trace.gz";
	char db[256];
	need_gnuplot();
	snprintf(db, sizeof db, "%s/timed.db", F.dir);
	cr_assert_eq(th_sh("%s run %s --policy pytorch --timing --db %s >/dev/null && "
			"%s run %s --policy cuda_malloc --timing --db %s >/dev/null && "
			"%s run %s --policy cuda_malloc --db %s >/dev/null",
			th_bin(), t, db, th_bin(), t, db, th_bin(), t, db), 0);
	cr_assert_eq(th_sh("%s plot pareto --db %s -o %s/p.svg --data-dir %s/pd", th_bin(), db, F.dir,
			F.dir), 0);
	char p[300];
	snprintf(p, sizeof p, "%s/pd/pareto.dat", F.dir);
	char *d = th_slurp(p);
	cr_assert_not_null(d);
	/* columns: step_ms reserved on_front "label" host_bound */
	cr_assert(strstr(d, "\"pytorch (default)\" 0\n"), "%s", d);
	cr_assert(strstr(d, "\"cuda_malloc (default)\" 1\n"), "%s", d);
	free(d);
	snprintf(p, sizeof p, "%s/pd/figure.gp", F.dir);
	char *g = th_slurp(p);
	cr_assert(g && strstr(g, "host-bound"), "%s", g);
	free(g);
	/* the stored fraction: NULL for the run without --timing */
	cr_assert_eq(th_sh("test \"$(sqlite3 %s \"SELECT count(*) FROM runs WHERE gpu_busy_fraction "
			"> 0.9\")|$(sqlite3 %s \"SELECT count(*) FROM runs WHERE gpu_busy_fraction < "
			"0.9\")|$(sqlite3 %s \"SELECT count(*) FROM runs WHERE gpu_busy_fraction IS "
			"NULL\")\" = '1|1|1'", db, db, db), 0);
	/* the report says how many of its timed runs the host bounds */
	cr_assert_eq(th_sh("%s report --db %s -o %s/rep >/dev/null 2>&1 && grep -q '1 of 2 timed runs "
			"are host-bound' %s/rep/report.md && grep -q ',1,0.945358,1,' %s/rep/runs.csv",
			th_bin(), db, F.dir, F.dir, F.dir), 0);
}
