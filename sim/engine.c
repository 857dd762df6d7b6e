/*
 * engine.c: the discrete-event replay engine (see engine.h).
 *
 * Model. A simulated host thread issues the trace's records in file order,
 * each at its trace time plus the host's accumulated delay. Kernels, copies
 * and memsets go to their stream's FIFO: each starts at max(issue time, when
 * the stream is free) and runs for its recorded duration; its completion is
 * an event in the (time, sequence) queue. A synchronisation makes the host
 * wait until the stream (all streams for a device-wide sync) has drained;
 * when that is later than the trace's own release time, the difference is
 * added to the host's delay, so everything after it shifts. Delay never
 * shrinks: the host cannot run ahead of what the real program did.
 *
 * Memory events happen on the host at their issue time and are the hot
 * path: they touch no heap and no malloc, only an open-addressing table
 * whose slots hold the live entries themselves (one probe, rarely more than
 * one cache miss, and the slot is prefetched a few records ahead) and a map of addresses whose free must be skipped (looked at
 * only while it is non-empty), so memory follows the live set, not the
 * trace length.
 *
 * Parsing text is as costly as simulating it, so a reader thread parses
 * batches of records ahead of the replay (a bounded ring of a few batches:
 * memory stays bounded). The ring carries the reader's own records, read
 * into it in place, with the few things the replay derives from strings
 * worked out by the reader thread (struct eng_rec, 112 bytes), so large
 * batches stay cache-sized and hand-offs between the threads are rare.
 * Records are still replayed strictly in file order, so the thread changes
 * speed, never results.
 *
 * Times reported in results (timeline, events, first OOM) are simulated
 * nanoseconds since the first record's start.
 *
 * Memory outside the framework's allocator (label allocator_source=SUBSTR,
 * docs/markers.md): the reader thread marks each allocation whose source
 * string is not the allocator's (resolved once per string id) or that is a
 * module global; the replay takes it from the device beside the policy and
 * keeps it in its own small map, so the policy's figures stay its own and
 * the hot path of an unlabelled trace gains one flag test.
 *
 * With a cost model (--timing, docs/timing.md) a pre-pass joins GPU
 * records to their launch API records by correlation id, so GPU work is
 * queued when its launch returns on the simulated host rather than at its
 * recorded start; none of that runs, or costs anything, without one.
 */
#include "engine_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/cost.h"
#include "decisions.h"
#include "event_queue.h"
#include "../base/u64map.h"
#include "../base/vec.h"

/* ------------------------------------------------------------- names */

const char *sim_event_kind_name(enum sim_event_kind k)
{
	switch (k) {
	case SIM_EV_PEAK_RESERVED: return "peak_reserved";
	case SIM_EV_OOM: return "oom";
	case SIM_EV_EMPTY_CACHE: return "empty_cache";
	case SIM_EV_TRACE_OOM: return "trace_oom";
	}
	return "unknown";
}

/* ------------------------------------------------------------ helpers */

void add_event(struct engine *e, enum sim_event_kind kind, uint64_t t,
		      uint64_t bytes, uint64_t line, const char *detail)
{
	struct sim_result *r = e->res;
	/* one slot stays free for the peak-reserved event added at the end */
	if (r->nevents + 1 >= SIM_MAX_EVENTS && kind != SIM_EV_PEAK_RESERVED)
		return;
	if (!r->events) {
		r->events = calloc(SIM_MAX_EVENTS, sizeof *r->events);
		if (!r->events)
			return;
	}
	struct sim_event *ev = &r->events[r->nevents++];
	ev->kind = kind;
	ev->t = t;
	ev->bytes = bytes;
	ev->line = line;
	snprintf(ev->detail, sizeof ev->detail, "%s", detail ? detail : "");
}

/* A bucket keeps the maxima of what fell into it. */
static inline void tl_fold(struct tl_bucket *b, uint64_t alloc, uint64_t res)
{
	if (!b->filled) {
		b->filled = 1;
		b->alloc = alloc;
		b->res = res;
	} else {
		if (alloc > b->alloc) b->alloc = alloc;
		if (res > b->res) b->res = res;
	}
}

/* Keep the max of each bucket; when time runs past the last bucket, merge
 * neighbouring pairs and double the width, so a peak survives any merging. */
static void tl_sample(struct engine *e, uint64_t t, uint64_t res)
{
	uint64_t rel = t - e->t0, idx = rel >> e->tl_shift;
	if (rel >= e->tl_lim) {
		/* the rare case: time ran past the current width */
		while (idx >= e->tl_n) {
			if (e->tl_shift >= 63) {
				idx = e->tl_n - 1;
				break;
			}
			uint32_t half = (e->tl_n + 1) / 2;
			for (uint32_t i = 0; i < half; i++) {
				struct tl_bucket m = e->tl[2 * i];
				if (2 * i + 1 < e->tl_n && e->tl[2 * i + 1].filled)
					tl_fold(&m, e->tl[2 * i + 1].alloc, e->tl[2 * i + 1].res);
				e->tl[i] = m;
			}
			memset(e->tl + half, 0, (e->tl_n - half) * sizeof *e->tl);
			e->tl_shift++;
			idx = rel >> e->tl_shift;
		}
		/* below tl_lim the fast path needs no width check; an overflow
		 * means every time fits */
		e->tl_lim = (uint64_t)e->tl_n << e->tl_shift;
		if (e->tl_lim >> e->tl_shift != e->tl_n)
			e->tl_lim = UINT64_MAX;
	}
	tl_fold(&e->tl[idx], e->allocated, res);
}

/* After every policy call: peaks and the timeline. */
static void note_level(struct engine *e, uint64_t t, uint64_t line)
{
	struct sim_result *r = e->res;
	if (e->allocated > r->peak_allocated)
		r->peak_allocated = e->allocated;
	if (e->requested > r->peak_requested)
		r->peak_requested = e->requested;
	uint64_t res = device_reserved(e->dev);
	if (e->step_open || e->range_orphan) {
		struct step_acc *acc = e->step_open ? &e->step_cur : &e->orphan;
		struct sim_step_mem *m = &acc->m;
		if (e->allocated > m->peak_allocated) {
			m->peak_allocated = e->allocated;
			acc->peak_ctx = e->cur_ctx;
		}
		if (e->requested > m->peak_requested)
			m->peak_requested = e->requested;
		if (res > m->peak_reserved)
			m->peak_reserved = res;
	}
	if (res > e->peak_res_seen) {
		e->peak_res_seen = res;
		e->peak_res_t = t - e->t0;
		e->peak_res_line = line;
		e->pk_line = e->last_alloc_line;
		e->npk = 0;
	}
	tl_sample(e, t, res);
}

