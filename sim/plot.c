/*
 * plot.c: the figures of `gpumemsim plot` and `gpumemsim report` (see
 * plot.h). Each figure is a gnuplot script and plain data files; gnuplot
 * runs as an external program, and is the only program the plots code runs.
 *
 * Decisions every figure shares:
 * - sizes in GiB, times in ms (s when the run is longer than 10 s);
 * - the device capacity line is drawn only when the capacity is below twice
 *   the highest value shown: a 141 GiB line over a 3 GiB run would squash
 *   the curves into the bottom pixels and say nothing;
 * - a run far above the others (a preallocating allocator such as TF's BFC
 *   reserving the whole device) would do the same: the y axis stops at 4x
 *   the largest live (allocated / floor) figure and such runs are named in
 *   the key with their value and "off scale";
 * - the floor is the `optimal` policy's peak reserved when the selection
 *   has an optimal run of that trace, else the peak of live requested bytes.
 * Data files are written with fixed formats from rows in a fixed order, so
 * the same database gives byte-identical scripts and data.
 */
#include "plot.h"

#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/size.h"
#include "../base/vec.h"

extern char **environ;

#define GIB (1024.0 * 1024.0 * 1024.0)
#define PLOT_MAX_FILES 16
#define PLOT_MAX_TIMELINE_RUNS 12
#define PLOT_MAX_FRAG_TRACES 8
#define OFF_SCALE_FACTOR 4.0

static const char *const kind_names[PLOT_KIND_COUNT] = {"timeline", "batch", "frag", "compare",
							 "pareto", "live"};

/* Twelve colours that stay apart on white (tab10 plus two). */
static const char *const palette[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
	"#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939",
};
#define NPALETTE (sizeof palette / sizeof palette[0])

int plot_kind_from_name(const char *name)
{
	for (int k = 0; k < PLOT_KIND_COUNT; k++)
		if (name && !strcmp(name, kind_names[k]))
			return k;
	return -1;
}

const char *plot_kind_name(enum plot_kind k)
{
	return (unsigned)k < PLOT_KIND_COUNT ? kind_names[k] : "?";
}

int plot_format_from_path(const char *path)
{
	size_t n = path ? strlen(path) : 0;
	if (n > 4 && !strcasecmp(path + n - 4, ".png"))
		return PLOT_FMT_PNG;
	if (n > 4 && !strcasecmp(path + n - 4, ".svg"))
		return PLOT_FMT_SVG;
	return -1;
}

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

/* The condition is pasted into our SELECT, so it must stay one expression:
 * outside quotes no ';' (a second statement), no comment (hiding the rest of
 * ours), and parentheses that balance (no closing ours). */
