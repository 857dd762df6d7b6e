/*
 * inject.c: the CUPTI injection library (build/libgpumemsim_capture.so).
 *
 * The CUDA driver loads it at cuInit when CUDA_INJECTION64_PATH names it and
 * calls InitializeInjection(); NVTX loads the same file through
 * NVTX_INJECTION64_PATH and calls InitializeInjectionNvtx2(). It records the
 * process's GPU activity into one trace (traces/trace.h writer):
 *  - activity records (kernels, copies, memsets, synchronisations, memory
 *    alloc/free, selected host API calls, NVTX ranges) arrive in CUPTI
 *    buffers on CUPTI's threads, out of order; each buffer is converted to
 *    neutral records (capture/convert.h) and queued;
 *  - a writer thread wakes every GPUMEMSIM_CAPTURE_FLUSH_MS, asks CUPTI for
 *    completed records and writes, in time order, everything older than
 *    GPUMEMSIM_CAPTURE_LAG_MS before that moment (the watermark), so memory
 *    stays bounded and a crash leaves a readable trace up to the last flush;
 *  - launch callbacks scan each kernel's parameter words for pointers into
 *    live allocations (kernel-to-buffer links); allocation callbacks keep
 *    that set of live allocations.
 * It makes no CUDA call that synchronises; it never changes the program's
 * output or exit status. If CUPTI cannot start (another profiler holds it),
 * it says so once on stderr and the program runs untraced.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cupti.h>

#include "../base/version.h"
#include "../base/u64map.h"
#include "../base/vec.h"
#include "../traces/trace.h"
#include "convert.h"

#define CAP_BUF_SIZE (8u << 20)
#define CAP_BUF_POOL 16
#define CAP_MAX_PARAMS 1024
#define CAP_LINKS_PER_LAUNCH TRACE_MAX_LINKS

/* Declared here: cupti.h in 13.0 does not, libcupti exports it. */
CUptiResult cuptiNvtxInitialize2(void *pfnGetExportTable);

/* ------------------------------------------------------------- state */

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;    /* conv + writer */
static pthread_mutex_t cap_live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cap_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct trace_writer *cap_writer;
static struct cap_conv *cap_conv;
static atomic_int cap_header_done;
static char cap_path[4096];
static char cap_report[4096];
static pid_t cap_pid;
static int cap_links_on = 1;
/* How host API calls are timed (GPUMEMSIM_CAPTURE_API). CALLBACKS: only the
 * calls the trace keeps (cap_api_name) get a callback, which reads CUPTI's
 * clock on entry and exit; the program's other calls (cudaGetDevice, stream
 * queries: about ten per PyTorch op) cost nothing. ACTIVITY: CUPTI's RUNTIME
 * and DRIVER activity kinds, which record every call of the process and
 * slow each one down; kept to compare against. OFF: no API records. */
enum cap_api_mode { CAP_API_OFF, CAP_API_CALLBACKS, CAP_API_ACTIVITY };
static enum cap_api_mode cap_api_mode = CAP_API_CALLBACKS;
static int cap_source_on = 1;           /* GPUMEMSIM_CAPTURE_SOURCE */
/* Synchronisations (`y`) from callbacks on the sync calls rather than
 * CUPTI's SYNCHRONIZATION activity kind, which slowed a ResNet-50 b32
 * step by x1.27 on its own (capture/README.md). GPUMEMSIM_CAPTURE_SYNCS
 * (`capture --syncs`) chooses. The default stays the activity kind: with
 * callbacks instead, CUPTI did not deliver the MEMORY2 record of a JAX
 * program's first BFC region (2 runs of 2 on the H200; capture/README.md),
 * and the callbacks were not measurably cheaper (x1.17 vs x1.23, runs
 * overlapping). */
#define CAP_SYNCS_CALLBACKS_DEFAULT 0
static int cap_sync_cb;
/* The trace file is claimed and opened when the first record of real work
 * (a kernel, copy, memset or non-static allocation) is pushed: a process
 * that only initialises CUDA (torch.compile's workers query the device)
 * leaves no file. */
static atomic_int cap_has_work;
static int cap_open_failed;
static atomic_ullong cap_stale_layouts;  /* see cap_params_forget */
static unsigned cap_record_bits = CAP_REC_ALL;   /* GPUMEMSIM_CAPTURE_RECORD */
static unsigned cap_flush_ms = 500, cap_lag_ms = 2000;
#define CAP_LAG_MAX_MS 32000u        /* the reorder window grows to this */
static uint64_t cap_late_seen;       /* late records when the window last grew */
static int cap_verbose;
static int cap_debug;   /* GPUMEMSIM_CAPTURE_DEBUG: module events and statics on stderr */
static atomic_int cap_debug_lines;
static CUpti_SubscriberHandle cap_subscriber;
static atomic_int cap_active, cap_finalized;
static atomic_ullong cap_dropped, cap_zero_time, cap_pool_records, cap_oom;
static uint64_t cap_last_ts;      /* latest timestamp seen, for open ranges */

/* Writer thread and its wake-ups (sem_post is async-signal-safe). */
static pthread_t cap_thread;
static int cap_thread_started;
static sem_t cap_wake, cap_done;
static volatile sig_atomic_t cap_req_stop, cap_req_flush, cap_req_final;

/* Activity buffer pool: reuse instead of malloc per buffer. */
static void *cap_pool[CAP_BUF_POOL];
static int cap_npool;

/* API names worth a 'p' record, by domain and callback id. */
static const char *cap_rt_names[CUPTI_RUNTIME_TRACE_CBID_SIZE];
static const char *cap_drv_names[CUPTI_DRIVER_TRACE_CBID_SIZE];

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
struct cap_params { uint32_t n; uint32_t size[]; };
static struct u64map cap_param_cache, cap_stub_cache;
static struct u64map cap_param_grave;   /* handle -> params before the last unload */
static void **cap_grave;                /* every params struct ever made, freed at exit */
static size_t cap_ngrave, cap_capgrave;
static pthread_mutex_t cap_param_lock = PTHREAD_MUTEX_INITIALIZER;
typedef int (*cap_get_func_fn)(void **func, const void *symbol);
static cap_get_func_fn cap_get_func_by_symbol;
static pthread_once_t cap_cudart_once = PTHREAD_ONCE_INIT;

/* Open NVTX ranges (START seen, END not yet). */
struct cap_open_range { uint32_t id; uint32_t thread; uint32_t depth; uint64_t start; char *name; };
static struct cap_open_range *cap_ranges;
static size_t cap_nranges, cap_capranges;

/* Nesting of tracked runtime calls on this thread: driver calls made inside
 * them are the runtime's own and must not be counted twice. */
static __thread int cap_in_runtime;

static struct sigaction cap_old_int, cap_old_term;

/* ------------------------------------------------------------- sink */

/* The converter writes through these into the trace, which is opened only
 * once the process has done CUDA work (cap_open_trace), so CTX is unused:
 * emission never happens before the writer exists. */
static uint32_t sink_intern(void *ctx, const char *s)
{
	(void)ctx;
	return trace_writer_intern(cap_writer, s);
}

static int sink_record(void *ctx, const struct trace_rec *rec)
{
	(void)ctx;
	return trace_writer_record(cap_writer, rec);
}

/* ------------------------------------------------------------- header */

