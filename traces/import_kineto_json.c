/*
 * import_kineto_json.c: see import_kineto_json.h. A byte-at-a-time pull
 * parser over a refilled buffer: simple, and fast enough (the importer's
 * time is in the parse either way, about 100 MB/s).
 */
#include "import_kineto_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"
#include "text_input.h"

#define KJ_PLAIN_BUF (1u << 20)
#define KJ_WORD_MAX 64

struct kj_reader {
	char *path;
	FILE *f;                 /* a plain file, or */
	struct text_input *ti;   /* a gzip one, line by line */
	char *buf;
	size_t len, pos, cap;
	uint64_t line;           /* newlines consumed + 1 */
	int eof, ioerr;
	char err[1024];
	/* scratch for keys */
	char *s;
	size_t slen, scap;
};

static int fail(struct kj_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct kj_reader *r, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(r->err, sizeof r->err, "%s:%" PRIu64 ": %s", r->path, r->line, msg);
	return -1;
}

struct kj_reader *kj_open(const char *path, char *err, size_t errlen)
{
	struct kj_reader *r = calloc(1, sizeof *r);
	unsigned char magic[2] = {0, 0};
	if (!r || !(r->path = strdup(path))) {
		snprintf(err, errlen, "%s: out of memory", path);
		free(r);
		return NULL;
	}
	r->line = 1;
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		goto fail;
	}
	size_t n = fread(magic, 1, 2, f);
	if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
		fclose(f);
		r->ti = text_input_open(path, err, errlen);
		if (!r->ti)
			goto fail;
		r->cap = KJ_GZ_LINE_MAX + 2;
	} else {
		rewind(f);
		r->f = f;
		r->cap = KJ_PLAIN_BUF;
	}
	r->buf = malloc(r->cap);
	if (!r->buf) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	return r;
fail:
	kj_close(r);
	return NULL;
}

void kj_close(struct kj_reader *r)
{
	if (!r)
		return;
	if (r->f)
		fclose(r->f);
	text_input_close(r->ti);
	free(r->buf);
	free(r->s);
	free(r->path);
	free(r);
}

uint64_t kj_line(const struct kj_reader *r) { return r->line; }
const char *kj_error(const struct kj_reader *r) { return r->err; }

/* ------------------------------------------------------------- bytes */

/* 1 with more bytes in the buffer, 0 at the end, -1 on a read error. */
static int refill(struct kj_reader *r)
{
	if (r->pos < r->len)
		return 1;
	if (r->eof)
		return 0;
	if (r->ioerr)
		return -1;
	r->pos = r->len = 0;
	if (r->f) {
		size_t n = fread(r->buf, 1, r->cap, r->f);
		if (n == 0) {
			if (ferror(r->f)) {
				r->ioerr = 1;
				fail(r, "read error: %s", strerror(errno));
				return -1;
			}
			r->eof = 1;
			return 0;
		}
		r->len = n;
		return 1;
	}
	int got = text_input_line(r->ti, r->buf, r->cap - 1, r->err, sizeof r->err);
	if (got < 0) {
		r->ioerr = 1;
		if (strstr(r->err, "line too long")) {
			size_t l = strlen(r->err);
			snprintf(r->err + l, sizeof r->err - l, "; a gzip JSON is read a line at a "
				 "time: gunzip it and import the plain file");
		}
		return -1;
	}
	if (got == 0) {
		r->eof = 1;
		return 0;
	}
	r->len = strlen(r->buf);
	r->buf[r->len++] = '\n';  /* text_input strips it */
	return 1;
}

static int peekc(struct kj_reader *r)
{
	int k = refill(r);
	if (k <= 0)
		return k == 0 ? -1 : -2;
	return (unsigned char)r->buf[r->pos];
}

static int getc_(struct kj_reader *r)
{
	int c = peekc(r);
	if (c >= 0) {
		r->pos++;
		if (c == '\n')
			r->line++;
	}
	return c;
}

