/*
 * plot_common.c: what every figure of plots/ shares (plot_int.h): running
 * gnuplot, the figure's folder and data files, the script's common styling
 * (terminal, fonts, palette), and the rules of plot.c's file comment (the
 * floor, capacity lines, runs drawn off scale).
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/size.h"
#include "plot_int.h"

extern char **environ;

/* Twelve colours that stay apart on white (tab10 plus two). */
static const char *const palette[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
	"#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939",
};
#define NPALETTE (sizeof palette / sizeof palette[0])

static const char *gnuplot_prog(void)
{
	const char *g = getenv("GPUMEMSIM_GNUPLOT");
	return g && *g ? g : "gnuplot";
}

/* Searching PATH ourselves gives a clear "gnuplot is not installed" instead
 * of a failed spawn deep inside a figure. */
int plot_gnuplot_available(void)
{
	const char *prog = gnuplot_prog();
	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0;
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/bin:/bin";
	char buf[4096];
	while (*path) {
		size_t len = strcspn(path, ":");
		if (len && len + strlen(prog) + 2 < sizeof buf) {
			snprintf(buf, sizeof buf, "%.*s/%s", (int)len, path, prog);
			if (access(buf, X_OK) == 0)
				return 1;
		}
		path += len;
		if (*path == ':')
			path++;
	}
	return 0;
}

/* "resnet18 batch 64" from the labels, else the trace's file name. */
const char *trace_title(const struct plot_run *r, char *buf, size_t len)
{
	const char *base = strrchr(r->trace_path, '/');
	base = base ? base + 1 : r->trace_path;
	if (*r->model && *r->batch)
		snprintf(buf, len, "%s batch %s", r->model, r->batch);
	else if (*r->model)
		snprintf(buf, len, "%s (%s)", r->model, base);
	else
		snprintf(buf, len, "%s", base);
	return buf;
}

/* ------------------------------------------------------------ a figure */

FILE *fig_file(struct fig *f, const char *name, char *err, size_t errlen)
{
	char path[4200];
	if (f->nfiles == PLOT_MAX_FILES) {
		snprintf(err, errlen, "internal: too many plot files");
		return NULL;
	}
	snprintf(path, sizeof path, "%s/%s", f->dir, name);
	FILE *fp = fopen(path, "w");
	if (!fp) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	snprintf(f->files[f->nfiles++], sizeof f->files[0], "%s", name);
	return fp;
}

int fig_close_file(FILE *fp, const char *name, char *err, size_t errlen)
{
	int bad = ferror(fp);
	if (fclose(fp) != 0 || bad) {
		snprintf(err, errlen, "writing %s failed", name);
		return -1;
	}
	return 0;
}

/* A gnuplot double-quoted string: backslash and quote escaped. */
void gp_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* One of the figure's data files, quoted for gnuplot; gnuplot runs in the
 * figure's folder, so the script names no path and stays the same. */
void gp_data(FILE *gp, const struct fig *f, const char *name)
{
	(void)f;
	gp_str(gp, name);
}

/* Remove the files of a temporary folder and the folder. */
static void fig_remove_tmp(struct fig *f)
{
	if (!f->tmp_dir)
		return;
	char path[4200];
	for (int i = 0; i < f->nfiles; i++) {
		snprintf(path, sizeof path, "%s/%s", f->dir, f->files[i]);
		unlink(path);
	}
	rmdir(f->dir);
}

static int fig_open(struct fig *f, const struct plot_request *req, char *err, size_t errlen);

int fig_begin(struct fig *f, const struct plot_request *req, char *err, size_t errlen)
{
	if (fig_open(f, req, err, errlen) == 0)
		return 0;
	/* nothing half made stays behind */
	if (f->gp)
		fclose(f->gp);
	f->gp = NULL;
	fig_remove_tmp(f);
	return -1;
}

