/*
 * pytorch_init.c: the PyTorch policy's knobs (PYTORCH_CUDA_ALLOC_CONF, as
 * CUDAAllocatorConfig parses them), its init and its teardown; the
 * allocator itself is pytorch.c.
 */
#include "pytorch_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- knobs */

const struct policy_knob pytorch_knobs[] = {
	{"max_split_size_mb", "<MiB>", "blocks this large are never split (default unlimited; > 20)"},
	{"roundup_power2_divisions", "<n>|[<MiB>:<n>,...,>:<n>]",
	 "round requests up to 1/n steps between powers of two (power of 2 or 0)"},
	{"garbage_collection_threshold", "<0..1>",
	 "with a fraction set, free old cached blocks above this share of it"},
	{"expandable_segments", "True|False", "one growing mapped segment per stream and pool"},
	{"max_non_split_rounding_mb", "<MiB>",
	 "an oversize request may take a cached block up to this much larger (default 20)"},
	{"fraction", "<0..1>", "set_per_process_memory_fraction: share of the device allowed"},
	{"backend", "native", "only native here (cudaMallocAsync is the cuda_async policy)"},
	{NULL, NULL, NULL},
};

static int is_pow2_or_zero(uint64_t v)
{
	return (v & (v - 1)) == 0;
}

/* "[256:1,512:2,>:4]": boundaries in MiB, as CUDAAllocatorConfig parses it. */
static int parse_divisions_list(struct pytorch_state *s, const struct conf_kv *kv,
				char *err, size_t errlen)
{
	const char *p = kv->value + 1;
	size_t last = 0;
	int first = 1;
	for (;;) {
		while (*p == ' ')
			p++;
		if (*p == ']')
			break;
		int gt = 0;
		uint64_t boundary = 0;
		char *end;
		if (*p == '>') {
			gt = 1;
			p++;
		} else {
			if (*p < '0' || *p > '9')
				goto bad;
			boundary = strtoull(p, &end, 10);
			p = end;
		}
		if (*p != ':')
			goto bad;
		p++;
		if (*p < '0' || *p > '9')
			goto bad;
		uint64_t val = strtoull(p, &end, 10);
		p = end;
		if (!is_pow2_or_zero(val) || val > 1ull << 30) {
			snprintf(err, errlen, "knob '%s': divisions must be a power of 2 or 0, got %" PRIu64,
				 kv->key, val);
			return -1;
		}
		if (gt) {
			for (size_t i = first ? 0 : last + 1; i < PT_DIV_INTERVALS; i++)
				s->divisions[i] = (uint32_t)val;
		} else {
			if (boundary == 0 || !is_pow2_or_zero(boundary)) {
				snprintf(err, errlen, "knob '%s': interval boundary %" PRIu64
					 " MiB must be a power of 2", kv->key, boundary);
				return -1;
			}
			size_t idx = (size_t)ilog2_u64(boundary);
			if (idx > PT_DIV_INTERVALS - 1)
				idx = PT_DIV_INTERVALS - 1;
			if (first) {
				for (size_t i = 0; i < idx; i++)
					s->divisions[i] = (uint32_t)val;
			}
			s->divisions[idx] = (uint32_t)val;
			last = idx;
		}
		first = 0;
		while (*p == ' ')
			p++;
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p != ']')
			goto bad;
	}
	if (p[1] != '\0')
		goto bad;
	return 0;
bad:
	snprintf(err, errlen, "knob '%s': malformed list '%s' (expected e.g. [256:1,512:2,>:4])",
		 kv->key, kv->value);
	return -1;
}

