/*
 * gpu_probe_modules.cu: what framework programs do that our own CNN does
 * not, in a program whose trace is known (make gpu-test):
 *
 *  1. Modules loaded and unloaded at run time, as XLA's autotuner does:
 *     module W (a 64 KiB __device__ global and a kernel of 6 pointer
 *     parameters) and module N (a 16 KiB global, a kernel of one pointer)
 *     are loaded, launched and unloaded in turn, RELOADS times each. CUPTI
 *     reports each load's global as memory kind 6 and no release at the
 *     unload: the trace must free it there, so it validates and replays.
 *     Launching N's one-parameter kernel after W unloaded is where a
 *     parameter cache keyed by function handle would read W's six.
 *  2. A CUDA graph made by stream capture (cudaMallocAsync, a memset, two
 *     kernels, a copy, cudaFreeAsync: graph memory nodes), launched
 *     GRAPH_LAUNCHES times: its kernels, memset and copy carry the graph's
 *     id in the trace.
 *
 * It prints "key value" lines to its argument file for the checker
 * (gpu_test.sh): loads, unloads, global sizes, graph launches, kernels per
 * graph launch. Exit 77: no GPU.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>

#define RELOADS 3
#define GRAPH_LAUNCHES 3

/* Hand-written PTX so that the program needs no second compilation step;
 * the driver JIT-compiles it at cuModuleLoadData. */
static const char ptx_wide[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".global .align 8 .b8 probe_wide_global[65536];\n"
	".visible .entry wide(.param .u64 a, .param .u64 b, .param .u64 c,\n"
	"                     .param .u64 d, .param .u64 e, .param .u64 f)\n"
	"{\n .reg .b64 %rd<3>;\n .reg .b32 %r<2>;\n"
	" ld.param.u64 %rd1, [a];\n cvta.to.global.u64 %rd2, %rd1;\n"
	" mov.u32 %r1, 7;\n st.global.u32 [%rd2], %r1;\n"
	" st.global.u32 [probe_wide_global], %r1;\n ret;\n}\n";
static const char ptx_narrow[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".global .align 8 .b8 probe_narrow_global[16384];\n"
	".visible .entry narrow(.param .u64 a)\n"
	"{\n .reg .b64 %rd<3>;\n .reg .b32 %r<2>;\n"
	" ld.param.u64 %rd1, [a];\n cvta.to.global.u64 %rd2, %rd1;\n"
	" mov.u32 %r1, 9;\n st.global.u32 [%rd2], %r1;\n"
	" st.global.u32 [probe_narrow_global], %r1;\n ret;\n}\n";

__global__ void scale(float *a, int n, float v)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] = a[i] * v + 1.0f;
}

#define CK(call)                                                                   \
	do {                                                                       \
		cudaError_t e_ = (call);                                           \
		if (e_ != cudaSuccess) {                                           \
			fprintf(stderr, "gpu_probe_modules: %s: %s\n", #call,      \
				cudaGetErrorString(e_));                           \
			return 1;                                                  \
		}                                                                  \
	} while (0)
#define CKD(call)                                                                  \
	do {                                                                       \
		CUresult r_ = (call);                                              \
		if (r_ != CUDA_SUCCESS) {                                          \
			const char *m_ = "?";                                      \
			cuGetErrorString(r_, &m_);                                 \
			fprintf(stderr, "gpu_probe_modules: %s: %s\n", #call, m_); \
			return 1;                                                  \
		}                                                                  \
	} while (0)

/* Load PTX, launch its kernel once on BUF, unload. */
static int load_launch_unload(const char *ptx, const char *kname, int nparams, CUdeviceptr buf)
{
	CUmodule mod;
	CUfunction f;
	void *args[6] = {&buf, &buf, &buf, &buf, &buf, &buf};
	CKD(cuModuleLoadData(&mod, ptx));
	CKD(cuModuleGetFunction(&f, mod, kname));
	/* exactly NPARAMS pointers: a reader of more reads past the array */
	void **params = args + (6 - nparams);
	CKD(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
	CKD(cuCtxSynchronize());
	CKD(cuModuleUnload(mod));
	return 0;
}

int main(int argc, char **argv)
{
	int ndev = 0;
	if (argc != 2) {
		fprintf(stderr, "usage: gpu_probe_modules EXPECT_FILE\n");
		return 2;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "gpu_probe_modules: no CUDA device\n");
		return 77;
	}
	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	float *buf;
	CK(cudaFree(0));
	CK(cudaMalloc((void **)&buf, 1 << 20));
	for (int i = 0; i < RELOADS; i++) {
		if (load_launch_unload(ptx_wide, "wide", 6, (CUdeviceptr)buf) ||
		    load_launch_unload(ptx_narrow, "narrow", 1, (CUdeviceptr)buf))
			return 1;
	}

	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	float *g;
	const int n = 1 << 18;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaMallocAsync((void **)&g, n * sizeof(float), s));
	CK(cudaMemsetAsync(g, 0, n * sizeof(float), s));
	scale<<<n / 256, 256, 0, s>>>(g, n, 0.0f);
	scale<<<n / 256, 256, 0, s>>>(g, n, 2.0f);
	CK(cudaMemcpyAsync(buf, g, 4096, cudaMemcpyDeviceToDevice, s));
	CK(cudaFreeAsync(g, s));
	CK(cudaStreamEndCapture(s, &graph));
	CK(cudaGraphInstantiate(&exec, graph, 0));
	for (int i = 0; i < GRAPH_LAUNCHES; i++)
		CK(cudaGraphLaunch(exec, s));
	CK(cudaStreamSynchronize(s));
	float first = 0;
	CK(cudaMemcpy(&first, buf, sizeof(first), cudaMemcpyDeviceToHost));
	if (first != 3.0f) {
		fprintf(stderr, "gpu_probe_modules: wrong result %g\n", first);
		return 1;
	}
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(buf));

	fprintf(out, "module_loads %d\nmodule_unloads %d\nwide_global 65536\nnarrow_global 16384\n"
		     "graph_launches %d\ngraph_kernels_per_launch 2\ngraph_copies_per_launch 1\n"
		     "graph_memsets_per_launch 1\n",
		2 * RELOADS, 2 * RELOADS, GRAPH_LAUNCHES);
	fclose(out);
	printf("gpu_probe_modules: ok\n");
	return 0;
}
