/*
 * test_xla_requests.c: a JAX platform-allocator capture read as XLA's
 * request stream (traces/xla_requests.h, sim_options.xla_requests): whole
 * 2 MiB granules at their lower bound, never-freed allocations beside the
 * policy; chosen by the labels, on and off by option; `run` agrees
 * with `validate jax-truth` on the shipped captures; and XLA's own sizes
 * put into a capture from its allocator log (traces/xla_sizes.h).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/engine.h"
#include "../traces/xla_requests.h"
#include "../traces/xla_sizes.h"
#include "helpers.h"

#define MIB (1024ull * 1024)
#define BFC_GROWTH "allow_growth:true,memory_limit:100GiB"

/*
 * A capture in miniature: XLA asks for three small buffers and one of
 * 2-4 MiB (the platform allocator maps 2, 2, 2 and 4 MiB), cuBLAS takes a
 * 64 MiB workspace it never frees; a pinned staging buffer on the way.
 * LABELS 0: no labels. ODD: one XLA request of another size (1000 B).
 */
static void xla_trace(char *path, size_t len, int labels, int odd)
{
	char text[2048];
	snprintf(text, sizeof text,
		 "gpumemsim-trace 1\n"
		 "H total_memory %llu\n"
		 "%s"
		 "S 0 /x/jax_plugins/xla_cuda13/xla_cuda_plugin.so\n"
		 "S 1 /y/libcublas.so.13\n"
		 "a 10 0x200000 2097152 - 3 0 0 0\n"
		 "a 20 0x400000 2097152 - 3 0 0 0\n"
		 "a 30 0x600000 %s - 3 0 0 0\n"
		 "a 35 0x7f0000000000 4194304 - 2 0 0 0\n"
		 "a 40 0x800000 4194304 - 3 0 0 0\n"
		 "a 50 0x4000000 67108864 - 3 0 0 1\n"
		 "y 55 60 context - 0\n"
		 "f 60 0x200000 2097152 - 3 0 0 -\n"
		 "f 61 0x7f0000000000 4194304 - 2 0 0 -\n"
		 "f 70 0x800000 4194304 - 3 0 0 -\n"
		 "f 80 0x400000 2097152 - 3 0 0 -\n"
		 "f 90 0x600000 %s - 3 0 0 -\n"
		 "end 12 0\n",
		 (unsigned long long)(80ull << 30),
		 labels ? "L workload=jax\nL alloc=platform\nL batch=8\n" : "",
		 odd ? "1000" : "2097152", odd ? "1000" : "2097152");
	th_tmpfile(path, len, "xla_requests", text);
}

static void replay(const char *path, const char *policy, enum sim_xla_mode x,
		   enum sim_foreign_mode f, struct sim_result *r)
{
	char err[512];
	struct sim_options o = {.trace_path = path, .policy = policy_find(policy),
				.conf = strcmp(policy, "bfc") ? NULL : BFC_GROWTH,
				.xla_requests = x, .foreign = f};
	cr_assert_not_null(o.policy, "%s", policy);
	cr_assert_eq(sim_run(&o, r, err, sizeof err), 0, "%s", err);
}

Test(xla_requests, scan_finds_never_freed_and_granules)
{
	char path[128], err[256];
	struct xla_requests x;
	xla_trace(path, sizeof path, 1, 0);
	struct trace_reader *r = trace_reader_open(path);
	cr_assert(r && trace_reader_status(r) == 0);
	cr_assert(xla_requests_label(trace_reader_header(r)));
	cr_assert_eq(xla_requests_scan(r, &x, err, sizeof err), 0, "%s", err);
	cr_assert_eq(x.kept, 4);
	cr_assert_eq(x.outside_n, 1);
	cr_assert_eq(x.outside_bytes, 64 * MIB);
	cr_assert(x.granule);
	cr_assert_eq(x.lowered, 4);
	cr_assert_eq(x.lowered_bytes, 4 * (2 * MIB - 1));
	cr_assert_eq(x.orphans, 0);
	/* the records: 2 MiB -> 1 B, 4 MiB -> 2 MiB + 1 B, the workspace
	 * outside, pinned host memory untouched */
	cr_assert_eq(trace_reader_rewind(r), 0);
	struct trace_rec rec;
	uint64_t want[] = {1, 1, 1, 4 * MIB, 2 * MIB + 1, 64 * MIB};
	enum xla_req_verdict vw[] = {XLA_REQ_KEEP, XLA_REQ_KEEP, XLA_REQ_KEEP, XLA_REQ_KEEP,
				     XLA_REQ_KEEP, XLA_REQ_OUTSIDE};
	size_t na = 0;
	while (trace_reader_next(r, &rec) == TRACE_OK) {
		if (rec.type != TREC_ALLOC)
			continue;
		cr_assert_lt(na, 6);
		cr_assert_eq(xla_requests_apply(&x, &rec), vw[na], "alloc %zu", na);
		cr_assert_eq(rec.u.mem.bytes, want[na], "alloc %zu: %" PRIu64, na, rec.u.mem.bytes);
		na++;
	}
	cr_assert_eq(na, 6);
	xla_requests_free(&x);
	trace_reader_close(r);
	unlink(path);
}

