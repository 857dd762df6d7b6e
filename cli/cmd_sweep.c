/*
 * cmd_sweep.c: `gpumemsim sweep`: every combination of traces, policies,
 * confs and capacities (plus the lines of a --spec file), run in parallel
 * workers into one results database, resumable, shardable.
 *
 * Everything that can be checked is checked before the first run: unknown
 * policies, knobs no policy accepts, bad sizes, unreadable or malformed
 * traces (each is read through once for its identity). The job list then
 * has one canonical order (traces as given and expanded, policies, confs,
 * capacities, then spec lines), which fixes the shard each job belongs to
 * and the order results are saved in.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../include/gpumemsim.h"


struct list {
	const char **v;
	size_t n, cap;
};

struct sweep_args {
	struct list traces, policies, confs, caps;
	const char *spec, *db, *shard;
	int jobs, progress, json, list_only;
	enum device_addr_mode mode;
	uint32_t timeline_points;
	int timing;
	int allow_incomplete;
};

/* Everything the plan owns, freed in one place. */
struct plan {
	const struct alloc_policy **pols;
	size_t npols;
	struct list *pconfs;            /* per policy: its confs */
	uint64_t *caps;
	size_t ncaps;
	struct sweep_trace **traces;
	size_t ntraces;
	struct sweep_job *jobs;
	size_t njobs, jcap;
	char **owned;                   /* strings the plan made (spec fields) */
	size_t nowned;
};

static const struct cli_opt sweep_opts[] = {
	{"--traces", "T...", "trace files, directories (their *.trace, *.trace.gz)\n"
			     "or quoted patterns ('traces/*.trace.gz')"},
	{"--policies", "P...", "policy names (spaces or commas between them)"},
	{"--confs", "C...", "one conf per argument: POLICY=CONF for one policy\n"
			    "('pytorch=expandable_segments:True', 'pytorch=' for its\n"
			    "defaults), or a plain CONF for every listed policy that\n"
			    "accepts it ('default' or '' = defaults). A policy no\n"
			    "entry applies to runs with its defaults. Default: defaults"},
	{"--capacities", "S...", "sizes (80GiB, 40GB) or 'default' (the trace header's\n"
				 "total memory); spaces or commas. Default: default"},
	{"--spec", "FILE", "extra jobs, one 'TRACE POLICY CONF CAPACITY' a line\n"
			   "('-' for default conf/capacity, '#' comments)"},
	{"--db", "PATH", "results database (default " CLI_DEFAULT_DB ")"},
	{"-j|--jobs", "N", "worker processes (default: the number of CPUs)"},
	{"--shard", "I/N", "only the jobs of shard I of N (1 <= I <= N), for job\n"
			   "arrays; combine the shards with `gpumemsim merge`"},
	{"--addresses", "MODE", "synthetic (default) or recorded"},
	{"--timeline-points", "N", "timeline size per run (default 512)"},
	{"--timing", NULL, "predict step times: each trace's cudaMalloc/cudaFree\n"
			   "costs fitted from its own records (as `run --timing`)"},
	{"--allow-incomplete", NULL, "replay traces cut short (as `run --allow-incomplete`)"},
	{"--progress", NULL, "progress bar on stderr even when it is not a terminal"},
	{"--no-progress", NULL, "never a progress bar"},
	{"--list", NULL, "print the jobs (one key a line) and run nothing"},
	{"--json", NULL, "one JSON summary object on stdout"},
	CLI_OPT_END,
};

static void usage(FILE *f)
{
	cli_usage(f, "sweep --traces T... --policies P... [options]\n"
		     "       gpumemsim sweep --spec FILE [options]",
		  "Run every combination of traces x policies x confs x capacities in parallel\n"
		  "and store each run in the results database. A rerun skips combinations\n"
		  "already stored (never stores one twice); Ctrl-C stops cleanly (exit 130)\n"
		  "and the next run resumes.\n\n",
		  sweep_opts,
		  "\nExit status: 0 all runs stored, 1 a run or the database failed (messages\n"
		  "name trace:line or the knob), 2 usage, 130 interrupted (143 on SIGTERM).\n");
}

