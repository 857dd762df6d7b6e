/*
 * plot_steps.c: the figure of `run --steps-figure` (plot.h, plot_steps):
 * users' question 10, the worst step of a run whose shapes vary. Per step,
 * its peak allocated and peak reserved (GiB, bars, left axis) and its time
 * (ms, points, right axis); the worst step (sim/steps.h: the highest peak
 * allocated) is named on the figure with the NVTX range where its peak was,
 * and the steps' median peak allocated is a dashed level. Drawn from the
 * replay's result, not the database; deterministic.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../base/size.h"
#include "../sim/engine.h"
#include "../sim/steps.h"
#include "plot_int.h"

int plot_steps(const struct sim_result *r, size_t skip, const char *out, const char *data_dir,
	       char *err, size_t errlen)
{
	struct plot_request req = {.kind = PLOT_STEPS, .out = out, .data_dir = data_dir};
	struct sim_steps_summary s;
	struct fig f;
	int ok = 0;
	if (sim_steps_summarise(r, skip, &s) < 0) {
		snprintf(err, errlen, "no steps to draw (the trace has no \"step N\" ranges%s)",
			 skip ? " from --steps-skip on" : "");
		return -1;
	}
	if (fig_begin(&f, &req, err, errlen) < 0)
		return -1;
	FILE *d = fig_file(&f, "steps.dat", err, errlen);
	if (!d)
		goto end;
	fputs("# step index, name, peak allocated (GiB), peak reserved (GiB), time (ms)\n", d);
	double top = 0, ttop = s.time_ns[SIM_PMAX] / 1e6;
	for (size_t i = s.from; i < s.from + s.n; i++) {
		const struct sim_step_mem *m = &r->step_mem[i];
		fprintf(d, "%zu \"%s\" %.6f %.6f %.3f\n", i - s.from, m->name, gib(m->peak_allocated),
			gib(m->peak_reserved), r->step_ns[i] / 1e6);
		if (gib(m->peak_reserved) > top)
			top = gib(m->peak_reserved);
	}
	if (fig_close_file(d, "steps.dat", err, errlen) < 0)
		goto end;

	FILE *gp = f.gp;
	const char *name = strrchr(r->trace_path, '/') ? strrchr(r->trace_path, '/') + 1
						       : r->trace_path;
	const struct sim_step_mem *w = &r->step_mem[s.worst];
	char title[512], b1[32], b2[32], label[256];
	snprintf(title, sizeof title, "Every step of %s under %s%s%s: peak allocated p50 %s, max %s",
		 name, r->policy, r->conf && *r->conf ? " " : "", r->conf ? r->conf : "",
		 size_fmt(s.allocated[SIM_P50], b1, sizeof b1),
		 size_fmt(s.allocated[SIM_PMAX], b2, sizeof b2));
	fputs("set title ", gp);
	gp_str(gp, title);
	fprintf(gp, "\nset ylabel 'GiB'\nset y2label 'step time (ms%s)'\nset ytics nomirror\n"
		"set y2tics\nset yrange [0:%.4f]\nset y2range [0:%.4f]\nset xlabel 'step'\n"
		"set style data histogram\nset style histogram clustered gap 1\n"
		"set style fill solid 0.6 border -1\nset boxwidth 0.9\nset key top left\n"
		"set xtics rotate by -45\n",
		r->timed ? ", predicted" : ", replayed", top * 1.35 + 0.01, ttop * 1.35 + 0.001);
	fprintf(gp, "set arrow 1 from graph 0, first %.6f to graph 1, first %.6f nohead dt 2 lw 1 "
		"lc rgb '#555555'\n", gib(s.allocated[SIM_P50]), gib(s.allocated[SIM_P50]));
	snprintf(label, sizeof label, "worst: %s, %s allocated%s%s", w->name,
		 size_fmt(w->peak_allocated, b1, sizeof b1), w->at[0] ? " at " : "", w->at);
	fputs("set label 1 ", gp);
	gp_str(gp, label);
	fprintf(gp, " at %zu, first %.6f center offset 0,1.2 front\n", s.worst - s.from,
		gib(w->peak_reserved > w->peak_allocated ? w->peak_reserved : w->peak_allocated));
	fputs("plot ", gp);
	gp_data(gp, &f, "steps.dat");
	fputs(" using 3:xtic(2) title 'peak allocated' lc rgb '#4477aa', \\\n     ", gp);
	gp_data(gp, &f, "steps.dat");
	fputs(" using 4 title 'peak reserved' lc rgb '#cc6677', \\\n     ", gp);
	gp_data(gp, &f, "steps.dat");
	fputs(" using 1:5 axes x1y2 with linespoints pt 7 lc rgb '#222222' title 'step time'\n", gp);
	ok = 1;
end:
	return fig_end(&f, &req, ok, err, errlen);
}
