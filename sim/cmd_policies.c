/* cmd_policies.c: PLACEHOLDER while the session builds it; replaced by the real command. */
#include <stdio.h>
#include "cli.h"
int cmd_policies(int argc, char **argv)
{
	(void)argc; (void)argv;
	fprintf(stderr, "gpumemsim policies: not built yet\n");
	return 1;
}
