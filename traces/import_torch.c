/*
 * import_torch.c: torch memory-snapshot text into a gpumemsim trace (see
 * import_torch.h and traces/FORMAT.md).
 *
 * The one inference the importer makes is empty_cache(): the snapshot has
 * no entry for it, only the segment releases it causes. To tell it from the
 * allocator's own releases the importer tracks the real allocator's
 * segments (segment_alloc/segment_free) and which of them hold live
 * allocations (alloc/free_completed addresses fall inside them):
 *  - a run of consecutive segment_free entries that frees EVERY wholly free
 *    segment is an empty_cache(), unless it is the release-and-retry before
 *    an allocation: the run is followed by an oom entry, or by a
 *    segment_alloc that the memory fraction (NAME.json) would have refused
 *    on top of what was reserved before the run;
 *  - a run that frees only some of them is garbage collection or the
 *    oversize-block release, which a faithful replay redoes by itself;
 *  - with expandable segments the allocator unmaps only in empty_cache()
 *    (or before an OOM), so every segment_unmap run not followed by an oom
 *    is an empty_cache().
 * An 'x empty_cache' record goes right before the run's 'g' records, at the
 * time of its first entry.
 *
 * Input lines come through text_input (plain or gzip), so zlib stays in
 * the traces I/O layer.
 */
#include "import_torch.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/tmpfile.h"
#include "../base/vec.h"
#include "text_input.h"
#include "trace.h"

#define IT_LINE_MAX 4096

enum it_action {
	IT_ALLOC, IT_FREE_REQ, IT_FREE_DONE, IT_SEG_ALLOC, IT_SEG_FREE, IT_SEG_MAP,
	IT_SEG_UNMAP, IT_OOM, IT_SNAPSHOT, IT_EOF
};

static const struct { const char *name; enum it_action a; } it_actions[] = {
	{"alloc", IT_ALLOC}, {"free_requested", IT_FREE_REQ},
	{"free_completed", IT_FREE_DONE}, {"segment_alloc", IT_SEG_ALLOC},
	{"segment_free", IT_SEG_FREE}, {"segment_map", IT_SEG_MAP},
	{"segment_unmap", IT_SEG_UNMAP}, {"oom", IT_OOM}, {"snapshot", IT_SNAPSHOT},
	/* older snapshots spell the free as "free" */
	{"free", IT_FREE_REQ},
};

struct it_entry {
	enum it_action a;
	uint64_t addr, size, t;
	uint32_t stream;
	uint64_t line;
};

struct it_seg { uint64_t addr, size, live; };

struct it_state {
	const char *in;
	struct trace_writer *w;
	struct import_torch_stats st;
	/* the real allocator's segments, sorted by address */
	struct it_seg *segs;
	size_t nsegs, capsegs;
	uint64_t wholly_free;        /* segments with no live allocation */
	uint64_t reserved;
	/* the pending run of releases */
	struct it_entry *run;
	size_t nrun, caprun;
	/* memory fraction from NAME.json: allowed bytes, 0 = none */
	uint64_t allowed;
	/* stream values that do not fit 32 bits get dense ids */
	uint64_t big_streams[64];
	size_t nbig;
	uint64_t last_t;
	char *err;
	size_t errlen;
};

/* ------------------------------------------------------------- JSON */

char *import_torch_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	if (!f)
		return NULL;
	for (;;) {
		if (VEC_RESERVE(buf, cap, len + 4096, 8192) < 0)
			goto fail;
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f))
		goto fail;
	fclose(f);
	buf[len] = '\0';
	return buf;
fail:
	free(buf);
	fclose(f);
	return NULL;
}

int import_torch_json_get(const char *json, const char *key, char *out, size_t len)
{
	char pat[160];
	if (!json || snprintf(pat, sizeof pat, "\"%s\"", key) >= (int)sizeof pat)
		return -1;
	const char *p = json;
	while ((p = strstr(p, pat)) != NULL) {
		const char *q = p + strlen(pat);
		while (isspace((unsigned char)*q))
			q++;
		if (*q != ':') {
			p += 1;
			continue;
		}
		q++;
		while (isspace((unsigned char)*q))
			q++;
		size_t n = 0;
		if (*q == '"') {
			for (q++; *q && *q != '"'; q++) {
				char c = *q;
				if (c == '\\' && q[1]) {
					q++;
					c = *q == 'n' ? '\n' : *q == 't' ? '\t' : *q;
				}
				if (n + 1 >= len)
					return -1;
				out[n++] = c;
			}
			if (*q != '"')
				return -1;
		} else {
			while (*q && *q != ',' && *q != '}' && *q != ']' && !isspace((unsigned char)*q)) {
				if (n + 1 >= len)
					return -1;
				out[n++] = *q++;
			}
			if (!n)
				return -1;
		}
		out[n] = '\0';
		return 0;
	}
	return -1;
}

