/*
 * batch_fit_interval.c: the range of a batch-size prediction where sites
 * cannot be predicted (batch_fit.h, "interval of a prediction").
 *
 * A workspace is the need of the algorithm chosen at that batch, or, in the
 * warm-up step's algorithm search, the largest need of the candidates tried
 * within the search limit. Where the captures around the batch show another
 * algorithm (or another largest candidate) on each side, or a counterpart
 * only on one side, or the batch lies outside the captures where nothing
 * says the regime stays, the site's size is a range, from one rule: every
 * candidate's need grows with the batch, at most in proportion. The range
 * of live bytes follows from the sites at their low and high bounds (it is
 * monotone in the sizes). Reserved bytes under a caching allocator are not:
 * the replays at the bounds are kept for information, and the bounds are
 * argued per policy (bf_interval_replay; docs/whatif.md "Bounds of reserved
 * memory"): lower, every policy, the live bytes at the low bounds; upper,
 * cuda_malloc, the high-bound replay; pytorch (defaults), the replay
 * without the unpredictable requests plus one segment each at its high
 * bound and one per predicted request allocated in their pools while they
 * are live; no upper bound where an empty_cache falls while one is live,
 * or a replay ran out of memory, or for other policies.
 */
#include "batch_fit_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/tmpfile.h"
#include "../sim/engine.h"

/*
 * Can one regime (one algorithm, or one search whose largest candidate
 * stays the same) explain sizes YA at batch XA and YB at XB (XA < XB)? A
 * workspace of one algorithm grows with the batch, at most in proportion
 * (bytes = a + b*batch with a, b >= 0); a size that falls, or grows faster
 * than the batch, says the algorithm (or the search's largest candidate)
 * changed between the two.
 */
static int one_regime(double xa, double ya, double xb, double yb)
{
	return yb >= ya * 0.999 && yb <= ya * (xb / xa) * 1.05 + 65536;
}

/*
 * Do the N sizes Y at batches X lie on one line (three or more, every
 * residual within TOL of the largest size)? Only then do the captures show
 * one regime across them: sizes that merely never fall nor grow faster than
 * the batch between neighbours may still change their largest candidate
 * (vgg conv1_1.fwd's search: 65 MiB at 8, 260 at 32, in proportion, then
 * 301.5 at 128, where that candidate crossed the limit and another, growing
 * in proportion again, took over: 603 MiB at 256, not the 357 of the trend).
 */
static int on_one_line(const double *x, const double *y, size_t n, double tol)
{
	if (n < 3)
		return 0;
	double a, b, mx = 0, res = 0;
	bf_linfit(x, y, n, &a, &b);
	for (size_t k = 0; k < n; k++) {
		double r = fabs(y[k] - (a + b * x[k]));
		if (r > res)
			res = r;
		if (y[k] > mx)
			mx = y[k];
	}
	return res <= tol * mx;
}

/*
 * Bounds of site S of template KT at BATCH: 1 with [*LO, *HI] when its size
 * there cannot be predicted from the captures (a workspace whose algorithm,
 * or whose search's largest candidate, changed between the captures around
 * BATCH, or whose counterpart is missing in one of them), else 0 with LO =
 * HI = the prediction. The bounds rest on one rule: every candidate's need
 * grows with the batch, at most in proportion. So an algorithm seen with Y
 * bytes at X needs between Y and Y*N/X at N > X, between Y*N/X and Y below
 * X; a search takes the largest need of the candidates within the search
 * limit. Outside the captures a site gets bounds unless its sizes lie on one
 * line (three captures or more: one regime to extrapolate); a search above
 * them always does (a candidate smaller at the largest capture may overtake
 * its largest, or that one cross the limit). R, when not NULL, gets the
 * site's description and the reason.
 */
