/*
 * cmd_import.c: `gpumemsim import torch-snapshot FILE -o TRACE` and
 * `gpumemsim import kineto FILE.json -o TRACE`: other tools' memory records
 * into gpumemsim traces (traces/import_torch.h, traces/import_kineto.h), and
 * `gpumemsim import torch-markers --truth TRUTH CAPTURE -o OUT`: the
 * truth record's empty_cache() calls copied into a capture
 * (traces/markers.h), and `gpumemsim import xla-sizes --log LOG CAPTURE -o
 * OUT`: XLA's requested sizes from its allocator log put into a JAX capture
 * (traces/xla_sizes.h). docs/import.md compares the inputs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>

#include "cli.h"
#include "../include/gpumemsim.h"

/* torch-snapshot, kineto and torch-markers share one parse loop and so one
 * table; each option's help says which format it is for. */
enum { IO_OUT, IO_JSON, IO_LABEL, IO_TRUTH, IO_SOURCE, IO_MIN_MATCH, IO_MAX_GAP, IO_LOG };

static const struct cli_opt import_opts[] = {
	[IO_OUT] = {"-o", "TRACE|OUT", "the trace to write"},
	[IO_JSON] = {"--json", "META", "torch-snapshot: metadata instead of NAME.json beside FILE"},
	[IO_LABEL] = {"--label", "KEY=VALUE", "torch-snapshot, kineto: a label for the trace\n"
					      "(repeatable; batch=N makes it usable by explain,\n"
					      "whatif, maxbatch)"},
	[IO_TRUTH] = {"--truth", "TRUTH", "torch-markers: the record with the empty_cache() calls"},
	[IO_SOURCE] = {"--source", "SUBSTR", "torch-markers: the framework's allocations' source\n"
					     "(default libc10_cuda)"},
	[IO_MIN_MATCH] = {"--min-match", "F", "torch-markers: least fraction of allocations matched\n"
					      "exactly (default 0.90)"},
	[IO_MAX_GAP] = {"--max-gap", "N", "torch-markers: most unmatched allocations around a\n"
					  "marker (default 16)"},
	[IO_LOG] = {"--log", "LOG", "xla-sizes: XLA's allocator log of the captured run"},
	CLI_OPT_END,
};

