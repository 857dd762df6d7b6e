/*
 * test_va_place.c: the driver's virtual-address placement model
 * (device/va_place.c): chunks of 32 MiB taken top-down, the newest chunk
 * with room first, released chunks reused only when strictly larger, the
 * context's own chunks, best fit inside a chunk, and the probe's recorded
 * sequences (traces/va_probe/va_probe.tsv, replay.tsv.gz) replayed call for
 * call.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../device/va_place.h"
#include "../device/device.h"
#include "helpers.h"

#define MiB (1ull << 20)
#define TOP (1ull << 40)

Test(va_place, chunks_top_down_first_request_at_low_end)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t a = va_take(&v, 20 * MiB), b = va_take(&v, 26 * MiB), c = va_take(&v, 50 * MiB);
	cr_assert_eq(a, TOP - 32 * MiB); /* 20 MiB: a 32 MiB chunk */
	cr_assert_eq(b, a - 32 * MiB);
	cr_assert_eq(c, b - 64 * MiB);   /* 50 MiB: 64 */
	cr_assert_eq(va_chunks(&v), 3);
	va_fini(&v);
}

/* probe "interleave": a request that fits a chunk's rest goes to the newest
 * chunk with room, at the low end of that room. */
Test(va_place, newest_chunk_with_room)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t x[4];
	for (int i = 0; i < 4; i++)
		x[i] = va_take(&v, 20 * MiB); /* each leaves 12 MiB */
	cr_assert_eq(va_take(&v, 10 * MiB), x[3] + 20 * MiB);
	cr_assert_eq(va_take(&v, 12 * MiB), x[2] + 20 * MiB);
	cr_assert_eq(va_chunks(&v), 4);
	va_fini(&v);
}

/* replay of a real run's segments (regnet_y_400mf-b16's #85): inside the
 * chunk, the smallest free range that holds the request, not the lowest. */
Test(va_place, best_fit_inside_a_chunk)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t a = va_take(&v, 20 * MiB), b = va_take(&v, 2 * MiB); /* 10 MiB left above b */
	cr_assert_eq(b, a + 20 * MiB);
	cr_assert_eq(va_give(&v, a, 20 * MiB), 0);  /* 20 MiB free below b, 10 above */
	cr_assert_eq(va_take(&v, 2 * MiB), b + 2 * MiB);  /* the 10 MiB range */
	cr_assert_eq(va_take(&v, 14 * MiB), a);           /* only the 20 MiB holds it */
	cr_assert_eq(va_take(&v, 6 * MiB), a + 14 * MiB); /* 6 exactly, below the 8 above */
	va_fini(&v);
}

/* The same past RNG_MAX free ranges in one chunk (its ranges in a treap):
 * a 600 MiB first allocation freed under live 2 MiB ones, then 300 x 2 MiB
 * from its low end and every other one freed: 150 holes of 2 MiB. */
Test(va_place, best_fit_among_many_ranges)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t big = va_take(&v, 600 * MiB), x[300];
	for (int i = 0; i < 4; i++)
		va_take(&v, 2 * MiB);             /* the chunk's 8 MiB rest: keeps it */
	cr_assert_eq(va_give(&v, big, 600 * MiB), 0);
	for (int i = 0; i < 300; i++) {
		x[i] = va_take(&v, 2 * MiB);
		cr_assert_eq(x[i], big + 2 * MiB * (uint64_t)i);
	}
	for (int i = 0; i < 300; i += 2)
		cr_assert_eq(va_give(&v, x[i], 2 * MiB), 0);
	/* a 6 MiB hole low, a 4 MiB hole high: 4 MiB goes high */
	cr_assert_eq(va_give(&v, x[11], 2 * MiB), 0);
	cr_assert_eq(va_give(&v, x[13], 2 * MiB), 0);  /* x[10..14]: 10 MiB */
	cr_assert_eq(va_give(&v, x[201], 2 * MiB), 0); /* x[200..202]: 6 MiB */
	cr_assert_eq(va_give(&v, x[251], 2 * MiB), 0); /* x[250..252]: 6 MiB */
	cr_assert_eq(va_take(&v, 6 * MiB), x[200]);   /* the lowest of the exact fits */
	cr_assert_eq(va_take(&v, 4 * MiB), x[250]);   /* 6 beats 10 and the tail */
	cr_assert_eq(va_take(&v, 2 * MiB), x[0]);     /* exact, lowest */
	cr_assert_eq(va_take(&v, 8 * MiB), x[10]);    /* only 10 holds it below the tail */
	va_fini(&v);
}

