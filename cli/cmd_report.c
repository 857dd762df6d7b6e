/*
 * cmd_report.c: `gpumemsim report --db FILE -o DIR`: the options, then
 * report_write (plots/report.c builds the pages), then the paths of the
 * pages and runs.csv on stdout and, on stderr, how many figures were drawn.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "../include/gpumemsim.h"

static const struct cli_opt report_opts[] = {
	{"--db", "FILE", "results database (default " CLI_DEFAULT_DB ")"},
	{"-o", "DIR", "where the pages go (created if missing)"},
	{"--where", "SQL", "an SQL condition on the runs table, as in `gpumemsim plot`"},
	{"--label", "KEY=VALUE", "only runs whose trace has this label (model=resnet18)"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "report [--db results.db] -o DIR [--where SQL] [--label KEY=VALUE]",
		  "Write DIR/report.html (self-contained: figures inlined), DIR/report.md (its\n"
		  "Markdown twin, figures as DIR/fig-*.png) and DIR/runs.csv (every run, one\n"
		  "row) from the stored runs, grouped by workload and model (the traces'\n"
		  "labels). First the answers per group: best setting per capacity, largest\n"
		  "batch that fits and why the next fails, where memory falls as the batch\n"
		  "grows and what moved, the cost of each setting in time (runs made with\n"
		  "--timing), OOMs by verdict; then every figure (peak against batch, settings\n"
		  "compared, timelines, fragmentation, Pareto, live at the peak), each naming\n"
		  "its capacity. --where and --label select runs as in `gpumemsim plot`.\n"
		  "Figures need gnuplot; without it the pages say so in place of each figure.\n"
		  "docs/report.md describes the report.\n\n",
		  report_opts, NULL);
}

int cmd_report(int argc, char **argv)
{
	const char *db = CLI_DEFAULT_DB, *dir = NULL;
	char labelbuf[512], err[8192];
	struct plot_select sel = {0};
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--db") && i + 1 < argc) {
			db = argv[++i];
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			dir = argv[++i];
		} else if (!strcmp(argv[i], "--where") && i + 1 < argc) {
			sel.where = argv[++i];
		} else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
			snprintf(labelbuf, sizeof labelbuf, "%s", argv[++i]);
			char *eq = strchr(labelbuf, '=');
			if (!eq || eq == labelbuf) {
				fprintf(stderr, "gpumemsim report: --label '%s': expected KEY=VALUE\n",
					argv[i]);
				return EXIT_USAGE;
			}
			*eq = 0;
			sel.label_key = labelbuf;
			sel.label_value = eq + 1;
		} else {
			fprintf(stderr, "gpumemsim report: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (!dir) {
		fprintf(stderr, "gpumemsim report: -o DIR is required\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	struct report_opts o = {.sel = sel};
	struct report_result res;
	int rc = report_write(db, dir, &o, &res, err, sizeof err);
	if (res.no_gnuplot)
		fprintf(stderr, "gpumemsim report: gnuplot not found: the report has no figures\n");
	if (rc < 0) {
		fprintf(stderr, "gpumemsim report: %s\n", err);
		return 1;
	}
	fprintf(stderr, "gpumemsim report: %d runs of %d traces in %d group%s, %d figures drawn, "
		"%d not drawn\n", res.runs, res.traces, res.groups, res.groups == 1 ? "" : "s",
		res.figures, res.figure_notes);
	printf("%s\n%s\n%s\n", res.html_path, res.md_path, res.csv_path);
	return 0;
}
