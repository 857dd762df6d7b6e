/*
 * cost.c: the memory-management cost model and its fit from a trace's
 * host API records (see cost.h and docs/timing.md).
 *
 * Why medians: API times in a capture carry the profiler's own overhead,
 * page faults and the odd multi-millisecond stall; a mean follows those, a
 * median follows the typical call, which is what a replay repeats
 * thousands of times.
 */
#include "cost.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/conf.h"
#include "../base/vec.h"

#define MIB ((double)(1u << 20))
#define MIN_SAMPLES 3

enum cost_api cost_api_kind(const char *name)
{
	static const char *const mallocs[] = {"cudaMalloc", "cuMemAlloc", "cuMemAlloc_v2", NULL};
	static const char *const frees[] = {"cudaFree", "cuMemFree", "cuMemFree_v2", NULL};
	static const char *const other[] = {
		"cudaMallocAsync", "cudaFreeAsync", "cudaMallocFromPoolAsync",
		"cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocFromPoolAsync",
		"cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
		"cuMemAddressReserve", "cuMemAddressFree", "cudaMallocPitch", "cuMemAllocPitch",
		"cuMemAllocPitch_v2", "cudaMemPoolTrimTo", NULL};
	if (!name || (name[0] != 'c'))
		return COST_API_OTHER;
	for (int i = 0; mallocs[i]; i++)
		if (!strcmp(name, mallocs[i]))
			return COST_API_MALLOC;
	for (int i = 0; frees[i]; i++)
		if (!strcmp(name, frees[i]))
			return COST_API_FREE;
	for (int i = 0; other[i]; i++)
		if (!strcmp(name, other[i]))
			return COST_API_MEM;
	return COST_API_OTHER;
}

int cost_api_is_async(const char *name)
{
	static const char *const async[] = {
		"cudaMallocAsync", "cudaFreeAsync", "cudaMallocFromPoolAsync",
		"cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocFromPoolAsync", NULL};
	if (!name || name[0] != 'c')
		return 0;
	for (int i = 0; async[i]; i++)
		if (!strcmp(name, async[i]))
			return 1;
	return 0;
}

void cost_defaults(struct cost_model *m)
{
	memset(m, 0, sizeof *m);
	/* fitted by cost_fit_trace on capture/tests/data/resnet18-nocache.trace.gz
	 * (H200, driver 580, CUDA 13.0), rounded; see docs/timing.md */
	m->malloc_c.small_ns = 8000;
	m->malloc_c.large_ns = 60000;
	m->malloc_c.large_ns_per_mib = 800;
	m->free_c.small_ns = 5000;
	m->free_c.large_ns = 40000;
	m->free_c.large_ns_per_mib = 800;
	/* measured on the H200 (driver 580) by traces/timing/vmm_cost.cu
	 * (traces/timing/settings/pinned/costs, docs/timing.md "Cost table"):
	 * mapping N pages of 2 or 20 MiB took 58-700 us for N = 1-16, about
	 * 16 + 41.5 N us whatever the page size; unmapping 42-760 us, about
	 * 7 + 32 N us plus 0.77 us a MiB (a 20 MiB handle's release costs more) */
	m->map_ns = 16000;
	m->map_page_ns = 41500;
	m->unmap_ns = 7000;
	m->unmap_page_ns = 32000;
	m->unmap_ns_per_mib = 770;
	/* cudaMallocAsync / cudaFreeAsync served by the pool: 6.0-6.2 and
	 * 4.3-5.1 us a call in the training steps of two caching-on captures
	 * (traces/timing/settings/async), less the capture's 0.27 us inside a
	 * call (1.5-2.2 and 0.7-1.0 us on an idle GPU); growing the pool
	 * 54 us + 1.17 us a MiB, trimming it 60 us + 1.55 us a MiB (vmm_cost) */
	m->pool_alloc_ns = 5800;
	m->pool_free_ns = 4400;
	m->pool_grow_ns = 54000;
	m->pool_grow_ns_per_mib = 1170;
	m->pool_trim_ns = 60000;
	m->pool_trim_ns_per_mib = 1550;
	m->hit_ns = COST_HIT_NS;
	m->free_sync = 1;
	m->host_scale = 1.0;
	m->api_overhead_ns = 0;
	m->scale_calls = 1;
	m->gpu_scale = 1.0;
	m->size_scale = 1.0;
	m->calibrate = 0;
}

