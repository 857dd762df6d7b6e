/*
 * text_input.h: line input from a plain or gzip-compressed text file, for
 * importers of foreign formats (PyTorch snapshots' text form, ground-truth
 * records). Together with trace_reader.c and trace_writer.c it is the only
 * code that links zlib: callers never see gzip.
 */
#ifndef TRACES_TEXT_INPUT_H
#define TRACES_TEXT_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct text_input;

/* Open PATH (gzip detected from its bytes). NULL with ERR naming the path. */
struct text_input *text_input_open(const char *path, char *err, size_t errlen);

/*
 * Read the next line into BUF (newline stripped). Returns 1 with a line, 0 at
 * the end of the file, -1 with ERR ("PATH:LINE: ...") for a line longer than
 * LEN-1 bytes, a truncated gzip stream or a read error.
 */
int text_input_line(struct text_input *t, char *buf, size_t len, char *err, size_t errlen);

/* Lines read so far (the number of the last line returned). */
uint64_t text_input_lineno(const struct text_input *t);

void text_input_close(struct text_input *t);

#endif /* TRACES_TEXT_INPUT_H */
