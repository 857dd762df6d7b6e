/*
 * xla_requests.h: XLA's request stream from a JAX capture taken with XLA's
 * platform allocator (XLA_PYTHON_CLIENT_ALLOCATOR=platform), as a replay
 * reads it (docs/policies.md, "bfc": "JAX captures").
 *
 * Such a capture sees every buffer XLA asks for, one device allocation
 * each, but not as XLA asked for it:
 *  - sizes: XLA 0.11's platform allocator maps memory in 2 MiB granules and
 *    CUPTI reports the mapped size, so every request reads as a whole
 *    number of granules (98 of the 107 requests of jax-resnet-b8 read
 *    exactly 2 MiB). Where every request of the capture is a whole number
 *    of granules, each is replayed at the smallest size that maps to its
 *    granule count, n - 2 MiB + 1 B: a lower bound, not a fitted value.
 *  - what is not XLA's: XLA frees every buffer of its own when its client
 *    is destroyed at exit, so a device allocation never freed in the trace
 *    was made outside XLA's allocator (cuDNN/cuBLAS handles, the cuBLAS
 *    workspace, module globals). The replay keeps them beside the policy.
 *
 * Two passes: xla_requests_scan reads the whole trace once (which
 * allocations are never freed, whether every other one is whole granules),
 * then xla_requests_apply rewrites each record of the replay. Host memory
 * (pageable, pinned) is left alone: the engine skips it anyway.
 */
#ifndef TRACES_XLA_REQUESTS_H
#define TRACES_XLA_REQUESTS_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "../base/u64map.h"

#define XLA_GRANULE (2ull << 20)   /* the platform allocator's mapping granule */

struct xla_requests {
	struct u64map outside;     /* allocation ids never freed: outside XLA */
	int granule;               /* every other device request whole granules: lowered */
	/* what the scan found */
	uint64_t kept;             /* device allocations that are XLA's */
	uint64_t outside_n, outside_bytes;
	uint64_t lowered, lowered_bytes;   /* requests lowered (0 unless granule) */
	uint64_t orphans;          /* frees of allocations made before the capture */
};

/* 1 when the labels say the trace is such a capture: workload=jax and
 * alloc=platform (capture/jax/recipe.sh writes both). */
int xla_requests_label(const struct trace_header *h);

/* Read R from where it is to its end (a trace cut short counts as ended)
 * and fill X (initialised here; free with xla_requests_free either way).
 * The caller rewinds R. 0, or -1 with ERR (a bad record, out of memory). */
int xla_requests_scan(struct trace_reader *r, struct xla_requests *x, char *err,
		      size_t errlen);

/* What the replay does with one record of the same trace. */
enum xla_req_verdict {
	XLA_REQ_KEEP = 0,          /* XLA's (bytes lowered when X->granule), or not memory */
	XLA_REQ_OUTSIDE,           /* a device allocation outside XLA's allocator */
};
enum xla_req_verdict xla_requests_apply(const struct xla_requests *x, struct trace_rec *rec);

void xla_requests_free(struct xla_requests *x);

#endif /* TRACES_XLA_REQUESTS_H */
