/*
 * sweep.c: the machinery behind `gpumemsim sweep` (see sweep.h): trace
 * expansion and identity, conf pre-flight checks, job keys, shards, the
 * result encoding for the worker pipe, and the worker pool.
 *
 * Workers are forked, one process per job, at most -j at a time: a policy
 * or engine bug in one run cannot corrupt another, nothing in the engine
 * has to be thread-safe, and killing a worker at Ctrl-C loses only that
 * run. A worker writes one message on its pipe ('R' + encoded result, or
 * 'E' + the engine's error) and exits; the parent is the only process that
 * touches the database.
 */
#include "../device/cost.h"
#include "sweep.h"
#include "../base/vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------- trace lists */

struct strvec {
	char **v;
	size_t n, cap;
};

static int strvec_push(struct strvec *sv, const char *s)
{
	if (VEC_RESERVE(sv->v, sv->cap, sv->n + 1, 16) < 0)
		return -1;
	sv->v[sv->n] = strdup(s);
	if (!sv->v[sv->n])
		return -1;
	sv->n++;
	return 0;
}

static void strvec_free(struct strvec *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	memset(sv, 0, sizeof *sv);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_suffix(const char *s, const char *suf)
{
	size_t ls = strlen(s), lf = strlen(suf);
	return ls >= lf && !strcmp(s + ls - lf, suf);
}

/* A directory's traces, sorted by byte order (not locale) for determinism. */
static int add_dir(struct strvec *out, const char *dir, char *err, size_t errlen)
{
	struct strvec names = {0};
	struct dirent *de;
	int ret = -1;
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' ||
		    !(has_suffix(de->d_name, ".trace") || has_suffix(de->d_name, ".trace.gz")))
			continue;
		if (strvec_push(&names, de->d_name) < 0)
			goto nomem;
	}
	if (!names.n) {
		snprintf(err, errlen, "%s: no *.trace or *.trace.gz files in this directory", dir);
		goto out;
	}
	qsort(names.v, names.n, sizeof *names.v, cmp_str);
	for (size_t i = 0; i < names.n; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s%s%s", dir, has_suffix(dir, "/") ? "" : "/",
			 names.v[i]);
		if (strvec_push(out, path) < 0)
			goto nomem;
	}
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	closedir(d);
	strvec_free(&names);
	return ret;
}

static int add_glob(struct strvec *out, const char *pat, char *err, size_t errlen)
{
	glob_t g;
	memset(&g, 0, sizeof g);
	int rc = glob(pat, GLOB_NOSORT, NULL, &g);
	if (rc == GLOB_NOMATCH || (rc == 0 && !g.gl_pathc)) {
		snprintf(err, errlen, "%s: no trace matches this pattern", pat);
		globfree(&g);
		return -1;
	}
	if (rc != 0) {
		snprintf(err, errlen, "%s: cannot expand this pattern", pat);
		globfree(&g);
		return -1;
	}
	qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		if (strvec_push(out, g.gl_pathv[i]) < 0) {
			snprintf(err, errlen, "out of memory");
			globfree(&g);
			return -1;
		}
	}
	globfree(&g);
	return 0;
}

/* Directories and patterns expand; plain paths are taken as they are and
 * checked when the trace is identified. */
