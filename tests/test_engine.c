/*
 * test_engine.c: the replay engine (sim/engine.c) on small traces written
 * with the trace writer: counts and peaks, fragmentation, OOM at a
 * capacity, bad traces failing with file:line, stream ordering and sync
 * waits, the timeline keeping the peak, the offline pre-pass, control
 * events, and determinism.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/engine.h"
#include "helpers.h"

/* ------------------------------------------------------ trace building */

struct tb {
	struct trace_writer *w;
	char path[64];
	uint64_t nalloc;
};

static void tb_open(struct tb *t, uint64_t total_memory)
{
	char err[256];
	snprintf(t->path, sizeof t->path, "/tmp/gpumemsim_engine_XXXXXX");
	int fd = mkstemp(t->path);
	cr_assert(fd >= 0);
	close(fd);
	t->w = trace_writer_open(t->path, TRACE_W_STREAM, err, sizeof err);
	cr_assert_not_null(t->w, "%s", err);
	static struct trace_label labels[] = {{"batch", "8"}, {"model", "toy"}};
	struct trace_header h = {.version = 1, .producer = "test_engine", .gpu = "TestGPU",
				 .total_memory = total_memory, .labels = labels, .nlabels = 2};
	cr_assert_eq(trace_writer_header(t->w, &h), 0);
	t->nalloc = 0;
}

static void tb_rec(struct tb *t, const struct trace_rec *r)
{
	cr_assert_eq(trace_writer_record(t->w, r), 0);
}

static void tb_mem_flags(struct tb *t, enum trace_rec_type type, uint64_t ts, uint64_t addr,
			 uint64_t bytes, uint32_t stream, uint32_t flags)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = type;
	r.start = r.end = ts;
	r.u.mem.id = type == TREC_ALLOC ? t->nalloc++ : 0;
	r.u.mem.addr = addr;
	r.u.mem.bytes = bytes;
	r.u.mem.stream = stream;
	r.u.mem.kind = TMEM_DEVICE;
	r.u.mem.flags = flags;
	r.u.mem.source = TRACE_NO_STRING;
	tb_rec(t, &r);
}

static void tb_mem(struct tb *t, enum trace_rec_type type, uint64_t ts, uint64_t addr,
		   uint64_t bytes, uint32_t stream)
{
	tb_mem_flags(t, type, ts, addr, bytes, stream, 0);
}

/* A convolution workspace: an allocation the framework would shrink. */
static void tb_workspace(struct tb *t, uint64_t ts, uint64_t addr, uint64_t bytes)
{
	tb_mem_flags(t, TREC_ALLOC, ts, addr, bytes, 0, TMEM_F_SHRINKABLE);
}

static void tb_alloc(struct tb *t, uint64_t ts, uint64_t addr, uint64_t bytes)
{
	tb_mem(t, TREC_ALLOC, ts, addr, bytes, 0);
}

static void tb_free(struct tb *t, uint64_t ts, uint64_t addr)
{
	tb_mem(t, TREC_FREE, ts, addr, 0, 0);
}

static void tb_kernel(struct tb *t, uint64_t start, uint64_t end, uint32_t stream)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_KERNEL;
	r.start = start;
	r.end = end;
	r.u.kernel.stream = stream;
	r.u.kernel.name = trace_writer_intern(t->w, "k");
	for (int i = 0; i < 3; i++)
		r.u.kernel.grid[i] = r.u.kernel.block[i] = 1;
	tb_rec(t, &r);
}

static void tb_sync(struct tb *t, uint64_t start, uint64_t end, uint32_t kind, uint32_t stream)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_SYNC;
	r.start = start;
	r.end = end;
	r.u.sync.kind = kind;
	r.u.sync.stream = stream;
	tb_rec(t, &r);
}

static void tb_control(struct tb *t, uint64_t ts, uint32_t kind, uint64_t bytes)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_CONTROL;
	r.start = r.end = ts;
	r.u.control.kind = kind;
	r.u.control.bytes = bytes;
	tb_rec(t, &r);
}

static void tb_close(struct tb *t, int complete)
{
	char err[256];
	cr_assert_eq(trace_writer_close(&t->w, complete, 0, err, sizeof err), 0, "%s", err);
}

/* The 1-based line of the first line of PATH that starts with PREFIX and
 * contains WORD (e.g. "a ", " 0x2000 "). */
static uint64_t line_of(const char *path, const char *prefix, const char *word)
{
	FILE *f = fopen(path, "r");
	char buf[4096];
	uint64_t n = 0;
	cr_assert_not_null(f);
	while (fgets(buf, sizeof buf, f)) {
		n++;
		if (!strncmp(buf, prefix, strlen(prefix)) && strstr(buf, word)) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	return 0;
}

/* ------------------------------------------------------ a test policy */

/* "double": reserves twice what it hands out, so fragmentation is 0.5;
 * reports fixed stats so the engine's OOM-time capture can be checked;
 * counts controls and pre-pass records. */
struct dbl_state {
	struct sim_device *dev;
	int64_t controls[3], prepassed, prepass_done;
};

static const struct policy_knob dbl_knobs[] = {{NULL, NULL, NULL}};

static int dbl_init(void *st, const char *conf, const struct policy_env *env,
		    char *err, size_t errlen)
{
	struct dbl_state *s = st;
	struct conf_kv kv;
	const char *cur = conf;
	int r = conf_next(&cur, &kv, err, errlen);
	if (r != 0)
		return r < 0 ? -1 : conf_unknown("double", dbl_knobs, kv.key, err, errlen);
	s->dev = env->dev;
	return 0;
}

static int dbl_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct dbl_state *s = st;
	if (device_malloc(s->dev, 2 * req->bytes, req->stream, &res->addr) != DEVICE_OK)
		return POLICY_OOM;
	res->block_bytes = req->bytes;
	return POLICY_OK;
}

