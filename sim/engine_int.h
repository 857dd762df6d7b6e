/*
 * engine_int.h: what the engine's files share (engine.c: the replay and its
 * memory path; engine_peak.c: NVTX context and the live set at the peak;
 * engine_pipe.c: the reader thread). Not part of the library's interface.
 */
#ifndef SIM_ENGINE_INT_H
#define SIM_ENGINE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine.h"
#include "event_queue.h"
#include "../base/u64map.h"
#include "../device/cost.h"
#include "../traces/xla_requests.h"

#define PROGRESS_MASK ((1ull << 22) - 1)
#define EV_GPU_DONE 1u

/* A live allocation: what the policy returned for a trace address. It
 * lives in its hash slot (LIVE_EMPTY addr = free slot). */
struct live_ent {
	uint64_t addr;
	uint64_t paddr, block, req, line;
	uint64_t rend;         /* trace end of its innermost NVTX range, or UINT64_MAX */
	uint32_t stream;
	uint32_t ctx;          /* nv_ctx index of that range | CTX_LIB | CTX_STATIC */
};

#define LIVE_EMPTY UINT64_MAX

/* Linear probing, load under 1/2, backward-shift deletion (no tombstones). */
struct live_table {
	struct live_ent *slot;
	size_t mask, count;
	unsigned shift;        /* 64 - log2(capacity) */
};

/* A record of the reader thread's batches: the reader's record, read into
 * the batch in place, and what the reader thread derives from it so that
 * the replay never looks a string up: ENG_F_LIB and ENG_F_FOREIGN in an
 * allocation's mem.flags, and the two fields below. A kernel's links are
 * not carried (nlinks 0, links NULL): the replay reads none, and the
 * reader's storage is reused by the time the record is replayed. */
struct eng_rec {
	struct trace_rec r;
	union {
		uint32_t api_kind;     /* TREC_API: enum cost_api of its name */
		const char *rname;     /* TREC_RANGE: its name (the reader's string) */
	};
};

/* GPU work found by the launch pre-pass, issued at its API call. */
struct gpu_op {
	uint64_t dur;
	uint64_t end;                 /* recorded end: the sync-wait watermark */
	uint32_t stream;
	int issued;
};

/* An NVTX range whose end the host has not reached yet. */
#define MAX_OPEN_RANGES 64
struct open_range {
	uint64_t end;                 /* trace time */
	const char *name;
	int step;                     /* a "step" range that opened a step */
	uint64_t step_serial;         /* which step it opened (engine.step_serial) */
};

/*
 * Live-at-peak context. Each allocation remembers, in the padding of its
 * live entry, the innermost NVTX range open at its allocation as an
 * interned (name, phase) pair, and that range's end: enough to classify it
 * later without keeping any per-range history.
 */
enum nv_phase { PH_NONE = 0, PH_FWD, PH_BWD, PH_OPT, PH_BUILD };
#define PH_PRESTEP 8u          /* no step had begun yet */
#define CTX_LIB 0x80000000u   /* allocated by libcudnn / libcublas */
#define CTX_STATIC 0x40000000u /* live entries only: module memory (kind 6/7) */
#define FLIVE_STATIC 0x8000u  /* flive value: module memory (kind 6/7) */
#define FLIVE_SLOT 0x7fffu    /* flive value: its flib index (below FLIB_MAX) */
#define ENG_F_LIB 0x80000000u /* eng_rec mem.flags: the source is such a library */
#define ENG_F_FOREIGN 0x40000000u /* eng_rec mem.flags: outside the framework's allocator */
#define FLIB_MAX 4096u        /* libraries told apart; later ones share the last slot */
#define MAX_NV_OPEN 64
struct nv_ctx { const char *name; unsigned phase; };
struct nv_open {
	uint64_t end, t;              /* trace end; simulated start */
	uint32_t ctx, depth;
};
/* An allocation live at the current peak that has been freed since. */
struct pk_gone {
	uint64_t block, line, free_t;  /* free_t: trace time of the free */
	uint32_t ctx;
	unsigned free_phase;
	int within;                   /* freed before its innermost range ended */
};

