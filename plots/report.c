/*
 * report.c: the report of `gpumemsim report` (report.h): one self-contained
 * HTML page (figures inlined as PNG data) and its Markdown twin (figures as
 * files beside it) summarising the stored runs: the largest batch that ran
 * without OOM per setting, the best setting per trace, OOM verdicts, the
 * figures of plot.c, and every run's metadata.
 *
 * Deterministic: no dates or host names; the same database gives the same
 * pages. Pages are written to NAME.tmp.PID and renamed, so a failed report
 * leaves no half page. Prints nothing: the caller says what happened.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/size.h"
#include "../base/version.h"
#include "../sim/oom_text.h"
#include "../sim/store.h"
#include "plot.h"

#define REPORT_MAX_FIGS 64

struct page {
	FILE *html, *md;
	int ncols;
};

static void html_esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

static void md_esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|' || *s == '*' || *s == '_' || *s == '`' || *s == '\\')
			fputc('\\', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
}

static void heading(struct page *p, const char *text)
{
	fputs("<h2>", p->html);
	html_esc(p->html, text);
	fputs("</h2>\n", p->html);
	fprintf(p->md, "\n## %s\n\n", text);
}

static void para(struct page *p, const char *text)
{
	fputs("<p>", p->html);
	html_esc(p->html, text);
	fputs("</p>\n", p->html);
	md_esc(p->md, text);
	fputs("\n\n", p->md);
}

static void tab_begin(struct page *p, int ncols, const char *const *heads)
{
	p->ncols = ncols;
	fputs("<table>\n<tr>", p->html);
	fputs("|", p->md);
	for (int i = 0; i < ncols; i++) {
		fputs("<th>", p->html);
		html_esc(p->html, heads[i]);
		fputs("</th>", p->html);
		fputc(' ', p->md);
		md_esc(p->md, heads[i]);
		fputs(" |", p->md);
	}
	fputs("</tr>\n", p->html);
	fputs("\n|", p->md);
	for (int i = 0; i < ncols; i++)
		fputs("---|", p->md);
	fputc('\n', p->md);
}

static void tab_row(struct page *p, const char *const *cells)
{
	fputs("<tr>", p->html);
	fputs("|", p->md);
	for (int i = 0; i < p->ncols; i++) {
		fputs("<td>", p->html);
		html_esc(p->html, cells[i] ? cells[i] : "");
		fputs("</td>", p->html);
		fputc(' ', p->md);
		md_esc(p->md, cells[i] ? cells[i] : "");
		fputs(" |", p->md);
	}
	fputs("</tr>\n", p->html);
	fputc('\n', p->md);
}

static void tab_end(struct page *p)
{
	fputs("</table>\n", p->html);
	fputc('\n', p->md);
}

static int base64_file(FILE *out, const char *path)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	FILE *in = fopen(path, "rb");
	unsigned char b[3];
	size_t n;
	if (!in)
		return -1;
	while ((n = fread(b, 1, 3, in)) > 0) {
		unsigned v = (unsigned)b[0] << 16 | (n > 1 ? (unsigned)b[1] << 8 : 0) |
			     (n > 2 ? b[2] : 0);
		fputc(tbl[v >> 18 & 63], out);
		fputc(tbl[v >> 12 & 63], out);
		fputc(n > 1 ? tbl[v >> 6 & 63] : '=', out);
		fputc(n > 2 ? tbl[v & 63] : '=', out);
	}
	int bad = ferror(in);
	fclose(in);
	return bad ? -1 : 0;
}

/* ------------------------------------------------------------ figures */

struct report {
	struct store *s;
	const char *dir;
	const char *user_where;
	const struct plot_select *sel;
	struct page p;
	int nfigs, notes;
	char figs[REPORT_MAX_FIGS][32];
	char *err; /* why the report failed */
	size_t errlen;
};

static int count_row(void *ctx, int ncols, const char *const *cols)
{
	(void)ncols;
	(void)cols;
	++*(int *)ctx;
	return 1;
}

/* Whether a selected run of the trace at RUNS[I] has a live-at-peak
 * record (runs stored by an older gpumemsim have none). */
