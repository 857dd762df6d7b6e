/*
 * test_capture.c: the parts of CUPTI capture that need no CUDA: the
 * converter (capture/convert.c: ordering, allocation ids, kernel-to-buffer
 * links, string interning, through the real trace writer and reader), the
 * `gpumemsim capture` launcher (environment, arguments, exit status), and
 * the probe trace captured on an H200 (capture/tests/data), checked against
 * what the probe says it did.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../capture/convert.h"
#include "../traces/trace.h"
#include "helpers.h"

/* The GPU test's checker, reused on the probe trace captured on the H200. */
#define GPU_PROBE_CHECK_NO_MAIN
#include "../capture/tests/gpu_probe_check.c"

/* ------------------------------------------------------------- a sink in memory */

struct mem_sink {
	struct trace_rec recs[64];
	uint64_t links[64][TRACE_MAX_LINKS]; /* recs[i]'s kernel links (the converter's are reused) */
	int n;
	char *strs[64];
	uint32_t nstrs;
};

static uint32_t mem_intern(void *ctx, const char *s)
{
	struct mem_sink *m = ctx;
	for (uint32_t i = 0; i < m->nstrs; i++)
		if (!strcmp(m->strs[i], s))
			return i;
	cr_assert_lt(m->nstrs, 64);
	m->strs[m->nstrs] = strdup(s);
	return m->nstrs++;
}

static int mem_record(void *ctx, const struct trace_rec *rec)
{
	struct mem_sink *m = ctx;
	cr_assert_lt(m->n, 64);
	m->recs[m->n] = *rec;
	if (rec->type == TREC_KERNEL) {
		cr_assert_leq(rec->u.kernel.nlinks, TRACE_MAX_LINKS);
		if (rec->u.kernel.nlinks)
			memcpy(m->links[m->n], rec->u.kernel.links,
			       rec->u.kernel.nlinks * sizeof(uint64_t));
		m->recs[m->n].u.kernel.links = m->links[m->n];
	}
	m->n++;
	return 0;
}

static void mem_free(struct mem_sink *m)
{
	for (uint32_t i = 0; i < m->nstrs; i++)
		free(m->strs[i]);
}

static struct cap_conv *new_conv(struct mem_sink *m)
{
	struct cap_sink s = {m, mem_intern, mem_record};
	memset(m, 0, sizeof(*m));
	struct cap_conv *c = cap_conv_new(&s);
	cr_assert_not_null(c);
	return c;
}

static void push_alloc(struct cap_conv *c, uint64_t t, uint64_t addr, uint64_t bytes,
		       uint64_t corr, const char *src)
{
	struct cap_rec r;
	memset(&r, 0, sizeof(r));
	r.rec.type = TREC_ALLOC;
	r.rec.start = r.rec.end = t;
	r.rec.u.mem.addr = addr;
	r.rec.u.mem.bytes = bytes;
	r.rec.u.mem.stream = TRACE_NO_STREAM;
	r.rec.u.mem.kind = TMEM_DEVICE;
	r.rec.u.mem.corr = corr;
	r.name = src;
	cr_assert_eq(cap_conv_push(c, &r), 0);
}

static void push_free(struct cap_conv *c, uint64_t t, uint64_t addr)
{
	struct cap_rec r;
	memset(&r, 0, sizeof(r));
	r.rec.type = TREC_FREE;
	r.rec.start = r.rec.end = t;
	r.rec.u.mem.addr = addr;
	r.rec.u.mem.stream = TRACE_NO_STREAM;
	r.rec.u.mem.kind = TMEM_DEVICE;
	cr_assert_eq(cap_conv_push(c, &r), 0);
}

static void push_kernel(struct cap_conv *c, uint64_t start, uint64_t end, uint64_t corr,
			const char *name)
{
	struct cap_rec r;
	memset(&r, 0, sizeof(r));
	r.rec.type = TREC_KERNEL;
	r.rec.start = start;
	r.rec.end = end;
	r.rec.u.kernel.stream = 7;
	r.rec.u.kernel.grid[0] = r.rec.u.kernel.block[0] = 1;
	r.rec.u.kernel.grid[1] = r.rec.u.kernel.block[1] = 1;
	r.rec.u.kernel.grid[2] = r.rec.u.kernel.block[2] = 1;
	r.rec.u.kernel.corr = corr;
	r.rec.u.kernel.nlinks = 3; /* ignored: links come from cap_conv_link */
	r.name = name;
	cr_assert_eq(cap_conv_push(c, &r), 0);
}

/* ------------------------------------------------------------- converter */

Test(capture_convert, orders_by_start_then_arrival)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	push_kernel(c, 300, 310, 1, "k3");
	push_kernel(c, 100, 400, 2, "k1");
	push_kernel(c, 200, 210, 3, "k2a");
	push_kernel(c, 200, 205, 4, "k2b");
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 4);
	const char *want[] = {"k1", "k2a", "k2b", "k3"};
	for (int i = 0; i < 4; i++)
		cr_assert_str_eq(m.strs[m.recs[i].u.kernel.name], want[i], "record %d", i);
	cr_assert_eq(m.recs[0].end, 400);
	cap_conv_free(c);
	mem_free(&m);
}

