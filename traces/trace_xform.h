/*
 * trace_xform.h: what transforms that read one trace and write another
 * (fusion, compile, the --requests merge, ...) share: a reader's string ids
 * as a writer's, each interned the first time a record written refers to
 * it; the host launch time of a GPU operation; closing the output with the
 * input's trailer.
 */
#ifndef TRACES_TRACE_XFORM_H
#define TRACES_TRACE_XFORM_H

#include <stddef.h>
#include <stdint.h>

#include "../base/u64map.h"
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

/*
 * Host launch times: the start of the API call (a 'p' record) with a GPU
 * operation's correlation id. Note every API record as it is read; take a
 * kernel's, copy's or memset's launch when it comes (each id once).
 */
struct trace_launches { struct u64map corr; };
void trace_launches_init(struct trace_launches *l);
void trace_launches_free(struct trace_launches *l);
/* Remember REC's start when it is an API record with a correlation id.
 * 0, or -1 out of memory. */
int trace_launches_note(struct trace_launches *l, const struct trace_rec *rec);
/* The launch time of the operation with correlation id CORR that started
 * on the GPU at START: its API call's start if one was noted (and not
 * later than START), else START. */
uint64_t trace_launches_take(struct trace_launches *l, uint64_t corr, uint64_t start);

/*
 * Open OUT (atomically; gzip when it ends in .gz) for a transform of RD: its
 * header written with ADD[0..NADD) laid over RD's labels (an added label
 * replaces the one of the same key, else comes last; trace_labels_override),
 * and *SM mapping RD's string ids into the new writer. Returns the writer,
 * or NULL with ERR (nothing left open; *SM then needs no free).
 */
struct trace_writer *trace_xform_open(const char *out, const struct trace_reader *rd,
				      const struct trace_label *add, size_t nadd,
				      struct trace_strmap *sm, char *err, size_t errlen);

/* Close *W as complete or not, with the dropped count, as RD's trailer says
 * (a transform neither completes a trace cut short nor hides its losses).
 * *W is gone either way and set to NULL (a caller's cleanup that aborts a
 * writer still open skips it). 0, or -1 with ERR. */
int trace_xform_close(struct trace_writer **w, const struct trace_reader *rd, char *err,
		      size_t errlen);

#endif /* TRACES_TRACE_XFORM_H */
