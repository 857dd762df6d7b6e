/*
 * inject_writer.c: the injection library's trace file (inject.c): claimed
 * and opened at the first flush after the process did CUDA work, written
 * in time order by the writer thread every GPUMEMSIM_CAPTURE_FLUSH_MS,
 * finished with its trailer at exit or on SIGINT/SIGTERM, and listed in the
 * launcher's report file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inject_int.h"

pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;    /* conv + writer */
struct trace_writer *cap_writer;
char cap_path[4096];
char cap_report[4096];
/* The trace file is claimed and opened when the first record of real work
 * (a kernel, copy, memset or non-static allocation) is pushed: a process
 * that only initialises CUDA (torch.compile's workers query the device)
 * leaves no file. */
atomic_int cap_has_work;
int cap_open_failed;
static uint64_t cap_late_seen;       /* late records when the window last grew */
static atomic_int cap_finalized;

/* Writer thread and its wake-ups (sem_post is async-signal-safe). */
pthread_t cap_thread;
int cap_thread_started;
sem_t cap_wake, cap_done;
static volatile sig_atomic_t cap_req_stop, cap_req_flush, cap_req_final;

struct sigaction cap_old_int, cap_old_term;

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

void cap_flush_now(int all)
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
		if (all) {
			cap_conv_emit_all(cap_conv);
		} else {
			uint64_t wm = cap_conv_watermark(cap_conv, t, lag, cap_ranges, cap_nranges,
							 (uint64_t)CAP_HOLD_MAX_MS * 1000000ull,
							 CAP_HOLD_MAX_PENDING);
			if (wm)
				cap_conv_emit_until(cap_conv, wm);
		}
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

void *cap_writer_main(void *arg)
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
		/* a step killed while the capture was paused is still not replayed */
		c.rec.u.range.uncaptured = cap_range_uncaptured(cap_ranges[i].name, cap_ranges[i].start);
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
	int rc = trace_writer_close(&cap_writer, 1, dropped, err, sizeof(err));
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

void cap_atexit(void)
{
	cap_finalize();
}

/* SIGINT/SIGTERM: have the writer thread write what it has (all of it and
 * the trailer when the signal will end the process), then chain. */
void cap_signal(int sig)
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

void cap_atfork_child(void)
{
	atomic_store(&cap_active, 0);
	cap_thread_started = 0;
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
