/*
 * cmd_table.c: `gpumemsim table`: which allocator setting gives the lowest
 * peak (users' question 3). Reads the runs stored in a results database and
 * prints, per trace, every policy and setting with its peak reserved and
 * allocated bytes, the ratio to the floor (the peak of live requested bytes,
 * which no allocator beats), device malloc/free counts, retries, OOM, and
 * the change against the same policy's default setting, flagging settings
 * that make the peak worse; for runs replayed with --timing, the predicted
 * step time and its change against the default (users' question 8: what a
 * memory-saving setting costs in time). The query and its rows:
 * sim/store_table.c; this file prints them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../include/gpumemsim.h"

struct table_ctx {
	int json;
	struct json j;
	char last_path[4096];
};

static double step_change(const struct store_table_row *r)
{
	return (double)r->step_time_ns / (double)r->default_step_time_ns - 1.0;
}

/* "  step 30.23 ms +24.5% host-bound" for a run with a predicted step */
static void print_step(const struct store_table_row *r)
{
	if (!r->step_time_ns)
		return;
	printf("  step %.2f ms", (double)r->step_time_ns / 1e6);
	if (*r->conf && r->default_step_time_ns)
		printf(" %+.1f%%", 100.0 * step_change(r));
	if (r->has_busy)
		printf(" %s", sim_gpu_bound(r->gpu_busy_fraction) ? "GPU-bound" : "host-bound");
}

static int print_row(void *vctx, const struct store_table_row *r)
{
	struct table_ctx *t = vctx;
	uint64_t res = r->peak_reserved, req = r->peak_requested;
	double vs_floor = req ? (double)res / (double)req : 0.0;
	double vs_def = r->has_default && r->default_peak_reserved
				? (double)res / (double)r->default_peak_reserved - 1.0 : 0.0;
	/* A run that ran out of memory stopped growing where it failed: its
	 * peak is no saving, and against a default that failed, no change
	 * in peak means anything either. */
	const char *no_vs = r->oom ? "OOM" : r->has_default && r->default_oom ? "default OOM" : NULL;
	if (t->json) {
		json_begin_object(&t->j);
		json_kv_string(&t->j, "trace", r->trace_path);
		json_kv_string(&t->j, "model", r->model);
		json_kv_string(&t->j, "batch", r->batch);
		json_kv_string(&t->j, "policy", r->policy);
		json_kv_string(&t->j, "conf", r->conf);
		json_kv_u64(&t->j, "capacity", r->capacity);
		json_kv_u64(&t->j, "peak_reserved", res);
		json_kv_u64(&t->j, "peak_allocated", r->peak_allocated);
		json_kv_u64(&t->j, "floor", req);
		json_kv_double(&t->j, "reserved_over_floor", vs_floor);
		json_kv_u64(&t->j, "device_allocs", r->device_allocs);
		json_kv_u64(&t->j, "device_frees", r->device_frees);
		json_kv_u64(&t->j, "num_alloc_retries", r->num_alloc_retries);
		json_kv_bool(&t->j, "oom", r->oom);
		json_key(&t->j, "change_vs_default");
		if (r->has_default && !no_vs)
			json_double(&t->j, vs_def);
		else
			json_null(&t->j);
		json_key(&t->j, "step_time_ns");
		if (r->step_time_ns)
			json_u64(&t->j, r->step_time_ns);
		else
			json_null(&t->j);
		json_key(&t->j, "step_change_vs_default");
		if (r->step_time_ns && r->default_step_time_ns)
			json_double(&t->j, step_change(r));
		else
			json_null(&t->j);
		json_key(&t->j, "bound");
		if (r->step_time_ns && r->has_busy)
			json_string(&t->j, sim_gpu_bound(r->gpu_busy_fraction) ? "gpu" : "host");
		else
			json_null(&t->j);
		json_end_object(&t->j);
		return 0;
	}
	char b1[32], b2[32], b3[32], b4[32];
	if (strcmp(t->last_path, r->trace_path)) {
		snprintf(t->last_path, sizeof t->last_path, "%s", r->trace_path);
		printf("\n%s%s%s%s%s  (floor: peak of live requests %s)\n", r->trace_path,
		       *r->model ? "  model=" : "", r->model, *r->batch ? "  batch=" : "",
		       r->batch, size_fmt(req, b1, sizeof b1));
		printf("  %-10s %-12s %-46s %12s %12s %9s %8s %8s %7s %4s %10s\n", "device",
		       "policy", "setting", "reserved", "allocated", "res/floor", "dev.mal", "dev.free", "retries",
		       "OOM", "vs default");
	}
	char vs[32] = "";
	if (r->has_default && *r->conf && no_vs)
		snprintf(vs, sizeof vs, "%s", no_vs);
	else if (r->has_default && *r->conf)
		snprintf(vs, sizeof vs, "%+.1f%%%s", 100.0 * vs_def, vs_def > 0.005 ? " WORSE" : "");
	printf("  %-10s %-12s %-46s %12s %12s %9.3f %8" PRIu64 " %8" PRIu64 " %7" PRIu64 " %4s %10s",
	       size_fmt(r->capacity, b4, sizeof b4), r->policy, *r->conf ? r->conf : "(default)", size_fmt(res, b2, sizeof b2),
	       size_fmt(r->peak_allocated, b3, sizeof b3), vs_floor, r->device_allocs,
	       r->device_frees, r->num_alloc_retries, r->oom ? "yes" : "no", vs);
	print_step(r);
	printf("\n");
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
		  "the same policy's default setting (WORSE when a setting raises the peak;\n"
		  "no change is given where either run ran out of memory: OOM, default OOM).\n"
		  "Runs replayed with --timing (run, sweep) add the predicted step time, its\n"
		  "change against the default setting, and whether the GPU or the host bounds\n"
		  "it (`--json`: step_time_ns, step_change_vs_default, bound).\n"
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
	int n = store_table_query(s, print_row, &t, err, sizeof err);
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
