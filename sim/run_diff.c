/*
 * run_diff.c: two runs' peaks side by side, by kind and by layer
 * (run_diff.h). The totals per (kind, layer) of each result's peak_live
 * (rank 0 rows) are summed per kind and per layer; layers are matched by
 * name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_diff.h"

static uint64_t absdiff(const struct run_diff_row *r)
{
	return r->a > r->b ? r->a - r->b : r->b - r->a;
}

static int row_cmp(const void *x, const void *y)
{
	const struct run_diff_row *a = x, *b = y;
	uint64_t da = absdiff(a), db = absdiff(b);
	if (da != db)
		return da > db ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The row of layer NAME in D, added when missing; NULL out of memory. */
static struct run_diff_row *layer_row(struct run_diff *d, size_t *cap, const char *name)
{
	for (size_t i = 0; i < d->nlayer; i++)
		if (!strcmp(d->layer[i].name, name))
			return &d->layer[i];
	if (d->nlayer == *cap) {
		size_t n = *cap ? 2 * *cap : 64;
		struct run_diff_row *p = realloc(d->layer, n * sizeof *p);
		if (!p)
			return NULL;
		d->layer = p;
		*cap = n;
	}
	struct run_diff_row *r = &d->layer[d->nlayer++];
	memset(r, 0, sizeof *r);
	snprintf(r->name, sizeof r->name, "%s", name);
	return r;
}

static int add_run(struct run_diff *d, size_t *cap, const struct sim_result *r, int second)
{
	for (size_t i = 0; i < r->npeak_live; i++) {
		const struct sim_live *l = &r->peak_live[i];
		if (l->rank != 0 || (unsigned)l->kind >= SIM_LK_COUNT)
			continue; /* the largest allocations, listed apart */
		struct run_diff_row *row = layer_row(d, cap, l->layer);
		if (!row)
			return -1;
		if (second) {
			row->b += l->bytes;
			d->kind[l->kind].b += l->bytes;
			d->live_b += l->bytes;
		} else {
			row->a += l->bytes;
			d->kind[l->kind].a += l->bytes;
			d->live_a += l->bytes;
		}
	}
	return 0;
}

int run_diff_build(const struct sim_result *a, const struct sim_result *b, struct run_diff *d)
{
	size_t cap = 0;
	memset(d, 0, sizeof *d);
	for (int k = 0; k < SIM_LK_COUNT; k++)
		snprintf(d->kind[k].name, sizeof d->kind[k].name, "%s",
			 sim_live_kind_name((enum sim_live_kind)k));
	if (add_run(d, &cap, a, 0) < 0 || add_run(d, &cap, b, 1) < 0) {
		run_diff_free(d);
		return -1;
	}
	if (d->nlayer)
		qsort(d->layer, d->nlayer, sizeof *d->layer, row_cmp);
	return 0;
}

void run_diff_free(struct run_diff *d)
{
	free(d->layer);
	d->layer = NULL;
	d->nlayer = 0;
}
