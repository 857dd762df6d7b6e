/*
 * strpool.h: a pool of distinct strings, each kept once and named by a
 * dense id (0, 1, 2, ... in the order first added).
 *
 * The strings lie back to back in one buffer, so a pool of many short
 * names costs their bytes plus 12 bytes each, not an allocation each. The
 * trace writer interns every kernel, range and source name with it, the
 * Kineto importer its event names, and the capture's converter the names
 * of the records it holds back (capture/convert.c: up to millions of
 * records, a few hundred distinct names).
 */
#ifndef BASE_STRPOOL_H
#define BASE_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

struct strpool {
	char *buf;            /* the strings, NUL-terminated, back to back */
	size_t len, cap;
	uint32_t *off;        /* id -> offset in buf */
	size_t n, capoff;
	uint32_t *slots;      /* open addressing on the hash: id + 1, 0 = empty */
	size_t nslots;        /* a power of two, or 0 */
};

void strpool_init(struct strpool *p);
void strpool_free(struct strpool *p);

/* The id of S in *ID, S copied in the first time. Returns 1 when S is new,
 * 0 when it was there, -1 when out of memory or past 4 GiB of strings or
 * ids (*ID unchanged). */
int strpool_add(struct strpool *p, const char *s, uint32_t *id);

/* The string of ID (an id strpool_add gave). Valid until the next add. */
static inline const char *strpool_str(const struct strpool *p, uint32_t id)
{
	return p->buf + p->off[id];
}

#endif /* BASE_STRPOOL_H */
