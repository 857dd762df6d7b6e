/*
 * test_validate.c: `gpumemsim validate torch-truth` end to end on real
 * recorded runs from /work/shared (skipped cleanly when it is absent): the
 * replay must be exact in recorded-address mode, including a garbage
 * collection run and an expandable-segments run. Also the usage errors.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *truth_dir(char *buf, size_t len)
{
	const char *shared = getenv("GPUMEMSIM_SHARED");
	struct stat sb;
	snprintf(buf, len, "%s/data/torch-allocator-truth", shared ? shared : "../shared");
	return stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode) ? buf : NULL;
}

/* Run validate on the runs matching ONLY; count rows and exact rows. */
static int run_validate(const char *dir, const char *only, int *rows, int *exact, int *summary)
{
	const char *bin = getenv("GPUMEMSIM_BIN");
	char cmd[2048], line[4096];
	cr_assert_not_null(bin, "GPUMEMSIM_BIN is not set (run through make test)");
	snprintf(cmd, sizeof cmd, "%s validate torch-truth '%s' --json --only '%s'", bin, dir, only);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	*rows = *exact = *summary = 0;
	while (fgets(line, sizeof line, p)) {
		if (strstr(line, "\"summary\"")) {
			(*summary)++;
			continue;
		}
		if (!strstr(line, "\"run\""))
			continue;
		(*rows)++;
		if (strstr(line, "\"exact\":true"))
			(*exact)++;
	}
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(validate, real_runs_are_exact)
{
	char buf[1024];
	const char *dir = truth_dir(buf, sizeof buf);
	int rows, exact, summary;
	if (!dir)
		cr_skip_test("no ../shared/data/torch-allocator-truth");
	/* default, GC under a fraction, max_split, roundup, expandable: 6 runs */
	cr_assert_eq(run_validate(dir, "resnet18-b64-", &rows, &exact, &summary), 0);
	cr_assert_eq(rows, 6);
	cr_assert_eq(exact, 6, "%d of 6 exact", exact);
	cr_assert_eq(summary, 1);
	cr_assert_eq(run_validate(dir, "regnet_y_400mf-b160-garbage", &rows, &exact, &summary), 0);
	cr_assert_eq(rows, 1);
	cr_assert_eq(exact, 1, "the GC run with many partial releases is exact");
}

Test(validate, usage_errors)
{
	const char *bin = getenv("GPUMEMSIM_BIN");
	char cmd[1024];
	cr_assert_not_null(bin);
	snprintf(cmd, sizeof cmd, "%s validate bogus-truth /tmp >/dev/null 2>&1", bin);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
	snprintf(cmd, sizeof cmd, "%s validate torch-truth /nonexistent/dir >/dev/null 2>&1", bin);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 1);
	snprintf(cmd, sizeof cmd, "%s validate torch-truth /tmp --addresses bogus >/dev/null 2>&1",
		 bin);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
}
