/* cmd_trace.c: PLACEHOLDER while the session builds it; replaced by the real command. */
#include <stdio.h>
#include "cli.h"
int cmd_trace(int argc, char **argv)
{
	(void)argc; (void)argv;
	fprintf(stderr, "gpumemsim trace: not built yet\n");
	return 1;
}
