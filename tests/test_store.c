/*
 * test_store.c: the SQLite results store (sim/store.c): a round trip, a
 * failed save leaving no rows, reopening, and the clear errors for an
 * unwritable path, a foreign file, a foreign database and a newer schema.
 * The test reads the database back with sqlite3 directly, as users do.
 */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/store.h"

static char db_path[64];

static void make_path(void)
{
	snprintf(db_path, sizeof db_path, "/tmp/gpumemsim_store_XXXXXX");
	int fd = mkstemp(db_path);
	cr_assert(fd >= 0);
	close(fd);
	unlink(db_path); /* the store creates it */
}

static void drop_path(void)
{
	char buf[96];
	unlink(db_path);
	snprintf(buf, sizeof buf, "%s-wal", db_path);
	unlink(buf);
	snprintf(buf, sizeof buf, "%s-shm", db_path);
	unlink(buf);
}

static struct trace_label labels[] = {{"batch", "64"}, {"model", "resnet\"50"}};
static struct sim_stat stats[] = {{"num_segments", 3}, {"largest_free_block", -1}};
static struct sim_timeline_point tl[] = {{0, 10, 20}, {1024, 30, 40}};
static struct sim_event evs[] = {{SIM_EV_OOM, 5, 1000, 12, "alloc failed"}};

static void fill(struct sim_result *r)
{
	memset(r, 0, sizeof *r);
	r->trace_path = "t.trace";
	r->trace_crc32 = 0xdeadbeef;
	r->trace_bytes = 1234;
	r->labels = labels;
	r->nlabels = 2;
	r->policy = "cuda_malloc";
	r->conf = "";
	r->capacity = 80ull << 30;
	r->complete = 1;
	r->allocs = 7;
	r->frees = 6;
	r->peak_allocated = 300;
	r->peak_requested = 290;
	r->peak_reserved = 400;
	r->device_allocs = 2;
	r->device_frees = 1;
	r->fragmentation = 0.25;
	r->oom = 1;
	r->num_ooms = 1;
	r->oom_t = 5;
	r->oom_bytes = 1000;
	r->oom_line = 12;
	r->oom_largest_free = -1;
	r->oom_cached_free = 64;
	r->trace_duration_ns = 99;
	r->sim_duration_ns = 100;
	r->stats = stats;
	r->nstats = 2;
	r->timeline = tl;
	r->ntimeline = 2;
	r->events = evs;
	r->nevents = 1;
}

