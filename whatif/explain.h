/*
 * explain.h: why peak memory moves with batch size (the seed question); the
 * `explain batch` command prints what explain_batch() finds.
 *
 * Each capture of a batch sweep is replayed under one policy (sim_run gives
 * peak reserved, allocated and requested, and the line where the peak of
 * reserved was reached); the trace is then walked once more to see what was
 * live at that line (bf_live_at): workspaces (cuDNN/cuBLAS, or buffers that
 * live and die inside one layer's NVTX range), and the rest (activations,
 * gradients, weights). The peak is split additively:
 *
 *   reserved = workspace + activations + rounding + slack
 *
 * rounding = peak allocated - peak requested (the policy's size classes),
 * slack = what is reserved but not allocated (segment/region growth and
 * fragmentation: cached memory that could not be reused). Between
 * neighbouring batch sizes the change of each term is computed, points where
 * reserved falls while batch grows (or where its slope jumps to more than
 * twice its neighbours') are flagged, and the term that moved most in the
 * direction of the change is named as the cause.
 */
#ifndef WHATIF_EXPLAIN_H
#define WHATIF_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "batch_fit.h"

struct alloc_policy;

#define EXPLAIN_MAX_POINTS 64

/* One capture of the sweep, replayed. */
struct explain_point {
	const char *path;
	size_t arg;                    /* its place among the paths given */
	uint64_t batch;
	uint64_t reserved, allocated, requested;
	uint64_t peak_line;
	uint64_t ws, act, rounding, slack;
	struct bf_live live;
	int oom;                       /* the replay ran out of memory: its peak is what fitted */
};

/* From one point to the next (by batch). */
struct explain_step {
	int64_t d[5];                  /* reserved, ws, act, rounding, slack */
	double slope;
	const char *flag;              /* "", "FALLS", "JUMP", "WS-FALLS" */
	const char *cause;
	char detail[256];
};

/* The names of the terms of explain_step.d. */
extern const char *const explain_term_names[5];

struct explain_options {
	const struct alloc_policy *policy;
	const char *conf;              /* its knobs; may be NULL */
	uint64_t capacity;             /* 0: the trace's, else unlimited */
	const char *from_range;        /* the steady state from the first NVTX range
					* of this name on (whatif steady); NULL: all */
};

struct explain_result {
	struct explain_point p[EXPLAIN_MAX_POINTS];  /* by batch, ascending */
	struct explain_step st[EXPLAIN_MAX_POINTS];  /* st[i]: p[i] -> p[i + 1] */
	size_t np;
};

/*
 * Replay the N (2..EXPLAIN_MAX_POINTS) captures PATHS and explain the
 * steps between them. Returns 0 with R filled, or -1 with ERR; either way
 * R->p[0..R->np) holds the points, with the OOM flag set on those whose
 * replay ran out of memory (explain_point.arg: each one's place in PATHS,
 * for warnings in the order given). Prints nothing.
 */
int explain_batch(char *const *paths, size_t n, const struct explain_options *o,
		  struct explain_result *r, char *err, size_t errlen);

/* "+1.50 GiB" / "-12.0 MiB". Returns BUF. */
const char *explain_fmt_delta(int64_t d, char *buf, size_t len);

#endif /* WHATIF_EXPLAIN_H */