static int ended(struct kj_reader *r)
{
	if (r->ioerr)
		return -1;
	return fail(r, "the JSON ends early (the file is cut short?)");
}

int kj_peek(struct kj_reader *r)
{
	for (;;) {
		int c = peekc(r);
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			getc_(r);
		else
			return c;
	}
}

static const char *show(int c, char *b)
{
	if (c == -1)
		return "the end of the file";
	if (c >= 0x20 && c < 0x7f)
		snprintf(b, 16, "'%c'", c);
	else
		snprintf(b, 16, "byte 0x%02x", c & 0xff);
	return b;
}

int kj_expect(struct kj_reader *r, char want, const char *what)
{
	char b[16];
	int c = kj_peek(r);
	if (c == -2)
		return -1;
	if (c == -1)
		return ended(r);
	if (c != (unsigned char)want)
		return fail(r, "bad JSON: expected '%c' (%s), got %s", want, what, show(c, b));
	getc_(r);
	return 0;
}

int kj_more(struct kj_reader *r, char close)
{
	char b[16];
	int c = kj_peek(r);
	if (c == -2)
		return -1;
	if (c == -1)
		return ended(r);
	getc_(r);
	if (c == ',')
		return 1;
	if (c == (unsigned char)close)
		return 0;
	return fail(r, "bad JSON: expected ',' or '%c', got %s", close, show(c, b));
}

/* ----------------------------------------------------------- strings */

static int put_byte(char **dst, size_t *dlen, size_t *dcap, char c)
{
	if (VEC_RESERVE(*dst, *dcap, *dlen + 2, 256) < 0)
		return -1;
	(*dst)[(*dlen)++] = c;
	return 0;
}

static int put_utf8(char **dst, size_t *dlen, size_t *dcap, uint32_t cp)
{
	char b[4];
	int n;
	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	for (int i = 0; i < n; i++)
		if (put_byte(dst, dlen, dcap, b[i]) < 0)
			return -1;
	return 0;
}

static int hex4(struct kj_reader *r, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		int c = getc_(r);
		if (c < 0)
			return c == -1 ? ended(r) : -1;
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(r, "bad JSON: \\u wants four hex digits");
	}
	*out = v;
	return 0;
}

/* After the opening quote: the string up to its closing quote, decoded into
 * *DST (NUL-terminated; DST NULL discards it). */
static int read_string(struct kj_reader *r, char **dst, size_t *dlen, size_t *dcap)
{
	size_t n = 0;
	for (;;) {
		/* the common case: a run of plain bytes inside the buffer */
		if (r->pos < r->len) {
			const char *p = r->buf + r->pos, *e = r->buf + r->len, *q = p;
			while (q < e && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
				q++;
			size_t run = (size_t)(q - p);
			if (run) {
				n += run;
				if (n > KJ_MAX_STRING)
					return fail(r, "a string longer than %u bytes", KJ_MAX_STRING);
				if (dst) {
					if (VEC_RESERVE(*dst, *dcap, *dlen + run + 1, 256) < 0)
						return fail(r, "out of memory");
					memcpy(*dst + *dlen, p, run);
					*dlen += run;
				}
				r->pos += run;
				continue;
			}
		}
		int c = peekc(r);
		if (c < 0)
			return c == -1 ? ended(r) : -1;
		if (c < 0x20 && c != '\t')  /* named on its own line, before it is consumed */
			return fail(r, "bad JSON: a control character (0x%02x) inside a string", c);
		getc_(r);
		if (c == '"')
			break;
		if (++n > KJ_MAX_STRING)
			return fail(r, "a string longer than %u bytes", KJ_MAX_STRING);
		if (c == '\\') {
			int e = getc_(r);
			uint32_t cp;
			if (e < 0)
				return e == -1 ? ended(r) : -1;
			switch (e) {
			case '"': case '\\': case '/': cp = (uint32_t)e; break;
			case 'b': cp = '\b'; break;
			case 'f': cp = '\f'; break;
			case 'n': cp = '\n'; break;
			case 'r': cp = '\r'; break;
			case 't': cp = '\t'; break;
			case 'u':
				if (hex4(r, &cp) < 0)
					return -1;
				if (cp >= 0xd800 && cp < 0xdc00 && peekc(r) == '\\') {
					/* a surrogate pair: \ud83d\ude00 */
					uint32_t lo;
					getc_(r);
					if (getc_(r) != 'u' || hex4(r, &lo) < 0)
						return r->err[0] ? -1 : fail(r, "bad JSON: a lone surrogate");
					cp = lo >= 0xdc00 && lo < 0xe000
						     ? 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00)
						     : 0xfffd;
				} else if (cp >= 0xd800 && cp < 0xe000) {
					cp = 0xfffd;
				}
				break;
			default:
				return fail(r, "bad JSON: unknown escape '\\%c' in a string",
					    e >= 0x20 && e < 0x7f ? e : '?');
			}
			if (dst && put_utf8(dst, dlen, dcap, cp) < 0)
				return fail(r, "out of memory");
			continue;
		}
		if (dst && put_byte(dst, dlen, dcap, (char)c) < 0)
			return fail(r, "out of memory");
	}
	if (dst) {
		if (put_byte(dst, dlen, dcap, '\0') < 0)
			return fail(r, "out of memory");
		(*dlen)--;  /* the NUL is not part of the length */
	}
	return 0;
}

