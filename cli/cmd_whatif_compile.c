/*
 * cmd_whatif_compile.c: `gpumemsim whatif compile TRACE [-o OUT] [--json]`:
 * what torch.compile would do to a training step's memory, from an eager
 * capture (whatif/compile.h does the work). Prints the peaks before and
 * after and what each mechanism (the partitioner's recomputation, fusion)
 * saved; writes the compiled program's trace for `gpumemsim run`.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../include/gpumemsim.h"
#include "cli.h"
#include "cmd_whatif.h"

#define CMD "gpumemsim whatif compile"
#define DEFAULT_STEADY "step 1"

/* Every option the parse loop accepts. */
static const struct cli_opt compile_opts[] = {
	{"-o", "OUT", "write the compiled program's trace (.gz compresses;\n"
		      "atomically)"},
	{"--policy", "NAME", "allocator the peaks are replayed with (default pytorch)"},
	{"--conf", "STRING", "its knobs, framework syntax (e.g. max_split_size_mb:128)"},
	{"--steady-from", "RANGE", "count peaks from the first NVTX range of this name on\n"
				   "(default '" DEFAULT_STEADY "': after the first step, as\n"
				   "torch.cuda.max_memory_allocated after warm-up);\n"
				   "'' counts the whole trace"},
	{"--rules", "FILE", "fusion rules (docs/fusion.md; default: the builtin\n"
			    "Inductor-like rules, the same as\n"
			    "traces/fusion_rules/torch_inductor_like.rules)"},
	{"--bandwidth", "BW", "bandwidth of the fused kernels' duration model, e.g.\n"
			      "4.8TB/s (default: measured from the trace)"},
	{"--zero-grad", "WHERE", "where the loop frees the previous gradients:\n"
				 "'as-captured' (default) or 'before-forward' (the\n"
				 "capture freed them after the forward pass, as\n"
				 "capture/torch/train_torch.py; this moves those frees\n"
				 "to the step's start, before and after compile)"},
	{"--figure", "FILE", "draw bytes allocated over the steady steps, eager,\n"
			     "partitioned and compiled (.png or .svg; needs gnuplot)"},
	{"--figure-data", "DIR", "keep the figure's gnuplot script and data in DIR"},
	{"--no-timing", NULL, "skip the step-time prediction (memory only)"},
	{"--json", NULL, "the report as one JSON object on stdout"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "whatif compile TRACE [-o OUT] [--json] [options]",
		  "Predict what torch.compile (Inductor, default mode) does to a training step's\n"
		  "memory, from an eager capture with one allocation per tensor\n"
		  "(PYTORCH_NO_CUDA_MEMORY_CACHING=1), kernel-to-buffer links and NVTX ranges\n"
		  "\"forward\"/\"backward\" (capture/torch/recipe.sh takes such captures).\n"
		  "The partitioner recomputes in backward the saved activations that pointwise\n"
		  "kernels made from tensors backward has anyway and that only generated kernels\n"
		  "read there (freed after forward instead), drops eager's copies of in-place\n"
		  "activations' inputs and keeps max-pool indices as int8 offsets; the layout\n"
		  "stage adds the channels-last copies of weights and input saved for backward\n"
		  "and takes eager's NHWC copies out of cuDNN workspaces; then pointwise chains\n"
		  "are fused and their intermediates never allocated. Step times: the eager\n"
		  "step of the timeline model; the compiled one the larger of its modelled GPU\n"
		  "time and the eager host time scaled by what its launches cost against\n"
		  "eager's (never below the least they can take; docs/fusion.md).\n\n",
		  compile_opts,
		  "\nExit status: 0 ok, 1 failure (bad trace: file:line; a trace without the\n"
		  "ranges or links it needs), 2 usage.\n");
}

static void json_peaks(struct json *j, const char *key, const struct compile_peaks *p)
{
	json_key(j, key);
	json_begin_object(j);
	json_kv_u64(j, "allocated", p->allocated);
	json_kv_u64(j, "reserved", p->reserved);
	json_kv_u64(j, "requested", p->requested);
	json_end_object(j);
}

