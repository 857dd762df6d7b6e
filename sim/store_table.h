/*
 * store_table.h: the rows of `gpumemsim table`, read from a results
 * database: the latest run of each (trace, policy, conf, capacity) with its
 * labels, alloc retries and the peak of the same policy's default setting
 * for comparison. Ordered by trace, capacity (largest first), policy
 * (optimal last), the default setting before the others. Prints nothing.
 */
#ifndef SIM_STORE_TABLE_H
#define SIM_STORE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* One row. The strings are valid only during the callback; never NULL. */
struct store_table_row {
	const char *trace_path;
	const char *model, *batch;     /* run labels; "" when absent */
	const char *policy, *conf;     /* conf "" is the policy's default setting */
	uint64_t capacity;
	uint64_t peak_reserved, peak_allocated;
	uint64_t peak_requested;       /* the floor: peak of live requested bytes */
	uint64_t device_allocs, device_frees;
	uint64_t num_alloc_retries;    /* 0 when the policy keeps no such stat */
	int oom;
	int has_default;               /* a default-setting run of the same trace,
					  policy and capacity is stored */
	uint64_t default_peak_reserved; /* its peak reserved (when has_default) */
	int default_oom;               /* that default run ran out of memory */
	/* predicted step time (runs replayed with --timing; 0 otherwise or
	 * when the trace has no steps), the GPU's busy share of it, and the
	 * default setting's step time (0: none predicted) */
	uint64_t step_time_ns;
	int has_busy;
	double gpu_busy_fraction;
	uint64_t default_step_time_ns;
};

/* Called per row; returns non-zero to stop. */
typedef int (*store_table_fn)(void *ctx, const struct store_table_row *row);

/* Call ROW for every row of the table in S. Returns the number of rows, or
 * -1 with ERR. */
int store_table_query(struct store *s, store_table_fn row, void *ctx, char *err, size_t errlen);

#endif /* SIM_STORE_TABLE_H */
