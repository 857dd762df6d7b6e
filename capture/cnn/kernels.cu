/*
 * kernels.cu: the CNN workload's own kernels (see kernels.h). They are kept
 * simple on purpose: the workload exists to produce a realistic allocation
 * stream, and these kernels are a small part of a step's time.
 */
#include <math.h>
#include "kernels.h"

#define CNN_THREADS 256

static unsigned int cnn_blocks(size_t count)
{
	size_t b = (count + CNN_THREADS - 1) / CNN_THREADS;
	return (unsigned int)(b > 65535u * 8u ? 65535u * 8u : (b ? b : 1));
}

/* One thread per sample: class counts are small (tens to a thousand). */
__global__ void k_softmax_xent(const float *logits, const int *labels, int n,
			       int classes, float scale, float *loss,
			       float *dlogits)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const float *z = logits + (size_t)i * classes;
	float *d = dlogits + (size_t)i * classes;
	float mx = z[0];
	for (int c = 1; c < classes; c++)
		mx = fmaxf(mx, z[c]);
	float sum = 0.0f;
	for (int c = 0; c < classes; c++)
		sum += expf(z[c] - mx);
	int y = labels[i];
	if (y < 0 || y >= classes)
		y = 0;
	float lse = logf(sum) + mx;
	loss[i] = lse - z[y];
	for (int c = 0; c < classes; c++) {
		float p = expf(z[c] - lse);
		d[c] = (p - (c == y ? 1.0f : 0.0f)) * scale;
	}
}

__global__ void k_sgd(float *w, float *mom, const float *grad, size_t count,
		      float lr, float momentum, float wd, int first)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	     i < count; i += (size_t)gridDim.x * blockDim.x) {
		float g = grad[i] + wd * w[i];
		float m = first ? g : momentum * mom[i] + g;
		mom[i] = m;
		w[i] -= lr * m;
	}
}

__global__ void k_add(const float *a, const float *b, float *y, size_t count)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	     i < count; i += (size_t)gridDim.x * blockDim.x)
		y[i] = a[i] + b[i];
}

__global__ void k_accum(float *dst, const float *src, size_t count, int accum)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	     i < count; i += (size_t)gridDim.x * blockDim.x)
		dst[i] = accum ? dst[i] + src[i] : src[i];
}

/* One block per plane: a shared-memory tree sum. */
__global__ void k_gap_fwd(const float *x, float *y, int hw)
{
	__shared__ float part[CNN_THREADS];
	const float *p = x + (size_t)blockIdx.x * hw;
	float s = 0.0f;
	for (int i = threadIdx.x; i < hw; i += blockDim.x)
		s += p[i];
	part[threadIdx.x] = s;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k)
			part[threadIdx.x] += part[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		y[blockIdx.x] = part[0] / (float)hw;
}

__global__ void k_gap_bwd(const float *dy, float *dx, size_t total, int hw,
			  int accum)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	     i < total; i += (size_t)gridDim.x * blockDim.x) {
		float g = dy[i / hw] / (float)hw;
		dx[i] = accum ? dx[i] + g : g;
	}
}

__global__ void k_bias_fwd(float *y, const float *b, size_t total, int m)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	     i < total; i += (size_t)gridDim.x * blockDim.x)
		y[i] += b[i % m];
}

__global__ void k_bias_bwd(const float *dy, float *db, int n, int m)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= m)
		return;
	float s = 0.0f;
	for (int i = 0; i < n; i++)
		s += dy[(size_t)i * m + j];
	db[j] = s;
}

extern "C" cudaError_t cnn_k_softmax_xent(const float *logits, const int *labels,
					  int n, int classes, float scale,
					  float *loss, float *dlogits)
{
	k_softmax_xent<<<(n + 127) / 128, 128>>>(logits, labels, n, classes,
						  scale, loss, dlogits);
	return cudaGetLastError();
}

extern "C" cudaError_t cnn_k_sgd(float *w, float *mom, const float *grad,
				 size_t count, float lr, float momentum,
				 float wd, int first)
{
	k_sgd<<<cnn_blocks(count), CNN_THREADS>>>(w, mom, grad, count, lr,
						 momentum, wd, first);
	return cudaGetLastError();
}

extern "C" cudaError_t cnn_k_add(const float *a, const float *b, float *y,
				 size_t count)
{
	k_add<<<cnn_blocks(count), CNN_THREADS>>>(a, b, y, count);
	return cudaGetLastError();
}

extern "C" cudaError_t cnn_k_accum(float *dst, const float *src, size_t count,
				   int accum)
{
	k_accum<<<cnn_blocks(count), CNN_THREADS>>>(dst, src, count, accum);
	return cudaGetLastError();
}

extern "C" cudaError_t cnn_k_gap_fwd(const float *x, float *y, int nc, int hw)
{
	k_gap_fwd<<<nc, CNN_THREADS>>>(x, y, hw);
	return cudaGetLastError();
}

extern "C" cudaError_t cnn_k_gap_bwd(const float *dy, float *dx, int nc, int hw,
				     int accum)
{
	size_t total = (size_t)nc * hw;
	k_gap_bwd<<<cnn_blocks(total), CNN_THREADS>>>(dy, dx, total, hw, accum);
	return cudaGetLastError();
}

extern "C" cudaError_t cnn_k_bias_fwd(float *y, const float *b, int n, int m)
{
	size_t total = (size_t)n * m;
	k_bias_fwd<<<cnn_blocks(total), CNN_THREADS>>>(y, b, total, m);
	return cudaGetLastError();
}

extern "C" cudaError_t cnn_k_bias_bwd(const float *dy, float *db, int n, int m)
{
	k_bias_bwd<<<(m + 127) / 128, 128>>>(dy, db, n, m);
	return cudaGetLastError();
}
