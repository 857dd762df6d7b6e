/*
 * cmd_trace.c: `gpumemsim trace validate|cat|stats`: look at a trace
 * without simulating it.
 *
 * validate  reads every record and also checks what the reader cannot see
 *           line by line: frees of addresses that are not live, a second
 *           allocation at a live address, kernel links to allocations that
 *           do not exist yet (errors) or are no longer live (warnings: the
 *           host frees a buffer as soon as the kernel is queued, and the
 *           kernel runs later, so a link past the free is normal). A
 *           static (module) allocation at an address where a static one
 *           is live is a warning: the module was loaded again, and older
 *           captures recorded no free at its unload; the new one replaces
 *           the earlier one.
 * cat       prints the trace with absolute times: by default with strings
 *           resolved inline (for people), with --trace as a valid trace.
 * stats     counts, peak live bytes, duration, labels; --json for scripts.
 *
 * Memory stays bounded by the live allocations (u64map), never by length.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../include/gpumemsim.h"

#define MAX_WARNINGS_SHOWN 10

/* Pieces of the usage texts: `trace --help` shows them all, each
 * subcommand's --help its own synopsis and lines with its option table. */
#define SYN_VALIDATE "trace validate FILE..."
#define SYN_CAT "trace cat [--trace] FILE"
#define SYN_STATS "trace stats [--json] FILE"
#define TRACE_INTRO "Read gpumemsim traces (plain or gzip; format in traces/FORMAT.md).\n"
#define VALIDATE_LINES \
	"  validate  check every record and the allocation lifetimes; prints\n" \
	"            'FILE: ok (N records)' or 'FILE:LINE: error'; exit 0/1\n"
#define CAT_LINE "  cat       print the trace with absolute times and strings resolved"
#define STATS_LINE "  stats     record counts, peak live bytes, duration, labels"
#define TRACE_EXIT "Exit codes: 0 ok, 1 bad input or I/O error, 2 usage.\n"

/* `trace validate` has no options but --help. */
static const struct cli_opt validate_opts[] = {
	CLI_OPT_END,
};

static const struct cli_opt cat_opts[] = {
	{"--trace", NULL, "print a valid canonical trace instead"},
	CLI_OPT_END,
};

static const struct cli_opt stats_opts[] = {
	{"--json", NULL, "print one JSON object"},
	CLI_OPT_END,
};

/* A subcommand: its name, usage and option table. */
struct trace_sub {
	const char *name;
	const char *synopsis;
	const char *intro;
	const struct cli_opt *opts;
};

static const struct trace_sub sub_validate = {
	"validate", SYN_VALIDATE, TRACE_INTRO VALIDATE_LINES "\n", validate_opts,
};
static const struct trace_sub sub_cat = {
	"cat", SYN_CAT, TRACE_INTRO CAT_LINE "\n\n", cat_opts,
};
static const struct trace_sub sub_stats = {
	"stats", SYN_STATS, TRACE_INTRO STATS_LINE "\n\n", stats_opts,
};

/* `gpumemsim trace --help`: every subcommand. */
static void trace_usage(FILE *f)
{
	cli_usage(f,
		  SYN_VALIDATE "\n"
		  "       gpumemsim " SYN_CAT "\n"
		  "       gpumemsim " SYN_STATS,
		  TRACE_INTRO VALIDATE_LINES
		  CAT_LINE ";\n"
		  "            --trace prints a valid canonical trace instead\n"
		  STATS_LINE ";\n"
		  "            --json prints one JSON object\n",
		  NULL, "Each has --help. " TRACE_EXIT);
}

/* `gpumemsim trace SUB --help`: SUB's synopsis, lines and options. */
static void sub_usage(FILE *f, const struct trace_sub *sub)
{
	cli_usage(f, sub->synopsis, sub->intro, sub->opts, TRACE_EXIT);
}

/* Open FILE; on failure print the reader's message and return NULL. */
static struct trace_reader *open_or_report(const char *path)
{
	char err[512];
	struct trace_reader *r = trace_reader_start(path, err, sizeof err);
	if (!r)
		fprintf(stderr, "%s\n", err);
	return r;
}

/* ------------------------------------------------------------ validate */