static char *cap_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *cap_strdup_printf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return strdup(buf);
}

/* The NVIDIA kernel module's version ("580.159.04"): the first word of
 * /proc/driver/nvidia/version that looks like N.N[.N]; NULL if none. */
static char *cap_driver_version(void)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	char line[512], *save = NULL, *res = NULL;
	if (!f)
		return NULL;
	if (fgets(line, sizeof(line), f)) {
		for (char *w = strtok_r(line, " \t\n", &save); w && !res; w = strtok_r(NULL, " \t\n", &save)) {
			size_t digits = strspn(w, "0123456789."), dots = 0;
			for (char *p = w; *p; p++)
				dots += *p == '.';
			if (digits == strlen(w) && dots >= 1 && w[0] != '.')
				res = strdup(w);
		}
	}
	fclose(f);
	return res;
}

/* cuDNN's version if the program has loaded it: never load it ourselves, a
 * second cuDNN in the process could replace the one the program ships. */
static char *cap_cudnn_version(void)
{
	static const char *names[] = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so", NULL};
	for (int i = 0; names[i]; i++) {
		void *h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		size_t (*fn)(void) = (size_t (*)(void))dlsym(h, "cudnnGetVersion");
		char *res = fn ? cap_strdup_printf("%zu", fn()) : NULL;
		dlclose(h);
		if (res)
			return res;
	}
	return strdup("not loaded");
}

/* The command line from /proc/self/cmdline, arguments joined by spaces. */
static char *cap_command_line(void)
{
	char buf[4096];
	int fd = open("/proc/self/cmdline", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return strdup("unknown");
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0' || buf[i] == '\n' || buf[i] == '\r')
			buf[i] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		n--;
	buf[n] = '\0';
	return strdup(buf);
}

/* Write the header once, before the first record: written late (not at
 * cuInit) because CUDA calls are not allowed inside InitializeInjection.
 * Returns 0 when written; -1 while the driver cannot answer yet and FORCE
 * is 0 (records wait until it can). The driver is asked without cap_lock
 * held (CUPTI may deliver buffers on this thread); the write takes it. */
static int cap_write_header(int force)
{
	struct trace_header h;
	char name[256] = "unknown";
	CUdevice dev;
	int major = 0, minor = 0, drv = 0, rc = 0;
	size_t total = 0;
	uint32_t cupti_ver = 0;
	struct trace_label labels[64];
	char *labtext = NULL;

	if (atomic_load(&cap_header_done))
		return 0;
	memset(&h, 0, sizeof(h));
	if (cuDeviceGet(&dev, 0) == CUDA_SUCCESS) {
		cuDeviceGetName(name, sizeof(name), dev);
		cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
		cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
		cuDeviceTotalMem(&total, dev);
	} else if (!force) {
		return -1;
	}
	cuDriverGetVersion(&drv);
	cuptiGetVersion(&cupti_ver);
	h.version = TRACE_FORMAT_VERSION;
	h.producer = "gpumemsim-capture";
	h.producer_version = GPUMEMSIM_VERSION;
	h.gpu = name;
	h.compute_capability = cap_strdup_printf("%d.%d", major, minor);
	h.total_memory = total;
	h.driver = cap_driver_version();
	if (!h.driver)
		h.driver = strdup("unknown");
	h.cuda = cap_strdup_printf("%d.%d", drv / 1000, (drv % 1000) / 10);
	h.cupti = cap_strdup_printf("%u", cupti_ver);
	h.cudnn = cap_cudnn_version();
	h.command = cap_command_line();
	const char *env = getenv("GPUMEMSIM_CAPTURE_LABELS");
	if (env && *env && (labtext = strdup(env))) {
		char *save = NULL;
		for (char *l = strtok_r(labtext, "\n", &save); l && h.nlabels < 64;
		     l = strtok_r(NULL, "\n", &save)) {
			char *eq = strchr(l, '=');
			if (!eq || eq == l)
				continue;
			*eq = '\0';
			labels[h.nlabels].key = l;
			labels[h.nlabels].value = eq + 1;
			h.nlabels++;
		}
	}
	/* How this trace was recorded: what its host times include. The
	 * writer only reads the strings (trace_label's are not const). */
	static char k_api[] = "capture_api", k_links[] = "capture_links",
		    k_source[] = "capture_source", k_record[] = "capture_record",
		    k_syncs[] = "capture_syncs", k_proc[] = "capture_process",
		    k_pid[] = "capture_pid", k_ppid[] = "capture_ppid";
	static char v_api[3][10] = {"off", "callbacks", "activity"}, v_on[] = "on", v_off[] = "off";
	static char v_syncs[2][10] = {"activity", "callbacks"};
	/* Which process of the program this is: the launcher's direct child
	 * (root) or one it started (torch.compile workers, data loaders). */
	static char v_proc[8], v_pid[16], v_ppid[16];
	const char *root = getenv("GPUMEMSIM_CAPTURE_ROOT_PID");
	snprintf(v_proc, sizeof(v_proc), "%s",
		 !root ? "unknown" : atoi(root) == (int)getpid() ? "root" : "child");
	snprintf(v_pid, sizeof(v_pid), "%d", (int)getpid());
	snprintf(v_ppid, sizeof(v_ppid), "%d", (int)getppid());
	char v_record[64] = "all";
	const char *rec_env = getenv("GPUMEMSIM_CAPTURE_RECORD");
	if (cap_record_bits != CAP_REC_ALL && rec_env)
		snprintf(v_record, sizeof(v_record), "%s", rec_env);
	const struct trace_label settings[] = {
		{k_api, v_api[cap_api_mode]},
		{k_links, cap_links_on ? v_on : v_off},
		{k_source, cap_source_on ? v_on : v_off},
		{k_record, v_record},
		{k_syncs, v_syncs[cap_sync_cb ? 1 : 0]},
		{k_proc, v_proc},
		{k_pid, v_pid},
		{k_ppid, v_ppid},
	};
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]) && h.nlabels < 64; i++)
		labels[h.nlabels++] = settings[i];
	h.labels = labels;
	pthread_mutex_lock(&cap_lock);
	if (cap_writer && !atomic_load(&cap_header_done)) {
		if (trace_writer_header(cap_writer, &h) < 0) {
			fprintf(stderr, "gpumemsim capture: cannot write the header of %s\n", cap_path);
			rc = -1;
		}
		atomic_store(&cap_header_done, 1);
	}
	pthread_mutex_unlock(&cap_lock);
	free(h.compute_capability);
	free(h.driver);
	free(h.cuda);
	free(h.cupti);
	free(h.cudnn);
	free(h.command);
	free(labtext);
	return rc;
}

/* ------------------------------------------------------------- activity */

static void CUPTIAPI cap_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	void *b = NULL;
	pthread_mutex_lock(&cap_pool_lock);
	if (cap_npool)
		b = cap_pool[--cap_npool];
	pthread_mutex_unlock(&cap_pool_lock);
	if (!b)
		b = aligned_alloc(8, CAP_BUF_SIZE);
	*buffer = b;
	*size = b ? CAP_BUF_SIZE : 0;
	*max_records = 0;
}

