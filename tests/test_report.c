/*
 * test_report.c: `gpumemsim report` through the binary: the page's
 * structure (answers first, figures per group, the data last), groups by
 * workload and model that never mix two workloads sharing a model name,
 * OOM runs never best nor counted in a saving, every figure drawn, runs.csv
 * with one row per run, deterministic pages; bad inputs leave no pages.
 * (The browser check of the page is tests/test_report_check.c.)
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

static struct th_results F;
static void setup(void) { th_results_setup(&F); }
static void teardown(void) { th_results_teardown(&F); }

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static char *slurp_in(const char *dir, const char *name)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return th_slurp(p);
}

Test(report, structure_and_answers, .init = setup, .fini = teardown)
{
	char dir[256];
	snprintf(dir, sizeof dir, "%s/rep", F.dir);
	cr_assert_eq(th_sh("%s report --db %s -o %s >/dev/null 2>&1", th_bin(), F.db, dir), 0);
	char *h = slurp_in(dir, "report.html"), *m = slurp_in(dir, "report.md");
	cr_assert(h && m);
	cr_assert_not_null(strstr(h, "<!DOCTYPE html>"));
	cr_assert_not_null(strstr(h, "</html>"));
	/* the answers come before the figures, the data last */
	char *ans = strstr(h, "id=\"answers\""), *figs = strstr(h, "id=\"figures\""),
	     *data = strstr(h, "id=\"data\"");
	cr_assert(ans && figs && data && ans < figs && figs < data);
	cr_assert_not_null(strstr(h, "<a href=\"runs.csv\">runs.csv</a>"));
	cr_assert_not_null(strstr(m, "[runs.csv](runs.csv)"));
	/* no workload label: the model alone, said so */
	cr_assert_not_null(strstr(m, "| m (no workload label) | 2 | 8, 16 | 1.00 GiB, 200.00 MiB |"),
			   "%s", m);
	/* largest batch: at 1 GiB every setting fits both batches; at 200 MiB
	 * only pytorch ran (batch 16): none fits, with the verdict */
	cr_assert_not_null(strstr(m, "| m (no workload label) | 1.00 GiB | all 3 settings | 16 "
				     "(every stored batch) | - | - |"), "%s", m);
	cr_assert_not_null(strstr(m, "| m (no workload label) | 200.00 MiB | pytorch (default) | "
				     "none (its smallest run, batch 16, fails) | 16 | capacity: "
				     "128.00 MiB live + 128.00 MiB requested > 200.00 MiB usable "
				     "(the device) |"), "%s", m);
	/* best at 1 GiB: pytorch, the only caching allocator */
	cr_assert_not_null(strstr(m, "| m (no workload label) | 1.00 GiB | pytorch (default) |"),
			   "%s", m);
	cr_assert_not_null(strstr(m, "| m (no workload label) | 200.00 MiB | none: every run ran out "
				     "of memory |"), "%s", m);
	cr_assert_not_null(strstr(m, "| m (no workload label) | 200.00 MiB | 1 | 1 | capacity 1 |"),
			   "%s", m);
	cr_assert_not_null(strstr(h, "128.00 MiB requested &gt; 200.00 MiB usable"));
	/* the contents link every group's figures */
	cr_assert_not_null(strstr(h, "<a href=\"#g1\">m (no workload label)</a>"));
	cr_assert_not_null(strstr(h, "<h3 id=\"g1\">"));
	if (th_have("gnuplot")) {
		cr_assert_not_null(strstr(h, "data:image/png;base64,iVBOR"));
		cr_assert_not_null(strstr(m, "](fig-001-batch.png)"), "%s", m);
		cr_assert_gt(th_file_size(strcat(dir, "/fig-001-batch.png")), 1000);
	}
	free(h);
	free(m);
}

/* Every figure drawn (no "figure not drawn"), each caption naming its
 * capacity, as many images in the page as figure files beside it. */
