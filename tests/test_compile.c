/*
 * test_compile.c: the torch.compile what-if (whatif/compile.c) on a
 * hand-made training step whose partitioner decisions are known, one case
 * per rule, and `gpumemsim whatif compile` through the binary.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../traces/trace.h"
#include "../whatif/compile.h"
#include "helpers.h"

#define MiB 1048576u

/*
 * One step. Allocation ids (ordinals of 'a'): 0 W weight; in forward: 1 X
 * input (no linked producer), 2 C conv output (opaque conv), 3 B batch
 * norm output (no linked backward reader: kept), 4 A = pointwise(B): read in backward by a pointwise kernel
 * only -> recomputed; 5 D = pointwise(A), read in backward by a GEMM ->
 * kept; 6 T a forward temporary; 7 F = pointwise(T), T gone by backward ->
 * kept; 8 E = pointwise(B), an opaque kernel launched between its last
 * backward read and its free -> kept.
 */
/* String ids 0.. of the trace (S lines). */
static const char *const names[] = {
	"step 0",
	"forward",
	"backward",
	"sm90_xmma_fprop_conv",
	"_ZN5cudnn16bn_fw_tr_1C11",
	"vectorized_elementwise_kernel_silu",
	"vectorized_elementwise_kernel_mul",
	"elementwise_kernel_x",
	"elementwise_kernel_y",
	"elementwise_kernel_z",
	"cutlass_gemm_wgrad",
	"elementwise_kernel_silu_bwd",
	"elementwise_kernel_bwd2",
	"sm90_xmma_dgrad",
};

static void write_step(char *path, size_t len, int with_ranges, int with_links)
{
	struct th_sbuf b = {0};
	const char *L3 = with_links ? "2,3" : "-", *L4 = with_links ? "3,4" : "-";
	th_sb_printf(&b, "gpumemsim-trace 1\nH producer test\nL model=step\n");
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		th_sb_printf(&b, "S %zu %s\n", i, names[i]);
	th_sb_printf(&b, "a 50 0x1000 %u -\n", MiB);
	if (with_ranges)
		th_sb_printf(&b, "r 100 1000 0 0\nr 100 500 1 1\n");
	th_sb_printf(&b, "a 110 0x100000 %u -\n", 4 * MiB);
	th_sb_printf(&b, "a 120 0x200000 %u -\n", 4 * MiB);
	th_sb_printf(&b, "k 130 140 7 3 1,1,1 1,1,1 1 0 1 -\n");
	th_sb_printf(&b, "a 150 0x300000 %u -\n", 4 * MiB);
	th_sb_printf(&b, "k 160 170 7 4 1,1,1 1,1,1 1 0 2 %s\n", L3);
	th_sb_printf(&b, "a 180 0x400000 %u -\n", 8 * MiB);
	th_sb_printf(&b, "k 190 200 7 5 1,1,1 1,1,1 1 0 3 %s\n", L4);
	th_sb_printf(&b, "a 210 0x1000000 %u -\n", 4 * MiB);
	th_sb_printf(&b, "k 220 230 7 6 1,1,1 1,1,1 1 0 4 %s\n",
		     with_links ? "4,5" : "-");
	th_sb_printf(&b, "a 240 0x1800000 %u -\n", 4 * MiB);
	th_sb_printf(&b, "k 250 260 7 7 1,1,1 1,1,1 1 0 5 %s\n",
		     with_links ? "5,6" : "-");
	th_sb_printf(&b, "a 270 0x2000000 %u -\n", 4 * MiB);
	th_sb_printf(&b, "k 280 290 7 8 1,1,1 1,1,1 1 0 6 %s\n",
		     with_links ? "6,7" : "-");
	th_sb_printf(&b, "f 300 0x1800000 0 -\n");
	th_sb_printf(&b, "a 310 0x2800000 %u -\n", 4 * MiB);
	th_sb_printf(&b, "k 320 330 7 9 1,1,1 1,1,1 1 0 7 %s\n",
		     with_links ? "3,8" : "-");
	if (with_ranges)
		th_sb_printf(&b, "r 600 900 2 1\n");
	th_sb_printf(&b, "k 610 620 7 10 1,1,1 1,1,1 1 0 8 %s\n",
		     with_links ? "5" : "-");
	th_sb_printf(&b, "k 630 640 7 11 1,1,1 1,1,1 1 0 9 %s\n",
		     with_links ? "4" : "-");
	th_sb_printf(&b, "f 650 0x400000 0 -\n");
	th_sb_printf(&b, "k 660 670 7 12 1,1,1 1,1,1 1 0 10 %s\n",
		     with_links ? "8,7" : "-");
	th_sb_printf(&b, "k 680 690 7 13 1,1,1 1,1,1 1 0 11 -\n");
	th_sb_printf(&b, "f 700 0x2800000 0 -\nf 710 0x2000000 0 -\nf 720 0x1000000 0 -\n");
	th_sb_printf(&b, "f 730 0x300000 0 -\nf 740 0x200000 0 -\nf 750 0x100000 0 -\n");
	th_sb_end(&b);
	th_tmpfile(path, len, "compile-step", b.s);
	free(b.s);
}

