/*
 * test_trace.c: the trace reader and writer: round trips of every record
 * type (plain and gzip), and one test per kind of bad input, each checking
 * that the message names the file and the line and the status is negative.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../traces/trace.h"

/* A private directory per test: tests run in parallel. */
static char tdir[64];

static void make_tdir(void)
{
	strcpy(tdir, "/tmp/gpumemsim-test-trace-XXXXXX");
	cr_assert_not_null(mkdtemp(tdir));
}

static void rm_tdir(void)
{
	DIR *d = opendir(tdir);
	if (!d)
		return;
	struct dirent *e;
	char p[512];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof p, "%s/%s", tdir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(tdir);
}

static const char *tpath(const char *name)
{
	static char p[2][256];
	static int k;
	k ^= 1;
	snprintf(p[k], sizeof p[k], "%s/%s", tdir, name);
	return p[k];
}

TestSuite(trace, .init = make_tdir, .fini = rm_tdir);

/* The sample kernel's links: the records outlive sample_records(). */
static const uint64_t sample_links[] = {0, 1};

/* Builds one record of each type; ids from the writer's intern table. */
static int sample_records(struct trace_rec *recs, uint32_t kname, uint32_t rname,
			  uint32_t aname, uint32_t src)
{
	int n = 0;
	struct trace_rec *r;
	memset(recs, 0, 16 * sizeof *recs);
	r = &recs[n++];
	r->type = TREC_ALLOC;
	r->start = r->end = 1000000000000ull;
	r->u.mem = (struct trace_mem){.id = 0, .addr = 0x7f0000000000ull, .bytes = 1u << 20,
				      .stream = 7, .kind = TMEM_DEVICE, .source = TRACE_NO_STRING};
	r = &recs[n++];
	r->type = TREC_ALLOC;
	r->start = r->end = 1000000000010ull;
	r->u.mem = (struct trace_mem){.id = 1, .addr = 0x7f0000100000ull, .bytes = 4096,
				      .stream = TRACE_NO_STREAM, .kind = TMEM_MANAGED,
				      .flags = TMEM_F_ASYNC | TMEM_F_POOL, .corr = 99, .source = src};
	r = &recs[n++];
	r->type = TREC_KERNEL;
	r->start = 1000000000020ull;
	r->end = 1000000005000ull;
	r->u.kernel = (struct trace_kernel){.stream = 7, .name = kname, .grid = {128, 2, 1},
					    .block = {256, 1, 1}, .regs = 32, .smem = 49152,
					    .corr = 100, .nlinks = 2, .links = sample_links};
	r = &recs[n++];
	r->type = TREC_MEMCPY;
	r->start = 1000000000020ull;
	r->end = 1000000000100ull;
	r->u.copy = (struct trace_copy){.stream = 7, .kind = TCOPY_DTOH, .bytes = 4096, .corr = 101};
	r = &recs[n++];
	r->type = TREC_MEMSET;
	r->start = r->end = 1000000000030ull;
	r->u.copy = (struct trace_copy){.stream = 3, .bytes = 12, .corr = 102};
	r = &recs[n++];
	r->type = TREC_SYNC;
	r->start = 1000000000040ull;
	r->end = 1000000006000ull;
	r->u.sync = (struct trace_sync){.kind = TSYNC_CONTEXT, .stream = TRACE_NO_STREAM, .corr = 103};
	r = &recs[n++];
	r->type = TREC_RANGE;
	r->start = 1000000000050ull;
	r->end = 1000000009000ull;
	r->u.range = (struct trace_range){.name = rname, .depth = 2};
	r = &recs[n++];
	r->type = TREC_API;
	r->start = 1000000000060ull;
	r->end = 1000000000070ull;
	r->u.api = (struct trace_api){.name = aname, .corr = 104};
	r = &recs[n++];
	r->type = TREC_CONTROL;
	r->start = r->end = 1000000000070ull;
	r->u.control = (struct trace_control){.kind = TCTL_OOM, .bytes = 1ull << 40};
	r = &recs[n++];
	r->type = TREC_CONTROL;
	r->start = r->end = 1000000000070ull;
	r->u.control = (struct trace_control){.kind = TCTL_EMPTY_CACHE};
	r = &recs[n++];
	r->type = TREC_CONTROL;
	r->start = r->end = 1000000000071ull;
	r->u.control = (struct trace_control){.kind = TCTL_STEP, .bytes = 3};
	r = &recs[n++];
	r->type = TREC_SEGMENT;
	r->start = r->end = 1000000000080ull;
	r->u.segment = (struct trace_segment){.op = TSEG_MAP, .addr = UINT64_MAX - 0xfff,
					      .bytes = 2u << 20, .stream = 0};
	r = &recs[n++];
	r->type = TREC_FREE;
	r->start = r->end = 1000000000090ull;
	r->u.mem = (struct trace_mem){.addr = 0x7f0000000000ull, .bytes = 0, .stream = 7,
				      .kind = TMEM_DEVICE, .source = TRACE_NO_STRING};
	return n;
}

