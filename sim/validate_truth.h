/*
 * validate_truth.h: replays compared with recorded runs of real allocators
 * (`gpumemsim validate`; docs/validation.md, docs/validation_bfc.md).
 *
 * torch-truth: for each NAME.trace.gz in DIR (with NAME.json beside it),
 * import it to a temporary trace, replay it through sim_run under the
 * pytorch policy with the run's own conf, memory fraction and capacity, log
 * every device action, and compare:
 *  - the sequence of segment allocs/frees (or maps/unmaps) as (op, addr,
 *    size) in recorded-address mode, (op, size) in synthetic mode; inside a
 *    run of consecutive releases order carries no meaning, so such runs are
 *    compared as multisets;
 *  - peak reserved, peak allocated and the device alloc/free counts against
 *    the stats the real allocator reported.
 * A run is exact when all of these agree.
 *
 * jax-truth and async-truth do the same for XLA's BFC allocator and the
 * CUDA stream-ordered pool: replay a capture's request stream, less what
 * the allocator never served (see validate_truth.c), and compare peaks and
 * regions with the recorded run.
 *
 * The functions print nothing; a caller that prints rows as they come (the
 * CLI does) passes a callback in the options.
 */
#ifndef SIM_VALIDATE_TRUTH_H
#define SIM_VALIDATE_TRUTH_H

#include <stddef.h>
#include <stdint.h>

#include "../device/device.h"

enum validate_kind { VALIDATE_TORCH_TRUTH, VALIDATE_JAX_TRUTH, VALIDATE_ASYNC_TRUTH };

/* One torch-truth run: the real allocator's figures against the replay's. */
struct validate_torch_row {
	char name[256];               /* NAME of NAME.trace.gz */
	int exact;
	uint64_t res_real, res_sim, alloc_real, alloc_sim;       /* peak reserved, allocated */
	uint64_t dalloc_real, dalloc_sim, dfree_real, dfree_sim; /* device allocs, frees */
	double rel_err;               /* |res_sim - res_real| / res_real (0 when res_real is 0) */
	long diverge;                 /* index of the first differing device action; -1: none */
	char why[256];                /* the first difference, when not exact */
};

/* What a jax/async replay left out of the capture (validate_truth.c). */
struct validate_filter_stats {
	uint64_t kept, dropped, dropped_bytes, orphans;
	/* jax-truth: every kept request a whole number of 2 MiB granules (the
	 * platform allocator's mapping), replayed at its smallest possible size */
	uint64_t granule_lowered, lowered_bytes;
};

/* One jax-truth or async-truth run. */
struct validate_pool_row {
	char name[256];
	int skipped;                  /* async-truth: the recorded run failed; nothing else set */
	int exact;                    /* peak pool (reserved) bytes and, when known, regions */
	uint64_t pool_real, pool_sim, use_real, use_sim, reg_real, reg_sim, limit, reg_bytes;
	int64_t diff;                 /* pool_sim - pool_real */
	int have_regions;             /* jax: the growth run's capture gave reg_real, regions */
	struct validate_filter_stats fs;
	char regions[160];            /* the real regions' sizes in MiB, "+"-separated */
};

enum validate_event {
	VALIDATE_BEGIN,               /* runs listed (R->nruns, names set), none replayed yet */
	VALIDATE_ROW,                 /* run I compared: R->torch[I] or R->pool[I] */
	VALIDATE_SKIPPED,             /* run I skipped (R->pool[I].skipped) */
};

struct validate_report;

struct validate_opts {
	const char *only;             /* only runs whose file name contains ONLY; NULL: all */
	enum device_addr_mode addresses;  /* torch-truth: recorded or synthetic (0; the
					   * CLI's default is recorded) */
	/* optional: called at the start and after each run, in order */
	void (*on_event)(const struct validate_report *r, enum validate_event ev, size_t i,
			 void *ctx);
	void *ctx;
};

struct validate_report {
	enum validate_kind kind;
	size_t nruns;                 /* runs listed, sorted (rows allocated) */
	size_t nrows;                 /* rows filled (all of them on success) */
	struct validate_torch_row *torch;  /* torch-truth: NRUNS rows */
	struct validate_pool_row *pool;    /* jax-truth, async-truth: NRUNS rows */
	/* the summary (set on success) */
	size_t runs;                  /* runs compared (skipped ones left out) */
	size_t exact_runs;
	const char *addresses;        /* torch-truth: "recorded" or "synthetic" */
	double rel_err_median, rel_err_p90, rel_err_max;  /* torch-truth: peak reserved */
};

/*
 * Compare every selected run of DIR (sorted: by name for torch-truth, batch
 * order for the others); O may be NULL (every run, synthetic addresses, no
 * callback). 0 with OUT filled; -1 with ERR (no message prefix) when DIR
 * cannot be read or holds no run, when a run cannot be read or replayed, or
 * out of memory: OUT then holds the rows compared before. Free OUT with
 * validate_report_free either way.
 *   torch-truth  NAME.trace.gz + NAME.json (conf, fraction, total_memory,
 *                the allocator's stats)
 *   jax-truth    jax-NAME.trace.gz (XLA_PYTHON_CLIENT_ALLOCATOR=platform) +
 *                truth/NAME-growth.nvml.json or .json [+ .trace.gz]
 *   async-truth  NAME.trace.gz (backend:cudaMallocAsync) + NAME.json (the
 *                pool's attributes)
 */
int validate_torch_truth(const char *dir, const struct validate_opts *o,
			 struct validate_report *out, char *err, size_t errlen);
int validate_jax_truth(const char *dir, const struct validate_opts *o,
		       struct validate_report *out, char *err, size_t errlen);
int validate_async_truth(const char *dir, const struct validate_opts *o,
			 struct validate_report *out, char *err, size_t errlen);
void validate_report_free(struct validate_report *r);

#endif /* SIM_VALIDATE_TRUTH_H */