static void dbl_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct dbl_state *s = st;
	(void)stream;
	device_free(s->dev, addr, 2 * block_bytes);
}

static void dbl_control(void *st, enum policy_control ctl, uint64_t arg)
{
	struct dbl_state *s = st;
	(void)arg;
	s->controls[ctl]++;
}

static void dbl_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct dbl_state *s = st;
	emit(ctx, "largest_free_block", 4242);
	emit(ctx, "cached_free_bytes", 17);
	emit(ctx, "empty_cache_calls", s->controls[POLICY_CTL_EMPTY_CACHE]);
	emit(ctx, "sync_calls", s->controls[POLICY_CTL_SYNC]);
	emit(ctx, "step_calls", s->controls[POLICY_CTL_STEP]);
	emit(ctx, "prepassed", s->prepassed);
	emit(ctx, "prepass_done", s->prepass_done);
}

static int dbl_prepass(void *st, const struct trace_rec *rec)
{
	struct dbl_state *s = st;
	(void)rec;
	s->prepassed++;
	return 0;
}

static int dbl_prepass_done(void *st, char *err, size_t errlen)
{
	struct dbl_state *s = st;
	(void)err;
	(void)errlen;
	s->prepass_done++;
	return 0;
}

static void dbl_fini(void *st) { (void)st; }

static const struct alloc_policy policy_double = {
	.iversion = POLICY_IFACE_VERSION, .name = "double", .description = "test",
	.state_size = sizeof(struct dbl_state), .knobs = dbl_knobs, .init = dbl_init,
	.alloc = dbl_alloc, .free = dbl_free, .control = dbl_control, .stats = dbl_stats,
	.fini = dbl_fini,
};

static const struct alloc_policy policy_double_offline = {
	.iversion = POLICY_IFACE_VERSION, .name = "double_offline", .description = "test",
	.state_size = sizeof(struct dbl_state), .knobs = dbl_knobs, .init = dbl_init,
	.alloc = dbl_alloc, .free = dbl_free, .control = dbl_control, .stats = dbl_stats,
	.prepass = dbl_prepass, .prepass_done = dbl_prepass_done, .fini = dbl_fini,
};

static int64_t stat_of(const struct sim_result *r, const char *name)
{
	for (size_t i = 0; i < r->nstats; i++)
		if (!strcmp(r->stats[i].name, name))
			return r->stats[i].value;
	cr_assert_fail("no stat %s", name);
	return -1;
}

static int run(const char *path, const struct alloc_policy *p, uint64_t cap,
	       struct sim_result *r, char *err, size_t errlen)
{
	struct sim_options o = {.trace_path = path, .policy = p, .capacity = cap};
	return sim_run(&o, r, err, errlen);
}

static const struct alloc_policy *cuda_malloc(void)
{
	const struct alloc_policy *p = policy_find("cuda_malloc");
	cr_assert_not_null(p);
	return p;
}

/* ------------------------------------------------------------- tests */

Test(engine, counts_and_peaks)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 0);
	tb_alloc(&t, 1000, 0x1000, 100);
	tb_alloc(&t, 1010, 0x2000, 200);
	tb_free(&t, 1020, 0x1000);
	tb_alloc(&t, 1030, 0x3000, 50);
	tb_free(&t, 1040, 0x2000);
	tb_free(&t, 1050, 0x3000);
	tb_close(&t, 1);
	cr_assert_eq(run(t.path, cuda_malloc(), 0, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.allocs, 3);
	cr_assert_eq(r.frees, 3);
	cr_assert_eq(r.peak_allocated, 300);
	cr_assert_eq(r.peak_requested, 300);
	cr_assert_eq(r.peak_reserved, 300);
	cr_assert_eq(r.device_allocs, 3);
	cr_assert_eq(r.device_frees, 3);
	cr_assert_float_eq(r.fragmentation, 0.0, 1e-12);
	cr_assert_eq(r.oom, 0);
	cr_assert_eq(r.complete, 1);
	cr_assert_eq(r.capacity, 0);
	cr_assert_eq(r.trace_duration_ns, 50);
	cr_assert_eq(r.sim_duration_ns, 50);
	cr_assert_str_eq(r.policy, "cuda_malloc");
	cr_assert_str_eq(r.conf, "");
	cr_assert_str_eq(r.trace_path, t.path);
	cr_assert_eq(r.nlabels, 2);
	cr_assert_str_eq(r.labels[1].key, "model");
	cr_assert_str_eq(r.labels[1].value, "toy");
	cr_assert_gt(r.trace_bytes, 0);
	sim_result_free(&r);
	unlink(t.path);
}

