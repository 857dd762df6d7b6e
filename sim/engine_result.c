/*
 * engine_result.c: the engine's pre-passes (steps, timed launches) and the
 * result it fills at the end of a replay: identity, peak event, memory
 * outside the framework's allocator, the timeline and the live set.
 */
#include "engine_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

/* ------------------------------------------------------------- result */

int copy_identity(struct engine *e, char *err, size_t errlen)
{
	struct sim_result *r = e->res;
	const struct trace_header *h = trace_reader_header(e->rd);
	r->trace_path = strdup(e->path);
	r->policy = strdup(e->pol->name);
	r->conf = strdup(e->o->conf ? e->o->conf : "");
	if (!r->trace_path || !r->policy || !r->conf)
		goto nomem;
	if (h && h->nlabels) {
		r->labels = calloc(h->nlabels, sizeof *r->labels);
		if (!r->labels)
			goto nomem;
		for (size_t i = 0; i < h->nlabels; i++) {
			r->labels[i].key = strdup(h->labels[i].key ? h->labels[i].key : "");
			r->labels[i].value = strdup(h->labels[i].value ? h->labels[i].value : "");
			r->nlabels = i + 1;
			if (!r->labels[i].key || !r->labels[i].value)
				goto nomem;
		}
	}
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* The peak-reserved event goes in time order among the others. */
void insert_peak_event(struct engine *e)
{
	struct sim_result *r = e->res;
	char detail[160];
	if (!e->peak_res_seen)
		return;
	snprintf(detail, sizeof detail, "peak reserved %" PRIu64 " bytes", e->peak_res_seen);
	add_event(e, SIM_EV_PEAK_RESERVED, e->peak_res_t, e->peak_res_seen,
		  e->peak_res_line, detail);
	if (!r->events || !r->nevents)
		return;
	struct sim_event pk = r->events[r->nevents - 1];
	size_t pos = r->nevents - 1;
	while (pos > 0 && r->events[pos - 1].t > pk.t) {
		r->events[pos] = r->events[pos - 1];
		pos--;
	}
	r->events[pos] = pk;
}

/* A foreign library's name, as `import torch-markers` reports it: the
 * basename of the source, and the memory kind unless plain device memory. */
void flib_name(struct engine *e, const struct flib *l, char *buf, size_t len)
{
	static const char *const kinds[] = { "unknown", "pageable", "pinned", "device",
		"array", "managed", "device static", "managed static" };
	const char *s = l->source == TRACE_NO_STRING ? NULL : trace_reader_string(e->rd, l->source);
	const char *base = s ? strrchr(s, '/') : NULL;
	base = base ? base + 1 : s ? s : "(no source)";
	if (l - e->flibs == FLIB_MAX - 1)
		snprintf(buf, len, "(other libraries)");
	else if (l->kind == TMEM_DEVICE)
		snprintf(buf, len, "%s", base);
	else
		snprintf(buf, len, "%s [%s]", base,
			 l->kind < sizeof kinds / sizeof kinds[0] ? kinds[l->kind] : "unknown");
}

int flib_cmp(const void *a, const void *b)
{
	const struct sim_foreign_lib *x = a, *y = b;
	if (x->peak != y->peak)
		return x->peak > y->peak ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The largest foreign libraries into the result, in a fixed order. */
int foreign_finish(struct engine *e)
{
	struct sim_result *r = e->res;
	r->device_peak = device_peak_total(e->dev);
	if (e->xla) {
		r->xla_applied = 1;
		r->xla_outside = e->xla->outside_n;
		r->xla_outside_bytes = e->xla->outside_bytes;
		r->xla_lowered = e->xla->lowered;
		r->xla_lowered_bytes = e->xla->lowered_bytes;
	}
	if (!e->fsub && !e->xla_route)
		return 0;
	r->foreign_routed = 1;
	snprintf(r->allocator_source, sizeof r->allocator_source, "%s",
		 e->fsub ? e->fsub : SIM_XLA_SOURCE);
	if (r->oom && e->oom_flib >= 0)
		flib_name(e, &e->flibs[e->oom_flib], r->oom_foreign_lib, sizeof r->oom_foreign_lib);
	if (!e->nflib)
		return 0;
	struct sim_foreign_lib *all = calloc(e->nflib, sizeof *all);
	if (!all)
		return -1;
	for (uint32_t i = 0; i < e->nflib; i++) {
		flib_name(e, &e->flibs[i], all[i].name, sizeof all[i].name);
		all[i].allocs = e->flibs[i].allocs;
		all[i].peak = e->flibs[i].peak;
		all[i].at_oom = e->flibs[i].at_oom;
	}
	qsort(all, e->nflib, sizeof *all, flib_cmp);
	r->nforeign_libs = e->nflib < SIM_FOREIGN_TOP ? e->nflib : SIM_FOREIGN_TOP;
	r->foreign_libs = all;
	return 0;
}

int finish(struct engine *e, char *err, size_t errlen)
{
	struct sim_result *r = e->res;
	struct device_counters c;
	const struct trace_trailer *tr = trace_reader_trailer(e->rd);
	drain_until(e, UINT64_MAX);
	uint64_t sim_end = e->host_end > e->gpu_end ? e->host_end : e->gpu_end;
	if (e->nrng)
		ranges_end(e, UINT64_MAX, sim_end);
	if (e->nnvo)
		nv_pop(e, UINT64_MAX, sim_end);
	ranges_merge(r, 1ull << e->tl_shift);
	pk_finish(e);
	step_close(e, sim_end);
	r->step_count = r->nsteps;
	if (r->nsteps) {
		/* the first step is warm-up (autotuning, first allocations) */
		size_t from = r->nsteps >= 2 ? 1 : 0;
		uint64_t sum = 0;
		uint64_t busy = 0;
		for (size_t i = from; i < r->nsteps; i++) {
			sum += r->step_ns[i];
			busy += r->step_gpu_ns[i];
		}
		r->step_time_ns = sum / (r->nsteps - from);
		r->gpu_busy_fraction = sum ? (double)busy / (double)sum : 0;
	}
	r->timed = e->cost != NULL;
	r->trace_crc32 = trace_reader_crc32(e->rd);
	r->trace_bytes = trace_reader_bytes(e->rd);
	if (tr && !tr->present)
		r->complete = 0;
	device_get_counters(e->dev, &c);
	r->peak_reserved = c.peak_reserved;
	device_calls(e, &r->device_allocs, &r->device_frees);
	r->fragmentation = r->peak_reserved
		? 1.0 - (double)r->peak_allocated / (double)r->peak_reserved : 0.0;
	if (e->have_t0) {
		r->trace_duration_ns = e->trace_end - e->t0;
		uint64_t end = e->host_end > e->gpu_end ? e->host_end : e->gpu_end;
		r->sim_duration_ns = end - e->t0;
	}
	insert_peak_event(e);
	if (foreign_finish(e) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (e->pol->stats)
		e->pol->stats(e->st, final_stat, e);
	/* the timeline: filled buckets only */
	r->timeline = calloc(e->tl_n, sizeof *r->timeline);
	if (!r->timeline) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < e->tl_n; i++) {
		if (!e->tl[i].filled)
			continue;
		struct sim_timeline_point *p = &r->timeline[r->ntimeline++];
		p->t = (uint64_t)i << e->tl_shift;
		p->allocated = e->tl[i].alloc;
		p->reserved = e->tl[i].res;
	}
	return 0;
}

/* The offline pre-pass: the policy sees the whole trace first. */
int prepass(struct engine *e, char *err, size_t errlen)
{
	struct trace_rec rec;
	struct foreign_rule fr = {e->fsub, NULL, 0, e->xla, e->xla_route, 0};
	struct u64map fl;       /* foreign addresses live: their frees are not the policy's */
	int rc, ret = -1;
	u64map_init(&fl);
	while ((rc = trace_reader_next(e->rd, &rec)) == TRACE_OK) {
		if ((fr.sub || fr.xla) && rec.type <= TREC_FREE && mem_rules(e->rd, &rec, &fr)) {
			if (rec.u.mem.addr != U64MAP_EMPTY && u64map_put(&fl, rec.u.mem.addr, 1) < 0) {
				snprintf(err, errlen, "%s:%" PRIu64 ": out of memory", e->path, rec.line);
				goto out;
			}
			continue;
		}
		if (fl.count && rec.type == TREC_FREE && rec.u.mem.addr != U64MAP_EMPTY &&
		    u64map_del(&fl, rec.u.mem.addr, NULL))
			continue;
		if (e->pol->prepass(e->st, &rec) < 0) {
			snprintf(err, errlen, "%s:%" PRIu64 ": policy %s rejected the record in its pre-pass",
				 e->path, rec.line, e->pol->name);
			goto out;
		}
	}
	if (rc < 0 && rc != TRACE_ERR_TRUNCATED) {
		snprintf(err, errlen, "%s", trace_reader_error(e->rd));
		goto out;
	}
	if (e->pol->prepass_done && e->pol->prepass_done(e->st, err, errlen) < 0)
		goto out;
	if (trace_reader_rewind(e->rd) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(e->rd));
		goto out;
	}
	ret = 0;
out:
	free(fr.cache);
	u64map_free(&fl);
	return ret;
}

/* Timed replays only: which GPU work each API call launched (CUPTI's
 * correlation id joins a 'p' launch to its 'k'/'c'/'m'). Kept for the
 * whole trace: memory grows with the number of GPU records, which is fine
 * for real captures (the timed model's purpose) and costs the untimed
 * replay nothing. A correlation id seen twice keeps its first record; the
 * others are issued at their own start. */
int launch_prepass(struct engine *e, char *err, size_t errlen)
{
	struct trace_rec rec;
	size_t cap = 0;
	int rc;
	while ((rc = trace_reader_next(e->rd, &rec)) == TRACE_OK) {
		uint64_t corr, v;
		uint32_t stream;
		if (rec.type == TREC_KERNEL) {
			corr = rec.u.kernel.corr;
			stream = rec.u.kernel.stream;
		} else if (rec.type == TREC_MEMCPY || rec.type == TREC_MEMSET) {
			corr = rec.u.copy.corr;
			stream = rec.u.copy.stream;
		} else {
			continue;
		}
		if (!corr || corr == U64MAP_EMPTY || u64map_get(&e->launch, corr, &v))
			continue;
		if (VEC_RESERVE(e->ops, cap, e->nops + 1, 1024) < 0)
			goto nomem;
		e->ops[e->nops].dur = rec.end >= rec.start ? rec.end - rec.start : 0;
		e->ops[e->nops].end = rec.end;
		e->ops[e->nops].stream = stream;
		e->ops[e->nops].issued = 0;
		if (u64map_put(&e->launch, corr, ++e->nops) < 0)
			goto nomem;
	}
	if (rc < 0 && rc != TRACE_ERR_TRUNCATED) {
		snprintf(err, errlen, "%s", trace_reader_error(e->rd));
		return -1;
	}
	if (trace_reader_rewind(e->rd) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(e->rd));
		return -1;
	}
	return 0;
nomem:
	snprintf(err, errlen, "%s:%" PRIu64 ": out of memory", e->path, rec.line);
	return -1;
}

