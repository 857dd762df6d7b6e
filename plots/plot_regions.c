/*
 * plot_regions.c: the figure of `explain batch --figure` (plot.h,
 * plot_regions): per batch size, the regions or segments the policy held
 * at the moment of the peak as stacked bars, bottom up in the order they
 * were taken (whole free ones light, the growth that set the peak
 * orange), the bytes live then as a line, and each flagged step marked
 * between its two bars with its mechanism in a few words. Drawn from explain_batch's result,
 * not from the database; deterministic (the script and the data depend
 * on the result only).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "plot_int.h"
#include "../base/size.h"
#include "../whatif/explain.h"

/* One rectangle of class CLS (0 used, 1 wholly free, 2 set the peak) into
 * the data block of that class. */
static void rect(FILE *d, double x, double y0, double y1)
{
	fprintf(d, "%.3f %.6f %.6f\n", x, y0, y1);
}

/* The rectangles of class CLS of every point, one data block. */
static void rects(FILE *d, const struct explain_result *r, int cls)
{
	fprintf(d, "# class %d: x, y0 (GiB), y1 (GiB)\n", cls);
	int any = 0;
	for (size_t i = 0; i < r->np; i++) {
		const struct explain_mech *m = &r->p[i].mech;
		uint64_t y = 0;
		for (size_t k = 0; k < m->nhold; k++) {
			const struct explain_hold *h = &m->hold[k];
			int c = m->last.nth && h->nth == m->last.nth ? 2 : h->live ? 0 : 1;
			if (c == cls) {
				rect(d, (double)i, gib(y), gib(y + h->bytes));
				any = 1;
			}
			y += h->bytes;
		}
		if (m->rest_bytes && cls == (m->rest_live ? 0 : 1)) {
			rect(d, (double)i, gib(y), gib(y + m->rest_bytes));
			any = 1;
		}
	}
	if (!any)
		fputs("-1 0 0\n", d); /* an empty block would end the file early */
	fputs("\n\n", d);
}

int plot_regions(const struct explain_result *r, const char *policy, const char *conf,
		 const char *out, const char *data_dir, char *err, size_t errlen)
{
	struct plot_request req = {.kind = PLOT_REGIONS, .out = out, .data_dir = data_dir};
	struct fig f;
	int ok = 0, any = 0;
	double top = 0;
	for (size_t i = 0; i < r->np; i++) {
		any |= r->p[i].mech.have;
		if (gib(r->p[i].reserved) > top)
			top = gib(r->p[i].reserved);
	}
	if (!any) {
		snprintf(err, errlen, "policy %s reports no decisions: no regions to draw", policy);
		return -1;
	}
	if (fig_begin(&f, &req, err, errlen) < 0)
		return -1;
	FILE *d = fig_file(&f, "held.dat", err, errlen);
	if (!d)
		goto end;
	for (int c = 0; c < 3; c++)
		rects(d, r, c);
	if (fig_close_file(d, "held.dat", err, errlen) < 0)
		goto end;
	d = fig_file(&f, "live.dat", err, errlen);
	if (!d)
		goto end;
	fputs("# x, batch, live bytes at the peak (GiB), peak reserved (GiB)\n", d);
	for (size_t i = 0; i < r->np; i++)
		fprintf(d, "%zu %" PRIu64 " %.6f %.6f\n", i, r->p[i].batch, gib(r->p[i].allocated),
			gib(r->p[i].reserved));
	if (fig_close_file(d, "live.dat", err, errlen) < 0)
		goto end;

	FILE *gp = f.gp;
	const char *what = "ranges";
	for (size_t i = 0; i < r->np; i++)
		if (r->p[i].mech.nhold) {
			what = r->p[i].mech.hold[0].what;
			break;
		}
	char title[512];
	snprintf(title, sizeof title, "What %s%s%s held at the peak, per batch size: its %ss "
		 "(bottom up in the order taken)\nagainst the bytes live then; flagged points "
		 "marked with their mechanism", policy, conf && *conf ? " " : "",
		 conf && *conf ? conf : "", what);
	if (f.fmt == PLOT_FMT_PNG)
		fputs("set terminal pngcairo size 1300,800 font 'DejaVu Sans,12' noenhanced\n", gp);
	else
		fputs("set terminal svg size 1300,800 font 'DejaVu Sans,12' noenhanced "
		      "background rgb 'white'\n", gp);
	fputs("set title ", gp);
	gp_str(gp, title);
	fputs("\nset ylabel 'GiB'\nset xlabel 'batch size'\n", gp);
	fprintf(gp, "set xrange [-0.6:%.1f]\nset yrange [0:%.4f]\n", (double)r->np - 0.4,
		top * 1.42 + 0.01);
	fputs("set xtics (", gp);
	for (size_t i = 0; i < r->np; i++)
		fprintf(gp, "%s\"%" PRIu64 "\" %zu", i ? ", " : "", r->p[i].batch, i);
	fputs(")\nset key top left\nset style fill solid 0.9 border lc rgb '#444444'\n", gp);
	/* the flagged steps: a label above the later bar, alternating heights
	 * so that neighbours do not overlap */
	int nl = 0;
	for (size_t i = 0; i + 1 < r->np; i++) {
		const struct explain_step *s = &r->st[i];
		if (!s->flag[0])
			continue;
		char text[160], d1[32];
		snprintf(text, sizeof text, "%s %" PRIu64 "->%" PRIu64 " (%s)\\n%s", s->flag,
			 r->p[i].batch, r->p[i + 1].batch,
			 explain_fmt_delta(s->d[EX_RESERVED], d1, sizeof d1),
			 s->label[0] ? s->label : s->cause);
		double hi = gib(r->p[i].reserved) > gib(r->p[i + 1].reserved) ? gib(r->p[i].reserved)
									    : gib(r->p[i + 1].reserved);
		double y = hi + top * (0.08 + 0.17 * (nl % 2));
		fprintf(gp, "set label %d \"%s\" at %.3f,%.4f center front tc rgb '#b2182b'\n",
			nl + 1, text, (double)i + 0.5, y);
		nl++;
	}
	fprintf(gp, "plot 'held.dat' index 0 using 1:(($2+$3)/2):($1-0.32):($1+0.32):2:3 "
		"with boxxyerror lc rgb '#6a9fd0' title '%s holding live blocks', \\\n"
		"     '' index 1 using 1:(($2+$3)/2):($1-0.32):($1+0.32):2:3 "
		"with boxxyerror lc rgb '#e3e3e3' title '%s wholly free at the peak (cached)', \\\n"
		"     '' index 2 using 1:(($2+$3)/2):($1-0.32):($1+0.32):2:3 "
		"with boxxyerror lc rgb '#f4a261' title 'the %s whose growth set the peak', \\\n"
		"     'live.dat' using 1:3 with linespoints lw 2.5 pt 7 ps 1.1 lc rgb '#111111' "
		"title 'bytes live at the peak'\n", what, what, what);
	ok = 1;
end:
	return fig_end(&f, &req, ok, err, errlen);
}
