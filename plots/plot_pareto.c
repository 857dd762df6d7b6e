/*
 * plot_pareto.c: `gpumemsim plot pareto`: predicted step time against peak
 * reserved, one point per setting, the Pareto front per trace.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "plot_int.h"

#define PLOT_MAX_PARETO_TRACES 12

static int cmp_pareto(const void *a, const void *b)
{
	const struct plot_run *x = *(const struct plot_run *const *)a;
	const struct plot_run *y = *(const struct plot_run *const *)b;
	if (x->step_time_ns != y->step_time_ns)
		return x->step_time_ns < y->step_time_ns ? -1 : 1;
	if (x->peak_reserved != y->peak_reserved)
		return x->peak_reserved < y->peak_reserved ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Step time against peak reserved, one colour per trace; the front joins
 * the runs no other run of the trace beats on both time and memory. */
int fig_pareto(struct fig *f, const struct plot_run *runs, int n, char *err,
	       size_t errlen)
{
	const struct plot_run **pt = malloc((size_t)n * sizeof *pt);
	uint32_t crcs[PLOT_MAX_PARETO_TRACES];
	int ncrc = 0, nt = 0, left_out = 0, nhost = 0, ret = -1;
	double ymax = 0, live_top = 0, xmax = 0, vis = 0;
	char b1[128], b3[32];
	FILE *d = NULL;
	if (!pt) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!runs[i].timed || !runs[i].step_time_ns || !strcmp(runs[i].policy, "optimal")) {
			left_out += !runs[i].timed || runs[i].step_time_ns == 0;
			continue;
		}
		int k = 0;
		while (k < ncrc && crcs[k] != runs[i].trace_crc32)
			k++;
		if (k == ncrc) {
			if (ncrc == PLOT_MAX_PARETO_TRACES) {
				snprintf(err, errlen, "the Pareto figure draws at most %d traces: narrow "
					 "the selection with --where or --label", PLOT_MAX_PARETO_TRACES);
				goto out;
			}
			crcs[ncrc++] = runs[i].trace_crc32;
		}
		pt[nt++] = &runs[i];
		if (gib(runs[i].peak_allocated) > live_top)
			live_top = gib(runs[i].peak_allocated);
		if (gib(runs[i].peak_reserved) > ymax)
			ymax = gib(runs[i].peak_reserved);
		if (runs[i].step_time_ns / 1e6 > xmax)
			xmax = runs[i].step_time_ns / 1e6;
	}
	if (!nt) {
		snprintf(err, errlen, "no selected run has a predicted step time (%d without): run "
			 "`gpumemsim run TRACE --timing` on a trace with steps (docs/timing.md)",
			 left_out);
		goto out;
	}
	/* only a run far above the median (BFC's whole-device preset) is
	 * clipped: reserved, not live, bytes are what this figure compares */
	{
		double *v = malloc((size_t)nt * sizeof *v);
		if (!v) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		for (int i = 0; i < nt; i++)
			v[i] = gib(pt[i]->peak_reserved);
		for (int i = 1; i < nt; i++)
			for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
				double t = v[j];
				v[j] = v[j - 1];
				v[j - 1] = t;
			}
		if (v[nt / 2] > live_top)
			live_top = v[nt / 2];
		free(v);
	}
	for (int i = 0; i < nt; i++) {
		double v = on_scale(gib(pt[i]->peak_reserved), live_top);
		vis = v > vis ? v : vis;
	}
	int clipped;
	double top = y_top(ymax, live_top, vis, &clipped);
	d = fig_file(f, "pareto.dat", err, errlen);
	if (!d)
		goto out;
	fputs("# per trace two blocks: step_ms reserved_GiB(clipped) on_front label host_bound;"
	      " the front\n", d);
	for (int c = 0; c < ncrc; c++) {
		const struct plot_run *tr[64];
		int m = 0;
		for (int i = 0; i < nt && m < 64; i++)
			if (pt[i]->trace_crc32 == crcs[c])
				tr[m++] = pt[i];
		qsort(tr, (size_t)m, sizeof *tr, cmp_pareto);
		if (c)
			fputs("\n\n", d);
		fprintf(d, "# trace %s\n", trace_title(tr[0], b1, sizeof b1));
		uint64_t best = UINT64_MAX;
		int front[64];
		double px[64], py[64];
		static char lab[64][320];
		for (int i = 0; i < m; i++) {
			front[i] = tr[i]->peak_reserved < best;
			if (front[i])
				best = tr[i]->peak_reserved;
			double y = gib(tr[i]->peak_reserved);
			plot_run_setting(tr[i], b1, sizeof b1);
			for (char *p = b1; *p; p++)
				if (*p == '"')
					*p = '\'';
			/* the label is made in LI, then either appended to an earlier
			 * one or kept: appending one row of LAB to another (j < i, never
			 * the same) reads to GCC's -Wrestrict as a possible overlap */
			char li[sizeof lab[0]];
			if (y > top)
				snprintf(li, sizeof li, "%s (%s, off scale)", b1,
					 size_fmt(tr[i]->peak_reserved, b3, sizeof b3));
			else
				snprintf(li, sizeof li, "%s", b1);
			px[i] = tr[i]->step_time_ns / 1e6;
			py[i] = y > top ? top * 0.97 : y;
			/* settings that land on (nearly) one point share one label,
			 * instead of printing over each other */
			int shared = 0;
			for (int j = 0; j < i; j++) {
				if (!lab[j][0] || fabs(px[j] - px[i]) > 0.02 * xmax * 1.25 ||
				    fabs(py[j] - py[i]) > 0.03 * top)
					continue;
				size_t k = strlen(lab[j]);
				snprintf(lab[j] + k, sizeof lab[j] - k, ", %s", li);
				shared = 1;
				break;
			}
			if (shared)
				lab[i][0] = 0;
			else
				memcpy(lab[i], li, strlen(li) + 1);
		}
		for (int i = 0; i < m; i++) {
			/* host-bound: the prediction carries the host's speed, which
			 * differs between processes (docs/timing.md) */
			int host = plot_run_host_bound(tr[i]) == 1;
			nhost += host;
			fprintf(d, "%.6f %.6f %d \"%s\" %d\n", px[i], py[i], front[i], lab[i], host);
		}
		/* the front alone, so its line has no gaps */
		fprintf(d, "\n\n# Pareto front\n");
		for (int i = 0; i < m; i++)
			if (front[i])
				fprintf(d, "%.6f %.6f\n", tr[i]->step_time_ns / 1e6,
					gib(tr[i]->peak_reserved) > top ? top * 0.97
									: gib(tr[i]->peak_reserved));
	}
	if (fig_close_file(d, "pareto.dat", err, errlen) < 0) {
		d = NULL;
		goto out;
	}
	d = NULL;
	FILE *gp = f->gp;
	char title[512], cw[128];
	snprintf(title, sizeof title, "Predicted step time against peak reserved memory, per "
		 "allocator setting%s\nline: the Pareto front of each trace (no other setting is "
		 "both faster and smaller)", capacity_words(runs, n, cw, sizeof cw));
	fputs("set title ", gp);
	gp_str(gp, title);
	fputc('\n', gp);
	if (left_out)
		fprintf(gp, "set label 1 \"%d run%s without a predicted step time left out "
			"(run with --timing)\" at graph 0.01, graph -0.12 font ',10'\n", left_out,
			left_out == 1 ? "" : "s");
	fprintf(gp, "set xlabel 'predicted mean step time (ms, first step excluded)'\n"
		"set ylabel 'peak reserved (GiB)'\nset xrange [0:%.6f]\nset yrange [0:%.6f]\n"
		"set grid xtics ytics lc rgb '#d8d8d8'\n"
		"set key outside right top vertical Left reverse font ',11'\n", xmax * 1.25, top);
	fputs("plot ", gp);
	for (int c = 0; c < ncrc; c++) {
		const struct plot_run *r0 = NULL;
		for (int i = 0; i < nt && !r0; i++)
			if (pt[i]->trace_crc32 == crcs[c])
				r0 = pt[i];
		if (c)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "pareto.dat");
		fprintf(gp, " index %d using 1:2 with linespoints lt %d lw 2 pt 7 "
			"title ", 2 * c + 1, c + 1);
		gp_str(gp, trace_title(r0, b1, sizeof b1));
		fputs(", ", gp);
		gp_data(gp, f, "pareto.dat");
		fprintf(gp, " index %d using 1:2 with points lt %d pt 6 ps 1.6 notitle, ", 2 * c,
			c + 1);
		gp_data(gp, f, "pareto.dat");
		fprintf(gp, " index %d using 1:2:4 with labels left offset 1,0.4 font ',9' "
			"tc lt %d notitle", 2 * c, c + 1);
	}
	if (nhost) {
		/* one key entry for them all, the marks drawn per trace */
		for (int c = 0; c < ncrc; c++) {
			fputs(", \\\n  ", gp);
			gp_data(gp, f, "pareto.dat");
			fprintf(gp, " index %d using 1:($5 == 1 ? $2 : 1/0) with points lc rgb '#555555' "
				"pt 4 ps 2.4 ", 2 * c);
			if (c) {
				fputs("notitle", gp);
			} else {
				fputs("title ", gp);
				gp_str(gp, "host-bound (host speed: ±25%)");
			}
		}
	}
	fputc('\n', gp);
	ret = 0;
out:
	if (d)
		fclose(d);
	free(pt);
	return ret;
}
