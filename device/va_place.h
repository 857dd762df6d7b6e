/*
 * va_place.h: where the driver puts a cudaMalloc in virtual address space
 * (the synthetic addresses of device.c).
 *
 * Why it matters: PyTorch's caching allocator breaks ties between equal-sized
 * free blocks by address, so which segment the driver placed lower decides
 * which block is reused. The rules were measured on an H200 (driver 580)
 * with capture/va_probe.sh (traces/va_probe/; evidence in docs/policies.md,
 * "Synthetic addresses"). The driver allocates in two levels:
 *  - chunks: address space is taken in chunks of a whole number of 32 MiB
 *    (a request of N bytes that fits no chunk makes a chunk of N rounded up
 *    to 32 MiB). New chunks come top-down: from a released range strictly
 *    larger than the chunk (the highest such range, at its high end), else
 *    just below the lowest chunk so far. A chunk whose last allocation is
 *    freed is released; released neighbours coalesce, and one at the bottom
 *    goes back to the fresh space;
 *  - inside chunks: allocations are whole 2 MiB pages; a request goes to the
 *    NEWEST chunk that has a free range large enough, at the low end of its
 *    best-fitting such range (the smallest, the lowest of equal ones; a new
 *    chunk's request sits at its low end, the rest of the chunk is free for
 *    later requests). Frees coalesce inside a chunk. Best fit was read off
 *    61 recorded PyTorch runs' segment calls replayed on an H200
 *    (traces/va_probe/replay.tsv.gz): all 10,965 placed as the driver did.
 * The CUDA context owns chunks before the first call (va_add_context):
 * 2 MiB free 74 MiB below a 24 MiB free range, which lies 488 MiB above the
 * first fresh chunk, and the 414 MiB between the two, held. In PyTorch runs
 * cuDNN/cuBLAS first load at a pause of 90+ ms (every recorded run): the
 * load takes VA_LIBRARY_SKIP of fresh space below the lowest chunk, the
 * next allocation is placed as usual, then the libraries take a 2 MiB page
 * of their own (VA_LIBRARY_PAGE, by the same rules: mostly in that
 * allocation's chunk, which it keeps alive) and the context frees its
 * 414 MiB, a chunk older than any made since (va_context_release).
 * Reserved ranges (cuMemAddressReserve) share the chunks but new ones come
 * from a separate area growing upward (va_reserve).
 * Deterministic; O(log n) per call (a treap of released ranges with the
 * largest range of each subtree, a max-tree over chunks in creation order,
 * inside a chunk a short sorted array or, past 128 ranges, a treap; see
 * va_place.c).
 */
#ifndef SIM_VA_PLACE_H
#define SIM_VA_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/u64map.h"

#define VA_CHUNK (32ull << 20) /* chunk granule */

struct va_node;
struct va_rng;
struct va_chunk;

struct va_space {
	uint64_t up;       /* reservations' area: [start, up), grows upward */
	uint64_t floor;    /* lowest chunk taken top-down: fresh is [up, floor) */
	uint64_t over;     /* the modelled space is full: bump upward from the top */
	uint32_t root;     /* treap of released ranges; 0 = empty */
	struct va_node *n; /* treap nodes; node 0 is the null sentinel */
	size_t nn, cap;
	uint32_t freelist; /* recycled nodes, linked through .l */
	struct va_chunk *ch; /* chunks in creation order (dead ones until compacted) */
	size_t nch, capch, ndead;
	struct va_rng **spare; /* free-range arrays of released chunks, for reuse */
	size_t nspare, capspare;
	uint64_t *mx;      /* max-tree over chunk ids: largest free range */
	size_t mxn;        /* leaves (a power of two) */
	uint32_t *pt;      /* allocations on a 2 MiB page below pt_top: chunk id + 1
			    * of the one at page pt_top - 2 MiB * (i + 1); 0: none */
	size_t pt_n;
	uint64_t pt_top;   /* the top, rounded up to 2 MiB */
	struct u64map at;  /* other allocation addresses -> chunk id */
	int oom;           /* host memory ran out: placement is no longer the model's */
	enum {
		VA_CTX_FREE,   /* the context's low 414 MiB: free, or no context */
		VA_CTX_HELD,   /* held by the context */
		VA_CTX_LOADED, /* the libraries loaded: freed after the next take */
	} ctx;
	size_t ctx_chunk;  /* the chunk that holds them; SIZE_MAX: none */
};

/* The space [BOTTOM, TOP): chunks come from TOP downward, reservations from
 * BOTTOM upward. */
void va_init(struct va_space *v, uint64_t bottom, uint64_t top);
void va_fini(struct va_space *v);

/* The CUDA context's own chunks, placed at the top (see above): call right
 * after va_init. Returns -1 when out of memory. */
int va_add_context(struct va_space *v);

/* cuDNN and cuBLAS load: the next fresh chunk lies VA_LIBRARY_SKIP lower,
 * and after the next va_take the libraries' page is taken and the context's
 * 414 MiB are freed (see above; once; after va_add_context). The device
 * calls it at the first pause of VA_CONTEXT_PAUSE_NS between mallocs.
 * Returns 0. */
int va_context_release(struct va_space *v);
#define VA_CONTEXT_LOW (414ull << 20)
/* What a PyTorch run shows after the load (59 of 61 runs, docs/policies.md):
 * the first allocation makes a fresh chunk, is freed, and the next one
 * reuses that chunk from its low end although the 414 MiB would hold it;
 * the 414 MiB is first used by an allocation that does not fit there. The
 * libraries' own cudaMallocs are sub-2 MiB buffers sharing one page. */
#define VA_LIBRARY_PAGE (2ull << 20)
#define VA_CONTEXT_PAUSE_NS 50000000ull
/* Measured: in 59 of the 61 replayed runs (docs/policies.md) the first
 * fresh chunk after the load lies 288-384 MiB below where the driver alone
 * puts it, most often 320 or 352 (the other two, alexnet's: above the
 * context). Any value from 256 to 416 MiB gives the same validation.
 * What it is, seen in /proc/self/maps (docs/policies.md, "The process's
 * address space"): cuDNN's libraries, 342-380 MiB, mapped below the lowest
 * range when they load. */
#define VA_LIBRARY_SKIP (352ull << 20)

/* A range of BYTES (a multiple of the page the caller rounds to). */
uint64_t va_take(struct va_space *v, uint64_t bytes);

/* A reserved range of BYTES (cuMemAddressReserve): as va_take, but a new
 * chunk comes from the upward area. */
uint64_t va_reserve(struct va_space *v, uint64_t bytes);

/* Give back the range at ADDR that va_take or va_reserve returned (BYTES is
 * its size). Returns -1 when ADDR is not one, or out of memory (the range
 * is then not reused). */
int va_give(struct va_space *v, uint64_t addr, uint64_t bytes);

/* For tests: released ranges held, and chunks alive. */
size_t va_free_ranges(const struct va_space *v);
size_t va_chunks(const struct va_space *v);

#endif /* SIM_VA_PLACE_H */
