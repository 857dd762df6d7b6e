/*
 * compile.h: what torch.compile (Inductor, default mode) would do to the
 * memory of a training step, predicted from an eager capture.
 *
 * Two mechanisms, in this order (docs/fusion.md, "whatif compile"):
 *
 * 1. AOTAutograd's partitioner. Eager autograd keeps every tensor a backward
 *    formula names until backward runs. The compiled forward saves only what
 *    backward cannot cheaply recompute: an activation produced by a
 *    pointwise kernel, whose inputs backward has anyway, and which backward
 *    reads only from kernels Inductor generates (not from a convolution or
 *    GEMM, where it would have to be materialised again), is recomputed
 *    inside its backward consumers instead of saved. In the compiled
 *    program such an allocation is freed after its last forward use, and
 *    its backward readers read the recomputation instead.
 * 2. Fusion of pointwise chains in forward and backward (whatif/fusion.c with
 *    rules that approximate Inductor's: the intermediates a chain passes
 *    between its kernels are never allocated).
 *
 * The capture must be an eager run with one allocation per tensor
 * (PYTORCH_NO_CUDA_MEMORY_CACHING=1, as capture/torch/recipe.sh takes it),
 * kernel-to-buffer links, and NVTX ranges named "forward" and "backward"
 * (and "step N" for the steady state).
 */
#ifndef WHATIF_COMPILE_H
#define WHATIF_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "fusion.h"

/* What the partitioner model decided, over the whole trace. */
struct compile_partition {
	int torch;                   /* the trace is labelled workload=torch: the
				      * rules are PyTorch's and Inductor's */
	uint64_t steps;              /* forward/backward pairs found */
	uint64_t saved, saved_bytes; /* allocations made in a forward and freed in
				      * (or after) its backward: what eager saved */
	uint64_t recomputed, recomputed_bytes;  /* of those, recomputed instead */
	uint64_t clones;             /* of the recomputed: copies eager autograd made
				      * of an in-place activation's input */
	uint64_t offsets, offsets_bytes_saved;  /* max-pool indices kept as int8
				      * offsets: how many, and the bytes that saves */
	uint64_t layout_copies, layout_copy_bytes;  /* channels-last copies of
				      * graph inputs (weights, the step's input)
				      * made in forward and saved for backward */
	uint64_t workspaces, workspace_bytes_saved;  /* cuDNN workspaces that held
				      * eager's NHWC copies, and those bytes */
	/* why the others stay saved (counts) */
	uint64_t keep_producer;      /* made by a convolution, GEMM, normalisation,
				      * reduction, random or opaque kernel */
	uint64_t keep_inputs;        /* an input would not exist in backward */
	uint64_t keep_backward;      /* read in backward by a library kernel, by no
				      * linked kernel, or possibly by an opaque one */
};

struct alloc_policy;

#include "zero_grad.h"

struct compile_options {
	const struct fusion_rules *rules;  /* fusion stage; NULL: the builtin
					    * Inductor-like rules */
	double bandwidth;            /* bytes/s for fused durations; 0 = measured */
	const struct alloc_policy *policy; /* replays for the peaks (pytorch) */
	const char *conf;            /* its knobs; may be NULL */
	int timelines;               /* keep each replay's timeline (a figure) */
	int zero_grad_first;         /* the loop frees the previous gradients at
				      * the step's start, not after the forward
				      * pass as captured (zero_grad.h) */
	const char *steady_from;     /* peaks count from the first NVTX range of
				      * this name on (e.g. "step 1"): the steady
				      * state, without the first step's autotuning;
				      * NULL = the whole trace */
	int timing;                  /* also predict the step time when the trace has
				      * "step N" ranges (without them: timed = 0) */
};

/* Peaks of one replay (the policy's, in the steady state). */
struct sim_timeline_point;
struct compile_peaks {
	uint64_t allocated, reserved, requested;
	/* with compile_options.timelines: allocated and reserved over the
	 * replay (from --steady-from on), sim_result's downsampled timeline */
	struct sim_timeline_point *timeline;
	size_t ntimeline;
};

