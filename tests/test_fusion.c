/*
 * test_fusion.c: the fusion what-if (whatif/fusion.c) on synthetic traces
 * with kernel-to-buffer links whose answer is known, its rule files, and
 * `gpumemsim fuse` through the binary.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../whatif/fusion.h"
#include "../traces/trace.h"
#include "helpers.h"

#define MiB (1024ull * 1024)
#define PRODUCER "sm90_xmma_fprop_producer"
#define EW "_ZN2at6native29vectorized_elementwise_kernel_relu"
#define OTHER "gemm_reader"

struct tw {
	struct trace_writer *w;
	uint64_t t;
};

static void tw_open(struct tw *t, const char *path)
{
	char err[256];
	t->w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(t->w, "%s", err);
	struct trace_header h = {.version = 1, .producer = "test"};
	cr_assert_eq(trace_writer_header(t->w, &h), 0);
	t->t = 1000;
}

static void tw_mem(struct tw *t, int is_free, uint64_t addr, uint64_t bytes)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = is_free ? TREC_FREE : TREC_ALLOC;
	r.start = r.end = t->t;
	t->t += 10;
	r.u.mem.addr = addr;
	r.u.mem.bytes = bytes;
	r.u.mem.stream = TRACE_NO_STREAM;
	r.u.mem.kind = TMEM_DEVICE;
	r.u.mem.source = TRACE_NO_STRING;
	cr_assert_eq(trace_writer_record(t->w, &r), 0);
}

/* A kernel on STREAM of DUR ns touching the allocation ids in LINKS
 * (terminated by -1). */
static void tw_kernel_on(struct tw *t, uint32_t stream, const char *name, uint64_t dur,
			 const int *links)
{
	struct trace_rec r;
	uint64_t ids[TRACE_MAX_LINKS];
	memset(&r, 0, sizeof r);
	r.type = TREC_KERNEL;
	r.start = t->t;
	r.end = t->t + dur;
	t->t += dur + 10;
	r.u.kernel.stream = stream;
	r.u.kernel.name = trace_writer_intern(t->w, name);
	r.u.kernel.grid[0] = r.u.kernel.grid[1] = r.u.kernel.grid[2] = 1;
	r.u.kernel.block[0] = r.u.kernel.block[1] = r.u.kernel.block[2] = 1;
	for (int i = 0; links[i] >= 0; i++) {
		cr_assert_lt(r.u.kernel.nlinks, TRACE_MAX_LINKS);
		ids[r.u.kernel.nlinks++] = (uint64_t)links[i];
	}
	r.u.kernel.links = ids;
	cr_assert_eq(trace_writer_record(t->w, &r), 0);
}

static void tw_kernel(struct tw *t, const char *name, uint64_t dur, const int *links)
{
	tw_kernel_on(t, 7, name, dur, links);
}

static void tw_close(struct tw *t)
{
	char err[256];
	cr_assert_eq(trace_writer_close(&t->w, 1, 0, err, sizeof err), 0, "%s", err);
}

/*
 * A (id 0, 1 MiB) -> producer -> B (id 1, BYTES_B) -> element-wise -> C (id 2,
 * 2 MiB), then D (id 3) and a reader of C and D. THIRD: a third kernel
 * also reads B. OPAQUE: a kernel without links runs on another stream
 * while B is live.
 */
static void write_chain(const char *path, uint64_t bytes_b, int third, int opaque)
{
	struct tw t;
	tw_open(&t, path);
	tw_mem(&t, 0, 0x1000000, 1 * MiB);             /* A: id 0 */
	tw_mem(&t, 0, 0x2000000, bytes_b);             /* B: id 1 */
	tw_kernel(&t, PRODUCER, 1000, (int[]){0, 1, -1});
	if (opaque)
		tw_kernel_on(&t, 9, "opaque_cudnn_kernel", 100, (int[]){-1});
	tw_mem(&t, 0, 0x3000000, 2 * MiB);             /* C: id 2 */
	tw_kernel(&t, EW, 1000, (int[]){1, 2, -1});
	if (third)
		tw_kernel(&t, OTHER, 500, (int[]){1, -1});
	tw_mem(&t, 1, 0x2000000, bytes_b);             /* free B */
	tw_mem(&t, 0, 0x4000000, 1 * MiB);             /* D: id 3 */
	tw_kernel(&t, OTHER, 500, (int[]){2, 3, -1});
	tw_mem(&t, 1, 0x1000000, 1 * MiB);
	tw_mem(&t, 1, 0x3000000, 2 * MiB);
	tw_mem(&t, 1, 0x4000000, 1 * MiB);
	tw_close(&t);
}

