/*
 * explain_mech.c: the mechanism behind a flagged point of `explain batch`,
 * in the policy's own words (explain.h, explain_mech_*).
 *
 * The policy reports every device range it takes or gives back, with the
 * rule that sized it and what it held free at that moment (policy.h,
 * decisions; sim/decisions.h logs them). At the moment of each point's
 * peak this file lists the ranges held, each with the decision that took
 * it, how full it was (the blocks live then, by address), and the growth
 * that set the peak (the last before the moment). Between two points it
 * compares those lists and says, in one sentence with the numbers, which
 * range one batch needed that the other did not, and why the policy took
 * it: a BFC region sized by the doubling rule while the free space was
 * split across regions; a PyTorch segment cudaMalloc'd because no cached
 * block fitted, or a cached scratch segment kept from an earlier request.
 */
#include "explain.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "../sim/decisions.h"
#include "batch_fit_int.h"

/* Name the request at LINE of T: "search scratch conv4_2.bwd". */
static void origin(const struct bf_trace *t, uint64_t line, char *buf, size_t len)
{
	size_t s = explain_site_at(t, line);
	buf[0] = 0;
	if (s == NO_IDX)
		return;
	const char *rn = tstr(t, t->alloc_range[s]);
	const char *tag = t->alloc_search[s] ? "search scratch " : t->alloc_ws[s] ? "workspace " : "";
	snprintf(buf, len, "%s%s", tag, rn ? rn : "(no range)");
}