static int list_push(struct list *l, const char *s)
{
	if (VEC_RESERVE(l->v, l->cap, l->n + 1, 8) < 0)
		return -1;
	l->v[l->n++] = s;
	return 0;
}

static int list_has(const struct list *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return 1;
	return 0;
}

/* Options taking several values stop at the next argument that looks like
 * an option; an empty argument is a value (the default conf). */
static int is_opt(const char *s)
{
	return s[0] == '-' && s[1] && !(s[1] >= '0' && s[1] <= '9');
}

static int parse_args(int argc, char **argv, struct sweep_args *a)
{
	memset(a, 0, sizeof *a);
	a->db = CLI_DEFAULT_DB;
	a->progress = -1;
	long nproc = sysconf(_SC_NPROCESSORS_ONLN);
	a->jobs = nproc > 0 ? (int)nproc : 1;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		struct list *l = NULL;
		if (!strcmp(o, "--traces"))
			l = &a->traces;
		else if (!strcmp(o, "--policies"))
			l = &a->policies;
		else if (!strcmp(o, "--confs"))
			l = &a->confs;
		else if (!strcmp(o, "--capacities"))
			l = &a->caps;
		if (l) {
			size_t before = l->n;
			while (i + 1 < argc && !is_opt(argv[i + 1]))
				if (list_push(l, argv[++i]) < 0)
					return -1;
			if (l->n == before) {
				fprintf(stderr, "gpumemsim sweep: %s needs at least one value\n", o);
				return EXIT_USAGE;
			}
			continue;
		}
		/* the rest of sweep_opts with an ARG take one value */
		const char *v;
		if (cli_take_opt("gpumemsim sweep", sweep_opts, argc, argv, &i, &v) < 0)
			return EXIT_USAGE;
		if (!strcmp(o, "--spec")) {
			a->spec = v;
		} else if (!strcmp(o, "--db")) {
			a->db = v;
		} else if (!strcmp(o, "--shard")) {
			unsigned si, sn;
			if (sweep_parse_shard(v, &si, &sn) < 0) {
				fprintf(stderr, "gpumemsim sweep: --shard '%s': expected I/N with "
					"1 <= I <= N, e.g. 3/8\n", v);
				return EXIT_USAGE;
			}
			a->shard = v;
		} else if (!strcmp(o, "-j") || !strcmp(o, "--jobs")) {
			char *end;
			long n = strtol(v, &end, 10);
			if (*end || !*v || n < 1 || n > 1024) {
				fprintf(stderr, "gpumemsim sweep: %s '%s': expected 1..1024\n", o, v);
				return EXIT_USAGE;
			}
			a->jobs = (int)n;
		} else if (!strcmp(o, "--addresses")) {
			int m;
			if (cli_parse_addresses("sweep", v, &m))
				return EXIT_USAGE;
			a->mode = (enum device_addr_mode)m;
		} else if (!strcmp(o, "--timeline-points")) {
			if (cli_parse_timeline_points("sweep", v, &a->timeline_points))
				return EXIT_USAGE;
		} else if (!strcmp(o, "--timing")) {
			a->timing = 1;
		} else if (!strcmp(o, "--allow-incomplete")) {
			a->allow_incomplete = 1;
		} else if (!strcmp(o, "--progress")) {
			a->progress = 1;
		} else if (!strcmp(o, "--no-progress")) {
			a->progress = 0;
		} else if (!strcmp(o, "--json")) {
			a->json = 1;
		} else if (!strcmp(o, "--list")) {
			a->list_only = 1;
		} else if (!strcmp(o, "--batches")) {
			fprintf(stderr, "gpumemsim sweep: --batches needs the batch-size transform, "
				"which this gpumemsim does not have yet\n");
			return EXIT_USAGE;
		} else {
			fprintf(stderr, "gpumemsim sweep: unexpected argument '%s'\n", o);
			return EXIT_USAGE;
		}
	}
	if (!a->spec && (!a->traces.n || !a->policies.n)) {
		fprintf(stderr, "gpumemsim sweep: %s\n",
			!a->traces.n ? "missing --traces (or --spec)" : "missing --policies");
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!a->spec && (a->traces.n == 0) != (a->policies.n == 0)) {
		fprintf(stderr, "gpumemsim sweep: --traces and --policies go together\n");
		return EXIT_USAGE;
	}
	return 0;
}

