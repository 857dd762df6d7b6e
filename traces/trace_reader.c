/*
 * trace_reader.c: the streaming trace reader (format: traces/FORMAT.md).
 *
 * One pass, bounded memory: a fixed buffer of decompressed text (lines are
 * cut out of it in place, never copied) plus the string table and header.
 * zlib's gzread reads plain and gzip input alike, detecting gzip by its
 * magic bytes. Parsing is hand-written over the buffer: every line in the
 * buffer ends with '\n', which no digit loop accepts, so the field parsers
 * need no length checks and the hot 'a'/'f' path is a few compares per byte.
 *
 * Gzip input is inflated by a helper thread a few chunks ahead (inflate
 * costs about as much as parsing, so the two overlap on two cores). The
 * chunks are the same bytes in the same order whatever the threads' timing,
 * and their CRCs are combined in order, so results never depend on it. Only
 * that thread touches the gzFile while it runs; rewind and close stop it.
 *
 * Every error is sticky: once a call fails, later calls return the same
 * status, and trace_reader_error() says "FILE:LINE: what is wrong".
 */
#include "trace_reader_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../base/vec.h"

/* ------------------------------------------------------------ errors */

static int rd_fail_at(struct trace_reader *r, int status, uint64_t line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Record the first error with its file:line prefix; later ones are ignored. */
static int rd_fail_at(struct trace_reader *r, int status, uint64_t line, const char *fmt, ...)
{
	if (r->status < 0)
		return r->status;
	int n = line ? snprintf(r->err, sizeof r->err, "%s:%" PRIu64 ": ", r->path, line)
		     : snprintf(r->err, sizeof r->err, "%s: ", r->path);
	if (n < 0 || (size_t)n >= sizeof r->err)
		n = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err + n, sizeof r->err - (size_t)n, fmt, ap);
	va_end(ap);
	r->status = status;
	return status;
}

/* A token of the current line, printable and short, for error messages. */
static const char *rd_token(const char *p, char *out, size_t outlen)
{
	size_t i = 0;
	while (i + 4 < outlen && *p != ' ' && *p != '\n') {
		unsigned char c = (unsigned char)*p++;
		out[i++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (*p != ' ' && *p != '\n' && i + 4 <= outlen) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
	return out;
}

/* "bad FIELD in 'x' record: 'token'" for the field starting at P. */
static int rd_bad(struct trace_reader *r, char tag, const char *name, const char *p)
{
	char tok[48];
	if (*p == '\n')
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
				  "'%c' record is missing field <%s> (short line)", tag, name);
	return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno, "bad <%s> in '%c' record: '%s'",
			  name, tag, rd_token(p, tok, sizeof tok));
}

/* ------------------------------------------------------------ lines */

/* ------------------------------------------------------------ lines */

/* Refill the buffer: straight from gzread for plain text, from the gzip
 * thread's chunks otherwise; keeps crc32/length of the text read. */
static int rd_fill(struct trace_reader *r)
{
	if (r->pos > 0) {
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->len -= r->pos;
		r->pos = 0;
	}
	size_t room = RD_BUF_SIZE - r->len;
	if (!r->direct_known) {
		r->direct_known = 1;
		r->use_thread = !gzdirect(r->gz);
	}
	if (r->use_thread && !r->zt && !r->eof)
		r->zt = rd_zstart(r->gz);
	if (r->zt) {
		char msg[256] = "";
		int cut = 0;
		int n = rd_zread(r->zt, r->buf + r->len, room, &r->crc, &r->bytes,
				 !r->crc_done, &cut, msg, sizeof msg);
		if (n < 0)
			return rd_fail_at(r, TRACE_ERR_IO, r->lineno + 1, "read error: %s", msg);
		if (n == 0) {
			r->eof = 1;
			r->gz_cut = cut;
			rd_zstop(r);
			return 0;
		}
		r->len += (size_t)n;
		return 0;
	}
	int n = gzread(r->gz, r->buf + r->len, (unsigned)room);
	if (n < 0) {
		int errnum = 0;
		const char *m = gzerror(r->gz, &errnum);
		if (errnum == Z_ERRNO)
			m = strerror(errno);
		return rd_fail_at(r, TRACE_ERR_IO, r->lineno + 1, "read error: %s", m);
	}
	if (n == 0) {
		int errnum = 0;
		gzerror(r->gz, &errnum);
		r->eof = 1;
		r->gz_cut = (errnum == Z_BUF_ERROR);
		return 0;
	}
	if (!r->crc_done) {
		r->crc = (uint32_t)crc32(r->crc, (const Bytef *)r->buf + r->len, (uInt)n);
		r->bytes += (uint64_t)n;
	}
	r->len += (size_t)n;
	return 0;
}