static void cap_buffer_release(void *b)
{
	pthread_mutex_lock(&cap_pool_lock);
	if (cap_npool < CAP_BUF_POOL) {
		cap_pool[cap_npool++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&cap_pool_lock);
	free(b);
}

static uint32_t cap_stream(uint32_t s)
{
	return s == 0xffffffffu ? TRACE_NO_STREAM : s;
}

static void cap_push(const struct cap_rec *r)
{
	if (r->rec.start > cap_last_ts)
		cap_last_ts = r->rec.start;
	if (r->rec.end > cap_last_ts)
		cap_last_ts = r->rec.end;
	if (cap_conv_push(cap_conv, r) < 0)
		atomic_fetch_add(&cap_oom, 1);
}

static uint32_t cap_copy_kind(uint8_t k)
{
	switch (k) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return TCOPY_HTOD;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return TCOPY_DTOH;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return TCOPY_DTOD;
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return TCOPY_HTOH;
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return TCOPY_PTOP;
	default: return TCOPY_UNKNOWN;
	}
}

static uint32_t cap_sync_kind(uint32_t t)
{
	switch (t) {
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return TSYNC_EVENT;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return TSYNC_STREAM_WAIT_EVENT;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return TSYNC_STREAM;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return TSYNC_CONTEXT;
	default: return TSYNC_UNKNOWN;
	}
}

/* A MARKER record: START opens a range, END closes the one with its id.
 * Depth is how many ranges are open on the same thread at the start. */
static void cap_marker(const CUpti_ActivityMarker2 *m)
{
	uint32_t thread = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		if (VEC_RESERVE(cap_ranges, cap_capranges, cap_nranges + 1, 64) < 0) {
			atomic_fetch_add(&cap_oom, 1);
			return;
		}
		uint32_t depth = 0;
		for (size_t i = 0; i < cap_nranges; i++)
			depth += cap_ranges[i].thread == thread;
		struct cap_open_range *r = &cap_ranges[cap_nranges++];
		r->id = m->id;
		r->thread = thread;
		r->depth = depth;
		r->start = m->timestamp;
		r->name = strdup(m->name ? m->name : "");
	} else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		for (size_t i = cap_nranges; i-- > 0;) {
			if (cap_ranges[i].id != m->id)
				continue;
			struct cap_rec c;
			memset(&c, 0, sizeof(c));
			c.rec.type = TREC_RANGE;
			c.rec.start = cap_ranges[i].start;
			c.rec.end = m->timestamp;
			c.rec.u.range.depth = cap_ranges[i].depth;
			c.name = cap_ranges[i].name;
			cap_push(&c);
			free(cap_ranges[i].name);
			memmove(&cap_ranges[i], &cap_ranges[i + 1], (cap_nranges - i - 1) * sizeof(*cap_ranges));
			cap_nranges--;
			break;
		}
	}
}

/* Convert one activity record; called with cap_lock held. */
static void cap_activity(const CUpti_Activity *a)
{
	struct cap_rec c;
	memset(&c, 0, sizeof(c));
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)a;
		if (k->start == 0 && k->end == 0) {
			atomic_fetch_add(&cap_zero_time, 1);
			return;
		}
		c.rec.type = TREC_KERNEL;
		c.rec.start = k->start;
		c.rec.end = k->end;
		c.rec.u.kernel.stream = k->streamId;
		c.rec.u.kernel.grid[0] = (uint32_t)k->gridX;
		c.rec.u.kernel.grid[1] = (uint32_t)k->gridY;
		c.rec.u.kernel.grid[2] = (uint32_t)k->gridZ;
		c.rec.u.kernel.block[0] = (uint32_t)k->blockX;
		c.rec.u.kernel.block[1] = (uint32_t)k->blockY;
		c.rec.u.kernel.block[2] = (uint32_t)k->blockZ;
		c.rec.u.kernel.regs = k->registersPerThread;
		c.rec.u.kernel.smem = (uint32_t)k->staticSharedMemory + (uint32_t)k->dynamicSharedMemory;
		c.rec.u.kernel.corr = k->correlationId;
		c.rec.u.kernel.graph = k->graphId;
		c.rec.u.kernel.graph_node = k->graphNodeId;
		c.name = k->name ? k->name : "unknown";
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)a;
		if (m->start == 0 && m->end == 0) {
			atomic_fetch_add(&cap_zero_time, 1);
			return;
		}
		c.rec.type = TREC_MEMCPY;
		c.rec.start = m->start;
		c.rec.end = m->end;
		c.rec.u.copy.stream = m->streamId;
		c.rec.u.copy.kind = cap_copy_kind(m->copyKind);
		c.rec.u.copy.bytes = m->bytes;
		c.rec.u.copy.corr = m->correlationId;
		c.rec.u.copy.graph = m->graphId;
		c.rec.u.copy.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)a;
		if (m->start == 0 && m->end == 0) {
			atomic_fetch_add(&cap_zero_time, 1);
			return;
		}
		c.rec.type = TREC_MEMSET;
		c.rec.start = m->start;
		c.rec.end = m->end;
		c.rec.u.copy.stream = m->streamId;
		c.rec.u.copy.bytes = m->bytes;
		c.rec.u.copy.corr = m->correlationId;
		c.rec.u.copy.graph = m->graphId;
		c.rec.u.copy.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const void *)a;
		c.rec.type = TREC_SYNC;
		c.rec.start = s->start;
		c.rec.end = s->end;
		c.rec.u.sync.kind = cap_sync_kind(s->type);
		c.rec.u.sync.stream = c.rec.u.sync.kind == TSYNC_CONTEXT ? TRACE_NO_STREAM
									: cap_stream(s->streamId);
		c.rec.u.sync.corr = s->correlationId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY2: {
		const CUpti_ActivityMemory4 *m = (const void *)a;
		c.rec.type = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
				     ? TREC_ALLOC : TREC_FREE;
		if (m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
		    m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
			return;
		c.rec.start = c.rec.end = m->timestamp;
		c.rec.u.mem.addr = m->address;
		c.rec.u.mem.bytes = m->bytes;
		c.rec.u.mem.stream = cap_stream(m->streamId);
		c.rec.u.mem.kind = (uint32_t)m->memoryKind;
		c.rec.u.mem.flags = (m->isAsync ? TMEM_F_ASYNC : 0) |
				    (m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID
					     ? TMEM_F_POOL : 0) |
				    (m->memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED
					     ? TMEM_F_IMPORTED : 0);
		c.rec.u.mem.corr = m->correlationId;
		c.ctx = m->contextId;
		c.name = m->source;
		if (cap_debug && (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC ||
				  m->bytes >= (16u << 20)) &&
		    atomic_fetch_add(&cap_debug_lines, 1) < 200)
			fprintf(stderr, "gpumemsim capture debug: memory kind %u %s ctx %u corr %u t %llu "
					"addr 0x%llx bytes %llu name %s\n", (unsigned)m->memoryKind,
				c.rec.type == TREC_ALLOC ? "alloc" : "free", m->contextId, m->correlationId, (unsigned long long)m->timestamp,
				(unsigned long long)m->address, (unsigned long long)m->bytes,
				m->name ? m->name : "-");
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
		atomic_fetch_add(&cap_pool_records, 1);
		return;
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *p = (const void *)a;
		const char *name = NULL;
		if (a->kind == CUPTI_ACTIVITY_KIND_RUNTIME && p->cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
			name = cap_rt_names[p->cbid];
		else if (a->kind == CUPTI_ACTIVITY_KIND_DRIVER && p->cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
			name = cap_drv_names[p->cbid];
		if (!name)
			return;
		c.rec.type = TREC_API;
		c.rec.start = p->start;
		c.rec.end = p->end;
		c.rec.u.api.corr = p->correlationId;
		c.name = name;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MARKER:
		cap_marker((const void *)a);
		return;
	default:
		return;
	}
	if (c.rec.type == TREC_KERNEL || c.rec.type == TREC_MEMCPY || c.rec.type == TREC_MEMSET ||
	    (c.rec.type == TREC_ALLOC && c.rec.u.mem.kind != TMEM_DEVICE_STATIC &&
	     c.rec.u.mem.kind != TMEM_MANAGED_STATIC))
		atomic_store(&cap_has_work, 1);
	cap_push(&c);
}

static void CUPTIAPI cap_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
					  size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;
	pthread_mutex_lock(&cap_lock);
	if (cap_conv && !cap_open_failed)
		while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
			cap_activity(rec);
	pthread_mutex_unlock(&cap_lock);
	if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&cap_dropped, dropped);
	(void)size;
	cap_buffer_release(buffer);
}