Test(compile, partitioner_rules_one_case_each)
{
	char in[256], out[256], err[512];
	struct compile_partition p;
	write_step(in, sizeof in, 1, 1);
	th_tmpname(out, sizeof out, "compile-part");
	cr_assert_eq(compile_partition(in, out, &p, err, sizeof err), 0, "%s", err);
	cr_expect_eq(p.steps, 1);
	cr_expect_eq(p.saved, 7, "saved %" PRIu64, p.saved);   /* X C B A D F E */
	cr_expect_eq(p.recomputed, 1);
	cr_expect_eq(p.recomputed_bytes, 8 * MiB);
	cr_expect_eq(p.keep_producer, 2);                        /* X; C (an opaque
								  * kernel ran first) */
	cr_expect_eq(p.keep_inputs, 1);                          /* F */
	cr_expect_eq(p.keep_backward, 3);                        /* B (no linked
								  * backward reader) D E */

	/* A is freed right after its last forward reader (the mul at 220), and
	 * the backward kernel that read it no longer links it */
	struct trace_reader *rd = trace_reader_open(out);
	cr_assert(rd && trace_reader_status(rd) >= 0);
	struct trace_rec r;
	int a_freed_at = -1, freed_once = 0, silu_bwd_links = -1;
	while (trace_reader_next(rd, &r) == TRACE_OK) {
		if (r.type == TREC_FREE && r.u.mem.addr == 0x400000) {
			a_freed_at = (int)r.start;
			freed_once++;
		}
		if (r.type == TREC_KERNEL &&
		    !strcmp(trace_reader_string(rd, r.u.kernel.name), "elementwise_kernel_silu_bwd"))
			silu_bwd_links = (int)r.u.kernel.nlinks;
	}
	cr_expect_eq(trace_reader_trailer(rd)->present, 1);
	trace_reader_close(rd);
	cr_expect_eq(a_freed_at, 220);
	cr_expect_eq(freed_once, 1);
	cr_expect_eq(silu_bwd_links, 0);
	unlink(in);
	unlink(out);
}

/*
 * The other rules, one step: 0 W; in forward 1 P (an opaque conv's output),
 * 2 N =
 * norm(P) with its statistics 3 (tiny: a reduction, never recomputed),
 * updated in place by a ReLU and then read by an opaque convolution (kept:
 * its weight gradient reads it); 4 K, eager's copy of an in-place
 * activation's input (a device-to-device copy, read in backward by a
 * pointwise kernel: never made compiled); 5 I, max-pool indices (int8
 * offsets compiled: an eighth).
 */
static const char *const names2[] = {
	"step 0", "forward", "backward", "_ZN5cudnn16bn_fw_tr_1C11", "vectorized_elementwise_kernel_relu",
	"sm90_xmma_fprop_conv", "max_pool_forward_nchw", "max_pool_backward_nchw",
	"elementwise_kernel_silu_bwd", "_ZN5cudnn16bn_bw_1C11",
};

static void write_step2(char *path, size_t len)
{
	struct th_sbuf b = {0};
	th_sb_printf(&b, "gpumemsim-trace 1\nH producer test\n");
	for (size_t i = 0; i < sizeof names2 / sizeof names2[0]; i++)
		th_sb_printf(&b, "S %zu %s\n", i, names2[i]);
	th_sb_printf(&b, "a 50 0x1000 %u -\n", MiB);
	th_sb_printf(&b, "r 100 1000 0 0\nr 100 500 1 1\n");
	th_sb_printf(&b, "a 110 0x100000 %u -\n", 4 * MiB);      /* 1 P */
	th_sb_printf(&b, "k 112 114 7 5 1,1,1 1,1,1 1 0 9 -\n"); /* the conv writing P */
	th_sb_printf(&b, "a 120 0x800000 %u -\n", 4 * MiB);      /* 2 N */
	th_sb_printf(&b, "a 121 0xc00000 512 -\n");               /* 3 stats */
	th_sb_printf(&b, "k 130 140 7 3 1,1,1 1,1,1 1 0 1 1,2,3\n");
	th_sb_printf(&b, "k 150 160 7 4 1,1,1 1,1,1 1 0 2 2\n");
	th_sb_printf(&b, "k 170 180 7 5 1,1,1 1,1,1 1 0 3 -\n");
	th_sb_printf(&b, "a 190 0x1000000 %u -\n", 4 * MiB);     /* 4 K */
	th_sb_printf(&b, "c 200 210 7 %u dtod 4\n", 4 * MiB);
	th_sb_printf(&b, "a 220 0x1800000 %u -\n", 8 * MiB);     /* 5 I */
	th_sb_printf(&b, "k 230 240 7 6 1,1,1 1,1,1 1 0 5 5\n");
	th_sb_printf(&b, "r 600 900 2 1\n");
	th_sb_printf(&b, "k 610 620 7 7 1,1,1 1,1,1 1 0 6 5\n");
	th_sb_printf(&b, "f 630 0x1800000 0 -\n");
	th_sb_printf(&b, "k 640 650 7 8 1,1,1 1,1,1 1 0 7 2,4\n");
	th_sb_printf(&b, "f 660 0x1000000 0 -\n");
	th_sb_printf(&b, "k 670 680 7 9 1,1,1 1,1,1 1 0 8 1,3\n");
	th_sb_printf(&b, "f 700 0xc00000 0 -\nf 710 0x800000 0 -\nf 720 0x100000 0 -\n");
	th_sb_end(&b);
	th_tmpfile(path, len, "compile-step2", b.s);
	free(b.s);
}