/* Next line into r->line; 1 = a line, 0 = clean end of input, < 0 = error. */
static int rd_line(struct trace_reader *r)
{
	for (;;) {
		size_t avail = r->len - r->pos;
		char *s = r->buf + r->pos;
		char *nl = memchr(s + r->scanned, '\n', avail - r->scanned);
		if (nl) {
			r->line = s;
			r->line_len = (size_t)(nl - s);
			r->pos += r->line_len + 1;
			r->scanned = 0;
			r->lineno++;
			if (r->line_len > RD_MAX_LINE)
				return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
						  "line longer than %u bytes", RD_MAX_LINE);
			return 1;
		}
		r->scanned = avail;
		if (avail > RD_MAX_LINE)
			return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno + 1,
					  "line longer than %u bytes", RD_MAX_LINE);
		if (r->eof) {
			if (r->gz_cut)
				return rd_fail_at(r, TRACE_ERR_TRUNCATED, r->lineno + 1,
						  "gzip stream cut short (truncated file)");
			if (avail > 0)
				return rd_fail_at(r, TRACE_ERR_TRUNCATED, r->lineno + 1,
						  "last line has no newline (trace cut short)");
			return 0;
		}
		if (rd_fill(r) < 0)
			return r->status;
	}
}

/* ------------------------------------------------------------ fields */

/* After a field ending at Q: one space then another field, or the newline. */
static inline int rd_sep(struct trace_reader *r, const char **pp, const char *q,
			 char tag, const char *name, const char *start)
{
	if (*q == ' ') {
		if (q[1] == ' ' || q[1] == '\n')
			return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
					  "stray space after <%s> in '%c' record", name, tag);
		*pp = q + 1;
		return 0;
	}
	if (*q == '\n') {
		*pp = q;
		return 0;
	}
	return rd_bad(r, tag, name, start);
}

/* Byte-at-a-time decimal with the overflow check: the rare long numbers. */
static const char *rd_scan_dec_slow(const char *p, uint64_t *v)
{
	const char *s = p;
	uint64_t x = 0;
	unsigned d;
	while ((d = (unsigned)((unsigned char)*p - '0')) < 10) {
		if (x >= 1844674407370955161u && (x > 1844674407370955161u || d > 5))
			return NULL;
		x = x * 10 + d;
		p++;
	}
	if (p == s)
		return NULL;
	*v = x;
	return p;
}

/* How many of the 8 bytes at P (little-endian word W) lead with digits:
 * a byte is a digit when neither c + 0x46 (c > '9'), c - 0x30 (c < '0')
 * nor c itself has its top bit set. Only bytes up to the first non-digit
 * are exact (borrows and carries stop there), and only they are used. */
static inline unsigned rd_digits8(uint64_t w)
{
	uint64_t nd = ((w + 0x4646464646464646ull) | (w - 0x3030303030303030ull) | w)
		      & 0x8080808080808080ull;
	return nd ? (unsigned)__builtin_ctzll(nd) >> 3 : 8;
}

/* The value of the N (1..8) digits at the bottom of W, first digit lowest. */
static inline uint64_t rd_value8(uint64_t w, unsigned n)
{
	w = (w - 0x3030303030303030ull) << (64 - 8 * n); /* leading zero digits */
	w = (w * 2561) >> 8 & 0x00ff00ff00ff00ffull;
	w = (w * 6553601) >> 16 & 0x0000ffff0000ffffull;
	return (w * 42949672960001ull) >> 32;
}

/*
 * Decimal digits at P; NULL when none or the value overflows 64 bits.
 * Eight bytes at a time: the buffer has slack after its last line, so
 * reading past the number (up to 8 bytes past the newline) stays inside
 * the allocation, and a number's length costs one mispredict, not one per
 * digit.
 */
static inline const char *rd_scan_dec(const char *p, uint64_t *v)
{
	uint64_t w, x;
	memcpy(&w, p, 8);
	unsigned n = rd_digits8(w);
	if (n == 0)
		return NULL;
	x = rd_value8(w, n);
	if (n < 8) {
		*v = x;
		return p + n;
	}
	memcpy(&w, p + 8, 8);
	unsigned n2 = rd_digits8(w);
	if (n2 == 8)
		return rd_scan_dec_slow(p, v); /* 16+ digits: mind the overflow */
	if (n2) {
		static const uint64_t pow10[8] = {1, 10, 100, 1000, 10000, 100000,
						  1000000, 10000000};
		x = x * pow10[n2] + rd_value8(w, n2);
	}
	*v = x;
	return p + 8 + n2;
}

/* Hex digit values plus one; 0 for anything else. */
static const unsigned char rd_hexval[256] = {
	['0'] = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
	['A'] = 11, 12, 13, 14, 15, 16,
	['a'] = 11, 12, 13, 14, 15, 16,
};

/* 1-16 hex digits at P (no prefix); NULL when none or more than 16. */
static inline const char *rd_scan_hex(const char *p, uint64_t *v)
{
	uint64_t x = 0;
	int nd = 0;
	for (;; p++, nd++) {
		unsigned d = rd_hexval[(unsigned char)*p];
		if (!d)
			break;
		if (nd == 16)
			return NULL;
		x = x << 4 | (d - 1);
	}
	if (nd == 0)
		return NULL;
	*v = x;
	return p;
}

static int rd_u64(struct trace_reader *r, const char **pp, char tag, const char *name,
		  uint64_t *v)
{
	const char *q = rd_scan_dec(*pp, v);
	if (!q)
		return rd_bad(r, tag, name, *pp);
	return rd_sep(r, pp, q, tag, name, *pp);
}