int plot_check_where(const char *where, char *err, size_t errlen)
{
	int depth = 0;
	char quote = 0;
	if (!where || !*where) {
		snprintf(err, errlen, "--where: empty condition");
		return -1;
	}
	for (const char *p = where; *p; p++) {
		if (quote) {
			if (*p == quote) {
				if (p[1] == quote)
					p++;
				else
					quote = 0;
			}
			continue;
		}
		if (*p == '\'' || *p == '"' || *p == '`') {
			quote = *p;
		} else if (*p == '[') {
			quote = ']';
		} else if (*p == ';') {
			snprintf(err, errlen, "--where '%s': one SQL condition only (no ';')", where);
			return -1;
		} else if ((p[0] == '-' && p[1] == '-') || (p[0] == '/' && p[1] == '*')) {
			snprintf(err, errlen, "--where '%s': comments are not allowed", where);
			return -1;
		} else if (*p == '(') {
			depth++;
		} else if (*p == ')' && --depth < 0) {
			snprintf(err, errlen, "--where '%s': unbalanced ')'", where);
			return -1;
		}
	}
	if (quote || depth) {
		snprintf(err, errlen, "--where '%s': unterminated %s", where,
			 quote ? "quote" : "'('");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ loading */

enum { R_ID, R_PATH, R_CRC, R_POLICY, R_CONF, R_CAP, R_RES, R_ALLOC, R_REQ, R_DALLOC,
       R_DFREE, R_FRAG, R_OOM, R_NOOM, R_OOM_T, R_OOM_BYTES, R_OOM_LINE, R_OOM_ALLOC,
       R_OOM_RES, R_OOM_LFREE, R_OOM_CFREE, R_TDUR, R_SDUR, R_MODEL, R_BATCH, R_COMPLETE,
       R_TOOLV, R_LABELS, R_OOM_LIMIT, R_OOM_VERDICT, R_STEP, R_TIMED, R_N };

struct load_ctx {
	struct plot_run *runs;
	int n, failed;
	size_t cap;
};

static uint64_t u64_of(const char *s) { return s ? strtoull(s, NULL, 10) : 0; }
static int64_t i64_of(const char *s, int64_t dflt) { return s ? strtoll(s, NULL, 10) : dflt; }

static char *dup_or_empty(const char *s, int *failed)
{
	char *d = strdup(s ? s : "");
	if (!d)
		*failed = 1;
	return d;
}

static int load_row(void *vctx, int ncols, const char *const *c)
{
	struct load_ctx *l = vctx;
	if (ncols < R_N)
		return l->failed = 1;
	if (VEC_RESERVE(l->runs, l->cap, (size_t)l->n + 1, 32) < 0)
		return l->failed = 1;
	struct plot_run *r = &l->runs[l->n++];
	memset(r, 0, sizeof *r);
	r->id = i64_of(c[R_ID], 0);
	r->trace_path = dup_or_empty(c[R_PATH], &l->failed);
	r->policy = dup_or_empty(c[R_POLICY], &l->failed);
	r->conf = dup_or_empty(c[R_CONF], &l->failed);
	r->model = dup_or_empty(c[R_MODEL], &l->failed);
	r->batch = dup_or_empty(c[R_BATCH], &l->failed);
	r->tool_version = dup_or_empty(c[R_TOOLV], &l->failed);
	r->labels_json = dup_or_empty(c[R_LABELS], &l->failed);
	r->trace_crc32 = (uint32_t)u64_of(c[R_CRC]);
	r->capacity = u64_of(c[R_CAP]);
	r->peak_reserved = u64_of(c[R_RES]);
	r->peak_allocated = u64_of(c[R_ALLOC]);
	r->peak_requested = u64_of(c[R_REQ]);
	r->device_allocs = u64_of(c[R_DALLOC]);
	r->device_frees = u64_of(c[R_DFREE]);
	r->fragmentation = c[R_FRAG] ? strtod(c[R_FRAG], NULL) : 0.0;
	r->oom = u64_of(c[R_OOM]) != 0;
	r->num_ooms = u64_of(c[R_NOOM]);
	r->has_oom_detail = r->oom && c[R_OOM_T];
	r->oom_t_ns = u64_of(c[R_OOM_T]);
	r->oom_bytes = u64_of(c[R_OOM_BYTES]);
	r->oom_line = u64_of(c[R_OOM_LINE]);
	r->oom_allocated = u64_of(c[R_OOM_ALLOC]);
	r->oom_reserved = u64_of(c[R_OOM_RES]);
	r->oom_largest_free = i64_of(c[R_OOM_LFREE], -1);
	r->oom_cached_free = i64_of(c[R_OOM_CFREE], -1);
	r->trace_duration_ns = u64_of(c[R_TDUR]);
	r->sim_duration_ns = u64_of(c[R_SDUR]);
	r->complete = u64_of(c[R_COMPLETE]) != 0;
	r->oom_limit = u64_of(c[R_OOM_LIMIT]);
	r->oom_verdict = dup_or_empty(c[R_OOM_VERDICT], &l->failed);
	r->step_time_ns = u64_of(c[R_STEP]);
	r->timed = u64_of(c[R_TIMED]) != 0;
	return l->failed;
}

void plot_runs_free(struct plot_run *runs, int n)
{
	for (int i = 0; runs && i < n; i++) {
		free(runs[i].trace_path);
		free(runs[i].policy);
		free(runs[i].conf);
		free(runs[i].model);
		free(runs[i].batch);
		free(runs[i].tool_version);
		free(runs[i].labels_json);
		free(runs[i].oom_verdict);
	}
	free(runs);
}

/* The latest run of each trace/policy/conf/capacity among the selected, so a
 * re-run replaces its older copy in figures as it does in `table`. */
int plot_load_runs(struct store *s, const struct plot_select *sel, struct plot_run **runs,
		   char *err, size_t errlen)
{
	static const char head[] =
		"WITH sel AS (SELECT * FROM runs WHERE (%s) AND (%s)),"
		" latest AS (SELECT * FROM sel r WHERE r.id=(SELECT x.id FROM sel x"
		"  WHERE x.trace_crc32=r.trace_crc32 AND x.policy=r.policy AND x.conf=r.conf"
		"  AND x.capacity=r.capacity ORDER BY x.timed DESC, x.id DESC LIMIT 1))"
		" SELECT r.id, r.trace_path, r.trace_crc32, r.policy, r.conf, r.capacity,"
		" r.peak_reserved, r.peak_allocated, r.peak_requested, r.device_allocs,"
		" r.device_frees, r.fragmentation, r.oom, r.num_ooms, r.oom_t_ns, r.oom_bytes,"
		" r.oom_line, r.oom_allocated, r.oom_reserved, r.oom_largest_free,"
		" r.oom_cached_free, r.trace_duration_ns, r.sim_duration_ns,"
		" coalesce((SELECT value FROM run_labels WHERE run_id=r.id AND key='model'),'') AS model_l,"
		" coalesce((SELECT value FROM run_labels WHERE run_id=r.id AND key='batch'),'') AS batch_l,"
		" r.complete, r.tool_version, r.labels_json, r.oom_limit, r.oom_verdict,"
		" r.step_time_ns, r.timed"
		" FROM latest r ORDER BY model_l, CAST(batch_l AS INTEGER), batch_l, r.trace_path,"
		" r.trace_crc32, r.policy='optimal', r.policy, r.conf<>'', r.conf, r.capacity, r.id";
	struct load_ctx l = {0};
	const char *params[2] = {sel ? sel->label_key : NULL, sel ? sel->label_value : NULL};
	int nparams = 0;
	char *sql = NULL;
	*runs = NULL;
	if (sel && sel->where && plot_check_where(sel->where, err, errlen) < 0)
		return -1;
	const char *label_cond = "1";
	if (sel && sel->label_key) {
		label_cond = "id IN (SELECT run_id FROM run_labels WHERE key=?1 AND value=?2)";
		nparams = 2;
	}
	if (asprintf(&sql, head, sel && sel->where ? sel->where : "1", label_cond) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int n = store_query(s, sql, params, nparams, load_row, &l, err, errlen);
	free(sql);
	if (n >= 0 && l.failed) {
		snprintf(err, errlen, "out of memory reading the runs");
		n = -1;
	}
	if (n < 0) {
		plot_runs_free(l.runs, l.n);
		return -1;
	}
	*runs = l.runs;
	return l.n;
}

const char *plot_run_setting(const struct plot_run *r, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s", r->policy, *r->conf ? r->conf : "(default)");
	return buf;
}

/* "resnet18 batch 64" from the labels, else the trace's file name. */
static const char *trace_title(const struct plot_run *r, char *buf, size_t len)
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

struct fig {
	char dir[4096];
	int tmp_dir;
	char files[PLOT_MAX_FILES][32];
	int nfiles;
	enum plot_format fmt;
	char out_tmp[4200];
	FILE *gp;
};

static FILE *fig_file(struct fig *f, const char *name, char *err, size_t errlen)
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

static int fig_close_file(FILE *fp, const char *name, char *err, size_t errlen)
{
	int bad = ferror(fp);
	if (fclose(fp) != 0 || bad) {
		snprintf(err, errlen, "writing %s failed", name);
		return -1;
	}
	return 0;
}

/* A gnuplot double-quoted string: backslash and quote escaped. */
static void gp_str(FILE *f, const char *s)
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
static void gp_data(FILE *gp, const struct fig *f, const char *name)
{
	(void)f;
	gp_str(gp, name);
}

static int fig_begin(struct fig *f, const struct plot_request *req, char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	int fmt = plot_format_from_path(req->out);
	if (fmt < 0) {
		snprintf(err, errlen, "-o %s: the figure's name must end in .png or .svg", req->out);
		return -1;
	}
	f->fmt = fmt;
	if (req->data_dir) {
		if (mkdir(req->data_dir, 0777) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "--data-dir %s: %s", req->data_dir, strerror(errno));
			return -1;
		}
		if (!realpath(req->data_dir, f->dir)) {
			snprintf(err, errlen, "--data-dir %s: %s", req->data_dir, strerror(errno));
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
static int fig_end(struct fig *f, const struct plot_request *req, int ok, char *err,
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
	if (f->tmp_dir) {
		char path[4200];
		for (int i = 0; i < f->nfiles; i++) {
			snprintf(path, sizeof path, "%s/%s", f->dir, f->files[i]);
			unlink(path);
		}
		rmdir(f->dir);
	}
	return ret;
}

/* ------------------------------------------------------------ helpers */

static double gib(uint64_t b) { return (double)b / GIB; }

/* IN broken into lines of about WIDTH characters after commas or spaces
 * (a long conf string stays readable beside a bar). */
static void wrap_label(const char *in, char *out, size_t len, size_t width)
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

/* The floor for trace CRC: the optimal run's peak reserved, else the peak of
 * live requested bytes. */
static uint64_t trace_floor(const struct plot_run *runs, int n, uint32_t crc, int *from_optimal)
{
	uint64_t req = 0;
	for (int i = 0; i < n; i++) {
		if (runs[i].trace_crc32 != crc)
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

/* One trace only: say which ones the selection holds and how to narrow. */
static int need_one_trace(const struct plot_run *runs, int n, const char *what, char *err,
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
static double y_top(double data_top, double live_top, double vis_top, int *clipped)
{
	*clipped = live_top > 0 && data_top > OFF_SCALE_FACTOR * live_top;
	if (!*clipped)
		return data_top * 1.1;
	return (vis_top > live_top ? vis_top : live_top) * 1.1;
}

/* VALUE if it stays on scale, for the visible top. */
static double on_scale(double value, double live_top)
{
	return value > OFF_SCALE_FACTOR * live_top ? 0.0 : value;
}

/* Capacity lines worth drawing (see the file comment); returns the new top. */
static double capacity_lines(FILE *gp, const struct plot_run *runs, int n, double top,
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

static void plot_capacity_terms(FILE *gp, int ncaps)
{
	for (int k = 1; k <= ncaps; k++)
		fprintf(gp, ", cap%d with lines lc rgb '#c00000' lw 2.5 dt 3 title cap%d_title", k, k);
}

/* ------------------------------------------------------------ timeline */

/* NVTX phases shaded behind the curves: forward, backward, optimizer, and
 * any other top-level range (build, ...); "step" ranges only mark their
 * start with a thin line. */
enum { PH_FWD, PH_BWD, PH_OPT, PH_OTHER, PH_STEP, PH_N };
static const char *const phase_file[PH_N] = {"phase-forward.dat", "phase-backward.dat",
	"phase-optimizer.dat", "phase-other.dat", "phase-steps.dat"};
static const char *const phase_title[PH_N] = {"forward", "backward", "optimizer",
	"other ranges", "step start"};
static const char *const phase_colour[PH_N] = {"#4daf4a", "#e41a1c", "#984ea3", "#999999",
	"#777777"};

struct ph_ctx {
	FILE *f[PH_N];
	int rows[PH_N];
	double tdiv;
};

static int ph_row(void *vctx, int ncols, const char *const *c)
{
	struct ph_ctx *p = vctx;
	if (ncols < 4 || !c[0])
		return 1;
	const char *n = c[0];
	int k;
	if (!strncmp(n, "step", 4) && (n[4] == '\0' || n[4] == ' ' || n[4] == '_'))
		k = PH_STEP;
	else if (strcasestr(n, "backward"))
		k = PH_BWD;
	else if (strcasestr(n, "forward"))
		k = PH_FWD;
	else if (strcasestr(n, "optim"))
		k = PH_OPT;
	else
		k = PH_OTHER;
	fprintf(p->f[k], "%.6f %.6f\n", (double)u64_of(c[2]) / p->tdiv,
		(double)u64_of(c[3]) / p->tdiv);
	p->rows[k]++;
	return 0;
}

/* Write the phase files of run ID; *NPH: how many kinds have rows. */
static int timeline_phases(struct store *s, struct fig *f, int64_t id, double tdiv,
			   struct ph_ctx *p, char *err, size_t errlen)
{
	char idb[24];
	int ret = 0;
	memset(p, 0, sizeof *p);
	p->tdiv = tdiv;
	snprintf(idb, sizeof idb, "%" PRId64, id);
	const char *params[1] = {idb};
	for (int k = 0; k < PH_N; k++) {
		p->f[k] = fig_file(f, phase_file[k], err, errlen);
		if (!p->f[k])
			ret = -1;
		else
			fprintf(p->f[k], "# start end (%s): NVTX %s ranges of run %s\n",
				tdiv == 1e9 ? "s" : "ms", phase_title[k], idb);
	}
	if (!ret && store_query(s, "SELECT name, depth, t_ns, end_ns FROM ranges WHERE run_id=?1"
				" AND depth<=1 ORDER BY t_ns, depth, name", params, 1, ph_row, p, err,
				errlen) < 0)
		ret = -1;
	for (int k = 0; k < PH_N; k++) {
		if (!p->f[k])
			continue;
		if (!p->rows[k])
			fputs("? ?\n", p->f[k]);
		if (fig_close_file(p->f[k], phase_file[k], err, errlen) < 0)
			ret = -1;
		p->f[k] = NULL;
	}
	return ret;
}

struct tl_ctx {
	FILE *f;
	double tdiv;
	double last_a, last_r;
	int rows;
};

static int tl_row(void *vctx, int ncols, const char *const *c)
{
	struct tl_ctx *t = vctx;
	if (ncols < 3)
		return 1;
	t->last_a = gib(u64_of(c[1]));
	t->last_r = gib(u64_of(c[2]));
	fprintf(t->f, "%.6f %.6f %.6f\n", (double)u64_of(c[0]) / t->tdiv, t->last_a, t->last_r);
	t->rows++;
	return 0;
}

static int fig_timeline(struct store *s, struct fig *f, const struct plot_run *runs, int n,
			char *err, size_t errlen)
{
	char b1[64], b2[96], b3[32];
	if (need_one_trace(runs, n, "the timeline", err, errlen) < 0)
		return -1;
	if (n > PLOT_MAX_TIMELINE_RUNS) {
		snprintf(err, errlen, "the timeline draws at most %d runs and the selection holds "
			 "%d: narrow it with --where (e.g. \"policy IN ('pytorch','cuda_async')\")",
			 PLOT_MAX_TIMELINE_RUNS, n);
		return -1;
	}
	uint64_t tmax = 0, amax = 0, rmax = 0;
	double vis = 0;
	for (int i = 0; i < n; i++)
		amax = runs[i].peak_allocated > amax ? runs[i].peak_allocated : amax;
	for (int i = 0; i < n; i++) {
		double v = on_scale(gib(runs[i].peak_reserved), gib(amax));
		vis = v > vis ? v : vis;
		/* the timeline is in simulated time: a timed replay may end
		 * well before the trace did */
		uint64_t d = runs[i].sim_duration_ns;
		tmax = d > tmax ? d : tmax;
		amax = runs[i].peak_allocated > amax ? runs[i].peak_allocated : amax;
		rmax = runs[i].peak_reserved > rmax ? runs[i].peak_reserved : rmax;
	}
	int in_s = tmax >= 10000000000ull;
	double tdiv = in_s ? 1e9 : 1e6;
	FILE *d = fig_file(f, "timeline.dat", err, errlen);
	if (!d)
		return -1;
	fputs("# time(ms or s) allocated_GiB reserved_GiB; one block per run\n", d);
	for (int i = 0; i < n; i++) {
		char id[24];
		snprintf(id, sizeof id, "%" PRId64, runs[i].id);
		const char *params[1] = {id};
		struct tl_ctx t = {.f = d, .tdiv = tdiv};
		if (i)
			fputs("\n\n", d);
		fprintf(d, "# run %s: %s\n", id, plot_run_setting(&runs[i], b2, sizeof b2));
		if (store_query(s, "SELECT t_ns, allocated, reserved FROM timeline WHERE run_id=?1"
				" ORDER BY t_ns", params, 1, tl_row, &t, err, errlen) < 0) {
			fclose(d);
			return -1;
		}
		/* Steps hold the last level to the end of the run. */
		uint64_t end = runs[i].sim_duration_ns;
		fprintf(d, "%.6f %.6f %.6f\n", (double)end / tdiv, t.last_a, t.last_r);
	}
	if (fig_close_file(d, "timeline.dat", err, errlen) < 0)
		return -1;
	int noom = 0;
	d = fig_file(f, "oom.dat", err, errlen);
	if (!d)
		return -1;
	fputs("# time allocated_GiB: each run's first simulated OOM\n", d);
	for (int i = 0; i < n; i++)
		if (runs[i].has_oom_detail && ++noom)
			fprintf(d, "%.6f %.6f\n", (double)runs[i].oom_t_ns / tdiv,
				gib(runs[i].oom_allocated));
	if (!noom)
		fputs("? ?\n", d);
	if (fig_close_file(d, "oom.dat", err, errlen) < 0)
		return -1;
	struct ph_ctx ph;
	if (timeline_phases(s, f, runs[0].id, tdiv, &ph, err, errlen) < 0)
		return -1;
	int nph = 0;
	for (int k = 0; k < PH_N; k++)
		nph += ph.rows[k] > 0;

	FILE *gp = f->gp;
	int clipped, ncaps;
	double top = y_top(gib(rmax), gib(amax), vis, &clipped);
	top = capacity_lines(gp, runs, n, top, &ncaps);
	fputs("set title ", gp);
	snprintf(b1, sizeof b1, "%s", trace_title(&runs[0], b2, sizeof b2));
	char title[512];
	if (nph)
		snprintf(title, sizeof title, "Device memory over time, %s, per allocator setting\n"
			 "solid: reserved   dashed: allocated   shaded: NVTX phases of run %" PRId64
			 " (%s)", b1, runs[0].id, plot_run_setting(&runs[0], b2, sizeof b2));
	else
		snprintf(title, sizeof title, "Device memory over time, %s, per allocator setting\n"
			 "solid: reserved by the allocator   dashed: allocated to live blocks", b1);
	gp_str(gp, title);
	fprintf(gp, "\nset xlabel 'simulated time (%s)'\nset ylabel 'memory (GiB)'\n",
		in_s ? "s" : "ms");
	fprintf(gp, "set xrange [0:%.6f]\nset yrange [0:%.6f]\n", (double)tmax / tdiv * 1.02, top);
	fputs("set key outside right top vertical Left reverse font ',11' samplen 2.5\n", gp);
	fputs("plot ", gp);
	for (int k = 0; k < PH_N; k++) {
		if (!ph.rows[k])
			continue;
		gp_data(gp, f, phase_file[k]);
		if (k == PH_STEP)
			fprintf(gp, " using 1:(%.6f) with impulses lc rgb '%s' lw 1 dt 3 title '%s', \\\n  ",
				top, phase_colour[k], phase_title[k]);
		else
			fprintf(gp, " using (($1+$2)/2):(%.6f):(($2-$1)/2):(%.6f) with boxxyerror "
				"fs transparent solid 0.13 noborder lc rgb '%s' title '%s', \\\n  ",
				top / 2, top / 2, phase_colour[k], phase_title[k]);
	}
	for (int i = 0; i < n; i++) {
		char t2[192];
		plot_run_setting(&runs[i], b2, sizeof b2);
		if (runs[i].peak_reserved && gib(runs[i].peak_reserved) > top)
			snprintf(t2, sizeof t2, "%s (%s, off scale)", b2,
				 size_fmt(runs[i].peak_reserved, b3, sizeof b3));
		else
			snprintf(t2, sizeof t2, "%s", b2);
		if (i)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "timeline.dat");
		fprintf(gp, " index %d using 1:3 with steps lt %d lw 2.5 title ", i, i + 1);
		gp_str(gp, t2);
		fputs(", ", gp);
		gp_data(gp, f, "timeline.dat");
		fprintf(gp, " index %d using 1:2 with steps lt %d lw 1.5 dt 2 notitle", i, i + 1);
	}
	if (noom) {
		fputs(", \\\n  ", gp);
		gp_data(gp, f, "oom.dat");
		fputs(" using 1:2 with points pt 2 ps 2.5 lw 3 lc rgb '#c00000' title 'first OOM'", gp);
	}
	plot_capacity_terms(gp, ncaps);
	fputc('\n', gp);
	return 0;
}

/* ------------------------------------------------------------ batch */

struct bpoint { long batch; const struct plot_run *r; };

static int cmp_bpoint(const void *a, const void *b)
{
	const struct bpoint *x = a, *y = b;
	if (x->batch != y->batch)
		return x->batch < y->batch ? -1 : 1;
	return x->r->id < y->r->id ? -1 : x->r->id > y->r->id;
}

static int parse_batch(const char *s, long *out)
{
	char *end;
	if (!s || !*s)
		return -1;
	long v = strtol(s, &end, 10);
	if (*end || v <= 0)
		return -1;
	*out = v;
	return 0;
}

static int fig_batch(struct fig *f, const struct plot_run *runs, int n, char *err, size_t errlen)
{
	struct bpoint *pts = calloc((size_t)n, sizeof *pts);
	const char **series = calloc((size_t)n, sizeof *series);
	char (*names)[128] = calloc((size_t)n, sizeof *names);
	int np = 0, ns = 0, ret = -1;
	long batches[64];
	int nb = 0;
	const char *model = NULL;
	FILE *d = NULL;
	if (!pts || !series || !names) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		long b;
		if (parse_batch(runs[i].batch, &b) < 0)
			continue;
		if (model && strcmp(model, runs[i].model)) {
			snprintf(err, errlen, "peak against batch size compares one model; the "
				 "selection holds '%s' and '%s': narrow it, e.g. --label model=%s",
				 model, runs[i].model, model);
			goto out;
		}
		model = runs[i].model;
		pts[np].batch = b;
		pts[np++].r = &runs[i];
		int seen = 0;
		for (int k = 0; k < nb; k++)
			seen |= batches[k] == b;
		if (!seen && nb < 64)
			batches[nb++] = b;
	}
	if (!np) {
		snprintf(err, errlen, "no selected run has a numeric 'batch' label (the trace's "
			 "`L batch=N` line): nothing to plot against batch size");
		goto out;
	}
	qsort(pts, (size_t)np, sizeof *pts, cmp_bpoint);
	/* few distinct batches: insertion sort */
	for (int i = 1; i < nb; i++)
		for (int k = i; k > 0 && batches[k - 1] > batches[k]; k--) {
			long t = batches[k];
			batches[k] = batches[k - 1];
			batches[k - 1] = t;
		}
	/* Series: each non-optimal setting, in the runs' order. */
	for (int i = 0; i < n; i++) {
		long b;
		if (parse_batch(runs[i].batch, &b) < 0 || !strcmp(runs[i].policy, "optimal"))
			continue;
		plot_run_setting(&runs[i], names[ns], sizeof names[0]);
		int seen = 0;
		for (int k = 0; k < ns && !seen; k++)
			seen = !strcmp(names[k], names[ns]);
		if (!seen)
			series[ns] = names[ns], ns++;
	}
	double live_top = 0, data_top = 0;
	d = fig_file(f, "batch.dat", err, errlen);
	if (!d)
		goto out;
	FILE *marks = fig_file(f, "nonmonotonic.dat", err, errlen);
	if (!marks)
		goto out;
	FILE *ooms = fig_file(f, "oom.dat", err, errlen);
	if (!ooms) {
		fclose(marks);
		goto out;
	}
	int nmarks = 0, nooms = 0;
	double series_max[PLOT_MAX_FILES * 8] = {0};
	fputs("# batch peak_reserved_GiB peak_allocated_GiB oom; one block per setting\n", d);
	fputs("# batch peak_reserved_GiB: the peak fell while the batch grew\n", marks);
	fputs("# batch peak_reserved_GiB: a simulated OOM at this batch\n", ooms);
	for (int k = 0; k < ns; k++) {
		double prev = -1;
		char b2[128];
		if (k)
			fputs("\n\n", d);
		fprintf(d, "# %s\n", series[k]);
		for (int i = 0; i < np; i++) {
			plot_run_setting(pts[i].r, b2, sizeof b2);
			if (strcmp(b2, series[k]))
				continue;
			/* several runs at one batch (capacities): the latest counts */
			int later = 0;
			for (int j = i + 1; j < np && pts[j].batch == pts[i].batch && !later; j++) {
				char b3[128];
				later = !strcmp(plot_run_setting(pts[j].r, b3, sizeof b3), b2);
			}
			if (later)
				continue;
			double v = gib(pts[i].r->peak_reserved);
			fprintf(d, "%ld %.6f %.6f %d\n", pts[i].batch, v,
				gib(pts[i].r->peak_allocated), pts[i].r->oom);
			if (prev >= 0 && v < prev - 1e-9 && ++nmarks)
				fprintf(marks, "%ld %.6f\n", pts[i].batch, v);
			if (pts[i].r->oom && ++nooms)
				fprintf(ooms, "%ld %.6f\n", pts[i].batch, v);
			prev = v;
			if (k < (int)(sizeof series_max / sizeof series_max[0]) && v > series_max[k])
				series_max[k] = v;
			if (v > data_top)
				data_top = v;
			if (gib(pts[i].r->peak_allocated) > live_top)
				live_top = gib(pts[i].r->peak_allocated);
		}
	}
	if (!nmarks)
		fputs("? ?\n", marks);
	if (!nooms)
		fputs("? ?\n", ooms);
	int bad = fig_close_file(marks, "nonmonotonic.dat", err, errlen) < 0;
	bad |= fig_close_file(ooms, "oom.dat", err, errlen) < 0;
	if (bad)
		goto out;
	FILE *fl = fig_file(f, "floor.dat", err, errlen);
	if (!fl)
		goto out;
	int from_opt_all = 1, any_floor = 0;
	fputs("# batch floor_GiB (optimal policy's peak, else peak of live requests)\n", fl);
	for (int i = 0; i < np; i++) {
		if (i + 1 < np && pts[i + 1].batch == pts[i].batch)
			continue;
		int from_opt;
		double v = gib(trace_floor(runs, n, pts[i].r->trace_crc32, &from_opt));
		from_opt_all &= from_opt;
		any_floor = 1;
		fprintf(fl, "%ld %.6f\n", pts[i].batch, v);
		if (v > live_top)
			live_top = v;
		if (v > data_top)
			data_top = v;
	}
	if (fig_close_file(fl, "floor.dat", err, errlen) < 0)
		goto out;

	FILE *gp = f->gp;
	int clipped, ncaps;
	double vis = 0;
	for (int k = 0; k < ns && k < (int)(sizeof series_max / sizeof series_max[0]); k++) {
		double v = on_scale(series_max[k], live_top);
		vis = v > vis ? v : vis;
	}
	double top = y_top(data_top, live_top, vis, &clipped);
	top = capacity_lines(gp, runs, n, top, &ncaps);
	char title[512];
	snprintf(title, sizeof title, "Peak reserved memory against batch size, %s, per allocator "
		 "setting\ncircled: the peak fell while the batch grew (non-monotonic)",
		 *model ? model : "(no model label)");
	fputs("set title ", gp);
	gp_str(gp, title);
	fputs("\nset xlabel 'batch size'\nset ylabel 'peak reserved (GiB)'\n", gp);
	fprintf(gp, "set yrange [0:%.6f]\nset offsets graph 0.04, graph 0.04, 0, 0\n", top);
	/* batch sweeps are geometric (8, 16, ... 256): a log axis keeps the
	 * small batches apart instead of piling their labels up at the left */
	if (nb >= 3 && batches[0] > 0 && batches[nb - 1] >= 8 * batches[0])
		fputs("set logscale x 2\n", gp);
	fputs("set xtics (", gp);
	for (int i = 0; i < nb; i++)
		fprintf(gp, "%s%ld", i ? ", " : "", batches[i]);
	fputs(")\nset key outside right top vertical Left reverse font ',11' samplen 2.5\nplot ", gp);
	for (int k = 0; k < ns; k++) {
		char t2[192], b3[32];
		if (k < (int)(sizeof series_max / sizeof series_max[0]) && series_max[k] > top)
			snprintf(t2, sizeof t2, "%s (%s, off scale)", series[k],
				 size_fmt((uint64_t)(series_max[k] * GIB), b3, sizeof b3));
		else
			snprintf(t2, sizeof t2, "%s", series[k]);
		if (k)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "batch.dat");
		fprintf(gp, " index %d using 1:2 with linespoints lt %d title ", k, k + 1);
		gp_str(gp, t2);
	}
	if (any_floor) {
		fputs(ns ? ", \\\n  " : "", gp);
		gp_data(gp, f, "floor.dat");
		fprintf(gp, " using 1:2 with linespoints lc rgb '#000000' lw 2 dt 2 pt 5 title '%s'",
			from_opt_all ? "floor (optimal policy)" : "floor (peak of live requests)");
	}
	if (nmarks) {
		fputs(", \\\n  ", gp);
		gp_data(gp, f, "nonmonotonic.dat");
		fputs(" using 1:2 with points pt 6 ps 4 lw 3 lc rgb '#c00000' title 'non-monotonic'", gp);
	}
	if (nooms) {
		fputs(", \\\n  ", gp);
		gp_data(gp, f, "oom.dat");
		fputs(" using 1:2 with points pt 2 ps 3 lw 3 lc rgb '#c00000' title 'simulated OOM'", gp);
	}
	plot_capacity_terms(gp, ncaps);
	fputc('\n', gp);
	ret = 0;
out:
	if (d && fig_close_file(d, "batch.dat", err, errlen) < 0)
		ret = -1;
	free(pts);
	free(series);
	free(names);
	return ret;
}

/* ------------------------------------------------------------ fragmentation */

static int fig_frag(struct fig *f, const struct plot_run *runs, int n, char *err, size_t errlen)
{
	const struct plot_run *traces[PLOT_MAX_FRAG_TRACES];
	int nt = 0;
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int k = 0; k < nt; k++)
			seen |= traces[k]->trace_crc32 == runs[i].trace_crc32;
		if (seen)
			continue;
		if (nt == PLOT_MAX_FRAG_TRACES) {
			snprintf(err, errlen, "the fragmentation figure groups at most %d traces; "
				 "narrow the selection with --where or --label", PLOT_MAX_FRAG_TRACES);
			return -1;
		}
		traces[nt++] = &runs[i];
	}
	/* Settings in the runs' order (optimal last, as a reference). */
	char (*names)[128] = calloc((size_t)n, sizeof *names);
	int ns = 0;
	if (!names) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		plot_run_setting(&runs[i], names[ns], sizeof names[0]);
		int seen = 0;
		for (int k = 0; k < ns && !seen; k++)
			seen = !strcmp(names[k], names[ns]);
		if (!seen)
			ns++;
	}
	/* optimal to the end: it is the reference, not a contender */
	for (int k = 0; k < ns - 1; k++)
		if (!strncmp(names[k], "optimal ", 8)) {
			char t[128];
			memcpy(t, names[k], sizeof t);
			memmove(names[k], names[k + 1], (size_t)(ns - k - 1) * sizeof names[0]);
			memcpy(names[ns - 1], t, sizeof t);
			break;
		}
	FILE *d = fig_file(f, "frag.dat", err, errlen);
	if (!d) {
		free(names);
		return -1;
	}
	fputs("# setting, then fragmentation (%) per trace: 1 - peak allocated / peak reserved\n", d);
	for (int k = 0; k < ns; k++) {
		fputc('"', d);
		for (const char *p = names[k]; *p; p++)
			fputc(*p == '"' ? '\'' : *p, d);
		fputc('"', d);
		for (int t = 0; t < nt; t++) {
			const struct plot_run *hit = NULL;
			char b[128];
			for (int i = 0; i < n; i++)
				if (runs[i].trace_crc32 == traces[t]->trace_crc32 &&
				    !strcmp(plot_run_setting(&runs[i], b, sizeof b), names[k]))
					hit = &runs[i]; /* the last capacity wins, as in the order */
			if (hit)
				fprintf(d, " %.4f", 100.0 * hit->fragmentation);
			else
				fputs(" ?", d);
		}
		fputc('\n', d);
	}
	free(names);
	if (fig_close_file(d, "frag.dat", err, errlen) < 0)
		return -1;
	FILE *gp = f->gp;
	fputs("set title \"Fragmentation at the peak per allocator setting: 1 - peak allocated / "
	      "peak reserved\\nshare of the reserved peak not holding live blocks; lower is "
	      "better\"\n", gp);
	fputs("set ylabel 'fragmentation (% of peak reserved)'\nset yrange [0:105]\n"
	      "set style data histograms\nset style histogram clustered gap 1\n"
	      "set style fill solid 0.85 border -1\nset boxwidth 0.9\n"
	      "set xtics rotate by 30 right nomirror\nset bmargin 11\n"
	      "set key inside right top vertical\n", gp);
	fputs("plot ", gp);
	for (int t = 0; t < nt; t++) {
		char b[128];
		if (t)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "frag.dat");
		if (t == 0)
			fprintf(gp, " using %d:xtic(1) lt %d title ", t + 2, t + 1);
		else
			fprintf(gp, " using %d lt %d title ", t + 2, t + 1);
		gp_str(gp, trace_title(traces[t], b, sizeof b));
	}
	fputc('\n', gp);
	return 0;
}

/* ------------------------------------------------------------ comparison */

/* Horizontal bars: settings read as plain text on the y axis at any length. */
static int fig_compare(struct fig *f, const struct plot_run *runs, int n, char *err,
		       size_t errlen)
{
	char b1[128], b2[64], b3[32];
	if (need_one_trace(runs, n, "the policy comparison", err, errlen) < 0)
		return -1;
	int from_opt;
	uint64_t floor_b = trace_floor(runs, n, runs[0].trace_crc32, &from_opt);
	double floor_g = gib(floor_b), data_top = floor_g, live_top = floor_g, vis = floor_g;
	uint64_t dmax = 0, dmin = UINT64_MAX;
	int nb = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(runs[i].policy, "optimal"))
			continue;
		nb++;
		if (gib(runs[i].peak_allocated) > live_top)
			live_top = gib(runs[i].peak_allocated);
	}
	if (!nb) {
		snprintf(err, errlen, "the selection holds only the optimal policy: nothing to compare");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!strcmp(runs[i].policy, "optimal"))
			continue;
		double v = gib(runs[i].peak_reserved);
		data_top = v > data_top ? v : data_top;
		vis = on_scale(v, live_top) > vis ? v : vis;
		dmax = runs[i].device_allocs > dmax ? runs[i].device_allocs : dmax;
		dmin = runs[i].device_allocs < dmin ? runs[i].device_allocs : dmin;
	}
	int clipped;
	double top = y_top(data_top, live_top, vis, &clipped);
	/* the capacity, when it is worth a line (see the file comment) */
	uint64_t cap = runs[0].capacity;
	int show_cap = cap && gib(cap) < 2.0 * top / 1.1;
	if (show_cap && gib(cap) * 1.08 > top)
		top = gib(cap) * 1.08;
	FILE *d = fig_file(f, "compare.dat", err, errlen);
	if (!d)
		return -1;
	fputs("# y setting peak_reserved_GiB bar_end_GiB label_x label device_allocs colour\n", d);
	int k = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(runs[i].policy, "optimal"))
			continue;
		double v = gib(runs[i].peak_reserved);
		int off = v > top;
		plot_run_setting(&runs[i], b1, sizeof b1);
		for (char *p = b1; *p; p++)
			if (*p == '"')
				*p = '\'';
		snprintf(b2, sizeof b2, "%s%s%s", size_fmt(runs[i].peak_reserved, b3, sizeof b3),
			 off ? " (off scale)" : "", runs[i].oom ? " OOM" : "");
		fprintf(d, "%d \"%s\" %.6f %.6f %.6f \"%s\" %" PRIu64 " %d\n", nb - 1 - k++, b1, v,
			off ? top : v, off ? top * 0.45 : v, b2, runs[i].device_allocs,
			runs[i].oom ? 0xe06060 : 0x6baed6);
	}
	if (fig_close_file(d, "compare.dat", err, errlen) < 0)
		return -1;
	FILE *gp = f->gp;
	int logx = dmin > 0 && dmax / dmin >= 50;
	char title[512];
	snprintf(title, sizeof title, "Allocator settings compared, %s\nred: a simulated OOM; "
		 "step time against memory: the pareto figure", trace_title(&runs[0], b1, sizeof b1));
	fputs("set multiplot title ", gp);
	gp_str(gp, title);
	fputs(" font ',14'\n", gp);
	fprintf(gp, "set yrange [-0.6:%d.6]\nset style fill solid 0.9 border rgb '#333333'\n"
		"unset grid\nset grid xtics lc rgb '#d8d8d8'\nset tmargin at screen 0.86\n"
		"set bmargin at screen 0.1\nset ytics nomirror scale 0 font ',11'\nunset key\n", nb - 1);
	/* long settings wrap at their commas instead of running off the left */
	fputs("set ytics (", gp);
	k = 0;
	for (int i = 0; i < n; i++) {
		char w[256];
		if (!strcmp(runs[i].policy, "optimal"))
			continue;
		plot_run_setting(&runs[i], b1, sizeof b1);
		wrap_label(b1, w, sizeof w, 30);
		if (k)
			fputs(", ", gp);
		gp_str(gp, w);
		fprintf(gp, " %d", nb - 1 - k++);
	}
	fputs(")\n", gp);
	fprintf(gp, "set lmargin at screen 0.3\nset rmargin at screen 0.64\n"
		"set xrange [0:%.6f]\nset xlabel 'peak reserved (GiB)'\n", top);
	fprintf(gp, "set title \"peak reserved (dashed: floor, %s %s%s)\"\n",
		from_opt ? "optimal policy" : "peak of live requests",
		size_fmt(floor_b, b3, sizeof b3), show_cap ? ", red: capacity" : "");
	fprintf(gp, "set arrow 1 from %.6f, graph 0 to %.6f, graph 1 nohead lw 2 dt 2 lc rgb '#000000' front\n",
		floor_g, floor_g);
	if (show_cap)
		fprintf(gp, "set arrow 2 from %.6f, graph 0 to %.6f, graph 1 nohead lw 2.5 dt 3 "
			"lc rgb '#c00000' front\n", gib(cap), gib(cap));
	fputs("plot ", gp);
	gp_data(gp, f, "compare.dat");
	fputs(" using 3:1:(0):4:($1-0.35):($1+0.35):8 with boxxyerror lc rgb variable, \\\n  ", gp);
	gp_data(gp, f, "compare.dat");
	fputs(" using 5:1:6 with labels left offset 0.5,0 font ',11'\n", gp);
	fputs("unset arrow\nset lmargin at screen 0.68\nset rmargin at screen 0.96\n"
	      "unset ytics\n", gp);
	fprintf(gp, "set title 'device allocations'\nset xlabel 'cudaMalloc + map calls%s'\n",
		logx ? " (log scale)" : "");
	if (logx)
		fprintf(gp, "set logscale x\nset xrange [0.8:%.1f]\n", (double)dmax * 6);
	else
		fprintf(gp, "set xrange [0:%.1f]\n", (double)dmax * 1.25 + 1);
	fputs("plot ", gp);
	gp_data(gp, f, "compare.dat");
	fprintf(gp, " using 7:1:(%s):7:($1-0.35):($1+0.35):8 with boxxyerror lc rgb variable, \\\n  ",
		logx ? "0.8" : "0");
	gp_data(gp, f, "compare.dat");
	fputs(" using 7:1:(sprintf('%d', $7)) with labels left offset 0.5,0 font ',11'\n", gp);
	fputs("unset multiplot\n", gp);
	return 0;
}

