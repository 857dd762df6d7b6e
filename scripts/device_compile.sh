#!/usr/bin/env bash
# device_compile.sh: issue 16's GPU-host run in one device call: eager vs
# torch.compile peak memory and step time (capture/torch/compile_peak.py) for
# torchvision models of several families, and the eager captures (recipe.sh)
# `whatif compile` predicts from, packing into OUT after every run.
#
#   scripts/device_compile.sh OUT
#
# Compilation is host work and slow (about a minute per model and batch), so
# the compile_peak processes of all models start at once on cores 4-15; every
# GPU measurement and every capture takes one lock (flock), so each runs
# alone on the GPU, the captures on cores 0-3.
# OUT: env.txt, timeline.txt, build.log, compile.tgz (one json and log per
# model), recipes.tgz (recipe-MODEL-bBATCH/ per capture).
# Environment: BARRIER=1 (step times: one process per model, batch and
# mode; every process waits until all are
# compiled, then each measures alone on the GPU with no compilation on the
# host; COMPILE_THREADS (4) Inductor workers per process), SNAPSHOT ("MODEL ..."
# whose batch-32 steps also record the allocator's memory history,
# snapshots.tgz), ZERO_GRAD (after-forward: the captured program's order,
# or before-forward), MODES ("eager compile": with BARRIER=1, which to run;
# "pair": step times of both in one process), STEPS (3), ROUNDS (4, pair), WARMUP (3), MODELS ("vgg11 resnet50 densenet121 mobilenet_v2
# mobilenet_v3_large efficientnet_b0 vit_b_16"), BATCHES ("32 64"),
# RECIPE ("MODEL:BATCH ...", the captures to make), DEADLINE_S (540),
# PYTHON (python3), WORK_DIR (/tmp/compile), SKIP_BUILD=1 (build/ is there).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
T0=$(date +%s)
deadline=${DEADLINE_S:-540}
W=${WORK_DIR:-/tmp/compile}
MODELS=${MODELS:-"vgg11 resnet50 densenet121 mobilenet_v2 mobilenet_v3_large efficientnet_b0 vit_b_16"}
BATCHES=${BATCHES:-"32 64"}
RECIPE=${RECIPE-"vit_b_16:32 efficientnet_b0:32 mobilenet_v3_large:32 vgg11:32 vit_b_16:64 efficientnet_b0:64 mobilenet_v3_large:64 vgg11:64"}
LOCK=$W/gpu.lock
rm -rf "$W"
mkdir -p "$W/compile" || exit 1
: > "$LOCK"
export PYTHONUNBUFFERED=1
left() { echo $((deadline - ($(date +%s) - T0))); }
log() { printf '%s\t+%ss\t%s\n' "$(date +%s)" $(($(date +%s) - T0)) "$*" >> "$OUT/timeline.txt"; echo "[compile +$(($(date +%s) - T0))s] $*"; }
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
	"$py" -c 'import torch, torchvision, triton; print("torch", torch.__version__, "torchvision", torchvision.__version__, "triton", triton.__version__, "cudnn", torch.backends.cudnn.version())'
	nproc
} > "$OUT/env.txt" 2>&1
: > "$OUT/timeline.txt"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
	device_devdeps
fi

# The compile runs start first: they need the host for a minute before their
# first GPU measurement, while the build and the captures go on.
pids=()
nm=$(echo $MODELS | wc -w)
# BARRIER=1: one process per model and batch compiles and one per model runs
# eager (so each holds one model: its memory figures stand too); all wait
# until every one is compiled, so no compilation slows the host of a
# measured step (step times); without it, measurements start as soon as a
# model is compiled (memory)
start() { # NAME ARGS...: one compile_peak process writing compile/NAME.json
	local name=$1 snap=() logs=${TORCH_LOGS:-}
	shift
	# a snapshot's Python frames name lines of Inductor's generated code: log it
	case " ${SNAPSHOT:-} " in *" ${name%%.*} "*) snap=(--snapshot "$W/snapshots") logs=output_code;; esac
	env ${logs:+TORCH_LOGS=$logs} taskset -c $cores timeout $(($(left) - 25)) "$py" capture/torch/compile_peak.py \
		--steps "${STEPS:-3}" --warmup "${WARMUP:-3}" --gpu-lock "$LOCK" "${snap[@]}" \
		--zero-grad "${ZERO_GRAD:-after-forward}" --rounds "${ROUNDS:-4}" \
		"$@" --json "$W/compile/$name.json" > "$W/compile/$name.log" 2>&1 &
	pids+=($!)
}
if [ "${BARRIER:-0}" = 1 ]; then
	cores=0-15
	export TORCHINDUCTOR_COMPILE_THREADS=${COMPILE_THREADS:-4}
	# one process per model, batch and mode: a process prepares its models
	# before the barrier, and a second one would be live while it measures
	modes=${MODES:-eager compile}
	n=$((nm * $(echo $BATCHES | wc -w) * $(echo $modes | wc -w)))
	bar=(--barrier "$W/barrier" --barrier-n "$n" --barrier-timeout "${BARRIER_TIMEOUT:-280}")
	for m in $MODELS; do
		for b in $BATCHES; do
			for mode in $modes; do
				start "$m.$mode$b" --model "$m" --batch "$b" --modes "$mode" "${bar[@]}"
			done
		done
	done
else
	cores=4-15
	for m in $MODELS; do start "$m" --model "$m" --batch $BATCHES; done
fi
log "compile_peak started for: $MODELS"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
	s=$(date +%s)
	taskset -c 0-3 bash -c 'make -j4 && make capture' > "$OUT/build.log" 2>&1
	log "build rc $? $(($(date +%s) - s)) s"
fi

for mb in $RECIPE; do
	m=${mb%%:*} b=${mb##*:}
	if [ "$(left)" -lt 80 ]; then log "recipe $m b$b skipped: $(left) s left"; continue; fi
	d=$W/recipe-$m-b$b
	mkdir -p "$d"
	s=$(date +%s)
	# take the lock for the whole recipe: capture and truth run alone on the GPU
	flock "$LOCK" taskset -c 0-3 timeout $(($(left) - 30)) env PYTHON="$py" GPUMEMSIM="$root/build/gpumemsim" \
		bash capture/torch/recipe.sh "$m" "$b" "$d" > "$d/recipe.log" 2>&1
	log "recipe $m b$b rc $? $(($(date +%s) - s)) s"
	(cd "$W" && tar -czf "$OUT/recipes.tgz" recipe-*)
	(cd "$W" && tar -czf "$OUT/compile.tgz" compile)
	sleep 2 # let a waiting measurement take the lock
done

# pack what the measurements wrote so far, every 20 s, until they end
while kill -0 "${pids[@]}" 2> /dev/null; do
	sleep 20
	(cd "$W" && tar -czf "$OUT/compile.tgz.tmp" compile && mv -f "$OUT/compile.tgz.tmp" "$OUT/compile.tgz")
	log "$(ls "$W/barrier" 2> /dev/null | wc -l) at the barrier, $(grep -h "compile_peak:" "$W"/compile/*.log 2> /dev/null | wc -l) measured"
done
for p in "${pids[@]}"; do wait "$p"; done
log "compile_peak done"
(cd "$W" && tar -czf "$OUT/compile.tgz" compile)
[ -d "$W/snapshots" ] && (cd "$W" && tar -czf "$OUT/snapshots.tgz" snapshots)
grep -h "compile_peak:" "$W"/compile/*.log >> "$OUT/timeline.txt"
log "done"
