/*
 * bench.c: `make bench`: how fast the simulator is and how much memory it
 * needs (see bench/README.md).
 *
 * It writes synthetic traces with the trace writer (a steady working set of
 * a few thousand live allocations, sizes 256 B to 256 MiB skewed towards
 * small ones, a kernel every few memory events, a synchronisation now and
 * then), times writing and reading them, then replays each through every
 * registered policy in its own forked child, so the peak RSS reported
 * (wait4's ru_maxrss) belongs to that one replay. Wall-clock time is fine
 * here: the benchmark measures the machine, it stores no results.
 *
 * usage: bench [SMALL_EVENTS [LARGE_EVENTS]]   (defaults 1000000 10000000)
 * Traces go to $TMPDIR (or /tmp) and are removed at the end (kept when
 * BENCH_KEEP=1, e.g. for profiling a replay).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../include/gpumemsim.h"

#define LIVE_TARGET 3000
#define ADDR_BASE 0x7e0000000000ull
#define SLOT_BYTES (512ull << 20)     /* room for the largest request */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: a fixed sequence, so every bench run replays the same traces. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* 256 B .. 256 MiB, log-distributed with most mass on small sizes, as in
 * real training traces (many small tensors, a few large activations). */
static uint64_t pick_size(void)
{
	uint64_t e1 = rng() % 21, e2 = rng() % 21;
	uint64_t e = e1 < e2 ? e1 : e2;            /* 0..20, skewed low */
	uint64_t base = 256ull << e;
	return base + rng() % base;                /* 256 B .. 512 MiB - 1, mostly small */
}

struct gen_stats { uint64_t records, mem_events; double secs; uint64_t bytes; };

/* Write a trace of MEM_EVENTS allocs + frees to PATH. 0 or -1. */
static int generate(const char *path, uint64_t mem_events, struct gen_stats *gs)
{
	char err[256];
	struct trace_rec r;
	uint64_t *live_addr = malloc(sizeof(uint64_t) * (LIVE_TARGET * 2 + 16));
	uint32_t *free_slots = malloc(sizeof(uint32_t) * (LIVE_TARGET * 2 + 16));
	uint32_t nlive = 0, nfree = 0, next_slot = 0;
	uint64_t t = 1000000, nalloc = 0, nrec = 0, ev = 0;
	double t0 = now_s();
	rng_state = 0x9e3779b97f4a7c15ull;
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	if (!w || !live_addr || !free_slots) {
		fprintf(stderr, "bench: %s\n", w ? "out of memory" : err);
		goto fail;
	}
	static struct trace_label labels[] = {{"workload", "bench"}};
	struct trace_header h = {.version = 1, .producer = "gpumemsim-bench",
				 .gpu = "synthetic", .total_memory = 80ull << 30,
				 .labels = labels, .nlabels = 1};
	if (trace_writer_header(w, &h) < 0)
		goto fail;
	uint32_t kname = trace_writer_intern(w, "bench_kernel");
	while (ev < mem_events) {
		memset(&r, 0, sizeof r);
		t += 50 + rng() % 500;
		r.start = r.end = t;
		/* keep the live set around LIVE_TARGET */
		int do_alloc = nlive < LIVE_TARGET / 2 ? 1 : nlive > LIVE_TARGET * 3 / 2 ? 0
			       : (int)(rng() % 2);
		if (nlive == 0)
			do_alloc = 1;
		r.u.mem.kind = TMEM_DEVICE;
		r.u.mem.source = TRACE_NO_STRING;
		r.u.mem.stream = (rng() % 8) ? 0 : 7;
		if (do_alloc) {
			uint32_t slot = nfree ? free_slots[--nfree] : next_slot++;
			r.type = TREC_ALLOC;
			r.u.mem.id = nalloc++;
			r.u.mem.addr = ADDR_BASE + (uint64_t)slot * SLOT_BYTES;
			r.u.mem.bytes = pick_size();
			live_addr[nlive++] = r.u.mem.addr;
		} else {
			uint32_t i = (uint32_t)(rng() % nlive);
			r.type = TREC_FREE;
			r.u.mem.addr = live_addr[i];
			live_addr[i] = live_addr[--nlive];
			free_slots[nfree++] = (uint32_t)((r.u.mem.addr - ADDR_BASE) / SLOT_BYTES);
		}
		if (trace_writer_record(w, &r) < 0)
			goto fail;
		ev++;
		nrec++;
		if (ev % 8 == 0) {
			memset(&r, 0, sizeof r);
			r.type = TREC_KERNEL;
			r.start = t;
			r.end = t + 200 + rng() % 2000;
			r.u.kernel.stream = (rng() % 4) ? 0 : 7;
			r.u.kernel.name = kname;
			for (int k = 0; k < 3; k++)
				r.u.kernel.grid[k] = r.u.kernel.block[k] = 1;
			if (trace_writer_record(w, &r) < 0)
				goto fail;
			nrec++;
		}
		if (ev % 4096 == 0) {
			memset(&r, 0, sizeof r);
			r.type = TREC_SYNC;
			r.start = t;
			r.end = t + 100;
			r.u.sync.kind = TSYNC_CONTEXT;
			r.u.sync.stream = TRACE_NO_STREAM;
			if (trace_writer_record(w, &r) < 0)
				goto fail;
			nrec++;
		}
	}
	if (trace_writer_close(&w, 1, 0, err, sizeof err) < 0) {
		fprintf(stderr, "bench: %s\n", err);
		goto fail;
	}
	free(live_addr);
	free(free_slots);
	struct stat sb;
	gs->records = nrec;
	gs->mem_events = ev;
	gs->secs = now_s() - t0;
	gs->bytes = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
	return 0;
fail:
	if (w)
		trace_writer_abort(w);
	free(live_addr);
	free(free_slots);
	return -1;
}

