/*
 * test_capture_cupti.c: hand-built CUPTI activity records (the 13.0 struct
 * versions) through the injection library's conversion, no GPU needed.
 *
 * Needs the CUDA toolkit's headers, so it compiles to nothing in `make test`
 * (no -I for CUDA there); `make capture-test` (capture/capture.mk) builds it
 * with the headers, linked with the injection library's sources (the
 * functions and state it reaches are declared in capture/inject_int.h), and
 * runs it on any machine.
 */
#if defined(GPUMEMSIM_CUPTI_TEST) && __has_include(<cupti.h>)

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../capture/inject_int.h"

struct cupti_sink {
	struct trace_rec recs[32];
	uint64_t links[32][TRACE_MAX_LINKS]; /* recs[i]'s kernel links (the converter's are reused) */
	int n;
	char *strs[32];
	uint32_t nstrs;
};

static uint32_t cs_intern(void *ctx, const char *s)
{
	struct cupti_sink *m = ctx;
	for (uint32_t i = 0; i < m->nstrs; i++)
		if (!strcmp(m->strs[i], s))
			return i;
	m->strs[m->nstrs] = strdup(s);
	return m->nstrs++;
}

static int cs_record(void *ctx, const struct trace_rec *rec)
{
	struct cupti_sink *m = ctx;
	cr_assert_lt(m->n, 32);
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

static struct cupti_sink sink;

static void setup(void)
{
	struct cap_sink s = {&sink, cs_intern, cs_record};
	memset(&sink, 0, sizeof(sink));
	cap_conv = cap_conv_new(&s);
	cr_assert_not_null(cap_conv);
}

static void teardown(void)
{
	cap_conv_free(cap_conv);
	cap_conv = NULL;
	for (uint32_t i = 0; i < sink.nstrs; i++)
		free(sink.strs[i]);
}

TestSuite(capture_cupti, .init = setup, .fini = teardown);

Test(capture_cupti, kernel_memcpy_memset_sync)
{
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = 2000;
	k.end = 2500;
	k.streamId = 7;
	k.gridX = 97; k.gridY = 1; k.gridZ = 1;
	k.blockX = 256; k.blockY = 1; k.blockZ = 1;
	k.registersPerThread = 16;
	k.staticSharedMemory = 1024;
	k.dynamicSharedMemory = 512;
	k.correlationId = 129;
	k.name = "_Z4fillPfif";
	cap_activity((CUpti_Activity *)&k);

	CUpti_ActivityMemcpy6 c;
	memset(&c, 0, sizeof(c));
	c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	c.bytes = 98760;
	c.start = 1000;
	c.end = 1100;
	c.streamId = 7;
	c.correlationId = 140;
	cap_activity((CUpti_Activity *)&c);

	CUpti_ActivityMemset4 m;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	m.bytes = 1 << 20;
	m.start = 1500;
	m.end = 1510;
	m.streamId = 7;
	m.correlationId = 124;
	cap_activity((CUpti_Activity *)&m);

	CUpti_ActivitySynchronization2 y;
	memset(&y, 0, sizeof(y));
	y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
	y.start = 3000;
	y.end = 3100;
	y.streamId = 0xffffffffu;
	y.correlationId = 141;
	cap_activity((CUpti_Activity *)&y);

	/* A kernel whose timestamps never arrived counts as dropped. */
	k.start = k.end = 0;
	cap_activity((CUpti_Activity *)&k);
	cr_assert_eq(atomic_load(&cap_zero_time), 1);

	cr_assert_eq(cap_conv_emit_all(cap_conv), 0);
	cr_assert_eq(sink.n, 4);
	cr_assert_eq(sink.recs[0].type, TREC_MEMCPY);
	cr_assert_eq(sink.recs[0].u.copy.kind, TCOPY_DTOH);
	cr_assert_eq(sink.recs[0].u.copy.bytes, 98760);
	cr_assert_eq(sink.recs[1].type, TREC_MEMSET);
	cr_assert_eq(sink.recs[1].u.copy.bytes, 1 << 20);
	const struct trace_rec *kr = &sink.recs[2];
	cr_assert_eq(kr->type, TREC_KERNEL);
	cr_assert_eq(kr->end, 2500);
	cr_assert_str_eq(sink.strs[kr->u.kernel.name], "_Z4fillPfif");
	cr_assert_eq(kr->u.kernel.grid[0], 97);
	cr_assert_eq(kr->u.kernel.block[0], 256);
	cr_assert_eq(kr->u.kernel.smem, 1536);
	cr_assert_eq(kr->u.kernel.regs, 16);
	cr_assert_eq(kr->u.kernel.corr, 129);
	cr_assert_eq(sink.recs[3].type, TREC_SYNC);
	cr_assert_eq(sink.recs[3].u.sync.kind, TSYNC_CONTEXT);
	cr_assert_eq(sink.recs[3].u.sync.stream, TRACE_NO_STREAM);
}

Test(capture_cupti, memory_records)
{
	CUpti_ActivityMemory4 a;
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	a.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	a.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	a.correlationId = 142;
	a.address = 0x302000000ull;
	a.bytes = 2 << 20;
	a.timestamp = 100;
	a.streamId = 13;
	a.isAsync = 1;
	a.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
	a.source = "libtorch_cuda.so";
	cap_activity((CUpti_Activity *)&a);
	a.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
	a.timestamp = 200;
	a.source = NULL;
	cap_activity((CUpti_Activity *)&a);
	CUpti_ActivityMemory4 p;
	memset(&p, 0, sizeof(p));
	p.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	p.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	p.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	p.address = 0x7f0000000000ull;
	p.bytes = 4096;
	p.timestamp = 50;
	p.streamId = 0xffffffffu;
	cap_activity((CUpti_Activity *)&p);
	CUpti_ActivityMemoryPool3 pool;
	memset(&pool, 0, sizeof(pool));
	pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
	cap_activity((CUpti_Activity *)&pool);
	cr_assert_eq(atomic_load(&cap_pool_records), 1, "pool records counted, not written");

	cr_assert_eq(cap_conv_emit_all(cap_conv), 0);
	cr_assert_eq(sink.n, 3);
	cr_assert_eq(sink.recs[0].type, TREC_ALLOC);
	cr_assert_eq(sink.recs[0].u.mem.id, 0);
	cr_assert_eq(sink.recs[0].u.mem.flags, 0);
	cr_assert_eq(sink.recs[0].u.mem.stream, TRACE_NO_STREAM);
	cr_assert_eq(sink.recs[0].u.mem.source, TRACE_NO_STRING);
	const struct trace_mem *m = &sink.recs[1].u.mem;
	cr_assert_eq(sink.recs[1].type, TREC_ALLOC);
	cr_assert_eq(m->id, 1);
	cr_assert_eq(m->addr, 0x302000000ull);
	cr_assert_eq(m->bytes, 2 << 20);
	cr_assert_eq(m->stream, 13);
	cr_assert_eq(m->kind, TMEM_DEVICE);
	cr_assert_eq(m->flags, TMEM_F_ASYNC | TMEM_F_POOL);
	cr_assert_eq(m->corr, 142);
	cr_assert_str_eq(sink.strs[m->source], "libtorch_cuda.so");
	cr_assert_eq(sink.recs[2].type, TREC_FREE);
	cr_assert_eq(sink.recs[2].start, 200);
}

Test(capture_cupti, api_records_filtered_by_name)
{
	CUpti_ActivityAPI p;
	memset(&p, 0, sizeof(p));
	cap_rt_names[CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020] = "cudaMalloc";
	p.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	p.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020;
	p.start = 10;
	p.end = 90;
	p.correlationId = 121;
	cap_activity((CUpti_Activity *)&p);
	p.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020;  /* not in the table here */
	cap_activity((CUpti_Activity *)&p);
	p.cbid = 100000;                                   /* out of range */
	cap_activity((CUpti_Activity *)&p);
	cr_assert_eq(cap_conv_emit_all(cap_conv), 0);
	cr_assert_eq(sink.n, 1);
	cr_assert_eq(sink.recs[0].type, TREC_API);
	cr_assert_str_eq(sink.strs[sink.recs[0].u.api.name], "cudaMalloc");
	cr_assert_eq(sink.recs[0].u.api.corr, 121);
	cr_assert_eq(sink.recs[0].end, 90);
}

/* One API call through the callbacks as CUPTI makes them: entry, exit. */
static void api_call_p(CUpti_CallbackDomain dom, CUpti_CallbackId id, uint32_t corr,
		       uint64_t *slot, void (*inner)(void), const void *params)
{
	CUpti_CallbackData cb;
	memset(&cb, 0, sizeof(cb));
	cb.functionParams = params;
	cb.correlationId = corr;
	cb.correlationData = slot;
	cb.callbackSite = CUPTI_API_ENTER;
	if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
		cap_runtime_cb(id, &cb);
	else
		cap_driver_cb(id, &cb);
	if (inner)
		inner();
	cb.callbackSite = CUPTI_API_EXIT;
	if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
		cap_runtime_cb(id, &cb);
	else
		cap_driver_cb(id, &cb);
}

static void api_call(CUpti_CallbackDomain dom, CUpti_CallbackId id, uint32_t corr,
		     uint64_t *slot, void (*inner)(void))
{
	api_call_p(dom, id, corr, slot, inner, NULL);
}

static void nested_cuMemAlloc(void)
{
	uint64_t slot = 0;
	api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 301, &slot, NULL);
}

