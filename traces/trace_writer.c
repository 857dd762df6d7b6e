/*
 * trace_writer.c: writes the trace text form (traces/FORMAT.md), plain or
 * gzip (when the path ends in ".gz").
 *
 * Records are formatted by hand into one output buffer and written in large
 * chunks; every write's result is checked, so a full disk is an error, not
 * a silently short trace. Two ways to land on disk (trace.h): ATOMIC writes
 * a temp file beside PATH and renames it at close, so readers never see a
 * half trace; STREAM writes PATH itself, so a producer killed after a flush
 * leaves a readable trace that simply lacks its 'end' trailer.
 *
 * Times are written as deltas ("+N") from the previous record's start and
 * ends as "+N" from the record's own start: most deltas are a few digits,
 * which keeps traces short and compress well.
 */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../base/strpool.h"
#include "../base/vec.h"

#define WR_BUF_SIZE (256u << 10)
/* Room one event record can need: a kernel with TRACE_MAX_LINKS links. */
#define WR_REC_MAX 4096
#define WR_ERR_LEN 1024

struct trace_writer {
	char *path;          /* where the trace ends up */
	char *tmp;           /* ATOMIC: the file being written, else NULL */
	int fd;              /* plain output, or -1 */
	gzFile gz;           /* gzip output, or NULL */
	int status;          /* 0 or the first error (sticky) */
	int started;         /* magic line written */
	int in_body;         /* a record written: no more header */
	int header_done;
	char *ob;
	size_t olen;
	uint64_t prev_start;
	uint64_t nrecords;
	struct strpool strs; /* interned strings, by id */
	char err[WR_ERR_LEN];
};

static int wr_fail(struct trace_writer *w, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Keep the first error; every later call returns it. */
static int wr_fail(struct trace_writer *w, int status, const char *fmt, ...)
{
	if (w->status < 0)
		return w->status;
	int n = snprintf(w->err, sizeof w->err, "%s: ", w->path);
	if (n < 0 || (size_t)n >= sizeof w->err)
		n = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->err + n, sizeof w->err - (size_t)n, fmt, ap);
	va_end(ap);
	w->status = status;
	return status;
}

