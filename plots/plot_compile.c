/*
 * plot_compile.c: the figure of `whatif compile --figure` (plot.h,
 * plot_compile): bytes allocated over the steady steps of the eager
 * capture, of the program after the partitioner and layout stage, and of
 * the compiled program, each replayed under the report's policy; the
 * peaks marked. The three replays share the capture's host clock (the
 * transforms keep every record's time), so the lines line up step by step
 * and show where in the step compiling removes memory. Drawn from
 * compile_apply's result, not from the database; deterministic.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../base/size.h"
#include "../sim/engine.h"
#include "../whatif/compile.h"
#include "plot_int.h"

static const char *const series[] = {"eager (the capture)", "partitioner and layout",
				     "compiled (and fused)"};

/* One data block per series: time (ms from T0), GiB, the points in [T0, T1]. */
static void block(FILE *d, const struct compile_peaks *p, int k, uint64_t t0, uint64_t t1)
{
	fprintf(d, "# %s: t (ms), allocated (GiB)\n", series[k]);
	for (size_t i = 0; i < p->ntimeline; i++)
		if (p->timeline[i].t >= t0 && p->timeline[i].t <= t1)
			fprintf(d, "%.4f %.6f\n", (p->timeline[i].t - t0) / 1e6,
				gib(p->timeline[i].allocated));
	fputs("\n\n", d);
}

/* The window of the steps: from the first to the last point where the
 * eager capture holds a quarter of its peak or more (a capture starts with
 * seconds of autotuning and loading at a few percent of it), widened by a
 * twentieth on each side. */
static void window(const struct compile_peaks *e, uint64_t *t0, uint64_t *t1)
{
	size_t a = e->ntimeline, b = 0;
	for (size_t i = 0; i < e->ntimeline; i++)
		if (4 * e->timeline[i].allocated >= e->allocated) {
			if (a == e->ntimeline)
				a = i;
			b = i;
		}
	if (a == e->ntimeline) {
		*t0 = 0;
		*t1 = UINT64_MAX;
		return;
	}
	uint64_t lo = e->timeline[a].t, hi = e->timeline[b].t, m = (hi - lo) / 20;
	*t0 = lo > m ? lo - m : 0;
	*t1 = hi + m;
}

int plot_compile(const struct compile_report *rep, const char *trace, const char *out,
		 const char *data_dir, char *err, size_t errlen)
{
	struct plot_request req = {.kind = PLOT_COMPILE, .out = out, .data_dir = data_dir};
	const struct compile_peaks *p[3] = {&rep->before, &rep->partitioned, &rep->after};
	struct fig f;
	int ok = 0;
	double top = 0;
	for (int k = 0; k < 3; k++) {
		if (!p[k]->ntimeline) {
			snprintf(err, errlen, "no timeline to draw (the replays kept none)");
			return -1;
		}
		if (gib(p[k]->allocated) > top)
			top = gib(p[k]->allocated);
	}
	if (fig_begin(&f, &req, err, errlen) < 0)
		return -1;
	FILE *d = fig_file(&f, "allocated.dat", err, errlen);
	if (!d)
		goto end;
	uint64_t t0, t1;
	window(&rep->before, &t0, &t1);
	for (int k = 0; k < 3; k++)
		block(d, p[k], k, t0, t1);
	if (fig_close_file(d, "allocated.dat", err, errlen) < 0)
		goto end;

	FILE *gp = f.gp;
	const char *name = strrchr(trace, '/') ? strrchr(trace, '/') + 1 : trace;
	char title[512], b1[32], b2[32];
	double change = rep->before.allocated
				? 100.0 * ((double)rep->after.allocated / (double)rep->before.allocated - 1)
				: 0;
	snprintf(title, sizeof title, "What torch.compile would do to %s: bytes allocated over the "
		 "steady steps\npeak %s eager -> %s compiled (%+.1f%%)", name,
		 size_fmt(rep->before.allocated, b1, sizeof b1),
		 size_fmt(rep->after.allocated, b2, sizeof b2), change);
	fputs("set title ", gp);
	gp_str(gp, title);
	/* the capture's clock: a no-caching capture's steps are slower than
	 * the program's (step times are whatif compile's report, not this) */
	fprintf(gp, "\nset ylabel 'GiB allocated'\nset xlabel 'ms of the capture (its host clock)'\n"
		"set yrange [0:%.4f]\nset key top right\n", top * 1.4 + 0.01);
	/* the peaks as dashed levels, each in its series' colour */
	for (int k = 0; k < 3; k++)
		fprintf(gp, "set arrow %d from graph 0, first %.6f to graph 1, first %.6f nohead "
			"dt 2 lw 1 lt %d\n", k + 1, gib(p[k]->allocated), gib(p[k]->allocated), k + 1);
	fputs("plot ", gp);
	for (int k = 0; k < 3; k++) {
		fputs(k ? ", \\\n     " : "", gp);
		gp_data(gp, &f, "allocated.dat");
		fprintf(gp, " index %d using 1:2 with steps lt %d lw %s title ", k, k + 1,
			k == 2 ? "2.5" : "1.8");
		char t[96];
		snprintf(t, sizeof t, "%s, peak %s", series[k],
			 size_fmt(p[k]->allocated, b1, sizeof b1));
		gp_str(gp, t);
	}
	fputc('\n', gp);
	ok = 1;
end:
	return fig_end(&f, &req, ok, err, errlen);
}
