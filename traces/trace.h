/*
 * trace.h: the gpumemsim trace, in memory.
 *
 * A trace is the unit of exchange between capture, importers, transforms and
 * the simulator (see traces/FORMAT.md for the text form). The reader streams
 * one record at a time with memory bounded by the string table and the line
 * buffer, never by trace length; the writer emits the same text form,
 * optionally gzip-compressed.
 *
 * Only trace_reader.c and trace_writer.c include zlib.
 */
#ifndef TRACES_TRACE_H
#define TRACES_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_FORMAT_VERSION 1
#define TRACE_MAGIC "gpumemsim-trace"

/* Stream value meaning "not stream-ordered" (CUPTI reports 0xffffffff). */
#define TRACE_NO_STREAM UINT32_MAX
/* String id meaning "no string" (e.g. unknown allocation source). */
#define TRACE_NO_STRING UINT32_MAX
/* Most kernel-to-allocation links one kernel record may carry. */
#define TRACE_MAX_LINKS 64

enum trace_rec_type {
	TREC_ALLOC = 0,   /* 'a': device allocation (framework request or cudaMalloc) */
	TREC_FREE,        /* 'f': device free */
	TREC_KERNEL,      /* 'k': kernel execution on a stream */
	TREC_MEMCPY,      /* 'c': copy on a stream */
	TREC_MEMSET,      /* 'm': memset on a stream */
	TREC_SYNC,        /* 'y': synchronisation: the host waits */
	TREC_RANGE,       /* 'r': NVTX range (push/pop or start/end) */
	TREC_API,         /* 'p': host API call with its start/end */
	TREC_CONTROL,     /* 'x': allocator control: empty_cache, oom, step */
	TREC_SEGMENT,     /* 'g': a recorded allocator decision (segment alloc/free/map/unmap) */
	TREC_COUNT
};

/* Memory kinds, as CUPTI's CUpti_ActivityMemoryKind names them. */
enum trace_mem_kind {
	TMEM_UNKNOWN = 0,
	TMEM_PAGEABLE = 1,
	TMEM_PINNED = 2,
	TMEM_DEVICE = 3,
	TMEM_ARRAY = 4,
	TMEM_MANAGED = 5,
	TMEM_DEVICE_STATIC = 6,
	TMEM_MANAGED_STATIC = 7,
};

/* Host memory (pageable or pinned): no device allocation, so the replays
 * leave it to the host. */
static inline int trace_mem_kind_host(uint32_t kind)
{
	return kind == TMEM_PAGEABLE || kind == TMEM_PINNED;
}

/* Flags on memory events. */
#define TMEM_F_ASYNC 0x1u    /* stream-ordered (cudaMallocAsync/cudaFreeAsync) */
#define TMEM_F_POOL 0x2u     /* served from a memory pool */
#define TMEM_F_IMPORTED 0x4u /* pool imported from another process */
/* A convolution workspace the framework asks for again at half the size
 * when it does not fit, down to none (PyTorch's cuDNN v8 path: the
 * benchmark search's workspace, then plans with smaller workspaces). The
 * replay does the same instead of running out of memory. */
#define TMEM_F_SHRINKABLE 0x8u

enum trace_copy_kind {
	TCOPY_UNKNOWN = 0, TCOPY_HTOD, TCOPY_DTOH, TCOPY_DTOD, TCOPY_HTOH, TCOPY_PTOP
};

enum trace_sync_kind {
	TSYNC_UNKNOWN = 0, TSYNC_EVENT, TSYNC_STREAM_WAIT_EVENT, TSYNC_STREAM, TSYNC_CONTEXT
};

enum trace_control_kind {
	TCTL_EMPTY_CACHE = 0, /* torch.cuda.empty_cache() or equivalent */
	TCTL_OOM,             /* the real run hit an OOM for `bytes` */
	TCTL_STEP,            /* a training step boundary (bytes = step number) */
	TCTL_COUNT
};

enum trace_segment_op {
	TSEG_ALLOC = 0, TSEG_FREE, TSEG_MAP, TSEG_UNMAP, TSEG_COUNT
};

struct trace_mem {           /* TREC_ALLOC, TREC_FREE */
	uint64_t id;         /* alloc: its id, the ordinal of its 'a' record (0-based); free: 0 */
	uint64_t addr;
	uint64_t bytes;
	uint32_t stream;     /* TRACE_NO_STREAM when not stream-ordered */
	uint32_t kind;       /* enum trace_mem_kind */
	uint32_t flags;      /* TMEM_F_* */
	uint32_t source;     /* string id of the library that made the call, or TRACE_NO_STRING */
	uint64_t corr;       /* CUPTI correlation id, 0 if none */
};

