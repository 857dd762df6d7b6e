/*
 * run_diff.h: what changed between two runs (users' question 9: a library
 * upgrade, a model change, a what-if against its capture). Both replayed
 * under the same policy; side by side: what was live at each run's peak
 * reserved, by kind (weights, optimizer state, activations, gradients,
 * workspaces, library, other: sim_live_kind) and by layer (the innermost
 * NVTX range at allocation), from sim_result.peak_live.
 */
#ifndef SIM_RUN_DIFF_H
#define SIM_RUN_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct run_diff_row {
	char name[96];          /* a kind's name, or a layer */
	uint64_t a, b;          /* bytes live at the peak in each run */
};

struct run_diff {
	struct run_diff_row kind[SIM_LK_COUNT]; /* in sim_live_kind order */
	uint64_t live_a, live_b;                /* all of it */
	struct run_diff_row *layer;             /* every layer of either run, the largest
						 * change first (then by name) */
	size_t nlayer;
};

/* Build D from two results (replayed with sim_options.peak_layers =
 * SIZE_MAX, so that no layer is merged). 0, or -1 out of memory. */
int run_diff_build(const struct sim_result *a, const struct sim_result *b, struct run_diff *d);
void run_diff_free(struct run_diff *d);

#endif /* SIM_RUN_DIFF_H */
