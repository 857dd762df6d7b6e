/*
 * explain.c: why peak memory moves with batch size (explain.h). Moved from
 * cli/cmd_explain.c, which parses the options and prints the tables.
 */
#include "explain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "../base/tmpfile.h"
#include "../sim/decisions.h"
#include "../sim/engine.h"
#include "batch_fit_int.h"

const char *const explain_term_names[EX_NTERMS] = {
	"reserved", "workspace", "activations", "gradients", "weights+optimizer", "other",
	"rounding", "cached/fragmentation"};
const char *const explain_term_keys[EX_NTERMS] = {
	"reserved", "workspace", "activations", "gradients", "weights_optimizer", "other",
	"rounding", "reserved_minus_allocated"};

static int cmp_point(const void *a, const void *b)
{
	const struct explain_point *x = a, *y = b;
	return x->batch < y->batch ? -1 : x->batch > y->batch;
}

/* "+1.50 GiB" / "-12.0 MiB". */
const char *explain_fmt_delta(int64_t d, char *buf, size_t len)
{
	char b[24];
	size_fmt((uint64_t)(d < 0 ? -d : d), b, sizeof b);
	snprintf(buf, len, "%s%s", d < 0 ? "-" : "+", b);
	return buf;
}

static uint64_t group_bytes(const struct explain_point *p, const char *name)
{
	for (size_t i = 0; i < p->nws; i++)
		if (!strcmp(p->ws[i].name, name))
			return p->ws[i].bytes;
	return 0;
}

/* The workspace group (NVTX range) whose bytes moved most in direction
 * SIGN between A and B, into *NAME and *DD; NULL name when none moved. */
static void ws_moved(const struct explain_point *a, const struct explain_point *b, int sign,
		     const char **name, int64_t *dd)
{
	*name = NULL;
	*dd = 0;
	for (int side = 0; side < 2; side++) {
		const struct explain_point *q = side ? b : a;
		for (size_t i = 0; i < q->nws; i++) {
			int64_t x = (int64_t)group_bytes(b, q->ws[i].name) -
				    (int64_t)group_bytes(a, q->ws[i].name);
			if (sign * x > sign * *dd) {
				*dd = x;
				*name = q->ws[i].name;
			}
		}
	}
}

/* Name the cause of step S between A and B: the term that moved most in
 * the direction of reserved ("-" when reserved did not move). */
static void attribute(const struct explain_point *a, const struct explain_point *b,
		      struct explain_step *s)
{
	int sign = s->d[EX_RESERVED] < 0 ? -1 : 1;
	int best = -1;
	for (int k = EX_WORKSPACE; k < EX_NTERMS && s->d[EX_RESERVED]; k++)
		if (sign * s->d[k] > 0 && (best < 0 || sign * s->d[k] > sign * s->d[best]))
			best = k;
	s->cause = best < 0 ? "-" : explain_term_names[best];
	s->detail[0] = 0;
	if (best == EX_WORKSPACE) {
		const char *name;
		int64_t dd;
		ws_moved(a, b, sign, &name, &dd);
		if (name) {
			char b1[32];
			snprintf(s->detail, sizeof s->detail, "largest: %s %s", name,
				 explain_fmt_delta(dd, b1, sizeof b1));
		}
	} else if (best == EX_FRAG) {
		snprintf(s->detail, sizeof s->detail, "reserved but not allocated at the peak");
	} else if (best == EX_ROUNDING) {
		snprintf(s->detail, sizeof s->detail, "size-class rounding of the policy");
	}
}

/* The seed's pattern hidden under a growing total: the workspace term falls
 * while the batch grows (an algorithm change), outweighed by activations.
 * Flag it and name the layer range whose workspace fell most. */
static void ws_falls(const struct explain_point *a, const struct explain_point *b,
		     struct explain_step *s)
{
	const char *name;
	int64_t dd;
	char b1[32], b2[32];
	ws_moved(a, b, -1, &name, &dd);
	if (!s->flag[0])
		s->flag = "WS-FALLS";
	size_t n = strlen(s->detail);
	snprintf(s->detail + n, sizeof s->detail - n, "%sworkspace %s", n ? "; " : "",
		 explain_fmt_delta(s->d[EX_WORKSPACE], b1, sizeof b1));
	n = strlen(s->detail);
	if (a->nws && b->nws && strcmp(a->ws[0].name, b->ws[0].name)) {
		/* the largest workspace moved to another layer: show both */
		snprintf(s->detail + n, sizeof s->detail - n, ": largest %s %s -> %s %s",
			 a->ws[0].name, size_fmt(a->ws[0].bytes, b1, sizeof b1),
			 b->ws[0].name, size_fmt(b->ws[0].bytes, b2, sizeof b2));
	} else if (name) {
		snprintf(s->detail + n, sizeof s->detail - n, ", most in %s %s", name,
			 explain_fmt_delta(dd, b2, sizeof b2));
	}
}

