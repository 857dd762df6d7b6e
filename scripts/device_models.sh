#!/usr/bin/env bash
# device_models.sh: captures and ground truth of torchvision models for the
# accuracy issues, in one device call, packing into OUT after every run so a
# call cut short still returns what it made.
#
#   scripts/device_models.sh OUT
#
# Phases (PHASES, default "recipe timing"):
#   recipe  capture/torch/recipe.sh MODEL BATCH for each of RECIPE
#           ("mobilenet_v2:16 ..."): the no-caching capture with markers and
#           the caching allocator's own record (validate torch-truth,
#           scripts/whatif_accuracy.sh)
#   timing  for each of TIMING ("resnet18:32 ..."): step times of the same
#           steps uncaptured with caching, uncaptured without caching,
#           captured with caching, and captured without caching (when the
#           recipe phase did not make it), all on this host in this call
#           (issue 15's table)
# OUT gets recipes.tgz (every recipe run, repacked after each), timing.tsv,
# timing-MODEL.tgz per model (its traces and logs), timeline.txt (with the
# environment first): at most 7 files, the device tool returns 8. DEADLINE_S (540): a run is
# started only when its estimate fits before it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
T0=$(date +%s)
deadline=${DEADLINE_S:-540}
phases=" ${PHASES:-recipe timing} "
bin=${GPUMEMSIM:-$root/build/gpumemsim}
W=${WORK_DIR:-/tmp/models}
RECIPE=${RECIPE:-"mobilenet_v2:16 mobilenet_v2:32 mobilenet_v2:64 mobilenet_v2:128 densenet121:16 densenet121:32 densenet121:64 densenet121:128"}
TIMING=${TIMING:-"resnet18:32 resnet18:128 resnet50:32 resnet50:128 mobilenet_v2:32 mobilenet_v2:128 densenet121:32 densenet121:128"}
mkdir -p "$W"
# a fresh machine has no build: make it as the other device scripts do
# (device_build packs and exits when it fails; its log goes to $W)
pack() { (cd "$W" && tar -czf "$OUT/recipes.tgz" . 2>/dev/null); }
[ -n "${GPUMEMSIM:-}" ] || device_build
export PYTHONUNBUFFERED=1
left() { echo $((deadline - ($(date +%s) - T0))); }
log() { printf '%s\t+%ss\t%s\n' "$(date +%s)" $(($(date +%s) - T0)) "$*" >> "$OUT/timeline.txt"; echo "[models +$(($(date +%s) - T0))s] $*"; }
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
	"$py" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cudnn", torch.backends.cudnn.version())'
	nproc
} > "$OUT/timeline.txt" 2>&1

if [[ $phases == *" recipe "* ]]; then
	for mb in $RECIPE; do
		m=${mb%%:*} b=${mb##*:}
		if [ "$(left)" -lt 90 ]; then log "recipe $m b$b skipped: $(left) s left"; continue; fi
		d=$W/recipe-$m-b$b
		mkdir -p "$d"
		s=$(date +%s)
		PYTHON=$py GPUMEMSIM=$bin timeout $(($(left) - 30)) bash capture/torch/recipe.sh "$m" "$b" "$d" > "$d/recipe.log" 2>&1
		rc=$?
		log "recipe $m b$b rc $rc $(($(date +%s) - s)) s"
		(cd "$W" && tar -czf "$OUT/recipes.tgz" recipe-*)
	done
fi

# one timed run: NAME MODEL BATCH CAPTURE(0/1) CACHING(0/1)
timed() {
	local name=$1 m=$2 b=$3 cap=$4 caching=$5 d=$W/timing-$2
	local j=$d/$1.json
	mkdir -p "$d"
	local envs=(env -u PYTORCH_CUDA_ALLOC_CONF)
	[ "$caching" = 1 ] && envs+=(-u PYTORCH_NO_CUDA_MEMORY_CACHING) || envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
	local run=("$py" capture/torch/train_torch.py --mode capture --model "$m" --batch "$b" --img 224 --steps 8 --warmup 3 --json "$j")
	if [ "$cap" = 1 ]; then
		"${envs[@]}" timeout $(($(left) - 20)) "$bin" capture --label workload=torch --label model="$m" --label batch="$b" \
			--label caching="$caching" -o "$d/$name.trace.gz" -- "${run[@]}" > "$d/$name.log" 2>&1
	else
		"${envs[@]}" timeout $(($(left) - 20)) "${run[@]}" > "$d/$name.log" 2>&1
	fi
	local rc=$?
	local mean
	mean=$("$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f" % (1e3 * d["mean_step_s"]))' "$j" 2> /dev/null || echo -)
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$b" "$cap" "$caching" "$mean" "$rc" >> "$OUT/timing.tsv"
	log "timing $name rc $rc mean $mean ms"
}
if [[ $phases == *" timing "* ]]; then
	printf 'model\tbatch\tcaptured\tcaching\tmean_step_ms\trc\n' > "$OUT/timing.tsv"
	for mb in $TIMING; do
		m=${mb%%:*} b=${mb##*:}
		if [ "$(left)" -lt 100 ]; then log "timing $m b$b skipped: $(left) s left"; continue; fi
		# interleaved so drift on the host touches every mode alike
		timed "$m-b$b-plain-caching" "$m" "$b" 0 1
		timed "$m-b$b-plain-nocaching" "$m" "$b" 0 0
		timed "$m-b$b-cap-caching" "$m" "$b" 1 1
		timed "$m-b$b-cap-nocaching" "$m" "$b" 1 0
		tar -czf "$OUT/timing-$m.tgz" -C "$W" "timing-$m"
	done
fi
log "done"