/* Read every record; the reader's own rate, without any policy. */
static int read_all(const char *path, uint64_t *records, uint64_t *text_bytes, double *secs)
{
	struct trace_rec r;
	double t0 = now_s();
	char err[512];
	struct trace_reader *rd = trace_reader_start(path, err, sizeof err);
	if (!rd) {
		fprintf(stderr, "bench: %s\n", err);
		return -1;
	}
	uint64_t n = 0;
	int rc;
	while ((rc = trace_reader_next(rd, &r)) == TRACE_OK)
		n++;
	if (rc < 0)
		fprintf(stderr, "bench: %s\n", trace_reader_error(rd));
	*records = n;
	*text_bytes = trace_reader_bytes(rd);
	*secs = now_s() - t0;
	trace_reader_close(rd);
	return rc < 0 ? -1 : 0;
}

/* Replay in a child; prints one table row. */
static void replay(const char *path, const char *label, const struct alloc_policy *p,
		   uint64_t mem_events)
{
	int fds[2];
	if (pipe(fds) < 0)
		return;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		struct sim_result res;
		char err[512];
		struct sim_options o = {.trace_path = path, .policy = p};
		double t0 = now_s();
		int rc = sim_run(&o, &res, err, sizeof err);
		double secs = now_s() - t0;
		char line[1024];
		if (rc < 0)
			snprintf(line, sizeof line, "ERROR %s", err);
		else
			snprintf(line, sizeof line, "%.3f %" PRIu64 " %" PRIu64 " %" PRIu64, secs,
				 res.peak_reserved, res.num_ooms, res.allocs + res.frees);
		if (write(fds[1], line, strlen(line) + 1) < 0)
			_exit(1);
		if (rc == 0)
			sim_result_free(&res);
		_exit(rc < 0);
	}
	close(fds[1]);
	char buf[1024] = "";
	ssize_t n = read(fds[0], buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	struct rusage ru;
	int st;
	if (wait4(pid, &st, 0, &ru) < 0)
		return;
	double secs;
	uint64_t peak, ooms, served;
	if (sscanf(buf, "%lf %" SCNu64 " %" SCNu64 " %" SCNu64, &secs, &peak, &ooms, &served) != 4) {
		printf("  %-12s %-14s %s\n", label, p->name, buf[0] ? buf : "child failed");
		return;
	}
	/* CPU time (both threads of the child): steadier than wall time on a
	 * machine shared with other jobs */
	double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		     (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
	printf("  %-12s %-14s %8.2f s %8.2f M ev/s %8.1f MiB RSS  peak reserved %8.2f GiB  OOMs %" PRIu64
	       "  CPU %6.2f s\n",
	       label, p->name, secs, (double)mem_events / secs / 1e6, (double)ru.ru_maxrss / 1024.0,
	       (double)peak / (double)(1ull << 30), ooms, cpu);
}

/* ---------------------------------------------------------- capture hold */

static uint32_t hold_intern(void *ctx, const char *str)
{
	(void)ctx;
	(void)str;
	return 0;
}

static int hold_record(void *ctx, const struct trace_rec *rec)
{
	(void)rec;
	++*(uint64_t *)ctx;
	return 0;
}

/*
 * The capture's converter holding N records back, as it does while an NVTX
 * range is open (capture/convert.c, cap_conv_watermark): kernels and the
 * API calls that launched them, 400 kernel names of 150-odd characters
 * (mangled C++ is that long), in a forked child so the peak RSS is the
 * hold's. Prints the bytes each held record costs, then emits them all.
 */
static void capture_hold(uint64_t n)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return;
	if (pid == 0) {
		uint64_t emitted = 0;
		struct cap_sink sink = {&emitted, hold_intern, hold_record};
		struct cap_conv *c = cap_conv_new(&sink);
		char names[400][160];
		for (int i = 0; i < 400; i++)
			snprintf(names[i], sizeof names[i], "_ZN2at6native29vectorized_elementwise_kernel"
				 "ILi4ENS0_13BinaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEE"
				 "NS_6detail5ArrayIPcLi3EEEEEviT0_T1_%03d", i);
		double t0 = now_s();
		for (uint64_t i = 0; c && i < n; i++) {
			struct cap_rec r;
			memset(&r, 0, sizeof r);
			r.rec.start = 1000 + i * 1000;
			r.rec.end = r.rec.start + 500;
			if (i % 2) {
				r.rec.type = TREC_KERNEL;
				r.rec.u.kernel.corr = i;
				r.name = names[rng() % 400];
			} else {
				r.rec.type = TREC_API;
				r.rec.u.api.corr = i + 1;
				r.name = "cudaLaunchKernel";
			}
			if (cap_conv_push(c, &r) < 0)
				_exit(1);
		}
		double push = now_s() - t0;
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		t0 = now_s();
		if (!c || cap_conv_emit_all(c) < 0 || emitted != n)
			_exit(1);
		printf("  %10" PRIu64 " records held %8.1f MiB RSS  %6.0f B a record  push %5.2f s  "
		       "emit %5.2f s\n", n, (double)ru.ru_maxrss / 1024.0,
		       (double)ru.ru_maxrss * 1024.0 / (double)n, push, now_s() - t0);
		fflush(stdout);
		cap_conv_free(c);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) == pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		printf("  capture hold: child failed\n");
}

