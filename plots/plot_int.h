/*
 * plot_int.h: what the files of plots/ share among themselves; private to
 * plots/ (the interface is plot.h). plot.c loads the runs and dispatches
 * on the kind; plot_common.c (the figure's folder and files, gnuplot, the
 * shared rules of plot.c's file comment); plot_KIND.c draws one kind.
 */
#ifndef PLOTS_PLOT_INT_H
#define PLOTS_PLOT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "plot.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define PLOT_MAX_FILES 16
#define OFF_SCALE_FACTOR 4.0

/* ------------------------------------------------------------ a figure */

/* One figure being made: the folder of its script and data files (a
 * temporary one unless the caller keeps them), the files written there,
 * and the script (figure.gp) open for writing. */
struct fig {
	char dir[4096];
	int tmp_dir;
	char files[PLOT_MAX_FILES][32];
	int nfiles;
	enum plot_format fmt;
	char out_tmp[4200];
	FILE *gp;
};

/* Check gnuplot can run, open the folder and start the script (terminal,
 * styling, palette); on failure nothing half made stays (the temporary
 * folder is removed). */
int fig_begin(struct fig *f, const struct plot_request *req, char *err, size_t errlen);
/* Render when OK, move the figure into place, clean up the temporary folder. */
int fig_end(struct fig *f, const struct plot_request *req, int ok, char *err,
	    size_t errlen);
/* A data file NAME in the figure's folder, open for writing; closed with
 * fig_close_file (which reports a write error). */
FILE *fig_file(struct fig *f, const char *name, char *err, size_t errlen);
int fig_close_file(FILE *fp, const char *name, char *err, size_t errlen);
/* A gnuplot double-quoted string; a data file's name as the script uses it. */
void gp_str(FILE *f, const char *s);
void gp_data(FILE *gp, const struct fig *f, const char *name);

/* ------------------------------------------------------------ helpers */

static inline uint64_t u64_of(const char *s) { return s ? strtoull(s, NULL, 10) : 0; }

static inline double gib(uint64_t b) { return (double)b / GIB; }

/* "resnet18 batch 64" from the labels, else the trace's file name. */
const char *trace_title(const struct plot_run *r, char *buf, size_t len);
/* IN broken into lines of about WIDTH characters after commas or spaces. */
void wrap_label(const char *in, char *out, size_t len, size_t width);
/* The floor of trace CRC: the peak reserved of its optimal run without OOM,
 * else the peak of live requested bytes of its runs without OOM; 0 when
 * every run ran out of memory (the floor is not known). */
uint64_t trace_floor(const struct plot_run *runs, int n, uint32_t crc, int *from_optimal);
/* The one capacity of RUNS (0 and *SEVERAL set when they hold several). */
uint64_t runs_capacity(const struct plot_run *runs, int n, int *several);
/* " at 8.00 GiB" for the runs' one capacity, else "". */
const char *capacity_words(const struct plot_run *runs, int n, char *buf, size_t len);
/* -1 with ERR naming the traces when RUNS hold more than one. */
int need_one_trace(const struct plot_run *runs, int n, const char *what, char *err,
		   size_t errlen);
/* The y range top, and whether a run is drawn off scale (plot.c's comment). */
double y_top(double data_top, double live_top, double vis_top, int *clipped);
/* VALUE if it stays on scale, else 0. */
double on_scale(double value, double live_top);
/* The capacity lines worth drawing, as script variables; returns the new top. */
double capacity_lines(FILE *gp, const struct plot_run *runs, int n, double top,
		      int *ncaps);
/* Their plot terms. */
void plot_capacity_terms(FILE *gp, int ncaps);

/* ------------------------------------------------------------ the kinds */

/* Each writes its data files and the rest of the script; 0 or -1 with ERR. */
int fig_timeline(struct store *s, struct fig *f, const struct plot_run *runs, int n,
		 char *err, size_t errlen);                                  /* plot_timeline.c */
int fig_batch(struct fig *f, const struct plot_run *runs, int n, char *err,
	      size_t errlen);                                                 /* plot_batch.c */
int fig_frag(struct fig *f, const struct plot_run *runs, int n, char *err,
	     size_t errlen);                                                  /* plot_frag.c */
int fig_compare(struct fig *f, const struct plot_run *runs, int n, char *err,
		size_t errlen);                                               /* plot_compare.c */
int fig_pareto(struct fig *f, const struct plot_run *runs, int n, char *err,
	       size_t errlen);                                                /* plot_pareto.c */
int fig_live(struct store *s, struct fig *f, const struct plot_run *runs, int n,
	     char *err, size_t errlen);                                       /* plot_live.c */

#endif /* PLOTS_PLOT_INT_H */
