#!/usr/bin/env bash
# device_alloc_cost.sh: the host cost of cudaMalloc / cudaFree by size on
# this GPU and driver, uncaptured and captured, and PyTorch's own part
# around them (issue 15; docs/timing.md, "Cost table").
#
#   scripts/device_alloc_cost.sh OUT
#
# ROUNDS (default 3) rounds, interleaved on one host, of:
#   plain-R.tsv           traces/timing/alloc_cost.cu, uncaptured
#   live0-R.tsv           the same without the background allocations
#   nosource-R.tsv        the same under `gpumemsim capture --no-source`
#   source-R.tsv          under `gpumemsim capture` (allocation source on)
#   torch-caching-R.tsv   traces/timing/torch_alloc_cost.py, caching on
#   torch-nocaching-R.tsv the same with PYTORCH_NO_CUDA_MEMORY_CACHING=1
# into OUT/alloc-cost.tgz (repacked after every round) with phases.txt and
# env.txt. Needs nvcc and build/gpumemsim with the capture library (built
# here when missing: carry .devdeps).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/device_common.sh"
device_start "$@"
device_work alloc-cost
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-1000}
device_torch_env
device_build
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$NVCC" -O2 -o "$W/alloc_cost" traces/timing/alloc_cost.cu >> "$W/build.log" 2>&1 || { note "nvcc failed"; pack; exit 1; }
note "built"
ac=$W/alloc_cost
for r in $(seq 1 "$ROUNDS"); do
	timeout 120 "$ac" --reps "$REPS" > "$W/plain-$r.tsv" 2>> "$W/errors.log"; note "plain-$r rc $?"
	timeout 120 "$ac" --reps "$REPS" --live 0 > "$W/live0-$r.tsv" 2>> "$W/errors.log"; note "live0-$r rc $?"
	timeout 120 build/gpumemsim capture --no-source -o "$W/nosource-$r.trace.gz" -- "$ac" --reps "$REPS" \
		> "$W/nosource-$r.tsv" 2>> "$W/errors.log"; note "nosource-$r rc $?"
	timeout 120 build/gpumemsim capture -o "$W/source-$r.trace.gz" -- "$ac" --reps "$REPS" \
		> "$W/source-$r.tsv" 2>> "$W/errors.log"; note "source-$r rc $?"
	env -u PYTORCH_NO_CUDA_MEMORY_CACHING -u PYTORCH_CUDA_ALLOC_CONF timeout 120 "$py" traces/timing/torch_alloc_cost.py "$REPS" \
		> "$W/torch-caching-$r.tsv" 2>> "$W/errors.log"; note "torch-caching-$r rc $?"
	env -u PYTORCH_CUDA_ALLOC_CONF PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 120 "$py" traces/timing/torch_alloc_cost.py "$REPS" \
		> "$W/torch-nocaching-$r.tsv" 2>> "$W/errors.log"; note "torch-nocaching-$r rc $?"
	rm -f "$W"/*.trace.gz   # the tables are what is kept; the traces only prove the capture ran
	pack
done
cp "$W/phases.txt" "$OUT/phases.txt"
pack
