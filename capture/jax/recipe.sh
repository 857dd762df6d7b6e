#!/usr/bin/env bash
# recipe.sh: capture a JAX/flax CNN's training for gpumemsim and record XLA's
# BFC allocator on the same program as ground truth (capture/jax/README.md).
#
#   capture/jax/recipe.sh MODEL BATCH OUTDIR [PARTS]
#
# PARTS, comma-separated (default capture,truth):
#   capture   XLA_PYTHON_CLIENT_ALLOCATOR=platform under `gpumemsim capture`:
#             OUTDIR/jax-MODEL-bBATCH.trace.gz (+ .capture.json): the request stream,
#             with the sizes XLA asked for: XLA's allocator log of the run
#             (OUTDIR/jax-MODEL-bBATCH.xla.log.gz, TF_CPP_VMODULE=cuda_device_allocator=3)
#             put in by `gpumemsim import xla-sizes` (CUPTI sees 2 MiB granules)
#   truth     XLA_PYTHON_CLIENT_PREALLOCATE=false (BFC, allow_growth) under
#             capture: OUTDIR/truth/jax-MODEL-bBATCH-growth.trace.gz (the BFC's
#             own device allocations: its regions) + .json (memory_stats)
#   nvml      the growth run again without capture (CUPTI takes device memory
#             of its own): OUTDIR/truth/jax-MODEL-bBATCH-growth.nvml.json with the
#             device-level used memory; run it alone on the GPU
#   prealloc  JAX's default (75% preallocated), no capture:
#             OUTDIR/truth/jax-MODEL-bBATCH-prealloc.json
# Environment: STEPS (3), IMAGE (32), WIDTH (64), PYTHON (python3),
# GPUMEMSIM (build/gpumemsim), AUTOTUNE=1 to leave XLA's autotuning on.
set -euo pipefail

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
	echo "usage: $0 MODEL BATCH OUTDIR [capture,truth,nvml,prealloc]" >&2
	exit 2
fi
model=$1 batch=$2 outdir=$3 parts=,${4:-capture,truth},
case $batch in ''|*[!0-9]*) echo "recipe: BATCH '$batch' is not a number" >&2; exit 2;; esac
case $model in resnet|cnn) ;; *) echo "recipe: MODEL '$model' is not resnet or cnn" >&2; exit 2;; esac
case $parts in *[!a-z,]*) echo "recipe: PARTS '$4' is not a list of capture,truth,nvml,prealloc" >&2; exit 2;; esac

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${GPUMEMSIM:-$root/build/gpumemsim}
py=${PYTHON:-python3}
steps=${STEPS:-3} image=${IMAGE:-32} width=${WIDTH:-64}
mkdir -p "$outdir/truth"
outdir=$(cd "$outdir" && pwd)
name=jax-$model-b$batch
common=(--model "$model" --batch "$batch" --image "$image" --width "$width" --steps "$steps")
[ "${AUTOTUNE:-0}" = 1 ] && common+=(--autotune)
labels=(--label workload=jax --label model="$model" --label batch="$batch"
	--label image="$image" --label width="$width" --label steps="$steps")

need_bin() {
	if [ ! -x "$bin" ]; then
		echo "recipe: $bin not built (make; make capture)" >&2
		exit 1
	fi
}

if [[ $parts == *,capture,* ]]; then
	need_bin
	echo "recipe: capture (platform allocator) $name -> $outdir/$name.trace.gz" >&2
	# XLA logs to stderr: the log goes to a file (the other lines to stderr);
	# the capture as CUPTI saw it, then with XLA's requested sizes
	xlalog=$outdir/$name.xla.log
	raw=$outdir/$name.captured.trace.gz
	rc=0
	TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=cuda_device_allocator=3 \
		"$bin" capture "${labels[@]}" --label alloc=platform -o "$raw" -- \
		"$py" "$here/train_jax.py" --alloc platform "${common[@]}" \
		--json "$outdir/$name.capture.json" 2> "$xlalog" || rc=$?
	grep -v -E '^[IWE][0-9]{4} ' "$xlalog" >&2 || true
	gzip -f "$xlalog"
	[ "$rc" = 0 ] || { echo "recipe: capture of $name failed ($rc)" >&2; exit "$rc"; }
	"$bin" import xla-sizes --log "$xlalog.gz" "$raw" -o "$outdir/$name.trace.gz"
	rm -f "$raw"
fi
if [[ $parts == *,truth,* ]]; then
	need_bin
	echo "recipe: truth (BFC, allow_growth) $name -> $outdir/truth/$name-growth.*" >&2
	"$bin" capture "${labels[@]}" --label alloc=growth -o "$outdir/truth/$name-growth.trace.gz" -- \
		"$py" "$here/train_jax.py" --alloc growth "${common[@]}" \
		--json "$outdir/truth/$name-growth.json"
fi
if [[ $parts == *,nvml,* ]]; then
	echo "recipe: device-level memory (BFC, allow_growth, no capture) $name" >&2
	"$py" "$here/train_jax.py" --alloc growth "${common[@]}" \
		--json "$outdir/truth/$name-growth.nvml.json"
fi
if [[ $parts == *,prealloc,* ]]; then
	echo "recipe: default preallocation $name" >&2
	"$py" "$here/train_jax.py" --alloc prealloc "${common[@]}" \
		--json "$outdir/truth/$name-prealloc.json"
fi