int bf_template_site_bounds(const struct bf_model *m, size_t kt, size_t s, uint64_t batch,
			    uint64_t *sz, uint64_t *lo, uint64_t *hi, struct bf_site_range *r)
{
	const struct bf_trace *T = m->sorted[kt];
	char kind;
	uint64_t p = bf_predict_template_site(m, kt, s, batch, sz, &kind);
	*lo = *hi = p;
	if (!T->alloc_ws[s])
		return 0; /* activations, weights: their fits stand */
	double x[64], y[64], N = (double)batch, limit = m->search_limit;
	size_t n = 0;
	size_t c = bf_canon_site(m, T, s);
	for (size_t k = 0; k < m->n && n < 64; k++) {
		uint64_t v = c != NO_IDX ? m->sizes[k][c] : kind == 'p' ? sz[k] :
			     k == kt ? T->rec[T->alloc_rec[s]].u.mem.bytes : 0;
		if (!v)
			continue;
		x[n] = (double)m->sorted[k]->batch;
		y[n++] = (double)v;
	}
	if (!n || (c != NO_IDX && m->fit[c].kind == 'c'))
		return 0;
	int search = T->alloc_search[s];
	int consistent = 1;
	for (size_t i = 0; i + 1 < n; i++)
		if (!one_regime(x[i], y[i], x[i + 1], y[i + 1]))
			consistent = 0;
	/* outside the captures a trend is trusted only where they show one
	 * regime: every capture on one line (with two, nothing says so) */
	int line = consistent && on_one_line(x, y, n, m->linear_tol);
	double l, h;
	int inside = N > (double)m->rep.lo_batch && N < (double)m->rep.hi_batch;
	for (size_t k = 0; k < n; k++)
		if (x[k] == N)
			return 0; /* a capture at BATCH: its size */
	size_t i = 0;
	while (i + 1 < n && x[i + 1] < N)
		i++;
	enum bf_why why;
	double xa, xb;
	if (inside && (x[0] > N || x[n - 1] < N)) {
		/* a counterpart is missing on one side of BATCH: the site may
		 * not exist there (another algorithm, with no workspace) */
		size_t j = x[0] > N ? 0 : n - 1;
		why = BF_WHY_MISSING;
		xa = x[j];
		xb = x[j];
		for (size_t k = 0; k < m->n; k++) {
			/* the capture on the other side of BATCH, nearest it */
			double bk = (double)m->sorted[k]->batch;
			if (j == 0 && bk < N)
				xa = bk;
			if (j == n - 1 && bk > N && xb == x[j])
				xb = bk;
		}
		l = 512;
		h = y[j] * (N > x[j] ? N / x[j] : 1);
		if (search && h > limit)
			h = limit > y[j] ? limit : y[j];
	} else if (inside) {
		if (one_regime(x[i], y[i], x[i + 1], y[i + 1]))
			return 0;
		why = BF_WHY_SWITCH;
		xa = x[i];
		xb = x[i + 1];
		double up = y[i] * N / x[i], down = y[i + 1] * N / x[i + 1];
		l = y[i] < down ? y[i] : down;
		h = up > y[i + 1] ? up : y[i + 1];
		if (search) {
			/* a need over the limit is not tried */
			if (h > limit)
				h = limit > y[i + 1] ? limit : y[i + 1];
			/* the lower capture's largest candidate is still tried
			 * when it cannot have crossed the limit */
			if (up <= limit && y[i] > l)
				l = y[i];
		}
	} else if (N > x[n - 1]) {
		/* a search is the largest need of its candidates: above the
		 * captures a candidate smaller at the largest one, growing in
		 * proportion, may overtake even a trend the captures confirm
		 * (vgg conv4_1.bwd's: 289, 292, 304 MiB at 8, 32, 128, on one
		 * line, 464 MiB at 256) */
		double up = y[n - 1] * N / x[n - 1];
		if (line && !search)
			return 0;
		why = BF_WHY_ABOVE;
		xa = xb = x[n - 1];
		l = search && up > limit ? 512 : y[n - 1];
		h = search && up > limit ? (limit > y[n - 1] ? limit : y[n - 1]) : up;
	} else {
		if (line)
			return 0;
		why = BF_WHY_BELOW;
		xa = xb = x[0];
		l = y[0] * N / x[0];
		h = y[0];
		/* a search whose largest candidate crossed the limit somewhere
		 * above: below the captures that candidate (or a larger one)
		 * may be tried again */
		if (search)
			for (size_t k = 0; k + 1 < n; k++)
				if (y[k + 1] < y[k] * 0.999 && y[k] > h)
					h = y[k];
	}
	if ((double)p < l)
		l = (double)p;
	if ((double)p > h)
		h = (double)p;
	if (l < 1)
		l = 1;
	*lo = (uint64_t)llround(l);
	*hi = (uint64_t)llround(h);
	*lo = (*lo + 511) / 512 * 512;
	*hi = (*hi + 511) / 512 * 512;
	if (*lo > p)
		*lo = p;
	if (*hi < p)
		*hi = p;
	if (*lo >= *hi)
		return 0;
	if (r) {
		const char *rn = tstr(T, T->alloc_range[s]);
		*r = (struct bf_site_range){
			.site = s, .line = T->rec[T->alloc_rec[s]].line, .range = rn,
			.search = search, .predicted = p, .lo = *lo, .hi = *hi, .why = why,
			.batch_a = (uint64_t)xa, .batch_b = (uint64_t)xb,
		};
	}
	return 1;
}