Test(capture_convert, ids_follow_emission_and_links_resolve)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	/* B arrives after A but happened first: B must get id 0. */
	push_alloc(c, 100, 0xA000, 4096, 10, "libfoo.so");
	push_alloc(c, 50, 0xB000, 8192, 11, NULL);
	struct cap_link links[] = {{10, 0xA000}, {11, 0xB000}, {10, 0xA000}};
	cr_assert_eq(cap_conv_link(c, 20, links, 3), 0);
	push_kernel(c, 200, 250, 20, "add");
	push_kernel(c, 300, 350, 21, "spin");
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 4);
	cr_assert_eq(m.recs[0].u.mem.addr, 0xB000);
	cr_assert_eq(m.recs[0].u.mem.id, 0);
	cr_assert_eq(m.recs[0].u.mem.source, TRACE_NO_STRING);
	cr_assert_eq(m.recs[1].u.mem.id, 1);
	cr_assert_str_eq(m.strs[m.recs[1].u.mem.source], "libfoo.so");
	const struct trace_kernel *k = &m.recs[2].u.kernel;
	cr_assert_eq(k->nlinks, 2, "duplicates collapse");
	cr_assert_eq(k->links[0], 0);
	cr_assert_eq(k->links[1], 1);
	cr_assert_eq(m.recs[3].u.kernel.nlinks, 0, "no links recorded for corr 21");
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.allocs, 2);
	cr_assert_eq(st.links, 2);
	cr_assert_eq(st.pending, 0);
	cap_conv_free(c);
	mem_free(&m);
}

Test(capture_convert, links_fall_back_to_address_and_survive_async_free)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	push_alloc(c, 10, 0x1000, 256, 0, NULL);     /* no correlation id */
	push_alloc(c, 11, 0x2000, 256, 5, NULL);
	push_free(c, 20, 0x2000);                     /* host-side free stamp... */
	struct cap_link l1[] = {{0, 0x1000}, {5, 0x2000}, {99, 0x9000}};
	cr_assert_eq(cap_conv_link(c, 40, l1, 3), 0);
	push_kernel(c, 30, 35, 40, "late_kernel");    /* ...before the kernel ran */
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 4);
	const struct trace_kernel *k = &m.recs[3].u.kernel;
	cr_assert_eq(k->nlinks, 2);
	cr_assert_eq(k->links[0], 0);
	cr_assert_eq(k->links[1], 1);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.links_unresolved, 1, "0x9000 was never allocated");
	cap_conv_free(c);
	mem_free(&m);
}

Test(capture_convert, address_reuse_gets_the_new_id)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	push_alloc(c, 10, 0x1000, 256, 1, NULL);
	push_free(c, 20, 0x1000);
	push_alloc(c, 30, 0x1000, 256, 2, NULL);
	struct cap_link l[] = {{2, 0x1000}};
	cr_assert_eq(cap_conv_link(c, 7, l, 1), 0);
	push_kernel(c, 40, 45, 7, "k");
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.recs[2].u.mem.id, 1);
	cr_assert_eq(m.recs[3].u.kernel.nlinks, 1);
	cr_assert_eq(m.recs[3].u.kernel.links[0], 1);
	cap_conv_free(c);
	mem_free(&m);
}

Test(capture_convert, watermark_and_late_records)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	push_kernel(c, 150, 160, 1, "b");
	push_kernel(c, 90, 95, 2, "a");
	cr_assert_eq(cap_conv_emit_until(c, 100), 0);
	cr_assert_eq(m.n, 1);
	cr_assert_eq(m.recs[0].start, 90);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.pending, 1);
	cr_assert_eq(cap_conv_emit_until(c, 200), 0);
	cr_assert_eq(m.n, 2);
	/* Arrives after 150 went out: written at 150 keeping its length. */
	push_kernel(c, 120, 130, 3, "late");
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 3);
	cr_assert_eq(m.recs[2].start, 150);
	cr_assert_eq(m.recs[2].end, 160);
	cap_conv_stats(c, &st);
	cr_assert_eq(st.late, 1);
	cr_assert_eq(st.emitted, 3);
	cap_conv_free(c);
	mem_free(&m);
}

/* The watermark with open ranges starting at STARTS (0 ends the list). */
static uint64_t wm_with(const struct cap_conv *c, uint64_t now, uint64_t lag, uint64_t hold,
			uint64_t max_pending, const uint64_t *starts)
{
	struct cap_open_range open[4];
	size_t n = 0;
	for (; starts[n] && n < 4; n++)
		open[n] = (struct cap_open_range){.id = (uint32_t)n + 1, .depth = (uint32_t)n,
						  .start = starts[n]};
	return cap_conv_watermark(c, now, lag, open, n, hold, max_pending);
}

