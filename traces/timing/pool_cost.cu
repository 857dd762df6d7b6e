/*
 * pool_cost.cu: what a cudaMallocAsync / cudaFreeAsync that the stream-ordered
 * pool serves costs the host, by the number of the pool's allocations live
 * and by what the GPU is doing (issue 15: the model's pool_alloc_us /
 * pool_free_us; docs/timing.md "What an allocator setting costs").
 *
 * In training steps under PyTorch's backend:cudaMallocAsync the calls took
 * 6.0 / 4.4 us, on an idle GPU with nothing else live 1.5-2.2 / 0.7-1.0 us,
 * and in the CUDA C CNN's steps 2-6 us: this separates the causes. The
 * device's default pool, release threshold UINT64_MAX (as PyTorch sets it);
 * LIVE allocations of sizes drawn log-uniformly from 512 B to 16 MiB (a fixed
 * seed) stay live while each timed round allocates one (a size from the
 * same draw) and frees a live one at random in its place; every call is a
 * hit after the untimed warm-up. Three GPU states:
 *   idle     the stream drained before the round;
 *   busy     a long kernel queued first, so every call is stream-ordered
 *            behind pending work (the host runs ahead in training);
 *   launch   busy, and an empty kernel launched between the calls (as a
 *            training step's operators do; the launches are not timed).
 *
 *   pool_cost [--reps N] > table.tsv
 *
 * Prints one row per LIVE and state: live, state, the mean host time of
 * an alloc and of a free in ns without the top 1%, and the rounds. Exit 77:
 * no GPU.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_clock.h"

static void check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return;
	fprintf(stderr, "pool_cost: %s: %s\n", what, cudaGetErrorString(e));
	exit(1);
}

/* spin for about CYCLES clock cycles: keeps the stream busy */
__global__ void spin(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles)
		;
}

__global__ void empty(void) {}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* 512 B to 16 MiB, log-uniform */
static size_t draw_size(void)
{
	double u = (double)(next() % 1000000) / 1e6;
	double lo = 9, hi = 24; /* log2 */
	return (size_t)1 << (int)(lo + u * (hi - lo)) | (size_t)(next() % 512);
}

enum { IDLE, BUSY, LAUNCH };
static const char *const state_name[] = {"idle", "busy", "launch"};

static void round_trip(void **live, int n, cudaStream_t st, int state, int reps,
		       uint64_t *al, uint64_t *fr)
{
	for (int i = 0; i < reps; i++) {
		void *p = NULL;
		if (state == LAUNCH)
			empty<<<1, 1, 0, st>>>();
		uint64_t t0 = now_ns();
		check(cudaMallocAsync(&p, draw_size(), st), "cudaMallocAsync");
		uint64_t t1 = now_ns();
		if (state == LAUNCH)
			empty<<<1, 1, 0, st>>>();
		int k = n ? (int)(next() % (uint64_t)n) : -1;
		void *victim = k >= 0 ? live[k] : p;
		uint64_t t2 = now_ns();
		check(cudaFreeAsync(victim, st), "cudaFreeAsync");
		uint64_t t3 = now_ns();
		if (k >= 0)
			live[k] = p;
		if (al) {
			al[i] = t1 - t0;
			fr[i] = t3 - t2;
		}
	}
}

int main(int argc, char **argv)
{
	int reps = 4000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: pool_cost [--reps N]\n");
			return 2;
		}
	}
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
		fprintf(stderr, "pool_cost: no CUDA device\n");
		return 77;
	}
	check(cudaSetDevice(0), "cudaSetDevice");
	cudaStream_t st;
	check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
	cudaMemPool_t pool;
	check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
	uint64_t keep = UINT64_MAX;
	check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "release threshold");
	int clock_khz = 0;
	check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "clock rate");
	int drv = 0;
	cudaDriverGetVersion(&drv);
	printf("# stream-ordered pool host costs (ns), driver API %d, release threshold max "
	       "(traces/timing/pool_cost.cu)\n# live\tstate\talloc_ns\tfree_ns\trounds\n", drv);
	const int lives[] = {0, 64, 256, 1024, 2048, 4096};
	uint64_t *al = (uint64_t *)malloc(sizeof *al * (size_t)reps);
	uint64_t *fr = (uint64_t *)malloc(sizeof *fr * (size_t)reps);
	void **live = (void **)calloc(4096, sizeof *live);
	if (!al || !fr || !live)
		return 1;
	for (size_t li = 0; li < sizeof lives / sizeof lives[0]; li++) {
		int n = lives[li];
		for (int i = 0; i < n; i++)
			check(cudaMallocAsync(&live[i], draw_size(), st), "cudaMallocAsync (live)");
		round_trip(live, n, st, IDLE, reps, NULL, NULL); /* the pool holds enough */
		check(cudaStreamSynchronize(st), "sync");
		for (int s = IDLE; s <= LAUNCH; s++) {
			if (s != IDLE) /* about 0.5 s of work queued ahead of every call */
				spin<<<1, 1, 0, st>>>((long long)clock_khz * 500);
			round_trip(live, n, st, s, reps, al, fr);
			check(cudaStreamSynchronize(st), "sync");
			printf("%d\t%s\t%.0f\t%.0f\t%d\n", n, state_name[s], trimmed_mean(al, reps),
			       trimmed_mean(fr, reps), reps);
			fflush(stdout);
		}
		for (int i = 0; i < n; i++)
			check(cudaFreeAsync(live[i], st), "cudaFreeAsync (live)");
		check(cudaStreamSynchronize(st), "sync");
	}
	return 0;
}
