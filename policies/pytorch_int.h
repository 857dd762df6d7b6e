/*
 * pytorch_int.h: what pytorch.c (the allocator) and pytorch_init.c (its
 * knobs, init and teardown) share. Not part of the policy interface.
 */
#ifndef POLICIES_PYTORCH_INT_H
#define POLICIES_PYTORCH_INT_H

#include <stdint.h>

#include "policy.h"
#include "../base/u64map.h"

#define MIB (1024ull * 1024ull)
#define PT_MIN_BLOCK 512ull
#define PT_SMALL_SIZE MIB
#define PT_SMALL_BUFFER (2 * MIB)
#define PT_LARGE_BUFFER (20 * MIB)
#define PT_MIN_LARGE_ALLOC (10 * MIB)
#define PT_ROUND_LARGE (2 * MIB)
#define PT_DIV_INTERVALS 16
#define PT_UNLIMITED UINT64_MAX

/* ------------------------------------------------------------ blocks */

struct pt_eseg;

/* Key and treap links come first: a tree descent reads only those. */
struct pt_block {
	uint64_t addr;
	uint64_t size;
	uint32_t stream, prio;        /* prio: treap heap priority */
	struct pt_block *l, *r, *up;  /* treap links (up: parent) */
	struct pt_sidx *sx;           /* free-block index holding it, or NULL */
	struct pt_tree *set;          /* the unmapped treap holding it, or NULL */
	uint32_t cls;                 /* its size class while in sx */
	uint64_t requested;
	uint64_t gc_base;             /* pool's search count when put back */
	uint8_t small;                /* which pool */
	uint8_t allocated, mapped;
	uint8_t live;                 /* in use (not on the free list) */
	struct pt_eseg *eseg;         /* expandable segment, or NULL */
	struct pt_block *prev, *next; /* neighbours inside the segment */
};

/* One expandable segment: a virtual range mapped page by page. */
struct pt_eseg {
	uint64_t base, size, page;
	uint32_t stream;
	int small;
	struct pt_eseg *next_seg;
};

/* Unmapped blocks, by (stream, addr). */
struct pt_tree {
	struct pt_block *root;
	size_t n;
};

/*
 * Size classes of the free-block index: exact 512 B steps below 2 MiB
 * (every small-pool block, and all sizes are multiples of 512 B), then
 * PT_SUB steps per power of two. The class is monotonic in the size, so
 * classes in order, each a treap by (size, addr), list a stream's blocks
 * in (size, addr) order.
 */
#define PT_LIN_LOG 12                 /* classes 0..4095: size >> 9 */
#define PT_SUB_LOG 6
#define PT_SUB (1u << PT_SUB_LOG)
#define PT_NCLS ((1u << PT_LIN_LOG) + (64u - 9u - PT_LIN_LOG) * PT_SUB)
#define PT_NWORDS ((PT_NCLS + 63) / 64)
#define PT_NSUMM ((PT_NWORDS + 63) / 64)

/* One stream's free blocks of one pool. Invariant: bit c of bits is set
 * iff root[c] != NULL, bit w of summ iff bits[w] != 0. */
struct pt_sidx {
	uint32_t stream;
	uint64_t summ[PT_NSUMM];
	uint64_t bits[PT_NWORDS];
	struct pt_block *root[PT_NCLS];
};

struct pt_pool {
	struct pt_sidx **sx;          /* per-stream indexes, by stream id */
	size_t nsx, capsx;
	struct pt_sidx *last;         /* the one used last (lookup cache) */
	size_t nfree;                 /* free mapped blocks in all of sx */
	struct pt_tree unmapped;
	uint64_t search_count;        /* get_free_blocks_call_count */
	int small;
};

struct pt_stat { uint64_t cur, peak; };

struct pytorch_state {
	struct sim_device *dev;
	uint64_t capacity;
	/* knobs */
	uint64_t max_split;
	uint64_t max_non_split_rounding;
	uint32_t divisions[PT_DIV_INTERVALS];
	double gc_threshold;
	int expandable;
	int set_fraction;
	double fraction;
	uint64_t allowed;             /* fraction x capacity */
	/* state */
	struct pt_pool small, large;
	struct u64map active;         /* addr -> block pointer */
	uint64_t total_reserved;      /* total_allocated_memory in PyTorch */
	struct pt_eseg *esegs;
	struct pt_block *free_list;   /* recycled block structs */
	struct pt_block **chunks;     /* slabs, for fini */
	size_t nchunks, capchunks;
	uint32_t rng;
	/* stats */
	struct pt_stat allocated, reserved, active_b, inactive_split, requested;
	uint64_t num_device_alloc, num_device_free, num_alloc_retries, num_ooms;
	uint64_t num_allocs, num_frees, num_gc_frees;
	int oom_error;                /* host allocation failure: stop politely */
	/* decisions (policy.h): the sink, the segment/map being decided (its
	 * request and the free blocks that could not serve it), and why the
	 * releases under way happen */
	policy_decision_fn dec;
	void *dec_ctx;
	struct policy_decision grow;
	const char *rel_why;
};

#define BLOCKS_PER_CHUNK 4096   /* blocks come from chunks of this many */

/* pytorch.c */
void pool_free_index(struct pt_pool *p);
int ilog2_u64(uint64_t v);

/* pytorch_init.c */
void pt_decisions(void *st, policy_decision_fn fn, void *ctx);
extern const struct policy_knob pytorch_knobs[];
int pt_init(void *st, const char *conf, const struct policy_env *env, char *err, size_t errlen);
void pt_fini(void *st);

#endif /* POLICIES_PYTORCH_INT_H */