/* ------------------------------------------------------------ pareto */

#define PLOT_MAX_PARETO_TRACES 12

static int cmp_pareto(const void *a, const void *b)
{
	const struct plot_run *x = *(const struct plot_run *const *)a;
	const struct plot_run *y = *(const struct plot_run *const *)b;
	if (x->step_time_ns != y->step_time_ns)
		return x->step_time_ns < y->step_time_ns ? -1 : 1;
	if (x->peak_reserved != y->peak_reserved)
		return x->peak_reserved < y->peak_reserved ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Step time against peak reserved, one colour per trace; the front joins
 * the runs no other run of the trace beats on both time and memory. */
static int fig_pareto(struct fig *f, const struct plot_run *runs, int n, char *err,
		      size_t errlen)
{
	const struct plot_run **pt = malloc((size_t)n * sizeof *pt);
	uint32_t crcs[PLOT_MAX_PARETO_TRACES];
	int ncrc = 0, nt = 0, left_out = 0, ret = -1;
	double ymax = 0, live_top = 0, xmax = 0, vis = 0;
	char b1[128], b2[256], b3[32];
	FILE *d = NULL;
	if (!pt) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!runs[i].timed || !runs[i].step_time_ns || !strcmp(runs[i].policy, "optimal")) {
			left_out += !runs[i].timed || runs[i].step_time_ns == 0;
			continue;
		}
		int k = 0;
		while (k < ncrc && crcs[k] != runs[i].trace_crc32)
			k++;
		if (k == ncrc) {
			if (ncrc == PLOT_MAX_PARETO_TRACES) {
				snprintf(err, errlen, "the Pareto figure draws at most %d traces: narrow "
					 "the selection with --where or --label", PLOT_MAX_PARETO_TRACES);
				goto out;
			}
			crcs[ncrc++] = runs[i].trace_crc32;
		}
		pt[nt++] = &runs[i];
		if (gib(runs[i].peak_allocated) > live_top)
			live_top = gib(runs[i].peak_allocated);
		if (gib(runs[i].peak_reserved) > ymax)
			ymax = gib(runs[i].peak_reserved);
		if (runs[i].step_time_ns / 1e6 > xmax)
			xmax = runs[i].step_time_ns / 1e6;
	}
	if (!nt) {
		snprintf(err, errlen, "no selected run has a predicted step time (%d without): run "
			 "`gpumemsim run TRACE --timing` on a trace with steps (docs/timing.md)",
			 left_out);
		goto out;
	}
	/* only a run far above the median (BFC's whole-device preset) is
	 * clipped: reserved, not live, bytes are what this figure compares */
	{
		double *v = malloc((size_t)nt * sizeof *v);
		if (!v) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		for (int i = 0; i < nt; i++)
			v[i] = gib(pt[i]->peak_reserved);
		for (int i = 1; i < nt; i++)
			for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
				double t = v[j];
				v[j] = v[j - 1];
				v[j - 1] = t;
			}
		if (v[nt / 2] > live_top)
			live_top = v[nt / 2];
		free(v);
	}
	for (int i = 0; i < nt; i++) {
		double v = on_scale(gib(pt[i]->peak_reserved), live_top);
		vis = v > vis ? v : vis;
	}
	int clipped;
	double top = y_top(ymax, live_top, vis, &clipped);
	d = fig_file(f, "pareto.dat", err, errlen);
	if (!d)
		goto out;
	fputs("# per trace two blocks: step_ms reserved_GiB(clipped) on_front label; the front\n", d);
	for (int c = 0; c < ncrc; c++) {
		const struct plot_run *tr[64];
		int m = 0;
		for (int i = 0; i < nt && m < 64; i++)
			if (pt[i]->trace_crc32 == crcs[c])
				tr[m++] = pt[i];
		qsort(tr, (size_t)m, sizeof *tr, cmp_pareto);
		if (c)
			fputs("\n\n", d);
		fprintf(d, "# trace %s\n", trace_title(tr[0], b1, sizeof b1));
		uint64_t best = UINT64_MAX;
		int front[64];
		for (int i = 0; i < m; i++) {
			front[i] = tr[i]->peak_reserved < best;
			if (front[i])
				best = tr[i]->peak_reserved;
			double y = gib(tr[i]->peak_reserved);
			plot_run_setting(tr[i], b1, sizeof b1);
			for (char *p = b1; *p; p++)
				if (*p == '"')
					*p = '\'';
			if (y > top)
				snprintf(b2, sizeof b2, "%s (%s, off scale)", b1,
					 size_fmt(tr[i]->peak_reserved, b3, sizeof b3));
			else
				snprintf(b2, sizeof b2, "%s", b1);
			fprintf(d, "%.6f %.6f %d \"%s\"\n", tr[i]->step_time_ns / 1e6,
				y > top ? top * 0.97 : y, front[i], b2);
		}
		/* the front alone, so its line has no gaps */
		fprintf(d, "\n\n# Pareto front\n");
		for (int i = 0; i < m; i++)
			if (front[i])
				fprintf(d, "%.6f %.6f\n", tr[i]->step_time_ns / 1e6,
					gib(tr[i]->peak_reserved) > top ? top * 0.97
									: gib(tr[i]->peak_reserved));
	}
	if (fig_close_file(d, "pareto.dat", err, errlen) < 0) {
		d = NULL;
		goto out;
	}
	d = NULL;
	FILE *gp = f->gp;
	char title[512];
	snprintf(title, sizeof title, "Predicted step time against peak reserved memory, per "
		 "allocator setting\nline: the Pareto front of each trace (no other setting is "
		 "both faster and smaller)");
	fputs("set title ", gp);
	gp_str(gp, title);
	fputc('\n', gp);
	if (left_out)
		fprintf(gp, "set label 1 \"%d run%s without a predicted step time left out "
			"(run with --timing)\" at graph 0.01, graph -0.12 font ',10'\n", left_out,
			left_out == 1 ? "" : "s");
	fprintf(gp, "set xlabel 'predicted mean step time (ms, first step excluded)'\n"
		"set ylabel 'peak reserved (GiB)'\nset xrange [0:%.6f]\nset yrange [0:%.6f]\n"
		"set grid xtics ytics lc rgb '#d8d8d8'\n"
		"set key outside right top vertical Left reverse font ',11'\n", xmax * 1.25, top);
	fputs("plot ", gp);
	for (int c = 0; c < ncrc; c++) {
		const struct plot_run *r0 = NULL;
		for (int i = 0; i < nt && !r0; i++)
			if (pt[i]->trace_crc32 == crcs[c])
				r0 = pt[i];
		if (c)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "pareto.dat");
		fprintf(gp, " index %d using 1:2 with linespoints lt %d lw 2 pt 7 "
			"title ", 2 * c + 1, c + 1);
		gp_str(gp, trace_title(r0, b1, sizeof b1));
		fputs(", ", gp);
		gp_data(gp, f, "pareto.dat");
		fprintf(gp, " index %d using 1:2 with points lt %d pt 6 ps 1.6 notitle, ", 2 * c,
			c + 1);
		gp_data(gp, f, "pareto.dat");
		fprintf(gp, " index %d using 1:2:4 with labels left offset 1,0.4 font ',9' "
			"tc lt %d notitle", 2 * c, c + 1);
	}
	fputc('\n', gp);
	ret = 0;