/* Bounds of one template site; see batch_fit.h. */
int bf_site_bounds(const struct bf_model *m, uint64_t batch, size_t site, uint64_t *lo,
		   uint64_t *hi)
{
	size_t kt = bf_template_index(m, batch);
	if (site >= m->sorted[kt]->nalloc)
		return -1;
	uint64_t *sz = calloc(m->n, sizeof *sz);
	if (!sz)
		return -1;
	int r = bf_template_site_bounds(m, kt, site, batch, sz, lo, hi, NULL);
	free(sz);
	return r;
}

/* The interval of the prediction at BATCH; see batch_fit.h. */
int bf_interval(const struct bf_model *m, uint64_t batch, struct bf_interval *out)
{
	size_t kt = bf_template_index(m, batch);
	const struct bf_trace *T = m->sorted[kt];
	size_t na = T->nalloc ? T->nalloc : 1;
	uint64_t *b[3] = {calloc(na, sizeof **b), calloc(na, sizeof **b), calloc(na, sizeof **b)};
	uint8_t *live = calloc(na, 1);
	uint64_t *sz = calloc(m->n, sizeof *sz);
	int ret = -1;
	if (!b[0] || !b[1] || !b[2] || !live || !sz)
		goto out;
	struct bf_interval iv = {.batch = batch};
	iv.extrapolated = batch < m->rep.lo_batch || batch > m->rep.hi_batch;
	uint64_t widest = 0;
	for (size_t s = 0; s < T->nalloc; s++) {
		char kind;
		b[1][s] = bf_predict_template_site(m, kt, s, batch, sz, &kind);
		uint64_t lo, hi;
		if (bf_template_site_bounds(m, kt, s, batch, sz, &lo, &hi, NULL)) {
			iv.sites++;
			iv.bytes_lo += lo;
			iv.bytes_hi += hi;
			if (hi - lo > widest) {
				widest = hi - lo;
				iv.worst_site = s;
				iv.worst_lo = lo;
				iv.worst_hi = hi;
			}
		} else {
			lo = hi = b[1][s];
		}
		b[0][s] = lo;
		b[2][s] = hi;
	}
	/* the live walk of bf_live_at, three times */
	uint64_t peak[3] = {0, 0, 0};
	for (int w = 0; w < 3; w++) {
		uint64_t cur = 0;
		size_t site = 0;
		memset(live, 0, na);
		for (size_t i = 0; i < T->nrec; i++) {
			const struct trace_rec *r = &T->rec[i];
			size_t s;
			if (r->type == TREC_ALLOC) {
				s = site++;
				live[s] = 1;
				cur += b[w][s];
			} else if (r->type == TREC_FREE && (s = T->free_site[i]) != NO_IDX && live[s]) {
				live[s] = 0;
				cur -= b[w][s];
			} else {
				continue;
			}
			if (cur > peak[w])
				peak[w] = cur;
		}
	}
	iv.peak_lo = peak[0];
	iv.peak_live = peak[1];
	iv.peak_hi = peak[2];
	*out = iv;
	ret = 0;
out:
	free(b[0]);
	free(b[1]);
	free(b[2]);
	free(live);
	free(sz);
	return ret;
}

