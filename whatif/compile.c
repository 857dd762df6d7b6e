/*
 * compile.c: the torch.compile what-if's trace transform, the partitioner
 * and layout stage (see compile.h and docs/fusion.md; compile_apply.c runs
 * the whole what-if).
 *
 * The partitioner stage reads the trace once to learn, per allocation, when
 * it was made and freed, in which forward it was made, the kernel that
 * produced it and which kernels read it in backward; per kernel its class
 * (from its name), host launch time and links. It decides which saved
 * activations the compiled program recomputes, and writes the trace again
 * with their frees moved to just after their last forward use, and the
 * channels-last copies Inductor's layout optimisation makes of a
 * convolutional graph's inputs added. The fusion stage (fusion.c) then
 * fuses pointwise chains of the result.
 */
#include "compile.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"
#include "../base/vec.h"
#include "../traces/trace.h"
#include "../traces/trace_xform.h"
#include "compile_int.h"

#define NONE UINT32_MAX

const char compile_builtin_rules[] =
	"# builtin: an approximation of Inductor's fusion (default mode)\n"
	"pointwise_chain: chain *elementwise_kernel*|*add_kernel*|*relu*|*threshold*|*clamp*\n"
	"bn_epilogue: *elementwise_kernel*|*relu*|*threshold*|*clamp* into "
	"*bn_fw*|*batch_norm*|*bn_bw*|*BatchNorm*\n"
	"reduction_prologue: *bn_bw*|*batch_norm_backward*|*reduce_kernel* into "
	"*elementwise_kernel*|*threshold*\n"
	"reduction_epilogue: *elementwise_kernel* into *reduce_kernel*\n"
	"softmax_loss: *nll_loss* into *softmax*|*log_softmax*\n"
	"softmax_loss_backward: *softmax_warp_backward*|*softmax_backward* into "
	"*nll_loss_backward*\n"
	"pool_prologue: *max_pool*|*avg_pool* into *elementwise_kernel*|*threshold*|*clamp*\n";

/* The table behind compile_kernel_class (compile_int.h has the classes). */
static const struct {
	const char *glob;
	enum kclass cls;
} kclass_rows[] = {
	{"*bn_fw*", K_NORM}, {"*bn_bw*", K_NORM}, {"*batch_norm*", K_NORM},
	{"*BatchNorm*", K_NORM}, {"*layer_norm*", K_NORM}, {"*LayerNorm*", K_NORM},
	{"*distribution*", K_RANDOM}, {"*fused_dropout*", K_RANDOM}, {"*bernoulli*", K_RANDOM},
	{"*CatArrayBatched*", K_CAT},
	{"*DepthwiseConv2d*", K_DWCONV}, {"*conv_depthwise*", K_DWCONV},
	{"*max_pool_forward*", K_POOL}, {"*max_pool_backward*", K_POOL},
	{"*nchwToNhwc*", K_LAYOUT}, {"*nhwcToNchw*", K_LAYOUT},
	{"*xmma*", K_LIBRARY}, {"*cutlass*", K_LIBRARY}, {"*cudnn*", K_LIBRARY},
	{"*cublas*", K_LIBRARY}, {"*gemm*", K_LIBRARY}, {"*Gemm*", K_LIBRARY},
	{"*onv*", K_LIBRARY} /* conv, Conv: ATen's depthwise convolution */,
	{"*wgrad*", K_LIBRARY}, {"*dgrad*", K_LIBRARY}, {"*flash*", K_LIBRARY},
	{"*fmha*", K_LIBRARY}, {"*attention*", K_LIBRARY}, {"*cask*", K_LIBRARY},
	{"*elementwise_kernel*", K_POINTWISE},
};

enum kclass compile_kernel_class(const char *name)
{
	if (!name)
		return K_OTHER;
	for (size_t i = 0; i < sizeof kclass_rows / sizeof kclass_rows[0]; i++)
		if (!fnmatch(kclass_rows[i].glob, name, 0))
			return kclass_rows[i].cls;
	return K_OTHER;
}

