/*
 * test_import_kineto.c: the torch.profiler (Kineto) importer
 * (traces/import_kineto.c) on a hand-written trace in Kineto's own layout
 * (tests/data/kineto_small.json: two ProfilerStep ranges, CUDA and CPU
 * memory events, memory live before the profile, kernels, a copy, a memset,
 * GPU annotations, runtime calls, flows and metadata events to skip): what
 * comes out, that it replays, and bad input (file and line named, exit 1, no
 * output left). Also the JSON reader's number and string handling.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "../traces/import_kineto.h"
#include "../traces/import_kineto_json.h"
#include "../traces/trace.h"

#define FIXTURE "tests/data/kineto_small.json"
#define BASE_NS 1759300000000000000ull

/* Everything in a trace that the tests look at. */
struct seen {
	int counts[TREC_COUNT];
	struct trace_rec first_alloc, kernel, copy, set, oom;
	int nkernel;
	char ranges[8][96];
	uint32_t depths[8];
	int nranges;
	char labels[16][2][64];
	int nlabels;
	char gpu[64];
	uint64_t total_memory;
};

static void read_trace(const char *path, struct seen *s)
{
	struct trace_reader *r = trace_reader_open(path);
	struct trace_rec rec;
	int rc;
	memset(s, 0, sizeof *s);
	cr_assert_not_null(r);
	cr_assert_geq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	const struct trace_header *h = trace_reader_header(r);
	for (size_t i = 0; i < h->nlabels && i < 16; i++) {
		snprintf(s->labels[i][0], 64, "%s", h->labels[i].key);
		snprintf(s->labels[i][1], 64, "%s", h->labels[i].value);
		s->nlabels++;
	}
	snprintf(s->gpu, sizeof s->gpu, "%s", h->gpu ? h->gpu : "");
	s->total_memory = h->total_memory;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		if (!s->counts[rec.type]) {
			if (rec.type == TREC_ALLOC)
				s->first_alloc = rec;
			if (rec.type == TREC_MEMCPY)
				s->copy = rec;
			if (rec.type == TREC_MEMSET)
				s->set = rec;
			if (rec.type == TREC_CONTROL)
				s->oom = rec;
		}
		if (rec.type == TREC_KERNEL && s->nkernel++ == 1)
			s->kernel = rec;   /* the second: the gemm */
		if (rec.type == TREC_RANGE && s->nranges < 8) {
			snprintf(s->ranges[s->nranges], 96, "%s",
				 trace_reader_string(r, rec.u.range.name));
			s->depths[s->nranges++] = rec.u.range.depth;
		}
		s->counts[rec.type]++;
	}
	cr_assert_eq(rc, TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert(trace_reader_trailer(r)->present);
	trace_reader_close(r);
}

static const char *label(const struct seen *s, const char *key)
{
	const char *v = NULL;
	for (int i = 0; i < s->nlabels; i++)
		if (!strcmp(s->labels[i][0], key))
			v = s->labels[i][1];
	return v;
}

static void out_name(char *buf, size_t len)
{
	th_tmpname(buf, len, "kineto_out");
	unlink(buf);
}