static int trace_has_live(struct report *r, const struct plot_run *runs, int n, int i)
{
	char err[256];
	for (int j = i; j < n && runs[j].trace_crc32 == runs[i].trace_crc32; j++) {
		char id[24];
		int found = 0;
		snprintf(id, sizeof id, "%" PRId64, runs[j].id);
		const char *params[1] = {id};
		if (store_query(r->s, "SELECT 1 FROM peak_live WHERE run_id=?1 LIMIT 1", params, 1,
				count_row, &found, err, sizeof err) >= 0 && found)
			return 1;
	}
	return 0;
}

/* One figure, inlined in the page and linked from the Markdown. A figure
 * that cannot be drawn (e.g. too many runs) is a note, not a failure. */
static int add_figure(struct report *r, enum plot_kind kind, const char *extra_where,
		      const char *label_key, const char *label_value, const char *caption)
{
	char where[2048], out[4096], err[1024];
	if (r->nfigs == REPORT_MAX_FIGS)
		return 0;
	if (extra_where && r->user_where)
		snprintf(where, sizeof where, "(%s) AND (%s)", r->user_where, extra_where);
	else
		snprintf(where, sizeof where, "%s", extra_where ? extra_where
					  : r->user_where ? r->user_where : "1");
	char name[32];
	snprintf(name, sizeof name, "fig-%02d-%s.png", r->nfigs + 1, plot_kind_name(kind));
	snprintf(out, sizeof out, "%s/%s", r->dir, name);
	struct plot_request req = {
		.kind = kind,
		.sel = {.where = where,
			.label_key = label_key ? label_key : r->sel->label_key,
			.label_value = label_key ? label_value : r->sel->label_value},
		.out = out,
	};
	if (plot_make(r->s, &req, err, sizeof err) < 0) {
		char note[1400];
		snprintf(note, sizeof note, "(figure not drawn: %s: %s)", caption, err);
		para(&r->p, note);
		r->notes++;
		return 0;
	}
	snprintf(r->figs[r->nfigs++], sizeof r->figs[0], "%s", name);
	fputs("<figure><img alt=\"", r->p.html);
	html_esc(r->p.html, caption);
	fputs("\" src=\"data:image/png;base64,", r->p.html);
	if (base64_file(r->p.html, out) < 0) {
		snprintf(r->err, r->errlen, "reading %s failed", out);
		return -1;
	}
	fputs("\"><figcaption>", r->p.html);
	html_esc(r->p.html, caption);
	fputs("</figcaption></figure>\n", r->p.html);
	fputs("![", r->p.md);
	md_esc(r->p.md, caption);
	fprintf(r->p.md, "](%s)\n\n", name);
	return 0;
}

/* ------------------------------------------------------------ tables */

static const char *fmt_bytes(uint64_t b, char *buf, size_t len)
{
	return size_fmt(b, buf, len);
}

static long batch_of(const struct plot_run *r)
{
	char *end;
	long v = strtol(r->batch, &end, 10);
	return *r->batch && !*end && v > 0 ? v : -1;
}

/* Users' question 1: per model and setting, the largest batch that ran
 * without OOM among the stored ones, with its headroom. */
