/*
 * policy.h: the allocator policy interface.
 *
 * A policy is one const struct of function pointers with a name (in the
 * spirit of sqlite3_vfs): it turns the trace's allocation requests into
 * addresses inside device memory it obtains from the simulated device
 * (device/device.h). Policies never see a clock except the time the engine
 * passes them; the engine computes every common metric (allocated, reserved,
 * peaks, counts, fragmentation, OOM) from what policies return and from the
 * device, so all policies are measured the same way.
 *
 * Adding a policy: one file policies/NAME.c exporting one
 * `const struct alloc_policy policy_NAME`, one entry in registry.c.
 */
#ifndef POLICIES_POLICY_H
#define POLICIES_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "../base/conf.h"
#include "../device/device.h"
#include "../traces/trace.h"

/* 2 added the optional decisions hook; the engine still runs version 1
 * policies (it reads no member past flags from them). */
#define POLICY_IFACE_VERSION 2
#define POLICY_IFACE_MIN_VERSION 1

/* alloc() results. */
#define POLICY_OK 0
#define POLICY_OOM 1        /* no memory: a simulated OOM, a result */

/* What the engine gives a policy at init. */
struct policy_env {
	struct sim_device *dev;           /* where device memory comes from */
	uint64_t capacity;                /* device capacity in bytes (--capacity) */
	const struct trace_header *header;/* the trace's header (GPU, labels) */
};

struct alloc_request {
	uint64_t id;      /* the trace's allocation id */
	uint64_t bytes;   /* requested bytes (unrounded) */
	uint32_t stream;  /* stream the request belongs to (0 = default) */
	uint64_t t;       /* simulated time, ns */
};

struct alloc_result {
	uint64_t addr;        /* address handed to the program */
	uint64_t block_bytes; /* bytes the allocator counts as allocated
			       * (rounded or whole-block size, PyTorch style) */
};

/* Control events the engine forwards. */
enum policy_control {
	POLICY_CTL_EMPTY_CACHE = 0, /* release cached memory (empty_cache) */
	POLICY_CTL_SYNC,            /* the host synchronised with the device */
	POLICY_CTL_STEP,            /* a training step boundary */
	/* NVTX range begin/end: ARG is (uintptr_t) of the range's name, a
	 * NUL-terminated string valid only during the call */
	POLICY_CTL_NVTX_BEGIN,
	POLICY_CTL_NVTX_END,
};

/* Stats sink: a policy emits its own figures under the framework's names. */
typedef void (*policy_stat_fn)(void *ctx, const char *name, int64_t value);

/*
 * Decisions (optional, POLICY_IFACE_VERSION >= 2): a policy that implements
 * alloc_policy.decisions reports each time it takes device memory or gives
 * it back, with the rule that chose the size and what it held free at that
 * moment, so that a caller can name the mechanism behind a peak (`explain
 * batch`) instead of inferring it from totals. Reporting changes nothing in
 * the replay. what/why are static strings (valid for the whole run).
 */
enum policy_decision_kind {
	POLICY_DEC_GROW = 0,   /* device memory taken: a region, a segment, pages mapped */
	POLICY_DEC_RELEASE,    /* device memory given back */
	POLICY_DEC_RULE,       /* a standing rule, reported when the hook is set:
				* a memory limit, a release threshold (BYTES) */
};

struct policy_decision {
	enum policy_decision_kind kind;
	const char *what;      /* "region", "segment", "map", "unmap", "trim", "limit",
				* "release_threshold", ... */
	const char *why;       /* the rule, e.g. "twice the last region",
				* "doubled until the request fit", "no cached block fits",
				* "empty_cache", "garbage collection" */
	uint64_t addr, bytes;  /* the device range taken or given back (RULE: the value) */
	uint64_t held;         /* device bytes the policy holds after it */
	uint64_t count;        /* regions / segments / mapped ranges held after it */
	/* GROW: the request that forced it (0 when none), and what the policy
	 * held free at that moment that could not serve it */
	uint64_t request;      /* its bytes as the policy rounds them */
	uint64_t req_id;       /* its trace allocation id */
	uint64_t free_bytes;   /* free bytes then (the request's pool and stream) */
	uint64_t largest_free; /* the largest free block / chunk then */
	uint64_t free_blocks;  /* free blocks / chunks then */
	uint64_t prev_bytes;   /* bfc: the size rule's next region size before this
				* growth (twice the last, or the last when that one
				* had doubled to fit), else 0 */
};