static void assert_same(const struct trace_rec *a, const struct trace_rec *b)
{
	cr_assert_eq(a->type, b->type);
	cr_assert_eq(a->start, b->start, "start %llu vs %llu", (unsigned long long)a->start,
		     (unsigned long long)b->start);
	cr_assert_eq(a->end, b->end);
	/* Only the member of the union the type uses is meaningful. */
	switch (a->type) {
	case TREC_ALLOC:
	case TREC_FREE:
		cr_assert_eq(a->u.mem.id, b->u.mem.id);
		cr_assert_eq(a->u.mem.addr, b->u.mem.addr);
		cr_assert_eq(a->u.mem.bytes, b->u.mem.bytes);
		cr_assert_eq(a->u.mem.stream, b->u.mem.stream);
		cr_assert_eq(a->u.mem.kind, b->u.mem.kind);
		cr_assert_eq(a->u.mem.flags, b->u.mem.flags);
		cr_assert_eq(a->u.mem.corr, b->u.mem.corr);
		cr_assert_eq(a->u.mem.source, b->u.mem.source);
		break;
	case TREC_KERNEL:
		cr_assert_eq(a->u.kernel.nlinks, b->u.kernel.nlinks);
		if (a->u.kernel.nlinks) /* links may be NULL without any */
			cr_assert_arr_eq(a->u.kernel.links, b->u.kernel.links,
					 a->u.kernel.nlinks * sizeof(uint64_t));
		cr_assert_arr_eq(a->u.kernel.grid, b->u.kernel.grid, sizeof a->u.kernel.grid);
		cr_assert_arr_eq(a->u.kernel.block, b->u.kernel.block, sizeof a->u.kernel.block);
		cr_assert_eq(a->u.kernel.name, b->u.kernel.name);
		cr_assert_eq(a->u.kernel.stream, b->u.kernel.stream);
		cr_assert_eq(a->u.kernel.regs, b->u.kernel.regs);
		cr_assert_eq(a->u.kernel.smem, b->u.kernel.smem);
		cr_assert_eq(a->u.kernel.corr, b->u.kernel.corr);
		cr_assert_eq(a->u.kernel.graph, b->u.kernel.graph);
		cr_assert_eq(a->u.kernel.graph_node, b->u.kernel.graph_node);
		break;
	case TREC_MEMCPY:
	case TREC_MEMSET:
		cr_assert_eq(a->u.copy.stream, b->u.copy.stream);
		cr_assert_eq(a->u.copy.kind, b->u.copy.kind);
		cr_assert_eq(a->u.copy.bytes, b->u.copy.bytes);
		cr_assert_eq(a->u.copy.corr, b->u.copy.corr);
		cr_assert_eq(a->u.copy.graph, b->u.copy.graph);
		cr_assert_eq(a->u.copy.graph_node, b->u.copy.graph_node);
		break;
	case TREC_SYNC:
		cr_assert_eq(a->u.sync.kind, b->u.sync.kind);
		cr_assert_eq(a->u.sync.stream, b->u.sync.stream);
		cr_assert_eq(a->u.sync.corr, b->u.sync.corr);
		break;
	case TREC_RANGE:
		cr_assert_eq(a->u.range.name, b->u.range.name);
		cr_assert_eq(a->u.range.depth, b->u.range.depth);
		cr_assert_eq(a->u.range.uncaptured, b->u.range.uncaptured);
		break;
	case TREC_API:
		cr_assert_eq(a->u.api.name, b->u.api.name);
		cr_assert_eq(a->u.api.corr, b->u.api.corr);
		cr_assert_eq(a->u.api.has_own, b->u.api.has_own);
		cr_assert_eq(a->u.api.own_ns, b->u.api.own_ns);
		cr_assert_eq(a->u.api.own_cbs, b->u.api.own_cbs);
		break;
	case TREC_CONTROL:
		cr_assert_eq(a->u.control.kind, b->u.control.kind);
		cr_assert_eq(a->u.control.bytes, b->u.control.bytes);
		break;
	case TREC_SEGMENT:
		cr_assert_eq(a->u.segment.op, b->u.segment.op);
		cr_assert_eq(a->u.segment.addr, b->u.segment.addr);
		cr_assert_eq(a->u.segment.bytes, b->u.segment.bytes);
		cr_assert_eq(a->u.segment.stream, b->u.segment.stream);
		break;
	default:
		cr_assert_fail("unexpected type");
	}
}

