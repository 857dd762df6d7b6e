/*
 * zero_grad.c: where a training step frees the previous step's gradients
 * (see zero_grad.h).
 *
 * `optimizer.zero_grad(set_to_none=True)` drops the .grad tensors; with the
 * caching allocator off (the recipe's captures) each is a cudaFree. A loop
 * that calls it between the forward pass and backward() keeps the
 * gradients alive through the forward pass, which moves the peak of a
 * model whose peak is at the end of its forward (ViT-B/16: +264 MiB at
 * batch 32); one that calls it first does not. Which allocations are the
 * gradients is not in the trace, but when they go is: the frees after the
 * "backward" range opens and before its first kernel is launched (the
 * backward pass has not started; nothing else is freed there).
 */
#include "zero_grad.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"
#include "../base/vec.h"
#include "../traces/trace.h"
#include "../traces/trace_xform.h"
#include "compile_int.h"

struct zg_free {
	uint64_t step_start;         /* where it goes */
	uint64_t ordinal;            /* which free record of the trace it is */
	struct trace_mem mem;        /* the free's fields */
};

struct zg {
	struct compile_range *steps, *bwd;
	size_t nsteps, cap_steps, nbwd, cap_bwd;
	uint64_t *first_launch;      /* per backward: its first kernel launch */
	struct zg_free *moved;       /* in time order */
	size_t nmoved, cap_moved;
};

#define PUSH(arr, n, cap, val) \
	(VEC_RESERVE(arr, cap, (n) + 1, 64) < 0 ? -1 : ((arr)[(n)++] = (val), 0))

/* The backward whose opening frees hold T (after it opens, before its
 * first launch), or Z->nbwd. */
static size_t opening_of(const struct zg *z, uint64_t t)
{
	uint32_t b = compile_range_at(z->bwd, z->nbwd, t);
	return b != UINT32_MAX && t < z->first_launch[b] ? b : z->nbwd;
}

/* Pass 1a: the step and backward ranges. */
static int zg_ranges(struct zg *z, struct trace_reader *rd, char *err, size_t errlen)
{
	const struct compile_range_want w[] = {
		{"step [0-9]*", 1, &z->steps, &z->nsteps, &z->cap_steps},
		{"backward", 0, &z->bwd, &z->nbwd, &z->cap_bwd}};
	if (compile_ranges_read(rd, w, 2, err, errlen) < 0)
		return -1;
	if (!z->nsteps || !z->nbwd) {
		snprintf(err, errlen, "%s: no NVTX ranges \"step N\" and \"backward\": capture a "
			 "training step with them (capture/torch/recipe.sh does)", trace_reader_path(rd));
		return -1;
	}
	z->first_launch = malloc(z->nbwd * sizeof *z->first_launch);
	if (!z->first_launch)
		goto nomem;
	for (size_t b = 0; b < z->nbwd; b++)
		z->first_launch[b] = z->bwd[b].end;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Pass 1b: each backward's first launch (a kernel's, copy's or memset's
 * API call: it comes before the GPU record, so the ranges must be known). */
static int zg_launches(struct zg *z, struct trace_reader *rd, char *err, size_t errlen)
{
	struct trace_launches corr;
	struct trace_rec rec;
	int st, ret = -1;
	trace_launches_init(&corr);
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		if (rec.type == TREC_API && trace_launches_note(&corr, &rec) < 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		uint64_t c;
		if (rec.type == TREC_KERNEL)
			c = rec.u.kernel.corr;
		else if (rec.type == TREC_MEMCPY || rec.type == TREC_MEMSET)
			c = rec.u.copy.corr;
		else
			continue;
		uint64_t launch = trace_launches_take(&corr, c, rec.start);
		uint32_t b = compile_range_at(z->bwd, z->nbwd, launch);
		if (b != UINT32_MAX && launch < z->first_launch[b])
			z->first_launch[b] = launch;
	}
	if (st < 0)
		snprintf(err, errlen, "%s", trace_reader_error(rd));
	else
		ret = 0;
out:
	trace_launches_free(&corr);
	return ret;
}

