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
#include "engine.h"
#include "json.h"
#include "../traces/import_torch.h"

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
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 256;
		struct dev_op *no = realloc(l->ops, nc * sizeof *no);
		if (!no) {
			l->oom = 1;
			return;
		}
		l->ops = no;
		l->cap = nc;
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

static void validate_usage(FILE *f)
{
	fprintf(f, "usage: gpumemsim validate torch-truth DIR [--addresses recorded|synthetic]\n"
		   "                                       [--json] [--only SUBSTR]\n\n"
		   "Replays every NAME.trace.gz in DIR (with NAME.json: conf, fraction,\n"
		   "total_memory, stats) through the pytorch policy and compares segment\n"
		   "sequences and peaks with the real allocator's. Exit 0 when it ran.\n");
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
	if (strcmp(kind, "torch-truth")) {
		fprintf(stderr, "gpumemsim validate: unknown ground truth '%s' (known: torch-truth)\n",
			kind);
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
		if (nnames == capnames) {
			size_t nc = capnames ? capnames * 2 : 64;
			char **nn = realloc(names, nc * sizeof *nn);
			if (!nn)
				goto oom;
			names = nn;
			capnames = nc;
		}
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
