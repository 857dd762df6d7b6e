/*
 * cmd_diff.c: `gpumemsim diff A B`: what changed between two runs (users'
 * question 9: a library upgrade, a model change, a what-if against the
 * capture it came from). Both traces are replayed under the same policy
 * (nothing stored); printed side by side: the whole-run figures, and what
 * was live at each run's peak reserved by kind and by layer (sim/run_diff.h),
 * the largest changes first.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../sim/run_diff.h"
#include "../sim/timing.h"

#define CMD "gpumemsim diff"

static const struct cli_opt diff_opts[] = {
	{"--policy", "NAME", "allocator policy both are replayed under (default pytorch)"},
	{"--conf", "STRING", "the policy's knobs, the same for both"},
	{"--capacity", "SIZE", "device memory for both, e.g. 80GiB (default: each trace's)"},
	{"--timing", NULL, "compare predicted step times (docs/timing.md) instead of\n"
			   "the replay of recorded ones"},
	{"--allow-incomplete", NULL, "replay a trace cut short (a killed capture) up to where\n"
				     "it ends"},
	{"--top", "N", "layers listed, the largest changes first (default 15; 0: all)"},
	{"--json", NULL, "one JSON object on stdout: both runs' figures, every kind and\n"
			 "every layer"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "diff A B [--policy NAME] [--conf STRING] [--top N] [--json]",
		  "What changed between two runs: traces A and B (two captures of one program\n"
		  "before and after a library upgrade or a model change, or a what-if's trace\n"
		  "and its capture) replayed under the same policy. Prints peak allocated,\n"
		  "reserved and requested, requests, device calls and step time of each, then\n"
		  "what was live at each run's peak reserved by kind (weights, optimizer\n"
		  "state, activations, gradients, workspace, library, other: heuristics on\n"
		  "the NVTX ranges, docs/schema.md) and by layer (the innermost NVTX range at\n"
		  "allocation), with the change from A to B. Nothing is stored.\n\n",
		  diff_opts,
		  "\nExit status: 0 ok, 1 a bad trace or knob (file:line or the knob named), 2 usage.\n");
}

/* "+1.50 GiB (+3.2%)", "-512.00 MiB (-40.0%)", "+2.00 KiB (new)", "0 B" */
static const char *change(uint64_t a, uint64_t b, char *buf, size_t len)
{
	char s[32];
	cli_size_change(b, a, s, sizeof s);
	if (a == b)
		snprintf(buf, len, "%s", s);
	else if (a)
		snprintf(buf, len, "%s (%+.1f%%)", s, cli_change_pct(b, a));
	else
		snprintf(buf, len, "%s (new)", s);
	return buf;
}

static void size_row(const char *what, uint64_t a, uint64_t b)
{
	char b1[32], b2[32], b3[64];
	printf("  %-24s %14s %14s  %s\n", what, size_fmt(a, b1, sizeof b1), size_fmt(b, b2, sizeof b2),
	       change(a, b, b3, sizeof b3));
}

static void count_row(const char *what, uint64_t a, uint64_t b)
{
	printf("  %-24s %14" PRIu64 " %14" PRIu64 "  %+" PRId64 "\n", what, a, b,
	       (int64_t)b - (int64_t)a);
}

/* Replay TRACE into RES as both runs are replayed. 0, or -1 (message printed). */
static int replay(const char *trace, const struct alloc_policy *pol, const char *conf,
		  uint64_t capacity, int timing, int incomplete, struct cost_model *cm,
		  struct sim_result *res)
{
	char err[1024];
	struct timing_calibration cal;
	if (timing && (cost_fit_trace(trace, NULL, cm, err, sizeof err) < 0 ||
		       timing_calibrate(trace, cm, &cal, err, sizeof err) < 0)) {
		fprintf(stderr, CMD ": %s\n", err);
		return -1;
	}
	struct sim_options o = {.trace_path = trace, .policy = pol, .conf = conf,
				.capacity = capacity, .cost = timing ? cm : NULL,
				.allow_incomplete = incomplete, .peak_layers = SIZE_MAX};
	if (sim_run(&o, res, err, sizeof err) < 0) {
		fprintf(stderr, CMD ": %s\n", err);
		return -1;
	}
	return 0;
}

