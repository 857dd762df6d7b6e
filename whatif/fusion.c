/*
 * fusion.c: the kernel-fusion what-if (see fusion.h and docs/fusion.md).
 *
 * Two passes over the trace. The first keeps, per allocation, its size,
 * its host alloc/free times and which kernels touch it (how many, first,
 * last), and per kernel its stream, times, links and the kernel just before
 * it on its stream (none across a copy, memset or synchronisation of that
 * stream). Plans are then made in memory, as many as asked (each rule alone
 * for the report, then all rules together), and the second pass writes the
 * plan of all rules: dropped alloc/free records, fused kernels at the
 * position of the chain's last kernel (where every buffer it touches
 * exists), allocation ids in links re-numbered (they are ordinals of 'a'
 * records, and dropped ones no longer count).
 *
 * Links are incomplete in real captures (a kernel taking its pointers in a
 * parameter struct, as cuDNN's convolutions do, carries none; copies and
 * memsets carry none), so by default a buffer that is live while such an
 * opaque operation is launched is never eliminated: it might be its user.
 */
#include "fusion.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"
#include "../base/vec.h"
#include "../traces/trace.h"
#include "../traces/trace_xform.h"

#define NONE UINT32_MAX
#define FUSED_NAME_MAX 4096

const char fusion_builtin_rules[] =
	"# builtin: element-wise kernels into their producer, and chains of them\n"
	"elementwise_chain: chain *elementwise_kernel*\n"
	"elementwise_into_producer: *elementwise_kernel*|*add_kernel*|*relu*|*threshold*\n";

/* ------------------------------------------------------------ rules */

static void rule_free(struct fusion_rule *r)
{
	free(r->name);
	for (size_t i = 0; i < r->ncons; i++)
		free(r->cons[i]);
	free(r->cons);
	for (size_t i = 0; i < r->nprod; i++)
		free(r->prod[i]);
	free(r->prod);
	memset(r, 0, sizeof *r);
}

/* Split "a|b|c" into globs; -1 on an empty alternative or no memory. */
static int split_globs(const char *s, char ***out, size_t *n)
{
	size_t cnt = 1;
	for (const char *p = s; *p; p++)
		cnt += *p == '|';
	char **v = calloc(cnt, sizeof *v);
	if (!v)
		return -1;
	size_t k = 0;
	const char *p = s;
	for (;;) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (!len)
			goto fail;
		v[k] = strndup(p, len);
		if (!v[k])
			goto fail;
		k++;
		if (!bar)
			break;
		p = bar + 1;
	}
	*out = v;
	*n = k;
	return 0;
fail:
	for (size_t i = 0; i < k; i++)
		free(v[i]);
	free(v);
	return -1;
}