static int cmp_block(const void *a, const void *b)
{
	const struct explain_block *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Bytes of the blocks B[0..N) (by address) inside [A, A + LEN). */
static uint64_t live_in(const struct explain_block *b, size_t n, uint64_t a, uint64_t len)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (b[mid].addr < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t sum = 0;
	for (size_t i = lo; i < n && b[i].addr < a + len; i++)
		sum += b[i].bytes;
	return sum;
}

/* H from the GROW at index DEC of L (its nth growth NTH). */
static void hold_from(struct explain_hold *h, const struct sim_decisions *l, size_t dec,
		      uint32_t nth, const struct bf_trace *t)
{
	const struct sim_decision *x = &l->v[dec];
	memset(h, 0, sizeof *h);
	h->addr = x->d.addr;
	h->bytes = x->d.bytes;
	h->nth = nth;
	h->what = x->d.what ? x->d.what : "range";
	h->why = x->d.why ? x->d.why : "";
	h->request = x->d.request;
	h->line = x->line;
	h->free_then = x->d.free_bytes;
	h->largest_then = x->d.largest_free;
	h->nfree_then = x->d.free_blocks;
	h->prev_bytes = x->d.prev_bytes;
	h->count_after = (uint32_t)x->d.count;
	if (x->d.request)
		origin(t, x->line, h->origin, sizeof h->origin);
}

static int cmp_hold_bytes(const void *a, const void *b)
{
	const struct explain_hold *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->nth < y->nth ? -1 : x->nth > y->nth;
}

static int cmp_hold_nth(const void *a, const void *b)
{
	const struct explain_hold *x = a, *y = b;
	if (x->nth != y->nth)
		return x->nth < y->nth ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void explain_mech_point(struct explain_point *p, const struct bf_trace *t,
			const struct sim_decisions *l, const struct explain_moment *m,
			uint64_t context)
{
	struct explain_mech *x = &p->mech;
	memset(x, 0, sizeof *x);
	x->device_peak = m->device_peak;
	x->foreign_peak = m->foreign_peak;
	x->context = context;
	if (!l)
		return;
	x->have = 1;
	size_t ndec = m->ndec < l->n ? m->ndec : l->n;
	/* every GROW's place among the growths */
	uint32_t *nth = calloc(l->n ? l->n : 1, sizeof *nth);
	struct sim_holding *h = NULL;
	size_t nh = 0;
	if (!nth || sim_decisions_holdings(l, ndec, &h, &nh) < 0) {
		free(nth);
		x->have = 0;
		return;
	}
	struct why_bytes { const char *why; uint64_t bytes; } rel[16];
	size_t nrel = 0;
	size_t last = NO_IDX;
	for (size_t i = 0; i < l->n; i++) {
		const struct policy_decision *d = &l->v[i].d;
		if (d->kind == POLICY_DEC_GROW) {
			nth[i] = (uint32_t)++x->ngrow;
			if (i < ndec)
				last = i;
		} else if (d->kind == POLICY_DEC_RELEASE && i < ndec) {
			x->nrel++;
			x->rel_bytes += d->bytes;
			size_t k = 0;
			while (k < nrel && rel[k].why != d->why)
				k++;
			if (k == nrel && nrel < 16)
				rel[nrel++] = (struct why_bytes){d->why, 0};
			if (k < nrel)
				rel[k].bytes += d->bytes;
		} else if (d->kind == POLICY_DEC_RULE && d->what && !strcmp(d->what, "limit")) {
			x->limit = d->bytes;
		}
	}
	/* the reason of the most bytes */
	uint64_t best = 0;
	for (size_t k = 0; k < nrel; k++)
		if (rel[k].bytes > best) {
			best = rel[k].bytes;
			x->rel_why = rel[k].why;
		}
	struct explain_block *b = NULL;
	if (m->nlive) {
		b = malloc(m->nlive * sizeof *b);
		if (b) {
			memcpy(b, m->live, m->nlive * sizeof *b);
			qsort(b, m->nlive, sizeof *b, cmp_block);
		}
	}
	size_t nb = b ? m->nlive : 0;
	struct explain_hold *all = nh ? calloc(nh, sizeof *all) : NULL;
	if (nh && !all) {
		x->have = 0;
		goto out;
	}
	for (size_t i = 0; i < nh; i++) {
		hold_from(&all[i], l, h[i].dec, nth[h[i].dec], t);
		all[i].addr = h[i].addr;   /* what is left of it */
		all[i].bytes = h[i].bytes;
		all[i].live = live_in(b, nb, h[i].addr, h[i].bytes);
	}
	x->nheld = nh;
	if (nh > EXPLAIN_MAX_HOLD) {
		qsort(all, nh, sizeof *all, cmp_hold_bytes);
		for (size_t i = EXPLAIN_MAX_HOLD; i < nh; i++) {
			x->rest_bytes += all[i].bytes;
			x->rest_live += all[i].live;
		}
		nh = EXPLAIN_MAX_HOLD;
	}
	qsort(all, nh, sizeof *all, cmp_hold_nth);
	memcpy(x->hold, all, nh * sizeof *all);
	x->nhold = nh;
	if (last != NO_IDX) {
		hold_from(&x->last, l, last, nth[last], t);
		x->last.live = live_in(b, nb, x->last.addr, x->last.bytes);
	}
out:
	free(all);
	free(b);
	free(h);
	free(nth);
}

/* "1st", "2nd", "3rd", "4th", ... */
static const char *ordinal(uint64_t n, char *buf, size_t len)
{
	const char *suf = "th";
	if (n % 100 < 11 || n % 100 > 13)
		suf = n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
	snprintf(buf, len, "%" PRIu64 "%s", n, suf);
	return buf;
}

/* Append printf-style text to BUF (of LEN). */
static void add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	if (n + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

static uint64_t held_bytes(const struct explain_mech *x)
{
	uint64_t sum = x->rest_bytes;
	for (size_t i = 0; i < x->nhold; i++)
		sum += x->hold[i].bytes;
	return sum;
}

/* BFC-like (regions that are never reused for another size): compare the
 * regions of X (the higher peak) and Y by their order of growth. */
static void word_regions(char *out, size_t len, char *lab, size_t lablen,
			 const struct explain_point *px, const struct explain_point *py)
{
	const struct explain_mech *x = &px->mech, *y = &py->mech;
	char b1[32], b2[32], b3[32], o1[32];
	/* the first region X needed beyond Y's count, else the first whose
	 * size differs */
	size_t k = 0;
	if (x->nheld > y->nheld && y->nheld < x->nhold)
		k = y->nheld;
	else
		while (k < x->nhold && k < y->nhold && x->hold[k].bytes == y->hold[k].bytes)
			k++;
	if (k >= x->nhold) {
		/* X holds nothing Y does not */
		add(out, len, "the same %" PRIu64 " %ss (%s) at %" PRIu64 " and %" PRIu64,
		    x->nheld, x->nhold ? x->hold[0].what : "range",
		    size_fmt(held_bytes(x), b1, sizeof b1), px->batch, py->batch);
		return;
	}
	const struct explain_hold *h = &x->hold[k];
	snprintf(lab, lablen, "%" PRIu64 ": %s %s %s", px->batch, ordinal(k + 1, o1, sizeof o1),
		 h->what, size_fmt(h->bytes, b1, sizeof b1));
	add(out, len, "at %" PRIu64 " the peak needed a %s %s of %s", px->batch,
	    ordinal(k + 1, o1, sizeof o1), h->what, size_fmt(h->bytes, b1, sizeof b1));
	if (h->prev_bytes && strstr(h->why, "doubled"))
		add(out, len, " (the next size, %s, was short: doubled)",
		    size_fmt(h->prev_bytes, b2, sizeof b2));
	else if (strstr(h->why, "twice the last"))
		add(out, len, " (twice the last)");
	else
		add(out, len, " (%s)", h->why);
	add(out, len, " for a %s request", size_fmt(h->request, b2, sizeof b2));
	if (h->count_after > 1)
		add(out, len, " when %s was free in %u %ss but split (largest chunk %s)",
		    size_fmt(h->free_then, b1, sizeof b1), h->count_after - 1, h->what,
		    size_fmt(h->largest_then, b3, sizeof b3));
	if (k < y->nhold) {
		const struct explain_hold *g = &y->hold[k];
		add(out, len, "; at %" PRIu64 " the %s %s was %s", py->batch, o1, g->what,
		    size_fmt(g->bytes, b1, sizeof b1));
		if (strstr(g->why, "twice the last"))
			add(out, len, " (twice the last)");
		else
			add(out, len, " (%s)", g->why);
		add(out, len, " for a %s request", size_fmt(g->request, b2, sizeof b2));
		if (x->nheld != y->nheld)
			add(out, len, ", %" PRIu64 " %ss in all", y->nheld, g->what);
	} else {
		add(out, len, "; at %" PRIu64 " the working set fitted in %" PRIu64 " %ss (%s)",
		    py->batch, y->nheld, h->what, size_fmt(held_bytes(y), b1, sizeof b1));
	}
	size_t more = 0;
	for (size_t j = 0; j < x->nhold; j++)
		more += j != k && (j >= y->nhold || x->hold[j].bytes != y->hold[j].bytes);
	if (more)
		add(out, len, "; %zu other %s%s", more, h->what, more > 1 ? "s differ" : " differs");
}

/* The ranges of X wholly free at the moment (cached, kept): their bytes
 * and count, the largest two into TOP. */
static uint64_t idle(const struct explain_mech *x, size_t *n, const struct explain_hold **top)
{
	uint64_t sum = 0;
	*n = 0;
	top[0] = top[1] = NULL;
	for (size_t i = 0; i < x->nhold; i++) {
		const struct explain_hold *h = &x->hold[i];
		if (h->live)
			continue;
		sum += h->bytes;
		(*n)++;
		if (!top[0] || h->bytes > top[0]->bytes) {
			top[1] = top[0];
			top[0] = h;
		} else if (!top[1] || h->bytes > top[1]->bytes) {
			top[1] = h;
		}
	}
	return sum;
}

static const char *origin_or(const struct explain_hold *h)
{
	return h->origin[0] ? h->origin : "(no range)";
}

/* Caching allocators (segments, mapped pages): what X's cache kept free
 * at its peak, and why those were taken, against Y. A (B): the step's
 * first (second) point, for the signs. */
static void word_cache(char *out, size_t len, char *lab, size_t lablen,
		       const struct explain_point *px, const struct explain_point *py,
		       const struct explain_point *a, const struct explain_point *b)
{
	const struct explain_mech *x = &px->mech, *y = &py->mech;
	const struct explain_hold *tx[2], *ty[2];
	size_t nx, ny;
	uint64_t ix = idle(x, &nx, tx), iy = idle(y, &ny, ty);
	char b1[32], b2[32];
	const char *what = x->nhold ? x->hold[0].what : "segment";
	if (nx && ix > iy) {
		snprintf(lab, lablen, "%" PRIu64 ": %s free in %zu %ss", px->batch,
			 size_fmt(ix, b1, sizeof b1), nx, what);
		add(out, len, "at %" PRIu64 " the cache kept %zu %s%s wholly free at the peak, %s: ",
		    px->batch, nx, what, nx > 1 ? "s" : "", size_fmt(ix, b1, sizeof b1));
		for (int j = 0; j < 2 && tx[j]; j++)
			add(out, len, "%s%s %s", j ? ", " : "", size_fmt(tx[j]->bytes, b1, sizeof b1),
			    origin_or(tx[j]));
		add(out, len, "%s; the largest was taken for a %s request when ", nx > 2 ? ", ..." : "",
		    size_fmt(tx[0]->request, b1, sizeof b1));
		if (tx[0]->nfree_then)
			add(out, len, "the largest cached block was %s",
			    size_fmt(tx[0]->largest_then, b2, sizeof b2));
		else
			add(out, len, "nothing was cached");
		add(out, len, "; at %" PRIu64 ": %zu free %s%s, %s", py->batch, ny, what,
		    ny == 1 ? "" : "s", size_fmt(iy, b1, sizeof b1));
		if (ty[0])
			add(out, len, " (largest %s %s)", size_fmt(ty[0]->bytes, b1, sizeof b1),
			    origin_or(ty[0]));
	} else if (x->last.nth) {
		/* no more kept whole: the growth that set the peak */
		const struct explain_hold *h = &x->last;
		snprintf(lab, lablen, "%" PRIu64 ": last %s %s", px->batch, h->what,
			 size_fmt(h->bytes, b1, sizeof b1));
		add(out, len, "at %" PRIu64 " the peak's last %s (%s) was taken for a %s request (%s)",
		    px->batch, h->what, size_fmt(h->bytes, b1, sizeof b1),
		    size_fmt(h->request, b2, sizeof b2), origin_or(h));
		add(out, len, " when %s was cached, the largest block %s",
		    size_fmt(h->free_then, b1, sizeof b1), size_fmt(h->largest_then, b2, sizeof b2));
		add(out, len, "; %ss held at the peak: %" PRIu64 " at %" PRIu64 ", %" PRIu64
		    " at %" PRIu64, what, x->nheld, px->batch, y->nheld, py->batch);
	}
	/* the change split: whole free ranges, free space inside used ones, allocated */
	size_t n1;
	const struct explain_hold *t1[2];
	int64_t ia = (int64_t)idle(&a->mech, &n1, t1), ib = (int64_t)idle(&b->mech, &n1, t1);
	int64_t fa = (int64_t)a->reserved - (int64_t)a->allocated;
	int64_t fb = (int64_t)b->reserved - (int64_t)b->allocated;
	char d1[32], d2[32], d3[32], d4[32];
	add(out, len, " [%s = free %ss %s, free in used %ss %s, allocated %s]",
	    explain_fmt_delta((int64_t)b->reserved - (int64_t)a->reserved, d1, sizeof d1), what,
	    explain_fmt_delta(ib - ia, d2, sizeof d2), what,
	    explain_fmt_delta((fb - ib) - (fa - ia), d3, sizeof d3),
	    explain_fmt_delta((int64_t)b->allocated - (int64_t)a->allocated, d4, sizeof d4));
	if (x->nrel != y->nrel)
		add(out, len, "; releases before the peak: %" PRIu64 " at %" PRIu64 " (%s, %s), %"
		    PRIu64 " at %" PRIu64, x->nrel, px->batch, size_fmt(x->rel_bytes, b2, sizeof b2),
		    x->rel_why ? x->rel_why : "-", y->nrel, py->batch);
}

/* The mechanism of step S between A and B into S->mechanism. */
static void word_step(struct explain_step *s, const struct explain_point *a,
		      const struct explain_point *b, const char *policy)
{
	char *out = s->mechanism;
	size_t len = sizeof s->mechanism;
	out[0] = 0;
	s->label[0] = 0;
	if (!a->mech.have || !b->mech.have)
		return;
	snprintf(out, len, "%s: ", policy);
	if (a->reserved == b->reserved) {
		char b1[32];
		snprintf(s->label, sizeof s->label, "reserved unchanged");
		add(out, len, "reserved unchanged at %s (%" PRIu64 " ranges held at %" PRIu64 ", %"
		    PRIu64 " at %" PRIu64 ")", size_fmt(a->reserved, b1, sizeof b1), a->mech.nheld,
		    a->batch, b->mech.nheld, b->batch);
		return;
	}
	const struct explain_point *x = a->reserved > b->reserved ? a : b;
	const struct explain_point *y = x == a ? b : a;
	const char *what = x->mech.nhold ? x->mech.hold[0].what : "";
	if (!strcmp(what, "region"))
		word_regions(out, len, s->label, sizeof s->label, x, y);
	else
		word_cache(out, len, s->label, sizeof s->label, x, y, a, b);
	/* the device-level view: what nvidia-smi would show */
	char b1[32], b2[32], b3[32];
	add(out, len, "; device (nvidia-smi, with %s context) %s -> %s",
	    size_fmt(a->mech.context, b3, sizeof b3),
	    size_fmt(a->mech.device_peak + a->mech.context, b1, sizeof b1),
	    size_fmt(b->mech.device_peak + b->mech.context, b2, sizeof b2));
}

void explain_mech_steps(struct explain_result *r, const char *policy)
{
	for (size_t i = 0; i + 1 < r->np; i++)
		if (r->st[i].flag[0])
			word_step(&r->st[i], &r->p[i], &r->p[i + 1], policy);
}
