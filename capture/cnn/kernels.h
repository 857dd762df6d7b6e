/*
 * kernels.h: the few CUDA kernels of the CNN workload that cuDNN and cuBLAS
 * do not provide (loss, optimizer, residual add, global average pooling, FC
 * bias), callable from C. Each launcher runs on the default stream and
 * returns the launch status so callers check it like any CUDA call.
 */
#ifndef CNN_KERNELS_H
#define CNN_KERNELS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax cross-entropy over N rows of C logits: per-row loss into LOSS and
 * the gradient (softmax - onehot) * SCALE into DLOGITS. */
cudaError_t cnn_k_softmax_xent(const float *logits, const int *labels, int n,
			       int classes, float scale, float *loss,
			       float *dlogits);

/* SGD with momentum as torch.optim.SGD does it (buffer starts as the first
 * gradient, weight decay folded into the gradient). */
cudaError_t cnn_k_sgd(float *w, float *mom, const float *grad, size_t count,
		      float lr, float momentum, float wd, int first);

/* Y = A + B elementwise (residual addition). */
cudaError_t cnn_k_add(const float *a, const float *b, float *y, size_t count);

/* DST = SRC (ACCUM 0) or DST += SRC (ACCUM 1): gradient fan-in. */
cudaError_t cnn_k_accum(float *dst, const float *src, size_t count, int accum);

/* Global average pooling over HW for NC planes, and its backward (the
 * gradient spread evenly; ACCUM adds into DX). */
cudaError_t cnn_k_gap_fwd(const float *x, float *y, int nc, int hw);
cudaError_t cnn_k_gap_bwd(const float *dy, float *dx, int nc, int hw,
			  int accum);

/* Row-major Y[N][M] += B[M], and DB[m] = sum over n of DY[n][m]. */
cudaError_t cnn_k_bias_fwd(float *y, const float *b, int n, int m);
cudaError_t cnn_k_bias_bwd(const float *dy, float *db, int n, int m);

#ifdef __cplusplus
}
#endif

#endif /* CNN_KERNELS_H */
