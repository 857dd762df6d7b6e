/*
 * test_cli_opts.c: the commands' option tables (cli/cli.h): the usage text
 * printed from a table, aliases, continuation lines, lookup.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"

static const struct cli_opt opts[] = {
	{"-o|--output", "FILE", "where to write"},
	{"--json", NULL, "JSON on stdout\nsecond line"},
	CLI_OPT_END,
};

Test(cli_opts, usage_aligns_every_option_from_the_table)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	cli_usage(f, "thing [-o FILE]", "Does a thing.\n", opts, "Exit codes: 0 ok.\n");
	fclose(f);
	cr_assert_str_eq(buf, "usage: gpumemsim thing [-o FILE]\n\n"
			      "Does a thing.\n"
			      "  -o|--output FILE   where to write\n"
			      "  --json             JSON on stdout\n"
			      "                     second line\n"
			      "Exit codes: 0 ok.\n");
	free(buf);
}

Test(cli_opts, match_by_name_and_alias)
{
	cr_assert_eq(cli_opt_match(opts, "-o"), &opts[0]);
	cr_assert_eq(cli_opt_match(opts, "--output"), &opts[0]);
	cr_assert_eq(cli_opt_match(opts, "--json"), &opts[1]);
	cr_assert_null(cli_opt_match(opts, "--out"));
	cr_assert_null(cli_opt_match(opts, "-"));
	cr_assert_null(cli_opt_match(opts, "--jsonx"));
}
