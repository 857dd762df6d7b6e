/*
 * perfetto.c: `gpumemsim export perfetto`'s Chrome trace (perfetto.h): stored
 * runs read from the store, or a trace replayed now, written as JSON events.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/json.h"
#include "../base/version.h"
#include "../policies/policy.h"
#include "../sim/engine.h"
#include "../sim/store.h"
#include "../traces/trace.h"
#include "perfetto.h"

struct out {
	FILE *f;
	int n; /* events written, for commas */
	struct perfetto_stats st;
};

static void ev_begin(struct out *o)
{
	fputs(o->n++ ? ",\n" : "\n", o->f);
	o->st.events++;
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
	o->st.counters++;
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
	o->st.instants++;
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

static int export_runs(struct out *o, const char *db, const char *const *ids, int nids,
		       char *err, size_t errlen)
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
		o->st.runs++;
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
	struct trace_reader *r = trace_reader_start(path, err, errlen);
	if (!r)
		goto out;
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
			o->st.slices++;
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
			o->st.streams = nstreams;
			snprintf(tn, sizeof tn, "stream %" PRIu32, stream);
			meta_name(o, "thread_name", PID_GPU, stream, tn);
		}
		ev_begin(o);
		o->st.slices++;
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

/* ------------------------------------------------------------ the file */

/* Which source export_file writes. */
struct source {
	const char *db;                       /* stored runs ... */
	const char *const *ids;
	int nids;
	const struct perfetto_trace_opts *tr; /* ... or a trace (NULL for runs) */
};

static int export_file(const struct source *src, const char *out, struct perfetto_stats *st,
		       char *err, size_t errlen)
{
	char tmp[4200];
	if (st)
		memset(st, 0, sizeof *st);
	snprintf(tmp, sizeof tmp, "%.4100s.tmp.%ld", out, (long)getpid());
	struct out o = {.f = fopen(tmp, "w")};
	if (!o.f) {
		snprintf(err, errlen, "%s: %s", out, strerror(errno));
		return PERFETTO_ERR_OUTPUT;
	}
	fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"gpumemsim " GPUMEMSIM_VERSION
	      "\",\"counters\":\"bytes\"},\"traceEvents\":[", o.f);
	int rc = !src->tr ? export_runs(&o, src->db, src->ids, src->nids, err, errlen)
		 : export_trace(&o, src->tr->trace_path, src->tr->policy, src->tr->conf,
				src->tr->capacity, err, errlen);
	fputs("\n]}\n", o.f);
	int bad = ferror(o.f);
	if (fclose(o.f) != 0)
		bad = 1;
	if (st)
		*st = o.st;
	if (rc < 0 || bad || rename(tmp, out) != 0) {
		if (rc >= 0)
			snprintf(err, errlen, "writing %s failed", out);
		unlink(tmp);
		return -1;
	}
	return 0;
}

int perfetto_export_runs(const char *db, const char *const *run_ids, int nruns,
			 const char *out_path, struct perfetto_stats *st, char *err, size_t errlen)
{
	struct source src = {.db = db, .ids = run_ids, .nids = nruns};
	return export_file(&src, out_path, st, err, errlen);
}

int perfetto_export_trace(const struct perfetto_trace_opts *o, const char *out_path,
			  struct perfetto_stats *st, char *err, size_t errlen)
{
	struct source src = {.tr = o};
	return export_file(&src, out_path, st, err, errlen);
}
