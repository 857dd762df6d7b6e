/*
 * trace_check.c: allocation lifetimes and kernel links of a whole trace
 * (see trace_check.h). Memory stays bounded by the live allocations
 * (u64map), never by the trace's length.
 */
#include "trace_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"
#include "../base/u64map.h"

struct vstate {
	const char *path;
	struct trace_check_result *res;
	struct u64map live_addr; /* addr -> allocation id | VLIVE_STATIC */
	struct u64map live_id;   /* allocation id -> bytes */
	uint64_t nallocs;
};

/* live_addr: the allocation is module memory (kind 6 or 7). Allocation ids
 * are ordinals of 'a' records, far below 2^63. */
#define VLIVE_STATIC (UINT64_C(1) << 63)

static int is_static_kind(uint32_t kind)
{
	return kind == TMEM_DEVICE_STATIC || kind == TMEM_MANAGED_STATIC;
}

static void vwarn(struct vstate *v, uint64_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Warnings are counted always but kept only for the first few. */
static void vwarn(struct vstate *v, uint64_t line, const char *fmt, ...)
{
	struct trace_check_result *r = v->res;
	if (r->warnings++ >= TRACE_CHECK_NOTES)
		return;
	struct trace_check_note *n = &r->notes[r->nnotes++];
	n->line = line;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(n->text, sizeof n->text, fmt, ap);
	va_end(ap);
}

static int vfail(struct vstate *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The verdict: RES->error, and -1 to stop. */
static int vfail(struct vstate *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->res->error, sizeof v->res->error, fmt, ap);
	va_end(ap);
	return -1;
}

/* Lifetime checks for one record; 0, or -1 with the verdict set. */
static int validate_rec(struct vstate *v, const struct trace_rec *rec)
{
	const struct trace_mem *m = &rec->u.mem;
	uint64_t val;
	switch (rec->type) {
	case TREC_ALLOC:
		v->nallocs++;
		if (m->addr == U64MAP_EMPTY)
			return vfail(v, "%s:%" PRIu64 ": allocation at reserved address 0x%" PRIx64,
				     v->path, rec->line, m->addr);
		if (u64map_get(&v->live_addr, m->addr, &val)) {
			if (!(val & VLIVE_STATIC) || !is_static_kind(m->kind))
				return vfail(v, "%s:%" PRIu64 ": allocation at 0x%" PRIx64 " which is "
					     "still live (allocation id %" PRIu64 " was never freed)",
					     v->path, rec->line, m->addr, val & ~VLIVE_STATIC);
			/* a module loaded again: its globals are registered anew,
			 * and the capture recorded no free at the unload */
			v->res->static_replaced++;
			vwarn(v, rec->line, "static allocation at 0x%" PRIx64 " while allocation id %"
			      PRIu64 " (static) is still live: module reloaded, treated as "
			      "replacing it", m->addr, val & ~VLIVE_STATIC);
			u64map_del(&v->live_id, val & ~VLIVE_STATIC, NULL);
		}
		if (u64map_put(&v->live_addr, m->addr,
			       m->id | (is_static_kind(m->kind) ? VLIVE_STATIC : 0)) < 0 ||
		    u64map_put(&v->live_id, m->id, m->bytes) < 0)
			return vfail(v, "%s: out of memory", v->path);
		return 0;
	case TREC_FREE:
		if (m->addr == U64MAP_EMPTY || !u64map_del(&v->live_addr, m->addr, &val))
			return vfail(v, "%s:%" PRIu64 ": free of 0x%" PRIx64 " which is not a live "
				     "allocation", v->path, rec->line, m->addr);
		uint64_t bytes = 0;
		u64map_del(&v->live_id, val & ~VLIVE_STATIC, &bytes);
		if (m->bytes && m->bytes != bytes)
			vwarn(v, rec->line, "free says %" PRIu64 " bytes, the allocation had %" PRIu64,
			      m->bytes, bytes);
		return 0;
	case TREC_KERNEL:
		for (uint32_t i = 0; i < rec->u.kernel.nlinks; i++) {
			uint64_t id = rec->u.kernel.links[i];
			if (id >= v->nallocs)
				return vfail(v, "%s:%" PRIu64 ": kernel links allocation id %" PRIu64
					     ", but only %" PRIu64 " allocations exist so far",
					     v->path, rec->line, id, v->nallocs);
			if (id != U64MAP_EMPTY && !u64map_get(&v->live_id, id, &val))
				vwarn(v, rec->line, "kernel links allocation id %" PRIu64
				      " which was freed before the kernel started", id);
		}
		return 0;
	default:
		return 0;
	}
}

int trace_check(const char *path, struct trace_check_result *res)
{
	memset(res, 0, sizeof *res);
	struct trace_reader *r = trace_reader_open(path);
	if (!r) {
		snprintf(res->error, sizeof res->error, "%s: out of memory", path);
		return -1;
	}
	if (trace_reader_status(r) < 0) {
		snprintf(res->error, sizeof res->error, "%s", trace_reader_error(r));
		trace_reader_close(r);
		return 0;
	}
	struct vstate v = {.path = path, .res = res};
	u64map_init(&v.live_addr);
	u64map_init(&v.live_id);
	struct trace_rec rec;
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		res->records++;
		if (validate_rec(&v, &rec) < 0)
			goto out;
	}
	if (rc < 0) {
		snprintf(res->error, sizeof res->error, "%s", trace_reader_error(r));
		goto out;
	}
	res->ok = 1;
	res->complete = trace_reader_trailer(r)->present;
out:
	u64map_free(&v.live_addr);
	u64map_free(&v.live_id);
	trace_reader_close(r);
	return 0;
}