struct readback {
	uint64_t nallocs, nfrees, nkernels, peak;
	char names[8][512];
	uint64_t dur[8];
	uint32_t nlinks[8];
	uint64_t links[8][8];
};

/* Read PATH back and check it is a consistent trace: every free matches a
 * live allocation, every link names an allocation made before it. */
static void read_back(const char *path, struct readback *rb)
{
	struct trace_reader *r = trace_reader_open(path);
	cr_assert_not_null(r);
	cr_assert_geq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	memset(rb, 0, sizeof *rb);
	uint64_t addr[64], bytes[64], live = 0;
	int alive[64] = {0};
	struct trace_rec rec;
	int st;
	while ((st = trace_reader_next(r, &rec)) == TRACE_OK) {
		if (rec.type == TREC_ALLOC) {
			cr_assert_lt(rb->nallocs, 64);
			addr[rb->nallocs] = rec.u.mem.addr;
			bytes[rb->nallocs] = rec.u.mem.bytes;
			alive[rb->nallocs] = 1;
			rb->nallocs++;
			live += rec.u.mem.bytes;
			if (live > rb->peak)
				rb->peak = live;
		} else if (rec.type == TREC_FREE) {
			uint64_t i;
			for (i = 0; i < rb->nallocs && !(alive[i] && addr[i] == rec.u.mem.addr); i++)
				;
			cr_assert_lt(i, rb->nallocs, "free of 0x%" PRIx64 " matches no live alloc",
				     rec.u.mem.addr);
			alive[i] = 0;
			live -= bytes[i];
			rb->nfrees++;
		} else if (rec.type == TREC_KERNEL) {
			uint64_t k = rb->nkernels++;
			cr_assert_lt(k, 8);
			snprintf(rb->names[k], sizeof rb->names[k], "%s",
				 trace_reader_string(r, rec.u.kernel.name));
			rb->dur[k] = rec.end - rec.start;
			rb->nlinks[k] = rec.u.kernel.nlinks;
			for (uint32_t l = 0; l < rec.u.kernel.nlinks && l < 8; l++) {
				rb->links[k][l] = rec.u.kernel.links[l];
				cr_assert_lt(rec.u.kernel.links[l], rb->nallocs,
					     "link to an allocation not made yet");
			}
		}
	}
	cr_assert_eq(st, TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert(trace_reader_trailer(r)->present);
	trace_reader_close(r);
}

static void builtin(struct fusion_rules *rs)
{
	char err[256];
	cr_assert_eq(fusion_rules_parse(fusion_builtin_rules, "builtin", rs, err, sizeof err), 0,
		     "%s", err);
}

Test(fusion, intermediate_is_eliminated_and_ids_renumbered)
{
	char in[64], out[64], err[512];
	struct fusion_rules rs;
	struct fusion_report rep;
	struct fusion_options o = {.bandwidth = 1e12};
	struct readback rb;
	th_tmpname(in, sizeof in, "fusion_in");
	th_tmpname(out, sizeof out, "fusion_out");
	write_chain(in, 4 * MiB, 0, 0);
	builtin(&rs);
	cr_assert_eq(fusion_apply(in, out, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.all.groups, 1);
	cr_assert_eq(rep.all.kernels_fused, 2);
	cr_assert_eq(rep.all.buffers_eliminated, 1);
	cr_assert_eq(rep.all.bytes_eliminated, 4 * MiB);
	/* A + B + C live at once before; A + C + D at most after */
	cr_assert_eq(rep.all.peak_before, 7 * MiB);
	cr_assert_eq(rep.all.peak_after, 4 * MiB);
	cr_assert_eq(rep.share[1].buffers_eliminated, 1, "elementwise_into_producer did it");
	cr_assert_eq(rep.alone[0].buffers_eliminated, 0, "the chain rule needs two element-wise");
	read_back(out, &rb);
	cr_assert_eq(rb.nallocs, 3);
	cr_assert_eq(rb.nfrees, 3);
	cr_assert_eq(rb.peak, rep.all.peak_after);
	cr_assert_eq(rb.nkernels, 2);
	cr_assert(strstr(rb.names[0], "fused[elementwise_into_producer]") != NULL, "%s", rb.names[0]);
	cr_assert(strstr(rb.names[0], PRODUCER) && strstr(rb.names[0], EW));
	/* fused touches A (0) and C (old 2, now 1); the reader C (1) and D (old 3, now 2) */
	cr_assert_eq(rb.nlinks[0], 2);
	cr_assert_eq(rb.links[0][0], 0);
	cr_assert_eq(rb.links[0][1], 1);
	cr_assert_eq(rb.nlinks[1], 2);
	cr_assert_eq(rb.links[1][0], 1);
	cr_assert_eq(rb.links[1][1], 2);
	fusion_report_free(&rep);
	fusion_rules_free(&rs);
	unlink(in);
	unlink(out);
}

Test(fusion, buffer_read_by_a_third_kernel_is_kept)
{
	char in[64], err[512];
	struct fusion_rules rs;
	struct fusion_report rep;
	struct fusion_options o = {0};
	th_tmpname(in, sizeof in, "fusion_third");
	write_chain(in, 4 * MiB, 1, 0);
	builtin(&rs);
	cr_assert_eq(fusion_apply(in, NULL, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.all.buffers_eliminated, 0);
	cr_assert_eq(rep.all.groups, 0);
	cr_assert_eq(rep.all.peak_after, rep.all.peak_before);
	cr_assert_eq(rep.all.ktime_after, rep.all.ktime_before);
	fusion_report_free(&rep);
	fusion_rules_free(&rs);
	unlink(in);
}

Test(fusion, opaque_kernel_protects_unless_links_are_trusted)
{
	char in[64], out[64], err[512];
	struct fusion_rules rs;
	struct fusion_report rep;
	struct fusion_options o = {0};
	struct readback rb;
	th_tmpname(in, sizeof in, "fusion_opaque");
	th_tmpname(out, sizeof out, "fusion_opaque_out");
	write_chain(in, 4 * MiB, 0, 1);
	builtin(&rs);
	/* the opaque kernel might read B: B stays */
	cr_assert_eq(fusion_apply(in, NULL, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.all.buffers_eliminated, 0);
	cr_assert_eq(rep.all.groups, 0);
	cr_assert_eq(rep.exposed_allocs, 2, "A and B are live at its launch");
	fusion_report_free(&rep);
	o.trust_links = 1;
	cr_assert_eq(fusion_apply(in, out, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.all.buffers_eliminated, 1);
	cr_assert_eq(rep.exposed_allocs, 0);
	read_back(out, &rb);
	cr_assert_eq(rb.nkernels, 3);
	cr_assert_eq(rb.nallocs, 3);
	fusion_report_free(&rep);
	fusion_rules_free(&rs);
	unlink(in);
	unlink(out);
}

Test(fusion, duration_model)
{
	char in[64], out[64], err[512];
	struct fusion_rules rs;
	struct fusion_report rep;
	struct fusion_options o = {.bandwidth = 1e13};   /* 10000 bytes per ns */
	struct readback rb;
	th_tmpname(in, sizeof in, "fusion_dur");
	th_tmpname(out, sizeof out, "fusion_dur_out");
	builtin(&rs);
	/* B = 5 MB: saves 2 * 5e6 / 1e4 = 1000 ns of the 2000 ns */
	write_chain(in, 5000000, 0, 0);
	cr_assert_eq(fusion_apply(in, out, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	read_back(out, &rb);
	cr_assert_eq(rb.dur[0], 1000);
	cr_assert_eq(rep.all.ktime_before, 2500);
	cr_assert_eq(rep.all.ktime_after, 1500);
	fusion_report_free(&rep);
	/* B = 64 MiB: the saving exceeds the sum; the floor is the memory-bound
	 * time of what the fused kernel still moves, A + C = 3 MiB */
	write_chain(in, 64 * MiB, 0, 0);
	cr_assert_eq(fusion_apply(in, out, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	read_back(out, &rb);
	cr_assert_eq(rb.dur[0], (3 * MiB + 5000) / 10000);
	cr_assert_eq(rep.all.ktime_after, 500 + (3 * MiB + 5000) / 10000);
	fusion_report_free(&rep);
	fusion_rules_free(&rs);
	unlink(in);
	unlink(out);
}

Test(fusion, chain_of_three_elementwise)
{
	char in[64], out[64], err[512];
	struct fusion_rules rs;
	struct fusion_report rep;
	struct fusion_options o = {.bandwidth = 1e12};
	struct readback rb;
	th_tmpname(in, sizeof in, "fusion_chain");
	th_tmpname(out, sizeof out, "fusion_chain_out");
	struct tw t;
	tw_open(&t, in);
	tw_mem(&t, 0, 0x100000, MiB);               /* 0: input */
	tw_mem(&t, 0, 0x200000, MiB);               /* 1 */
	tw_kernel(&t, EW "_a", 100, (int[]){0, 1, -1});
	tw_mem(&t, 0, 0x300000, MiB);               /* 2 */
	tw_kernel(&t, EW "_b", 100, (int[]){1, 2, -1});
	tw_mem(&t, 1, 0x200000, MiB);
	tw_mem(&t, 0, 0x400000, MiB);               /* 3: output */
	tw_kernel(&t, EW "_c", 100, (int[]){2, 3, -1});
	tw_mem(&t, 1, 0x300000, MiB);
	tw_kernel(&t, OTHER, 100, (int[]){0, 3, -1});
	tw_close(&t);
	builtin(&rs);
	cr_assert_eq(fusion_apply(in, out, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.all.groups, 1);
	cr_assert_eq(rep.all.kernels_fused, 3);
	cr_assert_eq(rep.all.buffers_eliminated, 2);
	cr_assert_eq(rep.alone[0].kernels_fused, 3, "elementwise_chain alone does the same");
	read_back(out, &rb);
	cr_assert_eq(rb.nallocs, 2);
	cr_assert_eq(rb.nkernels, 2);
	cr_assert(strstr(rb.names[0], "fused[elementwise_chain]") != NULL, "%s", rb.names[0]);
	cr_assert_eq(rb.links[0][0], 0);
	cr_assert_eq(rb.links[0][1], 1);
	cr_assert_eq(rb.links[1][1], 1);
	fusion_report_free(&rep);
	fusion_rules_free(&rs);
	unlink(in);
	unlink(out);
}

Test(fusion, peak_inside_nvtx_ranges)
{
	char in[64], err[512];
	struct fusion_rules rs;
	struct fusion_report rep;
	struct fusion_options o = {.peak_range = "step [1-9]*"};
	th_tmpname(in, sizeof in, "fusion_range");
	struct tw t;
	tw_open(&t, in);
	tw_mem(&t, 0, 0x1000000, 1 * MiB);             /* A */
	tw_mem(&t, 0, 0x2000000, 4 * MiB);             /* B */
	tw_kernel(&t, PRODUCER, 100, (int[]){0, 1, -1});
	tw_mem(&t, 0, 0x3000000, 2 * MiB);             /* C: A + B + C = 7 MiB, in step 0 */
	tw_kernel(&t, EW, 100, (int[]){1, 2, -1});
	tw_mem(&t, 1, 0x2000000, 4 * MiB);
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_RANGE;
	r.start = t.t;
	r.end = t.t + 100000;
	r.u.range.name = trace_writer_intern(t.w, "step 1");
	cr_assert_eq(trace_writer_record(t.w, &r), 0);
	tw_mem(&t, 0, 0x4000000, 3 * MiB);             /* D: A + C + D = 6 MiB, in step 1 */
	tw_kernel(&t, OTHER, 100, (int[]){2, 3, -1});
	tw_mem(&t, 1, 0x4000000, 3 * MiB);
	tw_close(&t);
	builtin(&rs);
	cr_assert_eq(fusion_apply(in, NULL, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.all.buffers_eliminated, 1);
	cr_assert_eq(rep.all.peak_before, 6 * MiB, "the 7 MiB of step 0 is outside");
	cr_assert_eq(rep.all.peak_after, 6 * MiB);
	fusion_report_free(&rep);
	o.peak_range = NULL;
	cr_assert_eq(fusion_apply(in, NULL, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.all.peak_before, 7 * MiB);
	cr_assert_eq(rep.all.peak_after, 6 * MiB);
	fusion_report_free(&rep);
	o.peak_range = "epoch*";
	cr_assert_eq(fusion_apply(in, NULL, &rs, &o, &rep, err, sizeof err), -1);
	cr_assert(strstr(err, "epoch*") != NULL, "%s", err);
	fusion_rules_free(&rs);
	unlink(in);
}

static void rule_error(const char *text, int line, const char *what)
{
	char path[64], err[512], want[96];
	struct fusion_rules rs;
	th_tmpname(path, sizeof path, "fusion_rules");
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(fusion_rules_load(path, &rs, err, sizeof err), -1, "accepted: %s", text);
	snprintf(want, sizeof want, "%s:%d:", path, line);
	cr_assert(strstr(err, want) != NULL, "'%s' does not name %s", err, want);
	cr_assert(strstr(err, what) != NULL, "'%s' does not say '%s'", err, what);
	cr_assert_null(rs.v);
	unlink(path);
}

Test(fusion, rule_errors_name_file_and_line)
{
	rule_error("# c\nok: *a*\nno colon here\n", 3, "expected");
	rule_error("a: *x*\n\nb: *y* into\n", 3, "expected");
	rule_error("a: *x*\na: *y*\n", 2, "already defined at line 1");
	rule_error("x y: *x*\n", 1, "rule name");
	rule_error("a: *x*||*y*\n", 1, "empty alternative");
	rule_error("a: chain\n", 1, "expected");
	rule_error("a: p into q r\n", 1, "expected");
}

Test(fusion, rule_files_parse_and_select)
{
	char err[512];
	struct fusion_rules rs;
	cr_assert_eq(fusion_rules_load("traces/fusion_rules/torch_inductor_like.rules", &rs, err,
				       sizeof err), 0, "%s", err);
	cr_assert_geq(rs.n, 5);
	size_t bn;
	for (bn = 0; bn < rs.n && strcmp(rs.v[bn].name, "bn_epilogue"); bn++)
		;
	cr_assert_lt(bn, rs.n);
	cr_assert_gt(rs.v[bn].nprod, 0);
	char *keep[] = {"bn_epilogue", "pointwise_chain"};
	cr_assert_eq(fusion_rules_keep(&rs, keep, 2, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rs.n, 2);
	cr_assert_str_eq(rs.v[0].name, "pointwise_chain", "file order kept");
	cr_assert(rs.v[0].chain);
	char *bad[] = {"nope"};
	cr_assert_eq(fusion_rules_keep(&rs, bad, 1, err, sizeof err), -1);
	cr_assert(strstr(err, "'nope'") && strstr(err, "bn_epilogue"), "%s", err);
	fusion_rules_free(&rs);
	cr_assert_eq(fusion_rules_load("traces/fusion_rules/elementwise.rules", &rs, err,
				       sizeof err), 0, "%s", err);
	struct fusion_rules b;
	cr_assert_eq(fusion_rules_parse(fusion_builtin_rules, "builtin", &b, err, sizeof err), 0);
	cr_assert_eq(rs.n, b.n, "the builtin rules are the shipped elementwise.rules");
	for (size_t i = 0; i < rs.n; i++)
		cr_assert_str_eq(rs.v[i].name, b.v[i].name);
	fusion_rules_free(&b);
	fusion_rules_free(&rs);
}

static int same_file(const char *a, const char *b)
{
	return th_sh("cmp -s '%s' '%s'", a, b) == 0;
}

Test(fusion, cli_end_to_end)
{
	const char *bin = th_bin();
	char in[64], o1[64], o2[64], rules[64], cmd[1024], out[16384];
	th_tmpname(in, sizeof in, "fusion_cli");
	th_tmpname(o1, sizeof o1, "fusion_cli_o1");
	th_tmpname(o2, sizeof o2, "fusion_cli_o2");
	write_chain(in, 4 * MiB, 0, 0);
	snprintf(cmd, sizeof cmd, "%s fuse %s -o %s --json", bin, in, o1);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"buffers_eliminated\":1") || strstr(out, "\"buffers_eliminated\": 1"),
		  "%s", out);
	snprintf(cmd, sizeof cmd, "%s fuse %s -o %s --json", bin, in, o2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(same_file(o1, o2), "two runs give different traces");
	snprintf(cmd, sizeof cmd, "%s trace validate %s", bin, o1);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	/* the fused trace replays */
	snprintf(cmd, sizeof cmd, "%s run %s --policy pytorch --no-db --json", bin, o1);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"allocs\":3") || strstr(out, "\"allocs\": 3"), "%s", out);
	/* a bad rule file: exit 1, file:line */
	th_tmpfile(rules, sizeof rules, "fusion_cli_rules", "good: *x*\nbad\n");
	snprintf(cmd, sizeof cmd, "%s fuse %s --rules %s", bin, in, rules);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	char want[128];
	snprintf(want, sizeof want, "%s:2:", rules);
	cr_assert(strstr(out, want) != NULL, "%s", out);
	/* usage errors: exit 2 */
	snprintf(cmd, sizeof cmd, "%s fuse", bin);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	snprintf(cmd, sizeof cmd, "%s fuse %s --rule nope", bin, in);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	cr_assert(strstr(out, "nope") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s fuse %s --bandwidth fast", bin, in);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	/* a bad trace: exit 1, file:line, nothing written */
	FILE *f = fopen(in, "w");
	cr_assert_not_null(f);
	fputs("gpumemsim-trace 1\na 10 0x10 zz -\n", f);
	fclose(f);
	unlink(o1);
	snprintf(cmd, sizeof cmd, "%s fuse %s -o %s", bin, in, o1);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	snprintf(want, sizeof want, "%s:2:", in);
	cr_assert(strstr(out, want) != NULL, "%s", out);
	cr_assert_neq(access(o1, F_OK), 0, "a failed fuse left %s", o1);
	unlink(in);
	unlink(o2);
	unlink(rules);
}

Test(fusion, real_capture_with_links)
{
	const char *path = "capture/tests/data/resnet18-nocache.trace.gz";
	if (access(path, R_OK))
		cr_skip_test("%s absent", path);
	char out[64], err[512];
	struct fusion_rules rs;
	struct fusion_report rep;
	struct fusion_options o = {0};
	th_tmpname(out, sizeof out, "fusion_r18");
	strcat(out, ".gz");
	cr_assert_eq(fusion_rules_load("traces/fusion_rules/torch_inductor_like.rules", &rs, err,
				       sizeof err), 0, "%s", err);
	cr_assert_eq(fusion_apply(path, out, &rs, &o, &rep, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rep.kernels, 1488);
	cr_assert_eq(rep.kernels_linked, 1184);
	cr_assert_gt(rep.all.buffers_eliminated, 0);
	cr_assert_leq(rep.all.peak_after, rep.all.peak_before);
	cr_assert_lt(rep.all.ktime_after, rep.all.ktime_before);
	cr_assert_str_eq(rep.bandwidth_source, "measured");
	/* the output reads through with consistent ids */
	struct trace_reader *r = trace_reader_open(out);
	cr_assert_not_null(r);
	struct trace_rec rec;
	uint64_t na = 0, nk = 0;
	int st;
	while ((st = trace_reader_next(r, &rec)) == TRACE_OK) {
		na += rec.type == TREC_ALLOC;
		if (rec.type == TREC_KERNEL) {
			nk++;
			for (uint32_t l = 0; l < rec.u.kernel.nlinks; l++)
				cr_assert_lt(rec.u.kernel.links[l], na);
		}
	}
	cr_assert_eq(st, TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert_eq(na, rep.allocs - rep.all.buffers_eliminated);
	cr_assert_eq(nk, rep.kernels - rep.all.kernels_fused + rep.all.groups);
	trace_reader_close(r);
	fusion_report_free(&rep);
	fusion_rules_free(&rs);
	unlink(out);
	out[strlen(out) - 3] = 0;
	unlink(out);
}
