/*
 * cli_util.c: small helpers every subcommand uses.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../include/gpumemsim.h"

/* Sizes as people read them: binary units, GiB for anything over 1 GiB. */
int cli_label_ok(const char *kv)
{
	const char *eq = kv ? strchr(kv, '=') : NULL;
	const char *sp = kv ? strchr(kv, ' ') : NULL;
	return eq && eq != kv && !strpbrk(kv, "\n\r") && !(sp && sp < eq);
}

int cli_is_help(const char *arg)
{
	return arg && (!strcmp(arg, "-h") || !strcmp(arg, "--help"));
}

int cli_take_value(const char *cmd, int argc, char **argv, int *i, const char **v)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "%s: %s needs a value\n", cmd, argv[*i]);
		return -1;
	}
	*v = argv[++*i];
	return 0;
}

int cli_take_opt(const char *cmd, const struct cli_opt *opts, int argc, char **argv, int *i,
		 const char **v)
{
	const struct cli_opt *d = cli_opt_match(opts, argv[*i]);
	*v = NULL;
	return d && d->arg ? cli_take_value(cmd, argc, argv, i, v) : 0;
}

int cli_parse_addresses(const char *cmd, const char *v, int *out)
{
	if (!strcmp(v, "synthetic")) {
		*out = DEVICE_ADDR_SYNTHETIC;
	} else if (!strcmp(v, "recorded")) {
		*out = DEVICE_ADDR_RECORDED;
	} else {
		fprintf(stderr, "gpumemsim %s: --addresses '%s': expected synthetic or recorded\n",
			cmd, v);
		return EXIT_USAGE;
	}
	return 0;
}

int cli_parse_xla_requests(const char *cmd, const char *v, int *out)
{
	if (!strcmp(v, "auto")) {
		*out = SIM_XLA_AUTO;
	} else if (!strcmp(v, "on")) {
		*out = SIM_XLA_ON;
	} else if (!strcmp(v, "off")) {
		*out = SIM_XLA_OFF;
	} else {
		fprintf(stderr, "gpumemsim %s: --xla-requests '%s': expected auto, on or off\n",
			cmd, v);
		return EXIT_USAGE;
	}
	return 0;
}

int cli_parse_timeline_points(const char *cmd, const char *v, uint32_t *out)
{
	char *end;
	unsigned long n = strtoul(v, &end, 10);
	if (*end || !*v || n < 1 || n > 1000000) {
		fprintf(stderr, "gpumemsim %s: --timeline-points '%s': expected 1..1000000\n", cmd, v);
		return EXIT_USAGE;
	}
	*out = (uint32_t)n;
	return 0;
}

/* Width of "NAME ARG" as printed in the option list. */
static size_t opt_width(const struct cli_opt *o)
{
	return strlen(o->name) + (o->arg ? 1 + strlen(o->arg) : 0);
}

void cli_usage(FILE *f, const char *synopsis, const char *intro, const struct cli_opt *opts,
	       const char *outro)
{
	size_t w = 0;
	fprintf(f, "usage: gpumemsim %s\n\n", synopsis);
	if (intro)
		fputs(intro, f);
	for (const struct cli_opt *o = opts; o && o->name; o++)
		if (opt_width(o) > w)
			w = opt_width(o);
	for (const struct cli_opt *o = opts; o && o->name; o++) {
		int n = fprintf(f, "  %s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "%*s", (int)(w + 2 - (size_t)(n - 2)) + 1, "");
		for (const char *h = o->help; *h; h++) {
			fputc(*h, f);
			if (*h == '\n')
				fprintf(f, "%*s", (int)w + 5, "");
		}
		fputc('\n', f);
	}
	if (outro)
		fputs(outro, f);
}

const struct cli_opt *cli_opt_match(const struct cli_opt *opts, const char *arg)
{
	size_t la = strlen(arg);
	for (const struct cli_opt *o = opts; o && o->name; o++) {
		for (const char *p = o->name; *p;) {
			size_t l = strcspn(p, "|");
			if (l == la && !strncmp(p, arg, l))
				return o;
			p += l + (p[l] == '|');
		}
	}
	return NULL;
}

/* "4.8TB/s", "900GB/s", "1.5TiB/s", "3e12" (bytes/s, at least 1 MB/s); 0 or -1. */
int cli_parse_bandwidth(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || !(v > 0) || v > 1e16)
		return -1;
	static const struct { const char *u; double m; } units[] = {
		{"", 1}, {"B/s", 1}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12},
		{"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0},
		{"TiB/s", 1099511627776.0},
	};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (!strcmp(end, units[i].u)) {
			*out = v * units[i].m;
			return *out >= 1e6 ? 0 : -1;
		}
	}
	return -1;
}

double cli_change_pct(uint64_t after, uint64_t before)
{
	return before ? 100.0 * ((double)after - (double)before) / (double)before : 0.0;
}

const char *cli_size_change(uint64_t to, uint64_t from, char *buf, size_t len)
{
	char b[32];
	if (to == from)
		snprintf(buf, len, "0 B");
	else
		snprintf(buf, len, "%s%s", to > from ? "+" : "-",
			 size_fmt(to > from ? to - from : from - to, b, sizeof b));
	return buf;
}

int cli_figure_writable(const char *cmd, const char *opt, const char *figure)
{
	char dir[4096];
	const char *slash = strrchr(figure, '/');
	if (!plot_gnuplot_available()) {
		fprintf(stderr, "%s: %s %s: gnuplot not found (install gnuplot-nox)\n", cmd, opt, figure);
		return -1;
	}
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - figure) + 1 : 1, slash ? figure : ".");
	if (access(dir, W_OK) != 0) {
		fprintf(stderr, "%s: %s %s: cannot write in %s\n", cmd, opt, figure, dir);
		return -1;
	}
	return 0;
}
