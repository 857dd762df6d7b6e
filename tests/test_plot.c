/*
 * test_plot.c: `gpumemsim plot` through the binary: every figure kind draws
 * a non-empty PNG or SVG from a small database made here, the data files
 * its script reads hold the expected rows, the same database gives the
 * same figure, and bad inputs fail clearly without leaving a figure.
 * Skips without GPUMEMSIM_BIN or gnuplot.
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

static int count_lines(const char *text, const char *prefix)
{
	int n = 0;
	size_t lp = strlen(prefix);
	for (const char *p = text; p && *p;) {
		if (!strncmp(p, prefix, lp))
			n++;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return n;
}

static struct fx F;
static void setup(void) { fx_setup(&F); }
static void teardown(void) { fx_teardown(&F); }

static void need_gnuplot(void)
{
	if (!gnuplot_here())
		cr_skip_test("gnuplot not installed");
}

Test(plot, timeline_png_and_data, .init = setup, .fini = teardown)
{
	need_gnuplot();
	cr_assert_eq(sh("%s plot timeline --db %s --where \"trace_path LIKE '%%b16%%'\" -o %s/t.png "
			"--data-dir %s/dd", bin(), F.db, F.dir, F.dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/t.png", F.dir);
	cr_assert_gt(file_size(p), 1000);
	char *png = slurp(p);
	cr_assert(png && !memcmp(png, "\x89PNG", 4));
	free(png);
	snprintf(p, sizeof p, "%s/dd/timeline.dat", F.dir);
	char *d = slurp(p);
	cr_assert_not_null(d);
	/* four runs of the b16 trace: pytorch at two capacities, cuda_malloc, optimal */
	cr_assert_eq(count_lines(d, "# run "), 4, "%s", d);
	cr_assert_not_null(strstr(d, "pytorch (default)"));
	/* peak: two 128 MiB buffers = 0.25 GiB allocated */
	cr_assert_not_null(strstr(d, " 0.250000 "), "%s", d);
	free(d);
	snprintf(p, sizeof p, "%s/dd/oom.dat", F.dir);
	d = slurp(p);
	cr_assert_eq(count_lines(d, "#"), 1);
	cr_assert_eq(count_lines(d, "?"), 0, "the 200 MiB run's OOM is marked: %s", d);
	free(d);
}

