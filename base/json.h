/*
 * json.h: a tiny streaming JSON writer for machine-readable output
 * (--json). Deterministic: fields come out in the order they are written,
 * doubles with a fixed "%.6g"-style format, strings escaped per RFC 8259.
 */
#ifndef SIM_JSON_H
#define SIM_JSON_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

struct json {
	FILE *f;
	int depth;
	int need_comma[JSON_MAX_DEPTH];
};

void json_init(struct json *j, FILE *f);
void json_begin_object(struct json *j);   /* as a value (top level or in an array) */
void json_end_object(struct json *j);
void json_begin_array(struct json *j);
void json_end_array(struct json *j);
void json_key(struct json *j, const char *key); /* next value belongs to KEY */
void json_string(struct json *j, const char *s);
void json_u64(struct json *j, uint64_t v);
void json_i64(struct json *j, int64_t v);
void json_double(struct json *j, double v);
void json_bool(struct json *j, int v);
void json_null(struct json *j);

/* Shorthands: key + value. */
void json_kv_string(struct json *j, const char *key, const char *s);
void json_kv_u64(struct json *j, const char *key, uint64_t v);
void json_kv_i64(struct json *j, const char *key, int64_t v);
void json_kv_double(struct json *j, const char *key, double v);
void json_kv_bool(struct json *j, const char *key, int v);

/* Write S as a JSON string literal (quotes included) to F. */
void json_escape(FILE *f, const char *s);

#endif /* SIM_JSON_H */
