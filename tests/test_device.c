/*
 * test_device.c: the simulated device (device/device.c): capacity and OOM,
 * counters, synthetic address reuse, recorded addresses in FIFO order with
 * the synthetic fallback, the device log, and what map/unmap and pool calls
 * cost the host.
 */
#include <criterion/criterion.h>

#include "../device/cost.h"
#include "../device/device.h"
#include "../traces/trace.h"

#define MiB (1ull << 20)

Test(device, capacity_and_counters)
{
	struct sim_device *d = device_create(100 * MiB, DEVICE_ADDR_SYNTHETIC);
	struct device_counters c;
	uint64_t a, b, x;
	cr_assert_not_null(d);
	cr_assert_eq(device_capacity(d), 100 * MiB);
	cr_assert_eq(device_malloc(d, 60 * MiB, 0, &a), DEVICE_OK);
	cr_assert_eq(device_malloc(d, 50 * MiB, 0, &x), DEVICE_OOM);
	cr_assert_eq(device_malloc(d, 40 * MiB, 0, &b), DEVICE_OK);
	cr_assert_neq(a, b);
	cr_assert_eq(device_reserved(d), 100 * MiB);
	device_free(d, a, 60 * MiB);
	cr_assert_eq(device_reserved(d), 40 * MiB);
	cr_assert_eq(device_map(d, b + 64 * MiB, 20 * MiB, 20 * MiB, 0), DEVICE_OK);
	device_unmap(d, b + 64 * MiB, 20 * MiB, 20 * MiB);
	device_get_counters(d, &c);
	cr_assert_eq(c.mallocs, 2);
	cr_assert_eq(c.frees, 1);
	cr_assert_eq(c.maps, 1);
	cr_assert_eq(c.unmaps, 1);
	cr_assert_eq(c.failed, 1);
	cr_assert_eq(c.peak_reserved, 100 * MiB);
	cr_assert_eq(c.reserved, 40 * MiB);
	device_destroy(d);
}

Test(device, unlimited)
{
	struct sim_device *d = device_create(0, DEVICE_ADDR_SYNTHETIC);
	uint64_t a;
	cr_assert_eq(device_capacity(d), 0);
	cr_assert_eq(device_malloc(d, 1ull << 50, 0, &a), DEVICE_OK);
	device_destroy(d);
}

Test(device, synthetic_reuse_is_deterministic)
{
	struct sim_device *d = device_create(0, DEVICE_ADDR_SYNTHETIC);
	uint64_t a, b, c, a2;
	device_malloc(d, 3 * MiB, 0, &a);
	device_malloc(d, 3 * MiB, 0, &b);
	device_malloc(d, 1 * MiB, 0, &c);
	/* inside a chunk pages go upward (device/va_place.h) */
	cr_assert_eq(b, a + 4 * MiB);
	device_free(d, b, 3 * MiB);
	device_free(d, a, 3 * MiB);
	/* the two freed ranges coalesce; reuse takes the low end */
	device_malloc(d, 8 * MiB, 0, &a2);
	cr_assert_eq(a2, a);
	device_destroy(d);
}

Test(device, recorded_fifo_and_fallback)
{
	struct sim_device *d = device_create(0, DEVICE_ADDR_RECORDED);
	struct device_counters c;
	uint64_t a, b, x, y;
	device_note_recorded(d, TSEG_ALLOC, 0x1000000, 2 * MiB);
	device_note_recorded(d, TSEG_ALLOC, 0x3000000, 4 * MiB);
	device_note_recorded(d, TSEG_ALLOC, 0x2000000, 2 * MiB);
	device_note_recorded(d, TSEG_FREE, 0x1000000, 2 * MiB); /* ignored */
	cr_assert_eq(device_malloc(d, 2 * MiB, 0, &a), DEVICE_OK);
	cr_assert_eq(a, 0x1000000);
	cr_assert_eq(device_malloc(d, 2 * MiB, 0, &b), DEVICE_OK);
	cr_assert_eq(b, 0x2000000);
	cr_assert_eq(device_malloc(d, 4 * MiB, 0, &x), DEVICE_OK);
	cr_assert_eq(x, 0x3000000);
	cr_assert_eq(device_malloc(d, 8 * MiB, 0, &y), DEVICE_OK); /* no record: fallback */
	cr_assert_neq(y, 0x1000000);
	cr_assert_neq(y, 0x2000000);
	cr_assert_neq(y, 0x3000000);
	device_get_counters(d, &c);
	cr_assert_eq(c.recorded_used, 3);
	cr_assert_eq(c.recorded_missed, 1);
	device_destroy(d);
}

struct log_rec { uint32_t op; uint64_t addr, bytes, t; };
struct log_buf { struct log_rec r[8]; int n; };

static void log_fn(void *ctx, uint32_t op, uint64_t addr, uint64_t bytes, uint64_t t)
{
	struct log_buf *l = ctx;
	if (l->n < 8)
		l->r[l->n++] = (struct log_rec){op, addr, bytes, t};
}