Test(import_kineto, memory_kernels_and_steps)
{
	char out[64], err[512];
	struct import_kineto_stats st;
	struct seen s;
	out_name(out, sizeof out);
	cr_assert_eq(import_kineto(FIXTURE, out, NULL, 0, &st, err, sizeof err), 0, "%s", err);
	read_trace(out, &s);

	/* 4 allocations in the profile and 2 for what was live before it: the
	 * activation freed at 160 us that the profile never allocated, and the
	 * rest of "Total Allocated" before the first event (the parameters) */
	cr_assert_eq(s.counts[TREC_ALLOC], 6);
	cr_assert_eq(s.counts[TREC_FREE], 4);
	cr_assert_eq(st.before_allocs, 2);
	cr_assert_eq(st.before_bytes, 1572864);
	cr_assert_eq(st.cpu_mem_events, 1, "the CPU [memory] event is left out");
	cr_assert_eq(st.mem_events, 8);
	/* they are made at the first record's time, the step 0 range's start */
	cr_assert_eq(s.first_alloc.start, BASE_NS + 100000);
	cr_assert_eq(s.first_alloc.u.mem.addr, 0x7effffe00000ull);
	cr_assert_eq(s.first_alloc.u.mem.bytes, 524288);
	cr_assert_eq(s.first_alloc.u.mem.kind, TMEM_DEVICE);
	cr_assert_eq(s.first_alloc.u.mem.source, TRACE_NO_STRING,
		     "requests, like the snapshot import: no source, no allocator_source label");

	/* 5 kernels, the GPU-side ProfilerStep annotation is not a range */
	cr_assert_eq(s.counts[TREC_KERNEL], 5);
	cr_assert_eq(s.kernel.start, BASE_NS + 410000);
	cr_assert_eq(s.kernel.end, BASE_NS + 510000);
	cr_assert_eq(s.kernel.u.kernel.stream, 7);
	cr_assert_eq(s.kernel.u.kernel.grid[1], 16);
	cr_assert_eq(s.kernel.u.kernel.block[0], 256);
	cr_assert_eq(s.kernel.u.kernel.regs, 122);
	cr_assert_eq(s.kernel.u.kernel.smem, 33280);
	cr_assert_eq(s.kernel.u.kernel.corr, 105);
	cr_assert_eq(s.counts[TREC_MEMCPY], 1);
	cr_assert_eq(s.copy.u.copy.kind, TCOPY_HTOD);
	cr_assert_eq(s.copy.u.copy.bytes, 602112);
	cr_assert_eq(s.copy.end - s.copy.start, 5123, "microseconds with three decimals, exactly");
	cr_assert_eq(s.counts[TREC_MEMSET], 1);
	cr_assert_eq(s.set.u.copy.bytes, 1024);
	cr_assert_eq(s.counts[TREC_API], 0);
	cr_assert_eq(s.counts[TREC_CONTROL], 0);

	/* ProfilerStep#N is "step N"; other annotations keep their names */
	cr_assert_eq(s.nranges, 3);
	cr_assert_str_eq(s.ranges[0], "step 0");
	cr_assert_str_eq(s.ranges[1], "step 1");
	cr_assert_str_eq(s.ranges[2], "Optimizer.step#SGD.step");
	cr_assert_eq(s.depths[1], 0);
	cr_assert_eq(s.depths[2], 1, "inside step 1");
	cr_assert_eq(st.steps, 2);

	/* the header and labels */
	cr_assert_str_eq(s.gpu, "NVIDIA H200");
	cr_assert_eq(s.total_memory, 150754820096ull);
	cr_assert_str_eq(label(&s, "source"), "kineto");
	cr_assert_str_eq(label(&s, "torch"), "2.11.0+cu130");
	cr_assert_str_eq(label(&s, "kineto_peak_allocated"), "3670016");
	cr_assert_str_eq(label(&s, "kineto_peak_reserved"), "20971520");
	cr_assert_str_eq(label(&s, "kineto_before_profile"), "1572864");
	cr_assert_null(label(&s, "allocator_source"));
	unlink(out);
}

/* The same profile gzip-compressed gives the same trace, byte for byte;
 * and two imports are identical (sorting never depends on qsort). */
Test(import_kineto, gzip_input_and_deterministic)
{
	char gz[64], a[64], b[64], err[512];
	th_tmpname(gz, sizeof gz, "kineto_gz");
	cr_assert_eq(th_sh("gzip -c %s > %s", FIXTURE, gz), 0);
	out_name(a, sizeof a);
	out_name(b, sizeof b);
	cr_assert_eq(import_kineto(FIXTURE, a, NULL, 0, NULL, err, sizeof err), 0, "%s", err);
	cr_assert_eq(import_kineto(gz, b, NULL, 0, NULL, err, sizeof err), 0, "%s", err);
	cr_assert_eq(th_sh("cmp -s %s %s", a, b), 0, "gzip input changes the trace");
	cr_assert_eq(import_kineto(FIXTURE, b, NULL, 0, NULL, err, sizeof err), 0, "%s", err);
	cr_assert_eq(th_sh("cmp -s %s %s", a, b), 0, "two imports differ");
	unlink(gz);
	unlink(a);
	unlink(b);
}

/* The command: --label (repeatable, replaces the importer's of the same
 * key), a gzip output that validates and replays under pytorch with the
 * profile's peak and two steps. */
