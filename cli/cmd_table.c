/*
 * cmd_table.c: `gpumemsim table`: which allocator setting gives the lowest
 * peak (users' question 3). Reads the runs stored in a results database and
 * prints, per trace, every policy and setting with its peak reserved and
 * allocated bytes, the ratio to the floor (the peak of live requested bytes,
 * which no allocator beats), device malloc/free counts, retries, OOM, and
 * the change against the same policy's default setting, flagging settings
 * that make the peak worse.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../include/gpumemsim.h"

/* The latest run of each (trace, policy, conf, capacity), with its labels,
 * retries and its policy's default-setting peak for comparison. */
static const char table_sql[] =
	"SELECT r.trace_path,"
	" coalesce((SELECT value FROM run_labels WHERE run_id=r.id AND key='model'),''),"
	" coalesce((SELECT value FROM run_labels WHERE run_id=r.id AND key='batch'),''),"
	" r.policy, r.conf, r.peak_reserved, r.peak_allocated, r.peak_requested,"
	" r.device_allocs, r.device_frees,"
	" coalesce((SELECT value FROM run_stats WHERE run_id=r.id AND name='num_alloc_retries'),0),"
	" r.oom, r.capacity,"
	" (SELECT d.peak_reserved FROM runs d WHERE d.trace_crc32=r.trace_crc32"
	"   AND d.policy=r.policy AND d.conf='' AND d.capacity=r.capacity"
	"   ORDER BY d.id DESC LIMIT 1)"
	" FROM runs r"
	" WHERE r.id=(SELECT max(x.id) FROM runs x WHERE x.trace_crc32=r.trace_crc32"
	"   AND x.policy=r.policy AND x.conf=r.conf AND x.capacity=r.capacity)"
	" ORDER BY r.trace_path, r.capacity DESC, r.policy='optimal', r.policy, r.conf<>'', r.conf";

enum { C_PATH, C_MODEL, C_BATCH, C_POLICY, C_CONF, C_RES, C_ALLOC, C_REQ, C_DALLOC,
       C_DFREE, C_RETRY, C_OOM, C_CAP, C_DEFRES, C_N };

struct table_ctx {
	int json;
	struct json j;
	char last_path[4096];
};

static uint64_t col_u64(const char *s) { return s ? strtoull(s, NULL, 10) : 0; }

