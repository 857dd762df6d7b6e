#!/usr/bin/env bash
# recipe.sh: capture a torchvision model's training for gpumemsim, and record
# the caching allocator's own behaviour on the same steps as ground truth.
#
#   capture/torch/recipe.sh MODEL BATCH OUTDIR
#
# Writes into OUTDIR:
#   torch-MODEL-bBATCH.trace.gz       CUPTI capture, PYTORCH_NO_CUDA_MEMORY_CACHING=1,
#                                     then given the truth run's empty_cache() calls
#                                     (gpumemsim import torch-markers; docs/markers.md)
#   torch-MODEL-bBATCH.capture.json   step times of that run
#   MODEL-bBATCH-CONF.trace.gz/.json  allocator trace + memory_stats (caching on),
#                                     the layout of shared/data/torch-allocator-truth
# Environment: STEPS (5), WARMUP (2), IMG (224), IMG_SIZES (none: every step
#   IMG; a list such as 160,224,320: each step the next size), PYTHON (python3),
#   GPUMEMSIM (build/gpumemsim), PYTORCH_CUDA_ALLOC_CONF and FRACTION (1.0)
#   for the truth run only, SKIP_CAPTURE=1 / SKIP_TRUTH=1 to run one half.
set -euo pipefail

if [ $# -ne 3 ]; then
	echo "usage: $0 MODEL BATCH OUTDIR  (e.g. resnet18 64 out/)" >&2
	exit 2
fi
model=$1 batch=$2 outdir=$3
case $batch in ''|*[!0-9]*) echo "recipe: BATCH '$batch' is not a number" >&2; exit 2;; esac
case $model in ''|*[!A-Za-z0-9_]*) echo "recipe: MODEL '$model' is not a torchvision name" >&2; exit 2;; esac

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${GPUMEMSIM:-$root/build/gpumemsim}
py=${PYTHON:-python3}
steps=${STEPS:-5} warmup=${WARMUP:-2} img=${IMG:-224} fraction=${FRACTION:-1.0}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
common=(--model "$model" --batch "$batch" --img "$img" --steps "$steps" --warmup "$warmup")
# multi-scale training: IMG_SIZES=160,224,320 gives each step its own input size
if [ -n "${IMG_SIZES:-}" ]; then common+=(--img-sizes "$IMG_SIZES"); fi
capjson=$outdir/torch-$model-b$batch.capture.json

if [ "${SKIP_CAPTURE:-0}" != 1 ]; then
	if [ ! -x "$bin" ]; then
		echo "recipe: $bin not built (make; make capture)" >&2
		exit 1
	fi
	echo "recipe: capture $model batch $batch -> $outdir/torch-$model-b$batch.trace.gz" >&2
	# The allocator conf is for the truth run; the capture sees raw tensors.
	env -u PYTORCH_CUDA_ALLOC_CONF PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
		"$bin" capture --label workload=torch --label model="$model" \
		--label batch="$batch" -o "$outdir/torch-$model-b$batch.trace.gz" -- \
		"$py" "$here/train_torch.py" --mode capture "${common[@]}" --json "$capjson"
fi

if [ "${SKIP_TRUTH:-0}" != 1 ]; then
	echo "recipe: truth (caching allocator${PYTORCH_CUDA_ALLOC_CONF:+, $PYTORCH_CUDA_ALLOC_CONF}) -> $outdir" >&2
	env -u PYTORCH_NO_CUDA_MEMORY_CACHING "$py" "$here/train_torch.py" --mode truth \
		"${common[@]}" --fraction "$fraction" --outdir "$outdir" --capture-json "$capjson"
fi

# The capture cannot see the emptyCache() PyTorch calls after each cuDNN
# benchmark search (a C++ call, no CUDA API); the truth run records them.
# Copy them into the capture so a `pytorch` replay releases the search
# workspaces as the real allocator did (docs/markers.md).
if [ "${SKIP_MARKERS:-0}" != 1 ]; then
	conf=${PYTORCH_CUDA_ALLOC_CONF:-}
	name=default
	[ -n "$conf" ] && name=$(printf '%s' "$conf" | tr ':,' '_-')
	if awk -v f="$fraction" 'BEGIN { exit !(f < 1.0) }'; then
		name="$name-frac$(printf '%g' "$fraction")"
	fi
	cap=$outdir/torch-$model-b$batch.trace.gz
	truth=$outdir/$model-b$batch-$name.trace.gz
	if [ ! -f "$cap" ] || [ ! -f "$truth" ]; then
		echo "recipe: markers skipped: need both $cap and $truth" >&2
	elif [ "$("$bin" trace cat "$cap" | grep -c '^L empty_cache_markers=' || true)" != 0 ]; then
		echo "recipe: markers: $cap already has them" >&2
	else
		echo "recipe: markers: $truth -> $cap" >&2
		tmp=$outdir/.torch-$model-b$batch.markers.$$.gz
		"$bin" import torch-markers --truth "$truth" "$cap" -o "$tmp"
		mv -f "$tmp" "$cap"
	fi
fi