static void print_json(const char *trace, const char *out, const char *policy,
		       const char *steady, int timing, const struct compile_report *r)
{
	const struct compile_partition *p = &r->part;
	const struct fusion_stats *fs = &r->fusion.all;
	struct json j;
	json_init(&j, stdout);
	json_begin_object(&j);
	json_kv_string(&j, "trace", trace);
	json_key(&j, "output");
	if (out)
		json_string(&j, out);
	else
		json_null(&j);
	json_kv_string(&j, "policy", policy);
	json_kv_string(&j, "zero_grad", r->zero_grad_first ? "before-forward" : "as-captured");
	if (r->zero_grad_first) {
		json_kv_u64(&j, "zero_grad_frees_moved", r->zero_grad.frees_moved);
		json_kv_u64(&j, "zero_grad_bytes_moved", r->zero_grad.bytes_moved);
	}
	json_key(&j, "steady_from");
	if (steady)
		json_string(&j, steady);
	else
		json_null(&j);
	json_kv_u64(&j, "steps", p->steps);
	json_kv_u64(&j, "peak_allocated_before", r->before.allocated);
	json_kv_u64(&j, "peak_allocated_after", r->after.allocated);
	json_kv_double(&j, "peak_allocated_change_pct",
		       cli_change_pct(r->after.allocated, r->before.allocated));
	json_kv_u64(&j, "peak_reserved_before", r->before.reserved);
	json_kv_u64(&j, "peak_reserved_after", r->after.reserved);
	json_kv_u64(&j, "kernel_time_before_ns", fs->ktime_before);
	json_kv_u64(&j, "kernel_time_after_ns", fs->ktime_after);
	if (timing && !r->timed) {
		json_key(&j, "step_time_before_ns");
		json_null(&j);
		json_key(&j, "step_time_after_ns");
		json_null(&j);
		json_kv_string(&j, "step_time_not_predicted", r->untimed);
	}
	if (timing && r->timed) {
		json_kv_u64(&j, "step_time_before_ns", r->step_before_ns);
		json_kv_u64(&j, "step_time_after_ns", r->step_after_ns);
		json_kv_double(&j, "step_time_change_pct", cli_change_pct(r->step_after_ns, r->step_before_ns));
		json_kv_u64(&j, "gpu_time_per_step_before_ns", r->gpu_before.gpu_ns);
		json_kv_u64(&j, "gpu_time_per_step_after_ns", r->gpu_after.gpu_ns);
		json_kv_u64(&j, "kernels_per_step_before", r->gpu_before.launches);
		json_kv_u64(&j, "kernels_per_step_after", r->gpu_after.launches);
		json_kv_u64(&j, "host_launch_time_min_ns", r->gpu_after.host_min_ns);
		json_kv_u64(&j, "host_time_per_step_before_ns", r->host_before_ns);
		json_kv_u64(&j, "host_time_per_step_after_ns", r->host_after_ns);
		json_kv_bool(&j, "host_bound", r->host_bound);
		json_kv_u64(&j, "layout_transform_ns_per_step", r->gpu_after.layout_ns);
		json_kv_u64(&j, "generated_kernel_floor_ns", r->gpu_after.floor_ns);
		json_kv_double(&j, "generated_kernel_bandwidth_bytes_per_s", r->gpu_before.bw_median);
	}
	json_peaks(&j, "eager", &r->before);
	json_peaks(&j, "partitioned", &r->partitioned);
	json_peaks(&j, "compiled", &r->after);
	json_key(&j, "mechanisms");
	json_begin_object(&j);
	json_key(&j, "partitioner");
	json_begin_object(&j);
	json_kv_u64(&j, "saved_tensors", p->saved);
	json_kv_u64(&j, "saved_bytes", p->saved_bytes);
	json_kv_u64(&j, "recomputed_tensors", p->recomputed);
	json_kv_u64(&j, "recomputed_bytes", p->recomputed_bytes);
	json_kv_u64(&j, "recomputed_copies", p->clones);
	json_kv_u64(&j, "pool_offsets", p->offsets);
	json_kv_u64(&j, "pool_offsets_bytes_saved", p->offsets_bytes_saved);
	json_kv_u64(&j, "kept_producer", p->keep_producer);
	json_kv_u64(&j, "kept_inputs", p->keep_inputs);
	json_kv_u64(&j, "kept_backward", p->keep_backward);
	/* the layout stage is written in the partitioner's pass: this change
	 * is both */
	json_kv_i64(&j, "peak_allocated_change",
		    (int64_t)r->partitioned.allocated - (int64_t)r->before.allocated);
	json_end_object(&j);
	json_key(&j, "layout");
	json_begin_object(&j);
	json_kv_u64(&j, "channels_last_copies", p->layout_copies);
	json_kv_u64(&j, "channels_last_copy_bytes", p->layout_copy_bytes);
	json_kv_u64(&j, "workspaces_without_nhwc_copies", p->workspaces);
	json_kv_u64(&j, "workspace_bytes_saved", p->workspace_bytes_saved);
	json_end_object(&j);
	json_key(&j, "fusion");
	json_begin_object(&j);
	json_kv_u64(&j, "fused_kernels", fs->groups);
	json_kv_u64(&j, "kernels_fused", fs->kernels_fused);
	json_kv_u64(&j, "buffers_eliminated", fs->buffers_eliminated);
	json_kv_u64(&j, "bytes_eliminated", fs->bytes_eliminated);
	json_kv_i64(&j, "peak_allocated_change",
		    (int64_t)r->after.allocated - (int64_t)r->partitioned.allocated);
	json_end_object(&j);
	json_end_object(&j);
	json_end_object(&j);
	fputc('\n', stdout);
}

