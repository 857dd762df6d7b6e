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

/* The fit report: text on F, or one JSON object on stdout when JSON. */
void whatif_print_report(const struct bf_report *r, uint64_t batch, int json, FILE *f);

struct alloc_policy;

/* Policy NAME, or NULL with "unknown policy" and the known names printed
 * (CMD prefix). In cmd_maxbatch.c. */
const struct alloc_policy *whatif_policy(const char *cmd, const char *name);

#endif /* CLI_CMD_WHATIF_H */
