/*
 * test_layers.c: the folders' layering (scripts/check_layers.sh,
 * docs/architecture.md): no file includes one of a folder above its own.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"

Test(layers, the_tree_includes_only_downward)
{
	cr_assert_eq(th_sh("sh scripts/check_layers.sh . >&2"), 0,
		     "an upward include (listed above): see docs/architecture.md");
}

Test(layers, an_upward_include_is_caught)
{
	char dir[64], cmd[512];
	th_tmpname(dir, sizeof dir, "layers");
	snprintf(cmd, sizeof cmd,
		 "rm -f %s && mkdir -p %s/traces %s/sim && printf '#include \"../sim/engine.h\"\\n' > %s/traces/a.c",
		 dir, dir, dir, dir);
	cr_assert_eq(th_sh("%s", cmd), 0);
	snprintf(cmd, sizeof cmd, "sh scripts/check_layers.sh %s | grep -q 'traces/a.c:1: traces includes ../sim/engine.h'", dir);
	cr_assert_eq(th_sh("%s", cmd), 0, "the upward include is named");
	snprintf(cmd, sizeof cmd, "sh scripts/check_layers.sh %s >/dev/null", dir);
	cr_assert_eq(th_sh("%s", cmd), 1);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	th_sh("%s", cmd);
}