/* An NVTX range still open holds the window back to its start, so the
 * range (handed over only at its end) is written in place: a step 0 of
 * seconds of autotuning was written with both ends late. Not for a range
 * older than the hold, nor one already passed, nor with too many records
 * waiting; a range nested in one that no longer holds still does. */
Test(capture_convert, open_range_holds_the_watermark)
{
	const uint64_t s = 1000000000ull;
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	cr_assert_eq(wm_with(c, 10 * s, 2 * s, 32 * s, 100, (uint64_t[]){0}), 8 * s);
	cr_assert_eq(wm_with(c, 10 * s, 2 * s, 32 * s, 100, (uint64_t[]){5 * s, 0}), 5 * s);
	/* a range opened inside the window does not move it */
	cr_assert_eq(wm_with(c, 10 * s, 2 * s, 32 * s, 100, (uint64_t[]){9 * s, 0}), 8 * s);
	/* too old: the window as without it */
	cr_assert_eq(wm_with(c, 40 * s, 2 * s, 32 * s, 100, (uint64_t[]){5 * s, 0}), 38 * s);
	/* a step inside a run-long range: the step holds, the run does not */
	cr_assert_eq(wm_with(c, 40 * s, 2 * s, 32 * s, 100, (uint64_t[]){1 * s, 30 * s, 0}), 30 * s);
	cr_assert_eq(wm_with(c, 20 * s, 2 * s, 32 * s, 100, (uint64_t[]){1 * s, 10 * s, 0}), 1 * s);
	cr_assert_eq(wm_with(c, s, 2 * s, 32 * s, 100, (uint64_t[]){0}), 0);

	/* held, a range that ends later keeps its place */
	push_kernel(c, 150, 160, 1, "in the range");
	cr_assert_eq(cap_conv_emit_until(c, wm_with(c, 400, 100, 1000, 100, (uint64_t[]){100, 0})), 0);
	cr_assert_eq(m.n, 0, "held back to the range's start");
	/* too much waiting: the window as without it */
	cr_assert_eq(wm_with(c, 400, 100, 1000, 1, (uint64_t[]){100, 0}), 300);
	struct cap_rec r;
	memset(&r, 0, sizeof r);
	r.rec.type = TREC_RANGE;
	r.rec.start = 100;
	r.rec.end = 500;
	r.name = "step 0";
	cr_assert_eq(cap_conv_push(c, &r), 0);
	cr_assert_eq(cap_conv_emit_until(c, 200), 0);
	cr_assert_eq(m.n, 2);
	cr_assert_eq(m.recs[0].type, TREC_RANGE);
	cr_assert_eq(m.recs[0].start, 100, "the range keeps its start");
	/* a range open since before the last record written is late anyway:
	 * it holds nothing back */
	push_kernel(c, 170, 180, 2, "after");
	cr_assert_eq(wm_with(c, 400, 100, 1000, 100, (uint64_t[]){120, 0}), 300);
	cr_assert_eq(wm_with(c, 400, 100, 1000, 100, (uint64_t[]){150, 0}), 150,
		     "not passed: it starts with the last record written");
	cr_assert_eq(cap_conv_emit_all(c), 0);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.late, 0);
	cap_conv_free(c);
	mem_free(&m);
}

static void push_static(struct cap_conv *c, uint64_t t, uint32_t ctx, uint64_t addr, uint64_t bytes)
{
	struct cap_rec r;
	memset(&r, 0, sizeof(r));
	r.rec.type = TREC_ALLOC;
	r.rec.start = r.rec.end = t;
	r.rec.u.mem.addr = addr;
	r.rec.u.mem.bytes = bytes;
	r.rec.u.mem.stream = TRACE_NO_STREAM;
	r.rec.u.mem.kind = TMEM_DEVICE_STATIC;
	r.ctx = ctx;
	cr_assert_eq(cap_conv_push(c, &r), 0);
}

/* Module globals are freed when their module unloads: XLA's autotuner
 * loads and unloads modules whose globals land at the same address. */
Test(capture_convert, module_unload_frees_its_statics)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	/* module 5 on context 1: two globals allocated while it loads */
	push_static(c, 100, 1, 0x5000, 64);
	push_static(c, 101, 1, 0x4000, 32);
	cr_assert_eq(cap_conv_module(c, CAP_MODULE_LOADED, 1, 5, 103), 0);
	/* module 6 on context 1 loads much later; its global is not module 5's */
	push_static(c, 500, 1, 0x9000, 16);
	cr_assert_eq(cap_conv_module(c, CAP_MODULE_LOADED, 1, 6, 502), 0);
	cr_assert_eq(cap_conv_module(c, CAP_MODULE_UNLOADING, 1, 5, 800), 0);
	/* module 7 reloads the same code: its global at module 5's address */
	push_static(c, 900, 1, 0x5000, 64);
	cr_assert_eq(cap_conv_module(c, CAP_MODULE_LOADED, 1, 7, 901), 0);
	cr_assert_eq(cap_conv_emit_all(c), 0);
	/* a a a f(0x4000) f(0x5000) a: address order at the unload */
	cr_assert_eq(m.n, 6);
	cr_assert_eq(m.recs[3].type, TREC_FREE);
	cr_assert_eq(m.recs[3].start, 800);
	cr_assert_eq(m.recs[3].u.mem.addr, 0x4000);
	cr_assert_eq(m.recs[3].u.mem.kind, TMEM_DEVICE_STATIC);
	cr_assert_eq(m.recs[3].u.mem.bytes, 32);
	cr_assert_eq(m.recs[4].u.mem.addr, 0x5000);
	cr_assert_eq(m.recs[5].type, TREC_ALLOC);
	cr_assert_eq(m.recs[5].u.mem.id, 3);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.module_frees, 2);
	cr_assert_eq(st.static_replaced, 0);
	cr_assert_eq(st.modules_loaded, 3);
	cr_assert_eq(st.modules_unloaded, 1);
	cr_assert_eq(st.emitted, 6);
	cap_conv_free(c);
	mem_free(&m);
}