int pt_init(void *st, const char *conf, const struct policy_env *env,
		   char *err, size_t errlen)
{
	struct pytorch_state *s = st;
	struct conf_kv kv;
	const char *cur = conf;
	int r;
	s->dev = env->dev;
	s->capacity = env->capacity ? env->capacity : device_capacity(env->dev);
	s->max_split = PT_UNLIMITED;
	s->max_non_split_rounding = PT_LARGE_BUFFER;
	s->small.small = 1;
	s->rng = 2463534242u;
	u64map_init(&s->active);
	while ((r = conf_next(&cur, &kv, err, errlen)) > 0) {
		uint64_t v;
		if (!strcmp(kv.key, "max_split_size_mb")) {
			if (conf_u64(&kv, &v, err, errlen) < 0)
				return -1;
			if (v <= PT_LARGE_BUFFER / MIB || v > (UINT64_MAX / MIB)) {
				snprintf(err, errlen, "knob 'max_split_size_mb': %" PRIu64
					 " is too small, must be > %llu", v, PT_LARGE_BUFFER / MIB);
				return -1;
			}
			s->max_split = v * MIB;
		} else if (!strcmp(kv.key, "max_non_split_rounding_mb")) {
			if (conf_u64(&kv, &v, err, errlen) < 0)
				return -1;
			if (v > UINT64_MAX / MIB / 2) {
				snprintf(err, errlen, "knob 'max_non_split_rounding_mb': too large");
				return -1;
			}
			s->max_non_split_rounding = v * MIB;
		} else if (!strcmp(kv.key, "roundup_power2_divisions")) {
			if (kv.value[0] == '[') {
				if (parse_divisions_list(s, &kv, err, errlen) < 0)
					return -1;
			} else {
				if (conf_u64(&kv, &v, err, errlen) < 0)
					return -1;
				if (!is_pow2_or_zero(v) || v > 1ull << 30) {
					snprintf(err, errlen, "knob 'roundup_power2_divisions': must be a "
						 "power of 2 or 0, got %" PRIu64, v);
					return -1;
				}
				for (int i = 0; i < PT_DIV_INTERVALS; i++)
					s->divisions[i] = (uint32_t)v;
			}
		} else if (!strcmp(kv.key, "garbage_collection_threshold")) {
			double d;
			if (conf_double(&kv, 0.0, 1.0, &d, err, errlen) < 0)
				return -1;
			if (d <= 0.0 || d >= 1.0) {
				snprintf(err, errlen, "knob 'garbage_collection_threshold': must be "
					 "greater than 0 and less than 1, got %s", kv.value);
				return -1;
			}
			s->gc_threshold = d;
		} else if (!strcmp(kv.key, "expandable_segments")) {
			if (conf_bool(&kv, &s->expandable, err, errlen) < 0)
				return -1;
		} else if (!strcmp(kv.key, "fraction")) {
			double d;
			if (conf_double(&kv, 0.0, 1.0, &d, err, errlen) < 0)
				return -1;
			s->fraction = d;
			s->set_fraction = 1;
		} else if (!strcmp(kv.key, "backend")) {
			if (!strcmp(kv.value, "cudaMallocAsync")) {
				snprintf(err, errlen, "knob 'backend': cudaMallocAsync is modelled by "
					 "the cuda_async policy (--policy cuda_async)");
				return -1;
			}
			if (strcmp(kv.value, "native")) {
				snprintf(err, errlen, "knob 'backend': expected native, got '%s'", kv.value);
				return -1;
			}
		} else {
			return conf_unknown("pytorch", pytorch_knobs, kv.key, err, errlen);
		}
	}
	if (r < 0)
		return -1;
	if (s->set_fraction) {
		if (!s->capacity) {
			snprintf(err, errlen, "knob 'fraction': needs a device capacity "
				 "(--capacity or the trace's total_memory)");
			return -1;
		}
		s->allowed = (uint64_t)(s->fraction * (double)s->capacity);
	}
	return 0;
}

/* Give every segment and mapped range back to the device: the engine
 * checks that a finished policy holds no device memory. */
static void return_all(struct pytorch_state *s)
{
	for (size_t c = 0; c < s->nchunks; c++) {
		for (size_t i = 0; i < BLOCKS_PER_CHUNK; i++) {
			struct pt_block *b = &s->chunks[c][i];
			if (!b->live || b->prev)
				continue;
			uint64_t start = b->addr, len = 0;
			for (struct pt_block *x = b; x; x = x->next) {
				if (!b->eseg) {
					len += x->size;
					continue;
				}
				if (x->mapped) {
					if (!len)
						start = x->addr;
					len += x->size;
				}
				if ((!x->mapped || !x->next) && len) {
					device_unmap(s->dev, start, len, b->eseg->page);
					len = 0;
				}
			}
			if (!b->eseg)
				device_free(s->dev, b->addr, len);
		}
	}
}

void pt_fini(void *st)
{
	struct pytorch_state *s = st;
	return_all(s);
	for (size_t i = 0; i < s->nchunks; i++)
		free(s->chunks[i]);
	free(s->chunks);
	while (s->esegs) {
		struct pt_eseg *n = s->esegs->next_seg;
		free(s->esegs);
		s->esegs = n;
	}
	u64map_free(&s->active);
	pool_free_index(&s->small);
	pool_free_index(&s->large);
	memset(s, 0, sizeof *s);
}

/* The decisions hook: remembers where to report (pytorch.c reports each
 * segment and release as it happens) and reports the rules the knobs set. */
void pt_decisions(void *st, policy_decision_fn fn, void *ctx)
{
	struct pytorch_state *s = st;
	s->dec = fn;
	s->dec_ctx = ctx;
	if (!fn)
		return;
	struct policy_decision d = {.kind = POLICY_DEC_RULE, .held = s->total_reserved};
	if (s->set_fraction) {
		d.what = "limit";
		d.why = "set_per_process_memory_fraction";
		d.bytes = s->allowed;
		fn(ctx, &d);
	}
	if (s->set_fraction && s->gc_threshold > 0.0) {
		d.what = "gc_threshold";
		d.why = "garbage_collection_threshold x the limit";
		d.bytes = (uint64_t)(s->gc_threshold * (double)s->allowed);
		fn(ctx, &d);
	}
	if (s->max_split != PT_UNLIMITED) {
		d.what = "max_split_size";
		d.why = "larger cached blocks are not split";
		d.bytes = s->max_split;
		fn(ctx, &d);
	}
	if (s->expandable) {
		d.what = "expandable_segments";
		d.why = "pages of one virtual range per stream and pool";
		d.bytes = PT_LARGE_BUFFER;
		fn(ctx, &d);
	}
}