Test(engine, fragmentation_and_stats)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 0);
	tb_alloc(&t, 0, 0x1000, 1000);
	tb_control(&t, 5, TCTL_STEP, 1);
	tb_control(&t, 6, TCTL_EMPTY_CACHE, 0);
	tb_sync(&t, 7, 8, TSYNC_CONTEXT, TRACE_NO_STREAM);
	tb_free(&t, 10, 0x1000);
	tb_close(&t, 1);
	cr_assert_eq(run(t.path, &policy_double, 0, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.peak_allocated, 1000);
	cr_assert_eq(r.peak_reserved, 2000);
	cr_assert_float_eq(r.fragmentation, 0.5, 1e-12);
	cr_assert_eq(stat_of(&r, "largest_free_block"), 4242);
	cr_assert_eq(stat_of(&r, "step_calls"), 1);
	cr_assert_eq(stat_of(&r, "empty_cache_calls"), 1);
	cr_assert_eq(stat_of(&r, "sync_calls"), 1);
	cr_assert_eq(stat_of(&r, "prepassed"), 0);
	int saw_ec = 0, saw_peak = 0;
	for (size_t i = 0; i < r.nevents; i++) {
		saw_ec |= r.events[i].kind == SIM_EV_EMPTY_CACHE;
		if (r.events[i].kind == SIM_EV_PEAK_RESERVED) {
			saw_peak = 1;
			cr_assert_eq(r.events[i].bytes, 2000);
			cr_assert_eq(r.events[i].t, 0);
		}
		if (i)
			cr_assert_geq(r.events[i].t, r.events[i - 1].t);
	}
	cr_assert(saw_ec && saw_peak);
	sim_result_free(&r);
	unlink(t.path);
}

Test(engine, offline_prepass_sees_every_record)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 0);
	tb_alloc(&t, 0, 0x1000, 10);
	tb_kernel(&t, 1, 2, 7);
	tb_free(&t, 3, 0x1000);
	tb_close(&t, 1);
	cr_assert_eq(run(t.path, &policy_double_offline, 0, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(stat_of(&r, "prepassed"), 3);
	cr_assert_eq(stat_of(&r, "prepass_done"), 1);
	cr_assert_eq(r.allocs, 1); /* the replay ran after the rewind */
	cr_assert_eq(r.frees, 1);
	sim_result_free(&r);
	unlink(t.path);
}

Test(engine, oom_at_capacity_is_a_result)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 250);  /* header's total memory is the capacity */
	tb_alloc(&t, 0, 0x1000, 100);
	tb_alloc(&t, 10, 0x2000, 200);   /* OOM: 300 > 250 */
	tb_free(&t, 20, 0x2000);         /* skipped: its alloc failed */
	tb_alloc(&t, 30, 0x3000, 150);
	tb_free(&t, 40, 0x1000);
	tb_close(&t, 1);
	uint64_t line = line_of(t.path, "a ", " 0x2000 ");
	cr_assert_gt(line, 0);
	cr_assert_eq(run(t.path, cuda_malloc(), 0, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.capacity, 250);
	cr_assert_eq(r.oom, 1);
	cr_assert_eq(r.num_ooms, 1);
	cr_assert_eq(r.oom_bytes, 200);
	cr_assert_eq(r.oom_t, 10);
	cr_assert_eq(r.oom_allocated, 100);
	cr_assert_eq(r.oom_reserved, 100);
	cr_assert_eq(r.oom_largest_free, -1); /* cuda_malloc has no stats */
	cr_assert_eq(r.oom_line, line, "oom_line %llu, want %llu",
		     (unsigned long long)r.oom_line, (unsigned long long)line);
	cr_assert_eq(r.allocs, 2);
	cr_assert_eq(r.frees, 1);
	cr_assert_eq(r.peak_allocated, 250);
	cr_assert_eq(r.oom_limit, 250);                 /* no policy limit: the device */
	cr_assert_str_eq(r.oom_verdict, "capacity");    /* 100 live + 200 > 250 */
	sim_result_free(&r);

	/* --capacity overrides the header; the policy's stats are captured */
	cr_assert_eq(run(t.path, &policy_double, 500, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.capacity, 500);
	cr_assert_eq(r.num_ooms, 1); /* 2*100 + 2*200 > 500 */
	cr_assert_eq(r.oom_largest_free, 4242);
	cr_assert_eq(r.oom_cached_free, 17);
	int saw = 0;
	for (size_t i = 0; i < r.nevents; i++)
		saw |= r.events[i].kind == SIM_EV_OOM && r.events[i].bytes == 200;
	cr_assert(saw);
	sim_result_free(&r);
	unlink(t.path);
}

/* A convolution workspace (TMEM_F_SHRINKABLE) asks for no more than the
 * device has free or the cache holds in one block, as PyTorch's cuDNN
 * search reckons it, and one that still does not fit is asked for again
 * at half the size, down to none: no OOM, each cut counted, the free of
 * one that shrank away ignored. Without the flag: an OOM. */
Test(engine, shrinkable_workspace_halves_until_it_fits)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 250);
	tb_alloc(&t, 0, 0x1000, 100);
	tb_workspace(&t, 10, 0x2000, 400); /* 150 free: 400 -> 150 */
	tb_free(&t, 20, 0x2000);
	tb_alloc(&t, 30, 0x3000, 150);     /* 250 live: nothing left */
	tb_workspace(&t, 40, 0x4000, 64);  /* nothing free: none at all */
	tb_free(&t, 50, 0x4000);           /* of nothing: ignored */
	tb_alloc(&t, 60, 0x5000, 400);     /* no flag: an OOM */
	tb_free(&t, 70, 0x3000);
	tb_free(&t, 80, 0x1000);
	tb_close(&t, 1);
	cr_assert_eq(run(t.path, cuda_malloc(), 0, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.workspace_retries, 2);
	cr_assert_eq(r.num_ooms, 1);
	cr_assert_eq(r.oom_bytes, 400);
	cr_assert_eq(r.oom_t, 60);
	cr_assert_eq(r.allocs, 3, "100, the workspace at 150, 150");
	cr_assert_eq(r.peak_allocated, 250);
	sim_result_free(&r);
	unlink(t.path);
}

/* Under an allocator's own limit (a memory fraction) the device has room,
 * so the workspace is asked for whole, then at half the size until it
 * fits under the limit: 400 MiB -> 200 -> 100 beside 100 MiB in 256. */
