/*
 * test_markers.c: the empty_cache marker transfer (traces/markers.c): the
 * aligner on small sequences, markers placed before the matching alloc or
 * the free that was still live in the truth, the rest of the capture kept
 * record for record, refusals (poor alignment, already marked, a marker in
 * a wide gap) without output, the snapshot-text truth, the CLI, and the
 * shipped PyTorch captures (their markers are what the transfer gives).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../traces/markers.h"
#include "../traces/trace.h"
#include "helpers.h"

#define FW_SRC "/x/torch/lib/libc10_cuda.so"
#define BLAS_SRC "/x/nvidia/lib/libcublas.so.13"

/* ------------------------------------------------------------ aligner */

Test(markers, align_substitution_is_paired_not_exact)
{
	uint64_t a[] = { 1, 2, 3, 4, 5 }, b[] = { 1, 2, 9, 4, 5 };
	int64_t map[5];
	unsigned char ex[5];
	int64_t d = markers_align(a, 5, b, 5, 100, map, ex);
	cr_assert_eq(d, 2);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(map[i], i);
	cr_assert_eq(ex[2], 0);
	cr_assert_eq(ex[0] + ex[1] + ex[3] + ex[4], 4);
}

Test(markers, align_insertions_and_deletions)
{
	/* a has an extra 7 (a foreign-looking request), b an extra 8. */
	uint64_t a[] = { 1, 7, 2, 3, 4 }, b[] = { 1, 2, 3, 8, 4 };
	int64_t map[5];
	unsigned char ex[5];
	cr_assert_eq(markers_align(a, 5, b, 5, 100, map, ex), 2);
	cr_assert_eq(map[0], 0);
	cr_assert_eq(map[1], -1);
	cr_assert_eq(map[2], 1);
	cr_assert_eq(map[3], 2);
	cr_assert_eq(map[4], 4);
	cr_assert(ex[0] && ex[2] && ex[3] && ex[4]);
}

Test(markers, align_gives_up_past_the_edit_bound)
{
	uint64_t a[] = { 1, 2, 3, 4 }, b[] = { 5, 6, 7, 8 };
	int64_t map[4];
	unsigned char ex[4];
	cr_assert_eq(markers_align(a, 4, b, 4, 3, map, ex), -1);
	cr_assert_eq(markers_align(a, 4, b, 4, 8, map, ex), 8);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(map[i], i); /* paired by position in the one gap */
		cr_assert_eq(ex[i], 0);
	}
}

/* ------------------------------------------------------------ fixtures */

static void tmpname(char *buf, size_t len, const char *stem)
{
	snprintf(buf, len, "/tmp/gpumemsim-test-markers-%s-XXXXXX", stem);
	int fd = mkstemp(buf);
	cr_assert_geq(fd, 0);
	close(fd);
}

static struct trace_writer *open_w(const char *path)
{
	char err[256];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_label lab = { "model", "m" };
	struct trace_header h = { .version = 1, .producer = "test", .labels = &lab, .nlabels = 1 };
	cr_assert_eq(trace_writer_header(w, &h), 0);
	return w;
}

static void close_w(struct trace_writer *w)
{
	char err[256];
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

static void mem(struct trace_writer *w, enum trace_rec_type type, uint64_t t, uint64_t addr,
		uint64_t bytes, uint32_t kind, const char *src)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = type;
	r.start = r.end = t;
	r.u.mem.addr = addr;
	r.u.mem.bytes = bytes;
	r.u.mem.stream = TRACE_NO_STREAM;
	r.u.mem.kind = kind;
	r.u.mem.source = src ? trace_writer_intern(w, src) : TRACE_NO_STRING;
	cr_assert_eq(trace_writer_record(w, &r), 0);
}