static int set_us(const struct conf_kv *kv, double *out, char *err, size_t errlen)
{
	double v;
	if (conf_double(kv, 0, 1e9, &v, err, errlen) < 0)
		return -1;
	*out = v * 1000.0;
	return 0;
}

int cost_parse(struct cost_model *m, const char *knobs, char *err, size_t errlen)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{"malloc_us", offsetof(struct cost_model, malloc_c.small_ns)},
		{"malloc_large_us", offsetof(struct cost_model, malloc_c.large_ns)},
		{"malloc_us_per_mib", offsetof(struct cost_model, malloc_c.large_ns_per_mib)},
		{"free_us", offsetof(struct cost_model, free_c.small_ns)},
		{"free_large_us", offsetof(struct cost_model, free_c.large_ns)},
		{"free_us_per_mib", offsetof(struct cost_model, free_c.large_ns_per_mib)},
		{"map_us", offsetof(struct cost_model, map_ns)},
		{"map_page_us", offsetof(struct cost_model, map_page_ns)},
		{"unmap_us", offsetof(struct cost_model, unmap_ns)},
		{"unmap_page_us", offsetof(struct cost_model, unmap_page_ns)},
		{"unmap_us_per_mib", offsetof(struct cost_model, unmap_ns_per_mib)},
		{"pool_alloc_us", offsetof(struct cost_model, pool_alloc_ns)},
		{"pool_free_us", offsetof(struct cost_model, pool_free_ns)},
		{"pool_grow_us", offsetof(struct cost_model, pool_grow_ns)},
		{"pool_grow_us_per_mib", offsetof(struct cost_model, pool_grow_ns_per_mib)},
		{"pool_trim_us", offsetof(struct cost_model, pool_trim_ns)},
		{"pool_trim_us_per_mib", offsetof(struct cost_model, pool_trim_ns_per_mib)},
		{"hit_us", offsetof(struct cost_model, hit_ns)},
		{"api_overhead_us", offsetof(struct cost_model, api_overhead_ns)},
		{"cap_api_us", offsetof(struct cost_model, cap_api_ns)},
		{"cap_cb_us", offsetof(struct cost_model, cap_cb_ns)},
		{"cap_call_us", offsetof(struct cost_model, cap_call_ns)},
		{"cap_mem_us", offsetof(struct cost_model, cap_mem_ns)},
		{"cap_range_us", offsetof(struct cost_model, cap_range_ns)},
		{"min_gap_us", offsetof(struct cost_model, min_gap_ns)},
		{"launch_latency_us", offsetof(struct cost_model, launch_latency_ns)},
		{"trace_hit_us", offsetof(struct cost_model, trace_hit_ns)},
	};
	/* the knobs the loop below handles by name, for the error's list */
	static const char *const named[] = {"free_sync", "scale_calls", "timeline", "calibrate",
					    "dev_call_us", "dev_call_frac", "table", "gpu_scale",
					    "size_scale", "cap_own", "host_scale"};
	const char *cur = knobs ? knobs : "";
	struct conf_kv kv;
	int r;
	while ((r = conf_next(&cur, &kv, err, errlen)) > 0) {
		size_t i, n = sizeof keys / sizeof keys[0];
		if (!strcmp(kv.key, "free_sync") || !strcmp(kv.key, "scale_calls") ||
		    !strcmp(kv.key, "timeline") || !strcmp(kv.key, "calibrate")) {
			if (strcmp(kv.value, "0") && strcmp(kv.value, "1")) {
				snprintf(err, errlen, "cost knob %s: '%s' is not 0 or 1", kv.key, kv.value);
				break;
			}
			if (kv.key[0] == 'f')
				m->free_sync = kv.value[0] == '1';
			else if (kv.key[0] == 's')
				m->scale_calls = kv.value[0] == '1';
			else if (kv.key[0] == 'c')
				m->calibrate = kv.value[0] == '1';
			else
				m->timeline = kv.value[0] == '1';
			continue;
		}
		if (!strcmp(kv.key, "dev_call_us")) {
			/* may be negative: a capture cost inside the table's calls */
			double v;
			if (conf_double(&kv, -1e6, 1e9, &v, err, errlen) < 0) {
				r = -1;
				break;
			}
			m->dev_call_ns = v * 1000.0;
			m->malloc_c.extra_ns = m->free_c.extra_ns = m->dev_call_ns;
			continue;
		}
		if (!strcmp(kv.key, "dev_call_frac")) {
			if (conf_double(&kv, 0, 10, &m->dev_call_frac, err, errlen) < 0) {
				r = -1;
				break;
			}
			m->malloc_c.extra_frac = m->free_c.extra_frac = m->dev_call_frac;
			continue;
		}
		if (!strcmp(kv.key, "table")) {
			/* a measured cost table file (TSV), or "none": the fit */
			if (!strcmp(kv.value, "none")) {
				m->malloc_c.ntab = m->free_c.ntab = 0;
				m->table_name[0] = '\0';
			} else if (cost_table_load(m, kv.value, err, errlen) < 0) {
				r = -1;
				break;
			}
			continue;
		}
		if (!strcmp(kv.key, "gpu_scale")) {
			if (conf_double(&kv, 0.01, 100, &m->gpu_scale, err, errlen) < 0) {
				r = -1;
				break;
			}
			continue;
		}
		if (!strcmp(kv.key, "size_scale")) {
			if (conf_double(&kv, 0.01, 100, &m->size_scale, err, errlen) < 0) {
				r = -1;
				break;
			}
			continue;
		}
		if (!strcmp(kv.key, "cap_own")) {
			/* a factor on the measured own time, not a time */
			if (conf_double(&kv, 0, 10, &m->cap_own, err, errlen) < 0) {
				r = -1;
				break;
			}
			continue;
		}
		if (!strcmp(kv.key, "host_scale")) {
			/* a factor, not a time: 0 would make the host infinitely fast */
			if (conf_double(&kv, 0.01, 100, &m->host_scale, err, errlen) < 0) {
				r = -1;
				break;
			}
			m->calibrate = 0; /* the user's factor, not the measured one */
			continue;
		}
		for (i = 0; i < n; i++)
			if (!strcmp(kv.key, keys[i].key))
				break;
		if (i == n) {
			size_t used = (size_t)snprintf(err, errlen, "unknown cost knob '%s' (known:", kv.key);
			for (size_t k = 0; k < n + sizeof named / sizeof named[0] && used < errlen; k++)
				used += (size_t)snprintf(err + used, errlen - used, "%s %s", k ? "," : "",
							 k < n ? keys[k].key : named[k - n]);
			if (used < errlen)
				snprintf(err + used, errlen - used, ")");
			r = -1;
			break;
		}
		if (set_us(&kv, (double *)((char *)m + keys[i].off), err, errlen) < 0) {
			r = -1;
			break;
		}
	}
	if (r > 0)
		r = -1; /* left the loop on a bad knob */
	return r < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- fit */