Test(plot, batch_rows, .init = setup, .fini = teardown)
{
	need_gnuplot();
	cr_assert_eq(sh("%s plot batch --db %s --label model=m -o %s/b.svg --data-dir %s/dd",
			bin(), F.db, F.dir, F.dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/b.svg", F.dir);
	char *svg = slurp(p);
	cr_assert(svg && strstr(svg, "<svg"));
	cr_assert_not_null(strstr(svg, "batch size"));
	free(svg);
	snprintf(p, sizeof p, "%s/dd/batch.dat", F.dir);
	char *d = slurp(p);
	cr_assert_not_null(d);
	cr_assert_eq(count_lines(d, "# pytorch (default)"), 1, "%s", d);
	cr_assert_eq(count_lines(d, "# cuda_malloc (default)"), 1, "%s", d);
	cr_assert_eq(count_lines(d, "# optimal"), 0, "optimal is the floor, not a series");
	cr_assert_eq(count_lines(d, "8 "), 2, "%s", d);
	cr_assert_eq(count_lines(d, "16 "), 2, "one point per setting and batch: %s", d);
	free(d);
	snprintf(p, sizeof p, "%s/dd/floor.dat", F.dir);
	d = slurp(p);
	cr_assert(d && count_lines(d, "8 ") == 1 && count_lines(d, "16 ") == 1, "%s", d);
	free(d);
	/* the latest pytorch run at batch 16 is the OOM at 200 MiB */
	snprintf(p, sizeof p, "%s/dd/oom.dat", F.dir);
	d = slurp(p);
	cr_assert(d && count_lines(d, "16 ") == 1, "%s", d);
	free(d);
}

Test(plot, frag_and_compare, .init = setup, .fini = teardown)
{
	need_gnuplot();
	cr_assert_eq(sh("%s plot frag --db %s -o %s/f.png --data-dir %s/df", bin(), F.db, F.dir,
			F.dir), 0);
	cr_assert_eq(sh("%s plot compare --db %s --where \"trace_path LIKE '%%b8%%'\" -o %s/c.png "
			"--data-dir %s/dc", bin(), F.db, F.dir, F.dir), 0);
	char p[256];
	snprintf(p, sizeof p, "%s/f.png", F.dir);
	cr_assert_gt(file_size(p), 1000);
	snprintf(p, sizeof p, "%s/c.png", F.dir);
	cr_assert_gt(file_size(p), 1000);
	snprintf(p, sizeof p, "%s/df/frag.dat", F.dir);
	char *d = slurp(p);
	/* settings: pytorch, cuda_malloc, optimal; columns: two traces */
	cr_assert(d && count_lines(d, "\"") == 3, "%s", d);
	cr_assert_not_null(strstr(d, "\"cuda_malloc (default)\" 0.0000 0.0000"), "%s", d);
	free(d);
	snprintf(p, sizeof p, "%s/dc/compare.dat", F.dir);
	d = slurp(p);
	cr_assert(d && count_lines(d, "1 \"") + count_lines(d, "0 \"") == 2, "%s", d);
	cr_assert_null(strstr(d, "optimal"));
	free(d);
}

Test(plot, same_db_same_figure, .init = setup, .fini = teardown)
{
	need_gnuplot();
	for (int i = 0; i < 2; i++)
		cr_assert_eq(sh("%s plot compare --db %s --where \"trace_path LIKE '%%b16%%'\" "
				"-o %s/c%d.svg --data-dir %s/d%d", bin(), F.db, F.dir, i, F.dir, i), 0);
	cr_assert_eq(sh("cmp -s %s/c0.svg %s/c1.svg && diff -r %s/d0 %s/d1 >/dev/null", F.dir,
			F.dir, F.dir, F.dir), 0);
}

Test(plot, bad_inputs, .init = setup, .fini = teardown)
{
	char out[256], log[256];
	snprintf(out, sizeof out, "%s/bad.png", F.dir);
	snprintf(log, sizeof log, "%s/err.txt", F.dir);
	cr_assert_eq(sh("%s plot timeline --db %s/missing.db -o %s 2>%s", bin(), F.dir, out, log), 1);
	char *e = slurp(log);
	cr_assert(e && strstr(e, "missing.db"), "%s", e);
	free(e);
	cr_assert_eq(file_size(out), -1);
	cr_assert_eq(sh("%s plot nosuch --db %s -o %s 2>/dev/null", bin(), F.db, out), 2);
	cr_assert_eq(sh("%s plot timeline --db %s -o %s/x.jpg 2>/dev/null", bin(), F.db, F.dir), 2);
	cr_assert_eq(sh("%s plot pareto --db %s -o %s 2>/dev/null", bin(), F.db, out), 1);
	cr_assert_eq(sh("%s plot frag --db %s --where \"policy='nope'\" -o %s 2>%s", bin(), F.db,
			out, log), 1);
	e = slurp(log);
	cr_assert(e && strstr(e, "no stored run"), "%s", e);
	free(e);
	cr_assert_eq(sh("%s plot frag --db %s --where \"1; DROP TABLE runs\" -o %s 2>%s", bin(),
			F.db, out, log), 1);
	e = slurp(log);
	cr_assert(e && strstr(e, "';'"), "%s", e);
	free(e);
	cr_assert_eq(sh("%s plot frag --db %s --where \"1) --\" -o %s 2>/dev/null", bin(), F.db,
			out), 1);
	if (gnuplot_here()) {
		cr_assert_eq(sh("%s plot timeline --db %s -o %s 2>%s", bin(), F.db, out, log), 1);
		e = slurp(log);
		cr_assert(e && strstr(e, "one trace"), "%s", e);
		free(e);
	}
	cr_assert_eq(file_size(out), -1, "no figure after a failure");
	/* the database is untouched */
	cr_assert_eq(sh("%s table --db %s | grep -q cuda_malloc", bin(), F.db), 0);
}
