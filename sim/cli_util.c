/*
 * cli_util.c: small helpers every subcommand uses.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Sizes as people read them: binary units, GiB for anything over 1 GiB. */
const char *cli_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024.0 && u < 4) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, len, "%.2f %s", v, units[u]);
	return buf;
}

int cli_is_help(const char *arg)
{
	return arg && (!strcmp(arg, "-h") || !strcmp(arg, "--help"));
}
