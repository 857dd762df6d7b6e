/*
 * plot_timeline.c: `gpumemsim plot timeline`: allocated and reserved over
 * simulated time, one trace, one line pair per run, first OOMs marked, the
 * first run's NVTX phases shaded behind the curves.
 *
 * More than PLOT_MAX_TIMELINE_RUNS lines would be a tangle (a sweep stores
 * 20 and more runs per trace): the figure then draws each policy's default
 * setting at the largest capacity selected and its subtitle says so,
 * instead of failing. Lines of several capacities say their capacity.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "plot_int.h"

#define PLOT_MAX_TIMELINE_RUNS 12

/* NVTX phases shaded behind the curves: forward, backward, optimizer, and
 * any other top-level range (build, ...); "step" ranges only mark their
 * start with a thin line. */
enum { PH_FWD, PH_BWD, PH_OPT, PH_OTHER, PH_STEP, PH_N };
static const char *const phase_file[PH_N] = {"phase-forward.dat", "phase-backward.dat",
	"phase-optimizer.dat", "phase-other.dat", "phase-steps.dat"};
static const char *const phase_title[PH_N] = {"forward", "backward", "optimizer",
	"other ranges", "step start"};
static const char *const phase_colour[PH_N] = {"#4daf4a", "#e41a1c", "#984ea3", "#999999",
	"#777777"};

struct ph_ctx {
	FILE *f[PH_N];
	int rows[PH_N];
	double tdiv;
};

static int ph_row(void *vctx, int ncols, const char *const *c)
{
	struct ph_ctx *p = vctx;
	if (ncols < 4 || !c[0])
		return 1;
	const char *n = c[0];
	int k;
	if (!strncmp(n, "step", 4) && (n[4] == '\0' || n[4] == ' ' || n[4] == '_'))
		k = PH_STEP;
	else if (strcasestr(n, "backward"))
		k = PH_BWD;
	else if (strcasestr(n, "forward"))
		k = PH_FWD;
	else if (strcasestr(n, "optim"))
		k = PH_OPT;
	else
		k = PH_OTHER;
	fprintf(p->f[k], "%.6f %.6f\n", (double)u64_of(c[2]) / p->tdiv,
		(double)u64_of(c[3]) / p->tdiv);
	p->rows[k]++;
	return 0;
}

/* Write the phase files of run ID; *NPH: how many kinds have rows. */
static int timeline_phases(struct store *s, struct fig *f, int64_t id, double tdiv,
			   struct ph_ctx *p, char *err, size_t errlen)
{
	char idb[24];
	int ret = 0;
	memset(p, 0, sizeof *p);
	p->tdiv = tdiv;
	snprintf(idb, sizeof idb, "%" PRId64, id);
	const char *params[1] = {idb};
	for (int k = 0; k < PH_N; k++) {
		p->f[k] = fig_file(f, phase_file[k], err, errlen);
		if (!p->f[k])
			ret = -1;
		else
			fprintf(p->f[k], "# start end (%s): NVTX %s ranges of run %s\n",
				tdiv == 1e9 ? "s" : "ms", phase_title[k], idb);
	}
	if (!ret && store_query(s, "SELECT name, depth, t_ns, end_ns FROM ranges WHERE run_id=?1"
				" AND depth<=1 ORDER BY t_ns, depth, name", params, 1, ph_row, p, err,
				errlen) < 0)
		ret = -1;
	for (int k = 0; k < PH_N; k++) {
		if (!p->f[k])
			continue;
		if (!p->rows[k])
			fputs("? ?\n", p->f[k]);
		if (fig_close_file(p->f[k], phase_file[k], err, errlen) < 0)
			ret = -1;
		p->f[k] = NULL;
	}
	return ret;
}

struct tl_ctx {
	FILE *f;
	double tdiv;
	double last_a, last_r;
	int rows;
};