static int fig_open(struct fig *f, const struct plot_request *req, char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	int fmt = plot_format_from_path(req->out);
	if (fmt < 0) {
		snprintf(err, errlen, "-o %s: the figure's name must end in .png or .svg", req->out);
		return -1;
	}
	f->fmt = fmt;
	if (!plot_gnuplot_available()) {
		snprintf(err, errlen, "gnuplot not found (install gnuplot-nox, or set "
			 "GPUMEMSIM_GNUPLOT to its path)");
		return -1;
	}
	if (req->data_dir) {
		if (mkdir(req->data_dir, 0777) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "the figure's data folder %s: %s", req->data_dir, strerror(errno));
			return -1;
		}
		if (!realpath(req->data_dir, f->dir)) {
			snprintf(err, errlen, "the figure's data folder %s: %s", req->data_dir, strerror(errno));
			return -1;
		}
	} else {
		const char *t = getenv("TMPDIR");
		snprintf(f->dir, sizeof f->dir, "%s/gpumemsim-plot-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(f->dir)) {
			snprintf(err, errlen, "cannot make a temporary folder in %s: %s",
				 t && *t ? t : "/tmp", strerror(errno));
			return -1;
		}
		f->tmp_dir = 1;
	}
	char cwd[4096] = "";
	if (req->out[0] != '/' && !getcwd(cwd, sizeof cwd)) {
		snprintf(err, errlen, "cannot tell the current folder: %s", strerror(errno));
		return -1;
	}
	snprintf(f->out_tmp, sizeof f->out_tmp, "%.4000s%s%.90s.tmp.%ld", cwd, *cwd ? "/" : "",
		 req->out, (long)getpid());
	f->gp = fig_file(f, "figure.gp", err, errlen);
	if (!f->gp)
		return -1;
	fprintf(f->gp, "# gpumemsim plot %s: gnuplot script (data files beside it)\n",
		plot_kind_name(req->kind));
	if (fmt == PLOT_FMT_PNG)
		fputs("set terminal pngcairo size 1200,700 font 'DejaVu Sans,13' noenhanced\n", f->gp);
	else
		fputs("set terminal svg size 1200,700 font 'DejaVu Sans,13' noenhanced "
		      "background rgb 'white'\n", f->gp);
	/* the output goes on gnuplot's command line: the script stays the same
	 * from run to run */
	fputs("set encoding utf8\nset border lw 1.2\nset grid ytics lc rgb '#d8d8d8'\n"
	      "set key noenhanced box lc rgb '#bbbbbb' opaque\nset datafile missing '?'\n", f->gp);
	for (size_t i = 0; i < NPALETTE; i++)
		fprintf(f->gp, "set linetype %zu lc rgb '%s' lw 2 pt 7 ps 1.2\n", i + 1, palette[i]);
	fprintf(f->gp, "set linetype cycle %zu\n", NPALETTE);
	return 0;
}

static int run_gnuplot(const char *dir, const char *script, const char *out, char *err,
		       size_t errlen)
{
	char set_out[4400];
	size_t k = 0;
	k += (size_t)snprintf(set_out, sizeof set_out, "set output \"");
	for (const char *p = out; *p && k + 4 < sizeof set_out; p++) {
		if (*p == '"' || *p == '\\')
			set_out[k++] = '\\';
		set_out[k++] = *p;
	}
	snprintf(set_out + k, sizeof set_out - k, "\"");
	char *argv[] = {(char *)gnuplot_prog(), "-e", set_out, "figure.gp", NULL};
	posix_spawn_file_actions_t fa;
	pid_t pid;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addchdir_np(&fa, dir);
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		snprintf(err, errlen, "cannot run %s: %s (install gnuplot, or set GPUMEMSIM_GNUPLOT)",
			 argv[0], strerror(rc));
		return -1;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			snprintf(err, errlen, "waiting for gnuplot: %s", strerror(errno));
			return -1;
		}
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "gnuplot failed on %s (its message is above)", script);
		return -1;
	}
	return 0;
}

