/*
 * report.h: the report of `gpumemsim report`: one self-contained HTML page
 * (figures inlined as PNG data), its Markdown twin (figures as files beside
 * it) and runs.csv (every run, one row) from the stored runs of a results
 * database, grouped by workload and model (the traces' labels). First the
 * answers per group (best setting per capacity, largest batch that fits and
 * why the next fails, where memory falls as the batch grows and why, the
 * cost of each setting in time, OOMs by verdict), then every figure of
 * plot.h, each naming its capacity. docs/report.md describes the structure.
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
	char csv_path[4200];                 /* DIR/runs.csv */
	int runs, traces, groups;            /* in the report */
	int figures;                         /* drawn (DIR/fig-NNN-KIND.png) */
	int figure_notes;                    /* not drawn: a sentence in their place says why */
	int no_gnuplot;                      /* gnuplot was not found: the pages have no figures */
};

/*
 * Write DIR/report.html, DIR/report.md and DIR/runs.csv (DIR is made if
 * missing; an earlier report's figures there are removed) from the runs of
 * the database DB that O selects (O may be NULL). The three appear or
 * none: each is written as NAME.tmp.PID and renamed. Returns 0, or -1
 * with ERR (no such database, a bad --where, no run selected, I/O). RES
 * (may be NULL) is filled in either case as far as the report got.
 */
int report_write(const char *db, const char *dir, const struct report_opts *o,
		 struct report_result *res, char *err, size_t errlen);

#endif /* PLOTS_REPORT_H */
