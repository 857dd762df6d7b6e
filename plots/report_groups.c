/*
 * report_groups.c: the report's groups (report_int.h): the runs of one
 * workload and model, from the traces' labels, so that no table row or
 * figure mixes two programs that share a model name (the CUDA C CNN's
 * "resnet" and JAX's, torch captures and imported torch truth).
 *
 * A run without a workload label groups under its model alone, and says
 * so. Traces of one workload and model that repeat a batch size are
 * different captures of the same thing (a timing re-capture, a capture
 * option): the group is then split by the traces' folder. Groups come in
 * a fixed order (labelled workloads first, then by workload, model,
 * folder), runs within a group in the order plot_load_runs gives (batch,
 * trace, policy, setting, capacity), so the pages are deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "report_int.h"

long run_batch(const struct plot_run *run)
{
	char *end;
	long v = strtol(run->batch, &end, 10);
	return *run->batch && !*end && v > 0 ? v : -1;
}

const char *trace_base(const struct plot_run *run)
{
	const char *b = strrchr(run->trace_path, '/');
	return b ? b + 1 : run->trace_path;
}

const char *cap_str(uint64_t cap, char *buf, size_t len)
{
	if (!cap)
		snprintf(buf, len, "unlimited");
	else
		size_fmt(cap, buf, len);
	return buf;
}

/* The folder of RUN's trace ("." when none). */
static void folder_of(const struct plot_run *run, char *buf, size_t len)
{
	const char *b = strrchr(run->trace_path, '/');
	if (b)
		snprintf(buf, len, "%.*s", (int)(b - run->trace_path), run->trace_path);
	else
		snprintf(buf, len, ".");
}

/* Whether the runs of workload WL and model M hold two traces at one batch
 * (or, without a model label, always: those are told apart by folder). */
static int repeats_batch(const struct plot_run *runs, int n, const char *wl, const char *m)
{
	if (!*m)
		return 1;
	for (int i = 0; i < n; i++) {
		if (strcmp(runs[i].workload, wl) || strcmp(runs[i].model, m))
			continue;
		long b = run_batch(&runs[i]);
		for (int j = i + 1; j < n; j++)
			if (!strcmp(runs[j].workload, wl) && !strcmp(runs[j].model, m) &&
			    runs[j].trace_crc32 != runs[i].trace_crc32 && run_batch(&runs[j]) == b)
				return 1;
	}
	return 0;
}

struct gkey {
	int run;          /* index into the runs */
	int group;        /* assigned group */
	char variant[256];
};

static int cmp_group(const struct rgroup *a, const struct rgroup *b)
{
	int ea = !*a->workload, eb = !*b->workload;
	if (ea != eb)
		return ea - eb; /* labelled workloads first */
	int c = strcmp(a->workload, b->workload);
	if (!c)
		c = strcmp(a->model, b->model);
	return c ? c : strcmp(a->variant, b->variant);
}

static int cmp_group_q(const void *a, const void *b) { return cmp_group(a, b); }

static void describe(struct rgroup *g)
{
	const char *m = *g->model ? g->model : "(no model label)";
	if (*g->workload)
		snprintf(g->name, sizeof g->name, "%s %s", g->workload, m);
	else
		snprintf(g->name, sizeof g->name, "%s (no workload label)", m);
	if (*g->variant) {
		size_t l = strlen(g->name);
		snprintf(g->name + l, sizeof g->name - l, " [%s]", g->variant);
	}
}

/* Batches, traces, capacities and timing of group G from its runs. */
static int fill(const struct report *r, struct rgroup *g)
{
	g->crcs = calloc((size_t)g->n + 1, sizeof *g->crcs);
	if (!g->crcs)
		return -1;
	for (int k = 0; k < g->n; k++) {
		const struct plot_run *x = &r->runs[g->idx[k]];
		int seen = 0;
		for (int t = 0; t < g->ntraces && !seen; t++)
			seen = g->crcs[t] == x->trace_crc32;
		if (!seen)
			g->crcs[g->ntraces++] = x->trace_crc32;
		long b = run_batch(x);
		seen = 0;
		for (int t = 0; t < g->nbatches && !seen; t++)
			seen = g->batches[t] == b;
		if (b > 0 && !seen && g->nbatches < 64)
			g->batches[g->nbatches++] = b;
		seen = 0;
		for (int t = 0; t < g->ncaps && !seen; t++)
			seen = g->caps[t] == x->capacity;
		if (!seen && g->ncaps < 8)
			g->caps[g->ncaps++] = x->capacity;
		g->timed |= x->timed && x->step_time_ns > 0 && strcmp(x->policy, "optimal");
	}
	for (int i = 1; i < g->nbatches; i++)
		for (int k = i; k > 0 && g->batches[k - 1] > g->batches[k]; k--) {
			long t = g->batches[k];
			g->batches[k] = g->batches[k - 1];
			g->batches[k - 1] = t;
		}
	/* largest first; 0 (unlimited) is the largest of all */
	for (int i = 1; i < g->ncaps; i++)
		for (int k = i; k > 0; k--) {
			uint64_t a = g->caps[k - 1] ? g->caps[k - 1] : UINT64_MAX;
			uint64_t b = g->caps[k] ? g->caps[k] : UINT64_MAX;
			if (a >= b)
				break;
			uint64_t t = g->caps[k];
			g->caps[k] = g->caps[k - 1];
			g->caps[k - 1] = t;
		}
	for (int t = 0; t < g->nbatches; t++) {
		uint32_t c = 0;
		for (int k = 0; k < g->n; k++) {
			const struct plot_run *x = &r->runs[g->idx[k]];
			if (run_batch(x) != g->batches[t])
				continue;
			if (c && c != x->trace_crc32)
				g->dup_batch = 1;
			c = x->trace_crc32;
		}
	}
	return 0;
}

