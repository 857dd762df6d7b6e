/*
 * batch_fit.h: the batch-size what-if, a function from traces to a trace.
 *
 * Two or more captures of one workload at different batch sizes are loaded,
 * their allocation "sites" (the i-th allocation of the trace, with its
 * stream, source library and NVTX context) are aligned by position, each
 * site's size is fitted against the batch size (bytes = a + b*batch, or
 * interpolation where that is not linear, e.g. cuDNN workspaces), kernel
 * durations likewise, and a trace at another batch size is synthesised from
 * the capture nearest to it. The same in-memory traces give the live-set
 * analysis used by `maxbatch` and `explain batch` (what is live at a given
 * line, split into workspaces, framework memory and foreign libraries).
 *
 * One file a stage: batch_fit_load.c, batch_fit_align.c, batch_fit_fit.c,
 * batch_fit_synth.c, batch_fit_live.c, batch_fit_trust.c,
 * batch_fit_interval.c (what they share: batch_fit_int.h).
 */
#ifndef WHATIF_BATCH_FIT_H
#define WHATIF_BATCH_FIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct bf_trace;
struct bf_model;

/* Load PATH fully into memory; the batch size comes from its `L batch=N`
 * label. Returns 0, or -1 with ERR naming the file (and line). */
int bf_load(const char *path, struct bf_trace **out, char *err, size_t errlen);
void bf_free(struct bf_trace *t);
uint64_t bf_batch(const struct bf_trace *t);
const char *bf_path(const struct bf_trace *t);
/* Value of label KEY, or NULL. */
const char *bf_label(const struct bf_trace *t, const char *key);

struct bf_options {
	int strict_align;       /* refuse captures that do not align event for
				 * event (default: align what aligns; the rest
				 * is paired or copied, see bf_trust) */
	double linear_tol;      /* largest relative residual still "linear";
				 * 0 = 0.5% */
	uint64_t search_limit;  /* largest workspace an algorithm search may
				 * take (cuDNN Find: the caller's limit);
				 * 0 = 1 GiB. Bounds workspace trends. */
};

/* What the fit found: the quality figures the user is shown. */
struct bf_report {
	size_t ntraces;
	uint64_t lo_batch, hi_batch;     /* fitted range */
	size_t nsites;                   /* allocation sites of the template */
	size_t nconst, nlinear, nnonlinear, nunaligned;
	size_t nworkspace;               /* sites that look like workspaces */
	double min_r2;                   /* over linear sites fitted on >= 3 points; 1 if none */
	double max_rel_resid;            /* largest residual / size over linear sites */
	size_t worst_site;               /* where max_rel_resid is */
	int kernels_aligned;             /* kernel durations were fitted */
	size_t nkernels;
	size_t aligned_prefix;           /* memory events aligned in every capture */
	size_t aligned_suffix;           /* memory events of the smallest capture */
	char misalign[1024];              /* the first site that broke alignment, or "" */
};

/* Align and fit TRACES (N >= 2, distinct batch sizes). Returns 0, or -1 with
 * ERR (a misalignment names the site: index, NVTX range, sizes seen). */
int bf_fit(struct bf_trace *const *traces, size_t n, const struct bf_options *o,
	   struct bf_model **out, char *err, size_t errlen);
const struct bf_report *bf_model_report(const struct bf_model *m);
void bf_model_free(struct bf_model *m);

/* Predicted requested bytes of site SITE at BATCH (for tests and reports). */
uint64_t bf_predict_site(const struct bf_model *m, size_t site, uint64_t batch);
/* 'c' constant, 'l' linear, 'n' non-linear (interpolated), 'u' unaligned. */
char bf_site_kind(const struct bf_model *m, size_t site);

/* Per-site fit quality as TSV on F, one row per allocation site of the
 * capture the trace at BATCH is built on (the template): its line, NVTX
 * range, kind (c/l/n/u, or 'p' for an unaligned site paired within its
 * range), workspace flag, the sizes seen in every capture ('-' where it
 * has no counterpart), the prediction, and the rule that made it. For
 * users deciding how far to trust a synthesised trace. Returns 0 or -1. */
int bf_write_sites(const struct bf_model *m, uint64_t batch, FILE *f);

/* Write the trace at BATCH to PATH (atomically; gzip when PATH ends .gz),
 * built on the capture nearest to BATCH. Returns 0 or -1 with ERR. */
