/*
 * engine_pipe.c: the engine's reader thread: parses batches of records
 * ahead of the replay (see engine.c), marking allocations outside the
 * framework's allocator on the way.
 */
#include "engine_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

int is_foreign(struct trace_reader *rd, const struct trace_mem *m, struct foreign_rule *fr)
{
	if (!fr->sub || trace_mem_kind_host(m->kind))
		return 0;
	if (m->kind == TMEM_DEVICE_STATIC || m->kind == TMEM_MANAGED_STATIC)
		return 1;
	/* no source: nothing says it is not the allocator's */
	if (m->source == TRACE_NO_STRING)
		return 0;
	if (m->source < fr->ncache && fr->cache[m->source])
		return fr->cache[m->source] == 2;
	const char *s = trace_reader_string(rd, m->source);
	int foreign = s && !strstr(s, fr->sub);
	size_t old = fr->ncache;
	if (VEC_RESERVE(fr->cache, fr->ncache, (size_t)m->source + 1, 256) < 0)
		return foreign; /* uncached: asked again next time */
	memset(fr->cache + old, 0, fr->ncache - old);
	fr->cache[m->source] = foreign ? 2 : 1;
	return foreign;
}

/* Is string ID a libcudnn/libcublas path (CACHE: answers by id)? */
int is_lib_source(struct trace_reader *rd, uint32_t id, uint8_t *cache, size_t ncache)
{
	if (id == TRACE_NO_STRING)
		return 0;
	if (id < ncache && cache[id])
		return cache[id] == 2;
	const char *s = trace_reader_string(rd, id);
	int lib = s && (strstr(s, "libcudnn") || strstr(s, "libcublas"));
	if (id < ncache)
		cache[id] = lib ? 2 : 1;
	return lib;
}

int mem_rules(struct trace_reader *rd, struct trace_rec *rec, struct foreign_rule *fr)
{
	int foreign = 0;
	if (rec->type == TREC_ALLOC && fr->sub)
		foreign = is_foreign(rd, &rec->u.mem, fr);
	if (fr->xla && xla_requests_apply(fr->xla, rec) == XLA_REQ_OUTSIDE && fr->xla_route)
		foreign = 1;
	return foreign;
}

/* What the replay needs of the record just read into ER, derived here in
 * the reader thread (engine_int.h). */
void eng_rec_derive(struct eng_rec *er, struct trace_reader *rd, uint8_t *libc, size_t nlibc,
		    struct foreign_rule *fr)
{
	struct trace_rec *rec = &er->r;
	switch (rec->type) {
	case TREC_ALLOC:
		rec->u.mem.flags &= ~(ENG_F_LIB | ENG_F_FOREIGN);
		if (is_lib_source(rd, rec->u.mem.source, libc, nlibc))
			rec->u.mem.flags |= ENG_F_LIB;
		if ((fr->sub || fr->xla) && mem_rules(rd, rec, fr))
			rec->u.mem.flags |= ENG_F_FOREIGN;
		break;
	case TREC_FREE:
		rec->u.mem.flags &= ~(ENG_F_LIB | ENG_F_FOREIGN);
		if (fr->xla)
			mem_rules(rd, rec, fr);
		break;
	case TREC_KERNEL:
		rec->u.kernel.nlinks = 0;
		rec->u.kernel.links = NULL;
		break;
	case TREC_RANGE:
		er->rname = trace_reader_string(rd, rec->u.range.name);
		break;
	case TREC_API:
		er->api_kind = cost_api_kind(trace_reader_string(rd, rec->u.api.name));
		break;
	default:
		break;
	}
}

/* A request to the framework's allocator: device memory that neither a
 * library nor anything outside the framework made. */
static int framework_mem(const struct trace_rec *r)
{
	return r->type <= TREC_FREE && r->u.mem.kind == TMEM_DEVICE &&
	       !(r->u.mem.flags & (ENG_F_LIB | ENG_F_FOREIGN));
}

/* A PyTorch convolution's workspace (cuDNN's search, a plan's run) is the
 * framework's one request freed before it makes or frees any other:
 * allocated after the op's outputs, freed before the op returns. Marks
 * those allocated in B TMEM_F_SHRINKABLE, their frees looked for in B and
 * then in NEXT (the batch read after it; NULL at the end). A workspace's
 * free lies at most 842 records on in the shipped PyTorch captures
 * (cuDNN's search runs its trials in between); one farther than the next
 * batch stays unmarked, and the replay takes its failure for an OOM. */
