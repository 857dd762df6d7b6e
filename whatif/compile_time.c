/*
 * compile_time.c: GPU time per step of the eager capture and of the
 * compiled program `whatif compile` wrote (see compile.h).
 *
 * The compiled program's kernels, per kernel launched inside a forward or
 * backward range (what torch.compile of the model covers; the optimizer and
 * anything outside stay eager and keep their durations):
 *  - a layout transform (cuDNN NCHW <-> NHWC) is not run: Inductor keeps
 *    convolutional graphs channels-last;
 *  - a library kernel (convolution, GEMM) keeps its duration, but ATen's
 *    NCHW depthwise convolution becomes cuDNN's channels-last one, timed as
 *    a generated kernel (memory-bound);
 *  - any other kernel with links is code Inductor generates, memory-bound:
 *    the bytes it touches (its links) at the bandwidth, but never shorter
 *    than the shortest element-wise kernel of the capture (a launch's floor);
 *  - a kernel without links keeps its duration.
 *
 * The host: Inductor's generated code launches every kernel from Python,
 * and a compiled step can take longer to launch than to run. Two figures:
 *  - host_weight_ns, what scales the eager step's host time into the
 *    compiled one's (compile_apply.c): every kernel at what a kernel of a
 *    training step costs, eager or compiled, plus a compiled step's fixed
 *    cost, from a small CNN's training step at two depths (launch_cost.py
 *    --train, launch_cost-4.json). Only the ratio is used, so the capture's
 *    own host speed carries over: the same programs ran up to 1.6x slower
 *    on one H200 host than on another.
 *  - host_min_ns, the least a step's launches can cost, per kernel from
 *    programs that are no model, the fastest of three hosts (launch_cost-
 *    {1,2,3}.json): a generated kernel 13.8 us, a library kernel called
 *    from generated code 12.0 us, an eager operator's kernel 9.4 us.
 * Training batch norm, one cuDNN kernel each way in eager, is decomposed by
 * Inductor: statistics (a reduction) and the normalisation (pointwise, with
 * what follows fused into it) plus the num_batches_tracked update in
 * forward, a reduction and a pointwise kernel in backward: 2 launches more
 * forward, 1 backward.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"
#include "../base/vec.h"
#include "../traces/trace.h"
#include "../traces/trace_xform.h"
#include "compile.h"
#include "compile_int.h"


struct ct {
	uint64_t *bytes;             /* per allocation id */
	size_t nbytes, cap_bytes;
	struct compile_range *fb;         /* forward and backward ranges */
	size_t nfb, cap_fb;
	struct compile_range *steps;      /* "step N" ranges from the steady one on */
	size_t nsteps, cap_steps;
	struct compile_kclass_cache cls;
};

/* The least a launch costs the host, per kernel: the fastest of three
 * H200 hosts (launch_cost-{1,2,3}.json; the same programs ran at up to 1.6x
 * these on the others). */
#define LAUNCH_GENERATED_NS 13800
#define LAUNCH_LIBRARY_NS 12000
#define LAUNCH_EAGER_NS 9400
/* What a kernel of a training step costs the host, eager and compiled, and
 * what a compiled step costs whatever its kernels (the compiled graphs'
 * guards and runtime wrappers): the slope and intercept between a small
 * CNN's training steps at 6 and 24 blocks on one H200 host
 * (launch_cost.py --train, launch_cost-4.json: eager 40.6 us a kernel and
 * -0.2 ms, taken as 0; compiled 35.7 us and 0.94 ms). Only ratios are used:
 * they scale the capture's own host time, so a slow host stays slow. */
#define TRAIN_EAGER_KERNEL_NS 40600.0
#define TRAIN_COMPILED_KERNEL_NS 35700.0
#define TRAIN_EAGER_FIXED_NS 0.0
#define TRAIN_COMPILED_FIXED_NS 937000.0

#define PUSH(arr, n, cap, val) \
	(VEC_RESERVE(arr, cap, (n) + 1, 64) < 0 ? -1 : ((arr)[(n)++] = (val), 0))

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

static int inside(const struct compile_range *v, size_t n, uint64_t t)
{
	return compile_range_at(v, n, t) != UINT32_MAX;
}

