/*
 * batch_fit.c: the batch-size what-if (see batch_fit.h).
 *
 * Traces are held in memory in a compact form (kernel links in a side pool)
 * because alignment needs random access to every capture at once; the
 * captures this is meant for are single training runs of a few steps.
 *
 * Alignment works on the sequence of memory events (allocations and frees,
 * a free named by the site it frees). Captures whose events match position
 * by position align trivially; otherwise each capture is aligned with the
 * smallest one by a longest common subsequence of compatible events (same
 * kind, stream, source, NVTX range, and sizes that grow at most in
 * proportion to the batch), so a first step that autotuned differently
 * costs only its own events. Without --allow-misaligned every event must
 * align; with it, the rest is copied from the capture the synthesised trace
 * is built on, and counted as unaligned.
 */
#include "batch_fit.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"
#include "trace.h"

#define NO_IDX SIZE_MAX

/* A record without the 64-link array: links live in the trace's pool. */
struct bf_rec {
	enum trace_rec_type type;
	uint64_t start, end, line;
	union {
		struct trace_mem mem;
		struct {
			uint32_t stream, name, grid[3], block[3], regs, smem, nlinks, graph;
			uint64_t corr, graph_node;
			size_t link_off;
		} k;
		struct trace_copy copy;
		struct trace_sync sync;
		struct trace_range range;
		struct trace_api api;
		struct trace_control control;
		struct trace_segment segment;
	} u;
};

/* One memory event, for alignment. */
struct bf_event {
	char type;        /* 'a' or 'f' */
	size_t rec;       /* record index */
	size_t site;      /* alloc: its site; free: the site it frees or NO_IDX */
};

struct bf_trace {
	char *path;
	uint64_t batch;
	struct trace_header hdr;      /* owned copies */
	char **str;
	uint32_t nstr;
	struct bf_rec *rec;
	size_t nrec;
	uint64_t *links;
	size_t nlinks;
	/* derived */
	size_t nalloc;
	size_t *alloc_rec;            /* record of each site */
	uint32_t *alloc_range;        /* innermost NVTX range at the allocation */
	size_t *alloc_free_rec;       /* record of its free, or NO_IDX */
	uint8_t *alloc_ws;            /* looks like a workspace */
	uint8_t *alloc_search;        /* a workspace of the warm-up step (before
				       * the first range "step 1"): autotuning */
	uint8_t *alloc_foreign;       /* made by a library other than the framework */
	size_t *free_site;            /* per record: the site a free frees, or NO_IDX */
	struct bf_event *ev;
	size_t nev;
	size_t *kern;                 /* record indices of kernels */
	size_t nkern;
};

struct bf_site_fit {
	char kind;                    /* 'c', 'l', 'n', 'u' */
	double a, b;                  /* linear: a + b*batch */
	uint64_t gran;                /* predictions snap to multiples of this */
	int ws;
	int search;                   /* a warm-up workspace: ws_curve */
};

struct bf_model {
	struct bf_trace *const *t;    /* sorted by batch (borrowed) */
	struct bf_trace **sorted;
	size_t n;
	struct bf_report rep;
	double search_limit;          /* bytes; bounds workspace trends */
	size_t ncev;                  /* canonical (aligned in every capture) events */
	size_t **cev, **rev_ev;       /* [trace]: canonical -> event, event -> canonical */
	size_t ncanon;                /* canonical sites */
	size_t **csite, **rev_site;   /* [trace]: canonical -> site, site -> canonical */
	struct bf_site_fit *fit;      /* per canonical site */
	uint64_t **sizes;             /* [trace][canonical site] */
};

/* ------------------------------------------------------------- helpers */

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static const char *tstr(const struct bf_trace *t, uint32_t id)
{
	return id < t->nstr ? t->str[id] : NULL;
}

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

static int streq_null(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return !strcmp(a, b);
}

static void header_free(struct trace_header *h)
{
	free(h->producer);
	free(h->producer_version);
	free(h->gpu);
	free(h->compute_capability);
	free(h->driver);
	free(h->cuda);
	free(h->cupti);
	free(h->cudnn);
	free(h->command);
	for (size_t i = 0; i < h->nlabels; i++) {
		free(h->labels[i].key);
		free(h->labels[i].value);
	}
	free(h->labels);
	memset(h, 0, sizeof *h);
}