/* BFC with growth: lowered, the three small buffers share the 2 MiB region
 * and the 2-4 MiB one takes the 4 MiB next (6 MiB); as captured, 2 + 4 + 8
 * MiB for XLA's four and a 64 MiB region for cuBLAS's workspace (78 MiB). */
Test(xla_requests, bfc_with_and_without)
{
	char path[128];
	struct sim_result r;
	xla_trace(path, sizeof path, 1, 0);

	replay(path, "bfc", SIM_XLA_AUTO, SIM_FOREIGN_AUTO, &r);
	cr_assert(r.xla_applied);
	cr_assert_eq(r.peak_reserved, 6 * MIB);
	cr_assert_eq(r.device_allocs, 2);
	cr_assert_eq(r.allocs, 4);
	cr_assert_eq(r.xla_lowered, 4);
	cr_assert_eq(r.xla_outside, 1);
	cr_assert(r.foreign_routed);
	cr_assert_str_eq(r.allocator_source, SIM_XLA_SOURCE);
	cr_assert_eq(r.peak_foreign, 64 * MIB);
	cr_assert_eq(r.device_peak, 70 * MIB);
	sim_result_free(&r);

	replay(path, "bfc", SIM_XLA_OFF, SIM_FOREIGN_AUTO, &r);
	cr_assert(!r.xla_applied);
	cr_assert(!r.foreign_routed);
	cr_assert_eq(r.peak_reserved, 78 * MIB);
	cr_assert_eq(r.device_allocs, 4);
	cr_assert_eq(r.allocs, 5);
	sim_result_free(&r);

	/* --foreign policy: still lowered, the workspace served by the policy
	 * (2 + 4 + 64 MiB: it doubles the next region size to fit) */
	replay(path, "bfc", SIM_XLA_AUTO, SIM_FOREIGN_POLICY, &r);
	cr_assert(r.xla_applied);
	cr_assert(!r.foreign_routed);
	cr_assert_eq(r.allocs, 5);
	cr_assert_eq(r.peak_reserved, 70 * MIB);
	sim_result_free(&r);
	unlink(path);
}

/* Every policy sees the same stream, the engine's pre-pass (optimal) too. */
Test(xla_requests, other_policies_and_prepass)
{
	char path[128];
	struct sim_result r;
	xla_trace(path, sizeof path, 1, 0);
	replay(path, "optimal", SIM_XLA_AUTO, SIM_FOREIGN_AUTO, &r);
	cr_assert_eq(r.allocs, 4);
	cr_assert_eq(r.peak_requested, 3 + 2 * MIB + 1);
	cr_assert_eq(r.xla_outside, 1);
	sim_result_free(&r);
	replay(path, "cuda_malloc", SIM_XLA_AUTO, SIM_FOREIGN_AUTO, &r);
	cr_assert_eq(r.peak_requested, 3 + 2 * MIB + 1);
	sim_result_free(&r);
	unlink(path);
}

Test(xla_requests, chosen_by_labels_forced_by_option)
{
	char path[128];
	struct sim_result r;
	xla_trace(path, sizeof path, 0, 0);
	replay(path, "bfc", SIM_XLA_AUTO, SIM_FOREIGN_AUTO, &r);
	cr_assert(!r.xla_applied);
	cr_assert_eq(r.peak_reserved, 78 * MIB);
	sim_result_free(&r);
	replay(path, "bfc", SIM_XLA_ON, SIM_FOREIGN_AUTO, &r);
	cr_assert(r.xla_applied);
	cr_assert_eq(r.peak_reserved, 6 * MIB);
	sim_result_free(&r);
	unlink(path);
}

