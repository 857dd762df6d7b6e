/*
 * test_cli_trace.c: `gpumemsim trace validate|cat|stats` end to end: the
 * binary (GPUMEMSIM_BIN, set by `make test`) is run on the files in
 * tests/data and its exit codes and output are checked.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

static char out_buf[1 << 16], err_buf[1 << 16];

/* Run `gpumemsim ARGS`; stdout and stderr into the buffers; exit status. */
static int run(const char *args)
{
	const char *bin = getenv("GPUMEMSIM_BIN");
	if (!bin || !*bin)
		cr_skip_test("GPUMEMSIM_BIN not set");
	char errpath[] = "/tmp/gpumemsim-cli-trace-XXXXXX";
	int fd = mkstemp(errpath);
	cr_assert_geq(fd, 0);
	close(fd);
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "'%s' %s 2>'%s'", bin, args, errpath);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out_buf, 1, sizeof out_buf - 1, p);
	out_buf[n] = '\0';
	int st = pclose(p);
	FILE *e = fopen(errpath, "r");
	cr_assert_not_null(e);
	n = fread(err_buf, 1, sizeof err_buf - 1, e);
	err_buf[n] = '\0';
	fclose(e);
	unlink(errpath);
	cr_assert(WIFEXITED(st), "%s did not exit normally", cmd);
	return WEXITSTATUS(st);
}

Test(cli_trace, validate_good)
{
	int rc = run("trace validate tests/data/good/all_types.trace tests/data/good/empty.trace "
		     "tests/data/good/example.trace");
	cr_assert_eq(rc, 0, "stderr: %s", err_buf);
	cr_assert(strstr(out_buf, "tests/data/good/all_types.trace: ok (15 records)"), "%s", out_buf);
	cr_assert(strstr(out_buf, "tests/data/good/empty.trace: ok (0 records)"), "%s", out_buf);
	cr_assert(strstr(out_buf, "tests/data/good/example.trace: ok (9 records)"), "%s", out_buf);
}

Test(cli_trace, validate_incomplete_is_ok_with_note)
{
	int rc = run("trace validate tests/data/good/incomplete.trace");
	cr_assert_eq(rc, 0, "%s", err_buf);
	cr_assert(strstr(out_buf, "incomplete: no 'end' trailer"), "%s", out_buf);
	cr_assert(strstr(err_buf, "incomplete.trace:5: warning: kernel links allocation id 0"),
		  "%s", err_buf);
}

static void expect_invalid(const char *name, const char *where_what)
{
	char args[256];
	snprintf(args, sizeof args, "trace validate tests/data/bad/%s", name);
	int rc = run(args);
	cr_assert_eq(rc, 1, "%s: exit %d", name, rc);
	cr_assert(strstr(err_buf, where_what), "%s: stderr '%s' lacks '%s'", name, err_buf,
		  where_what);
}

Test(cli_trace, validate_free_unknown)
{
	expect_invalid("free_unknown.trace", "free_unknown.trace:3: free of 0x20 which is not a live");
}

Test(cli_trace, validate_double_alloc)
{
	expect_invalid("double_alloc.trace", "double_alloc.trace:3: allocation at 0x10 which is still live");
}

Test(cli_trace, validate_link_future)
{
	expect_invalid("link_future.trace", "link_future.trace:4: kernel links allocation id 3");
}

Test(cli_trace, validate_reader_errors)
{
	expect_invalid("time_backwards.trace", "time_backwards.trace:3: time goes backwards");
	expect_invalid("bad_version.trace", "bad_version.trace:1: unsupported trace format version 2");
	expect_invalid("no_newline.trace", "no_newline.trace:3: last line has no newline");
}

Test(cli_trace, validate_many_files_one_bad)
{
	int rc = run("trace validate tests/data/good/empty.trace tests/data/bad/garbage_line.trace");
	cr_assert_eq(rc, 1);
	cr_assert(strstr(out_buf, "empty.trace: ok"), "%s", out_buf);
	cr_assert(strstr(err_buf, "garbage_line.trace:3: bad <addr>"), "%s", err_buf);
}

