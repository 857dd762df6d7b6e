/*
 * layers.c: the CNN workload's layers (convolution, batch normalisation,
 * ReLU, max pooling, residual addition, global average pooling, fully
 * connected) on cuDNN, cuBLAS and kernels.cu, with forward, backward and the
 * SGD step over the whole operation list.
 *
 * Memory discipline, which is the point of this program: each activation is
 * allocated by the operation that produces it and freed right after its last
 * reader (the last forward consumer, or the earliest operation whose backward
 * needs it); each gradient is allocated by its first contributor and freed
 * once the producer's backward consumed it; weight gradients live until the
 * optimizer step; convolution workspaces are allocated per call and freed
 * right after, as a framework does. Algorithm selection runs once per
 * convolution shape and direction at its first use (the first step).
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <nvtx3/nvToolsExt.h>
#include "cnn.h"
#include "kernels.h"

struct cnn_mem cnn_mem;

/* The stream every cuDNN, cuBLAS and kernels.cu call runs on: none of them
 * is given a stream, so it is the legacy default stream. Stream-ordered
 * allocations go on it so a tensor freed by one layer is reused by the
 * next without any extra synchronisation, as in a framework. */
static const cudaStream_t cnn_stream = 0;
static enum cnn_alloc_mode cnn_mode = CNN_ALLOC_MALLOC;

static const float cnn_one = 1.0f, cnn_zero = 0.0f;
#define CNN_BN_EPS 1e-5
#define CNN_BN_MOMENTUM 0.1

/* Print and exit: used for problems in options or shapes. */
void cnn_fail(const char *fmt, ...)
{
	va_list ap;
	fputs("cnn: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* The pool keeps everything freed (release threshold UINT64_MAX): by
 * default it would hand memory back to the driver at every synchronisation
 * (one per step here) and each step would grow it again, which is not
 * caching. MALLOC mode touches no pool attribute, so its API stream is the
 * same as before this option existed. */
void cnn_mem_init(enum cnn_alloc_mode mode)
{
	cnn_mode = mode;
	if (mode != CNN_ALLOC_ASYNC)
		return;
	int dev = 0, supported = 0;
	CUDA_CHECK(cudaGetDevice(&dev));
	CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev));
	if (!supported)
		cnn_fail("--alloc async: device %d does not support memory pools", dev);
	cudaMemPool_t pool;
	uint64_t keep = UINT64_MAX;
	CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
	CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
}

/* Every device buffer goes through here so the program knows its own live
 * and peak bytes, to compare with what a capture reports. */
void *cnn_alloc(size_t bytes)
{
	void *p = NULL;
	if (bytes == 0)
		return NULL;
	if (cnn_mode == CNN_ALLOC_ASYNC)
		CUDA_CHECK(cudaMallocAsync(&p, bytes, cnn_stream));
	else
		CUDA_CHECK(cudaMalloc(&p, bytes));
	cnn_mem.live += bytes;
	cnn_mem.nalloc++;
	if (cnn_mem.live > cnn_mem.peak)
		cnn_mem.peak = cnn_mem.live;
	return p;
}

/* Counterpart of cnn_alloc; BYTES must be the size it was allocated with. */
void cnn_free(void *p, size_t bytes)
{
	if (!p)
		return;
	if (cnn_mode == CNN_ALLOC_ASYNC)
		CUDA_CHECK(cudaFreeAsync(p, cnn_stream));
	else
		CUDA_CHECK(cudaFree(p));
	cnn_mem.live -= bytes;
	cnn_mem.nfree++;
}