static int stream_index(struct engine *e, uint32_t stream, uint32_t *idx, int create)
{
	uint64_t v;
	if (stream < STREAM_LUT && e->stream_lut[stream]) {
		*idx = e->stream_lut[stream] - 1;
		return 1;
	}
	if (u64map_get(&e->stream_idx, stream, &v)) {
		*idx = (uint32_t)v;
		return 1;
	}
	if (!create)
		return 0;
	if (VEC_RESERVE(e->stream_free, e->cap_free, e->nstreams + 1, 8) < 0 ||
	    VEC_RESERVE(e->stream_inflight, e->cap_inflight, e->nstreams + 1, 8) < 0)
		return -1;
	if (u64map_put(&e->stream_idx, stream, e->nstreams) < 0)
		return -1;
	e->stream_free[e->nstreams] = 0;
	e->stream_inflight[e->nstreams] = 0;
	if (stream < STREAM_LUT)
		e->stream_lut[stream] = e->nstreams + 1;
	*idx = e->nstreams++;
	return 1;
}

/* Retire GPU work finished by time T (the host observes it then). */
void drain_until(struct engine *e, uint64_t t)
{
	const struct eq_event *top;
	struct eq_event ev;
	while ((top = eq_peek(&e->q)) && top->t <= t) {
		eq_pop(&e->q, &ev);
		if (ev.kind == EV_GPU_DONE && ev.stream < e->nstreams)
			e->stream_inflight[ev.stream]--;
	}
}

void final_stat(void *ctx, const char *name, int64_t value)
{
	struct engine *e = ctx;
	struct sim_result *r = e->res;
	if (VEC_RESERVE(r->stats, e->stats_cap, r->nstats + 1, 16) < 0)
		return;
	struct sim_stat *s = &r->stats[r->nstats++];
	snprintf(s->name, sizeof s->name, "%s", name ? name : "");
	s->value = value;
}

/* Module globals: CUPTI reports them when a module loads. */
static inline int is_static_kind(uint32_t kind)
{
	return kind == TMEM_DEVICE_STATIC || kind == TMEM_MANAGED_STATIC;
}

/* ------------------------------------------------------------ timing */

/* Recorded host nanoseconds NS at the simulated host's speed. */
static inline uint64_t host_ns(const struct engine *e, uint64_t ns)
{
	return e->scale == 1.0 ? ns : (uint64_t)((double)ns * e->scale + 0.5);
}

/* After a policy call: the host pays what the call cost. A device free
 * first waits for every stream to drain (cudaFree's implicit sync); an
 * alloc or free that made no device call is a cache hit (HIT). Returns
 * the host time after the call; everything later shifts by the same. */
static uint64_t charge(struct engine *e, uint64_t now, int hit)
{
	uint64_t ns, t = now;
	int sync;
	uint64_t calls = device_take_cost(e->dev, &ns, &sync);
	if (!calls && hit)
		ns = (uint64_t)e->cost->hit_ns;
	else if (calls) {
		/* the fitted costs were measured on the captured host: the
		 * same correction as its recorded intervals, unless the model
		 * says the capture's overhead is not in these calls */
		if (e->cost->scale_calls)
			ns = host_ns(e, ns);
		ns = ns > calls * e->overhead ? ns - calls * e->overhead : 0;
	}
	if (sync && e->gpu_end > t) {
		e->res->mem_wait_ns += e->gpu_end - t;
		t = e->gpu_end;
		drain_until(e, t);
	}
	t += ns;
	e->res->mem_api_ns += ns;
	e->delay += t - now;
	if (t > e->floor)
		e->floor = t;
	if (t > e->host_end)
		e->host_end = t;
	return t;
}

/* A range that ran with the capture paused: nothing of its time was
 * recorded, so it is not replayed; a step's length is kept. */
static void note_uncaptured(struct engine *e, const struct eng_rec *er)
{
	struct sim_result *r = e->res;
	const struct trace_rec *rec = &er->r;
	if (!is_step_name(er->rname) ||
	    VEC_RESERVE(r->uncaptured_step_ns, e->uncaptured_cap, r->nuncaptured_steps + 1, 16) < 0)
		return;
	r->uncaptured_step_ns[r->nuncaptured_steps++] = rec->end - rec->start;
}

void device_calls(struct engine *e, uint64_t *allocs, uint64_t *frees)
{
	struct device_counters c;
	device_get_counters(e->dev, &c);
	*allocs = c.mallocs + c.maps;
	*frees = c.frees + c.unmaps;
}

static void step_push(struct engine *e, uint64_t dur)
{
	struct sim_result *r = e->res;
	if (VEC_RESERVE(r->step_ns, e->steps_cap, r->nsteps + 1, 64) < 0 ||
	    VEC_RESERVE(r->step_gpu_ns, e->steps_gpu_cap, r->nsteps + 1, 64) < 0 ||
	    VEC_RESERVE(r->step_mem, e->steps_mem_cap, r->nsteps + 1, 64) < 0)
		return; /* the step is not counted */
	/* work queued in a step is done by its end (step_close waits for
	 * the GPU), so what the step added to the busy sum is its own */
	r->step_gpu_ns[r->nsteps] = e->gpu_busy - e->step_busy_begin;
	struct sim_step_mem *m = &e->step_cur.m;
	uint64_t a, f;
	device_calls(e, &a, &f);
	m->device_allocs = a - m->device_allocs; /* they held the counts at its start */
	m->device_frees = f - m->device_frees;
	m->reserved_end = device_reserved(e->dev);
	uint32_t ctx = e->step_cur.peak_ctx;
	const char *at = ctx < e->nctx ? e->ctxs[ctx].name : NULL;
	snprintf(m->at, sizeof m->at, "%s", at ? at : "");
	r->step_mem[r->nsteps] = *m;
	r->step_ns[r->nsteps++] = dur;
}

void step_close(struct engine *e, uint64_t t)
{
	if (!e->step_open)
		return;
	e->step_open = 0;
	step_push(e, t > e->step_begin ? t - e->step_begin : 0);
}

/* ACC starts at T from the levels now: its peaks, reserved and the device
 * calls so far (step_push turns those into the step's own). */
static void step_acc_begin(struct engine *e, struct step_acc *acc, uint64_t t)
{
	struct sim_step_mem *m = &acc->m;
	memset(m, 0, sizeof *m);
	m->t = t > e->t0 ? t - e->t0 : 0;
	m->peak_allocated = e->allocated;
	m->peak_requested = e->requested;
	m->peak_reserved = m->reserved_start = device_reserved(e->dev);
	device_calls(e, &m->device_allocs, &m->device_frees);
	acc->peak_ctx = e->cur_ctx;
}