static void kernel(struct trace_writer *w, uint64_t t, uint64_t link)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_KERNEL;
	r.start = t;
	r.end = t + 5;
	r.u.kernel.stream = 7;
	r.u.kernel.name = trace_writer_intern(w, "conv_kernel");
	r.u.kernel.grid[0] = r.u.kernel.grid[1] = r.u.kernel.grid[2] = 1;
	r.u.kernel.block[0] = r.u.kernel.block[1] = r.u.kernel.block[2] = 32;
	r.u.kernel.nlinks = 1;
	r.u.kernel.links = &link;
	cr_assert_eq(trace_writer_record(w, &r), 0);
}

static void ctl(struct trace_writer *w, uint64_t t)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_CONTROL;
	r.start = r.end = t;
	r.u.control.kind = TCTL_EMPTY_CACHE;
	cr_assert_eq(trace_writer_record(w, &r), 0);
}

/*
 * The capture: framework requests 100, 200 (search workspace), 300, a
 * cuBLAS workspace between them, one kernel; no markers.
 */
static void write_capture(const char *path)
{
	struct trace_writer *w = open_w(path);
	mem(w, TREC_ALLOC, 10, 0x1000, 100, TMEM_DEVICE, FW_SRC);
	mem(w, TREC_ALLOC, 20, 0x9000, 4096, TMEM_DEVICE, BLAS_SRC);
	mem(w, TREC_ALLOC, 30, 0x2000, 200, TMEM_DEVICE, FW_SRC);
	kernel(w, 35, 2);
	mem(w, TREC_FREE, 40, 0x2000, 200, TMEM_DEVICE, FW_SRC);
	mem(w, TREC_ALLOC, 50, 0x3000, 300, TMEM_DEVICE, FW_SRC);
	mem(w, TREC_FREE, 60, 0x1000, 100, TMEM_DEVICE, FW_SRC);
	mem(w, TREC_FREE, 70, 0x3000, 300, TMEM_DEVICE, FW_SRC);
	close_w(w);
}

/* The truth: the same requests, an empty_cache after the search's free. */
static void write_truth(const char *path, int marker_before_free_of_first)
{
	struct trace_writer *w = open_w(path);
	mem(w, TREC_ALLOC, 1, 0xa000, 100, TMEM_DEVICE, NULL);
	mem(w, TREC_ALLOC, 2, 0xb000, 200, TMEM_DEVICE, NULL);
	mem(w, TREC_FREE, 3, 0xb000, 200, TMEM_DEVICE, NULL);
	ctl(w, 4);
	mem(w, TREC_ALLOC, 5, 0xc000, 300, TMEM_DEVICE, NULL);
	if (marker_before_free_of_first) {
		/* A second marker while the third request is live, before the
		 * first one's free. */
		ctl(w, 6);
	}
	mem(w, TREC_FREE, 7, 0xa000, 100, TMEM_DEVICE, NULL);
	mem(w, TREC_FREE, 8, 0xc000, 300, TMEM_DEVICE, NULL);
	close_w(w);
}

/* Records of a trace as text lines "tag start", strings resolved for
 * allocs (source) and kernels (name, link). */
static size_t dump(const char *path, char lines[][96], size_t max, const char **label)
{
	struct trace_reader *r = trace_reader_open(path);
	cr_assert_not_null(r);
	cr_assert_geq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	const struct trace_header *h = trace_reader_header(r);
	static char labv[64];
	*label = NULL;
	for (size_t i = 0; i < h->nlabels; i++)
		if (!strcmp(h->labels[i].key, "empty_cache_markers")) {
			snprintf(labv, sizeof labv, "%s", h->labels[i].value);
			*label = labv;
		}
	struct trace_rec rec;
	size_t n = 0;
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		cr_assert_lt(n, max);
		const char *s = "";
		uint64_t extra = 0;
		if (rec.type == TREC_ALLOC || rec.type == TREC_FREE) {
			s = trace_reader_string(r, rec.u.mem.source);
			extra = rec.u.mem.bytes;
		} else if (rec.type == TREC_KERNEL) {
			s = trace_reader_string(r, rec.u.kernel.name);
			extra = rec.u.kernel.links[0];
		}
		snprintf(lines[n++], 96, "%c %llu %llu %s", trace_rec_tag(rec.type),
			 (unsigned long long)rec.start, (unsigned long long)extra, s ? s : "-");
	}
	cr_assert_eq(rc, TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert(trace_reader_trailer(r)->present);
	trace_reader_close(r);
	return n;
}