Test(engine, shrinkable_workspace_halves_under_a_fraction)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	const uint64_t M = 1ull << 20;
	tb_open(&t, 1024 * M);
	tb_alloc(&t, 0, 0x10000000, 100 * M);
	tb_workspace(&t, 10, 0x80000000, 400 * M);
	tb_free(&t, 20, 0x80000000);
	tb_free(&t, 30, 0x10000000);
	tb_close(&t, 1);
	const struct alloc_policy *p = policy_find("pytorch");
	cr_assert_not_null(p);
	struct sim_options o = {.trace_path = t.path, .policy = p, .conf = "fraction:0.25"};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.oom, 0);
	cr_assert_eq(r.workspace_retries, 2);
	cr_assert_eq(r.peak_requested, 200 * M);
	sim_result_free(&r);
	unlink(t.path);
}

/* An `x oom` (the real run's request that failed, e.g. a workspace PyTorch
 * then asked for at half the size) is made against the policy too, so its
 * own OOM handling runs; one the replay can serve is given back at once
 * and said so. */
Test(engine, trace_oom_is_tried_against_the_policy)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 250);
	tb_alloc(&t, 0, 0x1000, 100);
	tb_control(&t, 10, TCTL_OOM, 1000);   /* fails here too */
	tb_control(&t, 20, TCTL_OOM, 50);     /* fits here */
	tb_free(&t, 30, 0x1000);
	tb_close(&t, 1);
	cr_assert_eq(run(t.path, cuda_malloc(), 0, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.oom, 0, "the real run's OOM is not the replay's");
	cr_assert_eq(r.device_allocs, 2, "the one served is a device call");
	cr_assert_eq(r.device_frees, 2);
	int failed = 0, served = 0;
	for (size_t i = 0; i < r.nevents; i++) {
		if (r.events[i].kind != SIM_EV_TRACE_OOM)
			continue;
		if (r.events[i].bytes == 1000)
			failed = !strstr(r.events[i].detail, "served");
		if (r.events[i].bytes == 50)
			served = strstr(r.events[i].detail, "(the replay served it)") != NULL;
	}
	cr_assert(failed && served);
	sim_result_free(&r);
	unlink(t.path);
}

Test(engine, free_of_unknown_address_names_line)
{
	struct tb t;
	struct sim_result r;
	char err[512] = "", want[128];
	tb_open(&t, 0);
	tb_alloc(&t, 0, 0x1000, 100);
	tb_free(&t, 10, 0xdead000);
	tb_close(&t, 1);
	uint64_t line = line_of(t.path, "f ", " 0xdead000 ");
	cr_assert_gt(line, 0);
	cr_assert_eq(run(t.path, cuda_malloc(), 0, &r, err, sizeof err), -1);
	snprintf(want, sizeof want, "%s:%llu: free of unknown address 0xdead000", t.path,
		 (unsigned long long)line);
	cr_assert(strstr(err, want), "got '%s', want '%s'", err, want);
	cr_assert_null(r.trace_path); /* nothing half-filled */
	unlink(t.path);
}

Test(engine, alloc_at_live_address_is_an_error)
{
	struct tb t;
	struct sim_result r;
	char err[512] = "";
	tb_open(&t, 0);
	tb_alloc(&t, 0, 0x1000, 100);
	tb_alloc(&t, 5, 0x1000, 100);
	tb_close(&t, 1);
	cr_assert_eq(run(t.path, cuda_malloc(), 0, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "already live"), "%s", err);
	cr_assert(strstr(err, t.path), "%s", err);
	unlink(t.path);
}

Test(engine, stream_order_and_sync_waits)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 0);
	/* two kernels that overlapped in the trace (a transformed trace) must run
	 * one after the other on their stream: the second ends at 2000, not 1010 */
	tb_kernel(&t, 0, 1000, 1);
	tb_kernel(&t, 10, 1010, 1);
	tb_kernel(&t, 20, 30, 2);              /* another stream: not delayed */
	tb_sync(&t, 40, 50, TSYNC_STREAM, 2);  /* stream 2 drained at 30: no wait */
	tb_alloc(&t, 60, 0x1000, 10);
	tb_sync(&t, 1010, 1020, TSYNC_STREAM, 1); /* waits until 2000: delay 980 */
	tb_alloc(&t, 1100, 0x2000, 1000);      /* issued at 2080 */
	tb_close(&t, 1);
	struct sim_options o = {.trace_path = t.path, .policy = cuda_malloc(), .capacity = 500};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.trace_duration_ns, 1100);
	cr_assert_eq(r.sim_duration_ns, 2080);
	cr_assert_eq(r.oom, 1);
	cr_assert_eq(r.oom_t, 2080); /* the OOM happens at the delayed time */
	sim_result_free(&r);
	unlink(t.path);
}

Test(engine, device_wide_sync_waits_for_all_streams)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 0);
	tb_kernel(&t, 0, 100, 1);
	tb_kernel(&t, 0, 100, 1);              /* ends at 200 in the simulation */
	tb_kernel(&t, 5, 500, 3);              /* ends at 500 */
	tb_sync(&t, 100, 110, TSYNC_CONTEXT, TRACE_NO_STREAM); /* waits until 500 */
	tb_alloc(&t, 120, 0x1000, 10);
	tb_close(&t, 1);
	cr_assert_eq(run(t.path, cuda_malloc(), 0, &r, err, sizeof err), 0, "%s", err);
	/* released at 500 instead of 110: +390, so the alloc is at 510 */
	cr_assert_eq(r.sim_duration_ns, 510);
	cr_assert_eq(r.trace_duration_ns, 500);
	sim_result_free(&r);
	unlink(t.path);
}

