/*
 * cmd_capture.c: `gpumemsim capture`, which runs an unmodified CUDA program
 * with the CUPTI capture library injected: the arguments and the usage here;
 * the environment, the program's process, its exit status and the list of
 * traces written are the launcher's (capture/launcher.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/gpumemsim.h"
#include "cli.h"

/* Indices into capture_opts, for the parse loop. */
enum { CO_OUTPUT, CO_LABEL, CO_NO_LINKS, CO_API, CO_NO_SOURCE, CO_RECORD, CO_SYNCS, CO_PAUSE };

static const struct cli_opt capture_opts[] = {
	[CO_OUTPUT] = {"-o|--output", "FILE", "trace to write (an existing FILE is replaced)"},
	[CO_LABEL] = {"--label", "KEY=VALUE", "add a label to the trace header (repeatable)"},
	[CO_NO_LINKS] = {"--no-links", NULL, "do not record kernel-to-buffer links (less overhead)"},
	[CO_API] = {"--api", "MODE", "how host API calls are timed: callbacks (default: only the\n"
				     "calls the trace keeps), activity (CUPTI records every call:\n"
				     "slower), off (no API records, no step-time what-ifs)"},
	[CO_NO_SOURCE] = {"--no-source", NULL,
			  "do not ask CUPTI which library made each allocation: it\n"
			  "slows every allocation call (use for step-time captures\n"
			  "of programs that allocate per tensor)"},
	[CO_RECORD] = {"--record", "LIST", "what to record, comma-separated: kernels, memory, copies,\n"
					   "syncs, nvtx, all (default all; fewer, less overhead)"},
	[CO_SYNCS] = {"--syncs", "MODE", "how synchronisations are recorded: callbacks (on the sync\n"
					 "calls) or activity (CUPTI's SYNCHRONIZATION records)"},
	[CO_PAUSE] = {"--pause-at-step", "K", "from the NVTX range `step K` on, record only NVTX ranges:\n"
					      "those steps run uncaptured and measure what the capture\n"
					      "cost, which `run --timing` then takes out (docs/timing.md)"},
	CLI_OPT_END,
};

static void capture_usage(FILE *f)
{
	cli_usage(f,
		  "capture [-o FILE] [--label KEY=VALUE]... [--no-links] [--api MODE]\n"
		  "                         [--no-source] [--record LIST] [--syncs MODE]\n"
		  "                         [--pause-at-step K] -- CMD [ARGS]",
		  "Run CMD with the CUPTI capture library injected and write one trace per\n"
		  "process that does CUDA work (kernels, copies, allocations): the first to\n"
		  "FILE (default " CAPTURE_DEFAULT_OUT "), others to FILE with their pid before\n"
		  "the .gz (FILE.PID without .gz), labelled capture_process=root|child.\n"
		  "gzip when FILE ends in .gz. CMD's exit status is passed through.\n"
		  "\n",
		  capture_opts,
		  "\n"
		  "environment: GPUMEMSIM_CAPTURE_LIB  the library (default: " CAPTURE_LIB_NAME "\n"
		  "             next to the gpumemsim binary; build it with `make capture`)\n"
		  "             GPUMEMSIM_CAPTURE_FLUSH_MS, GPUMEMSIM_CAPTURE_LAG_MS: see capture/README.md\n");
}

/* `gpumemsim capture ... -- CMD`: see capture_usage(). */
int cmd_capture(int argc, char **argv)
{
	const char *out_arg = CAPTURE_DEFAULT_OUT;
	char *labels = NULL;
	size_t labels_len = 0;
	int links = 1, source = 1, i, rc = 1;
	const char *api = "callbacks", *record = "all", *syncs = NULL, *pause = NULL;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct cli_opt *opt = cli_opt_match(capture_opts, a);
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (cli_is_help(a)) {
			capture_usage(stdout);
			rc = 0;
			goto out;
		} else if (opt == &capture_opts[CO_OUTPUT]) {
			if (++i >= argc) {
				fprintf(stderr, "gpumemsim capture: %s needs a file\n", a);
				rc = EXIT_USAGE;
				goto out;
			}
			out_arg = argv[i];
		} else if (opt == &capture_opts[CO_LABEL]) {
			const char *kv = ++i < argc ? argv[i] : NULL;
			if (!cli_label_ok(kv)) {
				fprintf(stderr, "gpumemsim capture: --label wants KEY=VALUE (a key without "
						"spaces, one line), got '%s'\n", kv ? kv : "");
				rc = EXIT_USAGE;
				goto out;
			}
			size_t l = strlen(kv);
			char *n = realloc(labels, labels_len + l + 2);
			if (!n) {
				fprintf(stderr, "gpumemsim capture: out of memory\n");
				goto out;
			}
			labels = n;
			memcpy(labels + labels_len, kv, l);
			labels_len += l;
			labels[labels_len++] = '\n';
			labels[labels_len] = '\0';
		} else if (opt == &capture_opts[CO_NO_LINKS]) {
			links = 0;
		} else if (opt == &capture_opts[CO_NO_SOURCE]) {
			source = 0;
		} else if (opt == &capture_opts[CO_RECORD]) {
			record = ++i < argc ? argv[i] : "";
			unsigned bits;
			if (cap_record_parse(record, &bits) < 0) {
				fprintf(stderr, "gpumemsim capture: --record wants a comma-separated list "
						"of kernels, memory, copies, syncs, nvtx, all; got '%s'\n", record);
				rc = EXIT_USAGE;
				goto out;
			}
		} else if (opt == &capture_opts[CO_SYNCS]) {
			syncs = ++i < argc ? argv[i] : "";
			if (strcmp(syncs, "callbacks") && strcmp(syncs, "activity")) {
				fprintf(stderr, "gpumemsim capture: --syncs wants callbacks or activity, "
						"got '%s'\n", syncs);
				rc = EXIT_USAGE;
				goto out;
			}
		} else if (opt == &capture_opts[CO_PAUSE]) {
			pause = ++i < argc ? argv[i] : "";
			if (!*pause || strspn(pause, "0123456789") != strlen(pause) || strlen(pause) > 6) {
				fprintf(stderr, "gpumemsim capture: --pause-at-step wants a step number "
						"(0 to 999999), got '%s'\n", pause);
				rc = EXIT_USAGE;
				goto out;
			}
		} else if (opt == &capture_opts[CO_API]) {
			api = ++i < argc ? argv[i] : "";
			if (strcmp(api, "callbacks") && strcmp(api, "activity") && strcmp(api, "off")) {
				fprintf(stderr, "gpumemsim capture: --api wants callbacks, activity or off, "
						"got '%s'\n", api);
				rc = EXIT_USAGE;
				goto out;
			}
		} else {
			fprintf(stderr, "gpumemsim capture: unknown option '%s' (the program goes after --)\n", a);
			capture_usage(stderr);
			rc = EXIT_USAGE;
			goto out;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "gpumemsim capture: no program to run (gpumemsim capture [options] -- CMD [ARGS])\n");
		rc = EXIT_USAGE;
		goto out;
	}
	struct capture_opts o = {out_arg, labels, links, source, api, record, syncs, pause};
	rc = capture_launch(&o, argv + i);
out:
	free(labels);
	return rc;
}
