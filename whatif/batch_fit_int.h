/*
 * batch_fit_int.h: what the stages of the batch-size what-if share; private
 * to whatif/batch_fit_*.c (the interface is batch_fit.h). One file a stage:
 *
 *   batch_fit_load.c   a capture into memory: records, sites, frees, NVTX
 *                      context, workspace and foreign flags, memory events
 *   batch_fit_align.c  memory events matched across the captures
 *   batch_fit_fit.c    per-site fits and predictions (paired unaligned
 *                      sites too), the per-site TSV
 *   batch_fit_synth.c  the trace at another batch size (or at the bounds of
 *                      its unpredictable sites); the steady state
 *   batch_fit_live.c   what is live at a line (maxbatch, explain batch)
 *   batch_fit_trust.c  how far a prediction rests on what did not align
 *   batch_fit_interval.c  the range of a prediction where sites cannot be
 *                      predicted: each site's bounds, the peak's, replays
 *
 * Traces are held in memory as the reader's records (struct trace_rec, with
 * kernel links in the trace's own pool) because alignment needs random
 * access to every capture at once; the captures this is meant for are
 * single training runs of a few steps.
 *
 * Alignment works on the sequence of memory events (allocations and frees,
 * a free named by the site it frees). Captures whose events match position
 * by position align trivially; otherwise each capture is aligned with the
 * smallest one by a longest common subsequence of compatible events (same
 * kind, stream, source, NVTX range, and sizes that grow at most in
 * proportion to the batch), so a first step that autotuned differently
 * costs only its own events. With --strict-align every event must align;
 * by default the rest is paired within its gap or copied from the capture
 * the synthesised trace is built on, counted as unaligned, and
 * batch_fit_trust.c says how far a prediction rests on it.
 */
#ifndef WHATIF_BATCH_FIT_INT_H
#define WHATIF_BATCH_FIT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../traces/trace.h"
#include "batch_fit.h"

#define NO_IDX SIZE_MAX

/* One memory event, for alignment. */
struct bf_event {
	char type;        /* 'a' or 'f' */
	size_t rec;       /* record index */
	size_t site;      /* alloc: its site; free: the site it frees or NO_IDX */
};

struct bf_trace {
	char *path;
	uint64_t batch;
	struct trace_header hdr;      /* owned copies */
	char **str;
	uint32_t nstr;
	struct trace_rec *rec;        /* as read; a kernel's links point into links */
	size_t nrec;
	uint64_t *links;              /* every kernel's links, in record order */
	size_t nlinks;
	/* derived */
	size_t nalloc;
	size_t *alloc_rec;            /* record of each site */
	uint32_t *alloc_range;        /* innermost NVTX range at the allocation */
	size_t *alloc_free_rec;       /* record of its free, or NO_IDX */
	uint8_t *alloc_ws;            /* looks like a workspace */
	uint8_t *alloc_search;        /* a workspace of the warm-up step (before
				       * the first range "step 1"): autotuning */
	uint8_t *alloc_foreign;       /* made by a library other than the framework */
	size_t *free_site;            /* per record: the site a free frees, or NO_IDX */
	struct bf_event *ev;
	size_t nev;
	size_t *kern;                 /* record indices of kernels */
	size_t nkern;
};

struct bf_site_fit {
	char kind;                    /* 'c', 'l', 'n', 'u' */
	double a, b;                  /* linear: a + b*batch */
	uint64_t gran;                /* predictions snap to multiples of this */
	int ws;
	int search;                   /* a warm-up workspace: ws_curve */
};

struct bf_model {
	struct bf_trace *const *t;    /* sorted by batch (borrowed) */
	struct bf_trace **sorted;
	size_t n;
	struct bf_report rep;
	double search_limit;          /* bytes; bounds workspace trends */
	double linear_tol;            /* relative residual of a linear site */
	size_t ncev;                  /* canonical (aligned in every capture) events */
	size_t **cev, **rev_ev;       /* [trace]: canonical -> event, event -> canonical */
	size_t ncanon;                /* canonical sites */
	size_t **csite, **rev_site;   /* [trace]: canonical -> site, site -> canonical */
	struct bf_site_fit *fit;      /* per canonical site */
	uint64_t **sizes;             /* [trace][canonical site] */
};

/* ------------------------------------------------------------- helpers */

/* String ID of T, or NULL (TRACE_NO_STRING or out of range). */
static inline const char *tstr(const struct bf_trace *t, uint32_t id)
{
	return id < t->nstr ? t->str[id] : NULL;
}

/* Equal strings; NULL equals only NULL. */
static inline int streq_null(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return !strcmp(a, b);
}

/* batch_fit_load.c: a header's owned strings freed, or deep-copied (0, or
 * -1 out of memory) */

/* batch_fit_align.c */
/* Align every capture with the first; canonical events and sites are the
 * first capture's that align in all. -1 when out of memory. */
int bf_align(struct bf_model *m);
/* Canonical site of site I of trace T, or NO_IDX when unaligned. */
size_t bf_canon_site(const struct bf_model *m, const struct bf_trace *t, size_t i);
/* Canonical event of event E of trace T, or NO_IDX. */
size_t bf_canon_event(const struct bf_model *m, const struct bf_trace *t, size_t e);
/* Is event E of T a module global's (device static) allocation or free? */
int bf_ev_static(const struct bf_trace *T, size_t e);

/* batch_fit_fit.c */
/* Least squares: Y = A + B*X over N points. */
void bf_linfit(const double *x, const double *y, size_t n, double *a, double *b);
/* The capture the trace at BATCH is built on: the nearest (ties: larger). */
size_t bf_template_index(const struct bf_model *m, uint64_t batch);
/* Bytes of site S of template KT at BATCH, with its kind in *KIND (SZ: one
 * slot per capture, scratch for the paired sizes). */
uint64_t bf_predict_template_site(const struct bf_model *m, size_t kt, size_t s,
				  uint64_t batch, uint64_t *sz, char *kind);

/* batch_fit_interval.c */
/* Bounds of that site's size at BATCH: 1 with LO < HI when it cannot be
 * predicted (an algorithm switch between the captures around BATCH, ...),
 * with the reason in *R when R is not NULL, else 0 with LO = HI = the
 * prediction (SZ as above). */
int bf_template_site_bounds(const struct bf_model *m, size_t kt, size_t s, uint64_t batch,
			    uint64_t *sz, uint64_t *lo, uint64_t *hi, struct bf_site_range *r);

/* batch_fit_synth.c: the trace at BATCH with every unpredictable site at
 * its prediction (WHICH 0), its low bound (-1) or its high bound (+1). */
int bf_synth_which(const struct bf_model *m, uint64_t batch, int which, const char *path,
		   char *err, size_t errlen);
/* batch_fit_synth.c: write T to PATH (atomically) without the records DROP
 * (one flag per record) marks, strings re-interned, kernel links renumbered
 * to the allocations kept (links to dropped ones removed); segment records
 * and OOM markers, which belong to the captured run, never go. 0, or -1
 * with ERR. */
int bf_write_records(const struct bf_trace *t, const uint8_t *drop, const char *path,
		     char *err, size_t errlen);

#endif /* WHATIF_BATCH_FIT_INT_H */