/* xorshift64*: fast, and the same sequence on every host. */
uint64_t cnn_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Standard normal by Box-Muller from two uniforms in (0,1]. */
float cnn_randn(uint64_t *s)
{
	double u1 = ((cnn_rand(s) >> 11) + 1.0) / 9007199254740993.0;
	double u2 = (cnn_rand(s) >> 11) / 9007199254740992.0;
	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void *cnn_grow(void *arr, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return arr;
	int nc = *cap ? *cap * 2 : 32;
	while (nc < need)
		nc *= 2;
	void *p = realloc(arr, (size_t)nc * elem);
	if (!p)
		cnn_fail("out of host memory");
	memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
	*cap = nc;
	return p;
}

/* A new value produced by the op most recently added (or the input). */
static int cnn_new_value(struct cnn_net *nt, int n, int c, int h, int w)
{
	nt->vals = cnn_grow(nt->vals, &nt->capvals, nt->nvals + 1, sizeof(*nt->vals));
	int v = nt->nvals++;
	struct cnn_value *x = &nt->vals[v];
	if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
		cnn_fail("layer %s: output shape %dx%dx%dx%d is empty (image too small?)",
			 nt->nops ? nt->ops[nt->nops - 1].name : "input", n, c, h, w);
	x->n = n; x->c = c; x->h = h; x->w = w;
	x->count = (size_t)n * c * h * w;
	CUDNN_CHECK(cudnnCreateTensorDescriptor(&x->desc));
	CUDNN_CHECK(cudnnSetTensor4dDescriptor(x->desc, CUDNN_TENSOR_NCHW,
					       CUDNN_DATA_FLOAT, n, c, h, w));
	x->producer = nt->nops - 1;
	x->last_fwd = -1;
	x->first_bwd = INT_MAX;
	return v;
}

static int cnn_new_op(struct cnn_net *nt, enum cnn_op_kind kind,
		      const char *name, int in0, int in1)
{
	nt->ops = cnn_grow(nt->ops, &nt->capops, nt->nops + 1, sizeof(*nt->ops));
	int oi = nt->nops++;
	struct cnn_op *o = &nt->ops[oi];
	o->kind = kind;
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->in0 = in0;
	o->in1 = in1;
	o->out = -1;
	o->pw = o->pb = -1;
	o->entry = -1;
	nt->vals[in0].last_fwd = oi;
	if (in1 >= 0)
		nt->vals[in1].last_fwd = oi;
	return oi;
}

/* Op OI's backward reads value V's forward data. */
static void cnn_need(struct cnn_net *nt, int v, int oi)
{
	if (oi < nt->vals[v].first_bwd)
		nt->vals[v].first_bwd = oi;
}

/* A parameter initialised on the host: He-normal when FAN_IN > 0, else the
 * constant VALUE. */
static int cnn_new_param(struct cnn_net *nt, const char *op, const char *what,
			 size_t count, int fan_in, float value)
{
	nt->params = cnn_grow(nt->params, &nt->capparams, nt->nparams + 1,
			      sizeof(*nt->params));
	int pi = nt->nparams++;
	struct cnn_param *p = &nt->params[pi];
	snprintf(p->name, sizeof(p->name), "%s.%s", op, what);
	p->count = count;
	float *h = malloc(count * sizeof(float));
	if (!h)
		cnn_fail("out of host memory");
	float sd = fan_in > 0 ? sqrtf(2.0f / (float)fan_in) : 0.0f;
	for (size_t i = 0; i < count; i++)
		h[i] = fan_in > 0 ? sd * cnn_randn(&nt->rng) : value;
	p->w = cnn_alloc(count * sizeof(float));
	CUDA_CHECK(cudaMemcpy(p->w, h, count * sizeof(float), cudaMemcpyHostToDevice));
	free(h);
	return pi;
}

static float *cnn_const_buffer(size_t count, float value)
{
	float *h = malloc(count * sizeof(float));
	if (!h)
		cnn_fail("out of host memory");
	for (size_t i = 0; i < count; i++)
		h[i] = value;
	float *d = cnn_alloc(count * sizeof(float));
	CUDA_CHECK(cudaMemcpy(d, h, count * sizeof(float), cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* Handles and the input value (0); knobs (mode, limits, rng, lr) are set by
 * the caller afterwards, before layers are added. */
int cnn_net_init(struct cnn_net *nt, int n, int c, int h, int w)
{
	memset(nt, 0, sizeof(*nt));
	CUDNN_CHECK(cudnnCreate(&nt->dnn));
	CUBLAS_CHECK(cublasCreate(&nt->blas));
	nt->batch = n;
	return cnn_new_value(nt, n, c, h, w);
}

static int cnn_conv_entry(struct cnn_net *nt, const struct cnn_conv_key *k)
{
	for (int i = 0; i < nt->nentries; i++)
		if (!memcmp(&nt->entries[i].key, k, sizeof(*k)))
			return i;
	nt->entries = cnn_grow(nt->entries, &nt->capentries, nt->nentries + 1,
			       sizeof(*nt->entries));
	nt->entries[nt->nentries].key = *k;
	return nt->nentries++;
}

/* Convolution without bias (a batch norm follows every one of them). */
int cnn_conv(struct cnn_net *nt, const char *name, int in, int cout, int k,
	     int stride, int pad)
{
	struct cnn_value x = nt->vals[in];
	int oi = cnn_new_op(nt, CNN_OP_CONV, name, in, -1);
	int pw = cnn_new_param(nt, name, "weight", (size_t)cout * x.c * k * k,
			       x.c * k * k, 0.0f);
	struct cnn_op *o = &nt->ops[oi];
	o->k = k; o->stride = stride; o->pad = pad; o->pw = pw;
	CUDNN_CHECK(cudnnCreateFilterDescriptor(&o->wdesc));
	CUDNN_CHECK(cudnnSetFilter4dDescriptor(o->wdesc, CUDNN_DATA_FLOAT,
					       CUDNN_TENSOR_NCHW, cout, x.c, k, k));
	CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&o->cdesc));
	CUDNN_CHECK(cudnnSetConvolution2dDescriptor(o->cdesc, pad, pad, stride,
						    stride, 1, 1,
						    CUDNN_CROSS_CORRELATION,
						    CUDNN_DATA_FLOAT));
	int on, oc, oh, ow;
	CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(o->cdesc, x.desc, o->wdesc,
							  &on, &oc, &oh, &ow));
	struct cnn_conv_key key = { x.n, x.c, x.h, x.w, cout, k, stride, pad };
	int e = cnn_conv_entry(nt, &key);
	nt->ops[oi].entry = e;
	int out = cnn_new_value(nt, on, oc, oh, ow);
	nt->ops[oi].out = out;
	cnn_need(nt, in, oi);
	return out;
}

/* Spatial batch normalisation with learnable scale and shift. */
int cnn_bn(struct cnn_net *nt, const char *name, int in)
{
	struct cnn_value x = nt->vals[in];
	int oi = cnn_new_op(nt, CNN_OP_BN, name, in, -1);
	int pw = cnn_new_param(nt, name, "weight", (size_t)x.c, 0, 1.0f);
	int pb = cnn_new_param(nt, name, "bias", (size_t)x.c, 0, 0.0f);
	struct cnn_op *o = &nt->ops[oi];
	o->pw = pw; o->pb = pb;
	o->rmean = cnn_const_buffer((size_t)x.c, 0.0f);
	o->rvar = cnn_const_buffer((size_t)x.c, 1.0f);
	CUDNN_CHECK(cudnnCreateTensorDescriptor(&o->bndesc));
	CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(o->bndesc, x.desc,
						  CUDNN_BATCHNORM_SPATIAL));
	int out = cnn_new_value(nt, x.n, x.c, x.h, x.w);
	nt->ops[oi].out = out;
	cnn_need(nt, in, oi);
	return out;
}

