#!/usr/bin/env bash
# device_timing_paused.sh: issue 15's step times with captures that measure
# their own cost (`capture --pause-at-step`), in one device call.
#
#   scripts/device_timing_paused.sh OUT
#
# For each MODEL:BATCH of RUNS (default the four models of
# traces/timing/h200 at 32 and 128), interleaved on this host: the same
# STEPS+PAUSED training steps (3 warm-up) of capture/torch/train_torch.py
#   MODEL-bB-plain-caching     uncaptured, caching allocator on
#   MODEL-bB-plain-nocaching   uncaptured, PYTORCH_NO_CUDA_MEMORY_CACHING=1
#   MODEL-bB-cap-caching       captured for STEPS steps, then paused
#   MODEL-bB-cap-nocaching     the same without caching
# MODES (default all four: plain-caching plain-nocaching cap-caching
# cap-nocaching) picks which of them run.
# Captures use `--pause-at-step STEPS` (default 8): their last PAUSED
# (default 5) steps run with the capture off, as `r ... uncaptured` ranges;
# and CAPTURE_OPTS (default --no-source, the README's advice for step-time
# captures; traces/timing/paused was made before, with the source on: set
# CAPTURE_OPTS= to repeat it).
# PIN (a taskset CPU list; scripts/device_cpu_scan.sh finds the fast ones)
# pins every run; a model starts only with enough of DEADLINE_S (default
# 560 s) left.
# OUT gets timing.tsv (model batch captured caching mean_ms rc, the mean of
# steps 3..STEPS-1; for captures also the mean of the paused steps), one
# timing-paused.tgz (traces, step-time JSONs, logs; repacked after every
# model) and phases.txt. A trace without uncaptured ranges stops the call
# after the first model (the pause did not work: nothing else to learn).
# Needs build/gpumemsim and build/libgpumemsim_capture.so (built here when
# missing: carry .devdeps).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work timing-paused
RUNS=${RUNS:-"resnet18:32 mobilenet_v2:32 resnet50:32 densenet121:32 resnet18:128 mobilenet_v2:128 resnet50:128 densenet121:128"}
STEPS=${STEPS:-8}
PAUSED=${PAUSED:-5}
CAPTURE_OPTS=${CAPTURE_OPTS---no-source}
MODES=${MODES:-"plain-caching plain-nocaching cap-caching cap-nocaching"}
bin=$root/build/gpumemsim
# PIN: a taskset CPU list every run is pinned to (device_pin)
device_pin
export PYTHONUNBUFFERED=1
device_torch_env
device_build
note "built"

# one run: NAME MODEL BATCH CAPTURED(0/1) CACHING(0/1)
timed() {
	local name=$1 m=$2 b=$3 cap=$4 caching=$5 d=$W/$2-b$3
	local j=$d/$name.json rc
	mkdir -p "$d"
	local envs=(env -u PYTORCH_CUDA_ALLOC_CONF)
	[ "$caching" = 1 ] && envs+=(-u PYTORCH_NO_CUDA_MEMORY_CACHING) || envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
	local run=("$py" capture/torch/train_torch.py --mode capture --model "$m" --batch "$b" --img 224
		--steps $((STEPS + PAUSED)) --warmup 3 --json "$j")
	if [ "$cap" = 1 ]; then
		# shellcheck disable=SC2086
		"${pin[@]}" "${envs[@]}" timeout 120 "$bin" capture --pause-at-step "$STEPS" $CAPTURE_OPTS --label workload=torch \
			--label model="$m" --label batch="$b" --label caching="$caching" \
			-o "$d/$name.trace.gz" -- "${run[@]}" > "$d/$name.log" 2>&1
	else
		"${pin[@]}" "${envs[@]}" timeout 120 "${run[@]}" > "$d/$name.log" 2>&1
	fi
	rc=$?
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$b" "$cap" "$caching" "$(step_mean_ms "$j" 3 "$STEPS")" \
		"$(step_mean_ms "$j" "$STEPS" $((STEPS + PAUSED)))" "$rc" >> "$W/timing.tsv"
	note "$name rc $rc steps 3..$((STEPS - 1)) $(step_mean_ms "$j" 3 "$STEPS") ms, $STEPS.. $(step_mean_ms "$j" "$STEPS" 99) ms"
}
printf 'model\tbatch\tcaptured\tcaching\tmean_ms\tpaused_mean_ms\trc\n' > "$W/timing.tsv"
first=1
for mb in $RUNS; do
	m=${mb%%:*} b=${mb##*:}
	if [ "$(device_left)" -lt 110 ]; then note "$m b$b skipped: $(device_left) s left"; continue; fi
	# interleaved so drift on the host touches every mode alike
	for mode in $MODES; do
		case $mode in
		plain-caching) timed "$m-b$b-$mode" "$m" "$b" 0 1 ;;
		plain-nocaching) timed "$m-b$b-$mode" "$m" "$b" 0 0 ;;
		cap-caching) timed "$m-b$b-$mode" "$m" "$b" 1 1 ;;
		cap-nocaching) timed "$m-b$b-$mode" "$m" "$b" 1 0 ;;
		*) note "unknown mode $mode" ;;
		esac
	done
	for t in "$W/$m-b$b"/*.trace.gz; do
		note "$(basename "$t"): $("$bin" trace validate "$t" 2>&1 | tail -1); $(zcat "$t" | grep -c ' uncaptured$') uncaptured ranges"
	done
	cp "$W/timing.tsv" "$OUT/timing.tsv"
	pack
	if [ $first = 1 ] && [ -f "$W/$m-b$b/$m-b$b-cap-caching.trace.gz" ] &&
		! zcat "$W/$m-b$b/$m-b$b-cap-caching.trace.gz" | grep -q ' uncaptured$'; then
		note "no uncaptured ranges: the pause did not work; stopping"
		break
	fi
	first=0
done
cp "$W/phases.txt" "$OUT/phases.txt"
pack
