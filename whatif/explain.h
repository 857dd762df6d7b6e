/*
 * explain.h: why peak memory moves with batch size (the seed question); the
 * `explain batch` command prints what explain_batch() finds.
 *
 * Each capture of a batch sweep is replayed under one policy and its peak
 * reserved memory split at one moment (explain_replay): of the moments
 * where reserved is at its peak, the one with the most allocated. The split
 * is additive and exact:
 *
 *   reserved  = allocated + cached/frag
 *   allocated = workspace + activations + gradients + weights+optimizer
 *               + other + rounding
 *
 * cached/frag is reserved minus allocated at that moment: memory the policy
 * held but no live block used (its cache, fragmentation, segments grown
 * ahead). The kinds are the engine's classification of what was live
 * (sim/engine_peak.c; docs/schema.md, peak_live: workspace includes
 * library_workspace), each in requested bytes (the trace's); rounding is
 * the live blocks' bytes above their requests (the policy's size classes).
 * Between neighbouring batch sizes the change of each term is computed,
 * points where reserved falls while batch grows (or where its slope jumps
 * to more than twice its neighbours') are flagged, and the term that moved
 * most in the direction of the change is named as the cause.
 */
#ifndef WHATIF_EXPLAIN_H
#define WHATIF_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "batch_fit.h"
#include "../sim/engine.h"

struct alloc_policy;

#define EXPLAIN_MAX_POINTS 64

/* The terms of the split, in explain_point.term and explain_step.d. */
enum explain_term {
	EX_RESERVED = 0,
	EX_WORKSPACE,      /* workspace + library_workspace */
	EX_ACTIVATIONS,
	EX_GRADIENTS,
	EX_WEIGHTS,        /* weights + optimizer_state */
	EX_OTHER,
	EX_ROUNDING,       /* allocated - requested of the live blocks */
	EX_FRAG,           /* reserved - allocated */
	EX_NTERMS
};

/* Names for tables and causes ("reserved", "workspace", ...,
 * "cached/fragmentation"), and for JSON keys ("reserved", "workspace",
 * ..., "weights_optimizer", "reserved_minus_allocated"). */
extern const char *const explain_term_names[EX_NTERMS];
extern const char *const explain_term_keys[EX_NTERMS];

/*
 * The policy's own account of the peak (policy.h, decisions; explain_mech.c):
 * what it held at the moment, each range with the decision that took it.
 */
#define EXPLAIN_MAX_HOLD 40
struct explain_hold {
	uint64_t addr, bytes;          /* the range held (a region, a segment, pages) */
	uint64_t live;                 /* bytes of blocks live in it at the moment */
	uint32_t nth;                  /* it was the policy's nth growth of the run */
	const char *what, *why;        /* the decision's (static strings) */
	uint64_t request;              /* the request that forced it (rounded), 0: none */
	uint64_t line;                 /* the trace line then */
	uint64_t free_then, largest_then, nfree_then; /* the policy's free space then */
	uint64_t prev_bytes;           /* the size rule's next size before it (bfc) */
	uint32_t count_after;          /* ranges held after it */
	char origin[96];               /* the request: "workspace conv4_2.bwd", ... */
};

struct explain_mech {
	int have;                      /* the policy reported its decisions */
	uint64_t ngrow;                /* growths of the whole run */
	struct explain_hold hold[EXPLAIN_MAX_HOLD]; /* held at the moment, in the order
					* taken; when more, the largest are kept */
	size_t nhold;
	uint64_t nheld;                /* ranges held at the moment (all) */
	uint64_t rest_bytes, rest_live;/* of those beyond hold[] */
	struct explain_hold last;      /* the growth that set the peak (the last one
					* before the moment); last.nth 0: none */
	uint64_t nrel, rel_bytes;      /* releases before the moment */
	const char *rel_why;           /* the reason of the most bytes released */
	uint64_t limit;                /* a standing limit the policy reported, 0: none */
	uint64_t device_peak;          /* reserved + outside the allocator (the run's most) */
	uint64_t foreign_peak;
	uint64_t context;              /* CUDA context and libraries assumed (explain_options) */
};

