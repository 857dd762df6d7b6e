/*
 * cmd_whatif.c: `gpumemsim whatif batch --from T1 T2 [T3...] --batch N -o TRACE`:
 * synthesise the trace of a workload at a batch size that was not captured,
 * from captures at other batch sizes (whatif/batch_fit.h does the work).
 *
 * The fit quality goes to stderr (or, with --json, one object to stdout) so
 * the user sees how far to trust the synthesised trace: how many sites were
 * constant, linear, non-linear (interpolated), unaligned, how far the batch
 * lies outside the fitted range, and the range the peak can fall in where
 * sites cannot be predicted (whatif/batch_fit_interval.c): of live bytes
 * always, of reserved and allocated bytes with --policy (the prediction and
 * its bounds replayed).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/gpumemsim.h"
#include "cli.h"
#include "cmd_whatif.h"

#define MAX_FROM 32

/* whatif batch: every option its parse loop accepts. */
static const struct cli_opt batch_opts[] = {
	{"--from", "T1 T2 ...", "two or more captures (distinct batch sizes)"},
	{"--batch", "N", "the batch size to synthesise"},
	{"-o", "TRACE", "output trace (.gz compresses); written atomically"},
	WHATIF_ALIGN_OPTS,
	{"--policy", "NAME",
	 "replay the prediction under policy NAME and print its\n"
	 "peak reserved and allocated with the range they can fall in"},
	{"--conf", "STRING", "the policy's knobs (with --policy)"},
	{"--json", NULL, "the fit report as one JSON object on stdout"},
	{"--sites", "FILE",
	 "per-site fit quality as TSV: every allocation of the\n"
	 "template capture, its kind, sizes seen, prediction"},
	CLI_OPT_END,
};

/* whatif steady: every option its parse loop accepts. */
static const struct cli_opt steady_opts[] = {
	{"-o", "OUT", "the trace from range NAME on; written atomically"},
	{"--from-range", "NAME", "start at the first NVTX range NAME (default \"step 1\")"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "whatif batch --from T1 T2 [T3...] --batch N -o TRACE [options]",
		  "Align captures of one workload at different batch sizes (labels 'batch=N'),\n"
		  "fit each allocation's size and each kernel's duration against the batch size\n"
		  "and write the trace at batch N, built on the capture nearest to N.\n"
		  "Allocations that align in no other capture (cuDNN's first-step algorithm\n"
		  "search, an algorithm switch) are paired within their gap and predicted, or\n"
		  "copied from the nearest capture; the report says how much of the peak rests\n"
		  "on them and the prediction is refused when that could move it by more than\n"
		  "--max-unaligned. Where a site cannot be predicted (an algorithm switch between\n"
		  "the captures around N, a workspace beyond them), its size is a range; the\n"
		  "report gives the range of the peak (live bytes; with --policy, reserved and\n"
		  "allocated, from replays at the sites' bounds) and why.\n\n",
		  batch_opts,
		  "\nExit status: 0 ok, 1 failure (a prediction that cannot be trusted, or\n"
		  "--strict-align and misaligned captures: the message names the site and what\n"
		  "to capture; bad trace: file:line), 2 usage.\n\n");
	cli_usage(f, "whatif steady TRACE -o OUT [--from-range NAME]",
		  "Write TRACE without its first step: allocations freed before the first NVTX\n"
		  "range NAME (default \"step 1\") starts are dropped with their frees, what is\n"
		  "live across it is kept. Replaying OUT gives the steady-state peaks, without\n"
		  "the first step's autotuning (cuDNN algorithm search, benchmark mode).\n\n",
		  steady_opts,
		  "\nwhatif compile TRACE [-o OUT] [--json]: what torch.compile would do to a\n"
		  "training step, from an eager capture (gpumemsim whatif compile --help).\n");
}