void step_orphan_begin(struct engine *e, uint64_t now)
{
	if (e->step_open || e->range_orphan)
		return;
	e->range_orphan = 1;
	step_acc_begin(e, &e->orphan, now);
}

/* A step begins at T; NAME is its range's, or NULL ('x step' N). A step
 * range that comes after an orphan nested range (step_orphan_begin) was
 * recorded late: the step is taken to have begun with that range, its
 * memory figures from there (its time stays the range's). */
static void step_start(struct engine *e, uint64_t t, const char *name, uint64_t n)
{
	step_close(e, t);
	e->step_open = 1;
	e->step_begin = t;
	e->step_busy_begin = e->gpu_busy;
	e->step_serial++;
	/* the orphan's figures run up to now (note_level kept them), so they
	 * are the late step's from its real start */
	if (name && e->range_orphan)
		e->step_cur = e->orphan;
	else
		step_acc_begin(e, &e->step_cur, t);
	struct sim_step_mem *m = &e->step_cur.m;
	m->late = name && e->range_orphan;
	if (name)
		snprintf(m->name, sizeof m->name, "%s", name);
	else
		snprintf(m->name, sizeof m->name, "step %" PRIu64, n);
	e->range_orphan = 0;
}

int is_step_name(const char *n)
{
	return n && !strncmp(n, "step", 4) && (n[4] == '\0' || n[4] == ' ' || n[4] == '_');
}

/* Deliver the ends of open ranges the host has passed (recorded time
 * below UNTIL), at the simulated time they map to (at most NOW). */
void ranges_end(struct engine *e, uint64_t until, uint64_t now)
{
	while (e->nrng && e->rng_min <= until) {
		int k = 0;
		for (int i = 1; i < e->nrng; i++)
			if (e->rng[i].end < e->rng[k].end)
				k = i;
		struct open_range r = e->rng[k];
		e->rng[k] = e->rng[--e->nrng];
		e->rng_min = UINT64_MAX;
		for (int i = 0; i < e->nrng; i++)
			if (e->rng[i].end < e->rng_min)
				e->rng_min = e->rng[i].end;
		uint64_t t = r.end + e->delay;
		if (e->cost && e->scale != 1.0 && until != UINT64_MAX && until >= r.end)
			/* the delay already holds the scaled gap up to UNTIL */
			t = now - host_ns(e, until - r.end);
		if ((int64_t)(t - e->floor) < 0)
			t = e->floor;
		if ((int64_t)(t - now) > 0)
			t = now;
		if (r.step && !e->x_steps && r.step_serial == e->step_serial)
			/* the step is over when its work is: the host at the
			 * range end, then the device draining what it queued.
			 * Only its own range ends it: a range whose end lies in
			 * a later step (the capture writes a range that arrived
			 * late, step 0 in most torch captures, with both ends
			 * late: capture/convert.c) was closed at the next
			 * step's start and must not cut that one. */
			step_close(e, t > e->gpu_end ? t : e->gpu_end);
		if (e->nvtx) {
			device_set_time(e->dev, t);
			e->pol->control(e->st, POLICY_CTL_NVTX_END, (uint64_t)(uintptr_t)r.name);
			if (e->cost)
				t = charge(e, t, 0);
			note_level(e, t, 0);
		}
	}
}

static void on_range(struct engine *e, const struct eng_rec *er, uint64_t now)
{
	const struct trace_rec *rec = &er->r;
	const char *name = er->rname;
	int step = is_step_name(name) && !e->x_steps;
	if (step) {
		step_start(e, now, name, 0);
		if (e->pol->control) {
			device_set_time(e->dev, now);
			e->pol->control(e->st, POLICY_CTL_STEP, e->res->nsteps + 1);
			if (e->cost)
				now = charge(e, now, 0);
			note_level(e, now, rec->line);
		}
	}
	if (e->nvtx) {
		device_set_time(e->dev, now);
		e->pol->control(e->st, POLICY_CTL_NVTX_BEGIN, (uint64_t)(uintptr_t)(name ? name : ""));
		if (e->cost)
			now = charge(e, now, 0);
		note_level(e, now, rec->line);
	}
	if ((step || e->nvtx) && e->nrng < MAX_OPEN_RANGES && rec->end >= rec->start) {
		e->rng[e->nrng].end = rec->end;
		e->rng[e->nrng].name = name ? name : "";
		e->rng[e->nrng].step = step;
		e->rng[e->nrng].step_serial = e->step_serial;
		e->nrng++;
		if (rec->end < e->rng_min || e->nrng == 1)
			e->rng_min = rec->end;
	}
}

void pk_note_free(struct engine *e, const struct live_ent *le, uint64_t t)
{
	if (VEC_RESERVE(e->pk, e->cap_pk, e->npk + 1, 256) < 0) {
		e->pk_lost = 1;
		return;
	}
	struct pk_gone *g = &e->pk[e->npk++];
	g->block = le->block;
	g->line = le->line;
	g->ctx = le->ctx & ~CTX_STATIC;
	g->within = le->rend != UINT64_MAX && t < le->rend;
	g->free_t = t;
	g->free_phase = e->ctxs ? e->ctxs[e->cur_ctx].phase & 7u : PH_NONE;
}

/* --------------------------------------------------------- memory path */

/* The flib slot of allocation M (made on first sight), or -1 out of memory. */
static int64_t flib_slot(struct engine *e, const struct trace_mem *m)
{
	uint64_t key = (uint64_t)m->source | (uint64_t)m->kind << 32, v;
	if (u64map_get(&e->flib_idx, key, &v))
		return (int64_t)v;
	if (e->nflib == FLIB_MAX)
		return FLIB_MAX - 1;
	if (VEC_RESERVE(e->flibs, e->cap_flib, e->nflib + 1, 8) < 0)
		return -1;
	if (u64map_put(&e->flib_idx, key, e->nflib) < 0)
		return -1;
	memset(&e->flibs[e->nflib], 0, sizeof e->flibs[e->nflib]);
	e->flibs[e->nflib].source = m->source;
	e->flibs[e->nflib].kind = m->kind;
	return e->nflib++;
}

static int on_free(struct engine *e, const struct trace_rec *rec, uint64_t now,
		   char *err, size_t errlen);