/* ReLU; its backward reads only the output (y > 0 exactly where x > 0), so
 * the input can go as soon as forward is done with it. */
int cnn_relu(struct cnn_net *nt, const char *name, int in)
{
	struct cnn_value x = nt->vals[in];
	int oi = cnn_new_op(nt, CNN_OP_RELU, name, in, -1);
	struct cnn_op *o = &nt->ops[oi];
	CUDNN_CHECK(cudnnCreateActivationDescriptor(&o->adesc));
	CUDNN_CHECK(cudnnSetActivationDescriptor(o->adesc, CUDNN_ACTIVATION_RELU,
						 CUDNN_NOT_PROPAGATE_NAN, 0.0));
	int out = cnn_new_value(nt, x.n, x.c, x.h, x.w);
	nt->ops[oi].out = out;
	cnn_need(nt, out, oi);
	return out;
}

/* Max pooling; backward needs both input and output. */
int cnn_maxpool(struct cnn_net *nt, const char *name, int in, int k,
		int stride, int pad)
{
	struct cnn_value x = nt->vals[in];
	int oi = cnn_new_op(nt, CNN_OP_MAXPOOL, name, in, -1);
	struct cnn_op *o = &nt->ops[oi];
	CUDNN_CHECK(cudnnCreatePoolingDescriptor(&o->pdesc));
	CUDNN_CHECK(cudnnSetPooling2dDescriptor(o->pdesc, CUDNN_POOLING_MAX,
						CUDNN_NOT_PROPAGATE_NAN, k, k,
						pad, pad, stride, stride));
	int on, oc, oh, ow;
	CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(o->pdesc, x.desc, &on, &oc,
						      &oh, &ow));
	int out = cnn_new_value(nt, on, oc, oh, ow);
	nt->ops[oi].out = out;
	cnn_need(nt, in, oi);
	cnn_need(nt, out, oi);
	return out;
}

/* Residual addition of two same-shaped values. */
int cnn_add(struct cnn_net *nt, const char *name, int a, int b)
{
	struct cnn_value x = nt->vals[a], y = nt->vals[b];
	if (x.count != y.count || x.c != y.c)
		cnn_fail("layer %s: adding %dx%dx%d to %dx%dx%d", name, x.c, x.h,
			 x.w, y.c, y.h, y.w);
	int oi = cnn_new_op(nt, CNN_OP_ADD, name, a, b);
	int out = cnn_new_value(nt, x.n, x.c, x.h, x.w);
	nt->ops[oi].out = out;
	return out;
}

/* Global average pooling to N x C x 1 x 1. */
int cnn_gap(struct cnn_net *nt, const char *name, int in)
{
	struct cnn_value x = nt->vals[in];
	int oi = cnn_new_op(nt, CNN_OP_GAP, name, in, -1);
	int out = cnn_new_value(nt, x.n, x.c, 1, 1);
	nt->ops[oi].out = out;
	return out;
}

