/* cmd_validate.c: PLACEHOLDER while the session builds it; replaced by the real command. */
#include <stdio.h>
#include "cli.h"
int cmd_validate(int argc, char **argv)
{
	(void)argc; (void)argv;
	fprintf(stderr, "gpumemsim validate: not built yet\n");
	return 1;
}