static void table_max_batch(struct report *r, const struct plot_run *runs, int n)
{
	static const char *const heads[] = {"model", "policy / setting", "capacity",
		"largest batch without OOM", "peak reserved there", "headroom", "smallest batch with OOM"};
	int any = 0;
	char (*done)[192] = calloc((size_t)n, sizeof *done);
	int nd = 0;
	if (!done)
		return;
	for (int i = 0; i < n; i++) {
		char key[192], set[128];
		if (batch_of(&runs[i]) < 0 || !strcmp(runs[i].policy, "optimal"))
			continue;
		snprintf(key, sizeof key, "%s\t%s\t%" PRIu64, runs[i].model,
			 plot_run_setting(&runs[i], set, sizeof set), runs[i].capacity);
		int seen = 0;
		for (int k = 0; k < nd && !seen; k++)
			seen = !strcmp(done[k], key);
		if (seen)
			continue;
		memcpy(done[nd++], key, sizeof key);
		long best = -1, first_oom = -1;
		const struct plot_run *at = NULL;
		for (int j = i; j < n; j++) {
			char s2[128];
			long b = batch_of(&runs[j]);
			if (b < 0 || strcmp(runs[j].model, runs[i].model) ||
			    runs[j].capacity != runs[i].capacity ||
			    strcmp(plot_run_setting(&runs[j], s2, sizeof s2), set))
				continue;
			if (!runs[j].oom && b > best) {
				best = b;
				at = &runs[j];
			}
			if (runs[j].oom && (first_oom < 0 || b < first_oom))
				first_oom = b;
		}
		if (!any) {
			heading(&r->p, "Largest batch that fits, per setting");
			para(&r->p, "Among the stored batch sizes only (no extrapolation). Headroom: "
			     "capacity minus peak reserved at that batch.");
			tab_begin(&r->p, 7, heads);
			any = 1;
		}
		char c_cap[32], c_best[24], c_res[32], c_head[48], c_oom[24];
		snprintf(c_cap, sizeof c_cap, "%s", runs[i].capacity
			 ? fmt_bytes(runs[i].capacity, c_res, sizeof c_res) : "unlimited");
		snprintf(c_best, sizeof c_best, best > 0 ? "%ld" : "none", best);
		snprintf(c_res, sizeof c_res, "-");
		snprintf(c_head, sizeof c_head, "-");
		if (at) {
			fmt_bytes(at->peak_reserved, c_res, sizeof c_res);
			if (at->capacity && at->capacity >= at->peak_reserved) {
				char hb[32];
				snprintf(c_head, sizeof c_head, "%s (%.1f%%)",
					 fmt_bytes(at->capacity - at->peak_reserved, hb, sizeof hb),
					 100.0 * (double)(at->capacity - at->peak_reserved) /
						 (double)at->capacity);
			}
		}
		snprintf(c_oom, sizeof c_oom, first_oom > 0 ? "%ld" : "none stored", first_oom);
		const char *cells[] = {*runs[i].model ? runs[i].model : "-", set, c_cap, c_best,
				       c_res, c_head, c_oom};
		tab_row(&r->p, cells);
	}
	if (any)
		tab_end(&r->p);
	free(done);
}

/* Users' question 3: the lowest peak reserved per trace among the caching
 * allocators that did not OOM. */
static void table_best(struct report *r, const struct plot_run *runs, int n)
{
	static const char *const heads[] = {"trace", "best setting", "peak reserved", "floor",
		"reserved / floor", "device allocs", "worst setting", "its peak reserved"};
	heading(&r->p, "Best setting per trace");
	para(&r->p, "Lowest peak reserved without OOM, leaving out the optimal policy (the floor "
	     "itself: the optimal policy's peak, else the peak of live requests) and cuda_malloc "
	     "(no caching: one cudaMalloc per request).");
	tab_begin(&r->p, 8, heads);
	for (int i = 0; i < n; i++) {
		if (i && runs[i].trace_crc32 == runs[i - 1].trace_crc32)
			continue;
		const struct plot_run *best = NULL, *worst = NULL, *opt = NULL;
		for (int j = i; j < n && runs[j].trace_crc32 == runs[i].trace_crc32; j++) {
			if (!strcmp(runs[j].policy, "optimal")) {
				opt = &runs[j];
				continue;
			}
			if (!strcmp(runs[j].policy, "cuda_malloc") || runs[j].oom)
				continue;
			if (!best || runs[j].peak_reserved < best->peak_reserved)
				best = &runs[j];
			if (!worst || runs[j].peak_reserved > worst->peak_reserved)
				worst = &runs[j];
		}
		char tr[256], set[128], res[32], fl[32], ratio[32], da[32], wset[128], wres[32];
		const char *base = strrchr(runs[i].trace_path, '/');
		snprintf(tr, sizeof tr, "%s%s%s%s", base ? base + 1 : runs[i].trace_path,
			 *runs[i].model ? " (" : "", runs[i].model, *runs[i].model ? ")" : "");
		uint64_t floor_b = opt ? opt->peak_reserved : runs[i].peak_requested;
		fmt_bytes(floor_b, fl, sizeof fl);
		if (best) {
			plot_run_setting(best, set, sizeof set);
			fmt_bytes(best->peak_reserved, res, sizeof res);
			snprintf(ratio, sizeof ratio, "%.3f",
				 floor_b ? (double)best->peak_reserved / (double)floor_b : 0.0);
			snprintf(da, sizeof da, "%" PRIu64, best->device_allocs);
			plot_run_setting(worst, wset, sizeof wset);
			fmt_bytes(worst->peak_reserved, wres, sizeof wres);
		} else {
			snprintf(set, sizeof set, "none without OOM");
			snprintf(res, sizeof res, "-");
			snprintf(ratio, sizeof ratio, "-");
			snprintf(da, sizeof da, "-");
			snprintf(wset, sizeof wset, "-");
			snprintf(wres, sizeof wres, "-");
		}
		const char *cells[] = {tr, set, res, fl, ratio, da, wset, wres};
		tab_row(&r->p, cells);
	}
	tab_end(&r->p);
}

