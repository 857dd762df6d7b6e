/*
 * steps.c: percentiles and the worst step over a run's steps (steps.h).
 * Nearest rank: the p-th percentile of n values is the ceil(p n / 100)-th
 * smallest, so every figure printed is one a step really had.
 */
#include <stdlib.h>
#include <string.h>

#include "steps.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* P50, P90, P99 and the maximum of V[0..N) (sorted in place), N > 0. */
static void percentiles(uint64_t *v, size_t n, uint64_t out[SIM_NPCT])
{
	static const unsigned pct[SIM_NPCT] = {50, 90, 99, 100};
	qsort(v, n, sizeof *v, cmp_u64);
	for (int k = 0; k < SIM_NPCT; k++) {
		size_t rank = (pct[k] * n + 99) / 100; /* ceil(p n / 100), 1-based */
		out[k] = v[(rank ? rank : 1) - 1];
	}
}

int sim_steps_summarise(const struct sim_result *r, size_t skip, struct sim_steps_summary *s)
{
	memset(s, 0, sizeof *s);
	if (!r->step_mem || !r->step_ns || skip >= r->nsteps)
		return -1;
	s->from = skip;
	s->n = r->nsteps - skip;
	uint64_t *v = malloc(s->n * sizeof *v);
	if (!v)
		return -1;
	const struct sim_step_mem *m = r->step_mem + skip;
	for (size_t i = 0; i < s->n; i++)
		v[i] = m[i].peak_allocated;
	percentiles(v, s->n, s->allocated);
	for (size_t i = 0; i < s->n; i++)
		v[i] = m[i].peak_reserved;
	percentiles(v, s->n, s->reserved);
	memcpy(v, r->step_ns + skip, s->n * sizeof *v);
	percentiles(v, s->n, s->time_ns);
	free(v);
	size_t w = 0, slow = 0;
	for (size_t i = 1; i < s->n; i++) {
		if (m[i].peak_allocated > m[w].peak_allocated ||
		    (m[i].peak_allocated == m[w].peak_allocated &&
		     m[i].peak_reserved > m[w].peak_reserved))
			w = i;
		if (r->step_ns[skip + i] > r->step_ns[skip + slow])
			slow = i;
	}
	s->worst = skip + w;
	s->slowest = skip + slow;
	return 0;
}