/* whatif steady TRACE -o OUT [--from-range NAME]. */
static int cmd_steady(int argc, char **argv)
{
	const char *in = NULL, *outp = NULL, *range = "step 1";
	struct bf_trace *t = NULL;
	char err[1536];
	int ret = 1;

	for (int i = 2; i < argc; i++) {
		const char *o = argv[i];
		if (o[0] == '-' && o[1] && !cli_opt_match(steady_opts, o)) {
			fprintf(stderr, "gpumemsim whatif: unknown option '%s'\n", o);
			return EXIT_USAGE;
		} else if (!strcmp(o, "-o") || !strcmp(o, "--from-range")) {
			if (cli_take_value("gpumemsim whatif", argc, argv, &i,
					   !strcmp(o, "-o") ? &outp : &range) < 0)
				return EXIT_USAGE;
		} else if (in) {
			fprintf(stderr, "gpumemsim whatif steady: one trace only ('%s')\n", o);
			return EXIT_USAGE;
		} else {
			in = o;
		}
	}
	if (!in || !outp) {
		fprintf(stderr, "gpumemsim whatif steady: %s\n", !in ? "missing TRACE" : "missing -o OUT");
		usage(stderr);
		return EXIT_USAGE;
	}
	if (bf_load(in, &t, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim whatif: %s\n", err);
		return 1;
	}
	if (bf_write_from_range(t, range, outp, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim whatif: %s\n", err);
		goto out;
	}
	ret = 0;
out:
	bf_free(t);
	return ret;
}

/* The range of a prediction (whatif batch; NULL for maxbatch). */
struct interval_out {
	const struct bf_interval *iv;
	const struct bf_site_range *sites;
	size_t nsites;
	const char *policy;              /* NULL: not replayed */
	const struct bf_replay_range *rr;
};

/* Reasons, grouped: how many sites for each (why, captures). */
struct why_group { enum bf_why why; uint64_t a, b; size_t n; };

static size_t group_reasons(const struct bf_site_range *s, size_t n, struct why_group *g,
			    size_t max)
{
	size_t ng = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < ng && !(g[k].why == s[i].why && g[k].a == s[i].batch_a &&
				   g[k].b == s[i].batch_b))
			k++;
		if (k == ng) {
			if (ng == max)
				continue;
			g[ng++] = (struct why_group){s[i].why, s[i].batch_a, s[i].batch_b, 0};
		}
		g[k].n++;
	}
	/* most sites first (insertion sort: a handful of groups) */
	for (size_t i = 1; i < ng; i++)
		for (size_t j = i; j > 0 && g[j].n > g[j - 1].n; j--) {
			struct why_group x = g[j];
			g[j] = g[j - 1];
			g[j - 1] = x;
		}
	return ng;
}

/* One reason in words: "algorithm switch between b32 and b64". */
static void reason_text(enum bf_why why, uint64_t a, uint64_t b, char *buf, size_t len)
{
	switch (why) {
	case BF_WHY_SWITCH:
		snprintf(buf, len, "algorithm switch between b%" PRIu64 " and b%" PRIu64, a, b);
		break;
	case BF_WHY_MISSING:
		snprintf(buf, len, "seen on one side only of b%" PRIu64 "..b%" PRIu64, a, b);
		break;
	case BF_WHY_ABOVE:
		snprintf(buf, len, "extrapolated above b%" PRIu64, a);
		break;
	case BF_WHY_BELOW:
		snprintf(buf, len, "extrapolated below b%" PRIu64, a);
		break;
	default:
		snprintf(buf, len, "predicted");
	}
}

