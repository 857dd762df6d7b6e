/*
 * trace_stats.c: the statistics of a whole trace (see trace_stats.h).
 * Memory stays bounded by the live allocations (u64map), never by the
 * trace's length.
 */
#include "trace_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"

static int stats_graph(struct u64map *graphs, uint32_t graph)
{
	return graph ? u64map_put(graphs, graph, 1) : 0;
}

static int stats_rec(struct trace_stats_result *s, struct u64map *live, struct u64map *graphs,
		     const struct trace_rec *rec)
{
	uint64_t old;
	s->count[rec->type]++;
	s->records++;
	if (!s->any) {
		s->first = rec->start;
		s->any = 1;
	}
	if (rec->end > s->last_end)
		s->last_end = rec->end;
	if (rec->start > s->last_end)
		s->last_end = rec->start;
	switch (rec->type) {
	case TREC_ALLOC:
		s->alloc_bytes += rec->u.mem.bytes;
		if (rec->u.mem.addr == U64MAP_EMPTY)
			break;
		if (u64map_get(live, rec->u.mem.addr, &old))
			s->live_bytes -= old; /* reallocated without a free: replace */
		if (u64map_put(live, rec->u.mem.addr, rec->u.mem.bytes) < 0)
			return -1;
		s->live_bytes += rec->u.mem.bytes;
		if (s->live_bytes > s->peak_live_bytes) {
			s->peak_live_bytes = s->live_bytes;
			s->peak_at = rec->start;
		}
		break;
	case TREC_FREE:
		if (rec->u.mem.addr != U64MAP_EMPTY && u64map_del(live, rec->u.mem.addr, &old))
			s->live_bytes -= old;
		else
			s->unmatched_frees++;
		break;
	case TREC_KERNEL:
		s->links += rec->u.kernel.nlinks;
		if (rec->u.kernel.graph)
			s->graph_kernels++;
		return stats_graph(graphs, rec->u.kernel.graph);
	case TREC_MEMCPY:
	case TREC_MEMSET:
		return stats_graph(graphs, rec->u.copy.graph);
	default:
		break;
	}
	return 0;
}


void trace_stats_free(struct trace_stats_result *out)
{
	free(out->path);
	trace_header_free(&out->header);
	memset(out, 0, sizeof *out);
}

int trace_stats(const char *path, struct trace_stats_result *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	struct trace_reader *r = trace_reader_start(path, err, errlen);
	if (!r)
		return -1;
	struct trace_stats_result *s = out;
	struct u64map live, graphs;
	u64map_init(&live);
	u64map_init(&graphs);
	struct trace_rec rec;
	int rc, ret = 0;
	const char *rp = trace_reader_path(r);
	if ((rp && !(s->path = strdup(rp))) ||
	    trace_header_copy(&s->header, trace_reader_header(r)) < 0) {
		snprintf(err, errlen, "%s: out of memory", path);
		ret = -1;
		goto out;
	}
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		if (stats_rec(s, &live, &graphs, &rec) < 0) {
			snprintf(err, errlen, "%s: out of memory", path);
			ret = -1;
			goto out;
		}
	}
	if (rc < 0 && rc != TRACE_ERR_TRUNCATED) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		ret = -1;
		goto out;
	}
	s->complete = rc == TRACE_EOF && trace_reader_trailer(r)->present;
	if (rc == TRACE_ERR_TRUNCATED) {
		s->truncated = 1;
		snprintf(s->truncation, sizeof s->truncation, "%s", trace_reader_error(r));
	}
	s->graphs = graphs.count;
	s->duration_ns = s->any ? s->last_end - s->first : 0;
	s->strings = trace_reader_nstrings(r);
	s->dropped = trace_reader_trailer(r)->dropped;
	s->crc32 = trace_reader_crc32(r);
	s->text_bytes = trace_reader_bytes(r);
out:
	if (ret < 0)
		trace_stats_free(s);
	u64map_free(&live);
	u64map_free(&graphs);
	trace_reader_close(r);
	return ret;
}
