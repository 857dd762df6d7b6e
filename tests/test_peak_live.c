/*
 * test_peak_live.c: what is live at the peak (users' question 7) and the
 * NVTX ranges kept with a run. A small trace with known phases: the engine
 * must find the set live at the peak, give each allocation the kind the
 * documented heuristics say, keep only top-level ranges, store both in the
 * peak_live and ranges tables, and `gpumemsim plot live|pareto` must draw
 * them.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../policies/policy.h"
#include "../sim/engine.h"
#include "../sim/store.h"
#include "helpers.h"

#define MIB 1048576ull

/* build: weights W (4 MiB) and a cuDNN workspace L (2 MiB), never freed;
 * step 0: activation A (8 MiB) in conv1.fwd freed in backward, a 1 MiB
 * workspace freed inside conv1.fwd; gradient G (16 MiB) and a 1 MiB
 * workspace B freed inside conv1.bwd after the peak; optimizer state O
 * (2 MiB) after A is gone. Peak: W + L + A + G + B = 31 MiB at B. */
static const char trace_text[] =
	"gpumemsim-trace 1\n"
	"H producer test\n"
	"H total_memory 1073741824\n"
	"S 0 build\nS 1 step 0\nS 2 forward\nS 3 backward\nS 4 optimizer\n"
	"S 5 conv1.fwd\nS 6 /usr/lib/libcudnn.so.9\nS 7 conv1.bwd\n"
	"r 0 100 0 0\n"
	"a 10 0x1000000 4194304 -\n"
	"a 20 0x2000000 2097152 - 3 0 0 6\n"
	"r 200 1000 1 0\n"
	"r 210 500 2 1\n"
	"r 220 300 5 2\n"
	"a 230 0x3000000 8388608 -\n"
	"a 240 0x4000000 1048576 -\n"
	"f 250 0x4000000 0 -\n"
	"r 510 800 3 1\n"
	"r 515 700 7 2\n"
	"a 520 0x5000000 16777216 -\n"
	"a 530 0x7000000 1048576 -\n"
	"f 600 0x3000000 0 -\n"
	"f 650 0x7000000 0 -\n"
	"r 810 900 4 1\n"
	"a 820 0x6000000 2097152 -\n"
	"f 1100 0x5000000 0 -\n"
	"end 18 0\n";

static char trace_path[128];

static void write_trace(void)
{
	th_tmpname(trace_path, sizeof trace_path, "peaklive");
	FILE *f = fopen(trace_path, "w");
	cr_assert_not_null(f);
	fputs(trace_text, f);
	cr_assert_eq(fclose(f), 0);
}

static void run_trace(struct sim_result *r)
{
	char err[512];
	struct sim_options o = {.trace_path = trace_path, .policy = policy_find("cuda_malloc")};
	cr_assert_not_null(o.policy);
	cr_assert_eq(sim_run(&o, r, err, sizeof err), 0, "%s", err);
}

static uint64_t kind_total(const struct sim_result *r, enum sim_live_kind k, uint64_t *count)
{
	uint64_t b = 0, n = 0;
	for (size_t i = 0; i < r->npeak_live; i++)
		if (!r->peak_live[i].rank && r->peak_live[i].kind == k) {
			b += r->peak_live[i].bytes;
			n += r->peak_live[i].count;
		}
	if (count)
		*count = n;
	return b;
}

Test(peak_live, kinds_by_the_heuristics)
{
	struct sim_result r;
	uint64_t n;
	write_trace();
	run_trace(&r);
	cr_assert_eq(kind_total(&r, SIM_LK_WEIGHTS, &n), 4 * MIB);
	cr_assert_eq(n, 1);
	cr_assert_eq(kind_total(&r, SIM_LK_LIBRARY, NULL), 2 * MIB);
	cr_assert_eq(kind_total(&r, SIM_LK_ACTIVATIONS, NULL), 8 * MIB);
	cr_assert_eq(kind_total(&r, SIM_LK_GRADIENTS, NULL), 16 * MIB);
	/* B: freed inside conv1.bwd; the forward workspace died before the peak */
	cr_assert_eq(kind_total(&r, SIM_LK_WORKSPACE, &n), 1 * MIB);
	cr_assert_eq(n, 1);
	/* O came after the peak */
	cr_assert_eq(kind_total(&r, SIM_LK_OPTIMIZER, NULL), 0);
	cr_assert_eq(kind_total(&r, SIM_LK_OTHER, NULL), 0);
	/* the largest first, with its line and layer */
	cr_assert_eq(r.peak_live[0].rank, 1);
	cr_assert_eq(r.peak_live[0].bytes, 16 * MIB);
	cr_assert_eq(r.peak_live[0].line, 23);
	cr_assert_str_eq(r.peak_live[0].layer, "conv1.bwd");
	cr_assert_eq(r.peak_live[1].bytes, 8 * MIB);
	cr_assert_str_eq(r.peak_live[1].layer, "conv1.fwd");
	int ranked = 0;
	for (size_t i = 0; i < r.npeak_live; i++)
		ranked += r.peak_live[i].rank > 0;
	cr_assert_eq(ranked, 5);
	sim_result_free(&r);
	unlink(trace_path);
}

Test(peak_live, top_level_ranges_only)
{
	struct sim_result r;
	write_trace();
	run_trace(&r);
	static const char *const want[] = {"build", "step 0", "forward", "backward", "optimizer"};
	cr_assert_eq(r.nranges, 5);
	for (size_t i = 0; i < 5; i++) {
		cr_assert_str_eq(r.ranges[i].name, want[i]);
		cr_assert_leq(r.ranges[i].t, r.ranges[i].end);
	}
	cr_assert_eq(r.ranges[2].t, 210);
	cr_assert_eq(r.ranges[2].end, 500);
	cr_assert_eq(r.ranges[2].depth, 1);
	sim_result_free(&r);
	unlink(trace_path);
}