/* Pass 2: the frees that move, with their step's start. */
static int zg_frees(struct zg *z, struct trace_reader *rd, struct zero_grad_report *r,
		    char *err, size_t errlen)
{
	struct trace_rec rec;
	struct u64map bytes_of, made_at;  /* live allocations by address */
	size_t last_b = (size_t)-1;
	uint64_t bytes, made, ordinal = 0;
	int st, ret = -1;
	u64map_init(&bytes_of);
	u64map_init(&made_at);
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		if (rec.type == TREC_ALLOC && rec.u.mem.addr != U64MAP_EMPTY &&
		    (u64map_put(&bytes_of, rec.u.mem.addr, rec.u.mem.bytes) < 0 ||
		     u64map_put(&made_at, rec.u.mem.addr, rec.start) < 0))
			goto nomem;
		if (rec.type != TREC_FREE)
			continue;
		uint64_t this = ordinal++;
		int known = u64map_del(&bytes_of, rec.u.mem.addr, &bytes) &&
			    u64map_del(&made_at, rec.u.mem.addr, &made);
		size_t b = opening_of(z, rec.start);
		if (!known || b == z->nbwd)
			continue;        /* not at a backward's opening */
		uint32_t s = compile_range_at(z->steps, z->nsteps, z->bwd[b].start);
		if (s == UINT32_MAX)
			continue;        /* a backward outside any step */
		if (made >= z->steps[s].start)
			continue;        /* made in this step: not a previous gradient */
		struct zg_free f = {z->steps[s].start, this, rec.u.mem};
		if (PUSH(z->moved, z->nmoved, z->cap_moved, f) < 0)
			goto nomem;
		r->frees_moved++;
		r->bytes_moved += bytes;
		r->steps += b != last_b;
		last_b = b;
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	u64map_free(&bytes_of);
	u64map_free(&made_at);
	return ret;
}

/* Pass 3: write, the moved frees right after their step opens. */
static int zg_write(struct zg *z, struct trace_reader *rd, const char *out, char *err,
		    size_t errlen)
{
	const struct trace_label zl = {"zero_grad", "before-forward"};
	struct trace_writer *w = NULL;
	struct trace_strmap sm;
	struct trace_rec rec;
	size_t next = 0, skip = 0;   /* the next moved free to write, to drop */
	uint64_t ordinal = 0;
	int st, ret = -1;

	w = trace_xform_open(out, rd, &zl, 1, &sm, err, errlen);
	if (!w)
		return -1;
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		/* moved frees whose step opened before this record go first */
		while (next < z->nmoved && z->moved[next].step_start < rec.start) {
			struct trace_rec f;
			memset(&f, 0, sizeof f);
			f.type = TREC_FREE;
			f.start = f.end = z->moved[next].step_start;
			f.u.mem = z->moved[next++].mem;
			if (trace_strmap_rec(&sm, &f) < 0)
				goto nomem;
			if (trace_writer_record(w, &f) < 0)
				goto werr;
		}
		if (rec.type == TREC_FREE) {
			uint64_t o = ordinal++;
			if (skip < z->nmoved && z->moved[skip].ordinal == o) {
				skip++;
				continue;        /* written at its step's start */
			}
		}
		if (trace_strmap_rec(&sm, &rec) < 0)
			goto nomem;
		if (trace_writer_record(w, &rec) < 0)
			goto werr;
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	ret = trace_xform_close(&w, rd, err, errlen);
	goto out;
werr:
	snprintf(err, errlen, "%s: writing failed", out);
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	if (w)
		trace_writer_abort(w);
	trace_strmap_free(&sm);
	return ret;
}

int zero_grad_first(const char *in, const char *out, struct zero_grad_report *r, char *err,
		    size_t errlen)
{
	struct zg z;
	struct trace_reader *rd;
	int ret = -1;

	memset(&z, 0, sizeof z);
	memset(r, 0, sizeof *r);
	if (errlen)
		err[0] = 0;
	if (!(rd = trace_reader_start(in, err, errlen)))
		goto out;
	if (zg_ranges(&z, rd, err, errlen) < 0 || compile_refuse_cut_short(rd, in, err, errlen) < 0)
		goto out;
	if (trace_reader_rewind(rd) < 0 || zg_launches(&z, rd, err, errlen) < 0 ||
	    trace_reader_rewind(rd) < 0 || zg_frees(&z, rd, r, err, errlen) < 0 ||
	    trace_reader_rewind(rd) < 0 || zg_write(&z, rd, out, err, errlen) < 0) {
		if (!err[0])
			snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	ret = 0;
out:
	trace_reader_close(rd);
	free(z.steps);
	free(z.bwd);
	free(z.first_launch);
	free(z.moved);
	return ret;
}