static int tl_row(void *vctx, int ncols, const char *const *c)
{
	struct tl_ctx *t = vctx;
	if (ncols < 3)
		return 1;
	t->last_a = gib(u64_of(c[1]));
	t->last_r = gib(u64_of(c[2]));
	fprintf(t->f, "%.6f %.6f %.6f\n", (double)u64_of(c[0]) / t->tdiv, t->last_a, t->last_r);
	t->rows++;
	return 0;
}

/* Too many runs: each policy's default setting at
 * the largest capacity, in the runs' order, into PICK; returns how many. */
static int timeline_pick(const struct plot_run *runs, int n, struct plot_run *pick)
{
	uint64_t cap = 0;
	int np = 0;
	for (int i = 0; i < n; i++)
		cap = runs[i].capacity > cap ? runs[i].capacity : cap;
	for (int i = 0; i < n && np < PLOT_MAX_TIMELINE_RUNS; i++)
		if (runs[i].capacity == cap && !*runs[i].conf)
			pick[np++] = runs[i];
	if (!np) /* no default setting stored: the first runs at that capacity */
		for (int i = 0; i < n && np < PLOT_MAX_TIMELINE_RUNS; i++)
			if (runs[i].capacity == cap)
				pick[np++] = runs[i];
	return np;
}

