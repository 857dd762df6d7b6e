/*
 * trace_check.h: what `gpumemsim trace validate` checks beyond the reader:
 * allocation lifetimes and kernel links (traces/FORMAT.md, "What `trace
 * validate` adds"). Prints nothing: the verdict, the first warnings and the
 * counts come back in the result.
 */
#ifndef TRACES_TRACE_CHECK_H
#define TRACES_TRACE_CHECK_H

#include <stdint.h>

#define TRACE_CHECK_NOTES 10   /* warnings kept in full; the rest are counted */

struct trace_check_note {
	uint64_t line;
	char text[256];
};

struct trace_check_result {
	int ok;                    /* 1: valid (possibly with warnings) */
	char error[1024];          /* !ok: "FILE:LINE: what is wrong" */
	uint64_t records;          /* event records read */
	int complete;              /* the trace has its 'end' trailer */
	uint64_t warnings;         /* all warnings (links to freed buffers, byte counts,
				    * statics re-registered) */
	uint64_t static_replaced;  /* static allocations re-registered at a live address */
	struct trace_check_note notes[TRACE_CHECK_NOTES];
	uint32_t nnotes;           /* the first warnings, in file order */
};

/* Check the trace at PATH. Returns 0 with RES->ok set either way (a bad
 * trace is a result: RES->error says why), or -1 only when out of memory
 * before anything was read (RES->error says so too). */
int trace_check(const char *path, struct trace_check_result *res);

#endif /* TRACES_TRACE_CHECK_H */
