/*
 * markers.h: give a PyTorch capture the empty_cache() calls it cannot see.
 *
 * With cudnn.benchmark=True PyTorch calls the caching allocator's
 * emptyCache() after each cuDNN algorithm search: a C++ call that CUPTI
 * never sees, so a capture (PYTORCH_NO_CUDA_MEMORY_CACHING=1) has no
 * 'x empty_cache' records and a `pytorch` replay keeps the search's huge
 * workspaces cached. The truth record of the same program (caching on,
 * imported by traces/import_torch.c) has them. This transform aligns the
 * two request streams (allocation sizes in program order, Myers' O(ND)
 * shortest edit script) and copies each marker into the capture just before
 * the capture record that matches the first truth event after it.
 * Everything else in the capture is written back unchanged.
 */
#ifndef TRACES_MARKERS_H
#define TRACES_MARKERS_H

#include <stddef.h>
#include <stdint.h>

#define MARKERS_MAX_SOURCES 16

struct markers_options {
	const char *source;   /* substring of the 'a' source naming the framework's
			       * allocator; NULL = "libc10_cuda" */
	double min_match;     /* least share of allocations matched exactly (of the
			       * larger stream); 0 = 0.90 */
	uint64_t max_gap;     /* longest run of unmatched truth allocations a
			       * marker may sit in; 0 = 16 */
};

/* Allocations the framework's allocator never served, by source. */
struct markers_source {
	char name[160];
	uint64_t allocs, bytes;
	uint64_t peak_live;   /* most bytes of this source live at once */
};

struct markers_report {
	uint64_t capture_records;
	uint64_t capture_allocs;      /* every 'a' of the capture */
	uint64_t framework_allocs;    /* those aligned (device memory, framework source) */
	uint64_t truth_allocs;
	uint64_t matched;             /* same size, same place in the order */
	uint64_t substituted;         /* paired by position inside a gap (e.g. another
				       * cuDNN workspace size) */
	uint64_t capture_only, truth_only;
	uint64_t edits;               /* length of the shortest edit script */
	double match_ratio;           /* matched / max(framework, truth) */
	uint64_t truth_markers;       /* 'x empty_cache' in the truth */
	uint64_t markers;             /* placed in the output (== truth_markers) */
	uint64_t max_marker_gap;      /* widest unmatched run a marker sat in */
	uint64_t moved_by_free;       /* markers put before a free rather than an alloc */
	struct markers_source foreign[MARKERS_MAX_SOURCES];
	size_t nforeign;
	uint64_t foreign_other;       /* allocations of sources past the table */
};

/*
 * Copy TRUTH's 'x empty_cache' records into CAPTURE, writing OUT
 * (atomically; gzip when it ends in .gz). TRUTH is a gpumemsim trace or a
 * torch snapshot text file (imported on the fly). O may be NULL, REP may be
 * NULL. Returns 0, or -1 with ERR naming the file and line (poor alignment
 * names where the streams part); OUT is then untouched.
 */
int markers_transfer(const char *capture, const char *truth, const char *out,
		     const struct markers_options *o, struct markers_report *rep,
		     char *err, size_t errlen);

/*
 * The alignment alone, exposed for tests: pair A[0..NA) with B[0..NB)
 * (shortest edit script, then positional pairing inside each gap).
 * AMAP[i] gets the index in B paired with A[i] or -1; AEXACT[i] is 1 when
 * the pair has equal values. Returns the number of edits, or -1 when more
 * than MAX_EDITS are needed or memory runs out.
 */
int64_t markers_align(const uint64_t *a, size_t na, const uint64_t *b, size_t nb,
		      uint64_t max_edits, int64_t *amap, unsigned char *aexact);

#endif /* TRACES_MARKERS_H */
