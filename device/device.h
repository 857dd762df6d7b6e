/*
 * device.h: the simulated GPU's memory as the driver sees it.
 *
 * Allocator policies never own device memory: they ask this device for it
 * (cudaMalloc-like segments, or physical pages mapped into a reserved virtual
 * range for expandable segments) and give it back. The device enforces the
 * capacity, hands out addresses, and counts what every metric is built from:
 * reserved bytes, device allocation/free counts, and their cost in time.
 *
 * Addresses come from one of two sources:
 *  - synthetic: a deterministic model of the driver's virtual address space;
 *  - recorded: the addresses the real run got, taken from the trace's 'g'
 *    (TREC_SEGMENT) records, so a replay can follow the real allocator's
 *    tie-breaking among equal-sized free blocks exactly.
 */
#ifndef SIM_DEVICE_H
#define SIM_DEVICE_H

#include <stdint.h>

struct sim_device;

enum device_addr_mode { DEVICE_ADDR_SYNTHETIC = 0, DEVICE_ADDR_RECORDED };

/* Results of device calls. */
#define DEVICE_OK 0
#define DEVICE_OOM (-1)   /* would exceed the capacity (a result, not an error) */

/*
 * Allocate a segment of BYTES (a cudaMalloc). Returns DEVICE_OK with *addr,
 * or DEVICE_OOM when reserved + BYTES would exceed the capacity or the
 * policy's own limit. STREAM is recorded with the segment (for events).
 */
int device_malloc(struct sim_device *d, uint64_t bytes, uint32_t stream, uint64_t *addr);

/* Free a segment returned by device_malloc (a cudaFree; synchronises the device). */
void device_free(struct sim_device *d, uint64_t addr, uint64_t bytes);

/*
 * Expandable segments and the stream-ordered pool: reserve a virtual range
 * (costs no device memory), then map/unmap physical memory inside it.
 * Mapped bytes count as reserved. PAGE: the size of the handles an
 * expandable segment maps (cuMemCreate each; its unmap synchronises the
 * stream first, as a device free does); 0 for the pool, which grows and
 * trims its own memory (cudaMallocAsync, cudaMemPoolTrimTo).
 */
uint64_t device_reserve_va(struct sim_device *d, uint64_t bytes);
int device_map(struct sim_device *d, uint64_t addr, uint64_t bytes, uint64_t page, uint32_t stream);
void device_unmap(struct sim_device *d, uint64_t addr, uint64_t bytes, uint64_t page);

/* Requests of BYTES keep their size when a device call's cost is looked up
 * under size_scale: the engine names the sizes allocated before the first
 * kernel (the model's weights, hence its gradients and optimizer state),
 * which another batch size does not change. */
void device_fix_size(struct sim_device *d, uint64_t bytes);

/* One cudaMallocAsync (IS_FREE 0) or cudaFreeAsync (1) the pool serves from
 * memory it holds: its host cost (with the framework's own work around it,
 * as measured in training steps). */
void device_pool_call(struct sim_device *d, int is_free);

/* Reserved bytes now, and the capacity (bytes the policy may reserve). */
uint64_t device_reserved(const struct sim_device *d);
uint64_t device_capacity(const struct sim_device *d);

/*
 * Memory outside the framework's allocator (a cuBLAS workspace, module
 * globals): the engine takes it from the device directly, never through a
 * policy. It counts against the capacity, so the policy's own device calls
 * fail sooner, but not in device_reserved(), which stays the policy's
 * figure. No address is handed out and nothing is logged (validation
 * compares the policy's segments only); with a cost model the call costs
 * what a cudaMalloc/cudaFree of that size does.
 */
int device_foreign_alloc(struct sim_device *d, uint64_t bytes);
void device_foreign_free(struct sim_device *d, uint64_t bytes);
/* Foreign bytes now; the most reserved + foreign bytes ever held at once. */
uint64_t device_foreign(const struct sim_device *d);
uint64_t device_peak_total(const struct sim_device *d);

/* ------------------------------------------------- engine side only */

/* Called for every device-level action, in simulated order. */
typedef void (*device_log_fn)(void *ctx, uint32_t op /* enum trace_segment_op */,
			      uint64_t addr, uint64_t bytes, uint64_t t);

struct device_counters {
	uint64_t reserved, peak_reserved;
	uint64_t mallocs, frees, maps, unmaps;
	uint64_t failed;            /* calls refused for capacity */
	uint64_t recorded_used;     /* recorded mode: addresses taken from the record */
	uint64_t recorded_missed;   /* recorded mode: no matching recorded segment */
};

/* CAPACITY 0 means unlimited. NULL when out of memory. */
struct sim_device *device_create(uint64_t capacity, enum device_addr_mode mode);
void device_destroy(struct sim_device *d);
void device_set_log(struct sim_device *d, device_log_fn fn, void *ctx);
void device_set_time(struct sim_device *d, uint64_t t);
/* Recorded mode: the engine passes each 'g' record as it reads it. */
void device_note_recorded(struct sim_device *d, uint32_t op, uint64_t addr, uint64_t bytes);
void device_get_counters(const struct sim_device *d, struct device_counters *c);

/* Timing (device/cost.h): with a model set, every device call adds its host
 * cost, and a free asks for a device-wide sync, both pending until the
 * engine takes them after the policy call. NULL (the default) costs nothing. */
struct cost_model;
void device_set_cost(struct sim_device *d, const struct cost_model *m);
/* The host ns charged since the last take, and whether a call needed the
 * device drained first; resets both. Returns the number of device calls. */
uint64_t device_take_cost(struct sim_device *d, uint64_t *ns, int *sync);

#endif /* SIM_DEVICE_H */
