/*
 * xla_sizes.c: the sizes XLA asked for, from its allocator log, put into a
 * JAX platform-allocator capture (xla_sizes.h says what and why).
 */
#include "xla_sizes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "trace_xform.h"
#include "text_input.h"
#include "../base/u64map.h"
#include "../base/vec.h"

#define LOG_MARK "Allocated ptr="
#define LOG_LINE_MAX (1u << 20)   /* XLA's INFO lines can be long; ours are short */
#define NONE UINT64_MAX

/* One "Allocated ptr=" line; NEXT chains the lines naming the same address. */
struct log_req {
	uint64_t ptr, requested, padded, line, next;
	int paired;             /* given to an allocation of the capture */
};

struct log_reqs {
	struct log_req *v;
	size_t n, cap;
	struct u64map first;    /* ptr -> the first line not yet paired */
};

/* The unsigned number after KEY in S (BASE 16 or 10); -1 when absent or bad. */
static int number_after(const char *s, const char *key, int base, uint64_t *out)
{
	const char *p = strstr(s, key);
	char *end;
	if (!p)
		return -1;
	p += strlen(key);
	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(p, &end, base);
	if (errno || end == p)
		return -1;
	*out = v;
	return 0;
}

static int read_log(const char *path, struct log_reqs *L, char *err, size_t errlen)
{
	char *buf = malloc(LOG_LINE_MAX);
	struct text_input *in = buf ? text_input_open(path, err, errlen) : NULL;
	int rc, ret = -1;
	if (!buf) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	if (!in)
		goto out;
	while ((rc = text_input_line(in, buf, LOG_LINE_MAX, err, errlen)) == 1) {
		const char *m = strstr(buf, LOG_MARK);
		struct log_req q = { 0, 0, 0, text_input_lineno(in), NONE, 0 };
		if (!m)
			continue;   /* XLA's other lines, the program's own output */
		if (number_after(m, LOG_MARK, 16, &q.ptr) < 0 ||
		    number_after(m, "requested size:", 10, &q.requested) < 0 ||
		    number_after(m, "padded size:", 10, &q.padded) < 0 || q.padded < q.requested) {
			snprintf(err, errlen, "%s:%" PRIu64 ": an '" LOG_MARK "' line without "
				"'requested size: N padded size: M' (M >= N)", path, q.line);
			goto out;
		}
		if (VEC_RESERVE(L->v, L->cap, L->n + 1, 256) < 0) {
			snprintf(err, errlen, "%s: out of memory", path);
			goto out;
		}
		L->v[L->n++] = q;
	}
	if (rc < 0)
		goto out;
	/* chain the lines of each address, in order */
	for (size_t i = L->n; i-- > 0;) {
		uint64_t nx;
		if (u64map_get(&L->first, L->v[i].ptr, &nx))
			L->v[i].next = nx;
		if (u64map_put(&L->first, L->v[i].ptr, i) < 0) {
			snprintf(err, errlen, "%s: out of memory", path);
			goto out;
		}
	}
	ret = 0;
out:
	if (in)
		text_input_close(in);
	free(buf);
	return ret;
}

/* Pass 1: pair the log's lines with the capture's allocations; SIZE maps an
 * allocation id to its requested size. */
static int pair(struct trace_reader *r, struct log_reqs *L, struct u64map *size,
		struct xla_sizes_report *rep, char *err, size_t errlen)
{
	struct trace_rec rec;
	uint64_t id = 0;
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		const struct trace_mem *m = &rec.u.mem;
		uint64_t qi;
		if (rec.type != TREC_ALLOC)
			continue;
		id++;
		if (trace_mem_kind_host(m->kind))
			continue;
		rep->device_allocs++;
		if (!u64map_get(&L->first, m->addr, &qi) || qi == NONE) {
			rep->unpaired_allocs++;
			continue;
		}
		struct log_req *q = &L->v[qi];
		if (q->padded != m->bytes) {
			snprintf(err, errlen, "%s:%" PRIu64 ": the allocation at 0x%" PRIx64 " is %"
				PRIu64 " B, but the log's line %" PRIu64 " pairing with it says padded "
				"size %" PRIu64 " (another run's log?)", trace_reader_path(r), rec.line,
				m->addr, m->bytes, q->line, q->padded);
			return -1;
		}
		if (u64map_put(size, id - 1, q->requested) < 0 ||
		    u64map_put(&L->first, m->addr, q->next) < 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		q->paired = 1;
		rep->resized++;
		rep->bytes_before += m->bytes;
		rep->bytes_after += q->requested;
	}
	if (rc < 0 && rc != TRACE_ERR_TRUNCATED) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		return -1;
	}
	if (rep->resized == L->n)
		return 0;
	if (rc == TRACE_ERR_TRUNCATED || !trace_reader_trailer(r)->present) {
		/* a capture cut short: the run logged on after its last record */
		rep->unpaired_lines = L->n - rep->resized;
		return 0;
	}
	/* the first line left over names the problem */
	size_t first = 0;
	while (L->v[first].paired)
		first++;
	snprintf(err, errlen, "%" PRIu64 " of the log's %zu allocations have no allocation at "
		 "their address in %s (first: line %" PRIu64 ", ptr 0x%" PRIx64 "): not the log "
		 "of this capture's run?", L->n - rep->resized, L->n, trace_reader_path(r),
		 L->v[first].line, L->v[first].ptr);
	return -1;
}

