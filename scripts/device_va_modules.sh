#!/usr/bin/env bash
# device_va_modules.sh: are the allocations outside PyTorch's allocator that
# move the driver's address placement (docs/policies.md, "Synthetic
# addresses") the CUDA driver's lazy module loads? The same truth runs
# (capture/torch/train_torch.py --mode truth: the caching allocator's own
# record with segment addresses, 3 steps, cudnn.benchmark on, as
# shared/data/torch-allocator-truth) with CUDA_MODULE_LOADING=LAZY (the
# default) and EAGER, 4 processes at a time. Packs after every phase:
#   scripts/device_va_modules.sh OUTDIR      (from the repository root)
# Environment: RUNS ("MODEL:BATCH ...").
. "$(dirname "$0")/device_common.sh"; device_start "$@"
device_work vamod
runs=${RUNS:-"resnet18:16 resnet18:160 alexnet:64 regnet_y_400mf:160 mobilenet_v2:32 densenet121:32 resnet50:64 vgg11:32"}
for mode in LAZY EAGER LAZY2; do
	note "phase $mode"
	CUDA_MODULE_LOADING=${mode%2} device_truth_runs "$W/$mode" "$runs"
	pack
done
note done
pack
