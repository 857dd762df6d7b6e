/*
 * engine.h: the discrete-event replay engine.
 *
 * The engine is the only place simulated time advances. It streams a trace,
 * lets a simulated host thread issue the trace's calls in order, runs
 * kernels, copies and memsets on their streams in stream order with the
 * trace's durations, makes the host wait at synchronisations, and sends
 * memory events to one allocator policy. Events sit in a binary heap
 * ordered by (time, sequence) so ties resolve the same way on every run.
 *
 * Metrics (allocated, reserved, peaks, counts, fragmentation, OOMs, the
 * downsampled timeline) are computed here, never by policies.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "../policies/policy.h"
#include "../device/device.h"

struct sim_decisions;

/*
 * Where allocations the framework's allocator never served go. DEVICE: a
 * device (kind 3) allocation whose source does not contain the allocator's
 * SUBSTR, and every module global (kinds 6 and 7), is taken from the device
 * beside the policy: it counts against the capacity, not in the policy's
 * allocated/reserved. POLICY: every device allocation goes to the policy
 * (what the real run's memory would be if one allocator served it all).
 */
enum sim_foreign_mode { SIM_FOREIGN_AUTO = 0, SIM_FOREIGN_POLICY, SIM_FOREIGN_DEVICE };
#define SIM_SOURCE_LABEL "allocator_source"

/*
 * XLA's request stream of a JAX capture taken with the platform allocator
 * (traces/xla_requests.h): requests read as whole 2 MiB granules are
 * replayed at their lower bound, and device allocations never freed go
 * beside the policy as memory outside the allocator (to the policy with
 * SIM_FOREIGN_POLICY). AUTO: when the trace's labels say workload=jax and
 * alloc=platform; ON: on any trace; OFF: the trace as it is.
 */
enum sim_xla_mode { SIM_XLA_AUTO = 0, SIM_XLA_OFF, SIM_XLA_ON };
/* sim_result.allocator_source when only XLA's never-freed rule routed */
#define SIM_XLA_SOURCE "xla (never freed: outside XLA)"

struct sim_options {
	const char *trace_path;
	const struct alloc_policy *policy;
	const char *conf;               /* policy knobs, framework syntax; may be NULL */
	int allow_incomplete;           /* replay a trace cut short (no trailer, or a
					 * truncated gzip stream: a killed capture) up to
					 * where it ends; the result says complete = 0.
					 * Without it such a trace is an error. */
	uint64_t capacity;              /* bytes; 0 = the trace header's total memory,
					 * or unlimited when the header has none */
	enum device_addr_mode addr_mode;
	uint32_t timeline_points;       /* downsampled timeline size; 0 = 512 */
	int progress;                   /* progress on stderr for long traces */
	device_log_fn device_log;       /* optional: every device action (validation) */
	void *device_log_ctx;
	/* Timing model (device/cost.h, docs/timing.md): NULL keeps the plain
	 * replay (recorded host times, delay only from longer syncs). Set, the
	 * recorded durations of memory API calls are removed and the policy's
	 * costs (device calls, cudaFree's device-wide sync, cache hits) added. */
	const struct cost_model *cost;
	/* Memory outside the framework's allocator (docs/markers.md): AUTO
	 * routes it to the device when the trace has the label
	 * allocator_source=SUBSTR, else gives everything to the policy. */
	enum sim_foreign_mode foreign;
	const char *allocator_source;   /* overrides the label's SUBSTR; may be NULL */
	int peak_items;                 /* also list every allocation live at the peak
					 * (sim_result.peak_item; `explain batch`) */
	size_t peak_layers;             /* layers kept by name in peak_live; 0 =
					 * SIM_PEAK_LAYERS, the rest merged (`diff`
					 * keeps them all: SIZE_MAX) */
	struct sim_decisions *decisions;/* optional: log the policy's growth/release
					 * decisions here (sim/decisions.h), when it
					 * reports them; NULL = off */
	enum sim_xla_mode xla_requests; /* XLA's request stream (above); AUTO = 0 */
};

