/*
 * cmd_maxbatch.c: `gpumemsim maxbatch --from T1 T2 [T3] --policy P --capacity C`:
 * the largest batch size whose simulated peak fits on the device, and why
 * the next one fails: capacity, fragmentation (free but split), or memory
 * outside the framework's allocator (by library).
 *
 * Each candidate batch is synthesised (traces/batch_fit.h) into a temporary
 * trace and replayed with sim_run; the search gallops up from the smallest
 * capture and bisects, which assumes that a batch that does not fit is not
 * followed by one that does (explain batch is there for when it is not).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_whatif.h"
#include "../sim/engine.h"
#include "../base/json.h"

#define MAX_FROM 32
#define MAX_EVALS 128

struct mb_eval { uint64_t batch; int fits; uint64_t peak_reserved, peak_allocated; };

struct mb_ctx {
	const struct bf_model *m;
	const struct alloc_policy *pol;
	const char *conf;
	uint64_t cap;                 /* effective: capacity less the margin */
	struct mb_eval ev[MAX_EVALS];
	size_t nev;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpumemsim maxbatch --from T1 T2 [T3...] --policy P --capacity SIZE [options]\n\n"
		"The largest batch whose simulated peak fits in SIZE (less the margin), with the\n"
		"traces synthesised as `whatif batch` does, and why the next batch fails:\n"
		"capacity, fragmentation (enough free memory, but split), or memory allocated\n"
		"outside the framework's allocator (cuDNN, cuBLAS, ... by library).\n\n"
		"  --from T1 T2 ...     two or more captures at different batch sizes\n"
		"  --policy NAME        allocator policy; --conf STRING its knobs\n"
		"  --capacity SIZE      device memory, e.g. 80GiB\n"
		"  --margin M           keep M free: 5%% (default 0) or a fraction 0.05\n"
		"  --max N              search no further than batch N (default 65536)\n"
		"  --allow-misaligned   see whatif batch --help\n"
		"  --json               one JSON object on stdout\n\n"
		"Exit status: 0 ok, 1 failure (misaligned captures, bad trace, bad knob), 2 usage.\n");
}

/* Synthesise BATCH to a temporary file and replay it; keep the trace in
 * KEEP (caller unlinks) when KEEP is not NULL. 0 or -1 (message printed). */