Test(compile, copies_offsets_and_opaque_readers)
{
	char in[256], out[256], err[512];
	struct compile_partition p;
	write_step2(in, sizeof in);
	th_tmpname(out, sizeof out, "compile-part2");
	cr_assert_eq(compile_partition(in, out, &p, err, sizeof err), 0, "%s", err);
	cr_expect_eq(p.saved, 5, "saved %" PRIu64, p.saved);   /* P N stats K I */
	cr_expect_eq(p.recomputed, 1);                           /* K */
	cr_expect_eq(p.clones, 1);
	cr_expect_eq(p.offsets, 1);
	cr_expect_eq(p.offsets_bytes_saved, 7 * MiB);
	cr_expect_eq(p.keep_producer, 2);                        /* P (no writer), stats */
	cr_expect_eq(p.keep_backward, 1);                        /* N: an opaque conv reads it */
	/* K is never made: one 'a' fewer, ids after it move down; I is an eighth */
	struct trace_reader *rd = trace_reader_open(out);
	cr_assert(rd && trace_reader_status(rd) >= 0);
	struct trace_rec r;
	unsigned allocs = 0;
	uint64_t i_bytes = 0;
	int pool_bwd_link = -1;
	while (trace_reader_next(rd, &r) == TRACE_OK) {
		if (r.type == TREC_ALLOC) {
			allocs++;
			cr_expect_neq(r.u.mem.addr, 0x1000000, "the copy is not made");
			if (r.u.mem.addr == 0x1800000)
				i_bytes = r.u.mem.bytes;
		}
		if (r.type == TREC_KERNEL &&
		    !strcmp(trace_reader_string(rd, r.u.kernel.name), "max_pool_backward_nchw")) {
			cr_assert_eq(r.u.kernel.nlinks, 1);
			pool_bwd_link = (int)r.u.kernel.links[0];
		}
	}
	trace_reader_close(rd);
	cr_expect_eq(allocs, 5);
	cr_expect_eq(i_bytes, MiB);
	cr_expect_eq(pool_bwd_link, 4, "I was id 5, now 4");
	unlink(in);
	unlink(out);
}

/*
 * Layout optimisation, one step: 0 W a weight and 1 X the step's input,
 * both made before the forward; in forward 2 O a convolution's output and
 * 3 S its workspace (made last): eager cuDNN transforms X and W into S
 * (two layout kernels), 1 MiB of S is the algorithm's own. In backward 4 T
 * a workspace holding only W's transform (W read again: its copy is saved
 * until then), then in the same cuDNN call 5 G (the weight gradient) and
 * its kernel; 6 U the next, pointwise, operation's output. X is not read in
 * backward: its copy is not saved.
 */
static const char *const names3[] = {
	"step 0", "forward", "backward",
	"cudnn::engines_precompiled::nchwToNhwcKernel", "sm90_xmma_fprop_conv",
	"at::native::vectorized_elementwise_kernel",
};

