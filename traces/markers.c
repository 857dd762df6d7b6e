/*
 * markers.c: copy the truth record's empty_cache() calls into a capture.
 *
 * Why: a capture under PYTORCH_NO_CUDA_MEMORY_CACHING=1 has the framework's
 * request stream but not the emptyCache() calls PyTorch makes after each
 * cuDNN benchmark search (aten/src/ATen/native/cudnn/Conv_v7.cpp), so a
 * `pytorch` replay keeps the search workspaces cached and over-reserves.
 *
 * How:
 *  1. Read the truth (a gpumemsim trace, or torch snapshot text imported on
 *     the fly): its allocation sizes in order, the event ordinal of each
 *     alloc and free, and the 'x empty_cache' records (how many allocations
 *     and events came before each).
 *  2. Read the capture once: the framework's device allocations (source
 *     containing "libc10_cuda" unless told otherwise) with the record index
 *     of their alloc and free; every other allocation is foreign (cuBLAS,
 *     cuDNN, module statics) and is only counted, by source.
 *  3. Align the two size sequences with Myers' O(ND) greedy shortest edit
 *     script (E. Myers, "An O(ND) difference algorithm and its variations",
 *     Algorithmica 1986), keeping every V vector for the backtrack:
 *     (D+1)^2 ints, bounded by the edits the match threshold allows. Inside
 *     each gap between exact matches the leftovers are paired by position
 *     (a cuDNN workspace of another size is the same request).
 *  4. A marker that came after truth alloc n-1 goes before the capture
 *     record of the first paired truth alloc >= n, or earlier: before the
 *     first capture free in between whose truth free came after the marker
 *     (the real allocator could not release a block still in use).
 *  5. Rewind the capture and write it back record by record with the
 *     markers inserted (time = the start of the record they precede). No
 *     'a' is added or removed, so allocation ids and kernel links hold.
 */
#include "markers.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/u64map.h"
#include "../base/tmpfile.h"
#include "../base/vec.h"
#include "import_torch.h"
#include "trace.h"
#include "trace_xform.h"

#define MARKERS_DEFAULT_SOURCE "libc10_cuda"
#define MARKERS_DEFAULT_MIN_MATCH 0.90
#define MARKERS_DEFAULT_MAX_GAP 16
/* Most edits the aligner keeps history for: (D+1)^2 int32 = 64 MiB. */
#define MARKERS_MAX_EDITS 4096
#define MARKERS_LABEL "empty_cache_markers"
/* Names the framework's allocator for the engine's routing of the rest
 * (sim/engine.h, SIM_SOURCE_LABEL; same spelling, kept here so traces/
 * does not depend on sim/). */
#define MARKERS_SOURCE_LABEL "allocator_source"
#define NONE UINT64_MAX

/* A growable array of uint64_t. */
struct vec {
	uint64_t *v;
	size_t n, cap;
};

static int vec_push(struct vec *a, uint64_t x)
{
	if (VEC_RESERVE(a->v, a->cap, a->n + 1, 256) < 0)
		return -1;
	a->v[a->n++] = x;
	return 0;
}

struct truth_side {
	struct vec size, line, alloc_ev, free_ev;
	struct vec mark_n, mark_ev, mark_line;  /* per empty_cache marker */
};

struct capture_side {
	struct vec size, line, rec, free_rec;   /* framework allocations */
	struct vec free_order;                  /* framework index of each free, in order */
	struct vec fbytes, fsrc;                /* foreign allocations */
	uint64_t records, allocs, existing_marks, existing_line;
	uint64_t last_start;
	int has_label;
	uint64_t live[MARKERS_MAX_SOURCES];
};

/* ------------------------------------------------------------ alignment */