/* Replace *T by its steady state (from the first range RANGE on): written
 * to a private temporary file TMP (the caller removes it after the replay)
 * and loaded again, so that the replay and the live-set walk see the same
 * lines. 0, or -1 with ERR; *T is freed either way on failure. */
static int steady_copy(struct bf_trace **t, const char *range, char *tmp, size_t tmplen,
		       char *err, size_t errlen)
{
	struct bf_trace *s = NULL;
	int ret = -1;

	if (tmp_file(tmp, tmplen, "steady") < 0) {
		snprintf(err, errlen, "%s: cannot create a temporary file", tmp);
		tmp[0] = 0;
		goto out;
	}
	if (bf_write_from_range(*t, range, tmp, err, errlen) < 0)
		goto out;
	if (bf_load(tmp, &s, err, errlen) < 0)
		goto out;
	ret = 0;
out:
	if (ret < 0 && tmp[0]) {
		remove(tmp);
		tmp[0] = 0;
	}
	bf_free(*t);
	*t = s;
	return ret;
}

/* Add BYTES to group NAME of P's workspaces; when they are full, the
 * smallest gives way to a larger one. */
static void ws_add(struct explain_point *p, const char *name, uint64_t bytes)
{
	for (size_t i = 0; i < p->nws; i++)
		if (!strcmp(p->ws[i].name, name)) {
			p->ws[i].bytes += bytes;
			return;
		}
	size_t at = p->nws;
	if (p->nws == BF_MAX_GROUPS) {
		at = 0;
		for (size_t i = 1; i < p->nws; i++)
			if (p->ws[i].bytes < p->ws[at].bytes)
				at = i;
		if (p->ws[at].bytes >= bytes)
			return;
	} else {
		p->nws++;
	}
	snprintf(p->ws[at].name, sizeof p->ws[at].name, "%s", name);
	p->ws[at].bytes = bytes;
}

static int cmp_group(const void *a, const void *b)
{
	const struct bf_group *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The site of T allocated at LINE, or NO_IDX (explain.h). */
size_t explain_site_at(const struct bf_trace *t, uint64_t line)
{
	size_t lo = 0, hi = t->nalloc;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->rec[t->alloc_rec[mid]].line < line)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nalloc && t->rec[t->alloc_rec[lo]].line == line ? lo : NO_IDX;
}

/* Split P's peak at the moment M found, its live blocks named by the lines
 * of T: each block's requested bytes go to its kind, the rest of the block
 * to rounding; allocated is their sum, and reserved minus that cached/frag. */
static void split(struct explain_point *p, const struct bf_trace *t, const struct explain_moment *m)
{
	static const enum explain_term term_of[SIM_LK_COUNT] = {
		[SIM_LK_WEIGHTS] = EX_WEIGHTS, [SIM_LK_OPTIMIZER] = EX_WEIGHTS,
		[SIM_LK_ACTIVATIONS] = EX_ACTIVATIONS, [SIM_LK_GRADIENTS] = EX_GRADIENTS,
		[SIM_LK_WORKSPACE] = EX_WORKSPACE, [SIM_LK_LIBRARY] = EX_WORKSPACE,
		[SIM_LK_OTHER] = EX_OTHER,
	};
	p->reserved = m->reserved;
	p->peak_line = m->line;
	p->first_reach = m->first_reach;
	for (size_t i = 0; i < m->res.npeak_item; i++) {
		const struct sim_live_item *it = &m->res.peak_item[i];
		size_t s = explain_site_at(t, it->line);
		uint64_t req = s == NO_IDX ? it->block : t->rec[t->alloc_rec[s]].u.mem.bytes;
		if (req > it->block)
			req = it->block; /* a block is never short of its request */
		p->allocated += it->block;
		p->kind[it->kind] += req;
		p->term[term_of[it->kind]] += req;
		p->term[EX_ROUNDING] += it->block - req;
		if (term_of[it->kind] == EX_WORKSPACE && s != NO_IDX) {
			const char *rn = tstr(t, t->alloc_range[s]);
			const char *src = tstr(t, t->rec[t->alloc_rec[s]].u.mem.source);
			ws_add(p, rn ? rn : (src ? src : "-"), req);
		}
	}
	qsort(p->ws, p->nws, sizeof *p->ws, cmp_group);
	/* allocated never exceeds reserved (blocks are carved from it); kept
	 * exact should a policy report otherwise */
	if (p->allocated > p->reserved)
		p->reserved = p->allocated;
	p->term[EX_RESERVED] = p->reserved;
	p->term[EX_FRAG] = p->reserved - p->allocated;
}