static void write_step3(char *path, size_t len)
{
	struct th_sbuf b = {0};
	th_sb_printf(&b, "gpumemsim-trace 1\nH producer test\n");
	for (size_t i = 0; i < sizeof names3 / sizeof names3[0]; i++)
		th_sb_printf(&b, "S %zu %s\n", i, names3[i]);
	th_sb_printf(&b, "a 50 0x1000000 %u -\n", 4 * MiB);     /* 0 W */
	th_sb_printf(&b, "r 100 1000 0 0\n");
	th_sb_printf(&b, "a 105 0x2000000 %u -\n", 8 * MiB);    /* 1 X */
	th_sb_printf(&b, "r 110 500 1 1\n");
	th_sb_printf(&b, "a 120 0x3000000 %u -\n", 8 * MiB);    /* 2 O */
	th_sb_printf(&b, "a 130 0x4000000 %u -\n", 13 * MiB);   /* 3 S */
	th_sb_printf(&b, "k 140 145 7 3 1,1,1 1,1,1 1 0 1 1,3\n");
	th_sb_printf(&b, "k 150 155 7 3 1,1,1 1,1,1 1 0 2 0,3\n");
	th_sb_printf(&b, "k 160 165 7 4 1,1,1 1,1,1 1 0 3 2,3\n");
	th_sb_printf(&b, "f 170 0x4000000 0 -\n");
	th_sb_printf(&b, "r 600 900 2 1\n");
	th_sb_printf(&b, "a 610 0x5000000 %u -\n", 4 * MiB);    /* 4 T */
	th_sb_printf(&b, "k 620 625 7 3 1,1,1 1,1,1 1 0 4 0,4\n");
	th_sb_printf(&b, "k 630 635 7 4 1,1,1 1,1,1 1 0 5 2,4\n");
	th_sb_printf(&b, "f 640 0x5000000 0 -\n");
	th_sb_printf(&b, "a 650 0x6000000 %u -\n", 2 * MiB);    /* 5 G */
	th_sb_printf(&b, "k 660 665 7 4 1,1,1 1,1,1 1 0 6 5\n");
	th_sb_printf(&b, "f 700 0x3000000 0 -\n");
	th_sb_printf(&b, "a 710 0x7000000 %u -\n", MiB);        /* 6 U */
	th_sb_printf(&b, "k 720 725 7 5 1,1,1 1,1,1 1 0 7 6\n");
	th_sb_printf(&b, "f 950 0x2000000 0 -\n");
	th_sb_end(&b);
	th_tmpfile(path, len, "compile-step3", b.s);
	free(b.s);
}

Test(compile, layout_copies_and_workspaces)
{
	char in[256], out[256], err[512];
	struct compile_partition p;
	write_step3(in, sizeof in);
	th_tmpname(out, sizeof out, "compile-layout");
	cr_assert_eq(compile_partition(in, out, &p, err, sizeof err), 0, "%s", err);
	cr_expect_eq(p.layout_copies, 1);                 /* W, read in backward */
	cr_expect_eq(p.layout_copy_bytes, 4 * MiB);
	cr_expect_eq(p.workspaces, 2);
	cr_expect_eq(p.workspace_bytes_saved, 16 * MiB);  /* X and W in S, W in T */

	/* the copy lives from the forward's start until the cuDNN call of W's
	 * last backward reader returns: after G, made inside that call, and
	 * before U (Inductor frees a buffer after the extern call that last
	 * reads it); S keeps its own 1 MiB; T is never made; kernel links still
	 * name the same allocations (the copy's 'a' comes first: ids shift by
	 * one) */
	struct trace_reader *rd = trace_reader_open(out);
	cr_assert(rd && trace_reader_status(rd) >= 0);
	struct trace_rec r;
	uint64_t copy_made = 0, copy_freed = 0, s_bytes = 0, n_alloc = 0, conv_links[2] = {0, 0};
	int t_made = 0, conv = 0;
	while (trace_reader_next(rd, &r) == TRACE_OK) {
		if (r.type == TREC_ALLOC) {
			n_alloc++;
			if (r.u.mem.bytes == 4 * MiB && r.u.mem.addr != 0x1000000)
				copy_made = r.start;
			if (r.u.mem.addr == 0x4000000)
				s_bytes = r.u.mem.bytes;
			t_made |= r.u.mem.addr == 0x5000000;
		}
		if (r.type == TREC_FREE && r.u.mem.bytes == 4 * MiB && r.u.mem.addr != 0x5000000)
			copy_freed = r.start;
		if (r.type == TREC_KERNEL && r.u.kernel.nlinks == 2 && !conv++) {
			conv_links[0] = r.u.kernel.links[0];
			conv_links[1] = r.u.kernel.links[1];
		}
	}
	trace_reader_close(rd);
	cr_expect_eq(copy_made, 110);
	cr_expect_eq(copy_freed, 710);
	cr_expect_eq(s_bytes, MiB);
	cr_expect_eq(t_made, 0);
	cr_expect_eq(n_alloc, 7);                        /* W X copy O S G U */
	cr_expect_eq(conv_links[0], 1);                   /* the first layout kernel: X, S */
	cr_expect_eq(conv_links[1], 4);
	unlink(in);
	unlink(out);
}

/* The host's least launch time of the compiled step (compile_time.c): per
 * kernel in forward/backward 13.8 us generated (linked, not a library
 * kernel), 12 us a library or unlinked one; the cuDNN batch norm forward
 * is three launches compiled (statistics, normalisation, the counter).
 * The weights that scale the eager step's host time: 40.6 us an eager
 * kernel, 35.7 us a compiled one plus 0.937 ms a compiled step. */
Test(compile, host_launch_lower_bound)
{
	char in[256], err[512];
	struct compile_gpu g;
	write_step(in, sizeof in, 1, 1);
	cr_assert_eq(compile_gpu_time(in, NULL, 0, 1, NULL, &g, err, sizeof err), 0, "%s", err);
	/* conv, wgrad, dgrad: library; bn_fw: 3 generated; 7 pointwise */
	cr_expect_eq(g.host_min_ns, 3 * 12000 + 3 * 13800 + 7 * 13800, "%" PRIu64, g.host_min_ns);
	cr_expect_eq(g.launches, 13);
	cr_expect_eq(g.host_weight_ns, 13 * 35700 + 937000, "%" PRIu64, g.host_weight_ns);
	cr_assert_eq(compile_gpu_time(in, NULL, 0, 0, NULL, &g, err, sizeof err), 0, "%s", err);
	cr_expect_eq(g.host_min_ns, 0);
	cr_expect_eq(g.launches, 11);
	cr_expect_eq(g.host_weight_ns, 11 * 40600, "%" PRIu64, g.host_weight_ns);
	unlink(in);
}