/* Pair the leftovers of each gap between exact matches by position. */
static void pair_gaps(size_t na, size_t nb, int64_t *amap, unsigned char *aexact)
{
	int64_t la = -1, lb = -1;
	for (size_t i = 0; i <= na; i++) {
		if (i < na && !aexact[i])
			continue;
		int64_t j = i < na ? amap[i] : (int64_t)nb;
		int64_t ga = (int64_t)i - la - 1, gb = j - lb - 1;
		int64_t g = ga < gb ? ga : gb;
		for (int64_t t = 0; t < g; t++)
			amap[la + 1 + t] = lb + 1 + t;
		la = (int64_t)i;
		lb = j;
	}
}

/* Align two sequences; see markers.h. */
int64_t markers_align(const uint64_t *a, size_t na, const uint64_t *b, size_t nb,
		      uint64_t max_edits, int64_t *amap, unsigned char *aexact)
{
	for (size_t i = 0; i < na; i++) {
		amap[i] = -1;
		aexact[i] = 0;
	}
	if (na > INT32_MAX / 2 || nb > INT32_MAX / 2)
		return -1;
	int64_t maxd = (int64_t)(max_edits < na + nb ? max_edits : na + nb);
	int64_t ret = -1, off = maxd + 1, found = -1;
	int32_t *v = calloc((size_t)(2 * maxd + 3), sizeof *v);
	int32_t *hist = NULL;
	size_t hcap = 0;
	if (!v)
		goto out;
	for (int64_t d = 0; d <= maxd && found < 0; d++) {
		for (int64_t k = -d; k <= d; k += 2) {
			int64_t x;
			if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
				x = v[off + k + 1];
			else
				x = v[off + k - 1] + 1;
			int64_t y = x - k;
			while (x < (int64_t)na && y < (int64_t)nb && a[x] == b[y]) {
				x++;
				y++;
			}
			v[off + k] = (int32_t)x;
			if (x >= (int64_t)na && y >= (int64_t)nb) {
				found = d;
				break;
			}
		}
		size_t need = (size_t)((d + 1) * (d + 1));
		if (VEC_RESERVE(hist, hcap, need, 1024) < 0)
			goto out;
		memcpy(hist + d * d, v + off - d, (size_t)(2 * d + 1) * sizeof *v);
	}
	if (found < 0)
		goto out;
	int64_t x = (int64_t)na, y = (int64_t)nb;
	for (int64_t d = found; d > 0; d--) {
		const int32_t *prev = hist + (d - 1) * (d - 1) + (d - 1); /* prev[k], |k| < d */
		int64_t k = x - y;
		int down = k == -d || (k != d && prev[k - 1] < prev[k + 1]);
		int64_t pk = down ? k + 1 : k - 1;
		int64_t px = prev[pk], py = px - pk;
		int64_t sx = down ? px : px + 1;
		while (x > sx) {
			x--;
			y--;
			amap[x] = y;
			aexact[x] = 1;
		}
		x = px;
		y = py;
	}
	while (x > 0 && y > 0) {
		x--;
		y--;
		amap[x] = y;
		aexact[x] = 1;
	}
	pair_gaps(na, nb, amap, aexact);
	ret = found;
out:
	free(v);
	free(hist);
	return ret;
}

/* ------------------------------------------------------------ reading */

/* Open PATH as a trace, or import it as torch snapshot text into a
 * temporary trace (TMP gets its name, to unlink after). */
static struct trace_reader *open_truth(const char *path, char *tmp, size_t tmplen,
				       char *err, size_t errlen)
{
	tmp[0] = 0;
	struct trace_reader *r = trace_reader_open(path);
	if (!r) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	if (trace_reader_status(r) >= 0)
		return r;
	char why[512];
	snprintf(why, sizeof why, "%s", trace_reader_error(r));
	trace_reader_close(r);
	if (tmp_file(tmp, tmplen, "truth") < 0) {
		snprintf(err, errlen, "%s: cannot make a temporary file: %s", tmp, strerror(errno));
		tmp[0] = 0;
		return NULL;
	}
	char ierr[768];
	if (import_torch_snapshot(path, tmp, NULL, NULL, ierr, sizeof ierr) < 0) {
		snprintf(err, errlen, "truth %s is neither a gpumemsim trace (%s) nor a torch "
			"snapshot (%s)", path, why, ierr);
		return NULL;
	}
	return trace_reader_start(tmp, err, errlen);
}