int kj_key(struct kj_reader *r, char *key, size_t len)
{
	if (kj_expect(r, '"', "a member's key") < 0)
		return -1;
	r->slen = 0;
	if (read_string(r, &r->s, &r->slen, &r->scap) < 0)
		return -1;
	if (len) {
		size_t n = r->slen < len - 1 ? r->slen : len - 1;
		memcpy(key, r->s ? r->s : "", n);
		key[n] = '\0';
	}
	return kj_expect(r, ':', "after a key");
}

/* ------------------------------------------------------------ values */

/* A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return 0;
	if (*s == '.') {
		s++;
		if (!(*s >= '0' && *s <= '9'))
			return 0;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!(*s >= '0' && *s <= '9'))
			return 0;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return *s == '\0';
}

static int is_special(const char *w)
{
	static const char *const sp[] = {"NaN", "Infinity", "-Infinity", "nan", "inf", "-inf"};
	for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
		if (!strcmp(w, sp[i]))
			return 1;
	return 0;
}

/* A bare word: a number or true/false/null; its type into *T, its text
 * into W. */
static int read_word(struct kj_reader *r, char *w, uint8_t *t)
{
	size_t n = 0;
	for (;;) {
		int c = peekc(r);
		if (c == -2)
			return -1;
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '.' || c == '+' || c == '-'))
			break;
		if (n + 1 >= KJ_WORD_MAX)
			return fail(r, "bad JSON: a number or word longer than %d bytes",
				    KJ_WORD_MAX - 1);
		w[n++] = (char)c;
		getc_(r);
	}
	w[n] = '\0';
	if (!n) {
		char b[16];
		int c = peekc(r);
		if (c == -1)
			return ended(r);
		return fail(r, "bad JSON: expected a value, got %s", show(c, b));
	}
	if (!strcmp(w, "true"))
		*t = KJ_TRUE;
	else if (!strcmp(w, "false"))
		*t = KJ_FALSE;
	else if (!strcmp(w, "null"))
		*t = KJ_NULL;
	else if (is_number(w) || is_special(w))
		*t = KJ_NUM;
	else if (peekc(r) == -1 && (!strncmp("true", w, n) || !strncmp("false", w, n) ||
				    !strncmp("null", w, n) || is_number(w) || w[n - 1] == '.' ||
				    w[n - 1] == 'e' || w[n - 1] == 'E' || w[n - 1] == '-'))
		return ended(r);
	else
		return fail(r, "bad JSON: unexpected '%s'", w);
	return 0;
}

