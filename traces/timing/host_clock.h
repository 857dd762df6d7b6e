/*
 * host_clock.h: the clock and the statistic the host-cost programs of
 * traces/timing (alloc_cost.cu, vmm_cost.cu) share: monotonic nanoseconds
 * and the mean without the top 1% (a step pays the sum of its calls, so
 * the mean; the top 1% are page faults and the odd stall).
 */
#ifndef TIMING_HOST_CLOCK_H
#define TIMING_HOST_CLOCK_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* the mean of V[0..N) without its top 1% (V is sorted in place); -1 when empty */
static inline double trimmed_mean(uint64_t *v, int n)
{
	if (n <= 0)
		return -1;
	qsort(v, (size_t)n, sizeof *v, cmp_u64);
	int k = n - n / 100;
	double s = 0;
	for (int i = 0; i < k; i++)
		s += (double)v[i];
	return s / k;
}

#endif
