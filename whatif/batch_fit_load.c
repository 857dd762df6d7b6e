/*
 * batch_fit_load.c: the batch-size what-if, stage 1: a capture into memory
 * (batch_fit.h; what the stages share: batch_fit_int.h). The records as
 * read (kernel links in the trace's pool), the strings and the header;
 * derived from them the allocation sites, the record of each site's free,
 * the innermost NVTX range of each allocation, the workspace, search and
 * foreign flags, and the memory events alignment works on.
 */
#include "batch_fit_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"

/* ------------------------------------------------------------- helpers */


static int has_ci(const char *s, const char *needle)
{
	if (!s)
		return 0;
	size_t n = strlen(needle);
	for (; *s; s++)
		if (!strncasecmp(s, needle, n))
			return 1;
	return 0;
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suf);
	return s && a >= b && !strcmp(s + a - b, suf);
}

/* Libraries whose memory does not go through the framework's allocator. */
static int is_foreign_lib(const char *src)
{
	static const char *const libs[] = {"cudnn", "cublas", "cufft", "cusparse", "cusolver",
					   "curand", "nccl", "cutlass", "nvjpeg", NULL};
	for (int i = 0; libs[i]; i++)
		if (has_ci(src, libs[i]))
			return 1;
	return 0;
}


/* ---------------------------------------------------------------- load */

/*
 * NVTX ranges whose start the capture clamped, put back where they were.
 * A range is delivered when it ends (or later); one that arrives after the
 * converter's watermark has passed its start is written with its start
 * raised to the last start written and its duration kept (capture/convert.c),
 * so both its ends are late: the torch captures' "step 0" and its
 * "backward" (and sometimes "forward") start seconds late, and which of
 * step 0's backward allocations fall inside "backward" then depends on
 * timing, so the same allocation is in "backward" at one batch size and in
 * no range at another, and does not align. Such a range is recognised by
 * its start equal to the previous record's (nanosecond ties do not happen
 * otherwise) and by overlapping the next range of its depth (on one thread
 * ranges of one depth follow each other): it is moved back so that it ends
 * where that one starts, no earlier than the end of the previous range of
 * its depth (unless that one is clamped too). Later ranges first, so a run of clamped ranges is repaired
 * against repaired neighbours. RS/RE: per record, the range's start/end.
 */
static void repair_ranges(const struct bf_trace *t, const size_t *ri, size_t nr, uint64_t *rs,
			  uint64_t *re)
{
	for (size_t k = 0; k < nr; k++) {
		rs[ri[k]] = t->rec[ri[k]].start;
		re[ri[k]] = t->rec[ri[k]].end;
	}
	for (size_t k = nr; k-- > 0;) {
		size_t i = ri[k];
		const struct trace_rec *r = &t->rec[i];
		if (i == 0 || t->rec[i - 1].start != r->start)
			continue;
		uint32_t d = r->u.range.depth;
		size_t next = NO_IDX, prev = NO_IDX;
		for (size_t j = k + 1; j < nr && next == NO_IDX; j++)
			if (t->rec[ri[j]].u.range.depth == d)
				next = ri[j];
		for (size_t j = k; j-- > 0 && prev == NO_IDX;)
			if (t->rec[ri[j]].u.range.depth == d)
				prev = ri[j];
		if (next == NO_IDX || rs[next] >= re[i])
			continue; /* no overlap: nothing says it was moved */
		uint64_t shift = re[i] - rs[next];
		uint64_t ns = rs[i] > shift ? rs[i] - shift : 0;
		/* a previous range clamped too is repaired after this one:
		 * its end is still late and bounds nothing */
		int prev_late = prev != NO_IDX && prev > 0 && t->rec[prev - 1].start == t->rec[prev].start;
		if (prev != NO_IDX && !prev_late && ns < re[prev] && re[prev] <= rs[next])
			ns = re[prev];
		rs[i] = ns;
		re[i] = rs[next];
	}
}

