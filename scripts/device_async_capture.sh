#!/usr/bin/env bash
# device_async_capture.sh: caching-on captures under PyTorch's
# backend:cudaMallocAsync (docs/timing.md, "What an allocator setting
# costs"): is the async backend's extra step time on the host or on the
# GPU (cuDNN's benchmark picking other algorithms under another allocator)?
#
#   scripts/device_async_capture.sh OUT
#
# For each MODEL of MODELS (default regnet_y_400mf efficientnet_b0) at batch
# BATCH (default 64): 8 steps of capture/torch/train_torch.py (3 warm-up)
# under `gpumemsim capture --no-source`, into OUT/async-cap.tgz (repacked
# after each model).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work async-cap
MODELS=${MODELS:-"regnet_y_400mf efficientnet_b0"}
BATCH=${BATCH:-64}
device_build
note "built"
for m in $MODELS; do
	n=$m-b$BATCH-cap-async
	env -u PYTORCH_NO_CUDA_MEMORY_CACHING PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync timeout 100 \
		build/gpumemsim capture --no-source --label workload=torch --label model="$m" --label batch="$BATCH" \
		--label caching=1 --label alloc_conf=backend:cudaMallocAsync -o "$W/$n.trace.gz" -- \
		"$py" capture/torch/train_torch.py --mode capture --model "$m" --batch "$BATCH" --img 224 \
		--steps 8 --warmup 3 --json "$W/$n.json" > "$W/$n.log" 2>&1
	note "$n rc $?"
	pack
done
