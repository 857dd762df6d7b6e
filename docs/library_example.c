/*
 * library_example.c: gpumemsim as a library. Replays a trace under a
 * policy and setting at a capacity and prints the peaks, the way a user's
 * own C program would (docs/library.md; tests/test_library.c builds and
 * runs it).
 *
 *   cc -std=c11 -D_GNU_SOURCE -I. docs/library_example.c build/libgpumemsim.a \
 *      -lsqlite3 -lz -lm -lpthread -o example
 *   ./example traces/torch/torch-resnet18-b16.trace.gz pytorch expandable_segments:True 8GiB
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "include/gpumemsim.h"

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: example TRACE POLICY [CONF [CAPACITY]]\n");
		return 2;
	}
	const struct alloc_policy *pol = policy_find(argv[2]);
	if (!pol) {
		char names[512];
		policy_list_names(names, sizeof names);
		fprintf(stderr, "unknown policy %s (known: %s)\n", argv[2], names);
		return 2;
	}
	struct sim_options o;
	memset(&o, 0, sizeof o);
	o.trace_path = argv[1];
	o.policy = pol;
	o.conf = argc > 3 ? argv[3] : NULL;
	if (argc > 4 && conf_size(argv[4], &o.capacity) < 0) {
		fprintf(stderr, "bad capacity %s\n", argv[4]);
		return 2;
	}
	struct sim_result r;
	char err[512], a[32], b[32];
	if (sim_run(&o, &r, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	printf("peak_reserved %" PRIu64 " (%s)\npeak_allocated %" PRIu64 " (%s)\noom %d\n",
	       r.peak_reserved, size_fmt(r.peak_reserved, a, sizeof a), r.peak_allocated,
	       size_fmt(r.peak_allocated, b, sizeof b), r.oom);
	sim_result_free(&r);
	return 0;
}