/* ------------------------------------------------------------- links */

static void cap_live_insert(uint64_t base, uint64_t size, uint64_t corr)
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

static void cap_live_remove(uint64_t base)
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
static const struct cap_params *cap_param_info(void *handle, int is_kernel);
static const struct cap_params *cap_stub_params(const void *func)
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
static const struct cap_params *cap_param_info(void *handle, int is_kernel)
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
static void cap_params_forget(void)
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
static void cap_stage_drain(void)
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

/* A module loaded or is about to unload (CUPTI resource callback, on the
 * thread that called the driver). The converter frees the module's
 * globals at the unload (convert.h); the parameter caches forget every
 * handle, which may name another function from now on. */
static void cap_module_stage(enum cap_module_op op, uint32_t ctx, uint32_t module, uint64_t t);
static void cap_module_event(CUpti_CallbackId id, const CUpti_ResourceData *rd)
{
	const CUpti_ModuleResourceData *md = rd ? rd->resourceDescriptor : NULL;
	uint32_t ctx = 0;
	if (!md)
		return;
	if (id == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)
		cap_params_forget();
	if (!(cap_record_bits & CAP_REC_MEMORY))
		return;
	if (rd->context)
		cuptiGetContextId(rd->context, &ctx);
	uint64_t t = 0;
	cuptiGetTimestamp(&t);
	if (cap_debug && atomic_fetch_add(&cap_debug_lines, 1) < 200)
		fprintf(stderr, "gpumemsim capture debug: module %s ctx %u id %u t %llu\n",
			id == CUPTI_CBID_RESOURCE_MODULE_LOADED ? "loaded" : "unloading", ctx,
			md->moduleId, (unsigned long long)t);
	cap_module_stage(id == CUPTI_CBID_RESOURCE_MODULE_LOADED ? CAP_MODULE_LOADED
								  : CAP_MODULE_UNLOADING,
			 ctx, md->moduleId, t);
}

/* Stage a module event for the converter (cap_stage_drain hands it on). */
static void cap_module_stage(enum cap_module_op op, uint32_t ctx, uint32_t module, uint64_t t)
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
static void cap_api_stage_push(const struct cap_rec *r)
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

/* CUPTI's id of a stream handle as a sync call passed it (the legacy and
 * per-thread default streams have special handles). */
static uint32_t cap_stream_of(const CUpti_CallbackData *cb, CUstream h, int ptsz)
{
	uint32_t id = 0;
	if (h == CU_STREAM_LEGACY)
		h = NULL;
	else if (h == CU_STREAM_PER_THREAD)
		h = NULL, ptsz = 1;
	if (cuptiGetStreamIdEx(cb->context, h, (uint8_t)ptsz, &id) != CUPTI_SUCCESS)
		return TRACE_NO_STREAM;
	return id;
}

/* The sync calls (cap_sync_cb) and the `y` record each makes. The stream
 * of a stream sync or wait is the first parameter of every one of them. */
static const struct cap_sync_call {
	CUpti_CallbackDomain dom;
	CUpti_CallbackId id;
	uint8_t kind;   /* TSYNC_* */
	uint8_t ptsz;   /* per-thread default stream variant */
} cap_sync_calls[] = {
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, TSYNC_CONTEXT, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020, TSYNC_CONTEXT, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, TSYNC_EVENT, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, TSYNC_STREAM, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, TSYNC_STREAM, 1},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
	 TSYNC_STREAM_WAIT_EVENT, 0},
	{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000,
	 TSYNC_STREAM_WAIT_EVENT, 1},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, TSYNC_CONTEXT, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, TSYNC_CONTEXT, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, TSYNC_EVENT, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, TSYNC_STREAM, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, TSYNC_STREAM, 1},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, TSYNC_STREAM_WAIT_EVENT, 0},
	{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz,
	 TSYNC_STREAM_WAIT_EVENT, 1},
};

/* 1 and the `y` record's kind and stream in *Y when (DOM, ID) is a sync
 * call; 0 otherwise. */
static int cap_sync_of(CUpti_CallbackDomain dom, CUpti_CallbackId id, const CUpti_CallbackData *cb,
		       struct trace_sync *y)
{
	for (size_t i = 0; i < sizeof(cap_sync_calls) / sizeof(cap_sync_calls[0]); i++) {
		const struct cap_sync_call *c = &cap_sync_calls[i];
		if (c->dom != dom || c->id != id)
			continue;
		y->kind = c->kind;
		y->corr = cb->correlationId;
		y->stream = TRACE_NO_STREAM;
		if ((c->kind == TSYNC_STREAM || c->kind == TSYNC_STREAM_WAIT_EVENT) && cb->functionParams)
			y->stream = cap_stream_of(cb, *(const CUstream *)cb->functionParams, c->ptsz);
		return 1;
	}
	return 0;
}

/* Time one call in its callbacks: CUPTI's clock on entry, stored in the
 * call's correlationData, and on exit, when its records are staged: the
 * `p` record of a kept call (CAP_API_CALLBACKS) and the `y` record of a
 * sync call (cap_sync_cb). Called after the entry work and before the exit
 * work of the link callbacks, so their scanning is not counted as the
 * call's time. NAME: the kept name of the call, NULL if not kept. */
static void cap_api_time(CUpti_CallbackDomain dom, CUpti_CallbackId id, const CUpti_CallbackData *cb,
			 int enter, const char *name)
{
	struct cap_rec r;
	int api = cap_api_mode == CAP_API_CALLBACKS && name;
	memset(&r, 0, sizeof(r));
	int sync = cap_sync_cb && cap_sync_of(dom, id, cb, &r.rec.u.sync);
	if ((!api && !sync) || !cb->correlationData)
		return;
	uint64_t now = 0;
	cuptiGetTimestamp(&now);
	if (enter) {
		*cb->correlationData = now;
		return;
	}
	r.rec.start = *cb->correlationData ? *cb->correlationData : now;
	r.rec.end = now;
	if (sync) {
		r.rec.type = TREC_SYNC;
		cap_api_stage_push(&r);
	}
	if (api) {
		memset(&r.rec.u, 0, sizeof(r.rec.u));
		r.rec.type = TREC_API;
		r.rec.u.api.corr = cb->correlationId;
		r.name = name;
		cap_api_stage_push(&r);
	}
}