/* The sites whose size is a range; see batch_fit.h. */
int bf_interval_sites(const struct bf_model *m, uint64_t batch, struct bf_site_range **out,
		      size_t *n)
{
	size_t kt = bf_template_index(m, batch);
	const struct bf_trace *T = m->sorted[kt];
	uint64_t *sz = calloc(m->n, sizeof *sz);
	struct bf_site_range *v = NULL;
	size_t nv = 0, cap = 0;
	*out = NULL;
	*n = 0;
	if (!sz)
		return -1;
	for (size_t s = 0; s < T->nalloc; s++) {
		struct bf_site_range r;
		uint64_t lo, hi;
		if (!bf_template_site_bounds(m, kt, s, batch, sz, &lo, &hi, &r))
			continue;
		if (nv == cap) {
			size_t nc = cap ? 2 * cap : 16;
			struct bf_site_range *nvp = realloc(v, nc * sizeof *nvp);
			if (!nvp) {
				free(v);
				free(sz);
				return -1;
			}
			v = nvp;
			cap = nc;
		}
		v[nv++] = r;
	}
	free(sz);
	*out = v;
	*n = nv;
	return 0;
}

const char *bf_why_name(enum bf_why why)
{
	switch (why) {
	case BF_WHY_SWITCH: return "algorithm switch";
	case BF_WHY_MISSING: return "no counterpart";
	case BF_WHY_ABOVE: return "extrapolated above";
	case BF_WHY_BELOW: return "extrapolated below";
	default: return "predicted";
	}
}

/* Replay PATH; 0 or -1 with ERR. */
static int replay_one(const char *path, const struct alloc_policy *pol, const char *conf,
		      uint64_t capacity, uint64_t *reserved, uint64_t *allocated, int *oom,
		      char *err, size_t errlen)
{
	struct sim_result res;
	char e[1536];
	struct sim_options o = {
		.trace_path = path, .policy = pol, .conf = conf, .capacity = capacity,
		.addr_mode = DEVICE_ADDR_SYNTHETIC, .timeline_points = 8,
	};
	memset(&res, 0, sizeof res);
	if (sim_run(&o, &res, e, sizeof e) < 0) {
		snprintf(err, errlen, "replaying %s: %s", path, e);
		return -1;
	}
	*reserved = res.peak_reserved;
	*allocated = res.peak_allocated;
	if (res.oom)
		*oom = 1;
	sim_result_free(&res);
	return 0;
}

/* ------------------------------------------------------- the bounds */

/*
 * Does site S of T go to the policy in a replay? What `gpumemsim run` does
 * (sim/engine.h, enum sim_foreign_mode, AUTO): host memory never does;
 * with a label allocator_source=SUBSTR, module globals and device
 * allocations whose source does not contain SUBSTR go beside the policy.
 */
static int to_policy(const struct bf_trace *T, size_t s, const char *sub)
{
	const struct trace_mem *mm = &T->rec[T->alloc_rec[s]].u.mem;
	if (trace_mem_kind_host(mm->kind))
		return 0;
	if (!sub)
		return 1;
	if (mm->kind == TMEM_DEVICE_STATIC || mm->kind == TMEM_MANAGED_STATIC)
		return 0;
	const char *src = tstr(T, mm->source);
	return !src || strstr(src, sub) != NULL;
}

/* pytorch's round_size (default: 512 B granules) and allocation_size (the
 * segment a request that no cached block serves makes): policies/pytorch.c */
static uint64_t pt_round(uint64_t n)
{
	return n < 512 ? 512 : (n + 511) / 512 * 512;
}

static uint64_t pt_segment(uint64_t n)
{
	uint64_t r = pt_round(n), mib = 1024 * 1024;
	if (r <= mib)
		return 2 * mib;
	if (r < 10 * mib)
		return 20 * mib;
	return (r + 2 * mib - 1) / (2 * mib) * (2 * mib);
}

/* A block pytorch gives for N bytes (default conf): N rounded, plus at
 * most the remainder it does not split off (1 MiB in the large pool). */
static uint64_t pt_block_max(uint64_t n)
{
	uint64_t r = pt_round(n);
	return r > 1024 * 1024 ? r + 1024 * 1024 : r;
}