static int print_row(void *vctx, int ncols, const char *const *c)
{
	struct table_ctx *t = vctx;
	if (ncols < C_N)
		return 1;
	uint64_t res = col_u64(c[C_RES]), req = col_u64(c[C_REQ]);
	double vs_floor = req ? (double)res / (double)req : 0.0;
	double vs_def = c[C_DEFRES] && col_u64(c[C_DEFRES])
				? (double)res / (double)col_u64(c[C_DEFRES]) - 1.0 : 0.0;
	if (t->json) {
		json_begin_object(&t->j);
		json_kv_string(&t->j, "trace", c[C_PATH]);
		json_kv_string(&t->j, "model", c[C_MODEL]);
		json_kv_string(&t->j, "batch", c[C_BATCH]);
		json_kv_string(&t->j, "policy", c[C_POLICY]);
		json_kv_string(&t->j, "conf", c[C_CONF]);
		json_kv_u64(&t->j, "capacity", col_u64(c[C_CAP]));
		json_kv_u64(&t->j, "peak_reserved", res);
		json_kv_u64(&t->j, "peak_allocated", col_u64(c[C_ALLOC]));
		json_kv_u64(&t->j, "floor", req);
		json_kv_double(&t->j, "reserved_over_floor", vs_floor);
		json_kv_u64(&t->j, "device_allocs", col_u64(c[C_DALLOC]));
		json_kv_u64(&t->j, "device_frees", col_u64(c[C_DFREE]));
		json_kv_u64(&t->j, "num_alloc_retries", col_u64(c[C_RETRY]));
		json_kv_bool(&t->j, "oom", col_u64(c[C_OOM]) != 0);
		json_key(&t->j, "change_vs_default");
		if (c[C_DEFRES])
			json_double(&t->j, vs_def);
		else
			json_null(&t->j);
		json_end_object(&t->j);
		return 0;
	}
	char b1[32], b2[32], b3[32], b4[32];
	if (strcmp(t->last_path, c[C_PATH])) {
		snprintf(t->last_path, sizeof t->last_path, "%s", c[C_PATH]);
		printf("\n%s%s%s%s%s  (floor: peak of live requests %s)\n", c[C_PATH],
		       *c[C_MODEL] ? "  model=" : "", c[C_MODEL], *c[C_BATCH] ? "  batch=" : "",
		       c[C_BATCH], size_fmt(req, b1, sizeof b1));
		printf("  %-10s %-12s %-46s %12s %12s %9s %8s %8s %7s %4s %10s\n", "device",
		       "policy", "setting", "reserved", "allocated", "res/floor", "dev.mal", "dev.free", "retries",
		       "OOM", "vs default");
	}
	char vs[32] = "";
	if (c[C_DEFRES] && *c[C_CONF])
		snprintf(vs, sizeof vs, "%+.1f%%%s", 100.0 * vs_def, vs_def > 0.005 ? " WORSE" : "");
	printf("  %-10s %-12s %-46s %12s %12s %9.3f %8" PRIu64 " %8" PRIu64 " %7" PRIu64 " %4s %10s\n",
	       size_fmt(col_u64(c[C_CAP]), b4, sizeof b4), c[C_POLICY], *c[C_CONF] ? c[C_CONF] : "(default)", size_fmt(res, b2, sizeof b2),
	       size_fmt(col_u64(c[C_ALLOC]), b3, sizeof b3), vs_floor, col_u64(c[C_DALLOC]),
	       col_u64(c[C_DFREE]), col_u64(c[C_RETRY]), col_u64(c[C_OOM]) ? "yes" : "no", vs);
	return 0;
}

static const struct cli_opt table_opts[] = {
	{"--db", "FILE", "results database (default " CLI_DEFAULT_DB ")"},
	{"--json", NULL, "one JSON array of row objects on stdout"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "table [--db results.db] [--json]",
		  "Per trace, every stored policy and setting: peak reserved and allocated,\n"
		  "reserved over the floor (peak of live requested bytes, which no allocator\n"
		  "beats), device malloc/free counts, alloc retries, OOM, and the change against\n"
		  "the same policy's default setting (WORSE when a setting raises the peak).\n"
		  "The latest run of each trace/policy/setting/capacity is shown.\n",
		  table_opts, NULL);
}

int cmd_table(int argc, char **argv)
{
	const char *db = CLI_DEFAULT_DB;
	struct table_ctx t = {0};
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--db") && i + 1 < argc) {
			db = argv[++i];
		} else if (!strcmp(argv[i], "--json")) {
			t.json = 1;
		} else {
			fprintf(stderr, "gpumemsim table: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (access(db, R_OK) != 0) {
		fprintf(stderr, "gpumemsim table: %s: no such results database (run `gpumemsim run` first)\n", db);
		return 1;
	}
	char err[512];
	struct store *s = store_open(db, err, sizeof err);
	if (!s) {
		fprintf(stderr, "gpumemsim table: %s\n", err);
		return 1;
	}
	if (t.json) {
		json_init(&t.j, stdout);
		json_begin_array(&t.j);
	}
	int n = store_query(s, table_sql, NULL, 0, print_row, &t, err, sizeof err);
	if (t.json)
		json_end_array(&t.j);
	store_close(s);
	if (n < 0) {
		fprintf(stderr, "gpumemsim table: %s\n", err);
		return 1;
	}
	if (n == 0 && !t.json)
		printf("%s: no runs stored\n", db);
	return 0;
}
