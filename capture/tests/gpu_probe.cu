/*
 * gpu_probe.cu: a small CUDA program whose trace is known exactly, run under
 * `gpumemsim capture` by `make gpu-test`. It writes what it did (buffer
 * addresses and sizes) to the file named by its argument, so the checker
 * (gpu_probe_check.c) can compare the trace with the truth. Exit status 77
 * means "no GPU here" (the test then skips).
 *
 * What it does, in order:
 *   range "probe" (depth 0) {
 *     range "alloc" (depth 1) { cudaMalloc A (1 MiB), B (3 MiB), C (98760 B) }
 *     cudaMemset A; cudaMemcpy host->B
 *     fill<<<>>>(A)          links {A}
 *     add<<<>>>(A, B, C)     links {A, B, C}
 *     via_struct<<<>>>({C})  links {C}   (pointer inside a struct parameter)
 *     spin<<<>>>(n)          no links
 *     cudaMemcpy C->host; cudaDeviceSynchronize
 *     cudaMallocAsync D (2 MiB) on stream s; fill<<<s>>>(D) links {D};
 *     cudaFreeAsync D on s; cudaStreamSynchronize(s)
 *     cudaFree C, B, A
 *   }
 */
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>

struct wrapped {
	float *p;
	int n;
};

__global__ void fill(float *a, int n, float v)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] = v;
}

__global__ void add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void via_struct(struct wrapped w)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < w.n)
		w.p[i] *= 2.0f;
}

__global__ void spin(int n)
{
	volatile int x = 0;
	for (int i = 0; i < n; i++)
		x += i;
}

#define CK(call)                                                                   \
	do {                                                                       \
		cudaError_t e_ = (call);                                           \
		if (e_ != cudaSuccess) {                                           \
			fprintf(stderr, "gpu_probe: %s: %s\n", #call, cudaGetErrorString(e_)); \
			return 1;                                                  \
		}                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	int ndev = 0;
	if (argc != 2) {
		fprintf(stderr, "usage: gpu_probe EXPECT_FILE\n");
		return 2;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "gpu_probe: no CUDA device\n");
		return 77;
	}
	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	const size_t sa = 1u << 20, sb = 3u << 20, sc = 98760, sd = 2u << 20;
	const int nc = (int)(sc / sizeof(float));
	float *a, *b, *c, *d;
	cudaStream_t s;
	CK(cudaFree(0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	nvtxRangePushA("probe");
	nvtxRangePushA("alloc");
	CK(cudaMalloc((void **)&a, sa));
	CK(cudaMalloc((void **)&b, sb));
	CK(cudaMalloc((void **)&c, sc));
	nvtxRangePop();

	float *host = (float *)calloc(1, sb);
	CK(cudaMemset(a, 0, sa));
	CK(cudaMemcpy(b, host, sb, cudaMemcpyHostToDevice));
	fill<<<(nc + 255) / 256, 256>>>(a, nc, 1.0f);
	add<<<(nc + 255) / 256, 256>>>(a, b, c, nc);
	struct wrapped w = {c, nc};
	via_struct<<<(nc + 255) / 256, 256>>>(w);
	spin<<<1, 32>>>(1000);
	CK(cudaGetLastError());
	CK(cudaMemcpy(host, c, sc, cudaMemcpyDeviceToHost));
	CK(cudaDeviceSynchronize());
	if (host[0] != 2.0f) {
		fprintf(stderr, "gpu_probe: wrong result %g\n", host[0]);
		return 1;
	}

	CK(cudaMallocAsync((void **)&d, sd, s));
	fill<<<(int)(sd / sizeof(float) + 255) / 256, 256, 0, s>>>(d, (int)(sd / sizeof(float)), 3.0f);
	CK(cudaFreeAsync(d, s));
	CK(cudaStreamSynchronize(s));

	CK(cudaFree(c));
	CK(cudaFree(b));
	CK(cudaFree(a));
	nvtxRangePop();
	CK(cudaStreamDestroy(s));
	free(host);

	fprintf(out, "A %p %zu\nB %p %zu\nC %p %zu\nD %p %zu\n", (void *)a, sa, (void *)b, sb,
		(void *)c, sc, (void *)d, sd);
	fclose(out);
	printf("gpu_probe: ok\n");
	return 0;
}