/* What the walk over the template at the sites' bounds gives. */
struct bound_walk {
	uint64_t live_lo;              /* peak of policy bytes requested, low bounds */
	uint64_t pt_alloc_hi;          /* peak of pytorch's largest blocks, high bounds */
	uint64_t segments;             /* pytorch segments of the unpredictable
					* requests at their high bounds */
	size_t not_transient;          /* unpredictable requests something else is
					* allocated (or released) within */
	size_t first_not_transient;    /* the first of them (template site) */
	size_t intruders;              /* predicted requests allocated in the pool
					* and stream of a live unpredictable one */
	uint64_t intruder_segments;    /* one pytorch segment each */
	size_t released;               /* unpredictable requests an empty_cache
					* falls within */
	uint8_t *drop;                 /* per template site: unpredictable, to the
					* policy (the trace without them) */
};

static int bound_walk(const struct bf_model *m, uint64_t batch, struct bound_walk *bw)
{
	size_t kt = bf_template_index(m, batch);
	const struct bf_trace *T = m->sorted[kt];
	size_t na = T->nalloc ? T->nalloc : 1;
	uint64_t *lo = calloc(na, sizeof *lo), *hi = calloc(na, sizeof *hi);
	uint64_t *sz = calloc(m->n, sizeof *sz);
	uint8_t *live = calloc(na, 1), *pol = calloc(na, 1), *pool = calloc(na, 1);
	uint8_t *intruded = calloc(na, 1);
	size_t *open = calloc(na, sizeof *open);
	int ret = -1;
	memset(bw, 0, sizeof *bw);
	bw->drop = calloc(na, 1);
	if (!lo || !hi || !sz || !live || !pol || !pool || !intruded || !open || !bw->drop)
		goto out;
	const char *sub = trace_header_label(&T->hdr, SIM_SOURCE_LABEL);
	for (size_t s = 0; s < T->nalloc; s++) {
		pol[s] = (uint8_t)to_policy(T, s, sub);
		int b = bf_template_site_bounds(m, kt, s, batch, sz, &lo[s], &hi[s], NULL);
		/* the pools it may go to: 1 small, 2 large */
		pool[s] = (uint8_t)((pt_round(lo[s]) <= 1024 * 1024) | (pt_round(hi[s]) > 1024 * 1024) << 1);
		/* a range inside one of pytorch's 512 B granules is no uncertainty
		 * for its blocks: every size in it, the prediction too, rounds to
		 * the same block, so its decisions are the prediction's */
		if (b && pol[s] && pt_round(lo[s]) == pt_round(hi[s])) {
			char kind;
			uint64_t p = bf_predict_template_site(m, kt, s, batch, sz, &kind);
			if (pt_round(p) == pt_round(lo[s]))
				b = 0;
		}
		if (b && pol[s]) {
			bw->drop[s] = 1;
			bw->segments += pt_segment(hi[s]);
		}
	}
	/* the live walk. An unpredictable request is transient when no other
	 * allocation that could share its pool (pytorch keeps a small pool,
	 * blocks up to 1 MiB, and a large one, per stream) and no empty_cache
	 * falls between its allocation and its free. A request allocated in
	 * such a pool while unpredictable ones are live (an intruder) may
	 * find no cached block where, without them, it would have: it makes
	 * at most one segment, counted once however many it intrudes on. An
	 * unpredictable request never freed stays live to the end. */
	uint64_t cur_lo = 0, cur_hi = 0;
	size_t site = 0, nopen = 0;
	for (size_t i = 0; i < T->nrec; i++) {
		const struct trace_rec *r = &T->rec[i];
		size_t s;
		if (r->type == TREC_ALLOC) {
			s = site++;
			if (!pol[s])
				continue;
			/* the engine gives a request without a stream stream 0 */
#define STREAM_OF(x) ((x) == TRACE_NO_STREAM ? 0 : (x))
			uint32_t st = STREAM_OF(r->u.mem.stream);
			int intrudes = 0;
			for (size_t k = 0; k < nopen; k++) {
				size_t u = open[k];
				if (STREAM_OF(T->rec[T->alloc_rec[u]].u.mem.stream) != st ||
				    !(pool[u] & pool[s]))
					continue;
				intrudes = 1;
				if (!intruded[u]) {
					intruded[u] = 1;
					if (!bw->not_transient++)
						bw->first_not_transient = u;
				}
			}
#undef STREAM_OF
			/* an unpredictable intruder's segment is counted already */
			if (intrudes && !bw->drop[s]) {
				bw->intruders++;
				bw->intruder_segments += pt_segment(hi[s]);
			}
			if (bw->drop[s])
				open[nopen++] = s;
			live[s] = 1;
			cur_lo += lo[s];
			cur_hi += pt_block_max(hi[s]);
		} else if (r->type == TREC_FREE && (s = T->free_site[i]) != NO_IDX && live[s]) {
			live[s] = 0;
			cur_lo -= lo[s];
			cur_hi -= pt_block_max(hi[s]);
			for (size_t k = 0; k < nopen; k++)
				if (open[k] == s) {
					open[k] = open[--nopen];
					break;
				}
			continue;
		} else if (r->type == TREC_CONTROL && r->u.control.kind == TCTL_EMPTY_CACHE) {
			for (size_t k = 0; k < nopen; k++) {
				bw->released++;
				if (!intruded[open[k]]) {
					intruded[open[k]] = 1;
					if (!bw->not_transient++)
						bw->first_not_transient = open[k];
				}
			}
			nopen = 0;
			continue;
		} else {
			continue;
		}
		if (cur_lo > bw->live_lo)
			bw->live_lo = cur_lo;
		if (cur_hi > bw->pt_alloc_hi)
			bw->pt_alloc_hi = cur_hi;
	}
	ret = 0;
out:
	if (ret < 0) {
		free(bw->drop);
		bw->drop = NULL;
	}
	free(lo);
	free(hi);
	free(sz);
	free(live);
	free(pol);
	free(pool);
	free(intruded);
	free(open);
	return ret;
}