/* Decision sink: CTX as given to the hook. */
typedef void (*policy_decision_fn)(void *ctx, const struct policy_decision *d);

/* A knob, for --help and error messages. */
struct policy_knob {
	const char *name;     /* exactly as the framework spells it */
	const char *syntax;   /* e.g. "<MiB>", "True|False", "[256:1,>:4]" */
	const char *help;
};

struct alloc_policy {
	int iversion;                     /* POLICY_IFACE_VERSION */
	const char *name;
	const char *description;          /* one line */
	size_t state_size;                /* bytes the engine allocates (zeroed) */
	const struct policy_knob *knobs;  /* terminated by {NULL} */

	/* Parse CONF (the framework's own syntax, may be "" or NULL) and set up.
	 * Unknown or malformed knobs: return -1 with ERR naming the knob.
	 * A failed init releases what it took: fini is called only after a
	 * successful init. */
	int (*init)(void *st, const char *conf, const struct policy_env *env,
		    char *err, size_t errlen);
	/* Serve a request: POLICY_OK with *res, or POLICY_OOM. */
	int (*alloc)(void *st, const struct alloc_request *req, struct alloc_result *res);
	/* Return a block served by alloc (ADDR and BLOCK_BYTES as it returned). */
	void (*free)(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream);
	/* Optional: control events (NULL = ignore). */
	void (*control)(void *st, enum policy_control ctl, uint64_t arg);
	/* Optional: the policy's own stats (NULL = none). Emit at least
	 * "largest_free_block" and "cached_free_bytes" where meaningful: the
	 * engine asks at an OOM to tell capacity from fragmentation. */
	void (*stats)(void *st, policy_stat_fn emit, void *ctx);
	/* Optional, offline policies only: see every record once before the
	 * replay (the engine makes a pre-pass when prepass != NULL). */
	int (*prepass)(void *st, const struct trace_rec *rec);
	int (*prepass_done)(void *st, char *err, size_t errlen);
	/* Release everything the policy holds. */
	void (*fini)(void *st);
	/* Optional: POLICY_F_* bits (0 = none). */
	unsigned flags;
	/* Optional (iversion >= 2; NULL = reports nothing): from now on report
	 * every growth/release decision to FN with CTX (FN NULL: stop). Called
	 * after a successful init, before the first request; a policy may
	 * report its standing rules (POLICY_DEC_RULE) from inside the call. */
	void (*decisions)(void *st, policy_decision_fn fn, void *ctx);
};

/* The engine forwards NVTX range begins/ends (POLICY_CTL_NVTX_*) only to
 * policies that ask, so older control() callbacks never see new values. */
#define POLICY_F_NVTX 1u

/* ---------------------------------------------------------- registry */

/* NULL-terminated table of every policy (registry.c). */
extern const struct alloc_policy *const policy_table[];

/* Find by name; NULL if unknown. */
const struct alloc_policy *policy_find(const char *name);

/* "cuda_malloc, pytorch, ..." into BUF, for "unknown policy" messages. */
void policy_list_names(char *buf, size_t len);

/* ------------------------------------------------- knob messages */

/* "unknown knob 'K' for policy P (known: a, b, c)" into ERR; returns -1. */
int conf_unknown(const char *policy, const struct policy_knob *knobs,
		 const char *key, char *err, size_t errlen);

/* init() of a policy with no knobs: 0 if CONF holds no pair, else -1 with
 * ERR naming the first knob (or where CONF is malformed). */
int conf_none(const char *policy, const char *conf, char *err, size_t errlen);

#endif /* POLICIES_POLICY_H */