/* probe "reuse": an empty chunk is released; a released range is reused for
 * a new chunk only when strictly larger, at its high end. */
Test(va_place, released_ranges_strictly_larger_high_end)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t a = va_take(&v, 64 * MiB), b = va_take(&v, 64 * MiB);
	cr_assert_eq(va_give(&v, a, 64 * MiB), 0);
	cr_assert_eq(va_free_ranges(&v), 1);
	uint64_t c = va_take(&v, 32 * MiB), d = va_take(&v, 32 * MiB);
	cr_assert_eq(c, a + 32 * MiB); /* high end of the 64 MiB */
	cr_assert_eq(d, b - 32 * MiB); /* 32 MiB left: not strictly larger */
	cr_assert_eq(va_give(&v, b, 64 * MiB), 0); /* joins a's low half */
	cr_assert_eq(va_free_ranges(&v), 1);
	cr_assert_eq(va_take(&v, 48 * MiB), a - 32 * MiB); /* a 64 MiB chunk at the high end */
	cr_assert_eq(va_give(&v, 0x1234, 2 * MiB), -1);   /* not a range handed out */
	va_fini(&v);
}

/* probe "bottom": a chunk released at the bottom goes back to fresh space. */
Test(va_place, bottom_chunk_returns_to_fresh_space)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	uint64_t a = va_take(&v, 20 * MiB), b = va_take(&v, 20 * MiB);
	cr_assert_eq(va_give(&v, b, 20 * MiB), 0);
	cr_assert_eq(va_free_ranges(&v), 0);
	cr_assert_eq(va_take(&v, 30 * MiB), a - 32 * MiB);
	va_fini(&v);
}

Test(va_place, context_chunks_and_release)
{
	struct va_space v;
	va_init(&v, 0, TOP);
	cr_assert_eq(va_add_context(&v), 0);
	uint64_t s = va_take(&v, 2 * MiB);      /* the context's 2 MiB, newest */
	uint64_t i = va_take(&v, 2 * MiB);      /* its 24 MiB range */
	uint64_t i2 = va_take(&v, 20 * MiB);
	uint64_t f = va_take(&v, 20 * MiB);     /* the first fresh chunk */
	cr_assert_eq(s, i - 74 * MiB);
	cr_assert_eq(i2, i + 2 * MiB);
	cr_assert_eq(f, i - 520 * MiB);
	cr_assert_eq(va_context_release(&v), 0);
	/* the libraries load: the next allocation still goes to fresh space,
	 * below their VA_LIBRARY_SKIP, though the 414 MiB would hold it */
	uint64_t g = va_take(&v, 26 * MiB);
	cr_assert_eq(g, f - VA_LIBRARY_SKIP - 32 * MiB);
	cr_assert_eq(va_context_release(&v), 0);            /* once */
	/* then their own page sits in that chunk (at g + 26 MiB) and keeps
	 * it: freed, the allocation's place is taken again from its low end */
	cr_assert_eq(va_give(&v, g, 26 * MiB), 0);
	cr_assert_eq(va_take(&v, 20 * MiB), g);
	/* and the 414 MiB are free, used from their low end by what fits no
	 * newer chunk */
	cr_assert_eq(va_take(&v, 14 * MiB), f + 32 * MiB);
	cr_assert_eq(va_take(&v, 400 * MiB), f + 46 * MiB);
	cr_assert_eq(va_take(&v, 6 * MiB), g + 20 * MiB);   /* the newest chunk's rest first */
	cr_assert_eq(va_take(&v, 500 * MiB), g - 512 * MiB);
	va_fini(&v);
}

Test(va_place, reserve_grows_up_and_shares_chunks)
{
	struct va_space v;
	va_init(&v, 1ull << 30, TOP);
	uint64_t a = va_reserve(&v, 20 * MiB), b = va_reserve(&v, 64 * MiB);
	cr_assert_eq(a, 1ull << 30);
	cr_assert_eq(b, a + 32 * MiB);
	cr_assert_eq(va_take(&v, 10 * MiB), a + 20 * MiB); /* the reservation's rest */
	va_fini(&v);
}

Test(va_place, past_the_bottom_still_answers)
{
	struct va_space v;
	va_init(&v, TOP - 64 * MiB, TOP);
	uint64_t a = va_take(&v, 64 * MiB), b = va_take(&v, 32 * MiB), c = va_take(&v, 32 * MiB);
	cr_assert_eq(a, TOP - 64 * MiB);
	cr_assert_eq(b, TOP);
	cr_assert_eq(c, TOP + 32 * MiB);
	va_fini(&v);
}