static void mark_workspaces(struct rec_batch *b, const struct rec_batch *next)
{
	size_t total = b->n + (next ? next->n : 0);
	for (size_t i = 0; i < b->n; i++) {
		struct trace_rec *a = &b->recs[i].r;
		if (a->type != TREC_ALLOC || !framework_mem(a))
			continue;
		for (size_t j = i + 1; j < total; j++) {
			const struct trace_rec *x = j < b->n ? &b->recs[j].r : &next->recs[j - b->n].r;
			if (!framework_mem(x))
				continue;
			if (x->type == TREC_FREE && x->u.mem.addr == a->u.mem.addr)
				a->u.mem.flags |= TMEM_F_SHRINKABLE;
			break;
		}
	}
}

void *pipe_main(void *arg)
{
	struct rec_pipe *p = arg;
	/* marking workspaces, the batch read last is held back until the next
	 * one is read: a workspace's free may lie there */
	unsigned held = 0;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (p->count + held == PIPE_NBATCH && !p->stop)
			pthread_cond_wait(&p->cv_empty, &p->mu);
		int stop = p->stop;
		struct rec_batch *b = &p->b[(p->tail + held) % PIPE_NBATCH];
		pthread_mutex_unlock(&p->mu);
		if (stop)
			return NULL;
		int rc = TRACE_OK;
		size_t n = 0;
		while (n < PIPE_BATCH && (rc = trace_reader_next(p->rd, &b->recs[n].r)) == TRACE_OK)
			eng_rec_derive(&b->recs[n++], p->rd, p->libc, sizeof p->libc, &p->fr);
		b->n = n;
		b->rc = rc;
		unsigned hold = p->fr.torch_ws && rc == TRACE_OK;
		if (held)
			mark_workspaces(&p->b[p->tail], b);
		if (p->fr.torch_ws && !hold)
			mark_workspaces(b, NULL);
		/* publish the held batch, and this one unless it is held now */
		unsigned publish = held + !hold;
		held = hold;
		if (publish) {
			pthread_mutex_lock(&p->mu);
			p->tail = (p->tail + publish) % PIPE_NBATCH;
			p->count += publish;
			pthread_cond_signal(&p->cv_full);
			pthread_mutex_unlock(&p->mu);
		}
		if (rc != TRACE_OK)
			return NULL;
	}
}

int pipe_start(struct rec_pipe *p, struct trace_reader *rd, const struct foreign_rule *fr)
{
	memset(p, 0, sizeof *p);
	p->rd = rd;
	p->fr.sub = fr->sub;
	p->fr.xla = fr->xla;
	p->fr.xla_route = fr->xla_route;
	p->fr.torch_ws = fr->torch_ws;
	for (int i = 0; i < PIPE_NBATCH; i++) {
		p->b[i].recs = malloc(PIPE_BATCH * sizeof *p->b[i].recs);
		if (!p->b[i].recs)
			goto fail;
	}
	if (pthread_mutex_init(&p->mu, NULL) != 0)
		goto fail;
	if (pthread_cond_init(&p->cv_full, NULL) != 0) {
		pthread_mutex_destroy(&p->mu);
		goto fail;
	}
	if (pthread_cond_init(&p->cv_empty, NULL) != 0) {
		pthread_cond_destroy(&p->cv_full);
		pthread_mutex_destroy(&p->mu);
		goto fail;
	}
	if (pthread_create(&p->th, NULL, pipe_main, p) != 0) {
		pthread_cond_destroy(&p->cv_empty);
		pthread_cond_destroy(&p->cv_full);
		pthread_mutex_destroy(&p->mu);
		goto fail;
	}
	p->started = 1;
	return 0;
fail:
	for (int i = 0; i < PIPE_NBATCH; i++)
		free(p->b[i].recs);
	free(p->fr.cache);
	p->fr.cache = NULL;
	return -1;
}

/* The next filled batch (blocks until the reader has one). */
struct rec_batch *pipe_take(struct rec_pipe *p)
{
	pthread_mutex_lock(&p->mu);
	while (p->count == 0)
		pthread_cond_wait(&p->cv_full, &p->mu);
	struct rec_batch *b = &p->b[p->head];
	pthread_mutex_unlock(&p->mu);
	return b;
}

void pipe_release(struct rec_pipe *p)
{
	pthread_mutex_lock(&p->mu);
	p->head = (p->head + 1) % PIPE_NBATCH;
	p->count--;
	pthread_cond_signal(&p->cv_empty);
	pthread_mutex_unlock(&p->mu);
}

/* Stop the reader (if still running) and wait for it: afterwards the
 * reader belongs to the engine thread again. */
void pipe_stop(struct rec_pipe *p)
{
	if (!p->started)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv_empty);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	pthread_cond_destroy(&p->cv_empty);
	pthread_cond_destroy(&p->cv_full);
	pthread_mutex_destroy(&p->mu);
	for (int i = 0; i < PIPE_NBATCH; i++)
		free(p->b[i].recs);
	free(p->fr.cache);
	p->fr.cache = NULL;
	p->started = 0;
}

