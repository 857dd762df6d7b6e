/*
 * cmd_export.c: `gpumemsim export perfetto`: a simulated memory timeline as
 * a Chrome trace (JSON object format) that ui.perfetto.dev and
 * chrome://tracing open.
 *
 * Two sources, told apart by the first argument:
 * - RUN_ID... (digits): stored runs. The store keeps each run's downsampled
 *   timeline and notable events, not its kernels, so the export holds one
 *   process per run with "allocated" and "reserved" counter tracks and the
 *   events (OOM, peak, empty_cache) as instant events.
 * - TRACE --policy P [--conf C] [--capacity SIZE]: the trace is replayed
 *   now (nothing stored) and its kernels, copies and memsets appear per
 *   stream, NVTX ranges on a host track, beside the replay's counters.
 *   Kernel times are the trace's own (relative to its first record), which
 *   the engine follows unless a synchronisation made the host wait longer.
 * Timestamps are microseconds with nanosecond decimals; counter values are
 * bytes. The file is written as FILE.tmp.PID and renamed on success.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../include/gpumemsim.h"
#include "cli.h"

#define EXPORT_MAX_RUNS 64

struct out {
	FILE *f;
	int n; /* events written, for commas */
};

static void ev_begin(struct out *o)
{
	fputs(o->n++ ? ",\n" : "\n", o->f);
}

static void put_ts(FILE *f, const char *key, uint64_t ns)
{
	fprintf(f, ",\"%s\":%" PRIu64 ".%03" PRIu64, key, ns / 1000, ns % 1000);
}

static void meta_name(struct out *o, const char *what, int pid, int64_t tid, const char *name)
{
	ev_begin(o);
	fprintf(o->f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%" PRId64
		",\"args\":{\"name\":", what, pid, tid);
	json_escape(o->f, name);
	fputs("}}", o->f);
}

static void counter(struct out *o, int pid, const char *name, uint64_t t, uint64_t bytes)
{
	ev_begin(o);
	fputs("{\"ph\":\"C\",\"name\":", o->f);
	json_escape(o->f, name);
	fprintf(o->f, ",\"pid\":%d,\"tid\":0", pid);
	put_ts(o->f, "ts", t);
	fprintf(o->f, ",\"args\":{\"bytes\":%" PRIu64 "}}", bytes);
}

static void instant(struct out *o, int pid, const char *kind, uint64_t t, uint64_t bytes,
		    uint64_t line, const char *detail)
{
	ev_begin(o);
	fputs("{\"ph\":\"i\",\"s\":\"p\",\"name\":", o->f);
	json_escape(o->f, kind);
	fprintf(o->f, ",\"pid\":%d,\"tid\":0", pid);
	put_ts(o->f, "ts", t);
	fprintf(o->f, ",\"args\":{\"bytes\":%" PRIu64 ",\"trace_line\":%" PRIu64 ",\"detail\":",
		bytes, line);
	json_escape(o->f, detail ? detail : "");
	fputs("}}", o->f);
}

/* ------------------------------------------------------------ stored runs */

struct run_ctx {
	struct out *o;
	int pid;
	int found;
	char name[512];
};

static int run_row(void *vctx, int ncols, const char *const *c)
{
	struct run_ctx *r = vctx;
	if (ncols < 3)
		return 1;
	r->found = 1;
	snprintf(r->name, sizeof r->name, "%s %s (%s)", c[0] ? c[0] : "",
		 c[1] && *c[1] ? c[1] : "(default)", c[2] ? c[2] : "");
	return 0;
}

static int tl_row(void *vctx, int ncols, const char *const *c)
{
	struct run_ctx *r = vctx;
	if (ncols < 3)
		return 1;
	uint64_t t = strtoull(c[0] ? c[0] : "0", NULL, 10);
	counter(r->o, r->pid, "allocated", t, strtoull(c[1] ? c[1] : "0", NULL, 10));
	counter(r->o, r->pid, "reserved", t, strtoull(c[2] ? c[2] : "0", NULL, 10));
	return 0;
}