/*
 * A static allocation (module globals, kind 6/7) at an address where a
 * static allocation is still live: the module was loaded again (XLA's
 * autotuner does this) and the capture recorded no free when it was
 * unloaded. The earlier allocation is freed here, by the path a real free
 * takes, before the new one is made. *NOW moves past the time the free
 * took in a timed replay.
 */
static int static_replace(struct engine *e, const struct trace_rec *rec, uint64_t *now,
			  char *err, size_t errlen)
{
	struct trace_rec fr = *rec;
	fr.type = TREC_FREE;
	fr.u.mem.id = 0;
	fr.u.mem.bytes = 0;
	fr.u.mem.stream = TRACE_NO_STREAM; /* the block's own stream */
	fr.u.mem.flags = 0;
	fr.u.mem.corr = 0;
	if (on_free(e, &fr, *now, err, errlen) < 0)
		return -1;
	e->res->static_replaced++;
	if (e->cost && (int64_t)(*now - e->floor) < 0)
		*now = e->floor;
	return 0;
}

/* Memory outside the framework's allocator: from the device, beside the
 * policy. A failure is an OOM like any other (the library's cudaMalloc
 * failed), and its free is skipped. */
static int on_foreign_alloc(struct engine *e, const struct trace_rec *rec, uint64_t now,
			    char *err, size_t errlen)
{
	const struct trace_mem *m = &rec->u.mem;
	uint64_t v;
	int live = live_find(&e->live, m->addr) != NULL;
	if (!live && e->flive.count && u64map_get(&e->flive, m->addr, &v)) {
		live = !(v & FLIVE_STATIC) || !is_static_kind(m->kind);
		if (!live && static_replace(e, rec, &now, err, errlen) < 0)
			return -1;
	}
	if (live) {
		snprintf(err, errlen, "%s:%" PRIu64 ": allocation at 0x%" PRIx64
			 " which is already live", e->path, rec->line, m->addr);
		return -1;
	}
	if (m->bytes >> 48) {
		snprintf(err, errlen, "%s:%" PRIu64 ": allocation of %" PRIu64
			 " bytes outside the framework's allocator is too large (2^48 at most)",
			 e->path, rec->line, m->bytes);
		return -1;
	}
	int64_t slot = flib_slot(e, m);
	if (slot < 0)
		goto nomem;
	if (e->skip.count)
		u64map_del(&e->skip, m->addr, NULL);
	device_set_time(e->dev, now);
	int rc = device_foreign_alloc(e->dev, m->bytes);
	if (e->cost)
		now = charge(e, now, 0);
	if (rc != DEVICE_OK) {
		if (u64map_put(&e->skip, m->addr, 1) < 0)
			goto nomem;
		on_oom(e, rec, now, m->stream == TRACE_NO_STREAM ? 0 : m->stream);
		note_level(e, now, rec->line);
		return 0;
	}
	if (u64map_put(&e->flive, m->addr, m->bytes << 16 | (uint64_t)slot |
		       (is_static_kind(m->kind) ? FLIVE_STATIC : 0)) < 0)
		goto nomem;
	struct flib *l = &e->flibs[slot];
	l->allocs++;
	l->live += m->bytes;
	if (l->live > l->peak)
		l->peak = l->live;
	e->foreign_live += m->bytes;
	if (e->foreign_live > e->res->peak_foreign)
		e->res->peak_foreign = e->foreign_live;
	e->res->foreign_allocs++;
	return 0;
nomem:
	snprintf(err, errlen, "%s:%" PRIu64 ": out of memory", e->path, rec->line);
	return -1;
}

/* The free of a foreign allocation (V: its flive value). */
static void on_foreign_free(struct engine *e, uint64_t v, uint64_t now)
{
	uint64_t bytes = v >> 16;
	struct flib *l = &e->flibs[v & FLIVE_SLOT];
	l->live -= bytes <= l->live ? bytes : l->live;
	e->foreign_live -= bytes <= e->foreign_live ? bytes : e->foreign_live;
	device_set_time(e->dev, now);
	device_foreign_free(e->dev, bytes);
	if (e->cost)
		charge(e, now, 0);
}

/*
 * REQ to the policy, its host cost charged at *NOW. A convolution
 * workspace (FLAGS has TMEM_F_SHRINKABLE) asks first for no more than the
 * room PyTorch's cuDNN search sees (workspace_room: it leaves out the
 * plans whose workspace is more), then, while it does not fit, for half
 * as much, down to none (REQ->bytes 0 and POLICY_OOM), as PyTorch's cuDNN
 * path does; the policy's own OOM handling (releasing its cache) runs at
 * each failure, as the real allocator's does before it raises. Each cut
 * is counted in workspace_retries.
 */
static int policy_alloc(struct engine *e, uint32_t flags, struct alloc_request *req,
			struct alloc_result *ar, uint64_t *now)
{
	int shrink = (flags & TMEM_F_SHRINKABLE) != 0;
	if (shrink) {
		uint64_t room = workspace_room(e, req->bytes);
		if (req->bytes > room) {
			req->bytes = room;
			e->res->workspace_retries++;
		}
	}
	for (;;) {
		if (shrink && !req->bytes)
			return POLICY_OOM;
		int rc = e->pol->alloc(e->st, req, ar);
		if (e->cost)
			*now = charge(e, *now, rc == POLICY_OK);
		if (rc != POLICY_OOM || !shrink)
			return rc;
		req->bytes /= 2;
		e->res->workspace_retries++;
	}
}

