/*
 * test_va_place.c: the driver's virtual-address placement model
 * (device/va_place.c): fresh ranges top-down, reuse of the highest freed
 * range that fits from its low end, coalescing, a range freed at the bottom
 * going back to fresh space, and the same answers on every run.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "../device/va_place.h"
#include "../device/device.h"

#define MiB (1ull << 20)
#define TOP (1ull << 40)

Test(va_place, fresh_ranges_go_down)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t a = va_take(&v, 20 * MiB), b = va_take(&v, 2 * MiB), c = va_take(&v, 64 * MiB);
	cr_assert_eq(a, TOP - 20 * MiB);
	cr_assert_eq(b, a - 2 * MiB);
	cr_assert_eq(c, b - 64 * MiB);
	va_fini(&v);
}

Test(va_place, reuse_highest_fit_low_end)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t x[6];
	for (int i = 0; i < 6; i++)
		x[i] = va_take(&v, 20 * MiB); /* x[0] highest */
	va_give(&v, x[1], 20 * MiB);
	va_give(&v, x[3], 20 * MiB);
	/* both fit: the higher one (x[1]), from its low end */
	cr_assert_eq(va_take(&v, 10 * MiB), x[1]);
	/* x[1]'s rest (10 MiB) is the highest that fits 10 MiB again */
	cr_assert_eq(va_take(&v, 10 * MiB), x[1] + 10 * MiB);
	/* 20 MiB fits only x[3] */
	cr_assert_eq(va_take(&v, 20 * MiB), x[3]);
	va_fini(&v);
}

Test(va_place, neighbours_coalesce)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t x[5];
	for (int i = 0; i < 5; i++)
		x[i] = va_take(&v, 20 * MiB);
	va_give(&v, x[1], 20 * MiB);
	va_give(&v, x[3], 20 * MiB);
	cr_assert_eq(va_free_ranges(&v), 2);
	va_give(&v, x[2], 20 * MiB); /* joins x[1] and x[3] */
	cr_assert_eq(va_free_ranges(&v), 1);
	cr_assert_eq(va_take(&v, 60 * MiB), x[3]);
	cr_assert_eq(va_free_ranges(&v), 0);
	va_fini(&v);
}

Test(va_place, bottom_range_returns_to_fresh_space)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t a = va_take(&v, 20 * MiB), b = va_take(&v, 20 * MiB);
	va_give(&v, b, 20 * MiB); /* the lowest: back to fresh space */
	cr_assert_eq(va_free_ranges(&v), 0);
	/* so a larger request goes just below a */
	cr_assert_eq(va_take(&v, 30 * MiB), a - 30 * MiB);
	va_fini(&v);
}

Test(va_place, past_the_bottom_still_answers)
{
	struct va_space v;
	va_init(&v, TOP - 64 * MiB, TOP);
	uint64_t a = va_take(&v, 64 * MiB), b = va_take(&v, 2 * MiB), c = va_take(&v, 2 * MiB);
	cr_assert_eq(a, TOP - 64 * MiB);
	cr_assert_eq(b, TOP);
	cr_assert_eq(c, TOP + 2 * MiB);
	va_fini(&v);
}

/* A long random mix: ranges never overlap, and two runs agree address for
 * address. */
Test(va_place, no_overlap_and_deterministic)
{
	enum { N = 256, STEPS = 20000 };
	static uint64_t addr[N], size[N], got[2][STEPS];
	for (int run = 0; run < 2; run++) {
		struct va_space v;
		uint64_t x = 42;
		va_init(&v, 0, TOP);
		for (int i = 0; i < N; i++)
			addr[i] = size[i] = 0;
		for (int s = 0; s < STEPS; s++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			int k = (int)((x >> 33) % N);
			if (size[k]) {
				cr_assert_eq(va_give(&v, addr[k], size[k]), 0);
				size[k] = 0;
				got[run][s] = 0;
				continue;
			}
			size[k] = (1 + (x >> 50) % 40) * 2 * MiB;
			uint64_t a = va_take(&v, size[k]);
			for (int j = 0; j < N; j++)
				if (j != k && size[j])
					cr_assert(a + size[k] <= addr[j] || addr[j] + size[j] <= a,
						  "overlap at step %d", s);
			addr[k] = got[run][s] = a;
		}
		va_fini(&v);
	}
	cr_assert_eq(memcmp(got[0], got[1], sizeof got[0]), 0);
}

/* Through the device: synthetic addresses are 2 MiB pages, top-down. */
Test(va_place, device_synthetic_pages)
{
	struct sim_device *d = device_create(0, DEVICE_ADDR_SYNTHETIC);
	uint64_t a, b;
	device_malloc(d, 1, 0, &a);
	device_malloc(d, 3 * MiB, 0, &b);
	cr_assert_eq(a % (2 * MiB), 0);
	cr_assert_eq(b, a - 4 * MiB);
	device_destroy(d);
}
