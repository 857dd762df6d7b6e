/*
 * timing_calibrate.c: the capture's share of the host, measured in the
 * capture itself (docs/timing.md, "Measured in the capture itself").
 *
 * A capture slows the program's host by an amount that changes with the
 * model and with the host (1.2x to 2x on the H200 hosts), so no constant
 * share takes it out everywhere. A capture taken with `--pause-at-step K`
 * holds, after its recorded steps, steps of the same process run with the
 * capture off (`r ... uncaptured`): the program's own step time on that
 * host. The replay of the recorded steps as they were made (policy
 * cuda_malloc: the recorded device calls) is a falling function of the
 * share; the share at which its steady steps take as long as the
 * uncaptured ones is what the capture cost this time. Every other what-if
 * of the trace then uses that share.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/policy.h"
#include "engine.h"
#include "timing.h"

#define CAL_SHARE_MAX 0.9     /* the host at a tenth of the recorded speed */
#define CAL_ROUNDS 10         /* halvings: the share to within 0.001 */
#define CAL_KEEP 0.01         /* the mode's share is kept within 1% of the target */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Median of N values (copied, sorted); 0 when N is 0. */
static uint64_t median(const uint64_t *v, size_t n)
{
	if (!n)
		return 0;
	uint64_t *c = malloc(n * sizeof *c);
	if (!c)
		return v[n / 2];
	memcpy(c, v, n * sizeof *c);
	qsort(c, n, sizeof *c, cmp_u64);
	uint64_t m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
	free(c);
	return m;
}

/* The steady captured steps: the second half (the first steps hold cuDNN's
 * autotuning, lazy module loads, the first allocations). */
uint64_t timing_steady_step_ns(const uint64_t *step_ns, size_t n)
{
	return n ? median(step_ns + n / 2, n - n / 2) : 0;
}

/* Replay TRACE with CM at SHARE: the steady step (and, on request, the
 * uncaptured steps' median and count). */
static int replay_at(const char *trace, const struct cost_model *cm, double share,
		     uint64_t *steady, uint64_t *uncaptured, size_t *nunc, char *err, size_t errlen)
{
	struct cost_model m = *cm;
	struct sim_result res;
	m.host_scale = 1.0 - share;
	m.scale_calls = 0;
	struct sim_options o = {
		.trace_path = trace,
		.policy = policy_find("cuda_malloc"),
		.cost = &m,
		.allow_incomplete = 1,
	};
	if (!o.policy) {
		snprintf(err, errlen, "calibration: the cuda_malloc policy is missing");
		return -1;
	}
	if (sim_run(&o, &res, err, errlen) < 0)
		return -1;
	*steady = timing_steady_step_ns(res.step_ns, res.nsteps);
	if (uncaptured) {
		*uncaptured = median(res.uncaptured_step_ns, res.nuncaptured_steps);
		*nunc = res.nuncaptured_steps;
	}
	sim_result_free(&res);
	return 0;
}

int timing_calibrate(const char *trace, struct cost_model *cm, struct timing_calibration *cal,
		     char *err, size_t errlen)
{
	memset(cal, 0, sizeof *cal);
	if (!cm->timeline || !cm->calibrate)
		return 0;
	double s0 = cm->scale_calls ? 0 : 1.0 - cm->host_scale;
	uint64_t p0, u;
	size_t nunc = 0;
	if (replay_at(trace, cm, s0, &p0, &u, &nunc, err, errlen) < 0)
		return -1;
	if (!nunc || !u || !p0)
		return 0; /* no uncaptured steps, or no captured ones: the mode's share */
	cal->measured = 1;
	cal->uncaptured_steps = nunc;
	cal->uncaptured_ns = u;
	cal->mode_share = s0;
	double s = s0;
	uint64_t p = p0;
	if (p0 > u * (1 + CAL_KEEP) || p0 < u * (1 - CAL_KEEP)) {
		/* the step falls as the share grows: the target lies between s0
		 * and the bound on its side (more share when the replay is slower) */
		double bound = p0 > u ? CAL_SHARE_MAX : 0;
		uint64_t pb;
		if (replay_at(trace, cm, bound, &pb, NULL, NULL, err, errlen) < 0)
			return -1;
		if (p0 > u ? pb >= u : pb <= u) {
			/* not reached even at the bound: the uncaptured steps ran
			 * faster than the replay can (CAL_SHARE_MAX) or slower than
			 * the recorded host (share 0) */
			s = bound, p = pb;
			cal->at_bound = 1;
		} else {
			/* plo > u > phi throughout */
			double lo = p0 > u ? s0 : bound, hi = p0 > u ? bound : s0;
			uint64_t plo = p0 > u ? p0 : pb, phi = p0 > u ? pb : p0;
			for (int i = 0; i < CAL_ROUNDS; i++) {
				double mid = (lo + hi) / 2;
				uint64_t pm;
				if (replay_at(trace, cm, mid, &pm, NULL, NULL, err, errlen) < 0)
					return -1;
				if (pm > u)
					lo = mid, plo = pm;
				else
					hi = mid, phi = pm;
			}
			/* the end nearer the target */
			if (plo - u < u - phi)
				s = lo, p = plo;
			else
				s = hi, p = phi;
		}
	}
	cal->share = s;
	cal->replayed_ns = p;
	cm->host_scale = 1.0 - s;
	cm->scale_calls = 0;
	snprintf(cm->cap_mode, sizeof cm->cap_mode, "measured");
	return 0;
}
