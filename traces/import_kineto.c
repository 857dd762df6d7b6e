/*
 * import_kineto.c: a torch.profiler (Kineto) Chrome trace into a gpumemsim
 * trace (see import_kineto.h for what maps to what, docs/import.md for
 * what the profile cannot tell).
 *
 * Kineto writes its events grouped by kind (CPU ops, then GPU activity),
 * not in time order, and the memory live before the profile only shows up
 * as frees of addresses never allocated and in "Total Allocated". So the
 * importer reads every kept event into memory first (about 120 bytes each;
 * the JSON itself is streamed, one event at a time), sorts them by time,
 * makes a first pass over the memory events to find what was live before the
 * profile started, and writes in a second.
 */
#include "import_kineto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strpool.h"
#include "../base/u64map.h"
#include "../base/vec.h"
#include "import_kineto_json.h"
#include "trace.h"

enum kr_type { KR_RANGE, KR_MEM, KR_OOM, KR_KERNEL, KR_COPY, KR_SET };

/* One kept event, times in nanoseconds before the final shift. */
struct kr {
	int64_t start, end;
	uint64_t seq;              /* file order, the last tie-break */
	int64_t dev;               /* device, -1 when the event does not say */
	int64_t bytes;             /* memory: signed (negative = free); copy, set, oom */
	uint64_t addr;
	int64_t tid;               /* range: thread, for the nesting depth */
	int64_t total_alloc;       /* memory: "Total Allocated" after it, -1 absent */
	int64_t total_res;         /* memory: "Total Reserved", -1 absent */
	uint64_t corr;
	uint32_t name;             /* id in the name pool, or UINT32_MAX */
	uint32_t stream;
	uint32_t grid[3], block[3], regs, smem;
	uint8_t type, kind;        /* enum kr_type; copy kind */
};

struct kin_dev {
	int64_t id;
	char name[128];
	int64_t mem, major, minor;
};

#define KIN_MAX_DEVS 16

struct kin {
	const char *in;
	char *err;
	size_t errlen;
	struct kj_reader *r;
	struct kj_doc doc;
	struct kr *recs;
	size_t n, cap;
	struct strpool names;   /* kernel and range names, each once */
	struct u64map steps_seen;
	/* metadata */
	struct kin_dev devs[KIN_MAX_DEVS];
	size_t ndevs;
	char torch[64], rank[32], world[32], cuda[32];
	int64_t base_ns;
	int have_events;
	struct import_kineto_stats st;
};