/* Without an unload event (or a static matched to another module), a
 * static registered again at a live address closes the earlier one. */
Test(capture_convert, static_reregistered_closes_the_earlier)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	push_static(c, 100, 1, 0x5000, 64);
	push_static(c, 200, 1, 0x5000, 64);
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 3);
	cr_assert_eq(m.recs[1].type, TREC_FREE);
	cr_assert_eq(m.recs[1].start, 200);
	cr_assert_eq(m.recs[2].type, TREC_ALLOC);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.static_replaced, 1);
	cr_assert_eq(st.live_replaced, 0);
	cap_conv_free(c);
	mem_free(&m);
}

/* An allocation delivered after its own free went out (past the reorder
 * window): the free waits and is written right after the allocation. */
Test(capture_convert, free_before_its_late_allocation_waits_for_it)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	push_kernel(c, 100, 110, 1, "k");
	push_free(c, 150, 0xa000);
	cr_assert_eq(cap_conv_emit_until(c, 200), 0);
	cr_assert_eq(m.n, 1);   /* the free waits */
	push_alloc(c, 120, 0xa000, 4096, 9, NULL);   /* late: it was allocated at 120 */
	push_kernel(c, 300, 310, 2, "k");
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 4);
	cr_assert_eq(m.recs[1].type, TREC_ALLOC);
	cr_assert_eq(m.recs[1].start, 150);   /* clamped to the last written start */
	cr_assert_eq(m.recs[2].type, TREC_FREE);
	cr_assert_eq(m.recs[2].u.mem.addr, 0xa000);
	cr_assert_eq(m.recs[2].u.mem.bytes, 4096);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.frees_reordered, 1);
	cr_assert_eq(st.frees_dropped, 0);
	cap_conv_free(c);
	mem_free(&m);
}

/* A free delivered after the address was allocated again: the earlier
 * allocation was closed when the new one came; the late free is dropped,
 * and a free no allocation ever claimed is dropped at the end. */
Test(capture_convert, late_free_of_a_closed_allocation_is_dropped)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	push_alloc(c, 100, 0xa000, 4096, 1, NULL);
	push_alloc(c, 300, 0xa000, 8192, 2, NULL);
	cr_assert_eq(cap_conv_emit_until(c, 400), 0);
	cr_assert_eq(m.n, 3);   /* a, f (closing), a */
	cr_assert_eq(m.recs[1].type, TREC_FREE);
	push_free(c, 200, 0xa000);   /* the first allocation's own free, late */
	push_free(c, 250, 0xb000);   /* of memory never seen allocated */
	push_free(c, 500, 0xa000);   /* the second allocation's free */
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 4);
	cr_assert_eq(m.recs[3].type, TREC_FREE);
	cr_assert_eq(m.recs[3].start, 500);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.live_replaced, 1);
	cr_assert_eq(st.frees_dropped, 2);
	cap_conv_free(c);
	mem_free(&m);
}

/* CUPTI reports a CUDA graph's memory pool without an address: each gets
 * its own placeholder, flagged as pool memory, so two pools are both live. */
Test(capture_convert, graph_pools_without_address_get_their_own)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	push_alloc(c, 100, 0, 32u << 20, 5, NULL);
	push_alloc(c, 200, 0, 32u << 20, 6, NULL);
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 2);
	cr_assert_eq(m.recs[0].type, TREC_ALLOC);
	cr_assert_eq(m.recs[1].type, TREC_ALLOC);
	cr_assert_neq(m.recs[0].u.mem.addr, 0);
	cr_assert_neq(m.recs[0].u.mem.addr, m.recs[1].u.mem.addr);
	cr_assert(m.recs[1].u.mem.flags & TMEM_F_POOL);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.graph_pools, 2);
	cr_assert_eq(st.live_replaced, 0);
	cap_conv_free(c);
	mem_free(&m);
}

