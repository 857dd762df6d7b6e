/*
 * timing.h: the timeline model's helpers outside the replay
 * (docs/timing.md, "Timeline model").
 */
#ifndef SIM_TIMING_H
#define SIM_TIMING_H

#include <stddef.h>

#include "../device/cost.h"
#include "../traces/trace.h"

/* Write OUT_PATH: the caching-on capture CAP_PATH's timeline with the
 * request stream ('a'/'f') of the no-caching capture REQ_PATH of the same
 * program, aligned by kernel launch within each "step N" range
 * (sim/timing_merge.c). -1 with ERR. */
int timing_merge_requests(const char *cap_path, const char *req_path, const char *out_path,
			  char *err, size_t errlen);

/* What timing_calibrate found. */
struct timing_calibration {
	int measured;             /* 1: the trace had uncaptured steps and the share is theirs */
	int at_bound;             /* the share sits at 0 or its maximum: the replay could not
				   * reach the uncaptured step (said, not hidden) */
	size_t uncaptured_steps;  /* how many */
	uint64_t uncaptured_ns;   /* their median */
	uint64_t replayed_ns;     /* the steady replayed step at the share found */
	double mode_share;        /* the share the capture mode would have used */
	double share;             /* the share found */
};

/* The capture's share of the host, measured (sim/timing_calibrate.c): when
 * TRACE has steps that ran with the capture paused and CM's timeline model
 * is on with calibrate=1, find the share at which the replay of TRACE as
 * recorded (policy cuda_malloc) takes as long a steady step as the
 * uncaptured ones, and set it in CM (host_scale = 1 - share, cap_mode
 * "measured"). CAL says what was found (measured 0: CM unchanged). -1 with
 * ERR when a replay fails. */
int timing_calibrate(const char *trace, struct cost_model *cm, struct timing_calibration *cal,
		     char *err, size_t errlen);

/* The steady step of a replay: the median of the second half of its steps
 * (the first hold autotuning and first allocations); 0 when none. */
uint64_t timing_steady_step_ns(const uint64_t *step_ns, size_t n);

#endif /* SIM_TIMING_H */