static void print_interval_json(struct json *j, const struct interval_out *io)
{
	const struct bf_interval *iv = io->iv;
	json_kv_bool(j, "extrapolated", iv->extrapolated);
	json_kv_u64(j, "interval_sites", iv->sites);
	json_kv_u64(j, "peak_live", iv->peak_live);
	json_kv_u64(j, "peak_lo", iv->peak_lo);
	json_kv_u64(j, "peak_hi", iv->peak_hi);
	if (io->policy) {
		const struct bf_replay_range *rr = io->rr;
		json_kv_string(j, "policy", io->policy);
		json_kv_u64(j, "peak_reserved", rr->reserved);
		json_kv_u64(j, "peak_reserved_lo", rr->reserved_lo);
		json_key(j, "peak_reserved_hi");
		if (rr->reserved_bounded)
			json_u64(j, rr->reserved_hi);
		else
			json_null(j);
		json_kv_u64(j, "peak_allocated", rr->allocated);
		json_kv_u64(j, "peak_allocated_lo", rr->allocated_lo);
		json_key(j, "peak_allocated_hi");
		if (rr->allocated_bounded)
			json_u64(j, rr->allocated_hi);
		else
			json_null(j);
		json_kv_string(j, "bound_rule", rr->rule ? rr->rule : "");
		json_kv_u64(j, "reserved_certain", rr->certain_reserved);
		json_kv_u64(j, "reserved_uncertain_segments", rr->uncertain_segments);
		json_kv_u64(j, "not_transient", rr->not_transient);
		json_kv_u64(j, "reserved_intruders", rr->intruders);
		json_kv_u64(j, "reserved_intruder_segments", rr->intruder_segments);
		if (rr->not_transient)
			json_kv_u64(j, "not_transient_site", rr->not_transient_site);
		json_kv_u64(j, "replay_reserved_lo", rr->replay_reserved_lo);
		json_kv_u64(j, "replay_reserved_hi", rr->replay_reserved_hi);
		json_kv_u64(j, "replay_allocated_lo", rr->replay_allocated_lo);
		json_kv_u64(j, "replay_allocated_hi", rr->replay_allocated_hi);
		json_kv_u64(j, "replays", (uint64_t)rr->replays);
		json_kv_bool(j, "oom", rr->oom);
	}
	json_key(j, "interval_detail");
	json_begin_array(j);
	for (size_t i = 0; i < io->nsites; i++) {
		const struct bf_site_range *s = &io->sites[i];
		json_begin_object(j);
		json_kv_u64(j, "site", s->site);
		json_kv_u64(j, "line", s->line);
		json_kv_string(j, "range", s->range ? s->range : "");
		json_kv_bool(j, "search", s->search);
		json_kv_u64(j, "predicted", s->predicted);
		json_kv_u64(j, "lo", s->lo);
		json_kv_u64(j, "hi", s->hi);
		json_kv_string(j, "why", bf_why_name(s->why));
		json_kv_u64(j, "batch_a", s->batch_a);
		json_kv_u64(j, "batch_b", s->batch_b);
		json_end_object(j);
	}
	json_end_array(j);
}

/* "peak reserved under pytorch 3.48 GiB (allocated 2.25 GiB), can fall in
 * 2.30-3.48 GiB: 108 sites unpredictable (80 extrapolated above b128, ...)",
 * then the widest sites */
