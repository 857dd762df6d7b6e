/*
 * store.c: run results in SQLite (see store.h; schema in docs/schema.md).
 *
 * The only file that includes sqlite3.h. A database is recognised as ours by
 * meta('application') = 'gpumemsim' and its schema version by PRAGMA
 * user_version (also in meta('schema_version') for people reading the file).
 * Each run is one BEGIN IMMEDIATE ... COMMIT; any failure rolls back, so a
 * failed run leaves no rows. Rows hold no wall-clock time: two identical
 * runs store identical rows apart from their ids.
 */
#include "store.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define BUSY_TIMEOUT_MS 5000

struct store {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *ins_run, *ins_label, *ins_stat, *ins_tl, *ins_ev;
};

static const char schema_sql[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE runs("
	" id INTEGER PRIMARY KEY,"
	" trace_path TEXT NOT NULL, trace_crc32 INTEGER NOT NULL, trace_bytes INTEGER NOT NULL,"
	" labels_json TEXT NOT NULL, policy TEXT NOT NULL, conf TEXT NOT NULL,"
	" capacity INTEGER NOT NULL, tool_version TEXT NOT NULL, complete INTEGER NOT NULL,"
	" allocs INTEGER NOT NULL, frees INTEGER NOT NULL,"
	" peak_allocated INTEGER NOT NULL, peak_requested INTEGER NOT NULL,"
	" peak_reserved INTEGER NOT NULL,"
	" device_allocs INTEGER NOT NULL, device_frees INTEGER NOT NULL,"
	" fragmentation REAL NOT NULL,"
	" oom INTEGER NOT NULL, num_ooms INTEGER NOT NULL,"
	" oom_t_ns INTEGER, oom_bytes INTEGER, oom_line INTEGER,"
	" oom_allocated INTEGER, oom_reserved INTEGER,"
	" oom_largest_free INTEGER, oom_cached_free INTEGER,"
	" trace_duration_ns INTEGER NOT NULL, sim_duration_ns INTEGER NOT NULL);"
	"CREATE TABLE run_labels(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" key TEXT NOT NULL, value TEXT NOT NULL);"
	"CREATE TABLE run_stats(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" name TEXT NOT NULL, value INTEGER NOT NULL);"
	"CREATE TABLE timeline(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" t_ns INTEGER NOT NULL, allocated INTEGER NOT NULL, reserved INTEGER NOT NULL);"
	"CREATE TABLE events(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" kind TEXT NOT NULL, t_ns INTEGER NOT NULL, bytes INTEGER NOT NULL,"
	" line INTEGER NOT NULL, detail TEXT NOT NULL);"
	"CREATE INDEX runs_by_trace ON runs(trace_crc32, policy);"
	"CREATE INDEX run_labels_by_run ON run_labels(run_id);"
	"CREATE INDEX run_stats_by_run ON run_stats(run_id);"
	"CREATE INDEX timeline_by_run ON timeline(run_id, t_ns);"
	"CREATE INDEX events_by_run ON events(run_id);"
	"INSERT INTO meta VALUES('application','gpumemsim');";

static int exec(struct store *s, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", s->path, msg ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static int query_int(struct store *s, const char *sql, int64_t *out, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int ret = -1;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		goto fail;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		*out = 0;
	else
		goto fail;
	ret = 0;
	goto out;
fail:
	snprintf(err, errlen, "%s: %s", s->path, sqlite3_errmsg(s->db));
out:
	sqlite3_finalize(st);
	return ret;
}

/* Make a fresh file ours, or check that an existing one is. */
static int check_or_create(struct store *s, char *err, size_t errlen)
{
	int64_t uv, ntables, ours;
	char sql[128];
	if (query_int(s, "PRAGMA user_version", &uv, err, errlen) < 0)
		return -1;
	if (query_int(s, "SELECT count(*) FROM sqlite_master", &ntables, err, errlen) < 0)
		return -1;
	if (uv == 0 && ntables == 0) {
		if (exec(s, "BEGIN IMMEDIATE", err, errlen) < 0)
			return -1;
		snprintf(sql, sizeof sql,
			 "INSERT INTO meta VALUES('schema_version','%d');PRAGMA user_version=%d;",
			 STORE_SCHEMA_VERSION, STORE_SCHEMA_VERSION);
		if (exec(s, schema_sql, err, errlen) < 0 || exec(s, sql, err, errlen) < 0 ||
		    exec(s, "COMMIT", err, errlen) < 0) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			return -1;
		}
		return 0;
	}
	if (query_int(s, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'",
		      &ours, err, errlen) < 0)
		return -1;
	if (ours) {
		char e2[64];
		if (query_int(s, "SELECT count(*) FROM meta WHERE key='application' AND value='gpumemsim'",
			      &ours, e2, sizeof e2) < 0)
			ours = 0;
	}
	if (!ours) {
		snprintf(err, errlen, "%s: not a gpumemsim results database", s->path);
		return -1;
	}
	if (uv > STORE_SCHEMA_VERSION) {
		snprintf(err, errlen, "%s: results schema version %" PRId64
			 " is newer than this gpumemsim reads (%d); use a newer gpumemsim",
			 s->path, uv, STORE_SCHEMA_VERSION);
		return -1;
	}
	if (uv < 1) {
		snprintf(err, errlen, "%s: gpumemsim results database without a schema version",
			 s->path);
		return -1;
	}
	return 0;
}

