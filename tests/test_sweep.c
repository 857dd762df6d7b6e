/*
 * test_sweep.c: `gpumemsim sweep` and `gpumemsim merge`, through the library
 * (result encoding, shards, trace expansion, conf checks) and the binary
 * (env GPUMEMSIM_BIN, set by `make test`): resuming skips stored runs and
 * never duplicates one, Ctrl-C (SIGINT) leaves a consistent database that a
 * rerun completes, two sweeps racing on one database store each combination
 * once, -j does not change the stored rows, and a sharded sweep merged
 * equals the unsharded one. Traces are written by the tests themselves.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../sim/store.h"
#include "../sim/sweep.h"
#include "helpers.h"

struct env {
	char dir[64];
	char path[512];   /* scratch for paths */
};

static void env_init(struct env *e)
{
	snprintf(e->dir, sizeof e->dir, "/tmp/gpumemsim_sweep_XXXXXX");
	cr_assert_not_null(mkdtemp(e->dir));
}

static void env_fini(struct env *e)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->dir);
	cr_assert_eq(system(cmd), 0);
}

static const char *in_dir(struct env *e, const char *name)
{
	snprintf(e->path, sizeof e->path, "%s/%s", e->dir, name);
	return e->path;
}

/*
 * A trace of NALLOC allocations with sizes from a fixed generator (seeded by
 * SEED), at most 48 live at a time, freed in a scrambled order: enough
 * reuse and splitting that policies differ.
 */
static void write_trace(const char *path, unsigned seed, unsigned nalloc, const char *batch)
{
	char err[256];
	struct trace_writer *w = trace_writer_open(path, TRACE_W_ATOMIC, err, sizeof err);
	cr_assert_not_null(w, "%s", err);
	struct trace_label labels[] = {{"batch", (char *)batch}, {"model", "synthetic"}};
	struct trace_header h = {.version = 1, .producer = "test_sweep",
				 .total_memory = 8ull << 30, .labels = labels, .nlabels = 2};
	cr_assert_eq(trace_writer_header(w, &h), 0);
	uint64_t live[48] = {0}, t = 1000, x = seed * 2654435761u + 1;
	for (unsigned i = 0; i < nalloc; i++) {
		unsigned slot = (unsigned)(x >> 7) % 48;
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		if (live[slot]) {
			th_mem(w, TREC_FREE, t += 10, live[slot], 0);
			live[slot] = 0;
		}
		uint64_t bytes = 512 + (x >> 33) % (24u << 20);
		uint64_t addr = 0x7f0000000000ull + (uint64_t)i * (32u << 20);
		th_mem(w, TREC_ALLOC, t += 10, addr, bytes);
		live[slot] = addr;
	}
	for (unsigned s = 0; s < 48; s++)
		if (live[s])
			th_mem(w, TREC_FREE, t += 10, live[s], 0);
	cr_assert_eq(trace_writer_close(&w, 1, 0, err, sizeof err), 0, "%s", err);
}

/* Run `gpumemsim ARGS` with stdout and stderr in DIR/out, DIR/err. */
static int sh(struct env *e, const char *args)
{
	return th_run(e->dir, "out", "err", args);
}

static char *slurp(struct env *e, const char *name)
{
	char *s = th_slurp(in_dir(e, name));
	cr_assert_not_null(s, "%s unreadable", name);
	return s;
}

struct dump {
	FILE *f;
};

static int dump_row(void *ctx, int ncols, const char *const *cols)
{
	struct dump *d = ctx;
	for (int i = 0; i < ncols; i++)
		fprintf(d->f, "%s%s", i ? "|" : "", cols[i] ? cols[i] : "NULL");
	fputc('\n', d->f);
	return 0;
}

