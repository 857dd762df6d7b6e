/*
 * xla_requests.c: XLA's request stream from a JAX platform-allocator
 * capture (xla_requests.h says what and why).
 */
#include "xla_requests.h"

#include <stdio.h>
#include <string.h>

int xla_requests_label(const struct trace_header *h)
{
	const char *w = trace_header_label(h, "workload"), *a = trace_header_label(h, "alloc");
	return w && a && !strcmp(w, "jax") && !strcmp(a, "platform");
}

int xla_requests_scan(struct trace_reader *r, struct xla_requests *x, char *err,
		      size_t errlen)
{
	/* addr -> id and addr -> bytes of what is live; id -> bytes of a
	 * request that is not whole granules */
	struct u64map live, live_bytes, odd;
	struct trace_rec rec;
	uint64_t v, big = 0, big_bytes = 0;
	int rc, ret = -1;
	memset(x, 0, sizeof *x);
	u64map_init(&x->outside);
	u64map_init(&live);
	u64map_init(&live_bytes);
	u64map_init(&odd);
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		const struct trace_mem *m = &rec.u.mem;
		if (rec.type > TREC_FREE || trace_mem_kind_host(m->kind))
			continue;
		if (rec.type == TREC_ALLOC) {
			/* a module global registered again at a live address
			 * replaces the earlier one (FORMAT.md): that one was freed */
			if (u64map_put(&live, m->addr, m->id) < 0 ||
			    u64map_put(&live_bytes, m->addr, m->bytes) < 0 ||
			    (m->bytes % XLA_GRANULE && u64map_put(&odd, m->id, m->bytes) < 0))
				goto nomem;
			x->kept++;
			if (m->bytes >= XLA_GRANULE) {
				big++;
				big_bytes += XLA_GRANULE - 1;
			}
		} else if (!u64map_del(&live, m->addr, NULL)) {
			x->orphans++;
		} else {
			u64map_del(&live_bytes, m->addr, NULL);
		}
	}
	if (rc < 0 && rc != TRACE_ERR_TRUNCATED) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	/* what is still live at the end was never freed */
	for (size_t i = 0; i < live.cap; i++) {
		if (live.keys[i] == U64MAP_EMPTY)
			continue;
		if (u64map_put(&x->outside, live.vals[i], 1) < 0)
			goto nomem;
		u64map_get(&live_bytes, live.keys[i], &v);
		x->outside_bytes += v;
		if (v >= XLA_GRANULE) {
			big--;
			big_bytes -= XLA_GRANULE - 1;
		}
	}
	x->outside_n = x->outside.count;
	x->kept -= x->outside_n;
	/* whole granules: no request of XLA's has another size */
	x->granule = 1;
	for (size_t i = 0; x->granule && i < odd.cap; i++)
		if (odd.keys[i] != U64MAP_EMPTY && !u64map_get(&x->outside, odd.keys[i], &v))
			x->granule = 0;
	if (x->granule) {
		x->lowered = big;
		x->lowered_bytes = big_bytes;
	}
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "%s: out of memory", trace_reader_path(r));
out:
	u64map_free(&live);
	u64map_free(&live_bytes);
	u64map_free(&odd);
	return ret;
}

enum xla_req_verdict xla_requests_apply(const struct xla_requests *x, struct trace_rec *rec)
{
	struct trace_mem *m = &rec->u.mem;
	uint64_t v;
	if (rec->type > TREC_FREE || trace_mem_kind_host(m->kind))
		return XLA_REQ_KEEP;
	if (rec->type == TREC_ALLOC && x->outside.count && u64map_get(&x->outside, m->id, &v))
		return XLA_REQ_OUTSIDE;
	/* a free's size is the allocation's (0: unknown), lowered the same way */
	if (x->granule && m->bytes >= XLA_GRANULE && !(m->bytes % XLA_GRANULE))
		m->bytes -= XLA_GRANULE - 1;
	return XLA_REQ_KEEP;
}

void xla_requests_free(struct xla_requests *x)
{
	if (x)
		u64map_free(&x->outside);
}