struct sim_timeline_point {
	uint64_t t;                     /* ns since the first record */
	uint64_t allocated, reserved;   /* maxima within the bucket */
};

/* Notable events kept with a run (bounded: the first SIM_MAX_EVENTS). */
#define SIM_MAX_EVENTS 256
enum sim_event_kind {
	SIM_EV_PEAK_RESERVED = 0, /* where the run's peak reserved was reached */
	SIM_EV_OOM,               /* a simulated OOM (a request the policy could not serve) */
	SIM_EV_EMPTY_CACHE,       /* the trace's empty_cache */
	SIM_EV_TRACE_OOM,         /* an OOM the real run hit ('x oom' record) */
};
/* Short names for the kinds ("peak_reserved", "oom", ...), for stores and JSON. */
const char *sim_event_kind_name(enum sim_event_kind k);
struct sim_event {
	enum sim_event_kind kind;
	uint64_t t;
	uint64_t bytes;                 /* the request (OOM) or the level (peak) */
	uint64_t line;                  /* trace line that caused it */
	char detail[160];
};

struct sim_stat { char name[64]; int64_t value; };

/*
 * What was live at the moment of peak reserved (the peak_reserved event;
 * users' question 7), each allocation given a kind by heuristics on the
 * NVTX ranges around it (docs/schema.md, table peak_live, has the rules).
 */
enum sim_live_kind {
	SIM_LK_WEIGHTS = 0,   /* before the first step or in a "build" range, never freed */
	SIM_LK_OPTIMIZER,     /* allocated in an optimizer range */
	SIM_LK_ACTIVATIONS,   /* allocated in forward, alive after it */
	SIM_LK_GRADIENTS,     /* allocated in backward */
	SIM_LK_WORKSPACE,     /* freed before its innermost range ended */
	SIM_LK_LIBRARY,       /* never freed, made by libcudnn/libcublas */
	SIM_LK_OTHER,
	SIM_LK_COUNT
};
/* "weights", "optimizer_state", ... for stores and figures. */
const char *sim_live_kind_name(enum sim_live_kind k);
#define SIM_PEAK_TOP 50         /* largest live allocations kept */
#define SIM_PEAK_LAYERS 30      /* layers kept by name; the rest merged */
struct sim_live {
	uint32_t rank;          /* 1..: the Nth largest allocation; 0: a total */
	enum sim_live_kind kind;
	uint64_t bytes;         /* block bytes (the allocator's view) */
	uint64_t count;         /* allocations summed (1 for rank >= 1) */
	uint64_t line;          /* rank >= 1: its 'a' record's line; 0 for totals */
	char layer[96];         /* innermost NVTX range at allocation, "(no range)" */
};

/* One allocation live at the peak (sim_options.peak_items): for callers
 * that split the peak by kind in requested bytes (the trace's record at
 * LINE) and block bytes. */
struct sim_live_item {
	uint64_t line;          /* its 'a' record's line */
	uint64_t block;         /* block bytes */
	enum sim_live_kind kind;
};

/* A top-level NVTX range (depth <= 1), in simulated time. */
#define SIM_MAX_RANGES 4096
struct sim_range {
	uint64_t t, end;        /* ns since the first record */
	uint32_t depth;
	char name[64];
};

/* One library's memory outside the framework's allocator. */
#define SIM_FOREIGN_TOP 8
struct sim_foreign_lib {
	char name[96];          /* library basename, "+ [device static]" for module globals */
	uint64_t allocs;
	uint64_t peak;          /* most bytes live at once */
	uint64_t at_oom;        /* live at the first OOM */
};

/* One step's memory (users' question 10: the worst step of a run whose
 * shapes vary), parallel to sim_result.step_ns. */
