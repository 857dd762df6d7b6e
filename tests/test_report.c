/*
 * test_report.c: `gpumemsim report` through the binary: it writes the HTML
 * page and its Markdown twin with the key tables holding the expected
 * values (largest batch without OOM, best setting, OOM verdicts, run
 * metadata) and figures inlined; bad inputs leave no pages.
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

Test(report, html_and_markdown, .init = setup, .fini = teardown)
{
	cr_assert_eq(th_sh("%s report --db %s -o %s/rep >/dev/null 2>&1", th_bin(), F.db, F.dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/rep/report.html", F.dir);
	char *h = th_slurp(p);
	snprintf(p, sizeof p, "%s/rep/report.md", F.dir);
	char *m = th_slurp(p);
	cr_assert(h && m);
	cr_assert_not_null(strstr(h, "<!DOCTYPE html>"));
	cr_assert_not_null(strstr(h, "</html>"));
	/* largest batch without OOM: pytorch at 200 MiB fits no stored batch,
	 * at 1 GiB batch 16 with 768 MiB headroom (1 GiB - 256 MiB) */
	cr_assert_not_null(strstr(m, "| m | pytorch (default) | 1.00 GiB | 16 | 256.00 MiB | 768.00 MiB (75.0%) | none stored |"), "%s", m);
	cr_assert_not_null(strstr(m, "| m | pytorch (default) | 200.00 MiB | none | - | - | 16 |"), "%s", m);
	/* the OOM verdict: 128 MiB live + 128 MiB request > 200 MiB */
	cr_assert_not_null(strstr(m, "capacity: 128.00 MiB live + 128.00 MiB requested > "
				     "200.00 MiB usable (the device)"), "%s", m);
	cr_assert_not_null(strstr(h, "capacity: 128.00 MiB live + 128.00 MiB requested &gt; "
				     "200.00 MiB usable (the device)"));
	/* run metadata: the labels and the trace identity */
	cr_assert_not_null(strstr(h, "{&quot;model&quot;:&quot;m&quot;,&quot;batch&quot;:&quot;16&quot;}"));
	cr_assert_not_null(strstr(m, "gpumemsim report"));
	if (th_have("gnuplot")) {
		cr_assert_not_null(strstr(h, "data:image/png;base64,iVBOR"));
		cr_assert_not_null(strstr(m, "](fig-01-batch.png)"), "%s", m);
		snprintf(p, sizeof p, "%s/rep/fig-01-batch.png", F.dir);
		cr_assert_gt(th_file_size(p), 1000);
	}
	free(h);
	free(m);
}

Test(report, deterministic, .init = setup, .fini = teardown)
{
	cr_assert_eq(th_sh("%s report --db %s -o %s/a >/dev/null 2>&1 && %s report --db %s -o %s/b "
			">/dev/null 2>&1", th_bin(), F.db, F.dir, th_bin(), F.db, F.dir), 0);
	cr_assert_eq(th_sh("cmp -s %s/a/report.html %s/b/report.html && cmp -s %s/a/report.md "
			"%s/b/report.md", F.dir, F.dir, F.dir, F.dir), 0);
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
	cr_assert_eq(th_sh("%s report --db %s 2>/dev/null", th_bin(), F.db), 2);
	cr_assert_eq(th_sh("%s report --db %s --where \"1;2\" -o %s/r3 2>/dev/null", th_bin(), F.db,
			F.dir), 1);
}
