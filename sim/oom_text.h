/*
 * oom_text.h: an OOM verdict in words, from the figures stored with a run
 * (`gpumemsim run` prints it, `gpumemsim report` tabulates it).
 */
#ifndef SIM_OOM_TEXT_H
#define SIM_OOM_TEXT_H

#include <stddef.h>
#include <stdint.h>

/*
 * One sentence explaining an OOM verdict ("capacity", "limit",
 * "fragmentation": sim_oom_verdict) from the figures stored with the run:
 * the request, live (allocated) and reserved bytes, the usable limit and
 * capacity, the policy's largest free block and cached free bytes (-1:
 * unknown). Returns BUF.
 */
const char *oom_explain(const char *verdict, uint64_t request, uint64_t allocated,
			uint64_t reserved, uint64_t limit, uint64_t capacity,
			int64_t largest_free, int64_t cached_free, char *buf, size_t len);

/*
 * The "foreign" verdict (sim_oom_verdict_foreign): the framework's live
 * bytes and the request fit the device, memory outside its allocator
 * (FOREIGN bytes, most of it held by TOP_LIB, may be "") did not leave
 * room. Returns BUF.
 */
const char *oom_explain_foreign(uint64_t request, uint64_t allocated, uint64_t foreign,
				uint64_t capacity, const char *top_lib, char *buf, size_t len);

#endif /* SIM_OOM_TEXT_H */