struct cp_alloc {
	uint64_t addr, bytes, t_alloc, t_free;
	uint64_t last_fwd_use;       /* launch time of its last forward reader */
	uint64_t last_bwd_use;       /* ... of its last backward reader */
	uint32_t fwd;                /* forward range it was made in, or NONE */
	uint32_t producer;           /* first kernel linking it after it was made */
	uint32_t last_fwd_k;         /* the last forward kernel linking it */
	uint8_t fwd_other;           /* a forward reader that is not a max pool */
	uint8_t fwd_library;         /* a forward reader is a library kernel (its
				      * backward, a weight gradient, reads it too) or
				      * a max pool (its backward takes the input) */
	uint8_t bwd_pool;            /* read in backward by a max-pool backward */
	uint8_t fwd_opaque;          /* an opaque library kernel came right after a
				      * forward kernel that wrote it (its reader) */
	uint8_t shrink;              /* max-pool indices: kept as int8 offsets */
	uint8_t drop;                /* never made (a copy eager autograd made) */
	uint32_t bwd_users;          /* linked kernels in its backward (saturating) */
	uint8_t bwd_library;         /* one of them is a library kernel */
	uint8_t recompute;
	uint8_t copied;              /* has a channels-last copy (its 'a' fields are
				      * the copy's) */
	uint64_t layout_bytes;       /* a cuDNN workspace: what eager's layout
				      * transforms kept in it (NHWC copies) */
	uint32_t copy;               /* its latest channels-last copy (cp.copies), or NONE */
};

/* A channels-last copy the compiled program makes of a graph input (a
 * parameter or the step's input) that eager cuDNN transforms to NHWC in
 * forward: made when its forward starts, saved for backward (the
 * convolution's data and weight gradients read it), freed after the
 * library call of its last backward reader returns. */
struct cp_copy_cl {
	uint64_t id;                 /* the allocation it copies */
	uint64_t t_alloc, t_free;    /* its forward's start; when the library
				      * call of its last backward reader ends */
	uint32_t bwd;                /* that backward */
	uint32_t last_reader;        /* that reader's kernel, or NONE */
};

struct cp_kernel {
	uint64_t launch;
	uint64_t loff;               /* into cp.links */
	uint32_t nlinks;
	uint8_t cls;
};


/* Append VAL to the array ARR of N elements and capacity CAP: 0 or -1. */
#define PUSH(arr, n, cap, val) \
	(VEC_RESERVE(arr, cap, (n) + 1, 256) < 0 ? -1 : ((arr)[(n)++] = (val), 0))

struct cp {
	struct cp_alloc *a;
	size_t na, cap_a;
	struct cp_kernel *k;
	size_t nk, cap_k;
	uint64_t *links;
	size_t nlinks, cap_links;
	struct compile_range *fwd, *bwd;
	size_t nfwd, cap_fwd, nbwd, cap_bwd;
	uint64_t *opaque;            /* launch times of kernels without links */
	size_t nopaque, cap_opaque;
	struct cp_copy { uint64_t launch, bytes; } *dtod;  /* device-to-device copies */
	size_t ndtod, cap_dtod;
	struct compile_kclass_cache cls;
	uint32_t *bwd_of;            /* per forward: its backward, or NONE */
	struct cp_copy_cl *copies;   /* in order of t_alloc */
	size_t ncopies, cap_copies;
};

/* Index of the range of V (sorted, disjoint) containing T, or NONE. */
uint32_t compile_range_at(const struct compile_range *v, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].start <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && t <= v[lo - 1].end ? (uint32_t)(lo - 1) : NONE;
}

int compile_ranges_read(struct trace_reader *rd, const struct compile_range_want *w, size_t nw,
			char *err, size_t errlen)
{
	struct trace_rec rec;
	int st;
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		/* a step run with the capture paused holds no records to rewrite */
		if (rec.type != TREC_RANGE || rec.u.range.uncaptured)
			continue;
		const char *nm = trace_reader_string(rd, rec.u.range.name);
		struct compile_range r = {rec.start, rec.end};
		for (size_t i = 0; nm && i < nw; i++)
			if ((w[i].glob ? !fnmatch(w[i].name, nm, 0) : !strcmp(w[i].name, nm)) &&
			    (VEC_RESERVE(*w[i].v, *w[i].cap, *w[i].n + 1, 64) < 0 ||
			     ((*w[i].v)[(*w[i].n)++] = r, 0))) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		return -1;
	}
	return 0;
}

int compile_refuse_cut_short(const struct trace_reader *rd, const char *in, char *err,
			     size_t errlen)
{
	if (trace_reader_trailer(rd)->present)
		return 0;
	snprintf(err, errlen, "%s: the trace has no trailer (cut short): refused, the "
		 "transform never works on a trace that lost records", in);
	return -1;
}

int compile_kclass_cached(struct compile_kclass_cache *c, const struct trace_reader *rd,
			  uint32_t sid, enum kclass *out)
{
	*out = K_OTHER;
	if (sid == TRACE_NO_STRING)
		return 0;
	while (c->n <= sid)
		if (PUSH(c->cls, c->n, c->cap, 0) < 0)
			return -1;
	if (!c->cls[sid])
		c->cls[sid] = (uint8_t)(1 + compile_kernel_class(trace_reader_string(rd, sid)));
	*out = (enum kclass)(c->cls[sid] - 1);
	return 0;
}

