#!/usr/bin/env bash
# device_compile_more.sh: issue 16's third GPU-host call: the host cost of a
# compiled program's kernel launch (capture/torch/launch_cost.py, first and
# last, on a quiet host), a second eager measurement of every model in fresh
# processes (how much an eager peak moves between runs: cuDNN's benchmark
# picks algorithms per process), and ViT-B/16's memory history.
#   scripts/device_compile_more.sh OUT
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
"$py" capture/torch/launch_cost.py --json "$OUT/launch_cost.json" > "$OUT/launch_cost.log" 2>&1
echo "launch_cost rc $?"
BARRIER=1 MODES=eager RECIPE="" SKIP_BUILD=1 STEPS=10 DEADLINE_S=250 PYTHON="$py" \
	MODELS="resnet18 vgg11 resnet50 vit_b_16 densenet121 mobilenet_v2 mobilenet_v3_large efficientnet_b0" \
	bash scripts/device_compile.sh "$OUT/eager2" | tail -3
BARRIER=1 RECIPE="" SKIP_BUILD=1 STEPS=10 DEADLINE_S=150 PYTHON="$py" SNAPSHOT=vit_b_16 \
	MODELS=vit_b_16 BATCHES=32 bash scripts/device_compile.sh "$OUT/vit" | tail -3
"$py" capture/torch/launch_cost.py --json "$OUT/launch_cost2.json" > "$OUT/launch_cost2.log" 2>&1
echo "launch_cost (again) rc $?"