static int on_alloc(struct engine *e, const struct trace_rec *rec, uint64_t now,
		    char *err, size_t errlen)
{
	const struct trace_mem *m = &rec->u.mem;
	uint64_t fv;
	if (trace_mem_kind_host(m->kind)) {
		/* host memory is not the device's business; its free is skipped too */
		if (m->addr != U64MAP_EMPTY && u64map_put(&e->skip, m->addr, 1) < 0)
			goto nomem;
		return 0;
	}
	if (m->addr == U64MAP_EMPTY) {
		snprintf(err, errlen, "%s:%" PRIu64 ": invalid allocation address 0x%" PRIx64,
			 e->path, rec->line, m->addr);
		return -1;
	}
	if (m->flags & ENG_F_FOREIGN)
		return on_foreign_alloc(e, rec, now, err, errlen);
	if (e->flive.count && u64map_get(&e->flive, m->addr, &fv)) {
		snprintf(err, errlen, "%s:%" PRIu64 ": allocation at 0x%" PRIx64
			 " which is already live (outside the framework's allocator)",
			 e->path, rec->line, m->addr);
		return -1;
	}
	int fresh;
	struct live_ent *le = live_claim(&e->live, m->addr, &fresh);
	if (!le)
		goto nomem;
	if (!fresh) {
		if (!is_static_kind(m->kind) || !(le->ctx & CTX_STATIC)) {
			snprintf(err, errlen, "%s:%" PRIu64 ": allocation at 0x%" PRIx64
				 " which is already live (allocated at line %" PRIu64 ")",
				 e->path, rec->line, m->addr, le->line);
			return -1;
		}
		/* LE goes with the free: claim the slot again */
		if (static_replace(e, rec, &now, err, errlen) < 0)
			return -1;
		le = live_claim(&e->live, m->addr, &fresh);
		if (!le)
			goto nomem;
	}
	if (e->skip.count)
		u64map_del(&e->skip, m->addr, NULL);
	uint32_t stream = m->stream == TRACE_NO_STREAM ? 0 : m->stream;
	/* another batch size: what is allocated before the first kernel (the
	 * weights; their gradients and optimizer state have the same sizes)
	 * does not grow with the batch */
	if (!e->seen_kernel && e->cost && e->cost->size_scale != 1.0)
		device_fix_size(e->dev, m->bytes);
	struct alloc_request req = {m->id, m->bytes, stream, now};
	struct alloc_result ar = {0, 0};
	device_set_time(e->dev, now);
	int rc = policy_alloc(e, m->flags, &req, &ar, &now);
	if (rc != POLICY_OK) {
		/* the policy may not touch the engine, so LE is still its slot */
		live_remove(&e->live, le);
		if (rc != POLICY_OOM) {
			snprintf(err, errlen, "%s:%" PRIu64 ": policy %s failed (%d) on a request of %"
				 PRIu64 " bytes", e->path, rec->line, e->pol->name, rc, m->bytes);
			return -1;
		}
		if (u64map_put(&e->skip, m->addr, 1) < 0)
			goto nomem;
		/* a workspace cut down to none is no OOM: the framework went on
		 * without one (its free is skipped all the same) */
		if (!(m->flags & TMEM_F_SHRINKABLE) || req.bytes)
			on_oom(e, rec, now, stream);
		note_level(e, now, rec->line);
		return 0;
	}
	le->paddr = ar.addr;
	le->block = ar.block_bytes;
	le->req = req.bytes;
	le->line = rec->line;
	le->stream = stream;
	le->ctx = e->cur_ctx | (m->flags & ENG_F_LIB) | (is_static_kind(m->kind) ? CTX_STATIC : 0);
	le->rend = e->cur_end;
	e->last_alloc_line = rec->line;
	e->allocated += ar.block_bytes;
	e->requested += req.bytes;
	e->res->allocs++;
	note_level(e, now, rec->line);
	return 0;
nomem:
	snprintf(err, errlen, "%s:%" PRIu64 ": out of memory", e->path, rec->line);
	return -1;
}

static int on_free(struct engine *e, const struct trace_rec *rec, uint64_t now,
		   char *err, size_t errlen)
{
	const struct trace_mem *m = &rec->u.mem;
	struct live_ent *le = m->addr != LIVE_EMPTY ? live_find(&e->live, m->addr) : NULL;
	if (le) {
		/* a stream-ordered free names its stream; otherwise the block's */
		uint32_t stream = m->stream == TRACE_NO_STREAM ? le->stream : m->stream;
		uint64_t paddr = le->paddr, block = le->block;
		if (le->line <= e->pk_line)
			pk_note_free(e, le, rec->start);
		e->allocated -= block;
		e->requested -= le->req;
		live_remove(&e->live, le);
		device_set_time(e->dev, now);
		e->pol->free(e->st, paddr, block, stream);
		if (e->cost)
			now = charge(e, now, 1);
		e->res->frees++;
		note_level(e, now, rec->line);
		return 0;
	}
	uint64_t fv;
	if (e->flive.count && m->addr != U64MAP_EMPTY && u64map_del(&e->flive, m->addr, &fv)) {
		on_foreign_free(e, fv, now);
		return 0;
	}
	/* the allocation OOMed in the simulation (the program would have died
	 * there), or it was host memory: nothing to return */
	if (m->addr != U64MAP_EMPTY && e->skip.count && u64map_del(&e->skip, m->addr, NULL))
		return 0;
	if (trace_mem_kind_host(m->kind))
		return 0;
	snprintf(err, errlen, "%s:%" PRIu64 ": free of unknown address 0x%" PRIx64,
		 e->path, rec->line, m->addr);
	return -1;
}

/* ----------------------------------------------------------- timing */

/* Queue DUR ns of work on STREAM at host time NOW: it starts when both
 * the host has issued it and the stream's earlier work is done. */
static int gpu_issue(struct engine *e, uint32_t stream, uint64_t now, uint64_t dur,
		     uint64_t line, char *err, size_t errlen)
{
	uint32_t s;
	if (stream_index(e, stream, &s, 1) < 0)
		goto nomem;
	if (e->cost && e->tl_gpu != 1.0)
		dur = (uint64_t)((double)dur * e->tl_gpu + 0.5); /* another batch size */
	uint64_t begin = now > e->stream_free[s] ? now : e->stream_free[s];
	uint64_t fin = begin + dur;
	uint64_t from = begin > e->gpu_cover_end ? begin : e->gpu_cover_end;
	if (fin > from) {
		e->gpu_busy += fin - from;
		e->gpu_cover_end = fin;
	}
	e->stream_free[s] = fin;
	e->stream_inflight[s]++;
	if (fin > e->gpu_end)
		e->gpu_end = fin;
	if (eq_push(&e->q, fin, EV_GPU_DONE, s, line) < 0)
		goto nomem;
	return 0;
nomem:
	snprintf(err, errlen, "%s:%" PRIu64 ": out of memory", e->path, line);
	return -1;
}

static int on_gpu_op(struct engine *e, const struct trace_rec *rec, uint32_t stream,
		     uint64_t corr, uint64_t now, char *err, size_t errlen)
{
	if (rec->end > e->trace_gpu_busy)
		e->trace_gpu_busy = rec->end;
	if (e->ops && corr && e->launch.count) {
		/* already queued by its launch call; the entry is done with */
		uint64_t v;
		if (u64map_get(&e->launch, corr, &v) && e->ops[v - 1].issued) {
			u64map_del(&e->launch, corr, NULL);
			return 0;
		}
	}
	uint64_t dur = rec->end >= rec->start ? rec->end - rec->start : 0;
	return gpu_issue(e, stream, now, dur, rec->line, err, errlen);
}

