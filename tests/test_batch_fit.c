/*
 * test_batch_fit.c: the batch-size what-if transform (whatif/batch_fit_*.c)
 * on synthetic captures at batch 8, 16 and 32 whose ground truth is known:
 * a constant site (weights), linear sites (activations), a non-linear
 * workspace inside a layer's NVTX range; plus a misaligned capture.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../whatif/batch_fit.h"
#include "../traces/trace.h"
#include "helpers.h"

#define MiB (1024ull * 1024)

/* Workspace bytes per batch: deliberately not linear. */
static uint64_t ws_bytes(uint64_t b)
{
	return b == 8 ? 1 * MiB : b == 16 ? 4 * MiB : 2 * MiB;
}

/* A capture at BATCH; EXTRA adds an allocation the others lack. */
static void write_capture(const char *path, uint64_t batch, int extra)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, "toy");
	uint32_t conv = trace_writer_intern(w, "conv1.fwd");
	uint64_t t = 1000;
	struct trace_rec r;
#define ALLOC(addr_, bytes_) do { memset(&r, 0, sizeof r); r.type = TREC_ALLOC; r.start = r.end = t += 100; \
	r.u.mem.addr = (addr_); r.u.mem.bytes = (bytes_); r.u.mem.stream = TRACE_NO_STREAM; \
	r.u.mem.kind = 3; r.u.mem.source = TRACE_NO_STRING; cr_assert_eq(trace_writer_record(w, &r), 0); } while (0)
#define FREE(addr_, bytes_) do { memset(&r, 0, sizeof r); r.type = TREC_FREE; r.start = r.end = t += 100; \
	r.u.mem.addr = (addr_); r.u.mem.bytes = (bytes_); r.u.mem.stream = TRACE_NO_STREAM; \
	r.u.mem.kind = 3; r.u.mem.source = TRACE_NO_STRING; cr_assert_eq(trace_writer_record(w, &r), 0); } while (0)
	ALLOC(0x100000000, 4 * MiB);                 /* weights: constant */
	for (int step = 0; step < 2; step++) {
		ALLOC(0x200000000, 512 * (2 + batch));   /* input: linear */
		memset(&r, 0, sizeof r);
		r.type = TREC_RANGE;
		r.start = t += 100;
		r.end = r.start + 350;
		r.u.range.name = conv;
		cr_assert_eq(trace_writer_record(w, &r), 0);
		ALLOC(0x300000000, MiB * batch);         /* activation: linear */
		ALLOC(0x400000000, ws_bytes(batch));     /* workspace: freed in its range */
		FREE(0x400000000, ws_bytes(batch));
		if (extra && step == 1) {
			ALLOC(0x500000000, 4096);
			FREE(0x500000000, 4096);
		}
		FREE(0x300000000, MiB * batch);
		FREE(0x200000000, 512 * (2 + batch));
	}
	FREE(0x100000000, 4 * MiB);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

static struct bf_trace *load(const char *path)
{
	char err[512];
	struct bf_trace *t = NULL;
	cr_assert_eq(bf_load(path, &t, err, sizeof err), 0, "%s", err);
	return t;
}

/* A capture at batch 8 and one at BATCH (with the extra site when EXTRA),
 * written to fresh files P and loaded into T. */
static void load_two(char p[2][128], struct bf_trace *t[2], uint64_t batch, int extra)
{
	for (int i = 0; i < 2; i++) {
		th_tmpname(p[i], sizeof p[i], "batch_fit_two");
		write_capture(p[i], i ? batch : 8, i ? extra : 0);
		t[i] = load(p[i]);
	}
}

