/*
 * batch_fit_trust.c: how far a trace synthesised at another batch size
 * rests on allocations that did not align across the captures.
 *
 * Captures of real programs rarely align event for event: cuDNN's benchmark
 * mode searches algorithms in the first step with scratch buffers whose
 * number and size differ per batch, and a layer may switch algorithm (and
 * workspace) between batch sizes. The fit aligns what aligns; of the rest,
 * a site paired within its gap is predicted from its counterparts, and one
 * with no counterpart is copied unchanged from the template capture. The
 * copied part is the risk: were those bytes to scale with batch, the
 * synthesised peak would be off by their share times the batch ratio. That
 * bound, taken at the peak of the predicted live bytes, is what decides
 * whether the prediction is given (batch_fit.h, bf_trust).
 */
#include "batch_fit_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bf_trust(const struct bf_model *m, uint64_t batch, struct bf_trust *out)
{
	size_t kt = bf_template_index(m, batch);
	const struct bf_trace *T = m->sorted[kt];
	uint64_t *bytes = calloc(T->nalloc ? T->nalloc : 1, sizeof *bytes);
	char *kind = calloc(T->nalloc ? T->nalloc : 1, 1);
	uint8_t *live = calloc(T->nalloc ? T->nalloc : 1, 1);
	uint64_t *sz = calloc(m->n, sizeof *sz);
	if (!bytes || !kind || !live || !sz) {
		free(bytes);
		free(kind);
		free(live);
		free(sz);
		return -1;
	}
	struct bf_trust t = {.batch = batch, .template_batch = T->batch, .sites = T->nalloc};
	for (size_t s = 0; s < T->nalloc; s++) {
		bytes[s] = bf_predict_template_site(m, kt, s, batch, sz, &kind[s]);
		t.paired += kind[s] == 'p';
		t.copied += kind[s] == 'u';
	}
	/* the live walk of bf_live_at, on the predicted sizes */
	uint64_t cur = 0, cur_p = 0, cur_u = 0;
	size_t site = 0;
	for (size_t i = 0; i < T->nrec; i++) {
		const struct trace_rec *r = &T->rec[i];
		size_t s;
		int sign;
		if (r->type == TREC_ALLOC) {
			s = site++;
			live[s] = 1;
			sign = 1;
		} else if (r->type == TREC_FREE && (s = T->free_site[i]) != NO_IDX && live[s]) {
			live[s] = 0;
			sign = -1;
		} else {
			continue;
		}
		uint64_t b = bytes[s];
		cur = sign > 0 ? cur + b : cur - b;
		if (kind[s] == 'p')
			cur_p = sign > 0 ? cur_p + b : cur_p - b;
		if (kind[s] == 'u')
			cur_u = sign > 0 ? cur_u + b : cur_u - b;
		if (cur > t.peak_live) {
			t.peak_live = cur;
			t.paired_live = cur_p;
			t.copied_live = cur_u;
		}
	}
	double ratio = T->batch ? ((double)batch - (double)T->batch) / (double)T->batch : 0;
	if (ratio < 0)
		ratio = -ratio;
	t.bound = t.peak_live ? (double)t.copied_live * ratio / (double)t.peak_live : 0;
	*out = t;
	free(bytes);
	free(kind);
	free(live);
	free(sz);
	return 0;
}

int bf_trust_check(const struct bf_model *m, uint64_t batch, double max_bound,
		   struct bf_trust *t, char *err, size_t errlen)
{
	if (bf_trust(m, batch, t) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (t->bound <= max_bound)
		return 0;
	const struct bf_report *r = &m->rep;
	snprintf(err, errlen,
		 "the prediction at batch %" PRIu64 " cannot be trusted: %.1f%% of its peak live "
		 "bytes are %zu allocations that have no counterpart in the other captures and are "
		 "copied unchanged from the batch-%" PRIu64 " capture; were they to scale with batch, "
		 "the peak would move by up to %.1f%% (limit --max-unaligned %.1f%%). First "
		 "misalignment: %s. Capture at batch sizes nearer %" PRIu64 " (around it on both "
		 "sides), or with a fixed algorithm choice (torch.backends.cudnn.benchmark=False; "
		 "the CNN's --algo fastest), or raise --max-unaligned to accept the bound",
		 batch, t->peak_live ? 100.0 * (double)t->copied_live / (double)t->peak_live : 0.0,
		 t->copied, t->template_batch, 100 * t->bound, 100 * max_bound,
		 r->misalign[0] ? r->misalign : "-", batch);
	return -1;
}
