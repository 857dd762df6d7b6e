/*
 * explain_moment.c: the moment `explain batch` splits the peak at, and
 * the engine's live set at that moment (explain.h, explain_replay).
 *
 * The engine keeps what was live the first time reserved reached its
 * peak. That moment says little when reserved does not grow on demand:
 * optimal reserves its whole plan at the first request, so the first time
 * its reserved is at the peak almost nothing is live yet, and a split there
 * calls the whole arena unused. The moment wanted is the one that decided
 * the peak: of the moments where reserved is at its peak, the one with
 * the most allocated (the first such). For allocators that grow on demand
 * that is usually where the peak was first reached; when a later moment
 * on the plateau is busier (a later step, the optimizer's state), that one.
 *
 * The policy interface gives an observer no hook but the policy itself, so
 * the replay's policy is wrapped: the wrapper passes every call through,
 * counts the calls, and after each one reads allocated (from the blocks
 * served and returned) and reserved (the device). A first replay finds the
 * call after which the moment falls. When that is not where reserved first
 * reached its peak, a second replay holds one extra device byte from that
 * call to the next, so that the engine's peak is reached exactly there and
 * its classified live set (sim_options.peak_items) is taken there. The byte
 * is returned before the policy is called again, so the policy sees the
 * device as in the first replay (only later synthetic addresses move).
 *
 * With sim_options.decisions set (the policy's decision log, for naming the
 * mechanism: explain_mech.c), the wrapper passes the decisions hook on,
 * notes how many decisions were made up to the moment, and in the replay
 * that marks the moment (or one more replay, when the first moment was the
 * one) keeps the blocks live there, by address, to tell how full each
 * region or segment was. None of it changes the moment or the split.
 */
#include "explain.h"

#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include <stdlib.h>

#include "../base/u64map.h"
#include "../sim/decisions.h"
#include "../sim/engine.h"

/* What one wrapped replay shares with its wrapper. */
struct xm_ctx {
	const struct alloc_policy *inner;
	uint64_t mark_call;            /* hold the marker after this call; 0: never */
	uint64_t snap_call;            /* keep the live blocks after this call; 0: never */
	struct sim_decisions *log;     /* the decision log, or NULL */
	/* found */
	uint64_t calls;
	uint64_t best_res, best_alloc, best_call, first_call;
	size_t best_dec, first_dec;    /* decisions made up to those moments */
	int marked, mark_failed;
	struct explain_block *snap;    /* the live blocks after snap_call */
	size_t nsnap;
	int snapped;
};

/* The policy interface passes a policy no context but its state, which
 * the engine allocates; init takes the context from here (set around one
 * sim_run on this thread). */
static _Thread_local struct xm_ctx *xm_next;

struct xm_state {
	struct xm_ctx *c;
	struct sim_device *dev;
	uint64_t allocated;
	struct u64map live;            /* addr -> block bytes (only with snap_call) */
	uint64_t marker;               /* device address of the held byte */
	int holding;
	alignas(max_align_t) unsigned char inner[];
};

/* Give the marker back: before every call into the policy. */
static void xm_unmark(struct xm_state *w)
{
	if (w->holding) {
		device_free(w->dev, w->marker, 1);
		w->holding = 0;
	}
}

/* After every call into the policy (the engine takes its levels next). */
static void xm_level(struct xm_state *w)
{
	struct xm_ctx *c = w->c;
	uint64_t res = device_reserved(w->dev), n = ++c->calls;
	if (res > c->best_res || (res == c->best_res && w->allocated > c->best_alloc)) {
		if (res > c->best_res) {
			c->first_call = n;
			c->first_dec = c->log ? c->log->n : 0;
		}
		c->best_res = res;
		c->best_alloc = w->allocated;
		c->best_call = n;
		c->best_dec = c->log ? c->log->n : 0;
	}
	if (n == c->snap_call && !c->snapped) {
		c->snapped = 1;
		c->snap = w->live.count ? malloc(w->live.count * sizeof *c->snap) : NULL;
		for (size_t i = 0; c->snap && i < w->live.cap; i++)
			if (w->live.keys[i] != U64MAP_EMPTY)
				c->snap[c->nsnap++] = (struct explain_block){w->live.keys[i], w->live.vals[i]};
	}
	if (n == c->mark_call) {
		if (device_malloc(w->dev, 1, 0, &w->marker) == DEVICE_OK)
			w->holding = c->marked = 1;
		else
			c->mark_failed = 1;
	}
}

static int xm_init(void *st, const char *conf, const struct policy_env *env, char *err,
		   size_t errlen)
{
	struct xm_state *w = st;
	w->c = xm_next;
	w->dev = env->dev;
	u64map_init(&w->live);
	int rc = w->c->inner->init(w->inner, conf, env, err, errlen);
	if (rc < 0)
		u64map_free(&w->live);
	return rc;
}

static int xm_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct xm_state *w = st;
	xm_unmark(w);
	int rc = w->c->inner->alloc(w->inner, req, res);
	if (rc == POLICY_OK)
		w->allocated += res->block_bytes;
	if (rc == POLICY_OK && w->c->snap_call && u64map_put(&w->live, res->addr, res->block_bytes) < 0)
		w->c->snap_call = 0; /* out of memory: no snapshot */
	xm_level(w);
	return rc;
}

static void xm_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct xm_state *w = st;
	xm_unmark(w);
	w->allocated -= block_bytes;
	if (w->c->snap_call)
		u64map_del(&w->live, addr, NULL);
	w->c->inner->free(w->inner, addr, block_bytes, stream);
	xm_level(w);
}