/* Sites, frees, NVTX context, workspace and foreign flags, events. */
static int derive(struct bf_trace *t)
{
	struct u64map live;
	size_t *act = NULL, nact = 0, *ri = NULL, nr = 0;
	uint64_t *rs = NULL, *re = NULL;
	int ret = -1;

	u64map_init(&live);
	for (size_t i = 0; i < t->nrec; i++) {
		if (t->rec[i].type == TREC_ALLOC)
			t->nalloc++;
		else if (t->rec[i].type == TREC_KERNEL)
			t->nkern++;
		else if (t->rec[i].type == TREC_RANGE)
			nr++;
	}
	size_t na = t->nalloc ? t->nalloc : 1;
	t->alloc_rec = calloc(na, sizeof *t->alloc_rec);
	t->alloc_range = calloc(na, sizeof *t->alloc_range);
	t->alloc_free_rec = calloc(na, sizeof *t->alloc_free_rec);
	t->alloc_ws = calloc(na, 1);
	t->alloc_search = calloc(na, 1);
	t->alloc_foreign = calloc(na, 1);
	t->free_site = calloc(t->nrec ? t->nrec : 1, sizeof *t->free_site);
	t->ev = calloc(t->nrec ? t->nrec : 1, sizeof *t->ev);
	t->kern = calloc(t->nkern ? t->nkern : 1, sizeof *t->kern);
	act = calloc(nr ? nr : 1, sizeof *act);
	ri = calloc(nr ? nr : 1, sizeof *ri);
	rs = calloc(t->nrec ? t->nrec : 1, sizeof *rs);
	re = calloc(t->nrec ? t->nrec : 1, sizeof *re);
	uint64_t *range_end = calloc(na, sizeof *range_end);
	if (!t->alloc_rec || !t->alloc_range || !t->alloc_free_rec || !t->alloc_ws || !t->alloc_search ||
	    !t->alloc_foreign || !t->free_site || !t->ev || !t->kern || !act || !ri || !rs || !re ||
	    !range_end)
		goto out;
	nr = 0;
	for (size_t i = 0; i < t->nrec; i++)
		if (t->rec[i].type == TREC_RANGE)
			ri[nr++] = i;
	repair_ranges(t, ri, nr, rs, re);
	/* ranges by (repaired) start, then record order: a sweep adds each
	 * range once the records reach its start */
	for (size_t k = 1; k < nr; k++) {
		size_t x = ri[k], j = k;
		while (j > 0 && rs[ri[j - 1]] > rs[x]) {
			ri[j] = ri[j - 1];
			j--;
		}
		ri[j] = x;
	}
	size_t site = 0, nk = 0, next_r = 0;
	for (size_t i = 0; i < t->nrec; i++) {
		const struct trace_rec *r = &t->rec[i];
		t->free_site[i] = NO_IDX;
		if (r->type == TREC_KERNEL) {
			t->kern[nk++] = i;
		} else if (r->type == TREC_ALLOC) {
			/* open every range that has started (one written after
			 * this record at the same time has not); drop every range
			 * that has ended (not only the top: a range written late
			 * can sit above one still open) */
			while (next_r < nr && (rs[ri[next_r]] < r->start ||
					       (rs[ri[next_r]] == r->start && ri[next_r] < i)))
				act[nact++] = ri[next_r++];
			size_t keep = 0;
			for (size_t s = 0; s < nact; s++)
				if (re[act[s]] >= r->start)
					act[keep++] = act[s];
			nact = keep;
			/* innermost = deepest (a capture may write an outer range
			 * after the layer ranges inside it), the latest of a depth */
			size_t in = NO_IDX;
			for (size_t s = 0; s < nact; s++)
				if (in == NO_IDX || t->rec[act[s]].u.range.depth >= t->rec[in].u.range.depth)
					in = act[s];
			t->alloc_rec[site] = i;
			t->alloc_free_rec[site] = NO_IDX;
			if (in != NO_IDX) {
				t->alloc_range[site] = t->rec[in].u.range.name;
				range_end[site] = re[in];
			} else {
				t->alloc_range[site] = TRACE_NO_STRING;
				range_end[site] = 0;
			}
			const char *src = tstr(t, r->u.mem.source);
			t->alloc_foreign[site] = (uint8_t)is_foreign_lib(src);
			if (u64map_put(&live, r->u.mem.addr, site) < 0)
				goto out;
			t->ev[t->nev++] = (struct bf_event){'a', i, site};
			site++;
		} else if (r->type == TREC_FREE) {
			uint64_t s;
			size_t fs = NO_IDX;
			if (u64map_del(&live, r->u.mem.addr, &s) == 1)
				fs = (size_t)s;
			t->free_site[i] = fs;
			if (fs != NO_IDX)
				t->alloc_free_rec[fs] = i;
			t->ev[t->nev++] = (struct bf_event){'f', i, fs};
		}
	}
	for (size_t s = 0; s < t->nalloc; s++) {
		const struct trace_rec *a = &t->rec[t->alloc_rec[s]];
		const char *rname = tstr(t, t->alloc_range[s]);
		const char *src = tstr(t, a->u.mem.source);
		int ws = has_ci(src, "cudnn") || has_ci(src, "cublas");
		if (!ws && rname && (ends_with(rname, ".fwd") || ends_with(rname, ".bwd") ||
				     has_ci(rname, "workspace"))) {
			size_t fr = t->alloc_free_rec[s];
			ws = fr != NO_IDX && t->rec[fr].start <= range_end[s];
		}
		t->alloc_ws[s] = (uint8_t)ws;
	}
	/* the warm-up step: what comes before the first "step 1" range */
	uint64_t steady_at = 0;
	for (size_t i = 0; i < t->nrec && !steady_at; i++)
		if (t->rec[i].type == TREC_RANGE && streq_null(tstr(t, t->rec[i].u.range.name), "step 1"))
			steady_at = t->rec[i].start;
	for (size_t s = 0; s < t->nalloc; s++)
		t->alloc_search[s] = (uint8_t)(t->alloc_ws[s] && t->rec[t->alloc_rec[s]].start < steady_at);
	ret = 0;
out:
	free(range_end);
	free(act);
	free(ri);
	free(rs);
	free(re);
	u64map_free(&live);
	return ret;
}