static void print_text(const char *trace, const char *out, const char *policy,
		       const char *steady, int timing, const struct compile_report *r)
{
	const struct compile_partition *p = &r->part;
	const struct fusion_stats *fs = &r->fusion.all;
	uint64_t n = p->steps ? p->steps : 1;
	char b1[32], b2[32], b3[32];
	printf("eager capture  %s: %" PRIu64 " forward/backward steps; peaks replayed with %s%s%s%s\n",
	       trace, p->steps, policy, steady ? " from range '" : " over the whole trace",
	       steady ? steady : "", steady ? "' on" : "");
	if (r->zero_grad_first)
		printf("zero_grad      before the forward pass: %" PRIu64 " gradients (%s) freed at their\n"
		       "               step's start in %" PRIu64 " steps instead of after its forward\n",
		       r->zero_grad.frees_moved, size_fmt(r->zero_grad.bytes_moved, b1, sizeof b1),
		       r->zero_grad.steps);
	printf("saved          %.0f tensors, %s per step (made in forward, freed in backward)\n",
	       (double)p->saved / (double)n, size_fmt(p->saved_bytes / n, b1, sizeof b1));
	printf("partitioner    recomputes %.0f of them in backward, %s per step (%.0f of them copies\n"
	       "               eager made of an in-place activation's input); %.0f max-pool indices\n"
	       "               kept as int8 offsets (%s per step less); kept: %.0f made by library,\n"
	       "               reduction or opaque kernels, %.0f whose inputs are gone, %.0f read in\n"
	       "               backward by a library kernel (or possibly an opaque one)\n",
	       (double)p->recomputed / (double)n, size_fmt(p->recomputed_bytes / n, b1, sizeof b1),
	       (double)p->clones / (double)n, (double)p->offsets / (double)n,
	       size_fmt(p->offsets_bytes_saved / n, b2, sizeof b2),
	       (double)p->keep_producer / (double)n, (double)p->keep_inputs / (double)n,
	       (double)p->keep_backward / (double)n);
	printf("layout         channels-last: %.0f copies of graph inputs (weights, the input)\n"
	       "               saved for backward, %s per step more; %.0f cuDNN workspaces\n"
	       "               without eager's NHWC copies, %s per step less\n",
	       (double)p->layout_copies / (double)n, size_fmt(p->layout_copy_bytes / n, b1, sizeof b1),
	       (double)p->workspaces / (double)n, size_fmt(p->workspace_bytes_saved / n, b2, sizeof b2));
	printf("fusion         %" PRIu64 " kernels into %" PRIu64 ", %" PRIu64
	       " intermediates never allocated (%s in all)\n",
	       fs->kernels_fused, fs->groups, fs->buffers_eliminated,
	       size_fmt(fs->bytes_eliminated, b1, sizeof b1));
	printf("peak allocated %s -> %s (%+.2f%%): partitioner and layout %+.2f%%, fusion %+.2f%%\n",
	       size_fmt(r->before.allocated, b1, sizeof b1), size_fmt(r->after.allocated, b2, sizeof b2),
	       cli_change_pct(r->after.allocated, r->before.allocated),
	       cli_change_pct(r->partitioned.allocated, r->before.allocated),
	       r->before.allocated ? 100.0 * ((double)r->after.allocated - (double)r->partitioned.allocated) /
					     (double)r->before.allocated : 0.0);
	printf("peak reserved  %s -> %s (%+.2f%%)\n", size_fmt(r->before.reserved, b1, sizeof b1),
	       size_fmt(r->after.reserved, b3, sizeof b3),
	       cli_change_pct(r->after.reserved, r->before.reserved));
	if (timing && !r->timed)
		printf("step time      not predicted: %s\n", r->untimed);
	if (timing && r->timed) {
		printf("GPU per step   %.2f ms -> %.2f ms (%" PRIu64 " -> %" PRIu64 " kernels; layout "
		       "transforms %.2f ms not run; generated kernels at %.0f GB/s, at least %.1f us)\n",
		       r->gpu_before.gpu_ns / 1e6, r->gpu_after.gpu_ns / 1e6, r->gpu_before.launches,
		       r->gpu_after.launches, r->gpu_after.layout_ns / 1e6, r->gpu_before.bw_median / 1e9,
		       r->gpu_after.floor_ns / 1e3);
		printf("host           %.2f ms -> %.2f ms per step (at least %.2f ms)%s\n",
		       r->host_before_ns / 1e6, r->host_after_ns / 1e6, r->gpu_after.host_min_ns / 1e6,
		       r->host_bound
			       ? ": more than its GPU time, the host bounds it (CUDA graphs,\n"
				 "               mode=\"reduce-overhead\", would remove launches)"
			       : "");
		printf("step time      %.2f ms -> %.2f ms (%+.1f%%; eager from the timeline model, caching on)\n",
		       r->step_before_ns / 1e6, r->step_after_ns / 1e6,
		       cli_change_pct(r->step_after_ns, r->step_before_ns));
	}
	if (out)
		printf("wrote %s\n", out);
}