/* A kept (non-memory) API call in the timed model: the profiler's
 * overhead comes off the host, and GPU work it launched is queued when the
 * call returns. */
static int on_api_timed(struct engine *e, const struct trace_rec *rec, uint64_t now,
			char *err, size_t errlen)
{
	uint64_t dur = host_ns(e, rec->end >= rec->start ? rec->end - rec->start : 0);
	uint64_t oh = e->tlm ? timing_call_credit(e, dur) : e->overhead < dur ? e->overhead : dur;
	uint64_t v;
	e->delay -= oh;
	if (!rec->u.api.corr || !e->launch.count || !u64map_get(&e->launch, rec->u.api.corr, &v))
		return 0;
	struct gpu_op *op = &e->ops[v - 1];
	if (op->issued)
		return 0;
	op->issued = 1;
	/* the recorded host waited for this work from its launch on, also
	 * when its record comes later in the file (the host ran ahead): a
	 * sync after this call must not count that wait as its own cost */
	if (op->end > e->trace_gpu_busy)
		e->trace_gpu_busy = op->end;
	return gpu_issue(e, op->stream, now + (dur - oh) + e->tl_latency, op->dur, rec->line, err, errlen);
}

/* The host waits for the stream (or the whole device); a wait longer than
 * the trace's becomes delay for everything after. */
static void on_sync(struct engine *e, const struct trace_rec *rec, uint64_t now)
{
	const struct trace_sync *y = &rec->u.sync;
	if (y->kind == TSYNC_STREAM_WAIT_EVENT)
		return; /* a device-side wait: the host does not block */
	uint64_t target = 0;
	uint32_t s;
	if (y->stream == TRACE_NO_STREAM || y->kind == TSYNC_CONTEXT)
		target = e->gpu_end;
	else if (stream_index(e, y->stream, &s, 0) == 1)
		target = e->stream_free[s];
	uint64_t released = target > now ? target : now;
	drain_until(e, released);
	uint64_t dur = rec->end >= rec->start ? rec->end - rec->start : 0;
	uint64_t trace_release = now + dur;
	uint64_t host;
	if (e->cost) {
		/* keep the call's own overhead, replace the recorded wait (the
		 * part of it the recorded GPU work explains) by the simulated one */
		uint64_t busy = e->trace_gpu_busy < rec->end ? e->trace_gpu_busy : rec->end;
		uint64_t wait = busy > rec->start ? busy - rec->start : 0;
		host = now + host_ns(e, dur - wait);
		if (released > host)
			host = released;
		trace_release = now + host_ns(e, dur);
		e->delay += host - trace_release; /* modular: may shorten */
		if (host > e->floor)
			e->floor = host;
	} else {
		if (released > trace_release)
			e->delay += released - trace_release;
		host = released > trace_release ? released : trace_release;
	}
	if (host > e->host_end)
		e->host_end = host;
	if (e->pol->control) {
		device_set_time(e->dev, host);
		e->pol->control(e->st, POLICY_CTL_SYNC, 0);
		if (e->cost)
			host = charge(e, host, 0);
		note_level(e, host, rec->line);
	}
}

static void on_control(struct engine *e, const struct trace_rec *rec, uint64_t now)
{
	const struct trace_control *c = &rec->u.control;
	char detail[160];
	switch (c->kind) {
	case TCTL_EMPTY_CACHE: {
		uint64_t before = device_reserved(e->dev);
		if (e->pol->control) {
			device_set_time(e->dev, now);
			e->pol->control(e->st, POLICY_CTL_EMPTY_CACHE, 0);
			if (e->cost)
				now = charge(e, now, 0);
		}
		uint64_t after = device_reserved(e->dev);
		snprintf(detail, sizeof detail, "empty_cache released %" PRIu64 " bytes",
			 before > after ? before - after : 0);
		add_event(e, SIM_EV_EMPTY_CACHE, now - e->t0, before > after ? before - after : 0,
			  rec->line, detail);
		note_level(e, now, rec->line);
		break;
	}
	case TCTL_STEP:
		if (!e->x_steps) {
			/* 'x step' records win over NVTX ranges */
			e->x_steps = 1;
			e->step_open = 0;
			e->res->nsteps = 0;
		}
		step_start(e, now, NULL, c->bytes);
		if (!e->seen_step) {
			e->seen_step = 1;
			nv_refresh(e);
		}
		if (e->pol->control) {
			device_set_time(e->dev, now);
			e->pol->control(e->st, POLICY_CTL_STEP, c->bytes);
			if (e->cost)
				now = charge(e, now, 0);
			note_level(e, now, rec->line);
		}
		break;
	case TCTL_OOM: {
		/* the request the real run could not serve (and caught: PyTorch's
		 * cuDNN path asks again at half the size) is made here too, so
		 * that the policy's own OOM handling runs as the real allocator's
		 * did (PyTorch's frees its cache first); should the policy serve
		 * it, the replay has gone another way, and it is given back */
		const char *served = "";
		if (c->bytes && e->pol->alloc) {
			struct alloc_request req = {UINT64_MAX, c->bytes, 0, now};
			struct alloc_result ar = {0, 0};
			device_set_time(e->dev, now);
			if (e->pol->alloc(e->st, &req, &ar) == POLICY_OK) {
				e->pol->free(e->st, ar.addr, ar.block_bytes, 0);
				served = " (the replay served it)";
			}
			note_level(e, now, rec->line);
		}
		snprintf(detail, sizeof detail,
			 "the real run hit an OOM for %" PRIu64 " bytes%s", c->bytes, served);
		add_event(e, SIM_EV_TRACE_OOM, now - e->t0, c->bytes, rec->line, detail);
		break;
	}
	default:
		break;
	}
}