static void run_line(const char *tag, const struct sim_result *r)
{
	const char *m = trace_label_find(r->labels, r->nlabels, "model");
	const char *b = trace_label_find(r->labels, r->nlabels, "batch");
	printf("%s  %s", tag, r->trace_path);
	if (m || b)
		printf("  (%s%s%s%s)", m ? "model " : "", m ? m : "", m && b ? ", batch " : b ? "batch " : "",
		       b ? b : "");
	if (!r->complete)
		printf("  [cut short: replayed up to where it ends]");
	putchar('\n');
}

static void print_text(const struct sim_result *a, const struct sim_result *b,
		       const struct run_diff *d, size_t top)
{
	run_line("A", a);
	run_line("B", b);
	printf("policy %s%s%s%s\n\n", a->policy, a->conf[0] ? "  conf \"" : "", a->conf,
	       a->conf[0] ? "\"" : "");
	printf("  %-24s %14s %14s  %s\n", "", "A", "B", "change");
	size_row("peak allocated", a->peak_allocated, b->peak_allocated);
	size_row("peak reserved", a->peak_reserved, b->peak_reserved);
	size_row("peak requested", a->peak_requested, b->peak_requested);
	count_row("requests (allocs)", a->allocs, b->allocs);
	count_row("device allocs/maps", a->device_allocs, b->device_allocs);
	count_row("device frees/unmaps", a->device_frees, b->device_frees);
	if (a->step_time_ns || b->step_time_ns)
		printf("  %-24s %11.3f ms %11.3f ms  %+.1f%%\n",
		       a->timed ? "step time (predicted)" : "step time (replayed)",
		       a->step_time_ns / 1e6, b->step_time_ns / 1e6,
		       cli_change_pct(b->step_time_ns, a->step_time_ns));
	printf("\nlive at the peak reserved, by kind\n");
	for (int k = 0; k < SIM_LK_COUNT; k++)
		if (d->kind[k].a || d->kind[k].b)
			size_row(d->kind[k].name, d->kind[k].a, d->kind[k].b);
	size_row("all", d->live_a, d->live_b);
	size_t n = top && top < d->nlayer ? top : d->nlayer;
	printf("\nby layer: %s%zu of %zu, the largest changes first\n", n < d->nlayer ? "" : "all ",
	       n, d->nlayer);
	for (size_t i = 0; i < n; i++) {
		char name[32];
		const char *l = d->layer[i].name;
		/* long names keep their end: the leaf module */
		size_t len = strlen(l);
		if (len > 24)
			snprintf(name, sizeof name, "...%.21s", l + len - 21);
		else
			snprintf(name, sizeof name, "%.24s", l);
		size_row(name, d->layer[i].a, d->layer[i].b);
	}
	if (n < d->nlayer) {
		uint64_t ra = 0, rb = 0;
		for (size_t i = n; i < d->nlayer; i++) {
			ra += d->layer[i].a;
			rb += d->layer[i].b;
		}
		char label_rest[48];
		snprintf(label_rest, sizeof label_rest, "(%zu more)", d->nlayer - n);
		size_row(label_rest, ra, rb);
	}
}

static void run_json(struct json *j, const char *key, const struct sim_result *r)
{
	json_key(j, key);
	json_begin_object(j);
	json_kv_string(j, "trace", r->trace_path);
	json_kv_u64(j, "peak_allocated", r->peak_allocated);
	json_kv_u64(j, "peak_reserved", r->peak_reserved);
	json_kv_u64(j, "peak_requested", r->peak_requested);
	json_kv_u64(j, "allocs", r->allocs);
	json_kv_u64(j, "device_allocs", r->device_allocs);
	json_kv_u64(j, "device_frees", r->device_frees);
	json_kv_u64(j, "step_time_ns", r->step_time_ns);
	json_kv_bool(j, "timed", r->timed);
	json_kv_bool(j, "complete", r->complete);
	json_end_object(j);
}

