/*
 * decisions.h: the log of a policy's growth and release decisions during
 * one replay (policy.h, alloc_policy.decisions). Set sim_options.decisions
 * to a log and the engine hands the policy sim_decisions_sink with it,
 * stamping each decision with the trace line being replayed. Nothing else
 * in the replay changes. `explain batch` reads the log to name the
 * mechanism behind a peak (whatif/explain_mech.c).
 */
#ifndef SIM_DECISIONS_H
#define SIM_DECISIONS_H

#include <stddef.h>
#include <stdint.h>

#include "../policies/policy.h"

struct sim_decision {
	struct policy_decision d;   /* as reported (what/why: static strings) */
	uint64_t line;              /* the trace record replayed then (0: before the first) */
};

struct sim_decisions {
	struct sim_decision *v;
	size_t n, cap;
	uint64_t line;              /* the record being replayed (the engine sets it) */
	int short_log;              /* out of memory while logging: decisions were lost */
};

void sim_decisions_init(struct sim_decisions *l);
/* Empty the log for another replay (keeps its memory). */
void sim_decisions_reset(struct sim_decisions *l);
void sim_decisions_free(struct sim_decisions *l);

/* The policy_decision_fn the engine installs; CTX is the log. */
void sim_decisions_sink(void *ctx, const struct policy_decision *d);

/* A device range the policy held, and the decision that took it. */
struct sim_holding {
	uint64_t addr, bytes;
	size_t dec;                 /* index in the log of the GROW that took it */
};

/*
 * The ranges held after the first N decisions of L: every GROW adds its
 * range, every RELEASE takes its range away (splitting what it cuts), in
 * the order of the decisions that took them (then by address). 0 with
 * *OUT (malloc'd, may be NULL when none) and *NOUT, or -1 (out of memory).
 */
int sim_decisions_holdings(const struct sim_decisions *l, size_t n, struct sim_holding **out,
			   size_t *nout);

#endif /* SIM_DECISIONS_H */
