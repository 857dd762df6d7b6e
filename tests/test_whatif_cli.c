/*
 * test_whatif_cli.c: `gpumemsim whatif batch`, `maxbatch` and `explain
 * batch` end to end through the binary (env GPUMEMSIM_BIN, set by make
 * test), on synthetic captures with a known answer.
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

/* Weights (4 MiB), an activation of BATCH MiB and, inside conv1.fwd, a
 * workspace of WS bytes (0 = none); EXTRA adds a site others lack: 1 a
 * short one, 2 a 16 MiB buffer live across the peak; 3 (in every capture
 * alike) a 30 MiB buffer freed before anything else is made or freed,
 * outside any range (a workspace in backward, where the recipe puts no
 * layer ranges). WORKLOAD: the workload label, or NULL for none. */
static void write_capture_wl(const char *path, uint64_t batch, uint64_t ws, int extra,
			     const char *workload)
{
	char err[256], bstr[32];
	snprintf(bstr, sizeof bstr, "%" PRIu64, batch);
	struct trace_label labels[] = {{"batch", bstr}, {"workload", (char *)workload}};
	struct trace_header h = {.version = 1, .producer = "test", .labels = labels,
				 .nlabels = workload ? 2 : 1};
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	cr_assert_eq(trace_writer_header(w, &h), 0);
	uint32_t conv = trace_writer_intern(w, "conv1.fwd");
	uint64_t t = 1000;
	struct trace_rec r;
#define MEM(type_, addr_, bytes_) do { memset(&r, 0, sizeof r); r.type = (type_); r.start = r.end = t += 100; \
	r.u.mem.addr = (addr_); r.u.mem.bytes = (bytes_); r.u.mem.stream = TRACE_NO_STREAM; \
	r.u.mem.kind = 3; r.u.mem.source = TRACE_NO_STRING; cr_assert_eq(trace_writer_record(w, &r), 0); } while (0)
	MEM(TREC_ALLOC, 0x100000000, 4 * MiB);
	memset(&r, 0, sizeof r);
	r.type = TREC_RANGE;
	r.start = t += 100;
	r.end = r.start + 350;
	r.u.range.name = conv;
	cr_assert_eq(trace_writer_record(w, &r), 0);
	MEM(TREC_ALLOC, 0x200000000, batch * MiB);
	if (ws) {
		MEM(TREC_ALLOC, 0x300000000, ws);
		MEM(TREC_FREE, 0x300000000, ws);
	} else {
		t += 200; /* keep the activation alive past its range */
	}
	if (extra == 1) {
		MEM(TREC_ALLOC, 0x400000000, 8192);
		MEM(TREC_FREE, 0x400000000, 8192);
	}
	if (extra == 2)
		MEM(TREC_ALLOC, 0x500000000, 16 * MiB);
	if (extra == 3) {
		t += 400; /* after conv1.fwd */
		MEM(TREC_ALLOC, 0x600000000, 30 * MiB);
		MEM(TREC_FREE, 0x600000000, 30 * MiB);
	}
	MEM(TREC_FREE, 0x200000000, batch * MiB);
	if (extra == 2)
		MEM(TREC_FREE, 0x500000000, 16 * MiB);
	MEM(TREC_FREE, 0x100000000, 4 * MiB);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

static void write_capture(const char *path, uint64_t batch, uint64_t ws, int extra)
{
	write_capture_wl(path, batch, ws, extra, NULL);
}

/* whatif batch writes a trace; misaligned captures are aligned where they
 * align and the unaligned share is reported; --strict-align refuses them
 * naming the site; a prediction resting on a large copied buffer is
 * refused, saying what to capture. */
