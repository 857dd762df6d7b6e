/*
 * inject_callbacks.c: the injection library's CUPTI callbacks (inject.c):
 * module loads and unloads (resource domain); allocation, free and launch
 * calls for the links (inject_links.c); the kept API calls and the sync
 * calls timed with CUPTI's clock on entry and exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "inject_int.h"

/* Nesting of tracked runtime calls on this thread: driver calls made inside
 * them are the runtime's own and must not be counted twice. */
__thread int cap_in_runtime;

/* The capture's own time on this thread (the `p` record's own_ns and
 * own_cbs, traces/FORMAT.md): what the timing model takes out of the host
 * gaps, measured rather than estimated. own_acc: ns inside cap_callback in
 * finished invocations; own_t0: entry of the one in progress; own_n:
 * callbacks so far; *_mark: both at the previous kept call's end;
 * *_enter: both at the kept call in progress's start (its corr in
 * own_corr). Only the outermost call is timed (cap_runtime_cb), so one
 * slot per thread holds it. */
static __thread uint64_t own_acc, own_t0, own_mark, own_enter, own_corr;
static __thread uint32_t own_n, own_n_mark, own_n_enter;
static __thread int own_depth;

static uint64_t own_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The capture's time on this thread so far, the invocation in progress
 * included up to now. */
static uint64_t own_now(void)
{
	return own_acc + (own_clock() - own_t0);
}

/* A module loaded or is about to unload (CUPTI resource callback, on the
 * thread that called the driver). The converter frees the module's
 * globals at the unload (convert.h); the parameter caches forget every
 * handle, which may name another function from now on. */
void cap_module_event(CUpti_CallbackId id, const CUpti_ResourceData *rd)
{
	const CUpti_ModuleResourceData *md = rd ? rd->resourceDescriptor : NULL;
	uint32_t ctx = 0;
	if (!md)
		return;
	if (id == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)
		cap_params_forget();
	if (!(cap_record_bits & CAP_REC_MEMORY))
		return;
	if (rd->context)
		cuptiGetContextId(rd->context, &ctx);
	uint64_t t = 0;
	cuptiGetTimestamp(&t);
	if (cap_debug && atomic_fetch_add(&cap_debug_lines, 1) < 200)
		fprintf(stderr, "gpumemsim capture debug: module %s ctx %u id %u t %llu\n",
			id == CUPTI_CBID_RESOURCE_MODULE_LOADED ? "loaded" : "unloading", ctx,
			md->moduleId, (unsigned long long)t);
	cap_module_stage(id == CUPTI_CBID_RESOURCE_MODULE_LOADED ? CAP_MODULE_LOADED
								  : CAP_MODULE_UNLOADING,
			 ctx, md->moduleId, t);
}

/* CUPTI's id of a stream handle as a sync call passed it (the legacy and
 * per-thread default streams have special handles). */
static uint32_t cap_stream_of(const CUpti_CallbackData *cb, CUstream h, int ptsz)
{
	uint32_t id = 0;
	if (h == CU_STREAM_LEGACY)
		h = NULL;
	else if (h == CU_STREAM_PER_THREAD)
		h = NULL, ptsz = 1;
	if (cuptiGetStreamIdEx(cb->context, h, (uint8_t)ptsz, &id) != CUPTI_SUCCESS)
		return TRACE_NO_STREAM;
	return id;
}

/* The sync calls (cap_sync_cb) and the `y` record each makes. The stream
 * of a stream sync or wait is the first parameter of every one of them. */
const struct cap_sync_call cap_sync_calls[] = {
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, TSYNC_CONTEXT, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020, TSYNC_CONTEXT, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, TSYNC_EVENT, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, TSYNC_STREAM, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, TSYNC_STREAM, 1},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
	 TSYNC_STREAM_WAIT_EVENT, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000,
	 TSYNC_STREAM_WAIT_EVENT, 1},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, TSYNC_CONTEXT, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, TSYNC_CONTEXT, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, TSYNC_EVENT, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, TSYNC_STREAM, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, TSYNC_STREAM, 1},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, TSYNC_STREAM_WAIT_EVENT, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz,
	 TSYNC_STREAM_WAIT_EVENT, 1},
};
const size_t cap_nsync_calls = sizeof(cap_sync_calls) / sizeof(cap_sync_calls[0]);

/* 1 and the `y` record's kind and stream in *Y when (DOM, ID) is a sync
 * call; 0 otherwise. */
static int cap_sync_of(CUpti_CallbackDomain dom, CUpti_CallbackId id, const CUpti_CallbackData *cb,
		       struct trace_sync *y)
{
	for (size_t i = 0; i < sizeof(cap_sync_calls) / sizeof(cap_sync_calls[0]); i++) {
		const struct cap_sync_call *c = &cap_sync_calls[i];
		if (c->dom != dom || c->id != id)
			continue;
		y->kind = c->kind;
		y->corr = cb->correlationId;
		y->stream = TRACE_NO_STREAM;
		if ((c->kind == TSYNC_STREAM || c->kind == TSYNC_STREAM_WAIT_EVENT) && cb->functionParams)
			y->stream = cap_stream_of(cb, *(const CUstream *)cb->functionParams, c->ptsz);
		return 1;
	}
	return 0;
}

