/*
 * test_conformance.c: the contract every registered allocator policy keeps.
 *
 * Each test walks policy_table, so a policy added later is tested without
 * new test code. Policies are driven directly (no engine): random request
 * streams (several seeds; sizes 1 B .. 300 MiB, log-uniform; four streams;
 * interleaved frees, syncs and empty_cache) against a 64 GiB synthetic
 * device. Checked: live blocks never overlap, addresses are 256 B aligned
 * (cuda_malloc excepted: it hands out what the driver gives, and its block
 * is the exact request), block_bytes >= request, the device's reserved bytes
 * cover the live blocks, the policy's own in-use figure matches a recount,
 * fini returns every device byte, unknown knobs are refused by name, and the
 * same input gives the same address sequence. Offline policies get the
 * stream through their pre-pass first.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/policy.h"

#define CAP (64ull << 30)
#define NOPS 4000
#define MAX_LIVE 64
#define MAX_LIVE_BYTES (8ull << 30)

enum op_kind { OP_ALLOC, OP_FREE, OP_SYNC, OP_EMPTY };

struct op { enum op_kind kind; uint64_t id, bytes; uint32_t stream; uint32_t victim; };

struct blk { uint64_t id, addr, block, bytes; uint32_t stream; int ok; };

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	uint64_t z = *s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Log-uniform in [1, 300 MiB]: most requests small, some huge. */
static uint64_t rand_size(uint64_t *s)
{
	double u = (double)(rng_next(s) >> 11) / 9007199254740992.0;
	double max = 300.0 * 1048576.0;
	uint64_t v = (uint64_t)__builtin_exp(u * __builtin_log(max));
	return v ? v : 1;
}

/* A request stream that is the same for every policy. Free ops name the
 * position (among live allocs) of their victim at generation time. */
static size_t gen_ops(uint64_t seed, struct op *ops)
{
	uint64_t s = seed, live_bytes = 0, next_id = 0;
	uint64_t live_ids[MAX_LIVE], live_sz[MAX_LIVE];
	size_t nlive = 0, n = 0;
	while (n < NOPS) {
		uint64_t r = rng_next(&s) % 100;
		struct op *o = &ops[n];
		memset(o, 0, sizeof *o);
		if (r < 2) {
			o->kind = OP_SYNC;
		} else if (r < 3) {
			o->kind = OP_EMPTY;
		} else if (nlive && (r < 45 || nlive == MAX_LIVE)) {
			uint32_t v = (uint32_t)(rng_next(&s) % nlive);
			o->kind = OP_FREE;
			o->id = live_ids[v];
			o->stream = (uint32_t)(rng_next(&s) % 4);
			live_bytes -= live_sz[v];
			live_ids[v] = live_ids[nlive - 1];
			live_sz[v] = live_sz[nlive - 1];
			nlive--;
		} else {
			uint64_t b = rand_size(&s);
			if (live_bytes + b > MAX_LIVE_BYTES)
				continue;
			o->kind = OP_ALLOC;
			o->id = next_id++;
			o->bytes = b;
			o->stream = (uint32_t)(rng_next(&s) % 4);
			live_ids[nlive] = o->id;
			live_sz[nlive++] = b;
			live_bytes += b;
		}
		n++;
	}
	/* free what is left, so every run ends empty */
	while (nlive) {
		struct op *o = &ops[n++];
		memset(o, 0, sizeof *o);
		o->kind = OP_FREE;
		o->id = live_ids[--nlive];
	}
	return n;
}

static uint64_t trace_addr(uint64_t id) { return 0x100000000ull + id * 0x40000000ull; }

/* The ops as trace records, for offline policies' pre-pass. */
static void feed_prepass(const struct alloc_policy *p, void *st, const struct op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct trace_rec rec;
		memset(&rec, 0, sizeof rec);
		rec.start = rec.end = i;
		rec.line = i + 1;
		if (ops[i].kind == OP_ALLOC) {
			rec.type = TREC_ALLOC;
			rec.u.mem.id = ops[i].id;
			rec.u.mem.bytes = ops[i].bytes;
		} else if (ops[i].kind == OP_FREE) {
			rec.type = TREC_FREE;
		} else {
			continue;
		}
		rec.u.mem.addr = trace_addr(ops[i].id);
		rec.u.mem.stream = ops[i].stream;
		rec.u.mem.kind = TMEM_DEVICE;
		cr_assert_geq(p->prepass(st, &rec), 0, "%s: prepass rejected record %zu", p->name, i);
	}
	char err[256] = "";
	cr_assert_eq(p->prepass_done(st, err, sizeof err), 0, "%s: prepass_done: %s", p->name, err);
}