void compile_kclass_cache_free(struct compile_kclass_cache *c)
{
	free(c->cls);
	memset(c, 0, sizeof *c);
}

/* Pass 1: ranges first (a kernel's phase needs them), then the rest. */
static int read_ranges(struct cp *c, struct trace_reader *rd, char *err, size_t errlen)
{
	const struct compile_range_want w[] = {{"forward", 0, &c->fwd, &c->nfwd, &c->cap_fwd},
					       {"backward", 0, &c->bwd, &c->nbwd, &c->cap_bwd}};
	if (compile_ranges_read(rd, w, 2, err, errlen) < 0)
		return -1;
	if (!c->nfwd || !c->nbwd) {
		snprintf(err, errlen, "%s: no NVTX ranges named \"forward\" and \"backward\": "
			 "capture a training step with them (capture/torch/recipe.sh does)",
			 trace_reader_path(rd));
		return -1;
	}
	c->bwd_of = malloc(c->nfwd * sizeof *c->bwd_of);
	if (!c->bwd_of)
		goto nomem;
	/* a forward's backward: the first backward that starts after it ends */
	for (size_t f = 0, b = 0; f < c->nfwd; f++) {
		while (b < c->nbwd && c->bwd[b].start < c->fwd[f].end)
			b++;
		c->bwd_of[f] = b < c->nbwd ? (uint32_t)b : NONE;
	}
	return trace_reader_rewind(rd) < 0 ? (snprintf(err, errlen, "%s", trace_reader_error(rd)), -1)
					   : 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Note kernel KI's use of allocation A. */
static void note_use(struct cp *c, struct cp_alloc *a, uint32_t ki)
{
	const struct cp_kernel *k = &c->k[ki];
	if (a->fwd == NONE || k->launch < a->t_alloc)
		return;
	const struct compile_range *f = &c->fwd[a->fwd];
	if (k->launch <= f->end) {
		if (a->producer == NONE)
			a->producer = ki;
		a->last_fwd_use = k->launch;
		a->last_fwd_k = ki;
		if (k->cls != K_POOL)
			a->fwd_other = 1;
		/* a max pool's input is an argument of its backward too */
		if (k->cls == K_LIBRARY || k->cls == K_LAYOUT || k->cls == K_DWCONV ||
		    k->cls == K_POOL)
			a->fwd_library = 1;
		return;
	}
	uint32_t b = c->bwd_of[a->fwd];
	if (b == NONE || k->launch < c->bwd[b].start || k->launch > c->bwd[b].end)
		return;
	if (a->bwd_users < UINT32_MAX)
		a->bwd_users++;
	a->last_bwd_use = k->launch;
	if (k->cls == K_LIBRARY || k->cls == K_LAYOUT || k->cls == K_DWCONV)
		a->bwd_library = 1;
	if (k->cls == K_POOL)
		a->bwd_pool = 1;
}

/* Layout optimisation: Inductor runs a convolutional graph channels-last,
 * so what eager cuDNN transforms NCHW -> NHWC in forward and was made before
 * that forward (a weight, the step's input) is a graph input the compiled
 * forward copies to channels-last at its start and saves for backward. A
 * layout kernel reading allocation ID in forward starts a copy; its
 * backward readers extend it. -1: out of memory. */
static int note_copy(struct cp *c, uint64_t id, uint32_t ki)
{
	const struct cp_kernel *k = &c->k[ki];
	struct cp_alloc *a = &c->a[id];
	uint32_t f = compile_range_at(c->fwd, c->nfwd, k->launch);
	if (f != NONE) {
		if (k->cls != K_LAYOUT || a->t_alloc >= c->fwd[f].start || c->bwd_of[f] == NONE)
			return 0;
		if (a->copy != NONE && c->copies[a->copy].t_alloc == c->fwd[f].start)
			return 0;        /* copied in this forward already */
		struct cp_copy_cl cc = {id, c->fwd[f].start, 0, c->bwd_of[f], NONE};
		if (PUSH(c->copies, c->ncopies, c->cap_copies, cc) < 0)
			return -1;
		a->copy = (uint32_t)(c->ncopies - 1);
		return 0;
	}
	if (a->copy == NONE)
		return 0;
	struct cp_copy_cl *cc = &c->copies[a->copy];
	const struct compile_range *b = &c->bwd[cc->bwd];
	if (k->launch >= b->start && k->launch <= b->end)
		cc->last_reader = ki;
	return 0;
}

/* When the library call holding kernel KI returns, as the compiled program
 * sees it: Inductor frees a buffer after the extern call that last reads
 * it, and a convolution's backward is one call (the data gradient, then the
 * weight gradient's output, workspace and kernels). Eager's trace shows the
 * call as a run of library and layout kernels: it ends at the first 'a'
 * record after the run's last kernel, or at the next other kernel's launch,
 * whichever comes first, and never after END (its backward's end). */
static uint64_t library_call_end(const struct cp *c, uint32_t ki, uint64_t end)
{
	uint32_t last = ki;
	while (last + 1 < c->nk &&
	       (c->k[last + 1].cls == K_LIBRARY || c->k[last + 1].cls == K_LAYOUT))
		last++;
	if (last + 1 < c->nk && c->k[last + 1].launch < end)
		end = c->k[last + 1].launch;
	/* the first allocation made after the run ('a' records in time order) */
	size_t lo = 0, hi = c->na;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->a[mid].t_alloc <= c->k[last].launch)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < c->na && c->a[lo].t_alloc < end)
		end = c->a[lo].t_alloc;
	/* never before the reader itself (a trace whose 'a' records are out of
	 * time order misleads the search) */
	return end > c->k[ki].launch ? end : c->k[ki].launch;
}

