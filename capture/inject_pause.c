/*
 * inject_pause.c: pausing the capture at a training step
 * (GPUMEMSIM_CAPTURE_PAUSE_STEP, `capture --pause-at-step K`).
 *
 * Why: a capture slows the program's host by an amount that changes from
 * one model and one host to the next (docs/timing.md), so the timing model
 * cannot take it out with one constant. Steps of the same process run with
 * the capture paused measure it: same program, same host, same moment.
 *
 * How: an NVTX callback watches the ranges the program pushes. When a range
 * named `step N` with N >= K is pushed, every runtime and driver callback and
 * every activity kind but MARKER is turned off, for the rest of the process:
 * the program runs as if uncaptured, its NVTX ranges still arrive (they cost
 * a few records a step), and each range that started from that moment on is
 * written with the `uncaptured` flag (traces/FORMAT.md). What was recorded
 * before stays a complete trace of the first K steps.
 */
#include <stdio.h>
#include <string.h>

#include <generated_nvtx_meta.h>

#include "inject_int.h"

int cap_pause_step = -1;                  /* GPUMEMSIM_CAPTURE_PAUSE_STEP; -1: never */
atomic_ullong cap_paused_at;              /* CUPTI time of the pause, 0: not paused */
static char cap_pause_name[32];           /* the range that paused it: "step K" */
static int cap_pause_range_seen;          /* its START was flagged (cap_lock held) */

/* Everything but the NVTX ranges off. Runs once, on the thread that pushed
 * the range, inside CUPTI's NVTX callback (CUPTI allows enabling and
 * disabling from a callback). */
static void cap_pause(const char *msg)
{
	static const CUpti_ActivityKind kinds[] = {
		CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMORY2,
		CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
		CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_MEMORY_POOL,
		CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
	};
	uint64_t t = 0;
	cuptiGetTimestamp(&t);
	snprintf(cap_pause_name, sizeof cap_pause_name, "%s", msg);
	atomic_store(&cap_paused_at, t ? t : 1);
	int bad = cuptiEnableDomain(0, cap_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS;
	bad |= cuptiEnableDomain(0, cap_subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS;
	int failed = 0;   /* kinds whose disable failed (one never enabled fails too) */
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		failed |= (cuptiActivityDisable(kinds[i]) != CUPTI_SUCCESS) << i;
	if (cap_source_on)
		cuptiActivityEnableAllocationSource(0);
	if (bad)
		fprintf(stderr, "gpumemsim capture: process %d: could not turn the API callbacks off "
				"at '%s'; the steps after it are not an uncaptured reference\n",
			(int)cap_pid, msg);
	if (cap_verbose)
		fprintf(stderr, "gpumemsim capture: process %d paused at '%s' (activity kinds not "
				"disabled, bits by position: 0x%x)\n", (int)cap_pid, msg, failed);
}

void cap_nvtx_cb(CUpti_CallbackId id, const CUpti_NvtxData *d)
{
	const char *msg = NULL;
	if (cap_pause_step < 0 || atomic_load(&cap_paused_at) || !d || !d->functionParams)
		return;
	if (id == CUPTI_CBID_NVTX_nvtxRangePushA)
		msg = ((const nvtxRangePushA_params *)d->functionParams)->message;
	else if (id == CUPTI_CBID_NVTX_nvtxRangeStartA)
		msg = ((const nvtxRangeStartA_params *)d->functionParams)->message;
	else if (id == CUPTI_CBID_NVTX_nvtxRangePushEx || id == CUPTI_CBID_NVTX_nvtxRangeStartEx) {
		/* both hold only the attributes */
		const nvtxEventAttributes_t *a = ((const nvtxRangePushEx_params *)d->functionParams)->eventAttrib;
		if (a && a->messageType == NVTX_MESSAGE_TYPE_ASCII)
			msg = a->message.ascii;
	}
	uint64_t n;
	if (trace_step_number(msg, &n) && n >= (uint64_t)cap_pause_step)
		cap_pause(msg);
}

void cap_pause_enable(void)
{
	static const CUpti_CallbackId ids[] = {
		CUPTI_CBID_NVTX_nvtxRangePushA, CUPTI_CBID_NVTX_nvtxRangePushEx,
		CUPTI_CBID_NVTX_nvtxRangeStartA, CUPTI_CBID_NVTX_nvtxRangeStartEx,
	};
	if (cap_pause_step < 0)
		return;
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_NVTX, ids[i]);
}

/* CUPTI stamps a range's START around the push, the pause reads its clock in
 * the push's callback: the pausing range itself may start a little before
 * cap_paused_at. It is recognised by its name (the first such START within
 * CAP_PAUSE_SLACK_NS of the pause); every range that starts at or after the
 * pause ran uncaptured. Called with cap_lock held. */
#define CAP_PAUSE_SLACK_NS 10000000ull
int cap_range_uncaptured(const char *name, uint64_t start)
{
	uint64_t t = atomic_load(&cap_paused_at);
	if (!t)
		return 0;
	if (start >= t)
		return 1;
	if (!cap_pause_range_seen && start + CAP_PAUSE_SLACK_NS >= t && name &&
	    !strcmp(name, cap_pause_name)) {
		cap_pause_range_seen = 1;
		return 1;
	}
	return 0;
}