/* ------------------------------------------------------------ transfer */

Test(markers, marker_before_the_matching_alloc_rest_unchanged)
{
	char cap[80], tru[80], out[80], err[1024];
	tmpname(cap, sizeof cap, "cap");
	tmpname(tru, sizeof tru, "truth");
	tmpname(out, sizeof out, "out");
	write_capture(cap);
	write_truth(tru, 0);
	struct markers_report rep;
	int rc = markers_transfer(cap, tru, out, NULL, &rep, err, sizeof err);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(rep.markers, 1);
	cr_assert_eq(rep.framework_allocs, 3);
	cr_assert_eq(rep.capture_allocs, 4);
	cr_assert_eq(rep.matched, 3);
	cr_assert_float_eq(rep.match_ratio, 1.0, 1e-9);
	cr_assert_eq(rep.moved_by_free, 0);
	cr_assert_eq(rep.nforeign, 1);
	cr_assert_str_eq(rep.foreign[0].name, "libcublas.so.13");
	cr_assert_eq(rep.foreign[0].bytes, 4096);
	cr_assert_eq(rep.foreign[0].peak_live, 4096);

	char a[16][96], b[16][96];
	const char *la, *lb;
	size_t na = dump(cap, a, 16, &la), nb = dump(out, b, 16, &lb);
	cr_assert_null(la);
	cr_assert_str_eq(lb, "1");
	cr_assert_eq(nb, na + 1);
	/* x goes before the 300-byte alloc, at its time; all else in order. */
	size_t j = 0;
	for (size_t i = 0; i < nb; i++) {
		if (b[i][0] == 'x') {
			cr_assert_str_eq(b[i], "x 50 0 ");
			cr_assert_str_eq(b[i + 1], "a 50 300 " FW_SRC);
			continue;
		}
		cr_assert_str_eq(b[i], a[j], "record %zu: %s vs %s", i, b[i], a[j]);
		j++;
	}
	cr_assert_eq(j, na);
	unlink(cap);
	unlink(tru);
	unlink(out);
}

