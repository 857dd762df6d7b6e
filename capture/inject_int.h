/*
 * inject_int.h: what the files of the CUPTI injection library share
 * (build/libgpumemsim_capture.so; inject.c says what it does). Private to
 * capture/inject*.c and tests/test_capture_cupti.c. The library is built
 * with -fvisibility=hidden, so nothing declared here is exported: only
 * InitializeInjection and InitializeInjectionNvtx2 are (exports.map).
 *
 *   inject.c            InitializeInjection, environment, enabling CUPTI
 *   inject_header.c     the trace header: device, driver, CUPTI, cuDNN, labels
 *   inject_activity.c   CUPTI activity buffers, record conversion, NVTX ranges
 *   inject_links.c      live allocations, kernel parameter layouts and their
 *                       caches, launch scanning, staging for the writer
 *   inject_callbacks.c  API, sync and resource callbacks; API timing
 *   inject_writer.c     trace claim and open, writer thread, finalize,
 *                       signals, report lines
 *   inject_pause.c      pausing the capture at a step (an uncaptured
 *                       reference in the same process)
 *
 * Each variable is defined in the file named above its group; the locks:
 * cap_lock (inject_writer.c) guards the converter and the writer,
 * inject_links.c's live lock the live table and the staging vectors.
 */
#ifndef GPUMEMSIM_CAPTURE_INJECT_INT_H
#define GPUMEMSIM_CAPTURE_INJECT_INT_H

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda.h>
#include <cupti.h>

#include "../base/u64map.h"
#include "../traces/trace.h"
#include "convert.h"

/* Everything below is the library's own: hidden even where a file is built
 * without -fvisibility=hidden, and reached without the GOT inside it. */
#pragma GCC visibility push(hidden)

#define CAP_BUF_SIZE (8u << 20)
#define CAP_BUF_POOL 16
#define CAP_MAX_PARAMS 1024
#define CAP_LINKS_PER_LAUNCH TRACE_MAX_LINKS
#define CAP_LAG_MAX_MS 32000u        /* the reorder window grows to this */
/* An open NVTX range holds the window back (cap_conv_watermark) while it
 * is at most CAP_HOLD_MAX_MS old and fewer than CAP_HOLD_MAX_PENDING
 * records wait. Under capture a first step of cuDNN autotuning took 36 s
 * (DenseNet-121, b32): past the reorder window's 32 s, and written late
 * while the hold lasted only as long as that window. */
#define CAP_HOLD_MAX_MS 300000u
#define CAP_HOLD_MAX_PENDING 2000000u

/* ------------------------------------------------------------- inject.c */

/* How host API calls are timed (GPUMEMSIM_CAPTURE_API). CALLBACKS: only the
 * calls the trace keeps (cap_api_name) get a callback, which reads CUPTI's
 * clock on entry and exit; the program's other calls (cudaGetDevice, stream
 * queries: about ten per PyTorch op) cost nothing. ACTIVITY: CUPTI's RUNTIME
 * and DRIVER activity kinds, which record every call of the process and
 * slow each one down; kept to compare against. OFF: no API records. */
enum cap_api_mode { CAP_API_OFF, CAP_API_CALLBACKS, CAP_API_ACTIVITY };
extern enum cap_api_mode cap_api_mode;
extern pid_t cap_pid;
extern int cap_links_on;                /* GPUMEMSIM_CAPTURE_LINKS */
extern int cap_source_on;               /* GPUMEMSIM_CAPTURE_SOURCE */
extern int cap_sync_cb;                 /* GPUMEMSIM_CAPTURE_SYNCS=callbacks */
extern unsigned cap_record_bits;        /* GPUMEMSIM_CAPTURE_RECORD */
extern unsigned cap_flush_ms, cap_lag_ms;
extern int cap_verbose;
extern int cap_debug;   /* GPUMEMSIM_CAPTURE_DEBUG: module events and statics on stderr */
extern atomic_int cap_debug_lines;
extern atomic_int cap_active;
extern struct cap_conv *cap_conv;
extern CUpti_SubscriberHandle cap_subscriber;
/* API names worth a 'p' record, by domain and callback id. */
extern const char *cap_rt_names[CUPTI_RUNTIME_TRACE_CBID_SIZE];
extern const char *cap_drv_names[CUPTI_DRIVER_TRACE_CBID_SIZE];