struct trace_kernel {        /* TREC_KERNEL */
	uint32_t stream;
	uint32_t name;       /* string id */
	uint32_t grid[3], block[3];
	uint32_t regs;
	uint32_t smem;       /* static + dynamic shared memory bytes */
	uint64_t corr;
	uint32_t nlinks;     /* allocation ids the kernel touches (at most TRACE_MAX_LINKS) */
	uint32_t graph;      /* CUPTI graphId: the CUDA graph it was launched from, 0 = none */
	uint64_t graph_node; /* CUPTI graphNodeId, 0 = none */
	/* Those ids, links[0 .. nlinks). Not in the record: it points at
	 * storage its producer owns. From trace_reader_next(), the reader's,
	 * valid until the next trace_reader_next(), trace_reader_rewind() or
	 * trace_reader_close() on that reader (copy them to keep them; a copy
	 * of the record shares them). A producer points it at an array of its
	 * own (e.g. a uint64_t[TRACE_MAX_LINKS] in its state) that lives until
	 * trace_writer_record() returns. May be NULL when nlinks is 0. */
	const uint64_t *links;
};

struct trace_copy {          /* TREC_MEMCPY, TREC_MEMSET */
	uint32_t stream;
	uint32_t kind;       /* enum trace_copy_kind (memcpy only) */
	uint64_t bytes;
	uint64_t corr;
	uint32_t graph;      /* CUPTI graphId: the CUDA graph it was launched from, 0 = none */
	uint64_t graph_node; /* CUPTI graphNodeId, 0 = none */
};

struct trace_sync {          /* TREC_SYNC */
	uint32_t kind;       /* enum trace_sync_kind */
	uint32_t stream;     /* TRACE_NO_STREAM for context/device-wide */
	uint64_t corr;
};

struct trace_range {         /* TREC_RANGE */
	uint32_t name;       /* string id */
	uint32_t depth;      /* nesting depth at push, 0 = outermost */
	/* 1: the range ran while the capture was paused (`capture
	 * --pause-at-step`): nothing else was recorded inside it, and its
	 * length is the uncaptured program's own (docs/timing.md). */
	uint8_t uncaptured;
};

struct trace_api {           /* TREC_API */
	uint32_t name;       /* string id, e.g. "cudaMalloc" */
	uint64_t corr;
	/* The capture's own time on this call's thread since the previous
	 * kept call ended and before this one began (ns inside the injection
	 * library's callbacks), and how many callbacks that was. Written by
	 * the capture (callbacks mode); has_own 0 when absent. */
	uint64_t own_ns;
	uint32_t own_cbs;
	uint8_t has_own;
};

struct trace_control {       /* TREC_CONTROL */
	uint32_t kind;       /* enum trace_control_kind */
	uint64_t bytes;      /* OOM: the failing request; STEP: the step number */
};

struct trace_segment {       /* TREC_SEGMENT */
	uint32_t op;         /* enum trace_segment_op */
	uint64_t addr;
	uint64_t bytes;
	uint32_t stream;
};

/* One record. `start` orders the trace; `end` == `start` for instant events.
 * Small (about 100 bytes) and plain to copy: a kernel's links are not in it
 * (struct trace_kernel says whose storage they are in). */
struct trace_rec {
	enum trace_rec_type type;
	uint64_t start, end;     /* nanoseconds in the trace's time base */
	uint64_t line;           /* line number in the file it came from (1-based) */
	union {
		struct trace_mem mem;
		struct trace_kernel kernel;
		struct trace_copy copy;
		struct trace_sync sync;
		struct trace_range range;
		struct trace_api api;
		struct trace_control control;
		struct trace_segment segment;
	} u;
};

/* Header fields; strings are owned by the reader/writer that holds them. */
struct trace_label { char *key, *value; };

struct trace_header {
	int version;
	char *producer, *producer_version;
	char *gpu, *compute_capability;
	uint64_t total_memory;
	char *driver, *cuda, *cupti, *cudnn;
	char *command;
	struct trace_label *labels;
	size_t nlabels;
};

/* Trailer ('end' line): absent in a trace cut short. */
struct trace_trailer {
	int present;
	uint64_t records;        /* records the writer wrote */
	uint64_t dropped;        /* records the producer lost (CUPTI drops) */
};

/* ---------------------------------------------------------------- reader */

struct trace_reader;

/* Error codes (negative); trace_reader_error() has the message with file:line. */
#define TRACE_OK 0
#define TRACE_EOF 1
#define TRACE_ERR_IO (-1)
#define TRACE_ERR_FORMAT (-2)
#define TRACE_ERR_VERSION (-3)
#define TRACE_ERR_NOMEM (-4)
/* The file ends mid-stream (truncated gzip, or a last line without newline):
 * records before it were returned; the trace counts as incomplete. */
#define TRACE_ERR_TRUNCATED (-5)

/*
 * Open FILE (plain or gzip, detected from the bytes) and read its header
 * lines. Returns NULL only when out of memory; otherwise check
 * trace_reader_status() (< 0 means the open or header failed and
 * trace_reader_error() says why, naming the file and line).
 */
/* DST = a deep copy of SRC (its strings and labels), to outlive SRC's
 * reader; -1 when out of memory, with what was copied in DST to free.
 * trace_header_free frees such a copy (and zeroes it). */
int trace_header_copy(struct trace_header *dst, const struct trace_header *src);
void trace_header_free(struct trace_header *h);
/* The value of label KEY among LABELS[0..N), or NULL when none has it; of
 * a key given twice, the later value (as a later --label overrides). */
