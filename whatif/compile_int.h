/*
 * compile_int.h: what the torch.compile what-if's files share (compile.c,
 * compile_time.c): kernel classes by name.
 */
#ifndef WHATIF_COMPILE_INT_H
#define WHATIF_COMPILE_INT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Kernel classes, by name (mangled, as CUPTI reports it); the first
 * matching row wins, so the specific rows come first.
 *  - LIBRARY: convolutions and GEMMs (cuDNN, cuBLAS, CUTLASS, ATen's
 *    depthwise convolution, attention): Inductor calls them as extern
 *    kernels; a tensor they read in backward must exist there.
 *  - NORM: batch/layer norm; Inductor generates these (reductions), so they
 *    read recomputed values, but their outputs are not recomputed.
 *  - RANDOM: random numbers are never recomputed.
 *  - CAT: concatenations (DenseNet's): kept, as measured (a cat output that
 *    feeds a batch norm stays saved in compiled DenseNet-121).
 *  - LAYOUT: cuDNN's NCHW <-> NHWC transforms around a convolution: a
 *    tensor they read is a convolution's input. Inductor keeps the
 *    activations of convolutional graphs channels-last (its layout
 *    optimisation), so the compiled program runs none of them.
 *  - DWCONV: ATen's own depthwise convolution (NCHW, slow): a library
 *    kernel for the partitioner (its backward reads its input), but the
 *    compiled program runs cuDNN's channels-last one, memory-bound.
 *  - POOL: max pooling, forward and backward. Inductor generates both and
 *    keeps, instead of eager's int64 indices, int8 offsets into the window
 *    (its low-memory max pool): a saved index tensor shrinks to an eighth.
 *  - POINTWISE: ATen's element-wise kernels: recomputable.
 * Anything else (reductions, softmax, loss, pooling) is OTHER.
 */
enum kclass { K_OTHER = 0, K_LIBRARY, K_LAYOUT, K_DWCONV, K_NORM, K_RANDOM, K_CAT, K_POOL,
	      K_POINTWISE };
/* The class of a kernel NAME (NULL: K_OTHER). */
enum kclass compile_kernel_class(const char *name);

struct trace_reader;

/* compile_kernel_class of a reader's string ids, each looked up once. */
struct compile_kclass_cache {
	uint8_t *cls;                /* per string id: 1 + class, 0 not yet */
	size_t n, cap;
};
/* *OUT = the class of RD's string SID. 0, or -1 out of memory. */
int compile_kclass_cached(struct compile_kclass_cache *c, const struct trace_reader *rd,
			  uint32_t sid, enum kclass *out);
void compile_kclass_cache_free(struct compile_kclass_cache *c);

/* An NVTX range in time. */
struct compile_range { uint64_t start, end; };
/* Index of the range of V (sorted by start, disjoint) containing T, or
 * UINT32_MAX. */
uint32_t compile_range_at(const struct compile_range *v, size_t n, uint64_t t);

/* Where the ranges named NAME go (with GLOB set: whose name NAME matches
 * as an fnmatch pattern). */
struct compile_range_want {
	const char *name;
	int glob;
	struct compile_range **v;
	size_t *n, *cap;
};
/* Read RD to its end, appending each range to every want it answers (in
 * start order). 0, or -1 with ERR (a bad record, out of
 * memory); the caller rewinds. */
int compile_ranges_read(struct trace_reader *rd, const struct compile_range_want *w, size_t nw,
			char *err, size_t errlen);

/* -1 with ERR naming IN when RD, read to its end, has no trailer (a trace
 * cut short: the what-if never works on a trace that lost records); else 0. */
int compile_refuse_cut_short(const struct trace_reader *rd, const char *in, char *err,
			     size_t errlen);

#endif /* WHATIF_COMPILE_INT_H */