static int header_copy(struct trace_header *d, const struct trace_header *s)
{
	memset(d, 0, sizeof *d);
	d->version = s->version;
	d->total_memory = s->total_memory;
	d->producer = xstrdup(s->producer);
	d->producer_version = xstrdup(s->producer_version);
	d->gpu = xstrdup(s->gpu);
	d->compute_capability = xstrdup(s->compute_capability);
	d->driver = xstrdup(s->driver);
	d->cuda = xstrdup(s->cuda);
	d->cupti = xstrdup(s->cupti);
	d->cudnn = xstrdup(s->cudnn);
	d->command = xstrdup(s->command);
	if (s->nlabels) {
		d->labels = calloc(s->nlabels, sizeof *d->labels);
		if (!d->labels)
			return -1;
		d->nlabels = s->nlabels;
		for (size_t i = 0; i < s->nlabels; i++) {
			d->labels[i].key = xstrdup(s->labels[i].key);
			d->labels[i].value = xstrdup(s->labels[i].value);
			if (!d->labels[i].key || !d->labels[i].value)
				return -1;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- load */

/* Sites, frees, NVTX context, workspace and foreign flags, events. */
static int derive(struct bf_trace *t)
{
	struct u64map live;
	size_t *stack = NULL, nstack = 0;
	int ret = -1;

	u64map_init(&live);
	for (size_t i = 0; i < t->nrec; i++) {
		if (t->rec[i].type == TREC_ALLOC)
			t->nalloc++;
		else if (t->rec[i].type == TREC_KERNEL)
			t->nkern++;
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
	stack = calloc(t->nrec ? t->nrec : 1, sizeof *stack);
	uint64_t *range_end = calloc(na, sizeof *range_end);
	if (!t->alloc_rec || !t->alloc_range || !t->alloc_free_rec || !t->alloc_ws || !t->alloc_search ||
	    !t->alloc_foreign || !t->free_site || !t->ev || !t->kern || !stack || !range_end)
		goto out;
	size_t site = 0, nk = 0;
	for (size_t i = 0; i < t->nrec; i++) {
		const struct bf_rec *r = &t->rec[i];
		t->free_site[i] = NO_IDX;
		/* drop every range that has ended (not only the top: a range
		 * written late can sit above one that is still open) */
		size_t keep = 0;
		for (size_t s = 0; s < nstack; s++)
			if (t->rec[stack[s]].end >= r->start)
				stack[keep++] = stack[s];
		nstack = keep;
		if (r->type == TREC_RANGE) {
			/* innermost = deepest: a capture may write an outer range
			 * (e.g. "step 0") after the layer ranges inside it with a
			 * clamped start, so order by depth, not by arrival */
			size_t at = nstack;
			while (at > 0 && t->rec[stack[at - 1]].u.range.depth > r->u.range.depth) {
				stack[at] = stack[at - 1];
				at--;
			}
			stack[at] = i;
			nstack++;
		} else if (r->type == TREC_KERNEL) {
			t->kern[nk++] = i;
		} else if (r->type == TREC_ALLOC) {
			t->alloc_rec[site] = i;
			t->alloc_free_rec[site] = NO_IDX;
			if (nstack) {
				const struct bf_rec *rg = &t->rec[stack[nstack - 1]];
				t->alloc_range[site] = rg->u.range.name;
				range_end[site] = rg->end;
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
		const struct bf_rec *a = &t->rec[t->alloc_rec[s]];
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
	free(stack);
	u64map_free(&live);
	return ret;
}

static int push_rec(struct bf_trace *t, size_t *cap, const struct trace_rec *in)
{
	if (t->nrec == *cap) {
		size_t nc = *cap ? *cap * 2 : 4096;
		struct bf_rec *n = realloc(t->rec, nc * sizeof *n);
		if (!n)
			return -1;
		t->rec = n;
		*cap = nc;
	}
	struct bf_rec *r = &t->rec[t->nrec++];
	memset(r, 0, sizeof *r);
	r->type = in->type;
	r->start = in->start;
	r->end = in->end;
	r->line = in->line;
	switch (in->type) {
	case TREC_ALLOC:
	case TREC_FREE: r->u.mem = in->u.mem; break;
	case TREC_KERNEL: {
		const struct trace_kernel *k = &in->u.kernel;
		r->u.k.stream = k->stream;
		r->u.k.name = k->name;
		memcpy(r->u.k.grid, k->grid, sizeof k->grid);
		memcpy(r->u.k.block, k->block, sizeof k->block);
		r->u.k.regs = k->regs;
		r->u.k.smem = k->smem;
		r->u.k.corr = k->corr;
		r->u.k.graph = k->graph;
		r->u.k.graph_node = k->graph_node;
		r->u.k.nlinks = k->nlinks;
		r->u.k.link_off = t->nlinks;
		if (k->nlinks) {
			uint64_t *nl = realloc(t->links, (t->nlinks + k->nlinks) * sizeof *nl);
			if (!nl)
				return -1;
			t->links = nl;
			memcpy(t->links + t->nlinks, k->links, k->nlinks * sizeof *nl);
			t->nlinks += k->nlinks;
		}
		break;
	}
	case TREC_MEMCPY:
	case TREC_MEMSET: r->u.copy = in->u.copy; break;
	case TREC_SYNC: r->u.sync = in->u.sync; break;
	case TREC_RANGE: r->u.range = in->u.range; break;
	case TREC_API: r->u.api = in->u.api; break;
	case TREC_CONTROL: r->u.control = in->u.control; break;
	case TREC_SEGMENT: r->u.segment = in->u.segment; break;
	default: break;
	}
	return 0;
}

/* Whole trace into memory; see batch_fit.h. */
int bf_load(const char *path, struct bf_trace **out, char *err, size_t errlen)
{
	struct trace_reader *r = NULL;
	struct bf_trace *t = calloc(1, sizeof *t);
	struct trace_rec rec;
	size_t cap = 0;
	int ret = -1;

	*out = NULL;
	if (!t || !(t->path = strdup(path))) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	r = trace_reader_open(path);
	if (!r) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	if (trace_reader_status(r) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	if (header_copy(&t->hdr, trace_reader_header(r)) < 0) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		if (push_rec(t, &cap, &rec) < 0) {
			snprintf(err, errlen, "%s: out of memory", path);
			goto out;
		}
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
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
	header_free(&t->hdr);
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
	for (size_t i = 0; i < t->hdr.nlabels; i++)
		if (!strcmp(t->hdr.labels[i].key, key))
			return t->hdr.labels[i].value;
	return NULL;
}

/* ----------------------------------------------------------- alignment */

static size_t trace_index(const struct bf_model *m, const struct bf_trace *t)
{
	for (size_t k = 0; k < m->n; k++)
		if (m->sorted[k] == t)
			return k;
	return 0;
}

/* Canonical site of site I of trace T, or NO_IDX when unaligned. */
static size_t canon_site(const struct bf_model *m, const struct bf_trace *t, size_t i)
{
	if (i == NO_IDX || i >= t->nalloc)
		return NO_IDX;
	return m->rev_site[trace_index(m, t)][i];
}

/* Canonical event of event E of trace T, or NO_IDX. */
static size_t canon_event(const struct bf_model *m, const struct bf_trace *t, size_t e)
{
	return m->rev_ev[trace_index(m, t)][e];
}

/* Do event EA of A and EB of B match? Frees compare through SITE_MAP_*. */
static int ev_match(const struct bf_trace *A, size_t ea, const struct bf_trace *B, size_t eb,
		    int from_end, size_t pre_site, const char **why)
{
	const struct bf_event *x = &A->ev[ea], *y = &B->ev[eb];
	if (x->type != y->type) {
		*why = x->type == 'a' ? "an allocation where the other has a free" :
					"a free where the other has an allocation";
		return 0;
	}
	const struct bf_rec *rx = &A->rec[x->rec], *ry = &B->rec[y->rec];
	if (rx->u.mem.stream != ry->u.mem.stream) {
		*why = "a different stream";
		return 0;
	}
	if (x->type == 'a') {
		if (!streq_null(tstr(A, rx->u.mem.source), tstr(B, ry->u.mem.source))) {
			*why = "a different source library";
			return 0;
		}
		if (!streq_null(tstr(A, A->alloc_range[x->site]), tstr(B, B->alloc_range[y->site]))) {
			*why = "a different NVTX range";
			return 0;
		}
		return 1;
	}
	if (x->site == NO_IDX || y->site == NO_IDX) {
		*why = "a free of an unknown address";
		return x->site == y->site;
	}
	int ok;
	if (x->site < pre_site && y->site < pre_site)
		ok = x->site == y->site;
	else if (from_end)
		ok = A->nalloc - x->site == B->nalloc - y->site;
	else
		ok = 0;
	*why = "the free of a different allocation";
	return ok;
}

static void describe_site(const struct bf_trace *t, size_t e, char *buf, size_t len)
{
	if (e >= t->nev) {
		snprintf(buf, len, "%s (batch %" PRIu64 "): nothing (it has only %zu memory events)",
			 t->path, t->batch, t->nev);
		return;
	}
	const struct bf_event *ev = &t->ev[e];
	const struct bf_rec *r = &t->rec[ev->rec];
	const char *rn = ev->site != NO_IDX ? tstr(t, t->alloc_range[ev->site]) : NULL;
	if (ev->type == 'a')
		snprintf(buf, len, "%s:%" PRIu64 " (batch %" PRIu64 "): allocation site %zu, %" PRIu64
			 " bytes, NVTX '%s'", t->path, r->line, t->batch, ev->site, r->u.mem.bytes,
			 rn ? rn : "-");
	else if (ev->site != NO_IDX)
		snprintf(buf, len, "%s:%" PRIu64 " (batch %" PRIu64 "): free of site %zu (%" PRIu64
			 " bytes, NVTX '%s')", t->path, r->line, t->batch, ev->site,
			 t->rec[t->alloc_rec[ev->site]].u.mem.bytes, rn ? rn : "-");
	else
		snprintf(buf, len, "%s:%" PRIu64 " (batch %" PRIu64 "): free of an unknown address",
			 t->path, r->line, t->batch);
}

/* Sizes of two events plausible for one site at the two batch sizes, as a
 * weight for the alignment: 4 equal, 3 growing at most in proportion to the
 * batch (plus slack), 2 two workspaces within 4x of each other, 1 any other
 * size of two workspaces, 0 implausible.
 * Workspaces may take any size (the algorithm chosen decides it), but a
 * pairing whose sizes also follow the batch is preferred: where one capture
 * has no per-call workspace for a layer (the chosen algorithm needs none),
 * its search workspace must pair with the other's search workspace, not
 * with the other's per-call one. */
static int size_compat(const struct bf_trace *A, size_t ea, const struct bf_trace *B, size_t eb)
{
	const struct bf_event *x = &A->ev[ea], *y = &B->ev[eb];
	uint64_t sa = x->site != NO_IDX ? A->rec[A->alloc_rec[x->site]].u.mem.bytes : 0;
	uint64_t sb = y->site != NO_IDX ? B->rec[B->alloc_rec[y->site]].u.mem.bytes : 0;
	if (sa == sb)
		return 4;
	/* workspaces follow the algorithm chosen, not the batch */
	int ws = x->site != NO_IDX && y->site != NO_IDX && A->alloc_ws[x->site] &&
		 B->alloc_ws[y->site];
	const struct bf_trace *lo = A, *hi = B;
	uint64_t slo = sa, shi = sb;
	if (A->batch > B->batch) {
		lo = B;
		hi = A;
		slo = sb;
		shi = sa;
	}
	double r = (double)hi->batch / (double)lo->batch;
	if (shi >= slo && (double)shi <= (double)slo * r * 1.05 + 65536)
		return 3;
	if (!ws)
		return 0;
	/* two workspaces of one magnitude (within 4x) pair before others: a
	 * search workspace that fell at the larger batch is still the search */
	return 4 * (sa < sb ? sa : sb) >= (sa < sb ? sb : sa) ? 2 : 1;
}

static int is_static_kind(uint32_t kind)
{
	return kind == TMEM_DEVICE_STATIC || kind == TMEM_MANAGED_STATIC;
}

/* Alignment weight of events EA of A and EB of B (0: they cannot pair). */
static int ev_compat(const struct bf_trace *A, size_t ea, const struct bf_trace *B, size_t eb)
{
	const struct bf_event *x = &A->ev[ea], *y = &B->ev[eb];
	if (x->type != y->type)
		return 0;
	if (A->rec[x->rec].u.mem.stream != B->rec[y->rec].u.mem.stream)
		return 0;
	if ((x->site == NO_IDX) != (y->site == NO_IDX))
		return 0;
	if (x->site != NO_IDX) {
		const struct trace_mem *ma = &A->rec[A->alloc_rec[x->site]].u.mem;
		const struct trace_mem *mb = &B->rec[B->alloc_rec[y->site]].u.mem;
		if (ma->kind != mb->kind)
			return 0;
		if (!streq_null(tstr(A, ma->source), tstr(B, mb->source)))
			return 0;
		/* module globals (device static) are made when a module is
		 * loaded lazily, at the first launch of one of its kernels:
		 * which NVTX range that falls in depends on the algorithms the
		 * batch size chose, so their range says nothing */
		if (!is_static_kind(ma->kind) &&
		    !streq_null(tstr(A, A->alloc_range[x->site]), tstr(B, B->alloc_range[y->site])))
			return 0;
	}
	return size_compat(A, ea, B, eb);
}

#define DP_MAX_CELLS (512ull * 1024 * 1024) /* 2 bits each: 128 MiB */

/* Is event E of T a module global's (device static) allocation or free? */
static int ev_static(const struct bf_trace *T, size_t e)
{
	size_t s = T->ev[e].site;
	return s != NO_IDX && is_static_kind(T->rec[T->alloc_rec[s]].u.mem.kind);
}

/* Heaviest common subsequence (ev_compat's weights) of A's events IA[0..N)
 * and B's events IB[0..MM): MAP[IA[i]] = IB[j] for the pairs. -1 when out
 * of memory. Too large for the table: the common prefix only. */
static int lcs_events(const struct bf_trace *A, const size_t *ia, size_t n,
		      const struct bf_trace *B, const size_t *ib, size_t mm, size_t *map)
{
	const char *why;
	if (n == 0 || mm == 0)
		return 0;
	if ((double)n * (double)mm > DP_MAX_CELLS) {
		for (size_t e = 0; e < n && e < mm && ev_match(A, ia[e], B, ib[e], 0, SIZE_MAX, &why); e++)
			map[ia[e]] = ib[e];
		return 0;
	}
	uint8_t *dir = calloc((n * mm + 3) / 4, 1);
	uint32_t *prev = calloc(mm + 1, sizeof *prev), *cur = calloc(mm + 1, sizeof *cur);
	if (!dir || !prev || !cur) {
		free(dir);
		free(prev);
		free(cur);
		return -1;
	}
	for (size_t i = 1; i <= n; i++) {
		cur[0] = 0;
		for (size_t j = 1; j <= mm; j++) {
			uint8_t d;
			uint32_t v;
			int wgt = ev_compat(A, ia[i - 1], B, ib[j - 1]);
			uint32_t best = prev[j] >= cur[j - 1] ? prev[j] : cur[j - 1];
			if (wgt && prev[j - 1] + (uint32_t)wgt >= best) {
				v = prev[j - 1] + (uint32_t)wgt;
				d = 0;
			} else if (prev[j] >= cur[j - 1]) {
				v = prev[j];
				d = 1;
			} else {
				v = cur[j - 1];
				d = 2;
			}
			cur[j] = v;
			size_t at = (i - 1) * mm + (j - 1);
			dir[at / 4] |= (uint8_t)(d << (2 * (at % 4)));
		}
		uint32_t *t = prev;
		prev = cur;
		cur = t;
	}
	for (size_t i = n, j = mm; i > 0 && j > 0;) {
		size_t at = (i - 1) * mm + (j - 1);
		uint8_t d = (dir[at / 4] >> (2 * (at % 4))) & 3;
		if (d == 0) {
			map[ia[i - 1]] = ib[j - 1];
			i--;
			j--;
		} else if (d == 1) {
			i--;
		} else {
			j--;
		}
	}
	free(dir);
	free(prev);
	free(cur);
	return 0;
}

/* Map A's events to B's: identity when they match position by position,
 * else a heaviest common subsequence of compatible events. Module globals
 * (device static) are aligned as a sequence of their own: they are made
 * when a module is loaded lazily, at the first launch of one of its
 * kernels, i.e. wherever the algorithms this batch size chose first need
 * it; aligned in line with the rest, hundreds of them made in another
 * layer at one batch size would outweigh (and unalign) the few activations
 * between the two places. MAP[e] = B's event or NO_IDX. */
static int align_pair(const struct bf_trace *A, const struct bf_trace *B, size_t *map)
{
	const char *why;
	size_t e = 0;
	int ret = -1;
	if (A->nev == B->nev) {
		for (; e < A->nev; e++)
			if (!ev_match(A, e, B, e, 0, SIZE_MAX, &why))
				break;
		if (e == A->nev) {
			for (size_t i = 0; i < A->nev; i++)
				map[i] = i;
			return 0;
		}
	}
	for (size_t i = 0; i < A->nev; i++)
		map[i] = NO_IDX;
	size_t *ia = malloc((A->nev ? A->nev : 1) * sizeof *ia);
	size_t *ib = malloc((B->nev ? B->nev : 1) * sizeof *ib);
	if (!ia || !ib)
		goto out;
	for (int st = 0; st < 2; st++) {
		size_t n = 0, mm = 0;
		for (size_t i = 0; i < A->nev; i++)
			if (ev_static(A, i) == st)
				ia[n++] = i;
		for (size_t j = 0; j < B->nev; j++)
			if (ev_static(B, j) == st)
				ib[mm++] = j;
		if (lcs_events(A, ia, n, B, ib, mm, map) < 0)
			goto out;
	}
	ret = 0;
out:
	free(ia);
	free(ib);
	return ret;
}

/* Align every capture with the first; canonical events and sites are the
 * first capture's that align in all. -1 when out of memory. */
static int align(struct bf_model *m)
{
	struct bf_trace *const *T = m->sorted;
	const struct bf_trace *A = T[0];
	size_t n = m->n;
	int ret = -1;
	size_t **map = calloc(n, sizeof *map);
	size_t *aev = NULL;
	m->cev = calloc(n, sizeof *m->cev);
	m->rev_ev = calloc(n, sizeof *m->rev_ev);
	m->csite = calloc(n, sizeof *m->csite);
	m->rev_site = calloc(n, sizeof *m->rev_site);
	aev = calloc(A->nalloc ? A->nalloc : 1, sizeof *aev);
	if (!map || !m->cev || !m->rev_ev || !m->csite || !m->rev_site || !aev)
		goto out;
	for (size_t k = 0; k < n; k++) {
		size_t ne = T[k]->nev ? T[k]->nev : 1, ns = T[k]->nalloc ? T[k]->nalloc : 1;
		map[k] = calloc(A->nev ? A->nev : 1, sizeof **map);
		m->cev[k] = calloc(A->nev ? A->nev : 1, sizeof **m->cev);
		m->rev_ev[k] = malloc(ne * sizeof **m->rev_ev);
		m->csite[k] = calloc(A->nalloc ? A->nalloc : 1, sizeof **m->csite);
		m->rev_site[k] = malloc(ns * sizeof **m->rev_site);
		if (!map[k] || !m->cev[k] || !m->rev_ev[k] || !m->csite[k] || !m->rev_site[k])
			goto out;
		for (size_t i = 0; i < ne; i++)
			m->rev_ev[k][i] = NO_IDX;
		for (size_t i = 0; i < ns; i++)
			m->rev_site[k][i] = NO_IDX;
		if (align_pair(A, T[k], map[k]) < 0)
			goto out;
	}
	for (size_t e = 0; e < A->nev; e++)
		if (A->ev[e].type == 'a')
			aev[A->ev[e].site] = e;
	/* frees must free the sites their allocations aligned with */
	for (size_t k = 1; k < n; k++) {
		for (size_t e = 0; e < A->nev; e++) {
			if (A->ev[e].type != 'f' || map[k][e] == NO_IDX || A->ev[e].site == NO_IDX)
				continue;
			size_t ae = map[k][aev[A->ev[e].site]];
			size_t bs = T[k]->ev[map[k][e]].site;
			if (ae == NO_IDX || T[k]->ev[ae].site != bs)
				map[k][e] = NO_IDX;
		}
	}
	size_t first_bad = NO_IDX, bad_k = 0;
	for (size_t e = 0; e < A->nev; e++) {
		int all = 1;
		for (size_t k = 1; k < n; k++)
			if (map[k][e] == NO_IDX) {
				all = 0;
				if (first_bad == NO_IDX) {
					first_bad = e;
					bad_k = k;
				}
			}
		if (!all)
			continue;
		size_t c = m->ncev++;
		for (size_t k = 0; k < n; k++) {
			size_t be = k ? map[k][e] : e;
			m->cev[k][c] = be;
			m->rev_ev[k][be] = c;
		}
		if (A->ev[e].type == 'a') {
			size_t cs = m->ncanon++;
			for (size_t k = 0; k < n; k++) {
				size_t bs = T[k]->ev[k ? map[k][e] : e].site;
				m->csite[k][cs] = bs;
				m->rev_site[k][bs] = cs;
			}
		}
	}
	/* events of another capture that nothing in the first matched */
	size_t extra_k = 0, extra_e = NO_IDX;
	for (size_t k = 1; k < n && extra_e == NO_IDX; k++)
		if (m->ncev < T[k]->nev)
			for (size_t e = 0; e < T[k]->nev; e++)
				if (m->rev_ev[k][e] == NO_IDX) {
					extra_k = k;
					extra_e = e;
					break;
				}
	if (first_bad != NO_IDX || extra_e != NO_IDX) {
		char da[240], db[240];
		size_t k = first_bad != NO_IDX ? bad_k : extra_k;
		size_t eb = 0, ea = first_bad;
		if (first_bad != NO_IDX) {
			for (size_t e = first_bad; e-- > 0;)
				if (map[k][e] != NO_IDX) {
					eb = map[k][e] + 1;
					break;
				}
		} else {
			eb = extra_e;
			ea = 0;
			for (size_t e = extra_e; e-- > 0;)
				if (m->rev_ev[k][e] != NO_IDX) {
					ea = m->cev[0][m->rev_ev[k][e]] + 1;
					break;
				}
		}
		describe_site(A, ea, da, sizeof da);
		describe_site(T[k], eb, db, sizeof db);
		snprintf(m->rep.misalign, sizeof m->rep.misalign,
			 "memory event %zu: %s has no counterpart in %s: %s; nearest there: %s",
			 first_bad != NO_IDX ? ea : eb, first_bad != NO_IDX ? A->path : T[k]->path,
			 first_bad != NO_IDX ? T[k]->path : A->path,
			 first_bad != NO_IDX ? da : db, first_bad != NO_IDX ? db : da);
	}
	ret = 0;
out:
	for (size_t k = 0; map && k < n; k++)
		free(map[k]);
	free(map);
	free(aev);
	return ret;
}

/* ----------------------------------------------------------------- fit */

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static void linfit(const double *x, const double *y, size_t n, double *a, double *b)
{
	double mx = 0, my = 0, sxx = 0, sxy = 0;
	for (size_t i = 0; i < n; i++) {
		mx += x[i];
		my += y[i];
	}
	mx /= (double)n;
	my /= (double)n;
	for (size_t i = 0; i < n; i++) {
		sxx += (x[i] - mx) * (x[i] - mx);
		sxy += (x[i] - mx) * (y[i] - my);
	}
	*b = sxx > 0 ? sxy / sxx : 0;
	*a = my - *b * mx;
}

static int cmp_batch(const void *a, const void *b)
{
	const struct bf_trace *x = *(struct bf_trace *const *)a, *y = *(struct bf_trace *const *)b;
	return x->batch < y->batch ? -1 : x->batch > y->batch;
}

/* Align and fit; see batch_fit.h. */
int bf_fit(struct bf_trace *const *traces, size_t n, const struct bf_options *o,
	   struct bf_model **out, char *err, size_t errlen)
{
	struct bf_model *m = calloc(1, sizeof *m);
	double tol = o && o->linear_tol > 0 ? o->linear_tol : 0.005;
	int ret = -1;

	*out = NULL;
	if (!m)
		goto nomem;
	if (n < 2) {
		snprintf(err, errlen, "need at least two captures at different batch sizes");
		goto out;
	}
	m->n = n;
	m->search_limit = o && o->search_limit ? (double)o->search_limit : 1073741824.0;
	m->sorted = calloc(n, sizeof *m->sorted);
	if (!m->sorted)
		goto nomem;
	memcpy(m->sorted, traces, n * sizeof *traces);
	qsort(m->sorted, n, sizeof *m->sorted, cmp_batch);
	m->t = m->sorted;
	for (size_t k = 1; k < n; k++) {
		if (m->sorted[k]->batch == m->sorted[k - 1]->batch) {
			snprintf(err, errlen, "%s and %s both have batch %" PRIu64 ": the captures must be "
				 "at different batch sizes", m->sorted[k - 1]->path, m->sorted[k]->path,
				 m->sorted[k]->batch);
			goto out;
		}
	}
	struct bf_report *rep = &m->rep;
	rep->ntraces = n;
	rep->lo_batch = m->sorted[0]->batch;
	rep->hi_batch = m->sorted[n - 1]->batch;
	if (align(m) < 0)
		goto nomem;
	rep->aligned_prefix = m->ncev;
	rep->aligned_suffix = m->sorted[0]->nev;
	int full = !rep->misalign[0];
	if (!full && !(o && o->allow_misaligned)) {
		snprintf(err, errlen, "the captures do not align at %s (use --allow-misaligned to copy "
			 "the unaligned part from the nearest capture)", rep->misalign);
		goto out;
	}
	m->fit = calloc(m->ncanon ? m->ncanon : 1, sizeof *m->fit);
	m->sizes = calloc(n, sizeof *m->sizes);
	if (!m->fit || !m->sizes)
		goto nomem;
	for (size_t k = 0; k < n; k++) {
		const struct bf_trace *t = m->sorted[k];
		m->sizes[k] = calloc(m->ncanon ? m->ncanon : 1, sizeof **m->sizes);
		if (!m->sizes[k])
			goto nomem;
		for (size_t s = 0; s < t->nalloc; s++) {
			size_t c = canon_site(m, t, s);
			if (c != NO_IDX)
				m->sizes[k][c] = t->rec[t->alloc_rec[s]].u.mem.bytes;
		}
	}
	double x[64], y[64];
	size_t np = n < 64 ? n : 64;
	for (size_t k = 0; k < np; k++)
		x[k] = (double)m->sorted[k]->batch;
	rep->min_r2 = 1.0;
	for (size_t c = 0; c < m->ncanon; c++) {
		struct bf_site_fit *f = &m->fit[c];
		uint64_t g = 512, mx = 0;
		int same = 1;
		for (size_t k = 0; k < np; k++) {
			uint64_t v = m->sizes[k][c];
			y[k] = (double)v;
			g = gcd_u64(g, v);
			if (v > mx)
				mx = v;
			if (v != m->sizes[0][c])
				same = 0;
		}
		f->gran = g ? g : 1;
		const struct bf_trace *t0 = m->sorted[0];
		size_t s0 = m->csite[0][c];
		f->ws = t0->alloc_ws[s0];
		f->search = t0->alloc_search[s0];
		if (f->ws)
			rep->nworkspace++;
		if (same) {
			f->kind = 'c';
			f->a = y[0];
			rep->nconst++;
			continue;
		}
		linfit(x, y, np, &f->a, &f->b);
		double maxres = 0, ssr = 0, sst = 0, my = 0;
		for (size_t k = 0; k < np; k++)
			my += y[k];
		my /= (double)np;
		for (size_t k = 0; k < np; k++) {
			double r = fabs(y[k] - (f->a + f->b * x[k]));
			if (r > maxres)
				maxres = r;
			ssr += r * r;
			sst += (y[k] - my) * (y[k] - my);
		}
		double rel = mx ? maxres / (double)mx : 0;
		if (rel <= tol && !(f->ws && np < 3 && 0)) {
			f->kind = 'l';
			rep->nlinear++;
			if (np >= 3 && sst > 0) {
				double r2 = 1 - ssr / sst;
				if (r2 < rep->min_r2)
					rep->min_r2 = r2;
			}
			if (rel > rep->max_rel_resid) {
				rep->max_rel_resid = rel;
				rep->worst_site = c;
			}
		} else {
			f->kind = 'n';
			rep->nnonlinear++;
		}
	}
	/* kernels: fitted when every capture has the same kernel sequence */
	rep->nkernels = m->sorted[0]->nkern;
	rep->kernels_aligned = full && rep->nkernels > 0;
	for (size_t k = 1; k < n && rep->kernels_aligned; k++) {
		const struct bf_trace *A = m->sorted[0], *B = m->sorted[k];
		if (A->nkern != B->nkern) {
			rep->kernels_aligned = 0;
			break;
		}
		for (size_t i = 0; i < A->nkern; i++)
			if (!streq_null(tstr(A, A->rec[A->kern[i]].u.k.name),
					tstr(B, B->rec[B->kern[i]].u.k.name))) {
				rep->kernels_aligned = 0;
				break;
			}
	}
	rep->nsites = m->sorted[0]->nalloc;
	rep->nunaligned = m->sorted[0]->nalloc - m->ncanon;
	*out = m;
	m = NULL;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	bf_model_free(m);
	return ret;
}

/* The fit quality figures. */
const struct bf_report *bf_model_report(const struct bf_model *m)
{
	return &m->rep;
}

/* Release a model (the traces stay with the caller). */
void bf_model_free(struct bf_model *m)
{
	if (!m)
		return;
	for (size_t k = 0; k < m->n; k++) {
		if (m->sizes)
			free(m->sizes[k]);
		if (m->cev)
			free(m->cev[k]);
		if (m->rev_ev)
			free(m->rev_ev[k]);
		if (m->csite)
			free(m->csite[k]);
		if (m->rev_site)
			free(m->rev_site[k]);
	}
	free(m->cev);
	free(m->rev_ev);
	free(m->csite);
	free(m->rev_site);
	free(m->sizes);
	free(m->fit);
	free(m->sorted);
	free(m);
}

static double interp_sizes(const struct bf_model *m, size_t c, double xb, int nearest_outside)
{
	size_t n = m->n;
	double x0 = (double)m->sorted[0]->batch, xn = (double)m->sorted[n - 1]->batch;
	if (xb <= x0 && nearest_outside)
		return (double)m->sizes[0][c];
	if (xb >= xn && nearest_outside)
		return (double)m->sizes[n - 1][c];
	size_t i = 0;
	while (i + 2 < n && xb > (double)m->sorted[i + 1]->batch)
		i++;
	double xa = (double)m->sorted[i]->batch, xc = (double)m->sorted[i + 1]->batch;
	double ya = (double)m->sizes[i][c], yc = (double)m->sizes[i + 1][c];
	return ya + (yc - ya) * (xb - xa) / (xc - xa);
}

/*
 * A workspace's size at XB from its sizes Y at batches X (N points, X
 * ascending). A workspace is the largest of its candidates' needs, each
 * growing with the batch, and a candidate that would need more than the
 * search limit is not tried: so the size follows the trend of the two
 * captures at or below XB while that stays within the limit, and falls
 * when it would cross it. Between two captures whose sizes lie on that
 * trend this is the linear interpolation; where the upper capture fell
 * below the trend (a candidate crossed the limit, or another algorithm was
 * chosen) the trend is kept up to the limit, then the upper size is taken.
 * Below the smallest capture, and where the trend falls, the nearest
 * capture's size: a step function of the batch is not extrapolated.
 * LIMIT < 0: no trend (a per-call workspace: linear between the captures
 * around XB, the nearest capture's size outside them).
 */
static double ws_curve(const double *x, const double *y, size_t n, double xb, double limit)
{
	size_t lo = n, hi = n;
	for (size_t k = 0; k < n; k++) {
		if (x[k] <= xb)
			lo = k;
		if (x[k] >= xb && hi == n)
			hi = k;
	}
	if (lo == n)
		return y[hi];
	if (hi == lo)
		return y[lo];
	double trend = -1;
	if (limit >= 0 && lo > 0 && y[lo] >= y[lo - 1]) {
		double s = (y[lo] - y[lo - 1]) / (x[lo] - x[lo - 1]);
		trend = y[lo] + s * (xb - x[lo]);
	}
	if (hi == n) /* above every capture: the trend, within the limit */
		return trend >= 0 && trend <= limit ? trend : y[lo];
	double lin0 = y[lo] + (y[hi] - y[lo]) * (xb - x[lo]) / (x[hi] - x[lo]);
	if (trend < 0)
		return lin0;
	double lin = lin0;
	double at_hi = y[lo] + (trend - y[lo]) * (x[hi] - x[lo]) / (xb - x[lo]);
	if (y[hi] >= at_hi * 0.98)
		return lin; /* the upper capture is on (or above) the trend */
	return trend <= limit ? trend : y[hi];
}

/*
 * A per-call workspace's size at XB from its sizes Y at batches X (N
 * points, X ascending). Each size is the need of the algorithm chosen at
 * that batch, a step function of the batch: between two captures the line
 * through them (nothing better is known: mapping the kernels launched to
 * an algorithm did not help, docs/whatif.md); outside the captures the
 * nearest capture's algorithm is assumed to stay and its need to grow in
 * proportion to the batch (bytes per sample), within LIMIT. Measured on the
 * CNN and torch captures this beats keeping the nearest size (the steady
 * step's workspace at batch 8 is about a quarter of batch 32's).
 */
static double ws_percall(const double *x, const double *y, size_t n, double xb, double limit)
{
	if (xb < x[0])
		return y[0] * xb / x[0];
	if (xb > x[n - 1]) {
		double r = y[n - 1] * xb / x[n - 1];
		return r < limit ? r : (y[n - 1] > limit ? y[n - 1] : limit);
	}
	return ws_curve(x, y, n, xb, -1);
}

static uint64_t predict_canon(const struct bf_model *m, size_t c, uint64_t batch)
{
	const struct bf_site_fit *f = &m->fit[c];
	double v, x[64], y[64];
	size_t n = m->n < 64 ? m->n : 64;
	if (f->kind == 'c')
		return m->sizes[0][c];
	for (size_t k = 0; k < n; k++) {
		x[k] = (double)m->sorted[k]->batch;
		y[k] = (double)m->sizes[k][c];
	}
	v = f->a + f->b * (double)batch;
	/* a search workspace on a line is still bounded by the search limit:
	 * past it the candidate that made the line is not tried */
	if (f->kind == 'l' && !(f->search && v > m->search_limit))
		;
	else if (f->search)
		v = ws_curve(x, y, n, (double)batch, m->search_limit);
	else if (f->ws)
		v = ws_percall(x, y, n, (double)batch, m->search_limit);
	else
		v = interp_sizes(m, c, (double)batch, 0);
	if (!(v >= 1))
		v = 1;
	uint64_t u = (uint64_t)llround(v);
	uint64_t g = f->gran;
	u = (u + g / 2) / g * g;
	return u ? u : g;
}

/* Prediction for site SITE (the lowest-batch capture's numbering). */
uint64_t bf_predict_site(const struct bf_model *m, size_t site, uint64_t batch)
{
	const struct bf_trace *t = m->sorted[0];
	if (site >= t->nalloc)
		return 0;
	size_t c = canon_site(m, t, site);
	if (c == NO_IDX)
		return t->rec[t->alloc_rec[site]].u.mem.bytes;
	return predict_canon(m, c, batch);
}

/* How site SITE is predicted. */
char bf_site_kind(const struct bf_model *m, size_t site)
{
	const struct bf_trace *t = m->sorted[0];
	if (site >= t->nalloc)
		return 'u';
	size_t c = canon_site(m, t, site);
	return c == NO_IDX ? 'u' : m->fit[c].kind;
}

/* ---------------------------------------------------------- synthesis */

static size_t template_index(const struct bf_model *m, uint64_t batch);
static uint64_t predict_template_site(const struct bf_model *m, size_t kt, size_t s,
				      uint64_t batch, uint64_t *sz, char *kind);

static double fit_at(const double *x, const double *y, size_t n, double xb)
{
	double a, b;
	linfit(x, y, n, &a, &b);
	return a + b * xb;
}

/* Record times of the template T at BATCH: anchors fitted, the rest warped. */
static int synth_times(const struct bf_model *m, const struct bf_trace *T, uint64_t batch,
		       double *pred, double *kdur)
{
	size_t n = m->n < 64 ? m->n : 64;
	double x[64], y[64];
	uint8_t *anchor = calloc(T->nrec ? T->nrec : 1, 1);
	size_t **evmap = calloc(n, sizeof *evmap);
	if (!anchor || !evmap) {
		free(anchor);
		free(evmap);
		return -1;
	}
	for (size_t k = 0; k < n; k++)
		x[k] = (double)m->sorted[k]->batch;
	double xb = (double)batch;
	uint64_t t0 = T->nrec ? T->rec[0].start : 0;
	/* memory events */
	for (size_t e = 0; e < T->nev; e++) {
		size_t c = canon_event(m, T, e);
		/* module globals are made where a module happens to load: no
		 * anchor for the timeline */
		if (c == NO_IDX || ev_static(T, e))
			continue;
		for (size_t k = 0; k < n; k++) {
			const struct bf_trace *B = m->sorted[k];
			size_t be = m->cev[k][c];
			y[k] = (double)(B->rec[B->ev[be].rec].start - (B->nrec ? B->rec[0].start : 0));
		}
		size_t ri = T->ev[e].rec;
		pred[ri] = fit_at(x, y, n, xb);
		anchor[ri] = 1;
	}
	if (m->rep.kernels_aligned) {
		for (size_t i = 0; i < T->nkern; i++) {
			for (size_t k = 0; k < n; k++) {
				const struct bf_trace *B = m->sorted[k];
				const struct bf_rec *r = &B->rec[B->kern[i]];
				y[k] = (double)(r->start - B->rec[0].start);
			}
			pred[T->kern[i]] = fit_at(x, y, n, xb);
			anchor[T->kern[i]] = 1;
			for (size_t k = 0; k < n; k++) {
				const struct bf_trace *B = m->sorted[k];
				const struct bf_rec *r = &B->rec[B->kern[i]];
				y[k] = (double)(r->end - r->start);
			}
			double d = fit_at(x, y, n, xb);
			kdur[T->kern[i]] = d > 0 ? d : 0;
		}
	}
	/* warp the others between their anchors */
	size_t prev = NO_IDX;
	size_t *next = calloc(T->nrec ? T->nrec : 1, sizeof *next);
	if (!next) {
		free(anchor);
		free(evmap);
		return -1;
	}
	size_t nx = NO_IDX;
	for (size_t i = T->nrec; i-- > 0;) {
		next[i] = nx;
		if (anchor[i])
			nx = i;
	}
	double last = 0;
	for (size_t i = 0; i < T->nrec; i++) {
		double tt = (double)(T->rec[i].start - t0);
		if (!anchor[i]) {
			size_t nn = next[i];
			if (prev != NO_IDX && nn != NO_IDX) {
				double tp = (double)(T->rec[prev].start - t0), tn = (double)(T->rec[nn].start - t0);
				pred[i] = tn > tp ? pred[prev] + (tt - tp) * (pred[nn] - pred[prev]) / (tn - tp)
						  : pred[prev];
			} else if (prev != NO_IDX) {
				pred[i] = pred[prev] + (tt - (double)(T->rec[prev].start - t0));
			} else if (nn != NO_IDX) {
				pred[i] = pred[nn] - ((double)(T->rec[nn].start - t0) - tt);
			} else {
				pred[i] = tt;
			}
		} else {
			prev = i;
		}
		if (pred[i] < last)
			pred[i] = last;
		if (pred[i] < 0)
			pred[i] = 0;
		last = pred[i];
		if (anchor[i])
			pred[i] = last; /* keep the monotone value for later warps */
	}
	free(next);
	free(anchor);
	free(evmap);
	return 0;
}

/* Convert record R of T for writer W (strings re-interned through SID);
 * times and bytes as captured. Returns 1 for records that are not carried
 * over: 'g' segment records and OOM markers belong to the captured run. */
static int rec_out(struct trace_writer *w, const struct bf_trace *T, uint32_t *sid,
		   const struct bf_rec *r, struct trace_rec *o)
{
#define SID(x) ((x) == TRACE_NO_STRING || (x) >= T->nstr ? TRACE_NO_STRING : \
	(sid[(x)] != TRACE_NO_STRING ? sid[(x)] : (sid[(x)] = trace_writer_intern(w, T->str[(x)]))))
	memset(o, 0, sizeof *o);
	o->type = r->type;
	o->line = r->line;
	o->start = r->start;
	o->end = r->end;
	switch (r->type) {
	case TREC_SEGMENT:
		return 1;
	case TREC_CONTROL:
		if (r->u.control.kind == TCTL_OOM)
			return 1;
		o->u.control = r->u.control;
		break;
	case TREC_ALLOC:
	case TREC_FREE:
		o->u.mem = r->u.mem;
		o->u.mem.source = SID(r->u.mem.source);
		break;
	case TREC_KERNEL: {
		struct trace_kernel *k = &o->u.kernel;
		k->stream = r->u.k.stream;
		k->name = SID(r->u.k.name);
		memcpy(k->grid, r->u.k.grid, sizeof k->grid);
		memcpy(k->block, r->u.k.block, sizeof k->block);
		k->regs = r->u.k.regs;
		k->smem = r->u.k.smem;
		k->corr = r->u.k.corr;
		k->graph = r->u.k.graph;
		k->graph_node = r->u.k.graph_node;
		k->nlinks = r->u.k.nlinks;
		memcpy(k->links, T->links + r->u.k.link_off, r->u.k.nlinks * sizeof *k->links);
		break;
	}
	case TREC_MEMCPY:
	case TREC_MEMSET: o->u.copy = r->u.copy; break;
	case TREC_SYNC: o->u.sync = r->u.sync; break;
	case TREC_RANGE:
		o->u.range = r->u.range;
		o->u.range.name = SID(r->u.range.name);
		break;
	case TREC_API:
		o->u.api = r->u.api;
		o->u.api.name = SID(r->u.api.name);
		break;
	default: return 1;
	}
#undef SID
	return 0;
}

/* Write the trace at BATCH; see batch_fit.h. */
int bf_synth(const struct bf_model *m, uint64_t batch, const char *path, char *err, size_t errlen)
{
	const struct bf_trace *T = m->sorted[0];
	struct trace_writer *w = NULL;
	struct trace_header h;
	uint32_t *sid = NULL;
	double *pred = NULL, *kdur = NULL;
	uint64_t *site_bytes = NULL, *pair_sz = NULL;
	int ret = -1;
	char bbuf[32];

	memset(&h, 0, sizeof h);
	/* the nearest capture is the template (ties: the larger one) */
	size_t kt = template_index(m, batch);
	T = m->sorted[kt];
	if (header_copy(&h, &T->hdr) < 0)
		goto nomem;
	snprintf(bbuf, sizeof bbuf, "%" PRIu64, batch);
	for (size_t i = 0; i < h.nlabels; i++) {
		if (!strcmp(h.labels[i].key, "batch")) {
			free(h.labels[i].value);
			if (!(h.labels[i].value = strdup(bbuf)))
				goto nomem;
		}
	}
	{
		struct trace_label *nl = realloc(h.labels, (h.nlabels + 2) * sizeof *nl);
		if (!nl)
			goto nomem;
		h.labels = nl;
		char from[64];
		snprintf(from, sizeof from, "%" PRIu64, T->batch);
		h.labels[h.nlabels].key = strdup("whatif");
		h.labels[h.nlabels].value = strdup("batch");
		h.labels[h.nlabels + 1].key = strdup("whatif_template_batch");
		h.labels[h.nlabels + 1].value = strdup(from);
		h.nlabels += 2;
		for (size_t i = h.nlabels - 2; i < h.nlabels; i++)
			if (!h.labels[i].key || !h.labels[i].value)
				goto nomem;
	}
	free(h.producer);
	free(h.producer_version);
	h.producer = strdup("gpumemsim-whatif-batch");
	h.producer_version = strdup("1");
	if (!h.producer || !h.producer_version)
		goto nomem;
	sid = malloc((T->nstr ? T->nstr : 1) * sizeof *sid);
	pred = calloc(T->nrec ? T->nrec : 1, sizeof *pred);
	kdur = calloc(T->nrec ? T->nrec : 1, sizeof *kdur);
	site_bytes = calloc(T->nalloc ? T->nalloc : 1, sizeof *site_bytes);
	pair_sz = calloc(m->n, sizeof *pair_sz);
	if (!sid || !pred || !kdur || !site_bytes || !pair_sz)
		goto nomem;
	for (uint32_t i = 0; i < T->nstr; i++)
		sid[i] = TRACE_NO_STRING;
	if (synth_times(m, T, batch, pred, kdur) < 0)
		goto nomem;
	w = trace_writer_open(path, TRACE_W_ATOMIC, err, errlen);
	if (!w)
		goto out;
	if (trace_writer_header(w, &h) < 0) {
		snprintf(err, errlen, "%s: writing the header failed", path);
		goto out;
	}
	uint64_t t0 = T->nrec ? T->rec[0].start : 0;
	uint64_t nwritten = 0;
	size_t site = 0;
	for (size_t i = 0; i < T->nrec; i++) {
		const struct bf_rec *r = &T->rec[i];
		struct trace_rec o;
		if (rec_out(w, T, sid, r, &o))
			continue; /* 'g' and OOM records: the capture's, not this batch's */
		o.start = t0 + (uint64_t)llround(pred[i]);
		o.end = o.start + (r->end - r->start);
		if (r->type == TREC_ALLOC) {
			char kind;
			o.u.mem.bytes = predict_template_site(m, kt, site, batch, pair_sz, &kind);
			site_bytes[site] = o.u.mem.bytes;
			site++;
		} else if (r->type == TREC_FREE) {
			if (r->u.mem.bytes && T->free_site[i] != NO_IDX)
				o.u.mem.bytes = site_bytes[T->free_site[i]];
		} else if (r->type == TREC_KERNEL && m->rep.kernels_aligned) {
			o.end = o.start + (uint64_t)llround(kdur[i]);
		}
		if (trace_writer_record(w, &o) < 0) {
			snprintf(err, errlen, "%s: writing record %" PRIu64 " failed (from %s:%" PRIu64 ")",
				 path, nwritten + 1, T->path, r->line);
			goto out;
		}
		nwritten++;
	}
	if (trace_writer_close(w, 1, 0, err, errlen) < 0) {
		w = NULL;
		goto out;
	}
	w = NULL;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "%s: out of memory", path);
out:
	if (w)
		trace_writer_abort(w);
	header_free(&h);
	free(sid);
	free(pred);
	free(kdur);
	free(site_bytes);
	free(pair_sz);
	return ret;
}

/* ------------------------------------------- unaligned sites, paired */

/* The capture the trace at BATCH is built on: the nearest (ties: larger). */
static size_t template_index(const struct bf_model *m, uint64_t batch)
{
	size_t best = 0;
	for (size_t k = 1; k < m->n; k++) {
		uint64_t bk = m->sorted[k]->batch, bt = m->sorted[best]->batch;
		uint64_t dk = bk > batch ? bk - batch : batch - bk, dt = bt > batch ? bt - batch : batch - bt;
		if (dk <= dt)
			best = k;
	}
	return best;
}

/* Same stream, memory kind, source library and NVTX range: the key under
 * which unaligned allocations of two captures are paired (size ignored). */
static int pair_key_match(const struct bf_trace *A, size_t sa, const struct bf_trace *B, size_t sb)
{
	const struct trace_mem *ma = &A->rec[A->alloc_rec[sa]].u.mem;
	const struct trace_mem *mb = &B->rec[B->alloc_rec[sb]].u.mem;
	return ma->stream == mb->stream && ma->kind == mb->kind &&
	       streq_null(tstr(A, ma->source), tstr(B, mb->source)) &&
	       streq_null(tstr(A, A->alloc_range[sa]), tstr(B, B->alloc_range[sb]));
}

/*
 * Sizes of the counterparts of unaligned site S of capture KT in every
 * capture (SZ[k], 0 where there is none). Alignment leaves gaps where the
 * first step's autotuning differs per batch; within the gap between the same
 * two aligned events of both captures, the i-th unaligned allocation with
 * the same key (stream, kind, source, NVTX range) in one is paired with the
 * i-th in the other: the same search or workspace call of the same layer
 * and direction, whatever its size. Returns how many captures have one.
 */
static size_t pair_unaligned(const struct bf_model *m, size_t kt, size_t s, uint64_t *sz)
{
	const struct bf_trace *T = m->sorted[kt];
	size_t e = NO_IDX, np = 0;
	for (size_t k = 0; k < m->n; k++)
		sz[k] = 0;
	/* the allocation event of S (events are in record order) */
	size_t lo = 0, hi = T->nev;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (T->ev[mid].rec < T->alloc_rec[s])
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < T->nev && T->ev[lo].type == 'a' && T->ev[lo].site == s)
		e = lo;
	if (e == NO_IDX)
		return 0;
	size_t cp = NO_IDX, cn = NO_IDX;
	/* gaps are bounded by aligned events in order (not module globals,
	 * aligned apart from the rest) */
	for (size_t i = e; i-- > 0;)
		if (m->rev_ev[kt][i] != NO_IDX && !ev_static(T, i)) {
			cp = m->rev_ev[kt][i];
			break;
		}
	for (size_t i = e + 1; i < T->nev; i++)
		if (m->rev_ev[kt][i] != NO_IDX && !ev_static(T, i)) {
			cn = m->rev_ev[kt][i];
			break;
		}
	size_t ord = 0;
	for (size_t i = cp == NO_IDX ? 0 : m->cev[kt][cp] + 1; i < e; i++)
		if (T->ev[i].type == 'a' && m->rev_ev[kt][i] == NO_IDX &&
		    pair_key_match(T, T->ev[i].site, T, s))
			ord++;
	for (size_t k = 0; k < m->n; k++) {
		const struct bf_trace *B = m->sorted[k];
		if (k == kt) {
			sz[k] = T->rec[T->alloc_rec[s]].u.mem.bytes;
			np++;
			continue;
		}
		size_t from = cp == NO_IDX ? 0 : m->cev[k][cp] + 1;
		size_t to = cn == NO_IDX ? B->nev : m->cev[k][cn];
		size_t o = 0;
		for (size_t i = from; i < to; i++) {
			if (B->ev[i].type != 'a' || m->rev_ev[k][i] != NO_IDX ||
			    !pair_key_match(B, B->ev[i].site, T, s))
				continue;
			if (o++ == ord) {
				sz[k] = B->rec[B->alloc_rec[B->ev[i].site]].u.mem.bytes;
				np++;
				break;
			}
		}
	}
	return np;
}

/* Prediction for a paired unaligned site from the sizes SZ its counterparts
 * have (0 = none): linear between the two captures around BATCH, the nearest
 * capture's size outside them (a search workspace is bounded by the search
 * limit, and which candidates fit changes with batch: no extrapolation). */
static uint64_t predict_paired(const struct bf_model *m, const uint64_t *sz, uint64_t batch,
			       uint64_t dflt, int search)
{
	double x[64], y[64];
	size_t np = 0;
	uint64_t g = 512;
	for (size_t k = 0; k < m->n && np < 64; k++) {
		if (!sz[k])
			continue;
		g = gcd_u64(g, sz[k]);
		x[np] = (double)m->sorted[k]->batch;
		y[np++] = (double)sz[k];
	}
	if (!np)
		return dflt;
	/* only the warm-up step's search workspaces follow the trend rule;
	 * a per-call one grows per sample only outside the fitted range (a
	 * counterpart missing at some captures inside it says the algorithm
	 * changed there: the line between the ones that exist) */
	int outside = batch < m->rep.lo_batch || batch > m->rep.hi_batch;
	double v;
	if (search)
		v = ws_curve(x, y, np, (double)batch, m->search_limit);
	else if (outside)
		v = ws_percall(x, y, np, (double)batch, m->search_limit);
	else
		v = ws_curve(x, y, np, (double)batch, -1);
	uint64_t u = (uint64_t)llround(v > 1 ? v : 1);
	if (!g)
		g = 1;
	u = (u + g / 2) / g * g;
	return u ? u : g;
}

/* Bytes of site S of template KT at BATCH, with its kind in *KIND. */
static uint64_t predict_template_site(const struct bf_model *m, size_t kt, size_t s,
				      uint64_t batch, uint64_t *sz, char *kind)
{
	const struct bf_trace *T = m->sorted[kt];
	size_t c = canon_site(m, T, s);
	if (c != NO_IDX) {
		*kind = m->fit[c].kind;
		return predict_canon(m, c, batch);
	}
	uint64_t own = T->rec[T->alloc_rec[s]].u.mem.bytes;
	if (pair_unaligned(m, kt, s, sz) >= 2) {
		*kind = 'p';
		return predict_paired(m, sz, batch, own, T->alloc_search[s]);
	}
	*kind = 'u';
	return own;
}

/* Per-site TSV; see batch_fit.h. */
int bf_write_sites(const struct bf_model *m, uint64_t batch, FILE *f)
{
	size_t kt = template_index(m, batch);
	const struct bf_trace *T = m->sorted[kt];
	uint64_t *sz = calloc(m->n, sizeof *sz);
	if (!sz)
		return -1;
	fprintf(f, "site\tline\trange\tkind\tworkspace");
	for (size_t k = 0; k < m->n; k++)
		fprintf(f, "\tb%" PRIu64, m->sorted[k]->batch);
	fprintf(f, "\tpredicted_b%" PRIu64 "\n", batch);
	for (size_t s = 0; s < T->nalloc; s++) {
		char kind;
		uint64_t p = predict_template_site(m, kt, s, batch, sz, &kind);
		size_t c = canon_site(m, T, s);
		const char *rn = tstr(T, T->alloc_range[s]);
		fprintf(f, "%zu\t%" PRIu64 "\t%s\t%c\t%d", s, T->rec[T->alloc_rec[s]].line,
			rn ? rn : "-", kind, T->alloc_ws[s]);
		for (size_t k = 0; k < m->n; k++) {
			uint64_t v = c != NO_IDX ? m->sizes[k][c] : kind == 'p' ? sz[k] : k == kt ?
				     T->rec[T->alloc_rec[s]].u.mem.bytes : 0;
			if (v)
				fprintf(f, "\t%" PRIu64, v);
			else
				fprintf(f, "\t-");
		}
		fprintf(f, "\t%" PRIu64 "\n", p);
	}
	free(sz);
	return ferror(f) ? -1 : 0;
}

/* ----------------------------------------------------- live-set tracker */

static void group_add(struct bf_group *g, size_t *ng, const char *name, uint64_t bytes)
{
	for (size_t i = 0; i < *ng; i++)
		if (!strcmp(g[i].name, name)) {
			g[i].bytes += bytes;
			return;
		}
	size_t at = *ng;
	if (*ng == BF_MAX_GROUPS) {
		/* full: replace the smallest if this one is larger */
		at = 0;
		for (size_t i = 1; i < *ng; i++)
			if (g[i].bytes < g[at].bytes)
				at = i;
		if (g[at].bytes >= bytes)
			return;
	} else {
		(*ng)++;
	}
	snprintf(g[at].name, sizeof g[at].name, "%s", name);
	g[at].bytes = bytes;
}

static int cmp_group(const void *a, const void *b)
{
	const struct bf_group *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Live state after LINE, or at the peak of live bytes when LINE is 0. */
int bf_live_at(const struct bf_trace *t, uint64_t line, struct bf_live *out)
{
	uint8_t *live = calloc(t->nalloc ? t->nalloc : 1, 1);
	if (!live)
		return -1;
	memset(out, 0, sizeof *out);
	uint64_t cur = 0, peak = 0, peak_line = 0;
	if (line == 0) {
		size_t site = 0;
		for (size_t i = 0; i < t->nrec; i++) {
			const struct bf_rec *r = &t->rec[i];
			if (r->type == TREC_ALLOC) {
				cur += r->u.mem.bytes;
				live[site++] = 1;
			} else if (r->type == TREC_FREE && t->free_site[i] != NO_IDX &&
				   live[t->free_site[i]]) {
				live[t->free_site[i]] = 0;
				cur -= t->rec[t->alloc_rec[t->free_site[i]]].u.mem.bytes;
			}
			if (cur > peak) {
				peak = cur;
				peak_line = r->line;
			}
		}
		line = peak_line;
		memset(live, 0, t->nalloc ? t->nalloc : 1);
	}
	size_t site = 0;
	for (size_t i = 0; i < t->nrec && t->rec[i].line <= line; i++) {
		const struct bf_rec *r = &t->rec[i];
		if (r->type == TREC_ALLOC)
			live[site++] = 1;
		else if (r->type == TREC_FREE && t->free_site[i] != NO_IDX)
			live[t->free_site[i]] = 0;
	}
	out->line = line;
	for (size_t s = 0; s < t->nalloc; s++) {
		if (!live[s])
			continue;
		const struct bf_rec *a = &t->rec[t->alloc_rec[s]];
		uint64_t b = a->u.mem.bytes;
		out->total += b;
		out->nlive++;
		if (t->alloc_ws[s]) {
			out->workspace += b;
			const char *rn = tstr(t, t->alloc_range[s]);
			const char *src = tstr(t, a->u.mem.source);
			group_add(out->ws, &out->nws, rn ? rn : (src ? src : "-"), b);
		}
		if (t->alloc_foreign[s]) {
			out->foreign += b;
			group_add(out->libs, &out->nlibs, tstr(t, a->u.mem.source), b);
		}
	}
	qsort(out->ws, out->nws, sizeof *out->ws, cmp_group);
	qsort(out->libs, out->nlibs, sizeof *out->libs, cmp_group);
	free(live);
	return 0;
}

/* ------------------------------------------------------- steady state */

/* Write T from the first NVTX range named RANGE on; see batch_fit.h. */
int bf_write_from_range(const struct bf_trace *t, const char *range, const char *path,
			char *err, size_t errlen)
{
	struct trace_writer *w = NULL;
	uint32_t *sid = NULL;
	uint8_t *drop = NULL;
	uint64_t cut = 0;
	size_t cut_rec = 0;
	int found = 0, ret = -1;

	for (size_t i = 0; i < t->nrec && !found; i++)
		if (t->rec[i].type == TREC_RANGE && streq_null(tstr(t, t->rec[i].u.range.name), range)) {
			cut = t->rec[i].start;
			cut_rec = i;
			found = 1;
		}
	if (!found) {
		snprintf(err, errlen, "%s: no NVTX range '%s' (the steady state starts there)", t->path,
			 range);
		return -1;
	}
	sid = malloc((t->nstr ? t->nstr : 1) * sizeof *sid);
	drop = calloc(t->nrec ? t->nrec : 1, 1);
	if (!sid || !drop) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (uint32_t i = 0; i < t->nstr; i++)
		sid[i] = TRACE_NO_STRING;
	/* what was allocated and freed before the cut never meets the steady
	 * state: drop both records; what is live across the cut (weights,
	 * optimizer state) stays, allocated where it was. "Before" is by time,
	 * then by record order: a synthesised trace can place a free at the
	 * very time the range starts (its times are fitted, then kept
	 * monotone), and written before the range it still belongs before */
#define BEFORE_CUT(i) (t->rec[(i)].start < cut || (t->rec[(i)].start == cut && (i) < cut_rec))
	for (size_t s = 0; s < t->nalloc; s++) {
		size_t fr = t->alloc_free_rec[s];
		if (fr != NO_IDX && BEFORE_CUT(fr)) {
			drop[t->alloc_rec[s]] = 1;
			drop[fr] = 1;
		}
	}
	for (size_t i = 0; i < t->nrec; i++)
		if (t->rec[i].type == TREC_FREE && t->free_site[i] == NO_IDX && BEFORE_CUT(i))
			drop[i] = 1;
#undef BEFORE_CUT
	w = trace_writer_open(path, TRACE_W_ATOMIC, err, errlen);
	if (!w)
		goto out;
	if (trace_writer_header(w, &t->hdr) < 0) {
		snprintf(err, errlen, "%s: writing the header failed", path);
		goto out;
	}
	for (size_t i = 0; i < t->nrec; i++) {
		struct trace_rec o;
		if (drop[i] || rec_out(w, t, sid, &t->rec[i], &o))
			continue;
		if (trace_writer_record(w, &o) < 0) {
			snprintf(err, errlen, "%s: writing failed (from %s:%" PRIu64 ")", path, t->path,
				 t->rec[i].line);
			goto out;
		}
	}
	if (trace_writer_close(w, 1, 0, err, errlen) < 0) {
		w = NULL;
		goto out;
	}
	w = NULL;
	ret = 0;
out:
	if (w)
		trace_writer_abort(w);
	free(sid);
	free(drop);
	return ret;
}