/* Fully connected layer on the flattened input (C*H*W features). */
int cnn_fc(struct cnn_net *nt, const char *name, int in, int outf)
{
	struct cnn_value x = nt->vals[in];
	int kf = x.c * x.h * x.w;
	int oi = cnn_new_op(nt, CNN_OP_FC, name, in, -1);
	int pw = cnn_new_param(nt, name, "weight", (size_t)outf * kf, kf, 0.0f);
	int pb = cnn_new_param(nt, name, "bias", (size_t)outf, 0, 0.0f);
	nt->ops[oi].pw = pw;
	nt->ops[oi].pb = pb;
	int out = cnn_new_value(nt, x.n, outf, 1, 1);
	nt->ops[oi].out = out;
	cnn_need(nt, in, oi);
	return out;
}

/* Summary line once the graph is complete. */
void cnn_net_finish(struct cnn_net *nt)
{
	size_t n = 0;
	for (int i = 0; i < nt->nparams; i++)
		n += nt->params[i].count;
	int convs = 0;
	for (int i = 0; i < nt->nops; i++)
		convs += nt->ops[i].kind == CNN_OP_CONV;
	printf("cnn: %d ops (%d convolutions), %d parameter tensors, %zu parameters (%.1f MiB)\n",
	       nt->nops, convs, nt->nparams, n, n * 4.0 / 1048576.0);
}

/* ---- convolution algorithm choice ------------------------------------- */

struct cnn_cand {
	int algo;
	cudnnStatus_t status;
	size_t mem;
	cudnnMathType_t math;
};

#define CNN_MAX_CANDS 16

/* FASTEST and HEURISTIC take the first working candidate within the limit
 * (the list is in time or heuristic order); MINWS the smallest workspace.
 * When nothing fits the limit, the smallest workspace wins anyway. */
static int cnn_pick(const struct cnn_cand *c, int n, enum cnn_algo_mode mode,
		    size_t limit)
{
	int best = -1;
	for (int i = 0; i < n; i++) {
		if (c[i].status != CUDNN_STATUS_SUCCESS)
			continue;
		if (mode != CNN_ALGO_MINWS && c[i].mem <= limit)
			return i;
		if (best < 0 || c[i].mem < c[best].mem)
			best = i;
	}
	return best;
}

/* Workspace for the timing run: the largest any working candidate within
 * the limit asks for, so every such candidate gets timed. */
static size_t cnn_find_ws(const struct cnn_cand *c, int n, size_t limit)
{
	size_t ws = 0;
	for (int i = 0; i < n; i++)
		if (c[i].status == CUDNN_STATUS_SUCCESS && c[i].mem <= limit &&
		    c[i].mem > ws)
			ws = c[i].mem;
	return ws;
}

#define CNN_COPY_CANDS(dst, src, n) do { for (int i_ = 0; i_ < (n); i_++) { \
	(dst)[i_].algo = (int)(src)[i_].algo; (dst)[i_].status = (src)[i_].status; \
	(dst)[i_].mem = (src)[i_].memory; (dst)[i_].math = (src)[i_].mathType; } } while (0)

static void cnn_set_choice(struct cnn_conv_entry *e, int dir,
			   const struct cnn_cand *c, int n, int i,
			   const char *name)
{
	if (i < 0)
		cnn_fail("layer %s: no working cuDNN algorithm (direction %d, %d candidates)",
			 name, dir, n);
	e->ch[dir].algo = c[i].algo;
	e->ch[dir].math = c[i].math;
	e->ch[dir].ws = c[i].mem;
	e->have[dir] = 1;
}

static void cnn_choose_fwd(struct cnn_net *nt, struct cnn_op *o,
			   struct cnn_value *x, struct cnn_value *y,
			   const float *w, struct cnn_conv_entry *e)
{
	cudnnConvolutionFwdAlgoPerf_t perf[CNN_MAX_CANDS];
	struct cnn_cand c[CNN_MAX_CANDS];
	int got = 0;
	CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(nt->dnn, x->desc,
		o->wdesc, o->cdesc, y->desc, CNN_MAX_CANDS, &got, perf));
	CNN_COPY_CANDS(c, perf, got);
	if (nt->mode == CNN_ALGO_FASTEST) {
		size_t ws = cnn_find_ws(c, got, nt->ws_limit);
		void *wsp = cnn_alloc(ws);
		CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(nt->dnn,
			x->desc, x->act, o->wdesc, w, o->cdesc, y->desc, y->act,
			CNN_MAX_CANDS, &got, perf, wsp, ws));
		cnn_free(wsp, ws);
		CNN_COPY_CANDS(c, perf, got);
	}
	cnn_set_choice(e, 0, c, got, cnn_pick(c, got, nt->mode, nt->ws_limit), o->name);
}

