/*
 * cmd_export.c: `gpumemsim export perfetto`: a simulated memory timeline as
 * a Chrome trace (JSON object format) that ui.perfetto.dev and
 * chrome://tracing open.
 *
 * Two sources, told apart by the first argument:
 * - RUN_ID... (digits): stored runs. The store keeps each run's downsampled
 *   timeline and notable events, not its kernels, so the export holds one
 *   process per run with "allocated" and "reserved" counter tracks and the
 *   events (OOM, peak, empty_cache) as instant events.
 * - TRACE --policy P [--conf C] [--capacity SIZE]: the trace is replayed
 *   now (nothing stored) and its kernels, copies and memsets appear per
 *   stream, NVTX ranges on a host track, beside the replay's counters.
 *   Kernel times are the trace's own (relative to its first record), which
 *   the engine follows unless a synchronisation made the host wait longer.
 * Timestamps are microseconds with nanosecond decimals; counter values are
 * bytes. The file is written as FILE.tmp.PID and renamed on success.
 * plots/perfetto.c writes it; this file parses the arguments and reports.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../include/gpumemsim.h"
#include "cli.h"

#define EXPORT_MAX_RUNS 64

/* Every option the export perfetto parse loop accepts. */
static const struct cli_opt export_opts[] = {
	{"--db", "FILE", "results database of the RUN_IDs (default " CLI_DEFAULT_DB ")"},
	{"-o", "FILE.json", "the Chrome trace to write (required)"},
	{"--policy", "NAME", "allocator policy to replay TRACE under (TRACE only)"},
	{"--conf", "STRING", "the policy's knobs (TRACE only)"},
	{"--capacity", "SIZE", "device memory for the replay, e.g. 80GiB"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "export perfetto RUN_ID... [--db results.db] -o FILE.json\n"
		     "       gpumemsim export perfetto TRACE --policy NAME [--conf STRING]\n"
		     "                                 [--capacity SIZE] -o FILE.json",
		  "Write a Chrome trace (JSON) that ui.perfetto.dev opens.\n"
		  "  RUN_ID...  stored runs (digits): per run, 'allocated' and 'reserved' counter\n"
		  "             tracks (bytes; the stored downsampled timeline, bucket maxima)\n"
		  "             and its events (oom, peak_reserved, empty_cache) as instants.\n"
		  "             The store keeps no kernels: use the TRACE form for those.\n"
		  "  TRACE      replay TRACE under --policy now (nothing stored) and export its\n"
		  "             kernels, copies and memsets per stream and NVTX ranges (times as\n"
		  "             in the trace, from its first record) beside the memory counters.\n"
		  "             A trace whose name is all digits: write it as ./NAME.\n\n",
		  export_opts, NULL);
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

int cmd_export(int argc, char **argv)
{
	const char *db = CLI_DEFAULT_DB, *out = NULL, *policy = NULL, *conf = NULL, *trace = NULL;
	const char *ids[EXPORT_MAX_RUNS];
	int nids = 0;
	uint64_t capacity = 0;
	char err[1024];
	if (argc >= 2 && cli_is_help(argv[1])) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "perfetto")) {
		fprintf(stderr, "gpumemsim export: %s%s%s (known: perfetto)\n",
			argc < 2 ? "which format?" : "unknown format '", argc < 2 ? "" : argv[1],
			argc < 2 ? "" : "'");
		usage(stderr);
		return EXIT_USAGE;
	}
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (cli_is_help(a)) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--db") && i + 1 < argc) {
			db = argv[++i];
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			out = argv[++i];
		} else if (!strcmp(a, "--policy") && i + 1 < argc) {
			policy = argv[++i];
		} else if (!strcmp(a, "--conf") && i + 1 < argc) {
			conf = argv[++i];
		} else if (!strcmp(a, "--capacity") && i + 1 < argc) {
			if (conf_size_with_unit(argv[++i], &capacity) < 0 || !capacity) {
				fprintf(stderr, "gpumemsim export: --capacity '%s': expected a size such "
					"as 80GiB\n", argv[i]);
				return EXIT_USAGE;
			}
		} else if (a[0] != '-' && all_digits(a) && !trace) {
			if (nids == EXPORT_MAX_RUNS) {
				fprintf(stderr, "gpumemsim export: at most %d runs\n", EXPORT_MAX_RUNS);
				return EXIT_USAGE;
			}
			ids[nids++] = argv[i];
		} else if (a[0] != '-' && !trace && !nids) {
			trace = a;
		} else {
			fprintf(stderr, "gpumemsim export perfetto: unexpected argument '%s'\n", a);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (!out || (!trace && !nids) || (trace && !policy) || (nids && (policy || conf))) {
		fprintf(stderr, "gpumemsim export perfetto: %s\n",
			!out ? "-o FILE.json is required"
			: (!trace && !nids) ? "which RUN_ID or TRACE?"
			: trace ? "a TRACE needs --policy" : "--policy/--conf go with a TRACE, not run ids");
		usage(stderr);
		return EXIT_USAGE;
	}
	struct perfetto_trace_opts to = {.trace_path = trace, .policy = policy, .conf = conf,
					 .capacity = capacity};
	int rc = nids ? perfetto_export_runs(db, ids, nids, out, NULL, err, sizeof err)
		      : perfetto_export_trace(&to, out, NULL, err, sizeof err);
	if (rc == PERFETTO_ERR_OUTPUT) {
		fprintf(stderr, "gpumemsim export: %s\n", err);
		return 1;
	}
	if (rc < 0) {
		fprintf(stderr, "gpumemsim export perfetto: %s\n", err);
		return 1;
	}
	return 0;
}
