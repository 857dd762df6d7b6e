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

#include "../traces/trace.h"

struct cli {
	char trace[64], out[64], err[64], db[64];
};

static void tmpname(char *buf, size_t len, const char *stem)
{
	snprintf(buf, len, "/tmp/gpumemsim_cli_%s_XXXXXX", stem);
	int fd = mkstemp(buf);
	cr_assert(fd >= 0);
	close(fd);
}

static void rm_db(const char *p)
{
	char b[96];
	unlink(p);
	snprintf(b, sizeof b, "%s-wal", p);
	unlink(b);
	snprintf(b, sizeof b, "%s-shm", p);
	unlink(b);
}

static void mem(struct trace_writer *w, enum trace_rec_type type, uint64_t t, uint64_t addr,
		uint64_t bytes)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = type;
	r.start = r.end = t;
	r.u.mem.addr = addr;
	r.u.mem.bytes = bytes;
	r.u.mem.kind = TMEM_DEVICE;
	r.u.mem.source = TRACE_NO_STRING;
	cr_assert_eq(trace_writer_record(w, &r), 0);
}

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
	mem(w, TREC_ALLOC, 100, 0x1000, 100);
	mem(w, TREC_ALLOC, 110, 0x2000, 200);
	mem(w, TREC_FREE, 120, 0x1000, 0);
	mem(w, TREC_FREE, 130, bad ? 0xbad000 : 0x2000, 0);
	cr_assert_eq(trace_writer_close(w, 1, 0, err, sizeof err), 0, "%s", err);
}

static const char *bin(void)
{
	const char *b = getenv("GPUMEMSIM_BIN");
	if (!b || access(b, X_OK) != 0)
		cr_skip_test("GPUMEMSIM_BIN not set (run through make test)");
	return b;
}

static void setup(struct cli *c)
{
	tmpname(c->trace, sizeof c->trace, "trace");
	tmpname(c->out, sizeof c->out, "out");
	tmpname(c->err, sizeof c->err, "err");
	tmpname(c->db, sizeof c->db, "db");
	rm_db(c->db);
}

static void teardown(struct cli *c)
{
	unlink(c->trace);
	unlink(c->out);
	unlink(c->err);
	rm_db(c->db);
}

/* Run `gpumemsim ARGS`, stdout and stderr into files; the exit status. */
static int sh(struct cli *c, const char *args)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", bin(), args, c->out, c->err);
	int st = system(cmd);
	cr_assert(WIFEXITED(st), "%s did not exit", cmd);
	return WEXITSTATUS(st);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strdup(buf);
}

Test(cli_run, json_is_byte_identical)
{
	struct cli c;
	char args[512];
	bin();
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
	bin();
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
	bin();
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
	bin();
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
	bin();
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

Test(cli_run, usage_errors_exit_2)
{
	struct cli c;
	char args[512];
	bin();
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
	bin();
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