Test(engine, timeline_keeps_the_peak)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	tb_open(&t, 0);
	uint64_t ts = 0;
	for (int i = 0; i < 5000; i++) {
		tb_alloc(&t, ts += 7, 0x100000 + (uint64_t)i * 0x1000, 100 + (uint64_t)(i % 7));
		if (i == 2345) {
			tb_alloc(&t, ts += 1, 0x900000000, 1ull << 30);
			tb_free(&t, ts += 1, 0x900000000);
		}
		tb_free(&t, ts += 3, 0x100000 + (uint64_t)i * 0x1000);
	}
	tb_close(&t, 1);
	struct sim_options o = {.trace_path = t.path, .policy = cuda_malloc(), .timeline_points = 16};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_leq(r.ntimeline, 16);
	cr_assert_geq(r.ntimeline, 8);
	uint64_t maxr = 0, maxa = 0;
	for (size_t i = 0; i < r.ntimeline; i++) {
		if (i)
			cr_assert_gt(r.timeline[i].t, r.timeline[i - 1].t);
		if (r.timeline[i].reserved > maxr)
			maxr = r.timeline[i].reserved;
		if (r.timeline[i].allocated > maxa)
			maxa = r.timeline[i].allocated;
	}
	cr_assert_eq(maxr, r.peak_reserved);
	cr_assert_eq(maxa, r.peak_allocated);
	cr_assert_geq(r.peak_reserved, 1ull << 30);
	sim_result_free(&r);
	unlink(t.path);
}

Test(engine, incomplete_trace_and_host_memory)
{
	struct tb t;
	struct sim_result r;
	char err[512];
	struct trace_rec rec;
	tb_open(&t, 0);
	memset(&rec, 0, sizeof rec);
	rec.type = TREC_ALLOC;
	rec.u.mem.addr = 0x5000;
	rec.u.mem.bytes = 4096;
	rec.u.mem.kind = TMEM_PINNED;      /* host memory: not the device's */
	rec.u.mem.stream = TRACE_NO_STREAM;
	rec.u.mem.source = TRACE_NO_STRING;
	tb_rec(&t, &rec);
	tb_alloc(&t, 1, 0x1000, 10);
	rec.type = TREC_FREE;
	rec.start = rec.end = 2;
	tb_rec(&t, &rec);
	tb_close(&t, 0);                   /* no trailer */
	/* a trace cut short is refused unless asked for, naming the file */
	cr_assert_lt(run(t.path, cuda_malloc(), 0, &r, err, sizeof err), 0);
	cr_assert(strstr(err, t.path) && strstr(err, "--allow-incomplete"), "%s", err);
	struct sim_options o = {.trace_path = t.path, .policy = cuda_malloc(),
				.allow_incomplete = 1};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.complete, 0);
	cr_assert_eq(r.allocs, 1);
	cr_assert_eq(r.frees, 0);
	cr_assert_eq(r.peak_allocated, 10);
	sim_result_free(&r);
	unlink(t.path);
}

Test(engine, bad_conf_and_missing_trace)
{
	struct sim_result r;
	char err[512] = "";
	struct sim_options o = {.trace_path = "/nonexistent/gpumemsim.trace", .policy = cuda_malloc()};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "/nonexistent/gpumemsim.trace"), "%s", err);

	struct tb t;
	tb_open(&t, 0);
	tb_alloc(&t, 0, 0x1000, 10);
	tb_close(&t, 1);
	o.trace_path = t.path;
	o.conf = "bogus:1";
	err[0] = '\0';
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "bogus"), "%s", err);
	unlink(t.path);
}

Test(engine, deterministic)
{
	struct tb t;
	struct sim_result a, b;
	char err[512];
	tb_open(&t, 1ull << 20);
	uint64_t ts = 0;
	srand(99);
	for (int i = 0; i < 3000; i++) {
		uint64_t addr = 0x10000 + (uint64_t)(i % 64) * 0x100000;
		if (i >= 64)
			tb_free(&t, ts += 2, addr - 0);
		tb_alloc(&t, ts += 3, addr, (uint64_t)(rand() % 60000) + 1);
		if (i % 100 == 0)
			tb_kernel(&t, ts, ts + 50, (uint32_t)(i % 3));
	}
	tb_close(&t, 1);
	cr_assert_eq(run(t.path, &policy_double, 0, &a, err, sizeof err), 0, "%s", err);
	cr_assert_eq(run(t.path, &policy_double, 0, &b, err, sizeof err), 0, "%s", err);
	cr_assert_eq(a.trace_crc32, b.trace_crc32);
	cr_assert_eq(a.peak_reserved, b.peak_reserved);
	cr_assert_eq(a.num_ooms, b.num_ooms);
	cr_assert_gt(a.num_ooms, 0);
	cr_assert_eq(a.oom_line, b.oom_line);
	cr_assert_eq(a.sim_duration_ns, b.sim_duration_ns);
	cr_assert_eq(a.ntimeline, b.ntimeline);
	cr_assert_eq(memcmp(a.timeline, b.timeline, a.ntimeline * sizeof *a.timeline), 0);
	cr_assert_eq(a.nevents, b.nevents);
	for (size_t i = 0; i < a.nevents; i++) {
		cr_assert_eq(a.events[i].t, b.events[i].t);
		cr_assert_str_eq(a.events[i].detail, b.events[i].detail);
	}
	sim_result_free(&a);
	sim_result_free(&b);
	unlink(t.path);
}

