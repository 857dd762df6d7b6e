/*
 * helpers.c: the shared end-to-end test helpers (helpers.h). Tests run in
 * parallel, so every file they make has a unique name (mkstemp, mkdtemp).
 */
#include "helpers.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../policies/policy.h"

/* Skipping (not failing) keeps a bare `build/test_all` usable. */
const char *th_bin(void)
{
	const char *b = getenv("GPUMEMSIM_BIN");
	if (!b || access(b, X_OK) != 0)
		cr_skip_test("GPUMEMSIM_BIN not set (run through make test)");
	return b;
}

/* printf-style so callers need no buffer of their own. */
int th_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Output goes to files so tests can check stdout and stderr apart. */
int th_run(const char *cd, const char *out, const char *err, const char *args)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "%s%s%s'%s' %s >'%s' 2>'%s'", cd ? "cd '" : "", cd ? cd : "",
		 cd ? "' && " : "", th_bin(), args, out, err);
	int st = system(cmd);
	cr_assert(WIFEXITED(st), "%s did not exit", cmd);
	return WEXITSTATUS(st);
}

/* Binary-safe up to the first NUL, which is all the tests compare. */
char *th_slurp(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	long n;
	if (!fp)
		return NULL;
	if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0)
		goto out;
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
out:
	fclose(fp);
	return buf;
}

/* -1 rather than an assertion: tests check that failures leave no file. */
long th_file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Through the shell, as the binary itself will look for it. */
int th_have(const char *tool)
{
	return th_sh("command -v '%s' >/dev/null 2>&1", tool) == 0;
}

/* The file is created (and closed) so the name stays reserved. */
void th_tmpname(char *buf, size_t len, const char *stem)
{
	snprintf(buf, len, "/tmp/gpumemsim_%s_XXXXXX", stem);
	int fd = mkstemp(buf);
	cr_assert(fd >= 0);
	close(fd);
}

/* Tests that replay text write it to a file: the reader takes paths only. */
void th_tmpfile(char *buf, size_t len, const char *stem, const char *text)
{
	th_tmpname(buf, len, stem);
	FILE *f = fopen(buf, "w");
	cr_assert_not_null(f, "%s", buf);
	cr_assert(fputs(text, f) >= 0);
	cr_assert_eq(fclose(f), 0);
}

/* One stream so a test sees messages where they came, next to the output. */
int th_capture(const char *cmd, char *out, size_t len)
{
	char full[4096];
	snprintf(full, sizeof full, "%s 2>&1", cmd);
	FILE *p = popen(full, "r");
	cr_assert_not_null(p, "%s", full);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* SQLite in WAL mode leaves two side files next to the database. */
void th_rm_db(const char *path)
{
	char b[300];
	unlink(path);
	snprintf(b, sizeof b, "%s-wal", path);
	unlink(b);
	snprintf(b, sizeof b, "%s-shm", path);
	unlink(b);
}

/* Device memory on stream 0 with no source string: the common case. */
void th_mem(struct trace_writer *w, enum trace_rec_type type, uint64_t t, uint64_t addr,
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

/* The header is written at once, so the labels need not outlive the call. */
struct trace_writer *th_batch_writer(const char *path, uint64_t batch, const char *model)
{
	char err[256], bstr[32];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	snprintf(bstr, sizeof bstr, "%" PRIu64, batch);
	struct trace_label labels[] = {{"model", (char *)model}, {"batch", bstr}};
	struct trace_header h = {.version = 1, .producer = "test",
				 .labels = model ? labels : labels + 1, .nlabels = model ? 2 : 1};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	return w;
}

struct th_stat_query { const char *name; int64_t v; };

static void th_stat_pick(void *ctx, const char *name, int64_t v)
{
	struct th_stat_query *q = ctx;
	if (!strcmp(name, q->name))
		q->v = v;
}

/* Policies only emit their statistics through a callback: pick one out. */
int64_t th_policy_stat(const struct alloc_policy *p, void *st, const char *name)
{
	struct th_stat_query q = {name, -1};
	p->stats(st, th_stat_pick, &q);
	return q.v;
}

/* The kernel on stream 7 gives the export a second track to show. */
void th_write_model_trace(const char *path, const char *batch, uint64_t mib)
{
	char err[256];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_STREAM, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_label labels[] = {{"model", "m"}, {"batch", (char *)batch}};
	struct trace_header h = {.version = 1, .producer = "test", .total_memory = 1ull << 30,
				 .labels = labels, .nlabels = 2};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	th_mem(w, TREC_ALLOC, 1000, 0x100000, mib << 20);
	th_mem(w, TREC_ALLOC, 2000000, 0x40000000, mib << 20);
	struct trace_rec k;
	memset(&k, 0, sizeof k);
	k.type = TREC_KERNEL;
	k.start = 2500000;
	k.end = 3500000;
	k.u.kernel.stream = 7;
	k.u.kernel.name = trace_writer_intern(w, "gemm_kernel");
	cr_assert_eq(trace_writer_record(w, &k), 0);
	th_mem(w, TREC_FREE, 4000000, 0x100000, 0);
	th_mem(w, TREC_FREE, 5000000, 0x40000000, 0);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

/* Two batches x three policies plus one OOM: every table and figure of the
 * report has rows, and "largest batch without OOM" has an answer. */
void th_results_setup(struct th_results *f)
{
	const char *b = th_bin();
	snprintf(f->dir, sizeof f->dir, "/tmp/gpumemsim_plots_XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof f->db, "%s/r.db", f->dir);
	const char *batches[] = {"8", "16"};
	for (int i = 0; i < 2; i++) {
		char tr[160];
		snprintf(tr, sizeof tr, "%s/m-b%s.trace", f->dir, batches[i]);
		th_write_model_trace(tr, batches[i], (uint64_t)atoi(batches[i]) * 8);
		const char *pols[] = {"pytorch", "cuda_malloc", "optimal"};
		for (int p = 0; p < 3; p++)
			cr_assert_eq(th_sh("%s run %s --policy %s --db %s --quiet >/dev/null", b, tr,
					   pols[p], f->db), 0);
	}
	cr_assert_eq(th_sh("%s run %s/m-b16.trace --policy pytorch --capacity 200MiB --db %s "
			   "--quiet >/dev/null", b, f->dir, f->db), 0);
}

/* Safe after a setup that failed half-way (the directory may not exist). */
void th_results_teardown(struct th_results *f)
{
	if (f->dir[0])
		th_sh("rm -rf '%s'", f->dir);
}

void th_sb_printf(struct th_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	char line[512];
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	cr_assert(n > 0 && (size_t)n < sizeof line);
	if (b->n + (size_t)n + 1 > b->cap) {
		b->cap = (b->cap + (size_t)n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		cr_assert_not_null(b->s);
	}
	memcpy(b->s + b->n, line, (size_t)n + 1);
	b->n += (size_t)n;
	for (const char *l = line; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		if (strchr("afkcmyrpxg", l[0]) && l[1] == ' ')
			b->recs++;
}

void th_sb_end(struct th_sbuf *b)
{
	unsigned n = b->recs;
	th_sb_printf(b, "end %u 0\n", n);
}