int bf_synth(const struct bf_model *m, uint64_t batch, const char *path,
	     char *err, size_t errlen);

/* Write T to PATH (atomically) without what happened before the first NVTX
 * range named RANGE (e.g. "step 1"): allocations freed before that range
 * starts are dropped with their frees; what is live across it is kept. The
 * steady state of a training run, without the first step's autotuning.
 * Returns 0, or -1 with ERR (e.g. no such range). */
int bf_write_from_range(const struct bf_trace *t, const char *range, const char *path,
			char *err, size_t errlen);

/* ------------------------------------------------ trust of a prediction */

/* How far the trace at BATCH rests on what did not align (batch_fit_trust.c). */
struct bf_trust {
	uint64_t batch, template_batch;  /* asked; the capture it is built on */
	size_t sites;                    /* allocations of the template */
	size_t paired, copied;           /* of them: unaligned, predicted from their
					  * counterparts; unaligned, copied unchanged */
	uint64_t peak_live;              /* predicted live bytes at their peak */
	uint64_t paired_live, copied_live;  /* of those, paired and copied bytes */
	double bound;                    /* copied_live/peak_live times |batch/template - 1|:
					  * how far the peak could move were the copied
					  * part to scale with batch */
};

/* Fill T for BATCH. 0, or -1 out of memory. */
int bf_trust(const struct bf_model *m, uint64_t batch, struct bf_trust *t);

/* bf_trust, then refuse (-1, ERR saying why and what to capture) when its
 * bound exceeds MAX_BOUND (a fraction, e.g. 0.05). */
int bf_trust_check(const struct bf_model *m, uint64_t batch, double max_bound,
		   struct bf_trust *t, char *err, size_t errlen);

/* ---------------------------------------------- interval of a prediction */

/*
 * Where a site cannot be predicted (a workspace whose algorithm, or whose
 * search's largest candidate, changed between the captures around BATCH; or
 * outside the captures one whose sizes are not one line, or a search, whose
 * largest candidate may be overtaken or cross the search limit), the
 * prediction is a range, not one number. Each such site gets bounds from
 * one rule (a candidate's need grows with the batch, at most in proportion;
 * a search takes the largest need within the limit); bf_synth_bound writes
 * the trace with all of them at their low or high bound, whose replays give
 * the range of the peak (batch_fit_interval.c, docs/whatif.md).
 */
struct bf_interval {
	uint64_t batch;
	int extrapolated;               /* BATCH outside the fitted range */
	size_t sites;                   /* template allocations given bounds */
	uint64_t bytes_lo, bytes_hi;    /* their summed sizes at the bounds */
	uint64_t peak_live;             /* predicted live bytes at their peak */
	uint64_t peak_lo, peak_hi;      /* the same with the sites at their low /
					 * high bounds (lo <= peak_live <= hi) */
	size_t worst_site;              /* the template site with the widest bounds */
	uint64_t worst_lo, worst_hi;
};

/* Fill IV for BATCH. 0, or -1 out of memory. */
int bf_interval(const struct bf_model *m, uint64_t batch, struct bf_interval *iv);

/* Why a site's size at the batch is a range. */
enum bf_why {
	BF_WHY_NONE = 0,
	BF_WHY_SWITCH,      /* the algorithm (or the search's largest candidate)
			     * changed between the captures around the batch */
	BF_WHY_MISSING,     /* no counterpart in the capture on one side: the
			     * algorithm there may need no workspace */
	BF_WHY_ABOVE,       /* above the captures: extrapolated */
	BF_WHY_BELOW,       /* below the captures: extrapolated */
};

/* One site of the template whose size is a range (bf_interval_sites). */
struct bf_site_range {
	size_t site;                    /* numbered as in bf_write_sites */
	uint64_t line;                  /* its line in the template capture */
	const char *range;              /* innermost NVTX range, or NULL; owned by
					 * the model's captures */
	int search;                     /* a warm-up (algorithm search) workspace */
	uint64_t predicted, lo, hi;     /* bytes */
	enum bf_why why;
	uint64_t batch_a, batch_b;      /* SWITCH, MISSING: the captures around the
					 * batch; ABOVE: the largest capture, BELOW:
					 * the smallest (batch_b = batch_a) */
};

/* The sites of the trace at BATCH whose size is a range, in template order:
 * *OUT (caller frees; NULL when none) and *N. 0, or -1 out of memory. */
