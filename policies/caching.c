/*
 * caching.c: a wrapper that adds cache-release rules to another policy,
 * to price them: each release gives memory back (lower reserved) and
 * costs device mallocs/frees later (time, with `run --timing`).
 *
 * Conf: the wrapper's own knobs, everything else passed to the inner
 * policy unchanged, e.g.
 *   inner:pytorch,cache_limit:8GiB,empty_cache_every:10,expandable_segments:True
 * Rules (any combination; each calls the inner policy's empty_cache):
 *   cache_limit:SIZE      after a free, when reserved - allocated > SIZE
 *   empty_cache_every:N   at every Nth training step
 *   empty_cache_at:NAME   at the end of every NVTX range named NAME (or "NAME ...")
 *   release_threshold:SIZE at a host sync, when reserved > SIZE
 * Default: inner pytorch, no rule (behaves exactly like the inner policy).
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INNER_CONF_MAX 2048

struct caching_state {
	const struct alloc_policy *inner;
	void *ist;
	int inner_live;
	struct sim_device *dev;
	uint64_t cache_limit;         /* 0 = none */
	uint64_t every;               /* 0 = never */
	char at[256];                 /* "" = none */
	uint64_t release_threshold;   /* 0 = none */
	uint64_t allocated, steps, empties;
	/* decisions (policy.h): passed on from the inner policy, its releases
	 * named by the rule that asked for them */
	policy_decision_fn dec;
	void *dec_ctx;
	const char *rule;             /* the rule emptying the cache now, or NULL */
};

static const struct policy_knob caching_knobs[] = {
	{"inner", "<policy>", "the wrapped policy (default pytorch); its knobs pass through"},
	{"cache_limit", "<size>", "empty the cache when reserved - allocated exceeds this"},
	{"empty_cache_every", "<N>", "empty the cache every N training steps"},
	{"empty_cache_at", "<name>", "empty the cache at the end of NVTX ranges of this name"},
	{"release_threshold", "<size>", "empty the cache at a sync when reserved exceeds this"},
	{NULL, NULL, NULL},
};

static void empty(struct caching_state *s, const char *rule)
{
	s->rule = rule;
	if (s->inner->control)
		s->inner->control(s->ist, POLICY_CTL_EMPTY_CACHE, 0);
	s->rule = NULL;
	s->empties++;
}

static int parse_size(const struct conf_kv *kv, uint64_t *out, char *err, size_t errlen)
{
	if (conf_size(kv->value, out) < 0) {
		snprintf(err, errlen, "caching: %s: '%s' is not a size (e.g. 8GiB)", kv->key, kv->value);
		return -1;
	}
	return 0;
}

static int caching_init(void *st, const char *conf, const struct policy_env *env,
			char *err, size_t errlen)
{
	struct caching_state *s = st;
	char inner_conf[INNER_CONF_MAX] = "";
	size_t used = 0;
	struct conf_kv kv;
	const char *cur = conf;
	int r;
	s->inner = policy_find("pytorch");
	s->dev = env->dev;
	while ((r = conf_next(&cur, &kv, err, errlen)) > 0) {
		if (!strcmp(kv.key, "inner")) {
			s->inner = policy_find(kv.value);
			if (!s->inner || !strcmp(kv.value, "caching")) {
				char names[512];
				policy_list_names(names, sizeof names);
				snprintf(err, errlen, "caching: inner '%s' is not a policy to wrap (known: %s)",
					 kv.value, names);
				return -1;
			}
		} else if (!strcmp(kv.key, "cache_limit")) {
			if (parse_size(&kv, &s->cache_limit, err, errlen) < 0)
				return -1;
		} else if (!strcmp(kv.key, "release_threshold")) {
			if (parse_size(&kv, &s->release_threshold, err, errlen) < 0)
				return -1;
		} else if (!strcmp(kv.key, "empty_cache_every")) {
			if (conf_u64(&kv, &s->every, err, errlen) < 0)
				return -1;
		} else if (!strcmp(kv.key, "empty_cache_at")) {
			snprintf(s->at, sizeof s->at, "%s", kv.value);
		} else {
			/* the inner policy's knob: it names it if it is unknown */
			int n = snprintf(inner_conf + used, sizeof inner_conf - used, "%s%s:%s",
					 used ? "," : "", kv.key, kv.value);
			if (n < 0 || (size_t)n >= sizeof inner_conf - used) {
				snprintf(err, errlen, "caching: inner conf too long at '%s'", kv.key);
				return -1;
			}
			used += (size_t)n;
		}
	}
	if (r < 0)
		return -1;
	if (!s->inner) {
		snprintf(err, errlen, "caching: no pytorch policy registered");
		return -1;
	}
	if (s->inner->prepass) {
		snprintf(err, errlen, "caching: inner '%s' is an offline policy; wrap an online one",
			 s->inner->name);
		return -1;
	}
	s->ist = calloc(1, s->inner->state_size ? s->inner->state_size : 1);
	if (!s->ist) {
		snprintf(err, errlen, "caching: out of memory");
		return -1;
	}
	if (s->inner->init(s->ist, inner_conf, env, err, errlen) < 0) {
		free(s->ist);
		s->ist = NULL;
		return -1;
	}
	s->inner_live = 1;
	return 0;
}

