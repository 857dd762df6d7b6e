/*
 * event_queue.c: see event_queue.h. Textbook binary heap (sift-up on push,
 * sift-down on pop) over (t, seq) keys; seq is unique, so the order is total
 * and ties never depend on heap layout.
 */
#include "event_queue.h"

#include <stdlib.h>

#include "../base/vec.h"

static inline int before(const struct eq_event *a, const struct eq_event *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void eq_init(struct event_queue *q)
{
	q->heap = NULL;
	q->n = q->cap = 0;
	q->next_seq = 0;
}

void eq_free(struct event_queue *q)
{
	free(q->heap);
	eq_init(q);
}

int eq_push(struct event_queue *q, uint64_t t, uint32_t kind, uint32_t stream, uint64_t arg)
{
	if (VEC_RESERVE(q->heap, q->cap, q->n + 1, 64) < 0)
		return -1;
	struct eq_event ev = {t, q->next_seq++, kind, stream, arg};
	size_t i = q->n++;
	while (i && before(&ev, &q->heap[(i - 1) / 2])) {
		q->heap[i] = q->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	q->heap[i] = ev;
	return 0;
}

int eq_pop(struct event_queue *q, struct eq_event *ev)
{
	if (!q->n)
		return 0;
	*ev = q->heap[0];
	struct eq_event last = q->heap[--q->n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct eq_event *mv = &last;
		if (l < q->n && before(&q->heap[l], mv)) {
			m = l;
			mv = &q->heap[l];
		}
		if (r < q->n && before(&q->heap[r], mv))
			m = r;
		if (m == i)
			break;
		q->heap[i] = q->heap[m];
		i = m;
	}
	if (q->n)
		q->heap[i] = last;
	return 1;
}

const struct eq_event *eq_peek(const struct event_queue *q)
{
	return q->n ? &q->heap[0] : NULL;
}

size_t eq_size(const struct event_queue *q) { return q->n; }
