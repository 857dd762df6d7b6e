/*
 * cnn.h: shared types of the CUDA C CNN training workload (capture/cnn/).
 *
 * The network is a list of operations over numbered values (tensors). Every
 * tensor is its own cudaMalloc at creation and cudaFree at its last use, so a
 * CUPTI capture of this program carries the network's logical request stream
 * without a framework's cache in between; that stream is what gpumemsim
 * replays under other allocators.
 */
#ifndef CNN_CNN_H
#define CNN_CNN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublas_v2.h>

/* Fatal checks: a workload that hits a device error has nothing sensible to
 * continue with, so print where and why and exit 1. */
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
	fprintf(stderr, "cnn: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
		cudaGetErrorString(e_)); exit(1); } } while (0)
#define CUDNN_CHECK(call) do { cudnnStatus_t e_ = (call); if (e_ != CUDNN_STATUS_SUCCESS) { \
	fprintf(stderr, "cnn: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
		cudnnGetErrorString(e_)); exit(1); } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t e_ = (call); if (e_ != CUBLAS_STATUS_SUCCESS) { \
	fprintf(stderr, "cnn: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
		cublasGetStatusString(e_)); exit(1); } } while (0)

enum cnn_algo_mode { CNN_ALGO_FASTEST, CNN_ALGO_HEURISTIC, CNN_ALGO_MINWS };

enum cnn_op_kind { CNN_OP_CONV, CNN_OP_BN, CNN_OP_RELU, CNN_OP_MAXPOOL,
		   CNN_OP_ADD, CNN_OP_GAP, CNN_OP_FC };

/* A learnable tensor with its gradient (live from backward to the optimizer
 * step) and its momentum buffer (created at the first step, like torch). */
struct cnn_param {
	char name[64];
	size_t count;
	float *w, *g, *m;
	int steps;
};

/* One algorithm choice for one convolution shape and direction. */
struct cnn_choice {
	int algo;
	cudnnMathType_t math;
	size_t ws;		/* workspace the chosen algorithm asked for */
};

/* Algorithm cache entry: chosen once per layer shape, like
 * cudnn.benchmark / TF autotuning. */
struct cnn_conv_key {
	int n, c, h, w, k, r, stride, pad;
};

struct cnn_conv_entry {
	struct cnn_conv_key key;
	int have[3];
	struct cnn_choice ch[3];	/* 0 fwd, 1 bwd data, 2 bwd filter */
};

struct cnn_value {
	int n, c, h, w;
	size_t count;
	cudnnTensorDescriptor_t desc;
	float *act;		/* forward data, NULL when not live */
	float *grad;		/* gradient, NULL when not live */
	int producer;		/* op index, -1 for the input */
	int last_fwd;		/* last op reading it in forward */
	int first_bwd;		/* smallest op index whose backward reads it */
};

struct cnn_op {
	enum cnn_op_kind kind;
	char name[64];
	int in0, in1, out;
	/* conv */
	int k, stride, pad;
	int pw, pb;		/* param indices (conv/fc weight, fc bias; bn gamma/beta) */
	cudnnFilterDescriptor_t wdesc;
	cudnnConvolutionDescriptor_t cdesc;
	int entry;		/* algorithm cache entry */
	/* bn */
	cudnnTensorDescriptor_t bndesc;
	float *rmean, *rvar, *smean, *sinv;
	/* pooling */
	cudnnPoolingDescriptor_t pdesc;
	cudnnActivationDescriptor_t adesc;
};

struct cnn_net {
	cudnnHandle_t dnn;
	cublasHandle_t blas;
	enum cnn_algo_mode mode;
	size_t ws_limit;
	int batch;
	struct cnn_value *vals;
	int nvals, capvals;
	struct cnn_op *ops;
	int nops, capops;
	struct cnn_param *params;
	int nparams, capparams;
	struct cnn_conv_entry *entries;
	int nentries, capentries;
	uint64_t rng;
	float lr, momentum, wd;
};

/* Print "cnn: MESSAGE" on stderr and exit 1 (bad options, impossible shapes). */
void cnn_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Live-byte accounting over every device allocation the workload makes. */
struct cnn_mem {
	uint64_t live, peak, nalloc, nfree;
};
extern struct cnn_mem cnn_mem;

/* How cnn_alloc/cnn_free get device memory: MALLOC is one cudaMalloc /
 * cudaFree per tensor (no caching: every free synchronises the device);
 * ASYNC is cudaMallocAsync / cudaFreeAsync on the compute stream from the
 * device's default pool with an unlimited release threshold, CUDA's own
 * caching allocator (the "caching on" counterpart of MALLOC, issue 6). */
enum cnn_alloc_mode { CNN_ALLOC_MALLOC, CNN_ALLOC_ASYNC };

/* Choose the allocation mode; call once, after cudaSetDevice and before the
 * first cnn_alloc. ASYNC configures the default pool of device 0. */
void cnn_mem_init(enum cnn_alloc_mode mode);

void *cnn_alloc(size_t bytes);
void cnn_free(void *p, size_t bytes);

/* Deterministic host random numbers (xorshift64*). */
uint64_t cnn_rand(uint64_t *s);
float cnn_randn(uint64_t *s);

/* Building a network: each returns the output value index. */
int cnn_net_init(struct cnn_net *nt, int n, int c, int h, int w);
int cnn_conv(struct cnn_net *nt, const char *name, int in, int cout, int k,
	     int stride, int pad);
int cnn_bn(struct cnn_net *nt, const char *name, int in);
int cnn_relu(struct cnn_net *nt, const char *name, int in);
int cnn_maxpool(struct cnn_net *nt, const char *name, int in, int k,
		int stride, int pad);
int cnn_add(struct cnn_net *nt, const char *name, int a, int b);
int cnn_gap(struct cnn_net *nt, const char *name, int in);
int cnn_fc(struct cnn_net *nt, const char *name, int in, int out);
void cnn_net_finish(struct cnn_net *nt);
void cnn_net_destroy(struct cnn_net *nt);

/* One training step's phases. */
void cnn_forward(struct cnn_net *nt);
void cnn_backward(struct cnn_net *nt);
void cnn_optimizer(struct cnn_net *nt);
void cnn_release_value(struct cnn_net *nt, int v);

/* End-of-run report of per-layer algorithm choices and workspaces. */
void cnn_print_algos(const struct cnn_net *nt, FILE *out);

#endif /* CNN_CNN_H */
