/*
 * plot_frag.c: `gpumemsim plot frag`: fragmentation (1 - peak allocated /
 * peak reserved) per setting, bars grouped by trace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot_int.h"

#define PLOT_MAX_FRAG_TRACES 8

int fig_frag(struct fig *f, const struct plot_run *runs, int n, char *err, size_t errlen)
{
	const struct plot_run *traces[PLOT_MAX_FRAG_TRACES];
	int nt = 0;
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int k = 0; k < nt; k++)
			seen |= traces[k]->trace_crc32 == runs[i].trace_crc32;
		if (seen)
			continue;
		if (nt == PLOT_MAX_FRAG_TRACES) {
			snprintf(err, errlen, "the fragmentation figure groups at most %d traces; "
				 "narrow the selection with --where or --label", PLOT_MAX_FRAG_TRACES);
			return -1;
		}
		traces[nt++] = &runs[i];
	}
	/* plot_make passes at least one run (said here for the compiler, which
	 * no longer sees the caller and warns about calloc's size) */
	if (n < 1) {
		snprintf(err, errlen, "no runs");
		return -1;
	}
	/* Settings in the runs' order (optimal last, as a reference). */
	char (*names)[128] = calloc((size_t)n, sizeof *names);
	int ns = 0;
	if (!names) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		plot_run_setting(&runs[i], names[ns], sizeof names[0]);
		int seen = 0;
		for (int k = 0; k < ns && !seen; k++)
			seen = !strcmp(names[k], names[ns]);
		if (!seen)
			ns++;
	}
	/* optimal to the end: it is the reference, not a contender */
	for (int k = 0; k < ns - 1; k++)
		if (!strncmp(names[k], "optimal ", 8)) {
			char t[128];
			memcpy(t, names[k], sizeof t);
			memmove(names[k], names[k + 1], (size_t)(ns - k - 1) * sizeof names[0]);
			memcpy(names[ns - 1], t, sizeof t);
			break;
		}
	FILE *d = fig_file(f, "frag.dat", err, errlen);
	if (!d) {
		free(names);
		return -1;
	}
	fputs("# setting, then fragmentation (%) per trace: 1 - peak allocated / peak reserved\n", d);
	for (int k = 0; k < ns; k++) {
		fputc('"', d);
		for (const char *p = names[k]; *p; p++)
			fputc(*p == '"' ? '\'' : *p, d);
		fputc('"', d);
		for (int t = 0; t < nt; t++) {
			const struct plot_run *hit = NULL;
			char b[128];
			for (int i = 0; i < n; i++)
				if (runs[i].trace_crc32 == traces[t]->trace_crc32 &&
				    !strcmp(plot_run_setting(&runs[i], b, sizeof b), names[k]))
					hit = &runs[i]; /* the last capacity wins, as in the order */
			if (hit)
				fprintf(d, " %.4f", 100.0 * hit->fragmentation);
			else
				fputs(" ?", d);
		}
		fputc('\n', d);
	}
	free(names);
	if (fig_close_file(d, "frag.dat", err, errlen) < 0)
		return -1;
	FILE *gp = f->gp;
	char title[512], cw[128];
	snprintf(title, sizeof title, "Fragmentation at the peak per allocator setting%s: 1 - peak "
		 "allocated / peak reserved\nshare of the reserved peak not holding live blocks; "
		 "lower is better", capacity_words(runs, n, cw, sizeof cw));
	/* settings spelt as the frameworks spell them are long: a taller
	 * canvas and a wide bottom margin keep every tick label whole, and
	 * the key sits outside the bars */
	if (f->fmt == PLOT_FMT_PNG)
		fputs("set terminal pngcairo size 1300,820 font 'DejaVu Sans,13' noenhanced\n", gp);
	else
		fputs("set terminal svg size 1300,820 font 'DejaVu Sans,13' noenhanced "
		      "background rgb 'white'\n", gp);
	fputs("set title ", gp);
	gp_str(gp, title);
	fputs("\n", gp);
	fputs("set ylabel 'fragmentation (% of peak reserved)'\nset yrange [0:105]\n"
	      "set style data histograms\nset style histogram clustered gap 1\n"
	      "set style fill solid 0.85 border -1\nset boxwidth 0.9\n"
	      "set xtics rotate by 35 right nomirror\nset bmargin 17\nset lmargin 12\n"
	      "set key outside right top vertical\n", gp);
	fputs("plot ", gp);
	for (int t = 0; t < nt; t++) {
		char b[128];
		if (t)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "frag.dat");
		if (t == 0)
			fprintf(gp, " using %d:xtic(1) lt %d title ", t + 2, t + 1);
		else
			fprintf(gp, " using %d lt %d title ", t + 2, t + 1);
		gp_str(gp, trace_title(traces[t], b, sizeof b));
	}
	fputc('\n', gp);
	return 0;
}
