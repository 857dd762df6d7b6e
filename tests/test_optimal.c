/*
 * test_optimal.c: the offline bound: floor, plan >= floor, plan == floor
 * where the answer is known, and the replay at planned offsets.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/policy.h"
#include "helpers.h"

extern const struct alloc_policy policy_optimal;
#define P policy_optimal
#define MIB (1ull << 20)

static int64_t stat_of(void *st, const char *name)
{
	return th_policy_stat(&P, st, name);
}

/* ops: +k allocates buffer k of sizes[k], -k frees it (k >= 1). */
static void *plan(struct sim_device *dev, const int *ops, int n, const uint64_t *sizes)
{
	struct policy_env env = {dev, 0, NULL};
	void *st = calloc(1, P.state_size);
	char err[256] = "";
	cr_assert_eq(P.init(st, "", &env, err, sizeof err), 0, "%s", err);
	for (int i = 0; i < n; i++) {
		struct trace_rec r;
		memset(&r, 0, sizeof r);
		int k = ops[i] > 0 ? ops[i] : -ops[i];
		r.type = ops[i] > 0 ? TREC_ALLOC : TREC_FREE;
		r.u.mem.id = (uint64_t)k;
		r.u.mem.addr = 0x1000ull * (uint64_t)k;
		r.u.mem.bytes = sizes[k];
		r.u.mem.kind = TMEM_DEVICE;
		cr_assert_eq(P.prepass(st, &r), 0);
	}
	cr_assert_eq(P.prepass_done(st, err, sizeof err), 0, "%s", err);
	return st;
}

Test(optimal, equals_floor_on_simple_cases)
{
	struct sim_device *dev = device_create(0, DEVICE_ADDR_SYNTHETIC);
	uint64_t sz[] = {0, 1 * MIB, 2 * MIB, 1 * MIB, 4 * MIB};
	int seq[] = {1, -1, 2, -2, 3, -3};            /* never two live */
	void *st = plan(dev, seq, 6, sz);
	cr_assert_eq(stat_of(st, "live_peak_bytes"), (int64_t)(2 * MIB));
	cr_assert_eq(stat_of(st, "plan_bytes"), (int64_t)(2 * MIB));
	P.fini(st);
	free(st);
	int over[] = {1, 2, -1, 3, -2, 4, -3, -4};   /* A B | C takes A's slot | D */
	st = plan(dev, over, 8, sz);
	cr_assert_eq(stat_of(st, "live_peak_bytes"), (int64_t)(5 * MIB));
	cr_assert_eq(stat_of(st, "plan_bytes"), (int64_t)(5 * MIB));
	cr_assert_eq(stat_of(st, "plan_overhead_ppm"), 1000000);
	P.fini(st);
	free(st);
	device_destroy(dev);
}

Test(optimal, plan_never_below_floor_and_replay_uses_it)
{
	enum { N = 3000 };
	static int ops[2 * N];
	static uint64_t sz[N + 1];
	uint64_t s = 7;
	int live[64], nl = 0, n = 0, next = 1;
	while (next <= N || nl) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		if (next <= N && (nl == 0 || (nl < 64 && (s >> 33) % 2))) {
			sz[next] = 256 * (1 + (s >> 40) % 4096);
			live[nl++] = next;
			ops[n++] = next++;
		} else {
			int v = (int)((s >> 20) % (uint64_t)nl);
			ops[n++] = -live[v];
			live[v] = live[--nl];
		}
	}
	struct sim_device *dev = device_create(0, DEVICE_ADDR_SYNTHETIC);
	void *st = plan(dev, ops, n, sz);
	int64_t floor = stat_of(st, "live_peak_bytes"), pb = stat_of(st, "plan_bytes");
	cr_assert_gt(floor, 0);
	cr_assert_geq(pb, floor);
	cr_assert_leq(pb, stat_of(st, "plan_bestfit_bytes"));
	/* replay in trace order: one device allocation, no misses */
	uint64_t addr[N + 1];
	for (int i = 0; i < n; i++) {
		int k = ops[i] > 0 ? ops[i] : -ops[i];
		if (ops[i] > 0) {
			struct alloc_request rq = {(uint64_t)k, sz[k], 0, 0};
			struct alloc_result rs;
			cr_assert_eq(P.alloc(st, &rq, &rs), POLICY_OK);
			addr[k] = rs.addr;
		} else {
			P.free(st, addr[k], sz[k], 0);
		}
	}
	struct device_counters c;
	device_get_counters(dev, &c);
	cr_assert_eq(c.mallocs, 1);
	cr_assert_eq(c.peak_reserved, (uint64_t)pb);
	cr_assert_eq(stat_of(st, "plan_misses"), 0);
	P.fini(st);
	free(st);
	device_destroy(dev);
}
