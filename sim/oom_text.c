/*
 * oom_text.c: OOM verdicts in words (oom_text.h).
 */
#include "oom_text.h"

#include <stdio.h>
#include <string.h>

#include "../base/size.h"

const char *oom_explain(const char *verdict, uint64_t request, uint64_t allocated,
			uint64_t reserved, uint64_t limit, uint64_t capacity,
			int64_t largest_free, int64_t cached_free, char *buf, size_t len)
{
	char b1[32], b2[32], b3[32], b4[32];
	const char *what = limit && capacity && limit < capacity ? "the allocator's limit"
								  : "the device";
	if (!verdict || !*verdict) {
		snprintf(buf, len, "unknown (no verdict stored)");
	} else if ((!strcmp(verdict, "capacity") || !strcmp(verdict, "limit")) && limit &&
		   allocated + request <= limit) {
		/* the request itself fits: the policy asked the device for more
		 * (its reservation: an offline plan, a preallocated pool) */
		snprintf(buf, len, "%s: with %s live, a request of %s made the policy reserve more "
			 "than the %s usable (%s): its reservation does not fit", verdict,
			 size_fmt(allocated, b1, sizeof b1), size_fmt(request, b2, sizeof b2),
			 size_fmt(limit, b3, sizeof b3), what);
	} else if (!strcmp(verdict, "capacity") || !strcmp(verdict, "limit")) {
		snprintf(buf, len, "%s: %s live + %s requested > %s usable (%s)", verdict,
			 size_fmt(allocated, b1, sizeof b1), size_fmt(request, b2, sizeof b2),
			 size_fmt(limit, b3, sizeof b3), what);
	} else if (!strcmp(verdict, "foreign")) {
		/* callers with the foreign figures use oom_explain_foreign */
		snprintf(buf, len, "foreign: %s live + %s requested fit in %s usable, but memory "
			 "outside the framework's allocator took the rest of the device",
			 size_fmt(allocated, b1, sizeof b1), size_fmt(request, b2, sizeof b2),
			 limit ? size_fmt(limit, b3, sizeof b3) : "unlimited");
	} else if (cached_free >= 0 && (uint64_t)cached_free >= request) {
		snprintf(buf, len, "fragmentation: %s cached free but the largest free block is %s "
			 "for a request of %s", size_fmt((uint64_t)cached_free, b1, sizeof b1),
			 size_fmt(largest_free > 0 ? (uint64_t)largest_free : 0, b2, sizeof b2),
			 size_fmt(request, b3, sizeof b3));
	} else {
		snprintf(buf, len, "fragmentation: %s live + %s requested fit in %s usable (%s), "
			 "but the %s reserved could not serve it", size_fmt(allocated, b1, sizeof b1),
			 size_fmt(request, b2, sizeof b2),
			 limit ? size_fmt(limit, b3, sizeof b3) : "unlimited", what,
			 size_fmt(reserved, b4, sizeof b4));
	}
	return buf;
}

const char *oom_explain_foreign(uint64_t request, uint64_t allocated, uint64_t foreign,
				uint64_t capacity, const char *top_lib, char *buf, size_t len)
{
	char b1[32], b2[32], b3[32], b4[32];
	snprintf(buf, len, "foreign: %s live + %s requested fit in the %s device, but %s "
		 "outside the framework's allocator%s%s%s took the rest",
		 size_fmt(allocated, b1, sizeof b1), size_fmt(request, b2, sizeof b2),
		 capacity ? size_fmt(capacity, b4, sizeof b4) : "unlimited",
		 size_fmt(foreign, b3, sizeof b3), top_lib && *top_lib ? " (most in " : "",
		 top_lib && *top_lib ? top_lib : "", top_lib && *top_lib ? ")" : "");
	return buf;
}
