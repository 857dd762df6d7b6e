/*
 * inject.c: the CUPTI injection library (build/libgpumemsim_capture.so).
 *
 * The CUDA driver loads it at cuInit when CUDA_INJECTION64_PATH names it and
 * calls InitializeInjection(); NVTX loads the same file through
 * NVTX_INJECTION64_PATH and calls InitializeInjectionNvtx2(). It records the
 * process's GPU activity into one trace (traces/trace.h writer):
 *  - activity records (kernels, copies, memsets, synchronisations, memory
 *    alloc/free, selected host API calls, NVTX ranges) arrive in CUPTI
 *    buffers on CUPTI's threads, out of order; each buffer is converted to
 *    neutral records (capture/convert.h) and queued;
 *  - a writer thread wakes every GPUMEMSIM_CAPTURE_FLUSH_MS, asks CUPTI for
 *    completed records and writes, in time order, everything older than
 *    GPUMEMSIM_CAPTURE_LAG_MS before that moment (the watermark), so memory
 *    stays bounded and a crash leaves a readable trace up to the last flush;
 *  - launch callbacks scan each kernel's parameter words for pointers into
 *    live allocations (kernel-to-buffer links); allocation callbacks keep
 *    that set of live allocations.
 * It makes no CUDA call that synchronises; it never changes the program's
 * output or exit status. If CUPTI cannot start (another profiler holds it),
 * it says so once on stderr and the program runs untraced.
 *
 * This file starts it (InitializeInjection: environment, CUPTI subscribed,
 * activity kinds and callbacks enabled) and holds its settings; the rest is
 * split by concern, listed in inject_int.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject_int.h"

/* Declared here: cupti.h in 13.0 does not, libcupti exports it. */
CUptiResult cuptiNvtxInitialize2(void *pfnGetExportTable);

/* ------------------------------------------------------------- state */

struct cap_conv *cap_conv;
pid_t cap_pid;
int cap_links_on = 1;
/* How host API calls are timed: enum cap_api_mode (inject_int.h). */
enum cap_api_mode cap_api_mode = CAP_API_CALLBACKS;
int cap_source_on = 1;           /* GPUMEMSIM_CAPTURE_SOURCE */
/* Synchronisations (`y`) from callbacks on the sync calls rather than
 * CUPTI's SYNCHRONIZATION activity kind, which slowed a ResNet-50 b32
 * step by x1.27 on its own (capture/README.md). GPUMEMSIM_CAPTURE_SYNCS
 * (`capture --syncs`) chooses. The default stays the activity kind: with
 * callbacks instead, CUPTI did not deliver the MEMORY2 record of a JAX
 * program's first BFC region (2 runs of 2 on the H200; capture/README.md),
 * and the callbacks were not measurably cheaper (x1.17 vs x1.23, runs
 * overlapping). */
#define CAP_SYNCS_CALLBACKS_DEFAULT 0
int cap_sync_cb;
unsigned cap_record_bits = CAP_REC_ALL;   /* GPUMEMSIM_CAPTURE_RECORD */
unsigned cap_flush_ms = 500, cap_lag_ms = 2000;
#define CAP_NO_PAUSE 0xffffffffu
int cap_verbose;
int cap_debug;   /* GPUMEMSIM_CAPTURE_DEBUG: module events and statics on stderr */
atomic_int cap_debug_lines;
CUpti_SubscriberHandle cap_subscriber;
atomic_int cap_active;

/* API names worth a 'p' record, by domain and callback id. */
const char *cap_rt_names[CUPTI_RUNTIME_TRACE_CBID_SIZE];
const char *cap_drv_names[CUPTI_DRIVER_TRACE_CBID_SIZE];

/* ------------------------------------------------------------- sink */

/* The converter writes through these into the trace, which is opened only
 * once the process has done CUDA work (cap_open_trace), so CTX is unused:
 * emission never happens before the writer exists. */
static uint32_t sink_intern(void *ctx, const char *s)
{
	(void)ctx;
	return trace_writer_intern(cap_writer, s);
}