static int rd_u32(struct trace_reader *r, const char **pp, char tag, const char *name,
		  uint32_t *v)
{
	uint64_t x;
	const char *q = rd_scan_dec(*pp, &x);
	if (!q || x > UINT32_MAX)
		return rd_bad(r, tag, name, *pp);
	*v = (uint32_t)x;
	return rd_sep(r, pp, q, tag, name, *pp);
}

/* "0x" then 1-16 hex digits. */
static int rd_hex(struct trace_reader *r, const char **pp, char tag, const char *name,
		  uint64_t *v)
{
	const char *p = *pp;
	if (p[0] != '0' || p[1] != 'x')
		return rd_bad(r, tag, name, *pp);
	const char *q = rd_scan_hex(p + 2, v);
	if (!q)
		return rd_bad(r, tag, name, *pp);
	return rd_sep(r, pp, q, tag, name, *pp);
}

/* A time: absolute, or "+N" after BASE. */
static int rd_time(struct trace_reader *r, const char **pp, char tag, const char *name,
		   uint64_t base, uint64_t *t)
{
	const char *p = *pp;
	int rel = (*p == '+');
	uint64_t x;
	const char *q = rd_scan_dec(p + rel, &x);
	if (!q || (rel && x > UINT64_MAX - base))
		return rd_bad(r, tag, name, p);
	*t = rel ? base + x : x;
	return rd_sep(r, pp, q, tag, name, p);
}

/* A stream: decimal below 2^32, or '-' for TRACE_NO_STREAM. */
static int rd_stream(struct trace_reader *r, const char **pp, char tag, uint32_t *s)
{
	if (**pp == '-') {
		*s = TRACE_NO_STREAM;
		return rd_sep(r, pp, *pp + 1, tag, "stream", *pp);
	}
	return rd_u32(r, pp, tag, "stream", s);
}

/* A string id that must already be defined by an 'S' line ('-' if DASH_OK). */
static int rd_sid(struct trace_reader *r, const char **pp, char tag, const char *name,
		  int dash_ok, uint32_t *id)
{
	const char *start = *pp;
	if (dash_ok && *start == '-') {
		*id = TRACE_NO_STRING;
		return rd_sep(r, pp, start + 1, tag, name, start);
	}
	uint64_t x;
	const char *q = rd_scan_dec(start, &x);
	if (!q)
		return rd_bad(r, tag, name, start);
	if (x >= r->sdefined)
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
				  "string id %" PRIu64 " in <%s> of '%c' record is not defined "
				  "(an 'S %" PRIu64 " ...' line must come first)", x, name, tag, x);
	*id = (uint32_t)x;
	return rd_sep(r, pp, q, tag, name, start);
}

/* A word from NAMES (N entries, looked up with FN); its index into *V. */
static int rd_word(struct trace_reader *r, const char **pp, char tag, const char *name,
		   const char *(*fn)(uint32_t), uint32_t n, uint32_t *v)
{
	const char *p = *pp;
	size_t len = strcspn(p, " \n");
	for (uint32_t i = 0; i < n; i++) {
		const char *w = fn(i);
		if (strlen(w) == len && !memcmp(w, p, len)) {
			*v = i;
			return rd_sep(r, pp, p + len, tag, name, p);
		}
	}
	return rd_bad(r, tag, name, p);
}

/* "X,Y,Z" kernel dimensions. */
static int rd_dim3(struct trace_reader *r, const char **pp, char tag, const char *name,
		   uint32_t d[3])
{
	const char *p = *pp;
	for (int i = 0; i < 3; i++) {
		uint64_t x;
		const char *q = rd_scan_dec(p, &x);
		if (!q || x > UINT32_MAX || (i < 2 && *q != ','))
			return rd_bad(r, tag, name, *pp);
		d[i] = (uint32_t)x;
		p = i < 2 ? q + 1 : q;
	}
	return rd_sep(r, pp, p, tag, name, *pp);
}

static int rd_eol(struct trace_reader *r, const char *p, char tag)
{
	char tok[48];
	if (*p != '\n')
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
				  "extra field in '%c' record: '%s'", tag, rd_token(p, tok, sizeof tok));
	return 0;
}

/* ------------------------------------------------------------ records */

#define TRY(x)                          \
	do {                            \
		if ((x) < 0)            \
			return r->status; \
	} while (0)

/* "<t>": a record of one instant, which ends where it starts. */
static int rd_instant(struct trace_reader *r, const char **pp, char tag, struct trace_rec *rec)
{
	TRY(rd_time(r, pp, tag, "t", r->prev_start, &rec->start));
	rec->end = rec->start;
	return 0;
}

/* Set once an 'a'/'f' line has parsed, so a bad line never uses up an
 * allocation id: ids count the trace's allocations in order. */
static inline void rd_mem_kind(struct trace_reader *r, char tag, struct trace_rec *rec)
{
	if (tag == 'a') {
		rec->type = TREC_ALLOC;
		rec->u.mem.id = r->nallocs++;
	} else {
		rec->type = TREC_FREE;
		rec->u.mem.id = 0;
	}
}