static char *own(struct plan *p, const char *s)
{
	char **nv = realloc(p->owned, (p->nowned + 1) * sizeof *nv);
	if (!nv)
		return NULL;
	p->owned = nv;
	char *d = strdup(s);
	if (d)
		p->owned[p->nowned++] = d;
	return d;
}

static void plan_free(struct plan *p)
{
	for (size_t i = 0; p->pconfs && i < p->npols; i++)
		free(p->pconfs[i].v);
	free(p->pconfs);
	free(p->pols);
	free(p->caps);
	for (size_t i = 0; i < p->ntraces; i++) {
		sweep_trace_free(p->traces[i]);
		free(p->traces[i]);
	}
	free(p->traces);
	for (size_t i = 0; i < p->njobs; i++)
		free(p->jobs[i].key);
	free(p->jobs);
	for (size_t i = 0; i < p->nowned; i++)
		free(p->owned[i]);
	free(p->owned);
}

static int parse_capacity(const char *s, uint64_t *out)
{
	if (!strcmp(s, "default") || !strcmp(s, "-")) {
		*out = 0;
		return 0;
	}
	return conf_size_with_unit(s, out) < 0 || !*out ? -1 : 0;
}

/* Policies and capacities may come space- or comma-separated. */
static int split_commas(struct plan *p, const struct list *in, struct list *out)
{
	for (size_t i = 0; i < in->n; i++) {
		char *copy = own(p, in->v[i]);
		if (!copy)
			return -1;
		for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
			if (*tok && list_push(out, tok) < 0)
				return -1;
	}
	return 0;
}

static void unknown_policy(const char *where, const char *name)
{
	char names[1024];
	policy_list_names(names, sizeof names);
	fprintf(stderr, "gpumemsim sweep: %sunknown policy '%s' (known: %s)\n", where, name, names);
}

/* The trace with PATH, identified once however often it is named. */
static const struct sweep_trace *get_trace(struct plan *p, const char *path, char *err,
					   size_t errlen)
{
	for (size_t i = 0; i < p->ntraces; i++)
		if (!strcmp(p->traces[i]->path, path))
			return p->traces[i];
	struct sweep_trace **nv = realloc(p->traces, (p->ntraces + 1) * sizeof *nv);
	if (!nv) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->traces = nv;
	struct sweep_trace *t = calloc(1, sizeof *t);
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (sweep_identify_trace(path, t, err, errlen) < 0) {
		free(t);
		return NULL;
	}
	p->traces[p->ntraces++] = t;
	return t;
}

static int add_job(struct plan *p, const struct sweep_trace *t, const struct alloc_policy *pol,
		   const char *conf, uint64_t cap)
{
	if (VEC_RESERVE(p->jobs, p->jcap, p->njobs + 1, 64) < 0)
		return -1;
	struct sweep_job *j = &p->jobs[p->njobs++];
	j->trace = t;
	j->policy = pol;
	j->conf = (char *)conf;
	j->capacity = cap;
	j->key = NULL;
	return 0;
}

/*
 * --confs: POLICY=CONF goes to that policy (which must be listed) and must
 * be valid for it; a plain CONF goes to each listed policy that accepts it
 * and must suit at least one, so a misspelt knob is still an error.
 */