/* Eager cuDNN runs an NCHW convolution by transforming its operands to
 * NHWC inside the workspace it is given: a layout kernel links the tensor
 * and the workspace, made last (a convolution's output is allocated before
 * its workspace). The compiled program, channels-last, needs none of those
 * copies: note their bytes against the workspace. */
static void note_layout(struct cp *c, uint32_t ki)
{
	const struct cp_kernel *k = &c->k[ki];
	if (k->cls != K_LAYOUT || k->nlinks < 2 ||
	    (compile_range_at(c->fwd, c->nfwd, k->launch) == NONE &&
	     compile_range_at(c->bwd, c->nbwd, k->launch) == NONE))
		return;
	uint64_t ws = 0, other = 0;
	for (uint32_t l = 0; l < k->nlinks; l++)
		if (c->links[k->loff + l] > ws)
			ws = c->links[k->loff + l];
	for (uint32_t l = 0; l < k->nlinks; l++)
		if (c->links[k->loff + l] != ws)
			other += c->a[c->links[k->loff + l]].bytes;
	c->a[ws].layout_bytes += other;
}

static int read_rest(struct cp *c, struct trace_reader *rd, char *err, size_t errlen)
{
	struct u64map live;
	struct trace_launches corr;
	struct trace_rec rec;
	uint64_t wrote[TRACE_MAX_LINKS];  /* what the previous kernel wrote */
	uint32_t nwrote = 0;
	int st, ret = -1;
	u64map_init(&live);
	trace_launches_init(&corr);
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		switch (rec.type) {
		case TREC_ALLOC: {
			struct cp_alloc a = {.addr = rec.u.mem.addr, .bytes = rec.u.mem.bytes,
					     .t_alloc = rec.start, .t_free = UINT64_MAX,
					     .producer = NONE, .last_fwd_k = NONE, .copy = NONE};
			int dev = !trace_mem_kind_host(rec.u.mem.kind);
			a.fwd = dev ? compile_range_at(c->fwd, c->nfwd, rec.start) : NONE;
			if ((rec.u.mem.addr != U64MAP_EMPTY && u64map_put(&live, rec.u.mem.addr, c->na) < 0) ||
			    PUSH(c->a, c->na, c->cap_a, a) < 0)
				goto nomem;
			break;
		}
		case TREC_FREE: {
			uint64_t id;
			if (u64map_del(&live, rec.u.mem.addr, &id))
				c->a[id].t_free = rec.start;
			break;
		}
		case TREC_API:
			if (trace_launches_note(&corr, &rec) < 0)
				goto nomem;
			break;
		case TREC_MEMCPY: {
			if (rec.u.copy.kind != TCOPY_DTOD)
				break;
			struct cp_copy cc = {trace_launches_take(&corr, rec.u.copy.corr, rec.start),
					     rec.u.copy.bytes};
			if (PUSH(c->dtod, c->ndtod, c->cap_dtod, cc) < 0)
				goto nomem;
			break;
		}
		case TREC_KERNEL: {
			const struct trace_kernel *tk = &rec.u.kernel;
			struct cp_kernel k = {.launch = trace_launches_take(&corr, tk->corr, rec.start),
					      .loff = c->nlinks, .nlinks = tk->nlinks};
			if (c->nk >= NONE - 1) {
				snprintf(err, errlen, "%s:%" PRIu64 ": too many kernels",
					 trace_reader_path(rd), rec.line);
				goto out;
			}
			enum kclass kc;
			if (compile_kclass_cached(&c->cls, rd, tk->name, &kc) < 0)
				goto nomem;
			k.cls = (uint8_t)kc;
			if (PUSH(c->k, c->nk, c->cap_k, k) < 0)
				goto nomem;
			uint32_t ki = (uint32_t)(c->nk - 1);
			if (!tk->nlinks && PUSH(c->opaque, c->nopaque, c->cap_opaque, k.launch) < 0)
				goto nomem;
			/* a cuDNN convolution or GEMM takes its pointers in a struct
			 * (no links): right after a kernel wrote a tensor, it is that
			 * tensor's reader (the next block's convolution reads the
			 * activation the ReLU just updated in place) */
			if (!tk->nlinks && kc == K_LIBRARY &&
			    compile_range_at(c->fwd, c->nfwd, k.launch) != NONE)
				for (uint32_t i = 0; i < nwrote; i++)
					c->a[wrote[i]].fwd_opaque = 1;
			nwrote = 0;
			for (uint32_t i = 0; i < tk->nlinks; i++) {
				uint64_t id = tk->links[i];
				if (id >= c->na) {
					snprintf(err, errlen, "%s:%" PRIu64 ": kernel links allocation %"
						 PRIu64 ", but only %zu 'a' records came before",
						 trace_reader_path(rd), rec.line, id, c->na);
					goto out;
				}
				if (PUSH(c->links, c->nlinks, c->cap_links, id) < 0)
					goto nomem;
				note_use(c, &c->a[id], ki);
				/* written: made by it, or updated in place (its one link) */
				if (c->a[id].producer == ki || tk->nlinks == 1)
					wrote[nwrote++] = id;
				if (note_copy(c, id, ki) < 0)
					goto nomem;
			}
			note_layout(c, ki);
			break;
		}
		default:
			break;
		}
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	if (!c->nlinks) {
		snprintf(err, errlen, "%s: no kernel-to-buffer links: capture without --no-links",
			 trace_reader_path(rd));
		goto out;
	}
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	u64map_free(&live);
	trace_launches_free(&corr);
	return ret;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* Is an opaque kernel launched in (T0, T1]? It may read what is live then. */
static int opaque_between(const struct cp *c, uint64_t t0, uint64_t t1)
{
	size_t lo = 0, hi = c->nopaque;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->opaque[mid] <= t0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->nopaque && c->opaque[lo] <= t1;
}

/* Allocation ID exists when backward B starts: saved, a parameter, or
 * recomputed itself (decided earlier: ids are in creation order). */
static int available_in_backward(const struct cp *c, uint64_t id, uint32_t b)
{
	const struct cp_alloc *x = &c->a[id];
	return x->recompute || (x->t_alloc < c->bwd[b].start && x->t_free > c->bwd[b].start);
}

static int cmp_copy(const void *x, const void *y)
{
	const struct cp_copy *a = x, *b = y;
	return a->launch < b->launch ? -1 : a->launch > b->launch;
}

/* Was allocation A written first by a device-to-device copy of its size,
 * launched after it was made and before its forward ended? That is eager
 * autograd's copy of an in-place activation's input (SiLU, Hardswish,
 * ReLU6: their backward needs the input the update overwrites). */
static int made_by_copy(const struct cp *c, const struct cp_alloc *a)
{
	size_t lo = 0, hi = c->ndtod;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->dtod[mid].launch < a->t_alloc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < c->ndtod && c->dtod[lo].launch <= c->fwd[a->fwd].end; lo++)
		if (c->dtod[lo].bytes == a->bytes)
			return 1;
	return 0;
}