static int64_t q_int(const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t v = -999;
	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_type(st, 0) == SQLITE_NULL ? -12345 : sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void q_text(const char *sql, char *out, size_t len)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	out[0] = '\0';
	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

Test(store, round_trip_and_reopen, .init = make_path, .fini = drop_path)
{
	char err[512], txt[256];
	struct sim_result r;
	int64_t id1 = 0, id2 = 0;
	fill(&r);
	struct store *s = store_open(db_path, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(store_save_run(s, &r, "0.1.0", &id1, err, sizeof err), 0, "%s", err);
	store_close(s);
	s = store_open(db_path, err, sizeof err);
	cr_assert_not_null(s, "reopen: %s", err);
	cr_assert_eq(store_save_run(s, &r, "0.1.0", &id2, err, sizeof err), 0, "%s", err);
	store_close(s);
	cr_assert_eq(id2, id1 + 1);
	cr_assert_eq(q_int("PRAGMA user_version"), STORE_SCHEMA_VERSION);
	cr_assert_eq(q_int("SELECT count(*) FROM runs"), 2);
	cr_assert_eq(q_int("SELECT peak_reserved FROM runs WHERE id=1"), 400);
	cr_assert_eq(q_int("SELECT trace_crc32 FROM runs WHERE id=1"), 0xdeadbeef);
	cr_assert_eq(q_int("SELECT oom_line FROM runs WHERE id=1"), 12);
	cr_assert_eq(q_int("SELECT oom_largest_free FROM runs WHERE id=1"), -12345); /* NULL */
	cr_assert_eq(q_int("SELECT oom_cached_free FROM runs WHERE id=1"), 64);
	cr_assert_eq(q_int("SELECT count(*) FROM run_labels WHERE run_id=2"), 2);
	cr_assert_eq(q_int("SELECT value FROM run_stats WHERE run_id=1 AND name='num_segments'"), 3);
	cr_assert_eq(q_int("SELECT max(reserved) FROM timeline WHERE run_id=1"), 40);
	cr_assert_eq(q_int("SELECT line FROM events WHERE run_id=1 AND kind='oom'"), 12);
	q_text("SELECT labels_json FROM runs WHERE id=1", txt, sizeof txt);
	cr_assert_str_eq(txt, "{\"batch\":\"64\",\"model\":\"resnet\\\"50\"}");
	q_text("SELECT value FROM meta WHERE key='application'", txt, sizeof txt);
	cr_assert_str_eq(txt, "gpumemsim");
	q_text("PRAGMA journal_mode", txt, sizeof txt);
	cr_assert_str_eq(txt, "wal");
	/* identical runs, identical rows apart from the id */
	cr_assert_eq(q_int("SELECT count(*) FROM (SELECT DISTINCT trace_path, trace_crc32, "
			   "labels_json, policy, conf, capacity, peak_reserved, fragmentation, "
			   "oom_t_ns, sim_duration_ns FROM runs)"), 1);
}

Test(store, failed_save_writes_nothing, .init = make_path, .fini = drop_path)
{
	char err[512];
	struct sim_result r;
	struct trace_label bad[] = {{"ok", "1"}, {NULL, "x"}}; /* NOT NULL key fails */
	int64_t id = 0;
	fill(&r);
	struct store *s = store_open(db_path, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(store_save_run(s, &r, "0.1.0", &id, err, sizeof err), 0);
	r.labels = bad;
	err[0] = '\0';
	cr_assert_eq(store_save_run(s, &r, "0.1.0", &id, err, sizeof err), -1);
	cr_assert(err[0]);
	/* the store still works after the rollback */
	r.labels = labels;
	cr_assert_eq(store_save_run(s, &r, "0.1.0", &id, err, sizeof err), 0, "%s", err);
	store_close(s);
	cr_assert_eq(q_int("SELECT count(*) FROM runs"), 2);
	cr_assert_eq(q_int("SELECT count(*) FROM run_labels"), 4);
	cr_assert_eq(q_int("SELECT count(*) FROM timeline"), 4);
}

Test(store, unwritable_path)
{
	char err[512] = "";
	struct store *s = store_open("/nonexistent-gpumemsim-dir/x/results.db", err, sizeof err);
	cr_assert_null(s);
	cr_assert(strstr(err, "/nonexistent-gpumemsim-dir/x/results.db"), "%s", err);
}

Test(store, rejects_foreign_files, .init = make_path, .fini = drop_path)
{
	char err[512] = "";
	FILE *f = fopen(db_path, "w");
	cr_assert_not_null(f);
	fputs("this is not a database, just text that is long enough to have a header....\n"
	      "more text more text more text more text more text more text\n", f);
	fclose(f);
	cr_assert_null(store_open(db_path, err, sizeof err));
	cr_assert(strstr(err, "not a gpumemsim"), "%s", err);
	drop_path();

	sqlite3 *db;
	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "CREATE TABLE other(x)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	err[0] = '\0';
	cr_assert_null(store_open(db_path, err, sizeof err));
	cr_assert(strstr(err, "not a gpumemsim"), "%s", err);
}

Test(store, rejects_newer_schema, .init = make_path, .fini = drop_path)
{
	char err[512] = "";
	struct store *s = store_open(db_path, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	store_close(s);
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	cr_assert_null(store_open(db_path, err, sizeof err));
	cr_assert(strstr(err, "newer"), "%s", err);
	cr_assert(strstr(err, "99"), "%s", err);
}