static int prepare(struct store *s, const char *sql, sqlite3_stmt **st, char *err, size_t errlen)
{
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", s->path, sqlite3_errmsg(s->db));
		return -1;
	}
	return 0;
}

/*
 * Opening never creates a half-initialised file: the schema goes in one
 * transaction. WAL lets a plotting script read while runs are written.
 */
struct store *store_open(const char *path, char *err, size_t errlen)
{
	struct store *s = calloc(1, sizeof *s);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->path = strdup(path ? path : "");
	if (!s->path) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL)
	    != SQLITE_OK) {
		snprintf(err, errlen, "cannot open results database '%s': %s", path,
			 s->db ? sqlite3_errmsg(s->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
	sqlite3_extended_result_codes(s->db, 1);
	char e2[256];
	if (exec(s, "PRAGMA journal_mode=WAL", e2, sizeof e2) < 0) {
		if (sqlite3_errcode(s->db) == SQLITE_NOTADB)
			snprintf(err, errlen, "%s: not a gpumemsim results database (%s)", path,
				 sqlite3_errmsg(s->db));
		else
			snprintf(err, errlen, "cannot use results database '%s': %s", path,
				 sqlite3_errmsg(s->db));
		goto fail;
	}
	if (exec(s, "PRAGMA foreign_keys=ON", err, errlen) < 0)
		goto fail;
	if (check_or_create(s, e2, sizeof e2) < 0) {
		if ((sqlite3_errcode(s->db) & 0xff) == SQLITE_READONLY ||
		    (sqlite3_errcode(s->db) & 0xff) == SQLITE_CANTOPEN)
			snprintf(err, errlen, "cannot write results database '%s': %s", path,
				 sqlite3_errmsg(s->db));
		else
			snprintf(err, errlen, "%s", e2);
		goto fail;
	}
	if (prepare(s, "INSERT INTO runs(trace_path, trace_crc32, trace_bytes, labels_json,"
		    " policy, conf, capacity, tool_version, complete, allocs, frees,"
		    " peak_allocated, peak_requested, peak_reserved, device_allocs, device_frees,"
		    " fragmentation, oom, num_ooms, oom_t_ns, oom_bytes, oom_line, oom_allocated,"
		    " oom_reserved, oom_largest_free, oom_cached_free, trace_duration_ns,"
		    " sim_duration_ns) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
		    &s->ins_run, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO run_labels VALUES(?,?,?)", &s->ins_label, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO run_stats VALUES(?,?,?)", &s->ins_stat, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO timeline VALUES(?,?,?,?)", &s->ins_tl, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO events VALUES(?,?,?,?,?,?)", &s->ins_ev, err, errlen) < 0)
		goto fail;
	return s;
fail:
	store_close(s);
	return NULL;
}

/* SQLite integers are signed: sizes above 2^63 do not occur on any GPU. */
static int bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	return sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

static int step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* The labels as one JSON object, in header order. */
static char *labels_json(const struct sim_result *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fputc('{', f);
	for (size_t i = 0; i < r->nlabels; i++) {
		if (i)
			fputc(',', f);
		json_escape(f, r->labels[i].key);
		fputc(':', f);
		json_escape(f, r->labels[i].value);
	}
	fputc('}', f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int insert_run(struct store *s, const struct sim_result *r, const char *tool_version,
		      const char *lj)
{
	sqlite3_stmt *st = s->ins_run;
	int i = 1;
	sqlite3_bind_text(st, i++, r->trace_path ? r->trace_path : "", -1, SQLITE_STATIC);
	bind_u64(st, i++, r->trace_crc32);
	bind_u64(st, i++, r->trace_bytes);
	sqlite3_bind_text(st, i++, lj, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, i++, r->policy ? r->policy : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, i++, r->conf ? r->conf : "", -1, SQLITE_STATIC);
	bind_u64(st, i++, r->capacity);
	sqlite3_bind_text(st, i++, tool_version ? tool_version : "", -1, SQLITE_STATIC);
	sqlite3_bind_int(st, i++, r->complete != 0);
	bind_u64(st, i++, r->allocs);
	bind_u64(st, i++, r->frees);
	bind_u64(st, i++, r->peak_allocated);
	bind_u64(st, i++, r->peak_requested);
	bind_u64(st, i++, r->peak_reserved);
	bind_u64(st, i++, r->device_allocs);
	bind_u64(st, i++, r->device_frees);
	sqlite3_bind_double(st, i++, r->fragmentation);
	sqlite3_bind_int(st, i++, r->oom != 0);
	bind_u64(st, i++, r->num_ooms);
	if (r->oom) {
		bind_u64(st, i++, r->oom_t);
		bind_u64(st, i++, r->oom_bytes);
		bind_u64(st, i++, r->oom_line);
		bind_u64(st, i++, r->oom_allocated);
		bind_u64(st, i++, r->oom_reserved);
		if (r->oom_largest_free >= 0)
			sqlite3_bind_int64(st, i, r->oom_largest_free);
		i++;
		if (r->oom_cached_free >= 0)
			sqlite3_bind_int64(st, i, r->oom_cached_free);
		i++;
	} else {
		i += 7; /* NULLs: no OOM */
	}
	bind_u64(st, i++, r->trace_duration_ns);
	bind_u64(st, i++, r->sim_duration_ns);
	return step_done(st);
}

int store_save_run(struct store *s, const struct sim_result *r, const char *tool_version,
		   int64_t *run_id, char *err, size_t errlen)
{
	char *lj = NULL;
	int ret = -1, in_tx = 0;
	if (!s || !r) {
		snprintf(err, errlen, "store_save_run: no store or no result");
		return -1;
	}
	lj = labels_json(r);
	if (!lj) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (exec(s, "BEGIN IMMEDIATE", err, errlen) < 0)
		goto out;
	in_tx = 1;
	if (insert_run(s, r, tool_version, lj) < 0)
		goto sqlerr;
	int64_t id = sqlite3_last_insert_rowid(s->db);
	for (size_t i = 0; i < r->nlabels; i++) {
		sqlite3_bind_int64(s->ins_label, 1, id);
		sqlite3_bind_text(s->ins_label, 2, r->labels[i].key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s->ins_label, 3, r->labels[i].value, -1, SQLITE_STATIC);
		if (step_done(s->ins_label) < 0)
			goto sqlerr;
	}
	for (size_t i = 0; i < r->nstats; i++) {
		sqlite3_bind_int64(s->ins_stat, 1, id);
		sqlite3_bind_text(s->ins_stat, 2, r->stats[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s->ins_stat, 3, r->stats[i].value);
		if (step_done(s->ins_stat) < 0)
			goto sqlerr;
	}
	for (size_t i = 0; i < r->ntimeline; i++) {
		sqlite3_bind_int64(s->ins_tl, 1, id);
		bind_u64(s->ins_tl, 2, r->timeline[i].t);
		bind_u64(s->ins_tl, 3, r->timeline[i].allocated);
		bind_u64(s->ins_tl, 4, r->timeline[i].reserved);
		if (step_done(s->ins_tl) < 0)
			goto sqlerr;
	}
	for (size_t i = 0; i < r->nevents; i++) {
		const struct sim_event *ev = &r->events[i];
		sqlite3_bind_int64(s->ins_ev, 1, id);
		sqlite3_bind_text(s->ins_ev, 2, sim_event_kind_name(ev->kind), -1, SQLITE_STATIC);
		bind_u64(s->ins_ev, 3, ev->t);
		bind_u64(s->ins_ev, 4, ev->bytes);
		bind_u64(s->ins_ev, 5, ev->line);
		sqlite3_bind_text(s->ins_ev, 6, ev->detail, -1, SQLITE_STATIC);
		if (step_done(s->ins_ev) < 0)
			goto sqlerr;
	}
	if (exec(s, "COMMIT", err, errlen) < 0)
		goto out;
	in_tx = 0;
	if (run_id)
		*run_id = id;
	ret = 0;
	goto out;
sqlerr:
	snprintf(err, errlen, "%s: saving the run failed: %s", s->path, sqlite3_errmsg(s->db));
out:
	if (in_tx)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	free(lj);
	return ret;
}

int store_query(struct store *s, const char *sql, const char *const *params, int nparams,
		store_row_fn row, void *ctx, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	if (prepare(s, sql, &st, err, errlen) < 0)
		return -1;
	for (int i = 0; i < nparams; i++)
		sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_TRANSIENT);
	int n = 0, rc, ncols = sqlite3_column_count(st);
	const char *cols[64];
	if (ncols > 64)
		ncols = 64;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (int c = 0; c < ncols; c++)
			cols[c] = (const char *)sqlite3_column_text(st, c);
		n++;
		if (row(ctx, ncols, cols))
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s: query failed: %s", s->path, sqlite3_errmsg(s->db));
		n = -1;
	}
	sqlite3_finalize(st);
	return n;
}

/* Finalises every statement first so sqlite3_close can release the file. */
void store_close(struct store *s)
{
	if (!s)
		return;
	sqlite3_finalize(s->ins_run);
	sqlite3_finalize(s->ins_label);
	sqlite3_finalize(s->ins_stat);
	sqlite3_finalize(s->ins_tl);
	sqlite3_finalize(s->ins_ev);
	if (s->db)
		sqlite3_close(s->db);
	free(s->path);
	free(s);
}