/* One request not whole granules: the sizes were not mapped, nothing is
 * lowered; the never-freed rule still holds. */
Test(xla_requests, odd_size_keeps_sizes)
{
	char path[128];
	struct sim_result r;
	xla_trace(path, sizeof path, 1, 1);
	replay(path, "bfc", SIM_XLA_AUTO, SIM_FOREIGN_AUTO, &r);
	cr_assert(r.xla_applied);
	cr_assert_eq(r.xla_lowered, 0);
	cr_assert_eq(r.xla_outside, 1);
	cr_assert_eq(r.allocs, 4);
	cr_assert_eq(r.peak_requested, 2 * 2 * MIB + 1000 + 4 * MIB);
	sim_result_free(&r);
	unlink(path);
}

/* The CLI: run's option and its output, text and JSON. */
Test(xla_requests, cli_run_option)
{
	char path[128], cmd[512], out[8192];
	xla_trace(path, sizeof path, 1, 0);
	snprintf(cmd, sizeof cmd, "%s run %s --policy bfc --conf " BFC_GROWTH " --no-db --json",
		 th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"peak_reserved\":6291456"), "%s", out);
	cr_assert(strstr(out, "\"xla_requests\":{\"lowered\":4,\"lowered_bytes\":8388604,"
			      "\"outside\":1,\"outside_bytes\":67108864}"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s run %s --policy bfc --conf " BFC_GROWTH
		 " --no-db --json --xla-requests off", th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"peak_reserved\":81788928"), "%s", out);
	cr_assert_null(strstr(out, "\"xla_requests\":"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s run %s --policy bfc --conf " BFC_GROWTH " --no-db",
		 th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "xla requests     4 read as whole 2 MiB granules"), "%s", out);
	cr_assert(strstr(out, "1 allocations never freed: not XLA's"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s run %s --policy bfc --no-db --xla-requests maybe",
		 th_bin(), path);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	cr_assert(strstr(out, "--xla-requests 'maybe': expected auto, on or off"), "%s", out);
	unlink(path);
}

/* Plain `run --policy bfc` of the shipped JAX captures gives the pool
 * `validate jax-truth` gives (same stream, same settings). */
Test(xla_requests, run_agrees_with_validate)
{
	static char val[16384], out[65536];
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s validate jax-truth traces/jax --json", th_bin());
	cr_assert_eq(th_capture(cmd, val, sizeof val), 0, "%s", val);
	const char *batches[] = {"8", "64", "256"};
	for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
		char key[64], want[64];
		snprintf(key, sizeof key, "\"run\":\"jax-resnet-b%s\"", batches[i]);
		const char *row = strstr(val, key);
		cr_assert_not_null(row, "%s", key);
		const char *sim = strstr(row, "\"peak_pool_bytes_sim\":");
		const char *lim = strstr(row, "\"bytes_limit\":");
		cr_assert(sim && lim, "%s", row);
		unsigned long long pool = strtoull(sim + 22, NULL, 10);
		unsigned long long limit = strtoull(lim + 14, NULL, 10);
		snprintf(cmd, sizeof cmd, "%s run traces/jax/jax-resnet-b%s.trace.gz --policy bfc "
			 "--conf preset:jax_growth,memory_limit:%llu --no-db --json", th_bin(),
			 batches[i], limit);
		cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
		snprintf(want, sizeof want, "\"peak_reserved\":%llu,", pool);
		cr_assert(strstr(out, want), "b%s: want %s", batches[i], want);
		cr_assert(strstr(out, "\"xla_requests\":{"), "%s", batches[i]);
	}
}

/* ---- XLA's own sizes from its allocator log (traces/xla_sizes.h) ---- */

#define LOG_LINE(ptr, req, pad) \
	"I1203 22:15:03.281217    1114 cuda_device_allocator.cc:279] [0] Allocated ptr=" ptr \
	" requested size: " req " padded size: " pad " granularity: 2097152\n"