Test(import_kineto, cli_labels_validate_and_replay)
{
	char out[64], so[64], se[64], args[512];
	struct seen s;
	th_tmpname(out, sizeof out, "kineto_cli");
	strcat(out, ".trace.gz");
	th_tmpname(so, sizeof so, "kineto_so");
	th_tmpname(se, sizeof se, "kineto_se");
	snprintf(args, sizeof args, "import kineto %s -o %s --label batch=8 --label model=tiny "
		 "--label source=mine", FIXTURE, out);
	cr_assert_eq(th_run(NULL, so, se, args), 0, "%s", th_slurp(se));
	char *msg = th_slurp(se);
	cr_assert(strstr(msg, "6 allocs, 4 frees; 5 kernels"), "%s", msg);
	cr_assert(strstr(msg, "live before the profile started: 1.50 MiB in 2 allocations"), "%s",
		  msg);
	free(msg);
	read_trace(out, &s);
	cr_assert_str_eq(label(&s, "batch"), "8");
	cr_assert_str_eq(label(&s, "model"), "tiny");
	cr_assert_str_eq(label(&s, "source"), "mine", "the user's label wins");

	snprintf(args, sizeof args, "trace validate %s", out);
	cr_assert_eq(th_run(NULL, so, se, args), 0, "%s", th_slurp(se));
	snprintf(args, sizeof args, "run %s --policy pytorch --json --no-db --quiet", out);
	cr_assert_eq(th_run(NULL, so, se, args), 0, "%s", th_slurp(se));
	char *json = th_slurp(so);
	cr_assert(strstr(json, "\"allocs\":6,\"frees\":4"), "%s", json);
	cr_assert(strstr(json, "\"peak_allocated\":3670016"), "the profile's own peak: %s", json);
	cr_assert(strstr(json, "\"step_count\":2"), "%s", json);
	free(json);
	snprintf(args, sizeof args, "run %s --policy optimal --no-db --quiet", out);
	cr_assert_eq(th_run(NULL, so, se, args), 0, "%s", th_slurp(se));
	unlink(out);
	unlink(so);
	unlink(se);
}

/* Every failure: exit 1 from the command, the file named, no output. */
static void expect_fail(const char *in, const char *needle)
{
	char out[64], so[64], se[64], args[512];
	out_name(out, sizeof out);
	th_tmpname(so, sizeof so, "kineto_so");
	th_tmpname(se, sizeof se, "kineto_se");
	snprintf(args, sizeof args, "import kineto %s -o %s", in, out);
	cr_assert_eq(th_run(NULL, so, se, args), 1, "%s", th_slurp(se));
	char *msg = th_slurp(se);
	cr_assert(strstr(msg, in), "names the file: %s", msg);
	cr_assert(strstr(msg, needle), "'%s' lacks '%s'", msg, needle);
	cr_assert_neq(access(out, F_OK), 0, "no output after an error");
	free(msg);
	unlink(so);
	unlink(se);
}

Test(import_kineto, profile_without_cuda_memory_events)
{
	expect_fail("tests/data/kineto_no_memory.json",
		    "the profile has no CUDA memory events: record it with "
		    "torch.profiler.profile(profile_memory=True");
	expect_fail("tests/data/kineto_cpu_only.json", "only 2 CPU memory events");
}

Test(import_kineto, truncated_garbage_and_not_a_trace)
{
	char cut[64], cutgz[64], junk[64], obj[64], bad[64], after[64];
	/* cut in the middle of an event, as a copy that stopped would */
	th_tmpname(cut, sizeof cut, "kineto_cut");
	cr_assert_eq(th_sh("head -c 4000 %s > %s", FIXTURE, cut), 0);
	expect_fail(cut, "the JSON ends early");
	/* a gzip stream that stops */
	th_tmpname(cutgz, sizeof cutgz, "kineto_cutgz");
	cr_assert_eq(th_sh("gzip -c %s | head -c 1500 > %s", FIXTURE, cutgz), 0);
	expect_fail(cutgz, "truncated gzip stream");
	th_tmpfile(junk, sizeof junk, "kineto_junk", "hello, this is not JSON\n");
	expect_fail(junk, ":1: not JSON");
	th_tmpfile(obj, sizeof obj, "kineto_obj", "{\"schemaVersion\": 1, \"events\": []}\n");
	expect_fail(obj, "no \"traceEvents\"");
	th_tmpfile(bad, sizeof bad, "kineto_bad",
		   "{\"traceEvents\": [\n{\"ph\": \"X\"}\n{\"ph\": \"i\"}\n]}\n");
	expect_fail(bad, ":3: bad JSON: expected ',' or ']'");
	th_tmpfile(after, sizeof after, "kineto_after", "{\"traceEvents\": []} trailing\n");
	expect_fail(after, "more after the top-level value");
	expect_fail("/nonexistent/profile.json", "cannot open");
	unlink(cut);
	unlink(cutgz);
	unlink(junk);
	unlink(obj);
	unlink(bad);
	unlink(after);
}

