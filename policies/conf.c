/*
 * conf.c: the policies' side of knob parsing (base/conf.h parses the
 * strings): messages that name a policy and its known knobs.
 */
#include "policy.h"

#include <stdio.h>

/* Lists the known knobs so a typo is fixed without opening the docs. */
int conf_unknown(const char *policy, const struct policy_knob *knobs,
		 const char *key, char *err, size_t errlen)
{
	size_t used = (size_t)snprintf(err, errlen, "unknown knob '%s' for policy %s (known: ",
				       key, policy);
	int any = 0;
	for (const struct policy_knob *k = knobs; k && k->name && used < errlen; k++, any = 1)
		used += (size_t)snprintf(err + used, errlen - used, "%s%s", any ? ", " : "", k->name);
	if (used < errlen)
		snprintf(err + used, errlen - used, "%s)", any ? "" : "none");
	return -1;
}

/* Even a policy without knobs parses CONF, so a knob meant for another
 * policy is reported rather than silently ignored. */
int conf_none(const char *policy, const char *conf, char *err, size_t errlen)
{
	struct conf_kv kv;
	const char *cur = conf;
	int r = conf_next(&cur, &kv, err, errlen);
	if (r < 0)
		return -1;
	if (r > 0)
		return conf_unknown(policy, NULL, kv.key, err, errlen);
	return 0;
}