struct compile_gpu {
	uint64_t steps;              /* steps averaged */
	uint64_t gpu_ns;             /* kernel time per step */
	uint64_t launches;           /* kernels per step */
	uint64_t host_min_ns;        /* model 1: the least the host takes to launch
				      * them (compile_time.c) */
	uint64_t host_weight_ns;     /* their launches at a training step's costs
				      * (compile_time.c; model 0: all eager), per step:
				      * only its ratio to the eager one is used */
	uint64_t layout_ns;          /* per step: layout transforms not run (model) */
	uint64_t floor_ns;           /* the shortest element-wise kernel */
	double bw_median;            /* bytes/s the capture's element-wise kernels
				      * reach, the median (as fuse measures it) */
};

struct compile_report {
	struct compile_partition part;
	int zero_grad_first;         /* compile_options.zero_grad_first: */
	struct zero_grad_report zero_grad;  /* what moved */
	struct fusion_report fusion; /* the fusion stage, on the partitioned trace */
	struct compile_peaks before; /* the eager capture */
	struct compile_peaks partitioned; /* after the partitioner alone */
	struct compile_peaks after;  /* the compiled program: both stages */
	/* with compile_options.timing */
	struct compile_gpu gpu_before, gpu_after;
	uint64_t step_before_ns;     /* the eager step, timeline model (caching on) */
	uint64_t step_after_ns;      /* the compiled step */
	uint64_t host_before_ns;     /* the eager step's host time: the timeline
				      * model with the GPU taking no time */
	uint64_t host_after_ns;      /* the compiled step's: host_before_ns scaled by
				      * gpu_after.host_weight_ns / gpu_before's */
	int host_bound;              /* its launches take the host longer than its
				      * GPU time (host_after_ns > gpu_after.gpu_ns) */
	int timed;                   /* the step times above were predicted */
	char untimed[256];           /* else why not (timing asked) */
};

/* The Inductor-like fusion rules `whatif compile` uses by default (the same
 * as traces/fusion_rules/torch_inductor_like.rules). */
extern const char compile_builtin_rules[];

/* The partitioner stage alone: write IN with the recomputed allocations
 * freed after their last forward use (and unlinked from their backward
 * readers) to OUT, atomically. 0, or -1 with ERR naming the file and line,
 * or saying what the trace lacks (no forward/backward ranges, no links). */
int compile_partition(const char *in, const char *out, struct compile_partition *p,
		      char *err, size_t errlen);

/* Partition, then fuse; write the compiled program's trace to OUT
 * (atomically; NULL: report only), and replay the eager, partitioned and
 * compiled traces for their peaks. 0, or -1 with ERR. Free REP with
 * compile_report_free(). */
int compile_apply(const char *in, const char *out, const struct compile_options *o,
		  struct compile_report *rep, char *err, size_t errlen);
void compile_report_free(struct compile_report *rep);

/* GPU time per step (compile_time.c): the kernels launched in the steady
 * "step N" ranges, averaged over them (struct compile_gpu). */

/* GPU time per step of PATH from the first range STEADY on (NULL: every
 * step). MODEL 0: as recorded; 1: the compiled program's kernels (layout
 * transforms dropped, generated kernels memory-bound at BANDWIDTH bytes/s;
 * see compile_time.c). OUT (may be NULL): also write PATH there with the
 * kernels as modelled (layout transforms gone, generated kernels re-timed):
 * the compiled program's trace. 0, -1 with ERR, or COMPILE_NO_STEPS with
 * ERR when PATH has no "step N" range from STEADY on. */
#define COMPILE_NO_STEPS (-2)
int compile_gpu_time(const char *path, const char *steady, double bandwidth, int model,
		     const char *out, struct compile_gpu *g, char *err, size_t errlen);

#endif /* WHATIF_COMPILE_H */