static int plan_confs(struct plan *p, const struct sweep_args *a)
{
	char err[1024];
	p->pconfs = calloc(p->npols ? p->npols : 1, sizeof *p->pconfs);
	if (!p->pconfs)
		return -1;
	for (size_t i = 0; i < a->confs.n; i++) {
		const char *e = a->confs.v[i], *conf = e;
		const char *eq = strchr(e, '=');
		const struct alloc_policy *only = NULL;
		if (eq) {
			char name[128];
			snprintf(name, sizeof name, "%.*s", (int)(eq - e), e);
			only = policy_find(name);
			if (only) {
				conf = eq + 1;
				size_t k;
				for (k = 0; k < p->npols && p->pols[k] != only; k++)
					;
				if (k == p->npols) {
					fprintf(stderr, "gpumemsim sweep: --confs '%s': policy %s is "
						"not in --policies\n", e, name);
					return EXIT_USAGE;
				}
			}
		}
		if (!strcmp(conf, "default"))
			conf = "";
		int applied = 0;
		char first_err[1024] = "";
		for (size_t k = 0; k < p->npols; k++) {
			if (only && p->pols[k] != only)
				continue;
			if (sweep_check_conf(p->pols[k], conf, err, sizeof err) < 0) {
				if (!first_err[0])
					snprintf(first_err, sizeof first_err, "%s", err);
				continue;
			}
			applied = 1;
			if (!list_has(&p->pconfs[k], conf) && list_push(&p->pconfs[k], conf) < 0)
				return -1;
		}
		if (!applied) {
			fprintf(stderr, "gpumemsim sweep: --confs '%s': %s%s\n", e, first_err,
				only || p->npols == 1 ? "" : " (and no other listed policy accepts it)");
			return 1;
		}
	}
	for (size_t k = 0; k < p->npols; k++)
		if (!p->pconfs[k].n && list_push(&p->pconfs[k], "") < 0)
			return -1;
	return 0;
}

/* One job per line: TRACE POLICY CONF CAPACITY; errors name FILE:LINE. */
static int plan_spec(struct plan *p, const char *path)
{
	char line[8192], err[1024];
	unsigned long ln = 0;
	int ret = 1;
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "gpumemsim sweep: %s: cannot open the spec file\n", path);
		return 1;
	}
	while (fgets(line, sizeof line, f)) {
		char *fld[5], *save = NULL;
		int n = 0;
		ln++;
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(stderr, "gpumemsim sweep: %s:%lu: line too long\n", path, ln);
			goto out;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		for (char *t = strtok_r(line, " \t\r\n", &save); t && n < 5;
		     t = strtok_r(NULL, " \t\r\n", &save))
			fld[n++] = t;
		if (!n)
			continue;
		if (n != 4) {
			fprintf(stderr, "gpumemsim sweep: %s:%lu: expected 'TRACE POLICY CONF "
				"CAPACITY' ('-' for default conf or capacity)\n", path, ln);
			goto out;
		}
		const struct alloc_policy *pol = policy_find(fld[1]);
		if (!pol) {
			char where[600];
			snprintf(where, sizeof where, "%s:%lu: ", path, ln);
			unknown_policy(where, fld[1]);
			goto out;
		}
		const char *conf = !strcmp(fld[2], "-") ? "" : fld[2];
		if (sweep_check_conf(pol, conf, err, sizeof err) < 0) {
			fprintf(stderr, "gpumemsim sweep: %s:%lu: %s\n", path, ln, err);
			goto out;
		}
		uint64_t cap;
		if (parse_capacity(fld[3], &cap) < 0) {
			fprintf(stderr, "gpumemsim sweep: %s:%lu: capacity '%s': expected a size "
				"such as 80GiB or '-'\n", path, ln, fld[3]);
			goto out;
		}
		const struct sweep_trace *t = get_trace(p, fld[0], err, sizeof err);
		if (!t) {
			fprintf(stderr, "gpumemsim sweep: %s:%lu: %s\n", path, ln, err);
			goto out;
		}
		char *c = own(p, conf);
		if (!c || add_job(p, t, pol, c, cap) < 0) {
			fprintf(stderr, "gpumemsim sweep: out of memory\n");
			goto out;
		}
	}
	if (ferror(f)) {
		fprintf(stderr, "gpumemsim sweep: %s: read error\n", path);
		goto out;
	}
	ret = 0;
out:
	fclose(f);
	return ret;
}

static int cmp_key_idx(const void *a, const void *b, void *ctx)
{
	const struct sweep_job *jobs = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(jobs[x].key, jobs[y].key);
	return c ? c : (x > y) - (x < y);
}