#define STREAM_LUT 64          /* stream ids below this skip the map */

struct tl_bucket { uint64_t alloc, res; int filled; };

/* One (source string, memory kind) outside the framework's allocator. */
struct flib {
	uint32_t source, kind;
	uint64_t allocs, live, peak, at_oom;
};

/* A step's memory as it is gathered, and the range at its peak allocated
 * (named in sim_step_mem.at when the step closes). */
struct step_acc {
	struct sim_step_mem m;
	uint32_t peak_ctx;
};

struct engine {
	const struct sim_options *o;
	struct sim_result *res;
	struct trace_reader *rd;
	struct sim_device *dev;
	const struct alloc_policy *pol;
	void *st;
	int pol_live;                 /* init succeeded: fini owed */
	const char *path;

	/* live set */
	struct live_table live;       /* trace addr -> live entry */
	struct u64map skip;           /* trace addr -> 1: its free is skipped */
	int seen_kernel;              /* a kernel record was replayed: requests made
				       * before it are the model's (size_scale) */
	uint64_t allocated, requested;
	uint64_t peak_res_seen, peak_res_t, peak_res_line;

	/* time */
	int have_t0;
	uint64_t t0, delay, host_end, gpu_end, trace_end;
	/* the GPU's busy time: the union of the work queued on it, taken in
	 * queue order (work on another stream that starts before the latest
	 * end so far counts only past it: exact for one stream, a lower bound
	 * for several); the sum, where it reaches, and the sum when the open
	 * step began */
	uint64_t gpu_busy, gpu_cover_end, step_busy_begin;
	struct u64map stream_idx;     /* stream id -> index */
	uint32_t stream_lut[STREAM_LUT]; /* small ids: index + 1, 0 = unknown */
	uint64_t *stream_free;        /* when each stream's FIFO drains */
	uint32_t *stream_inflight;
	uint32_t nstreams;
	size_t cap_free, cap_inflight; /* of stream_free, stream_inflight */
	struct event_queue q;

	/* timeline */
	struct tl_bucket *tl;
	uint32_t tl_n;
	unsigned tl_shift;            /* bucket width is 2^tl_shift ns */
	uint64_t tl_lim;              /* relative times below this fit the buckets */

	/* OOM-time stats */
	int64_t stat_largest, stat_cached, stat_limit;
	size_t stats_cap;

	/* timing model (NULL cost: the plain replay) */
	const struct cost_model *cost;
	uint64_t floor;               /* no record is issued before this host time */
	uint64_t trace_gpu_busy;      /* latest recorded end of GPU work so far */
	int nvtx;                     /* the policy wants NVTX ranges */
	struct open_range rng[MAX_OPEN_RANGES];
	int nrng;
	uint64_t rng_min;             /* earliest end among rng */
	/* launches (timed only): GPU work is queued when its API call returns,
	 * not at its recorded start, so a faster host lets it start earlier */
	struct u64map launch;         /* corr -> index in ops + 1 */
	struct gpu_op *ops;
	size_t nops;
	uint64_t last_start;          /* recorded start of the previous record */
	double scale;                 /* cost->host_scale */
	uint64_t overhead;            /* cost->api_overhead_ns, rounded */
	/* timeline model (sim/timing.c): the capture's own cost taken out */
	int tlm;                      /* cost->timeline: the corrections apply */
	uint64_t tl_api, tl_mem, tl_range, tl_call, tl_min_gap, tl_latency, tl_hit;
	uint64_t tl_dev;              /* the framework's work around a device call (dev_call_us) */
	double tl_frac;               /* and in proportion to its cost (dev_call_frac) */
	uint64_t tl_mem_corr;         /* correlation id of the latest recorded cudaMalloc/cudaFree */
	uint64_t tl_host_end;         /* recorded end of the latest host call or range start */
	uint64_t tl_pending;          /* credit owed to the next host gaps */
	uint64_t tl_cb;               /* capture cost per CUPTI callback (timing.c) */
	double tl_own;                /* factor on a record's measured own time (timing.c) */
	uint64_t tl_last_corr;        /* correlation id of the latest API record */
	double tl_gpu;                /* cost->gpu_scale (timed replays), else 1 */
	/* steps */
	int x_steps;                  /* the trace has 'x step' records */
	int step_open;
	uint64_t step_begin;
	uint64_t step_serial;         /* steps opened so far: the open one's number */
	size_t steps_cap, steps_gpu_cap, uncaptured_cap, steps_mem_cap;
	struct step_acc step_cur;     /* the open step's memory so far */
	int range_orphan;             /* a nested range began with none open and no
				       * step open (sim_step_mem.late): the memory
				       * from then on, for the step whose range
				       * comes late */
	struct step_acc orphan;

