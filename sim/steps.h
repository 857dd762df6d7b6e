/*
 * steps.h: a run's steps side by side (users' question 10: the worst step
 * of a run whose shapes vary, and the percentiles over its steps).
 *
 * From a sim_result's per-step figures (step_ns, step_mem): percentiles by
 * nearest rank over the steps from SKIP on, and which step peaked highest
 * (allocated, then reserved) and which ran longest.
 */
#ifndef SIM_STEPS_H
#define SIM_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

enum { SIM_P50 = 0, SIM_P90, SIM_P99, SIM_PMAX, SIM_NPCT };

struct sim_steps_summary {
	size_t from, n;                  /* the steps summarised: [from, from + n) */
	uint64_t allocated[SIM_NPCT];    /* peak allocated of a step: p50, p90, p99, max */
	uint64_t reserved[SIM_NPCT];     /* peak reserved */
	uint64_t time_ns[SIM_NPCT];      /* step time */
	size_t worst;                    /* the step of the highest peak allocated (the
					  * highest peak reserved among equals, then
					  * the first); an index into the result's steps */
	size_t slowest;                  /* the longest step (the first of equals) */
};

/* Summarise the steps of R from SKIP on. -1 when there are none (no step
 * ranges, SKIP past them, or no per-step memory: a sweep's result). */
int sim_steps_summarise(const struct sim_result *r, size_t skip, struct sim_steps_summary *s);

#endif /* SIM_STEPS_H */
