/*
 * test_explain.c: `gpumemsim explain batch`'s split of the peak, end to
 * end through the binary (env GPUMEMSIM_BIN, set by make test), on small
 * captures whose weights, activations, gradients and workspace are known:
 * every column holds exactly its bytes under each policy, the columns sum
 * to reserved, and a step's cause is the term that moved.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../traces/trace.h"
#include "helpers.h"

#define MiB (1024ull * 1024)

struct cap {
	uint64_t batch;
	uint64_t weights;   /* before any step, never freed */
	uint64_t act;       /* in forward (conv1.fwd), freed in backward */
	uint64_t ws;        /* in conv1.fwd, freed there; 0: none */
	uint64_t grad;      /* in backward, freed after it */
	uint64_t temp;      /* first of all, freed at once (a cached block); 0: none */
};

static void range(struct trace_writer *w, uint32_t name, uint32_t depth, uint64_t start,
		  uint64_t end)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_RANGE;
	r.start = start;
	r.end = end;
	r.u.range.name = name;
	r.u.range.depth = depth;
	cr_assert_eq(trace_writer_record(w, &r), 0);
}

/* The capture C into PATH: the peak of allocated is weights + act + ws
 * inside conv1.fwd (ws larger than grad). */
static void write_cap(const char *path, const struct cap *c)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, c->batch, "m");
	uint32_t fwd = trace_writer_intern(w, "forward");
	uint32_t conv = trace_writer_intern(w, "conv1.fwd");
	uint32_t bwd = trace_writer_intern(w, "backward");
	if (c->temp) {
		th_mem(w, TREC_ALLOC, 1000, 0x500000000, c->temp);
		th_mem(w, TREC_FREE, 1100, 0x500000000, c->temp);
	}
	th_mem(w, TREC_ALLOC, 1200, 0x100000000, c->weights);
	range(w, fwd, 0, 2000, 3000);
	range(w, conv, 1, 2100, 2900);
	th_mem(w, TREC_ALLOC, 2200, 0x200000000, c->act);
	if (c->ws) {
		th_mem(w, TREC_ALLOC, 2300, 0x300000000, c->ws);
		th_mem(w, TREC_FREE, 2400, 0x300000000, c->ws);
	}
	range(w, bwd, 0, 4000, 5000);
	th_mem(w, TREC_ALLOC, 4100, 0x400000000, c->grad);
	th_mem(w, TREC_FREE, 4200, 0x200000000, c->act);
	th_mem(w, TREC_FREE, 5100, 0x400000000, c->grad);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

/* The number after "KEY": in the point of batch BATCH of explain's JSON OUT. */
static uint64_t point_u64(const char *out, uint64_t batch, const char *key)
{
	char pat[64], k[64];
	snprintf(pat, sizeof pat, "\"batch\":%" PRIu64 ",", batch);
	const char *p = strstr(out, pat);
	cr_assert_not_null(p, "no point of batch %" PRIu64 ": %s", batch, out);
	const char *end = strstr(p, "\"workspaces\"");
	snprintf(k, sizeof k, "\"%s\":", key);
	const char *q = strstr(p, k);
	cr_assert(q && (!end || q < end), "no %s in batch %" PRIu64 ": %s", key, batch, out);
	return strtoull(q + strlen(k), NULL, 10);
}

/* The terms of the split, in the order they sum to reserved. */
static const char *const terms[] = {"workspace", "activations", "gradients", "weights_optimizer",
				    "other", "rounding", "reserved_minus_allocated"};

/* Run explain on captures CAPS (N) under POLICY (CONF) into OUT; every
 * point's terms sum to its reserved, its allocated to reserved minus the
 * last. */
