/*
 * whatif_bounds.c: the interval of a batch-size prediction, for
 * scripts/whatif_accuracy.sh until `whatif batch` prints it (docs/whatif.md,
 * "Prediction interval"). Fits the captures as `whatif batch` does, writes
 * the traces at BATCH with every unpredictable site at its low and at its
 * high bound (bf_synth_bound), and prints bf_interval as one JSON line.
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -o whatif_bounds scripts/whatif_bounds.c \
 *      build/libgpumemsim.a -lsqlite3 -lz -lm -lpthread
 *   whatif_bounds BATCH LO.trace.gz HI.trace.gz T1 T2 [T3...]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../whatif/batch_fit.h"

int main(int argc, char **argv)
{
	char err[2048];
	struct bf_trace *t[64];
	struct bf_model *m = NULL;
	struct bf_interval iv;
	int n = argc - 4, ret = 1;

	if (argc < 6 || n > 64) {
		fprintf(stderr, "usage: whatif_bounds BATCH LO.trace.gz HI.trace.gz T1 T2 [T3...]\n");
		return 2;
	}
	uint64_t batch = strtoull(argv[1], NULL, 10);
	for (int i = 0; i < n; i++)
		if (bf_load(argv[4 + i], &t[i], err, sizeof err) < 0) {
			fprintf(stderr, "whatif_bounds: %s\n", err);
			for (int j = 0; j < i; j++)
				bf_free(t[j]);
			return 1;
		}
	struct bf_options o = {0};
	if (bf_fit(t, (size_t)n, &o, &m, err, sizeof err) < 0 || bf_interval(m, batch, &iv) < 0 ||
	    bf_synth_bound(m, batch, -1, argv[2], err, sizeof err) < 0 ||
	    bf_synth_bound(m, batch, 1, argv[3], err, sizeof err) < 0) {
		fprintf(stderr, "whatif_bounds: %s\n", err);
		goto out;
	}
	printf("{\"batch\":%" PRIu64 ",\"extrapolated\":%d,\"sites\":%zu,\"peak_live\":%" PRIu64
	       ",\"peak_lo\":%" PRIu64 ",\"peak_hi\":%" PRIu64 ",\"worst_site\":%zu,\"worst_lo\":%" PRIu64
	       ",\"worst_hi\":%" PRIu64 "}\n", batch, iv.extrapolated, iv.sites, iv.peak_live, iv.peak_lo,
	       iv.peak_hi, iv.worst_site, iv.worst_lo, iv.worst_hi);
	ret = 0;
out:
	bf_model_free(m);
	for (int i = 0; i < n; i++)
		bf_free(t[i]);
	return ret;
}
