/*
 * cmd_whatif.h: what the batch what-if commands (whatif, maxbatch, explain)
 * share: loading the captures (whatif/captures.h) with the message printed,
 * printing the fit report, and the policy named on the command line.
 */
#ifndef CLI_CMD_WHATIF_H
#define CLI_CMD_WHATIF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../include/gpumemsim.h"

/* Load N captures into T; 0, or -1 with the message printed (CMD prefix). */
int whatif_load(const char *cmd, char **paths, size_t n, struct bf_trace **t);

/* The fit report: text on F, or one JSON object on stdout when JSON. T
 * (may be NULL) says how far the prediction at BATCH rests on what did not
 * align. */
void whatif_print_report(const struct bf_report *r, const struct bf_trust *t, uint64_t batch,
			 int json, FILE *f);

/* How misaligned captures are taken (whatif batch, maxbatch). */
struct whatif_align {
	int strict;          /* --strict-align: refuse any misalignment */
	double max_bound;    /* --max-unaligned: largest bf_trust bound given (fraction) */
};
#define WHATIF_ALIGN_DEFAULT {0, 0.05}
/* The option table rows of the alignment options (for --help). */
#define WHATIF_ALIGN_OPTS                                                              \
	{"--max-unaligned", "PCT",                                                     \
	 "refuse a prediction whose peak could move by more than\n"                     \
	 "PCT% (default 5) were the allocations that align with no\n"                   \
	 "other capture (copied from the nearest) to scale with batch"},                \
	{"--strict-align", NULL, "refuse captures that do not align event for event"},  \
	{"--allow-misaligned", NULL, "the same as --max-unaligned 100 (older name)"}
/* ARGV[*I] if it is an alignment option (its value consumed): 1; not one: 0;
 * a bad value: -1 with the message printed (CMD prefix). */
int whatif_align_opt(const char *cmd, int argc, char **argv, int *i, struct whatif_align *a);

struct alloc_policy;

/* Policy NAME, or NULL with "unknown policy" and the known names printed
 * (CMD prefix). In cmd_maxbatch.c. */
const struct alloc_policy *whatif_policy(const char *cmd, const char *name);

/* whatif compile TRACE [-o OUT] [--json] (cmd_whatif_compile.c); ARGV[1] is
 * "compile". */
int cmd_whatif_compile(int argc, char **argv);

#endif /* CLI_CMD_WHATIF_H */