static void explain(const struct cap *caps, size_t n, const char *policy, const char *conf,
		    char *out, size_t len)
{
	char p[4][128], cmd[2048];
	size_t at = 0;
	at += (size_t)snprintf(cmd, sizeof cmd, "%s explain batch", th_bin());
	for (size_t i = 0; i < n; i++) {
		th_tmpname(p[i], sizeof p[i], "explain");
		write_cap(p[i], &caps[i]);
		at += (size_t)snprintf(cmd + at, sizeof cmd - at, " %s", p[i]);
	}
	snprintf(cmd + at, sizeof cmd - at, " --policy %s%s%s --json", policy, conf ? " --conf " : "",
		 conf ? conf : "");
	cr_assert_eq(th_capture(cmd, out, len), 0, "%s", out);
	for (size_t i = 0; i < n; i++) {
		uint64_t sum = 0, res = point_u64(out, caps[i].batch, "peak_reserved");
		for (size_t k = 0; k < sizeof terms / sizeof *terms; k++)
			sum += point_u64(out, caps[i].batch, terms[k]);
		cr_assert_eq(sum, res, "%s: batch %" PRIu64 ": terms sum to %" PRIu64 ", reserved %"
			     PRIu64 ": %s", policy, caps[i].batch, sum, res, out);
		cr_assert_eq(point_u64(out, caps[i].batch, "allocated"),
			     res - point_u64(out, caps[i].batch, "reserved_minus_allocated"), "%s", out);
		unlink(p[i]);
	}
}

/* Each kind's requested bytes land in its column under every policy; what
 * the policy rounds goes to rounding, what it holds beyond to cached/frag. */
Test(explain, columns_exact_per_policy)
{
	/* an activation 100 bytes past a MiB: every policy but cuda_malloc
	 * rounds it */
	static const struct cap caps[2] = {
		{.batch = 8, .weights = 4 * MiB, .act = 8 * MiB + 100, .ws = 6 * MiB, .grad = 2 * MiB},
		{.batch = 16, .weights = 4 * MiB, .act = 16 * MiB + 100, .ws = 6 * MiB, .grad = 2 * MiB},
	};
	static const struct {
		const char *policy, *conf;
		uint64_t round8, round16;         /* above the activation's request */
		uint64_t frag8, frag16;           /* reserved - allocated */
	} pol[] = {
		{"cuda_malloc", NULL, 0, 0, 0, 0},
		/* packs the plan exactly: nothing reserved beyond allocated */
		{"optimal", NULL, 256 - 100, 256 - 100, 0, 0},
		/* the 4 MiB weights make a 20 MiB segment that the activation
		 * (8 MiB + 512) and the workspace share at batch 8; at 16 the
		 * activation gets its own 18 MiB segment */
		{"pytorch", NULL, 512 - 100, 512 - 100, 2 * MiB - 512, 12 * MiB - 512},
		/* BFC splits a chunk only when the rest is as large as the
		 * request: the activation keeps the whole 16 (32) MiB chunk of
		 * its region, the rest of which is rounding, not cache */
		{"bfc", "allow_growth:true", 8 * MiB - 100, 16 * MiB - 100, 10 * MiB, 26 * MiB},
	};
	char out[16384];
	for (size_t k = 0; k < sizeof pol / sizeof *pol; k++) {
		explain(caps, 2, pol[k].policy, pol[k].conf, out, sizeof out);
		for (int i = 0; i < 2; i++) {
			const struct cap *c = &caps[i];
			uint64_t b = c->batch;
			cr_assert_eq(point_u64(out, b, "workspace"), c->ws, "%s: %s", pol[k].policy, out);
			cr_assert_eq(point_u64(out, b, "activations"), c->act, "%s: %s", pol[k].policy, out);
			cr_assert_eq(point_u64(out, b, "gradients"), 0, "%s: %s", pol[k].policy, out);
			cr_assert_eq(point_u64(out, b, "weights_optimizer"), c->weights, "%s: %s",
				     pol[k].policy, out);
			cr_assert_eq(point_u64(out, b, "other"), 0, "%s: %s", pol[k].policy, out);
			cr_assert_eq(point_u64(out, b, "rounding"), i ? pol[k].round16 : pol[k].round8,
				     "%s: %s", pol[k].policy, out);
			cr_assert_eq(point_u64(out, b, "reserved_minus_allocated"),
				     i ? pol[k].frag16 : pol[k].frag8, "%s: %s", pol[k].policy, out);
		}
	}
}

