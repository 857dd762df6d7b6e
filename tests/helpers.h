/*
 * helpers.h: what the end-to-end tests share: finding the binary, running
 * it, reading what it wrote, writing small traces, temporary names, and the
 * small results database that the plot, report and export tests draw from.
 * Every helper fails the calling test with a Criterion assertion (or skips
 * it, for a missing binary) rather than returning an error to check.
 */
#ifndef TESTS_HELPERS_H
#define TESTS_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "../traces/trace.h"

/* Path of the binary under test ($GPUMEMSIM_BIN); skips the test without it. */
const char *th_bin(void);

/* Run a shell command built from FMT; its exit status, -1 when it did not exit. */
int th_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Run `gpumemsim ARGS` (from directory CD when not NULL) with stdout into
 * OUT and stderr into ERR (relative to CD); asserts it exited, returns its
 * exit status.
 */
int th_run(const char *cd, const char *out, const char *err, const char *args);

/* The whole file at PATH, NUL-terminated, malloc'd; NULL when unreadable. */
char *th_slurp(const char *path);

/* Size of the file at PATH, -1 when it does not exist. */
long th_file_size(const char *path);

/* 1 when TOOL is on the PATH (for tests that need e.g. gnuplot). */
int th_have(const char *tool);

/* A fresh empty file /tmp/gpumemsim_<STEM>_XXXXXX; its name into BUF. */
void th_tmpname(char *buf, size_t len, const char *stem);

/* Like th_tmpname, and the file holds TEXT (a plain-text trace, a rule file). */
void th_tmpfile(char *buf, size_t len, const char *stem, const char *text);

/* Run shell command CMD with stdout and stderr together into OUT (LEN
 * bytes, NUL-terminated, cut when longer); its exit status, -1 when it did
 * not exit. */
int th_capture(const char *cmd, char *out, size_t len);

/* Remove SQLite database PATH with its -wal and -shm files. */
void th_rm_db(const char *path);

/* Write one device alloc or free record (stream 0) at time T. */
void th_mem(struct trace_writer *w, enum trace_rec_type type, uint64_t t, uint64_t addr,
	    uint64_t bytes);

/* An atomic trace writer on PATH, its header written with the labels the
 * batch what-ifs read: model=MODEL (left out when NULL) and batch=BATCH. */
struct trace_writer *th_batch_writer(const char *path, uint64_t batch, const char *model);

struct alloc_policy;

/* Statistic NAME as policy P's stats() emits it for state ST; -1 when absent. */
int64_t th_policy_stat(const struct alloc_policy *p, void *st, const char *name);

/* A trace of model "m" at BATCH: two buffers of MIB MiB each, one kernel. */
void th_write_model_trace(const char *path, const char *batch, uint64_t mib);

/*
 * A temporary directory holding r.db: traces at batch 8 and 16 run under
 * pytorch, cuda_malloc and optimal; the batch-16 pytorch run also at a
 * capacity it exceeds (an OOM).
 */
struct th_results {
	char dir[64], db[128];
};
void th_results_setup(struct th_results *f);
void th_results_teardown(struct th_results *f);

/* A trace built in memory, line by line (printf-style, one line or more
 * per call), counting its records for the `end` trailer: a line that
 * starts with a record type letter and a space is a record. */
struct th_sbuf { char *s; size_t n, cap; unsigned recs; };
void th_sb_printf(struct th_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append "end RECORDS 0". */
void th_sb_end(struct th_sbuf *b);

#endif /* TESTS_HELPERS_H */