static int caching_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct caching_state *s = st;
	int rc = s->inner->alloc(s->ist, req, res);
	if (rc == POLICY_OK)
		s->allocated += res->block_bytes;
	return rc;
}

static void caching_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct caching_state *s = st;
	s->inner->free(s->ist, addr, block_bytes, stream);
	s->allocated -= block_bytes <= s->allocated ? block_bytes : s->allocated;
	if (s->cache_limit && device_reserved(s->dev) > s->allocated + s->cache_limit)
		empty(s, "cache_limit rule: empty_cache after a free");
}

/* "NAME" or "NAME <anything>" */
static int name_matches(const char *rule, const char *name)
{
	size_t n = strlen(rule);
	return name && !strncmp(name, rule, n) && (name[n] == '\0' || name[n] == ' ');
}

static void caching_control(void *st, enum policy_control ctl, uint64_t arg)
{
	struct caching_state *s = st;
	switch (ctl) {
	case POLICY_CTL_STEP:
		s->steps++;
		if (s->every && s->steps % s->every == 0)
			empty(s, "empty_cache_every rule: empty_cache at a step");
		break;
	case POLICY_CTL_NVTX_END:
		if (s->at[0] && name_matches(s->at, (const char *)(uintptr_t)arg))
			empty(s, "empty_cache_at rule: empty_cache at a range end");
		return; /* the inner policy never asked for NVTX events */
	case POLICY_CTL_NVTX_BEGIN:
		return;
	case POLICY_CTL_SYNC:
		if (s->release_threshold && device_reserved(s->dev) > s->release_threshold) {
			if (s->inner->control)
				s->inner->control(s->ist, ctl, arg);
			empty(s, "release_threshold rule: empty_cache at a sync");
			return;
		}
		break;
	default:
		break;
	}
	if (s->inner->control)
		s->inner->control(s->ist, ctl, arg);
}

static void caching_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct caching_state *s = st;
	if (s->inner->stats)
		s->inner->stats(s->ist, emit, ctx);
	emit(ctx, "caching.empty_cache_calls", (int64_t)s->empties);
	emit(ctx, "caching.steps", (int64_t)s->steps);
}

/* The inner policy's decisions, a release by a rule named by it. */
static void caching_sink(void *ctx, const struct policy_decision *d)
{
	struct caching_state *s = ctx;
	if (s->rule && d->kind == POLICY_DEC_RELEASE) {
		struct policy_decision r = *d;
		r.why = s->rule;
		s->dec(s->dec_ctx, &r);
		return;
	}
	s->dec(s->dec_ctx, d);
}

/* The decisions hook (policy.h): the inner policy's, when it has one. */
static void caching_decisions(void *st, policy_decision_fn fn, void *ctx)
{
	struct caching_state *s = st;
	s->dec = fn;
	s->dec_ctx = ctx;
	if (s->inner->iversion >= 2 && s->inner->decisions)
		s->inner->decisions(s->ist, fn ? caching_sink : NULL, fn ? s : NULL);
}

static void caching_fini(void *st)
{
	struct caching_state *s = st;
	if (s->inner_live && s->inner->fini)
		s->inner->fini(s->ist);
	free(s->ist);
	s->ist = NULL;
	s->inner_live = 0;
}

const struct alloc_policy policy_caching = {
	.iversion = POLICY_IFACE_VERSION,
	.name = "caching",
	.description = "cache-release rules (limit, every N steps, at an NVTX range, at a sync) around another policy",
	.state_size = sizeof(struct caching_state),
	.knobs = caching_knobs,
	.init = caching_init,
	.alloc = caching_alloc,
	.free = caching_free,
	.control = caching_control,
	.stats = caching_stats,
	.fini = caching_fini,
	.flags = POLICY_F_NVTX,
	.decisions = caching_decisions,
};
