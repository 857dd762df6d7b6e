/*
 * vec.h: grow a heap array by doubling, the one way the project does it.
 *
 * The arrays stay plain (a T *, a count, a size_t capacity) so the code
 * that indexes them is unchanged; only the growth step lives here. A failed
 * growth leaves the old buffer and capacity as they were, so callers can
 * report the error and still free what they hold.
 *
 *	if (VEC_RESERVE(q->heap, q->cap, q->n + 1, 64) < 0)
 *		return -1;
 */
#ifndef SIM_VEC_H
#define SIM_VEC_H

#include <stddef.h>

/*
 * Make *ITEMSP (the address of a T * array pointer; void * so that any T
 * converts without a cast) hold at least NEED elements of ELEM_SIZE (> 0)
 * bytes. The capacity starts at FIRST_CAP (NEED when 0) and doubles until it
 * reaches NEED. Returns 0, or -1 when NEED * ELEM_SIZE overflows or the
 * allocation fails; then neither the buffer nor *CAP has changed.
 */
int vec_grow(void *itemsp, size_t *cap, size_t need, size_t elem_size, size_t first_cap);

/* vec_grow when NEED exceeds *CAP; inline so a push that fits costs a compare. */
static inline int vec_reserve(void *itemsp, size_t *cap, size_t need, size_t elem_size,
			      size_t first_cap)
{
	return need <= *cap ? 0 : vec_grow(itemsp, cap, need, elem_size, first_cap);
}

/* vec_reserve for the array pointer ARR and its size_t capacity CAP (lvalues). */
#define VEC_RESERVE(arr, cap, need, first_cap) \
	vec_reserve(&(arr), &(cap), (need), sizeof *(arr), (first_cap))

#endif /* SIM_VEC_H */