int bf_interval_sites(const struct bf_model *m, uint64_t batch, struct bf_site_range **out,
		      size_t *n);

/* "algorithm switch", "no counterpart", "extrapolated above", ... */
const char *bf_why_name(enum bf_why why);

/* Bounds of template site SITE (numbered as in bf_write_sites) at BATCH:
 * 1 with [*LO, *HI] when it cannot be predicted, 0 with both = the
 * prediction, -1 out of memory or no such site. */
int bf_site_bounds(const struct bf_model *m, uint64_t batch, size_t site, uint64_t *lo,
		   uint64_t *hi);

/* Write the trace at BATCH with every unpredictable site at its low bound
 * (WHICH < 0) or its high bound (WHICH > 0); WHICH 0 is bf_synth. */
int bf_synth_bound(const struct bf_model *m, uint64_t batch, int which, const char *path,
		   char *err, size_t errlen);

struct alloc_policy;

/* Peaks of the prediction at BATCH replayed under a policy, the bounds of
 * the peaks over every size of the unpredictable sites within their
 * bounds, and the range of the replays at those bounds. */
struct bf_replay_range {
	uint64_t reserved, allocated;   /* the prediction's replay */
	/* bounds of the peak over every size within the sites' bounds
	 * (docs/whatif.md "Bounds of reserved memory"): lo always (live
	 * bytes at the low bounds, or the low replay where the policy is
	 * monotone in the sizes); hi only where *_bounded says so, else
	 * UINT64_MAX */
	uint64_t reserved_lo, reserved_hi;
	uint64_t allocated_lo, allocated_hi;
	int reserved_bounded, allocated_bounded;
	const char *rule;               /* how hi was bounded, or why it is not */
	/* the pytorch upper bound: the replay without the unpredictable
	 * requests, and one segment per request at its high bound */
	uint64_t certain_reserved, uncertain_segments;
	size_t not_transient;           /* unpredictable sites another allocation
					 * (or an empty_cache) falls inside of */
	size_t not_transient_site;      /* the first of them (template site) */
	size_t intruders;               /* predicted requests allocated in the pool
					 * of a live unpredictable one: one segment
					 * each in the bound */
	uint64_t intruder_segments;
	/* the replays at the low and high bounds with the prediction: their
	 * lowest and highest peaks (no bound under a caching policy) */
	uint64_t replay_reserved_lo, replay_reserved_hi;
	uint64_t replay_allocated_lo, replay_allocated_hi;
	int replays;                    /* 1, or 3 (4 with the pytorch bound) when
					 * some site has bounds */
	int oom;                        /* one of the replays ran out of memory */
};

/* Replay POINT_PATH (the trace bf_synth wrote for BATCH) under POLICY with
 * CONF (may be NULL) and CAPACITY (0: the trace's), as `gpumemsim run`
 * does; where sites have bounds, write the low- and high-bound traces to
 * temporary files (TMPDIR), replay them too, and bound the peaks (for
 * pytorch also replay the trace without the unpredictable requests). The
 * peak reserved by a caching allocator is not monotone in the sizes, so
 * the replays' range is no bound; the bounds are argued per policy in
 * docs/whatif.md. 0, or -1 with ERR. */
int bf_interval_replay(const struct bf_model *m, uint64_t batch, const char *point_path,
		       const struct alloc_policy *policy, const char *conf, uint64_t capacity,
		       struct bf_replay_range *out, char *err, size_t errlen);

/* ------------------------------------------------------ live-set tracker */

#define BF_MAX_GROUPS 8

struct bf_group { char name[96]; uint64_t bytes; };

/* What is live at one moment, requested bytes. */
struct bf_live {
	uint64_t line;                  /* the trace line the state is taken after */
	uint64_t total;
	uint64_t workspace;             /* transient in its layer range, or cuDNN/cuBLAS */
	uint64_t foreign;               /* made by a library other than the framework */
	uint64_t nlive;
	struct bf_group ws[BF_MAX_GROUPS];  /* largest workspaces by NVTX range */
	size_t nws;
	struct bf_group libs[BF_MAX_GROUPS];/* foreign bytes by library */
	size_t nlibs;
};

/* State right after the record at LINE (the last record at or before it);
 * LINE == 0 means at the peak of live requested bytes. */
int bf_live_at(const struct bf_trace *t, uint64_t line, struct bf_live *out);

#endif /* WHATIF_BATCH_FIT_H */