int import_torch_json_num(const char *json, const char *key, double *out)
{
	char buf[64], *end;
	if (import_torch_json_get(json, key, buf, sizeof buf) < 0)
		return -1;
	errno = 0;
	double v = strtod(buf, &end);
	if (end == buf || *end || errno)
		return -1;
	*out = v;
	return 0;
}

static int ends_with(const char *s, size_t n, const char *suf)
{
	size_t m = strlen(suf);
	return n >= m && !memcmp(s + n - m, suf, m);
}

int import_torch_json_path(const char *path, char *buf, size_t len)
{
	size_t n = strlen(path);
	struct stat sb;
	if (ends_with(path, n, ".gz"))
		n -= 3;
	if (ends_with(path, n, ".trace"))
		n -= 6;
	else if (ends_with(path, n, ".txt"))
		n -= 4;
	else if (ends_with(path, n, ".pickle"))
		n -= 7;
	if (n + 6 > len)
		return -1;
	memcpy(buf, path, n);
	memcpy(buf + n, ".json", 6);
	return stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) ? 0 : -1;
}

/* ------------------------------------------------------ segment state */

/* Index of the segment holding ADDR, or -1. */
static long seg_find(const struct it_state *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nsegs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->segs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	const struct it_seg *g = &s->segs[lo - 1];
	return addr - g->addr < g->size ? (long)(lo - 1) : -1;
}

static int seg_add(struct it_state *s, uint64_t addr, uint64_t size)
{
	if (VEC_RESERVE(s->segs, s->capsegs, s->nsegs + 1, 64) < 0)
		return -1;
	size_t i = s->nsegs;
	while (i > 0 && s->segs[i - 1].addr > addr) {
		s->segs[i] = s->segs[i - 1];
		i--;
	}
	s->segs[i].addr = addr;
	s->segs[i].size = size;
	s->segs[i].live = 0;
	s->nsegs++;
	s->wholly_free++;
	s->reserved += size;
	return 0;
}

static void seg_remove(struct it_state *s, uint64_t addr, uint64_t size)
{
	long i = seg_find(s, addr);
	s->reserved -= size <= s->reserved ? size : s->reserved;
	if (i < 0 || s->segs[i].addr != addr)
		return;
	if (s->segs[i].live == 0)
		s->wholly_free--;
	memmove(s->segs + i, s->segs + i + 1, (s->nsegs - (size_t)i - 1) * sizeof *s->segs);
	s->nsegs--;
}

/* ------------------------------------------------------------ output */

static int put(struct it_state *s, const struct trace_rec *r)
{
	if (trace_writer_record(s->w, r) < 0) {
		/* the writer's message is reported at close */
		return -1;
	}
	return 0;
}

static int put_segment(struct it_state *s, const struct it_entry *e, uint32_t op)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_SEGMENT;
	r.start = r.end = e->t;
	r.u.segment.op = op;
	r.u.segment.addr = e->addr;
	r.u.segment.bytes = e->size;
	r.u.segment.stream = e->stream;
	s->st.segments++;
	return put(s, &r);
}

static int put_control(struct it_state *s, uint64_t t, uint32_t kind, uint64_t bytes)
{
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = TREC_CONTROL;
	r.start = r.end = t;
	r.u.control.kind = kind;
	r.u.control.bytes = bytes;
	return put(s, &r);
}

/* Decide what the pending run of releases was and write it. NEXT is the
 * entry after the run (IT_EOF at the end). */
