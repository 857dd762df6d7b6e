/*
 * test_diff.c: `gpumemsim diff A B` (users' question 9): two runs' peaks
 * side by side by kind and by layer (sim/run_diff.h), and its usage errors.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/engine.h"
#include "../sim/run_diff.h"
#include "helpers.h"

extern const struct alloc_policy policy_cuda_malloc;

/* 100 B of weights; in step 0's forward a "conv" range makes ACT bytes
 * kept until backward, where 500 B come and go. */
static void two_traces(char *a, char *b, size_t len)
{
	static const char *fmt = "gpumemsim-trace 1\nS 0 step 0\nS 1 forward\nS 2 conv\nS 3 backward\n"
				 "a 1 0x1000 100 -\nr 10 +100 0 0\nr 20 +40 1 1\nr 25 +10 2 2\n"
				 "a 30 0x2000 %d -\nr 60 +40 3 1\na 70 0x3000 500 -\n"
				 "f 80 0x2000 %d -\nf 90 0x3000 500 -\nend 9 0\n";
	char text[512];
	snprintf(text, sizeof text, fmt, 1000, 1000);
	th_tmpfile(a, len, "diffa", text);
	snprintf(text, sizeof text, fmt, 3000, 3000);
	th_tmpfile(b, len, "diffb", text);
}

Test(diff, kinds_and_layers_side_by_side)
{
	char a[64], b[64], err[256] = "";
	two_traces(a, b, sizeof a);
	struct sim_result ra, rb;
	struct sim_options o = {.trace_path = a, .policy = &policy_cuda_malloc,
				.peak_layers = SIZE_MAX};
	cr_assert_eq(sim_run(&o, &ra, err, sizeof err), 0, "%s", err);
	o.trace_path = b;
	cr_assert_eq(sim_run(&o, &rb, err, sizeof err), 0, "%s", err);
	struct run_diff d;
	cr_assert_eq(run_diff_build(&ra, &rb, &d), 0);
	cr_assert_eq(d.live_a, 1600);
	cr_assert_eq(d.live_b, 3600);
	cr_assert_str_eq(d.kind[SIM_LK_ACTIVATIONS].name, "activations");
	cr_assert_eq(d.kind[SIM_LK_ACTIVATIONS].a, 1000);
	cr_assert_eq(d.kind[SIM_LK_ACTIVATIONS].b, 3000);
	cr_assert_eq(d.kind[SIM_LK_WEIGHTS].a, 100);
	cr_assert_eq(d.kind[SIM_LK_WEIGHTS].b, 100);
	cr_assert_eq(d.nlayer, 3);
	/* the largest change first, then by name */
	cr_assert_str_eq(d.layer[0].name, "conv");
	cr_assert_eq(d.layer[0].a, 1000);
	cr_assert_eq(d.layer[0].b, 3000);
	cr_assert_str_eq(d.layer[1].name, "(no range)");
	cr_assert_str_eq(d.layer[2].name, "backward");
	run_diff_free(&d);
	sim_result_free(&ra);
	sim_result_free(&rb);
	unlink(a);
	unlink(b);
}

Test(diff, command_prints_and_refuses)
{
	char a[64], b[64], cmd[512], out[1 << 14];
	two_traces(a, b, sizeof a);
	snprintf(cmd, sizeof cmd, "%s diff %s %s --policy cuda_malloc", th_bin(), a, b);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "  activations                      1000 B       2.93 KiB  +1.95 KiB "
			      "(+200.0%)"), "%s", out);
	cr_assert(strstr(out, "by layer: all 3 of 3, the largest changes first\n  conv "), "%s", out);
	snprintf(cmd, sizeof cmd, "%s diff %s %s --policy cuda_malloc --top 1 --json", th_bin(), a, b);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"layers\":[{\"layer\":\"conv\",\"a\":1000,\"b\":3000}"), "%s", out);
	cr_assert(strstr(out, "\"live_a\":1600,\"live_b\":3600"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s diff %s %s --policy cuda_malloc --top 1", th_bin(), a, b);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "(2 more)"), "%s", out);
	/* usage: two traces, a known policy, a number */
	snprintf(cmd, sizeof cmd, "%s diff %s", th_bin(), a);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	snprintf(cmd, sizeof cmd, "%s diff %s %s --policy nosuch", th_bin(), a, b);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	cr_assert(strstr(out, "unknown policy 'nosuch'"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s diff %s %s --top x", th_bin(), a, b);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	/* a trace cut short: refused, or replayed up to its end when asked */
	char cut[64];
	char *text = th_slurp(a);
	cr_assert_not_null(text);
	text[strlen(text) / 2] = '\0';
	th_tmpfile(cut, sizeof cut, "diffcut", text);
	free(text);
	snprintf(cmd, sizeof cmd, "%s diff %s %s --policy cuda_malloc", th_bin(), cut, b);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, cut), "%s", out);
	snprintf(cmd, sizeof cmd, "%s diff %s %s --policy cuda_malloc --allow-incomplete --json", th_bin(),
		 cut, b);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"complete\":false"), "%s", out);
	unlink(cut);
	/* a bad trace names itself, exit 1 */
	snprintf(cmd, sizeof cmd, "%s diff %s /nonexistent.trace", th_bin(), a);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, "/nonexistent.trace"), "%s", out);
	unlink(a);
	unlink(b);
}
