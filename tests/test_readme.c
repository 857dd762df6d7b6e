/*
 * test_readme.c: every command of README.md's "questions it answers" runs
 * as written (scripts/readme_check.sh, with the binary under test in place
 * of build/gpumemsim), so the README a user copies from stays true.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

Test(readme, questions_run_as_written)
{
	if (access("README.md", R_OK) != 0 || !th_have("bash"))
		cr_skip_test("README.md or bash not here");
	char cmd[1024], out[16384];
	snprintf(cmd, sizeof cmd, "GPUMEMSIM_BIN='%s' bash scripts/readme_check.sh 2>&1", th_bin());
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_not_null(strstr(out, "commands ran"), "%s", out);
}

/* A command that fails is reported with its line, and the check fails. */
Test(readme, a_failing_command_fails_the_check)
{
	char path[128], cmd[1024], out[8192];
	th_tmpname(path, sizeof path, "readme");
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("# x\n<!-- questions:begin -->\n```sh\ntrue\nbuild/gpumemsim run no-such.trace.gz "
	      "--policy pytorch\n```\n<!-- questions:end -->\n", f);
	cr_assert_eq(fclose(f), 0);
	snprintf(cmd, sizeof cmd, "GPUMEMSIM_BIN='%s' bash scripts/readme_check.sh %s 2>&1", th_bin(),
		 path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert_not_null(strstr(out, "FAILED: build/gpumemsim run no-such.trace.gz"), "%s", out);
	unlink(path);
}

/* make demo sweeps what scripts/demo.sh --list names: every one a
 * gpumemsim trace (a folder of another format under traces/ must be left
 * out there, or the demo fails at its first line). */
Test(readme, demo_sweeps_only_gpumemsim_traces)
{
	char out[256];
	cr_assert_eq(th_capture("sh scripts/demo.sh --list | while read -r f; do "
				"case $f in *.gz) l=$(gzip -dc \"$f\" | head -n 1) ;; *) l=$(head -n 1 \"$f\") ;; "
				"esac; [ \"$l\" = 'gpumemsim-trace 1' ] || echo \"not a trace: $f\"; done; "
				"sh scripts/demo.sh --list | wc -l", out, sizeof out), 0, "%s", out);
	cr_assert_null(strstr(out, "not a trace"), "%s", out);
	cr_assert_gt(atoi(out), 50, "%s", out);
}

/* The manual page `make install` writes is made from the --help texts: it
 * has every command's section, and man renders it where man is installed. */
Test(readme, manual_page_from_help)
{
	char cmd[1024], out[65536];
	snprintf(cmd, sizeof cmd, "sh scripts/man.sh '%s'", th_bin());
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strncmp(out, ".TH GPUMEMSIM 1", 15) == 0, "%.200s", out);
	static const char *const cmds[] = {"run", "sweep", "whatif", "maxbatch", "explain", "import",
					   "report", "capture"};
	for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
		char ss[64];
		snprintf(ss, sizeof ss, "\n.SS %s\n", cmds[i]);
		cr_assert_not_null(strstr(out, ss), "no section for %s", cmds[i]);
	}
	if (th_have("man")) {
		char page[128];
		th_tmpname(page, sizeof page, "man");
		cr_assert_eq(th_sh("sh scripts/man.sh '%s' > %s", th_bin(), page), 0);
		snprintf(cmd, sizeof cmd, "MANWIDTH=100 man -l %s 2>&1", page);
		cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%.500s", out);
		cr_assert_not_null(strstr(out, "gpumemsim - trace-driven simulation"), "%.500s", out);
		unlink(page);
	}
}