/* Write the buffer out; a short or failed write is an I/O error. */
static int wr_drain(struct trace_writer *w)
{
	if (w->status < 0)
		return w->status;
	size_t off = 0;
	while (off < w->olen) {
		if (w->gz) {
			int n = gzwrite(w->gz, w->ob + off, (unsigned)(w->olen - off));
			if (n <= 0) {
				int errnum = 0;
				const char *m = gzerror(w->gz, &errnum);
				return wr_fail(w, TRACE_ERR_IO, "write failed: %s",
					       errnum == Z_ERRNO ? strerror(errno) : m);
			}
			off += (size_t)n;
		} else {
			ssize_t n = write(w->fd, w->ob + off, w->olen - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return wr_fail(w, TRACE_ERR_IO, "write failed: %s",
					       n < 0 ? strerror(errno) : "no progress");
			off += (size_t)n;
		}
	}
	w->olen = 0;
	return 0;
}

/* Append N bytes, draining first when they do not fit. */
static int wr_put(struct trace_writer *w, const char *s, size_t n)
{
	while (n > 0) {
		if (w->olen == WR_BUF_SIZE && wr_drain(w) < 0)
			return w->status;
		size_t k = WR_BUF_SIZE - w->olen;
		if (k > n)
			k = n;
		memcpy(w->ob + w->olen, s, k);
		w->olen += k;
		s += k;
		n -= k;
	}
	return w->status;
}

/* Text that must stay on one line: newlines become spaces. */
static int wr_put_line_text(struct trace_writer *w, const char *s)
{
	for (const char *p = s; *p;) {
		size_t n = strcspn(p, "\r\n");
		if (wr_put(w, p, n) < 0)
			return w->status;
		p += n;
		if (*p) {
			if (wr_put(w, " ", 1) < 0)
				return w->status;
			p++;
		}
	}
	return w->status;
}

/* Decimal digits of V at P; returns the end. */
static char *wr_u64(char *p, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *wr_hex(char *p, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[16];
	int n = 0;
	*p++ = '0';
	*p++ = 'x';
	do {
		tmp[n++] = digits[v & 15];
		v >>= 4;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *wr_sp_u64(char *p, uint64_t v)
{
	*p++ = ' ';
	return wr_u64(p, v);
}

static char *wr_stream(char *p, uint32_t s)
{
	*p++ = ' ';
	if (s == TRACE_NO_STREAM) {
		*p++ = '-';
		return p;
	}
	return wr_u64(p, s);
}

static char *wr_word(char *p, const char *s)
{
	size_t n = strlen(s);
	*p++ = ' ';
	memcpy(p, s, n);
	return p + n;
}

static int wr_start(struct trace_writer *w)
{
	if (w->started)
		return w->status;
	w->started = 1;
	char line[64];
	int n = snprintf(line, sizeof line, "%s %d\n", TRACE_MAGIC, TRACE_FORMAT_VERSION);
	return wr_put(w, line, (size_t)n);
}

/*
 * Create the output. ATOMIC creates PATH.tmp.PID exclusively (a stale one
 * from a crashed run with the same pid is replaced) so two writers never
 * share a temp file.
 */
struct trace_writer *trace_writer_open(const char *path, unsigned flags,
				       char *err, size_t errlen)
{
	struct trace_writer *w = calloc(1, sizeof *w);
	if (!w || !path) {
		snprintf(err, errlen, "%s", w ? "no file name" : "out of memory");
		free(w);
		return NULL;
	}
	w->fd = -1;
	w->path = strdup(path);
	w->ob = malloc(WR_BUF_SIZE);
	if (!w->path || !w->ob)
		goto fail_nomem;
	const char *target = path;
	if (flags & TRACE_W_ATOMIC) {
		size_t n = strlen(path) + 32;
		w->tmp = malloc(n);
		if (!w->tmp)
			goto fail_nomem;
		snprintf(w->tmp, n, "%s.tmp.%ld", path, (long)getpid());
		target = w->tmp;
		w->fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (w->fd < 0 && errno == EEXIST && unlink(target) == 0)
			w->fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	} else {
		w->fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	}
	if (w->fd < 0) {
		snprintf(err, errlen, "%s: cannot create: %s", target, strerror(errno));
		goto fail;
	}
	size_t plen = strlen(path);
	if (plen >= 3 && !strcmp(path + plen - 3, ".gz")) {
		w->gz = gzdopen(w->fd, "wb");
		if (!w->gz) {
			snprintf(err, errlen, "%s: cannot start gzip stream", target);
			close(w->fd);
			w->fd = -1;
			goto fail_unlink;
		}
		w->fd = -1; /* owned by gz now */
		gzbuffer(w->gz, 128u << 10);
	}
	return w;

fail_nomem:
	snprintf(err, errlen, "%s: out of memory", path);
	goto fail;
fail_unlink:
	unlink(target);
fail:
	if (w->fd >= 0) {
		close(w->fd);
		if (w->tmp)
			unlink(w->tmp);
	}
	free(w->tmp);
	free(w->ob);
	free(w->path);
	free(w);
	return NULL;
}

/* Magic line, then the known header fields that are set, then labels. */
int trace_writer_header(struct trace_writer *w, const struct trace_header *h)
{
	if (w->status < 0)
		return w->status;
	if (w->in_body || w->header_done)
		return wr_fail(w, TRACE_ERR_FORMAT, "header written twice or after records");
	w->header_done = 1;
	if (wr_start(w) < 0)
		return w->status;
	const struct {
		const char *key;
		const char *val;
	} f[] = {
		{"producer", h->producer}, {"producer_version", h->producer_version},
		{"gpu", h->gpu}, {"compute_capability", h->compute_capability},
		{"driver", h->driver}, {"cuda", h->cuda}, {"cupti", h->cupti},
		{"cudnn", h->cudnn}, {"command", h->command},
	};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (!f[i].val)
			continue;
		wr_put(w, "H ", 2);
		wr_put(w, f[i].key, strlen(f[i].key));
		wr_put(w, " ", 1);
		wr_put_line_text(w, f[i].val);
		wr_put(w, "\n", 1);
	}
	if (h->total_memory) {
		char line[64];
		int n = snprintf(line, sizeof line, "H total_memory %" PRIu64 "\n", h->total_memory);
		wr_put(w, line, (size_t)n);
	}
	for (size_t i = 0; i < h->nlabels; i++) {
		const char *k = h->labels[i].key, *v = h->labels[i].value;
		if (!k || !*k || k[strcspn(k, "= \r\n")] || !v)
			return wr_fail(w, TRACE_ERR_FORMAT, "bad label key '%s' (no '=', space "
				       "or newline allowed, not empty)", k ? k : "(null)");
		wr_put(w, "L ", 2);
		wr_put(w, k, strlen(k));
		wr_put(w, "=", 1);
		wr_put_line_text(w, v);
		wr_put(w, "\n", 1);
	}
	return w->status;
}

/*
 * The id of S, defining it with an 'S' line the first time it is seen.
 * TRACE_NO_STRING on failure (the error is reported again at close).
 */
uint32_t trace_writer_intern(struct trace_writer *w, const char *s)
{
	if (w->status < 0 || !s)
		return TRACE_NO_STRING;
	uint32_t id;
	int added = strpool_add(&w->strs, s, &id);
	if (added < 0) {
		wr_fail(w, TRACE_ERR_NOMEM, "out of memory, or too many strings");
		return TRACE_NO_STRING;
	}
	if (!added)
		return id;
	char line[32];
	line[0] = 'S';
	char *p = wr_sp_u64(line + 1, id);
	*p++ = ' ';
	wr_start(w);
	wr_put(w, line, (size_t)(p - line));
	wr_put_line_text(w, s);
	wr_put(w, "\n", 1);
	return w->status < 0 ? TRACE_NO_STRING : id;
}

static int wr_check_sid(struct trace_writer *w, uint32_t id, int none_ok, const char *what)
{
	if (id < w->strs.n || (none_ok && id == TRACE_NO_STRING))
		return 0;
	return wr_fail(w, TRACE_ERR_FORMAT, "record %" PRIu64 ": %s string id %" PRIu32
		       " was not interned", w->nrecords, what, id);
}

/* An enum value past its names would write a word no reader accepts. */
static int wr_check_kind(struct trace_writer *w, uint32_t v, uint32_t count, const char *what)
{
	if (v < count)
		return 0;
	return wr_fail(w, TRACE_ERR_FORMAT, "record %" PRIu64 ": bad %s %" PRIu32,
		       w->nrecords, what, v);
}

/* Start time as a delta, and for spans the end as a delta from the start. */
static char *wr_times(char *p, const struct trace_rec *rec, uint64_t prev, int span)
{
	*p++ = ' ';
	if (prev)
		*p++ = '+';
	p = wr_u64(p, rec->start - prev);
	if (span) {
		*p++ = ' ';
		*p++ = '+';
		p = wr_u64(p, rec->end - rec->start);
	}
	return p;
}

/*
 * One event record. Checks what the reader would reject (order, ids,
 * ranges) so a bug in a producer fails here, naming the record, rather
 * than in whoever reads the trace later.
 */
int trace_writer_record(struct trace_writer *w, const struct trace_rec *rec)
{
	if (w->status < 0)
		return w->status;
	if ((unsigned)rec->type >= TREC_COUNT)
		return wr_fail(w, TRACE_ERR_FORMAT, "record %" PRIu64 ": bad type %d",
			       w->nrecords, (int)rec->type);
	if (rec->start < w->prev_start)
		return wr_fail(w, TRACE_ERR_FORMAT, "record %" PRIu64 " (%s) starts at %" PRIu64
			       ", before the previous record (%" PRIu64 ")", w->nrecords,
			       trace_rec_name(rec->type), rec->start, w->prev_start);
	int span = rec->type >= TREC_KERNEL && rec->type <= TREC_API;
	if (span && rec->end < rec->start)
		return wr_fail(w, TRACE_ERR_FORMAT, "record %" PRIu64 " (%s) ends before it starts",
			       w->nrecords, trace_rec_name(rec->type));
	if (wr_start(w) < 0)
		return w->status;
	if (WR_BUF_SIZE - w->olen < WR_REC_MAX && wr_drain(w) < 0)
		return w->status;
	char *line = w->ob + w->olen, *p = line;
	*p++ = trace_rec_tag(rec->type);
	p = wr_times(p, rec, w->prev_start, span);
	switch (rec->type) {
	case TREC_ALLOC:
	case TREC_FREE: {
		const struct trace_mem *m = &rec->u.mem;
		if (wr_check_sid(w, m->source, 1, "src") < 0)
			return w->status;
		*p++ = ' ';
		p = wr_hex(p, m->addr);
		p = wr_sp_u64(p, m->bytes);
		p = wr_stream(p, m->stream);
		if (m->kind != TMEM_DEVICE || m->flags || m->corr || m->source != TRACE_NO_STRING) {
			p = wr_sp_u64(p, m->kind);
			p = wr_sp_u64(p, m->flags);
			p = wr_sp_u64(p, m->corr);
			if (m->source == TRACE_NO_STRING)
				p = wr_word(p, "-");
			else
				p = wr_sp_u64(p, m->source);
		}
		break;
	}
	case TREC_KERNEL: {
		const struct trace_kernel *k = &rec->u.kernel;
		if (wr_check_sid(w, k->name, 0, "kernel name") < 0)
			return w->status;
		if (k->nlinks > TRACE_MAX_LINKS)
			return wr_fail(w, TRACE_ERR_FORMAT, "record %" PRIu64 ": %" PRIu32
				       " links (most %d)", w->nrecords, k->nlinks, TRACE_MAX_LINKS);
		if (k->nlinks && !k->links)
			return wr_fail(w, TRACE_ERR_FORMAT, "record %" PRIu64 ": %" PRIu32
				       " links but no link array", w->nrecords, k->nlinks);
		p = wr_stream(p, k->stream);
		p = wr_sp_u64(p, k->name);
		for (int d = 0; d < 2; d++) {
			const uint32_t *v = d ? k->block : k->grid;
			p = wr_sp_u64(p, v[0]);
			*p++ = ',';
			p = wr_u64(p, v[1]);
			*p++ = ',';
			p = wr_u64(p, v[2]);
		}
		p = wr_sp_u64(p, k->regs);
		p = wr_sp_u64(p, k->smem);
		p = wr_sp_u64(p, k->corr);
		for (uint32_t i = 0; i < k->nlinks; i++) {
			*p++ = i ? ',' : ' ';
			p = wr_u64(p, k->links[i]);
		}
		if (k->graph || k->graph_node) {
			if (!k->nlinks)
				p = wr_word(p, "-");
			p = wr_sp_u64(p, k->graph);
			p = wr_sp_u64(p, k->graph_node);
		}
		break;
	}
	case TREC_MEMCPY:
	case TREC_MEMSET: {
		const struct trace_copy *c = &rec->u.copy;
		p = wr_stream(p, c->stream);
		p = wr_sp_u64(p, c->bytes);
		if (rec->type == TREC_MEMCPY) {
			if (wr_check_kind(w, c->kind, TCOPY_PTOP + 1, "memcpy kind") < 0)
				return w->status;
			p = wr_word(p, trace_copy_kind_name(c->kind));
		}
		p = wr_sp_u64(p, c->corr);
		if (c->graph || c->graph_node) {
			p = wr_sp_u64(p, c->graph);
			p = wr_sp_u64(p, c->graph_node);
		}
		break;
	}
	case TREC_SYNC:
		if (wr_check_kind(w, rec->u.sync.kind, TSYNC_CONTEXT + 1, "sync kind") < 0)
			return w->status;
		p = wr_word(p, trace_sync_kind_name(rec->u.sync.kind));
		p = wr_stream(p, rec->u.sync.stream);
		p = wr_sp_u64(p, rec->u.sync.corr);
		break;
	case TREC_RANGE:
		if (wr_check_sid(w, rec->u.range.name, 0, "range name") < 0)
			return w->status;
		p = wr_sp_u64(p, rec->u.range.name);
		p = wr_sp_u64(p, rec->u.range.depth);
		if (rec->u.range.uncaptured)
			p = wr_word(p, "uncaptured");
		break;
	case TREC_API:
		if (wr_check_sid(w, rec->u.api.name, 0, "api name") < 0)
			return w->status;
		p = wr_sp_u64(p, rec->u.api.name);
		p = wr_sp_u64(p, rec->u.api.corr);
		if (rec->u.api.has_own) {
			p = wr_sp_u64(p, rec->u.api.own_ns);
			p = wr_sp_u64(p, rec->u.api.own_cbs);
		}
		break;
	case TREC_CONTROL:
		if (wr_check_kind(w, rec->u.control.kind, TCTL_COUNT, "control kind") < 0)
			return w->status;
		p = wr_word(p, trace_control_name(rec->u.control.kind));
		if (rec->u.control.kind != TCTL_EMPTY_CACHE)
			p = wr_sp_u64(p, rec->u.control.bytes);
		break;
	case TREC_SEGMENT:
		if (wr_check_kind(w, rec->u.segment.op, TSEG_COUNT, "segment op") < 0)
			return w->status;
		p = wr_word(p, trace_segment_op_name(rec->u.segment.op));
		*p++ = ' ';
		p = wr_hex(p, rec->u.segment.addr);
		p = wr_sp_u64(p, rec->u.segment.bytes);
		p = wr_stream(p, rec->u.segment.stream);
		break;
	default:
		break;
	}
	*p++ = '\n';
	w->olen += (size_t)(p - line);
	w->prev_start = rec->start;
	w->nrecords++;
	w->in_body = 1;
	return 0;
}

/* Push everything to the file: a sync flush for gzip so the compressed
 * stream up to here decodes even if the process dies next. */
int trace_writer_flush(struct trace_writer *w)
{
	if (wr_start(w) < 0 || wr_drain(w) < 0)
		return w->status;
	if (w->gz && gzflush(w->gz, Z_SYNC_FLUSH) != Z_OK) {
		int errnum = 0;
		const char *m = gzerror(w->gz, &errnum);
		return wr_fail(w, TRACE_ERR_IO, "flush failed: %s",
			       errnum == Z_ERRNO ? strerror(errno) : m);
	}
	return 0;
}

static void wr_free(struct trace_writer *w)
{
	strpool_free(&w->strs);
	free(w->ob);
	free(w->tmp);
	free(w->path);
	free(w);
}

/* Close the descriptor or gzip stream; 0 or TRACE_ERR_IO (a deferred write
 * error often shows up only here). */
static int wr_close_file(struct trace_writer *w, int sync)
{
	int rc = 0;
	if (w->gz) {
		int z = gzclose(w->gz);
		w->gz = NULL;
		if (z != Z_OK)
			rc = wr_fail(w, TRACE_ERR_IO, "close failed: %s",
				     z == Z_ERRNO ? strerror(errno) : "gzip error");
	} else if (w->fd >= 0) {
		if (sync && fsync(w->fd) < 0 && errno != EINVAL && errno != EROFS)
			rc = wr_fail(w, TRACE_ERR_IO, "fsync failed: %s", strerror(errno));
		if (close(w->fd) < 0 && rc == 0)
			rc = wr_fail(w, TRACE_ERR_IO, "close failed: %s", strerror(errno));
		w->fd = -1;
	}
	return rc;
}

/*
 * Trailer, close, rename. On any failure an ATOMIC writer removes its temp
 * file, so PATH is either the old file or the complete new trace.
 */
int trace_writer_close(struct trace_writer **wp, int complete, uint64_t dropped,
		       char *err, size_t errlen)
{
	struct trace_writer *w = wp ? *wp : NULL;
	if (!w)
		return 0;
	*wp = NULL;
	int rc = 0;
	wr_start(w);
	if (complete && w->status == 0) {
		char line[64];
		char *p = line;
		memcpy(p, "end", 3);
		p = wr_sp_u64(p + 3, w->nrecords);
		p = wr_sp_u64(p, dropped);
		*p++ = '\n';
		wr_put(w, line, (size_t)(p - line));
	}
	wr_drain(w);
	wr_close_file(w, w->tmp != NULL && w->status == 0);
	if (w->status == 0 && w->tmp && rename(w->tmp, w->path) < 0)
		wr_fail(w, TRACE_ERR_IO, "cannot rename %s into place: %s", w->tmp,
			strerror(errno));
	if (w->status < 0) {
		rc = w->status;
		if (err && errlen)
			snprintf(err, errlen, "%s", w->err);
		if (w->tmp)
			unlink(w->tmp);
	}
	wr_free(w);
	return rc;
}

/* Give up: close and delete what was written (temp or, for STREAM, PATH). */
void trace_writer_abort(struct trace_writer *w)
{
	if (!w)
		return;
	w->status = TRACE_ERR_IO; /* nothing more is written */
	wr_close_file(w, 0);
	unlink(w->tmp ? w->tmp : w->path);
	wr_free(w);
}