/* Write PATH: the trace at IN without the allocations of the sites DROP
 * marks (numbered as the template's, which IN was synthesised from) and
 * their frees. 0, or -1 with ERR. */
static int write_without(const char *in, const uint8_t *drop, size_t nsites, const char *path,
			 char *err, size_t errlen)
{
	struct bf_trace *t = NULL;
	uint8_t *rdrop = NULL;       /* per record */
	int ret = -1;
	if (bf_load(in, &t, err, errlen) < 0)
		return -1;
	if (t->nalloc != nsites) {
		snprintf(err, errlen, "%s: %zu allocations, the template has %zu", in, t->nalloc,
			 nsites);
		goto out;
	}
	rdrop = calloc(t->nrec ? t->nrec : 1, 1);
	if (!rdrop) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t s = 0; s < nsites; s++) {
		if (!drop[s])
			continue;
		rdrop[t->alloc_rec[s]] = 1;
		if (t->alloc_free_rec[s] != NO_IDX)
			rdrop[t->alloc_free_rec[s]] = 1;
	}
	ret = bf_write_records(t, rdrop, path, err, errlen);
out:
	free(rdrop);
	bf_free(t);
	return ret;
}

/* A temporary trace path in TMPDIR (created empty); 0 or -1 with ERR. */
static int tmp_trace(char *path, size_t len, char *err, size_t errlen)
{
	if (tmp_file(path, len, "bound") < 0) {
		snprintf(err, errlen, "cannot create a temporary trace in %s", tmp_dir());
		return -1;
	}
	return 0;
}

/* The prediction, its replays at the bounds, and the bounds; see
 * batch_fit.h and docs/whatif.md "Bounds of reserved memory". */
