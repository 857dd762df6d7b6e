/*
 * test_whatif_interval.c: the range of a batch-size prediction
 * (whatif/batch_fit_interval.c) on hand-made captures whose answer is known:
 * a layer workspace that switches algorithm between the captures (its size
 * at the batch between them is a range that contains either algorithm's
 * need there), captures that align in every site (no range: lo == hi ==
 * the prediction, inside the captures and beyond them), and a warm-up
 * search on one line beyond the captures (a range: another candidate may
 * overtake). Through the library and through `whatif batch --json`.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../traces/trace.h"
#include "../whatif/batch_fit.h"
#include "helpers.h"

#define MiB (1024ull * 1024)

/*
 * A capture at BATCH: weights (4 MiB, live throughout), then inside the
 * NVTX range conv1.fwd an activation of BATCH MiB and a workspace of WS
 * bytes allocated and freed in the range (a per-call workspace; with
 * SEARCH, the range comes before a "step 1" range: the warm-up step's
 * algorithm search). Peak of live bytes: 4 MiB + BATCH MiB + WS.
 */
static void write_capture(const char *path, uint64_t batch, uint64_t ws, int search)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, "toy");
	uint32_t conv = trace_writer_intern(w, "conv1.fwd");
	uint32_t step1 = trace_writer_intern(w, "step 1");
	struct trace_rec r;
	th_mem(w, TREC_ALLOC, 1000, 0x100000000, 4 * MiB);
	memset(&r, 0, sizeof r);
	r.type = TREC_RANGE;
	r.start = 2000;
	r.end = 6000;
	r.u.range.name = conv;
	cr_assert_eq(trace_writer_record(w, &r), 0);
	th_mem(w, TREC_ALLOC, 3000, 0x200000000, batch * MiB);
	th_mem(w, TREC_ALLOC, 4000, 0x300000000, ws);
	th_mem(w, TREC_FREE, 5000, 0x300000000, ws);
	th_mem(w, TREC_FREE, 7000, 0x200000000, batch * MiB);
	if (search) {
		memset(&r, 0, sizeof r);
		r.type = TREC_RANGE;
		r.start = 8000;
		r.end = 9000;
		r.u.range.name = step1;
		cr_assert_eq(trace_writer_record(w, &r), 0);
	}
	th_mem(w, TREC_FREE, 10000, 0x100000000, 4 * MiB);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

static struct bf_trace *load(const char *path)
{
	char err[512];
	struct bf_trace *t = NULL;
	cr_assert_eq(bf_load(path, &t, err, sizeof err), 0, "%s", err);
	return t;
}

/* Peak of live bytes of the capture at PATH. */
static uint64_t live_peak(const char *path)
{
	struct bf_trace *t = load(path);
	struct bf_live l;
	cr_assert_eq(bf_live_at(t, 0, &l), 0);
	bf_free(t);
	return l.total;
}

/* The unsigned number after "KEY": in JSON text J; asserts it is there. */
static uint64_t json_u64(const char *j, const char *key)
{
	char pat[96];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(j, pat);
	cr_assert(p != NULL, "no %s in %s", key, j);
	return strtoull(p + strlen(pat), NULL, 10);
}

/* Captures at BATCHES (N of them) with workspaces WS, written and loaded. */
static void make_set(size_t n, const uint64_t *batches, const uint64_t *ws, int search,
		     char p[][128], struct bf_trace **t, struct bf_model **m)
{
	char err[1024];
	for (size_t i = 0; i < n; i++) {
		th_tmpname(p[i], sizeof p[i], "whatif_interval");
		write_capture(p[i], batches[i], ws[i], search);
		t[i] = load(p[i]);
	}
	struct bf_options o = {0};
	cr_assert_eq(bf_fit(t, n, &o, m, err, sizeof err), 0, "%s", err);
}

