/*
 * report.c: the report of `gpumemsim report` (report.h): one self-contained
 * HTML page (figures inlined as PNG data), its Markdown twin (figures as
 * files beside it) and runs.csv (every run, one row), from the stored runs
 * grouped by workload and model (report_groups.c). The page's order:
 * the answers first (report_answers.c), then every figure per group
 * (report_figs.c), then where the full data is (runs.csv, the database).
 * docs/report.md describes the structure.
 *
 * Deterministic: no dates or host names; the same database gives the same
 * pages. Files are written to NAME.tmp.PID and renamed, so a failed report
 * leaves no half page. Prints nothing: the caller says what happened.
 */
#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/version.h"
#include "report_int.h"

static const char html_head[] =
	"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	"<title>gpumemsim report</title>\n<style>\n"
	"body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:2em auto;"
	"max-width:1250px;color:#222;line-height:1.4}\n"
	"h1{font-size:1.7em;border-bottom:2px solid #1f77b4}h2{font-size:1.4em;margin-top:1.8em;"
	"border-bottom:1px solid #ccc}h3{font-size:1.15em;margin-top:1.5em}"
	"h4{font-size:1em;margin:1.2em 0 0.3em}\n"
	"table{border-collapse:collapse;font-size:0.85em;margin:0.6em 0}\n"
	"th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}\n"
	"th{background:#eef3f8}tr:nth-child(even) td{background:#fafafa}\n"
	"figure{margin:1em 0}img{max-width:100%;border:1px solid #ddd}\n"
	"figcaption{font-size:0.9em;color:#555}nav li{margin:0.1em 0}\n</style>\n</head>\n<body>\n";

/* The contents: in-page links to the sections and each group's figures
 * (HTML only: the Markdown has its headings). */
static void contents(struct report *r)
{
	static const char *const sec[][2] = {
		{"answers", "Answers"}, {"groups", "What was compared"},
		{"best", "Best setting per group and capacity"},
		{"maxbatch", "Largest batch that fits"},
		{"nonmono", "Where peak memory falls as the batch grows"},
		{"time", "Cost in time of each setting"}, {"ooms", "Runs out of memory"},
		{"figures", "Figures"}, {"data", "The full data"}};
	FILE *h = r->p.html;
	fputs("<nav><ul>\n", h);
	for (size_t i = 0; i < sizeof sec / sizeof sec[0]; i++) {
		fprintf(h, "<li><a href=\"#%s\">%s</a>", sec[i][0], sec[i][1]);
		if (!strcmp(sec[i][0], "figures") && r->ngroups) {
			fputs("<ul>\n", h);
			for (int k = 0; k < r->ngroups; k++) {
				fprintf(h, "<li><a href=\"#%s\">", r->groups[k].anchor);
				html_esc(h, r->groups[k].name);
				fputs("</a></li>\n", h);
			}
			fputs("</ul>", h);
		}
		fputs("</li>\n", h);
	}
	fputs("</ul></nav>\n", h);
}

static int write_body(struct report *r)
{
	char buf[6000];
	int ntr = 0;
	for (int k = 0; k < r->ngroups; k++)
		ntr += r->groups[k].ntraces;
	fputs(html_head, r->p.html);
	fputs("<h1>gpumemsim report</h1>\n", r->p.html);
	fputs("# gpumemsim report\n\n", r->p.md);
	snprintf(buf, sizeof buf, "Results database %s: %d runs of %d traces in %d groups (one "
		 "per workload and model)%s%s%s%s%s. Made by gpumemsim %s. Sizes in binary units "
		 "(GiB = 2^30 bytes). The answers come first, then the figures; every run is one "
		 "row of ", r->db, r->nruns, ntr, r->ngroups, r->user_where ? ", selected by " : "",
		 r->user_where ? r->user_where : "", r->sel->label_key ? ", label " : "",
		 r->sel->label_key ? r->sel->label_key : "", r->sel->label_key ? "=..." : "",
		 GPUMEMSIM_VERSION);
	page_para_link(&r->p, buf, "runs.csv", "runs.csv", ".");
	contents(r);
	if (report_answers(r) < 0 || report_figures(r) < 0)
		return -1;
	page_heading(&r->p, 2, "data", "The full data");
	snprintf(buf, sizeof buf, "Every selected run (the latest of each trace, policy, setting "
		 "and capacity), one row each, with its labels, sizes in bytes, OOM verdict in "
		 "words and predicted step time: ");
	page_para_link(&r->p, buf, "runs.csv", "runs.csv",
		       " (CSV, header row, in this page's order).");
	snprintf(buf, sizeof buf, "The runs themselves, with their timelines, NVTX ranges and "
		 "what is live at the peak, are in the SQLite database %s (docs/schema.md; "
		 "`gpumemsim table --db %s`).", r->db, r->db);
	page_para(&r->p, buf);
	fputs("</body>\n</html>\n", r->p.html);
	return 0;
}