/* Keys for every job; a combination named twice runs once (first kept). */
static int plan_keys(struct plan *p, const struct sweep_args *a)
{
	for (size_t i = 0; i < p->njobs; i++) {
		p->jobs[i].key = sweep_make_key(&p->jobs[i], a->mode, a->timeline_points,
						a->timing, GPUMEMSIM_VERSION);
		if (!p->jobs[i].key)
			return -1;
	}
	size_t *idx = malloc((p->njobs ? p->njobs : 1) * sizeof *idx);
	char *drop = calloc(p->njobs ? p->njobs : 1, 1);
	if (!idx || !drop) {
		free(idx);
		free(drop);
		return -1;
	}
	for (size_t i = 0; i < p->njobs; i++)
		idx[i] = i;
	qsort_r(idx, p->njobs, sizeof *idx, cmp_key_idx, p->jobs);
	for (size_t i = 1; i < p->njobs; i++)
		if (!strcmp(p->jobs[idx[i]].key, p->jobs[idx[i - 1]].key))
			drop[idx[i]] = 1;
	size_t w = 0;
	for (size_t i = 0; i < p->njobs; i++) {
		if (drop[i])
			free(p->jobs[i].key);
		else
			p->jobs[w++] = p->jobs[i];
	}
	p->njobs = w;
	free(idx);
	free(drop);
	return 0;
}