const char *trace_label_find(const struct trace_label *labels, size_t n, const char *key);
/* trace_label_find on H's labels (H may be NULL). */
const char *trace_header_label(const struct trace_header *h, const char *key);
/* Labels LABELS[0..N) (room for CAP) with EXTRA[0..NEXTRA) laid over them:
 * an extra label replaces the one of the same key, or is appended while
 * there is room (the importers' --label over a file's own metadata).
 * Returns the new count. The strings are borrowed, not copied. */
size_t trace_labels_override(struct trace_label *labels, size_t n, size_t cap,
			     const struct trace_label *extra, size_t nextra);

struct trace_reader *trace_reader_open(const char *path);
/* trace_reader_open that also checks the header: a reader ready for
 * trace_reader_next, or NULL with the reason (naming PATH) in ERR and
 * nothing left open. Most readers want this one. */
struct trace_reader *trace_reader_start(const char *path, char *err, size_t errlen);
int trace_reader_status(const struct trace_reader *r);
const char *trace_reader_error(const struct trace_reader *r);
const struct trace_header *trace_reader_header(const struct trace_reader *r);

/*
 * Read the next event record into *rec. Returns TRACE_OK, TRACE_EOF at the
 * end of the stream, or a negative error (message in trace_reader_error()).
 * String definitions, labels and the trailer are consumed internally.
 * Records must not go back in time (start non-decreasing).
 * A kernel record's links point into the reader's storage: valid until the
 * next trace_reader_next(), trace_reader_rewind() or trace_reader_close().
 */
int trace_reader_next(struct trace_reader *r, struct trace_rec *rec);

/* The interned string with id ID, or NULL if not defined. */
const char *trace_reader_string(const struct trace_reader *r, uint32_t id);
uint32_t trace_reader_nstrings(const struct trace_reader *r);

/* After TRACE_EOF: the trailer (present == 0 for a trace cut short). */
const struct trace_trailer *trace_reader_trailer(const struct trace_reader *r);

/* The path as opened, and a content identity (CRC-32 and length of the
 * decompressed text read so far; complete after TRACE_EOF). */
const char *trace_reader_path(const struct trace_reader *r);
uint32_t trace_reader_crc32(const struct trace_reader *r);
uint64_t trace_reader_bytes(const struct trace_reader *r);

/* Rewind to the first event record (used by offline policies' pre-pass). */
int trace_reader_rewind(struct trace_reader *r);

void trace_reader_close(struct trace_reader *r);

/* ---------------------------------------------------------------- writer */

struct trace_writer;

/* Writer flags. */
#define TRACE_W_ATOMIC 0x1  /* write PATH.tmp.PID, rename into place at close:
			     * a failed write never leaves a half trace at PATH
			     * (importers, transforms) */
#define TRACE_W_STREAM 0x0  /* write PATH directly, so a killed producer leaves
			     * a readable, incomplete trace up to its last flush
			     * (capture) */

/*
 * Create PATH for writing; gzip-compressed when PATH ends in ".gz".
 * Returns NULL and fills ERR on failure.
 */
struct trace_writer *trace_writer_open(const char *path, unsigned flags,
				       char *err, size_t errlen);

/* Write the header (once, before any record). */
int trace_writer_header(struct trace_writer *w, const struct trace_header *h);

/* Intern a string: returns its id, writing its 'S' line the first time. */
uint32_t trace_writer_intern(struct trace_writer *w, const char *s);

/* Write one record (string ids must come from trace_writer_intern). A
 * kernel's links are read through rec->u.kernel.links during the call. */
int trace_writer_record(struct trace_writer *w, const struct trace_rec *rec);

/* Flush what is written so far to the file (a crash after this leaves a
 * readable trace without trailer: incomplete). */
int trace_writer_flush(struct trace_writer *w);

/*
 * Finish *WP: write the trailer when COMPLETE (with DROPPED lost records),
 * close, and rename into place; the writer is freed either way and *WP set
 * to NULL, so a cleanup path that closes or aborts it again does nothing.
 * Returns 0 or a negative error (ERR filled). trace_writer_abort()
 * discards the file instead.
 */
int trace_writer_close(struct trace_writer **wp, int complete, uint64_t dropped,
		       char *err, size_t errlen);
void trace_writer_abort(struct trace_writer *w);

/* ------------------------------------------------------------- names */

/* One-letter record tags and the names of enum values, for cat and stats. */
char trace_rec_tag(enum trace_rec_type t);
const char *trace_rec_name(enum trace_rec_type t);
const char *trace_control_name(uint32_t kind);
const char *trace_segment_op_name(uint32_t op);
/* Spellings of memcpy and sync kinds ('c' and 'y' records); "unknown"
 * for values out of range. Added for the reader, writer and trace cat. */
const char *trace_copy_kind_name(uint32_t kind);
const char *trace_sync_kind_name(uint32_t kind);
/* The N of a step range's name "step N" (N decimal digits, nothing after):
 * 1 with *N set, 0 for any other name (NULL included). The capture's pause,
 * the importers and the timing merge read step numbers through it. */
int trace_step_number(const char *name, uint64_t *n);

#endif /* TRACES_TRACE_H */
