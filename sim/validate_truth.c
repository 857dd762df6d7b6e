/*
 * validate_truth.c: replays compared with recorded runs of real allocators
 * (validate_truth.h; `gpumemsim validate` prints what these return).
 *
 * torch-truth: for each NAME.trace.gz in DIR (with NAME.json beside it),
 * import it to a temporary trace, replay it through sim_run with the run's
 * own conf, memory fraction and capacity, log every device action, and
 * compare:
 *  - the sequence of segment allocs/frees (or maps/unmaps) as (op, addr,
 *    size) in recorded-address mode, (op, size) in synthetic mode; inside a
 *    run of consecutive releases order carries no meaning, so such runs are
 *    compared as multisets;
 *  - peak reserved, peak allocated and the device alloc/free counts against
 *    the stats the real allocator reported.
 * A run is exact when all of these agree.
 *
 * jax-truth and async-truth do the same for XLA's BFC allocator and the
 * CUDA stream-ordered pool (docs/validation_bfc.md): replay a capture's
 * request stream, less what the allocator never served (the engine's
 * reading of XLA's requests for jax-truth, filter_capture for async-truth),
 * and compare peaks and regions with the recorded run.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/tmpfile.h"
#include "../base/u64map.h"
#include "../base/vec.h"
#include "../traces/trace.h"
#include "../traces/import_torch.h"
#include "../policies/policy.h"
#include "engine.h"
#include "validate_truth.h"

struct dev_op { uint32_t op; uint64_t addr, bytes; };

struct op_log {
	struct dev_op *ops;
	size_t n, cap;
	int oom;   /* host out of memory while logging */
};

static void log_op(void *ctx, uint32_t op, uint64_t addr, uint64_t bytes, uint64_t t)
{
	struct op_log *l = ctx;
	(void)t;
	if (VEC_RESERVE(l->ops, l->cap, l->n + 1, 256) < 0) {
		l->oom = 1;
		return;
	}
	l->ops[l->n].op = op;
	l->ops[l->n].addr = addr;
	l->ops[l->n].bytes = bytes;
	l->n++;
}

static int is_release(uint32_t op)
{
	return op == TSEG_FREE || op == TSEG_UNMAP;
}

static int use_addr_cmp; /* qsort has no context argument */

static int op_cmp(const void *a, const void *b)
{
	const struct dev_op *x = a, *y = b;
	if (x->op != y->op)
		return x->op < y->op ? -1 : 1;
	if (use_addr_cmp && x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? -1 : 1;
	return 0;
}

static void fmt_op(const struct dev_op *o, int with_addr, char *buf, size_t len)
{
	if (!o)
		snprintf(buf, len, "(none)");
	else if (with_addr)
		snprintf(buf, len, "%s 0x%" PRIx64 " %" PRIu64, trace_segment_op_name(o->op),
			 o->addr, o->bytes);
	else
		snprintf(buf, len, "%s %" PRIu64, trace_segment_op_name(o->op), o->bytes);
}

/* Compare two device logs; -1 when equal, else the index of the first
 * difference with a description in WHY. */
static long compare_logs(struct op_log *real, struct op_log *sim, int with_addr,
			 char *why, size_t len)
{
	size_t i = 0;
	use_addr_cmp = with_addr;
	while (i < real->n && i < sim->n) {
		size_t rl = 0, sl = 0;
		while (i + rl < real->n && is_release(real->ops[i + rl].op))
			rl++;
		while (i + sl < sim->n && is_release(sim->ops[i + sl].op))
			sl++;
		if (rl || sl) {
			size_t m = rl < sl ? rl : sl;
			qsort(real->ops + i, rl, sizeof *real->ops, op_cmp);
			qsort(sim->ops + i, sl, sizeof *sim->ops, op_cmp);
			for (size_t k = 0; k < m; k++) {
				if (op_cmp(&real->ops[i + k], &sim->ops[i + k])) {
					i += k;
					goto differ;
				}
			}
			if (rl != sl) {
				i += m;
				goto differ;
			}
			i += rl;
			continue;
		}
		if (op_cmp(&real->ops[i], &sim->ops[i]))
			goto differ;
		i++;
	}
	if (real->n == sim->n)
		return -1;
differ: {
		char a[96], b[96];
		fmt_op(i < real->n ? &real->ops[i] : NULL, with_addr, a, sizeof a);
		fmt_op(i < sim->n ? &sim->ops[i] : NULL, with_addr, b, sizeof b);
		snprintf(why, len, "#%zu real %s, sim %s", i, a, b);
	}
	return (long)i;
}

/* The 'g' records of a trace: what the real allocator did. */
static int read_real_ops(const char *path, struct op_log *l, char *err, size_t errlen)
{
	struct trace_reader *r = trace_reader_start(path, err, errlen);
	struct trace_rec rec;
	int rc;
	if (!r)
		return -1;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK)
		if (rec.type == TREC_SEGMENT)
			log_op(l, rec.u.segment.op, rec.u.segment.addr, rec.u.segment.bytes, 0);
	if (rc < 0)
		snprintf(err, errlen, "%s", trace_reader_error(r));
	trace_reader_close(r);
	return rc < 0 || l->oom ? -1 : 0;
}