static int rd_mem(struct trace_reader *r, const char *p, char tag, struct trace_rec *rec)
{
	struct trace_mem *m = &rec->u.mem;
	TRY(rd_instant(r, &p, tag, rec));
	TRY(rd_hex(r, &p, tag, "addr", &m->addr));
	TRY(rd_u64(r, &p, tag, "bytes", &m->bytes));
	TRY(rd_stream(r, &p, tag, &m->stream));
	m->kind = TMEM_DEVICE;
	m->flags = 0;
	m->corr = 0;
	m->source = TRACE_NO_STRING;
	if (*p != '\n') {
		TRY(rd_u32(r, &p, tag, "kind", &m->kind));
		if (*p != '\n') {
			TRY(rd_u32(r, &p, tag, "flags", &m->flags));
			if (*p != '\n') {
				TRY(rd_u64(r, &p, tag, "corr", &m->corr));
				if (*p != '\n')
					TRY(rd_sid(r, &p, tag, "src", 1, &m->source));
			}
		}
	}
	TRY(rd_eol(r, p, tag));
	rd_mem_kind(r, tag, rec);
	return 0;
}

/*
 * The common shape of 'a'/'f' lines, "T 0xADDR BYTES STREAM" and nothing
 * more, parsed without the per-field error plumbing. 1 when it matched;
 * 0 leaves REC to rd_mem, which parses anything else (optional fields) and
 * names any error exactly.
 */
static inline int rd_mem_fast(struct trace_reader *r, const char *p, char tag,
			      struct trace_rec *rec)
{
	struct trace_mem *m = &rec->u.mem;
	uint64_t t, a, b, s;
	int rel = (*p == '+');
	const char *q = rd_scan_dec(p + rel, &t);
	if (!q || *q != ' ' || (rel && t > UINT64_MAX - r->prev_start))
		return 0;
	if (q[1] != '0' || q[2] != 'x')
		return 0;
	q = rd_scan_hex(q + 3, &a);
	if (!q || *q != ' ')
		return 0;
	q = rd_scan_dec(q + 1, &b);
	if (!q || *q != ' ')
		return 0;
	if (q[1] == '-') {
		s = TRACE_NO_STREAM;
		q += 2;
	} else {
		q = rd_scan_dec(q + 1, &s);
		if (!q || s > UINT32_MAX)
			return 0;
	}
	if (*q != '\n')
		return 0;
	rec->start = rec->end = rel ? r->prev_start + t : t;
	m->addr = a;
	m->bytes = b;
	m->stream = (uint32_t)s;
	m->kind = TMEM_DEVICE;
	m->flags = 0;
	m->corr = 0;
	m->source = TRACE_NO_STRING;
	rd_mem_kind(r, tag, rec);
	return 1;
}

/* "<start> <end>": END may be "+N" after this record's own start. */
static int rd_span(struct trace_reader *r, const char **pp, char tag, struct trace_rec *rec)
{
	TRY(rd_time(r, pp, tag, "start", r->prev_start, &rec->start));
	TRY(rd_time(r, pp, tag, "end", rec->start, &rec->end));
	if (rec->end < rec->start)
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
				  "'%c' record ends (%" PRIu64 ") before it starts (%" PRIu64 ")",
				  tag, rec->end, rec->start);
	return 0;
}

/* The optional trailing "<graph> <node>" of 'k', 'c' and 'm' records: both
 * or neither (0 0 when absent). */
static int rd_graph(struct trace_reader *r, const char **pp, char tag, uint32_t *graph,
		    uint64_t *node)
{
	*graph = 0;
	*node = 0;
	if (**pp == '\n')
		return 0;
	TRY(rd_u32(r, pp, tag, "graph", graph));
	if (**pp == '\n')
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
				  "'%c' record has <graph> without <node> (both or neither)", tag);
	TRY(rd_u64(r, pp, tag, "node", node));
	return 0;
}

static int rd_kernel(struct trace_reader *r, const char *p, struct trace_rec *rec)
{
	struct trace_kernel *k = &rec->u.kernel;
	rec->type = TREC_KERNEL;
	TRY(rd_span(r, &p, 'k', rec));
	TRY(rd_stream(r, &p, 'k', &k->stream));
	TRY(rd_sid(r, &p, 'k', "name", 0, &k->name));
	TRY(rd_dim3(r, &p, 'k', "grid", k->grid));
	TRY(rd_dim3(r, &p, 'k', "block", k->block));
	TRY(rd_u32(r, &p, 'k', "regs", &k->regs));
	TRY(rd_u32(r, &p, 'k', "smem", &k->smem));
	TRY(rd_u64(r, &p, 'k', "corr", &k->corr));
	k->nlinks = 0;
	k->links = r->links;
	if (*p == '-') {
		TRY(rd_sep(r, &p, p + 1, 'k', "links", p));
	} else if (*p != '\n') {
		const char *start = p;
		for (;;) {
			uint64_t id;
			const char *q = rd_scan_dec(p, &id);
			if (!q)
				return rd_bad(r, 'k', "links", start);
			if (k->nlinks == TRACE_MAX_LINKS)
				return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
						  "'k' record has more than %d links", TRACE_MAX_LINKS);
			r->links[k->nlinks++] = id;
			p = q;
			if (*p != ',')
				break;
			p++;
		}
		TRY(rd_sep(r, &p, p, 'k', "links", start));
	}
	TRY(rd_graph(r, &p, 'k', &k->graph, &k->graph_node));
	return rd_eol(r, p, 'k');
}

