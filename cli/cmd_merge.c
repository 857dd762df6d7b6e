/*
 * cmd_merge.c: `gpumemsim merge -o OUT.db IN.db...`: combine results
 * databases (typically the shards of one sweep run as a job array) into
 * one, with every run's labels, stats, timeline and events.
 *
 * A run whose sweep key is already in OUT, or came from an earlier input, is
 * skipped, so merging twice or merging overlapping shards never duplicates
 * a combination. New ids follow key order, so the merged shards of a sweep
 * equal the unsharded sweep's database row for row. When OUT does not exist
 * the merge is built beside it and renamed into place at the end: a failed
 * merge leaves no OUT.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../include/gpumemsim.h"

static const struct cli_opt merge_opts[] = {
	{"-o|--output", "OUT", "the merged database"},
	{"--json", NULL, "one JSON summary object on stdout"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "merge -o OUT.db IN.db [IN.db...] [--json]",
		  "Copy the runs of the input results databases into OUT (created if missing),\n"
		  "skipping combinations OUT already holds or an earlier input gave (by sweep\n"
		  "key; runs stored by `gpumemsim run` have no key and are always copied).\n"
		  "Copied runs get ids in key order, so merging the shards of a sweep gives\n"
		  "the same database as the unsharded sweep.\n",
		  merge_opts,
		  "\nExit status: 0 ok, 1 failure (the message names the file), 2 usage.\n");
}

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Exit codes as cli.h says. */
int cmd_merge(int argc, char **argv)
{
	const char *out = NULL;
	const char **in = NULL;
	size_t nin = 0;
	int json = 0, ret = 1, fresh = 0;
	char tmp[4096] = "", err[1024];
	struct store *st = NULL;
	struct store_merge_counts c;
	struct stat sb;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	}
	in = calloc((size_t)argc, sizeof *in);
	if (!in) {
		fprintf(stderr, "gpumemsim merge: out of memory\n");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
			if (cli_take_value("gpumemsim merge", argc, argv, &i, &out) < 0) {
				ret = EXIT_USAGE;
				goto done;
			}
		} else if (!strcmp(o, "--json")) {
			json = 1;
		} else if (o[0] == '-' && o[1]) {
			fprintf(stderr, "gpumemsim merge: unknown option '%s'\n", o);
			ret = EXIT_USAGE;
			goto done;
		} else {
			in[nin++] = o;
		}
	}
	if (!out || !nin) {
		fprintf(stderr, "gpumemsim merge: %s\n", !out ? "missing -o OUT.db" : "no input databases");
		usage(stderr);
		ret = EXIT_USAGE;
		goto done;
	}
	for (size_t i = 0; i < nin; i++) {
		if (access(in[i], R_OK) != 0) {
			fprintf(stderr, "gpumemsim merge: %s: no such results database\n", in[i]);
			goto done;
		}
		if (same_file(in[i], out)) {
			fprintf(stderr, "gpumemsim merge: %s is also the output\n", in[i]);
			ret = EXIT_USAGE;
			goto done;
		}
	}
	fresh = stat(out, &sb) != 0;
	if (fresh)
		snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
	st = store_open(fresh ? tmp : out, err, sizeof err);
	if (!st) {
		fprintf(stderr, "gpumemsim merge: %s\n", err);
		goto done;
	}
	if (store_merge(st, in, nin, &c, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim merge: %s\n", err);
		goto done;
	}
	store_close(st); /* checkpoints the WAL into the file before the rename */
	st = NULL;
	if (fresh) {
		if (rename(tmp, out) != 0) {
			fprintf(stderr, "gpumemsim merge: cannot create %s\n", out);
			goto done;
		}
		tmp[0] = '\0';
	}
	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "output", out);
		json_kv_u64(&j, "inputs", nin);
		json_kv_u64(&j, "runs_in", c.runs_in);
		json_kv_u64(&j, "copied", c.copied);
		json_kv_u64(&j, "duplicates", c.duplicates);
		json_end_object(&j);
		putchar('\n');
	} else {
		printf("merge: %" PRIu64 " run(s) in %zu database(s): %" PRIu64 " copied into %s, %"
		       PRIu64 " skipped as duplicates\n", c.runs_in, nin, c.copied, out,
		       c.duplicates);
	}
	ret = fflush(stdout) ? 1 : 0;
done:
	store_close(st);
	if (tmp[0])
		store_remove_files(tmp);
	free(in);
	return ret;
}