/* Write every record type to PATH, read it back, compare. */
static void round_trip(const char *path)
{
	char err[512];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_label labels[] = {{"batch", "64"}, {"model", "resnet50 v1.5"}};
	struct trace_header h = {.producer = "test", .gpu = "NVIDIA H200",
				 .total_memory = 150754820096ull, .command = "python a.py\nb",
				 .labels = labels, .nlabels = 2};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	uint32_t src = trace_writer_intern(w, "libtorch_cuda.so");
	uint32_t kname = trace_writer_intern(w, "void gemm<float, 128>(float*, int)");
	uint32_t rname = trace_writer_intern(w, "forward");
	cr_assert_eq(trace_writer_intern(w, "libtorch_cuda.so"), src, "interning is idempotent");
	struct trace_rec recs[16];
	int n = sample_records(recs, kname, rname, 0, src);
	uint32_t aname = 0;
	for (int i = 0; i < n; i++) {
		if (recs[i].type == TREC_API) { /* interned between records */
			aname = trace_writer_intern(w, "cudaMalloc");
			recs[i].u.api.name = aname;
		}
		cr_assert_eq(trace_writer_record(w, &recs[i]), 0, "record %d", i);
	}
	cr_assert_eq(trace_writer_close(&w, 1, 7, err, sizeof err), 0, "%s", err);

	struct trace_reader *r = trace_reader_open(path);
	cr_assert_not_null(r);
	cr_assert_eq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	const struct trace_header *rh = trace_reader_header(r);
	cr_assert_eq(rh->version, 1);
	cr_assert_str_eq(rh->producer, "test");
	cr_assert_str_eq(rh->gpu, "NVIDIA H200");
	cr_assert_str_eq(rh->command, "python a.py b", "newline in a header value became a space");
	cr_assert_eq(rh->total_memory, 150754820096ull);
	cr_assert_eq(rh->nlabels, 2);
	cr_assert_str_eq(rh->labels[1].key, "model");
	cr_assert_str_eq(rh->labels[1].value, "resnet50 v1.5");
	struct trace_rec got;
	for (int i = 0; i < n; i++) {
		cr_assert_eq(trace_reader_next(r, &got), TRACE_OK, "%s", trace_reader_error(r));
		assert_same(&recs[i], &got);
	}
	cr_assert_eq(trace_reader_next(r, &got), TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert_str_eq(trace_reader_string(r, kname), "void gemm<float, 128>(float*, int)");
	cr_assert_str_eq(trace_reader_string(r, aname), "cudaMalloc");
	cr_assert_eq(trace_reader_nstrings(r), 4);
	cr_assert_null(trace_reader_string(r, 4));
	const struct trace_trailer *t = trace_reader_trailer(r);
	cr_assert(t->present);
	cr_assert_eq(t->records, (uint64_t)n);
	cr_assert_eq(t->dropped, 7);
	uint32_t crc = trace_reader_crc32(r);
	uint64_t bytes = trace_reader_bytes(r);
	cr_assert_gt(bytes, 100);

	/* Rewind: same records again, identity unchanged. */
	cr_assert_eq(trace_reader_rewind(r), 0, "%s", trace_reader_error(r));
	for (int i = 0; i < n; i++) {
		cr_assert_eq(trace_reader_next(r, &got), TRACE_OK, "%s", trace_reader_error(r));
		assert_same(&recs[i], &got);
	}
	cr_assert_eq(trace_reader_next(r, &got), TRACE_EOF);
	cr_assert_eq(trace_reader_crc32(r), crc);
	cr_assert_eq(trace_reader_bytes(r), bytes);
	trace_reader_close(r);
}

Test(trace, round_trip_plain)
{
	round_trip(tpath("rt.trace"));
	FILE *f = fopen(tpath("rt.trace"), "r");
	cr_assert_not_null(f);
	char line[256];
	int deltas = 0;
	while (fgets(line, sizeof line, f))
		deltas += strstr(line, " +") != NULL;
	fclose(f);
	cr_assert_geq(deltas, 10, "the writer writes delta times");
}

Test(trace, round_trip_gzip)
{
	round_trip(tpath("rt.trace.gz"));
	unsigned char magic[2] = {0};
	FILE *f = fopen(tpath("rt.trace.gz"), "rb");
	cr_assert_not_null(f);
	cr_assert_eq(fread(magic, 1, 2, f), 2);
	fclose(f);
	cr_assert(magic[0] == 0x1f && magic[1] == 0x8b, "a .gz path gets gzip");
}

/* The same text, plain or gzip, has the same content identity. */
Test(trace, crc_identity_plain_vs_gzip)
{
	round_trip(tpath("a.trace"));
	FILE *in = fopen(tpath("a.trace"), "rb");
	gzFile out = gzopen(tpath("a.trace.gz"), "wb");
	cr_assert(in && out);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		cr_assert_eq(gzwrite(out, buf, (unsigned)n), (int)n);
	fclose(in);
	cr_assert_eq(gzclose(out), Z_OK);
	uint32_t crc[2];
	struct trace_rec rec;
	for (int k = 0; k < 2; k++) {
		struct trace_reader *r = trace_reader_open(tpath(k ? "a.trace.gz" : "a.trace"));
		cr_assert_eq(trace_reader_status(r), 0);
		while (trace_reader_next(r, &rec) == TRACE_OK)
			;
		crc[k] = trace_reader_crc32(r);
		trace_reader_close(r);
	}
	cr_assert_eq(crc[0], crc[1]);
}

Test(trace, reads_absolute_and_delta_times)
{
	struct trace_reader *r = trace_reader_open("tests/data/good/all_types.trace");
	cr_assert_eq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	struct trace_rec rec;
	uint64_t starts[32], ends[32];
	int n = 0, rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK && n < 32) {
		starts[n] = rec.start;
		ends[n++] = rec.end;
		if (rec.type == TREC_KERNEL) {
			cr_assert_eq(rec.u.kernel.nlinks, 2);
			cr_assert_eq(rec.u.kernel.links[1], 1);
			cr_assert_str_eq(trace_reader_string(r, rec.u.kernel.name),
					 "void at::native::vectorized_elementwise_kernel<4>(int, float*)");
		}
	}
	cr_assert_eq(rc, TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert_eq(n, 15);
	cr_assert_eq(starts[0], 1000);
	cr_assert_eq(starts[1], 1010);   /* +10 */
	cr_assert_eq(starts[2], 1015);   /* kernel +5 */
	cr_assert_eq(ends[2], 1115);     /* end +100 from its own start */
	cr_assert_eq(starts[4], 1050);   /* absolute again */
	cr_assert_eq(ends[4], 1060);
	const struct trace_header *h = trace_reader_header(r);
	cr_assert_eq(h->nlabels, 3);
	cr_assert_str_eq(h->labels[2].value, "cnn");
	cr_assert_str_eq(h->command, "python train.py --batch 64");
	trace_reader_close(r);
}

/* Read FILE to the end; the status and message of the first failure. */
static int read_all(const char *path, char *msg, size_t len, uint64_t *nrec)
{
	struct trace_reader *r = trace_reader_open(path);
	cr_assert_not_null(r);
	int rc = trace_reader_status(r);
	struct trace_rec rec;
	*nrec = 0;
	if (rc == 0)
		while ((rc = trace_reader_next(r, &rec)) == TRACE_OK)
			(*nrec)++;
	snprintf(msg, len, "%s", trace_reader_error(r));
	trace_reader_close(r);
	return rc;
}

static void expect_bad(const char *name, int line, const char *what)
{
	char path[256], msg[1200], prefix[300];
	uint64_t n;
	snprintf(path, sizeof path, "tests/data/bad/%s", name);
	int rc = read_all(path, msg, sizeof msg, &n);
	cr_assert_lt(rc, 0, "%s: status %d", name, rc);
	snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
	cr_assert(!strncmp(msg, prefix, strlen(prefix)), "message '%s' should start '%s'", msg, prefix);
	cr_assert(strstr(msg, what), "message '%s' should say '%s'", msg, what);
}

Test(trace, bad_missing_file)
{
	char msg[1200];
	uint64_t n;
	int rc = read_all("tests/data/bad/does-not-exist.trace", msg, sizeof msg, &n);
	cr_assert_eq(rc, TRACE_ERR_IO);
	cr_assert(strstr(msg, "tests/data/bad/does-not-exist.trace: cannot open"), "%s", msg);
}

Test(trace, bad_magic) { expect_bad("bad_magic.trace", 1, "not a gpumemsim trace"); }
Test(trace, bad_version)
{
	expect_bad("bad_version.trace", 1,
		   "unsupported trace format version 2 (this gpumemsim reads 1)");
}
Test(trace, bad_garbage_line) { expect_bad("garbage_line.trace", 3, "bad <addr>"); }
Test(trace, bad_short_line) { expect_bad("short_line.trace", 3, "missing field <bytes>"); }
Test(trace, bad_unknown_type) { expect_bad("unknown_type.trace", 3, "unknown record type 'z'"); }
Test(trace, bad_undefined_string) { expect_bad("undefined_string.trace", 4, "string id 5"); }
Test(trace, bad_time_backwards) { expect_bad("time_backwards.trace", 3, "time goes backwards"); }
Test(trace, bad_header_after_events)
{
	expect_bad("header_after_events.trace", 4, "after the first event");
}
Test(trace, bad_trailer_count) { expect_bad("bad_trailer_count.trace", 3, "trailer says 5"); }
Test(trace, bad_after_trailer) { expect_bad("after_trailer.trace", 4, "after the 'end' trailer"); }
Test(trace, bad_empty_line) { expect_bad("empty_line.trace", 3, "empty line"); }
Test(trace, bad_end_before_start) { expect_bad("end_before_start.trace", 2, "before it starts"); }

Test(trace, bad_no_newline_returns_records_first)
{
	char msg[1200];
	uint64_t n;
	int rc = read_all("tests/data/bad/no_newline.trace", msg, sizeof msg, &n);
	cr_assert_eq(rc, TRACE_ERR_TRUNCATED);
	cr_assert_eq(n, 1, "the complete record before the cut is returned");
	cr_assert(strstr(msg, "tests/data/bad/no_newline.trace:3: last line has no newline"), "%s",
		  msg);
}

Test(trace, bad_overlong_line)
{
	const char *path = tpath("long.trace");
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("gpumemsim-trace 1\nS 0 ", f);
	for (int i = 0; i < (1 << 20) + 10; i++)
		fputc('x', f);
	fputs("\na 1 0x10 4 0\n", f);
	fclose(f);
	char msg[1200], want[300];
	uint64_t n;
	int rc = read_all(path, msg, sizeof msg, &n);
	cr_assert_lt(rc, 0);
	snprintf(want, sizeof want, "%s:2: line longer than", path);
	cr_assert(strstr(msg, want), "%s", msg);
}

Test(trace, bad_truncated_gzip)
{
	/* A gzip trace of many records, cut in the middle of the stream. */
	const char *full = tpath("full.trace.gz"), *cut = tpath("cut.trace.gz");
	char err[512];
	struct trace_writer *w = trace_writer_open(full, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_rec rec = {.type = TREC_ALLOC};
	for (uint64_t i = 0; i < 100000; i++) {
		rec.type = (i & 1) ? TREC_FREE : TREC_ALLOC;
		rec.start = rec.end = 1000 + i * 37;
		rec.u.mem = (struct trace_mem){.addr = 0x7f0000000000ull + (i / 2) * 4096,
					       .bytes = 4096 + i % 77, .kind = TMEM_DEVICE,
					       .source = TRACE_NO_STRING};
		cr_assert_eq(trace_writer_record(w, &rec), 0);
	}
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
	FILE *in = fopen(full, "rb"), *out = fopen(cut, "wb");
	cr_assert(in && out);
	fseek(in, 0, SEEK_END);
	long size = ftell(in);
	fseek(in, 0, SEEK_SET);
	for (long i = 0; i < size / 2; i++)
		fputc(fgetc(in), out);
	fclose(in);
	fclose(out);
	char msg[1200], want[300];
	uint64_t n;
	int rc = read_all(cut, msg, sizeof msg, &n);
	cr_assert_eq(rc, TRACE_ERR_TRUNCATED, "%d %s", rc, msg);
	cr_assert_gt(n, 1000, "records before the cut are returned (%llu)", (unsigned long long)n);
	cr_assert_lt(n, 100000);
	snprintf(want, sizeof want, "%s:%llu: ", cut, (unsigned long long)n + 2);
	cr_assert(!strncmp(msg, want, strlen(want)), "'%s' should start '%s'", msg, want);
	cr_assert(strstr(msg, "cut short"), "%s", msg);
}

Test(trace, writer_rejects_out_of_order)
{
	char err[512];
	const char *path = tpath("ooo.trace");
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w);
	struct trace_rec rec = {.type = TREC_ALLOC, .start = 100, .end = 100};
	rec.u.mem.source = TRACE_NO_STRING;
	cr_assert_eq(trace_writer_record(w, &rec), 0);
	rec.start = rec.end = 50;
	cr_assert_lt(trace_writer_record(w, &rec), 0);
	cr_assert_lt(trace_writer_close(&w, 1, 0, err, sizeof err), 0);
	cr_assert(strstr(err, "before the previous record"), "%s", err);
	cr_assert_neq(access(path, F_OK), 0, "atomic writer leaves no file after an error");
}

/* A full disk must fail at flush/close, naming the file. */
Test(trace, writer_full_disk_is_an_error)
{
	if (access("/dev/full", W_OK) != 0)
		cr_skip_test("no /dev/full");
	for (int gz = 0; gz < 2; gz++) {
		const char *link = tpath(gz ? "full.trace.gz" : "full.trace");
		cr_assert_eq(symlink("/dev/full", link), 0);
		char err[512] = "";
		struct trace_writer *w = trace_writer_open(link, TRACE_W_STREAM, err, sizeof err);
		cr_assert_not_null(w, "%s", err);
		struct trace_rec rec = {.type = TREC_ALLOC};
		rec.u.mem.source = TRACE_NO_STRING;
		int failed = 0;
		for (int i = 0; i < 20000 && !failed; i++) {
			rec.start = rec.end = (uint64_t)i;
			failed = trace_writer_record(w, &rec) < 0;
		}
		int rc = trace_writer_close(&w, 1, 0, err, sizeof err);
		cr_assert_lt(rc, 0, "gz=%d: writing to a full disk must fail", gz);
		cr_assert(strstr(err, link), "'%s' names the file", err);
		unlink(link);
	}
}

Test(trace, atomic_writer_removes_temp_when_rename_fails)
{
	char err[512];
	const char *path = tpath("adir");
	cr_assert_eq(mkdir(path, 0755), 0);
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_rec rec = {.type = TREC_ALLOC};
	rec.u.mem.source = TRACE_NO_STRING;
	cr_assert_eq(trace_writer_record(w, &rec), 0);
	cr_assert_lt(trace_writer_close(&w, 1, 0, err, sizeof err), 0);
	cr_assert(strstr(err, "rename"), "%s", err);
	rmdir(path);
	DIR *d = opendir(tdir);
	struct dirent *e;
	while ((e = readdir(d)))
		cr_assert_null(strstr(e->d_name, ".tmp."), "temp file %s left", e->d_name);
	closedir(d);
}

/* STREAM + flush: a producer that dies leaves a readable, incomplete trace. */
Test(trace, stream_flush_leaves_readable_incomplete_trace)
{
	for (int gz = 0; gz < 2; gz++) {
		const char *path = tpath(gz ? "s.trace.gz" : "s.trace");
		char err[512];
		struct trace_writer *w = trace_writer_open(path, TRACE_W_STREAM, err, sizeof err);
		cr_assert_not_null(w, "%s", err);
		struct trace_rec rec = {.type = TREC_ALLOC};
		rec.u.mem.source = TRACE_NO_STRING;
		for (int i = 0; i < 100; i++) {
			rec.start = rec.end = (uint64_t)i * 10;
			rec.u.mem.addr = 0x1000u * (unsigned)(i + 1);
			cr_assert_eq(trace_writer_record(w, &rec), 0);
		}
		cr_assert_eq(trace_writer_flush(w), 0);
		char msg[1200];
		uint64_t n;
		int rc = read_all(path, msg, sizeof msg, &n);
		cr_assert_eq(n, 100, "gz=%d: all flushed records readable (%llu)", gz,
			     (unsigned long long)n);
		/* No trailer: plain ends cleanly, gzip ends mid-stream. */
		cr_assert_eq(rc, gz ? TRACE_ERR_TRUNCATED : TRACE_EOF, "gz=%d rc=%d %s", gz, rc, msg);
		trace_writer_abort(w);
		cr_assert_neq(access(path, F_OK), 0, "abort removes the file");
	}
}

Test(trace, incomplete_trace_has_no_trailer)
{
	struct trace_reader *r = trace_reader_open("tests/data/good/incomplete.trace");
	cr_assert_eq(trace_reader_status(r), 0);
	struct trace_rec rec;
	int n = 0, rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK)
		n++;
	cr_assert_eq(rc, TRACE_EOF);
	cr_assert_eq(n, 3);
	cr_assert_eq(trace_reader_trailer(r)->present, 0);
	trace_reader_close(r);
}