/* The verdict rules, one branch each (users' question 2). */
Test(engine, oom_verdict_rules)
{
	/* enough cached free bytes, no block large enough */
	cr_assert_str_eq(sim_oom_verdict(100, 10, 1000, 50, 300), "fragmentation");
	/* live + request beyond the limit */
	cr_assert_str_eq(sim_oom_verdict(600, 500, 1000, 50, 60), "capacity");
	/* fits under the limit, but the reserved memory could not serve it */
	cr_assert_str_eq(sim_oom_verdict(100, 500, 1000, 50, 60), "fragmentation");
	/* the policy did not report its cache: judged on live bytes alone */
	cr_assert_str_eq(sim_oom_verdict(600, 500, 1000, -1, -1), "capacity");
	/* unlimited device: never capacity */
	cr_assert_str_eq(sim_oom_verdict(600, 500, 0, -1, -1), "fragmentation");
}

/* ------------------------------------- memory outside the allocator */

#define MIB (1024ull * 1024)

/*
 * A capture in miniature: the framework's allocator (libc10_cuda) makes
 * 1 MiB and 48 MiB, cuBLAS its 64 MiB workspace, a module global 100 B.
 * LABEL 0 leaves out the allocator_source label. TOTAL: header capacity.
 */
static void foreign_trace(char *path, size_t len, int label, uint64_t total)
{
	char text[1024];
	snprintf(text, sizeof text,
		 "gpumemsim-trace 1\n"
		 "H total_memory %llu\n"
		 "%s"
		 "S 0 /x/torch/lib/libc10_cuda.so\n"
		 "S 1 /y/libcublas.so.13\n"
		 "a 10 0x1000 1048576 - 3 0 0 0\n"
		 "a 20 0x9000 67108864 - 3 0 0 1\n"
		 "a 30 0x5000 100 - 6 0 0 1\n"
		 "a 40 0x2000 50331648 - 3 0 0 0\n"
		 "f 50 0x2000 0 - 3 0 0 0\n"
		 "f 60 0x1000 0 - 3 0 0 0\n"
		 "f 70 0x5000 0 - 6 0 0 1\n"
		 "end 7 0\n",
		 (unsigned long long)total, label ? "L allocator_source=libc10_cuda\n" : "");
	th_tmpfile(path, len, "engine_foreign", text);
}

static void foreign_run(const char *path, enum sim_foreign_mode mode, struct sim_result *r)
{
	char err[512];
	struct sim_options o = {.trace_path = path, .policy = policy_find("cuda_malloc"),
				.foreign = mode};
	cr_assert_eq(sim_run(&o, r, err, sizeof err), 0, "%s", err);
}

Test(engine, foreign_memory_goes_beside_the_policy)
{
	char path[128];
	struct sim_result r;
	foreign_trace(path, sizeof path, 1, 0);
	foreign_run(path, SIM_FOREIGN_AUTO, &r);
	cr_assert_eq(r.foreign_routed, 1);
	cr_assert_str_eq(r.allocator_source, "libc10_cuda");
	/* the policy saw only its own two requests */
	cr_assert_eq(r.allocs, 2);
	cr_assert_eq(r.frees, 2);
	cr_assert_eq(r.peak_reserved, 49 * MIB);
	cr_assert_eq(r.peak_allocated, 49 * MIB);
	cr_assert_eq(r.foreign_allocs, 2);
	cr_assert_eq(r.peak_foreign, 64 * MIB + 100);
	cr_assert_eq(r.device_peak, 49 * MIB + 64 * MIB + 100);
	cr_assert_eq(r.nforeign_libs, 2);
	cr_assert_str_eq(r.foreign_libs[0].name, "libcublas.so.13");
	cr_assert_eq(r.foreign_libs[0].peak, 64 * MIB);
	cr_assert_eq(r.foreign_libs[0].allocs, 1);
	cr_assert_str_eq(r.foreign_libs[1].name, "libcublas.so.13 [device static]");
	cr_assert_eq(r.foreign_libs[1].peak, 100);
	cr_assert_eq(r.oom, 0);
	sim_result_free(&r);
	unlink(path);
}

Test(engine, foreign_policy_mode_is_the_old_replay)
{
	char lab[128], bare[128];
	struct sim_result a, b, c;
	foreign_trace(lab, sizeof lab, 1, 0);
	foreign_trace(bare, sizeof bare, 0, 0);
	foreign_run(lab, SIM_FOREIGN_POLICY, &a);
	foreign_run(bare, SIM_FOREIGN_AUTO, &b);
	foreign_run(bare, SIM_FOREIGN_POLICY, &c);
	cr_assert_eq(a.foreign_routed, 0);
	cr_assert_eq(b.foreign_routed, 0);
	cr_assert_eq(a.allocs, 4);
	cr_assert_eq(a.peak_reserved, 49 * MIB + 64 * MIB + 100);
	cr_assert_eq(a.peak_foreign, 0);
	cr_assert_eq(a.nforeign_libs, 0);
	cr_assert_eq(a.device_peak, a.peak_reserved);
	/* without the label nothing changes: the same figures, either mode */
	const struct sim_result *rs[] = {&a, &b, &c};
	for (int i = 1; i < 3; i++) {
		cr_assert_eq(rs[i]->peak_reserved, a.peak_reserved);
		cr_assert_eq(rs[i]->peak_allocated, a.peak_allocated);
		cr_assert_eq(rs[i]->device_allocs, a.device_allocs);
		cr_assert_eq(rs[i]->allocs, a.allocs);
		cr_assert_eq(rs[i]->ntimeline, a.ntimeline);
		cr_assert_eq(memcmp(rs[i]->timeline, a.timeline, a.ntimeline * sizeof *a.timeline), 0);
		cr_assert_eq(rs[i]->device_peak, a.device_peak);
	}
	sim_result_free(&a);
	sim_result_free(&b);
	sim_result_free(&c);
	unlink(lab);
	unlink(bare);
}

