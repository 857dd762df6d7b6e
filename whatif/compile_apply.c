/*
 * compile_apply.c: the torch.compile what-if end to end (compile.h,
 * docs/fusion.md): the zero_grad order asked for, the partitioner and
 * layout stage (compile.c), fusion (fusion.c), the compiled program's GPU
 * time (compile_time.c), the replays for the peaks and the step times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/tmpfile.h"
#include "../device/cost.h"
#include "../sim/engine.h"
#include "batch_fit.h"
#include "compile.h"

/* A private temporary file named in BUF: 0, or -1 with ERR. */
static int make_tmp(char *buf, size_t len, const char *what, char *err, size_t errlen)
{
	if (tmp_file(buf, len, what) < 0) {
		snprintf(err, errlen, "%s: cannot create a temporary file", buf);
		buf[0] = 0;
		return -1;
	}
	return 0;
}

/* Replay PATH (its steady state when O->steady_from) for its peaks. */
static int replay_peaks(const char *path, const struct compile_options *o,
			struct compile_peaks *pk, char *err, size_t errlen)
{
	char tmp[4096] = "";
	struct bf_trace *t = NULL;
	struct sim_result res;
	int ret = -1;

	memset(&res, 0, sizeof res);
	if (o->steady_from) {
		if (bf_load(path, &t, err, errlen) < 0 ||
		    make_tmp(tmp, sizeof tmp, "steady", err, errlen) < 0 ||
		    bf_write_from_range(t, o->steady_from, tmp, err, errlen) < 0)
			goto out;
		path = tmp;
	}
	/* a figure shows the steps, a few percent of a capture that starts
	 * with seconds of autotuning: a fine timeline */
	struct sim_options so = {.trace_path = path, .policy = o->policy, .conf = o->conf,
				 .timeline_points = o->timelines ? 16384 : 0};
	if (sim_run(&so, &res, err, errlen) < 0)
		goto out;
	pk->allocated = res.peak_allocated;
	pk->reserved = res.peak_reserved;
	pk->requested = res.peak_requested;
	if (o->timelines) {  /* the replay's timeline becomes the caller's */
		pk->timeline = res.timeline;
		pk->ntimeline = res.ntimeline;
		res.timeline = NULL;
		res.ntimeline = 0;
	}
	ret = 0;
out:
	sim_result_free(&res);
	bf_free(t);
	if (tmp[0])
		remove(tmp);
	return ret;
}

/*
 * Step times. Before: the timeline model's eager step with the caching
 * allocator (the capture's host gaps, the cost table; docs/timing.md).
 * After: the larger of that step with the forward and backward kernels
 * replaced by the compiled program's (compile_time.c) and the eager host
 * time scaled to the compiled launches (compiled steps are often
 * launch-bound: docs/fusion.md).
 */
/* The eager step's times: the GPU time per step of IN, the timeline
 * model's step (caching allocator on) and the host's part of it (the same
 * model with the GPU taking no time: launches, allocator calls, the
 * framework's gaps). COMPILE_NO_STEPS: IN has no steps. */
static int eager_times(const char *in, const struct compile_options *o,
		       struct compile_report *rep, char *err, size_t errlen)
{
	struct cost_model cm;
	struct sim_result res;
	int ret;

	memset(&res, 0, sizeof res);
	ret = compile_gpu_time(in, o->steady_from, 0, 0, NULL, &rep->gpu_before, err, errlen);
	if (ret < 0)
		return ret;
	if (cost_fit_trace(in, NULL, &cm, err, errlen) < 0)
		return -1;
	struct sim_options so = {.trace_path = in, .policy = o->policy, .conf = o->conf, .cost = &cm};
	ret = sim_run(&so, &res, err, errlen);
	rep->step_before_ns = res.step_time_ns;
	sim_result_free(&res);
	if (ret < 0)
		return ret;
	cm.gpu_scale = 1e-9;    /* every kernel and copy ends as it starts */
	ret = sim_run(&so, &res, err, errlen);
	rep->host_before_ns = res.step_time_ns;
	sim_result_free(&res);
	return ret;
}

/*
 * Step time after. The GPU's part: the eager step with its GPU time
 * replaced by the compiled program's (compile_time.c): what the GPU saves,
 * the step saves. The host's part: the eager step's host time scaled by
 * what the compiled program's launches cost against eager's, at per-kernel
 * costs measured on programs that are no model (so a capture on a slow host
 * predicts a slow compiled host too). The step is the larger, and never
 * less than the least its launches take the host.
 */
