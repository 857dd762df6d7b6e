/*
 * captures.c: several captures loaded at once (captures.h).
 */
#include "captures.h"

/* Load every capture; on failure free those loaded. */
int whatif_load_captures(char *const *paths, size_t n, struct bf_trace **t, char *err,
			 size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		if (bf_load(paths[i], &t[i], err, errlen) < 0) {
			for (size_t k = 0; k < i; k++)
				bf_free(t[k]);
			return -1;
		}
	}
	return 0;
}