static void print_interval_text(const struct interval_out *io, FILE *f)
{
	const struct bf_interval *iv = io->iv;
	char b1[32], b2[32], b3[32], b4[32], b5[32], why[160];
	struct why_group g[16];
	if (io->policy) {
		const struct bf_replay_range *rr = io->rr;
		fprintf(f, "whatif: peak reserved under %s %s (allocated %s)", io->policy,
			size_fmt(rr->reserved, b1, sizeof b1), size_fmt(rr->allocated, b2, sizeof b2));
		if (iv->sites) {
			fprintf(f, ", bounded by %s-", size_fmt(rr->reserved_lo, b1, sizeof b1));
			if (rr->reserved_bounded)
				fprintf(f, "%s", size_fmt(rr->reserved_hi, b1, sizeof b1));
			else
				fprintf(f, "(none)");
			fprintf(f, " (allocated %s-", size_fmt(rr->allocated_lo, b3, sizeof b3));
			if (rr->allocated_bounded)
				fprintf(f, "%s)", size_fmt(rr->allocated_hi, b4, sizeof b4));
			else
				fprintf(f, "(none))");
		}
		if (rr->oom)
			fprintf(f, " [out of memory in a replay]");
	} else {
		fprintf(f, "whatif: peak of live bytes %s", size_fmt(iv->peak_live, b1, sizeof b1));
		if (iv->sites)
			fprintf(f, ", can fall in %s-%s", size_fmt(iv->peak_lo, b1, sizeof b1),
				size_fmt(iv->peak_hi, b2, sizeof b2));
	}
	if (!iv->sites) {
		fprintf(f, ": every site predicted%s\n",
			iv->extrapolated ? " (extrapolated beyond the captures)" : "");
	} else {
		size_t ng = group_reasons(io->sites, io->nsites, g, sizeof g / sizeof *g), shown = 0;
		fprintf(f, ": %zu site%s unpredictable (", iv->sites, iv->sites == 1 ? "" : "s");
		for (size_t i = 0; i < ng && i < 3; i++) {
			reason_text(g[i].why, g[i].a, g[i].b, why, sizeof why);
			fprintf(f, "%s%zu %s", i ? ", " : "", g[i].n, why);
			shown += g[i].n;
		}
		if (shown < iv->sites)
			fprintf(f, ", %zu other", iv->sites - shown);
		fprintf(f, ")\n");
		if (io->policy) {
			const struct bf_replay_range *rr = io->rr;
			fprintf(f, "whatif:   bound: %s", rr->rule ? rr->rule : "");
			if (rr->not_transient)
				fprintf(f, " (%zu not transient, the first site %zu)", rr->not_transient,
					rr->not_transient_site);
			if (rr->reserved_bounded && rr->uncertain_segments && rr->intruders)
				fprintf(f, " (%s + %s + %zu x one segment: %s)",
					size_fmt(rr->certain_reserved, b1, sizeof b1),
					size_fmt(rr->uncertain_segments, b2, sizeof b2), rr->intruders,
					size_fmt(rr->intruder_segments, b5, sizeof b5));
			else if (rr->reserved_bounded && rr->uncertain_segments)
				fprintf(f, " (%s + %s)", size_fmt(rr->certain_reserved, b1, sizeof b1),
					size_fmt(rr->uncertain_segments, b2, sizeof b2));
			fprintf(f, "; replays at the sites' bounds %s-%s (no bound)\n",
				size_fmt(rr->replay_reserved_lo, b3, sizeof b3),
				size_fmt(rr->replay_reserved_hi, b4, sizeof b4));
		}
		/* the widest three, to look at with --sites */
		size_t top[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
		for (size_t i = 0; i < io->nsites; i++) {
			uint64_t w = io->sites[i].hi - io->sites[i].lo;
			for (size_t k = 0; k < 3; k++) {
				if (top[k] == SIZE_MAX || w > io->sites[top[k]].hi - io->sites[top[k]].lo) {
					for (size_t q = 2; q > k; q--)
						top[q] = top[q - 1];
					top[k] = i;
					break;
				}
			}
		}
		for (size_t k = 0; k < 3 && top[k] != SIZE_MAX; k++) {
			const struct bf_site_range *s = &io->sites[top[k]];
			reason_text(s->why, s->batch_a, s->batch_b, why, sizeof why);
			fprintf(f, "whatif:   site %zu (line %" PRIu64 ", %s, %s): %s-%s, predicted %s: %s\n",
				s->site, s->line, s->range ? s->range : "no range",
				s->search ? "search workspace" : "workspace",
				size_fmt(s->lo, b1, sizeof b1), size_fmt(s->hi, b2, sizeof b2),
				size_fmt(s->predicted, b3, sizeof b3), why);
		}
	}
	if (!io->policy)
		fprintf(f, "whatif: --policy NAME replays it: peak reserved and allocated, with "
			   "their range\n");
}

static void print_report(const struct bf_report *r, const struct bf_trust *t, uint64_t batch,
			 int json, FILE *f, const struct interval_out *io);

/* Print the fit report (text on F, or JSON on stdout). Shared with maxbatch. */
void whatif_print_report(const struct bf_report *r, const struct bf_trust *t, uint64_t batch,
			 int json, FILE *f)
{
	print_report(r, t, batch, json, f, NULL);
}

/* The fit report, and the range of the prediction when IO is not NULL. */
static void print_report(const struct bf_report *r, const struct bf_trust *t, uint64_t batch,
			 int json, FILE *f, const struct interval_out *io)
{

	double share = t && t->peak_live ? (double)t->copied_live / (double)t->peak_live : 0;
	double pshare = t && t->peak_live ? (double)t->paired_live / (double)t->peak_live : 0;
	double lo = (double)r->lo_batch, hi = (double)r->hi_batch;
	double extra = batch < r->lo_batch ? (lo - (double)batch) / lo :
		       batch > r->hi_batch ? ((double)batch - hi) / hi : 0;
	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_u64(&j, "batch", batch);
		json_kv_u64(&j, "captures", r->ntraces);
		json_kv_u64(&j, "fitted_lo", r->lo_batch);
		json_kv_u64(&j, "fitted_hi", r->hi_batch);
		json_kv_double(&j, "extrapolation", extra);
		json_kv_u64(&j, "sites", r->nsites);
		json_kv_u64(&j, "constant", r->nconst);
		json_kv_u64(&j, "linear", r->nlinear);
		json_kv_u64(&j, "nonlinear", r->nnonlinear);
		json_kv_u64(&j, "unaligned", r->nunaligned);
		json_kv_u64(&j, "workspace_like", r->nworkspace);
		json_kv_double(&j, "min_r2", r->min_r2);
		json_kv_double(&j, "max_rel_residual", r->max_rel_resid);
		json_kv_bool(&j, "kernels_fitted", r->kernels_aligned);
		json_kv_u64(&j, "kernels", r->nkernels);
		json_kv_u64(&j, "aligned_events", r->aligned_prefix);
		json_kv_u64(&j, "events", r->aligned_suffix);
		json_kv_string(&j, "misalignment", r->misalign);
		if (t) {
			json_kv_u64(&j, "template_batch", t->template_batch);
			json_kv_u64(&j, "unaligned_paired", t->paired);
			json_kv_u64(&j, "unaligned_copied", t->copied);
			json_kv_u64(&j, "peak_live_predicted", t->peak_live);
			json_kv_double(&j, "unaligned_paired_peak_share", pshare);
			json_kv_double(&j, "unaligned_copied_peak_share", share);
			json_kv_double(&j, "unaligned_bound", t->bound);
		}
		if (io)
			print_interval_json(&j, io);
		json_end_object(&j);
		fputc('\n', stdout);
		return;
	}
	fprintf(f, "fit: %zu captures, batch %" PRIu64 "..%" PRIu64 "; %zu sites: %zu constant, %zu "
		   "linear, %zu non-linear (interpolated), %zu unaligned\n",
		r->ntraces, r->lo_batch, r->hi_batch, r->nsites, r->nconst, r->nlinear,
		r->nnonlinear, r->nunaligned);
	fprintf(f, "fit: linear sites: min R^2 %.6f (3+ captures), max residual %.4f%% of size "
		   "(site %zu); %zu workspace-like sites\n",
		r->min_r2, 100 * r->max_rel_resid, r->worst_site, r->nworkspace);
	fprintf(f, "fit: kernels: %zu, durations %s\n", r->nkernels,
		r->kernels_aligned ? "fitted per kernel" :
		r->nkernels ? "copied from the nearest capture (sequences differ)" : "-");
	if (r->misalign[0])
		fprintf(f, "fit: not aligned from %s; %zu of %zu memory events aligned\n",
			r->misalign, r->aligned_prefix, r->aligned_suffix);
	if (t && (t->paired || t->copied)) {
		char b1[32];
		fprintf(f, "fit: unaligned at batch %" PRIu64 " (built on the batch-%" PRIu64 " capture): "
			   "%zu of %zu allocations paired and predicted (%.2f%% of the peak), %zu "
			   "copied unchanged (%.2f%% of the peak, %s): the peak could move by up to "
			   "%.2f%% were they to scale with batch\n", batch, t->template_batch,
			t->paired, t->sites, 100 * pshare, t->copied, 100 * share,
			size_fmt(t->copied_live, b1, sizeof b1), 100 * t->bound);
	}
	if (r->ntraces == 2)
		fprintf(f, "fit: note: two captures fit every site exactly; a third checks linearity\n");
	if (extra > 0)
		fprintf(f, "fit: warning: batch %" PRIu64 " is outside the fitted range %" PRIu64 "..%"
			   PRIu64 " (%.0f%% beyond): extrapolated\n", batch, r->lo_batch, r->hi_batch,
			100 * extra);
	if (io)
		print_interval_text(io, f);
}