out:
	if (d)
		fclose(d);
	free(pt);
	return ret;
}

/* ------------------------------------------------------------ live at the peak */

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
static int fig_live(struct store *s, struct fig *f, const struct plot_run *runs, int n,
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

/* ------------------------------------------------------------ entry */

int plot_make(struct store *s, const struct plot_request *req, char *err, size_t errlen)
{
	struct plot_run *runs = NULL;
	struct fig f;
	int n, ret = -1, ok = 0, begun = 0;
	if ((unsigned)req->kind >= PLOT_KIND_COUNT) {
		snprintf(err, errlen, "unknown figure kind");
		return -1;
	}
	if (plot_format_from_path(req->out) < 0) {
		snprintf(err, errlen, "-o %s: the figure's name must end in .png or .svg", req->out);
		return -1;
	}
	n = plot_load_runs(s, &req->sel, &runs, err, errlen);
	if (n < 0)
		return -1;
	if (n == 0) {
		snprintf(err, errlen, "no stored run matches the selection%s%s",
			 req->sel.where ? " --where " : "", req->sel.where ? req->sel.where : "");
		goto out;
	}
	if (!plot_gnuplot_available()) {
		snprintf(err, errlen, "gnuplot not found (install gnuplot-nox, or set "
			 "GPUMEMSIM_GNUPLOT to its path)");
		goto out;
	}
	if (fig_begin(&f, req, err, errlen) < 0) {
		if (f.gp)
			fclose(f.gp);
		f.gp = NULL;
		begun = f.tmp_dir;
		goto done;
	}
	begun = 1;
	switch (req->kind) {
	case PLOT_TIMELINE: ok = fig_timeline(s, &f, runs, n, err, errlen) == 0; break;
	case PLOT_BATCH: ok = fig_batch(&f, runs, n, err, errlen) == 0; break;
	case PLOT_FRAG: ok = fig_frag(&f, runs, n, err, errlen) == 0; break;
	case PLOT_COMPARE: ok = fig_compare(&f, runs, n, err, errlen) == 0; break;
	case PLOT_PARETO: ok = fig_pareto(&f, runs, n, err, errlen) == 0; break;
	case PLOT_LIVE: ok = fig_live(s, &f, runs, n, err, errlen) == 0; break;
	default: break;
	}
done:
	if (begun) {
		char e2[512];
		if (fig_end(&f, req, ok, ok ? err : e2, ok ? errlen : sizeof e2) == 0 && ok)
			ret = 0;
	}
out:
	plot_runs_free(runs, n);
	return ret;
}