static uint64_t stat_u64(const char *json, const char *key)
{
	double v = 0;
	if (import_torch_json_num(json, key, &v) < 0 || v < 0)
		return 0;
	return (uint64_t)v;
}

/* Import, replay and compare one run. */
static int validate_one(const char *dir, const char *name, enum device_addr_mode mode,
			struct validate_torch_row *rr, char *err, size_t errlen)
{
	char in[4096], jpath[4096], tmp[4096], conf[512], fr[64], c0[256];
	struct op_log real = {0}, sim = {0};
	struct sim_result res;
	char *json = NULL;
	int rc = -1, have_res = 0;
	double total = 0, fraction = 1;
	snprintf(in, sizeof in, "%s/%s.trace.gz", dir, name);
	snprintf(jpath, sizeof jpath, "%s/%s.json", dir, name);
	memset(rr, 0, sizeof *rr);
	snprintf(rr->name, sizeof rr->name, "%s", name);
	/* the imported trace goes to TMPDIR, as every temporary trace does */
	if (tmp_file(tmp, sizeof tmp, "validate") < 0) {
		snprintf(err, errlen, "cannot create a temporary file in %s: %s", tmp_dir(),
			 strerror(errno));
		return -1;
	}
	json = import_torch_slurp(jpath);
	if (!json) {
		snprintf(err, errlen, "%s: cannot read: %s", jpath, strerror(errno));
		goto cleanup;
	}
	if (import_torch_json_num(json, "total_memory", &total) < 0 || total <= 0) {
		snprintf(err, errlen, "%s: no total_memory", jpath);
		goto cleanup;
	}
	if (import_torch_json_get(json, "conf", c0, sizeof c0) < 0)
		snprintf(c0, sizeof c0, "default");
	if (import_torch_json_get(json, "fraction", fr, sizeof fr) < 0)
		snprintf(fr, sizeof fr, "1");
	import_torch_json_num(json, "fraction", &fraction);
	snprintf(conf, sizeof conf, "%s", strcmp(c0, "default") ? c0 : "");
	if (fraction < 1.0)
		snprintf(conf + strlen(conf), sizeof conf - strlen(conf), "%sfraction:%s",
			 conf[0] ? "," : "", fr);
	if (import_torch_snapshot(in, tmp, jpath, NULL, err, errlen) < 0)
		goto cleanup;
	if (read_real_ops(tmp, &real, err, errlen) < 0)
		goto cleanup;
	struct sim_options o;
	memset(&o, 0, sizeof o);
	o.trace_path = tmp;
	o.policy = policy_find("pytorch");
	o.conf = conf;
	o.capacity = (uint64_t)total;
	o.addr_mode = mode;
	o.device_log = log_op;
	o.device_log_ctx = &sim;
	if (!o.policy) {
		snprintf(err, errlen, "the pytorch policy is not registered");
		goto cleanup;
	}
	memset(&res, 0, sizeof res);
	if (sim_run(&o, &res, err, errlen) < 0)
		goto cleanup;
	have_res = 1;
	if (sim.oom) {
		snprintf(err, errlen, "%s: out of memory", name);
		goto cleanup;
	}
	/* the policy's fini returns what it still holds after the engine took its
	 * counters: those releases are not part of the run */
	if (sim.n > res.device_allocs + res.device_frees)
		sim.n = (size_t)(res.device_allocs + res.device_frees);
	rr->res_real = stat_u64(json, "reserved_bytes.all.peak");
	rr->alloc_real = stat_u64(json, "allocated_bytes.all.peak");
	rr->dalloc_real = stat_u64(json, "num_device_alloc");
	rr->dfree_real = stat_u64(json, "num_device_free");
	rr->res_sim = res.peak_reserved;
	rr->alloc_sim = res.peak_allocated;
	rr->dalloc_sim = res.device_allocs;
	rr->dfree_sim = res.device_frees;
	rr->rel_err = rr->res_real ? fabs((double)rr->res_sim - (double)rr->res_real) /
				     (double)rr->res_real : 0.0;
	rr->diverge = compare_logs(&real, &sim, mode == DEVICE_ADDR_RECORDED, rr->why,
				   sizeof rr->why);
	rr->exact = rr->diverge < 0 && rr->res_real == rr->res_sim &&
		    rr->alloc_real == rr->alloc_sim && rr->dalloc_real == rr->dalloc_sim &&
		    rr->dfree_real == rr->dfree_sim;
	if (rr->diverge < 0 && !rr->exact)
		snprintf(rr->why, sizeof rr->why, "same segments, different stats");
	rc = 0;
cleanup:
	if (have_res)
		sim_result_free(&res);
	unlink(tmp);
	free(json);
	free(real.ops);
	free(sim.ops);
	return rc;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Nearest-rank percentile of sorted V. */
static double pct(const double *v, size_t n, double p)
{
	if (!n)
		return 0;
	size_t k = (size_t)ceil(p * (double)n);
	return v[k ? k - 1 : 0];
}

/* ------------------------------------------- jax-truth and async-truth */

/*
 * async-truth: what a cudaMallocAsync capture holds that the pool never
 * served, and so is left out of the replay:
 *  - host memory (pinned, pageable) and module globals: not device heap;
 *  - allocations without the pool flag (the pool serves only
 *    cudaMallocAsync; library handles use plain cudaMalloc);
 *  - allocations never freed in the trace (memory the libraries took for
 *    themselves);
 *  - frees of allocations made before the capture started.
 * The output keeps only a, f and y records (no strings needed).
 *
 * jax-truth needs no filter of its own: the engine reads a JAX platform
 * capture as XLA's request stream (sim_options.xla_requests,
 * traces/xla_requests.h), as `run` does.
 */
static int filter_capture(const char *in, const char *out, struct validate_filter_stats *fs,
			  char *err, size_t errlen)
{
	struct trace_reader *r = NULL;
	struct trace_writer *w = NULL;
	struct trace_rec rec;
	struct u64map live, drop;
	int rc = -1, trc;
	uint64_t v, newid = 0;
	u64map_init(&live);
	u64map_init(&drop);
	memset(fs, 0, sizeof *fs);
	for (int pass = 0; pass < 2; pass++) {
		r = trace_reader_start(in, err, errlen);
		if (!r)
			goto cleanup;
		if (pass == 1) {
			w = trace_writer_open(out, TRACE_W_ATOMIC, err, errlen);
			if (!w || trace_writer_header(w, trace_reader_header(r)) < 0) {
				if (w)
					snprintf(err, errlen, "%s: cannot write", out);
				goto cleanup;
			}
		}
		while ((trc = trace_reader_next(r, &rec)) == TRACE_OK) {
			struct trace_mem *m = &rec.u.mem;
			int host = rec.type <= TREC_FREE && trace_mem_kind_host(m->kind);
			if (rec.type == TREC_ALLOC && !host) {
				if (pass == 0) {
					if (u64map_put(&live, m->addr, m->id) < 0)
						goto nomem;
					continue;
				}
				if (u64map_get(&drop, m->id, &v) || !(m->flags & TMEM_F_POOL)) {
					fs->dropped++;
					fs->dropped_bytes += m->bytes;
					continue;
				}
				if (u64map_put(&live, m->addr, m->bytes) < 0)
					goto nomem;
				m->id = newid++;
				m->source = TRACE_NO_STRING;
				fs->kept++;
			} else if (rec.type == TREC_FREE && !host) {
				if (!u64map_del(&live, m->addr, &v)) {
					fs->orphans += pass;
					continue;
				}
				if (pass == 0)
					continue;
				m->source = TRACE_NO_STRING;
			} else if (rec.type != TREC_SYNC || pass == 0) {
				continue;
			}
			if (trace_writer_record(w, &rec) < 0) {
				snprintf(err, errlen, "%s: cannot write", out);
				goto cleanup;
			}
		}
		if (trc < 0) {
			snprintf(err, errlen, "%s", trace_reader_error(r));
			goto cleanup;
		}
		trace_reader_close(r);
		r = NULL;
		if (pass == 0) {
			/* what is still live at the end was never freed */
			for (size_t i = 0; i < live.cap; i++)
				if (live.keys[i] != U64MAP_EMPTY && u64map_put(&drop, live.vals[i], 1) < 0)
					goto nomem;
			u64map_free(&live);
			u64map_init(&live);
		}
	}
	rc = trace_writer_close(&w, 1, 0, err, errlen);
	goto cleanup;
nomem:
	snprintf(err, errlen, "%s: out of memory", in);
cleanup:
	if (w)
		trace_writer_abort(w);
	if (r)
		trace_reader_close(r);
	u64map_free(&live);
	u64map_free(&drop);
	return rc;
}

/* Device allocations of a BFC growth-run capture that were freed in it: the
 * regions (XLA returns them at exit; library handles are never freed). */
static int capture_regions(const char *path, uint64_t *n, uint64_t *bytes,
			   char *list, size_t len)
{
	char why[512];   /* unreadable: the row has no regions, as without the file */
	struct trace_reader *r = trace_reader_start(path, why, sizeof why);
	struct trace_rec rec;
	struct u64map live;
	size_t used = 0;
	*n = *bytes = 0;
	list[0] = 0;
	if (!r)
		return -1;
	u64map_init(&live);
	while (trace_reader_next(r, &rec) == TRACE_OK) {
		const struct trace_mem *m = &rec.u.mem;
		if (rec.type > TREC_FREE || trace_mem_kind_host(m->kind))
			continue;
		if (rec.type == TREC_ALLOC) {
			u64map_put(&live, m->addr, m->bytes);
		} else {
			uint64_t b;
			if (!u64map_del(&live, m->addr, &b))
				continue;
			(*n)++;
			*bytes += b;
			if (used + 24 < len)
				used += (size_t)snprintf(list + used, len - used, "%s%" PRIu64,
							 used ? "+" : "", b >> 20);
		}
	}
	trace_reader_close(r);
	u64map_free(&live);
	return 0;
}

/* Replay TRACE under POLICY/CONF (XLA's request stream as XLA), fill ROW's
 * sim side. */
static int replay_row(const char *trace, const char *policy, const char *conf,
		      enum sim_xla_mode xla, struct validate_pool_row *row, char *err, size_t errlen)
{
	struct sim_options o;
	struct sim_result res;
	memset(&o, 0, sizeof o);
	o.trace_path = trace;
	o.policy = policy_find(policy);
	o.conf = conf;
	o.addr_mode = DEVICE_ADDR_SYNTHETIC;
	o.xla_requests = xla;
	if (!o.policy) {
		snprintf(err, errlen, "the %s policy is not registered", policy);
		return -1;
	}
	memset(&res, 0, sizeof res);
	if (sim_run(&o, &res, err, errlen) < 0)
		return -1;
	row->pool_sim = res.peak_reserved;
	row->use_sim = res.peak_allocated;
	row->reg_sim = res.device_allocs;
	if (res.xla_applied) {
		row->fs.kept = res.allocs;
		row->fs.dropped = res.xla_outside;
		row->fs.dropped_bytes = res.xla_outside_bytes;
		row->fs.granule_lowered = res.xla_lowered;
		row->fs.lowered_bytes = res.xla_lowered_bytes;
	}
	sim_result_free(&res);
	return 0;
}

/* Filter the async capture IN (filter_capture) and replay it. */
static int replay_filtered(const char *in, const char *policy, const char *conf,
			   struct validate_pool_row *row, char *err, size_t errlen)
{
	char tmp[4096];
	int rc = -1;
	if (tmp_file(tmp, sizeof tmp, "vpool") < 0) {
		snprintf(err, errlen, "cannot create a temporary file in %s: %s", tmp_dir(),
			 strerror(errno));
		return -1;
	}
	if (filter_capture(in, tmp, &row->fs, err, errlen) == 0)
		rc = replay_row(tmp, policy, conf, SIM_XLA_OFF, row, err, errlen);
	unlink(tmp);
	return rc;
}

/* One JAX batch: DIR/NAME.trace.gz against DIR/truth/NAME-growth.*. */
static int jax_one(const char *dir, const char *name, struct validate_pool_row *row,
		   char *err, size_t errlen)
{
	char in[4096], jp[4096], tp[4096], conf[128];
	double v;
	char *json;
	memset(row, 0, sizeof *row);
	snprintf(row->name, sizeof row->name, "%s", name);
	snprintf(in, sizeof in, "%s/%s.trace.gz", dir, name);
	snprintf(jp, sizeof jp, "%s/truth/%s-growth.nvml.json", dir, name);
	json = import_torch_slurp(jp);
	if (!json) {
		snprintf(jp, sizeof jp, "%s/truth/%s-growth.json", dir, name);
		json = import_torch_slurp(jp);
	}
	if (!json) {
		snprintf(err, errlen, "%s: cannot read: %s", jp, strerror(errno));
		return -1;
	}
	/* sorted keys: memory_stats comes before stats_per_step, so the first
	 * occurrence of each key is the end-of-run value */
	if (import_torch_json_num(json, "bytes_limit", &v) < 0 || v <= 0) {
		snprintf(err, errlen, "%s: no memory_stats.bytes_limit (a failed run?)", jp);
		free(json);
		return -1;
	}
	row->limit = (uint64_t)v;
	row->pool_real = import_torch_json_num(json, "peak_pool_bytes", &v) < 0 ? 0 : (uint64_t)v;
	row->use_real = import_torch_json_num(json, "peak_bytes_in_use", &v) < 0 ? 0 : (uint64_t)v;
	free(json);
	snprintf(tp, sizeof tp, "%s/truth/%s-growth.trace.gz", dir, name);
	if (access(tp, R_OK) == 0 &&
	    capture_regions(tp, &row->reg_real, &row->reg_bytes, row->regions,
			    sizeof row->regions) == 0)
		row->have_regions = 1;
	snprintf(conf, sizeof conf, "allow_growth:true,memory_limit:%" PRIu64, row->limit);
	/* XLA's requests, as `run` reads the capture (the labels say so; on
	 * here whatever they say) */
	return replay_row(in, "bfc", conf, SIM_XLA_ON, row, err, errlen);
}

/* One cudaMallocAsync run: DIR/NAME.trace.gz (its own capture) and NAME.json
 * (the pool's attributes). 1 when the run itself failed (skipped). */
static int async_one(const char *dir, const char *name, struct validate_pool_row *row,
		     char *err, size_t errlen)
{
	char in[4096], jp[4096], conf[128], thr[64];
	double v;
	char *json;
	memset(row, 0, sizeof *row);
	snprintf(row->name, sizeof row->name, "%s", name);
	snprintf(in, sizeof in, "%s/%s.trace.gz", dir, name);
	snprintf(jp, sizeof jp, "%s/%s.json", dir, name);
	json = import_torch_slurp(jp);
	if (!json) {
		snprintf(err, errlen, "%s: cannot read: %s", jp, strerror(errno));
		return -1;
	}
	/* the default pool's attributes come first (sorted keys) */
	if (import_torch_json_num(json, "reserved_mem_high", &v) < 0) {
		free(json);
		return 1;
	}
	row->pool_real = (uint64_t)v;
	row->use_real = import_torch_json_num(json, "used_mem_high", &v) < 0 ? 0 : (uint64_t)v;
	if (import_torch_json_get(json, "release_threshold", thr, sizeof thr) < 0)
		snprintf(thr, sizeof thr, "0");
	/* PyTorch sets UINT64_MAX (never release); past the device it means the same */
	if (import_torch_json_num(json, "release_threshold", &v) == 0 && v > 1e15 &&
	    import_torch_json_num(json, "total_memory", &v) == 0)
		snprintf(thr, sizeof thr, "%" PRIu64, (uint64_t)v);
	free(json);
	snprintf(conf, sizeof conf, "release_threshold:%s", thr);
	return replay_filtered(in, "cuda_async", conf, row, err, errlen);
}

static int name_cmp(const void *a, const void *b)
{
	/* batch order: jax-resnet-b8 before jax-resnet-b12 */
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	size_t i = 0;
	while (x[i] && x[i] == y[i] && !(x[i] >= '0' && x[i] <= '9'))
		i++;
	if (x[i] >= '0' && x[i] <= '9' && y[i] >= '0' && y[i] <= '9') {
		unsigned long p = strtoul(x + i, NULL, 10), q = strtoul(y + i, NULL, 10);
		if (p != q)
			return p < q ? -1 : 1;
	}
	return strcmp(x, y);
}


/* ------------------------------------------------------------- the runs */

static const struct validate_opts no_opts;

static void emit(const struct validate_opts *o, const struct validate_report *r,
		 enum validate_event ev, size_t i)
{
	if (o->on_event)
		o->on_event(r, ev, i, o->ctx);
}

/* The NAMEs of DIR's PREFIX*.trace.gz files (PREFIX may be NULL) whose file
 * name contains ONLY (when not NULL), unsorted. -1 with ERR when DIR
 * cannot be read or out of memory; *NAMES holds what was found either way. */
static int list_runs(const char *dir, const char *prefix, const char *only, char ***names,
		     size_t *n, char *err, size_t errlen)
{
	size_t cap = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (l <= 9 || strcmp(de->d_name + l - 9, ".trace.gz") ||
		    (prefix && strncmp(de->d_name, prefix, strlen(prefix))) ||
		    (only && !strstr(de->d_name, only)))
			continue;
		if (VEC_RESERVE(*names, cap, *n + 1, 64) < 0)
			goto oom;
		if (!((*names)[*n] = strndup(de->d_name, l - 9)))
			goto oom;
		(*n)++;
	}
	closedir(d);
	return 0;
oom:
	closedir(d);
	snprintf(err, errlen, "out of memory");
	return -1;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* `validate torch-truth DIR`: every run, then the summary. */
int validate_torch_truth(const char *dir, const struct validate_opts *o,
			 struct validate_report *out, char *err, size_t errlen)
{
	char **names = NULL;
	size_t nnames = 0, nexact = 0;
	double *errs = NULL;
	int rc = -1;
	if (!o)
		o = &no_opts;
	memset(out, 0, sizeof *out);
	out->kind = VALIDATE_TORCH_TRUTH;
	out->addresses = o->addresses == DEVICE_ADDR_RECORDED ? "recorded" : "synthetic";
	if (list_runs(dir, NULL, o->only, &names, &nnames, err, errlen) < 0)
		goto cleanup;
	if (!nnames) {
		snprintf(err, errlen, "%s: no NAME.trace.gz%s%s%s", dir,
			 o->only ? " matching '" : "", o->only ? o->only : "", o->only ? "'" : "");
		goto cleanup;
	}
	qsort(names, nnames, sizeof *names, str_cmp);
	out->torch = calloc(nnames, sizeof *out->torch);
	errs = calloc(nnames, sizeof *errs);
	if (!out->torch || !errs) {
		snprintf(err, errlen, "out of memory");
		goto cleanup;
	}
	out->nruns = nnames;
	for (size_t i = 0; i < nnames; i++)
		snprintf(out->torch[i].name, sizeof out->torch[i].name, "%s", names[i]);
	emit(o, out, VALIDATE_BEGIN, 0);
	for (size_t i = 0; i < nnames; i++) {
		struct validate_torch_row *r = &out->torch[i];
		if (validate_one(dir, names[i], o->addresses, r, err, errlen) < 0)
			goto cleanup;
		out->nrows = i + 1;
		errs[i] = r->rel_err;
		nexact += r->exact != 0;
		emit(o, out, VALIDATE_ROW, i);
	}
	qsort(errs, nnames, sizeof *errs, dbl_cmp);
	out->rel_err_median = pct(errs, nnames, 0.5);
	out->rel_err_p90 = pct(errs, nnames, 0.9);
	out->rel_err_max = errs[nnames - 1];
	out->runs = nnames;
	out->exact_runs = nexact;
	rc = 0;
cleanup:
	free_names(names, nnames);
	free(errs);
	return rc;
}

/* `validate jax-truth|async-truth DIR`: one row per run, then a summary. */
static int validate_pool(enum validate_kind kind, const char *dir,
			 const struct validate_opts *o, struct validate_report *out,
			 char *err, size_t errlen)
{
	int jax = kind == VALIDATE_JAX_TRUTH, rc = -1;
	char **names = NULL;
	size_t n = 0, nexact = 0, nrun = 0;
	if (!o)
		o = &no_opts;
	memset(out, 0, sizeof *out);
	out->kind = kind;
	if (list_runs(dir, jax ? "jax-" : NULL, o->only, &names, &n, err, errlen) < 0)
		goto cleanup;
	if (!n) {
		snprintf(err, errlen, "%s: no %sNAME.trace.gz", dir, jax ? "jax-" : "");
		goto cleanup;
	}
	qsort(names, n, sizeof *names, name_cmp);
	if (!(out->pool = calloc(n, sizeof *out->pool))) {
		snprintf(err, errlen, "out of memory");
		goto cleanup;
	}
	out->nruns = n;
	for (size_t i = 0; i < n; i++)
		snprintf(out->pool[i].name, sizeof out->pool[i].name, "%s", names[i]);
	emit(o, out, VALIDATE_BEGIN, 0);
	for (size_t i = 0; i < n; i++) {
		struct validate_pool_row *row = &out->pool[i];
		int r = jax ? jax_one(dir, names[i], row, err, errlen)
			    : async_one(dir, names[i], row, err, errlen);
		if (r < 0)
			goto cleanup;
		out->nrows = i + 1;
		if (r > 0) {
			row->skipped = 1;
			emit(o, out, VALIDATE_SKIPPED, i);
			continue;
		}
		row->exact = row->pool_real == row->pool_sim &&
			     (!row->have_regions || row->reg_real == row->reg_sim);
		row->diff = (int64_t)(row->pool_sim - row->pool_real);
		nrun++;
		nexact += row->exact;
		emit(o, out, VALIDATE_ROW, i);
	}
	out->runs = nrun;
	out->exact_runs = nexact;
	rc = 0;
cleanup:
	free_names(names, n);
	return rc;
}

int validate_jax_truth(const char *dir, const struct validate_opts *o,
		       struct validate_report *out, char *err, size_t errlen)
{
	return validate_pool(VALIDATE_JAX_TRUTH, dir, o, out, err, errlen);
}

int validate_async_truth(const char *dir, const struct validate_opts *o,
			 struct validate_report *out, char *err, size_t errlen)
{
	return validate_pool(VALIDATE_ASYNC_TRUTH, dir, o, out, err, errlen);
}

void validate_report_free(struct validate_report *r)
{
	if (!r)
		return;
	free(r->torch);
	free(r->pool);
	r->torch = NULL;
	r->pool = NULL;
	r->nruns = r->nrows = 0;
}