struct in_use_probe { const char *names[4]; int64_t value; int found; };

static void probe_stat(void *ctx, const char *name, int64_t value)
{
	struct in_use_probe *pr = ctx;
	for (int i = 0; i < 4 && pr->names[i]; i++)
		if (!strcmp(name, pr->names[i])) {
			pr->value = value;
			pr->found = 1;
		}
}

static void need_stat(void *ctx, const char *name, int64_t value)
{
	int *seen = ctx;
	(void)value;
	if (!strcmp(name, "largest_free_block"))
		seen[0] = 1;
	if (!strcmp(name, "cached_free_bytes"))
		seen[1] = 1;
}

/*
 * Run OPS through policy P; check the contract on the way. Writes the
 * address of every alloc (0 for an OOM) into ADDRS.
 */
static void run_policy(const struct alloc_policy *p, const struct op *ops, size_t n,
		       uint64_t *addrs)
{
	struct sim_device *dev = device_create(CAP, DEVICE_ADDR_SYNTHETIC);
	void *st = calloc(1, p->state_size ? p->state_size : 1);
	struct blk *blk = calloc(n, sizeof *blk);   /* by alloc id */
	struct policy_env env = {dev, CAP, NULL};
	char err[256] = "";
	uint64_t live_block = 0, ooms = 0;
	int aligned = strcmp(p->name, "cuda_malloc") != 0;
	cr_assert(dev && st && blk);
	cr_assert_eq(p->init(st, "", &env, err, sizeof err), 0, "%s: init: %s", p->name, err);
	if (p->prepass)
		feed_prepass(p, st, ops, n);

	size_t na = 0;
	for (size_t i = 0; i < n; i++) {
		const struct op *o = &ops[i];
		if (o->kind == OP_SYNC || o->kind == OP_EMPTY) {
			if (p->control)
				p->control(st, o->kind == OP_SYNC ? POLICY_CTL_SYNC : POLICY_CTL_EMPTY_CACHE, 0);
		} else if (o->kind == OP_ALLOC) {
			struct alloc_request rq = {o->id, o->bytes, o->stream, i};
			struct alloc_result rs = {0, 0};
			struct blk *b = &blk[o->id];
			int rc = p->alloc(st, &rq, &rs);
			cr_assert(rc == POLICY_OK || rc == POLICY_OOM, "%s: alloc returned %d", p->name, rc);
			addrs[na++] = rc == POLICY_OK ? rs.addr : 0;
			if (rc != POLICY_OK) {
				ooms++;
				continue;
			}
			cr_assert_geq(rs.block_bytes, o->bytes, "%s: block %llu < request %llu", p->name,
				      (unsigned long long)rs.block_bytes, (unsigned long long)o->bytes);
			if (aligned)
				cr_assert_eq(rs.addr % 256, 0, "%s: address 0x%llx not 256 B aligned",
					     p->name, (unsigned long long)rs.addr);
			/* no overlap with any live block */
			for (uint64_t j = 0; j < o->id; j++) {
				const struct blk *q = &blk[j];
				if (!q->ok)
					continue;
				cr_assert(rs.addr + rs.block_bytes <= q->addr || q->addr + q->block <= rs.addr,
					  "%s: block [0x%llx,+%llu) overlaps live [0x%llx,+%llu)", p->name,
					  (unsigned long long)rs.addr, (unsigned long long)rs.block_bytes,
					  (unsigned long long)q->addr, (unsigned long long)q->block);
			}
			*b = (struct blk){o->id, rs.addr, rs.block_bytes, o->bytes, o->stream, 1};
			live_block += rs.block_bytes;
		} else {
			struct blk *b = &blk[o->id];
			if (!b->ok)
				continue;    /* its alloc OOMed */
			p->free(st, b->addr, b->block, o->stream);
			b->ok = 0;
			live_block -= b->block;
		}
		cr_assert_geq(device_reserved(dev), live_block,
			      "%s: reserved %llu < live blocks %llu at op %zu", p->name,
			      (unsigned long long)device_reserved(dev), (unsigned long long)live_block, i);
		if (p->stats && i % 97 == 0) {
			struct in_use_probe pr = {{"bytes_in_use", "allocated_bytes", "used_mem_current", NULL}, 0, 0};
			p->stats(st, probe_stat, &pr);
			if (pr.found)
				cr_assert_eq((uint64_t)pr.value, live_block,
					     "%s: its in-use figure %lld != recount %llu", p->name,
					     (long long)pr.value, (unsigned long long)live_block);
		}
	}
	cr_assert_eq(live_block, 0);
	cr_assert_eq(ooms, 0, "%s: %llu OOMs on a 64 GiB device with <= 8 GiB live", p->name,
		     (unsigned long long)ooms);
	if (p->stats) {
		int seen[2] = {0, 0};
		p->stats(st, need_stat, seen);
		cr_assert(seen[0] && seen[1], "%s: stats lack largest_free_block/cached_free_bytes",
			  p->name);
		struct in_use_probe pr = {{"bytes_in_use", "allocated_bytes", "used_mem_current", NULL}, 0, 0};
		p->stats(st, probe_stat, &pr);
		if (pr.found)
			cr_assert_eq(pr.value, 0, "%s: in use %lld after freeing everything", p->name,
				     (long long)pr.value);
	}
	p->fini(st);
	cr_assert_eq(device_reserved(dev), 0, "%s: %llu bytes still reserved after fini", p->name,
		     (unsigned long long)device_reserved(dev));
	free(blk);
	free(st);
	device_destroy(dev);
}