/* Validate one file; prints its verdict. 0 ok, 1 failed. */
static int validate_one(const char *path)
{
	struct trace_check_result *res = malloc(sizeof *res);
	if (!res) {
		fprintf(stderr, "%s: out of memory\n", path);
		return 1;
	}
	int rc = trace_check(path, res);
	for (uint32_t i = 0; i < res->nnotes; i++)
		fprintf(stderr, "%s:%" PRIu64 ": warning: %s\n", path, res->notes[i].line,
			res->notes[i].text);
	if (rc < 0 || !res->ok) {
		fprintf(stderr, "%s\n", res->error);
		free(res);
		return 1;
	}
	if (res->warnings > TRACE_CHECK_NOTES)
		fprintf(stderr, "%s: %" PRIu64 " more warnings not shown\n", path,
			res->warnings - TRACE_CHECK_NOTES);
	if (res->static_replaced)
		fprintf(stderr, "%s: warning: %" PRIu64 " static (module) allocations re-registered "
			"at a live address without a free (module reloaded; treated as replacing "
			"the earlier one)\n", path, res->static_replaced);
	printf("%s: ok (%" PRIu64 " records", path, res->records);
	if (!res->complete)
		printf(", incomplete: no 'end' trailer");
	if (res->warnings)
		printf(", %" PRIu64 " warning%s", res->warnings, res->warnings == 1 ? "" : "s");
	printf(")\n");
	free(res);
	return 0;
}

static int cmd_trace_validate(int argc, char **argv)
{
	int nfiles = 0, fail = 0;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			sub_usage(stdout, &sub_validate);
			return 0;
		}
		if (argv[i][0] == '-' && argv[i][1]) { /* validate_opts is empty */
			fprintf(stderr, "gpumemsim trace validate: unknown option '%s'\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	for (int i = 1; i < argc; i++) {
		nfiles++;
		fail |= validate_one(argv[i]);
	}
	if (!nfiles) {
		sub_usage(stderr, &sub_validate);
		return EXIT_USAGE;
	}
	return fail;
}

/* ------------------------------------------------------------ cat */

/* A string reference: quoted text (resolved) or its id (trace form). */
static void cat_sid(FILE *f, const struct trace_reader *r, uint32_t id, int resolve)
{
	if (id == TRACE_NO_STRING) {
		fputs(" -", f);
	} else if (resolve) {
		fputc(' ', f);
		const char *s = trace_reader_string(r, id);
		json_escape(f, s ? s : "");
	} else {
		fprintf(f, " %" PRIu32, id);
	}
}

static void cat_stream(FILE *f, uint32_t s)
{
	if (s == TRACE_NO_STREAM)
		fputs(" -", f);
	else
		fprintf(f, " %" PRIu32, s);
}

/* A 'k', 'c' or 'm' record's CUDA graph identity: written only when set,
 * so traces without graphs print as they always have. */
static void cat_graph(FILE *f, uint32_t graph, uint64_t node)
{
	if (graph || node)
		fprintf(f, " %" PRIu32 " %" PRIu64, graph, node);
}

