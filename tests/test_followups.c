/*
 * test_followups.c: temporary traces go to TMPDIR (base/tmpfile.c), also
 * where the torch snapshot importer converts a pickle and where validate
 * imports (torch-truth) or filters (async-truth) a run before replaying it:
 * with TMPDIR a directory that does not exist they fail naming it, with a
 * fresh one they work and leave it empty.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../sim/validate_truth.h"
#include "../traces/import_torch.h"
#include "helpers.h"

/* A fresh directory for TMPDIR, and in MISSING a path inside it that does
 * not exist (the same directory's, so both fit the same buffers). */
static void tmpdirs(char fresh[64], char missing[96])
{
	snprintf(fresh, 64, "/tmp/gpumemsim_fu_tmpdir_XXXXXX");
	cr_assert_not_null(mkdtemp(fresh));
	snprintf(missing, 96, "%s/missing", fresh);
}

/* Is directory DIR empty (nothing left behind in it)? */
static int dir_empty(const char *dir)
{
	return th_sh("test -z \"$(ls -A '%s')\"", dir) == 0;
}

Test(followups, torch_pickle_temporary_goes_to_tmpdir)
{
	char fresh[64], missing[96], out[64], err[1024];
	tmpdirs(fresh, missing);
	th_tmpname(out, sizeof out, "fu_snap_out");
	unlink(out);
	cr_assert_eq(setenv("TMPDIR", missing, 1), 0);
	cr_assert_eq(import_torch_snapshot("tests/data/snapshot_history.pickle", out, NULL, NULL,
					   err, sizeof err), -1);
	cr_assert(strstr(err, "temporary file") && strstr(err, missing), "%s", err);
	cr_assert_eq(th_file_size(out), -1, "no trace written on the error");
	if (th_have("python3")) {
		cr_assert_eq(setenv("TMPDIR", fresh, 1), 0);
		cr_assert_eq(import_torch_snapshot("tests/data/snapshot_history.pickle", out, NULL,
						   NULL, err, sizeof err), 0, "%s", err);
		cr_assert(dir_empty(fresh), "the converted text is removed from %s", fresh);
		unlink(out);
	}
	rmdir(fresh);
}

Test(followups, validate_torch_truth_temporary_goes_to_tmpdir)
{
	char fresh[64], missing[96], dir[1024], err[1024];
	const char *shared = getenv("GPUMEMSIM_SHARED");
	struct stat sb;
	snprintf(dir, sizeof dir, "%s/data/torch-allocator-truth", shared ? shared : "../shared");
	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
		cr_skip_test("no ../shared/data/torch-allocator-truth");
	tmpdirs(fresh, missing);
	struct validate_opts o = {.only = "alexnet-b16-default.", .addresses = DEVICE_ADDR_RECORDED};
	struct validate_report r;
	cr_assert_eq(setenv("TMPDIR", missing, 1), 0);
	cr_assert_eq(validate_torch_truth(dir, &o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "temporary file") && strstr(err, missing), "%s", err);
	validate_report_free(&r);
	cr_assert_eq(setenv("TMPDIR", fresh, 1), 0);
	cr_assert_eq(validate_torch_truth(dir, &o, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.runs, 1);
	validate_report_free(&r);
	cr_assert(dir_empty(fresh), "the imported trace is removed from %s", fresh);
	rmdir(fresh);
}

Test(followups, validate_async_truth_temporary_goes_to_tmpdir)
{
	char fresh[64], missing[96], err[1024];
	tmpdirs(fresh, missing);
	struct validate_opts o = {.only = "b16"};
	struct validate_report r;
	cr_assert_eq(setenv("TMPDIR", missing, 1), 0);
	cr_assert_eq(validate_async_truth("traces/jax/async", &o, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "temporary file") && strstr(err, missing), "%s", err);
	validate_report_free(&r);
	cr_assert_eq(setenv("TMPDIR", fresh, 1), 0);
	cr_assert_eq(validate_async_truth("traces/jax/async", &o, &r, err, sizeof err), 0, "%s",
		     err);
	cr_assert_eq(r.runs, 1);
	validate_report_free(&r);
	cr_assert(dir_empty(fresh), "the filtered capture is removed from %s", fresh);
	rmdir(fresh);
}
