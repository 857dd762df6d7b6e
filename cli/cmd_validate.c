/*
 * cmd_validate.c: `gpumemsim validate torch-truth DIR`: replay recorded runs
 * of PyTorch's caching allocator through the pytorch policy and compare
 * with what the real allocator did (docs/validation.md has the results).
 *
 * For each NAME.trace.gz in DIR (with NAME.json beside it): import it to a
 * temporary trace, replay it through sim_run with the run's own conf,
 * memory fraction and capacity, log every device action, and compare:
 *  - the sequence of segment allocs/frees (or maps/unmaps) as (op, addr,
 *    size) in recorded-address mode, (op, size) in synthetic mode; inside a
 *    run of consecutive releases order carries no meaning, so such runs are
 *    compared as multisets;
 *  - peak reserved, peak allocated and the device alloc/free counts against
 *    the stats the real allocator reported.
 * A run is exact when all of these agree.
 *
 * `validate jax-truth DIR` and `validate async-truth DIR` do the same for
 * XLA's BFC allocator and the CUDA stream-ordered pool (docs/validation_bfc.md):
 * replay a capture's request stream, less what the allocator never served
 * (filter_capture), and compare peaks and regions with the recorded run.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../include/gpumemsim.h"

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
	struct trace_reader *r = trace_reader_open(path);
	struct trace_rec rec;
	int rc;
	if (!r) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	if (trace_reader_status(r) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		trace_reader_close(r);
		return -1;
	}
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK)
		if (rec.type == TREC_SEGMENT)
			log_op(l, rec.u.segment.op, rec.u.segment.addr, rec.u.segment.bytes, 0);
	if (rc < 0)
		snprintf(err, errlen, "%s", trace_reader_error(r));
	trace_reader_close(r);
	return rc < 0 || l->oom ? -1 : 0;
}

struct run_result {
	char name[256];
	int exact;
	uint64_t res_real, res_sim, alloc_real, alloc_sim;
	uint64_t dalloc_real, dalloc_sim, dfree_real, dfree_sim;
	double rel_err;
	long diverge;
	char why[256];
};

static uint64_t stat_u64(const char *json, const char *key)
{
	double v = 0;
	if (import_torch_json_num(json, key, &v) < 0 || v < 0)
		return 0;
	return (uint64_t)v;
}

/* Import, replay and compare one run. */
static int validate_one(const char *dir, const char *name, enum device_addr_mode mode,
			struct run_result *rr, char *err, size_t errlen)
{
	char in[4096], jpath[4096], tmp[64], conf[512], fr[64], c0[256];
	struct op_log real = {0}, sim = {0};
	struct sim_result res;
	char *json = NULL;
	int rc = -1, have_res = 0;
	double total = 0, fraction = 1;
	snprintf(in, sizeof in, "%s/%s.trace.gz", dir, name);
	snprintf(jpath, sizeof jpath, "%s/%s.json", dir, name);
	snprintf(tmp, sizeof tmp, "/tmp/gpumemsim-validate-XXXXXX");
	memset(rr, 0, sizeof *rr);
	snprintf(rr->name, sizeof rr->name, "%s", name);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create a temporary file: %s", strerror(errno));
		return -1;
	}
	close(fd);
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
 * What a capture holds that the allocator under test never served, and so
 * is left out of the replay:
 *  - host memory (pinned, pageable) and module globals: not device heap;
 *  - allocations never freed in the trace: XLA frees every buffer when its
 *    client is destroyed at exit, so what survives is the memory libraries
 *    took for themselves with cudaMalloc (cuDNN and cuBLAS handles, the
 *    64 MiB cuBLAS workspace): outside XLA's allocator (jax-truth);
 *  - allocations without the pool flag (async-truth: the pool serves only
 *    cudaMallocAsync; handles use plain cudaMalloc);
 *  - frees of allocations made before the capture started.
 * The output keeps only a, f and y records (no strings needed).
 */
struct filter_stats { uint64_t kept, dropped, dropped_bytes, orphans; };