/* First pass: forward/backward ranges and the steady steps. */
static int ct_ranges(struct ct *c, struct trace_reader *rd, const char *steady, char *err,
		     size_t errlen)
{
	struct compile_range *from = NULL;   /* ranges named STEADY */
	size_t nfrom = 0, cap_from = 0;
	const struct compile_range_want w[] = {
		{"forward", 0, &c->fb, &c->nfb, &c->cap_fb},
		{"backward", 0, &c->fb, &c->nfb, &c->cap_fb},
		{"step [0-9]*", 1, &c->steps, &c->nsteps, &c->cap_steps},
		{steady ? steady : "", 0, &from, &nfrom, &cap_from}};
	if (compile_ranges_read(rd, w, steady ? 4 : 3, err, errlen) < 0) {
		free(from);
		return -1;
	}
	/* the steps from the first range named STEADY on (none: no step) */
	if (steady) {
		size_t k = 0;
		for (size_t i = 0; i < c->nsteps; i++)
			if (nfrom && c->steps[i].start >= from[0].start)
				c->steps[k++] = c->steps[i];
		c->nsteps = k;
	}
	free(from);
	if (!c->nsteps) {
		snprintf(err, errlen, "%s: no NVTX \"step N\" ranges%s%s%s: step times need them",
			 trace_reader_path(rd), steady ? " from '" : "", steady ? steady : "",
			 steady ? "' on" : "");
		return COMPILE_NO_STEPS;
	}
	if (trace_reader_rewind(rd) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		return -1;
	}
	return 0;
}

/* Every kernel of the trace, for the model and the rewrite. */
struct gk {
	uint64_t dur, bytes;
	uint8_t in_step;             /* launched in a measured step */
	uint8_t gen;                 /* modelled as generated (memory-bound) */
	uint8_t drop;                /* a layout transform the compiled program skips */
	uint8_t compiled;            /* launched by the compiled program (model 1) */
	uint8_t extra;               /* launches Inductor adds for it (batch norm) */
};

/* The least one in-step kernel's launch costs the host (for an eager
 * capture, model 0, every kernel is an eager operator's). */
static uint64_t launch_cost_ns(const struct gk *k)
{
	if (!k->compiled)
		return LAUNCH_EAGER_NS;
	return (uint64_t)k->extra * LAUNCH_GENERATED_NS +
	       (k->gen || k->extra ? LAUNCH_GENERATED_NS : LAUNCH_LIBRARY_NS);
}

/* Write IN's records to OUT with the kernels as modelled: dropped layout
 * transforms gone, the others ending at start + DUR[i]. */
static int write_retimed(struct trace_reader *rd, const char *out, const struct gk *ks,
			 const uint64_t *dur, char *err, size_t errlen)
{
	struct trace_writer *w = trace_writer_open(out, TRACE_W_ATOMIC, err, errlen);
	struct trace_strmap sm;
	struct trace_rec rec;
	size_t ki = 0;
	int st, ret = -1;

	if (!w)
		return -1;
	trace_strmap_init(&sm, rd, w);
	if (trace_reader_rewind(rd) < 0 || trace_writer_header(w, trace_reader_header(rd)) < 0) {
		snprintf(err, errlen, "%s: rewriting for the compiled durations failed", out);
		goto out;
	}
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		if (rec.type == TREC_KERNEL) {
			size_t i = ki++;
			if (ks[i].drop)
				continue;
			rec.end = rec.start + dur[i];
		}
		if (trace_strmap_rec(&sm, &rec) < 0 || trace_writer_record(w, &rec) < 0) {
			snprintf(err, errlen, "%s: writing failed (record from %s:%" PRIu64 ")", out,
				 trace_reader_path(rd), rec.line);
			goto out;
		}
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	ret = trace_xform_close(&w, rd, err, errlen);
out:
	if (w)
		trace_writer_abort(w);
	trace_strmap_free(&sm);
	return ret;
}

