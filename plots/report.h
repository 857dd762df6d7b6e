/*
 * report.h: the report of `gpumemsim report`: one self-contained HTML page
 * (figures inlined as PNG data) and its Markdown twin (figures as files
 * beside it) summarising the stored runs of a results database: the
 * largest batch that ran without OOM per setting, the best setting per
 * trace, OOM verdicts, the figures of plot.h, and every run's metadata.
 *
 * Deterministic: no dates or host names; the same database gives the same
 * pages. Prints nothing: what happened comes back in struct report_result.
 */
#ifndef PLOTS_REPORT_H
#define PLOTS_REPORT_H

#include <stddef.h>

#include "plot.h"

struct report_opts {
	struct plot_select sel; /* which runs, as for plot_make (all NULL: every run) */
};

struct report_result {
	char html_path[4200], md_path[4200]; /* DIR/report.html, DIR/report.md */
	int runs, traces;                    /* in the report */
	int figures;                         /* drawn (DIR/fig-NN-KIND.png) */
	int figure_notes;                    /* not drawn: a sentence in their place says why */
	int no_gnuplot;                      /* gnuplot was not found: the pages have no figures */
};

/*
 * Write DIR/report.html and DIR/report.md (DIR is made if missing) from the
 * runs of the database DB that O selects (O may be NULL). Both pages appear
 * or neither: each is written as NAME.tmp.PID and renamed. Returns 0, or -1
 * with ERR (no such database, a bad --where, no run selected, I/O). RES
 * (may be NULL) is filled in either case as far as the report got.
 */
int report_write(const char *db, const char *dir, const struct report_opts *o,
		 struct report_result *res, char *err, size_t errlen);

#endif /* PLOTS_REPORT_H */