/* One record of the replay, at host issue time. */
static int replay_one(struct engine *e, const struct eng_rec *er, char *err, size_t errlen)
{
	const struct trace_rec *rec = &er->r;
	if (rec->type == TREC_RANGE && rec->u.range.uncaptured) {
		note_uncaptured(e, er);
		return 0;
	}
	if (!e->have_t0) {
		e->have_t0 = 1;
		e->t0 = rec->start;
		e->host_end = e->gpu_end = e->trace_end = rec->start;
		e->last_start = rec->start;
	}
	if (e->cost) {
		/* a faster (or slower) host: every recorded interval shrinks
		 * (grows) by the same factor */
		if (e->scale != 1.0) {
			uint64_t gap = rec->start - e->last_start;
			e->delay -= gap - host_ns(e, gap);
		}
		e->last_start = rec->start;
		if (e->tlm)
			timing_credit(e, er);
	}
	if (e->o->decisions)
		e->o->decisions->line = rec->line;
	/* modular: with a cost model the delay may be "negative" */
	uint64_t now = rec->start + e->delay;
	if (e->cost && (int64_t)(now - e->floor) < 0)
		now = e->floor;
	if (e->nrng && rec->start >= e->rng_min)
		ranges_end(e, rec->start, now);
	if (e->nnvo && rec->start >= e->nvo_min)
		nv_pop(e, rec->start, now);
	if (rec->end > e->trace_end)
		e->trace_end = rec->end;
	if (rec->start > e->trace_end)
		e->trace_end = rec->start;
	/* a timed replay issues GPU work at its launch: the GPU record's own
	 * (recorded start) time is not a point the host reached */
	if (now > e->host_end && !(e->cost && rec->type >= TREC_KERNEL && rec->type <= TREC_MEMSET))
		e->host_end = now;
	if (e->q.n && e->q.heap[0].t <= now)
		drain_until(e, now);
	switch (rec->type) {
	case TREC_ALLOC:
		return on_alloc(e, rec, now, err, errlen);
	case TREC_FREE:
		return on_free(e, rec, now, err, errlen);
	case TREC_KERNEL:
		e->seen_kernel = 1;
		return on_gpu_op(e, rec, rec->u.kernel.stream, rec->u.kernel.corr, now, err, errlen);
	case TREC_MEMCPY:
	case TREC_MEMSET:
		return on_gpu_op(e, rec, rec->u.copy.stream, rec->u.copy.corr, now, err, errlen);
	case TREC_SYNC:
		on_sync(e, rec, now);
		return 0;
	case TREC_CONTROL:
		on_control(e, rec, now);
		return 0;
	case TREC_SEGMENT:
		device_note_recorded(e->dev, rec->u.segment.op, rec->u.segment.addr,
				     rec->u.segment.bytes);
		return 0;
	case TREC_RANGE:
		nv_push(e, er, now);
		if (er->rname && (e->nvtx || is_step_name(er->rname)))
			on_range(e, er, now);
		if (e->cost)
			return 0;
		goto span;
	case TREC_API:
		if (e->cost) {
			if (er->api_kind == COST_API_OTHER)
				return on_api_timed(e, rec, now, err, errlen);
			/* the policy's costs replace this call: records inside
			 * it are issued at its start, later ones move up */
			uint64_t dur = rec->end >= rec->start ? rec->end - rec->start : 0;
			e->delay -= host_ns(e, dur);
			e->res->api_removed_ns += dur;
			if (now > e->floor)
				e->floor = now;
			return 0;
		}
	span: {
		uint64_t end = rec->end >= rec->start ? now + (rec->end - rec->start) : now;
		if (end > e->host_end)
			e->host_end = end;
		return 0;
	}
	default:
		return 0;
	}
}

/* Records ahead whose live-table slot is fetched early: a random probe
 * into a table bigger than L1 otherwise stalls every memory event. */
#define PREFETCH_AHEAD 8

static inline void live_prefetch(const struct engine *e, const struct trace_rec *rec)
{
	if (rec->type <= TREC_FREE && e->live.slot)
		__builtin_prefetch(&e->live.slot[live_home(&e->live, rec->u.mem.addr)]);
}

/* The replay proper: every record in file order. */
static int replay_all(struct engine *e, char *err, size_t errlen)
{
	struct rec_pipe p;
	uint64_t nrec = 0;
	int progressed = 0, ret = 0, rc = TRACE_OK;
	struct foreign_rule fr = {e->fsub, NULL, 0, e->xla, e->xla_route, e->torch_ws};
	if (pipe_start(&p, e->rd, &fr) < 0) {
		snprintf(err, errlen, "%s: cannot start the reader thread", e->path);
		return -1;
	}
	for (;;) {
		struct rec_batch *b = pipe_take(&p);
		for (size_t i = 0; i < b->n; i++) {
			if (i + PREFETCH_AHEAD < b->n)
				live_prefetch(e, &b->recs[i + PREFETCH_AHEAD].r);
			if (replay_one(e, &b->recs[i], err, errlen) < 0) {
				ret = -1;
				break;
			}
			if (e->o->progress && !(++nrec & PROGRESS_MASK)) {
				fprintf(stderr, "\r%s: %" PRIu64 " records", e->path, nrec);
				progressed = 1;
			}
		}
		rc = b->rc;
		pipe_release(&p);
		if (ret < 0 || rc != TRACE_OK)
			break;
	}
	pipe_stop(&p);
	if (progressed)
		fputc('\n', stderr);
	if (ret < 0)
		return -1;
	if (rc == TRACE_ERR_TRUNCATED) {
		e->res->complete = 0;
	} else if (rc < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(e->rd));
		return -1;
	}
	return 0;
}

/* ----------------------------------------------------------- sim_run */

/* Routing of memory outside the framework's allocator: the label's (or the
 * option's) SUBSTR, unless the policy is asked to serve everything. */
static int foreign_setup(struct engine *e, const struct trace_header *h, char *err, size_t errlen)
{
	const char *label = trace_header_label(h, SIM_SOURCE_LABEL);
	const char *sub = e->o->allocator_source ? e->o->allocator_source : label;
	switch (e->o->foreign) {
	case SIM_FOREIGN_POLICY:
		return 0;
	case SIM_FOREIGN_AUTO:
		if (!sub)
			return 0;
		break;
	case SIM_FOREIGN_DEVICE:
		if (!sub) {
			snprintf(err, errlen, "%s: foreign device: the trace has no label "
				 SIM_SOURCE_LABEL "=SUBSTR naming the framework's allocator "
				 "(give the substring with --allocator-source)", e->path);
			return -1;
		}
		break;
	}
	if (!*sub) {
		snprintf(err, errlen, "%s: %s is empty (expected a substring of the framework "
			 "allocator's library name, e.g. libc10_cuda)", e->path,
			 e->o->allocator_source ? "allocator_source" : "label " SIM_SOURCE_LABEL);
		return -1;
	}
	e->fsub = sub;
	return 0;
}

/* XLA's request stream (sim_options.xla_requests): one pass over the trace
 * to find what XLA never freed and whether every request is whole granules
 * (traces/xla_requests.h), then back to its start. */