/* Close file F, written as TMP, and rename it FINAL when OK; a failed
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

/* Figures of an earlier report in DIR (fig-*.png) would sit beside the new
 * Markdown as if they belonged to it: removed first. */
static void remove_old_figures(const char *dir)
{
	char path[4300];
	for (int i = 1; i < 100000; i++) {
		int found = 0;
		for (int k = 0; k < PLOT_KIND_COUNT; k++) {
			snprintf(path, sizeof path, "%s/fig-%03d-%s.png", dir, i, plot_kind_name(k));
			found |= unlink(path) == 0;
			snprintf(path, sizeof path, "%s/fig-%02d-%s.png", dir, i, plot_kind_name(k));
			found |= unlink(path) == 0;
		}
		if (!found && i > 100)
			break;
	}
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
	char html_tmp[4300], md_tmp[4300], csv_tmp[4300], html_path[4200], md_path[4200],
		csv_path[4200], why[4400] = "";
	struct report r = {.s = s, .dir = dir, .db = db, .user_where = sel->where, .sel = sel,
			   .err = err, .errlen = errlen};
	int n = plot_load_runs(s, sel, &runs, err, errlen);
	if (n < 0)
		goto out;
	if (n == 0) {
		snprintf(err, errlen, "%s: no stored run matches the selection", db);
		goto out;
	}
	r.runs = runs;
	r.nruns = n;
	if (report_groups(&r) < 0)
		goto out;
	res->runs = n;
	res->groups = r.ngroups;
	for (int k = 0; k < r.ngroups; k++)
		res->traces += r.groups[k].ntraces;
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "-o %s: %s", dir, strerror(errno));
		goto out;
	}
	remove_old_figures(dir);
	snprintf(html_path, sizeof html_path, "%s/report.html", dir);
	snprintf(md_path, sizeof md_path, "%s/report.md", dir);
	snprintf(csv_path, sizeof csv_path, "%s/runs.csv", dir);
	snprintf(html_tmp, sizeof html_tmp, "%s.tmp.%ld", html_path, (long)getpid());
	snprintf(md_tmp, sizeof md_tmp, "%s.tmp.%ld", md_path, (long)getpid());
	snprintf(csv_tmp, sizeof csv_tmp, "%s.tmp.%ld", csv_path, (long)getpid());
	r.p.html = fopen(html_tmp, "w");
	r.p.md = fopen(md_tmp, "w");
	if (!r.p.html || !r.p.md) {
		snprintf(err, errlen, "cannot write in %s: %s", dir, strerror(errno));
	} else {
		res->no_gnuplot = !plot_gnuplot_available();
		ok = write_body(&r) == 0 && report_csv(&r, csv_tmp, err, errlen) == 0;
	}
	res->figures = r.nfigs;
	res->figure_notes = r.notes;
	int h = finish(r.p.html, html_tmp, html_path, ok, why, sizeof why);
	int m = finish(r.p.md, md_tmp, md_path, ok && h == 0, why, sizeof why);
	int c = -1;
	if (ok && h == 0 && m == 0) {
		if (rename(csv_tmp, csv_path) == 0)
			c = 0;
		else
			snprintf(why, sizeof why, "%s: %s", csv_path, strerror(errno));
	}
	unlink(csv_tmp);
	if (h == 0 && (m != 0 || c != 0))
		unlink(html_path); /* all three or none */
	if (m == 0 && c != 0)
		unlink(md_path);
	if (h == 0 && m == 0 && c == 0) {
		snprintf(res->html_path, sizeof res->html_path, "%s", html_path);
		snprintf(res->md_path, sizeof res->md_path, "%s", md_path);
		snprintf(res->csv_path, sizeof res->csv_path, "%s", csv_path);
		ret = 0;
	} else if (ok) {
		snprintf(err, errlen, "writing the pages in %s failed%s%s%s", dir, *why ? " (" : "",
			 why, *why ? ")" : "");
	}
out:
	report_groups_free(&r);
	plot_runs_free(runs, n > 0 ? n : 0);
	store_close(s);
	return ret;
}