Test(whatif_cli, whatif_batch)
{
	const char *b = th_bin();
	char p1[128], p2[128], p3[128], p4[128], o[128], cmd[2048], out[16384];
	th_tmpname(p1, sizeof p1, "whatif_w");
	th_tmpname(p2, sizeof p2, "whatif_w");
	th_tmpname(p3, sizeof p3, "whatif_w");
	th_tmpname(o, sizeof o, "whatif_o");
	write_capture(p1, 8, 0, 0);
	write_capture(p2, 16, 0, 0);
	write_capture(p3, 32, 0, 1);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 40 -o %s", b, p1, p2, o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "outside the fitted range") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s trace cat %s", b, o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, " 41943040 ") != NULL, "40 MiB activation expected: %s", out);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 40 -o %s --strict-align", b,
		 p1, p3, o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, "allocation site 2, 8192 bytes") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 40 -o %s", b, p1, p3, o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "1 copied unchanged (0.02% of the peak") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 40 -o %s --json", b, p1, p3,
		 o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"unaligned_copied\":1") != NULL, "%s", out);
	/* a 16 MiB buffer only the batch-32 capture has, live at the peak:
	 * 16 of 84 MiB at batch 64, which would move by 19% were it to scale */
	th_tmpname(p4, sizeof p4, "whatif_w");
	write_capture(p4, 32, 0, 2);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 64 -o %s", b, p1, p4, o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, "cannot be trusted") != NULL, "%s", out);
	cr_assert(strstr(out, "up to 19.0%") != NULL, "%s", out);
	cr_assert(strstr(out, "Capture at batch sizes nearer 64") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 64 -o %s --max-unaligned 20",
		 b, p1, p4, o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s %s --batch 64 -o %s --max-unaligned x",
		 b, p1, p4, o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	unlink(p4);
	snprintf(cmd, sizeof cmd, "%s whatif batch --from %s --batch 40 -o %s", b, p1, o);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	unlink(p1);
	unlink(p2);
	unlink(p3);
	unlink(o);
}

/* maxbatch under an allocator whose own limit is below the capacity (JAX's
 * BFC takes 75% of it): the next batch is judged against that limit, not
 * the device (the shipped JAX captures). */
Test(whatif_cli, maxbatch_allocator_limit)
{
	char cmd[1024], out[16384];
	const char *from = "--from traces/jax/jax-resnet-b32.trace.gz "
			   "traces/jax/jax-resnet-b64.trace.gz traces/jax/jax-resnet-b128.trace.gz";
	snprintf(cmd, sizeof cmd, "%s maxbatch %s --policy bfc --conf preset:jax --capacity 1GiB",
		 th_bin(), from);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "largest batch  160 (peak reserved 768.00 MiB"), "%s", out);
	cr_assert(strstr(out, "limit: 23.08 MiB allocated + 748.69 MiB requested > the allocator's "
			      "limit of 768.00 MiB"), "%s", out);
	/* and says that XLA would compile another program under that limit */
	cr_assert(strstr(out, "note: XLA fits its compiled step to the memory limit"), "%s", out);
	/* with growth the regions split the room under the limit */
	snprintf(cmd, sizeof cmd, "%s maxbatch %s --policy bfc --conf preset:jax_growth "
		 "--capacity 1GiB --json", th_bin(), from);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"verdict\":\"fragmentation\""), "%s", out);
	cr_assert(strstr(out, "fits in the allocator's limit of 768.00 MiB"), "%s", out);
	cr_assert(strstr(out, "unreserved 738.00 MiB under the limit"), "%s", out);
}

/* maxbatch: 4 MiB + batch MiB under cuda_malloc in 100 MiB -> 96. */
Test(whatif_cli, maxbatch_capacity)
{
	const char *b = th_bin();
	char p1[128], p2[128], cmd[2048], out[16384];
	th_tmpname(p1, sizeof p1, "whatif_m");
	th_tmpname(p2, sizeof p2, "whatif_m");
	write_capture(p1, 8, 0, 0);
	write_capture(p2, 16, 0, 0);
	/* by default the search stops at 4 times the largest capture */
	snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy cuda_malloc --capacity 100MiB --json",
		 b, p1, p2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"max_batch\":64,") != NULL, "%s", out);
	cr_assert(strstr(out, "\"fails_at\":null,") != NULL, "%s", out);
	cr_assert(strstr(out, "\"searched_up_to\":64,") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy cuda_malloc --capacity 100MiB",
		 b, p1, p2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "no failure up to batch 64, 4 times the largest capture") != NULL,
		  "%s", out);
	snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy cuda_malloc --capacity 100MiB "
		 "--max 1000 --json", b, p1, p2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"max_batch\":96,") != NULL, "%s", out);
	cr_assert(strstr(out, "\"fails_at\":97,") != NULL, "%s", out);
	cr_assert(strstr(out, "\"verdict\":\"capacity\"") != NULL, "%s", out);
	/* a 10% margin leaves 90 MiB: 86 */
	snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy cuda_malloc --capacity 100MiB "
		 "--margin 10%% --max 1000 --json", b, p1, p2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"max_batch\":86,") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy nosuch --capacity 1GiB", b, p1, p2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	unlink(p1);
	unlink(p2);
}