/* A count of events: digits only, at least 1. */
static int events_arg(const char *s, uint64_t *out)
{
	char *end;
	if (!s[0] || strspn(s, "0123456789") != strlen(s))
		return -1;
	*out = strtoull(s, &end, 10);
	return *out ? 0 : -1;
}

int main(int argc, char **argv)
{
	uint64_t small = 1000000, large = 10000000;
	if (argc > 3 || (argc > 1 && events_arg(argv[1], &small) < 0) ||
	    (argc > 2 && events_arg(argv[2], &large) < 0)) {
		int help = argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
		fprintf(help ? stdout : stderr, "usage: %s [SMALL_EVENTS [LARGE_EVENTS]]  (memory "
			"events of the two synthetic traces, defaults 1000000 10000000; "
			"bench/README.md)\n", argv[0]);
		return help ? 0 : 2;
	}
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char p_small[512], p_large[512], p_gz[512];
	struct { const char *label, *path; uint64_t events; } tr[3];
	int ret = 1;

	snprintf(p_small, sizeof p_small, "%s/gpumemsim_bench_%d_small.trace", dir, (int)getpid());
	snprintf(p_large, sizeof p_large, "%s/gpumemsim_bench_%d_large.trace", dir, (int)getpid());
	snprintf(p_gz, sizeof p_gz, "%s/gpumemsim_bench_%d_small.trace.gz", dir, (int)getpid());
	tr[0].label = "small";   tr[0].path = p_small; tr[0].events = small;
	tr[1].label = "small.gz"; tr[1].path = p_gz;    tr[1].events = small;
	tr[2].label = "large";   tr[2].path = p_large; tr[2].events = large;

	printf("gpumemsim bench: %" PRIu64 " and %" PRIu64 " memory events, ~%d live allocations, "
	       "traces in %s\n\ngenerate (trace writer):\n", small, large, LIVE_TARGET, dir);
	for (int i = 0; i < 3; i++) {
		struct gen_stats gs;
		if (generate(tr[i].path, tr[i].events, &gs) < 0)
			goto out;
		printf("  %-12s %10" PRIu64 " records %8.1f MiB on disk %7.2f s %7.2f M rec/s\n",
		       tr[i].label, gs.records, (double)gs.bytes / (1 << 20), gs.secs,
		       (double)gs.records / gs.secs / 1e6);
	}
	printf("\nread (trace reader only):\n");
	for (int i = 0; i < 3; i++) {
		uint64_t n, bytes;
		double secs;
		if (read_all(tr[i].path, &n, &bytes, &secs) < 0)
			goto out;
		printf("  %-12s %10" PRIu64 " records %7.2f s %7.2f M rec/s %7.1f MiB/s of text\n",
		       tr[i].label, n, secs, (double)n / secs / 1e6,
		       (double)bytes / secs / (1 << 20));
	}
	printf("\nreplay (sim_run, one forked child per row; M ev/s = memory events/s):\n");
	for (int i = 0; i < 3; i++)
		for (const struct alloc_policy *const *p = policy_table; *p; p++)
			replay(tr[i].path, tr[i].label, *p, tr[i].events);
	printf("\ncapture hold (the converter holding records back while an NVTX range is open):\n");
	capture_hold(2000000);
	ret = 0;
out:
	for (int i = 0; i < 3 && !getenv("BENCH_KEEP"); i++)
		unlink(tr[i].path);
	return ret;
}