static int mb_eval_batch(struct mb_ctx *c, uint64_t batch, struct sim_result *res,
			 char *keep, size_t keeplen)
{
	char path[4096], err[1536];
	const char *tmp = getenv("TMPDIR");
	snprintf(path, sizeof path, "%s/gpumemsim-maxbatch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0) {
		fprintf(stderr, "gpumemsim maxbatch: cannot create a temporary trace in %s\n",
			tmp && *tmp ? tmp : "/tmp");
		return -1;
	}
	close(fd);
	memset(res, 0, sizeof *res);
	if (bf_synth(c->m, batch, path, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim maxbatch: batch %" PRIu64 ": %s\n", batch, err);
		unlink(path);
		return -1;
	}
	struct sim_options o = {
		.trace_path = path, .policy = c->pol, .conf = c->conf, .capacity = c->cap,
		.addr_mode = DEVICE_ADDR_SYNTHETIC, .timeline_points = 8,
	};
	if (sim_run(&o, res, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim maxbatch: batch %" PRIu64 ": %s\n", batch, err);
		unlink(path);
		return -1;
	}
	if (keep)
		snprintf(keep, keeplen, "%s", path);
	else
		unlink(path);
	if (c->nev < MAX_EVALS)
		c->ev[c->nev++] = (struct mb_eval){batch, !res->oom, res->peak_reserved,
						   res->peak_allocated};
	return 0;
}

/* 1 fits, 0 does not, -1 error. */
static int mb_fits(struct mb_ctx *c, uint64_t batch)
{
	struct sim_result r;
	if (mb_eval_batch(c, batch, &r, NULL, 0) < 0)
		return -1;
	int fits = !r.oom;
	sim_result_free(&r);
	return fits;
}

static int parse_margin(const char *v, double *out)
{
	char *end;
	double x = strtod(v, &end);
	if (end == v)
		return -1;
	if (*end == '%') {
		x /= 100;
		end++;
	}
	if (*end || !(x >= 0 && x < 0.9))
		return -1;
	*out = x;
	return 0;
}

/* Here rather than in cmd_whatif.c: only maxbatch and explain replay. */
const struct alloc_policy *whatif_policy(const char *cmd, const char *name)
{
	const struct alloc_policy *pol = policy_find(name);
	if (!pol) {
		char names[1024];
		policy_list_names(names, sizeof names);
		fprintf(stderr, "gpumemsim %s: unknown policy '%s' (known: %s)\n", cmd, name, names);
	}
	return pol;
}

/* maxbatch: exit codes as cli.h says. */
int cmd_maxbatch(int argc, char **argv)
{
	char *from[MAX_FROM];
	size_t nfrom = 0;
	const char *policy = NULL, *conf = NULL;
	uint64_t capacity = 0, maxb = 65536;
	double margin = 0;
	int json = 0, allow = 0, ret = 1;
	struct bf_trace *t[MAX_FROM];
	struct bf_model *m = NULL;
	struct bf_trace *ft = NULL;
	struct sim_result fail, best;
	char err[1536], keep[4096] = "";

	memset(&fail, 0, sizeof fail);
	memset(&best, 0, sizeof best);
	for (int i = 1; i < argc; i++)
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		if (!strcmp(o, "--from")) {
			while (i + 1 < argc && argv[i + 1][0] != '-') {
				if (nfrom == MAX_FROM) {
					fprintf(stderr, "gpumemsim maxbatch: at most %d captures\n", MAX_FROM);
					return EXIT_USAGE;
				}
				from[nfrom++] = argv[++i];
			}
			continue;
		}
		if (!strcmp(o, "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(o, "--allow-misaligned")) {
			allow = 1;
			continue;
		}
		int takes = !strcmp(o, "--policy") || !strcmp(o, "--conf") || !strcmp(o, "--capacity") ||
			    !strcmp(o, "--margin") || !strcmp(o, "--max");
		if (!takes) {
			fprintf(stderr, "gpumemsim maxbatch: unknown option '%s'\n", o);
			return EXIT_USAGE;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "gpumemsim maxbatch: %s needs a value\n", o);
			return EXIT_USAGE;
		}
		const char *v = argv[++i];
		if (!strcmp(o, "--policy")) {
			policy = v;
		} else if (!strcmp(o, "--conf")) {
			conf = v;
		} else if (!strcmp(o, "--capacity")) {
			if (conf_size(v, &capacity) < 0 || !capacity) {
				fprintf(stderr, "gpumemsim maxbatch: --capacity '%s': expected a size such "
					"as 80GiB, 40GB or 512MiB\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--margin")) {
			if (parse_margin(v, &margin) < 0) {
				fprintf(stderr, "gpumemsim maxbatch: --margin '%s': expected a percentage "
					"such as 5%% or a fraction below 0.9\n", v);
				return EXIT_USAGE;
			}
		} else {
			char *end;
			unsigned long long b = strtoull(v, &end, 10);
			if (*end || !*v || v[0] == '-' || b == 0 || b > 100000000ull) {
				fprintf(stderr, "gpumemsim maxbatch: --max '%s': expected a positive "
					"integer\n", v);
				return EXIT_USAGE;
			}
			maxb = b;
		}
	}
	if (nfrom < 2 || !policy || !capacity) {
		fprintf(stderr, "gpumemsim maxbatch: %s\n",
			nfrom < 2 ? "--from needs two or more captures" :
			!policy ? "missing --policy" : "missing --capacity");
		usage(stderr);
		return EXIT_USAGE;
	}
	const struct alloc_policy *pol = whatif_policy("maxbatch", policy);
	if (!pol)
		return 1;
	if (whatif_load("maxbatch", from, nfrom, t) < 0)
		return 1;
	struct bf_options opt = {.allow_misaligned = allow};
	if (bf_fit(t, nfrom, &opt, &m, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim maxbatch: %s\n", err);
		goto out;
	}
	if (!json)
		whatif_print_report(bf_model_report(m), bf_model_report(m)->lo_batch, 0, stderr);
	struct mb_ctx c = {.m = m, .pol = pol, .conf = conf};
	c.cap = (uint64_t)((double)capacity * (1 - margin));
	/* gallop up from the smallest capture, then bisect */
	uint64_t lo = 0, hi = 0, b = bf_model_report(m)->lo_batch;
	if (b > maxb)
		b = maxb;
	for (;;) {
		int f = mb_fits(&c, b);
		if (f < 0)
			goto out;
		if (f) {
			lo = b;
			if (b >= maxb)
				break;
			b = b * 2 > maxb ? maxb : b * 2;
		} else {
			hi = b;
			break;
		}
	}
	if (hi) {
		uint64_t l = lo, h = hi; /* l fits (or 0), h fails */
		while (h - l > 1) {
			uint64_t mid = l + (h - l) / 2;
			int f = mb_fits(&c, mid);
			if (f < 0)
				goto out;
			if (f)
				l = mid;
			else
				h = mid;
		}
		lo = l;
		hi = h;
	}
	if (lo && mb_eval_batch(&c, lo, &best, NULL, 0) < 0)
		goto out;
	c.nev -= lo ? 1 : 0;
	/* why the next batch fails: replay it again and look at what is live */
	const char *verdict = "none";
	char detail[1024] = "";
	struct bf_live live;
	memset(&live, 0, sizeof live);
	if (hi) {
		if (mb_eval_batch(&c, hi, &fail, keep, sizeof keep) < 0)
			goto out;
		c.nev--;
		if (bf_load(keep, &ft, err, sizeof err) < 0 ||
		    bf_live_at(ft, fail.oom_line > 1 ? fail.oom_line - 1 : 1, &live) < 0) {
			fprintf(stderr, "gpumemsim maxbatch: %s\n", err);
			goto out;
		}
		uint64_t req = fail.oom_bytes, alloc = fail.oom_allocated;
		char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32];
		if (alloc + req > c.cap && live.foreign && alloc - live.foreign + req <= c.cap) {
			verdict = "foreign";
			int n = snprintf(detail, sizeof detail, "memory outside the framework's allocator: "
					 "%s live when %s was requested (",
					 size_fmt(live.foreign, b1, sizeof b1),
					 size_fmt(req, b2, sizeof b2));
			(void)b3;
			for (size_t i = 0; i < live.nlibs && n > 0 && (size_t)n < sizeof detail; i++)
				n += snprintf(detail + n, sizeof detail - (size_t)n, "%s%s %s",
					      i ? ", " : "", live.libs[i].name,
					      size_fmt(live.libs[i].bytes, b1, sizeof b1));
			if (n > 0 && (size_t)n < sizeof detail)
				snprintf(detail + n, sizeof detail - (size_t)n, ")");
		} else if (!strcmp(sim_oom_verdict(req, alloc, c.cap, fail.oom_largest_free,
						   fail.oom_cached_free), "capacity")) {
			verdict = "capacity";
			snprintf(detail, sizeof detail, "capacity: %s allocated + %s requested > %s usable",
				 size_fmt(alloc, b1, sizeof b1), size_fmt(req, b2, sizeof b2),
				 size_fmt(c.cap, b3, sizeof b3));
		} else {
			verdict = "fragmentation";
			uint64_t freeb = c.cap > fail.oom_reserved ? c.cap - fail.oom_reserved : 0;
			snprintf(detail, sizeof detail, "fragmentation: %s allocated + %s requested fits in "
				 "%s, but the free memory is split (%s reserved, cached free %s, largest "
				 "free block %s, unreserved %s)",
				 size_fmt(alloc, b1, sizeof b1), size_fmt(req, b2, sizeof b2),
				 size_fmt(c.cap, b3, sizeof b3),
				 size_fmt(fail.oom_reserved, b4, sizeof b4),
				 fail.oom_cached_free >= 0 ? size_fmt((uint64_t)fail.oom_cached_free, b5, sizeof b5) : "?",
				 fail.oom_largest_free >= 0 ? size_fmt((uint64_t)fail.oom_largest_free, b6, sizeof b6) : "?",
				 size_fmt(freeb, b7, sizeof b7));
		}
	}
	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "policy", policy);
		json_kv_string(&j, "conf", conf ? conf : "");
		json_kv_u64(&j, "capacity", capacity);
		json_kv_double(&j, "margin", margin);
		json_kv_u64(&j, "usable", c.cap);
		json_kv_u64(&j, "max_batch", lo);
		json_kv_u64(&j, "peak_reserved", lo ? best.peak_reserved : 0);
		json_kv_u64(&j, "peak_allocated", lo ? best.peak_allocated : 0);
		json_key(&j, "fails_at");
		if (hi)
			json_u64(&j, hi);
		else
			json_null(&j);
		json_kv_string(&j, "verdict", verdict);
		json_kv_string(&j, "detail", detail);
		if (hi) {
			json_kv_u64(&j, "request", fail.oom_bytes);
			json_kv_u64(&j, "allocated", fail.oom_allocated);
			json_kv_u64(&j, "reserved", fail.oom_reserved);
			json_kv_i64(&j, "largest_free_block", fail.oom_largest_free);
			json_kv_i64(&j, "cached_free_bytes", fail.oom_cached_free);
			json_key(&j, "foreign");
			json_begin_object(&j);
			for (size_t i = 0; i < live.nlibs; i++)
				json_kv_u64(&j, live.libs[i].name, live.libs[i].bytes);
			json_end_object(&j);
		}
		json_key(&j, "evaluated");
		json_begin_array(&j);
		for (size_t i = 0; i < c.nev; i++) {
			json_begin_object(&j);
			json_kv_u64(&j, "batch", c.ev[i].batch);
			json_kv_bool(&j, "fits", c.ev[i].fits);
			json_kv_u64(&j, "peak_reserved", c.ev[i].peak_reserved);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
		fputc('\n', stdout);
	} else {
		char b1[32], b2[32], b3[32];
		printf("policy         %s%s%s\n", policy, conf ? " conf " : "", conf ? conf : "");
		printf("usable         %s (capacity %s, margin %.1f%%)\n", size_fmt(c.cap, b1, sizeof b1),
		       size_fmt(capacity, b2, sizeof b2), 100 * margin);
		if (lo)
			printf("largest batch  %" PRIu64 " (peak reserved %s, allocated %s)\n", lo,
			       size_fmt(best.peak_reserved, b1, sizeof b1),
			       size_fmt(best.peak_allocated, b3, sizeof b3));
		else
			printf("largest batch  none: batch %" PRIu64 " does not fit\n", hi);
		if (hi)
			printf("batch %-8" PRIu64 " fails at request of %s: %s\n", hi,
			       size_fmt(fail.oom_bytes, b1, sizeof b1), detail);
		else
			printf("no failure up to --max %" PRIu64 "\n", maxb);
		printf("searched       %zu batch sizes (the search assumes that peak grows with batch)\n",
		       c.nev);
	}
	ret = 0;
out:
	if (keep[0])
		unlink(keep);
	bf_free(ft);
	sim_result_free(&best);
	sim_result_free(&fail);
	bf_model_free(m);
	for (size_t i = 0; i < nfrom; i++)
		bf_free(t[i]);
	return ret;
}