/* Users' question 2: why it ran out of memory, as the engine judged it
 * (runs.oom_verdict) with the figures that support it. */
static const char *oom_verdict(const struct plot_run *x, char *buf, size_t len)
{
	return oom_explain(x->oom_verdict, x->oom_bytes, x->oom_allocated, x->oom_reserved,
			   x->oom_limit, x->capacity, x->oom_largest_free, x->oom_cached_free, buf,
			   len);
}

static void table_ooms(struct report *r, const struct plot_run *runs, int n)
{
	static const char *const heads[] = {"run", "trace", "setting", "OOMs", "first request",
		"trace line", "allocated", "reserved", "largest free", "cached free", "capacity",
		"verdict"};
	int any = 0;
	heading(&r->p, "OOM verdicts");
	for (int i = 0; i < n; i++) {
		const struct plot_run *x = &runs[i];
		if (!x->oom)
			continue;
		if (!any)
			tab_begin(&r->p, 12, heads);
		any = 1;
		char id[24], set[128], no[24], req[32], line[24], al[32], rs[32], lf[32], cf[32],
			cap[32], tr[160], vd[160];
		const char *base = strrchr(x->trace_path, '/');
		snprintf(tr, sizeof tr, "%s", base ? base + 1 : x->trace_path);
		snprintf(id, sizeof id, "%" PRId64, x->id);
		snprintf(no, sizeof no, "%" PRIu64, x->num_ooms);
		snprintf(line, sizeof line, "%" PRIu64, x->oom_line);
		fmt_bytes(x->oom_bytes, req, sizeof req);
		fmt_bytes(x->oom_allocated, al, sizeof al);
		fmt_bytes(x->oom_reserved, rs, sizeof rs);
		if (x->oom_largest_free >= 0)
			fmt_bytes((uint64_t)x->oom_largest_free, lf, sizeof lf);
		else
			snprintf(lf, sizeof lf, "n/a");
		if (x->oom_cached_free >= 0)
			fmt_bytes((uint64_t)x->oom_cached_free, cf, sizeof cf);
		else
			snprintf(cf, sizeof cf, "n/a");
		if (x->capacity)
			fmt_bytes(x->capacity, cap, sizeof cap);
		else
			snprintf(cap, sizeof cap, "unlimited");
		const char *cells[] = {id, tr, plot_run_setting(x, set, sizeof set), no, req, line,
				       al, rs, lf, cf, cap, oom_verdict(x, vd, sizeof vd)};
		tab_row(&r->p, cells);
	}
	if (any)
		tab_end(&r->p);
	else
		para(&r->p, "No selected run ran out of memory.");
}

static void table_runs(struct report *r, const struct plot_run *runs, int n)
{
	static const char *const heads[] = {"run", "trace", "labels", "policy", "setting",
		"capacity", "peak reserved", "peak allocated", "peak requested", "fragmentation",
		"device allocs / frees", "OOM", "complete", "trace CRC-32", "gpumemsim"};
	heading(&r->p, "Runs and their metadata");
	para(&r->p, "The latest run of each trace, policy, setting and capacity among those "
	     "selected. Sizes in binary units (GiB = 2^30 bytes).");
	tab_begin(&r->p, 15, heads);
	for (int i = 0; i < n; i++) {
		const struct plot_run *x = &runs[i];
		char id[24], cap[32], res[32], al[32], rq[32], fr[24], da[48], crc[16];
		snprintf(id, sizeof id, "%" PRId64, x->id);
		if (x->capacity)
			fmt_bytes(x->capacity, cap, sizeof cap);
		else
			snprintf(cap, sizeof cap, "unlimited");
		fmt_bytes(x->peak_reserved, res, sizeof res);
		fmt_bytes(x->peak_allocated, al, sizeof al);
		fmt_bytes(x->peak_requested, rq, sizeof rq);
		snprintf(fr, sizeof fr, "%.1f%%", 100.0 * x->fragmentation);
		snprintf(da, sizeof da, "%" PRIu64 " / %" PRIu64, x->device_allocs, x->device_frees);
		snprintf(crc, sizeof crc, "%08" PRIx32, x->trace_crc32);
		const char *cells[] = {id, x->trace_path, x->labels_json, x->policy,
				       *x->conf ? x->conf : "(default)", cap, res, al, rq, fr, da,
				       x->oom ? "yes" : "no", x->complete ? "yes" : "no (cut short)",
				       crc, x->tool_version};
		tab_row(&r->p, cells);
	}
	tab_end(&r->p);
}