int sweep_expand_traces(const char *const *args, size_t nargs, char ***out, size_t *nout,
			char *err, size_t errlen)
{
	struct strvec all = {0}, uniq = {0};
	struct stat sb;
	int ret = -1;
	for (size_t i = 0; i < nargs; i++) {
		const char *a = args[i];
		if (stat(a, &sb) == 0 && S_ISDIR(sb.st_mode)) {
			if (add_dir(&all, a, err, errlen) < 0)
				goto out;
		} else if (strpbrk(a, "*?[") && stat(a, &sb) != 0) {
			if (add_glob(&all, a, err, errlen) < 0)
				goto out;
		} else if (strvec_push(&all, a) < 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	/* drop repeats, keeping first occurrences in order (n is small) */
	for (size_t i = 0; i < all.n; i++) {
		size_t k;
		for (k = 0; k < uniq.n && strcmp(uniq.v[k], all.v[i]); k++)
			;
		if (k == uniq.n && strvec_push(&uniq, all.v[i]) < 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	*out = uniq.v;
	*nout = uniq.n;
	memset(&uniq, 0, sizeof uniq);
	ret = 0;
out:
	strvec_free(&all);
	strvec_free(&uniq);
	return ret;
}

/* The whole trace is read so a bad line stops the sweep before it starts,
 * and so the key can use the same CRC the engine stores. */
int sweep_identify_trace(const char *path, struct sweep_trace *t, char *err, size_t errlen)
{
	struct trace_rec rec;
	int ret = -1, rc;
	memset(t, 0, sizeof *t);
	struct trace_reader *rd = trace_reader_start(path, err, errlen);
	if (!rd)
		return -1;
	while ((rc = trace_reader_next(rd, &rec)) == TRACE_OK)
		;
	if (rc < 0 && rc != TRACE_ERR_TRUNCATED) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	const struct trace_header *h = trace_reader_header(rd);
	t->path = strdup(path);
	if (!t->path) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	t->crc32 = trace_reader_crc32(rd);
	t->bytes = trace_reader_bytes(rd);
	t->total_memory = h ? h->total_memory : 0;
	ret = 0;
out:
	trace_reader_close(rd);
	return ret;
}

/* Safe on a zeroed or already freed trace. */
void sweep_trace_free(struct sweep_trace *t)
{
	if (!t)
		return;
	free(t->path);
	memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------ confs and keys */

#define CHECK_CAPACITY (80ull << 30) /* an H100/A100-sized device for the dry init */

/* The policy parses its knobs in init; running init on an empty device
 * with an empty header is the one check that always agrees with it. */
int sweep_check_conf(const struct alloc_policy *policy, const char *conf, char *err,
		     size_t errlen)
{
	struct trace_header h;
	int ret = -1;
	memset(&h, 0, sizeof h);
	err[0] = '\0';
	struct sim_device *dev = device_create(CHECK_CAPACITY, DEVICE_ADDR_SYNTHETIC);
	void *st = calloc(1, policy->state_size ? policy->state_size : 1);
	if (!dev || !st) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	struct policy_env env = {dev, CHECK_CAPACITY, &h};
	if (policy->init(st, conf ? conf : "", &env, err, errlen) < 0) {
		if (!err[0])
			snprintf(err, errlen, "policy %s: bad conf '%s'", policy->name,
				 conf ? conf : "");
		goto out;
	}
	if (policy->fini)
		policy->fini(st);
	ret = 0;
out:
	free(st);
	device_destroy(dev);
	return ret;
}

/* Address mode names as stored in run_keys.addresses and in keys. */
const char *sweep_addr_mode_name(enum device_addr_mode m)
{
	return m == DEVICE_ADDR_RECORDED ? "recorded" : "synthetic";
}

/* Conf comes last: it is the only part that may hold spaces. A timed run
 * is another combination ("timing=1"); untimed keys stay as they were. */
char *sweep_make_key(const struct sweep_job *j, enum device_addr_mode mode,
		     uint32_t timeline_points, int timing, const char *tool_version)
{
	char *k = NULL;
	uint64_t cap = j->capacity ? j->capacity : j->trace->total_memory;
	if (asprintf(&k, "crc32=%08" PRIx32 " bytes=%" PRIu64 " policy=%s capacity=%" PRIu64
		     " addresses=%s timeline=%" PRIu32 "%s version=%s conf=%s",
		     j->trace->crc32, j->trace->bytes, j->policy->name, cap,
		     sweep_addr_mode_name(mode), timeline_points ? timeline_points : 512,
		     timing ? " timing=1" : "", tool_version ? tool_version : "",
		     j->conf ? j->conf : "") < 0)
		return NULL;
	return k;
}

/* Shards are 1-based, like array job ids (`--shard $SLURM_ARRAY_TASK_ID/N`). */
int sweep_parse_shard(const char *s, unsigned *i, unsigned *n)
{
	char *end;
	errno = 0;
	unsigned long a = strtoul(s, &end, 10);
	if (end == s || *end != '/' || errno)
		return -1;
	const char *p = end + 1;
	unsigned long b = strtoul(p, &end, 10);
	if (end == p || *end || errno || b < 1 || b > 1000000 || a < 1 || a > b)
		return -1;
	*i = (unsigned)a;
	*n = (unsigned)b;
	return 0;
}

/* ------------------------------------------------------- result codec */

struct obuf {
	char *p;
	size_t len, cap;
	int failed;
};

static void put(struct obuf *b, const void *src, size_t n)
{
	if (b->failed)
		return;
	if (VEC_RESERVE(b->p, b->cap, b->len + n, 4096) < 0) {
		b->failed = 1;
		return;
	}
	memcpy(b->p + b->len, src, n);
	b->len += n;
}

static void put_u64(struct obuf *b, uint64_t v) { put(b, &v, sizeof v); }

static void put_str(struct obuf *b, const char *s)
{
	uint64_t n = s ? strlen(s) : 0;
	put_u64(b, n);
	put(b, s ? s : "", (size_t)n);
}

/* Raw struct arrays: the reader is this same binary (a forked worker). */
static void put_arr(struct obuf *b, const void *a, size_t n, size_t size)
{
	put_u64(b, n);
	if (n)
		put(b, a, n * size);
}

/* Encoding for the pipe from a worker to the parent. */
int sweep_encode_result(const struct sim_result *r, char **buf, size_t *len)
{
	struct obuf b = {0};
	put_str(&b, r->trace_path);
	put_u64(&b, r->trace_crc32);
	put_u64(&b, r->trace_bytes);
	put_u64(&b, r->nlabels);
	for (size_t i = 0; i < r->nlabels; i++) {
		put_str(&b, r->labels[i].key);
		put_str(&b, r->labels[i].value);
	}
	put_str(&b, r->policy);
	put_str(&b, r->conf);
	uint64_t u[] = {r->capacity, (uint64_t)r->complete, r->allocs, r->frees,
			r->peak_allocated, r->peak_requested, r->peak_reserved, r->device_allocs,
			r->device_frees, (uint64_t)r->oom, r->num_ooms, r->oom_t, r->oom_bytes,
			r->oom_line, r->oom_allocated, r->oom_reserved,
			(uint64_t)r->oom_largest_free, (uint64_t)r->oom_cached_free,
			r->trace_duration_ns, r->sim_duration_ns};
	put(&b, u, sizeof u);
	put(&b, &r->fragmentation, sizeof r->fragmentation);
	put_arr(&b, r->stats, r->nstats, sizeof *r->stats);
	put_arr(&b, r->timeline, r->ntimeline, sizeof *r->timeline);
	put_arr(&b, r->events, r->nevents, sizeof *r->events);
	/* added after the first protocol: every field the store keeps */
	uint64_t v[] = {(uint64_t)r->timed, r->step_count, r->step_time_ns, r->mem_api_ns,
			r->mem_wait_ns, r->api_removed_ns, r->oom_limit};
	put(&b, v, sizeof v);
	put(&b, r->oom_verdict, sizeof r->oom_verdict);
	put_arr(&b, r->step_ns, r->nsteps, sizeof *r->step_ns);
	put_arr(&b, r->peak_live, r->npeak_live, sizeof *r->peak_live);
	put_arr(&b, r->ranges, r->nranges, sizeof *r->ranges);
	/* memory outside the framework's allocator */
	uint64_t f[] = {(uint64_t)r->foreign_routed, r->foreign_allocs, r->peak_foreign,
			r->device_peak, r->oom_foreign};
	put(&b, f, sizeof f);
	put(&b, r->allocator_source, sizeof r->allocator_source);
	put(&b, r->oom_foreign_lib, sizeof r->oom_foreign_lib);
	put_arr(&b, r->foreign_libs, r->nforeign_libs, sizeof *r->foreign_libs);
	/* what bounds the predicted step (docs/timing.md) */
	put(&b, &r->gpu_busy_fraction, sizeof r->gpu_busy_fraction);
	put_arr(&b, r->step_gpu_ns, r->nsteps, sizeof *r->step_gpu_ns);
	if (b.failed) {
		free(b.p);
		return -1;
	}
	*buf = b.p;
	*len = b.len;
	return 0;
}

struct ibuf {
	const char *p;
	size_t len, pos;
	int failed;
};

static void get(struct ibuf *b, void *dst, size_t n)
{
	if (b->failed || n > b->len - b->pos) {
		b->failed = 1;
		memset(dst, 0, n);
		return;
	}
	memcpy(dst, b->p + b->pos, n);
	b->pos += n;
}

static uint64_t get_u64(struct ibuf *b)
{
	uint64_t v;
	get(b, &v, sizeof v);
	return v;
}

static char *get_str(struct ibuf *b)
{
	uint64_t n = get_u64(b);
	if (b->failed || n > b->len - b->pos) {
		b->failed = 1;
		return NULL;
	}
	char *s = malloc((size_t)n + 1);
	if (!s) {
		b->failed = 1;
		return NULL;
	}
	memcpy(s, b->p + b->pos, (size_t)n);
	s[n] = '\0';
	b->pos += (size_t)n;
	return s;
}

static void *get_arr(struct ibuf *b, size_t *n, size_t size)
{
	uint64_t cnt = get_u64(b);
	*n = 0;
	if (b->failed || cnt > (b->len - b->pos) / size) {
		b->failed = 1;
		return NULL;
	}
	if (!cnt)
		return NULL;
	void *a = malloc((size_t)cnt * size);
	if (!a) {
		b->failed = 1;
		return NULL;
	}
	get(b, a, (size_t)cnt * size);
	*n = (size_t)cnt;
	return a;
}

/* Bounds-checked: a worker cut short gives -1, never a bad read. */
int sweep_decode_result(const char *buf, size_t len, struct sim_result *r)
{
	struct ibuf b = {buf, len, 0, 0};
	memset(r, 0, sizeof *r);
	r->trace_path = get_str(&b);
	r->trace_crc32 = (uint32_t)get_u64(&b);
	r->trace_bytes = get_u64(&b);
	uint64_t nl = get_u64(&b);
	if (!b.failed && nl <= (len - b.pos) / 16) {
		r->labels = calloc(nl ? (size_t)nl : 1, sizeof *r->labels);
		if (!r->labels)
			b.failed = 1;
		for (uint64_t i = 0; i < nl && !b.failed; i++) {
			r->labels[i].key = get_str(&b);
			r->labels[i].value = get_str(&b);
			r->nlabels = (size_t)i + 1;
		}
	} else {
		b.failed = 1;
	}
	r->policy = get_str(&b);
	r->conf = get_str(&b);
	uint64_t u[20];
	get(&b, u, sizeof u);
	r->capacity = u[0];
	r->complete = (int)u[1];
	r->allocs = u[2];
	r->frees = u[3];
	r->peak_allocated = u[4];
	r->peak_requested = u[5];
	r->peak_reserved = u[6];
	r->device_allocs = u[7];
	r->device_frees = u[8];
	r->oom = (int)u[9];
	r->num_ooms = u[10];
	r->oom_t = u[11];
	r->oom_bytes = u[12];
	r->oom_line = u[13];
	r->oom_allocated = u[14];
	r->oom_reserved = u[15];
	r->oom_largest_free = (int64_t)u[16];
	r->oom_cached_free = (int64_t)u[17];
	r->trace_duration_ns = u[18];
	r->sim_duration_ns = u[19];
	get(&b, &r->fragmentation, sizeof r->fragmentation);
	r->stats = get_arr(&b, &r->nstats, sizeof *r->stats);
	r->timeline = get_arr(&b, &r->ntimeline, sizeof *r->timeline);
	r->events = get_arr(&b, &r->nevents, sizeof *r->events);
	uint64_t v[7];
	get(&b, v, sizeof v);
	r->timed = (int)v[0];
	r->step_count = v[1];
	r->step_time_ns = v[2];
	r->mem_api_ns = v[3];
	r->mem_wait_ns = v[4];
	r->api_removed_ns = v[5];
	r->oom_limit = v[6];
	get(&b, r->oom_verdict, sizeof r->oom_verdict);
	r->oom_verdict[sizeof r->oom_verdict - 1] = '\0';
	r->step_ns = get_arr(&b, &r->nsteps, sizeof *r->step_ns);
	r->peak_live = get_arr(&b, &r->npeak_live, sizeof *r->peak_live);
	r->ranges = get_arr(&b, &r->nranges, sizeof *r->ranges);
	uint64_t f[5];
	get(&b, f, sizeof f);
	r->foreign_routed = (int)f[0];
	r->foreign_allocs = f[1];
	r->peak_foreign = f[2];
	r->device_peak = f[3];
	r->oom_foreign = f[4];
	get(&b, r->allocator_source, sizeof r->allocator_source);
	r->allocator_source[sizeof r->allocator_source - 1] = '\0';
	get(&b, r->oom_foreign_lib, sizeof r->oom_foreign_lib);
	r->oom_foreign_lib[sizeof r->oom_foreign_lib - 1] = '\0';
	r->foreign_libs = get_arr(&b, &r->nforeign_libs, sizeof *r->foreign_libs);
	for (size_t i = 0; i < r->nforeign_libs; i++)
		r->foreign_libs[i].name[sizeof r->foreign_libs[i].name - 1] = '\0';
	get(&b, &r->gpu_busy_fraction, sizeof r->gpu_busy_fraction);
	size_t ngpu = 0;
	r->step_gpu_ns = get_arr(&b, &ngpu, sizeof *r->step_gpu_ns);
	if (ngpu != r->nsteps)
		b.failed = 1;
	if (b.failed || b.pos != len || !r->trace_path || !r->policy || !r->conf) {
		sim_result_free(r);
		return -1;
	}
	return 0;
}

/* --------------------------------------------------------- the pool */

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct slot {
	pid_t pid;
	int fd;
	size_t job;
	char *buf;
	size_t len, cap;
};

enum { OUT_PENDING = 0, OUT_RESULT, OUT_FAILED, OUT_SAVED };

struct outcome {
	int state;
	struct sim_result res;
	char *msg;
};

struct pool {
	const struct sweep_job *jobs;
	size_t njobs;
	struct store *st;
	const struct sweep_exec_opts *o;
	struct sweep_counts *c;
	struct outcome *out;
	struct slot *slots;
	size_t nactive, next, commit_next, finished;
	double t0, last_draw;
	int bar_shown;
};

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The worker: never returns, never touches the parent's database. */
static void worker(const struct pool *p, const struct sweep_job *j, int fd)
{
	struct sim_result r;
	char err[1024];
	char *buf = NULL;
	size_t len = 0;
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	struct sim_options so = {
		.trace_path = j->trace->path,
		.policy = j->policy,
		.conf = j->conf,
		.capacity = j->capacity,
		.addr_mode = p->o->addr_mode,
		.timeline_points = p->o->timeline_points,
		.allow_incomplete = p->o->allow_incomplete,
	};
	struct cost_model cm;
	if (p->o->timing) {
		if (cost_fit_trace(j->trace->path, NULL, &cm, err, sizeof err) < 0) {
			write_all(fd, "E", 1);
			write_all(fd, err, strlen(err));
			_exit(0);
		}
		so.cost = &cm;
	}
	if (sim_run(&so, &r, err, sizeof err) < 0) {
		write_all(fd, "E", 1);
		write_all(fd, err, strlen(err));
		_exit(0);
	}
	if (sweep_encode_result(&r, &buf, &len) < 0) {
		const char *m = "Eout of memory in a sweep worker";
		write_all(fd, m, strlen(m));
		_exit(0);
	}
	write_all(fd, "R", 1);
	write_all(fd, buf, len);
	_exit(0);
}

static int spawn(struct pool *p)
{
	int fds[2];
	size_t j = p->next;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		worker(p, &p->jobs[j], fds[1]);
	}
	close(fds[1]);
	struct slot *s = &p->slots[p->nactive++];
	memset(s, 0, sizeof *s);
	s->pid = pid;
	s->fd = fds[0];
	s->job = j;
	p->next++;
	return 0;
}

static void describe(const struct sweep_job *j, char *buf, size_t len)
{
	char cap[48] = "default";
	if (j->capacity)
		snprintf(cap, sizeof cap, "%" PRIu64, j->capacity);
	snprintf(buf, len, "%s policy %s conf '%s' capacity %s", j->trace->path, j->policy->name,
		 j->conf, cap);
}

/* A worker's pipe reached EOF: turn what it sent into an outcome. */
static void reap(struct pool *p, size_t si)
{
	struct slot *s = &p->slots[si];
	struct outcome *o = &p->out[s->job];
	int status = 0;
	close(s->fd);
	while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
		;
	if (s->len >= 1 && s->buf[0] == 'R' &&
	    sweep_decode_result(s->buf + 1, s->len - 1, &o->res) == 0) {
		o->state = OUT_RESULT;
	} else if (stop_signal && WIFSIGNALED(status)) {
		/* Ctrl-C reached the whole process group: not a failure, not run */
		free(s->buf);
		p->slots[si] = p->slots[--p->nactive];
		return;
	} else {
		o->state = OUT_FAILED;
		if (s->len >= 1 && s->buf[0] == 'E')
			o->msg = strndup(s->buf + 1, s->len - 1);
		else if (WIFSIGNALED(status) &&
			 asprintf(&o->msg, "the worker died (signal %d)", WTERMSIG(status)) < 0)
			o->msg = NULL;
		else if (!WIFSIGNALED(status))
			o->msg = strdup("the worker sent no result");
	}
	free(s->buf);
	p->slots[si] = p->slots[--p->nactive];
	p->finished++;
}

static void clear_bar(struct pool *p)
{
	if (p->bar_shown) {
		fputs("\r\033[K", stderr);
		p->bar_shown = 0;
	}
}

static void draw_bar(struct pool *p, int force)
{
	double t = now_s();
	if (!p->o->progress || (!force && t - p->last_draw < 0.2))
		return;
	p->last_draw = t;
	size_t total = p->njobs, done = p->finished;
	double el = t - p->t0, rate = el > 0 ? done / el : 0;
	char eta[32] = "--:--";
	if (rate > 0) {
		unsigned long left = (unsigned long)((total - done) / rate + 0.5);
		snprintf(eta, sizeof eta, "%lu:%02lu:%02lu", left / 3600, left / 60 % 60, left % 60);
	}
	char bar[31];
	size_t fill = total ? done * 30 / total : 30;
	for (size_t i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = '\0';
	fprintf(stderr, "\r\033[Ksweep [%s] %zu/%zu  %.1f runs/s  ETA %s", bar, done, total,
		rate, eta);
	fflush(stderr);
	p->bar_shown = 1;
}

/* Save one finished outcome; -1 only on a database error. */
static int commit_one(struct pool *p, size_t i, char *err, size_t errlen)
{
	struct outcome *o = &p->out[i];
	char what[4400];
	if (o->state == OUT_FAILED) {
		describe(&p->jobs[i], what, sizeof what);
		clear_bar(p);
		fprintf(stderr, "gpumemsim sweep: %s: %s\n", what, o->msg ? o->msg : "failed");
		p->c->failed++;
	} else if (o->state == OUT_RESULT) {
		int dup = 0;
		if (store_save_keyed_run(p->st, &o->res, p->o->tool_version, p->jobs[i].key,
					 sweep_addr_mode_name(p->o->addr_mode), NULL, &dup, err,
					 errlen) < 0)
			return -1;
		if (dup)
			p->c->skipped++;
		else
			p->c->done++;
	}
	sim_result_free(&o->res);
	free(o->msg);
	o->msg = NULL;
	o->state = OUT_SAVED;
	return 0;
}

/* Results are saved in job order, so ids do not depend on which worker
 * finished first. */
static int commit_ready(struct pool *p, char *err, size_t errlen)
{
	while (p->commit_next < p->njobs && p->out[p->commit_next].state != OUT_PENDING) {
		if (commit_one(p, p->commit_next, err, errlen) < 0)
			return -1;
		p->commit_next++;
	}
	return 0;
}

static void kill_all(struct pool *p)
{
	for (size_t i = 0; i < p->nactive; i++) {
		int status;
		kill(p->slots[i].pid, SIGKILL);
		close(p->slots[i].fd);
		while (waitpid(p->slots[i].pid, &status, 0) < 0 && errno == EINTR)
			;
		free(p->slots[i].buf);
	}
	p->nactive = 0;
}

/* Read what a worker has sent; 1 at EOF, 0 otherwise, -1 out of memory. */
static int drain(struct slot *s)
{
	for (;;) {
		if (VEC_RESERVE(s->buf, s->cap, s->len + 65536, 131072) < 0)
			return -1;
		ssize_t r = read(s->fd, s->buf + s->len, s->cap - s->len);
		if (r < 0)
			return errno == EINTR || errno == EAGAIN ? 0 : 1;
		if (r == 0)
			return 1;
		s->len += (size_t)r;
		if ((size_t)r < 65536)
			return 0;
	}
}

/* Start workers until -j run or no job is left (none once stopped). */
static int fill(struct pool *p, int jobsn, char *err, size_t errlen)
{
	while (!stop_signal && p->next < p->njobs && p->nactive < (size_t)jobsn) {
		if (spawn(p) < 0) {
			snprintf(err, errlen, "cannot start a sweep worker: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* See sweep.h. The only blocking call is poll, which a signal interrupts. */
int sweep_execute(const struct sweep_job *jobs, size_t njobs, struct store *st,
		  const struct sweep_exec_opts *o, struct sweep_counts *c, char *err,
		  size_t errlen)
{
	struct sigaction sa, old_int, old_term;
	struct pool p;
	struct pollfd *pfd = NULL;
	int ret = -1, jobsn = o->jobs > 0 ? o->jobs : 1;

	memset(c, 0, sizeof *c);
	memset(&p, 0, sizeof p);
	p.jobs = jobs;
	p.njobs = njobs;
	p.st = st;
	p.o = o;
	p.c = c;
	p.out = calloc(njobs ? njobs : 1, sizeof *p.out);
	p.slots = calloc((size_t)jobsn, sizeof *p.slots);
	pfd = calloc((size_t)jobsn, sizeof *pfd);
	if (!p.out || !p.slots || !pfd) {
		snprintf(err, errlen, "out of memory");
		free(p.out);
		free(p.slots);
		free(pfd);
		return -1;
	}
	stop_signal = 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	p.t0 = now_s();
	draw_bar(&p, 1);

	for (;;) {
		if (fill(&p, jobsn, err, errlen) < 0)
			goto fail;
		if (stop_signal || !p.nactive)
			break;
		for (size_t i = 0; i < p.nactive; i++) {
			pfd[i].fd = p.slots[i].fd;
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		int n = poll(pfd, p.nactive, 250);
		if (n < 0 && errno != EINTR) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			goto fail;
		}
		/* back to front: reap() moves the last slot into the freed one */
		for (size_t i = p.nactive; n > 0 && i-- > 0;) {
			if (!pfd[i].revents)
				continue;
			int d = drain(&p.slots[i]);
			if (d < 0) {
				snprintf(err, errlen, "out of memory");
				goto fail;
			}
			if (d)
				reap(&p, i);
		}
		/* workers first: they simulate while the parent commits */
		if (fill(&p, jobsn, err, errlen) < 0)
			goto fail;
		if (commit_ready(&p, err, errlen) < 0)
			goto fail;
		draw_bar(&p, 0);
	}
	/* interrupted: drop runs in flight, keep every finished one */
	kill_all(&p);
	if (commit_ready(&p, err, errlen) < 0)
		goto fail;
	for (size_t i = p.commit_next; i < njobs; i++) {
		if (p.out[i].state == OUT_PENDING)
			c->not_run++;
		else if (commit_one(&p, i, err, errlen) < 0)
			goto fail;
	}
	c->interrupted = stop_signal;
	draw_bar(&p, 1);
	ret = 0;
	goto out;
fail:
	kill_all(&p);
out:
	if (p.bar_shown)
		fputc('\n', stderr);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	for (size_t i = 0; i < njobs; i++) {
		sim_result_free(&p.out[i].res);
		free(p.out[i].msg);
	}
	free(p.out);
	free(p.slots);
	free(pfd);
	return ret;
}
