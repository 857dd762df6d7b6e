#!/usr/bin/env bash
# device_check.sh: on a GPU host, build build/cnn and check that both network
# families train (loss falls) under each algorithm mode; logs go to $OUT (or
# ./cnn-check). Optional second part: the PyTorch recipe's python in both
# modes (without the capture launcher) when torch is importable.
set -u
out=${OUT:-cnn-check}
mkdir -p "$out"
nvidia-smi -L 2>&1 | head -2
make -j"$(nproc)" cnn > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
b=build/cnn
run() { # NAME ARGS...
	local name=$1; shift
	local t0=$SECONDS
	timeout 90 "$b" "$@" > "$out/$name.log" 2>&1
	echo "== $name rc=$? ${SECONDS}s-$t0"
	grep -E "step .* loss|first_step_ms|peak_live|^cnn: end|error|:[0-9]+:" "$out/$name.log" | head -12
}
run r18-b32-i64 --model resnet --batch 32 --image 64 --steps 30 --print-every 5
run vgg-b32-i64-heur --model vgg --batch 32 --image 64 --steps 30 --print-every 5 --algo heuristic
run r18-b64-i224-minws --model resnet --batch 64 --image 224 --steps 6 --print-every 2 --algo min-workspace
run r18-b64-i224 --model resnet --batch 64 --image 224 --steps 6 --print-every 2
run vgg16-b32-i224 --model vgg16 --batch 32 --image 224 --steps 5 --print-every 1
grep "cnn: algo" "$out/r18-b64-i224.log" | head -8