/* --zero-grad before-forward: the free that opens the backward range
 * (before its first launch: zero_grad) goes to its step's start; the one
 * after the launch stays. */
Test(compile, zero_grad_moves_to_the_step_start)
{
	char in[256], out[256], err[512];
	struct zero_grad_report r;
	struct th_sbuf b = {0};
	th_sb_printf(&b, "gpumemsim-trace 1\nH producer test\n"
			 "S 0 step 1\nS 1 forward\nS 2 backward\nS 3 k\nS 4 cudaLaunchKernel\n");
	th_sb_printf(&b, "a 10 0x1000 %u -\n", MiB);            /* a gradient */
	th_sb_printf(&b, "r 100 1000 0 0\na 110 0x2000 %u -\na 112 0x3000 512 -\n", 4 * MiB);
	th_sb_printf(&b, "r 120 400 1 1\np 130 135 4 1\nk 140 150 7 3 1,1,1 1,1,1 1 0 1 -\n");
	/* at the opening: the gradient (moves) and a tensor of this step (stays) */
	th_sb_printf(&b, "r 500 900 2 1\nf 510 0x1000 0 -\nf 512 0x3000 0 -\np 520 525 4 2\n");
	th_sb_printf(&b, "f 530 0x2000 0 -\nk 540 550 7 3 1,1,1 1,1,1 1 0 2 -\n");
	th_sb_end(&b);
	th_tmpfile(in, sizeof in, "zero-grad", b.s);
	free(b.s);
	th_tmpname(out, sizeof out, "zero-grad-out");
	cr_assert_eq(zero_grad_first(in, out, &r, err, sizeof err), 0, "%s", err);
	cr_expect_eq(r.frees_moved, 1);
	cr_expect_eq(r.bytes_moved, MiB);
	cr_expect_eq(r.steps, 1);
	struct trace_reader *rd = trace_reader_open(out);
	cr_assert(rd && trace_reader_status(rd) >= 0);
	struct trace_rec x;
	int order = 0, grad_at = -1, x_at = -1, frees = 0;
	while (trace_reader_next(rd, &x) == TRACE_OK) {
		order++;
		if (x.type == TREC_FREE) {
			frees++;
			if (x.u.mem.addr == 0x1000)
				grad_at = order;
		}
		if (x.type == TREC_ALLOC && x.u.mem.addr == 0x2000)
			x_at = order;
	}
	cr_expect_eq(trace_reader_trailer(rd)->present, 1);
	trace_reader_close(rd);
	cr_expect_eq(frees, 3);
	cr_expect(grad_at > 0 && grad_at < x_at, "gradient freed at record %d, input made at %d",
		  grad_at, x_at);
	unlink(in);
	unlink(out);
	/* a trace without the ranges is refused */
	struct th_sbuf c = {0};
	th_sb_printf(&c, "gpumemsim-trace 1\nH producer test\na 10 0x1000 512 -\n");
	th_sb_end(&c);
	th_tmpfile(in, sizeof in, "zero-grad-bare", c.s);
	free(c.s);
	cr_expect_eq(zero_grad_first(in, out, &r, err, sizeof err), -1);
	cr_expect(strstr(err, "backward") != NULL, "%s", err);
	unlink(in);
	unlink(out);
}

/* A pointwise output read right after it is made by an unlinked GEMM (the
 * next block's 1x1 convolution) and later by a pointwise add (its last
 * forward reader) is kept: the GEMM's weight gradient reads it again. */
