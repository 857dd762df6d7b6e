/*
 * gpu_probe_check.c: checks the trace of gpu_probe.cu exactly against what
 * the probe says it did (its expectations file: "NAME ADDR BYTES" lines).
 * Also used by the CPU tests on the probe trace kept in capture/tests/data.
 *
 * usage: gpu_probe_check TRACE EXPECT    exit 0 when every check passes
 * With GPU_PROBE_CHECK_NO_MAIN defined (tests/test_capture.c includes this
 * file) only gpu_probe_check() is compiled.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../traces/trace.h"

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			failures++;                                        \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);        \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

struct buf {
	char name;
	uint64_t addr, bytes;
	int nalloc, nfree;
	uint64_t id, t_alloc, t_free;
	uint32_t flags, stream, kind;
};

struct kern {
	const char *name;
	uint64_t start;
	uint32_t nlinks;
	uint32_t stream;
	uint64_t links[TRACE_MAX_LINKS];
};

static int links_are(const struct kern *k, const uint64_t *ids, uint32_t n)
{
	if (k->nlinks != n)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (k->links[i] != ids[i])
			return 0;
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void print_links(const struct kern *k)
{
	printf("  kernel %-12.12s links:", k->name);
	for (uint32_t i = 0; i < k->nlinks; i++)
		printf(" %" PRIu64, k->links[i]);
	printf("\n");
}

/* Check TRACE against EXPECT; returns the number of failed checks, or -1
 * when a file cannot be read. Prints what it sees on stdout. */
