/*
 * cli.h: the gpumemsim subcommands and what they share.
 *
 * Exit codes: 0 success; 1 failure (bad input, I/O error: a message on
 * stderr names the file and line or the knob); 2 usage error.
 */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "../include/gpumemsim.h"

#define EXIT_USAGE 2

/* Where results go and are read from when --db is not given. */
#define CLI_DEFAULT_DB "results.db"

/* Subcommands: argv[0] is the subcommand name. */
int cmd_trace(int argc, char **argv);     /* trace validate|cat|stats */
int cmd_run(int argc, char **argv);       /* run TRACE --policy ... */
int cmd_policies(int argc, char **argv);  /* policies: list policies and knobs */
int cmd_import(int argc, char **argv);    /* import torch-snapshot|kineto FILE -o TRACE */
int cmd_validate(int argc, char **argv);  /* validate torch-truth DIR */
int cmd_capture(int argc, char **argv);   /* capture [-o FILE] -- CMD: CUPTI trace of a program */
int cmd_table(int argc, char **argv);     /* table: policies and settings compared per trace */
int cmd_sweep(int argc, char **argv);     /* sweep --traces ... --policies ...: many runs */
int cmd_merge(int argc, char **argv);     /* merge -o OUT IN...: combine results databases */
int cmd_plot(int argc, char **argv);      /* plot KIND --db FILE -o FILE.png|.svg */
int cmd_report(int argc, char **argv);    /* report --db FILE -o DIR: HTML + Markdown */
int cmd_export(int argc, char **argv);    /* export perfetto RUN|TRACE -o FILE.json */
int cmd_whatif(int argc, char **argv);    /* whatif batch --from T1 T2 --batch N -o TRACE */
int cmd_maxbatch(int argc, char **argv);  /* maxbatch --from T1 T2 --policy P --capacity C */
int cmd_explain(int argc, char **argv);   /* explain batch T1 T2 ...: why peak moves with batch */
int cmd_fuse(int argc, char **argv);      /* fuse TRACE --rules FILE -o OUT: kernel-fusion what-if */
int cmd_diff(int argc, char **argv);      /* diff A B: what changed between two runs */



/* Option values run and sweep share: 0 with *OUT set, or EXIT_USAGE after a
 * message naming CMD and the value. */
int cli_parse_addresses(const char *cmd, const char *v, int *out /* enum device_addr_mode */);
/* --xla-requests auto|on|off (enum sim_xla_mode); EXIT_USAGE with a message. */
int cli_parse_xla_requests(const char *cmd, const char *v, int *out);
/* The help text of --xla-requests, shared by the commands that replay. */
#define CLI_XLA_REQUESTS_HELP \
	"a JAX capture taken with XLA's platform allocator: requests\n" \
	"read as whole 2 MiB granules replayed at their lower bound\n" \
	"(n - 2 MiB + 1 B), allocations never freed kept beside the\n" \
	"policy (outside XLA's allocator). auto (default): when the\n" \
	"labels say workload=jax and alloc=platform; on; off: the\n" \
	"trace as captured"
int cli_parse_timeline_points(const char *cmd, const char *v, uint32_t *out);
/* A bandwidth: "4.8TB/s", "900GB/s", "1.5TiB/s", "3e12" (bytes/s); 0 or -1. */
int cli_parse_bandwidth(const char *s, double *out);
/* The change from BEFORE to AFTER in percent of BEFORE (0 when BEFORE is 0). */
double cli_change_pct(uint64_t after, uint64_t before);
/* The change from FROM to TO as a signed size into BUF: "+1.50 GiB",
 * "-512.00 MiB", "0 B". Returns BUF. */
const char *cli_size_change(uint64_t to, uint64_t from, char *buf, size_t len);

/* run --steps (run_steps.c): the steps of R side by side, their
 * percentiles from SKIP on and the worst step, as text or as the "steps"
 * member of run's JSON object. */
struct json;
int run_steps_text(const struct sim_result *r, size_t skip);
void run_steps_json(struct json *j, const struct sim_result *r, size_t skip);

/* 0 when a figure can be drawn at FIGURE before any work is done: gnuplot
 * is there and FIGURE's folder takes files; else -1 with "CMD: OPT FIGURE:
 * why" on stderr. */
int cli_figure_writable(const char *cmd, const char *opt, const char *figure);

/* True if ARG is -h or --help. */
int cli_is_help(const char *arg);

/* The value of the option at ARGV[*I]: the next argument, *I moved onto
 * it; 0, or -1 with "CMD: OPTION needs a value" on stderr when there is
 * none (CMD: "gpumemsim run"). */
int cli_take_value(const char *cmd, int argc, char **argv, int *i, const char **v);

/* 1 when KV is a label as --label takes it: KEY=VALUE, a non-empty key
 * without spaces, all on one line (capture, import). */
int cli_label_ok(const char *kv);

/*
 * One option of a command. Each command has one table of them: its usage
 * text is printed from it (cli_usage) and its parser accepts what it names
 * (cli_opt_match), so the two cannot drift apart.
 */
struct cli_opt {
	const char *name;   /* "--db"; aliases separated by '|': "-o|--output" */
	const char *arg;    /* "FILE", or NULL for a flag */
	const char *help;   /* one line; '\n' starts a continuation line */
};
#define CLI_OPT_END {NULL, NULL, NULL}

/* "usage: gpumemsim SYNOPSIS", a blank line, INTRO (may be NULL; ends in
 * '\n'), then one aligned line per option of OPTS, then OUTRO (may be NULL). */
void cli_usage(FILE *f, const char *synopsis, const char *intro, const struct cli_opt *opts,
	       const char *outro);

/* The entry of OPTS whose name (or one of its aliases) is ARG, or NULL. */
const struct cli_opt *cli_opt_match(const struct cli_opt *opts, const char *arg);

/* cli_take_value for a command's option table: *V the value when OPTS says
 * the option at ARGV[*I] takes one, else NULL (a flag, or not an option of
 * OPTS: the caller's parser says what it is). */
int cli_take_opt(const char *cmd, const struct cli_opt *opts, int argc, char **argv, int *i,
		 const char **v);

#endif /* CLI_CLI_H */