Test(compile, opaque_reader_after_any_write)
{
	char in[256], out[256], err[512];
	struct compile_partition p;
	struct th_sbuf b = {0};
	th_sb_printf(&b, "gpumemsim-trace 1\nH producer test\nS 0 step 0\nS 1 forward\n"
			 "S 2 backward\nS 3 vectorized_elementwise_kernel_relu\n"
			 "S 4 sm90_xmma_gemm_nn\nS 5 vectorized_elementwise_kernel_add\n"
			 "S 6 elementwise_kernel_threshold_bwd\n");
	th_sb_printf(&b, "r 100 1000 0 0\nr 100 500 1 1\n");
	th_sb_printf(&b, "a 110 0x100000 %u -\na 120 0x200000 %u -\n", 4 * MiB, 4 * MiB);
	th_sb_printf(&b, "k 130 140 7 3 1,1,1 1,1,1 1 0 1 0,1\n");     /* A = relu(X) */
	th_sb_printf(&b, "k 150 160 7 4 1,1,1 1,1,1 1 0 2 -\n");       /* GEMM reads A */
	th_sb_printf(&b, "a 170 0x300000 %u -\n", 4 * MiB);
	th_sb_printf(&b, "k 180 190 7 5 1,1,1 1,1,1 1 0 3 1,2\n");     /* add reads A */
	th_sb_printf(&b, "r 600 900 2 1\nk 610 620 7 6 1,1,1 1,1,1 1 0 4 1,0\n");
	th_sb_printf(&b, "f 700 0x200000 0 -\nf 710 0x300000 0 -\nf 720 0x100000 0 -\n");
	th_sb_end(&b);
	th_tmpfile(in, sizeof in, "compile-opaque", b.s);
	free(b.s);
	th_tmpname(out, sizeof out, "compile-opaque-out");
	cr_assert_eq(compile_partition(in, out, &p, err, sizeof err), 0, "%s", err);
	/* saved: X, A, C; A kept for its GEMM reader (the last write before
	 * the GEMM was its producer, not its last forward kernel, the add) */
	cr_expect_eq(p.saved, 3, "saved %" PRIu64, p.saved);
	cr_expect_eq(p.recomputed, 0, "recomputed %" PRIu64, p.recomputed);
	unlink(in);
	unlink(out);
}

Test(compile, cli_json_peak_falls_by_the_recomputed_tensor)
{
	char in[256], out[256], js[256], er[256], args[1024];
	write_step(in, sizeof in, 1, 1);
	th_tmpname(out, sizeof out, "compile-out");
	th_tmpname(js, sizeof js, "compile-json");
	th_tmpname(er, sizeof er, "compile-err");
	snprintf(args, sizeof args, "whatif compile '%s' -o '%s' --json --steady-from ''", in, out);
	cr_assert_eq(th_run(NULL, js, er, args), 0, "%s", th_slurp(er));
	char *j = th_slurp(js);
	cr_assert_not_null(strstr(j, "\"recomputed_tensors\":1"), "%s", j);
	/* at the eager peak (after E is made) W X C B A D F E are live: 33 MiB;
	 * compiled, A (8 MiB) is gone before F and E are made */
	cr_expect_not_null(strstr(j, "\"peak_allocated_before\":34603008"), "%s", j);
	cr_expect_not_null(strstr(j, "\"peak_allocated_after\":26214400"), "%s", j);
	cr_expect_eq(access(out, F_OK), 0);
	/* the compiled step's host time is the eager one's scaled by the
	 * launches' weights (every kernel is in forward or backward:
	 * host_launch_lower_bound), never below the least its launches take */
	const char *hb = strstr(j, "\"host_time_per_step_before_ns\":");
	const char *ha = strstr(j, "\"host_time_per_step_after_ns\":");
	const char *hm = strstr(j, "\"host_launch_time_min_ns\":");
	cr_assert(hb && ha && hm, "%s", j);
	double before = strtod(strchr(hb, ':') + 1, NULL), after = strtod(strchr(ha, ':') + 1, NULL);
	double least = strtod(strchr(hm, ':') + 1, NULL);
	const char *kb = strstr(j, "\"kernels_per_step_before\":");
	const char *ka = strstr(j, "\"kernels_per_step_after\":");
	cr_assert(kb && ka, "%s", j);
	double nb = strtod(strchr(kb, ':') + 1, NULL), na = strtod(strchr(ka, ':') + 1, NULL);
	cr_expect(na > 0 && nb > 0 && na < 13, "fusion leaves fewer than 13 launches: %s", j);
	double want = before * (na * 35700.0 + 937000.0) / (nb * 40600.0);
	cr_expect(before > 0, "%s", j);
	cr_expect(fabs(after - (want > least ? want : least)) <= 1, "after %.0f want %.0f least %.0f", after,
		  want, least);
	free(j);
	/* the written trace validates */
	snprintf(args, sizeof args, "trace validate '%s'", out);
	cr_expect_eq(th_run(NULL, js, er, args), 0, "%s", th_slurp(er));
	unlink(in);
	unlink(out);
	unlink(js);
	unlink(er);
}

/* --figure: the eager, partitioned and compiled timelines, their peaks in
 * the legend (the step's: 33 MiB eager, 25 MiB compiled). */
