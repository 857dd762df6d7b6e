/*
 * strpool.c: distinct strings by dense id (strpool.h).
 */
#include <stdlib.h>
#include <string.h>

#include "strpool.h"
#include "vec.h"

static uint64_t sp_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

void strpool_init(struct strpool *p)
{
	memset(p, 0, sizeof(*p));
}

void strpool_free(struct strpool *p)
{
	free(p->buf);
	free(p->off);
	free(p->slots);
	strpool_init(p);
}

/* Twice the slots (at least 256), every id placed again. */
static int sp_grow(struct strpool *p)
{
	size_t n = p->nslots ? p->nslots * 2 : 256;
	uint32_t *s = calloc(n, sizeof(*s));
	if (!s)
		return -1;
	for (size_t id = 0; id < p->n; id++) {
		size_t i = (size_t)sp_hash(p->buf + p->off[id]) & (n - 1);
		while (s[i])
			i = (i + 1) & (n - 1);
		s[i] = (uint32_t)id + 1;
	}
	free(p->slots);
	p->slots = s;
	p->nslots = n;
	return 0;
}

int strpool_add(struct strpool *p, const char *s, uint32_t *id)
{
	uint64_t h = sp_hash(s);
	size_t i = 0;
	if (p->nslots) {
		for (i = (size_t)h & (p->nslots - 1); p->slots[i]; i = (i + 1) & (p->nslots - 1))
			if (!strcmp(p->buf + p->off[p->slots[i] - 1], s)) {
				*id = p->slots[i] - 1;
				return 0;
			}
	}
	size_t l = strlen(s) + 1;
	/* offsets and ids are 32-bit; UINT32_MAX - 1 stays free as a caller's "none" */
	if (p->len + l >= UINT32_MAX || p->n + 2 >= UINT32_MAX)
		return -1;
	if (VEC_RESERVE(p->buf, p->cap, p->len + l, 4096) < 0 ||
	    VEC_RESERVE(p->off, p->capoff, p->n + 1, 256) < 0)
		return -1;
	if ((p->n + 1) * 2 > p->nslots) {
		if (sp_grow(p) < 0)
			return -1;
		for (i = (size_t)h & (p->nslots - 1); p->slots[i]; i = (i + 1) & (p->nslots - 1))
			;
	}
	memcpy(p->buf + p->len, s, l);
	p->off[p->n] = (uint32_t)p->len;
	p->len += l;
	p->slots[i] = (uint32_t)p->n + 1;
	*id = (uint32_t)p->n++;
	return 1;
}
