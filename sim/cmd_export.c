/* stub */
#include "cli.h"
int cmd_export(int argc, char **argv) { (void)argc; (void)argv; return 1; }
