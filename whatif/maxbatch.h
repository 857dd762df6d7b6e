/*
 * maxbatch.h: the largest batch size whose simulated peak fits on the
 * device, and why the next one fails: capacity, fragmentation (free but
 * split), or memory outside the framework's allocator (by library). The
 * `maxbatch` command prints what maxbatch_search() finds.
 *
 * Each candidate batch is synthesised from a fitted model (batch_fit.h)
 * into a temporary trace and replayed with sim_run; the search gallops up
 * from the smallest capture and bisects, which assumes that a batch that
 * does not fit is not followed by one that does (explain batch is there
 * for when it is not).
 */
#ifndef WHATIF_MAXBATCH_H
#define WHATIF_MAXBATCH_H

#include <stddef.h>
#include <stdint.h>

#include "batch_fit.h"

struct alloc_policy;

#define MAXBATCH_MAX_EVALS 128

struct maxbatch_options {
	const struct alloc_policy *policy;
	const char *conf;             /* the policy's knobs; may be NULL */
	uint64_t capacity;            /* device memory */
	double margin;                /* share of CAPACITY kept free, 0 <= margin < 0.9 */
	uint64_t max_batch;           /* search no further; 0 = 65536 */
};

/* One replay of the search. */
struct maxbatch_eval { uint64_t batch; int fits; uint64_t peak_reserved, peak_allocated; };

struct maxbatch_result {
	uint64_t usable;              /* capacity less the margin: what must fit */
	uint64_t max_batch;           /* the largest batch that fits; 0: none */
	uint64_t peak_reserved, peak_allocated;  /* its replay's peaks (0 when none) */
	uint64_t workspace_retries;   /* its replay's workspaces asked again at half the
				       * size (sim_result.workspace_retries) */
	uint64_t fails_at;            /* the smallest batch that does not; 0: none up to max */
	const char *verdict;          /* "none" (nothing failed), "foreign", "capacity" or
				       * "fragmentation" */
	char detail[1024];            /* the verdict in a sentence, with the figures */
	/* the failing replay's out-of-memory moment (when FAILS_AT) */
	uint64_t request, allocated, reserved;
	int64_t largest_free, cached_free;  /* -1: unknown */
	struct bf_live live;          /* what was live then; LIVE.libs: foreign bytes by library */
	struct maxbatch_eval ev[MAXBATCH_MAX_EVALS];  /* the replays searched, in order */
	size_t nev;
};

/* Search the largest batch of model M that fits (TMPDIR holds the
 * temporary traces). Returns 0 with R filled, or -1 with ERR (a batch that
 * could not be synthesised or replayed is named). Prints nothing. */
int maxbatch_search(const struct bf_model *m, const struct maxbatch_options *o,
		    struct maxbatch_result *r, char *err, size_t errlen);

#endif /* WHATIF_MAXBATCH_H */
