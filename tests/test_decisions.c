/*
 * test_decisions.c: the policies' decisions hook (policy.h) and its log
 * (sim/decisions.h): what bfc and pytorch report on small traces whose
 * regions and segments are known, that the log changes nothing in the
 * replay, that policies without the hook (or of interface version 1) run
 * as before, and the held ranges after releases that cut them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../policies/policy.h"
#include "../sim/decisions.h"
#include "../sim/engine.h"
#include "../traces/trace.h"
#include "helpers.h"

#define MiB (1024ull * 1024)

extern const struct alloc_policy policy_bfc, policy_pytorch, policy_optimal, policy_caching;

static void empty_cache(struct trace_writer *w, uint64_t t)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_CONTROL;
	r.start = r.end = t;
	r.u.control.kind = TCTL_EMPTY_CACHE;
	cr_assert_eq(trace_writer_record(w, &r), 0);
}

/* 1, 1.5 and 3 MiB live at once, then freed; EMPTY: an empty_cache, then
 * 150 MiB after a freed 100 MiB. */
static void write_trace(const char *path, int empty)
{
	char err[256];
	struct trace_writer *w = th_batch_writer(path, 8, "m");
	th_mem(w, TREC_ALLOC, 1000, 0x100000, 1 * MiB);
	th_mem(w, TREC_ALLOC, 1100, 0x200000, 3 * MiB / 2);
	th_mem(w, TREC_ALLOC, 1200, 0x300000, 3 * MiB);
	th_mem(w, TREC_FREE, 1300, 0x100000, 1 * MiB);
	th_mem(w, TREC_FREE, 1400, 0x200000, 3 * MiB / 2);
	th_mem(w, TREC_FREE, 1500, 0x300000, 3 * MiB);
	if (empty) {
		th_mem(w, TREC_ALLOC, 2000, 0x400000, 100 * MiB);
		th_mem(w, TREC_FREE, 2100, 0x400000, 100 * MiB);
		th_mem(w, TREC_ALLOC, 2200, 0x500000, 150 * MiB);
		th_mem(w, TREC_FREE, 2300, 0x500000, 150 * MiB);
		empty_cache(w, 3000);
	}
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

/* Replay PATH under P (CONF) with a log into L; the result into R. */
static void replay(const char *path, const struct alloc_policy *p, const char *conf,
		   struct sim_decisions *l, struct sim_result *r)
{
	char err[512];
	struct sim_options o = {.trace_path = path, .policy = p, .conf = conf,
				.addr_mode = DEVICE_ADDR_SYNTHETIC, .decisions = l};
	cr_assert_eq(sim_run(&o, r, err, sizeof err), 0, "%s", err);
}

Test(decisions, bfc_regions_and_rules)
{
	char path[128];
	struct sim_decisions l;
	struct sim_result r;
	th_tmpname(path, sizeof path, "dec");
	write_trace(path, 0);
	sim_decisions_init(&l);
	replay(path, &policy_bfc, "allow_growth:true", &l, &r);
	cr_assert_eq(l.n, 4, "%zu", l.n);
	cr_assert_eq(l.v[0].d.kind, POLICY_DEC_RULE);
	cr_assert_str_eq(l.v[0].d.what, "limit");
	static const uint64_t sizes[3] = {2 * MiB, 4 * MiB, 8 * MiB};
	static const char *const why[3] = {"the first region's size", "twice the last region",
					   "twice the last region"};
	for (int i = 0; i < 3; i++) {
		const struct sim_decision *d = &l.v[i + 1];
		cr_assert_eq(d->d.kind, POLICY_DEC_GROW);
		cr_assert_str_eq(d->d.what, "region");
		cr_assert_eq(d->d.bytes, sizes[i]);
		cr_assert_str_eq(d->d.why, why[i]);
		cr_assert_eq(d->d.count, (uint64_t)i + 1);
		/* stamped with the line of the 'a' record that forced it */
		cr_assert_eq(d->line, l.v[1].line + (uint64_t)i);
	}
	/* the 3 MiB request met 1 + 2.5 MiB free in two regions */
	cr_assert_eq(l.v[3].d.request, 3 * MiB);
	cr_assert_eq(l.v[3].d.free_bytes, 7 * MiB / 2);
	cr_assert_eq(l.v[3].d.largest_free, 5 * MiB / 2);
	cr_assert_eq(l.v[3].d.prev_bytes, 8 * MiB); /* the rule's next size: twice 4 MiB */
	cr_assert_eq(l.v[3].d.held, 14 * MiB);
	cr_assert_gt(l.v[1].line, 0);
	struct sim_holding *h;
	size_t nh;
	cr_assert_eq(sim_decisions_holdings(&l, l.n, &h, &nh), 0);
	cr_assert_eq(nh, 3);
	cr_assert_eq(h[2].bytes, 8 * MiB);
	cr_assert_eq(h[2].dec, 3);
	free(h);
	/* the log changes nothing */
	struct sim_result r2;
	replay(path, &policy_bfc, "allow_growth:true", NULL, &r2);
	cr_assert_eq(r.peak_reserved, r2.peak_reserved);
	cr_assert_eq(r.peak_allocated, r2.peak_allocated);
	cr_assert_eq(r.device_allocs, r2.device_allocs);
	sim_result_free(&r);
	sim_result_free(&r2);
	sim_decisions_free(&l);
	unlink(path);
}

Test(decisions, pytorch_segments_and_empty_cache)
{
	char path[128];
	struct sim_decisions l;
	struct sim_result r;
	th_tmpname(path, sizeof path, "dec");
	write_trace(path, 1);
	sim_decisions_init(&l);
	replay(path, &policy_pytorch, NULL, &l, &r);
	/* small pool: one 2 MiB segment (1 MiB); large: a 20 MiB one (1.5, 3 MiB),
	 * 100 MiB, then 150 MiB (the cached 100 and 20 MiB are short); then
	 * empty_cache gives back all four */
	size_t grows = 0, rels = 0;
	const struct sim_decision *g150 = NULL;
	for (size_t i = 0; i < l.n; i++) {
		const struct sim_decision *d = &l.v[i];
		if (d->d.kind == POLICY_DEC_GROW) {
			grows++;
			cr_assert_str_eq(d->d.what, "segment");
			if (d->d.bytes == 150 * MiB)
				g150 = d;
		} else if (d->d.kind == POLICY_DEC_RELEASE) {
			rels++;
			cr_assert_str_eq(d->d.why, "empty_cache");
		}
	}
	cr_assert_eq(grows, 4, "%zu", grows);
	cr_assert_eq(rels, 4, "%zu", rels);
	cr_assert_not_null(g150);
	cr_assert_str_eq(g150->d.why, "no cached block large enough");
	cr_assert_eq(g150->d.request, 150 * MiB);
	cr_assert_eq(g150->d.free_bytes, 120 * MiB); /* and the 20 MiB segment */
	cr_assert_eq(g150->d.largest_free, 100 * MiB);
	cr_assert_eq(g150->d.free_blocks, 2);
	struct sim_holding *h;
	size_t nh;
	cr_assert_eq(sim_decisions_holdings(&l, l.n, &h, &nh), 0);
	cr_assert_eq(nh, 0);
	free(h);
	sim_result_free(&r);
	/* caching passes its inner policy's decisions on, its rule named */
	sim_decisions_reset(&l);
	replay(path, &policy_caching, "inner:pytorch,cache_limit:1MiB", &l, &r);
	int by_rule = 0;
	for (size_t i = 0; i < l.n; i++)
		by_rule |= l.v[i].d.kind == POLICY_DEC_RELEASE &&
			   !strcmp(l.v[i].d.why, "cache_limit rule: empty_cache after a free");
	cr_assert(by_rule);
	sim_result_free(&r);
	sim_decisions_free(&l);
	unlink(path);
}

/* A policy without the hook, or of interface version 1, runs as before
 * and logs nothing. */
Test(decisions, optional_hook)
{
	char path[128];
	struct sim_decisions l;
	struct sim_result r, r2;
	th_tmpname(path, sizeof path, "dec");
	write_trace(path, 0);
	sim_decisions_init(&l);
	replay(path, &policy_optimal, NULL, &l, &r);
	cr_assert_eq(l.n, 0);
	sim_result_free(&r);
	struct alloc_policy v1 = policy_bfc;
	v1.iversion = 1;
	replay(path, &v1, "allow_growth:true", &l, &r);
	cr_assert_eq(l.n, 0);
	replay(path, &policy_bfc, "allow_growth:true", NULL, &r2);
	cr_assert_eq(r.peak_reserved, r2.peak_reserved);
	sim_result_free(&r);
	sim_result_free(&r2);
	v1.iversion = POLICY_IFACE_VERSION + 1;
	char err[256];
	struct sim_options o = {.trace_path = path, .policy = &v1};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "interface version") != NULL, "%s", err);
	sim_decisions_free(&l);
	unlink(path);
}