/* GPUMEMSIM_CAPTURE_API=callbacks: kept calls timed in our callbacks; a
 * driver call inside a kept runtime call is part of it, not a record. */
Test(capture_cupti, api_timed_in_callbacks)
{
	uint64_t s1 = 0, s2 = 0, s3 = 0;
	cap_api_mode = CAP_API_CALLBACKS;
	cap_links_on = 0;
	cap_rt_names[CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020] = "cudaMalloc";
	cap_drv_names[CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2] = "cuMemAlloc";
	cap_drv_names[CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel] = "cuLaunchKernel";
	api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 300, &s1,
		 nested_cuMemAlloc);
	api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 302, &s2, NULL);
	/* a call whose name the trace does not keep */
	api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 303, &s3,
		 NULL);
	cr_assert_eq(cap_in_runtime, 0, "nesting balanced");
	cap_stage_drain();
	cr_assert_eq(cap_conv_emit_all(cap_conv), 0);
	cr_assert_eq(sink.n, 2, "cudaMalloc and cuLaunchKernel only, got %d", sink.n);
	uint64_t corr[2] = {sink.recs[0].u.api.corr, sink.recs[1].u.api.corr};
	int malloc_first = corr[0] == 300;
	const struct trace_rec *m = &sink.recs[malloc_first ? 0 : 1];
	const struct trace_rec *l = &sink.recs[malloc_first ? 1 : 0];
	cr_assert_eq(m->type, TREC_API);
	cr_assert_str_eq(sink.strs[m->u.api.name], "cudaMalloc");
	cr_assert_eq(m->u.api.corr, 300);
	cr_assert_str_eq(sink.strs[l->u.api.name], "cuLaunchKernel");
	cr_assert_eq(l->u.api.corr, 302);
	cr_assert_leq(m->start, m->end);
	cr_assert_leq(l->start, l->end);
	cap_api_mode = CAP_API_ACTIVITY;
	api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 304, &s2, NULL);
	cap_stage_drain();
	cr_assert_eq(cap_conv_emit_all(cap_conv), 0);
	cr_assert_eq(sink.n, 2, "activity mode: no records from callbacks");
	cap_api_mode = CAP_API_CALLBACKS;
	cap_links_on = 1;
}