struct sim_step_mem {
	char name[48];                  /* its NVTX range ("step 3"), or "step N" for 'x step' */
	uint64_t t;                     /* start, ns since the first record (simulated) */
	uint64_t peak_allocated;        /* the most block bytes live in the step */
	uint64_t peak_requested;
	uint64_t peak_reserved;         /* the most the policy reserved in the step */
	uint64_t reserved_start;        /* reserved when it started */
	uint64_t reserved_end;          /* and when it ended */
	uint64_t device_allocs, device_frees; /* device calls the policy made in it */
	char at[96];                    /* innermost NVTX range when its peak allocated
					 * was reached ("" outside any range) */
	int late;                       /* its range was recorded late: a nested range
					 * began before it with no range open (a capture
					 * clamps a range that outlasts its reorder hold,
					 * capture/README.md); its figures (and t) count
					 * from that nested range, its time in step_ns is
					 * still the range's */
};

struct sim_result {
	/* identity */
	char *trace_path;
	uint32_t trace_crc32;
	uint64_t trace_bytes;
	struct trace_label *labels;     /* copied from the header */
	size_t nlabels;
	char *policy, *conf;
	uint64_t capacity;
	int complete;                   /* the trace had its trailer */

	/* metrics */
	uint64_t allocs, frees;         /* trace requests served / returned */
	uint64_t static_replaced;       /* static (module, kind 6/7) allocations made at an
					 * address where a static one was still live: the
					 * module was reloaded without a recorded free, and
					 * the earlier one was freed there (counted in frees,
					 * or outside the allocator when routed) */
	uint64_t peak_allocated;        /* max sum of block_bytes of live blocks */
	uint64_t peak_requested;        /* max sum of requested bytes of live blocks */
	uint64_t peak_reserved;         /* max device-reserved bytes */
	uint64_t device_allocs, device_frees; /* device mallocs+maps, frees+unmaps */
	double fragmentation;           /* 1 - peak_allocated / peak_reserved */
	int oom;                        /* at least one request failed */
	uint64_t num_ooms;
	uint64_t workspace_retries;     /* cuts of TMEM_F_SHRINKABLE requests to fit: to the
					 * device's room, or by half after a failure (not
					 * OOMs: the framework catches them) */
	uint64_t oom_t, oom_bytes, oom_line;  /* the first failing request */
	uint64_t oom_allocated, oom_reserved; /* state at the first OOM */
	int64_t oom_largest_free, oom_cached_free; /* policy's view, -1 unknown */
	uint64_t oom_limit;             /* bytes usable at the first OOM: the policy's own
					 * limit ("limit_bytes" stat: a memory fraction, a
					 * BFC memory limit), else the capacity; 0 unlimited */
	char oom_verdict[16];           /* why the first OOM: "capacity", "limit",
					 * "foreign" or "fragmentation" (see
					 * sim_oom_verdict_foreign) */
	uint64_t trace_duration_ns;     /* last record end - first record start */
	uint64_t sim_duration_ns;       /* simulated end time */

	struct sim_stat *stats;         /* the policy's own, in emit order */
	size_t nstats;
	struct sim_timeline_point *timeline;
	size_t ntimeline;
	struct sim_event *events;
	size_t nevents;

	/* timing (steps are found with or without a cost model) */
	int timed;                      /* a cost model was applied */
	uint64_t step_count;            /* steps seen: 'x step' records, else NVTX "step" ranges */
	uint64_t step_time_ns;          /* mean simulated step time, the first step excluded
					 * when there are two or more; 0 = no steps */
	uint64_t *step_ns;              /* every step's simulated time */
	uint64_t *step_gpu_ns;          /* and the GPU's busy time in it (work on
					 * any stream, overlaps counted once) */
	struct sim_step_mem *step_mem;  /* and its memory (NULL in a sweep's results) */
	size_t nsteps;
	double gpu_busy_fraction;       /* GPU busy over step time, the steps of
					 * step_time_ns; 0 = no steps */
#define SIM_GPU_BOUND 0.9               /* from this busy fraction on a step is
					 * GPU-bound (docs/timing.md): sim_gpu_bound */
	/* the recorded lengths of the step ranges that ran with the capture
	 * paused (`r ... uncaptured`, traces/FORMAT.md): the program's own step
	 * time on the capture's host, which the replay does not replay */
	uint64_t *uncaptured_step_ns;
	size_t nuncaptured_steps;
	uint64_t mem_api_ns;            /* host time charged for device calls and cache hits */
	uint64_t mem_wait_ns;           /* host time waiting for the device in device frees */
	uint64_t api_removed_ns;        /* recorded memory-API time taken out of the trace */