void cost_fitter_init(struct cost_fitter *f)
{
	memset(f, 0, sizeof *f);
}

static int push(struct cost_sample **a, size_t *n, size_t *cap, uint64_t bytes, uint64_t ns)
{
	if (vec_reserve(a, cap, *n + 1, sizeof **a, 256) < 0)
		return -1;
	(*a)[*n].bytes = bytes;
	(*a)[*n].ns = ns;
	(*n)++;
	return 0;
}

/* Push the settling free: its own cost is its duration minus the wait
 * for the GPU work launched before it. */
static int settle_free(struct cost_fitter *f)
{
	if (!f->settling)
		return 0;
	f->settling = 0;
	uint64_t busy = f->set_busy < f->set_end ? f->set_busy : f->set_end;
	uint64_t wait = busy > f->set_start ? busy - f->set_start : 0;
	return push(&f->fre, &f->nfre, &f->capfre, f->set_bytes, f->set_end - f->set_start - wait);
}

int cost_fitter_add(struct cost_fitter *f, const struct trace_rec *rec, const char *name)
{
	/* records come by start time: one starting after the settling free
	 * ended is no GPU work that free could have waited for */
	if (f->settling && rec->start > f->set_end && settle_free(f) < 0)
		return -1;
	switch (rec->type) {
	case TREC_KERNEL:
	case TREC_MEMCPY:
	case TREC_MEMSET: {
		if (rec->end > f->gpu_busy)
			f->gpu_busy = rec->end;
		/* CUPTI's correlation ids grow with every API call: GPU work
		 * with a smaller id than the free was launched before it,
		 * even when it started (and so is recorded) after the free did;
		 * without ids, work that started inside the call counts */
		uint64_t corr = rec->type == TREC_KERNEL ? rec->u.kernel.corr : rec->u.copy.corr;
		if (f->pend_kind == COST_API_FREE &&
		    (corr && f->pend_corr ? corr < f->pend_corr : rec->start < f->pend_end) &&
		    rec->end > f->pend_busy)
			f->pend_busy = rec->end;
		if (f->settling &&
		    (corr && f->set_corr ? corr < f->set_corr : rec->start < f->set_end) &&
		    rec->end > f->set_busy)
			f->set_busy = rec->end;
		return 0;
	}
	case TREC_API: {
		enum cost_api k = cost_api_kind(name);
		if (k == COST_API_MEM && cost_api_is_async(name)) {
			/* mostly calls the pool serves (a growth is the odd slow
			 * one the median ignores); a stream-ordered free never waits */
			uint64_t ns = rec->end > rec->start ? rec->end - rec->start : 0;
			return push(&f->pool, &f->npool, &f->cappool, 0, ns);
		}
		if (k != COST_API_MALLOC && k != COST_API_FREE)
			return 0;
		if (settle_free(f) < 0)
			return -1;
		f->pend_kind = k;
		f->pend_start = rec->start;
		f->pend_end = rec->end >= rec->start ? rec->end : rec->start;
		f->pend_corr = rec->u.api.corr;
		/* GPU work recorded so far started before the call: a cudaFree
		 * waits for all of it */
		f->pend_busy = f->gpu_busy;
		return 0;
	}
	case TREC_ALLOC:
	case TREC_FREE: {
		int want = rec->type == TREC_ALLOC ? COST_API_MALLOC : COST_API_FREE;
		if (f->pend_kind != want)
			return 0;
		if (f->pend_corr ? rec->u.mem.corr != f->pend_corr
				 : (rec->start < f->pend_start || rec->start > f->pend_end))
			return 0;
		f->pend_kind = 0;
		uint64_t ns = f->pend_end - f->pend_start;
		if (want == COST_API_MALLOC)
			return push(&f->mal, &f->nmal, &f->capmal, rec->u.mem.bytes, ns);
		if (rec->u.mem.bytes == 0)
			return 0; /* size unknown: cannot place it on the curve */
		/* GPU records after this one may still belong to its wait */
		f->settling = 1;
		f->set_start = f->pend_start;
		f->set_end = f->pend_end;
		f->set_corr = f->pend_corr;
		f->set_busy = f->pend_busy;
		f->set_bytes = rec->u.mem.bytes;
		return 0;
	}
	default:
		return 0;
	}
}

