/*
 * cmd_import.c: `gpumemsim import torch-snapshot FILE -o TRACE`: other
 * tools' memory records into gpumemsim traces (traces/import_torch.h).
 */
#include <stdio.h>
#include <string.h>
#include <inttypes.h>

#include "cli.h"
#include "../traces/import_torch.h"

static void import_usage(FILE *f)
{
	fprintf(f,
		"usage: gpumemsim import torch-snapshot FILE -o TRACE [--json META]\n\n"
		"FILE: torch.cuda.memory._snapshot()['device_traces'][dev] as text, one entry a\n"
		"line: 'action addr size stream time_us' (plain or gzip). A FILE ending in\n"
		".pickle (torch.cuda.memory._dump_snapshot()) is converted first with\n"
		"python3 traces/torch_snapshot_to_text.py (no torch needed; override the\n"
		"script with GPUMEMSIM_TORCH_HELPER). NAME.json beside FILE (or --json)\n"
		"adds the GPU, total memory and the labels model, batch, conf, fraction.\n"
		"TRACE is gzip-compressed when it ends in .gz and written atomically.\n");
}

/* Parse the options, convert, say what was recognised. */
int cmd_import(int argc, char **argv)
{
	const char *kind = NULL, *in = NULL, *out = NULL, *json = NULL;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			import_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			out = argv[++i];
		} else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
			json = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "gpumemsim import: unknown option '%s'\n", argv[i]);
			import_usage(stderr);
			return EXIT_USAGE;
		} else if (!kind) {
			kind = argv[i];
		} else if (!in) {
			in = argv[i];
		} else {
			fprintf(stderr, "gpumemsim import: unexpected argument '%s'\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!kind || !in || !out) {
		import_usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(kind, "torch-snapshot")) {
		fprintf(stderr, "gpumemsim import: unknown format '%s' (known: torch-snapshot)\n", kind);
		return EXIT_USAGE;
	}
	char err[1024];
	struct import_torch_stats st;
	if (import_torch_snapshot(in, out, json, &st, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim import: %s\n", err);
		return 1;
	}
	fprintf(stderr, "%s: %" PRIu64 " entries -> %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64
		" segment records, %" PRIu64 " empty_cache, %" PRIu64 " allocator releases, %" PRIu64
		" ooms\n", out, st.entries, st.allocs, st.frees, st.segments, st.empty_caches,
		st.partial_runs, st.ooms);
	return 0;
}