	/* NVTX context for live-at-peak and the stored ranges */
	struct nv_open nvo[MAX_NV_OPEN];
	int nnvo;
	uint64_t nvo_min;             /* earliest end among nvo */
	uint32_t cur_ctx;             /* the innermost open range's ctx (0: none) */
	uint64_t cur_end;
	int seen_step;
	uint64_t last_step_end;       /* trace end of the "step" range that began last
				       * (0: none); not the latest end: a range the
				       * capture wrote late ends late too, after the
				       * program's teardown */
	uint64_t last_step_t;         /* that range's simulated start */
	struct nv_ctx *ctxs;          /* ctx 0 is "no range" */
	uint32_t nctx;
	size_t cap_ctx;
	struct u64map ctx_idx;        /* name pointer | phase << 56 -> ctx */
	size_t ranges_cap;
	/* live at the peak: entries of the live table allocated at or before
	 * pk_line were live at the peak; those freed since are in pk */
	uint64_t last_alloc_line, pk_line;
	struct pk_gone *pk;
	size_t npk, cap_pk;
	int pk_lost;                  /* out of memory: the set is incomplete */

	/* memory outside the framework's allocator (routing on only) */
	const char *fsub;             /* the allocator's SUBSTR; NULL: no routing */
	struct xla_requests *xla;     /* XLA's request stream (sim_options.xla_requests);
				       * NULL: off */
	int xla_route;                /* its never-freed allocations routed beside it */
	int torch_ws;                 /* a PyTorch capture: workspaces marked (engine_pipe.c) */
	struct u64map flive;          /* trace addr -> bytes << 16 | FLIVE_STATIC | flib index */
	struct u64map flib_idx;       /* source | kind << 32 -> flib index */
	struct flib *flibs;
	uint32_t nflib;
	size_t cap_flib;
	uint64_t foreign_live;
	int64_t oom_flib;             /* flib holding most at the first OOM, -1 none */
};


/* Which allocations the framework's allocator never served: the rule of
 * engine.h (enum sim_foreign_mode), with the answer per source string id
 * cached, since strstr per record would cost as much as the replay. */
struct foreign_rule {
	const char *sub;        /* NULL: no routing */
	uint8_t *cache;         /* string id -> 0 unknown, 1 framework, 2 foreign */
	size_t ncache;
	const struct xla_requests *xla; /* XLA's request stream; NULL: off */
	int xla_route;          /* its allocations outside XLA go beside the policy */
	int torch_ws;           /* a PyTorch capture: mark its convolution workspaces
				 * (TMEM_F_SHRINKABLE; engine_pipe.c) */
};

/* ------------------------------------------------------- live table */

/* Multiplicative hashing on the top bits; the fold first mixes the high
 * half in, since device addresses differ mostly above their alignment. */
static inline size_t live_home(const struct live_table *t, uint64_t addr)
{
	return (size_t)(((addr ^ (addr >> 32)) * 0x9e3779b97f4a7c15ull) >> t->shift);
}