static int cmp_ns(const void *a, const void *b)
{
	uint64_t x = ((const struct cost_sample *)a)->ns, y = ((const struct cost_sample *)b)->ns;
	return x < y ? -1 : x > y;
}

static int cmp_bytes(const void *a, const void *b)
{
	const struct cost_sample *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? -1 : 1;
	return cmp_ns(a, b);
}

static double median_ns(struct cost_sample *s, size_t n)
{
	qsort(s, n, sizeof *s, cmp_ns);
	return n % 2 ? (double)s[n / 2].ns : ((double)s[n / 2 - 1].ns + (double)s[n / 2].ns) / 2;
}

static double median_bytes(const struct cost_sample *s, size_t n)
{
	/* S is sorted by bytes */
	return n % 2 ? (double)s[n / 2].bytes
		: ((double)s[n / 2 - 1].bytes + (double)s[n / 2].bytes) / 2;
}

/* Small pool: the median. Large: the line through the (median size,
 * median time) points of the lower and upper halves by size, a two-group
 * robust regression; a negative slope (noise) is clamped to a constant. */
static void fit_curve(struct cost_sample *s, size_t n, struct cost_curve *c)
{
	if (!n)
		return; /* qsort may not be given NULL */
	qsort(s, n, sizeof *s, cmp_bytes);
	size_t nsmall = 0;
	while (nsmall < n && s[nsmall].bytes < COST_SMALL_LIMIT)
		nsmall++;
	if (nsmall >= MIN_SAMPLES) {
		struct cost_sample *tmp = malloc(nsmall * sizeof *tmp);
		if (tmp) {
			memcpy(tmp, s, nsmall * sizeof *tmp);
			c->small_ns = median_ns(tmp, nsmall);
			free(tmp);
		}
	}
	struct cost_sample *l = s + nsmall;
	size_t nl = n - nsmall;
	if (nl < MIN_SAMPLES)
		return;
	size_t h = nl / 2;
	double b1 = median_bytes(l, h), b2 = median_bytes(l + h, nl - h);
	double d1, d2;
	struct cost_sample *tmp = malloc(nl * sizeof *tmp);
	if (!tmp)
		return;
	memcpy(tmp, l, nl * sizeof *tmp);
	d1 = median_ns(tmp, h);
	d2 = median_ns(tmp + h, nl - h);
	double slope = b2 > b1 ? (d2 - d1) / ((b2 - b1) / MIB) : 0;
	if (slope < 0) {
		c->large_ns = median_ns(tmp, nl);
		c->large_ns_per_mib = 0;
	} else {
		c->large_ns_per_mib = slope;
		c->large_ns = d1 - slope * b1 / MIB;
		if (c->large_ns < 0) {
			c->large_ns = 0;
		}
	}
	free(tmp);
}