static void nested_cuCtxSynchronize(void)
{
	uint64_t slot = 0;
	api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, 402, &slot, NULL);
}

/* Sync records from the sync calls' callbacks (no SYNCHRONIZATION
 * activity): kind from the call, the stream from its parameters, one
 * record for a runtime call and the driver call it makes. */
Test(capture_cupti, syncs_from_callbacks)
{
	uint64_t slot = 0;
	cudaStreamSynchronize_v3020_params sp = {NULL};
	cudaStreamWaitEvent_v3020_params wp = {NULL, NULL, 0};
	cap_api_mode = CAP_API_OFF;
	cap_links_on = 0;
	cap_sync_cb = 1;
	api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 401,
		 &slot, nested_cuCtxSynchronize);
	api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, 403,
		 &slot, NULL);
	api_call_p(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 404,
		   &slot, NULL, &sp);
	api_call_p(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, 405,
		   &slot, NULL, &wp);
	api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, 406, &slot, NULL);
	/* not a sync: nothing */
	api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 407, &slot, NULL);
	cap_stage_drain();
	cr_assert_eq(cap_conv_emit_all(cap_conv), 0);
	cr_assert_eq(sink.n, 5, "got %d records", sink.n);
	static const struct { uint64_t corr; uint32_t kind; } want[] = {
		{401, TSYNC_CONTEXT}, {403, TSYNC_EVENT}, {404, TSYNC_STREAM},
		{405, TSYNC_STREAM_WAIT_EVENT}, {406, TSYNC_CONTEXT}};
	for (int w = 0; w < 5; w++) {
		int found = 0;
		for (int i = 0; i < sink.n; i++)
			if (sink.recs[i].type == TREC_SYNC && sink.recs[i].u.sync.corr == want[w].corr) {
				cr_assert_eq(sink.recs[i].u.sync.kind, want[w].kind, "corr %lu",
					     (unsigned long)want[w].corr);
				cr_assert_leq(sink.recs[i].start, sink.recs[i].end);
				found++;
			}
		cr_assert_eq(found, 1, "corr %lu: %d records", (unsigned long)want[w].corr, found);
	}
	cap_sync_cb = 0;
	cap_api_mode = CAP_API_CALLBACKS;
	cap_links_on = 1;
}

static void marker(uint32_t flags, uint32_t id, uint32_t thread, uint64_t t, const char *name)
{
	CUpti_ActivityMarker2 m;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MARKER;
	m.flags = (CUpti_ActivityFlag)flags;
	m.id = id;
	m.timestamp = t;
	m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	m.objectId.pt.threadId = thread;
	m.name = name;
	cap_activity((CUpti_Activity *)&m);
}