/* xla_trace's four XLA allocations as the run's log names them, among lines
 * of other kinds; the library's workspace and the pinned buffer are not in it. */
static void xla_log(char *path, size_t len, const char *third)
{
	char text[2048];
	snprintf(text, sizeof text,
		 "I1203 22:15:03.2 1114 se_gpu_pjrt_client.cc:1369] Using platform allocator.\n"
		 LOG_LINE("0x200000", "4", "2097152")
		 "train_jax: platform b8 step 0 5164.0 ms loss 3.4784\n"
		 LOG_LINE("0x400000", "2000000", "2097152")
		 "%s"
		 LOG_LINE("0x800000", "3145728", "4194304"), third);
	th_tmpfile(path, len, "xla_log", text);
}

static uint64_t mem_bytes(const char *path, enum trace_rec_type type, uint64_t addr)
{
	struct trace_reader *r = trace_reader_open(path);
	struct trace_rec rec;
	uint64_t b = UINT64_MAX;
	cr_assert(r && trace_reader_status(r) == 0, "%s", path);
	while (trace_reader_next(r, &rec) == TRACE_OK)
		if (rec.type == type && rec.u.mem.addr == addr)
			b = rec.u.mem.bytes;
	trace_reader_close(r);
	return b;
}

Test(xla_sizes, log_sizes_go_into_the_capture)
{
	char cap[128], log[128], out[160], err[512];
	struct xla_sizes_report rep;
	xla_trace(cap, sizeof cap, 1, 0);
	xla_log(log, sizeof log, LOG_LINE("0x600000", "300", "2097152"));
	snprintf(out, sizeof out, "%s.out", cap);
	cr_assert_eq(xla_sizes_transfer(cap, log, out, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.log_lines, 4);
	cr_assert_eq(rep.resized, 4);
	cr_assert_eq(rep.device_allocs, 5);
	cr_assert_eq(rep.unpaired_allocs, 1);
	cr_assert_eq(rep.bytes_before, 10 * MIB);
	cr_assert_eq(rep.bytes_after, 4 + 2000000 + 300 + 3145728);
	/* each allocation and its free at the requested size; the rest as captured */
	cr_assert_eq(mem_bytes(out, TREC_ALLOC, 0x200000), 4);
	cr_assert_eq(mem_bytes(out, TREC_FREE, 0x200000), 4);
	cr_assert_eq(mem_bytes(out, TREC_FREE, 0x600000), 300);
	cr_assert_eq(mem_bytes(out, TREC_ALLOC, 0x800000), 3145728);
	cr_assert_eq(mem_bytes(out, TREC_ALLOC, 0x4000000), 64 * MIB);
	cr_assert_eq(mem_bytes(out, TREC_ALLOC, 0x7f0000000000), 4 * MIB);
	/* the label, and a replay that no longer lowers anything */
	struct trace_reader *r = trace_reader_open(out);
	cr_assert(r && trace_reader_status(r) == 0);
	const struct trace_header *h = trace_reader_header(r);
	int seen = 0;
	for (size_t i = 0; i < h->nlabels; i++)
		seen |= !strcmp(h->labels[i].key, "xla_sizes") && !strcmp(h->labels[i].value, "4");
	cr_assert(seen);
	struct xla_requests x;
	cr_assert_eq(xla_requests_scan(r, &x, err, sizeof err), 0, "%s", err);
	cr_assert_eq(x.granule, 0);
	cr_assert_eq(x.kept, 4);
	cr_assert_eq(x.outside_n, 1);
	xla_requests_free(&x);
	trace_reader_close(r);
	char cmd[512], msg[1024];
	snprintf(cmd, sizeof cmd, "%s trace validate %s", th_bin(), out);
	cr_assert_eq(th_capture(cmd, msg, sizeof msg), 0, "%s", msg);
	/* a second time: refused, and the output of the first is kept */
	char again[200];
	snprintf(again, sizeof again, "%s.again", cap);
	cr_assert_eq(xla_sizes_transfer(out, log, again, &rep, err, sizeof err), -1);
	cr_assert(strstr(err, "already has the label xla_sizes"), "%s", err);
	cr_assert_eq(access(again, F_OK), -1);
	unlink(cap);
	unlink(log);
	unlink(out);
}

Test(xla_sizes, refuses_a_log_that_does_not_fit)
{
	char cap[128], log[128], out[160], err[512], want[200];
	xla_trace(cap, sizeof cap, 1, 0);
	snprintf(out, sizeof out, "%s.out", cap);
	/* a line without its sizes: named by file and line */
	xla_log(log, sizeof log, "I1203 x.cc:279] [0] Allocated ptr=0x600000 requested size: ?\n");
	cr_assert_eq(xla_sizes_transfer(cap, log, out, NULL, err, sizeof err), -1);
	snprintf(want, sizeof want, "%s:5: an 'Allocated ptr=' line", log);
	cr_assert(strstr(err, want), "%s", err);
	unlink(log);
	/* another run's log: the padded size is not what CUPTI saw */
	xla_log(log, sizeof log, LOG_LINE("0x600000", "300", "4194304"));
	cr_assert_eq(xla_sizes_transfer(cap, log, out, NULL, err, sizeof err), -1);
	snprintf(want, sizeof want, "%s:10: the allocation at 0x600000 is 2097152 B", cap);
	cr_assert(strstr(err, want), "%s", err);
	unlink(log);
	/* a request the capture never saw */
	xla_log(log, sizeof log, LOG_LINE("0x600000", "300", "2097152")
		LOG_LINE("0xa00000", "8", "2097152"));
	cr_assert_eq(xla_sizes_transfer(cap, log, out, NULL, err, sizeof err), -1);
	cr_assert(strstr(err, "1 of the log's 5 allocations have no allocation"), "%s", err);
	cr_assert(strstr(err, "ptr 0xa00000"), "%s", err);
	unlink(log);
	/* no such lines at all */
	th_tmpfile(log, sizeof log, "xla_log", "just the program's output\n");
	cr_assert_eq(xla_sizes_transfer(cap, log, out, NULL, err, sizeof err), -1);
	cr_assert(strstr(err, "TF_CPP_VMODULE=cuda_device_allocator=3"), "%s", err);
	cr_assert_eq(access(out, F_OK), -1);
	/* the command line: --log is required and only for xla-sizes */
	char cmd[512], msg[2048];
	snprintf(cmd, sizeof cmd, "%s import xla-sizes %s -o %s", th_bin(), cap, out);
	cr_assert_eq(th_capture(cmd, msg, sizeof msg), 2, "%s", msg);
	cr_assert(strstr(msg, "--log LOG is required"), "%s", msg);
	snprintf(cmd, sizeof cmd, "%s import kineto %s --log %s -o %s", th_bin(), cap, log, out);
	cr_assert_eq(th_capture(cmd, msg, sizeof msg), 2, "%s", msg);
	cr_assert(strstr(msg, "--log is for xla-sizes"), "%s", msg);
	unlink(log);
	unlink(cap);
}

/* A capture cut short (no trailer): the log's lines past its end are
 * counted, not refused, and the output stays marked incomplete. */
Test(xla_sizes, capture_cut_short)
{
	char cap[128], log[128], out[160], err[512];
	struct xla_sizes_report rep;
	xla_trace(cap, sizeof cap, 1, 0);
	char *text = th_slurp(cap);
	cr_assert_not_null(text);
	char *end = strstr(text, "end 12 0\n");
	cr_assert_not_null(end);
	*end = '\0';
	FILE *f = fopen(cap, "w");
	cr_assert_not_null(f);
	cr_assert(fputs(text, f) >= 0);
	cr_assert_eq(fclose(f), 0);
	free(text);
	xla_log(log, sizeof log, LOG_LINE("0x600000", "300", "2097152")
		LOG_LINE("0xa00000", "8", "2097152"));
	snprintf(out, sizeof out, "%s.out", cap);
	cr_assert_eq(xla_sizes_transfer(cap, log, out, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.resized, 4);
	cr_assert_eq(rep.unpaired_lines, 1);
	cr_assert_eq(mem_bytes(out, TREC_ALLOC, 0x600000), 300);
	struct trace_reader *r = trace_reader_open(out);
	cr_assert(r && trace_reader_status(r) == 0);
	struct trace_rec rec;
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK)
		;
	cr_assert_eq(trace_reader_trailer(r)->present, 0, "rc %d", rc);
	trace_reader_close(r);
	unlink(cap);
	unlink(log);
	unlink(out);
}