Test(report, every_figure_drawn, .init = setup, .fini = teardown)
{
	if (!th_have("gnuplot"))
		cr_skip_test("gnuplot not installed");
	char out[512], dir[256];
	snprintf(dir, sizeof dir, "%s/rep", F.dir);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s report --db %s -o %s", th_bin(), F.db, dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_not_null(strstr(out, " figures drawn, 0 not drawn"), "%s", out);
	char *h = slurp_in(dir, "report.html");
	cr_assert_not_null(h);
	cr_assert_null(strstr(h, "figure not drawn"));
	int imgs = count(h, "<img ");
	/* batch at 1 GiB (at 200 MiB only batch 16 ran: no line to draw), frag,
	 * per trace: compare at each capacity it ran at (b8: 1, b16: 2), a
	 * timeline and what is live at the peak each */
	cr_assert_eq(imgs, 9, "%d images", imgs);
	cr_assert_eq(count(h, "<figcaption>"), imgs);
	cr_assert_eq(count(h, ", at 1.00 GiB") + count(h, ", at 200.00 MiB"), 2 * imgs,
		     "every caption (and alt text) names its capacity");
	snprintf(cmd, sizeof cmd, "ls %s/fig-*.png | wc -l", dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0);
	cr_assert_eq(atoi(out), imgs, "%s", out);
	free(h);
}

/* runs.csv: a header and one row per run; fields with commas and quotes
 * quoted, quotes doubled. */
Test(report, runs_csv, .init = setup, .fini = teardown)
{
	char dir[256];
	snprintf(dir, sizeof dir, "%s/rep", F.dir);
	cr_assert_eq(th_sh("%s report --db %s -o %s >/dev/null 2>&1", th_bin(), F.db, dir), 0);
	char *c = slurp_in(dir, "runs.csv");
	cr_assert_not_null(c);
	cr_assert_eq(strncmp(c, "group,workload,model,batch,trace_path,", 38), 0, "%s", c);
	/* the GPU's busy share is empty where nothing was timed */
	cr_assert_not_null(strstr(c, ",step_time_ns,timed,gpu_busy_fraction,complete,"), "%s", c);
	cr_assert_not_null(strstr(c, ",0,0,,1,"), "%s", c);
	/* 2 traces x 3 policies + the 200 MiB run */
	cr_assert_eq(count(c, "\n"), 1 + 7, "%s", c);
	cr_assert_not_null(strstr(c, "\"{\"\"model\"\":\"\"m\"\",\"\"batch\"\":\"\"16\"\"}\""), "%s", c);
	cr_assert_eq(count(c, ",capacity,capacity: 128.00 MiB live + 128.00 MiB requested > "
			      "200.00 MiB usable (the device),"), 1, "%s", c);
	free(c);
}

Test(report, deterministic, .init = setup, .fini = teardown)
{
	cr_assert_eq(th_sh("%s report --db %s -o %s/a >/dev/null 2>&1 && %s report --db %s -o %s/b "
			">/dev/null 2>&1", th_bin(), F.db, F.dir, th_bin(), F.db, F.dir), 0);
	cr_assert_eq(th_sh("cmp -s %s/a/report.html %s/b/report.html && cmp -s %s/a/report.md "
			"%s/b/report.md && cmp -s %s/a/runs.csv %s/b/runs.csv", F.dir, F.dir, F.dir,
			F.dir, F.dir, F.dir), 0);
}

Test(report, bad_inputs, .init = setup, .fini = teardown)
{
	char p[256];
	cr_assert_eq(th_sh("%s report --db %s/none.db -o %s/r1 2>/dev/null", th_bin(), F.dir, F.dir), 1);
	snprintf(p, sizeof p, "%s/r1/report.html", F.dir);
	cr_assert_eq(th_file_size(p), -1);
	cr_assert_eq(th_sh("%s report --db %s --where \"policy='none'\" -o %s/r2 2>/dev/null", th_bin(),
			F.db, F.dir), 1);
	snprintf(p, sizeof p, "%s/r2/report.html", F.dir);
	cr_assert_eq(th_file_size(p), -1);
	snprintf(p, sizeof p, "%s/r2/runs.csv", F.dir);
	cr_assert_eq(th_file_size(p), -1);
	cr_assert_eq(th_sh("%s report --db %s 2>/dev/null", th_bin(), F.db), 2);
	cr_assert_eq(th_sh("%s report --db %s --where \"1;2\" -o %s/r3 2>/dev/null", th_bin(), F.db,
			F.dir), 1);
}
