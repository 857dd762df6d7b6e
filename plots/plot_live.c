/*
 * plot_live.c: `gpumemsim plot live`: what is live at each run's peak
 * reserved, by kind, and the largest layers (innermost NVTX range) of one run.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "../base/vec.h"
#include "plot_int.h"

#define LIVE_NKINDS 7
static const char *const live_kinds[LIVE_NKINDS] = {"weights", "optimizer_state",
	"activations", "gradients", "workspace", "library_workspace", "other"};
static const char *const live_colours[LIVE_NKINDS] = {"#1f77b4", "#9467bd", "#2ca02c",
	"#d62728", "#ff7f0e", "#8c564b", "#7f7f7f"};
#define LIVE_MAX_RUNS 12
#define LIVE_SHOW_LAYERS 15

struct live_layer { char name[96]; uint64_t bytes[LIVE_NKINDS], total; };

struct live_ctx {
	uint64_t kind_bytes[LIVE_NKINDS];
	struct live_layer *layers;
	int nlayers, failed;
	size_t cap;
};

static int live_kind_index(const char *k)
{
	for (int i = 0; i < LIVE_NKINDS; i++)
		if (k && !strcmp(k, live_kinds[i]))
			return i;
	return LIVE_NKINDS - 1;
}

static int live_row(void *vctx, int ncols, const char *const *c)
{
	struct live_ctx *l = vctx;
	if (ncols < 3)
		return l->failed = 1;
	int k = live_kind_index(c[1]);
	uint64_t b = u64_of(c[2]);
	l->kind_bytes[k] += b;
	const char *name = c[0] ? c[0] : "";
	int j = l->nlayers - 1;
	if (j < 0 || strcmp(l->layers[j].name, name)) {
		if (VEC_RESERVE(l->layers, l->cap, (size_t)l->nlayers + 1, 32) < 0)
			return l->failed = 1;
		j = l->nlayers++;
		memset(&l->layers[j], 0, sizeof l->layers[j]);
		snprintf(l->layers[j].name, sizeof l->layers[j].name, "%s", name);
	}
	l->layers[j].bytes[k] += b;
	l->layers[j].total += b;
	return 0;
}

static int cmp_layer(const void *a, const void *b)
{
	const struct live_layer *x = a, *y = b;
	int ox = !strcmp(x->name, "(other layers)"), oy = !strcmp(y->name, "(other layers)");
	if (ox != oy)
		return ox - oy;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Stacked horizontal bars, LIVE_NKINDS blocks, row y = NROWS-1-i. */
static void live_bars(FILE *d, const uint64_t (*rows)[LIVE_NKINDS], int nrows, double unit)
{
	for (int k = 0; k < LIVE_NKINDS; k++) {
		if (k)
			fputs("\n\n", d);
		fprintf(d, "# %s: y from_GiB to_GiB\n", live_kinds[k]);
		int any = 0;
		for (int i = 0; i < nrows; i++) {
			double x0 = 0;
			for (int j = 0; j < k; j++)
				x0 += (double)rows[i][j] / unit;
			if (!rows[i][k])
				continue;
			fprintf(d, "%d %.6f %.6f\n", nrows - 1 - i, x0, x0 + (double)rows[i][k] / unit);
			any = 1;
		}
		if (!any)
			fputs("? ? ?\n", d);
	}
}

/* Left: per run, what was live at its peak reserved by kind, and the
 * reserved bytes no live block used; right: the largest layers (innermost
 * NVTX range at allocation) of the first run, by kind. */
