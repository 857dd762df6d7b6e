/*
 * decisions.c: the log of a policy's decisions (decisions.h).
 */
#include "decisions.h"

#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

void sim_decisions_init(struct sim_decisions *l)
{
	memset(l, 0, sizeof *l);
}

void sim_decisions_reset(struct sim_decisions *l)
{
	l->n = 0;
	l->line = 0;
	l->short_log = 0;
}

void sim_decisions_free(struct sim_decisions *l)
{
	free(l->v);
	memset(l, 0, sizeof *l);
}

void sim_decisions_sink(void *ctx, const struct policy_decision *d)
{
	struct sim_decisions *l = ctx;
	if (!l || !d)
		return;
	if (VEC_RESERVE(l->v, l->cap, l->n + 1, 64) < 0) {
		l->short_log = 1;
		return;
	}
	l->v[l->n].d = *d;
	l->v[l->n].line = l->line;
	l->n++;
}

static int cmp_holding(const void *a, const void *b)
{
	const struct sim_holding *x = a, *y = b;
	if (x->dec != y->dec)
		return x->dec < y->dec ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Take [a, a + n) out of H[0..*NH): cut, split or drop what overlaps. */
static int take_away(struct sim_holding **h, size_t *nh, size_t *cap, uint64_t a, uint64_t n)
{
	uint64_t e = a + n;
	for (size_t i = 0; i < *nh; i++) {
		struct sim_holding *x = &(*h)[i];
		uint64_t xe = x->addr + x->bytes;
		if (xe <= a || x->addr >= e)
			continue;
		if (x->addr < a && xe > e) {
			/* a hole in the middle: the tail becomes its own range */
			if (VEC_RESERVE(*h, *cap, *nh + 1, 16) < 0)
				return -1;
			x = &(*h)[i];
			(*h)[(*nh)++] = (struct sim_holding){e, xe - e, x->dec};
			x->bytes = a - x->addr;
		} else if (x->addr < a) {
			x->bytes = a - x->addr;
		} else if (xe > e) {
			x->bytes = xe - e;
			x->addr = e;
		} else {
			(*h)[i] = (*h)[--(*nh)];
			i--;
		}
	}
	return 0;
}

int sim_decisions_holdings(const struct sim_decisions *l, size_t n, struct sim_holding **out,
			   size_t *nout)
{
	struct sim_holding *h = NULL;
	size_t nh = 0, cap = 0;
	if (n > l->n)
		n = l->n;
	for (size_t i = 0; i < n; i++) {
		const struct policy_decision *d = &l->v[i].d;
		if (!d->bytes)
			continue;
		if (d->kind == POLICY_DEC_GROW) {
			if (VEC_RESERVE(h, cap, nh + 1, 16) < 0)
				goto nomem;
			h[nh++] = (struct sim_holding){d->addr, d->bytes, i};
		} else if (d->kind == POLICY_DEC_RELEASE) {
			if (take_away(&h, &nh, &cap, d->addr, d->bytes) < 0)
				goto nomem;
		}
	}
	if (nh)
		qsort(h, nh, sizeof *h, cmp_holding);
	*out = h;
	*nout = nh;
	return 0;
nomem:
	free(h);
	*out = NULL;
	*nout = 0;
	return -1;
}
