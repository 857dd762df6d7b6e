/*
 * event_queue.h: the engine's priority queue of simulated events.
 *
 * A binary min-heap ordered by (time, sequence). The sequence number is
 * assigned at push, so events at the same time pop in the order they were
 * pushed: every run of the same inputs pops the same order, whatever the
 * heap's internal layout.
 */
#ifndef SIM_EVENT_QUEUE_H
#define SIM_EVENT_QUEUE_H

#include <stddef.h>
#include <stdint.h>

struct eq_event {
	uint64_t t;        /* simulated time, ns */
	uint64_t seq;      /* push order (set by eq_push) */
	uint32_t kind;     /* the engine's event kind */
	uint32_t stream;   /* stream index or other small argument */
	uint64_t arg;      /* free for the caller */
};

struct event_queue {
	struct eq_event *heap;
	size_t n, cap;
	uint64_t next_seq;
};

void eq_init(struct event_queue *q);
void eq_free(struct event_queue *q);
/* Push an event at time T. 0, or -1 when out of memory. */
int eq_push(struct event_queue *q, uint64_t t, uint32_t kind, uint32_t stream, uint64_t arg);
/* Pop the earliest event into *EV: 1, or 0 when empty. */
int eq_pop(struct event_queue *q, struct eq_event *ev);
/* The earliest event without removing it, or NULL when empty. */
const struct eq_event *eq_peek(const struct event_queue *q);
size_t eq_size(const struct event_queue *q);

#endif /* SIM_EVENT_QUEUE_H */
