/*
 * test_manifest.c: traces/MANIFEST.tsv lists every shipped trace
 * (scripts/manifest.sh): the tree's own, and in a scratch tree a trace
 * without a row is caught, then given one from the file itself.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

Test(manifest, every_shipped_trace_is_listed)
{
	cr_assert_eq(th_sh("bash scripts/manifest.sh --check >&2"), 0,
		     "traces/MANIFEST.tsv is out of date (listed above): run scripts/manifest.sh");
}

Test(manifest, a_trace_without_a_row_is_caught_then_listed)
{
	char dir[64], cmd[2048], out[4096];
	th_tmpname(dir, sizeof dir, "manifest");
	snprintf(cmd, sizeof cmd,
		 "rm -rf %s && mkdir -p %s/scripts %s/traces/sub && cp scripts/manifest.sh %s/scripts/ && "
		 "head -1 traces/MANIFEST.tsv > %s/traces/MANIFEST.tsv && "
		 "printf 'gpumemsim-trace 1\\nH gpu NVIDIA H200\\nL workload=cnn\\nL batch=8\\n"
		 "a 10 0x1000 4096 -\\nf 20 0x1000 4096 -\\nend 2 0\\n' | gzip > %s/traces/sub/x.trace.gz",
		 dir, dir, dir, dir, dir, dir);
	cr_assert_eq(th_sh("%s", cmd), 0);
	snprintf(cmd, sizeof cmd, "bash %s/scripts/manifest.sh --check 2>&1", dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, "not in traces/MANIFEST.tsv: traces/sub/x.trace.gz"), "%s", out);
	if (!th_have("jq"))
		cr_skip("jq is not installed: the update half needs it");
	snprintf(cmd, sizeof cmd, "bash %s/scripts/manifest.sh %s 2>&1 && bash %s/scripts/manifest.sh --check 2>&1",
		 dir, th_bin(), dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	snprintf(cmd, sizeof cmd, "cut -f1-4,8,13,14,18 %s/traces/MANIFEST.tsv | tail -1", dir);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_str_eq(out, "sub/x.trace.gz\tcnn\t-\t8\tNVIDIA H200\t2\t1\t4096\n");
	th_sh("rm -rf %s", dir);
}