static int new_node(struct kj_reader *r, struct kj_doc *d, uint8_t type, uint32_t *idx)
{
	if (d->n >= KJ_NONE - 1 || (d->n + 1) * sizeof *d->nodes + d->alen > KJ_MAX_DOC)
		return fail(r, "one event larger than %u MiB", KJ_MAX_DOC >> 20);
	if (VEC_RESERVE(d->nodes, d->cap, d->n + 1, 64) < 0)
		return fail(r, "out of memory");
	struct kj_node *n = &d->nodes[d->n];
	n->type = type;
	n->key = n->text = KJ_NONE;
	n->len = 0;
	n->first = n->next = KJ_NONE;
	*idx = (uint32_t)d->n++;
	return 0;
}

/* Append a string to the arena; its offset into *OFF. */
static int arena_string(struct kj_reader *r, struct kj_doc *d, uint32_t *off, uint32_t *len)
{
	size_t at = d->alen;
	if (read_string(r, &d->arena, &d->alen, &d->acap) < 0)
		return -1;
	if (d->alen + d->n * sizeof *d->nodes > KJ_MAX_DOC)
		return fail(r, "one event larger than %u MiB", KJ_MAX_DOC >> 20);
	*off = (uint32_t)at;
	*len = (uint32_t)(d->alen - at);
	d->alen++;  /* keep the NUL */
	return 0;
}

/* One value; into D when not NULL (its node index into *IDX), else skipped. */
static int value(struct kj_reader *r, struct kj_doc *d, int depth, uint32_t *idx)
{
	int c = kj_peek(r);
	if (c == -2)
		return -1;
	if (c == -1)
		return ended(r);
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		uint32_t me = KJ_NONE, prev = KJ_NONE;
		if (depth >= KJ_MAX_DEPTH)
			return fail(r, "JSON nested deeper than %d levels", KJ_MAX_DEPTH);
		getc_(r);
		if (d && new_node(r, d, c == '{' ? KJ_OBJ : KJ_ARR, &me) < 0)
			return -1;
		if (idx)
			*idx = me;
		int k = kj_peek(r);
		if (k == -2)
			return -1;
		if (k == (unsigned char)close) {
			getc_(r);
			return 0;
		}
		for (;;) {
			uint32_t key = KJ_NONE, klen = 0, child = KJ_NONE;
			if (close == '}') {
				if (kj_expect(r, '"', "a member's key") < 0)
					return -1;
				if (d) {
					if (arena_string(r, d, &key, &klen) < 0)
						return -1;
				} else if (read_string(r, NULL, NULL, NULL) < 0) {
					return -1;
				}
				if (kj_expect(r, ':', "after a key") < 0)
					return -1;
			}
			if (value(r, d, depth + 1, d ? &child : NULL) < 0)
				return -1;
			if (d) {
				d->nodes[child].key = key;
				if (prev == KJ_NONE)
					d->nodes[me].first = child;
				else
					d->nodes[prev].next = child;
				prev = child;
			}
			int m = kj_more(r, close);
			if (m < 0)
				return -1;
			if (m == 0)
				return 0;
		}
	}
	if (c == '"') {
		getc_(r);
		if (!d)
			return read_string(r, NULL, NULL, NULL);
		uint32_t me, off, len;
		if (new_node(r, d, KJ_STR, &me) < 0 || arena_string(r, d, &off, &len) < 0)
			return -1;
		d->nodes[me].text = off;
		d->nodes[me].len = len;
		if (idx)
			*idx = me;
		return 0;
	}
	char w[KJ_WORD_MAX];
	uint8_t t = KJ_NULL;
	if (read_word(r, w, &t) < 0)
		return -1;
	if (!d)
		return 0;
	uint32_t me;
	if (new_node(r, d, t, &me) < 0)
		return -1;
	if (t == KJ_NUM) {
		size_t l = strlen(w);
		if (VEC_RESERVE(d->arena, d->acap, d->alen + l + 1, 256) < 0)
			return fail(r, "out of memory");
		memcpy(d->arena + d->alen, w, l + 1);
		d->nodes[me].text = (uint32_t)d->alen;
		d->nodes[me].len = (uint32_t)l;
		d->alen += l + 1;
	}
	if (idx)
		*idx = me;
	return 0;
}