/* Read in backward only by generated kernels, and no opaque kernel launched
 * between its last read and its free (it might be a convolution reading it
 * without a link). */
static int backward_generated(const struct cp *c, const struct cp_alloc *a)
{
	return a->bwd_users && !a->bwd_library && !opaque_between(c, a->last_bwd_use, a->t_free);
}

/* Could the producer K make A by recomputation: a pointwise kernel, or a
 * norm's full-size output (not its statistics: Inductor recomputes no
 * reduction whose output is a quarter of its inputs or less)? */
static int recomputable_producer(const struct cp *c, const struct cp_kernel *k, uint64_t id)
{
	if (k->cls == K_POINTWISE)
		return 1;
	if (k->cls != K_NORM)
		return 0;
	uint64_t largest = 0;
	for (uint32_t l = 0; l < k->nlinks; l++) {
		uint64_t x = c->links[k->loff + l];
		if (x != id && c->a[x].bytes > largest)
			largest = c->a[x].bytes;
	}
	return 4 * c->a[id].bytes > largest;
}

static int cmp_copy_cl(const void *x, const void *y)
{
	const struct cp_copy_cl *a = x, *b = y;
	return a->t_alloc < b->t_alloc ? -1 : a->t_alloc > b->t_alloc ? 1 : (a->id > b->id) - (a->id < b->id);
}