static int rd_copy(struct trace_reader *r, const char *p, char tag, struct trace_rec *rec)
{
	struct trace_copy *c = &rec->u.copy;
	TRY(rd_span(r, &p, tag, rec));
	TRY(rd_stream(r, &p, tag, &c->stream));
	TRY(rd_u64(r, &p, tag, "bytes", &c->bytes));
	c->kind = TCOPY_UNKNOWN;
	if (tag == 'c') {
		rec->type = TREC_MEMCPY;
		TRY(rd_word(r, &p, tag, "kind", trace_copy_kind_name, TCOPY_PTOP + 1, &c->kind));
	} else {
		rec->type = TREC_MEMSET;
	}
	TRY(rd_u64(r, &p, tag, "corr", &c->corr));
	TRY(rd_graph(r, &p, tag, &c->graph, &c->graph_node));
	return rd_eol(r, p, tag);
}

static int rd_sync(struct trace_reader *r, const char *p, struct trace_rec *rec)
{
	struct trace_sync *s = &rec->u.sync;
	rec->type = TREC_SYNC;
	TRY(rd_span(r, &p, 'y', rec));
	TRY(rd_word(r, &p, 'y', "kind", trace_sync_kind_name, TSYNC_CONTEXT + 1, &s->kind));
	TRY(rd_stream(r, &p, 'y', &s->stream));
	TRY(rd_u64(r, &p, 'y', "corr", &s->corr));
	return rd_eol(r, p, 'y');
}

static int rd_range_api(struct trace_reader *r, const char *p, char tag, struct trace_rec *rec)
{
	TRY(rd_span(r, &p, tag, rec));
	if (tag == 'r') {
		rec->type = TREC_RANGE;
		TRY(rd_sid(r, &p, tag, "name", 0, &rec->u.range.name));
		TRY(rd_u32(r, &p, tag, "depth", &rec->u.range.depth));
		/* optional trailing word: the range ran with the capture paused */
		rec->u.range.uncaptured = 0;
		if (!strncmp(p, "uncaptured", 10) && p[10] == '\n') {
			rec->u.range.uncaptured = 1;
			p += 10;
		}
	} else {
		struct trace_api *a = &rec->u.api;
		rec->type = TREC_API;
		TRY(rd_sid(r, &p, tag, "name", 0, &a->name));
		TRY(rd_u64(r, &p, tag, "corr", &a->corr));
		/* optional "<own_ns> <own_cbs>": both or neither */
		a->own_ns = 0;
		a->own_cbs = 0;
		a->has_own = 0;
		if (*p != '\n') {
			TRY(rd_u64(r, &p, tag, "own_ns", &a->own_ns));
			if (*p == '\n')
				return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
						  "'p' record has <own_ns> without <own_cbs> (both or neither)");
			TRY(rd_u32(r, &p, tag, "own_cbs", &a->own_cbs));
			a->has_own = 1;
		}
	}
	return rd_eol(r, p, tag);
}

static int rd_control(struct trace_reader *r, const char *p, struct trace_rec *rec)
{
	struct trace_control *c = &rec->u.control;
	rec->type = TREC_CONTROL;
	TRY(rd_instant(r, &p, 'x', rec));
	TRY(rd_word(r, &p, 'x', "what", trace_control_name, TCTL_COUNT, &c->kind));
	c->bytes = 0;
	if (c->kind != TCTL_EMPTY_CACHE)
		TRY(rd_u64(r, &p, 'x', c->kind == TCTL_OOM ? "bytes" : "n", &c->bytes));
	return rd_eol(r, p, 'x');
}

static int rd_segment(struct trace_reader *r, const char *p, struct trace_rec *rec)
{
	struct trace_segment *g = &rec->u.segment;
	rec->type = TREC_SEGMENT;
	TRY(rd_instant(r, &p, 'g', rec));
	TRY(rd_word(r, &p, 'g', "op", trace_segment_op_name, TSEG_COUNT, &g->op));
	TRY(rd_hex(r, &p, 'g', "addr", &g->addr));
	TRY(rd_u64(r, &p, 'g', "bytes", &g->bytes));
	TRY(rd_stream(r, &p, 'g', &g->stream));
	return rd_eol(r, p, 'g');
}

/* ------------------------------------------------------------ header lines */

static char *rd_strndup(struct trace_reader *r, const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (!d) {
		rd_fail_at(r, TRACE_ERR_NOMEM, r->lineno, "out of memory");
		return NULL;
	}
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* Lines that become C strings must not hide a NUL. */
static int rd_no_nul(struct trace_reader *r)
{
	if (memchr(r->line, '\0', r->line_len))
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno, "NUL byte in line");
	return 0;
}

