/*
 * inject_links.c: kernel-to-buffer links for the injection library
 * (inject.c). Allocation callbacks keep a sorted table of live
 * allocations; each launch's parameter words are looked up in it, with the
 * parameter layout the driver gives for the kernel (cached by handle and
 * by host stub, forgotten at every module unload). What the program's
 * threads find is staged here until the writer moves it into the
 * converter: links, API and sync records timed in callbacks, module events.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"
#include "inject_int.h"

static pthread_mutex_t cap_live_lock = PTHREAD_MUTEX_INITIALIZER;

/* Live allocations for link matching: sorted by base address. */
struct cap_live { uint64_t base, size, corr; };
static struct cap_live *cap_live;
static size_t cap_nlive, cap_caplive;

/* Kernel parameter sizes by function handle. A handle means that function
 * only while its module is loaded: the driver hands the same handle value
 * to another function after an unload (XLA's autotuner loads and unloads
 * modules all the time), and scanning a launch with the old function's
 * layout reads past its parameter array. So every module unload moves the
 * caches to the graveyard (entries are never freed before exit: a launch
 * on another thread may still hold one). */
struct u64map cap_param_cache, cap_stub_cache;
struct u64map cap_param_grave;   /* handle -> params before the last unload */
static void **cap_grave;                /* every params struct ever made, freed at exit */
static size_t cap_ngrave, cap_capgrave;
static pthread_mutex_t cap_param_lock = PTHREAD_MUTEX_INITIALIZER;
typedef int (*cap_get_func_fn)(void **func, const void *symbol);
static cap_get_func_fn cap_get_func_by_symbol;
static pthread_once_t cap_cudart_once = PTHREAD_ONCE_INIT;
atomic_ullong cap_stale_layouts;  /* see cap_params_forget */

/* ------------------------------------------------------------- links */

void cap_live_insert(uint64_t base, uint64_t size, uint64_t corr)
{
	if (cap_debug && size >= (16u << 20) && atomic_fetch_add(&cap_debug_lines, 1) < 200)
		fprintf(stderr, "gpumemsim capture debug: callback alloc corr %llu addr 0x%llx bytes %llu\n",
			(unsigned long long)corr, (unsigned long long)base, (unsigned long long)size);
	pthread_mutex_lock(&cap_live_lock);
	size_t lo = 0, hi = cap_nlive;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cap_live[mid].base < base)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < cap_nlive && cap_live[lo].base == base) {
		cap_live[lo].size = size;
		cap_live[lo].corr = corr;
	} else {
		if (VEC_RESERVE(cap_live, cap_caplive, cap_nlive + 1, 1024) < 0)
			goto out;
		memmove(&cap_live[lo + 1], &cap_live[lo], (cap_nlive - lo) * sizeof(*cap_live));
		cap_live[lo] = (struct cap_live){base, size, corr};
		cap_nlive++;
	}
out:
	pthread_mutex_unlock(&cap_live_lock);
}

void cap_live_remove(uint64_t base)
{
	pthread_mutex_lock(&cap_live_lock);
	size_t lo = 0, hi = cap_nlive;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cap_live[mid].base < base)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < cap_nlive && cap_live[lo].base == base) {
		memmove(&cap_live[lo], &cap_live[lo + 1], (cap_nlive - lo - 1) * sizeof(*cap_live));
		cap_nlive--;
	}
	pthread_mutex_unlock(&cap_live_lock);
}

/* Add V's allocation to LINKS if V points into a live one (lock held). */
static void cap_match(uint64_t v, struct cap_link *links, size_t *n)
{
	if (v == 0 || cap_nlive == 0 || v < cap_live[0].base)
		return;
	size_t lo = 0, hi = cap_nlive;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (cap_live[mid].base <= v)
			lo = mid;
		else
			hi = mid;
	}
	const struct cap_live *l = &cap_live[lo];
	if (v - l->base >= l->size)
		return;
	for (size_t i = 0; i < *n; i++)
		if (links[i].addr == l->base)
			return;
	if (*n < CAP_LINKS_PER_LAUNCH)
		links[(*n)++] = (struct cap_link){l->corr, l->base};
}

