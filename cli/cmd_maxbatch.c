/*
 * cmd_maxbatch.c: `gpumemsim maxbatch --from T1 T2 [T3] --policy P --capacity C`:
 * the largest batch size whose simulated peak fits on the device, and why
 * the next one fails: capacity, the allocator's own limit, fragmentation
 * (free but split), or memory outside the framework's allocator (by library).
 *
 * The options are parsed here, the captures loaded and fitted
 * (whatif/batch_fit.h), the search made by maxbatch_search()
 * (whatif/maxbatch.h), and its result printed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_whatif.h"
#include "../include/gpumemsim.h"

#define MAX_FROM 32

/* Every option the parse loop accepts. */
static const struct cli_opt maxbatch_opts[] = {
	{"--from", "T1 T2 ...", "two or more captures at different batch sizes"},
	{"--policy", "NAME", "allocator policy"},
	{"--conf", "STRING", "the policy's knobs"},
	{"--capacity", "SIZE", "device memory, e.g. 80GiB"},
	{"--margin", "M", "keep M free: 5% (default 0) or a fraction 0.05"},
	{"--max", "N", "search no further than batch N (default: 4 times the\n"
	 "largest capture; beyond, an extrapolation)"},
	WHATIF_ALIGN_OPTS,
	{"--json", NULL, "one JSON object on stdout"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "maxbatch --from T1 T2 [T3...] --policy P --capacity SIZE [options]",
		  "The largest batch whose simulated peak fits in SIZE (less the margin), with the\n"
		  "traces synthesised as `whatif batch` does, and why the next batch fails:\n"
		  "capacity, the allocator's own limit when below it (BFC's memory_limit, a memory\n"
		  "fraction), fragmentation (enough free memory, but split), or memory allocated\n"
		  "outside the framework's allocator (cuDNN, cuBLAS, ... by library).\n\n",
		  maxbatch_opts,
		  "\nExit status: 0 ok, 1 failure (an answer that cannot be trusted: see whatif batch\n"
		  "--help; bad trace, bad knob), 2 usage.\n");
}

static int parse_margin(const char *v, double *out)
{
	char *end;
	double x = strtod(v, &end);
	if (end == v)
		return -1;
	if (*end == '%') {
		x /= 100;
		end++;
	}
	if (*end || !(x >= 0 && x < 0.9))
		return -1;
	*out = x;
	return 0;
}

/* A policy by name, or NULL with the known names on stderr (maxbatch,
 * explain batch, whatif batch --policy). */
const struct alloc_policy *whatif_policy(const char *cmd, const char *name)
{
	const struct alloc_policy *pol = policy_find(name);
	if (!pol) {
		char names[1024];
		policy_list_names(names, sizeof names);
		fprintf(stderr, "gpumemsim %s: unknown policy '%s' (known: %s)\n", cmd, name, names);
	}
	return pol;
}

