/*
 * captures.h: the captures of a batch sweep, loaded together for the
 * batch-size what-ifs (whatif batch, maxbatch).
 */
#ifndef WHATIF_CAPTURES_H
#define WHATIF_CAPTURES_H

#include <stddef.h>

#include "batch_fit.h"

/* Load the N captures PATHS into T[0..N) (bf_load each). Returns 0, or -1
 * with ERR naming the file (and line) that failed; then nothing is left
 * loaded. */
int whatif_load_captures(char *const *paths, size_t n, struct bf_trace **t, char *err,
			 size_t errlen);

#endif /* WHATIF_CAPTURES_H */
