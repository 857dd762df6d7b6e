/*
 * engine_oom.c: a request the policy could not serve: the first failure's
 * figures (what was allocated, reserved, cached, the largest free block,
 * what lay outside the allocator) and its verdict, and an OOM event for
 * every one (see engine.c, engine.h).
 */
#include "engine_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void oom_stat(void *ctx, const char *name, int64_t value)
{
	struct engine *e = ctx;
	if (!strcmp(name, "largest_free_block"))
		e->stat_largest = value;
	else if (!strcmp(name, "cached_free_bytes"))
		e->stat_cached = value;
	else if (!strcmp(name, "limit_bytes"))
		e->stat_limit = value;
}

uint64_t workspace_room(struct engine *e, uint64_t want)
{
	uint64_t cap = device_capacity(e->dev);
	if (!cap)
		return UINT64_MAX;
	uint64_t used = device_reserved(e->dev) + device_foreign(e->dev);
	uint64_t room = cap > used ? cap - used : 0;
	if (room >= want)
		return room; /* the device has it: the cache's blocks need not be asked */
	e->stat_largest = e->stat_cached = -1;
	e->stat_limit = 0;
	if (e->pol->stats)
		e->pol->stats(e->st, oom_stat, e);
	if (e->stat_largest > 0 && (uint64_t)e->stat_largest > room)
		room = (uint64_t)e->stat_largest;
	return room;
}

const char *sim_oom_verdict(uint64_t request, uint64_t allocated, uint64_t limit,
			    int64_t largest_free, int64_t cached_free)
{
	return sim_oom_verdict_foreign(request, allocated, 0, limit, 0, largest_free, cached_free);
}

const char *sim_oom_verdict_foreign(uint64_t request, uint64_t allocated, uint64_t foreign,
				    uint64_t limit, uint64_t capacity, int64_t largest_free,
				    int64_t cached_free)
{
	if (largest_free >= 0 && cached_free >= 0 && (uint64_t)cached_free >= request &&
	    (uint64_t)largest_free < request)
		return "fragmentation";
	if (limit && allocated + request > limit)
		return "capacity";
	/* the framework's own bytes fit: what is beside it took the room */
	if (foreign && capacity && allocated + foreign + request > capacity)
		return "foreign";
	/* nothing live and nothing cached: there is nothing to fragment; the
	 * device refused the policy's own reservation (an offline plan, a
	 * preallocated pool), which the capacity cannot hold */
	if (allocated == 0 && cached_free <= 0)
		return "capacity";
	return "fragmentation";
}

void on_oom(struct engine *e, const struct trace_rec *rec, uint64_t now, uint32_t stream)
{
	struct sim_result *r = e->res;
	uint64_t res = device_reserved(e->dev);
	char detail[160], b1[32], b2[32];
	r->num_ooms++;
	if (!r->oom) {
		r->oom = 1;
		r->oom_t = now - e->t0;
		r->oom_bytes = rec->u.mem.bytes;
		r->oom_line = rec->line;
		r->oom_allocated = e->allocated;
		r->oom_reserved = res;
		e->stat_largest = e->stat_cached = -1;
		e->stat_limit = 0;
		if (e->pol->stats)
			e->pol->stats(e->st, oom_stat, e);
		r->oom_largest_free = e->stat_largest;
		r->oom_cached_free = e->stat_cached;
		uint64_t cap = device_capacity(e->dev);
		r->oom_limit = e->stat_limit > 0 && (!cap || (uint64_t)e->stat_limit < cap)
				       ? (uint64_t)e->stat_limit : cap;
		r->oom_foreign = device_foreign(e->dev);
		e->oom_flib = -1;
		for (uint32_t i = 0; i < e->nflib; i++) {
			e->flibs[i].at_oom = e->flibs[i].live;
			if (e->flibs[i].live &&
			    (e->oom_flib < 0 || e->flibs[i].live > e->flibs[e->oom_flib].live))
				e->oom_flib = i;
		}
		const char *v = sim_oom_verdict_foreign(r->oom_bytes, r->oom_allocated,
							r->oom_foreign, r->oom_limit, cap,
							r->oom_largest_free, r->oom_cached_free);
		if (!strcmp(v, "capacity") && r->oom_limit != cap)
			v = "limit";
		snprintf(r->oom_verdict, sizeof r->oom_verdict, "%s", v);
	}
	snprintf(b1, sizeof b1, "%" PRIu64, e->allocated);
	snprintf(b2, sizeof b2, "%" PRIu64, res);
	if (e->fsub || e->xla_route)
		snprintf(detail, sizeof detail,
			 "alloc of %" PRIu64 " bytes on stream %" PRIu32 " failed: allocated %s, "
			 "reserved %s, outside the allocator %" PRIu64, rec->u.mem.bytes, stream, b1,
			 b2, device_foreign(e->dev));
	else
		snprintf(detail, sizeof detail,
			 "alloc of %" PRIu64 " bytes on stream %" PRIu32 " failed: allocated %s, reserved %s",
			 rec->u.mem.bytes, stream, b1, b2);
	add_event(e, SIM_EV_OOM, now - e->t0, rec->u.mem.bytes, rec->line, detail);
}