/* "S <id> <text>": ids are dense, in order of definition. */
static int rd_string(struct trace_reader *r)
{
	const char *p = r->line + 2, *end = r->line + r->line_len;
	uint64_t id;
	const char *q = rd_scan_dec(p, &id);
	if (!q || (*q != ' ' && *q != '\n'))
		return rd_bad(r, 'S', "id", p);
	if (id != r->sdefined)
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
				  "string id %" PRIu64 " out of order (expected %" PRIu32 ")",
				  id, r->sdefined);
	TRY(rd_no_nul(r));
	const char *text = (*q == ' ') ? q + 1 : q;
	if (r->sdefined < r->nstrs) { /* defined before a rewind */
		r->sdefined++;
		return 0;
	}
	if (r->nstrs == UINT32_MAX - 1)
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno, "too many strings");
	if (VEC_RESERVE(r->strs, r->capstrs, (size_t)r->nstrs + 1, 64) < 0)
		return rd_fail_at(r, TRACE_ERR_NOMEM, r->lineno, "out of memory");
	char *s = rd_strndup(r, text, (size_t)(end - text));
	if (!s)
		return r->status;
	r->strs[r->nstrs++] = s;
	r->sdefined++;
	return 0;
}

/* "H <key> <value>": known keys fill the header; others are ignored so
 * newer producers can add fields. */
static int rd_hline(struct trace_reader *r)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{"producer", offsetof(struct trace_header, producer)},
		{"producer_version", offsetof(struct trace_header, producer_version)},
		{"gpu", offsetof(struct trace_header, gpu)},
		{"compute_capability", offsetof(struct trace_header, compute_capability)},
		{"driver", offsetof(struct trace_header, driver)},
		{"cuda", offsetof(struct trace_header, cuda)},
		{"cupti", offsetof(struct trace_header, cupti)},
		{"cudnn", offsetof(struct trace_header, cudnn)},
		{"command", offsetof(struct trace_header, command)},
	};
	TRY(rd_no_nul(r));
	const char *k = r->line + 2, *end = r->line + r->line_len;
	size_t klen = strcspn(k, " \n");
	if (klen == 0)
		return rd_bad(r, 'H', "key", k);
	const char *v = k + klen;
	if (*v == ' ')
		v++;
	size_t vlen = (size_t)(end - v);
	if (klen == 12 && !memcmp(k, "total_memory", 12)) {
		uint64_t x;
		const char *q = rd_scan_dec(v, &x);
		if (!q || *q != '\n')
			return rd_bad(r, 'H', "total_memory", v);
		r->hdr.total_memory = x;
		return 0;
	}
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		if (strlen(keys[i].key) != klen || memcmp(keys[i].key, k, klen))
			continue;
		char **slot = (char **)((char *)&r->hdr + keys[i].off);
		char *s = rd_strndup(r, v, vlen);
		if (!s)
			return r->status;
		free(*slot);
		*slot = s;
		return 0;
	}
	return 0;
}

/* "L <key>=<value>". */
static int rd_label(struct trace_reader *r)
{
	TRY(rd_no_nul(r));
	const char *k = r->line + 2, *end = r->line + r->line_len;
	const char *eq = memchr(k, '=', (size_t)(end - k));
	if (!eq || eq == k || memchr(k, ' ', (size_t)(eq - k)))
		return rd_bad(r, 'L', "key=value", k);
	if (VEC_RESERVE(r->hdr.labels, r->label_cap, r->hdr.nlabels + 1, 8) < 0)
		return rd_fail_at(r, TRACE_ERR_NOMEM, r->lineno, "out of memory");
	struct trace_label *l = &r->hdr.labels[r->hdr.nlabels];
	l->key = rd_strndup(r, k, (size_t)(eq - k));
	l->value = l->key ? rd_strndup(r, eq + 1, (size_t)(end - eq - 1)) : NULL;
	if (!l->value) {
		free(l->key);
		return r->status;
	}
	r->hdr.nlabels++;
	return 0;
}

/* "end <records> <dropped>": must be the last line; its count must match. */
static int rd_trailer(struct trace_reader *r)
{
	const char *p = r->line + 4;
	uint64_t rec, drop;
	TRY(rd_u64(r, &p, 'e', "records", &rec));
	TRY(rd_u64(r, &p, 'e', "dropped", &drop));
	TRY(rd_eol(r, p, 'e'));
	if (rec != r->nrecords)
		return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
				  "trailer says %" PRIu64 " records but the trace has %" PRIu64,
				  rec, r->nrecords);
	r->trailer.present = 1;
	r->trailer.records = rec;
	r->trailer.dropped = drop;
	r->ended = 1;
	return 0;
}

/* ------------------------------------------------------------ API */