static int flush_run(struct it_state *s, const struct it_entry *next)
{
	if (!s->nrun)
		return 0;
	uint64_t nfree = 0, nunmap = 0;
	for (size_t i = 0; i < s->nrun; i++) {
		if (s->run[i].a == IT_SEG_FREE)
			nfree++;
		else
			nunmap++;
	}
	int all = nunmap ? 1 : nfree == s->wholly_free;
	if (next->a == IT_OOM)
		all = 0;  /* the release-and-retry before an OOM */
	if (next->a == IT_SEG_ALLOC && s->allowed && s->reserved + next->size > s->allowed)
		all = 0;  /* the fraction refused the segment: release-and-retry */
	if (all) {
		s->st.empty_caches++;
		if (put_control(s, s->run[0].t, TCTL_EMPTY_CACHE, 0) < 0)
			return -1;
	} else {
		s->st.partial_runs++;
	}
	for (size_t i = 0; i < s->nrun; i++) {
		const struct it_entry *e = &s->run[i];
		if (e->a == IT_SEG_FREE) {
			seg_remove(s, e->addr, e->size);
			if (put_segment(s, e, TSEG_FREE) < 0)
				return -1;
		} else if (put_segment(s, e, TSEG_UNMAP) < 0) {
			return -1;
		}
	}
	s->nrun = 0;
	return 0;
}

static int handle(struct it_state *s, const struct it_entry *e)
{
	struct trace_rec r;
	if (e->a == IT_SEG_FREE || e->a == IT_SEG_UNMAP) {
		if (VEC_RESERVE(s->run, s->caprun, s->nrun + 1, 64) < 0) {
			snprintf(s->err, s->errlen, "%s: out of memory", s->in);
			return -1;
		}
		s->run[s->nrun++] = *e;
		return 0;
	}
	if (e->a == IT_FREE_REQ || e->a == IT_SNAPSHOT)
		return 0;  /* free_completed is when the block really returns */
	if (flush_run(s, e) < 0)
		return -1;
	memset(&r, 0, sizeof r);
	r.start = r.end = e->t;
	switch (e->a) {
	case IT_ALLOC:
	case IT_FREE_DONE: {
		long i = seg_find(s, e->addr);
		if (i >= 0) {
			struct it_seg *g = &s->segs[i];
			if (e->a == IT_ALLOC) {
				if (g->live++ == 0)
					s->wholly_free--;
			} else if (g->live > 0 && --g->live == 0) {
				s->wholly_free++;
			}
		}
		r.type = e->a == IT_ALLOC ? TREC_ALLOC : TREC_FREE;
		r.u.mem.id = e->a == IT_ALLOC ? s->st.allocs : 0;
		r.u.mem.addr = e->addr;
		r.u.mem.bytes = e->size;
		r.u.mem.stream = e->stream;
		r.u.mem.kind = TMEM_DEVICE;
		r.u.mem.source = TRACE_NO_STRING;
		if (e->a == IT_ALLOC)
			s->st.allocs++;
		else
			s->st.frees++;
		return put(s, &r);
	}
	case IT_SEG_ALLOC:
		if (seg_add(s, e->addr, e->size) < 0) {
			snprintf(s->err, s->errlen, "%s: out of memory", s->in);
			return -1;
		}
		return put_segment(s, e, TSEG_ALLOC);
	case IT_SEG_MAP:
		return put_segment(s, e, TSEG_MAP);
	case IT_OOM:
		s->st.ooms++;
		return put_control(s, e->t, TCTL_OOM, e->size);
	default:
		return 0;
	}
}

/* ------------------------------------------------------------- input */