static void decide(struct cp *c, struct compile_partition *p)
{
	if (c->nopaque)
		qsort(c->opaque, c->nopaque, sizeof *c->opaque, cmp_u64);
	if (c->ndtod)
		qsort(c->dtod, c->ndtod, sizeof *c->dtod, cmp_copy);
	memset(p, 0, sizeof *p);
	for (size_t f = 0; f < c->nfwd; f++)
		p->steps += c->bwd_of[f] != NONE;
	/* a copy no backward kernel reads is not saved: the compiled forward
	 * frees it, a transient left out */
	size_t nc = 0;
	for (size_t i = 0; i < c->ncopies; i++) {
		struct cp_copy_cl *cc = &c->copies[i];
		if (cc->last_reader == NONE)
			continue;
		cc->t_free = library_call_end(c, cc->last_reader, c->bwd[cc->bwd].end);
		c->copies[nc++] = *cc;
	}
	c->ncopies = nc;
	if (c->ncopies)
		qsort(c->copies, c->ncopies, sizeof *c->copies, cmp_copy_cl);
	for (uint64_t id = 0; id < c->na; id++) {
		struct cp_alloc *a = &c->a[id];
		if (!a->layout_bytes)
			continue;
		if (a->layout_bytes > a->bytes)
			a->layout_bytes = a->bytes;
		p->workspaces++;
		p->workspace_bytes_saved += a->layout_bytes;
		a->drop = a->layout_bytes == a->bytes;  /* nothing else in it */
	}
	for (size_t i = 0; i < c->ncopies; i++) {
		c->a[c->copies[i].id].copied = 1;
		p->layout_copies++;
		p->layout_copy_bytes += c->a[c->copies[i].id].bytes;
	}
	for (uint64_t id = 0; id < c->na; id++) {
		struct cp_alloc *a = &c->a[id];
		if (a->fwd == NONE || c->bwd_of[a->fwd] == NONE)
			continue;
		uint32_t b = c->bwd_of[a->fwd];
		if (a->t_free == UINT64_MAX || a->t_free <= c->bwd[b].start)
			continue;        /* not saved for backward */
		p->saved++;
		p->saved_bytes += a->bytes;
		if (a->producer == NONE) {
			/* no linked writer: a copy eager made, or an opaque kernel's output */
			if (made_by_copy(c, a) && backward_generated(c, a)) {
				a->recompute = a->drop = 1;
				p->recomputed++;
				p->recomputed_bytes += a->bytes;
				p->clones++;
			} else {
				p->keep_producer++;
			}
			continue;
		}
		const struct cp_kernel *k = &c->k[a->producer];
		if (k->cls == K_POOL && !a->fwd_other && a->bwd_pool) {
			/* max-pool indices: int64 in eager, int8 offsets compiled */
			a->shrink = 1;
			p->offsets++;
			p->offsets_bytes_saved += a->bytes - (a->bytes + 7) / 8;
			continue;
		}
		/* an opaque kernel launched between the allocation and its first
		 * linked use may have written it: its producer is unknown */
		if (!recomputable_producer(c, k, id) || opaque_between(c, a->t_alloc, k->launch - 1)) {
			p->keep_producer++;
			continue;
		}
		int inputs = 1;
		for (uint32_t l = 0; l < k->nlinks && inputs; l++) {
			uint64_t x = c->links[k->loff + l];
			if (x != id && !available_in_backward(c, x, b))
				inputs = 0;
		}
		if (!inputs) {
			p->keep_inputs++;
			continue;
		}
		/* a convolution or GEMM that reads it in forward reads it in backward
		 * (the weight gradient), maybe without a link: it must exist there */
		if (a->fwd_library || a->fwd_opaque || !backward_generated(c, a)) {
			p->keep_backward++;
			continue;
		}
		a->recompute = 1;
		p->recomputed++;
		p->recomputed_bytes += a->bytes;
	}
}

/* ------------------------------------------------------------ pass 2 */

/* What pass 2 adds to the records, in time order: the early free of a
 * recomputed allocation, a channels-last copy made, a copy freed. At one
 * time in that order, then by allocation id or copy index. */
