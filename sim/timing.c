/*
 * timing.c: the timeline model's corrections in the engine's timed replay
 * (docs/timing.md, "Timeline model").
 *
 * The replay runs the host thread, the streams and the GPU as resources
 * (engine.c): the host issues each record at its recorded time plus the
 * delay the model has built up; GPU work is queued on its stream when its
 * launch returns; a sync or a cudaFree waits for the simulated device.
 * What this file adds is what makes the captured host timeline the
 * uncaptured one:
 *
 *  - every recorded API call cost the captured host cap_api_ns outside the
 *    call (CUPTI's callbacks, the record's bookkeeping), in the host gap
 *    before it (a cudaMalloc/cudaFree: cap_mem_ns instead, its callback
 *    and the allocation's source lookup); an NVTX range cap_range_ns (the injection library);
 *    and cap_cb_ns per CUPTI callback since the previous API record,
 *    counted by correlation ids (the calls the trace does not keep get
 *    callbacks too); and cap_own times the capture's own time the trace
 *    measured in that gap (a 'p' record's own_ns); each comes off the gap
 *    before the record, never below min_gap_ns;
 *  - inside each kept call (a launch, a memset, a sync's own part) the
 *    capture cost cap_call_ns, never below min_gap_ns of call;
 *  - a kernel starts launch_latency_ns after its launch returns at the
 *    earliest;
 *  - a request stream taken from a caching run (run --requests) still has
 *    that allocator's own host cost per a/f record (trace_hit_ns) in its
 *    gaps: it comes off the next gap, the policy then charges its own.
 */
#include "engine_int.h"

static uint64_t ns_of(double v)
{
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

void timing_init(struct engine *e)
{
	const struct cost_model *m = e->cost;
	e->tl_gpu = m && m->gpu_scale > 0 ? m->gpu_scale : 1.0;
	e->tlm = m && m->timeline;
	if (!e->tlm)
		return;
	e->tl_api = ns_of(m->cap_api_ns);
	e->tl_cb = ns_of(m->cap_cb_ns);
	e->tl_last_corr = 0;
	e->tl_mem = ns_of(m->cap_mem_ns);
	e->tl_dev = ns_of(m->dev_call_ns);
	e->tl_frac = m->dev_call_frac;
	e->tl_mem_corr = 0;
	e->tl_range = ns_of(m->cap_range_ns);
	e->tl_own = m->cap_own;
	e->tl_call = ns_of(m->cap_call_ns + m->api_overhead_ns);
	e->tl_min_gap = ns_of(m->min_gap_ns);
	e->tl_latency = ns_of(m->launch_latency_ns);
	e->tl_hit = ns_of(m->trace_hit_ns);
	e->tl_host_end = 0;
	e->tl_pending = 0;
}

/* Before record ER is issued: take the capture's cost of it out of the
 * recorded host gap in front of it (engine.c, replay_one). */
void timing_credit(struct engine *e, const struct eng_rec *er)
{
	const struct trace_rec *r = &er->r;
	uint64_t want, movable = 0;
	switch (r->type) {
	case TREC_API:
		if (er->api_kind == COST_API_MALLOC || er->api_kind == COST_API_FREE) {
			want = e->tl_mem + e->tl_dev;
			movable = e->tl_dev;
			e->tl_mem_corr = r->u.api.corr;
		} else {
			want = e->tl_api;
		}
		if (r->u.api.corr) {
			/* every CUPTI callback since the previous API record,
			 * this one's and those the trace does not keep */
			if (e->tl_last_corr && r->u.api.corr > e->tl_last_corr)
				want += e->tl_cb * (r->u.api.corr - e->tl_last_corr);
			if (r->u.api.corr > e->tl_last_corr)
				e->tl_last_corr = r->u.api.corr;
		}
		if (r->u.api.has_own)
			/* what the capture measured of itself in this gap */
			want += ns_of(e->tl_own * (double)r->u.api.own_ns);
		break;
	case TREC_RANGE:
		want = e->tl_range;
		break;
	case TREC_ALLOC:
	case TREC_FREE:
		/* the recorded allocator's own cost: off the next gap */
		e->tl_pending += e->tl_hit;
		/* the request of a recorded cudaMalloc/cudaFree: the host's
		 * slowdown after it (dev_call_frac of the call's cost, as the
		 * policy's calls are charged) comes off the next gaps */
		if (e->tl_frac > 0 && r->u.mem.corr && r->u.mem.corr == e->tl_mem_corr) {
			const struct cost_curve *c = r->type == TREC_ALLOC ? &e->cost->malloc_c
									 : &e->cost->free_c;
			e->tl_pending += ns_of(e->tl_frac * cost_curve_call_ns(c, r->u.mem.bytes));
			e->tl_mem_corr = 0;
		}
		return;
	default:
		return;
	}
	want += e->tl_pending;
	movable += e->tl_pending;
	e->tl_pending = 0;
	if (!e->tl_host_end)
		e->tl_host_end = r->start;
	uint64_t gap = r->start > e->tl_host_end ? r->start - e->tl_host_end : 0;
	gap = gap > e->tl_min_gap ? gap - e->tl_min_gap : 0;
	uint64_t credit = want < gap ? want : gap;
	e->delay -= credit;
	/* the framework's work around a device call that this gap could not
	 * hold comes off the next ones: PyTorch's no-caching free path calls
	 * cudaFree right after the previous call (median gap 3 us) and does
	 * its work after it, so taken only from the gap in front most of it
	 * would stay in the replay (the capture's own costs stay where they
	 * were spent: in the gap before the record) */
	uint64_t left = want - credit;
	e->tl_pending = left < movable ? left : movable;
	if (r->type == TREC_RANGE) {
		if (r->start > e->tl_host_end)
			e->tl_host_end = r->start;
	} else if (r->end > e->tl_host_end) {
		e->tl_host_end = r->end;
	}
}

/* How much of a kept call's (scaled) duration DUR is the capture's. */
uint64_t timing_call_credit(const struct engine *e, uint64_t dur)
{
	uint64_t room = dur > e->tl_min_gap ? dur - e->tl_min_gap : 0;
	return e->tl_call < room ? e->tl_call : room;
}