static void free_set(size_t n, char p[][128], struct bf_trace **t, struct bf_model *m)
{
	bf_model_free(m);
	for (size_t i = 0; i < n; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
}

/*
 * The workspace is 40 MiB at batch 8 and 10 MiB at 32: it fell, so the
 * algorithm changed somewhere between. At 16 either may run: the batch-8
 * one needs 40..80 MiB there (a need grows with the batch, at most in
 * proportion), the batch-32 one 5..10 MiB. The site's range is [5, 80] MiB
 * and the peak's range contains the captures of both outcomes at 16.
 */
Test(whatif_interval, switch_between_captures_contains_both_outcomes)
{
	const uint64_t b[2] = {8, 32}, ws[2] = {40 * MiB, 10 * MiB};
	char p[2][128];
	struct bf_trace *t[2];
	struct bf_model *m = NULL;
	make_set(2, b, ws, 0, p, t, &m);

	/* template of 16 is the batch-8 capture: 0 weights, 1 activation, 2 workspace */
	uint64_t lo, hi;
	cr_assert_eq(bf_site_bounds(m, 16, 2, &lo, &hi), 1);
	cr_assert_eq(lo, 5 * MiB, "%" PRIu64 " MiB", lo / MiB);
	cr_assert_eq(hi, 80 * MiB, "%" PRIu64 " MiB", hi / MiB);
	cr_assert_eq(bf_site_bounds(m, 16, 1, &lo, &hi), 0, "an activation keeps its fit");
	cr_assert_eq(lo, 16 * MiB);

	struct bf_site_range *sr = NULL;
	size_t nsr = 0;
	cr_assert_eq(bf_interval_sites(m, 16, &sr, &nsr), 0);
	cr_assert_eq(nsr, 1);
	cr_assert_eq(sr[0].site, 2);
	cr_assert_eq(sr[0].why, BF_WHY_SWITCH);
	cr_assert_eq(sr[0].batch_a, 8);
	cr_assert_eq(sr[0].batch_b, 32);
	cr_assert_str_eq(sr[0].range, "conv1.fwd");
	cr_assert_eq(sr[0].search, 0);
	cr_assert(sr[0].lo <= sr[0].predicted && sr[0].predicted <= sr[0].hi);
	free(sr);

	struct bf_interval iv;
	cr_assert_eq(bf_interval(m, 16, &iv), 0);
	cr_assert_eq(iv.sites, 1);
	cr_assert_eq(iv.extrapolated, 0);
	cr_assert_eq(iv.peak_lo, (4 + 16 + 5) * MiB);
	cr_assert_eq(iv.peak_hi, (4 + 16 + 80) * MiB);
	cr_assert(iv.peak_lo < iv.peak_live && iv.peak_live < iv.peak_hi);

	/* the two outcomes, captured at 16 */
	char q[2][128];
	const uint64_t out_ws[2] = {60 * MiB, 5 * MiB};
	for (int k = 0; k < 2; k++) {
		th_tmpname(q[k], sizeof q[k], "whatif_interval_truth");
		write_capture(q[k], 16, out_ws[k], 0);
		uint64_t pk = live_peak(q[k]);
		cr_assert(iv.peak_lo <= pk && pk <= iv.peak_hi, "outcome %d: %" PRIu64 " MiB outside "
			  "%" PRIu64 "-%" PRIu64 " MiB", k, pk / MiB, iv.peak_lo / MiB, iv.peak_hi / MiB);
	}

	/* the command: the range in JSON and in words, replayed under a policy */
	const char *bin = th_bin();
	char o[128], cmd[2048], out[65536];
	th_tmpname(o, sizeof o, "whatif_interval_pred");
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 16 -o %s --policy cuda_malloc "
		 "--json 2>/dev/null", bin, p[0], p[1], o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_eq(json_u64(out, "interval_sites"), 1, "%s", out);
	cr_assert_eq(json_u64(out, "peak_lo"), iv.peak_lo);
	cr_assert_eq(json_u64(out, "peak_hi"), iv.peak_hi);
	cr_assert(strstr(out, "\"extrapolated\":false") != NULL, "%s", out);
	cr_assert(strstr(out, "\"why\":\"algorithm switch\"") != NULL, "%s", out);
	cr_assert_eq(json_u64(out, "replays"), 3);
	uint64_t rlo = json_u64(out, "peak_reserved_lo"), rhi = json_u64(out, "peak_reserved_hi");
	uint64_t rp = json_u64(out, "peak_reserved");
	cr_assert(rlo < rp && rp < rhi, "%" PRIu64 " %" PRIu64 " %" PRIu64, rlo, rp, rhi);
	for (int k = 0; k < 2; k++) {
		char jo[8192];
		snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --json --quiet", bin,
			 q[k]);
		cr_assert_eq(th_capture(cmd, jo, sizeof jo), 0, "%s", jo);
		uint64_t r = json_u64(jo, "peak_reserved");
		cr_assert(rlo <= r && r <= rhi, "outcome %d: reserved %" PRIu64 " outside %" PRIu64
			  "-%" PRIu64, k, r, rlo, rhi);
		unlink(q[k]);
	}
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 16 -o %s", bin, p[0], p[1], o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "can fall in 25.00 MiB-100.00 MiB: 1 site unpredictable "
			      "(1 algorithm switch between b8 and b32)") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 16 -o %s --conf x", bin, p[0],
		 p[1], o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "--conf without --policy: %s", out);
	unlink(o);
	free_set(2, p, t, m);
}

