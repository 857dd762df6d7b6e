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
#include <unistd.h>
#include <sys/stat.h>

#include "../base/json.h"

#define BUSY_TIMEOUT_MS 5000

struct store {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *ins_run, *ins_label, *ins_stat, *ins_tl, *ins_ev, *upd_added;
	sqlite3_stmt *has_key, *ins_key;  /* run_keys, prepared on first use */
	sqlite3_stmt *ins_pl, *ins_rg;    /* peak_live, ranges */
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

/*
 * Columns added to `runs` after schema 1. A database made by an older
 * gpumemsim gets them (with their defaults) when it is opened, so readers
 * can rely on them; merge copies them from inputs that have them.
 */
static const struct { const char *name, *decl; } added_run_columns[] = {
	{"step_time_ns", "INTEGER NOT NULL DEFAULT 0"},
	{"step_count", "INTEGER NOT NULL DEFAULT 0"},
	{"oom_limit", "INTEGER"},
	{"oom_verdict", "TEXT"},
	{"timed", "INTEGER NOT NULL DEFAULT 0"},
	/* memory outside the framework's allocator (docs/markers.md) */
	{"foreign_routed", "INTEGER NOT NULL DEFAULT 0"},
	{"peak_foreign", "INTEGER NOT NULL DEFAULT 0"},
	{"device_peak", "INTEGER"},
	{"oom_foreign", "TEXT"},
	{"oom_foreign_bytes", "INTEGER"},
	/* the GPU's busy share of the predicted step; NULL when not timed */
	{"gpu_busy_fraction", "REAL"},
};
#define N_ADDED_RUN_COLUMNS (sizeof added_run_columns / sizeof added_run_columns[0])

/* 1 if SCHEMA.runs has column NAME, 0 if not, -1 on error. */
static int has_run_column(struct store *s, const char *schema, const char *name, char *err,
			  size_t errlen)
{
	char sql[256];
	int64_t n = 0;
	snprintf(sql, sizeof sql, "SELECT count(*) FROM pragma_table_info('runs', '%s') WHERE name='%s'",
		 schema, name);
	if (query_int(s, sql, &n, err, errlen) < 0)
		return -1;
	return n > 0;
}

static int add_missing_columns(struct store *s, const char *schema, char *err, size_t errlen)
{
	for (size_t i = 0; i < N_ADDED_RUN_COLUMNS; i++) {
		int has = has_run_column(s, schema, added_run_columns[i].name, err, errlen);
		if (has < 0)
			return -1;
		if (!has) {
			char sql[256];
			snprintf(sql, sizeof sql, "ALTER TABLE %s.runs ADD COLUMN %s %s", schema,
				 added_run_columns[i].name, added_run_columns[i].decl);
			if (exec(s, sql, err, errlen) < 0)
				return -1;
		}
	}
	return 0;
}

/*
 * Tables added after schema 1, made when missing (an older database gets
 * them empty; older readers ignore them; user_version stays 1). One
 * transaction, and none at all when both are there.
 */
static const char added_tables_sql[] =
	"CREATE TABLE IF NOT EXISTS peak_live(run_id INTEGER NOT NULL REFERENCES runs(id)"
	" ON DELETE CASCADE, rank INTEGER NOT NULL, bytes INTEGER NOT NULL, kind TEXT NOT NULL,"
	" layer TEXT NOT NULL, line INTEGER, count INTEGER NOT NULL DEFAULT 1);"
	"CREATE INDEX IF NOT EXISTS peak_live_by_run ON peak_live(run_id);"
	"CREATE TABLE IF NOT EXISTS ranges(run_id INTEGER NOT NULL REFERENCES runs(id)"
	" ON DELETE CASCADE, name TEXT NOT NULL, depth INTEGER NOT NULL, t_ns INTEGER NOT NULL,"
	" end_ns INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS ranges_by_run ON ranges(run_id, t_ns);";

static int add_missing_tables(struct store *s, char *err, size_t errlen)
{
	int64_t n = 0;
	if (query_int(s, "SELECT count(*) FROM sqlite_master WHERE type='table'"
		      " AND name IN ('peak_live','ranges')", &n, err, errlen) < 0)
		return -1;
	if (n == 2)
		return 0;
	if (exec(s, "BEGIN IMMEDIATE", err, errlen) < 0)
		return -1;
	if (exec(s, added_tables_sql, err, errlen) < 0 || exec(s, "COMMIT", err, errlen) < 0) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
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
	int cc = check_or_create(s, e2, sizeof e2);
	if (cc >= 0 && add_missing_columns(s, "main", e2, sizeof e2) < 0)
		cc = -1;
	if (cc >= 0 && add_missing_tables(s, e2, sizeof e2) < 0)
		cc = -1;
	if (cc < 0) {
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
	    prepare(s, "UPDATE runs SET step_time_ns=?, step_count=?, oom_limit=?, oom_verdict=?,"
		    " timed=?, foreign_routed=?, peak_foreign=?, device_peak=?, oom_foreign=?,"
		    " oom_foreign_bytes=?, gpu_busy_fraction=? WHERE id=?", &s->upd_added, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO run_stats VALUES(?,?,?)", &s->ins_stat, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO timeline VALUES(?,?,?,?)", &s->ins_tl, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO events VALUES(?,?,?,?,?,?)", &s->ins_ev, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO peak_live(run_id, rank, bytes, kind, layer, line, count)"
		    " VALUES(?,?,?,?,?,?,?)", &s->ins_pl, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO ranges VALUES(?,?,?,?,?)", &s->ins_rg, err, errlen) < 0)
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

static int ensure_keys(struct store *s, char *err, size_t errlen);

/*
 * One run in one transaction. With KEY, the write lock taken by BEGIN
 * IMMEDIATE makes "is the key stored? else insert" atomic against other
 * processes, and the UNIQUE constraint backs it up: a key is never stored
 * twice. *DUP tells the caller it was already there (nothing written).
 */
static int save_tx(struct store *s, const struct sim_result *r, const char *tool_version,
		   const char *key, const char *addresses, int64_t *run_id, int *dup,
		   char *err, size_t errlen)
{
	char *lj = NULL;
	int ret = -1, in_tx = 0;
	if (dup)
		*dup = 0;
	if (!s || !r) {
		snprintf(err, errlen, "store_save_run: no store or no result");
		return -1;
	}
	if (key && ensure_keys(s, err, errlen) < 0)
		return -1;
	lj = labels_json(r);
	if (!lj) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (exec(s, "BEGIN IMMEDIATE", err, errlen) < 0)
		goto out;
	in_tx = 1;
	if (key) {
		sqlite3_bind_text(s->has_key, 1, key, -1, SQLITE_STATIC);
		int rc = sqlite3_step(s->has_key);
		sqlite3_reset(s->has_key);
		sqlite3_clear_bindings(s->has_key);
		if (rc == SQLITE_ROW) {
			if (dup)
				*dup = 1;
			ret = 0;
			goto out;
		}
		if (rc != SQLITE_DONE)
			goto sqlerr;
	}
	if (insert_run(s, r, tool_version, lj) < 0)
		goto sqlerr;
	int64_t id = sqlite3_last_insert_rowid(s->db);
	/* columns added after schema 1 (see added_run_columns) */
	sqlite3_bind_int64(s->upd_added, 1, (sqlite3_int64)r->step_time_ns);
	sqlite3_bind_int64(s->upd_added, 2, (sqlite3_int64)r->step_count);
	if (r->oom && r->oom_limit)
		sqlite3_bind_int64(s->upd_added, 3, (sqlite3_int64)r->oom_limit);
	else
		sqlite3_bind_null(s->upd_added, 3);
	if (r->oom)
		sqlite3_bind_text(s->upd_added, 4, r->oom_verdict, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s->upd_added, 4);
	sqlite3_bind_int64(s->upd_added, 5, r->timed ? 1 : 0);
	sqlite3_bind_int64(s->upd_added, 6, r->foreign_routed ? 1 : 0);
	sqlite3_bind_int64(s->upd_added, 7, (sqlite3_int64)r->peak_foreign);
	/* a result made without the engine's figure (an old worker) has 0 */
	sqlite3_bind_int64(s->upd_added, 8, (sqlite3_int64)(r->device_peak ? r->device_peak
							    : r->peak_reserved));
	if (r->oom && r->foreign_routed) {
		sqlite3_bind_text(s->upd_added, 9, r->oom_foreign_lib, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s->upd_added, 10, (sqlite3_int64)r->oom_foreign);
	} else {
		sqlite3_bind_null(s->upd_added, 9);
		sqlite3_bind_null(s->upd_added, 10);
	}
	if (r->timed && r->step_time_ns)
		sqlite3_bind_double(s->upd_added, 11, r->gpu_busy_fraction);
	else
		sqlite3_bind_null(s->upd_added, 11);
	sqlite3_bind_int64(s->upd_added, 12, id);
	if (step_done(s->upd_added) < 0)
		goto sqlerr;
	if (key) {
		sqlite3_bind_int64(s->ins_key, 1, id);
		sqlite3_bind_text(s->ins_key, 2, key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s->ins_key, 3, addresses ? addresses : "", -1, SQLITE_STATIC);
		if (step_done(s->ins_key) < 0)
			goto sqlerr;
	}
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
	for (size_t i = 0; i < r->npeak_live; i++) {
		const struct sim_live *l = &r->peak_live[i];
		sqlite3_bind_int64(s->ins_pl, 1, id);
		sqlite3_bind_int64(s->ins_pl, 2, l->rank);
		bind_u64(s->ins_pl, 3, l->bytes);
		sqlite3_bind_text(s->ins_pl, 4, sim_live_kind_name(l->kind), -1, SQLITE_STATIC);
		sqlite3_bind_text(s->ins_pl, 5, l->layer, -1, SQLITE_STATIC);
		if (l->rank)
			bind_u64(s->ins_pl, 6, l->line);
		else
			sqlite3_bind_null(s->ins_pl, 6);
		bind_u64(s->ins_pl, 7, l->count);
		if (step_done(s->ins_pl) < 0)
			goto sqlerr;
	}
	for (size_t i = 0; i < r->nranges; i++) {
		const struct sim_range *g = &r->ranges[i];
		sqlite3_bind_int64(s->ins_rg, 1, id);
		sqlite3_bind_text(s->ins_rg, 2, g->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s->ins_rg, 3, g->depth);
		bind_u64(s->ins_rg, 4, g->t);
		bind_u64(s->ins_rg, 5, g->end);
		if (step_done(s->ins_rg) < 0)
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

/* Unkeyed: `gpumemsim run` may store the same combination again. */
int store_save_run(struct store *s, const struct sim_result *r, const char *tool_version,
		   int64_t *run_id, char *err, size_t errlen)
{
	return save_tx(s, r, tool_version, NULL, NULL, run_id, NULL, err, errlen);
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
	sqlite3_finalize(s->upd_added);
	sqlite3_finalize(s->ins_label);
	sqlite3_finalize(s->ins_stat);
	sqlite3_finalize(s->ins_tl);
	sqlite3_finalize(s->ins_ev);
	sqlite3_finalize(s->has_key);
	sqlite3_finalize(s->ins_key);
	sqlite3_finalize(s->ins_pl);
	sqlite3_finalize(s->ins_rg);
	if (s->db)
		sqlite3_close(s->db);
	free(s->path);
	free(s);
}

/* ------------------------------------------------ keyed runs and merging */

/*
 * run_keys sits beside the version-1 tables rather than in them: it is
 * created on first use, so databases made by `gpumemsim run` stay readable
 * by older builds, and a gpumemsim without sweeps ignores it.
 */
static const char keys_sql[] =
	"CREATE TABLE IF NOT EXISTS run_keys("
	" run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,"
	" key TEXT NOT NULL UNIQUE, addresses TEXT NOT NULL)";

static int ensure_keys(struct store *s, char *err, size_t errlen)
{
	if (s->has_key)
		return 0;
	if (exec(s, keys_sql, err, errlen) < 0)
		return -1;
	if (prepare(s, "SELECT 1 FROM run_keys WHERE key=?", &s->has_key, err, errlen) < 0 ||
	    prepare(s, "INSERT INTO run_keys VALUES(?,?,?)", &s->ins_key, err, errlen) < 0) {
		sqlite3_finalize(s->has_key);
		s->has_key = NULL;
		return -1;
	}
	return 0;
}

/* A prepared lookup; the table is created if this database has none yet. */
int store_run_key_exists(struct store *s, const char *key, int *found, char *err, size_t errlen)
{
	if (ensure_keys(s, err, errlen) < 0)
		return -1;
	sqlite3_bind_text(s->has_key, 1, key, -1, SQLITE_STATIC);
	int rc = sqlite3_step(s->has_key);
	sqlite3_reset(s->has_key);
	sqlite3_clear_bindings(s->has_key);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s: %s", s->path, sqlite3_errmsg(s->db));
		return -1;
	}
	*found = rc == SQLITE_ROW;
	return 0;
}

/* store_save_run with a key that makes the save idempotent (see save_tx). */
int store_save_keyed_run(struct store *s, const struct sim_result *r, const char *tool_version,
			 const char *key, const char *addresses, int64_t *run_id, int *duplicate,
			 char *err, size_t errlen)
{
	if (!key) {
		snprintf(err, errlen, "store_save_keyed_run: no key");
		return -1;
	}
	return save_tx(s, r, tool_version, key, addresses, run_id, duplicate, err, errlen);
}

#define MERGE_RUN_COLS \
	"trace_path, trace_crc32, trace_bytes, labels_json, policy, conf, capacity," \
	" tool_version, complete, allocs, frees, peak_allocated, peak_requested," \
	" peak_reserved, device_allocs, device_frees, fragmentation, oom, num_ooms," \
	" oom_t_ns, oom_bytes, oom_line, oom_allocated, oom_reserved, oom_largest_free," \
	" oom_cached_free, trace_duration_ns, sim_duration_ns"

static int attach_input(struct store *s, const char *path, int *has_keys, char *err,
			size_t errlen)
{
	sqlite3_stmt *st = NULL;
	struct stat sb;
	int64_t n = 0, uv = 0;
	char e2[256];
	if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: no such results database", path);
		return -1;
	}
	if (sqlite3_prepare_v2(s->db, "ATTACH ? AS gsrc", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(s->db));
		return -1;
	}
	sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "cannot open results database '%s': %s", path,
			 sqlite3_errmsg(s->db));
		return -1;
	}
	if (query_int(s, "SELECT count(*) FROM gsrc.sqlite_master WHERE type='table'"
		      " AND name='meta'", &n, e2, sizeof e2) < 0 || !n ||
	    query_int(s, "SELECT count(*) FROM gsrc.meta WHERE key='application'"
		      " AND value='gpumemsim'", &n, e2, sizeof e2) < 0 || !n) {
		snprintf(err, errlen, "%s: not a gpumemsim results database", path);
		goto fail;
	}
	if (query_int(s, "PRAGMA gsrc.user_version", &uv, e2, sizeof e2) < 0 || uv < 1 ||
	    uv > STORE_SCHEMA_VERSION) {
		snprintf(err, errlen, "%s: results schema version %" PRId64 " (this gpumemsim "
			 "merges version %d)", path, uv, STORE_SCHEMA_VERSION);
		goto fail;
	}
	if (query_int(s, "SELECT count(*) FROM gsrc.sqlite_master WHERE type='table'"
		      " AND name='run_keys'", &n, err, errlen) < 0)
		goto fail;
	*has_keys = n != 0;
	return 0;
fail:
	sqlite3_exec(s->db, "DETACH gsrc", NULL, NULL, NULL);
	return -1;
}

/* Copy input SRC's planned runs (ids already chosen) in one transaction. */
static int copy_input(struct store *s, size_t src, char *err, size_t errlen)
{
	char sql[8192], cols[1024] = MERGE_RUN_COLS;
	/* the columns added after schema 1 that this input has (older inputs
	 * leave them at their defaults) */
	for (size_t i = 0; i < N_ADDED_RUN_COLUMNS; i++) {
		int has = has_run_column(s, "gsrc", added_run_columns[i].name, err, errlen);
		if (has < 0)
			return -1;
		if (has) {
			size_t n = strlen(cols);
			snprintf(cols + n, sizeof cols - n, ", %s", added_run_columns[i].name);
		}
	}
	/* peak_live and ranges from inputs that have them */
	int64_t npl = 0, nrg = 0;
	char extra[1024] = "";
	if (query_int(s, "SELECT count(*) FROM gsrc.sqlite_master WHERE type='table'"
		      " AND name='peak_live'", &npl, err, errlen) < 0 ||
	    query_int(s, "SELECT count(*) FROM gsrc.sqlite_master WHERE type='table'"
		      " AND name='ranges'", &nrg, err, errlen) < 0)
		return -1;
	if (npl)
		snprintf(extra, sizeof extra,
			 "INSERT INTO main.peak_live(run_id, rank, bytes, kind, layer, line, count)"
			 " SELECT p.new_id, x.rank, x.bytes, x.kind, x.layer, x.line, x.count"
			 " FROM gsrc.peak_live x JOIN temp.merge_plan p ON p.src=%zu AND"
			 " p.old_id=x.run_id ORDER BY p.new_id, x.rowid;", src);
	if (nrg) {
		size_t n = strlen(extra);
		snprintf(extra + n, sizeof extra - n,
			 "INSERT INTO main.ranges SELECT p.new_id, x.name, x.depth, x.t_ns, x.end_ns"
			 " FROM gsrc.ranges x JOIN temp.merge_plan p ON p.src=%zu AND"
			 " p.old_id=x.run_id ORDER BY p.new_id, x.rowid;", src);
	}
	snprintf(sql, sizeof sql,
		 "BEGIN IMMEDIATE;"
		 "INSERT INTO main.runs(id, %s) SELECT p.new_id, %s"
		 " FROM gsrc.runs r JOIN temp.merge_plan p ON p.src=%zu AND p.old_id=r.id"
		 " ORDER BY p.new_id;"
		 "INSERT INTO main.run_labels SELECT p.new_id, l.key, l.value FROM gsrc.run_labels l"
		 " JOIN temp.merge_plan p ON p.src=%zu AND p.old_id=l.run_id ORDER BY p.new_id, l.rowid;"
		 "INSERT INTO main.run_stats SELECT p.new_id, x.name, x.value FROM gsrc.run_stats x"
		 " JOIN temp.merge_plan p ON p.src=%zu AND p.old_id=x.run_id ORDER BY p.new_id, x.rowid;"
		 "INSERT INTO main.timeline SELECT p.new_id, x.t_ns, x.allocated, x.reserved"
		 " FROM gsrc.timeline x JOIN temp.merge_plan p ON p.src=%zu AND p.old_id=x.run_id"
		 " ORDER BY p.new_id, x.rowid;"
		 "INSERT INTO main.events SELECT p.new_id, x.kind, x.t_ns, x.bytes, x.line, x.detail"
		 " FROM gsrc.events x JOIN temp.merge_plan p ON p.src=%zu AND p.old_id=x.run_id"
		 " ORDER BY p.new_id, x.rowid;"
		 "INSERT INTO main.run_keys SELECT p.new_id, p.key, coalesce(p.addresses,'')"
		 " FROM temp.merge_plan p WHERE p.src=%zu AND p.key IS NOT NULL ORDER BY p.new_id;"
		 "%s"
		 "COMMIT;", cols, cols, src, src, src, src, src, src, extra);
	if (exec(s, sql, err, errlen) < 0) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	return 0;
}

/*
 * Two passes: first every input's runs go into a plan (temp table), keys
 * already in OUT or seen in an earlier input are dropped, and the survivors
 * get ids in key order, so the ids do not depend on how a sweep was split
 * into shards; then each input is copied in one transaction (SQLite cannot
 * attach inside a transaction). Runs without a key (from `gpumemsim run`)
 * are always copied, after the keyed ones.
 */
int store_merge(struct store *s, const char *const *inputs, size_t ninputs,
		struct store_merge_counts *c, char *err, size_t errlen)
{
	char sql[1024];
	int ret = -1, attached = 0;
	int64_t n;
	memset(c, 0, sizeof *c);
	if (ensure_keys(s, err, errlen) < 0)
		return -1;
	if (exec(s, "DROP TABLE IF EXISTS temp.merge_plan;"
		 "CREATE TEMP TABLE merge_plan(src INTEGER NOT NULL, old_id INTEGER NOT NULL,"
		 " key TEXT, addresses TEXT, s_crc INTEGER, s_path TEXT, s_policy TEXT,"
		 " s_conf TEXT, s_cap INTEGER, new_id INTEGER);"
		 "CREATE INDEX temp.merge_plan_by_src ON merge_plan(src, old_id);", err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < ninputs; i++) {
		int has_keys = 0;
		if (attach_input(s, inputs[i], &has_keys, err, errlen) < 0)
			goto out;
		attached = 1;
		snprintf(sql, sizeof sql,
			 "INSERT INTO temp.merge_plan(src, old_id, key, addresses, s_crc, s_path,"
			 " s_policy, s_conf, s_cap) SELECT %zu, r.id, %s, r.trace_crc32, r.trace_path,"
			 " r.policy, r.conf, r.capacity FROM gsrc.runs r %s ORDER BY r.id", i,
			 has_keys ? "k.key, k.addresses" : "NULL, NULL",
			 has_keys ? "LEFT JOIN gsrc.run_keys k ON k.run_id=r.id" : "");
		if (exec(s, sql, err, errlen) < 0)
			goto out;
		if (exec(s, "DETACH gsrc", err, errlen) < 0)
			goto out;
		attached = 0;
	}
	if (query_int(s, "SELECT count(*) FROM temp.merge_plan", &n, err, errlen) < 0)
		goto out;
	c->runs_in = (uint64_t)n;
	if (exec(s, "DELETE FROM temp.merge_plan WHERE key IN (SELECT key FROM main.run_keys);"
		 "DELETE FROM temp.merge_plan WHERE key IS NOT NULL AND rowid NOT IN"
		 " (SELECT min(rowid) FROM temp.merge_plan WHERE key IS NOT NULL GROUP BY key);"
		 "UPDATE temp.merge_plan SET new_id = b.base + m.rn FROM"
		 " (SELECT rowid AS pr, row_number() OVER (ORDER BY key IS NULL, key, s_crc,"
		 "  s_path, s_policy, s_conf, s_cap, src, old_id) AS rn FROM temp.merge_plan) AS m,"
		 " (SELECT coalesce(max(id), 0) AS base FROM main.runs) AS b"
		 " WHERE m.pr = merge_plan.rowid;", err, errlen) < 0)
		goto out;
	if (query_int(s, "SELECT count(*) FROM temp.merge_plan", &n, err, errlen) < 0)
		goto out;
	c->copied = (uint64_t)n;
	c->duplicates = c->runs_in - c->copied;
	for (size_t i = 0; i < ninputs; i++) {
		int has_keys;
		if (attach_input(s, inputs[i], &has_keys, err, errlen) < 0)
			goto out;
		attached = 1;
		if (copy_input(s, i, err, errlen) < 0)
			goto out;
		if (exec(s, "DETACH gsrc", err, errlen) < 0)
			goto out;
		attached = 0;
	}
	ret = 0;
out:
	if (attached)
		sqlite3_exec(s->db, "DETACH gsrc", NULL, NULL, NULL);
	sqlite3_exec(s->db, "DROP TABLE IF EXISTS temp.merge_plan", NULL, NULL, NULL);
	return ret;
}

/* WAL with synchronous=NORMAL stays consistent through a crash or power
 * loss; only the last commits may roll back, which a resumable sweep simply
 * runs again. It saves an fsync per run. */
int store_relaxed_sync(struct store *s, char *err, size_t errlen)
{
	return exec(s, "PRAGMA synchronous=NORMAL", err, errlen);
}

void store_remove_files(const char *path)
{
	static const char *const suffixes[] = {"", "-wal", "-shm"};
	size_t n = strlen(path) + 5;
	char *buf = malloc(n);
	for (size_t i = 0; buf && i < 3; i++) {
		snprintf(buf, n, "%s%s", path, suffixes[i]);
		unlink(buf);
	}
	if (!buf)
		unlink(path);
	free(buf);
}