int report_groups(struct report *r)
{
	int n = r->nruns;
	struct gkey *keys = calloc((size_t)n + 1, sizeof *keys);
	struct rgroup *gs = calloc((size_t)n + 1, sizeof *gs);
	int ng = 0;
	if (!keys || !gs)
		goto oom;
	for (int i = 0; i < n; i++) {
		const struct plot_run *x = &r->runs[i];
		keys[i].run = i;
		/* the same answer for every run of this workload and model */
		int rep = -1;
		for (int j = 0; j < i && rep < 0; j++)
			if (!strcmp(r->runs[j].workload, x->workload) &&
			    !strcmp(r->runs[j].model, x->model))
				rep = keys[j].variant[0] != 0;
		if (rep < 0)
			rep = repeats_batch(r->runs, n, x->workload, x->model);
		if (rep)
			folder_of(x, keys[i].variant, sizeof keys[i].variant);
		int g = -1;
		for (int k = 0; k < ng && g < 0; k++)
			if (!strcmp(gs[k].workload, x->workload) && !strcmp(gs[k].model, x->model) &&
			    !strcmp(gs[k].variant, keys[i].variant))
				g = k;
		if (g < 0) {
			g = ng++;
			gs[g].workload = x->workload;
			gs[g].model = x->model;
			snprintf(gs[g].variant, sizeof gs[g].variant, "%s", keys[i].variant);
		}
		keys[i].group = g;
	}
	/* the fixed order, then each group's runs in the runs' order */
	struct rgroup *sorted = calloc((size_t)ng + 1, sizeof *sorted);
	int *map = calloc((size_t)ng + 1, sizeof *map);
	if (!sorted || !map) {
		free(sorted);
		free(map);
		goto oom;
	}
	memcpy(sorted, gs, (size_t)ng * sizeof *gs);
	qsort(sorted, (size_t)ng, sizeof *sorted, cmp_group_q);
	for (int k = 0; k < ng; k++)
		for (int j = 0; j < ng; j++)
			if (!cmp_group(&gs[k], &sorted[j]))
				map[k] = j;
	free(gs);
	gs = sorted;
	r->groups = gs;
	r->ngroups = ng;
	for (int k = 0; k < ng; k++) {
		gs[k].idx = calloc((size_t)n + 1, sizeof *gs[k].idx);
		if (!gs[k].idx) {
			free(map);
			free(keys);
			snprintf(r->err, r->errlen, "out of memory");
			return -1;
		}
	}
	for (int i = 0; i < n; i++) {
		struct rgroup *g = &gs[map[keys[i].group]];
		g->idx[g->n++] = i;
	}
	free(map);
	free(keys);
	for (int k = 0; k < ng; k++) {
		snprintf(gs[k].anchor, sizeof gs[k].anchor, "g%d", k + 1);
		describe(&gs[k]);
		if (fill(r, &gs[k]) < 0) {
			snprintf(r->err, r->errlen, "out of memory");
			return -1;
		}
	}
	return 0;
oom:
	free(keys);
	free(gs);
	snprintf(r->err, r->errlen, "out of memory");
	return -1;
}

void report_groups_free(struct report *r)
{
	for (int k = 0; r->groups && k < r->ngroups; k++) {
		free(r->groups[k].idx);
		free(r->groups[k].crcs);
	}
	free(r->groups);
	r->groups = NULL;
	r->ngroups = 0;
}

const struct plot_run *group_find(const struct report *r, const struct rgroup *g,
				  uint32_t crc, const char *setting, uint64_t cap)
{
	char b[128];
	for (int k = 0; k < g->n; k++) {
		const struct plot_run *x = &r->runs[g->idx[k]];
		if (x->trace_crc32 == crc && x->capacity == cap &&
		    !strcmp(plot_run_setting(x, b, sizeof b), setting))
			return x;
	}
	return NULL;
}

uint32_t group_trace_at(const struct report *r, const struct rgroup *g, long batch)
{
	for (int k = 0; k < g->n; k++)
		if (run_batch(&r->runs[g->idx[k]]) == batch)
			return r->runs[g->idx[k]].trace_crc32;
	return 0;
}

int group_settings(const struct report *r, const struct rgroup *g, char (**names)[128])
{
	char (*nm)[128] = calloc((size_t)g->n + 1, sizeof *nm);
	int ns = 0, opt = -1;
	if (!nm)
		return -1;
	for (int k = 0; k < g->n; k++) {
		char b[128];
		plot_run_setting(&r->runs[g->idx[k]], b, sizeof b);
		int seen = 0;
		for (int j = 0; j < ns && !seen; j++)
			seen = !strcmp(nm[j], b);
		if (!seen)
			snprintf(nm[ns++], sizeof nm[0], "%s", b);
	}
	for (int j = 0; j < ns; j++) /* optimal last: the reference */
		if (!strncmp(nm[j], "optimal ", 8))
			opt = j;
	if (opt >= 0 && opt != ns - 1) {
		char t[128];
		memcpy(t, nm[opt], sizeof t);
		memmove(nm[opt], nm[opt + 1], (size_t)(ns - opt - 1) * sizeof nm[0]);
		memcpy(nm[ns - 1], t, sizeof t);
	}
	*names = nm;
	return ns;
}

uint64_t report_floor(const struct report *r, uint32_t crc)
{
	uint64_t req = 0;
	for (int i = 0; i < r->nruns; i++) {
		const struct plot_run *x = &r->runs[i];
		if (x->trace_crc32 != crc || x->oom)
			continue;
		if (!strcmp(x->policy, "optimal"))
			return x->peak_reserved;
		req = x->peak_requested > req ? x->peak_requested : req;
	}
	return req;
}
