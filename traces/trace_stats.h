/*
 * trace_stats.h: what `gpumemsim trace stats` reports about a trace:
 * record counts, kernel links, CUDA graphs, bytes allocated, peak live
 * bytes and when, duration, the header and the reader's content identity.
 * Prints nothing: everything comes back in the result.
 */
#ifndef TRACES_TRACE_STATS_H
#define TRACES_TRACE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

struct trace_stats_result {
	char *path;                 /* the path as opened (trace_reader_path) */
	struct trace_header header; /* a copy: its strings and labels are owned here */
	int complete;               /* the trace ends with its 'end' trailer */
	int truncated;              /* the file ends mid-stream (TRACE_ERR_TRUNCATED):
				     * the counts cover the records before it */
	char truncation[1024];      /* truncated: the reader's message, "FILE:LINE: ..." */

	uint64_t count[TREC_COUNT]; /* records per type */
	uint64_t records, links, alloc_bytes;
	uint64_t live_bytes;        /* live at the end (frees matched by address) */
	uint64_t peak_live_bytes, peak_at; /* the peak, and the start (ns) of its 'a' */
	uint64_t unmatched_frees;
	uint64_t graph_kernels;     /* kernels launched from a CUDA graph */
	size_t graphs;              /* distinct graph ids on 'k', 'c' and 'm' records */
	uint64_t first, last_end;   /* first record's start, latest start or end (ns) */
	int any;                    /* at least one record */
	uint64_t duration_ns;       /* any ? last_end - first : 0 */

	uint32_t strings;           /* interned strings ('S' lines) */
	uint64_t dropped;           /* records the producer lost (trailer) */
	uint32_t crc32;             /* CRC-32 of the decompressed text read */
	uint64_t text_bytes;        /* length of the decompressed text read */
};

/*
 * Read the trace at PATH and fill *OUT. Returns 0 (a trace cut short is a
 * result: OUT->complete is 0, OUT->truncated says whether it ended
 * mid-stream), or -1 when the trace cannot be opened or read, or memory
 * runs out: ERR says why ("FILE:LINE: ..." or "FILE: out of memory") and
 * nothing is left to free. After 0, trace_stats_free(OUT) releases it
 * (harmless on a zeroed result).
 */
int trace_stats(const char *path, struct trace_stats_result *out, char *err, size_t errlen);
void trace_stats_free(struct trace_stats_result *out);

#endif /* TRACES_TRACE_STATS_H */