/* Scan a launch's parameters for pointers into live allocations. */
static void cap_launch(uint64_t corr, const struct cap_params *pi, void **args, void **extra)
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

/* Layout of __cudaLaunchKernel's parameters (no params struct in 13.0's
 * generated headers; the signature is in crt/device_functions.h). */
struct cap_rt_launch13 {
	void *kernel;
	dim3 grid, block;
	void **args;
	size_t smem;
	cudaStream_t stream;
};

static void cap_flush_now(int all);

/* ------------------------------------------------------------- callbacks */

static int cap_ok(const CUpti_CallbackData *cb, int runtime)
{
	if (!cb->functionReturnValue)
		return 0;
	return runtime ? *(const cudaError_t *)cb->functionReturnValue == cudaSuccess
		       : *(const CUresult *)cb->functionReturnValue == CUDA_SUCCESS;
}

/* The callbacks below differ only in which params struct each API passes,
 * so the three things they do are written once here. An allocation's out
 * pointer is filled only on a successful exit; a free and a launch are
 * seen on entry, while the pointer and the arguments are still valid.
 * P names the params struct inside the ARGS of CAP_ON_LAUNCH. */
#define CAP_ON_ALLOC(params_t, ptr_field, size_field, runtime)                  \
	do {                                                                    \
		if (!enter && cap_ok(cb, runtime)) {                            \
			const params_t *p = cb->functionParams;                 \
			cap_live_insert((uint64_t)(uintptr_t)*p->ptr_field,     \
					p->size_field, cb->correlationId);      \
		}                                                               \
	} while (0)
#define CAP_ON_FREE(params_t, ptr_field)                                        \
	do {                                                                    \
		if (enter)                                                      \
			cap_live_remove((uint64_t)(uintptr_t)(                  \
				(const params_t *)cb->functionParams)->ptr_field); \
	} while (0)
#define CAP_ON_LAUNCH(params_t, info, args, extra)                              \
	do {                                                                    \
		if (enter) {                                                    \
			const params_t *p = cb->functionParams;                 \
			cap_launch(cb->correlationId, info, args, extra);       \
		}                                                               \
	} while (0)

static void cap_runtime_links(CUpti_CallbackId id, const CUpti_CallbackData *cb, int enter);
static void cap_driver_links(CUpti_CallbackId id, const CUpti_CallbackData *cb, int enter);

/* One call the capture follows, entry or exit: timed around the link
 * work (see cap_api_time). */
static void cap_call(CUpti_CallbackDomain dom, CUpti_CallbackId id, const CUpti_CallbackData *cb)
{
	int enter = cb->callbackSite == CUPTI_API_ENTER;
	int rt = dom == CUPTI_CB_DOMAIN_RUNTIME_API;
	const char *name = rt ? (id < CUPTI_RUNTIME_TRACE_CBID_SIZE ? cap_rt_names[id] : NULL)
			      : (id < CUPTI_DRIVER_TRACE_CBID_SIZE ? cap_drv_names[id] : NULL);
	if (!enter)
		cap_api_time(dom, id, cb, 0, name);
	if (cap_links_on)
		(rt ? cap_runtime_links : cap_driver_links)(id, cb, enter);
	if (enter)
		cap_api_time(dom, id, cb, 1, name);
}

/* Only the outermost of nested runtime calls is timed and scanned: an
 * inner call belongs to the outer one's record. */
static void cap_runtime_cb(CUpti_CallbackId id, const CUpti_CallbackData *cb)
{
	int enter = cb->callbackSite == CUPTI_API_ENTER;
	if (id == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) {
		if (enter)
			cap_flush_now(1);
		return;
	}
	cap_in_runtime += enter ? 1 : -1;
	if ((enter ? cap_in_runtime : cap_in_runtime + 1) != 1)
		return;
	cap_call(CUPTI_CB_DOMAIN_RUNTIME_API, id, cb);
}

static void cap_runtime_links(CUpti_CallbackId id, const CUpti_CallbackData *cb, int enter)
{
	switch (id) {
	case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
		CAP_ON_ALLOC(cudaMalloc_v3020_params, devPtr, size, 1);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
	case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
		CAP_ON_ALLOC(cudaMallocAsync_v11020_params, devPtr, size, 1);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
	case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
		CAP_ON_ALLOC(cudaMallocFromPoolAsync_v11020_params, ptr, size, 1);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
		CAP_ON_FREE(cudaFree_v3020_params, devPtr);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
	case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
		CAP_ON_FREE(cudaFreeAsync_v11020_params, devPtr);
		break;
	case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
	case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
		CAP_ON_LAUNCH(struct cap_rt_launch13, cap_param_info(p->kernel, 1), p->args, NULL);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
		CAP_ON_LAUNCH(cudaLaunchKernel_v7000_params, cap_stub_params(p->func), p->args, NULL);
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
		CAP_ON_LAUNCH(cudaLaunchKernelExC_v11060_params, cap_stub_params(p->func), p->args, NULL);
		break;
	default:
		break;
	}
}

/* A driver call made inside a runtime call the trace keeps is that
 * call's work (cudaMalloc's cuMemAlloc): neither timed nor scanned again. */
static void cap_driver_cb(CUpti_CallbackId id, const CUpti_CallbackData *cb)
{
	if (!cap_in_runtime)
		cap_call(CUPTI_CB_DOMAIN_DRIVER_API, id, cb);
}

static void cap_driver_links(CUpti_CallbackId id, const CUpti_CallbackData *cb, int enter)
{
	switch (id) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
		CAP_ON_ALLOC(cuMemAlloc_v2_params, dptr, bytesize, 0);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
		CAP_ON_ALLOC(cuMemAllocAsync_params, dptr, bytesize, 0);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
		CAP_ON_ALLOC(cuMemAllocFromPoolAsync_params, dptr, bytesize, 0);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
		CAP_ON_FREE(cuMemFree_v2_params, dptr);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
		CAP_ON_FREE(cuMemFreeAsync_params, dptr);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
		CAP_ON_LAUNCH(cuLaunchKernel_params, cap_param_info(p->f, 0), p->kernelParams, p->extra);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
		CAP_ON_LAUNCH(cuLaunchKernelEx_params, cap_param_info(p->f, 0), p->kernelParams, p->extra);
		break;
	default:
		break;
	}
}

#undef CAP_ON_ALLOC
#undef CAP_ON_FREE
#undef CAP_ON_LAUNCH

static void CUPTIAPI cap_callback(void *userdata, CUpti_CallbackDomain domain,
				  CUpti_CallbackId id, const void *data)
{
	(void)userdata;
	if (!atomic_load(&cap_active))
		return;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
		cap_runtime_cb(id, data);
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
		cap_driver_cb(id, data);
	else if (domain == CUPTI_CB_DOMAIN_RESOURCE &&
		 (id == CUPTI_CBID_RESOURCE_MODULE_LOADED ||
		  id == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING))
		cap_module_event(id, data);
}

/* ------------------------------------------------------------- flushing */

static uint64_t cap_now(void)
{
	uint64_t t = 0;
	cuptiGetTimestamp(&t);
	return t;
}

