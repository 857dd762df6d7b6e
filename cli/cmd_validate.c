/*
 * cmd_validate.c: `gpumemsim validate torch-truth|jax-truth|async-truth DIR`:
 * replay recorded runs of real allocators and compare with what they did
 * (docs/validation.md, docs/validation_bfc.md). The comparisons are the
 * library's (sim/validate_truth.c); this file parses the arguments and
 * prints a row per run as it comes, then the summary, text or JSON lines.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../include/gpumemsim.h"

/* ------------------------------------------------------------ torch-truth */

static void torch_event(const struct validate_report *rep, enum validate_event ev, size_t i,
			void *ctx)
{
	int as_json = *(const int *)ctx;
	struct json j;
	if (ev == VALIDATE_BEGIN) {
		if (!as_json)
			printf("%-52s %-5s %14s %14s %8s %13s %13s %9s  %s\n", "run", "exact",
			       "reserved_real", "reserved_sim", "rel_err", "alloc_real", "alloc_sim",
			       "dev_alloc", "first divergence");
		return;
	}
	const struct validate_torch_row *r = &rep->torch[i];
	if (as_json) {
		json_init(&j, stdout);  /* one document a line */
		json_begin_object(&j);
		json_kv_string(&j, "run", r->name);
		json_kv_bool(&j, "exact", r->exact);
		json_kv_u64(&j, "peak_reserved_real", r->res_real);
		json_kv_u64(&j, "peak_reserved_sim", r->res_sim);
		json_kv_double(&j, "peak_reserved_rel_err", r->rel_err);
		json_kv_u64(&j, "peak_allocated_real", r->alloc_real);
		json_kv_u64(&j, "peak_allocated_sim", r->alloc_sim);
		json_kv_u64(&j, "device_allocs_real", r->dalloc_real);
		json_kv_u64(&j, "device_allocs_sim", r->dalloc_sim);
		json_kv_u64(&j, "device_frees_real", r->dfree_real);
		json_kv_u64(&j, "device_frees_sim", r->dfree_sim);
		if (r->exact)
			json_key(&j, "first_divergence"), json_null(&j);
		else
			json_kv_string(&j, "first_divergence", r->why);
		json_end_object(&j);  /* ends the line itself */
	} else {
		printf("%-52s %-5s %14" PRIu64 " %14" PRIu64 " %7.3f%% %13" PRIu64 " %13" PRIu64
		       " %4" PRIu64 "/%-4" PRIu64 "  %s\n", r->name, r->exact ? "yes" : "no",
		       r->res_real, r->res_sim, 100.0 * r->rel_err, r->alloc_real, r->alloc_sim,
		       r->dalloc_real, r->dalloc_sim, r->exact ? "-" : r->why);
	}
	fflush(stdout);
}

static void torch_summary(const struct validate_report *rep, int as_json)
{
	struct json j;
	if (as_json) {
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "summary", "torch-truth");
		json_kv_string(&j, "addresses", rep->addresses);
		json_kv_u64(&j, "runs", rep->runs);
		json_kv_u64(&j, "exact_runs", rep->exact_runs);
		json_kv_double(&j, "peak_reserved_rel_err_median", rep->rel_err_median);
		json_kv_double(&j, "peak_reserved_rel_err_p90", rep->rel_err_p90);
		json_kv_double(&j, "peak_reserved_rel_err_max", rep->rel_err_max);
		json_end_object(&j);
	} else {
		printf("\nsummary (%s addresses): %zu runs, %zu exact; peak reserved relative "
		       "error: median %.3f%%, p90 %.3f%%, max %.3f%%\n", rep->addresses, rep->runs,
		       rep->exact_runs, 100 * rep->rel_err_median, 100 * rep->rel_err_p90,
		       100 * rep->rel_err_max);
	}
}

/* ------------------------------------------- jax-truth and async-truth */

