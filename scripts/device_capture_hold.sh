#!/usr/bin/env bash
# device_capture_hold.sh: the capture's hold for open NVTX ranges on the GPU
# host (capture/README.md, "Ordering"): a step longer than the reorder
# window's 32 s is written where it ran, not late.
#
#   scripts/device_capture_hold.sh OUT
#
# Phases, OUT/capture-hold.tgz repacked after each:
#   extra  capture/tests/gpu_extra.sh (SIGTERM, SIGKILL, several processes,
#          a 40 s step inside a run-long range, another CUPTI user)
#   dense  the multi-scale DenseNet-121 b32 capture of traces/torch/multiscale
#          again (recipe.sh, capture half only; its step 0 took 36-39 s under
#          capture and was written late with the 32 s hold), then
#          `run --steps --json` on it: which steps are late
# Environment: PYTHON (python3), DEADLINE_S (560).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work capture-hold
device_torch_env
device_devdeps
# always rebuild: a library left from an earlier call would be the old one
{ make -j16 && make capture; } > "$W/build.log" 2>&1 || { note "build failed (build.log)"; pack; exit 1; }
note "built"

sh capture/tests/gpu_extra.sh build "$W/extra" > "$W/extra.log" 2>&1
note "extra rc $? ($(tail -1 "$W/extra.log"))"
rm -f "$W"/extra/*.trace*.gz
pack

mkdir -p "$W/dense"
SKIP_TRUTH=1 STEPS=8 WARMUP=1 IMG_SIZES=160,224,288,192,320,256 \
	timeout "$(( $(device_left) - 20 ))" capture/torch/recipe.sh densenet121 32 "$W/dense" \
	> "$W/dense/recipe.log" 2>&1
note "dense rc $?"
t=$W/dense/torch-densenet121-b32.trace.gz
if [ -f "$t" ]; then
	build/gpumemsim trace validate "$t" > "$W/dense/validate.txt" 2>&1
	note "validate rc $?"
	build/gpumemsim run "$t" --policy pytorch --steps --no-db --json > "$W/dense/steps.json" 2> "$W/dense/steps.err"
	note "steps rc $?: $("$py" -c 'import json,sys; e=json.load(open(sys.argv[1]))["steps"]["each"]; print(len(e), "steps,", sum(s["late"] for s in e), "late; step 0", e[0]["time_ns"]/1e9, "s")' "$W/dense/steps.json" 2>&1)"
	cp "$t" "$OUT/" 2>/dev/null
fi
cp "$W/phases.txt" "$OUT/phases.txt"
pack
