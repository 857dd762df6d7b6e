/*
 * cmd_run.c: `gpumemsim run TRACE --policy NAME ...`: replay one trace
 * under one allocator policy, print a summary (or one JSON object) and save
 * the run in the results database.
 *
 * The database is opened before the replay so an unwritable path fails in
 * a second rather than after a long replay; a database file this command
 * created is removed again when the run fails, so a failed run leaves
 * nothing behind.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../include/gpumemsim.h"
#include "../sim/timing.h"


struct run_args {
	const char *trace, *policy, *conf, *db;
	const char *cost;               /* --cost knobs (implies --timing) */
	const char *requests;           /* --requests: a no-caching capture's requests */
	enum sim_foreign_mode foreign;  /* --foreign */
	const char *allocator_source;   /* --allocator-source */
	enum sim_xla_mode xla;          /* --xla-requests */
	int timing;
	int allow_incomplete;
	uint64_t capacity;
	enum device_addr_mode mode;
	uint32_t timeline_points;
	int json, no_db, quiet;
	int steps;                      /* --steps: every step, percentiles, the worst */
	uint64_t steps_skip;            /* --steps-skip N: leave the first N out of them */
	const char *steps_figure;       /* --steps-figure FILE */
	const char *steps_figure_data;  /* --steps-figure-data DIR */
};

static const struct cli_opt run_opts[] = {
	{"--policy", "NAME", "allocator policy (gpumemsim policies lists them)"},
	{"--conf", "STRING", "the policy's knobs in the framework's syntax,\n"
			     "e.g. \"expandable_segments:True,max_split_size_mb:128\""},
	{"--capacity", "SIZE", "device memory, e.g. 80GiB, 40GB, 512MiB (default: the\n"
			       "trace header's total_memory, else unlimited)"},
	{"--addresses", "MODE", "synthetic (default) or recorded (follow the trace's 'g'\n"
				"records, the real allocator's addresses)"},
	{"--db", "PATH", "results database (default: " CLI_DEFAULT_DB " in the current\n"
			 "directory; created if missing)"},
	{"--no-db", NULL, "do not store the run"},
	{"--allow-incomplete", NULL, "replay a trace cut short (a killed capture: no 'end'\n"
				     "trailer, or a truncated gzip stream) up to where it\n"
				     "ends; the run is stored with complete = 0. Without\n"
				     "it such a trace is an error (exit 1)"},
	{"--json", NULL, "print one JSON object on stdout instead of the summary;\n"
			 "\"run_id\" is its last field (null with --no-db), so two\n"
			 "runs of the same inputs differ only on that line's value"},
	{"--timeline-points", "N", "size of the downsampled memory timeline (default 512)"},
	{"--timing", NULL, "predict the uncaptured program's step time: the host,\n"
			   "streams and GPU replayed, the capture's own cost taken\n"
			   "out, the trace's memory API times replaced by the\n"
			   "policy's (measured cost table of the GPU and driver,\n"
			   "the capture's own calls where it has enough;\n"
			   "docs/timing.md)"},
	{"--cost", "KNOBS", "override the model's constants (implies --timing), e.g.\n"
			    "\"hit_us=1,dev_call_us=6,host_scale=0.75,gpu_scale=2\";\n"
			    "timeline=0: the earlier model (fitted medians, the\n"
			    "captured host kept); calibrate=1: the capture's share\n"
			    "of the host measured by its uncaptured steps\n"
			    "(`capture --pause-at-step`); another batch size B2\n"
			    "from a capture at B: gpu_scale (the batch fit of kernel\n"
			    "time) and size_scale=B2/B (device calls cost as\n"
			    "requests that much larger would)"},
	{"--requests", "TRACE", "the request stream of a no-caching capture of the same\n"
				"program, on TRACE's (a caching-on capture's) timeline,\n"
				"aligned by kernel launch per step: the no-caching\n"
				"what-if of a caching-on capture (implies --timing)"},
	{"--foreign", "MODE", "memory outside the framework's allocator (cuBLAS/cuDNN\n"
			      "workspaces, module globals): device = beside the\n"
			      "policy, counted against the capacity but not in its\n"
			      "reserved; policy = given to the policy like the rest.\n"
			      "Default: device when the trace has the label\n"
			      "allocator_source=SUBSTR, else policy"},
	{"--allocator-source", "SUBSTR", "the framework allocator's library (a substring\n"
					 "of the 'a' source, e.g. libc10_cuda); overrides the\n"
					 "label; implies --foreign device unless policy is given"},
	{"--xla-requests", "MODE", CLI_XLA_REQUESTS_HELP},
	{"--steps", NULL, "every step (NVTX \"step N\" ranges or 'x step' records)\n"
			  "side by side: its peak allocated and reserved, what\n"
			  "reserved grew by, device calls, time, the NVTX range of\n"
			  "its peak; the p50/p90/p99/max over the steps and the\n"
			  "worst step (a run whose shapes vary); with --json, \"steps\""},
	{"--steps-skip", "N", "leave the first N steps out of the percentiles (warm-up)"},
	{"--steps-figure", "FILE", "draw each step's peaks and time, the worst named\n"
				   "(.png or .svg; gnuplot)"},
	{"--steps-figure-data", "DIR", "keep that figure's gnuplot script and data in DIR"},
	{"--quiet", NULL, "no progress on stderr"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "run TRACE --policy NAME [options]",
		  "Replay TRACE (plain or gzip) under an allocator policy; print a summary and\n"
		  "store the run.\n\n",
		  run_opts,
		  "\nExit status: 0 ok (a simulated OOM is a result), 1 failure (bad trace, bad\n"
		  "knob, database error: the message names file:line or the knob), 2 usage.\n");
}