static int ev_row(void *vctx, int ncols, const char *const *c)
{
	struct run_ctx *r = vctx;
	if (ncols < 5)
		return 1;
	instant(r->o, r->pid, c[0] ? c[0] : "", strtoull(c[1] ? c[1] : "0", NULL, 10),
		strtoull(c[2] ? c[2] : "0", NULL, 10), strtoull(c[3] ? c[3] : "0", NULL, 10), c[4]);
	return 0;
}

static int export_runs(struct out *o, const char *db, char **ids, int nids, char *err,
		       size_t errlen)
{
	if (access(db, R_OK) != 0) {
		snprintf(err, errlen, "%s: no such results database (run `gpumemsim run` first)", db);
		return -1;
	}
	struct store *s = store_open(db, err, errlen);
	if (!s)
		return -1;
	int ret = -1;
	for (int i = 0; i < nids; i++) {
		const char *p[1] = {ids[i]};
		struct run_ctx r = {.o = o, .pid = i + 1};
		if (store_query(s, "SELECT policy, conf, trace_path FROM runs WHERE id=?1", p, 1,
				run_row, &r, err, errlen) < 0)
			goto out;
		if (!r.found) {
			snprintf(err, errlen, "%s: no run %s", db, ids[i]);
			goto out;
		}
		char pname[1100];
		snprintf(pname, sizeof pname, "run %s: %s", ids[i], r.name);
		meta_name(o, "process_name", r.pid, 0, pname);
		if (store_query(s, "SELECT t_ns, allocated, reserved FROM timeline WHERE run_id=?1"
				" ORDER BY t_ns", p, 1, tl_row, &r, err, errlen) < 0 ||
		    store_query(s, "SELECT kind, t_ns, bytes, line, detail FROM events WHERE run_id=?1"
				" ORDER BY t_ns, rowid", p, 1, ev_row, &r, err, errlen) < 0)
			goto out;
	}
	ret = 0;
out:
	store_close(s);
	return ret;
}

/* ------------------------------------------------------------ a trace */

#define PID_HOST 1
#define PID_GPU 2
#define PID_MEM 3