/* maxbatch: exit codes as cli.h says. */
int cmd_maxbatch(int argc, char **argv)
{
	char *from[MAX_FROM];
	size_t nfrom = 0;
	const char *policy = NULL, *conf = NULL;
	uint64_t capacity = 0, maxb = 0;
	double margin = 0;
	int json = 0, ret = 1;
	struct whatif_align al = WHATIF_ALIGN_DEFAULT;
	struct bf_trust tr;
	struct bf_trace *t[MAX_FROM];
	struct bf_model *m = NULL;
	struct maxbatch_result *r = NULL;
	char err[2048];

	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		if (!strcmp(o, "--from")) {
			while (i + 1 < argc && argv[i + 1][0] != '-') {
				if (nfrom == MAX_FROM) {
					fprintf(stderr, "gpumemsim maxbatch: at most %d captures\n", MAX_FROM);
					return EXIT_USAGE;
				}
				from[nfrom++] = argv[++i];
			}
			continue;
		}
		if (!strcmp(o, "--json")) {
			json = 1;
			continue;
		}
		int a = whatif_align_opt("maxbatch", argc, argv, &i, &al);
		if (a < 0)
			return EXIT_USAGE;
		if (a > 0)
			continue;
		const struct cli_opt *d = cli_opt_match(maxbatch_opts, o);
		if (!d || !d->arg) {
			fprintf(stderr, "gpumemsim maxbatch: unknown option '%s'\n", o);
			return EXIT_USAGE;
		}
		const char *v;
		if (cli_take_value("gpumemsim maxbatch", argc, argv, &i, &v) < 0)
			return EXIT_USAGE;
		if (!strcmp(o, "--policy")) {
			policy = v;
		} else if (!strcmp(o, "--conf")) {
			conf = v;
		} else if (!strcmp(o, "--capacity")) {
			if (conf_size_with_unit(v, &capacity) < 0 || !capacity) {
				fprintf(stderr, "gpumemsim maxbatch: --capacity '%s': expected a size such "
					"as 80GiB, 40GB or 512MiB\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--margin")) {
			if (parse_margin(v, &margin) < 0) {
				fprintf(stderr, "gpumemsim maxbatch: --margin '%s': expected a percentage "
					"such as 5%% or a fraction below 0.9\n", v);
				return EXIT_USAGE;
			}
		} else {
			char *end;
			unsigned long long b = strtoull(v, &end, 10);
			if (*end || !*v || v[0] == '-' || b == 0 || b > 100000000ull) {
				fprintf(stderr, "gpumemsim maxbatch: --max '%s': expected a positive "
					"integer\n", v);
				return EXIT_USAGE;
			}
			maxb = b;
		}
	}
	if (nfrom < 2 || !policy || !capacity) {
		fprintf(stderr, "gpumemsim maxbatch: %s\n",
			nfrom < 2 ? "--from needs two or more captures" :
			!policy ? "missing --policy" : "missing --capacity");
		usage(stderr);
		return EXIT_USAGE;
	}
	const struct alloc_policy *pol = whatif_policy("maxbatch", policy);
	if (!pol)
		return 1;
	if (whatif_load("maxbatch", from, nfrom, t) < 0)
		return 1;
	struct bf_options opt = {.strict_align = al.strict};
	if (bf_fit(t, nfrom, &opt, &m, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim maxbatch: %s\n", err);
		goto out;
	}
	r = malloc(sizeof *r);
	if (!r) {
		fprintf(stderr, "gpumemsim maxbatch: out of memory\n");
		goto out;
	}
	/* How far past the captures the answer is trusted by default: a fit
	 * over 8..256 says little about batch 14,000 (the cuDNN algorithm and
	 * its workspace change with batch; docs/whatif.md). */
	int max_default = !maxb;
	if (max_default)
		maxb = 4 * bf_model_report(m)->hi_batch;
	struct maxbatch_options mo = {.policy = pol, .conf = conf, .capacity = capacity,
				      .margin = margin, .max_batch = maxb};
	if (maxbatch_search(m, &mo, r, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim maxbatch: %s\n", err);
		goto out;
	}
	uint64_t lo = r->max_batch, hi = r->fails_at;
	/* the answer is the largest batch that fits: how far it rests on what
	 * did not align decides whether it is given */
	uint64_t at = lo ? lo : hi;
	if (bf_trust_check(m, at, al.max_bound, &tr, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim maxbatch: %s\n", err);
		goto out;
	}
	if (!json)
		whatif_print_report(bf_model_report(m), &tr, at, 0, stderr);
	/* XLA compiles the step to its memory limit: under a smaller limit the
	 * real program is another one (docs/validation_bfc.md, "maxbatch") */
	const char *wl = bf_label(t[0], "workload");
	if (wl && !strcmp(wl, "jax"))
		fprintf(stderr, "gpumemsim maxbatch: note: XLA fits its compiled step to the memory "
			"limit it runs under (smaller temporary buffers, slower steps); this answer is "
			"for the program as captured, a lower bound where the limit is below what the "
			"captures used (docs/validation_bfc.md)\n");
	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "policy", policy);
		json_kv_string(&j, "conf", conf ? conf : "");
		json_kv_u64(&j, "capacity", capacity);
		json_kv_double(&j, "margin", margin);
		json_kv_u64(&j, "usable", r->usable);
		json_kv_u64(&j, "max_batch", lo);
		json_kv_u64(&j, "peak_reserved", r->peak_reserved);
		json_kv_u64(&j, "peak_allocated", r->peak_allocated);
		json_kv_u64(&j, "workspace_retries", r->workspace_retries);
		json_key(&j, "fails_at");
		if (hi)
			json_u64(&j, hi);
		else
			json_null(&j);
		json_kv_string(&j, "verdict", r->verdict);
		json_kv_string(&j, "detail", r->detail);
		json_kv_u64(&j, "searched_up_to", maxb);
		json_kv_u64(&j, "template_batch", tr.template_batch);
		json_kv_u64(&j, "unaligned_paired", tr.paired);
		json_kv_u64(&j, "unaligned_copied", tr.copied);
		json_kv_double(&j, "unaligned_copied_peak_share",
			       tr.peak_live ? (double)tr.copied_live / (double)tr.peak_live : 0);
		json_kv_double(&j, "unaligned_bound", tr.bound);
		if (hi) {
			json_kv_u64(&j, "request", r->request);
			json_kv_u64(&j, "allocated", r->allocated);
			json_kv_u64(&j, "reserved", r->reserved);
			json_kv_i64(&j, "largest_free_block", r->largest_free);
			json_kv_i64(&j, "cached_free_bytes", r->cached_free);
			json_key(&j, "foreign");
			json_begin_object(&j);
			for (size_t i = 0; i < r->live.nlibs; i++)
				json_kv_u64(&j, r->live.libs[i].name, r->live.libs[i].bytes);
			json_end_object(&j);
		}
		json_key(&j, "evaluated");
		json_begin_array(&j);
		for (size_t i = 0; i < r->nev; i++) {
			json_begin_object(&j);
			json_kv_u64(&j, "batch", r->ev[i].batch);
			json_kv_bool(&j, "fits", r->ev[i].fits);
			json_kv_u64(&j, "peak_reserved", r->ev[i].peak_reserved);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
		fputc('\n', stdout);
	} else {
		char b1[32], b2[32], b3[32];
		printf("policy         %s%s%s\n", policy, conf ? " conf " : "", conf ? conf : "");
		printf("usable         %s (capacity %s, margin %.1f%%)\n",
		       size_fmt(r->usable, b1, sizeof b1), size_fmt(capacity, b2, sizeof b2),
		       100 * margin);
		if (lo)
			printf("largest batch  %" PRIu64 " (peak reserved %s, allocated %s)\n", lo,
			       size_fmt(r->peak_reserved, b1, sizeof b1),
			       size_fmt(r->peak_allocated, b3, sizeof b3));
		else
			printf("largest batch  none: batch %" PRIu64 " does not fit\n", hi);
		if (lo && r->workspace_retries)
			printf("               its convolution workspaces were cut %" PRIu64 " times to "
			       "fit (PyTorch's cuDNN path takes a smaller one when one does not)\n",
			       r->workspace_retries);
		if (hi)
			printf("batch %-8" PRIu64 " fails at request of %s: %s\n", hi,
			       size_fmt(r->request, b1, sizeof b1), r->detail);
		else if (max_default)
			printf("no failure up to batch %" PRIu64 ", 4 times the largest capture (%" PRIu64
			       "): beyond it the prediction is an extrapolation; capture a larger batch, "
			       "or pass --max N\n", maxb, bf_model_report(m)->hi_batch);
		else
			printf("no failure up to --max %" PRIu64 "\n", maxb);
		printf("searched       %zu batch sizes (the search assumes that peak grows with batch)\n",
		       r->nev);
	}
	ret = 0;
out:
	free(r);
	bf_model_free(m);
	for (size_t i = 0; i < nfrom; i++)
		bf_free(t[i]);
	return ret;
}