static void cnn_choose_bwd_data(struct cnn_net *nt, struct cnn_op *o,
				struct cnn_value *x, struct cnn_value *y,
				const float *w, float *dx,
				struct cnn_conv_entry *e)
{
	cudnnConvolutionBwdDataAlgoPerf_t perf[CNN_MAX_CANDS];
	struct cnn_cand c[CNN_MAX_CANDS];
	int got = 0;
	CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(nt->dnn, o->wdesc,
		y->desc, o->cdesc, x->desc, CNN_MAX_CANDS, &got, perf));
	CNN_COPY_CANDS(c, perf, got);
	if (nt->mode == CNN_ALGO_FASTEST) {
		size_t ws = cnn_find_ws(c, got, nt->ws_limit);
		void *wsp = cnn_alloc(ws);
		CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(nt->dnn,
			o->wdesc, w, y->desc, y->grad, o->cdesc, x->desc, dx,
			CNN_MAX_CANDS, &got, perf, wsp, ws));
		cnn_free(wsp, ws);
		CNN_COPY_CANDS(c, perf, got);
	}
	cnn_set_choice(e, 1, c, got, cnn_pick(c, got, nt->mode, nt->ws_limit), o->name);
}

static void cnn_choose_bwd_filter(struct cnn_net *nt, struct cnn_op *o,
				  struct cnn_value *x, struct cnn_value *y,
				  float *dw, struct cnn_conv_entry *e)
{
	cudnnConvolutionBwdFilterAlgoPerf_t perf[CNN_MAX_CANDS];
	struct cnn_cand c[CNN_MAX_CANDS];
	int got = 0;
	CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(nt->dnn, x->desc,
		y->desc, o->cdesc, o->wdesc, CNN_MAX_CANDS, &got, perf));
	CNN_COPY_CANDS(c, perf, got);
	if (nt->mode == CNN_ALGO_FASTEST) {
		size_t ws = cnn_find_ws(c, got, nt->ws_limit);
		void *wsp = cnn_alloc(ws);
		CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(nt->dnn,
			x->desc, x->act, y->desc, y->grad, o->cdesc, o->wdesc, dw,
			CNN_MAX_CANDS, &got, perf, wsp, ws));
		cnn_free(wsp, ws);
		CNN_COPY_CANDS(c, perf, got);
	}
	cnn_set_choice(e, 2, c, got, cnn_pick(c, got, nt->mode, nt->ws_limit), o->name);
}

/* ---- forward ------------------------------------------------------------ */

static void cnn_conv_fwd(struct cnn_net *nt, struct cnn_op *o,
			 struct cnn_value *x, struct cnn_value *y)
{
	struct cnn_conv_entry *e = &nt->entries[o->entry];
	const float *w = nt->params[o->pw].w;
	if (!e->have[0])
		cnn_choose_fwd(nt, o, x, y, w, e);
	cudnnConvolutionFwdAlgo_t algo = (cudnnConvolutionFwdAlgo_t)e->ch[0].algo;
	size_t ws = 0;
	CUDNN_CHECK(cudnnSetConvolutionMathType(o->cdesc, e->ch[0].math));
	CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(nt->dnn, x->desc,
		o->wdesc, o->cdesc, y->desc, algo, &ws));
	void *wsp = cnn_alloc(ws);
	CUDNN_CHECK(cudnnConvolutionForward(nt->dnn, &cnn_one, x->desc, x->act,
		o->wdesc, w, o->cdesc, algo, wsp, ws, &cnn_zero, y->desc, y->act));
	cnn_free(wsp, ws);
}

static void cnn_fc_fwd(struct cnn_net *nt, struct cnn_op *o,
		       struct cnn_value *x, struct cnn_value *y)
{
	int n = x->n, kf = x->c * x->h * x->w, m = y->c;
	/* Row-major Y[n][m] = X[n][k] W[m][k]^T, as column-major Y^T = W X^T. */
	CUBLAS_CHECK(cublasSgemm(nt->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, kf,
				 &cnn_one, nt->params[o->pw].w, kf, x->act, kf,
				 &cnn_zero, y->act, m));
	CUDA_CHECK(cnn_k_bias_fwd(y->act, nt->params[o->pb].w, n, m));
}

static void cnn_release_act(struct cnn_net *nt, int v)
{
	struct cnn_value *x = &nt->vals[v];
	cnn_free(x->act, x->count * sizeof(float));
	x->act = NULL;
}

/* Free a value's forward data now (the caller knows it is dead). */
void cnn_release_value(struct cnn_net *nt, int v)
{
	cnn_release_act(nt, v);
}