static void compiled_step(struct compile_report *rep)
{
	int64_t after = (int64_t)rep->step_before_ns - (int64_t)rep->gpu_before.gpu_ns +
			(int64_t)rep->gpu_after.gpu_ns;
	if (after < (int64_t)rep->gpu_after.gpu_ns)
		after = (int64_t)rep->gpu_after.gpu_ns;
	rep->host_after_ns = rep->gpu_before.host_weight_ns
				     ? (uint64_t)((double)rep->host_before_ns *
						  (double)rep->gpu_after.host_weight_ns /
						  (double)rep->gpu_before.host_weight_ns + 0.5)
				     : 0;
	if (rep->host_after_ns < rep->gpu_after.host_min_ns)
		rep->host_after_ns = rep->gpu_after.host_min_ns;
	rep->host_bound = rep->host_after_ns > rep->gpu_after.gpu_ns;
	if (after < (int64_t)rep->host_after_ns)
		after = (int64_t)rep->host_after_ns;
	rep->step_after_ns = (uint64_t)after;
	rep->timed = 1;
}

int compile_apply(const char *in, const char *out, const struct compile_options *o,
		  struct compile_report *rep, char *err, size_t errlen)
{
	struct fusion_rules builtin;
	const struct fusion_rules *rs = o->rules;
	char part[4096] = "", fused[4096] = "", tmp_out[4096] = "", zg[4096] = "";
	int ret = -1, timed = 0;

	memset(rep, 0, sizeof *rep);
	memset(&builtin, 0, sizeof builtin);
	if (!rs) {
		if (fusion_rules_parse(compile_builtin_rules, "builtin", &builtin, err, errlen) < 0)
			return -1;
		rs = &builtin;
	}
	/* the other loop order first: every stage and the "before" see it */
	if (o->zero_grad_first) {
		if (make_tmp(zg, sizeof zg, "zerograd", err, errlen) < 0 ||
		    zero_grad_first(in, zg, &rep->zero_grad, err, errlen) < 0)
			goto out;
		in = zg;
		rep->zero_grad_first = 1;
	}
	if (make_tmp(part, sizeof part, "partitioned", err, errlen) < 0 ||
	    compile_partition(in, part, &rep->part, err, errlen) < 0)
		goto out;
	if (o->policy && (replay_peaks(in, o, &rep->before, err, errlen) < 0 ||
			  replay_peaks(part, o, &rep->partitioned, err, errlen) < 0))
		goto out;
	if (o->timing) {
		int st = eager_times(in, o, rep, err, errlen);
		if (st == COMPILE_NO_STEPS)  /* memory only: say why */
			snprintf(rep->untimed, sizeof rep->untimed, "%s", err);
		else if (st < 0)
			goto out;
		timed = st == 0;
	}
	/* the compiled trace goes to OUT (written atomically), else to a
	 * temporary file; with step times, fused first, then re-timed */
	const char *target = out;
	if (!target) {
		if (make_tmp(tmp_out, sizeof tmp_out, "compiled", err, errlen) < 0)
			goto out;
		target = tmp_out;
	}
	if (timed && make_tmp(fused, sizeof fused, "fused", err, errlen) < 0)
		goto out;
	struct fusion_options fo = {.bandwidth = o->bandwidth};
	if (fusion_apply(part, timed ? fused : target, rs, &fo, &rep->fusion, err, errlen) < 0)
		goto out;
	if (timed) {
		double bw = o->bandwidth > 0 ? o->bandwidth : rep->gpu_before.bw_median;
		if (compile_gpu_time(fused, o->steady_from, bw, 1, target, &rep->gpu_after, err,
				     errlen) < 0)
			goto fail;
		compiled_step(rep);
	}
	if (o->policy && replay_peaks(target, o, &rep->after, err, errlen) < 0)
		goto fail;
	ret = 0;
	goto out;
fail:
	if (out)
		remove(out);  /* no result without its report */
out:
	if (part[0])
		remove(part);
	if (fused[0])
		remove(fused);
	if (tmp_out[0])
		remove(tmp_out);
	if (zg[0])
		remove(zg);
	fusion_rules_free(&builtin);
	return ret;
}

void compile_report_free(struct compile_report *rep)
{
	fusion_report_free(&rep->fusion);
	free(rep->before.timeline);
	free(rep->partitioned.timeline);
	free(rep->after.timeline);
	rep->before.timeline = rep->partitioned.timeline = rep->after.timeline = NULL;
}
