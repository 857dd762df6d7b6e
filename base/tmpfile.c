/* tmpfile.c: see tmpfile.h. */
#include "tmpfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

const char *tmp_dir(void)
{
	const char *d = getenv("TMPDIR");
	return d && *d ? d : "/tmp";
}

int tmp_file(char *path, size_t len, const char *stem)
{
	int n = snprintf(path, len, "%s/gpumemsim-%s-XXXXXX", tmp_dir(), stem);
	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}