/* ------------------------------------------------------------ the page */

static const char html_head[] =
	"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	"<title>gpumemsim report</title>\n<style>\n"
	"body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:2em auto;"
	"max-width:1250px;color:#222;line-height:1.4}\n"
	"h1{font-size:1.7em;border-bottom:2px solid #1f77b4}h2{font-size:1.3em;margin-top:1.6em}\n"
	"table{border-collapse:collapse;font-size:0.85em;margin:0.6em 0}\n"
	"th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}\n"
	"th{background:#eef3f8}tr:nth-child(even) td{background:#fafafa}\n"
	"figure{margin:1em 0}img{max-width:100%;border:1px solid #ddd}\n"
	"figcaption{font-size:0.9em;color:#555}\n</style>\n</head>\n<body>\n";

static int write_body(struct report *r, const struct plot_run *runs, int n, const char *db)
{
	char buf[1024];
	fputs(html_head, r->p.html);
	fputs("<h1>gpumemsim report</h1>\n", r->p.html);
	fputs("# gpumemsim report\n\n", r->p.md);
	int ntr = 0;
	for (int i = 0; i < n; i++)
		ntr += !i || runs[i].trace_crc32 != runs[i - 1].trace_crc32;
	snprintf(buf, sizeof buf, "Results database %s: %d runs of %d traces%s%s%s%s%s. Made "
		 "by gpumemsim %s. Sizes in GiB (2^30 bytes), times in simulated ms.", db, n, ntr,
		 r->user_where ? ", selected by " : "", r->user_where ? r->user_where : "",
		 r->sel->label_key ? ", label " : "", r->sel->label_key ? r->sel->label_key : "",
		 r->sel->label_key ? "=..." : "", GPUMEMSIM_VERSION);
	para(&r->p, buf);
	table_max_batch(r, runs, n);
	table_best(r, runs, n);
	table_ooms(r, runs, n);

	heading(&r->p, "Figures");
	para(&r->p, "Timelines shade the NVTX phases (forward, backward, optimizer) of their "
	     "first run. Per trace, where the data exists: predicted step time against peak "
	     "reserved (runs made with `gpumemsim run --timing`), and what is live at the "
	     "peak by kind and layer (kinds are heuristics from the NVTX ranges; "
	     "docs/schema.md, table peak_live).");
	/* peak against batch, per model with at least two batch sizes */
	for (int i = 0; i < n; i++) {
		if (batch_of(&runs[i]) < 0 || (i && !strcmp(runs[i].model, runs[i - 1].model)))
			continue;
		int nb = 0;
		long first = batch_of(&runs[i]);
		for (int j = i; j < n && !strcmp(runs[j].model, runs[i].model); j++)
			nb += batch_of(&runs[j]) > 0 && batch_of(&runs[j]) != first;
		if (!nb || !*runs[i].model)
			continue;
		snprintf(buf, sizeof buf, "Peak reserved against batch size, %s", runs[i].model);
		if (add_figure(r, PLOT_BATCH, NULL, "model", runs[i].model, buf) < 0)
			return -1;
	}
	/* per trace: the comparison and the timeline */
	for (int i = 0; i < n; i++) {
		if (i && runs[i].trace_crc32 == runs[i - 1].trace_crc32)
			continue;
		char where[64], tt[256];
		const char *base = strrchr(runs[i].trace_path, '/');
		snprintf(tt, sizeof tt, "%s", base ? base + 1 : runs[i].trace_path);
		snprintf(where, sizeof where, "trace_crc32=%" PRIu32, runs[i].trace_crc32);
		snprintf(buf, sizeof buf, "Settings compared, %s", tt);
		if (add_figure(r, PLOT_COMPARE, where, NULL, NULL, buf) < 0)
			return -1;
		snprintf(buf, sizeof buf, "Memory over time, %s", tt);
		if (add_figure(r, PLOT_TIMELINE, where, NULL, NULL, buf) < 0)
			return -1;
		int timed = 0;
		for (int j = i; j < n && runs[j].trace_crc32 == runs[i].trace_crc32; j++)
			timed += runs[j].step_time_ns > 0 && strcmp(runs[j].policy, "optimal");
		if (timed) {
			snprintf(buf, sizeof buf, "Step time against memory (Pareto), %s", tt);
			if (add_figure(r, PLOT_PARETO, where, NULL, NULL, buf) < 0)
				return -1;
		}
		if (trace_has_live(r, runs, n, i)) {
			snprintf(buf, sizeof buf, "What is live at the peak, by kind and layer, %s", tt);
			if (add_figure(r, PLOT_LIVE, where, NULL, NULL, buf) < 0)
				return -1;
		}
	}
	if (add_figure(r, PLOT_FRAG, NULL, NULL, NULL, "Fragmentation per setting and trace") < 0)
		return -1;
	table_runs(r, runs, n);
	fputs("</body>\n</html>\n", r->p.html);
	return 0;
}


