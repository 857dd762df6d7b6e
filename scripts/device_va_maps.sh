#!/usr/bin/env bash
# device_va_maps.sh: what else lies in the address space between PyTorch's
# segments, and when it came (docs/policies.md, "Synthetic addresses"):
# truth runs (as shared/data/torch-allocator-truth: 3 steps,
# cudnn.benchmark on) with train_torch.py --maps (a thread logs every change
# of /proc/self/maps), and the same runs without it (does the watching
# move the segments?), 4 processes at a time; then the driver alone
# (capture/tests/va_probe.cu with VA_PROBE_MAPS): its reuse, bottom and
# interleave sequences and the watched runs' segment calls replayed
# (scripts/va_replay.py). Packs after every phase:
#   scripts/device_va_maps.sh OUTDIR      (from the repository root)
# Environment: RUNS ("MODEL:BATCH ...").
. "$(dirname "$0")/device_common.sh"; device_start "$@"
device_work vamaps
runs=${RUNS:-"resnet18:160 resnet18:16 mobilenet_v2:32 resnet50:64"}
note "phase maps"
device_truth_runs "$W/maps" "$runs" --maps "$W/maps/{}-default.maps.gz"
pack
note "phase plain"
device_truth_runs "$W/plain" "$runs"
pack
note "phase probe"
mkdir -p "$W/probe"
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
if "$nvcc" -O2 -o /tmp/va_probe_maps capture/tests/va_probe.cu -lcuda -ldl; then
	for s in reuse bottom interleave; do
		VA_PROBE_MAPS=$W/probe/$s.maps /tmp/va_probe_maps "$s" "$W/probe/probe.tsv"
	done
	"$py" scripts/va_replay.py "$W/probe" "$W"/maps/*.trace.gz
	for r in "$W"/probe/*.replay; do
		VA_PROBE_MAPS=${r%.replay}.maps timeout 60 /tmp/va_probe_maps "replay:$r" "$W/probe/probe.tsv"
	done
	gzip -f "$W"/probe/*.maps
fi
note "phase probe done"
note done
pack