static void import_usage(FILE *f)
{
	cli_usage(f,
		  "import torch-snapshot FILE -o TRACE [--json META] [--label K=V]...\n"
		  "       gpumemsim import kineto FILE.json -o TRACE [--label K=V]...\n"
		  "       gpumemsim import torch-markers --truth TRUTH CAPTURE -o OUT\n"
		  "                 [--source SUBSTR] [--min-match F] [--max-gap N]\n"
		  "       gpumemsim import xla-sizes --log LOG CAPTURE -o OUT",
		  "torch-snapshot: FILE is torch.cuda.memory._snapshot()['device_traces'][dev]\n"
		  "as text, one entry a line: 'action addr size stream time_us' (plain or gzip).\n"
		  "A FILE ending in .pickle (torch.cuda.memory._dump_snapshot()) is converted\n"
		  "first with python3 traces/torch_snapshot_to_text.py (no torch needed;\n"
		  "override the script with GPUMEMSIM_TORCH_HELPER). NAME.json beside FILE (or\n"
		  "--json) adds the GPU, total memory and the labels model, batch, conf, fraction.\n"
		  "A snapshot without allocation history (no _record_memory_history) is an error.\n\n"
		  "kineto: FILE is torch.profiler's export_chrome_trace (plain or gzip), recorded\n"
		  "with profile_memory=True and activities=[CPU, CUDA]. Its CUDA \"[memory]\" events\n"
		  "(the caching allocator's requests, one device: the lowest id) become allocations\n"
		  "and frees; kernels, copies and memsets their records; record_function ranges\n"
		  "ranges, with \"ProfilerStep#N\" named \"step N\". Memory live before the\n"
		  "profile started is allocated at its start. Labels: source=kineto, torch (when\n"
		  "the profile has torch_version), kineto_peak_allocated/_reserved (the allocator's\n"
		  "own peaks in the profile), kineto_before_profile (bytes live before it).\n\n"
		  "torch-markers: CAPTURE (taken with PYTORCH_NO_CUDA_MEMORY_CACHING=1) cannot\n"
		  "see the empty_cache() PyTorch calls after each cuDNN benchmark search. TRUTH\n"
		  "(the same steps with the caching allocator on: snapshot text or its import)\n"
		  "has them. The two request streams are aligned by allocation size (capture\n"
		  "allocations whose source contains SUBSTR, default libc10_cuda; the others\n"
		  "are reported by source) and each 'x empty_cache' is copied before the matching\n"
		  "capture record. Refuses when under F (default 0.90) of the allocations match\n"
		  "exactly, or a marker sits among more than N (default 16) unmatched ones.\n"
		  "Everything else in CAPTURE is kept; OUT gets the label empty_cache_markers=K.\n\n"
		  "xla-sizes: CAPTURE is a JAX run with XLA_PYTHON_CLIENT_ALLOCATOR=platform,\n"
		  "whose allocations CUPTI sees rounded up to 2 MiB granules; LOG (plain or gzip)\n"
		  "is that run's stderr with TF_CPP_MIN_LOG_LEVEL=0\n"
		  "TF_CPP_VMODULE=cuda_device_allocator=3 (capture/jax/recipe.sh keeps it). Each\n"
		  "'Allocated ptr=P requested size: N padded size: M' line is paired with the\n"
		  "capture's allocation at P (in order) and gives it, and its free, N bytes.\n"
		  "Refuses a line with no allocation or another padded size. OUT gets the\n"
		  "label xla_sizes=K (allocations resized).\n\n",
		  import_opts,
		  "\nTRACE/OUT are gzip-compressed when they end in .gz and written atomically.\n");
}

