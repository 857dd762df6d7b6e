/*
 * trace_names.c: the one-letter record tags and the names of enum values,
 * in one place so the reader, the writer, `trace cat` and `trace stats`
 * can never disagree about how a record or a control is spelled.
 */
#include <string.h>

#include "trace.h"

static const char rec_tags[TREC_COUNT] = {'a', 'f', 'k', 'c', 'm', 'y', 'r', 'p', 'x', 'g'};

static const char *const rec_names[TREC_COUNT] = {
	"alloc", "free", "kernel", "memcpy", "memset",
	"sync", "range", "api", "control", "segment",
};

static const char *const control_names[TCTL_COUNT] = {"empty_cache", "oom", "step"};

static const char *const segment_names[TSEG_COUNT] = {"alloc", "free", "map", "unmap"};

/* The letter that starts a record's line; '?' for a type out of range so a
 * corrupted value prints visibly instead of crashing. */
char trace_rec_tag(enum trace_rec_type t)
{
	if ((unsigned)t >= TREC_COUNT)
		return '?';
	return rec_tags[t];
}

/* A word for the record type, as stats and error messages use it. */
const char *trace_rec_name(enum trace_rec_type t)
{
	if ((unsigned)t >= TREC_COUNT)
		return "unknown";
	return rec_names[t];
}

/* The spelling of an 'x' record's what field (the format uses these words). */
const char *trace_control_name(uint32_t kind)
{
	if (kind >= TCTL_COUNT)
		return "unknown";
	return control_names[kind];
}

/* The spelling of a 'g' record's op field. */
const char *trace_segment_op_name(uint32_t op)
{
	if (op >= TSEG_COUNT)
		return "unknown";
	return segment_names[op];
}

static const char *const copy_names[] = {"unknown", "htod", "dtoh", "dtod", "htoh", "ptop"};

static const char *const sync_names[] = {
	"unknown", "event", "stream_wait_event", "stream", "context",
};

/* The spelling of a 'c' record's kind field. */
const char *trace_copy_kind_name(uint32_t kind)
{
	if (kind >= sizeof copy_names / sizeof copy_names[0])
		return "unknown";
	return copy_names[kind];
}

/* The spelling of a 'y' record's kind field. */
const char *trace_sync_kind_name(uint32_t kind)
{
	if (kind >= sizeof sync_names / sizeof sync_names[0])
		return "unknown";
	return sync_names[kind];
}

int trace_step_number(const char *name, uint64_t *n)
{
	if (!name || strncmp(name, "step ", 5) || !name[5])
		return 0;
	uint64_t v = 0;
	for (const char *p = name + 5; *p; p++) {
		if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*n = v;
	return 1;
}