int bf_interval_replay(const struct bf_model *m, uint64_t batch, const char *point_path,
		       const struct alloc_policy *policy, const char *conf, uint64_t capacity,
		       struct bf_replay_range *out, char *err, size_t errlen)
{
	struct bf_replay_range r = {.replays = 1};
	struct bf_interval iv;
	struct bound_walk bw = {0};
	uint64_t rep_res[2] = {0, 0}, rep_all[2] = {0, 0};
	if (replay_one(point_path, policy, conf, capacity, &r.reserved, &r.allocated, &r.oom,
		       err, errlen) < 0)
		return -1;
	r.reserved_lo = r.reserved_hi = r.replay_reserved_lo = r.replay_reserved_hi = r.reserved;
	r.allocated_lo = r.allocated_hi = r.replay_allocated_lo = r.replay_allocated_hi =
		r.allocated;
	r.reserved_bounded = r.allocated_bounded = 1;
	r.rule = "every site predicted";
	if (bf_interval(m, batch, &iv) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!iv.sites)
		goto done;
	for (int w = -1; w <= 1; w += 2) {
		char path[4096];
		if (tmp_trace(path, sizeof path, err, errlen) < 0)
			return -1;
		uint64_t res_b, all_b;
		int bad = bf_synth_bound(m, batch, w, path, err, errlen) < 0 ||
			  replay_one(path, policy, conf, capacity, &res_b, &all_b, &r.oom, err,
				     errlen) < 0;
		unlink(path);
		if (bad)
			return -1;
		r.replays++;
		rep_res[w > 0] = res_b;
		rep_all[w > 0] = all_b;
		if (res_b < r.replay_reserved_lo)
			r.replay_reserved_lo = res_b;
		if (res_b > r.replay_reserved_hi)
			r.replay_reserved_hi = res_b;
		if (all_b < r.replay_allocated_lo)
			r.replay_allocated_lo = all_b;
		if (all_b > r.replay_allocated_hi)
			r.replay_allocated_hi = all_b;
	}
	if (bound_walk(m, batch, &bw) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r.not_transient = bw.not_transient;
	r.not_transient_site = bw.first_not_transient;
	r.uncertain_segments = bw.segments;
	r.intruders = bw.intruders;
	r.intruder_segments = bw.intruder_segments;
	/* lower: every policy serves a request with a block at least its size,
	 * and reserves at least what it serves; the live bytes are monotone in
	 * the sizes, so their peak at the low bounds is below every outcome's */
	r.reserved_lo = r.allocated_lo = bw.live_lo;
	r.reserved_hi = r.allocated_hi = UINT64_MAX;
	r.reserved_bounded = r.allocated_bounded = 0;
	int pt_default = !strcmp(policy->name, "pytorch") && (!conf || !*conf);
	if (!strcmp(policy->name, "cuda_malloc")) {
		/* no cache: reserved = allocated = the live requests, monotone in
		 * the sizes; the replays at the bounds are the bounds */
		r.reserved_lo = rep_res[0];
		r.reserved_hi = rep_res[1];
		r.allocated_lo = rep_all[0];
		r.allocated_hi = rep_all[1];
		r.reserved_bounded = r.allocated_bounded = 1;
		r.rule = "no cache: monotone in the sizes";
	} else if (pt_default) {
		r.allocated_hi = bw.pt_alloc_hi;
		r.allocated_bounded = 1;
		if (bw.released) {
			r.rule = "no upper bound: an empty_cache falls while an unpredictable request is live";
		} else {
			char path[4096];
			if (tmp_trace(path, sizeof path, err, errlen) < 0)
				goto fail;
			size_t kt = bf_template_index(m, batch);
			uint64_t all_c;
			int oom_c = 0;
			int bad = write_without(point_path, bw.drop, m->sorted[kt]->nalloc, path, err,
						errlen) < 0 ||
				  replay_one(path, policy, conf, capacity, &r.certain_reserved, &all_c,
					     &oom_c, err, errlen) < 0;
			unlink(path);
			if (bad)
				goto fail;
			r.replays++;
			if (oom_c || r.oom) {
				r.rule = "no upper bound: a replay ran out of memory (releases)";
			} else {
				r.reserved_hi = r.certain_reserved + bw.segments + bw.intruder_segments;
				r.reserved_bounded = 1;
				r.rule = bw.intruders
						 ? "pytorch: replay without the unpredictable requests + one "
						   "segment each at its high bound + one per request allocated "
						   "in their pools while they are live"
						 : "pytorch: replay without the unpredictable requests + one "
						   "segment each at its high bound";
			}
		}
	} else {
		r.rule = !strcmp(policy->name, "pytorch")
				 ? "no upper bound: pytorch with knobs (the argument is for the defaults)"
				 : "no upper bound: a caching policy is not monotone in the sizes";
	}
	free(bw.drop);
done:
	*out = r;
	return 0;
fail:
	free(bw.drop);
	return -1;
}
