/*
 * alloc_cost.cu: what cudaMalloc and cudaFree cost the host, by size, on this
 * GPU and driver, measured without a capture (issue 15: the timeline model's
 * cost table, docs/timing.md "Cost table"). Run it under `gpumemsim capture`
 * too and the difference, per size, is what the capture adds inside those
 * calls (scripts/device_alloc_cost.sh does both).
 *
 *   alloc_cost [--reps N] [--live N] [--seed S] > table.tsv
 *
 * Prints the cost table of device/timeline.c (the TSV files of traces/timing/cost):
 * per size bin ([0, 1 MiB), then powers of two up to 8 GiB) the mean host
 * time of a cudaMalloc and of a cudaFree in ns, without the top 1% (a step
 * pays the sum of its calls: the mean; the top 1% are page faults and the
 * odd stall), and the number of calls. The GPU is idle: a cudaFree's time
 * here is its own, without the implicit synchronisation's wait.
 *
 * A training run without the caching allocator holds hundreds of
 * allocations while it makes more, so `--live` of them (mixed sizes,
 * 4 KiB to 64 MiB) are made first and stay; each measured cudaMalloc is
 * freed again after the next one of its bin, so a free never follows its
 * own malloc at once. Sizes inside a bin come from a fixed-seed generator:
 * the same run every time. Exit 77: no GPU.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host_clock.h"

static uint64_t rng_state = 1;
static uint64_t rng(void)
{
	/* xorshift64*: deterministic for a seed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static void check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return;
	fprintf(stderr, "alloc_cost: %s: %s\n", what, cudaGetErrorString(e));
	exit(1);
}

int main(int argc, char **argv)
{
	int reps = 200, live = 256;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--live") && i + 1 < argc)
			live = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			rng_state = strtoull(argv[++i], NULL, 10) | 1;
		else {
			fprintf(stderr, "usage: alloc_cost [--reps N] [--live N] [--seed S]\n");
			return 2;
		}
	}
	if (reps < 2 || live < 0) {
		fprintf(stderr, "alloc_cost: --reps must be 2 or more, --live 0 or more\n");
		return 2;
	}
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "alloc_cost: no GPU\n");
		return 77;
	}
	cudaDeviceProp prop;
	check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
	int drv = 0, rt = 0;
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	check(cudaFree(0), "context");
	size_t free_b = 0, total_b = 0;
	check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");

	void **bg = (void **)calloc((size_t)live + 1, sizeof *bg);
	for (int i = 0; i < live; i++) {
		size_t sz = (size_t)4096 << (rng() % 15); /* 4 KiB .. 64 MiB */
		check(cudaMalloc(&bg[i], sz), "background cudaMalloc");
	}

	printf("# cudaMalloc / cudaFree host cost by size (ns), %s, uncaptured (traces/timing/alloc_cost.cu)\n",
	       prop.name);
	printf("# driver API %d, runtime %d; %d live allocations held; %d calls a bin below 64 MiB\n", drv, rt,
	       live, reps);
	printf("# lo_bytes\thi_bytes\tmalloc_ns\tmalloc_n\tfree_ns\tfree_n\n");
	uint64_t *ms = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *fs = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	for (uint64_t lo = 0, hi = 1ull << 20; hi <= (8ull << 30); lo = hi, hi *= 2) {
		/* fewer of the large ones: each takes up to milliseconds, and
		 * two of them must fit beside the background */
		int n = hi <= (64ull << 20) ? reps : hi <= (1ull << 30) ? reps / 4 : reps / 20;
		if (n < 2)
			n = 2;
		if (2 * hi > free_b / 2)
			break;
		void *prev = NULL;
		int nm = 0, nf = 0;
		for (int i = 0; i < n; i++) {
			uint64_t span = hi - (lo ? lo : 512);
			size_t sz = (size_t)((lo ? lo : 512) + rng() % span);
			void *p = NULL;
			uint64_t t0 = now_ns();
			cudaError_t e = cudaMalloc(&p, sz);
			uint64_t t1 = now_ns();
			check(e, "cudaMalloc");
			ms[nm++] = t1 - t0;
			if (prev) {
				t0 = now_ns();
				e = cudaFree(prev);
				t1 = now_ns();
				check(e, "cudaFree");
				fs[nf++] = t1 - t0;
			}
			prev = p;
		}
		check(cudaFree(prev), "cudaFree");
		printf("%llu\t%llu\t%.0f\t%d\t%.0f\t%d\n", (unsigned long long)lo, (unsigned long long)hi,
		       trimmed_mean(ms, nm), nm, trimmed_mean(fs, nf), nf);
		fflush(stdout);
	}
	for (int i = 0; i < live; i++)
		cudaFree(bg[i]);
	free(bg);
	free(ms);
	free(fs);
	return 0;
}
