/*
 * json.c: see json.h. Commas are tracked per nesting level so callers never
 * think about separators.
 */
#include "json.h"

#include <inttypes.h>
#include <math.h>

void json_init(struct json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->need_comma[0] = 0;
}

/* Before any value: a comma if a sibling came before (keys set this off). */
static void value_prefix(struct json *j)
{
	if (j->need_comma[j->depth] == 1)
		fputc(',', j->f);
	j->need_comma[j->depth] = 1;
}

static void open_(struct json *j, char c)
{
	value_prefix(j);
	fputc(c, j->f);
	if (j->depth + 1 < JSON_MAX_DEPTH)
		j->depth++;
	j->need_comma[j->depth] = 0;
}

static void close_(struct json *j, char c)
{
	if (j->depth > 0)
		j->depth--;
	fputc(c, j->f);
	if (j->depth == 0)
		fputc('\n', j->f);
}

void json_begin_object(struct json *j) { open_(j, '{'); }
void json_end_object(struct json *j) { close_(j, '}'); }
void json_begin_array(struct json *j) { open_(j, '['); }
void json_end_array(struct json *j) { close_(j, ']'); }

void json_escape(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

void json_key(struct json *j, const char *key)
{
	value_prefix(j);
	json_escape(j->f, key);
	fputc(':', j->f);
	/* the value that follows must not print a comma */
	j->need_comma[j->depth] = 2;
}

/* A value after a key: no comma, then mark the level as needing one. */
static void scalar_prefix(struct json *j)
{
	if (j->need_comma[j->depth] == 2)
		j->need_comma[j->depth] = 1;
	else
		value_prefix(j);
}

void json_string(struct json *j, const char *s) { scalar_prefix(j); json_escape(j->f, s); }
void json_u64(struct json *j, uint64_t v) { scalar_prefix(j); fprintf(j->f, "%" PRIu64, v); }
void json_i64(struct json *j, int64_t v) { scalar_prefix(j); fprintf(j->f, "%" PRId64, v); }
void json_bool(struct json *j, int v) { scalar_prefix(j); fputs(v ? "true" : "false", j->f); }
void json_null(struct json *j) { scalar_prefix(j); fputs("null", j->f); }

void json_double(struct json *j, double v)
{
	scalar_prefix(j);
	if (isfinite(v))
		fprintf(j->f, "%.9g", v);
	else
		fputs("null", j->f);
}

void json_kv_string(struct json *j, const char *k, const char *s) { json_key(j, k); json_string(j, s); }
void json_kv_u64(struct json *j, const char *k, uint64_t v) { json_key(j, k); json_u64(j, v); }
void json_kv_i64(struct json *j, const char *k, int64_t v) { json_key(j, k); json_i64(j, v); }
void json_kv_double(struct json *j, const char *k, double v) { json_key(j, k); json_double(j, v); }
void json_kv_bool(struct json *j, const char *k, int v) { json_key(j, k); json_bool(j, v); }
