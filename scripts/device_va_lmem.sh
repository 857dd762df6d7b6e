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
W=/tmp/valmem
mkdir -p "$W/probe"
T0=$SECONDS
note() { printf '%4ds %s\n' $((SECONDS - T0)) "$*" | tee -a "$W/phases.txt"; }
pack() { tar -czf "$OUT/valmem.tgz.tmp" -C /tmp valmem && mv "$OUT/valmem.tgz.tmp" "$OUT/valmem.tgz"; }
note "phase probe"
SEQS="heap_a heap_f heap_m lmem" sh capture/va_probe.sh "$W/probe" > "$W/probe/log.txt" 2>&1
note "probe rc $?"
rm -f "$W/probe/va_probe"
pack
runs=${RUNS:-"resnet18:160 resnet18:16 mobilenet_v2:128 densenet121:32 resnet50:64 alexnet:64 regnet_y_400mf:160 vgg11:32"}
for lim in ${LIMITS:-0 4096}; do
	d=$W/stack$lim
	mkdir -p "$d"
	note "phase stack limit $lim"
	for r in $runs; do
		m=${r%:*} b=${r#*:}
		extra=()
		[ "$lim" -gt 0 ] && extra=(--stack-limit "$lim")
		timeout 240 "$py" capture/torch/train_torch.py --mode truth --model "$m" --batch "$b" \
			--steps 3 --warmup 1 --outdir "$d" "${extra[@]}" > "$d/$m-b$b.log" 2>&1 &
		while [ "$(jobs -r | wc -l)" -ge 4 ]; do sleep 0.5; done
	done
	wait
	note "phase stack limit $lim done: $(ls "$d"/*.trace.gz 2>/dev/null | wc -l) traces"
	pack
done
note done
pack