static void pool_event(const struct validate_report *rep, enum validate_event ev, size_t i,
		       void *ctx)
{
	int as_json = *(const int *)ctx, jax = rep->kind == VALIDATE_JAX_TRUTH;
	struct json j;
	if (ev == VALIDATE_BEGIN) {
		if (!as_json)
			printf("%-28s %-5s %13s %13s %12s %12s %12s %7s %-26s %s\n", "run", "exact",
			       jax ? "pool_real" : "reserved_hi", jax ? "pool_sim" : "reserved_sim",
			       "diff", "inuse_real", "inuse_sim", "regions",
			       jax ? "real regions MiB" : "", "left out (allocs/bytes)");
		return;
	}
	const struct validate_pool_row *row = &rep->pool[i];
	if (ev == VALIDATE_SKIPPED) {
		fprintf(stderr, "gpumemsim validate: %s: the recorded run failed; skipped\n",
			row->name);
		return;
	}
	if (as_json) {
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "run", row->name);
		json_kv_bool(&j, "exact", row->exact);
		json_kv_u64(&j, jax ? "peak_pool_bytes_real" : "reserved_high_real", row->pool_real);
		json_kv_u64(&j, jax ? "peak_pool_bytes_sim" : "reserved_high_sim", row->pool_sim);
		json_kv_u64(&j, "peak_in_use_real", row->use_real);
		json_kv_u64(&j, "peak_in_use_sim", row->use_sim);
		if (row->have_regions)
			json_kv_u64(&j, "regions_real", row->reg_real);
		json_kv_u64(&j, "regions_sim", row->reg_sim);
		json_kv_u64(&j, "left_out_allocs", row->fs.dropped);
		json_kv_u64(&j, "left_out_bytes", row->fs.dropped_bytes);
		json_kv_u64(&j, "orphan_frees", row->fs.orphans);
		if (jax) {
			/* the run's limit, and the requests read as whole granules
			 * (sim_options.xla_requests, as `run` reads the capture) */
			json_kv_u64(&j, "bytes_limit", row->limit);
			json_kv_u64(&j, "requests_lowered", row->fs.granule_lowered);
		}
		json_end_object(&j);
	} else {
		char reg[32];
		if (row->have_regions)
			snprintf(reg, sizeof reg, "%" PRIu64 "/%" PRIu64, row->reg_real, row->reg_sim);
		else
			snprintf(reg, sizeof reg, "-/%" PRIu64, row->reg_sim);
		printf("%-28s %-5s %13" PRIu64 " %13" PRIu64 " %12" PRId64 " %12" PRIu64
		       " %12" PRIu64 " %7s %-26s %" PRIu64 "/%" PRIu64 "\n", row->name,
		       row->exact ? "yes" : "no", row->pool_real, row->pool_sim, row->diff,
		       row->use_real, row->use_sim, reg, row->have_regions ? row->regions : "-",
		       row->fs.dropped, row->fs.dropped_bytes);
	}
	fflush(stdout);
}

static void pool_summary(const struct validate_report *rep, const char *kind, int as_json)
{
	struct json j;
	if (as_json) {
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "summary", kind);
		json_kv_u64(&j, "runs", rep->runs);
		json_kv_u64(&j, "exact_runs", rep->exact_runs);
		json_end_object(&j);
	} else {
		printf("\nsummary (%s): %zu runs, %zu with peak %s reproduced exactly\n", kind,
		       rep->runs, rep->exact_runs,
		       rep->kind == VALIDATE_JAX_TRUTH ? "pool bytes (and regions)" : "reserved");
	}
}

/* The three ground truths share one parse loop and so one table. */
enum { VO_ADDRESSES, VO_JSON, VO_ONLY };

static const struct cli_opt validate_opts[] = {
	[VO_ADDRESSES] = {"--addresses", "MODE",
			  "torch-truth: replay at the recorded device addresses\n"
			  "(recorded, the default) or at synthetic ones (synthetic)"},
	[VO_JSON] = {"--json", NULL, "JSON lines: one object a run, then the summary"},
	[VO_ONLY] = {"--only", "SUBSTR", "only the runs whose file name contains SUBSTR"},
	CLI_OPT_END,
};

