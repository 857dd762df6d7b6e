/*
 * sweep.h: many simulations in one command (`gpumemsim sweep`).
 *
 * A sweep is a list of jobs (trace x policy x conf x capacity) in a
 * canonical order. Each job has a key naming everything that decides its
 * result (trace content, policy, conf, resolved capacity, address mode,
 * timeline size, tool version); the results database keeps the key of every
 * run it got from a sweep (table run_keys) so a rerun skips what is stored
 * and never stores a combination twice. Jobs run in forked worker processes
 * (so policies and the engine need not be thread-safe); the parent is the
 * only database writer and saves results in job order, one transaction per
 * run, so the stored rows, ids included, do not depend on -j.
 */
#ifndef SIM_SWEEP_H
#define SIM_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "store.h"

/* What identifies a trace's content, read once before the sweep runs. */
struct sweep_trace {
	char *path;
	uint32_t crc32;
	uint64_t bytes;
	uint64_t total_memory;   /* header's, 0 if absent */
};

struct sweep_job {
	const struct sweep_trace *trace;
	const struct alloc_policy *policy;
	char *conf;              /* "" for the policy's defaults */
	uint64_t capacity;       /* as asked; 0 = the header's total_memory */
	char *key;               /* see sweep_make_key */
};

struct sweep_exec_opts {
	int jobs;                          /* worker processes, >= 1 */
	int progress;                      /* progress bar on stderr */
	enum device_addr_mode addr_mode;
	uint32_t timeline_points;          /* 0 = engine default (512) */
	int timing;                        /* --timing: costs fitted from each trace */
	int allow_incomplete;              /* replay traces cut short (complete = 0) */
	const char *tool_version;
};

struct sweep_counts {
	size_t done;             /* simulated and stored */
	size_t skipped;          /* already stored (by this or another process) */
	size_t failed;           /* sim_run failed or a worker died */
	size_t not_run;          /* left out because the sweep was interrupted */
	int interrupted;         /* the signal (SIGINT/SIGTERM) that stopped it, or 0 */
};

/*
 * Expand trace arguments: a directory gives its *.trace and *.trace.gz
 * files, a pattern with wildcards its matches (each sorted by name), a plain
 * path itself. Duplicates are dropped, first occurrence kept. *OUT is a
 * malloc'd array of malloc'd paths. -1 with ERR when an argument matches
 * nothing.
 */
int sweep_expand_traces(const char *const *args, size_t nargs, char ***out, size_t *nout,
			char *err, size_t errlen);

/* Read TRACE through once for its identity; -1 with ERR naming file:line. */
int sweep_identify_trace(const char *path, struct sweep_trace *t, char *err, size_t errlen);
void sweep_trace_free(struct sweep_trace *t);

/*
 * Check CONF against POLICY without a trace (the policy's init on an empty
 * device): -1 with ERR naming the knob. Lets a sweep refuse a bad knob
 * before anything runs.
 */
int sweep_check_conf(const struct alloc_policy *policy, const char *conf, char *err,
		     size_t errlen);

/* The job's key (malloc'd); NULL when out of memory. Resolves capacity 0
 * to the trace header's total memory so both spellings share one key. */
char *sweep_make_key(const struct sweep_job *j, enum device_addr_mode mode,
		     uint32_t timeline_points, int timing, const char *tool_version);

/* "I/N" with 1 <= I <= N: 0, or -1 when malformed. */
int sweep_parse_shard(const char *s, unsigned *i, unsigned *n);

/* Address mode names as stored ("synthetic", "recorded"). */
const char *sweep_addr_mode_name(enum device_addr_mode m);

/*
 * Run JOBS (already filtered to those not stored) in O->jobs workers and
 * save each result with its key into ST, in job order. Failed runs are
 * reported on stderr with the engine's message (file:line or knob) and
 * counted. SIGINT/SIGTERM stop handing out work, drop runs in flight, save
 * the finished ones and return with C->interrupted set. Returns 0, or -1
 * with ERR on a database error (nothing partial is stored either way).
 */
int sweep_execute(const struct sweep_job *jobs, size_t njobs, struct store *st,
		  const struct sweep_exec_opts *o, struct sweep_counts *c, char *err,
		  size_t errlen);

/* Serialise a result for the pipe from a worker; the decoder builds a
 * result that sim_result_free releases. 0 or -1 (out of memory, malformed). */
int sweep_encode_result(const struct sim_result *r, char **buf, size_t *len);
int sweep_decode_result(const char *buf, size_t len, struct sim_result *r);

#endif /* SIM_SWEEP_H */
