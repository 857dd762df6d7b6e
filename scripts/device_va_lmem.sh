#!/usr/bin/env bash
# device_va_lmem.sh: what the driver sets aside at a kernel launch, besides
# cudaMalloc, that makes holes between PyTorch's segments (docs/policies.md,
# "Kernels' own buffers"): (1) the probe's heap_a, heap_f, heap_m (the
# printf FIFO and malloc heap at the first launch of a kernel that may call
# assert, printf or malloc) and lmem (local memory per thread growing)
# sequences; (2) truth runs (as shared/data/torch-allocator-truth: 3 steps,
# cudnn.benchmark on) with the default stack limit and with the limit
# raised before recording (train_torch.py --stack-limit), 4 processes at a
# time. Packs after every phase:
#   scripts/device_va_lmem.sh OUTDIR      (from the repository root)
# Environment: RUNS ("MODEL:BATCH ..."), LIMITS ("BYTES ...", 0 = default).
. "$(dirname "$0")/device_common.sh"; device_start "$@"
device_work valmem
mkdir -p "$W/probe"
note "phase probe"
SEQS="heap_a heap_f heap_m lmem" sh capture/va_probe.sh "$W/probe" > "$W/probe/log.txt" 2>&1
note "probe rc $?"
rm -f "$W/probe/va_probe"
pack
runs=${RUNS:-"resnet18:160 resnet18:16 mobilenet_v2:128 densenet121:32 resnet50:64 alexnet:64 regnet_y_400mf:160 vgg11:32"}
for lim in ${LIMITS:-0 4096}; do
	note "phase stack limit $lim"
	if [ "$lim" -gt 0 ]; then
		device_truth_runs "$W/stack$lim" "$runs" --stack-limit "$lim"
	else
		device_truth_runs "$W/stack$lim" "$runs"
	fi
	pack
done
note done
pack
