/*
 * xla_sizes.h: give a JAX platform-allocator capture the sizes XLA asked
 * for (`gpumemsim import xla-sizes`; docs/validation_bfc.md).
 *
 * XLA's platform allocator maps every request in 2 MiB granules and CUPTI
 * records the mapped size, so a capture alone cannot tell a 4-byte scalar
 * from a 2 MiB tensor (traces/xla_requests.h replays such requests at a
 * lower bound). XLA logs each request when asked to
 * (TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=cuda_device_allocator=3; the
 * recipe capture/jax/recipe.sh keeps that log beside the trace):
 *
 *   ... cuda_device_allocator.cc:279] [0] Allocated ptr=0x7f711a400000
 *       requested size: 4 padded size: 2097152 granularity: 2097152 ...
 *
 * This transform pairs each such line with the capture's device allocation
 * at that address (the k-th allocation at an address with the k-th line
 * naming it: both are in program order), checks that the padded size is
 * what CUPTI recorded, and writes the capture back with the requested size
 * on the allocation and its free. Everything else is kept as it was; OUT
 * gets the label xla_sizes=N (the allocations resized). A replay then reads
 * exact sizes: no request is a whole number of granules any more, so the
 * lower bound is not applied.
 */
#ifndef TRACES_XLA_SIZES_H
#define TRACES_XLA_SIZES_H

#include <stddef.h>
#include <stdint.h>

#define XLA_SIZES_LABEL "xla_sizes"

struct xla_sizes_report {
	uint64_t log_lines;        /* "Allocated ptr=" lines read */
	uint64_t device_allocs;    /* device allocations in the capture */
	uint64_t resized;          /* paired with a line: size now the requested one */
	uint64_t unpaired_allocs;  /* device allocations no line names (libraries') */
	uint64_t unpaired_lines;   /* lines past the end of a capture cut short */
	uint64_t bytes_before, bytes_after;   /* summed over the resized allocations */
};

/*
 * Read LOG (plain or gzip) and CAPTURE, write OUT (atomically; gzip when it
 * ends in .gz). REP may be NULL. Refuses (-1 with ERR naming the file and
 * line, OUT untouched) when a log line naming an allocation is malformed,
 * a line pairs with no allocation (unless the capture was cut short: the
 * lines past its end are counted) or with one of another padded size, or
 * the capture already carries the label. 0 on success.
 */
int xla_sizes_transfer(const char *capture, const char *log, const char *out,
		       struct xla_sizes_report *rep, char *err, size_t errlen);

#endif /* TRACES_XLA_SIZES_H */