/* The step's JSON object from FROM to TO in OUT (cut at its end), into BUF. */
static const char *step_of(const char *out, uint64_t from, uint64_t to, char *buf, size_t len)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"from\":%" PRIu64 ",\"to\":%" PRIu64 ",", from, to);
	const char *p = strstr(out, pat);
	cr_assert_not_null(p, "no step %" PRIu64 " -> %" PRIu64 ": %s", from, to, out);
	snprintf(buf, len, "%s", p);
	char *e = strchr(buf, '}');
	if (e)
		e[1] = 0;
	return buf;
}

/* The moment: optimal reserves its whole plan at the first request, so
 * where reserved first reached its peak almost nothing was live (the old
 * split called it all segments/fragmentation); the split is taken where
 * allocated is highest with reserved at its peak. cuda_malloc grows on
 * demand: that is where it first reached its peak. */
Test(explain, moment_of_the_peak)
{
	static const struct cap caps[2] = {
		{.batch = 8, .weights = 4 * MiB, .act = 8 * MiB, .ws = 6 * MiB, .grad = 2 * MiB},
		{.batch = 16, .weights = 4 * MiB, .act = 16 * MiB, .ws = 6 * MiB, .grad = 2 * MiB},
	};
	char out[16384];
	explain(caps, 2, "optimal", NULL, out, sizeof out);
	cr_assert(strstr(out, "\"moment\":\"most_allocated\"") != NULL, "%s", out);
	cr_assert_eq(point_u64(out, 8, "allocated"), 18 * MiB, "%s", out);
	cr_assert_eq(point_u64(out, 8, "reserved_minus_allocated"), 0, "%s", out);
	explain(caps, 2, "cuda_malloc", NULL, out, sizeof out);
	cr_assert(strstr(out, "\"moment\":\"most_allocated\"") == NULL, "%s", out);
	cr_assert_eq(point_u64(out, 16, "peak_reserved"), 26 * MiB, "%s", out);
}

/* Reserved falls while what is live at the peak stays the same: at batch
 * 8 a 16 MiB block cached first is split for the weights and the
 * activation, so the workspace needs a segment of its own; at 16 there is
 * no such block. The fall is cached/fragmentation's, and only its. */
Test(explain, fall_in_cache_is_fragmentation)
{
	static const struct cap caps[2] = {
		{.batch = 8, .weights = 4 * MiB, .act = 8 * MiB, .ws = 6 * MiB, .grad = 2 * MiB,
		 .temp = 16 * MiB},
		{.batch = 16, .weights = 4 * MiB, .act = 8 * MiB, .ws = 6 * MiB, .grad = 2 * MiB},
	};
	char out[16384], st[1024];
	explain(caps, 2, "pytorch", NULL, out, sizeof out);
	step_of(out, 8, 16, st, sizeof st);
	cr_assert(strstr(st, "\"d_reserved\":-16777216,\"d_workspace\":0,\"d_activations\":0,"
			 "\"d_gradients\":0,\"d_weights_optimizer\":0,\"d_other\":0,\"d_rounding\":0,"
			 "\"d_reserved_minus_allocated\":-16777216") != NULL, "%s", st);
	cr_assert(strstr(st, "\"flag\":\"FALLS\",\"cause\":\"cached/fragmentation\"") != NULL, "%s", st);
}

/* Reserved falls with the workspace (16 MiB, a segment of its own, at
 * batch 8; 1 MiB inside the weights' segment at 16, where the peak's
 * moment is the gradient's, the workspace freed by then) while
 * activations grow: the cause is the workspace, named by its layer. */