static int sink_record(void *ctx, const struct trace_rec *rec)
{
	(void)ctx;
	return trace_writer_record(cap_writer, rec);
}

/* ------------------------------------------------------------- init */

static unsigned cap_env_uint(const char *name, unsigned def, unsigned lo, unsigned hi)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return def;
	unsigned long v = strtoul(s, &end, 10);
	if (*end || v < lo || v > hi) {
		fprintf(stderr, "gpumemsim capture: %s=%s is not a number in [%u, %u]; using %u\n",
			name, s, lo, hi, def);
		return def;
	}
	return (unsigned)v;
}

/* GPUMEMSIM_CAPTURE_RECORD: everything when unset (or bad: the launcher
 * refuses a bad list; a hand-set one must not stop the capture). */
static unsigned cap_env_record(void)
{
	const char *s = getenv("GPUMEMSIM_CAPTURE_RECORD");
	unsigned bits = CAP_REC_ALL;
	if (s && *s && cap_record_parse(s, &bits) < 0) {
		fprintf(stderr, "gpumemsim capture: GPUMEMSIM_CAPTURE_RECORD=%s: unknown kind; "
				"recording everything\n", s);
		bits = CAP_REC_ALL;
	}
	return bits;
}

/* GPUMEMSIM_CAPTURE_SYNCS: 1 for callbacks on the sync calls, 0 for
 * CUPTI's SYNCHRONIZATION activity kind; CAP_SYNCS_DEFAULT when unset. */
static int cap_env_syncs(void)
{
	const char *s = getenv("GPUMEMSIM_CAPTURE_SYNCS");
	if (!s || !*s)
		return CAP_SYNCS_CALLBACKS_DEFAULT;
	if (!strcmp(s, "callbacks"))
		return 1;
	if (!strcmp(s, "activity"))
		return 0;
	fprintf(stderr, "gpumemsim capture: GPUMEMSIM_CAPTURE_SYNCS=%s is not callbacks or "
			"activity; using %s\n", s, CAP_SYNCS_CALLBACKS_DEFAULT ? "callbacks" : "activity");
	return CAP_SYNCS_CALLBACKS_DEFAULT;
}

/* GPUMEMSIM_CAPTURE_API: callbacks (default), activity or off. */
static enum cap_api_mode cap_env_api_mode(void)
{
	const char *s = getenv("GPUMEMSIM_CAPTURE_API");
	if (!s || !*s || !strcmp(s, "callbacks"))
		return CAP_API_CALLBACKS;
	if (!strcmp(s, "activity"))
		return CAP_API_ACTIVITY;
	if (!strcmp(s, "off"))
		return CAP_API_OFF;
	fprintf(stderr, "gpumemsim capture: GPUMEMSIM_CAPTURE_API=%s is not callbacks, activity "
			"or off; using callbacks\n", s);
	return CAP_API_CALLBACKS;
}

/* "cudaMalloc_v3020" -> "cudaMalloc", "cuStreamSynchronize_ptsz" -> "cuStreamSynchronize". */
static const char *cap_api_name(CUpti_CallbackDomain dom, uint32_t cbid)
{
	static const char *wanted[] = {
		"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync",
		"cudaMallocFromPoolAsync", "cudaLaunchKernel", "cudaLaunchKernelExC",
		"__cudaLaunchKernel", "cudaDeviceSynchronize", "cudaStreamSynchronize",
		"cudaEventSynchronize", "cudaStreamWaitEvent", "cudaMemcpy", "cudaMemcpyAsync",
		"cudaMemset", "cudaMemsetAsync", "cudaDeviceReset",
		"cuMemAlloc", "cuMemFree", "cuMemAllocAsync", "cuMemFreeAsync",
		"cuMemAllocFromPoolAsync", "cuLaunchKernel", "cuLaunchKernelEx", "cuCtxSynchronize",
		"cuStreamSynchronize", "cuEventSynchronize", "cuStreamWaitEvent",
		"cudaGraphLaunch", "cuGraphLaunch", NULL};
	const char *name = NULL;
	char buf[128];
	if (cuptiGetCallbackName(dom, cbid, &name) != CUPTI_SUCCESS || !name)
		return NULL;
	snprintf(buf, sizeof(buf), "%s", name);
	char *v = strrchr(buf, '_');
	if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9')
		*v = '\0';
	size_t l = strlen(buf);
	if (l > 5 && !strcmp(buf + l - 5, "_ptsz"))
		buf[l - 5] = '\0';
	for (int i = 0; wanted[i]; i++)
		if (!strcmp(buf, wanted[i]))
			return strdup(buf);
	return NULL;
}