static int read_truth(struct trace_reader *r, struct truth_side *t, char *err, size_t errlen)
{
	struct u64map live;
	struct trace_rec rec;
	uint64_t ev = 0, idx;
	int rc, ret = -1;
	u64map_init(&live);
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		if (rec.type == TREC_ALLOC) {
			if (vec_push(&t->size, rec.u.mem.bytes) || vec_push(&t->line, rec.line) ||
			    vec_push(&t->alloc_ev, ev++) || vec_push(&t->free_ev, NONE))
				goto nomem;
			if (rec.u.mem.addr != U64MAP_EMPTY &&
			    u64map_put(&live, rec.u.mem.addr, t->size.n - 1) < 0)
				goto nomem;
		} else if (rec.type == TREC_FREE) {
			if (u64map_del(&live, rec.u.mem.addr, &idx))
				t->free_ev.v[idx] = ev++;
		} else if (rec.type == TREC_CONTROL && rec.u.control.kind == TCTL_EMPTY_CACHE) {
			if (vec_push(&t->mark_n, t->size.n) || vec_push(&t->mark_ev, ev) ||
			    vec_push(&t->mark_line, rec.line))
				goto nomem;
		}
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "%s: out of memory", trace_reader_path(r));
out:
	u64map_free(&live);
	return ret;
}

/* The slot of the foreign source NAME in the report (creating it), or -1
 * when the table is full. */
static int foreign_slot(struct markers_report *rep, const char *name)
{
	for (size_t i = 0; i < rep->nforeign; i++)
		if (!strcmp(rep->foreign[i].name, name))
			return (int)i;
	if (rep->nforeign == MARKERS_MAX_SOURCES)
		return -1;
	struct markers_source *s = &rep->foreign[rep->nforeign];
	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", name);
	return (int)rep->nforeign++;
}