Test(trace, names)
{
	cr_assert_eq(trace_rec_tag(TREC_ALLOC), 'a');
	cr_assert_eq(trace_rec_tag(TREC_SEGMENT), 'g');
	cr_assert_eq(trace_rec_tag((enum trace_rec_type)99), '?');
	cr_assert_str_eq(trace_rec_name(TREC_MEMCPY), "memcpy");
	cr_assert_str_eq(trace_control_name(TCTL_EMPTY_CACHE), "empty_cache");
	cr_assert_str_eq(trace_control_name(TCTL_COUNT), "unknown");
	cr_assert_str_eq(trace_segment_op_name(TSEG_UNMAP), "unmap");
	cr_assert_str_eq(trace_copy_kind_name(TCOPY_PTOP), "ptop");
	cr_assert_str_eq(trace_sync_kind_name(TSYNC_STREAM_WAIT_EVENT), "stream_wait_event");
}

/* "step N": decimal digits and nothing else. */
Test(trace, step_number)
{
	uint64_t n = 7;
	cr_assert(trace_step_number("step 0", &n) && n == 0);
	cr_assert(trace_step_number("step 12", &n) && n == 12);
	cr_assert(trace_step_number("step 18446744073709551605", &n) && n == 18446744073709551605ull);
	const char *bad[] = {NULL, "", "step", "step ", "step  3", "step +3", "step -3", "step 3 ",
			     "step 3a", "step_3", "Step 3", "forward", "step 99999999999999999999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		n = 7;
		cr_assert_eq(trace_step_number(bad[i], &n), 0, "'%s'", bad[i] ? bad[i] : "(null)");
		cr_assert_eq(n, 7, "'%s' set N", bad[i] ? bad[i] : "(null)");
	}
}

