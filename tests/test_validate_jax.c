/*
 * test_validate_jax.c: `gpumemsim validate jax-truth` and `async-truth` on
 * the committed H200 captures in traces/jax (docs/validation_bfc.md): the
 * recorded figures are read right and the replay's known residuals hold.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run the binary with ARGS, collect stdout into OUT; returns the exit status. */
static int run_bin(const char *args, char *out, size_t len)
{
	const char *bin = getenv("GPUMEMSIM_BIN");
	char cmd[1024];
	size_t n = 0;
	snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", bin ? bin : "build/gpumemsim", args);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	n = fread(out, 1, len - 1, p);
	out[n] = 0;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(validate_jax, b8_reads_truth_and_leaves_out_library_handles)
{
	static char out[8192];
	cr_assert_eq(run_bin("validate jax-truth traces/jax --json --only -b8.", out, sizeof out), 0);
	cr_assert(strstr(out, "\"run\":\"jax-resnet-b8\""), "%s", out);
	cr_assert(strstr(out, "\"peak_pool_bytes_real\":98566144"), "%s", out);
	cr_assert(strstr(out, "\"peak_in_use_real\":92395008"), "%s", out);
	cr_assert(strstr(out, "\"regions_real\":5"), "%s", out);
	/* cuDNN/cuBLAS handle memory: 4 + 2 + 2 allocations, 64 MiB workspace */
	cr_assert(strstr(out, "\"left_out_allocs\":8"), "%s", out);
	cr_assert(strstr(out, "\"left_out_bytes\":67291768"), "%s", out);
	cr_assert(strstr(out, "\"orphan_frees\":0"), "%s", out);
}

Test(validate_jax, sweep_exact_with_xla_sizes)
{
	static char out[16384];
	cr_assert_eq(run_bin("validate jax-truth traces/jax --json", out, sizeof out), 0);
	cr_assert(strstr(out, "\"summary\":\"jax-truth\",\"runs\":11"), "%s", out);
	/* the shipped captures carry XLA's own request sizes (import
	 * xla-sizes): nothing is lowered, and every batch size gives the real
	 * peak pool and peak in use to the byte (docs/validation_bfc.md) */
	size_t rows = 0;
	for (const char *q = out; (q = strstr(q, "\"peak_pool_bytes_real\":")) != NULL; q++) {
		unsigned long long r = strtoull(q + 23, NULL, 10), s, ur, us;
		const char *t = strstr(q, "\"peak_pool_bytes_sim\":");
		const char *a = strstr(q, "\"peak_in_use_real\":"), *b = strstr(q, "\"peak_in_use_sim\":");
		cr_assert(t && a && b);
		s = strtoull(t + 22, NULL, 10);
		ur = strtoull(a + 20, NULL, 10);
		us = strtoull(b + 19, NULL, 10);
		cr_assert_eq(s, r);
		cr_assert_eq(us, ur);
		rows++;
	}
	cr_assert_eq(rows, 11);
	cr_assert_null(strstr(out, "\"requests_lowered\":1"), "%s", out);
	cr_assert(strstr(out, "\"exact_runs\":11"), "%s", out);
}

/* A model no rule was read from (the plain flax CNN, recaptured with the
 * same recipe): exact at every batch size too. */
Test(validate_jax, held_out_cnn_sweep_exact)
{
	static char out[16384];
	cr_assert_eq(run_bin("validate jax-truth traces/jax/cnn --json", out, sizeof out), 0);
	cr_assert(strstr(out, "\"summary\":\"jax-truth\",\"runs\":11,\"exact_runs\":11"), "%s",
		  out);
	cr_assert(strstr(out, "\"run\":\"jax-cnn-b256\",\"exact\":true,\"peak_pool_bytes_real\":"
			      "1105199104,\"peak_pool_bytes_sim\":1105199104"), "%s", out);
}

Test(validate_jax, async_within_a_tenth_of_a_percent)
{
	static char out[4096];
	cr_assert_eq(run_bin("validate async-truth traces/jax/async --json --only b16", out,
			     sizeof out), 0);
	cr_assert(strstr(out, "\"reserved_high_real\":142170128384"), "%s", out);
	const char *t = strstr(out, "\"reserved_high_sim\":");
	cr_assert_not_null(t);
	double s = strtod(t + 20, NULL);
	cr_assert_lt(s > 142170128384.0 ? s - 142170128384.0 : 142170128384.0 - s,
		     0.001 * 142170128384.0);
}

Test(validate_jax, unknown_kind_and_missing_dir)
{
	static char out[1024];
	cr_assert_eq(run_bin("validate bfc-truth traces/jax", out, sizeof out), 2);
	cr_assert_eq(run_bin("validate jax-truth /nonexistent-gpumemsim-dir", out, sizeof out), 1);
}
