/*
 * vec.c: see vec.h. The array pointer is read and written through memcpy:
 * the caller's object is a T *, not a void *, and memcpy is the one access
 * that C allows for both (all object pointers share a representation on the
 * platforms this builds for).
 */
#include "vec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Doubling keeps appends amortised O(1); near SIZE_MAX it falls back to NEED. */
int vec_grow(void *itemsp, size_t *cap, size_t need, size_t elem_size, size_t first_cap)
{
	if (need <= *cap)
		return 0;
	size_t limit = SIZE_MAX / elem_size;
	if (need > limit)
		return -1;
	size_t nc = *cap ? *cap : first_cap ? first_cap : need;
	while (nc < need)
		nc = nc > limit / 2 ? need : nc * 2;
	if (nc > limit)
		nc = need;
	void *old, *p;
	memcpy(&old, itemsp, sizeof old);
	p = realloc(old, nc * elem_size);
	if (!p)
		return -1;
	memcpy(itemsp, &p, sizeof p);
	*cap = nc;
	return 0;
}