/* Ask CUPTI for what is complete, then write: everything when ALL (nothing
 * older can come: device reset, exit), else up to now minus the lag. Never
 * called with cap_lock held: CUPTI delivers buffers on this thread. */
static int cap_claim_path(void);
static void cap_report_line(uint64_t records, uint64_t dropped, int complete);

/* Claim the trace file and open it: at the first flush after the process
 * did real work (cap_has_work). Returns 0 when the trace is open. */
static int cap_open_trace(void)
{
	char err[256];
	if (cap_writer)
		return 0;
	if (cap_open_failed || !atomic_load(&cap_has_work))
		return -1;
	cap_claim_path();
	struct trace_writer *w = trace_writer_open(cap_path, TRACE_W_STREAM, err, sizeof(err));
	if (!w) {
		fprintf(stderr, "gpumemsim capture: %s; process %d runs untraced\n", err, (int)getpid());
		cap_open_failed = 1;
		atomic_store(&cap_active, 0);
		return -1;
	}
	pthread_mutex_lock(&cap_lock);
	cap_writer = w;
	pthread_mutex_unlock(&cap_lock);
	cap_report_line(0, 0, 0);   /* listed even if the process dies */
	return 0;
}

static void cap_flush_now(int all)
{
	uint64_t t = cap_now();
	uint64_t lag = (uint64_t)cap_lag_ms * 1000000ull;
	cuptiActivityFlushAll(all ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
	if (cap_open_trace() < 0) {
		/* no work yet: keep the staged records in the converter */
		pthread_mutex_lock(&cap_lock);
		if (cap_conv && !cap_open_failed)
			cap_stage_drain();
		pthread_mutex_unlock(&cap_lock);
		return;
	}
	if (cap_write_header(all) < 0 && !atomic_load(&cap_header_done))
		return;
	pthread_mutex_lock(&cap_lock);
	if (cap_writer) {
		struct cap_stats st;
		cap_stage_drain();
		if (all)
			cap_conv_emit_all(cap_conv);
		else if (t > lag)
			cap_conv_emit_until(cap_conv, t - lag);
		trace_writer_flush(cap_writer);
		/* Records came later than the window: CUPTI held a buffer back
		 * (it delivers a buffer only once every record in it is complete).
		 * Widen the window so it does not happen again, up to a limit. */
		cap_conv_stats(cap_conv, &st);
		if (st.late > cap_late_seen && cap_lag_ms < CAP_LAG_MAX_MS) {
			cap_lag_ms = cap_lag_ms * 2 < CAP_LAG_MAX_MS ? cap_lag_ms * 2 : CAP_LAG_MAX_MS;
			if (cap_verbose)
				fprintf(stderr, "gpumemsim capture: %llu late records: reorder window now "
						"%u ms\n", (unsigned long long)st.late, cap_lag_ms);
		}
		cap_late_seen = st.late;
	}
	pthread_mutex_unlock(&cap_lock);
}

static void cap_finalize(void);

static void *cap_writer_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += cap_flush_ms / 1000;
		ts.tv_nsec += (long)(cap_flush_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (sem_timedwait(&cap_wake, &ts) < 0 && errno == EINTR)
			;
		if (cap_req_stop)
			break;
		if (cap_req_final) {
			cap_finalize();
			sem_post(&cap_done);
			break;
		}
		cap_flush_now(0);
		if (cap_req_flush) {
			cap_req_flush = 0;
			sem_post(&cap_done);
		}
	}
	return NULL;
}

/* Append "path records dropped complete" to the launcher's report file. */
static void cap_report_line(uint64_t records, uint64_t dropped, int complete)
{
	if (!cap_report[0])
		return;
	int fd = open(cap_report, O_WRONLY | O_APPEND);
	if (fd < 0)
		return;
	char line[4200];
	int n = snprintf(line, sizeof(line), "%s %llu %llu %d\n", cap_path,
			 (unsigned long long)records, (unsigned long long)dropped, complete);
	if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) < 0)
		n = 0;
	close(fd);
}

/* Write everything and close the trace with its trailer. Once per process;
 * from atexit, the writer thread (fatal signal) or a forked child (no-op). */
static void cap_finalize(void)
{
	if (getpid() != cap_pid || atomic_exchange(&cap_finalized, 1))
		return;
	if (cap_thread_started && !pthread_equal(pthread_self(), cap_thread)) {
		cap_req_stop = 1;
		sem_post(&cap_wake);
		pthread_join(cap_thread, NULL);
	}
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	atomic_store(&cap_active, 0);
	cap_open_trace();   /* a process that did no CUDA work leaves no file */
	cap_write_header(1);
	pthread_mutex_lock(&cap_lock);
	if (!cap_writer)
		goto out;
	/* Ranges never closed end where the capture ends. */
	for (size_t i = 0; i < cap_nranges; i++) {
		struct cap_rec c;
		memset(&c, 0, sizeof(c));
		c.rec.type = TREC_RANGE;
		c.rec.start = cap_ranges[i].start;
		c.rec.end = cap_last_ts > c.rec.start ? cap_last_ts : c.rec.start;
		c.rec.u.range.depth = cap_ranges[i].depth;
		c.name = cap_ranges[i].name;
		cap_conv_push(cap_conv, &c);
		free(cap_ranges[i].name);
	}
	cap_nranges = 0;
	cap_stage_drain();
	cap_conv_emit_all(cap_conv);
	struct cap_stats st;
	cap_conv_stats(cap_conv, &st);
	uint64_t dropped = atomic_load(&cap_dropped) + atomic_load(&cap_zero_time) + atomic_load(&cap_oom);
	char err[256] = "";
	int rc = trace_writer_close(cap_writer, 1, dropped, err, sizeof(err));
	cap_writer = NULL;
	if (rc < 0)
		fprintf(stderr, "gpumemsim capture: %s: %s\n", cap_path, err);
	else
		cap_report_line(st.emitted, dropped, 1);
	if (dropped)
		fprintf(stderr, "gpumemsim capture: warning: %llu records lost (%llu CUPTI drops, %llu "
				"without timestamps, %llu out of memory) in %s\n",
			(unsigned long long)dropped, (unsigned long long)atomic_load(&cap_dropped),
			(unsigned long long)atomic_load(&cap_zero_time),
			(unsigned long long)atomic_load(&cap_oom), cap_path);
	if (st.late)
		fprintf(stderr, "gpumemsim capture: warning: %llu records arrived after the %u ms "
				"reorder window (start moved later; raise GPUMEMSIM_CAPTURE_LAG_MS)\n",
			(unsigned long long)st.late, cap_lag_ms);
	uint64_t repairs = st.live_replaced + st.frees_reordered + st.frees_dropped;
	if (repairs)
		fprintf(stderr, "gpumemsim capture: warning: %llu allocation lifetimes repaired in %s "
				"(records delivered out of order: %llu allocations at a live address, "
				"%llu frees before their allocation, %llu frees of nothing live)\n",
			(unsigned long long)repairs, cap_path, (unsigned long long)st.live_replaced,
			(unsigned long long)st.frees_reordered, (unsigned long long)st.frees_dropped);
	if (cap_verbose)
		fprintf(stderr, "gpumemsim capture: %s: %llu records, %llu allocations, %llu links "
				"(%llu unresolved), %llu memory-pool records not written, %llu late, "
				"modules %llu loaded %llu unloaded, %llu module frees, %llu statics "
				"re-registered, %llu stale kernel layouts avoided, %llu graph pools\n",
			cap_path, (unsigned long long)st.emitted, (unsigned long long)st.allocs,
			(unsigned long long)st.links, (unsigned long long)st.links_unresolved,
			(unsigned long long)atomic_load(&cap_pool_records), (unsigned long long)st.late,
			(unsigned long long)st.modules_loaded, (unsigned long long)st.modules_unloaded,
			(unsigned long long)st.module_frees, (unsigned long long)st.static_replaced,
			(unsigned long long)atomic_load(&cap_stale_layouts),
			(unsigned long long)st.graph_pools);
out:
	pthread_mutex_unlock(&cap_lock);
}

