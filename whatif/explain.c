/*
 * explain.c: why peak memory moves with batch size (explain.h). Moved from
 * cli/cmd_explain.c, which parses the options and prints the tables.
 */
#include "explain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/size.h"
#include "../sim/engine.h"

const char *const explain_term_names[5] = {"reserved", "workspace", "activations", "rounding",
					   "segments/fragmentation"};

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

static uint64_t group_bytes(const struct bf_live *l, const char *name)
{
	for (size_t i = 0; i < l->nws; i++)
		if (!strcmp(l->ws[i].name, name))
			return l->ws[i].bytes;
	return 0;
}

/* Name the cause of step S between A and B. */
static void attribute(const struct explain_point *a, const struct explain_point *b,
		      struct explain_step *s)
{
	int sign = s->d[0] < 0 ? -1 : 1;
	int best = 1;
	for (int k = 2; k < 5; k++)
		if (sign * s->d[k] > sign * s->d[best])
			best = k;
	s->cause = explain_term_names[best];
	s->detail[0] = 0;
	if (best == 1) {
		/* the workspace that moved most, by NVTX range */
		const char *name = NULL;
		int64_t dd = 0;
		for (int side = 0; side < 2; side++) {
			const struct bf_live *l = side ? &b->live : &a->live;
			for (size_t i = 0; i < l->nws; i++) {
				int64_t x = (int64_t)group_bytes(&b->live, l->ws[i].name) -
					    (int64_t)group_bytes(&a->live, l->ws[i].name);
				if (sign * x > sign * dd) {
					dd = x;
					name = l->ws[i].name;
				}
			}
		}
		if (name) {
			char b1[32];
			snprintf(s->detail, sizeof s->detail, "largest: %s %s", name,
				 explain_fmt_delta(dd, b1, sizeof b1));
		}
	} else if (best == 4) {
		snprintf(s->detail, sizeof s->detail, "reserved but not allocated at the peak");
	} else if (best == 3) {
		snprintf(s->detail, sizeof s->detail, "size-class rounding of the policy");
	}
}

/* The seed's pattern hidden under a growing total: the workspace term falls
 * while the batch grows (an algorithm change), outweighed by activations.
 * Flag it and name the layer range whose workspace fell most. */
static void ws_falls(const struct explain_point *a, const struct explain_point *b,
		     struct explain_step *s)
{
	const char *name = NULL;
	int64_t dd = 0;
	char b1[32], b2[32];
	for (int side = 0; side < 2; side++) {
		const struct bf_live *l = side ? &b->live : &a->live;
		for (size_t i = 0; i < l->nws; i++) {
			int64_t x = (int64_t)group_bytes(&b->live, l->ws[i].name) -
				    (int64_t)group_bytes(&a->live, l->ws[i].name);
			if (x < dd) {
				dd = x;
				name = l->ws[i].name;
			}
		}
	}
	if (!s->flag[0])
		s->flag = "WS-FALLS";
	size_t n = strlen(s->detail);
	snprintf(s->detail + n, sizeof s->detail - n, "%sworkspace %s", n ? "; " : "",
		 explain_fmt_delta(s->d[1], b1, sizeof b1));
	n = strlen(s->detail);
	if (a->live.nws && b->live.nws && strcmp(a->live.ws[0].name, b->live.ws[0].name)) {
		/* the largest workspace moved to another layer: show both */
		snprintf(s->detail + n, sizeof s->detail - n, ": largest %s %s -> %s %s",
			 a->live.ws[0].name, size_fmt(a->live.ws[0].bytes, b1, sizeof b1),
			 b->live.ws[0].name, size_fmt(b->live.ws[0].bytes, b2, sizeof b2));
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
	const char *dir = getenv("TMPDIR");
	struct bf_trace *s = NULL;
	int ret = -1;

	snprintf(tmp, tmplen, "%s/gpumemsim-steady-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create a temporary file", tmp);
		tmp[0] = 0;
		goto out;
	}
	close(fd);
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
		struct sim_result r;
		memset(&r, 0, sizeof r);
		if (bf_load(p[i].path, &t, err, errlen) < 0)
			goto out;
		p[i].batch = bf_batch(t);
		if (from_range && steady_copy(&t, from_range, tmp, sizeof tmp, err, errlen) < 0)
			goto out;
		struct sim_options o = {
			.trace_path = from_range ? tmp : p[i].path, .policy = pol, .conf = conf, .capacity = capacity,
			.addr_mode = DEVICE_ADDR_SYNTHETIC, .timeline_points = 8,
		};
		int sr = sim_run(&o, &r, err, errlen);
		if (tmp[0]) {
			remove(tmp);
			tmp[0] = 0;
		}
		if (sr < 0) {
			bf_free(t);
			goto out;
		}
		p[i].reserved = r.peak_reserved;
		p[i].allocated = r.peak_allocated;
		p[i].requested = r.peak_requested;
		for (size_t e = 0; e < r.nevents; e++)
			if (r.events[e].kind == SIM_EV_PEAK_RESERVED)
				p[i].peak_line = r.events[e].line;
		p[i].oom = r.oom ? 1 : 0; /* the caller warns: its peak is what fitted */
		sim_result_free(&r);
		int lr = bf_live_at(t, p[i].peak_line, &p[i].live);
		bf_free(t);
		if (lr < 0) {
			snprintf(err, errlen, "%s: out of memory", p[i].path);
			goto out;
		}
		struct explain_point *q = &p[i];
		q->ws = q->live.workspace;
		q->act = q->live.total - q->live.workspace;
		uint64_t live = q->live.total;
		q->rounding = q->allocated > q->requested ? q->allocated - q->requested : 0;
		if (live > q->reserved)
			live = q->reserved; /* the peak line is after the growth; never negative */
		if (q->rounding > q->reserved - live)
			q->rounding = q->reserved - live;
		q->slack = q->reserved - live - q->rounding;
		if (q->live.total > q->reserved) {
			q->act = q->reserved > q->ws ? q->reserved - q->ws : 0;
		}
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
		s->d[0] = (int64_t)b->reserved - (int64_t)a->reserved;
		s->d[1] = (int64_t)b->ws - (int64_t)a->ws;
		s->d[2] = (int64_t)b->act - (int64_t)a->act;
		s->d[3] = (int64_t)b->rounding - (int64_t)a->rounding;
		s->d[4] = (int64_t)b->slack - (int64_t)a->slack;
		s->slope = (double)s->d[0] / (double)(b->batch - a->batch);
		s->flag = "";
	}
	for (size_t i = 0; i + 1 < np; i++) {
		struct explain_step *s = &st[i];
		if (s->d[0] < 0) {
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
		if (s->d[0] >= 0 && s->d[1] < 0)
			ws_falls(&p[i], &p[i + 1], s);
	}
	ret = 0;
out:
	return ret;
}
