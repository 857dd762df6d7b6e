/*
 * import_torch.h: PyTorch memory snapshots (torch.cuda.memory._snapshot()'s
 * device_traces) into gpumemsim traces.
 *
 * Input is the text form, one entry a line: `action addr size stream
 * time_us` (plain or gzip; traces/torch_snapshot_to_text.py turns a pickle
 * from torch.cuda.memory._dump_snapshot() into it). The importer keeps the
 * framework's request stream ('a' for alloc, 'f' for free_completed), the
 * real allocator's decisions as ground truth ('g' for segment_*), and
 * recovers the empty_cache() calls the snapshot does not record
 * ('x empty_cache': a run of segment releases that frees every wholly free
 * segment). NAME.json beside the input (the recorded runs' metadata) adds
 * the GPU, total memory and the labels model, batch, img, conf, fraction.
 */
#ifndef TRACES_IMPORT_TORCH_H
#define TRACES_IMPORT_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

struct import_torch_stats {
	uint64_t entries;        /* input lines with an entry */
	uint64_t allocs, frees;  /* 'a' and 'f' records written */
	uint64_t segments;       /* 'g' records written */
	uint64_t empty_caches;   /* runs recognised as empty_cache() */
	uint64_t partial_runs;   /* runs left to the allocator (GC, release before OOM) */
	uint64_t ooms;
};

/*
 * Convert IN (text form, plain or gzip; a name ending in .pickle goes
 * through the Python helper first) into the trace OUT (gzip when it ends in
 * .gz), written atomically. JSON: the metadata file, or NULL to look for
 * NAME.json beside IN. STATS may be NULL. Returns 0, or -1 with ERR naming
 * the file and line; OUT is then left untouched.
 */
int import_torch_snapshot(const char *in, const char *out, const char *json,
			  struct import_torch_stats *stats, char *err, size_t errlen);
/* The same with labels of the user's (`import --label`), which replace the
 * metadata's labels of the same key (at most 32). A snapshot without
 * allocation history (no entries) is an error: there is nothing to replay. */
int import_torch_snapshot_labeled(const char *in, const char *out, const char *json,
				  const struct trace_label *extra, size_t nextra,
				  struct import_torch_stats *stats, char *err, size_t errlen);

/* NAME.json beside PATH (".gz" and then ".trace"/".txt"/".pickle" dropped)
 * into BUF; returns 0 when that file exists, else -1. */
int import_torch_json_path(const char *path, char *buf, size_t len);

/* A whole small file into a NUL-terminated malloc'd buffer; NULL on error. */
char *import_torch_slurp(const char *path);

/* Top-level-ish lookups in the recorded runs' flat JSON: the first "KEY":
 * value. A string value is unescaped into OUT; a number is copied as
 * written. 0 when found, -1 when absent or too long. */
int import_torch_json_get(const char *json, const char *key, char *out, size_t len);
/* The same as a number; -1 when absent or not a number. */
int import_torch_json_num(const char *json, const char *key, double *out);

#endif /* TRACES_IMPORT_TORCH_H */