static void cap_scan_words(const void *p, size_t size, struct cap_link *links, size_t *n)
{
	for (size_t w = 0; w + 8 <= size; w += 8) {
		uint64_t v;
		memcpy(&v, (const char *)p + w, 8);
		cap_match(v, links, n);
	}
}

/* cudart's cudaGetFuncBySymbol (and its error getters), from the copy the
 * program loaded (never a second one of ours): a host stub only means
 * something to that copy. Absent when the program links cudart statically. */
typedef int (*cap_err_fn)(void);
static cap_err_fn cap_peek_error, cap_get_error;

static int cap_find_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so")) {
		void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			cap_get_func_by_symbol = (cap_get_func_fn)dlsym(h, "cudaGetFuncBySymbol");
			cap_peek_error = (cap_err_fn)dlsym(h, "cudaPeekAtLastError");
			cap_get_error = (cap_err_fn)dlsym(h, "cudaGetLastError");
			dlclose(h);
			return cap_get_func_by_symbol && cap_peek_error && cap_get_error;
		}
	}
	return 0;
}

static void cap_cudart_init(void)
{
	cap_get_func_by_symbol = (cap_get_func_fn)dlsym(RTLD_DEFAULT, "cudaGetFuncBySymbol");
	cap_peek_error = (cap_err_fn)dlsym(RTLD_DEFAULT, "cudaPeekAtLastError");
	cap_get_error = (cap_err_fn)dlsym(RTLD_DEFAULT, "cudaGetLastError");
	if (!cap_get_func_by_symbol || !cap_peek_error || !cap_get_error)
		dl_iterate_phdr(cap_find_cudart, NULL);
	if (!cap_peek_error || !cap_get_error)
		cap_get_func_by_symbol = NULL;
}

/* Parameter info for cudaLaunchKernel's FUNC, which is either a host stub
 * (an address inside a loaded image: ask the program's cudart, leaving its
 * last-error state as it was) or a cudaKernel_t (a driver object on the
 * heap: CUDA 13's <<<>>> path passes these; ask the driver). */
const struct cap_params *cap_stub_params(const void *func)
{
	const struct cap_params *res = NULL;
	Dl_info info;
	void *fn = NULL;
	uint64_t v;
	if (!func)
		return NULL;
	pthread_mutex_lock(&cap_param_lock);
	int hit = u64map_get(&cap_stub_cache, (uint64_t)(uintptr_t)func, &v);
	pthread_mutex_unlock(&cap_param_lock);
	if (hit)
		return (const struct cap_params *)(uintptr_t)v;
	if (!dladdr(func, &info)) {
		res = cap_param_info((void *)func, 1);
	} else {
		pthread_once(&cap_cudart_once, cap_cudart_init);
		if (!cap_get_func_by_symbol || cap_peek_error() != 0)
			return NULL;   /* not cached: a later launch may succeed */
		if (cap_get_func_by_symbol(&fn, func) != 0)
			cap_get_error();   /* the error is ours: the state was clean before */
		else
			res = cap_param_info(fn, 0);
	}
	pthread_mutex_lock(&cap_param_lock);
	u64map_put(&cap_stub_cache, (uint64_t)(uintptr_t)func, (uint64_t)(uintptr_t)res);
	pthread_mutex_unlock(&cap_param_lock);
	return res;
}

/* 1 when two layouts differ (the old one would have misread a launch). */
static int cap_params_differ(const struct cap_params *a, const struct cap_params *b)
{
	if (!a || !b || a->n != b->n)
		return a != b;
	return memcmp(a->size, b->size, a->n * sizeof(a->size[0])) != 0;
}

/* Parameter sizes of a kernel, cached by handle. IS_KERNEL: HANDLE is a
 * CUkernel (CUDA 13's <<<>>> path), else a CUfunction. */
