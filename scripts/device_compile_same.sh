#!/usr/bin/env bash
# device_compile_same.sh: issue 16's step times with the capture and the
# real steps on one host in one call: the eager captures again, alone on
# the host (device_recapture.sh), then eager and compiled in one process per
# model (device_compile.sh MODES=pair), then launch_cost.py --train if time
# is left. A host's speed differs up to 1.6x between device calls (the same
# launch_cost programs), so a capture from one call and real steps from
# another do not test a step-time model.
#   scripts/device_compile_same.sh OUT
# OUT: rc/ (device_recapture.sh's), pair/ (device_compile.sh's),
# launch_cost.json and its log. Environment: MODELS, BATCHES (32), PYTHON.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
T0=$(date +%s)
left() { echo $((${DEADLINE_S:-570} - ($(date +%s) - T0))); }
export MODELS=${MODELS:-"resnet18 vgg11 resnet50 mobilenet_v2 mobilenet_v3_large efficientnet_b0 densenet121 vit_b_16"}
export BATCHES=${BATCHES:-32}
LAUNCH_COST=0 DEADLINE_S=250 PYTHON="$py" bash scripts/device_recapture.sh "$OUT/rc" | tail -3
BARRIER=1 MODES=pair RECIPE="" SKIP_BUILD=1 STEPS=5 ROUNDS=4 DEADLINE_S=$(($(left) - 20)) \
	BARRIER_TIMEOUT=200 PYTHON="$py" ZERO_GRAD=before-forward \
	bash scripts/device_compile.sh "$OUT/pair" | tail -3
if [ "$(left)" -gt 60 ]; then
	timeout $(($(left) - 5)) "$py" capture/torch/launch_cost.py --train-only --iters 40 \
		--json "$OUT/launch_cost.json" > "$OUT/launch_cost.log" 2>&1
	echo "launch_cost rc $?"
fi
