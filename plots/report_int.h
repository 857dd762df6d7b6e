/*
 * report_int.h: what the files of the report share among themselves;
 * private to plots/ (the interface is report.h). report.c assembles the
 * page in its order; report_page.c writes HTML and Markdown side by side;
 * report_groups.c groups the runs by workload and model; report_answers.c
 * writes the first page (the answers); report_figs.c draws every figure;
 * report_csv.c writes runs.csv. docs/report.md describes the structure.
 */
#ifndef PLOTS_REPORT_INT_H
#define PLOTS_REPORT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../sim/store.h"
#include "plot.h"
#include "report.h"

/* ------------------------------------------------------------ the page */

/* The HTML page and its Markdown twin, written side by side. */
struct page {
	FILE *html, *md;
	int ncols;
};

void html_esc(FILE *f, const char *s);
void md_esc(FILE *f, const char *s);
/* A heading of LEVEL (2, 3) with the HTML anchor ID (may be NULL). */
void page_heading(struct page *p, int level, const char *id, const char *text);
void page_para(struct page *p, const char *text);
/* A paragraph of TEXT followed by a link HREF reading LINK, then AFTER. */
void page_para_link(struct page *p, const char *text, const char *href, const char *link,
		    const char *after);
void tab_begin(struct page *p, int ncols, const char *const *heads);
void tab_row(struct page *p, const char *const *cells);
/* A row whose first cell links to the in-page anchor HREF (HTML only). */
void tab_row_link(struct page *p, const char *const *cells, const char *href);
void tab_end(struct page *p);
/* The figure PNG_PATH inlined (HTML) and linked as NAME (Markdown); -1 when
 * the file cannot be read. */
int page_figure(struct page *p, const char *png_path, const char *name, const char *caption);

/* ------------------------------------------------------------ groups */

/*
 * One group of the report: the runs of one workload and model (labels).
 * Traces of one workload and model that repeat a batch size are different
 * captures of it: they are told apart by their folder (VARIANT). A group
 * whose traces still repeat a batch size (DUP_BATCH) gets no batch answers.
 */
struct rgroup {
	const char *workload, *model;  /* labels ("" when missing) */
	char variant[256];             /* the traces' folder when needed, else "" */
	char name[512];                /* "cnn resnet", "resnet18 (no workload label)" */
	char anchor[16];               /* "g3" */
	int *idx, n;                   /* its runs (indices), batch then trace order */
	uint32_t *crcs;                /* its traces, in order */
	int ntraces;
	long batches[64];              /* distinct batch labels, ascending */
	int nbatches;
	int dup_batch;                 /* two traces at one batch: no batch answers */
	uint64_t caps[8];              /* capacities stored, largest first */
	int ncaps;
	int timed;                     /* some run has a predicted step time */
};

struct report {
	struct store *s;
	const char *dir, *db;
	const char *user_where;
	const struct plot_select *sel;
	struct page p;
	const struct plot_run *runs;
	int nruns;
	struct rgroup *groups;
	int ngroups;
	int nfigs, notes;
	char *err; /* why the report failed */
	size_t errlen;
};

/* Build R->groups from R->runs; -1 with R->err (out of memory). */
int report_groups(struct report *r);
void report_groups_free(struct report *r);
/* The numeric batch label of RUN, -1 when none. */
long run_batch(const struct plot_run *run);
/* The run of trace CRC, SETTING ("pytorch (default)") and capacity CAP in
 * group G, or NULL. */
const struct plot_run *group_find(const struct report *r, const struct rgroup *g,
				  uint32_t crc, const char *setting, uint64_t cap);
/* The trace of group G at BATCH (0 when none). */
uint32_t group_trace_at(const struct report *r, const struct rgroup *g, long batch);
/* The distinct settings of group G in the runs' order (optimal last):
 * *NAMES malloc'd, 128 bytes each; returns the count or -1. */
int group_settings(const struct report *r, const struct rgroup *g, char (**names)[128]);
/* The floor of trace CRC over every selected capacity (plot_common.c's
 * rule: runs without OOM only); 0 when unknown. */
uint64_t report_floor(const struct report *r, uint32_t crc);
/* The trace's file name. */
const char *trace_base(const struct plot_run *run);
/* "8.00 GiB", or "unlimited". */
const char *cap_str(uint64_t cap, char *buf, size_t len);

/* ------------------------------------------------------------ sections */

/* The first page: the answers per group (report_answers.c). */
int report_answers(struct report *r);
/* Every figure, per group (report_figs.c); -1 with R->err on I/O errors
 * (a figure gnuplot cannot draw is a note in its place, counted). */
int report_figures(struct report *r);
/* DIR/runs.csv.tmp.PID, renamed to DIR/runs.csv by the caller (report_csv.c). */
int report_csv(const struct report *r, const char *path, char *err, size_t errlen);

#endif /* PLOTS_REPORT_INT_H */