Test(explain, fall_in_workspace_is_workspace)
{
	static const struct cap caps[2] = {
		{.batch = 8, .weights = 4 * MiB, .act = 8 * MiB, .ws = 16 * MiB, .grad = 2 * MiB},
		{.batch = 16, .weights = 4 * MiB, .act = 9 * MiB, .ws = 1 * MiB, .grad = 2 * MiB},
	};
	char out[16384], st[1024];
	explain(caps, 2, "pytorch", NULL, out, sizeof out);
	step_of(out, 8, 16, st, sizeof st);
	cr_assert(strstr(st, "\"d_reserved\":-14680064,\"d_workspace\":-16777216,"
			 "\"d_activations\":1048576,\"d_gradients\":2097152,") != NULL, "%s", st);
	cr_assert(strstr(st, "\"flag\":\"FALLS\",\"cause\":\"workspace\","
			 "\"detail\":\"largest: conv1.fwd -16.00 MiB\"") != NULL, "%s", st);
}

/* ------------------------------------------------ mechanisms (issue 18) */

/* One record of a hand-made capture: 'a'/'f' at T (addr, bytes), or 'r'
 * an NVTX range NAME over [T, T + bytes). */
struct op { char op; uint64_t t, addr, bytes; const char *name; };

static void write_ops(const char *path, uint64_t batch, const struct op *ops, size_t n)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, "m");
	for (size_t i = 0; i < n; i++) {
		if (ops[i].op == 'r')
			range(w, trace_writer_intern(w, ops[i].name), 0, ops[i].t,
			      ops[i].t + ops[i].bytes);
		else
			th_mem(w, ops[i].op == 'a' ? TREC_ALLOC : TREC_FREE, ops[i].t, ops[i].addr,
			       ops[i].bytes);
	}
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

/* explain's text output for two captures A (batch 8) and B (batch 16). */
static void explain_two(const struct op *a, size_t na, const struct op *b, size_t nb,
			const char *args, char *out, size_t len)
{
	char pa[128], pb[128], cmd[1024];
	th_tmpname(pa, sizeof pa, "mech");
	th_tmpname(pb, sizeof pb, "mech");
	write_ops(pa, 8, a, na);
	write_ops(pb, 16, b, nb);
	snprintf(cmd, sizeof cmd, "%s explain batch %s %s %s", th_bin(), pa, pb, args);
	cr_assert_eq(th_capture(cmd, out, len), 0, "%s", out);
	unlink(pa);
	unlink(pb);
}

/* BFC region growth (allow_growth; a chunk is split only when at least
 * twice the request): at batch 8, 1 + 1.5 + 3 MiB live at once take
 * regions of 2, 4 and 8 MiB (each twice the last; 3.5 MiB free but split
 * when the 3 MiB request came): 14 MiB. At 16, 3 + 1.5 + 1.1 MiB: a 4 MiB
 * region (twice 2 is short of 3: doubled again), a 4 MiB one, and the
 * 1.1 MiB in the rest of it: 8 MiB, although more is live. The fall is
 * the 3rd region batch 8 needed. */