Test(trace, rewind_refused_after_failed_open)
{
	struct trace_reader *r = trace_reader_open("tests/data/bad/bad_version.trace");
	cr_assert_eq(trace_reader_status(r), TRACE_ERR_VERSION);
	cr_assert_lt(trace_reader_rewind(r), 0);
	struct trace_rec rec;
	cr_assert_lt(trace_reader_next(r, &rec), 0, "errors are sticky");
	trace_reader_close(r);
}

/* ------------------------------------------------- CUDA graph fields */

/* Write RECS[0..N) with writer W (opened on PATH, header written) and
 * close it; the file's text into TEXT (LEN bytes); read it back and check
 * every record is the one written (absent optional fields must be set by
 * the reader, not left: the records are read over a poisoned buffer). */
static void write_read_back(struct trace_writer *w, const char *path, const struct trace_rec *recs,
			    int n, char *text, size_t len)
{
	char err[512];
	for (int i = 0; i < n; i++)
		cr_assert_eq(trace_writer_record(w, &recs[i]), 0, "record %d", i);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t got_len = fread(text, 1, len - 1, f);
	text[got_len] = '\0';
	fclose(f);
	struct trace_reader *rd = trace_reader_open(path);
	cr_assert_eq(trace_reader_status(rd), 0, "%s", trace_reader_error(rd));
	struct trace_rec got;
	for (int i = 0; i < n; i++) {
		memset(&got, 0xa5, sizeof got);
		cr_assert_eq(trace_reader_next(rd, &got), TRACE_OK, "%s", trace_reader_error(rd));
		assert_same(&recs[i], &got);
	}
	cr_assert_eq(trace_reader_next(rd, &got), TRACE_EOF, "%s", trace_reader_error(rd));
	trace_reader_close(rd);
}