Test(engine, foreign_oom_verdict_names_the_library)
{
	char path[128];
	struct sim_result r, p;
	/* 100 MiB: 1 + 48 MiB of the framework fit, not beside 64 MiB of cuBLAS */
	foreign_trace(path, sizeof path, 1, 100 * MIB);
	foreign_run(path, SIM_FOREIGN_DEVICE, &r);
	cr_assert_eq(r.oom, 1);
	cr_assert_eq(r.oom_bytes, 48 * MIB);
	cr_assert_eq(r.oom_allocated, 1 * MIB);
	cr_assert_str_eq(r.oom_verdict, "foreign");
	cr_assert_eq(r.oom_foreign, 64 * MIB + 100);
	cr_assert_str_eq(r.oom_foreign_lib, "libcublas.so.13");
	cr_assert_eq(r.foreign_libs[0].at_oom, 64 * MIB);
	cr_assert_eq(r.peak_reserved, 1 * MIB);
	/* the same run with one allocator for everything: plain capacity */
	foreign_run(path, SIM_FOREIGN_POLICY, &p);
	cr_assert_eq(p.oom, 1);
	cr_assert_str_eq(p.oom_verdict, "capacity");
	cr_assert_eq(p.oom_foreign, 0);
	sim_result_free(&r);
	sim_result_free(&p);
	unlink(path);
}

Test(engine, foreign_oom_verdict_rules)
{
	/* framework bytes fit, foreign ones push over the device */
	cr_assert_str_eq(sim_oom_verdict_foreign(48, 1, 64, 100, 100, -1, -1), "foreign");
	/* over the limit on its own: capacity, foreign or not */
	cr_assert_str_eq(sim_oom_verdict_foreign(48, 60, 64, 100, 100, -1, -1), "capacity");
	/* the cache held enough but in pieces: fragmentation first */
	cr_assert_str_eq(sim_oom_verdict_foreign(48, 1, 64, 100, 100, 10, 50), "fragmentation");
	/* nothing foreign: the old rules */
	cr_assert_str_eq(sim_oom_verdict_foreign(48, 1, 0, 100, 100, -1, -1), "fragmentation");
	cr_assert_str_eq(sim_oom_verdict(48, 1, 100, -1, -1), "fragmentation");
	cr_assert_str_eq(sim_oom_verdict(48, 60, 100, -1, -1), "capacity");
}

Test(engine, foreign_routing_is_deterministic)
{
	char path[128];
	struct sim_result a, b;
	foreign_trace(path, sizeof path, 1, 100 * MIB);
	foreign_run(path, SIM_FOREIGN_AUTO, &a);
	foreign_run(path, SIM_FOREIGN_AUTO, &b);
	cr_assert_eq(a.nforeign_libs, b.nforeign_libs);
	cr_assert_eq(memcmp(a.foreign_libs, b.foreign_libs, a.nforeign_libs * sizeof *a.foreign_libs), 0);
	cr_assert_eq(a.device_peak, b.device_peak);
	cr_assert_str_eq(a.oom_verdict, b.oom_verdict);
	cr_assert_eq(a.nevents, b.nevents);
	for (size_t i = 0; i < a.nevents; i++)
		cr_assert_str_eq(a.events[i].detail, b.events[i].detail);
	sim_result_free(&a);
	sim_result_free(&b);
	unlink(path);
}

Test(engine, foreign_device_needs_a_substring)
{
	char path[128], err[512];
	struct sim_result r;
	foreign_trace(path, sizeof path, 0, 0);
	struct sim_options o = {.trace_path = path, .policy = policy_find("cuda_malloc"),
				.foreign = SIM_FOREIGN_DEVICE};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "allocator_source"), "%s", err);
	cr_assert(strstr(err, path), "%s", err);
	/* given on the command line instead of the label, it routes */
	o.allocator_source = "libc10_cuda";
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.foreign_routed, 1);
	cr_assert_eq(r.peak_foreign, 64 * MIB + 100);
	sim_result_free(&r);
	unlink(path);
}

Test(engine, foreign_cli_run_prints_and_stores)
{
	char path[128], out[128], db[128], cmd[1024], buf[8192];
	foreign_trace(path, sizeof path, 1, 100 * MIB);
	th_tmpname(out, sizeof out, "engine_foreign_out");
	th_tmpname(db, sizeof db, "engine_foreign_db");
	unlink(db);
	snprintf(cmd, sizeof cmd, "'%s' run %s --policy cuda_malloc --db %s --quiet > %s 2>&1",
		 th_bin(), path, db, out);
	cr_assert_eq(th_sh("%s", cmd), 0);
	char *txt = th_slurp(out);
	cr_assert_not_null(txt);
	cr_assert(strstr(txt, "verdict: foreign"), "%s", txt);
	cr_assert(strstr(txt, "libcublas.so.13"), "%s", txt);
	free(txt);
	snprintf(cmd, sizeof cmd, "sqlite3 %s 'SELECT foreign_routed, peak_foreign, oom_foreign,"
		 " oom_foreign_bytes FROM runs'", db);
	if (th_have("sqlite3")) {
		cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
		cr_assert_str_eq(buf, "1|67108964|libcublas.so.13|67108964\n");
	}
	/* --foreign policy: the JSON has no foreign object */
	snprintf(cmd, sizeof cmd, "'%s' run %s --policy cuda_malloc --no-db --json --foreign policy",
		 th_bin(), path);
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
	cr_assert_null(strstr(buf, "\"foreign\""), "%s", buf);
	cr_assert(strstr(buf, "\"verdict\":\"capacity\""), "%s", buf);
	snprintf(cmd, sizeof cmd, "'%s' run %s --policy cuda_malloc --no-db --foreign bogus",
		 th_bin(), path);
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 2, "%s", buf);
	th_rm_db(db);
	unlink(out);
	unlink(path);
}