static int parse_u64(const char *tok, uint64_t *out)
{
	char *end;
	if (!tok || !isdigit((unsigned char)tok[0]))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(tok, &end, 0);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_line(struct it_state *s, char *line, uint64_t lineno, struct it_entry *e)
{
	char *tok[6];
	int n = 0;
	for (char *p = strtok(line, " \t\r\n"); p; p = strtok(NULL, " \t\r\n")) {
		if (n == 6)
			break;
		tok[n++] = p;
	}
	if (n != 5) {
		snprintf(s->err, s->errlen, "%s:%" PRIu64 ": expected 'action addr size stream "
			 "time_us', got %d field%s", s->in, lineno, n, n == 1 ? "" : "s");
		return -1;
	}
	size_t k;
	for (k = 0; k < sizeof it_actions / sizeof it_actions[0]; k++)
		if (!strcmp(tok[0], it_actions[k].name))
			break;
	if (k == sizeof it_actions / sizeof it_actions[0]) {
		snprintf(s->err, s->errlen, "%s:%" PRIu64 ": unknown action '%.40s' (known: alloc, "
			 "free_requested, free_completed, segment_alloc, segment_free, segment_map, "
			 "segment_unmap, oom, snapshot)", s->in, lineno, tok[0]);
		return -1;
	}
	e->a = it_actions[k].a;
	uint64_t stream, tus;
	const char *what = NULL;
	if (parse_u64(tok[1], &e->addr) < 0)
		what = "addr";
	else if (parse_u64(tok[2], &e->size) < 0)
		what = "size";
	else if (parse_u64(tok[3], &stream) < 0)
		what = "stream";
	else if (parse_u64(tok[4], &tus) < 0 || tus > UINT64_MAX / 1000)
		what = "time_us";
	if (what) {
		snprintf(s->err, s->errlen, "%s:%" PRIu64 ": bad %s (expected a non-negative "
			 "integer)", s->in, lineno, what);
		return -1;
	}
	if (stream < UINT32_MAX - 64) {
		e->stream = (uint32_t)stream;
	} else {
		size_t i;
		for (i = 0; i < s->nbig && s->big_streams[i] != stream; i++)
			;
		if (i == s->nbig) {
			if (s->nbig == 64) {
				snprintf(s->err, s->errlen, "%s:%" PRIu64 ": too many distinct "
					 "large stream values", s->in, lineno);
				return -1;
			}
			s->big_streams[s->nbig++] = stream;
		}
		e->stream = (uint32_t)(UINT32_MAX - 64 + i);
	}
	e->t = tus * 1000;
	e->line = lineno;
	if (e->t < s->last_t) {
		snprintf(s->err, s->errlen, "%s:%" PRIu64 ": time %" PRIu64 " us goes back in time",
			 s->in, lineno, tus);
		return -1;
	}
	s->last_t = e->t;
	return 0;
}

/* Run the pickle helper: IN (.pickle) -> TMP (text). */
static int convert_pickle(const char *in, char *tmp, size_t tmplen, char *err, size_t errlen)
{
	const char *helper = getenv("GPUMEMSIM_TORCH_HELPER");
	char exe[4096], script[4200];
	if (!helper) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n < 0)
			n = 0;
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		/* build/gpumemsim -> traces/ beside build/ */
		snprintf(script, sizeof script, "%s/../traces/torch_snapshot_to_text.py", exe);
		if (access(script, R_OK) != 0)
			snprintf(script, sizeof script, "traces/torch_snapshot_to_text.py");
		helper = script;
	}
	/* in TMPDIR like every other temporary trace: /tmp may be small or
	 * not ours to write */
	if (tmp_file(tmp, tmplen, "torch") < 0) {
		snprintf(err, errlen, "%s: cannot create a temporary file in %s: %s", in, tmp_dir(),
			 strerror(errno));
		tmp[0] = '\0';
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "%s: fork: %s", in, strerror(errno));
		unlink(tmp);
		tmp[0] = '\0';
		return -1;
	}
	if (pid == 0) {
		execlp("python3", "python3", helper, in, tmp, (char *)NULL);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		unlink(tmp);
		tmp[0] = '\0';
		snprintf(err, errlen, "%s: the pickle converter (python3 %s) failed%s", in, helper,
			 WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " to start" : "");
		return -1;
	}
	return 0;
}

static void add_label(struct trace_label *labels, size_t *n, char vals[][256], const char *json,
		      const char *key)
{
	if (import_torch_json_get(json, key, vals[*n], 256) < 0)
		return;
	if (!strcmp(key, "conf") && !strcmp(vals[*n], "default"))
		vals[*n][0] = '\0';
	labels[*n].key = (char *)key;
	labels[*n].value = vals[*n];
	(*n)++;
}

int import_torch_snapshot(const char *in, const char *out, const char *json_path,
			  struct import_torch_stats *stats, char *err, size_t errlen)
{
	return import_torch_snapshot_labeled(in, out, json_path, NULL, 0, stats, err, errlen);
}

int import_torch_snapshot_labeled(const char *in, const char *out, const char *json_path,
				  const struct trace_label *extra, size_t nextra,
				  struct import_torch_stats *stats, char *err, size_t errlen)
{
	struct it_state s;
	char tmp[4096] = "", jpath[4096], line[IT_LINE_MAX];
	char *json = NULL;
	struct text_input *ti = NULL;
	int rc = -1;
	memset(&s, 0, sizeof s);
	s.in = in;
	s.err = err;
	s.errlen = errlen;
	err[0] = '\0';

