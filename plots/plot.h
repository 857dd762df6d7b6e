/*
 * plot.h: figures from the results database, drawn by gnuplot run as an
 * external program (only the plots code runs it), for `gpumemsim plot` and
 * `gpumemsim report`.
 *
 * Every figure is a gnuplot script plus plain data files written to a
 * folder (a temporary one unless the caller keeps them), then rendered to
 * PNG (pngcairo) or SVG by the output's extension. The output appears only
 * when gnuplot succeeded: it writes OUT.tmp.PID, renamed into place.
 * The same database gives the same script and data files byte for byte.
 */
#ifndef PLOTS_PLOT_H
#define PLOTS_PLOT_H

#include <stddef.h>
#include <stdint.h>

#include "../sim/store.h"

enum plot_kind {
	PLOT_TIMELINE = 0, /* allocated and reserved over time, one trace, each policy */
	PLOT_BATCH,        /* peak reserved against batch size, one model, each policy */
	PLOT_FRAG,         /* fragmentation per policy and setting, per trace */
	PLOT_COMPARE,      /* peak reserved and device allocs per setting vs the floor */
	PLOT_PARETO,       /* predicted step time against peak reserved, the front per trace */
	PLOT_LIVE,         /* what is live at the peak, by kind and by layer (NVTX) */
	PLOT_REGIONS,      /* regions/segments held at each batch's peak (explain batch
			    * --figure; not from the database) */
	PLOT_COMPILE,      /* eager and compiled memory over the steps (whatif compile
			    * --figure; not from the database) */
	PLOT_STEPS,        /* each step's peaks and time, the worst labelled (run
			    * --steps-figure; not from the database) */
	PLOT_KIND_COUNT
};

enum plot_format { PLOT_FMT_PNG = 0, PLOT_FMT_SVG };

/* One stored run as the figures and the report see it (the latest run of
 * each trace/policy/conf/capacity among the selected ones). */
struct plot_run {
	int64_t id;
	char *trace_path, *policy, *conf, *model, *batch, *tool_version, *labels_json;
	char *workload;                      /* the trace's workload label, or "" */
	uint32_t trace_crc32;
	uint64_t capacity, peak_reserved, peak_allocated, peak_requested;
	uint64_t device_allocs, device_frees;
	double fragmentation;
	int oom, complete;
	uint64_t num_ooms;
	int has_oom_detail;                  /* the oom_* columns below are set */
	uint64_t oom_t_ns, oom_bytes, oom_line, oom_allocated, oom_reserved;
	int64_t oom_largest_free, oom_cached_free; /* -1: the policy did not say */
	uint64_t oom_limit;                  /* usable bytes at the OOM (0: unlimited) */
	char *oom_verdict;                   /* capacity | limit | fragmentation, or "" */
	uint64_t trace_duration_ns, sim_duration_ns;
	uint64_t step_time_ns;               /* predicted mean step (0: none, see --timing) */
	int timed;                           /* step_time_ns is a prediction (--timing) */
	double gpu_busy;                     /* the GPU's busy share of that step; -1 unknown
					      * (not timed, or stored before it was kept) */
};

/* Which runs: an SQL condition on `runs` (may be NULL) and a label filter
 * KEY=VALUE (may be NULL), both ANDed. */
struct plot_select {
	const char *where;
	const char *label_key, *label_value;
};

struct plot_request {
	enum plot_kind kind;
	struct plot_select sel;
	const char *out;        /* FILE.png or FILE.svg */
	const char *data_dir;   /* keep script and data here; NULL: a temporary folder */
};

/* "timeline" -> PLOT_TIMELINE ...; -1 if unknown. */
int plot_kind_from_name(const char *name);
const char *plot_kind_name(enum plot_kind k);

/* PNG or SVG from PATH's extension; -1 for anything else. */
int plot_format_from_path(const char *path);

/* 1 if gnuplot (or $GPUMEMSIM_GNUPLOT) can be run. */
int plot_gnuplot_available(void);

/*
 * Check a --where condition: one SQL expression, no ';', no comments, no
 * unbalanced parentheses outside quotes (so it cannot end our statement or
 * start another). 0 or -1 with ERR.
 */
int plot_check_where(const char *where, char *err, size_t errlen);

/* Load the selected runs, ordered by workload and model label, batch,
 * trace, policy (optimal last), conf, capacity. *RUNS is malloc'd (free with plot_runs_free). Returns the count
 * or -1 with ERR. */
int plot_load_runs(struct store *s, const struct plot_select *sel, struct plot_run **runs,
		   char *err, size_t errlen);
void plot_runs_free(struct plot_run *runs, int n);

/* Draw one figure. 0 or -1 with ERR; nothing at REQ->out on failure. */
int plot_make(struct store *s, const struct plot_request *req, char *err, size_t errlen);

/* "pytorch expandable_segments:True" or "pytorch (default)", into BUF. */
const char *plot_run_setting(const struct plot_run *r, char *buf, size_t len);

/* What bounds R's predicted step (docs/timing.md, "GPU-bound and
 * host-bound"): 1 the host, 0 the GPU, -1 not known (not timed, or stored
 * before the busy share was kept). */
int plot_run_host_bound(const struct plot_run *r);

/* plot_regions.c: the figure of `explain batch --figure OUT`: per batch
 * size, the ranges the policy held at the peak as stacked bars (in the
 * order taken; wholly free ones apart), the live bytes then, and the
 * flagged points with their mechanism. 0, or -1 with ERR. */
struct explain_result;
int plot_regions(const struct explain_result *r, const char *policy, const char *conf,
		 const char *out, const char *data_dir, char *err, size_t errlen);

/* plot_compile.c: the figure of `whatif compile --figure OUT`: allocated
 * over the steady steps of the eager capture, after the partitioner and
 * layout stage, and compiled (REP from compile_apply with timelines), the
 * peaks marked. 0, or -1 with ERR. */
struct compile_report;
int plot_compile(const struct compile_report *rep, const char *trace, const char *out,
		 const char *data_dir, char *err, size_t errlen);

/* plot_steps.c: the figure of `run --steps-figure OUT`: per step of R
 * (steps from SKIP on), its peak allocated and peak reserved as bars and
 * its time on the right axis, the worst step (sim/steps.h) named with
 * where its peak was. 0, or -1 with ERR (no steps: -1). */
int plot_steps(const struct sim_result *r, size_t skip, const char *out, const char *data_dir,
	       char *err, size_t errlen);

#endif /* PLOTS_PLOT_H */