/* Load every capture; 0 or -1 (message printed). Shared with maxbatch. */
int whatif_load(const char *cmd, char **paths, size_t n, struct bf_trace **t)
{
	char err[1024];
	if (whatif_load_captures(paths, n, t, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim %s: %s\n", cmd, err);
		return -1;
	}
	return 0;
}

/* An alignment option; see cmd_whatif.h. */
int whatif_align_opt(const char *cmd, int argc, char **argv, int *i, struct whatif_align *a)
{
	const char *o = argv[*i];
	if (!strcmp(o, "--strict-align")) {
		a->strict = 1;
		return 1;
	}
	if (!strcmp(o, "--allow-misaligned")) {
		a->max_bound = 1.0;
		return 1;
	}
	if (strcmp(o, "--max-unaligned"))
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "gpumemsim %s: --max-unaligned needs a value (a percentage)\n", cmd);
		return -1;
	}
	const char *v = argv[++*i];
	char *end;
	double x = strtod(v, &end);
	if (end != v && *end == '%')
		end++;
	if (end == v || *end || !(x >= 0 && x <= 100)) {
		fprintf(stderr, "gpumemsim %s: --max-unaligned '%s': expected a percentage 0..100\n",
			cmd, v);
		return -1;
	}
	a->max_bound = x / 100;
	return 1;
}