/* The trimmed mean of S (N > 0; sorted here): a step pays the sum of its
 * calls, so the mean, without the top 1% (the odd stall). */
static double trimmed_mean(struct cost_sample *s, size_t n)
{
	qsort(s, n, sizeof *s, cmp_ns);
	size_t k = n - n / 100;
	double t = 0;
	for (size_t i = 0; i < k; i++)
		t += (double)s[i].ns;
	return t / (double)k;
}

/* The trace's own calls binned as the shipped tables are: [0, 1 MiB),
 * then powers of two. */
static void own_bins(struct cost_sample *s, size_t n, struct cost_curve *c)
{
	c->nown = 0;
	if (!n)
		return;
	qsort(s, n, sizeof *s, cmp_bytes);
	size_t i = 0;
	uint64_t lo = 0, hi = COST_SMALL_LIMIT;
	while (i < n && c->nown < COST_TAB_MAX) {
		size_t j = i;
		while (j < n && s[j].bytes < hi)
			j++;
		if (j > i) {
			c->own_lo[c->nown] = lo;
			c->own_n[c->nown] = j - i;
			c->own_ns[c->nown] = trimmed_mean(s + i, j - i);
			c->nown++;
		}
		i = j;
		lo = hi;
		if (hi > UINT64_MAX / 2)
			break;
		hi *= 2;
	}
}

void cost_fitter_finish(struct cost_fitter *f, struct cost_model *m)
{
	/* out of memory here loses one sample, no more */
	(void)settle_free(f);
	cost_defaults(m);
	fit_curve(f->mal, f->nmal, &m->malloc_c);
	fit_curve(f->fre, f->nfre, &m->free_c);
	own_bins(f->mal, f->nmal, &m->malloc_c);
	own_bins(f->fre, f->nfre, &m->free_c);
	m->n_malloc = f->nmal;
	m->n_free = f->nfre;
	if (f->npool >= MIN_SAMPLES) {
		/* the trace's own pool calls, on its own host; a caching
		 * allocator's hit (no driver call) keeps its own cost */
		m->pool_alloc_ns = m->pool_free_ns = median_ns(f->pool, f->npool);
		m->n_pool = f->npool;
	}
	free(f->mal);
	free(f->fre);
	free(f->pool);
	memset(f, 0, sizeof *f);
}

int cost_fit_trace(const char *path, const char *knobs, struct cost_model *m,
		   char *err, size_t errlen)
{
	struct cost_fitter f;
	struct trace_rec rec;
	int rc, ret = -1;
	cost_fitter_init(&f);
	struct trace_reader *rd = trace_reader_start(path, err, errlen);
	if (!rd)
		goto out;
	while ((rc = trace_reader_next(rd, &rec)) == TRACE_OK) {
		const char *name = rec.type == TREC_API ? trace_reader_string(rd, rec.u.api.name) : NULL;
		if (cost_fitter_add(&f, &rec, name) < 0) {
			snprintf(err, errlen, "%s:%" PRIu64 ": out of memory", path, rec.line);
			goto out;
		}
	}
	if (rc < 0 && rc != TRACE_ERR_TRUNCATED) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	cost_fitter_finish(&f, m);
	/* the timeline model by default (timeline=0 in KNOBS: the fit alone) */
	struct cost_model probe = *m;
	probe.timeline = 1;
	if (cost_parse(&probe, knobs, err, errlen) < 0)
		goto out;
	if (probe.timeline && cost_timeline_setup(m, trace_reader_header(rd), err, errlen) < 0)
		goto out;
	if (cost_parse(m, knobs, err, errlen) < 0)
		goto out;
	ret = 0;
out:
	free(f.mal);
	free(f.fre);
	free(f.pool);
	if (rd)
		trace_reader_close(rd);
	return ret;
}
