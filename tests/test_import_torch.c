/*
 * test_import_torch.c: the torch-snapshot importer (traces/import_torch.c):
 * records written, empty_cache told from the allocator's own partial
 * releases and from the release-and-retry before an OOM, and bad input
 * (file:line message, no output file). The pickle path on snapshots shaped
 * like torch 2.11's _dump_snapshot (tests/data/snapshot_make.py).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "../traces/import_torch.h"
#include "../traces/trace.h"

/* Write TEXT to a fresh temp file; its name into PATH. */
static void write_input(char *path, const char *text)
{
	strcpy(path, "/tmp/gpumemsim-test-torch-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void out_path(char *path)
{
	strcpy(path, "/tmp/gpumemsim-test-torch-out-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	unlink(path);
}

/* Counts of record types and empty_cache controls in a trace. */
static void count_records(const char *path, int *counts, int *empty_caches)
{
	struct trace_reader *r = trace_reader_open(path);
	struct trace_rec rec;
	int rc;
	cr_assert_not_null(r);
	cr_assert_geq(trace_reader_status(r), 0, "%s", trace_reader_error(r));
	memset(counts, 0, TREC_COUNT * sizeof *counts);
	*empty_caches = 0;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		counts[rec.type]++;
		if (rec.type == TREC_CONTROL && rec.u.control.kind == TCTL_EMPTY_CACHE)
			(*empty_caches)++;
	}
	cr_assert_eq(rc, TRACE_EOF, "%s", trace_reader_error(r));
	cr_assert(trace_reader_trailer(r)->present);
	trace_reader_close(r);
}

Test(import_torch, records_and_full_release_is_empty_cache)
{
	char in[64], out[64], err[512];
	struct import_torch_stats st;
	int counts[TREC_COUNT], ec;
	write_input(in,
		    "segment_alloc 1048576000 2097152 0 1\n"
		    "alloc 1048576000 512 0 2\n"
		    "segment_alloc 2097152000 20971520 0 3\n"
		    "alloc 2097152000 5242880 0 4\n"
		    "free_requested 2097152000 5242880 0 5\n"
		    "free_completed 2097152000 5242880 0 5\n"
		    "segment_free 2097152000 20971520 0 6\n"
		    "alloc 1048576512 512 0 7\n");
	out_path(out);
	cr_assert_eq(import_torch_snapshot(in, out, NULL, &st, err, sizeof err), 0, "%s", err);
	count_records(out, counts, &ec);
	cr_assert_eq(counts[TREC_ALLOC], 3);
	cr_assert_eq(counts[TREC_FREE], 1, "free_requested is not a free");
	cr_assert_eq(counts[TREC_SEGMENT], 3);
	cr_assert_eq(ec, 1, "the only wholly free segment was released: empty_cache");
	cr_assert_eq(st.empty_caches, 1);
	unlink(in);
	unlink(out);
}

Test(import_torch, partial_release_is_not_empty_cache)
{
	char in[64], out[64], err[512];
	struct import_torch_stats st;
	int counts[TREC_COUNT], ec;
	/* two wholly free large segments, only one released: the allocator's GC */
	write_input(in,
		    "segment_alloc 1048576000 20971520 0 1\n"
		    "segment_alloc 2097152000 20971520 0 2\n"
		    "alloc 1048576000 5242880 0 3\n"
		    "alloc 2097152000 5242880 0 4\n"
		    "free_completed 1048576000 5242880 0 5\n"
		    "free_completed 2097152000 5242880 0 6\n"
		    "segment_free 1048576000 20971520 0 7\n"
		    "segment_alloc 3145728000 41943040 0 8\n"
		    "alloc 3145728000 41943040 0 8\n");
	out_path(out);
	cr_assert_eq(import_torch_snapshot(in, out, NULL, &st, err, sizeof err), 0, "%s", err);
	count_records(out, counts, &ec);
	cr_assert_eq(ec, 0);
	cr_assert_eq(st.partial_runs, 1);
	cr_assert_eq(counts[TREC_SEGMENT], 4);
	unlink(in);
	unlink(out);
}

Test(import_torch, release_before_oom_is_not_empty_cache)
{
	char in[64], out[64], err[512];
	struct import_torch_stats st;
	int counts[TREC_COUNT], ec;
	write_input(in,
		    "segment_alloc 1048576000 20971520 0 1\n"
		    "alloc 1048576000 5242880 0 2\n"
		    "free_completed 1048576000 5242880 0 3\n"
		    "segment_free 1048576000 20971520 0 4\n"
		    "oom 1073741824 4096 0 4\n");
	out_path(out);
	cr_assert_eq(import_torch_snapshot(in, out, NULL, &st, err, sizeof err), 0, "%s", err);
	count_records(out, counts, &ec);
	cr_assert_eq(ec, 0);
	cr_assert_eq(counts[TREC_CONTROL], 1, "the oom itself");
	cr_assert_eq(st.ooms, 1);
	unlink(in);
	unlink(out);
}

static void expect_bad(const char *text, const char *needle)
{
	char in[64], out[64], err[512] = "", want[128];
	write_input(in, text);
	out_path(out);
	cr_assert_lt(import_torch_snapshot(in, out, NULL, NULL, err, sizeof err), 0);
	snprintf(want, sizeof want, "%s:%s", in, needle);
	cr_assert(strstr(err, want), "message '%s' lacks '%s'", err, want);
	cr_assert_neq(access(out, F_OK), 0, "no output file after an error");
	unlink(in);
}

Test(import_torch, bad_input_names_file_and_line)
{
	expect_bad("alloc 1 512 0 1\nbogus line\n", "2:");
	expect_bad("alloc 1 512 0 1\nexplode 1 2 0 3\n", "2: unknown action");
	expect_bad("alloc 1 x 0 1\n", "1: bad size");
	expect_bad("alloc 1 512 0 5\nalloc 2 512 0 4\n", "2: time");
}

Test(import_torch, missing_input)
{
	char err[512];
	cr_assert_lt(import_torch_snapshot("/nonexistent/x.txt", "/tmp/never-written.trace", NULL,
					   NULL, err, sizeof err), 0);
	cr_assert(strstr(err, "/nonexistent/x.txt"));
}

/* A snapshot taken without _record_memory_history() has no entries:
 * nothing to replay is an error, and no trace is left behind. */
Test(import_torch, no_history_is_an_error)
{
	char in[64], out[64], err[512];
	write_input(in, "# a snapshot with segments only\n");
	out_path(out);
	cr_assert_eq(import_torch_snapshot(in, out, NULL, NULL, err, sizeof err), -1);
	cr_assert(strstr(err, "no allocation history"), "%s", err);
	cr_assert(strstr(err, in), "names the file: %s", err);
	cr_assert_neq(access(out, F_OK), 0, "no half-written trace");
	unlink(in);
}

/* --label: the user's labels join the trace's, replacing the metadata's
 * of the same key (batch is what explain, whatif and maxbatch group by). */
Test(import_torch, user_labels_replace_the_metadata)
{
	char in[64], out[64], meta[64], err[512];
	write_input(in, "alloc 1048576000 512 0 2\nfree_completed 1048576000 512 0 3\n");
	write_input(meta, "{\"model\": \"resnet18\", \"batch\": 16}");
	out_path(out);
	struct trace_label extra[] = {{"batch", "64"}, {"workload", "mine"}};
	cr_assert_eq(import_torch_snapshot_labeled(in, out, meta, extra, 2, NULL, err, sizeof err), 0,
		     "%s", err);
	struct trace_reader *r = trace_reader_open(out);
	cr_assert_not_null(r);
	const struct trace_header *h = trace_reader_header(r);
	const char *model = NULL, *batch = NULL, *workload = NULL;
	int nbatch = 0;
	for (uint32_t i = 0; i < h->nlabels; i++) {
		if (!strcmp(h->labels[i].key, "model"))
			model = h->labels[i].value;
		if (!strcmp(h->labels[i].key, "batch"))
			batch = h->labels[i].value, nbatch++;
		if (!strcmp(h->labels[i].key, "workload"))
			workload = h->labels[i].value;
	}
	cr_assert(model && !strcmp(model, "resnet18"));
	cr_assert(batch && !strcmp(batch, "64"), "the user's batch wins");
	cr_assert_eq(nbatch, 1);
	cr_assert(workload && !strcmp(workload, "mine"));
	trace_reader_close(r);
	unlink(in);
	unlink(meta);
	unlink(out);
}

/* `import torch-snapshot X.pickle --label batch=N`: the pickle torch 2.11's
 * _dump_snapshot writes (protocol 4: segments with blocks, device_traces
 * entries with frames, allocator_settings) through the python helper; the
 * same at protocol 2, which torch's own C++ pickler writes. */
Test(import_torch, dump_snapshot_pickle_with_label)
{
	char out[64], so[64], se[64], dir[64], args[512], err[512];
	struct import_torch_stats st;
	int counts[TREC_COUNT], ec;
	if (!th_have("python3"))
		cr_skip_test("python3 not on the PATH");
	th_tmpname(out, sizeof out, "snap_out");
	th_tmpname(so, sizeof so, "snap_so");
	th_tmpname(se, sizeof se, "snap_se");
	unlink(out);
	snprintf(args, sizeof args, "import torch-snapshot tests/data/snapshot_history.pickle -o %s "
		 "--label batch=16 --label model=tiny", out);
	cr_assert_eq(th_run(NULL, so, se, args), 0, "%s", th_slurp(se));
	char *msg = th_slurp(se);
	cr_assert(strstr(msg, "11 entries -> 4 allocs, 2 frees, 3 segment records, 1 empty_cache"),
		  "%s", msg);
	free(msg);
	count_records(out, counts, &ec);
	cr_assert_eq(counts[TREC_ALLOC], 4);
	cr_assert_eq(counts[TREC_FREE], 2);
	cr_assert_eq(ec, 1);
	struct trace_reader *r = trace_reader_open(out);
	const struct trace_header *h = trace_reader_header(r);
	int found = 0;
	for (size_t i = 0; i < h->nlabels; i++)
		found += !strcmp(h->labels[i].key, "batch") && !strcmp(h->labels[i].value, "16");
	cr_assert_eq(found, 1, "the --label batch");
	trace_reader_close(r);

	/* protocol 2 reads the same */
	strcpy(dir, "/tmp/gpumemsim_snap_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(th_sh("python3 tests/data/snapshot_make.py %s --protocol 2", dir), 0);
	snprintf(args, sizeof args, "%s/snapshot_history.pickle", dir);
	cr_assert_eq(import_torch_snapshot(args, out, NULL, &st, err, sizeof err), 0, "%s", err);
	cr_assert_eq(st.allocs, 4);
	cr_assert_eq(st.empty_caches, 1);
	th_sh("rm -rf %s", dir);
	unlink(out);
	unlink(so);
	unlink(se);
}

/* A snapshot dumped without _record_memory_history() (segments, no
 * device_traces entries): exit 1, the file named, the fix said, no trace. */
Test(import_torch, dump_snapshot_without_history_is_a_clear_error)
{
	char out[64], so[64], se[64], args[512];
	if (!th_have("python3"))
		cr_skip_test("python3 not on the PATH");
	th_tmpname(out, sizeof out, "snap_out");
	th_tmpname(so, sizeof so, "snap_so");
	th_tmpname(se, sizeof se, "snap_se");
	unlink(out);
	snprintf(args, sizeof args, "import torch-snapshot tests/data/snapshot_no_history.pickle "
		 "-o %s --label batch=16", out);
	cr_assert_eq(th_run(NULL, so, se, args), 1);
	char *msg = th_slurp(se);
	cr_assert(strstr(msg, "tests/data/snapshot_no_history.pickle: no allocation history"), "%s",
		  msg);
	cr_assert(strstr(msg, "_record_memory_history()"), "says how to record it: %s", msg);
	cr_assert_neq(access(out, F_OK), 0, "no half-written trace");
	free(msg);
	unlink(so);
	unlink(se);
}