static int build_plan(struct plan *p, const struct sweep_args *a)
{
	char err[1024];
	struct list pols = {0}, caps = {0};
	char **paths = NULL;
	size_t npaths = 0;
	int ret = 1;

	if (split_commas(p, &a->policies, &pols) < 0 || split_commas(p, &a->caps, &caps) < 0)
		goto nomem;
	p->pols = calloc(pols.n ? pols.n : 1, sizeof *p->pols);
	p->caps = calloc(caps.n ? caps.n : 1, sizeof *p->caps);
	if (!p->pols || !p->caps)
		goto nomem;
	for (size_t i = 0; i < pols.n; i++) {
		const struct alloc_policy *pol = policy_find(pols.v[i]);
		if (!pol) {
			unknown_policy("", pols.v[i]);
			goto out;
		}
		size_t k;
		for (k = 0; k < p->npols && p->pols[k] != pol; k++)
			;
		if (k == p->npols)
			p->pols[p->npols++] = pol;
	}
	for (size_t i = 0; i < caps.n; i++) {
		uint64_t c;
		if (parse_capacity(caps.v[i], &c) < 0) {
			fprintf(stderr, "gpumemsim sweep: --capacities '%s': expected a size such as "
				"80GiB, 40GB or 512MiB, or 'default'\n", caps.v[i]);
			ret = EXIT_USAGE;
			goto out;
		}
		p->caps[p->ncaps++] = c;
	}
	if (!p->ncaps)
		p->caps[p->ncaps++] = 0;
	int r = plan_confs(p, a);
	if (r < 0)
		goto nomem;
	if (r) {
		ret = r;
		goto out;
	}
	if (a->traces.n && sweep_expand_traces(a->traces.v, a->traces.n, &paths, &npaths,
					       err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim sweep: --traces: %s\n", err);
		goto out;
	}
	for (size_t t = 0; t < npaths; t++) {
		const struct sweep_trace *tr = get_trace(p, paths[t], err, sizeof err);
		if (!tr) {
			fprintf(stderr, "gpumemsim sweep: %s\n", err);
			goto out;
		}
		for (size_t k = 0; k < p->npols; k++)
			for (size_t c = 0; c < p->pconfs[k].n; c++)
				for (size_t m = 0; m < p->ncaps; m++)
					if (add_job(p, tr, p->pols[k], p->pconfs[k].v[c],
						    p->caps[m]) < 0)
						goto nomem;
	}
	if (a->spec && plan_spec(p, a->spec))
		goto out;
	if (plan_keys(p, a) < 0)
		goto nomem;
	ret = 0;
	goto out;
nomem:
	fprintf(stderr, "gpumemsim sweep: out of memory\n");
	ret = 1;
out:
	for (size_t i = 0; i < npaths; i++)
		free(paths[i]);
	free(paths);
	free(pols.v);
	free(caps.v);
	return ret;
}

/* Exit codes as cli.h says, plus 128+signal when interrupted. */
int cmd_sweep(int argc, char **argv)
{
	struct sweep_args a;
	struct plan p;
	struct sweep_counts c;
	struct store *st = NULL;
	struct sweep_job *todo = NULL;
	char err[1024];
	size_t ntodo = 0, stored_before = 0;
	unsigned shard_i = 1, shard_n = 1;
	int ret = 1, db_created = 0;
	struct stat sb;

	memset(&p, 0, sizeof p);
	memset(&c, 0, sizeof c);
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
	}
	int u = parse_args(argc, argv, &a);
	if (u) {
		ret = u < 0 ? 1 : u;
		goto out;
	}
	if (a.shard)
		sweep_parse_shard(a.shard, &shard_i, &shard_n);
	ret = build_plan(&p, &a);
	if (ret)
		goto out;
	ret = 1;
	/* this shard's jobs: every Nth of the canonical list */
	todo = calloc(p.njobs ? p.njobs : 1, sizeof *todo);
	if (!todo) {
		fprintf(stderr, "gpumemsim sweep: out of memory\n");
		goto out;
	}
	size_t nshard = 0;
	for (size_t i = 0; i < p.njobs; i++)
		if (i % shard_n == shard_i - 1)
			todo[nshard++] = p.jobs[i];
	if (a.list_only) {
		for (size_t i = 0; i < nshard; i++)
			printf("%s\t%s\n", todo[i].trace->path, todo[i].key);
		ret = fflush(stdout) ? 1 : 0;
		goto out;
	}
	db_created = stat(a.db, &sb) != 0;
	st = store_open(a.db, err, sizeof err);
	if (!st) {
		fprintf(stderr, "gpumemsim sweep: %s\n", err);
		goto out;
	}
	if (store_relaxed_sync(st, err, sizeof err) < 0) {
		fprintf(stderr, "gpumemsim sweep: %s\n", err);
		goto out;
	}
	for (size_t i = 0; i < nshard; i++) {
		int found;
		if (store_run_key_exists(st, todo[i].key, &found, err, sizeof err) < 0) {
			fprintf(stderr, "gpumemsim sweep: %s\n", err);
			goto out;
		}
		if (found)
			stored_before++;
		else
			todo[ntodo++] = todo[i];
	}
	struct sweep_exec_opts eo = {
		.jobs = a.jobs,
		.progress = a.progress >= 0 ? a.progress : isatty(STDERR_FILENO),
		.addr_mode = a.mode,
		.timeline_points = a.timeline_points,
		.timing = a.timing,
		.allow_incomplete = a.allow_incomplete,
		.tool_version = GPUMEMSIM_VERSION,
	};
	int xr = sweep_execute(todo, ntodo, st, &eo, &c, err, sizeof err);
	c.skipped += stored_before;
	if (xr < 0)
		fprintf(stderr, "gpumemsim sweep: %s\n", err);
	if (c.done)
		db_created = 0;
	if (a.json) {
		struct json j;
		json_init(&j, stdout);
		json_begin_object(&j);
		json_kv_string(&j, "db", a.db);
		json_kv_u64(&j, "shard", shard_i);
		json_kv_u64(&j, "shards", shard_n);
		json_kv_u64(&j, "jobs", nshard);
		json_kv_u64(&j, "done", c.done);
		json_kv_u64(&j, "skipped", c.skipped);
		json_kv_u64(&j, "failed", c.failed);
		json_kv_u64(&j, "not_run", c.not_run);
		json_kv_bool(&j, "interrupted", c.interrupted != 0);
		json_end_object(&j);
		putchar('\n');
	} else {
		printf("sweep: %zu job(s)%s: %zu run and stored, %zu skipped (already stored), "
		       "%zu failed%s\n", nshard, shard_n > 1 ? " in this shard" : "", c.done,
		       c.skipped, c.failed, c.interrupted ? ", interrupted" : "");
		if (c.not_run)
			printf("sweep: %zu job(s) not run; rerun the same command to resume\n",
			       c.not_run);
	}
	if (fflush(stdout) != 0)
		fprintf(stderr, "gpumemsim sweep: writing the output failed\n");
	if (c.interrupted)
		ret = 128 + c.interrupted;
	else
		ret = xr < 0 || c.failed ? 1 : 0;
out:
	store_close(st);
	if (db_created && ret != 0)
		store_remove_files(a.db);
	free(todo);
	plan_free(&p);
	free(a.traces.v);
	free(a.policies.v);
	free(a.confs.v);
	free(a.caps.v);
	return ret;
}
