/*
 * cmd_plot.c: `gpumemsim plot KIND`: one figure from the results database,
 * drawn by gnuplot (plots/plot.c has the figures' conventions, plots/plot_KIND.c
 * each figure).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../include/gpumemsim.h"

static const struct cli_opt plot_opts[] = {
	{"--db", "FILE", "results database (default " CLI_DEFAULT_DB ")"},
	{"--where", "SQL", "an SQL condition on the runs table, passed to SQLite\n"
			   "as is (e.g. \"policy='pytorch'\"): one expression, no ';'\n"
			   "or comments; the database is a local file you own"},
	{"--label", "KEY=VALUE", "only runs whose trace has this label (model=resnet18)"},
	{"-o", "FILE", "the figure, .png or .svg (written only on success)"},
	{"--data-dir", "DIR", "keep the gnuplot script and data files in DIR"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "plot KIND [--db results.db] [--where SQL] [--label KEY=VALUE]\n"
		     "                      -o FILE.png|FILE.svg [--data-dir DIR]",
		  "One figure from the stored runs (the latest run of each trace, policy,\n"
		  "setting and capacity among those selected), drawn by gnuplot: PNG\n"
		  "(1200x700) or SVG by the extension. Sizes in GiB, times in ms (s for\n"
		  "runs over 10 s).\n\n"
		  "kinds:\n"
		  "  timeline  allocated (dashed) and reserved (solid) over simulated time,\n"
		  "            one trace, one line per policy/setting, first OOMs marked\n"
		  "  batch     peak reserved against the `batch` label, one model, one line\n"
		  "            per setting, the floor, non-monotonic points circled\n"
		  "  frag      fragmentation (1 - peak allocated / peak reserved) per setting,\n"
		  "            grouped by trace\n"
		  "  compare   one trace: peak reserved per setting against the floor (the\n"
		  "            optimal policy's peak, else the peak of live requests) and\n"
		  "            device allocation counts\n"
		  "  timeline  also shades the first run's NVTX phases (forward, backward,\n"
		  "            optimizer, other top-level ranges) and marks step starts\n"
		  "  pareto    predicted step time (`run --timing`) against peak reserved,\n"
		  "            one point per setting, the Pareto front per trace; runs\n"
		  "            without a step time are left out with a note\n"
		  "  live      what is live at each run's peak reserved, by kind (weights,\n"
		  "            optimizer state, activations, gradients, workspaces; heuristics\n"
		  "            from NVTX ranges) and the largest layers of the first run\n\n"
		  "The device capacity line is drawn when it is below twice the highest value\n"
		  "shown; a run far above the rest (e.g. BFC preallocating the device) is\n"
		  "clipped and named in the key with its value.\n\n",
		  plot_opts, NULL);
}

/* Parse the shared selection options; returns 1 if ARGV[*I] was one, 0 if
 * not, -1 on a bad value (message printed). */
static int parse_select(int argc, char **argv, int *i, struct plot_select *sel,
			char *labelbuf, size_t lblen)
{
	const char *o = argv[*i];
	if (strcmp(o, "--where") && strcmp(o, "--label"))
		return 0;
	const char *v;
	if (cli_take_value("gpumemsim plot", argc, argv, i, &v) < 0)
		return -1;
	if (!strcmp(o, "--where")) {
		sel->where = v;
		return 1;
	}
	char *eq;
	snprintf(labelbuf, lblen, "%s", v);
	eq = strchr(labelbuf, '=');
	if (!eq || eq == labelbuf) {
		fprintf(stderr, "gpumemsim plot: --label '%s': expected KEY=VALUE\n", v);
		return -1;
	}
	*eq = 0;
	sel->label_key = labelbuf;
	sel->label_value = eq + 1;
	return 1;
}

int cmd_plot(int argc, char **argv)
{
	const char *db = CLI_DEFAULT_DB, *kind_name = NULL;
	char labelbuf[512], err[1024];
	struct plot_request req = {0};
	for (int i = 1; i < argc; i++) {
		int r;
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if ((r = parse_select(argc, argv, &i, &req.sel, labelbuf, sizeof labelbuf))) {
			if (r < 0)
				return EXIT_USAGE;
		} else if (!strcmp(argv[i], "--db") && i + 1 < argc) {
			db = argv[++i];
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			req.out = argv[++i];
		} else if (!strcmp(argv[i], "--data-dir") && i + 1 < argc) {
			req.data_dir = argv[++i];
		} else if (argv[i][0] != '-' && !kind_name) {
			kind_name = argv[i];
		} else {
			fprintf(stderr, "gpumemsim plot: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (!kind_name || !req.out) {
		fprintf(stderr, "gpumemsim plot: %s\n", !kind_name ? "which KIND?" : "-o FILE is required");
		usage(stderr);
		return EXIT_USAGE;
	}
	int k = plot_kind_from_name(kind_name);
	if (k < 0) {
		fprintf(stderr, "gpumemsim plot: unknown kind '%s' (known: timeline, batch, frag, "
			"compare, pareto, live)\n", kind_name);
		return EXIT_USAGE;
	}
	req.kind = k;
	if (plot_format_from_path(req.out) < 0) {
		fprintf(stderr, "gpumemsim plot: -o %s: the name must end in .png or .svg\n", req.out);
		return EXIT_USAGE;
	}
	if (req.sel.where && plot_check_where(req.sel.where, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim plot: %s\n", err);
		return 1;
	}
	if (access(db, R_OK) != 0) {
		fprintf(stderr, "gpumemsim plot: %s: no such results database (run `gpumemsim run` "
			"first)\n", db);
		return 1;
	}
	struct store *s = store_open(db, err, sizeof err);
	if (!s) {
		fprintf(stderr, "gpumemsim plot: %s\n", err);
		return 1;
	}
	int rc = plot_make(s, &req, err, sizeof err);
	store_close(s);
	if (rc < 0) {
		fprintf(stderr, "gpumemsim plot %s: %s\n", kind_name, err);
		return 1;
	}
	return 0;
}
