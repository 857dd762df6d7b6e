/*
 * registry.c: the table of allocator policies. Adding a policy is one
 * extern line and one table entry here (plus its own file).
 */
#include <stdio.h>
#include <string.h>

#include "policy.h"

extern const struct alloc_policy policy_cuda_malloc;
extern const struct alloc_policy policy_pytorch;
extern const struct alloc_policy policy_bfc;
extern const struct alloc_policy policy_cuda_async;
extern const struct alloc_policy policy_buddy;
extern const struct alloc_policy policy_optimal;
extern const struct alloc_policy policy_caching;

const struct alloc_policy *const policy_table[] = {
	&policy_cuda_malloc,
	&policy_pytorch,
	&policy_bfc,
	&policy_cuda_async,
	&policy_buddy,
	&policy_optimal,
	&policy_caching,
	NULL,
};

const struct alloc_policy *policy_find(const char *name)
{
	for (const struct alloc_policy *const *p = policy_table; *p; p++)
		if (name && !strcmp((*p)->name, name))
			return *p;
	return NULL;
}

void policy_list_names(char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (const struct alloc_policy *const *p = policy_table; *p && used < len; p++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
					 p == policy_table ? "" : ", ", (*p)->name);
}
