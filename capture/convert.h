/*
 * convert.h: from capture records to trace records, with no CUDA.
 *
 * The CUPTI library (inject_activity.c) turns each activity record into a
 * neutral struct cap_rec and pushes it here; kernel-to-buffer links seen in
 * launch callbacks arrive separately, keyed by the launch's correlation id.
 * This module owns what must be right whatever CUDA does:
 *  - records arrive out of order and in bursts: a reorder buffer (a min-heap
 *    on start time, then arrival order) releases them in time order up to a
 *    watermark the caller chooses;
 *  - allocation ids are the ordinals of emitted 'a' records, so they are
 *    assigned here, at emission, never at arrival;
 *  - links name allocations by the correlation id of their allocating call
 *    (and their address as a fallback); they are resolved to ids when the
 *    kernel record is emitted, which is after its allocations were emitted.
 *  - lifetimes stay valid whatever the arrival order: module globals are
 *    freed when their module unloads (module events, below); an allocation
 *    at an address still live closes the earlier one first; a free whose
 *    allocation has not been emitted yet waits for it (see convert.c).
 * It writes through a small sink so tests need no file and no trace writer.
 */
#ifndef CAPTURE_CONVERT_H
#define CAPTURE_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "../traces/trace.h"

/* One captured record. rec's string fields (kernel name, range name, API
 * name, allocation source) are ignored: NAME carries the text instead and is
 * interned at emission. Kernel links are ignored too (see cap_conv_link). */
struct cap_rec {
	struct trace_rec rec;
	const char *name;   /* copied by cap_conv_push; NULL = no string */
	uint32_t ctx;       /* CUPTI context id of a memory record (module statics) */
};

/* A module event from CUPTI's resource callbacks. Module globals (memory
 * kind 6/7) are reported when a module loads, but no release is reported
 * when it unloads: the converter frees them at the unload. A static
 * allocation belongs to the module whose load, on the same context, is
 * nearest in time (the driver allocates a module's globals while loading
 * it; the load callback follows within microseconds). */
enum cap_module_op { CAP_MODULE_LOADED = 1, CAP_MODULE_UNLOADING = 2 };

/* A buffer a kernel launch passed: the allocation that held it. */
struct cap_link {
	uint64_t alloc_corr;  /* correlation id of the allocating call, 0 if unknown */
	uint64_t addr;        /* base address of that allocation */
};

/* Where emitted records go (trace_writer in the library, arrays in tests). */
struct cap_sink {
	void *ctx;
	uint32_t (*intern)(void *ctx, const char *s);
	int (*record)(void *ctx, const struct trace_rec *rec);
};

/* Counters, for the trailer and the end-of-run line on stderr. */
struct cap_stats {
	uint64_t pushed, emitted, allocs;
	uint64_t late;        /* arrived after the watermark passed them: start clamped */
	uint64_t links, links_unresolved;
	uint64_t pending;     /* in the reorder buffer now */
	uint64_t modules_loaded, modules_unloaded;
	uint64_t module_frees;     /* statics freed at their module's unload */
	uint64_t static_replaced;  /* static re-registered while live: earlier one closed */
	/* Lifetime repairs (records arriving out of order past the window): */
	uint64_t live_replaced;    /* non-static alloc at a live address: earlier one closed */
	uint64_t frees_reordered;  /* free that came before its allocation: moved after it */
	uint64_t frees_dropped;    /* free of an allocation already closed, or never seen */
	uint64_t graph_pools;      /* allocations without an address (CUDA graph memory pools) */
};

struct cap_conv;

/* What a capture records (GPUMEMSIM_CAPTURE_RECORD, `capture --record`). */
enum {
	CAP_REC_KERNELS = 1, CAP_REC_MEMORY = 2, CAP_REC_COPIES = 4, CAP_REC_SYNCS = 8,
	CAP_REC_NVTX = 16, CAP_REC_ALL = 31
};

/* Parse a comma-separated list of kernels, memory, copies, syncs, nvtx,
 * all into CAP_REC_* bits. Returns 0, or -1 for an empty list or an
 * unknown kind. Shared by the launcher (which refuses a bad list) and the
 * library (which then records everything). */
int cap_record_parse(const char *list, unsigned *bits);

/* A converter writing to SINK (copied). NULL when out of memory. */
struct cap_conv *cap_conv_new(const struct cap_sink *sink);

/* Queue one record. Returns 0 or -1 when out of memory (the record is lost
 * and should be counted as dropped by the caller). */
int cap_conv_push(struct cap_conv *c, const struct cap_rec *r);

/* A module event (CAP_MODULE_*) at time T on context CTX. Loads are kept
 * in a table (statics are matched to them when emitted); unloads are
 * queued like records and free the module's live statics when emitted.
 * Returns 0 or -1 when out of memory. */
int cap_conv_module(struct cap_conv *c, enum cap_module_op op, uint32_t ctx, uint32_t module,
		    uint64_t t);

/* Remember the buffers the launch with correlation id KERNEL_CORR passed;
 * applied to the kernel record with that correlation id. Returns 0 or -1. */
int cap_conv_link(struct cap_conv *c, uint64_t kernel_corr,
		  const struct cap_link *links, size_t n);

/* Emit, in time order, every queued record that starts before WATERMARK.
 * Returns 0 or the sink's negative error. */
int cap_conv_emit_until(struct cap_conv *c, uint64_t watermark);

/* An NVTX range CUPTI has reported the start of and not yet the end. */
struct cap_open_range { uint32_t id; uint32_t thread; uint32_t depth; uint64_t start; char *name; };

/*
 * The watermark to emit up to at time NOW with a reorder window of LAG ns:
 * NOW - LAG, held back to the start of the oldest of the NOPEN ranges
 * still OPEN that is at most HOLD ns old. CUPTI hands a range over only
 * when it ends; once the watermark has passed its start, the range can
 * only be written late (its start raised to the last one written, both
 * ends late). So a range older than HOLD (one around a whole run), or
 * one C has already written records after, holds nothing: the ranges
 * nested in it (a step of a minute of autotuning) still keep their
 * place, and the trace is not held back for a range that cannot be
 * saved. Nothing is held once C has MAX_PENDING records waiting, which
 * bounds the memory the hold takes. 0 when NOW <= LAG.
 */
uint64_t cap_conv_watermark(const struct cap_conv *c, uint64_t now, uint64_t lag,
			    const struct cap_open_range *open, size_t nopen, uint64_t hold,
			    uint64_t max_pending);

/* Emit everything queued (end of capture). */
int cap_conv_emit_all(struct cap_conv *c);

void cap_conv_stats(const struct cap_conv *c, struct cap_stats *out);

void cap_conv_free(struct cap_conv *c);

#endif /* CAPTURE_CONVERT_H */
