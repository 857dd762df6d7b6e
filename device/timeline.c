/*
 * timeline.c: the timeline model's data and setup (docs/timing.md,
 * "Timeline model"): the measured cudaMalloc/cudaFree cost tables shipped
 * with gpumemsim, and the capture's own cost per capture mode, which the
 * engine's timed replay takes out of the captured host timeline.
 */
#include "cost.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/conf.h"

/* Constants of the model, fitted on the ResNet-18 and ResNet-50 captures
 * of traces/timing/paused and traces/timing/nosource (b32 and b128, all
 * four directions, against the mean of each mode's two uncaptured
 * references) and held out on MobileNet-V2 and DenseNet-121
 * (docs/timing.md, "Constants"; scripts/timing_paused.sh). */
#define TL_MIN_GAP_NS 1000.0        /* the shortest host gap between two calls */
#define TL_LAUNCH_LATENCY_NS 3000.0 /* launch return to kernel start */
#define TL_DEV_CALL_NS 6000.0       /* PyTorch's no-caching path around a device call */
#define TL_DEV_CALL_FRAC 0.0        /* and in proportion to the call's own cost */
/* capture mode "callbacks" (the default of gpumemsim capture): the
 * capture's share of the host's gaps and kept calls, and per record */
#define CAP_CB_SHARE 0.30
#define CAP_CB_API_NS 0.0
#define CAP_CB_CALL_NS 0.0
#define CAP_CB_MEM_NS 0.0
#define CAP_CB_RANGE_NS 0.0
/* the capture's own time a trace measured ('p' records' own_ns): the
 * factor taken out of the gap before each call */
#define CAP_OWN 0.0
/* capture mode "activity": not measured; taken as callbacks' */
#define CAP_ACT_SHARE CAP_CB_SHARE
#define CAP_ACT_API_NS CAP_CB_API_NS
#define CAP_ACT_CALL_NS CAP_CB_CALL_NS
#define CAP_ACT_MEM_NS CAP_CB_MEM_NS
#define CAP_ACT_RANGE_NS CAP_CB_RANGE_NS

/* traces/timing/cost/h200-580.tsv, byte for byte (tests/test_timing.c
 * checks the two agree); regenerate both with
 * traces/timing/make_cost_table.py. */
static const char h200_580[] =
	"# cudaMalloc / cudaFree host cost by size (ns), NVIDIA H200, driver 580.159.04, CUDA 13.0\n"
	"# from: resnet18-b32-cap-nocaching.trace.gz resnet18-b128-cap-nocaching.trace.gz resnet50-b32-cap-nocaching.trace.gz resnet50-b128-cap-nocaching.trace.gz\n"
	"# capture cost inside a recorded call (10th percentile of 3880 zero-byte cudaMalloc): 270 ns, taken off\n"
	"# lo_bytes\thi_bytes\tmalloc_ns\tmalloc_n\tfree_ns\tfree_n\n"
	"0\t1048576\t8407\t7338\t7183\t5758\n"
	"1048576\t2097152\t37264\t280\t22031\t198\n"
	"2097152\t4194304\t70702\t660\t54345\t594\n"
	"4194304\t8388608\t74176\t780\t52334\t738\n"
	"8388608\t16777216\t74754\t1639\t61256\t1597\n"
	"16777216\t33554432\t76980\t1760\t65194\t1760\n"
	"33554432\t67108864\t83454\t1815\t84597\t1807\n"
	"67108864\t134217728\t97849\t1393\t114979\t1385\n"
	"134217728\t268435456\t110551\t686\t151877\t686\n"
	"268435456\t536870912\t123407\t317\t247923\t317\n"
	"536870912\t1073741824\t332998\t54\t372514\t54\n"
	"1073741824\t2147483648\t417952\t23\t700721\t23\n"
	"2147483648\t4294967296\t379776\t11\t1201424\t11\n"
	"4294967296\t8589934592\t343346\t2\t1982166\t2\n"
	;

const char *cost_table_builtin(const char *gpu, const char *driver, const char **name)
{
	if (gpu && driver && strstr(gpu, "H200") && !strncmp(driver, "580.", 4)) {
		if (name)
			*name = "h200-580";
		return h200_580;
	}
	return NULL;
}