/* Kernels, copies and memsets with and without graph fields, written and
 * read back; the text has the fields only where they are set. */
Test(trace, graph_fields_round_trip)
{
	const char *path = tpath("graph.trace");
	char err[512];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_header h = {.producer = "test"};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	uint32_t kname = trace_writer_intern(w, "graph_kernel");
	struct trace_rec recs[8];
	memset(recs, 0, sizeof recs);
	int n = 0;
	struct trace_rec *r = &recs[n++];
	r->type = TREC_ALLOC;
	r->start = r->end = 1000;
	r->u.mem = (struct trace_mem){.id = 0, .addr = 0x10000, .bytes = 4096,
				      .stream = TRACE_NO_STREAM, .kind = TMEM_DEVICE,
				      .source = TRACE_NO_STRING};
	/* links and graph */
	r = &recs[n++];
	r->type = TREC_KERNEL;
	r->start = 1010;
	r->end = 1100;
	r->u.kernel = (struct trace_kernel){.stream = 7, .name = kname, .grid = {1, 1, 1},
					    .block = {32, 1, 1}, .corr = 50, .nlinks = 1,
					    .links = (const uint64_t[]){0}, .graph = 3, .graph_node = 42};
	/* graph without links: links written '-' */
	r = &recs[n++];
	r->type = TREC_KERNEL;
	r->start = 1020;
	r->end = 1120;
	r->u.kernel = (struct trace_kernel){.stream = 7, .name = kname, .grid = {1, 1, 1},
					    .block = {32, 1, 1}, .corr = 50, .graph = UINT32_MAX,
					    .graph_node = UINT64_MAX};
	/* no graph: the old form */
	r = &recs[n++];
	r->type = TREC_KERNEL;
	r->start = 1030;
	r->end = 1130;
	r->u.kernel = (struct trace_kernel){.stream = 7, .name = kname, .grid = {1, 1, 1},
					    .block = {32, 1, 1}, .corr = 51};
	r = &recs[n++];
	r->type = TREC_MEMCPY;
	r->start = 1040;
	r->end = 1050;
	r->u.copy = (struct trace_copy){.stream = 7, .kind = TCOPY_DTOD, .bytes = 64, .corr = 50,
					.graph = 3, .graph_node = 44};
	r = &recs[n++];
	r->type = TREC_MEMCPY;
	r->start = 1040;
	r->end = 1050;
	r->u.copy = (struct trace_copy){.stream = 7, .kind = TCOPY_HTOD, .bytes = 64, .corr = 52};
	r = &recs[n++];
	r->type = TREC_MEMSET;
	r->start = 1060;
	r->end = 1070;
	r->u.copy = (struct trace_copy){.stream = 7, .bytes = 64, .corr = 50, .graph = 3,
					.graph_node = 45};
	r = &recs[n++];
	r->type = TREC_MEMSET;
	r->start = 1060;
	r->end = 1070;
	r->u.copy = (struct trace_copy){.stream = 7, .bytes = 64, .corr = 53, .graph_node = 46};
	char text[4096];
	write_read_back(w, path, recs, n, text, sizeof text);
	cr_assert(strstr(text, " 50 0 3 42\n"), "kernel with links and graph:\n%s", text);
	cr_assert(strstr(text, " 50 - 4294967295 18446744073709551615\n"),
		  "kernel with graph, no links:\n%s", text);
	cr_assert(strstr(text, " 0 0 51\n"), "kernel without graph keeps the old form:\n%s", text);
	cr_assert(strstr(text, " dtod 50 3 44\n"), "%s", text);
	cr_assert(strstr(text, " htod 52\n"), "%s", text);
	cr_assert(strstr(text, " 64 50 3 45\n"), "%s", text);
	cr_assert(strstr(text, " 64 53 0 46\n"), "a node without a graph id is kept:\n%s", text);
}