/* maxbatch on misaligned captures: a short extra buffer is carried and the
 * answer given; a 16 MiB buffer only the batch-32 capture has, live at the
 * peak, makes the answer (near batch 80) untrustworthy: refused, unless the
 * user raises --max-unaligned. */
Test(whatif_cli, maxbatch_misaligned)
{
	const char *b = th_bin();
	char p1[128], p2[128], cmd[2048], out[16384];
	th_tmpname(p1, sizeof p1, "whatif_m");
	th_tmpname(p2, sizeof p2, "whatif_m");
	write_capture(p1, 8, 0, 0);
	write_capture(p2, 32, 0, 1);
	snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy cuda_malloc --capacity 100MiB "
		 "--max 1000 --json", b, p1, p2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	/* 4 MiB + batch MiB + the copied 8 KiB in 100 MiB */
	cr_assert(strstr(out, "\"max_batch\":95,") != NULL, "%s", out);
	cr_assert(strstr(out, "\"unaligned_copied\":1") != NULL, "%s", out);
	write_capture(p2, 32, 0, 2);
	snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy cuda_malloc --capacity 100MiB", b,
		 p1, p2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, "cannot be trusted") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy cuda_malloc --capacity 100MiB "
		 "--max-unaligned 100 --max 1000 --json", b, p1, p2);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"max_batch\":80,") != NULL, "%s", out);
	unlink(p1);
	unlink(p2);
}

/* Captures at batch 8, 16 and 32 with workspaces WS, into fresh files P:
 * what the explain tests compare. */
static void write_three(char p[3][128], const uint64_t ws[3])
{
	static const uint64_t batch[3] = {8, 16, 32};
	for (int i = 0; i < 3; i++) {
		th_tmpname(p[i], sizeof p[i], "whatif_explain");
		write_capture(p[i], batch[i], ws[i], 0);
	}
}

/* explain: a workspace that shrinks at batch 32 makes the peak fall. */
Test(whatif_cli, explain_flags_fall)
{
	const char *b = th_bin();
	char p[3][128], cmd[2048], out[16384];
	write_three(p, (const uint64_t[3]){2 * MiB, 64 * MiB, 1 * MiB});
	snprintf(cmd, sizeof cmd, "%s explain batch %s %s %s --policy cuda_malloc --json", b, p[2], p[0], p[1]);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"from\":16,\"to\":32,\"d_reserved\":-49283072") != NULL, "%s", out);
	cr_assert(strstr(out, "\"flag\":\"FALLS\",\"cause\":\"workspace\"") != NULL, "%s", out);
	cr_assert(strstr(out, "conv1.fwd") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s explain batch %s %s %s --policy cuda_malloc", b, p[0], p[1], p[2]);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "FALLS") != NULL && strstr(out, "1 flagged point") != NULL, "%s", out);
	for (int i = 0; i < 3; i++)
		unlink(p[i]);
}

/* The seed's pattern under a growing total: the workspace live at the peak
 * falls (40 -> 30 MiB) while activations push reserved up: WS-FALLS. */
Test(whatif_cli, explain_flags_workspace_fall)
{
	const char *b = th_bin();
	char p[3][128], cmd[2048], out[16384];
	write_three(p, (const uint64_t[3]){8 * MiB, 40 * MiB, 30 * MiB});
	snprintf(cmd, sizeof cmd, "%s explain batch %s %s %s --policy cuda_malloc --json", b, p[0], p[1], p[2]);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"from\":16,\"to\":32,\"d_reserved\":6291456,\"d_workspace\":-10485760") != NULL,
		  "%s", out);
	cr_assert(strstr(out, "\"flag\":\"WS-FALLS\",\"cause\":\"activations\"") != NULL, "%s", out);
	/* no "step 1" range in these captures: --steady fails naming it */
	snprintf(cmd, sizeof cmd, "%s explain batch %s %s --policy cuda_malloc --steady", b, p[0], p[1]);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, "step 1") != NULL && strstr(out, p[0]) != NULL, "%s", out);
	for (int i = 0; i < 3; i++)
		unlink(p[i]);
}