/* The forward pass over all ops; value 0 (the batch) must be loaded. */
void cnn_forward(struct cnn_net *nt)
{
	char label[96];
	for (int oi = 0; oi < nt->nops; oi++) {
		struct cnn_op *o = &nt->ops[oi];
		struct cnn_value *x = &nt->vals[o->in0];
		struct cnn_value *y = &nt->vals[o->out];
		snprintf(label, sizeof(label), "%s.fwd", o->name);
		nvtxRangePushA(label);
		y->act = cnn_alloc(y->count * sizeof(float));
		switch (o->kind) {
		case CNN_OP_CONV:
			cnn_conv_fwd(nt, o, x, y);
			break;
		case CNN_OP_BN:
			o->smean = cnn_alloc((size_t)x->c * sizeof(float));
			o->sinv = cnn_alloc((size_t)x->c * sizeof(float));
			CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(nt->dnn,
				CUDNN_BATCHNORM_SPATIAL, &cnn_one, &cnn_zero,
				x->desc, x->act, y->desc, y->act, o->bndesc,
				nt->params[o->pw].w, nt->params[o->pb].w,
				CNN_BN_MOMENTUM, o->rmean, o->rvar, CNN_BN_EPS,
				o->smean, o->sinv));
			break;
		case CNN_OP_RELU:
			CUDNN_CHECK(cudnnActivationForward(nt->dnn, o->adesc,
				&cnn_one, x->desc, x->act, &cnn_zero, y->desc,
				y->act));
			break;
		case CNN_OP_MAXPOOL:
			CUDNN_CHECK(cudnnPoolingForward(nt->dnn, o->pdesc,
				&cnn_one, x->desc, x->act, &cnn_zero, y->desc,
				y->act));
			break;
		case CNN_OP_ADD:
			CUDA_CHECK(cnn_k_add(x->act, nt->vals[o->in1].act, y->act,
					     y->count));
			break;
		case CNN_OP_GAP:
			CUDA_CHECK(cnn_k_gap_fwd(x->act, y->act, x->n * x->c,
						 x->h * x->w));
			break;
		case CNN_OP_FC:
			cnn_fc_fwd(nt, o, x, y);
			break;
		}
		int ins[2] = { o->in0, o->in1 };
		for (int j = 0; j < 2; j++) {
			int v = ins[j];
			if (v < 0 || (j == 1 && v == o->in0))
				continue;
			if (nt->vals[v].last_fwd == oi &&
			    nt->vals[v].first_bwd == INT_MAX)
				cnn_release_act(nt, v);
		}
		nvtxRangePop();
	}
}

/* ---- backward ----------------------------------------------------------- */

/* Where the gradient of V goes: a new buffer for its first contributor, the
 * existing one (accumulate) for later ones. */
static float *cnn_grad_target(struct cnn_net *nt, int v, int *accum)
{
	struct cnn_value *x = &nt->vals[v];
	*accum = x->grad != NULL;
	if (!x->grad)
		x->grad = cnn_alloc(x->count * sizeof(float));
	return x->grad;
}

static void cnn_conv_bwd(struct cnn_net *nt, struct cnn_op *o,
			 struct cnn_value *x, struct cnn_value *y)
{
	struct cnn_conv_entry *e = &nt->entries[o->entry];
	struct cnn_param *p = &nt->params[o->pw];
	size_t ws = 0;
	void *wsp;

	p->g = cnn_alloc(p->count * sizeof(float));
	if (!e->have[2])
		cnn_choose_bwd_filter(nt, o, x, y, p->g, e);
	cudnnConvolutionBwdFilterAlgo_t fa = (cudnnConvolutionBwdFilterAlgo_t)e->ch[2].algo;
	CUDNN_CHECK(cudnnSetConvolutionMathType(o->cdesc, e->ch[2].math));
	CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(nt->dnn,
		x->desc, y->desc, o->cdesc, o->wdesc, fa, &ws));
	wsp = cnn_alloc(ws);
	CUDNN_CHECK(cudnnConvolutionBackwardFilter(nt->dnn, &cnn_one, x->desc,
		x->act, y->desc, y->grad, o->cdesc, fa, wsp, ws, &cnn_zero,
		o->wdesc, p->g));
	cnn_free(wsp, ws);

	if (o->in0 == 0)
		return;		/* no gradient for the input images */
	int accum;
	float *dx = cnn_grad_target(nt, o->in0, &accum);
	if (!e->have[1]) {
		/* The timing run overwrites its output: keep an accumulated
		 * gradient out of its way. */
		float *scratch = accum ? cnn_alloc(x->count * sizeof(float)) : dx;
		cnn_choose_bwd_data(nt, o, x, y, p->w, scratch, e);
		if (accum)
			cnn_free(scratch, x->count * sizeof(float));
	}
	cudnnConvolutionBwdDataAlgo_t da = (cudnnConvolutionBwdDataAlgo_t)e->ch[1].algo;
	CUDNN_CHECK(cudnnSetConvolutionMathType(o->cdesc, e->ch[1].math));
	CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(nt->dnn,
		o->wdesc, y->desc, o->cdesc, x->desc, da, &ws));
	wsp = cnn_alloc(ws);
	CUDNN_CHECK(cudnnConvolutionBackwardData(nt->dnn, &cnn_one, o->wdesc,
		p->w, y->desc, y->grad, o->cdesc, da, wsp, ws,
		accum ? &cnn_one : &cnn_zero, x->desc, dx));
	cnn_free(wsp, ws);
}