static void rows_json(struct json *j, const char *key, const char *name,
		      const struct run_diff_row *rows, size_t n)
{
	json_key(j, key);
	json_begin_array(j);
	for (size_t i = 0; i < n; i++) {
		json_begin_object(j);
		json_kv_string(j, name, rows[i].name);
		json_kv_u64(j, "a", rows[i].a);
		json_kv_u64(j, "b", rows[i].b);
		json_end_object(j);
	}
	json_end_array(j);
}

static void print_json(const struct sim_result *a, const struct sim_result *b,
		       const struct run_diff *d)
{
	struct json j;
	json_init(&j, stdout);
	json_begin_object(&j);
	json_kv_string(&j, "policy", a->policy);
	json_kv_string(&j, "conf", a->conf);
	run_json(&j, "a", a);
	run_json(&j, "b", b);
	json_kv_u64(&j, "live_a", d->live_a);
	json_kv_u64(&j, "live_b", d->live_b);
	rows_json(&j, "kinds", "kind", d->kind, SIM_LK_COUNT);
	rows_json(&j, "layers", "layer", d->layer, d->nlayer);
	json_end_object(&j);
}

int cmd_diff(int argc, char **argv)
{
	const char *pname = "pytorch", *conf = NULL, *t[2] = {NULL, NULL};
	uint64_t capacity = 0, top = 15;
	int timing = 0, json = 0, nt = 0, incomplete = 0;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v;
		if (cli_is_help(o)) {
			usage(stdout);
			return 0;
		}
		if (cli_take_opt(CMD, diff_opts, argc, argv, &i, &v) < 0)
			return EXIT_USAGE;
		if (!strcmp(o, "--policy")) {
			pname = v;
		} else if (!strcmp(o, "--conf")) {
			conf = v;
		} else if (!strcmp(o, "--capacity")) {
			if (conf_size_with_unit(v, &capacity) < 0 || !capacity) {
				fprintf(stderr, CMD ": --capacity '%s': expected a size such as 80GiB\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--top")) {
			char *end;
			top = strtoull(v, &end, 10);
			if (!*v || *end || *v == '-') {
				fprintf(stderr, CMD ": --top '%s': expected a number of layers\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--timing")) {
			timing = 1;
		} else if (!strcmp(o, "--allow-incomplete")) {
			incomplete = 1;
		} else if (!strcmp(o, "--json")) {
			json = 1;
		} else if (o[0] == '-' && o[1]) {
			fprintf(stderr, CMD ": unknown option '%s'\n", o);
			usage(stderr);
			return EXIT_USAGE;
		} else if (nt < 2) {
			t[nt++] = o;
		} else {
			fprintf(stderr, CMD ": two traces, A and B ('%s' is a third)\n", o);
			return EXIT_USAGE;
		}
	}
	if (nt != 2) {
		fprintf(stderr, CMD ": needs two traces, A and B\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	const struct alloc_policy *pol = policy_find(pname);
	if (!pol) {
		fprintf(stderr, CMD ": unknown policy '%s' (gpumemsim policies lists them)\n", pname);
		return EXIT_USAGE;
	}
	struct sim_result ra, rb;
	struct cost_model ca, cb;
	struct run_diff d;
	memset(&ra, 0, sizeof ra);
	memset(&rb, 0, sizeof rb);
	int ret = 1;
	if (replay(t[0], pol, conf, capacity, timing, incomplete, &ca, &ra) < 0 ||
	    replay(t[1], pol, conf, capacity, timing, incomplete, &cb, &rb) < 0)
		goto out;
	if (run_diff_build(&ra, &rb, &d) < 0) {
		fprintf(stderr, CMD ": out of memory\n");
		goto out;
	}
	if (json)
		print_json(&ra, &rb, &d);
	else
		print_text(&ra, &rb, &d, (size_t)top);
	run_diff_free(&d);
	ret = fflush(stdout) ? 1 : 0;
	if (ret)
		fprintf(stderr, CMD ": writing the output failed\n");
out:
	sim_result_free(&ra);
	sim_result_free(&rb);
	return ret;
}