static void cat_rec(FILE *f, const struct trace_reader *r, const struct trace_rec *rec,
		    int resolve)
{
	fputc(trace_rec_tag(rec->type), f);
	fprintf(f, " %" PRIu64, rec->start);
	if (rec->type >= TREC_KERNEL && rec->type <= TREC_API)
		fprintf(f, " %" PRIu64, rec->end);
	switch (rec->type) {
	case TREC_ALLOC:
	case TREC_FREE: {
		const struct trace_mem *m = &rec->u.mem;
		fprintf(f, " 0x%" PRIx64 " %" PRIu64, m->addr, m->bytes);
		cat_stream(f, m->stream);
		fprintf(f, " %" PRIu32 " %" PRIu32 " %" PRIu64, m->kind, m->flags, m->corr);
		cat_sid(f, r, m->source, resolve);
		break;
	}
	case TREC_KERNEL: {
		const struct trace_kernel *k = &rec->u.kernel;
		cat_stream(f, k->stream);
		cat_sid(f, r, k->name, resolve);
		fprintf(f, " %" PRIu32 ",%" PRIu32 ",%" PRIu32 " %" PRIu32 ",%" PRIu32 ",%" PRIu32
			" %" PRIu32 " %" PRIu32 " %" PRIu64, k->grid[0], k->grid[1], k->grid[2],
			k->block[0], k->block[1], k->block[2], k->regs, k->smem, k->corr);
		if (!k->nlinks)
			fputs(" -", f);
		for (uint32_t i = 0; i < k->nlinks; i++)
			fprintf(f, "%c%" PRIu64, i ? ',' : ' ', k->links[i]);
		cat_graph(f, k->graph, k->graph_node);
		break;
	}
	case TREC_MEMCPY:
	case TREC_MEMSET:
		cat_stream(f, rec->u.copy.stream);
		fprintf(f, " %" PRIu64, rec->u.copy.bytes);
		if (rec->type == TREC_MEMCPY)
			fprintf(f, " %s", trace_copy_kind_name(rec->u.copy.kind));
		fprintf(f, " %" PRIu64, rec->u.copy.corr);
		cat_graph(f, rec->u.copy.graph, rec->u.copy.graph_node);
		break;
	case TREC_SYNC:
		fprintf(f, " %s", trace_sync_kind_name(rec->u.sync.kind));
		cat_stream(f, rec->u.sync.stream);
		fprintf(f, " %" PRIu64, rec->u.sync.corr);
		break;
	case TREC_RANGE:
		cat_sid(f, r, rec->u.range.name, resolve);
		fprintf(f, " %" PRIu32, rec->u.range.depth);
		if (rec->u.range.uncaptured)
			fputs(" uncaptured", f);
		break;
	case TREC_API:
		cat_sid(f, r, rec->u.api.name, resolve);
		fprintf(f, " %" PRIu64, rec->u.api.corr);
		if (rec->u.api.has_own)
			fprintf(f, " %" PRIu64 " %" PRIu32, rec->u.api.own_ns, rec->u.api.own_cbs);
		break;
	case TREC_CONTROL:
		fprintf(f, " %s", trace_control_name(rec->u.control.kind));
		if (rec->u.control.kind != TCTL_EMPTY_CACHE)
			fprintf(f, " %" PRIu64, rec->u.control.bytes);
		break;
	case TREC_SEGMENT:
		fprintf(f, " %s 0x%" PRIx64 " %" PRIu64, trace_segment_op_name(rec->u.segment.op),
			rec->u.segment.addr, rec->u.segment.bytes);
		cat_stream(f, rec->u.segment.stream);
		break;
	default:
		break;
	}
	fputc('\n', f);
}

#define TRACE_ARGS_GO_ON (-1)

/*
 * The arguments of `gpumemsim trace SUB [FLAG] PATH`, shared by cat and
 * stats, whose tables hold the one FLAG: TRACE_ARGS_GO_ON with *PATH and
 * *FLAG_SET filled in, else the exit status to return at once (0 after
 * --help, EXIT_USAGE after a message).
 */
static int trace_path_args(int argc, char **argv, const struct trace_sub *sub, int *flag_set,
			   const char **path)
{
	*path = NULL;
	*flag_set = 0;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			sub_usage(stdout, sub);
			return 0;
		} else if (cli_opt_match(sub->opts, argv[i]) == &sub->opts[0]) {
			*flag_set = 1;
		} else if ((argv[i][0] == '-' && argv[i][1]) || *path) {
			fprintf(stderr, "gpumemsim trace %s: unexpected argument '%s'\n", sub->name,
				argv[i]);
			return EXIT_USAGE;
		} else {
			*path = argv[i];
		}
	}
	if (!*path) {
		sub_usage(stderr, sub);
		return EXIT_USAGE;
	}
	return TRACE_ARGS_GO_ON;
}

static void cat_header(FILE *f, const struct trace_header *h)
{
	const struct {
		const char *key;
		const char *val;
	} fl[] = {
		{"producer", h->producer}, {"producer_version", h->producer_version},
		{"gpu", h->gpu}, {"compute_capability", h->compute_capability},
		{"driver", h->driver}, {"cuda", h->cuda}, {"cupti", h->cupti},
		{"cudnn", h->cudnn}, {"command", h->command},
	};
	fprintf(f, "%s %d\n", TRACE_MAGIC, TRACE_FORMAT_VERSION);
	for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
		if (fl[i].val)
			fprintf(f, "H %s %s\n", fl[i].key, fl[i].val);
	if (h->total_memory)
		fprintf(f, "H total_memory %" PRIu64 "\n", h->total_memory);
	for (size_t i = 0; i < h->nlabels; i++)
		fprintf(f, "L %s=%s\n", h->labels[i].key, h->labels[i].value);
}