/* Parse the first line: magic and version. */
static int rd_magic(struct trace_reader *r)
{
	static const char magic[] = TRACE_MAGIC " ";
	int rc = rd_line(r);
	if (rc == 0)
		return rd_fail_at(r, TRACE_ERR_FORMAT, 1, "empty file, not a gpumemsim trace");
	if (rc < 0) {
		if (r->status == TRACE_ERR_IO)
			return rc;
		r->status = 0;
		return rd_fail_at(r, TRACE_ERR_FORMAT, 1,
				  "not a gpumemsim trace (no '%s %d' first line)", TRACE_MAGIC,
				  TRACE_FORMAT_VERSION);
	}
	if (r->line_len < sizeof magic || memcmp(r->line, magic, sizeof magic - 1))
		return rd_fail_at(r, TRACE_ERR_FORMAT, 1,
				  "not a gpumemsim trace (first line is not '%s %d')", TRACE_MAGIC,
				  TRACE_FORMAT_VERSION);
	uint64_t v;
	const char *q = rd_scan_dec(r->line + sizeof magic - 1, &v);
	if (!q || *q != '\n')
		return rd_fail_at(r, TRACE_ERR_FORMAT, 1, "bad format version on first line");
	if (v != TRACE_FORMAT_VERSION)
		return rd_fail_at(r, TRACE_ERR_VERSION, 1,
				  "unsupported trace format version %" PRIu64
				  " (this gpumemsim reads %d)", v, TRACE_FORMAT_VERSION);
	r->hdr.version = (int)v;
	return 0;
}

/* Header lines up to the first event, which stays pending for next(). */
static int rd_head(struct trace_reader *r)
{
	TRY(rd_magic(r));
	for (;;) {
		int rc = rd_line(r);
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
		const char *l = r->line;
		if (l[0] == '#')
			continue;
		if (l[0] == 'H' && l[1] == ' ')
			TRY(rd_hline(r));
		else if (l[0] == 'L' && l[1] == ' ')
			TRY(rd_label(r));
		else if (l[0] == 'S' && l[1] == ' ')
			TRY(rd_string(r));
		else {
			r->pending = 1;
			r->head_lines = r->lineno - 1;
			r->head_sdefined = r->sdefined;
			r->head_done = 1;
			return 0;
		}
	}
	r->head_lines = r->lineno;
	r->head_sdefined = r->sdefined;
	r->head_done = 1;
	return 0;
}

/*
 * Open and read the header. Allocation failures before the reader exists
 * are the only NULL return; everything else is reported through status so
 * the caller always has a message naming the file.
 */
struct trace_reader *trace_reader_open(const char *path)
{
	struct trace_reader *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->path = strdup(path ? path : "(null)");
	/* zeroed slack: the 8-byte digit scans may look past the last line */
	r->buf = calloc(1, RD_BUF_SIZE + RD_SLACK);
	if (!r->path || !r->buf) {
		free(r->path);
		free(r->buf);
		free(r);
		return NULL;
	}
	r->crc = (uint32_t)crc32(0L, Z_NULL, 0);
	if (!path) {
		rd_fail_at(r, TRACE_ERR_IO, 0, "no file name");
		return r;
	}
	errno = 0;
	r->gz = gzopen(path, "rb");
	if (!r->gz) {
		rd_fail_at(r, TRACE_ERR_IO, 0, "cannot open: %s",
			   errno ? strerror(errno) : "out of memory");
		return r;
	}
	gzbuffer(r->gz, RD_GZ_BUF);
	rd_head(r);
	return r;
}

struct trace_reader *trace_reader_start(const char *path, char *err, size_t errlen)
{
	struct trace_reader *r = trace_reader_open(path);
	if (!r) {
		snprintf(err, errlen, "%s: out of memory", path ? path : "(null)");
		return NULL;
	}
	if (trace_reader_status(r) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		trace_reader_close(r);
		return NULL;
	}
	return r;
}

/* 0 when the open and header succeeded, else the negative error. */
int trace_reader_status(const struct trace_reader *r)
{
	return r ? r->status : TRACE_ERR_NOMEM;
}

/* The message for the last error, "FILE:LINE: what"; "" when none. */
const char *trace_reader_error(const struct trace_reader *r)
{
	return r ? r->err : "out of memory";
}

/* Header fields as read (valid until close). */
const struct trace_header *trace_reader_header(const struct trace_reader *r)
{
	return &r->hdr;
}

/*
 * The record loop: header-type lines are consumed here so callers see only
 * events. Kept as one function so the common 'a'/'f' path stays short.
 */
