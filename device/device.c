/*
 * device.c: the simulated device's memory (see device.h).
 *
 * Synthetic addresses follow the driver's placement as measured on an H200
 * (va_place.h; docs/policies.md): 2 MiB pages sub-allocated from 32 MiB
 * chunks, the newest chunk with room first, new chunks top-down below the
 * CUDA context's own; reserved ranges (device_reserve_va) from a separate
 * area growing upward. PyTorch breaks ties between equal-sized free blocks
 * by address, so this order decides which block a replay reuses.
 *
 * Recorded addresses: the trace's 'g alloc' records queue up in order; a
 * device_malloc of BYTES takes the oldest pending recorded segment of the
 * same size. When none matches (the replay diverged from the real
 * allocator) it falls back to a synthetic address in a disjoint range and
 * counts a miss. Expandable segments: a virtual range reserved with
 * device_reserve_va starts at the oldest recorded 'g map' that lies outside
 * every range reserved so far (a segment's first map is at its base).
 *
 * Speed: a cuda_malloc replay makes one device call per trace event, so
 * the synthetic path is O(log n) (va_place.c), and the map of live segments
 * (base -> bytes) is kept only where it is needed: recorded mode (a recorded
 * address must not be live) and when a log is attached (validation sees
 * the bytes the segment really had). Otherwise device_free trusts the
 * policy's BYTES, which the interface requires to be what it allocated.
 */
#include "device.h"

#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "va_place.h"
#include "../base/u64map.h"
#include "../base/vec.h"
#include "../traces/trace.h"

#define PAGE (2ull << 20)
/* Synthetic ranges are taken downward from SYNTH_TOP; recorded mode's
 * fallback ones from SYNTH_BASE down to FALLBACK_BASE, disjoint from both
 * the synthetic range and the real runs' addresses (0x7f...). */
#define SYNTH_TOP 0x7fff00000000ull
#define SYNTH_BASE 0x7f0000000000ull
#define FALLBACK_BASE 0x100000000000ull

struct recorded { uint64_t addr, bytes; };

/* Recorded mode, expandable segments: virtual ranges reserved so far, and
 * the recorded maps that fall outside all of them (candidate range bases),
 * oldest first. Added for the pytorch policy's exact replay. */
struct va_range { uint64_t base, size; };

struct sim_device {
	uint64_t capacity, reserved, peak_reserved;
	uint64_t foreign, peak_total;  /* outside the policy; max of reserved + foreign */
	enum device_addr_mode mode;
	struct va_space place;        /* synthetic placement */
	struct u64map live;           /* base -> bytes of live segments/maps */
	int track_live;               /* keep `live` (recorded mode or a log) */
	struct recorded *rec;         /* FIFO of pending recorded segment allocs */
	size_t rec_head, rec_tail, rec_cap;
	struct va_range *va;
	size_t nva, capva;
	uint64_t *vabase;             /* FIFO of candidate recorded VA bases */
	size_t vb_head, vb_tail, vb_cap;
	struct device_counters c;
	device_log_fn log;
	void *log_ctx;
	uint64_t now;
	uint64_t last_malloc;          /* time of the last synthetic malloc */
	int ctx_released;              /* va_context_release done */
	const struct cost_model *cost; /* NULL: calls cost no time */
	struct u64map fixed;           /* request sizes size_scale leaves alone */
	uint64_t cost_ns, cost_calls;   /* pending for the engine */
	int cost_sync;
};

struct sim_device *device_create(uint64_t capacity, enum device_addr_mode mode)
{
	struct sim_device *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->capacity = capacity ? capacity : UINT64_MAX;
	d->mode = mode;
	d->track_live = mode == DEVICE_ADDR_RECORDED;
	if (mode == DEVICE_ADDR_RECORDED) {
		va_init(&d->place, FALLBACK_BASE, SYNTH_BASE);
	} else {
		va_init(&d->place, FALLBACK_BASE, SYNTH_TOP);
		if (va_add_context(&d->place) < 0) {
			va_fini(&d->place);
			free(d);
			return NULL;
		}
	}
	u64map_init(&d->live);
	u64map_init(&d->fixed);
	return d;
}

