#!/usr/bin/env bash
# device_compile_pair.sh: issue 16's step-time ground truth in one device
# call. Every model and batch runs eager and compiled in ONE process on the
# same parameters, in alternating blocks (compile_peak.py --modes pair), each
# process alone on the GPU after all have compiled: the host's speed varies
# up to 2x between processes of one call (traces/measurements/compile), so
# separately measured eager and compiled steps do not give the change. Then
# launch_cost.py --train: the host cost per kernel of a small CNN's training
# step, eager and compiled, on the same host.
#   scripts/device_compile_pair.sh OUT
# OUT: pair/ (device_compile.sh's output), launch_cost.json and its log.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
BARRIER=1 MODES=pair RECIPE="" SKIP_BUILD=1 STEPS=${STEPS:-5} ROUNDS=${ROUNDS:-4} \
	DEADLINE_S=${DEADLINE_S:-400} PYTHON="$py" ZERO_GRAD=before-forward \
	MODELS=${MODELS:-"resnet18 vgg11 resnet50 vit_b_16 densenet121 mobilenet_v2 mobilenet_v3_large efficientnet_b0"} \
	bash scripts/device_compile.sh "$OUT/pair" | tail -3
"$py" capture/torch/launch_cost.py --train --json "$OUT/launch_cost.json" > "$OUT/launch_cost.log" 2>&1
echo "launch_cost rc $?"