static int gpu_probe_check(const char *trace, const char *expect)
{
	struct buf bufs[4];
	struct kern kerns[16];
	int nk = 0, n_rec[TREC_COUNT] = {0};
	int n_htod = 0, n_dtoh = 0, n_memset = 0, n_ctx_sync = 0, n_stream_sync = 0;
	uint32_t sync_stream = TRACE_NO_STREAM;
	int n_malloc = 0, n_free = 0, n_malloc_async = 0, n_free_async = 0, n_launch = 0;
	uint64_t r_probe[2] = {0, 0}, r_alloc[2] = {0, 0};
	int d_probe = -1, d_alloc = -1;
	struct trace_rec rec;
	int rc;

	failures = 0;
	FILE *f = fopen(expect, "r");
	if (!f) {
		perror(expect);
		return -1;
	}
	memset(bufs, 0, sizeof(bufs));
	for (int i = 0; i < 4; i++) {
		char nm;
		unsigned long long a, b;
		if (fscanf(f, " %c %llx %llu", &nm, &a, &b) != 3) {
			fprintf(stderr, "%s: line %d: want NAME ADDR BYTES\n", expect, i + 1);
			fclose(f);
			return -1;
		}
		bufs[i].name = nm;
		bufs[i].addr = a;
		bufs[i].bytes = b;
	}
	fclose(f);

	char err[512];
	struct trace_reader *r = trace_reader_start(trace, err, sizeof err);
	if (!r) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	const struct trace_header *h = trace_reader_header(r);
	printf("header: gpu=%s cc=%s total=%" PRIu64 " driver=%s cuda=%s cupti=%s cudnn=%s\n",
	       h->gpu ? h->gpu : "-", h->compute_capability ? h->compute_capability : "-",
	       h->total_memory, h->driver ? h->driver : "-", h->cuda ? h->cuda : "-",
	       h->cupti ? h->cupti : "-", h->cudnn ? h->cudnn : "-");
	CHECK(h->gpu && strcmp(h->gpu, "unknown"), "gpu name missing");
	CHECK(h->compute_capability && strcmp(h->compute_capability, "0.0"), "compute capability");
	CHECK(h->total_memory > 0, "total memory");
	CHECK(h->command && strstr(h->command, "gpu_probe"), "command line");
	const char *test = trace_header_label(h, "test");
	CHECK(test && !strcmp(test, "probe"), "label test=probe");

	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		n_rec[rec.type]++;
		switch (rec.type) {
		case TREC_ALLOC:
		case TREC_FREE:
			for (int i = 0; i < 4; i++) {
				struct buf *b = &bufs[i];
				if (rec.u.mem.addr != b->addr || rec.u.mem.kind != TMEM_DEVICE)
					continue;
				if (rec.type == TREC_ALLOC && rec.u.mem.bytes == b->bytes) {
					b->nalloc++;
					b->id = rec.u.mem.id;
					b->t_alloc = rec.start;
					b->flags = rec.u.mem.flags;
					b->stream = rec.u.mem.stream;
				} else if (rec.type == TREC_FREE) {
					b->nfree++;
					b->t_free = rec.start;
				}
			}
			break;
		case TREC_KERNEL:
			if (nk < 16) {
				const char *nm = trace_reader_string(r, rec.u.kernel.name);
				kerns[nk].name = nm ? (strstr(nm, "via_struct") ? "via_struct"
						      : strstr(nm, "fill") ? "fill"
						      : strstr(nm, "add") ? "add"
						      : strstr(nm, "spin") ? "spin" : "other")
						    : "?";
				kerns[nk].start = rec.start;
				kerns[nk].nlinks = rec.u.kernel.nlinks;
				kerns[nk].stream = rec.u.kernel.stream;
				memcpy(kerns[nk].links, rec.u.kernel.links,
				       kerns[nk].nlinks * sizeof(kerns[nk].links[0]));
				nk++;
			}
			break;
		case TREC_MEMCPY:
			n_htod += rec.u.copy.kind == TCOPY_HTOD && rec.u.copy.bytes == bufs[1].bytes;
			n_dtoh += rec.u.copy.kind == TCOPY_DTOH && rec.u.copy.bytes == bufs[2].bytes;
			break;
		case TREC_MEMSET:
			n_memset += rec.u.copy.bytes == bufs[0].bytes;
			break;
		case TREC_SYNC:
			n_ctx_sync += rec.u.sync.kind == TSYNC_CONTEXT;
			n_stream_sync += rec.u.sync.kind == TSYNC_STREAM;
			if (rec.u.sync.kind == TSYNC_STREAM)
				sync_stream = rec.u.sync.stream;
			break;
		case TREC_RANGE: {
			const char *nm = trace_reader_string(r, rec.u.range.name);
			if (nm && !strcmp(nm, "probe")) {
				r_probe[0] = rec.start;
				r_probe[1] = rec.end;
				d_probe = (int)rec.u.range.depth;
			} else if (nm && !strcmp(nm, "alloc")) {
				r_alloc[0] = rec.start;
				r_alloc[1] = rec.end;
				d_alloc = (int)rec.u.range.depth;
			}
			break;
		}
		case TREC_API: {
			const char *nm = trace_reader_string(r, rec.u.api.name);
			if (!nm)
				break;
			n_malloc += !strcmp(nm, "cudaMalloc");
			n_free += !strcmp(nm, "cudaFree");
			n_malloc_async += !strcmp(nm, "cudaMallocAsync");
			n_free_async += !strcmp(nm, "cudaFreeAsync");
			n_launch += strstr(nm, "LaunchKernel") != NULL;
			break;
		}
		default:
			break;
		}
	}
	CHECK(rc == TRACE_EOF, "reader: %s", trace_reader_error(r));
	const struct trace_trailer *t = trace_reader_trailer(r);
	CHECK(t->present, "trailer missing (trace incomplete)");
	CHECK(t->dropped == 0, "%" PRIu64 " records dropped", t->dropped);
	printf("records: a=%d f=%d k=%d c=%d m=%d y=%d r=%d p=%d; trailer records=%" PRIu64
	       " dropped=%" PRIu64 "\n", n_rec[TREC_ALLOC], n_rec[TREC_FREE], n_rec[TREC_KERNEL],
	       n_rec[TREC_MEMCPY], n_rec[TREC_MEMSET], n_rec[TREC_SYNC], n_rec[TREC_RANGE],
	       n_rec[TREC_API], t->records, t->dropped);

	for (int i = 0; i < 4; i++) {
		struct buf *b = &bufs[i];
		printf("  buffer %c: id %" PRIu64 " bytes %" PRIu64 " flags %u stream %s\n", b->name,
		       b->id, b->bytes, b->flags, b->stream == TRACE_NO_STREAM ? "-" : "set");
		CHECK(b->nalloc == 1, "buffer %c: %d alloc records", b->name, b->nalloc);
		CHECK(b->nfree == 1, "buffer %c: %d free records", b->name, b->nfree);
		CHECK(b->t_free >= b->t_alloc, "buffer %c freed before allocated", b->name);
	}
	CHECK(bufs[0].flags == 0 && bufs[0].stream == TRACE_NO_STREAM, "A: plain cudaMalloc flags");
	CHECK(bufs[3].flags & TMEM_F_ASYNC, "D: async flag missing (flags %u)", bufs[3].flags);
	CHECK(bufs[3].stream != TRACE_NO_STREAM, "D: stream missing");
	CHECK(bufs[0].id < bufs[1].id && bufs[1].id < bufs[2].id && bufs[2].id < bufs[3].id,
	      "allocation ids not in program order");

	const char *want[] = {"fill", "add", "via_struct", "spin", "fill"};
	uint64_t abc[3] = {bufs[0].id, bufs[1].id, bufs[2].id};
	qsort(abc, 3, sizeof(abc[0]), cmp_u64);
	CHECK(nk == 5, "%d kernels, want 5", nk);
	for (int i = 0; i < nk && i < 5; i++) {
		print_links(&kerns[i]);
		CHECK(!strcmp(kerns[i].name, want[i]), "kernel %d is %s, want %s", i, kerns[i].name, want[i]);
	}
	if (nk == 5) {
		CHECK(links_are(&kerns[0], &bufs[0].id, 1), "fill links != {A}");
		CHECK(links_are(&kerns[1], abc, 3), "add links != {A,B,C}");
		CHECK(links_are(&kerns[2], &bufs[2].id, 1), "via_struct links != {C}");
		CHECK(links_are(&kerns[3], NULL, 0), "spin has links");
		CHECK(links_are(&kerns[4], &bufs[3].id, 1), "second fill links != {D}");
		CHECK(kerns[0].start > bufs[2].t_alloc, "kernel before its allocations");
		CHECK(kerns[4].start > bufs[3].t_alloc, "fill(D) before D's allocation");
	}
	CHECK(n_htod == 1, "%d host-to-device copies of B's size, want 1", n_htod);
	CHECK(n_dtoh == 1, "%d device-to-host copies of C's size, want 1", n_dtoh);
	CHECK(n_memset == 1, "%d memsets of A's size, want 1", n_memset);
	CHECK(n_ctx_sync >= 1, "no context synchronisation");
	CHECK(n_stream_sync >= 1, "no stream synchronisation");
	CHECK(nk < 5 || sync_stream == kerns[4].stream, "stream sync on stream %u, fill(D) ran on %u",
	      sync_stream, nk >= 5 ? kerns[4].stream : 0);
	printf("  api: cudaMalloc=%d cudaFree=%d cudaMallocAsync=%d cudaFreeAsync=%d launches=%d\n",
	       n_malloc, n_free, n_malloc_async, n_free_async, n_launch);
	CHECK(n_malloc == 3, "cudaMalloc calls %d, want 3", n_malloc);
	CHECK(n_free >= 4, "cudaFree calls %d, want 4 (incl. cudaFree(0))", n_free);
	CHECK(n_malloc_async == 1 && n_free_async == 1, "async calls %d/%d", n_malloc_async, n_free_async);
	CHECK(n_launch >= 5, "launch calls %d, want >= 5", n_launch);
	printf("  ranges: probe depth %d [%" PRIu64 ", %" PRIu64 "], alloc depth %d\n", d_probe,
	       r_probe[0], r_probe[1], d_alloc);
	CHECK(d_probe == 0 && d_alloc == 1, "range depths %d/%d, want 0/1", d_probe, d_alloc);
	CHECK(r_alloc[0] <= bufs[0].t_alloc && bufs[2].t_alloc <= r_alloc[1],
	      "allocations of A..C outside the 'alloc' range");
	CHECK(r_probe[0] <= r_alloc[0] && bufs[0].t_free <= r_probe[1], "'probe' range does not enclose");
	trace_reader_close(r);
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures;
}

#ifndef GPU_PROBE_CHECK_NO_MAIN
int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gpu_probe_check TRACE EXPECT\n");
		return 2;
	}
	return gpu_probe_check(argv[1], argv[2]) == 0 ? 0 : 1;
}
#endif