/*
 * Every site aligns and the workspace grows in proportion to the batch
 * (one algorithm): nothing is a range, inside the captures (24) or beyond
 * them (64, extrapolated: three captures on one line); lo == hi == the
 * prediction, for live bytes and for the replay.
 */
Test(whatif_interval, aligned_captures_have_no_range)
{
	const uint64_t b[3] = {8, 16, 32}, ws[3] = {8 * MiB, 16 * MiB, 32 * MiB};
	char p[3][128];
	struct bf_trace *t[3];
	struct bf_model *m = NULL;
	make_set(3, b, ws, 0, p, t, &m);
	const uint64_t at[2] = {24, 64};
	for (int k = 0; k < 2; k++) {
		struct bf_interval iv;
		cr_assert_eq(bf_interval(m, at[k], &iv), 0);
		cr_assert_eq(iv.sites, 0, "batch %" PRIu64, at[k]);
		cr_assert_eq(iv.extrapolated, k == 1);
		cr_assert_eq(iv.peak_live, (4 + 2 * at[k]) * MiB);
		cr_assert_eq(iv.peak_lo, iv.peak_live);
		cr_assert_eq(iv.peak_hi, iv.peak_live);
		struct bf_site_range *sr = NULL;
		size_t nsr = 1;
		cr_assert_eq(bf_interval_sites(m, at[k], &sr, &nsr), 0);
		cr_assert_eq(nsr, 0);
		cr_assert_null(sr);
	}
	const char *bin = th_bin();
	char o[128], cmd[2048], out[16384];
	th_tmpname(o, sizeof o, "whatif_interval_pred");
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s %s --batch 64 -o %s --policy "
		 "cuda_malloc --json 2>/dev/null", bin, p[0], p[1], p[2], o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_eq(json_u64(out, "interval_sites"), 0, "%s", out);
	cr_assert(strstr(out, "\"extrapolated\":true") != NULL, "%s", out);
	cr_assert(strstr(out, "\"interval_detail\":[]") != NULL, "%s", out);
	cr_assert_eq(json_u64(out, "peak_lo"), json_u64(out, "peak_live"));
	cr_assert_eq(json_u64(out, "peak_hi"), json_u64(out, "peak_live"));
	cr_assert_eq(json_u64(out, "replays"), 1);
	uint64_t rp = json_u64(out, "peak_reserved");
	cr_assert_eq(json_u64(out, "peak_reserved_lo"), rp);
	cr_assert_eq(json_u64(out, "peak_reserved_hi"), rp);
	cr_assert_eq(json_u64(out, "peak_allocated_lo"), json_u64(out, "peak_allocated"));
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s %s --batch 64 -o %s --policy "
		 "cuda_malloc", bin, p[0], p[1], p[2], o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, ": every site predicted (extrapolated beyond the captures)") != NULL,
		  "%s", out);
	unlink(o);
	free_set(3, p, t, m);
}