enum cp_ev_kind { EV_EARLY_FREE, EV_COPY_MADE, EV_COPY_FREED };
struct cp_ev {
	uint64_t t;
	enum cp_ev_kind kind;
	uint64_t i;                  /* allocation id (early free), copy index */
};

static int cmp_ev(const void *x, const void *y)
{
	const struct cp_ev *a = x, *b = y;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return (a->i > b->i) - (a->i < b->i);
}

struct cp_out {
	struct trace_writer *w;
	struct trace_strmap sm;      /* the reader's strings as the writer's */
};

/* Channels-last copies get addresses no capture uses, one per copy. */
#define COPY_ADDR(i) (0xc0de00000000ull + (uint64_t)(i) * 0x1000)

/* Event E as a record, with the 'a' fields MADE kept of the allocation it
 * frees or copies. */
static int write_ev(struct cp_out *o, const struct cp *c, const struct cp_ev *e,
		    const struct trace_mem *made)
{
	uint64_t id = e->kind == EV_EARLY_FREE ? e->i : c->copies[e->i].id;
	struct trace_rec r;
	memset(&r, 0, sizeof r);
	r.type = e->kind == EV_COPY_MADE ? TREC_ALLOC : TREC_FREE;
	r.start = r.end = e->t;
	r.u.mem = made[id];
	r.u.mem.id = 0;
	r.u.mem.bytes = c->a[id].bytes;
	if (e->kind != EV_EARLY_FREE) {
		r.u.mem.addr = COPY_ADDR(e->i);
		r.u.mem.corr = 0;
	}
	return trace_strmap_rec(&o->sm, &r) < 0 ? -1 : trace_writer_record(o->w, &r);
}

/* Write the events from *NEXT on that are due before time T (all of them
 * with T = UINT64_MAX); ALLOCS counts the 'a' records written. 0 or -1. */
static int write_due(struct cp_out *o, const struct cp *c, const struct cp_ev *ev, size_t nev,
		     size_t *next, uint64_t t, const struct trace_mem *made, uint64_t *allocs)
{
	for (; *next < nev && (t == UINT64_MAX || ev[*next].t < t); (*next)++) {
		if (write_ev(o, c, &ev[*next], made) < 0)
			return -1;
		*allocs += ev[*next].kind == EV_COPY_MADE;
	}
	return 0;
}

/* An allocation's BYTES in the compiled program: max-pool indices as int8
 * offsets, a workspace without eager's NHWC copies. */
static uint64_t compiled_bytes(const struct cp_alloc *a, uint64_t bytes)
{
	if (a->shrink)
		bytes = (bytes + 7) / 8;
	return bytes - a->layout_bytes;
}

