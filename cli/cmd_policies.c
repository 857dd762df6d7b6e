/*
 * cmd_policies.c: `gpumemsim policies [--json]`: every registered policy
 * with its one-line description and its knobs, in registry order, so users
 * can discover the spelling of a knob without reading the sources.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "../include/gpumemsim.h"

enum { PO_JSON };  /* indices into policies_opts */

static const struct cli_opt policies_opts[] = {
	[PO_JSON] = {"--json", NULL, "one JSON array of {name, description, knobs:[{name, syntax, help}]}"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "policies [--json]",
		  "List the allocator policies and their knobs (pass knobs to\n"
		  "`gpumemsim run --conf`, in the framework's own syntax: \"key:value,...\").\n",
		  policies_opts, NULL);
}

static void print_json(void)
{
	struct json j;
	json_init(&j, stdout);
	json_begin_array(&j);
	for (const struct alloc_policy *const *p = policy_table; *p; p++) {
		json_begin_object(&j);
		json_kv_string(&j, "name", (*p)->name);
		json_kv_string(&j, "description", (*p)->description);
		json_key(&j, "knobs");
		json_begin_array(&j);
		for (const struct policy_knob *k = (*p)->knobs; k && k->name; k++) {
			json_begin_object(&j);
			json_kv_string(&j, "name", k->name);
			json_kv_string(&j, "syntax", k->syntax ? k->syntax : "");
			json_kv_string(&j, "help", k->help ? k->help : "");
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
	}
	json_end_array(&j);
}

static void print_text(void)
{
	for (const struct alloc_policy *const *p = policy_table; *p; p++) {
		printf("%s\n    %s\n", (*p)->name, (*p)->description ? (*p)->description : "");
		const struct policy_knob *k = (*p)->knobs;
		if (!k || !k->name) {
			printf("    knobs: none\n\n");
			continue;
		}
		printf("    knobs:\n");
		for (; k->name; k++)
			printf("      %s:%s\n          %s\n", k->name, k->syntax ? k->syntax : "",
			       k->help ? k->help : "");
		printf("\n");
	}
}

/* Lists the registry; exit 2 on unknown arguments. */
int cmd_policies(int argc, char **argv)
{
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		} else if (cli_opt_match(policies_opts, argv[i]) == &policies_opts[PO_JSON]) {
			json = 1;
		} else {
			fprintf(stderr, "gpumemsim policies: unknown argument '%s'\n", argv[i]);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (json)
		print_json();
	else
		print_text();
	return fflush(stdout) == 0 ? 0 : 1;
}