const struct cap_params *cap_param_info(void *handle, int is_kernel)
{
	uint64_t key = (uint64_t)(uintptr_t)handle, v;
	const struct cap_params *res = NULL;
	uint32_t size[CAP_MAX_PARAMS], n = 0;
	if (!handle)
		return NULL;
	pthread_mutex_lock(&cap_param_lock);
	if (u64map_get(&cap_param_cache, key, &v)) {
		res = (const struct cap_params *)(uintptr_t)v;
		goto out;
	}
	for (; n < CAP_MAX_PARAMS; n++) {
		size_t off = 0, sz = 0;
		CUresult r = is_kernel ? cuKernelGetParamInfo((CUkernel)handle, n, &off, &sz)
				       : cuFuncGetParamInfo((CUfunction)handle, n, &off, &sz);
		if (r != CUDA_SUCCESS)
			break;
		size[n] = (uint32_t)sz;
	}
	struct cap_params *p = malloc(sizeof(*p) + n * sizeof(p->size[0]));
	if (!p || VEC_RESERVE(cap_grave, cap_capgrave, cap_ngrave + 1, 256) < 0) {
		free(p);
		goto out;
	}
	p->n = n;
	memcpy(p->size, size, n * sizeof(size[0]));
	if (u64map_put(&cap_param_cache, key, (uint64_t)(uintptr_t)p) < 0) {
		free(p);
		goto out;
	}
	cap_grave[cap_ngrave++] = p;
	if (u64map_get(&cap_param_grave, key, &v) &&
	    cap_params_differ((const struct cap_params *)(uintptr_t)v, p))
		atomic_fetch_add(&cap_stale_layouts, 1);
	res = p;
out:
	pthread_mutex_unlock(&cap_param_lock);
	return res;
}

/* A module is unloading: every cached handle may soon name another
 * function. The old entries stay readable (see cap_params) and are
 * remembered by handle, to count the launches the stale cache would have
 * misread (cap_stale_layouts, in the verbose line). */
void cap_params_forget(void)
{
	pthread_mutex_lock(&cap_param_lock);
	for (size_t i = 0; i < cap_param_cache.cap; i++)
		if (cap_param_cache.keys[i] != U64MAP_EMPTY)
			u64map_put(&cap_param_grave, cap_param_cache.keys[i], cap_param_cache.vals[i]);
	u64map_free(&cap_param_cache);
	u64map_free(&cap_stub_cache);
	u64map_init(&cap_param_cache);
	u64map_init(&cap_stub_cache);
	pthread_mutex_unlock(&cap_param_lock);
}

/* Links found at launches wait here (under cap_live_lock, which the scan
 * holds anyway) until the writer moves them into the converter before it
 * emits: a launch never waits for the writer's compression. */
/* API records timed in callbacks, staged under cap_live_lock until the
 * writer moves them into the converter (which needs cap_lock: a program
 * thread must never wait while the writer converts a buffer). */
static struct cap_rec *cap_api_stage;
static size_t cap_napi, cap_capapi;
/* Module loads and unloads from resource callbacks, staged the same way. */
struct cap_mod_ev { enum cap_module_op op; uint32_t ctx, module; uint64_t t; };
static struct cap_mod_ev *cap_mod_stage;
static size_t cap_nmod, cap_capmod;

struct cap_staged { uint64_t corr; uint32_t off, n; };
static struct cap_staged *cap_stage;
static size_t cap_nstage, cap_capstage;
static struct cap_link *cap_stage_links;
static size_t cap_nstage_links, cap_capstage_links;

static void cap_stage_add(uint64_t corr, const struct cap_link *links, size_t n)
{
	if (VEC_RESERVE(cap_stage, cap_capstage, cap_nstage + 1, 1024) < 0 ||
	    VEC_RESERVE(cap_stage_links, cap_capstage_links, cap_nstage_links + n, 8192) < 0)
		goto oom;
	memcpy(cap_stage_links + cap_nstage_links, links, n * sizeof(*links));
	cap_stage[cap_nstage++] = (struct cap_staged){corr, (uint32_t)cap_nstage_links, (uint32_t)n};
	cap_nstage_links += n;
	return;
oom:
	atomic_fetch_add(&cap_oom, 1);
}

