/*
 * vmm_cost.cu: what the two other ways of getting device memory cost the
 * host on this GPU and driver (issue 15: the cost table's map/unmap and pool
 * rows, docs/timing.md "Cost table"):
 *
 *  - PyTorch's expandable segments (CUDACachingAllocator's ExpandableSegment):
 *    one virtual range reserved up front; growing it maps N pages of 2 MiB
 *    (small pool) or 20 MiB (large pool): per page a cuMemCreate and a
 *    cuMemMap, then one cuMemSetAccess over the new range; shrinking it
 *    synchronises the stream, then per page cuMemUnmap and cuMemRelease.
 *  - The stream-ordered pool (cudaMallocAsync / cudaFreeAsync on the device's
 *    default pool): an allocation the pool holds memory for, one it must grow
 *    for, a free, a trim (cudaMemPoolTrimTo), and a stream synchronisation
 *    that returns idle memory under the default release threshold (0).
 *
 *   vmm_cost [--reps N] > table.tsv
 *
 * Prints one row per operation and size: op, bytes, pages, the mean host
 * time in ns without the top 1% (a step pays the sum), and the number of
 * calls. The GPU is idle throughout. Exit 77: no GPU.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host_clock.h"

static void check_rt(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return;
	fprintf(stderr, "vmm_cost: %s: %s\n", what, cudaGetErrorString(e));
	exit(1);
}

static void check_drv(CUresult e, const char *what)
{
	if (e == CUDA_SUCCESS)
		return;
	const char *s = NULL;
	cuGetErrorString(e, &s);
	fprintf(stderr, "vmm_cost: %s: %s\n", what, s ? s : "?");
	exit(1);
}

static void row(const char *op, uint64_t bytes, int pages, uint64_t *v, int n)
{
	printf("%s\t%llu\t%d\t%.0f\t%d\n", op, (unsigned long long)bytes, pages, trimmed_mean(v, n), n);
	fflush(stdout);
}

#define MAXP 64

/* Grow and shrink a reserved range by N pages of PAGE bytes, REPS times, as
 * ExpandableSegment::map / unmap do; one row per call kind and one for the
 * whole map and the whole unmap. */
static void expandable(CUdeviceptr base, uint64_t page, int n, int reps, int dev, cudaStream_t st)
{
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof acc);
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	uint64_t *create = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps * (size_t)n);
	uint64_t *map = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps * (size_t)n);
	uint64_t *unmap = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps * (size_t)n);
	uint64_t *rel = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps * (size_t)n);
	uint64_t *access = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *sync = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *grow = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *shrink = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	CUmemGenericAllocationHandle h[MAXP];
	int nc = 0;
	for (int r = 0; r < reps; r++) {
		uint64_t g0 = now_ns();
		for (int i = 0; i < n; i++) {
			uint64_t t0 = now_ns();
			check_drv(cuMemCreate(&h[i], page, &prop, 0), "cuMemCreate");
			uint64_t t1 = now_ns();
			check_drv(cuMemMap(base + i * page, page, 0, h[i], 0), "cuMemMap");
			uint64_t t2 = now_ns();
			create[nc] = t1 - t0;
			map[nc] = t2 - t1;
			nc++;
		}
		uint64_t t0 = now_ns();
		check_drv(cuMemSetAccess(base, n * page, &acc, 1), "cuMemSetAccess");
		uint64_t t1 = now_ns();
		access[r] = t1 - t0;
		grow[r] = t1 - g0;
		nc -= n;
		uint64_t s0 = now_ns();
		check_rt(cudaStreamSynchronize(st), "cudaStreamSynchronize");
		uint64_t s1 = now_ns();
		sync[r] = s1 - s0;
		for (int i = 0; i < n; i++) {
			uint64_t u0 = now_ns();
			check_drv(cuMemUnmap(base + i * page, page), "cuMemUnmap");
			uint64_t u1 = now_ns();
			check_drv(cuMemRelease(h[i]), "cuMemRelease");
			uint64_t u2 = now_ns();
			unmap[nc] = u1 - u0;
			rel[nc] = u2 - u1;
			nc++;
		}
		shrink[r] = now_ns() - s0;
	}
	row("es_create", page, 1, create, nc);
	row("es_map", page, 1, map, nc);
	row("es_set_access", n * page, n, access, reps);
	row("es_grow", n * page, n, grow, reps);
	row("es_stream_sync", n * page, n, sync, reps);
	row("es_unmap", page, 1, unmap, nc);
	row("es_release", page, 1, rel, nc);
	row("es_shrink", n * page, n, shrink, reps);
	free(create), free(map), free(unmap), free(rel), free(access), free(sync), free(grow), free(shrink);
}

/* The default pool: an allocation it holds memory for (hit), a free, one it
 * must grow for (after a trim to 0), the trim itself, and a stream
 * synchronisation that returns the idle memory (release threshold 0). */
