/*
 * cost.h: what memory management costs in host time, for step-time
 * predictions (docs/timing.md).
 *
 * A cost model says how long the host spends in a device allocation
 * (cudaMalloc), a device free (cudaFree, which also waits for the whole
 * device to drain), a map/unmap of expandable-segment pages, and an
 * allocation or free the policy serves from its cache (a "hit"). Device
 * calls follow the driver's two regimes: requests under 1 MiB are carved
 * from the driver's own small pool (a constant), larger ones map pages (a
 * constant plus a per-MiB term).
 *
 * The model is fitted from a trace's 'p' records (cudaMalloc/cudaFree host
 * API times paired with the 'a'/'f' record inside them by correlation id;
 * the hit cost from the stream-ordered calls, cudaMallocAsync/cudaFreeAsync,
 * which a caching pool serves without the driver), with median-based
 * estimates so a few outliers do not move it; traces without API records
 * get the documented H200 defaults. Knobs override
 * either ("malloc_us=10,free_sync=0").
 */
#ifndef SIM_COST_H
#define SIM_COST_H

#include <stddef.h>
#include <stdint.h>

#include "../traces/trace.h"

/* Below this a device call is served from the driver's small pool. */
#define COST_SMALL_LIMIT (1ull << 20)

/* Host nanoseconds of one device call of BYTES. */
struct cost_curve {
	double small_ns;          /* bytes < COST_SMALL_LIMIT */
	double large_ns;          /* bytes >= COST_SMALL_LIMIT: large_ns + per_mib * MiB */
	double large_ns_per_mib;
};

struct cost_model {
	struct cost_curve malloc_c;   /* cudaMalloc, host time */
	struct cost_curve free_c;     /* cudaFree, host time without the device wait */
	double map_ns, unmap_ns;      /* one map/unmap of expandable-segment pages */
	double hit_ns;                /* an alloc or free served without a device call */
	int free_sync;                /* 1: a device free first waits for every stream */
	/* Host corrections for a capture made under a profiler or on a busy
	 * machine (docs/timing.md, "Capture overhead"). host_scale multiplies
	 * every recorded host interval (compute gaps and API calls; GPU work
	 * keeps its recorded duration); api_overhead_ns is the profiler's cost
	 * per API call, taken off every kept API record and off every device
	 * call the policy makes (the fitted costs were measured under it). */
	double host_scale;            /* 1 = the host runs as fast as recorded */
	double api_overhead_ns;       /* 0 = none removed */
	/* 1 (default): host_scale also scales the fitted device-call costs.
	 * 0: it does not; a profiler's overhead sits in the host gaps and the
	 * framework's calls, not in the driver's cudaMalloc/cudaFree work
	 * (docs/timing.md, "Where the capture overhead is"). The engine
	 * applies host_scale to device-call costs only when this is 1. */
	int scale_calls;
	/* provenance: how many API samples the fit used (0 = defaults) */
	uint64_t n_malloc, n_free;
	uint64_t n_hit;               /* stream-ordered alloc/free calls behind hit_ns */
};

/* Which memory API a 'p' record's name is: the engine replaces the
 * recorded durations of all but COST_API_OTHER by the policy's costs. */
enum cost_api {
	COST_API_OTHER = 0,   /* not a device-memory call: kept as recorded */
	COST_API_MALLOC,      /* cudaMalloc, cuMemAlloc */
	COST_API_FREE,        /* cudaFree, cuMemFree */
	COST_API_MEM,         /* other device-memory management (async, VMM) */
};

/* The kind of API NAME (NULL = other). */
enum cost_api cost_api_kind(const char *name);

/* 1 when NAME is a stream-ordered allocation or free (cudaMallocAsync,
 * cudaFreeAsync, cudaMallocFromPoolAsync and their driver forms): calls a
 * pool with memory cached serves without the driver, the "hit" of CUDA's
 * own caching allocator. Such calls are also COST_API_MEM. */
int cost_api_is_async(const char *name);

/* The H200 defaults (fitted from capture/tests/data/resnet18-nocache). */
void cost_defaults(struct cost_model *m);

/* Apply knobs "key=value,..." (':' also accepted) over M. Keys:
 * malloc_us, malloc_large_us, malloc_us_per_mib, free_us, free_large_us,
 * free_us_per_mib, map_us, unmap_us, hit_us, free_sync (0|1),
 * api_overhead_us, host_scale (a factor, 0.01 to 100), scale_calls (0|1).
 * Call costs given as knobs are the costs wanted on the target host, as
 * fitted ones are; they are stored as given. -1 with ERR naming the knob. */
int cost_parse(struct cost_model *m, const char *knobs, char *err, size_t errlen);

/* Host ns of one call of BYTES on curve C. */
static inline uint64_t cost_curve_ns(const struct cost_curve *c, uint64_t bytes)
{
	double v = bytes < COST_SMALL_LIMIT ? c->small_ns
		: c->large_ns + c->large_ns_per_mib * (double)bytes / (double)(1u << 20);
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

/* ---------------------------------------------------------------- fit */

struct cost_sample { uint64_t bytes, ns; };

/* Streaming fit: feed every record in file order, then finish. */
struct cost_fitter {
	struct cost_sample *mal, *fre, *hit;
	size_t nmal, nfre, nhit, capmal, capfre, caphit;
	uint64_t gpu_busy;            /* latest end of GPU work started so far */
	/* the open cudaMalloc/cudaFree call waiting for its 'a'/'f' record */
	int pend_kind;                /* COST_API_MALLOC/FREE or 0 */
	uint64_t pend_start, pend_end, pend_corr, pend_busy;
	/* a cudaFree whose 'f' came, held until no later record can be GPU
	 * work it waited for (launched before it, recorded after it) */
	int settling;
	uint64_t set_start, set_end, set_corr, set_busy, set_bytes;
};

void cost_fitter_init(struct cost_fitter *f);
/* NAME: the API's name for a TREC_API record (ignored otherwise). -1 on OOM. */
int cost_fitter_add(struct cost_fitter *f, const struct trace_rec *rec, const char *name);
/* Fit into M (starting from the defaults: a curve with too few samples
 * keeps its default; hit_ns is the median stream-ordered call when there
 * are enough of them), release F. */
void cost_fitter_finish(struct cost_fitter *f, struct cost_model *m);

/* Fit from the trace at PATH (defaults where it has no API records), then
 * apply KNOBS (may be NULL). -1 with ERR (file:line, or the knob). */
int cost_fit_trace(const char *path, const char *knobs, struct cost_model *m,
		   char *err, size_t errlen);

#endif /* SIM_COST_H */
