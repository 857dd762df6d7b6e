/* cmd_import.c: PLACEHOLDER while the session builds it; replaced by the real command. */
#include <stdio.h>
#include "cli.h"
int cmd_import(int argc, char **argv)
{
	(void)argc; (void)argv;
	fprintf(stderr, "gpumemsim import: not built yet\n");
	return 1;
}