void device_destroy(struct sim_device *d)
{
	if (!d)
		return;
	va_fini(&d->place);
	free(d->rec);
	free(d->va);
	free(d->vabase);
	u64map_free(&d->live);
	u64map_free(&d->fixed);
	free(d);
}

void device_set_log(struct sim_device *d, device_log_fn fn, void *ctx)
{
	d->log = fn;
	d->log_ctx = ctx;
	if (fn)
		d->track_live = 1;
}

void device_set_time(struct sim_device *d, uint64_t t) { d->now = t; }

void device_set_cost(struct sim_device *d, const struct cost_model *m) { d->cost = m; }

void device_fix_size(struct sim_device *d, uint64_t bytes)
{
	(void)u64map_put(&d->fixed, bytes, 1); /* out of memory: that size scales */
}

/* The bytes a device call of BYTES is charged as (size_scale), unless a
 * request of that size came before the first kernel. */
static uint64_t call_bytes(const struct sim_device *d, uint64_t bytes)
{
	uint64_t v;
	if (d->fixed.count && u64map_get(&d->fixed, bytes, &v))
		return bytes;
	return cost_call_bytes(d->cost, bytes);
}

uint64_t device_take_cost(struct sim_device *d, uint64_t *ns, int *sync)
{
	uint64_t calls = d->cost_calls;
	*ns = d->cost_ns;
	*sync = d->cost_sync;
	d->cost_ns = d->cost_calls = 0;
	d->cost_sync = 0;
	return calls;
}
uint64_t device_reserved(const struct sim_device *d) { return d->reserved; }

uint64_t device_capacity(const struct sim_device *d)
{
	return d->capacity == UINT64_MAX ? 0 : d->capacity;
}

void device_get_counters(const struct sim_device *d, struct device_counters *c)
{
	*c = d->c;
	c->reserved = d->reserved;
	c->peak_reserved = d->peak_reserved;
}

/* ------------------------------------------------ synthetic addresses */

static uint64_t footprint(uint64_t bytes)
{
	return bytes ? (bytes + PAGE - 1) & ~(PAGE - 1) : PAGE;
}

static uint64_t synth_take(struct sim_device *d, uint64_t bytes)
{
	return va_take(&d->place, footprint(bytes));
}

static void synth_return(struct sim_device *d, uint64_t addr, uint64_t bytes)
{
	(void)va_give(&d->place, addr, footprint(bytes)); /* on failure: never reused */
}

static uint64_t synth_reserve(struct sim_device *d, uint64_t bytes)
{
	return va_reserve(&d->place, footprint(bytes));
}

/* ------------------------------------------------- recorded addresses */

static int va_inside(const struct sim_device *d, uint64_t addr)
{
	for (size_t i = 0; i < d->nva; i++)
		if (addr - d->va[i].base < d->va[i].size)
			return 1;
	return 0;
}

/* A recorded map outside every reserved range starts a new virtual range
 * (an expandable segment's first map is at its base). */
static void note_recorded_map(struct sim_device *d, uint64_t addr)
{
	if (va_inside(d, addr))
		return;
	if (d->vb_tail == d->vb_cap) {
		if (d->vb_head) {
			memmove(d->vabase, d->vabase + d->vb_head,
				(d->vb_tail - d->vb_head) * sizeof *d->vabase);
			d->vb_tail -= d->vb_head;
			d->vb_head = 0;
		}
		if (VEC_RESERVE(d->vabase, d->vb_cap, d->vb_tail + 1, 16) < 0)
			return;
	}
	d->vabase[d->vb_tail++] = addr;
}