static void validate_usage(FILE *f)
{
	cli_usage(f, "validate torch-truth DIR [--addresses recorded|synthetic]\n"
		     "                                       [--json] [--only SUBSTR]",
		  "Replays every NAME.trace.gz in DIR (with NAME.json: conf, fraction,\n"
		  "total_memory, stats) through the pytorch policy and compares segment\n"
		  "sequences and peaks with the real allocator's. Exit 0 when it ran.\n\n"
		  "       gpumemsim validate jax-truth DIR [--json] [--only SUBSTR]\n"
		  "Replays every jax-*.trace.gz in DIR (XLA_PYTHON_CLIENT_ALLOCATOR=platform\n"
		  "captures) under bfc with allow_growth and the run's bytes_limit; compares\n"
		  "peak pool bytes, peak in use and regions with DIR/truth/NAME-growth.*.\n\n"
		  "       gpumemsim validate async-truth DIR [--json] [--only SUBSTR]\n"
		  "Replays each NAME.trace.gz (a backend:cudaMallocAsync capture) under\n"
		  "cuda_async; compares with the pool's reserved/used high-water marks.\n\n",
		  validate_opts, NULL);
}

/* Parse, run every selected recorded run, print rows and a summary. */
int cmd_validate(int argc, char **argv)
{
	const char *kind = NULL, *dir = NULL, *only = NULL;
	enum device_addr_mode mode = DEVICE_ADDR_RECORDED;
	int as_json = 0, rc = 1;
	for (int i = 1; i < argc; i++) {
		const struct cli_opt *opt;
		if (cli_is_help(argv[i])) {
			validate_usage(stdout);
			return 0;
		} else if ((opt = cli_opt_match(validate_opts, argv[i])) == &validate_opts[VO_JSON]) {
			as_json = 1;
		} else if (opt == &validate_opts[VO_ONLY] && i + 1 < argc) {
			only = argv[++i];
		} else if (opt == &validate_opts[VO_ADDRESSES] && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "recorded"))
				mode = DEVICE_ADDR_RECORDED;
			else if (!strcmp(argv[i], "synthetic"))
				mode = DEVICE_ADDR_SYNTHETIC;
			else {
				fprintf(stderr, "gpumemsim validate: --addresses: expected recorded "
					"or synthetic, got '%s'\n", argv[i]);
				return EXIT_USAGE;
			}
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "gpumemsim validate: unknown option '%s'\n", argv[i]);
			validate_usage(stderr);
			return EXIT_USAGE;
		} else if (!kind) {
			kind = argv[i];
		} else if (!dir) {
			dir = argv[i];
		} else {
			fprintf(stderr, "gpumemsim validate: unexpected argument '%s'\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!kind || !dir) {
		validate_usage(stderr);
		return EXIT_USAGE;
	}
	struct validate_opts o = { .only = only, .addresses = mode, .on_event = torch_event,
				   .ctx = &as_json };
	struct validate_report rep;
	char err[8400];
	int (*fn)(const char *, const struct validate_opts *, struct validate_report *, char *,
		  size_t);
	if (!strcmp(kind, "torch-truth")) {
		fn = validate_torch_truth;
	} else if (!strcmp(kind, "jax-truth") || !strcmp(kind, "async-truth")) {
		fn = !strcmp(kind, "jax-truth") ? validate_jax_truth : validate_async_truth;
		o.on_event = pool_event;
	} else {
		fprintf(stderr, "gpumemsim validate: unknown ground truth '%s' (known: torch-truth, "
			"jax-truth, async-truth)\n", kind);
		return EXIT_USAGE;
	}
	if (fn(dir, &o, &rep, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim validate: %s\n", err);
	} else {
		if (rep.kind == VALIDATE_TORCH_TRUTH)
			torch_summary(&rep, as_json);
		else
			pool_summary(&rep, kind, as_json);
		rc = 0;
	}
	validate_report_free(&rep);
	return rc;
}
