/*
 * cmd_fuse.c: `gpumemsim fuse TRACE [--rules FILE] [--rule NAME...] [-o OUT]`:
 * the kernel-fusion what-if (whatif/fusion.h does the work). Prints, per
 * rule (alone) and for all rules together, the kernels fused, buffers and
 * bytes eliminated, and the predicted change in peak live bytes and in
 * total kernel time; writes the fused trace for `gpumemsim run`.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/gpumemsim.h"
#include "cli.h"

#define MAX_RULE_ARGS FUSION_MAX_RULES

/* Every option the parse loop accepts. */
static const struct cli_opt fuse_opts[] = {
	{"--rules", "FILE",
	 "rule file (docs/fusion.md; default: the builtin\n"
	 "element-wise rules, traces/fusion_rules/elementwise.rules)"},
	{"--rule", "NAME", "use only this rule of the file (repeatable)"},
	{"-o", "OUT", "write the fused trace (.gz compresses; atomically)"},
	{"--bandwidth", "BW",
	 "memory bandwidth for the duration model, e.g. 4.8TB/s,\n"
	 "900GB/s (default: measured from the trace's element-wise\n"
	 "kernels)"},
	{"--trust-links", NULL,
	 "also eliminate buffers live across kernels without links,\n"
	 "copies or memsets (by default these might use them)"},
	{"--peak-in", "GLOB",
	 "count peaks only inside NVTX ranges whose name matches\n"
	 "GLOB, e.g. 'step [2-9]*' for the steady state"},
	{"--json", NULL, "the report as one JSON object on stdout"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "fuse TRACE [--rules FILE] [--rule NAME]... [-o OUT] [options]",
		  "Fuse kernel chains the rules match (an element-wise kernel into the kernel\n"
		  "before it on its stream, chains of them) where the kernel-to-buffer links show\n"
		  "an intermediate buffer only the chain touches: that buffer is never allocated\n"
		  "and the fused kernel saves its traffic (2 x its bytes) at the bandwidth.\n"
		  "Reports per rule the kernels fused, buffers and bytes eliminated and the\n"
		  "predicted change in peak live bytes and total kernel time.\n\n",
		  fuse_opts,
		  "\nThen: gpumemsim run OUT --policy pytorch   gives the policy-level peak.\n"
		  "Exit status: 0 ok, 1 failure (bad trace: file:line; bad rule file: file:line),\n"
		  "2 usage.\n");
}

static int64_t delta(uint64_t after, uint64_t before)
{
	return (int64_t)after - (int64_t)before;
}

static void json_stats(struct json *j, const struct fusion_stats *s, int full)
{
	json_begin_object(j);
	json_kv_u64(j, "fused_kernels", s->groups);
	json_kv_u64(j, "kernels_fused", s->kernels_fused);
	json_kv_u64(j, "buffers_eliminated", s->buffers_eliminated);
	json_kv_u64(j, "bytes_eliminated", s->bytes_eliminated);
	if (full) {
		json_kv_u64(j, "peak_before", s->peak_before);
		json_kv_u64(j, "peak_after", s->peak_after);
		json_kv_i64(j, "peak_change", delta(s->peak_after, s->peak_before));
		json_kv_double(j, "peak_change_pct", cli_change_pct(s->peak_after, s->peak_before));
		json_kv_u64(j, "kernel_time_before_ns", s->ktime_before);
		json_kv_u64(j, "kernel_time_after_ns", s->ktime_after);
		json_kv_i64(j, "kernel_time_change_ns", delta(s->ktime_after, s->ktime_before));
		json_kv_double(j, "kernel_time_change_pct", cli_change_pct(s->ktime_after, s->ktime_before));
	}
	json_end_object(j);
}

static void print_json(const char *trace, const char *out, const char *peak_in,
		       const struct fusion_rules *rs, const struct fusion_report *r)
{
	struct json j;
	json_init(&j, stdout);
	json_begin_object(&j);
	json_kv_string(&j, "trace", trace);
	json_key(&j, "output");
	if (out)
		json_string(&j, out);
	else
		json_null(&j);
	json_kv_string(&j, "rules", rs->origin);
	json_kv_double(&j, "bandwidth_bytes_per_s", r->bandwidth);
	json_kv_string(&j, "bandwidth_source", r->bandwidth_source);
	json_kv_u64(&j, "bandwidth_samples", r->bandwidth_samples);
	json_kv_u64(&j, "kernels", r->kernels);
	json_kv_u64(&j, "kernels_with_links", r->kernels_linked);
	json_kv_u64(&j, "allocations", r->allocs);
	json_kv_u64(&j, "allocations_exposed", r->exposed_allocs);
	json_key(&j, "peak_in");
	if (peak_in)
		json_string(&j, peak_in);
	else
		json_null(&j);
	json_key(&j, "all");
	json_stats(&j, &r->all, 1);
	json_key(&j, "per_rule");
	json_begin_array(&j);
	for (size_t i = 0; i < r->nrules; i++) {
		json_begin_object(&j);
		json_kv_string(&j, "rule", rs->v[i].name);
		json_kv_u64(&j, "line", rs->v[i].line);
		json_key(&j, "alone");
		json_stats(&j, &r->alone[i], 1);
		json_key(&j, "share_of_all");
		json_stats(&j, &r->share[i], 0);
		json_end_object(&j);
	}
	json_end_array(&j);
	json_end_object(&j);
	fputc('\n', stdout);
}