static int name_ok(const char *s, size_t len)
{
	if (!len || len > 63)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

/* One line (no newline, comments stripped) into R; 0, 1 blank, -1 error. */
static int parse_rule_line(char *line, unsigned lineno, const char *origin,
			   struct fusion_rule *r, char *err, size_t errlen)
{
	char *tok[8];
	size_t ntok = 0;
	char *colon = strchr(line, ':');
	char *p = line;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 1;
	if (!colon) {
		snprintf(err, errlen, "%s:%u: expected 'NAME: PATTERN [into PATTERN]' or "
			 "'NAME: chain PATTERN'", origin, lineno);
		return -1;
	}
	char *ne = colon;
	while (ne > p && (ne[-1] == ' ' || ne[-1] == '\t'))
		ne--;
	if (!name_ok(p, (size_t)(ne - p))) {
		snprintf(err, errlen, "%s:%u: rule name '%.*s': use 1 to 63 letters, digits, "
			 "'_', '-' or '.'", origin, lineno, (int)(ne - p), p);
		return -1;
	}
	r->name = strndup(p, (size_t)(ne - p));
	if (!r->name)
		goto nomem;
	r->line = lineno;
	for (char *save = NULL, *t = strtok_r(colon + 1, " \t", &save); t;
	     t = strtok_r(NULL, " \t", &save)) {
		if (ntok == 8) {
			snprintf(err, errlen, "%s:%u: rule '%s': too many words", origin, lineno, r->name);
			return -1;
		}
		tok[ntok++] = t;
	}
	const char *cons = NULL, *prod = NULL;
	if (ntok == 2 && !strcmp(tok[0], "chain")) {
		cons = prod = tok[1];
		r->chain = 1;
	} else if (ntok == 1 && strcmp(tok[0], "chain") && strcmp(tok[0], "into")) {
		cons = tok[0];
	} else if (ntok == 3 && !strcmp(tok[1], "into") && strcmp(tok[0], "chain")) {
		cons = tok[0];
		prod = tok[2];
	} else {
		snprintf(err, errlen, "%s:%u: rule '%s': expected 'PATTERN', 'PATTERN into "
			 "PATTERN' or 'chain PATTERN' after the colon", origin, lineno, r->name);
		return -1;
	}
	if (split_globs(cons, &r->cons, &r->ncons) < 0 ||
	    (prod && split_globs(prod, &r->prod, &r->nprod) < 0)) {
		snprintf(err, errlen, "%s:%u: rule '%s': empty alternative in a pattern "
			 "(a '|' at an end or doubled)", origin, lineno, r->name);
		return -1;
	}
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Rule text in the documented format: one rule per line, '#' comments. */
int fusion_rules_parse(const char *text, const char *origin, struct fusion_rules *rs,
		       char *err, size_t errlen)
{
	memset(rs, 0, sizeof *rs);
	snprintf(rs->origin, sizeof rs->origin, "%s", origin);
	char *copy = strdup(text);
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int ret = -1;
	unsigned lineno = 0;
	/* by hand, not strtok: empty lines must count */
	for (char *line = copy; line; ) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		lineno++;
		char *hash = strchr(line, '#');
		if (hash && (hash == line || hash[-1] == ' ' || hash[-1] == '\t'))
			*hash = 0;
		size_t len = strlen(line);
		if (len && line[len - 1] == '\r')
			line[len - 1] = 0;
		struct fusion_rule r;
		memset(&r, 0, sizeof r);
		int st = parse_rule_line(line, lineno, origin, &r, err, errlen);
		if (st < 0) {
			rule_free(&r);
			goto out;
		}
		if (st == 0) {
			for (size_t i = 0; i < rs->n; i++) {
				if (!strcmp(rs->v[i].name, r.name)) {
					snprintf(err, errlen, "%s:%u: rule '%s' already defined at line %u",
						 origin, lineno, r.name, rs->v[i].line);
					rule_free(&r);
					goto out;
				}
			}
			if (rs->n == FUSION_MAX_RULES) {
				snprintf(err, errlen, "%s:%u: more than %d rules", origin, lineno,
					 FUSION_MAX_RULES);
				rule_free(&r);
				goto out;
			}
			struct fusion_rule *nv = realloc(rs->v, (rs->n + 1) * sizeof *nv);
			if (!nv) {
				snprintf(err, errlen, "out of memory");
				rule_free(&r);
				goto out;
			}
			rs->v = nv;
			rs->v[rs->n++] = r;
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!rs->n) {
		snprintf(err, errlen, "%s: no rules", origin);
		goto out;
	}
	ret = 0;
out:
	free(copy);
	if (ret < 0)
		fusion_rules_free(rs);
	return ret;
}

/* The whole file in memory (rule files are small), then parse. */
int fusion_rules_load(const char *path, struct fusion_rules *rs, char *err, size_t errlen)
{
	memset(rs, 0, sizeof *rs);
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	int ret = -1;
	if (!buf)
		goto nomem;
	for (;;) {
		if (n + 1 >= cap) {
			if (cap >= (1u << 24)) {
				snprintf(err, errlen, "%s: too large for a rule file", path);
				goto out;
			}
			if (VEC_RESERVE(buf, cap, n + 2, 4096) < 0)
				goto nomem;
		}
		size_t got = fread(buf + n, 1, cap - 1 - n, f);
		n += got;
		if (!got)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		goto out;
	}
	buf[n] = 0;
	if (strlen(buf) != n) {
		snprintf(err, errlen, "%s: contains a NUL byte: not a rule file", path);
		goto out;
	}
	ret = fusion_rules_parse(buf, path, rs, err, errlen);
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	free(buf);
	fclose(f);
	return ret;
}

/* Keep only the rules named (order of the file, not of NAMES). */
int fusion_rules_keep(struct fusion_rules *rs, char *const *names, size_t n,
		      char *err, size_t errlen)
{
	for (size_t k = 0; k < n; k++) {
		size_t i;
		for (i = 0; i < rs->n && strcmp(rs->v[i].name, names[k]); i++)
			;
		if (i == rs->n) {
			size_t off = 0;
			char known[512] = "";
			for (size_t j = 0; j < rs->n && off < sizeof known; j++)
				off += (size_t)snprintf(known + off, sizeof known - off, "%s%s",
							j ? ", " : "", rs->v[j].name);
			snprintf(err, errlen, "--rule '%s': no such rule in %s (known: %s)", names[k],
				 rs->origin, known);
			return -1;
		}
	}
	size_t w = 0;
	for (size_t i = 0; i < rs->n; i++) {
		int keep = 0;
		for (size_t k = 0; k < n && !keep; k++)
			keep = !strcmp(rs->v[i].name, names[k]);
		if (keep)
			rs->v[w++] = rs->v[i];
		else
			rule_free(&rs->v[i]);
	}
	rs->n = w;
	return 0;
}

/* Free the rules (RS may be zeroed or partly filled). */
void fusion_rules_free(struct fusion_rules *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		rule_free(&rs->v[i]);
	free(rs->v);
	rs->v = NULL;
	rs->n = 0;
}

static int glob_any(char *const *g, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!fnmatch(g[i], s, 0))
			return 1;
	return 0;
}

/* ------------------------------------------------------------ pass 1 */

struct fz_alloc {
	uint64_t bytes;
	uint64_t t_alloc, t_free;    /* host times; t_free UINT64_MAX = never freed */
	uint32_t first_k, last_k;    /* kernels touching it */
	uint32_t ntouch;             /* distinct kernels, saturating */
	uint8_t exposed;             /* live across an opaque operation */
	uint8_t host;                /* pageable or pinned host memory */
};

struct fz_kernel {
	uint64_t start, end, launch;
	uint64_t loff;               /* into fz.links */
	uint64_t cons, prod;         /* rule bits: consumer / producer pattern matches */
	uint32_t stream, name, nlinks, prev;
	uint32_t regs, smem;
};

struct fz_opaque { uint64_t t, bytes; };  /* bytes UINT64_MAX: a kernel (any size) */
struct fz_iv { uint64_t start, end; };     /* merged NVTX ranges peaks count in */

struct fz {
	const struct fusion_rules *rs;
	struct fz_alloc *a;
	size_t na, cap_a;
	struct fz_kernel *k;
	size_t nk, cap_k;
	uint64_t *links;
	size_t nlinks, cap_links;
	uint64_t *mev;               /* memory events: id << 1 | is_free */
	size_t nmev, cap_mev;
	struct fz_opaque *op;
	size_t nop, cap_op;
	const char *peak_range;
	struct fz_iv *iv;
	size_t niv, cap_iv;
	uint64_t *sid_cons, *sid_prod;
	uint8_t *sid_done;
	size_t cap_sid;
	/* a plan */
	uint32_t *head, *next, *last, *gsize, *glinks;
	uint8_t *grule;              /* rule index of a group (its first join) */
	uint8_t *elim;               /* per alloc: 0, or 1 + the group's rule */
	uint64_t *fused_dur;         /* per head */
	double bw;                   /* bytes per ns */
};

/* Capacity for NEED elements, doubling from 256 so appends stay amortised O(1). */
static size_t grow_cap(size_t cap, size_t need)
{
	size_t nc = cap ? cap : 256;
	while (nc < need)
		nc *= 2;
	return nc;
}

/* *P from OLD to NC elements. The new ones are zeroed: the sid tables
 * read 0 as "not seen yet". */
static int resize_zeroed(void **p, size_t old, size_t nc, size_t elem)
{
	unsigned char *np = realloc(*p, nc * elem);
	if (!np)
		return -1;
	memset(np + old * elem, 0, (nc - old) * elem);
	*p = np;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t nc = grow_cap(*cap, need);
	if (resize_zeroed(p, *cap, nc, elem) < 0)
		return -1;
	*cap = nc;
	return 0;
}

/* Rule masks of string SID as consumer and producer, cached per sid. */
static int sid_masks(struct fz *z, const struct trace_reader *rd, uint32_t sid,
		     uint64_t *cons, uint64_t *prod)
{
	if (sid >= z->cap_sid) {
		size_t nc = grow_cap(z->cap_sid, (size_t)sid + 1);
		if (resize_zeroed((void **)&z->sid_cons, z->cap_sid, nc, sizeof *z->sid_cons) < 0 ||
		    resize_zeroed((void **)&z->sid_prod, z->cap_sid, nc, sizeof *z->sid_prod) < 0 ||
		    resize_zeroed((void **)&z->sid_done, z->cap_sid, nc, sizeof *z->sid_done) < 0)
			return -1;
		z->cap_sid = nc;
	}
	if (!z->sid_done[sid]) {
		const char *s = trace_reader_string(rd, sid);
		uint64_t c = 0, p = 0;
		for (size_t r = 0; s && r < z->rs->n; r++) {
			const struct fusion_rule *ru = &z->rs->v[r];
			if (glob_any(ru->cons, ru->ncons, s))
				c |= 1ull << r;
			if (!ru->nprod || glob_any(ru->prod, ru->nprod, s))
				p |= 1ull << r;
		}
		z->sid_cons[sid] = c;
		z->sid_prod[sid] = p;
		z->sid_done[sid] = 1;
	}
	*cons = z->sid_cons[sid];
	*prod = z->sid_prod[sid];
	return 0;
}

static int cmp_opaque(const void *x, const void *y)
{
	const struct fz_opaque *a = x, *b = y;
	return a->t < b->t ? -1 : a->t > b->t;
}

static int pass1(struct fz *z, struct trace_reader *rd, char *err, size_t errlen)
{
	struct u64map live, last_on_stream;
	struct trace_launches corr;
	struct trace_rec rec;
	uint32_t barrier_k = 0;       /* kernels before it precede a device-wide sync */
	int ret = -1, st;
	u64map_init(&live);
	u64map_init(&last_on_stream);
	trace_launches_init(&corr);
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		switch (rec.type) {
		case TREC_ALLOC: {
			if (grow((void **)&z->a, &z->cap_a, z->na + 1, sizeof *z->a) < 0 ||
			    grow((void **)&z->mev, &z->cap_mev, z->nmev + 1, sizeof *z->mev) < 0 ||
			    (rec.u.mem.addr != U64MAP_EMPTY &&
			     u64map_put(&live, rec.u.mem.addr, z->na) < 0))
				goto nomem;
			struct fz_alloc *a = &z->a[z->na];
			memset(a, 0, sizeof *a);
			a->bytes = rec.u.mem.bytes;
			a->t_alloc = rec.start;
			a->t_free = UINT64_MAX;
			a->first_k = a->last_k = NONE;
			/* host memory (pageable, pinned) is no device intermediate and
			 * not device memory: neither counted nor eliminated */
			a->host = trace_mem_kind_host(rec.u.mem.kind);
			/* an address the map cannot key: its free is not found, so keep it */
			a->exposed = a->host || rec.u.mem.addr == U64MAP_EMPTY;
			if (!a->host)
				z->mev[z->nmev++] = (uint64_t)z->na << 1;
			z->na++;
			break;
		}
		case TREC_FREE: {
			uint64_t id;
			if (u64map_del(&live, rec.u.mem.addr, &id)) {
				if (grow((void **)&z->mev, &z->cap_mev, z->nmev + 1, sizeof *z->mev) < 0)
					goto nomem;
				z->a[id].t_free = rec.start;
				if (!z->a[id].host)
					z->mev[z->nmev++] = id << 1 | 1;
			}
			break;
		}
		case TREC_RANGE: {
			const char *nm = trace_reader_string(rd, rec.u.range.name);
			if (!z->peak_range || !nm || fnmatch(z->peak_range, nm, 0))
				break;
			if (z->niv && rec.start <= z->iv[z->niv - 1].end) {
				if (rec.end > z->iv[z->niv - 1].end)
					z->iv[z->niv - 1].end = rec.end;
				break;
			}
			if (grow((void **)&z->iv, &z->cap_iv, z->niv + 1, sizeof *z->iv) < 0)
				goto nomem;
			z->iv[z->niv++] = (struct fz_iv){rec.start, rec.end};
			break;
		}
		case TREC_API:
			if (trace_launches_note(&corr, &rec) < 0)
				goto nomem;
			break;
		case TREC_KERNEL: {
			const struct trace_kernel *tk = &rec.u.kernel;
			if (z->nk >= NONE - 1) {
				snprintf(err, errlen, "%s:%" PRIu64 ": too many kernels for the fusion "
					 "what-if", trace_reader_path(rd), rec.line);
				goto out;
			}
			if (grow((void **)&z->k, &z->cap_k, z->nk + 1, sizeof *z->k) < 0 ||
			    grow((void **)&z->links, &z->cap_links, z->nlinks + tk->nlinks,
				 sizeof *z->links) < 0)
				goto nomem;
			uint32_t ki = (uint32_t)z->nk;
			struct fz_kernel *k = &z->k[ki];
			memset(k, 0, sizeof *k);
			k->start = rec.start;
			k->end = rec.end;
			k->launch = trace_launches_take(&corr, tk->corr, rec.start);
			k->stream = tk->stream;
			k->name = tk->name;
			k->regs = tk->regs;
			k->smem = tk->smem;
			k->loff = z->nlinks;
			if (sid_masks(z, rd, tk->name, &k->cons, &k->prod) < 0)
				goto nomem;
			for (uint32_t i = 0; i < tk->nlinks; i++) {
				uint64_t id = tk->links[i];
				if (id >= z->na) {
					snprintf(err, errlen, "%s:%" PRIu64 ": kernel links allocation %"
						 PRIu64 ", but only %zu 'a' records came before",
						 trace_reader_path(rd), rec.line, id, z->na);
					goto out;
				}
				struct fz_alloc *a = &z->a[id];
				if (a->last_k == ki)
					continue;      /* listed twice: one touch */
				if (a->first_k == NONE)
					a->first_k = ki;
				a->last_k = ki;
				if (a->ntouch < 1000)
					a->ntouch++;
				z->links[z->nlinks++] = id;
				k->nlinks++;
			}
			uint64_t prev;
			k->prev = u64map_get(&last_on_stream, tk->stream, &prev) && prev >= barrier_k ?
				  (uint32_t)prev : NONE;
			if (u64map_put(&last_on_stream, tk->stream, ki) < 0)
				goto nomem;
			if (!k->nlinks) {
				if (grow((void **)&z->op, &z->cap_op, z->nop + 1, sizeof *z->op) < 0)
					goto nomem;
				z->op[z->nop++] = (struct fz_opaque){k->launch, UINT64_MAX};
			}
			z->nk++;
			break;
		}
		case TREC_MEMCPY:
		case TREC_MEMSET:
			u64map_del(&last_on_stream, rec.u.copy.stream, NULL);
			if (grow((void **)&z->op, &z->cap_op, z->nop + 1, sizeof *z->op) < 0)
				goto nomem;
			z->op[z->nop++] = (struct fz_opaque){
				trace_launches_take(&corr, rec.u.copy.corr, rec.start), rec.u.copy.bytes};
			break;
		case TREC_SYNC:
			if (rec.u.sync.stream == TRACE_NO_STREAM)
				barrier_k = (uint32_t)z->nk;
			else
				u64map_del(&last_on_stream, rec.u.sync.stream, NULL);
			break;
		default:
			break;
		}
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	u64map_free(&live);
	u64map_free(&last_on_stream);
	trace_launches_free(&corr);
	return ret;
}

/* Mark buffers live while an opaque kernel, copy or memset was launched:
 * it may read or write them without a link saying so. */
static void mark_exposed(struct fz *z)
{
	if (z->nop)
		qsort(z->op, z->nop, sizeof *z->op, cmp_opaque);
	for (size_t i = 0; i < z->na; i++) {
		struct fz_alloc *a = &z->a[i];
		size_t lo = 0, hi = z->nop;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (z->op[mid].t < a->t_alloc)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (a->exposed)
			continue;
		for (size_t j = lo; j < z->nop && z->op[j].t <= a->t_free; j++) {
			if (z->op[j].bytes == UINT64_MAX || z->op[j].bytes <= a->bytes) {
				a->exposed = 1;
				break;
			}
		}
	}
}

/* Bytes a kernel moves, as its links say: each buffer once, twice when it
 * is the only one (read and written in place). */
static uint64_t kernel_bytes(const struct fz *z, const struct fz_kernel *k)
{
	uint64_t b = 0;
	for (uint32_t i = 0; i < k->nlinks; i++)
		b += z->a[z->links[k->loff + i]].bytes;
	return k->nlinks == 1 ? 2 * b : b;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

/* Median bytes/ns of the kernels any rule calls a consumer (element-wise):
 * what such memory-bound kernels achieve on this GPU. */
static int measure_bw(const struct fz *z, double *bw, size_t *nsamples)
{
	double *v = malloc((z->nk ? z->nk : 1) * sizeof *v);
	size_t n = 0;
	if (!v)
		return -1;
	for (size_t i = 0; i < z->nk; i++) {
		const struct fz_kernel *k = &z->k[i];
		if (!k->cons || !k->nlinks || k->end <= k->start)
			continue;
		uint64_t b = kernel_bytes(z, k);
		if (b)
			v[n++] = (double)b / (double)(k->end - k->start);
	}
	if (n)
		qsort(v, n, sizeof *v, cmp_double);
	*nsamples = n;
	*bw = n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
	free(v);
	return 0;
}

/* ------------------------------------------------------------ plan */

static int plan_alloc(struct fz *z)
{
	size_t nk = z->nk ? z->nk : 1, na = z->na ? z->na : 1;
	z->head = malloc(nk * sizeof *z->head);
	z->next = malloc(nk * sizeof *z->next);
	z->last = malloc(nk * sizeof *z->last);
	z->gsize = malloc(nk * sizeof *z->gsize);
	z->glinks = malloc(nk * sizeof *z->glinks);
	z->grule = malloc(nk);
	z->fused_dur = malloc(nk * sizeof *z->fused_dur);
	z->elim = malloc(na);
	return z->head && z->next && z->last && z->gsize && z->glinks && z->grule &&
	       z->fused_dur && z->elim ? 0 : -1;
}

/* Does kernel K pass a buffer from P (the kernel before it) that nothing
 * else touches? */
static int passes_buffer(const struct fz *z, uint32_t p, uint32_t k)
{
	const struct fz_kernel *kk = &z->k[k];
	for (uint32_t i = 0; i < kk->nlinks; i++) {
		const struct fz_alloc *a = &z->a[z->links[kk->loff + i]];
		if (a->ntouch == 2 && a->first_k == p && a->last_k == k && !a->exposed && a->bytes)
			return 1;
	}
	return 0;
}

/* Group kernels with the rules in MASK, eliminate buffers, time the fused
 * kernels, and fill S. */
static void plan(struct fz *z, uint64_t mask, struct fusion_stats *s, struct fusion_stats *share)
{
	memset(s, 0, sizeof *s);
	for (uint32_t i = 0; i < z->nk; i++) {
		z->head[i] = z->last[i] = i;
		z->next[i] = NONE;
		z->gsize[i] = 1;
		z->glinks[i] = z->k[i].nlinks;
		z->grule[i] = 0;
	}
	memset(z->elim, 0, z->na ? z->na : 1);
	for (uint32_t i = 0; i < z->nk; i++) {
		const struct fz_kernel *k = &z->k[i];
		uint32_t p = k->prev;
		if (p == NONE)
			continue;
		uint64_t m = k->cons & z->k[p].prod & mask;
		uint32_t h = z->head[p];
		if (!m || z->last[h] != p || z->glinks[h] + k->nlinks > TRACE_MAX_LINKS ||
		    !passes_buffer(z, p, i))
			continue;
		if (z->gsize[h] == 1)
			z->grule[h] = (uint8_t)__builtin_ctzll(m);
		z->head[i] = h;
		z->next[p] = i;
		z->last[h] = i;
		z->gsize[h]++;
		z->glinks[h] += k->nlinks;
	}
	/* every buffer only a group's kernels touch (two of them) goes */
	for (size_t b = 0; b < z->na; b++) {
		const struct fz_alloc *a = &z->a[b];
		if (a->ntouch != 2 || a->exposed || !a->bytes ||
		    z->head[a->first_k] != z->head[a->last_k] || z->gsize[z->head[a->first_k]] < 2)
			continue;
		uint32_t h = z->head[a->first_k];
		z->elim[b] = (uint8_t)(1 + z->grule[h]);
		s->buffers_eliminated++;
		s->bytes_eliminated += a->bytes;
		if (share) {
			share[z->grule[h]].buffers_eliminated++;
			share[z->grule[h]].bytes_eliminated += a->bytes;
		}
	}
	/* durations */
	for (uint32_t i = 0; i < z->nk; i++) {
		uint64_t d = z->k[i].end - z->k[i].start;
		s->ktime_before += d;
		if (z->head[i] != i)
			continue;
		if (z->gsize[i] == 1) {
			s->ktime_after += d;
			continue;
		}
		uint64_t sum = 0, saved = 0, keep = 0;
		uint64_t seen[TRACE_MAX_LINKS];
		size_t nseen = 0;
		for (uint32_t m = i; m != NONE; m = z->next[m]) {
			const struct fz_kernel *k = &z->k[m];
			sum += k->end - k->start;
			for (uint32_t l = 0; l < k->nlinks; l++) {
				uint64_t id = z->links[k->loff + l];
				size_t j;
				for (j = 0; j < nseen && seen[j] != id; j++)
					;
				if (j < nseen)
					continue;
				if (nseen < TRACE_MAX_LINKS)
					seen[nseen++] = id;
				if (z->elim[id])
					saved += 2 * z->a[id].bytes;
				else
					keep += z->a[id].bytes;
			}
		}
		double t = (double)sum - (double)saved / z->bw;
		double floor_t = (double)keep / z->bw;
		if (t < floor_t)
			t = floor_t;
		if (t > (double)sum)
			t = (double)sum;
		if (t < 1)
			t = 1;
		z->fused_dur[i] = (uint64_t)llround(t);
		s->ktime_after += z->fused_dur[i];
		s->groups++;
		s->kernels_fused += z->gsize[i];
		if (share) {
			share[z->grule[i]].groups++;
			share[z->grule[i]].kernels_fused += z->gsize[i];
		}
	}
	/* peak of live requested bytes, before and after */
	uint64_t live0 = 0, live1 = 0;
	size_t j = 0;
	for (size_t e = 0; e < z->nmev; e++) {
		uint64_t id = z->mev[e] >> 1, b = z->a[id].bytes;
		int is_free = (int)(z->mev[e] & 1);
		uint64_t t = is_free ? z->a[id].t_free : z->a[id].t_alloc;
		int inside = 1;
		if (z->peak_range) {
			while (j < z->niv && z->iv[j].end < t)
				j++;
			inside = j < z->niv && z->iv[j].start <= t;
		}
		live0 = is_free ? live0 - b : live0 + b;
		if (inside && live0 > s->peak_before)
			s->peak_before = live0;
		if (z->elim[id])
			continue;
		live1 = is_free ? live1 - b : live1 + b;
		if (inside && live1 > s->peak_after)
			s->peak_after = live1;
	}
}

/* ------------------------------------------------------------ pass 2 */

struct fz_out {
	struct trace_writer *w;
	struct trace_strmap sm;      /* the reader's strings as the writer's */
	uint64_t *newid;             /* old allocation id -> new */
	uint64_t links[TRACE_MAX_LINKS]; /* the written kernel's links, renumbered */
};

/* "fused[RULE]: A + B + C", cut to a sane length. */
static void fused_name(const struct fz *z, const struct trace_reader *rd, uint32_t h,
		       char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "fused[%s]:", z->rs->v[z->grule[h]].name);
	for (uint32_t m = h; m != NONE && off < len; m = z->next[m]) {
		const char *s = trace_reader_string(rd, z->k[m].name);
		off += (size_t)snprintf(buf + off, len - off, "%s%s", m == h ? " " : " + ",
					s ? s : "?");
	}
	if (off >= len && len > 4)
		memcpy(buf + len - 4, "...", 4);
}

static int pass2(struct fz *z, struct trace_reader *rd, const char *out,
		 const struct fusion_report *rep, char *err, size_t errlen)
{
	struct fz_out o;
	struct u64map live;
	struct trace_rec rec;
	char *name = NULL, lbuf[1024], bwbuf[64];
	int ret = -1, st;
	uint64_t aidx = 0;
	uint32_t kidx = 0;

	memset(&o, 0, sizeof o);
	u64map_init(&live);
	name = malloc(FUSED_NAME_MAX);
	o.newid = malloc((z->na ? z->na : 1) * sizeof *o.newid);
	if (!name || !o.newid)
		goto nomem;
	for (uint64_t i = 0, n = 0; i < z->na; i++) {
		o.newid[i] = n;
		n += !z->elim[i];
	}
	size_t off = 0;
	lbuf[0] = 0;
	for (size_t r = 0; r < z->rs->n && off < sizeof lbuf; r++)
		off += (size_t)snprintf(lbuf + off, sizeof lbuf - off, "%s%s", r ? "," : "",
					z->rs->v[r].name);
	snprintf(bwbuf, sizeof bwbuf, "%.0f", rep->bandwidth);
	const struct trace_label add[] = {{"fusion", lbuf}, {"fusion_bandwidth", bwbuf}};
	o.w = trace_xform_open(out, rd, add, 2, &o.sm, err, errlen);
	if (!o.w)
		goto out;
	if (trace_reader_rewind(rd) < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		int keep = 1;
		switch (rec.type) {
		case TREC_ALLOC:
			if (rec.u.mem.addr != U64MAP_EMPTY && u64map_put(&live, rec.u.mem.addr, aidx) < 0)
				goto nomem;
			keep = !z->elim[aidx++];
			if (keep && trace_strmap_rec(&o.sm, &rec) < 0)
				goto nomem;
			break;
		case TREC_FREE: {
			uint64_t id;
			if (u64map_del(&live, rec.u.mem.addr, &id))
				keep = !z->elim[id];
			if (keep && trace_strmap_rec(&o.sm, &rec) < 0)
				goto nomem;
			break;
		}
		case TREC_KERNEL: {
			uint32_t i = kidx++, hd = z->head[i];
			struct trace_kernel *k = &rec.u.kernel;
			if (z->gsize[hd] > 1 && z->last[hd] != i) {
				keep = 0;
				break;
			}
			if (z->gsize[hd] > 1) {
				/* the chain becomes one kernel here, where all its buffers exist */
				uint64_t *links = o.links;
				uint32_t n = 0;
				for (uint32_t m = hd; m != NONE; m = z->next[m]) {
					const struct fz_kernel *km = &z->k[m];
					if (km->regs > k->regs)
						k->regs = km->regs;
					if (km->smem > k->smem)
						k->smem = km->smem;
					for (uint32_t l = 0; l < km->nlinks; l++) {
						uint64_t id = z->links[km->loff + l];
						if (z->elim[id])
							continue;
						uint32_t j;
						for (j = 0; j < n && links[j] != o.newid[id]; j++)
							;
						if (j == n && n < TRACE_MAX_LINKS)
							links[n++] = o.newid[id];
					}
				}
				k->nlinks = n;
				k->links = links;
				rec.end = rec.start + z->fused_dur[hd];
				fused_name(z, rd, hd, name, FUSED_NAME_MAX);
				uint32_t sid = trace_writer_intern(o.w, name);
				if (sid == TRACE_NO_STRING)
					goto nomem;
				k->name = sid;
			} else {
				for (uint32_t l = 0; l < k->nlinks; l++)
					o.links[l] = o.newid[k->links[l]];
				k->links = o.links;
				if (trace_strmap_id(&o.sm, k->name, &k->name) < 0)
					goto nomem;
			}
			break;
		}
		case TREC_RANGE:
		case TREC_API:
			if (trace_strmap_rec(&o.sm, &rec) < 0)
				goto nomem;
			break;
		case TREC_SEGMENT:
			keep = 0;          /* the unfused run's allocator decisions */
			break;
		case TREC_CONTROL:
			keep = rec.u.control.kind != TCTL_OOM;  /* the unfused run's OOM */
			break;
		default:
			break;
		}
		if (keep && trace_writer_record(o.w, &rec) < 0) {
			snprintf(err, errlen, "%s: writing record from %s:%" PRIu64 " failed", out,
				 trace_reader_path(rd), rec.line);
			goto out;
		}
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	if (trace_xform_close(&o.w, rd, err, errlen) < 0)
		goto out;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	if (o.w)
		trace_writer_abort(o.w);
	u64map_free(&live);
	trace_strmap_free(&o.sm);
	free(o.newid);
	free(name);
	return ret;
}

/* ------------------------------------------------------------ driver */

static void fz_free(struct fz *z)
{
	free(z->a);
	free(z->k);
	free(z->links);
	free(z->mev);
	free(z->op);
	free(z->iv);
	free(z->sid_cons);
	free(z->sid_prod);
	free(z->sid_done);
	free(z->head);
	free(z->next);
	free(z->last);
	free(z->gsize);
	free(z->glinks);
	free(z->grule);
	free(z->elim);
	free(z->fused_dur);
}

/* Read IN, plan each rule alone and all together, write OUT. */
int fusion_apply(const char *in, const char *out, const struct fusion_rules *rs,
		 const struct fusion_options *opt, struct fusion_report *rep,
		 char *err, size_t errlen)
{
	struct fz z;
	struct trace_reader *rd = NULL;
	int ret = -1;

	memset(&z, 0, sizeof z);
	memset(rep, 0, sizeof *rep);
	z.rs = rs;
	if (!rs || !rs->n || rs->n > FUSION_MAX_RULES) {
		snprintf(err, errlen, "fusion: between 1 and %d rules needed", FUSION_MAX_RULES);
		return -1;
	}
	rd = trace_reader_start(in, err, errlen);
	if (!rd)
		goto out;
	z.peak_range = opt->peak_range;
	if (pass1(&z, rd, err, errlen) < 0)
		goto out;
	if (z.peak_range && !z.niv) {
		snprintf(err, errlen, "--peak-in '%s': no NVTX range of %s has a matching name",
			 z.peak_range, in);
		goto out;
	}
	if (!opt->trust_links)
		mark_exposed(&z);
	rep->nrules = rs->n;
	rep->alone = calloc(rs->n, sizeof *rep->alone);
	rep->share = calloc(rs->n, sizeof *rep->share);
	if (!rep->alone || !rep->share || plan_alloc(&z) < 0)
		goto nomem;
	if (measure_bw(&z, &z.bw, &rep->bandwidth_samples) < 0)
		goto nomem;
	if (opt->bandwidth > 0) {
		z.bw = opt->bandwidth / 1e9;
		rep->bandwidth_source = "option";
	} else if (rep->bandwidth_samples >= 3 && z.bw > 0) {
		rep->bandwidth_source = "measured";
	} else {
		z.bw = 1000.0;   /* 1 TB/s: a cautious figure for a current datacenter GPU */
		rep->bandwidth_source = "default";
	}
	rep->bandwidth = z.bw * 1e9;
	rep->kernels = z.nk;
	rep->allocs = z.na;
	for (size_t i = 0; i < z.nk; i++)
		rep->kernels_linked += z.k[i].nlinks > 0;
	for (size_t i = 0; i < z.na; i++)
		rep->exposed_allocs += z.a[i].exposed;
	for (size_t r = 0; r < rs->n; r++)
		plan(&z, 1ull << r, &rep->alone[r], NULL);
	uint64_t all = rs->n == 64 ? UINT64_MAX : (1ull << rs->n) - 1;
	plan(&z, all, &rep->all, rep->share);
	if (out && pass2(&z, rd, out, rep, err, errlen) < 0)
		goto out;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	if (ret < 0)
		fusion_report_free(rep);
	trace_reader_close(rd);
	fz_free(&z);
	return ret;
}

/* Free what fusion_apply() put in REP. */
void fusion_report_free(struct fusion_report *rep)
{
	free(rep->alone);
	free(rep->share);
	rep->alone = rep->share = NULL;
}
