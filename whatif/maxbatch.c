/*
 * maxbatch.c: the largest batch that fits, and why the next one fails
 * (maxbatch.h). Moved from cli/cmd_maxbatch.c, which parses the options
 * and prints the result.
 */
#include "maxbatch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/size.h"
#include "../base/tmpfile.h"
#include "../sim/engine.h"

struct mb_ctx {
	const struct bf_model *m;
	const struct alloc_policy *pol;
	const char *conf;
	uint64_t cap;                 /* effective: capacity less the margin */
	struct maxbatch_eval ev[MAXBATCH_MAX_EVALS];
	size_t nev;
	char *err;                    /* the caller's message buffer */
	size_t errlen;
};

/* Synthesise BATCH to a temporary file and replay it; keep the trace in
 * KEEP (caller unlinks) when KEEP is not NULL. 0 or -1 (message in C->err). */
static int mb_eval_batch(struct mb_ctx *c, uint64_t batch, struct sim_result *res,
			 char *keep, size_t keeplen)
{
	char path[4096], err[1536];
	if (tmp_file(path, sizeof path, "maxbatch") < 0) {
		snprintf(c->err, c->errlen, "cannot create a temporary trace in %s", tmp_dir());
		return -1;
	}
	memset(res, 0, sizeof *res);
	if (bf_synth(c->m, batch, path, err, sizeof err) < 0) {
		snprintf(c->err, c->errlen, "batch %" PRIu64 ": %s", batch, err);
		unlink(path);
		return -1;
	}
	struct sim_options o = {
		.trace_path = path, .policy = c->pol, .conf = c->conf, .capacity = c->cap,
		.addr_mode = DEVICE_ADDR_SYNTHETIC, .timeline_points = 8,
	};
	if (sim_run(&o, res, err, sizeof err) < 0) {
		snprintf(c->err, c->errlen, "batch %" PRIu64 ": %s", batch, err);
		unlink(path);
		return -1;
	}
	if (keep)
		snprintf(keep, keeplen, "%s", path);
	else
		unlink(path);
	if (c->nev < MAXBATCH_MAX_EVALS)
		c->ev[c->nev++] = (struct maxbatch_eval){batch, !res->oom, res->peak_reserved,
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

/* The search and the verdict; see maxbatch.h. */
int maxbatch_search(const struct bf_model *m, const struct maxbatch_options *opt,
		    struct maxbatch_result *res, char *err, size_t errlen)
{
	uint64_t maxb = opt->max_batch ? opt->max_batch : 65536;
	struct bf_trace *ft = NULL;
	struct sim_result fail, best;
	char keep[4096] = "";
	int ret = -1;

	memset(res, 0, sizeof *res);
	memset(&fail, 0, sizeof fail);
	memset(&best, 0, sizeof best);
	struct mb_ctx c = {.m = m, .pol = opt->policy, .conf = opt->conf, .err = err,
			   .errlen = errlen};
	c.cap = (uint64_t)((double)opt->capacity * (1 - opt->margin));
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
		if (bf_load(keep, &ft, err, errlen) < 0)
			goto out;
		if (bf_live_at(ft, fail.oom_line > 1 ? fail.oom_line - 1 : 1, &live) < 0) {
			snprintf(err, errlen, "%s: out of memory", keep);
			goto out;
		}
		uint64_t req = fail.oom_bytes, alloc = fail.oom_allocated;
		/* the allocator's own limit when below the usable memory (BFC's
		 * memory_limit, a memory fraction): what the request had to fit in */
		uint64_t lim = fail.oom_limit && fail.oom_limit < c.cap ? fail.oom_limit : c.cap;
		const char *lim_of = lim < c.cap ? "the allocator's limit of " : "";
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
		} else if (!strcmp(sim_oom_verdict(req, alloc, lim, fail.oom_largest_free,
						   fail.oom_cached_free), "capacity")) {
			verdict = lim < c.cap ? "limit" : "capacity";
			snprintf(detail, sizeof detail, "%s: %s allocated + %s requested > %s%s%s",
				 verdict, size_fmt(alloc, b1, sizeof b1), size_fmt(req, b2, sizeof b2),
				 lim_of, size_fmt(lim, b3, sizeof b3), lim < c.cap ? "" : " usable");
		} else {
			verdict = "fragmentation";
			uint64_t freeb = lim > fail.oom_reserved ? lim - fail.oom_reserved : 0;
			snprintf(detail, sizeof detail, "fragmentation: %s allocated + %s requested fits in "
				 "%s%s, but the free memory is split (%s reserved, cached free %s, largest "
				 "free block %s, unreserved %s%s)",
				 size_fmt(alloc, b1, sizeof b1), size_fmt(req, b2, sizeof b2), lim_of,
				 size_fmt(lim, b3, sizeof b3),
				 size_fmt(fail.oom_reserved, b4, sizeof b4),
				 fail.oom_cached_free >= 0 ? size_fmt((uint64_t)fail.oom_cached_free, b5, sizeof b5) : "?",
				 fail.oom_largest_free >= 0 ? size_fmt((uint64_t)fail.oom_largest_free, b6, sizeof b6) : "?",
				 size_fmt(freeb, b7, sizeof b7), lim < c.cap ? " under the limit" : "");
		}
	}
	res->usable = c.cap;
	res->max_batch = lo;
	res->peak_reserved = lo ? best.peak_reserved : 0;
	res->peak_allocated = lo ? best.peak_allocated : 0;
	res->workspace_retries = lo ? best.workspace_retries : 0;
	res->fails_at = hi;
	res->verdict = verdict;
	snprintf(res->detail, sizeof res->detail, "%s", detail);
	if (hi) {
		res->request = fail.oom_bytes;
		res->allocated = fail.oom_allocated;
		res->reserved = fail.oom_reserved;
		res->largest_free = fail.oom_largest_free;
		res->cached_free = fail.oom_cached_free;
	}
	res->live = live;
	memcpy(res->ev, c.ev, c.nev * sizeof *c.ev);
	res->nev = c.nev;
	ret = 0;
out:
	if (keep[0])
		unlink(keep);
	bf_free(ft);
	sim_result_free(&best);
	sim_result_free(&fail);
	return ret;
}
