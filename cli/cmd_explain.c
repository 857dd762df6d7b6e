/*
 * cmd_explain.c: `gpumemsim explain batch T1 T2 ...`: why peak memory moves
 * with batch size (the seed question).
 *
 * Each capture of a batch sweep is replayed under one policy (sim_run gives
 * peak reserved, allocated and requested, and the line where the peak of
 * reserved was reached); the trace is then walked once more here to see
 * what was live at that line: workspaces (cuDNN/cuBLAS, or buffers that live
 * and die inside one layer's NVTX range), and the rest (activations,
 * gradients, weights). The peak is split additively:
 *
 *   reserved = workspace + activations + rounding + slack
 *
 * rounding = peak allocated - peak requested (the policy's size classes),
 * slack = what is reserved but not allocated (segment/region growth and
 * fragmentation: cached memory that could not be reused). Between
 * neighbouring batch sizes the change of each term is shown, points where
 * reserved falls while batch grows (or where its slope jumps to more than
 * twice its neighbours') are flagged, and the term that moved most in the
 * direction of the change is named as the cause.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_whatif.h"
#include "../sim/engine.h"
#include "../base/json.h"

#define MAX_POINTS 64

struct ex_point {
	const char *path;
	uint64_t batch;
	uint64_t reserved, allocated, requested;
	uint64_t peak_line;
	uint64_t ws, act, rounding, slack;
	struct bf_live live;
};

struct ex_step {
	int64_t d[5];                  /* reserved, ws, act, rounding, slack */
	double slope;
	const char *flag;              /* "", "FALLS", "JUMP", "WS-FALLS" */
	const char *cause;
	char detail[256];
};

static const char *const term_names[5] = {"reserved", "workspace", "activations", "rounding",
					  "segments/fragmentation"};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpumemsim explain batch T1 T2 [T3...] [--policy P] [--conf C] [options]\n\n"
		"Replay each capture of a batch sweep (labels 'batch=N') and explain how peak\n"
		"reserved memory changes between neighbouring batch sizes: workspaces (per\n"
		"layer from NVTX ranges), activations live at the peak, rounding, and\n"
		"segment growth/fragmentation. Points where the peak falls while batch grows,\n"
		"or jumps more than its neighbours, are flagged with their cause.\n\n"
		"  --policy NAME    allocator policy (default pytorch); --conf STRING its knobs\n"
		"  --capacity SIZE  device memory (default: the trace's, else unlimited)\n"
		"  --steady         from the NVTX range \"step 1\" on (whatif steady): the\n"
		"                   peaks without the first step's autotuning\n"
		"  --from-range N   the same from the first range named N\n"
		"  --json           one JSON object on stdout instead of the tables\n\n"
		"Exit status: 0 ok, 1 failure (bad trace: file:line, bad knob), 2 usage.\n");
}

static int cmp_point(const void *a, const void *b)
{
	const struct ex_point *x = a, *y = b;
	return x->batch < y->batch ? -1 : x->batch > y->batch;
}