static int import_markers(const char *capture, const char *truth, const char *out,
			  const struct markers_options *o)
{
	char err[2048];
	struct markers_report rep;
	if (markers_transfer(capture, truth, out, o, &rep, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim import: %s\n", err);
		return 1;
	}
	fprintf(stderr, "%s: %" PRIu64 " empty_cache markers placed (%" PRIu64 " in the truth, %"
		PRIu64 " before a free rather than an alloc, widest unmatched run around one: %"
		PRIu64 ")\n", out, rep.markers, rep.truth_markers, rep.moved_by_free,
		rep.max_marker_gap);
	fprintf(stderr, "alignment: %" PRIu64 " framework allocations of %" PRIu64 " in the capture, %"
		PRIu64 " in the truth: %" PRIu64 " matched exactly (%.1f%%), %" PRIu64
		" paired by position, %" PRIu64 " capture-only, %" PRIu64 " truth-only; %" PRIu64
		" edits\n", rep.framework_allocs, rep.capture_allocs, rep.truth_allocs, rep.matched,
		rep.match_ratio * 100.0, rep.substituted, rep.capture_only, rep.truth_only, rep.edits);
	for (size_t i = 0; i < rep.nforeign; i++) {
		char b1[32], b2[32];
		const struct markers_source *s = &rep.foreign[i];
		fprintf(stderr, "not the framework's allocator: %s: %" PRIu64 " allocations, %s in all, "
			"%s live at most\n", s->name, s->allocs, size_fmt(s->bytes, b1, sizeof b1),
			size_fmt(s->peak_live, b2, sizeof b2));
	}
	if (rep.foreign_other)
		fprintf(stderr, "not the framework's allocator: %" PRIu64 " more allocations of other "
			"sources\n", rep.foreign_other);
	return 0;
}

static int import_xla_sizes(const char *capture, const char *log, const char *out)
{
	char err[1024], b1[32], b2[32];
	struct xla_sizes_report rep;
	if (xla_sizes_transfer(capture, log, out, &rep, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim import: %s\n", err);
		return 1;
	}
	fprintf(stderr, "%s: %" PRIu64 " of %" PRIu64 " device allocations resized from XLA's log "
		"(%s mapped -> %s requested); %" PRIu64 " not XLA's kept as captured\n", out,
		rep.resized, rep.device_allocs, size_fmt(rep.bytes_before, b1, sizeof b1),
		size_fmt(rep.bytes_after, b2, sizeof b2), rep.unpaired_allocs);
	if (rep.unpaired_lines)
		fprintf(stderr, "%s: the capture was cut short: %" PRIu64 " of the log's lines name "
			"allocations after its end\n", out, rep.unpaired_lines);
	return 0;
}

static int import_kineto_cmd(const char *in, const char *out, const struct trace_label *labels,
			     size_t nlab)
{
	char err[1024], b1[32], b2[32];
	struct import_kineto_stats st;
	if (import_kineto(in, out, labels, nlab, &st, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim import: %s\n", err);
		return 1;
	}
	fprintf(stderr, "%s: %" PRIu64 " events, device %" PRId64 ": %" PRIu64 " memory events -> %"
		PRIu64 " allocs, %" PRIu64 " frees; %" PRIu64 " kernels, %" PRIu64 " memcpys, %"
		PRIu64 " memsets, %" PRIu64 " ranges (%" PRIu64 " steps), %" PRIu64 " ooms\n", out,
		st.events, st.device, st.mem_events, st.allocs, st.frees, st.kernels, st.memcpys,
		st.memsets, st.ranges, st.steps, st.ooms);
	if (st.before_allocs)
		fprintf(stderr, "live before the profile started: %s in %" PRIu64 " allocation%s "
			"made at its start\n", size_fmt(st.before_bytes, b1, sizeof b1),
			st.before_allocs, st.before_allocs == 1 ? "" : "s");
	if (st.peak_allocated || st.peak_reserved)
		fprintf(stderr, "the allocator's own peaks in the profile: allocated %s, reserved %s\n",
			size_fmt(st.peak_allocated, b1, sizeof b1),
			size_fmt(st.peak_reserved, b2, sizeof b2));
	if (st.cpu_mem_events || st.other_device || st.relive)
		fprintf(stderr, "left out: %" PRIu64 " CPU memory events, %" PRIu64 " events of other "
			"devices; %" PRIu64 " allocations at a live address (a lost free)\n",
			st.cpu_mem_events, st.other_device, st.relive);
	return 0;
}

/* Parse the options, convert, say what was recognised. */
int cmd_import(int argc, char **argv)
{
	const char *kind = NULL, *in = NULL, *out = NULL, *json = NULL, *truth = NULL, *log = NULL;
	struct trace_label labels[32];
	char lab[32][512];
	size_t nlab = 0;
	struct markers_options mo = { NULL, 0, 0 };
	for (int i = 1; i < argc; i++) {
		char *end;
		const struct cli_opt *opt = cli_opt_match(import_opts, argv[i]);
		if (cli_is_help(argv[i])) {
			import_usage(stdout);
			return 0;
		} else if (opt == &import_opts[IO_OUT] && i + 1 < argc) {
			out = argv[++i];
		} else if (opt == &import_opts[IO_JSON] && i + 1 < argc) {
			json = argv[++i];
		} else if (opt == &import_opts[IO_LABEL] && i + 1 < argc) {
			const char *kv = argv[++i];
			if (!cli_label_ok(kv) || strlen(kv) >= sizeof lab[0] || nlab == 32) {
				fprintf(stderr, "gpumemsim import: --label wants KEY=VALUE (a key "
						"without spaces, one line, at most 32), got '%s'\n", kv);
				return EXIT_USAGE;
			}
			snprintf(lab[nlab], sizeof lab[nlab], "%s", kv);
			char *eq = strchr(lab[nlab], '=');
			*eq = '\0';
			labels[nlab].key = lab[nlab];
			labels[nlab].value = eq + 1;
			nlab++;
		} else if (opt == &import_opts[IO_TRUTH] && i + 1 < argc) {
			truth = argv[++i];
		} else if (opt == &import_opts[IO_LOG] && i + 1 < argc) {
			log = argv[++i];
		} else if (opt == &import_opts[IO_SOURCE] && i + 1 < argc) {
			mo.source = argv[++i];
		} else if (opt == &import_opts[IO_MIN_MATCH] && i + 1 < argc) {
			mo.min_match = strtod(argv[++i], &end);
			if (*end || end == argv[i] || !(mo.min_match > 0 && mo.min_match <= 1)) {
				fprintf(stderr, "gpumemsim import: --min-match '%s': want a fraction in "
					"(0, 1]\n", argv[i]);
				return EXIT_USAGE;
			}
		} else if (opt == &import_opts[IO_MAX_GAP] && i + 1 < argc) {
			unsigned long long g = strtoull(argv[++i], &end, 10);
			if (*end || end == argv[i] || argv[i][0] == '-' || g == 0) {
				fprintf(stderr, "gpumemsim import: --max-gap '%s': want a positive "
					"count\n", argv[i]);
				return EXIT_USAGE;
			}
			mo.max_gap = g;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "gpumemsim import: unknown option '%s'\n", argv[i]);
			import_usage(stderr);
			return EXIT_USAGE;
		} else if (!kind) {
			kind = argv[i];
		} else if (!in) {
			in = argv[i];
		} else {
			fprintf(stderr, "gpumemsim import: unexpected argument '%s'\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!kind || !in || !out) {
		import_usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(kind, "xla-sizes")) {
		if (!log || json || nlab || truth || mo.source || mo.min_match > 0 || mo.max_gap) {
			fprintf(stderr, "gpumemsim import xla-sizes: %s\n",
				log ? "takes only --log LOG and -o OUT" : "--log LOG is required");
			return EXIT_USAGE;
		}
		return import_xla_sizes(in, log, out);
	}
	if (log) {
		fprintf(stderr, "gpumemsim import %s: --log is for xla-sizes\n", kind);
		return EXIT_USAGE;
	}
	if (!strcmp(kind, "torch-markers")) {
		if (!truth || json || nlab) {
			fprintf(stderr, "gpumemsim import torch-markers: %s\n",
				json || nlab ? "--json and --label are for torch-snapshot and kineto"
					     : "--truth TRUTH is required");
			return EXIT_USAGE;
		}
		return import_markers(in, truth, out, &mo);
	}
	if (strcmp(kind, "torch-snapshot") && strcmp(kind, "kineto")) {
		fprintf(stderr, "gpumemsim import: unknown format '%s' (known: torch-snapshot, "
			"kineto, torch-markers, xla-sizes)\n", kind);
		return EXIT_USAGE;
	}
	if (truth || mo.source || mo.min_match > 0 || mo.max_gap) {
		fprintf(stderr, "gpumemsim import %s: --truth, --source, --min-match and "
			"--max-gap are for torch-markers\n", kind);
		return EXIT_USAGE;
	}
	if (!strcmp(kind, "kineto")) {
		if (json) {
			fprintf(stderr, "gpumemsim import kineto: --json is for torch-snapshot (the "
				"profile carries its own metadata)\n");
			return EXIT_USAGE;
		}
		return import_kineto_cmd(in, out, labels, nlab);
	}
	char err[1024];
	struct import_torch_stats st;
	if (import_torch_snapshot_labeled(in, out, json, labels, nlab, &st, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim import: %s\n", err);
		return 1;
	}
	fprintf(stderr, "%s: %" PRIu64 " entries -> %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64
		" segment records, %" PRIu64 " empty_cache, %" PRIu64 " allocator releases, %" PRIu64
		" ooms\n", out, st.entries, st.allocs, st.frees, st.segments, st.empty_caches,
		st.partial_runs, st.ooms);
	return 0;
}