/* Site sizes at 24 (interpolated) and 64 (extrapolated) match the truth. */
Test(batch_fit, predicts_sites)
{
	char p[3][128];
	uint64_t b[3] = {8, 16, 32};
	struct bf_trace *t[3];
	for (int i = 0; i < 3; i++) {
		th_tmpname(p[i], sizeof p[i], "batch_fit_pred");
		write_capture(p[i], b[i], 0);
		t[i] = load(p[i]);
	}
	struct bf_model *m = NULL;
	char err[1024];
	struct bf_options o = {0};
	cr_assert_eq(bf_fit(t, 3, &o, &m, err, sizeof err), 0, "%s", err);
	const struct bf_report *r = bf_model_report(m);
	cr_assert_eq(r->nsites, 7);
	cr_assert_eq(r->nunaligned, 0);
	cr_assert_eq(bf_site_kind(m, 0), 'c');
	cr_assert_eq(bf_site_kind(m, 1), 'l');
	cr_assert_eq(bf_site_kind(m, 2), 'l');
	cr_assert_eq(bf_site_kind(m, 3), 'n');
	cr_assert_eq(r->nworkspace, 2);
	cr_assert_eq(bf_predict_site(m, 0, 24), 4 * MiB);
	cr_assert_eq(bf_predict_site(m, 1, 24), 512 * 26);
	cr_assert_eq(bf_predict_site(m, 2, 24), 24 * MiB);
	cr_assert_eq(bf_predict_site(m, 3, 24), 3 * MiB);   /* between 4 and 2 MiB */
	cr_assert_eq(bf_predict_site(m, 1, 64), 512 * 66);
	cr_assert_eq(bf_predict_site(m, 2, 64), 64 * MiB);
	/* a per-call workspace outside the captures: the nearest capture's
	 * bytes per sample (2 MiB at 32, 1 MiB at 8) */
	cr_assert_eq(bf_predict_site(m, 3, 64), 4 * MiB);
	cr_assert_eq(bf_predict_site(m, 3, 4), MiB / 2);

	/* the synthesised trace at 64 reads back with the predicted sizes */
	char out[128];
	th_tmpname(out, sizeof out, "batch_fit_out");
	cr_assert_eq(bf_synth(m, 64, out, err, sizeof err), 0, "%s", err);
	struct bf_trace *s = load(out);
	cr_assert_eq(bf_batch(s), 64);
	cr_assert_str_eq(bf_label(s, "whatif"), "batch");
	struct bf_live live;
	cr_assert_eq(bf_live_at(s, 0, &live), 0);
	cr_assert_eq(live.total, 4 * MiB + 512 * 66 + 64 * MiB + 4 * MiB);
	cr_assert_eq(live.workspace, 4 * MiB);
	cr_assert_eq(live.nws, 1);
	cr_assert_str_eq(live.ws[0].name, "conv1.fwd");
	bf_free(s);
	unlink(out);
	bf_model_free(m);
	for (int i = 0; i < 3; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
}

/* A capture with an allocation the others lack: the error names it. */
Test(batch_fit, misalignment_names_the_site)
{
	char p[2][128];
	struct bf_trace *t[2];
	load_two(p, t, 16, 1);
	struct bf_model *m = NULL;
	char err[2048];
	struct bf_options o = {.strict_align = 1};
	cr_assert_eq(bf_fit(t, 2, &o, &m, err, sizeof err), -1);
	cr_assert(strstr(err, "allocation site 7") != NULL, "%s", err);
	cr_assert(strstr(err, "4096 bytes") != NULL, "%s", err);
	cr_assert(strstr(err, p[1]) != NULL, "%s", err);
	/* by default: the rest aligns, the extra site is copied */
	o.strict_align = 0;
	cr_assert_eq(bf_fit(t, 2, &o, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(bf_model_report(m)->nunaligned, 0); /* the smallest capture lacks it */
	cr_assert_eq(bf_model_report(m)->aligned_prefix, 14);
	bf_model_free(m);
	for (int i = 0; i < 2; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
}

/* Captures without a batch label, or two at one batch, are refused. */
Test(batch_fit, refuses_bad_inputs)
{
	char p[2][128], err[1024];
	struct bf_trace *t[2];
	load_two(p, t, 8, 0);
	struct bf_model *m = NULL;
	cr_assert_eq(bf_fit(t, 2, NULL, &m, err, sizeof err), -1);
	cr_assert(strstr(err, "both have batch 8") != NULL, "%s", err);
	bf_free(t[0]);
	bf_free(t[1]);
	FILE *f = fopen(p[0], "w");
	cr_assert_not_null(f);
	fputs("gpumemsim-trace 1\na 10 0x10 5 -\nend 1 0\n", f);
	fclose(f);
	struct bf_trace *x = NULL;
	cr_assert_eq(bf_load(p[0], &x, err, sizeof err), -1);
	cr_assert(strstr(err, "batch") != NULL && strstr(err, p[0]) != NULL, "%s", err);
	unlink(p[0]);
	unlink(p[1]);
}

/* A capture whose outer range ("step 0", depth 0) is written after a layer
 * range (depth 2) with a clamped start, as the torch captures do; then
 * "step 1" with one activation and a workspace. */
static void write_late_range(const char *path, uint64_t batch)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, NULL);
	uint32_t fc = trace_writer_intern(w, "fc.fwd"), s0 = trace_writer_intern(w, "step 0");
	uint32_t s1 = trace_writer_intern(w, "step 1");
	uint64_t t = 1000;
	struct trace_rec r;
#define RANGE(name_, depth_, len_) do { memset(&r, 0, sizeof r); r.type = TREC_RANGE; \
	r.start = t += 10; r.end = r.start + (len_); r.u.range.name = (name_); r.u.range.depth = (depth_); \
	cr_assert_eq(trace_writer_record(w, &r), 0); } while (0)
	ALLOC(0x100000000, 4 * MiB);          /* weights, live across the steps */
	RANGE(fc, 2, 1000);
	RANGE(s0, 0, 2000);                   /* late, clamped: must not hide fc.fwd */
	ALLOC(0x200000000, 64 * MiB);         /* search scratch in fc.fwd */
	FREE(0x200000000, 64 * MiB);
	t += 3000;
	RANGE(s1, 0, 1000);
	ALLOC(0x300000000, MiB * batch);
	FREE(0x300000000, MiB * batch);
	FREE(0x100000000, 4 * MiB);
#undef RANGE
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

Test(batch_fit, late_outer_range_keeps_the_layer)
{
	char p[64];
	th_tmpname(p, sizeof p, "batch_fit_late");
	write_late_range(p, 8);
	struct bf_trace *t = load(p);
	struct bf_live l;
	/* at the peak the 64 MiB scratch is live, attributed to fc.fwd */
	cr_assert_eq(bf_live_at(t, 0, &l), 0);
	cr_assert_eq(l.total, 68 * MiB);
	cr_assert_eq(l.workspace, 64 * MiB);
	cr_assert_eq(l.nws, 1);
	cr_assert_str_eq(l.ws[0].name, "fc.fwd");
	bf_free(t);
	unlink(p);
}

Test(batch_fit, steady_state_drops_the_first_step)
{
	char p[64], q[64], err[512];
	th_tmpname(p, sizeof p, "batch_fit_st_in");
	th_tmpname(q, sizeof q, "batch_fit_st_out");
	write_late_range(p, 8);
	struct bf_trace *t = load(p);
	cr_assert_eq(bf_write_from_range(t, "step 1", q, err, sizeof err), 0, "%s", err);
	/* no such range: an error naming the file, nothing written over Q */
	cr_assert_eq(bf_write_from_range(t, "step 9", q, err, sizeof err), -1);
	cr_assert(strstr(err, "step 9") && strstr(err, p), "%s", err);
	bf_free(t);
	struct bf_trace *s = load(q);
	struct bf_live l;
	cr_assert_eq(bf_live_at(s, 0, &l), 0);
	/* weights (live across the cut) + the step-1 activation; no scratch */
	cr_assert_eq(l.total, 4 * MiB + 8 * MiB);
	cr_assert_eq(l.nlive, 2);
	cr_assert_eq(bf_batch(s), 8);
	bf_free(s);
	unlink(p);
	unlink(q);
}

/* Search workspace of the warm-up step at BATCH: 300 MiB + 10 MiB per
 * sample, except at 64 where (as when a candidate crosses cuDNN's search
 * limit) the largest candidate is no longer tried. */
static uint64_t search_bytes(uint64_t b)
{
	return b == 64 ? 200 * MiB : 300 * MiB + 10 * MiB * b;
}

/* A two-step capture: "step 0" runs the search in conv1.fwd (and, except at
 * batch 8, a per-call workspace after it), "step 1" only the activation. */
static void write_search_capture(const char *path, uint64_t batch)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, "toy");
	uint32_t conv = trace_writer_intern(w, "conv1.fwd");
	uint32_t s0 = trace_writer_intern(w, "step 0"), s1 = trace_writer_intern(w, "step 1");
	uint64_t t = 1000;
	struct trace_rec r;
#define RANGE(name_, len_, depth_) do { memset(&r, 0, sizeof r); r.type = TREC_RANGE; r.start = t += 10; \
	r.end = r.start + (len_); r.u.range.name = (name_); r.u.range.depth = (depth_); \
	cr_assert_eq(trace_writer_record(w, &r), 0); } while (0)
	ALLOC(0x100000000, 4 * MiB);
	RANGE(s0, 5000, 0);
	RANGE(conv, 1000, 1);
	ALLOC(0x300000000, MiB * batch);
	ALLOC(0x400000000, search_bytes(batch));
	FREE(0x400000000, search_bytes(batch));
	if (batch != 8) {
		ALLOC(0x500000000, 5 * MiB);
		FREE(0x500000000, 5 * MiB);
	}
	FREE(0x300000000, MiB * batch);
	t += 5000;
	RANGE(s1, 5000, 0);
	RANGE(conv, 1000, 1);
	ALLOC(0x300000000, MiB * batch);
	FREE(0x300000000, MiB * batch);
	FREE(0x100000000, 4 * MiB);