/* The rows of SQL in DB as text (one line a row). */
static char *query(struct env *e, const char *db, const char *sql)
{
	char err[512], *buf = NULL;
	size_t len = 0;
	struct store *s = store_open(in_dir(e, db), err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	struct dump d = {open_memstream(&buf, &len)};
	cr_assert_not_null(d.f);
	int n = store_query(s, sql, NULL, 0, dump_row, &d, err, sizeof err);
	cr_assert_geq(n, 0, "%s", err);
	fclose(d.f);
	store_close(s);
	return buf;
}

static long count(struct env *e, const char *db, const char *sql)
{
	char *r = query(e, db, sql);
	long n = strtol(r, NULL, 10);
	free(r);
	return n;
}

/* Everything stored about every run, by key, without ids: what must not
 * depend on -j, on shards or on completion order. */
static const char dump_sql[] =
	"SELECT k.key, k.addresses, r.trace_path, r.trace_crc32, r.trace_bytes, r.labels_json,"
	" r.policy, r.conf, r.capacity, r.tool_version, r.complete, r.allocs, r.frees,"
	" r.peak_allocated, r.peak_requested, r.peak_reserved, r.device_allocs, r.device_frees,"
	" r.fragmentation, r.oom, r.num_ooms, r.oom_t_ns, r.oom_bytes, r.oom_line,"
	" r.oom_allocated, r.oom_reserved, r.oom_largest_free, r.oom_cached_free,"
	" r.trace_duration_ns, r.sim_duration_ns,"
	" (SELECT group_concat(key||'='||value, ',') FROM run_labels WHERE run_id=r.id),"
	" (SELECT group_concat(name||'='||value, ',') FROM run_stats WHERE run_id=r.id),"
	" (SELECT group_concat(t_ns||':'||allocated||':'||reserved, ',') FROM timeline"
	"   WHERE run_id=r.id),"
	" (SELECT group_concat(kind||':'||t_ns||':'||bytes||':'||line||':'||detail, ',')"
	"   FROM events WHERE run_id=r.id)"
	" FROM runs r JOIN run_keys k ON k.run_id=r.id ORDER BY k.key";

/* The database is whole: SQLite's own check, a key per run, no orphans,
 * every run with its timeline. */
static void assert_consistent(struct env *e, const char *db)
{
	char *ic = query(e, db, "PRAGMA integrity_check");
	cr_assert_str_eq(ic, "ok\n");
	free(ic);
	cr_assert_eq(count(e, db, "SELECT count(*) FROM runs"),
		     count(e, db, "SELECT count(*) FROM run_keys"));
	cr_assert_eq(count(e, db, "SELECT count(*) - count(DISTINCT key) FROM run_keys"), 0);
	cr_assert_eq(count(e, db, "SELECT (SELECT count(*) FROM timeline WHERE run_id NOT IN"
			   " (SELECT id FROM runs)) + (SELECT count(*) FROM run_labels WHERE"
			   " run_id NOT IN (SELECT id FROM runs)) + (SELECT count(*) FROM runs"
			   " WHERE id NOT IN (SELECT run_id FROM timeline))"), 0);
}

static void make_traces(struct env *e, unsigned nalloc)
{
	char p[512];
	snprintf(p, sizeof p, "%s/tr", e->dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	write_trace(in_dir(e, "tr/a.trace"), 1, nalloc, "16");
	write_trace(in_dir(e, "tr/b.trace.gz"), 2, nalloc, "64");
	write_trace(in_dir(e, "tr/c.trace"), 3, nalloc, "128");
}

#define SWEEP_ARGS "sweep --traces tr --policies pytorch bfc cuda_malloc buddy " \
	"--confs pytorch= pytorch=expandable_segments:True allow_growth:true " \
	"--capacities default 1GiB --no-progress"
#define SWEEP_JOBS (3 * (2 + 1 + 1 + 1) * 2)

/* ------------------------------------------------------------ library */

Test(sweep, result_encoding_round_trips_and_rejects_truncation)
{
	struct env e;
	char err[512], *buf = NULL;
	size_t len = 0;
	struct sim_result r, d;
	env_init(&e);
	write_trace(in_dir(&e, "t.trace"), 7, 300, "8");
	struct sim_options o = {.trace_path = e.path, .policy = policy_find("pytorch"),
				.conf = "max_split_size_mb:64", .capacity = 64u << 20};
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	cr_assert(r.oom, "a 64 MiB device must run out of memory");
	cr_assert_eq(sweep_encode_result(&r, &buf, &len), 0);
	cr_assert_eq(sweep_decode_result(buf, len, &d), 0);
	cr_assert_str_eq(d.trace_path, r.trace_path);
	cr_assert_str_eq(d.conf, "max_split_size_mb:64");
	cr_assert_eq(d.nlabels, 2);
	cr_assert_str_eq(d.labels[1].value, "synthetic");
	cr_assert_eq(d.peak_reserved, r.peak_reserved);
	cr_assert_eq(d.oom_line, r.oom_line);
	cr_assert_eq(d.oom_largest_free, r.oom_largest_free);
	cr_assert_eq(d.fragmentation, r.fragmentation);
	cr_assert_eq(d.nstats, r.nstats);
	cr_assert_eq(d.ntimeline, r.ntimeline);
	cr_assert_eq(d.nevents, r.nevents);
	cr_assert_eq(memcmp(d.timeline, r.timeline, r.ntimeline * sizeof *r.timeline), 0);
	cr_assert_str_eq(d.events[0].detail, r.events[0].detail);
	/* fields added after the first protocol travel too */
	cr_assert_str_eq(d.oom_verdict, r.oom_verdict);
	cr_assert_gt(strlen(d.oom_verdict), 0);
	cr_assert_eq(d.oom_limit, r.oom_limit);
	cr_assert_eq(d.timed, r.timed);
	cr_assert_eq(d.step_count, r.step_count);
	cr_assert_eq(d.npeak_live, r.npeak_live);
	cr_assert_eq(memcmp(d.peak_live, r.peak_live, r.npeak_live * sizeof *r.peak_live), 0);
	cr_assert_eq(d.nranges, r.nranges);
	cr_assert_eq(d.gpu_busy_fraction, r.gpu_busy_fraction);
	cr_assert_eq(d.nsteps, r.nsteps);
	if (r.nsteps) /* memcmp of two NULLs is undefined even for 0 bytes */
		cr_assert_eq(memcmp(d.step_gpu_ns, r.step_gpu_ns, r.nsteps * sizeof *r.step_gpu_ns), 0);
	sim_result_free(&d);
	for (size_t cut = 0; cut < len; cut += 1 + cut / 16)
		cr_assert_eq(sweep_decode_result(buf, cut, &d), -1, "cut at %zu decoded", cut);
	free(buf);
	sim_result_free(&r);
	env_fini(&e);
}

Test(sweep, shard_specs)
{
	unsigned i, n;
	cr_assert_eq(sweep_parse_shard("3/8", &i, &n), 0);
	cr_assert_eq(i, 3);
	cr_assert_eq(n, 8);
	cr_assert_eq(sweep_parse_shard("1/1", &i, &n), 0);
	const char *bad[] = {"0/4", "5/4", "1/0", "1", "/2", "1/2x", "a/b", "-1/2", ""};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
		cr_assert_eq(sweep_parse_shard(bad[k], &i, &n), -1, "'%s' accepted", bad[k]);
}

Test(sweep, expands_directories_and_patterns_sorted)
{
	struct env e;
	char **paths, err[512];
	size_t n;
	env_init(&e);
	make_traces(&e, 20);
	FILE *f = fopen(in_dir(&e, "tr/notes.txt"), "w");
	cr_assert_not_null(f);
	fclose(f);
	const char *args[] = {in_dir(&e, "tr")};
	char a0[512];
	snprintf(a0, sizeof a0, "%s", args[0]);
	args[0] = a0;
	cr_assert_eq(sweep_expand_traces(args, 1, &paths, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n, 3);
	cr_assert(strstr(paths[0], "/a.trace") && strstr(paths[1], "/b.trace.gz") &&
		  strstr(paths[2], "/c.trace"));
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	char pat[512], dup[512];
	snprintf(pat, sizeof pat, "%s/tr/*.trace", e.dir);
	snprintf(dup, sizeof dup, "%s/tr/c.trace", e.dir);
	const char *args2[] = {dup, pat};
	cr_assert_eq(sweep_expand_traces(args2, 2, &paths, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n, 2, "c.trace is named twice but listed once");
	cr_assert(strstr(paths[0], "/c.trace") && strstr(paths[1], "/a.trace"));
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	snprintf(pat, sizeof pat, "%s/tr/*.nothing", e.dir);
	const char *args3[] = {pat};
	cr_assert_eq(sweep_expand_traces(args3, 1, &paths, &n, err, sizeof err), -1);
	cr_assert(strstr(err, "no trace matches"), "%s", err);
	env_fini(&e);
}

Test(sweep, conf_check_names_the_knob)
{
	char err[512];
	cr_assert_eq(sweep_check_conf(policy_find("pytorch"), "expandable_segments:True", err,
				      sizeof err), 0, "%s", err);
	cr_assert_eq(sweep_check_conf(policy_find("pytorch"), "", err, sizeof err), 0);
	cr_assert_eq(sweep_check_conf(policy_find("pytorch"), "max_splt_size_mb:64", err,
				      sizeof err), -1);
	cr_assert(strstr(err, "max_splt_size_mb"), "%s", err);
	cr_assert_eq(sweep_check_conf(policy_find("cuda_malloc"), "allow_growth:true", err,
				      sizeof err), -1);
}

/* ------------------------------------------------------------ binary */

Test(sweep, rerun_skips_stored_runs_and_never_duplicates)
{
	struct env e;
	th_bin();
	env_init(&e);
	make_traces(&e, 200);
	/* first a part of the sweep: one capacity */
	cr_assert_eq(sh(&e, "sweep --traces tr --policies pytorch bfc cuda_malloc buddy "
			"--confs pytorch= pytorch=expandable_segments:True allow_growth:true "
			"--capacities 1GiB --no-progress --db r.db -j 2 --json"), 0);
	char *o = slurp(&e, "out");
	cr_assert(strstr(o, "\"jobs\":15,\"done\":15,\"skipped\":0,\"failed\":0"), "%s", o);
	free(o);
	/* the whole sweep: the stored half is skipped */
	cr_assert_eq(sh(&e, SWEEP_ARGS " --db r.db -j 2 --json"), 0);
	o = slurp(&e, "out");
	cr_assert(strstr(o, "\"jobs\":30,\"done\":15,\"skipped\":15,\"failed\":0"), "%s", o);
	free(o);
	/* once more: nothing to do */
	cr_assert_eq(sh(&e, SWEEP_ARGS " --db r.db -j 2 --json"), 0);
	o = slurp(&e, "out");
	cr_assert(strstr(o, "\"done\":0,\"skipped\":30"), "%s", o);
	free(o);
	cr_assert_eq(count(&e, "r.db", "SELECT count(*) FROM runs"), SWEEP_JOBS);
	assert_consistent(&e, "r.db");
	/* 'default' capacity and the header's 8 GiB are one combination */
	cr_assert_eq(sh(&e, "sweep --traces tr/a.trace --policies pytorch --capacities 8GiB "
			"default --no-progress --db r.db --json"), 0);
	o = slurp(&e, "out");
	cr_assert(strstr(o, "\"jobs\":1,\"done\":0,\"skipped\":1"), "%s", o);
	free(o);
	env_fini(&e);
}

static pid_t spawn_sweep(struct env *e, const char *db, int jobs)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "cd '%s' && exec '%s' " SWEEP_ARGS " --capacities 2GiB 3GiB "
		 "4GiB 5GiB 6GiB 7GiB --db %s -j %d >out.%d 2>err.%d", e->dir, th_bin(), db, jobs,
		 jobs, jobs);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* A fresh database made before the sweep starts, so the test can read it. */
static void create_db(struct env *e, const char *db)
{
	char err[512];
	struct store *s = store_open(in_dir(e, db), err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	store_close(s);
}

Test(sweep, sigint_leaves_a_consistent_database_that_a_rerun_completes, .timeout = 120)
{
	struct env e;
	int st;
	th_bin();
	env_init(&e);
	make_traces(&e, 40000);
	create_db(&e, "i.db");
	pid_t pid = spawn_sweep(&e, "i.db", 2);
	/* wait for a few stored runs, then interrupt mid-sweep */
	long n = 0;
	for (int i = 0; i < 6000 && n < 3; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
		n = count(&e, "i.db", "SELECT count(*) FROM runs");
	}
	cr_assert_geq(n, 3, "the sweep stored nothing");
	cr_assert_eq(kill(pid, SIGINT), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	cr_assert_eq(WEXITSTATUS(st), 130, "exit %d", WEXITSTATUS(st));
	char *o = slurp(&e, "out.2");
	cr_assert(strstr(o, "interrupted"), "%s", o);
	free(o);
	long stored = count(&e, "i.db", "SELECT count(*) FROM runs");
	cr_assert_lt(stored, 3 * 5 * 8, "the sweep finished before the signal");
	assert_consistent(&e, "i.db");
	/* the rerun runs exactly what is missing */
	cr_assert_eq(sh(&e, SWEEP_ARGS " --capacities 2GiB 3GiB 4GiB 5GiB 6GiB 7GiB --db i.db "
			"-j 2 --json"), 0);
	o = slurp(&e, "out");
	char want[128];
	snprintf(want, sizeof want, "\"jobs\":%d,\"done\":%ld,\"skipped\":%ld,\"failed\":0",
		 3 * 5 * 8, 3 * 5 * 8 - stored, stored);
	cr_assert(strstr(o, want), "want %s in %s", want, o);
	free(o);
	cr_assert_eq(count(&e, "i.db", "SELECT count(*) FROM runs"), 3 * 5 * 8);
	assert_consistent(&e, "i.db");
	env_fini(&e);
}

Test(sweep, racing_sweeps_store_each_combination_once, .timeout = 120)
{
	struct env e;
	int st;
	th_bin();
	env_init(&e);
	make_traces(&e, 3000);
	create_db(&e, "race.db");
	pid_t a = spawn_sweep(&e, "race.db", 1);
	pid_t b = spawn_sweep(&e, "race.db", 2);
	cr_assert_eq(waitpid(a, &st, 0), a);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_eq(waitpid(b, &st, 0), b);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_eq(count(&e, "race.db", "SELECT count(*) FROM runs"), 3 * 5 * 8);
	assert_consistent(&e, "race.db");
	env_fini(&e);
}

Test(sweep, jobs_and_shards_merged_give_the_same_rows, .timeout = 120)
{
	struct env e;
	th_bin();
	env_init(&e);
	make_traces(&e, 400);
	cr_assert_eq(sh(&e, SWEEP_ARGS " --db one.db -j 1"), 0);
	cr_assert_eq(sh(&e, SWEEP_ARGS " --db three.db -j 3"), 0);
	char *one = query(&e, "one.db", dump_sql);
	char *three = query(&e, "three.db", dump_sql);
	cr_assert_gt(strlen(one), 1000);
	cr_assert_str_eq(one, three);
	/* results are saved in job order: even the ids agree */
	char *ids1 = query(&e, "one.db", "SELECT run_id, key FROM run_keys ORDER BY run_id");
	char *ids3 = query(&e, "three.db", "SELECT run_id, key FROM run_keys ORDER BY run_id");
	cr_assert_str_eq(ids1, ids3);
	/* three shards, one of them run twice, merged */
	cr_assert_eq(sh(&e, SWEEP_ARGS " --db s1.db --shard 1/3 --json"), 0);
	char *o = slurp(&e, "out");
	cr_assert(strstr(o, "\"shard\":1,\"shards\":3,\"jobs\":10,\"done\":10"), "%s", o);
	free(o);
	cr_assert_eq(sh(&e, SWEEP_ARGS " --db s2.db --shard 2/3"), 0);
	cr_assert_eq(sh(&e, SWEEP_ARGS " --db s3.db --shard 3/3 -j 2"), 0);
	cr_assert_eq(sh(&e, "merge -o m.db s3.db s1.db --json"), 0);
	cr_assert_eq(sh(&e, "merge -o m.db s2.db s1.db --json"), 0);
	o = slurp(&e, "out");
	cr_assert(strstr(o, "\"runs_in\":20,\"copied\":10,\"duplicates\":10"), "%s", o);
	free(o);
	char *merged = query(&e, "m.db", dump_sql);
	cr_assert_str_eq(merged, one);
	assert_consistent(&e, "m.db");
	/* merging all shards at once numbers runs by key, whatever the input order */
	cr_assert_eq(sh(&e, "merge -o m2.db s2.db s3.db s1.db"), 0);
	cr_assert_eq(sh(&e, "merge -o m3.db s1.db s2.db s3.db"), 0);
	char *i2 = query(&e, "m2.db", "SELECT run_id, key FROM run_keys ORDER BY run_id");
	char *i3 = query(&e, "m3.db", "SELECT run_id, key FROM run_keys ORDER BY run_id");
	cr_assert_str_eq(i2, i3);
	cr_assert_eq(count(&e, "m2.db", "SELECT count(*) FROM runs"), SWEEP_JOBS);
	free(one);
	free(three);
	free(ids1);
	free(ids3);
	free(merged);
	free(i2);
	free(i3);
	env_fini(&e);
}

Test(sweep, merge_keeps_runs_without_keys_and_refuses_bad_inputs)
{
	struct env e;
	th_bin();
	env_init(&e);
	make_traces(&e, 50);
	cr_assert_eq(sh(&e, "run tr/a.trace --policy pytorch --db plain.db"), 0);
	cr_assert_eq(sh(&e, "sweep --traces tr/a.trace --policies bfc --db k.db --no-progress"), 0);
	cr_assert_eq(sh(&e, "merge -o m.db plain.db k.db"), 0);
	cr_assert_eq(count(&e, "m.db", "SELECT count(*) FROM runs"), 2);
	cr_assert_eq(count(&e, "m.db", "SELECT count(*) FROM run_keys"), 1);
	char *ic = query(&e, "m.db", "SELECT policy FROM runs ORDER BY id");
	cr_assert_str_eq(ic, "bfc\npytorch\n", "keyed runs first: %s", ic);
	free(ic);
	FILE *f = fopen(in_dir(&e, "junk.db"), "w");
	cr_assert_not_null(f);
	fputs("not a database at all, not even close; sqlite wants a header here\n", f);
	fclose(f);
	cr_assert_eq(sh(&e, "merge -o m2.db k.db junk.db"), 1);
	char *err = slurp(&e, "err");
	cr_assert(strstr(err, "junk.db"), "%s", err);
	free(err);
	cr_assert_neq(access(in_dir(&e, "m2.db"), F_OK), 0, "a failed merge left its output");
	cr_assert_eq(sh(&e, "merge -o m.db m.db"), 2);
	cr_assert_eq(sh(&e, "merge -o m3.db nosuch.db"), 1);
	env_fini(&e);
}

Test(sweep, bad_input_fails_before_anything_runs)
{
	struct env e;
	th_bin();
	env_init(&e);
	make_traces(&e, 20);
	/* a misspelt knob for a named policy */
	cr_assert_eq(sh(&e, "sweep --traces tr --policies pytorch --confs "
			"pytorch=max_splt_size_mb:64 --db x.db"), 1);
	char *err = slurp(&e, "err");
	cr_assert(strstr(err, "max_splt_size_mb"), "%s", err);
	free(err);
	/* a plain conf no listed policy accepts */
	cr_assert_eq(sh(&e, "sweep --traces tr --policies pytorch bfc --confs bogus:1 --db x.db"),
		     1);
	err = slurp(&e, "err");
	cr_assert(strstr(err, "bogus"), "%s", err);
	free(err);
	/* a malformed trace: file and line */
	FILE *f = fopen(in_dir(&e, "bad.trace"), "w");
	cr_assert_not_null(f);
	fputs("gpumemsim-trace 1\nH producer t\na +10 0x1000 100 -\nzz what\n", f);
	fclose(f);
	cr_assert_eq(sh(&e, "sweep --traces tr bad.trace --policies pytorch --db x.db"), 1);
	err = slurp(&e, "err");
	cr_assert(strstr(err, "bad.trace:4"), "%s", err);
	free(err);
	cr_assert_eq(sh(&e, "sweep --traces tr --policies nosuch --db x.db"), 1);
	cr_assert_eq(sh(&e, "sweep --traces tr --policies pytorch --confs bfc=allow_growth:true "
			"--db x.db"), 2);
	cr_assert_eq(sh(&e, "sweep --traces tr --policies pytorch --shard 4/3 --db x.db"), 2);
	cr_assert_eq(sh(&e, "sweep --traces tr --policies pytorch --capacities 12parsecs "
			"--db x.db"), 2);
	cr_assert_eq(sh(&e, "sweep --policies pytorch --db x.db"), 2);
	cr_assert_neq(access(in_dir(&e, "x.db"), F_OK), 0, "a refused sweep made a database");
	/* a spec file: errors name file:line */
	f = fopen(in_dir(&e, "spec.txt"), "w");
	cr_assert_not_null(f);
	fputs("# trace policy conf capacity\ntr/a.trace pytorch - -\n"
	      "tr/a.trace pytorch roundup_power2_divisions:4 1GiB\ntr/a.trace pytorch\n", f);
	fclose(f);
	cr_assert_eq(sh(&e, "sweep --spec spec.txt --db x.db"), 1);
	err = slurp(&e, "err");
	cr_assert(strstr(err, "spec.txt:4"), "%s", err);
	free(err);
	f = fopen(in_dir(&e, "spec.txt"), "w");
	cr_assert_not_null(f);
	fputs("tr/a.trace pytorch - -\ntr/a.trace pytorch roundup_power2_divisions:4 1GiB\n"
	      "tr/b.trace.gz bfc allow_growth:true -\n", f);
	fclose(f);
	cr_assert_eq(sh(&e, "sweep --spec spec.txt --db x.db --json"), 0);
	char *o = slurp(&e, "out");
	cr_assert(strstr(o, "\"jobs\":3,\"done\":3"), "%s", o);
	free(o);
	env_fini(&e);
}

Test(sweep, a_failing_run_is_reported_and_the_others_are_stored)
{
	struct env e;
	th_bin();
	env_init(&e);
	make_traces(&e, 50);
	/* reads fine, but the replay meets a free of an address never allocated */
	FILE *f = fopen(in_dir(&e, "tr/d.trace"), "w");
	cr_assert_not_null(f);
	fputs("gpumemsim-trace 1\na 100 0x10 4 0\nf 200 0x20 4 0\nend 2 0\n", f);
	fclose(f);
	cr_assert_eq(sh(&e, "sweep --traces tr --policies pytorch bfc --db f.db -j 2 --json"), 1);
	char *o = slurp(&e, "out"), *err = slurp(&e, "err");
	cr_assert(strstr(o, "\"jobs\":8,\"done\":6,\"skipped\":0,\"failed\":2"), "%s", o);
	cr_assert(strstr(err, "d.trace:3"), "%s", err);
	free(o);
	free(err);
	assert_consistent(&e, "f.db");
	cr_assert_eq(count(&e, "f.db", "SELECT count(*) FROM runs"), 6);
	cr_assert_eq(sh(&e, "sweep --traces tr --policies pytorch bfc --db f.db --json"), 1);
	o = slurp(&e, "out");
	cr_assert(strstr(o, "\"done\":0,\"skipped\":6,\"failed\":2"), "%s", o);
	free(o);
	env_fini(&e);
}
