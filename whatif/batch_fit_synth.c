/*
 * batch_fit_synth.c: the batch-size what-if, stage 4: the trace at another
 * batch size written from the capture nearest to it (times of aligned
 * events and kernels fitted, the rest warped between them; sizes from
 * batch_fit_fit.c), and the steady state of a trace (from an NVTX range on).
 */
#include "batch_fit_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- synthesis */

static double fit_at(const double *x, const double *y, size_t n, double xb)
{
	double a, b;
	bf_linfit(x, y, n, &a, &b);
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
		size_t c = bf_canon_event(m, T, e);
		/* module globals are made where a module happens to load: no
		 * anchor for the timeline */
		if (c == NO_IDX || bf_ev_static(T, e))
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
				const struct trace_rec *r = &B->rec[B->kern[i]];
				y[k] = (double)(r->start - B->rec[0].start);
			}
			pred[T->kern[i]] = fit_at(x, y, n, xb);
			anchor[T->kern[i]] = 1;
			for (size_t k = 0; k < n; k++) {
				const struct bf_trace *B = m->sorted[k];
				const struct trace_rec *r = &B->rec[B->kern[i]];
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
		   const struct trace_rec *r, struct trace_rec *o)
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
	case TREC_KERNEL:
		/* its links stay where they are: in T's pool, which T owns */
		o->u.kernel = r->u.kernel;
		o->u.kernel.name = SID(r->u.kernel.name);
		break;
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
	return bf_synth_which(m, batch, 0, path, err, errlen);
}

/* The trace at BATCH, unpredictable sites at their bounds; see batch_fit.h. */
int bf_synth_bound(const struct bf_model *m, uint64_t batch, int which, const char *path,
		   char *err, size_t errlen)
{
	return bf_synth_which(m, batch, which < 0 ? -1 : which > 0, path, err, errlen);
}

/* The trace at BATCH with unpredictable sites at WHICH (batch_fit_int.h). */
int bf_synth_which(const struct bf_model *m, uint64_t batch, int which, const char *path,
		   char *err, size_t errlen)
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
	size_t kt = bf_template_index(m, batch);
	T = m->sorted[kt];
	if (trace_header_copy(&h, &T->hdr) < 0)
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
		struct trace_label *nl = realloc(h.labels, (h.nlabels + 3) * sizeof *nl);
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
		if (which) {
			h.labels[h.nlabels].key = strdup("whatif_bound");
			h.labels[h.nlabels].value = strdup(which < 0 ? "lo" : "hi");
			h.nlabels++;
		}
		for (size_t i = h.nlabels - 2 - (which != 0); i < h.nlabels; i++)
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
		const struct trace_rec *r = &T->rec[i];
		struct trace_rec o;
		if (rec_out(w, T, sid, r, &o))
			continue; /* 'g' and OOM records: the capture's, not this batch's */
		o.start = t0 + (uint64_t)llround(pred[i]);
		o.end = o.start + (r->end - r->start);
		if (r->type == TREC_ALLOC) {
			char kind;
			uint64_t lo, hi;
			if (which && bf_template_site_bounds(m, kt, site, batch, pair_sz, &lo, &hi, NULL))
				o.u.mem.bytes = which < 0 ? lo : hi;
			else
				o.u.mem.bytes = bf_predict_template_site(m, kt, site, batch, pair_sz, &kind);
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
	if (trace_writer_close(&w, 1, 0, err, errlen) < 0)
		goto out;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "%s: out of memory", path);
out:
	if (w)
		trace_writer_abort(w);
	trace_header_free(&h);
	free(sid);
	free(pred);
	free(kdur);
	free(site_bytes);
	free(pair_sz);
	return ret;
}

/* ------------------------------------------------------- steady state */

/* Write T to PATH without the records DROP marks; see batch_fit_int.h. */
int bf_write_records(const struct bf_trace *t, const uint8_t *drop, const char *path,
		     char *err, size_t errlen)
{
	struct trace_writer *w = NULL;
	uint32_t *sid = malloc((t->nstr ? t->nstr : 1) * sizeof *sid);
	/* old allocation id -> new: ids are ordinals of the 'a' records written,
	 * so each dropped one moves the later ones down (as fusion's pass 2) */
	uint64_t *newid = malloc((t->nalloc ? t->nalloc : 1) * sizeof *newid);
	uint64_t links[TRACE_MAX_LINKS], ndropped = 0;
	int ret = -1;

	if (!sid || !newid) {
		snprintf(err, errlen, "%s: out of memory", path);
		free(sid);
		free(newid);
		return -1;
	}
	for (uint32_t i = 0; i < t->nstr; i++)
		sid[i] = TRACE_NO_STRING;
	for (size_t s = 0; s < t->nalloc; s++) {
		int gone = drop[t->alloc_rec[s]];
		newid[s] = gone ? UINT64_MAX : s - ndropped;
		ndropped += (uint64_t)gone;
	}
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
		if (o.type == TREC_KERNEL && ndropped) {
			/* a link to a dropped allocation goes with it; one past the
			 * trace's allocations (which validate rejects) stays past
			 * them rather than naming a kept one */
			uint32_t n = 0;
			for (uint32_t l = 0; l < o.u.kernel.nlinks && n < TRACE_MAX_LINKS; l++) {
				uint64_t id = o.u.kernel.links[l];
				uint64_t to = id < t->nalloc ? newid[id] : id - ndropped;
				if (to != UINT64_MAX)
					links[n++] = to;
			}
			o.u.kernel.nlinks = n;
			o.u.kernel.links = n ? links : NULL;
		}
		if (trace_writer_record(w, &o) < 0) {
			snprintf(err, errlen, "%s: writing failed (from %s:%" PRIu64 ")", path, t->path,
				 t->rec[i].line);
			goto out;
		}
	}
	if (trace_writer_close(&w, 1, 0, err, errlen) < 0)
		goto out;
	ret = 0;
out:
	if (w)
		trace_writer_abort(w);
	free(sid);
	free(newid);
	return ret;
}

/* Write T from the first NVTX range named RANGE on; see batch_fit.h. */
int bf_write_from_range(const struct bf_trace *t, const char *range, const char *path,
			char *err, size_t errlen)
{
	uint8_t *drop = NULL;
	uint64_t cut = 0;
	size_t cut_rec = 0;
	int found = 0, ret;

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
	drop = calloc(t->nrec ? t->nrec : 1, 1);
	if (!drop) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
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
	ret = bf_write_records(t, drop, path, err, errlen);
	free(drop);
	return ret;
}
