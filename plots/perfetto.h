/*
 * perfetto.h: a simulated memory timeline as a Chrome trace (JSON object
 * format) that ui.perfetto.dev and chrome://tracing open; what `gpumemsim
 * export perfetto` writes.
 *
 * Two sources:
 * - perfetto_export_runs: stored runs. The store keeps each run's
 *   downsampled timeline and notable events, not its kernels, so the export
 *   holds one process per run with "allocated" and "reserved" counter
 *   tracks and the events (OOM, peak, empty_cache) as instant events.
 * - perfetto_export_trace: a trace replayed now under a policy (nothing
 *   stored); its kernels, copies and memsets appear per stream, NVTX ranges
 *   on a host track, beside the replay's counters. Kernel times are the
 *   trace's own (relative to its first record), which the engine follows
 *   unless a synchronisation made the host wait longer.
 * Timestamps are microseconds with nanosecond decimals; counter values are
 * bytes. The file is written as OUT_PATH.tmp.PID and renamed on success; on
 * failure no file is left. Prints nothing.
 */
#ifndef PLOTS_PERFETTO_H
#define PLOTS_PERFETTO_H

#include <stddef.h>
#include <stdint.h>

/* What was written. */
struct perfetto_stats {
	uint64_t events;    /* trace events in all (the counts below and metadata) */
	uint64_t counters;  /* counter samples ("allocated", "reserved") */
	uint64_t instants;  /* instant events (oom, peak_reserved, empty_cache, ...) */
	uint64_t slices;    /* complete events: kernels, copies, memsets, NVTX ranges */
	int runs;           /* stored runs exported (perfetto_export_runs) */
	int streams;        /* GPU stream tracks (perfetto_export_trace) */
};

/* Returned when OUT_PATH.tmp.PID could not be created: ERR is
 * "OUT_PATH: strerror". Other failures return -1. */
#define PERFETTO_ERR_OUTPUT (-2)

/*
 * Export the stored runs RUN_IDS[0..NRUNS) (decimal strings, as given; each
 * becomes process i+1 named "run ID: POLICY CONF (TRACE)") of the results
 * database DB to OUT_PATH. Returns 0, or -1 with ERR (no such database, no
 * such run, SQL), PERFETTO_ERR_OUTPUT, or -1 with ERR "writing OUT_PATH
 * failed". ST (may be NULL) is filled as far as the export got.
 */
int perfetto_export_runs(const char *db, const char *const *run_ids, int nruns,
			 const char *out_path, struct perfetto_stats *st, char *err, size_t errlen);

/* A trace to replay and export. */
struct perfetto_trace_opts {
	const char *trace_path;
	const char *policy;   /* policy name (policy_find) */
	const char *conf;     /* its knobs, or NULL / "" for its defaults */
	uint64_t capacity;    /* device memory for the replay; 0: the trace header's */
};

/*
 * Replay O->trace_path under O->policy and export its records and the
 * replay's memory counters and events to OUT_PATH. Returns as
 * perfetto_export_runs (errors: unknown policy or knob, trace unreadable).
 */
int perfetto_export_trace(const struct perfetto_trace_opts *o, const char *out_path,
			  struct perfetto_stats *st, char *err, size_t errlen);

#endif /* PLOTS_PERFETTO_H */
