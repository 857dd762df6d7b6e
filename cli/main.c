/*
 * main.c: the gpumemsim command line: one binary, one subcommand per job,
 * `gpumemsim <command> --help` on each.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{"run", cmd_run, "replay a trace under an allocator policy, store the result"},
	{"trace", cmd_trace, "validate, print or summarise a trace (validate|cat|stats)"},
	{"policies", cmd_policies, "list allocator policies and their knobs"},
	{"table", cmd_table, "compare the stored runs: peak per policy and setting, against the floor"},
	{"import", cmd_import, "convert another tool's memory record into a trace"},
	{"capture", cmd_capture, "run a CUDA program under CUPTI and write its trace"},
	{"validate", cmd_validate, "compare replays with recorded runs of real allocators"},
	{"plot", cmd_plot, "draw a figure from the stored runs (gnuplot): timeline, batch, frag, compare"},
	{"report", cmd_report, "write an HTML + Markdown report of the stored runs with figures"},
	{"export", cmd_export, "export a run's timeline for ui.perfetto.dev (export perfetto)"},
	{"sweep", cmd_sweep, "run every combination of traces, policies, confs, capacities in parallel"},
	{"merge", cmd_merge, "combine results databases (the shards of a sweep) into one"},
	{"whatif", cmd_whatif, "synthesise a trace at another batch size from captures (whatif batch)"},
	{"maxbatch", cmd_maxbatch, "largest batch whose simulated peak fits, and why the next fails"},
	{"explain", cmd_explain, "why peak memory moves with batch size: a table of causes (explain batch)"},
	{"fuse", cmd_fuse, "fuse kernel chains by rules: predicted change in peak and kernel time"},
	{"diff", cmd_diff, "what changed between two runs: peaks by kind and by layer, side by side"},
	{NULL, NULL, NULL},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: gpumemsim <command> [options]   (gpumemsim <command> --help)\n\n"
		   "gpumemsim %s: trace-driven simulation of GPU memory behaviour.\n\ncommands:\n",
		GPUMEMSIM_VERSION);
	for (const struct command *c = commands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (cli_is_help(argv[1]) || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("gpumemsim %s\n", GPUMEMSIM_VERSION);
		return 0;
	}
	for (const struct command *c = commands; c->name; c++)
		if (!strcmp(argv[1], c->name))
			return c->fn(argc - 1, argv + 1);
	fprintf(stderr, "gpumemsim: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
