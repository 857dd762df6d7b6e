/*
 * cmd_explain.c: `gpumemsim explain batch T1 T2 ...`: why peak memory moves
 * with batch size (the seed question). The options are parsed here, the
 * replays and the attribution made by explain_batch() (whatif/explain.h
 * says how the peak is split and a cause named), and the tables printed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_whatif.h"
#include "../include/gpumemsim.h"

#define MAX_POINTS EXPLAIN_MAX_POINTS

/* Every option the parse loop accepts. */
static const struct cli_opt explain_opts[] = {
	{"--policy", "NAME", "allocator policy (default pytorch)"},
	{"--conf", "STRING", "the policy's knobs"},
	{"--capacity", "SIZE", "device memory (default: the trace's, else unlimited)"},
	{"--steady", NULL,
	 "from the NVTX range \"step 1\" on (whatif steady): the\n"
	 "peaks without the first step's autotuning"},
	{"--from-range", "N", "the same from the first range named N"},
	{"--json", NULL, "one JSON object on stdout instead of the tables"},
	{"--context", "SIZE",
	 "device memory outside every allocation (CUDA context, module code,\n"
	 "library handles) for the nvidia-smi view (default 622MiB, the H200 runs)"},
	{"--figure", "FILE", "draw the regions/segments held at each peak against the live\n"
	 "bytes, flagged points marked (.png or .svg; needs gnuplot)"},
	{"--figure-data", "DIR", "keep the figure's gnuplot script and data in DIR"},
	{"--xla-requests", "MODE", CLI_XLA_REQUESTS_HELP},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "explain batch T1 T2 [T3...] [--policy P] [--conf C] [options]",
		  "Replay each capture of a batch sweep (labels 'batch=N') and explain how peak\n"
		  "reserved memory changes between neighbouring batch sizes. Each peak is split\n"
		  "at its moment into what was live (workspace, per layer from NVTX ranges;\n"
		  "activations; gradients; weights and optimizer state; other: kinds as in\n"
		  "docs/schema.md, peak_live), the policy's rounding, and cached/frag (reserved\n"
		  "but not allocated). Points where the peak falls while batch grows, or jumps\n"
		  "more than its neighbours, are flagged with the term that moved most, and,\n"
		  "where the policy reports its decisions (bfc, pytorch, cuda_async, caching),\n"
		  "with the mechanism in its own words: the region or segment one batch needed\n"
		  "that the other did not, why it had that size, what was free when it was\n"
		  "taken; and what nvidia-smi would show (reserved + memory outside the\n"
		  "allocator + the CUDA context).\n\n",
		  explain_opts,
		  "\nExit status: 0 ok, 1 failure (bad trace: file:line, bad knob), 2 usage.\n");
}