/* A [memory] event missing its fields is named by its line. */
Test(import_kineto, malformed_memory_event)
{
	char in[64];
	th_tmpfile(in, sizeof in, "kineto_nobytes",
		   "{\"traceEvents\": [\n"
		   "{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 1.0,\n"
		   " \"args\": {\"Device Type\": 1, \"Addr\": 4096}}\n]}\n");
	expect_fail(in, ":2: a [memory] event without an integer \"Bytes\"");
	unlink(in);
}

/* An OOM, a free the profile lost (an allocation at a live address),
 * another device's events, the array form of a Chrome trace, \u escapes
 * and a duplicated ProfilerStep (cpu_op and user_annotation). */
Test(import_kineto, oom_lost_free_other_device_array_form)
{
	char in[64], out[64], err[512];
	struct import_kineto_stats st;
	struct seen s;
	th_tmpfile(in, sizeof in, "kineto_misc",
		   "[\n"
		   "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"ProfilerStep#3\", \"ts\": 0.5, "
		   "\"dur\": 100, \"tid\": 1},\n"
		   "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#3\", "
		   "\"ts\": 0.5, \"dur\": 100, \"tid\": 1},\n"
		   "{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 1, \"args\": {\"Device Type\": 1, "
		   "\"Device Id\": 0, \"Addr\": 8192, \"Bytes\": 512, \"Total Allocated\": 512}},\n"
		   "{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 2, \"args\": {\"Device Type\": 1, "
		   "\"Device Id\": 0, \"Addr\": 8192, \"Bytes\": 1024, \"Total Allocated\": 1536}},\n"
		   "{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 2.5, \"args\": {\"Device Type\": 1, "
		   "\"Device Id\": 1, \"Addr\": 8192, \"Bytes\": 1024}},\n"
		   "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\\u00e9rnel \\ud83d\\ude00\", "
		   "\"ts\": 3, \"dur\": 1, \"args\": {\"device\": 0, \"stream\": 7}},\n"
		   "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"other\", \"ts\": 3, \"dur\": 1, "
		   "\"args\": {\"device\": 1, \"stream\": 7}},\n"
		   "{\"ph\": \"i\", \"name\": \"[OutOfMemory]\", \"ts\": 4, \"args\": {\"Device Type\": 1, "
		   "\"Device Id\": 0, \"Bytes\": 1073741824}}\n"
		   "]\n");
	out_name(out, sizeof out);
	cr_assert_eq(import_kineto(in, out, NULL, 0, &st, err, sizeof err), 0, "%s", err);
	read_trace(out, &s);
	cr_assert_eq(st.device, 0, "the lowest device id");
	cr_assert_eq(st.other_device, 2);
	cr_assert_eq(st.relive, 1);
	cr_assert_eq(s.counts[TREC_ALLOC], 2);
	cr_assert_eq(s.counts[TREC_FREE], 1, "the lost free, written before the new allocation");
	cr_assert_eq(s.counts[TREC_KERNEL], 1);
	cr_assert_eq(s.counts[TREC_CONTROL], 1);
	cr_assert_eq(s.oom.u.control.kind, TCTL_OOM);
	cr_assert_eq(s.oom.u.control.bytes, 1073741824);
	cr_assert_eq(s.nranges, 1, "one range per step");
	cr_assert_str_eq(s.ranges[0], "step 3");
	cr_assert_eq(st.before_allocs, 0, "nothing live before: Total Allocated starts at 512");
	cr_assert_null(label(&s, "torch"));
	cr_assert_eq(th_sh("'%s' trace cat %s | grep -q 'k\xc3\xa9rnel \xf0\x9f\x98\x80'", th_bin(),
			   out), 0, "the \\u escapes decode to UTF-8");
	unlink(in);
	unlink(out);
}