static void cap_atexit(void)
{
	cap_finalize();
}

/* SIGINT/SIGTERM: have the writer thread write what it has (all of it and
 * the trailer when the signal will end the process), then chain. */
static void cap_signal(int sig)
{
	int saved = errno;
	struct sigaction *old = sig == SIGINT ? &cap_old_int : &cap_old_term;
	int fatal = !(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_DFL;
	int ignored = !(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_IGN;
	if (!ignored && cap_thread_started && getpid() == cap_pid &&
	    !pthread_equal(pthread_self(), cap_thread)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 5;
		if (fatal)
			cap_req_final = 1;
		else
			cap_req_flush = 1;
		sem_post(&cap_wake);
		while (sem_timedwait(&cap_done, &ts) < 0 && errno == EINTR)
			;
	}
	errno = saved;
	if (fatal) {
		signal(sig, SIG_DFL);
		raise(sig);
	} else if (old->sa_flags & SA_SIGINFO) {
		if (old->sa_sigaction)
			old->sa_sigaction(sig, NULL, NULL);
	} else if (!ignored && old->sa_handler) {
		old->sa_handler(sig);
	}
}

static void cap_atfork_child(void)
{
	atomic_store(&cap_active, 0);
	cap_thread_started = 0;
}

/* ------------------------------------------------------------- init */

static unsigned cap_env_uint(const char *name, unsigned def, unsigned lo, unsigned hi)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return def;
	unsigned long v = strtoul(s, &end, 10);
	if (*end || v < lo || v > hi) {
		fprintf(stderr, "gpumemsim capture: %s=%s is not a number in [%u, %u]; using %u\n",
			name, s, lo, hi, def);
		return def;
	}
	return (unsigned)v;
}

/* GPUMEMSIM_CAPTURE_RECORD: everything when unset (or bad: the launcher
 * refuses a bad list; a hand-set one must not stop the capture). */
static unsigned cap_env_record(void)
{
	const char *s = getenv("GPUMEMSIM_CAPTURE_RECORD");
	unsigned bits = CAP_REC_ALL;
	if (s && *s && cap_record_parse(s, &bits) < 0) {
		fprintf(stderr, "gpumemsim capture: GPUMEMSIM_CAPTURE_RECORD=%s: unknown kind; "
				"recording everything\n", s);
		bits = CAP_REC_ALL;
	}
	return bits;
}

/* GPUMEMSIM_CAPTURE_SYNCS: 1 for callbacks on the sync calls, 0 for
 * CUPTI's SYNCHRONIZATION activity kind; CAP_SYNCS_DEFAULT when unset. */
static int cap_env_syncs(void)
{
	const char *s = getenv("GPUMEMSIM_CAPTURE_SYNCS");
	if (!s || !*s)
		return CAP_SYNCS_CALLBACKS_DEFAULT;
	if (!strcmp(s, "callbacks"))
		return 1;
	if (!strcmp(s, "activity"))
		return 0;
	fprintf(stderr, "gpumemsim capture: GPUMEMSIM_CAPTURE_SYNCS=%s is not callbacks or "
			"activity; using %s\n", s, CAP_SYNCS_CALLBACKS_DEFAULT ? "callbacks" : "activity");
	return CAP_SYNCS_CALLBACKS_DEFAULT;
}

/* GPUMEMSIM_CAPTURE_API: callbacks (default), activity or off. */
static enum cap_api_mode cap_env_api_mode(void)
{
	const char *s = getenv("GPUMEMSIM_CAPTURE_API");
	if (!s || !*s || !strcmp(s, "callbacks"))
		return CAP_API_CALLBACKS;
	if (!strcmp(s, "activity"))
		return CAP_API_ACTIVITY;
	if (!strcmp(s, "off"))
		return CAP_API_OFF;
	fprintf(stderr, "gpumemsim capture: GPUMEMSIM_CAPTURE_API=%s is not callbacks, activity "
			"or off; using callbacks\n", s);
	return CAP_API_CALLBACKS;
}

/* "cudaMalloc_v3020" -> "cudaMalloc", "cuStreamSynchronize_ptsz" -> "cuStreamSynchronize". */
static const char *cap_api_name(CUpti_CallbackDomain dom, uint32_t cbid)
{
	static const char *wanted[] = {
		"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync",
		"cudaMallocFromPoolAsync", "cudaLaunchKernel", "cudaLaunchKernelExC",
		"__cudaLaunchKernel", "cudaDeviceSynchronize", "cudaStreamSynchronize",
		"cudaEventSynchronize", "cudaStreamWaitEvent", "cudaMemcpy", "cudaMemcpyAsync",
		"cudaMemset", "cudaMemsetAsync", "cudaDeviceReset",
		"cuMemAlloc", "cuMemFree", "cuMemAllocAsync", "cuMemFreeAsync",
		"cuMemAllocFromPoolAsync", "cuLaunchKernel", "cuLaunchKernelEx", "cuCtxSynchronize",
		"cuStreamSynchronize", "cuEventSynchronize", "cuStreamWaitEvent",
		"cudaGraphLaunch", "cuGraphLaunch", NULL};
	const char *name = NULL;
	char buf[128];
	if (cuptiGetCallbackName(dom, cbid, &name) != CUPTI_SUCCESS || !name)
		return NULL;
	snprintf(buf, sizeof(buf), "%s", name);
	char *v = strrchr(buf, '_');
	if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9')
		*v = '\0';
	size_t l = strlen(buf);
	if (l > 5 && !strcmp(buf + l - 5, "_ptsz"))
		buf[l - 5] = '\0';
	for (int i = 0; wanted[i]; i++)
		if (!strcmp(buf, wanted[i]))
			return strdup(buf);
	return NULL;
}

/* The trace file: GPUMEMSIM_CAPTURE_OUT for the first process that claims
 * it, the same name with this pid before ".gz" (or after) for the others. */
static int cap_claim_path(void)
{
	const char *out = getenv("GPUMEMSIM_CAPTURE_OUT");
	if (!out || !*out)
		out = "capture.trace.gz";
	int fd = open(out, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd >= 0) {
		close(fd);
		snprintf(cap_path, sizeof(cap_path), "%s", out);
		return 0;
	}
	size_t l = strlen(out);
	if (l > 3 && !strcmp(out + l - 3, ".gz"))
		snprintf(cap_path, sizeof(cap_path), "%.*s.%d.gz", (int)(l - 3), out, (int)getpid());
	else
		snprintf(cap_path, sizeof(cap_path), "%s.%d", out, (int)getpid());
	return 0;
}

static int cap_enable(CUpti_ActivityKind k, const char *what)
{
	CUptiResult r = cuptiActivityEnable(k);
	if (r != CUPTI_SUCCESS) {
		const char *msg = NULL;
		cuptiGetResultString(r, &msg);
		fprintf(stderr, "gpumemsim capture: cannot record %s: %s\n", what, msg ? msg : "?");
		return -1;
	}
	return 0;
}

/* Called by the driver at cuInit. Only CUPTI calls here; returns 1 always
 * (0 would make the driver fail cuInit: the program must run regardless). */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
	static int done;
	CUptiResult r;
	const char *msg = NULL;
	if (done++)
		return 1;
	cap_pid = getpid();
	cap_links_on = cap_env_uint("GPUMEMSIM_CAPTURE_LINKS", 1, 0, 1);
	cap_flush_ms = cap_env_uint("GPUMEMSIM_CAPTURE_FLUSH_MS", 500, 10, 60000);
	cap_lag_ms = cap_env_uint("GPUMEMSIM_CAPTURE_LAG_MS", 2000, 0, 600000);
	cap_verbose = cap_env_uint("GPUMEMSIM_CAPTURE_VERBOSE", 0, 0, 1);
	cap_debug = cap_env_uint("GPUMEMSIM_CAPTURE_DEBUG", 0, 0, 1);
	cap_api_mode = cap_env_api_mode();
	cap_source_on = cap_env_uint("GPUMEMSIM_CAPTURE_SOURCE", 1, 0, 1);
	cap_record_bits = cap_env_record();
	const char *rep = getenv("GPUMEMSIM_CAPTURE_REPORT");
	if (rep)
		snprintf(cap_report, sizeof(cap_report), "%s", rep);

	r = cuptiSubscribe(&cap_subscriber, (CUpti_CallbackFunc)cap_callback, NULL);
	if (r != CUPTI_SUCCESS) {
		cuptiGetResultString(r, &msg);
		fprintf(stderr, "gpumemsim capture: CUPTI unavailable (%s; another profiler attached?): "
				"process %d runs untraced\n", msg ? msg : "?", (int)getpid());
		return 1;
	}
	for (uint32_t i = 0; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
		cap_rt_names[i] = cap_api_name(CUPTI_CB_DOMAIN_RUNTIME_API, i);
	for (uint32_t i = 0; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++)
		cap_drv_names[i] = cap_api_name(CUPTI_CB_DOMAIN_DRIVER_API, i);

	struct cap_sink sink = {NULL, sink_intern, sink_record};
	cap_conv = cap_conv_new(&sink);
	u64map_init(&cap_param_cache);
	u64map_init(&cap_stub_cache);
	u64map_init(&cap_param_grave);
	if (!cap_conv || sem_init(&cap_wake, 0, 0) || sem_init(&cap_done, 0, 0)) {
		fprintf(stderr, "gpumemsim capture: out of memory; process %d runs untraced\n", (int)getpid());
		goto fail;
	}

	r = cuptiActivityRegisterCallbacks(cap_buffer_requested, cap_buffer_completed);
	if (r != CUPTI_SUCCESS)
		goto cupti_fail;
	/* The library behind each allocation (cuDNN, cuBLAS, the framework).
	 * CUPTI finds it inside every allocation call, which costs (H200: a
	 * small cudaMalloc 3.8 -> 7.7 us, about 10 us more per MiB on large
	 * ones); GPUMEMSIM_CAPTURE_SOURCE=0 (`capture --no-source`) turns it off
	 * for captures whose host timing matters more than the library names. */
	if (cap_source_on)
		cuptiActivityEnableAllocationSource(1);
	unsigned rec = cap_record_bits;
	if (((rec & CAP_REC_KERNELS) &&
	     cap_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels") < 0) ||
	    ((rec & CAP_REC_MEMORY) && cap_enable(CUPTI_ACTIVITY_KIND_MEMORY2, "allocations") < 0))
		goto fail;
	if (rec & CAP_REC_COPIES) {
		cap_enable(CUPTI_ACTIVITY_KIND_MEMCPY, "copies");
		cap_enable(CUPTI_ACTIVITY_KIND_MEMSET, "memsets");
	}
	cap_sync_cb = (rec & CAP_REC_SYNCS) && cap_env_syncs();
	if ((rec & CAP_REC_SYNCS) && !cap_sync_cb)
		cap_enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronisations");
	if (rec & CAP_REC_MEMORY)
		cap_enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL, "memory pools");
	if (cap_api_mode == CAP_API_ACTIVITY) {
		cap_enable(CUPTI_ACTIVITY_KIND_RUNTIME, "runtime API calls");
		cap_enable(CUPTI_ACTIVITY_KIND_DRIVER, "driver API calls");
	}
	if (rec & CAP_REC_NVTX)
		cap_enable(CUPTI_ACTIVITY_KIND_MARKER, "NVTX ranges");
	for (size_t i = 0; cap_sync_cb && i < sizeof(cap_sync_calls) / sizeof(cap_sync_calls[0]); i++)
		cuptiEnableCallback(1, cap_subscriber, cap_sync_calls[i].dom, cap_sync_calls[i].id);
	if (cap_api_mode == CAP_API_CALLBACKS) {
		for (uint32_t i = 0; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
			if (cap_rt_names[i])
				cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, i);
		for (uint32_t i = 0; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++)
			if (cap_drv_names[i])
				cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, i);
	}

	cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
			    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
	/* module unloads: free the module's globals, forget kernel handles */
	cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
			    CUPTI_CBID_RESOURCE_MODULE_LOADED);
	cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
			    CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
	if (cap_links_on) {
		static const CUpti_CallbackId rt[] = {
			CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
			CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
			CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
			CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
			CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
		};
		static const CUpti_CallbackId drv[] = {
			CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
			CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
			CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
			CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
			CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
			CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
			CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
			CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
		};
		for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++)
			cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, rt[i]);
		for (size_t i = 0; i < sizeof(drv) / sizeof(drv[0]); i++)
			cuptiEnableCallback(1, cap_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, drv[i]);
	}
	atomic_store(&cap_active, 1);
	if (pthread_create(&cap_thread, NULL, cap_writer_main, NULL) == 0)
		cap_thread_started = 1;
	pthread_atfork(NULL, NULL, cap_atfork_child);
	atexit(cap_atexit);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cap_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, &cap_old_int);
	sigaction(SIGTERM, &sa, &cap_old_term);
	return 1;

cupti_fail:
	cuptiGetResultString(r, &msg);
	fprintf(stderr, "gpumemsim capture: CUPTI unavailable (%s): process %d runs untraced\n",
		msg ? msg : "?", (int)getpid());
fail:
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2);
	cuptiUnsubscribe(cap_subscriber);
	if (cap_writer) {
		trace_writer_abort(cap_writer);
		cap_writer = NULL;
	}
	cap_conv_free(cap_conv);
	cap_conv = NULL;
	return 1;
}

/* Called by NVTX when NVTX_INJECTION64_PATH names this library: hand NVTX
 * to CUPTI so ranges arrive as MARKER activity records. */
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(void *get_export_table)
{
	return cuptiNvtxInitialize2(get_export_table) == CUPTI_SUCCESS;
}