static int sum_row(void *ctx, int ncols, const char *const *c)
{
	cr_assert_eq(ncols, 2);
	uint64_t *v = ctx;
	v[0] = c[0] ? strtoull(c[0], NULL, 10) : 0;
	v[1] = c[1] ? strtoull(c[1], NULL, 10) : 0;
	return 0;
}

Test(peak_live, stored_and_deterministic)
{
	struct sim_result r;
	char db[128], err[512];
	int64_t id1, id2;
	uint64_t v[2];
	write_trace();
	th_tmpname(db, sizeof db, "peaklive_db");
	unlink(db);
	struct store *s = store_open(db, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	run_trace(&r);
	cr_assert_eq(store_save_run(s, &r, "test", &id1, err, sizeof err), 0, "%s", err);
	sim_result_free(&r);
	run_trace(&r);
	cr_assert_eq(store_save_run(s, &r, "test", &id2, err, sizeof err), 0, "%s", err);
	sim_result_free(&r);
	cr_assert_eq(store_query(s, "SELECT sum(bytes), count(*) FROM peak_live WHERE rank=0 AND"
				 " run_id=1", NULL, 0, sum_row, v, err, sizeof err), 1, "%s", err);
	cr_assert_eq(v[0], 31 * MIB);
	cr_assert_eq(store_query(s, "SELECT count(*), sum(line IS NULL) FROM ranges r JOIN"
				 " peak_live p ON 0 WHERE 0 UNION ALL SELECT count(*), 0 FROM ranges"
				 " WHERE run_id=2", NULL, 0, sum_row, v, err, sizeof err), 2, "%s", err);
	cr_assert_eq(v[0], 5);
	/* two identical runs: identical rows */
	cr_assert_eq(store_query(s, "SELECT count(*), 0 FROM (SELECT rank, bytes, kind, layer, line,"
				 " count FROM peak_live WHERE run_id=1 EXCEPT SELECT rank, bytes, kind,"
				 " layer, line, count FROM peak_live WHERE run_id=2)", NULL, 0, sum_row, v,
				 err, sizeof err), 1, "%s", err);
	cr_assert_eq(v[0], 0);
	store_close(s);
	unlink(db);
	unlink(trace_path);
}

Test(peak_live, plot_live_and_pareto)
{
	char db[128], dir[160], cmd[1024];
	if (!th_have("gnuplot"))
		cr_skip_test("gnuplot not installed");
	const char *bin = th_bin(); /* skips without the binary, before making files */
	(void)bin;
	write_trace();
	th_tmpname(db, sizeof db, "peaklive_plot");
	unlink(db);
	snprintf(dir, sizeof dir, "%s.d", db);
	cr_assert_eq(th_sh("%s run %s --policy cuda_malloc --timing --db %s >/dev/null", th_bin(), trace_path,
			   db), 0);
	snprintf(cmd, sizeof cmd, "%s plot live --db %s -o %s.png --data-dir %s", th_bin(), db, db, dir);
	cr_assert_eq(th_sh("%s", cmd), 0);
	snprintf(cmd, sizeof cmd, "%s.png", db);
	cr_assert_gt(th_file_size(cmd), 1000);
	snprintf(cmd, sizeof cmd, "%s/live-runs.dat", dir);
	char *d = th_slurp(cmd);
	cr_assert_not_null(d);
	/* 16 MiB of gradients start after 4 + 0 + 8 MiB (weights, optimizer, activations) */
	cr_assert_not_null(strstr(d, "0 0.011719 0.027344"), "%s", d);
	free(d);
	/* the one step's time makes one point, alone on its front */
	cr_assert_eq(th_sh("%s plot pareto --db %s -o %s-p.png --data-dir %s", th_bin(), db, db,
			   dir), 0);
	snprintf(cmd, sizeof cmd, "%s/pareto.dat", dir);
	d = th_slurp(cmd);
	cr_assert(d && strstr(d, " 1 \"cuda_malloc (default)\""), "%s", d ? d : "");
	free(d);
	snprintf(cmd, sizeof cmd, "%s-p.png", db);
	cr_assert_gt(th_file_size(cmd), 1000);
	unlink(cmd);
	th_sh("rm -rf %s %s.png %s.err %s-wal %s-shm", dir, db, db, db, db);
	unlink(db);
	unlink(trace_path);
}

/* A step range the capture wrote late ends late too, after the program's
 * teardown: the teardown's frees still count as never freed (the last
 * step is the one that began last), so the weights stay weights. */
Test(peak_live, a_late_step_range_does_not_move_the_teardown)
{
	th_tmpfile(trace_path, sizeof trace_path, "peaklive",
		   "gpumemsim-trace 1\nS 0 step 0\nS 1 step 1\nS 2 forward\n"
		   "a 1 0x1000 100 -\nr 5 +10 2 1\na 6 0x2000 300 -\n"
		   "r 20 +200 0 0\nf 22 0x2000 300 -\n"
		   "r 30 +10 1 0\na 32 0x3000 50 -\nf 34 0x3000 50 -\n"
		   "f 100 0x1000 100 -\nend 9 0\n");
	struct sim_result r;
	run_trace(&r);
	cr_assert_eq(r.peak_reserved, 400);
	cr_assert_eq(kind_total(&r, SIM_LK_WEIGHTS, NULL), 100, "the weight freed at teardown");
	cr_assert_eq(kind_total(&r, SIM_LK_ACTIVATIONS, NULL), 300);
	sim_result_free(&r);
	unlink(trace_path);
}