static int cmd_trace_cat(int argc, char **argv)
{
	const char *path;
	int as_trace, done = trace_path_args(argc, argv, &sub_cat, &as_trace, &path);
	if (done != TRACE_ARGS_GO_ON)
		return done;
	struct trace_reader *r = open_or_report(path);
	if (!r)
		return 1;
	FILE *f = stdout;
	cat_header(f, trace_reader_header(r));
	uint32_t emitted = 0;
	struct trace_rec rec;
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		/* Strings appear before first use, as the reader met them. */
		for (uint32_t n = trace_reader_nstrings(r); as_trace && emitted < n; emitted++)
			fprintf(f, "S %" PRIu32 " %s\n", emitted, trace_reader_string(r, emitted));
		cat_rec(f, r, &rec, !as_trace);
	}
	const struct trace_trailer *t = trace_reader_trailer(r);
	if (rc == TRACE_EOF && t->present)
		fprintf(f, "end %" PRIu64 " %" PRIu64 "\n", t->records, t->dropped);
	int ret = 0;
	if (rc < 0) {
		fprintf(stderr, "%s\n", trace_reader_error(r));
		ret = 1;
	}
	if (fflush(f) != 0 || ferror(f)) {
		fprintf(stderr, "gpumemsim trace cat: writing the output failed\n");
		ret = 1;
	}
	trace_reader_close(r);
	return ret;
}

/* ------------------------------------------------------------ stats */

static void json_kv_str_or_null(struct json *j, const char *key, const char *v)
{
	json_key(j, key);
	if (v)
		json_string(j, v);
	else
		json_null(j);
}

static void stats_json(FILE *f, const struct trace_stats_result *s)
{
	const struct trace_header *h = &s->header;
	char crc[16];
	struct json j;
	json_init(&j, f);
	json_begin_object(&j);
	json_kv_string(&j, "file", s->path);
	json_kv_u64(&j, "format_version", (uint64_t)h->version);
	json_kv_bool(&j, "complete", s->complete);
	json_kv_u64(&j, "records", s->records);
	json_kv_u64(&j, "allocs", s->count[TREC_ALLOC]);
	json_kv_u64(&j, "frees", s->count[TREC_FREE]);
	json_kv_u64(&j, "kernels", s->count[TREC_KERNEL]);
	json_kv_u64(&j, "memcpys", s->count[TREC_MEMCPY]);
	json_kv_u64(&j, "memsets", s->count[TREC_MEMSET]);
	json_kv_u64(&j, "syncs", s->count[TREC_SYNC]);
	json_kv_u64(&j, "markers", s->count[TREC_RANGE]);
	json_kv_u64(&j, "api_calls", s->count[TREC_API]);
	json_kv_u64(&j, "controls", s->count[TREC_CONTROL]);
	json_kv_u64(&j, "segments", s->count[TREC_SEGMENT]);
	json_kv_u64(&j, "kernel_buffer_links", s->links);
	json_kv_u64(&j, "graph_kernels", s->graph_kernels);
	json_kv_u64(&j, "graphs", s->graphs);
	json_kv_u64(&j, "alloc_bytes", s->alloc_bytes);
	json_kv_u64(&j, "peak_live_bytes", s->peak_live_bytes);
	json_kv_u64(&j, "peak_live_at_ns", s->peak_at);
	json_kv_u64(&j, "live_bytes_at_end", s->live_bytes);
	json_kv_u64(&j, "unmatched_frees", s->unmatched_frees);
	json_kv_u64(&j, "start_ns", s->first);
	json_kv_u64(&j, "duration_ns", s->duration_ns);
	json_kv_u64(&j, "strings", s->strings);
	json_kv_u64(&j, "dropped", s->dropped);
	snprintf(crc, sizeof crc, "%08" PRIx32, s->crc32);
	json_kv_string(&j, "crc32", crc);
	json_kv_u64(&j, "text_bytes", s->text_bytes);
	json_key(&j, "header");
	json_begin_object(&j);
	json_kv_str_or_null(&j, "producer", h->producer);
	json_kv_str_or_null(&j, "producer_version", h->producer_version);
	json_kv_str_or_null(&j, "gpu", h->gpu);
	json_kv_str_or_null(&j, "compute_capability", h->compute_capability);
	json_kv_u64(&j, "total_memory", h->total_memory);
	json_kv_str_or_null(&j, "driver", h->driver);
	json_kv_str_or_null(&j, "cuda", h->cuda);
	json_kv_str_or_null(&j, "cupti", h->cupti);
	json_kv_str_or_null(&j, "cudnn", h->cudnn);
	json_kv_str_or_null(&j, "command", h->command);
	json_end_object(&j);
	json_key(&j, "labels");
	json_begin_object(&j);
	for (size_t i = 0; i < h->nlabels; i++)
		json_kv_string(&j, h->labels[i].key, h->labels[i].value);
	json_end_object(&j);
	json_end_object(&j); /* the outermost object ends its line */
}

