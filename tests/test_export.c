/*
 * test_export.c: `gpumemsim export perfetto` through the binary: a stored
 * run becomes valid Chrome-trace JSON with its memory counters and events;
 * a trace replayed under a policy adds its kernels per stream; bad inputs
 * fail clearly and leave no file.
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

static int count(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* JSON validity by python3 when present (the CI image has it). */
static void assert_json(const char *path)
{
	if (th_sh("command -v python3 >/dev/null 2>&1") == 0)
		cr_assert_eq(th_sh("python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s", path),
			     0, "%s is not valid JSON", path);
}

Test(export, stored_run_counters, .init = setup, .fini = teardown)
{
	char out[256];
	snprintf(out, sizeof out, "%s/run.json", F.dir);
	/* run 1: pytorch on the batch-8 trace (two 64 MiB buffers) */
	cr_assert_eq(th_sh("%s export perfetto 1 --db %s -o %s", th_bin(), F.db, out), 0);
	char *j = th_slurp(out);
	cr_assert_not_null(j);
	assert_json(out);
	cr_assert_not_null(strstr(j, "\"traceEvents\":["));
	cr_assert_not_null(strstr(j, "\"name\":\"run 1: pytorch (default)"));
	cr_assert_gt(count(j, "{\"ph\":\"C\",\"name\":\"allocated\""), 1);
	cr_assert_eq(count(j, "{\"ph\":\"C\",\"name\":\"allocated\""),
		     count(j, "{\"ph\":\"C\",\"name\":\"reserved\""));
	cr_assert_not_null(strstr(j, "\"args\":{\"bytes\":134217728}"), "%s", j);
	cr_assert_not_null(strstr(j, "{\"ph\":\"i\",\"s\":\"p\",\"name\":\"peak_reserved\""), "%s", j);
	free(j);
}

Test(export, trace_kernels, .init = setup, .fini = teardown)
{
	char out[256];
	snprintf(out, sizeof out, "%s/tr.json", F.dir);
	cr_assert_eq(th_sh("%s export perfetto %s/m-b8.trace --policy cuda_malloc -o %s", th_bin(), F.dir,
			out), 0);
	char *j = th_slurp(out);
	cr_assert_not_null(j);
	assert_json(out);
	/* the kernel 1.5 ms after the first record, 1 ms long, on stream 7 */
	cr_assert_not_null(strstr(j, "{\"ph\":\"X\",\"name\":\"gemm_kernel\",\"pid\":2,\"tid\":7,"
				     "\"ts\":2499.000,\"dur\":1000.000"), "%s", j);
	cr_assert_not_null(strstr(j, "\"name\":\"stream 7\""));
	cr_assert_not_null(strstr(j, "\"name\":\"memory: cuda_malloc (default) (simulated)\""));
	cr_assert_not_null(strstr(j, "\"args\":{\"bytes\":134217728}"));
	free(j);
}

Test(export, bad_inputs, .init = setup, .fini = teardown)
{
	char out[256];
	snprintf(out, sizeof out, "%s/bad.json", F.dir);
	cr_assert_eq(th_sh("%s export perfetto 999 --db %s -o %s 2>/dev/null", th_bin(), F.db, out), 1);
	cr_assert_eq(th_file_size(out), -1);
	cr_assert_eq(th_sh("%s export perfetto 1 --db %s/none.db -o %s 2>/dev/null", th_bin(), F.dir, out), 1);
	cr_assert_eq(th_file_size(out), -1);
	cr_assert_eq(th_sh("%s export perfetto %s/none.trace --policy pytorch -o %s 2>/dev/null", th_bin(),
			F.dir, out), 1);
	cr_assert_eq(th_file_size(out), -1);
	cr_assert_eq(th_sh("%s export perfetto %s/m-b8.trace --policy nosuch -o %s 2>/dev/null", th_bin(),
			F.dir, out), 1);
	cr_assert_eq(th_sh("%s export perfetto %s/m-b8.trace -o %s 2>/dev/null", th_bin(), F.dir, out), 2);
	cr_assert_eq(th_sh("%s export chrome 1 -o %s 2>/dev/null", th_bin(), out), 2);
	cr_assert_eq(th_file_size(out), -1);
}