/* Ranges held after releases that cut them (pages unmapped inside a
 * mapping, a trim at the top). */
Test(decisions, holdings_cut_by_releases)
{
	struct sim_decisions l;
	sim_decisions_init(&l);
	struct policy_decision d = {.kind = POLICY_DEC_GROW, .what = "map", .addr = 0, .bytes = 10};
	sim_decisions_sink(&l, &d);
	d.addr = 20;
	d.bytes = 10;
	sim_decisions_sink(&l, &d);
	d.kind = POLICY_DEC_RELEASE;
	d.addr = 4;     /* a hole in the first */
	d.bytes = 2;
	sim_decisions_sink(&l, &d);
	d.addr = 25;    /* the top of the second */
	d.bytes = 5;
	sim_decisions_sink(&l, &d);
	struct sim_holding *h;
	size_t nh;
	cr_assert_eq(sim_decisions_holdings(&l, l.n, &h, &nh), 0);
	cr_assert_eq(nh, 3);
	cr_assert(h[0].addr == 0 && h[0].bytes == 4 && h[0].dec == 0);
	cr_assert(h[1].addr == 6 && h[1].bytes == 4 && h[1].dec == 0);
	cr_assert(h[2].addr == 20 && h[2].bytes == 5 && h[2].dec == 1);
	free(h);
	/* after the first two decisions only */
	cr_assert_eq(sim_decisions_holdings(&l, 2, &h, &nh), 0);
	cr_assert_eq(nh, 2);
	free(h);
	sim_decisions_free(&l);
}