Test(capture_cupti, nvtx_ranges_pair_and_nest)
{
	marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 1, 5, 100, "train");
	marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 2, 5, 110, "step");
	marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 3, 6, 115, "other_thread");
	marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 2, 5, 150, NULL);
	marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 3, 6, 160, NULL);
	marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 1, 5, 200, NULL);
	marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 9, 5, 210, NULL);  /* never opened: ignored */
	cr_assert_eq(cap_conv_emit_all(cap_conv), 0);
	cr_assert_eq(sink.n, 3);
	cr_assert_str_eq(sink.strs[sink.recs[0].u.range.name], "train");
	cr_assert_eq(sink.recs[0].u.range.depth, 0);
	cr_assert_eq(sink.recs[0].end, 200);
	cr_assert_str_eq(sink.strs[sink.recs[1].u.range.name], "step");
	cr_assert_eq(sink.recs[1].u.range.depth, 1);
	cr_assert_eq(sink.recs[1].start, 110);
	cr_assert_eq(sink.recs[1].end, 150);
	cr_assert_str_eq(sink.strs[sink.recs[2].u.range.name], "other_thread");
	cr_assert_eq(sink.recs[2].u.range.depth, 0);
	cr_assert_eq(cap_nranges, 0);
}

/* Kernels and copies launched from a CUDA graph keep its identity; a
 * module's globals are freed when the module unloads; records of work mark
 * the process as one that leaves a trace. */
Test(capture_cupti, graph_ids_and_module_unload)
{
	atomic_store(&cap_has_work, 0);
	CUpti_ActivityMemory4 s;
	memset(&s, 0, sizeof(s));
	s.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	s.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC;
	s.address = 0x303600200ull;
	s.bytes = 256;
	s.timestamp = 1000;
	s.contextId = 0;   /* the context of the module event below (NULL -> 0) */
	s.streamId = 0xffffffffu;
	cap_activity((CUpti_Activity *)&s);
	cr_assert_eq(atomic_load(&cap_has_work), 0, "module globals alone are not work");

	CUpti_ModuleResourceData md = {.moduleId = 4};
	CUpti_ResourceData rd = {.context = NULL, .resourceDescriptor = &md};
	cap_module_event(CUPTI_CBID_RESOURCE_MODULE_LOADED, &rd);
	/* the unload at a chosen time (the callback stamps CUPTI's clock) */
	cap_module_stage(CAP_MODULE_UNLOADING, 0, 4, 3000);

	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = 2000;
	k.end = 2100;
	k.streamId = 7;
	k.gridX = k.gridY = k.gridZ = k.blockX = k.blockY = k.blockZ = 1;
	k.correlationId = 55;
	k.graphId = 3;
	k.graphNodeId = 77;
	k.name = "in_graph";
	cap_activity((CUpti_Activity *)&k);
	cr_assert_eq(atomic_load(&cap_has_work), 1);

	CUpti_ActivityMemcpy6 c;
	memset(&c, 0, sizeof(c));
	c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
	c.bytes = 64;
	c.start = 2200;
	c.end = 2210;
	c.streamId = 7;
	c.correlationId = 55;
	c.graphId = 3;
	c.graphNodeId = 78;
	cap_activity((CUpti_Activity *)&c);

	pthread_mutex_lock(&cap_lock);
	cap_stage_drain();
	pthread_mutex_unlock(&cap_lock);
	cr_assert_eq(cap_conv_emit_all(cap_conv), 0);
	cr_assert_eq(sink.n, 4);
	cr_assert_eq(sink.recs[0].type, TREC_ALLOC);
	cr_assert_eq(sink.recs[0].u.mem.kind, TMEM_DEVICE_STATIC);
	cr_assert_eq(sink.recs[1].type, TREC_KERNEL);
	cr_assert_eq(sink.recs[1].u.kernel.graph, 3);
	cr_assert_eq(sink.recs[1].u.kernel.graph_node, 77);
	cr_assert_eq(sink.recs[2].type, TREC_MEMCPY);
	cr_assert_eq(sink.recs[2].u.copy.graph, 3);
	cr_assert_eq(sink.recs[2].u.copy.graph_node, 78);
	cr_assert_eq(sink.recs[3].type, TREC_FREE);
	cr_assert_eq(sink.recs[3].u.mem.addr, 0x303600200ull);
	cr_assert_eq(sink.recs[3].u.mem.kind, TMEM_DEVICE_STATIC);
	struct cap_stats st;
	cap_conv_stats(cap_conv, &st);
	cr_assert_eq(st.module_frees, 1);
}

#else
/* Without the CUDA headers (plain `make test`) this file is empty. */
typedef int test_capture_cupti_needs_cuda;
#endif