/* Time one call in its callbacks: CUPTI's clock on entry, stored in the
 * call's correlationData, and on exit, when its records are staged: the
 * `p` record of a kept call (CAP_API_CALLBACKS) and the `y` record of a
 * sync call (cap_sync_cb). Called after the entry work and before the exit
 * work of the link callbacks, so their scanning is not counted as the
 * call's time. NAME: the kept name of the call, NULL if not kept. */
static void cap_api_time(CUpti_CallbackDomain dom, CUpti_CallbackId id, const CUpti_CallbackData *cb,
			 int enter, const char *name)
{
	struct cap_rec r;
	int api = cap_api_mode == CAP_API_CALLBACKS && name;
	memset(&r, 0, sizeof(r));
	int sync = cap_sync_cb && cap_sync_of(dom, id, cb, &r.rec.u.sync);
	if ((!api && !sync) || !cb->correlationData)
		return;
	uint64_t now = 0;
	cuptiGetTimestamp(&now);
	if (enter) {
		*cb->correlationData = now;
		if (api) {
			own_enter = own_now();
			own_n_enter = own_n;
			own_corr = cb->correlationId;
		}
		return;
	}
	r.rec.start = *cb->correlationData ? *cb->correlationData : now;
	r.rec.end = now;
	if (sync) {
		r.rec.type = TREC_SYNC;
		cap_api_stage_push(&r);
	}
	if (api) {
		memset(&r.rec.u, 0, sizeof(r.rec.u));
		r.rec.type = TREC_API;
		r.rec.u.api.corr = cb->correlationId;
		if (own_corr == cb->correlationId && own_mark) {
			/* the gap from the previous kept call's end to this
			 * one's start, not the first call of a thread's */
			r.rec.u.api.own_ns = own_enter - own_mark;
			r.rec.u.api.own_cbs = own_n_enter - own_n_mark;
			r.rec.u.api.has_own = 1;
		}
		own_mark = own_now();
		own_n_mark = own_n;
		r.name = name;
		cap_api_stage_push(&r);
	}
}

/* Layout of __cudaLaunchKernel's parameters (no params struct in 13.0's
 * generated headers; the signature is in crt/device_functions.h). */
struct cap_rt_launch13 {
	void *kernel;
	dim3 grid, block;
	void **args;
	size_t smem;
	cudaStream_t stream;
};

/* ------------------------------------------------------------- callbacks */

static int cap_ok(const CUpti_CallbackData *cb, int runtime)
{
	if (!cb->functionReturnValue)
		return 0;
	return runtime ? *(const cudaError_t *)cb->functionReturnValue == cudaSuccess
		       : *(const CUresult *)cb->functionReturnValue == CUDA_SUCCESS;
}

/* The callbacks below differ only in which params struct each API passes,
 * so the three things they do are written once here. An allocation's out
 * pointer is filled only on a successful exit; a free and a launch are
 * seen on entry, while the pointer and the arguments are still valid.
 * P names the params struct inside the ARGS of CAP_ON_LAUNCH. */
#define CAP_ON_ALLOC(params_t, ptr_field, size_field, runtime)                  \
	do {                                                                    \
		if (!enter && cap_ok(cb, runtime)) {                            \
			const params_t *p = cb->functionParams;                 \
			cap_live_insert((uint64_t)(uintptr_t)*p->ptr_field,     \
					p->size_field, cb->correlationId);      \
		}                                                               \
	} while (0)
#define CAP_ON_FREE(params_t, ptr_field)                                        \
	do {                                                                    \
		if (enter)                                                      \
			cap_live_remove((uint64_t)(uintptr_t)(                  \
				(const params_t *)cb->functionParams)->ptr_field); \
	} while (0)
#define CAP_ON_LAUNCH(params_t, info, args, extra)                              \
	do {                                                                    \
		if (enter) {                                                    \
			const params_t *p = cb->functionParams;                 \
			cap_launch(cb->correlationId, info, args, extra);       \
		}                                                               \
	} while (0)

static void cap_runtime_links(CUpti_CallbackId id, const CUpti_CallbackData *cb, int enter);
static void cap_driver_links(CUpti_CallbackId id, const CUpti_CallbackData *cb, int enter);

/* One call the capture follows, entry or exit: timed around the link
 * work (see cap_api_time). */