int fig_timeline(struct store *s, struct fig *f, const struct plot_run *all, int nall,
		 char *err, size_t errlen)
{
	char b1[64], b2[96], b3[32], cw[48], picked[160] = "";
	struct plot_run pick[PLOT_MAX_TIMELINE_RUNS];
	const struct plot_run *runs = all;
	int n = nall, several;
	if (need_one_trace(all, nall, "the timeline", err, errlen) < 0)
		return -1;
	if (nall > PLOT_MAX_TIMELINE_RUNS) {
		n = timeline_pick(all, nall, pick);
		runs = pick;
		snprintf(picked, sizeof picked, "\neach policy's default setting (%d of the %d runs "
			 "selected; narrow with --where to choose)", n, nall);
	}
	runs_capacity(runs, n, &several);
	uint64_t tmax = 0, amax = 0, rmax = 0;
	double vis = 0;
	for (int i = 0; i < n; i++)
		amax = runs[i].peak_allocated > amax ? runs[i].peak_allocated : amax;
	for (int i = 0; i < n; i++) {
		double v = on_scale(gib(runs[i].peak_reserved), gib(amax));
		vis = v > vis ? v : vis;
		/* the timeline is in simulated time: a timed replay may end
		 * well before the trace did */
		uint64_t d = runs[i].sim_duration_ns;
		tmax = d > tmax ? d : tmax;
		amax = runs[i].peak_allocated > amax ? runs[i].peak_allocated : amax;
		rmax = runs[i].peak_reserved > rmax ? runs[i].peak_reserved : rmax;
	}
	int in_s = tmax >= 10000000000ull;
	double tdiv = in_s ? 1e9 : 1e6;
	FILE *d = fig_file(f, "timeline.dat", err, errlen);
	if (!d)
		return -1;
	fputs("# time(ms or s) allocated_GiB reserved_GiB; one block per run\n", d);
	for (int i = 0; i < n; i++) {
		char id[24];
		snprintf(id, sizeof id, "%" PRId64, runs[i].id);
		const char *params[1] = {id};
		struct tl_ctx t = {.f = d, .tdiv = tdiv};
		if (i)
			fputs("\n\n", d);
		fprintf(d, "# run %s: %s\n", id, plot_run_setting(&runs[i], b2, sizeof b2));
		if (store_query(s, "SELECT t_ns, allocated, reserved FROM timeline WHERE run_id=?1"
				" ORDER BY t_ns", params, 1, tl_row, &t, err, errlen) < 0) {
			fclose(d);
			return -1;
		}
		/* Steps hold the last level to the end of the run. */
		uint64_t end = runs[i].sim_duration_ns;
		fprintf(d, "%.6f %.6f %.6f\n", (double)end / tdiv, t.last_a, t.last_r);
	}
	if (fig_close_file(d, "timeline.dat", err, errlen) < 0)
		return -1;
	int noom = 0;
	d = fig_file(f, "oom.dat", err, errlen);
	if (!d)
		return -1;
	fputs("# time allocated_GiB: each run's first simulated OOM\n", d);
	for (int i = 0; i < n; i++)
		if (runs[i].has_oom_detail && ++noom)
			fprintf(d, "%.6f %.6f\n", (double)runs[i].oom_t_ns / tdiv,
				gib(runs[i].oom_allocated));
	if (!noom)
		fputs("? ?\n", d);
	if (fig_close_file(d, "oom.dat", err, errlen) < 0)
		return -1;
	struct ph_ctx ph;
	if (timeline_phases(s, f, runs[0].id, tdiv, &ph, err, errlen) < 0)
		return -1;
	int nph = 0;
	for (int k = 0; k < PH_N; k++)
		nph += ph.rows[k] > 0;

	FILE *gp = f->gp;
	int clipped, ncaps;
	double top = y_top(gib(rmax), gib(amax), vis, &clipped);
	top = capacity_lines(gp, runs, n, top, &ncaps);
	/* short lines: the title centres over the plot, left of the key, and a
	 * long line runs off the figure's left edge */
	fputs("set title ", gp);
	snprintf(b1, sizeof b1, "%s", trace_title(&runs[0], b2, sizeof b2));
	char title[640];
	snprintf(title, sizeof title, "Device memory over time, %s%s\nsolid: reserved   dashed: "
		 "allocated%s%s", b1, capacity_words(runs, n, cw, sizeof cw),
		 nph ? "   shaded: NVTX phases of the first run" : "", picked);
	gp_str(gp, title);
	fprintf(gp, "\nset xlabel 'simulated time (%s)'\nset ylabel 'memory (GiB)'\n",
		in_s ? "s" : "ms");
	fprintf(gp, "set xrange [0:%.6f]\nset yrange [0:%.6f]\n", (double)tmax / tdiv * 1.02, top);
	fputs("set key outside right top vertical Left reverse font ',11' samplen 2.5\n", gp);
	fputs("plot ", gp);
	for (int k = 0; k < PH_N; k++) {
		if (!ph.rows[k])
			continue;
		gp_data(gp, f, phase_file[k]);
		if (k == PH_STEP)
			fprintf(gp, " using 1:(%.6f) with impulses lc rgb '%s' lw 1 dt 3 title '%s', \\\n  ",
				top, phase_colour[k], phase_title[k]);
		else
			fprintf(gp, " using (($1+$2)/2):(%.6f):(($2-$1)/2):(%.6f) with boxxyerror "
				"fs transparent solid 0.13 noborder lc rgb '%s' title '%s', \\\n  ",
				top / 2, top / 2, phase_colour[k], phase_title[k]);
	}
	for (int i = 0; i < n; i++) {
		char t2[192];
		plot_run_setting(&runs[i], b2, sizeof b2);
		if (several) {
			size_t l = strlen(b2);
			snprintf(b2 + l, sizeof b2 - l, " @ %s", runs[i].capacity ?
				 size_fmt(runs[i].capacity, b3, sizeof b3) : "unlimited");
		}
		if (runs[i].peak_reserved && gib(runs[i].peak_reserved) > top)
			snprintf(t2, sizeof t2, "%s (%s, off scale)", b2,
				 size_fmt(runs[i].peak_reserved, b3, sizeof b3));
		else
			snprintf(t2, sizeof t2, "%s", b2);
		if (i)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "timeline.dat");
		fprintf(gp, " index %d using 1:3 with steps lt %d lw 2.5 title ", i, i + 1);
		gp_str(gp, t2);
		fputs(", ", gp);
		gp_data(gp, f, "timeline.dat");
		fprintf(gp, " index %d using 1:2 with steps lt %d lw 1.5 dt 2 notitle", i, i + 1);
	}
	if (noom) {
		fputs(", \\\n  ", gp);
		gp_data(gp, f, "oom.dat");
		fputs(" using 1:2 with points pt 2 ps 2.5 lw 3 lc rgb '#c00000' title 'first OOM'", gp);
	}
	plot_capacity_terms(gp, ncaps);
	fputc('\n', gp);
	return 0;
}