/* Kineto's microseconds with three decimals are nanoseconds exactly. */
Test(import_kineto, microseconds_to_nanoseconds)
{
	static const struct { const char *lit; int ok; int64_t ns; } cases[] = {
		{"100.000", 1, 100000}, {"6149.123", 1, 6149123}, {"12", 1, 12000},
		{"0.0015", 1, 2}, {"0.0014", 1, 1}, {"-3.25", 1, -3250}, {"1e3", 1, 1000000},
		{"1.5E-3", 1, 2}, {"9223372036854775.807", 1, INT64_MAX}, {"9223372036854775.808", 0, 0},
		{"99999999999999999999", 0, 0}, {"1759300000000.5", 1, 1759300000000500},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char path[64], text[96], err[256];
		snprintf(text, sizeof text, "[%s]", cases[i].lit);
		th_tmpfile(path, sizeof path, "kineto_num", text);
		struct kj_reader *r = kj_open(path, err, sizeof err);
		struct kj_doc d = {0};
		int64_t ns = 0;
		cr_assert_not_null(r, "%s", err);
		cr_assert_eq(kj_parse(r, &d), 0, "%s", kj_error(r));
		int rc = kj_us_to_ns(&d, kj_at(&d, &d.nodes[0], 0), &ns);
		cr_assert_eq(rc == 0, cases[i].ok, "%s", cases[i].lit);
		if (cases[i].ok)
			cr_assert_eq(ns, cases[i].ns, "%s: %lld", cases[i].lit, (long long)ns);
		kj_doc_free(&d);
		kj_close(r);
		unlink(path);
	}
}

/* The reader's tree: keys, nesting, literals, the lenient non-finite
 * numbers, and the errors it names. */