static inline int live_grow(struct live_table *t)
{
	size_t ncap = t->slot ? (t->mask + 1) * 2 : 4096;
	struct live_ent *ns = malloc(ncap * sizeof *ns);
	if (!ns)
		return -1;
	for (size_t i = 0; i < ncap; i++)
		ns[i].addr = LIVE_EMPTY;
	struct live_table n = {ns, ncap - 1, t->count, 64};
	for (size_t c = ncap; c > 1; c >>= 1)
		n.shift--;
	for (size_t i = 0; t->slot && i <= t->mask; i++) {
		if (t->slot[i].addr == LIVE_EMPTY)
			continue;
		size_t j = live_home(&n, t->slot[i].addr);
		while (ns[j].addr != LIVE_EMPTY)
			j = (j + 1) & n.mask;
		ns[j] = t->slot[i];
	}
	free(t->slot);
	*t = n;
	return 0;
}

/* The entry for ADDR, or NULL. */
static inline struct live_ent *live_find(const struct live_table *t, uint64_t addr)
{
	if (!t->slot)
		return NULL;
	size_t i = live_home(t, addr);
	for (;;) {
		struct live_ent *le = &t->slot[i];
		if (le->addr == addr)
			return le;
		if (le->addr == LIVE_EMPTY)
			return NULL;
		i = (i + 1) & t->mask;
	}
}

/* The entry for ADDR: the existing one (*fresh = 0) or a new slot with
 * only addr set (*fresh = 1). NULL when out of memory. One probe does both
 * the "already live?" check and the insert. */
static inline struct live_ent *live_claim(struct live_table *t, uint64_t addr, int *fresh)
{
	if ((!t->slot || (t->count + 1) * 2 > t->mask + 1) && live_grow(t) < 0)
		return NULL;
	size_t i = live_home(t, addr);
	for (;;) {
		struct live_ent *le = &t->slot[i];
		if (le->addr == addr) {
			*fresh = 0;
			return le;
		}
		if (le->addr == LIVE_EMPTY) {
			le->addr = addr;
			t->count++;
			*fresh = 1;
			return le;
		}
		i = (i + 1) & t->mask;
	}
}

/* Empty slot LE, pulling later members of its cluster back so that every
 * lookup still finds its key before the first empty slot. */
static inline void live_remove(struct live_table *t, struct live_ent *le)
{
	size_t hole = (size_t)(le - t->slot), j = hole;
	for (;;) {
		j = (j + 1) & t->mask;
		uint64_t a = t->slot[j].addr;
		if (a == LIVE_EMPTY)
			break;
		size_t home = live_home(t, a);
		/* movable when its home is not cyclically in (hole, j] */
		if (((j - home) & t->mask) >= ((j - hole) & t->mask)) {
			t->slot[hole] = t->slot[j];
			hole = j;
		}
	}
	t->slot[hole].addr = LIVE_EMPTY;
	t->count--;
}

/* ------------------------------------------------- reader thread */

/* 4 x 2048 records of 112 bytes: ~900 KiB in flight, a hand-off per 2048 records */
#define PIPE_BATCH 2048
#define PIPE_NBATCH 4

struct rec_batch {
	struct eng_rec *recs;
	size_t n;
	int rc;                 /* TRACE_OK: more batches follow; else the end status */
};

struct rec_pipe {
	struct trace_reader *rd;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv_full, cv_empty;
	struct rec_batch b[PIPE_NBATCH];
	unsigned head, tail, count;
	int stop, started;
	uint8_t libc[1024];     /* reader thread's: string id -> 2 library source, 1 not */
	struct foreign_rule fr; /* reader thread's, when the engine routes */
};