/* Render, move the figure into place, and clean up the temporary folder. */
int fig_end(struct fig *f, const struct plot_request *req, int ok, char *err,
	    size_t errlen)
{
	char script[4200];
	struct stat sb;
	int ret = -1;
	snprintf(script, sizeof script, "%s/figure.gp", f->dir);
	if (f->gp) {
		fputs("unset output\n", f->gp);
		if (fig_close_file(f->gp, "figure.gp", err, errlen) < 0)
			ok = 0;
		f->gp = NULL;
	}
	if (!ok)
		goto out;
	if (run_gnuplot(f->dir, script, f->out_tmp, err, errlen) < 0)
		goto out;
	if (stat(f->out_tmp, &sb) != 0 || sb.st_size == 0) {
		snprintf(err, errlen, "gnuplot wrote no figure to %s", f->out_tmp);
		goto out;
	}
	if (rename(f->out_tmp, req->out) != 0) {
		snprintf(err, errlen, "%s: %s", req->out, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	unlink(f->out_tmp);
	fig_remove_tmp(f);
	return ret;
}

/* ------------------------------------------------------------ helpers */

/* IN broken into lines of about WIDTH characters after commas or spaces
 * (a long conf string stays readable beside a bar). */
void wrap_label(const char *in, char *out, size_t len, size_t width)
{
	size_t k = 0, col = 0;
	for (const char *p = in; *p && k + 2 < len; p++) {
		out[k++] = *p;
		col++;
		size_t next = strcspn(p + 1, ", ");
		if ((*p == ',' || *p == ' ') && col + next >= width && col >= 4 && p[1] &&
		    k + 2 < len) {
			if (*p == ' ')
				k--;
			out[k++] = '\n';
			col = 0;
		}
	}
	out[k] = '\0';
}

/* The floor for trace CRC: the peak reserved of an optimal run that did
 * not run out of memory, else the peak of live requested bytes among the
 * runs that did not. An OOM run is never the floor: it stopped short of the
 * trace's peak (at a capacity below the floor even the optimal policy
 * fails). 0 when every selected run of the trace ran out of memory. */
uint64_t trace_floor(const struct plot_run *runs, int n, uint32_t crc, int *from_optimal)
{
	uint64_t req = 0;
	for (int i = 0; i < n; i++) {
		if (runs[i].trace_crc32 != crc || runs[i].oom)
			continue;
		if (!strcmp(runs[i].policy, "optimal")) {
			if (from_optimal)
				*from_optimal = 1;
			return runs[i].peak_reserved;
		}
		if (runs[i].peak_requested > req)
			req = runs[i].peak_requested;
	}
	if (from_optimal)
		*from_optimal = 0;
	return req;
}

/* The one capacity of RUNS, or 0 when they hold several (or none set). */
uint64_t runs_capacity(const struct plot_run *runs, int n, int *several)
{
	*several = 0;
	for (int i = 1; i < n; i++)
		if (runs[i].capacity != runs[0].capacity)
			*several = 1;
	return n > 0 && !*several ? runs[0].capacity : 0;
}

/* " at 8.00 GiB" (the device capacity of the runs), "" when they hold
 * several or none. */
const char *capacity_words(const struct plot_run *runs, int n, char *buf, size_t len)
{
	int several;
	uint64_t c = runs_capacity(runs, n, &several);
	char b[32];
	if (c)
		snprintf(buf, len, " at %s", size_fmt(c, b, sizeof b));
	else
		snprintf(buf, len, "%s", "");
	return buf;
}

/* One trace only: say which ones the selection holds and how to narrow. */
int need_one_trace(const struct plot_run *runs, int n, const char *what, char *err,
		   size_t errlen)
{
	for (int i = 1; i < n; i++) {
		if (runs[i].trace_crc32 != runs[0].trace_crc32) {
			snprintf(err, errlen, "%s shows one trace; the selection holds several ('%s', "
				 "'%s', ...): narrow it, e.g. --where \"trace_path='%s'\"", what,
				 runs[0].trace_path, runs[i].trace_path, runs[0].trace_path);
			return -1;
		}
	}
	return 0;
}

/* The y range top: the data's top or, when a series is far above the
 * rest (over OFF_SCALE_FACTOR x the live figure), the top of the others. */
double y_top(double data_top, double live_top, double vis_top, int *clipped)
{
	*clipped = live_top > 0 && data_top > OFF_SCALE_FACTOR * live_top;
	if (!*clipped)
		return data_top * 1.1;
	return (vis_top > live_top ? vis_top : live_top) * 1.1;
}

/* VALUE if it stays on scale, for the visible top. */
double on_scale(double value, double live_top)
{
	return value > OFF_SCALE_FACTOR * live_top ? 0.0 : value;
}

/* Capacity lines worth drawing (see the file comment); returns the new top. */
double capacity_lines(FILE *gp, const struct plot_run *runs, int n, double top,
		      int *ncaps)
{
	uint64_t seen[4] = {0};
	int ns = 0;
	double shown_top = top / 1.1;
	*ncaps = 0;
	for (int i = 0; i < n; i++) {
		uint64_t c = runs[i].capacity;
		int dup = 0;
		for (int k = 0; k < ns; k++)
			dup |= seen[k] == c;
		if (!c || dup || ns == 4 || gib(c) >= 2.0 * shown_top)
			continue;
		seen[ns++] = c;
		char b[32];
		fprintf(gp, "cap%d = %.6f\n", ns, gib(c));
		fprintf(gp, "cap%d_title = \"device capacity %s\"\n", ns, size_fmt(c, b, sizeof b));
		if (gib(c) * 1.08 > top)
			top = gib(c) * 1.08;
	}
	*ncaps = ns;
	return top;
}

void plot_capacity_terms(FILE *gp, int ncaps)
{
	for (int k = 1; k <= ncaps; k++)
		fprintf(gp, ", cap%d with lines lc rgb '#c00000' lw 2.5 dt 3 title cap%d_title", k, k);
}