static void cap_call(CUpti_CallbackDomain dom, CUpti_CallbackId id, const CUpti_CallbackData *cb)
{
	int enter = cb->callbackSite == CUPTI_API_ENTER;
	int rt = dom == CUPTI_CB_DOMAIN_RUNTIME_API;
	const char *name = rt ? (id < CUPTI_RUNTIME_TRACE_CBID_SIZE ? cap_rt_names[id] : NULL)
			      : (id < CUPTI_DRIVER_TRACE_CBID_SIZE ? cap_drv_names[id] : NULL);
	if (!enter)
		cap_api_time(dom, id, cb, 0, name);
	if (cap_links_on)
		(rt ? cap_runtime_links : cap_driver_links)(id, cb, enter);
	if (enter)
		cap_api_time(dom, id, cb, 1, name);
}

/* Only the outermost of nested runtime calls is timed and scanned: an
 * inner call belongs to the outer one's record. */
void cap_runtime_cb(CUpti_CallbackId id, const CUpti_CallbackData *cb)
{
	int enter = cb->callbackSite == CUPTI_API_ENTER;
	if (id == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) {
		if (enter)
			cap_flush_now(1);
		return;
	}
	cap_in_runtime += enter ? 1 : -1;
	if ((enter ? cap_in_runtime : cap_in_runtime + 1) != 1)
		return;
	cap_call(CUPTI_CB_DOMAIN_RUNTIME_API, id, cb);
}

static void cap_runtime_links(CUpti_CallbackId id, const CUpti_CallbackData *cb, int enter)
{
	switch (id) {
	case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
		CAP_ON_ALLOC(cudaMalloc_v3020_params, devPtr, size, 1);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
	case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
		CAP_ON_ALLOC(cudaMallocAsync_v11020_params, devPtr, size, 1);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
	case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
		CAP_ON_ALLOC(cudaMallocFromPoolAsync_v11020_params, ptr, size, 1);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
		CAP_ON_FREE(cudaFree_v3020_params, devPtr);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
	case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
		CAP_ON_FREE(cudaFreeAsync_v11020_params, devPtr);
		break;
	case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
	case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
		CAP_ON_LAUNCH(struct cap_rt_launch13, cap_param_info(p->kernel, 1), p->args, NULL);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
		CAP_ON_LAUNCH(cudaLaunchKernel_v7000_params, cap_stub_params(p->func), p->args, NULL);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
		CAP_ON_LAUNCH(cudaLaunchKernelExC_v11060_params, cap_stub_params(p->func), p->args, NULL);
		break;
	default:
		break;
	}
}

/* A driver call made inside a runtime call the trace keeps is that
 * call's work (cudaMalloc's cuMemAlloc): neither timed nor scanned again. */
void cap_driver_cb(CUpti_CallbackId id, const CUpti_CallbackData *cb)
{
	if (!cap_in_runtime)
		cap_call(CUPTI_CB_DOMAIN_DRIVER_API, id, cb);
}

static void cap_driver_links(CUpti_CallbackId id, const CUpti_CallbackData *cb, int enter)
{
	switch (id) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
		CAP_ON_ALLOC(cuMemAlloc_v2_params, dptr, bytesize, 0);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
		CAP_ON_ALLOC(cuMemAllocAsync_params, dptr, bytesize, 0);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
		CAP_ON_ALLOC(cuMemAllocFromPoolAsync_params, dptr, bytesize, 0);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
		CAP_ON_FREE(cuMemFree_v2_params, dptr);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
		CAP_ON_FREE(cuMemFreeAsync_params, dptr);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
		CAP_ON_LAUNCH(cuLaunchKernel_params, cap_param_info(p->f, 0), p->kernelParams, p->extra);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
		CAP_ON_LAUNCH(cuLaunchKernelEx_params, cap_param_info(p->f, 0), p->kernelParams, p->extra);
		break;
	default:
		break;
	}
}

#undef CAP_ON_ALLOC
#undef CAP_ON_FREE
#undef CAP_ON_LAUNCH

static void cap_dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data);

void CUPTIAPI cap_callback(void *userdata, CUpti_CallbackDomain domain,
				  CUpti_CallbackId id, const void *data)
{
	(void)userdata;
	if (!atomic_load(&cap_active))
		return;
	if (domain == CUPTI_CB_DOMAIN_NVTX) {
		/* not an API call: outside the own-time accounting */
		cap_nvtx_cb(id, data);
		return;
	}
	if (own_depth++) {
		/* a callback inside ours (a driver call we make): the outer
		 * invocation's time holds it */
		cap_dispatch(domain, id, data);
		own_depth--;
		return;
	}
	own_t0 = own_clock();
	own_n++;
	cap_dispatch(domain, id, data);
	own_acc += own_clock() - own_t0;
	own_depth--;
}

static void cap_dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data)
{
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
		cap_runtime_cb(id, data);
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
		cap_driver_cb(id, data);
	else if (domain == CUPTI_CB_DOMAIN_RESOURCE &&
		 (id == CUPTI_CBID_RESOURCE_MODULE_LOADED ||
		  id == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING))
		cap_module_event(id, data);
}
