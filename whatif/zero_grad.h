/*
 * zero_grad.h: a training step with the previous gradients freed at its
 * start instead of after its forward pass (docs/fusion.md, "Where a step
 * frees its gradients").
 */
#ifndef WHATIF_ZERO_GRAD_H
#define WHATIF_ZERO_GRAD_H

#include <stddef.h>
#include <stdint.h>

struct zero_grad_report {
	uint64_t steps;              /* backward ranges that freed something */
	uint64_t frees_moved, bytes_moved;
};

/* Write IN to OUT (atomically) with the frees that open each "backward"
 * range (before its first kernel launch: optimizer.zero_grad(set_to_none=
 * True) called between the forward pass and backward(), as
 * capture/torch/train_torch.py does), of allocations made before that
 * step, moved to the start of its "step N" range: the loop that calls
 * zero_grad first. 0, or -1 with ERR (IN's file and line, or the ranges it
 * lacks). */
int zero_grad_first(const char *in, const char *out, struct zero_grad_report *r, char *err,
		    size_t errlen);

#endif /* WHATIF_ZERO_GRAD_H */
