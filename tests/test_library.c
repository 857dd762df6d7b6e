/*
 * test_library.c: the library from a user's own program, through its one
 * public header: docs/library_example.c is compiled against the library
 * this test suite runs on (GPUMEMSIM_LIB, with the same sanitizer flags)
 * and must give the peaks `gpumemsim run --json` gives.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

/* The first number after KEY in TEXT, or -1. */
static long long after(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	return p ? atoll(p + strlen(key)) : -1;
}

Test(library, example_builds_and_matches_run)
{
	const char *lib = getenv("GPUMEMSIM_LIB");
	const char *bin = getenv("GPUMEMSIM_BIN");
	const char *san = getenv("GPUMEMSIM_SAN");
	if (!lib || !bin) {
		cr_skip_test("GPUMEMSIM_LIB/GPUMEMSIM_BIN not set (make run-tests sets them)");
		return;
	}
	char exe[64], out1[64], out2[64], db[64], cmd[2048];
	th_tmpname(exe, sizeof exe, "example");
	th_tmpname(out1, sizeof out1, "example_out");
	th_tmpname(out2, sizeof out2, "run_out");
	th_tmpname(db, sizeof db, "example_db");
	snprintf(cmd, sizeof cmd,
		 "${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror %s -I. docs/library_example.c "
		 "%s -lsqlite3 -lz -lm -lpthread -o %s", san ? san : "", lib, exe);
	cr_assert_eq(th_sh("%s", cmd), 0, "the example compiles against include/gpumemsim.h: %s", cmd);
	const char *t = "traces/torch/torch-resnet18-b16.trace.gz";
	snprintf(cmd, sizeof cmd, "%s %s pytorch expandable_segments:True 8GiB > %s", exe, t, out1);
	cr_assert_eq(th_sh("%s", cmd), 0);
	snprintf(cmd, sizeof cmd, "%s run %s --policy pytorch --conf expandable_segments:True "
		 "--capacity 8GiB --db %s --json > %s", bin, t, db, out2);
	cr_assert_eq(th_sh("%s", cmd), 0);
	char *a = th_slurp(out1), *b = th_slurp(out2);
	cr_assert_gt(after(a, "peak_reserved "), 0, "%s", a);
	cr_assert_eq(after(a, "peak_reserved "), after(b, "\"peak_reserved\":"));
	cr_assert_eq(after(a, "peak_allocated "), after(b, "\"peak_allocated\":"));
	cr_assert_eq(after(a, "oom "), 0);
	free(a);
	free(b);
	/* an unknown policy is refused with the known ones */
	snprintf(cmd, sizeof cmd, "%s %s nosuch 2>%s", exe, t, out1);
	cr_assert_eq(th_sh("%s", cmd), 2);
	a = th_slurp(out1);
	cr_assert(strstr(a, "pytorch"), "lists the policies");
	free(a);
	unlink(exe);
	unlink(out1);
	unlink(out2);
	unlink(db);
}
