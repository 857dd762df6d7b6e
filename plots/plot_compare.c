/*
 * plot_compare.c: `gpumemsim plot compare`: one trace, per setting its peak
 * reserved against the floor and its device allocation counts. The title
 * names the capacity; when the selection holds several, each bar's label
 * says its capacity (the report draws one capacity a figure). The figure
 * grows with the bars so that wrapped labels never overlap.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "plot_int.h"

/* The bar's label: the setting, with " @ 8.00 GiB" when CAPS. */
static const char *bar_name(const struct plot_run *r, int caps, char *buf, size_t len)
{
	char s[128], c[32];
	plot_run_setting(r, s, sizeof s);
	if (caps)
		snprintf(buf, len, "%s @ %s", s,
			 r->capacity ? size_fmt(r->capacity, c, sizeof c) : "unlimited");
	else
		snprintf(buf, len, "%s", s);
	return buf;
}

/* Horizontal bars: settings read as plain text on the y axis at any length. */
int fig_compare(struct fig *f, const struct plot_run *runs, int n, char *err,
		size_t errlen)
{
	char b1[160], b2[64], b3[32], cw[48];
	int caps;
	if (need_one_trace(runs, n, "the policy comparison", err, errlen) < 0)
		return -1;
	runs_capacity(runs, n, &caps);
	int from_opt;
	uint64_t floor_b = trace_floor(runs, n, runs[0].trace_crc32, &from_opt);
	double floor_g = gib(floor_b), data_top = floor_g, live_top = floor_g, vis = floor_g;
	uint64_t dmax = 0, dmin = UINT64_MAX;
	int nb = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(runs[i].policy, "optimal"))
			continue;
		nb++;
		if (gib(runs[i].peak_allocated) > live_top)
			live_top = gib(runs[i].peak_allocated);
	}
	if (!nb) {
		snprintf(err, errlen, "the selection holds only the optimal policy: nothing to compare");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!strcmp(runs[i].policy, "optimal"))
			continue;
		double v = gib(runs[i].peak_reserved);
		data_top = v > data_top ? v : data_top;
		vis = on_scale(v, live_top) > vis ? v : vis;
		dmax = runs[i].device_allocs > dmax ? runs[i].device_allocs : dmax;
		dmin = runs[i].device_allocs < dmin ? runs[i].device_allocs : dmin;
	}
	int clipped;
	double top = y_top(data_top, live_top, vis, &clipped);
	/* the capacity, when it is one and worth a line (see the file comment) */
	uint64_t cap = caps ? 0 : runs[0].capacity;
	int show_cap = cap && gib(cap) < 2.0 * top / 1.1;
	if (show_cap && gib(cap) * 1.08 > top)
		top = gib(cap) * 1.08;
	FILE *d = fig_file(f, "compare.dat", err, errlen);
	if (!d)
		return -1;
	fputs("# y setting peak_reserved_GiB bar_end_GiB label_x label device_allocs colour "
	      "off_scale\n", d);
	int k = 0, noff = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(runs[i].policy, "optimal"))
			continue;
		double v = gib(runs[i].peak_reserved);
		int off = v > top;
		noff += off;
		bar_name(&runs[i], caps, b1, sizeof b1);
		for (char *p = b1; *p; p++)
			if (*p == '"')
				*p = '\'';
		snprintf(b2, sizeof b2, "%s%s%s", size_fmt(runs[i].peak_reserved, b3, sizeof b3),
			 off ? " (off scale)" : "", runs[i].oom ? " OOM" : "");
		/* an off-scale bar's value sits inside its end, right-aligned,
		 * clear of the floor line */
		fprintf(d, "%d \"%s\" %.6f %.6f %.6f \"%s\" %" PRIu64 " %d %d\n", nb - 1 - k++, b1,
			v, off ? top : v, off ? top : v, b2, runs[i].device_allocs,
			runs[i].oom ? 0xe06060 : 0x6baed6, off);
	}
	if (fig_close_file(d, "compare.dat", err, errlen) < 0)
		return -1;
	FILE *gp = f->gp;
	int logx = dmin > 0 && dmax / dmin >= 50;
	char title[512];
	snprintf(title, sizeof title, "Allocator settings compared, %s%s\nred: a simulated OOM "
		 "(its peak is where it stopped); step time against memory: the pareto figure",
		 trace_title(&runs[0], b1, sizeof b1), capacity_words(runs, n, cw, sizeof cw));
	/* about 24 px a bar at most: taller when there are many */
	if (nb > 16) {
		int h = 700 + 30 * (nb - 16);
		if (f->fmt == PLOT_FMT_PNG)
			fprintf(gp, "set terminal pngcairo size 1200,%d font 'DejaVu Sans,13' "
				"noenhanced\n", h);
		else
			fprintf(gp, "set terminal svg size 1200,%d font 'DejaVu Sans,13' noenhanced "
				"background rgb 'white'\n", h);
	}
	fputs("set multiplot title ", gp);
	gp_str(gp, title);
	fputs(" font ',14'\n", gp);
	fprintf(gp, "set yrange [-0.6:%d.6]\nset style fill solid 0.9 border rgb '#333333'\n"
		"unset grid\nset grid xtics lc rgb '#d8d8d8'\nset tmargin at screen 0.86\n"
		"set bmargin at screen 0.1\nset ytics nomirror scale 0 font ',11'\nunset key\n", nb - 1);
	/* long settings wrap at their commas instead of running off the left */
	fputs("set ytics (", gp);
	k = 0;
	for (int i = 0; i < n; i++) {
		char w[256];
		if (!strcmp(runs[i].policy, "optimal"))
			continue;
		bar_name(&runs[i], caps, b1, sizeof b1);
		wrap_label(b1, w, sizeof w, 42);
		if (k)
			fputs(", ", gp);
		gp_str(gp, w);
		fprintf(gp, " %d", nb - 1 - k++);
	}
	fputs(")\n", gp);
	fprintf(gp, "set lmargin at screen 0.3\nset rmargin at screen 0.64\n"
		"set xrange [0:%.6f]\nset xlabel 'peak reserved (GiB)'\n", top);
	if (floor_b) {
		fprintf(gp, "set title \"peak reserved (dashed: floor, %s %s%s)\"\n",
			from_opt ? "optimal policy" : "peak of live requests",
			size_fmt(floor_b, b3, sizeof b3), show_cap ? ", red: capacity" : "");
		fprintf(gp, "set arrow 1 from %.6f, graph 0 to %.6f, graph 1 nohead lw 2 dt 2 "
			"lc rgb '#000000' front\n", floor_g, floor_g);
	} else {
		fprintf(gp, "set title \"peak reserved (floor unknown: every run OOM)\"\n");
	}
	if (show_cap)
		fprintf(gp, "set arrow 2 from %.6f, graph 0 to %.6f, graph 1 nohead lw 2.5 dt 3 "
			"lc rgb '#c00000' front\n", gib(cap), gib(cap));
	fputs("plot ", gp);
	gp_data(gp, f, "compare.dat");
	/* each label term only when it has a point: gnuplot 5.4 crashes on a
	 * labels plot whose every point is undefined */
	fputs(" using 3:1:(0):4:($1-0.35):($1+0.35):8 with boxxyerror lc rgb variable", gp);
	if (noff < nb) {
		fputs(", \\\n  ", gp);
		gp_data(gp, f, "compare.dat");
		fputs(" using ($9 > 0 ? 1/0 : $5):1:6 with labels left offset 0.5,0 font ',11'", gp);
	}
	if (noff) {
		fputs(", \\\n  ", gp);
		gp_data(gp, f, "compare.dat");
		fputs(" using ($9 > 0 ? $5 : 1/0):1:6 with labels right offset -0.5,0 font ',11' "
		      "tc rgb '#ffffff'", gp);
	}
	fputc('\n', gp);
	fputs("unset arrow\nset lmargin at screen 0.68\nset rmargin at screen 0.96\n"
	      "unset ytics\n", gp);
	fprintf(gp, "set title 'device allocations'\nset xlabel 'cudaMalloc + map calls%s'\n",
		logx ? " (log scale)" : "");
	if (logx)
		fprintf(gp, "set logscale x\nset xrange [0.8:%.1f]\n", (double)dmax * 6);
	else
		fprintf(gp, "set xrange [0:%.1f]\n", (double)dmax * 1.25 + 1);
	fputs("plot ", gp);
	gp_data(gp, f, "compare.dat");
	fprintf(gp, " using 7:1:(%s):7:($1-0.35):($1+0.35):8 with boxxyerror lc rgb variable, \\\n  ",
		logx ? "0.8" : "0");
	gp_data(gp, f, "compare.dat");
	fputs(" using 7:1:(sprintf('%d', $7)) with labels left offset 0.5,0 font ',11'\n", gp);
	fputs("unset multiplot\n", gp);
	return 0;
}
