/*
 * batch_fit_align.c: the batch-size what-if, stage 2: the memory events of
 * every capture matched with the smallest capture's (batch_fit_int.h says
 * how); the events and sites aligned in all of them are the canonical ones,
 * and the first one without a counterpart is described for the message.
 */
#include "batch_fit_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- alignment */

static size_t trace_index(const struct bf_model *m, const struct bf_trace *t)
{
	for (size_t k = 0; k < m->n; k++)
		if (m->sorted[k] == t)
			return k;
	return 0;
}

/* Canonical site of site I of trace T, or NO_IDX when unaligned. */
size_t bf_canon_site(const struct bf_model *m, const struct bf_trace *t, size_t i)
{
	if (i == NO_IDX || i >= t->nalloc)
		return NO_IDX;
	return m->rev_site[trace_index(m, t)][i];
}

/* Canonical event of event E of trace T, or NO_IDX. */
size_t bf_canon_event(const struct bf_model *m, const struct bf_trace *t, size_t e)
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
	const struct trace_rec *rx = &A->rec[x->rec], *ry = &B->rec[y->rec];
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
	const struct trace_rec *r = &t->rec[ev->rec];
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
	/* exactly in proportion to the batch (an activation): as good as equal */
	if (fabs((double)shi - (double)slo * r) <= 512 * r)
		return 4;
	int wa = x->site != NO_IDX && A->alloc_ws[x->site], wb = y->site != NO_IDX && B->alloc_ws[y->site];
	if (shi >= slo && (double)shi <= (double)slo * r * 1.05 + 65536)
		return wa == wb ? 3 : 1; /* a workspace and an activation: hardly one site */
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
int bf_ev_static(const struct bf_trace *T, size_t e)
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
			if (bf_ev_static(A, i) == st)
				ia[n++] = i;
		for (size_t j = 0; j < B->nev; j++)
			if (bf_ev_static(B, j) == st)
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
int bf_align(struct bf_model *m)
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