/*
 * A warm-up search whose sizes lie on one line (100 MiB + 1 MiB per
 * sample at 8, 16, 32): inside the captures that line stands, beyond them
 * it does not (a candidate smaller at 32, growing in proportion, may
 * overtake the largest): at 64 the size is a range from the largest
 * capture's size to that grown in proportion, within the search limit.
 */
Test(whatif_interval, search_beyond_captures_is_a_range)
{
	const uint64_t b[3] = {8, 16, 32}, ws[3] = {108 * MiB, 116 * MiB, 132 * MiB};
	char p[3][128];
	struct bf_trace *t[3];
	struct bf_model *m = NULL;
	make_set(3, b, ws, 1, p, t, &m);
	uint64_t lo, hi;
	cr_assert_eq(bf_site_bounds(m, 24, 2, &lo, &hi), 0, "inside: the line");
	cr_assert_eq(lo, 124 * MiB, "%" PRIu64, lo / MiB);
	cr_assert_eq(bf_predict_site(m, 2, 64), 164 * MiB);
	cr_assert_eq(bf_site_bounds(m, 64, 2, &lo, &hi), 1);
	cr_assert_eq(lo, 132 * MiB, "%" PRIu64, lo / MiB);
	cr_assert_eq(hi, 264 * MiB, "%" PRIu64, hi / MiB);
	struct bf_site_range *sr = NULL;
	size_t nsr = 0;
	cr_assert_eq(bf_interval_sites(m, 64, &sr, &nsr), 0);
	cr_assert_eq(nsr, 1);
	cr_assert_eq(sr[0].why, BF_WHY_ABOVE);
	cr_assert_eq(sr[0].batch_a, 32);
	cr_assert_eq(sr[0].search, 1);
	cr_assert_str_eq(bf_why_name(sr[0].why), "extrapolated above");
	free(sr);
	struct bf_interval iv;
	cr_assert_eq(bf_interval(m, 64, &iv), 0);
	cr_assert_eq(iv.extrapolated, 1);
	cr_assert_eq(iv.peak_lo, (4 + 64 + 132) * MiB);
	cr_assert_eq(iv.peak_live, (4 + 64 + 164) * MiB);
	cr_assert_eq(iv.peak_hi, (4 + 64 + 264) * MiB);
	free_set(3, p, t, m);
}

/*
 * A warm-up step of N algorithm searches (ranges conv1.fwd, conv2.fwd, ...),
 * each a transient workspace of WS[k] bytes (allocated and freed in its
 * range, nothing allocated in between); weights of 4 MiB live throughout;
 * then "step 1". With INNER 1, a 4 MiB activation is allocated inside the
 * first search (so that request is not transient); with INNER 2, an
 * empty_cache falls inside it instead.
 */
/* the size of the allocation INNER makes inside the first search */
static uint64_t inner_bytes = 4 * MiB;

