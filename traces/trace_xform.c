/* trace_xform.c: see trace_xform.h. */
#include "trace_xform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

void trace_strmap_init(struct trace_strmap *m, const struct trace_reader *rd,
		       struct trace_writer *w)
{
	memset(m, 0, sizeof *m);
	m->rd = rd;
	m->w = w;
}

void trace_strmap_free(struct trace_strmap *m)
{
	free(m->id);
	memset(m, 0, sizeof *m);
}

int trace_strmap_id(struct trace_strmap *m, uint32_t sid, uint32_t *out)
{
	if (sid == TRACE_NO_STRING) {
		*out = sid;
		return 0;
	}
	if (sid >= m->cap) {
		size_t old = m->cap;
		if (VEC_RESERVE(m->id, m->cap, (size_t)sid + 1, 256) < 0)
			return -1;
		memset(m->id + old, 0, (m->cap - old) * sizeof *m->id);
	}
	if (!m->id[sid]) {
		const char *s = trace_reader_string(m->rd, sid);
		uint32_t w = trace_writer_intern(m->w, s ? s : "");
		if (w == TRACE_NO_STRING)
			return -1;
		m->id[sid] = w + 1;
	}
	*out = m->id[sid] - 1;
	return 0;
}

int trace_strmap_rec(struct trace_strmap *m, struct trace_rec *rec)
{
	switch (rec->type) {
	case TREC_ALLOC:
	case TREC_FREE:
		return trace_strmap_id(m, rec->u.mem.source, &rec->u.mem.source);
	case TREC_KERNEL:
		return trace_strmap_id(m, rec->u.kernel.name, &rec->u.kernel.name);
	case TREC_RANGE:
		return trace_strmap_id(m, rec->u.range.name, &rec->u.range.name);
	case TREC_API:
		return trace_strmap_id(m, rec->u.api.name, &rec->u.api.name);
	default:
		return 0;
	}
}

void trace_launches_init(struct trace_launches *l)
{
	u64map_init(&l->corr);
}

void trace_launches_free(struct trace_launches *l)
{
	u64map_free(&l->corr);
}

int trace_launches_note(struct trace_launches *l, const struct trace_rec *rec)
{
	if (rec->type != TREC_API || !rec->u.api.corr || rec->u.api.corr == U64MAP_EMPTY)
		return 0;
	return u64map_put(&l->corr, rec->u.api.corr, rec->start) < 0 ? -1 : 0;
}

uint64_t trace_launches_take(struct trace_launches *l, uint64_t corr, uint64_t start)
{
	uint64_t t;
	if (corr && corr != U64MAP_EMPTY && u64map_del(&l->corr, corr, &t) && t <= start)
		return t;
	return start;
}

int trace_xform_close(struct trace_writer **w, const struct trace_reader *rd, char *err,
		      size_t errlen)
{
	const struct trace_trailer *tr = trace_reader_trailer(rd);
	return trace_writer_close(w, tr->present, tr->dropped, err, errlen);
}

struct trace_writer *trace_xform_open(const char *out, const struct trace_reader *rd,
				      const struct trace_label *add, size_t nadd,
				      struct trace_strmap *sm, char *err, size_t errlen)
{
	const struct trace_header *h0 = trace_reader_header(rd);
	struct trace_header h = *h0;
	size_t cap = h0->nlabels + nadd;
	struct trace_label *labels = malloc((cap ? cap : 1) * sizeof *labels);
	struct trace_writer *w = NULL;
	memset(sm, 0, sizeof *sm);
	if (!labels) {
		snprintf(err, errlen, "%s: out of memory", out);
		return NULL;
	}
	h.nlabels = trace_labels_override(labels, 0, cap, h0->labels, h0->nlabels);
	h.nlabels = trace_labels_override(labels, h.nlabels, cap, add, nadd);
	h.labels = labels;
	w = trace_writer_open(out, TRACE_W_ATOMIC, err, errlen);
	if (w && trace_writer_header(w, &h) < 0) {
		snprintf(err, errlen, "%s: writing the header failed", out);
		trace_writer_abort(w);
		w = NULL;
	}
	free(labels);
	if (w)
		trace_strmap_init(sm, rd, w);
	return w;
}
