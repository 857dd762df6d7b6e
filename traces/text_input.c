/*
 * text_input.c: see text_input.h. zlib's gzread reads plain files
 * unchanged, so one path serves both; a gzip stream that ends early is an
 * error here (importers must not convert half a record silently).
 */
#include "text_input.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct text_input {
	gzFile gz;
	char *path;
	uint64_t lineno;
};

struct text_input *text_input_open(const char *path, char *err, size_t errlen)
{
	struct text_input *t = calloc(1, sizeof *t);
	if (!t || !(t->path = strdup(path))) {
		snprintf(err, errlen, "%s: out of memory", path);
		free(t);
		return NULL;
	}
	errno = 0;
	t->gz = gzopen(path, "rb");
	if (!t->gz) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno ? errno : ENOENT));
		free(t->path);
		free(t);
		return NULL;
	}
	gzbuffer(t->gz, 1 << 18);
	return t;
}

int text_input_line(struct text_input *t, char *buf, size_t len, char *err, size_t errlen)
{
	if (!gzgets(t->gz, buf, (int)len)) {
		int zerr;
		const char *zmsg = gzerror(t->gz, &zerr);
		if (zerr == Z_BUF_ERROR || (zerr == Z_OK && !gzeof(t->gz))) {
			snprintf(err, errlen, "%s:%" PRIu64 ": truncated gzip stream", t->path,
				 t->lineno + 1);
			return -1;
		}
		if (zerr < 0) {
			snprintf(err, errlen, "%s:%" PRIu64 ": read error: %s", t->path,
				 t->lineno + 1, zmsg);
			return -1;
		}
		return 0;
	}
	t->lineno++;
	size_t n = strlen(buf);
	if (n && buf[n - 1] == '\n') {
		buf[--n] = '\0';
	} else if (n == len - 1) {
		snprintf(err, errlen, "%s:%" PRIu64 ": line too long (over %zu bytes)", t->path,
			 t->lineno, len - 1);
		return -1;
	}
	return 1;
}

uint64_t text_input_lineno(const struct text_input *t) { return t->lineno; }

void text_input_close(struct text_input *t)
{
	if (!t)
		return;
	gzclose(t->gz);
	free(t->path);
	free(t);
}