/* explain batch: exit codes as cli.h says. */
int cmd_explain(int argc, char **argv)
{
	char *paths[MAX_POINTS];
	struct explain_result *res = NULL;
	size_t np = 0;
	const char *policy = "pytorch", *conf = NULL, *from_range = NULL;
	const char *figure = NULL, *figure_data = NULL;
	uint64_t capacity = 0, context = 0;
	int json = 0, ret = 1, xla = SIM_XLA_AUTO;
	char err[1536];

	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	if (argc < 2 || strcmp(argv[1], "batch")) {
		fprintf(stderr, "gpumemsim explain: expected 'batch' (explain batch T1 T2 ...)\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i];
		if (o[0] == '-' && o[1] && !cli_opt_match(explain_opts, o)) {
			fprintf(stderr, "gpumemsim explain: unknown option '%s'\n", o);
			return EXIT_USAGE;
		} else if (!strcmp(o, "--json")) {
			json = 1;
		} else if (!strcmp(o, "--steady")) {
			from_range = "step 1";
		} else if (!strcmp(o, "--policy") || !strcmp(o, "--conf") || !strcmp(o, "--capacity") ||
			   !strcmp(o, "--from-range") || !strcmp(o, "--context") ||
			   !strcmp(o, "--figure") || !strcmp(o, "--figure-data") ||
			   !strcmp(o, "--xla-requests")) {
			const char *v;
			if (cli_take_value("gpumemsim explain", argc, argv, &i, &v) < 0)
				return EXIT_USAGE;
			if (!strcmp(o, "--policy"))
				policy = v;
			else if (!strcmp(o, "--from-range"))
				from_range = v;
			else if (!strcmp(o, "--conf"))
				conf = v;
			else if (!strcmp(o, "--figure"))
				figure = v;
			else if (!strcmp(o, "--figure-data"))
				figure_data = v;
			else if (!strcmp(o, "--xla-requests")) {
				if (cli_parse_xla_requests("explain", v, &xla))
					return EXIT_USAGE;
			}
			else if (!strcmp(o, "--context")) {
				if (conf_size_with_unit(v, &context) < 0 || !context) {
					fprintf(stderr, "gpumemsim explain: --context '%s': expected a "
						"size such as 622MiB\n", v);
					return EXIT_USAGE;
				}
			} else if (conf_size_with_unit(v, &capacity) < 0 || !capacity) {
				fprintf(stderr, "gpumemsim explain: --capacity '%s': expected a size such "
					"as 80GiB\n", v);
				return EXIT_USAGE;
			}
		} else {
			if (np == MAX_POINTS) {
				fprintf(stderr, "gpumemsim explain: at most %d traces\n", MAX_POINTS);
				return EXIT_USAGE;
			}
			paths[np++] = argv[i];
		}
	}
	if (np < 2) {
		fprintf(stderr, "gpumemsim explain batch: needs two or more traces of a batch sweep\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	const struct alloc_policy *pol = whatif_policy("explain", policy);
	if (!pol)
		return 1;
	res = malloc(sizeof *res);
	if (!res) {
		fprintf(stderr, "gpumemsim explain: out of memory\n");
		goto out;
	}
	if (figure && plot_format_from_path(figure) < 0) {
		fprintf(stderr, "gpumemsim explain: --figure %s: the name must end in .png or .svg\n",
			figure);
		ret = EXIT_USAGE;
		goto out;
	}
	struct explain_options eo = {.policy = pol, .conf = conf, .capacity = capacity,
				     .from_range = from_range, .context = context,
				     .xla_requests = (enum sim_xla_mode)xla};
	int er = explain_batch(paths, np, &eo, res, err, sizeof err);
	const struct explain_point *p = res->p;
	const struct explain_step *st = res->st;
	/* the replays that ran out of memory, in the order given */
	for (size_t k = 0; k < res->np; k++)
		for (size_t i = 0; i < res->np; i++)
			if (p[i].arg == k && p[i].oom)
				fprintf(stderr, "gpumemsim explain: warning: %s runs out of memory under "
					"%s; its peak is what fitted\n", p[i].path, policy);
	if (er < 0) {
		fprintf(stderr, "gpumemsim explain: %s\n", err);
		goto out;
	}
	if (figure && plot_regions(res, policy, conf, figure, figure_data, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim explain: --figure: %s\n", err);
		goto out;
	}
	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "policy", policy);
		json_kv_string(&j, "conf", conf ? conf : "");
		json_key(&j, "points");
		json_begin_array(&j);
		for (size_t i = 0; i < np; i++) {
			json_begin_object(&j);
			json_kv_string(&j, "trace", p[i].path);
			json_kv_u64(&j, "batch", p[i].batch);
			json_kv_u64(&j, "peak_reserved", p[i].reserved);
			json_kv_u64(&j, "allocated", p[i].allocated);
			json_kv_u64(&j, "peak_line", p[i].peak_line);
			json_kv_string(&j, "moment", p[i].first_reach ? "first_reach" : "most_allocated");
			for (int k = EX_WORKSPACE; k < EX_NTERMS; k++)
				json_kv_u64(&j, explain_term_keys[k], p[i].term[k]);
			json_key(&j, "kinds");
			json_begin_object(&j);
			for (int k = 0; k < SIM_LK_COUNT; k++)
				json_kv_u64(&j, sim_live_kind_name((enum sim_live_kind)k), p[i].kind[k]);
			json_end_object(&j);
			json_key(&j, "workspaces");
			json_begin_object(&j);
			for (size_t g = 0; g < p[i].nws; g++)
				json_kv_u64(&j, p[i].ws[g].name, p[i].ws[g].bytes);
			json_end_object(&j);
			const struct explain_mech *x = &p[i].mech;
			json_kv_u64(&j, "device_peak", x->device_peak);
			json_kv_u64(&j, "outside_allocator_peak", x->foreign_peak);
			json_kv_u64(&j, "device_with_context", x->device_peak + x->context);
			if (x->have) {
				json_key(&j, "held");
				json_begin_array(&j);
				for (size_t h = 0; h < x->nhold; h++) {
					const struct explain_hold *q = &x->hold[h];
					json_begin_object(&j);
					json_kv_string(&j, "what", q->what);
					json_kv_u64(&j, "nth", q->nth);
					json_kv_u64(&j, "bytes", q->bytes);
					json_kv_u64(&j, "live", q->live);
					json_kv_string(&j, "why", q->why);
					json_kv_u64(&j, "request", q->request);
					json_kv_string(&j, "request_range", q->origin);
					json_kv_u64(&j, "free_then", q->free_then);
					json_kv_u64(&j, "largest_free_then", q->largest_then);
					json_kv_u64(&j, "line", q->line);
					json_end_object(&j);
				}
				json_end_array(&j);
				json_kv_u64(&j, "held_count", x->nheld);
				json_kv_u64(&j, "held_rest_bytes", x->rest_bytes);
				json_kv_u64(&j, "releases_before_peak", x->nrel);
				json_kv_u64(&j, "released_before_peak", x->rel_bytes);
			}
			json_end_object(&j);
		}
		json_end_array(&j);
		json_key(&j, "steps");
		json_begin_array(&j);
		for (size_t i = 0; i + 1 < np; i++) {
			json_begin_object(&j);
			json_kv_u64(&j, "from", p[i].batch);
			json_kv_u64(&j, "to", p[i + 1].batch);
			for (int k = 0; k < EX_NTERMS; k++) {
				char key[48];
				snprintf(key, sizeof key, "d_%s", explain_term_keys[k]);
				json_kv_i64(&j, key, st[i].d[k]);
			}
			json_kv_string(&j, "flag", st[i].flag);
			json_kv_string(&j, "cause", st[i].cause);
			json_kv_string(&j, "detail", st[i].detail);
			json_kv_string(&j, "mechanism", st[i].mechanism);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
		fputc('\n', stdout);
		ret = 0;
		goto out;
	}
	/* the table's column heads, in explain_term order after allocated */
	static const char *const head[EX_NTERMS] = {
		"reserved", "workspace", "activations", "gradients", "weights+opt", "other",
		"rounding", "cached/frag"};
	char b[32];
	printf("peak reserved under %s%s%s, split at the moment of the peak (of the moments\n"
	       "reserved is at its peak, the one with most allocated):\n"
	       "reserved = allocated + cached/frag; allocated = workspace + activations + gradients\n"
	       "+ weights+opt + other + rounding (bytes requested by each kind; rounding: the\n"
	       "blocks' bytes above their requests)\n\n", policy, conf ? " conf " : "", conf ? conf : "");
	printf("%6s %11s %11s", "batch", head[EX_RESERVED], "allocated");
	for (int k = EX_WORKSPACE; k < EX_NTERMS; k++)
		printf(" %11s", head[k]);
	printf("\n");
	for (size_t i = 0; i < np; i++) {
		printf("%6" PRIu64 " %11s", p[i].batch, size_fmt(p[i].reserved, b, sizeof b));
		printf(" %11s", size_fmt(p[i].allocated, b, sizeof b));
		for (int k = EX_WORKSPACE; k < EX_NTERMS; k++)
			printf(" %11s", size_fmt(p[i].term[k], b, sizeof b));
		printf("\n");
	}
	printf("\n%-13s", "batch");
	for (int k = 0; k < EX_NTERMS; k++) {
		char h[24];
		snprintf(h, sizeof h, "d %s", head[k]);
		printf(" %12s", h);
	}
	printf("  %-8s %s\n", "flag", "cause");
	for (size_t i = 0; i + 1 < np; i++) {
		char range[32];
		snprintf(range, sizeof range, "%" PRIu64 " -> %" PRIu64, p[i].batch, p[i + 1].batch);
		printf("%-13s", range);
		for (int k = 0; k < EX_NTERMS; k++)
			printf(" %12s", explain_fmt_delta(st[i].d[k], b, sizeof b));
		printf("  %-8s %s%s%s%s\n", st[i].flag[0] ? st[i].flag : "-", st[i].cause,
		       st[i].detail[0] ? " (" : "", st[i].detail, st[i].detail[0] ? ")" : "");
	}
	size_t nflag = 0;
	for (size_t i = 0; i + 1 < np; i++)
		nflag += st[i].flag[0] != 0;
	printf("\n%zu flagged point(s): FALLS = peak reserved falls while batch grows; JUMP = its "
	       "slope is more than twice its neighbours'; WS-FALLS = the workspace live at the peak "
	       "falls while batch grows\n", nflag);
	if (nflag) {
		printf("\nmechanism (the policy's own decisions at the peak):\n");
		for (size_t i = 0; i + 1 < np; i++) {
			if (!st[i].flag[0])
				continue;
			printf("%s %" PRIu64 " -> %" PRIu64 ": %s\n", st[i].flag, p[i].batch, p[i + 1].batch,
			       st[i].mechanism[0] ? st[i].mechanism : "(the policy reports no decisions)");
		}
	}
	ret = 0;
out:
	free(res);
	return ret;
}