static void print_row(const char *name, const struct fusion_stats *s)
{
	char b[32];
	printf("%-28s %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %11s %+12" PRId64 " %+7.2f%% %+10.3f %+7.2f%%\n",
	       name, s->groups, s->kernels_fused, s->buffers_eliminated,
	       size_fmt(s->bytes_eliminated, b, sizeof b),
	       delta(s->peak_after, s->peak_before), cli_change_pct(s->peak_after, s->peak_before),
	       (double)delta(s->ktime_after, s->ktime_before) / 1e6,
	       cli_change_pct(s->ktime_after, s->ktime_before));
}

static void print_text(const char *trace, const char *out, const char *peak_in,
		       const struct fusion_rules *rs, const struct fusion_report *r)
{
	char b1[32], b2[32];
	printf("trace       %s: %" PRIu64 " kernels (%" PRIu64 " with links), %" PRIu64
	       " allocations (%" PRIu64 " live across an opaque kernel/copy: kept)\n",
	       trace, r->kernels, r->kernels_linked, r->allocs, r->exposed_allocs);
	printf("rules       %s (%zu)\n", rs->origin, rs->n);
	printf("bandwidth   %.1f GB/s (%s", r->bandwidth / 1e9, r->bandwidth_source);
	if (!strcmp(r->bandwidth_source, "measured"))
		printf(": median of %zu element-wise kernels", r->bandwidth_samples);
	printf(")\n");
	printf("peak live   %s -> %s (requested bytes, all rules%s%s%s)\n",
	       size_fmt(r->all.peak_before, b1, sizeof b1),
	       size_fmt(r->all.peak_after, b2, sizeof b2), peak_in ? "; inside ranges '" : "",
	       peak_in ? peak_in : "", peak_in ? "'" : "");
	printf("kernel time %.3f ms -> %.3f ms\n\n", r->all.ktime_before / 1e6,
	       r->all.ktime_after / 1e6);
	printf("%-28s %7s %7s %7s %11s %12s %8s %10s %8s\n", "rule (alone)", "fused", "kernels",
	       "buffers", "bytes", "peak B", "peak", "time ms", "time");
	for (size_t i = 0; i < r->nrules; i++)
		print_row(rs->v[i].name, &r->alone[i]);
	print_row("ALL", &r->all);
	if (out)
		printf("\nwrote %s\n", out);
}

/* fuse: exit codes as cli.h says. */
int cmd_fuse(int argc, char **argv)
{
	const char *trace = NULL, *rules_path = NULL, *out = NULL;
	char *names[MAX_RULE_ARGS];
	size_t nnames = 0;
	struct fusion_options opt = {0};
	struct fusion_rules rs;
	struct fusion_report rep;
	int json = 0, ret = 1;
	char err[2048];

	memset(&rs, 0, sizeof rs);
	memset(&rep, 0, sizeof rep);
	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v;
		if (cli_take_opt("gpumemsim fuse", fuse_opts, argc, argv, &i, &v) < 0)
			return EXIT_USAGE;
		if (!strcmp(o, "--rules")) {
			rules_path = v;
		} else if (!strcmp(o, "--rule")) {
			if (nnames == MAX_RULE_ARGS) {
				fprintf(stderr, "gpumemsim fuse: at most %d --rule\n", MAX_RULE_ARGS);
				return EXIT_USAGE;
			}
			names[nnames++] = (char *)v;
		} else if (!strcmp(o, "-o")) {
			out = v;
		} else if (!strcmp(o, "--bandwidth")) {
			if (cli_parse_bandwidth(v, &opt.bandwidth) < 0) {
				fprintf(stderr, "gpumemsim fuse: --bandwidth '%s': expected a rate such "
					"as 4.8TB/s, 900GB/s or 3e12 (bytes/s, at least 1MB/s)\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--peak-in")) {
			opt.peak_range = v;
		} else if (!strcmp(o, "--trust-links")) {
			opt.trust_links = 1;
		} else if (!strcmp(o, "--json")) {
			json = 1;
		} else if (o[0] == '-' && o[1]) { /* not in fuse_opts */
			fprintf(stderr, "gpumemsim fuse: unknown option '%s'\n", o);
			return EXIT_USAGE;
		} else if (!trace) {
			trace = o;
		} else {
			fprintf(stderr, "gpumemsim fuse: one trace at a time ('%s' and '%s')\n", trace, o);
			return EXIT_USAGE;
		}
	}
	if (!trace) {
		fprintf(stderr, "gpumemsim fuse: missing TRACE\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	int st = rules_path ? fusion_rules_load(rules_path, &rs, err, sizeof err) :
			      fusion_rules_parse(fusion_builtin_rules, "builtin", &rs, err, sizeof err);
	if (st < 0) {
		fprintf(stderr, "gpumemsim fuse: %s\n", err);
		goto out;
	}
	if (nnames && fusion_rules_keep(&rs, names, nnames, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim fuse: %s\n", err);
		ret = EXIT_USAGE;
		goto out;
	}
	if (fusion_apply(trace, out, &rs, &opt, &rep, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim fuse: %s\n", err);
		goto out;
	}
	if (json)
		print_json(trace, out, opt.peak_range, &rs, &rep);
	else
		print_text(trace, out, opt.peak_range, &rs, &rep);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "gpumemsim fuse: writing the report failed\n");
		goto out;
	}
	ret = 0;
out:
	fusion_report_free(&rep);
	fusion_rules_free(&rs);
	return ret;
}