/* "+1.50 GiB" / "-12.0 MiB". */
static const char *fmt_delta(int64_t d, char *buf, size_t len)
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
static void attribute(const struct ex_point *a, const struct ex_point *b, struct ex_step *s)
{
	int sign = s->d[0] < 0 ? -1 : 1;
	int best = 1;
	for (int k = 2; k < 5; k++)
		if (sign * s->d[k] > sign * s->d[best])
			best = k;
	s->cause = term_names[best];
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
				 fmt_delta(dd, b1, sizeof b1));
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
static void ws_falls(const struct ex_point *a, const struct ex_point *b, struct ex_step *s)
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
		 fmt_delta(s->d[1], b1, sizeof b1));
	n = strlen(s->detail);
	if (a->live.nws && b->live.nws && strcmp(a->live.ws[0].name, b->live.ws[0].name)) {
		/* the largest workspace moved to another layer: show both */
		snprintf(s->detail + n, sizeof s->detail - n, ": largest %s %s -> %s %s",
			 a->live.ws[0].name, size_fmt(a->live.ws[0].bytes, b1, sizeof b1),
			 b->live.ws[0].name, size_fmt(b->live.ws[0].bytes, b2, sizeof b2));
	} else if (name) {
		snprintf(s->detail + n, sizeof s->detail - n, ", most in %s %s", name,
			 fmt_delta(dd, b2, sizeof b2));
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

/* explain batch: exit codes as cli.h says. */
int cmd_explain(int argc, char **argv)
{
	struct ex_point p[MAX_POINTS];
	struct ex_step st[MAX_POINTS];
	size_t np = 0;
	const char *policy = "pytorch", *conf = NULL, *from_range = NULL;
	char tmp[1024] = "";
	uint64_t capacity = 0;
	int json = 0, ret = 1;
	char err[1536];

	memset(p, 0, sizeof p);
	memset(st, 0, sizeof st);
	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	if (argc < 2 || strcmp(argv[1], "batch")) {
		fprintf(stderr, "gpumemsim explain: expected 'batch' (explain batch T1 T2 ...)\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i];
		if (!strcmp(o, "--json")) {
			json = 1;
		} else if (!strcmp(o, "--steady")) {
			from_range = "step 1";
		} else if (!strcmp(o, "--policy") || !strcmp(o, "--conf") || !strcmp(o, "--capacity") ||
			   !strcmp(o, "--from-range")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "gpumemsim explain: %s needs a value\n", o);
				return EXIT_USAGE;
			}
			const char *v = argv[++i];
			if (!strcmp(o, "--policy"))
				policy = v;
			else if (!strcmp(o, "--from-range"))
				from_range = v;
			else if (!strcmp(o, "--conf"))
				conf = v;
			else if (conf_size(v, &capacity) < 0 || !capacity) {
				fprintf(stderr, "gpumemsim explain: --capacity '%s': expected a size such "
					"as 80GiB\n", v);
				return EXIT_USAGE;
			}
		} else if (o[0] == '-' && o[1]) {
			fprintf(stderr, "gpumemsim explain: unknown option '%s'\n", o);
			return EXIT_USAGE;
		} else {
			if (np == MAX_POINTS) {
				fprintf(stderr, "gpumemsim explain: at most %d traces\n", MAX_POINTS);
				return EXIT_USAGE;
			}
			p[np++].path = o;
		}
	}
	if (np < 2) {
		fprintf(stderr, "gpumemsim explain batch: needs two or more traces of a batch sweep\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	const struct alloc_policy *pol = whatif_policy("explain", policy);
	if (!pol)
		return 1;
	for (size_t i = 0; i < np; i++) {
		struct bf_trace *t = NULL;
		struct sim_result r;
		memset(&r, 0, sizeof r);
		if (bf_load(p[i].path, &t, err, sizeof err) < 0) {
			fprintf(stderr, "gpumemsim explain: %s\n", err);
			goto out;
		}
		p[i].batch = bf_batch(t);
		if (from_range && steady_copy(&t, from_range, tmp, sizeof tmp, err, sizeof err) < 0) {
			fprintf(stderr, "gpumemsim explain: %s\n", err);
			goto out;
		}
		struct sim_options o = {
			.trace_path = from_range ? tmp : p[i].path, .policy = pol, .conf = conf, .capacity = capacity,
			.addr_mode = DEVICE_ADDR_SYNTHETIC, .timeline_points = 8,
		};
		int sr = sim_run(&o, &r, err, sizeof err);
		if (tmp[0]) {
			remove(tmp);
			tmp[0] = 0;
		}
		if (sr < 0) {
			fprintf(stderr, "gpumemsim explain: %s\n", err);
			bf_free(t);
			goto out;
		}
		p[i].reserved = r.peak_reserved;
		p[i].allocated = r.peak_allocated;
		p[i].requested = r.peak_requested;
		for (size_t e = 0; e < r.nevents; e++)
			if (r.events[e].kind == SIM_EV_PEAK_RESERVED)
				p[i].peak_line = r.events[e].line;
		if (r.oom)
			fprintf(stderr, "gpumemsim explain: warning: %s runs out of memory under %s; its "
				"peak is what fitted\n", p[i].path, policy);
		sim_result_free(&r);
		int lr = bf_live_at(t, p[i].peak_line, &p[i].live);
		bf_free(t);
		if (lr < 0) {
			fprintf(stderr, "gpumemsim explain: %s: out of memory\n", p[i].path);
			goto out;
		}
		struct ex_point *q = &p[i];
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
			fprintf(stderr, "gpumemsim explain: %s and %s both have batch %" PRIu64 "\n",
				p[i - 1].path, p[i].path, p[i].batch);
			goto out;
		}
	}
	for (size_t i = 0; i + 1 < np; i++) {
		struct ex_step *s = &st[i];
		const struct ex_point *a = &p[i], *b = &p[i + 1];
		s->d[0] = (int64_t)b->reserved - (int64_t)a->reserved;
		s->d[1] = (int64_t)b->ws - (int64_t)a->ws;
		s->d[2] = (int64_t)b->act - (int64_t)a->act;
		s->d[3] = (int64_t)b->rounding - (int64_t)a->rounding;
		s->d[4] = (int64_t)b->slack - (int64_t)a->slack;
		s->slope = (double)s->d[0] / (double)(b->batch - a->batch);
		s->flag = "";
	}
	for (size_t i = 0; i + 1 < np; i++) {
		struct ex_step *s = &st[i];
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
	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "policy", policy);
		json_kv_string(&j, "conf", conf ? conf : "");
		json_key(&j, "points");
		json_begin_array(&j);
		for (size_t i = 0; i < np; i++) {
			json_begin_object(&j);
			json_kv_string(&j, "trace", p[i].path);
			json_kv_u64(&j, "batch", p[i].batch);
			json_kv_u64(&j, "peak_reserved", p[i].reserved);
			json_kv_u64(&j, "peak_allocated", p[i].allocated);
			json_kv_u64(&j, "peak_requested", p[i].requested);
			json_kv_u64(&j, "peak_line", p[i].peak_line);
			json_kv_u64(&j, "workspace", p[i].ws);
			json_kv_u64(&j, "activations", p[i].act);
			json_kv_u64(&j, "rounding", p[i].rounding);
			json_kv_u64(&j, "segments_fragmentation", p[i].slack);
			json_key(&j, "workspaces");
			json_begin_object(&j);
			for (size_t g = 0; g < p[i].live.nws; g++)
				json_kv_u64(&j, p[i].live.ws[g].name, p[i].live.ws[g].bytes);
			json_end_object(&j);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_key(&j, "steps");
		json_begin_array(&j);
		for (size_t i = 0; i + 1 < np; i++) {
			json_begin_object(&j);
			json_kv_u64(&j, "from", p[i].batch);
			json_kv_u64(&j, "to", p[i + 1].batch);
			for (int k = 0; k < 5; k++) {
				char key[48];
				snprintf(key, sizeof key, "d_%s", k == 4 ? "segments_fragmentation" : term_names[k]);
				json_kv_i64(&j, key, st[i].d[k]);
			}
			json_kv_string(&j, "flag", st[i].flag);
			json_kv_string(&j, "cause", st[i].cause);
			json_kv_string(&j, "detail", st[i].detail);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
		fputc('\n', stdout);
		ret = 0;
		goto out;
	}
	char b[6][32];
	printf("peak reserved under %s%s%s, split at the moment of the peak\n\n", policy,
	       conf ? " conf " : "", conf ? conf : "");
	printf("%6s %12s %12s %12s %12s %12s %14s\n", "batch", "reserved", "allocated", "workspace",
	       "activations", "rounding", "segments/frag");
	for (size_t i = 0; i < np; i++)
		printf("%6" PRIu64 " %12s %12s %12s %12s %12s %14s\n", p[i].batch,
		       size_fmt(p[i].reserved, b[0], 32), size_fmt(p[i].allocated, b[1], 32),
		       size_fmt(p[i].ws, b[2], 32), size_fmt(p[i].act, b[3], 32),
		       size_fmt(p[i].rounding, b[4], 32), size_fmt(p[i].slack, b[5], 32));
	printf("\n%-13s %12s %12s %12s %12s %14s  %-6s %s\n", "batch", "d reserved", "d workspace",
	       "d activ.", "d rounding", "d segs/frag", "flag", "cause");
	for (size_t i = 0; i + 1 < np; i++) {
		char range[32];
		snprintf(range, sizeof range, "%" PRIu64 " -> %" PRIu64, p[i].batch, p[i + 1].batch);
		printf("%-13s %12s %12s %12s %12s %14s  %-6s %s%s%s%s\n", range,
		       fmt_delta(st[i].d[0], b[0], 32), fmt_delta(st[i].d[1], b[1], 32),
		       fmt_delta(st[i].d[2], b[2], 32), fmt_delta(st[i].d[3], b[3], 32),
		       fmt_delta(st[i].d[4], b[4], 32), st[i].flag[0] ? st[i].flag : "-", st[i].cause,
		       st[i].detail[0] ? " (" : "", st[i].detail, st[i].detail[0] ? ")" : "");
	}
	size_t nflag = 0;
	for (size_t i = 0; i + 1 < np; i++)
		nflag += st[i].flag[0] != 0;
	printf("\n%zu flagged point(s): FALLS = peak reserved falls while batch grows; JUMP = its "
	       "slope is more than twice its neighbours'; WS-FALLS = the workspace live at the peak "
	       "falls while batch grows\n", nflag);
	ret = 0;
out:
	return ret;
}