int kj_skip(struct kj_reader *r) { return value(r, NULL, 0, NULL); }

int kj_parse(struct kj_reader *r, struct kj_doc *doc)
{
	uint32_t root;
	doc->n = 0;
	doc->alen = 0;
	return value(r, doc, 0, &root);
}

void kj_doc_free(struct kj_doc *doc)
{
	free(doc->nodes);
	free(doc->arena);
	memset(doc, 0, sizeof *doc);
}

/* ----------------------------------------------------------- lookups */

const struct kj_node *kj_get(const struct kj_doc *d, const struct kj_node *obj, const char *key)
{
	const struct kj_node *found = NULL;
	if (!obj || obj->type != KJ_OBJ)
		return NULL;
	for (uint32_t i = obj->first; i != KJ_NONE; i = d->nodes[i].next)
		if (d->nodes[i].key != KJ_NONE && !strcmp(d->arena + d->nodes[i].key, key))
			found = &d->nodes[i];
	return found;
}

const struct kj_node *kj_at(const struct kj_doc *d, const struct kj_node *arr, size_t i)
{
	if (!arr || arr->type != KJ_ARR)
		return NULL;
	for (uint32_t k = arr->first; k != KJ_NONE; k = d->nodes[k].next, i--)
		if (i == 0)
			return &d->nodes[k];
	return NULL;
}

const char *kj_text(const struct kj_doc *d, const struct kj_node *n)
{
	if (!n || (n->type != KJ_STR && n->type != KJ_NUM) || n->text == KJ_NONE)
		return NULL;
	return d->arena + n->text;
}

int kj_int(const struct kj_doc *d, const struct kj_node *n, int64_t *out)
{
	const char *s = kj_text(d, n);
	if (!s || !*s || (n->type == KJ_STR && !is_number(s)))
		return -1;
	if (!strpbrk(s, ".eEIiNn")) {
		char *end;
		errno = 0;
		if (*s == '-') {
			long long v = strtoll(s, &end, 10);
			if (errno || *end)
				return -1;
			*out = v;
		} else {
			/* above INT64_MAX (an unsigned address): wrap as uint64_t would */
			unsigned long long v = strtoull(s, &end, 10);
			if (errno || *end)
				return -1;
			*out = (int64_t)v;
		}
		return 0;
	}
	char *end;
	double v = strtod(s, &end);
	if (*end || !isfinite(v) || v != floor(v) || v < -9.2e18 || v > 9.2e18)
		return -1;
	*out = (int64_t)v;
	return 0;
}

int kj_us_to_ns(const struct kj_doc *d, const struct kj_node *n, int64_t *out)
{
	const char *s = kj_text(d, n);
	if (!s || !is_number(s))
		return -1;
	if (strpbrk(s, "eE")) {
		double v = strtod(s, NULL) * 1000.0;
		if (!isfinite(v) || v < -9.2e18 || v > 9.2e18)
			return -1;
		*out = (int64_t)llround(v);
		return 0;
	}
	int neg = *s == '-';
	if (neg)
		s++;
	int64_t ip = 0, frac = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (ip > INT64_MAX / 1000)
			return -1;
		ip = ip * 10 + (*s - '0');
	}
	if (*s == '.') {
		int k = 0;
		for (s++; *s >= '0' && *s <= '9'; s++, k++) {
			if (k < 3)
				frac = frac * 10 + (*s - '0');
			else if (k == 3 && *s >= '5')
				frac++;  /* round half up on the fourth decimal */
		}
		for (; k < 3; k++)
			frac *= 10;
	}
	if (ip > INT64_MAX / 1000 || ip * 1000 > INT64_MAX - frac)
		return -1;
	int64_t v = ip * 1000 + frac;
	*out = neg ? -v : v;
	return 0;
}
