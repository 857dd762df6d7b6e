/*
 * timing_merge.c: `run --requests`: a caching-on capture's timeline with
 * the request stream of a no-caching capture of the same program
 * (docs/timing.md, "The other direction").
 *
 * A caching-on capture shows the caching allocator's segments, not the
 * program's requests: in its steady steps it makes no cudaMalloc at all,
 * so the no-caching what-if has nothing to charge. The requests of the
 * same program are in a no-caching capture of it. This writes a trace
 * with every record of the caching capture C except its 'a'/'f' (and 'g')
 * records, plus every 'a'/'f' of the no-caching capture N, placed on C's
 * host timeline by launch: a request made in N's step k after its j-th
 * kernel launch (cudaLaunchKernel, cuLaunchKernel, ...) goes right after
 * the return of C's j-th launch of step k (steps: the "step N" NVTX
 * ranges). Requests before N's first step go just before C's first step;
 * after its last (or beyond C's launches) to the end of that step in C.
 * Kernel links are dropped (their allocation ids belong to one trace).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"
#include "../base/vec.h"
#include "../traces/trace_xform.h"

struct mrec {
	struct trace_rec r;
	int src;                      /* 0: C, 1: N */
	uint64_t ord;                 /* file order, for a stable sort */
};

struct side {
	struct trace_reader *rd;
	struct trace_rec *rec;
	size_t n, cap;
	uint64_t *step_start, *step_end; /* by step number */
	size_t nsteps, cap_ss, cap_se;
};

static int is_launch(const char *n)
{
	return n && strstr(n, "Launch") && n[0] == 'c';
}

static int load(struct side *s, const char *path, char *err, size_t errlen)
{
	s->rd = trace_reader_start(path, err, errlen);
	if (!s->rd)
		return -1;
	struct trace_rec r;
	int rc;
	while ((rc = trace_reader_next(s->rd, &r)) == TRACE_OK) {
		if (r.type == TREC_KERNEL) {
			r.u.kernel.nlinks = 0;
			r.u.kernel.links = NULL;
		}
		if (VEC_RESERVE(s->rec, s->cap, s->n + 1, 4096) < 0)
			goto nomem;
		s->rec[s->n++] = r;
		uint64_t k;
		if (r.type == TREC_RANGE &&
		    trace_step_number(trace_reader_string(s->rd, r.u.range.name), &k) && k < 100000) {
			size_t need = (size_t)k + 1;
			if (VEC_RESERVE(s->step_start, s->cap_ss, need, 64) < 0 ||
			    VEC_RESERVE(s->step_end, s->cap_se, need, 64) < 0)
				goto nomem;
			for (size_t i = s->nsteps; i < need; i++)
				s->step_start[i] = s->step_end[i] = 0;
			if (need > s->nsteps)
				s->nsteps = need;
			s->step_start[k] = r.start;
			s->step_end[k] = r.end;
		}
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(s->rd));
		return -1;
	}
	return 0;
nomem:
	snprintf(err, errlen, "%s: out of memory", path);
	return -1;
}

static void side_free(struct side *s)
{
	if (s->rd)
		trace_reader_close(s->rd);
	free(s->rec);
	free(s->step_start);
	free(s->step_end);
}

/* The step of time T on S (-1 before the first, nsteps after the last). */
static long step_of(const struct side *s, uint64_t t)
{
	if (!s->nsteps || t < s->step_start[0])
		return -1;
	for (size_t k = 0; k < s->nsteps; k++)
		if (t >= s->step_start[k] && t <= s->step_end[k])
			return (long)k;
	for (size_t k = s->nsteps; k-- > 0;)
		if (t > s->step_end[k])
			return k + 1 < s->nsteps ? (long)k : (long)s->nsteps;
	return -1;
}

static int cmp_mrec(const void *a, const void *b)
{
	const struct mrec *x = a, *y = b;
	if (x->r.start != y->r.start)
		return x->r.start < y->r.start ? -1 : 1;
	return x->ord < y->ord ? -1 : x->ord > y->ord;
}