/* Append IN to T: the record as read, its kernel links into T's pool (the
 * reader's are gone at its next record; the pool moves while it grows, so
 * bf_load points the kernels at it once it is complete). */
static int push_rec(struct bf_trace *t, size_t *cap, size_t *cap_links,
		    const struct trace_rec *in)
{
	if (t->nrec == *cap) {
		size_t nc = *cap ? *cap * 2 : 4096;
		struct trace_rec *n = realloc(t->rec, nc * sizeof *n);
		if (!n)
			return -1;
		t->rec = n;
		*cap = nc;
	}
	struct trace_rec *r = &t->rec[t->nrec++];
	*r = *in;
	if (in->type != TREC_KERNEL)
		return 0;
	r->u.kernel.links = NULL;
	uint32_t n = in->u.kernel.nlinks;
	if (!n)
		return 0;
	if (t->nlinks + n > *cap_links) {
		size_t nc = *cap_links ? *cap_links * 2 : 4096;
		while (nc < t->nlinks + n)
			nc *= 2;
		uint64_t *nl = realloc(t->links, nc * sizeof *nl);
		if (!nl)
			return -1;
		t->links = nl;
		*cap_links = nc;
	}
	memcpy(t->links + t->nlinks, in->u.kernel.links, n * sizeof *t->links);
	t->nlinks += n;
	return 0;
}

/* Point every kernel at its links in T's pool (in record order). */
static void link_kernels(struct bf_trace *t)
{
	size_t off = 0;
	for (size_t i = 0; i < t->nrec; i++) {
		struct trace_kernel *k = &t->rec[i].u.kernel;
		if (t->rec[i].type != TREC_KERNEL || !k->nlinks)
			continue;
		k->links = t->links + off;
		off += k->nlinks;
	}
}

/* Whole trace into memory; see batch_fit.h. */
int bf_load(const char *path, struct bf_trace **out, char *err, size_t errlen)
{
	struct trace_reader *r = NULL;
	struct bf_trace *t = calloc(1, sizeof *t);
	struct trace_rec rec;
	size_t cap = 0, cap_links = 0;
	int ret = -1;

	*out = NULL;
	if (!t || !(t->path = strdup(path))) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	r = trace_reader_start(path, err, errlen);
	if (!r)
		goto out;
	if (trace_header_copy(&t->hdr, trace_reader_header(r)) < 0) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		/* steps run with the capture paused recorded nothing to align */
		if (rec.type == TREC_RANGE && rec.u.range.uncaptured)
			continue;
		if (push_rec(t, &cap, &cap_links, &rec) < 0) {
			snprintf(err, errlen, "%s: out of memory", path);
			goto out;
		}
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	link_kernels(t);
	t->nstr = trace_reader_nstrings(r);
	t->str = calloc(t->nstr ? t->nstr : 1, sizeof *t->str);
	if (!t->str)
		goto nomem;
	for (uint32_t i = 0; i < t->nstr; i++) {
		const char *s = trace_reader_string(r, i);
		if (!(t->str[i] = strdup(s ? s : "")))
			goto nomem;
	}
	const char *b = bf_label(t, "batch");
	char *end;
	if (!b || !*b) {
		snprintf(err, errlen, "%s: no 'L batch=N' label: the batch size of a capture must be "
			 "recorded (gpumemsim capture --label batch=N)", path);
		goto out;
	}
	unsigned long long bv = strtoull(b, &end, 10);
	if (*end || bv == 0 || !isdigit((unsigned char)*b)) {
		snprintf(err, errlen, "%s: label batch='%s' is not a positive integer", path, b);
		goto out;
	}
	t->batch = bv;
	if (derive(t) < 0)
		goto nomem;
	*out = t;
	t = NULL;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "%s: out of memory", path);
out:
	trace_reader_close(r);
	bf_free(t);
	return ret;
}

/* Release a loaded trace. */
void bf_free(struct bf_trace *t)
{
	if (!t)
		return;
	free(t->path);
	trace_header_free(&t->hdr);
	for (uint32_t i = 0; t->str && i < t->nstr; i++)
		free(t->str[i]);
	free(t->str);
	free(t->rec);
	free(t->links);
	free(t->alloc_rec);
	free(t->alloc_range);
	free(t->alloc_free_rec);
	free(t->alloc_ws);
	free(t->alloc_search);
	free(t->alloc_foreign);
	free(t->free_site);
	free(t->ev);
	free(t->kern);
	free(t);
}

/* The capture's batch size (its label). */
uint64_t bf_batch(const struct bf_trace *t)
{
	return t->batch;
}

/* The path the trace was loaded from. */
const char *bf_path(const struct bf_trace *t)
{
	return t->path;
}

/* A label's value, or NULL. */
const char *bf_label(const struct bf_trace *t, const char *key)
{
	return trace_header_label(&t->hdr, key);
}