	const char *src = in;
	size_t inlen = strlen(in);
	if (ends_with(in, inlen, ".pickle") || ends_with(in, inlen, ".pkl")) {
		if (convert_pickle(in, tmp, sizeof tmp, err, errlen) < 0)
			return -1;
		src = tmp;
	}
	if (json_path) {
		json = import_torch_slurp(json_path);
		if (!json) {
			snprintf(err, errlen, "%s: cannot read: %s", json_path, strerror(errno));
			goto cleanup;
		}
	} else if (import_torch_json_path(in, jpath, sizeof jpath) == 0) {
		json = import_torch_slurp(jpath);
	}
	ti = text_input_open(src, err, errlen);
	if (!ti) {
		if (src != in) /* name the user's file, not the temporary conversion */
			snprintf(err, errlen, "%s: cannot read its converted text", in);
		goto cleanup;
	}

	struct trace_header h;
	struct trace_label labels[40];   /* the metadata's 6 and the user's */
	char vals[8][256], gpu[256], cudnn[64];
	double total = 0, fraction = 1;
	memset(&h, 0, sizeof h);
	h.version = TRACE_FORMAT_VERSION;
	h.producer = "gpumemsim-import-torch";
	h.producer_version = "1";
	size_t nl = 0;
	if (json) {
		if (import_torch_json_get(json, "gpu", gpu, sizeof gpu) == 0)
			h.gpu = gpu;
		if (import_torch_json_get(json, "cudnn", cudnn, sizeof cudnn) == 0)
			h.cudnn = cudnn;
		if (import_torch_json_num(json, "total_memory", &total) == 0 && total > 0)
			h.total_memory = (uint64_t)total;
		if (import_torch_json_num(json, "fraction", &fraction) == 0 && fraction > 0 &&
		    fraction < 1 && h.total_memory)
			s.allowed = (uint64_t)(fraction * (double)h.total_memory);
		static const char *keys[] = {"model", "batch", "img", "conf", "fraction", "torch"};
		for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
			add_label(labels, &nl, vals, json, keys[i]);
	}
	/* the user's labels (--label) replace the metadata's of the same key */
	nl = trace_labels_override(labels, nl, sizeof labels / sizeof labels[0], extra, nextra);
	h.labels = labels;
	h.nlabels = nl;

	s.w = trace_writer_open(out, TRACE_W_ATOMIC, err, errlen);
	if (!s.w)
		goto cleanup;
	if (trace_writer_header(s.w, &h) < 0)
		goto writer_error;

	uint64_t lineno = 0;
	for (;;) {
		int r = text_input_line(ti, line, sizeof line, err, errlen);
		if (r < 0)
			goto abort;
		if (r == 0)
			break;
		lineno = text_input_lineno(ti);
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		struct it_entry e;
		if (parse_line(&s, p, lineno, &e) < 0)
			goto abort;
		s.st.entries++;
		if (handle(&s, &e) < 0) {
			if (!err[0])
				goto writer_error;
			goto abort;
		}
	}
	if (!s.st.entries) {
		/* _snapshot() without _record_memory_history(): segments only */
		snprintf(err, errlen, "%s: no allocation history to import (take the snapshot after "
			 "torch.cuda.memory._record_memory_history())", in);
		goto abort;
	}
	struct it_entry eof;
	memset(&eof, 0, sizeof eof);
	eof.a = IT_EOF;
	if (flush_run(&s, &eof) < 0)
		goto writer_error;
	if (trace_writer_close(&s.w, 1, 0, err, errlen) < 0)
		goto cleanup;
	if (stats)
		*stats = s.st;
	rc = 0;
	goto cleanup;

writer_error:
	/* close reports the writer's sticky error message; then discard */
	if (trace_writer_close(&s.w, 0, 0, err, errlen) == 0) {
		unlink(out);
		snprintf(err, errlen, "%s: writing %s failed", in, out);
	}
	goto cleanup;
abort:
	trace_writer_abort(s.w);
	s.w = NULL;
cleanup:
	text_input_close(ti);
	if (tmp[0])
		unlink(tmp);
	free(json);
	free(s.segs);
	free(s.run);
	return rc;
}
