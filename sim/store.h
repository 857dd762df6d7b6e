/*
 * store.h: run results in SQLite. The only file that includes sqlite3.h is
 * store.c. Schema (versioned, documented in docs/schema.md): one row per run
 * in `runs`, its labels, the policy's own stats, a downsampled timeline and
 * notable events, what was live at the peak (peak_live) and the top-level
 * NVTX ranges (ranges). One transaction per run, WAL journal; a failed run writes
 * nothing.
 */
#ifndef SIM_STORE_H
#define SIM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define STORE_SCHEMA_VERSION 1

struct store;

/* Open or create PATH; NULL with ERR on failure (unwritable, not a gpumemsim
 * database, newer schema). */
struct store *store_open(const char *path, char *err, size_t errlen);

/* Save one run in one transaction; *RUN_ID gets its id. -1 with ERR. */
int store_save_run(struct store *s, const struct sim_result *r, const char *tool_version,
		   int64_t *run_id, char *err, size_t errlen);

/*
 * Read-only query for reports: run SQL (one statement, parameters bound as
 * text from PARAMS) and call ROW for each row with its columns as text (NULL
 * for SQL NULL). ROW returns non-zero to stop. Returns the number of rows, or
 * -1 with ERR.
 */
typedef int (*store_row_fn)(void *ctx, int ncols, const char *const *cols);
int store_query(struct store *s, const char *sql, const char *const *params, int nparams,
		store_row_fn row, void *ctx, char *err, size_t errlen);

/*
 * Keyed runs (sweeps): table run_keys(run_id, key UNIQUE, addresses), made
 * on first use. store_run_key_exists says whether KEY is stored.
 * store_save_keyed_run saves the run and its key in one transaction unless
 * the key is already there (*DUPLICATE = 1, nothing written), even when
 * another process races for the same key. -1 with ERR.
 */
int store_run_key_exists(struct store *s, const char *key, int *found, char *err, size_t errlen);
int store_save_keyed_run(struct store *s, const struct sim_result *r, const char *tool_version,
			 const char *key, const char *addresses, int64_t *run_id, int *duplicate,
			 char *err, size_t errlen);

/*
 * Copy every run of the databases INPUTS (with labels, stats, timeline,
 * events, keys) into S, skipping keys S already has or an earlier input
 * gave. New ids follow key order (runs without a key after, by trace,
 * policy, conf, capacity), so the result does not depend on how a sweep was
 * sharded. One transaction per input. -1 with ERR naming the file.
 */
struct store_merge_counts {
	uint64_t runs_in;      /* runs in all inputs */
	uint64_t copied;       /* runs added to S */
	uint64_t duplicates;   /* skipped: key already present */
};
int store_merge(struct store *s, const char *const *inputs, size_t ninputs,
		struct store_merge_counts *c, char *err, size_t errlen);

/* For bulk writers (sweep): no fsync per commit (PRAGMA synchronous=NORMAL
 * under WAL). The database stays consistent after a crash or power loss;
 * the last few runs may be lost, never half-stored. -1 with ERR. */
int store_relaxed_sync(struct store *s, char *err, size_t errlen);

void store_close(struct store *s);

/* Delete the database file PATH and its WAL companions (-wal, -shm): what a
 * command does with a database it created when its run fails. */
void store_remove_files(const char *path);

#endif /* SIM_STORE_H */
