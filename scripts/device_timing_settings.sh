#!/usr/bin/env bash
# device_timing_settings.sh: what an allocator setting costs in step time
# (users' question 8; issue 15's map/unmap and pool costs), in one device
# call.
#
#   scripts/device_timing_settings.sh OUT
#
# 1. traces/timing/vmm_cost.cu (expandable segments' page calls, the
#    stream-ordered pool's calls) and traces/timing/torch_alloc_cost.py
#    under PyTorch's native allocator, expandable segments and
#    backend:cudaMallocAsync: costs/*.tsv.
# 2. For each MODEL:BATCH:FRACTION of RUNS, interleaved on this host, the
#    same STEPS+PAUSED training steps (3 warm-up) of
#    capture/torch/train_torch.py:
#      MODEL-bB-cap-nocaching   the capture the predictions are made from
#                               (`capture --pause-at-step STEPS --no-source`)
#      MODEL-bB-default         uncaptured, caching allocator as shipped
#      MODEL-bB-expandable      expandable_segments:True
#      MODEL-bB-async           backend:cudaMallocAsync
#      MODEL-bB-gc              garbage_collection_threshold:0.6 with
#                               set_per_process_memory_fraction(FRACTION)
#    FRACTION is 1.3 x the model's peak allocated over the device (from
#    traces/timing/heldout's captures): the garbage collector runs each step.
# PIN (a taskset CPU list; scripts/device_cpu_scan.sh finds the fast ones)
# pins every run; a model starts only with enough of DEADLINE_S (default
# 560 s) left.
# OUT gets timing.tsv (model batch setting mean_ms rc: the mean of steps
# 3..STEPS-1), timing-settings.tgz (repacked after every model) and
# phases.txt. Needs nvcc and build/gpumemsim with the capture library (built
# here when missing: carry .devdeps).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work timing-settings
RUNS=${RUNS:-"efficientnet_b0:64:0.0592 regnet_y_400mf:64:0.0246 vgg11:64:0.0581 vit_b_16:32:0.0461"}
STEPS=${STEPS:-8}
PAUSED=${PAUSED:-5}
bin=$root/build/gpumemsim
# PIN: a taskset CPU list every run is pinned to (device_pin)
device_pin
export PYTHONUNBUFFERED=1
device_torch_env
device_build
note "built"

mkdir -p "$W/costs"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if "$NVCC" -O2 -o "$W/vmm_cost" traces/timing/vmm_cost.cu -lcuda >> "$W/build.log" 2>&1; then
	for r in 1 2; do
		timeout 90 "$W/vmm_cost" --reps 100 > "$W/costs/vmm-$r.tsv" 2>> "$W/errors.log"
		note "vmm-$r rc $?"
	done
else
	note "nvcc vmm_cost failed"
fi
for conf in native expandable_segments:True backend:cudaMallocAsync; do
	c=$conf; [ "$conf" = native ] && c=
	env -u PYTORCH_NO_CUDA_MEMORY_CACHING PYTORCH_CUDA_ALLOC_CONF="$c" timeout 90 "$py" \
		traces/timing/torch_alloc_cost.py 500 > "$W/costs/torch-${conf%%:*}.tsv" 2>> "$W/errors.log"
	note "torch_alloc_cost $conf rc $?"
done
pack

# one run: NAME MODEL BATCH SETTING [FRACTION]
timed() {
	local name=$1 m=$2 b=$3 set=$4 frac=${5:-1} d=$W/$2-b$3 rc
	local j=$d/$name.json
	mkdir -p "$d"
	local envs=(env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_NO_CUDA_MEMORY_CACHING)
	case $set in
	cap-nocaching) envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1) ;;
	expandable) envs+=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) ;;
	async) envs+=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) ;;
	gc) envs+=(PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6) ;;
	esac
	local run=("$py" capture/torch/train_torch.py --mode capture --model "$m" --batch "$b" --img 224
		--steps $((STEPS + PAUSED)) --warmup 3 --json "$j")
	[ "$set" = gc ] && run+=(--fraction "$frac")
	if [ "$set" = cap-nocaching ]; then
		"${pin[@]}" "${envs[@]}" timeout 120 "$bin" capture --pause-at-step "$STEPS" --no-source --label workload=torch \
			--label model="$m" --label batch="$b" --label caching=0 \
			-o "$d/$name.trace.gz" -- "${run[@]}" > "$d/$name.log" 2>&1
	else
		"${pin[@]}" "${envs[@]}" timeout 120 "${run[@]}" > "$d/$name.log" 2>&1
	fi
	rc=$?
	[ "$set" = gc ] || frac=1
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$b" "$set" "$frac" "$(step_mean_ms "$j" 3 "$STEPS")" "$rc" >> "$W/timing.tsv"
	note "$name rc $rc steps 3..$((STEPS - 1)) $(step_mean_ms "$j" 3 "$STEPS") ms"
}
printf 'model\tbatch\tsetting\tfraction\tmean_ms\trc\n' > "$W/timing.tsv"
for r in $RUNS; do
	IFS=: read -r m b frac <<< "$r"
	if [ "$(device_left)" -lt 90 ]; then note "$m b$b skipped: $(device_left) s left"; continue; fi
	for set in cap-nocaching default expandable async gc; do
		timed "$m-b$b-$set" "$m" "$b" "$set" "$frac"
	done
	t=$W/$m-b$b/$m-b$b-cap-nocaching.trace.gz
	[ -f "$t" ] && note "$(basename "$t"): $("$bin" trace validate "$t" 2>&1 | tail -1)"
	cp "$W/timing.tsv" "$OUT/timing.tsv"
	pack
done
cp "$W/phases.txt" "$OUT/phases.txt"
pack