/* A long random mix: ranges never overlap, and two runs agree address for
 * address (also across the renumbering of chunk ids). */
Test(va_place, no_overlap_and_deterministic)
{
	enum { N = 256, STEPS = 20000 };
	static uint64_t addr[N], size[N], got[2][STEPS];
	for (int run = 0; run < 2; run++) {
		struct va_space v;
		uint64_t x = 42;
		va_init(&v, 0, TOP);
		cr_assert_eq(va_add_context(&v), 0);
		for (int i = 0; i < N; i++)
			addr[i] = size[i] = 0;
		for (int s = 0; s < STEPS; s++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			int k = (int)((x >> 33) % N);
			if (s == STEPS / 2)
				cr_assert_eq(va_context_release(&v), 0);
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
		cr_assert_eq(v.oom, 0);
		va_fini(&v);
	}
	cr_assert_eq(memcmp(got[0], got[1], sizeof got[0]), 0);
}

/* Replay the sequences of PATH (a va_probe TSV, plain or gzip; each
 * sequence a fresh context: its own model) whose name is SEQ (NULL: every
 * one), every 2 MiB-multiple call through the model, each malloc compared
 * with where the driver put it relative to the sequence's first address.
 * *TOTAL mallocs, *SEQS sequences, *EXACT of them with every malloc placed
 * as measured; returns the mallocs placed as measured, -1 without PATH. */
static int replay_tsv(const char *path, const char *seq, int *total, int *seqs, int *exact)
{
	gzFile f = gzopen(path, "r");
	char line[512], s[256], op[64], cur[256] = "";
	unsigned long long size, addr;
	int step, ok = 0, seq_ok = 0, seq_n = 0;
	struct va_space v;
	enum { MAXLIVE = 4096 };
	static unsigned long long real[MAXLIVE], sim[MAXLIVE], sz[MAXLIVE];
	int nlive = 0, open = 0;
	unsigned long long rfirst = 0, sfirst = 0;
	*total = *seqs = *exact = 0;
	if (!f)
		return -1;
	for (;;) {
		int more = gzgets(f, line, sizeof line) != NULL;
		int n = more ? sscanf(line, "%255s %d %63s %llu %llx", s, &step, op, &size, &addr) : 0;
		if (!more || (n == 5 && strcmp(s, cur) && (!seq || !strcmp(s, seq)))) {
			if (open) {
				va_fini(&v);
				++*seqs;
				*exact += seq_ok == seq_n;
			}
			if (!more)
				break;
			snprintf(cur, sizeof cur, "%s", s);
			va_init(&v, 1ull << 32, 1ull << 46);
			cr_assert_eq(va_add_context(&v), 0);
			open = 1;
			nlive = seq_ok = seq_n = 0;
			rfirst = 0;
		}
		if (n != 5 || strcmp(s, cur) || (seq && strcmp(s, seq)))
			continue;
		if (!strcmp(op, "malloc")) {
			unsigned long long q = (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
			unsigned long long a = va_take(&v, q);
			if (!rfirst) {
				rfirst = addr;
				sfirst = a;
			}
			int same = addr - rfirst == a - sfirst;
			++*total;
			ok += same;
			seq_ok += same;
			seq_n++;
			cr_assert_lt(nlive, MAXLIVE);
			real[nlive] = addr;
			sim[nlive] = a;
			sz[nlive++] = q;
		} else if (!strcmp(op, "free")) {
			for (int i = 0; i < nlive; i++)
				if (real[i] == addr) {
					cr_assert_eq(va_give(&v, sim[i], sz[i]), 0);
					real[i] = real[--nlive];
					sim[i] = sim[nlive];
					sz[i] = sz[nlive];
					break;
				}
		}
	}
	gzclose(f);
	return ok;
}

Test(va_place, probe_sequences_replay_exactly)
{
	/* every malloc of these sequences (all 2 MiB multiples): the claim of
	 * docs/policies.md, "Synthetic addresses" */
	static const struct { const char *seq; int n; } want[] = {
		{"churn", 213}, {"interleave", 12}, {"bottom", 5}, {"reuse", 7}, {"smallbig", 207},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int total, seqs, exact;
		int ok = replay_tsv("traces/va_probe/va_probe.tsv", want[i].seq, &total, &seqs, &exact);
		if (ok < 0) {
			cr_skip_test("traces/va_probe/va_probe.tsv not found");
			return;
		}
		cr_assert_eq(total, want[i].n, "%s: %d mallocs", want[i].seq, total);
		cr_assert_eq(ok, want[i].n, "%s: %d of %d placed as measured", want[i].seq, ok, total);
	}
}

/* The segment calls of 61 recorded PyTorch runs (the 45 shared runs without
 * expandable segments and traces/torch/truth), replayed by the probe on an
 * H200 without PyTorch in the process (traces/va_probe/replay.tsv.gz,
 * scripts/va_replay.py): every placement as the driver made it. The
 * lowest-range rule inside a chunk placed 10,125 (37 runs). */
Test(va_place, real_runs_segment_calls_replay_exactly)
{
	int total, seqs, exact;
	int ok = replay_tsv("traces/va_probe/replay.tsv.gz", NULL, &total, &seqs, &exact);
	if (ok < 0) {
		cr_skip_test("traces/va_probe/replay.tsv.gz not found");
		return;
	}
	cr_assert_eq(seqs, 61);
	cr_assert_eq(total, 10965);
	cr_assert_eq(ok, total, "%d of %d placed as the driver did", ok, total);
	cr_assert_eq(exact, seqs);
}

/* Through the device: 2 MiB pages in the context's chunks first. */
Test(va_place, device_synthetic_pages)
{
	struct sim_device *d = device_create(0, DEVICE_ADDR_SYNTHETIC);
	uint64_t a, b, c;
	device_malloc(d, 1, 0, &a);
	device_malloc(d, 3 * MiB, 0, &b);
	device_malloc(d, 30 * MiB, 0, &c);
	cr_assert_eq(a % (2 * MiB), 0);
	cr_assert_eq(b, a + 74 * MiB);  /* the context's 24 MiB range */
	cr_assert_eq(c, b - 520 * MiB); /* a fresh chunk, 488 MiB below */
	device_destroy(d);
}

/* scripts/va_maps.py on a shipped watched run (traces/torch/truth/maps):
 * resnet18-b160's freed 1,768 MiB workspace chunk is still mapped when the
 * next 40 MiB segment comes (docs/policies.md, "The process's address
 * space"); cuDNN's ops library is mapped below the driver's 504 MiB block. */
Test(va_place, maps_script_reads_a_watched_run)
{
	const char *run = "traces/torch/truth/maps/watched/resnet18-b160-default.trace.gz";
	char cmd[1024], out[1 << 16];
	if (!th_have("python3"))
		cr_skip_test("no python3");
	snprintf(cmd, sizeof cmd, "python3 scripts/va_maps.py %s --at 46", run);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "before segment 46 (40 MiB at -6782)"), "%s", out);
	cr_assert(strstr(out, "-6782.0 ..    -4926.0    1856.0 MiB ---p"), "%s", out);
	cr_assert(strstr(out, "segments 39"), "%s", out);
	snprintf(cmd, sizeof cmd, "python3 scripts/va_maps.py %s --between 8 9", run);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "504.0 MiB ---p"), "%s", out);
	cr_assert(strstr(out, "libcudnn_ops.so.9"), "%s", out);
	cr_assert_neq(th_capture("python3 scripts/va_maps.py no-such-run.trace.gz --at 1", out,
				 sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "no-such-run.trace.gz"), "%s", out);

	/* the same run as a probe replay with its host mappings in between */
	char rep[256];
	th_tmpname(rep, sizeof rep, "host.replay");
	snprintf(cmd, sizeof cmd, "python3 scripts/va_host_events.py %s %s", run, rep);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "122 segment allocations"), "%s", out);
	snprintf(cmd, sizeof cmd, "grep -c '^m ' %s; grep -c '^h ' %s", rep, rep);
	cr_assert_eq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	unsigned nm = 0, nh = 0;
	cr_assert_eq(sscanf(out, "%u %u", &nm, &nh), 2, "%s", out);
	cr_assert_eq(nm, 122);
	cr_assert_gt(nh, 0);
	remove(rep);
	snprintf(cmd, sizeof cmd, "python3 scripts/va_host_events.py no-such-run.trace.gz %s", rep);
	cr_assert_neq(th_capture(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "va_host_events: no-such-run.trace.gz"), "%s", out);
	snprintf(cmd, sizeof cmd, "test -e %s", rep);
	cr_assert_neq(th_capture(cmd, out, sizeof out), 0, "%s: written for a run it could not read",
		      rep);
}
