/*
 * store_table.c: the query behind `gpumemsim table` and its rows as structs
 * (store_table.h).
 */
#include <stdlib.h>

#include "store_table.h"

/* The latest run of each (trace, policy, conf, capacity), with its labels,
 * retries and its policy's default-setting peak for comparison. */
static const char table_sql[] =
	"SELECT r.trace_path,"
	" coalesce((SELECT value FROM run_labels WHERE run_id=r.id AND key='model'),''),"
	" coalesce((SELECT value FROM run_labels WHERE run_id=r.id AND key='batch'),''),"
	" r.policy, r.conf, r.peak_reserved, r.peak_allocated, r.peak_requested,"
	" r.device_allocs, r.device_frees,"
	" coalesce((SELECT value FROM run_stats WHERE run_id=r.id AND name='num_alloc_retries'),0),"
	" r.oom, r.capacity,"
	" (SELECT d.peak_reserved FROM runs d WHERE d.trace_crc32=r.trace_crc32"
	"   AND d.policy=r.policy AND d.conf='' AND d.capacity=r.capacity"
	"   ORDER BY d.id DESC LIMIT 1),"
	" (SELECT d.oom FROM runs d WHERE d.trace_crc32=r.trace_crc32"
	"   AND d.policy=r.policy AND d.conf='' AND d.capacity=r.capacity"
	"   ORDER BY d.id DESC LIMIT 1),"
	" CASE WHEN r.timed THEN r.step_time_ns ELSE 0 END, r.gpu_busy_fraction,"
	" (SELECT CASE WHEN d.timed THEN d.step_time_ns ELSE 0 END FROM runs d"
	"   WHERE d.trace_crc32=r.trace_crc32 AND d.policy=r.policy AND d.conf=''"
	"   AND d.capacity=r.capacity ORDER BY d.id DESC LIMIT 1)"
	" FROM runs r"
	" WHERE r.id=(SELECT max(x.id) FROM runs x WHERE x.trace_crc32=r.trace_crc32"
	"   AND x.policy=r.policy AND x.conf=r.conf AND x.capacity=r.capacity)"
	" ORDER BY r.trace_path, r.capacity DESC, r.policy='optimal', r.policy, r.conf<>'', r.conf";

enum { C_PATH, C_MODEL, C_BATCH, C_POLICY, C_CONF, C_RES, C_ALLOC, C_REQ, C_DALLOC,
       C_DFREE, C_RETRY, C_OOM, C_CAP, C_DEFRES, C_DEFOOM, C_STEP, C_BUSY, C_DEFSTEP, C_N };

struct table_ctx {
	store_table_fn fn;
	void *ctx;
};

static uint64_t col_u64(const char *s) { return s ? strtoull(s, NULL, 10) : 0; }
static const char *col_str(const char *s) { return s ? s : ""; }

static int table_row(void *vctx, int ncols, const char *const *c)
{
	struct table_ctx *t = vctx;
	if (ncols < C_N)
		return 1;
	struct store_table_row r = {
		.trace_path = col_str(c[C_PATH]),
		.model = col_str(c[C_MODEL]),
		.batch = col_str(c[C_BATCH]),
		.policy = col_str(c[C_POLICY]),
		.conf = col_str(c[C_CONF]),
		.capacity = col_u64(c[C_CAP]),
		.peak_reserved = col_u64(c[C_RES]),
		.peak_allocated = col_u64(c[C_ALLOC]),
		.peak_requested = col_u64(c[C_REQ]),
		.device_allocs = col_u64(c[C_DALLOC]),
		.device_frees = col_u64(c[C_DFREE]),
		.num_alloc_retries = col_u64(c[C_RETRY]),
		.oom = col_u64(c[C_OOM]) != 0,
		.has_default = c[C_DEFRES] != NULL,
		.default_peak_reserved = col_u64(c[C_DEFRES]),
		.default_oom = col_u64(c[C_DEFOOM]) != 0,
		.step_time_ns = col_u64(c[C_STEP]),
		.has_busy = c[C_BUSY] != NULL,
		.gpu_busy_fraction = c[C_BUSY] ? strtod(c[C_BUSY], NULL) : 0.0,
		.default_step_time_ns = col_u64(c[C_DEFSTEP]),
	};
	return t->fn(t->ctx, &r);
}

int store_table_query(struct store *s, store_table_fn row, void *ctx, char *err, size_t errlen)
{
	struct table_ctx t = {.fn = row, .ctx = ctx};
	return store_query(s, table_sql, NULL, 0, table_row, &t, err, errlen);
}