Test(compile, figure_of_the_three_timelines)
{
	char in[256], dir[256], so[256], er[256], args[1200], png[300], dat[300], gpf[300];
	if (!th_have("gnuplot"))
		cr_skip_test("gnuplot not installed");
	write_step(in, sizeof in, 1, 1);
	th_tmpname(dir, sizeof dir, "compile-fig");
	unlink(dir);
	th_tmpname(so, sizeof so, "compile-fig-so");
	th_tmpname(er, sizeof er, "compile-fig-err");
	snprintf(png, sizeof png, "%s.png", dir);
	snprintf(args, sizeof args, "whatif compile '%s' --steady-from '' --no-timing "
		 "--figure '%s' --figure-data '%s'", in, png, dir);
	cr_assert_eq(th_run(NULL, so, er, args), 0, "%s", th_slurp(er));
	struct stat sb;
	cr_expect(stat(png, &sb) == 0 && sb.st_size > 0);
	snprintf(dat, sizeof dat, "%s/allocated.dat", dir);
	snprintf(gpf, sizeof gpf, "%s/figure.gp", dir);
	char *d = th_slurp(dat), *g = th_slurp(gpf);
	int blocks = 0;
	for (const char *q = d; (q = strstr(q, "# ")); q += 2)
		blocks++;
	cr_expect_eq(blocks, 3, "%s", d);
	cr_expect_not_null(strstr(g, "eager (the capture), peak 33.00 MiB"), "%s", g);
	cr_expect_not_null(strstr(g, "compiled (and fused), peak 25.00 MiB"), "%s", g);
	free(d);
	free(g);
	/* a figure name gnuplot cannot write is a usage error, before any work */
	snprintf(args, sizeof args, "whatif compile '%s' --figure '%s.pdf'", in, dir);
	cr_expect_eq(th_run(NULL, so, er, args), 2);
	/* a folder that takes no files: refused before the replays write -o */
	char outp[300];
	snprintf(outp, sizeof outp, "%s.trace", dir);
	snprintf(args, sizeof args, "whatif compile '%s' --no-timing -o '%s' "
		 "--figure /nonexistent-gpumemsim-dir/f.png", in, outp);
	cr_expect_eq(th_run(NULL, so, er, args), 1);
	cr_expect(stat(outp, &sb) != 0, "-o was written before the figure failed");
	char *msg = th_slurp(er);
	cr_expect_not_null(strstr(msg, "cannot write in /nonexistent-gpumemsim-dir/"), "%s", msg);
	free(msg);
	unlink(dat);
	unlink(gpf);
	rmdir(dir);
	unlink(png);
	unlink(in);
	unlink(so);
	unlink(er);
}

/* The same trace and options give byte-identical reports and traces (the
 * layout copies' addresses, the moved frees and the temporary files' names
 * stay out of them). */
Test(compile, deterministic)
{
	char in[256], o[2][256], j[2][256], er[256], args[1200];
	write_step3(in, sizeof in);
	th_tmpname(er, sizeof er, "compile-det-err");
	for (int i = 0; i < 2; i++) {
		th_tmpname(o[i], sizeof o[i], "compile-det-out");
		th_tmpname(j[i], sizeof j[i], "compile-det-json");
		snprintf(args, sizeof args, "whatif compile '%s' -o '%s' --json --steady-from '' "
			 "--zero-grad before-forward", in, o[i]);
		cr_assert_eq(th_run(NULL, j[i], er, args), 0, "%s", th_slurp(er));
	}
	char *a = th_slurp(j[0]), *b = th_slurp(j[1]);
	/* the reports name their own output: compare the rest */
	char *ao = strstr(a, "\"policy\""), *bo = strstr(b, "\"policy\"");
	cr_assert(ao && bo);
	cr_expect_str_eq(ao, bo);
	free(a);
	free(b);
	snprintf(args, sizeof args, "cmp -s '%s' '%s'", o[0], o[1]);
	cr_expect_eq(system(args), 0, "the compiled traces differ");
	for (int i = 0; i < 2; i++) {
		unlink(o[i]);
		unlink(j[i]);
	}
	unlink(in);
	unlink(er);
}