Test(markers, marker_goes_before_a_free_still_live_in_the_truth)
{
	char cap[80], tru[80], out[80], err[1024];
	tmpname(cap, sizeof cap, "cap");
	tmpname(tru, sizeof tru, "truth");
	tmpname(out, sizeof out, "out");
	write_capture(cap);
	write_truth(tru, 1);
	struct markers_report rep;
	cr_assert_eq(markers_transfer(cap, tru, out, NULL, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.markers, 2);
	cr_assert_eq(rep.moved_by_free, 1);
	char b[16][96];
	const char *lb;
	size_t nb = dump(out, b, 16, &lb);
	cr_assert_str_eq(lb, "2");
	/* The second marker: after the last alloc, before the free of the
	 * 100-byte request (freed after it in the truth). */
	int seen = 0;
	for (size_t i = 0; i + 1 < nb; i++)
		if (b[i][0] == 'x' && ++seen == 2)
			cr_assert_str_eq(b[i + 1], "f 60 100 " FW_SRC);
	cr_assert_eq(seen, 2);
	unlink(cap);
	unlink(tru);
	unlink(out);
}

Test(markers, truth_as_snapshot_text)
{
	char cap[80], tru[80], out[80], err[1024];
	tmpname(cap, sizeof cap, "cap");
	tmpname(tru, sizeof tru, "snap");
	tmpname(out, sizeof out, "out");
	write_capture(cap);
	FILE *f = fopen(tru, "w");
	cr_assert_not_null(f);
	fputs("segment_alloc 4096 2097152 0 1000\n"
	      "alloc 4096 100 0 1001\n"
	      "segment_alloc 8388608 2097152 0 1002\n"
	      "alloc 8388608 200 0 1003\n"
	      "free_requested 8388608 200 0 1004\n"
	      "free_completed 8388608 200 0 1005\n"
	      "segment_free 8388608 2097152 0 1006\n"
	      "alloc 4608 300 0 1007\n", f);
	cr_assert_eq(fclose(f), 0);
	struct markers_report rep;
	cr_assert_eq(markers_transfer(cap, tru, out, NULL, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.truth_allocs, 3);
	cr_assert_eq(rep.markers, 1);
	unlink(cap);
	unlink(tru);
	unlink(out);
}

Test(markers, refusals_leave_no_output)
{
	char cap[80], tru[80], out[80], out2[80], err[1024];
	tmpname(cap, sizeof cap, "cap");
	tmpname(tru, sizeof tru, "truth");
	tmpname(out, sizeof out, "out");
	unlink(out);
	write_capture(cap);

	/* Poor alignment: nothing in common. */
	struct trace_writer *w = open_w(tru);
	for (uint64_t i = 0; i < 6; i++)
		mem(w, TREC_ALLOC, i + 1, 0x100000 * (i + 1), 777 + i, TMEM_DEVICE, NULL);
	ctl(w, 10);
	close_w(w);
	cr_assert_eq(markers_transfer(cap, tru, out, NULL, NULL, err, sizeof err), -1);
	cr_assert(strstr(err, "poor alignment"), "%s", err);
	cr_assert_eq(access(out, F_OK), -1);

	/* A marker among more unmatched requests than --max-gap allows. */
	write_truth(tru, 0);
	struct markers_options o = { NULL, 0.3, 0 };
	w = open_w(tru);
	mem(w, TREC_ALLOC, 1, 0xa000, 100, TMEM_DEVICE, NULL);
	mem(w, TREC_ALLOC, 2, 0xb000, 201, TMEM_DEVICE, NULL);
	mem(w, TREC_FREE, 3, 0xb000, 201, TMEM_DEVICE, NULL);
	ctl(w, 4);
	mem(w, TREC_ALLOC, 5, 0xc000, 301, TMEM_DEVICE, NULL);
	close_w(w);
	o.max_gap = 1;
	cr_assert_eq(markers_transfer(cap, tru, out, &o, NULL, err, sizeof err), -1);
	cr_assert(strstr(err, "--max-gap"), "%s", err);
	cr_assert_eq(access(out, F_OK), -1);
	o.max_gap = 2;
	cr_assert_eq(markers_transfer(cap, tru, out, &o, NULL, err, sizeof err), 0, "%s", err);

	/* Already marked: the output of a transfer is refused as input. */
	tmpname(out2, sizeof out2, "out2");
	unlink(out2);
	cr_assert_eq(markers_transfer(out, tru, out2, &o, NULL, err, sizeof err), -1);
	cr_assert(strstr(err, "already has empty_cache markers"), "%s", err);
	cr_assert_eq(access(out2, F_OK), -1);

	/* A bad truth names itself. */
	FILE *f = fopen(tru, "w");
	cr_assert_not_null(f);
	fputs("alloc 4096 100 0 1001\nnonsense here\n", f);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(markers_transfer(cap, tru, out2, NULL, NULL, err, sizeof err), -1);
	cr_assert(strstr(err, tru), "%s", err);
	cr_assert_eq(access(out2, F_OK), -1);
	unlink(cap);
	unlink(tru);
	unlink(out);
}

Test(markers, cli_usage_and_errors)
{
	char cap[80], tru[80], out[80], so[80], se[80], args[512];
	tmpname(cap, sizeof cap, "cap");
	tmpname(tru, sizeof tru, "truth");
	tmpname(out, sizeof out, "out");
	tmpname(so, sizeof so, "stdout");
	tmpname(se, sizeof se, "stderr");
	unlink(out);
	write_capture(cap);
	write_truth(tru, 0);
	snprintf(args, sizeof args, "import torch-markers %s -o %s", cap, out);
	cr_assert_eq(th_run(NULL, so, se, args), 2); /* no --truth */
	snprintf(args, sizeof args, "import torch-markers --truth %s %s -o %s --min-match 2",
		 tru, cap, out);
	cr_assert_eq(th_run(NULL, so, se, args), 2);
	snprintf(args, sizeof args, "import torch-markers --truth %s %s -o %s", tru, cap, out);
	cr_assert_eq(th_run(NULL, so, se, args), 0);
	char *text = th_slurp(se);
	cr_assert_not_null(text);
	cr_assert(strstr(text, "1 empty_cache markers placed"), "%s", text);
	cr_assert(strstr(text, "3 matched exactly (100.0%)"), "%s", text);
	cr_assert(strstr(text, "libcublas.so.13: 1 allocations"), "%s", text);
	free(text);
	cr_assert_eq(th_sh("%s trace validate %s > /dev/null", th_bin(), out), 0);
	unlink(cap);
	unlink(tru);
	unlink(out);
	unlink(so);
	unlink(se);
}

/* Copy SRC to DST without its empty_cache records and marker label. */
static void strip_markers(const char *src, const char *dst)
{
	char err[256];
	struct trace_reader *r = trace_reader_open(src);
	cr_assert_not_null(r);
	cr_assert_geq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	struct trace_header h = *trace_reader_header(r);
	struct trace_label labs[32];
	size_t n = 0;
	/* both labels the transfer adds go, so they come back in its order */
	for (size_t i = 0; i < h.nlabels && n < 32; i++)
		if (strcmp(h.labels[i].key, "empty_cache_markers") &&
		    strcmp(h.labels[i].key, "allocator_source"))
			labs[n++] = h.labels[i];
	h.labels = labs;
	h.nlabels = n;
	struct trace_writer *w = trace_writer_open(dst, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	cr_assert_eq(trace_writer_header(w, &h), 0);
	uint32_t map[4096];
	for (size_t i = 0; i < 4096; i++)
		map[i] = UINT32_MAX;
	struct trace_rec rec;
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		if (rec.type == TREC_CONTROL && rec.u.control.kind == TCTL_EMPTY_CACHE)
			continue;
		uint32_t *s = NULL;
		if (rec.type == TREC_ALLOC || rec.type == TREC_FREE)
			s = &rec.u.mem.source;
		else if (rec.type == TREC_KERNEL)
			s = &rec.u.kernel.name;
		else if (rec.type == TREC_RANGE)
			s = &rec.u.range.name;
		else if (rec.type == TREC_API)
			s = &rec.u.api.name;
		if (s && *s != TRACE_NO_STRING) {
			cr_assert_lt(*s, 4096);
			if (map[*s] == UINT32_MAX)
				map[*s] = trace_writer_intern(w, trace_reader_string(r, *s));
			*s = map[*s];
		}
		cr_assert_eq(trace_writer_record(w, &rec), 0);
	}
	cr_assert_eq(rc, TRACE_EOF);
	cr_assert_eq(trace_writer_close(&w, 1, trace_reader_trailer(r)->dropped, err, sizeof err), 0);
	trace_reader_close(r);
}

Test(markers, shipped_torch_capture_markers_are_reproduced)
{
	const char *ship = "traces/torch/torch-resnet18-b16.trace.gz";
	const char *truth = "traces/torch/truth/resnet18-b16-default.trace.gz";
	if (access(ship, R_OK) || access(truth, R_OK))
		cr_skip_test("shipped torch traces not present");
	char bare[80], out[80], err[1024], se[80], so[80], args[512];
	tmpname(bare, sizeof bare, "bare");
	tmpname(out, sizeof out, "out");
	tmpname(so, sizeof so, "stdout");
	tmpname(se, sizeof se, "stderr");
	unlink(out);
	/* Shipped captures already carry the markers: a second pass refuses. */
	snprintf(args, sizeof args, "import torch-markers --truth %s %s -o %s", truth, ship, out);
	cr_assert_eq(th_run(NULL, so, se, args), 1);
	cr_assert_eq(access(out, F_OK), -1);
	strip_markers(ship, bare);
	struct markers_report rep;
	cr_assert_eq(markers_transfer(bare, truth, out, NULL, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.markers, 32);
	cr_assert_eq(rep.framework_allocs, 1569);
	cr_assert_eq(rep.truth_allocs, 1574);
	cr_assert_geq(rep.match_ratio, 0.9);
	/* The same records, markers included, as the shipped file. */
	cr_assert_eq(th_sh("'%s' trace cat %s > %s && '%s' trace cat %s > %s && cmp -s %s %s",
			   th_bin(), ship, so, th_bin(), out, se, so, se), 0);
	unlink(bare);
	unlink(out);
	unlink(so);
	unlink(se);
}

/* The value of label KEY in trace PATH into BUF; 0 when absent. */
static int label_of(const char *path, const char *key, char *buf, size_t len)
{
	struct trace_reader *r = trace_reader_open(path);
	int found = 0;
	cr_assert_not_null(r);
	cr_assert_geq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	const struct trace_header *h = trace_reader_header(r);
	for (size_t i = 0; i < h->nlabels; i++)
		if (!strcmp(h->labels[i].key, key)) {
			snprintf(buf, len, "%s", h->labels[i].value);
			found++;
		}
	trace_reader_close(r);
	cr_assert_leq(found, 1, "label %s twice in %s", key, path);
	return found;
}

Test(markers, output_names_the_allocator_for_the_engine)
{
	char cap[80], tru[80], out[80], out2[80], err[1024], v[64];
	tmpname(cap, sizeof cap, "cap");
	tmpname(tru, sizeof tru, "truth");
	tmpname(out, sizeof out, "out");
	tmpname(out2, sizeof out2, "out2");
	write_capture(cap);
	write_truth(tru, 0);
	cr_assert_eq(label_of(cap, "allocator_source", v, sizeof v), 0);
	cr_assert_eq(markers_transfer(cap, tru, out, NULL, NULL, err, sizeof err), 0, "%s", err);
	cr_assert_eq(label_of(out, "allocator_source", v, sizeof v), 1);
	cr_assert_str_eq(v, "libc10_cuda");
	/* --source is what the label then says */
	struct markers_options o = {"c10_cuda", 0, 0};
	cr_assert_eq(markers_transfer(cap, tru, out2, &o, NULL, err, sizeof err), 0, "%s", err);
	cr_assert_eq(label_of(out2, "allocator_source", v, sizeof v), 1);
	cr_assert_str_eq(v, "c10_cuda");
	cr_assert_eq(label_of(out2, "empty_cache_markers", v, sizeof v), 1);
	cr_assert_str_eq(v, "1");
	unlink(cap);
	unlink(tru);
	unlink(out);
	unlink(out2);
}

Test(markers, shipped_torch_captures_carry_the_allocator_label)
{
	static const char *const ship[] = {
		"traces/torch/torch-resnet18-b16.trace.gz", "traces/torch/torch-resnet50-b128.trace.gz",
		"traces/torch/quiet/torch-resnet50-b32.trace.gz"};
	char v[64];
	if (access(ship[0], R_OK))
		cr_skip_test("shipped torch traces not present");
	for (size_t i = 0; i < sizeof ship / sizeof ship[0]; i++) {
		cr_assert_eq(label_of(ship[i], "allocator_source", v, sizeof v), 1, "%s", ship[i]);
		cr_assert_str_eq(v, "libc10_cuda");
	}
}