static int export_trace(struct out *o, const char *path, const char *policy, const char *conf,
			uint64_t capacity, char *err, size_t errlen)
{
	const struct alloc_policy *pol = policy_find(policy);
	struct sim_result res;
	int ret = -1;
	memset(&res, 0, sizeof res);
	if (!pol) {
		char names[1024];
		policy_list_names(names, sizeof names);
		snprintf(err, errlen, "unknown policy '%s' (known: %.700s)", policy, names);
		return -1;
	}
	struct sim_options so = {.trace_path = path, .policy = pol, .conf = conf,
				 .capacity = capacity};
	if (sim_run(&so, &res, err, errlen) < 0)
		return -1;
	struct trace_reader *r = trace_reader_open(path);
	if (!r) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (trace_reader_status(r) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	meta_name(o, "process_name", PID_HOST, 0, "host (trace times)");
	meta_name(o, "thread_name", PID_HOST, 0, "NVTX ranges");
	meta_name(o, "process_name", PID_GPU, 0, "GPU streams (trace times)");
	char mem[512];
	snprintf(mem, sizeof mem, "memory: %s %s (simulated)", policy, conf && *conf ? conf : "(default)");
	meta_name(o, "process_name", PID_MEM, 0, mem);
	struct trace_rec rec;
	int rc, first = 1;
	uint64_t base = 0;
	uint32_t streams[256];
	int nstreams = 0;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		if (first) {
			base = rec.start;
			first = 0;
		}
		uint64_t t = rec.start - base, dur = rec.end > rec.start ? rec.end - rec.start : 0;
		uint32_t stream;
		char name[160];
		const char *nm;
		if (rec.type == TREC_KERNEL) {
			stream = rec.u.kernel.stream;
			nm = trace_reader_string(r, rec.u.kernel.name);
			snprintf(name, sizeof name, "%s", nm ? nm : "kernel");
		} else if (rec.type == TREC_MEMCPY) {
			stream = rec.u.copy.stream;
			snprintf(name, sizeof name, "memcpy %s %" PRIu64 " B",
				 trace_copy_kind_name(rec.u.copy.kind), rec.u.copy.bytes);
		} else if (rec.type == TREC_MEMSET) {
			stream = rec.u.copy.stream;
			snprintf(name, sizeof name, "memset %" PRIu64 " B", rec.u.copy.bytes);
		} else if (rec.type == TREC_RANGE) {
			nm = trace_reader_string(r, rec.u.range.name);
			ev_begin(o);
			fputs("{\"ph\":\"X\",\"name\":", o->f);
			json_escape(o->f, nm ? nm : "range");
			fprintf(o->f, ",\"pid\":%d,\"tid\":0", PID_HOST);
			put_ts(o->f, "ts", t);
			put_ts(o->f, "dur", dur);
			fprintf(o->f, ",\"args\":{\"depth\":%" PRIu32 ",\"trace_line\":%" PRIu64 "}}",
				rec.u.range.depth, rec.line);
			continue;
		} else {
			continue;
		}
		int seen = 0;
		for (int i = 0; i < nstreams && !seen; i++)
			seen = streams[i] == stream;
		if (!seen && nstreams < 256) {
			char tn[48];
			streams[nstreams++] = stream;
			snprintf(tn, sizeof tn, "stream %" PRIu32, stream);
			meta_name(o, "thread_name", PID_GPU, stream, tn);
		}
		ev_begin(o);
		fputs("{\"ph\":\"X\",\"name\":", o->f);
		json_escape(o->f, name);
		fprintf(o->f, ",\"pid\":%d,\"tid\":%" PRIu32, PID_GPU, stream);
		put_ts(o->f, "ts", t);
		put_ts(o->f, "dur", dur);
		fprintf(o->f, ",\"args\":{\"trace_line\":%" PRIu64 "}}", rec.line);
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(r));
		goto out;
	}
	for (size_t i = 0; i < res.ntimeline; i++) {
		counter(o, PID_MEM, "allocated", res.timeline[i].t, res.timeline[i].allocated);
		counter(o, PID_MEM, "reserved", res.timeline[i].t, res.timeline[i].reserved);
	}
	for (size_t i = 0; i < res.nevents; i++)
		instant(o, PID_MEM, sim_event_kind_name(res.events[i].kind), res.events[i].t,
			res.events[i].bytes, res.events[i].line, res.events[i].detail);
	ret = 0;
out:
	trace_reader_close(r);
	sim_result_free(&res);
	return ret;
}