int cost_table_parse(struct cost_model *m, const char *text, const char *name,
		     char *err, size_t errlen)
{
	struct cost_curve mc = m->malloc_c, fc = m->free_c;
	mc.ntab = fc.ntab = 0;
	unsigned line = 0;
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char buf[256];
		line++;
		if (*p == '#' || *p == '\n') {
			p += len + (nl ? 1 : 0);
			continue;
		}
		if (len >= sizeof buf) {
			snprintf(err, errlen, "%s:%u: line too long", name, line);
			return -1;
		}
		memcpy(buf, p, len);
		buf[len] = '\0';
		p += len + (nl ? 1 : 0);
		if (!buf[0] || buf[0] == '#')
			continue;
		unsigned long long lo, hi, mn, fn;
		double mns, fns;
		if (sscanf(buf, "%llu %llu %lf %llu %lf %llu", &lo, &hi, &mns, &mn, &fns, &fn) != 6 ||
		    hi <= lo) {
			snprintf(err, errlen, "%s:%u: expected lo_bytes hi_bytes malloc_ns malloc_n "
				 "free_ns free_n", name, line);
			return -1;
		}
		if (mc.ntab == COST_TAB_MAX) {
			snprintf(err, errlen, "%s:%u: more than %d bins", name, line, COST_TAB_MAX);
			return -1;
		}
		if (mc.ntab && lo < mc.tab_lo[mc.ntab - 1]) {
			snprintf(err, errlen, "%s:%u: bins out of order", name, line);
			return -1;
		}
		/* a bin without samples (-1) takes its neighbour below */
		double prev_m = mc.ntab ? mc.tab_ns[mc.ntab - 1] : 0;
		double prev_f = fc.ntab ? fc.tab_ns[fc.ntab - 1] : 0;
		mc.tab_lo[mc.ntab] = fc.tab_lo[fc.ntab] = lo;
		mc.tab_n[mc.ntab] = mns >= 0 ? mn : 0;
		fc.tab_n[fc.ntab] = fns >= 0 ? fn : 0;
		mc.tab_ns[mc.ntab++] = mns >= 0 ? mns : prev_m;
		fc.tab_ns[fc.ntab++] = fns >= 0 ? fns : prev_f;
	}
	if (!mc.ntab) {
		snprintf(err, errlen, "%s: no bins", name);
		return -1;
	}
	m->malloc_c = mc;
	m->free_c = fc;
	snprintf(m->table_name, sizeof m->table_name, "%s", name);
	return 0;
}

/* Bins of C's own calls with enough samples replace the table's (the
 * capture's host measured itself); a table-less curve gets a table of
 * its own bins when every bin has enough. */
static void prefer_own(struct cost_curve *c)
{
	for (uint32_t i = 0; i < c->nown; i++) {
		if (c->own_n[i] < COST_OWN_MIN)
			continue;
		for (uint32_t j = 0; j < c->ntab; j++)
			if (c->tab_lo[j] == c->own_lo[i]) {
				c->tab_ns[j] = c->own_ns[i];
				c->tab_n[j] = c->own_n[i];
			}
	}
}

int cost_table_load(struct cost_model *m, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char *text = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			size_t nc = cap ? cap * 2 : 8192;
			char *t = realloc(text, nc);
			if (!t) {
				free(text);
				fclose(f);
				snprintf(err, errlen, "%s: out of memory", path);
				return -1;
			}
			text = t;
			cap = nc;
		}
		size_t r = fread(text + n, 1, 4096, f);
		n += r;
		if (r < 4096)
			break;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(text);
		snprintf(err, errlen, "%s: read error", path);
		return -1;
	}
	text[n] = '\0';
	const char *base = strrchr(path, '/');
	int rc = cost_table_parse(m, text, base ? base + 1 : path, err, errlen);
	free(text);
	return rc;
}

/* The capture's own host cost per capture mode, measured on the H200
 * (docs/timing.md, "Capture cost"): fitted ONCE across the ResNet-18 and
 * ResNet-50 b32 captures of traces/timing/h200 (captured minus uncaptured
 * step time of the same program on the same host, same call) and held out
 * on MobileNet-V2, DenseNet-121 and ResNet-50 b128. */
struct cap_mode_cost {
	const char *mode;             /* the capture_api label */
	double share;                 /* of the recorded host gaps and kept calls */
	double api_ns, call_ns, mem_ns, range_ns;
};
static const struct cap_mode_cost cap_modes[] = {
	{"callbacks", CAP_CB_SHARE, CAP_CB_API_NS, CAP_CB_CALL_NS, CAP_CB_MEM_NS, CAP_CB_RANGE_NS},
	{"activity", CAP_ACT_SHARE, CAP_ACT_API_NS, CAP_ACT_CALL_NS, CAP_ACT_MEM_NS,
	 CAP_ACT_RANGE_NS},
};