static void stats_text(FILE *f, const struct trace_stats_result *s)
{
	const struct trace_header *h = &s->header;
	char b1[32], b2[32];
	fprintf(f, "%s: gpumemsim trace v%d, %s\n", s->path, h->version,
		s->complete ? "complete" : "INCOMPLETE (cut short)");
	if (h->producer)
		fprintf(f, "  producer        %s %s\n", h->producer,
			h->producer_version ? h->producer_version : "");
	if (h->gpu)
		fprintf(f, "  gpu             %s\n", h->gpu);
	if (h->total_memory)
		fprintf(f, "  total memory    %s\n", size_fmt(h->total_memory, b1, sizeof b1));
	for (size_t i = 0; i < h->nlabels; i++)
		fprintf(f, "  label           %s=%s\n", h->labels[i].key, h->labels[i].value);
	fprintf(f, "  records         %" PRIu64 "\n", s->records);
	for (int t = 0; t < TREC_COUNT; t++)
		if (s->count[t])
			fprintf(f, "    %-13s %" PRIu64 "\n", trace_rec_name((enum trace_rec_type)t),
				s->count[t]);
	fprintf(f, "  kernel links    %" PRIu64 "\n", s->links);
	if (s->graph_kernels || s->graphs)
		fprintf(f, "  CUDA graphs     %zu, %" PRIu64 " kernels launched from them\n",
			s->graphs, s->graph_kernels);
	fprintf(f, "  allocated       %s in total\n", size_fmt(s->alloc_bytes, b1, sizeof b1));
	fprintf(f, "  peak live       %s at %.6f s\n",
		size_fmt(s->peak_live_bytes, b1, sizeof b1), (double)s->peak_at / 1e9);
	fprintf(f, "  live at end     %s\n", size_fmt(s->live_bytes, b2, sizeof b2));
	if (s->unmatched_frees)
		fprintf(f, "  unmatched frees %" PRIu64 "\n", s->unmatched_frees);
	fprintf(f, "  duration        %.6f s\n", (double)s->duration_ns / 1e9);
	if (s->dropped)
		fprintf(f, "  dropped         %" PRIu64 " (producer lost records)\n", s->dropped);
}

static int cmd_trace_stats(int argc, char **argv)
{
	const char *path;
	int as_json, done = trace_path_args(argc, argv, &sub_stats, &as_json, &path);
	if (done != TRACE_ARGS_GO_ON)
		return done;
	struct trace_stats_result s;
	char err[8192];
	if (trace_stats(path, &s, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	int ret = 0;
	if (s.truncated)
		fprintf(stderr, "warning: %s; statistics cover the records before it\n",
			s.truncation);
	else if (!s.complete)
		fprintf(stderr, "warning: %s: no 'end' trailer: the trace was cut short\n", path);
	if (as_json)
		stats_json(stdout, &s);
	else
		stats_text(stdout, &s);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "gpumemsim trace stats: writing the output failed\n");
		ret = 1;
	}
	trace_stats_free(&s);
	return ret;
}

/* `gpumemsim trace SUBCOMMAND ...`: argv[0] is "trace". */
int cmd_trace(int argc, char **argv)
{
	if (argc < 2) {
		trace_usage(stderr);
		return EXIT_USAGE;
	}
	if (cli_is_help(argv[1])) {
		trace_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "validate"))
		return cmd_trace_validate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "cat"))
		return cmd_trace_cat(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stats"))
		return cmd_trace_stats(argc - 1, argv + 1);
	fprintf(stderr, "gpumemsim trace: unknown subcommand '%s' (validate, cat, stats)\n",
		argv[1]);
	return EXIT_USAGE;
}
