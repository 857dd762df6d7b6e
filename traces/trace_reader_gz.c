/*
 * trace_reader_gz.c: the reader's gzip thread: inflates a few chunks ahead
 * of the parser (see trace_reader.c for why, and why results never depend
 * on its timing).
 */
#include "trace_reader_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ gzip thread */

void *rd_zmain(void *arg)
{
	struct rd_inflater *z = arg;
	for (;;) {
		pthread_mutex_lock(&z->mu);
		while (z->count == RD_ZNCHUNK && !z->stop)
			pthread_cond_wait(&z->cv, &z->mu);
		int stop = z->stop;
		struct rd_zchunk *c = &z->c[(z->head + z->count) % RD_ZNCHUNK];
		pthread_mutex_unlock(&z->mu);
		if (stop)
			return NULL;
		errno = 0;
		int n = gzread(z->gz, c->data, RD_ZCHUNK);
		c->off = 0;
		c->n = n > 0 ? (size_t)n : 0;
		c->end = n > 0 ? 0 : n == 0 ? 1 : -1;
		c->cut = 0;
		if (n < 0) {
			int errnum = 0;
			const char *m = gzerror(z->gz, &errnum);
			snprintf(c->msg, sizeof c->msg, "%s", errnum == Z_ERRNO ? strerror(errno) : m);
		} else if (n == 0) {
			int errnum = 0;
			gzerror(z->gz, &errnum);
			c->cut = (errnum == Z_BUF_ERROR);
		} else {
			c->crc = (uint32_t)crc32(0L, (const Bytef *)c->data, (uInt)n);
		}
		pthread_mutex_lock(&z->mu);
		z->count++;
		pthread_cond_broadcast(&z->cv);
		pthread_mutex_unlock(&z->mu);
		if (n <= 0)
			return NULL;
	}
}

void rd_zfree(struct rd_inflater *z)
{
	for (int i = 0; i < RD_ZNCHUNK; i++)
		free(z->c[i].data);
	free(z);
}

/* Start inflating ahead; NULL (and reading stays on this thread) when
 * memory or a thread is not to be had. */
struct rd_inflater *rd_zstart(gzFile gz)
{
	struct rd_inflater *z = calloc(1, sizeof *z);
	if (!z)
		return NULL;
	z->gz = gz;
	for (int i = 0; i < RD_ZNCHUNK; i++) {
		z->c[i].data = malloc(RD_ZCHUNK);
		if (!z->c[i].data)
			goto fail;
	}
	if (pthread_mutex_init(&z->mu, NULL) != 0)
		goto fail;
	if (pthread_cond_init(&z->cv, NULL) != 0) {
		pthread_mutex_destroy(&z->mu);
		goto fail;
	}
	if (pthread_create(&z->th, NULL, rd_zmain, z) != 0) {
		pthread_cond_destroy(&z->cv);
		pthread_mutex_destroy(&z->mu);
		goto fail;
	}
	return z;
fail:
	rd_zfree(z);
	return NULL;
}

/* Stop the thread and free it; the gzFile is this thread's again. */
void rd_zstop(struct trace_reader *r)
{
	struct rd_inflater *z = r->zt;
	if (!z)
		return;
	pthread_mutex_lock(&z->mu);
	z->stop = 1;
	pthread_cond_broadcast(&z->cv);
	pthread_mutex_unlock(&z->mu);
	pthread_join(z->th, NULL);
	pthread_cond_destroy(&z->cv);
	pthread_mutex_destroy(&z->mu);
	rd_zfree(z);
	r->zt = NULL;
}

/* Like gzread into DST (at most ROOM bytes), from the thread's chunks:
 * bytes, 0 at the end (cut set as gzread's caller would see it), or -1
 * with the message in MSG. */
int rd_zread(struct rd_inflater *z, char *dst, size_t room, uint32_t *crc,
		    uint64_t *bytes, int count_crc, int *cut, char *msg, size_t msglen)
{
	pthread_mutex_lock(&z->mu);
	while (z->count == 0)
		pthread_cond_wait(&z->cv, &z->mu);
	struct rd_zchunk *c = &z->c[z->head];
	pthread_mutex_unlock(&z->mu);
	if (c->end) {
		/* terminal: stays at the head, so later calls see it again */
		*cut = c->cut;
		if (c->end < 0)
			snprintf(msg, msglen, "%s", c->msg);
		return c->end < 0 ? -1 : 0;
	}
	if (c->off == 0 && count_crc) {
		*crc = (uint32_t)crc32_combine(*crc, c->crc, (z_off_t)c->n);
		*bytes += c->n;
	}
	size_t k = c->n - c->off < room ? c->n - c->off : room;
	memcpy(dst, c->data + c->off, k);
	c->off += k;
	if (c->off == c->n) {
		pthread_mutex_lock(&z->mu);
		z->head = (z->head + 1) % RD_ZNCHUNK;
		z->count--;
		pthread_cond_broadcast(&z->cv);
		pthread_mutex_unlock(&z->mu);
	}
	return (int)k;
}

