/*
 * trace_strmap.h: a reader's string ids as a writer's, for transforms that
 * read one trace and write another (fusion, compile, ...): each string is
 * interned in the writer the first time a record written refers to it.
 */
#ifndef TRACES_TRACE_STRMAP_H
#define TRACES_TRACE_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

struct trace_strmap {
	const struct trace_reader *rd;
	struct trace_writer *w;
	uint32_t *id;                /* reader id -> writer id + 1 (0: not yet) */
	size_t cap;
};

/* Map RD's ids into W's. */
void trace_strmap_init(struct trace_strmap *m, const struct trace_reader *rd,
		       struct trace_writer *w);
void trace_strmap_free(struct trace_strmap *m);

/* *OUT = W's id of RD's SID (TRACE_NO_STRING stays). 0, or -1 out of memory. */
int trace_strmap_id(struct trace_strmap *m, uint32_t sid, uint32_t *out);

/* Map every string id REC holds: an allocation's or free's source, a
 * kernel's name, a range's, an API call's. 0, or -1 out of memory. */
int trace_strmap_rec(struct trace_strmap *m, struct trace_rec *rec);

#endif /* TRACES_TRACE_STRMAP_H */
