/*
 * test_report_check.c: scripts/report_check.sh renders a report in headless
 * Chromium: a report of the test database passes; a page with a broken
 * image, a link to a missing file, an in-page link without a target or a
 * JavaScript error fails, naming each. Skips cleanly where Chromium and
 * chromedriver are not installed (the script would install them, which a
 * test must not do).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

static struct th_results F;
static void setup(void) { th_results_setup(&F); }
static void teardown(void) { th_results_teardown(&F); }

static void need_chromium(void)
{
	const char *c = getenv("CHROMIUM"), *d = getenv("CHROMEDRIVER");
	if (access(c && *c ? c : "/usr/bin/chromium", X_OK) != 0 ||
	    access(d && *d ? d : "/usr/bin/chromedriver", X_OK) != 0 || !th_have("python3"))
		cr_skip_test("chromium, chromedriver or python3 not installed "
			     "(apt-get install -y chromium chromium-driver)");
}

Test(report_check, report_passes, .init = setup, .fini = teardown, .timeout = 300)
{
	need_chromium();
	char out[4096], cmd[1024];
	cr_assert_eq(th_sh("%s report --db %s -o %s/rep >/dev/null 2>&1", th_bin(), F.db, F.dir), 0);
	snprintf(cmd, sizeof cmd, "sh scripts/report_check.sh %s/rep", F.dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_not_null(strstr(out, "report-check: OK"), "%s", out);
}

Test(report_check, broken_page_fails, .init = setup, .fini = teardown, .timeout = 300)
{
	need_chromium();
	char out[8192], cmd[1024], page[256];
	snprintf(page, sizeof page, "%s/bad", F.dir);
	cr_assert_eq(th_sh("mkdir -p %s", page), 0);
	strcat(page, "/report.html");
	FILE *f = fopen(page, "w");
	cr_assert_not_null(f);
	fputs("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>t</title></head><body>"
	      "<img alt=\"lost figure\" src=\"fig-404.png\"><a href=\"#nowhere\">x</a>"
	      "<a href=\"runs.csv\">data</a><script>no_such_function();</script></body></html>\n", f);
	cr_assert_eq(fclose(f), 0);
	snprintf(cmd, sizeof cmd, "sh scripts/report_check.sh %s/bad", F.dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert_not_null(strstr(out, "image 1 did not load: lost figure"), "%s", out);
	cr_assert_not_null(strstr(out, "in-page link #nowhere has no target"), "%s", out);
	cr_assert_not_null(strstr(out, "link runs.csv: no such file"), "%s", out);
	cr_assert_not_null(strstr(out, "no_such_function"), "%s", out);
	cr_assert_not_null(strstr(out, "FAILED"), "%s", out);
	/* and a missing page is a usage error, not a pass */
	snprintf(cmd, sizeof cmd, "sh scripts/report_check.sh %s/none", F.dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
}
