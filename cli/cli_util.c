/*
 * cli_util.c: small helpers every subcommand uses.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../include/gpumemsim.h"

/* Sizes as people read them: binary units, GiB for anything over 1 GiB. */
int cli_is_help(const char *arg)
{
	return arg && (!strcmp(arg, "-h") || !strcmp(arg, "--help"));
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
