/*
 * run_steps.c: `run --steps`: every step of the replay side by side, the
 * percentiles over them and the worst step (users' question 10: a run whose
 * shapes vary, e.g. multi-scale training or variable sequence lengths). The
 * figures come from the engine (sim_result.step_mem, step_ns); the
 * percentiles and the worst step from sim/steps.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "../sim/steps.h"

static const char *const pct_name[SIM_NPCT] = {"p50", "p90", "p99", "max"};

static void pct_row(const char *what, const uint64_t v[SIM_NPCT], int ms)
{
	char b[32];
	printf("  %-16s", what);
	for (int k = 0; k < SIM_NPCT; k++) {
		if (ms)
			printf(" %12.3f ms", v[k] / 1e6);
		else
			printf(" %15s", size_fmt(v[k], b, sizeof b));
	}
	putchar('\n');
}

int run_steps_text(const struct sim_result *r, size_t skip)
{
	struct sim_steps_summary s;
	char b1[32], b2[32], b3[32];
	if (sim_steps_summarise(r, skip, &s) < 0) {
		printf("\nsteps            none%s\n", r->nsteps ? " after --steps-skip"
							     : " (no \"step N\" NVTX ranges or 'x step' "
							       "records)");
		return 0;
	}
	printf("\n%-12s %10s %12s %15s %15s %15s %9s  %s\n", "step", "start (ms)",
	       r->timed ? "time (ms)" : "replayed (ms)", "peak allocated", "peak reserved",
	       "reserved change", "dev a/f", "peak allocated at");
	size_t late = 0;
	for (size_t i = 0; i < r->nsteps; i++) {
		const struct sim_step_mem *m = &r->step_mem[i];
		char calls[32];
		snprintf(calls, sizeof calls, "%" PRIu64 "/%" PRIu64, m->device_allocs, m->device_frees);
		printf("%-12s %10.3f %12.3f %15s %15s %15s %9s  %s%s%s\n", m->name, m->t / 1e6,
		       r->step_ns[i] / 1e6, size_fmt(m->peak_allocated, b1, sizeof b1),
		       size_fmt(m->peak_reserved, b2, sizeof b2),
		       cli_size_change(m->reserved_end, m->reserved_start, b3, sizeof b3), calls,
		       m->at[0] ? m->at : "(no range)", i < skip ? "  (skipped)" : "",
		       m->late ? "  (late: see below)" : "");
		late += m->late;
	}
	if (late)
		printf("late: the step's NVTX range was recorded late (a nested range began before it\n"
		       "      with none open: a capture clamps a range that outlasts its reorder hold,\n"
		       "      capture/README.md); its memory is counted from that nested range on, its\n"
		       "      time is still its range's\n");
	if (skip)
		printf("\npercentiles over %zu step(s), the first %zu left out\n  %-16s", s.n, skip, "");
	else
		printf("\npercentiles over %zu step(s)\n  %-16s", s.n, "");
	for (int k = 0; k < SIM_NPCT; k++)
		printf(" %15s", pct_name[k]);
	putchar('\n');
	pct_row("peak allocated", s.allocated, 0);
	pct_row("peak reserved", s.reserved, 0);
	pct_row(r->timed ? "step time" : "replayed time", s.time_ns, 1);
	const struct sim_step_mem *w = &r->step_mem[s.worst];
	double x = s.allocated[SIM_P50] ? (double)w->peak_allocated / (double)s.allocated[SIM_P50] : 0;
	printf("\nworst step       %s: peak allocated %s (%.2fx the median step's) at %s; "
	       "reserved %s, %s in the step (%" PRIu64 " device allocations)\n", w->name,
	       size_fmt(w->peak_allocated, b1, sizeof b1), x, w->at[0] ? w->at : "(no range)",
	       size_fmt(w->peak_reserved, b2, sizeof b2),
	       cli_size_change(w->reserved_end, w->reserved_start, b3, sizeof b3), w->device_allocs);
	printf("slowest step     %s: %.3f ms (%s)\n", r->step_mem[s.slowest].name,
	       r->step_ns[s.slowest] / 1e6, r->timed ? "predicted" : "the replay of recorded times");
	return 0;
}

static void pct_obj(struct json *j, const char *key, const uint64_t v[SIM_NPCT])
{
	json_key(j, key);
	json_begin_object(j);
	for (int k = 0; k < SIM_NPCT; k++)
		json_kv_u64(j, pct_name[k], v[k]);
	json_end_object(j);
}

void run_steps_json(struct json *j, const struct sim_result *r, size_t skip)
{
	struct sim_steps_summary s;
	int have = sim_steps_summarise(r, skip, &s) == 0;
	json_key(j, "steps");
	json_begin_object(j);
	json_kv_u64(j, "skip", skip);
	json_key(j, "each");
	json_begin_array(j);
	for (size_t i = 0; have && i < r->nsteps; i++) {
		const struct sim_step_mem *m = &r->step_mem[i];
		json_begin_object(j);
		json_kv_string(j, "name", m->name);
		json_kv_u64(j, "start_ns", m->t);
		json_kv_u64(j, "time_ns", r->step_ns[i]);
		json_kv_u64(j, "peak_allocated", m->peak_allocated);
		json_kv_u64(j, "peak_requested", m->peak_requested);
		json_kv_u64(j, "peak_reserved", m->peak_reserved);
		json_kv_u64(j, "reserved_start", m->reserved_start);
		json_kv_u64(j, "reserved_end", m->reserved_end);
		json_kv_u64(j, "device_allocs", m->device_allocs);
		json_kv_u64(j, "device_frees", m->device_frees);
		json_kv_string(j, "peak_at", m->at);
		json_kv_bool(j, "late", m->late);
		json_end_object(j);
	}
	json_end_array(j);
	if (have) {
		json_kv_u64(j, "summarised", s.n);
		pct_obj(j, "peak_allocated", s.allocated);
		pct_obj(j, "peak_reserved", s.reserved);
		pct_obj(j, "time_ns", s.time_ns);
		json_kv_string(j, "worst", r->step_mem[s.worst].name);
		json_kv_string(j, "slowest", r->step_mem[s.slowest].name);
	} else {
		json_key(j, "worst");
		json_null(j);
	}
	json_end_object(j);
}