/* 0 ok, EXIT_USAGE on a usage error, 1 when --steps-figure cannot be written
 * (message printed). */
static int parse_args(int argc, char **argv, struct run_args *a)
{
	memset(a, 0, sizeof *a);
	a->db = CLI_DEFAULT_DB;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v;
		/* the options that take a value are those with an ARG in run_opts */
		if (cli_take_opt("gpumemsim run", run_opts, argc, argv, &i, &v) < 0)
			return EXIT_USAGE;
		if (!strcmp(o, "--policy")) {
			a->policy = v;
		} else if (!strcmp(o, "--conf")) {
			a->conf = v;
		} else if (!strcmp(o, "--db")) {
			a->db = v;
		} else if (!strcmp(o, "--capacity")) {
			if (conf_size_with_unit(v, &a->capacity) < 0 || !a->capacity) {
				fprintf(stderr, "gpumemsim run: --capacity '%s': expected a size such "
					"as 80GiB, 40GB or 512MiB\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--addresses")) {
			int m;
			if (cli_parse_addresses("run", v, &m))
				return EXIT_USAGE;
			a->mode = (enum device_addr_mode)m;
		} else if (!strcmp(o, "--timeline-points")) {
			if (cli_parse_timeline_points("run", v, &a->timeline_points))
				return EXIT_USAGE;
		} else if (!strcmp(o, "--cost")) {
			a->cost = v;
			a->timing = 1;
		} else if (!strcmp(o, "--requests")) {
			a->requests = v;
			a->timing = 1;
		} else if (!strcmp(o, "--foreign")) {
			if (!strcmp(v, "device")) {
				a->foreign = SIM_FOREIGN_DEVICE;
			} else if (!strcmp(v, "policy")) {
				a->foreign = SIM_FOREIGN_POLICY;
			} else {
				fprintf(stderr, "gpumemsim run: --foreign '%s': expected device or "
					"policy\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--allocator-source")) {
			if (!*v) {
				fprintf(stderr, "gpumemsim run: --allocator-source: expected a "
					"non-empty substring, e.g. libc10_cuda\n");
				return EXIT_USAGE;
			}
			a->allocator_source = v;
		} else if (!strcmp(o, "--xla-requests")) {
			int m;
			if (cli_parse_xla_requests("run", v, &m))
				return EXIT_USAGE;
			a->xla = (enum sim_xla_mode)m;
		} else if (!strcmp(o, "--timing")) {
			a->timing = 1;
		} else if (!strcmp(o, "--steps")) {
			a->steps = 1;
		} else if (!strcmp(o, "--steps-skip")) {
			char *end;
			a->steps_skip = strtoull(v, &end, 10);
			if (!*v || *end || *v == '-') {
				fprintf(stderr, "gpumemsim run: --steps-skip '%s': expected a number "
					"of steps\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(o, "--steps-figure")) {
			if (plot_format_from_path(v) < 0) {
				fprintf(stderr, "gpumemsim run: --steps-figure %s: the figure's name must "
					"end in .png or .svg\n", v);
				return EXIT_USAGE;
			}
			a->steps_figure = v;
		} else if (!strcmp(o, "--steps-figure-data")) {
			a->steps_figure_data = v;
		} else if (!strcmp(o, "--json")) {
			a->json = 1;
		} else if (!strcmp(o, "--no-db")) {
			a->no_db = 1;
		} else if (!strcmp(o, "--allow-incomplete")) {
			a->allow_incomplete = 1;
		} else if (!strcmp(o, "--quiet")) {
			a->quiet = 1;
		} else if (o[0] == '-' && o[1]) {
			fprintf(stderr, "gpumemsim run: unknown option '%s'\n", o);
			return EXIT_USAGE;
		} else if (!a->trace) {
			a->trace = o;
			continue;
		} else {
			fprintf(stderr, "gpumemsim run: one trace at a time ('%s' and '%s')\n",
				a->trace, o);
			return EXIT_USAGE;
		}
	}
	if (!a->trace || !a->policy) {
		fprintf(stderr, "gpumemsim run: %s\n", !a->trace ? "missing TRACE" : "missing --policy");
		usage(stderr);
		return EXIT_USAGE;
	}
	/* a figure that cannot be drawn fails now, not after the replay */
	if (a->steps_figure && cli_figure_writable("gpumemsim run", "--steps-figure", a->steps_figure) < 0)
		return 1;
	return 0;
}

static void print_json(const struct sim_result *r, const struct cost_model *cm,
		       const struct timing_calibration *cal, const struct run_args *a,
		       int has_id, int64_t run_id)
{
	struct json j;
	json_init(&j, stdout);
	json_begin_object(&j);
	json_kv_string(&j, "trace", r->trace_path);
	json_kv_u64(&j, "trace_crc32", r->trace_crc32);
	json_kv_u64(&j, "trace_bytes", r->trace_bytes);
	json_kv_string(&j, "policy", r->policy);
	json_kv_string(&j, "conf", r->conf);
	json_kv_u64(&j, "capacity", r->capacity);
	json_key(&j, "labels");
	json_begin_object(&j);
	for (size_t i = 0; i < r->nlabels; i++)
		json_kv_string(&j, r->labels[i].key, r->labels[i].value);
	json_end_object(&j);
	json_kv_bool(&j, "complete", r->complete);
	json_kv_u64(&j, "allocs", r->allocs);
	json_kv_u64(&j, "frees", r->frees);
	json_kv_u64(&j, "static_replaced", r->static_replaced);
	json_kv_u64(&j, "peak_allocated", r->peak_allocated);
	json_kv_u64(&j, "peak_requested", r->peak_requested);
	json_kv_u64(&j, "peak_reserved", r->peak_reserved);
	json_kv_u64(&j, "device_allocs", r->device_allocs);
	json_kv_u64(&j, "device_frees", r->device_frees);
	json_kv_double(&j, "fragmentation", r->fragmentation);
	json_kv_bool(&j, "oom", r->oom);
	json_kv_u64(&j, "num_ooms", r->num_ooms);
	json_kv_u64(&j, "workspace_retries", r->workspace_retries);
	json_key(&j, "first_oom");
	if (r->oom) {
		json_begin_object(&j);
		json_kv_u64(&j, "t_ns", r->oom_t);
		json_kv_u64(&j, "bytes", r->oom_bytes);
		json_kv_u64(&j, "line", r->oom_line);
		json_kv_u64(&j, "allocated", r->oom_allocated);
		json_kv_u64(&j, "reserved", r->oom_reserved);
		json_kv_i64(&j, "largest_free_block", r->oom_largest_free);
		json_kv_i64(&j, "cached_free_bytes", r->oom_cached_free);
		json_kv_u64(&j, "limit", r->oom_limit);
		json_kv_string(&j, "verdict", r->oom_verdict);
		if (r->foreign_routed) {
			json_kv_u64(&j, "foreign", r->oom_foreign);
			json_kv_string(&j, "foreign_top", r->oom_foreign_lib);
		}
		json_end_object(&j);
	} else {
		json_null(&j);
	}
	if (r->foreign_routed) {
		/* only with routing on: an unlabelled trace prints what it always did */
		json_key(&j, "foreign");
		json_begin_object(&j);
		json_kv_string(&j, "allocator_source", r->allocator_source);
		json_kv_u64(&j, "allocs", r->foreign_allocs);
		json_kv_u64(&j, "peak_foreign", r->peak_foreign);
		json_kv_u64(&j, "device_peak", r->device_peak);
		json_key(&j, "libraries");
		json_begin_array(&j);
		for (size_t i = 0; i < r->nforeign_libs; i++) {
			const struct sim_foreign_lib *l = &r->foreign_libs[i];
			json_begin_object(&j);
			json_kv_string(&j, "name", l->name);
			json_kv_u64(&j, "allocs", l->allocs);
			json_kv_u64(&j, "peak", l->peak);
			if (r->oom)
				json_kv_u64(&j, "at_oom", l->at_oom);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
	}
	if (r->xla_applied) {
		/* only when read as XLA's request stream: other traces print what they did */
		json_key(&j, "xla_requests");
		json_begin_object(&j);
		json_kv_u64(&j, "lowered", r->xla_lowered);
		json_kv_u64(&j, "lowered_bytes", r->xla_lowered_bytes);
		json_kv_u64(&j, "outside", r->xla_outside);
		json_kv_u64(&j, "outside_bytes", r->xla_outside_bytes);
		json_end_object(&j);
	}
	json_kv_u64(&j, "trace_duration_ns", r->trace_duration_ns);
	json_kv_u64(&j, "sim_duration_ns", r->sim_duration_ns);
	json_kv_u64(&j, "step_count", r->step_count);
	json_kv_u64(&j, "step_time_ns", r->step_time_ns);
	json_key(&j, "steps_ns");
	json_begin_array(&j);
	for (size_t i = 0; i < r->nsteps; i++)
		json_u64(&j, r->step_ns[i]);
	json_end_array(&j);
	json_key(&j, "steps_gpu_busy_ns");
	json_begin_array(&j);
	for (size_t i = 0; i < r->nsteps; i++)
		json_u64(&j, r->step_gpu_ns[i]);
	json_end_array(&j);
	json_kv_double(&j, "gpu_busy_fraction", r->gpu_busy_fraction);
	if (r->timed && r->step_time_ns)
		json_kv_string(&j, "bound", sim_gpu_bound(r->gpu_busy_fraction) ? "gpu" : "host");
	json_key(&j, "uncaptured_steps_ns");
	json_begin_array(&j);
	for (size_t i = 0; i < r->nuncaptured_steps; i++)
		json_u64(&j, r->uncaptured_step_ns[i]);
	json_end_array(&j);
	json_key(&j, "timing");
	if (r->timed && cm) {
		json_begin_object(&j);
		json_kv_u64(&j, "mem_api_ns", r->mem_api_ns);
		json_kv_u64(&j, "mem_wait_ns", r->mem_wait_ns);
		json_kv_u64(&j, "api_removed_ns", r->api_removed_ns);
		json_kv_double(&j, "malloc_us", cm->malloc_c.small_ns / 1e3);
		json_kv_double(&j, "malloc_large_us", cm->malloc_c.large_ns / 1e3);
		json_kv_double(&j, "malloc_us_per_mib", cm->malloc_c.large_ns_per_mib / 1e3);
		json_kv_double(&j, "free_us", cm->free_c.small_ns / 1e3);
		json_kv_double(&j, "free_large_us", cm->free_c.large_ns / 1e3);
		json_kv_double(&j, "free_us_per_mib", cm->free_c.large_ns_per_mib / 1e3);
		json_kv_double(&j, "map_us", cm->map_ns / 1e3);
		json_kv_double(&j, "map_page_us", cm->map_page_ns / 1e3);
		json_kv_double(&j, "unmap_us", cm->unmap_ns / 1e3);
		json_kv_double(&j, "unmap_page_us", cm->unmap_page_ns / 1e3);
		json_kv_double(&j, "pool_alloc_us", cm->pool_alloc_ns / 1e3);
		json_kv_double(&j, "pool_free_us", cm->pool_free_ns / 1e3);
		json_kv_double(&j, "pool_grow_us", cm->pool_grow_ns / 1e3);
		json_kv_double(&j, "pool_trim_us", cm->pool_trim_ns / 1e3);
		json_kv_double(&j, "hit_us", cm->hit_ns / 1e3);
		json_kv_bool(&j, "free_sync", cm->free_sync);
		json_kv_u64(&j, "fit_mallocs", cm->n_malloc);
		json_kv_u64(&j, "fit_frees", cm->n_free);
		json_kv_u64(&j, "fit_pool_calls", cm->n_pool);
		json_kv_bool(&j, "timeline", cm->timeline);
		if (cm->timeline) {
			json_kv_string(&j, "cost_table", cm->table_name[0] ? cm->table_name : "fitted");
			json_kv_string(&j, "capture_mode", cm->cap_mode);
			json_kv_double(&j, "capture_share", cm->scale_calls ? 0 : 1.0 - cm->host_scale);
			json_kv_double(&j, "dev_call_us", cm->dev_call_ns / 1e3);
			json_kv_double(&j, "dev_call_frac", cm->dev_call_frac);
			json_kv_double(&j, "gpu_scale", cm->gpu_scale);
			json_kv_double(&j, "size_scale", cm->size_scale);
			json_kv_double(&j, "cap_api_us", cm->cap_api_ns / 1e3);
			json_kv_double(&j, "cap_call_us", cm->cap_call_ns / 1e3);
			json_kv_double(&j, "cap_mem_us", cm->cap_mem_ns / 1e3);
			json_kv_double(&j, "cap_range_us", cm->cap_range_ns / 1e3);
			json_kv_double(&j, "cap_own", cm->cap_own);
			json_kv_double(&j, "launch_latency_us", cm->launch_latency_ns / 1e3);
			json_kv_double(&j, "trace_hit_us", cm->trace_hit_ns / 1e3);
			json_key(&j, "calibration");
			if (cal->measured) {
				/* the share measured by the capture's uncaptured steps */
				json_begin_object(&j);
				json_kv_u64(&j, "uncaptured_steps", cal->uncaptured_steps);
				json_kv_u64(&j, "uncaptured_step_ns", cal->uncaptured_ns);
				json_kv_u64(&j, "replayed_step_ns", cal->replayed_ns);
				json_kv_double(&j, "mode_share", cal->mode_share);
				json_kv_double(&j, "share", cal->share);
				json_kv_bool(&j, "at_bound", cal->at_bound);
				json_end_object(&j);
			} else {
				json_null(&j);
			}
		}
		json_end_object(&j);
	} else {
		json_null(&j);
	}
	json_key(&j, "stats");
	json_begin_object(&j);
	for (size_t i = 0; i < r->nstats; i++)
		json_kv_i64(&j, r->stats[i].name, r->stats[i].value);
	json_end_object(&j);
	json_key(&j, "events");
	json_begin_array(&j);
	for (size_t i = 0; i < r->nevents; i++) {
		json_begin_object(&j);
		json_kv_string(&j, "kind", sim_event_kind_name(r->events[i].kind));
		json_kv_u64(&j, "t_ns", r->events[i].t);
		json_kv_u64(&j, "bytes", r->events[i].bytes);
		json_kv_u64(&j, "line", r->events[i].line);
		json_kv_string(&j, "detail", r->events[i].detail);
		json_end_object(&j);
	}
	json_end_array(&j);
	json_key(&j, "timeline");
	json_begin_array(&j);
	for (size_t i = 0; i < r->ntimeline; i++) {
		json_begin_array(&j);
		json_u64(&j, r->timeline[i].t);
		json_u64(&j, r->timeline[i].allocated);
		json_u64(&j, r->timeline[i].reserved);
		json_end_array(&j);
	}
	json_end_array(&j);
	if (a->steps)
		run_steps_json(&j, r, (size_t)a->steps_skip);
	json_key(&j, "run_id");
	if (has_id)
		json_i64(&j, run_id);
	else
		json_null(&j);
	json_end_object(&j);
}

static void print_text(const struct sim_result *r, const struct timing_calibration *cal,
		       int has_id, int64_t run_id, const char *db)
{
	char b1[32], b2[32], b3[32];
	printf("trace            %s (%s)\n", r->trace_path, r->complete ? "complete" : "incomplete: no trailer");
	printf("policy           %s%s%s%s\n", r->policy, r->conf[0] ? "  conf \"" : "", r->conf,
	       r->conf[0] ? "\"" : "");
	printf("capacity         %s\n", r->capacity ? size_fmt(r->capacity, b1, sizeof b1) : "unlimited");
	printf("requests         %" PRIu64 " allocs, %" PRIu64 " frees\n", r->allocs, r->frees);
	printf("peak allocated   %s (requested %s)\n", size_fmt(r->peak_allocated, b1, sizeof b1),
	       size_fmt(r->peak_requested, b2, sizeof b2));
	printf("peak reserved    %s\n", size_fmt(r->peak_reserved, b1, sizeof b1));
	printf("fragmentation    %.4f (1 - peak allocated / peak reserved)\n", r->fragmentation);
	if (r->xla_applied) {
		if (r->xla_lowered)
			printf("xla requests     %" PRIu64 " read as whole 2 MiB granules, replayed at "
			       "n - 2 MiB + 1 B (a lower bound); %" PRIu64 " never freed (outside "
			       "XLA's allocator)\n", r->xla_lowered, r->xla_outside);
		else
			printf("xla requests     at the trace's sizes (not all whole 2 MiB granules: "
			       "XLA's own, from its log); %" PRIu64 " never freed (outside XLA's "
			       "allocator)\n", r->xla_outside);
	}
	if (r->foreign_routed && !strcmp(r->allocator_source, SIM_XLA_SOURCE)) {
		printf("outside          %s at most beside the allocator (%" PRIu64 " allocations "
		       "never freed: not XLA's)\n", size_fmt(r->peak_foreign, b1, sizeof b1),
		       r->foreign_allocs);
	} else if (r->foreign_routed) {
		printf("outside          %s at most beside the allocator (%" PRIu64 " allocations not "
		       "from '%s', or module globals)\n", size_fmt(r->peak_foreign, b1, sizeof b1),
		       r->foreign_allocs, r->allocator_source);
	}
	if (r->foreign_routed) {
		for (size_t i = 0; i < r->nforeign_libs; i++)
			printf("                 %-40s %s at most, %" PRIu64 " allocations\n",
			       r->foreign_libs[i].name,
			       size_fmt(r->foreign_libs[i].peak, b1, sizeof b1),
			       r->foreign_libs[i].allocs);
		printf("device peak      %s (reserved + outside; nvidia-smi adds the CUDA context)\n",
		       size_fmt(r->device_peak, b1, sizeof b1));
	}
	printf("device calls     %" PRIu64 " allocs/maps, %" PRIu64 " frees/unmaps\n",
	       r->device_allocs, r->device_frees);
	if (r->workspace_retries)
		printf("workspaces       cut %" PRIu64 " times to fit (a convolution's workspace "
		       "that did not: PyTorch's cuDNN path then takes a smaller one)\n",
		       r->workspace_retries);
	if (r->oom) {
		printf("OOM              %" PRIu64 " failed request(s); first at line %" PRIu64
		       ": %s with %s allocated, %s reserved\n", r->num_ooms, r->oom_line,
		       size_fmt(r->oom_bytes, b1, sizeof b1),
		       size_fmt(r->oom_allocated, b2, sizeof b2),
		       size_fmt(r->oom_reserved, b3, sizeof b3));
		if (r->oom_largest_free >= 0)
			printf("                 largest free block %s\n",
			       size_fmt((uint64_t)r->oom_largest_free, b1, sizeof b1));
		if (r->oom_cached_free >= 0)
			printf("                 cached free %s\n",
			       size_fmt((uint64_t)r->oom_cached_free, b1, sizeof b1));
		char why[256];
		if (!strcmp(r->oom_verdict, "foreign"))
			oom_explain_foreign(r->oom_bytes, r->oom_allocated, r->oom_foreign,
						r->capacity, r->oom_foreign_lib, why, sizeof why);
		else
			oom_explain(r->oom_verdict, r->oom_bytes, r->oom_allocated,
					r->oom_reserved, r->oom_limit, r->capacity,
					r->oom_largest_free, r->oom_cached_free, why, sizeof why);
		printf("                 verdict: %s\n", why);
	} else {
		printf("OOM              none\n");
	}
	printf("duration         trace %.3f ms, simulated %.3f ms%s\n", r->trace_duration_ns / 1e6,
	       r->sim_duration_ns / 1e6, r->timed ? " (timing model)" : "");
	if (r->step_count)
		printf("step time        %.3f ms (mean of %" PRIu64 " step(s)%s)\n",
		       r->step_time_ns / 1e6, r->step_count > 1 ? r->step_count - 1 : r->step_count,
		       r->step_count > 1 ? ", first excluded" : "");
	if (r->timed && r->step_time_ns) {
		/* what bounds the step says how far to trust it: the validation
		 * sets (docs/timing.md, "GPU-bound and host-bound") put GPU-bound
		 * predictions within a few percent; host-bound ones carry the
		 * host's speed, which varies from process to process */
		double f = r->gpu_busy_fraction;
		printf("GPU busy         %.3f ms a step, %.0f%% of it: %s\n", f * r->step_time_ns / 1e6,
		       100 * f, sim_gpu_bound(f) ? "GPU-bound"
						   : "host-bound (the host's speed differs by up to "
						     "25% between processes of one program)");
	}
	if (r->nuncaptured_steps) {
		uint64_t *u = r->uncaptured_step_ns;
		uint64_t lo = u[0], hi = u[0];
		for (size_t i = 1; i < r->nuncaptured_steps; i++) {
			lo = u[i] < lo ? u[i] : lo;
			hi = u[i] > hi ? u[i] : hi;
		}
		printf("uncaptured steps %zu, %.3f to %.3f ms (the capture was paused: the program's "
		       "own steps on the capture's host, not replayed)\n", r->nuncaptured_steps,
		       lo / 1e6, hi / 1e6);
	}
	if (r->timed && cal->measured)
		printf("capture cost     share %.3f of the host, measured: %zu uncaptured step(s), "
		       "median %.3f ms (the capture mode's share: %.3f)%s\n", cal->share,
		       cal->uncaptured_steps, cal->uncaptured_ns / 1e6, cal->mode_share,
		       cal->at_bound ? "; at its bound, the replay cannot reach it" : "");
	if (r->timed)
		printf("memory time      %.3f ms in calls and hits, %.3f ms waiting in frees "
		       "(trace's memory API: %.3f ms, removed)\n", r->mem_api_ns / 1e6,
		       r->mem_wait_ns / 1e6, r->api_removed_ns / 1e6);
	for (size_t i = 0; i < r->nstats; i++)
		printf("  %-30s %" PRId64 "\n", r->stats[i].name, r->stats[i].value);
	if (has_id)
		printf("run id           %" PRId64 " in %s\n", run_id, db);
}

/* Exit codes as cli.h says; an OOM in the replay is a result (0). */
int cmd_run(int argc, char **argv)
{
	struct run_args a;
	struct sim_result res;
	struct store *st = NULL;
	char err[1024];
	int ret = 1, db_created = 0, has_id = 0;
	int64_t run_id = 0;
	struct stat sb;
	struct cost_model cm;
	struct timing_calibration cal;

	memset(&res, 0, sizeof res);
	memset(&cal, 0, sizeof cal);
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	}
	int u = parse_args(argc, argv, &a);
	if (u)
		return u;
	const struct alloc_policy *pol = policy_find(a.policy);
	if (!pol) {
		char names[1024];
		policy_list_names(names, sizeof names);
		fprintf(stderr, "gpumemsim run: unknown policy '%s' (known: %s)\n", a.policy, names);
		return 1;
	}
	char merged[4096] = "";
	const char *trace = a.trace;
	if (a.requests) {
		/* the caching-on capture's timeline with the no-caching capture's
		 * requests, in a temporary trace removed at the end */
		if (tmp_file(merged, sizeof merged, "requests") < 0) {
			fprintf(stderr, "gpumemsim run: --requests: cannot create a temporary file in %s\n",
				tmp_dir());
			return 1;
		}
		if (timing_merge_requests(a.trace, a.requests, merged, err, sizeof err) < 0) {
			fprintf(stderr, "gpumemsim run: --requests: %s\n", err);
			unlink(merged);
			return 1;
		}
		trace = merged;
	}
	/* with --requests the device-call costs are measured on the no-caching
	 * capture (same program, same host): the caching one has none */
	if (a.timing && cost_fit_trace(a.requests ? a.requests : trace, a.cost, &cm, err,
				       sizeof err) < 0) {
		fprintf(stderr, "gpumemsim run: %s\n", err);
		if (merged[0])
			unlink(merged);
		return 1;
	}
	/* the capture's cost measured by its own uncaptured steps: on the
	 * capture given, whose host the replay keeps (not the requests') */
	if (a.timing && timing_calibrate(a.trace, &cm, &cal, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim run: calibrating the capture's cost: %s\n", err);
		if (merged[0])
			unlink(merged);
		return 1;
	}
	/* the caching run's own allocator cost is in the requests' gaps */
	if (a.requests && cm.timeline && !(a.cost && strstr(a.cost, "trace_hit_us")))
		cm.trace_hit_ns = cm.hit_ns;
	if (!a.no_db) {
		db_created = stat(a.db, &sb) != 0;
		st = store_open(a.db, err, sizeof err);
		if (!st) {
			fprintf(stderr, "gpumemsim run: %s\n", err);
			goto out;
		}
	}
	struct sim_options o = {
		.trace_path = trace,
		.policy = pol,
		.conf = a.conf,
		.capacity = a.capacity,
		.addr_mode = a.mode,
		.allow_incomplete = a.allow_incomplete,
		.timeline_points = a.timeline_points,
		.progress = !a.quiet && isatty(STDERR_FILENO),
		.cost = a.timing ? &cm : NULL,
		.foreign = a.foreign,
		.allocator_source = a.allocator_source,
		.xla_requests = a.xla,
	};
	if (sim_run(&o, &res, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim run: %s\n", err);
		goto out;
	}
	if (res.static_replaced)
		fprintf(stderr, "gpumemsim run: note: %s: %" PRIu64 " static (module) allocations "
			"re-registered at a live address without a free (module reloaded); each "
			"freed the earlier one\n", a.trace, res.static_replaced);
	if (st) {
		if (store_save_run(st, &res, GPUMEMSIM_VERSION, &run_id, err, sizeof err) < 0) {
			fprintf(stderr, "gpumemsim run: %s\n", err);
			goto out;
		}
		has_id = 1;
		db_created = 0; /* it holds a run now */
	}
	if (a.json)
		print_json(&res, a.timing ? &cm : NULL, &cal, &a, has_id, run_id);
	else
		print_text(&res, &cal, has_id, run_id, a.db);
	if (a.steps && !a.json)
		run_steps_text(&res, (size_t)a.steps_skip);
	if (a.steps_figure && plot_steps(&res, (size_t)a.steps_skip, a.steps_figure,
					  a.steps_figure_data, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim run: --steps-figure %s: %s\n", a.steps_figure, err);
		goto out;
	}
	if (fflush(stdout) != 0) {
		fprintf(stderr, "gpumemsim run: writing the output failed\n");
		goto out;
	}
	ret = 0;
out:
	if (merged[0])
		unlink(merged);
	store_close(st);
	if (db_created)
		store_remove_files(a.db);
	sim_result_free(&res);
	return ret;
}