static int kfail(struct kin *k, uint64_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int kfail(struct kin *k, uint64_t line, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (line)
		snprintf(k->err, k->errlen, "%s:%" PRIu64 ": %s", k->in, line, msg);
	else
		snprintf(k->err, k->errlen, "%s: %s", k->in, msg);
	return -1;
}

/* ------------------------------------------------------------ events */

static const struct kj_node *arg(const struct kin *k, const struct kj_node *ev, const char *key)
{
	return kj_get(&k->doc, kj_get(&k->doc, ev, "args"), key);
}

static int64_t int_or(const struct kin *k, const struct kj_node *n, int64_t dflt)
{
	int64_t v;
	return kj_int(&k->doc, n, &v) == 0 ? v : dflt;
}

static uint32_t u32_or(const struct kin *k, const struct kj_node *n, uint32_t dflt)
{
	int64_t v = int_or(k, n, -1);
	return v >= 0 && v < (int64_t)UINT32_MAX ? (uint32_t)v : dflt;
}

static struct kr *push(struct kin *k, uint8_t type, uint64_t line)
{
	if (VEC_RESERVE(k->recs, k->cap, k->n + 1, 4096) < 0) {
		kfail(k, line, "out of memory (%zu events kept)", k->n);
		return NULL;
	}
	struct kr *r = &k->recs[k->n];
	memset(r, 0, sizeof *r);
	r->type = type;
	r->seq = k->n++;
	r->dev = -1;
	r->name = UINT32_MAX;
	r->stream = TRACE_NO_STREAM;
	r->total_alloc = r->total_res = -1;
	return r;
}

/* "ts" (and "dur" when WANT_DUR) of EV into R. */
static int times(struct kin *k, const struct kj_node *ev, struct kr *r, int want_dur,
		 const char *what, uint64_t line)
{
	int64_t dur = 0;
	if (kj_us_to_ns(&k->doc, kj_get(&k->doc, ev, "ts"), &r->start) < 0)
		return kfail(k, line, "%s event without a numeric \"ts\"", what);
	if (want_dur && kj_us_to_ns(&k->doc, kj_get(&k->doc, ev, "dur"), &dur) < 0)
		return kfail(k, line, "%s event without a numeric \"dur\"", what);
	if (dur < 0)
		dur = 0;   /* Kineto clamps these too */
	if (r->start > INT64_MAX - dur)
		return kfail(k, line, "%s event: \"ts\" + \"dur\" out of range", what);
	r->end = r->start + dur;
	return 0;
}

static int memory_event(struct kin *k, const struct kj_node *ev, int oom, uint64_t line)
{
	const char *what = oom ? "an [OutOfMemory]" : "a [memory]";
	int64_t dtype, addr = 0, bytes;
	if (kj_int(&k->doc, arg(k, ev, "Device Type"), &dtype) < 0)
		return kfail(k, line, "%s event without an integer \"Device Type\" in its args",
			     what);
	if (dtype != 1) {     /* c10::DeviceType::CUDA; 0 is the CPU */
		k->st.cpu_mem_events++;
		return 0;
	}
	if (kj_int(&k->doc, arg(k, ev, "Bytes"), &bytes) < 0)
		return kfail(k, line, "%s event without an integer \"Bytes\"", what);
	if (!oom && kj_int(&k->doc, arg(k, ev, "Addr"), &addr) < 0)
		return kfail(k, line, "%s event without an integer \"Addr\"", what);
	if (!oom && (bytes == 0 || (uint64_t)addr == U64MAP_EMPTY)) {
		k->st.skipped++;   /* a zero-byte request has no address to replay */
		return 0;
	}
	struct kr *r = push(k, oom ? KR_OOM : KR_MEM, line);
	if (!r || times(k, ev, r, 0, what, line) < 0)
		return -1;
	r->end = r->start;
	r->dev = int_or(k, arg(k, ev, "Device Id"), 0);
	r->addr = (uint64_t)addr;
	r->bytes = oom && bytes < 0 ? -bytes : bytes;
	r->total_alloc = int_or(k, arg(k, ev, "Total Allocated"), -1);
	r->total_res = int_or(k, arg(k, ev, "Total Reserved"), -1);
	return 0;
}

static uint8_t copy_kind(const char *name)
{
	static const struct { const char *s; uint8_t kind; } kinds[] = {
		{"Memcpy HtoD", TCOPY_HTOD}, {"Memcpy DtoH", TCOPY_DTOH}, {"Memcpy DtoD", TCOPY_DTOD},
		{"Memcpy HtoH", TCOPY_HTOH}, {"Memcpy PtoP", TCOPY_PTOP},
	};
	for (size_t i = 0; name && i < sizeof kinds / sizeof kinds[0]; i++)
		if (!strncmp(name, kinds[i].s, strlen(kinds[i].s)))
			return kinds[i].kind;
	return TCOPY_UNKNOWN;
}

static int gpu_event(struct kin *k, const struct kj_node *ev, uint8_t type, const char *name,
		     uint64_t line)
{
	static const char *const what[] = {[KR_KERNEL] = "a kernel", [KR_COPY] = "a gpu_memcpy",
					   [KR_SET] = "a gpu_memset"};
	struct kr *r = push(k, type, line);
	if (!r || times(k, ev, r, 1, what[type], line) < 0)
		return -1;
	const struct kj_node *dev = arg(k, ev, "device");
	if (!dev)
		dev = arg(k, ev, "inDevice");   /* CUpti_ActivityMemcpy2 (peer copies) */
	r->dev = int_or(k, dev, -1);
	r->stream = u32_or(k, arg(k, ev, "stream"), TRACE_NO_STREAM);
	r->corr = (uint64_t)int_or(k, arg(k, ev, "correlation"), 0);
	if (type == KR_KERNEL) {
		const struct kj_node *g = arg(k, ev, "grid"), *b = arg(k, ev, "block");
		for (size_t i = 0; i < 3; i++) {
			r->grid[i] = u32_or(k, kj_at(&k->doc, g, i), 0);
			r->block[i] = u32_or(k, kj_at(&k->doc, b, i), 0);
		}
		r->regs = u32_or(k, arg(k, ev, "registers per thread"), 0);
		r->smem = u32_or(k, arg(k, ev, "shared memory"), 0);
		if (strpool_add(&k->names, name ? name : "(unnamed kernel)", &r->name) < 0)
			return kfail(k, line, "out of memory");
	} else {
		int64_t bytes = int_or(k, arg(k, ev, "bytes"), 0);
		r->bytes = bytes > 0 ? bytes : 0;
		if (type == KR_COPY)
			r->kind = copy_kind(name);
	}
	return 0;
}

/* "ProfilerStep#N" -> N, or -1 when NAME is not one. */
static int64_t profiler_step(const char *name)
{
	static const char pre[] = "ProfilerStep#";
	if (!name || strncmp(name, pre, sizeof pre - 1))
		return -1;
	const char *p = name + sizeof pre - 1;
	int64_t v = 0;
	if (!*p)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9' || v > INT32_MAX)
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

static int range_event(struct kin *k, const struct kj_node *ev, const char *name, uint64_t line)
{
	char buf[64];
	int64_t step = profiler_step(name);
	if (step >= 0) {
		/* one range per step, however many events (cpu_op and
		 * user_annotation) carry it */
		uint64_t seen;
		if (u64map_get(&k->steps_seen, (uint64_t)step, &seen))
			return 0;
		if (u64map_put(&k->steps_seen, (uint64_t)step, 1) < 0)
			return kfail(k, line, "out of memory");
		snprintf(buf, sizeof buf, "step %" PRId64, step);
		name = buf;
	}
	uint64_t stepn;
	if (trace_step_number(name, &stepn))
		k->st.steps++;   /* ProfilerStep#N, or a record_function("step N") of the user's */
	struct kr *r = push(k, KR_RANGE, line);
	if (!r || times(k, ev, r, 1, "a range", line) < 0)
		return -1;
	r->tid = int_or(k, kj_get(&k->doc, ev, "tid"), 0);
	if (strpool_add(&k->names, name && *name ? name : "(unnamed range)", &r->name) < 0)
		return kfail(k, line, "out of memory");
	return 0;
}

static int event(struct kin *k, uint64_t line)
{
	const struct kj_node *ev = &k->doc.nodes[0];
	k->st.events++;
	if (ev->type != KJ_OBJ) {
		k->st.skipped++;
		return 0;
	}
	const char *ph = kj_text(&k->doc, kj_get(&k->doc, ev, "ph"));
	const char *cat = kj_text(&k->doc, kj_get(&k->doc, ev, "cat"));
	const char *name = kj_text(&k->doc, kj_get(&k->doc, ev, "name"));
	if (!ph) {
		k->st.skipped++;
		return 0;
	}
	if ((!strcmp(ph, "i") || !strcmp(ph, "I")) && name) {
		if (!strcmp(name, "[memory]"))
			return memory_event(k, ev, 0, line);
		if (!strcmp(name, "[OutOfMemory]"))
			return memory_event(k, ev, 1, line);
	}
	if (!strcmp(ph, "X") && cat) {
		if (!strcmp(cat, "kernel"))
			return gpu_event(k, ev, KR_KERNEL, name, line);
		if (!strcmp(cat, "gpu_memcpy"))
			return gpu_event(k, ev, KR_COPY, name, line);
		if (!strcmp(cat, "gpu_memset"))
			return gpu_event(k, ev, KR_SET, name, line);
		if (!strcmp(cat, "user_annotation") ||
		    (!strcmp(cat, "cpu_op") && profiler_step(name) >= 0))
			return range_event(k, ev, name, line);
	}
	k->st.skipped++;
	return 0;
}

/* ---------------------------------------------------------- metadata */

static void copy_text(const struct kin *k, const struct kj_node *n, char *out, size_t len)
{
	const char *s = kj_text(&k->doc, n);
	if (s && n->type == KJ_STR)
		snprintf(out, len, "%s", s);
	else if (s)
		snprintf(out, len, "%s", s);   /* a number, as written */
}

static void metadata(struct kin *k, const char *key)
{
	const struct kj_node *root = &k->doc.nodes[0];
	if (!strcmp(key, "deviceProperties")) {
		for (size_t i = 0; k->ndevs < KIN_MAX_DEVS; i++) {
			const struct kj_node *d = kj_at(&k->doc, root, i);
			if (!d)
				break;
			struct kin_dev *v = &k->devs[k->ndevs];
			memset(v, 0, sizeof *v);
			v->id = int_or(k, kj_get(&k->doc, d, "id"), (int64_t)i);
			copy_text(k, kj_get(&k->doc, d, "name"), v->name, sizeof v->name);
			v->mem = int_or(k, kj_get(&k->doc, d, "totalGlobalMem"), 0);
			v->major = int_or(k, kj_get(&k->doc, d, "computeMajor"), -1);
			v->minor = int_or(k, kj_get(&k->doc, d, "computeMinor"), -1);
			k->ndevs++;
		}
	} else if (!strcmp(key, "distributedInfo")) {
		copy_text(k, kj_get(&k->doc, root, "rank"), k->rank, sizeof k->rank);
		copy_text(k, kj_get(&k->doc, root, "world_size"), k->world, sizeof k->world);
	} else if (!strcmp(key, "torch_version") || !strcmp(key, "pytorch_version")) {
		copy_text(k, root, k->torch, sizeof k->torch);
	} else if (!strcmp(key, "cuda_runtime_version")) {
		int64_t v = int_or(k, root, -1);
		if (v > 0)
			snprintf(k->cuda, sizeof k->cuda, "%" PRId64 ".%" PRId64, v / 1000,
				 (v % 1000) / 10);
	} else if (!strcmp(key, "baseTimeNanoseconds")) {
		int64_t v = int_or(k, root, 0);
		k->base_ns = v > 0 ? v : 0;
	}
}

static int is_metadata_key(const char *key)
{
	static const char *const keys[] = {"deviceProperties", "distributedInfo", "torch_version",
					   "pytorch_version", "cuda_runtime_version",
					   "baseTimeNanoseconds"};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!strcmp(key, keys[i]))
			return 1;
	return 0;
}

/* --------------------------------------------------------------- parse */

static int events(struct kin *k)
{
	if (kj_expect(k->r, '[', "\"traceEvents\" is an array") < 0)
		return -1;
	k->have_events = 1;
	if (kj_peek(k->r) == ']')
		return kj_expect(k->r, ']', "the end of traceEvents");
	for (;;) {
		/* name the line the event starts on */
		if (kj_peek(k->r) == -2)
			return -1;
		uint64_t line = kj_line(k->r);
		if (kj_parse(k->r, &k->doc) < 0)
			return -1;
		if (event(k, line) < 0)
			return 1;   /* our message is in k->err */
		int m = kj_more(k->r, ']');
		if (m <= 0)
			return m;
	}
}

/* The whole file: 0, -1 with the reader's message, 1 with ours. */
static int parse(struct kin *k)
{
	int c = kj_peek(k->r);
	if (c == -2)
		return -1;
	if (c == -1) {
		kfail(k, 0, "empty file: not JSON (expected a Chrome trace from torch.profiler's "
		      "export_chrome_trace)");
		return 1;
	}
	if (c == '[') {
		/* the Chrome trace's array form: events only */
		int rc = events(k);
		if (rc)
			return rc;
	} else if (c == '{') {
		kj_expect(k->r, '{', "the top-level object");
		if (kj_peek(k->r) == '}') {
			kj_expect(k->r, '}', "the top-level object");
		} else {
			for (;;) {
				char key[64];
				if (kj_key(k->r, key, sizeof key) < 0)
					return -1;
				if (!strcmp(key, "traceEvents")) {
					int rc = events(k);
					if (rc)
						return rc;
				} else if (is_metadata_key(key)) {
					if (kj_parse(k->r, &k->doc) < 0)
						return -1;
					metadata(k, key);
				} else if (kj_skip(k->r) < 0) {
					return -1;
				}
				int m = kj_more(k->r, '}');
				if (m < 0)
					return -1;
				if (m == 0)
					break;
			}
		}
	} else {
		kfail(k, kj_line(k->r), "not JSON (a Chrome trace from torch.profiler starts with "
		      "'{')");
		return 1;
	}
	c = kj_peek(k->r);
	if (c == -2)
		return -1;
	if (c != -1) {
		kfail(k, kj_line(k->r), "bad JSON: more after the top-level value");
		return 1;
	}
	if (!k->have_events) {
		kfail(k, 0, "no \"traceEvents\": not a Chrome trace from torch.profiler "
		      "(prof.export_chrome_trace)");
		return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------- write */

/* Time order; at a tie ranges first (the outer, longer one first), then
 * file order: a total order, so the output never depends on qsort. */
static int kr_cmp(const void *a, const void *b)
{
	const struct kr *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	int cx = x->type != KR_RANGE, cy = y->type != KR_RANGE;
	if (cx != cy)
		return cx - cy;
	if (!cx && x->end != y->end)
		return x->end > y->end ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct before { uint64_t addr, bytes; };

/* Pass 1 over the device's memory events in time order: what was live
 * before the profile (frees of addresses it never allocated, and the rest of
 * "Total Allocated" before the first event), and the real peaks. */
static int find_before(struct kin *k, int64_t dev, struct before **out, size_t *nout,
		       uint64_t *rest)
{
	struct u64map live, seen;
	struct before *b = NULL;
	size_t nb = 0, capb = 0;
	int64_t prev_total = -1, prev_bytes = 0, first_total = -1, first_bytes = 0;
	uint64_t after = 0, before_sem = 0, sum = 0, dummy;
	int rc = -1;
	u64map_init(&live);
	u64map_init(&seen);
	for (size_t i = 0; i < k->n; i++) {
		const struct kr *r = &k->recs[i];
		if (r->type != KR_MEM || r->dev != dev)
			continue;
		if (r->total_alloc >= 0) {
			if (first_total < 0) {
				first_total = r->total_alloc;
				first_bytes = r->bytes;
			}
			if ((uint64_t)r->total_alloc > k->st.peak_allocated)
				k->st.peak_allocated = (uint64_t)r->total_alloc;
			/* is "Total Allocated" taken after the event or before it? */
			if (prev_total >= 0 && r->total_alloc == prev_total + r->bytes)
				after++;
			else if (prev_total >= 0 && r->total_alloc == prev_total + prev_bytes)
				before_sem++;
			prev_total = r->total_alloc;
			prev_bytes = r->bytes;
		}
		if (r->total_res >= 0 && (uint64_t)r->total_res > k->st.peak_reserved)
			k->st.peak_reserved = (uint64_t)r->total_res;
		if (r->addr == U64MAP_EMPTY)
			continue;
		if (r->bytes > 0) {
			if (u64map_put(&live, r->addr, 1) < 0)
				goto out;
		} else if (!u64map_del(&live, r->addr, NULL) && !u64map_get(&seen, r->addr, &dummy)) {
			if (u64map_put(&seen, r->addr, 1) < 0 ||
			    VEC_RESERVE(b, capb, nb + 1, 64) < 0)
				goto out;
			b[nb].addr = r->addr;
			b[nb].bytes = (uint64_t)-r->bytes;
			sum += b[nb].bytes;
			nb++;
		}
	}
	*rest = 0;
	if (first_total >= 0) {
		int64_t was = before_sem > after ? first_total : first_total - first_bytes;
		if (was > 0 && (uint64_t)was > sum)
			*rest = (uint64_t)was - sum;
	}
	*out = b;
	*nout = nb;
	b = NULL;
	rc = 0;
out:
	free(b);
	u64map_free(&live);
	u64map_free(&seen);
	return rc;
}

static int put_mem(struct trace_writer *w, enum trace_rec_type type, uint64_t t, uint64_t addr,
		   uint64_t bytes)
{
	struct trace_rec rec;
	memset(&rec, 0, sizeof rec);
	rec.type = type;
	rec.start = rec.end = t;
	rec.u.mem.addr = addr;
	rec.u.mem.bytes = bytes;
	rec.u.mem.stream = TRACE_NO_STREAM;
	rec.u.mem.kind = TMEM_DEVICE;
	rec.u.mem.source = TRACE_NO_STRING;
	return trace_writer_record(w, &rec);
}

struct open_range { uint64_t end; int64_t tid; };

static int write_all(struct kin *k, const char *out, int64_t dev, int64_t shift,
		     const struct trace_label *extra, size_t nextra)
{
	struct before *b = NULL;
	size_t nb = 0;
	uint64_t rest = 0;
	struct u64map live;
	struct open_range open[256];
	size_t nopen = 0;
	struct trace_writer *w = NULL;
	int rc = -1;
	u64map_init(&live);
	if (find_before(k, dev, &b, &nb, &rest) < 0) {
		kfail(k, 0, "out of memory");
		goto out;
	}

	/* header: the device's properties, the importer's labels, the user's */
	struct trace_header h;
	struct trace_label labels[48];
	char vals[8][64], cc[48];
	size_t nl = 0, nv = 0;
	memset(&h, 0, sizeof h);
	h.version = TRACE_FORMAT_VERSION;
	h.producer = "gpumemsim-import-kineto";
	h.producer_version = "1";
	for (size_t i = 0; i < k->ndevs; i++) {
		if (k->devs[i].id != dev)
			continue;
		if (k->devs[i].name[0])
			h.gpu = k->devs[i].name;
		if (k->devs[i].mem > 0)
			h.total_memory = (uint64_t)k->devs[i].mem;
		if (k->devs[i].major >= 0 && k->devs[i].minor >= 0) {
			snprintf(cc, sizeof cc, "%" PRId64 ".%" PRId64, k->devs[i].major,
				 k->devs[i].minor);
			h.compute_capability = cc;
		}
	}
	if (k->cuda[0])
		h.cuda = k->cuda;
	labels[nl++] = (struct trace_label){"source", "kineto"};
	if (k->torch[0])
		labels[nl++] = (struct trace_label){"torch", k->torch};
	if (k->rank[0])
		labels[nl++] = (struct trace_label){"rank", k->rank};
	if (k->world[0])
		labels[nl++] = (struct trace_label){"world_size", k->world};
	if (k->st.peak_allocated) {
		snprintf(vals[nv], sizeof vals[nv], "%" PRIu64, k->st.peak_allocated);
		labels[nl++] = (struct trace_label){"kineto_peak_allocated", vals[nv++]};
	}
	if (k->st.peak_reserved) {
		snprintf(vals[nv], sizeof vals[nv], "%" PRIu64, k->st.peak_reserved);
		labels[nl++] = (struct trace_label){"kineto_peak_reserved", vals[nv++]};
	}
	uint64_t before_bytes = rest;
	for (size_t i = 0; i < nb; i++)
		before_bytes += b[i].bytes;
	if (before_bytes) {
		snprintf(vals[nv], sizeof vals[nv], "%" PRIu64, before_bytes);
		labels[nl++] = (struct trace_label){"kineto_before_profile", vals[nv++]};
	}
	nl = trace_labels_override(labels, nl, sizeof labels / sizeof labels[0], extra, nextra);
	h.labels = labels;
	h.nlabels = nl;

	w = trace_writer_open(out, TRACE_W_ATOMIC, k->err, k->errlen);
	if (!w)
		goto out;
	if (trace_writer_header(w, &h) < 0)
		goto werr;

	/* the first kept record's time: memory live before the profile is
	 * allocated there */
	uint64_t t0 = 0;
	int have_t0 = 0;
	for (size_t i = 0; i < k->n && !have_t0; i++) {
		const struct kr *r = &k->recs[i];
		if (r->dev == dev || (r->dev < 0 && r->type != KR_MEM)) {
			t0 = (uint64_t)(r->start + shift);
			have_t0 = 1;
		}
	}
	for (size_t i = 0; i <= nb; i++) {
		uint64_t addr = i < nb ? b[i].addr : KINETO_BEFORE_ADDR;
		uint64_t bytes = i < nb ? b[i].bytes : rest;
		if (!bytes)
			continue;
		if (u64map_put(&live, addr, bytes) < 0) {
			kfail(k, 0, "out of memory");
			goto abort;
		}
		if (put_mem(w, TREC_ALLOC, t0, addr, bytes) < 0)
			goto werr;
		k->st.allocs++;
		k->st.before_allocs++;
		k->st.before_bytes += bytes;
	}

	for (size_t i = 0; i < k->n; i++) {
		const struct kr *r = &k->recs[i];
		if (r->dev >= 0 && r->dev != dev) {
			k->st.other_device++;
			continue;
		}
		struct trace_rec rec;
		uint64_t t = (uint64_t)(r->start + shift);
		memset(&rec, 0, sizeof rec);
		rec.start = t;
		rec.end = (uint64_t)(r->end + shift);
		switch (r->type) {
		case KR_MEM: {
			uint64_t was;
			k->st.mem_events++;
			if (r->bytes > 0) {
				if (u64map_del(&live, r->addr, &was)) {
					/* a free the profile lost: free first */
					k->st.relive++;
					if (put_mem(w, TREC_FREE, t, r->addr, was) < 0)
						goto werr;
					k->st.frees++;
				}
				if (u64map_put(&live, r->addr, (uint64_t)r->bytes) < 0) {
					kfail(k, 0, "out of memory");
					goto abort;
				}
				if (put_mem(w, TREC_ALLOC, t, r->addr, (uint64_t)r->bytes) < 0)
					goto werr;
				k->st.allocs++;
			} else if (u64map_del(&live, r->addr, &was)) {
				if (put_mem(w, TREC_FREE, t, r->addr, was) < 0)
					goto werr;
				k->st.frees++;
			} else {
				k->st.skipped++;   /* a second free of a never-allocated address */
			}
			continue;
		}
		case KR_OOM:
			rec.type = TREC_CONTROL;
			rec.end = rec.start;
			rec.u.control.kind = TCTL_OOM;
			rec.u.control.bytes = (uint64_t)r->bytes;
			k->st.ooms++;
			break;
		case KR_KERNEL:
			rec.type = TREC_KERNEL;
			rec.u.kernel.stream = r->stream;
			rec.u.kernel.name = trace_writer_intern(w, strpool_str(&k->names, r->name));
			memcpy(rec.u.kernel.grid, r->grid, sizeof r->grid);
			memcpy(rec.u.kernel.block, r->block, sizeof r->block);
			rec.u.kernel.regs = r->regs;
			rec.u.kernel.smem = r->smem;
			rec.u.kernel.corr = r->corr;
			k->st.kernels++;
			break;
		case KR_COPY:
		case KR_SET:
			rec.type = r->type == KR_COPY ? TREC_MEMCPY : TREC_MEMSET;
			rec.u.copy.stream = r->stream;
			rec.u.copy.kind = r->kind;
			rec.u.copy.bytes = (uint64_t)r->bytes;
			rec.u.copy.corr = r->corr;
			if (r->type == KR_COPY)
				k->st.memcpys++;
			else
				k->st.memsets++;
			break;
		case KR_RANGE: {
			/* depth: the ranges of its thread still open at its start */
			size_t j = 0, depth = 0;
			while (j < nopen) {
				if (open[j].end <= t)
					open[j] = open[--nopen];
				else
					depth += open[j++].tid == r->tid;
			}
			if (nopen < sizeof open / sizeof open[0])
				open[nopen++] = (struct open_range){rec.end, r->tid};
			rec.type = TREC_RANGE;
			rec.u.range.name = trace_writer_intern(w, strpool_str(&k->names, r->name));
			rec.u.range.depth = (uint32_t)depth;
			k->st.ranges++;
			break;
		}
		}
		if (trace_writer_record(w, &rec) < 0)
			goto werr;
	}
	if (trace_writer_close(&w, 1, 0, k->err, k->errlen) < 0)
		goto out;
	rc = 0;
	goto out;
werr:
	/* close reports the writer's sticky message, then the file goes */
	if (trace_writer_close(&w, 0, 0, k->err, k->errlen) == 0) {
		remove(out);
		kfail(k, 0, "writing %s failed", out);
	}
	goto out;
abort:
	trace_writer_abort(w);
	w = NULL;
out:
	free(b);
	u64map_free(&live);
	return rc;
}

int import_kineto(const char *in, const char *out, const struct trace_label *extra,
		  size_t nextra, struct import_kineto_stats *stats, char *err, size_t errlen)
{
	struct kin k;
	int rc = -1;
	memset(&k, 0, sizeof k);
	k.in = in;
	k.err = err;
	k.errlen = errlen;
	err[0] = '\0';
	strpool_init(&k.names);
	u64map_init(&k.steps_seen);
	k.r = kj_open(in, err, errlen);
	if (!k.r)
		goto out;
	int p = parse(&k);
	if (p < 0)
		snprintf(err, errlen, "%s", kj_error(k.r));
	if (p)
		goto out;

	/* the device: the lowest CUDA Device Id among the memory events */
	int64_t dev = -1;
	uint64_t nmem = 0;
	for (size_t i = 0; i < k.n; i++)
		if (k.recs[i].type == KR_MEM) {
			nmem++;
			if (dev < 0 || k.recs[i].dev < dev)
				dev = k.recs[i].dev;
		}
	if (!nmem) {
		char cpu[96] = "";
		if (k.st.cpu_mem_events)
			snprintf(cpu, sizeof cpu, " (only %" PRIu64 " CPU memory events)",
				 k.st.cpu_mem_events);
		kfail(&k, 0, "the profile has no CUDA memory events%s: record it with "
		      "torch.profiler.profile(profile_memory=True, activities=[ProfilerActivity.CPU, "
		      "ProfilerActivity.CUDA])", cpu);
		goto out;
	}
	k.st.device = dev;

	/* times: Kineto's are relative to baseTimeNanoseconds; make them
	 * absolute, and never negative */
	int64_t min = INT64_MAX, max = INT64_MIN;
	for (size_t i = 0; i < k.n; i++) {
		if (k.recs[i].start < min)
			min = k.recs[i].start;
		if (k.recs[i].end > max)
			max = k.recs[i].end;
	}
	int64_t shift = k.base_ns;
	if (max > 0 && shift > INT64_MAX - max)
		shift = 0;
	if (min + shift < 0)
		shift = -min;
	qsort(k.recs, k.n, sizeof *k.recs, kr_cmp);
	if (write_all(&k, out, dev, shift, extra, nextra) < 0)
		goto out;
	if (stats)
		*stats = k.st;
	rc = 0;
out:
	kj_close(k.r);
	kj_doc_free(&k.doc);
	free(k.recs);
	strpool_free(&k.names);
	u64map_free(&k.steps_seen);
	return rc;
}