/* Move everything staged (links, records timed in callbacks, module
 * events) into the converter; called with cap_lock held. The staging
 * vectors are taken whole under cap_live_lock, so a program thread waits
 * only for these pointer swaps. */
void cap_stage_drain(void)
{
	pthread_mutex_lock(&cap_live_lock);
	struct cap_staged *st = cap_stage;
	struct cap_link *sl = cap_stage_links;
	size_t n = cap_nstage;
	struct cap_rec *api = cap_api_stage;
	size_t napi = cap_napi;
	struct cap_mod_ev *mods = cap_mod_stage;
	size_t nmods = cap_nmod;
	cap_stage = NULL;
	cap_stage_links = NULL;
	cap_nstage = cap_capstage = cap_nstage_links = cap_capstage_links = 0;
	cap_api_stage = NULL;
	cap_napi = cap_capapi = 0;
	cap_mod_stage = NULL;
	cap_nmod = cap_capmod = 0;
	pthread_mutex_unlock(&cap_live_lock);

	for (size_t i = 0; i < n; i++)
		if (cap_conv && cap_conv_link(cap_conv, st[i].corr, sl + st[i].off, st[i].n) < 0)
			atomic_fetch_add(&cap_oom, 1);
	for (size_t i = 0; cap_conv && i < napi; i++)
		cap_push(&api[i]);
	for (size_t i = 0; cap_conv && i < nmods; i++)
		if (cap_conv_module(cap_conv, mods[i].op, mods[i].ctx, mods[i].module, mods[i].t) < 0)
			atomic_fetch_add(&cap_oom, 1);
	free(st);
	free(sl);
	free(api);
	free(mods);
}

/* Stage a module event for the converter (cap_stage_drain hands it on). */
void cap_module_stage(enum cap_module_op op, uint32_t ctx, uint32_t module, uint64_t t)
{
	struct cap_mod_ev ev = {op, ctx, module, t};
	pthread_mutex_lock(&cap_live_lock);
	if (VEC_RESERVE(cap_mod_stage, cap_capmod, cap_nmod + 1, 64) < 0)
		atomic_fetch_add(&cap_oom, 1);
	else
		cap_mod_stage[cap_nmod++] = ev;
	pthread_mutex_unlock(&cap_live_lock);
}

/* Stage one record timed in a callback (see cap_api_stage). */
void cap_api_stage_push(const struct cap_rec *r)
{
	pthread_mutex_lock(&cap_live_lock);
	if (VEC_RESERVE(cap_api_stage, cap_capapi, cap_napi + 1, 4096) < 0) {
		pthread_mutex_unlock(&cap_live_lock);
		atomic_fetch_add(&cap_oom, 1);
		return;
	}
	cap_api_stage[cap_napi++] = *r;
	pthread_mutex_unlock(&cap_live_lock);
}


/* Scan a launch's parameters for pointers into live allocations. */
void cap_launch(uint64_t corr, const struct cap_params *pi, void **args, void **extra)
{
	struct cap_link links[CAP_LINKS_PER_LAUNCH];
	size_t n = 0;
	pthread_mutex_lock(&cap_live_lock);
	if (args && pi) {
		for (uint32_t i = 0; i < pi->n; i++)
			if (args[i])
				cap_scan_words(args[i], pi->size[i], links, &n);
	} else if (extra) {
		void *buf = NULL;
		size_t bufsize = 0;
		for (int i = 0; i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
				bufsize = *(size_t *)extra[i + 1];
		}
		if (buf)
			cap_scan_words(buf, bufsize, links, &n);
	}
	if (n)
		cap_stage_add(corr, links, n);
	pthread_mutex_unlock(&cap_live_lock);
}