/* whatif compile: exit codes as cli.h says. */
int cmd_whatif_compile(int argc, char **argv)
{
	const char *trace = NULL, *out = NULL, *rules_path = NULL, *policy = "pytorch";
	const char *steady = DEFAULT_STEADY, *figure = NULL, *figure_data = NULL;
	struct compile_options opt = {0};
	struct compile_report rep;
	struct fusion_rules rs;
	int json = 0, ret = 1;
	char err[2048];

	memset(&rep, 0, sizeof rep);
	memset(&rs, 0, sizeof rs);
	opt.timing = 1;
	for (int i = 2; i < argc; i++)
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i], *v;
		if (cli_take_opt(CMD, compile_opts, argc, argv, &i, &v) < 0)
			return EXIT_USAGE;
		if (!strcmp(o, "-o")) {
			out = v;
		} else if (!strcmp(o, "--policy")) {
			policy = v;
		} else if (!strcmp(o, "--conf")) {
			opt.conf = v;
		} else if (!strcmp(o, "--steady-from")) {
			steady = v;
		} else if (!strcmp(o, "--rules")) {
			rules_path = v;
		} else if (!strcmp(o, "--bandwidth")) {
			if (cli_parse_bandwidth(v, &opt.bandwidth) < 0) {
				fprintf(stderr, CMD ": --bandwidth '%s': expected a rate such as "
					"4.8TB/s, 900GB/s or 3e12 (bytes/s, at least 1MB/s)\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--zero-grad")) {
			if (!strcmp(v, "before-forward")) {
				opt.zero_grad_first = 1;
			} else if (strcmp(v, "as-captured")) {
				fprintf(stderr, CMD ": --zero-grad '%s': expected as-captured or "
					"before-forward\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--figure")) {
			if (plot_format_from_path(v) < 0) {
				fprintf(stderr, CMD ": --figure %s: the name must end in .png or .svg\n", v);
				return EXIT_USAGE;
			}
			figure = v;
			opt.timelines = 1;
		} else if (!strcmp(o, "--figure-data")) {
			figure_data = v;
		} else if (!strcmp(o, "--no-timing")) {
			opt.timing = 0;
		} else if (!strcmp(o, "--json")) {
			json = 1;
		} else if (o[0] == '-' && o[1]) {
			fprintf(stderr, CMD ": unknown option '%s'\n", o);
			return EXIT_USAGE;
		} else if (!trace) {
			trace = o;
		} else {
			fprintf(stderr, CMD ": one trace at a time ('%s' and '%s')\n", trace, o);
			return EXIT_USAGE;
		}
	}
	if (!trace) {
		fprintf(stderr, CMD ": missing TRACE\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	opt.policy = whatif_policy(CMD, policy);
	if (!opt.policy)
		return EXIT_USAGE;
	opt.steady_from = steady && *steady ? steady : NULL;
	if (rules_path) {
		if (fusion_rules_load(rules_path, &rs, err, sizeof err) < 0) {
			fprintf(stderr, CMD ": %s\n", err);
			goto out;
		}
		opt.rules = &rs;
	}
	/* a figure that cannot be drawn is refused before the replays write OUT */
	if (figure && cli_figure_writable(CMD, "--figure", figure) < 0)
		goto out;
	if (compile_apply(trace, out, &opt, &rep, err, sizeof err) < 0) {
		fprintf(stderr, CMD ": %s\n", err);
		goto out;
	}
	if (figure && plot_compile(&rep, trace, figure, figure_data, err, sizeof err) < 0) {
		fprintf(stderr, CMD ": --figure %s: %s\n", figure, err);
		goto out;
	}
	if (!rep.part.torch)
		fprintf(stderr, CMD ": note: %s is not labelled workload=torch; the rules are "
			"PyTorch's and Inductor's (kernel names, autograd's saved tensors)\n", trace);
	if (json)
		print_json(trace, out, policy, opt.steady_from, opt.timing, &rep);
	else
		print_text(trace, out, policy, opt.steady_from, opt.timing, &rep);
	if (fflush(stdout) != 0) {
		fprintf(stderr, CMD ": writing the report failed\n");
		goto out;
	}
	ret = 0;
out:
	compile_report_free(&rep);
	fusion_rules_free(&rs);
	return ret;
}
