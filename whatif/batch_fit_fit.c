/*
 * batch_fit_fit.c: the batch-size what-if, stage 3: each aligned site's size
 * fitted against the batch size (constant, linear, or interpolated; the
 * workspace rules of docs/whatif.md), the predictions made from the fits,
 * unaligned sites paired within their gap and predicted from their
 * counterparts, and the per-site TSV (--sites).
 */
#include "batch_fit_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void bf_linfit(const double *x, const double *y, size_t n, double *a, double *b)
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
	m->linear_tol = tol;
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
	if (bf_align(m) < 0)
		goto nomem;
	rep->aligned_prefix = m->ncev;
	rep->aligned_suffix = m->sorted[0]->nev;
	int full = !rep->misalign[0];
	if (!full && o && o->strict_align) {
		snprintf(err, errlen, "the captures do not align at %s (without --strict-align the "
			 "unaligned part is paired or copied from the nearest capture)", rep->misalign);
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
			size_t c = bf_canon_site(m, t, s);
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
		bf_linfit(x, y, np, &f->a, &f->b);
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
			if (!streq_null(tstr(A, A->rec[A->kern[i]].u.kernel.name),
					tstr(B, B->rec[B->kern[i]].u.kernel.name))) {
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
	if (lo == n) {
		/* below every capture: a search follows the trend of the two
		 * smallest captures down when they are one regime (the same
		 * largest candidate, growing at most in proportion), no lower
		 * than in proportion; a step function is not extrapolated */
		if (limit >= 0 && n >= 2 && y[1] >= y[0] && y[1] <= y[0] * (x[1] / x[0]) * 1.05 + 65536) {
			double s = (y[1] - y[0]) / (x[1] - x[0]), v = y[0] + s * (xb - x[0]);
			double floor = y[0] * xb / x[0];
			return v > floor ? v : floor;
		}
		return y[hi];
	}
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
	size_t c = bf_canon_site(m, t, site);
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
	size_t c = bf_canon_site(m, t, site);
	return c == NO_IDX ? 'u' : m->fit[c].kind;
}

/* ------------------------------------------- unaligned sites, paired */

/* The capture the trace at BATCH is built on: the nearest (ties: larger). */
size_t bf_template_index(const struct bf_model *m, uint64_t batch)
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
		if (m->rev_ev[kt][i] != NO_IDX && !bf_ev_static(T, i)) {
			cp = m->rev_ev[kt][i];
			break;
		}
	for (size_t i = e + 1; i < T->nev; i++)
		if (m->rev_ev[kt][i] != NO_IDX && !bf_ev_static(T, i)) {
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
uint64_t bf_predict_template_site(const struct bf_model *m, size_t kt, size_t s,
				  uint64_t batch, uint64_t *sz, char *kind)
{
	const struct bf_trace *T = m->sorted[kt];
	size_t c = bf_canon_site(m, T, s);
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
	size_t kt = bf_template_index(m, batch);
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
		uint64_t p = bf_predict_template_site(m, kt, s, batch, sz, &kind);
		size_t c = bf_canon_site(m, T, s);
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