/* whatif steady keeps what is live across the cut and drops the rest. */
Test(whatif_cli, whatif_steady)
{
	const char *b = th_bin();
	char p[128], q[128], cmd[2048], out[16384];
	th_tmpname(p, sizeof p, "whatif_st");
	th_tmpname(q, sizeof q, "whatif_sto");
	write_capture(p, 8, 16 * MiB, 0);
	snprintf(cmd, sizeof cmd, "%s whatif steady %s -o %s --from-range conv1.fwd", b, p, q);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	snprintf(cmd, sizeof cmd, "%s run %s --policy cuda_malloc --no-db --json --quiet", b, q);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	/* the workspace (16 MiB) is inside the range, so it stays: 4 + 8 + 16 */
	cr_assert(strstr(out, "\"peak_allocated\":29360128") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s whatif steady %s -o %s", b, p, q);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 1, "%s", out);
	cr_assert(strstr(out, "no NVTX range 'step 1'") != NULL, "%s", out);
	snprintf(cmd, sizeof cmd, "%s whatif steady %s", b, p);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 2, "%s", out);
	unlink(p);
	unlink(q);
}

/* A PyTorch capture's convolution workspaces are asked for again at half
 * the size when they do not fit (PyTorch's cuDNN path): weights 4 MiB,
 * an activation of batch MiB, a 50 MiB workspace in conv1.fwd. Under
 * cuda_malloc in 100 MiB the workspace shrinks away and batch 96 fits;
 * the CUDA C CNN (no workload label here) does not shrink: 46. The same
 * for a 30 MiB workspace outside any range (found by its nesting): 66. */
Test(whatif_cli, maxbatch_torch_workspace_shrinks)
{
	const char *b = th_bin();
	char p1[128], p2[128], cmd[2048], out[16384];
	th_tmpname(p1, sizeof p1, "whatif_s");
	th_tmpname(p2, sizeof p2, "whatif_s");
	static const struct { uint64_t ws; int extra; const char *wl; const char *want; } cases[] = {
		{50 * MiB, 0, "torch", "\"max_batch\":96,"},
		{50 * MiB, 0, NULL, "\"max_batch\":46,"},
		{50 * MiB, 0, "cnn", "\"max_batch\":46,"},
		{0, 3, "torch", "\"max_batch\":96,"},
		{0, 3, NULL, "\"max_batch\":66,"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		write_capture_wl(p1, 8, cases[i].ws, cases[i].extra, cases[i].wl);
		write_capture_wl(p2, 16, cases[i].ws, cases[i].extra, cases[i].wl);
		snprintf(cmd, sizeof cmd, "%s maxbatch --from %s %s --policy cuda_malloc --capacity "
			 "100MiB --max 1000 --json", b, p1, p2);
		cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
		cr_assert(strstr(out, cases[i].want) != NULL, "case %zu: %s", i, out);
		int torch = cases[i].wl && !strcmp(cases[i].wl, "torch");
		cr_assert_eq(strstr(out, "\"workspace_retries\":0,") == NULL, torch,
			     "case %zu: workspaces cut in a PyTorch capture only: %s", i, out);
	}
	unlink(p1);
	unlink(p2);
}

/* Against the real thing: ResNet-50 under torch.cuda.set_per_process_memory_fraction(0.02)
 * on the H200 (traces/measurements/maxbatch/heldout: batch 29 ran its
 * three steps, 30 ran out of memory), from the shipped captures at 16-128.
 * Before the workspaces shrank the answer was "none fits". */
Test(whatif_cli, maxbatch_resnet50_fraction_real)
{
	char cmd[1024], out[16384];
	snprintf(cmd, sizeof cmd, "%s maxbatch --from traces/torch/torch-resnet50-b16.trace.gz "
		 "traces/torch/torch-resnet50-b32.trace.gz traces/torch/torch-resnet50-b64.trace.gz "
		 "traces/torch/torch-resnet50-b128.trace.gz --policy pytorch --conf fraction:0.02 "
		 "--capacity 150109880320B --margin 0", th_bin());
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "largest batch  29 ") != NULL, "%s", out);
	cr_assert(strstr(out, "workspaces were cut") != NULL, "%s", out);
}
