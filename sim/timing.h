/*
 * timing.h: the timeline model's helpers outside the replay
 * (docs/timing.md, "Timeline model").
 */
#ifndef SIM_TIMING_H
#define SIM_TIMING_H

#include <stddef.h>

#include "../traces/trace.h"

/* Write OUT_PATH: the caching-on capture CAP_PATH's timeline with the
 * request stream ('a'/'f') of the no-caching capture REQ_PATH of the same
 * program, aligned by kernel launch within each "step N" range
 * (sim/timing_merge.c). -1 with ERR. */
int timing_merge_requests(const char *cap_path, const char *req_path, const char *out_path,
			  char *err, size_t errlen);

#endif /* SIM_TIMING_H */