static int write_partitioned(const struct cp *c, struct trace_reader *rd, const char *out,
			     const struct compile_partition *p, char *err, size_t errlen)
{
	struct cp_out o;
	struct trace_rec rec;
	struct cp_ev *ev = NULL;
	struct trace_mem *made = NULL;   /* per recomputed or copied allocation: its 'a' fields */
	uint64_t *newid = NULL;          /* allocation id -> id in the output */
	uint64_t nout = 0;               /* 'a' records written */
	uint64_t links[TRACE_MAX_LINKS], aidx = 0, kidx = 0;
	size_t nev = 0, next = 0;
	char lbuf[64];
	int st, ret = -1;
	struct u64map live;

	memset(&o, 0, sizeof o);
	u64map_init(&live);
	ev = malloc((p->recomputed + 2 * c->ncopies + 1) * sizeof *ev);
	made = calloc(c->na ? c->na : 1, sizeof *made);
	newid = malloc((c->na ? c->na : 1) * sizeof *newid);
	if (!ev || !made || !newid)
		goto nomem;
	for (uint64_t id = 0; id < c->na; id++)
		if (c->a[id].recompute && !c->a[id].drop)
			ev[nev++] = (struct cp_ev){c->a[id].last_fwd_use, EV_EARLY_FREE, id};
	for (size_t i = 0; i < c->ncopies; i++) {
		ev[nev++] = (struct cp_ev){c->copies[i].t_alloc, EV_COPY_MADE, i};
		ev[nev++] = (struct cp_ev){c->copies[i].t_free, EV_COPY_FREED, i};
	}
	qsort(ev, nev, sizeof *ev, cmp_ev);
	snprintf(lbuf, sizeof lbuf, "%" PRIu64, p->recomputed);
	const struct trace_label add = {"compile_recomputed", lbuf};
	o.w = trace_xform_open(out, rd, &add, 1, &o.sm, err, errlen);
	if (!o.w)
		goto out;
	while ((st = trace_reader_next(rd, &rec)) == TRACE_OK) {
		int keep = 1;
		/* early frees and copies due by now go first, in time order */
		if (write_due(&o, c, ev, nev, &next, rec.start, made, &nout) < 0)
			goto werr;
		switch (rec.type) {
		case TREC_ALLOC:
			keep = !c->a[aidx].drop;
			newid[aidx] = keep ? nout++ : UINT64_MAX;
			if (c->a[aidx].recompute || c->a[aidx].copied)
				made[aidx] = rec.u.mem;
			rec.u.mem.bytes = compiled_bytes(&c->a[aidx], rec.u.mem.bytes);
			if (rec.u.mem.addr != U64MAP_EMPTY && u64map_put(&live, rec.u.mem.addr, aidx) < 0)
				goto nomem;
			aidx++;
			break;
		case TREC_FREE: {
			uint64_t id;
			int found = u64map_del(&live, rec.u.mem.addr, &id);
			if (found && (c->a[id].recompute || c->a[id].drop)) {
				keep = 0;        /* freed early already, or never made */
				break;
			}
			if (found && rec.u.mem.bytes)  /* 0: the size is not recorded */
				rec.u.mem.bytes = compiled_bytes(&c->a[id], rec.u.mem.bytes);
			break;
		}
		case TREC_KERNEL: {
			/* backward readers of a recomputed tensor read its recomputation */
			const struct cp_kernel *k = &c->k[kidx++];
			uint32_t n = 0;
			for (uint32_t l = 0; l < rec.u.kernel.nlinks; l++) {
				const struct cp_alloc *a = &c->a[rec.u.kernel.links[l]];
				if (!a->drop && (!a->recompute || k->launch <= a->last_fwd_use))
					links[n++] = newid[rec.u.kernel.links[l]];
			}
			rec.u.kernel.nlinks = n;
			rec.u.kernel.links = n ? links : NULL;
			break;
		}
		case TREC_SEGMENT:
			keep = 0;        /* the eager run's allocator decisions */
			break;
		case TREC_CONTROL:
			keep = rec.u.control.kind != TCTL_OOM;
			break;
		default:
			break;
		}
		if (keep && trace_strmap_rec(&o.sm, &rec) < 0)
			goto nomem;
		if (keep && trace_writer_record(o.w, &rec) < 0)
			goto werr;
	}
	if (st < 0) {
		snprintf(err, errlen, "%s", trace_reader_error(rd));
		goto out;
	}
	if (write_due(&o, c, ev, nev, &next, UINT64_MAX, made, &nout) < 0)
		goto werr;
	if (trace_xform_close(&o.w, rd, err, errlen) < 0)
		goto out;
	ret = 0;
	goto out;
werr:
	snprintf(err, errlen, "%s: writing failed (record from %s:%" PRIu64 ")", out,
		 trace_reader_path(rd), rec.line);
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	if (o.w)
		trace_writer_abort(o.w);
	u64map_free(&live);
	trace_strmap_free(&o.sm);
	free(ev);
	free(made);
	free(newid);
	return ret;
}

static void cp_free_all(struct cp *c)
{
	free(c->a);
	free(c->k);
	free(c->links);
	free(c->fwd);
	free(c->bwd);
	free(c->opaque);
	free(c->dtod);
	free(c->copies);
	compile_kclass_cache_free(&c->cls);
	free(c->bwd_of);
}

int compile_partition(const char *in, const char *out, struct compile_partition *p,
		      char *err, size_t errlen)
{
	struct cp c;
	struct trace_reader *rd;
	int ret = -1;

	memset(&c, 0, sizeof c);
	memset(p, 0, sizeof *p);
	if (!(rd = trace_reader_start(in, err, errlen)))
		goto out;
	if (read_ranges(&c, rd, err, errlen) < 0 || read_rest(&c, rd, err, errlen) < 0)
		goto out;
	if (compile_refuse_cut_short(rd, in, err, errlen) < 0)
		goto out;
	decide(&c, p);
	const struct trace_header *h = trace_reader_header(rd);
	const char *workload = trace_header_label(h, "workload");
	p->torch = workload && !strcmp(workload, "torch");
	if (out) {
		if (trace_reader_rewind(rd) < 0) {
			snprintf(err, errlen, "%s", trace_reader_error(rd));
			goto out;
		}
		if (write_partitioned(&c, rd, out, p, err, errlen) < 0)
			goto out;
	}
	ret = 0;
out:
	trace_reader_close(rd);
	cp_free_all(&c);
	return ret;
}