static const char *mem_kind_word(uint32_t kind)
{
	static const char *const names[] = { "unknown", "pageable", "pinned", "device",
		"array", "managed", "device static", "managed static" };
	return kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

/* Name an allocation's origin for the foreign table: library basename, and
 * the memory kind when it is not plain device memory. */
static void foreign_name(const struct trace_reader *r, const struct trace_mem *m,
			 char *buf, size_t len)
{
	const char *s = m->source == TRACE_NO_STRING ? NULL : trace_reader_string(r, m->source);
	const char *base = s ? strrchr(s, '/') : NULL;
	base = base ? base + 1 : s ? s : "(no source)";
	if (m->kind == TMEM_DEVICE)
		snprintf(buf, len, "%s", base);
	else
		snprintf(buf, len, "%s [%s]", base, mem_kind_word(m->kind));
}

static int read_capture(struct trace_reader *r, const char *source, struct capture_side *c,
			struct markers_report *rep, char *err, size_t errlen)
{
	struct u64map live;
	struct trace_rec rec;
	uint64_t v;
	int rc, ret = -1;
	u64map_init(&live);
	const struct trace_header *h = trace_reader_header(r);
	c->has_label = trace_header_label(h, MARKERS_LABEL) != NULL;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		uint64_t ri = c->records++;
		c->last_start = rec.start;
		if (rec.type == TREC_ALLOC) {
			const struct trace_mem *m = &rec.u.mem;
			const char *s = m->source == TRACE_NO_STRING ? NULL
				: trace_reader_string(r, m->source);
			c->allocs++;
			if (m->kind == TMEM_DEVICE && s && strstr(s, source)) {
				if (vec_push(&c->size, m->bytes) || vec_push(&c->line, rec.line) ||
				    vec_push(&c->rec, ri) || vec_push(&c->free_rec, NONE))
					goto nomem;
				v = (c->size.n - 1) * 2 + 1;
			} else {
				char name[160];
				foreign_name(r, m, name, sizeof name);
				int slot = foreign_slot(rep, name);
				if (slot < 0) {
					rep->foreign_other++;
					slot = MARKERS_MAX_SOURCES; /* counted, not tracked */
				} else {
					struct markers_source *fs = &rep->foreign[slot];
					fs->allocs++;
					fs->bytes += m->bytes;
					c->live[slot] += m->bytes;
					if (c->live[slot] > fs->peak_live)
						fs->peak_live = c->live[slot];
				}
				if (vec_push(&c->fbytes, m->bytes) || vec_push(&c->fsrc, (uint64_t)slot))
					goto nomem;
				v = (c->fbytes.n - 1) * 2;
			}
			if (m->addr != U64MAP_EMPTY && u64map_put(&live, m->addr, v) < 0)
				goto nomem;
		} else if (rec.type == TREC_FREE) {
			if (!u64map_del(&live, rec.u.mem.addr, &v))
				continue;
			size_t idx = (size_t)(v / 2);
			if (v & 1) {
				c->free_rec.v[idx] = ri;
				if (vec_push(&c->free_order, idx))
					goto nomem;
			} else if (c->fsrc.v[idx] < MARKERS_MAX_SOURCES) {
				c->live[c->fsrc.v[idx]] -= c->fbytes.v[idx];
			}
		} else if (rec.type == TREC_CONTROL && rec.u.control.kind == TCTL_EMPTY_CACHE) {
			if (!c->existing_marks++)
				c->existing_line = rec.line;
		}
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	if (!trace_reader_trailer(r)->present) {
		snprintf(err, errlen, "%s: the capture is incomplete (no 'end' line); refusing to "
			"rewrite it", trace_reader_path(r));
		goto out;
	}
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "%s: out of memory", trace_reader_path(r));
out:
	u64map_free(&live);
	return ret;
}

/* ------------------------------------------------------------ placement */

struct placement {
	uint64_t rec;    /* insert before this capture record (records = at the end) */
	uint64_t order;  /* truth order, to keep ties stable */
};

