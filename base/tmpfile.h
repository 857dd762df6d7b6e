/* tmpfile.h: private temporary files for intermediate traces. */
#ifndef BASE_TMPFILE_H
#define BASE_TMPFILE_H

#include <stddef.h>

/* Create an empty private file "$TMPDIR/gpumemsim-STEM-XXXXXX" (/tmp when
 * TMPDIR is unset or empty) and put its name in PATH. 0, or -1 with errno
 * set and PATH holding the template tried (for the message). */
int tmp_file(char *path, size_t len, const char *stem);

/* The directory tmp_file uses. */
const char *tmp_dir(void);

#endif /* BASE_TMPFILE_H */