static void write_searches(const char *path, uint64_t batch, const uint64_t *ws, size_t n,
			   int inner)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, "toy");
	struct trace_rec r;
	th_mem(w, TREC_ALLOC, 1000, 0x100000000, 4 * MiB);
	uint64_t t = 2000;
	for (size_t k = 0; k < n; k++) {
		char name[32];
		snprintf(name, sizeof name, "conv%zu.fwd", k + 1);
		memset(&r, 0, sizeof r);
		r.type = TREC_RANGE;
		r.start = t;
		r.end = t + 900;
		r.u.range.name = trace_writer_intern(w, name);
		cr_assert_eq(trace_writer_record(w, &r), 0);
		th_mem(w, TREC_ALLOC, t + 100, 0x200000000 + k * 0x100000000ull, ws[k]);
		if (inner == 1 && k == 0)
			th_mem(w, TREC_ALLOC, t + 200, 0x900000000, inner_bytes);
		if (inner == 2 && k == 0) {
			memset(&r, 0, sizeof r);
			r.type = TREC_CONTROL;
			r.start = r.end = t + 200;
			r.u.control.kind = TCTL_EMPTY_CACHE;
			cr_assert_eq(trace_writer_record(w, &r), 0);
		}
		th_mem(w, TREC_FREE, t + 500, 0x200000000 + k * 0x100000000ull, ws[k]);
		t += 1000;
	}
	memset(&r, 0, sizeof r);
	r.type = TREC_RANGE;
	r.start = t;
	r.end = t + 500;
	r.u.range.name = trace_writer_intern(w, "step 1");
	cr_assert_eq(trace_writer_record(w, &r), 0);
	if (inner == 1)
		th_mem(w, TREC_FREE, t + 600, 0x900000000, inner_bytes);
	th_mem(w, TREC_FREE, t + 700, 0x100000000, 4 * MiB);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

/* `whatif batch --json --policy P` on the captures A (batch 8) and B
 * (batch 32) at 16; the JSON into OUT. */
static void whatif_json(const char *a, const char *b, const char *policy, char *out, size_t len)
{
	char o[128], cmd[2048];
	th_tmpname(o, sizeof o, "whatif_interval_pred");
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 16 -o %s --policy %s "
		 "--json 2>/dev/null", th_bin(), a, b, o, policy);
	cr_assert_eq(th_capture(cmd, out, len), 0, "%s", out);
	unlink(o);
}

static uint64_t run_reserved(const char *trace, const char *policy)
{
	char cmd[2048], jo[8192];
	snprintf(cmd, sizeof cmd, "%s run %s --policy %s --no-db --json --quiet", th_bin(), trace,
		 policy);
	cr_assert_eq(th_capture(cmd, jo, sizeof jo), 0, "%s", jo);
	return json_u64(jo, "peak_reserved");
}

/*
 * Three searches whose workspaces all fell between the captures (400, 300,
 * 200 MiB at 8; 100 MiB each at 32): at 16 each is a range (an algorithm
 * switch) from its prediction up to 800, 600, 400 MiB. Under pytorch's
 * caching allocator the peak reserved depends on their order, not only on
 * their sizes: the point and both replays at the sites' bounds (all low,
 * all high) fall, so one segment serves all three (at most 20 + 800 MiB);
 * captured at 16 with 310, 350, 390 MiB (rising, each within its range)
 * every search is larger than every cached block and makes a segment of
 * its own: 1070 MiB, above the point and every replay. The bounds contain
 * it, and the falling 390, 350, 310; the upper one is the replay without
 * the searches (the weights' 20 MiB segment) plus one segment each at its
 * high bound (800 + 600 + 400 MiB).
 */