static int cmp_placement(const void *pa, const void *pb)
{
	const struct placement *a = pa, *b = pb;
	if (a->rec != b->rec)
		return a->rec < b->rec ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* Where the streams part most: the longest run of truth allocations
 * without an exact match, as lines of both files. */
static void worst_run(const struct truth_side *t, const struct capture_side *c,
		      const int64_t *tmap, const unsigned char *texact,
		      char *buf, size_t len)
{
	size_t best = 0, best_at = 0, run = 0;
	for (size_t i = 0; i <= t->size.n; i++) {
		if (i < t->size.n && !texact[i]) {
			run++;
			continue;
		}
		if (run > best) {
			best = run;
			best_at = i - run;
		}
		run = 0;
	}
	if (!best) {
		snprintf(buf, len, "no unmatched run");
		return;
	}
	/* The capture lines around it: the nearest mapped allocations. */
	uint64_t cfrom = c->line.n ? c->line.v[0] : 0;
	uint64_t cto = c->line.n ? c->line.v[c->line.n - 1] : 0;
	for (size_t i = best_at; i-- > 0;)
		if (tmap[i] >= 0) {
			cfrom = c->line.v[tmap[i]];
			break;
		}
	for (size_t i = best_at + best; i < t->size.n; i++)
		if (tmap[i] >= 0) {
			cto = c->line.v[tmap[i]];
			break;
		}
	snprintf(buf, len, "%zu truth allocations without an exact match from truth line %"
		 PRIu64 " (%" PRIu64 " bytes) to line %" PRIu64 ", capture lines %" PRIu64
		 " to %" PRIu64, best, t->line.v[best_at], t->size.v[best_at],
		 t->line.v[best_at + best - 1], cfrom, cto);
}

/* ------------------------------------------------------------ writing */

static int write_marker(struct trace_writer *w, uint64_t t)
{
	struct trace_rec x;
	memset(&x, 0, sizeof x);
	x.type = TREC_CONTROL;
	x.start = x.end = t;
	x.u.control.kind = TCTL_EMPTY_CACHE;
	return trace_writer_record(w, &x);
}

static int write_output(struct trace_reader *r, const char *out, const struct placement *pl,
			size_t npl, const struct capture_side *c, const char *source,
			char *err, size_t errlen)
{
	int ret = -1, rc;
	struct trace_strmap sm;
	struct trace_writer *w = NULL;
	char count[32];
	memset(&sm, 0, sizeof sm);
	if (trace_reader_rewind(r) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	/* The header as it was, plus a label that says the markers are there
	 * (and stops a second run from doubling them), and one naming the
	 * allocator the alignment took as the framework's: the replay sends
	 * every other source beside the policy (an older allocator_source
	 * label gives way to this one). */
	snprintf(count, sizeof count, "%zu", npl);
	const struct trace_label add[] = {
		{(char *)MARKERS_LABEL, count}, {(char *)MARKERS_SOURCE_LABEL, (char *)source},
	};
	w = trace_xform_open(out, r, add, 2, &sm, err, errlen);
	if (!w)
		goto out;
	struct trace_rec rec;
	uint64_t ri = 0;
	size_t next = 0;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		for (; next < npl && pl[next].rec == ri; next++)
			if (write_marker(w, rec.start) < 0)
				goto werror;
		ri++;
		if (trace_strmap_rec(&sm, &rec) < 0)
			goto nomem;
		if (trace_writer_record(w, &rec) < 0)
			goto werror;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	if (ri != c->records) {
		snprintf(err, errlen, "%s: changed while being read (%" PRIu64 " then %" PRIu64
			" records)", trace_reader_path(r), c->records, ri);
		goto out;
	}
	for (; next < npl; next++)
		if (write_marker(w, c->last_start) < 0)
			goto werror;
	ret = trace_xform_close(&w, r, err, errlen);
	goto out;
werror:
	snprintf(err, errlen, "%s: write failed", out);
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	if (w)
		trace_writer_abort(w);
	trace_strmap_free(&sm);
	return ret;
}

/* ------------------------------------------------------------ driver */

static void vecs_free(struct vec *const *vs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(vs[i]->v);
}

/* Index of the first framework free recorded at or after record index RI. */
static size_t first_free_from(const struct capture_side *c, uint64_t ri)
{
	size_t lo = 0, hi = c->free_order.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->free_rec.v[c->free_order.v[mid]] < ri)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Place every marker; -1 with ERR when one sits in too wide a gap. */
static int place_markers(const struct truth_side *t, const struct capture_side *c,
			 const int64_t *cmap, const int64_t *tmap, const unsigned char *texact,
			 uint64_t max_gap, struct placement *pl, struct markers_report *rep,
			 char *err, size_t errlen)
{
	size_t nt = t->size.n;
	for (size_t m = 0; m < t->mark_n.n; m++) {
		size_t n = (size_t)t->mark_n.v[m];
		uint64_t ev = t->mark_ev.v[m];
		/* The widest run of inexact truth allocations around the marker. */
		size_t pe = n, qe = n;
		while (pe > 0 && !texact[pe - 1])
			pe--;
		while (qe < nt && !texact[qe])
			qe++;
		uint64_t gap = qe - pe;
		if (gap > rep->max_marker_gap)
			rep->max_marker_gap = gap;
		if (gap > max_gap) {
			snprintf(err, errlen, "truth line %" PRIu64 ": the empty_cache sits in a run of %"
				PRIu64 " truth allocations without an exact match in the capture "
				"(truth lines %" PRIu64 "-%" PRIu64 "); the most allowed is %" PRIu64
				" (--max-gap)", t->mark_line.v[m], gap,
				pe < nt ? t->line.v[pe] : 0, qe > 0 ? t->line.v[qe - 1] : 0, max_gap);
			return -1;
		}
		size_t q = n;
		while (q < nt && tmap[q] < 0)
			q++;
		uint64_t hi = q < nt ? c->rec.v[tmap[q]] : c->records;
		size_t p = n;
		while (p > 0 && tmap[p - 1] < 0)
			p--;
		uint64_t lo = p > 0 ? c->rec.v[tmap[p - 1]] + 1 : 0;
		/* A free between the two allocs whose truth free came after the
		 * marker: the block was live at the real empty_cache. */
		uint64_t at = hi;
		for (size_t f = first_free_from(c, lo); f < c->free_order.n; f++) {
			size_t ci = (size_t)c->free_order.v[f];
			uint64_t fr = c->free_rec.v[ci];
			if (fr >= hi)
				break;
			if (cmap[ci] >= 0 && t->free_ev.v[cmap[ci]] >= ev) {
				at = fr;
				break;
			}
		}
		if (at < hi)
			rep->moved_by_free++;
		pl[m].rec = at;
		pl[m].order = m;
	}
	qsort(pl, t->mark_n.n, sizeof *pl, cmp_placement);
	return 0;
}

/* Copy the truth's empty_cache markers into the capture; see markers.h. */
int markers_transfer(const char *capture, const char *truth, const char *out,
		     const struct markers_options *o, struct markers_report *rep,
		     char *err, size_t errlen)
{
	struct markers_report local;
	struct truth_side t;
	struct capture_side c;
	struct trace_reader *tr = NULL, *cr = NULL;
	int64_t *cmap = NULL, *tmap = NULL;
	unsigned char *cexact = NULL, *texact = NULL;
	struct placement *pl = NULL;
	char tmp[512] = "";
	int ret = -1;
	const char *source = o && o->source && *o->source ? o->source : MARKERS_DEFAULT_SOURCE;
	double min_match = o && o->min_match > 0 ? o->min_match : MARKERS_DEFAULT_MIN_MATCH;
	uint64_t max_gap = o && o->max_gap ? o->max_gap : MARKERS_DEFAULT_MAX_GAP;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof *rep);
	memset(&t, 0, sizeof t);
	memset(&c, 0, sizeof c);

	tr = open_truth(truth, tmp, sizeof tmp, err, errlen);
	if (!tr || read_truth(tr, &t, err, errlen) < 0)
		goto out;
	cr = trace_reader_start(capture, err, errlen);
	if (!cr)
		goto out;
	if (read_capture(cr, source, &c, rep, err, errlen) < 0)
		goto out;
	if (c.existing_marks || c.has_label) {
		snprintf(err, errlen, "%s:%" PRIu64 ": the capture already has empty_cache markers "
			"(%" PRIu64 " records%s); refusing to add more", capture, c.existing_line,
			c.existing_marks, c.has_label ? ", label " MARKERS_LABEL : "");
		goto out;
	}
	size_t nc = c.size.n, nt = t.size.n;
	rep->capture_records = c.records;
	rep->capture_allocs = c.allocs;
	rep->framework_allocs = nc;
	rep->truth_allocs = nt;
	rep->truth_markers = t.mark_n.n;
	if (!nc || !nt) {
		snprintf(err, errlen, "%s: no allocations to align (%zu framework allocations with "
			"source '%s' in the capture, %zu in the truth)", nc ? truth : capture,
			nc, source, nt);
		goto out;
	}

	/* The edits the threshold allows: matched = (nc + nt - D) / 2. */
	size_t big = nc > nt ? nc : nt;
	double need = min_match * (double)big;
	double dmax = (double)(nc + nt) - 2.0 * need;
	if (dmax < 0) {
		snprintf(err, errlen, "poor alignment: %zu framework allocations in %s (source '%s') "
			"against %zu in %s: at most %.1f%% can match, at least %.0f%% needed (the "
			"wrong truth file?)", nc, capture, source, nt, truth,
			100.0 * (double)(nc < nt ? nc : nt) / (double)big, min_match * 100.0);
		goto out;
	}
	uint64_t bound = (uint64_t)dmax + 1;
	if (bound > MARKERS_MAX_EDITS)
		bound = MARKERS_MAX_EDITS;
	cmap = malloc(nc * sizeof *cmap);
	cexact = malloc(nc);
	tmap = malloc(nt * sizeof *tmap);
	texact = calloc(nt, 1);
	if (!cmap || !cexact || !tmap || !texact) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	int64_t d = markers_align(c.size.v, nc, t.size.v, nt, bound, cmap, cexact);
	if (d < 0) {
		size_t i = 0;
		while (i < nc && i < nt && c.size.v[i] == t.size.v[i])
			i++;
		snprintf(err, errlen, "poor alignment: more than %" PRIu64 " edits between the %zu "
			"capture and %zu truth allocations (at least %.0f%% must match); the "
			"streams part at allocation %zu: %s:%" PRIu64 " (%" PRIu64 " bytes) vs %s:%"
			PRIu64 " (%" PRIu64 " bytes)", bound, nc, nt, min_match * 100.0, i,
			capture, i < nc ? c.line.v[i] : 0, i < nc ? c.size.v[i] : 0,
			truth, i < nt ? t.line.v[i] : 0, i < nt ? t.size.v[i] : 0);
		goto out;
	}
	rep->edits = (uint64_t)d;
	for (size_t j = 0; j < nt; j++)
		tmap[j] = -1;
	for (size_t i = 0; i < nc; i++) {
		if (cmap[i] < 0) {
			rep->capture_only++;
			continue;
		}
		tmap[cmap[i]] = (int64_t)i;
		texact[cmap[i]] = cexact[i];
		if (cexact[i])
			rep->matched++;
		else
			rep->substituted++;
	}
	rep->truth_only = nt - rep->matched - rep->substituted;
	rep->match_ratio = (double)rep->matched / (double)big;
	if (rep->match_ratio < min_match) {
		char where[512];
		worst_run(&t, &c, tmap, texact, where, sizeof where);
		snprintf(err, errlen, "poor alignment: %" PRIu64 " of %zu allocations match exactly "
			"(%.1f%%, at least %.0f%% needed); worst: %s", rep->matched, big,
			rep->match_ratio * 100.0, min_match * 100.0, where);
		goto out;
	}

	pl = malloc((t.mark_n.n ? t.mark_n.n : 1) * sizeof *pl);
	if (!pl) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (place_markers(&t, &c, cmap, tmap, texact, max_gap, pl, rep, err, errlen) < 0)
		goto out;
	if (write_output(cr, out, pl, t.mark_n.n, &c, source, err, errlen) < 0)
		goto out;
	rep->markers = t.mark_n.n;
	ret = 0;
out:
	{
		struct vec *vs[] = { &t.size, &t.line, &t.alloc_ev, &t.free_ev, &t.mark_n,
			&t.mark_ev, &t.mark_line, &c.size, &c.line, &c.rec, &c.free_rec,
			&c.free_order, &c.fbytes, &c.fsrc };
		vecs_free(vs, sizeof vs / sizeof vs[0]);
	}
	if (tr)
		trace_reader_close(tr);
	if (cr)
		trace_reader_close(cr);
	if (tmp[0])
		unlink(tmp);
	free(cmap);
	free(cexact);
	free(tmap);
	free(texact);
	free(pl);
	return ret;
}