int trace_reader_next(struct trace_reader *r, struct trace_rec *rec)
{
	if (r->status < 0)
		return r->status;
	for (;;) {
		if (r->pending) {
			r->pending = 0;
		} else {
			int rc = rd_line(r);
			if (rc < 0)
				return rc;
			if (rc == 0) {
				r->crc_done = 1;
				return TRACE_EOF;
			}
		}
		const char *l = r->line;
		char tag = l[0];
		if (r->line_len == 0)
			return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno, "empty line");
		if (r->ended && tag != '#')
			return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
					  "content after the 'end' trailer");
		if (l[1] != ' ' && l[1] != '\n') {
			if (tag == '#')
				continue;
			if (r->line_len >= 3 && !memcmp(l, "end", 3) && (l[3] == ' ' || l[3] == '\n')) {
				if (l[3] == '\n')
					return rd_bad(r, 'e', "records", l + 3);
				if (rd_trailer(r) < 0)
					return r->status;
				continue;
			}
			char tok[48];
			return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno, "unknown record type '%s'",
					  l[0] == '\n' ? "" : rd_token(l, tok, sizeof tok));
		}
		const char *p = l[1] == ' ' ? l + 2 : l + 1;
		int rc;
		switch (tag) {
		case 'a':
		case 'f':
			rc = rd_mem_fast(r, p, tag, rec) ? 0 : rd_mem(r, p, tag, rec);
			break;
		case 'k':
			rc = rd_kernel(r, p, rec);
			break;
		case 'c':
		case 'm':
			rc = rd_copy(r, p, tag, rec);
			break;
		case 'y':
			rc = rd_sync(r, p, rec);
			break;
		case 'r':
		case 'p':
			rc = rd_range_api(r, p, tag, rec);
			break;
		case 'x':
			rc = rd_control(r, p, rec);
			break;
		case 'g':
			rc = rd_segment(r, p, rec);
			break;
		case 'S':
			if (rd_string(r) < 0)
				return r->status;
			continue;
		case 'H':
		case 'L':
			return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
					  "'%c' header line after the first event record", tag);
		case '#':
			continue;
		default: {
			char tok[48];
			return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno, "unknown record type '%s'",
					  rd_token(l, tok, sizeof tok));
		}
		}
		if (rc < 0)
			return r->status;
		if (rec->start < r->prev_start)
			return rd_fail_at(r, TRACE_ERR_FORMAT, r->lineno,
					  "time goes backwards: %" PRIu64 " is before the previous "
					  "record's start %" PRIu64, rec->start, r->prev_start);
		r->prev_start = rec->start;
		r->in_body = 1;
		r->nrecords++;
		rec->line = r->lineno;
		return TRACE_OK;
	}
}

/* The interned string ID as defined so far, or NULL. */
const char *trace_reader_string(const struct trace_reader *r, uint32_t id)
{
	return id < r->sdefined ? r->strs[id] : NULL;
}

/* Strings defined so far (ids 0 .. n-1). */
uint32_t trace_reader_nstrings(const struct trace_reader *r)
{
	return r->sdefined;
}

/* The 'end' line's values; present == 0 until (and unless) it is read. */
const struct trace_trailer *trace_reader_trailer(const struct trace_reader *r)
{
	return &r->trailer;
}

/* The path exactly as given to open. */
const char *trace_reader_path(const struct trace_reader *r)
{
	return r->path;
}

/* CRC-32 of the decompressed text read so far (the whole file after EOF). */
uint32_t trace_reader_crc32(const struct trace_reader *r)
{
	return r->crc;
}

/* Length of the decompressed text read so far. */
uint64_t trace_reader_bytes(const struct trace_reader *r)
{
	return r->bytes;
}

/*
 * Start again at the first event. The stream is reopened from its start
 * (gzip cannot seek backwards cheaply anyway) and the header lines are
 * skipped unparsed: the header, labels and strings from the first pass stay.
 * The content identity, once complete, is not recomputed.
 */
int trace_reader_rewind(struct trace_reader *r)
{
	if (!r->gz || !r->head_done)
		return r->status < 0 ? r->status : TRACE_ERR_IO;
	rd_zstop(r);
	r->status = 0;
	r->err[0] = '\0';
	gzclearerr(r->gz);
	if (gzrewind(r->gz) != 0)
		return rd_fail_at(r, TRACE_ERR_IO, 0, "cannot rewind");
	r->pos = r->len = r->scanned = 0;
	r->eof = r->gz_cut = r->pending = r->ended = 0;
	r->lineno = 0;
	r->prev_start = r->nallocs = r->nrecords = 0;
	r->trailer.present = 0;
	r->trailer.records = r->trailer.dropped = 0;
	r->sdefined = r->head_sdefined;
	if (!r->crc_done) {
		r->crc = (uint32_t)crc32(0L, Z_NULL, 0);
		r->bytes = 0;
	}
	while (r->lineno < r->head_lines) {
		int rc = rd_line(r);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return rd_fail_at(r, TRACE_ERR_IO, r->lineno, "file changed while rewinding");
	}
	return 0;
}

/* Free everything; the header and strings die with the reader. */
void trace_reader_close(struct trace_reader *r)
{
	if (!r)
		return;
	rd_zstop(r);
	if (r->gz)
		gzclose(r->gz);
	for (uint32_t i = 0; i < r->nstrs; i++)
		free(r->strs[i]);
	free(r->strs);
	struct trace_header *h = &r->hdr;
	char **fields[] = {&h->producer, &h->producer_version, &h->gpu, &h->compute_capability,
			   &h->driver, &h->cuda, &h->cupti, &h->cudnn, &h->command};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		free(*fields[i]);
	for (size_t i = 0; i < h->nlabels; i++) {
		free(h->labels[i].key);
		free(h->labels[i].value);
	}
	free(h->labels);
	free(r->buf);
	free(r->path);
	free(r);
}