#undef RANGE
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

/* The search workspace aligns with the other captures' search workspace,
 * not with their per-call one (sizes that follow the batch win), and is
 * predicted on the trend of the captures below the batch while that stays
 * under the search limit, not by a line to the capture where it fell. */
Test(batch_fit, search_workspace_follows_its_trend_up_to_the_limit)
{
	const uint64_t b[3] = {8, 16, 64};
	char p[3][128];
	struct bf_trace *t[3];
	for (int i = 0; i < 3; i++) {
		th_tmpname(p[i], sizeof p[i], "batch_fit_search");
		write_search_capture(p[i], b[i]);
		t[i] = load(p[i]);
	}
	struct bf_model *m = NULL;
	char err[1024];
	struct bf_options o = {0};
	cr_assert_eq(bf_fit(t, 3, &o, &m, err, sizeof err), 0, "%s", err);
	/* batch 8 numbering: 0 weights, 1 activation, 2 search, 3 activation */
	cr_assert_neq(bf_site_kind(m, 2), 'u');
	cr_assert_eq(bf_predict_site(m, 2, 32), 620 * MiB, "%llu MiB",
		     (unsigned long long)(bf_predict_site(m, 2, 32) / MiB));
	/* beyond the limit the trend is not followed: the nearest capture's */
	cr_assert_eq(bf_predict_site(m, 2, 128), 200 * MiB, "%llu", (unsigned long long)bf_predict_site(m, 2, 128));
	/* a limit below the trend: the upper capture's size */
	bf_model_free(m);
	o.search_limit = 512 * MiB;
	cr_assert_eq(bf_fit(t, 3, &o, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(bf_predict_site(m, 2, 32), 200 * MiB);
	/* the per-site report: a header and one row per template site */
	char sp[128];
	th_tmpname(sp, sizeof sp, "batch_fit_sites");
	FILE *f = fopen(sp, "w");
	cr_assert_not_null(f);
	cr_assert_eq(bf_write_sites(m, 32, f), 0);
	fclose(f);
	f = fopen(sp, "r");
	cr_assert_not_null(f);
	char line[512];
	int rows = 0, paired = 0;
	cr_assert_not_null(fgets(line, sizeof line, f));
	cr_assert(strstr(line, "predicted_b32"), "%s", line);
	while (fgets(line, sizeof line, f)) {
		rows++;
		if (strstr(line, "\tp\t"))
			paired++;
	}
	fclose(f);
	/* template is batch 16 (ties go up: 16 and 64 are not tied; 16 nearer) */
	cr_assert_eq(rows, 5);
	cr_assert_eq(paired, 1, "the per-call workspace batch 8 lacks is paired in 16 and 64");
	bf_model_free(m);
	for (int i = 0; i < 3; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
	unlink(sp);
}

/* Search workspaces on an exact line (300 MiB + 10 MiB per sample at 8, 16
 * and 32) follow it only while it stays within the search limit: at 64 the
 * line (940 MiB), at 128 (1580 MiB, over the 1 GiB default) the largest
 * capture's size, not the line. */
Test(batch_fit, linear_search_workspace_stops_at_the_limit)
{
	const uint64_t b[3] = {8, 16, 32};
	char p[3][128];
	struct bf_trace *t[3];
	for (int i = 0; i < 3; i++) {
		th_tmpname(p[i], sizeof p[i], "batch_fit_lsearch");
		write_search_capture(p[i], b[i]);
		t[i] = load(p[i]);
	}
	struct bf_model *m = NULL;
	char err[1024];
	struct bf_options o = {0};
	cr_assert_eq(bf_fit(t, 3, &o, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(bf_site_kind(m, 2), 'l');
	cr_assert_eq(bf_predict_site(m, 2, 64), 940 * MiB);
	cr_assert_eq(bf_predict_site(m, 2, 128), 620 * MiB, "%llu MiB",
		     (unsigned long long)(bf_predict_site(m, 2, 128) / MiB));
	bf_model_free(m);
	for (int i = 0; i < 3; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
}

/* A capture whose module globals (device static, 40 of them) are made in
 * conv1.fwd (LATE = 0) or in conv2.fwd after bn.fwd's activation (LATE =
 * 1), as when the algorithms of another batch size load a module later. */
static void write_statics_capture(const char *path, uint64_t batch, int late)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, "toy");
	uint32_t c1 = trace_writer_intern(w, "conv1.fwd"), bn = trace_writer_intern(w, "bn.fwd");
	uint32_t c2 = trace_writer_intern(w, "conv2.fwd");
	uint64_t t = 1000;
	struct trace_rec r;
#define RANGE2(name_) do { memset(&r, 0, sizeof r); r.type = TREC_RANGE; r.start = t += 10; \
	r.end = r.start + 5000; r.u.range.name = (name_); cr_assert_eq(trace_writer_record(w, &r), 0); } while (0)
#define STATICS() do { for (int i_ = 0; i_ < 40; i_++) { memset(&r, 0, sizeof r); r.type = TREC_ALLOC; \
	r.start = r.end = t += 10; r.u.mem.addr = 0x900000000 + 4096 * (uint64_t)i_; r.u.mem.bytes = 64; \
	r.u.mem.stream = TRACE_NO_STREAM; r.u.mem.kind = TMEM_DEVICE_STATIC; r.u.mem.source = TRACE_NO_STRING; \
	cr_assert_eq(trace_writer_record(w, &r), 0); } } while (0)
	RANGE2(c1);
	ALLOC(0x300000000, MiB * batch);
	if (!late)
		STATICS();
	t += 6000;
	RANGE2(bn);
	ALLOC(0x310000000, MiB * batch);
	t += 6000;
	RANGE2(c2);
	if (late)
		STATICS();
	ALLOC(0x320000000, MiB * batch);
	FREE(0x320000000, MiB * batch);
	FREE(0x310000000, MiB * batch);
	FREE(0x300000000, MiB * batch);
#undef STATICS
#undef RANGE2
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

/* Module globals made in another layer at one batch size do not unalign
 * the activations between the two places: they align among themselves. */
Test(batch_fit, module_globals_align_apart)
{
	char p[2][128];
	struct bf_trace *t[2];
	for (int i = 0; i < 2; i++) {
		th_tmpname(p[i], sizeof p[i], "batch_fit_statics");
		write_statics_capture(p[i], i ? 32 : 8, i);
		t[i] = load(p[i]);
	}
	struct bf_model *m = NULL;
	char err[1024];
	struct bf_options o = {0};
	cr_assert_eq(bf_fit(t, 2, &o, &m, err, sizeof err), 0, "%s", err);
	const struct bf_report *rep = bf_model_report(m);
	cr_assert_eq(rep->nsites, 43);
	cr_assert_eq(rep->nunaligned, 0, "%zu unaligned: %s", rep->nunaligned, rep->misalign);
	/* batch 8 numbering: 0 conv1 activation, 1..40 statics, 41 bn, 42 conv2 */
	cr_assert_eq(bf_site_kind(m, 41), 'l');
	cr_assert_eq(bf_predict_site(m, 41, 16), 16 * MiB);
	cr_assert_eq(bf_site_kind(m, 5), 'c');
	bf_model_free(m);
	for (int i = 0; i < 2; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
}

/* A free written before "step 1" at the very time the range starts (as a
 * synthesised trace's fitted times can place it) belongs to the warm-up. */
Test(batch_fit, steady_state_free_at_the_cut_is_dropped)
{
	char p[64], q[64], err[512];
	th_tmpname(p, sizeof p, "batch_fit_tie_in");
	th_tmpname(q, sizeof q, "batch_fit_tie_out");
	const char *text =
		"gpumemsim-trace 1\n"
		"L batch=8\n"
		"S 0 step 0\n"
		"S 1 step 1\n"
		"a 1000 0x1000 4194304 - 3 0 0 -\n"
		"r +10 +100 0 0\n"
		"a +10 0x2000 104857600 - 3 0 0 -\n"
		"f +90 0x2000 104857600 - 3 0 0 -\n"
		"r +0 +100 1 0\n"
		"a +10 0x3000 8388608 - 3 0 0 -\n"
		"f +10 0x3000 8388608 - 3 0 0 -\n";
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	struct bf_trace *t = load(p);
	cr_assert_eq(bf_write_from_range(t, "step 1", q, err, sizeof err), 0, "%s", err);
	bf_free(t);
	struct bf_trace *s = load(q);
	struct bf_live l;
	cr_assert_eq(bf_live_at(s, 0, &l), 0);
	cr_assert_eq(l.total, 4 * MiB + 8 * MiB, "%llu", (unsigned long long)l.total);
	bf_free(s);
	unlink(p);
	unlink(q);
}

/* Allocation ids are ordinals of 'a' records, so a steady state without the
 * warm-up's allocations renumbers the links of the kernels it keeps: the
 * third allocation becomes the second once the first is gone, and a link to
 * a dropped allocation goes (a warm-up kernel is kept, its buffer is not). */
Test(batch_fit, steady_state_renumbers_kernel_links)
{
	char p[64], q[64], err[512];
	th_tmpfile(p, sizeof p, "batch_fit_renum_in",
		   "gpumemsim-trace 1\n"
		   "L batch=8\n"
		   "S 0 step 0\n"
		   "S 1 step 1\n"
		   "S 2 gemm\n"
		   "a 1000 0x1000 1048576 -\n"                  /* id 0: warm-up only */
		   "a +10 0x2000 4194304 -\n"                   /* id 1: weights */
		   "r +10 +100 0 0\n"
		   "k +10 +20 7 2 1,1,1 1,1,1 0 0 1 0,1\n"
		   "k +10 +20 7 2 1,1,1 1,1,1 0 0 2 0\n"
		   "f +10 0x1000 1048576 -\n"
		   "r +10 +100 1 0\n"
		   "a +10 0x3000 8388608 -\n"                   /* id 2 */
		   "k +10 +20 7 2 1,1,1 1,1,1 0 0 3 2,1\n"
		   "f +10 0x3000 8388608 -\n"
		   "f +10 0x2000 4194304 -\n");
	th_tmpname(q, sizeof q, "batch_fit_renum_out");
	struct bf_trace *t = load(p);
	cr_assert_eq(bf_write_from_range(t, "step 1", q, err, sizeof err), 0, "%s", err);
	bf_free(t);
	/* corr 1: 0,1 -> 0; corr 2: only the dropped one -> none; corr 3: 2,1 -> 1,0 */
	const uint64_t want[3][2] = {{0}, {0}, {1, 0}};
	const uint32_t nwant[3] = {1, 0, 2};
	struct trace_reader *rd = trace_reader_open(q);
	cr_assert_eq(trace_reader_status(rd), 0, "%s", trace_reader_error(rd));
	struct trace_rec r;
	uint32_t nk = 0, na = 0;
	int rc;
	while ((rc = trace_reader_next(rd, &r)) == TRACE_OK) {
		na += r.type == TREC_ALLOC;
		if (r.type != TREC_KERNEL)
			continue;
		cr_assert_lt(nk, 3);
		cr_assert_eq(r.u.kernel.corr, nk + 1);
		cr_assert_eq(r.u.kernel.nlinks, nwant[nk], "kernel %u: %u links", nk + 1,
			     r.u.kernel.nlinks);
		for (uint32_t i = 0; i < r.u.kernel.nlinks; i++)
			cr_assert_eq(r.u.kernel.links[i], want[nk][i], "kernel %u link %u: %llu",
				     nk + 1, i, (unsigned long long)r.u.kernel.links[i]);
		nk++;
	}
	cr_assert_eq(rc, TRACE_EOF, "%s", trace_reader_error(rd));
	cr_assert_eq(nk, 3);
	cr_assert_eq(na, 2);
	trace_reader_close(rd);
	unlink(p);
	unlink(q);
}

/* Kernel links survive the batch fit: loaded into the trace's own pool
 * (moved while it grows past its first 4096 ids), written back by
 * bf_synth as captured. */
static void write_linked_capture(const char *path, uint64_t batch, uint32_t nkern)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, "linked");
	uint32_t kname = trace_writer_intern(w, "gemm");
	uint64_t t = 1000, ids[3];
	struct trace_rec r;
	for (int a = 0; a < 3; a++) {
		memset(&r, 0, sizeof r);
		r.type = TREC_ALLOC;
		r.start = r.end = t += 100;
		r.u.mem = (struct trace_mem){.addr = 0x100000000ull * (uint64_t)(a + 1),
					     .bytes = MiB * batch, .stream = TRACE_NO_STREAM,
					     .kind = 3, .source = TRACE_NO_STRING};
		cr_assert_eq(trace_writer_record(w, &r), 0);
	}
	for (uint32_t k = 0; k < nkern; k++) {
		memset(&r, 0, sizeof r);
		r.type = TREC_KERNEL;
		r.start = t += 100;
		r.end = r.start + 50;
		r.u.kernel = (struct trace_kernel){.stream = 7, .name = kname, .grid = {1, 1, 1},
						    .block = {1, 1, 1}, .corr = k + 1,
						    .nlinks = 1 + k % 3, .links = ids};
		for (uint32_t i = 0; i < r.u.kernel.nlinks; i++)
			ids[i] = (k + i) % 3;
		cr_assert_eq(trace_writer_record(w, &r), 0);
	}
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

Test(batch_fit, kernel_links_survive_the_fit)
{
	enum { NKERN = 3000 };   /* 6000 links: the pool grows */
	char p[2][128], out[128], err[1024];
	uint64_t b[2] = {8, 16};
	struct bf_trace *t[2];
	for (int i = 0; i < 2; i++) {
		th_tmpname(p[i], sizeof p[i], "batch_fit_links");
		write_linked_capture(p[i], b[i], NKERN);
		t[i] = load(p[i]);
	}
	struct bf_model *m = NULL;
	struct bf_options o = {0};
	cr_assert_eq(bf_fit(t, 2, &o, &m, err, sizeof err), 0, "%s", err);
	th_tmpname(out, sizeof out, "batch_fit_links_out");
	cr_assert_eq(bf_synth(m, 12, out, err, sizeof err), 0, "%s", err);
	struct trace_reader *rd = trace_reader_open(out);
	cr_assert_eq(trace_reader_status(rd), 0, "%s", trace_reader_error(rd));
	struct trace_rec r;
	uint32_t k = 0;
	int rc;
	while ((rc = trace_reader_next(rd, &r)) == TRACE_OK) {
		if (r.type != TREC_KERNEL)
			continue;
		cr_assert_eq(r.u.kernel.nlinks, 1 + k % 3, "kernel %u", k);
		for (uint32_t i = 0; i < r.u.kernel.nlinks; i++)
			cr_assert_eq(r.u.kernel.links[i], (k + i) % 3, "kernel %u link %u", k, i);
		k++;
	}
	cr_assert_eq(rc, TRACE_EOF, "%s", trace_reader_error(rd));
	cr_assert_eq(k, NKERN);
	trace_reader_close(rd);
	unlink(out);
	bf_model_free(m);
	for (int i = 0; i < 2; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
}

/* Where the search fell between the captures around the batch (16: 460 MiB,
 * 64: 200 MiB), its size at 32 is a range: from the lower capture's largest
 * candidate (still within the limit) to that candidate grown in proportion
 * (920 MiB); the peak's interval contains the point prediction. Below the
 * captures the trend of the two smallest (one regime) is followed down. */
Test(batch_fit, unpredictable_search_gets_bounds)
{
	const uint64_t b[3] = {8, 16, 64};
	char p[3][128];
	struct bf_trace *t[3];
	for (int i = 0; i < 3; i++) {
		th_tmpname(p[i], sizeof p[i], "batch_fit_bounds");
		write_search_capture(p[i], b[i]);
		t[i] = load(p[i]);
	}
	struct bf_model *m = NULL;
	char err[1024];
	struct bf_options o = {0};
	cr_assert_eq(bf_fit(t, 3, &o, &m, err, sizeof err), 0, "%s", err);
	uint64_t lo, hi;
	/* template of 32 is the batch-16 capture: 0 weights, 1 activation,
	 * 2 search, 3 per-call workspace, 4 activation of step 1 */
	cr_assert_eq(bf_site_bounds(m, 32, 2, &lo, &hi), 1);
	cr_assert_eq(lo, 460 * MiB, "%llu MiB", (unsigned long long)(lo / MiB));
	cr_assert_eq(hi, 920 * MiB, "%llu MiB", (unsigned long long)(hi / MiB));
	cr_assert_eq(bf_site_bounds(m, 32, 3, &lo, &hi), 0, "one per-call workspace size: no range");
	cr_assert_eq(lo, 5 * MiB);
	cr_assert_eq(bf_site_bounds(m, 32, 1, &lo, &hi), 0, "an activation keeps its fit");
	cr_assert_eq(bf_site_bounds(m, 32, 99, &lo, &hi), -1);
	struct bf_interval iv;
	cr_assert_eq(bf_interval(m, 32, &iv), 0);
	cr_assert_eq(iv.sites, 1);
	cr_assert_eq(iv.extrapolated, 0);
	cr_assert_eq(iv.worst_site, 2);
	cr_assert(iv.peak_lo < iv.peak_live && iv.peak_live < iv.peak_hi, "%llu %llu %llu",
		  (unsigned long long)iv.peak_lo, (unsigned long long)iv.peak_live,
		  (unsigned long long)iv.peak_hi);
	cr_assert_eq(iv.peak_hi - iv.peak_live, (920 - 620) * MiB);
	/* the bound traces: the search at its low / high bound */
	char q[2][128];
	for (int w = 0; w < 2; w++) {
		th_tmpname(q[w], sizeof q[w], "batch_fit_bound");
		cr_assert_eq(bf_synth_bound(m, 32, w ? 1 : -1, q[w], err, sizeof err), 0, "%s", err);
		struct bf_trace *s = load(q[w]);
		struct bf_live l;
		cr_assert_eq(bf_live_at(s, 0, &l), 0);
		cr_assert_eq(l.total, (w ? iv.peak_hi : iv.peak_lo));
		cr_assert_str_eq(bf_label(s, "whatif_bound"), w ? "hi" : "lo");
		bf_free(s);
		unlink(q[w]);
	}
	/* below the captures: 8 and 16 are one regime (380 -> 460 MiB), so the
	 * trend goes down to 4: 340 MiB; its bounds say the switch above */
	cr_assert_eq(bf_predict_site(m, 2, 4), 340 * MiB, "%llu MiB",
		     (unsigned long long)(bf_predict_site(m, 2, 4) / MiB));
	cr_assert_eq(bf_site_bounds(m, 4, 2, &lo, &hi), 1);
	cr_assert_eq(lo, 190 * MiB);
	cr_assert_eq(hi, 460 * MiB);
	cr_assert_eq(bf_interval(m, 4, &iv), 0);
	cr_assert_eq(iv.extrapolated, 1);
	bf_model_free(m);
	for (int i = 0; i < 3; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
}

/* A capture whose "backward" range arrived late (LATE): written after the
 * allocation it holds, its start raised to that record's start and its end
 * moved by as much (over "optimizer"), as capture/convert.c clamps late
 * ranges. The loader puts it back, so the allocation aligns. */
static void write_late_range_capture(const char *path, uint64_t batch, int late)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, batch, "toy");
	uint32_t fw = trace_writer_intern(w, "forward"), bw = trace_writer_intern(w, "backward");
	uint32_t op = trace_writer_intern(w, "optimizer");
	uint64_t t = 1000;
	struct trace_rec r;
#define RANGE3(name_, s_, e_) do { memset(&r, 0, sizeof r); r.type = TREC_RANGE; r.start = (s_); \
	r.end = (e_); r.u.range.name = (name_); r.u.range.depth = 1; \
	cr_assert_eq(trace_writer_record(w, &r), 0); } while (0)
	RANGE3(fw, 1000, 2000);
	t = 1100;
	ALLOC(0x300000000, MiB * batch);         /* activation, in forward */
	if (!late)
		RANGE3(bw, 2000, 3000);
	t = 2100;
	ALLOC(0x400000000, 64 * MiB * batch);    /* in backward */
	t = 2500;
	ALLOC(0x410000000, 4096);
	if (late)
		RANGE3(bw, 2600, 3600);              /* clamped: really 2000..3000 */
	t = 2700;
	FREE(0x400000000, 64 * MiB * batch);
	FREE(0x410000000, 4096);
	RANGE3(op, 3000, 3500);
	t = 3100;
	ALLOC(0x500000000, 1024);
	FREE(0x500000000, 1024);
	FREE(0x300000000, MiB * batch);
#undef RANGE3
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

Test(batch_fit, late_range_is_put_back)
{
	char p[2][128];
	struct bf_trace *t[2];
	for (int i = 0; i < 2; i++) {
		th_tmpname(p[i], sizeof p[i], "batch_fit_late");
		write_late_range_capture(p[i], i ? 16 : 8, i);
		t[i] = load(p[i]);
	}
	struct bf_model *m = NULL;
	char err[1024];
	struct bf_options o = {.strict_align = 1};
	cr_assert_eq(bf_fit(t, 2, &o, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(bf_model_report(m)->nunaligned, 0);
	cr_assert_eq(bf_predict_site(m, 1, 32), 64 * MiB * 32);
	bf_model_free(m);
	for (int i = 0; i < 2; i++) {
		bf_free(t[i]);
		unlink(p[i]);
	}
}