/* ------------------------------------------------------------- inject_header.c */

extern atomic_int cap_header_done;
int cap_write_header(int force);

/* ------------------------------------------------------------- inject_activity.c */

extern atomic_ullong cap_dropped, cap_zero_time, cap_pool_records, cap_oom;
extern uint64_t cap_last_ts;      /* latest timestamp seen, for open ranges */
/* Open NVTX ranges (START seen, END not yet). */
extern struct cap_open_range *cap_ranges;  /* NVTX ranges open now (cap_lock held) */
extern size_t cap_nranges;

void CUPTIAPI cap_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI cap_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				   size_t size, size_t valid);
void cap_push(const struct cap_rec *r);
void cap_activity(const CUpti_Activity *a);

/* ------------------------------------------------------------- inject_links.c */

/* Kernel parameter sizes, cached by function handle and by host stub
 * (inject_links.c says why every module unload empties the caches). */
struct cap_params { uint32_t n; uint32_t size[]; };
extern struct u64map cap_param_cache, cap_stub_cache;
extern struct u64map cap_param_grave;   /* handle -> params before the last unload */
extern atomic_ullong cap_stale_layouts;  /* see cap_params_forget */

void cap_live_insert(uint64_t base, uint64_t size, uint64_t corr);
void cap_live_remove(uint64_t base);
const struct cap_params *cap_stub_params(const void *func);
const struct cap_params *cap_param_info(void *handle, int is_kernel);
void cap_params_forget(void);
void cap_stage_drain(void);
void cap_module_stage(enum cap_module_op op, uint32_t ctx, uint32_t module, uint64_t t);
void cap_api_stage_push(const struct cap_rec *r);
void cap_launch(uint64_t corr, const struct cap_params *pi, void **args, void **extra);

/* ------------------------------------------------------------- inject_callbacks.c */

/* Nesting of tracked runtime calls on this thread: driver calls made inside
 * them are the runtime's own and must not be counted twice. */
extern __thread int cap_in_runtime;
/* The sync calls (cap_sync_cb) and the `y` record each makes. */
struct cap_sync_call {
	CUpti_CallbackDomain dom;
	CUpti_CallbackId id;
	uint8_t kind;   /* TSYNC_* */
	uint8_t ptsz;   /* per-thread default stream variant */
};
extern const struct cap_sync_call cap_sync_calls[];
extern const size_t cap_nsync_calls;

void cap_module_event(CUpti_CallbackId id, const CUpti_ResourceData *rd);
void cap_runtime_cb(CUpti_CallbackId id, const CUpti_CallbackData *cb);
void cap_driver_cb(CUpti_CallbackId id, const CUpti_CallbackData *cb);
void CUPTIAPI cap_callback(void *userdata, CUpti_CallbackDomain domain,
			   CUpti_CallbackId id, const void *data);

/* ------------------------------------------------------------- inject_pause.c */

extern int cap_pause_step;              /* GPUMEMSIM_CAPTURE_PAUSE_STEP; -1: never */
extern atomic_ullong cap_paused_at;     /* CUPTI time of the pause, 0: not yet */
void cap_pause_enable(void);            /* the NVTX callbacks that watch for the step */
void cap_nvtx_cb(CUpti_CallbackId id, const CUpti_NvtxData *d);
/* 1 when the range NAME starting at START ran with the capture paused
 * (cap_lock held) */
int cap_range_uncaptured(const char *name, uint64_t start);

/* ------------------------------------------------------------- inject_writer.c */

extern pthread_mutex_t cap_lock;    /* conv + writer */
extern struct trace_writer *cap_writer;
extern char cap_path[4096];
extern char cap_report[4096];
/* The trace file is claimed and opened when the first record of real work
 * (a kernel, copy, memset or non-static allocation) is pushed: a process
 * that only initialises CUDA (torch.compile's workers query the device)
 * leaves no file. */
extern atomic_int cap_has_work;
extern int cap_open_failed;
/* Writer thread and its wake-ups (sem_post is async-signal-safe). */
extern pthread_t cap_thread;
extern int cap_thread_started;
extern sem_t cap_wake, cap_done;
extern struct sigaction cap_old_int, cap_old_term;

void cap_flush_now(int all);
void *cap_writer_main(void *arg);
void cap_atexit(void);
void cap_signal(int sig);
void cap_atfork_child(void);

#pragma GCC visibility pop

#endif
