#!/usr/bin/env bash
# device_pause_cost.sh: what a paused capture still costs (docs/timing.md,
# "Measured in the capture itself"), in one device call.
#
#   scripts/device_pause_cost.sh OUT
#
# For each MODEL:BATCH:CACHING of RUNS, ROUNDS rounds of: an uncaptured run,
# then one capture per line of CONFIGS ("NAME capture options", `_` for a
# space), each paused at step PAUSE of STEPS training steps (3 warm-up).
# The steps from PAUSE on are uncaptured in every process: plain ones by
# construction, captured ones by the pause. If a paused step still costs
# more than a plain one, the configs that differ only in what was enabled
# before the pause say what leaves the cost behind.
# OUT gets steps.tsv (run model batch caching round config step ms) and
# pause-cost.tgz (JSONs, logs, traces), repacked after every round.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work pause-cost
RUNS=${RUNS:-"resnet18:32:0 densenet121:32:1"}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-12}
PAUSE=${PAUSE:-4}
CONFIGS=${CONFIGS:-"default -
nosource --no-source
nomemory --record_kernels,copies,syncs,nvtx
minimal --record_nvtx_--api_off_--no-links"}
bin=$root/build/gpumemsim
export PYTHONUNBUFFERED=1 GPUMEMSIM_CAPTURE_VERBOSE=1
device_build
note "built"
printf 'model\tbatch\tcaching\tround\tconfig\tstep\tms\n' > "$W/steps.tsv"
# one run: MODEL BATCH CACHING ROUND CONFIG [capture options...]
one() {
	local m=$1 b=$2 caching=$3 r=$4 cfg=$5 d=$W/$1-b$2-c$3
	shift 5
	local j=$d/r$r-$cfg.json
	mkdir -p "$d"
	local envs=(env -u PYTORCH_CUDA_ALLOC_CONF)
	[ "$caching" = 1 ] && envs+=(-u PYTORCH_NO_CUDA_MEMORY_CACHING) || envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
	local run=("$py" capture/torch/train_torch.py --mode capture --model "$m" --batch "$b" --img 224
		--steps "$STEPS" --warmup 3 --json "$j")
	if [ "$cfg" = plain ]; then
		"${envs[@]}" timeout 100 "${run[@]}" > "$d/r$r-$cfg.log" 2>&1
	else
		"${envs[@]}" timeout 100 "$bin" capture --pause-at-step "$PAUSE" "$@" \
			-o "$d/r$r-$cfg.trace.gz" -- "${run[@]}" > "$d/r$r-$cfg.log" 2>&1
	fi
	"$py" -c 'import json,sys; s=json.load(open(sys.argv[1]))["step_s"]
for i, x in enumerate(s): print("\t".join(sys.argv[2:] + [str(i), "%.3f" % (1e3 * x)]))' \
		"$j" "$m" "$b" "$caching" "$r" "$cfg" >> "$W/steps.tsv" 2>/dev/null
	note "$m b$b caching $caching round $r $cfg: paused steps $("$py" -c 'import json,sys; s=json.load(open(sys.argv[1]))["step_s"][int(sys.argv[2]):]; print("%.2f ms" % (1e3*sorted(s)[len(s)//2]))' "$j" "$PAUSE" 2>/dev/null)"
}
for r in $(seq 1 "$ROUNDS"); do
	for x in $RUNS; do
		IFS=: read -r m b caching <<< "$x"
		[ "$(device_left)" -lt 60 ] && { note "stopped: deadline"; break 2; }
		one "$m" "$b" "$caching" "$r" plain
		while read -r cfg opts; do
			[ -n "$cfg" ] || continue
			[ "$opts" = - ] && opts=
			# shellcheck disable=SC2086
			one "$m" "$b" "$caching" "$r" "$cfg" ${opts//_/ }
		done <<< "$CONFIGS"
	done
	cp "$W/steps.tsv" "$OUT/steps.tsv"
	pack
done
cp "$W/steps.tsv" "$OUT/steps.tsv"
cp "$W/phases.txt" "$OUT/phases.txt"
pack