int compile_gpu_time(const char *path, const char *steady, double bandwidth, int model,
		     const char *out, struct compile_gpu *g, char *err, size_t errlen)
{
	struct ct c;
	struct gk *ks = NULL;        /* every kernel */
	size_t nks = 0, cap_ks = 0;
	uint64_t *dur = NULL;        /* each kernel's modelled duration */
	struct trace_reader *rd;
	struct trace_launches corr;
	struct trace_rec rec;
	uint64_t gpu = 0, launches = 0, layout = 0, floor_ns = UINT64_MAX, host = 0;
	double weight = 0;           /* the step's launches at training-step costs */
	double *bw = NULL;           /* element-wise kernels' bytes per second */
	size_t nbw = 0, cap_bw = 0;
	int st, ret = -1;

	memset(&c, 0, sizeof c);
	memset(g, 0, sizeof *g);
	trace_launches_init(&corr);
	if (!(rd = trace_reader_start(path, err, errlen)))
		goto out;
	if ((ret = ct_ranges(&c, rd, steady, err, errlen)) < 0)
		goto out;
	ret = -1;
	/* the floor is the shortest element-wise kernel of the whole trace, so
	 * the kernels are timed once it is read */
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		switch (rec.type) {
		case TREC_ALLOC:
			if (PUSH(c.bytes, c.nbytes, c.cap_bytes, rec.u.mem.bytes) < 0)
				goto nomem;
			break;
		case TREC_API:
			if (trace_launches_note(&corr, &rec) < 0)
				goto nomem;
			break;
		case TREC_KERNEL: {
			uint64_t launch = trace_launches_take(&corr, rec.u.kernel.corr, rec.start);
			uint64_t d = rec.end - rec.start;
			enum kclass k;
			if (compile_kclass_cached(&c.cls, rd, rec.u.kernel.name, &k) < 0)
				goto nomem;
			if (k == K_POINTWISE && d && d < floor_ns)
				floor_ns = d;
			uint64_t kb = 0;
			for (uint32_t l = 0; l < rec.u.kernel.nlinks; l++)
				if (rec.u.kernel.links[l] < c.nbytes)
					kb += c.bytes[rec.u.kernel.links[l]];
			if (rec.u.kernel.nlinks == 1)
				kb *= 2;         /* in place: read and written */
			if (k == K_POINTWISE && d && kb) {
				if (VEC_RESERVE(bw, cap_bw, nbw + 1, 256) < 0)
					goto nomem;
				bw[nbw++] = (double)kb / (double)d * 1e9;
			}
			int compiled = model && inside(c.fb, c.nfb, launch);
			const char *nm = trace_reader_string(rd, rec.u.kernel.name);
			uint8_t extra = 0;
			if (compiled && nm && k == K_NORM)
				extra = strstr(nm, "bn_fw") ? 2 : strstr(nm, "bn_bw") ? 1 : 0;
			struct gk e = {.dur = d, .bytes = kb, .compiled = (uint8_t)compiled, .extra = extra,
				       .in_step = (uint8_t)inside(c.steps, c.nsteps, launch),
				       .gen = (uint8_t)(compiled && k != K_LIBRARY && k != K_LAYOUT &&
							rec.u.kernel.nlinks),
				       .drop = (uint8_t)(compiled && k == K_LAYOUT)};
			if (PUSH(ks, nks, cap_ks, e) < 0)
				goto nomem;
			break;
		}
		default:
			break;
		}
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	if (floor_ns == UINT64_MAX)
		floor_ns = 0;
	if (nbw) {
		qsort(bw, nbw, sizeof *bw, cmp_double);
		g->bw_median = bw[(nbw - 1) / 2];
	}
	dur = malloc((nks ? nks : 1) * sizeof *dur);
	if (!dur)
		goto nomem;
	for (size_t i = 0; i < nks; i++) {
		uint64_t d = ks[i].dur;
		if (ks[i].gen && bandwidth > 0) {
			/* memory-bound, never below a launch's floor, never slower
			 * than the eager kernel it replaces */
			uint64_t m = (uint64_t)((double)ks[i].bytes / bandwidth * 1e9 + 0.5);
			if (m < floor_ns)
				m = floor_ns;
			if (m < d)
				d = m;
		}
		dur[i] = d;
		if (!ks[i].in_step)
			continue;
		if (ks[i].drop) {
			layout += ks[i].dur;
			continue;
		}
		launches++;
		gpu += d;
		host += launch_cost_ns(&ks[i]);
		weight += ks[i].compiled ? (1 + ks[i].extra) * TRAIN_COMPILED_KERNEL_NS
					 : TRAIN_EAGER_KERNEL_NS;
		launches += ks[i].extra;
	}
	g->steps = c.nsteps;
	g->gpu_ns = gpu / c.nsteps;
	g->launches = launches / c.nsteps;
	g->host_min_ns = model ? host / c.nsteps : 0;
	g->host_weight_ns = (uint64_t)(weight / (double)c.nsteps +
				       (model ? TRAIN_COMPILED_FIXED_NS : TRAIN_EAGER_FIXED_NS) + 0.5);
	g->layout_ns = layout / c.nsteps;
	g->floor_ns = floor_ns;
	if (out && write_retimed(rd, out, ks, dur, err, errlen) < 0)
		goto out;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	trace_launches_free(&corr);
	trace_reader_close(rd);
	free(c.bytes);
	free(c.fb);
	free(c.steps);
	compile_kclass_cache_free(&c.cls);
	free(ks);
	free(dur);
	free(bw);
	return ret;
}
