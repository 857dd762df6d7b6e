/*
 * cost.h: what memory management costs in host time, for step-time
 * predictions (docs/timing.md).
 *
 * A cost model says how long the host spends in a device allocation
 * (cudaMalloc), a device free (cudaFree, which also waits for the whole
 * device to drain), a map/unmap of expandable-segment pages, a call the
 * stream-ordered pool serves (cudaMallocAsync/cudaFreeAsync) or its growth
 * and trim, and an allocation or free the policy serves from its cache
 * (a "hit", no CUDA call). Device
 * calls follow the driver's two regimes: requests under 1 MiB are carved
 * from the driver's own small pool (a constant), larger ones map pages (a
 * constant plus a per-MiB term).
 *
 * The model is fitted from a trace's 'p' records (cudaMalloc/cudaFree host
 * API times paired with the 'a'/'f' record inside them by correlation id;
 * the pool's call cost from the stream-ordered calls, cudaMallocAsync/
 * cudaFreeAsync), with median-based
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

/* Bins of a measured cost table (traces/timing/cost/). */
#define COST_TAB_MAX 48

/* Host nanoseconds of one device call of BYTES: the measured table when
 * it has bins (ntab > 0: the bin holding BYTES, the last bin beyond it),
 * else the two-regime curve. */
struct cost_curve {
	double small_ns;          /* bytes < COST_SMALL_LIMIT */
	double large_ns;          /* bytes >= COST_SMALL_LIMIT: large_ns + per_mib * MiB */
	double large_ns_per_mib;
	double extra_ns;          /* added to every call: the framework's own host work
				   * around a device call (timeline model, dev_call_us) */
	double extra_frac;        /* and in proportion to the call's own cost: the host
				   * runs slower after an expensive driver call
				   * (dev_call_frac) */
	uint32_t ntab;            /* 0: no table */
	uint64_t tab_lo[COST_TAB_MAX]; /* bin i holds bytes in [tab_lo[i], tab_lo[i+1]) */
	double tab_ns[COST_TAB_MAX];
	uint64_t tab_n[COST_TAB_MAX];  /* samples behind each bin */
	/* the trace's own calls in the same bins (cost_fitter_finish): the
	 * timeline model prefers them where a bin has enough samples */
	uint32_t nown;
	uint64_t own_lo[COST_TAB_MAX];
	double own_ns[COST_TAB_MAX];
	uint64_t own_n[COST_TAB_MAX];
};

/* PyTorch's caching allocator's own host time for a call it serves from
 * its cache: alloc 0.69 us, free 0.47 us (medians over 16 training runs'
 * request streams replayed through c10's allocator on the H200,
 * traces/timing/caching_cost.cpp, scripts/caching_cost_table.sh). A steady
 * step makes as many frees as allocs, so one figure, their mean, per call. */
#define COST_HIT_NS 580.0

/* A bin of the trace's own calls replaces the shipped table's from this
 * many samples on. */
#define COST_OWN_MIN 20