/* One capture of the sweep, replayed. */
struct explain_point {
	const char *path;
	size_t arg;                    /* its place among the paths given */
	uint64_t batch;
	uint64_t reserved, allocated;  /* at the moment of the peak */
	uint64_t peak_line;            /* the trace line after which it is taken */
	int first_reach;               /* it is where reserved first reached its peak */
	uint64_t term[EX_NTERMS];      /* term[EX_RESERVED] = reserved; the rest sum to it */
	uint64_t kind[SIM_LK_COUNT];   /* requested bytes live then, by the engine's kind */
	struct bf_group ws[BF_MAX_GROUPS]; /* workspaces live then, largest first, by
					    * NVTX range (else source library) */
	size_t nws;
	int oom;                       /* the replay ran out of memory: its peak is what fitted */
	struct explain_mech mech;      /* the policy's own account (mech.have 0: none) */
};

/* From one point to the next (by batch). */
struct explain_step {
	int64_t d[EX_NTERMS];          /* change of each term */
	double slope;
	const char *flag;              /* "", "FALLS", "JUMP", "WS-FALLS" */
	const char *cause;             /* an explain_term_names entry, or "-" */
	char detail[256];
	char mechanism[768];           /* flagged steps: the policy's mechanism in words, "" */
	char label[64];                /* the same in a few words, for figures */
};

struct explain_options {
	const struct alloc_policy *policy;
	const char *conf;              /* its knobs; may be NULL */
	uint64_t capacity;             /* 0: the trace's, else unlimited */
	const char *from_range;        /* the steady state from the first NVTX range
					* of this name on (whatif steady); NULL: all */
	uint64_t context;              /* device memory outside every allocation (CUDA
					* context, module code, library handles) for
					* the device-level view; 0: EXPLAIN_CONTEXT */
	enum sim_xla_mode xla_requests;  /* sim_options.xla_requests (AUTO = 0) */
};

/* The CUDA context, module code and cuDNN/cuBLAS handles of the H200 runs:
 * NVML process memory minus the BFC pool, 620-622 MiB over the 11 JAX runs
 * (docs/validation_bfc.md). */
#define EXPLAIN_CONTEXT (622ull << 20)

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

/* A block live at the moment (policy address, block bytes). */
struct explain_block { uint64_t addr, bytes; };

/* The moment of the peak a replay is split at (explain_moment.c says why
 * and how). */
struct explain_moment {
	uint64_t reserved;             /* peak reserved */
	uint64_t line;                 /* trace line after which the moment is */
	int first_reach;               /* the first time reserved reached its peak */
	int oom;
	struct sim_result res;         /* res.peak_item: the engine's live set at the
					* moment; free with sim_result_free */
	uint64_t device_peak;          /* the run's most reserved + outside the allocator */
	uint64_t foreign_peak;         /* the run's most bytes outside the allocator */
	/* with sim_options.decisions: */
	size_t ndec;                   /* decisions logged up to the moment */
	struct explain_block *live;    /* blocks live at the moment (free()) */
	size_t nlive;
};

/* Replay O (its policy wrapped; peak_items on) once, or twice when the
 * moment is not where reserved first reached its peak. 0, or -1 with ERR
 * (M->res is to be freed either way). */
int explain_replay(const struct sim_options *o, struct explain_moment *m, char *err,
		   size_t errlen);

/* explain_mech.c: fill P->mech from the log L of P's replay and its
 * moment M (T: P's trace, for the requests' names), and word the mechanism
 * of each flagged step of R. */
struct sim_decisions;
void explain_mech_point(struct explain_point *p, const struct bf_trace *t,
			const struct sim_decisions *l, const struct explain_moment *m,
			uint64_t context);
void explain_mech_steps(struct explain_result *r, const char *policy);
/* The allocation site of T whose 'a' record is at LINE, or SIZE_MAX. */
size_t explain_site_at(const struct bf_trace *t, uint64_t line);

/* "+1.50 GiB" / "-12.0 MiB". Returns BUF. */
const char *explain_fmt_delta(int64_t d, char *buf, size_t len);

#endif /* WHATIF_EXPLAIN_H */