/* Pass 2: the capture again, each paired allocation (and its free) at the
 * requested size, the header with the label. */
static int rewrite(struct trace_reader *r, const struct u64map *size, const char *out,
		   uint64_t resized, char *err, size_t errlen)
{
	struct trace_strmap sm;
	struct trace_writer *w = NULL;
	struct u64map live;    /* addr -> requested size of a resized allocation live there */
	struct trace_rec rec;
	char count[32];
	uint64_t id = 0, v;
	int rc, ret = -1;
	u64map_init(&live);
	memset(&sm, 0, sizeof sm);
	if (trace_reader_rewind(r) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	snprintf(count, sizeof count, "%" PRIu64, resized);
	struct trace_label label = {(char *)XLA_SIZES_LABEL, count};
	w = trace_xform_open(out, r, &label, 1, &sm, err, errlen);
	if (!w)
		goto out;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		struct trace_mem *m = &rec.u.mem;
		if (rec.type == TREC_ALLOC) {
			if (u64map_get(size, id++, &v)) {
				if (u64map_put(&live, m->addr, v) < 0)
					goto nomem;
				m->bytes = v;
			} else if (!trace_mem_kind_host(m->kind)) {
				u64map_del(&live, m->addr, NULL);   /* not XLA's: keep its size */
			}
		} else if (rec.type == TREC_FREE && !trace_mem_kind_host(m->kind) &&
			   u64map_del(&live, m->addr, &v)) {
			if (m->bytes)
				m->bytes = v;   /* 0 stays: unknown */
		}
		if (trace_strmap_rec(&sm, &rec) < 0)
			goto nomem;
		if (trace_writer_record(w, &rec) < 0)
			goto werror;
	}
	if (rc < 0 && rc != TRACE_ERR_TRUNCATED) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	ret = trace_xform_close(&w, r, err, errlen);
	goto out;
werror:
	snprintf(err, errlen, "%s: write failed", out);
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	trace_strmap_free(&sm);
	if (w)
		trace_writer_abort(w);
	u64map_free(&live);
	return ret;
}

int xla_sizes_transfer(const char *capture, const char *log, const char *out,
		       struct xla_sizes_report *rep, char *err, size_t errlen)
{
	struct xla_sizes_report local;
	struct log_reqs L = { NULL, 0, 0, { 0 } };
	struct u64map size;
	struct trace_reader *r = NULL;
	int ret = -1;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof *rep);
	u64map_init(&L.first);
	u64map_init(&size);
	if (read_log(log, &L, err, errlen) < 0)
		goto out;
	rep->log_lines = L.n;
	if (!L.n) {
		snprintf(err, errlen, "%s: no '" LOG_MARK "' lines (run the program with "
			"TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=cuda_device_allocator=3 and "
			"XLA_PYTHON_CLIENT_ALLOCATOR=platform)", log);
		goto out;
	}
	r = trace_reader_start(capture, err, errlen);
	if (!r)
		goto out;
	const struct trace_header *h = trace_reader_header(r);
	if (trace_header_label(h, XLA_SIZES_LABEL)) {
		snprintf(err, errlen, "%s: already has the label " XLA_SIZES_LABEL " (sizes "
			"from a log put in before); refusing to do it twice", capture);
		goto out;
	}
	if (pair(r, &L, &size, rep, err, errlen) < 0)
		goto out;
	ret = rewrite(r, &size, out, rep->resized, err, errlen);
out:
	if (r)
		trace_reader_close(r);
	free(L.v);
	u64map_free(&L.first);
	u64map_free(&size);
	return ret;
}
