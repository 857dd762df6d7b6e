/*
 * trace_header.c: deep copies of a trace header (see trace.h), for those
 * who keep one after closing its reader (the batch fit, trace stats).
 */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

/* *TO = a copy of FROM (NULL stays NULL); -1 when out of memory. */
static int dup_str(char **to, const char *from)
{
	*to = from ? strdup(from) : NULL;
	return from && !*to ? -1 : 0;
}

/* DST = a deep copy of SRC; on -1 what was copied is in DST, to free. */
int trace_header_copy(struct trace_header *dst, const struct trace_header *src)
{
	memset(dst, 0, sizeof *dst);
	dst->version = src->version;
	dst->total_memory = src->total_memory;
	if (dup_str(&dst->producer, src->producer) < 0 ||
	    dup_str(&dst->producer_version, src->producer_version) < 0 ||
	    dup_str(&dst->gpu, src->gpu) < 0 ||
	    dup_str(&dst->compute_capability, src->compute_capability) < 0 ||
	    dup_str(&dst->driver, src->driver) < 0 || dup_str(&dst->cuda, src->cuda) < 0 ||
	    dup_str(&dst->cupti, src->cupti) < 0 || dup_str(&dst->cudnn, src->cudnn) < 0 ||
	    dup_str(&dst->command, src->command) < 0)
		return -1;
	if (!src->nlabels)
		return 0;
	dst->labels = calloc(src->nlabels, sizeof *dst->labels);
	if (!dst->labels)
		return -1;
	for (size_t i = 0; i < src->nlabels; i++) {
		dst->nlabels = i + 1;
		if (dup_str(&dst->labels[i].key, src->labels[i].key) < 0 ||
		    dup_str(&dst->labels[i].value, src->labels[i].value) < 0)
			return -1;
	}
	return 0;
}

void trace_header_free(struct trace_header *h)
{
	free(h->producer);
	free(h->producer_version);
	free(h->gpu);
	free(h->compute_capability);
	free(h->driver);
	free(h->cuda);
	free(h->cupti);
	free(h->cudnn);
	free(h->command);
	for (size_t i = 0; i < h->nlabels; i++) {
		free(h->labels[i].key);
		free(h->labels[i].value);
	}
	free(h->labels);
	memset(h, 0, sizeof *h);
}

const char *trace_label_find(const struct trace_label *labels, size_t n, const char *key)
{
	const char *v = NULL;
	for (size_t i = 0; i < n; i++)
		if (labels[i].key && !strcmp(labels[i].key, key))
			v = labels[i].value ? labels[i].value : "";
	return v;
}

const char *trace_header_label(const struct trace_header *h, const char *key)
{
	return h ? trace_label_find(h->labels, h->nlabels, key) : NULL;
}

size_t trace_labels_override(struct trace_label *labels, size_t n, size_t cap,
			     const struct trace_label *extra, size_t nextra)
{
	for (size_t i = 0; i < nextra; i++) {
		size_t j = 0;
		while (j < n && strcmp(labels[j].key, extra[i].key))
			j++;
		if (j == n && n == cap)
			break;
		labels[j] = extra[i];
		if (j == n)
			n++;
	}
	return n;
}
