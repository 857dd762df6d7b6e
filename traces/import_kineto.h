/*
 * import_kineto.h: a torch.profiler trace (Kineto's Chrome-trace JSON, from
 * prof.export_chrome_trace(PATH) with profile_memory=True) into a gpumemsim
 * trace. docs/import.md says what it carries and what it misses.
 *
 * Kept (one device: the lowest CUDA "Device Id" among the memory events):
 *  - "[memory]" instant events with "Device Type" 1 (CUDA): 'a' for a
 *    positive "Bytes", 'f' for a negative one. With the caching allocator on
 *    these are the framework's requests (block sizes, multiples of 512 B),
 *    not cudaMallocs, like the torch-snapshot import's request stream: no
 *    allocator_source label, so `run --policy pytorch` replays every one
 *    through the policy. CPU memory events are skipped and counted.
 *  - memory live before the profile started: a free of an address the
 *    profile never allocated becomes an allocation at the start, and the
 *    rest of "Total Allocated" before the first event (parameters made
 *    before the profiler) one block at KINETO_BEFORE_ADDR;
 *  - "[OutOfMemory]" -> 'x oom'; kernels (cat "kernel") -> 'k' with grid,
 *    block, registers, shared memory, stream and correlation; "gpu_memcpy"
 *    -> 'c' (kind from the name), "gpu_memset" -> 'm';
 *  - ranges: "user_annotation" events (record_function) -> 'r', with
 *    "ProfilerStep#N" (user_annotation or cpu_op) renamed "step N", the
 *    name the engine's step timing and `whatif --from-range "step 1"` use.
 * Times: "ts"/"dur" microseconds (three decimals) -> nanoseconds, plus
 * "baseTimeNanoseconds" when present; records sorted by time (ranges first
 * at a tie, then file order), so the output is deterministic.
 */
#ifndef TRACES_IMPORT_KINETO_H
#define TRACES_IMPORT_KINETO_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

/* Where the block for memory live before the profile goes: below any CUDA
 * device address, so it cannot meet a recorded one. */
#define KINETO_BEFORE_ADDR 0x1000u

struct import_kineto_stats {
	uint64_t events;          /* elements of traceEvents */
	int64_t device;           /* the CUDA device imported */
	uint64_t mem_events;      /* CUDA memory events of that device */
	uint64_t allocs, frees;   /* 'a' and 'f' records written (with the below) */
	uint64_t before_allocs;   /* allocations made for memory live before the profile */
	uint64_t before_bytes;    /* their bytes */
	uint64_t relive;          /* allocations at a live address (a lost free: freed first) */
	uint64_t cpu_mem_events;  /* memory events not on a CUDA device, skipped */
	uint64_t other_device;    /* CUDA memory events, kernels, copies of other devices */
	uint64_t kernels, memcpys, memsets, ranges, ooms;
	uint64_t steps;           /* ranges named "step N" */
	uint64_t skipped;         /* other events (cpu_op, cuda_runtime, ...) */
	uint64_t peak_allocated;  /* largest "Total Allocated" (0: not in the profile) */
	uint64_t peak_reserved;   /* largest "Total Reserved" */
};

/*
 * Convert the Kineto JSON IN (plain or gzip) into the trace OUT (gzip when
 * it ends in .gz), written atomically, with the labels EXTRA (at most 32;
 * they replace the importer's of the same key). STATS may be NULL. Returns
 * 0, or -1 with ERR naming the file (and line where there is one); OUT is
 * then left untouched. A profile without CUDA memory events is an error.
 */
int import_kineto(const char *in, const char *out, const struct trace_label *extra,
		  size_t nextra, struct import_kineto_stats *stats, char *err, size_t errlen);

#endif /* TRACES_IMPORT_KINETO_H */