/* Hand-written: both forms read, absent fields are 0 0. */
Test(trace, graph_fields_read_both_forms)
{
	const char *path = tpath("graph_text.trace");
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("gpumemsim-trace 1\n"
	      "S 0 k\n"
	      "k 10 +5 7 0 1,1,1 1,1,1 0 0 9\n"
	      "k 10 +5 7 0 1,1,1 1,1,1 0 0 9 -\n"
	      "k 10 +5 7 0 1,1,1 1,1,1 0 0 9 - 12 3400000000000\n"
	      "c 10 +5 7 8 dtod 9\n"
	      "c 10 +5 7 8 dtod 9 12 3400000000001\n"
	      "m 10 +5 7 8 9\n"
	      "m 10 +5 7 8 9 12 3400000000002\n"
	      "end 7 0\n", f);
	cr_assert_eq(fclose(f), 0);
	const uint32_t graph[] = {0, 0, 12, 0, 12, 0, 12};
	const uint64_t node[] = {0, 0, 3400000000000ull, 0, 3400000000001ull, 0,
				 3400000000002ull};
	struct trace_reader *r = trace_reader_open(path);
	cr_assert_eq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	struct trace_rec rec;
	for (int i = 0; i < 7; i++) {
		memset(&rec, 0xa5, sizeof rec); /* absent fields must be set, not left */
		cr_assert_eq(trace_reader_next(r, &rec), TRACE_OK, "%s", trace_reader_error(r));
		if (rec.type == TREC_KERNEL) {
			cr_assert_eq(rec.u.kernel.nlinks, 0);
			cr_assert_eq(rec.u.kernel.graph, graph[i], "record %d", i);
			cr_assert_eq(rec.u.kernel.graph_node, node[i], "record %d", i);
		} else {
			cr_assert_eq(rec.u.copy.graph, graph[i], "record %d", i);
			cr_assert_eq(rec.u.copy.graph_node, node[i], "record %d", i);
		}
	}
	cr_assert_eq(trace_reader_next(r, &rec), TRACE_EOF, "%s", trace_reader_error(r));
	trace_reader_close(r);
}

/* The capture's own time on a 'p' record: written only when measured,
 * read back the same; a record without it keeps the old form. */
Test(trace, api_own_fields_round_trip)
{
	const char *path = tpath("own.trace");
	char err[512];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_header h = {.producer = "test"};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	uint32_t name = trace_writer_intern(w, "cudaLaunchKernel");
	struct trace_rec recs[3];
	memset(recs, 0, sizeof recs);
	for (int i = 0; i < 3; i++) {
		recs[i].type = TREC_API;
		recs[i].start = 1000 + 100 * (uint64_t)i;
		recs[i].end = recs[i].start + 7;
		recs[i].u.api.name = name;
		recs[i].u.api.corr = 40 + (uint64_t)i;
	}
	recs[1].u.api = (struct trace_api){.name = name, .corr = 41, .own_ns = 1234,
					   .own_cbs = 9, .has_own = 1};
	recs[2].u.api = (struct trace_api){.name = name, .corr = 42, .has_own = 1};
	char text[2048];
	write_read_back(w, path, recs, 3, text, sizeof text);
	cr_assert(strstr(text, " 40\n"), "no own time: the old form:\n%s", text);
	cr_assert(strstr(text, " 41 1234 9\n"), "%s", text);
	cr_assert(strstr(text, " 42 0 0\n"), "a measured zero is written:\n%s", text);
}

/* A range that ran with the capture paused carries the trailing word
 * `uncaptured`; one without it reads as before. */
Test(trace, range_uncaptured_round_trip)
{
	const char *path = tpath("uncaptured.trace");
	char err[512];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_header h = {.producer = "test"};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	uint32_t name = trace_writer_intern(w, "step 8");
	struct trace_rec recs[2];
	memset(recs, 0, sizeof recs);
	for (int i = 0; i < 2; i++) {
		recs[i].type = TREC_RANGE;
		recs[i].start = 1000 + 100 * (uint64_t)i;
		recs[i].end = recs[i].start + 50;
		recs[i].u.range.name = name;
	}
	recs[1].u.range.uncaptured = 1;
	char text[2048];
	write_read_back(w, path, recs, 2, text, sizeof text);
	cr_assert(strstr(text, "r 1000 +50 0 0\n"), "%s", text);
	cr_assert(strstr(text, "r +100 +50 0 0 uncaptured\n"), "%s", text);
}

static void expect_bad_text(const char *name, const char *body, int line, const char *what)
{
	const char *path = tpath(name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "gpumemsim-trace 1\nS 0 k\n%s", body);
	cr_assert_eq(fclose(f), 0);
	char msg[1200], prefix[300];
	uint64_t n;
	int rc = read_all(path, msg, sizeof msg, &n);
	cr_assert_lt(rc, 0, "%s: status %d", name, rc);
	snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
	cr_assert(!strncmp(msg, prefix, strlen(prefix)), "message '%s' should start '%s'", msg, prefix);
	cr_assert(strstr(msg, what), "message '%s' should say '%s'", msg, what);
}

Test(trace, bad_graph_field_count)
{
	expect_bad_text("g1.trace", "k 10 +5 7 0 1,1,1 1,1,1 0 0 9 - 12\n", 3,
			"'k' record has <graph> without <node>");
	expect_bad_text("g2.trace", "k 10 +5 7 0 1,1,1 1,1,1 0 0 9\n"
			"k 10 +5 7 0 1,1,1 1,1,1 0 0 9 0,1 12\n", 4,
			"'k' record has <graph> without <node>");
	expect_bad_text("g3.trace", "c 10 +5 7 8 dtod 9 12\n", 3,
			"'c' record has <graph> without <node>");
	expect_bad_text("g4.trace", "m 10 +5 7 8 9 12\n", 3,
			"'m' record has <graph> without <node>");
	expect_bad_text("g5.trace", "m 10 +5 7 8 9 12 13 14\n", 3, "extra field in 'm' record");
	expect_bad_text("g6.trace", "c 10 +5 7 8 dtod 9 4294967296 1\n", 3,
			"bad <graph> in 'c' record");
	expect_bad_text("g7.trace", "k 10 +5 7 0 1,1,1 1,1,1 0 0 9 - 1 x\n", 3,
			"bad <node> in 'k' record");
}

Test(trace, bad_range_flag)
{
	expect_bad_text("u1.trace", "r 10 +5 0 0 uncapturedx\n", 3, "extra field in 'r' record");
	expect_bad_text("u2.trace", "r 10 +5 0 0 uncaptured 1\n", 3, "extra field in 'r' record");
	expect_bad_text("u3.trace", "r 10 +5 0 0 captured\n", 3, "extra field in 'r' record");
}

