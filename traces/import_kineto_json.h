/*
 * import_kineto_json.h: a streaming JSON reader for the Kineto importer
 * (import_kineto.c). A torch.profiler trace is one object whose
 * "traceEvents" array can hold millions of small events (100+ MB), so the
 * reader never holds the whole file: the caller walks the outer structure
 * with the pull calls (kj_peek, kj_expect, kj_key, kj_skip) and parses one
 * event at a time into a small tree (struct kj_doc) that the next event
 * reuses.
 *
 * base/json.h is a writer only; this is the project's one JSON reader, so it
 * lives beside its one user. It reads plain files with fread (no limit on
 * line length) and gzip files through text_input (zlib stays in the traces
 * I/O layer), where one line may be at most KJ_GZ_LINE_MAX bytes.
 *
 * Accepted beyond RFC 8259: NaN, Infinity, -Infinity (and nan, inf, -inf),
 * which some writers print for non-finite doubles; they read as numbers that
 * are not integers. Nesting deeper than KJ_MAX_DEPTH, a string over
 * KJ_MAX_STRING bytes and an event tree over KJ_MAX_DOC bytes are errors.
 * Every error names the file and line: "PATH:LINE: what".
 */
#ifndef TRACES_IMPORT_KINETO_JSON_H
#define TRACES_IMPORT_KINETO_JSON_H

#include <stddef.h>
#include <stdint.h>

#define KJ_MAX_DEPTH 64
#define KJ_MAX_STRING (16u << 20)
#define KJ_MAX_DOC (64u << 20)
#define KJ_GZ_LINE_MAX (16u << 20)
#define KJ_NONE UINT32_MAX

enum kj_type { KJ_NULL, KJ_FALSE, KJ_TRUE, KJ_NUM, KJ_STR, KJ_ARR, KJ_OBJ };

/* One value of a parsed tree. Children of an array or object are a linked
 * list (first, next); an object member carries its key. Strings and number
 * literals are NUL-terminated in the tree's arena (a string may hold NUL
 * bytes from \u0000; len says how long it is). */
struct kj_node {
	uint8_t type;          /* enum kj_type */
	uint32_t key;          /* arena offset of the member's key, or KJ_NONE */
	uint32_t text, len;    /* KJ_STR: the decoded string; KJ_NUM: the literal */
	uint32_t first, next;  /* node indexes, KJ_NONE for none */
};

struct kj_doc {
	struct kj_node *nodes;
	size_t n, cap;
	char *arena;
	size_t alen, acap;
};

struct kj_reader;

/* Open PATH (gzip detected from its first bytes). NULL with ERR naming it. */
struct kj_reader *kj_open(const char *path, char *err, size_t errlen);
void kj_close(struct kj_reader *r);

/* The line of the next unread byte (1-based). */
uint64_t kj_line(const struct kj_reader *r);
/* The reader's error message after a call returned -1. */
const char *kj_error(const struct kj_reader *r);

/* The next non-blank byte, not consumed; -1 at the end of the file (not an
 * error), -2 on a read error. */
int kj_peek(struct kj_reader *r);
/* Consume the next non-blank byte, which must be C; -1 otherwise, with a
 * message saying what WHAT expected ("the top-level object", ...). */
int kj_expect(struct kj_reader *r, char c, const char *what);
/* After '{' or ',': a member's key (into KEY, cut at LEN-1 bytes) and its
 * ':'. -1 on error. */
int kj_key(struct kj_reader *r, char *key, size_t len);
/* Skip one value of any size without keeping it. -1 on error. */
int kj_skip(struct kj_reader *r);
/* After a member or element: 1 at ',' (consumed), 0 at CLOSE (consumed),
 * -1 on anything else. */
int kj_more(struct kj_reader *r, char close);

/* Parse one value into DOC (emptied first); its root is node 0. -1 on
 * error. */
int kj_parse(struct kj_reader *r, struct kj_doc *doc);
void kj_doc_free(struct kj_doc *doc);

/* Member KEY of object node OBJ (the last one when repeated), or NULL. */
const struct kj_node *kj_get(const struct kj_doc *d, const struct kj_node *obj,
			     const char *key);
/* Element I of array node ARR, or NULL. */
const struct kj_node *kj_at(const struct kj_doc *d, const struct kj_node *arr, size_t i);
/* The text of a string (or a number's literal); NULL for other types. */
const char *kj_text(const struct kj_doc *d, const struct kj_node *n);
/* A number node that is an integer (or a float with an integral value, or a
 * string holding an integer, as some writers quote ids) into *OUT. -1 when
 * N is NULL, not such a value, or outside int64_t. */
int kj_int(const struct kj_doc *d, const struct kj_node *n, int64_t *out);
/* A number of microseconds (Chrome trace "ts"/"dur", e.g. 1234.567) into
 * nanoseconds, exactly for up to three decimals (rounded beyond). -1 when N
 * is NULL, not a finite number, or out of range. */
int kj_us_to_ns(const struct kj_doc *d, const struct kj_node *n, int64_t *out);

#endif /* TRACES_IMPORT_KINETO_JSON_H */
