/*
 * test_report.c: `gpumemsim report` through the binary: it writes the HTML
 * page and its Markdown twin with the key tables holding the expected
 * values (largest batch without OOM, best setting, OOM verdicts, run
 * metadata) and figures inlined; bad inputs leave no pages.
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

static int gnuplot_here(void)
{
	return sh("command -v gnuplot >/dev/null 2>&1") == 0;
}

static struct fx F;
static void setup(void) { fx_setup(&F); }
static void teardown(void) { fx_teardown(&F); }

Test(report, html_and_markdown, .init = setup, .fini = teardown)
{
	cr_assert_eq(sh("%s report --db %s -o %s/rep >/dev/null 2>&1", bin(), F.db, F.dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/rep/report.html", F.dir);
	char *h = slurp(p);
	snprintf(p, sizeof p, "%s/rep/report.md", F.dir);
	char *m = slurp(p);
	cr_assert(h && m);
	cr_assert_not_null(strstr(h, "<!DOCTYPE html>"));
	cr_assert_not_null(strstr(h, "</html>"));
	/* largest batch without OOM: pytorch at 200 MiB fits no stored batch,
	 * at 1 GiB batch 16 with 768 MiB headroom (1 GiB - 256 MiB) */
	cr_assert_not_null(strstr(m, "| m | pytorch (default) | 1.00 GiB | 16 | 256.00 MiB | 768.00 MiB (75.0%) | none stored |"), "%s", m);
	cr_assert_not_null(strstr(m, "| m | pytorch (default) | 200.00 MiB | none | - | - | 16 |"), "%s", m);
	/* the OOM verdict: 128 MiB live + 128 MiB request > 200 MiB */
	cr_assert_not_null(strstr(m, "capacity (live bytes + request = 128.0% of the device)"), "%s", m);
	cr_assert_not_null(strstr(h, "capacity (live bytes + request = 128.0% of the device)"));
	/* run metadata: the labels and the trace identity */
	cr_assert_not_null(strstr(h, "{&quot;model&quot;:&quot;m&quot;,&quot;batch&quot;:&quot;16&quot;}"));
	cr_assert_not_null(strstr(m, "gpumemsim report"));
	if (gnuplot_here()) {
		cr_assert_not_null(strstr(h, "data:image/png;base64,iVBOR"));
		cr_assert_not_null(strstr(m, "](fig-01-batch.png)"), "%s", m);
		snprintf(p, sizeof p, "%s/rep/fig-01-batch.png", F.dir);
		cr_assert_gt(file_size(p), 1000);
	}
	free(h);
	free(m);
}

Test(report, deterministic, .init = setup, .fini = teardown)
{
	cr_assert_eq(sh("%s report --db %s -o %s/a >/dev/null 2>&1 && %s report --db %s -o %s/b "
			">/dev/null 2>&1", bin(), F.db, F.dir, bin(), F.db, F.dir), 0);
	cr_assert_eq(sh("cmp -s %s/a/report.html %s/b/report.html && cmp -s %s/a/report.md "
			"%s/b/report.md", F.dir, F.dir, F.dir, F.dir), 0);
}

Test(report, bad_inputs, .init = setup, .fini = teardown)
{
	char p[256];
	cr_assert_eq(sh("%s report --db %s/none.db -o %s/r1 2>/dev/null", bin(), F.dir, F.dir), 1);
	snprintf(p, sizeof p, "%s/r1/report.html", F.dir);
	cr_assert_eq(file_size(p), -1);
	cr_assert_eq(sh("%s report --db %s --where \"policy='none'\" -o %s/r2 2>/dev/null", bin(),
			F.db, F.dir), 1);
	snprintf(p, sizeof p, "%s/r2/report.html", F.dir);
	cr_assert_eq(file_size(p), -1);
	cr_assert_eq(sh("%s report --db %s 2>/dev/null", bin(), F.db), 2);
	cr_assert_eq(sh("%s report --db %s --where \"1;2\" -o %s/r3 2>/dev/null", bin(), F.db,
			F.dir), 1);
}