int fig_live(struct store *s, struct fig *f, const struct plot_run *runs, int n,
	     char *err, size_t errlen)
{
	uint64_t rk[LIVE_MAX_RUNS][LIVE_NKINDS], lk[LIVE_SHOW_LAYERS + 1][LIVE_NKINDS];
	const struct plot_run *sel[LIVE_MAX_RUNS];
	struct live_ctx first = {0};
	int ns = 0, ret = -1, nl = 0, ntr = 1, has_kind[LIVE_NKINDS] = {0}, lay_run = 0;
	double xmax = 0, lmax = 0, res_top = 0;
	char b1[128], b2[320], idb[24];
	FILE *d = NULL;
	memset(rk, 0, sizeof rk);
	memset(lk, 0, sizeof lk);
	for (int i = 1; i < n; i++)
		if (runs[i].trace_crc32 != runs[0].trace_crc32)
			ntr = 2;
	for (int i = 0; i < n; i++) {
		struct live_ctx l = {0};
		snprintf(idb, sizeof idb, "%" PRId64, runs[i].id);
		const char *params[1] = {idb};
		int rc = store_query(s, "SELECT layer, kind, bytes FROM peak_live WHERE run_id=?1 AND"
				     " rank=0 ORDER BY layer, kind", params, 1, live_row, &l, err,
				     errlen);
		if (rc < 0 || l.failed) {
			if (rc >= 0)
				snprintf(err, errlen, "out of memory reading peak_live");
			free(l.layers);
			goto out;
		}
		if (!rc) {
			free(l.layers);
			continue;
		}
		if (ns == LIVE_MAX_RUNS) {
			free(l.layers);
			snprintf(err, errlen, "the live-at-peak figure draws at most %d runs: narrow the "
				 "selection with --where", LIVE_MAX_RUNS);
			goto out;
		}
		memcpy(rk[ns], l.kind_bytes, sizeof rk[ns]);
		sel[ns] = &runs[i];
		double tot = 0;
		for (int k = 0; k < LIVE_NKINDS; k++) {
			tot += gib(l.kind_bytes[k]);
			has_kind[k] |= l.kind_bytes[k] != 0;
		}
		xmax = tot > xmax ? tot : xmax;
		/* the layers of the default PyTorch setting when there is one
		 * (what most users run), else of the first run */
		int pick = !first.layers || (!strcmp(runs[i].policy, "pytorch") && !*runs[i].conf &&
					     !(strcmp(sel[lay_run]->policy, "pytorch") == 0 &&
					       !*sel[lay_run]->conf));
		if (pick) {
			free(first.layers);
			first = l;
			lay_run = ns;
		} else {
			free(l.layers);
		}
		ns++;
	}
	if (!ns) {
		snprintf(err, errlen, "no selected run has a live-at-peak record (table peak_live): "
			 "runs stored by an older gpumemsim; run them again");
		goto out;
	}
	/* reserved bytes far above every live set (a preallocating allocator)
	 * are cut at the axis end and labelled */
	for (int i = 0; i < ns; i++) {
		double r = gib(sel[i]->peak_reserved);
		if (r > res_top && r <= OFF_SCALE_FACTOR * xmax)
			res_top = r;
	}
	if (res_top > xmax)
		xmax = res_top;
	xmax = xmax > 0 ? xmax * 1.05 : 1.0;
	qsort(first.layers, (size_t)first.nlayers, sizeof *first.layers, cmp_layer);
	nl = first.nlayers < LIVE_SHOW_LAYERS ? first.nlayers : LIVE_SHOW_LAYERS;
	for (int i = 0; i < nl; i++) {
		memcpy(lk[i], first.layers[i].bytes, sizeof lk[i]);
		lmax = gib(first.layers[i].total) > lmax ? gib(first.layers[i].total) : lmax;
	}
	d = fig_file(f, "live-runs.dat", err, errlen);
	if (!d)
		goto out;
	live_bars(d, (const uint64_t (*)[LIVE_NKINDS])rk, ns, GIB);
	fputs("\n\n# reserved, not live: y from_GiB to_GiB\n", d);
	int anyfree = 0;
	for (int i = 0; i < ns; i++) {
		double live = 0;
		for (int k = 0; k < LIVE_NKINDS; k++)
			live += gib(rk[i][k]);
		double res = gib(sel[i]->peak_reserved);
		if (res > live) {
			char b3[32];
			fprintf(d, "%d %.6f %.6f \"%s\"\n", ns - 1 - i, live, res > xmax ? xmax : res,
				res > xmax ? size_fmt(sel[i]->peak_reserved, b3, sizeof b3) : "");
			anyfree = 1;
		}
	}
	if (!anyfree)
		fputs("? ? ? \"\"\n", d);
	if (fig_close_file(d, "live-runs.dat", err, errlen) < 0) {
		d = NULL;
		goto out;
	}
	d = fig_file(f, "live-layers.dat", err, errlen);
	if (!d)
		goto out;
	/* small layers read better in MiB */
	int lmib = lmax < 1.0;
	live_bars(d, (const uint64_t (*)[LIVE_NKINDS])lk, nl, lmib ? GIB / 1024.0 : GIB);
	if (lmib)
		lmax *= 1024.0;
	if (fig_close_file(d, "live-layers.dat", err, errlen) < 0) {
		d = NULL;
		goto out;
	}
	d = NULL;

	FILE *gp = f->gp;
	char title[512];
	snprintf(title, sizeof title, "What is live at the moment of peak reserved, %s\n"
		 "kinds are heuristics from the NVTX ranges (docs/schema.md, peak_live)",
		 ntr > 1 ? "several traces" : trace_title(&runs[0], b1, sizeof b1));
	fputs("set multiplot title ", gp);
	gp_str(gp, title);
	fputs(" font ',14'\n", gp);
	fputs("set style fill solid 0.9 border rgb '#333333'\nunset grid\n"
	      "set grid xtics lc rgb '#d8d8d8'\nset tmargin at screen 0.84\n"
	      "set bmargin at screen 0.12\nset ytics nomirror scale 0 font ',10'\n"
	      "set tmargin at screen 0.78\n", gp);
	/* left: runs */
	fprintf(gp, "set lmargin at screen 0.2\nset rmargin at screen 0.5\n"
		"set yrange [-0.6:%d.6]\nset xrange [0:%.6f]\nset xlabel 'GiB at the peak'\n"
		"set title 'per run: live bytes by kind, hatched: reserved, not live' font ',12'\n",
		ns - 1, xmax);
	fputs("set ytics (", gp);
	for (int i = 0; i < ns; i++) {
		char w[256], w2[128];
		if (ntr > 1)
			snprintf(b2, sizeof b2, "%s: %s", trace_title(sel[i], b1, sizeof b1),
				 plot_run_setting(sel[i], w2, sizeof w2));
		else
			plot_run_setting(sel[i], b2, sizeof b2);
		wrap_label(b2, w, sizeof w, 24);
		if (i)
			fputs(", ", gp);
		gp_str(gp, w);
		fprintf(gp, " %d", ns - 1 - i);
	}
	fputs(")\nset key at screen 0.995, screen 0.78 right top vertical Left reverse "
	      "font ',10' samplen 1.2 spacing 1.1\n", gp);
	fputs("plot ", gp);
	/* kinds without bytes, and the hatched bars when every run's reserved
	 * is live, get no term: no empty data warnings */
	int nlive_terms = 0;
	for (int k = 0; k < LIVE_NKINDS; k++) {
		if (!has_kind[k])
			continue;
		if (nlive_terms++)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "live-runs.dat");
		fprintf(gp, " index %d using 2:1:2:3:($1-0.35):($1+0.35) with boxxyerror "
			"lc rgb '%s' title '%s'", k, live_colours[k], live_kinds[k]);
	}
	if (anyfree) {
		if (nlive_terms++)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "live-runs.dat");
		fprintf(gp, " index %d using 2:1:2:3:($1-0.35):($1+0.35) with boxxyerror "
			"fs pattern 4 lc rgb '#aaaaaa' title 'reserved, not live', \\\n  ",
			LIVE_NKINDS);
		gp_data(gp, f, "live-runs.dat");
		fprintf(gp, " index %d using (%.6f):1:(strlen(strcol(4)) ? strcol(4).' reserved, "
			"off scale' : '') with labels right offset -0.5,0 font ',10' notitle",
			LIVE_NKINDS, xmax * 0.98);
	}
	fputs("\n", gp);
	/* right: layers of the first run */
	snprintf(b2, sizeof b2, "largest layers (innermost NVTX range\nat allocation), run %"
		 PRId64 ": %s", sel[lay_run]->id, plot_run_setting(sel[lay_run], b1, sizeof b1));
	fputs("unset key\nset lmargin at screen 0.65\nset rmargin at screen 0.83\n"
	      "set xtics font ',10'\n", gp);
	fprintf(gp, "set xlabel '%s at the peak'\n", lmib ? "MiB" : "GiB");
	fprintf(gp, "set yrange [-0.6:%d.6]\nset xrange [0:%.6f]\n", nl ? nl - 1 : 0,
		lmax > 0 ? lmax * 1.05 : 1.0);
	fputs("set title ", gp);
	gp_str(gp, b2);
	fputs(" font ',11'\nset ytics (", gp);
	for (int i = 0; i < nl; i++) {
		if (i)
			fputs(", ", gp);
		gp_str(gp, first.layers[i].name);
		fprintf(gp, " %d", nl - 1 - i);
	}
	fputs(")\nplot ", gp);
	int nterm = 0;
	for (int k = 0; k < LIVE_NKINDS; k++) {
		int any = 0;
		for (int i = 0; i < nl; i++)
			any |= lk[i][k] != 0;
		if (!any)
			continue;
		if (nterm++)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "live-layers.dat");
		fprintf(gp, " index %d using 2:1:2:3:($1-0.35):($1+0.35) with boxxyerror "
			"lc rgb '%s' notitle", k, live_colours[k]);
	}
	fputs("\nunset multiplot\n", gp);
	ret = 0;
out:
	if (d)
		fclose(d);
	free(first.layers);
	return ret;
}