Test(trace, bad_api_own_fields)
{
	expect_bad_text("o1.trace", "p 10 +5 0 9 1234\n", 3,
			"'p' record has <own_ns> without <own_cbs>");
	expect_bad_text("o2.trace", "p 10 +5 0 9 1234 5 6\n", 3, "extra field in 'p' record");
	expect_bad_text("o3.trace", "p 10 +5 0 9 x 5\n", 3, "bad <own_ns> in 'p' record");
	expect_bad_text("o4.trace", "p 10 +5 0 9 1 4294967296\n", 3, "bad <own_cbs> in 'p' record");
}

/* A kernel's links live outside the record: the writer reads them through
 * the pointer (and refuses a count without an array); the reader's point
 * into the reader, reused by the next kernel. */
Test(trace, kernel_links_outside_the_record)
{
	const char *path = tpath("links.trace");
	char err[512];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_header h = {.producer = "test"};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	uint32_t kname = trace_writer_intern(w, "k");
	struct trace_rec r;
	for (int i = 0; i < 3; i++) {
		memset(&r, 0, sizeof r);
		r.type = TREC_ALLOC;
		r.start = r.end = 100 + (uint64_t)i;
		r.u.mem = (struct trace_mem){.addr = 0x1000 * (uint64_t)(i + 1), .bytes = 256,
					     .stream = 7, .kind = TMEM_DEVICE, .source = TRACE_NO_STRING};
		cr_assert_eq(trace_writer_record(w, &r), 0);
	}
	uint64_t ids[TRACE_MAX_LINKS];
	memset(&r, 0, sizeof r);
	r.type = TREC_KERNEL;
	r.start = 200;
	r.end = 210;
	r.u.kernel = (struct trace_kernel){.stream = 7, .name = kname, .grid = {1, 1, 1},
					    .block = {1, 1, 1}, .corr = 1, .nlinks = 2, .links = ids};
	ids[0] = 0;
	ids[1] = 2;
	cr_assert_eq(trace_writer_record(w, &r), 0);
	ids[0] = 1; /* the writer took the ids during the call */
	r.start = 220;
	r.end = 230;
	r.u.kernel.nlinks = 1;
	cr_assert_eq(trace_writer_record(w, &r), 0);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);

	struct trace_reader *rd = trace_reader_open(path);
	cr_assert_eq(trace_reader_status(rd), 0, "%s", trace_reader_error(rd));
	struct trace_rec a, b;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(trace_reader_next(rd, &a), TRACE_OK, "%s", trace_reader_error(rd));
	cr_assert_eq(trace_reader_next(rd, &a), TRACE_OK, "%s", trace_reader_error(rd));
	cr_assert_eq(a.type, TREC_KERNEL);
	cr_assert_eq(a.u.kernel.nlinks, 2);
	cr_assert_not_null(a.u.kernel.links);
	cr_assert_eq(a.u.kernel.links[0], 0);
	cr_assert_eq(a.u.kernel.links[1], 2);
	cr_assert_lt(sizeof a, 128, "a trace_rec carries no link array");
	cr_assert_eq(trace_reader_next(rd, &b), TRACE_OK, "%s", trace_reader_error(rd));
	cr_assert_eq(b.u.kernel.nlinks, 1);
	cr_assert_eq(b.u.kernel.links[0], 1);
	cr_assert_eq(a.u.kernel.links, b.u.kernel.links, "both point into the reader");
	trace_reader_close(rd);

	w = trace_writer_open(tpath("nolinks.trace"), TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	cr_assert_eq(trace_writer_header(w, &h), 0);
	kname = trace_writer_intern(w, "k");
	memset(&r, 0, sizeof r);
	r.type = TREC_KERNEL;
	r.start = 200;
	r.end = 210;
	r.u.kernel = (struct trace_kernel){.stream = 7, .name = kname, .grid = {1, 1, 1},
					    .block = {1, 1, 1}, .nlinks = 2, .links = NULL};
	cr_assert_lt(trace_writer_record(w, &r), 0, "a link count without links");
	trace_writer_abort(w);
}

/* trace_reader_start: a reader past a good header, or NULL with the reason
 * naming the file (and nothing left open: the sanitizer build checks). */
Test(trace, start_checks_the_header)
{
	char err[512] = "";
	struct trace_reader *r = trace_reader_start("tests/data/good/example.trace", err,
						     sizeof err);
	struct trace_rec rec;
	cr_assert_not_null(r, "%s", err);
	cr_assert_eq(trace_reader_next(r, &rec), TRACE_OK, "%s", trace_reader_error(r));
	trace_reader_close(r);

	r = trace_reader_start("tests/data/bad/does-not-exist.trace", err, sizeof err);
	cr_assert_null(r);
	cr_assert(strstr(err, "tests/data/bad/does-not-exist.trace: cannot open"), "%s", err);

	r = trace_reader_start("tests/data/bad/bad_version.trace", err, sizeof err);
	cr_assert_null(r);
	cr_assert(strstr(err, "tests/data/bad/bad_version.trace:1: ") &&
		  strstr(err, "unsupported trace format version 2"), "%s", err);
}

/* trace_header_label: of a key given twice the later value counts, as a
 * later --label overrides; no header, no such key: NULL. */
Test(trace, header_label_lookup)
{
	struct trace_label labels[] = {
		{"model", "resnet18"}, {"batch", "16"}, {"batch", "32"}, {"empty", NULL}};
	struct trace_header h = {.labels = labels, .nlabels = 4};
	cr_assert_str_eq(trace_header_label(&h, "model"), "resnet18");
	cr_assert_str_eq(trace_header_label(&h, "batch"), "32");
	cr_assert_str_eq(trace_header_label(&h, "empty"), "");
	cr_assert_null(trace_header_label(&h, "workload"));
	cr_assert_null(trace_header_label(NULL, "model"));
}