Test(compile, refuses_what_it_cannot_model)
{
	char in[256], out[256], so[256], er[256], args[1024];
	th_tmpname(out, sizeof out, "compile-out");
	unlink(out);                          /* a failure must not create it */
	th_tmpname(so, sizeof so, "compile-so");
	th_tmpname(er, sizeof er, "compile-err");

	write_step(in, sizeof in, 0, 1);      /* no forward/backward ranges */
	snprintf(args, sizeof args, "whatif compile '%s' -o '%s'", in, out);
	cr_expect_eq(th_run(NULL, so, er, args), 1);
	char *e = th_slurp(er);
	cr_expect_not_null(strstr(e, "no NVTX ranges named \"forward\" and \"backward\""), "%s", e);
	free(e);
	cr_expect_neq(access(out, F_OK), 0, "nothing written on failure");
	unlink(in);

	write_step(in, sizeof in, 1, 0);      /* no links */
	snprintf(args, sizeof args, "whatif compile '%s' -o '%s'", in, out);
	cr_expect_eq(th_run(NULL, so, er, args), 1);
	e = th_slurp(er);
	cr_expect_not_null(strstr(e, "no kernel-to-buffer links"), "%s", e);
	free(e);
	cr_expect_neq(access(out, F_OK), 0);

	snprintf(args, sizeof args, "whatif compile '%s' --no-such-knob", in);
	cr_expect_eq(th_run(NULL, so, er, args), 2);
	snprintf(args, sizeof args, "whatif compile '%s' --policy nosuch", in);
	cr_expect_eq(th_run(NULL, so, er, args), 2);
	snprintf(args, sizeof args, "whatif compile '%s' --zero-grad sideways", in);
	cr_expect_eq(th_run(NULL, so, er, args), 2);
	e = th_slurp(er);
	cr_expect_not_null(strstr(e, "--zero-grad 'sideways'"), "%s", e);
	free(e);
	unlink(in);

	/* a trace cut short (no trailer) is refused with its name */
	write_step(in, sizeof in, 1, 1);
	char cut[256];
	th_tmpname(cut, sizeof cut, "compile-cut");
	cr_assert_eq(th_sh("grep -v '^end ' '%s' > '%s'", in, cut), 0);
	snprintf(args, sizeof args, "whatif compile '%s' -o '%s'", cut, out);
	cr_expect_eq(th_run(NULL, so, er, args), 1);
	e = th_slurp(er);
	cr_expect_not_null(strstr(e, cut), "%s", e);
	free(e);
	cr_expect_neq(access(out, F_OK), 0);
	/* ... the other loop order too (its transform runs first) */
	snprintf(args, sizeof args, "whatif compile '%s' -o '%s' --zero-grad before-forward", cut,
		 out);
	cr_expect_eq(th_run(NULL, so, er, args), 1);
	e = th_slurp(er);
	cr_expect_not_null(strstr(e, cut), "%s", e);
	cr_expect_not_null(strstr(e, "trailer"), "%s", e);
	free(e);
	cr_expect_neq(access(out, F_OK), 0);
	unlink(in);
	unlink(cut);
	unlink(so);
	unlink(er);
}

/* The builtin rules are the shipped rule file, rule for rule (the file is
 * what `fuse --rules` users read and edit). */
Test(compile, builtin_rules_are_the_inductor_like_file)
{
	struct fusion_rules a, b;
	char err[512];
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	cr_assert_eq(fusion_rules_parse(compile_builtin_rules, "builtin", &a, err, sizeof err), 0,
		     "%s", err);
	cr_assert_eq(fusion_rules_load("traces/fusion_rules/torch_inductor_like.rules", &b, err,
				       sizeof err), 0, "%s", err);
	cr_assert_eq(a.n, b.n);
	for (size_t i = 0; i < a.n; i++) {
		cr_expect_str_eq(a.v[i].name, b.v[i].name);
		cr_expect_eq(a.v[i].chain, b.v[i].chain, "%s", a.v[i].name);
		cr_assert_eq(a.v[i].ncons, b.v[i].ncons, "%s", a.v[i].name);
		cr_assert_eq(a.v[i].nprod, b.v[i].nprod, "%s", a.v[i].name);
		for (size_t k = 0; k < a.v[i].ncons; k++)
			cr_expect_str_eq(a.v[i].cons[k], b.v[i].cons[k]);
		for (size_t k = 0; k < a.v[i].nprod; k++)
			cr_expect_str_eq(a.v[i].prod[k], b.v[i].prod[k]);
	}
	fusion_rules_free(&a);
	fusion_rules_free(&b);
}

/* Without "step N" ranges the memory answer stands and the step time says
 * why it is not predicted. */
Test(compile, no_steps_memory_only)
{
	char in[256], cut[256], js[256], er[256], args[1024];
	write_step(in, sizeof in, 1, 1);
	th_tmpname(cut, sizeof cut, "compile-nosteps");
	cr_assert_eq(th_sh("awk '$0 == \"r 100 1000 0 0\" { next } $1 == \"end\" { $2 = $2 - 1 } { print }' "
			   "'%s' > '%s'", in, cut), 0);
	th_tmpname(js, sizeof js, "compile-json");
	th_tmpname(er, sizeof er, "compile-err");
	snprintf(args, sizeof args, "whatif compile '%s' --json --steady-from ''", cut);
	cr_assert_eq(th_run(NULL, js, er, args), 0, "%s", th_slurp(er));
	char *j = th_slurp(js);
	cr_expect_not_null(strstr(j, "\"step_time_before_ns\":null"), "%s", j);
	cr_expect_not_null(strstr(j, "no NVTX \\\"step N\\\" ranges"), "%s", j);
	cr_expect_not_null(strstr(j, "\"recomputed_tensors\":1"), "%s", j);
	free(j);
	unlink(in);
	unlink(cut);
	unlink(js);
	unlink(er);
}

/* whatif compile answers its own --help (not whatif batch's). */
Test(compile, help_is_its_own)
{
	char so[256], er[256];
	th_tmpname(so, sizeof so, "compile-help");
	th_tmpname(er, sizeof er, "compile-help-err");
	cr_assert_eq(th_run(NULL, so, er, "whatif compile --help"), 0);
	char *h = th_slurp(so);
	cr_expect_not_null(strstr(h, "usage: gpumemsim whatif compile TRACE"), "%s", h);
	cr_expect_null(strstr(h, "--batch N"), "%s", h);
	free(h);
	unlink(so);
	unlink(er);
}