void device_note_recorded(struct sim_device *d, uint32_t op, uint64_t addr, uint64_t bytes)
{
	if (d->mode == DEVICE_ADDR_RECORDED && op == TSEG_MAP) {
		note_recorded_map(d, addr);
		return;
	}
	if (d->mode != DEVICE_ADDR_RECORDED || op != TSEG_ALLOC)
		return;
	if (d->rec_tail == d->rec_cap) {
		/* compact first, then grow */
		if (d->rec_head) {
			memmove(d->rec, d->rec + d->rec_head,
				(d->rec_tail - d->rec_head) * sizeof *d->rec);
			d->rec_tail -= d->rec_head;
			d->rec_head = 0;
		}
		if (VEC_RESERVE(d->rec, d->rec_cap, d->rec_tail + 1, 64) < 0)
			return;
	}
	d->rec[d->rec_tail].addr = addr;
	d->rec[d->rec_tail].bytes = bytes;
	d->rec_tail++;
}

/* The oldest pending recorded segment of BYTES whose address is not live. */
static int recorded_take(struct sim_device *d, uint64_t bytes, uint64_t *addr)
{
	uint64_t dummy;
	for (size_t i = d->rec_head; i < d->rec_tail; i++) {
		if (d->rec[i].bytes != bytes || u64map_get(&d->live, d->rec[i].addr, &dummy))
			continue;
		*addr = d->rec[i].addr;
		/* remove entry i, keeping FIFO order */
		memmove(d->rec + i, d->rec + i + 1, (d->rec_tail - i - 1) * sizeof *d->rec);
		d->rec_tail--;
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------- device calls */

/* reserved + foreign never exceeds the capacity, so the subtraction
 * cannot wrap. */
static int account(struct sim_device *d, uint64_t bytes)
{
	if (bytes > d->capacity - d->reserved - d->foreign) {
		d->c.failed++;
		return DEVICE_OOM;
	}
	d->reserved += bytes;
	if (d->reserved > d->peak_reserved)
		d->peak_reserved = d->reserved;
	if (d->reserved + d->foreign > d->peak_total)
		d->peak_total = d->reserved + d->foreign;
	return DEVICE_OK;
}

int device_foreign_alloc(struct sim_device *d, uint64_t bytes)
{
	if (bytes > d->capacity - d->reserved - d->foreign) {
		d->c.failed++;
		return DEVICE_OOM;
	}
	d->foreign += bytes;
	if (d->reserved + d->foreign > d->peak_total)
		d->peak_total = d->reserved + d->foreign;
	if (d->cost) {
		d->cost_ns += cost_curve_ns(&d->cost->malloc_c, call_bytes(d, bytes));
		d->cost_calls++;
	}
	return DEVICE_OK;
}

void device_foreign_free(struct sim_device *d, uint64_t bytes)
{
	d->foreign -= bytes <= d->foreign ? bytes : d->foreign;
	if (d->cost) {
		d->cost_ns += cost_curve_ns(&d->cost->free_c, call_bytes(d, bytes));
		d->cost_calls++;
		d->cost_sync |= d->cost->free_sync;
	}
}

uint64_t device_foreign(const struct sim_device *d) { return d->foreign; }

uint64_t device_peak_total(const struct sim_device *d)
{
	return d->peak_total > d->peak_reserved ? d->peak_total : d->peak_reserved;
}

int device_malloc(struct sim_device *d, uint64_t bytes, uint32_t stream, uint64_t *addr)
{
	(void)stream;
	if (account(d, bytes) != DEVICE_OK)
		return DEVICE_OOM;
	uint64_t a;
	if (d->mode == DEVICE_ADDR_RECORDED) {
		if (recorded_take(d, bytes, &a)) {
			d->c.recorded_used++;
		} else {
			d->c.recorded_missed++;
			a = synth_take(d, bytes);
		}
	} else {
		/* the first pause between mallocs: the libraries load and the
		 * context frees its low range (va_place.h) */
		if (!d->ctx_released && d->c.mallocs && d->now >= d->last_malloc &&
		    d->now - d->last_malloc >= VA_CONTEXT_PAUSE_NS) {
			(void)va_context_release(&d->place);
			d->ctx_released = 1;
		}
		d->last_malloc = d->now;
		a = synth_take(d, bytes);
	}
	if (d->track_live)
		u64map_put(&d->live, a, bytes);
	d->c.mallocs++;
	if (d->cost) {
		d->cost_ns += cost_curve_ns(&d->cost->malloc_c, call_bytes(d, bytes));
		d->cost_calls++;
	}
	if (d->log)
		d->log(d->log_ctx, TSEG_ALLOC, a, bytes, d->now);
	*addr = a;
	return DEVICE_OK;
}

void device_free(struct sim_device *d, uint64_t addr, uint64_t bytes)
{
	uint64_t had;
	if (d->track_live && u64map_del(&d->live, addr, &had))
		bytes = had;
	d->reserved -= bytes <= d->reserved ? bytes : d->reserved;
	d->c.frees++;
	if (d->cost) {
		d->cost_ns += cost_curve_ns(&d->cost->free_c, call_bytes(d, bytes));
		d->cost_calls++;
		d->cost_sync |= d->cost->free_sync;
	}
	/* recorded addresses come back from the record, not from reuse */
	if (d->mode == DEVICE_ADDR_SYNTHETIC || (addr >= FALLBACK_BASE && addr < SYNTH_BASE))
		synth_return(d, addr, bytes);
	if (d->log)
		d->log(d->log_ctx, TSEG_FREE, addr, bytes, d->now);
}

uint64_t device_reserve_va(struct sim_device *d, uint64_t bytes)
{
	uint64_t a = 0;
	int found = 0;
	if (d->mode == DEVICE_ADDR_RECORDED) {
		/* the oldest recorded map outside every range reserved so far */
		while (d->vb_head < d->vb_tail && !found) {
			a = d->vabase[d->vb_head++];
			found = !va_inside(d, a);
		}
		if (found) {
			d->c.recorded_used++;
			if (VEC_RESERVE(d->va, d->capva, d->nva + 1, 8) == 0) {
				d->va[d->nva].base = a;
				d->va[d->nva].size = bytes;
				d->nva++;
			}
			return a;
		}
		d->c.recorded_missed++;
	}
	return synth_reserve(d, bytes);
}

static double mib(uint64_t bytes) { return (double)bytes / (double)(1ull << 20); }

static uint64_t pages(uint64_t bytes, uint64_t page) { return (bytes + page - 1) / page; }

int device_map(struct sim_device *d, uint64_t addr, uint64_t bytes, uint64_t page, uint32_t stream)
{
	(void)stream;
	if (account(d, bytes) != DEVICE_OK)
		return DEVICE_OOM;
	d->c.maps++;
	if (d->cost) {
		const struct cost_model *m = d->cost;
		double ns = page ? m->map_ns + m->map_page_ns * (double)pages(bytes, page)
				 : m->pool_grow_ns + m->pool_grow_ns_per_mib * mib(bytes);
		d->cost_ns += (uint64_t)ns;
		d->cost_calls++;
	}
	if (d->log)
		d->log(d->log_ctx, TSEG_MAP, addr, bytes, d->now);
	return DEVICE_OK;
}

void device_unmap(struct sim_device *d, uint64_t addr, uint64_t bytes, uint64_t page)
{
	d->reserved -= bytes <= d->reserved ? bytes : d->reserved;
	d->c.unmaps++;
	if (d->cost) {
		const struct cost_model *m = d->cost;
		double ns = page ? m->unmap_ns + m->unmap_page_ns * (double)pages(bytes, page) +
				   m->unmap_ns_per_mib * mib(bytes)
				 : m->pool_trim_ns + m->pool_trim_ns_per_mib * mib(bytes);
		d->cost_ns += (uint64_t)ns;
		d->cost_calls++;
		/* ExpandableSegment::unmapHandles synchronises its stream first */
		if (page)
			d->cost_sync |= m->free_sync;
	}
	if (d->log)
		d->log(d->log_ctx, TSEG_UNMAP, addr, bytes, d->now);
}

void device_pool_call(struct sim_device *d, int is_free)
{
	if (!d->cost)
		return;
	const struct cost_model *m = d->cost;
	d->cost_ns += (uint64_t)(is_free ? m->pool_free_ns : m->pool_alloc_ns);
	d->cost_calls++;
}