/* engine.c */
void add_event(struct engine *e, enum sim_event_kind kind, uint64_t t, uint64_t bytes, uint64_t line, const char *detail);
void drain_until(struct engine *e, uint64_t t);
/* engine_oom.c: REC (an allocation on STREAM at NOW) failed. */
void on_oom(struct engine *e, const struct trace_rec *rec, uint64_t now, uint32_t stream);
/* The most a workspace may ask for now, as PyTorch's cuDNN search reckons
 * it (cacheInfo): the device's free bytes or the policy's largest cached
 * free block, whichever is larger; UINT64_MAX with no capacity. The policy
 * is asked only when the device has less than WANT free. */
uint64_t workspace_room(struct engine *e, uint64_t want);
void ranges_end(struct engine *e, uint64_t until, uint64_t now);
void step_close(struct engine *e, uint64_t t);
void final_stat(void *ctx, const char *name, int64_t value);
void pk_note_free(struct engine *e, const struct live_ent *le, uint64_t t);
int is_step_name(const char *n);
/* The device calls made so far: allocations and maps, frees and unmaps. */
void device_calls(struct engine *e, uint64_t *allocs, uint64_t *frees);
/* A nested range began with no range and no step open: its parent's
 * record will come late; keep the memory from NOW for that step. */
void step_orphan_begin(struct engine *e, uint64_t now);

/* engine_peak.c */
unsigned phase_of(const char *n);
uint32_t ctx_intern(struct engine *e, const char *name, unsigned phase);
void nv_refresh(struct engine *e);
int range_cmp_name(const void *a, const void *b);
int range_cmp_time(const void *a, const void *b);
void ranges_merge(struct sim_result *r, uint64_t gap);
void range_keep(struct engine *e, const char *name, uint32_t depth, uint64_t t, uint64_t end);
void nv_push(struct engine *e, const struct eng_rec *er, uint64_t now);
void nv_pop(struct engine *e, uint64_t until, uint64_t now);
enum sim_live_kind pk_classify(const struct engine *e, uint32_t ctx, int freed, int within, unsigned free_phase);
int pk_item_cmp(const void *a, const void *b);
int pk_layer_cmp(const void *a, const void *b);
void pk_row(struct sim_result *r, uint32_t rank, enum sim_live_kind kind, uint64_t bytes, uint64_t count, uint64_t line, const char *layer);
void pk_finish(struct engine *e);

/* engine_result.c */
int copy_identity(struct engine *e, char *err, size_t errlen);
void insert_peak_event(struct engine *e);
void flib_name(struct engine *e, const struct flib *l, char *buf, size_t len);
int flib_cmp(const void *a, const void *b);
int foreign_finish(struct engine *e);
int finish(struct engine *e, char *err, size_t errlen);
int prepass(struct engine *e, char *err, size_t errlen);
int launch_prepass(struct engine *e, char *err, size_t errlen);

/* timing.c */
void timing_init(struct engine *e);
void timing_credit(struct engine *e, const struct eng_rec *er);
uint64_t timing_call_credit(const struct engine *e, uint64_t dur);

/* engine_pipe.c */
int is_foreign(struct trace_reader *rd, const struct trace_mem *m, struct foreign_rule *fr);
int is_lib_source(struct trace_reader *rd, uint32_t id, uint8_t *cache, size_t ncache);
void eng_rec_derive(struct eng_rec *er, struct trace_reader *rd, uint8_t *libc, size_t nlibc, struct foreign_rule *fr);
void *pipe_main(void *arg);
int pipe_start(struct rec_pipe *p, struct trace_reader *rd, const struct foreign_rule *fr);
/* An 'a' or 'f' record under FR's rules: 1 when it is an allocation
 * outside the framework's allocator (the source rule, or XLA's never-freed
 * rule when routed); XLA's request stream may rewrite its bytes. */
int mem_rules(struct trace_reader *rd, struct trace_rec *rec, struct foreign_rule *fr);
struct rec_batch *pipe_take(struct rec_pipe *p);
void pipe_release(struct rec_pipe *p);
void pipe_stop(struct rec_pipe *p);

#endif /* SIM_ENGINE_INT_H */
