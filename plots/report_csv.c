/*
 * report_csv.c: runs.csv beside the report (report_int.h): every selected
 * run, one row, in the report's order (group, then batch, trace, policy,
 * setting, capacity), with a header row. RFC 4180 quoting (lines end in
 * LF): a field holding a comma, a quote or a line break is quoted, quotes
 * doubled. step_time_ns is a prediction only where timed is 1, and
 * gpu_busy_fraction (the GPU's busy share of it; from 0.9 GPU-bound) is
 * empty elsewhere. Sizes in
 * bytes and times in ns (exact, for a spreadsheet or pandas), plus the
 * OOM verdict in words.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../sim/oom_text.h"
#include "report_int.h"

static void field(FILE *f, const char *s, int last)
{
	if (strpbrk(s, ",\"\r\n")) {
		fputc('"', f);
		for (; *s; s++) {
			if (*s == '"')
				fputc('"', f);
			fputc(*s, f);
		}
		fputc('"', f);
	} else {
		fputs(s, f);
	}
	fputs(last ? "\n" : ",", f);
}

static void u64f(FILE *f, uint64_t v)
{
	fprintf(f, "%" PRIu64 ",", v);
}

int report_csv(const struct report *r, const char *path, char *err, size_t errlen)
{
	static const char *const heads[] = {"group", "workload", "model", "batch", "trace_path",
		"trace_crc32", "run_id", "policy", "conf", "setting", "capacity_bytes",
		"peak_reserved_bytes", "peak_allocated_bytes", "peak_requested_bytes", "floor_bytes",
		"fragmentation", "device_allocs", "device_frees", "oom", "num_ooms", "oom_verdict",
		"oom_explained", "step_time_ns", "timed", "gpu_busy_fraction", "complete",
		"labels_json", "gpumemsim_version"};
	const size_t nh = sizeof heads / sizeof heads[0];
	FILE *f = fopen(path, "w");
	if (!f) {
		snprintf(err, errlen, "%s: cannot write", path);
		return -1;
	}
	for (size_t i = 0; i < nh; i++)
		field(f, heads[i], i + 1 == nh);
	for (int k = 0; k < r->ngroups; k++) {
		const struct rgroup *g = &r->groups[k];
		for (int i = 0; i < g->n; i++) {
			const struct plot_run *x = &r->runs[g->idx[i]];
			char set[128], crc[16], fr[32], why[1024] = "";
			field(f, g->name, 0);
			field(f, x->workload, 0);
			field(f, x->model, 0);
			field(f, x->batch, 0);
			field(f, x->trace_path, 0);
			snprintf(crc, sizeof crc, "%08" PRIx32, x->trace_crc32);
			field(f, crc, 0);
			fprintf(f, "%" PRId64 ",", x->id);
			field(f, x->policy, 0);
			field(f, x->conf, 0);
			field(f, plot_run_setting(x, set, sizeof set), 0);
			u64f(f, x->capacity);
			u64f(f, x->peak_reserved);
			u64f(f, x->peak_allocated);
			u64f(f, x->peak_requested);
			u64f(f, report_floor(r, x->trace_crc32));
			snprintf(fr, sizeof fr, "%.6f", x->fragmentation);
			field(f, fr, 0);
			u64f(f, x->device_allocs);
			u64f(f, x->device_frees);
			fprintf(f, "%d,", x->oom);
			u64f(f, x->num_ooms);
			field(f, x->oom_verdict, 0);
			if (x->oom)
				oom_explain(x->oom_verdict, x->oom_bytes, x->oom_allocated,
					    x->oom_reserved, x->oom_limit, x->capacity,
					    x->oom_largest_free, x->oom_cached_free, why, sizeof why);
			field(f, why, 0);
			u64f(f, x->step_time_ns);
			fprintf(f, "%d,", x->timed);
			/* empty where unknown (not timed, or stored before it was kept) */
			if (x->timed && x->gpu_busy >= 0)
				fprintf(f, "%.6f", x->gpu_busy);
			fprintf(f, ",%d,", x->complete);
			field(f, x->labels_json, 0);
			field(f, x->tool_version, 1);
		}
	}
	int bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		snprintf(err, errlen, "writing %s failed", path);
		return -1;
	}
	return 0;
}