struct cost_model {
	struct cost_curve malloc_c;   /* cudaMalloc, host time */
	struct cost_curve free_c;     /* cudaFree, host time without the device wait */
	/* Expandable segments (PyTorch's ExpandableSegment): a map of N pages
	 * is a cuMemCreate and a cuMemMap a page and one cuMemSetAccess over
	 * them; an unmap synchronises the stream, then a cuMemUnmap and a
	 * cuMemRelease a page (traces/timing/vmm_cost.cu measures both). */
	double map_ns, map_page_ns;
	double unmap_ns, unmap_page_ns, unmap_ns_per_mib;
	/* The stream-ordered pool (cudaMallocAsync): a call the pool serves
	 * from memory it holds (measured in training steps, where it costs
	 * several times what it costs an idle GPU), and growing or trimming
	 * the pool's memory. */
	double pool_alloc_ns, pool_free_ns;
	double pool_grow_ns, pool_grow_ns_per_mib;
	double pool_trim_ns, pool_trim_ns_per_mib;
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
	/* The timeline model (docs/timing.md, "Timeline model"): what the
	 * capture itself added to the host, taken out so the prediction is
	 * for the uncaptured program; per capture mode, from the trace's
	 * capture_overhead field or the measured defaults of its mode. */
	int timeline;                 /* 1: the corrections below apply */
	double cap_api_ns;            /* per recorded API call: off the host gap before it */
	double cap_cb_ns;             /* per CUPTI callback, recorded or not (counted by the
				       * correlation ids between two API records): off the gap */
	double cap_mem_ns;            /* per recorded cudaMalloc/cudaFree instead of cap_api_ns */
	double dev_call_ns;           /* the framework's own host work around one device call
				       * (PyTorch's no-caching path): in the trace's gap before
				       * each recorded cudaMalloc/cudaFree, taken out with it, and
				       * charged with every device call the policy makes */
	double dev_call_frac;         /* the same in proportion to each device call's own cost
				       * (the host runs slower after an expensive driver
				       * call): taken out of the gaps after each recorded
				       * cudaMalloc/cudaFree, charged with the policy's */
	double cap_range_ns;          /* per recorded NVTX range (push + pop) */
	double cap_own;               /* factor on the capture's own time the trace measured
				       * (a 'p' record's own_ns: inside the injection library
				       * in the gap before the call), off that gap */
	double cap_call_ns;           /* inside each kept API call: off its duration */
	double min_gap_ns;            /* a host gap never shrinks below this */
	double launch_latency_ns;     /* a launch's return to its kernel's earliest start */
	double gpu_scale;             /* factor on every GPU duration (another batch
				       * size: the batch fit of kernel time, 1 = as recorded) */
	double size_scale;            /* a device call costs what one of size_scale times
				       * its bytes costs (another batch size: B'/B, the
				       * activations' growth; 1 = as requested) */
	double trace_hit_ns;          /* the trace's own allocator cost per a/f record,
				       * already in its gaps (requests from a caching run) */
	int calibrate;                /* 1: a capture's uncaptured steps set the share
				       * (sim/timing.h timing_calibrate); 0 (default; a
				       * host_scale knob sets it too): the mode's share.
				       * Off by default: on the H200 it did not bring the
				       * predictions nearer other processes' steps
				       * (docs/timing.md, "Measured in the capture itself") */
	char table_name[64];          /* the cost table in use ("" = fitted curves) */
	char cap_mode[32];            /* the capture mode the corrections are for */
	/* provenance: how many API samples the fit used (0 = defaults) */
	uint64_t n_malloc, n_free;
	uint64_t n_pool;              /* stream-ordered alloc/free calls behind pool_alloc_ns
				       * and pool_free_ns */
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
 * pool with memory cached serves without mapping any. Such calls are also
 * COST_API_MEM. */
int cost_api_is_async(const char *name);

/* The H200 defaults (fitted from capture/tests/data/resnet18-nocache). */
void cost_defaults(struct cost_model *m);

/* Apply knobs "key=value,..." (':' also accepted) over M. Keys:
 * malloc_us, malloc_large_us, malloc_us_per_mib, free_us, free_large_us,
 * free_us_per_mib, map_us, map_page_us, unmap_us, unmap_page_us,
 * unmap_us_per_mib, pool_alloc_us, pool_free_us, pool_grow_us,
 * pool_grow_us_per_mib, pool_trim_us, pool_trim_us_per_mib, hit_us, free_sync (0|1),
 * api_overhead_us, host_scale (a factor, 0.01 to 100; turns calibrate off),
 * scale_calls (0|1), calibrate (0|1).
 * Call costs given as knobs are the costs wanted on the target host, as
 * fitted ones are; they are stored as given. -1 with ERR naming the knob. */
int cost_parse(struct cost_model *m, const char *knobs, char *err, size_t errlen);

/* Host ns of the device call of BYTES on curve C alone, without the
 * framework's work around it. */
static inline double cost_curve_call_ns(const struct cost_curve *c, uint64_t bytes)
{
	double v;
	if (c->ntab) {
		uint32_t i = 0;
		while (i + 1 < c->ntab && bytes >= c->tab_lo[i + 1])
			i++;
		v = c->tab_ns[i];
	} else {
		v = bytes < COST_SMALL_LIMIT ? c->small_ns
			: c->large_ns + c->large_ns_per_mib * (double)bytes / (double)(1u << 20);
	}
	return v;
}

/* Host ns of one call of BYTES on curve C, the framework's work with it. */
static inline uint64_t cost_curve_ns(const struct cost_curve *c, uint64_t bytes)
{
	double v = cost_curve_call_ns(c, bytes);
	v += v * c->extra_frac + c->extra_ns;
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

/* The bytes whose cost a device call of BYTES pays under M (size_scale). */
static inline uint64_t cost_call_bytes(const struct cost_model *m, uint64_t bytes)
{
	return m->size_scale <= 0 || m->size_scale == 1.0 ? bytes
							 : (uint64_t)((double)bytes * m->size_scale + 0.5);
}

/* ------------------------------------------------------ timeline model */

/* The capture_overhead field (H capture_overhead, or the label
 * capture_overhead=...): "api_ns=N,call_ns=N,mem_ns=N,range_ns=N", what
 * one recorded API call / NVTX range cost the captured host. */
#define COST_CAPTURE_FIELD "capture_overhead"

/* Turn the timeline model on in M for a trace with header H: the capture
 * corrections of its capture mode (H's capture_overhead when present,
 * else the measured defaults of its capture_api label: docs/timing.md),
 * launch latency, and the shipped cost table of its GPU and driver (when
 * one matches; the fitted curves stay otherwise). -1 with ERR when H's
 * capture_overhead does not parse. */
int cost_timeline_setup(struct cost_model *m, const struct trace_header *h,
			char *err, size_t errlen);

/* Load a cost table (TSV: lo_bytes hi_bytes malloc_ns malloc_n free_ns
 * free_n, '#' comments; -1 = no samples) into M's curves. -1 with ERR. */
int cost_table_load(struct cost_model *m, const char *path, char *err, size_t errlen);

/* The shipped table for GPU and DRIVER (NULL: none), as TSV text, and
 * its name. */
const char *cost_table_builtin(const char *gpu, const char *driver, const char **name);

/* Parse TSV table TEXT into M (NAME for messages). -1 with ERR. */
int cost_table_parse(struct cost_model *m, const char *text, const char *name,
		     char *err, size_t errlen);

/* ---------------------------------------------------------------- fit */

struct cost_sample { uint64_t bytes, ns; };

/* Streaming fit: feed every record in file order, then finish. */
struct cost_fitter {
	struct cost_sample *mal, *fre, *pool; /* pool: stream-ordered calls */
	size_t nmal, nfre, npool, capmal, capfre, cappool;
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
 * keeps its default; pool_alloc_ns and pool_free_ns are the median
 * stream-ordered call when there are enough of them), release F. */
void cost_fitter_finish(struct cost_fitter *f, struct cost_model *m);

/* Fit from the trace at PATH (defaults where it has no API records), then
 * apply KNOBS (may be NULL). -1 with ERR (file:line, or the knob). */
int cost_fit_trace(const char *path, const char *knobs, struct cost_model *m,
		   char *err, size_t errlen);

#endif /* SIM_COST_H */
