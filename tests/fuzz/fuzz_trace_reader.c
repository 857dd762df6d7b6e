/*
 * fuzz_trace_reader.c: libFuzzer target for the trace reader (`make fuzz`).
 *
 * The reader opens a path, so each input is written to a per-process file
 * in /dev/shm (or /tmp) and read to the end, with a rewind and a second
 * pass when the first succeeds; the strings and header are touched so the
 * sanitizers see every byte the reader hands out. Any crash, leak or
 * undefined behaviour is a finding; error returns are expected.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../traces/trace.h"

static char fuzz_path[64];

static void drain(struct trace_reader *r, size_t *sink)
{
	struct trace_rec rec;
	int rc;
	while ((rc = trace_reader_next(r, &rec)) == TRACE_OK) {
		*sink += rec.start + rec.line;
		if (rec.type == TREC_KERNEL) {
			const char *s = trace_reader_string(r, rec.u.kernel.name);
			*sink += s ? strlen(s) : 0;
			for (uint32_t i = 0; i < rec.u.kernel.nlinks; i++)
				*sink += rec.u.kernel.links[i];
		}
	}
	*sink += strlen(trace_reader_error(r));
}

/* libFuzzer entry point: one input, one reader. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!fuzz_path[0]) {
		const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		snprintf(fuzz_path, sizeof fuzz_path, "%s/gpumemsim-fuzz-%ld.trace", dir,
			 (long)getpid());
	}
	FILE *f = fopen(fuzz_path, "wb");
	if (!f)
		return 0;
	if (size && fwrite(data, 1, size, f) != size) {
		fclose(f);
		return 0;
	}
	fclose(f);
	struct trace_reader *r = trace_reader_open(fuzz_path);
	if (!r)
		return 0;
	size_t sink = 0;
	if (trace_reader_status(r) == 0) {
		const struct trace_header *h = trace_reader_header(r);
		for (size_t i = 0; i < h->nlabels; i++)
			sink += strlen(h->labels[i].key) + strlen(h->labels[i].value);
		if (h->gpu)
			sink += strlen(h->gpu);
		drain(r, &sink);
		if (trace_reader_rewind(r) == 0)
			drain(r, &sink);
		sink += trace_reader_crc32(r) + trace_reader_bytes(r) + trace_reader_nstrings(r);
	}
	sink += strlen(trace_reader_error(r));
	trace_reader_close(r);
	unlink(fuzz_path);
	return sink == 42 ? 0 : 0;
}
