/*
 * gpumemsim.h: the gpumemsim library (build/libgpumemsim.a), in one header.
 *
 * Link: cc -I. prog.c build/libgpumemsim.a -lsqlite3 -lz -lm -lpthread
 * (docs/library.md has a whole program; tests/test_library.c compiles and
 * runs it). Library functions return their results in structs and print
 * nothing on stdout; what they write on stderr is opt-in progress
 * (sim_options.progress, a sweep's progress bar), a sweep's failed runs
 * (one line each, as they fail: a sweep goes on) and the capture
 * launcher's list of the traces it wrote.
 *
 * What it offers, by layer (docs/architecture.md):
 *
 *   traces     trace_reader_open / _next / _close, trace_writer_* (the
 *              format: traces/FORMAT.md), trace_check (lifetimes and
 *              links, what `trace validate` says), trace_stats (counts,
 *              peak live bytes, what `trace stats` says); torch snapshot
 *              import; markers; XLA request sizes from its log (xla_sizes)
 *   policies   policy_find(name), policy_list_names, the registry table;
 *              conf strings in the frameworks' syntax (conf_next, conf_size)
 *   device     the simulated device, the API call cost model (cost_parse,
 *              cost_fit_trace) for timed replays
 *   sim        sim_run(options) -> struct sim_result (peaks, fragmentation,
 *              OOM verdicts, timeline, live set at the peak, step times),
 *              sim_result_free; oom_explain; the SQLite store (store_*,
 *              store_table_query: the rows of `gpumemsim table`), sweeps
 *              (sweep_run); replays compared with recorded runs of real
 *              allocators (validate_torch_truth, validate_jax_truth,
 *              validate_async_truth)
 *   whatif     batch-size fit (bf_load, bf_align, bf_fit, bf_synth),
 *              fusion (fusion_*), maxbatch_search, explain_batch
 *   plots      plot_make (gnuplot figures), report_write (HTML + Markdown),
 *              perfetto_export_runs / _trace (Chrome trace JSON)
 *   capture    cap_conv_* (CUPTI records -> trace, no CUDA needed),
 *              capture_launch (run a program with the capture library)
 *   base       size_fmt, JSON writer, growth vector, hash map, version
 */
#ifndef GPUMEMSIM_H
#define GPUMEMSIM_H

#include "../base/conf.h"
#include "../base/json.h"
#include "../base/size.h"
#include "../base/tmpfile.h"
#include "../base/u64map.h"
#include "../base/vec.h"
#include "../base/version.h"
#include "../traces/trace.h"
#include "../traces/trace_check.h"
#include "../traces/trace_stats.h"
#include "../traces/import_torch.h"
#include "../traces/import_kineto.h"
#include "../traces/markers.h"
#include "../traces/xla_sizes.h"
#include "../device/cost.h"
#include "../device/device.h"
#include "../policies/policy.h"
#include "../capture/convert.h"
#include "../capture/launcher.h"
#include "../sim/engine.h"
#include "../sim/oom_text.h"
#include "../sim/store.h"
#include "../sim/store_table.h"
#include "../sim/sweep.h"
#include "../sim/validate_truth.h"
#include "../whatif/batch_fit.h"
#include "../whatif/captures.h"
#include "../whatif/compile.h"
#include "../whatif/explain.h"
#include "../whatif/fusion.h"
#include "../whatif/maxbatch.h"
#include "../plots/perfetto.h"
#include "../plots/plot.h"
#include "../plots/report.h"

#endif /* GPUMEMSIM_H */