/* Every option the export perfetto parse loop accepts. */
static const struct cli_opt export_opts[] = {
	{"--db", "FILE", "results database of the RUN_IDs (default " CLI_DEFAULT_DB ")"},
	{"-o", "FILE.json", "the Chrome trace to write (required)"},
	{"--policy", "NAME", "allocator policy to replay TRACE under (TRACE only)"},
	{"--conf", "STRING", "the policy's knobs (TRACE only)"},
	{"--capacity", "SIZE", "device memory for the replay, e.g. 80GiB"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "export perfetto RUN_ID... [--db results.db] -o FILE.json\n"
		     "       gpumemsim export perfetto TRACE --policy NAME [--conf STRING]\n"
		     "                                 [--capacity SIZE] -o FILE.json",
		  "Write a Chrome trace (JSON) that ui.perfetto.dev opens.\n"
		  "  RUN_ID...  stored runs (digits): per run, 'allocated' and 'reserved' counter\n"
		  "             tracks (bytes; the stored downsampled timeline, bucket maxima)\n"
		  "             and its events (oom, peak_reserved, empty_cache) as instants.\n"
		  "             The store keeps no kernels: use the TRACE form for those.\n"
		  "  TRACE      replay TRACE under --policy now (nothing stored) and export its\n"
		  "             kernels, copies and memsets per stream and NVTX ranges (times as\n"
		  "             in the trace, from its first record) beside the memory counters.\n"
		  "             A trace whose name is all digits: write it as ./NAME.\n\n",
		  export_opts, NULL);
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

int cmd_export(int argc, char **argv)
{
	const char *db = CLI_DEFAULT_DB, *out = NULL, *policy = NULL, *conf = NULL, *trace = NULL;
	char *ids[EXPORT_MAX_RUNS];
	int nids = 0;
	uint64_t capacity = 0;
	char err[1024], tmp[4200];
	if (argc >= 2 && cli_is_help(argv[1])) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "perfetto")) {
		fprintf(stderr, "gpumemsim export: %s%s%s (known: perfetto)\n",
			argc < 2 ? "which format?" : "unknown format '", argc < 2 ? "" : argv[1],
			argc < 2 ? "" : "'");
		usage(stderr);
		return EXIT_USAGE;
	}
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (cli_is_help(a)) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--db") && i + 1 < argc) {
			db = argv[++i];
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			out = argv[++i];
		} else if (!strcmp(a, "--policy") && i + 1 < argc) {
			policy = argv[++i];
		} else if (!strcmp(a, "--conf") && i + 1 < argc) {
			conf = argv[++i];
		} else if (!strcmp(a, "--capacity") && i + 1 < argc) {
			if (conf_size(argv[++i], &capacity) < 0 || !capacity) {
				fprintf(stderr, "gpumemsim export: --capacity '%s': expected a size such "
					"as 80GiB\n", argv[i]);
				return EXIT_USAGE;
			}
		} else if (a[0] != '-' && all_digits(a) && !trace) {
			if (nids == EXPORT_MAX_RUNS) {
				fprintf(stderr, "gpumemsim export: at most %d runs\n", EXPORT_MAX_RUNS);
				return EXIT_USAGE;
			}
			ids[nids++] = argv[i];
		} else if (a[0] != '-' && !trace && !nids) {
			trace = a;
		} else {
			fprintf(stderr, "gpumemsim export perfetto: unexpected argument '%s'\n", a);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (!out || (!trace && !nids) || (trace && !policy) || (nids && (policy || conf))) {
		fprintf(stderr, "gpumemsim export perfetto: %s\n",
			!out ? "-o FILE.json is required"
			: (!trace && !nids) ? "which RUN_ID or TRACE?"
			: trace ? "a TRACE needs --policy" : "--policy/--conf go with a TRACE, not run ids");
		usage(stderr);
		return EXIT_USAGE;
	}
	snprintf(tmp, sizeof tmp, "%.4100s.tmp.%ld", out, (long)getpid());
	struct out o = {.f = fopen(tmp, "w")};
	if (!o.f) {
		fprintf(stderr, "gpumemsim export: %s: %s\n", out, strerror(errno));
		return 1;
	}
	fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"gpumemsim " GPUMEMSIM_VERSION
	      "\",\"counters\":\"bytes\"},\"traceEvents\":[", o.f);
	int rc = nids ? export_runs(&o, db, ids, nids, err, sizeof err)
		      : export_trace(&o, trace, policy, conf, capacity, err, sizeof err);
	fputs("\n]}\n", o.f);
	int bad = ferror(o.f);
	if (fclose(o.f) != 0)
		bad = 1;
	if (rc < 0 || bad || rename(tmp, out) != 0) {
		if (rc < 0)
			fprintf(stderr, "gpumemsim export perfetto: %s\n", err);
		else
			fprintf(stderr, "gpumemsim export perfetto: writing %s failed\n", out);
		unlink(tmp);
		return 1;
	}
	return 0;
}