/* whatif batch / whatif steady: exit codes as cli.h says. */
int cmd_whatif(int argc, char **argv)
{
	char *from[MAX_FROM];
	size_t nfrom = 0;
	const char *outp = NULL, *sitesp = NULL, *policy = NULL, *conf = NULL;
	const struct alloc_policy *pol = NULL;
	struct bf_interval iv;
	struct bf_site_range *ranges = NULL;
	size_t nranges = 0;
	struct bf_replay_range rr;
	uint64_t batch = 0;
	int json = 0, ret = 1;
	struct whatif_align al = WHATIF_ALIGN_DEFAULT;
	struct bf_trust tr;
	struct bf_trace *t[MAX_FROM];
	struct bf_model *m = NULL;
	char err[1536];

	/* compile answers its own --help; batch and steady share this one */
	if (argc >= 2 && !strcmp(argv[1], "compile"))
		return cmd_whatif_compile(argc, argv);
	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	if (argc >= 2 && !strcmp(argv[1], "steady"))
		return cmd_steady(argc, argv);
	if (argc < 2 || strcmp(argv[1], "batch")) {
		fprintf(stderr, "gpumemsim whatif: expected 'batch' or 'steady'\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i];
		int a = whatif_align_opt("whatif", argc, argv, &i, &al);
		if (a < 0)
			return EXIT_USAGE;
		if (a > 0)
			continue;
		if (!cli_opt_match(batch_opts, o)) {
			fprintf(stderr, "gpumemsim whatif: unknown option '%s'\n", o);
			return EXIT_USAGE;
		} else if (!strcmp(o, "--from")) {
			while (i + 1 < argc && argv[i + 1][0] != '-') {
				if (nfrom == MAX_FROM) {
					fprintf(stderr, "gpumemsim whatif: at most %d captures\n", MAX_FROM);
					return EXIT_USAGE;
				}
				from[nfrom++] = argv[++i];
			}
		} else if (!strcmp(o, "--sites") || !strcmp(o, "--policy") || !strcmp(o, "--conf")) {
			if (cli_take_value("gpumemsim whatif", argc, argv, &i,
					   !strcmp(o, "--sites") ? &sitesp
					   : !strcmp(o, "--policy") ? &policy : &conf) < 0)
				return EXIT_USAGE;
		} else if (!strcmp(o, "--batch") || !strcmp(o, "-o")) {
			const char *v;
			if (cli_take_value("gpumemsim whatif", argc, argv, &i, &v) < 0)
				return EXIT_USAGE;
			if (!strcmp(o, "-o")) {
				outp = v;
			} else {
				char *end;
				unsigned long long b = strtoull(v, &end, 10);
				if (*end || !*v || v[0] == '-' || b == 0 || b > 1000000000ull) {
					fprintf(stderr, "gpumemsim whatif: --batch '%s': expected a positive "
						"integer\n", v);
					return EXIT_USAGE;
				}
				batch = b;
			}
		} else if (!strcmp(o, "--json")) {
			json = 1;
		} else {
			fprintf(stderr, "gpumemsim whatif: unknown option '%s'\n", o);
			return EXIT_USAGE;
		}
	}
	if (nfrom < 2 || !batch || !outp) {
		fprintf(stderr, "gpumemsim whatif batch: %s\n",
			nfrom < 2 ? "--from needs two or more captures" :
			!batch ? "missing --batch N" : "missing -o TRACE");
		usage(stderr);
		return EXIT_USAGE;
	}
	if (conf && !policy) {
		fprintf(stderr, "gpumemsim whatif batch: --conf needs --policy\n");
		return EXIT_USAGE;
	}
	if (policy && !(pol = whatif_policy("whatif", policy)))
		return EXIT_USAGE;
	if (whatif_load("whatif", from, nfrom, t) < 0)
		return 1;
	struct bf_options opt = {.strict_align = al.strict};
	if (bf_fit(t, nfrom, &opt, &m, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim whatif: %s\n", err);
		goto out;
	}
	if (bf_trust_check(m, batch, al.max_bound, &tr, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim whatif: %s\n", err);
		goto out;
	}
	if (bf_synth(m, batch, outp, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim whatif: %s\n", err);
		goto out;
	}
	if (sitesp) {
		FILE *sf = fopen(sitesp, "w");
		int bad = !sf || bf_write_sites(m, batch, sf) < 0;
		if (sf && fclose(sf) != 0)
			bad = 1;
		if (bad) {
			fprintf(stderr, "gpumemsim whatif: --sites %s: cannot write it\n", sitesp);
			goto out;
		}
	}
	if (bf_interval(m, batch, &iv) < 0 || bf_interval_sites(m, batch, &ranges, &nranges) < 0) {
		fprintf(stderr, "gpumemsim whatif: out of memory\n");
		goto out;
	}
	if (pol && bf_interval_replay(m, batch, outp, pol, conf, 0, &rr, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim whatif: %s\n", err);
		goto out;
	}
	struct interval_out io = {.iv = &iv, .sites = ranges, .nsites = nranges,
				  .policy = pol ? policy : NULL, .rr = &rr};
	print_report(bf_model_report(m), &tr, batch, json, stderr, &io);
	if (!json)
		fprintf(stderr, "wrote %s (batch %" PRIu64 ")\n", outp, batch);
	ret = 0;
out:
	free(ranges);
	bf_model_free(m);
	for (size_t i = 0; i < nfrom; i++)
		bf_free(t[i]);
	return ret;
}