Test(capture_convert, strings_interned_once)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	struct cap_rec r;
	memset(&r, 0, sizeof(r));
	r.rec.type = TREC_API;
	r.rec.start = 1;
	r.rec.end = 5;
	r.name = "cudaMalloc";
	cr_assert_eq(cap_conv_push(c, &r), 0);
	r.rec.start = 6;
	r.rec.end = 9;
	cr_assert_eq(cap_conv_push(c, &r), 0);
	memset(&r, 0, sizeof(r));
	r.rec.type = TREC_RANGE;
	r.rec.start = 2;
	r.rec.end = 8;
	r.rec.u.range.depth = 1;
	r.name = "step";
	cr_assert_eq(cap_conv_push(c, &r), 0);
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(m.n, 3);
	cr_assert_eq(m.nstrs, 2);
	cr_assert_eq(m.recs[0].u.api.name, m.recs[2].u.api.name);
	cr_assert_str_eq(m.strs[m.recs[1].u.range.name], "step");
	cr_assert_eq(m.recs[1].u.range.depth, 1);
	cap_conv_free(c);
	mem_free(&m);
}

Test(capture_convert, unclaimed_records_freed)
{
	struct mem_sink m;
	struct cap_conv *c = new_conv(&m);
	struct cap_link l[] = {{1, 0x10}};
	push_kernel(c, 1, 2, 3, "never_emitted");
	cr_assert_eq(cap_conv_link(c, 99, l, 1), 0);
	struct cap_stats st;
	cap_conv_stats(c, &st);
	cr_assert_eq(st.pending, 1);
	cap_conv_free(c);  /* ASan build: no leak */
	cr_assert_eq(m.n, 0);
}

/* ------------------------------------------------------------- through the writer */

struct wr_ctx { struct trace_writer *w; };

static uint32_t wr_intern(void *ctx, const char *s)
{
	return trace_writer_intern(((struct wr_ctx *)ctx)->w, s);
}

static int wr_record(void *ctx, const struct trace_rec *rec)
{
	return trace_writer_record(((struct wr_ctx *)ctx)->w, rec);
}

Test(capture_convert, round_trip_through_writer_and_reader)
{
	char path[] = "/tmp/test_capture_XXXXXX.trace.gz";
	int fd = mkstemps(path, 9);
	cr_assert_geq(fd, 0);
	close(fd);
	char err[256];
	struct wr_ctx ctx = {trace_writer_open(path, TRACE_W_STREAM, err, sizeof(err))};
	cr_assert_not_null(ctx.w, "%s", err);
	struct trace_header h;
	memset(&h, 0, sizeof(h));
	h.version = TRACE_FORMAT_VERSION;
	h.producer = "test";
	h.gpu = "NVIDIA H200";
	cr_assert_eq(trace_writer_header(ctx.w, &h), 0);
	struct cap_sink s = {&ctx, wr_intern, wr_record};
	struct cap_conv *c = cap_conv_new(&s);
	cr_assert_not_null(c);
	push_kernel(c, 1000, 1100, 30, "fill");
	push_alloc(c, 500, 0x7f0000000000ull, 1 << 20, 3, "libtorch_cuda.so");
	struct cap_link l[] = {{3, 0x7f0000000000ull}};
	cr_assert_eq(cap_conv_link(c, 30, l, 1), 0);
	push_free(c, 2000, 0x7f0000000000ull);
	cr_assert_eq(cap_conv_emit_all(c), 0);
	cr_assert_eq(trace_writer_close(&ctx.w, 1, 7, err, sizeof(err)), 0, "%s", err);
	cap_conv_free(c);

	struct trace_reader *r = trace_reader_open(path);
	cr_assert_not_null(r);
	cr_assert_eq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	struct trace_rec rec;
	enum trace_rec_type want[] = {TREC_ALLOC, TREC_KERNEL, TREC_FREE};
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(trace_reader_next(r, &rec), TRACE_OK, "%s", trace_reader_error(r));
		cr_assert_eq(rec.type, want[i]);
		if (rec.type == TREC_ALLOC) {
			cr_assert_eq(rec.u.mem.id, 0);
			cr_assert_str_eq(trace_reader_string(r, rec.u.mem.source), "libtorch_cuda.so");
		} else if (rec.type == TREC_KERNEL) {
			cr_assert_str_eq(trace_reader_string(r, rec.u.kernel.name), "fill");
			cr_assert_eq(rec.u.kernel.nlinks, 1);
			cr_assert_eq(rec.u.kernel.links[0], 0);
			cr_assert_eq(rec.end, 1100);
		}
	}
	cr_assert_eq(trace_reader_next(r, &rec), TRACE_EOF);
	cr_assert(trace_reader_trailer(r)->present);
	cr_assert_eq(trace_reader_trailer(r)->records, 3);
	cr_assert_eq(trace_reader_trailer(r)->dropped, 7);
	trace_reader_close(r);
	unlink(path);
}

/* ------------------------------------------------------------- launcher */

/* Each test hands the launcher a stand-in library, an empty temporary file
 * (th_tmpname "capture_lib"): it only checks that the file exists. */

static const char *bin(void)
{
	const char *b = getenv("GPUMEMSIM_BIN");
	return b ? b : "build/gpumemsim";
}