	/* live at the peak: the SIM_PEAK_TOP largest (rank 1..), then totals
	 * per (kind, layer) (rank 0), layers beyond SIM_PEAK_LAYERS merged as
	 * "(other layers)"; none when nothing was reserved */
	struct sim_live *peak_live;
	size_t npeak_live;
	/* with sim_options.peak_items: every allocation live at the peak, by
	 * line; kept in peak_live's allocation (freed with it) */
	struct sim_live_item *peak_item;
	size_t npeak_item;
	/* NVTX ranges of depth <= 1 in start order; same-name neighbours
	 * closer than a timeline bucket merged, at most SIM_MAX_RANGES */
	struct sim_range *ranges;
	size_t nranges;

	/* memory outside the framework's allocator (only with foreign_routed) */
	int foreign_routed;             /* it went to the device beside the policy */
	char allocator_source[64];      /* the SUBSTR that named the framework's allocator */
	uint64_t foreign_allocs;        /* allocations routed to the device */
	uint64_t peak_foreign;          /* most foreign bytes live at once */
	uint64_t device_peak;           /* max of policy reserved + foreign: what the
					 * device holds (nvidia-smi minus the CUDA context);
					 * peak_reserved when nothing was routed */
	uint64_t oom_foreign;           /* foreign bytes live at the first OOM */
	char oom_foreign_lib[96];       /* the library holding most of them, or "" */
	struct sim_foreign_lib *foreign_libs; /* largest peaks first, SIM_FOREIGN_TOP at most */
	size_t nforeign_libs;

	/* XLA's request stream (sim_options.xla_requests), when it was read so */
	int xla_applied;
	uint64_t xla_outside, xla_outside_bytes; /* never freed: outside XLA's allocator */
	uint64_t xla_lowered, xla_lowered_bytes; /* requests lowered from whole granules
						  * (0: not every request was) */
};

/* Whether a predicted step whose GPU is busy BUSY_FRACTION of it is bound
 * by the GPU (else by the host, whose speed varies between processes). */
static inline int sim_gpu_bound(double busy_fraction) { return busy_fraction >= SIM_GPU_BOUND; }

/* Replay. Returns 0 (an OOM is a result, not an error) or -1 with ERR
 * naming the file and line (bad trace) or the knob (bad conf). */
int sim_run(const struct sim_options *o, struct sim_result *res, char *err, size_t errlen);
void sim_result_free(struct sim_result *res);

/*
 * Why a request failed, from the figures at that moment (users' question 2):
 * "fragmentation" when the allocator's cache held enough free bytes but no
 * block large enough, or when live bytes plus the request fit under the
 * usable limit yet the reserved memory could not serve it; "capacity" when
 * live bytes plus the request exceed LIMIT (sim_run stores "limit" instead
 * when LIMIT is the policy's own, below the device). Memory outside the
 * framework's allocator is told apart by `gpumemsim maxbatch`, which knows
 * each allocation's library.
 */
const char *sim_oom_verdict(uint64_t request, uint64_t allocated, uint64_t limit,
			    int64_t largest_free, int64_t cached_free);

/*
 * sim_oom_verdict with memory outside the framework's allocator: "foreign"
 * when live framework bytes plus the request fit under LIMIT, but FOREIGN
 * bytes held beside the allocator push them over CAPACITY (0: unlimited).
 * The fragmentation-of-the-cache and capacity rules come first.
 */
const char *sim_oom_verdict_foreign(uint64_t request, uint64_t allocated, uint64_t foreign,
				    uint64_t limit, uint64_t capacity, int64_t largest_free,
				    int64_t cached_free);

#endif /* SIM_ENGINE_H */
