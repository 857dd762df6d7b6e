/*
 * test_export.c: `gpumemsim export perfetto` through the binary: a stored
 * run becomes valid Chrome-trace JSON with its memory counters and events;
 * a trace replayed under a policy adds its kernels per stream; bad inputs
 * fail clearly and leave no file.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../traces/trace.h"

struct fx {
	char dir[64], db[128];
};

static const char *bin(void)
{
	const char *b = getenv("GPUMEMSIM_BIN");
	if (!b || access(b, X_OK) != 0)
		cr_skip_test("GPUMEMSIM_BIN not set (run through make test)");
	return b;
}

static void mem(struct trace_writer *w, enum trace_rec_type type, uint64_t t, uint64_t addr,
		uint64_t bytes)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = type;
	r.start = r.end = t;
	r.u.mem.addr = addr;
	r.u.mem.bytes = bytes;
	r.u.mem.kind = TMEM_DEVICE;
	r.u.mem.source = TRACE_NO_STRING;
	cr_assert_eq(trace_writer_record(w, &r), 0);
}

/* A trace of model "m" at BATCH: two buffers of BATCH MiB each, one kernel. */
static void write_trace(const char *path, const char *batch, uint64_t mib)
{
	char err[256];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_STREAM, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_label labels[] = {{"model", "m"}, {"batch", (char *)batch}};
	struct trace_header h = {.version = 1, .producer = "test", .total_memory = 1ull << 30,
				 .labels = labels, .nlabels = 2};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	mem(w, TREC_ALLOC, 1000, 0x100000, mib << 20);
	mem(w, TREC_ALLOC, 2000000, 0x40000000, mib << 20);
	struct trace_rec k;
	memset(&k, 0, sizeof k);
	k.type = TREC_KERNEL;
	k.start = 2500000;
	k.end = 3500000;
	k.u.kernel.stream = 7;
	k.u.kernel.name = trace_writer_intern(w, "gemm_kernel");
	cr_assert_eq(trace_writer_record(w, &k), 0);
	mem(w, TREC_FREE, 4000000, 0x100000, 0);
	mem(w, TREC_FREE, 5000000, 0x40000000, 0);
	cr_assert_eq(trace_writer_close(w, 1, 0, err, sizeof err), 0, "%s", err);
}

static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A database with traces at batch 8 and 16 under pytorch, cuda_malloc and
 * optimal; the batch-16 pytorch run also at a capacity it exceeds (OOM). */
static void fx_setup(struct fx *f)
{
	const char *b = bin();
	snprintf(f->dir, sizeof f->dir, "/tmp/gpumemsim_plots_XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof f->db, "%s/r.db", f->dir);
	const char *batches[] = {"8", "16"};
	for (int i = 0; i < 2; i++) {
		char tr[160];
		snprintf(tr, sizeof tr, "%s/m-b%s.trace", f->dir, batches[i]);
		write_trace(tr, batches[i], (uint64_t)atoi(batches[i]) * 8);
		const char *pols[] = {"pytorch", "cuda_malloc", "optimal"};
		for (int p = 0; p < 3; p++)
			cr_assert_eq(sh("%s run %s --policy %s --db %s --quiet >/dev/null", b, tr,
					pols[p], f->db), 0);
	}
	cr_assert_eq(sh("%s run %s/m-b16.trace --policy pytorch --capacity 200MiB --db %s "
			"--quiet >/dev/null", b, f->dir, f->db), 0);
}

static void fx_teardown(struct fx *f)
{
	if (f->dir[0])
		sh("rm -rf '%s'", f->dir);
}

static long file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	char *buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(fp);
	return buf;
}


static struct fx F;
static void setup(void) { fx_setup(&F); }
static void teardown(void) { fx_teardown(&F); }

static int count(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* JSON validity by python3 when present (the CI image has it). */
static void assert_json(const char *path)
{
	if (sh("command -v python3 >/dev/null 2>&1") == 0)
		cr_assert_eq(sh("python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s", path),
			     0, "%s is not valid JSON", path);
}

Test(export, stored_run_counters, .init = setup, .fini = teardown)
{
	char out[256];
	snprintf(out, sizeof out, "%s/run.json", F.dir);
	/* run 1: pytorch on the batch-8 trace (two 64 MiB buffers) */
	cr_assert_eq(sh("%s export perfetto 1 --db %s -o %s", bin(), F.db, out), 0);
	char *j = slurp(out);
	cr_assert_not_null(j);
	assert_json(out);
	cr_assert_not_null(strstr(j, "\"traceEvents\":["));
	cr_assert_not_null(strstr(j, "\"name\":\"run 1: pytorch (default)"));
	cr_assert_gt(count(j, "{\"ph\":\"C\",\"name\":\"allocated\""), 1);
	cr_assert_eq(count(j, "{\"ph\":\"C\",\"name\":\"allocated\""),
		     count(j, "{\"ph\":\"C\",\"name\":\"reserved\""));
	cr_assert_not_null(strstr(j, "\"args\":{\"bytes\":134217728}"), "%s", j);
	cr_assert_not_null(strstr(j, "{\"ph\":\"i\",\"s\":\"p\",\"name\":\"peak_reserved\""), "%s", j);
	free(j);
}

Test(export, trace_kernels, .init = setup, .fini = teardown)
{
	char out[256];
	snprintf(out, sizeof out, "%s/tr.json", F.dir);
	cr_assert_eq(sh("%s export perfetto %s/m-b8.trace --policy cuda_malloc -o %s", bin(), F.dir,
			out), 0);
	char *j = slurp(out);
	cr_assert_not_null(j);
	assert_json(out);
	/* the kernel 1.5 ms after the first record, 1 ms long, on stream 7 */
	cr_assert_not_null(strstr(j, "{\"ph\":\"X\",\"name\":\"gemm_kernel\",\"pid\":2,\"tid\":7,"
				     "\"ts\":2499.000,\"dur\":1000.000"), "%s", j);
	cr_assert_not_null(strstr(j, "\"name\":\"stream 7\""));
	cr_assert_not_null(strstr(j, "\"name\":\"memory: cuda_malloc (default) (simulated)\""));
	cr_assert_not_null(strstr(j, "\"args\":{\"bytes\":134217728}"));
	free(j);
}

Test(export, bad_inputs, .init = setup, .fini = teardown)
{
	char out[256];
	snprintf(out, sizeof out, "%s/bad.json", F.dir);
	cr_assert_eq(sh("%s export perfetto 999 --db %s -o %s 2>/dev/null", bin(), F.db, out), 1);
	cr_assert_eq(file_size(out), -1);
	cr_assert_eq(sh("%s export perfetto 1 --db %s/none.db -o %s 2>/dev/null", bin(), F.dir, out), 1);
	cr_assert_eq(file_size(out), -1);
	cr_assert_eq(sh("%s export perfetto %s/none.trace --policy pytorch -o %s 2>/dev/null", bin(),
			F.dir, out), 1);
	cr_assert_eq(file_size(out), -1);
	cr_assert_eq(sh("%s export perfetto %s/m-b8.trace --policy nosuch -o %s 2>/dev/null", bin(),
			F.dir, out), 1);
	cr_assert_eq(sh("%s export perfetto %s/m-b8.trace -o %s 2>/dev/null", bin(), F.dir, out), 2);
	cr_assert_eq(sh("%s export chrome 1 -o %s 2>/dev/null", bin(), out), 2);
	cr_assert_eq(file_size(out), -1);
}