static int parse_overhead(struct cost_model *m, const char *v, char *err, size_t errlen)
{
	const char *cur = v;
	struct conf_kv kv;
	int r;
	while ((r = conf_next(&cur, &kv, err, errlen)) > 0) {
		double x;
		if (!strcmp(kv.key, "share")) {
			if (conf_double(&kv, 0, 0.99, &x, err, errlen) < 0)
				return -1;
			m->host_scale = 1.0 - x;
			m->scale_calls = 0;
			continue;
		}
		if (conf_double(&kv, 0, 1e9, &x, err, errlen) < 0)
			return -1;
		if (!strcmp(kv.key, "api_ns"))
			m->cap_api_ns = x;
		else if (!strcmp(kv.key, "cb_ns"))
			m->cap_cb_ns = x;
		else if (!strcmp(kv.key, "call_ns"))
			m->cap_call_ns = x;
		else if (!strcmp(kv.key, "mem_ns"))
			m->cap_mem_ns = x;
		else if (!strcmp(kv.key, "range_ns"))
			m->cap_range_ns = x;
		else {
			snprintf(err, errlen, "%s: unknown key '%s' (known: share, api_ns, cb_ns, call_ns, "
				 "mem_ns, range_ns)", COST_CAPTURE_FIELD, kv.key);
			return -1;
		}
	}
	return r < 0 ? -1 : 0;
}

int cost_timeline_setup(struct cost_model *m, const struct trace_header *h,
			char *err, size_t errlen)
{
	m->timeline = 1;
	m->min_gap_ns = TL_MIN_GAP_NS;
	m->launch_latency_ns = TL_LAUNCH_LATENCY_NS;
	m->hit_ns = COST_HIT_NS; /* PyTorch's caching allocator, per call */
	m->cap_api_ns = m->cap_cb_ns = m->cap_call_ns = m->cap_mem_ns = m->cap_range_ns = 0;
	m->cap_own = 0;
	snprintf(m->cap_mode, sizeof m->cap_mode, "none");
	const char *mode = trace_header_label(h, "capture_api");
	const char *prod = h ? h->producer : NULL;
	if (prod && !strcmp(prod, "gpumemsim-capture")) {
		/* captures before the capture_api label was written: callbacks */
		if (!mode)
			mode = "callbacks";
		for (size_t i = 0; i < sizeof cap_modes / sizeof cap_modes[0]; i++)
			if (!strcmp(mode, cap_modes[i].mode)) {
				m->host_scale = 1.0 - cap_modes[i].share;
				m->scale_calls = 0;
				m->cap_api_ns = cap_modes[i].api_ns;
				m->cap_call_ns = cap_modes[i].call_ns;
				m->cap_mem_ns = cap_modes[i].mem_ns;
				m->cap_range_ns = cap_modes[i].range_ns;
				m->cap_own = CAP_OWN;
				snprintf(m->cap_mode, sizeof m->cap_mode, "%s", mode);
				break;
			}
	}
	/* PyTorch's own no-caching path around each device call */
	const char *wl = trace_header_label(h, "workload");
	int torch = wl && !strcmp(wl, "torch");
	m->dev_call_ns = torch ? TL_DEV_CALL_NS : 0;
	m->malloc_c.extra_ns = m->free_c.extra_ns = m->dev_call_ns;
	m->dev_call_frac = torch ? TL_DEV_CALL_FRAC : 0;
	m->malloc_c.extra_frac = m->free_c.extra_frac = m->dev_call_frac;
	const char *ov = trace_header_label(h, COST_CAPTURE_FIELD);
	if (ov) {
		if (parse_overhead(m, ov, err, errlen) < 0)
			return -1;
		snprintf(m->cap_mode, sizeof m->cap_mode, "header");
	}
	const char *tname = NULL;
	const char *tab = h ? cost_table_builtin(h->gpu, h->driver, &tname) : NULL;
	if (tab && cost_table_parse(m, tab, tname, err, errlen) < 0)
		return -1;
	if (tab) {
		prefer_own(&m->malloc_c);
		prefer_own(&m->free_c);
	}
	return 0;
}
