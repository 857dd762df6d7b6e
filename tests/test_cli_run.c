/*
 * test_cli_run.c: `gpumemsim run` and `gpumemsim policies` through the
 * binary (env GPUMEMSIM_BIN, set by `make test`): byte-identical --json
 * output, run_id last, storing in a database, exit codes and messages for
 * unknown policies, bad knobs and bad traces, and that a failed run leaves
 * no database behind.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

struct cli {
	char trace[64], out[64], err[64], db[64];
};

/* A small trace; with BAD, its last record frees an unknown address. */
static void write_trace(const char *path, int bad)
{
	char err[256];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_STREAM, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	static struct trace_label labels[] = {{"batch", "32"}};
	struct trace_header h = {.version = 1, .producer = "test_cli_run",
				 .total_memory = 1ull << 30, .labels = labels, .nlabels = 1};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	th_mem(w, TREC_ALLOC, 100, 0x1000, 100);
	th_mem(w, TREC_ALLOC, 110, 0x2000, 200);
	th_mem(w, TREC_FREE, 120, 0x1000, 0);
	th_mem(w, TREC_FREE, 130, bad ? 0xbad000 : 0x2000, 0);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

static void setup(struct cli *c)
{
	th_tmpname(c->trace, sizeof c->trace, "cli_trace");
	th_tmpname(c->out, sizeof c->out, "cli_out");
	th_tmpname(c->err, sizeof c->err, "cli_err");
	th_tmpname(c->db, sizeof c->db, "cli_db");
	th_rm_db(c->db);
}

static void teardown(struct cli *c)
{
	unlink(c->trace);
	unlink(c->out);
	unlink(c->err);
	th_rm_db(c->db);
}

/* Run `gpumemsim ARGS`, stdout and stderr into files; the exit status. */
static int sh(struct cli *c, const char *args)
{
	return th_run(NULL, c->out, c->err, args);
}

static char *slurp(const char *path)
{
	char *s = th_slurp(path);
	cr_assert_not_null(s, "%s unreadable", path);
	return s;
}

Test(cli_run, json_is_byte_identical)
{
	struct cli c;
	char args[512];
	th_bin();
	setup(&c);
	write_trace(c.trace, 0);
	snprintf(args, sizeof args, "run '%s' --policy cuda_malloc --json --no-db", c.trace);
	cr_assert_eq(sh(&c, args), 0);
	char *a = slurp(c.out);
	cr_assert_eq(sh(&c, args), 0);
	char *b = slurp(c.out);
	cr_assert_str_eq(a, b);
	cr_assert(strstr(a, "\"peak_reserved\":300"), "%s", a);
	cr_assert(strstr(a, "\"labels\":{\"batch\":\"32\"}"), "%s", a);
	cr_assert(strstr(a, "\"first_oom\":null"), "%s", a);
	cr_assert(strstr(a, "\"run_id\":null}\n"), "run_id is not last: %s", a);
	free(a);
	free(b);
	teardown(&c);
}

Test(cli_run, stores_runs_and_differs_only_in_run_id)
{
	struct cli c;
	char args[512];
	th_bin();
	setup(&c);
	write_trace(c.trace, 0);
	snprintf(args, sizeof args, "run '%s' --policy cuda_malloc --capacity 1GiB --json --db '%s'",
		 c.trace, c.db);
	cr_assert_eq(sh(&c, args), 0, "%s", slurp(c.err));
	char *a = slurp(c.out);
	cr_assert_eq(sh(&c, args), 0);
	char *b = slurp(c.out);
	char *ia = strstr(a, "\"run_id\":"), *ib = strstr(b, "\"run_id\":");
	cr_assert(ia && ib);
	cr_assert_eq(ia - a, ib - b);
	cr_assert_eq(strncmp(a, b, (size_t)(ia - a)), 0, "outputs differ before run_id");
	cr_assert_str_eq(ia, "\"run_id\":1}\n");
	cr_assert_str_eq(ib, "\"run_id\":2}\n");
	free(a);
	free(b);
	/* the human summary names the database and the run */
	snprintf(args, sizeof args, "run '%s' --policy cuda_malloc --db '%s'", c.trace, c.db);
	cr_assert_eq(sh(&c, args), 0);
	a = slurp(c.out);
	cr_assert(strstr(a, "peak reserved"), "%s", a);
	cr_assert(strstr(a, "run id           3"), "%s", a);
	free(a);
	teardown(&c);
}

Test(cli_run, unknown_policy_lists_known_ones)
{
	struct cli c;
	char args[512];
	th_bin();
	setup(&c);
	write_trace(c.trace, 0);
	snprintf(args, sizeof args, "run '%s' --policy nosuch --db '%s'", c.trace, c.db);
	cr_assert_eq(sh(&c, args), 1);
	char *e = slurp(c.err);
	cr_assert(strstr(e, "unknown policy 'nosuch' (known: cuda_malloc"), "%s", e);
	free(e);
	struct stat sb;
	cr_assert_neq(stat(c.db, &sb), 0, "a failed run created the database");
	teardown(&c);
}

Test(cli_run, bad_knob_writes_nothing)
{
	struct cli c;
	char args[512];
	th_bin();
	setup(&c);
	write_trace(c.trace, 0);
	snprintf(args, sizeof args, "run '%s' --policy cuda_malloc --conf 'max_split_size_mb:1' "
		 "--db '%s'", c.trace, c.db);
	cr_assert_eq(sh(&c, args), 1);
	char *e = slurp(c.err);
	cr_assert(strstr(e, "max_split_size_mb"), "%s", e);
	free(e);
	char *o = slurp(c.out);
	cr_assert_eq(strlen(o), 0, "a failed run printed a result: %s", o);
	free(o);
	struct stat sb;
	cr_assert_neq(stat(c.db, &sb), 0, "a failed run created the database");
	teardown(&c);
}

Test(cli_run, bad_trace_names_file_and_line)
{
	struct cli c;
	char args[512], want[128];
	th_bin();
	setup(&c);
	write_trace(c.trace, 1);
	snprintf(args, sizeof args, "run '%s' --policy cuda_malloc --db '%s'", c.trace, c.db);
	cr_assert_eq(sh(&c, args), 1);
	char *e = slurp(c.err);
	snprintf(want, sizeof want, "%s:", c.trace);
	cr_assert(strstr(e, want), "%s", e);
	cr_assert(strstr(e, "free of unknown address 0xbad000"), "%s", e);
	free(e);
	struct stat sb;
	cr_assert_neq(stat(c.db, &sb), 0, "a failed run created the database");
	teardown(&c);
}

/* A trace cut short (a truncated gzip stream) is refused with its file and
 * line, nothing stored; --allow-incomplete replays it and says so. */
Test(cli_run, truncated_trace_is_refused_unless_allowed)
{
	struct cli c;
	char args[1024], gz[160];
	th_bin();
	setup(&c);
	snprintf(gz, sizeof gz, "%s.gz", c.trace);
	snprintf(args, sizeof args, "head -c 3000 traces/torch-truth/alexnet-b16-default.trace.gz > '%s'",
		 gz);
	cr_assert_eq(system(args), 0);
	snprintf(args, sizeof args, "run '%s' --policy pytorch --db '%s'", gz, c.db);
	cr_assert_eq(sh(&c, args), 1);
	char *e = slurp(c.err);
	char want[200];
	snprintf(want, sizeof want, "%s:", gz);
	cr_assert(strstr(e, want) && strstr(e, "cut short"), "%s", e);
	free(e);
	struct stat sb;
	cr_assert_neq(stat(c.db, &sb), 0, "a refused run created the database");
	snprintf(args, sizeof args, "run '%s' --policy pytorch --json --no-db --allow-incomplete",
		 gz);
	cr_assert_eq(sh(&c, args), 0);
	char *o = slurp(c.out);
	cr_assert(strstr(o, "\"complete\":false"), "%s", o);
	free(o);
	unlink(gz);
	teardown(&c);
}

Test(cli_run, usage_errors_exit_2)
{
	struct cli c;
	char args[512];
	th_bin();
	setup(&c);
	write_trace(c.trace, 0);
	cr_assert_eq(sh(&c, "run"), 2);
	snprintf(args, sizeof args, "run '%s'", c.trace);
	cr_assert_eq(sh(&c, args), 2);
	snprintf(args, sizeof args, "run '%s' --policy cuda_malloc --capacity lots", c.trace);
	cr_assert_eq(sh(&c, args), 2);
	snprintf(args, sizeof args, "run '%s' --policy cuda_malloc --addresses maybe", c.trace);
	cr_assert_eq(sh(&c, args), 2);
	snprintf(args, sizeof args, "run '%s' --policy cuda_malloc --frobnicate", c.trace);
	cr_assert_eq(sh(&c, args), 2);
	cr_assert_eq(sh(&c, "run --help"), 0);
	char *o = slurp(c.out);
	cr_assert(strstr(o, "results.db"), "--help does not name the default database");
	free(o);
	teardown(&c);
}

Test(cli_run, policies_lists_registry)
{
	struct cli c;
	th_bin();
	setup(&c);
	cr_assert_eq(sh(&c, "policies"), 0);
	char *o = slurp(c.out);
	cr_assert(strstr(o, "cuda_malloc"), "%s", o);
	free(o);
	cr_assert_eq(sh(&c, "policies --json"), 0);
	o = slurp(c.out);
	cr_assert_eq(o[0], '[');
	cr_assert(strstr(o, "{\"name\":\"cuda_malloc\",\"description\":"), "%s", o);
	cr_assert(strstr(o, "\"knobs\":[]"), "%s", o);
	free(o);
	cr_assert_eq(sh(&c, "policies --bogus"), 2);
	teardown(&c);
}

/* A setting that ran out of memory is no saving against its default:
 * the table says OOM where it would give a change, JSON gives null. */
Test(cli_run, table_never_counts_an_oom_as_a_saving)
{
	struct cli c;
	setup(&c);
	const char *t = "traces/torch/torch-resnet18-b16.trace.gz";
	char args[1024];
	snprintf(args, sizeof args, "run %s --policy pytorch --capacity 800MiB --db %s", t, c.db);
	cr_assert_eq(sh(&c, args), 0);
	snprintf(args, sizeof args, "run %s --policy pytorch --conf roundup_power2_divisions:4 "
		 "--capacity 800MiB --db %s", t, c.db);
	cr_assert_eq(sh(&c, args), 0, "an OOM is a result");
	snprintf(args, sizeof args, "table --db %s", c.db);
	cr_assert_eq(sh(&c, args), 0);
	char *out = slurp(c.out);
	const char *row = strstr(out, "roundup_power2_divisions:4");
	cr_assert_not_null(row, "%s", out);
	cr_assert(strstr(row, " yes        OOM\n"), "%s", row);
	cr_assert_null(strstr(row, "%"), "no percentage for an OOM run: %s", row);
	free(out);
	snprintf(args, sizeof args, "table --db %s --json", c.db);
	cr_assert_eq(sh(&c, args), 0);
	out = slurp(c.out);
	cr_assert(strstr(out, "\"oom\":true,\"change_vs_default\":null"), "%s", out);
	cr_assert(strstr(out, "\"oom\":false,\"change_vs_default\":0"), "%s", out);
	free(out);
	teardown(&c);
}

/* Users' question 8: runs replayed with --timing carry their predicted
 * step into the table, with its change against the default setting and
 * what bounds it; runs without it print as before. */
Test(cli_run, table_shows_the_predicted_step_of_timed_runs)
{
	struct cli c;
	setup(&c);
	const char *t = "traces/torch/torch-resnet18-b16.trace.gz";
	char args[1024];
	snprintf(args, sizeof args, "run %s --policy pytorch --timing --db %s", t, c.db);
	cr_assert_eq(sh(&c, args), 0);
	snprintf(args, sizeof args, "run %s --policy pytorch --conf garbage_collection_threshold:0.6,"
		 "fraction:0.005 --timing --db %s", t, c.db);
	cr_assert_eq(sh(&c, args), 0);
	snprintf(args, sizeof args, "run %s --policy cuda_malloc --db %s", t, c.db);
	cr_assert_eq(sh(&c, args), 0);
	snprintf(args, sizeof args, "table --db %s", c.db);
	cr_assert_eq(sh(&c, args), 0);
	char *out = slurp(c.out);
	const char *def = strstr(out, "(default)");
	const char *gc = strstr(out, "garbage_collection_threshold");
	const char *nc = strstr(out, "cuda_malloc");
	cr_assert(def && gc && nc, "%s", out);
	cr_assert(strstr(def, "  step ") && strstr(def, " ms "), "%s", out);
	cr_assert(strstr(gc, " ms +") || strstr(gc, " ms -"), "the change against default: %s", out);
	cr_assert(strstr(gc, "-bound\n"), "%s", out);
	const char *nc_end = strchr(nc, '\n');
	cr_assert_not_null(nc_end);
	const char *nc_step = strstr(nc, "step");
	cr_assert(!nc_step || nc_step > nc_end, "an untimed run has no step: %s", out);
	free(out);
	snprintf(args, sizeof args, "table --db %s --json", c.db);
	cr_assert_eq(sh(&c, args), 0);
	out = slurp(c.out);
	cr_assert(strstr(out, "\"step_change_vs_default\":0,"), "%s", out);
	cr_assert(strstr(out, "\"step_time_ns\":null,\"step_change_vs_default\":null,\"bound\":null"),
		  "the untimed run: %s", out);
	free(out);
	teardown(&c);
}

/* A size without a unit is an error, not that many bytes. */
Test(cli_run, capacity_without_a_unit_is_refused)
{
	struct cli c;
	setup(&c);
	write_trace(c.trace, 0);
	char args[1024];
	snprintf(args, sizeof args, "run %s --policy cuda_malloc --capacity 80 --db %s", c.trace, c.db);
	cr_assert_eq(sh(&c, args), 2);
	char *err = slurp(c.err);
	cr_assert(strstr(err, "--capacity '80'"), "%s", err);
	free(err);
	snprintf(args, sizeof args, "run %s --policy cuda_malloc --capacity 4096B --db %s", c.trace, c.db);
	cr_assert_eq(sh(&c, args), 0, "bytes with their unit are fine");
	snprintf(args, sizeof args, "sweep --traces %s --policies cuda_malloc --capacities 80 --db %s",
		 c.trace, c.db);
	cr_assert_eq(sh(&c, args), 2);
	teardown(&c);
}

/* Below the floor the offline plan itself does not fit: that is capacity,
 * not fragmentation with nothing live. */
Test(cli_run, optimal_below_the_floor_is_capacity)
{
	struct cli c;
	setup(&c);
	char args[1024];
	snprintf(args, sizeof args, "run traces/torch/torch-resnet18-b16.trace.gz --policy optimal "
		 "--capacity 1GiB --db %s --json", c.db);
	cr_assert_eq(sh(&c, args), 0, "an OOM is a result");
	char *out = slurp(c.out);
	cr_assert(strstr(out, "\"verdict\":\"capacity\""), "%s", out);
	free(out);
	snprintf(args, sizeof args, "run traces/torch/torch-resnet18-b16.trace.gz --policy optimal "
		 "--capacity 1GiB --db %s", c.db);
	cr_assert_eq(sh(&c, args), 0);
	out = slurp(c.out);
	cr_assert(strstr(out, "verdict: capacity: with 0 B live"), "%s", out);
	cr_assert_null(strstr(out, "verdict: fragmentation"), "%s", out);
	free(out);
	teardown(&c);
}

/* --label of import is checked as capture's is; nothing is written. */
Test(cli_run, import_refuses_a_bad_label)
{
	struct cli c;
	setup(&c);
	char args[1024];
	snprintf(args, sizeof args, "import torch-snapshot ../shared/data/torch-allocator-truth/"
		 "resnet18-b16-default.trace.gz --label nokey -o %s", c.trace);
	unlink(c.trace);
	cr_assert_eq(sh(&c, args), 2);
	char *err = slurp(c.err);
	cr_assert(strstr(err, "--label wants KEY=VALUE"), "%s", err);
	free(err);
	cr_assert_neq(access(c.trace, F_OK), 0, "nothing written");
	teardown(&c);
}