int timing_merge_requests(const char *cap_path, const char *req_path, const char *out_path,
			  char *err, size_t errlen)
{
	struct side c = {0}, n = {0};
	struct mrec *out = NULL;
	uint64_t *claunch = NULL;     /* C's launch return times, all steps in order */
	size_t *cfirst = NULL;        /* per C step: index of its first launch in claunch */
	size_t ncl = 0, capcl = 0;
	struct trace_writer *w = NULL;
	struct trace_strmap sm[2];    /* C's and N's strings as the output's */
	int ret = -1;
	memset(sm, 0, sizeof sm);
	if (load(&c, cap_path, err, errlen) < 0 || load(&n, req_path, err, errlen) < 0)
		goto out;
	if (!c.nsteps || !n.nsteps) {
		snprintf(err, errlen, "%s: no \"step N\" NVTX ranges to align the requests on",
			 !c.nsteps ? cap_path : req_path);
		goto out;
	}
	cfirst = calloc(c.nsteps + 1, sizeof *cfirst);
	out = malloc((c.n + n.n) * sizeof *out);
	if (!cfirst || !out)
		goto nomem;
	/* C's launches by step */
	{
		size_t k = 0;
		for (size_t i = 0; i < c.n; i++) {
			const struct trace_rec *r = &c.rec[i];
			if (r->type != TREC_API || !is_launch(trace_reader_string(c.rd, r->u.api.name)))
				continue;
			long s = step_of(&c, r->start);
			if (s < 0 || s >= (long)c.nsteps)
				continue;
			while (k <= (size_t)s)
				cfirst[k++] = ncl;
			if (VEC_RESERVE(claunch, capcl, ncl + 1, 4096) < 0)
				goto nomem;
			claunch[ncl++] = r->end;
		}
		while (k <= c.nsteps)
			cfirst[k++] = ncl;
	}
	size_t no = 0;
	for (size_t i = 0; i < c.n; i++) {
		enum trace_rec_type t = c.rec[i].type;
		if (t == TREC_ALLOC || t == TREC_FREE || t == TREC_SEGMENT)
			continue;
		out[no].r = c.rec[i];
		out[no].src = 0;
		out[no].ord = no;
		no++;
	}
	/* N's requests, by (step, launches before them in that step) */
	{
		long cur = -2;
		size_t j = 0;
		uint64_t last = 0;
		for (size_t i = 0; i < n.n; i++) {
			const struct trace_rec *r = &n.rec[i];
			long s = step_of(&n, r->start);
			if (s != cur) {
				cur = s;
				j = 0;
			}
			if (r->type == TREC_API && is_launch(trace_reader_string(n.rd, r->u.api.name))) {
				j++;
				continue;
			}
			if (r->type != TREC_ALLOC && r->type != TREC_FREE)
				continue;
			uint64_t t;
			if (s < 0)
				t = c.step_start[0];
			else if (s >= (long)c.nsteps)
				t = c.rec[c.n - 1].start;
			else if (j == 0)
				t = c.step_start[s];
			else if (j <= cfirst[s + 1] - cfirst[s])
				t = claunch[cfirst[s] + j - 1];
			else
				t = c.step_end[s];
			/* launches of two host threads (autograd's and the main
			 * one) may return out of order: keep the requests' order */
			if (t < last)
				t = last;
			last = t;
			out[no].r = *r;
			out[no].r.start = out[no].r.end = t;
			out[no].r.u.mem.corr = 0;
			out[no].src = 1;
			out[no].ord = no;
			no++;
		}
	}
	qsort(out, no, sizeof *out, cmp_mrec);
	w = trace_writer_open(out_path, TRACE_W_ATOMIC, err, errlen);
	if (!w)
		goto out;
	{
		struct trace_header h = *trace_reader_header(c.rd);
		size_t nl = h.nlabels;
		struct trace_label *lab = malloc((nl + 1) * sizeof *lab);
		if (!lab)
			goto nomem;
		memcpy(lab, h.labels, nl * sizeof *lab);
		lab[nl].key = (char *)"requests_from";
		lab[nl].value = (char *)req_path;
		h.labels = lab;
		h.nlabels = nl + 1;
		int rc = trace_writer_header(w, &h);
		free(lab);
		if (rc < 0) {
			snprintf(err, errlen, "%s: cannot write the header", out_path);
			goto out;
		}
	}
	trace_strmap_init(&sm[0], c.rd, w);
	trace_strmap_init(&sm[1], n.rd, w);
	for (size_t i = 0; i < no; i++) {
		struct trace_rec r = out[i].r;
		if (trace_strmap_rec(&sm[out[i].src ? 1 : 0], &r) < 0)
			goto nomem;
		if (trace_writer_record(w, &r) < 0) {
			snprintf(err, errlen, "%s: write failed", out_path);
			goto out;
		}
	}
	if (trace_writer_close(&w, 1, 0, err, errlen) < 0)
		goto out;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "run --requests: out of memory");
out:
	if (w)
		trace_writer_abort(w);
	trace_strmap_free(&sm[0]);
	trace_strmap_free(&sm[1]);
	free(out);
	free(claunch);
	free(cfirst);
	side_free(&c);
	side_free(&n);
	return ret;
}