/* Run a shell command line; its exit status. */
static int sh(const char *cmd)
{
	int st = system(cmd);
	cr_assert_neq(st, -1);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

Test(capture_launcher, sets_environment_and_passes_exit_status)
{
	char lib[64], envf[64], cmd[1024];
	th_tmpname(lib, sizeof lib, "capture_lib");
	th_tmpname(envf, sizeof envf, "capture_env");
	snprintf(cmd, sizeof(cmd),
		 "cd /tmp && GPUMEMSIM_CAPTURE_LIB=%s %s capture -o rel_out.trace.gz --label batch=64 "
		 "--label model=resnet50 --no-links --api activity --no-source --record memory,kernels "
		 "--syncs callbacks --pause-at-step 8 "
		 "-- sh -c 'env > %s; exit 3' 2>/dev/null",
		 lib, bin(), envf);
	cr_assert_eq(sh(cmd), 3, "exit status passed through");
	const char *env = slurp(envf);
	char want[256];
	snprintf(want, sizeof(want), "CUDA_INJECTION64_PATH=%s\n", lib);
	cr_assert(strstr(env, want), "%s", env);
	snprintf(want, sizeof(want), "NVTX_INJECTION64_PATH=%s\n", lib);
	cr_assert(strstr(env, want), "%s", env);
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_OUT=/tmp/rel_out.trace.gz\n"), "absolute: %s", env);
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_LINKS=0\n"));
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_API=activity\n"));
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_SOURCE=0\n"));
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_RECORD=memory,kernels\n"));
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_SYNCS=callbacks\n"));
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_PAUSE_STEP=8\n"), "%s", env);
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_ROOT_PID="), "the program's own pid: %s", env);
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_LABELS=batch=64\nmodel=resnet50\n"));
	cr_assert(strstr(env, "GPUMEMSIM_CAPTURE_REPORT=/tmp/gpumemsim-capture-"));
	unlink(envf);
	unlink(lib);
}

Test(capture_launcher, links_default_on_and_output_untouched)
{
	char lib[64], cmd[1024], outf[64];
	th_tmpname(lib, sizeof lib, "capture_lib");
	th_tmpname(outf, sizeof outf, "capture_out");
	snprintf(cmd, sizeof(cmd),
		 "GPUMEMSIM_CAPTURE_LIB=%s %s capture -o /tmp/x.trace -- sh -c "
		 "'echo out; echo $GPUMEMSIM_CAPTURE_LINKS $GPUMEMSIM_CAPTURE_API $GPUMEMSIM_CAPTURE_SOURCE' > %s 2>/dev/null", lib, bin(), outf);
	cr_assert_eq(sh(cmd), 0);
	cr_assert_str_eq(slurp(outf), "out\n1 callbacks 1\n", "the program's stdout only");
	unlink(outf);
	unlink(lib);
}

Test(capture_launcher, usage_and_failures)
{
	char lib[64], cmd[1024];
	th_tmpname(lib, sizeof lib, "capture_lib");
	const struct { const char *args; int rc; } cases[] = {
		{"", 2},                                  /* no program */
		{"--", 2},
		{"--label nokey -- true", 2},
		{"--label 'a b=c' -- true", 2},
		{"--bogus -- true", 2},
		{"--api sometimes -- true", 2},
		{"--api", 2},
		{"--syncs sometimes -- true", 2},
		{"--syncs", 2},
		{"--syncs callbacks -- true", 0},
		{"--pause-at-step -- true", 2},
		{"--pause-at-step x -- true", 2},
		{"--pause-at-step -1 -- true", 2},
		{"--pause-at-step 1234567 -- true", 2},
		{"--pause-at-step 0 -- true", 0},
		{"--record kernels,bogus -- true", 2},
		{"--record '' -- true", 2},
		{"-o", 2},
		{"-o /nonexistent-dir/x.trace -- true", 1},
		{"-- /nonexistent-program", 127},
		{"-- sh -c 'kill -TERM $$'", 128 + 15},
		{"--help", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(cmd, sizeof(cmd), "GPUMEMSIM_CAPTURE_LIB=%s %s capture %s >/dev/null 2>&1",
			 lib, bin(), cases[i].args);
		cr_assert_eq(sh(cmd), cases[i].rc, "capture %s", cases[i].args);
	}
	snprintf(cmd, sizeof(cmd), "GPUMEMSIM_CAPTURE_LIB=/nonexistent.so %s capture -- true 2>/dev/null", bin());
	cr_assert_eq(sh(cmd), 1, "missing library");
	unlink(lib);
}

/* ------------------------------------------------------------- traces captured on the H200 */

/* the checker's report goes to stdout: captured, so the test log stays readable */
Test(capture_data, probe_trace_matches_what_the_probe_did, .init = cr_redirect_stdout)
{
	cr_assert_eq(gpu_probe_check("capture/tests/data/probe.trace.gz",
				     "capture/tests/data/probe.expect"), 0);
}

Test(capture_data, probe_check_catches_a_wrong_expectation, .init = cr_redirect_stdout)
{
	char exp[] = "/tmp/test_capture_expect_XXXXXX";
	int fd = mkstemp(exp);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	/* The real file with B's size off by one: its alloc is no longer found. */
	const char *real = slurp("capture/tests/data/probe.expect");
	char a[32], b[32], c[32], d[32];
	unsigned long long sa, sb, sc, sd;
	cr_assert_eq(sscanf(real, "A %31s %llu B %31s %llu C %31s %llu D %31s %llu", a, &sa, b, &sb,
			    c, &sc, d, &sd), 8);
	fprintf(f, "A %s %llu\nB %s %llu\nC %s %llu\nD %s %llu\n", a, sa, b, sb + 1, c, sc, d, sd);
	fclose(f);
	cr_assert_gt(gpu_probe_check("capture/tests/data/probe.trace.gz", exp), 0);
	unlink(exp);
}

/* ResNet-18, 1 warm-up + 3 training steps, PYTORCH_NO_CUDA_MEMORY_CACHING=1:
 * every tensor its own cudaMalloc, so links name the framework's tensors. */
Test(capture_data, resnet18_trace_is_complete_and_linked)
{
	struct trace_reader *r = trace_reader_open("capture/tests/data/resnet18-nocache.trace.gz");
	cr_assert_not_null(r);
	cr_assert_eq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	const struct trace_header *h = trace_reader_header(r);
	cr_assert_str_eq(h->gpu, "NVIDIA H200");
	cr_assert_str_eq(h->compute_capability, "9.0");
	cr_assert_str_eq(h->cudnn, "91900");
	cr_assert_eq(h->nlabels, 2);
	cr_assert_str_eq(h->labels[0].key, "model");
	cr_assert_str_eq(h->labels[0].value, "resnet18");
	struct trace_rec rec;
	uint64_t allocs = 0, kernels = 0, linked = 0, steps = 0, train = 0;
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		if (rec.type == TREC_ALLOC) {
			cr_assert_eq(rec.u.mem.id, allocs, "ids are the ordinals of 'a' records");
			allocs++;
		} else if (rec.type == TREC_KERNEL) {
			kernels++;
			linked += rec.u.kernel.nlinks > 0;
			for (uint32_t i = 0; i < rec.u.kernel.nlinks; i++)
				cr_assert_lt(rec.u.kernel.links[i], allocs, "link to a later allocation");
		} else if (rec.type == TREC_RANGE) {
			const char *nm = trace_reader_string(r, rec.u.range.name);
			cr_assert_not_null(nm);
			if (!strcmp(nm, "step")) {
				steps++;
				cr_assert_eq(rec.u.range.depth, 1);
			} else if (!strcmp(nm, "train")) {
				train++;
				cr_assert_eq(rec.u.range.depth, 0);
			}
		}
	}
	cr_assert_eq(rc, TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert(trace_reader_trailer(r)->present);
	cr_assert_eq(trace_reader_trailer(r)->dropped, 0);
	cr_assert_eq(allocs, 2268);
	cr_assert_eq(kernels, 1488);
	cr_assert_eq(linked, 1184);
	cr_assert_eq(steps, 4);
	cr_assert_eq(train, 1);
	trace_reader_close(r);
}

/* Killed by SIGKILL 3.5 s after its work: what the writer had flushed is
 * readable; no trailer. */
Test(capture_data, sigkill_leaves_a_readable_incomplete_trace)
{
	struct trace_reader *r = trace_reader_open("capture/tests/data/sigkill.trace.gz");
	cr_assert_not_null(r);
	cr_assert_eq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	struct trace_rec rec;
	int rc, n = 0, kernels = 0;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		n++;
		kernels += rec.type == TREC_KERNEL;
	}
	cr_assert(rc == TRACE_ERR_TRUNCATED || (rc == TRACE_EOF && !trace_reader_trailer(r)->present),
		  "rc %d: %s", rc, trace_reader_error(r));
	cr_assert_geq(n, 200);
	cr_assert_geq(kernels, 50);
	trace_reader_close(r);
}

/* SIGTERM with the default action: the library writes the trailer first. */
Test(capture_data, sigterm_trace_is_complete)
{
	struct trace_reader *r = trace_reader_open("capture/tests/data/sigterm.trace.gz");
	cr_assert_not_null(r);
	struct trace_rec rec;
	int rc, n = 0;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK)
		n++;
	cr_assert_eq(rc, TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert(trace_reader_trailer(r)->present);
	cr_assert_eq(trace_reader_trailer(r)->records, (uint64_t)n);
	trace_reader_close(r);
}

Test(capture_launcher, lists_every_trace_last_report_line_wins)
{
	char lib[64], cmd[1024], errf[64];
	th_tmpname(lib, sizeof lib, "capture_lib");
	th_tmpname(errf, sizeof errf, "capture_err");
	snprintf(cmd, sizeof(cmd),
		 "GPUMEMSIM_CAPTURE_LIB=%s %s capture -o /tmp/x.trace.gz -- sh -c '"
		 "R=$GPUMEMSIM_CAPTURE_REPORT; echo \"/tmp/p1.trace.gz 0 0 0\" >> $R; "
		 "echo \"/tmp/p2.trace.gz 0 0 0\" >> $R; echo \"/tmp/p2.trace.gz 12 1 1\" >> $R' 2> %s",
		 lib, bin(), errf);
	cr_assert_eq(sh(cmd), 0);
	const char *err = slurp(errf);
	cr_assert(strstr(err, "wrote /tmp/p1.trace.gz (incomplete"), "%s", err);
	cr_assert(strstr(err, "wrote /tmp/p2.trace.gz (12 records, 1 dropped)\n"), "%s", err);
	cr_assert_null(strstr(err, "no trace written"), "%s", err);
	unlink(errf);
	unlink(lib);
}

Test(capture_convert, record_list_parse)
{
	unsigned bits = 0;
	cr_assert_eq(cap_record_parse("kernels,memory", &bits), 0);
	cr_assert_eq(bits, CAP_REC_KERNELS | CAP_REC_MEMORY);
	cr_assert_eq(cap_record_parse("nvtx", &bits), 0);
	cr_assert_eq(bits, CAP_REC_NVTX);
	cr_assert_eq(cap_record_parse("all", &bits), 0);
	cr_assert_eq(bits, CAP_REC_ALL);
	cr_assert_eq(cap_record_parse("syncs,copies,", &bits), 0, "a trailing comma is harmless");
	cr_assert_eq(bits, CAP_REC_SYNCS | CAP_REC_COPIES);
	bits = 77;
	cr_assert_eq(cap_record_parse("", &bits), -1);
	cr_assert_eq(cap_record_parse("kernel", &bits), -1, "no prefixes");
	cr_assert_eq(cap_record_parse("kernels,,memory", &bits), -1);
	cr_assert_eq(bits, 77, "untouched on error");
}

/* The capture matrix (capture/matrix.sh, run on the H200): one trace per
 * kind of program, each validates and replays; JAX's module globals are
 * freed at their module's unload (no re-registration left), torch.compile
 * left one trace (its compile workers none), reduce-overhead's kernels
 * carry their CUDA graph's id, every trace says which process it is. */
Test(capture_data, matrix_traces_validate_replay_and_carry_what_they_should)
{
	static const char *progs[] = {"cnn", "torch-eager", "torch-compile", "torch-cudagraphs",
				      "torch-nocaching", "torch-async", "jax-default"};
	char cmd[1024], path[256];
	for (size_t p = 0; p < sizeof(progs) / sizeof(progs[0]); p++) {
		snprintf(path, sizeof(path), "traces/matrix/%s.trace.gz", progs[p]);
		snprintf(cmd, sizeof(cmd), "%s trace validate %s >/dev/null 2>&1 && "
			 "%s run %s --policy cuda_malloc >/dev/null 2>&1", bin(), path, bin(), path);
		cr_assert_eq(sh(cmd), 0, "%s validates and replays", path);

		struct trace_reader *r = trace_reader_open(path);
		cr_assert_not_null(r);
		const struct trace_header *h = trace_reader_header(r);
		const char *program = NULL, *process = NULL;
		for (uint32_t i = 0; i < h->nlabels; i++) {
			if (!strcmp(h->labels[i].key, "program"))
				program = h->labels[i].value;
			if (!strcmp(h->labels[i].key, "capture_process"))
				process = h->labels[i].value;
		}
		cr_assert(program && !strcmp(program, progs[p]), "%s: program label", path);
		cr_assert(process && !strcmp(process, "root"), "%s: capture_process", path);
		struct trace_rec rec;
		uint64_t graph_kernels = 0, static_a = 0, static_f = 0;
		while (trace_reader_next(r, &rec) == TRACE_OK) {
			if (rec.type == TREC_KERNEL && rec.u.kernel.graph)
				graph_kernels++;
			if ((rec.type == TREC_ALLOC || rec.type == TREC_FREE) &&
			    rec.u.mem.kind == TMEM_DEVICE_STATIC) {
				if (rec.type == TREC_ALLOC)
					static_a++;
				else
					static_f++;
			}
		}
		cr_assert(trace_reader_trailer(r)->present, "%s complete", path);
		trace_reader_close(r);
		if (!strcmp(progs[p], "torch-cudagraphs"))
			cr_assert_gt(graph_kernels, 1000, "reduce-overhead runs its steps as graphs");
		if (!strcmp(progs[p], "jax-default")) {
			cr_assert_gt(graph_kernels, 0, "XLA's command buffers are CUDA graphs");
			cr_assert_gt(static_f, 900, "autotuner modules unloaded: globals freed");
			cr_assert_leq(static_f, static_a);
		}
	}
	/* nothing beside the traces but logs and tables: no compile-worker traces */
	cr_assert_neq(sh("ls traces/matrix/*.trace.*.gz >/dev/null 2>&1"), 0,
		      "a process's extra trace (FILE.PID.gz) was shipped");
}
