#!/bin/sh
# overhead.sh: capture overhead on a PyTorch training step (run on the GPU
# host after `make capture`). Times the median ResNet-50 training step with
# the caching allocator, without capture, with capture, and with capture
# --no-links, and prints each ratio to the uncaptured step.
# usage: sh capture/overhead.sh [BUILD_DIR] [BATCH] [STEPS]
B=${1:-build}
BATCH=${2:-32}
STEPS=${3:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
T=${TMPDIR:-/tmp}/gpumemsim-overhead.$$
mkdir -p "$T" || exit 1
run() { # label, then the command; prints the median step time
	ms=$("$@" 2>"$T/err" | awk '/^step_ms/ {print $2}')
	if [ -z "$ms" ]; then echo "overhead: $1 failed:" >&2; cat "$T/err" >&2; exit 1; fi
	echo "$ms"
}
ARGS="$HERE/tests/torch_steps.py --model resnet50 --batch $BATCH --steps $STEPS --warmup 5"
base=$(run $PY $ARGS) || exit 1
cap=$(run "$B/gpumemsim" capture -o "$T/full.trace.gz" -- $PY $ARGS) || exit 1
nol=$(run "$B/gpumemsim" capture -o "$T/nolinks.trace.gz" --no-links -- $PY $ARGS) || exit 1
echo "resnet50 batch $BATCH, median of $STEPS steps (ms): plain $base, capture $cap, capture --no-links $nol"
awk -v b="$base" -v c="$cap" -v n="$nol" 'BEGIN {printf "overhead ratio: capture %.3f, capture --no-links %.3f\n", c / b, n / b}'
ls -l "$T"/*.trace.gz
rm -rf "$T"