/* Replay, split and attribute; see explain.h. */
int explain_batch(char *const *paths, size_t n, const struct explain_options *opt,
		  struct explain_result *res, char *err, size_t errlen)
{
	struct explain_point *p = res->p;
	struct explain_step *st = res->st;
	size_t np = n;
	const struct alloc_policy *pol = opt->policy;
	const char *conf = opt->conf, *from_range = opt->from_range;
	uint64_t capacity = opt->capacity;
	char tmp[1024] = "";
	int ret = -1;
	/* the policy's decisions, when it reports them (explain_mech.c) */
	struct sim_decisions log;
	int have_dec = pol && pol->iversion >= 2 && pol->decisions;

	sim_decisions_init(&log);
	memset(res, 0, sizeof *res);
	if (n < 2 || n > EXPLAIN_MAX_POINTS) {
		snprintf(err, errlen, "needs 2 to %d traces of a batch sweep", EXPLAIN_MAX_POINTS);
		return -1;
	}
	for (size_t i = 0; i < np; i++) {
		p[i].path = paths[i];
		p[i].arg = i;
	}
	res->np = np;
	for (size_t i = 0; i < np; i++) {
		struct bf_trace *t = NULL;
		struct explain_moment m;
		memset(&m, 0, sizeof m);
		if (bf_load(p[i].path, &t, err, errlen) < 0)
			goto out;
		p[i].batch = bf_batch(t);
		if (from_range && steady_copy(&t, from_range, tmp, sizeof tmp, err, errlen) < 0)
			goto out;
		struct sim_options o = {
			.trace_path = from_range ? tmp : p[i].path, .policy = pol, .conf = conf, .capacity = capacity,
			.addr_mode = DEVICE_ADDR_SYNTHETIC, .timeline_points = 8,
			.decisions = have_dec ? &log : NULL, .xla_requests = opt->xla_requests,
		};
		int sr = explain_replay(&o, &m, err, errlen);
		if (tmp[0]) {
			remove(tmp);
			tmp[0] = 0;
		}
		if (sr == 0) {
			p[i].oom = m.oom ? 1 : 0; /* the caller warns: its peak is what fitted */
			split(&p[i], t, &m);
			explain_mech_point(&p[i], t, have_dec ? &log : NULL, &m,
					   opt->context ? opt->context : EXPLAIN_CONTEXT);
		}
		sim_result_free(&m.res);
		free(m.live);
		bf_free(t);
		if (sr < 0)
			goto out;
	}
	qsort(p, np, sizeof *p, cmp_point);
	for (size_t i = 1; i < np; i++) {
		if (p[i].batch == p[i - 1].batch) {
			snprintf(err, errlen, "%s and %s both have batch %" PRIu64,
				 p[i - 1].path, p[i].path, p[i].batch);
			goto out;
		}
	}
	for (size_t i = 0; i + 1 < np; i++) {
		struct explain_step *s = &st[i];
		const struct explain_point *a = &p[i], *b = &p[i + 1];
		for (int k = 0; k < EX_NTERMS; k++)
			s->d[k] = (int64_t)b->term[k] - (int64_t)a->term[k];
		s->slope = (double)s->d[EX_RESERVED] / (double)(b->batch - a->batch);
		s->flag = "";
	}
	for (size_t i = 0; i + 1 < np; i++) {
		struct explain_step *s = &st[i];
		if (s->d[EX_RESERVED] < 0) {
			s->flag = "FALLS";
		} else if (np > 2) {
			int jump = 1;
			if (i > 0 && !(s->slope > 2 * st[i - 1].slope && st[i - 1].slope >= 0))
				jump = 0;
			if (i + 2 < np && !(s->slope > 2 * st[i + 1].slope && st[i + 1].slope >= 0))
				jump = 0;
			if (jump && s->slope > 0)
				s->flag = "JUMP";
		}
		attribute(&p[i], &p[i + 1], s);
		if (s->d[EX_RESERVED] >= 0 && s->d[EX_WORKSPACE] < 0)
			ws_falls(&p[i], &p[i + 1], s);
	}
	explain_mech_steps(res, pol->name);
	ret = 0;
out:
	sim_decisions_free(&log);
	return ret;
}
