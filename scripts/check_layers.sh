#!/bin/sh
# check_layers.sh [ROOT]: the folders' layering (docs/architecture.md), run
# by `make test`. Each C source or header may include files of its own
# folder and of folders below it, never of a folder above:
#
#   base < traces < device < policies, capture < sim < whatif < plots
#        < include (gpumemsim.h, the library's one public header) < cli
#
# (capture/ is the capture library, beside policies: it needs base and
# traces only.) Prints every upward include as FILE:LINE: and exits 1 when
# there is one, 0 otherwise.
ROOT=${1:-.}
cd "$ROOT" || exit 2
rank() {
	case $1 in
	base) echo 0 ;; traces) echo 1 ;; device) echo 2 ;;
	policies | capture) echo 3 ;; sim) echo 4 ;; whatif) echo 5 ;;
	plots) echo 6 ;; include) echo 7 ;; cli) echo 8 ;; *) echo -1 ;;
	esac
}
bad=0
for dir in base traces device policies capture sim whatif plots include cli; do
	[ -d "$dir" ] || continue
	own=$(rank "$dir")
	# the folder's own sources and headers (capture/cnn and capture/tests
	# are programs of their own, not part of the library)
	for f in $(find "$dir" -maxdepth 1 -name '*.[ch]' | sort); do
		grep -n '^#include "\.\./[a-z_]*/' "$f" | while IFS= read -r line; do
			n=${line%%:*}
			inc=${line#*\"../}
			inc=${inc%\"*}
			to=${inc%%/*}
			r=$(rank "$to")
			# above, or a sibling of the same layer (policies <-> capture)
			if [ "$r" -gt "$own" ] || { [ "$r" -eq "$own" ] && [ "$to" != "$dir" ]; }; then
				echo "$f:$n: $dir includes ../$inc (a layer above it)"
			fi
		done
	done
done > "${TMPDIR:-/tmp}/check_layers.$$"
if [ -s "${TMPDIR:-/tmp}/check_layers.$$" ]; then
	cat "${TMPDIR:-/tmp}/check_layers.$$"
	bad=1
fi
rm -f "${TMPDIR:-/tmp}/check_layers.$$"
exit $bad