Test(whatif_interval, reserved_bounds_contain_an_order_the_replays_miss)
{
	const uint64_t w8[3] = {400 * MiB, 300 * MiB, 200 * MiB};
	const uint64_t w32[3] = {100 * MiB, 100 * MiB, 100 * MiB};
	char p[2][128];
	th_tmpname(p[0], sizeof p[0], "whatif_interval_s8");
	th_tmpname(p[1], sizeof p[1], "whatif_interval_s32");
	write_searches(p[0], 8, w8, 3, 0);
	write_searches(p[1], 32, w32, 3, 0);
	char out[65536];
	whatif_json(p[0], p[1], "pytorch", out, sizeof out);
	cr_assert_eq(json_u64(out, "interval_sites"), 3, "%s", out);
	uint64_t lo = json_u64(out, "peak_reserved_lo"), hi = json_u64(out, "peak_reserved_hi");
	uint64_t rhi = json_u64(out, "replay_reserved_hi"), pt = json_u64(out, "peak_reserved");
	cr_assert_eq(json_u64(out, "not_transient"), 0, "%s", out);
	/* lower: the live bytes at the low bounds (4 MiB + the largest search) */
	cr_assert_eq(lo, json_u64(out, "peak_lo"), "%s", out);
	cr_assert(lo < (4 + 310) * MiB, "%" PRIu64, lo / MiB);
	/* upper: weights' 20 MiB segment + 400 + 600 + 800 MiB */
	cr_assert_eq(json_u64(out, "reserved_certain"), 20 * MiB, "%s", out);
	cr_assert_eq(json_u64(out, "reserved_uncertain_segments"), 1800 * MiB, "%s", out);
	cr_assert_eq(hi, 1820 * MiB, "%" PRIu64, hi / MiB);
	cr_assert(lo <= pt && pt <= hi);

	const uint64_t rising[3] = {310 * MiB, 350 * MiB, 390 * MiB};
	const uint64_t falling[3] = {390 * MiB, 350 * MiB, 310 * MiB};
	char q[128];
	th_tmpname(q, sizeof q, "whatif_interval_truth");
	write_searches(q, 16, rising, 3, 0);
	uint64_t up = run_reserved(q, "pytorch");
	cr_assert_eq(up, (20 + 310 + 350 + 390) * MiB, "%" PRIu64, up / MiB);
	cr_assert(up > pt, "the point (%" PRIu64 " MiB) under-reserves the rising order",
		  pt / MiB);
	cr_assert(up > rhi, "the replays at the bounds (up to %" PRIu64 " MiB) miss it",
		  rhi / MiB);
	cr_assert(lo <= up && up <= hi);
	write_searches(q, 16, falling, 3, 0);
	uint64_t down = run_reserved(q, "pytorch");
	cr_assert_eq(down, (20 + 390) * MiB, "%" PRIu64, down / MiB);
	cr_assert(lo <= down && down <= hi);
	unlink(q);

	/* the text names the rule and the replays */
	char o[128], cmd[2048];
	th_tmpname(o, sizeof o, "whatif_interval_pred");
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 16 -o %s --policy pytorch",
		 th_bin(), p[0], p[1], o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "-1.78 GiB (allocated") != NULL, "%s", out);
	cr_assert(strstr(out, "bound: pytorch: replay without the unpredictable requests") != NULL,
		  "%s", out);
	unlink(o);

	/* cuda_malloc (no cache): the bounds are the replays at the sites' bounds */
	whatif_json(p[0], p[1], "cuda_malloc", out, sizeof out);
	cr_assert_eq(json_u64(out, "peak_reserved_hi"), json_u64(out, "replay_reserved_hi"));
	cr_assert_eq(json_u64(out, "peak_reserved_lo"), json_u64(out, "replay_reserved_lo"));
	/* bfc: a lower bound only */
	whatif_json(p[0], p[1], "bfc", out, sizeof out);
	cr_assert(strstr(out, "\"peak_reserved_hi\":null") != NULL, "%s", out);
	cr_assert_eq(json_u64(out, "peak_reserved_lo"), lo);
	unlink(p[0]);
	unlink(p[1]);
}

/* Two searches at batch 8 (200, 300 MiB) and 32 (100, 100 MiB) with INNER
 * (write_searches) inside the first; `whatif batch --policy pytorch --json`
 * at 16 into OUT, after the checks every such case shares: two sites with
 * ranges, the first not transient, the lower bound the live bytes'. */