static int filter_capture(const char *in, const char *out, int pool_only,
			  struct filter_stats *fs, char *err, size_t errlen)
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
		r = trace_reader_open(in);
		if (!r || trace_reader_status(r) < 0) {
			snprintf(err, errlen, "%s", r ? trace_reader_error(r) : "out of memory");
			goto cleanup;
		}
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
			int host = rec.type <= TREC_FREE &&
				   (m->kind == TMEM_PAGEABLE || m->kind == TMEM_PINNED);
			if (rec.type == TREC_ALLOC && !host) {
				if (pass == 0) {
					if (u64map_put(&live, m->addr, m->id) < 0)
						goto nomem;
					continue;
				}
				int skip = u64map_get(&drop, m->id, &v) ||
					   (pool_only && !(m->flags & TMEM_F_POOL));
				if (skip) {
					fs->dropped++;
					fs->dropped_bytes += m->bytes;
					continue;
				}
				if (u64map_put(&live, m->addr, 1) < 0)
					goto nomem;
				m->id = newid++;
				m->source = TRACE_NO_STRING;
				fs->kept++;
			} else if (rec.type == TREC_FREE && !host) {
				if (!u64map_del(&live, m->addr, NULL)) {
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
	rc = trace_writer_close(w, 1, 0, err, errlen);
	w = NULL;
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
	struct trace_reader *r = trace_reader_open(path);
	struct trace_rec rec;
	struct u64map live;
	size_t used = 0;
	*n = *bytes = 0;
	list[0] = 0;
	if (!r || trace_reader_status(r) < 0) {
		if (r)
			trace_reader_close(r);
		return -1;
	}
	u64map_init(&live);
	while (trace_reader_next(r, &rec) == TRACE_OK) {
		const struct trace_mem *m = &rec.u.mem;
		if (rec.type > TREC_FREE || m->kind == TMEM_PAGEABLE || m->kind == TMEM_PINNED)
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

struct truth_row {
	char name[256];
	uint64_t pool_real, pool_sim, use_real, use_sim, reg_real, reg_sim, limit, reg_bytes;
	int have_regions;
	struct filter_stats fs;
	char regions[160];
};

/* Filter NAME.trace.gz, replay it under POLICY/CONF, fill ROW's sim side. */
static int replay_filtered(const char *in, const char *policy, const char *conf,
			   int pool_only, struct truth_row *row, char *err, size_t errlen)
{
	char tmp[64];
	struct sim_options o;
	struct sim_result res;
	int rc = -1;
	snprintf(tmp, sizeof tmp, "/tmp/gpumemsim-vjax-XXXXXX");
	int fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create a temporary file: %s", strerror(errno));
		return -1;
	}
	close(fd);
	if (filter_capture(in, tmp, pool_only, &row->fs, err, errlen) < 0)
		goto cleanup;
	memset(&o, 0, sizeof o);
	o.trace_path = tmp;
	o.policy = policy_find(policy);
	o.conf = conf;
	o.addr_mode = DEVICE_ADDR_SYNTHETIC;
	if (!o.policy) {
		snprintf(err, errlen, "the %s policy is not registered", policy);
		goto cleanup;
	}
	memset(&res, 0, sizeof res);
	if (sim_run(&o, &res, err, errlen) < 0)
		goto cleanup;
	row->pool_sim = res.peak_reserved;
	row->use_sim = res.peak_allocated;
	row->reg_sim = res.device_allocs;
	sim_result_free(&res);
	rc = 0;
cleanup:
	unlink(tmp);
	return rc;
}

/* One JAX batch: DIR/NAME.trace.gz against DIR/truth/NAME-growth.*. */
static int jax_one(const char *dir, const char *name, struct truth_row *row,
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
	return replay_filtered(in, "bfc", conf, 0, row, err, errlen);
}

/* One cudaMallocAsync run: DIR/NAME.trace.gz (its own capture) and NAME.json
 * (the pool's attributes). 1 when the run itself failed (skipped). */
static int async_one(const char *dir, const char *name, struct truth_row *row,
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
	return replay_filtered(in, "cuda_async", conf, 1, row, err, errlen);
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

/* `validate jax-truth|async-truth DIR`: one row per run, then a summary. */
static int validate_truth(const char *kind, const char *dir, const char *only, int as_json)
{
	int jax = !strcmp(kind, "jax-truth"), rc = 1;
	char **names = NULL;
	size_t n = 0, cap = 0, nexact = 0, nrun = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	struct json j;
	if (!d) {
		fprintf(stderr, "gpumemsim validate: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (l <= 9 || strcmp(de->d_name + l - 9, ".trace.gz") ||
		    (jax && strncmp(de->d_name, "jax-", 4)) || (only && !strstr(de->d_name, only)))
			continue;
		if (VEC_RESERVE(names, cap, n + 1, 32) < 0)
			goto oom;
		if (!(names[n] = strndup(de->d_name, l - 9)))
			goto oom;
		n++;
	}
	closedir(d);
	d = NULL;
	if (!n) {
		fprintf(stderr, "gpumemsim validate: %s: no %sNAME.trace.gz\n", dir, jax ? "jax-" : "");
		goto cleanup;
	}
	qsort(names, n, sizeof *names, name_cmp);
	if (!as_json)
		printf("%-28s %-5s %13s %13s %12s %12s %12s %7s %-26s %s\n", "run", "exact",
		       jax ? "pool_real" : "reserved_hi", jax ? "pool_sim" : "reserved_sim",
		       "diff", "inuse_real", "inuse_sim", "regions", jax ? "real regions MiB" : "",
		       "left out (allocs/bytes)");
	for (size_t i = 0; i < n; i++) {
		struct truth_row row;
		char err[8400];
		int r = jax ? jax_one(dir, names[i], &row, err, sizeof err)
			    : async_one(dir, names[i], &row, err, sizeof err);
		if (r < 0) {
			fprintf(stderr, "gpumemsim validate: %s\n", err);
			goto cleanup;
		}
		if (r > 0) {
			fprintf(stderr, "gpumemsim validate: %s: the recorded run failed; skipped\n",
				names[i]);
			continue;
		}
		int exact = row.pool_real == row.pool_sim &&
			    (!row.have_regions || row.reg_real == row.reg_sim);
		nrun++;
		nexact += exact;
		int64_t diff = (int64_t)(row.pool_sim - row.pool_real);
		if (as_json) {
			json_init(&j, stdout);
			json_begin_object(&j);
			json_kv_string(&j, "run", row.name);
			json_kv_bool(&j, "exact", exact);
			json_kv_u64(&j, jax ? "peak_pool_bytes_real" : "reserved_high_real", row.pool_real);
			json_kv_u64(&j, jax ? "peak_pool_bytes_sim" : "reserved_high_sim", row.pool_sim);
			json_kv_u64(&j, "peak_in_use_real", row.use_real);
			json_kv_u64(&j, "peak_in_use_sim", row.use_sim);
			if (row.have_regions)
				json_kv_u64(&j, "regions_real", row.reg_real);
			json_kv_u64(&j, "regions_sim", row.reg_sim);
			json_kv_u64(&j, "left_out_allocs", row.fs.dropped);
			json_kv_u64(&j, "left_out_bytes", row.fs.dropped_bytes);
			json_kv_u64(&j, "orphan_frees", row.fs.orphans);
			json_end_object(&j);
		} else {
			char reg[32];
			if (row.have_regions)
				snprintf(reg, sizeof reg, "%" PRIu64 "/%" PRIu64, row.reg_real, row.reg_sim);
			else
				snprintf(reg, sizeof reg, "-/%" PRIu64, row.reg_sim);
			printf("%-28s %-5s %13" PRIu64 " %13" PRIu64 " %12" PRId64 " %12" PRIu64
			       " %12" PRIu64 " %7s %-26s %" PRIu64 "/%" PRIu64 "\n", row.name,
			       exact ? "yes" : "no", row.pool_real, row.pool_sim, diff, row.use_real,
			       row.use_sim, reg, row.have_regions ? row.regions : "-",
			       row.fs.dropped, row.fs.dropped_bytes);
		}
		fflush(stdout);
	}
	if (as_json) {
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "summary", kind);
		json_kv_u64(&j, "runs", nrun);
		json_kv_u64(&j, "exact_runs", nexact);
		json_end_object(&j);
	} else {
		printf("\nsummary (%s): %zu runs, %zu with peak %s reproduced exactly\n", kind, nrun,
		       nexact, jax ? "pool bytes (and regions)" : "reserved");
	}
	rc = 0;
	goto cleanup;
oom:
	fprintf(stderr, "gpumemsim validate: out of memory\n");
cleanup:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

static void validate_usage(FILE *f)
{
	fprintf(f, "usage: gpumemsim validate torch-truth DIR [--addresses recorded|synthetic]\n"
		   "                                       [--json] [--only SUBSTR]\n\n"
		   "Replays every NAME.trace.gz in DIR (with NAME.json: conf, fraction,\n"
		   "total_memory, stats) through the pytorch policy and compares segment\n"
		   "sequences and peaks with the real allocator's. Exit 0 when it ran.\n\n"
		   "       gpumemsim validate jax-truth DIR [--json] [--only SUBSTR]\n"
		   "Replays every jax-*.trace.gz in DIR (XLA_PYTHON_CLIENT_ALLOCATOR=platform\n"
		   "captures) under bfc with allow_growth and the run's bytes_limit; compares\n"
		   "peak pool bytes, peak in use and regions with DIR/truth/NAME-growth.*.\n\n"
		   "       gpumemsim validate async-truth DIR [--json] [--only SUBSTR]\n"
		   "Replays each NAME.trace.gz (a backend:cudaMallocAsync capture) under\n"
		   "cuda_async; compares with the pool's reserved/used high-water marks.\n");
}

/* Parse, run every selected recorded run, print rows and a summary. */
int cmd_validate(int argc, char **argv)
{
	const char *kind = NULL, *dir = NULL, *only = NULL;
	enum device_addr_mode mode = DEVICE_ADDR_RECORDED;
	int as_json = 0, rc = 1;
	char **names = NULL;
	size_t nnames = 0, capnames = 0;
	struct run_result *rr = NULL;
	double *errs = NULL;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			validate_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			as_json = 1;
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(argv[i], "--addresses") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "recorded"))
				mode = DEVICE_ADDR_RECORDED;
			else if (!strcmp(argv[i], "synthetic"))
				mode = DEVICE_ADDR_SYNTHETIC;
			else {
				fprintf(stderr, "gpumemsim validate: --addresses: expected recorded "
					"or synthetic, got '%s'\n", argv[i]);
				return EXIT_USAGE;
			}
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "gpumemsim validate: unknown option '%s'\n", argv[i]);
			validate_usage(stderr);
			return EXIT_USAGE;
		} else if (!kind) {
			kind = argv[i];
		} else if (!dir) {
			dir = argv[i];
		} else {
			fprintf(stderr, "gpumemsim validate: unexpected argument '%s'\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!kind || !dir) {
		validate_usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(kind, "jax-truth") || !strcmp(kind, "async-truth"))
		return validate_truth(kind, dir, only, as_json);
	if (strcmp(kind, "torch-truth")) {
		fprintf(stderr, "gpumemsim validate: unknown ground truth '%s' (known: torch-truth, "
			"jax-truth, async-truth)\n", kind);
		return EXIT_USAGE;
	}
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "gpumemsim validate: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);
		if (n <= 9 || strcmp(de->d_name + n - 9, ".trace.gz"))
			continue;
		if (only && !strstr(de->d_name, only))
			continue;
		if (VEC_RESERVE(names, capnames, nnames + 1, 64) < 0)
			goto oom;
		names[nnames] = strndup(de->d_name, n - 9);
		if (!names[nnames])
			goto oom;
		nnames++;
	}
	closedir(d);
	d = NULL;
	if (!nnames) {
		fprintf(stderr, "gpumemsim validate: %s: no NAME.trace.gz%s%s%s\n", dir,
			only ? " matching '" : "", only ? only : "", only ? "'" : "");
		goto cleanup;
	}
	qsort(names, nnames, sizeof *names, str_cmp);
	rr = calloc(nnames, sizeof *rr);
	errs = calloc(nnames, sizeof *errs);
	if (!rr || !errs)
		goto oom;

	struct json j;
	json_init(&j, stdout);
	if (!as_json)
		printf("%-52s %-5s %14s %14s %8s %13s %13s %9s  %s\n", "run", "exact",
		       "reserved_real", "reserved_sim", "rel_err", "alloc_real", "alloc_sim",
		       "dev_alloc", "first divergence");
	size_t nexact = 0;
	for (size_t i = 0; i < nnames; i++) {
		char err[8400];
		struct run_result *r = &rr[i];
		if (validate_one(dir, names[i], mode, r, err, sizeof err) < 0) {
			fprintf(stderr, "gpumemsim validate: %s\n", err);
			goto cleanup;
		}
		errs[i] = r->rel_err;
		nexact += r->exact != 0;
		if (as_json) {
			json_init(&j, stdout);  /* one document a line */
			json_begin_object(&j);
			json_kv_string(&j, "run", r->name);
			json_kv_bool(&j, "exact", r->exact);
			json_kv_u64(&j, "peak_reserved_real", r->res_real);
			json_kv_u64(&j, "peak_reserved_sim", r->res_sim);
			json_kv_double(&j, "peak_reserved_rel_err", r->rel_err);
			json_kv_u64(&j, "peak_allocated_real", r->alloc_real);
			json_kv_u64(&j, "peak_allocated_sim", r->alloc_sim);
			json_kv_u64(&j, "device_allocs_real", r->dalloc_real);
			json_kv_u64(&j, "device_allocs_sim", r->dalloc_sim);
			json_kv_u64(&j, "device_frees_real", r->dfree_real);
			json_kv_u64(&j, "device_frees_sim", r->dfree_sim);
			if (r->exact)
				json_key(&j, "first_divergence"), json_null(&j);
			else
				json_kv_string(&j, "first_divergence", r->why);
			json_end_object(&j);  /* ends the line itself */
		} else {
			printf("%-52s %-5s %14" PRIu64 " %14" PRIu64 " %7.3f%% %13" PRIu64 " %13" PRIu64
			       " %4" PRIu64 "/%-4" PRIu64 "  %s\n", r->name, r->exact ? "yes" : "no",
			       r->res_real, r->res_sim, 100.0 * r->rel_err, r->alloc_real, r->alloc_sim,
			       r->dalloc_real, r->dalloc_sim, r->exact ? "-" : r->why);
		}
		fflush(stdout);
	}
	qsort(errs, nnames, sizeof *errs, dbl_cmp);
	double med = pct(errs, nnames, 0.5), p90 = pct(errs, nnames, 0.9);
	double mx = errs[nnames - 1];
	const char *mname = mode == DEVICE_ADDR_RECORDED ? "recorded" : "synthetic";
	if (as_json) {
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "summary", "torch-truth");
		json_kv_string(&j, "addresses", mname);
		json_kv_u64(&j, "runs", nnames);
		json_kv_u64(&j, "exact_runs", nexact);
		json_kv_double(&j, "peak_reserved_rel_err_median", med);
		json_kv_double(&j, "peak_reserved_rel_err_p90", p90);
		json_kv_double(&j, "peak_reserved_rel_err_max", mx);
		json_end_object(&j);
	} else {
		printf("\nsummary (%s addresses): %zu runs, %zu exact; peak reserved relative "
		       "error: median %.3f%%, p90 %.3f%%, max %.3f%%\n", mname, nnames, nexact,
		       100 * med, 100 * p90, 100 * mx);
	}
	rc = 0;
	goto cleanup;
oom:
	fprintf(stderr, "gpumemsim validate: out of memory\n");
cleanup:
	if (d)
		closedir(d);
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(rr);
	free(errs);
	return rc;
}