static void cnn_fc_bwd(struct cnn_net *nt, struct cnn_op *o,
		       struct cnn_value *x, struct cnn_value *y)
{
	int n = x->n, kf = x->c * x->h * x->w, m = y->c;
	struct cnn_param *pw = &nt->params[o->pw], *pb = &nt->params[o->pb];
	pw->g = cnn_alloc(pw->count * sizeof(float));
	pb->g = cnn_alloc(pb->count * sizeof(float));
	/* dW[m][k] = sum_n dY[n][m] X[n][k]: column-major dW^T = X^T dY. */
	CUBLAS_CHECK(cublasSgemm(nt->blas, CUBLAS_OP_N, CUBLAS_OP_T, kf, m, n,
				 &cnn_one, x->act, kf, y->grad, m, &cnn_zero,
				 pw->g, kf));
	CUDA_CHECK(cnn_k_bias_bwd(y->grad, pb->g, n, m));
	if (o->in0 == 0)
		return;
	int accum;
	float *dx = cnn_grad_target(nt, o->in0, &accum);
	/* dX[n][k] = sum_m dY[n][m] W[m][k]: column-major dX^T = W^T dY^T. */
	CUBLAS_CHECK(cublasSgemm(nt->blas, CUBLAS_OP_N, CUBLAS_OP_N, kf, n, m,
				 &cnn_one, pw->w, kf, y->grad, m,
				 accum ? &cnn_one : &cnn_zero, dx, kf));
}

/* The backward pass in reverse op order; the last value's gradient (the
 * loss gradient of the logits) must be set. */
void cnn_backward(struct cnn_net *nt)
{
	char label[96];
	int accum;
	for (int oi = nt->nops - 1; oi >= 0; oi--) {
		struct cnn_op *o = &nt->ops[oi];
		struct cnn_value *x = &nt->vals[o->in0];
		struct cnn_value *y = &nt->vals[o->out];
		if (!y->grad)
			cnn_fail("internal: %s has no output gradient", o->name);
		snprintf(label, sizeof(label), "%s.bwd", o->name);
		nvtxRangePushA(label);
		switch (o->kind) {
		case CNN_OP_CONV:
			cnn_conv_bwd(nt, o, x, y);
			break;
		case CNN_OP_BN: {
			struct cnn_param *g = &nt->params[o->pw], *b = &nt->params[o->pb];
			g->g = cnn_alloc(g->count * sizeof(float));
			b->g = cnn_alloc(b->count * sizeof(float));
			float *dx = cnn_grad_target(nt, o->in0, &accum);
			CUDNN_CHECK(cudnnBatchNormalizationBackward(nt->dnn,
				CUDNN_BATCHNORM_SPATIAL, &cnn_one,
				accum ? &cnn_one : &cnn_zero, &cnn_one, &cnn_zero,
				x->desc, x->act, y->desc, y->grad, x->desc, dx,
				o->bndesc, g->w, g->g, b->g, CNN_BN_EPS, o->smean,
				o->sinv));
			cnn_free(o->smean, (size_t)x->c * sizeof(float));
			cnn_free(o->sinv, (size_t)x->c * sizeof(float));
			o->smean = o->sinv = NULL;
			break;
		}
		case CNN_OP_RELU: {
			float *dx = cnn_grad_target(nt, o->in0, &accum);
			CUDNN_CHECK(cudnnActivationBackward(nt->dnn, o->adesc,
				&cnn_one, y->desc, y->act, y->desc, y->grad,
				y->desc, y->act, accum ? &cnn_one : &cnn_zero,
				x->desc, dx));
			break;
		}
		case CNN_OP_MAXPOOL: {
			float *dx = cnn_grad_target(nt, o->in0, &accum);
			CUDNN_CHECK(cudnnPoolingBackward(nt->dnn, o->pdesc,
				&cnn_one, y->desc, y->act, y->desc, y->grad,
				x->desc, x->act, accum ? &cnn_one : &cnn_zero,
				x->desc, dx));
			break;
		}
		case CNN_OP_ADD: {
			/* The second input gets a copy; the first takes over the
			 * output's buffer when it has none yet, as autograd
			 * passes an add's gradient through. */
			float *db = cnn_grad_target(nt, o->in1, &accum);
			CUDA_CHECK(cnn_k_accum(db, y->grad, y->count, accum));
			if (!x->grad) {
				x->grad = y->grad;
				y->grad = NULL;
			} else {
				CUDA_CHECK(cnn_k_accum(x->grad, y->grad, y->count, 1));
			}
			break;
		}
		case CNN_OP_GAP: {
			float *dx = cnn_grad_target(nt, o->in0, &accum);
			CUDA_CHECK(cnn_k_gap_bwd(y->grad, dx, x->n * x->c,
						 x->h * x->w, accum));
			break;
		}
		case CNN_OP_FC:
			cnn_fc_bwd(nt, o, x, y);
			break;
		}
		cnn_free(y->grad, y->count * sizeof(float));
		y->grad = NULL;
		int vs[3] = { o->in0, o->in1, o->out };
		for (int j = 0; j < 3; j++)
			if (vs[j] >= 0 && nt->vals[vs[j]].first_bwd == oi &&
			    nt->vals[vs[j]].act)
				cnn_release_act(nt, vs[j]);
		nvtxRangePop();
	}
}