Test(cli_trace, stats_json)
{
	int rc = run("trace stats --json tests/data/good/all_types.trace");
	cr_assert_eq(rc, 0, "%s", err_buf);
	const char *want[] = {
		"\"allocs\":2", "\"frees\":2", "\"kernels\":1", "\"memcpys\":1", "\"memsets\":1",
		"\"syncs\":1", "\"markers\":1", "\"kernel_buffer_links\":2",
		"\"peak_live_bytes\":1052672", "\"duration_ns\":560", "\"complete\":true",
		"\"labels\":{\"batch\":\"64\",\"model\":\"resnet50\",\"workload\":\"cnn\"}",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		cr_assert(strstr(out_buf, want[i]), "missing %s in %s", want[i], out_buf);
	/* Exactly one object on one line. */
	cr_assert_eq(out_buf[0], '{');
	char *nl = strchr(out_buf, '\n');
	cr_assert(nl && nl[1] == '\0' && nl[-1] == '}', "%s", out_buf);
}

Test(cli_trace, stats_incomplete_exits_zero_with_warning)
{
	int rc = run("trace stats --json tests/data/bad/no_newline.trace");
	cr_assert_eq(rc, 0, "%s", err_buf);
	cr_assert(strstr(out_buf, "\"complete\":false"), "%s", out_buf);
	cr_assert(strstr(out_buf, "\"allocs\":1"), "%s", out_buf);
	cr_assert(strstr(err_buf, "warning"), "%s", err_buf);
	rc = run("trace stats tests/data/good/incomplete.trace");
	cr_assert_eq(rc, 0);
	cr_assert(strstr(out_buf, "INCOMPLETE"), "%s", out_buf);
}

Test(cli_trace, stats_human_sizes)
{
	int rc = run("trace stats tests/data/good/all_types.trace");
	cr_assert_eq(rc, 0);
	cr_assert(strstr(out_buf, "total memory    140.40 GiB"), "%s", out_buf);
	cr_assert(strstr(out_buf, "peak live       1.00 MiB"), "%s", out_buf);
}

Test(cli_trace, stats_bad_input_fails)
{
	int rc = run("trace stats tests/data/bad/unknown_type.trace");
	cr_assert_eq(rc, 1);
	cr_assert(strstr(err_buf, "unknown_type.trace:3:"), "%s", err_buf);
}

Test(cli_trace, cat_resolves_strings_with_absolute_times)
{
	int rc = run("trace cat tests/data/good/all_types.trace");
	cr_assert_eq(rc, 0, "%s", err_buf);
	cr_assert(strstr(out_buf, "a 1010 0x7f0000100000 4096 7 3 1 42 \"libtorch_cuda.so\"\n"),
		  "%s", out_buf);
	cr_assert(strstr(out_buf, "k 1015 1115 7 \"void at::native::"), "%s", out_buf);
	cr_assert(strstr(out_buf, "\nend 15 0\n"), "%s", out_buf);
	cr_assert_null(strstr(out_buf, " +"), "no delta times in cat output");
}

Test(cli_trace, cat_trace_is_a_valid_trace)
{
	char path[] = "/tmp/gpumemsim-cli-cat-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	char args[256];
	snprintf(args, sizeof args, "trace cat --trace tests/data/good/all_types.trace >'%s'", path);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	snprintf(args, sizeof args, "trace validate '%s'", path);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	cr_assert(strstr(out_buf, "ok (15 records)"), "%s", out_buf);
	/* Canonical form is a fixed point: cat of cat is the same text. */
	char args2[256];
	static char first[sizeof out_buf];
	snprintf(args2, sizeof args2, "trace cat --trace '%s'", path);
	cr_assert_eq(run(args2), 0);
	snprintf(first, sizeof first, "%s", out_buf);
	cr_assert_eq(run("trace cat --trace tests/data/good/all_types.trace"), 0);
	cr_assert_str_eq(first, out_buf);
	unlink(path);
}

Test(cli_trace, usage_and_help)
{
	cr_assert_eq(run("trace"), 2);
	cr_assert_eq(run("trace frobnicate x"), 2);
	cr_assert_eq(run("trace validate"), 2);
	cr_assert_eq(run("trace stats --bogus x.trace"), 2);
	cr_assert_eq(run("trace cat"), 2);
	cr_assert_eq(run("trace validate --help"), 0);
	cr_assert(strstr(out_buf, "usage: gpumemsim trace validate"), "%s", out_buf);
	cr_assert_eq(run("trace stats -h"), 0);
	cr_assert_eq(run("trace cat --help"), 0);
	cr_assert_eq(run("trace validate tests/data/bad/nope.trace"), 1);
	cr_assert(strstr(err_buf, "nope.trace: cannot open"), "%s", err_buf);
}

/* A CUDA graph launch: two kernels and a memset of graph 3 share the
 * launch's correlation id 50; an ordinary kernel and copy beside them. */
static const char graph_trace[] =
	"gpumemsim-trace 1\n"
	"S 0 gemm\n"
	"a 1000 0x10000 4096 -\n"
	"p +0 +5 0 50\n"
	"k +10 +100 7 0 1,1,1 32,1,1 16 0 50 0 3 42\n"
	"k +10 +100 7 0 1,1,1 32,1,1 16 0 50 - 3 43\n"
	"m +10 +5 7 4096 50 3 44\n"
	"k +10 +100 7 0 1,1,1 32,1,1 16 0 51\n"
	"c +10 +5 7 4096 dtoh 52 0 7\n"
	"f +10 0x10000 0 -\n"
	"end 8 0\n";

Test(cli_trace, cat_carries_graph_fields)
{
	char in[128], once[128];
	th_tmpfile(in, sizeof in, "cli_graph", graph_trace);
	th_tmpname(once, sizeof once, "cli_graph_cat");
	char args[512];
	/* human form */
	snprintf(args, sizeof args, "trace cat '%s'", in);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	cr_assert(strstr(out_buf, "k 1010 1110 7 \"gemm\" 1,1,1 32,1,1 16 0 50 0 3 42\n"), "%s",
		  out_buf);
	cr_assert(strstr(out_buf, " 16 0 50 - 3 43\n"), "%s", out_buf);
	cr_assert(strstr(out_buf, "m 1030 1035 7 4096 50 3 44\n"), "%s", out_buf);
	cr_assert(strstr(out_buf, " 16 0 51 -\n"), "no graph fields without a graph: %s", out_buf);
	cr_assert(strstr(out_buf, " dtoh 52 0 7\n"), "%s", out_buf);
	/* canonical form: valid, carries them, a fixed point */
	snprintf(args, sizeof args, "trace cat --trace '%s' >'%s'", in, once);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	char *first = th_slurp(once);
	cr_assert_not_null(first);
	cr_assert(strstr(first, "k 1010 1110 7 0 1,1,1 32,1,1 16 0 50 0 3 42\n"), "%s", first);
	cr_assert(strstr(first, "k 1020 1120 7 0 1,1,1 32,1,1 16 0 50 - 3 43\n"), "%s", first);
	cr_assert(strstr(first, "m 1030 1035 7 4096 50 3 44\n"), "%s", first);
	cr_assert(strstr(first, "k 1040 1140 7 0 1,1,1 32,1,1 16 0 51 -\n"), "%s", first);
	cr_assert(strstr(first, "c 1050 1055 7 4096 dtoh 52 0 7\n"), "%s", first);
	snprintf(args, sizeof args, "trace validate '%s'", once);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	cr_assert(strstr(out_buf, "ok (8 records)"), "%s", out_buf);
	snprintf(args, sizeof args, "trace cat --trace '%s'", once);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	cr_assert_str_eq(out_buf, first);
	free(first);
	/* stats: kernels launched from graphs and distinct graphs */
	snprintf(args, sizeof args, "trace stats --json '%s'", in);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	cr_assert(strstr(out_buf, "\"kernels\":3"), "%s", out_buf);
	cr_assert(strstr(out_buf, "\"graph_kernels\":2,\"graphs\":1,"), "%s", out_buf);
	cr_assert_eq(run("trace stats --json tests/data/good/all_types.trace"), 0);
	cr_assert(strstr(out_buf, "\"graph_kernels\":0,\"graphs\":0,"), "%s", out_buf);
	unlink(in);
	unlink(once);
}

/* Module globals (kind 6) registered again at a live address, with no
 * free between: a module reloaded by an older capture. KIND2 is the
 * second allocation's kind. */
static void static_trace(char *path, size_t len, int kind1, int kind2)
{
	char text[512];
	snprintf(text, sizeof text,
		 "gpumemsim-trace 1\n"
		 "S 0 kern\n"
		 "a 1000 0x7f0000000000 1048576 - %d 0 0 -\n"
		 "a 2000 0x7f0000000000 1048576 - %d 0 0 -\n"
		 "k +10 +100 7 0 1,1,1 1,1,1 0 0 9 1\n"
		 "end 3 0\n", kind1, kind2);
	th_tmpfile(path, len, "cli_static", text);
}

Test(cli_trace, validate_static_reregistered_is_a_warning)
{
	char path[128], args[256], want[512];
	static_trace(path, sizeof path, 6, 6);
	snprintf(args, sizeof args, "trace validate '%s'", path);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	snprintf(want, sizeof want, "%s: ok (3 records, 1 warning)\n", path);
	cr_assert_str_eq(out_buf, want);
	snprintf(want, sizeof want, "%s:4: warning: static allocation at 0x7f0000000000", path);
	cr_assert(strstr(err_buf, want), "%s", err_buf);
	snprintf(want, sizeof want, "%s: warning: 1 static (module) allocations re-registered at a "
		 "live address without a free (module reloaded; treated as replacing the earlier "
		 "one)\n", path);
	cr_assert(strstr(err_buf, want), "%s", err_buf);
	unlink(path);
	/* managed static (7) replacing device static (6): the same */
	static_trace(path, sizeof path, 6, 7);
	snprintf(args, sizeof args, "trace validate '%s'", path);
	cr_assert_eq(run(args), 0, "%s", err_buf);
	cr_assert(strstr(err_buf, " 1 static (module) allocations re-registered"), "%s", err_buf);
	unlink(path);
}

Test(cli_trace, validate_other_realloc_at_live_address_still_fails)
{
	const int kinds[][2] = {{3, 3}, {6, 3}, {3, 6}};
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		char path[128], args[256], want[512];
		static_trace(path, sizeof path, kinds[i][0], kinds[i][1]);
		snprintf(args, sizeof args, "trace validate '%s'", path);
		cr_assert_eq(run(args), 1, "kinds %d, %d: %s", kinds[i][0], kinds[i][1], err_buf);
		snprintf(want, sizeof want, "%s:4: allocation at 0x7f0000000000 which is still live "
			 "(allocation id 0 was never freed)", path);
		cr_assert(strstr(err_buf, want), "kinds %d, %d: %s", kinds[i][0], kinds[i][1], err_buf);
		cr_assert_null(strstr(err_buf, "re-registered"), "%s", err_buf);
		unlink(path);
	}
}