Test(explain, bfc_region_doubling_fall_named)
{
	static const struct op a[] = {
		{'a', 1000, 0x100000, 1 * MiB, 0},     {'a', 1100, 0x200000, 3 * MiB / 2, 0},
		{'a', 1200, 0x300000, 3 * MiB, 0},     {'f', 1300, 0x100000, 1 * MiB, 0},
		{'f', 1400, 0x200000, 3 * MiB / 2, 0}, {'f', 1500, 0x300000, 3 * MiB, 0},
	};
	static const struct op b[] = {
		{'a', 1000, 0x100000, 3 * MiB, 0},       {'a', 1100, 0x200000, 3 * MiB / 2, 0},
		{'a', 1200, 0x300000, 11 * MiB / 10, 0}, {'f', 1300, 0x100000, 3 * MiB, 0},
		{'f', 1400, 0x200000, 3 * MiB / 2, 0},   {'f', 1500, 0x300000, 11 * MiB / 10, 0},
	};
	char out[16384];
	explain_two(a, 6, b, 6, "--policy bfc --conf allow_growth:true", out, sizeof out);
	cr_assert(strstr(out, "FALLS 8 -> 16: bfc: at 8 the peak needed a 3rd region of 8.00 MiB "
			      "(twice the last) for a 3.00 MiB request when 3.50 MiB was free in 2 "
			      "regions but split (largest chunk 2.50 MiB); at 16 the working set "
			      "fitted in 2 regions (8.00 MiB)") != NULL, "%s", out);
	/* the JSON lists the regions with the rule that sized each */
	explain_two(a, 6, b, 6, "--policy bfc --conf allow_growth:true --json", out, sizeof out);
	cr_assert(strstr(out, "\"what\":\"region\",\"nth\":1,\"bytes\":4194304,\"live\":4194304,"
			      "\"why\":\"doubled until the request fit\",\"request\":3145728") != NULL,
		  "%s", out);
}

/* PyTorch's cached search scratch: at batch 8 the search asks 100 MiB then
 * 120 MiB (the cached 100 MiB segment is short: a second segment), and
 * the 100 MiB one stays cached, wholly free, at the peak; at 16 it asks
 * 120 MiB first and the 100 MiB request reuses that segment. Weights of
 * 30 MiB stay live throughout. */
Test(explain, pytorch_cached_scratch_fall_named)
{
	static const struct op a[] = {
		{'a', 500, 0x900000000, 30 * MiB, 0},
		{'r', 1000, 0, 400, "conv1.fwd"},     {'a', 1100, 0x100000000, 100 * MiB, 0},
		{'f', 1200, 0x100000000, 100 * MiB, 0}, {'r', 1500, 0, 400, "conv2.fwd"},
		{'a', 1600, 0x200000000, 120 * MiB, 0}, {'f', 1700, 0x200000000, 120 * MiB, 0},
		{'r', 3000, 0, 2000, "step 1"},       {'a', 3100, 0x300000000, 40 * MiB, 0},
		{'f', 4900, 0x300000000, 40 * MiB, 0},  {'f', 5500, 0x900000000, 30 * MiB, 0},
	};
	static const struct op b[] = {
		{'a', 500, 0x900000000, 30 * MiB, 0},
		{'r', 1000, 0, 400, "conv1.fwd"},     {'a', 1100, 0x100000000, 120 * MiB, 0},
		{'f', 1200, 0x100000000, 120 * MiB, 0}, {'r', 1500, 0, 400, "conv2.fwd"},
		{'a', 1600, 0x200000000, 100 * MiB, 0}, {'f', 1700, 0x200000000, 100 * MiB, 0},
		{'r', 3000, 0, 2000, "step 1"},       {'a', 3100, 0x300000000, 40 * MiB, 0},
		{'f', 4900, 0x300000000, 40 * MiB, 0},  {'f', 5500, 0x900000000, 30 * MiB, 0},
	};
	char out[16384];
	explain_two(a, 11, b, 11, "", out, sizeof out);
	cr_assert(strstr(out, "FALLS 8 -> 16: pytorch: at 8 the cache kept 1 segment wholly free "
			      "at the peak, 100.00 MiB: 100.00 MiB search scratch conv1.fwd; the "
			      "largest was taken for a 100.00 MiB request when nothing was cached; "
			      "at 16: 0 free segments, 0 B [-100.00 MiB = free segments -100.00 MiB, "
			      "free in used segments +0 B, allocated +0 B]") != NULL, "%s", out);
	/* a policy without the hook still explains, without the mechanism */
	explain_two(a, 11, b, 11, "--policy optimal", out, sizeof out);
	cr_assert(strstr(out, "(the policy reports no decisions)") != NULL ||
		  strstr(out, "0 flagged point(s)") != NULL, "%s", out);
}