/* Close page F, written as TMP, and rename it FINAL when OK; a failed
 * rename is said in WHY. */
static int finish(FILE *f, const char *tmp, const char *final, int ok, char *why,
		  size_t whylen)
{
	int bad = !f || ferror(f);
	if (f && fclose(f) != 0)
		bad = 1;
	if (!ok || bad) {
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, final) != 0) {
		snprintf(why, whylen, "%s: %s", final, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int report_write(const char *db, const char *dir, const struct report_opts *o,
		 struct report_result *res, char *err, size_t errlen)
{
	static const struct report_opts all;
	struct report_result none;
	const struct plot_select *sel = &(o ? o : &all)->sel;
	if (!res)
		res = &none;
	memset(res, 0, sizeof *res);
	if (sel->where && plot_check_where(sel->where, err, errlen) < 0)
		return -1;
	if (access(db, R_OK) != 0) {
		snprintf(err, errlen, "%s: no such results database (run `gpumemsim run` first)", db);
		return -1;
	}
	struct store *s = store_open(db, err, errlen);
	if (!s)
		return -1;
	struct plot_run *runs = NULL;
	int ret = -1, ok = 0;
	char html_tmp[4300], md_tmp[4300], html_path[4200], md_path[4200], why[4400] = "";
	struct report r = {.s = s, .dir = dir, .user_where = sel->where, .sel = sel, .err = err,
			   .errlen = errlen};
	int n = plot_load_runs(s, sel, &runs, err, errlen);
	if (n < 0)
		goto out;
	if (n == 0) {
		snprintf(err, errlen, "%s: no stored run matches the selection", db);
		goto out;
	}
	res->runs = n;
	for (int i = 0; i < n; i++)
		res->traces += !i || runs[i].trace_crc32 != runs[i - 1].trace_crc32;
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "-o %s: %s", dir, strerror(errno));
		goto out;
	}
	snprintf(html_path, sizeof html_path, "%s/report.html", dir);
	snprintf(md_path, sizeof md_path, "%s/report.md", dir);
	snprintf(html_tmp, sizeof html_tmp, "%s.tmp.%ld", html_path, (long)getpid());
	snprintf(md_tmp, sizeof md_tmp, "%s.tmp.%ld", md_path, (long)getpid());
	r.p.html = fopen(html_tmp, "w");
	r.p.md = fopen(md_tmp, "w");
	if (!r.p.html || !r.p.md) {
		snprintf(err, errlen, "cannot write in %s: %s", dir, strerror(errno));
	} else {
		res->no_gnuplot = !plot_gnuplot_available();
		ok = write_body(&r, runs, n, db) == 0;
	}
	res->figures = r.nfigs;
	res->figure_notes = r.notes;
	int h = finish(r.p.html, html_tmp, html_path, ok, why, sizeof why);
	int m = finish(r.p.md, md_tmp, md_path, ok && h == 0, why, sizeof why);
	if (h == 0 && m != 0)
		unlink(html_path); /* both pages or neither */
	if (h == 0 && m == 0) {
		snprintf(res->html_path, sizeof res->html_path, "%s", html_path);
		snprintf(res->md_path, sizeof res->md_path, "%s", md_path);
		ret = 0;
	} else if (ok) {
		snprintf(err, errlen, "writing the pages in %s failed%s%s%s", dir, *why ? " (" : "",
			 why, *why ? ")" : "");
	}
out:
	plot_runs_free(runs, n > 0 ? n : 0);
	store_close(s);
	return ret;
}