Test(import_kineto, json_reader)
{
	char path[64], err[256];
	th_tmpfile(path, sizeof path, "kineto_json",
		   "{\"a\": [1, -2, 3.5e1, NaN], \"b\": {\"c\": \"x\\\"y\\\\z\\/\", \"d\": null},"
		   " \"e\": true, \"f\": false, \"g\": \"18446744073709551615\"}");
	struct kj_reader *r = kj_open(path, err, sizeof err);
	struct kj_doc d = {0};
	int64_t v;
	cr_assert_not_null(r, "%s", err);
	cr_assert_eq(kj_parse(r, &d), 0, "%s", kj_error(r));
	const struct kj_node *root = &d.nodes[0], *a = kj_get(&d, root, "a");
	cr_assert_eq(kj_int(&d, kj_at(&d, a, 1), &v), 0);
	cr_assert_eq(v, -2);
	cr_assert_eq(kj_int(&d, kj_at(&d, a, 2), &v), 0);
	cr_assert_eq(v, 35);
	cr_assert_eq(kj_at(&d, a, 3)->type, KJ_NUM);
	cr_assert_neq(kj_int(&d, kj_at(&d, a, 3), &v), 0, "NaN is no integer");
	cr_assert_null(kj_at(&d, a, 4));
	cr_assert_str_eq(kj_text(&d, kj_get(&d, kj_get(&d, root, "b"), "c")), "x\"y\\z/");
	cr_assert_eq(kj_get(&d, kj_get(&d, root, "b"), "d")->type, KJ_NULL);
	cr_assert_eq(kj_get(&d, root, "e")->type, KJ_TRUE);
	cr_assert_eq(kj_get(&d, root, "f")->type, KJ_FALSE);
	cr_assert_eq(kj_int(&d, kj_get(&d, root, "g"), &v), 0, "a quoted id");
	cr_assert_eq((uint64_t)v, UINT64_MAX);
	cr_assert_null(kj_get(&d, root, "zz"));
	kj_doc_free(&d);
	kj_close(r);
	unlink(path);

	static const struct { const char *text, *msg; } bad[] = {
		{"[1, 2", ":1: the JSON ends early"},
		{"[\"abc", ":1: the JSON ends early"},
		{"[tru", ":1: the JSON ends early"},
		{"[\"a\\q\"]", "unknown escape"},
		{"[\"a\nb\"]", ":1: bad JSON: a control character"},
		{"[01]", "unexpected '01'"},
		{"{\"a\" 1}", "expected ':'"},
		{"[1,,2]", "expected a value"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		th_tmpfile(path, sizeof path, "kineto_json", bad[i].text);
		r = kj_open(path, err, sizeof err);
		cr_assert_not_null(r, "%s", err);
		memset(&d, 0, sizeof d);
		cr_assert_eq(kj_parse(r, &d), -1, "%s parsed", bad[i].text);
		cr_assert(strstr(kj_error(r), bad[i].msg), "'%s': '%s' lacks '%s'", bad[i].text,
			  kj_error(r), bad[i].msg);
		cr_assert(strstr(kj_error(r), path), "names the file: %s", kj_error(r));
		kj_doc_free(&d);
		kj_close(r);
		unlink(path);
	}

	/* nesting deeper than the limit is refused, not a stack overflow */
	char deep[KJ_MAX_DEPTH * 2 + 8];
	memset(deep, '[', KJ_MAX_DEPTH + 2);
	deep[KJ_MAX_DEPTH + 2] = '\0';
	th_tmpfile(path, sizeof path, "kineto_json", deep);
	r = kj_open(path, err, sizeof err);
	cr_assert_eq(kj_skip(r), -1);
	cr_assert(strstr(kj_error(r), "nested deeper"), "%s", kj_error(r));
	kj_close(r);
	unlink(path);
}

/* The real profile shipped in traces/kineto/ (torch 2.11, ResNet-18 batch
 * 16 on the H200, capture/torch/profile_recipe.sh): the import has the
 * capture's allocations one for one, and its pytorch replay reaches the
 * real allocator's own peak that the profile states (Total Allocated). */
Test(import_kineto, real_profile_against_capture)
{
	const char *prof = "traces/kineto/kineto-resnet18-b16.json.gz";
	const char *cap = "traces/kineto/capture-resnet18-b16.trace.gz";
	if (access(prof, R_OK) != 0 || access(cap, R_OK) != 0)
		cr_skip_test("%s or %s not here", prof, cap);
	char out[64], so[64], se[64], args[512];
	th_tmpname(out, sizeof out, "kineto_real");
	strcat(out, ".trace.gz");
	th_tmpname(so, sizeof so, "kineto_so");
	th_tmpname(se, sizeof se, "kineto_se");
	snprintf(args, sizeof args, "import kineto %s -o %s --label batch=16", prof, out);
	cr_assert_eq(th_run(NULL, so, se, args), 0, "%s", th_slurp(se));
	snprintf(args, sizeof args, "run %s --policy pytorch --json --no-db --quiet", out);
	cr_assert_eq(th_run(NULL, so, se, args), 0, "%s", th_slurp(se));
	char *json = th_slurp(so);
	unsigned long long allocs = 0, peak = 0, steps = 0;
	const char *p = strstr(json, "\"allocs\":");
	cr_assert(p && sscanf(p, "\"allocs\":%llu", &allocs) == 1, "%s", json);
	p = strstr(json, "\"peak_allocated\":");
	cr_assert(p && sscanf(p, "\"peak_allocated\":%llu", &peak) == 1, "%s", json);
	p = strstr(json, "\"step_count\":");
	cr_assert(p && sscanf(p, "\"step_count\":%llu", &steps) == 1, "%s", json);
	free(json);
	/* the profile's own figure, label kineto_peak_allocated */
	const unsigned long long real = 2900753408ull;
	double err = ((double)peak - (double)real) / (double)real;
	cr_assert(err > -0.001 && err < 0.001, "peak allocated %llu vs the profile's %llu", peak, real);
	cr_assert_eq(steps, 5);
	snprintf(args, sizeof args, "run %s --policy pytorch --allocator-source libc10_cuda --json "
		 "--no-db --quiet", cap);
	cr_assert_eq(th_run(NULL, so, se, args), 0, "%s", th_slurp(se));
	json = th_slurp(so);
	unsigned long long cap_allocs = 0;
	p = strstr(json, "\"allocs\":");
	cr_assert(p && sscanf(p, "\"allocs\":%llu", &cap_allocs) == 1, "%s", json);
	free(json);
	cr_assert_eq(allocs, cap_allocs, "kineto %llu allocations, the capture %llu", allocs,
		     cap_allocs);
	unlink(out);
	unlink(so);
	unlink(se);
}