static int xla_setup(struct engine *e, const struct trace_header *h, char *err, size_t errlen)
{
	enum sim_xla_mode m = e->o->xla_requests;
	if (m == SIM_XLA_OFF || (m == SIM_XLA_AUTO && !xla_requests_label(h)))
		return 0;
	e->xla = calloc(1, sizeof *e->xla);
	if (!e->xla) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (xla_requests_scan(e->rd, e->xla, err, errlen) < 0)
		return -1;
	if (trace_reader_rewind(e->rd) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(e->rd));
		return -1;
	}
	e->xla_route = e->o->foreign != SIM_FOREIGN_POLICY && e->xla->outside_n;
	return 0;
}

/*
 * The result is complete only when the function returns 0; on error it is
 * freed and zeroed, so a caller never stores half a run.
 */
int sim_run(const struct sim_options *o, struct sim_result *res, char *err, size_t errlen)
{
	struct engine e;
	int ret = -1;

	memset(&e, 0, sizeof e);
	memset(res, 0, sizeof *res);
	u64map_init(&e.skip);
	u64map_init(&e.stream_idx);
	u64map_init(&e.launch);
	u64map_init(&e.ctx_idx);
	u64map_init(&e.flive);
	u64map_init(&e.flib_idx);
	eq_init(&e.q);
	e.oom_flib = -1;
	e.o = o;
	e.res = res;
	e.pol = o->policy;
	e.path = o->trace_path ? o->trace_path : "";
	if (err && errlen)
		err[0] = '\0';

	if (!e.pol || !o->trace_path) {
		snprintf(err, errlen, "sim_run: no policy or no trace");
		goto out;
	}
	if (e.pol->iversion < POLICY_IFACE_MIN_VERSION || e.pol->iversion > POLICY_IFACE_VERSION) {
		snprintf(err, errlen, "policy %s: interface version %d (this engine runs %d to %d)",
			 e.pol->name, e.pol->iversion, POLICY_IFACE_MIN_VERSION, POLICY_IFACE_VERSION);
		goto out;
	}
	e.rd = trace_reader_start(o->trace_path, err, errlen);
	if (!e.rd)
		goto out;
	const struct trace_header *h = trace_reader_header(e.rd);
	res->capacity = o->capacity ? o->capacity : (h ? h->total_memory : 0);
	/* PyTorch asks again, smaller, for a convolution workspace that does
	 * not fit (TMEM_F_SHRINKABLE): which requests are those, the reader
	 * thread finds in a capture of a PyTorch program */
	const char *wl = trace_header_label(h, "workload");
	e.torch_ws = wl && !strcmp(wl, "torch");
	if (foreign_setup(&e, h, err, errlen) < 0 || xla_setup(&e, h, err, errlen) < 0)
		goto out;
	res->complete = 1;
	res->oom_largest_free = res->oom_cached_free = -1;
	if (copy_identity(&e, err, errlen) < 0)
		goto out;

	e.tl_n = o->timeline_points ? o->timeline_points : 512;
	e.tl = calloc(e.tl_n, sizeof *e.tl);
	e.dev = device_create(res->capacity, o->addr_mode);
	e.st = calloc(1, e.pol->state_size ? e.pol->state_size : 1);
	if (!e.tl || !e.dev || !e.st) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (o->device_log)
		device_set_log(e.dev, o->device_log, o->device_log_ctx);

	struct policy_env env = {e.dev, res->capacity, h};
	if (e.pol->init(e.st, o->conf ? o->conf : "", &env, err, errlen) < 0) {
		if (!err[0])
			snprintf(err, errlen, "policy %s: bad conf '%s'", e.pol->name,
				 o->conf ? o->conf : "");
		goto out;
	}
	e.pol_live = 1;
	if (o->decisions && e.pol->iversion >= 2 && e.pol->decisions)
		e.pol->decisions(e.st, sim_decisions_sink, o->decisions);
	e.cost = o->cost;
	e.nvtx = e.pol->control && (e.pol->flags & POLICY_F_NVTX);
	e.rng_min = UINT64_MAX;
	e.nvo_min = UINT64_MAX;
	nv_refresh(&e);
	if (e.cost)
		device_set_cost(e.dev, e.cost);
	if (e.pol->prepass && prepass(&e, err, errlen) < 0)
		goto out;
	if (e.cost) {
		e.scale = e.cost->host_scale > 0 ? e.cost->host_scale : 1.0;
		e.overhead = e.cost->api_overhead_ns > 0 ? (uint64_t)(e.cost->api_overhead_ns + 0.5) : 0;
		timing_init(&e);
		if (launch_prepass(&e, err, errlen) < 0)
			goto out;
	}

	if (replay_all(&e, err, errlen) < 0)
		goto out;
	if (finish(&e, err, errlen) < 0)
		goto out;
	if (!res->complete && !o->allow_incomplete) {
		/* a result from half a trace must not pass for the whole run */
		if (trace_reader_status(e.rd) == TRACE_ERR_TRUNCATED || trace_reader_error(e.rd)[0])
			snprintf(err, errlen, "%s (the trace is cut short: replay what it holds "
				 "with --allow-incomplete)", trace_reader_error(e.rd));
		else
			snprintf(err, errlen, "%s: the trace is cut short (no 'end' trailer: a "
				 "killed capture?); replay what it holds with --allow-incomplete",
				 e.path);
		goto out;
	}
	ret = 0;
out:
	if (e.pol_live && e.pol->fini)
		e.pol->fini(e.st);
	free(e.st);
	device_destroy(e.dev);
	if (e.rd)
		trace_reader_close(e.rd);
	free(e.tl);
	free(e.live.slot);
	free(e.stream_free);
	free(e.stream_inflight);
	u64map_free(&e.skip);
	u64map_free(&e.stream_idx);
	u64map_free(&e.launch);
	free(e.ops);
	free(e.ctxs);
	free(e.pk);
	u64map_free(&e.ctx_idx);
	u64map_free(&e.flive);
	u64map_free(&e.flib_idx);
	free(e.flibs);
	xla_requests_free(e.xla);
	free(e.xla);
	eq_free(&e.q);
	if (ret < 0)
		sim_result_free(res);
	return ret;
}

/* Safe on a zeroed or already freed result. */
void sim_result_free(struct sim_result *res)
{
	if (!res)
		return;
	free(res->trace_path);
	for (size_t i = 0; i < res->nlabels; i++) {
		free(res->labels[i].key);
		free(res->labels[i].value);
	}
	free(res->labels);
	free(res->policy);
	free(res->conf);
	free(res->stats);
	free(res->timeline);
	free(res->events);
	free(res->step_ns);
	free(res->step_gpu_ns);
	free(res->step_mem);
	free(res->uncaptured_step_ns);
	free(res->peak_live);
	free(res->ranges);
	free(res->foreign_libs);
	memset(res, 0, sizeof *res);
}