static void xm_control(void *st, enum policy_control ctl, uint64_t arg)
{
	struct xm_state *w = st;
	xm_unmark(w);
	w->c->inner->control(w->inner, ctl, arg);
	xm_level(w);
}

static void xm_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct xm_state *w = st;
	w->c->inner->stats(w->inner, emit, ctx);
}

static int xm_prepass(void *st, const struct trace_rec *rec)
{
	struct xm_state *w = st;
	return w->c->inner->prepass(w->inner, rec);
}

static int xm_prepass_done(void *st, char *err, size_t errlen)
{
	struct xm_state *w = st;
	return w->c->inner->prepass_done(w->inner, err, errlen);
}

static void xm_decisions(void *st, policy_decision_fn fn, void *ctx)
{
	struct xm_state *w = st;
	w->c->inner->decisions(w->inner, fn, ctx);
}

static void xm_fini(void *st)
{
	struct xm_state *w = st;
	xm_unmark(w);
	u64map_free(&w->live);
	w->c->inner->fini(w->inner);
}

/* One replay of O under the wrapped policy. */
static int xm_run(const struct sim_options *o, struct xm_ctx *c, struct sim_result *r,
		  char *err, size_t errlen)
{
	const struct alloc_policy *in = o->policy;
	/* optional hooks stay absent where the policy has none: the engine
	 * treats the wrapper as it treats the policy */
	struct alloc_policy w = {
		.iversion = in->iversion, .name = in->name, .description = in->description,
		.state_size = offsetof(struct xm_state, inner) + in->state_size, .knobs = in->knobs,
		.init = xm_init, .alloc = xm_alloc, .free = xm_free,
		.control = in->control ? xm_control : NULL, .stats = in->stats ? xm_stats : NULL,
		.prepass = in->prepass ? xm_prepass : NULL,
		.prepass_done = in->prepass_done ? xm_prepass_done : NULL,
		.fini = xm_fini, .flags = in->flags,
		.decisions = in->iversion >= 2 && in->decisions ? xm_decisions : NULL,
	};
	struct sim_options oo = *o;
	oo.policy = &w;
	oo.peak_items = 1;
	c->inner = in;
	c->log = o->decisions;
	if (c->log)
		sim_decisions_reset(c->log);
	memset(r, 0, sizeof *r);
	xm_next = c;
	int rc = sim_run(&oo, r, err, errlen);
	xm_next = NULL;
	return rc;
}

static uint64_t peak_event_line(const struct sim_result *r)
{
	for (size_t e = 0; e < r->nevents; e++)
		if (r->events[e].kind == SIM_EV_PEAK_RESERVED)
			return r->events[e].line;
	return 0;
}

/* Keep the live blocks of C's snapshot in M. */
static void take_snap(struct explain_moment *m, struct xm_ctx *c)
{
	free(m->live);
	m->live = c->snap;
	m->nlive = c->nsnap;
	c->snap = NULL;
	c->nsnap = 0;
}

/* With a decision log: one more replay for the live blocks after call AT
 * (the result is dropped; the log is the same again). */
static int snap_at(const struct sim_options *o, struct explain_moment *m, uint64_t at, char *err,
		   size_t errlen)
{
	struct sim_result r;
	struct xm_ctx c;
	memset(&c, 0, sizeof c);
	c.snap_call = at;
	int rc = xm_run(o, &c, &r, err, errlen);
	sim_result_free(&r);
	if (rc == 0)
		take_snap(m, &c);
	free(c.snap);
	return rc;
}

/* See explain.h. */
int explain_replay(const struct sim_options *o, struct explain_moment *m, char *err,
		   size_t errlen)
{
	struct xm_ctx c;
	memset(m, 0, sizeof *m);
	memset(&c, 0, sizeof c);
	if (xm_run(o, &c, &m->res, err, errlen) < 0)
		return -1;
	m->reserved = m->res.peak_reserved;
	m->oom = m->res.oom;
	m->line = peak_event_line(&m->res);
	m->first_reach = 1;
	m->device_peak = m->res.device_peak;
	m->foreign_peak = m->res.peak_foreign;
	m->ndec = c.first_dec;
	if (c.best_call == c.first_call || !c.best_call)
		return o->decisions && c.first_call ? snap_at(o, m, c.first_call, err, errlen) : 0;
	/* a busier moment later on the plateau: replay, marking it */
	struct sim_result r2;
	struct xm_ctx c2;
	memset(&c2, 0, sizeof c2);
	c2.mark_call = c.best_call;
	c2.snap_call = o->decisions ? c.best_call : 0;
	if (xm_run(o, &c2, &r2, err, errlen) < 0) {
		free(c2.snap);
		return -1; /* m->res is freed by the caller */
	}
	if (!c2.marked || r2.peak_reserved != m->reserved + 1) {
		/* no room for the byte (reserved at the capacity): keep the
		 * first moment */
		sim_result_free(&r2);
		free(c2.snap);
		return o->decisions ? snap_at(o, m, c.first_call, err, errlen) : 0;
	}
	m->line = peak_event_line(&r2);
	sim_result_free(&m->res);
	m->res = r2;   /* its peak_reserved holds the byte: use m->reserved */
	m->first_reach = 0;
	m->ndec = c.best_dec;
	take_snap(m, &c2);
	return 0;
}