/* SGD with momentum over every parameter; frees each weight gradient. */
void cnn_optimizer(struct cnn_net *nt)
{
	for (int i = 0; i < nt->nparams; i++) {
		struct cnn_param *p = &nt->params[i];
		if (!p->g)
			continue;
		int first = p->m == NULL;
		if (first)
			p->m = cnn_alloc(p->count * sizeof(float));
		CUDA_CHECK(cnn_k_sgd(p->w, p->m, p->g, p->count, nt->lr,
				     nt->momentum, nt->wd, first));
		cnn_free(p->g, p->count * sizeof(float));
		p->g = NULL;
		p->steps++;
	}
}

static const char *const cnn_fwd_names[] = { "implicit_gemm",
	"implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
	"winograd", "winograd_nonfused" };
static const char *const cnn_bwdd_names[] = { "algo_0", "algo_1", "fft",
	"fft_tiling", "winograd", "winograd_nonfused" };
static const char *const cnn_bwdf_names[] = { "algo_0", "algo_1", "fft",
	"algo_3", "winograd", "winograd_nonfused", "fft_tiling" };

static const char *cnn_algo_name(int dir, int a)
{
	static const char *const *tab[3] = { cnn_fwd_names, cnn_bwdd_names,
					     cnn_bwdf_names };
	static const int len[3] = { 8, 6, 7 };
	if (a < 0 || a >= len[dir])
		return "?";
	return tab[dir][a];
}

/* One line per convolution: input shape, then algorithm and workspace bytes
 * for forward, backward-data and backward-filter. */
void cnn_print_algos(const struct cnn_net *nt, FILE *out)
{
	static const char *const mode[] = { "fastest", "heuristic", "min-workspace" };
	fprintf(out, "cnn: algorithms (%s, workspace limit %zu MiB): layer in(NxCxHxW) out_c k/s fwd ws bwd_data ws bwd_filter ws\n",
		mode[nt->mode], nt->ws_limit >> 20);
	for (int i = 0; i < nt->nops; i++) {
		const struct cnn_op *o = &nt->ops[i];
		if (o->kind != CNN_OP_CONV)
			continue;
		const struct cnn_conv_entry *e = &nt->entries[o->entry];
		const struct cnn_value *x = &nt->vals[o->in0];
		fprintf(out, "cnn: algo %-22s %dx%dx%dx%d %d %d/%d", o->name, x->n,
			x->c, x->h, x->w, e->key.k, o->k, o->stride);
		for (int d = 0; d < 3; d++) {
			if (e->have[d])
				fprintf(out, " %s%s %zu", cnn_algo_name(d, e->ch[d].algo),
					e->ch[d].math == CUDNN_DEFAULT_MATH ? "" : "+tc",
					e->ch[d].ws);
			else
				fprintf(out, " - 0");
		}
		fputc('\n', out);
	}
}

/* Free everything still held (weights, optimizer state, running stats,
 * descriptors, handles). */
void cnn_net_destroy(struct cnn_net *nt)
{
	for (int i = 0; i < nt->nparams; i++) {
		struct cnn_param *p = &nt->params[i];
		cnn_free(p->w, p->count * sizeof(float));
		cnn_free(p->m, p->count * sizeof(float));
		cnn_free(p->g, p->count * sizeof(float));
	}
	for (int i = 0; i < nt->nops; i++) {
		struct cnn_op *o = &nt->ops[i];
		if (o->kind == CNN_OP_BN) {
			size_t b = (size_t)nt->vals[o->in0].c * sizeof(float);
			cnn_free(o->rmean, b);
			cnn_free(o->rvar, b);
			cudnnDestroyTensorDescriptor(o->bndesc);
		}
		if (o->wdesc)
			cudnnDestroyFilterDescriptor(o->wdesc);
		if (o->cdesc)
			cudnnDestroyConvolutionDescriptor(o->cdesc);
		if (o->pdesc)
			cudnnDestroyPoolingDescriptor(o->pdesc);
		if (o->adesc)
			cudnnDestroyActivationDescriptor(o->adesc);
	}
	for (int i = 0; i < nt->nvals; i++) {
		cnn_free(nt->vals[i].act, nt->vals[i].count * sizeof(float));
		cnn_free(nt->vals[i].grad, nt->vals[i].count * sizeof(float));
		cudnnDestroyTensorDescriptor(nt->vals[i].desc);
	}
	cublasDestroy(nt->blas);
	cudnnDestroy(nt->dnn);
	free(nt->vals);
	free(nt->ops);
	free(nt->params);
	free(nt->entries);
	memset(nt, 0, sizeof(*nt));
}