Test(device, log_in_order_with_time)
{
	struct sim_device *d = device_create(0, DEVICE_ADDR_SYNTHETIC);
	struct log_buf l = {.n = 0};
	uint64_t a;
	device_set_log(d, log_fn, &l);
	device_set_time(d, 100);
	device_malloc(d, MiB, 0, &a);
	device_set_time(d, 200);
	device_free(d, a, MiB);
	cr_assert_eq(l.n, 2);
	cr_assert_eq(l.r[0].op, TSEG_ALLOC);
	cr_assert_eq(l.r[0].t, 100);
	cr_assert_eq(l.r[1].op, TSEG_FREE);
	cr_assert_eq(l.r[1].addr, a);
	cr_assert_eq(l.r[1].t, 200);
	device_destroy(d);
}

/* Expandable segments pay per page mapped (cuMemCreate + cuMemMap) and an
 * unmap waits for the stream; the pool pays by bytes grown or trimmed, and
 * a call it serves costs a pool call (docs/timing.md, "What an allocator
 * setting costs"). */
Test(device, map_unmap_and_pool_costs)
{
	struct cost_model m;
	struct sim_device *d = device_create(0, DEVICE_ADDR_SYNTHETIC);
	uint64_t ns;
	int sync;
	cr_assert_not_null(d);
	cost_defaults(&m);
	device_set_cost(d, &m);

	/* 4 pages of 2 MiB, then 1 of 20 MiB: the count, not the size */
	cr_assert_eq(device_map(d, 1ull << 40, 8 * MiB, 2 * MiB, 0), DEVICE_OK);
	cr_assert_eq(device_take_cost(d, &ns, &sync), 1);
	cr_assert_eq(ns, (uint64_t)(m.map_ns + 4 * m.map_page_ns));
	cr_assert_eq(sync, 0);
	cr_assert_eq(device_map(d, 1ull << 41, 20 * MiB, 20 * MiB, 0), DEVICE_OK);
	cr_assert_eq(device_take_cost(d, &ns, &sync), 1);
	cr_assert_eq(ns, (uint64_t)(m.map_ns + m.map_page_ns));
	cr_assert_lt(ns, 60000, "one page costs about one 2 MiB cudaMalloc");

	device_unmap(d, 1ull << 40, 8 * MiB, 2 * MiB);
	cr_assert_eq(device_take_cost(d, &ns, &sync), 1);
	cr_assert_eq(ns, (uint64_t)(m.unmap_ns + 4 * m.unmap_page_ns + 8 * m.unmap_ns_per_mib));
	cr_assert_eq(sync, 1, "ExpandableSegment::unmapHandles synchronises its stream");

	/* the pool: growth and trim by bytes, no wait */
	cr_assert_eq(device_map(d, 1ull << 42, 128 * MiB, 0, 0), DEVICE_OK);
	cr_assert_eq(device_take_cost(d, &ns, &sync), 1);
	cr_assert_eq(ns, (uint64_t)(m.pool_grow_ns + 128 * m.pool_grow_ns_per_mib));
	device_unmap(d, 1ull << 42, 128 * MiB, 0);
	cr_assert_eq(device_take_cost(d, &ns, &sync), 1);
	cr_assert_eq(ns, (uint64_t)(m.pool_trim_ns + 128 * m.pool_trim_ns_per_mib));
	cr_assert_eq(sync, 0);

	device_pool_call(d, 0);
	device_pool_call(d, 1);
	cr_assert_eq(device_take_cost(d, &ns, &sync), 2);
	cr_assert_eq(ns, (uint64_t)(m.pool_alloc_ns + m.pool_free_ns));
	cr_assert_gt(m.pool_alloc_ns, m.hit_ns, "a pool call costs more than a caching hit");

	/* without a cost model nothing is charged */
	device_set_cost(d, NULL);
	device_pool_call(d, 0);
	cr_assert_eq(device_take_cost(d, &ns, &sync), 0);
	device_destroy(d);
}

/* size_scale charges a device call as a call that many times larger, but
 * not for a size the engine named as fixed (the model's weights). */
Test(device, fixed_sizes_keep_their_cost_under_size_scale)
{
	struct cost_model m;
	struct sim_device *d = device_create(0, DEVICE_ADDR_SYNTHETIC);
	uint64_t a, b, scaled, own, ns;
	int sync;
	cr_assert_not_null(d);
	cost_defaults(&m);
	m.size_scale = 4.0;
	device_set_cost(d, &m);
	cr_assert_eq(device_malloc(d, 512 * 1024, 0, &a), DEVICE_OK);
	device_take_cost(d, &scaled, &sync);
	device_fix_size(d, 512 * 1024);
	cr_assert_eq(device_malloc(d, 512 * 1024, 0, &b), DEVICE_OK);
	device_take_cost(d, &own, &sync);
	/* 2 MiB (scaled) is a large call, 512 KiB a small one */
	cr_assert_eq(scaled, (uint64_t)cost_curve_ns(&m.malloc_c, 2 * MiB));
	cr_assert_eq(own, (uint64_t)cost_curve_ns(&m.malloc_c, 512 * 1024));
	cr_assert_lt(own, scaled);
	device_free(d, a, 512 * 1024);
	device_take_cost(d, &ns, &sync);
	cr_assert_eq(ns, (uint64_t)cost_curve_ns(&m.free_c, 512 * 1024), "a fixed size frees at its own cost too");
	device_destroy(d);
}
