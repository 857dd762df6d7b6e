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
 *
 * The files: this one holds the entry points (kinds, formats, the --where
 * check, loading the runs from the store, plot_make's dispatch);
 * plot_common.c runs gnuplot and holds what the figures share (the script's
 * styling, data files, floors, capacity lines, the off-scale rule);
 * plot_timeline.c, plot_batch.c, plot_frag.c, plot_compare.c, plot_pareto.c
 * and plot_live.c draw one kind each; plot_int.h declares what they share.
 */
#include "plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"
#include "../sim/engine.h"
#include "plot_int.h"

static const char *const kind_names[PLOT_KIND_COUNT] = {"timeline", "batch", "frag", "compare",
							 "pareto", "live", "regions", "compile",
							 "steps"};

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
       R_TOOLV, R_LABELS, R_OOM_LIMIT, R_OOM_VERDICT, R_STEP, R_TIMED, R_WORKLOAD, R_GPU_BUSY, R_N };

struct load_ctx {
	struct plot_run *runs;
	int n, failed;
	size_t cap;
};

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
	r->workload = dup_or_empty(c[R_WORKLOAD], &l->failed);
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
	r->gpu_busy = c[R_GPU_BUSY] ? strtod(c[R_GPU_BUSY], NULL) : -1;
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
		free(runs[i].workload);
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
		" r.step_time_ns, r.timed,"
		" coalesce((SELECT value FROM run_labels WHERE run_id=r.id AND key='workload'),'') AS wl_l,"
		" r.gpu_busy_fraction"
		" FROM latest r ORDER BY wl_l, model_l, CAST(batch_l AS INTEGER), batch_l, r.trace_path,"
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

int plot_run_host_bound(const struct plot_run *r)
{
	if (!r->timed || !r->step_time_ns || r->gpu_busy < 0)
		return -1;
	return !sim_gpu_bound(r->gpu_busy);
}

const char *plot_run_setting(const struct plot_run *r, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s", r->policy, *r->conf ? r->conf : "(default)");
	return buf;
}

/* ------------------------------------------------------------ entry */

int plot_make(struct store *s, const struct plot_request *req, char *err, size_t errlen)
{
	struct plot_run *runs = NULL;
	struct fig f;
	int n, ret = -1, ok = 0;
	if ((unsigned)req->kind >= PLOT_KIND_COUNT) {
		snprintf(err, errlen, "unknown figure kind");
		return -1;
	}
	if (req->kind == PLOT_REGIONS) {
		snprintf(err, errlen, "the regions figure is drawn from replays, not the database: "
			 "gpumemsim explain batch T1 T2 ... --figure FILE");
		return -1;
	}
	if (req->kind == PLOT_COMPILE) {
		snprintf(err, errlen, "the compile figure is drawn from replays, not the database: "
			 "gpumemsim whatif compile TRACE --figure FILE");
		return -1;
	}
	if (req->kind == PLOT_STEPS) {
		snprintf(err, errlen, "the steps figure is drawn from a replay, not the database: "
			 "gpumemsim run TRACE --policy NAME --steps-figure FILE");
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
	if (fig_begin(&f, req, err, errlen) < 0)
		goto out;
	switch (req->kind) {
	case PLOT_TIMELINE: ok = fig_timeline(s, &f, runs, n, err, errlen) == 0; break;
	case PLOT_BATCH: ok = fig_batch(&f, runs, n, err, errlen) == 0; break;
	case PLOT_FRAG: ok = fig_frag(&f, runs, n, err, errlen) == 0; break;
	case PLOT_COMPARE: ok = fig_compare(&f, runs, n, err, errlen) == 0; break;
	case PLOT_PARETO: ok = fig_pareto(&f, runs, n, err, errlen) == 0; break;
	case PLOT_LIVE: ok = fig_live(s, &f, runs, n, err, errlen) == 0; break;
	default: break;
	}
	char e2[512];
	if (fig_end(&f, req, ok, ok ? err : e2, ok ? errlen : sizeof e2) == 0 && ok)
		ret = 0;
out:
	plot_runs_free(runs, n);
	return ret;
}
