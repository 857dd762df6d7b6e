/*
 * fusion.h: the kernel-fusion what-if, a transform from trace to trace.
 *
 * Kernel chains on one stream (an element-wise kernel into its producer,
 * chains of element-wise kernels), chosen by rules that match kernel names,
 * become one kernel. The kernel-to-buffer links say which allocations the
 * chain passes between its kernels: an intermediate that only the chain
 * touches is never allocated in the fused trace, and the fused kernel's
 * duration drops by the traffic it no longer makes (written once, read once)
 * at a bandwidth measured from the trace or given. See docs/fusion.md.
 */
#ifndef WHATIF_FUSION_H
#define WHATIF_FUSION_H

#include <stddef.h>
#include <stdint.h>

/* Most rules one set may hold (they are matched as bits of a mask). */
#define FUSION_MAX_RULES 64

/* One rule: a kernel matching a consumer pattern fuses into the kernel just
 * before it on its stream, if that one matches a producer pattern (none:
 * any producer). Patterns are fnmatch globs; a pattern may list
 * alternatives separated by '|'. */
struct fusion_rule {
	char *name;
	char **cons;             /* consumer globs */
	size_t ncons;
	char **prod;             /* producer globs; 0 of them: any producer */
	size_t nprod;
	int chain;               /* written as `chain P`: producer = consumer */
	unsigned line;           /* where it was defined */
};

struct fusion_rules {
	struct fusion_rule *v;
	size_t n;
	char origin[256];        /* file it came from, or "builtin" */
};

/* The rules used when none are given (the same as
 * traces/fusion_rules/elementwise.rules). */
extern const char fusion_builtin_rules[];

/* Parse rule TEXT; ORIGIN names it in messages ("FILE:LINE: ..."). */
int fusion_rules_parse(const char *text, const char *origin, struct fusion_rules *rs,
		       char *err, size_t errlen);
/* Read and parse the rule file PATH. */
int fusion_rules_load(const char *path, struct fusion_rules *rs, char *err, size_t errlen);
/* Keep only the rules named in NAMES (in file order); an unknown name is
 * an error naming it and the known ones. */
int fusion_rules_keep(struct fusion_rules *rs, char *const *names, size_t n,
		      char *err, size_t errlen);
void fusion_rules_free(struct fusion_rules *rs);

struct fusion_options {
	double bandwidth;        /* bytes per second; 0 = measure from the trace */
	int trust_links;         /* 1: do not treat kernels without links (and
				  * copies, memsets) as possible users of a
				  * buffer live across them */
	const char *peak_range;  /* glob: count peaks only inside NVTX ranges
				  * with a matching name (e.g. "step [2-9]*",
				  * the steady state); NULL = the whole trace */
};

/* What one plan does; peaks are of live requested bytes (sum of the live
 * allocations' sizes), kernel time is the sum of kernel durations. */
struct fusion_stats {
	uint64_t groups;             /* fused kernels made */
	uint64_t kernels_fused;      /* kernels that went into them */
	uint64_t buffers_eliminated;
	uint64_t bytes_eliminated;
	uint64_t peak_before, peak_after;
	uint64_t ktime_before, ktime_after;  /* ns */
};

struct fusion_report {
	double bandwidth;            /* bytes per second used by the model */
	const char *bandwidth_source; /* "option", "measured" or "default" */
	size_t bandwidth_samples;    /* element-wise kernels measured */
	uint64_t kernels, kernels_linked, allocs;
	uint64_t exposed_allocs;     /* live across an opaque kernel/copy: kept */
	struct fusion_stats all;     /* every rule together: what OUT holds */
	struct fusion_stats *alone;  /* [i]: rule i applied alone */
	struct fusion_stats *share;  /* [i]: rule i's share of `all` (counts only) */
	size_t nrules;
};

/*
 * Fuse IN with the rules RS and write the result to OUT (atomically; OUT
 * may be NULL: report only). Returns 0, or -1 with ERR naming the file and
 * line. REP is filled on success; free it with fusion_report_free().
 */
int fusion_apply(const char *in, const char *out, const struct fusion_rules *rs,
		 const struct fusion_options *o, struct fusion_report *rep,
		 char *err, size_t errlen);
void fusion_report_free(struct fusion_report *rep);

#endif /* WHATIF_FUSION_H */
