/*
 * test_event_queue.c: the engine's (time, sequence) heap: time order, ties
 * in push order, and agreement with a sorted reference under random pushes
 * and pops.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "../sim/event_queue.h"

Test(event_queue, pops_in_time_order)
{
	struct event_queue q;
	struct eq_event ev;
	eq_init(&q);
	uint64_t ts[] = {50, 10, 40, 20, 30};
	for (int i = 0; i < 5; i++)
		cr_assert_eq(eq_push(&q, ts[i], 0, 0, (uint64_t)i), 0);
	cr_assert_eq(eq_size(&q), 5);
	cr_assert_eq(eq_peek(&q)->t, 10);
	for (uint64_t want = 10; want <= 50; want += 10) {
		cr_assert_eq(eq_pop(&q, &ev), 1);
		cr_assert_eq(ev.t, want);
	}
	cr_assert_eq(eq_pop(&q, &ev), 0);
	cr_assert_null(eq_peek(&q));
	eq_free(&q);
}

Test(event_queue, ties_pop_in_push_order)
{
	struct event_queue q;
	struct eq_event ev;
	eq_init(&q);
	for (uint64_t i = 0; i < 100; i++)
		cr_assert_eq(eq_push(&q, i % 3 == 0 ? 5 : 7, 1, 0, i), 0);
	uint64_t last5 = 0, last7 = 0;
	int first5 = 1, first7 = 1;
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(eq_pop(&q, &ev), 1);
		if (ev.t == 5) {
			cr_assert(first5 || ev.arg > last5, "ties at t=5 out of push order");
			cr_assert(first7, "a t=7 event popped before a t=5 one");
			last5 = ev.arg;
			first5 = 0;
		} else {
			cr_assert(first7 || ev.arg > last7, "ties at t=7 out of push order");
			last7 = ev.arg;
			first7 = 0;
		}
	}
	eq_free(&q);
}

static int cmp_pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

Test(event_queue, random_against_sorted_reference)
{
	struct event_queue q;
	struct eq_event ev;
	enum { N = 20000 };
	uint64_t (*ref)[2] = malloc(sizeof(uint64_t[2]) * N);
	size_t nref = 0;
	uint64_t seq = 0;
	srand(12345);
	eq_init(&q);
	for (int i = 0; i < N; i++) {
		if (nref && rand() % 3 == 0) {
			qsort(ref, nref, sizeof ref[0], cmp_pair);
			cr_assert_eq(eq_pop(&q, &ev), 1);
			cr_assert_eq(ev.t, ref[0][0]);
			cr_assert_eq(ev.arg, ref[0][1]);
			memmove(ref, ref + 1, (nref - 1) * sizeof ref[0]);
			nref--;
		} else {
			uint64_t t = (uint64_t)(rand() % 50);
			cr_assert_eq(eq_push(&q, t, 0, 0, seq), 0);
			ref[nref][0] = t;
			ref[nref][1] = seq++;
			nref++;
		}
	}
	cr_assert_eq(eq_size(&q), nref);
	free(ref);
	eq_free(&q);
}
