/*
 * trace_reader_int.h: what the reader's files share (trace_reader.c: lines,
 * fields, records, header lines, the API; trace_reader_gz.c: the gzip
 * thread). Not part of the library's interface.
 */
#ifndef TRACES_TRACE_READER_INT_H
#define TRACES_TRACE_READER_INT_H

#include <pthread.h>
#include <stdint.h>
#include <zlib.h>

#include "trace.h"

/* Longest line accepted: a kernel with TRACE_MAX_LINKS links is ~1.5 KiB,
 * so anything near this is garbage, not a trace. */
#define RD_MAX_LINE (1u << 20)
/* Text buffer: large reads amortise gzread's per-call cost. */
#define RD_BUF_SIZE (4u << 20)
#define RD_GZ_BUF (256u << 10)
#define RD_ERR_LEN 1024
#define RD_SLACK 32   /* bytes after the buffer that scans may read */
/* Inflated chunks in flight between the gzip thread and the parser. */
#define RD_ZCHUNK (1u << 20)
#define RD_ZNCHUNK 3

/* One gzread's worth: data, or the end of the stream, or an error. */
struct rd_zchunk {
	char *data;
	size_t n, off;       /* bytes inflated; bytes the parser has taken */
	uint32_t crc;        /* CRC-32 of data[0, n) */
	int end;             /* 0 data, 1 end of stream, -1 read error */
	int cut;             /* end: the gzip stream stops mid-way */
	char msg[256];       /* error: gzerror's or strerror's text */
};

struct rd_inflater {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* a chunk was filled, or one was freed, or stop */
	struct rd_zchunk c[RD_ZNCHUNK];
	unsigned head, count;
	int stop;
	gzFile gz;
};

struct trace_reader {
	char *path;
	gzFile gz;
	int status;          /* 0, or the sticky negative error */
	int eof;             /* gzread returned 0 */
	int gz_cut;          /* ... because the gzip stream stops mid-way */
	int pending;         /* `line` was read by open() and not yet handled */
	int in_body;         /* an event record has been read */
	int ended;           /* the 'end' trailer was read */
	int crc_done;        /* crc/bytes cover the whole file (EOF reached once) */
	int head_done;       /* the header was read without error: rewind may skip it */
	char *buf;
	size_t pos, len;     /* unread text is buf[pos, len) */
	size_t scanned;      /* bytes from pos known to hold no '\n' */
	char *line;          /* current line, ending at line[line_len] == '\n' */
	size_t line_len;
	uint64_t lineno;     /* 1-based number of `line` */
	uint64_t head_lines; /* lines before the first event (rewind skips them) */
	uint64_t prev_start;
	uint64_t nallocs;    /* 'a' records so far: the next allocation id */
	uint64_t nrecords;   /* event records so far */
	uint32_t crc;
	uint64_t bytes;
	char **strs;
	uint32_t nstrs;
	size_t capstrs;
	uint32_t sdefined;   /* ids below this are defined at this point */
	uint32_t head_sdefined;
	struct trace_header hdr;
	size_t label_cap;
	struct trace_trailer trailer;
	uint64_t links[TRACE_MAX_LINKS]; /* the last kernel record's links (trace.h) */
	int direct_known;    /* whether the input is gzip has been looked at */
	int use_thread;      /* gzip: inflate in a helper thread */
	struct rd_inflater *zt; /* that thread while it runs, else NULL */
	char err[RD_ERR_LEN];
};

/* trace_reader_gz.c */
void *rd_zmain(void *arg);
void rd_zfree(struct rd_inflater *z);
struct rd_inflater *rd_zstart(gzFile gz);
void rd_zstop(struct trace_reader *r);
int rd_zread(struct rd_inflater *z, char *dst, size_t room, uint32_t *crc, uint64_t *bytes, int count_crc, int *cut, char *msg, size_t msglen);

#endif /* TRACES_TRACE_READER_INT_H */