static void inner_case(int inner, char *out, size_t len)
{
	const uint64_t w8[2] = {200 * MiB, 300 * MiB}, w32[2] = {100 * MiB, 100 * MiB};
	char p[2][128];
	th_tmpname(p[0], sizeof p[0], "whatif_interval_i8");
	th_tmpname(p[1], sizeof p[1], "whatif_interval_i32");
	write_searches(p[0], 8, w8, 2, inner);
	write_searches(p[1], 32, w32, 2, inner);
	whatif_json(p[0], p[1], "pytorch", out, len);
	unlink(p[0]);
	unlink(p[1]);
	cr_assert_eq(json_u64(out, "interval_sites"), 2, "%s", out);
	cr_assert_eq(json_u64(out, "not_transient"), 1, "%s", out);
	cr_assert_eq(json_u64(out, "not_transient_site"), 1, "%s", out);
	cr_assert_eq(json_u64(out, "peak_reserved_lo"), json_u64(out, "peak_lo"));
}

/*
 * An activation allocated inside a search: that request is not transient.
 * The activation (an intruder) may find no cached block where, without
 * the search, it would have: the upper bound adds one segment for it
 * (20 MiB: pytorch's segment for a 4 MiB request) to the replay without
 * the searches plus one segment each; named in the JSON and the rule.
 */
Test(whatif_interval, intruder_adds_its_segment_to_the_bound)
{
	char out[65536];
	inner_case(1, out, sizeof out);
	cr_assert_eq(json_u64(out, "reserved_intruders"), 1, "%s", out);
	cr_assert_eq(json_u64(out, "reserved_intruder_segments"), 20 * MiB, "%s", out);
	uint64_t hi = json_u64(out, "peak_reserved_hi");
	cr_assert_eq(hi, json_u64(out, "reserved_certain") +
				 json_u64(out, "reserved_uncertain_segments") + 20 * MiB, "%s", out);
	cr_assert_geq(hi, json_u64(out, "peak_reserved"), "%s", out);
	cr_assert(strstr(out, "one per request allocated in their pools") != NULL, "%s", out);
}

/* An empty_cache inside a search releases cached segments the run without
 * it keeps: no upper bound, said so; the lower bound stands. */
Test(whatif_interval, empty_cache_inside_a_search_has_no_upper_bound)
{
	char out[65536];
	inner_case(2, out, sizeof out);
	cr_assert(strstr(out, "\"peak_reserved_hi\":null") != NULL, "%s", out);
	cr_assert(strstr(out, "empty_cache falls while") != NULL, "%s", out);
}

/*
 * The same with searches of 100-300 B and a 256 B allocation inside the
 * first, all in pytorch's small pool: every size the first search can
 * take rounds to one 512 B block, so it is no uncertainty for pytorch and
 * the upper bound stands (the second search is transient).
 */
Test(whatif_interval, range_inside_one_granule_is_no_uncertainty)
{
	const uint64_t w8[2] = {200, 300}, w32[2] = {100, 100};
	char p[2][128];
	th_tmpname(p[0], sizeof p[0], "whatif_interval_g8");
	th_tmpname(p[1], sizeof p[1], "whatif_interval_g32");
	inner_bytes = 256;
	write_searches(p[0], 8, w8, 2, 1);
	write_searches(p[1], 32, w32, 2, 1);
	inner_bytes = 4 * MiB;
	char out[65536];
	whatif_json(p[0], p[1], "pytorch", out, sizeof out);
	cr_assert_eq(json_u64(out, "interval_sites"), 2, "%s", out);
	cr_assert_eq(json_u64(out, "not_transient"), 0, "%s", out);
	cr_assert(strstr(out, "\"peak_reserved_hi\":null") == NULL, "%s", out);
	cr_assert(json_u64(out, "peak_reserved_hi") >= json_u64(out, "peak_reserved"), "%s", out);
	unlink(p[0]);
	unlink(p[1]);
}