Test(conformance, random_streams_every_policy)
{
	static struct op ops[NOPS + MAX_LIVE];
	static uint64_t a1[NOPS + MAX_LIVE], a2[NOPS + MAX_LIVE];
	const uint64_t seeds[] = {1, 42, 20240601, 0xdeadbeef};
	int npol = 0;
	for (const struct alloc_policy *const *pp = policy_table; *pp; pp++, npol++) {
		for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
			size_t n = gen_ops(seeds[k], ops);
			memset(a1, 0, sizeof a1);
			memset(a2, 0, sizeof a2);
			run_policy(*pp, ops, n, a1);
			run_policy(*pp, ops, n, a2);
			cr_assert_eq(memcmp(a1, a2, sizeof a1), 0,
				     "%s: seed %llu: two runs gave different addresses", (*pp)->name,
				     (unsigned long long)seeds[k]);
		}
	}
	cr_assert_geq(npol, 1);
}

Test(conformance, unknown_knob_is_refused_by_name)
{
	for (const struct alloc_policy *const *pp = policy_table; *pp; pp++) {
		const struct alloc_policy *p = *pp;
		struct sim_device *dev = device_create(CAP, DEVICE_ADDR_SYNTHETIC);
		void *st = calloc(1, p->state_size ? p->state_size : 1);
		struct policy_env env = {dev, CAP, NULL};
		char err[512] = "";
		cr_assert_eq(p->init(st, "no_such_knob_xyz:1", &env, err, sizeof err), -1,
			     "%s accepted an unknown knob", p->name);
		cr_assert(strstr(err, "no_such_knob_xyz"), "%s: message '%s' does not name the knob",
			  p->name, err);
		free(st);
		device_destroy(dev);
	}
}

Test(conformance, table_is_well_formed)
{
	for (const struct alloc_policy *const *pp = policy_table; *pp; pp++) {
		const struct alloc_policy *p = *pp;
		cr_assert_eq(p->iversion, POLICY_IFACE_VERSION, "%s", p->name);
		cr_assert(p->name && p->description && p->knobs && p->init && p->alloc && p->free &&
			  p->fini, "%s lacks a required member", p->name);
		cr_assert_eq(policy_find(p->name), p, "%s not found by name", p->name);
		cr_assert(!p->prepass == !p->prepass_done, "%s: prepass without prepass_done", p->name);
	}
}