static int cap_enable(CUpti_ActivityKind k, const char *what)
{
	CUptiResult r = cuptiActivityEnable(k);
	if (r != CUPTI_SUCCESS) {
		const char *msg = NULL;
		cuptiGetResultString(r, &msg);
		fprintf(stderr, "gpumemsim capture: cannot record %s: %s\n", what, msg ? msg : "?");
		return -1;
	}
	return 0;
}

/* Called by the driver at cuInit. Only CUPTI calls here; returns 1 always
 * (0 would make the driver fail cuInit: the program must run regardless). */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
	static int done;
	CUptiResult r;
	const char *msg = NULL;
	if (done++)
		return 1;
	cap_pid = getpid();
	cap_links_on = cap_env_uint("GPUMEMSIM_CAPTURE_LINKS", 1, 0, 1);
	cap_flush_ms = cap_env_uint("GPUMEMSIM_CAPTURE_FLUSH_MS", 500, 10, 60000);
	cap_lag_ms = cap_env_uint("GPUMEMSIM_CAPTURE_LAG_MS", 2000, 0, 600000);
	cap_verbose = cap_env_uint("GPUMEMSIM_CAPTURE_VERBOSE", 0, 0, 1);
	cap_debug = cap_env_uint("GPUMEMSIM_CAPTURE_DEBUG", 0, 0, 1);
	cap_api_mode = cap_env_api_mode();
	cap_source_on = cap_env_uint("GPUMEMSIM_CAPTURE_SOURCE", 1, 0, 1);
	cap_record_bits = cap_env_record();
	/* never (-1) when unset or bad: a bad value must not pause at step 0 */
	unsigned pause = cap_env_uint("GPUMEMSIM_CAPTURE_PAUSE_STEP", CAP_NO_PAUSE, 0, 1000000);
	cap_pause_step = pause == CAP_NO_PAUSE ? -1 : (int)pause;
	const char *rep = getenv("GPUMEMSIM_CAPTURE_REPORT");
	if (rep)
		snprintf(cap_report, sizeof(cap_report), "%s", rep);

	r = cuptiSubscribe(&cap_subscriber, (CUpti_CallbackFunc)cap_callback, NULL);
	if (r != CUPTI_SUCCESS) {
		cuptiGetResultString(r, &msg);
		fprintf(stderr, "gpumemsim capture: CUPTI unavailable (%s; another profiler attached?): "
				"process %d runs untraced\n", msg ? msg : "?", (int)getpid());
		return 1;
	}
	for (uint32_t i = 0; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
		cap_rt_names[i] = cap_api_name(CUPTI_CB_DOMAIN_RUNTIME_API, i);
	for (uint32_t i = 0; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++)
		cap_drv_names[i] = cap_api_name(CUPTI_CB_DOMAIN_DRIVER_API, i);

	struct cap_sink sink = {NULL, sink_intern, sink_record};
	cap_conv = cap_conv_new(&sink);
	u64map_init(&cap_param_cache);
	u64map_init(&cap_stub_cache);
	u64map_init(&cap_param_grave);
	if (!cap_conv || sem_init(&cap_wake, 0, 0) || sem_init(&cap_done, 0, 0)) {
		fprintf(stderr, "gpumemsim capture: out of memory; process %d runs untraced\n", (int)getpid());
		goto fail;
	}

	r = cuptiActivityRegisterCallbacks(cap_buffer_requested, cap_buffer_completed);
	if (r != CUPTI_SUCCESS)
		goto cupti_fail;
	/* The library behind each allocation (cuDNN, cuBLAS, the framework).
	 * CUPTI finds it inside every allocation call, which costs (H200: a
	 * small cudaMalloc 3.8 -> 7.7 us, about 10 us more per MiB on large
	 * ones); GPUMEMSIM_CAPTURE_SOURCE=0 (`capture --no-source`) turns it off
	 * for captures whose host timing matters more than the library names. */
	if (cap_source_on)
		cuptiActivityEnableAllocationSource(1);
	unsigned rec = cap_record_bits;
	if (((rec & CAP_REC_KERNELS) &&
	     cap_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels") < 0) ||
	    ((rec & CAP_REC_MEMORY) && cap_enable(CUPTI_ACTIVITY_KIND_MEMORY2, "allocations") < 0))
		goto fail;
	if (rec & CAP_REC_COPIES) {
		cap_enable(CUPTI_ACTIVITY_KIND_MEMCPY, "copies");
		cap_enable(CUPTI_ACTIVITY_KIND_MEMSET, "memsets");
	}
	cap_sync_cb = (rec & CAP_REC_SYNCS) && cap_env_syncs();
	if ((rec & CAP_REC_SYNCS) && !cap_sync_cb)
		cap_enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronisations");
	if (rec & CAP_REC_MEMORY)
		cap_enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL, "memory pools");
	if (cap_api_mode == CAP_API_ACTIVITY) {
		cap_enable(CUPTI_ACTIVITY_KIND_RUNTIME, "runtime API calls");
		cap_enable(CUPTI_ACTIVITY_KIND_DRIVER, "driver API calls");
	}
	if (rec & CAP_REC_NVTX)
		cap_enable(CUPTI_ACTIVITY_KIND_MARKER, "NVTX ranges");
	for (size_t i = 0; cap_sync_cb && i < cap_nsync_calls; i++)
		cuptiEnableCallback(1, cap_subscriber, cap_sync_calls[i].dom, cap_sync_calls[i].id);
	if (cap_api_mode == CAP_API_CALLBACKS) {
		for (uint32_t i = 0; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
			if (cap_rt_names[i])
				cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, i);
		for (uint32_t i = 0; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++)
			if (cap_drv_names[i])
				cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, i);
	}

	cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
			    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
	/* module unloads: free the module's globals, forget kernel handles */
	cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
			    CUPTI_CBID_RESOURCE_MODULE_LOADED);
	cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
			    CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
	if (cap_links_on) {
		static const CUpti_CallbackId rt[] = {
			CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
			CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
			CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
			CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
			CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
		};
		static const CUpti_CallbackId drv[] = {
			CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
			CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
			CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
			CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
			CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
			CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
			CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
			CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
		};
		for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++)
			cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, rt[i]);
		for (size_t i = 0; i < sizeof(drv) / sizeof(drv[0]); i++)
			cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, drv[i]);
	}
	cap_pause_enable();
	atomic_store(&cap_active, 1);
	if (pthread_create(&cap_thread, NULL, cap_writer_main, NULL) == 0)
		cap_thread_started = 1;
	pthread_atfork(NULL, NULL, cap_atfork_child);
	atexit(cap_atexit);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cap_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, &cap_old_int);
	sigaction(SIGTERM, &sa, &cap_old_term);
	return 1;

cupti_fail:
	cuptiGetResultString(r, &msg);
	fprintf(stderr, "gpumemsim capture: CUPTI unavailable (%s): process %d runs untraced\n",
		msg ? msg : "?", (int)getpid());
fail:
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2);
	cuptiUnsubscribe(cap_subscriber);
	if (cap_writer) {
		trace_writer_abort(cap_writer);
		cap_writer = NULL;
	}
	cap_conv_free(cap_conv);
	cap_conv = NULL;
	return 1;
}

/* Called by NVTX when NVTX_INJECTION64_PATH names this library: hand NVTX
 * to CUPTI so ranges arrive as MARKER activity records. */
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(void *get_export_table)
{
	return cuptiNvtxInitialize2(get_export_table) == CUPTI_SUCCESS;
}