/*
 * Module globals (kind 6) registered twice at one address without a free
 * (an older capture of a module loaded again), then a framework buffer
 * (kind 3, libc10_cuda) and a kernel. LABEL adds allocator_source, which
 * routes the statics beside the policy. KIND2: the second static's kind.
 */
static void static_trace(char *path, size_t len, int label, int kind1, int kind2)
{
	char text[1024];
	snprintf(text, sizeof text,
		 "gpumemsim-trace 1\n"
		 "%s"
		 "S 0 /x/torch/lib/libc10_cuda.so\n"
		 "S 1 kern\n"
		 "a 10 0x5000 1048576 - %d 0 0 -\n"
		 "a 20 0x5000 1048576 - %d 0 0 -\n"
		 "a 30 0x200000 4096 - 3 0 0 0\n"
		 "k 40 +10 0 1 1,1,1 1,1,1 0 0 0 1,2\n"
		 "f 50 0x200000 0 - 3 0 0 0\n"
		 "end 5 0\n",
		 label ? "L allocator_source=libc10_cuda\n" : "", kind1, kind2);
	th_tmpfile(path, len, "engine_static", text);
}

Test(engine, static_reregistered_replaces_the_live_one)
{
	const char *pols[] = {"cuda_malloc", "pytorch", "bfc", "optimal"};
	for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) {
		char path[128], err[512];
		struct sim_result r;
		static_trace(path, sizeof path, 0, 6, 6);
		struct sim_options o = {.trace_path = path, .policy = policy_find(pols[i])};
		cr_assert_not_null(o.policy, "%s", pols[i]);
		cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s: %s", pols[i], err);
		cr_assert_eq(r.static_replaced, 1, "%s", pols[i]);
		cr_assert_eq(r.allocs, 3, "%s", pols[i]);
		/* the replaced one was freed the way a free record frees */
		cr_assert_eq(r.frees, 2, "%s", pols[i]);
		/* live at once: one static MiB and the 4 KiB buffer, not two MiB */
		cr_assert_eq(r.peak_requested, MIB + 4096, "%s: %llu", pols[i],
			     (unsigned long long)r.peak_requested);
		cr_assert_eq(r.oom, 0, "%s", pols[i]);
		sim_result_free(&r);
		unlink(path);
	}
}

Test(engine, static_reregistered_replaces_beside_the_policy)
{
	char path[128], err[512];
	struct sim_result r;
	static_trace(path, sizeof path, 1, 6, 7);
	struct sim_options o = {.trace_path = path, .policy = policy_find("pytorch")};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.foreign_routed, 1);
	cr_assert_eq(r.static_replaced, 1);
	cr_assert_eq(r.foreign_allocs, 2);
	cr_assert_eq(r.peak_foreign, MIB, "%llu", (unsigned long long)r.peak_foreign);
	/* the policy saw only the framework's buffer */
	cr_assert_eq(r.allocs, 1);
	cr_assert_eq(r.frees, 1);
	cr_assert_eq(r.peak_requested, 4096);
	sim_result_free(&r);
	unlink(path);
}

Test(engine, realloc_at_live_address_is_still_an_error_unless_both_static)
{
	const int kinds[][2] = {{3, 3}, {6, 3}, {3, 6}};
	for (int label = 0; label < 2; label++) {
		for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
			char path[128], err[512] = "";
			struct sim_result r;
			static_trace(path, sizeof path, label, kinds[i][0], kinds[i][1]);
			struct sim_options o = {.trace_path = path, .policy = policy_find("cuda_malloc")};
			cr_assert_eq(sim_run(&o, &r, err, sizeof err), -1, "label %d kinds %d, %d",
				     label, kinds[i][0], kinds[i][1]);
			cr_assert(strstr(err, "already live"), "%s", err);
			cr_assert(strstr(err, label ? ":6: " : ":5: "),
				  "names the second allocation's line: %s", err);
			unlink(path);
		}
	}
}

/* The static replacement in a timed replay, and from the CLI: counted in
 * the JSON, with a note on stderr. */
Test(engine, static_reregistered_cli_json_and_note)
{
	char path[128], cmd[1024], buf[8192];
	static_trace(path, sizeof path, 0, 6, 6);
	snprintf(cmd, sizeof cmd, "'%s' run %s --policy pytorch --no-db --json --quiet",
		 th_bin(), path);
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
	cr_assert(strstr(buf, "\"static_replaced\":1"), "%s", buf);
	cr_assert(strstr(buf, "1 static (module) allocations re-registered at a live address"),
		  "%s", buf);
	snprintf(cmd, sizeof cmd, "'%s' run %s --policy cuda_malloc --no-db --json --quiet --timing",
		 th_bin(), path);
	cr_assert_eq(th_capture(cmd, buf, sizeof buf), 0, "%s", buf);
	cr_assert(strstr(buf, "\"static_replaced\":1"), "%s", buf);
	cr_assert(strstr(buf, "\"peak_requested\":1052672"), "%s", buf);
	unlink(path);
}