static void pool(uint64_t bytes, int reps, int dev, cudaStream_t st)
{
	cudaMemPool_t mp;
	check_rt(cudaDeviceGetDefaultMemPool(&mp, dev), "cudaDeviceGetDefaultMemPool");
	uint64_t *hit = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *fr = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *grow = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *trim = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *strim = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t *skeep = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)reps);
	uint64_t keep = UINT64_MAX, zero = 0;
	void *p;
	for (int r = 0; r < reps; r++) {
		/* keep everything: the pool holds BYTES after the first round */
		check_rt(cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReleaseThreshold, &keep), "threshold");
		check_rt(cudaStreamSynchronize(st), "sync");
		check_rt(cudaMemPoolTrimTo(mp, 0), "trim");
		uint64_t t0 = now_ns();
		check_rt(cudaMallocAsync(&p, bytes, st), "cudaMallocAsync (grow)");
		uint64_t t1 = now_ns();
		grow[r] = t1 - t0;
		check_rt(cudaFreeAsync(p, st), "cudaFreeAsync");
		check_rt(cudaStreamSynchronize(st), "sync");
		t0 = now_ns();
		check_rt(cudaMallocAsync(&p, bytes, st), "cudaMallocAsync (hit)");
		t1 = now_ns();
		hit[r] = t1 - t0;
		t0 = now_ns();
		check_rt(cudaFreeAsync(p, st), "cudaFreeAsync");
		t1 = now_ns();
		fr[r] = t1 - t0;
		t0 = now_ns();
		check_rt(cudaStreamSynchronize(st), "sync");
		t1 = now_ns();
		skeep[r] = t1 - t0;
		t0 = now_ns();
		check_rt(cudaMemPoolTrimTo(mp, 0), "trim");
		t1 = now_ns();
		trim[r] = t1 - t0;
		/* threshold 0: the next synchronisation returns the idle pages */
		check_rt(cudaMallocAsync(&p, bytes, st), "cudaMallocAsync");
		check_rt(cudaFreeAsync(p, st), "cudaFreeAsync");
		check_rt(cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReleaseThreshold, &zero), "threshold");
		t0 = now_ns();
		check_rt(cudaStreamSynchronize(st), "sync");
		t1 = now_ns();
		strim[r] = t1 - t0;
	}
	row("pool_alloc_hit", bytes, 0, hit, reps);
	row("pool_free", bytes, 0, fr, reps);
	row("pool_alloc_grow", bytes, 0, grow, reps);
	row("pool_trim", bytes, 0, trim, reps);
	row("pool_sync_keep", bytes, 0, skeep, reps);
	row("pool_sync_release", bytes, 0, strim, reps);
	free(hit), free(fr), free(grow), free(trim), free(strim), free(skeep);
}

int main(int argc, char **argv)
{
	int reps = 100;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: vmm_cost [--reps N]\n");
			return 2;
		}
	}
	if (reps < 2) {
		fprintf(stderr, "vmm_cost: --reps must be 2 or more\n");
		return 2;
	}
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "vmm_cost: no GPU\n");
		return 77;
	}
	cudaDeviceProp prop;
	check_rt(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
	check_rt(cudaFree(0), "context");
	int drv = 0;
	cudaDriverGetVersion(&drv);
	cudaStream_t st;
	check_rt(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
	printf("# expandable-segment and pool host costs (ns), %s, driver API %d (traces/timing/vmm_cost.cu)\n",
	       prop.name, drv);
	printf("# op\tbytes\tpages\tns\tn\n");

	/* one reservation as large as the device in whole 20 MiB pages, as
	 * ExpandableSegment makes (the size must be a multiple of the granularity) */
	uint64_t total = (prop.totalGlobalMem + (20ull << 20) - 1) / (20ull << 20) * (20ull << 20), *res = (uint64_t *)malloc(sizeof(uint64_t) * 8);
	CUdeviceptr base = 0;
	for (int r = 0; r < 8; r++) {
		uint64_t t0 = now_ns();
		check_drv(cuMemAddressReserve(&base, total, 0, 0, 0), "cuMemAddressReserve");
		res[r] = now_ns() - t0;
		if (r < 7)
			check_drv(cuMemAddressFree(base, total), "cuMemAddressFree");
	}
	row("es_reserve", total, 0, res, 8);
	free(res);
	static const int npages[] = {1, 2, 4, 8, 16};
	for (unsigned k = 0; k < sizeof npages / sizeof *npages; k++)
		expandable(base, 2ull << 20, npages[k], reps, 0, st);
	for (unsigned k = 0; k < sizeof npages / sizeof *npages; k++)
		expandable(base, 20ull << 20, npages[k], reps / 2 > 2 ? reps / 2 : 2, 0, st);
	check_drv(cuMemAddressFree(base, total), "cuMemAddressFree");

	for (uint64_t b = 512; b <= (1ull << 30); b *= 8)
		pool(b, b <= (64ull << 20) ? reps : reps / 4 > 2 ? reps / 4 : 2, 0, st);
	return 0;
}
