#!/usr/bin/env bash
# readme_check.sh: run every command of README.md's "questions it answers"
# section as written, from the repository root, and fail on the first one
# that exits non-zero. The commands are the lines of the ```sh blocks
# between <!-- questions:begin --> and <!-- questions:end -->; `make` lines
# are skipped when GPUMEMSIM_BIN is set (the test suite has built it), and
# build/gpumemsim is then replaced by $GPUMEMSIM_BIN (so the ASan build
# checks the same commands). Outputs go where the commands say (out/q/).
#
#   scripts/readme_check.sh [README]      exit 0: all ran; 1: one failed
set -u
cd "$(dirname "$0")/.." || exit 1
readme=${1:-README.md}
cmds=$(awk '/<!-- questions:begin -->/ { on = 1; next }
	    /<!-- questions:end -->/ { on = 0 }
	    on && /^```sh/ { blk = 1; next }
	    on && blk && /^```/ { blk = 0; next }
	    on && blk && !/^#/ && NF { print }' "$readme")
if [ -z "$cmds" ]; then
	echo "readme_check: no commands between the questions markers in $readme" >&2
	exit 1
fi
n=0
while IFS= read -r c; do
	run=$c
	if [ -n "${GPUMEMSIM_BIN:-}" ]; then
		case $c in make|make\ *) continue ;; esac
		run=${c//build\/gpumemsim/$GPUMEMSIM_BIN}
	fi
	n=$((n + 1))
	echo "readme_check: [$n] $c" >&2
	if ! bash -c "$run" > /dev/null 2> "${TMPDIR:-/tmp}/readme_check.$$"; then
		echo "readme_check: FAILED: $c" >&2
		tail -5 "${TMPDIR:-/tmp}/readme_check.$$" >&2
		rm -f "${TMPDIR:-/tmp}/readme_check.$$"
		exit 1
	fi
done <<< "$cmds"
rm -f "${TMPDIR:-/tmp}/readme_check.$$"
echo "readme_check: $n commands ran" >&2
